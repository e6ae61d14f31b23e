#!/usr/bin/env bash
# The real recorded corpora (../shared/corpora, beside the repository): import them into
# datasets with derived probes, and run experiments over them.
#
#   scripts/corpora.sh import   every corpus -> target/corpora/<corpus>.jsonl
#   scripts/corpora.sh run      import, then experiments/corpora.toml (every strategy + recorded)
#   scripts/corpora.sh ci       the CI slice: import, then experiments/ci-corpora.toml
#
# Skips with a printed reason (exit 0) when ../shared/corpora is absent. The corpora are never
# copied into the repository: the imported datasets live under target/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."

corpora="../shared/corpora"
mode="${1:-run}"
shift || true
if [ ! -d "$corpora" ]; then
    echo "skipped: no corpora folder at $corpora"
    exit 0
fi
bin="${COMPACTBENCH:-cargo run --release -q -p compactbench --}"

import() {
    local out="$1"
    rm -rf "$out"
    mkdir -p "$out"
    for dir in "$corpora"/*/; do
        name="$(basename "$dir")"
        $bin import --format auto --probes "$dir" --out "$out/$name.jsonl"
    done
    $bin validate "$out"
}

case "$mode" in
    import)
        import target/corpora
        ;;
    run)
        import target/corpora
        $bin run --config experiments/corpora.toml "$@"
        ;;
    ci)
        import target/corpora
        rm -rf target/ci-corpora-run
        $bin run --config experiments/ci-corpora.toml --out target/ci-corpora-run "$@"
        ;;
    *)
        echo "usage: scripts/corpora.sh import|run|ci [run options]" >&2
        exit 2
        ;;
esac
