//! `openhands-masking`: OpenHands' `ObservationMaskingCondenser`, at its configured default.
//!
//! Source: OpenHands/OpenHands `openhands/memory/condenser/impl/observation_masking_condenser.py`
//! (the condenser) and `openhands/core/config/condenser_config.py`
//! (`ObservationMaskingCondenserConfig`, the configuration an agent is built from), read at
//! commit d074f47c428b6dbd0a9669f9b2112444f68eb80d with the code search. The condenser masks:
//!
//! ```text
//! for i, event in enumerate(events):
//!     if isinstance(event, Observation) and i < len(events) - self.attention_window:
//!         results.append(AgentCondensationObservation('<MASKED>'))
//! ```
//!
//! - **Window**: `attention_window` = 100, the default of `ObservationMaskingCondenserConfig`
//!   (raised from 10 in 3d38a105cf). The class itself defaults to 5, but an agent configured
//!   through OpenHands gets the config's value; 5 and 10 stay available as parameters. The
//!   window counts *events*, not observations: an observation among the newest 100 events of
//!   the view stays, every older one is masked.
//! - **Placeholder**: `<MASKED>`, the text of the `AgentCondensationObservation` that replaces
//!   the observation.
//! - **Trigger**: none. A condenser runs on every step and rebuilds the view; here it masks
//!   whenever there is an unmasked observation outside the window ([`Strategy::threshold`] is
//!   `None`, [`Strategy::should_compact`] says whether there is work). No model call.
//!
//! Departures, each kept for a reason:
//! - An observation is a tool result (`Role::Tool`) and an event is a message: OpenHands splits
//!   the parallel calls of one model response into one action event each, so a batch of `k`
//!   calls is `k` events there and one here. The recordings' batches are short, and the window
//!   (100) is far larger than any batch, so the edge moves by at most a batch's width.
//! - OpenHands replaces the event with a condensation observation; here the message keeps its
//!   role, call id and tool name with the content replaced, so the call keeps its result (the
//!   providers require it, and the OpenHands view pairs them the same way).
//! - The system prompt counts as an event, as OpenHands' system-prompt event does; it is never
//!   an observation.
//!
//! What the replay then measures, as the source behaves: masking is the condenser's only move,
//! with no bound on the request's size. When the conversation's messages other than
//! observations and the newest 100 events outgrow the window, the request is over it and a
//! provider refuses it; OpenHands pairs this condenser with others (or with its own
//! context-window error handling) for that case. Under `overflow = "fail"` the conversation ends
//! there. This is the design's behaviour, not a replay artefact.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ParamError;
use compaction::context::{Context, Entry, Origin};
use compaction::message::Role;
use compaction::tokens::{Exact, TokenCounter};
use compaction::{masked_entry, MaskAnswer, MaskPlan};
use compaction::{Budget, Plan, Promises, Slot, Strategy, Trigger};

/// Every prompt this strategy asks for: none, it never summarizes.
pub fn prompts() -> Vec<compaction::Prompt> {
    Vec::new()
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "OpenHands ObservationMaskingCondenser at its configured default: on every step, replaces \
     each tool observation older than the newest 100 events with <MASKED>; no threshold, no model call.";

/// The placeholder OpenHands writes.
pub const MASKED: &str = "<MASKED>";

/// Parameters of `openhands-masking`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Newest events whose observations stay verbatim (`attention_window`: 100, the config's
    /// default; the class default is 5).
    pub attention_window: usize,
}

impl Default for Params {
    fn default() -> Params {
        Params { attention_window: 100 }
    }
}

/// The `openhands-masking` strategy.
#[derive(Debug, Clone)]
pub struct OpenhandsMasking {
    params: Params,
    meter: Exact,
}

impl OpenhandsMasking {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<OpenhandsMasking, ParamError> {
        if params.attention_window == 0 {
            return Err(ParamError::new("openhands-masking", "attention_window", "must be at least 1"));
        }
        Ok(OpenhandsMasking { params, meter: Exact::o200k() })
    }

    /// Indices of the observations to mask now.
    pub fn to_mask(&self, ctx: &Context) -> Vec<usize> {
        let edge = ctx.len().saturating_sub(self.params.attention_window);
        (0..edge)
            .filter(|&i| {
                let e = &ctx.entries()[i];
                e.role() == Role::Tool && !matches!(e.origin(), Origin::Masked { .. })
            })
            .collect()
    }
}

impl Strategy for OpenhandsMasking {
    fn name(&self) -> &'static str {
        "openhands-masking"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, _ctx: &Context, _budget: &Budget) -> Option<u64> {
        None
    }
    fn should_compact(&self, ctx: &Context, _budget: &Budget) -> bool {
        // Some observation outside the window is not masked yet (`to_mask` is not empty).
        let edge = ctx.len().saturating_sub(self.params.attention_window);
        ctx.entries()[..edge].iter().any(|e| e.role() == Role::Tool && !matches!(e.origin(), Origin::Masked { .. }))
    }
    fn plan(&self, ctx: &Context, _budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let mask = self.to_mask(ctx);
        if mask.is_empty() {
            return None;
        }
        let layout = (0..ctx.len())
            .map(|index| {
                if mask.binary_search(&index).is_ok() {
                    Slot::Mask { index, placeholder: MASKED.to_string() }
                } else {
                    Slot::Keep { index }
                }
            })
            .collect();
        let mut plan = Plan::deterministic(trigger, "mask", layout);
        plan.notes.insert("masked".into(), mask.len().into());
        Some(plan)
    }
    fn plan_masks(&self, ctx: &Context, budget: &Budget, trigger: Trigger, settled: usize) -> MaskAnswer {
        // Every entry before `settled` is masked already or not an observation; the window's
        // edge only moves forward.
        let edge = ctx.len().saturating_sub(self.params.attention_window);
        let masks: Vec<(usize, Entry)> = (settled.min(edge)..edge)
            .filter(|&i| {
                let e = &ctx.entries()[i];
                e.role() == Role::Tool && !matches!(e.origin(), Origin::Masked { .. })
            })
            .map(|i| (i, masked_entry(&ctx.entries()[i], MASKED)))
            .collect();
        if masks.is_empty() {
            return MaskAnswer::Nothing { settled: edge };
        }
        let mut notes = serde_json::Map::new();
        notes.insert("masked".into(), masks.len().into());
        MaskAnswer::Masks(MaskPlan {
            trigger,
            step: "mask".into(),
            masks,
            notes,
            promises: self.promises(ctx, budget),
            settled: edge,
        })
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        Promises {
            keeps_system_prompt: true,
            recent_window: self.params.attention_window.min(ctx.len()),
            documented_deviations: Vec::new(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::apply_layout;
    use compaction::message::{Message, ToolCall};

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "bash".into(), arguments: "{}".into() }
    }

    /// system, user, then `n` call/observation pairs.
    fn session(n: usize) -> Context {
        let mut m = vec![Message::system("s"), Message::user("fix the build")];
        for i in 0..n {
            m.push(Message::assistant_calls("", vec![call(&format!("c{i}"))]));
            m.push(Message::tool_result(format!("c{i}"), "bash", format!("output {i}")));
        }
        Context::from_messages(m)
    }

    #[test]
    fn observations_outside_the_newest_five_events_are_masked() {
        // The class default, 5. 2 + 10 = 12 events; the window is events 7..12
        // (`i < len - 5`), so the observations at 3 and 5 are masked, those at 7, 9 and 11 stay.
        let s = OpenhandsMasking::new(Params { attention_window: 5 }).unwrap();
        let ctx = session(5);
        assert_eq!(s.to_mask(&ctx), vec![3, 5]);
        let budget = Budget::new(1_000_000);
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = apply_layout(&s, &ctx, &budget, &plan, &[]);
        assert_eq!(out.context.get(3).unwrap().message().content, MASKED);
        assert_eq!(out.context.get(5).unwrap().message().content, MASKED);
        assert_eq!(out.context.get(7).unwrap().message().content, "output 2");
        assert_eq!(out.context.get(3).unwrap().message().tool_call_id.as_deref(), Some("c0"));
        assert_eq!(out.event.masked, 2);
        // Masked once: the next step has nothing new to mask.
        assert!(s.to_mask(&out.context).is_empty());
    }

    #[test]
    fn a_short_view_is_left_alone() {
        let s = OpenhandsMasking::new(Params { attention_window: 5 }).unwrap();
        let ctx = session(1);
        assert!(s.to_mask(&ctx).is_empty());
        assert!(s.plan(&ctx, &Budget::new(10), Trigger::Proactive).is_none());
        assert!(OpenhandsMasking::new(Params { attention_window: 0 }).is_err());
    }

    /// `ObservationMaskingCondenserConfig`'s default, 100: a view of 122 events (system, user,
    /// 60 call/observation pairs) masks only the observations before event 22, and a view of
    /// 100 events or fewer masks nothing.
    #[test]
    fn the_configured_default_keeps_the_newest_100_events() {
        let s = OpenhandsMasking::new(Params::default()).unwrap();
        assert_eq!(Params::default().attention_window, 100);
        let ctx = session(60);
        assert_eq!(ctx.len(), 122);
        let masked = s.to_mask(&ctx);
        assert_eq!(masked, (3..22).step_by(2).collect::<Vec<_>>());
        assert!(s.to_mask(&session(49)).is_empty());
        assert!(!s.should_compact(&session(49), &Budget::new(10)));
    }
}
