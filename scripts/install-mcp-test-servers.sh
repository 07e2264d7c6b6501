#!/usr/bin/env bash
# Installs the real MCP servers the tests use, at pinned versions, under target/mcp-servers/ (the tests run it on
# first use, as they pull models, and fail saying why when a server cannot be installed; `.ci/run` runs it first
# so the install shows in the log):
#   venv/  a Python virtual environment with mcp-server-time, mcp-server-git, mcp-server-fetch and
#          excel-mcp-server (PyPI, through pip), and the MCP Python SDK (`mcp`) that tests/fixtures/mcp/http_server.py,
#          the Streamable HTTP test server, runs on
#   venv-mcp1/  mcp-server-sqlite, todo-txt-mcp and mcp-server-calculator, which need the SDK's 1.x (`mcp<2`): a
#          venv of their own, their commands linked into venv/bin so one PATH entry serves every suite
#   npm/   @modelcontextprotocol/server-filesystem and server-memory (npm registry, through npm; skipped with a note
#          when npm is missing), and the MCP Inspector (`mcp-inspector --cli`), a client tests/it/mcp_server.rs
#          drives `tandem mcp` with
# The tasks-mcp and tasks-apps suites (benches/tasks-mcp.toml, benches/tasks-apps.toml) run these servers by name:
# put venv/bin (first: their setup runs its python3) and npm/node_modules/.bin on PATH for them.
# Idempotent: a stamp file records what was installed, and a second run with the same pins does nothing.
# Usage: scripts/install-mcp-test-servers.sh [DIR]   (default: target/mcp-servers in the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-target/mcp-servers}"
python_pins=("mcp-server-time==2026.10.19" "mcp-server-git==2026.10.19" "mcp==2.3.0" "mcp-server-fetch==2026.10.24"
    "excel-mcp-server==2.2.2")
# Servers written for the SDK's 1.x, and the commands they install.
mcp1_pins=("mcp==1.30.0" "mcp-server-sqlite==2025.4.25" "todo-txt-mcp==1.0.2" "mcp-server-calculator==0.2.1")
mcp1_commands=(mcp-server-sqlite todo-txt-mcp mcp-server-calculator)
npm_pins=("@modelcontextprotocol/server-filesystem@2026.8.31" "@modelcontextprotocol/server-memory@2026.8.31"
    "@modelcontextprotocol/inspector@2.12.0")
mkdir -p "$dir"

stamp="$dir/venv/.installed"
want="${python_pins[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "MCP test servers (Python): already installed in $dir/venv"
else
    command -v python3 >/dev/null || { echo "python3 not found: needed for the MCP test servers" >&2; exit 1; }
    rm -rf "$dir/venv"
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check "${python_pins[@]}"
    echo "$want" > "$stamp"
    echo "MCP test servers (Python): installed ${python_pins[*]} in $dir/venv"
fi

stamp="$dir/venv-mcp1/.installed"
want="${mcp1_pins[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "MCP test servers (Python, SDK 1.x): already installed in $dir/venv-mcp1"
else
    rm -rf "$dir/venv-mcp1"
    python3 -m venv "$dir/venv-mcp1"
    "$dir/venv-mcp1/bin/python" -m pip install --quiet --disable-pip-version-check "${mcp1_pins[@]}"
    echo "$want" > "$stamp"
    echo "MCP test servers (Python, SDK 1.x): installed ${mcp1_pins[*]} in $dir/venv-mcp1"
fi
# Linked every time: a fresh venv/ (its pins changed) has lost the links.
for command in "${mcp1_commands[@]}"; do
    ln -sf "$(cd "$dir/venv-mcp1/bin" && pwd)/$command" "$dir/venv/bin/$command"
done

stamp="$dir/npm/.installed"
want="${npm_pins[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "MCP test servers (npm): already installed in $dir/npm"
elif ! command -v npm >/dev/null; then
    echo "MCP test servers (npm): npm not found, so ${npm_pins[*]} is not installed (its test will fail: install npm)"
else
    rm -rf "$dir/npm"
    mkdir -p "$dir/npm"
    npm install --silent --no-audit --no-fund --prefix "$dir/npm" "${npm_pins[@]}"
    echo "$want" > "$stamp"
    echo "MCP test servers (npm): installed ${npm_pins[*]} in $dir/npm"
fi
