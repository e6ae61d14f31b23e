//! What a valid context is, checked in one place and reported as typed data.
//!
//! [`check_context`] checks any context (a request about to be sent); [`check_compaction`]
//! checks one compaction against the strategy's [`Promises`](crate::Promises). The conformance suite runs both
//! on every strategy; the runner runs them on every request and counts what they find.

use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::context::{Context, Origin};
use crate::message::Role;
use crate::plan::{Budget, Compacted, Trigger, ViolationKind};
use crate::strategy::Strategy;

/// One broken invariant, with the data that shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    /// A tool result whose call is not before it in the context.
    OrphanToolResult {
        /// The index of the offending message in the new context.
        index: usize,
        /// The call id.
        call_id: String,
    },
    /// A tool call with no result after it (a call in flight at the very end is allowed).
    UnansweredToolCall {
        /// The index of the offending message in the new context.
        index: usize,
        /// The call id.
        call_id: String,
    },
    /// The system prompt at position 0 was changed, moved or removed.
    SystemPromptChanged,
    /// Recorded messages kept in a different order than recorded.
    OutOfOrder {
        /// The index of the offending message in the new context.
        index: usize,
    },
    /// The strategy's recent window was not kept verbatim at the end.
    RecentWindowNotVerbatim {
        /// The promised window, in entries.
        window: usize,
        /// How many of them were kept verbatim.
        kept: usize,
    },
    /// A proactive compaction changed the context while the estimate was at or below threshold.
    CompactedBelowThreshold {
        /// The strategy's own estimate.
        estimate: u64,
        /// Its threshold.
        threshold: u64,
    },
    /// More than one live summary.
    MultipleSummaries {
        /// How many.
        count: usize,
    },
    /// Compaction put two same-role messages next to each other, or a non-user first message,
    /// which the Anthropic Messages API rejects (tool results count as user turns).
    RoleAlternation {
        /// The index of the offending message in the new context.
        index: usize,
    },
    /// The result is over the strategy's own threshold and the event reports no shortfall.
    OverBudgetUnreported {
        /// The strategy's own estimate.
        estimate: u64,
        /// Its threshold.
        threshold: u64,
    },
}

impl Violation {
    /// Which kind of violation this is.
    pub fn kind(&self) -> ViolationKind {
        match self {
            Violation::OrphanToolResult { .. } => ViolationKind::OrphanToolResult,
            Violation::UnansweredToolCall { .. } => ViolationKind::UnansweredToolCall,
            Violation::SystemPromptChanged => ViolationKind::SystemPromptChanged,
            Violation::OutOfOrder { .. } => ViolationKind::OutOfOrder,
            Violation::RecentWindowNotVerbatim { .. } => ViolationKind::RecentWindowNotVerbatim,
            Violation::CompactedBelowThreshold { .. } => ViolationKind::CompactedBelowThreshold,
            Violation::MultipleSummaries { .. } => ViolationKind::MultipleSummaries,
            Violation::RoleAlternation { .. } => ViolationKind::RoleAlternation,
            Violation::OverBudgetUnreported { .. } => ViolationKind::OverBudgetUnreported,
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::OrphanToolResult { index, call_id } => {
                write!(f, "message {index}: tool result for {call_id:?} has no call before it")
            }
            Violation::UnansweredToolCall { index, call_id } => {
                write!(f, "message {index}: tool call {call_id:?} has no result")
            }
            Violation::SystemPromptChanged => write!(f, "the system prompt was changed, moved or removed"),
            Violation::OutOfOrder { index } => write!(f, "message {index}: kept out of recorded order"),
            Violation::RecentWindowNotVerbatim { window, kept } => {
                write!(f, "recent window of {window} messages not verbatim (only the last {kept} are)")
            }
            Violation::CompactedBelowThreshold { estimate, threshold } => {
                write!(f, "compacted at {estimate} tokens, at or below its threshold {threshold}")
            }
            Violation::MultipleSummaries { count } => write!(f, "{count} live summaries"),
            Violation::RoleAlternation { index } => write!(f, "message {index}: role alternation broken by compaction"),
            Violation::OverBudgetUnreported { estimate, threshold } => {
                write!(f, "result at {estimate} tokens is over {threshold} and no shortfall is reported")
            }
        }
    }
}

/// Structural checks on one context: tool pairing and summaries.
///
/// Tool results are paired with the most recent unanswered call of the same id that precedes
/// them, so reused ids (as in tau-bench recordings) pair by position. A call is answered only
/// by a result that comes after it; the last assistant message's calls may be in flight.
pub fn check_context(ctx: &Context) -> Vec<Violation> {
    // The one pairing rule (a call in flight is the last assistant message's, with nothing but
    // tool results after it).
    let pairing = crate::pairing::ToolPairing::scan(ctx.entries().iter().map(|e| e.message()));
    let mut out: Vec<Violation> = pairing
        .orphans()
        .iter()
        .map(|(index, call_id)| Violation::OrphanToolResult { index: *index, call_id: call_id.clone() })
        .collect();
    out.extend(
        pairing.unanswered().into_iter().map(|(index, call_id)| Violation::UnansweredToolCall { index, call_id }),
    );
    let summaries = ctx.summaries().count();
    if summaries > 1 {
        out.push(Violation::MultipleSummaries { count: summaries });
    }
    out
}

/// The role as the Anthropic Messages API sees it: tool results are user turns.
fn turn_role(r: Role) -> Role {
    match r {
        Role::Tool => Role::User,
        other => other,
    }
}

/// Positions in `after` where compaction created a role-alternation break (two adjacent
/// same-turn-role messages that were not adjacent before, or a first non-system message that
/// is not a user turn when it was one before).
pub fn alternation_breaks(before: &Context, after: &Context) -> Vec<usize> {
    // Masked entries hold recorded messages too: a pair that was adjacent before compaction
    // (say a masked tool result and the user message after it) is not a new break.
    let rec: Vec<usize> = before.entries().iter().filter_map(|e| e.origin().recorded_index()).collect();
    // A context in recorded order, the usual case, answers by binary search; any other builds
    // the map, once and only if asked.
    let in_order = rec.windows(2).all(|w| w[0] < w[1]);
    let map: OnceCell<HashMap<usize, usize>> = OnceCell::new();
    breaks_with(before, after, |x| {
        if in_order {
            return rec.binary_search(&x).ok().and_then(|p| rec.get(p + 1)).copied();
        }
        map.get_or_init(|| next_recorded_map(&rec)).get(&x).copied()
    })
}

/// The recorded message after each one in `rec` (after its last occurrence).
fn next_recorded_map(rec: &[usize]) -> HashMap<usize, usize> {
    rec.windows(2).map(|w| (w[0], w[1])).collect()
}

/// [`alternation_breaks`] with `next_recorded(x)`: the recorded message after `x` in `before`.
fn breaks_with(before: &Context, after: &Context, next_recorded: impl Fn(usize) -> Option<usize>) -> Vec<usize> {
    let body: Vec<(usize, &crate::context::Entry)> =
        after.entries().iter().enumerate().filter(|(_, e)| e.role() != Role::System).collect();
    let mut out = Vec::new();
    let first_before = before.entries().iter().find(|e| e.role() != Role::System).map(|e| turn_role(e.role()));
    if let Some((i, e)) = body.first() {
        if turn_role(e.role()) != Role::User && first_before == Some(Role::User) {
            out.push(*i);
        }
    }
    for w in body.windows(2) {
        let ((_, a), (j, b)) = (w[0], w[1]);
        if turn_role(a.role()) != turn_role(b.role()) {
            continue;
        }
        // Two results of one parallel call batch are fine, as is any pair that was adjacent before.
        let was_adjacent = match (a.origin().recorded_index(), b.origin().recorded_index()) {
            (Some(x), Some(y)) => next_recorded(x) == Some(y),
            _ => false,
        };
        let both_tool = a.role() == Role::Tool && b.role() == Role::Tool;
        if !was_adjacent && !both_tool {
            out.push(j);
        }
    }
    out
}

/// What identifies a structural violation across a compaction: its kind, the call id, and the
/// recorded message it is about (positions move, recorded indices do not). A message with no
/// recorded index (a summary, an inserted message) is identified by kind and call id alone.
type StructuralKey = (ViolationKind, Option<String>, Option<usize>);

fn structural_key(ctx: &Context, v: &Violation) -> StructuralKey {
    let recorded = |index: usize| {
        ctx.get(index).and_then(|e| match e.origin() {
            Origin::Recorded { index } | Origin::Masked { index } => Some(*index),
            _ => None,
        })
    };
    match v {
        Violation::OrphanToolResult { index, call_id } | Violation::UnansweredToolCall { index, call_id } => {
            (v.kind(), Some(call_id.clone()), recorded(*index))
        }
        other => (other.kind(), None, None),
    }
}

/// Check one compaction: `before` was compacted into `result` under `budget` for `trigger`.
///
/// Returns every violation, including those the strategy documents as deliberate; use
/// [`crate::Promises::documented_deviations`] to tell them apart.
pub fn check_compaction(
    strategy: &dyn Strategy,
    before: &Context,
    budget: &Budget,
    trigger: Trigger,
    result: &Compacted,
) -> Vec<Violation> {
    let after = &result.context;
    let promises = strategy.promises(before, budget);
    // Structural problems count only when compaction introduced them: the same problem (kind,
    // call id, recorded message) was already there before.
    // `before` is checked only when `after` has a structural problem to compare: a walk over
    // the whole of `before` (a full history, for a strategy that rebuilds from it) saved on
    // every compaction that leaves none.
    let found = check_context(after);
    let mut out: Vec<Violation> = if found.is_empty() {
        found
    } else {
        let known: HashSet<StructuralKey> = check_context(before).iter().map(|v| structural_key(before, v)).collect();
        found.into_iter().filter(|v| !known.contains(&structural_key(after, v))).collect()
    };

    if promises.keeps_system_prompt {
        // The system prompt is the recorded one: a system message the strategy inserted in an
        // earlier round (a stage digest, a summary) is the strategy's to replace.
        if let Some(sys) = before.system_prompt().filter(|e| matches!(e.origin(), Origin::Recorded { .. })) {
            let same = after.get(0).is_some_and(|e| e.message() == sys.message());
            if !same {
                out.push(Violation::SystemPromptChanged);
            }
        }
    }

    let mut last = None;
    for (i, e) in after.entries().iter().enumerate() {
        if let Origin::Recorded { index } | Origin::Masked { index } = e.origin() {
            if last.is_some_and(|l| *index <= l) {
                out.push(Violation::OutOfOrder { index: i });
            }
            last = Some(*index);
        }
    }

    let window = promises.recent_window.min(before.len());
    if window > 0 {
        let b = &before.entries()[before.len() - window..];
        let kept = b
            .iter()
            .rev()
            .zip(after.entries().iter().rev())
            .take_while(|(x, y)| x.message() == y.message() && x.origin() == y.origin())
            .count();
        if kept < window {
            out.push(Violation::RecentWindowNotVerbatim { window, kept });
        }
    }

    if trigger == Trigger::Proactive && !result.event.is_noop() {
        if let Some(threshold) = strategy.threshold(before, budget) {
            let estimate = strategy.estimate(before);
            if estimate <= threshold {
                out.push(Violation::CompactedBelowThreshold { estimate, threshold });
            }
        }
    }

    for index in alternation_breaks(before, after) {
        out.push(Violation::RoleAlternation { index });
    }

    if let Some(threshold) = strategy.threshold(after, budget) {
        let estimate = strategy.estimate(after);
        if estimate > threshold && result.event.shortfall.is_none() && result.event.fallback.is_none() {
            out.push(Violation::OverBudgetUnreported { estimate, threshold });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Entry;
    use crate::message::Message;
    use proptest::prelude::{prop, prop_assert_eq, proptest, ProptestConfig};

    /// [`alternation_breaks`] as it was written first: the map from every recorded message
    /// of `before` to the next one, built whole.
    fn alternation_breaks_with_map(before: &Context, after: &Context) -> Vec<usize> {
        let rec: Vec<usize> = before.entries().iter().filter_map(|e| e.origin().recorded_index()).collect();
        let map = next_recorded_map(&rec);
        breaks_with(before, after, |x| map.get(&x).copied())
    }

    /// An entry: `(role, recorded index, kind)`; kind 0 recorded, 1 masked, 2 a summary.
    fn entry((role, index, kind): (u8, usize, u8)) -> Entry {
        let role = [Role::System, Role::User, Role::Assistant, Role::Tool][role as usize % 4];
        let m = Message::new(role, "x");
        match kind {
            0 => Entry::new(m, Origin::Recorded { index }),
            1 => Entry::new(m, Origin::Masked { index }),
            _ => Entry::new(m, Origin::Summary { round: 1, covers: vec![index] }),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The breaks found by binary search over a context in recorded order (or by the map
        /// over one that is not) are those of the map built whole, whether `before` is in
        /// order, out of order or holds a message twice, and `after` is any selection of it.
        #[test]
        fn breaks_are_those_of_the_whole_map(
            in_order in prop::bool::ANY,
            raw in prop::collection::vec((0u8..4, 0usize..40, 0u8..3), 0..40),
            picks in prop::collection::vec(0usize..60, 0..30),
        ) {
            let mut raw = raw;
            if in_order {
                for (k, r) in raw.iter_mut().enumerate() {
                    r.1 = 2 * k + usize::from(r.1 % 2 == 0);
                }
            }
            let before = Context::from_entries(raw.iter().copied().map(entry).collect());
            let after = Context::from_entries(
                picks.iter().filter_map(|&p| before.get(p).cloned()).collect(),
            );
            prop_assert_eq!(alternation_breaks(&before, &after), alternation_breaks_with_map(&before, &after));
            prop_assert_eq!(alternation_breaks(&before, &before), alternation_breaks_with_map(&before, &before));
        }
    }
}
