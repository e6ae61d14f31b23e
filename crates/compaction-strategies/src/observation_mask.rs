//! `observation-mask`: replace old tool outputs with a placeholder; never call a model.
//!
//! The baseline of JetBrains' observation-masking study (Lindenbauer et al., "The Complexity
//! Trap", 2025), which found that keeping the agent's reasoning and actions while masking all
//! but the newest tool observations matches LLM summarization at a fraction of the cost:
//!
//! - **Trigger**: the estimate (exact `o200k_base` by default) is above `threshold_ratio` of
//!   the context window (0.8).
//! - **Mask**: the newest `keep_last` tool outputs (10, as in the study) stay verbatim; every
//!   older one not masked yet has its content replaced by the placeholder
//!   (`[output of <tool> omitted: N tokens]`, N the tokens of the message it replaces). Tool
//!   calls, call ids and tool names stay, so every call keeps its result and the roles do not
//!   change. An output whose placeholder would not be smaller under the meter stays as it is
//!   (as `cut-point`'s TTL pruning does), so masking never grows the context.
//! - **Shortfall**: masking is all it does. When the masked context is still over the
//!   threshold the event reports the shortfall; when there is nothing left to mask there is no
//!   plan.
//! - **Forced** ([`Trigger::Overflow`]): masks the same way without the threshold check.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ParamError;
use crate::common::{Counter, Meter};
use compaction::context::{Context, Entry, Origin};
use compaction::message::Role;
use compaction::tokens::{TokenCounter, EXACT_MESSAGE_OVERHEAD};
use compaction::{masked_entry, MaskAnswer, MaskPlan};
use compaction::{Budget, Plan, Promises, Slot, Strategy, Trigger};

/// Every prompt this strategy asks for: none, it never summarizes.
pub fn prompts() -> Vec<compaction::Prompt> {
    Vec::new()
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Baseline (JetBrains observation masking): once the estimate (exact o200k_base by default) \
     is above 80% of the window, replaces every tool output but the newest 10 with a short placeholder; no model \
     call, nothing dropped.";

/// The default placeholder.
pub const PLACEHOLDER: &str = "[output of {tool} omitted: {tokens} tokens]";

/// Parameters of `observation-mask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Newest tool outputs kept verbatim (10 in JetBrains' observation-masking study).
    pub keep_last: usize,
    /// Text that replaces an older tool output: `{tool}` becomes the tool's name and `{tokens}`
    /// the tokens of the message it replaces, under `counter`.
    pub placeholder: String,
    /// Mask when the estimate is above this fraction of the context window.
    pub threshold_ratio: f64,
    /// Token meter: `o200k_base` or `cl100k_base` (exact), or `chars/4` (approximate).
    pub counter: Counter,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            keep_last: 10,
            placeholder: PLACEHOLDER.to_string(),
            threshold_ratio: 0.8,
            counter: Counter::O200kBase,
        }
    }
}

/// The `observation-mask` strategy.
#[derive(Debug, Clone)]
pub struct ObservationMask {
    meter: Meter,
    params: Params,
    /// The placeholder, split once at its fields.
    template: Vec<Piece>,
}

/// A piece of the placeholder template.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    /// `{tool}`.
    Tool,
    /// `{tokens}`.
    Tokens,
}

/// `template` split at its `{tool}` fields, then each part at its `{tokens}` fields.
fn pieces(template: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    for (k, part) in template.split("{tool}").enumerate() {
        if k > 0 {
            out.push(Piece::Tool);
        }
        for (j, text) in part.split("{tokens}").enumerate() {
            if j > 0 {
                out.push(Piece::Tokens);
            }
            if !text.is_empty() {
                out.push(Piece::Text(text.to_string()));
            }
        }
    }
    out
}

impl ObservationMask {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<ObservationMask, ParamError> {
        if !(params.threshold_ratio.is_finite() && params.threshold_ratio > 0.0 && params.threshold_ratio <= 1.0) {
            return Err(ParamError::new("observation-mask", "threshold_ratio", "must be in (0, 1]"));
        }
        if params.placeholder.is_empty() {
            return Err(ParamError::new("observation-mask", "placeholder", "must not be empty"));
        }
        Ok(ObservationMask { meter: Meter::new(params.counter), template: pieces(&params.placeholder), params })
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Index of the newest tool output that is not among the `keep_last` newest, if any:
    /// everything after it stays verbatim.
    fn newest_maskable(&self, ctx: &Context) -> Option<usize> {
        ctx.entries()
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, e)| e.role() == Role::Tool)
            .nth(self.params.keep_last)
            .map(|(i, _)| i)
    }

    /// Whether `placeholder` in place of `e`'s content makes the message smaller under the
    /// meter: a short output stays, so masking never grows the context.
    fn shrinks(&self, e: &Entry, placeholder: &str) -> bool {
        let counter = self.meter.counter();
        let units = e.units(counter);
        // An exact count never has more tokens than bytes: a large output shrinks for sure,
        // and only a small one needs its placeholder counted.
        if let Meter::Exact(_) = self.meter {
            if e.message().tool_calls.is_empty() && units > EXACT_MESSAGE_OVERHEAD + placeholder.len() as u64 {
                return true;
            }
        }
        let m = e.message().with_content(placeholder);
        counter.message_units(&m) < units
    }

    fn placeholder_for(&self, e: &Entry) -> String {
        let tool = e.message().name.as_deref().unwrap_or("tool");
        let tokens = e.tokens(self.meter.counter());
        // The two replacements, from the template split once.
        let mut out = String::with_capacity(self.params.placeholder.len() + tool.len() + 8);
        for piece in &self.template {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Tool => out.push_str(tool),
                Piece::Tokens => {
                    use std::fmt::Write as _;
                    let _ = write!(out, "{tokens}");
                }
            }
        }
        // A `{tokens}` the tool's name brings (in it, or across its edges) is one the second
        // replacement would have replaced: then do both.
        if out.contains('{') && out.contains("{tokens}") {
            return self.params.placeholder.replace("{tool}", tool).replace("{tokens}", &tokens.to_string());
        }
        out
    }
}

impl Strategy for ObservationMask {
    fn name(&self) -> &'static str {
        "observation-mask"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        self.meter.counter()
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        Some((budget.context_window as f64 * self.params.threshold_ratio).floor() as u64)
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        self.threshold(ctx, budget)?;
        let last = self.newest_maskable(ctx)?;
        let mut masked = 0;
        let layout: Vec<Slot> = ctx
            .entries()
            .iter()
            .enumerate()
            .map(|(index, e)| {
                let maskable = index <= last && e.role() == Role::Tool && !matches!(e.origin(), Origin::Masked { .. });
                match maskable.then(|| self.placeholder_for(e)).filter(|p| self.shrinks(e, p)) {
                    Some(placeholder) => {
                        masked += 1;
                        Slot::Mask { index, placeholder }
                    }
                    None => Slot::Keep { index },
                }
            })
            .collect();
        if masked == 0 {
            return None;
        }
        let mut plan = Plan::deterministic(trigger, "mask", layout);
        plan.notes.insert("masked".into(), masked.into());
        Some(plan)
    }
    fn plan_masks(&self, ctx: &Context, budget: &Budget, trigger: Trigger, settled: usize) -> MaskAnswer {
        // No threshold: no masking, whatever the trigger (as `plan`).
        if self.threshold(ctx, budget).is_none() {
            return MaskAnswer::Nothing { settled };
        }
        let Some(last) = self.newest_maskable(ctx) else { return MaskAnswer::Nothing { settled } };
        // Every entry before `settled` is masked already, not a tool output, or an output its
        // placeholder would not shrink; the newest maskable output only moves forward.
        let masks: Vec<(usize, Entry)> = (settled.min(last + 1)..=last)
            .filter_map(|index| {
                let e = &ctx.entries()[index];
                if e.role() != Role::Tool || matches!(e.origin(), Origin::Masked { .. }) {
                    return None;
                }
                // Metered here, so the context's totals stay known without counting it again.
                let masked = masked_entry(e, self.placeholder_for(e));
                let counter = self.meter.counter();
                (masked.units(counter) < e.units(counter)).then_some((index, masked))
            })
            .collect();
        if masks.is_empty() {
            return MaskAnswer::Nothing { settled: last + 1 };
        }
        let mut notes = serde_json::Map::new();
        notes.insert("masked".into(), masks.len().into());
        MaskAnswer::Masks(MaskPlan {
            trigger,
            step: "mask".into(),
            masks,
            notes,
            promises: Promises {
                keeps_system_prompt: true,
                recent_window: ctx.len() - last - 1,
                documented_deviations: Vec::new(),
            },
            settled: last + 1,
        })
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        let window = self.newest_maskable(ctx).map_or(ctx.len(), |i| ctx.len() - i - 1);
        Promises { keeps_system_prompt: true, recent_window: window, documented_deviations: Vec::new() }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::StrategyConfig;
    use compaction::message::{Message, ToolCall};
    use compaction::{check_compaction, check_context};

    fn approx(f: impl FnOnce(&mut Params)) -> ObservationMask {
        let mut p = Params { counter: Counter::CharsOver4, ..Params::default() };
        f(&mut p);
        ObservationMask::new(p).unwrap()
    }

    /// System, a task, then `n` calls whose outputs cost 4 + `k` tokens each under chars/4.
    fn run(n: usize, k: usize) -> Context {
        let mut m = vec![Message::system("s"), Message::user("fix the bug")];
        for i in 0..n {
            let id = format!("c{i}");
            m.push(Message::assistant_calls(
                format!("step {i}"),
                vec![ToolCall { id: id.clone(), name: "bash".into(), arguments: "{}".into() }],
            ));
            m.push(Message::tool_result(id, "bash", "o".repeat(4 * k - 2)));
        }
        Context::from_messages(m)
    }

    fn tools(ctx: &Context) -> Vec<usize> {
        ctx.entries().iter().enumerate().filter(|(_, e)| e.role() == Role::Tool).map(|(i, _)| i).collect()
    }

    #[test]
    fn the_placeholder_is_the_template_with_tool_and_tokens_replaced() {
        for template in [PLACEHOLDER, "{tool}{tool} {tokens}{tokens}", "plain", "{tokens} by {tool}", "{to{tool}ns}"] {
            for name in ["bash", "a{tokens}b", "{tool}", "ke"] {
                let s = approx(|p| p.placeholder = template.to_string());
                let e = Entry::recorded(0, Message::tool_result("c", name, "o".repeat(40)));
                let tokens = e.tokens(s.meter.counter()).to_string();
                let expected = template.replace("{tool}", name).replace("{tokens}", &tokens);
                assert_eq!(s.placeholder_for(&e), expected, "{template:?} with {name:?}");
            }
        }
    }

    #[test]
    fn masks_all_but_the_newest_outputs() {
        let s = approx(|p| p.keep_last = 3);
        let ctx = run(8, 100);
        let budget = Budget::new(600);
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = s.apply(&ctx, &budget, &plan, &[]);
        let t = tools(&ctx);
        for &i in &t[..5] {
            assert_eq!(out.context.entries()[i].message().content, "[output of bash omitted: 104 tokens]");
            assert_eq!(out.context.entries()[i].origin(), &Origin::Masked { index: i });
        }
        for &i in &t[5..] {
            assert_eq!(out.context.entries()[i].message(), ctx.entries()[i].message());
        }
        assert_eq!(out.event.masked, 5);
        assert_eq!(out.event.removed, 0);
        assert_eq!(out.context.len(), ctx.len());
        assert!(out.event.shortfall.is_none(), "{:?}", out.event);
        assert!(check_context(&out.context).is_empty());
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
        assert_eq!(s.promises(&ctx, &budget).recent_window, ctx.len() - t[4] - 1);
    }

    #[test]
    fn reports_the_shortfall_when_masking_is_not_enough() {
        let s = approx(|p| p.keep_last = 3);
        let ctx = run(8, 100);
        let budget = Budget::new(300);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = s.apply(&ctx, &budget, &plan, &[]);
        let threshold = 240;
        assert_eq!(out.event.shortfall, Some(out.event.estimate_after - threshold));
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
        // Already masked: nothing more to do.
        assert!(s.plan(&out.context, &budget, Trigger::Proactive).is_none());
    }

    #[test]
    fn below_threshold_or_few_outputs_is_a_noop() {
        let s = approx(|_| {});
        let ctx = run(8, 100);
        assert!(!s.should_compact(&ctx, &Budget::new(100_000)));
        assert!(s.plan(&ctx, &Budget::new(100_000), Trigger::Proactive).is_none());
        // Over, but only 8 outputs and 10 are kept.
        assert!(s.should_compact(&ctx, &Budget::new(100)));
        assert!(s.plan(&ctx, &Budget::new(100), Trigger::Proactive).is_none());
        assert_eq!(s.promises(&ctx, &Budget::new(100)).recent_window, ctx.len());
        // Forced: masks without the threshold check.
        let s = approx(|p| p.keep_last = 2);
        assert!(s.plan(&ctx, &Budget::new(100_000), Trigger::Overflow).is_some());
    }

    /// Issue 15, item 10: a placeholder replaces an output only when it is smaller, the rule
    /// `cut-point` applies to its TTL replacements (002, "TTL pruning ... hides blocks with
    /// replacement text"), so masking never grows the context.
    #[test]
    fn masking_never_grows_the_context() {
        let s = approx(|p| p.keep_last = 0);
        let mut m = vec![Message::system("s"), Message::user("fix the bug")];
        for (i, output) in ["ok".to_string(), "o".repeat(400)].into_iter().enumerate() {
            let id = format!("c{i}");
            m.push(Message::assistant_calls(
                "step",
                vec![ToolCall { id: id.clone(), name: "bash".into(), arguments: "{}".into() }],
            ));
            m.push(Message::tool_result(id, "bash", output));
        }
        let ctx = Context::from_messages(m);
        let budget = Budget::new(10);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.layout[3], Slot::Keep { index: 3 }, "a 2-character output is shorter than its placeholder");
        assert!(matches!(plan.layout[5], Slot::Mask { index: 5, .. }));
        let out = s.apply(&ctx, &budget, &plan, &[]);
        assert_eq!(out.event.masked, 1);
        let meter = s.estimator();
        for (a, b) in ctx.entries().iter().zip(out.context.entries()) {
            assert!(b.units(meter) <= a.units(meter), "{:?} grew", b.message());
        }
        assert!(s.estimate(&out.context) < s.estimate(&ctx));
        // Only short outputs left: nothing to do.
        let short = Context::from_messages(ctx.to_messages()[..4].to_vec());
        assert!(s.plan(&short, &budget, Trigger::Overflow).is_none());
    }

    #[test]
    fn params_defaults_and_placeholder() {
        let p: Params = serde_json::from_str("{}").unwrap();
        assert_eq!(p.keep_last, 10);
        assert_eq!(p.threshold_ratio, 0.8);
        assert_eq!(p.counter, Counter::O200kBase);
        assert!(serde_json::from_str::<Params>(r#"{"keep": 3}"#).is_err());
        assert!(ObservationMask::new(Params { threshold_ratio: 2.0, ..Params::default() }).is_err());
        let s = approx(|p| {
            p.keep_last = 0;
            p.placeholder = "<{tool} elided>".into();
        });
        let ctx = run(1, 10);
        let plan = s.plan(&ctx, &Budget::new(10), Trigger::Proactive).unwrap();
        assert_eq!(plan.layout[3], Slot::Mask { index: 3, placeholder: "<bash elided>".into() });
        // Default meter: exact o200k.
        let cfg = StrategyConfig::default_for("observation-mask").unwrap().build().unwrap();
        assert_eq!(cfg.estimator().name(), "o200k_base");
        assert_eq!(cfg.threshold(&ctx, &Budget::new(10_000)), Some(8_000));
    }
}
