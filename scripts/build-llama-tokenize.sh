#!/usr/bin/env bash
# Builds llama.cpp's `llama-tokenize`, the reference tests/it/llamacpp_tokenize.rs compares our tokenizers with, in
# scripts/build-llama-bench.sh's source and build tree (one llama.cpp checkout and build for every comparison).
#
#   scripts/build-llama-tokenize.sh [OUT_DIR]   (default: target/llama.cpp; prints the binary's path last,
#                                                OUT_DIR/build/bin/llama-tokenize, where the test looks)
#
# Idempotent: an existing binary is reused at once. LLAMA_CPP_PYTHON_VERSION picks the llama.cpp version as for
# build-llama-bench.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/llama.cpp}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
bin="$out/build/bin/llama-tokenize"
if [[ -x "$bin" ]]; then
    echo "$bin"
    exit 0
fi
# build-llama-bench.sh fetches the source and configures the tree (with the tools) on its way to a target of its
# own; llama-completion is the smallest of those, and the NESTFUL baseline uses it too.
if [[ ! -f "$out/build/build.ninja" ]]; then
    LLAMA_CPU_ISA=native "$root/scripts/build-llama-bench.sh" "$out" llama-completion >/dev/null
fi
"$out/venv/bin/cmake" --build "$out/build" --target llama-tokenize -j "$(nproc)" >/dev/null
echo "$bin"
