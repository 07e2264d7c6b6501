#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench` from the source that the llama-cpp-python package ships (its sdist vendors
# llama.cpp), for the side-by-side speed comparison (`tandem bench speed --vs-llamacpp PATH`). Needs only pip,
# a C++ compiler and the package index pip is configured for: cmake and ninja come through pip too.
# With the target `llama-server` it builds llama.cpp's server from the same source and build tree instead, for
# `tandem bench serve --vs-llama-server PATH` (scripts/build-llama-server.sh does that); its web UI is left out
# (nothing is downloaded at build time). With the target `llama-completion` it builds the one-shot completion tool
# (JSON-schema constrained with `-jf`) for the plain NESTFUL baseline (scripts/build-llama-completion.sh,
# scripts/nestful-llamacpp-baseline.py). With the target `llama` it builds only the static libraries (libllama.a and
# ggml's), for scripts/build-llama-reference.sh's driver, and prints the path of libllama.a.
#
#   scripts/build-llama-bench.sh [OUT_DIR] [TARGET]   (default: target/llama.cpp and llama-bench; prints the
#                                                      binary's path last)
#
# LLAMA_CPP_PYTHON_VERSION picks the package version (default 0.3.36, llama.cpp commit 0c1e570).
# LLAMA_CPU_ISA=avx2 builds for AVX2 + FMA + F16C only (no AVX-512, no AVX-VNNI) in OUT_DIR/build-avx2, for a fair
# side by side with Tandem's AVX2 kernels (`TANDEM_CPU_ISA=avx2`) on an AVX-512 machine; LLAMA_CPU_ISA=avxvnni
# adds AVX-VNNI (OUT_DIR/build-avxvnni, beside `TANDEM_CPU_ISA=avxvnni`); the default, `native`, builds for the
# machine's own instruction set in OUT_DIR/build.
set -euo pipefail
out="${1:-target/llama.cpp}"
target="${2:-llama-bench}"
case "$target" in
    llama-bench | llama-server | llama-completion | llama) ;;
    *) echo "unknown target $target: llama-bench, llama-server, llama-completion or llama" >&2; exit 1 ;;
esac
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
isa="${LLAMA_CPU_ISA:-native}"
case "$isa" in
    native) build_dir=build; isa_flags=(-DGGML_NATIVE=ON) ;;
    # Haswell's set, as on AVX2 laptops (Intel before Alder Lake, AMD Zen 2/3): what our AVX2 kernels assume.
    avx2) build_dir=build-avx2; isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
        -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
        -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
    # The same plus AVX-VNNI, as on Intel laptops since Alder Lake: what `TANDEM_CPU_ISA=avxvnni` runs.
    avxvnni) build_dir=build-avxvnni; isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
        -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=ON -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
        -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
    *) echo "unknown LLAMA_CPU_ISA $isa: native, avx2 or avxvnni" >&2; exit 1 ;;
esac
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# A CPU may list AMX that its kernel or hypervisor does not let a program run: seen on a sandboxed Xeon whose
# cpuid says amx_tile and whose kernel grants the tile permission, yet `tilezero` raises SIGILL, so every
# llama.cpp matrix product through ggml's AMX path killed the process. A native build there leaves AMX out
# (GCC's explicit -mno-* flags win over -march=native); where AMX runs, the native build keeps it.
amx_runs() {
    local probe="$out/amx-probe"
    cat >"$probe.c" <<'PROBE'
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
    unsigned char config[64];
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */)) return 1;
    memset(config, 0, sizeof config);
    config[0] = 1;      /* palette 1 */
    config[16] = 64;    /* tile 0: 64 bytes a row */
    config[48] = 16;    /* tile 0: 16 rows */
    _tile_loadconfig(config);
    _tile_zero(0);
    _tile_release();
    return 0;
}
PROBE
    # In a subshell, so that the shell's own "Illegal instruction" report goes to /dev/null too.
    cc -O1 -mamx-tile "$probe.c" -o "$probe" 2>/dev/null && ("$probe"; exit $?) 2>/dev/null
}
if [[ "$isa" == native ]] && grep -qw amx_tile /proc/cpuinfo 2>/dev/null && ! amx_runs; then
    echo "this CPU lists AMX but a program may not run it here: llama.cpp is built without AMX" >&2
    isa_flags+=(-DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
        -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
fi
bin="$out/$build_dir/bin/$target"
if [[ "$target" == llama ]]; then
    bin="$out/$build_dir/src/libllama.a"
fi
if [[ -f "$bin" ]]; then
    echo "$bin"
    exit 0
fi
command -v c++ >/dev/null || { echo "no C++ compiler (c++) found: install g++ or clang" >&2; exit 1; }
if [[ ! -x "$out/venv/bin/cmake" || ! -x "$out/venv/bin/ninja" ]]; then
    python3 -m venv "$out/venv"
    "$out/venv/bin/pip" install --quiet cmake ninja
fi
if [[ ! -d "$out/src" ]]; then
    # The source package (sdist) only: `--no-binary` refuses the prebuilt wheels and `pip download` does not
    # build or install it (it prepares the package's metadata, for which pip fetches the build backend).
    mkdir -p "$out/sdist"
    python3 -m pip download --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" -d "$out/sdist" ||
        { echo "could not download llama-cpp-python==$version; set LLAMA_CPP_PYTHON_VERSION to a released version" >&2; exit 1; }
    sdist="$out/sdist/llama_cpp_python-$version.tar.gz"
    [[ -f "$sdist" ]] || { echo "pip did not leave $(basename "$sdist") in $out/sdist" >&2; exit 1; }
    rm -rf "$out/src.tmp" && mkdir -p "$out/src.tmp"
    tar -xzf "$sdist" -C "$out/src.tmp" --strip-components=1
    mv "$out/src.tmp" "$out/src"
fi
# The instruction set chosen above (by default the machine's own), no network code, no shared libs to find. The
# server is configured in (so one tree builds both binaries) without its web UI: no npm build, no prebuilt UI
# download; the server's API is all the benchmark uses.
"$out/venv/bin/cmake" -S "$out/src/vendor/llama.cpp" -B "$out/$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "${isa_flags[@]}" -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DCMAKE_MAKE_PROGRAM="$out/venv/bin/ninja"
"$out/venv/bin/cmake" --build "$out/$build_dir" --target "$target" -j "$(nproc)"
echo "$bin"
