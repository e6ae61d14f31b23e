//! `anthropic-compaction`: the Anthropic Messages API's server-side compaction
//! (`compact_20260112`).
//!
//! Source: the API documentation, "Compaction"
//! (<https://platform.claude.com/docs/en/build-with-claude/compaction>, read 2026-11-28 in its
//! stored Spanish rendering, `docs/es/...`, and Amazon Bedrock's copy,
//! `bedrock/latest/userguide/claude-messages-compaction`). Read there: the beta header
//! `compact-2026-01-12`, the `compact_20260112` edit in `context_management.edits`, the summary
//! returned as a `compaction` block, and the API dropping every message block before that block
//! on later requests. The trigger's default and floor below are PRODUCTION.md's figures; the
//! stored excerpts of the page do not show them, so they are not confirmed here.
//!
//! Departure: the Bedrock copy names a second, newer mechanism (`compact-2026-09-04`, a top-level
//! `compaction` parameter: an explicit compaction request and signed-block adoption). The module
//! models the threshold-triggered `compact_20260112` edit only; the newer one is called by the
//! client when it chooses, which a replay of recorded calls has no rule for.
//!
//! - **Trigger**: input tokens above `trigger`, 150,000 by default, at least 50,000. Departure:
//!   without an explicit `trigger` the default is scaled to the replay's window: 150,000 of
//!   Claude's 200,000 tokens = 75% of it, and the 50,000 floor = 25% of it (an absolute 150,000
//!   would never fire at the 32k and 128k windows the experiments use). An explicit `trigger`
//!   below 50,000 is rejected, as the API rejects it.
//! - **Compaction**: the API samples a summary of the whole input (an extra sampling iteration
//!   whose tokens are not in the top-level usage; the replay counts them as summarizer tokens,
//!   which is what summing the iterations gives), returns it as a compaction block, and on
//!   every later request drops everything before that block. So the new context is the system
//!   prompt and the summary, nothing else: the summary covers the previous summary too.
//! - **Placement**: the compaction block opens the history; here it is a user-role message (the
//!   first turn the Messages API accepts after the system prompt) holding the summary alone.
//! - **Failure**: a failed summary iteration fails the request; the context stays unchanged.
//!   The compaction runs inside a request, so a request already over the window cannot be
//!   compacted: the strategy does not react to [`Trigger::Overflow`] (the request overflows,
//!   as the API would reject it).
//!   A user message recorded right after a compaction then follows the summary
//!   ([`compaction::ViolationKind::RoleAlternation`], documented).
//! - **Output cap**: `summary_max_tokens` (4,096), a benchmark choice: the documentation
//!   states no cap for the summary iteration.
//!
//! The prompt (`anthropic_compaction.md`) follows the documentation's default summarization
//! instructions in the project's own words.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{self, ParamError};
use compaction::context::Context;
use compaction::message::Role;
use compaction::tokens::{Exact, TokenCounter};
use compaction::{Budget, Fallback, Plan, Promises, Prompt, Slot, Strategy, SummaryRequest, Trigger};

/// The summary prompt whose answer replaces everything before it (`anthropic_compaction/anthropic_compaction.md`, beside this module).
pub fn prompt() -> Prompt {
    Prompt::new("anthropic_compaction", include_str!("anthropic_compaction/anthropic_compaction.md"))
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Anthropic server-side compaction compact_20260112: once the input passes the trigger \
     (150k of a 200k window, i.e. 75%; at least 50k), one summary of everything replaces all history before it; \
     the summary iteration is billed.";

/// The API's default trigger, in input tokens.
pub const TRIGGER_TOKENS: u64 = 150_000;
/// The smallest trigger the API accepts.
pub const MIN_TRIGGER_TOKENS: u64 = 50_000;
/// Claude's context window, in tokens.
pub const CLAUDE_WINDOW: u64 = 200_000;

/// Parameters of `anthropic-compaction`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Input tokens above which the API compacts (unset: 150,000 of a 200,000-token window,
    /// scaled to the replay's window); at least 50,000 when set.
    pub trigger: Option<u64>,
    /// Output cap of the summary iteration.
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params { trigger: None, summary_max_tokens: 4_096 }
    }
}

/// The `anthropic-compaction` strategy.
#[derive(Debug, Clone)]
pub struct AnthropicCompaction {
    params: Params,
    meter: Exact,
}

impl AnthropicCompaction {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<AnthropicCompaction, ParamError> {
        if params.trigger.is_some_and(|t| t < MIN_TRIGGER_TOKENS) {
            return Err(ParamError::new("anthropic-compaction", "trigger", "must be at least 50,000"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new("anthropic-compaction", "summary_max_tokens", "must be at least 1"));
        }
        Ok(AnthropicCompaction { params, meter: Exact::o200k() })
    }

    /// The trigger, in input tokens, for `budget`.
    pub fn trigger_tokens(&self, budget: &Budget) -> u64 {
        self.params.trigger.unwrap_or(budget.context_window.saturating_mul(TRIGGER_TOKENS) / CLAUDE_WINDOW)
    }
}

impl Strategy for AnthropicCompaction {
    fn name(&self) -> &'static str {
        "anthropic-compaction"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        Some(self.trigger_tokens(budget))
    }
    fn reacts_to(&self, _trigger: Trigger) -> bool {
        false
    }
    fn plan(&self, ctx: &Context, _budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let start = common::body_start(ctx);
        let span: Vec<usize> = (start..ctx.len()).collect();
        // A context that is only its summary has nothing new to compact.
        if span.is_empty() || (span.len() == 1 && ctx.entries()[start].origin().is_summary()) {
            return None;
        }
        let mut layout: Vec<Slot> = common::keep(0..start).collect();
        layout.push(Slot::Summary { request: 0, role: Role::User, prefix: String::new(), suffix: String::new() });
        let request = SummaryRequest::new(span, prompt(), self.params.summary_max_tokens, common::next_round(ctx));
        Some(Plan {
            trigger,
            layout,
            requests: vec![request],
            fallback: Fallback::Unchanged,
            step: "compact".into(),
            notes: serde_json::Map::new(),
        })
    }
    fn promises(&self, _ctx: &Context, _budget: &Budget) -> Promises {
        // The summary is a user turn: a user message recorded after a compaction follows it.
        Promises {
            keeps_system_prompt: true,
            recent_window: 0,
            documented_deviations: vec![compaction::ViolationKind::RoleAlternation],
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::message::Message;
    use compaction::{apply_layout, SummaryFailure};

    fn ctx() -> Context {
        Context::from_messages(vec![
            Message::system("sys"),
            Message::user("task ".repeat(100)),
            Message::assistant("working ".repeat(100)),
            Message::user("next"),
        ])
    }

    #[test]
    fn trigger_is_150k_of_200k_scaled_with_the_50k_floor() {
        let s = AnthropicCompaction::new(Params::default()).unwrap();
        assert_eq!(s.trigger_tokens(&Budget::new(200_000)), 150_000);
        assert_eq!(s.trigger_tokens(&Budget::new(128_000)), 96_000);
        assert_eq!(s.trigger_tokens(&Budget::new(32_000)), 24_000);
        assert!(AnthropicCompaction::new(Params { trigger: Some(49_999), ..Params::default() }).is_err());
        let s = AnthropicCompaction::new(Params { trigger: Some(50_000), ..Params::default() }).unwrap();
        assert_eq!(s.trigger_tokens(&Budget::new(128_000)), 50_000);
    }

    #[test]
    fn the_summary_replaces_everything_after_the_system_prompt() {
        let s = AnthropicCompaction::new(Params::default()).unwrap();
        let c = ctx();
        let budget = Budget::new(200);
        assert!(s.should_compact(&c, &budget));
        let plan = s.plan(&c, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.requests[0].span, vec![1, 2, 3]);
        let out = apply_layout(&s, &c, &budget, &plan, &[Ok("S".into())]);
        assert_eq!(out.context.len(), 2);
        assert_eq!(out.context.get(1).unwrap().role(), Role::User);
        assert_eq!(out.context.get(1).unwrap().message().content, "S");
        // The next compaction folds the summary in.
        let mut longer = out.context.clone();
        longer.push(compaction::context::Entry::recorded(4, Message::user("more ".repeat(300))));
        let second = s.plan(&longer, &budget, Trigger::Proactive).unwrap();
        assert_eq!(second.requests[0].span, vec![1, 2]);
        assert_eq!(second.requests[0].round, 2);
        // A failed summary leaves the request as it was.
        let failed = apply_layout(&s, &c, &budget, &plan, &[Err(SummaryFailure { reason: "x".into() })]);
        assert_eq!(failed.context.len(), c.len());
        assert!(!s.reacts_to(Trigger::Overflow));
    }
}
