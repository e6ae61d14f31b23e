#!/usr/bin/env python3
"""Real summaries against a summarizing strategy, probe by probe, from a run folder.

    python3 scripts/real-probes.py RUN_DIR [--against STRATEGY] [--window N] [--tier TIER] [--limit N]

RUN_DIR is a run that has the `recorded` reference (experiments/real-summaries.toml). Prints
markdown:

1. the paired retention of `recorded` against every summarizing configuration, from the run's
   real_vs_stand_in.csv (probes at risk under both, critical and useful, with intervals);
2. at window N (default: the run's largest), one row per probe of TIER (default `critical`)
   that is at risk under both `recorded` and the STRATEGY configuration (default
   `anthropic-compaction`) at the same checkpoint, at the last such checkpoint: the probe's question, then per fact what the
   real summary (the one in the context when the probe was asked) says, the line that states
   it, or "absent", and the same for the strategy's summary. A fact credited somewhere else
   than the summary says where (`kept message`: a recorded message still in the context). Scores are the judge's as if
   every request had been sent (as in real_vs_stand_in.csv); `†` marks a probe asked after a
   rejected call, whose headline score is 0 and whose record keeps no per-fact evidence: its
   facts are looked up in the summary's text instead (`~"line"`, or "not in the summary text").

Reads run.json (the probes' texts) and results.jsonl (scores, evidence, compaction summaries,
call timeline); the standard library only.
"""

import argparse
import csv
import json
import os
import re
import sys

CRITICAL_KINDS = {"task", "continuation"}


def tier(p):
    return p.get("tier") or ("critical" if p["kind"] in CRITICAL_KINDS else "useful")


def score(p):
    """The score as if every request had been sent, `†` when a rejected call came before."""
    if p.get("if_sent") is not None:
        return f"{p['if_sent']:.2f}†"
    return f"{p['score']:.2f}"


def cell(text, limit):
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def locate(summary, alias):
    """The span of alias in summary: verbatim (any case), else with _, -, spaces and case ignored."""
    i = summary.lower().find(alias.lower())
    if i >= 0:
        return i, i + len(alias)
    parts = [re.escape(c) for c in re.sub(r"[\s_\-]+", "", alias)]
    if not parts:
        return None
    m = re.search(r"[\s_\-]*".join(parts), summary, re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def line_around(summary, span, width=110):
    start = summary.rfind("\n", 0, span[0]) + 1
    end = summary.find("\n", span[1])
    end = len(summary) if end < 0 else end
    line = summary[start:end].strip()
    at = span[0] - start
    if len(line) > width:
        lo = max(0, min(at - width // 3, len(line) - width))
        line = ("…" if lo > 0 else "") + line[lo : lo + width] + ("…" if lo + width < len(line) else "")
    return line


def says(record, score, text):
    """What the context says of each fact: the summary's line, where else it was found, or absent."""
    if text is None:
        return "(no probe text in run.json)"
    metrics = record["outcome"]
    at = {c["call"]: c["message_index"] for c in metrics.get("timeline", [])}
    summary = ""
    for e in metrics.get("compaction_events", []):
        if e.get("summary") and at.get(e["call"], 1 << 60) <= score["asked_at"]:
            summary = e["summary"]
    evidence = score.get("evidence") or []
    out = []
    if score.get("if_sent") is not None:
        # Asked after a rejected call: the record holds the score as if sent, not where each
        # fact was found, so the summary's text is searched for the facts' aliases instead.
        for aliases in text["facts"]:
            span = next((sp for sp in (locate(summary, a) for a in aliases) if sp), None)
            name = aliases[0] if aliases else "?"
            out.append(f"`{name}`: ~\"{line_around(summary, span)}\"" if span else f"`{name}`: not in the summary text")
        return "; ".join(out)
    for i, found in enumerate(score["facts"]):
        aliases = text["facts"][i] if i < len(text["facts"]) else []
        name = aliases[0] if aliases else f"fact {i}"
        ev = evidence[i] if i < len(evidence) else None
        if found == "lost":
            out.append(f"`{name}`: absent")
            continue
        if found == "summary":
            span = None
            for alias in ([ev["alias"]] if ev else []) + aliases:
                span = locate(summary, alias)
                if span:
                    break
            if span:
                out.append(f"`{name}`: \"{line_around(summary, span)}\"")
            else:
                matched = ev["alias"] if ev else "?"
                out.append(f"`{name}`: in the summary as \"{matched}\"")
            continue
        where = f"message {ev['message']}" if ev and ev.get("message") is not None else found
        out.append(f"`{name}`: {'kept message' if found == 'verbatim' else found} ({where})")
    return "; ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--against", default="anthropic-compaction", help="the summarizing strategy shown per probe")
    ap.add_argument("--window", type=int, help="the window of the probe rows (default: the largest)")
    ap.add_argument("--tier", default="critical", choices=["critical", "useful", "detail"])
    ap.add_argument("--limit", type=int, default=40, help="most probe rows printed (0: all)")
    args = ap.parse_args()

    def path(name):
        return os.path.join(args.run_dir, name)

    try:
        with open(path("run.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        with open(path("results.jsonl"), encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        sys.exit(f"real-probes: {args.run_dir}: {e}")
    texts = {(p["dataset"], p["conversation_id"], p["probe_id"]): p for p in manifest.get("probes", [])}
    configs = manifest["experiment"]["configurations"]
    recorded = [c for c in configs if c["strategy"] == "recorded"]
    if not recorded:
        sys.exit(f"real-probes: {args.run_dir}: the run has no `recorded` configuration")
    window = args.window or max(c.get("window") or 0 for c in recorded)
    recorded = [c for c in recorded if (c.get("window") or 0) == window]
    if not recorded:
        sys.exit(f"real-probes: {args.run_dir}: no `recorded` configuration at window {window}")

    print("## Paired retention: real summaries (`recorded`) against each summarizing configuration\n")
    try:
        with open(path("real_vs_stand_in.csv"), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"real-probes: {path('real_vs_stand_in.csv')}: {e.strerror} (written by `compactlens run`; `run --resume --out DIR` writes it for an older run)")
    stand_in = manifest.get("stand_in_summary", manifest.get("summarizer") == "offline")
    label = "stand-in" if stand_in else "summarizer"
    print(f"| window | dataset | configuration | probes | conv. | real | {label} | {label} − real |")
    print("|---|---|---|---|---|---|---|---|")

    def pct(v):
        return f"{float(v) * 100:.1f}%" if v else "–"

    def interval(lo, hi):
        return f" [{float(lo) * 100:.1f}, {float(hi) * 100:.1f}]" if lo and hi else ""

    for r in rows:
        d = r["difference"]
        diff = f"{float(d) * 100:+.1f} pt" if d else "–"
        if r["difference_ci_low"]:
            diff += interval(r["difference_ci_low"], r["difference_ci_high"])
        elif r["difference_sign_p"]:
            diff += f" (sign p={float(r['difference_sign_p']):.2f})"
        print(
            f"| {r['window']} | {r['dataset']} | {r['strategy']} | {r['probes']} | {r['conversations']} | "
            f"{pct(r['real_retention'])}{interval(r['real_retention_ci_low'], r['real_retention_ci_high'])} | "
            f"{pct(r['stand_in_retention'])}{interval(r['stand_in_retention_ci_low'], r['stand_in_retention_ci_high'])} | {diff} |"
        )

    ok = [r for r in records if r["outcome"].get("status") == "ok"]
    by = {(r["config_id"], r["dataset"], r["conversation_id"]): r for r in ok}
    shown = 0
    total = 0
    checkpoints = 0
    lines = []
    for ref in recorded:
        others = [c for c in configs if c["strategy"] == args.against and c.get("window") == ref.get("window")]
        if not others:
            sys.exit(f"real-probes: no `{args.against}` configuration at the window of {ref['config_id']}")
        other = others[0]
        for r in ok:
            if r["config_id"] != ref["config_id"]:
                continue
            mine = by.get((other["config_id"], r["dataset"], r["conversation_id"]))
            if mine is None:
                continue
            theirs = {(p["probe_id"], p["checkpoint"]): p for p in mine["outcome"]["probes"]}
            # One row per probe: its last checkpoint at risk under both.
            last = {}
            for p in r["outcome"]["probes"]:
                q = theirs.get((p["probe_id"], p["checkpoint"]))
                if p["at_risk"] and q and q["at_risk"] and tier(p) == args.tier:
                    checkpoints += 1
                    if p["probe_id"] not in last or p["checkpoint"] > last[p["probe_id"]][0]["checkpoint"]:
                        last[p["probe_id"]] = (p, q)
            for p, q in last.values():
                total += 1
                if args.limit and shown >= args.limit:
                    continue
                shown += 1
                text = texts.get((r["dataset"], r["conversation_id"], p["probe_id"]))
                question = text["question"] if text else p["probe_id"]
                lines.append(
                    f"| {r['conversation_id'][:8]} | {p['checkpoint']} | {p['kind']} | {cell(question, 90)} | "
                    f"{score(p)} {cell(says(r, p, text), 300)} | {score(q)} {cell(says(mine, q, text), 300)} |"
                )
    print(f"\n## At-risk {args.tier} probes at {window}: the real summary against `{args.against}` ({label} summary)\n")
    print(f"{checkpoints} probe-checkpoints at risk under both, {total} probes; {shown} shown, each at its last such checkpoint.\n")
    print(f"| conv. | ckpt | kind | probe | real summary | {label} summary |")
    print("|---|---|---|---|---|---|")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
