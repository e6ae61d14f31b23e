#!/usr/bin/env bash
# The real recorded corpora (../shared/corpora, beside the repository): import them into
# datasets with derived probes, and run experiments over them.
#
#   scripts/corpora.sh import   every corpus -> target/corpora/<corpus>.jsonl
#   scripts/corpora.sh run      import, then experiments/corpora.toml (every strategy + recorded)
#   scripts/corpora.sh ci       the CI slice: import, `probes audit --strict` on the imported
#                               datasets, then experiments/ci-corpora.toml, then check
#   scripts/corpora.sh peers    import, then experiments/peers.toml over the corpora (the external
#                               peers beside their built-ins; run scripts/setup-peers.sh first)
#   scripts/corpora.sh real     import, then rewrite the default experiment's real set
#                               (datasets/real/, datasets/keys/real/; see datasets/real/SOURCE.md)
#   scripts/corpora.sh check DIR   check that run folder DIR is complete (below)
#
# `ci` ends with `check`: the run's summary.csv must hold exactly the strategies
# (`compactlens strategies --json`) and the `recorded` reference, each with a row for every
# window of the experiment, and its results.csv a row for every (conversation, configuration)
# of every dataset the experiment names (for `recorded`, every conversation that holds a
# recorded compaction), all `ok`; otherwise it says what is missing and exits 1.
# `check` needs python3 (the standard library only), not the corpora.
#
# Skips with a printed reason (exit 0) when ../shared/corpora is absent. The corpora are never
# copied into the repository: the imported datasets live under target/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."

corpora="../shared/corpora"
mode="${1:-run}"
shift || true
bin="${COMPACTLENS:-cargo run --release -q -p compactlens --}"

# check DIR: the run in DIR covers its experiment (from DIR/run.json) with every strategy
# and `recorded`. Dataset entries are resolved as the run resolved them: relative to the
# experiment file's folder; a folder entry stands for every *.jsonl file under it.
check() {
    local dir="$1"
    local names
    names="$($bin strategies --json)"
    python3 - "$dir" "$names" <<'PY'
import csv, json, os, sys
from collections import Counter

run_dir, names_json = sys.argv[1], sys.argv[2]
problems = []
# Every strategy, and the reference that replays the recorded compactions (`strategies --json`
# lists it with family `reference`).
want = sorted({s["name"] for s in json.loads(names_json)} | {"recorded"})

def read(name):
    path = os.path.join(run_dir, name)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"check: {path}: {e.strerror}")

try:
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as f:
        manifest = json.load(f)
except (OSError, ValueError) as e:
    sys.exit(f"check: {os.path.join(run_dir, 'run.json')}: {e}")
experiment = manifest["experiment"]
windows = sorted(int(w) for w in experiment["windows"])
base = os.path.dirname(experiment["file"])

# Every dataset the experiment names, with its conversation count (non-blank lines).
datasets = {}
for entry in experiment["datasets"]:
    path = os.path.join(base, entry)
    files = []
    if os.path.isdir(path):
        prefix = os.path.basename(os.path.normpath(path))
        for root, _, names in os.walk(path):
            for n in names:
                if n.endswith(".jsonl"):
                    full = os.path.join(root, n)
                    files.append((prefix + "/" + os.path.relpath(full, path).replace(os.sep, "/"), full))
    elif os.path.isfile(path):
        files.append((os.path.basename(path), path))
    else:
        problems.append(f"dataset {entry}: not found at {path}")
    for label, full in files:
        with open(full, encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        # `recorded` runs only the conversations that hold a compaction of their own.
        compacted = 0
        for line in lines:
            try:
                messages = json.loads(line).get("messages", [])
            except ValueError:
                continue
            if any((m.get("meta") or {}).get("compact_summary") is True for m in messages):
                compacted += 1
        datasets[label] = (len(lines), compacted)

# The pooled rows: one per configuration (per-dataset rows have their dataset's name).
summary = [r for r in read("summary.csv") if r.get("dataset", "all") == "all"]
got = sorted({r["strategy"] for r in summary})
if got != want:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    problems.append(f"summary.csv: strategies missing {missing}, unexpected {extra} (want exactly {want})")
for s in want:
    have = sorted({int(r["window"]) for r in summary if r["strategy"] == s})
    if have != windows and s in got:
        problems.append(f"summary.csv: {s} has windows {have}, the experiment names {windows}")

results = read("results.csv")
rows = Counter((r["config_id"], r["dataset"], r["window"]) for r in results)
ok = Counter((r["config_id"], r["dataset"], r["window"]) for r in results if r["status"] == "ok")
for r in summary:
    for label, (n, compacted) in sorted(datasets.items()):
        if r["strategy"] == "recorded":
            n = compacted
        key = (r["config_id"], label, r["window"])
        if rows[key] != n or ok[key] != n:
            problems.append(
                f"results.csv: {r['strategy']} at window {r['window']} ({r['config_id']}) on {label}: "
                f"{rows[key]} rows, {ok[key]} ok, the dataset has {n} conversations"
            )

if problems:
    print(f"check {run_dir}: incomplete run:", file=sys.stderr)
    for p in problems[:40]:
        print(f"  {p}", file=sys.stderr)
    if len(problems) > 40:
        print(f"  ... and {len(problems) - 40} more", file=sys.stderr)
    sys.exit(1)
print(f"check {run_dir}: {len(want)} strategies x {len(windows)} windows x {len(datasets)} datasets, "
      f"{sum(ok.values())} pairs ok")
PY
}

if [ "$mode" = check ]; then
    if [ $# -ne 1 ]; then
        echo "usage: scripts/corpora.sh check RUN_DIR" >&2
        exit 2
    fi
    check "$1"
    exit 0
fi
if [ ! -d "$corpora" ]; then
    echo "skipped: no corpora folder at $corpora"
    exit 0
fi

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

# real: the default experiment's real set. From the two MIT-licensed Claude Code sources, every
# imported session longer than 512,000 bytes of JSONL (about 128k tokens: each compacts at both
# default windows), in import order, with its answer keys (the lines of
# datasets/keys/corpora/<source>.jsonl about those sessions, unchanged).
real() {
    python3 - <<'PY'
import json, os
MIN_BYTES = 512_000
os.makedirs("datasets/real", exist_ok=True)
os.makedirs("datasets/keys/real", exist_ok=True)
for source in ["claude-code-entire", "claude-code-spotter"]:
    kept = []
    with open(f"target/corpora/{source}.jsonl", encoding="utf-8") as f:
        for line in f:
            if len(line.encode("utf-8")) > MIN_BYTES:
                kept.append(line if line.endswith("\n") else line + "\n")
    ids = {json.loads(line)["id"] for line in kept}
    with open(f"datasets/real/{source}.jsonl", "w", encoding="utf-8") as out:
        out.writelines(kept)
    keys = []
    with open(f"datasets/keys/corpora/{source}.jsonl", encoding="utf-8") as f:
        keys = [line for line in f if line.strip() and json.loads(line).get("conversation") in ids]
    with open(f"datasets/keys/real/{source}.jsonl", "w", encoding="utf-8") as out:
        out.writelines(keys)
    print(f"datasets/real/{source}.jsonl: {len(kept)} sessions, {len(keys)} keys")
PY
}

case "$mode" in
    import)
        import target/corpora
        ;;
    real)
        import target/corpora
        real
        $bin validate datasets/real
        ;;
    run)
        import target/corpora
        $bin run --config experiments/corpora.toml "$@"
        ;;
    peers)
        import target/corpora
        # peers.toml with the corpora as its datasets, written beside experiments/ one level
        # down (target/), so its relative commands and the venv path still resolve.
        sed -e 's#^datasets = .*#datasets = ["../target/corpora"]\nprices = "../experiments/prices.toml"#' \
            experiments/peers.toml >target/peers-corpora.toml
        $bin run --config target/peers-corpora.toml "$@"
        ;;
    ci)
        import target/corpora
        # The derived probes keep to the limits of a fact (no plain-word share over 10%, no
        # code fragment, no fact tested twice, a critical task probe in every long session).
        # ... and the answer keys of datasets/keys/corpora/ still hold on the recordings (every
        # key's sources before its checkpoint, an alias of each fact in them, no duplicate); the
        # audit prints how many key facts the derived probes test.
        $bin probes audit --strict target/corpora/*.jsonl --keys datasets/keys/corpora/*.jsonl
        rm -rf target/ci-corpora-run
        $bin run --config experiments/ci-corpora.toml --out target/ci-corpora-run "$@"
        check target/ci-corpora-run
        ;;
    *)
        echo "usage: scripts/corpora.sh import|run|ci|peers|real [run options] | check RUN_DIR" >&2
        exit 2
        ;;
esac
