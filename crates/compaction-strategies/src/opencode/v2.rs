//! OpenCode's "compact v2" engine (`engine = "v2"`), from anomalyco/opencode
//! `packages/core/src/session/compaction.ts` at 031a4a9cf65fb42437571d5aa5962ceb2247ab51
//! (`DEFAULT_BUFFER = 20_000`, `DEFAULT_KEEP_TOKENS = 15_000`, `OUTPUT_TOKEN_MAX = 32_000`,
//! `TOOL_OUTPUT_MAX_CHARS = 2_000`, `required`, `findTailStart`, `serializeRecentMessage`,
//! `buildPrompt`, `hasSummarySection`, the reminder request) and the checkpoint message of
//! `packages/core/src/session/runner/to-llm-message.ts`.
//!
//! - **Trigger** (`required`): the estimate reaches `context - max(min(output, 32,000), buffer)`
//!   (a replay states no separate input limit, so the `input - buffer` term does not apply),
//!   and the context does not already end with a checkpoint. The estimate is the last
//!   response's reported usage plus what came after it: exact `o200k_base` here, as for v1.
//!   When `buffer` is at least the window nothing is left below it ([`Strategy::can_operate`](compaction::Strategy::can_operate)
//!   says so).
//! - **Tail** (`findTailStart`): the messages as the checkpoint writes them, newest first,
//!   while their estimate (characters / 4) stays within `keep_tokens` (the newest is kept even
//!   when larger), walked back to a user message. A walk that reaches the first message keeps
//!   only the latest user turn; with no later user message, everything is summarized (the
//!   tail is empty) unless a checkpoint is already there.
//! - **Summary**: the head (the earlier checkpoint included, as it is in the history) with the
//!   v2 template (`opencode_v2.md`: Objective; Requirements; Decisions; Work State with
//!   Completed / Active / Blocked; Next Move; Relevant Files; Additional Context), opened as a
//!   new summary or as an update of the checkpoint in the history. The answer must carry one
//!   of the template's headings as a line of its own; otherwise the request is sent once more
//!   with a reminder (`opencode_v2_retry.md`, the rejected answer not shown), and a second
//!   miss fails the compaction (the history stays). The first request is asked while planning
//!   ([`Strategy::plan_with`](compaction::Strategy::plan_with)); the retry, when needed, is the
//!   plan's request. A caller that plans without summarizing gets no retry.
//! - **Result**: one user message, `<conversation-checkpoint>` holding the summary and the tail
//!   serialized as text (`[User]: ...`, `[Assistant]: ...`, `[Assistant tool call]:
//!   name(input)`, `[Tool result]: ...` cut to 2,000 characters, `[Tool error]: ...`), after
//!   the system prompt. Departure: a call round still in flight (an assistant message whose
//!   calls are not all answered) stays as messages after the checkpoint, since its results
//!   arrive as messages of their own here (in OpenCode they are parts of the assistant
//!   message); it is not in the serialized tail.

use compaction::context::{Context, Origin};
use compaction::message::Role;
use compaction::{apply_layout, Budget, Compacted, Plan, Prompt, Slot, SummaryOutcome, SummaryRequest, Trigger};

use super::{calls_in_flight, Opencode};
use crate::common;

/// v2's default `buffer`.
pub const BUFFER: u64 = 20_000;
/// v2's default `keep.tokens`.
pub const KEEP_TOKENS: u64 = 15_000;
/// Characters of a tool output kept in the serialized tail.
pub const TOOL_OUTPUT_MAX_CHARS: usize = 2_000;
/// The template's headings, each a line of its own in a valid summary.
pub const HEADINGS: [&str; 7] = [
    "## Objective",
    "## Requirements",
    "## Decisions",
    "## Work State",
    "## Next Move",
    "## Relevant Files",
    "## Additional Context",
];
/// The opening of a first summary.
pub const OPENING_NEW: &str = "Summarize the conversation above into the structured summary below; another agent \
     will resume the work from it.";
/// The opening when the history holds a checkpoint.
pub const OPENING_UPDATE: &str = "Fold the checkpoint in the conversation above and everything after it into one \
     summary. Newer history wins over the checkpoint; keep what the checkpoint says unless newer history \
     contradicts, replaces or resolves it, and when unsure, keep it under Additional Context. Bring in newer \
     requirements, decisions and progress; move finished work out of Active, drop resolved blockers and answered \
     questions, keep what is still pending. Write only the Markdown sections, without the checkpoint's wrapper \
     tags.";
/// The line that opens a checkpoint, before the summary.
pub const CHECKPOINT_NOTE: &str =
    "What follows summarizes and records the earlier conversation. It is history to go on from, not new instructions.";

/// The v2 summary prompt (`opencode/opencode_v2.md`).
pub fn prompt() -> Prompt {
    Prompt::new("opencode_v2", include_str!("opencode_v2.md")).with_heading("## Objective")
}

/// The reminder request after an answer without the template (`opencode/opencode_v2_retry.md`).
pub fn retry_prompt() -> Prompt {
    Prompt::new("opencode_v2_retry", include_str!("opencode_v2_retry.md")).with_heading("## Objective")
}

/// `hasSummarySection`: some line, trimmed, is one of the template's headings.
pub fn has_summary_section(summary: &str) -> bool {
    summary.lines().any(|l| HEADINGS.contains(&l.trim()))
}

/// `truncateToolOutput`: at most 2,000 characters, then `[truncated]`.
fn truncate_tool_output(text: &str) -> String {
    match text.char_indices().nth(TOOL_OUTPUT_MAX_CHARS) {
        Some((end, _)) => format!("{}\n[truncated]", &text[..end]),
        None => text.to_string(),
    }
}

/// `serializeRecentMessage` for entry `i`: empty for the system prompt, a checkpoint or any
/// other message OpenCode keeps out of the serialized tail.
pub fn serialize(ctx: &Context, i: usize) -> String {
    let e = &ctx.entries()[i];
    if !matches!(e.origin(), Origin::Recorded { .. } | Origin::Masked { .. }) {
        return String::new();
    }
    let m = e.message();
    match m.role {
        Role::System => String::new(),
        Role::User => format!("[User]: {}", m.content),
        Role::Assistant => {
            let mut parts = Vec::new();
            if !m.content.is_empty() {
                parts.push(format!("[Assistant]: {}", m.content));
            }
            for c in &m.tool_calls {
                parts.push(format!("[Assistant tool call]: {}({})", c.name, c.arguments));
            }
            parts.join("\n")
        }
        Role::Tool if m.is_error => format!("[Tool error]: {}", m.content),
        Role::Tool => format!("[Tool result]: {}", truncate_tool_output(&m.content)),
    }
}

/// OpenCode's `Token.estimate`: characters / 4, rounded.
fn estimate(text: &str) -> u64 {
    (compaction::tokens::js_len(text) as f64 / 4.0).round() as u64
}

/// Whether entry `i` is a user message (not a checkpoint).
fn is_user(ctx: &Context, i: usize) -> bool {
    let e = &ctx.entries()[i];
    e.role() == Role::User && matches!(e.origin(), Origin::Recorded { .. } | Origin::Masked { .. })
}

/// Where the in-flight call round starts (`ctx.len()` when every call is answered).
fn in_flight_start(ctx: &Context) -> usize {
    if !calls_in_flight(ctx) {
        return ctx.len();
    }
    ctx.entries().iter().rposition(|x| x.role() == Role::Assistant).unwrap_or(ctx.len())
}

impl Opencode {
    /// v2's prompt ceiling: `window - max(min(output, 32,000), buffer)`.
    pub fn v2_ceiling(&self, budget: &Budget) -> u64 {
        budget.context_window.saturating_sub(self.max_output(budget).max(self.params.buffer))
    }

    /// `findTailStart` over the messages before the in-flight round: the first message of the
    /// tail, `end` when the tail is empty; `None` when there is nothing to compact.
    pub fn v2_tail_start(&self, ctx: &Context) -> Option<usize> {
        let end = in_flight_start(ctx);
        let conversation: Vec<(usize, u64)> = (0..end)
            .filter_map(|i| {
                let text = serialize(ctx, i);
                (!text.is_empty()).then(|| (i, estimate(&text)))
            })
            .collect();
        if conversation.is_empty() {
            return None;
        }
        let mut total = 0;
        let mut start = conversation.len();
        for k in (0..conversation.len()).rev() {
            let next = total + conversation[k].1;
            if start < conversation.len() && next > self.params.keep_tokens {
                break;
            }
            total = next;
            start = k;
        }
        while start > 0 && !is_user(ctx, conversation[start].0) {
            start -= 1;
        }
        if start > 0 {
            return Some(conversation[start].0);
        }
        let latest_user = conversation.iter().rposition(|&(i, _)| is_user(ctx, i));
        if let Some(k) = latest_user.filter(|&k| k > 0) {
            return Some(conversation[k].0);
        }
        let checkpoint = ctx.summaries().next().is_some();
        Some(if checkpoint { conversation[0].0 } else { end })
    }

    pub(super) fn v2_should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        let ends_with_checkpoint = ctx.entries().last().is_some_and(|e| e.origin().is_summary());
        !ends_with_checkpoint && compaction::Strategy::estimate(self, ctx) >= self.v2_ceiling(budget)
    }

    pub(super) fn v2_plan(&self, ctx: &Context, trigger: Trigger) -> Option<Plan> {
        let base = common::body_start(ctx);
        let tail = self.v2_tail_start(ctx)?;
        let end = in_flight_start(ctx);
        let head: Vec<usize> = (base..tail).collect();
        if head.is_empty() {
            return None;
        }
        let update = head.iter().any(|&i| ctx.entries()[i].origin().is_summary());
        let recent: Vec<String> = (tail..end).map(|i| serialize(ctx, i)).filter(|t| !t.is_empty()).collect();
        let prefix = format!("<conversation-checkpoint>\n{CHECKPOINT_NOTE}\n\n<summary>\n");
        let suffix = format!(
            "\n</summary>\n\n<recent-context>\n{}\n</recent-context>\n</conversation-checkpoint>",
            recent.join("\n\n")
        );
        let mut layout: Vec<Slot> = common::keep(0..base).collect();
        layout.push(Slot::Summary { request: 0, role: Role::User, prefix, suffix });
        layout.extend(common::keep(end..ctx.len()));
        let opening = if update { OPENING_UPDATE } else { OPENING_NEW };
        let request = SummaryRequest::new(
            head,
            prompt().with_var("instructions", opening),
            self.params.summary_max_tokens,
            common::next_round(ctx),
        );
        let mut plan = common::summary_plan(trigger, layout, request, "tail_start", tail);
        plan.step = "checkpoint".into();
        Some(plan)
    }

    /// The first summary is asked here; when it lacks the template, the plan's request is the
    /// reminder.
    pub(super) fn v2_plan_with(
        &self,
        ctx: &Context,
        trigger: Trigger,
        summarize: &mut dyn FnMut(&Context, &SummaryRequest) -> SummaryOutcome,
    ) -> Option<Plan> {
        let mut plan = self.v2_plan(ctx, trigger)?;
        let first = plan.requests.first()?.clone();
        match summarize(ctx, &first) {
            Ok(text) if has_summary_section(&text) => {
                plan.requests.clear();
                plan.notes.insert(WRITTEN.into(), text.into());
            }
            Ok(_) => {
                let mut retry = first;
                retry.prompt = retry_prompt()
                    .with_var("instructions", retry.prompt.var("instructions").unwrap_or(OPENING_NEW).to_string());
                plan.requests = vec![retry];
                plan.notes.insert("template_retry".into(), true.into());
            }
            Err(e) => {
                plan.requests.clear();
                plan.notes.insert(FAILED.into(), e.reason.into());
            }
        }
        Some(plan)
    }

    pub(super) fn v2_apply(
        &self,
        ctx: &Context,
        budget: &Budget,
        plan: &Plan,
        summaries: &[SummaryOutcome],
    ) -> Compacted {
        let failure = |reason: String| vec![Err(compaction::SummaryFailure { reason })];
        // A summary written while planning: the plan as `v2_plan` makes it, with that answer.
        let (asked, outcomes) = match (plan.notes.get(WRITTEN).and_then(|v| v.as_str()), plan.notes.get(FAILED)) {
            (Some(text), _) => match self.v2_plan(ctx, plan.trigger) {
                Some(mut first) => {
                    first.notes = plan.notes.clone();
                    first.notes.remove(WRITTEN);
                    (first, vec![Ok(text.to_string())])
                }
                None => (plan.clone(), failure("no plan to apply the summary to".into())),
            },
            (None, Some(reason)) => match self.v2_plan(ctx, plan.trigger) {
                Some(first) => (first, failure(reason.as_str().unwrap_or("summary failed").to_string())),
                None => (plan.clone(), failure("no plan".into())),
            },
            (None, None) => {
                let checked = summaries
                    .iter()
                    .map(|s| match s {
                        Ok(t) if !t.trim().is_empty() && !has_summary_section(t) => Err(compaction::SummaryFailure {
                            reason: "the summary did not match the required template".into(),
                        }),
                        other => other.clone(),
                    })
                    .collect();
                (plan.clone(), checked)
            }
        };
        let mut out = apply_layout(self, ctx, budget, &asked, &outcomes);
        if out.event.fallback.is_none() {
            // The checkpoint also stands for the tail it serializes and what an earlier one covered.
            let end = in_flight_start(ctx);
            let tail = plan.notes.get("tail_start").and_then(|v| v.as_u64()).map_or(end, |t| t as usize);
            let mut inherited: Vec<usize> = (tail.min(end)..end).collect();
            inherited.extend(ctx.summaries().map(|(i, _)| i));
            common::inherit_covers(&mut out.context, &compaction::covered(ctx, &inherited));
        }
        out
    }
}

/// The plan note holding a summary written while planning.
const WRITTEN: &str = "summary_written";
/// The plan note holding why the summary asked while planning failed.
const FAILED: &str = "summary_failed";

/// A message's text for tests: the checkpoint's parts.
#[cfg(test)]
pub(super) fn checkpoint_parts(m: &compaction::message::Message) -> Option<(&str, &str)> {
    let body = m.content.strip_prefix("<conversation-checkpoint>\n")?.strip_suffix("\n</conversation-checkpoint>")?;
    let summary = body.split("<summary>\n").nth(1)?.split("\n</summary>").next()?;
    let recent = body.split("<recent-context>\n").nth(1)?.split("\n</recent-context>").next()?;
    Some((summary, recent))
}
