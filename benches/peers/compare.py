"""Run compactlens and its peers side by side on the same inputs, alternating, and print the
medians and ratios pair by pair. Started by run.sh; standard library only.

    python compare.py --peer PATH/TO/peer --dir INPUTS [--runs N] [--exact-runs N]

Pairs (compactlens first, then its peer):
  count        exact o200k_base counting of the corpus: compactlens vs tiktoken (encode_ordinary)
  trim/approx  the agent loop: truncate (chars/4) vs trim_messages + count_tokens_approximately
  trim/exact   the agent loop: truncate (o200k_base) vs trim_messages + an exact tiktoken counter

Every run's outputs are checked: equal token counts on both sides; every trimmed history within
the 32k budget, with no orphaned tool result and at least one message after the system prompt;
and, with the exact counter, the same trimmed history on both sides at every call. Any failed
check exits 1.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

PAIRS = [
    # name, rust args, python args, target ratio, what the target says
    ("count", ["count"], ["count"], 1.6, "exact o200k counting >= 1.6x tiktoken"),
    ("trim/approx", ["trim", "chars/4"], ["trim", "approximate"], 100.0, "agent loop >= 100x LangChain (approximate)"),
    ("trim/exact", ["trim", "o200k_base"], ["trim", "tiktoken"], 1000.0, "agent loop >= 1,000x LangChain (exact)"),
]


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def check(report, problems, label):
    c = report.get("check")
    if c is None:
        return
    for key in ("over_budget", "orphans", "empty", "not_suffix"):
        if c.get(key, 0):
            problems.append(f"{label}: {key} = {c[key]}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--peer", required=True, help="the Rust peer binary")
    p.add_argument("--dir", required=True, help="the inputs written by `peer inputs`")
    p.add_argument("--runs", type=int, default=5, help="runs of each fast pair")
    p.add_argument("--exact-runs", type=int, default=3, help="runs of trim/exact (LangChain takes minutes)")
    args = p.parse_args()

    python = [sys.executable, os.path.join(HERE, "peer.py")]
    rust = [args.peer]
    results = {name: {"compactlens": [], "python": []} for name, *_ in PAIRS}
    problems = []
    rounds = max(args.runs, args.exact_runs)
    for r in range(rounds):
        for name, rust_args, py_args, _, _ in PAIRS:
            if r >= (args.exact_runs if name == "trim/exact" else args.runs):
                continue
            sides = [("compactlens", rust + [rust_args[0], args.dir] + rust_args[1:]),
                     ("python", python + [py_args[0], args.dir] + py_args[1:])]
            # Alternate which side goes first.
            if r % 2:
                sides.reverse()
            for side, cmd in sides:
                report = run(cmd)
                check(report, problems, f"{name} {side} run {r + 1}")
                results[name][side].append(report)
                print(f"  run {r + 1} {name:<12} {side:<13} {report['seconds']:10.4f} s", file=sys.stderr, flush=True)

    # Cross-checks between the sides.
    counts = {rep["tokens"] for side in results["count"].values() for rep in side}
    if len(counts) != 1:
        problems.append(f"count: token counts differ between runs or sides: {sorted(counts)}")
    exact_starts = {json.dumps(rep["starts"]) for side in results["trim/exact"].values() for rep in side}
    if len(exact_starts) > 1:
        problems.append("trim/exact: the two sides kept different histories")
    approx = results["trim/approx"]
    same = sum(a == b for a, b in zip(approx["compactlens"][0]["starts"], approx["python"][0]["starts"]))

    print()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {cpu_model()}")
    print(f"python {platform.python_version()}, {versions()}")
    first = results["count"]["compactlens"][0]
    print(f"corpus: {first['docs']} documents, {first['bytes']:,} bytes, {first['tokens']:,} o200k tokens")
    loop = results["trim/exact"]["compactlens"][0]
    print(f"agent loop: {loop['messages']:,} messages, {loop['calls']} model calls, budget 32,000 tokens")
    print()
    header = f"{'pair':<12} {'compactlens':>14} {'peer':>14} {'ratio':>9} {'target':>8}  ok  runs"
    print(header)
    print("-" * len(header))
    summary = {}
    for name, _, _, target, what in PAIRS:
        ours = statistics.median(rep["seconds"] for rep in results[name]["compactlens"])
        theirs = statistics.median(rep["seconds"] for rep in results[name]["python"])
        ratio = theirs / ours
        ok = "yes" if ratio >= target else "NO"
        n = len(results[name]["python"])
        print(f"{name:<12} {fmt(ours):>14} {fmt(theirs):>14} {ratio:>8.1f}x {target:>7,.1f}x  {ok:<3} {n}")
        summary[name] = {"compactlens_s": ours, "peer_s": theirs, "ratio": ratio, "target": target, "what": what}
    print()
    mb = first["bytes"] / 1e6
    c = summary["count"]
    print(f"count:       compactlens {mb / c['compactlens_s']:.1f} MB/s, {first['tokens'] / c['compactlens_s'] / 1e6:.2f} M tokens/s;"
          f" tiktoken {mb / c['peer_s']:.1f} MB/s, {first['tokens'] / c['peer_s'] / 1e6:.2f} M tokens/s")
    for name in ("trim/approx", "trim/exact"):
        s = summary[name]
        py = results[name]["python"][0]
        print(f"{name + ':':<12} compactlens {loop['messages'] / s['compactlens_s']:,.0f} messages/s;"
              f" LangChain {loop['messages'] / s['peer_s']:,.0f} messages/s"
              f" (it counted {py['messages_counted']:,} messages: {py['messages_counted'] / s['peer_s']:,.0f} counted/s)")
    print(f"trim/approx: the same trimmed history at {same} of {loop['calls']} calls"
          " (the two approximate counters differ: chars/4 + 4 per message vs LangChain's chars/4 + 3 with role and ids)")
    if not problems:
        print(f"trim/exact:  the same trimmed history on both sides at all {loop['calls']} calls")
    print(json.dumps({"summary": summary}), file=open(os.path.join(args.dir, "summary.json"), "w"))
    if problems:
        print("\nCHECKS FAILED:")
        for p_ in problems:
            print(f"  {p_}")
        sys.exit(1)
    print("checks: counts equal; every trimmed history within budget, no orphaned tool result, none empty")


def fmt(seconds):
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def versions():
    from importlib.metadata import version

    return ", ".join(f"{pkg} {version(pkg)}" for pkg in ("tiktoken", "langchain-core"))


if __name__ == "__main__":
    main()
