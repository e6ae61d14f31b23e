//! `recorded`: replays the compaction the recording itself contains. A reference row, not a
//! strategy an agent would choose.
//!
//! Claude Code sessions hold the compactions Claude Code made: at the cut, the user turn that
//! carries Claude Code's summary (imported with `meta.compact_summary = true`, and
//! `meta.compact_boundary = {trigger, pre_tokens}` from the boundary marker). This strategy
//! compacts exactly there and nowhere else: once the context holds a recorded summary with
//! anything before it (besides a leading system prompt), it drops everything before the
//! summary and keeps the summary and everything after it. The summary becomes a summary entry
//! ([`Origin::Summary`]) standing for the messages it replaced, so its retention is scored like
//! any strategy's summary, on the same probes and the same window.
//!
//! It has no threshold and does not react to overflow: a request over the window is an
//! overflow, as it would have been for the recorded agent with that window. On a recording
//! without a compaction it never compacts (it behaves as `none`).
//!
//! Recorded summaries are only seen by this strategy: a replay hides them from every other
//! strategy ([`Profile::sees_recorded_summaries`](compaction::Profile::sees_recorded_summaries)), which replays the history as if the
//! recording had not been compacted.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common::ParamError;
use compaction::context::{Context, Entry, Origin};
use compaction::tokens::{CharsOver4Role4, TokenCounter};
use compaction::{
    apply_layout, covered, Budget, Compacted, Plan, Profile, Promises, Slot, Strategy, SummaryOutcome, Trigger,
};

/// Every prompt this strategy asks for: none, it never summarizes.
pub fn prompts() -> Vec<compaction::Prompt> {
    Vec::new()
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Reference: replays the compaction recorded in the conversation (Claude Code's own cut and \
                           summary), so the recorded agent's retention is scored beside the strategies.";

/// `recorded` has no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {}

/// The `recorded` reference.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    estimator: CharsOver4Role4,
}

impl Recorded {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(_params: Params) -> Result<Recorded, ParamError> {
        Ok(Recorded::default())
    }
}

/// Where the history before a recorded summary starts (after a leading system prompt).
fn body_start(ctx: &Context) -> usize {
    usize::from(ctx.system_prompt().is_some())
}

/// The position of the last recorded summary with something before it to drop.
pub fn cut(ctx: &Context) -> Option<usize> {
    let start = body_start(ctx);
    ctx.entries()
        .iter()
        .rposition(|e| {
            matches!(e.origin(), Origin::Recorded { .. }) && e.message().meta_flag(compaction::message::COMPACT_SUMMARY)
        })
        .filter(|&i| i > start)
}

impl Strategy for Recorded {
    fn name(&self) -> &'static str {
        "recorded"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.estimator
    }
    fn threshold(&self, _ctx: &Context, _budget: &Budget) -> Option<u64> {
        None
    }
    fn should_compact(&self, ctx: &Context, _budget: &Budget) -> bool {
        cut(ctx).is_some()
    }
    fn reacts_to(&self, _trigger: Trigger) -> bool {
        false
    }
    fn profile(&self) -> Profile {
        Profile { sees_recorded_summaries: true, ..Profile::default() }
    }
    fn plan(&self, ctx: &Context, _budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let at = cut(ctx)?;
        let start = body_start(ctx);
        let layout: Vec<Slot> = (0..start).chain(at..ctx.len()).map(|index| Slot::Keep { index }).collect();
        let mut plan = Plan::deterministic(trigger, "recorded", layout);
        plan.notes.insert("cut".into(), json!(at));
        if let Some(b) = ctx.get(at).and_then(|e| e.message().meta.get("compact_boundary")) {
            plan.notes.insert("boundary".into(), b.clone());
        }
        Some(plan)
    }
    /// The layout keeps the summary verbatim; it is then re-marked as the summary it is,
    /// standing for the entries dropped before it.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        let mut out = apply_layout(self, ctx, budget, plan, summaries);
        let Some(at) = plan.notes.get("cut").and_then(|v| v.as_u64()).and_then(|v| usize::try_from(v).ok()) else {
            return out;
        };
        let start = body_start(ctx);
        let round = ctx.last_round() + 1;
        let covers = covered(ctx, &(start..at).collect::<Vec<_>>());
        let mut entries = out.context.entries().to_vec();
        if let Some(e) = entries.get_mut(start).filter(|e| e.message().meta_flag(compaction::message::COMPACT_SUMMARY))
        {
            let text = e.message().content.clone();
            *e = Entry::new(e.message().clone(), Origin::Summary { round, covers });
            out.event.summaries = vec![text];
            out.event.round = Some(round);
        }
        out.context = Context::from_entries(entries);
        out
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        let recent_window = match cut(ctx) {
            Some(at) => ctx.len() - at - 1,
            None => ctx.len(),
        };
        Promises { keeps_system_prompt: true, recent_window, documented_deviations: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction::message::{Message, ToolCall};
    use compaction::{check_compaction, check_context};

    fn summary(text: &str) -> Message {
        Message::user(text)
            .with_meta(compaction::message::COMPACT_SUMMARY, true.into())
            .with_meta("compact_boundary", json!({"trigger": "auto", "pre_tokens": 167117}))
    }

    fn session() -> Vec<Message> {
        vec![
            Message::system("You are a coding agent."),
            Message::user("Fix tests/test_math.py"),
            Message::assistant_calls(
                "",
                vec![ToolCall { id: "t1".into(), name: "Read".into(), arguments: "{}".into() }],
            ),
            Message::tool_result("t1", "Read", "def add(a, b): return a - b"),
            Message::assistant("add() subtracts."),
            summary("Summary: the user asked to fix tests/test_math.py; add() subtracts."),
            Message::assistant("Continuing: fixing add()."),
        ]
    }

    #[test]
    fn cuts_at_the_recorded_summary_and_marks_it_a_summary() {
        let s = Recorded::default();
        let budget = Budget::new(100);
        let ctx = Context::from_messages(session());
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("a plan");
        assert_eq!(plan.notes["cut"], json!(5));
        assert_eq!(plan.notes["boundary"]["pre_tokens"], json!(167117));
        let out = s.apply(&ctx, &budget, &plan, &[]);
        let origins: Vec<&Origin> = out.context.entries().iter().map(|e| e.origin()).collect();
        assert_eq!(
            origins,
            vec![
                &Origin::Recorded { index: 0 },
                &Origin::Summary { round: 1, covers: vec![1, 2, 3, 4] },
                &Origin::Recorded { index: 6 },
            ]
        );
        assert_eq!(out.event.removed, 4);
        assert_eq!(out.event.round, Some(1));
        assert!(out.event.summaries[0].starts_with("Summary: the user asked"));
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
        assert!(check_context(&out.context).is_empty());
        // Nothing left to cut: the summary now leads the history.
        assert!(!s.should_compact(&out.context, &budget));
    }

    #[test]
    fn a_second_recorded_compaction_integrates_the_first() {
        let s = Recorded::default();
        let budget = Budget::new(100);
        let mut messages = session();
        messages.push(Message::user("now the docs"));
        messages.push(Message::assistant("done"));
        messages.push(summary("Second summary."));
        let ctx = Context::from_messages(messages[..7].to_vec());
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("first cut");
        let mut ctx = s.apply(&ctx, &budget, &plan, &[]).context;
        for (i, m) in messages.iter().enumerate().skip(7) {
            ctx.push(Entry::recorded(i, m.clone()));
        }
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("second cut");
        let out = s.apply(&ctx, &budget, &plan, &[]);
        assert_eq!(out.context.len(), 2);
        assert_eq!(out.context.entries()[1].origin(), &Origin::Summary { round: 2, covers: vec![1, 2, 3, 4, 6, 7, 8] });
        assert!(check_context(&out.context).is_empty());
    }

    #[test]
    fn without_a_recorded_summary_it_never_compacts() {
        let s = Recorded::default();
        let budget = Budget::new(10);
        let mut messages = session();
        messages.remove(5);
        let ctx = Context::from_messages(messages);
        assert!(!s.should_compact(&ctx, &budget));
        assert!(s.plan(&ctx, &budget, Trigger::Overflow).is_none());
        assert!(!s.reacts_to(Trigger::Overflow));
        // A summary at the very start has nothing before it to drop.
        let ctx = Context::from_messages(vec![summary("s"), Message::assistant("a")]);
        assert!(!s.should_compact(&ctx, &budget));
        assert!(s.profile().sees_recorded_summaries);
    }

    #[test]
    fn is_a_reference_outside_the_eight() {
        use crate::{catalog, reference_catalog, StrategyConfig, NAMES, REFERENCE_NAMES};
        let config = StrategyConfig::default_for("recorded").expect("known");
        assert_eq!(config.name(), "recorded");
        assert_eq!(config.build().expect("builds").name(), "recorded");
        let parsed: StrategyConfig = serde_json::from_value(json!({"name": "recorded"})).expect("parses");
        assert_eq!(parsed, config);
        assert!(!NAMES.contains(&"recorded"));
        assert_eq!(REFERENCE_NAMES, ["recorded"]);
        assert!(catalog().iter().all(|s| s.name != "recorded"));
        assert_eq!(reference_catalog()[0].name, "recorded");
    }
}
