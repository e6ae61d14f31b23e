//! `keep-last-n`: the agent compaction layer with chained summaries (seed 001).
//!
//! The document's rules, as its code has them:
//!
//! - **Estimate**: `estimateMessagesTokens`, 2 tokens per message plus `ceil(text / 4)` for its
//!   text, each tool call's name and JSON arguments, and each tool result's
//!   `JSON.stringify(result)` ([`CharsOver4Plus2`]). The whole list is counted, system prompt
//!   included.
//! - **Trigger**: `shouldCompact` is true when there are more than `recentMessagesToKeep + 1`
//!   messages and the estimate is *at or above* `floor((limit - systemReserve - outputReserve -
//!   safetyBuffer) x thresholdPercent)` (`KeepLastNBudget`; 93,600 for a 128,000 window with
//!   the defaults). The limit is [`Budget::context_window`]. Because the [`Strategy`] trait
//!   compacts when the estimate is strictly above its threshold, [`Strategy::threshold`] returns
//!   the document's number minus one.
//! - **Selection** (`selectMessagesToCompact`): message 0 is kept (the document assumes the
//!   system prompt is there, and keeps message 0 whatever it is); the boundary starts at
//!   `len - recentMessagesToKeep` and walks back while it points at a tool message, so no tool
//!   result is separated from its call. Message 1 is the previous summary when it is an
//!   assistant message starting with `## Session Summary`, or an entry this crate marked as a
//!   summary ([`Origin::Summary`]); it is then passed as the previous summary instead of being
//!   summarized, and compaction starts at 2. If the boundary is at or before the start there is
//!   nothing to compact.
//! - **Summary**: one [`prompt`] request for the span, with the previous
//!   summary, the original task (`extractOriginalTask`: the first user message *of the current
//!   context*, so after the first round it is the first user message still in context; the
//!   previous summary carries the verbatim task forward), and round N = previous round + 1. The
//!   document reads the round from its database; here it is the highest round of a summary in
//!   the context, or the `Round N` in a recorded `## Session Summary` heading.
//! - **Placement**: the summary text, unwrapped (the document sets `content: summaryContent`),
//!   as an assistant message at index 1, followed by the kept messages.
//! - **Failure**: `safeCompact` returns the messages unchanged ([`Fallback::Unchanged`]).
//!
//! Contradictions and deviations, noted rather than changed:
//!
//! - The summary prompt asks for a `### Session Summary (Compaction Round N)` heading (three
//!   hashes) while detection looks for `## Session Summary` (two), as does the document's
//!   template. A summary written to the prompt's letter would not be detected by text; chaining
//!   still works here because our summaries carry [`Origin::Summary`].
//! - An assistant summary at index 1 sits after the system prompt where a user message used to
//!   be, and next to the first kept message when that is an assistant message (the document's
//!   own example keeps `[40] assistant`). The Anthropic role alternation is broken by design, so
//!   [`ViolationKind::RoleAlternation`] is a documented deviation.
//! - The document has no reactive path: nothing catches a context-length error, so the strategy
//!   does not react to [`Trigger::Overflow`] (`react_to_overflow = false`, the parameter turns
//!   it on) or [`Trigger::LengthStop`]. A caller that forces a plan with those triggers gets the
//!   same selection without the threshold check.
//! - The span reaches the summarizer cut as `formatMessagesForSummary` cuts it (2,000
//!   characters per message, 500 per tool result): [`INPUT_CUTS`] travels on the request, so
//!   the offline summarizer reads the same cut text as the LLM path. The prompt's 800-token
//!   target travels with the request ([`Params::summary_target_tokens`]) under the 1,000-token
//!   cap.
//! - An empty summary is a failed one (the context is left unchanged), as for every strategy.
//!
//! **What a provider refuses (a finding about the document).** The document puts its
//! `## Session Summary` as an assistant message at index 1, right after the system prompt.
//! The OpenAI Chat Completions API accepts that; the Anthropic Messages API refuses a
//! conversation whose first message is not a user message (`first_not_user`), so every
//! request after the first compaction would be refused there as written. Declared in
//! `documented_rejections`, counted in `rejected_requests_anthropic`, not hidden.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ParamError;
use compaction::context::{Context, Entry, Origin};
use compaction::message::Role;
use compaction::request::{Provider, RequestRule};
use compaction::tokens::{CharsOver4Plus2, TokenCounter};
use compaction::ViolationKind;
use compaction::{
    apply_layout, covered, Budget, Compacted, Fallback, InputCuts, Plan, Profile, Promises, Prompt, Slot, Strategy,
    SummaryOutcome, SummaryRequest, Transcript, Trigger,
};

/// The document's summary prompt (`keep_last_n/session_summary.md`,
/// beside this module): `generateSummary`'s prompts, the span written by
/// `formatMessagesForSummary` ([`Transcript::Indexed`]), temperature 0.3, the model's text
/// taken whatever it is, and the code's "None - this is the first compaction round." and
/// "Unknown task" where it has no value.
pub fn prompt() -> Prompt {
    Prompt {
        transcript: Transcript::Indexed,
        temperature: Some(0.3),
        empty_fails: false,
        defaults: vec![("previous".into(), NO_PREVIOUS_SUMMARY.into()), ("task".into(), UNKNOWN_TASK.into())],
        heading: Some(format!("{SUMMARY_HEADING} (Compaction Round {{round}})")),
        ..Prompt::new("session_summary", include_str!("keep_last_n/session_summary.md"))
    }
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Summarizes everything between the system prompt and the last 10 messages into one chained \
     `## Session Summary` assistant message at index 1 once chars/4 + 2 per message reaches 80% of the window \
     minus reserves; leaves the context unchanged if the summary fails.";

/// The heading that marks a previous summary at index 1.
pub const SUMMARY_HEADING: &str = "## Session Summary";

/// What the document's code calls the task when no user message is found.
pub const UNKNOWN_TASK: &str = "Unknown task";

/// What the document's code writes for the previous summary in the first round.
pub const NO_PREVIOUS_SUMMARY: &str = "None - this is the first compaction round.";

/// Parameters of `keep-last-n`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Tokens reserved for the system prompt and tool definitions, subtracted from the context
    /// window before the threshold is taken (`systemReserve`).
    pub system_reserve: u64,
    /// Tokens reserved for the model's response, subtracted from the context window
    /// (`outputReserve`).
    pub output_reserve: u64,
    /// Tokens held back for the heuristic's variance, subtracted from the context window
    /// (`safetyBuffer`).
    pub safety_buffer: u64,
    /// Compact when the estimate reaches this fraction (0 < x <= 1) of the window left after the
    /// reserves, rounded down (`thresholdPercent`).
    pub threshold_percent: f64,
    /// Messages kept verbatim at the end, besides the system prompt; the boundary moves earlier
    /// so that no tool result loses its call (`recentMessagesToKeep`, at least 1).
    pub recent_messages_to_keep: usize,
    /// Upper bound on the summary's length in tokens (`maxTokens` of the summary call; the
    /// prompt itself asks for at most 800).
    pub summary_max_tokens: u32,
    /// The summary length the prompt asks for ("Maximum 800 tokens"), sent with the request as
    /// its target; the 1,000-token `maxTokens` is a buffer above it. At most
    /// `summary_max_tokens`.
    pub summary_target_tokens: u32,
    /// React to an over-window request by compacting without the threshold check (the
    /// document has no such path: nothing catches a context-length error).
    pub react_to_overflow: bool,
}

/// How `formatMessagesForSummary` cuts the span: each message's text (content and its tool
/// calls) to 2,000 characters, each tool result's JSON string to 500.
pub const INPUT_CUTS: InputCuts = InputCuts { message_chars: Some(2_000), tool_result_chars: Some(500) };

impl Default for Params {
    fn default() -> Params {
        Params {
            system_reserve: 2_000,
            output_reserve: 4_000,
            safety_buffer: 5_000,
            threshold_percent: 0.80,
            recent_messages_to_keep: 10,
            summary_max_tokens: 1_000,
            summary_target_tokens: 800,
            react_to_overflow: false,
        }
    }
}

/// The document's `calculateThreshold`, for one context window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct KeepLastNBudget {
    /// The model's context window (`modelContextLimit`).
    pub model_context_limit: u64,
    pub system_reserve: u64,
    pub output_reserve: u64,
    pub safety_buffer: u64,
    pub threshold_percent: f64,
}

impl KeepLastNBudget {
    pub fn new(params: &Params, budget: &Budget) -> KeepLastNBudget {
        KeepLastNBudget {
            model_context_limit: budget.context_window,
            system_reserve: params.system_reserve,
            output_reserve: params.output_reserve,
            safety_buffer: params.safety_buffer,
            threshold_percent: params.threshold_percent,
        }
    }
    /// `limit - systemReserve - outputReserve - safetyBuffer`; negative when the window is
    /// smaller than the reserves.
    pub fn available(&self) -> i128 {
        i128::from(self.model_context_limit)
            - i128::from(self.system_reserve)
            - i128::from(self.output_reserve)
            - i128::from(self.safety_buffer)
    }
    /// `Math.floor(available * thresholdPercent)`, in the same double-precision arithmetic as
    /// the document. Compaction fires when the estimate is at or above it; at or below zero it
    /// fires whenever there are enough messages.
    pub fn threshold(&self) -> i128 {
        (self.available() as f64 * self.threshold_percent).floor() as i128
    }
    /// The same trigger in the [`Strategy`] trait's form (compact when the estimate is strictly
    /// above): the document's threshold minus one, and 0 when that is negative.
    pub fn strict_threshold(&self) -> u64 {
        u64::try_from((self.threshold() - 1).max(0)).unwrap_or(u64::MAX)
    }
    /// `tokenCount >= threshold`.
    pub fn reached(&self, estimate: u64) -> bool {
        i128::from(estimate) >= self.threshold()
    }
}

/// The `keep-last-n` strategy.
#[derive(Debug, Clone)]
pub struct KeepLastN {
    params: Params,
    estimator: CharsOver4Plus2,
}

/// The previous summary found at index 1.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PreviousSummary {
    pub text: String,
    /// Its round, when known (from its origin or its heading).
    pub round: Option<u32>,
}

/// What `selectMessagesToCompact` chose.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    /// First entry to summarize: 1, or 2 after a previous summary.
    pub start: usize,
    /// First entry kept after the summary.
    pub boundary: usize,
    pub previous: Option<PreviousSummary>,
}

impl KeepLastN {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<KeepLastN, ParamError> {
        const NAME: &str = "keep-last-n";
        if !(params.threshold_percent.is_finite() && params.threshold_percent > 0.0 && params.threshold_percent <= 1.0)
        {
            return Err(ParamError::new(NAME, "threshold_percent", "must be a fraction in (0, 1]"));
        }
        if params.recent_messages_to_keep == 0 {
            return Err(ParamError::new(NAME, "recent_messages_to_keep", "must be at least 1"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new(NAME, "summary_max_tokens", "must be at least 1"));
        }
        if params.summary_target_tokens == 0 {
            return Err(ParamError::new(NAME, "summary_target_tokens", "must be at least 1"));
        }
        if params.summary_target_tokens > params.summary_max_tokens {
            return Err(ParamError::new(
                NAME,
                "summary_target_tokens",
                format!("must be at most summary_max_tokens ({})", params.summary_max_tokens),
            ));
        }
        Ok(KeepLastN { params, estimator: CharsOver4Plus2 })
    }
    /// The parameters it was built with.
    pub fn params(&self) -> &Params {
        &self.params
    }
    /// The document's threshold arithmetic for `budget`.
    pub(crate) fn budget(&self, budget: &Budget) -> KeepLastNBudget {
        KeepLastNBudget::new(&self.params, budget)
    }

    /// The document's `selectMessagesToCompact`; `None` when there is nothing to compact.
    pub(crate) fn select(&self, ctx: &Context) -> Option<Selection> {
        let n = ctx.len();
        let keep = self.params.recent_messages_to_keep;
        if n <= keep + 1 {
            return None;
        }
        let entries = ctx.entries();
        let mut boundary = n - keep;
        while boundary > 1 && entries[boundary].role() == Role::Tool {
            boundary -= 1;
        }
        let previous = previous_summary(ctx);
        let start = if previous.is_some() { 2 } else { 1 };
        if boundary <= start {
            return None;
        }
        Some(Selection { start, boundary, previous })
    }
}

/// Message 1 when it is a previous summary: an assistant text starting with
/// [`SUMMARY_HEADING`], or an entry marked [`Origin::Summary`].
pub(crate) fn previous_summary(ctx: &Context) -> Option<PreviousSummary> {
    let e = ctx.get(1)?;
    let m = e.message();
    match e.origin() {
        Origin::Summary { round, .. } => Some(PreviousSummary { text: m.content.clone(), round: Some(*round) }),
        _ if m.role == Role::Assistant && m.content.starts_with(SUMMARY_HEADING) => {
            Some(PreviousSummary { text: m.content.clone(), round: heading_round(&m.content) })
        }
        _ => None,
    }
}

/// The `N` of `Round N` in a summary's first line.
fn heading_round(text: &str) -> Option<u32> {
    let line = text.lines().next()?;
    let at = line.find("Round ")? + "Round ".len();
    let digits: String = line[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// The document's `extractOriginalTask`: the first user message of the context.
pub fn original_task(ctx: &Context) -> String {
    ctx.messages().find(|m| m.role == Role::User).map(|m| m.content.clone()).unwrap_or_else(|| UNKNOWN_TASK.into())
}

impl Strategy for KeepLastN {
    fn profile(&self) -> Profile {
        Profile {
            documented_rejections: vec![(Provider::AnthropicMessages, RequestRule::FirstNotUser)],
            ..Profile::default()
        }
    }
    fn name(&self) -> &'static str {
        "keep-last-n"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.estimator
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        Some(self.budget(budget).strict_threshold())
    }
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        ctx.len() > self.params.recent_messages_to_keep + 1 && self.budget(budget).reached(self.estimate(ctx))
    }
    fn reacts_to(&self, trigger: Trigger) -> bool {
        trigger == Trigger::Overflow && self.params.react_to_overflow
    }
    fn plan(&self, ctx: &Context, _budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let sel = self.select(ctx)?;
        let previous_round = sel.previous.as_ref().and_then(|p| p.round).unwrap_or(0);
        let round = previous_round.max(ctx.last_round()) + 1;
        let mut layout = vec![
            Slot::Keep { index: 0 },
            Slot::Summary { request: 0, role: Role::Assistant, prefix: String::new(), suffix: String::new() },
        ];
        layout.extend((sel.boundary..ctx.len()).map(|index| Slot::Keep { index }));
        let request = SummaryRequest {
            span: (sel.start..sel.boundary).collect(),
            prompt: prompt(),
            previous: sel.previous.as_ref().map(|p| p.text.clone()),
            task: Some(original_task(ctx)),
            max_tokens: self.params.summary_max_tokens,
            target_tokens: Some(self.params.summary_target_tokens.min(self.params.summary_max_tokens)),
            target_chars: None,
            input: INPUT_CUTS,
            round,
        };
        let mut notes = serde_json::Map::new();
        notes.insert("boundary".into(), sel.boundary.into());
        notes.insert("compaction_start".into(), sel.start.into());
        notes.insert("previous_summary".into(), sel.previous.is_some().into());
        Some(Plan {
            trigger,
            layout,
            requests: vec![request],
            fallback: Fallback::Unchanged,
            step: "summarize".into(),
            notes,
        })
    }
    /// The standard layout, then the new summary's coverage is widened to what the previous
    /// summary it integrates stood for.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        let mut out = apply_layout(self, ctx, budget, plan, summaries);
        let integrates_previous = plan.requests.first().is_some_and(|r| r.previous.is_some() && !r.span.contains(&1))
            && previous_summary(ctx).is_some();
        if out.event.fallback.is_some() || !integrates_previous {
            return out;
        }
        let inherited = covered(ctx, &[1]);
        let entries: Vec<Entry> = out
            .context
            .entries()
            .iter()
            .map(|e| match e.origin() {
                Origin::Summary { round, covers } => {
                    let mut all: Vec<usize> = covers.iter().chain(&inherited).copied().collect();
                    all.sort_unstable();
                    all.dedup();
                    Entry::new(e.message().clone(), Origin::Summary { round: *round, covers: all })
                }
                _ => e.clone(),
            })
            .collect();
        out.context = Context::from_entries(entries);
        out
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        let recent_window = self.select(ctx).map_or(ctx.len(), |s| ctx.len() - s.boundary);
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
    use compaction::message::{Message, ToolCall};
    use compaction::tokens::Exact;
    use compaction::SummaryFailure;
    use testkit::summaries::proactive_plan;

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: args.into() }
    }

    fn step(text: &str, id: &str, result: &str) -> [Message; 2] {
        [
            Message::assistant_calls(text, vec![call(id, "write_file", r#"{"path":"src/app.ts"}"#)]),
            Message::tool_result(id, "write_file", result),
        ]
    }

    /// The document's visual example: 50 messages, tool results of `result_chars` characters.
    fn flashcard_session(result_chars: usize) -> Vec<Message> {
        let body = "x".repeat(result_chars);
        let mut m = vec![Message::system("You are a coding agent."), Message::user("Build a flashcard app")];
        for i in (2..40).step_by(2) {
            let text = if i == 2 { "I'll start by...".to_string() } else { format!("Now let's... (step {i})") };
            m.extend(step(&text, &format!("c{i}"), &body));
        }
        m.extend(step("Adding SM-2...", "c40", &body));
        m.extend(step("Testing...", "c42", &body));
        m.extend(step("Fixing type error...", "c44", &body));
        m.push(Message::assistant("All tests pass"));
        m.push(Message::user("Add AI integration"));
        m.extend(step("I'll add OpenAI...", "c48", &body));
        assert_eq!(m.len(), 50);
        m
    }

    fn strategy() -> KeepLastN {
        KeepLastN::new(Params::default()).expect("defaults are valid")
    }

    fn summary_text(round: u32) -> String {
        format!("## Session Summary (Compaction Round {round})\n\n### Original Task\nBuild a flashcard app")
    }

    /// Every violation the checker finds is one the document causes on purpose.
    fn assert_only_documented(s: &KeepLastN, before: &Context, budget: &Budget, trigger: Trigger, out: &Compacted) {
        let documented = s.promises(before, budget).documented_deviations;
        for v in check_compaction(s, before, budget, trigger, out) {
            assert!(documented.contains(&v.kind()), "undocumented violation: {v}");
        }
    }

    fn recorded_indices(ctx: &Context) -> Vec<Option<usize>> {
        ctx.entries().iter().map(|e| e.origin().verbatim_index()).collect()
    }

    #[test]
    fn default_threshold_is_93_600() {
        let b = KeepLastNBudget::new(&Params::default(), &Budget::new(128_000));
        assert_eq!(b.available(), 117_000);
        assert_eq!(b.threshold(), 93_600);
        assert_eq!(strategy().threshold(&Context::new(), &Budget::new(128_000)), Some(93_599));
        // The document's other model limits.
        assert_eq!(KeepLastNBudget::new(&Params::default(), &Budget::new(200_000)).threshold(), 151_200);
        // gpt-4's 8,192 window is smaller than the reserves: the threshold is negative.
        assert_eq!(KeepLastNBudget::new(&Params::default(), &Budget::new(8_192)).threshold(), -2_247);
    }

    #[test]
    fn trigger_is_at_or_above_the_threshold() {
        // 12,000 - 11,000 = 1,000 available, threshold 800.
        let budget = Budget::new(12_000);
        let s = strategy();
        let mut msgs: Vec<Message> = (0..11).map(|_| Message::user("abcd")).collect(); // 3 tokens each
        msgs.push(Message::assistant("y".repeat(3_060))); // 2 + 765
        let at = Context::from_messages(msgs.clone());
        assert_eq!(s.estimate(&at), 800);
        assert!(s.should_compact(&at, &budget));
        msgs[11] = Message::assistant("y".repeat(3_056)); // 2 + 764
        let below = Context::from_messages(msgs);
        assert_eq!(s.estimate(&below), 799);
        assert!(!s.should_compact(&below, &budget));
        assert!(proactive_plan(&s, &below, &budget).is_none());
    }

    #[test]
    fn estimator_follows_estimate_messages_tokens() {
        let e = CharsOver4Plus2;
        // Role 2 + ceil(5 / 4).
        assert_eq!(e.message_tokens(&Message::user("abcde")), 4);
        // Empty text counts 0; the call counts ceil(9 / 4) + ceil(15 / 4).
        let m = Message::assistant_calls("", vec![call("c1", "read_file", r#"{"path":"a.rs"}"#)]);
        assert_eq!(e.message_tokens(&m), 2 + 3 + 4);
        // A text result is a string: JSON.stringify adds quotes and escapes the newline (14 chars).
        assert_eq!(e.message_tokens(&Message::tool_result("c1", "read_file", "line1\nline2")), 2 + 4);
        // An empty result still stringifies to `""`.
        assert_eq!(e.message_tokens(&Message::tool_result("c1", "read_file", "")), 2 + 1);
        // A JSON object result counts as its compact serialization `{"a":1}` (7 chars).
        assert_eq!(e.message_tokens(&Message::tool_result("c1", "api", "{ \"a\": 1 }")), 2 + 2);
        // Lengths are UTF-16 code units: an emoji is 2.
        assert_eq!(e.message_tokens(&Message::user("\u{1F600}\u{1F600}\u{1F600}")), 2 + 2);
    }

    #[test]
    fn estimate_over_counts_english_prose() {
        // The document's rationale: chars/4 slightly over-counts English text.
        let text = "The compaction layer summarizes older conversation history when the token count \
                    approaches the model's context window, so that long agent sessions never overflow.";
        assert!(compaction::tokens::js_ceil4(text) >= Exact::o200k().count(text));
        assert!(compaction::tokens::js_ceil4(text) >= Exact::cl100k().count(text));
    }

    #[test]
    fn fifty_message_example() {
        let budget = Budget::new(128_000);
        let s = strategy();
        let ctx = Context::from_messages(flashcard_session(17_000));
        assert!(s.estimate(&ctx) >= 93_600);
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over threshold");
        assert_eq!(plan.requests.len(), 1);
        let req = &plan.requests[0];
        assert_eq!(req.span, (1..40).collect::<Vec<_>>());
        assert_eq!(req.prompt, prompt());
        assert_eq!(req.previous, None);
        assert_eq!(req.task.as_deref(), Some("Build a flashcard app"));
        assert_eq!(req.round, 1);
        assert_eq!(req.max_tokens, 1_000);
        assert_eq!(req.target_tokens, Some(800));
        assert_eq!(plan.fallback, Fallback::Unchanged);

        let out = s.apply(&ctx, &budget, &plan, &[Ok(summary_text(1))]);
        let after = &out.context;
        assert_eq!(after.len(), 12);
        assert_eq!(after.entries()[0].message(), ctx.entries()[0].message());
        let summary = &after.entries()[1];
        assert_eq!(summary.role(), Role::Assistant);
        assert_eq!(summary.message().content, summary_text(1), "the summary is inserted unwrapped");
        assert_eq!(summary.origin(), &Origin::Summary { round: 1, covers: (1..40).collect() });
        let mut expected = vec![Some(0), None];
        expected.extend((40..50).map(Some));
        assert_eq!(recorded_indices(after), expected);
        assert_eq!(after.entries()[2].message().content, "Adding SM-2...");
        assert_eq!(out.event.removed, 39);
        assert_eq!(out.event.round, Some(1));
        assert!(out.event.estimate_after < out.event.estimate_before);
        assert_only_documented(&s, &ctx, &budget, Trigger::Proactive, &out);
        // [1] assistant summary then [2] assistant "Adding SM-2...": the documented break.
        let kinds: Vec<_> =
            check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).iter().map(|v| v.kind()).collect();
        assert!(kinds.contains(&ViolationKind::RoleAlternation));
    }

    #[test]
    fn below_threshold_is_a_noop() {
        let ctx = Context::from_messages(flashcard_session(100));
        let budget = Budget::new(128_000);
        assert!(!strategy().should_compact(&ctx, &budget));
        assert!(proactive_plan(&strategy(), &ctx, &budget).is_none());
    }

    #[test]
    fn boundary_walks_back_over_tool_messages() {
        // [0] system, [1] user, [2..8) chatter, [8] assistant with three parallel calls,
        // [9..12) their results, [12..20) chatter: keepLast 10 puts the boundary on [10].
        let mut m = vec![Message::system("sys"), Message::user("task")];
        for i in 2..8 {
            m.push(if i % 2 == 0 { Message::assistant(format!("a{i}")) } else { Message::user(format!("u{i}")) });
        }
        m.push(Message::assistant_calls(
            "reading three files",
            vec![call("p1", "read", "{}"), call("p2", "read", "{}"), call("p3", "read", "{}")],
        ));
        m.push(Message::tool_result("p1", "read", "one"));
        m.push(Message::tool_result("p2", "read", "two"));
        m.push(Message::tool_result("p3", "read", "three"));
        while m.len() < 20 {
            let i = m.len();
            m.push(if i % 2 == 0 { Message::user(format!("u{i}")) } else { Message::assistant(format!("a{i}")) });
        }
        let ctx = Context::from_messages(m);
        assert_eq!(ctx.entries()[10].role(), Role::Tool);
        let s = strategy();
        let sel = s.select(&ctx).expect("something to compact");
        assert_eq!(sel.boundary, 8, "walked back over [10] and [9] to the calling message");
        assert_eq!(s.promises(&ctx, &Budget::new(0)).recent_window, 12);
        // A window below the reserves: the threshold is negative, so any long context compacts.
        let budget = Budget::new(8_192);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("compacts");
        assert_eq!(plan.requests[0].span, (1..8).collect::<Vec<_>>());
        let out = s.apply(&ctx, &budget, &plan, &[Ok(summary_text(1))]);
        assert_eq!(out.context.len(), 14);
        assert_eq!(out.context.entries()[2].message().tool_calls.len(), 3);
        assert_only_documented(&s, &ctx, &budget, Trigger::Proactive, &out);
    }

    #[test]
    fn walk_back_to_index_one_leaves_nothing_to_compact() {
        // [1] calls 13 tools, [2..15) are their results: the boundary walks back to 1.
        let calls: Vec<ToolCall> = (0..13).map(|i| call(&format!("t{i}"), "grep", "{}")).collect();
        let mut m = vec![Message::system("sys"), Message::assistant_calls("searching", calls)];
        m.extend((0..13).map(|i| Message::tool_result(format!("t{i}"), "grep", "hit")));
        let ctx = Context::from_messages(m);
        let s = strategy();
        assert!(s.select(&ctx).is_none());
        assert!(s.should_compact(&ctx, &Budget::new(0)), "the trigger fires, the selection finds nothing");
        assert!(s.plan(&ctx, &Budget::new(0), Trigger::Proactive).is_none());
    }

    #[test]
    fn too_few_messages_never_compact() {
        let s = strategy();
        let budget = Budget::new(0);
        assert!(!s.should_compact(&Context::new(), &budget));
        assert!(s.plan(&Context::new(), &budget, Trigger::Proactive).is_none());
        let one = Context::from_messages([Message::system("x".repeat(1_000_000))]);
        assert!(!s.should_compact(&one, &budget));
        // keepLast + 1 = 11 messages, however large, is too few.
        let eleven = Context::from_messages((0..11).map(|_| Message::user("x".repeat(100_000))));
        assert!(!s.should_compact(&eleven, &budget));
        assert!(s.plan(&eleven, &budget, Trigger::Overflow).is_none());
        let twelve = Context::from_messages((0..12).map(|_| Message::user("x".repeat(100_000))));
        assert!(s.should_compact(&twelve, &budget));
        assert_eq!(s.plan(&twelve, &budget, Trigger::Proactive).expect("compacts").requests[0].span, vec![1]);
    }

    #[test]
    fn round_two_integrates_the_previous_summary() {
        let budget = Budget::new(128_000);
        let s = strategy();
        let first = Context::from_messages(flashcard_session(17_000));
        let plan = s.plan(&first, &budget, Trigger::Proactive).expect("round 1");
        let mut ctx = s.apply(&first, &budget, &plan, &[Ok(summary_text(1))]).context;
        let body = "x".repeat(17_000);
        for i in 0..20 {
            for m in step(&format!("More work {i}"), &format!("d{i}"), &body) {
                let index = 50 + ctx.len() - 12;
                ctx.push(Entry::recorded(index, m));
            }
        }
        assert_eq!(ctx.len(), 52);
        assert!(s.should_compact(&ctx, &budget));
        let sel = s.select(&ctx).expect("something to compact");
        assert_eq!((sel.start, sel.boundary), (2, 42));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("round 2");
        let req = &plan.requests[0];
        assert_eq!(req.span, (2..42).collect::<Vec<_>>(), "the previous summary is not summarized again");
        assert_eq!(req.previous.as_deref(), Some(summary_text(1).as_str()));
        assert_eq!(req.round, 2);
        // extractOriginalTask reads the current messages: the first user message still in context.
        assert_eq!(req.task.as_deref(), Some("Add AI integration"));

        let out = s.apply(&ctx, &budget, &plan, &[Ok(summary_text(2))]);
        assert_eq!(out.context.len(), 12);
        assert_eq!(out.context.summaries().count(), 1);
        let (i, summary) = out.context.summaries().next().expect("one summary");
        assert_eq!(i, 1);
        assert_eq!(summary.message().content, summary_text(2));
        // Round 1 covered [1..40); round 2 summarized [40..50) and the first 30 new messages.
        assert_eq!(summary.origin(), &Origin::Summary { round: 2, covers: (1..80).collect() });
        assert_eq!(out.event.round, Some(2));
        assert_only_documented(&s, &ctx, &budget, Trigger::Proactive, &out);
    }

    #[test]
    fn previous_summary_detected_by_heading() {
        let mut m = vec![
            Message::system("sys"),
            Message::assistant("## Session Summary (Compaction Round 3)\n\n### Original Task\nport the parser"),
        ];
        m.extend((0..12).map(|i| {
            if i % 2 == 0 {
                Message::user(format!("u{i}"))
            } else {
                Message::assistant(format!("a{i}"))
            }
        }));
        let ctx = Context::from_messages(m.clone());
        let s = strategy();
        let plan = s.plan(&ctx, &Budget::new(0), Trigger::Proactive).expect("compacts");
        let req = &plan.requests[0];
        assert_eq!(req.span, vec![2, 3]);
        assert!(req.previous.as_deref().is_some_and(|p| p.contains("port the parser")));
        assert_eq!(req.round, 4);
        let out = s.apply(&ctx, &Budget::new(0), &plan, &[Ok("## Session Summary (Compaction Round 4)".into())]);
        let covers = match out.context.entries()[1].origin() {
            Origin::Summary { covers, .. } => covers.clone(),
            other => panic!("expected a summary, got {other:?}"),
        };
        assert_eq!(covers, vec![1, 2, 3], "the recorded summary's index is covered");

        // The prompt's own `###` heading is not what detection looks for: summarized as a message.
        m[1] = Message::assistant("### Session Summary (Compaction Round 3)");
        let ctx = Context::from_messages(m.clone());
        let req = &s.plan(&ctx, &Budget::new(0), Trigger::Proactive).expect("compacts").requests[0];
        assert_eq!((req.span.clone(), req.previous.clone(), req.round), (vec![1, 2, 3], None, 1));
        // Detection needs an assistant message.
        m[1] = Message::user("## Session Summary (Compaction Round 3)");
        assert!(previous_summary(&Context::from_messages(m)).is_none());
    }

    #[test]
    fn summary_failure_returns_messages_unchanged() {
        let budget = Budget::new(128_000);
        let s = strategy();
        let ctx = Context::from_messages(flashcard_session(17_000));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over threshold");
        let out = s.apply(&ctx, &budget, &plan, &[Err(SummaryFailure { reason: "timeout".into() })]);
        assert_eq!(out.context.to_messages(), ctx.to_messages());
        assert_eq!(recorded_indices(&out.context), recorded_indices(&ctx));
        assert!(out.event.is_noop());
        assert_eq!(out.event.fallback.as_deref(), Some("unchanged: timeout"));
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
    }

    /// `formatMessagesForSummary`: content over 2,000 characters is cut, tool results are
    /// `JSON.stringify(result).slice(0, 500)`. The cuts travel on the request, so the offline
    /// summarizer reads what the LLM would.
    #[test]
    fn the_span_is_cut_to_2000_characters_and_results_to_500() {
        let budget = Budget::new(128_000);
        let s = strategy();
        let ctx = Context::from_messages(flashcard_session(17_000));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over threshold");
        assert_eq!(plan.requests[0].input, InputCuts { message_chars: Some(2_000), tool_result_chars: Some(500) });
        let result = ctx.entries().iter().find(|e| e.role() == Role::Tool).expect("a tool result").message();
        assert_eq!(plan.requests[0].input.apply(result).content.chars().count(), 500);
        let long = compaction::message::Message::user("x".repeat(2_500));
        assert_eq!(plan.requests[0].input.apply(&long).content.chars().count(), 2_000);
    }

    /// Every strategy: an empty summary is a failed one; `safeCompact` then returns the
    /// messages unchanged.
    #[test]
    fn an_empty_summary_returns_messages_unchanged() {
        let budget = Budget::new(128_000);
        let s = strategy();
        let ctx = Context::from_messages(flashcard_session(17_000));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("over threshold");
        let out = s.apply(&ctx, &budget, &plan, &[Ok(String::new())]);
        assert_eq!(out.context.to_messages(), ctx.to_messages());
        assert_eq!(out.event.fallback.as_deref(), Some("unchanged: empty summary"));
    }

    #[test]
    fn no_reactive_path() {
        let s = strategy();
        assert!(!s.reacts_to(Trigger::Overflow));
        assert!(!s.reacts_to(Trigger::LengthStop));
        assert!(!Params::default().react_to_overflow);
        let on = KeepLastN::new(Params { react_to_overflow: true, ..Params::default() }).expect("valid");
        assert!(on.reacts_to(Trigger::Overflow) && !on.reacts_to(Trigger::LengthStop));
        // Forced by a caller, the selection still applies without the threshold.
        let ctx = Context::from_messages(flashcard_session(10));
        let plan = s.plan(&ctx, &Budget::new(128_000), Trigger::Overflow).expect("forced");
        assert_eq!(plan.requests[0].span, (1..40).collect::<Vec<_>>());
    }

    #[test]
    fn params_are_validated_and_strict() {
        assert!(KeepLastN::new(Params { threshold_percent: 0.0, ..Params::default() }).is_err());
        assert!(KeepLastN::new(Params { summary_target_tokens: 0, ..Params::default() }).is_err());
        let e = KeepLastN::new(Params { summary_target_tokens: 1_001, ..Params::default() }).err();
        assert_eq!(e.map(|e| e.param), Some("summary_target_tokens"), "the target is at most the maximum");
        assert!(KeepLastN::new(Params { summary_target_tokens: 1_000, ..Params::default() }).is_ok());
        assert!(KeepLastN::new(Params { threshold_percent: 1.5, ..Params::default() }).is_err());
        assert!(KeepLastN::new(Params { threshold_percent: f64::NAN, ..Params::default() }).is_err());
        let e = KeepLastN::new(Params { recent_messages_to_keep: 0, ..Params::default() }).err();
        assert_eq!(e.map(|e| e.param), Some("recent_messages_to_keep"));
        let p: Params = serde_json::from_str(r#"{"recent_messages_to_keep": 4}"#).expect("valid");
        assert_eq!(p, Params { recent_messages_to_keep: 4, ..Params::default() });
        assert!(serde_json::from_str::<Params>(r#"{"keep_last": 4}"#).is_err());
    }
}
