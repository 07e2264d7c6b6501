#!/usr/bin/env bash
# Builds `tandem` with `--features cuda` on a machine without CUDA installed (or without a GPU), for a GPU machine
# that has CUDA 13's libraries and driver: nvcc, headers and the libraries to link against come from NVIDIA's
# wheels on PyPI; the driver library (libcuda.so.1, only on GPU machines) is replaced at link time by a stub that
# names the same functions. Prints the binary's path last.
#
#   scripts/build-cuda.sh [COMPUTE_CAP]     (default 90: H100/H200; 89 Ada, 86/80 Ampere)
#   TESTS=1 scripts/build-cuda.sh           also builds the library's tests (our GPU kernels' checks, which need a
#                                           GPU: run that binary there with the filter `gpu_`) and prints its path
#
# Run it on the GPU machine with CUDA's libraries on the library path, e.g.
# LD_LIBRARY_PATH=/usr/local/cuda/lib64 target/release/tandem bench speed --device cuda
set -euo pipefail
cap="${1:-90}"
root="$(cd "$(dirname "$0")/.." && pwd)"
toolkit="$root/target/cuda-toolkit"
cuda="$toolkit/nvidia/cu13"
if [[ ! -x "$cuda/bin/nvcc" ]]; then
    mkdir -p "$toolkit/wheels"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 -d "$toolkit/wheels" \
        "nvidia-cuda-nvcc>=13.0,<13.1" "nvidia-cuda-crt>=13.0,<13.1" "nvidia-nvvm>=13.0,<13.1" \
        "nvidia-cuda-runtime>=13.0,<13.1" "nvidia-cuda-cccl>=13.0,<13.1" "nvidia-cuda-nvrtc>=13.0,<13.1" \
        "nvidia-cublas>=13.0,<13.1" "nvidia-curand>=10.4,<10.5"
    for wheel in "$toolkit"/wheels/*.whl; do python3 -m zipfile -e "$wheel" "$toolkit"; done
    chmod +x "$cuda"/bin/* "$cuda"/nvvm/bin/*
fi
# Unversioned names for the linker, as a CUDA install has them.
for lib in cublas cublasLt curand nvrtc cudart; do
    versioned="$(cd "$cuda/lib" && ls "lib$lib.so."* | sort | head -1)"
    ln -sf "$versioned" "$cuda/lib/lib$lib.so"
done
# The stub driver library: every cu* function cudarc declares, as empty functions, with the driver's soname.
mkdir -p "$cuda/lib/stubs"
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
(cd "$root" && cargo fetch --locked >/dev/null)
cudarc="$(ls -d "$registry"/*/cudarc-* | sort -V | tail -1)"
grep -ohE '^\s+fn (cu[A-Za-z0-9_]+)\(' "$cudarc/src/driver/sys/mod.rs" | sed -E 's/^\s+fn (cu[A-Za-z0-9_]+)\(/\1/' |
    sort -u | awk '{print "void " $1 "(void) {}"}' >"$cuda/lib/stubs/libcuda.c"
cc -shared -fPIC -o "$cuda/lib/stubs/libcuda.so" -Wl,-soname,libcuda.so.1 "$cuda/lib/stubs/libcuda.c"
cd "$root"
build_env=(CUDA_HOME="$cuda" CUDA_PATH="$cuda" PATH="$cuda/bin:$PATH" CUDARC_CUDA_VERSION=13000
    CUDA_COMPUTE_CAP="$cap" LIBRARY_PATH="$cuda/lib:$cuda/lib/stubs")
env "${build_env[@]}" cargo build --release --locked --features cuda --bin tandem --target-dir target/cuda >&2
if [[ -n "${TESTS:-}" ]]; then
    env "${build_env[@]}" cargo test --release --locked --features cuda --lib --no-run --target-dir target/cuda \
        --message-format=json 2>/dev/null | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["lib"]:
        print(m["executable"])'
fi
echo "$root/target/cuda/release/tandem"
