//! The judge's evidence for a probe's kept facts, shown when its "kept" count is clicked:
//! per fact, the alias that matched and where (message or entry, character span).

use runlog::record::{FoundIn, ProbeScore};

use super::escape;

/// `(k of n facts kept)`, opening on a click to the evidence of each kept fact; plain text when
/// the judge recorded none (an LLM judge, or a run written before evidence was recorded).
pub(super) fn kept(score: &ProbeScore, aliases: Option<&[Vec<String>]>) -> String {
    let n = score.facts.len();
    let k = score.facts.iter().filter(|f| **f != FoundIn::Lost).count();
    let label = format!("({k} of {n} facts kept)");
    let lines: Vec<String> = score
        .evidence
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let e = e.as_ref()?;
            let fact = aliases.and_then(|a| a.get(i)).map_or_else(|| format!("fact #{}", i + 1), |a| a.join(" | "));
            Some(format!("<div><span class=\"mono\">{}</span>: {}</div>", escape(&fact), escape(&e.describe())))
        })
        .collect();
    if lines.is_empty() {
        return format!("<span class=\"ci\">{label}</span>");
    }
    format!("<details class=\"evidence\"><summary class=\"ci\">{label}</summary>{}</details>", lines.concat())
}
