#!/usr/bin/env bash
# Load + first token, process by process: `tandem generate -n 1` against llama.cpp's `llama-completion -n 1` on
# the same GGUF file, threads and ~100-token prompt, alternating, each a fresh process (wall time from exec to
# exit, so start-up, load, prompt and one token). Prints each run and the medians.
#
#   scripts/first-token-vs-llamacpp.sh MODEL_ID [REPEATS] [THREADS]
#
# Needs target/release/tandem (cargo build --release) and target/llama.cpp/build/bin/llama-completion
# (scripts/build-llama-bench.sh builds llama-bench; then
#  target/llama.cpp/venv/bin/cmake --build target/llama.cpp/build --target llama-completion).
set -euo pipefail
model_id="${1:?usage: $0 MODEL_ID [REPEATS] [THREADS]}"
repeats="${2:-5}"
threads="${3:-2}"
tandem="${TANDEM:-target/release/tandem}"
llama="${LLAMA_COMPLETION:-target/llama.cpp/build/bin/llama-completion}"
for bin in "$tandem" "$llama"; do
    [[ -x "$bin" ]] || { echo "missing $bin (see the comment at the top of $0)" >&2; exit 1; }
done
model="$("$tandem" models path "$model_id")"
# 93 tokens with the Qwen2.5 tokenizer.
prompt="The quick brown fox jumps over the lazy dog while the farmer counts twelve eggs in each of seven boxes, \
then writes the total on a small card, checks it twice against the receipt from the market, and finally files the \
card in the drawer beside the kitchen window where the morning light falls on the old wooden table that his \
grandfather built many years ago from oak trees that grew on the hill behind the barn, next to the stream where \
the children used to swim every summer"

seconds() { # runs "$@" quietly, prints its wall time in seconds
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN {print b - a}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

ours=(); theirs=()
for ((i = 1; i <= repeats; i++)); do
    o=$(seconds "$tandem" generate -m "$model" --threads "$threads" -n 1 "$prompt")
    t=$(seconds "$llama" -m "$model" -t "$threads" -n 1 -no-cnv --no-warmup -p "$prompt")
    printf 'run %d: tandem %.2f s, llama.cpp %.2f s\n' "$i" "$o" "$t"
    ours+=("$o"); theirs+=("$t")
done
o=$(printf '%s\n' "${ours[@]}" | median)
t=$(printf '%s\n' "${theirs[@]}" | median)
printf 'median load + first token: tandem %.2f s, llama.cpp %.2f s, tandem ÷ llama.cpp %.2f×\n' "$o" "$t" "$(awk -v a="$o" -v b="$t" 'BEGIN {print a / b}')"
