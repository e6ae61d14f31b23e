//! `anthropic-clear-tool-uses`: the Anthropic Messages API's context editing strategy
//! `clear_tool_uses_20250919`, applied server-side to each request.
//!
//! Source: the API documentation, "Context editing"
//! (<https://platform.claude.com/docs/en/build-with-claude/context-editing>, read
//! 2026-11-27), and its SDK models (anthropics/anthropic-sdk `BetaClearToolUses20250919Edit`:
//! `trigger`, `keep`, `clear_at_least`, `exclude_tools`, `clear_tool_inputs`); LangChain's
//! `ClearToolUsesEdit`, which "mirrors Anthropic's `clear_tool_uses_20250919` behavior"
//! (langchain `agents/middleware/context_editing`), states the same defaults in code:
//! `trigger = 100000`, `keep = 3`, `clear_at_least = 0`, `clear_tool_inputs = False`,
//! placeholder `"[cleared]"`. **verify** of PRODUCTION.md (`keep` 3): read there, confirmed.
//!
//! - **Server-side, per request**: "context editing is applied server-side before the prompt
//!   reaches Claude; your client application maintains the full, unmodified conversation
//!   history". So the replay keeps the full history and every request is the edited view of
//!   it ([`Profile::rebuilds_from_history`](compaction::Profile::rebuilds_from_history)): the trigger is tested on the unedited input on
//!   every request, and once past it (the history only grows) every later request is edited,
//!   the cleared boundary moving forward with each new tool use. Each new clearing changes the
//!   request from the first newly cleared result on, which the prefix-cache metering charges,
//!   as the documentation warns ("clearing invalidates the cached prompt prefix").
//! - **Trigger**: the input passes `trigger` tokens (100,000 by default, on Claude's 200,000-token
//!   window). Departure: without an explicit `trigger` the default is scaled to the replay's
//!   window, 100,000 / 200,000 = 50% of it, so that a 32k replay clears at 16k as a 200k model
//!   would at 100k (an absolute 100,000 would never fire below a 100k window).
//! - **Clear**: every tool result older than the newest `keep` tool uses is replaced by the
//!   placeholder, oldest first, except results of the tools named in `exclude_tools`
//!   (comma-separated here). Calls, ids and names stay.
//! - **`clear_at_least`**: when set, a request's clearing happens only if it frees at least that
//!   many tokens; otherwise that request goes unedited.
//! - **`clear_tool_inputs`**: the cleared calls' arguments are emptied too (`{}`); the
//!   assistant message is then a new message ([`Inserted::Other`]) carrying the same text and
//!   call ids.
//! - **Forced** ([`Trigger::Overflow`]): clears the same way without the threshold check. When
//!   nothing is left to clear there is no plan, and the request overflows as the API's would.
//!
//! What the documentation leaves open, and the choice made here: (1) whether `keep` counts tool
//!   uses (calls) or tool results: here results, one per call, so a response with parallel
//!   calls keeps as many results as `keep` says; (2) whether the trigger's input count includes
//!   the tool definitions and system prompt: here the whole request (system prompt and
//!   messages; the recordings carry no tool definitions); (3) whether `clear_at_least` is
//!   measured before or after the placeholder is written: here the tokens freed net of the
//!   placeholder; (4) the placeholder's exact text: LangChain's mirror writes `[cleared]`, used
//!   here; (5) whether a request under the trigger after an earlier clearing sees the earlier
//!   clearing again: here no (each request is edited from the unedited history alone; the
//!   history only grows, so once over the trigger it stays over).
//!
//! What the replay then measures, as the API behaves: clearing tool results is this edit's
//! only move. When what it never clears (the system prompt, user and assistant text, tool
//! calls, the newest `keep` tool uses) outgrows the window, the request is over it and the API
//! answers with a context-length error; Anthropic pairs the edit with server-side compaction
//! (`anthropic-compaction`) for that case. Under `overflow = "fail"` the conversation ends
//! there. This is the design's behaviour, not a replay artefact.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ParamError;
use compaction::context::{Context, Inserted, Origin};
use compaction::message::Role;
use compaction::tokens::{Exact, TokenCounter};
use compaction::ViolationKind;
use compaction::{masked_entry, MaskAnswer, MaskPlan, Profile};
use compaction::{Budget, Plan, Promises, Slot, Strategy, Trigger};

/// Every prompt this strategy asks for: none, it never summarizes.
pub fn prompts() -> Vec<compaction::Prompt> {
    Vec::new()
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Anthropic context editing clear_tool_uses_20250919, server-side: the client keeps the full \
     history; every request whose unedited input passes the trigger (100k of a 200k window, i.e. 50%) is sent with \
     every tool result but the newest 3 tool uses replaced by [cleared]; optional clear_at_least, exclude_tools, \
     clear_tool_inputs; no model call.";

/// The placeholder text of a cleared result.
pub const PLACEHOLDER: &str = "[cleared]";
/// The documented default trigger and the window it is stated for.
pub const TRIGGER_TOKENS: u64 = 100_000;
/// Claude's context window, in tokens.
pub const CLAUDE_WINDOW: u64 = 200_000;

/// Parameters of `anthropic-clear-tool-uses`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Input tokens above which results are cleared (unset: 100,000 of a 200,000-token window,
    /// scaled to the replay's window).
    pub trigger: Option<u64>,
    /// Newest tool uses whose results stay (3).
    pub keep: usize,
    /// Clear only when at least this many tokens are freed (unset: any amount).
    pub clear_at_least: Option<u64>,
    /// Tool names never cleared, comma-separated.
    pub exclude_tools: String,
    /// Also empty the cleared calls' arguments.
    pub clear_tool_inputs: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params { trigger: None, keep: 3, clear_at_least: None, exclude_tools: String::new(), clear_tool_inputs: false }
    }
}

/// The `anthropic-clear-tool-uses` strategy.
#[derive(Debug, Clone)]
pub struct AnthropicClearToolUses {
    params: Params,
    excluded: Vec<String>,
    meter: Exact,
}

impl AnthropicClearToolUses {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<AnthropicClearToolUses, ParamError> {
        if params.trigger == Some(0) {
            return Err(ParamError::new("anthropic-clear-tool-uses", "trigger", "must be at least 1"));
        }
        let excluded =
            params.exclude_tools.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        Ok(AnthropicClearToolUses { params, excluded, meter: Exact::o200k() })
    }

    /// The trigger for `budget`.
    pub fn trigger_tokens(&self, budget: &Budget) -> u64 {
        self.params.trigger.unwrap_or(budget.context_window.saturating_mul(TRIGGER_TOKENS) / CLAUDE_WINDOW)
    }

    /// The tool results to clear, oldest first.
    pub fn to_clear(&self, ctx: &Context) -> Vec<usize> {
        let results: Vec<usize> =
            ctx.entries().iter().enumerate().filter(|(_, e)| e.role() == Role::Tool).map(|(i, _)| i).collect();
        let older = results.len().saturating_sub(self.params.keep);
        results[..older]
            .iter()
            .copied()
            .filter(|&i| {
                let e = &ctx.entries()[i];
                let name = e.message().name.as_deref().unwrap_or("");
                !matches!(e.origin(), Origin::Masked { .. }) && !self.excluded.iter().any(|x| x == name)
            })
            .collect()
    }

    /// Tokens freed by clearing `indices`.
    fn freed(&self, ctx: &Context, indices: &[usize]) -> u64 {
        let placeholder = self.meter.count(PLACEHOLDER);
        indices.iter().map(|&i| ctx.entries()[i].tokens(&self.meter).saturating_sub(placeholder)).sum()
    }
}

impl Strategy for AnthropicClearToolUses {
    fn name(&self) -> &'static str {
        "anthropic-clear-tool-uses"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        Some(self.trigger_tokens(budget))
    }
    fn plan(&self, ctx: &Context, _budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let clear = self.to_clear(ctx);
        if clear.is_empty() {
            return None;
        }
        let freed = self.freed(ctx, &clear);
        if self.params.clear_at_least.is_some_and(|least| freed < least) {
            return None;
        }
        let cleared_ids: Vec<&str> =
            clear.iter().filter_map(|&i| ctx.entries()[i].message().tool_call_id.as_deref()).collect();
        let layout = ctx
            .entries()
            .iter()
            .enumerate()
            .map(|(index, e)| {
                if clear.binary_search(&index).is_ok() {
                    return Slot::Mask { index, placeholder: PLACEHOLDER.to_string() };
                }
                let m = e.message();
                if self.params.clear_tool_inputs && m.tool_calls.iter().any(|c| cleared_ids.contains(&c.id.as_str())) {
                    let mut m = m.clone();
                    for c in m.tool_calls.iter_mut().filter(|c| cleared_ids.contains(&c.id.as_str())) {
                        c.arguments = "{}".to_string();
                    }
                    return Slot::insert(m, Inserted::Other);
                }
                Slot::Keep { index }
            })
            .collect();
        let mut plan = Plan::deterministic(trigger, "clear_tool_uses", layout);
        plan.notes.insert("cleared".into(), clear.len().into());
        plan.notes.insert("freed_tokens".into(), freed.into());
        Some(plan)
    }
    fn plan_masks(&self, ctx: &Context, _budget: &Budget, trigger: Trigger, settled: usize) -> MaskAnswer {
        if self.params.clear_tool_inputs {
            // Cleared inputs are new assistant messages: not a masking.
            return MaskAnswer::Unsupported;
        }
        // The newest result older than the newest `keep` tool uses: every result after it stays.
        let entries = ctx.entries();
        let Some(last) = (0..entries.len()).rev().filter(|&i| entries[i].role() == Role::Tool).nth(self.params.keep)
        else {
            return MaskAnswer::Nothing { settled };
        };
        // Every entry before `settled` is cleared already, not a result, or a result of an
        // excluded tool; `last` only moves forward.
        let clear: Vec<usize> = (settled.min(last + 1)..=last)
            .filter(|&i| {
                let e = &entries[i];
                let name = e.message().name.as_deref().unwrap_or("");
                e.role() == Role::Tool
                    && !matches!(e.origin(), Origin::Masked { .. })
                    && !self.excluded.iter().any(|x| x == name)
            })
            .collect();
        let Some(&newest) = clear.last() else { return MaskAnswer::Nothing { settled: last + 1 } };
        let freed = self.freed(ctx, &clear);
        if self.params.clear_at_least.is_some_and(|least| freed < least) {
            // Not cleared: these results wait for a later call.
            return MaskAnswer::Nothing { settled };
        }
        let mut notes = serde_json::Map::new();
        notes.insert("cleared".into(), clear.len().into());
        notes.insert("freed_tokens".into(), freed.into());
        MaskAnswer::Masks(MaskPlan {
            trigger,
            step: "clear_tool_uses".into(),
            masks: clear.into_iter().map(|i| (i, masked_entry(&entries[i], PLACEHOLDER))).collect(),
            notes,
            promises: Promises {
                keeps_system_prompt: true,
                recent_window: ctx.len() - newest - 1,
                documented_deviations: Vec::new(),
            },
            settled: last + 1,
        })
    }
    /// The API edits each request server-side; the client sends the full history every time.
    fn profile(&self) -> Profile {
        Profile { rebuilds_from_history: true, ..Profile::default() }
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        // Everything from the oldest kept tool result on stays verbatim (unless its call's
        // inputs are cleared, which only touches calls of cleared results, all older).
        let window = match self.to_clear(ctx).last() {
            Some(&last) => ctx.len() - last - 1,
            None => ctx.len(),
        };
        let window = if self.params.clear_tool_inputs {
            let last_call = self.to_clear(ctx).iter().filter_map(|&i| call_of(ctx, i)).max();
            last_call.map_or(window, |c| window.min(ctx.len() - c - 1))
        } else {
            window
        };
        Promises {
            keeps_system_prompt: true,
            recent_window: window,
            documented_deviations: if self.params.clear_tool_inputs {
                vec![ViolationKind::RoleAlternation]
            } else {
                Vec::new()
            },
        }
    }
}

/// The assistant message that issued the call tool result `i` answers.
fn call_of(ctx: &Context, i: usize) -> Option<usize> {
    let id = ctx.entries()[i].message().tool_call_id.as_deref()?;
    (0..i).rev().find(|&j| ctx.entries()[j].message().tool_calls.iter().any(|c| c.id == id))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::apply_layout;
    use compaction::message::{Message, ToolCall};
    use testkit::summaries::proactive_plan;

    fn session(tools: &[&str]) -> Context {
        let mut m = vec![Message::system("s"), Message::user("go")];
        for (i, t) in tools.iter().enumerate() {
            let id = format!("c{i}");
            m.push(Message::assistant_calls(
                "",
                vec![ToolCall { id: id.clone(), name: (*t).into(), arguments: r#"{"path":"a.rs"}"#.into() }],
            ));
            m.push(Message::tool_result(id, *t, "word ".repeat(200)));
        }
        Context::from_messages(m)
    }

    #[test]
    fn trigger_is_100k_of_200k_scaled_or_as_set() {
        let s = AnthropicClearToolUses::new(Params::default()).unwrap();
        assert_eq!(s.trigger_tokens(&Budget::new(200_000)), 100_000);
        assert_eq!(s.trigger_tokens(&Budget::new(128_000)), 64_000);
        assert_eq!(s.trigger_tokens(&Budget::new(32_000)), 16_000);
        let set = AnthropicClearToolUses::new(Params { trigger: Some(30_000), ..Params::default() }).unwrap();
        assert_eq!(set.trigger_tokens(&Budget::new(128_000)), 30_000);
    }

    #[test]
    fn keeps_the_newest_three_tool_uses_and_the_excluded_tools() {
        let ctx = session(&["read", "memory", "read", "read", "read", "read"]);
        let s = AnthropicClearToolUses::new(Params { exclude_tools: "memory".into(), ..Params::default() }).unwrap();
        // Results at 3, 5, 7, 9, 11, 13; the newest three (9, 11, 13) stay, 5 is `memory`.
        assert_eq!(s.to_clear(&ctx), vec![3, 7]);
        let budget = Budget::new(1_000);
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = apply_layout(&s, &ctx, &budget, &plan, &[]);
        assert_eq!(out.context.get(3).unwrap().message().content, PLACEHOLDER);
        assert_eq!(out.context.get(7).unwrap().message().content, PLACEHOLDER);
        assert!(out.context.get(5).unwrap().message().content.starts_with("word"));
        assert_eq!(out.context.get(2).unwrap().message().tool_calls[0].arguments, r#"{"path":"a.rs"}"#);
        assert_eq!(out.event.masked, 2);
        // Below the trigger nothing happens.
        assert!(proactive_plan(&s, &ctx, &Budget::new(10_000_000)).is_none());
    }

    #[test]
    fn clear_at_least_skips_a_small_clearing_and_inputs_can_be_cleared() {
        let ctx = session(&["read", "read", "read", "read"]);
        let budget = Budget::new(1_000);
        // One result to clear (index 3), about 200 tokens freed.
        let big = AnthropicClearToolUses::new(Params { clear_at_least: Some(5_000), ..Params::default() }).unwrap();
        assert!(big.plan(&ctx, &budget, Trigger::Proactive).is_none());
        let small = AnthropicClearToolUses::new(Params { clear_at_least: Some(100), ..Params::default() }).unwrap();
        assert!(small.plan(&ctx, &budget, Trigger::Proactive).is_some());
        let inputs = AnthropicClearToolUses::new(Params { clear_tool_inputs: true, ..Params::default() }).unwrap();
        let plan = inputs.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = apply_layout(&inputs, &ctx, &budget, &plan, &[]);
        assert_eq!(out.context.get(2).unwrap().message().tool_calls[0].arguments, "{}");
        assert_eq!(out.context.get(2).unwrap().message().tool_calls[0].id, "c0");
        assert_eq!(out.context.get(4).unwrap().message().tool_calls[0].arguments, r#"{"path":"a.rs"}"#);
    }
}
