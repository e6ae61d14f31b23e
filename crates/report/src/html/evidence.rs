//! The judge's evidence for a probe's kept facts, shown when its "kept" count is clicked:
//! per fact, the alias that matched and where (message or entry, character span).

use runlog::record::ProbeScore;

use super::plain;

/// Per kept fact, `[fact index, where the judge found it]` (the alias that matched, the message
/// or entry and the character span); empty when the judge recorded none (an LLM judge, or a run
/// written before evidence was recorded). The page draws it when the "kept" count is clicked.
pub(super) fn kept(score: &ProbeScore) -> serde_json::Value {
    let lines: Vec<serde_json::Value> = score
        .evidence
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some(serde_json::json!([i, plain(&e.as_ref()?.describe())])))
        .collect();
    serde_json::Value::Array(lines)
}
