//! `truncate`: drop the oldest messages until the context fits. The baseline every agent
//! framework ships (LangChain's `trim_messages(strategy="last", include_system=True,
//! start_on="human")`).
//!
//! - **Budget**: `max_tokens` when set, else `floor(target_ratio x context window)`. The
//!   strategy compacts when its estimate is above the budget and cuts until it is at or below.
//! - **Meter**: exact `o200k_base` by default (`cl100k_base`, or the approximate `chars/4`:
//!   4 + `ceil(chars / 4)` per message, as [`compaction::tokens::CharsOver4Role4`]).
//! - **Cut**: the system prompt stays; after it, whole groups are dropped oldest first. A group
//!   is one message, or an assistant message with tool calls together with the tool results
//!   that follow it, so a call is never separated from its result and the kept history never
//!   starts with a tool result. The last group always stays (a shortfall is reported when it
//!   alone is over budget).
//! - **`start_on_user`**: the kept history then moves forward to its first user message, as
//!   `start_on="human"` does. When no user message is left (an agent run under one request),
//!   LangChain returns an empty list; here the group cut is kept instead, so the history may
//!   start with an assistant message ([`ViolationKind::RoleAlternation`] is then a documented
//!   deviation).
//! - **Forced** ([`Trigger::Overflow`]): the provider rejected a request the meter thought fit,
//!   so at least one group is dropped even when the estimate is within budget.
//!
//! One step costs O(dropped + kept): message sizes come from the [`Context`]'s per-entry cache
//! and running totals, and the cut walks forward from the oldest group subtracting sizes, never
//! re-summing the suffix.
//!
//! **What a provider refuses.** With `start_on_user = false`, or when the kept tail holds no
//! user message (the fallback keeps the cut where it is), the kept history may begin with an
//! assistant message, which the Anthropic Messages API refuses (`first_not_user`); OpenAI
//! accepts it. Declared in `documented_rejections`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Counter, Meter, ParamError};
use compaction::context::Context;
use compaction::message::Role;
use compaction::request::{Provider, RequestRule};
use compaction::tokens::TokenCounter;
use compaction::ViolationKind;
use compaction::{Budget, Plan, Profile, Promises, Slot, Strategy, Trigger};

/// Every prompt this strategy asks for: none, it never summarizes.
pub fn prompts() -> Vec<compaction::Prompt> {
    Vec::new()
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Baseline: once the estimate (exact o200k_base by default) is above 80% of the window or \
     max_tokens, drops the oldest messages after the system prompt, whole tool-call groups at a time, until it fits; \
     the kept history starts at a user message (LangChain's trim_messages).";

/// Parameters of `truncate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Fraction of the context window to get under: truncation starts when the estimate is
    /// above it and drops messages until the estimate is at or below it.
    pub target_ratio: f64,
    /// Absolute token budget that overrides `target_ratio` (LangChain's `max_tokens`).
    pub max_tokens: Option<u64>,
    /// Token meter: `o200k_base` or `cl100k_base` (exact), or `chars/4` (approximate).
    pub counter: Counter,
    /// Start the kept history at a user message, like LangChain's `start_on="human"`.
    pub start_on_user: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params { target_ratio: 0.8, max_tokens: None, counter: Counter::O200kBase, start_on_user: true }
    }
}

/// The `truncate` strategy.
#[derive(Debug, Clone)]
pub struct Truncate {
    meter: Meter,
    params: Params,
}

/// Where a truncation cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cut {
    /// First kept entry after the system prompt.
    at: usize,
    /// No user message was left to start on, so the group cut was kept.
    fell_back: bool,
}

impl Truncate {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<Truncate, ParamError> {
        if !(params.target_ratio.is_finite() && params.target_ratio > 0.0 && params.target_ratio <= 1.0) {
            return Err(ParamError::new("truncate", "target_ratio", "must be in (0, 1]"));
        }
        if params.max_tokens == Some(0) {
            return Err(ParamError::new("truncate", "max_tokens", "must be at least 1"));
        }
        Ok(Truncate { meter: Meter::new(params.counter), params })
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The token budget for `budget`'s window.
    pub fn target(&self, budget: &Budget) -> u64 {
        self.params
            .max_tokens
            .unwrap_or_else(|| (budget.context_window as f64 * self.params.target_ratio).floor() as u64)
    }

    /// Start of the last group: the last entry that is not a tool result, or `body`.
    fn last_group_start(ctx: &Context, body: usize) -> usize {
        let e = ctx.entries();
        (body..e.len()).rev().find(|&i| e[i].role() != Role::Tool).unwrap_or(body)
    }

    /// The cut for `ctx`: the smallest whole-group cut within `target` (at least one group when
    /// `forced`), moved to the next user message when asked to.
    fn cut(&self, ctx: &Context, target: u64, forced: bool) -> Cut {
        let c = self.meter.counter();
        let e = ctx.entries();
        let n = e.len();
        let body = usize::from(ctx.system_prompt().is_some());
        let last = Self::last_group_start(ctx, body);
        let mut remaining = ctx.units(c);
        let mut at = body;
        while at < last && (c.tokens_from_units(remaining) > target || (forced && at == body)) {
            remaining -= e[at].units(c);
            at += 1;
            while at < n && e[at].role() == Role::Tool {
                remaining -= e[at].units(c);
                at += 1;
            }
        }
        if !self.params.start_on_user || at == body {
            return Cut { at, fell_back: false };
        }
        match (at..n).find(|&i| e[i].role() == Role::User) {
            Some(u) => Cut { at: u, fell_back: false },
            None => Cut { at, fell_back: true },
        }
    }
}

impl Strategy for Truncate {
    fn profile(&self) -> Profile {
        Profile {
            documented_rejections: vec![(Provider::AnthropicMessages, RequestRule::FirstNotUser)],
            ..Profile::default()
        }
    }
    fn name(&self) -> &'static str {
        "truncate"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        self.meter.counter()
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        Some(self.target(budget))
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let target = self.target(budget);
        let forced = trigger != Trigger::Proactive;
        if !forced && self.estimate(ctx) <= target {
            return None;
        }
        let body = usize::from(ctx.system_prompt().is_some());
        let cut = self.cut(ctx, target, forced);
        if cut.at == body {
            return None;
        }
        let mut layout = Vec::with_capacity(body + ctx.len() - cut.at);
        if body == 1 {
            layout.push(Slot::Keep { index: 0 });
        }
        layout.extend((cut.at..ctx.len()).map(|index| Slot::Keep { index }));
        let mut plan = Plan::deterministic(trigger, "truncate", layout);
        plan.notes.insert("cut".into(), cut.at.into());
        plan.notes.insert("dropped".into(), (cut.at - body).into());
        if cut.fell_back {
            plan.notes.insert("no_user_to_start_on".into(), true.into());
        }
        Some(plan)
    }
    fn promises(&self, ctx: &Context, budget: &Budget) -> Promises {
        let body = usize::from(ctx.system_prompt().is_some());
        let target = self.target(budget);
        let mut documented_deviations = Vec::new();
        let may_start_off_user = !self.params.start_on_user
            || self.cut(ctx, target, false).fell_back
            || self.cut(ctx, target, true).fell_back;
        if may_start_off_user {
            documented_deviations.push(ViolationKind::RoleAlternation);
        }
        Promises {
            keeps_system_prompt: true,
            recent_window: ctx.len() - Self::last_group_start(ctx, body),
            documented_deviations,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::StrategyConfig;
    use compaction::context::Entry;
    use compaction::message::{Message, ToolCall};
    use compaction::{check_compaction, check_context};

    fn approx(f: impl FnOnce(&mut Params)) -> Truncate {
        let mut p = Params { counter: Counter::CharsOver4, ..Params::default() };
        f(&mut p);
        Truncate::new(p).unwrap()
    }

    /// `k` chars/4 tokens of user text (plus 4 of overhead).
    fn user(k: usize) -> Message {
        Message::user("u".repeat(4 * k))
    }

    fn call(id: &str) -> Message {
        Message::assistant_calls("", vec![ToolCall { id: id.into(), name: "ls".into(), arguments: String::new() }])
    }

    fn result(id: &str, k: usize) -> Message {
        // chars/4 counts a text output as a JSON string: 2 quotes.
        Message::tool_result(id, "ls", "r".repeat(4 * k - 2))
    }

    fn shape(ctx: &Context) -> Vec<String> {
        ctx.entries()
            .iter()
            .map(|e| format!("{}{}", e.role(), e.origin().verbatim_index().map_or(String::new(), |i| i.to_string())))
            .collect()
    }

    #[test]
    fn drops_oldest_until_within_budget_and_keeps_the_system_prompt() {
        let s = approx(|p| p.max_tokens = Some(300));
        // Every message costs 4 + 96 = 100.
        let mut m = vec![Message::system("s".repeat(4 * 96))];
        for _ in 0..3 {
            m.push(user(96));
            m.push(Message::assistant("a".repeat(4 * 96)));
        }
        let ctx = Context::from_messages(m);
        assert_eq!(s.estimate(&ctx), 700);
        assert!(s.should_compact(&ctx, &Budget::new(1_000_000)));
        let plan = s.plan(&ctx, &Budget::new(1_000_000), Trigger::Proactive).unwrap();
        let out = s.apply(&ctx, &Budget::new(1_000_000), &plan, &[]);
        // 700 -> drop u1 (600), a2 (500), u3 (400), a4 (300): fits, and starts on user u5.
        assert_eq!(shape(&out.context), ["system0", "user5", "assistant6"]);
        assert_eq!(out.event.estimate_after, 300);
        assert_eq!(out.event.removed, 4);
        assert_eq!(out.event.shortfall, None);
        assert!(check_compaction(&s, &ctx, &Budget::new(1_000_000), Trigger::Proactive, &out).is_empty());
    }

    #[test]
    fn start_on_user_moves_past_an_assistant_cut() {
        let budget = Budget::new(1_000_000);
        let mut m = vec![Message::system("s")];
        for _ in 0..3 {
            m.push(user(96));
            m.push(Message::assistant("a".repeat(4 * 96)));
        }
        let ctx = Context::from_messages(m);
        // 605 tokens: system 5, then 100 per message.
        let on_user = approx(|p| p.max_tokens = Some(510));
        let plan = on_user.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        // dropping u1 leaves 505 <= 510, but the history would start at a2: move on to u3.
        assert_eq!(plan.notes["cut"], 3);
        let free = approx(|p| {
            p.max_tokens = Some(510);
            p.start_on_user = false;
        });
        let plan = free.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.notes["cut"], 2);
        assert!(free.promises(&ctx, &budget).documented_deviations.contains(&ViolationKind::RoleAlternation));
        assert!(on_user.promises(&ctx, &budget).documented_deviations.is_empty());
    }

    #[test]
    fn never_splits_a_call_from_its_results() {
        let s = approx(|p| {
            p.max_tokens = Some(400);
            p.start_on_user = false;
        });
        let budget = Budget::new(1_000_000);
        let ctx = Context::from_messages(vec![
            Message::system("s"),
            user(96),
            Message::assistant_calls(
                "",
                vec![
                    ToolCall { id: "a".into(), name: "ls".into(), arguments: String::new() },
                    ToolCall { id: "b".into(), name: "ls".into(), arguments: String::new() },
                ],
            ),
            result("a", 96),
            result("b", 96),
            call("c"),
            result("c", 96),
            user(96),
        ]);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = s.apply(&ctx, &budget, &plan, &[]);
        // The two-result group goes whole; the cut lands on the next call, not on a result.
        assert_eq!(shape(&out.context), ["system0", "assistant5", "tool6", "user7"]);
        assert!(check_context(&out.context).is_empty());
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out)
            .iter()
            .all(|v| v.kind() == ViolationKind::RoleAlternation));
    }

    #[test]
    fn leading_orphan_results_are_dropped_with_the_first_group() {
        let s = approx(|p| p.max_tokens = Some(150));
        let budget = Budget::new(1_000_000);
        let ctx = Context::from_messages(vec![
            Message::system("s"),
            result("x", 96),
            result("y", 96),
            user(10),
            Message::assistant("ok"),
        ]);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.notes["cut"], 3);
    }

    #[test]
    fn the_last_group_stays_and_the_shortfall_is_reported() {
        let s = approx(|p| p.max_tokens = Some(100));
        let budget = Budget::new(1_000_000);
        let ctx = Context::from_messages(vec![
            Message::system("s"),
            user(500),
            Message::assistant("ok"),
            user(500),
            call("c"),
            result("c", 500),
        ]);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = s.apply(&ctx, &budget, &plan, &[]);
        // The last group is the call and its result; no user message is left to start on.
        assert_eq!(shape(&out.context), ["system0", "assistant4", "tool5"]);
        assert_eq!(out.event.shortfall, Some(5 + 5 + 504 - 100));
        let documented = s.promises(&ctx, &budget).documented_deviations;
        assert_eq!(documented, [ViolationKind::RoleAlternation]);
        let violations = check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out);
        assert!(violations.iter().all(|v| documented.contains(&v.kind())), "{violations:?}");
        // Nothing left to drop: no plan.
        assert!(s.plan(&out.context, &budget, Trigger::Proactive).is_none());
    }

    #[test]
    fn with_no_user_left_it_keeps_the_group_cut() {
        let s = approx(|p| p.max_tokens = Some(250));
        let budget = Budget::new(1_000_000);
        let mut m = vec![Message::system("s"), user(10)];
        for i in 0..5 {
            m.push(call(&format!("c{i}")));
            m.push(result(&format!("c{i}"), 96));
        }
        let ctx = Context::from_messages(m);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.notes["no_user_to_start_on"], true);
        let out = s.apply(&ctx, &budget, &plan, &[]);
        assert!(out.event.estimate_after <= 250);
        assert!(check_context(&out.context).is_empty());
        let documented = s.promises(&ctx, &budget).documented_deviations;
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out)
            .iter()
            .all(|v| documented.contains(&v.kind())));
    }

    #[test]
    fn target_ratio_and_trigger() {
        let s = Truncate::new(Params::default()).unwrap();
        assert_eq!(s.threshold(&Context::new(), &Budget::new(10_000)), Some(8_000));
        let s = Truncate::new(Params { max_tokens: Some(32_000), ..Params::default() }).unwrap();
        assert_eq!(s.threshold(&Context::new(), &Budget::new(10_000)), Some(32_000));
        let s = approx(|p| p.max_tokens = Some(100));
        let ctx = Context::from_messages(vec![Message::system("s"), user(40), Message::assistant("a".repeat(4 * 46))]);
        assert_eq!(s.estimate(&ctx), 5 + 44 + 50);
        assert!(!s.should_compact(&ctx, &Budget::new(1)));
        assert!(s.plan(&ctx, &Budget::new(1), Trigger::Proactive).is_none());
        // Forced: at least one group goes even within budget.
        let plan = s.plan(&ctx, &Budget::new(1), Trigger::Overflow).unwrap();
        assert_eq!(plan.notes["dropped"], 1);
    }

    #[test]
    fn exact_counters_count_with_their_vocabulary() {
        let ctx = Context::from_messages(vec![Message::user("hello world")]);
        for (counter, name) in [
            (Counter::O200kBase, "o200k_base"),
            (Counter::Cl100kBase, "cl100k_base"),
            (Counter::CharsOver4, "ceil(chars/4)+4"),
        ] {
            let s = Truncate::new(Params { counter, ..Params::default() }).unwrap();
            assert_eq!(s.estimator().name(), name);
        }
        let s = Truncate::new(Params::default()).unwrap();
        // "hello world" is 2 o200k tokens, plus 3 of chat-template overhead.
        assert_eq!(s.estimate(&ctx), 5);
        let p: Params = serde_json::from_str(r#"{"counter":"chars/4","max_tokens":32000}"#).unwrap();
        assert_eq!(p.counter, Counter::CharsOver4);
        assert!(serde_json::from_str::<Params>(r#"{"counter":"p50k"}"#).is_err());
        assert!(serde_json::from_str::<Params>(r#"{"ratio":0.5}"#).is_err());
        assert_eq!(Truncate::new(Params { target_ratio: 0.0, ..Params::default() }).unwrap_err().param, "target_ratio");
        assert_eq!(Truncate::new(Params { max_tokens: Some(0), ..Params::default() }).unwrap_err().param, "max_tokens");
        let cfg: StrategyConfig = serde_json::from_str(r#"{"name":"truncate","counter":"cl100k_base"}"#).unwrap();
        assert_eq!(cfg.build().unwrap().estimator().name(), "cl100k_base");
    }

    #[test]
    fn agent_loop_retrims_before_every_call_with_growing_history() {
        // The shape of the peer comparison: re-trim before every model call.
        let s = approx(|p| p.max_tokens = Some(2_000));
        let budget = Budget::new(1_000_000);
        let mut ctx = Context::from_messages(vec![Message::system("You are helpful.")]);
        let mut index = 1;
        for turn in 0..200 {
            let msgs = if turn % 3 == 0 {
                vec![user(50)]
            } else {
                let id = format!("c{turn}");
                vec![call(&id), result(&id, 60)]
            };
            for m in msgs {
                ctx.push_metered(Entry::recorded(index, m), &[s.estimator()]);
                index += 1;
            }
            if s.should_compact(&ctx, &budget) {
                let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
                let out = s.apply(&ctx, &budget, &plan, &[]);
                assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
                ctx = out.context;
                assert!(s.estimate(&ctx) <= 2_000);
                assert_eq!(ctx.get(1).unwrap().role(), Role::User);
            }
        }
        assert!(ctx.len() < 100);
    }
}
