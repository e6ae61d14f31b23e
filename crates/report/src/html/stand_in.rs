//! The stand-in caveat: when the run's summaries come from the offline stand-in, the
//! leaderboard says which configurations' retention rests on them.

use runlog::log::RunData;
use runlog::record::PairOutcome;

use super::escape;

/// The configurations whose pairs inserted a summary (the `recorded` reference aside: its
/// summaries are the recording's own).
fn summarizing(data: &RunData) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in &data.records {
        let PairOutcome::Ok(m) = &r.outcome else { continue };
        let summarized = r.strategy != "recorded" && m.compaction_events.iter().any(|e| !e.summary.is_empty());
        if summarized && !out.contains(&r.config_id) {
            out.push(r.config_id.clone());
        }
    }
    out.sort();
    out
}

/// A note for the leaderboard, empty unless the summaries are a stand-in.
pub(super) fn note(data: &RunData) -> String {
    if !data.manifest.stand_in_summary {
        return String::new();
    }
    let configs = summarizing(data);
    if configs.is_empty() {
        return String::new();
    }
    format!(
        "<p class=\"note stand-in\"><b>stand-in summary</b>: the summaries of {} are written by the offline \
         stand-in (an extractive summarizer, not a model), so their retention measures the stand-in, not the \
         strategy's prompt. Ranking a summarizer against masking or truncation needs <code>{}</code>.</p>\n",
        configs.iter().map(|c| format!("<span class=\"mono\">{}</span>", escape(c))).collect::<Vec<_>>().join(", "),
        escape(crate::verdict::STAND_IN_REMEDY)
    )
}
