//! The stand-in caveat: when the run's summaries come from the offline stand-in, the
//! leaderboard says which configurations' retention rests on them.

use runlog::log::RunData;

use super::escape;

/// A note for the leaderboard, empty unless the summaries are a stand-in.
pub(super) fn note(data: &RunData) -> String {
    if !data.manifest.stand_in_summary {
        return String::new();
    }
    let configs = crate::real::summarizing(data);
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
