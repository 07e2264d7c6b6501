#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the same source and build tree as `llama-bench` (see
# scripts/build-llama-bench.sh), for `tandem bench serve --vs-llama-server PATH`.
#
#   scripts/build-llama-server.sh [OUT_DIR]     (default: target/llama.cpp; prints the binary's path last)
set -euo pipefail
exec "$(dirname "$0")/build-llama-bench.sh" "${1:-target/llama.cpp}" llama-server
