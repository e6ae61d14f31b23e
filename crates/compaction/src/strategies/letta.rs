//! `letta`: Letta's sliding-window summarizer.
//!
//! Source: letta-ai/letta `letta/services/summarizer/summarizer_sliding_window.py`
//! (`summarize_via_sliding_window`, `_find_safe_cutoff_index`,
//! `_find_earliest_safe_cutoff_for_tool_group`, `_is_cutoff_safe`),
//! `letta/services/summarizer/summarizer_config.py` (`sliding_window_percentage = 0.3`,
//! `clip_chars = 2000`; a later version raises the clip to 50,000) and `thresholds.py`
//! (summarize at 100% of the window, 90% for the GPT-5 family). Read with the code search.
//!
//! - **Trigger**: the request above `trigger_ratio` of the window (1.0: at the window, which the
//!   replay reaches just before an overflow; 0.9 for GPT-5 models).
//! - **Cut**: over the messages after the system prompt (n of them), the evicted share starts at
//!   `sliding_window_percentage` (0.3) and grows by 0.10 *before* each try (so the first try
//!   evicts 40%), with the source's floating-point arithmetic; each try cuts at
//!   `round(share x n)` (Python's round, ties to even), at most the last message, moved to a
//!   safe cut: searching back from there for an assistant message, then a user message, then
//!   any position, adjusted so no tool result is kept without its call and no call without its
//!   results; the last message is never evicted. It stops as soon as the system prompt plus the
//!   kept messages are under `(1 - 0.3)` of the window, or when the share reaches 1.0.
//! - **No cut found** (share 1.0 reached or no safe position): the source raises, and its caller
//!   falls back to summarizing everything (`mode = "all"`): here that is the plan, step `all`,
//!   keeping only the last message.
//! - **Summary**: of the evicted messages (an earlier summary among them), clipped to
//!   `clip_chars` characters plus `... [summary truncated to fit]`; placed as a user message
//!   right after the system prompt, then the kept messages.
//! - **Failure**: a failed summary fails the step; the context is unchanged.
//!
//! Departures: Letta's memory messages (core memory blocks re-injected after compaction) have
//! no counterpart in a recording; the token count is exact `o200k_base` (Letta's provider
//! counter) rather than its bytes/4 x 1.3 fallback.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{prod, ParamError};
use crate::context::Context;
use crate::invariants::ViolationKind;
use crate::message::Role;
use crate::strategy::{
    apply_layout, Budget, Compacted, Fallback, Plan, Promises, PromptKind, Slot, Strategy, SummaryOutcome,
    SummaryRequest, Trigger,
};
use crate::tokens::{Exact, TokenCounter};

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Letta sliding window: at the window, summarizes the oldest 40% of the messages (growing \
     by 10% until the rest is under 70% of the window), cut at an assistant message without splitting a tool call; \
     summary clipped to 2,000 characters, placed after the system prompt.";

/// The marker appended to a clipped summary.
pub const CLIP_MARKER: &str = "... [summary truncated to fit]";

/// Parameters of `letta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Share of the messages evicted before the first 10% step, and 1 minus the share of the
    /// window the kept messages must fit (0.3).
    pub sliding_window_percentage: f64,
    /// Summarize when the request is above this fraction of the window (1.0; 0.9 for GPT-5).
    pub trigger_ratio: f64,
    /// The summary is cut to this many characters (2,000).
    pub clip_chars: usize,
    /// Output cap of the summary request.
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params { sliding_window_percentage: 0.3, trigger_ratio: 1.0, clip_chars: 2_000, summary_max_tokens: 4_096 }
    }
}

/// The `letta` strategy.
#[derive(Debug, Clone)]
pub struct Letta {
    params: Params,
    meter: Exact,
}

/// Where the window slides: `cut` is the first kept entry (a context index).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cut {
    pub cut: usize,
    /// The evicted share of the last try, or `None` for the fall-back to summarizing all.
    pub share: Option<f64>,
}

/// Python's `round`: half to even.
fn py_round(x: f64) -> usize {
    let r = x.round();
    let r = if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 { r - x.signum() } else { r };
    r.max(0.0) as usize
}

/// The tool pairing of `conv` (context entries `base..`) that `_is_cutoff_safe` and
/// `_find_earliest_safe_cutoff_for_tool_group` read, gathered once so that each candidate cut
/// costs O(1) instead of a scan of the conversation (a quadratic search on a long one).
struct Pairs {
    /// Per position `k`: the lowest, over the results at `k..`, of the position of the latest
    /// call with the result's id before the result (`usize::MAX` when none).
    latest_call_after: Vec<usize>,
    /// Per position `k`: the lowest, over the results at `k..`, of the position of the first
    /// call with the result's id anywhere in `conv` (`usize::MAX` when none).
    first_call_after: Vec<usize>,
}

impl Pairs {
    fn new(ctx: &Context, base: usize) -> Pairs {
        let e = &ctx.entries()[base..];
        let mut calls: HashMap<&str, Vec<usize>> = HashMap::new();
        for (k, entry) in e.iter().enumerate() {
            for c in &entry.message().tool_calls {
                let at = calls.entry(c.id.as_str()).or_default();
                if at.last() != Some(&k) {
                    at.push(k);
                }
            }
        }
        let n = e.len();
        let mut latest_call_after = vec![usize::MAX; n + 1];
        let mut first_call_after = vec![usize::MAX; n + 1];
        for k in (0..n).rev() {
            let (mut latest, mut first) = (usize::MAX, usize::MAX);
            let m = e[k].message();
            if m.role == Role::Tool {
                if let Some(at) = m.tool_call_id.as_deref().and_then(|id| calls.get(id)) {
                    let before = at.partition_point(|&j| j < k);
                    if before > 0 {
                        latest = at[before - 1];
                    }
                    first = at[0];
                }
            }
            latest_call_after[k] = latest.min(latest_call_after[k + 1]);
            first_call_after[k] = first.min(first_call_after[k + 1]);
        }
        Pairs { latest_call_after, first_call_after }
    }

    /// `_is_cutoff_safe`: every call id issued before the cut is answered before it, and every
    /// result after the cut answers a call after it.
    fn is_safe(&self, cut: usize) -> bool {
        let n = self.first_call_after.len() - 1;
        cut >= 1 && cut < n && self.first_call_after[cut] >= cut
    }

    /// `_find_earliest_safe_cutoff_for_tool_group`: move back to the call of any kept result.
    fn earliest_for_group(&self, candidate: usize) -> usize {
        candidate.min(self.latest_call_after.get(candidate).copied().unwrap_or(usize::MAX))
    }
}

impl Letta {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<Letta, ParamError> {
        let p = params.sliding_window_percentage;
        if !(p.is_finite() && p > 0.0 && p <= 1.0) {
            return Err(ParamError::new("letta", "sliding_window_percentage", "must be in (0, 1]"));
        }
        if !(params.trigger_ratio.is_finite() && params.trigger_ratio > 0.0 && params.trigger_ratio <= 1.0) {
            return Err(ParamError::new("letta", "trigger_ratio", "must be in (0, 1]"));
        }
        if params.clip_chars == 0 {
            return Err(ParamError::new("letta", "clip_chars", "must be at least 1"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new("letta", "summary_max_tokens", "must be at least 1"));
        }
        Ok(Letta { params, meter: Exact::o200k() })
    }

    /// `_find_safe_cutoff_index` (relative to the conversation starting at `base`).
    fn safe_cutoff(&self, ctx: &Context, base: usize, pairs: &Pairs, target: usize, max_index: usize) -> Option<usize> {
        let target = target.min(max_index);
        let e = ctx.entries();
        let n = ctx.len() - base;
        let try_at = |c: usize| {
            let adjusted = pairs.earliest_for_group(c);
            (pairs.is_safe(adjusted) && adjusted < max_index).then_some(adjusted)
        };
        for role in [Role::Assistant, Role::User] {
            for c in (1..=target).rev().filter(|&c| c < n) {
                if e[base + c].role() != role {
                    continue;
                }
                if let Some(a) = try_at(c) {
                    return Some(a);
                }
            }
        }
        (1..=target).rev().filter(|&c| c < n).find_map(try_at)
    }

    /// The sliding-window search (see the module docs).
    pub(crate) fn cut(&self, ctx: &Context, budget: &Budget) -> Option<Cut> {
        let base = prod::body_start(ctx);
        let n = ctx.len() - base;
        if n < 2 {
            return None;
        }
        let p = self.params.sliding_window_percentage;
        let goal = (1.0 - p) * budget.context_window as f64;
        let system = ctx.range_tokens(0..base, &self.meter);
        let mut share = p;
        let mut approx = budget.context_window as f64;
        let mut safe = None;
        let pairs = Pairs::new(ctx, base);
        while approx >= goal && share < 1.0 {
            share += 0.10;
            let target = py_round(share * n as f64);
            safe = self.safe_cutoff(ctx, base, &pairs, target, n - 1);
            if let Some(c) = safe {
                approx = (system + ctx.range_tokens(base + c..ctx.len(), &self.meter)) as f64;
            }
        }
        match safe {
            Some(c) if share < 1.0 && c < n - 1 => Some(Cut { cut: base + c, share: Some(share) }),
            _ => Some(Cut { cut: ctx.len() - 1, share: None }),
        }
    }

    fn clip(&self, text: &str) -> String {
        match text.char_indices().nth(self.params.clip_chars) {
            Some((at, _)) => format!("{}{CLIP_MARKER}", &text[..at]),
            None => text.to_string(),
        }
    }
}

impl Strategy for Letta {
    fn name(&self) -> &'static str {
        "letta"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        Some(prod::fraction_of(budget.context_window, self.params.trigger_ratio))
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        if trigger == Trigger::Proactive && !self.should_compact(ctx, budget) {
            return None;
        }
        let base = prod::body_start(ctx);
        let mut cut = self.cut(ctx, budget)?;
        // The fall-back summarizes everything but the last message; keep that message's calls
        // with their results (a trailing result stays with its call).
        if cut.share.is_none() {
            cut.cut = prod::cut_back_to_call(ctx, cut.cut, base + 1);
        }
        if cut.cut <= base {
            return None;
        }
        let mut layout: Vec<Slot> = prod::keep(0..base).collect();
        layout.push(Slot::Summary { request: 0, role: Role::User, prefix: String::new(), suffix: String::new() });
        layout.extend(prod::keep(cut.cut..ctx.len()));
        let request = SummaryRequest::new(
            (base..cut.cut).collect(),
            PromptKind::LettaSummary,
            self.params.summary_max_tokens,
            prod::next_round(ctx),
        );
        let mut notes = serde_json::Map::new();
        notes.insert("cut".into(), cut.cut.into());
        if let Some(s) = cut.share {
            notes.insert("evicted_share".into(), serde_json::json!((s * 100.0).round() / 100.0));
        }
        Some(Plan {
            trigger,
            layout,
            requests: vec![request],
            fallback: Fallback::Unchanged,
            step: if cut.share.is_some() { "sliding_window".into() } else { "all".into() },
            notes,
        })
    }
    /// The standard layout, with the summary clipped to `clip_chars`.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        let clipped: Vec<SummaryOutcome> =
            summaries.iter().map(|s| s.as_ref().map(|t| self.clip(t)).map_err(Clone::clone)).collect();
        apply_layout(self, ctx, budget, plan, &clipped)
    }
    fn promises(&self, ctx: &Context, budget: &Budget) -> Promises {
        let window = self.cut(ctx, budget).map_or(ctx.len(), |c| {
            let base = prod::body_start(ctx);
            let cut = if c.share.is_none() { prod::cut_back_to_call(ctx, c.cut, base + 1) } else { c.cut };
            ctx.len() - cut
        });
        Promises {
            keeps_system_prompt: true,
            recent_window: window,
            documented_deviations: vec![ViolationKind::RoleAlternation],
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    // The scans `Pairs` replaces, as they were written from Letta's source: the reference the
    // precomputed answers are held to.
    /// `_is_cutoff_safe` over `conv` (context entries `base..`), `cut` relative to it.
    fn reference_is_safe(ctx: &Context, base: usize, cut: usize) -> bool {
        let n = ctx.len() - base;
        if cut < 1 || cut >= n {
            return false;
        }
        let e = ctx.entries();
        // Every call id issued before the cut must be answered before it, and every result after the
        // cut must answer a call after it.
        let before: Vec<&str> =
            (base..base + cut).flat_map(|i| e[i].message().tool_calls.iter().map(|c| c.id.as_str())).collect();
        let after_results: Vec<&str> = (base + cut..ctx.len())
            .filter(|&i| e[i].role() == Role::Tool)
            .filter_map(|i| e[i].message().tool_call_id.as_deref())
            .collect();
        !after_results.iter().any(|id| before.contains(id))
    }

    /// `_find_earliest_safe_cutoff_for_tool_group`: move back to the call of any kept result.
    fn reference_earliest_for_group(ctx: &Context, base: usize, candidate: usize) -> usize {
        let e = ctx.entries();
        let mut adjusted = candidate;
        for k in candidate..ctx.len() - base {
            let m = e[base + k].message();
            if m.role == Role::Tool {
                if let Some(id) = m.tool_call_id.as_deref() {
                    if let Some(a) = (0..k).rev().find(|&j| e[base + j].message().tool_calls.iter().any(|c| c.id == id))
                    {
                        adjusted = adjusted.min(a);
                    }
                }
            }
        }
        adjusted
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn the_precomputed_pairing_answers_as_the_scans_do(
            kinds in proptest::collection::vec((0u8..5, 0u8..4), 1..30),
            base in 0usize..3,
        ) {
            let mut messages = vec![Message::system("s"); base];
            for (kind, id) in kinds {
                let id = format!("c{id}");
                messages.push(match kind {
                    0 => Message::user("u"),
                    1 => Message::assistant("a"),
                    2 => Message::assistant_calls("", vec![ToolCall { id, name: "t".into(), arguments: "{}".into() }]),
                    3 => Message::tool_result(id, "t", "r"),
                    _ => {
                        let mut m = Message::tool_result(id, "t", "r");
                        m.tool_call_id = None;
                        m
                    }
                });
            }
            let ctx = Context::from_messages(messages);
            let pairs = Pairs::new(&ctx, base);
            for cut in 0..=ctx.len() - base + 1 {
                proptest::prop_assert_eq!(pairs.is_safe(cut), reference_is_safe(&ctx, base, cut), "is_safe({})", cut);
                if cut < ctx.len() - base {
                    proptest::prop_assert_eq!(
                        pairs.earliest_for_group(cut),
                        reference_earliest_for_group(&ctx, base, cut),
                        "earliest_for_group({})", cut
                    );
                }
            }
        }
    }
    use super::*;
    use crate::message::{Message, ToolCall};

    /// system + `turns` x (user, assistant call, tool result, assistant text).
    fn session(turns: usize, words: usize) -> Context {
        let mut m = vec![Message::system("s")];
        for t in 0..turns {
            let id = format!("c{t}");
            m.push(Message::user(format!("request {t}")));
            m.push(Message::assistant_calls(
                "",
                vec![ToolCall { id: id.clone(), name: "grep".into(), arguments: "{}".into() }],
            ));
            m.push(Message::tool_result(id, "grep", "hit ".repeat(words)));
            m.push(Message::assistant(format!("answer {t}")));
        }
        Context::from_messages(m)
    }

    #[test]
    fn python_round_is_half_to_even() {
        assert_eq!(py_round(2.5), 2);
        assert_eq!(py_round(3.5), 4);
        assert_eq!(py_round(4.4), 4);
        assert_eq!(py_round(0.4 * 10.0), 4);
    }

    #[test]
    fn the_first_try_evicts_40_percent_at_an_assistant_message() {
        // 10 turns = 40 messages; a generous window: the first try (40%: round(16) = 16) is
        // enough. Entry 16 of the conversation (context index 17) is a user message; searching
        // back, the nearest assistant message is conversation index 15 (an answer), which is safe.
        let s = Letta::new(Params::default()).unwrap();
        let ctx = session(10, 5);
        let c = s.cut(&ctx, &Budget::new(100_000)).unwrap();
        assert_eq!(c.share.map(|x| (x * 100.0).round()), Some(40.0));
        assert_eq!(c.cut, 16);
        assert_eq!(ctx.entries()[c.cut].role(), Role::Assistant);
        assert!(ctx.entries()[c.cut].message().tool_calls.is_empty());
    }

    #[test]
    fn the_share_grows_until_the_rest_fits_70_percent_and_falls_back_to_all() {
        let s = Letta::new(Params::default()).unwrap();
        let ctx = session(10, 100);
        let total = ctx.tokens(&Exact::o200k());
        // A window where 70% is about a third of the context: more than 40% must go.
        let budget = Budget::new(total / 2);
        let c = s.cut(&ctx, &budget).unwrap();
        let share = c.share.unwrap();
        assert!(share > 0.45, "{share}");
        let kept = ctx.range_tokens(0..1, &Exact::o200k()) + ctx.range_tokens(c.cut..ctx.len(), &Exact::o200k());
        assert!((kept as f64) < 0.7 * budget.context_window as f64);
        // A window nothing fits: summarize everything but the last message.
        let tiny = s.cut(&ctx, &Budget::new(10)).unwrap();
        assert_eq!(tiny, Cut { cut: ctx.len() - 1, share: None });
        let plan = s.plan(&ctx, &Budget::new(10), Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "all");
    }

    #[test]
    fn the_summary_goes_after_the_system_prompt_and_is_clipped() {
        let s = Letta::new(Params { clip_chars: 10, ..Params::default() }).unwrap();
        let ctx = session(10, 5);
        let budget = Budget::new(100);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = s.apply(&ctx, &budget, &plan, &[Ok("0123456789abcdef".into())]);
        let m = out.context.get(1).unwrap().message();
        assert_eq!(m.role, Role::User);
        assert_eq!(m.content, format!("0123456789{CLIP_MARKER}"));
        assert_eq!(out.context.get(0).unwrap().message().content, "s");
    }
}
