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
const H: f64 = 200.0;
const PAD: f64 = 40.0;

/// The whole section.
pub(crate) fn section(out: &mut String, summaries: &[ConfigSummary], data: &RunData) {
    let pooled: Vec<&ConfigSummary> = summaries.iter().filter(|s| s.dataset == ALL_DATASETS).collect();
    out.push_str("<h2 id=\"failures\">What breaks agents</h2>\n");
    let refusals = if data.manifest.refusals.is_empty() {
        "run made before refusals ended conversations: only over-window requests did".to_string()
    } else {
        data.manifest.refusals.clone()
    };
    out.push_str(&format!("<p class=\"note\"><b>Provider refusals</b>: {}.</p>\n", escape(&refusals)));
    inapplicable(out, &pooled);
    drift(out, &pooled);
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
         to run, so they are not ranked.</p>\n<table><thead><tr><th>configuration</th><th>strategy</th>\
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
    out.push_str("</tbody></table>\n");
}

/// One line per configuration over rounds 0..=last; `y` gives the value at a round.
fn chart(
    title: &str,
    rows: &[&ConfigSummary],
    y: impl Fn(&crate::drift::Round) -> Option<f64>,
    percent: bool,
) -> String {
    let last = rows.iter().map(|s| s.drift.rounds.len()).max().unwrap_or(1).saturating_sub(1).max(1);
    let top = if percent {
        1.0
    } else {
        rows.iter().flat_map(|s| s.drift.rounds.iter().filter_map(&y)).fold(1.0_f64, f64::max)
    };
    let x = |k: usize| PAD + (W - 2.0 * PAD) * k as f64 / last as f64;
    let yy = |v: f64| H - PAD + (2.0 * PAD - H) * v / top;
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {W} {H}\" role=\"img\"><title>{}</title>\
         <line x1=\"{PAD}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#888\"/>\
         <line x1=\"{PAD}\" y1=\"{PAD}\" x2=\"{PAD}\" y2=\"{b}\" stroke=\"#888\"/>\
         <text x=\"{PAD}\" y=\"{t}\" font-size=\"10\">{}</text>\
         <text x=\"{r}\" y=\"{u}\" font-size=\"10\" text-anchor=\"end\">round {last}</text>",
        escape(title),
        if percent { "100%".to_string() } else { format!("{top:.0} tokens") },
        b = H - PAD,
        r = W - PAD,
        t = PAD - 6.0,
        u = H - PAD + 14.0,
    );
    for s in rows {
        let points: Vec<String> = s
            .drift
            .rounds
            .iter()
            .enumerate()
            .filter_map(|(k, r)| y(r).map(|v| format!("{:.1},{:.1}", x(k), yy(v))))
            .collect();
        if points.len() < 2 {
            continue;
        }
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"currentColor\" stroke-opacity=\"0.6\" points=\"{}\"><title>{}</title></polyline>",
            points.join(" "),
            escape(&s.config.config_id)
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

fn drift(out: &mut String, pooled: &[&ConfigSummary]) {
    out.push_str("<h3>Drift across repeated compactions</h3>\n");
    let rows: Vec<&ConfigSummary> = pooled.iter().copied().filter(|s| s.drift.rounds.len() > 2).collect();
    if rows.is_empty() {
        out.push_str("<p class=\"note\">No configuration compacted twice in a conversation.</p>\n");
        return;
    }
    out.push_str(
        "<p class=\"note\">Round k: a conversation's k-th call that compacted. Survival: the retention of probes whose \
         source message went through k compactions before it was asked (round 0: none). Size: the context right \
         after the k-th compaction, mean over the conversations that reached it. Growth: the size after the last \
         round over the size after the first, minus 1 (mean over conversations with two rounds or more).</p>\n",
    );
    out.push_str(&chart("Survival by compaction round", &rows, |r| r.retention, true));
    out.push_str(&chart("Context size right after each compaction round", &rows, |r| r.size_after, false));
    out.push_str(
        "<table><thead><tr><th>configuration</th><th class=\"num\">rounds (max)</th><th class=\"num\">post-compaction growth</th>\
         <th class=\"num\">median calls between compactions</th><th>survival by round</th></tr></thead><tbody>\n",
    );
    for s in rows {
        let survival: Vec<String> = s
            .drift
            .rounds
            .iter()
            .filter(|r| r.probes > 0)
            .map(|r| format!("{}: {} ({})", r.round, pct(r.retention), r.probes))
            .collect();
        out.push_str(&format!(
            "<tr><td class=\"mono\">{}</td><td class=\"num\">{}</td><td class=\"num\"{}>{}</td><td class=\"num\"{}>{}</td><td class=\"note\">{}</td></tr>\n",
            escape(&s.config.config_id),
            s.drift.rounds.len() - 1,
            dv(s.drift.post_compaction_growth),
            pct(s.drift.post_compaction_growth),
            dv(s.drift.median_calls_between_compactions),
            s.drift.median_calls_between_compactions.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".into()),
            escape(&survival.join("; "))
        ));
    }
    out.push_str("</tbody></table>\n");
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
        "<table><thead><tr><th>conversation</th><th>configuration</th><th class=\"num\">call</th><th>directive</th>\
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
    out.push_str("</tbody></table>\n");
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
         verbatim nor as a copy of its text.</p>\n<table><thead><tr><th>configuration</th><th class=\"num\">requests</th>\
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
    out.push_str("</tbody></table>\n");
}
