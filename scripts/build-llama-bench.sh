#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench` from the source that the llama-cpp-python package ships on PyPI, for the
# side-by-side speed comparison (`tandem bench speed --vs-llamacpp PATH`). Needs only pip, a C++ compiler and
# the package registries: cmake and ninja come from PyPI too.
#
#   scripts/build-llama-bench.sh [OUT_DIR]      (default: target/llama.cpp; prints the binary's path last)
#
# LLAMA_CPP_PYTHON_VERSION picks the package version (default 0.3.36, llama.cpp commit 0c1e570).
set -euo pipefail
out="${1:-target/llama.cpp}"
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
bin="$out/build/bin/llama-bench"
if [[ -x "$bin" ]]; then
    echo "$bin"
    exit 0
fi
command -v c++ >/dev/null || { echo "no C++ compiler (c++) found: install g++ or clang" >&2; exit 1; }
python3 -m venv "$out/venv"
"$out/venv/bin/pip" install --quiet cmake ninja
if [[ ! -d "$out/src" ]]; then
    # The sdist straight from PyPI's simple index (`pip download` would build the package's metadata first).
    mkdir -p "$out/sdist"
    python3 - "$version" "$out/sdist" <<'PY'
import json, pathlib, re, sys, urllib.request
version, dest = sys.argv[1], pathlib.Path(sys.argv[2])
index = urllib.request.Request(
    "https://pypi.org/simple/llama-cpp-python/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
)
body = urllib.request.urlopen(index).read().decode()
name = f"llama_cpp_python-{version}.tar.gz"
try:
    urls = {f["filename"]: f["url"] for f in json.loads(body)["files"]}
except ValueError:
    # Some mirrors answer the simple index in HTML only (PEP 503): take the links from it.
    urls = {u.rsplit("/", 1)[-1].split("#")[0]: u for u in re.findall(r'href="([^"]+)"', body)}
if name not in urls:
    sys.exit(f"PyPI has no {name}; set LLAMA_CPP_PYTHON_VERSION to a released version")
if not (dest / name).exists():
    urllib.request.urlretrieve(urls[name].split("#")[0], dest / name)
PY
    mkdir -p "$out/src"
    tar -xzf "$out"/sdist/llama_cpp_python-*.tar.gz -C "$out/src" --strip-components=1
fi
# The machine's own instruction set (AVX-512/VNNI where present), no network code, no shared libs to find.
"$out/venv/bin/cmake" -S "$out/src/vendor/llama.cpp" -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF \
    -DCMAKE_MAKE_PROGRAM="$out/venv/bin/ninja"
"$out/venv/bin/cmake" --build "$out/build" --target llama-bench -j "$(nproc)"
echo "$bin"
