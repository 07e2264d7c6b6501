#!/usr/bin/env bash
# GPU speed figures: tandem (built with `--features cuda`) against llama.cpp (built here with CUDA) on the same
# files, alternating runs, medians and ratios (`tandem bench speed --device cuda --vs-llamacpp`). Needs an NVIDIA
# GPU, CUDA's toolkit (nvcc), cmake and ninja; no network.
#
#   scripts/gpu-bench.sh TANDEM LLAMA_CPP_SOURCE MODEL...
#
# LLAMA_CPP_SOURCE is llama.cpp's source tree (the one scripts/build-llama-bench.sh unpacks from PyPI's
# llama-cpp-python: target/llama.cpp/src/vendor/llama.cpp). Each MODEL is a .gguf file, or a header saved by
# `scripts/gguf-twin.py header` for a machine the weights cannot reach: it is first rebuilt into a twin with the
# same shapes and types and random weights (same cost per token, gibberish text).
# Before measuring, the GPU's greedy tokens are compared with the CPU's on one prompt. With SEQUENCES (e.g.
# SEQUENCES=4,16,64) it also decodes that many sequences together after 512 tokens each (`--sequences`) and runs
# llama.cpp's llama-batched-bench on the same file (-npp 512 -ntg DECODE, every layer on the GPU).
# TANDEM_GPU_KERNELS=candle (or attention) in the environment measures candle's ops (or our attention alone).
set -euo pipefail
tandem="$(realpath "$1")"
source_dir="$(realpath "$2")"
shift 2
here="$(cd "$(dirname "$0")" && pwd)"
work="${WORK:-/tmp/tandem-gpu-bench}"
mkdir -p "$work"
bench="$work/llama/bin/llama-bench"
if [[ ! -x "$bench" ]]; then
    echo "building llama-bench with CUDA (log: $work/llama-build.log)"
    cmake -S "$source_dir" -B "$work/llama" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-native}" -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
        >"$work/llama-build.log" 2>&1
    cmake --build "$work/llama" --target llama-bench llama-batched-bench -j "$(nproc)" >>"$work/llama-build.log" 2>&1
fi
for model in "$@"; do
    if [[ "$model" == *.header ]]; then
        twin="$work/$(basename "$model" .header).gguf"
        [[ -f "$twin" ]] || python3 "$here/gguf-twin.py" fill "$model" "$twin"
        model="$twin"
    fi
    prompt="def fibonacci(n):"
    gpu="$("$tandem" generate -q -m "$model" --device cuda -n 16 "$prompt")"
    cpu="$("$tandem" generate -q -m "$model" --device cpu -n 16 "$prompt")"
    if [[ "$gpu" == "$cpu" ]]; then echo "$(basename "$model"): GPU and CPU agree on 16 greedy tokens"; else
        echo "$(basename "$model"): GPU and CPU differ: GPU ${gpu@Q} CPU ${cpu@Q}"; fi
    "$tandem" bench speed -q -m "$model" --device cuda --prefill-tokens "${PREFILL:-512}" \
        --decode-tokens "${DECODE:-128}" --repeats "${REPEATS:-3}" --vs-llamacpp "$bench"
    if [[ -n "${SEQUENCES:-}" ]]; then
        "$tandem" bench speed -q -m "$model" --device cuda --prefill-tokens 64 --decode-tokens "${DECODE:-32}" \
            --decode-depth 512 --repeats "${REPEATS:-3}" --sequences "$SEQUENCES"
        slots=$(( $(tr ',' '\n' <<<"$SEQUENCES" | sort -n | tail -1) * (512 + ${DECODE:-32}) + 512 ))
        "$(dirname "$bench")/llama-batched-bench" -m "$model" -ngl 999 -c "$slots" -b 2048 -ub 512 -npp 512 \
            -ntg "${DECODE:-32}" -npl "1,$SEQUENCES" 2>/dev/null | grep -E '^\|'
    fi
done
