#!/usr/bin/env bash
# Time to a plan with a stable tool catalogue: `tandem plan` wall time (exec to exit: start-up, load, prompt,
# plan) for a first goal against a catalogue, the prompt-prefix store emptied before it, then for a second goal,
# a fresh process with the store as the first left it. Repeats the pair and prints each run's wall time, its CPU
# time (user + system, all threads) and the prompt and reused tokens `tandem plan` reports, then the medians.
#
#   scripts/time-to-plan.sh TOOLS_FILE [REPEATS] [THREADS] [MODEL]
#
# FIRSTS=N (default REPEATS): only the first N pairs empty the store and time a first goal; the others time the
# second goal again against the store the last first goal left (a slow machine spends most of a pair on the first).
# PLANS=N (default 1): plan search with N candidates (`tandem plan --plans N`).
#
# The snapshots go to a cache of their own (target/time-to-plan-cache, emptied before each pair); the model is
# read from the default model cache through TANDEM_MODELS. Needs target/release/tandem (cargo build --release)
# and /usr/bin/time.
set -euo pipefail
tools="${1:?usage: $0 TOOLS_FILE [REPEATS] [THREADS] [MODEL]}"
repeats="${2:-3}"
threads="${3:-2}"
model="${4:-qwen2.5-coder-1.5b-instruct-q4_k_m}"
tandem="${TANDEM:-target/release/tandem}"
[[ -x "$tandem" ]] || { echo "missing $tandem (cargo build --release)" >&2; exit 1; }
export TANDEM_MODELS="${TANDEM_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/models}"
export TANDEM_CACHE_DIR="${TIME_TO_PLAN_CACHE:-target/time-to-plan-cache}"
cache="$TANDEM_CACHE_DIR"
first_goal="What is the weather in Lyon, and convert 250 euros to dollars."
second_goal="Look up Ann Lee's email address and send her the current price of the AAPL stock."

run() { # one `tandem plan` process: prints "wall_s cpu_s prompt_tokens reused_tokens"
    local log times figures
    log="$(mktemp)"; times="$(mktemp)"
    /usr/bin/time -o "$times" -f "%e %U %S" \
        "$tandem" plan --planner "$model" --threads "$threads" --plans "${PLANS:-1}" --tools "$tools" "$1" >/dev/null 2>"$log" || true
    figures="$(grep -o 'prompt [0-9]* tokens ([0-9]* reused' "$log" | tr -dc '0-9 ' | xargs)"
    [[ -n "$figures" ]] || { echo "tandem plan failed:" >&2; cat "$log" >&2; exit 1; }
    read -r wall user sys <"$times"
    rm -f "$log" "$times"
    echo "$wall $(echo "$user + $sys" | bc) $figures"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
show() { # "wall cpu prompt reused" as words
    read -r wall cpu prompt reused <<<"$1"
    echo "$wall s wall, $cpu s CPU (prompt $prompt tokens, $reused reused)"
}

# The model file is verified once for this cache (a sidecar then vouches for it): do that, not counted, and bring
# the file into the page cache.
[[ -d "$cache/external" ]] || run "$first_goal" >/dev/null
firsts=(); seconds=(); first_cpu=(); second_cpu=()
firsts_wanted="${FIRSTS:-$repeats}"
for i in $(seq "$repeats"); do
    if (( i <= firsts_wanted )); then
        rm -rf "$cache/prefixes"
        first="$(run "$first_goal")"
        echo "run $i: first goal $(show "$first")"
        read -r wall cpu _ <<<"$first"; firsts+=("$wall"); first_cpu+=("$cpu")
    fi
    second="$(run "$second_goal")"
    echo "run $i: second goal $(show "$second")"
    read -r wall cpu _ <<<"$second"; seconds+=("$wall"); second_cpu+=("$cpu")
done
m() { printf '%s\n' "$@" | median; }
echo "medians: first goal $(m "${firsts[@]}") s wall, $(m "${first_cpu[@]}") s CPU (of ${#firsts[@]}); second goal $(m "${seconds[@]}") s wall, $(m "${second_cpu[@]}") s CPU (of ${#seconds[@]})"
