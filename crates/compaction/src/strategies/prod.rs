//! Small helpers the production-system strategies share: window fractions, pair-safe cuts,
//! user turns and the summary-request fit check.
//!
//! Every helper is pure and works on entry indices of a [`Context`].

use crate::context::{Context, Entry, Origin};
use crate::message::Role;
use crate::strategy::Slot;
use crate::tokens::TokenCounter;

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
pub fn cut_tokens(ctx: &Context, i: usize, input: &crate::strategy::InputCuts, counter: &dyn TokenCounter) -> u64 {
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
    trigger: crate::strategy::Trigger,
    layout: Vec<Slot>,
    request: crate::strategy::SummaryRequest,
    note: &str,
    value: impl Into<serde_json::Value>,
) -> crate::strategy::Plan {
    let mut notes = serde_json::Map::new();
    notes.insert(note.into(), value.into());
    crate::strategy::Plan {
        trigger,
        layout,
        requests: vec![request],
        fallback: crate::strategy::Fallback::Unchanged,
        step: "compact".into(),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, ToolCall};

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
