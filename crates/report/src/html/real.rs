//! Real summaries beside the strategies' summaries: the `recorded` reference (the recording's
//! own compactions) against each summarizing configuration on the probes at risk under both
//! ([`crate::real`]); then paired compactions, the real summary and the strategy's summary the
//! context held at the same checkpoint, side by side. Nothing is drawn when the run has no
//! `recorded` configuration.
//!
//! Size: at most [`MAX_PAIRED_COMPACTIONS`] pairs are shown, each text cut at
//! [`MAX_SUMMARY_CHARS`] characters, and no more than [`MAX_PAIRED_BYTES`] bytes of them; the
//! section says what it left out (compactions.csv holds every summary).

use std::collections::BTreeMap;

use runlog::log::RunData;
use runlog::record::{CompactionRecord, PairOutcome, PairRecord};

use super::{ci, dv, escape, pct, Page, MAX_REPORT_BYTES, MAX_SUMMARY_CHARS};
use crate::real::{compare, has_recorded, summarizing, Comparison, RECORDED};
use crate::summary::ALL_DATASETS;
use crate::verdict::render::window_label;

/// Paired compactions shown at most.
pub const MAX_PAIRED_COMPACTIONS: usize = 24;
/// Bytes of the paired compactions' text at most: a sixteenth of the page's bound.
pub const MAX_PAIRED_BYTES: usize = MAX_REPORT_BYTES / 16;

/// Whether the run's summaries (all but `recorded`'s) come from the offline stand-in, as the
/// manifest says it (a run written before the manifest said so: its summarizer is `offline`).
pub(super) fn stand_in(data: &RunData) -> bool {
    data.manifest.stand_in_summary || data.manifest.summarizer == "offline"
}

/// The whole section, or nothing without a `recorded` configuration.
pub(crate) fn section(out: &mut String, page: &Page<'_>) {
    let data = page.data;
    if !has_recorded(data) {
        return;
    }
    let rows = compare(data);
    let stand_in = stand_in(data);
    let theirs = if stand_in { "stand-in summary" } else { "summarizer's summary" };
    out.push_str("<h2 id=\"real-summaries\">Real summaries against the ");
    out.push_str(if stand_in { "stand-in" } else { "summarizer" });
    out.push_str(
        "</h2>\n<p class=\"note\"><code>recorded</code> replays the compactions the recording holds: the \
         recorded agent's own cut and its real summary. Each configuration that summarizes is set beside it on the \
         same probes: the critical and useful probes, at each checkpoint, whose source left the context under both. \
         Each probe is scored as if every request had been sent (what the summary keeps, not whether the request \
         fit the window: a probe asked after a rejected call is counted in the probes column). The difference is \
         conversation by conversation (a 95% bootstrap interval over conversations, weighted by probes; a sign \
         test under 10 conversations).",
    );
    if stand_in {
        out.push_str(
            " <b>The strategies' summaries here are written by the offline stand-in</b> (an extractive \
             summarizer, not a model): a higher figure than the real summary's says what the stand-in keeps of \
             what the probes ask, not that the strategy would summarize better than the recorded agent.",
        );
    }
    out.push_str("</p>\n");
    if rows.is_empty() {
        out.push_str(
            "<p class=\"note\">No configuration inserted a summary at the windows of <code>recorded</code>: \
             nothing to set beside the real summaries.</p>\n",
        );
        return;
    }
    page.switch(out);
    out.push_str(&format!(
        "<div class=\"scroll\"><table id=\"real-table\" class=\"sortable sticky\"><thead><tr><th>configuration</th>\
         <th class=\"num\">window</th><th>dataset</th><th class=\"num\">probes at risk under both</th><th class=\"num\">conversations</th>\
         <th class=\"num\">real summary (<code>recorded</code>)</th><th class=\"num\">{theirs}</th>\
         <th class=\"num\">{} &minus; real</th><th>reading</th></tr></thead><tbody>\n",
        if stand_in { "stand-in" } else { "summarizer" },
    ));
    // Each dataset view shows its rows: a dataset its own, the pooled view each configuration's
    // pooled row, or its one dataset's row when its pairs come from one dataset only.
    let several = page.views.len() > 1;
    for (k, r) in rows.iter().enumerate() {
        if !several {
            row(out, r, stand_in, "");
            continue;
        }
        let pooled_row =
            rows.iter().any(|o| o.dataset == ALL_DATASETS && o.window == r.window && o.config_id == r.config_id);
        let first_of_config = rows[..k].iter().all(|o| o.window != r.window || o.config_id != r.config_id);
        if r.dataset != ALL_DATASETS && !pooled_row && first_of_config {
            row(out, r, stand_in, &page.view_attrs(ALL_DATASETS, 0));
        }
        let i = page.views.iter().position(|v| *v == r.dataset).unwrap_or(usize::MAX);
        row(out, r, stand_in, &page.view_attrs(&r.dataset, i));
    }
    out.push_str("</tbody></table></div>\n");
    paired(out, page, stand_in);
}

/// One comparison's row; `attrs` ties it to its dataset view.
fn row(out: &mut String, r: &Comparison, stand_in: bool, attrs: &str) {
    let d = &r.difference;
    let how = match (d.interval, d.sign_p) {
        (Some(_), _) => ci(d.interval),
        (None, Some(p)) => format!("<br><span class=\"ci\">sign test p={p:.2}</span>"),
        (None, None) => String::new(),
    };
    let theirs = if stand_in { "the stand-in" } else { "the summarizer" };
    let reading = match d.mean {
        _ if r.probes == 0 => "no probe at risk under both".to_string(),
        Some(m) if d.detectable && m > 0.0 => format!("{theirs} keeps more"),
        Some(m) if d.detectable && m < 0.0 => "the real summary keeps more".to_string(),
        Some(_) => "no detectable difference".to_string(),
        None => String::new(),
    };
    let window = if r.window > 0 { r.window.to_string() } else { "own".into() };
    let rejected = match r.rejected_probes {
        0 => String::new(),
        n => format!("<br><span class=\"ci\">{n} after a rejected call</span>"),
    };
    out.push_str(&format!(
        "<tr{}><td class=\"mono sticky-name\">{}</td><td class=\"num\"{}>{}</td><td class=\"nowrap\">{}</td><td class=\"num\"{}>{}{}</td>\
         <td class=\"num\"{}>{}</td><td class=\"num\"{}>{}{}</td><td class=\"num\"{}>{}{}</td>\
         <td class=\"num\"{}>{}{}</td><td>{}</td></tr>\n",
        attrs,
        escape(&r.config_id),
        dv(Some(r.window as f64)),
        window,
        escape(&r.dataset),
        dv(Some(r.probes as f64)),
        r.probes,
        rejected,
        dv(Some(r.conversations as f64)),
        r.conversations,
        dv(r.real.value),
        pct(r.real.value),
        ci(r.real.interval),
        dv(r.stand_in.value),
        pct(r.stand_in.value),
        ci(r.stand_in.interval),
        dv(d.mean),
        d.mean.map(|m| format!("{:+.1} pt", m * 100.0)).unwrap_or_else(|| "–".into()),
        how,
        escape(&reading),
    ));
}

/// One paired compaction: at one or more checkpoints of a conversation, the compaction whose
/// summary the context held under `recorded` and under a summarizing configuration.
struct Paired<'a> {
    dataset: &'a str,
    conversation: &'a str,
    window: Option<u64>,
    config_id: &'a str,
    strategy: &'a str,
    checkpoints: Vec<u32>,
    real: &'a CompactionRecord,
    theirs: &'a CompactionRecord,
}

/// The last compaction with a summary at or before `call`.
fn held_at(events: &[CompactionRecord], call: u64) -> Option<(usize, &CompactionRecord)> {
    events.iter().enumerate().rev().find(|(_, e)| u64::from(e.call) <= call && !e.summary.is_empty())
}

/// Every paired compaction of the run, grouped by configuration (in experiment order), each
/// group in conversation order. A checkpoint at p% is the call ceil(p% of the calls) of the
/// longer of the two replays; the pair is the compaction each held there, once per distinct
/// pair of events.
fn pairs(data: &RunData) -> Vec<Vec<Paired<'_>>> {
    let configs = &data.manifest.experiment.configurations;
    let summarizing = summarizing(data);
    let mut by_config: BTreeMap<&str, BTreeMap<(&str, &str), &PairRecord>> = BTreeMap::new();
    for r in &data.records {
        by_config.entry(&r.config_id).or_default().insert((&r.dataset, &r.conversation_id), r);
    }
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    for reference in configs.iter().filter(|c| c.strategy == RECORDED) {
        let real_records = by_config.get(reference.config_id.as_str()).unwrap_or(&empty);
        for c in configs.iter().filter(|c| c.window == reference.window && summarizing.contains(&c.config_id)) {
            let mine = by_config.get(c.config_id.as_str()).unwrap_or(&empty);
            let mut group: Vec<Paired<'_>> = Vec::new();
            for (key, real) in real_records {
                let (Some(other), PairOutcome::Ok(rm)) = (mine.get(key), &real.outcome) else { continue };
                let PairOutcome::Ok(om) = &other.outcome else { continue };
                let calls = rm.calls.max(om.calls);
                let mut seen: Vec<(usize, usize)> = Vec::new();
                for percent in runlog::settings::CHECKPOINTS {
                    let call = (calls * u64::from(percent)).div_ceil(100).max(1);
                    let (Some((ri, real_event)), Some((oi, their_event))) =
                        (held_at(&rm.compaction_events, call), held_at(&om.compaction_events, call))
                    else {
                        continue;
                    };
                    if let Some(k) = seen.iter().position(|p| *p == (ri, oi)) {
                        let at = group.len() - seen.len() + k;
                        group[at].checkpoints.push(percent);
                        continue;
                    }
                    seen.push((ri, oi));
                    group.push(Paired {
                        dataset: key.0,
                        conversation: key.1,
                        window: c.window,
                        config_id: &c.config_id,
                        strategy: &c.strategy,
                        checkpoints: vec![percent],
                        real: real_event,
                        theirs: their_event,
                    });
                }
            }
            if !group.is_empty() {
                out.push(group);
            }
        }
    }
    out
}

/// A summary cut at [`MAX_SUMMARY_CHARS`] characters, with a note of what was cut.
fn cut(summary: &str) -> String {
    let chars = summary.chars().count();
    let mut text: String = summary.chars().take(MAX_SUMMARY_CHARS).collect();
    if chars > MAX_SUMMARY_CHARS {
        text.push_str(&format!(
            "\n\u{2026} ({} more characters; compactions.csv has the full text)",
            chars - MAX_SUMMARY_CHARS
        ));
    }
    text
}

/// The paired compactions, taken in turn from each configuration while they fit the bounds.
fn paired(out: &mut String, page: &Page<'_>, stand_in: bool) {
    let groups = pairs(page.data);
    let total: usize = groups.iter().map(Vec::len).sum();
    let theirs = if stand_in { "stand-in" } else { "summarizer" };
    out.push_str(&format!(
        "<h3 id=\"paired-compactions\">Paired compactions: the real summary beside the {theirs}'s</h3>\n"
    ));
    if total == 0 {
        out.push_str(
            "<p class=\"note\">No conversation held a summary under <code>recorded</code> and under a summarizing \
             configuration at the same checkpoint.</p>\n",
        );
        return;
    }
    out.push_str(&format!(
        "<p class=\"note\">At each checkpoint (25%, 50%, 75% and 100% of a conversation's calls), the summary the \
         context held under <code>recorded</code> (the recorded agent's own) and under a summarizing configuration of \
         the same window, side by side. {} Texts are cut at {MAX_SUMMARY_CHARS} characters; at most \
         {MAX_PAIRED_COMPACTIONS} pairs are shown, taken in turn from each configuration.</p>\n",
        if stand_in {
            "The right-hand text is written by the offline stand-in (an extractive summarizer, not a model), \
             whichever strategy's compaction it stands in: it is labelled <b>stand-in</b>, not with the \
             strategy's name."
        } else {
            ""
        }
    ));
    // In turn from each configuration; each takes its next pair whose real summary is not shown
    // yet, so the pairs shown cover as many of the recording's compactions as they can.
    let mut shown: Vec<(usize, usize, String)> = Vec::new();
    let mut used: Vec<Vec<bool>> = groups.iter().map(|g| vec![false; g.len()]).collect();
    let mut real_shown: Vec<(&str, &str, u32)> = Vec::new();
    let mut bytes = 0usize;
    'all: loop {
        let mut any = false;
        for (g, group) in groups.iter().enumerate() {
            let fresh = (0..group.len()).find(|&k| {
                !used[g][k] && !real_shown.contains(&(group[k].dataset, group[k].conversation, group[k].real.call))
            });
            let Some(k) = fresh.or_else(|| (0..group.len()).find(|&k| !used[g][k])) else { continue };
            any = true;
            if shown.len() >= MAX_PAIRED_COMPACTIONS {
                break 'all;
            }
            let p = &group[k];
            let html = pair_html(page, p, stand_in);
            if bytes + html.len() > MAX_PAIRED_BYTES {
                break 'all;
            }
            bytes += html.len();
            used[g][k] = true;
            real_shown.push((p.dataset, p.conversation, p.real.call));
            shown.push((g, k, html));
        }
        if !any {
            break;
        }
    }
    if shown.len() < total {
        out.push_str(&format!(
            "<p class=\"note\" id=\"paired-left-out\">Showing {} of {total} paired compactions (at most \
             {MAX_PAIRED_COMPACTIONS}, in no more than {} kB, to keep the page under its size bound); \
             compactions.csv has every summary.</p>\n",
            shown.len(),
            MAX_PAIRED_BYTES / 1000
        ));
    }
    shown.sort_by_key(|(g, k, _)| (*g, *k));
    for (_, _, html) in shown {
        out.push_str(&html);
    }
}

fn pair_html(page: &Page<'_>, p: &Paired<'_>, stand_in: bool) -> String {
    let at: Vec<String> = p.checkpoints.iter().map(|c| format!("{c}%")).collect();
    let theirs_label = if stand_in {
        format!("stand-in (offline summarizer), in {}'s compaction", p.strategy)
    } else {
        format!("{}'s summary", p.strategy)
    };
    format!(
        "<details class=\"pair\"{}><summary>{}{} <span class=\"mono\">{}</span> <span class=\"note\">{}</span></summary>\n\
         <div class=\"side-by-side\"><div><h5>real summary (<code>recorded</code>) \u{b7} call {} \u{b7} {} characters</h5>\
         <pre>{}</pre></div><div><h5>{} \u{b7} call {} \u{b7} {} characters</h5><pre>{}</pre></div></div></details>\n",
        page.of_dataset(p.dataset),
        page.swatch(p.strategy),
        escape(if stand_in { "stand-in" } else { p.strategy }),
        escape(p.config_id),
        escape(&format!(
            "{} / {} \u{b7} {} \u{b7} held at {} of the calls",
            p.dataset,
            p.conversation,
            window_label(p.window),
            at.join(", ")
        )),
        p.real.call,
        p.real.summary.chars().count(),
        escape(&cut(&p.real.summary)),
        escape(&theirs_label),
        p.theirs.call,
        p.theirs.summary.chars().count(),
        escape(&cut(&p.theirs.summary)),
    )
}
