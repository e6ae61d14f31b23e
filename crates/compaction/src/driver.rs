//! The compaction step, written once: plan, summarize, apply, and re-plan on a context-length
//! error. The [`Compactor`](crate::Compactor) runs it when a strategy has no masks to do in
//! place (the replay compacts through the `Compactor`), and so can any agent that embeds this
//! crate and keeps its own context.
//!
//! A strategy never calls a model: [`compact`] asks the strategy for a [`Plan`], hands the plan
//! to the caller's summarizer (a closure: an HTTP client, a cache, a test double), and applies
//! the summaries it returns. When the summarizer reports that its own request was too long for
//! the model ([`Summaries::too_long`]) and the step was not already reactive, the strategy is
//! asked once more with [`Trigger::Overflow`] (a strategy that does not react to overflow keeps
//! its first plan), and the summaries of that plan are applied instead.
//!
//! An agent loop calls it in two places:
//!
//! ```
//! use compaction::{compact, Budget, Context, Message, Summaries, Trigger};
//! use compaction_strategies::StrategyConfig;
//!
//! let mut messages = vec![Message::system("You are a coding agent.")];
//! for i in 0..40 {
//!     messages.push(Message::user(format!("step {i}: {}", "lorem ipsum ".repeat(200))));
//!     messages.push(Message::assistant("done"));
//! }
//! let mut ctx = Context::from_messages(messages);
//! let strategy = StrategyConfig::default_for("codex").unwrap().build().unwrap();
//! let budget = Budget::new(8_000);
//! // Before each model call: compact when the strategy's own threshold is crossed. (After a
//! // provider's context-length error, the same call with `Trigger::Overflow`.)
//! assert!(strategy.should_compact(&ctx, &budget));
//! if strategy.should_compact(&ctx, &budget) {
//!     let step = compact(strategy.as_ref(), &ctx, &budget, Trigger::Proactive, |_ctx, requests| {
//!         // One summary per request, from the agent's own model.
//!         Summaries::of(requests.iter().map(|_| Ok(String::from("the user asked for ..."))).collect())
//!     });
//!     if let Some(step) = step {
//!         assert!(step.compacted.context.len() < ctx.len());
//!         ctx = step.compacted.context;
//!     }
//! }
//! ```

use crate::context::Context;
use crate::plan::{Budget, Compacted, Plan, SummaryFailure, SummaryOutcome, SummaryRequest, Trigger};
use crate::strategy::Strategy;

/// What the caller's summarizer returned for one plan.
#[derive(Debug, Clone, Default)]
pub struct Summaries {
    /// One outcome per [`Plan::requests`] entry, in order.
    pub outcomes: Vec<SummaryOutcome>,
    /// The summarizer's own request was too long for its model (a context-length error, not
    /// an outage): the driver re-plans once with [`Trigger::Overflow`].
    pub too_long: bool,
}

impl Summaries {
    /// Outcomes with no context-length error.
    pub fn of(outcomes: Vec<SummaryOutcome>) -> Summaries {
        Summaries { outcomes, too_long: false }
    }
}

/// One compaction step, done.
#[derive(Debug, Clone)]
pub struct Step {
    /// The plan that was applied (the overflow plan after a re-plan).
    pub plan: Plan,
    /// The trigger the applied plan was made for.
    pub trigger: Trigger,
    /// True when the summarizer's context-length error made the driver re-plan on overflow.
    pub replanned: bool,
    /// The new context and what the compaction did.
    pub compacted: Compacted,
}

/// Plan, summarize and apply one compaction of `ctx` for `trigger`; `None` when the strategy
/// has nothing to do, or when `trigger` is [`Trigger::Proactive`] and the strategy's
/// [`Strategy::should_compact`] says no (the proactive gate is here, not in each `plan`).
/// `summarize` receives the context and summary requests and returns one outcome per request:
/// the plan's requests (a plan with none still calls it, with an empty slice), and, for a
/// strategy that asks while it decides ([`Strategy::plan_with`]), each of those one at a time.
pub fn compact<S, F>(strategy: &S, ctx: &Context, budget: &Budget, trigger: Trigger, summarize: F) -> Option<Step>
where
    S: Strategy + ?Sized,
    F: FnMut(&Context, &[SummaryRequest]) -> Summaries,
{
    if !fires(strategy, ctx, budget, trigger) {
        return None;
    }
    drive(strategy, ctx, budget, trigger, summarize)
}

/// The proactive gate, written once for every strategy and both paths (this driver and the
/// [`Compactor`](crate::Compactor)'s masks in place): a strategy is asked to plan for
/// [`Trigger::Proactive`] only when [`Strategy::should_compact`] says yes; every other trigger
/// always fires.
pub(crate) fn fires<S: Strategy + ?Sized>(strategy: &S, ctx: &Context, budget: &Budget, trigger: Trigger) -> bool {
    trigger != Trigger::Proactive || strategy.should_compact(ctx, budget)
}

/// [`compact`] past the proactive gate: the caller (the [`Compactor`](crate::Compactor))
/// held it.
pub(crate) fn drive<S, F>(
    strategy: &S,
    ctx: &Context,
    budget: &Budget,
    trigger: Trigger,
    mut summarize: F,
) -> Option<Step>
where
    S: Strategy + ?Sized,
    F: FnMut(&Context, &[SummaryRequest]) -> Summaries,
{
    let mut plan = strategy.plan_with(ctx, budget, trigger, &mut |c, r| one(&mut summarize, c, r))?;
    let mut trigger = trigger;
    let mut replanned = false;
    let mut summaries = summarize(ctx, &plan.requests);
    if summaries.too_long && trigger != Trigger::Overflow && strategy.reacts_to(Trigger::Overflow) {
        if let Some(forced) = strategy.plan_with(ctx, budget, Trigger::Overflow, &mut |c, r| one(&mut summarize, c, r))
        {
            summaries = summarize(ctx, &forced.requests);
            plan = forced;
            trigger = Trigger::Overflow;
            replanned = true;
        }
    }
    let compacted = strategy.apply(ctx, budget, &plan, &summaries.outcomes);
    Some(Step { plan, trigger, replanned, compacted })
}

/// One request through a summarizer that takes several.
fn one<F>(summarize: &mut F, ctx: &Context, request: &SummaryRequest) -> SummaryOutcome
where
    F: FnMut(&Context, &[SummaryRequest]) -> Summaries,
{
    let out = summarize(ctx, std::slice::from_ref(request));
    out.outcomes.into_iter().next().unwrap_or_else(|| Err(SummaryFailure { reason: "no summary given".into() }))
}
