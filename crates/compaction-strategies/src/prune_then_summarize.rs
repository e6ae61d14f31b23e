//! `prune-then-summarize`: OpenCode-style compaction for a CMS agent (seed 004).
//!
//! The document's rules, as its code has them:
//!
//! - **Estimate**: the token service's `countMessageTokens`, 4 tokens of role overhead per
//!   message plus gpt-tokenizer's count (o200k_base, the encoding of current OpenAI models) of
//!   its text, of each tool call's name and JSON arguments, and of each tool output's
//!   `JSON.stringify(output)` ([`BpeRole4`]). A cleared output counts as
//!   `countTokens('[Output cleared]')` (4 tokens), whatever its placeholder says. Gap 6's 10%
//!   margin for non-OpenAI models (`Math.ceil(baseCount * 1.1)` per counted text) applies when
//!   `model_id` does not start with `openai/` (`non_openai_margin`, 0.1); the default model is
//!   the table's `openai/gpt-4o`, so no margin. The
//!   document counts its `RichMessage` list, which has no system role (the AI SDK takes the
//!   system prompt separately), so the system prompt is not part of the estimate.
//! - **Overflow** (`checkOverflow`): tokens > context window - output reserve (4,096); see
//!   `PruneBudget`. The token service's `isApproachingOverflow` variant (tokens > 0.9 x usable)
//!   is the `approaching_ratio` parameter; when set it is used for the trigger and for the check
//!   after pruning alike.
//! - **Prune first** (`needsPruning`, then `pruneToolOutputs`): pruning runs when the tool
//!   outputs outside the last 2 turns add up to more than `PRUNE_PROTECT + PRUNE_MINIMUM`
//!   (60,000 tokens). The pruner walks back from the newest message, counting a turn at every
//!   user message and skipping messages until 2 turns are counted; it stops at a previous
//!   summary (an assistant summary); it adds up the tokens of outputs not yet cleared, and once
//!   the running total passes `PRUNE_PROTECT` (40,000) it clears every further output, the one
//!   that crossed the line included, to `[Tool output cleared - see conversation summary]`
//!   ([`Slot::Mask`]; the call, the call id and the tool name stay). The prune *counts*
//!   (`outputsPruned`, `tokensSaved`, `prunedTools` in the plan notes) only when it saved at
//!   least `PRUNE_MINIMUM` (20,000) tokens.
//! - **Then summarize** if the pruned context is still over the line: one
//!   [`prompt`] request (at most 2,000 tokens) over the whole conversation after
//!   the system prompt, as `compact(currentMessages)` passes it, without the error-only assistant
//!   messages (Gap 1: an assistant message with an error and neither text nor tool calls; an
//!   error is [`Message::is_error`] or `finish_reason = "error"`). `messagesToText` cuts each
//!   tool output to its first 500 characters; [`INPUT_CUTS`] carries that cut on the request,
//!   so the offline summarizer reads what the LLM path sends.
//! - **End-of-run prune** (Gap 5, "PRUNE runs at END, even on error"): on by default
//!   (`end_of_run_prune`). The replay only asks before model calls, so when a new user message
//!   follows a finished run it prunes the context as it was at the end of that run. It compacts
//!   below the overflow line, a documented [`ViolationKind::CompactedBelowThreshold`].
//! - **Placement** (Implementation Notes, Gap 9): the system prompt unchanged, then the pair
//!   `user: What have we accomplished in our conversation so far? Summarize our progress, current
//!   state, and next steps.` / `assistant: <summary>`, then the last 2 turns verbatim. A turn is
//!   a user message and everything after it up to the next user message (`getRecentTurns`); the
//!   pair's own user message counts as one, as it does in the document.
//! - **Timing**: the check runs before every model call, and not when the last finished
//!   assistant message is the summary itself (OpenCode's `lastFinished.summary !== true`).
//!
//! Prune and summary are planned in one go. The document checks the pruned context again
//! before it decides to summarize, but pruning is deterministic: [`Strategy::plan`] computes the
//! pruned estimate exactly (each cleared output saves its tokens minus the 4 of
//! `[Output cleared]`) and plans the summary only when that is still over the line. Nothing is
//! checked after the summary, so the standard [`apply_layout`](compaction::apply_layout) builds the
//! result and `apply` is not overridden.
//!
//! Contradictions and deviations, noted rather than changed:
//!
//! - The prune minimum: the document's pruner returns the cleared messages even when they
//!   saved less than `PRUNE_MINIMUM` and only zeroes the counts it reports, and the context
//!   manager uses those messages. That is the default here; `strict_prune_minimum` discards
//!   such a prune instead (what OpenCode does and what the config comment suggests).
//! - The placeholder: the pruner writes `[Tool output cleared - see conversation summary]`, the
//!   token service counts `[Output cleared]`, and the message converter sends
//!   `{"status":"compacted","message":"Output cleared - see summary"}` to the model. The first is
//!   the default (`placeholder`), the estimate counts the second.
//! - The pair's user text: Gap 9 gives the text above as the exact format; the Implementation
//!   Notes' converter turns the marker into `What have we accomplished so far in this
//!   conversation?` ([`CONVERTER_REQUEST`]). Gap 9 is the default (`summary_request`).
//! - The architecture diagram says "tokens > 80% of model limit?"; no code does that, so it is
//!   not implemented. The model-limit table is replaced by [`Budget::context_window`].
//! - The document groups parallel tool results into one tool message with one role overhead;
//!   here each result is its own message with its own 4 tokens.
//! - The summarizer is handed entries of the current context by index, so for outputs this
//!   same plan clears it sees the original text where the document shows it
//!   `[<tool> result: cleared]`; the plan lists them in its `cleared` note.
//! - When the last 2 turns are the whole conversation (an agent run under one user message),
//!   the document would still summarize, prepend the pair and keep everything, growing the
//!   context at every call. Here there is nothing to summarize away and no summary is planned.
//! - A failed summary: the document's `prepareContext` throws (a `compaction-error` event);
//!   here the pruned context is kept ([`Fallback::Layout`]), or the context is unchanged if
//!   nothing was pruned.
//! - The document has no reactive path (a context-length error only reaches the UI), so the
//!   strategy does not react to [`Trigger::Overflow`] (`react_to_overflow = false`); a caller
//!   that forces a plan gets prune and summary without the overflow check.
//! - An empty summary is a failed one (the pruned context is kept), as for every strategy.
//! - `minTurnsToKeep || 2` makes 0 mean 2 in the summary path; 0 is rejected.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ParamError;
use compaction::context::{Context, Entry, Inserted, Origin, ToolResults};
use compaction::message::{Message, Role};
use compaction::tokens::{BpeRole4, TokenCounter};
use compaction::ViolationKind;
use compaction::{
    Budget, Fallback, InputCuts, Plan, Profile, Promises, Prompt, Slot, Strategy, SummaryRequest, Trigger,
};

/// 004's continuation prompt with its sections; the document keeps an empty answer as the summary (`prune_then_summarize/continuation.md`, beside this module).
pub fn prompt() -> Prompt {
    Prompt { empty_fails: false, ..Prompt::new("continuation", include_str!("prune_then_summarize/continuation.md")) }
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Seed 004 (OpenCode-style): once 4 + o200k tokens per message passes the window minus a \
     4,096-token output reserve, clears old tool outputs beyond the newest 40,000 tool-output tokens and the last 2 \
     turns; if still over, summarizes the conversation with a continuation prompt into a user/assistant pair after \
     the unchanged system prompt and keeps the last 2 turns; also prunes old outputs at the end of each run.";

/// What the pruner writes over a cleared tool output (`pruneToolOutputs`).
pub const CLEARED_OUTPUT: &str = "[Tool output cleared - see conversation summary]";

/// What the token service counts for a cleared tool output (`countPartTokens`).
pub const CLEARED_COUNTED_AS: &str = "[Output cleared]";

/// The user half of the summary pair (Gap 9's exact format).
pub const SUMMARY_REQUEST: &str =
    "What have we accomplished in our conversation so far? Summarize our progress, current state, and next steps.";

/// The Implementation Notes' conversion of the compaction marker, the other text the document gives.
pub const CONVERTER_REQUEST: &str = "What have we accomplished so far in this conversation?";

/// The first model of the document's `MODEL_LIMITS` table, an OpenAI model counted with
/// o200k_base, the encoding the benchmark meters with.
pub const DEFAULT_MODEL_ID: &str = "openai/gpt-4o";

/// Tool results reach the summarizer cut to their first 500 characters (`messagesToText`:
/// `JSON.stringify(part.output).slice(0, 500)`); other messages whole.
pub const INPUT_CUTS: InputCuts = InputCuts { message_chars: None, tool_result_chars: Some(500) };

/// Role overhead per message (`countMessageTokens`).
pub const ROLE_OVERHEAD: u64 = 4;

/// Parameters of `prune-then-summarize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Tokens reserved for the model's output (`outputReserve`); the context overflows when
    /// its estimate is above the window minus this.
    pub output_reserve: u64,
    /// When set, compact when the estimate is above this fraction of (window - output reserve)
    /// instead of at the overflow line itself: the token service's `isApproachingOverflow`,
    /// which uses 0.9. Also used for the check after pruning.
    pub approaching_ratio: Option<f64>,
    /// Tokens of the newest tool outputs (outside the last turns) that pruning never clears
    /// (`PRUNE_PROTECT`).
    pub prune_protect: u64,
    /// Tokens a prune must save to count as a prune (`PRUNE_MINIMUM`); pruning starts only when
    /// the outputs outside the last turns exceed `prune_protect + prune_minimum`.
    pub prune_minimum: u64,
    /// Most recent turns (a user message and what follows it) never pruned and kept verbatim
    /// after a summary (`minTurnsToKeep`).
    pub min_turns_to_keep: usize,
    /// Discard a prune that saves less than `prune_minimum` tokens. The document's code keeps
    /// the cleared outputs and only stops reporting them (false).
    pub strict_prune_minimum: bool,
    /// Prune at the end of each agent run, below the overflow line too (Gap 5: "PRUNE runs at
    /// END, even on error"): done when the next user message arrives.
    #[serde(alias = "prune_after_run")]
    pub end_of_run_prune: bool,
    /// The model the token service counts for (`modelId`): an id not starting with `openai/`
    /// gets Gap 6's safety margin on every count.
    pub model_id: String,
    /// Gap 6's safety margin for non-OpenAI models (`Math.ceil(baseCount * 1.1)`: 0.1), applied
    /// to each counted text when `model_id` is not an OpenAI model.
    pub non_openai_margin: f64,
    /// React to an over-window request by pruning and summarizing without the overflow check
    /// (the document has no such path: a context-length error only reaches the UI).
    pub react_to_overflow: bool,
    /// Text written over a cleared tool output. The document's converter sends
    /// `{"status":"compacted","message":"Output cleared - see summary"}` instead.
    pub placeholder: String,
    /// Text of the user message that precedes the summary. The Implementation Notes use
    /// `What have we accomplished so far in this conversation?`.
    pub summary_request: String,
    /// Upper bound on the summary's length, in tokens (`maxOutputTokens`).
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            output_reserve: 4_096,
            approaching_ratio: None,
            prune_protect: 40_000,
            prune_minimum: 20_000,
            min_turns_to_keep: 2,
            strict_prune_minimum: false,
            end_of_run_prune: true,
            model_id: DEFAULT_MODEL_ID.to_string(),
            non_openai_margin: BpeRole4::DOCUMENT_MARGIN,
            react_to_overflow: false,
            placeholder: CLEARED_OUTPUT.to_string(),
            summary_request: SUMMARY_REQUEST.to_string(),
            summary_max_tokens: 2_000,
        }
    }
}

/// The overflow line of seed 004.
///
/// `usable = context_window - output_reserve` (`calculateAvailableTokens`); the context
/// overflows when its estimate is above `usable` (`checkOverflow`), or, with the approaching
/// variant, above `usable x ratio` (`isApproachingOverflow`). With a 128,000 window: overflow
/// above 123,904 tokens, approaching (0.9) above 111,513.6, that is from 111,514 tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PruneBudget {
    pub context_window: u64,
    pub output_reserve: u64,
    pub approaching_ratio: Option<f64>,
}

impl PruneBudget {
    /// Tokens the conversation may use: `context_window - output_reserve` (0 when negative).
    pub fn usable(&self) -> u64 {
        self.context_window.saturating_sub(self.output_reserve)
    }
    /// The largest estimate that is not an overflow. For a whole number of tokens `n`,
    /// `n > usable x ratio` exactly when `n > floor(usable x ratio)`; the product is computed in
    /// `f64` as JavaScript does.
    pub fn line(&self) -> u64 {
        match self.approaching_ratio {
            None => self.usable(),
            Some(r) => (self.usable() as f64 * r).floor() as u64,
        }
    }
    pub fn is_overflow(&self, tokens: u64) -> bool {
        tokens > self.line()
    }
}

/// The `prune-then-summarize` strategy.
#[derive(Debug, Clone)]
pub struct PruneThenSummarize {
    estimator: BpeRole4,
    params: Params,
}

/// What one pruning walk decided.
#[derive(Debug, Clone, Default, PartialEq)]
struct Prune {
    /// Entries whose output is cleared, ascending.
    cleared: Vec<usize>,
    /// Estimated tokens saved (each cleared output's tokens minus those of `[Output cleared]`).
    saved: i64,
    /// Tool names cleared, in the order the walk met them.
    tools: Vec<String>,
    /// Saved at least `prune_minimum`.
    counted: bool,
}

/// True for an assistant message with an error and neither text nor tool calls (Gap 1).
pub fn is_error_only(m: &Message) -> bool {
    m.role == Role::Assistant
        && (m.is_error || m.finish_reason.as_deref() == Some("error"))
        && m.content.is_empty()
        && m.tool_calls.is_empty()
}

/// A previous summary as the pruner sees it: an assistant summary (`isSummary`).
fn is_previous_summary(e: &Entry) -> bool {
    e.role() == Role::Assistant
        && (e.origin().is_summary() || e.message().meta_flag(compaction::message::COMPACT_SUMMARY))
}

/// A tool output the pruner already cleared (`compactedAt`).
fn is_cleared(e: &Entry) -> bool {
    e.role() == Role::Tool && matches!(e.origin(), Origin::Masked { .. })
}

impl PruneThenSummarize {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<PruneThenSummarize, ParamError> {
        validate(&params)?;
        let margin = (!params.model_id.starts_with("openai/")).then_some(params.non_openai_margin);
        Ok(PruneThenSummarize { estimator: BpeRole4::new(margin), params })
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The overflow line for `budget`.
    pub(crate) fn prune_budget(&self, budget: &Budget) -> PruneBudget {
        PruneBudget {
            context_window: budget.context_window,
            output_reserve: self.params.output_reserve,
            approaching_ratio: self.params.approaching_ratio,
        }
    }

    /// Tokens of a cleared output's message: role overhead plus `countTokens('[Output cleared]')`.
    fn cleared_message_tokens(&self) -> u64 {
        ROLE_OVERHEAD + self.estimator.count(CLEARED_COUNTED_AS)
    }

    /// Tokens of a tool output without the role overhead (`countPartTokens` of its result part).
    fn output_tokens(&self, e: &Entry) -> u64 {
        e.units(&self.estimator).saturating_sub(ROLE_OVERHEAD)
    }

    /// Index of the first non-system entry.
    fn body_start(ctx: &Context) -> usize {
        usize::from(ctx.system_prompt().is_some())
    }

    /// Start of the last `min_turns_to_keep` turns among entries `body..end` (`getRecentTurns`):
    /// the user message that completes the count, or `body` when there are fewer turns.
    fn recent_start(&self, ctx: &Context, body: usize, end: usize) -> usize {
        let mut turns = 0;
        for i in (body..end).rev() {
            if ctx.entries()[i].role() == Role::User {
                turns += 1;
                if turns >= self.params.min_turns_to_keep {
                    return i;
                }
            }
        }
        body
    }

    /// `needsPruning` over entries `..end`: the uncleared outputs outside the last turns exceed
    /// `prune_protect + prune_minimum`. Unlike the pruner it does not stop at a summary.
    ///
    /// The document walks back over the whole history summing outputs; its answer only depends
    /// on the sum, so this takes the context's running total of uncleared outputs and walks
    /// back only over what the document skips (the entries from `end` on, and the last turns),
    /// taking their outputs off: O(last turns), not O(context).
    fn needs_pruning(&self, ctx: &Context, end: usize) -> bool {
        let limit = self.params.prune_protect.saturating_add(self.params.prune_minimum);
        // Every message's units include the role overhead (`BpeRole4`), so the outputs' sum is
        // the units' sum less one overhead per output.
        let open = ToolResults::Open;
        let mut total = ctx
            .tool_result_units(&self.estimator, open)
            .saturating_sub(ROLE_OVERHEAD * ctx.tool_result_count(open) as u64);
        let mut turns = 0;
        for (i, e) in ctx.entries().iter().enumerate().rev() {
            if i < end {
                if e.role() == Role::User {
                    turns += 1;
                }
                if turns >= self.params.min_turns_to_keep {
                    break;
                }
            }
            if e.role() == Role::Tool && !is_cleared(e) {
                total = total.saturating_sub(self.output_tokens(e));
            }
        }
        total > limit
    }

    /// `pruneToolOutputs` over entries `..end`.
    fn prune(&self, ctx: &Context, end: usize) -> Prune {
        let mut out = Prune::default();
        let cleared_tokens = self.estimator.count(CLEARED_COUNTED_AS) as i64;
        let mut total: u64 = 0;
        let mut turns = 0;
        for i in (0..end).rev() {
            let e = &ctx.entries()[i];
            if e.role() == Role::User {
                turns += 1;
            }
            if turns < self.params.min_turns_to_keep {
                continue;
            }
            if is_previous_summary(e) {
                break;
            }
            if e.role() == Role::Tool && !is_cleared(e) {
                let t = self.output_tokens(e);
                total += t;
                if total > self.params.prune_protect {
                    out.cleared.push(i);
                    out.saved += t as i64 - cleared_tokens;
                    if let Some(name) = e.message().name.as_deref() {
                        if !out.tools.iter().any(|n| n == name) {
                            out.tools.push(name.to_string());
                        }
                    }
                }
            }
        }
        out.cleared.reverse();
        out.counted = out.saved >= self.params.prune_minimum as i64;
        out
    }

    /// The prune the strategy applies over entries `..end`, if any (gated by `needsPruning`; a
    /// prune under the minimum is dropped only with `strict_prune_minimum`).
    fn applied_prune(&self, ctx: &Context, end: usize) -> Option<Prune> {
        if !self.needs_pruning(ctx, end) {
            return None;
        }
        let p = self.prune(ctx, end);
        (!p.cleared.is_empty() && (p.counted || !self.params.strict_prune_minimum)).then_some(p)
    }

    /// The whole context with the outputs of `cleared` masked.
    fn prune_layout(&self, n: usize, cleared: &[usize]) -> Vec<Slot> {
        let mut mask = vec![false; n];
        for &i in cleared {
            mask[i] = true;
        }
        (0..n)
            .map(|i| {
                if mask[i] {
                    Slot::Mask { index: i, placeholder: self.params.placeholder.clone() }
                } else {
                    Slot::Keep { index: i }
                }
            })
            .collect()
    }

    fn prune_notes(p: &Prune, notes: &mut serde_json::Map<String, serde_json::Value>) {
        // As `PruneResult`: the counts are reported only when the prune saved enough.
        let (outputs, saved, tools) =
            if p.counted { (p.cleared.len(), p.saved, p.tools.clone()) } else { (0, 0, Vec::new()) };
        notes.insert("outputs_pruned".into(), outputs.into());
        notes.insert("tokens_saved".into(), saved.into());
        notes.insert("pruned_tools".into(), tools.into());
        notes.insert("prune_counted".into(), p.counted.into());
        notes.insert("cleared".into(), p.cleared.clone().into());
    }

    /// The last finished assistant message is the summary (OpenCode's guard).
    fn last_finished_is_summary(ctx: &Context) -> bool {
        ctx.entries().iter().rev().find(|e| e.role() == Role::Assistant).is_some_and(|e| e.origin().is_summary())
    }

    /// The end-of-run cleanup prune (`end_of_run_prune`): when user messages follow a finished
    /// run (an assistant message without tool calls), prune the context as it was then.
    fn cleanup_plan(&self, ctx: &Context, trigger: Trigger) -> Option<Plan> {
        if !self.params.end_of_run_prune {
            return None;
        }
        let n = ctx.len();
        let end = ctx.entries().iter().rposition(|e| e.role() != Role::User).map_or(0, |i| i + 1);
        if end == n || end == 0 {
            return None;
        }
        let last = &ctx.entries()[end - 1];
        if last.role() != Role::Assistant || last.message().has_tool_calls() {
            return None;
        }
        let p = self.applied_prune(ctx, end)?;
        let mut plan = Plan::deterministic(trigger, "cleanup-prune", self.prune_layout(n, &p.cleared));
        Self::prune_notes(&p, &mut plan.notes);
        Some(plan)
    }
}

/// Check parameters once, when the strategy is built.
fn validate(p: &Params) -> Result<(), ParamError> {
    let err = |param, problem: &str| Err(ParamError::new("prune-then-summarize", param, problem));
    if let Some(r) = p.approaching_ratio {
        if !(r.is_finite() && r > 0.0 && r <= 1.0) {
            return err("approaching_ratio", "must be in (0, 1]");
        }
    }
    if p.min_turns_to_keep == 0 {
        return err("min_turns_to_keep", "must be at least 1 (the document's code reads 0 as 2)");
    }
    if p.placeholder.is_empty() {
        return err("placeholder", "must not be empty");
    }
    if p.summary_request.is_empty() {
        return err("summary_request", "must not be empty");
    }
    if p.summary_max_tokens == 0 {
        return err("summary_max_tokens", "must be at least 1");
    }
    if !(p.non_openai_margin.is_finite() && (0.0..=1.0).contains(&p.non_openai_margin)) {
        return err("non_openai_margin", "must be in [0, 1]");
    }
    Ok(())
}

impl Strategy for PruneThenSummarize {
    fn name(&self) -> &'static str {
        "prune-then-summarize"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.estimator
    }
    /// `countTotalTokens` over the messages after the system prompt, a cleared output counting
    /// as `[Output cleared]`.
    fn estimate(&self, ctx: &Context) -> u64 {
        let mut t = ctx.tokens(&self.estimator);
        if let Some(sys) = ctx.system_prompt() {
            t = t.saturating_sub(sys.tokens(&self.estimator));
        }
        // Each cleared output counts as `[Output cleared]` (the running totals of the masked
        // tool results: no walk over the context; `BpeRole4`'s tokens are its units).
        let masked = ToolResults::Masked;
        t.saturating_sub(ctx.tool_result_units(&self.estimator, masked))
            + self.cleared_message_tokens() * ctx.tool_result_count(masked) as u64
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        Some(self.prune_budget(budget).line())
    }
    /// The prune protects `prune_protect` tokens of tool output; when that is at least the
    /// usable window (`window - output_reserve`) no request that fits has an output to clear,
    /// and an agent run under one user message has nothing to summarize either.
    fn can_operate(&self, budget: &Budget) -> Result<(), String> {
        let usable = self.prune_budget(budget).usable();
        let p = &self.params;
        if usable == 0 {
            return Err(format!(
                "output_reserve ({}) is at least the window ({})",
                p.output_reserve, budget.context_window
            ));
        }
        if p.prune_protect >= usable {
            return Err(format!(
                "prune_protect ({}) is at least the usable window ({usable} = window - output_reserve): the prune can never clear an output of a request that fits",
                p.prune_protect
            ));
        }
        Ok(())
    }
    fn profile(&self) -> Profile {
        Profile {
            operating_condition: "output_reserve (4,096) and the prune's protected tail, prune_protect (40,000), are below the window - output_reserve",
            ..Profile::default()
        }
    }
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        let over = !Self::last_finished_is_summary(ctx) && self.prune_budget(budget).is_overflow(self.estimate(ctx));
        over || self.cleanup_plan(ctx, Trigger::Proactive).is_some()
    }
    fn reacts_to(&self, trigger: Trigger) -> bool {
        trigger == Trigger::Overflow && self.params.react_to_overflow
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let line = self.prune_budget(budget);
        let estimate = self.estimate(ctx);
        let forced = trigger != Trigger::Proactive;
        if !forced && (!line.is_overflow(estimate) || Self::last_finished_is_summary(ctx)) {
            return self.cleanup_plan(ctx, trigger);
        }
        let n = ctx.len();
        let prune = self.applied_prune(ctx, n);
        let after_prune = match &prune {
            Some(p) => (estimate as i64 - p.saved).max(0) as u64,
            None => estimate,
        };
        let prune_plan = |step: &str| {
            prune.as_ref().map(|p| {
                let mut plan = Plan::deterministic(trigger, step, self.prune_layout(n, &p.cleared));
                Self::prune_notes(p, &mut plan.notes);
                plan.notes.insert("estimate_after_prune".into(), after_prune.into());
                plan
            })
        };
        if !forced && !line.is_overflow(after_prune) {
            return prune_plan("prune");
        }
        // Still over: summarize everything after the system prompt, keep the last turns.
        let body = Self::body_start(ctx);
        let recent = self.recent_start(ctx, body, n);
        if recent <= body {
            // Nothing before the last turns to summarize away.
            return prune_plan("prune");
        }
        let (span, dropped): (Vec<usize>, Vec<usize>) =
            (body..n).partition(|&i| !is_error_only(ctx.entries()[i].message()));
        let round = ctx.last_round() + 1;
        let mut request = SummaryRequest::new(span, prompt(), self.params.summary_max_tokens, round);
        request.input = INPUT_CUTS;
        let mut layout = Vec::with_capacity(n - recent + 3);
        if body == 1 {
            layout.push(Slot::Keep { index: 0 });
        }
        let ask =
            Message::user(self.params.summary_request.clone()).with_meta("injected", serde_json::Value::Bool(true));
        layout.push(Slot::insert(ask, Inserted::Other));
        layout.push(Slot::Summary { request: 0, role: Role::Assistant, prefix: String::new(), suffix: String::new() });
        // The pruner never clears inside the last turns, so they are kept as they are.
        layout.extend((recent..n).map(|index| Slot::Keep { index }));
        let (step, fallback) = match &prune {
            Some(p) => (
                "prune+summarize",
                Fallback::Layout { label: "pruned context kept".into(), layout: self.prune_layout(n, &p.cleared) },
            ),
            None => ("summarize", Fallback::Unchanged),
        };
        let mut plan = Plan {
            trigger,
            layout,
            requests: vec![request],
            fallback,
            step: step.into(),
            notes: serde_json::Map::new(),
        };
        if let Some(p) = &prune {
            Self::prune_notes(p, &mut plan.notes);
            plan.notes.insert("estimate_after_prune".into(), after_prune.into());
        }
        plan.notes.insert("recent_start".into(), recent.into());
        plan.notes.insert("dropped_error_only".into(), dropped.into());
        Some(plan)
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        let body = Self::body_start(ctx);
        let recent = self.recent_start(ctx, body, ctx.len());
        let mut documented_deviations = Vec::new();
        if self.params.end_of_run_prune {
            documented_deviations.push(ViolationKind::CompactedBelowThreshold);
        }
        Promises { keeps_system_prompt: true, recent_window: ctx.len() - recent, documented_deviations }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::StrategyConfig;
    use compaction::message::ToolCall;
    use compaction::{check_compaction, check_context};
    use compaction::{SummaryFailure, SummaryOutcome};

    fn strategy() -> PruneThenSummarize {
        PruneThenSummarize::new(Params::default()).unwrap()
    }

    fn with(f: impl FnOnce(&mut Params)) -> PruneThenSummarize {
        let mut p = Params::default();
        f(&mut p);
        PruneThenSummarize::new(p).unwrap()
    }

    /// A plain-text tool output of exactly `t` o200k tokens once `JSON.stringify` adds its 2
    /// quotes (each ` x` is one token, as is each quote; the empty `""` is one token, so 2 is
    /// the one size it cannot make).
    fn output(t: u64) -> String {
        assert_ne!(t, 2, "no output is 2 tokens");
        " x".repeat(t.saturating_sub(2) as usize)
    }

    /// `countTokens` of gpt-tokenizer: o200k_base.
    fn bpe(text: &str) -> u64 {
        compaction::tokens::Exact::o200k().count(text)
    }

    /// Builds conversations turn by turn.
    struct Conv {
        messages: Vec<Message>,
        calls: usize,
    }

    impl Conv {
        fn new() -> Conv {
            Conv { messages: vec![Message::system("You are a CMS agent.")], calls: 0 }
        }
        /// A user message, one tool call per output size, and a closing answer.
        fn turn(mut self, outputs: &[u64]) -> Conv {
            self.messages.push(Message::user(format!("u{}", self.calls % 10)));
            for &t in outputs {
                self.push_call(t);
            }
            self.messages.push(Message::assistant("ok"));
            self
        }
        fn push_call(&mut self, t: u64) {
            let id = format!("c{}", self.calls);
            self.calls += 1;
            let call = ToolCall { id: id.clone(), name: "get_page".into(), arguments: r#"{"id":"p"}"#.into() };
            self.messages.push(Message::assistant_calls("", vec![call]));
            self.messages.push(Message::tool_result(id, "get_page", output(t)));
        }
        fn ctx(self) -> Context {
            Context::from_messages(self.messages)
        }
    }

    fn tool_indices(ctx: &Context) -> Vec<usize> {
        ctx.entries().iter().enumerate().filter(|(_, e)| e.role() == Role::Tool).map(|(i, _)| i).collect()
    }

    fn ok(plan: &Plan) -> Vec<SummaryOutcome> {
        plan.requests.iter().map(|_| Ok("Pages created: home (p1).".to_string())).collect()
    }

    // ---- Phase 1: token service and overflow detection ----

    /// Phase 1's token service: `countMessageTokens` = 4 (role overhead) + `countPartTokens`,
    /// which counts with gpt-tokenizer (o200k_base): text, tool name + `JSON.stringify(input)`,
    /// `JSON.stringify(output)`.
    #[test]
    fn token_service_counts_text_calls_and_outputs() {
        let s = strategy();
        let e = s.estimator();
        assert_eq!(e.name(), "o200k_base+4");
        assert_eq!(e.message_tokens(&Message::user("abcd efgh")), 4 + bpe("abcd efgh"));
        let call = ToolCall { id: "c".into(), name: "get_page".into(), arguments: r#"{"id":"p"}"#.into() };
        assert_eq!(
            e.message_tokens(&Message::assistant_calls("", vec![call])),
            4 + bpe("get_page") + bpe(r#"{"id":"p"}"#)
        );
        // tool result: JSON.stringify("hello")
        assert_eq!(e.message_tokens(&Message::tool_result("c", "get_page", "hello")), 4 + bpe("\"hello\""));
        // an object output counts in compact form: {"a":1}
        assert_eq!(e.message_tokens(&Message::tool_result("c", "get_page", "{ \"a\" : 1 }")), 4 + bpe(r#"{"a":1}"#));
        // newlines are escaped
        assert_eq!(e.message_tokens(&Message::tool_result("c", "get_page", "a\nb")), 4 + bpe(r#""a\nb""#));
        assert_eq!(e.message_tokens(&Message::tool_result("c", "get_page", output(250))), 254);
        assert_eq!(e.message_tokens(&Message::tool_result("c", "get_page", output(1))), 5);
        assert_eq!(e.message_tokens(&Message::tool_result("c", "get_page", output(3))), 7);
        // The BPE count, not chars/4: 40 digits are 14 tokens (groups of 3), not 10.
        let digits = "0123456789".repeat(4);
        assert_eq!(e.message_tokens(&Message::user(digits.clone())), 4 + 14);
        assert_eq!(compaction::tokens::CharsOver4Role4.message_tokens(&Message::user(digits)), 4 + 10);
    }

    /// Gap 6, "Add 10% safety margin for non-OpenAI models": `Math.ceil(baseCount * 1.1)` per
    /// counted text when the model id does not start with `openai/`.
    #[test]
    fn gap_6_margin_for_non_openai_models() {
        let p = Params::default();
        assert_eq!(p.non_openai_margin, 0.1);
        assert_eq!(p.model_id, "openai/gpt-4o");
        let openai = strategy();
        let claude = with(|p| p.model_id = "anthropic/claude-3.5-sonnet".into());
        let m = Message::user(output(250));
        let base = bpe(&m.content);
        assert_eq!(openai.estimator().message_tokens(&m), 4 + base);
        assert_eq!(claude.estimator().message_tokens(&m), 4 + (base as f64 * 1.1).ceil() as u64);
        let none = with(|p| {
            p.model_id = "google/gemini-1.5-pro".into();
            p.non_openai_margin = 0.0;
        });
        assert_eq!(none.estimator().message_tokens(&m), 4 + base);
        assert!(PruneThenSummarize::new(Params { non_openai_margin: -0.1, ..Params::default() }).is_err());
    }

    /// `messagesToText`: tool results reach the summarizer as `JSON.stringify(output)` cut to
    /// 500 characters; text parts whole. The cut travels on the request.
    #[test]
    fn the_summary_input_cuts_tool_results_to_500_characters() {
        let s = strategy();
        let ctx = summary_ctx();
        let plan = s.plan(&ctx, &Budget::new(32_000), Trigger::Proactive).unwrap();
        assert_eq!(plan.requests[0].input, InputCuts { message_chars: None, tool_result_chars: Some(500) });
        let result = ctx.entries().iter().find(|e| e.role() == Role::Tool).unwrap().message();
        assert_eq!(plan.requests[0].input.apply(result).content.chars().count(), 500);
        let long = Message::user("y".repeat(5_000));
        assert_eq!(plan.requests[0].input.apply(&long).content.len(), 5_000);
    }

    /// No reactive path by default: a context-length error only reaches the UI.
    #[test]
    fn no_reactive_path_unless_asked() {
        assert!(!strategy().reacts_to(Trigger::Overflow));
        assert!(with(|p| p.react_to_overflow = true).reacts_to(Trigger::Overflow));
        assert!(!with(|p| p.react_to_overflow = true).reacts_to(Trigger::LengthStop));
    }

    #[test]
    fn estimate_leaves_out_the_system_prompt_and_counts_cleared_outputs_as_the_document_does() {
        let s = strategy();
        let ctx = Conv::new().turn(&[1_000]).ctx();
        // user "u0", the call, the output (4 + 1,000), "ok"
        let (user, call, ok) = (4 + bpe("u0"), 4 + bpe("get_page") + bpe(r#"{"id":"p"}"#), 4 + bpe("ok"));
        assert_eq!(s.estimate(&ctx), user + call + 1_004 + ok);
        let mut entries = ctx.entries().to_vec();
        let mut m = entries[3].message().clone();
        m.content = CLEARED_OUTPUT.to_string();
        entries[3] = Entry::new(m, Origin::Masked { index: 3 });
        let pruned = Context::from_entries(entries);
        // a cleared output is 4 + countTokens('[Output cleared]') = 8, not its own text
        assert_eq!(bpe(CLEARED_COUNTED_AS), 4);
        assert_eq!(s.estimate(&pruned), user + call + 8 + ok);
    }

    #[test]
    fn overflow_line_is_window_minus_output_reserve() {
        let b = PruneBudget { context_window: 128_000, output_reserve: 4_096, approaching_ratio: None };
        assert_eq!(b.usable(), 123_904);
        assert!(!b.is_overflow(123_904));
        assert!(b.is_overflow(123_905));
        let s = strategy();
        assert_eq!(s.threshold(&Context::new(), &Budget::new(128_000)), Some(123_904));
        // a window smaller than the reserve overflows at once
        let tiny = PruneBudget { context_window: 1_000, output_reserve: 4_096, approaching_ratio: None };
        assert!(tiny.is_overflow(1));
    }

    #[test]
    fn approaching_variant_triggers_at_ninety_percent_of_usable() {
        let b = PruneBudget { context_window: 128_000, output_reserve: 4_096, approaching_ratio: Some(0.9) };
        // 123,904 x 0.9 = 111,513.6
        assert_eq!(b.line(), 111_513);
        assert!(!b.is_overflow(111_513));
        assert!(b.is_overflow(111_514));

        // Same context, same window: only the approaching variant compacts.
        let ctx = Conv::new().turn(&[5_000]).turn(&[1_000]).turn(&[1_000]).ctx();
        let est = strategy().estimate(&ctx);
        let window = est + 4_096 + 100; // usable = est + 100: not an overflow, but above 90%
        let plain = strategy();
        let approaching = with(|p| p.approaching_ratio = Some(0.9));
        assert!(!plain.should_compact(&ctx, &Budget::new(window)));
        assert!(plain.plan(&ctx, &Budget::new(window), Trigger::Proactive).is_none());
        assert!(approaching.should_compact(&ctx, &Budget::new(window)));
        let plan = approaching.plan(&ctx, &Budget::new(window), Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "summarize");
    }

    // ---- Phase 2: tool output pruning ----

    /// `old` turns with 10,000-token outputs, then two recent turns.
    fn pruning_ctx(old: usize) -> Context {
        let mut c = Conv::new();
        for _ in 0..old {
            c = c.turn(&[10_000]);
        }
        c.turn(&[500]).turn(&[500]).ctx()
    }

    #[test]
    fn pruning_protects_the_newest_40k_and_clears_older_outputs() {
        let s = strategy();
        let ctx = pruning_ctx(7);
        let tools = tool_indices(&ctx);
        let p = s.prune(&ctx, ctx.len());
        // Newest first outside the last 2 turns: 10k, 20k, 30k, 40k (not > 40k: protected),
        // then 50k, 60k and 70k (cleared).
        assert_eq!(p.cleared, tools[..3].to_vec());
        assert_eq!(p.saved, 3 * (10_000 - 4));
        assert!(p.counted);
        assert_eq!(p.tools, vec!["get_page".to_string()]);
        // Two cleared outputs save 19,992 tokens: cleared, but not counted as a prune.
        let ctx = pruning_ctx(6);
        let p = s.prune(&ctx, ctx.len());
        assert_eq!(p.cleared.len(), 2);
        assert!(!p.counted);
    }

    #[test]
    fn a_prune_is_planned_only_above_protect_plus_minimum() {
        let s = strategy();
        let ctx = pruning_ctx(6); // 60,000 outside the last turns: not > 60,000
        assert!(!s.needs_pruning(&ctx, ctx.len()));
        let mut c = Conv::new().turn(&[1]);
        for _ in 0..6 {
            c = c.turn(&[10_000]);
        }
        let ctx = c.turn(&[500]).turn(&[500]).ctx();
        assert!(s.needs_pruning(&ctx, ctx.len()));
    }

    #[test]
    fn prune_only_plan_when_pruning_is_enough() {
        let s = strategy();
        let ctx = pruning_ctx(7);
        let est = s.estimate(&ctx);
        // Over the line by 1,000; clearing 3 outputs saves 29,988.
        let budget = Budget::new(est - 1_000 + 4_096);
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "prune");
        assert!(plan.requests.is_empty());
        let out = s.apply(&ctx, &budget, &plan, &[]);
        assert_eq!(out.event.masked, 3);
        assert_eq!(out.event.removed, 0);
        assert_eq!(out.event.estimate_after, est - 3 * (10_000 - 4));
        assert_eq!(out.event.shortfall, None);
        assert_eq!(plan.notes["outputs_pruned"], 3);
        assert_eq!(plan.notes["tokens_saved"], 3 * 9_996);
        // Calls, ids and names stay; only the outputs change.
        for (i, e) in out.context.entries().iter().enumerate() {
            let before = ctx.entries()[i].message();
            assert_eq!(e.message().tool_calls, before.tool_calls);
            assert_eq!(e.message().tool_call_id, before.tool_call_id);
            assert_eq!(e.message().name, before.name);
        }
        let tools = tool_indices(&ctx);
        for &i in &tools[..3] {
            assert_eq!(out.context.entries()[i].message().content, CLEARED_OUTPUT);
            assert_eq!(out.context.entries()[i].origin(), &Origin::Masked { index: i });
        }
        for &i in &tools[3..] {
            assert_eq!(out.context.entries()[i].message(), ctx.entries()[i].message());
        }
        assert!(check_context(&out.context).is_empty());
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
        // A cleared output is not counted or cleared again.
        let again = s.prune(&out.context, out.context.len());
        assert!(again.cleared.is_empty());
    }

    #[test]
    fn the_last_two_turns_are_never_pruned_nor_counted() {
        let s = strategy();
        // 30,000 of old outputs, 200,000 in the last two turns.
        let ctx = Conv::new().turn(&[30_000]).turn(&[100_000]).turn(&[100_000]).ctx();
        assert!(!s.needs_pruning(&ctx, ctx.len()));
        assert!(s.prune(&ctx, ctx.len()).cleared.is_empty());
        // The last turn is the last user message and what follows; the second-last user message
        // is where the kept window starts.
        let users: Vec<usize> =
            ctx.entries().iter().enumerate().filter(|(_, e)| e.role() == Role::User).map(|(i, _)| i).collect();
        assert_eq!(s.recent_start(&ctx, 1, ctx.len()), users[1]);
        let budget = Budget::new(100_000);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "summarize");
        let out = s.apply(&ctx, &budget, &plan, &ok(&plan));
        // Still over (the recent turns alone are too big): reported, not hidden.
        assert!(out.event.shortfall.is_some());
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
    }

    #[test]
    fn a_prune_under_the_minimum_is_applied_but_not_counted() {
        // Scaled: protect 400, minimum 200; 76 outputs of 8 tokens each = 608 > 600.
        let scaled = |strict| {
            with(|p| {
                p.prune_protect = 400;
                p.prune_minimum = 200;
                p.strict_prune_minimum = strict;
            })
        };
        let mut c = Conv::new().turn(&[8; 76]);
        c = c.turn(&[1]).turn(&[1]);
        let ctx = c.ctx();
        let s = scaled(false);
        assert!(s.needs_pruning(&ctx, ctx.len()));
        let p = s.prune(&ctx, ctx.len());
        // the 51st newest output crosses 400: 26 cleared, each saving 8 - 4
        assert_eq!(p.cleared.len(), 26);
        assert_eq!(p.saved, 26 * 4);
        assert!(!p.counted);
        let budget = Budget::new(s.estimate(&ctx) - 1 + 4_096);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "prune");
        assert_eq!(plan.notes["outputs_pruned"], 0);
        assert_eq!(plan.notes["tokens_saved"], 0);
        assert_eq!(plan.notes["prune_counted"], false);
        assert_eq!(plan.layout.iter().filter(|s| matches!(s, Slot::Mask { .. })).count(), 26);
        // strict: the prune is discarded and the summary does the work
        let strict = scaled(true);
        let plan = strict.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "summarize");
        assert!(!plan.layout.iter().any(|s| matches!(s, Slot::Mask { .. })));
    }

    #[test]
    fn the_pruner_stops_at_a_previous_summary() {
        let s = strategy();
        let mut m = Conv::new().turn(&[60_000]).messages;
        let old_tool = m.iter().position(|x| x.role == Role::Tool).unwrap();
        let n_old = m.len();
        let mut entries: Vec<Entry> = m.drain(..).enumerate().map(|(i, x)| Entry::recorded(i, x)).collect();
        entries.push(Entry::new(Message::assistant("summary"), Origin::Summary { round: 1, covers: vec![1, 2] }));
        let tail = Conv::new().turn(&[30_000]).turn(&[20_000]).turn(&[20_000]).turn(&[1]).turn(&[1]).messages;
        for (k, x) in tail.into_iter().skip(1).enumerate() {
            entries.push(Entry::recorded(n_old + 1 + k, x));
        }
        let ctx = Context::from_entries(entries);
        let tools = tool_indices(&ctx);
        let p = s.prune(&ctx, ctx.len());
        // Newest first after the summary: 20k, 40k (protected), 70k (cleared); then the summary
        // stops the walk and the 60k output before it stays.
        assert_eq!(p.cleared, vec![tools[1]]);
        assert!(!p.cleared.contains(&old_tool));
        // needsPruning does not stop at the summary: 130,000 > 60,000.
        assert!(s.needs_pruning(&ctx, ctx.len()));
    }

    // ---- Phase 4/5: summary, pair placement, failure path ----

    fn summary_ctx() -> Context {
        let mut c = Conv::new();
        for _ in 0..4 {
            c = c.turn(&[30_000]);
        }
        c.turn(&[200]).turn(&[200]).ctx()
    }

    #[test]
    fn summary_is_a_user_assistant_pair_after_the_unchanged_system_prompt() {
        let s = strategy();
        let ctx = summary_ctx();
        let budget = Budget::new(32_000);
        assert!(s.should_compact(&ctx, &budget));
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "prune+summarize");
        assert_eq!(plan.requests.len(), 1);
        let req = &plan.requests[0];
        assert_eq!(req.prompt, prompt());
        assert_eq!(req.max_tokens, 2_000);
        assert_eq!(req.round, 1);
        // The whole conversation after the system prompt is summarized, as compact(messages) does.
        assert_eq!(req.span, (1..ctx.len()).collect::<Vec<_>>());
        let out = s.apply(&ctx, &budget, &plan, &ok(&plan));
        let e = out.context.entries();
        assert_eq!(e[0].message(), ctx.entries()[0].message());
        assert_eq!(e[1].role(), Role::User);
        assert_eq!(e[1].message().content, SUMMARY_REQUEST);
        assert_eq!(
            e[1].message().content,
            "What have we accomplished in our conversation so far? Summarize our progress, current state, and next steps."
        );
        assert_eq!(e[2].role(), Role::Assistant);
        assert_eq!(e[2].message().content, "Pages created: home (p1).");
        assert!(matches!(e[2].origin(), Origin::Summary { round: 1, .. }));
        // The last 2 turns, verbatim.
        let recent = s.recent_start(&ctx, 1, ctx.len());
        assert_eq!(e.len(), 3 + ctx.len() - recent);
        for (a, b) in e[3..].iter().zip(&ctx.entries()[recent..]) {
            assert_eq!(a.message(), b.message());
            assert_eq!(a.origin(), b.origin());
        }
        assert_eq!(e[3].role(), Role::User);
        assert_eq!(out.event.round, Some(1));
        assert!(out.event.shortfall.is_none());
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
    }

    #[test]
    fn a_second_round_summarizes_the_first_pair_and_leaves_one_summary() {
        let s = strategy();
        let ctx = summary_ctx();
        let budget = Budget::new(32_000);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let first = s.apply(&ctx, &budget, &plan, &ok(&plan)).context;
        // Two more big turns arrive.
        let mut next = first.clone();
        let base = ctx.len();
        for (k, m) in Conv::new().turn(&[20_000]).turn(&[20_000]).messages.into_iter().skip(1).enumerate() {
            next.push(Entry::recorded(base + k, m));
        }
        assert!(s.should_compact(&next, &budget));
        let plan = s.plan(&next, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.requests[0].round, 2);
        assert!(plan.requests[0].span.contains(&2), "the previous summary is summarized again");
        let out = s.apply(&next, &budget, &plan, &ok(&plan));
        assert_eq!(out.context.summaries().count(), 1);
        assert_eq!(out.event.round, Some(2));
        assert!(check_compaction(&s, &next, &budget, Trigger::Proactive, &out).is_empty());
    }

    #[test]
    fn error_only_assistant_messages_are_left_out_of_the_summary() {
        let s = strategy();
        let mut m = summary_ctx().to_messages();
        let mut failed = Message::assistant("");
        failed.is_error = true;
        let mut aborted = Message::assistant("");
        aborted.finish_reason = Some("error".into());
        let with_text = Message::assistant("partial answer").with_error();
        let call = ToolCall { id: "e1".into(), name: "get_page".into(), arguments: "{}".into() };
        let with_call = Message::assistant_calls("", vec![call]).with_error();
        assert!(is_error_only(&failed) && is_error_only(&aborted));
        assert!(!is_error_only(&with_text) && !is_error_only(&with_call));
        assert!(!is_error_only(&Message::assistant("")), "no error, kept");
        // After the first assistant answer of turn 1.
        let at = m.iter().position(|x| x.content == "ok").unwrap() + 1;
        m.insert(at, with_text);
        m.insert(at, aborted);
        m.insert(at, failed);
        m.insert(at + 3, with_call);
        m.insert(at + 4, Message::tool_result("e1", "get_page", "boom"));
        let ctx = Context::from_messages(m);
        let budget = Budget::new(32_000);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let span = &plan.requests[0].span;
        assert!(!span.contains(&at) && !span.contains(&(at + 1)));
        assert!(span.contains(&(at + 2)) && span.contains(&(at + 3)) && span.contains(&(at + 4)));
        assert_eq!(plan.notes["dropped_error_only"], serde_json::json!([at, at + 1]));
    }

    #[test]
    fn a_failed_summary_keeps_the_pruned_context() {
        let s = strategy();
        let ctx = summary_ctx();
        let budget = Budget::new(32_000);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
        let fail: Vec<SummaryOutcome> = vec![Err(SummaryFailure { reason: "timeout".into() })];
        let out = s.apply(&ctx, &budget, &plan, &fail);
        assert_eq!(out.context.len(), ctx.len());
        assert_eq!(out.context.summaries().count(), 0);
        assert!(out.event.fallback.as_deref().unwrap().contains("timeout"));
        let cleared = plan.notes["cleared"].as_array().unwrap().len();
        assert!(cleared > 0);
        assert_eq!(out.event.masked, cleared);
        assert!(out.event.shortfall.is_some(), "still over after the prune alone");
        assert!(check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
        // Without a prune the context is unchanged.
        let small = Conv::new().turn(&[10_000]).turn(&[10_000]).turn(&[100]).turn(&[100]).ctx();
        let budget = Budget::new(10_000);
        let plan = s.plan(&small, &budget, Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "summarize");
        let out = s.apply(&small, &budget, &plan, &fail);
        assert_eq!(out.context.to_messages(), small.to_messages());
        assert!(out.event.fallback.is_some());
    }

    #[test]
    fn no_compaction_below_the_line_or_right_after_a_summary() {
        let s = strategy();
        let ctx = summary_ctx();
        let est = s.estimate(&ctx);
        let at_line = Budget::new(est + 4_096);
        assert!(!s.should_compact(&ctx, &at_line));
        assert!(s.plan(&ctx, &at_line, Trigger::Proactive).is_none());
        // Last finished assistant message is the summary: wait for the next answer.
        let mut entries = ctx.entries()[..1].to_vec();
        entries.push(Entry::new(Message::user(SUMMARY_REQUEST), Origin::Inserted { what: Inserted::Other }));
        entries.push(Entry::new(Message::assistant("x".repeat(200_000)), Origin::Summary { round: 1, covers: vec![] }));
        entries.push(Entry::recorded(99, Message::user("next")));
        let just_summarized = Context::from_entries(entries);
        assert!(!s.should_compact(&just_summarized, &Budget::new(8_000)));
        assert!(s.plan(&just_summarized, &Budget::new(8_000), Trigger::Proactive).is_none());
        assert!(!s.reacts_to(Trigger::Overflow));
    }

    #[test]
    fn a_single_run_under_one_user_message_has_nothing_to_summarize() {
        let s = strategy();
        let mut c = Conv::new().turn(&[]);
        for _ in 0..20 {
            c.push_call(5_000);
        }
        let ctx = c.ctx();
        let budget = Budget::new(32_000);
        assert!(s.should_compact(&ctx, &budget));
        assert!(s.plan(&ctx, &budget, Trigger::Proactive).is_none());
        assert_eq!(s.promises(&ctx, &budget).recent_window, ctx.len() - 1);
    }

    /// Gap 5, "PRUNE runs at END, even on error (cleanup)": the end-of-run prune runs by
    /// default; `end_of_run_prune = false` turns it off.
    #[test]
    fn gap_5_end_of_run_prune_runs_by_default() {
        let mut c = Conv::new();
        for _ in 0..8 {
            c = c.turn(&[10_000]);
        }
        let mut m = c.turn(&[100]).messages;
        m.push(Message::user("next request"));
        let ctx = Context::from_messages(m);
        let big = Budget::new(1_000_000);
        assert!(Params::default().end_of_run_prune);
        let off = with(|p| p.end_of_run_prune = false);
        assert!(!off.should_compact(&ctx, &big));
        assert!(off.plan(&ctx, &big, Trigger::Proactive).is_none());
        // The old name still reads.
        let old: Params = serde_json::from_str(r#"{"prune_after_run": false}"#).unwrap();
        assert!(!old.end_of_run_prune);
        let s = strategy();
        assert!(s.should_compact(&ctx, &big));
        let plan = s.plan(&ctx, &big, Trigger::Proactive).unwrap();
        assert_eq!(plan.step, "cleanup-prune");
        // The context as it was at the end of the run: its last 2 turns are the last two
        // completed ones, so the newest 10k turn is protected by the turn rule, the next four
        // by PRUNE_PROTECT, and the three oldest are cleared (counting the new user message as
        // a turn would have cleared four).
        let tools = tool_indices(&ctx);
        assert_eq!(plan.notes["cleared"], serde_json::json!([tools[0], tools[1], tools[2]]));
        assert_eq!(s.prune(&ctx, ctx.len()).cleared.len(), 4);
        let out = s.apply(&ctx, &big, &plan, &[]);
        let violations = check_compaction(&s, &ctx, &big, Trigger::Proactive, &out);
        let documented = s.promises(&ctx, &big).documented_deviations;
        assert!(violations.iter().all(|v| documented.contains(&v.kind())), "{violations:?}");
        // Not in the middle of a run.
        let mid = Context::from_entries(ctx.entries()[..ctx.len() - 2].to_vec());
        assert!(s.cleanup_plan(&mid, Trigger::Proactive).is_none());
    }

    // ---- Phase 6: the full flow ----

    #[test]
    fn full_flow_prunes_then_summarizes_and_stays_valid() {
        let s = strategy();
        let mut ctx = Context::from_messages(vec![Message::system("You are a CMS agent.")]);
        let budget = Budget::new(128_000);
        let (mut prunes, mut summaries, mut calls, mut recorded) = (0, 0, 0, 1);
        for turn in 0..40 {
            // 2,000 tokens of request text per turn, which pruning cannot shrink.
            let mut msgs = vec![Message::user(format!("{turn}{}", " y".repeat(2_000)))];
            for _ in 0..3 {
                let id = format!("c{calls}");
                calls += 1;
                let call = ToolCall { id: id.clone(), name: "get_page".into(), arguments: "{}".into() };
                msgs.push(Message::assistant_calls("", vec![call]));
                msgs.push(Message::tool_result(id, "get_page", output(2_500)));
            }
            msgs.push(Message::assistant(format!("section {turn} done")));
            for m in msgs {
                // Check before each model call: after a user message or a tool result.
                let before_call = m.role != Role::Assistant;
                ctx.push(Entry::recorded(recorded, m));
                recorded += 1;
                if before_call && s.should_compact(&ctx, &budget) {
                    if let Some(plan) = s.plan(&ctx, &budget, Trigger::Proactive) {
                        let out = s.apply(&ctx, &budget, &plan, &ok(&plan));
                        let violations = check_compaction(&s, &ctx, &budget, Trigger::Proactive, &out);
                        let documented = s.promises(&ctx, &budget).documented_deviations;
                        assert!(violations.iter().all(|v| documented.contains(&v.kind())), "{violations:?}");
                        assert_eq!(out.event.shortfall, None);
                        prunes += usize::from(out.event.masked > 0);
                        summaries += out.event.summaries.len();
                        ctx = out.context;
                    }
                }
                assert!(check_context(&ctx).is_empty());
            }
        }
        assert!(prunes > 0 && summaries > 0, "prunes {prunes}, summaries {summaries}");
    }

    // ---- Params ----

    #[test]
    fn params_defaults_and_validation() {
        let p: Params = serde_json::from_str("{}").unwrap();
        assert_eq!(p, Params::default());
        assert_eq!(p.prune_protect, 40_000);
        assert_eq!(p.prune_minimum, 20_000);
        assert_eq!(p.output_reserve, 4_096);
        assert_eq!(p.min_turns_to_keep, 2);
        assert!(serde_json::from_str::<Params>(r#"{"prune_protekt": 1}"#).is_err());
        let bad = PruneThenSummarize::new(Params { approaching_ratio: Some(1.5), ..Params::default() });
        assert_eq!(bad.unwrap_err().param, "approaching_ratio");
        let bad = PruneThenSummarize::new(Params { min_turns_to_keep: 0, ..Params::default() });
        assert_eq!(bad.unwrap_err().param, "min_turns_to_keep");
        let cfg: StrategyConfig =
            serde_json::from_str(r#"{"name":"prune-then-summarize","approaching_ratio":0.9}"#).unwrap();
        assert!(cfg.build().is_ok());
    }

    // ---- the running totals against the document's walks ----

    use proptest::prelude::{prop, prop_assert_eq, prop_oneof, proptest, ProptestConfig, Strategy as Gen};

    /// `needsPruning` as the document writes it: a walk over the whole history.
    fn needs_pruning_walk(s: &PruneThenSummarize, ctx: &Context, end: usize) -> bool {
        let limit = s.params.prune_protect.saturating_add(s.params.prune_minimum);
        let (mut total, mut turns) = (0u64, 0);
        for e in ctx.entries()[..end].iter().rev() {
            if e.role() == Role::User {
                turns += 1;
            }
            if turns < s.params.min_turns_to_keep {
                continue;
            }
            if e.role() == Role::Tool && !is_cleared(e) {
                total += s.output_tokens(e);
                if total > limit {
                    return true;
                }
            }
        }
        false
    }

    /// `countTotalTokens` as the document writes it: a cleared output at a time.
    fn estimate_walk(s: &PruneThenSummarize, ctx: &Context) -> u64 {
        let mut t = ctx.entries().iter().map(|e| e.tokens(&s.estimator)).sum::<u64>();
        if let Some(sys) = ctx.system_prompt() {
            t = t.saturating_sub(sys.tokens(&s.estimator));
        }
        for e in ctx.entries().iter().filter(|e| is_cleared(e)) {
            t = t.saturating_sub(e.tokens(&s.estimator)) + s.cleared_message_tokens();
        }
        t
    }

    /// One step of a generated history: `(kind, size)`; kinds 0 user, 1 answer, 2 call, 3 and 4
    /// a result (4 masked when it goes in), 5 a summary.
    fn arb_steps() -> impl Gen<Value = Vec<(u8, usize)>> {
        prop::collection::vec((0u8..6, 0usize..3_000), 0..120)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The trigger's O(last turns) `needsPruning` and the estimate from running totals give
        /// the document's walks' answers, whether the totals were known before the history grew
        /// and outputs were masked in place, or summed afterwards.
        #[test]
        fn running_totals_give_the_walks_answers(
            steps in arb_steps(),
            masks in prop::collection::vec(0usize..120, 0..20),
            protect in prop_oneof![0u64..200, 2_000u64..40_000],
            minimum in 0u64..2_000,
            turns in 1usize..4,
            early in prop::bool::ANY,
        ) {
            let s = with(|p| {
                p.prune_protect = protect;
                p.prune_minimum = minimum;
                p.min_turns_to_keep = turns;
            });
            let mut ctx = Context::new();
            ctx.push_metered(Entry::recorded(0, Message::system("You edit pages.")), &[&s.estimator]);
            if early {
                // Ask now: every push and replace after this keeps the totals.
                s.estimate(&ctx);
                s.needs_pruning(&ctx, ctx.len());
            }
            for (k, &(kind, n)) in steps.iter().enumerate() {
                let i = ctx.len();
                let text = "w ".repeat(n / 2);
                let entry = match kind {
                    0 => Entry::recorded(i, Message::user(text)),
                    1 => Entry::recorded(i, Message::assistant(text)),
                    2 => Entry::recorded(i, Message::assistant_calls("", vec![ToolCall {
                        id: format!("c{k}"), name: "get_page".into(), arguments: "{}".into(),
                    }])),
                    3 => Entry::recorded(i, Message::tool_result(format!("c{k}"), "get_page", text)),
                    4 => Entry::new(Message::tool_result(format!("c{k}"), "get_page", "[Output cleared]"),
                        Origin::Masked { index: i }),
                    _ => Entry::new(Message::assistant(text), Origin::Summary { round: 1, covers: vec![0] }),
                };
                ctx.push_metered(entry, &[&s.estimator]);
            }
            for m in masks {
                if ctx.get(m).is_some_and(|e| e.role() == Role::Tool && !is_cleared(e)) {
                    let masked = compaction::masked_entry(&ctx.entries()[m], "[Output cleared]");
                    ctx.replace(m, masked, &[&s.estimator]);
                }
            }
            prop_assert_eq!(s.estimate(&ctx), estimate_walk(&s, &ctx));
            for end in 0..=ctx.len() {
                prop_assert_eq!(s.needs_pruning(&ctx, end), needs_pruning_walk(&s, &ctx, end), "end {}", end);
            }
        }
    }
}
