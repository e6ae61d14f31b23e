//! What the strategies share, in one place: [`ParamError`], the baselines' meters ([`Counter`],
//! `Meter`) and the small helpers of the production systems (window fractions, pair-safe
//! cuts, user turns and the summary-request fit check). No strategy imports another; what two
//! of them need lives here, and the pairing rule lives in the kernel (`compaction::pairing`).
//!
//! Every helper is pure and works on entry indices of a [`Context`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use compaction::context::{Context, Entry, Origin};
use compaction::message::Role;
use compaction::tokens::{CharsOver4Role4, Exact, TokenCounter};
use compaction::Slot;

/// A parameter value that is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{strategy}: parameter `{param}`: {problem}")]
pub struct ParamError {
    /// The strategy.
    pub strategy: &'static str,
    /// The parameter.
    pub param: &'static str,
    /// What is wrong with its value.
    pub problem: String,
}

impl ParamError {
    /// A problem with `param` of `strategy`.
    pub fn new(strategy: &'static str, param: &'static str, problem: impl Into<String>) -> ParamError {
        ParamError { strategy, param, problem: problem.into() }
    }
}

/// Which meter a baseline counts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
pub enum Counter {
    /// Exact BPE counting with the GPT-4o vocabulary, plus the chat template's overhead.
    #[default]
    #[serde(rename = "o200k_base")]
    O200kBase,
    /// Exact BPE counting with the GPT-4 vocabulary, plus the chat template's overhead.
    #[serde(rename = "cl100k_base")]
    Cl100kBase,
    /// Approximate: 4 tokens per message plus `ceil(chars / 4)` of its text, calls and outputs.
    #[serde(rename = "chars/4")]
    CharsOver4,
}

/// A [`Counter`] made concrete.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Meter {
    Exact(Exact),
    Approx(CharsOver4Role4),
}

impl Meter {
    pub fn new(counter: Counter) -> Meter {
        match counter {
            Counter::O200kBase => Meter::Exact(Exact::o200k()),
            Counter::Cl100kBase => Meter::Exact(Exact::cl100k()),
            Counter::CharsOver4 => Meter::Approx(CharsOver4Role4),
        }
    }
    pub fn counter(&self) -> &dyn TokenCounter {
        match self {
            Meter::Exact(e) => e,
            Meter::Approx(a) => a,
        }
    }
}

/// `floor(window x ratio)`.
pub fn fraction_of(window: u64, ratio: f64) -> u64 {
    (window as f64 * ratio).floor() as u64
}

/// Index of the first entry after the system prompt (0 or 1).
pub fn body_start(ctx: &Context) -> usize {
    usize::from(ctx.system_prompt().is_some())
}

/// Move a cut at `cut` (the first kept entry) back so that it never starts on a tool result:
/// the assistant message whose calls the results answer is kept with them. Stops at `floor`.
pub fn cut_back_to_call(ctx: &Context, mut cut: usize, floor: usize) -> usize {
    let e = ctx.entries();
    while cut > floor && cut < e.len() && e[cut].role() == Role::Tool {
        cut -= 1;
    }
    cut
}

/// Move a cut at `cut` forward past tool results, so that the results stay with the call
/// that precedes the cut (the call is on the summarized side, so are its results).
pub fn cut_past_results(ctx: &Context, mut cut: usize) -> usize {
    let e = ctx.entries();
    while cut < e.len() && e[cut].role() == Role::Tool {
        cut += 1;
    }
    cut
}

/// Starts of the user turns (indices of user messages that are recorded or masked, not summaries
/// or inserted notices), oldest first.
pub fn user_turns(ctx: &Context) -> Vec<usize> {
    ctx.entries()
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.role() == Role::User && matches!(e.origin(), Origin::Recorded { .. } | Origin::Masked { .. })
        })
        .map(|(i, _)| i)
        .collect()
}

/// The text of the live summary, if the context holds one.
pub fn live_summary(ctx: &Context) -> Option<String> {
    ctx.summaries().last().map(|(_, e)| e.message().content.clone())
}

/// The next summary round.
pub fn next_round(ctx: &Context) -> u32 {
    ctx.last_round() + 1
}

/// Widen every live summary's coverage of `out` with `inherited` (the recorded messages an
/// earlier summary, now replaced, stood for).
pub fn inherit_covers(out: &mut Context, inherited: &[usize]) {
    if inherited.is_empty() {
        return;
    }
    let entries: Vec<Entry> = out
        .entries()
        .iter()
        .map(|e| match e.origin() {
            Origin::Summary { round, covers } => {
                let mut all: Vec<usize> = covers.iter().chain(inherited).copied().collect();
                all.sort_unstable();
                all.dedup();
                Entry::new(e.message().clone(), Origin::Summary { round: *round, covers: all })
            }
            _ => e.clone(),
        })
        .collect();
    *out = Context::from_entries(entries);
}

/// `Keep` slots for `range`.
pub fn keep(range: std::ops::Range<usize>) -> impl Iterator<Item = Slot> {
    range.map(|index| Slot::Keep { index })
}

/// The summed size of entries `span` under `counter`, in tokens (a sum of per-entry tokens).
pub fn span_tokens(ctx: &Context, span: &[usize], counter: &dyn TokenCounter) -> u64 {
    span.iter().filter_map(|&i| ctx.get(i)).map(|e| e.tokens(counter)).sum()
}

/// The tokens of entry `i` as the summarizer sees it through `input` (the entry's own count
/// when the cuts leave it whole).
pub fn cut_tokens(ctx: &Context, i: usize, input: &compaction::InputCuts, counter: &dyn TokenCounter) -> u64 {
    let e = &ctx.entries()[i];
    match input.apply(e.message()) {
        std::borrow::Cow::Borrowed(_) => e.tokens(counter),
        std::borrow::Cow::Owned(m) => counter.message_tokens(&m),
    }
}

/// Whether a summary request over `span` fits the window: its input plus the room reserved for
/// the summary is at most the context window. The request a production system sends is the
/// span (with its prompt, which is small beside the history) and the output it reserves: the
/// summary's cap, but at most a quarter of the window (no source sets a summary cap larger
/// than a small model's room for output; a provider would lower it, not reject the request).
pub fn request_fits(ctx: &Context, span: &[usize], counter: &dyn TokenCounter, window: u64, output: u64) -> bool {
    span_tokens(ctx, span, counter).saturating_add(output.min(window / 4)) <= window
}

/// The plan of a system that makes one summary: `layout` with `request`, the context left
/// unchanged when the summary fails, and one note saying how the plan was reached.
pub(crate) fn summary_plan(
    trigger: compaction::Trigger,
    layout: Vec<Slot>,
    request: compaction::SummaryRequest,
    note: &str,
    value: impl Into<serde_json::Value>,
) -> compaction::Plan {
    let mut notes = serde_json::Map::new();
    notes.insert(note.into(), value.into());
    compaction::Plan {
        trigger,
        layout,
        requests: vec![request],
        fallback: compaction::Fallback::Unchanged,
        step: "compact".into(),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction::message::{Message, ToolCall};

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "read".into(), arguments: "{}".into() }
    }

    #[test]
    fn cuts_never_start_on_a_tool_result() {
        let ctx = Context::from_messages(vec![
            Message::system("s"),
            Message::user("u"),
            Message::assistant_calls("", vec![call("a"), call("b")]),
            Message::tool_result("a", "read", "x"),
            Message::tool_result("b", "read", "y"),
            Message::assistant("done"),
        ]);
        assert_eq!(cut_back_to_call(&ctx, 4, 1), 2);
        assert_eq!(cut_back_to_call(&ctx, 5, 1), 5);
        assert_eq!(cut_past_results(&ctx, 3), 5);
        assert_eq!(user_turns(&ctx), vec![1]);
        assert_eq!(body_start(&ctx), 1);
        assert_eq!(fraction_of(128_000, 0.9), 115_200);
    }
}
