//! `cut-point`: timeline compaction with cut points and split turns (seed 002).
//!
//! The document's timeline is a stream of typed blocks. Our messages map onto them so:
//!
//! | block | our entry | cut-point candidate | message block (token accounting) |
//! |---|---|---|---|
//! | `user.prompt` (turn start) | user message | yes | yes |
//! | `assistant.completion` | assistant message without tool calls | yes | yes |
//! | `react.tool.call` | assistant message with tool calls | yes | yes |
//! | `react.tool.result` | tool result | no | yes |
//! | `conv.range.summary` | an entry with [`Origin::Summary`] | no | no |
//! | system text | the leading system messages | — | — |
//!
//! A system message after the leading ones is a block with author `system`: neither a
//! candidate nor a message block.
//!
//! # What it does
//!
//! 1. **Trigger**: compact when `system + blocks > 0.9 x max_tokens`
//!    ([`Params::trigger_ratio`]), or unconditionally on [`Trigger::Overflow`] (the document's
//!    "retry after a context-limit error" forces compaction).
//! 2. **TTL pruning first**: tool results of old turns are hidden behind replacement text
//!    (masked, call ids kept). Our messages have no timestamps, so the TTL is counted in turns
//!    ([`Params::ttl_turns`], default 2: the most recent 2 turns stay intact, as the timeline's
//!    `keep_recent_intact_turns` default). A result whose replacement would not be shorter is
//!    left alone. The threshold is checked again on the pruned timeline; if it is now under,
//!    the compaction is the pruning alone.
//! 3. **Cut index** (`_find_compaction_cut_point`): walk back from the end over the blocks
//!    after the last summary, accumulating the tokens of message blocks until
//!    `accumulated >= keep_recent_tokens`; take the first candidate at or after that block (if
//!    there is none, the first candidate); then backtrack over blocks that are neither message
//!    blocks nor the summary.
//! 4. **Split turns**: if the cut is not on a turn start (a user message) and the turn's start
//!    is after the last summary, the turn's prefix (start..cut) is summarized separately
//!    ([`split_turn_prefix_prompt`], 400 tokens) and appended under
//!    `**Turn Context (split turn):**`; everything from the last summary to the turn start gets
//!    the progressive summary ([`progressive_prompt`], 800 tokens), which integrates the
//!    previous summary. With no history and a previous summary, the previous text is reused;
//!    with neither, the text is `No prior history.`.
//! 5. **One live summary**: the summary (a system message right after the system prompt) is
//!    followed by the retained window from the cut; the previous summary and everything
//!    before the cut are gone (the document's render slices after the latest summary, and the
//!    persisted timeline starts there).
//!
//! The plan's notes hold the summary block's metadata: `covered_turn_ids`, `split_turn_id`
//! (when split), `compaction_digest` (blocks, tokens, tool outputs by tool, and the hidden
//! blocks with their replacement text, by tool: `{"read": [[recorded index, text], ...]}`, a
//! pair per block rather than an object, which at 100,000 messages made half the cost of a
//! compaction), `path` (`su:<turn_id>.conv.range.summary`) and
//! `cut_index`. Turn ids are `turn-<recorded index of the turn's user message>`; a turn whose
//! start was summarized earlier is named by its first visible block.
//!
//! `CutPoint::cache_points` computes the three cache points (previous turn, round `N-4`,
//! tail) of a context as the document defines them, and [`Strategy::cache_breakpoints`] hands
//! them to the caller: under the Anthropic cache profile the replay places its breakpoints
//! there (and on the system prompt), so the cache-hit rate is the one this design buys.
//!
//! The reactive path is the document's "retry after context-limit error"
//! (`react_to_overflow`, on by default, unlike the seeds whose documents have no such path).
//!
//! # Choices where the document is silent, and deviations
//!
//! - **Estimator**: [`CharsOver4Role4`]. The timeline estimates each block's text at about four
//!   characters a token (the system text as `len / 4`); a tool call block's text is its JSON
//!   payload, so tool names and arguments count, and each block carries a little framing. Of
//!   the project's heuristics this one counts the same things (text, call payloads, a fixed
//!   per-message overhead).
//! - **`keep_recent_tokens`**: the document gives no number. Unless set, it is
//!   `0.7 x (max_tokens - system tokens)` ([`Params::keep_recent_ratio`]), the figure the
//!   timeline implementation derives it from.
//! - **TTL pruning only runs when compacting**: in the document it runs on every render; our
//!   harness calls a strategy only when its trigger fires (or on overflow), so old results
//!   stay visible until then.
//! - **Summarizer failure**: the document only says the failed call is retried after forced
//!   compaction. When a requested summary fails, the compaction is abandoned as the timeline
//!   does (it returns its blocks unchanged when a summary comes back empty), keeping the TTL
//!   pruning that ran before it; the caller's retry then overflows and is recorded as such.
//! - **Tool boundary guard**: cut rules alone keep results with their calls when results
//!   follow their call directly. If a recording puts a candidate between a call and one of
//!   its results, the cut moves back to the call rather than orphan the result.
//! - The summary's span for the summarizer lists the entries as they are in the context
//!   (results hidden in the same step are sent in full). The document's hooks
//!   (`on_before_compaction`, ...) are the event's `estimate_before` / `estimate_after`.
//! - Produced artifacts and memsearch hits of the document's digest do not exist in our
//!   messages and are not recorded.
//! - A split-turn cut leaves the retained window starting with an assistant block, which the
//!   Anthropic role-alternation check reports; [`Strategy::promises`] lists it when the cut
//!   splits a turn.
//!
//! **What a provider refuses (a finding about the document).** When the cut lands inside a
//! turn, or the kept history starts on an assistant message, the request after the document's
//! summary can begin with an assistant message: the Anthropic Messages API refuses that
//! (`first_not_user`), OpenAI accepts it. Declared in `documented_rejections`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::BuildHasherDefault;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use seeded::Fnv;

use crate::common::ParamError;
use compaction::context::{Context, Origin};
use compaction::message::{Message, Role};
use compaction::pairing::{call_of_result, tool_pairs};
use compaction::request::{Provider, RequestRule};
use compaction::tokens::{CharsOver4Role4, TokenCounter};
use compaction::ViolationKind;
use compaction::{
    apply_layout, Budget, Compacted, Fallback, Plan, Profile, Promises, Prompt, Slot, Strategy, SummaryOutcome,
    SummaryRequest, Trigger,
};

/// The name of the progressive summary's prompt.
const PROGRESSIVE: &str = "progressive";
/// The name of the split turn's prefix prompt.
const SPLIT_TURN_PREFIX: &str = "split_turn_prefix";

/// The progressive summary's prompt (`cut_point/progressive.md`, beside this module): the
/// compacted range, integrating the summary so far.
pub fn progressive_prompt() -> Prompt {
    Prompt::new(PROGRESSIVE, include_str!("cut_point/progressive.md"))
}

/// The prompt for the prefix of a split turn (`cut_point/split_turn_prefix.md`).
pub fn split_turn_prefix_prompt() -> Prompt {
    Prompt::new(SPLIT_TURN_PREFIX, include_str!("cut_point/split_turn_prefix.md"))
        .with_heading("## Summary: Turn Context (split turn)")
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![progressive_prompt(), split_turn_prefix_prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Over 90% of the window (or after an overflow) hides old tool results, cuts at the first user/assistant/tool-call block that keeps the recent tokens, and replaces everything before it with one progressive summary (plus a split-turn prefix summary when the cut falls inside a turn).";

/// Heading of the split-turn prefix inside the summary text.
pub const SPLIT_TURN_HEADING: &str = "\n\n---\n\n**Turn Context (split turn):**\n\n";
/// Summary text when there is nothing before the split turn and no previous summary.
pub const NO_PRIOR_HISTORY: &str = "No prior history.";

/// Parameters of `cut-point`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Compact when system + blocks are over this fraction of the window (0.9).
    pub trigger_ratio: f64,
    /// Tokens of recent message blocks to keep after the cut; unset: keep_recent_ratio x (window - system tokens). The document gives no number.
    pub keep_recent_tokens: Option<u64>,
    /// When keep_recent_tokens is unset, the share of (window - system tokens) to keep (0.7).
    pub keep_recent_ratio: f64,
    /// TTL pruning in turns: tool results older than the last this-many turns are hidden behind replacement text (2; 0 turns it off). The document counts time; our messages have none.
    pub ttl_turns: usize,
    /// Token cap of the progressive summary (800).
    pub summary_max_tokens: u32,
    /// Token cap of the split-turn prefix summary (400).
    pub split_turn_max_tokens: u32,
    /// Cache points: the pre-tail point sits on the last block of round N - this (cache_point_offset_rounds = 4).
    pub cache_offset_rounds: usize,
    /// Cache points: rounds needed before a pre-tail point is placed (cache_point_min_rounds = 2).
    pub cache_min_rounds: usize,
    /// Force a compaction when the request is over the window ("Retry after context-limit error": `retry_with_compaction`).
    pub react_to_overflow: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            trigger_ratio: 0.9,
            keep_recent_tokens: None,
            keep_recent_ratio: 0.7,
            ttl_turns: 2,
            summary_max_tokens: 800,
            split_turn_max_tokens: 400,
            cache_offset_rounds: 4,
            cache_min_rounds: 2,
            react_to_overflow: true,
        }
    }
}

/// The `cut-point` strategy.
#[derive(Debug, Clone, Default)]
pub struct CutPoint {
    params: Params,
    estimator: CharsOver4Role4,
}

/// The cache points of a context, as indices into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CachePoints {
    /// The last block before the current turn's user message, if the turn has one in view.
    pub previous_turn: Option<usize>,
    /// The last block of round `N - offset`, when there are enough rounds.
    pub pre_tail: Option<usize>,
    /// The last block.
    pub tail: Option<usize>,
}

/// Where the main summary text comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Main {
    /// Request 0 (progressive).
    Request,
    /// The previous summary, reused.
    Previous,
    /// `No prior history.`
    Nothing,
}

impl Main {
    fn as_str(self) -> &'static str {
        match self {
            Main::Request => "request",
            Main::Previous => "previous",
            Main::Nothing => "none",
        }
    }
}

/// The regions of a context as the timeline sees them.
struct Regions {
    /// End of the leading system messages.
    sys_end: usize,
    /// The live summary, if any.
    last_summary: Option<usize>,
    /// The first block after the last summary.
    boundary: usize,
}

fn regions(ctx: &Context) -> Regions {
    let sys_end =
        ctx.entries().iter().position(|e| e.role() != Role::System || e.origin().is_summary()).unwrap_or(ctx.len());
    let last_summary = ctx.summaries().map(|(i, _)| i).filter(|i| *i >= sys_end).last();
    let boundary = last_summary.map_or(sys_end, |s| s + 1);
    Regions { sys_end, last_summary, boundary }
}

fn is_turn_start(ctx: &Context, i: usize) -> bool {
    ctx.get(i).is_some_and(|e| !e.origin().is_summary() && e.role() == Role::User)
}

fn recorded(ctx: &Context, i: usize) -> usize {
    match ctx.get(i).map(|e| e.origin()) {
        Some(Origin::Recorded { index } | Origin::Masked { index }) => *index,
        _ => i,
    }
}

/// What the plan reads of every entry, gathered in one pass: its role, the estimator's units
/// and, for a tool result, its tool's name (interned: a handful of names stand for tens of
/// thousands of results).
struct Timeline<'a> {
    ctx: &'a Context,
    roles: Vec<Role>,
    units: Vec<u64>,
    /// Whether each entry makes tool calls.
    calls: Vec<bool>,
    /// Each tool result's name (`tool` when it has none) as an index into `names`; [`NO_NAME`]
    /// for the other entries.
    name_of: Vec<u32>,
    names: Vec<&'a str>,
}

/// [`Timeline::name_of`] of an entry that is not a tool result.
const NO_NAME: u32 = u32::MAX;

impl<'a> Timeline<'a> {
    fn new(ctx: &'a Context, estimator: &CharsOver4Role4) -> Timeline<'a> {
        let n = ctx.len();
        let mut t = Timeline {
            ctx,
            roles: Vec::with_capacity(n),
            units: Vec::with_capacity(n),
            calls: Vec::with_capacity(n),
            name_of: Vec::with_capacity(n),
            names: Vec::new(),
        };
        let mut ids: HashMap<&str, u32, BuildHasherDefault<Fnv>> = HashMap::default();
        for e in ctx.entries() {
            let m = e.message();
            t.roles.push(m.role);
            t.units.push(e.units(estimator));
            t.calls.push(m.has_tool_calls());
            let id = if m.role == Role::Tool {
                let name = m.name.as_deref().unwrap_or("tool");
                *ids.entry(name).or_insert_with(|| {
                    t.names.push(name);
                    (t.names.len() - 1) as u32
                })
            } else {
                NO_NAME
            };
            t.name_of.push(id);
        }
        t
    }
    fn role(&self, i: usize) -> Option<Role> {
        self.roles.get(i).copied()
    }
    fn is_summary(&self, i: usize) -> bool {
        self.ctx.get(i).is_some_and(|e| e.origin().is_summary())
    }
    /// A cut-point candidate: a user or assistant message that is not a summary.
    fn is_candidate(&self, i: usize) -> bool {
        !self.is_summary(i) && matches!(self.role(i), Some(Role::User | Role::Assistant))
    }
    /// A message block: a candidate or a tool result.
    fn is_message_block(&self, i: usize) -> bool {
        self.is_candidate(i) || self.role(i) == Some(Role::Tool)
    }
    /// A turn start: a user message that is not a summary ([`is_turn_start`]).
    fn is_turn_start(&self, i: usize) -> bool {
        !self.is_summary(i) && self.role(i) == Some(Role::User)
    }
    /// The tool name of tool result `i`.
    fn name(&self, i: usize) -> &'a str {
        self.names[self.name_of[i] as usize]
    }
}

/// The turn of every entry from `from` on (`None` before it), as the number in its turn id
/// (`turn-<n>`, see [`turn_id`]): the recorded index of the turn's first visible block.
fn turn_ids(ctx: &Context, from: usize, is_turn_start: impl Fn(usize) -> bool) -> Vec<Option<usize>> {
    let mut out = vec![None; ctx.len()];
    let mut current: Option<usize> = None;
    for (i, slot) in out.iter_mut().enumerate().skip(from) {
        if ctx.get(i).is_some_and(|e| e.origin().is_summary()) {
            continue;
        }
        if is_turn_start(i) || current.is_none() {
            current = Some(recorded(ctx, i));
        }
        *slot = current;
    }
    out
}

/// The turn id of turn number `n`.
fn turn_id(n: usize) -> String {
    format!("turn-{n}")
}

/// The TTL mask of one tool result: its replacement text, and the estimator's units of the
/// message with that text.
struct TtlMask {
    text: String,
    units: u64,
}

/// The TTL masks of a context, by entry.
struct Masks {
    by_entry: Vec<Option<TtlMask>>,
    count: usize,
}

impl Masks {
    fn get(&self, i: usize) -> Option<&TtlMask> {
        self.by_entry.get(i).and_then(Option::as_ref)
    }
    fn len(&self) -> usize {
        self.count
    }
    fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// The replacement text of entry `i`, moved out (each is needed once more after the
    /// fallback layout has its copy).
    fn take_text(&mut self, i: usize) -> Option<String> {
        self.by_entry.get_mut(i).and_then(Option::take).map(|m| m.text)
    }
}

/// The tool-boundary guard of `_find_compaction_cut_point`: from `cut`, move back to the call
/// of any pair (with its call at `start` or after) that the cut separates from its result,
/// until none is. Each move skips only cuts the same pair separates, so the guard ends at the
/// last cut at or before `cut` that separates no such pair.
///
/// Only the results after a cut can be separated from their calls, so the pairs come from the
/// results at the end of the context, each paired walking back from it
/// ([`call_of_result`]); the walk gives up once it has looked at as many entries as the
/// context holds, and the guard then pairs the whole context ([`tool_pairs`]).
fn guard_cut(ctx: &Context, start: usize, cut: usize) -> usize {
    let mut budget = ctx.len() + 64;
    let mut cut = cut;
    // The smallest call (at `start` or after) of the results from `seen` on.
    let mut lowest = usize::MAX;
    let mut seen = ctx.len();
    loop {
        for r in (cut..seen).rev() {
            match call_of_result(ctx, r, &mut budget) {
                Some(Some(c)) if c >= start => lowest = lowest.min(c),
                Some(_) => {}
                None => return guard_cut_with_pairs(&tool_pairs(ctx), start, cut),
            }
        }
        seen = cut;
        if lowest < cut {
            cut = lowest;
        } else {
            return cut;
        }
    }
}

/// The guard with every pair of the context at hand, as `_find_compaction_cut_point` runs it.
fn guard_cut_with_pairs(pairs: &[(usize, usize)], start: usize, mut cut: usize) -> usize {
    while let Some(&(c, _)) = pairs.iter().find(|(c, r)| *c < cut && cut <= *r && *c >= start) {
        cut = c;
    }
    cut
}

fn verbatim_tail(ctx: &Context, layout: &[Slot]) -> usize {
    layout
        .iter()
        .rev()
        .enumerate()
        .take_while(|(j, s)| matches!(s, Slot::Keep { index } if ctx.len() > *j && *index == ctx.len() - 1 - j))
        .count()
}

/// The document's trigger for one context window: compact when system + blocks are over
/// `trigger_ratio x max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CutPointBudget {
    /// The model's context window (the document's `max_tokens`).
    pub max_tokens: u64,
    pub trigger_ratio: f64,
}

impl CutPointBudget {
    pub fn new(params: &Params, budget: &Budget) -> CutPointBudget {
        CutPointBudget { max_tokens: budget.context_window, trigger_ratio: params.trigger_ratio }
    }
    /// `floor(max_tokens x trigger_ratio)`: compaction runs when the estimate is above it.
    pub fn threshold(&self) -> u64 {
        (self.max_tokens as f64 * self.trigger_ratio).floor() as u64
    }
}

impl CutPoint {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<CutPoint, ParamError> {
        const N: &str = "cut-point";
        if !(params.trigger_ratio > 0.0 && params.trigger_ratio <= 1.0) {
            return Err(ParamError::new(
                N,
                "trigger_ratio",
                format!("must be in (0, 1], got {}", params.trigger_ratio),
            ));
        }
        if !(params.keep_recent_ratio > 0.0 && params.keep_recent_ratio <= 1.0) {
            return Err(ParamError::new(
                N,
                "keep_recent_ratio",
                format!("must be in (0, 1], got {}", params.keep_recent_ratio),
            ));
        }
        if params.keep_recent_tokens == Some(0) {
            return Err(ParamError::new(N, "keep_recent_tokens", "must be at least 1"));
        }
        if params.summary_max_tokens == 0 || params.split_turn_max_tokens == 0 {
            let p = if params.summary_max_tokens == 0 { "summary_max_tokens" } else { "split_turn_max_tokens" };
            return Err(ParamError::new(N, p, "must be at least 1"));
        }
        Ok(CutPoint { params, estimator: CharsOver4Role4 })
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The trigger's numbers for one context window.
    pub(crate) fn budget(&self, budget: &Budget) -> CutPointBudget {
        CutPointBudget::new(&self.params, budget)
    }

    fn trigger_threshold(&self, budget: &Budget) -> u64 {
        self.budget(budget).threshold()
    }

    /// The recent-token budget for `ctx`.
    pub fn keep_recent_tokens(&self, ctx: &Context, budget: &Budget) -> u64 {
        match self.params.keep_recent_tokens {
            Some(k) => k,
            None => {
                let system = ctx.range_tokens(0..regions(ctx).sys_end, &self.estimator);
                let available = budget.context_window.saturating_sub(system).max(1);
                ((available as f64 * self.params.keep_recent_ratio).floor() as u64).max(1)
            }
        }
    }

    /// TTL pruning: placeholders for the tool results of turns older than the last `ttl_turns`.
    fn ttl_masks(&self, tl: &Timeline, boundary: usize) -> Masks {
        let ctx = tl.ctx;
        let mut out = Masks { by_entry: Vec::new(), count: 0 };
        let ttl = self.params.ttl_turns;
        if ttl == 0 {
            return out;
        }
        out.by_entry.resize_with(ctx.len(), || None);
        let mut turn = vec![0usize; ctx.len()];
        let mut t = 0;
        for (i, slot) in turn.iter_mut().enumerate().skip(boundary) {
            if tl.is_turn_start(i) {
                t += 1;
            }
            *slot = t;
        }
        let total = t;
        // Each masked message is measured in this one, so measuring allocates nothing. It has
        // the result's role, text and calls and no other field, which the estimator does not
        // read (`the_estimator_reads_role_text_and_calls_only` holds it to that).
        let mut masked = Message::new(Role::Tool, String::new());
        for (i, e) in ctx.entries().iter().enumerate().skip(boundary) {
            let old = turn[i] + ttl <= total;
            if !old || tl.roles[i] != Role::Tool || !matches!(e.origin(), Origin::Recorded { .. }) {
                continue;
            }
            let tokens = self.estimator.tokens_from_units(tl.units[i]);
            let name = tl.name(i);
            masked.content.clear();
            // Writing to a `String` cannot fail.
            let _ = write!(masked.content, "[{name} result hidden: {tokens} tokens, from an earlier turn]");
            if tl.calls[i] {
                masked.tool_calls.clone_from(&e.message().tool_calls);
            } else {
                masked.tool_calls.clear();
            }
            let units = self.estimator.message_units(&masked);
            if units < tl.units[i] {
                out.by_entry[i] = Some(TtlMask { text: masked.content.clone(), units });
                out.count += 1;
            }
        }
        out
    }

    fn slot(i: usize, masks: &Masks) -> Slot {
        match masks.get(i) {
            Some(mask) => Slot::Mask { index: i, placeholder: mask.text.clone() },
            None => Slot::Keep { index: i },
        }
    }

    /// `_find_compaction_cut_point` over `start..ctx.len()`: the cut, and the start of the turn
    /// it splits (if it splits one).
    fn find_cut(&self, tl: &Timeline, start: usize, keep: u64, units: &[u64]) -> (usize, Option<usize>) {
        let ctx = tl.ctx;
        let end = ctx.len();
        let candidates: Vec<usize> = (start..end).filter(|i| tl.is_candidate(*i)).collect();
        let Some(&first) = candidates.first() else {
            return (start, None);
        };
        let mut cut = first;
        let mut accumulated = 0u64;
        for i in (start..end).rev() {
            if !tl.is_message_block(i) {
                continue;
            }
            accumulated += self.estimator.tokens_from_units(units[i]);
            if accumulated >= keep {
                // The first candidate at or after `i` (the candidates are in order).
                if let Some(&c) = candidates.get(candidates.partition_point(|c| *c < i)) {
                    cut = c;
                }
                break;
            }
        }
        while cut > start {
            let prev = cut - 1;
            if tl.is_summary(prev) || tl.is_message_block(prev) {
                break;
            }
            cut -= 1;
        }
        // Guard: never leave a result after the cut whose call is before it.
        let cut = guard_cut(ctx, start, cut);
        if tl.is_turn_start(cut) {
            return (cut, None);
        }
        let turn_start = (start..cut).rev().find(|i| tl.is_turn_start(*i));
        (cut, turn_start)
    }

    /// The compaction digest of `range`.
    fn digest(&self, tl: &Timeline, range: std::ops::Range<usize>, units: &[u64], masks: &mut Masks) -> Value {
        let ctx = tl.ctx;
        // Results per tool name, by the name's index in the timeline.
        let mut counts = vec![0usize; tl.names.len()];
        // Hidden blocks per tool name, by the name's index, as `[recorded index, text]`.
        let mut hidden: Vec<Vec<Value>> = vec![Vec::new(); tl.names.len()];
        let mut tokens = 0;
        for i in range.clone() {
            let Some(e) = ctx.get(i) else { continue };
            tokens += self.estimator.tokens_from_units(units[i]);
            if tl.roles[i] != Role::Tool {
                continue;
            }
            counts[tl.name_of[i] as usize] += 1;
            let replacement = match (e.origin(), masks.take_text(i)) {
                (_, Some(text)) => Some(text),
                (Origin::Masked { .. }, None) => Some(e.message().content.clone()),
                _ => None,
            };
            if let Some(text) = replacement {
                // `json!` would copy `text` (it serializes a reference): the values move in.
                let item = vec![Value::from(recorded(ctx, i)), Value::String(text)];
                hidden[tl.name_of[i] as usize].push(Value::Array(item));
            }
        }
        let mut digest = serde_json::Map::new();
        digest.insert("blocks".into(), Value::from(range.len()));
        digest.insert("tokens".into(), Value::from(tokens));
        let tool_outputs: BTreeMap<&str, usize> =
            tl.names.iter().zip(counts).filter(|(_, n)| *n > 0).map(|(name, n)| (*name, n)).collect();
        digest.insert("tool_outputs".into(), json!(tool_outputs));
        let hidden: serde_json::Map<String, Value> = tl
            .names
            .iter()
            .zip(hidden)
            .filter(|(_, h)| !h.is_empty())
            .map(|(name, h)| ((*name).to_string(), Value::Array(h)))
            .collect();
        digest.insert("hidden".into(), Value::Object(hidden));
        Value::Object(digest)
    }

    /// The cache points of `ctx` after rendering: the last block before the current turn, the
    /// last block of round `N - cache_offset_rounds` (when there are at least that many rounds
    /// before the last, and at least `cache_min_rounds`), and the last block.
    ///
    /// Rounds are counted over the visible stream (from the live summary on): each assistant
    /// message with tool calls is a round with its results; the assistant messages without
    /// calls of one turn make its final completion round.
    pub(crate) fn cache_points(&self, ctx: &Context) -> CachePoints {
        let r = regions(ctx);
        let start = r.last_summary.unwrap_or(r.sys_end);
        let end = ctx.len();
        if start >= end {
            return CachePoints::default();
        }
        let tail = Some(end - 1);
        let previous_turn =
            (start..end).rev().find(|i| is_turn_start(ctx, *i)).filter(|ts| *ts > start).map(|ts| ts - 1);

        let turns = turn_ids(ctx, start, |i| is_turn_start(ctx, i));
        let mut last_of: HashMap<usize, usize> = HashMap::new();
        for (c, res) in tool_pairs(ctx) {
            if c >= start {
                let e = last_of.entry(c).or_insert(c);
                *e = (*e).max(res);
            }
        }
        let mut rounds: BTreeMap<String, usize> = BTreeMap::new();
        for (i, e) in ctx.entries().iter().enumerate().skip(start) {
            if e.role() != Role::Assistant || e.origin().is_summary() {
                continue;
            }
            let (key, last) = if e.message().has_tool_calls() {
                (format!("call-{i}"), last_of.get(&i).copied().unwrap_or(i))
            } else {
                (format!("final-{}", turns[i].map(turn_id).unwrap_or_default()), i)
            };
            let slot = rounds.entry(key).or_insert(last);
            *slot = (*slot).max(last);
        }
        let mut lasts: Vec<usize> = rounds.into_values().collect();
        lasts.sort_unstable();
        let n = lasts.len();
        let offset = self.params.cache_offset_rounds;
        let pre_tail = (n >= self.params.cache_min_rounds && n > offset).then(|| lasts[n - 1 - offset]);
        CachePoints { previous_turn, pre_tail, tail }
    }

    fn summary_slot() -> Slot {
        Slot::Summary { request: 0, role: Role::System, prefix: String::new(), suffix: String::new() }
    }
}

impl Strategy for CutPoint {
    fn profile(&self) -> Profile {
        Profile {
            documented_rejections: vec![(Provider::AnthropicMessages, RequestRule::FirstNotUser)],
            ..Profile::default()
        }
    }
    fn name(&self) -> &'static str {
        "cut-point"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.estimator
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        Some(self.trigger_threshold(budget))
    }
    fn reacts_to(&self, trigger: Trigger) -> bool {
        trigger == Trigger::Overflow && self.params.react_to_overflow
    }
    /// The document's three cache points (previous turn, round `N-4`, tail), recomputed on
    /// every render: where a provider that takes explicit breakpoints caches this request.
    fn cache_breakpoints(&self, ctx: &Context) -> Option<Vec<usize>> {
        let p = CutPoint::cache_points(self, ctx);
        let mut points: Vec<usize> = [p.previous_turn, p.pre_tail, p.tail].into_iter().flatten().collect();
        points.sort_unstable();
        points.dedup();
        Some(points)
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let forced = trigger == Trigger::Overflow;
        let threshold = self.trigger_threshold(budget);
        let before = self.estimate(ctx);
        if !forced && before <= threshold {
            return None;
        }
        let r = regions(ctx);
        let tl = Timeline::new(ctx, &self.estimator);
        let mut masks = self.ttl_masks(&tl, r.boundary);
        let has_masks = !masks.is_empty();
        let units: Vec<u64> = (0..ctx.len()).map(|i| masks.get(i).map_or(tl.units[i], |m| m.units)).collect();
        let after_ttl = self.estimator.tokens_from_units(units.iter().sum());

        let mut notes = serde_json::Map::new();
        notes.insert("forced".into(), json!(forced));
        notes.insert("trigger_threshold".into(), json!(threshold));
        notes.insert("ttl_hidden".into(), json!(masks.len()));
        notes.insert("estimate_after_ttl".into(), json!(after_ttl));
        let ttl_layout: Vec<Slot> = (0..ctx.len()).map(|i| Self::slot(i, &masks)).collect();
        let ttl_only = |notes: serde_json::Map<String, Value>| {
            has_masks.then(|| {
                let mut plan = Plan::deterministic(trigger, "ttl", ttl_layout.clone());
                plan.notes = notes;
                plan
            })
        };
        if !forced && after_ttl <= threshold {
            return ttl_only(notes);
        }

        let keep = self.keep_recent_tokens(ctx, budget);
        notes.insert("keep_recent_tokens".into(), json!(keep));
        let (cut, turn_start) = self.find_cut(&tl, r.boundary, keep, &units);
        if cut <= r.boundary {
            return ttl_only(notes);
        }
        let history_end = turn_start.unwrap_or(cut);
        let history: Vec<usize> = (r.boundary..history_end).collect();
        let prefix: Vec<usize> = turn_start.map(|ts| (ts..cut).collect()).unwrap_or_default();
        let previous = r.last_summary.and_then(|s| ctx.get(s)).map(|e| e.message().content.trim().to_string());
        let previous = previous.filter(|p| !p.is_empty());
        let round = ctx.last_round() + 1;

        let mut requests = Vec::new();
        let main = if !history.is_empty() {
            let mut request =
                SummaryRequest::new(history.clone(), progressive_prompt(), self.params.summary_max_tokens, round);
            request.previous.clone_from(&previous);
            requests.push(request);
            Main::Request
        } else if previous.is_some() {
            Main::Previous
        } else {
            Main::Nothing
        };
        if !prefix.is_empty() {
            requests.push(SummaryRequest::new(
                prefix.clone(),
                split_turn_prefix_prompt(),
                self.params.split_turn_max_tokens,
                round,
            ));
        }

        let turns = turn_ids(ctx, r.sys_end, |i| tl.is_turn_start(i));
        // First occurrences in order; the set keeps this linear in the covered range.
        let mut seen: HashSet<usize, BuildHasherDefault<Fnv>> = HashSet::default();
        let mut covered_turns: Vec<String> = Vec::new();
        let mut last = None;
        for &n in turns[r.boundary..cut].iter().flatten() {
            if last != Some(n) && seen.insert(n) {
                covered_turns.push(turn_id(n));
            }
            last = Some(n);
        }
        let summary_turn = turns[cut].map(turn_id).unwrap_or_default();
        notes.insert("cut_index".into(), json!(cut));
        notes.insert("covered_turn_ids".into(), Value::from(covered_turns));
        if let Some(ts) = turn_start {
            notes.insert("split_turn_id".into(), json!(turns[ts].map(turn_id)));
        }
        notes.insert("compaction_digest".into(), self.digest(&tl, r.boundary..cut, &units, &mut masks));
        notes.insert("path".into(), json!(format!("su:{summary_turn}.conv.range.summary")));
        notes.insert("main_summary".into(), json!(main.as_str()));
        if let Some(s) = r.last_summary {
            notes.insert("previous_summary_index".into(), json!(s));
        }

        let mut layout: Vec<Slot> = (0..r.sys_end).map(|index| Slot::Keep { index }).collect();
        layout.push(Self::summary_slot());
        layout.extend((cut..ctx.len()).map(|i| match masks.take_text(i) {
            Some(placeholder) => Slot::Mask { index: i, placeholder },
            None => Slot::Keep { index: i },
        }));
        let mut steps = Vec::new();
        if has_masks {
            steps.push("ttl");
        }
        steps.push("cut");
        if turn_start.is_some() {
            steps.push("split_turn");
        }
        Some(Plan {
            trigger,
            layout,
            requests,
            fallback: Fallback::Layout { label: "summary failed, compaction abandoned".into(), layout: ttl_layout },
            step: steps.join("+"),
            notes,
        })
    }
    /// Join the progressive summary (or the reused previous one) and the split-turn prefix into
    /// the one summary block, covering the previous summary, the history and the prefix.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        let failed = plan
            .requests
            .iter()
            .enumerate()
            .any(|(i, _)| !matches!(summaries.get(i), Some(Ok(t)) if !t.trim().is_empty()));
        let has_summary_slot = plan.layout.iter().any(|s| matches!(s, Slot::Summary { .. }));
        if failed || !has_summary_slot {
            let reasons: Vec<SummaryOutcome> = plan
                .requests
                .iter()
                .enumerate()
                .map(|(i, _)| match summaries.get(i) {
                    Some(Ok(t)) if t.trim().is_empty() => {
                        Err(compaction::SummaryFailure { reason: "empty summary".into() })
                    }
                    Some(s) => s.clone(),
                    None => Err(compaction::SummaryFailure { reason: "no summary given".into() }),
                })
                .collect();
            return apply_layout(self, ctx, budget, plan, &reasons);
        }
        let text_of = |name: &str| {
            plan.requests.iter().position(|r| r.prompt.name == name).and_then(|i| match summaries.get(i) {
                Some(Ok(t)) => Some(t.trim().to_string()),
                _ => None,
            })
        };
        let r = regions(ctx);
        let main = match plan.notes.get("main_summary").and_then(Value::as_str) {
            Some("previous") => r.last_summary.and_then(|s| ctx.get(s)).map(|e| e.message().content.trim().to_string()),
            Some("none") => Some(NO_PRIOR_HISTORY.to_string()),
            _ => text_of(PROGRESSIVE),
        }
        .unwrap_or_else(|| NO_PRIOR_HISTORY.to_string());
        let text = match text_of(SPLIT_TURN_PREFIX) {
            Some(prefix) => format!("{main}{SPLIT_TURN_HEADING}{prefix}"),
            None => main,
        };
        let mut span: Vec<usize> = r.last_summary.into_iter().collect();
        for req in &plan.requests {
            span.extend_from_slice(&req.span);
        }
        let combined = SummaryRequest::new(
            span,
            progressive_prompt(),
            self.params.summary_max_tokens,
            plan.requests.first().map_or(ctx.last_round() + 1, |q| q.round),
        );
        // The plan with the joined request. Its fallback only matters when the text is blank,
        // and its notes only go into the event: both are copied only when needed (they hold
        // a layout and a digest the size of the context).
        let fallback = if text.trim().is_empty() { plan.fallback.clone() } else { Fallback::Unchanged };
        let joined = Plan {
            trigger: plan.trigger,
            layout: plan.layout.clone(),
            requests: vec![combined],
            fallback,
            step: plan.step.clone(),
            notes: serde_json::Map::new(),
        };
        let mut out = apply_layout(self, ctx, budget, &joined, &[Ok(text)]);
        out.event.notes = plan.notes.clone();
        out
    }
    fn promises(&self, ctx: &Context, budget: &Budget) -> Promises {
        let mut documented_deviations = Vec::new();
        let recent_window = match self.plan(ctx, budget, Trigger::Overflow) {
            None => ctx.len(),
            Some(plan) => {
                if plan.notes.contains_key("split_turn_id") {
                    documented_deviations.push(ViolationKind::RoleAlternation);
                }
                let mut w = verbatim_tail(ctx, &plan.layout);
                if let Fallback::Layout { layout, .. } = &plan.fallback {
                    w = w.min(verbatim_tail(ctx, layout));
                }
                w
            }
        };
        Promises { keeps_system_prompt: true, recent_window, documented_deviations }
    }
}

#[cfg(test)]
mod tests;

/// The implementation before it was rewritten for speed, kept as the oracle the rewrite is
/// held to. It lives with the tests (`tests/it/oracles/cut_point.rs`) and is compiled into this
/// module's unit tests, because it compares private steps.
#[cfg(test)]
#[path = "../tests/it/oracles/cut_point.rs"]
pub(crate) mod legacy;
