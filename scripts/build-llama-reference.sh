#!/usr/bin/env bash
# Builds the llama.cpp reference driver the family twin tests compare against (tests/it/families.rs): only
# llama.cpp's static libraries (through scripts/build-llama-bench.sh's source and build tree, so the speed
# comparison and this share one build), then scripts/llama-reference.cpp linked against them.
#
#   scripts/build-llama-reference.sh [OUT_DIR]   (default: target/llama.cpp; prints the driver's path last,
#                                                 OUT_DIR/reference/llama-reference, where the tests look)
#
# From scratch it downloads the source package and builds 74 ninja steps (llama-bench's build has 134): measured
# with `time scripts/build-llama-reference.sh DIR` on a fresh DIR, 23 min wall on 2 cores shared with four other
# builds (5 min 53 s of CPU); the second run, 0.04 s.
# Idempotent: a driver newer than its source is reused at once. LLAMA_CPP_PYTHON_VERSION picks the llama.cpp
# version as for build-llama-bench.sh; the driver is built for the machine's own instruction set.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/llama.cpp}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
source="$root/scripts/llama-reference.cpp"
bin="$out/reference/llama-reference"
if [[ -x "$bin" && "$bin" -nt "$source" ]]; then
    echo "$bin"
    exit 0
fi
# Its progress goes to stderr, so that the last line here is the driver's path alone.
LLAMA_CPU_ISA=native "$root/scripts/build-llama-bench.sh" "$out" llama >&2
vendor="$out/src/vendor/llama.cpp"
build="$out/build"
mkdir -p "$out/reference"
# ggml's CPU backend uses OpenMP when the compiler has it (GGML_OPENMP defaults on), hence -fopenmp; order matters
# for static libraries: libllama before ggml's.
c++ -O2 -std=c++17 -I"$vendor/include" -I"$vendor/ggml/include" "$source" -o "$bin.tmp" \
    "$build/src/libllama.a" "$build/ggml/src/libggml.a" "$build/ggml/src/libggml-cpu.a" \
    "$build/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl -lm
mv "$bin.tmp" "$bin"
echo "$bin"
