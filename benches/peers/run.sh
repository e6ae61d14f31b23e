#!/usr/bin/env bash
# Side by side with the peers, on identical inputs, alternating, in one run:
#   - exact o200k_base counting of the mixed corpus: compactlens vs Python tiktoken;
#   - the agent loop (2,000 messages, trim before each model call to 32k tokens): compactlens's
#     `truncate` vs LangChain's `trim_messages`, with the approximate and the exact counter.
# Prints the median of several runs per side and the ratio pair by pair (see compare.py).
#
#   bash benches/peers/run.sh                  # or: just bench-peers
#   RUNS=5 EXACT_RUNS=3 bash benches/peers/run.sh
#
# Creates .venv-peers/ (git-ignored) at the repository root and installs the pinned peers from
# PyPI into it. LangChain's exact loop recounts the whole history with tiktoken before every
# call and takes several minutes per run, hence EXACT_RUNS.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/benches/peers"
venv="${PEERS_VENV:-$root/.venv-peers}"
python="${PYTHON:-python3}"
runs="${RUNS:-5}"
exact_runs="${EXACT_RUNS:-3}"

if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv" >&2
    "$python" -m venv "$venv"
fi
echo "== installing the peers (benches/peers/requirements.txt)" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"

echo "== building the Rust side (release)" >&2
(cd "$root" && cargo build --release --quiet -p compactlens-benches --bin peer)
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
peer="$target_dir/release/peer"

inputs="$(mktemp -d)"
trap 'rm -rf "$inputs"' EXIT
echo "== writing the inputs into $inputs" >&2
"$peer" inputs "$inputs" >&2

# tiktoken reads its vocabulary from this cache (seeded from the inputs, checked by its hash).
export TIKTOKEN_CACHE_DIR="$venv/tiktoken-cache"
echo "== running: $runs runs per pair, $exact_runs of trim/exact" >&2
"$venv/bin/python" "$here/compare.py" --peer "$peer" --dir "$inputs" --runs "$runs" --exact-runs "$exact_runs"
