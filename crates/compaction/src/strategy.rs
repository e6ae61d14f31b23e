//! The strategy interface: a trigger, a pure `plan`, and a pure `apply`.
//!
//! A strategy never calls a model. The caller asks [`Strategy::should_compact`], gets a
//! [`Plan`] from [`Strategy::plan`], produces every [`SummaryRequest`] of the plan with any
//! summarizer (an LLM, or an offline one), and hands the outcomes to [`Strategy::apply`],
//! which builds the new [`Context`] and a [`CompactionEvent`].

use crate::context::Context;
use crate::layout::build_layout;
use crate::plan::{
    Budget, Change, Compacted, CompactionEvent, Fallback, MaskAnswer, Plan, Promises, Slot, SummaryOutcome,
    SummaryRequest, Trigger,
};
use crate::request::{Provider, RequestRule};
use crate::tokens::TokenCounter;

/// A strategy's harness hints, answered once per strategy value ([`Strategy::profile`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Provider request rules ([`crate::check_request`]) the strategy's own document breaks
    /// as written, with its parameters: a finding about the document, stated in the
    /// strategy's module header. The conformance suite holds every other strategy to every
    /// rule of both providers.
    pub documented_rejections: Vec<(Provider, RequestRule)>,
    /// Whether summaries the recorded agent wrote (messages flagged `meta.compact_summary`)
    /// enter the context when a recording is replayed. Only the `recorded` reference sees
    /// them; every other strategy replays the history as if the recording had not been
    /// compacted.
    pub sees_recorded_summaries: bool,
    /// Whether each request starts again from the full history rather than from the context
    /// the previous compaction left (a route that rebuilds its message list from the stored
    /// conversation on every call). A caller that honours it hands [`Strategy::plan`] the full
    /// history before every call.
    pub rebuilds_from_history: bool,
    /// The condition [`Strategy::can_operate`] checks, in words, for `compactlens strategies`.
    pub operating_condition: &'static str,
}

impl Default for Profile {
    /// Every built-in hint off: no documented rejection, recorded summaries hidden, each request
    /// from the context the previous compaction left, and the default operating condition.
    fn default() -> Profile {
        Profile {
            documented_rejections: Vec::new(),
            sees_recorded_summaries: false,
            rebuilds_from_history: false,
            operating_condition: "its trigger threshold, if it has one, is at most the window",
        }
    }
}

/// A compaction strategy. Implementations are stateless: everything they need to know about
/// earlier compactions is in the context (summaries carry their round and coverage).
pub trait Strategy: Send + Sync {
    /// The strategy's name, as its catalog lists it.
    fn name(&self) -> &'static str;
    /// What a harness needs to know beyond planning: the request rules the strategy's document
    /// breaks, whether it sees recorded summaries or rebuilds from the full history, and its
    /// operating condition in words. Default: [`Profile::default`].
    fn profile(&self) -> Profile {
        Profile::default()
    }
    /// The token estimator the strategy's own document uses.
    fn estimator(&self) -> &dyn TokenCounter;
    /// The strategy's estimate of the request, as its document computes it.
    fn estimate(&self, ctx: &Context) -> u64 {
        ctx.tokens(self.estimator())
    }
    /// The estimate above which the strategy compacts proactively (`None`: never).
    fn threshold(&self, ctx: &Context, budget: &Budget) -> Option<u64>;
    /// Every trigger threshold the strategy checks, each with a short label, lowest first
    /// (what a report draws as lines). Default: the one [`Strategy::threshold`], labelled
    /// `trigger`; a strategy with several staged thresholds lists each.
    fn thresholds(&self, ctx: &Context, budget: &Budget) -> Vec<(&'static str, u64)> {
        self.threshold(ctx, budget).map(|t| ("trigger", t)).into_iter().collect()
    }
    /// Whether the strategy can operate at `budget`'s window, and why not: `Err` names the
    /// parameter that makes it impossible (an output reserve or a protected tail at least the
    /// window, a trigger threshold it can never reach before the request overflows). A
    /// configuration that cannot operate is reported as inapplicable and never ranked: it was
    /// never able to run. The default: a proactive threshold (on an empty context) above the
    /// window can never fire on a request that fits (one at the window fires on the request
    /// that overflows it, as some documents do by design).
    fn can_operate(&self, budget: &Budget) -> Result<(), String> {
        match self.threshold(&Context::new(), budget) {
            Some(t) if t > budget.context_window => Err(format!(
                "its trigger threshold ({t} tokens) is above the window ({}): it can never fire on a request that fits",
                budget.context_window
            )),
            _ => Ok(()),
        }
    }
    /// The strategy's proactive trigger.
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        self.threshold(ctx, budget).is_some_and(|t| self.estimate(ctx) > t)
    }
    /// Whether the strategy reacts to `trigger` when it is not proactive.
    fn reacts_to(&self, trigger: Trigger) -> bool {
        matches!(trigger, Trigger::Overflow)
    }
    /// Decide what to do for `trigger`. `None` means nothing to do (nothing compactable). For
    /// [`Trigger::Proactive`] it is asked only after [`Strategy::should_compact`] said yes:
    /// the kernel holds that gate for every strategy and both paths (the
    /// [`compact`](crate::compact) driver and the [`Compactor`](crate::Compactor)), so a
    /// strategy does not repeat it.
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan>;
    /// [`Strategy::plan`] for a strategy that needs summaries while it decides: `summarize`
    /// makes one, as the caller makes a plan's requests. A strategy may ask for its first
    /// summary before it decides whether a second pass over everything is needed; a process speaking
    /// the external-strategy protocol asks before it answers. Every other strategy decides
    /// first and asks after, in [`Plan::requests`]; for it this is `plan`.
    fn plan_with(
        &self,
        ctx: &Context,
        budget: &Budget,
        trigger: Trigger,
        summarize: &mut dyn FnMut(&Context, &SummaryRequest) -> SummaryOutcome,
    ) -> Option<Plan> {
        let _ = summarize;
        self.plan(ctx, budget, trigger)
    }
    /// The plan [`Strategy::plan`] would make for `trigger`, as masks done in place, when that
    /// plan only masks ([`crate::masking`]): the same compaction at the cost of what changed.
    /// `settled` is the [`MaskPlan::settled`](crate::MaskPlan::settled) of the previous answer
    /// on this context (grown since by appends and by those masks only), or 0: no entry before
    /// it needs looking at. Like `plan`, it is asked for [`Trigger::Proactive`] only after
    /// [`Strategy::should_compact`] said yes: the [`Compactor`](crate::Compactor) holds that
    /// gate, so an implementation does not repeat it. The default,
    /// [`MaskAnswer::Unsupported`], sends the caller to `plan`.
    fn plan_masks(&self, ctx: &Context, budget: &Budget, trigger: Trigger, settled: usize) -> MaskAnswer {
        let _ = (ctx, budget, trigger, settled);
        MaskAnswer::Unsupported
    }
    /// Build the new context from a plan and the summaries the caller produced, one per request.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        apply_layout(self, ctx, budget, plan, summaries)
    }
    /// What the conformance checker may hold the strategy to.
    fn promises(&self, ctx: &Context, budget: &Budget) -> Promises;
    /// Where the strategy places prompt-cache breakpoints in `ctx`: the indices of the entries
    /// a breakpoint follows, in order. `None`: the caller's default rule (a strategy that
    /// recomputes its own cache points after every render says where).
    fn cache_breakpoints(&self, _ctx: &Context) -> Option<Vec<usize>> {
        None
    }
}

/// The standard `apply`: build `plan.layout` (or the fallback if any summary failed).
pub fn apply_layout<S: Strategy + ?Sized>(
    strategy: &S,
    ctx: &Context,
    budget: &Budget,
    plan: &Plan,
    summaries: &[SummaryOutcome],
) -> Compacted {
    let estimate_before = strategy.estimate(ctx);
    let failed = plan.requests.iter().enumerate().find_map(|(i, _)| match summaries.get(i) {
        // An empty summary is a failed summary ("LLM summarization fails (timeout, error,
        // empty)"); every strategy takes its failure path on it.
        Some(Ok(t)) if t.trim().is_empty() => Some("empty summary".to_string()),
        Some(Ok(_)) => None,
        Some(Err(e)) => Some(e.reason.clone()),
        None => Some("no summary given".to_string()),
    });
    let (layout, fallback): (&[Slot], Option<String>) = match (&failed, &plan.fallback) {
        (None, _) => (&plan.layout, None),
        (Some(reason), Fallback::Unchanged) => {
            let fallback = format!("unchanged: {reason}");
            let before = (estimate_before, ctx.len());
            let event = CompactionEvent::new(
                strategy,
                budget,
                (plan.trigger, plan.step.clone(), plan.notes.clone()),
                before,
                Change::Unchanged { fallback },
            );
            return Compacted { context: ctx.clone(), event };
        }
        (Some(reason), Fallback::Layout { label, layout }) => (layout, Some(format!("{label}: {reason}"))),
    };
    let mut built = build_layout(ctx, layout, &plan.requests, summaries, &[strategy.estimator()]);
    let heading = (plan.trigger, plan.step.clone(), plan.notes.clone());
    let event = CompactionEvent::new(strategy, budget, heading, (estimate_before, ctx.len()), built.change(fallback));
    Compacted { context: built.context, event }
}

impl CompactionEvent {
    /// The event of one compaction by `strategy`: `heading` is what it was made for, the
    /// step that decided it and the plan's notes; `before` the strategy's estimate and the
    /// entries of the context before it; `change` what it left. The estimate after and the
    /// shortfall (the estimate still over the strategy's threshold on the new context) are
    /// measured here, with the strategy's own estimator: every path that compacts (a layout,
    /// masks done in place, a strategy's own failure path) writes its event through this one
    /// constructor.
    pub fn new<S: Strategy + ?Sized>(
        strategy: &S,
        budget: &Budget,
        heading: (Trigger, String, serde_json::Map<String, serde_json::Value>),
        before: (u64, usize),
        change: Change<'_>,
    ) -> CompactionEvent {
        let (trigger, step, notes) = heading;
        let (estimate_before, messages_before) = before;
        let mut event = CompactionEvent {
            strategy: strategy.name().to_string(),
            trigger,
            step,
            estimate_before,
            estimate_after: estimate_before,
            messages_before,
            messages_after: messages_before,
            removed: 0,
            masked: 0,
            summaries: Vec::new(),
            round: None,
            fallback: None,
            shortfall: None,
            notes,
        };
        match change {
            Change::Unchanged { fallback } => event.fallback = Some(fallback),
            Change::Built { context, removed, masked, summaries, round, fallback } => {
                let estimate_after = strategy.estimate(context);
                event.shortfall =
                    strategy.threshold(context, budget).and_then(|t| estimate_after.checked_sub(t)).filter(|d| *d > 0);
                event.estimate_after = estimate_after;
                event.messages_after = context.len();
                event.removed = removed;
                event.masked = masked;
                event.summaries = summaries;
                event.round = round;
                event.fallback = fallback;
            }
        }
        event
    }
}
