//! Compactions that only mask, done in place.
//!
//! A masking strategy never drops a message: it replaces old tool outputs with a placeholder. Its context grows
//! with the conversation, and once it is over the strategy's threshold every call has a newly
//! old output to mask. Through [`Strategy::plan`] and [`Strategy::apply`] each such call lists,
//! rebuilds and checks the whole context, so a long conversation costs O(history) per call.
//!
//! The in-place path does the same compaction at the cost of what changed:
//!
//! - [`Strategy::plan_masks`] answers with a [`MaskPlan`]: the entries to mask, found by
//!   looking only past the point its previous answer settled ([`MaskPlan::settled`]);
//! - [`mask_in_place`] replaces those entries in the context, keeping its running token totals,
//!   and returns the [`CompactionEvent`] [`Strategy::apply`] would have written;
//! - [`check_masks`] returns what [`check_compaction`] would have found, from a
//!   [`ContextShape`] kept up to date as the context grows.
//!
//! Each is the full path's answer, not an approximation: the tests below drive both paths over
//! generated conversations and compare contexts, events and violations after every call.

use crate::context::{Context, Entry, Origin};
use crate::invariants::{check_compaction, Violation};
use crate::message::Role;
use crate::plan::{Budget, Change, Compacted, CompactionEvent, MaskPlan, Trigger};
use crate::strategy::Strategy;
use crate::tokens::TokenCounter;

/// What one in-place masking did.
#[derive(Debug, Clone)]
pub struct Masked {
    /// The event [`Strategy::apply`] would have written.
    pub event: CompactionEvent,
    /// The entries the masks replaced, with their indices, in the order of the plan.
    pub replaced: Vec<(usize, Entry)>,
    /// The strategy's threshold on the context before the masks.
    pub threshold_before: Option<u64>,
}

/// The entry that masks `e` with `placeholder`, as [`Slot::Mask`](crate::Slot::Mask) builds it.
pub fn masked_entry(e: &Entry, placeholder: impl Into<String>) -> Entry {
    let m = e.message().with_content(placeholder);
    let origin = match e.origin() {
        Origin::Recorded { index } | Origin::Masked { index } => Origin::Masked { index: *index },
        other => other.clone(),
    };
    Entry::new(m, origin)
}

/// Apply `plan` to `ctx` in place: what [`Strategy::apply`] builds from
/// [`MaskPlan::to_plan`], at the cost of the masked entries. The new entries are metered with
/// `counters` (the strategy's estimator is always one), so the running totals stay known.
pub fn mask_in_place<S: Strategy + ?Sized>(
    strategy: &S,
    ctx: &mut Context,
    budget: &Budget,
    plan: &MaskPlan,
    counters: &[&dyn TokenCounter],
) -> Masked {
    let estimate_before = strategy.estimate(ctx);
    let threshold_before = strategy.threshold(ctx, budget);
    let len = ctx.len();
    let mut replaced = Vec::with_capacity(plan.masks.len());
    let mut meters: Vec<&dyn TokenCounter> = counters.to_vec();
    meters.push(strategy.estimator());
    for (index, new) in &plan.masks {
        if *index < len {
            replaced.push((*index, ctx.replace(*index, new.clone(), &meters)));
        }
    }
    let heading = (plan.trigger, plan.step.clone(), plan.notes.clone());
    let change = Change::Built {
        context: ctx,
        removed: 0,
        masked: replaced.len(),
        summaries: Vec::new(),
        round: None,
        fallback: None,
    };
    let event = CompactionEvent::new(strategy, budget, heading, (estimate_before, len), change);
    Masked { event, replaced, threshold_before }
}

/// The context's order and role-alternation facts that a compaction which only masks cannot
/// change, kept up to date as entries are appended: what [`check_compaction`] finds again on
/// every compaction of a context that was already out of order or already broke alternation.
///
/// Only a *regular* context (recorded indices strictly increasing, as the replay's appends
/// keep them) is followed; for any other [`check_masks`] falls back to the full check.
#[derive(Debug, Clone, Default)]
pub struct ContextShape {
    len: usize,
    irregular: bool,
    last_recorded: Option<usize>,
    /// The last non-system entry: its turn role, whether it is a tool result, whether it holds
    /// a recorded message.
    last_body: Option<(Role, bool, bool)>,
    /// A recorded entry came after the last non-system entry.
    recorded_since_body: bool,
    /// Positions where two adjacent same-turn-role messages were not adjacent when recorded.
    breaks: Vec<usize>,
}

fn turn_role(r: Role) -> Role {
    if r == Role::Tool {
        Role::User
    } else {
        r
    }
}

impl ContextShape {
    /// The shape of an empty context.
    pub fn new() -> ContextShape {
        ContextShape::default()
    }

    /// Entries followed so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry was followed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Follow `ctx`, which extends (by appends, and masks of followed entries) the context
    /// followed so far.
    pub fn follow(&mut self, ctx: &Context) {
        for e in ctx.entries().iter().skip(self.len) {
            self.push(e);
        }
    }

    fn push(&mut self, e: &Entry) {
        let j = self.len;
        self.len += 1;
        let recorded = e.origin().recorded_index();
        if let Some(y) = recorded {
            if self.last_recorded.is_some_and(|x| y <= x) {
                self.irregular = true;
            }
            self.last_recorded = Some(y);
        }
        if e.role() == Role::System {
            self.recorded_since_body |= recorded.is_some();
            return;
        }
        let role = turn_role(e.role());
        let tool = e.role() == Role::Tool;
        if let Some((r, was_tool, was_recorded)) = self.last_body {
            let adjacent = was_recorded && recorded.is_some() && !self.recorded_since_body;
            if r == role && !adjacent && !(was_tool && tool) {
                self.breaks.push(j);
            }
        }
        self.last_body = Some((role, tool, recorded.is_some()));
        self.recorded_since_body = false;
    }
}

/// What [`check_compaction`] finds for the masking `masked` did on `ctx` (the context after
/// it), given `shape`, which follows `ctx`. Equal to the full check on the context before and
/// after (tested below).
pub fn check_masks(
    strategy: &dyn Strategy,
    ctx: &Context,
    budget: &Budget,
    plan: &MaskPlan,
    masked: &Masked,
    shape: &ContextShape,
) -> Vec<Violation> {
    if shape.irregular || shape.len != ctx.len() {
        let mut before = ctx.clone();
        for (index, e) in masked.replaced.iter().rev() {
            before.replace(*index, e.clone(), &[]);
        }
        let result = Compacted { context: ctx.clone(), event: masked.event.clone() };
        return check_compaction(strategy, &before, budget, plan.trigger, &result);
    }
    // Masks keep every role, call id and recorded index: the pairing, the summaries and the
    // recorded order are what they were, so no structural violation is new and the order is
    // as regular as before.
    let mut out = Vec::new();
    let changed = |index: usize, old: &Entry| {
        ctx.get(index).is_some_and(|new| new.message() != old.message() || new.origin() != old.origin())
    };
    if plan.promises.keeps_system_prompt {
        let first = masked.replaced.iter().find(|(i, _)| *i == 0);
        if let Some((_, old)) = first {
            let recorded_system = old.role() == Role::System && matches!(old.origin(), Origin::Recorded { .. });
            if recorded_system && ctx.get(0).is_some_and(|e| e.message() != old.message()) {
                out.push(Violation::SystemPromptChanged);
            }
        }
    }
    let len = ctx.len();
    let window = plan.promises.recent_window.min(len);
    if window > 0 {
        let newest_change = masked.replaced.iter().filter(|(i, old)| changed(*i, old)).map(|(i, _)| *i).max();
        let kept = newest_change.map_or(window, |m| window.min(len - 1 - m));
        if kept < window {
            out.push(Violation::RecentWindowNotVerbatim { window, kept });
        }
    }
    if plan.trigger == Trigger::Proactive && !masked.event.is_noop() {
        let estimate = masked.event.estimate_before;
        if let Some(threshold) = masked.threshold_before.filter(|t| estimate <= *t) {
            out.push(Violation::CompactedBelowThreshold { estimate, threshold });
        }
    }
    out.extend(shape.breaks.iter().map(|&index| Violation::RoleAlternation { index }));
    if let Some(threshold) = strategy.threshold(ctx, budget) {
        let estimate = strategy.estimate(ctx);
        if estimate > threshold && masked.event.shortfall.is_none() && masked.event.fallback.is_none() {
            out.push(Violation::OverBudgetUnreported { estimate, threshold });
        }
    }
    out
}
