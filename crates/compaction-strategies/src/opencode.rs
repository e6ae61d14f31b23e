//! `opencode`: OpenCode's session compaction.
//!
//! Source: sst/opencode, read with the code search: `packages/opencode/src/session/compaction.ts`
//! at 3df4a25506fb5ef55e4a02142708448c07fa754a (`PRUNE_MINIMUM = 20_000`,
//! `PRUNE_PROTECT = 40_000`, `PRUNE_PROTECTED_TOOLS = ["skill"]`,
//! `MIN_PRESERVE_RECENT_TOKENS = 2_000`, `MAX_PRESERVE_RECENT_TOKENS = 15_000`,
//! `TOOL_OUTPUT_MAX_CHARS = 2_000`, `select`, `splitTurn`, `prune`, `completedCompactions`,
//! `processCompaction`), `overflow.ts` (usable tokens) and `packages/core/src/session/compaction.ts`
//! at 31e22f65a23c498639b8cef24b90e6ae193cdcb6 (the anchored template, `buildPrompt`, and the
//! suffix mode's validator).
//!
//! - **Trigger**: usable = `context - maxOutput - reserved` (a replay states no separate input
//!   limit), `reserved = min(20,000, maxOutput)`; overflow when the request's tokens reach usable
//!   (`>=`). The request's tokens are the provider's reported usage: exact `o200k_base` here.
//!   Departure: `maxOutput` is the model's output limit capped at 32,000 (`OUTPUT_TOKEN_MAX`); a
//!   replay has no model, so unset it is `min(32,000, window / 4)` (128k: usable 76,000; 32k:
//!   16,000).
//! - **Prune** (opt-in, `prune`): walking back over tool outputs, skipping the last 2 user turns,
//!   stopping at a summary or at an output already cleared, the newest 40,000 tokens of outputs
//!   are protected and older ones are cleared ("[Old tool result content cleared]") only if at
//!   least 20,000 tokens would be freed; `skill` outputs are never cleared. OpenCode runs it
//!   after every turn; here it runs when the trigger fires, and when the pruned context is under
//!   usable it is the whole compaction (step `prune`), otherwise the summary follows.
//! - **Tail** (`select`): user turns newest first (the last `tail_turns` of them when set;
//!   unset, all), each kept whole while the running total fits `preserve_recent_tokens`
//!   (unset: `min(15,000, max(2,000, floor(usable x 0.25)))`); the first turn that does not fit
//!   is split (`splitTurn`: the earliest start inside it whose rest fits what remains) and the
//!   walk stops. A tail that would start at the first message is no tail. The sizes are
//!   OpenCode's own estimate (`Token.estimate(JSON.stringify(messages))`: characters / 4,
//!   rounded), not the provider's count: here the characters of each message's content and
//!   calls, / 4, rounded. Departure: a split never starts on a tool result (an OpenCode message
//!   holds a call with its result; here they are two messages).
//! - **Summary**: everything before the tail except earlier compactions (their request and
//!   summary are hidden, `completedCompactions`, and the last summary is passed as the previous
//!   one), with the anchored template (`opencode_anchored.md`: Objective; Important
//!   Details; Work State with Completed / Active / Blocked; Next Move; Relevant Files; every
//!   section present, "(none)" when empty; merged with the previous summary, newer wins). Output
//!   cap 4,096 tokens. The heading validator ([`validate`]) belongs to the core loop's `suffix`
//!   mode only (`mode === "suffix" && !validateSummary(summary)`); the default `prepend` mode
//!   and the session path modelled here accept any non-empty summary, so no validator runs.
//! - **Placement**: a user message carrying the compaction request ("What did we do so far?"),
//!   the summary as an assistant message, then the tail; after every automatic compaction a
//!   synthetic user message asks to continue ("Continue if you have next steps, or stop and ask
//!   for clarification ...", `processCompaction` with `auto`), appended after the tail.
//! - **Too large**: the summary request is the span serialized with each tool output cut to
//!   2,000 characters (`TOOL_OUTPUT_MAX_CHARS`, counted here as 500 tokens); when it and the
//!   output cap (at most a quarter of the window) do not fit the window, OpenCode fails with
//!   "session too large to compact": no plan.
//! - **Failure**: a failed summary leaves the session unchanged.
//!
//! **Engines**: `engine = "v1"` (the default, as the stable CLI ships) is what this header
//! describes; `engine = "v2"` follows the "compact v2" beta of the core loop (trigger, tail walked
//! back to a user message, template check with one retry, one checkpoint message): see [`v2`].
//!
//! Departures, each kept for a reason: after a compaction caused by a provider's size error
//! (`overflow`), OpenCode replays the last real user message instead of the continue message
//! (the error it targets is media too large, which the recordings do not hold); here both
//! automatic paths append the continue message. The continue message and a user message ending
//! the tail are consecutive user messages ([`ViolationKind::RoleAlternation`], documented).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{self, ParamError};
use compaction::context::{Context, Inserted, Origin};
use compaction::message::{Message, Role};
use compaction::tokens::{Exact, TokenCounter};
use compaction::ViolationKind;
use compaction::{
    apply_layout, Budget, Compacted, InputCuts, Plan, Promises, Prompt, Slot, Strategy, SummaryOutcome, SummaryRequest,
    Trigger,
};

/// The anchored summary prompt (Objective ... Relevant Files), merged with the previous summary (`opencode/opencode_anchored.md`, beside this module).
pub fn prompt() -> Prompt {
    Prompt::new("opencode_anchored", include_str!("opencode/opencode_anchored.md"))
}

/// Every prompt this strategy asks for (both engines).
pub fn prompts() -> Vec<Prompt> {
    vec![prompt(), v2::prompt(), v2::retry_prompt()]
}

pub mod v2;

/// Which of OpenCode's compaction engines the strategy models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// The session compaction of the stable CLI (`packages/opencode/src/session/compaction.ts`).
    #[default]
    V1,
    /// The "compact v2" beta (`packages/core/src/session/compaction.ts`).
    V2,
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "OpenCode: at usable = window - max output - reserved, keeps the last user turns (up to \
     15,000 tokens) and replaces the rest with an anchored, sectioned summary merged with the previous one; \
     optional prune of old tool outputs (40k protected, 20k minimum).";

/// OpenCode's cap on the model's output tokens.
pub const OUTPUT_TOKEN_MAX: u64 = 32_000;
/// OpenCode's cap on the reserved tokens.
pub const RESERVED_MAX: u64 = 20_000;
/// Tool output tokens protected from pruning (the newest).
pub const PRUNE_PROTECT: u64 = 40_000;
/// The least a prune must clear to be done.
pub const PRUNE_MINIMUM: u64 = 20_000;
/// Characters of a tool output kept in the summarizer's input.
pub const TOOL_OUTPUT_MAX_CHARS: u64 = 2_000;
/// What replaces a pruned tool output.
pub const PRUNED: &str = "[Old tool result content cleared]";
/// The user message that asks for the summary.
pub const COMPACTION_REQUEST: &str = "What did we do so far?";
/// The user message that follows the summary.
pub const CONTINUE: &str = "Continue with the next steps if there are any; if you are unsure how to go on, stop and \
     ask for clarification.";

/// Whether the last assistant message's calls are not all answered after it.
fn calls_in_flight(ctx: &Context) -> bool {
    let e = ctx.entries();
    let Some(a) = e.iter().rposition(|x| x.role() == Role::Assistant) else { return false };
    let answered: Vec<&str> = e[a + 1..].iter().filter_map(|x| x.message().tool_call_id.as_deref()).collect();
    e[a].message().tool_calls.iter().any(|c| !answered.contains(&c.id.as_str()))
}

/// OpenCode's `Token.estimate` over the messages `range`: their characters (content and calls)
/// divided by 4, rounded.
pub fn estimate_range(ctx: &Context, range: std::ops::Range<usize>) -> u64 {
    let chars: u64 = ctx.entries()[range]
        .iter()
        .map(|e| {
            let m = e.message();
            compaction::tokens::js_len(&m.content)
                + m.tool_calls
                    .iter()
                    .map(|c| compaction::tokens::js_len(&c.name) + compaction::tokens::js_len(&c.arguments))
                    .sum::<u64>()
        })
        .sum();
    (chars as f64 / 4.0).round() as u64
}
/// The anchored template's headings, in order.
pub const HEADINGS: [&str; 5] = ["Objective", "Important Details", "Work State", "Next Move", "Relevant Files"];
/// Tools whose outputs prune never clears.
pub const PRUNE_PROTECTED_TOOLS: [&str; 1] = ["skill"];

/// Parameters of `opencode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Which engine: `v1` (the stable CLI's) or `v2` (the "compact v2" beta).
    pub engine: Engine,
    /// The model's output limit (unset: min(32,000, window / 4)).
    pub max_output: Option<u64>,
    /// Tokens reserved below the limit (unset: min(20,000, max_output)).
    pub reserved: Option<u64>,
    /// Tail budget in tokens (unset: min(15,000, max(2,000, usable / 4))).
    pub preserve_recent_tokens: Option<u64>,
    /// Most user turns kept in the tail (unset: no limit but the token budget).
    pub tail_turns: Option<usize>,
    /// Run the prune pass (opt-in in this version).
    pub prune: bool,
    /// Newest tool-output tokens prune protects (40,000).
    pub prune_protect: u64,
    /// Least tokens prune must free (20,000).
    pub prune_minimum: u64,
    /// Output cap of the summary (4,096).
    pub summary_max_tokens: u32,
    /// v2: tokens of newest messages serialized into the checkpoint (`keep.tokens`, 15,000).
    pub keep_tokens: u64,
    /// v2: tokens kept free below the window (`buffer`, 20,000).
    pub buffer: u64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            engine: Engine::V1,
            max_output: None,
            reserved: None,
            preserve_recent_tokens: None,
            tail_turns: None,
            prune: false,
            prune_protect: PRUNE_PROTECT,
            prune_minimum: PRUNE_MINIMUM,
            summary_max_tokens: 4_096,
            keep_tokens: v2::KEEP_TOKENS,
            buffer: v2::BUFFER,
        }
    }
}

/// The `opencode` strategy.
#[derive(Debug, Clone)]
pub struct Opencode {
    params: Params,
    meter: Exact,
}

/// The anchored template's validator: every heading present, in order, each with content. The
/// core loop runs it in `suffix` mode only; the default `prepend` mode, modelled here, does not.
pub fn validate(summary: &str) -> Result<(), String> {
    let mut at = 0;
    let mut positions = Vec::new();
    for h in HEADINGS {
        match summary[at..].find(h) {
            Some(p) => {
                positions.push((at + p, h));
                at += p + h.len();
            }
            None => return Err(format!("heading `{h}` missing or out of order")),
        }
    }
    for (k, (p, h)) in positions.iter().enumerate() {
        let body_start = summary[*p..].find('\n').map_or(summary.len(), |n| p + n);
        let body_end = positions.get(k + 1).map_or(summary.len(), |(q, _)| *q);
        let body = summary.get(body_start..body_end).unwrap_or("");
        if body.trim().trim_matches('#').trim().is_empty() {
            return Err(format!("section `{h}` is empty"));
        }
    }
    Ok(())
}

impl Opencode {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<Opencode, ParamError> {
        if params.max_output == Some(0) {
            return Err(ParamError::new("opencode", "max_output", "must be at least 1"));
        }
        if params.preserve_recent_tokens == Some(0) {
            return Err(ParamError::new("opencode", "preserve_recent_tokens", "must be at least 1"));
        }
        if params.tail_turns == Some(0) {
            return Err(ParamError::new("opencode", "tail_turns", "must be at least 1"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new("opencode", "summary_max_tokens", "must be at least 1"));
        }
        Ok(Opencode { params, meter: Exact::o200k() })
    }

    /// The model's output tokens, as OpenCode caps them.
    pub fn max_output(&self, budget: &Budget) -> u64 {
        self.params.max_output.unwrap_or((budget.context_window / 4).min(OUTPUT_TOKEN_MAX))
    }

    /// `overflow.ts`'s usable tokens.
    pub fn usable(&self, budget: &Budget) -> u64 {
        let out = self.max_output(budget);
        let reserved = self.params.reserved.unwrap_or(RESERVED_MAX.min(out));
        budget.context_window.saturating_sub(out).saturating_sub(reserved)
    }

    /// Tokens of recent turns kept verbatim.
    pub fn preserve_recent_tokens(&self, budget: &Budget) -> u64 {
        self.params.preserve_recent_tokens.unwrap_or_else(|| (self.usable(budget) / 4).clamp(2_000, 15_000))
    }

    /// `select`: the first entry of the tail (`ctx.len()` when the tail is empty).
    pub fn tail_start(&self, ctx: &Context, budget: &Budget) -> usize {
        let len = ctx.len();
        let base = common::body_start(ctx);
        let budget_tokens = self.preserve_recent_tokens(budget);
        let starts = common::user_turns(ctx);
        let ends: Vec<usize> = starts.iter().skip(1).copied().chain(std::iter::once(len)).collect();
        let all: Vec<(usize, usize)> = starts.into_iter().zip(ends).collect();
        let recent = match self.params.tail_turns {
            Some(limit) => &all[all.len().saturating_sub(limit)..],
            None => &all[..],
        };
        let mut total = 0;
        let mut keep = None;
        for &(start, end) in recent.iter().rev() {
            let size = estimate_range(ctx, start..end);
            if total + size <= budget_tokens {
                total += size;
                keep = Some(start);
                continue;
            }
            // `splitTurn`: the earliest start inside the turn whose rest of the turn fits.
            let remaining = budget_tokens - total;
            // `splitTurn` returns nothing for a budget of 0.
            let split = ((start + 1)..end)
                .filter(|_| remaining > 0)
                .find(|&i| ctx.entries()[i].role() != Role::Tool && estimate_range(ctx, i..end) <= remaining);
            if split.is_some() {
                keep = split;
            }
            break;
        }
        match keep {
            // A tail that would be the whole history is no tail.
            Some(s) if s > base => s,
            _ => len,
        }
    }

    /// The summary request's size: the span as OpenCode serializes it, each tool output cut to
    /// `TOOL_OUTPUT_MAX_CHARS` (2,000 characters, about 500 tokens).
    pub fn request_tokens(&self, ctx: &Context, span: &[usize]) -> u64 {
        span.iter()
            .map(|&i| {
                let e = &ctx.entries()[i];
                let t = e.tokens(&self.meter);
                if e.role() == Role::Tool {
                    t.min(TOOL_OUTPUT_MAX_CHARS / 4)
                } else {
                    t
                }
            })
            .sum()
    }

    /// The prune pass: the tool outputs to clear, or nothing when fewer than `prune_minimum`
    /// tokens would be freed.
    pub fn prune_list(&self, ctx: &Context) -> Vec<usize> {
        let e = ctx.entries();
        let mut turns = 0;
        let mut total = 0;
        let mut pruned = 0;
        let mut list = Vec::new();
        for i in (0..ctx.len()).rev() {
            let entry = &e[i];
            if entry.role() == Role::User && matches!(entry.origin(), Origin::Recorded { .. } | Origin::Masked { .. }) {
                turns += 1;
            }
            if turns < 2 {
                continue;
            }
            if entry.origin().is_summary() {
                break;
            }
            if entry.role() != Role::Tool {
                continue;
            }
            if matches!(entry.origin(), Origin::Masked { .. }) {
                break;
            }
            if PRUNE_PROTECTED_TOOLS.contains(&entry.message().name.as_deref().unwrap_or("")) {
                continue;
            }
            let t = entry.tokens(&self.meter);
            total += t;
            if total > self.params.prune_protect {
                pruned += t;
                list.push(i);
            }
        }
        if pruned > self.params.prune_minimum {
            list.reverse();
            list
        } else {
            Vec::new()
        }
    }

    fn prune_plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let list = self.prune_list(ctx);
        if list.is_empty() {
            return None;
        }
        let placeholder = self.meter.count(PRUNED);
        let freed: u64 = list.iter().map(|&i| ctx.entries()[i].tokens(&self.meter).saturating_sub(placeholder)).sum();
        if self.estimate(ctx).saturating_sub(freed) >= self.usable(budget) {
            return None;
        }
        let layout = (0..ctx.len())
            .map(|index| {
                if list.binary_search(&index).is_ok() {
                    Slot::Mask { index, placeholder: PRUNED.to_string() }
                } else {
                    Slot::Keep { index }
                }
            })
            .collect();
        let mut plan = Plan::deterministic(trigger, "prune", layout);
        plan.notes.insert("pruned".into(), list.len().into());
        Some(plan)
    }
}

impl Strategy for Opencode {
    fn name(&self) -> &'static str {
        "opencode"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        match self.params.engine {
            Engine::V1 => Some(self.usable(budget).saturating_sub(1)),
            Engine::V2 => Some(self.v2_ceiling(budget).saturating_sub(1)),
        }
    }
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        match self.params.engine {
            Engine::V1 => self.threshold(ctx, budget).is_some_and(|t| self.estimate(ctx) > t),
            Engine::V2 => self.v2_should_compact(ctx, budget),
        }
    }
    fn can_operate(&self, budget: &Budget) -> Result<(), String> {
        if self.params.engine == Engine::V2 && self.v2_ceiling(budget) == 0 {
            return Err(format!(
                "v2's prompt ceiling (window - max(output, buffer {})) leaves nothing below the window ({}): it would \
                 compact before every call",
                self.params.buffer, budget.context_window
            ));
        }
        match self.threshold(&Context::new(), budget) {
            Some(t) if t > budget.context_window => Err(format!(
                "its trigger threshold ({t} tokens) is above the window ({}): it can never fire on a request that fits",
                budget.context_window
            )),
            _ => Ok(()),
        }
    }
    fn plan_with(
        &self,
        ctx: &Context,
        budget: &Budget,
        trigger: Trigger,
        summarize: &mut dyn FnMut(&Context, &SummaryRequest) -> SummaryOutcome,
    ) -> Option<Plan> {
        match self.params.engine {
            Engine::V1 => self.plan(ctx, budget, trigger),
            Engine::V2 => self.v2_plan_with(ctx, trigger, summarize),
        }
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        if self.params.engine == Engine::V2 {
            return self.v2_plan(ctx, trigger);
        }
        if self.params.prune {
            if let Some(plan) = self.prune_plan(ctx, budget, trigger) {
                return Some(plan);
            }
        }
        let base = common::body_start(ctx);
        let tail = self.tail_start(ctx, budget);
        if tail <= base {
            return None;
        }
        let span: Vec<usize> = (base..tail)
            .filter(|&i| !matches!(ctx.entries()[i].origin(), Origin::Summary { .. } | Origin::Inserted { .. }))
            .collect();
        if span.is_empty() {
            return None;
        }
        let output = u64::from(self.params.summary_max_tokens).min(budget.context_window / 4);
        if self.request_tokens(ctx, &span).saturating_add(output) > budget.context_window {
            return None;
        }
        let mut layout: Vec<Slot> = common::keep(0..base).collect();
        layout.push(Slot::insert(Message::user(COMPACTION_REQUEST), Inserted::Other));
        layout.push(Slot::Summary { request: 0, role: Role::Assistant, prefix: String::new(), suffix: String::new() });
        layout.extend(common::keep(tail..ctx.len()));
        // After every automatic compaction (`processCompaction` with `auto`). OpenCode compacts
        // between steps, with every call answered; a context that ends with calls still in
        // flight gets no message between them and their results.
        if !calls_in_flight(ctx) {
            layout.push(Slot::insert(Message::user(CONTINUE), Inserted::Other));
        }
        let request = SummaryRequest {
            previous: common::live_summary(ctx),
            input: InputCuts { message_chars: None, tool_result_chars: Some(2_000) },
            ..SummaryRequest::new(span, prompt(), self.params.summary_max_tokens, common::next_round(ctx))
        };
        Some(common::summary_plan(trigger, layout, request, "tail_start", tail))
    }
    /// The standard layout; the new summary also stands for what the previous one covered.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        if self.params.engine == Engine::V2 {
            return self.v2_apply(ctx, budget, plan, summaries);
        }
        let mut out = apply_layout(self, ctx, budget, plan, summaries);
        if out.event.fallback.is_none() && plan.step == "compact" {
            let previous: Vec<usize> = ctx.summaries().map(|(i, _)| i).collect();
            common::inherit_covers(&mut out.context, &compaction::covered(ctx, &previous));
        }
        out
    }
    fn promises(&self, _ctx: &Context, _budget: &Budget) -> Promises {
        if self.params.engine == Engine::V2 {
            // The tail becomes text inside the checkpoint: no trailing entry stays as it was.
            return Promises { keeps_system_prompt: true, recent_window: 0, documented_deviations: Vec::new() };
        }
        // The tail is kept verbatim, but the continue message every automatic compaction
        // appends follows it: no trailing entry stays as it was.
        Promises {
            keeps_system_prompt: true,
            recent_window: 0,
            documented_deviations: vec![ViolationKind::RoleAlternation],
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::message::ToolCall;
    use compaction::SummaryFailure;

    #[test]
    fn usable_is_window_minus_output_minus_reserved() {
        let s = Opencode::new(Params::default()).unwrap();
        // 128k: output min(32,000, 32,000) = 32,000, reserved 20,000.
        assert_eq!(s.usable(&Budget::new(128_000)), 76_000);
        // 32k: output 8,000, reserved min(20,000, 8,000) = 8,000.
        assert_eq!(s.usable(&Budget::new(32_000)), 16_000);
        // 200k: output capped at 32,000.
        assert_eq!(s.usable(&Budget::new(200_000)), 148_000);
        // Reached at >=: the threshold is one below.
        assert_eq!(s.threshold(&Context::new(), &Budget::new(128_000)), Some(75_999));
        // Tail budget: min(15,000, max(2,000, usable / 4)).
        assert_eq!(s.preserve_recent_tokens(&Budget::new(128_000)), 15_000);
        assert_eq!(s.preserve_recent_tokens(&Budget::new(32_000)), 4_000);
        assert_eq!(s.preserve_recent_tokens(&Budget::new(8_000)), 2_000);
        let set =
            Opencode::new(Params { max_output: Some(4_096), reserved: Some(1_000), ..Params::default() }).unwrap();
        assert_eq!(set.usable(&Budget::new(32_000)), 26_904);
    }

    fn turns(n: usize, words: usize) -> Context {
        let mut m = vec![Message::system("sys")];
        for t in 0..n {
            m.push(Message::user(format!("turn {t}")));
            m.push(Message::assistant_calls(
                "",
                vec![ToolCall { id: format!("c{t}"), name: "read".into(), arguments: "{}".into() }],
            ));
            m.push(Message::tool_result(format!("c{t}"), "read", "text ".repeat(words)));
            m.push(Message::assistant(format!("done {t}")));
        }
        Context::from_messages(m)
    }

    #[test]
    fn the_tail_is_the_last_two_turns_and_the_summary_goes_between() {
        // usable = 2,000 - 900 - 900 = 200.
        let s = Opencode::new(Params {
            max_output: Some(900),
            reserved: Some(900),
            summary_max_tokens: 100,
            tail_turns: Some(2),
            ..Params::default()
        })
        .unwrap();
        let ctx = turns(5, 50);
        let budget = Budget::new(2_000);
        assert!(s.should_compact(&ctx, &budget));
        // Two turns of about 60 tokens each fit 2,000: the tail starts at turn 3's user message.
        assert_eq!(s.tail_start(&ctx, &budget), 13);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.requests[0].span, (1..13).collect::<Vec<_>>());
        let out = s.apply(&ctx, &budget, &plan, &[Ok("SUM".into())]);
        let shape: Vec<(Role, String)> = out.context.messages().map(|m| (m.role, m.content.clone())).collect();
        assert_eq!(shape[1], (Role::User, COMPACTION_REQUEST.to_string()));
        assert_eq!(shape[2], (Role::Assistant, "SUM".to_string()));
        assert_eq!(shape[3], (Role::User, "turn 3".to_string()));
        // The tail, then the continue message every automatic compaction appends; no validator
        // runs in the default (prepend) mode.
        assert_eq!(out.context.len(), 3 + 8 + 1);
        assert_eq!(shape.last().unwrap(), &(Role::User, CONTINUE.to_string()));
        assert!(!out.event.notes.contains_key("validator"));
        let failed = s.apply(&ctx, &budget, &plan, &[Err(SummaryFailure { reason: "x".into() })]);
        assert_eq!(failed.context.len(), ctx.len());
        // Without a turn limit all five turns fit 2,000 tokens: a tail that is the whole history
        // is no tail, everything is summarized and a continue message follows.
        let all = Opencode::new(Params { tail_turns: None, ..s.params.clone() }).unwrap();
        assert_eq!(all.tail_start(&ctx, &budget), ctx.len());
        // The next compaction hides the earlier request and summary and passes the summary on.
        let mut longer = out.context.clone();
        for (k, m) in [Message::user("turn 5"), Message::assistant("x ".repeat(300))].into_iter().enumerate() {
            longer.push(compaction::context::Entry::recorded(21 + k, m));
        }
        let second = s.plan(&longer, &budget, Trigger::Proactive).unwrap();
        assert_eq!(second.requests[0].previous.as_deref(), Some("SUM"));
        assert!(!second.requests[0].span.contains(&1) && !second.requests[0].span.contains(&2));
        let again = s.apply(&longer, &budget, &second, &[Ok("SUM2".into())]);
        let covers = again.context.summaries().next().map(|(_, e)| e.origin().clone());
        assert!(
            matches!(covers, Some(Origin::Summary { round: 2, covers }) if covers.contains(&1) && covers.contains(&13))
        );
    }

    #[test]
    fn a_turn_too_big_for_the_tail_is_split_or_the_tail_is_empty() {
        let s = Opencode::new(Params { preserve_recent_tokens: Some(30), ..Params::default() }).unwrap();
        let ctx = turns(3, 200);
        let budget = Budget::new(1_000);
        // The newest turn (user, call, 200-word result, "done 2") is over 30 tokens: split at
        // "done 2", the last message.
        assert_eq!(s.tail_start(&ctx, &budget), ctx.len() - 1);
        let tiny =
            Opencode::new(Params { preserve_recent_tokens: Some(1), summary_max_tokens: 100, ..Params::default() })
                .unwrap();
        assert_eq!(tiny.tail_start(&ctx, &budget), ctx.len());
        let plan = tiny.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert!(matches!(plan.layout.last(), Some(Slot::Insert { message, .. }) if message.content == CONTINUE));
    }

    #[test]
    fn prune_protects_40k_needs_20k_and_skips_the_last_two_turns() {
        let s =
            Opencode::new(Params { prune: true, prune_protect: 300, prune_minimum: 200, ..Params::default() }).unwrap();
        // Eight turns with ~200-token outputs. Outputs of the last two turns are skipped; of the
        // rest, walking back, the first ~300 tokens are protected, the older ones pruned.
        let ctx = turns(8, 200);
        let list = s.prune_list(&ctx);
        assert!(!list.is_empty());
        assert!(list.iter().all(|&i| i < ctx.len() - 8));
        // Walking back from turn 6's user message: turn 5's output (~200 tokens) is protected,
        // turn 4's crosses 300 and is pruned, as is every older one.
        assert!(!list.contains(&(1 + 4 * 5 + 2)));
        assert!(list.contains(&(1 + 4 * 4 + 2)));
        assert!(list.contains(&3));
        let strict =
            Opencode::new(Params { prune: true, prune_protect: 300, prune_minimum: 100_000, ..Params::default() })
                .unwrap();
        assert!(strict.prune_list(&ctx).is_empty());
        // A pruned context under usable is the whole compaction.
        let plan = s.plan(&ctx, &Budget::new(12_000), Trigger::Overflow).unwrap();
        assert_eq!(plan.step, "prune");
    }

    #[test]
    fn the_validator_wants_every_heading_in_order_and_filled() {
        let good =
            "## Objective\nship it\n## Important Details\n(none)\n## Work State\nCompleted: x\n## Next Move\ny\n\
                    ## Relevant Files\nsrc/a.rs\n";
        assert_eq!(validate(good), Ok(()));
        assert!(validate(&good.replace("## Next Move\ny\n", "")).is_err());
        assert!(validate(&good.replace("(none)", "")).unwrap_err().contains("Important Details"));
        let swapped =
            good.replace("Objective", "TMP").replace("Relevant Files", "Objective").replace("TMP", "Relevant Files");
        assert!(validate(&swapped).is_err());
    }

    /// `select` sizes the tail with OpenCode's own estimate (`Token.estimate` of the JSON of the
    /// messages: characters / 4), not the provider's tokens: a turn of 4,000 characters of
    /// digits is 1,000 in OpenCode's estimate whatever the tokenizer makes of it.
    #[test]
    fn the_tail_is_sized_with_opencodes_own_estimate() {
        let mut m = vec![Message::system("sys"), Message::user("a"), Message::assistant("b".repeat(40))];
        m.push(Message::user("u"));
        m.push(Message::assistant("7".repeat(3_998)));
        let ctx = Context::from_messages(m);
        assert_eq!(estimate_range(&ctx, 3..5), 1_000);
        let fits = Opencode::new(Params { preserve_recent_tokens: Some(1_000), ..Params::default() }).unwrap();
        assert_eq!(fits.tail_start(&ctx, &Budget::new(100_000)), 3);
        let short = Opencode::new(Params { preserve_recent_tokens: Some(999), ..Params::default() }).unwrap();
        // Split: the newest message alone (999.5 rounds to 1,000) does not fit either.
        assert_eq!(short.tail_start(&ctx, &Budget::new(100_000)), ctx.len());
    }

    fn v2() -> Opencode {
        Opencode::new(Params {
            engine: Engine::V2,
            keep_tokens: 60,
            buffer: 100,
            summary_max_tokens: 100,
            ..Params::default()
        })
        .unwrap()
    }

    /// A summarizer answering the first request with `first` and the reminder with `second`,
    /// recording the prompts asked.
    fn answering<'a>(
        asked: &'a mut Vec<String>,
        first: &'a str,
        second: &'a str,
    ) -> impl FnMut(&Context, &[SummaryRequest]) -> compaction::Summaries + 'a {
        move |_, requests| {
            compaction::Summaries::of(
                requests
                    .iter()
                    .map(|r| {
                        asked.push(r.prompt.name().to_string());
                        Ok(if r.prompt.name() == "opencode_v2" { first } else { second }.to_string())
                    })
                    .collect(),
            )
        }
    }

    #[test]
    fn v2_triggers_below_the_window_minus_output_or_buffer() {
        let s = Opencode::new(Params { engine: Engine::V2, ..Params::default() }).unwrap();
        // 128k: output min(32,000, 128,000 / 4); 128,000 - max(32,000, 20,000).
        assert_eq!(s.v2_ceiling(&Budget::new(128_000)), 96_000);
        assert_eq!(s.threshold(&Context::new(), &Budget::new(128_000)), Some(95_999));
        // 32k: output 8,000 is under the 20,000 buffer.
        assert_eq!(s.v2_ceiling(&Budget::new(32_000)), 12_000);
        // 16k: the buffer takes the whole window.
        assert!(s.can_operate(&Budget::new(16_000)).unwrap_err().contains("buffer 20000"));
        assert!(s.can_operate(&Budget::new(32_000)).is_ok());
        // The default engine is v1.
        assert_eq!(Params::default().engine, Engine::V1);
        assert_eq!(
            Opencode::new(Params::default()).unwrap().threshold(&Context::new(), &Budget::new(128_000)),
            Some(75_999)
        );
    }

    #[test]
    fn v2_checkpoint_is_one_user_message_with_the_summary_and_the_serialized_tail() {
        let s = v2();
        let ctx = turns(5, 50);
        let budget = Budget::new(400);
        assert!(s.should_compact(&ctx, &budget));
        // Newest first within 60 tokens: "done 4" fits, turn 4's 250-character result does not;
        // the walk goes back to turn 4's user message.
        assert_eq!(s.v2_tail_start(&ctx), Some(17));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.requests[0].span, (1..17).collect::<Vec<_>>());
        assert_eq!(plan.requests[0].prompt.var("instructions"), Some(v2::OPENING_NEW));
        let mut asked = Vec::new();
        let step = compaction::compact(
            &s,
            &ctx,
            &budget,
            Trigger::Proactive,
            answering(&mut asked, "## Objective\n- ship it", ""),
        )
        .unwrap();
        assert_eq!(asked, ["opencode_v2"]);
        assert!(step.plan.requests.is_empty());
        let out = step.compacted;
        assert_eq!(out.event.fallback, None);
        assert_eq!(out.context.len(), 2);
        let m = out.context.get(1).unwrap().message();
        assert_eq!(m.role, Role::User);
        assert!(m.content.contains(v2::CHECKPOINT_NOTE));
        let (summary, recent) = v2::checkpoint_parts(m).unwrap();
        assert_eq!(summary, "## Objective\n- ship it");
        let result = format!("[Tool result]: {}", "text ".repeat(50));
        assert_eq!(
            recent,
            format!("[User]: turn 4\n\n[Assistant tool call]: read({{}})\n\n{result}\n\n[Assistant]: done 4")
        );
        // The checkpoint stands for the summarized head and the serialized tail.
        assert!(
            matches!(out.context.get(1).unwrap().origin(), Origin::Summary { round: 1, covers } if covers.contains(&1) && covers.contains(&20))
        );
        // A context that ends with its checkpoint does not compact again; the next one updates it.
        assert!(!s.should_compact(&out.context, &budget));
        let mut longer = out.context.clone();
        for (k, msg) in [Message::user("turn 5"), Message::assistant("x ".repeat(300))].into_iter().enumerate() {
            longer.push(compaction::context::Entry::recorded(21 + k, msg));
        }
        let next = s.plan(&longer, &budget, Trigger::Proactive).unwrap();
        assert!(next.requests[0].span.contains(&1));
        assert_eq!(next.requests[0].prompt.var("instructions"), Some(v2::OPENING_UPDATE));
    }

    #[test]
    fn v2_retries_once_when_the_summary_misses_the_template() {
        let s = v2();
        let ctx = turns(5, 50);
        let budget = Budget::new(400);
        let mut asked = Vec::new();
        let step = compaction::compact(
            &s,
            &ctx,
            &budget,
            Trigger::Proactive,
            answering(&mut asked, "just prose", "## Work State\n- fixed"),
        )
        .unwrap();
        assert_eq!(asked, ["opencode_v2", "opencode_v2_retry"]);
        assert_eq!(step.plan.requests[0].prompt.var("instructions"), Some(v2::OPENING_NEW));
        assert_eq!(
            v2::checkpoint_parts(step.compacted.context.get(1).unwrap().message()).unwrap().0,
            "## Work State\n- fixed"
        );
        // A second miss fails the compaction: the history stays.
        let mut asked = Vec::new();
        let step =
            compaction::compact(&s, &ctx, &budget, Trigger::Proactive, answering(&mut asked, "prose", "more prose"))
                .unwrap();
        assert_eq!(asked.len(), 2);
        assert_eq!(step.compacted.context.len(), ctx.len());
        assert!(step.compacted.event.fallback.as_deref().unwrap().contains("template"));
        // A heading must be a line of its own.
        assert!(!v2::has_summary_section("see ## Objective inline"));
        assert!(v2::has_summary_section("  ## Next Move  \n1. go"));
    }

    #[test]
    fn v2_keeps_a_call_round_in_flight_after_the_checkpoint() {
        let s = v2();
        let mut m = turns(5, 50).to_messages();
        m.push(Message::user("turn 5"));
        m.push(Message::assistant_calls(
            "",
            vec![
                ToolCall { id: "a".into(), name: "read".into(), arguments: "{}".into() },
                ToolCall { id: "b".into(), name: "read".into(), arguments: "{}".into() },
            ],
        ));
        m.push(Message::tool_result("a", "read", "first"));
        let ctx = Context::from_messages(m);
        let plan = s.plan(&ctx, &Budget::new(400), Trigger::Proactive).unwrap();
        let out = s.apply(&ctx, &Budget::new(400), &plan, &[Ok("## Objective\n- x".into())]);
        let roles: Vec<Role> = out.context.messages().map(|m| m.role).collect();
        assert_eq!(roles, [Role::System, Role::User, Role::Assistant, Role::Tool]);
        let (_, recent) = v2::checkpoint_parts(out.context.get(1).unwrap().message()).unwrap();
        assert!(recent.starts_with("[User]: turn 4") && recent.ends_with("[User]: turn 5"), "{recent}");
        assert!(!recent.contains("first") && !recent.contains("tool call]: read({}), read"), "{recent}");
        assert!(compaction::check_context(&out.context).is_empty());
    }
}
