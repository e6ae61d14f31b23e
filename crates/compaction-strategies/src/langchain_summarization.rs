//! `langchain-summarization`: LangChain's `SummarizationMiddleware`, as released in
//! langchain 1.2.0.
//!
//! Pinned release: langchain 1.2.0 (`libs/langchain_v1`, `__version__ = "1.2.0"` in
//! `langchain/__init__.py` at the same commit). Source:
//! `libs/langchain_v1/langchain/agents/middleware/summarization.py` (`before_model`,
//! `_should_summarize`, `_determine_cutoff_index`, `_find_safe_cutoff`,
//! `_find_safe_cutoff_point`, `_create_summary`, `_trim_messages_for_summary`,
//! `_build_new_messages`), read with the code search in the copy of that release at
//! rizer0507/lang-chain 298b69c427eea4a13ca571fbc295663dbfa5a67d: the only copy of a numbered
//! release the search holds. That copy adds Chinese translations to the docstrings and comments
//! and appends one to `DEFAULT_SUMMARY_PROMPT` (with a `{消息}` field the release's
//! `.format(messages=...)` could not fill); the module follows the English text. The stored
//! revisions of langchain-ai/langchain itself (d13823043d84754f9136137ab71ef5569d792102,
//! 01b1122a81c4ae9257363d853980bc2f046bc1ea) are pre-release ones (a single
//! `max_tokens_before_summary` trigger, a cut searched backwards for a point that separates no
//! call from its results).
//!
//! - **Trigger**: any configured condition: `("fraction", f)`: tokens `>=` `int(f x` the
//!   model's `max_input_tokens)` (the window here); `("tokens", n)`: tokens `>= n`;
//!   `("messages", n)`: messages `>= n`. The middleware has no default trigger (without one it
//!   never summarizes); the benchmark's default is `("fraction", 0.8)`, the documentation's
//!   example fraction.
//! - **Keep**: `("messages", 20)`: the cut is `len - 20` over the conversation messages (the
//!   agent's system prompt is not one of them: `create_agent` sends it apart), moved by
//!   `_find_safe_cutoff_point`: when it lands on a tool message, forward past every tool
//!   message there (summarizing more), so a call and its results stay on one side. A cut at 0
//!   summarizes nothing.
//! - **Summarizer input**: the messages before the cut, trimmed to their newest 4,000 tokens
//!   (`trim_tokens_to_summarize`) starting on a human message (`trim_messages(strategy="last",
//!   start_on="human")`). Nothing left after trimming is the fixed text "Previous conversation
//!   was too long to summarize." with no model call. An earlier summary is one of those
//!   messages: it survives only if it is within the newest 4,000 tokens.
//! - **Prompt** (`langchain_summary.md`): `DEFAULT_SUMMARY_PROMPT`'s structure: a role (a
//!   context-extraction assistant), the primary objective, why (the input limit is near and the
//!   result overwrites the history), instructions (record what matters so no completed action
//!   is repeated; reply with the extracted context only), then the messages.
//! - **Result**: every message is removed (`REMOVE_ALL_MESSAGES`) and replaced by one human
//!   message, "Here is a summary of the conversation to date:" and the summary, then the kept
//!   messages.
//! - **Failure**: an exception in the summary call becomes the summary text: "Error generating
//!   summary: `<error>`" (the context is replaced by the error). Later revisions raise after
//!   three consecutive failures and keep the history; 1.2.0 does not, and neither does this
//!   module.
//!
//! **Token units**: the middleware counts with its default `token_counter`,
//! `count_tokens_approximately` (langchain_core: per message, the characters of its content,
//! role, tool calls, tool-call id and name divided by 4, rounded up, plus 3), so the trigger and
//! the 4,000-token trim use that estimate here too ([`ApproxCounter`]); the fraction trigger is
//! a fraction of the window in those units, as LangChain compares its estimate with the model's
//! input limit.
//!
//! Departures, each kept for a reason:
//! - With an Anthropic chat model (`_llm_type == "anthropic-chat"`) 1.2.0 counts 3.3
//!   characters per token instead of 4, so it triggers at about 83% of the characters this
//!   module waits for. A strategy here is not told which model the replay prices (the corpora
//!   slice prices Claude Sonnet 4), so the module keeps the default for every other model.
//! - A tool call's characters are its name, arguments and id plus a fixed 50 for the Python
//!   `repr` of the call's dict around them (the recordings hold the call, not LangChain's
//!   object).
//! - Partial messages (`allow_partial`) are not cut: the summarizer input here is whole
//!   messages.
//! - The prompt is in the project's words, and its instructions and the messages go as a
//!   system and a user message; 1.2.0 sends the whole formatted prompt as one human message
//!   with the messages as `get_buffer_string` lines. The summarizers here render every
//!   strategy's span the same way.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{self, ParamError};
use compaction::context::{Context, Inserted};
use compaction::message::{Message, Role};
use compaction::tokens::TokenCounter;
use compaction::ViolationKind;
use compaction::{
    apply_layout, Budget, Compacted, Fallback, Plan, Promises, Prompt, Slot, Strategy, SummaryOutcome, SummaryRequest,
    Trigger,
};

/// The default summary prompt; LangChain keeps whatever the model wrote, an empty answer too (`langchain_summarization/langchain_summary.md`, beside this module).
pub fn prompt() -> Prompt {
    Prompt {
        empty_fails: false,
        ..Prompt::new("langchain_summary", include_str!("langchain_summarization/langchain_summary.md"))
    }
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "LangChain SummarizationMiddleware: at 80% of the window (the benchmark's trigger; tokens \
     and message-count triggers optional), keeps the newest 20 messages with a pair-safe cut and replaces the rest \
     with one human message \"Here is a summary of the conversation to date:\"; summarizer input trimmed to 4,000 \
     tokens; an error becomes the summary.";

/// The text before the summary in the summary message (LangChain's own).
pub const SUMMARY_PREFIX: &str = "Here is a summary of the conversation to date:\n\n";
/// The summary LangChain writes when the history is too long to summarize.
pub const TOO_LONG: &str = "Previous conversation was too long to summarize.";

/// Parameters of `langchain-summarization`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// `("fraction", f)`: summarize at this fraction of the window (0.8, the benchmark's choice).
    pub trigger_fraction: f64,
    /// `("tokens", n)`: also summarize at this many tokens.
    pub trigger_tokens: Option<u64>,
    /// `("messages", n)`: also summarize at this many messages.
    pub trigger_messages: Option<u64>,
    /// `("messages", 20)`: newest messages kept.
    pub keep_messages: usize,
    /// `trim_tokens_to_summarize`: the summarizer sees at most this many of the newest tokens.
    pub trim_tokens_to_summarize: u64,
    /// Output cap of the summary request.
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            trigger_fraction: 0.8,
            trigger_tokens: None,
            trigger_messages: None,
            keep_messages: 20,
            trim_tokens_to_summarize: 4_000,
            summary_max_tokens: 4_096,
        }
    }
}

/// The `langchain-summarization` strategy.
#[derive(Debug, Clone)]
pub struct LangchainSummarization {
    params: Params,
    meter: ApproxCounter,
}

/// `count_tokens_approximately` (langchain_core `messages/utils.py`), the middleware's default
/// `token_counter`: per message `ceil(chars / 4) + 3`, where the characters are the content's,
/// the role's, the tool calls' (name, arguments and id, plus 50 for their `repr`), the tool-call
/// id's and the name's.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxCounter;

/// Characters the Python `repr` of one tool call's dict adds around its name, arguments and id.
const CALL_REPR_CHARS: u64 = 50;

impl TokenCounter for ApproxCounter {
    fn name(&self) -> &'static str {
        "count_tokens_approximately"
    }
    fn message_units(&self, m: &Message) -> u64 {
        let len = |s: &str| s.chars().count() as u64;
        let calls: u64 =
            m.tool_calls.iter().map(|c| len(&c.name) + len(&c.arguments) + len(&c.id) + CALL_REPR_CHARS).sum();
        let chars = len(&m.content)
            + len(m.role.as_str())
            + calls
            + m.tool_call_id.as_deref().map_or(0, len)
            + m.name.as_deref().map_or(0, len);
        chars.div_ceil(4) + 3
    }
    fn text_tokens(&self, text: &str) -> u64 {
        (text.chars().count() as u64).div_ceil(4)
    }
}

/// `_find_safe_cutoff_point` over `messages` (context entries `base..`), `cut` relative to it:
/// a cut on a tool message moves forward past every tool message there.
pub fn safe_cutoff_point(ctx: &Context, base: usize, cut: usize) -> usize {
    let e = ctx.entries();
    let n = ctx.len() - base;
    (cut..n).find(|&i| e[base + i].role() != Role::Tool).unwrap_or(n.max(cut))
}

impl LangchainSummarization {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<LangchainSummarization, ParamError> {
        const NAME: &str = "langchain-summarization";
        if !(params.trigger_fraction.is_finite() && params.trigger_fraction > 0.0 && params.trigger_fraction <= 1.0) {
            return Err(ParamError::new(NAME, "trigger_fraction", "must be in (0, 1]"));
        }
        if params.trigger_tokens == Some(0) {
            return Err(ParamError::new(NAME, "trigger_tokens", "must be at least 1"));
        }
        if params.trigger_messages == Some(0) {
            return Err(ParamError::new(NAME, "trigger_messages", "must be at least 1"));
        }
        if params.trim_tokens_to_summarize == 0 {
            return Err(ParamError::new(NAME, "trim_tokens_to_summarize", "must be at least 1"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new(NAME, "summary_max_tokens", "must be at least 1"));
        }
        Ok(LangchainSummarization { params, meter: ApproxCounter })
    }

    /// The token trigger: `tokens >= t` for the smallest configured `t`.
    pub fn token_trigger(&self, budget: &Budget) -> u64 {
        let fraction = common::fraction_of(budget.context_window, self.params.trigger_fraction);
        self.params.trigger_tokens.map_or(fraction, |t| t.min(fraction))
    }

    fn message_trigger_met(&self, ctx: &Context) -> bool {
        let n = (ctx.len() - common::body_start(ctx)) as u64;
        self.params.trigger_messages.is_some_and(|m| n >= m)
    }

    /// The cut (a context index): the first kept message, or `None` when nothing is summarized.
    pub fn cutoff(&self, ctx: &Context) -> Option<usize> {
        let base = common::body_start(ctx);
        let n = ctx.len() - base;
        if n <= self.params.keep_messages {
            return None;
        }
        let cut = safe_cutoff_point(ctx, base, n - self.params.keep_messages);
        (cut > 0).then_some(base + cut)
    }

    /// `_trim_messages_for_summary`: the newest entries of `base..cut` within the token budget,
    /// starting on a user message.
    pub fn trimmed(&self, ctx: &Context, base: usize, cut: usize) -> Vec<usize> {
        let mut start = cut;
        let mut used = 0;
        while start > base {
            let t = ctx.entries()[start - 1].tokens(&self.meter);
            if used + t > self.params.trim_tokens_to_summarize {
                break;
            }
            used += t;
            start -= 1;
        }
        let first_user = (start..cut).find(|&i| ctx.entries()[i].role() == Role::User);
        first_user.map_or_else(Vec::new, |s| (s..cut).collect())
    }
}

impl Strategy for LangchainSummarization {
    fn name(&self) -> &'static str {
        "langchain-summarization"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, ctx: &Context, budget: &Budget) -> Option<u64> {
        if self.message_trigger_met(ctx) {
            return None;
        }
        Some(self.token_trigger(budget).saturating_sub(1))
    }
    fn thresholds(&self, _ctx: &Context, budget: &Budget) -> Vec<(&'static str, u64)> {
        vec![("trigger", self.token_trigger(budget).saturating_sub(1))]
    }
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        self.message_trigger_met(ctx) || self.estimate(ctx) >= self.token_trigger(budget)
    }
    fn plan(&self, ctx: &Context, _budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let base = common::body_start(ctx);
        let cut = self.cutoff(ctx)?;
        let span = self.trimmed(ctx, base, cut);
        let mut layout: Vec<Slot> = common::keep(0..base).collect();
        let requests = if span.is_empty() {
            layout.push(Slot::insert(Message::user(format!("{SUMMARY_PREFIX}{TOO_LONG}")), Inserted::Other));
            Vec::new()
        } else {
            layout.push(Slot::Summary {
                request: 0,
                role: Role::User,
                prefix: SUMMARY_PREFIX.to_string(),
                suffix: String::new(),
            });
            vec![SummaryRequest::new(span, prompt(), self.params.summary_max_tokens, common::next_round(ctx))]
        };
        layout.extend(common::keep(cut..ctx.len()));
        let mut notes = serde_json::Map::new();
        notes.insert("cutoff".into(), cut.into());
        Some(Plan { trigger, layout, requests, fallback: Fallback::Unchanged, step: "summarize".into(), notes })
    }
    /// A failed summary call becomes the summary text, as the middleware's `except` does.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        let failure = summaries.iter().find_map(|s| s.as_ref().err()).map(|e| e.reason.clone());
        let texts: Vec<SummaryOutcome> = (0..plan.requests.len())
            .map(|i| match summaries.get(i) {
                Some(Ok(t)) => Ok(t.clone()),
                Some(Err(e)) => Ok(format!("Error generating summary: {}", e.reason)),
                None => Ok("Error generating summary: no summary given".to_string()),
            })
            .collect();
        let mut out = apply_layout(self, ctx, budget, plan, &texts);
        if let Some(reason) =
            failure.or_else(|| (summaries.len() < plan.requests.len()).then(|| "no summary given".into()))
        {
            out.event.fallback = Some(format!("error_as_summary: {reason}"));
        }
        out
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        Promises {
            keeps_system_prompt: true,
            recent_window: self.cutoff(ctx).map_or(ctx.len(), |c| ctx.len() - c),
            documented_deviations: vec![ViolationKind::RoleAlternation],
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::message::ToolCall;
    use compaction::SummaryFailure;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "search".into(), arguments: "{}".into() }
    }

    /// `_find_safe_cutoff_point` in 1.2.0: a cut on a tool message advances past every tool
    /// message there (the call goes into the summary with its results); a cut elsewhere stays.
    #[test]
    fn safe_cutoff_cases() {
        // [human, ai(call 1), tool 1, ai, human, ai(calls 2, 3), tool 2, tool 3, ai]
        let ctx = Context::from_messages(vec![
            Message::user("q1"),
            Message::assistant_calls("", vec![call("1")]),
            Message::tool_result("1", "search", "r1"),
            Message::assistant("a1"),
            Message::user("q2"),
            Message::assistant_calls("", vec![call("2"), call("3")]),
            Message::tool_result("2", "search", "r2"),
            Message::tool_result("3", "search", "r3"),
            Message::assistant("a2"),
        ]);
        assert_eq!(safe_cutoff_point(&ctx, 0, 2), 3);
        assert_eq!(safe_cutoff_point(&ctx, 0, 6), 8);
        assert_eq!(safe_cutoff_point(&ctx, 0, 7), 8);
        assert_eq!(safe_cutoff_point(&ctx, 0, 5), 5);
        assert_eq!(safe_cutoff_point(&ctx, 0, 3), 3);
        assert_eq!(safe_cutoff_point(&ctx, 0, 9), 9);
        // Tool messages to the end: the cut goes past them all (nothing kept after it).
        let tail = Context::from_messages(vec![
            Message::user("q"),
            Message::assistant_calls("", vec![call("x"), call("y")]),
            Message::tool_result("x", "search", "r"),
            Message::tool_result("y", "search", "r"),
        ]);
        assert_eq!(safe_cutoff_point(&tail, 0, 2), 4);
        // Relative to the first message after a system prompt.
        let mut with_system = vec![Message::system("s")];
        with_system.extend(ctx.entries().iter().map(|e| e.message().clone()));
        let with_system = Context::from_messages(with_system);
        assert_eq!(safe_cutoff_point(&with_system, 1, 6), 8);
    }

    /// A keep cut that lands on results moves past them: the kept messages start after the
    /// results, and no kept result lacks its call.
    #[test]
    fn the_keep_cut_moves_forward_past_tool_results() {
        let s = LangchainSummarization::new(Params { keep_messages: 3, ..Params::default() }).unwrap();
        // system, then [human, ai(call 1), tool 1, ai, human, ai(calls 2, 3), tool 2, tool 3, ai]
        let mut m = vec![Message::system("s"), Message::user("q1"), Message::assistant_calls("", vec![call("1")])];
        m.push(Message::tool_result("1", "search", "r1"));
        m.extend([Message::assistant("a1"), Message::user("q2")]);
        m.push(Message::assistant_calls("", vec![call("2"), call("3")]));
        m.extend([Message::tool_result("2", "search", "r2"), Message::tool_result("3", "search", "r3")]);
        m.push(Message::assistant("a2"));
        let ctx = Context::from_messages(m);
        // 9 messages, keep 3: the cut is at 6 (tool 3), moved to 8 (the answer): one kept.
        assert_eq!(s.cutoff(&ctx), Some(1 + 8));
        let plan = s.plan(&ctx, &Budget::new(10), Trigger::Overflow).unwrap();
        let out = s.apply(&ctx, &Budget::new(10), &plan, &[Ok("S".into())]);
        assert_eq!(out.context.len(), 3);
        assert_eq!(out.context.get(2).unwrap().message().content, "a2");
    }

    fn long_chat(n: usize) -> Context {
        let mut m = vec![Message::system("sys")];
        for i in 0..n {
            m.push(Message::user(format!("question {i} {}", "word ".repeat(20))));
            m.push(Message::assistant(format!("answer {i}")));
        }
        Context::from_messages(m)
    }

    #[test]
    fn keeps_the_newest_20_behind_one_human_summary() {
        let s = LangchainSummarization::new(Params::default()).unwrap();
        let ctx = long_chat(15); // 30 messages after the system prompt
        let budget = Budget::new(100);
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(s.cutoff(&ctx), Some(11));
        assert_eq!(plan.requests[0].span, (1..11).collect::<Vec<_>>());
        let out = s.apply(&ctx, &budget, &plan, &[Ok("S".into())]);
        assert_eq!(out.context.len(), 1 + 1 + 20);
        assert_eq!(out.context.get(1).unwrap().message().content, format!("{SUMMARY_PREFIX}S"));
        assert_eq!(out.context.get(1).unwrap().role(), Role::User);
        // 20 messages or fewer: nothing to summarize.
        assert!(s.cutoff(&long_chat(10)).is_none());
    }

    #[test]
    fn the_summarizer_sees_the_newest_4000_tokens_from_a_human_message() {
        let s = LangchainSummarization::new(Params { trim_tokens_to_summarize: 60, ..Params::default() }).unwrap();
        let ctx = long_chat(15);
        let span = s.trimmed(&ctx, 1, 11);
        assert!(!span.is_empty() && span.len() < 10);
        assert_eq!(ctx.entries()[span[0]].role(), Role::User);
        assert_eq!(*span.last().unwrap(), 10);
        // Nothing fits: the fixed text, no request.
        let none = LangchainSummarization::new(Params { trim_tokens_to_summarize: 1, ..Params::default() }).unwrap();
        let plan = none.plan(&ctx, &Budget::new(100), Trigger::Proactive).unwrap();
        assert!(plan.requests.is_empty());
        assert!(matches!(&plan.layout[1], Slot::Insert { message, .. } if message.content.ends_with(TOO_LONG)));
    }

    #[test]
    fn an_error_becomes_the_summary_and_triggers_combine() {
        let s = LangchainSummarization::new(Params::default()).unwrap();
        let ctx = long_chat(15);
        let budget = Budget::new(100);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let out = s.apply(&ctx, &budget, &plan, &[Err(SummaryFailure { reason: "rate limited".into() })]);
        assert_eq!(
            out.context.get(1).unwrap().message().content,
            format!("{SUMMARY_PREFIX}Error generating summary: rate limited")
        );
        assert!(out.event.fallback.is_some());
        // 0.8 x 128,000 = 102,400, reached at >=.
        assert_eq!(s.token_trigger(&Budget::new(128_000)), 102_400);
        let both = LangchainSummarization::new(Params { trigger_tokens: Some(50_000), ..Params::default() }).unwrap();
        assert_eq!(both.token_trigger(&Budget::new(128_000)), 50_000);
        let by_count = LangchainSummarization::new(Params { trigger_messages: Some(30), ..Params::default() }).unwrap();
        assert!(by_count.should_compact(&ctx, &Budget::new(10_000_000)));
        assert!(!by_count.should_compact(&long_chat(14), &Budget::new(10_000_000)));
    }

    /// `count_tokens_approximately`: per message the characters of content and role (and of
    /// calls, call id and name) over 4, rounded up, plus 3; the trigger compares that estimate.
    #[test]
    fn the_trigger_counts_with_count_tokens_approximately() {
        let c = ApproxCounter;
        // "abcd" + "user": 8 characters, 2 + 3.
        assert_eq!(c.message_tokens(&Message::user("abcd")), 5);
        // "" + "assistant" + ("search" + "{}" + "1" + 50): 68 characters, 17 + 3.
        assert_eq!(c.message_tokens(&Message::assistant_calls("", vec![call("1")])), 20);
        // "r1" + "tool" + id "1" + name "search": 13 characters, 4 + 3.
        assert_eq!(c.message_tokens(&Message::tool_result("1", "search", "r1")), 7);
        // 396 digits and the role are 100 + 3 in the estimate, whatever a tokenizer makes of
        // them: a trigger of 100 tokens is reached by the estimate, not by the exact count.
        let s = LangchainSummarization::new(Params { trigger_tokens: Some(100), ..Params::default() }).unwrap();
        let ctx = Context::from_messages(vec![Message::user("7".repeat(396))]);
        assert_eq!(s.estimate(&ctx), 103);
        assert!(s.should_compact(&ctx, &Budget::new(1_000_000)));
        let under = Context::from_messages(vec![Message::user("7".repeat(380))]);
        assert!(!s.should_compact(&under, &Budget::new(1_000_000)));
    }
}
