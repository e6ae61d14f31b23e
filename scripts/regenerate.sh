#!/usr/bin/env bash
# Regenerate every file written from the strategy catalog, after adding (or removing) a
# strategy: experiments/README.md's parameter tables, the strategy tables of the experiment
# files with a `# catalog:` line, and the gate's baseline (reports/baseline/) when its
# configurations are no longer experiments/ci.toml's.
#
#   scripts/regenerate.sh        # or: just regenerate
#
# The baseline is refreshed only after the gate passes on the configurations it already holds,
# so a new strategy's rows are added without accepting a change to the others' numbers (that
# is `just baseline`, on purpose). `compactlens generated` checks, and a test runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build -q --release -p compactlens
bin=target/release/compactlens

"$bin" generated --write
if "$bin" generated >/dev/null; then
    exit 0
fi

run=target/regenerate-ci-run
rm -rf "$run"
"$bin" run --config experiments/ci.toml --quiet --out "$run"
"$bin" gate --baseline reports/baseline --current "$run"
mkdir -p reports/baseline
cp "$run/summary.csv" reports/baseline/summary.csv
cp "$run/results.csv" reports/baseline/results.csv
"$bin" generated
