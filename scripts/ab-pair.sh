#!/usr/bin/env bash
# Two tandem binaries measured at the same moment: `tandem bench speed` with one thread each, binary A pinned to
# CPU 0 and binary B to CPU 1, started together, so that whatever else slows the machine (a noisy host, frequency
# changes) slows both alike. On the 2-core machines here the same binary's prefill spread over 42–76 tok/s across
# runs minutes apart, while runs side by side moved together; so compare B ÷ A in each pair, and run the pair
# both ways round (A B, then B A) to cancel any difference between the two CPUs.
#
#   scripts/ab-pair.sh BINARY_A BINARY_B [PAIRS]
#
# Environment: MODEL (default the 1.5B planner), ISA (TANDEM_CPU_ISA for both, default the CPU's own),
# PREFILL (prompt tokens, default 512), DECODE (tokens, default 16). Prints one line a pair: each binary's prefill
# and decode tok/s and B ÷ A for each. Needs taskset (util-linux) and 2 CPUs.
set -euo pipefail
a="${1:?usage: $0 BINARY_A BINARY_B [PAIRS]}"
b="${2:?usage: $0 BINARY_A BINARY_B [PAIRS]}"
pairs="${3:-3}"
model="${MODEL:-qwen2.5-coder-1.5b-instruct-q4_k_m}"
if [ "$(nproc)" -lt 2 ]; then
  echo "ab-pair: needs 2 CPUs, this machine has $(nproc)" >&2
  exit 1
fi
command -v taskset >/dev/null || { echo "ab-pair: taskset not found (Debian: util-linux)" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
speed() { # CPU BINARY OUTPUT
  env ${ISA:+TANDEM_CPU_ISA=$ISA} taskset -c "$1" "$2" bench speed -m "$model" --threads 1 \
    --prefill-tokens "${PREFILL:-512}" --decode-tokens "${DECODE:-16}" --repeats 1 >"$3" 2>&1
}
figure() { # WHAT OUTPUT
  awk -v what="$1" '$1 == what { print $2 }' "$2"
}
for i in $(seq "$pairs"); do
  speed 0 "$a" "$out/a" &
  speed 1 "$b" "$out/b" &
  wait
  for side in a b; do
    if [ -z "$(figure prefill "$out/$side")" ]; then
      echo "ab-pair: binary ${side^^} gave no figures:" >&2
      cat "$out/$side" >&2
      exit 1
    fi
  done
  pa=$(figure prefill "$out/a"); pb=$(figure prefill "$out/b")
  da=$(figure decode "$out/a"); db=$(figure decode "$out/b")
  awk -v pa="$pa" -v pb="$pb" -v da="$da" -v db="$db" 'BEGIN {
    printf "prefill A %s B %s (B/A %.3f)   decode A %s B %s (B/A %.3f)\n", pa, pb, pb / pa, da, db, db / da }'
done
