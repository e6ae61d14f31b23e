//! `gemini-cli`: Gemini CLI's chat compression, with its tool-output budget, its verification
//! call and the tool-output masking that runs before every turn.
//!
//! Source: google-gemini/gemini-cli, read with the code search. `PRODUCTION.md` names main at
//! 5411f113 (2026-08-21); that commit is not stored, so the stored versions were read instead:
//! `packages/core/src/context/chatCompressionService.ts` at
//! 1bbee037cd7938af4d66fe0c86c0ed66cc473ef6 (`DEFAULT_COMPRESSION_TOKEN_THRESHOLD = 0.5`,
//! `COMPRESSION_PRESERVE_THRESHOLD = 0.3`, `COMPRESSION_FUNCTION_RESPONSE_TOKEN_BUDGET = 50_000`,
//! `truncateHistoryToBudget`, `findCompressSplitPoint`, `compress`),
//! `packages/core/src/context/toolOutputMaskingService.ts` at
//! 25137857734b4a5aaf5575507a9f5918c3201362 (`DEFAULT_TOOL_PROTECTION_THRESHOLD = 50000`,
//! `DEFAULT_MIN_PRUNABLE_TOKENS_THRESHOLD = 30000`, `EXEMPT_TOOLS`, the previews), the
//! `formatTruncatedToolOutput` of `packages/core/src/utils/fileUtils.ts` and the estimate of
//! `packages/core/src/utils/tokenCalculation.ts` (0.25 token per ASCII character, 1.3 per other
//! character, floored; `PRODUCTION.md` says 1.5, the stored source says 1.3), and
//! `core/client.ts` (`processTurn`: compress, then mask, then the overflow guard).
//!
//! - **Trigger**: before a turn, when the prompt tokens the provider reported for the last
//!   response reach `compression_threshold` (0.5) of the window (`>=`). Here the reported count
//!   is the exact `o200k_base` size of the context as it was sent for the last recorded
//!   assistant message (everything before it); before any response, or right after a
//!   compaction (Gemini sets the count to the compressed history's), the whole context.
//! - **Step 1, tool-output budget** (`truncateHistoryToBudget`): newest to oldest, the tool
//!   outputs' Gemini estimates are summed; an output that would take the sum past
//!   `function_response_budget` (50,000) becomes a note ("Output too large. Showing first H and
//!   last T characters. For full output see: FILE", then 20% head and 80% tail of
//!   `min(4 x (window - reported tokens), truncate_tool_output_chars)` characters; an output
//!   within that length is kept whole) and the note's estimate is what counts from then on.
//! - **Step 2, split** (`findCompressSplitPoint`): the newest `preserve_fraction` (30%) of the
//!   truncated history by characters is kept; a split falls only before a user message (never
//!   between a call and its result). With no such point past the target, everything is
//!   compressed when the last message is an assistant message without calls, else the last
//!   such point is used; no head means nothing to do.
//! - **Step 3, two summaries** (`gemini_snapshot.md`, then `gemini_verify.md`): the head, whole
//!   when its estimate is under the window, else with each tool result cut to the step-1
//!   length, is summarized into a `<state_snapshot>` (seven sections after a private
//!   scratchpad; an earlier snapshot in the head is integrated, not restarted: the closing
//!   instruction says so when the head holds one). Then a verification call over the head and
//!   that snapshot asks for a corrected final one, or the same. Both are summarizer requests,
//!   counted and billed: the first is asked while planning ([`Strategy::plan_with`]), the second
//!   is the plan's request. An empty verification falls back to the first snapshot; both empty
//!   is a failed compression (the history stays, retried next turn). A caller that plans
//!   without summarizing ([`Strategy::plan`] alone) gets the first snapshot without its check.
//! - **Result**: the system prompt, the snapshot as a user message, the acknowledgement ("Got
//!   it. Thanks for the additional context!") as an assistant message, then the kept tail as
//!   step 1 left it.
//! - **Inflation check**: when the new context is larger than the reported tokens, the
//!   compression is rejected, the history stays, and every later turn over the threshold runs
//!   step 1 alone (truncation, no model call) for as long as that shortens the context.
//!   Gemini holds this in a flag of its client; a strategy holds nothing, so the flag is in the
//!   context: the last message at the rejection carries `meta.gemini_cli_compression_failed`
//!   (metadata no provider sees; the message is otherwise unchanged).
//! - **Masking** (`ToolOutputMaskingService`), before every turn once a compaction happened:
//!   newest to oldest, skipping the latest message and the exempt tools (`activate_skill`,
//!   `ask_user`, `enter_plan_mode`, `exit_plan_mode`) and outputs already masked, the newest
//!   `mask_protection_tokens` (50,000) of tool output are protected; the rest is masked only
//!   when it sums to at least `mask_min_prunable_tokens` (30,000). A masked output keeps a
//!   preview (shell: first and last 10 lines; others: first and last 250 characters of outputs
//!   over 500) and the file path, inside `<tool_output_masked>`. Sizes are `JSON.stringify`
//!   length / 4, counted here as the output's characters / 4. Masking runs on a call with no
//!   compression; on a call that compresses it waits for the next call.
//! - **Overflow**: Gemini's guard ends the turn when the request would not fit; it does not
//!   compress. The strategy reacts to no reactive trigger: an over-long request is a rejected
//!   call.
//!
//! Departures the harness forces: the window is the experiment's, not Gemini's 1,048,576, and
//! every figure above scales from it. A replay has no file system: the full outputs go
//! nowhere, and the path a note or mask names (`tool-outputs/<tool>_<call id>.txt`, without
//! Gemini's temporary directory, session folder and random suffix, so that plans are pure)
//! points at nothing the agent could read; the recording keeps the text. The environment
//! context Gemini puts before the snapshot is the recording's system prompt, kept first. The
//! previews read the output as recorded, not Gemini's pretty-printed JSON of it; `bash` and
//! `shell` count as the shell tool (`run_shell_command`) for the line preview. The pre-compress
//! hook and `/compress` (forced compression, which clears the flag) have no counterpart.
//!
//! Masking runs below the compression threshold by design
//! ([`ViolationKind::CompactedBelowThreshold`], documented).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{self, ParamError};
use compaction::context::{Context, Entry, Inserted, Origin};
use compaction::message::{Message, Role};
use compaction::tokens::{CharsOver4, Exact, TokenCounter};
use compaction::ViolationKind;
use compaction::{
    apply_layout, Budget, Change, Compacted, CompactionEvent, InputCuts, Plan, Promises, Prompt, Slot, Strategy,
    SummaryOutcome, SummaryRequest, Trigger,
};

/// The snapshot prompt (`gemini_cli/gemini_snapshot.md`, beside this module).
pub fn snapshot_prompt() -> Prompt {
    Prompt::new("gemini_snapshot", include_str!("gemini_cli/gemini_snapshot.md")).with_heading("<state_snapshot>")
}

/// The verification prompt (`gemini_cli/gemini_verify.md`): the head, the first snapshot as
/// `previous`, and the request for a corrected one.
pub fn verify_prompt() -> Prompt {
    Prompt::new("gemini_verify", include_str!("gemini_cli/gemini_verify.md")).with_heading("<state_snapshot>")
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![snapshot_prompt(), verify_prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Gemini CLI: at half the window (reported prompt tokens), caps old tool outputs at a \
     50,000-token budget, keeps the newest 30% and replaces the rest with a <state_snapshot> that a second call \
     verifies; a compression that grows the context is rejected (truncation only from then on); after a \
     compaction, masks old tool outputs every turn (50k protected, 30k minimum).";

/// The assistant message after the snapshot.
pub const ACKNOWLEDGEMENT: &str = "Got it. Thanks for the additional context!";
/// The metadata key that marks a rejected compression (later turns truncate only).
pub const FAILED_FLAG: &str = "gemini_cli_compression_failed";
/// The folder a note or mask names for the full output.
pub const TOOL_OUTPUTS_DIR: &str = "tool-outputs";
/// The tag around a masked output.
pub const MASKING_TAG: &str = "tool_output_masked";
/// Tools whose outputs masking never touches.
pub const EXEMPT_TOOLS: [&str; 4] = ["activate_skill", "ask_user", "enter_plan_mode", "exit_plan_mode"];
/// Tools previewed line by line, as Gemini's shell tool.
pub const SHELL_TOOLS: [&str; 3] = ["run_shell_command", "bash", "shell"];
/// The snapshot request's closing instruction without an earlier snapshot in the head.
pub const ANCHOR_NEW: &str = "Write a new <state_snapshot> from the history above.";
/// The closing instruction when the head holds an earlier snapshot.
pub const ANCHOR_INTEGRATE: &str = "The history above holds an earlier <state_snapshot>. Fold everything in it that \
     still holds into the new one and bring it up to date with what happened since; drop no constraint and no key \
     fact it records.";

/// The plan note holding the first snapshot while its verification is asked.
const DRAFT: &str = "draft_snapshot";
/// The plan note holding why a summary asked while planning failed (the history stays).
const PLANNING_FAILURE: &str = "summary_failed";

/// Parameters of `gemini-cli`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Compress when the reported prompt tokens reach this fraction of the window (0.5).
    pub compression_threshold: f64,
    /// Share of the history (by characters) kept after a compression (0.3).
    pub preserve_fraction: f64,
    /// Newest tool-output tokens kept whole before a compression (50,000).
    pub function_response_budget: u64,
    /// Most characters of a budgeted tool output kept in its note (40,000; also at most
    /// 4 x the window's unused tokens).
    pub truncate_tool_output_chars: u64,
    /// Newest tool-output tokens masking protects (50,000).
    pub mask_protection_tokens: u64,
    /// Least tool-output tokens masking must find to mask anything (30,000).
    pub mask_min_prunable_tokens: u64,
    /// Output cap of each summary call (the source sets none of its own; 8,192).
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            compression_threshold: 0.5,
            preserve_fraction: 0.3,
            function_response_budget: 50_000,
            truncate_tool_output_chars: 40_000,
            mask_protection_tokens: 50_000,
            mask_min_prunable_tokens: 30_000,
            summary_max_tokens: 8_192,
        }
    }
}

/// The `gemini-cli` strategy.
#[derive(Debug, Clone)]
pub struct GeminiCli {
    params: Params,
    meter: Exact,
}

/// `estimateTokenCountSync` over text: 0.25 token per ASCII character, 1.3 per other, floored.
pub fn gemini_tokens(text: &str) -> u64 {
    let quarters: u64 = text.chars().map(|c| if c.is_ascii() { 25 } else { 130 }).sum();
    quarters / 100
}

/// A number as JavaScript's `toLocaleString` writes it in English (`12,345`).
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The file a note or a mask names for entry `e`'s full output.
pub fn output_file(e: &Message) -> String {
    let clean =
        |s: &str| s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect::<String>();
    format!(
        "{TOOL_OUTPUTS_DIR}/{}_{}.txt",
        clean(e.name.as_deref().unwrap_or("unknown_tool")).to_lowercase(),
        clean(e.tool_call_id.as_deref().unwrap_or("call")).to_lowercase()
    )
}

/// `formatTruncatedToolOutput`: `content` whole when it has at most `max_chars` characters,
/// else the note with the first 20% and the last 80% of `max_chars`.
pub fn budget_note(content: &str, file: &str, max_chars: usize) -> Option<String> {
    let len = content.chars().count();
    if len <= max_chars {
        return None;
    }
    let head_chars = max_chars / 5;
    let tail_chars = max_chars - head_chars;
    let head: String = content.chars().take(head_chars).collect();
    let tail: String = content.chars().skip(len - tail_chars).collect();
    Some(format!(
        "Output too large. Showing first {} and last {} characters. For full output see: {file}\n{head}\n\n... [{} \
         characters omitted] ...\n\n{tail}",
        grouped(head_chars),
        grouped(tail_chars),
        grouped(len - head_chars - tail_chars)
    ))
}

/// The preview a masked output keeps.
fn preview(e: &Message) -> String {
    let content = &e.content;
    if SHELL_TOOLS.contains(&e.name.as_deref().unwrap_or("")) {
        let lines: Vec<&str> = content.split('\n').collect();
        if lines.len() <= 20 {
            return content.clone();
        }
        return format!(
            "{}\n\n... [{} lines omitted] ...\n\n{}",
            lines[..10].join("\n"),
            lines.len() - 20,
            lines[lines.len() - 10..].join("\n")
        );
    }
    let chars: Vec<char> = content.chars().collect();
    if chars.len() <= 500 {
        return content.clone();
    }
    let head: String = chars[..250].iter().collect();
    let tail: String = chars[chars.len() - 250..].iter().collect();
    format!("{head}\n... [TRUNCATED] ...\n{tail}")
}

/// The masked form of tool result `e`.
pub fn masked_snippet(e: &Message) -> String {
    format!(
        "<{MASKING_TAG}>\n{}\n\nOutput too large. Full output available at: {}\n</{MASKING_TAG}>",
        preview(e),
        output_file(e)
    )
}

/// Whether a summary answer is empty.
fn empty(outcome: &SummaryOutcome) -> bool {
    matches!(outcome, Ok(t) if t.trim().is_empty())
}

impl GeminiCli {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<GeminiCli, ParamError> {
        if !(params.compression_threshold > 0.0 && params.compression_threshold <= 1.0) {
            return Err(ParamError::new("gemini-cli", "compression_threshold", "must be in (0, 1]"));
        }
        if !(params.preserve_fraction > 0.0 && params.preserve_fraction < 1.0) {
            return Err(ParamError::new("gemini-cli", "preserve_fraction", "must be in (0, 1)"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new("gemini-cli", "summary_max_tokens", "must be at least 1"));
        }
        Ok(GeminiCli { params, meter: Exact::o200k() })
    }

    /// The prompt tokens the provider reported for the last response: the context before the
    /// last recorded assistant message, or the whole context before any response or right
    /// after a compaction.
    pub fn reported_tokens(&self, ctx: &Context) -> u64 {
        let e = ctx.entries();
        for i in (0..e.len()).rev() {
            match e[i].origin() {
                Origin::Summary { .. } => break,
                Origin::Recorded { .. } | Origin::Masked { .. } if e[i].role() == Role::Assistant => {
                    return ctx.tokens(&self.meter) - ctx.range_tokens(i..e.len(), &self.meter);
                }
                _ => {}
            }
        }
        ctx.tokens(&self.meter)
    }

    /// Whether the compression trigger holds: reported tokens at the threshold.
    pub fn compression_due(&self, ctx: &Context, budget: &Budget) -> bool {
        self.reported_tokens(ctx) as f64 >= self.params.compression_threshold * budget.context_window as f64
    }

    /// Whether a compression was rejected since the last snapshot (later turns truncate only).
    pub fn compression_failed(ctx: &Context) -> bool {
        ctx.entries().iter().rev().take_while(|e| !e.origin().is_summary()).any(|e| e.message().meta_flag(FAILED_FLAG))
    }

    /// The characters a budget note keeps: `min(4 x (window - reported), truncate_tool_output_chars)`.
    pub fn note_chars(&self, ctx: &Context, budget: &Budget) -> usize {
        let free = budget.context_window.saturating_sub(self.reported_tokens(ctx)).saturating_mul(4);
        usize::try_from(free.min(self.params.truncate_tool_output_chars)).unwrap_or(usize::MAX)
    }

    /// Step 1, `truncateHistoryToBudget`: each tool output past the budget that its note
    /// shortens, with its note, oldest first.
    pub fn budget_notes(&self, ctx: &Context, budget: &Budget) -> Vec<(usize, String)> {
        let max_chars = self.note_chars(ctx, budget);
        let mut used = 0u64;
        let mut out = Vec::new();
        for (i, e) in ctx.entries().iter().enumerate().rev() {
            if e.role() != Role::Tool {
                continue;
            }
            let m = e.message();
            let tokens = gemini_tokens(&m.content);
            if used + tokens > self.params.function_response_budget {
                match budget_note(&m.content, &output_file(m), max_chars) {
                    Some(note) => {
                        used += gemini_tokens(&note);
                        out.push((i, note));
                    }
                    None => used += tokens,
                }
            } else {
                used += tokens;
            }
        }
        out.reverse();
        out
    }

    /// Step 2, `findCompressSplitPoint` over the history after step 1 (`notes`): the first
    /// entry kept. `body_start` when nothing is compressed, `ctx.len()` when everything is.
    pub fn split_point(&self, ctx: &Context, notes: &[(usize, String)]) -> usize {
        let base = common::body_start(ctx);
        let e = ctx.entries();
        let mut notes = notes.iter().peekable();
        let chars: Vec<u64> = (base..e.len())
            .map(|i| {
                let m = e[i].message();
                let content = match notes.next_if(|(j, _)| *j == i) {
                    Some((_, note)) => compaction::tokens::js_len(note),
                    None => e[i].units(&CharsOver4),
                };
                content
                    + m.tool_calls
                        .iter()
                        .map(|c| compaction::tokens::js_len(&c.name) + compaction::tokens::js_len(&c.arguments))
                        .sum::<u64>()
            })
            .collect();
        let total: u64 = chars.iter().sum();
        let target = total as f64 * (1.0 - self.params.preserve_fraction);
        let mut last_split = base;
        let mut cumulative = 0u64;
        for (k, i) in (base..e.len()).enumerate() {
            if e[i].role() == Role::User {
                if cumulative as f64 >= target {
                    return i;
                }
                last_split = i;
            }
            cumulative += chars[k];
        }
        match e.last() {
            Some(last) if e.len() > base && last.role() == Role::Assistant && last.message().tool_calls.is_empty() => {
                e.len()
            }
            _ => last_split,
        }
    }

    /// Masking: the tool outputs to mask, each with its masked form, oldest first; empty when
    /// fewer than `mask_min_prunable_tokens` could go.
    pub fn mask_list(&self, ctx: &Context) -> Vec<(usize, String)> {
        let e = ctx.entries();
        let mut protected = 0u64;
        let mut boundary = false;
        let mut prunable = 0u64;
        let mut found = Vec::new();
        // The latest message is the latest turn's: never scanned.
        for i in (0..e.len().saturating_sub(1)).rev() {
            let entry = &e[i];
            if entry.role() != Role::Tool {
                continue;
            }
            let m = entry.message();
            if EXEMPT_TOOLS.contains(&m.name.as_deref().unwrap_or("")) || m.content.contains(&format!("<{MASKING_TAG}"))
            {
                continue;
            }
            let tokens = entry.units(&CharsOver4) / 4;
            if !boundary {
                protected += tokens;
                if protected > self.params.mask_protection_tokens {
                    boundary = true;
                    prunable += tokens;
                    found.push((i, tokens));
                }
            } else {
                prunable += tokens;
                found.push((i, tokens));
            }
        }
        if found.is_empty() || prunable < self.params.mask_min_prunable_tokens {
            return Vec::new();
        }
        let mut out: Vec<(usize, String)> = found
            .into_iter()
            .filter_map(|(i, tokens)| {
                let snippet = masked_snippet(e[i].message());
                (compaction::tokens::js_len(&snippet) / 4 < tokens).then_some((i, snippet))
            })
            .collect();
        out.reverse();
        out
    }

    fn masks(len: usize, list: &[(usize, String)], from: usize) -> impl Iterator<Item = Slot> + '_ {
        let mut list = list.iter().peekable();
        (from..len).map(move |index| {
            while list.next_if(|(i, _)| *i < index).is_some() {}
            match list.next_if(|(i, _)| *i == index) {
                Some((_, placeholder)) => Slot::Mask { index, placeholder: placeholder.clone() },
                None => Slot::Keep { index },
            }
        })
    }

    fn mask_plan(&self, ctx: &Context, trigger: Trigger) -> Option<Plan> {
        let list = self.mask_list(ctx);
        if list.is_empty() {
            return None;
        }
        let mut plan = Plan::deterministic(trigger, "mask", GeminiCli::masks(ctx.len(), &list, 0).collect());
        plan.notes.insert("masked".into(), list.len().into());
        Some(plan)
    }

    /// The truncation-only path after a rejected compression: step 1, when it shortens the
    /// context below the reported tokens.
    fn truncate_plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let notes = self.budget_notes(ctx, budget);
        if notes.is_empty() {
            return None;
        }
        let freed: u64 = notes
            .iter()
            .map(|(i, note)| ctx.entries()[*i].tokens(&self.meter).saturating_sub(self.meter.count(note)))
            .sum();
        if self.estimate(ctx).saturating_sub(freed) >= self.reported_tokens(ctx) {
            return None;
        }
        let mut plan = Plan::deterministic(trigger, "truncate_only", GeminiCli::masks(ctx.len(), &notes, 0).collect());
        plan.notes.insert("truncated".into(), notes.len().into());
        Some(plan)
    }

    /// Steps 1 to 3 as a plan: the snapshot request and the layout it goes into.
    fn compress_plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let notes = self.budget_notes(ctx, budget);
        let base = common::body_start(ctx);
        let split = self.split_point(ctx, &notes);
        if split <= base {
            return None;
        }
        let head: Vec<usize> = (base..split).collect();
        let mut input = InputCuts::NONE;
        if ctx.range_tokens(base..split, &CharsOver4) >= budget.context_window {
            input.tool_result_chars = Some(self.note_chars(ctx, budget));
        }
        let integrate = head.iter().any(|&i| {
            let e = &ctx.entries()[i];
            e.origin().is_summary() || (e.role() != Role::Tool && e.message().content.contains("<state_snapshot>"))
        });
        let prompt = snapshot_prompt().with_var("instructions", if integrate { ANCHOR_INTEGRATE } else { ANCHOR_NEW });
        let request = SummaryRequest {
            input,
            ..SummaryRequest::new(head, prompt, self.params.summary_max_tokens, common::next_round(ctx))
        };
        let mut layout: Vec<Slot> = common::keep(0..base).collect();
        layout.push(Slot::Summary { request: 0, role: Role::User, prefix: String::new(), suffix: String::new() });
        layout.push(Slot::insert(Message::assistant(ACKNOWLEDGEMENT), Inserted::Acknowledgement));
        layout.extend(GeminiCli::masks(ctx.len(), &notes, split));
        let mut plan = common::summary_plan(trigger, layout, request, "split", split);
        plan.step = "compress".into();
        plan.notes.insert("truncated".into(), notes.len().into());
        Some(plan)
    }

    /// The history unchanged, with why; `flag` marks the rejection for later turns.
    fn unchanged(&self, ctx: &Context, budget: &Budget, plan: &Plan, reason: String, flag: bool) -> Compacted {
        let estimate = self.estimate(ctx);
        let mut context = ctx.clone();
        if let (true, Some(last)) = (flag, ctx.len().checked_sub(1)) {
            let e = &ctx.entries()[last];
            let mut m = e.message().clone();
            m.meta.insert(FAILED_FLAG.into(), true.into());
            context.replace(last, Entry::new(m, e.origin().clone()), &[&self.meter]);
        }
        let mut notes = plan.notes.clone();
        notes.remove(DRAFT);
        let heading = (plan.trigger, plan.step.clone(), notes);
        let change = Change::Unchanged { fallback: reason };
        let event = CompactionEvent::new(self, budget, heading, (estimate, ctx.len()), change);
        Compacted { context, event }
    }
}

impl Strategy for GeminiCli {
    fn name(&self) -> &'static str {
        "gemini-cli"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        let at = (self.params.compression_threshold * budget.context_window as f64).ceil() as u64;
        Some(at.saturating_sub(1))
    }
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        self.compression_due(ctx, budget) || (ctx.summaries().next().is_some() && !self.mask_list(ctx).is_empty())
    }
    /// Gemini's overflow guard ends the turn; it does not compress.
    fn reacts_to(&self, _trigger: Trigger) -> bool {
        false
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        if self.compression_due(ctx, budget) {
            let compressed = if GeminiCli::compression_failed(ctx) {
                self.truncate_plan(ctx, budget, trigger)
            } else {
                self.compress_plan(ctx, budget, trigger)
            };
            if compressed.is_some() {
                return compressed;
            }
        }
        if ctx.summaries().next().is_some() {
            return self.mask_plan(ctx, trigger);
        }
        None
    }
    /// The snapshot is asked while planning; the plan's one request is its verification.
    fn plan_with(
        &self,
        ctx: &Context,
        budget: &Budget,
        trigger: Trigger,
        summarize: &mut dyn FnMut(&Context, &SummaryRequest) -> SummaryOutcome,
    ) -> Option<Plan> {
        let mut plan = self.plan(ctx, budget, trigger)?;
        if plan.step != "compress" {
            return Some(plan);
        }
        let first = plan.requests.first()?.clone();
        match summarize(ctx, &first) {
            Err(e) => {
                plan.requests.clear();
                plan.notes.insert(PLANNING_FAILURE.into(), e.reason.into());
            }
            Ok(draft) => {
                let verify = SummaryRequest { prompt: verify_prompt(), previous: Some(draft.clone()), ..first };
                plan.requests = vec![verify];
                plan.notes.insert(DRAFT.into(), draft.into());
            }
        }
        Some(plan)
    }
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        if let Some(reason) = plan.notes.get(PLANNING_FAILURE).and_then(|v| v.as_str()) {
            return self.unchanged(ctx, budget, plan, format!("unchanged: {reason}"), false);
        }
        let draft = plan.notes.get(DRAFT).and_then(|v| v.as_str());
        // An empty verification falls back to the first snapshot; the snapshot is trimmed.
        let outcomes: Vec<SummaryOutcome> = summaries
            .iter()
            .map(|s| match (s, draft) {
                (s, Some(d)) if empty(s) => Ok(d.trim().to_string()),
                (Ok(t), _) => Ok(t.trim().to_string()),
                (Err(e), _) => Err(e.clone()),
            })
            .collect();
        let mut out = apply_layout(self, ctx, budget, plan, &outcomes);
        out.event.notes.remove(DRAFT);
        if plan.step != "compress" || out.event.fallback.is_some() {
            return out;
        }
        if draft.is_some() {
            let verified = summaries.first().is_some_and(|s| !empty(s));
            out.event
                .notes
                .insert("verification".into(), if verified { "answered" } else { "empty: first snapshot kept" }.into());
        }
        let (after, reported) = (out.context.tokens(&self.meter), self.reported_tokens(ctx));
        if after > reported {
            return self.unchanged(
                ctx,
                budget,
                plan,
                format!(
                    "inflated: the compressed context ({after} tokens) is larger than the reported prompt ({reported})"
                ),
                true,
            );
        }
        out
    }
    fn promises(&self, _ctx: &Context, _budget: &Budget) -> Promises {
        // The kept tail is the truncated one, and a rejected compression marks the last
        // message: no trailing entry is promised verbatim.
        Promises {
            keeps_system_prompt: true,
            recent_window: 0,
            documented_deviations: vec![ViolationKind::CompactedBelowThreshold],
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
