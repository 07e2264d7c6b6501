#!/usr/bin/env bash
# Builds llama.cpp's `llama-completion` (one-shot, greedy, JSON-schema constrained with `-jf`) from the same
# source and build tree as `llama-bench` (see scripts/build-llama-bench.sh), for the plain NESTFUL baseline
# (scripts/nestful-llamacpp-baseline.py).
#
#   scripts/build-llama-completion.sh [OUT_DIR]     (default: target/llama.cpp; prints the binary's path last)
set -euo pipefail
exec "$(dirname "$0")/build-llama-bench.sh" "${1:-target/llama.cpp}" llama-completion
