#!/usr/bin/env bash
# Installs the LangChain peers' packages (sdk/python/requirements-peers.txt, exact versions) into
# a virtual environment outside the tracked files (default .venv-peers/, git-ignored), for
# experiments/peers.toml and sdk/python/tests/test_peers.py. Needs Python 3.11 or later and
# PyPI (or the index pip is configured with); nothing else. An environment installed from the
# same requirements file is reused. The last line printed is the environment's python.
#
#   scripts/setup-peers.sh                          # create or reuse .venv-peers
#   COMPACTLENS_PEERS_VENV=DIR scripts/setup-peers.sh
#   COMPACTLENS_PEERS_BASE_PYTHON=python3.12 scripts/setup-peers.sh   # the python to build it with
#
# A DIR other than .venv-peers needs the `command` paths of experiments/peers.toml changed too.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${COMPACTLENS_PEERS_VENV:-.venv-peers}"
requirements="sdk/python/requirements-peers.txt"
marker="$venv/.compactlens-peers"

ready() {
    [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$marker" &&
        "$venv/bin/python" -c "import langchain.agents.middleware.summarization, langchain_core.messages.utils" 2>/dev/null
}

if ready; then
    echo "setup-peers: $venv is ready (reused)" >&2
else
    base=""
    for candidate in ${COMPACTLENS_PEERS_BASE_PYTHON:-} python3 python3.13 python3.12 python3.11; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            base="$candidate"
            break
        fi
    done
    if [ -z "$base" ]; then
        echo "setup-peers: no Python 3.11 or later found (langchain 1.5 needs it); set COMPACTLENS_PEERS_BASE_PYTHON" >&2
        exit 1
    fi
    echo "setup-peers: creating $venv with $("$base" --version 2>&1)" >&2
    rm -rf "$venv"
    "$base" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements" >&2
    cp "$requirements" "$marker"
    if ! ready; then
        echo "setup-peers: $venv was installed but LangChain cannot be imported from it" >&2
        exit 1
    fi
    echo "setup-peers: $venv is ready" >&2
fi
echo "$(cd "$venv" && pwd)/bin/python"
