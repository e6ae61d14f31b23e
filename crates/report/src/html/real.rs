//! Real summaries beside the strategies' summaries: the `recorded` reference (the recording's
//! own compactions) against each summarizing configuration on the probes at risk under both
//! ([`crate::real`]). Nothing is drawn when the run has no `recorded` configuration.

use runlog::log::RunData;

use super::{ci, dv, escape, pct};
use crate::real::{compare, has_recorded, Comparison};

/// The whole section, or nothing without a `recorded` configuration.
pub(crate) fn section(out: &mut String, data: &RunData) {
    if !has_recorded(data) {
        return;
    }
    let rows = compare(data);
    let stand_in = data.manifest.stand_in_summary;
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
    out.push_str(&format!(
        "<table class=\"sortable\"><thead><tr><th class=\"num\">window</th><th>dataset</th><th>configuration</th>\
         <th class=\"num\">probes at risk under both</th><th class=\"num\">conversations</th>\
         <th class=\"num\">real summary (<code>recorded</code>)</th><th class=\"num\">{theirs}</th>\
         <th class=\"num\">{} &minus; real</th><th>reading</th></tr></thead><tbody>\n",
        if stand_in { "stand-in" } else { "summarizer" },
    ));
    for r in &rows {
        row(out, r, stand_in);
    }
    out.push_str("</tbody></table>\n");
}

fn row(out: &mut String, r: &Comparison, stand_in: bool) {
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
        "<tr data-of=\"{}\"><td class=\"num\"{}>{}</td><td>{}</td><td class=\"mono\">{}</td><td class=\"num\"{}>{}{}</td>\
         <td class=\"num\"{}>{}</td><td class=\"num\"{}>{}{}</td><td class=\"num\"{}>{}{}</td>\
         <td class=\"num\"{}>{}{}</td><td>{}</td></tr>\n",
        escape(&r.dataset),
        dv(Some(r.window as f64)),
        window,
        escape(&r.dataset),
        escape(&r.config_id),
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
