#!/usr/bin/env bash
# Installs what the web page's browser tests need: Debian's `chromium` (the system browser, when /usr/bin/chromium
# is missing; Playwright's own browser download is not used) and the Python `playwright` package at a pinned
# version in a virtual environment under target/browser-test/venv (the tests run this on first use and fail saying
# why when it cannot install; `.ci/run` runs it first so the install shows in the log).
# Idempotent: a stamp file records what was installed, and a second run with the same pin does nothing.
# Usage: scripts/install-browser-test.sh [DIR]   (default: target/browser-test in the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-target/browser-test}"
pins=("playwright==1.65.2")
mkdir -p "$dir"

if [[ ! -x /usr/bin/chromium ]]; then
    if [[ "$(id -u)" == 0 ]]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
    elif command -v sudo >/dev/null; then
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
    else
        echo "/usr/bin/chromium is missing and this user cannot install it: run 'apt-get install chromium' as root" >&2
        exit 1
    fi
fi

stamp="$dir/venv/.installed"
want="${pins[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "browser test: chromium and ${pins[*]} already installed in $dir/venv"
    exit 0
fi
command -v python3 >/dev/null || { echo "python3 not found: needed for the browser tests" >&2; exit 1; }
rm -rf "$dir/venv"
python3 -m venv "$dir/venv"
"$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
echo "$want" > "$stamp"
echo "browser test: installed ${pins[*]} in $dir/venv (browser: /usr/bin/chromium)"
