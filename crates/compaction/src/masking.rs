//! Compactions that only mask, done in place.
//!
//! A masking strategy (`observation-mask`, `openhands-masking`, `anthropic-clear-tool-uses`)
//! never drops a message: it replaces old tool outputs with a placeholder. Its context grows
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
use crate::strategy::{Budget, Compacted, CompactionEvent, Plan, Promises, Slot, Strategy, Trigger};
use crate::tokens::TokenCounter;

/// A compaction that only masks: the content of each listed entry is replaced by its
/// placeholder; every entry stays where it is.
#[derive(Debug, Clone)]
pub struct MaskPlan {
    /// What the plan was made for.
    pub trigger: Trigger,
    /// The step, as [`Plan::step`].
    pub step: String,
    /// The entries to mask, ascending, each with the entry that replaces it
    /// ([`masked_entry`]: its content replaced by the placeholder).
    pub masks: Vec<(usize, Entry)>,
    /// Notes kept with the event, as [`Plan::notes`].
    pub notes: serde_json::Map<String, serde_json::Value>,
    /// What the strategy promises for the context before the masks ([`Strategy::promises`]).
    pub promises: Promises,
    /// Once the masks are in, no entry before this index needs anything from the strategy:
    /// the `settled` of its next [`Strategy::plan_masks`] on this context (grown by appends
    /// and by these masks only).
    pub settled: usize,
}

impl MaskPlan {
    /// The same compaction as a [`Plan`] over a context of `len` entries.
    pub fn to_plan(&self, len: usize) -> Plan {
        let mut masks = self.masks.iter().peekable();
        let layout = (0..len)
            .map(|index| match masks.next_if(|(i, _)| *i == index) {
                Some((_, e)) => Slot::Mask { index, placeholder: e.message().content.clone() },
                None => Slot::Keep { index },
            })
            .collect();
        let mut plan = Plan::deterministic(self.trigger, self.step.clone(), layout);
        plan.notes = self.notes.clone();
        plan
    }
}

/// A strategy's answer to [`Strategy::plan_masks`].
#[derive(Debug, Clone)]
pub enum MaskAnswer {
    /// The strategy has no in-place path for this context: use [`Strategy::plan`].
    Unsupported,
    /// Nothing to do: [`Strategy::plan`] has no plan, or (for [`Trigger::Proactive`])
    /// [`Strategy::should_compact`] says no. `settled` is the hint for the next call, as
    /// [`MaskPlan::settled`].
    Nothing {
        /// No entry before this index needs anything from the strategy.
        settled: usize,
    },
    /// The plan [`Strategy::plan`] would make, which only masks.
    Masks(MaskPlan),
}

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

/// The entry that masks `e` with `placeholder`, as [`Slot::Mask`] builds it.
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
    let estimate_after = strategy.estimate(ctx);
    let shortfall = strategy.threshold(ctx, budget).and_then(|t| estimate_after.checked_sub(t)).filter(|d| *d > 0);
    let event = CompactionEvent {
        strategy: strategy.name().to_string(),
        trigger: plan.trigger,
        step: plan.step.clone(),
        estimate_before,
        estimate_after,
        messages_before: len,
        messages_after: len,
        removed: 0,
        masked: replaced.len(),
        summaries: Vec::new(),
        round: None,
        fallback: None,
        shortfall,
        notes: plan.notes.clone(),
    };
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::{any, prop, prop_assert, prop_assert_eq, prop_oneof, proptest, Just, ProptestConfig};
    use proptest::strategy::Strategy as Gen;

    use super::*;
    use crate::context::Inserted;
    use crate::message::{Message, ToolCall};
    use crate::strategies::{anthropic_clear_tool_uses, observation_mask, openhands_masking, truncate::Counter};
    use crate::tokens::Exact;

    /// One generated message: tool calls and results of short and long outputs, user and
    /// assistant text, a system message now and then, and ids that repeat.
    fn message() -> impl Gen<Value = Message> {
        let id = prop::sample::select(vec!["a", "b", "c", "d", "e"]);
        let name = prop::sample::select(vec!["bash", "ls"]);
        prop_oneof![
            2 => Just(Message::user("carry on with the task")),
            2 => Just(Message::assistant("looking into it")),
            1 => Just(Message::system("a note")),
            4 => (id.clone(), name.clone()).prop_map(|(id, name)| Message::assistant_calls(
                "",
                vec![ToolCall { id: id.into(), name: name.into(), arguments: "{}".into() }]
            )),
            5 => (id, name, 0usize..400).prop_map(|(id, name, n)| Message::tool_result(id, name, "x ".repeat(n))),
        ]
    }

    /// One of the masking strategies, with generated parameters.
    #[derive(Debug, Clone)]
    enum Pick {
        Observation(observation_mask::Params),
        Openhands(openhands_masking::Params),
        Anthropic(anthropic_clear_tool_uses::Params),
    }

    impl Pick {
        fn build(&self) -> Box<dyn Strategy> {
            match self.clone() {
                Pick::Observation(p) => Box::new(observation_mask::ObservationMask::new(p).unwrap()),
                Pick::Openhands(p) => Box::new(openhands_masking::OpenhandsMasking::new(p).unwrap()),
                Pick::Anthropic(p) => Box::new(anthropic_clear_tool_uses::AnthropicClearToolUses::new(p).unwrap()),
            }
        }
    }

    fn strategy() -> impl Gen<Value = Pick> {
        prop_oneof![
            (0usize..4, 0.3f64..1.0, any::<bool>()).prop_map(|(keep_last, threshold_ratio, exact)| {
                let counter = if exact { Counter::O200kBase } else { Counter::CharsOver4 };
                Pick::Observation(observation_mask::Params {
                    keep_last,
                    threshold_ratio,
                    counter,
                    ..Default::default()
                })
            }),
            (1usize..6).prop_map(|attention_window| Pick::Openhands(openhands_masking::Params { attention_window })),
            (0usize..4, prop::option::of(1u64..600), prop::option::of(1u64..400), any::<bool>()).prop_map(
                |(keep, trigger, clear_at_least, exclude)| {
                    Pick::Anthropic(anthropic_clear_tool_uses::Params {
                        trigger,
                        keep,
                        clear_at_least,
                        exclude_tools: if exclude { "ls".into() } else { String::new() },
                        clear_tool_inputs: false,
                    })
                }
            ),
        ]
    }

    /// What a context holds, entry by entry.
    fn content(ctx: &Context) -> Vec<(Message, Origin)> {
        ctx.entries().iter().map(|e| (e.message().clone(), e.origin().clone())).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// A replay's calls through both paths: after every appended message, a proactive
        /// compaction and then a forced one, by `plan` + `apply` + `check_compaction` on one
        /// context and by `plan_masks` + `mask_in_place` + `check_masks` on the other. Plans,
        /// events, violations and contexts agree throughout.
        #[test]
        fn masking_in_place_is_the_full_compaction(
            s in strategy(),
            messages in prop::collection::vec(message(), 1..40),
            window in 40u64..800,
            irregular in prop::option::of(0usize..3),
        ) {
            let s = s.build();
            let s = s.as_ref();
            let budget = Budget::new(window);
            let exact = Exact::o200k();
            let meters: [&dyn TokenCounter; 2] = [&exact, s.estimator()];
            // A context that starts from a compaction's result: inserted and summary entries,
            // and (sometimes) recorded indices out of order.
            let mut start = vec![Entry::new(Message::system("digest"), Origin::Inserted { what: Inserted::StageDigest })];
            if let Some(k) = irregular {
                start.push(Entry::new(Message::user("summary"), Origin::Summary { round: 1, covers: vec![0] }));
                start.push(Entry::recorded(1000 + k, Message::user("late")));
                start.push(Entry::recorded(999, Message::assistant("early")));
            }
            let mut full = Context::from_entries(start.clone());
            let mut fast = Context::from_entries(start);
            full.units(&exact);
            full.units(s.estimator());
            fast.units(&exact);
            fast.units(s.estimator());
            let mut shape = ContextShape::new();
            let mut settled = 0;
            for (k, m) in messages.into_iter().enumerate() {
                full.push_metered(Entry::recorded(k, m.clone()), &meters);
                fast.push_metered(Entry::recorded(k, m), &meters);
                for trigger in [Trigger::Proactive, Trigger::Overflow] {
                    let planned = if trigger == Trigger::Proactive && !s.should_compact(&full, &budget) {
                        None
                    } else {
                        s.plan(&full, &budget, trigger)
                    };
                    match s.plan_masks(&fast, &budget, trigger, settled) {
                        MaskAnswer::Unsupported => prop_assert!(false, "{} has an in-place path", s.name()),
                        MaskAnswer::Nothing { settled: next } => {
                            prop_assert!(planned.is_none(), "{}: no masks, but a plan: {:?}", s.name(), planned);
                            settled = next;
                        }
                        MaskAnswer::Masks(mask) => {
                            let plan = planned.expect("the full path plans too");
                            let as_plan = mask.to_plan(fast.len());
                            prop_assert_eq!(&as_plan.layout, &plan.layout);
                            prop_assert_eq!(&as_plan.step, &plan.step);
                            prop_assert_eq!(&as_plan.notes, &plan.notes);
                            let promised = s.promises(&full, &budget);
                            prop_assert_eq!(mask.promises.recent_window, promised.recent_window);
                            prop_assert_eq!(mask.promises.keeps_system_prompt, promised.keeps_system_prompt);
                            let out = s.apply(&full, &budget, &plan, &[]);
                            let violations = check_compaction(s, &full, &budget, trigger, &out);
                            let masked = mask_in_place(s, &mut fast, &budget, &mask, &[&exact]);
                            shape.follow(&fast);
                            let found = check_masks(s, &fast, &budget, &mask, &masked, &shape);
                            prop_assert_eq!(&masked.event, &out.event);
                            prop_assert_eq!(found, violations);
                            full = out.context;
                            full.units(&exact);
                            full.units(s.estimator());
                            settled = mask.settled;
                        }
                    }
                    prop_assert_eq!(content(&full), content(&fast));
                    prop_assert_eq!(full.tokens(&exact), fast.tokens(&exact));
                    prop_assert_eq!(s.estimate(&full), s.estimate(&fast));
                }
            }
        }
    }
}
