//! `codex`: the Codex CLI's local ("inline") auto-compaction.
//!
//! Source: openai/codex `codex-rs/core/src/compact.rs` at
//! e06dd0e5d5694c24968bf49b62466cdedae04aaa (`run_inline_auto_compact_task`,
//! `run_compact_task_inner`, `collect_user_messages`, `build_compacted_history`,
//! `COMPACT_USER_MESSAGE_MAX_TOKENS = 20_000`, `should_use_remote_compact_task`),
//! `codex-rs/core/templates/compact/prompt.md` (the handoff prompt) and `summary_prefix.md` (the
//! prefix of the summary message); the trigger from `codex-rs/protocol/src/openai_models.rs`
//! `auto_compact_token_limit()`: `(window * 9) / 10`. Read with the code search.
//!
//! **The local path, not the remote one.** With an OpenAI provider Codex compacts remotely
//! (`should_use_remote_compact_task`: `provider.is_openai()`, the `/responses/compact`
//! endpoint), whose summary and replacement history OpenAI's server produces and no replay can
//! reproduce. This module models the local path Codex takes with every other provider.
//!
//! - **Trigger**: the request's tokens (the model's reported usage; exact `o200k_base` here)
//!   above `(window x 9) / 10`.
//! - **Summary turn**: one summarization request over the whole history after the initial
//!   context, earlier summary included, with the handoff prompt (`codex_handoff.md`: current
//!   progress and key decisions; important context, constraints and user preferences; what
//!   remains, as clear next steps; critical data and references).
//! - **New history**: the initial context (the system prompt), then the real user messages
//!   (not earlier summaries, not tool output), chosen newest first while their approximate size
//!   (`approx_token_count`: UTF-8 bytes / 4) fits 20,000 tokens; the one that crosses is cut in
//!   the middle to the remaining budget with a `…N tokens truncated…` marker, and older ones are
//!   dropped; in chronological order. Then one user message: the handoff prefix (another model
//!   started the work; build on its summary) and the summary. No assistant message, tool call
//!   or tool output is kept.
//! - **Summary request too long**: the summary turn is sent with the whole history and no room
//!   reserved for its output; only when the provider answers `ContextWindowExceeded` does Codex
//!   remove the oldest history item and send again, until it fits. Here the plan does the same
//!   before asking: the oldest entries of the span go while the span alone is over the window
//!   (`notes.dropped_for_fit`); each of them stands for one refused summary request
//!   (`notes.summary_requests_refused`). A span that cannot fit even with one entry leaves no
//!   plan (Codex returns the error).
//! - **Failure**: a failed summary fails the compaction task; the history is unchanged.
//! - **Forced** ([`Trigger::Overflow`]): the same compaction (Codex compacts when the model
//!   reports the context window exceeded).
//!
//! Departures, each kept for a reason: the kept user messages and the summary are consecutive
//! user messages, as Codex builds them: [`ViolationKind::RoleAlternation`] is a documented
//! deviation. The summary's output cap (`summary_max_tokens`, 4,096) is a benchmark choice;
//! Codex sets none. The refused summary requests are counted in the notes, not billed: the
//! replay's summarizer is asked once, with the span that fits.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{self, ParamError};
use compaction::context::{Context, Origin};
use compaction::message::Role;
use compaction::tokens::{Exact, TokenCounter};
use compaction::ViolationKind;
use compaction::{Budget, Plan, Promises, Prompt, Slot, Strategy, SummaryRequest, Trigger};

/// The handoff summary prompt over the whole history (`codex/codex_handoff.md`, beside this module).
pub fn prompt() -> Prompt {
    Prompt::new("codex_handoff", include_str!("codex/codex_handoff.md"))
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Codex CLI local compaction: at 90% of the window, one handoff summary of the whole \
     history; the new history is the system prompt, the newest user messages up to 20,000 tokens, and one user \
     message with the handoff prefix and the summary; no tool calls kept; drops the oldest items when the summary \
     request would not fit.";

/// `COMPACT_USER_MESSAGE_MAX_TOKENS`.
pub const USER_MESSAGE_MAX_TOKENS: u64 = 20_000;

/// The summary message's prefix (`summary_prefix.md`, in the project's words).
pub const SUMMARY_PREFIX: &str = "Another language model started on this task and wrote a summary of its work so far. \
     You can also see the state of the tools it used. Build on the work already done rather than repeating it; \
     here is the summary it produced:\n";

/// Parameters of `codex`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Compact when the request is above this fraction of the window (`(window * 9) / 10`).
    pub trigger_ratio: f64,
    /// Approximate tokens of recent user messages kept (`COMPACT_USER_MESSAGE_MAX_TOKENS`).
    pub user_message_max_tokens: u64,
    /// Output cap of the summary turn.
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params { trigger_ratio: 0.9, user_message_max_tokens: USER_MESSAGE_MAX_TOKENS, summary_max_tokens: 4_096 }
    }
}

/// The `codex` strategy.
#[derive(Debug, Clone)]
pub struct Codex {
    params: Params,
    meter: Exact,
}

/// Codex's `approx_token_count`: UTF-8 bytes / 4, rounded up.
pub fn approx_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Cut `text` in the middle to about `tokens` approximate tokens, with Codex's marker.
pub fn truncate_middle(text: &str, tokens: u64) -> String {
    let total = approx_tokens(text);
    if total <= tokens {
        return text.to_string();
    }
    let keep_bytes = (tokens * 4) as usize;
    let mut head = keep_bytes / 2;
    while head > 0 && !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (keep_bytes - keep_bytes / 2);
    while tail < text.len() && !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}…{} tokens truncated…{}", &text[..head], total - tokens, &text[tail..])
}

/// One kept user message: its index, and its text when truncated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeptUser {
    pub index: usize,
    pub truncated: Option<String>,
}

impl Codex {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<Codex, ParamError> {
        if !(params.trigger_ratio.is_finite() && params.trigger_ratio > 0.0 && params.trigger_ratio <= 1.0) {
            return Err(ParamError::new("codex", "trigger_ratio", "must be in (0, 1]"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new("codex", "summary_max_tokens", "must be at least 1"));
        }
        Ok(Codex { params, meter: Exact::o200k() })
    }

    /// `build_compacted_history`'s selection: real user messages, newest first, within the
    /// budget; returned oldest first.
    pub(crate) fn kept_users(&self, ctx: &Context) -> Vec<KeptUser> {
        let mut remaining = self.params.user_message_max_tokens;
        let mut out = Vec::new();
        for i in common::user_turns(ctx).into_iter().rev() {
            if remaining == 0 {
                break;
            }
            let text = &ctx.entries()[i].message().content;
            let t = approx_tokens(text);
            if t <= remaining {
                remaining -= t;
                out.push(KeptUser { index: i, truncated: None });
            } else {
                out.push(KeptUser { index: i, truncated: Some(truncate_middle(text, remaining)) });
                break;
            }
        }
        out.reverse();
        out
    }
}

impl Strategy for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        if self.params.trigger_ratio == 0.9 {
            return Some(budget.context_window * 9 / 10);
        }
        Some(common::fraction_of(budget.context_window, self.params.trigger_ratio))
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let start = common::body_start(ctx);
        if start >= ctx.len() {
            return None;
        }
        // The span's size as its oldest items are dropped one at a time, from a running total
        // (one pass, not a recount per dropped item). Nothing is reserved for the output: only a context-window error drops an item.
        let entries = &ctx.entries()[start..];
        let mut total: u64 = entries.iter().map(|e| e.tokens(&self.meter)).sum();
        let mut dropped = 0usize;
        while total > budget.context_window {
            if entries.len() - dropped <= 1 {
                return None;
            }
            total -= entries[dropped].tokens(&self.meter);
            dropped += 1;
        }
        let span: Vec<usize> = (start + dropped..ctx.len()).collect();
        debug_assert!(common::span_tokens(ctx, &span, &self.meter) <= budget.context_window);
        let mut layout: Vec<Slot> = common::keep(0..start).collect();
        for k in self.kept_users(ctx) {
            layout.push(match k.truncated {
                None => Slot::Keep { index: k.index },
                Some(text) => Slot::Mask { index: k.index, placeholder: text },
            });
        }
        layout.push(Slot::Summary {
            request: 0,
            role: Role::User,
            prefix: SUMMARY_PREFIX.to_string(),
            suffix: String::new(),
        });
        let request = SummaryRequest::new(span, prompt(), self.params.summary_max_tokens, common::next_round(ctx));
        let mut plan = common::summary_plan(trigger, layout, request, "dropped_for_fit", dropped);
        plan.notes.insert("summary_requests_refused".into(), dropped.into());
        Some(plan)
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        // The last message is kept verbatim when it is a user message that fits.
        let _ = ctx.entries().last().map(|e| matches!(e.origin(), Origin::Recorded { .. }));
        Promises {
            keeps_system_prompt: true,
            recent_window: 0,
            documented_deviations: vec![ViolationKind::RoleAlternation],
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::message::{Message, ToolCall};
    use compaction::{apply_layout, SummaryFailure};

    fn session(first_user: &str) -> Context {
        Context::from_messages(vec![
            Message::system("instructions"),
            Message::user(first_user),
            Message::assistant_calls(
                "",
                vec![ToolCall { id: "a".into(), name: "shell".into(), arguments: "{}".into() }],
            ),
            Message::tool_result("a", "shell", "out ".repeat(50)),
            Message::assistant("done"),
            Message::user("now add tests"),
        ])
    }

    #[test]
    fn trigger_is_nine_tenths_of_the_window() {
        let s = Codex::new(Params::default()).unwrap();
        assert_eq!(s.threshold(&Context::new(), &Budget::new(128_000)), Some(115_200));
        assert_eq!(s.threshold(&Context::new(), &Budget::new(32_001)), Some(28_800));
    }

    #[test]
    fn keeps_user_messages_then_the_prefixed_summary_and_no_tool_calls() {
        let s = Codex::new(Params::default()).unwrap();
        let ctx = session("build a parser");
        let budget = Budget::new(10_000);
        let plan = s.plan(&ctx, &budget, Trigger::Overflow).unwrap();
        assert_eq!(plan.requests[0].span, vec![1, 2, 3, 4, 5]);
        let out = apply_layout(&s, &ctx, &budget, &plan, &[Ok("SUM".into())]);
        let texts: Vec<&str> = out.context.messages().map(|m| m.content.as_str()).collect();
        assert_eq!(texts[..3], ["instructions", "build a parser", "now add tests"]);
        assert_eq!(texts[3], format!("{SUMMARY_PREFIX}SUM"));
        assert!(out.context.messages().all(|m| m.tool_calls.is_empty() && m.role != Role::Tool));
        assert_eq!(out.context.get(3).unwrap().role(), Role::User);
        let failed = apply_layout(&s, &ctx, &budget, &plan, &[Err(SummaryFailure { reason: "x".into() })]);
        assert_eq!(failed.context.len(), ctx.len());
    }

    #[test]
    fn the_user_message_crossing_20k_is_cut_in_the_middle_and_older_ones_dropped() {
        let s = Codex::new(Params::default()).unwrap();
        // 100,000 bytes = 25,000 approximate tokens; "now add tests" is 4 (13 bytes).
        let ctx = session(&"x".repeat(100_000));
        let kept = s.kept_users(&ctx);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[1], KeptUser { index: 5, truncated: None });
        let cut = kept[0].truncated.as_ref().unwrap();
        assert!(cut.contains("…5004 tokens truncated…"), "{}", &cut[39_990..40_030]);
        assert_eq!(approx_tokens(&cut.replace("…5004 tokens truncated…", "")), 19_996);
    }

    /// `run_compact_task_inner`: the summary turn goes out with the whole history and nothing
    /// reserved for its output; each `ContextWindowExceeded` removes the oldest item and the
    /// turn is sent again.
    #[test]
    fn a_summary_request_over_the_window_drops_the_oldest_items() {
        let s = Codex::new(Params { summary_max_tokens: 100, ..Params::default() }).unwrap();
        let ctx = session("build a parser");
        let all: Vec<usize> = (1..ctx.len()).collect();
        let whole = common::span_tokens(&ctx, &all, &Exact::o200k());
        // A window the size of the span: it fits as it is, no room reserved for the output.
        let plan = s.plan(&ctx, &Budget::new(whole), Trigger::Overflow).unwrap();
        assert_eq!(plan.notes["dropped_for_fit"], 0);
        assert_eq!(plan.requests[0].span, all);
        // One token less: the provider refuses, the oldest item goes, and so on until it fits.
        let plan = s.plan(&ctx, &Budget::new(whole - 1), Trigger::Overflow).unwrap();
        let dropped = plan.notes["dropped_for_fit"].as_u64().unwrap();
        assert!(dropped >= 1, "dropped {dropped}");
        assert_eq!(plan.notes["summary_requests_refused"].as_u64(), Some(dropped));
        assert_eq!(plan.requests[0].span[0], 1 + dropped as usize);
        assert_eq!(*plan.requests[0].span.last().unwrap(), 5);
        let kept = common::span_tokens(&ctx, &plan.requests[0].span, &Exact::o200k());
        let one_more = kept + ctx.entries()[plan.requests[0].span[0] - 1].tokens(&Exact::o200k());
        assert!(kept < whole && one_more > whole - 1);
        assert_eq!(approx_tokens("abcd"), 1);
        assert_eq!(approx_tokens("abcde"), 2);
    }
}
