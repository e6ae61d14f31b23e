//! `letta`: Letta's sliding-window summarizer, as the final archived version ships it.
//!
//! Source: letta-ai/letta, read with the code search:
//! `letta/services/summarizer/summarizer_sliding_window.py` at
//! 98c7d106739ab20fdda72a602329faa18aab3a1a (`summarize_via_sliding_window`),
//! `letta/services/summarizer/compact.py` at 5239a7e59ff3103febf40290ee961cd2efb0ee84
//! (`compact_messages`: the fall-backs to mode `all`), `summarizer_all.py` at
//! f504405395b1d2d66441c2e0dddd6af7bac30845 (`summarize_all`), `summarizer_config.py` at
//! 0ca33c58005b954e134705df737326e6796e534b (`CompactionSettings`: `clip_chars = 50000`,
//! `sliding_window_percentage` 0.3), and `letta/services/summarizer/summarizer.py`
//! (`simple_summary`'s two fall-backs when the summary request itself is too long).
//!
//! - **Trigger**: the request above `trigger_ratio` = 0.9 of the window
//!   (`SUMMARIZATION_TRIGGER_MULTIPLIER`, for every model since ede5cd2e9). The stored
//!   `thresholds.py` (98c7d106) is the two-day version with 100% for all but GPT-5; the final
//!   version returns `int(context_window * 0.9)` for every model.
//! - **Cut**: over Letta's message list (the system message at 0, then the conversation), the
//!   evicted share starts at `sliding_window_percentage` (0.3) and grows by 0.10 *before* each
//!   try (so the first try evicts 40%), with the source's floating-point arithmetic; each try
//!   looks back from `round(share x len)` (Python's round, ties to even) for an assistant
//!   message: a cut falls only before an assistant (or approval) message, so a call and its
//!   results are never divided. A try with no assistant message there goes on to the next
//!   share. It stops as soon as the system message plus the kept messages are under
//!   `(1 - 0.3)` of the window, or when the share reaches 1.0.
//! - **Mode `all`**: no cut found, the share reaching 1.0, or a cut at the last message
//!   (`ValueError` upstream) make `compact_messages` summarize everything after the system
//!   message (`summarize_all`: nothing else is kept; a trailing approval request would be, and
//!   recordings have none). Step `all`.
//! - **Still over the trigger after sliding**: `compact_messages` counts the compacted
//!   messages (the system message, the new summary, the kept messages) and, when they are at
//!   or above `trigger_threshold`, summarizes them again with `summarize_all` (the same
//!   sliding prompt and `clip_chars`; only the system message and the second summary stay).
//!   Here [`Strategy::plan_with`] writes the sliding summary first, counts the compacted
//!   context exactly, and asks for the second summary over that context; the plan it returns
//!   carries the summary written (step `sliding_window_then_all`, or `sliding_window` when one
//!   was enough). A second summary that fails, or whose request does not fit, leaves the
//!   context unchanged (upstream the exception ends the compaction). Still over after it:
//!   upstream logs and goes on; so does the replay.
//! - **Summary request too long** (`simple_summary`): first the tool returns in the transcript
//!   are clamped to 5,000 characters (`TOOL_RETURN_TRUNCATION_CHARS`), then the transcript is
//!   truncated in the middle. Here the request is checked against the window before it is made:
//!   the clamp when the whole span does not fit (`notes.summary_input = "clamped_tool_returns"`),
//!   then messages removed from the middle of the span outward until it fits
//!   (`"middle_truncated"`, with `notes.middle_removed`).
//! - **Summary**: of the evicted messages (an earlier summary among them) with the sliding
//!   prompt (`letta_summary.md`: five sections — goals, what happened, important details with
//!   identifiers verbatim, errors and fixes, lookup hints — first person, at most 300 words),
//!   clipped to `clip_chars` (50,000) characters plus `... [summary truncated to fit]`; placed
//!   as a user message right after the system prompt, then the kept messages.
//! - **Failure**: a sliding summary that fails (an error, or an empty text) sends
//!   `compact_messages` to mode `all` over the same messages (step
//!   `all_after_sliding_failed`); a failed summary there fails the step and the context is
//!   unchanged.
//!
//! Departures, each kept for a reason: Letta's memory messages (core memory blocks
//! re-injected after compaction) have no counterpart in a recording. The token count is exact
//! `o200k_base` (Letta's provider counter) rather than its bytes/4 x 1.3 fallback, since the
//! replay's models report usage. Mode `all` uses the sliding prompt rather than Letta's
//! `ALL_PROMPT` (the same sections with a next-step one) where the sliding window fails or finds
//! no cut: the prompt kinds are shared with the summarizers and one Letta kind keeps that
//! surface small (the second pass after a sliding window uses the sliding prompt upstream too).
//! The second pass compares the compacted context with the trigger (90% of the window):
//! `trigger_threshold` is the caller's, and the call site was not in the version read. The
//! count leaves out the tool schemas (`count_tokens_with_tools`), which a recording does not
//! carry. The middle truncation removes whole messages (the summarizer input is a list of
//! messages here), where Letta cuts the transcript's text.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{self, ParamError};
use compaction::context::{Context, Entry, Inserted, Origin};
use compaction::message::{Message, Role};
use compaction::tokens::{Exact, TokenCounter};
use compaction::ViolationKind;
use compaction::{
    apply_layout, covered, Budget, Compacted, Fallback, InputCuts, Plan, Promises, Prompt, Slot, Strategy,
    SummaryFailure, SummaryOutcome, SummaryRequest, Trigger,
};

/// The summary prompt of the evicted messages (`letta/letta_summary.md`, beside this module).
pub fn prompt() -> Prompt {
    Prompt::new("letta_summary", include_str!("letta/letta_summary.md"))
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Letta sliding window: above 90% of the window, summarizes the oldest 40% of the messages \
     (growing by 10% until the rest is under 70% of the window), cut before an assistant message; summarizes \
     everything when no cut works or the context is still over the trigger after the sliding summary; summary clipped to 50,000 characters, placed after the system prompt.";

/// The marker appended to a clipped summary.
pub const CLIP_MARKER: &str = "... [summary truncated to fit]";

/// `TOOL_RETURN_TRUNCATION_CHARS`: tool returns in an over-long summary request are cut to this.
pub const TOOL_RETURN_CHARS: usize = 5_000;

/// The plan note holding the recorded messages a summary written while planning stands for.
const WRITTEN_COVERS: &str = "summary_covers";
/// The plan note holding the round of a summary written while planning.
const WRITTEN_ROUND: &str = "summary_round";
/// The plan note holding why a summary written while planning failed (the context stays).
const WRITTEN_FAILURE: &str = "summary_failed";

/// Parameters of `letta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Share of the messages evicted before the first 10% step, and 1 minus the share of the
    /// window the kept messages must fit (0.3).
    pub sliding_window_percentage: f64,
    /// Summarize when the request is above this fraction of the window (0.9).
    pub trigger_ratio: f64,
    /// The summary is cut to this many characters (50,000).
    pub clip_chars: usize,
    /// Output cap of the summary request.
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params { sliding_window_percentage: 0.3, trigger_ratio: 0.9, clip_chars: 50_000, summary_max_tokens: 4_096 }
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
    /// The evicted share of the last try.
    pub share: f64,
}

/// Python's `round`: half to even.
fn py_round(x: f64) -> usize {
    let r = x.round();
    let r = if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 { r - x.signum() } else { r };
    r.max(0.0) as usize
}

/// How the summary request was made to fit the window.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fitted {
    /// The entries summarized.
    pub span: Vec<usize>,
    /// The cuts of the summarizer's input.
    pub input: InputCuts,
    /// `whole`, `clamped_tool_returns` or `middle_truncated`.
    pub how: &'static str,
    /// Entries removed from the middle of the span.
    pub removed: usize,
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

    /// The sliding-window search (see the module docs); `None` sends the caller to mode `all`.
    pub(crate) fn cut(&self, ctx: &Context, budget: &Budget) -> Option<Cut> {
        let base = common::body_start(ctx);
        // Letta's list: its system message at 0, then the conversation; upstream index `i` is
        // context entry `base + i - 1`.
        let total = ctx.len() - base + 1;
        let entry = |i: usize| base + i - 1;
        let p = self.params.sliding_window_percentage;
        let goal = (1.0 - p) * budget.context_window as f64;
        let system = ctx.range_tokens(0..base, &self.meter);
        let mut share = p;
        let mut approx = budget.context_window as f64;
        let mut found = None;
        while approx >= goal && share < 1.0 {
            share += 0.10;
            let target = py_round(share * total as f64);
            found = (1..=target).rev().find(|&i| i < total && ctx.entries()[entry(i)].role() == Role::Assistant);
            let Some(i) = found else { continue };
            approx = (system + ctx.range_tokens(entry(i)..ctx.len(), &self.meter)) as f64;
        }
        match found {
            Some(i) if share < 1.0 && i < total - 1 => Some(Cut { cut: entry(i), share }),
            _ => None,
        }
    }

    /// The summary request over `span`, made to fit the window as `simple_summary`'s
    /// fall-backs do: whole, then with tool returns clamped, then with messages removed from
    /// the middle outward. `None` when not even two messages fit.
    pub(crate) fn fit(&self, ctx: &Context, span: Vec<usize>, budget: &Budget) -> Option<Fitted> {
        let window = budget.context_window;
        let output = u64::from(self.params.summary_max_tokens);
        if common::request_fits(ctx, &span, &self.meter, window, output) {
            return Some(Fitted { span, input: InputCuts::NONE, how: "whole", removed: 0 });
        }
        let input = InputCuts { message_chars: None, tool_result_chars: Some(TOOL_RETURN_CHARS) };
        let sizes: Vec<u64> = span.iter().map(|&i| common::cut_tokens(ctx, i, &input, &self.meter)).collect();
        let room = window.saturating_sub(output.min(window / 4));
        let total: u64 = sizes.iter().sum();
        if total <= room {
            return Some(Fitted { span, input, how: "clamped_tool_returns", removed: 0 });
        }
        // Remove from the middle outward until the rest fits.
        let mut kept = vec![true; span.len()];
        let mut left = total;
        let middle = span.len() / 2;
        let mut removed = 0;
        for k in 0..span.len() {
            if left <= room {
                break;
            }
            let offset = k / 2;
            let at = if k % 2 == 0 { middle.checked_sub(offset + 1) } else { Some(middle + offset) };
            let Some(at) = at.filter(|&a| a < span.len()) else { continue };
            kept[at] = false;
            left -= sizes[at];
            removed += 1;
        }
        let span: Vec<usize> = span.into_iter().zip(kept).filter(|(_, k)| *k).map(|(i, _)| i).collect();
        (left <= room && !span.is_empty()).then_some(Fitted { span, input, how: "middle_truncated", removed })
    }

    fn clip(&self, text: &str) -> String {
        match text.char_indices().nth(self.params.clip_chars) {
            Some((at, _)) => format!("{}{CLIP_MARKER}", &text[..at]),
            None => text.to_string(),
        }
    }

    /// The first kept entry and the step: the sliding cut, or mode `all` (everything after the
    /// system message) when there is none.
    fn first_kept(&self, ctx: &Context, budget: &Budget) -> (usize, &'static str) {
        match self.cut(ctx, budget) {
            None => (ctx.len(), "all"),
            Some(c) => (c.cut, "sliding_window"),
        }
    }

    /// Mode `all` over `ctx` (everything after the system message), for `step`.
    fn plan_all(&self, ctx: &Context, budget: &Budget, trigger: Trigger, step: &str) -> Option<Plan> {
        let base = common::body_start(ctx);
        if ctx.len() <= base {
            return None;
        }
        let fitted = self.fit(ctx, (base..ctx.len()).collect(), budget)?;
        let mut request =
            SummaryRequest::new(fitted.span, prompt(), self.params.summary_max_tokens, common::next_round(ctx));
        request.input = fitted.input;
        let mut notes = serde_json::Map::new();
        notes.insert("cut".into(), ctx.len().into());
        notes.insert("summary_input".into(), fitted.how.into());
        if fitted.removed > 0 {
            notes.insert("middle_removed".into(), fitted.removed.into());
        }
        let mut layout: Vec<Slot> = common::keep(0..base).collect();
        layout.push(Slot::Summary { request: 0, role: Role::User, prefix: String::new(), suffix: String::new() });
        Some(Plan { trigger, layout, requests: vec![request], fallback: Fallback::Unchanged, step: step.into(), notes })
    }

    /// `plan` with the summary already written: the summary slot becomes the clipped `text`
    /// (a user message), standing for `covers`, and the plan asks for nothing more.
    fn written(mut plan: Plan, text: &str, covers: Vec<usize>, round: u32) -> Plan {
        for slot in &mut plan.layout {
            if matches!(slot, Slot::Summary { .. }) {
                *slot = Slot::insert(Message::user(text), Inserted::Other);
            }
        }
        plan.requests.clear();
        plan.notes.insert(WRITTEN_COVERS.into(), covers.into());
        plan.notes.insert(WRITTEN_ROUND.into(), round.into());
        plan
    }

    /// `plan` failed while planning: applying it leaves the context unchanged, saying why.
    fn failed(mut plan: Plan, reason: &str) -> Plan {
        plan.requests.clear();
        plan.notes.insert(WRITTEN_FAILURE.into(), reason.into());
        plan
    }
}

/// The outcome's text, or why it is no summary (an empty text is a failed summary).
fn summary_text(outcome: SummaryOutcome) -> Result<String, String> {
    match outcome {
        Ok(t) if t.trim().is_empty() => Err("empty summary".into()),
        Ok(t) => Ok(t),
        Err(e) => Err(e.reason),
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
        Some(common::fraction_of(budget.context_window, self.params.trigger_ratio))
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let base = common::body_start(ctx);
        let (cut, step) = self.first_kept(ctx, budget);
        if cut <= base {
            return None;
        }
        let fitted = self.fit(ctx, (base..cut).collect(), budget)?;
        let mut layout: Vec<Slot> = common::keep(0..base).collect();
        layout.push(Slot::Summary { request: 0, role: Role::User, prefix: String::new(), suffix: String::new() });
        layout.extend(common::keep(cut..ctx.len()));
        let mut request =
            SummaryRequest::new(fitted.span, prompt(), self.params.summary_max_tokens, common::next_round(ctx));
        request.input = fitted.input;
        let mut notes = serde_json::Map::new();
        notes.insert("cut".into(), cut.into());
        if let Some(c) = self.cut(ctx, budget).filter(|_| step == "sliding_window") {
            notes.insert("evicted_share".into(), serde_json::json!((c.share * 100.0).round() / 100.0));
        }
        notes.insert("summary_input".into(), fitted.how.into());
        if fitted.removed > 0 {
            notes.insert("middle_removed".into(), fitted.removed.into());
        }
        Some(Plan { trigger, layout, requests: vec![request], fallback: Fallback::Unchanged, step: step.into(), notes })
    }
    /// `compact_messages` around the plan: the sliding window's summary is written first; when
    /// it fails, everything is summarized instead (mode `all`, made by the caller); when the
    /// compacted messages, the summary among them, are still at the trigger, they are
    /// summarized again in mode `all` (`summarize_all` over them: only the system message and
    /// the new summary stay). The summaries written here are in the plan it returns.
    fn plan_with(
        &self,
        ctx: &Context,
        budget: &Budget,
        trigger: Trigger,
        summarize: &mut dyn FnMut(&Context, &SummaryRequest) -> SummaryOutcome,
    ) -> Option<Plan> {
        let plan = self.plan(ctx, budget, trigger)?;
        if plan.step != "sliding_window" {
            return Some(plan);
        }
        let first = plan.requests.first()?;
        let (covers, round) = (covered(ctx, &first.span), first.round);
        let text = match summary_text(summarize(ctx, first)) {
            Ok(t) => self.clip(&t),
            Err(reason) => {
                // A sliding window that raises falls back to mode `all` over the same messages.
                let mut all = self.plan_all(ctx, budget, trigger, "all_after_sliding_failed")?;
                all.notes.insert("sliding_failure".into(), reason.into());
                return Some(all);
            }
        };
        let sliding = Letta::written(plan, &text, covers, round);
        let compacted = self.apply(ctx, budget, &sliding, &[]);
        let trigger_at = common::fraction_of(budget.context_window, self.params.trigger_ratio);
        if compacted.context.tokens(&self.meter) < trigger_at {
            return Some(sliding);
        }
        // Still at the trigger: `summarize_all` over the compacted messages.
        let mut again = sliding.clone();
        again.step = "sliding_window_then_all".into();
        let next = &compacted.context;
        let base = common::body_start(next);
        let Some(fitted) = self.fit(next, (base..next.len()).collect(), budget) else {
            return Some(Letta::failed(again, "the second summary request does not fit the window"));
        };
        again.notes.insert("second_summary_input".into(), fitted.how.into());
        let mut request = SummaryRequest::new(fitted.span, prompt(), self.params.summary_max_tokens, round);
        request.input = fitted.input;
        let covers = covered(next, &request.span);
        match summary_text(summarize(next, &request)) {
            Err(reason) => Some(Letta::failed(again, &reason)),
            Ok(t) => {
                again.layout = common::keep(0..base).collect();
                again.layout.push(Slot::Summary {
                    request: 0,
                    role: Role::User,
                    prefix: String::new(),
                    suffix: String::new(),
                });
                again.notes.insert("cut".into(), ctx.len().into());
                Some(Letta::written(again, &self.clip(&t), covers, round))
            }
        }
    }
    /// The standard layout, with the summary clipped to `clip_chars`; a summary written while
    /// planning becomes the summary entry it is.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        if let Some(reason) = plan.notes.get(WRITTEN_FAILURE).and_then(|v| v.as_str()) {
            let asked = Plan { requests: vec![SummaryRequest::new(Vec::new(), prompt(), 1, 1)], ..plan.clone() };
            return apply_layout(self, ctx, budget, &asked, &[Err(SummaryFailure { reason: reason.to_string() })]);
        }
        let clipped: Vec<SummaryOutcome> =
            summaries.iter().map(|s| s.as_ref().map(|t| self.clip(t)).map_err(Clone::clone)).collect();
        let mut out = apply_layout(self, ctx, budget, plan, &clipped);
        let Some(covers) = plan.notes.get(WRITTEN_COVERS).and_then(|v| v.as_array()) else {
            return out;
        };
        let covers: Vec<usize> = covers.iter().filter_map(|c| c.as_u64()).map(|c| c as usize).collect();
        let round = plan.notes.get(WRITTEN_ROUND).and_then(|v| v.as_u64()).map_or(1, |r| r as u32);
        // The written summary sits right after the system message.
        let at = common::body_start(&out.context);
        let mut entries: Vec<Entry> = out.context.entries().to_vec();
        if let Some(e) = entries.get_mut(at).filter(|e| matches!(e.origin(), Origin::Inserted { .. })) {
            out.event.summaries.push(e.message().content.clone());
            *e = Entry::new(e.message().clone(), Origin::Summary { round, covers });
            out.event.round = Some(round);
            out.context = Context::from_entries(entries);
        }
        out
    }
    fn promises(&self, ctx: &Context, budget: &Budget) -> Promises {
        let (cut, _) = self.first_kept(ctx, budget);
        // When the kept messages and a summary at its cap could reach the trigger, the second
        // pass in mode `all` may keep nothing.
        let base = common::body_start(ctx);
        let kept = ctx.range_tokens(0..base, &self.meter) + ctx.range_tokens(cut..ctx.len(), &self.meter);
        let second_pass = kept + u64::from(self.params.summary_max_tokens)
            >= common::fraction_of(budget.context_window, self.params.trigger_ratio);
        Promises {
            keeps_system_prompt: true,
            recent_window: if second_pass { 0 } else { ctx.len() - cut },
            documented_deviations: vec![ViolationKind::RoleAlternation],
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::message::{Message, ToolCall};

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
    fn shipped_defaults_trigger_at_90_percent_and_clip_at_50000() {
        let s = Letta::new(Params::default()).unwrap();
        assert_eq!(s.threshold(&Context::new(), &Budget::new(128_000)), Some(115_200));
        assert_eq!(Params::default().clip_chars, 50_000);
        let long = "x".repeat(60_000);
        assert_eq!(s.clip(&long), format!("{}{CLIP_MARKER}", "x".repeat(50_000)));
    }

    #[test]
    fn the_first_try_evicts_40_percent_before_an_assistant_message() {
        // 10 turns: Letta's list has 41 messages (system + 40); round(0.4 x 41) = 16, which is
        // turn 3's answer (turn t holds 4t+1..=4t+4), an assistant message: the cut is there.
        let s = Letta::new(Params::default()).unwrap();
        let ctx = session(10, 5);
        let c = s.cut(&ctx, &Budget::new(100_000)).unwrap();
        assert_eq!((c.share * 100.0).round(), 40.0);
        assert_eq!(c.cut, 16);
        assert_eq!(ctx.entries()[c.cut].role(), Role::Assistant);
    }

    /// Every cut the search returns is before an assistant message, for any window.
    #[test]
    fn cuts_fall_only_before_assistant_messages() {
        let s = Letta::new(Params::default()).unwrap();
        let ctx = session(12, 60);
        let total = ctx.tokens(&Exact::o200k());
        for window in (total / 10..=total * 2).step_by((total / 20).max(1) as usize) {
            if let Some(c) = s.cut(&ctx, &Budget::new(window)) {
                assert_eq!(ctx.entries()[c.cut].role(), Role::Assistant, "window {window}");
                assert!(c.cut < ctx.len() - 1);
            }
        }
        // Only user messages and results after the system message: no cut, mode `all`.
        let users = Context::from_messages(vec![Message::system("s"), Message::user("a"), Message::user("b")]);
        assert!(s.cut(&users, &Budget::new(10)).is_none());
        let plan = s.plan(&users, &Budget::new(10), Trigger::Overflow).unwrap();
        assert_eq!(plan.step, "all");
        assert_eq!(plan.requests[0].span, vec![1, 2]);
    }

    #[test]
    fn the_share_grows_until_the_rest_fits_70_percent_and_falls_back_to_all() {
        let s = Letta::new(Params::default()).unwrap();
        let ctx = session(10, 100);
        let total = ctx.tokens(&Exact::o200k());
        // A window where 70% is about a third of the context: more than 40% must go.
        let budget = Budget::new(total / 2);
        let c = s.cut(&ctx, &budget).unwrap();
        assert!(c.share > 0.45, "{}", c.share);
        let kept = ctx.range_tokens(0..1, &Exact::o200k()) + ctx.range_tokens(c.cut..ctx.len(), &Exact::o200k());
        assert!((kept as f64) < 0.7 * budget.context_window as f64);
        // A window nothing fits: mode `all` summarizes everything after the system message
        // and keeps nothing else (`summarize_all`).
        assert!(s.cut(&ctx, &Budget::new(10)).is_none());
        let plan = s.plan(&ctx, &Budget::new(10), Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "all");
        // The summary request of everything does not fit a 10-token window: its middle goes.
        assert_eq!(plan.notes["summary_input"], "middle_truncated");
        let roomy = Budget::new(total + 10_000);
        let plan = s.plan(&ctx, &roomy, Trigger::Overflow).unwrap();
        assert_eq!(plan.step, "sliding_window");
    }

    /// `simple_summary`'s fall-backs: tool returns clamped to 5,000 characters, then the
    /// middle of the transcript removed.
    #[test]
    fn an_overflowing_summary_request_clamps_tool_returns_then_truncates_the_middle() {
        let s = Letta::new(Params { summary_max_tokens: 100, ..Params::default() }).unwrap();
        // Results of 20,000 characters (about 4,000 tokens each).
        let ctx = session(4, 4_000);
        let span: Vec<usize> = (1..ctx.len()).collect();
        let whole = common::span_tokens(&ctx, &span, &Exact::o200k());
        let fitted = s.fit(&ctx, span.clone(), &Budget::new(whole + 200)).unwrap();
        assert_eq!(fitted.how, "whole");
        let clamped = s.fit(&ctx, span.clone(), &Budget::new(whole / 2)).unwrap();
        assert_eq!(clamped.how, "clamped_tool_returns");
        assert_eq!(clamped.input.tool_result_chars, Some(TOOL_RETURN_CHARS));
        assert_eq!(clamped.span, span);
        let middle = s.fit(&ctx, span.clone(), &Budget::new(2_000)).unwrap();
        assert_eq!(middle.how, "middle_truncated");
        assert!(middle.removed > 0);
        // The ends of the span stay; the middle goes.
        assert_eq!(middle.span.first(), span.first());
        assert_eq!(middle.span.last(), span.last());
        assert_eq!(middle.span.len() + middle.removed, span.len());
    }

    /// A summarizer for `compact` that answers the `n`th request with `answers[n]` and records
    /// each context it was handed with its request.
    fn answering<'a>(
        answers: &'a [SummaryOutcome],
        seen: &'a mut Vec<(Context, SummaryRequest)>,
    ) -> impl FnMut(&Context, &[SummaryRequest]) -> compaction::Summaries + 'a {
        move |ctx, requests| {
            let outcomes = requests
                .iter()
                .map(|r| {
                    seen.push((ctx.clone(), r.clone()));
                    answers.get(seen.len() - 1).cloned().unwrap_or_else(|| Ok("extra".into()))
                })
                .collect();
            compaction::Summaries::of(outcomes)
        }
    }

    /// `compact_messages`: the compacted messages (the sliding summary among them) still at
    /// the trigger are summarized again in mode `all`; only the system message and that second
    /// summary stay, and it stands for every message the first one and the kept ones stood for.
    #[test]
    fn a_sliding_summary_that_leaves_the_context_at_the_trigger_is_summarized_again_with_everything() {
        // A small output cap: every summary request fits whole.
        let s = Letta::new(Params { summary_max_tokens: 10, ..Params::default() }).unwrap();
        let ctx = session(10, 100);
        let budget = Budget::new(ctx.tokens(&Exact::o200k()));
        // A first summary of a third of the window: with the kept messages under 70% of it,
        // the compacted context reaches 90%.
        let long = "alpha ".repeat(budget.context_window as usize / 3);
        let answers = [Ok(long.clone()), Ok("the second summary".to_string())];
        let mut seen = Vec::new();
        let step = compaction::compact(&s, &ctx, &budget, Trigger::Proactive, answering(&answers, &mut seen)).unwrap();
        assert_eq!(seen.len(), 2, "the sliding summary, then the summary of everything");
        let (first_ctx, first) = &seen[0];
        assert_eq!(first_ctx.len(), ctx.len());
        let cut = s.cut(&ctx, &budget).unwrap().cut;
        assert_eq!(first.span, (1..cut).collect::<Vec<_>>());
        // The second request reads the compacted messages: the system message, the first
        // summary, the kept messages; it summarizes all but the system message.
        let (second_ctx, second) = &seen[1];
        assert_eq!(second_ctx.len(), 2 + (ctx.len() - cut));
        assert_eq!(second_ctx.get(1).unwrap().message().content, long);
        assert!(second_ctx.get(1).unwrap().origin().is_summary());
        assert!(second_ctx.tokens(&Exact::o200k()) >= s.threshold(&ctx, &budget).unwrap());
        assert_eq!(second.span, (1..second_ctx.len()).collect::<Vec<_>>());
        let out = step.compacted;
        assert_eq!(step.plan.step, "sliding_window_then_all");
        assert_eq!(out.context.len(), 2);
        assert_eq!(out.context.get(0).unwrap().message().content, "s");
        let summary = out.context.get(1).unwrap();
        assert_eq!(summary.message().content, "the second summary");
        assert_eq!(summary.message().role, Role::User);
        match summary.origin() {
            Origin::Summary { round, covers } => {
                assert_eq!(*round, 1);
                assert_eq!(covers, &(1..ctx.len()).collect::<Vec<_>>());
            }
            other => panic!("not a summary: {other:?}"),
        }
        assert_eq!(out.event.summaries, vec!["the second summary".to_string()]);
        assert_eq!(out.event.removed, ctx.len() - 1);
    }

    /// A sliding summary that brings the context under the trigger is the whole compaction:
    /// one request, and the same context the plan and its summary build.
    #[test]
    fn a_sliding_summary_under_the_trigger_is_the_compaction() {
        // A small output cap: every summary request fits whole.
        let s = Letta::new(Params { summary_max_tokens: 10, ..Params::default() }).unwrap();
        let ctx = session(10, 100);
        let budget = Budget::new(ctx.tokens(&Exact::o200k()));
        let answers = [Ok("short summary".to_string())];
        let mut seen = Vec::new();
        let step = compaction::compact(&s, &ctx, &budget, Trigger::Proactive, answering(&answers, &mut seen)).unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(step.plan.step, "sliding_window");
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let direct = s.apply(&ctx, &budget, &plan, &[Ok("short summary".into())]);
        let (a, b) = (&step.compacted, &direct);
        assert_eq!(a.context.len(), b.context.len());
        for (x, y) in a.context.entries().iter().zip(b.context.entries()) {
            assert_eq!(x.message(), y.message());
            assert_eq!(x.origin(), y.origin());
        }
        assert_eq!(a.event.summaries, b.event.summaries);
        assert_eq!(a.event.round, b.event.round);
        assert_eq!(a.event.removed, b.event.removed);
    }

    /// A sliding window that raises sends `compact_messages` to mode `all` over the same
    /// messages; a second summary that fails leaves the context as it was.
    #[test]
    fn failures_fall_back_to_all_and_then_keep_the_context() {
        // A small output cap: every summary request fits whole.
        let s = Letta::new(Params { summary_max_tokens: 10, ..Params::default() }).unwrap();
        let ctx = session(10, 100);
        // Room for the request of everything, whole.
        let budget = Budget::new(ctx.tokens(&Exact::o200k()) + 50);
        let down = || Err(SummaryFailure { reason: "provider down".into() });
        let answers = [down(), Ok("everything".to_string())];
        let mut seen = Vec::new();
        let step = compaction::compact(&s, &ctx, &budget, Trigger::Proactive, answering(&answers, &mut seen)).unwrap();
        assert_eq!(step.plan.step, "all_after_sliding_failed");
        assert_eq!(seen[1].1.span, (1..ctx.len()).collect::<Vec<_>>());
        assert_eq!(step.compacted.context.len(), 2);
        assert_eq!(step.compacted.context.get(1).unwrap().message().content, "everything");

        let long = "alpha ".repeat(budget.context_window as usize / 3);
        let answers = [Ok(long), down()];
        let mut seen = Vec::new();
        let step = compaction::compact(&s, &ctx, &budget, Trigger::Proactive, answering(&answers, &mut seen)).unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(step.compacted.event.fallback.as_deref(), Some("unchanged: provider down"));
        assert_eq!(step.compacted.context.len(), ctx.len());
        assert!(step.compacted.event.summaries.is_empty());
    }

    #[test]
    fn the_summary_goes_after_the_system_prompt_and_is_clipped() {
        let s = Letta::new(Params { clip_chars: 10, ..Params::default() }).unwrap();
        let ctx = session(10, 5);
        let budget = Budget::new(1_000);
        let plan = s.plan(&ctx, &budget, Trigger::Overflow).unwrap();
        let out = s.apply(&ctx, &budget, &plan, &[Ok("0123456789abcdef".into())]);
        let m = out.context.get(1).unwrap().message();
        assert_eq!(m.role, Role::User);
        assert_eq!(m.content, format!("0123456789{CLIP_MARKER}"));
        assert_eq!(out.context.get(0).unwrap().message().content, "s");
    }
}
