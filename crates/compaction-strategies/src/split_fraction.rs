//! `split-fraction`: the Go agent loop's LLM compaction with a truncation fallback (seed 003).
//!
//! The document's rules:
//!
//! - **Budget** (`calculateTokenBudget`, `SplitFractionBudget`): system tokens =
//!   `len(systemPrompt) / 4`; message tokens = `Σ len(content) / 4 + 4` over the messages
//!   *excluding* the system prompt (Go's `len` counts bytes; integer division;
//!   [`LenOver4Plus4`]); utilization = message tokens / (limit - system tokens - max output
//!   16,384), with the limit from [`Budget::context_window`]. [`Strategy::estimate`] is
//!   therefore the message tokens without the system prompt, and [`Strategy::threshold`] is
//!   `floor(denominator x 80 / 100)`: in integers, `m / d > 80 / 100` is exactly `m > floor(80 d
//!   / 100)`, so a utilization of exactly 80% does not compact.
//! - **Triggers**: proactive when utilization > 80%. After a response stopped at its output
//!   limit ([`Trigger::LengthStop`], `finish_reason = "length"`) the document recalculates the
//!   budget and compacts only if `ShouldCompact` holds, else the loop exits; the plan does the
//!   same (discarding the truncated tool blocks of that response is the caller's part). The
//!   document lists exactly these two triggers and no context-overflow path, so the strategy
//!   does not react to [`Trigger::Overflow`] by default (`react_to_overflow = false`, as 001 and
//!   004, whose documents have none either); with it on, the same compaction runs without the
//!   threshold check when the request would be rejected.
//! - **Split**: the messages after the system prompt are split so that the newest
//!   `floor(n x 40 / 100)` are preserved (at least one: a request never ends with the
//!   acknowledgement). `adjustSplitForToolPairs` then moves the split *earlier* while it points at
//!   a tool result, so a tool_use and its tool_results stay together in the preserved part. The
//!   document's picture ("split here? NO! ... adjust to include tool_result") does not say which
//!   way; moving earlier keeps at least the ~40% the document preserves. If nothing is left to
//!   summarize there is no compaction. With 14 messages the split falls at `[9]`, as in the
//!   document's example.
//! - **Summary**: one [`prompt`] request for the older messages (a previous
//!   `[COMPACT SUMMARY]` pair among them is summarized like any message: the document does not
//!   chain), capped at the max output tokens (the summary uses the same LLM client and config).
//! - **Placement**: after the system prompt (when the context starts with one), a user message
//!   `[COMPACT SUMMARY]\n` + summary, an assistant `Understood.`, then the preserved messages.
//! - **Failure**: truncation, for an LLM error and for an empty summary alike ("LLM
//!   summarization fails (timeout, error, empty)"). The same split, with the summary replaced by
//!   `[Context truncated. Earlier conversation contained N messages about: T]`, where N is the
//!   number of dropped messages and T is the first recorded user request among them, whitespace
//!   collapsed and cut to 100 characters (`...` marks a cut); `(no user request)` when there is
//!   none.
//!
//! Deviations, noted rather than changed:
//!
//! - When the split lands on an assistant message (always so after a tool-pair adjustment), the
//!   preserved part starts with an assistant message right after `Understood.`: two assistant
//!   turns in a row. [`ViolationKind::RoleAlternation`] is a documented deviation.
//! - The utilization is a float ratio in the document: with a negative denominator (a window
//!   smaller than the system prompt plus 16,384 output tokens) it is negative and never above
//!   80%, so the strategy never compacts proactively there ([`Strategy::threshold`] is `None`);
//!   lower `max_output_tokens` for small windows. A zero denominator compacts whenever there is
//!   a message.
//! - The estimate counts message text only, as `len(msg.content)` does: tool-call arguments are
//!   not counted.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ParamError;
use compaction::context::{Context, Inserted, Origin};
use compaction::message::{Message, Role};
use compaction::tokens::{LenOver4Plus4, TokenCounter};
use compaction::ViolationKind;
use compaction::{Budget, Fallback, Plan, Profile, Promises, Prompt, Slot, Strategy, SummaryRequest, Trigger};

/// 003's `[COMPACT SUMMARY]` prompt (`split_fraction/compact_summary.md`, beside this module).
pub fn prompt() -> Prompt {
    Prompt::new("compact_summary", include_str!("split_fraction/compact_summary.md"))
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "When message tokens (len/4 + 4 each) pass 80% of the window left after the system prompt and \
     16,384 output tokens, or after a length stop, summarizes all but the newest 40% of messages into a \
     `[COMPACT SUMMARY]` user message answered by `Understood.`; falls back to a truncation notice if the summary fails.";

/// Prefix of the summary message.
pub const SUMMARY_PREFIX: &str = "[COMPACT SUMMARY]\n";
/// The assistant's answer to the summary.
pub const ACKNOWLEDGEMENT: &str = "Understood.";
/// Longest topic quoted in the truncation notice, in characters.
pub const NOTICE_TOPIC_CHARS: usize = 100;

/// Parameters of `split-fraction`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Output tokens reserved for the response, subtracted from the window with the system
    /// prompt's tokens to form the utilization denominator (`maxOutputTkns`).
    pub max_output_tokens: u64,
    /// Compact when utilization is strictly above this percentage (1-100); exactly at it does
    /// not compact.
    pub threshold_percent: u64,
    /// Share of the messages after the system prompt preserved verbatim, in percent (1-99),
    /// rounded down, at least one message; tool results stay with their call.
    pub preserve_percent: u64,
    /// Also compact when the request is over the window, without the threshold check. The
    /// document lists exactly two triggers (proactive utilization and the `max_tokens` stop),
    /// so this is off by default.
    pub react_to_overflow: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params { max_output_tokens: 16_384, threshold_percent: 80, preserve_percent: 40, react_to_overflow: false }
    }
}

/// The document's `calculateTokenBudget` for one context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SplitFractionBudget {
    /// The model's context window (`ContextLimit`).
    pub context_limit: u64,
    /// `len(systemPrompt) / 4`.
    pub system_tokens: u64,
    /// `Σ len(content) / 4 + 4` over the messages after the system prompt.
    pub message_tokens: u64,
    pub max_output_tokens: u64,
    /// Compact when utilization is strictly above this percentage.
    pub threshold_percent: u64,
}

impl SplitFractionBudget {
    /// Measure `ctx` (its leading system prompt, if any, is the system prompt).
    pub fn measure(ctx: &Context, budget: &Budget, params: &Params) -> SplitFractionBudget {
        let estimator = LenOver4Plus4;
        let system_tokens = ctx.system_prompt().map_or(0, |e| estimator.text_tokens(&e.message().content));
        SplitFractionBudget {
            context_limit: budget.context_window,
            system_tokens,
            message_tokens: message_tokens(ctx),
            max_output_tokens: params.max_output_tokens,
            threshold_percent: params.threshold_percent,
        }
    }
    /// `contextLimit - systemTokens - messageTokens - maxOutputTokens`; can be negative.
    #[cfg(test)]
    pub fn available(&self) -> i128 {
        self.denominator() - i128::from(self.message_tokens)
    }
    /// `contextLimit - systemTokens - maxOutputTokens`, the utilization denominator.
    pub fn denominator(&self) -> i128 {
        i128::from(self.context_limit) - i128::from(self.system_tokens) - i128::from(self.max_output_tokens)
    }
    /// The utilization as the document computes it (a float ratio).
    #[cfg(test)]
    pub fn utilization(&self) -> f64 {
        self.message_tokens as f64 / self.denominator() as f64
    }
    /// The largest message-token count that does not compact: `floor(denominator x percent /
    /// 100)`; `None` when the denominator is negative (utilization can never exceed the
    /// threshold).
    pub fn threshold(&self) -> Option<u64> {
        let d = self.denominator();
        if d < 0 {
            return None;
        }
        u64::try_from(d * i128::from(self.threshold_percent) / 100).ok()
    }
    /// `ShouldCompact`: utilization strictly above the threshold percentage, in exact integers.
    pub fn should_compact(&self) -> bool {
        self.threshold().is_some_and(|t| self.message_tokens > t)
    }
}

/// Message tokens excluding a leading system prompt.
fn message_tokens(ctx: &Context) -> u64 {
    let estimator = LenOver4Plus4;
    let all = ctx.tokens(&estimator);
    all - ctx.system_prompt().map_or(0, |e| e.tokens(&estimator))
}

/// Where the context splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Split {
    /// First entry after the system prompt (0 or 1).
    pub body_start: usize,
    /// First preserved entry; `body_start..split` is summarized.
    pub split: usize,
}

/// The `split-fraction` strategy.
#[derive(Debug, Clone)]
pub struct SplitFraction {
    params: Params,
    estimator: LenOver4Plus4,
}

impl SplitFraction {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<SplitFraction, ParamError> {
        const NAME: &str = "split-fraction";
        if !(1..=100).contains(&params.threshold_percent) {
            return Err(ParamError::new(NAME, "threshold_percent", "must be between 1 and 100"));
        }
        if !(1..=99).contains(&params.preserve_percent) {
            return Err(ParamError::new(NAME, "preserve_percent", "must be between 1 and 99"));
        }
        if u32::try_from(params.max_output_tokens).is_err() {
            return Err(ParamError::new(NAME, "max_output_tokens", "must fit in 32 bits"));
        }
        Ok(SplitFraction { params, estimator: LenOver4Plus4 })
    }
    /// The parameters it was built with.
    pub fn params(&self) -> &Params {
        &self.params
    }
    /// The document's token budget for `ctx`.
    pub(crate) fn budget(&self, ctx: &Context, budget: &Budget) -> SplitFractionBudget {
        SplitFractionBudget::measure(ctx, budget, &self.params)
    }
    /// The split point after `adjustSplitForToolPairs`; `None` when nothing would be summarized.
    pub(crate) fn split(&self, ctx: &Context) -> Option<Split> {
        let body_start = usize::from(ctx.system_prompt().is_some());
        let n = ctx.len() - body_start;
        let preserve_percent = usize::try_from(self.params.preserve_percent).unwrap_or(usize::MAX);
        let keep = (n.saturating_mul(preserve_percent) / 100).max(1);
        if keep >= n {
            return None;
        }
        let mut split = ctx.len() - keep;
        let entries = ctx.entries();
        while split > body_start && entries[split].role() == Role::Tool {
            split -= 1;
        }
        (split > body_start).then_some(Split { body_start, split })
    }
}

/// The truncation notice for the dropped entries `span` of `ctx`.
pub fn truncation_notice(ctx: &Context, span: std::ops::Range<usize>) -> String {
    let dropped = &ctx.entries()[span.clone()];
    let users = || dropped.iter().filter(|e| e.role() == Role::User);
    let request = users()
        .find(|e| matches!(e.origin(), Origin::Recorded { .. } | Origin::Masked { .. }))
        .or_else(|| users().next());
    let topic = match request {
        Some(e) => {
            let text = e.message().content.split_whitespace().collect::<Vec<_>>().join(" ");
            if text.chars().count() > NOTICE_TOPIC_CHARS {
                format!("{}...", text.chars().take(NOTICE_TOPIC_CHARS).collect::<String>())
            } else {
                text
            }
        }
        None => "(no user request)".to_string(),
    };
    format!("[Context truncated. Earlier conversation contained {} messages about: {topic}]", span.len())
}

impl Strategy for SplitFraction {
    fn name(&self) -> &'static str {
        "split-fraction"
    }
    /// The utilization's denominator (`window - system - max_output_tokens`) must be positive
    /// for the threshold to be reachable: with `max_output_tokens` at least the window it never is.
    fn can_operate(&self, budget: &Budget) -> Result<(), String> {
        let reserve = self.params.max_output_tokens;
        if reserve >= budget.context_window {
            return Err(format!(
                "max_output_tokens ({reserve}) is at least the window ({}): utilization never passes {}%, it never compacts",
                budget.context_window, self.params.threshold_percent
            ));
        }
        Ok(())
    }
    fn profile(&self) -> Profile {
        Profile {
            operating_condition: "max_output_tokens (16,384 by default) is below the window",
            ..Profile::default()
        }
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.estimator
    }
    /// Message tokens without the system prompt: the utilization's numerator.
    fn estimate(&self, ctx: &Context) -> u64 {
        message_tokens(ctx)
    }
    fn threshold(&self, ctx: &Context, budget: &Budget) -> Option<u64> {
        self.budget(ctx, budget).threshold()
    }
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        self.budget(ctx, budget).should_compact()
    }
    fn reacts_to(&self, trigger: Trigger) -> bool {
        match trigger {
            Trigger::LengthStop => true,
            Trigger::Overflow => self.params.react_to_overflow,
            Trigger::Proactive => false,
        }
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        // A length stop compacts only over the threshold, as a proactive call does (the driver
        // gates that one).
        if trigger == Trigger::LengthStop && !self.should_compact(ctx, budget) {
            return None;
        }
        let Split { body_start, split } = self.split(ctx)?;
        let head: Vec<Slot> = (0..body_start).map(|index| Slot::Keep { index }).collect();
        let ack = Slot::insert(Message::assistant(ACKNOWLEDGEMENT), Inserted::Acknowledgement);
        let preserved = (split..ctx.len()).map(|index| Slot::Keep { index });

        let mut layout = head.clone();
        layout.push(Slot::Summary {
            request: 0,
            role: Role::User,
            prefix: SUMMARY_PREFIX.to_string(),
            suffix: String::new(),
        });
        layout.push(ack.clone());
        layout.extend(preserved.clone());

        let notice = format!("{SUMMARY_PREFIX}{}", truncation_notice(ctx, body_start..split));
        let mut truncated = head;
        truncated.push(Slot::insert(Message::user(notice), Inserted::TruncationNotice));
        truncated.push(ack);
        truncated.extend(preserved);

        // The document cuts nothing: the old messages go to the summarizer whole.
        let request = SummaryRequest::new(
            (body_start..split).collect(),
            prompt(),
            u32::try_from(self.params.max_output_tokens).unwrap_or(u32::MAX),
            ctx.last_round() + 1,
        );
        let mut notes = serde_json::Map::new();
        notes.insert("split".into(), split.into());
        notes.insert("preserved".into(), (ctx.len() - split).into());
        Some(Plan {
            trigger,
            layout,
            requests: vec![request],
            fallback: Fallback::Layout { label: "truncate".into(), layout: truncated },
            step: "summarize".into(),
            notes,
        })
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        let recent_window = self.split(ctx).map_or(ctx.len(), |s| ctx.len() - s.split);
        Promises {
            keeps_system_prompt: true,
            recent_window,
            documented_deviations: vec![ViolationKind::RoleAlternation],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction::check_compaction;
    use compaction::context::Entry;
    use compaction::message::ToolCall;
    use compaction::{Compacted, SummaryFailure};
    use testkit::summaries::proactive_plan;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: "{}".into() }
    }

    fn tool_use(text: &str, id: &str, name: &str) -> Message {
        Message::assistant_calls(text, vec![call(id, name)])
    }

    /// The document's split example, messages [0]..[13].
    fn refactor_session() -> Vec<Message> {
        vec![
            Message::user("Help me refactor"),
            tool_use("I'll look at the code", "r1", "Read"),
            Message::tool_result("r1", "Read", "file contents..."),
            Message::user("Now fix the bug"),
            tool_use("Let me check", "r2", "Read"),
            Message::tool_result("r2", "Read", "..."),
            Message::user("Also add tests"),
            tool_use("Sure", "w1", "Write"),
            Message::tool_result("w1", "Write", "..."),
            Message::user("Run the tests"),
            tool_use("", "b1", "Bash"),
            Message::tool_result("b1", "Bash", "PASS"),
            Message::user("Now deploy"),
            Message::assistant("I'll push to git"),
        ]
    }

    fn strategy() -> SplitFraction {
        SplitFraction::new(Params::default()).expect("defaults are valid")
    }

    /// A window whose utilization denominator is `d` for a context without system prompt.
    fn window(d: u64) -> Budget {
        Budget::new(16_384 + d)
    }

    const SUMMARY_TEXT: &str = "Earlier, I refactored code, fixed a bug, and added tests...";

    fn assert_only_documented(s: &SplitFraction, before: &Context, budget: &Budget, trigger: Trigger, out: &Compacted) {
        let documented = s.promises(before, budget).documented_deviations;
        for v in check_compaction(s, before, budget, trigger, out) {
            assert!(documented.contains(&v.kind()), "undocumented violation: {v}");
        }
    }

    fn contents(ctx: &Context) -> Vec<String> {
        ctx.messages().map(|m| m.content.clone()).collect()
    }

    #[test]
    fn fourteen_message_example() {
        let s = strategy();
        let ctx = Context::from_messages(refactor_session());
        let budget = window(50);
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over 80%");
        assert_eq!(s.split(&ctx), Some(Split { body_start: 0, split: 9 }), "floor(14 x 40%) = 5 preserved");
        let req = &plan.requests[0];
        assert_eq!(req.span, (0..9).collect::<Vec<_>>());
        assert_eq!(req.prompt, prompt());
        assert_eq!((req.previous.clone(), req.task.clone(), req.round, req.max_tokens), (None, None, 1, 16_384));

        let out = s.apply(&ctx, &budget, &plan, &[Ok(SUMMARY_TEXT.into())]);
        let after = &out.context;
        assert_eq!(after.len(), 7);
        let roles: Vec<Role> = after.messages().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::User, Role::Assistant, Role::Tool, Role::User, Role::Assistant]
        );
        assert_eq!(after.entries()[0].message().content, format!("[COMPACT SUMMARY]\n{SUMMARY_TEXT}"));
        assert_eq!(after.entries()[0].origin(), &Origin::Summary { round: 1, covers: (0..9).collect() });
        assert_eq!(after.entries()[1].message().content, "Understood.");
        assert_eq!(after.entries()[1].origin(), &Origin::Inserted { what: Inserted::Acknowledgement });
        let preserved: Vec<Option<usize>> = after.entries()[2..].iter().map(|e| e.origin().verbatim_index()).collect();
        assert_eq!(preserved, [Some(9), Some(10), Some(11), Some(12), Some(13)]);
        assert_eq!(contents(after)[2..], ["Run the tests", "", "PASS", "Now deploy", "I'll push to git"]);
        assert_eq!(out.event.removed, 9);
        assert_eq!(out.event.round, Some(1));
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
    }

    #[test]
    fn system_prompt_stays_first() {
        let s = strategy();
        let mut m = vec![Message::system("You are Goat.")];
        m.extend(refactor_session());
        let ctx = Context::from_messages(m);
        let budget = Budget::new(16_384 + 3 + 50); // len("You are Goat.") / 4 = 3
        assert_eq!(s.budget(&ctx, &budget).system_tokens, 3);
        assert_eq!(s.split(&ctx), Some(Split { body_start: 1, split: 10 }));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over 80%");
        assert_eq!(plan.requests[0].span, (1..10).collect::<Vec<_>>(), "the system prompt is never summarized");
        let out = s.apply(&ctx, &budget, &plan, &[Ok(SUMMARY_TEXT.into())]);
        assert_eq!(out.context.entries()[0].message(), ctx.entries()[0].message());
        assert_eq!(out.context.entries()[1].role(), Role::User);
        assert!(out.context.entries()[1].message().content.starts_with("[COMPACT SUMMARY]\n"));
        assert_eq!(out.context.entries()[2].message().content, "Understood.");
        assert_eq!(out.context.len(), 8);
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
    }

    #[test]
    fn tool_pair_adjustment_example() {
        // The document's picture: [user, assist+tool_use, tool_result, user, assist, user,
        // assist+tool_use, tool_result, assist], with the split proposed at the tool_result [7].
        let m = vec![
            Message::user("u0"),
            tool_use("a1", "t1", "Read"),
            Message::tool_result("t1", "Read", "r2"),
            Message::user("u3"),
            Message::assistant("a4"),
            Message::user("u5"),
            tool_use("a6", "t2", "Bash"),
            Message::tool_result("t2", "Bash", "r7"),
            Message::assistant("a8"),
        ];
        let ctx = Context::from_messages(m);
        // floor(9 x 25%) = 2 preserved puts the split on [7]; it moves to the tool_use at [6].
        let s = SplitFraction::new(Params { preserve_percent: 25, ..Params::default() }).expect("valid");
        assert_eq!(s.split(&ctx), Some(Split { body_start: 0, split: 6 }));
        let budget = window(10);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over 80%");
        let out = s.apply(&ctx, &budget, &plan, &[Ok("s".into())]);
        assert_eq!(contents(&out.context), ["[COMPACT SUMMARY]\ns", "Understood.", "a6", "r7", "a8"]);
        assert_eq!(s.promises(&ctx, &budget).recent_window, 3);
        // `Understood.` followed by the assistant tool_use: the documented alternation break.
        let found = check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out);
        assert_eq!(found.iter().map(|v| v.kind()).collect::<Vec<_>>(), [ViolationKind::RoleAlternation]);
        assert_only_documented(&s, &ctx, &budget, Trigger::Proactive, &out);
        // With the default 40%, floor(3.6) = 3 preserved: the split is already on [6].
        assert_eq!(strategy().split(&ctx), Some(Split { body_start: 0, split: 6 }));
    }

    #[test]
    fn split_walks_back_over_parallel_results() {
        // 10 messages, 4 preserved: the split at [6] is the second of two parallel results.
        let m = vec![
            Message::user("u0"),
            Message::assistant("a1"),
            Message::user("u2"),
            Message::assistant("a3"),
            Message::assistant_calls("a4", vec![call("p1", "Read"), call("p2", "Read")]),
            Message::tool_result("p1", "Read", "one"),
            Message::tool_result("p2", "Read", "two"),
            Message::assistant("a7"),
            Message::user("u8"),
            Message::assistant("a9"),
        ];
        let ctx = Context::from_messages(m);
        let s = strategy();
        assert_eq!(s.split(&ctx), Some(Split { body_start: 0, split: 4 }));
        let budget = window(10);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over 80%");
        let out = s.apply(&ctx, &budget, &plan, &[Ok("s".into())]);
        assert_eq!(out.context.len(), 8);
        assert_only_documented(&s, &ctx, &budget, Trigger::Proactive, &out);
    }

    #[test]
    fn summary_failure_falls_back_to_truncation() {
        let s = strategy();
        let ctx = Context::from_messages(refactor_session());
        let budget = window(50);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over 80%");
        let out = s.apply(&ctx, &budget, &plan, &[Err(SummaryFailure { reason: "timeout".into() })]);
        assert_eq!(
            contents(&out.context),
            [
                "[COMPACT SUMMARY]\n[Context truncated. Earlier conversation contained 9 messages about: Help me refactor]",
                "Understood.",
                "Run the tests",
                "",
                "PASS",
                "Now deploy",
                "I'll push to git",
            ]
        );
        assert_eq!(out.context.entries()[0].origin(), &Origin::Inserted { what: Inserted::TruncationNotice });
        assert_eq!(out.context.entries()[1].origin(), &Origin::Inserted { what: Inserted::Acknowledgement });
        assert_eq!(out.event.fallback.as_deref(), Some("truncate: timeout"));
        assert_eq!(out.event.round, None);
        assert_eq!(out.event.removed, 9);
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
    }

    #[test]
    fn truncation_notice_topic() {
        let long = format!("Port   the\nparser {}", "x".repeat(200));
        let ctx =
            Context::from_messages([Message::assistant("hello"), Message::user(long), Message::user("second request")]);
        let notice = truncation_notice(&ctx, 0..3);
        let topic = format!("Port the parser {}...", "x".repeat(NOTICE_TOPIC_CHARS - 16));
        assert_eq!(notice, format!("[Context truncated. Earlier conversation contained 3 messages about: {topic}]"));
        assert_eq!(
            truncation_notice(&ctx, 0..1),
            "[Context truncated. Earlier conversation contained 1 messages about: (no user request)]"
        );
        // A previous summary is not the topic when a recorded request is dropped with it.
        let ctx = Context::from_entries(vec![
            Entry::new(Message::user("[COMPACT SUMMARY]\nold"), Origin::Summary { round: 1, covers: vec![0] }),
            Entry::new(Message::assistant("Understood."), Origin::Inserted { what: Inserted::Acknowledgement }),
            Entry::recorded(5, Message::user("add caching")),
        ]);
        assert!(truncation_notice(&ctx, 0..3).ends_with("3 messages about: add caching]"));
        assert!(truncation_notice(&ctx, 0..2).ends_with("2 messages about: [COMPACT SUMMARY] old]"));
    }

    #[test]
    fn length_stop_compacts_only_over_threshold() {
        let s = strategy();
        assert!(s.reacts_to(Trigger::LengthStop));
        let ctx = Context::from_messages(refactor_session());
        let over = window(50);
        let plan = s.plan(&ctx, &over, Trigger::LengthStop).expect("ShouldCompact holds");
        assert_eq!(plan.trigger, Trigger::LengthStop);
        assert_eq!(plan.requests[0].span, (0..9).collect::<Vec<_>>());
        // Below 80% the loop exits with ExitMaxTokens: no plan.
        let roomy = window(100_000);
        assert!(!s.should_compact(&ctx, &roomy));
        assert!(s.plan(&ctx, &roomy, Trigger::LengthStop).is_none());
        assert!(proactive_plan(&s, &ctx, &roomy).is_none());
        // A rejected request is compacted regardless.
        assert!(s.plan(&ctx, &roomy, Trigger::Overflow).is_some());
    }

    /// "Compaction Flow" and the triggers table: proactive utilization and the `max_tokens`
    /// stop are the only two triggers; an over-window request is not one of them.
    #[test]
    fn reacts_to_a_max_tokens_stop_and_not_to_an_overflow_unless_asked() {
        let s = strategy();
        assert!(s.reacts_to(Trigger::LengthStop));
        assert!(!s.reacts_to(Trigger::Overflow), "the document has no overflow path");
        assert!(!Params::default().react_to_overflow);
        let on = SplitFraction::new(Params { react_to_overflow: true, ..Params::default() }).expect("valid");
        assert!(on.reacts_to(Trigger::Overflow));
        assert!(on.reacts_to(Trigger::LengthStop));
    }

    /// "FAILURE (LLM error): Fallback to simple truncation" and the failure table's "LLM
    /// summarization fails (timeout, error, empty)": an empty summary truncates too.
    #[test]
    fn an_empty_summary_falls_back_to_truncation() {
        let s = strategy();
        let ctx = Context::from_messages(refactor_session());
        let budget = window(50);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        for empty in ["", "  \n "] {
            let out = s.apply(&ctx, &budget, &plan, &[Ok(empty.to_string())]);
            assert!(out.event.fallback.as_deref().is_some_and(|f| f.starts_with("truncate")), "{empty:?}");
            assert!(out.context.entries()[0].message().content.starts_with("[COMPACT SUMMARY]\n[Context truncated."));
            assert!(out.event.summaries.is_empty());
        }
    }

    #[test]
    fn exactly_eighty_percent_does_not_compact() {
        let s = strategy();
        // System prompt of 400 bytes = 100 tokens; denominator 17,484 - 100 - 16,384 = 1,000.
        let mut m = vec![Message::system("s".repeat(400))];
        m.extend((0..10).map(|i| Message::user(format!("{i:0>304}")))); // 304 / 4 + 4 = 80 each
        let budget = Budget::new(17_484);
        let ctx = Context::from_messages(m.clone());
        let b = s.budget(&ctx, &budget);
        assert_eq!((b.system_tokens, b.message_tokens, b.denominator(), b.available()), (100, 800, 1_000, 200));
        assert_eq!(b.utilization(), 0.8);
        assert_eq!(s.estimate(&ctx), 800, "the system prompt is not in the numerator");
        assert_eq!(s.threshold(&ctx, &budget), Some(800));
        assert!(!s.should_compact(&ctx, &budget));
        assert!(proactive_plan(&s, &ctx, &budget).is_none());
        // Four more bytes: 801 / 1,000.
        m[10] = Message::user("x".repeat(308));
        let ctx = Context::from_messages(m);
        assert_eq!(s.estimate(&ctx), 801);
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over 80%");
        let out = s.apply(&ctx, &budget, &plan, &[Ok("short".into())]);
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
    }

    #[test]
    fn estimator_is_go_len_over_four_plus_four() {
        let e = LenOver4Plus4;
        assert_eq!(e.message_tokens(&Message::user("abcdefg")), 1 + 4);
        // Go's len counts bytes: "é" is 2 bytes, so 4 of them are 8 bytes.
        assert_eq!(e.message_tokens(&Message::user("éééé")), 2 + 4);
        // Only the content counts, as len(msg.content) does.
        assert_eq!(e.message_tokens(&Message::assistant_calls("", vec![call("c", "Read")])), 4);
    }

    #[test]
    fn window_below_the_output_reserve_never_compacts_proactively() {
        let s = strategy();
        let ctx = Context::from_messages(refactor_session());
        let small = Budget::new(8_000);
        assert!(s.budget(&ctx, &small).denominator() < 0);
        assert_eq!(s.threshold(&ctx, &small), None);
        assert!(!s.should_compact(&ctx, &small));
        assert!(proactive_plan(&s, &ctx, &small).is_none());
        assert!(s.plan(&ctx, &small, Trigger::Overflow).is_some());
        // A zero denominator compacts whenever there is a message (utilization is infinite).
        assert!(s.should_compact(&ctx, &window(0)));
    }

    #[test]
    fn second_round_summarizes_the_previous_pair() {
        let s = strategy();
        let budget = window(50);
        let first = Context::from_messages(refactor_session());
        let plan = s.plan(&first, &budget, Trigger::Proactive).expect("round 1");
        let mut ctx = s.apply(&first, &budget, &plan, &[Ok(SUMMARY_TEXT.into())]).context;
        for i in 0..8 {
            let m = if i % 2 == 0 { Message::user(format!("u{i}")) } else { Message::assistant(format!("a{i}")) };
            ctx.push(Entry::recorded(14 + i, m));
        }
        assert_eq!(ctx.len(), 15);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("round 2");
        assert_eq!(plan.requests[0].span, (0..9).collect::<Vec<_>>(), "the old pair is summarized too");
        assert_eq!(plan.requests[0].round, 2);
        let out = s.apply(&ctx, &budget, &plan, &[Ok("round two".into())]);
        assert_eq!(out.context.summaries().count(), 1);
        let covers: Vec<usize> = (0..9).chain(9..14).chain(14..16).collect();
        assert_eq!(out.context.entries()[0].origin(), &Origin::Summary { round: 2, covers });
        assert_only_documented(&s, &ctx, &budget, Trigger::Proactive, &out);
    }

    #[test]
    fn small_contexts() {
        let s = strategy();
        let budget = window(0);
        assert!(s.plan(&Context::new(), &budget, Trigger::Overflow).is_none());
        let one = Context::from_messages([Message::system("sys"), Message::user("x".repeat(1_000))]);
        assert!(s.plan(&one, &budget, Trigger::Overflow).is_none(), "one message is kept, none summarized");
        let two = Context::from_messages([Message::user("a".repeat(1_000)), Message::assistant("b")]);
        assert_eq!(s.split(&two), Some(Split { body_start: 0, split: 1 }));
    }

    #[test]
    fn params_are_validated_and_strict() {
        assert!(SplitFraction::new(Params { threshold_percent: 0, ..Params::default() }).is_err());
        assert!(SplitFraction::new(Params { threshold_percent: 101, ..Params::default() }).is_err());
        let e = SplitFraction::new(Params { preserve_percent: 100, ..Params::default() }).err();
        assert_eq!(e.map(|e| e.param), Some("preserve_percent"));
        let p: Params = serde_json::from_str(r#"{"max_output_tokens": 4096}"#).expect("valid");
        assert_eq!(p, Params { max_output_tokens: 4_096, ..Params::default() });
        assert!(serde_json::from_str::<Params>(r#"{"keep_fraction": 0.4}"#).is_err());
    }
}
