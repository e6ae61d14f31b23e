//! One conversation's compaction, kept: the context, the masking progress, the context's shape
//! and the proactive gate, behind one call that returns one [`Compaction`] whichever path ran.
//!
//! An agent (or the benchmark's replay) holds a [`Compactor`] per conversation: it
//! [`push`](Compactor::push)es each message as it goes, calls [`compact`](Compactor::compact)
//! before each model call (with [`Trigger::Proactive`], and with [`Trigger::Overflow`] after
//! a provider's context-length error), and sends [`context`](Compactor::context). Inside,
//! the step takes one of two paths:
//!
//! - **masks in place**, when the strategy answers [`Strategy::plan_masks`] with masks: the
//!   context is changed where it is ([`mask_in_place`]) and checked from the kept
//!   [`ContextShape`] ([`check_masks`]), at the cost of what changed;
//! - **a plan**, otherwise: the [`compact`](crate::compact) driver's plan, summaries and
//!   apply (a layout, with or without summaries), checked by [`check_compaction`].
//!
//! Both give the same context, event and violations (the masking tests compare them call by
//! call). The proactive gate is held here, once, before either path: a strategy's `plan` and
//! `plan_masks` are asked for [`Trigger::Proactive`] only when its
//! [`Strategy::should_compact`] says yes.
//!
//! A strategy that [rebuilds from history](crate::Profile::rebuilds_from_history) gets the
//! full history again on each request after a compaction changed its context
//! ([`Compactor::next_request`]); the history is read where it is, and copied into the
//! context only when no compaction replaces it.
//!
//! ```
//! use compaction::compactor::Path;
//! use compaction::{Budget, Compactor, Entry, Message, Summaries, Trigger};
//! use compaction_strategies::StrategyConfig;
//!
//! let strategy = StrategyConfig::default_for("observation-mask").unwrap().build().unwrap();
//! let mut compactor = Compactor::new(strategy.as_ref(), Budget::new(2_000));
//! compactor.push(Entry::recorded(0, Message::system("You are a coding agent.")));
//! let mut masked = 0;
//! for i in 0..30 {
//!     // Before each model call: the strategy compacts when its own threshold is crossed.
//!     let outcome = compactor.compact(Trigger::Proactive, |_ctx, requests| {
//!         // One summary per request, from the agent's own model (a masking strategy asks none).
//!         Summaries::of(requests.iter().map(|_| Ok(String::from("the user asked for ..."))).collect())
//!     });
//!     if let Some(step) = outcome.compaction {
//!         // Old tool outputs masked where they are, checked against the strategy's promises.
//!         assert!(matches!(step.path, Path::InPlace { .. }));
//!         assert!(step.violations.is_empty());
//!         masked += step.event.masked;
//!     }
//!     // ... the model call with `compactor.context()`, then its answer and the tool's output:
//!     let call = compaction::ToolCall { id: format!("c{i}"), name: "read".into(), arguments: "{}".into() };
//!     compactor.push(Entry::recorded(2 * i + 1, Message::assistant_calls("", vec![call])));
//!     compactor.push(Entry::recorded(2 * i + 2, Message::tool_result(format!("c{i}"), "read", "lorem ".repeat(80))));
//! }
//! assert!(masked > 0);
//! assert_eq!(compactor.context().len(), 61, "masking drops no message");
//! ```

use crate::context::{Context, Entry};
use crate::driver::{drive, fires, Step, Summaries};
use crate::invariants::{check_compaction, Violation};
use crate::masking::{check_masks, mask_in_place, ContextShape};
use crate::plan::{Budget, CompactionEvent, MaskAnswer, MaskPlan, Plan, SummaryRequest, Trigger};
use crate::strategy::Strategy;
use crate::tokens::TokenCounter;

/// Which path a compaction took.
#[derive(Debug, Clone)]
pub enum Path {
    /// The strategy's [`Plan`], summarized and applied by the [`compact`](crate::compact)
    /// driver: a new context built from its layout.
    Plan {
        /// The plan applied (the overflow plan after a re-plan).
        plan: Plan,
        /// The summarizer's context-length error made the driver re-plan on overflow.
        replanned: bool,
    },
    /// The strategy's [`MaskPlan`], done in place.
    InPlace {
        /// The masks applied.
        plan: MaskPlan,
        /// The entries the masks replaced, with their indices, as they were.
        replaced: Vec<(usize, Entry)>,
    },
}

/// One compaction done by a [`Compactor`].
#[derive(Debug, Clone)]
pub struct Compaction {
    /// The trigger the compaction was finally made for.
    pub trigger: Trigger,
    /// The path it took.
    pub path: Path,
    /// What it did.
    pub event: CompactionEvent,
    /// What [`check_compaction`] finds in it (the same on both paths).
    pub violations: Vec<Violation>,
    /// It compacted the full history ([`Compactor::history`]) rather than the context the
    /// previous request left.
    pub from_history: bool,
}

/// What one [`Compactor::compact`] did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The compaction, when the gate opened and the strategy had something to do.
    pub compaction: Option<Compaction>,
    /// The context the compactor held before it replaced it whole (by a plan's new context, or
    /// by the full history a rebuilding strategy starts a request from); `None` when the
    /// context was kept (appended to, or masked in place).
    pub replaced: Option<Context>,
}

/// One conversation's compaction state: the context, the full history for a strategy that
/// rebuilds from it, how far the strategy's masking has settled, and the context's shape.
pub struct Compactor<'s> {
    strategy: &'s dyn Strategy,
    budget: Budget,
    /// The caller's meters; the strategy's estimator is always metered besides.
    meters: Vec<&'s dyn TokenCounter>,
    ctx: Context,
    /// The full history, for a strategy that rebuilds every request from it.
    history: Option<Context>,
    /// A compaction changed the context since the history was last the request.
    diverged: bool,
    /// The next compaction starts from `history`, not yet copied into `ctx`.
    from_history: bool,
    /// The order and alternation facts of `ctx`, for the check of a masking in place.
    shape: ContextShape,
    /// What the strategy's last in-place answer settled ([`MaskPlan::settled`]); 0 after a
    /// context was replaced.
    settled: usize,
}

impl std::fmt::Debug for Compactor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("strategy", &self.strategy.name())
            .field("budget", &self.budget)
            .field("entries", &self.ctx.len())
            .field("from_history", &self.from_history)
            .field("settled", &self.settled)
            .finish()
    }
}

impl<'s> Compactor<'s> {
    /// An empty conversation compacted by `strategy` at `budget`.
    pub fn new(strategy: &'s dyn Strategy, budget: Budget) -> Compactor<'s> {
        let history = strategy.profile().rebuilds_from_history.then(Context::new);
        Compactor {
            strategy,
            budget,
            meters: Vec::new(),
            ctx: Context::new(),
            history,
            diverged: false,
            from_history: false,
            shape: ContextShape::new(),
            settled: 0,
        }
    }

    /// With `meter` kept up to date as well as the strategy's estimator: every entry pushed,
    /// masked or built is metered with it once, so the context's running total under it stays
    /// known ([`Context::tokens`] is O(1)).
    pub fn with_meter(mut self, meter: &'s dyn TokenCounter) -> Compactor<'s> {
        self.meters.push(meter);
        self
    }

    /// The strategy.
    pub fn strategy(&self) -> &'s dyn Strategy {
        self.strategy
    }

    /// The budget.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// The context the next request sends.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The full history, for a strategy that rebuilds from it.
    pub fn history(&self) -> Option<&Context> {
        self.history.as_ref()
    }

    /// The context the next compaction reads: the full history after
    /// [`Compactor::next_request`] started a request from it, else [`Compactor::context`].
    pub fn source(&self) -> &Context {
        match (&self.history, self.from_history) {
            (Some(history), true) => history,
            _ => &self.ctx,
        }
    }

    /// Append `entry` to the conversation (and to the history, when it is kept), metered.
    pub fn push(&mut self, entry: Entry) {
        let mut meters = self.meters.clone();
        meters.push(self.strategy.estimator());
        if let Some(history) = &mut self.history {
            history.push_metered(entry.clone(), &meters);
        }
        self.ctx.push_metered(entry, &meters);
    }

    /// A new request starts: a strategy that rebuilds from history starts it from the full
    /// history when a compaction changed the context since it last did.
    pub fn next_request(&mut self) {
        if self.history.is_none() || !self.diverged {
            return;
        }
        self.from_history = true;
        self.diverged = false;
    }

    /// Compact for `trigger` (for [`Trigger::Proactive`], only when the strategy's
    /// [`Strategy::should_compact`] says so): masks in place when the strategy has them, else
    /// its plan, summarized with `summarize` (as [`compact`](crate::compact) calls it).
    pub fn compact<F>(&mut self, trigger: Trigger, summarize: F) -> Outcome
    where
        F: FnMut(&Context, &[SummaryRequest]) -> Summaries,
    {
        let strategy = self.strategy;
        // The proactive gate, before either path.
        if !fires(strategy, self.source(), &self.budget, trigger) {
            let replaced = self.materialize();
            return Outcome { compaction: None, replaced };
        }
        // After a rebuild nothing is settled: the history was never masked.
        let settled = if self.from_history { 0 } else { self.settled };
        match strategy.plan_masks(self.source(), &self.budget, trigger, settled) {
            MaskAnswer::Unsupported => self.compact_plan(trigger, summarize),
            MaskAnswer::Nothing { settled } => {
                let replaced = self.materialize();
                self.settled = settled;
                Outcome { compaction: None, replaced }
            }
            MaskAnswer::Masks(plan) => {
                let from_history = self.from_history;
                let replaced = self.materialize();
                Outcome { compaction: Some(self.mask(plan, from_history)), replaced }
            }
        }
    }

    /// The context, given up.
    pub fn into_context(self) -> Context {
        self.ctx
    }

    /// The plan path: the driver's plan, summaries and apply on the source.
    fn compact_plan<F>(&mut self, trigger: Trigger, summarize: F) -> Outcome
    where
        F: FnMut(&Context, &[SummaryRequest]) -> Summaries,
    {
        let strategy = self.strategy;
        let from_history = self.from_history;
        let source = self.source();
        let Some(Step { plan, trigger, replanned, compacted }) =
            drive(strategy, source, &self.budget, trigger, summarize)
        else {
            let replaced = self.materialize();
            return Outcome { compaction: None, replaced };
        };
        let violations = check_compaction(strategy, source, &self.budget, trigger, &compacted);
        self.diverged |= !compacted.event.is_noop();
        let replaced = std::mem::replace(&mut self.ctx, compacted.context);
        self.from_history = false;
        self.forget();
        // Keep the running totals known, so that later appends stay O(1).
        for meter in &self.meters {
            self.ctx.units(*meter);
        }
        self.ctx.units(strategy.estimator());
        let path = Path::Plan { plan, replanned };
        let compaction = Compaction { trigger, path, event: compacted.event, violations, from_history };
        Outcome { compaction: Some(compaction), replaced: Some(replaced) }
    }

    /// The in-place path: `plan`'s masks on the context, checked from its shape.
    fn mask(&mut self, plan: MaskPlan, from_history: bool) -> Compaction {
        let strategy = self.strategy;
        let masked = mask_in_place(strategy, &mut self.ctx, &self.budget, &plan, &self.meters);
        self.shape.follow(&self.ctx);
        let violations = check_masks(strategy, &self.ctx, &self.budget, &plan, &masked, &self.shape);
        self.diverged |= !masked.event.is_noop();
        self.settled = plan.settled;
        let trigger = plan.trigger;
        Compaction {
            trigger,
            path: Path::InPlace { plan, replaced: masked.replaced },
            event: masked.event,
            violations,
            from_history,
        }
    }

    /// A request started from the history turns out to be the whole history: copy it into the
    /// context. Returns the context it replaces.
    fn materialize(&mut self) -> Option<Context> {
        if !self.from_history {
            return None;
        }
        self.from_history = false;
        let history = self.history.as_ref()?;
        let carried = std::mem::replace(&mut self.ctx, history.clone());
        self.forget();
        Some(carried)
    }

    /// The context was replaced: its shape and the masking progress start again.
    fn forget(&mut self) {
        self.shape = ContextShape::new();
        self.settled = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::message::Message;
    use crate::plan::{Promises, Slot};
    use crate::strategy::Profile;
    use crate::tokens::CharsOver4;

    /// Drops the oldest entry on every plan; counts what it is asked.
    struct DropOldest {
        threshold: Option<u64>,
        rebuilds: bool,
        plans: AtomicUsize,
        mask_plans: AtomicUsize,
    }

    impl DropOldest {
        fn new(threshold: Option<u64>, rebuilds: bool) -> DropOldest {
            DropOldest { threshold, rebuilds, plans: AtomicUsize::new(0), mask_plans: AtomicUsize::new(0) }
        }
    }

    impl Strategy for DropOldest {
        fn name(&self) -> &'static str {
            "drop-oldest"
        }
        fn profile(&self) -> Profile {
            Profile { rebuilds_from_history: self.rebuilds, ..Profile::default() }
        }
        fn estimator(&self) -> &dyn TokenCounter {
            &CharsOver4
        }
        fn threshold(&self, _ctx: &Context, _budget: &Budget) -> Option<u64> {
            self.threshold
        }
        fn plan(&self, ctx: &Context, _budget: &Budget, trigger: Trigger) -> Option<Plan> {
            self.plans.fetch_add(1, Ordering::Relaxed);
            (ctx.len() > 1).then(|| {
                Plan::deterministic(trigger, "drop", (1..ctx.len()).map(|index| Slot::Keep { index }).collect())
            })
        }
        fn plan_masks(&self, _ctx: &Context, _budget: &Budget, _trigger: Trigger, _settled: usize) -> MaskAnswer {
            self.mask_plans.fetch_add(1, Ordering::Relaxed);
            MaskAnswer::Unsupported
        }
        fn promises(&self, _ctx: &Context, _budget: &Budget) -> Promises {
            Promises::default()
        }
    }

    fn none(_: &Context, requests: &[SummaryRequest]) -> Summaries {
        Summaries::of(requests.iter().map(|_| Ok(String::from("summary"))).collect())
    }

    fn texts(ctx: &Context) -> Vec<String> {
        ctx.entries().iter().map(|e| e.message().content.clone()).collect()
    }

    #[test]
    fn a_closed_gate_asks_neither_path() {
        let s = DropOldest::new(Some(1_000_000), false);
        let mut c = Compactor::new(&s, Budget::new(10));
        for i in 0..3 {
            c.push(Entry::recorded(i, Message::user(format!("m{i}"))));
        }
        let out = c.compact(Trigger::Proactive, none);
        assert!(out.compaction.is_none() && out.replaced.is_none());
        assert_eq!((s.mask_plans.load(Ordering::Relaxed), s.plans.load(Ordering::Relaxed)), (0, 0));
        // A forced compaction is not gated: both paths are asked, the plan's runs.
        let out = c.compact(Trigger::Overflow, none);
        assert_eq!((s.mask_plans.load(Ordering::Relaxed), s.plans.load(Ordering::Relaxed)), (1, 1));
        let step = out.compaction.expect("a plan");
        assert!(matches!(step.path, Path::Plan { replanned: false, .. }));
        assert_eq!((step.event.messages_before, step.event.messages_after, step.event.removed), (3, 2, 1));
        assert_eq!(out.replaced.map(|r| r.len()), Some(3), "the context it replaced");
        assert_eq!(texts(c.context()), ["m1", "m2"]);
        // An open gate (no threshold: never) is the same as a closed one for `Proactive`.
        let never = DropOldest::new(None, false);
        let mut c = Compactor::new(&never, Budget::new(10));
        c.push(Entry::recorded(0, Message::user("a")));
        c.push(Entry::recorded(1, Message::user("b")));
        assert!(c.compact(Trigger::Proactive, none).compaction.is_none());
        assert_eq!(never.plans.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_rebuilding_strategy_starts_each_request_from_the_history() {
        let s = DropOldest::new(Some(1_000_000), true);
        let mut c = Compactor::new(&s, Budget::new(10));
        for i in 0..3 {
            c.push(Entry::recorded(i, Message::user(format!("m{i}"))));
        }
        let step = c.compact(Trigger::Overflow, none).compaction.expect("a plan");
        assert!(!step.from_history, "nothing compacted yet: the context is the history");
        assert_eq!(texts(c.context()), ["m1", "m2"]);
        c.push(Entry::recorded(3, Message::user("m3")));
        assert_eq!(c.history().map(Context::len), Some(4));
        // The next request starts from the history: a forced compaction reads all of it.
        c.next_request();
        assert_eq!(c.source().len(), 4);
        let out = c.compact(Trigger::Overflow, none);
        let step = out.compaction.expect("a plan");
        assert!(step.from_history);
        assert_eq!(texts(c.context()), ["m1", "m2", "m3"]);
        assert_eq!(out.replaced.map(|r| texts(&r)), Some(vec!["m1".into(), "m2".into(), "m3".into()]));
        // When no compaction runs, the request is the whole history, copied in.
        c.next_request();
        let out = c.compact(Trigger::Proactive, none);
        assert!(out.compaction.is_none());
        assert_eq!(out.replaced.map(|r| r.len()), Some(3), "the context the previous request left");
        assert_eq!(texts(c.context()), ["m0", "m1", "m2", "m3"]);
        // Nothing changed since: the next request goes on from the context.
        c.next_request();
        assert_eq!(c.source().len(), 4);
        assert!(c.compact(Trigger::Proactive, none).replaced.is_none());
    }
}
