#!/usr/bin/env bash
# Installs the real `openai` Python client the serve tests drive `tandem serve` with, at a pinned version, in a
# virtual environment under target/openai-client/venv (the tests run it on first use and fail saying why when it
# cannot be installed; `.ci/run` runs it first so the install shows in the log).
# Idempotent: a stamp file records what was installed, and a second run with the same pin does nothing.
# Usage: scripts/install-openai-client.sh [DIR]   (default: target/openai-client in the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-target/openai-client}"
pins=("openai==3.57.0")
mkdir -p "$dir"

stamp="$dir/venv/.installed"
want="${pins[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "openai client: already installed in $dir/venv"
    exit 0
fi
command -v python3 >/dev/null || { echo "python3 not found: needed for the openai client tests" >&2; exit 1; }
rm -rf "$dir/venv"
python3 -m venv "$dir/venv"
"$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
echo "$want" > "$stamp"
echo "openai client: installed ${pins[*]} in $dir/venv"
