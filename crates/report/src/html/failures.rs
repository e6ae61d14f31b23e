//! The section on what breaks agents in production: what a provider's refusal does in the
//! run, configurations that cannot operate at their window (never ranked), drift across
//! repeated compactions (retention and context size by compaction round), directives
//! summaries put in the user's mouth, and requests sent without the user's latest message.

use runlog::log::RunData;

use super::{dv, escape, pct};
use crate::summary::{ConfigSummary, ALL_DATASETS};

/// Most fabricated directives listed.
const MAX_DIRECTIVES: usize = 60;
/// Chart size.
const W: f64 = 560.0;
const H: f64 = 220.0;

/// The whole section.
pub(crate) fn section(
    out: &mut String,
    summaries: &[ConfigSummary],
    data: &RunData,
    color: &dyn Fn(&str) -> &'static str,
) {
    let pooled: Vec<&ConfigSummary> = summaries.iter().filter(|s| s.dataset == ALL_DATASETS).collect();
    out.push_str("<h2 id=\"failures\">What breaks agents</h2>\n");
    let refusals = if data.manifest.refusals.is_empty() {
        "run made before refusals ended conversations: only over-window requests did".to_string()
    } else {
        data.manifest.refusals.clone()
    };
    out.push_str(&format!("<p class=\"note\"><b>Provider refusals</b>: {}.</p>\n", escape(&refusals)));
    inapplicable(out, &pooled);
    drift(out, &pooled, color);
    directives(out, data);
    live_request(out, &pooled);
}

fn inapplicable(out: &mut String, pooled: &[&ConfigSummary]) {
    let rows: Vec<&&ConfigSummary> = pooled.iter().filter(|s| !s.applicable).collect();
    out.push_str("<h3>Configurations that cannot operate</h3>\n");
    if rows.is_empty() {
        out.push_str("<p class=\"note\">Every configuration can operate at its window.</p>\n");
        return;
    }
    out.push_str(
        "<p class=\"note\">These strategies cannot work at this window with these parameters: they were never able \
         to run, so they are not ranked.</p>\n<div class=\"scroll\"><table><thead><tr><th>configuration</th><th>strategy</th>\
         <th class=\"num\">window</th><th>why not</th></tr></thead><tbody>\n",
    );
    for s in rows {
        out.push_str(&format!(
            "<tr><td class=\"mono\">{}</td><td>{} <span class=\"tag\">inapplicable</span></td><td class=\"num\">{}</td><td>{}</td></tr>\n",
            escape(&s.config.config_id),
            escape(&s.config.strategy),
            s.config.window.map(|w| w.to_string()).unwrap_or_else(|| "own".into()),
            escape(&s.inapplicable_reason)
        ));
    }
    out.push_str("</tbody></table></div>\n");
}

/// A configuration's line style in the drift charts: its strategy's colour, and a dash
/// pattern per window (solid for the smallest), so two windows of one strategy stay apart.
struct Line<'a> {
    summary: &'a ConfigSummary,
    color: &'static str,
    dash: &'static str,
}

const DASHES: [&str; 4] = ["", "6 3", "2 2", "8 3 2 3"];

fn lines<'a>(rows: &[&'a ConfigSummary], color: &dyn Fn(&str) -> &'static str) -> Vec<Line<'a>> {
    let mut windows: Vec<Option<u64>> = rows.iter().map(|s| s.config.window).collect();
    windows.sort_by_key(|w| w.unwrap_or(u64::MAX));
    windows.dedup();
    rows.iter()
        .map(|s| Line {
            summary: s,
            color: color(&s.config.strategy),
            dash: DASHES[windows.iter().position(|w| *w == s.config.window).unwrap_or(0) % DASHES.len()],
        })
        .collect()
}

fn dash_attr(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{dash}\"")
    }
}

fn short_tokens(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// One line per configuration over rounds 0..=last, coloured by strategy; `y` gives the value
/// at a round. Ticks on both axes.
fn chart(title: &str, lines: &[Line<'_>], y: impl Fn(&crate::drift::Round) -> Option<f64>, percent: bool) -> String {
    const LEFT: f64 = 52.0;
    const RIGHT: f64 = 12.0;
    const TOP: f64 = 12.0;
    const BOTTOM: f64 = 34.0;
    let last = lines.iter().map(|l| l.summary.drift.rounds.len()).max().unwrap_or(1).saturating_sub(1).max(1);
    let top = if percent {
        1.0
    } else {
        lines.iter().flat_map(|l| l.summary.drift.rounds.iter().filter_map(&y)).fold(1.0_f64, f64::max) * 1.05
    };
    let x = |k: f64| LEFT + (W - LEFT - RIGHT) * k / last as f64;
    let yy = |v: f64| H - BOTTOM - (H - BOTTOM - TOP) * v / top;
    let mut svg = format!(
        "<svg class=\"drift\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{t}\"><title>{t}</title>",
        t = escape(title)
    );
    for t in super::svg::nice_ticks(0.0, top, 4) {
        svg.push_str(&format!(
            "<line class=\"gridline\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 5.0,
            yy(t) + 4.0,
            if percent { format!("{:.0}%", t * 100.0) } else { short_tokens(t) },
            y = yy(t)
        ));
    }
    for t in super::svg::nice_ticks(0.0, last as f64, 6) {
        svg.push_str(&format!(
            "<line class=\"axis\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            H - BOTTOM,
            H - BOTTOM + 4.0,
            H - BOTTOM + 16.0,
            t.round(),
            x = x(t)
        ));
    }
    svg.push_str(&format!(
        "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{r:.1}\" y1=\"{b:.1}\" y2=\"{b:.1}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{b:.1}\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">compaction round</text>\
         <text transform=\"translate(12 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        (LEFT + W - RIGHT) / 2.0,
        H - 4.0,
        (TOP + H - BOTTOM) / 2.0,
        if percent { "survival" } else { "tokens" },
        r = W - RIGHT,
        b = H - BOTTOM,
    ));
    for l in lines {
        let points: Vec<String> = l
            .summary
            .drift
            .rounds
            .iter()
            .enumerate()
            .filter_map(|(k, r)| y(r).map(|v| format!("{:.1},{:.1}", x(k as f64), yy(v))))
            .collect();
        if points.len() < 2 {
            continue;
        }
        svg.push_str(&format!(
            "<polyline class=\"drift-line\" stroke=\"{}\"{} points=\"{}\"><title>{}</title></polyline>",
            l.color,
            dash_attr(l.dash),
            points.join(" "),
            escape(&l.summary.config.config_id)
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

/// The drift charts' legend: one entry per configuration, its strategy's colour and its
/// window's dash.
fn legend(lines: &[Line<'_>]) -> String {
    let mut out = String::from("<div class=\"legend drift-legend\">");
    for l in lines {
        out.push_str(&format!(
            "<span title=\"{}\"><svg viewBox=\"0 0 22 8\" aria-hidden=\"true\"><line x1=\"0\" x2=\"22\" y1=\"4\" \
             y2=\"4\" stroke=\"{}\" stroke-width=\"2\"{}/></svg>{} · {}</span> ",
            escape(&l.summary.config.config_id),
            l.color,
            dash_attr(l.dash),
            escape(&l.summary.config.strategy),
            escape(&crate::verdict::render::window_label(l.summary.config.window))
        ));
    }
    out.push_str("</div>\n");
    out
}

/// Rounds listed per configuration in the drift table; the rest are counted.
const MAX_SURVIVAL_ROUNDS: usize = 8;

fn drift(out: &mut String, pooled: &[&ConfigSummary], color: &dyn Fn(&str) -> &'static str) {
    out.push_str("<h3 id=\"drift\">Drift across repeated compactions</h3>\n");
    let rows: Vec<&ConfigSummary> = pooled.iter().copied().filter(|s| s.drift.rounds.len() > 2).collect();
    if rows.is_empty() {
        out.push_str("<p class=\"note\">No configuration compacted twice in a conversation.</p>\n");
        return;
    }
    out.push_str(
        "<p class=\"note\">Round k: a conversation's k-th call that compacted. Survival: the retention of probes whose \
         source message went through k compactions before it was asked (round 0: none). Size: the context right \
         after the k-th compaction, mean over the conversations that reached it. Growth: the size after the last \
         round over the size after the first, minus 1 (mean over conversations with two rounds or more). Every \
         dataset pooled; one line per configuration, in its strategy's colour, dashed by window.</p>\n",
    );
    let lines = lines(&rows, color);
    out.push_str(&legend(&lines));
    out.push_str("<div class=\"charts\">\n<div class=\"chart big\"><h4>Survival by compaction round</h4>");
    out.push_str(&chart("Survival by compaction round", &lines, |r| r.retention, true));
    out.push_str("</div>\n<div class=\"chart big\"><h4>Context size right after each compaction round</h4>");
    out.push_str(&chart("Context size right after each compaction round", &lines, |r| r.size_after, false));
    out.push_str("</div>\n</div>\n");
    out.push_str(
        "<div class=\"scroll\"><table class=\"sticky\"><thead><tr><th>configuration</th><th class=\"num\">rounds (max)</th>\
         <th class=\"num\">post-compaction growth</th><th class=\"num\">median calls between compactions</th>\
         <th>survival by round (probes)</th></tr></thead><tbody>\n",
    );
    for s in rows {
        let with_probes: Vec<&crate::drift::Round> = s.drift.rounds.iter().filter(|r| r.probes > 0).collect();
        let mut survival: Vec<String> = with_probes
            .iter()
            .take(MAX_SURVIVAL_ROUNDS)
            .map(|r| format!("{}: {} ({})", r.round, pct(r.retention), r.probes))
            .collect();
        if with_probes.len() > MAX_SURVIVAL_ROUNDS {
            survival.push(format!("… {} more rounds", with_probes.len() - MAX_SURVIVAL_ROUNDS));
        }
        out.push_str(&format!(
            "<tr><td class=\"mono sticky-name\">{}{}</td><td class=\"num\">{}</td><td class=\"num\"{}>{}</td><td class=\"num\"{}>{}</td><td class=\"note wrap\">{}</td></tr>\n",
            super::swatch_of(color(&s.config.strategy)),
            escape(&s.config.config_id),
            s.drift.rounds.len() - 1,
            dv(s.drift.post_compaction_growth),
            pct(s.drift.post_compaction_growth),
            dv(s.drift.median_calls_between_compactions),
            s.drift.median_calls_between_compactions.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".into()),
            escape(&survival.join("; "))
        ));
    }
    out.push_str("</tbody></table></div>\n");
}

fn directives(out: &mut String, data: &RunData) {
    out.push_str("<h3>Instructions put in the user's mouth</h3>\n");
    let offline = data.manifest.summarizer == "offline";
    let found: Vec<_> = data
        .records
        .iter()
        .filter_map(|r| match &r.outcome {
            runlog::record::PairOutcome::Ok(m) => Some((r, m)),
            _ => None,
        })
        .flat_map(|(r, m)| m.fabricated_directives.iter().map(move |d| (r, d)))
        .collect();
    let note = if offline {
        " The offline stand-in summarizer copies sentences and cannot invent an instruction: only the `recorded` \
         reference's summaries (the recorded agent's own) are checked in this run."
    } else {
        ""
    };
    out.push_str(&format!(
        "<p class=\"note\">A directive a summary attributes to the user (in quotes, or after \u{201c}the user asked / said / \
         confirmed / approved\u{201d}) that no user message holds.{}</p>\n",
        escape(note)
    ));
    if found.is_empty() {
        out.push_str("<p class=\"note\">None found.</p>\n");
        return;
    }
    out.push_str(
        "<div class=\"scroll\"><table><thead><tr><th>conversation</th><th>configuration</th><th class=\"num\">call</th><th>directive</th>\
         <th>the summary's sentence</th><th>the person's nearest words</th></tr></thead><tbody>\n",
    );
    for (r, d) in found.iter().take(MAX_DIRECTIVES) {
        out.push_str(&format!(
            "<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&r.conversation_id),
            escape(&r.config_id),
            d.call,
            escape(&d.directive),
            escape(&d.sentence),
            if d.nearest.is_empty() { "(no sentence shares a word)".to_string() } else { escape(&d.nearest) }
        ));
    }
    out.push_str("</tbody></table></div>\n");
    if found.len() > MAX_DIRECTIVES {
        out.push_str(&format!(
            "<p class=\"note\">{} more in results.jsonl (<code>fabricated_directives</code>).</p>\n",
            found.len() - MAX_DIRECTIVES
        ));
    }
}

fn live_request(out: &mut String, pooled: &[&ConfigSummary]) {
    out.push_str("<h3>The live request dropped</h3>\n");
    let rows: Vec<&&ConfigSummary> = pooled.iter().filter(|s| s.latest_user_message_dropped > 0).collect();
    if rows.is_empty() {
        out.push_str("<p class=\"note\">Every request sent held the user's most recent message.</p>\n");
        return;
    }
    out.push_str(
        "<p class=\"note\">Requests sent without the user's most recent message (the agent's current ask), neither \
         verbatim nor as a copy of its text.</p>\n<div class=\"scroll\"><table><thead><tr><th>configuration</th><th class=\"num\">requests</th>\
         <th class=\"num\">of calls</th></tr></thead><tbody>\n",
    );
    for s in rows {
        out.push_str(&format!(
            "<tr><td class=\"mono\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
            escape(&s.config.config_id),
            s.latest_user_message_dropped,
            s.calls
        ));
    }
    out.push_str("</tbody></table></div>\n");
}
