//! `openhands`: OpenHands' `LLMSummarizingCondenser`.
//!
//! Source: OpenHands/software-agent-sdk
//! `openhands-sdk/openhands/sdk/context/condenser/llm_summarizing_condenser.py`
//! (`get_condensation_reasons`, `_get_forgotten_events`, `get_condensation`) and
//! `prompts/summarizing_prompt.j2`, read with the code search. Defaults as PRODUCTION.md reads
//! them at its commit: `max_size` 120, `keep_first` 4 (a later SDK version moves them to 240
//! and 2), `max_tokens` unset, `minimum_progress` 0.1.
//!
//! - **Reasons** to condense: the view has more than `max_size` events (`EVENTS`), its tokens
//!   exceed the effective token limit, `min(max_tokens, the agent model's input limit)`
//!   (`TOKENS`; the input limit is the window here), or the agent asked (`REQUEST`: the SDK
//!   turns a context-window error into a condensation request, which is
//!   [`Trigger::Overflow`] here). The view counts every event, the system prompt included.
//! - **Tail**: `events_from_tail` is the strictest of `max_size / 2 - keep_first - 1`
//!   (`EVENTS`), `len / 2 - keep_first - 1` (`REQUEST`), and for `TOKENS` the suffix that
//!   leaves the view at half the token limit. The forgotten range runs from the first
//!   manipulation index at or after `keep_first` to the first at or after
//!   `len - events_from_tail`; a manipulation index never falls between a tool call and its
//!   observations (batch atomicity), so a call and its results are forgotten or kept together.
//! - **Progress**: fewer than `minimum_progress x len` forgotten events is no condensation.
//! - **Summary**: the forgotten events, the previous summary among them (it sits at
//!   `keep_first`; a summary found earlier in the head is forgotten with them), with the
//!   summarizing prompt (`openhands_condensation.md`: user context,
//!   task tracking with ids and statuses, completed, pending, current state; for code: code
//!   state, tests, changes, dependencies, version control). It is inserted where the forgotten
//!   range began, as a user message.
//! - **Failure**: a failed summary raises `NoCondensationAvailableException`; the view is
//!   unchanged and the conversation goes on.
//!
//! Departures: OpenHands cuts each forgotten event to 10,000 characters in the summarizer's
//! input; the transcript here is the runner's. The event-count reason has no token threshold:
//! [`Strategy::threshold`] is `None` while the view is over `max_size`, so a compaction it
//! causes is not reported as below a threshold. The summary can follow a user message kept in
//! the head ([`ViolationKind::RoleAlternation`] documented).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{prod, ParamError};
use crate::context::Context;
use crate::invariants::ViolationKind;
use crate::message::Role;
use crate::strategy::{Budget, Fallback, Plan, Promises, PromptKind, Slot, Strategy, SummaryRequest, Trigger};
use crate::tokens::{Exact, TokenCounter};

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "OpenHands LLMSummarizingCondenser: past 120 events (or the token limit, or on a context \
     error), keeps the first 4 events and the newest down to half of max_size, summarizes the forgotten middle with \
     the previous summary; a tool call and its observations are never separated.";

/// Parameters of `openhands`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Condense when the view has more events than this (120).
    pub max_size: usize,
    /// Events at the start of the view never forgotten (4).
    pub keep_first: usize,
    /// Condense when the view's tokens exceed this (unset: the window alone).
    pub max_tokens: Option<u64>,
    /// Least share of the view a condensation must forget (0.1).
    pub minimum_progress: f64,
    /// Output cap of the summary request.
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params { max_size: 120, keep_first: 4, max_tokens: None, minimum_progress: 0.1, summary_max_tokens: 4_096 }
    }
}

/// The `openhands` strategy.
#[derive(Debug, Clone)]
pub struct Openhands {
    params: Params,
    meter: Exact,
}

/// The forgotten range `[start, end)` of a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Forget {
    pub start: usize,
    pub end: usize,
}

impl Openhands {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<Openhands, ParamError> {
        if (params.max_size / 2) as i64 - params.keep_first as i64 - 1 <= 0 {
            return Err(ParamError::new("openhands", "keep_first", "must be less than max_size / 2 - 1"));
        }
        if !(params.minimum_progress.is_finite() && params.minimum_progress > 0.0 && params.minimum_progress < 1.0) {
            return Err(ParamError::new("openhands", "minimum_progress", "must be in (0, 1)"));
        }
        if params.max_tokens == Some(0) {
            return Err(ParamError::new("openhands", "max_tokens", "must be at least 1"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new("openhands", "summary_max_tokens", "must be at least 1"));
        }
        Ok(Openhands { params, meter: Exact::o200k() })
    }

    /// `_effective_max_tokens`.
    pub fn token_limit(&self, budget: &Budget) -> u64 {
        self.params.max_tokens.map_or(budget.context_window, |m| m.min(budget.context_window))
    }

    /// Whether `i` is a manipulation index: not inside a call's run of observations.
    fn manipulable(ctx: &Context, i: usize) -> bool {
        i >= ctx.len() || ctx.entries()[i].role() != Role::Tool
    }

    fn find_next(ctx: &Context, from: usize) -> usize {
        (from..=ctx.len()).find(|&i| Self::manipulable(ctx, i)).unwrap_or(ctx.len())
    }

    /// `_get_forgotten_events` for the reasons that hold (`request`: a condensation request).
    pub(crate) fn forget(&self, ctx: &Context, budget: &Budget, request: bool) -> Option<Forget> {
        let len = ctx.len();
        let keep_first = self.params.keep_first as i64;
        let mut tails: Vec<i64> = Vec::new();
        if request {
            tails.push(len as i64 / 2 - keep_first - 1);
        }
        if len > self.params.max_size {
            tails.push(self.params.max_size as i64 / 2 - keep_first - 1);
        }
        let limit = self.token_limit(budget);
        let total = self.estimate(ctx);
        if total > limit {
            // `get_suffix_length_for_token_reduction`: the longest suffix of the events after
            // `keep_first` whose removal of the rest frees at least `total - limit / 2`.
            let reduce = total - limit / 2;
            let mut freed = 0;
            let mut cut = self.params.keep_first.min(len);
            while cut < len && freed < reduce {
                freed += ctx.entries()[cut].tokens(&self.meter);
                cut += 1;
            }
            tails.push((len - cut) as i64);
        }
        let from_tail = *tails.iter().min()?;
        let naive_end = (len as i64 - from_tail).clamp(0, len as i64) as usize;
        let mut start = Self::find_next(ctx, self.params.keep_first.min(len));
        // A summary already inside the head (OpenHands puts its own at `keep_first`, where it is
        // forgotten with the range) is forgotten too, so that one summary stays live.
        if let Some((i, _)) = ctx.summaries().next() {
            start = start.min(i);
        }
        let end = Self::find_next(ctx, naive_end);
        if end <= start {
            return None;
        }
        if ((end - start) as f64) < len as f64 * self.params.minimum_progress {
            return None;
        }
        Some(Forget { start, end })
    }
}

impl Strategy for Openhands {
    fn name(&self) -> &'static str {
        "openhands"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, ctx: &Context, budget: &Budget) -> Option<u64> {
        if ctx.len() > self.params.max_size {
            return None;
        }
        Some(self.token_limit(budget))
    }
    fn thresholds(&self, _ctx: &Context, budget: &Budget) -> Vec<(&'static str, u64)> {
        vec![("tokens", self.token_limit(budget))]
    }
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        ctx.len() > self.params.max_size || self.estimate(ctx) > self.token_limit(budget)
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        if trigger == Trigger::Proactive && !self.should_compact(ctx, budget) {
            return None;
        }
        let f = self.forget(ctx, budget, trigger != Trigger::Proactive)?;
        let mut layout: Vec<Slot> = prod::keep(0..f.start).collect();
        layout.push(Slot::Summary { request: 0, role: Role::User, prefix: String::new(), suffix: String::new() });
        layout.extend(prod::keep(f.end..ctx.len()));
        let request = SummaryRequest::new(
            (f.start..f.end).collect(),
            PromptKind::OpenhandsCondensation,
            self.params.summary_max_tokens,
            prod::next_round(ctx),
        );
        let mut notes = serde_json::Map::new();
        notes.insert("forgotten_start".into(), f.start.into());
        notes.insert("forgotten_end".into(), f.end.into());
        Some(Plan {
            trigger,
            layout,
            requests: vec![request],
            fallback: Fallback::Unchanged,
            step: "condense".into(),
            notes,
        })
    }
    fn promises(&self, ctx: &Context, budget: &Budget) -> Promises {
        let window = self.forget(ctx, budget, true).map_or(ctx.len(), |f| ctx.len() - f.end);
        let window = self.forget(ctx, budget, false).map_or(window, |f| window.min(ctx.len() - f.end));
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
    use super::*;
    use crate::message::{Message, ToolCall};
    use crate::strategy::apply_layout;

    /// system, user, then call/observation pairs up to `len` events (a batch of two calls
    /// every fifth pair).
    fn view(len: usize) -> Context {
        let mut m = vec![Message::system("s"), Message::user("task")];
        let mut k = 0;
        while m.len() < len {
            let a = format!("a{k}");
            if k % 5 == 4 {
                let b = format!("b{k}");
                m.push(Message::assistant_calls(
                    "",
                    vec![
                        ToolCall { id: a.clone(), name: "ls".into(), arguments: "{}".into() },
                        ToolCall { id: b.clone(), name: "ls".into(), arguments: "{}".into() },
                    ],
                ));
                m.push(Message::tool_result(a, "ls", "x"));
                m.push(Message::tool_result(b, "ls", "y"));
            } else {
                m.push(Message::assistant_calls(
                    "",
                    vec![ToolCall { id: a.clone(), name: "ls".into(), arguments: "{}".into() }],
                ));
                m.push(Message::tool_result(a, "ls", "x"));
            }
            k += 1;
        }
        Context::from_messages(m)
    }

    #[test]
    fn over_120_events_keeps_4_and_the_newest_55() {
        let s = Openhands::new(Params::default()).unwrap();
        let budget = Budget::new(10_000_000);
        let ctx = view(121);
        assert!(s.should_compact(&ctx, &budget));
        assert!(!s.should_compact(&view(100), &budget));
        // events_from_tail = 120 / 2 - 4 - 1 = 55; naive end = len - 55, moved forward past
        // observations; start = 4 moved past observations too.
        let f = s.forget(&ctx, &budget, false).unwrap();
        assert_eq!(f.end, Openhands::find_next(&ctx, ctx.len() - 55));
        assert!(ctx.len() - f.end <= 55);
        assert_ne!(ctx.entries()[f.start].role(), Role::Tool);
        assert_ne!(ctx.entries()[f.end].role(), Role::Tool);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = apply_layout(&s, &ctx, &budget, &plan, &[Ok("SUM".into())]);
        assert_eq!(out.context.len(), f.start + 1 + (ctx.len() - f.end));
        assert_eq!(out.context.get(f.start).unwrap().message().content, "SUM");
        assert!(crate::invariants::check_context(&out.context).is_empty());
    }

    #[test]
    fn view_properties_batches_and_pairs_are_never_split() {
        // For every start/end the forgotten range begins and ends on a manipulation index,
        // so no observation is kept without its call and no batch is divided.
        let s = Openhands::new(Params { max_size: 20, keep_first: 3, ..Params::default() }).unwrap();
        for len in 21..60 {
            let ctx = view(len);
            let budget = Budget::new(10_000_000);
            let Some(plan) = s.plan(&ctx, &budget, Trigger::Proactive) else { continue };
            let out = apply_layout(&s, &ctx, &budget, &plan, &[Ok("S".into())]);
            assert!(crate::invariants::check_context(&out.context).is_empty(), "len {len}");
        }
    }

    #[test]
    fn a_condensation_request_halves_the_view_and_tokens_reduce_to_half_the_limit() {
        let s = Openhands::new(Params::default()).unwrap();
        let ctx = view(40);
        // REQUEST: 40 / 2 - 4 - 1 = 15 events from the tail.
        let f = s.forget(&ctx, &Budget::new(10_000_000), true).unwrap();
        assert_eq!(f.end, Openhands::find_next(&ctx, 25));
        // TOKENS: over the window, down to half of it.
        let total = s.estimate(&ctx);
        let budget = Budget::new(total - 1);
        assert!(s.should_compact(&ctx, &budget));
        let f = s.forget(&ctx, &budget, false).unwrap();
        let kept = ctx.range_tokens(0..f.start, &Exact::o200k()) + ctx.range_tokens(f.end..ctx.len(), &Exact::o200k());
        assert!(kept <= budget.context_window / 2 + 10, "kept {kept}");
        // Too little progress: nothing.
        let tiny = Openhands::new(Params { minimum_progress: 0.9, ..Params::default() }).unwrap();
        assert!(tiny.forget(&ctx, &Budget::new(10_000_000), true).is_none());
        assert!(Openhands::new(Params { max_size: 10, keep_first: 4, ..Params::default() }).is_err());
    }
}
