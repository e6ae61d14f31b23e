//! `openhands`: OpenHands' `LLMSummarizingCondenser`, as the SDK's default agent uses it.
//!
//! Source: OpenHands/software-agent-sdk
//! `openhands-sdk/openhands/sdk/context/condenser/llm_summarizing_condenser.py` at
//! 118402ab6c8c02610a4a50a869c0d9b2a8a5906d (`get_condensation_reasons`,
//! `condensation_requirement`, `_get_forgotten_events`, `hard_context_reset`), `base.py`
//! (`RollingCondenser.condense`: a soft requirement that cannot be met leaves the view, a hard
//! one falls back to `hard_context_reset`), and `openhands-tools/openhands/tools/preset/default.py`
//! at 9f8965326a6f7569888bd48188a357c58df049e9 (`get_default_condenser`:
//! `LLMSummarizingCondenser(llm=llm, max_size=80, keep_first=4)`), read with the code search.
//!
//! Parameter sets, each documented upstream: the SDK's default agent, 80 / 4 (the default
//! here); the class defaults, `max_size` 240 / `keep_first` 2 (since 85ecfd933); the legacy
//! server's 120 / 4 (OpenHands/OpenHands `openhands/memory/condenser/impl/`). Set them in an
//! experiment with `max_size` and `keep_first` (and `minimum_progress = 0.0` for the legacy
//! server, which had no such check). `minimum_progress` (0.1) is the later SDK
//! version's (it came with the 240 / 2 class defaults, so 120 / 4 never had it; the default
//! agent's 80 / 4 runs with it); the token limit defaulting to the agent model's input limit
//! is that version's too, as PRODUCTION.md read it.
//!
//! - **Events**: the SDK splits the parallel tool calls of one model response into one action
//!   event each, and every observation, user message and the system prompt is an event. So an
//!   assistant message with `k` calls counts `k` events here, any other message one.
//! - **Reasons** to condense: the view has more than `max_size` events (`EVENTS`), its tokens
//!   exceed the effective token limit, `min(max_tokens, the agent model's input limit)`
//!   (`TOKENS`; the input limit is the window here), or the agent asked (`REQUEST`: the SDK
//!   turns a context-window error into a condensation request, which is
//!   [`Trigger::Overflow`] here). `EVENTS` and `TOKENS` are a soft requirement, `REQUEST` a hard
//!   one.
//! - **Tail**: `events_from_tail` is the strictest of `max_size / 2 - keep_first - 1`
//!   (`EVENTS`), `len / 2 - keep_first - 1` (`REQUEST`), and for `TOKENS` the suffix that
//!   leaves the view at half the token limit. The forgotten range runs from the first
//!   manipulation index at or after event `keep_first` to the first at or after
//!   `len - events_from_tail`; a manipulation index never falls inside a model response's
//!   batch of calls or between a call and its observations, so they are forgotten or kept
//!   together.
//! - **Progress**: fewer than `minimum_progress x len` forgotten events is no condensation.
//! - **Summary**: the forgotten events, the previous summary among them (it sits at
//!   `keep_first`; a summary found earlier in the head is forgotten with them), with the
//!   summarizing prompt (`openhands_condensation.md`: user context, task tracking with ids and
//!   statuses, completed, pending, current state; for code: code state, tests, changes,
//!   dependencies, version control). It is inserted where the forgotten range began, as a user
//!   message.
//! - **No condensation available** for a soft requirement: the view is left as it is. For a
//!   hard one ([`Trigger::Overflow`]) `hard_context_reset` summarizes the whole view; when that
//!   summary request does not fit, it is retried with every event string cut to 0.8 of the
//!   longest, then 0.8 of that, up to 5 attempts in all
//!   (`hard_context_reset_max_retries`, `hard_context_reset_context_scaling`). Here the plan
//!   takes the first attempt whose request fits the window (`notes.hard_reset_attempt`,
//!   `notes.max_event_chars`); when none does there is no plan and the request overflows, as
//!   the SDK raises.
//! - **Failure**: a failed summary raises; the view is unchanged and the conversation goes on.
//!
//! Departures, each kept for a reason: the hard reset keeps the system prompt (the SDK forgets
//! every event of the view; the agent sends its system prompt with every request, and the
//! conformance suite holds every strategy to it). The SDK cuts an over-long event string in the
//! middle with a `<TRUNCATED CONTENT>` marker; the summarizer input here keeps each message's
//! head (the cuts every summarizer reads, [`InputCuts`]). The event-count reason has no token
//! threshold: [`Strategy::threshold`] is `None` while the view is over `max_size`, so a
//! compaction it causes is not reported as below a threshold. The summary can follow a user
//! message kept in the head ([`ViolationKind::RoleAlternation`] documented).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{self, ParamError};
use compaction::context::Context;
use compaction::message::Role;
use compaction::tokens::{Exact, TokenCounter};
use compaction::ViolationKind;
use compaction::{Budget, Fallback, InputCuts, Plan, Promises, Prompt, Slot, Strategy, SummaryRequest, Trigger};

/// The condensation prompt: the forgotten events with the previous summary (`openhands/openhands_condensation.md`, beside this module).
pub fn prompt() -> Prompt {
    Prompt::new("openhands_condensation", include_str!("openhands/openhands_condensation.md"))
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "OpenHands LLMSummarizingCondenser (the SDK's default agent): past 80 events, one per tool \
     call (or the token limit, or on a context error), keeps the first 4 events and the newest down to half of \
     max_size, summarizes the forgotten middle with the previous summary; a batch of calls and its observations are \
     never separated; a context error with nothing to forget summarizes the whole view (hard context reset).";

/// `hard_context_reset_max_retries`.
pub const HARD_RESET_ATTEMPTS: u32 = 5;
/// `hard_context_reset_context_scaling`.
pub const HARD_RESET_SCALING: f64 = 0.8;

/// Parameters of `openhands`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Condense when the view has more events than this (80, the SDK's default agent; the class
    /// default is 240, the legacy server's 120).
    pub max_size: usize,
    /// Events at the start of the view never forgotten (4, the SDK's default agent; the class
    /// default is 2, the legacy server's 4).
    pub keep_first: usize,
    /// Condense when the view's tokens exceed this (unset: the window alone).
    pub max_tokens: Option<u64>,
    /// Least share of the view a condensation must forget (0.1; 0: no such check, as in the
    /// legacy server's condenser).
    pub minimum_progress: f64,
    /// Output cap of the summary request.
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params { max_size: 80, keep_first: 4, max_tokens: None, minimum_progress: 0.1, summary_max_tokens: 4_096 }
    }
}

/// The `openhands` strategy.
#[derive(Debug, Clone)]
pub struct Openhands {
    params: Params,
    meter: Exact,
}

/// The forgotten range `[start, end)` of a view, in entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Forget {
    pub start: usize,
    pub end: usize,
}

/// How many events an entry is: one per tool call of an assistant message, else one.
pub fn events_of(ctx: &Context, i: usize) -> usize {
    let m = ctx.entries()[i].message();
    if m.role == Role::Assistant {
        m.tool_calls.len().max(1)
    } else {
        1
    }
}

/// The event index each entry starts at, and the view's length in events last.
fn event_starts(ctx: &Context) -> Vec<usize> {
    let mut starts = Vec::with_capacity(ctx.len() + 1);
    let mut at = 0;
    for i in 0..ctx.len() {
        starts.push(at);
        at += events_of(ctx, i);
    }
    starts.push(at);
    starts
}

/// The characters of an entry as the summarizer's input shows it (its content and its calls).
fn event_chars(ctx: &Context, i: usize) -> usize {
    let m = ctx.entries()[i].message();
    m.content.chars().count()
        + m.tool_calls.iter().map(|c| c.name.chars().count() + c.arguments.chars().count()).sum::<usize>()
}

impl Openhands {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<Openhands, ParamError> {
        if (params.max_size / 2) as i64 - params.keep_first as i64 - 1 <= 0 {
            return Err(ParamError::new("openhands", "keep_first", "must be less than max_size / 2 - 1"));
        }
        if !(params.minimum_progress.is_finite() && params.minimum_progress >= 0.0 && params.minimum_progress < 1.0) {
            return Err(ParamError::new("openhands", "minimum_progress", "must be in [0, 1)"));
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

    /// The view's length in events.
    pub fn view_len(ctx: &Context) -> usize {
        (0..ctx.len()).map(|i| events_of(ctx, i)).sum()
    }

    /// `find_next_manipulation_index`: the first entry starting at or after event `from` that
    /// is not an observation (a batch of calls starts an atomic unit; its observations end it).
    fn find_next(ctx: &Context, starts: &[usize], from: usize) -> usize {
        (0..ctx.len()).find(|&i| starts[i] >= from && ctx.entries()[i].role() != Role::Tool).unwrap_or(ctx.len())
    }

    /// `_get_forgotten_events` for the reasons that hold (`request`: a condensation request).
    pub(crate) fn forget(&self, ctx: &Context, budget: &Budget, request: bool) -> Option<Forget> {
        let starts = event_starts(ctx);
        let len = starts[ctx.len()];
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
            let mut cut = (0..ctx.len()).find(|&i| starts[i] >= self.params.keep_first).unwrap_or(ctx.len());
            while cut < ctx.len() && freed < reduce {
                freed += ctx.entries()[cut].tokens(&self.meter);
                cut += 1;
            }
            tails.push((len - starts[cut]) as i64);
        }
        let from_tail = *tails.iter().min()?;
        let naive_end = (len as i64 - from_tail).clamp(0, len as i64) as usize;
        let mut start = Self::find_next(ctx, &starts, self.params.keep_first.min(len));
        // A summary already inside the head (OpenHands puts its own at `keep_first`, where it is
        // forgotten with the range) is forgotten too, so that one summary stays live.
        if let Some((i, _)) = ctx.summaries().next() {
            start = start.min(i);
        }
        let end = Self::find_next(ctx, &starts, naive_end);
        if end <= start {
            return None;
        }
        if ((starts[end] - starts[start]) as f64) < len as f64 * self.params.minimum_progress {
            return None;
        }
        Some(Forget { start, end })
    }

    /// `hard_context_reset`: the whole view after the system prompt, with the first attempt's
    /// event cut (none, then 0.8 of the longest event, 0.8 of that, ...) under which the
    /// request fits the window: (attempt, cut).
    pub(crate) fn hard_reset(&self, ctx: &Context, budget: &Budget) -> Option<(u32, Option<usize>)> {
        let base = common::body_start(ctx);
        let span: Vec<usize> = (base..ctx.len()).collect();
        if span.is_empty() {
            return None;
        }
        let output = u64::from(self.params.summary_max_tokens).min(budget.context_window / 4);
        let room = budget.context_window.saturating_sub(output);
        let mut cut: Option<usize> = None;
        for attempt in 1..=HARD_RESET_ATTEMPTS {
            let input = InputCuts { message_chars: cut, tool_result_chars: cut };
            let tokens: u64 = span.iter().map(|&i| common::cut_tokens(ctx, i, &input, &self.meter)).sum();
            if tokens <= room {
                return Some((attempt, cut));
            }
            let longest = cut.unwrap_or_else(|| span.iter().map(|&i| event_chars(ctx, i)).max().unwrap_or(0));
            cut = Some((longest as f64 * HARD_RESET_SCALING) as usize);
        }
        None
    }

    fn condensation(&self, ctx: &Context, f: Forget, trigger: Trigger) -> Plan {
        let mut layout: Vec<Slot> = common::keep(0..f.start).collect();
        layout.push(Slot::Summary { request: 0, role: Role::User, prefix: String::new(), suffix: String::new() });
        layout.extend(common::keep(f.end..ctx.len()));
        let request = SummaryRequest::new(
            (f.start..f.end).collect(),
            prompt(),
            self.params.summary_max_tokens,
            common::next_round(ctx),
        );
        let mut notes = serde_json::Map::new();
        notes.insert("forgotten_start".into(), f.start.into());
        notes.insert("forgotten_end".into(), f.end.into());
        Plan { trigger, layout, requests: vec![request], fallback: Fallback::Unchanged, step: "condense".into(), notes }
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
        if Self::view_len(ctx) > self.params.max_size {
            return None;
        }
        Some(self.token_limit(budget))
    }
    fn thresholds(&self, _ctx: &Context, budget: &Budget) -> Vec<(&'static str, u64)> {
        vec![("tokens", self.token_limit(budget))]
    }
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        Self::view_len(ctx) > self.params.max_size || self.estimate(ctx) > self.token_limit(budget)
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let hard = trigger != Trigger::Proactive;
        if let Some(f) = self.forget(ctx, budget, hard) {
            return Some(self.condensation(ctx, f, trigger));
        }
        if !hard {
            // A soft requirement with nothing to forget: the view as it is.
            return None;
        }
        let (attempt, cut) = self.hard_reset(ctx, budget)?;
        let base = common::body_start(ctx);
        let mut plan = self.condensation(ctx, Forget { start: base, end: ctx.len() }, trigger);
        plan.requests[0].input = InputCuts { message_chars: cut, tool_result_chars: cut };
        plan.step = "hard_context_reset".into();
        plan.notes.insert("hard_reset_attempt".into(), attempt.into());
        if let Some(c) = cut {
            plan.notes.insert("max_event_chars".into(), c.into());
        }
        Some(plan)
    }
    fn promises(&self, ctx: &Context, budget: &Budget) -> Promises {
        let window = match self.forget(ctx, budget, true) {
            Some(f) => ctx.len() - f.end,
            None if self.hard_reset(ctx, budget).is_some() => 0,
            None => ctx.len(),
        };
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
    use compaction::apply_layout;
    use compaction::message::{Message, ToolCall};

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
    fn the_default_agent_condenses_past_80_events_keeping_4_and_the_newest_35() {
        let s = Openhands::new(Params::default()).unwrap();
        let budget = Budget::new(10_000_000);
        // `view(len)` builds at least `len` messages; a batch of two calls is two events.
        let ctx = view(75);
        let events = Openhands::view_len(&ctx);
        assert!(events > 80 && ctx.len() <= 80, "{} messages, {events} events", ctx.len());
        assert!(s.should_compact(&ctx, &budget));
        assert!(!s.should_compact(&view(60), &budget));
        // events_from_tail = 80 / 2 - 4 - 1 = 35 events; the naive end is moved forward past
        // observations; the start (event 4) likewise.
        let starts = event_starts(&ctx);
        let f = s.forget(&ctx, &budget, false).unwrap();
        assert_eq!(f.end, Openhands::find_next(&ctx, &starts, events - 35));
        assert!(events - starts[f.end] <= 35);
        assert!(starts[f.start] >= 4);
        assert_ne!(ctx.entries()[f.start].role(), Role::Tool);
        assert_ne!(ctx.entries()[f.end].role(), Role::Tool);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = apply_layout(&s, &ctx, &budget, &plan, &[Ok("SUM".into())]);
        assert_eq!(out.context.len(), f.start + 1 + (ctx.len() - f.end));
        assert_eq!(out.context.get(f.start).unwrap().message().content, "SUM");
        assert!(compaction::check_context(&out.context).is_empty());
    }

    /// The documented parameter sets: the class defaults (240 / 2) and the legacy server's
    /// (120 / 4) build, and each condenses past its own size.
    #[test]
    fn the_class_and_legacy_parameter_sets_condense_past_their_own_size() {
        let budget = Budget::new(10_000_000);
        for (max_size, keep_first) in [(240, 2), (120, 4)] {
            let s = Openhands::new(Params { max_size, keep_first, ..Params::default() }).unwrap();
            let over = view(max_size);
            assert!(Openhands::view_len(&over) > max_size);
            assert!(s.should_compact(&over, &budget), "{max_size}");
            let f = s.forget(&over, &budget, false).unwrap();
            let starts = event_starts(&over);
            assert!(Openhands::view_len(&over) - starts[f.end] < max_size / 2 - keep_first);
            assert!(!s.should_compact(&view(max_size * 4 / 5), &budget), "{max_size}");
        }
    }

    /// The SDK counts one event per tool call: a response with ten parallel calls and their
    /// ten observations is twenty events, an atomic unit no condensation divides.
    #[test]
    fn one_event_per_tool_call_and_a_batch_is_never_divided() {
        let mut m = vec![Message::system("s"), Message::user("task")];
        let calls: Vec<ToolCall> =
            (0..10).map(|k| ToolCall { id: format!("p{k}"), name: "ls".into(), arguments: "{}".into() }).collect();
        m.push(Message::assistant_calls("", calls));
        for k in 0..10 {
            m.push(Message::tool_result(format!("p{k}"), "ls", "x"));
        }
        let ctx = Context::from_messages(m);
        assert_eq!(ctx.len(), 13);
        assert_eq!(Openhands::view_len(&ctx), 22);
        let s = Openhands::new(Params { max_size: 20, keep_first: 2, ..Params::default() }).unwrap();
        let budget = Budget::new(10_000_000);
        assert!(s.should_compact(&ctx, &budget));
        // Events 2..22 are one unit: the naive end (event 22 - 7 = 15) falls inside it and moves
        // forward to the next manipulation index, the end of the view; the batch is forgotten
        // whole, never divided.
        let f = s.forget(&ctx, &budget, false).unwrap();
        assert_eq!((f.start, f.end), (2, ctx.len()));
        // Counted per message the view would be 13 events, under max_size: the condensation
        // comes from counting each call.
        assert!(ctx.len() <= 20);
    }

    /// `condense` with a hard requirement (a context-window error) and no condensation
    /// available: `hard_context_reset` summarizes the whole view, cutting every event string to
    /// 0.8 of the longest, then 0.8 of that, until the request fits, at most 5 attempts.
    #[test]
    fn a_hard_requirement_with_nothing_to_forget_resets_the_whole_view() {
        let mut m = vec![Message::system("s"), Message::user("task")];
        let calls: Vec<ToolCall> =
            (0..4).map(|k| ToolCall { id: format!("p{k}"), name: "cat".into(), arguments: "{}".into() }).collect();
        m.push(Message::assistant_calls("", calls));
        for k in 0..4 {
            m.push(Message::tool_result(format!("p{k}"), "cat", "line ".repeat(2_000)));
        }
        let ctx = Context::from_messages(m);
        let s = Openhands::new(Params { summary_max_tokens: 100, ..Params::default() }).unwrap();
        let whole = ctx.tokens(&Exact::o200k());
        // Everything after the task is one unit: no range to forget.
        assert!(s.forget(&ctx, &Budget::new(whole + 1_000), true).is_none());
        // A window the whole view's summary request fits: the first attempt, uncut.
        let roomy = Budget::new(whole + 1_000);
        let plan = s.plan(&ctx, &roomy, Trigger::Overflow).unwrap();
        assert_eq!(plan.step, "hard_context_reset");
        assert_eq!(plan.notes["hard_reset_attempt"], 1);
        assert_eq!(plan.requests[0].span, (1..ctx.len()).collect::<Vec<_>>());
        let out = apply_layout(&s, &ctx, &roomy, &plan, &[Ok("RESET".into())]);
        assert_eq!(out.context.len(), 2);
        assert_eq!(out.context.get(0).unwrap().message().content, "s");
        // A window about half the view: event strings cut by 0.8 per attempt until it fits.
        let half = Budget::new(whole / 2);
        let plan = s.plan(&ctx, &half, Trigger::Overflow).unwrap();
        let attempt = plan.notes["hard_reset_attempt"].as_u64().unwrap();
        assert!((3..=5).contains(&attempt), "attempt {attempt}");
        let longest = 10_000.0_f64;
        let mut expected = longest;
        for _ in 1..attempt {
            expected = (expected * HARD_RESET_SCALING).floor();
        }
        assert_eq!(plan.notes["max_event_chars"].as_u64().unwrap(), expected as u64);
        // Five attempts are not enough for a window a tenth of the view: no plan, the
        // request overflows as the SDK raises.
        assert!(s.plan(&ctx, &Budget::new(whole / 10), Trigger::Overflow).is_none());
        // A soft requirement with nothing to forget leaves the view.
        assert!(s.plan(&ctx, &Budget::new(whole / 2), Trigger::Proactive).is_none());
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
            assert!(compaction::check_context(&out.context).is_empty(), "len {len}");
        }
    }

    #[test]
    fn a_condensation_request_halves_the_view_and_tokens_reduce_to_half_the_limit() {
        let s = Openhands::new(Params::default()).unwrap();
        let ctx = view(40);
        let events = Openhands::view_len(&ctx);
        // REQUEST: events / 2 - 4 - 1 events from the tail.
        let f = s.forget(&ctx, &Budget::new(10_000_000), true).unwrap();
        let starts = event_starts(&ctx);
        assert_eq!(f.end, Openhands::find_next(&ctx, &starts, events - (events / 2 - 5)));
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
        assert_eq!((Params::default().max_size, Params::default().keep_first), (80, 4));
    }
}
