//! `priority-chain`: the threshold priority chain of a staged paper-writing chat (seed 000).
//!
//! The document inserts a compaction layer between message building and an existing brute
//! prune, in a route that rebuilds its message list from the stored conversation on every
//! request. In paper mode that list is first cut to its newest 40 messages (Task 9's legacy
//! trim, `MAX_CHAT_HISTORY_PAIRS * 2`, which the document says "do NOT remove it yet"): every
//! system message stays, then the newest `paper_trim_last` conversation messages, on every
//! request that has more (step `trim`; the chain then estimates the trimmed list). When the estimate (`ceil(total content chars / 4)`, JavaScript string length, see
//! [`CharsOver4`]) is over 85% of the window (`COMPACTION_TRIGGER`), it runs priorities in
//! order and stops as soon as the estimate is under 85% again (strictly `<`):
//!
//! - **P1** strips chitchat: user messages of at most 50 raw characters whose trimmed,
//!   lowercased text is shorter than 15 characters and holds no `?` or `!`.
//! - **P2** (paper mode) drops the oldest completed stages, one at a time, by their message
//!   boundaries, then injects the stage digest as a system message after the system messages
//!   (`[CONTEXT COMPACTION: N tahap sebelumnya di-compact]` ...). The threshold is checked after
//!   each dropped stage and before the digest goes in, as the document's code does.
//! - **P3** asks an LLM to summarize the oldest conversation (non-system) messages: 30% of them,
//!   at most 30, in paper mode; `min(20, 40%)` otherwise; only when that count is over 2. The
//!   summary becomes a system message (`[RINGKASAN DISKUSI SEBELUMNYA]\n...\n\nPercakapan
//!   berlanjut dari sini.`) placed after all system messages, which move to the front.
//! - **P4** (paper mode) only signals the caller to shrink its stage-data window. Our contexts
//!   have no stage data, so it is recorded (`notes.resolved_at = "P4"`, `notes.p4_signal`) and
//!   changes nothing.
//! - **P5** is the route's brute prune at 80% of the window: keep every system message, then
//!   the last 50 conversation messages.
//!
//! # Mapping to our messages
//!
//! - *Paper mode* ([`Mode`]): `auto` (default) is paper mode when any message carries a stage
//!   label ([`Message::stage`]).
//! - *Stages and boundaries*: the document records `{stage, firstMessageId, lastMessageId}`
//!   when a stage is approved. Here a stage's boundary is its first..last labelled message;
//!   stages are ordered by their first message; a stage is completed once a later stage has
//!   begun, so every stage but the current one (the label of the last labelled message) is
//!   completed. Dropping a stage removes every non-system message of its range, as
//!   `excludeStageMessages` does.
//! - *Digest entries*: the document's `paperMemoryDigest` holds one `{stage, decision}` entry
//!   per approval. Here an entry comes from a message whose `meta["stage_decision"]` is a string
//!   (the decision recorded when its stage was approved); its stage is the message's own label.
//!   When a stage has several decisions (re-approved after a revision), the earlier ones count
//!   as superseded and only the last is used. Stage ids are printed as they are: the document's
//!   `getStageLabel` table is not part of it.
//! - *Summary prompt*: [`paper_mid_stage_prompt`] with the current stage (or `unknown`), or
//!   [`general_chat_prompt`]; `maxTokens: 200`, and the prompts' "Max 500 karakter total"
//!   as the request's character target (`summary_max_chars`), which the offline summarizer
//!   fits. The messages go to the model whole (`[${m.role}]: ${m.content}`): no input cuts. An
//!   empty summary counts as a failure (`result.text || null`).
//!
//! # Where this differs from the document, and why
//!
//! - **The prune runs on the pre-chain estimate** ([`PruneCheck::BeforeChain`], default). The
//!   document's route computes `budget` once, runs the chain when `budget.shouldCompact`, then
//!   prunes when `budget.shouldPrune`, so the prune decision uses the estimate from before the
//!   chain; its text calls the prune a safety net that "applies its own threshold check". Since
//!   80% < 85%, every chain run is followed by the prune in the code as written. The code wins;
//!   `prune_check = "after_chain"` gives the safety-net reading (re-estimate after the chain).
//! - **The prune fires first**: between 80% and 85% the chain does not run but the prune does,
//!   so [`Strategy::threshold`] is the lower of the two thresholds (80% by default). Both
//!   ratios are params.
//! - **The prune's body** is not in the document, which only names "the existing 80% brute
//!   prune"; the route it modifies keeps the system messages and the last 50 conversation
//!   messages (`keepLastN = 50`), exposed as `prune_keep_last`, whose description says so.
//! - **The test of Task 1 contradicts its code**: it expects `shouldPrune == false` at 436,000
//!   chars and `shouldCompact == true` at 420,000 chars of a 128k window, which the formulas it
//!   ships cannot produce (85% > 80%). We implement the formulas; the test module reproduces
//!   those cases with the values the code gives.
//! - **Tool calls**: the document's chat has none. Our P3 split and P5 prune move their split
//!   point forward past the results of any call they would cut from its results (and P2 drops
//!   a call and its results together), so no result is orphaned and no call loses its result;
//!   `keep_tool_pairs = false` cuts at the document's raw counts.
//! - **Each request starts from the full history** (`rebuild_from_history`, default true): the
//!   route rebuilds the message list from the database on every request, so the replay hands
//!   the chain the full history before every call ([`Profile::rebuilds_from_history`](compaction::Profile::rebuilds_from_history)) and
//!   the chain, with its P3 model call, runs again on every call whose (trimmed) history is
//!   over the trigger; every such call is counted. `rebuild_from_history = false` carries the
//!   compacted context from call to call instead: an earlier digest is merged into the new one
//!   (its stage count and entries are kept, as re-running P2 over all boundaries would), and an
//!   earlier P3 summary stays as a system message, so a second P3 leaves two live summaries.
//!
//!   What that costs is ours to keep down, not the document's: the chain keeps an index of the
//!   history with it ([`Context::memo`]: roles, P1's test, the chitchat's size), read only as
//!   far as the history grew since the previous request. In general chat with the prune decided
//!   before the chain (the default), P5's outcome is known when the plan is made, so the plan
//!   holds the pruned layouts (every system message, P3's summary, the newest conversation
//!   messages) and costs what it keeps. Paper mode (and `prune_check = "after_chain"`) still
//!   reads the whole history on each request.
//! - **No reactive path**: the route sends whatever the chain and the prune leave;
//!   [`Strategy::reacts_to`] is false (`react_to_overflow = false`).
//! - **The trim compacts under the threshold**: it runs on every paper-mode request over 40
//!   messages, so [`Strategy::should_compact`] holds then too, and
//!   [`ViolationKind::CompactedBelowThreshold`] is declared for such contexts.
//!
//! Deliberate invariant breaks (see [`Strategy::promises`]): role alternation (P1 removes user
//! turns, P3 and P5 cut at counts), several live summaries after a second P3, and, when a
//! system message sits inside the conversation, order (P3 and P5 move system messages first).
//!
//! **What a provider refuses (a finding about the document).** The document's brute prune and
//! its summaries of the oldest messages can leave an assistant message first in the
//! conversation; the Anthropic Messages API refuses that (`first_not_user`), OpenAI accepts
//! it. P1 strips every short user message as the document writes it, the latest one
//! included: a request that ended with one can then end in a tool loop whose latest assistant
//! message carries no thinking blocks while an earlier one does, which Anthropic refuses
//! (`thinking_modified`). With `keep_tool_pairs = false` its raw message counts cut between a
//! call and its result, which both providers refuse (an orphaned result, an unanswered call).
//! Declared in `documented_rejections`.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::common::ParamError;
use compaction::context::{Context, Entry, Inserted, Origin};
use compaction::message::{Message, Role};
use compaction::pairing::{call_of_result, result_of_call, tool_pairs};
use compaction::request::{Provider, RequestRule};
use compaction::tokens::{js_len, CharsOver4, TokenCounter};
use compaction::ViolationKind;
use compaction::{
    apply_layout, build_layout, Budget, Built, Compacted, CompactionEvent, Fallback, Plan, Profile, Promises, Slot,
    Strategy, SummaryOutcome, SummaryRequest, Trigger,
};

mod prompts;
pub use prompts::{general_chat_prompt, paper_mid_stage_prompt, prompts};

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "In paper mode keeps only the newest 40 messages; over 85% of the window (chars/4) strips chitchat, drops the oldest completed stages behind a stage digest, LLM-summarizes the oldest messages into a system message, then brute-prunes to the system messages and the last 50 at 80%.";

/// Text around the P3 summary (the document's exact wording).
pub const SUMMARY_PREFIX: &str = "[RINGKASAN DISKUSI SEBELUMNYA]\n";
/// The text after the summary (the paper's own, in Indonesian: the conversation continues from here).
pub const SUMMARY_SUFFIX: &str = "\n\nPercakapan berlanjut dari sini.";
const DIGEST_HEAD: &str = "[CONTEXT COMPACTION: ";
const DIGEST_FOOT: &str = "\n\nDetail tersimpan di stageData. Pesan asli tetap ada di database.";

/// Whether the chain runs in the paper workflow's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Paper mode when any message carries a stage label.
    Auto,
    /// Always paper mode (P2 and P4 run; P3 uses the paper fraction and prompt).
    Paper,
    /// Always general chat (no P2 or P4; P3 uses the general fraction and prompt).
    General,
}

/// Which estimate the brute prune (P5) compares with its threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PruneCheck {
    /// The estimate from before the chain, as the document's route code does.
    BeforeChain,
    /// The estimate after the chain, as the document's text describes a safety net.
    AfterChain,
}

/// Parameters of `priority-chain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Paper mode: `auto` (when messages carry stage labels), `paper` or `general`.
    pub mode: Mode,
    /// The chain runs when the estimate is over this fraction of the window (COMPACTION_TRIGGER, 0.85).
    pub compaction_ratio: f64,
    /// The brute prune (P5) runs over this fraction of the window (0.80, below the chain's trigger as written).
    pub prune_ratio: f64,
    /// Estimate the prune checks: `before_chain` (the route's code) or `after_chain` (its text).
    pub prune_check: PruneCheck,
    /// Conversation messages the brute prune keeps, besides all system messages (keepLastN = 50: not in the document, which only names "the existing 80% brute prune"; taken from the route it modifies).
    pub prune_keep_last: usize,
    /// Paper mode: before the chain, every request keeps only its newest this-many conversation messages (Task 9's legacy trim, MAX_CHAT_HISTORY_PAIRS x 2 = 40, which the document says not to remove yet); 0 turns the trim off.
    pub paper_trim_last: usize,
    /// Every request starts from the full history, as the route rebuilds its message list from the stored conversation on each call, so the chain (and its P3 model call) runs again whenever the full history is over the threshold; `false` carries the compacted context from call to call instead.
    pub rebuild_from_history: bool,
    /// React to an over-window request by compacting again (the document has no such path: the route sends whatever the chain and the prune leave).
    pub react_to_overflow: bool,
    /// P1: a user message longer than this (raw JavaScript length) is never chitchat (50).
    pub chitchat_max_length: u64,
    /// P1: chitchat is shorter than this once trimmed and lowercased (15).
    pub chitchat_short_length: u64,
    /// P3 in paper mode: fraction of conversation messages to summarize (0.3).
    pub paper_summarize_ratio: f64,
    /// P3 in paper mode: at most this many messages (30).
    pub paper_summarize_max: usize,
    /// P3 in general chat: fraction of conversation messages to summarize (0.4).
    pub general_summarize_ratio: f64,
    /// P3 in general chat: at most this many messages (P3_GENERAL_CHAT_OLDEST_COUNT = 20).
    pub general_summarize_max: usize,
    /// P3 runs only when the count to summarize is over this (2).
    pub summarize_more_than: usize,
    /// Token cap of the P3 summary (maxTokens: 200).
    pub summary_max_tokens: u32,
    /// Length the P3 prompts ask for, in characters ("Max 500 karakter total"), passed to the summarizer as its target.
    pub summary_max_chars: u32,
    /// Move the P3 split and the P5 prune so they never separate a tool call from its results (not in the document, whose chat has no tools).
    pub keep_tool_pairs: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            mode: Mode::Auto,
            compaction_ratio: 0.85,
            prune_ratio: 0.80,
            prune_check: PruneCheck::BeforeChain,
            prune_keep_last: 50,
            paper_trim_last: 40,
            rebuild_from_history: true,
            react_to_overflow: false,
            chitchat_max_length: 50,
            chitchat_short_length: 15,
            paper_summarize_ratio: 0.3,
            paper_summarize_max: 30,
            general_summarize_ratio: 0.4,
            general_summarize_max: 20,
            summarize_more_than: 2,
            summary_max_tokens: 200,
            summary_max_chars: 500,
            keep_tool_pairs: true,
        }
    }
}

/// The `priority-chain` strategy.
#[derive(Debug, Clone, Default)]
pub struct PriorityChain {
    params: Params,
    estimator: CharsOver4,
}

/// The document's `checkContextBudget`: both thresholds and whether each fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChainBudget {
    pub total_tokens: u64,
    /// `floor(window x compaction_ratio)`.
    pub compaction_threshold: u64,
    /// `floor(window x prune_ratio)`.
    pub prune_threshold: u64,
    /// `total_tokens > compaction_threshold`.
    pub should_compact: bool,
    /// `total_tokens > prune_threshold`.
    pub should_prune: bool,
}

/// What the deterministic part of the chain (P1, P2, and the P3 split) decided.
struct Chain {
    /// The working list after P1 and P2 (and the digest).
    items: Vec<Item>,
    /// The stage digest, when P2 injected one (the list holds it as [`DIGEST`]).
    digest: Option<Message>,
    stripped: usize,
    compacted_stages: Vec<String>,
    /// `P1` or `P2` when the chain resolved before P3.
    resolved: Option<&'static str>,
    /// The P3 request and the layout that holds its summary.
    p3: Option<(SummaryRequest, Vec<Slot>)>,
}

fn unit_ratio(strategy: &'static str, param: &'static str, v: f64, allow_zero: bool) -> Result<(), ParamError> {
    let ok = if allow_zero { (0.0..=1.0).contains(&v) } else { v > 0.0 && v <= 1.0 };
    if ok {
        Ok(())
    } else {
        let range = if allow_zero { "[0, 1]" } else { "(0, 1]" };
        Err(ParamError::new(strategy, param, format!("must be in {range}, got {v}")))
    }
}

/// What the chain reads of every entry of a context (role, units, whether it is chitchat or
/// has a stage label), gathered in one pass, and the context's tool pairs, found on first use.
struct Scan<'a> {
    ctx: &'a Context,
    roles: Vec<Role>,
    units: Vec<u64>,
    /// P1's test on each entry.
    chitchat: Vec<bool>,
    /// Whether any message carries a stage label.
    staged: bool,
    pairs: OnceCell<Vec<(usize, usize)>>,
}

impl<'a> Scan<'a> {
    fn new(ctx: &'a Context, chain: &PriorityChain) -> Scan<'a> {
        let mut roles = Vec::with_capacity(ctx.len());
        let mut units = Vec::with_capacity(ctx.len());
        let mut chitchat = Vec::with_capacity(ctx.len());
        let mut staged = false;
        for e in ctx.entries() {
            let m = e.message();
            roles.push(m.role);
            chitchat.push(chain.is_chitchat(m));
            staged |= m.stage.is_some();
            units.push(e.units(&chain.estimator));
        }
        Scan { ctx, roles, units, chitchat, staged, pairs: OnceCell::new() }
    }
    /// The role of entry `i` (a user message's when there is no such entry).
    fn role(&self, i: usize) -> Role {
        self.roles.get(i).copied().unwrap_or(Role::User)
    }
    /// The estimator's units of entry `i` (0 when there is no such entry).
    fn units(&self, i: usize) -> u64 {
        self.units.get(i).copied().unwrap_or(0)
    }
    fn pairs(&self) -> &[(usize, usize)] {
        self.pairs.get_or_init(|| tool_pairs(self.ctx))
    }

    /// [`pair_safe_split`] with this context's tool pairs.
    ///
    /// The split only depends on the pairs that can rule out splits from `k` on. Near the start
    /// of `seq` (the P3 split) those are the pairs of the calls before the split, and near its
    /// end (the trim and the prune) the pairs of the results after `k`; each is found from its
    /// call or its result alone ([`result_of_call`], [`call_of_result`]), so a split costs what
    /// the entries around it cost, not the whole context. When that search grows past the size
    /// of the context (a call never answered, a result answering nothing) it gives up, and the
    /// split comes from every pair of the context, as it would anyway.
    fn safe_split(&self, seq: &[Option<usize>], k: usize) -> usize {
        let len = seq.len();
        if k >= len {
            return k.min(len);
        }
        match self.pairs.get() {
            Some(pairs) => pair_safe_split(seq, k, pairs),
            None => split_with(self.ctx, seq, k, || Cow::Borrowed(self.pairs())),
        }
    }

    /// The position of each entry in `seq` (the last one when an entry appears twice), `NONE`
    /// for the others.
    fn positions(seq: &[Option<usize>]) -> Vec<usize> {
        let size = seq.iter().flatten().max().map_or(0, |m| m + 1);
        let mut pos = vec![NO_POSITION; size];
        for (p, i) in seq.iter().enumerate() {
            if let Some(i) = *i {
                pos[i] = p;
            }
        }
        pos
    }

    /// [`Searched::split_from_calls`] over `seq`.
    #[cfg(test)]
    fn split_from_calls(&self, seq: &[Option<usize>], k: usize, budget: usize) -> Option<usize> {
        over_seq(self.ctx, seq, &Self::positions(seq)).split_from_calls(k, budget)
    }

    /// [`Searched::split_from_results`] over `seq`.
    #[cfg(test)]
    fn split_from_results(&self, seq: &[Option<usize>], k: usize, budget: usize) -> Option<usize> {
        over_seq(self.ctx, seq, &Self::positions(seq)).split_from_results(k, budget)
    }
}

/// A list of context entries searched for a pair-safe split near `k`: `len` positions, the
/// entry at each (`entry`, `None` for a new message) and the position of an entry
/// (`position`: the last one when it appears twice).
struct Searched<'c, E, P> {
    ctx: &'c Context,
    len: usize,
    entry: E,
    position: P,
}

/// `seq` as a [`Searched`] list, with its positions `pos` ([`Scan::positions`]).
fn over_seq<'a>(
    ctx: &'a Context,
    seq: &'a [Option<usize>],
    pos: &'a [usize],
) -> Searched<'a, impl Fn(usize) -> Option<usize> + 'a, impl Fn(usize) -> Option<usize> + 'a> {
    Searched {
        ctx,
        len: seq.len(),
        entry: |p: usize| seq[p],
        position: |i: usize| pos.get(i).copied().filter(|p| *p != NO_POSITION),
    }
}

impl<E: Fn(usize) -> Option<usize>, P: Fn(usize) -> Option<usize>> Searched<'_, E, P> {
    /// The local search of [`Scan::safe_split`]: from the calls before `k` when the split is in
    /// the first half, from the results after it otherwise. `None` when it gives up: it looks
    /// at no more entries than the whole pairing would.
    fn near(&self, k: usize) -> Option<usize> {
        if k >= self.len {
            return Some(k.min(self.len));
        }
        let budget = self.ctx.len() + 64;
        if k <= self.len - k {
            self.split_from_calls(k, budget)
        } else {
            self.split_from_results(k, budget)
        }
    }

    /// The split from the calls before it: the split `s` is ruled out when a call before it
    /// has its result at `s` or after, so it moves past the furthest such result until none is
    /// left. `None` when the search runs out of `budget` (entries looked at).
    fn split_from_calls(&self, k: usize, budget: usize) -> Option<usize> {
        let (ctx, len, position) = (self.ctx, self.len, &self.position);
        let mut budget = budget;
        let mut reach: Option<usize> = None;
        let (mut p, mut split) = (0, k);
        loop {
            while p < split.min(len) {
                if let Some(c) = (self.entry)(p).filter(|c| position(*c) == Some(p)) {
                    let calls = ctx.get(c).map_or(0, |e| e.message().tool_calls.len());
                    for t in 0..calls {
                        if let Some(r) = result_of_call(ctx, c, t, &mut budget)? {
                            if let Some(pr) = position(r).filter(|pr| *pr > p) {
                                reach = Some(reach.map_or(pr, |f| f.max(pr)));
                            }
                        }
                    }
                }
                p += 1;
            }
            match reach {
                Some(f) if f >= split => split = f + 1,
                _ => return Some(split),
            }
        }
    }

    /// The split from the results at `k` and after: each rules out the splits after its call
    /// up to itself. `None` when the search runs out of `budget`.
    fn split_from_results(&self, k: usize, budget: usize) -> Option<usize> {
        let (len, position) = (self.len, &self.position);
        let mut budget = budget;
        // `delta[s - k]` counts the pairs that start and stop ruling out split `s`.
        let mut delta = vec![0i64; len - k + 2];
        for p in k..len {
            let Some(r) = (self.entry)(p).filter(|r| position(*r) == Some(p)) else { continue };
            let Some(c) = call_of_result(self.ctx, r, &mut budget)? else { continue };
            if let Some(pc) = position(c).filter(|pc| *pc < p) {
                delta[(pc + 1).max(k) - k] += 1;
                delta[p + 1 - k] -= 1;
            }
        }
        let mut ruled_out = 0i64;
        for (d, split) in delta.iter().zip(k..=len) {
            ruled_out += d;
            if ruled_out == 0 {
                return Some(split);
            }
        }
        Some(len)
    }
}

/// Marks an entry absent from a list in [`Scan::positions`].
const NO_POSITION: usize = usize::MAX;

/// The smallest split `>= k` of `seq` (entries of the context, by index; `None` for new
/// messages) that leaves no tool call before the split with a result after it.
///
/// A pair whose call sits at position `c` of `seq` and its result at `r > c` rules out the
/// splits `c + 1..=r`; the answer is the first split from `k` on that no pair rules out (at
/// most `seq.len()`, which none does). Moving `k` to `r + 1` while a pair straddles it, until
/// none does, reaches that same split: every split it passes over is ruled out.
fn pair_safe_split(seq: &[Option<usize>], k: usize, pairs: &[(usize, usize)]) -> usize {
    const NONE: usize = usize::MAX;
    let len = seq.len();
    if k >= len || pairs.is_empty() {
        return k.min(len);
    }
    // Position of each entry in `seq` (the last one when an entry appears twice).
    let size = seq.iter().flatten().max().map_or(0, |m| m + 1);
    let mut pos = vec![NONE; size];
    for (p, i) in seq.iter().enumerate() {
        if let Some(i) = *i {
            pos[i] = p;
        }
    }
    // `delta` counts the pairs that start and stop ruling out each split.
    let mut delta = vec![0i64; len + 1];
    for &(c, r) in pairs {
        let (Some(&pc), Some(&pr)) = (pos.get(c), pos.get(r)) else { continue };
        if pc == NONE || pr == NONE || pc >= pr {
            continue;
        }
        delta[pc + 1] += 1;
        delta[pr + 1] -= 1;
    }
    let mut ruled_out = 0i64;
    for (split, d) in delta.iter().enumerate() {
        ruled_out += d;
        if split >= k && ruled_out == 0 {
            return split;
        }
    }
    len
}

/// The positions of a list that P5 (and the paper-mode trim) keeps, in order: every system
/// position, then the last `keep` conversation positions, the cut moved forward past a split
/// tool pair by `split` when it is given ([`Scan::safe_split`] or [`split_in`]). `entry`
/// gives the context entry at a position (`None` for a new message).
fn keep_last_positions(
    len: usize,
    is_system: impl Fn(usize) -> bool,
    entry: impl Fn(usize) -> Option<usize>,
    keep: usize,
    split: Option<&SplitFn<'_>>,
) -> Vec<usize> {
    let (mut out, conversation): (Vec<usize>, Vec<usize>) = (0..len).partition(|&p| is_system(p));
    let mut k = conversation.len().saturating_sub(keep);
    if let (Some(split), true) = (split, k > 0) {
        let seq: Vec<Option<usize>> = conversation.iter().map(|&p| entry(p)).collect();
        k = split(&seq, k);
    }
    out.extend_from_slice(&conversation[k..]);
    out
}

/// A pair-safe split of a list of entries at `k` ([`Scan::safe_split`], [`split_in`]).
type SplitFn<'a> = dyn Fn(&[Option<usize>], usize) -> usize + 'a;

/// [`Scan::safe_split`] without a scan.
fn split_in(ctx: &Context, seq: &[Option<usize>], k: usize) -> usize {
    split_with(ctx, seq, k, || Cow::Owned(tool_pairs(ctx)))
}

/// [`Scan::safe_split`], from every pair of the context (`pairs`) only when the search near
/// the split gives up. A list of entries in order (the lists P5 prunes in general chat) has
/// each entry's position found by binary search, so the split costs what the entries around it
/// cost.
fn split_with<'p>(
    ctx: &Context,
    seq: &[Option<usize>],
    k: usize,
    pairs: impl FnOnce() -> Cow<'p, [(usize, usize)]>,
) -> usize {
    let sorted = seq.windows(2).all(|w| w[0] < w[1]);
    match seq.iter().copied().collect::<Option<Vec<usize>>>() {
        Some(entries) if sorted => sorted_split(ctx, &entries, k, pairs),
        _ => {
            let pos = Scan::positions(seq);
            let near = over_seq(ctx, seq, &pos).near(k);
            near.unwrap_or_else(|| pair_safe_split(seq, k, &pairs()))
        }
    }
}

/// [`split_with`] over `entries`, a list of context entries in order.
fn sorted_split<'p>(
    ctx: &Context,
    entries: &[usize],
    k: usize,
    pairs: impl FnOnce() -> Cow<'p, [(usize, usize)]>,
) -> usize {
    let list = Searched {
        ctx,
        len: entries.len(),
        entry: |p: usize| Some(entries[p]),
        position: |i: usize| entries.binary_search(&i).ok(),
    };
    list.near(k).unwrap_or_else(|| {
        let seq: Vec<Option<usize>> = entries.iter().map(|&i| Some(i)).collect();
        pair_safe_split(&seq, k, &pairs())
    })
}

/// An item of the working list the plan builds: a context entry, or [`DIGEST`].
type Item = usize;
/// The item standing for the stage digest P2 injects (a new system message).
const DIGEST: Item = usize::MAX;

/// `js_len(text) <= max`, without counting a long text through: a UTF-8 text of `n` bytes is
/// between `n / 3` and `n` UTF-16 units long.
fn js_len_at_most(text: &str, max: u64) -> bool {
    let bytes = text.len() as u64;
    if bytes <= max {
        return true;
    }
    if bytes / 3 > max {
        return false;
    }
    js_len(text) <= max
}

fn slot_role(ctx: &Context, slot: &Slot) -> Role {
    match slot {
        Slot::Keep { index } | Slot::Mask { index, .. } => ctx.get(*index).map_or(Role::User, Entry::role),
        Slot::Summary { role, .. } => *role,
        Slot::Insert { message, .. } => message.role,
    }
}

fn slot_entry(slot: &Slot) -> Option<usize> {
    match slot {
        Slot::Keep { index } | Slot::Mask { index, .. } => Some(*index),
        _ => None,
    }
}

/// How many trailing slots reproduce the context's trailing entries verbatim.
fn verbatim_tail(ctx: &Context, layout: &[Slot]) -> usize {
    layout
        .iter()
        .rev()
        .enumerate()
        .take_while(|(j, s)| matches!(s, Slot::Keep { index } if ctx.len() > *j && *index == ctx.len() - 1 - j))
        .count()
}

/// The stage digest text (`buildStageDigestMessage`).
pub fn stage_digest_text(stage_count: usize, entries: &str) -> String {
    format!("{DIGEST_HEAD}{stage_count} tahap sebelumnya di-compact]\n{entries}{DIGEST_FOOT}")
}

/// The stage count and entry lines of a digest this strategy wrote.
fn parse_digest(text: &str) -> Option<(usize, String)> {
    let rest = text.strip_prefix(DIGEST_HEAD)?;
    let (count, rest) = rest.split_once(' ')?;
    let (_, body) = rest.split_once('\n')?;
    let entries = body.strip_suffix(DIGEST_FOOT)?;
    Some((count.parse().ok()?, entries.to_string()))
}

impl PriorityChain {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<PriorityChain, ParamError> {
        const N: &str = "priority-chain";
        unit_ratio(N, "compaction_ratio", params.compaction_ratio, false)?;
        unit_ratio(N, "prune_ratio", params.prune_ratio, false)?;
        unit_ratio(N, "paper_summarize_ratio", params.paper_summarize_ratio, true)?;
        unit_ratio(N, "general_summarize_ratio", params.general_summarize_ratio, true)?;
        if params.prune_keep_last == 0 {
            return Err(ParamError::new(N, "prune_keep_last", "must be at least 1"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new(N, "summary_max_tokens", "must be at least 1"));
        }
        Ok(PriorityChain { params, estimator: CharsOver4 })
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The document's `checkContextBudget(totalChars, contextWindow)`.
    pub(crate) fn check_context_budget(&self, total_chars: u64, context_window: u64) -> ChainBudget {
        let total_tokens = total_chars.div_ceil(4);
        let compaction_threshold = (context_window as f64 * self.params.compaction_ratio).floor() as u64;
        let prune_threshold = (context_window as f64 * self.params.prune_ratio).floor() as u64;
        ChainBudget {
            total_tokens,
            compaction_threshold,
            prune_threshold,
            should_compact: total_tokens > compaction_threshold,
            should_prune: total_tokens > prune_threshold,
        }
    }

    /// P1's test (`isChitchat`).
    pub fn is_chitchat(&self, m: &Message) -> bool {
        if m.role != Role::User || !js_len_at_most(&m.content, self.params.chitchat_max_length) {
            return false;
        }
        // JavaScript's trim also removes the byte-order mark, which Rust's does not.
        let trimmed = m.content.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
        if trimmed.is_ascii() {
            // Lowercasing ASCII changes no length and no `?` or `!`: no need to make the copy.
            return (trimmed.len() as u64) < self.params.chitchat_short_length && !trimmed.contains(['?', '!']);
        }
        let text = trimmed.to_lowercase();
        js_len(&text) < self.params.chitchat_short_length && !text.contains('?') && !text.contains('!')
    }

    /// P1 on a plain list (`stripChitchat`).
    pub fn strip_chitchat(&self, messages: &[Message]) -> Vec<Message> {
        messages.iter().filter(|m| !self.is_chitchat(m)).cloned().collect()
    }

    /// Whether `ctx` is handled in paper mode.
    pub fn paper_mode(&self, ctx: &Context) -> bool {
        match self.params.mode {
            Mode::Paper => true,
            Mode::General => false,
            Mode::Auto => ctx.has_stages(),
        }
    }

    /// [`PriorityChain::paper_mode`] from a scan.
    fn paper_in(&self, scan: &Scan) -> bool {
        match self.params.mode {
            Mode::Paper => true,
            Mode::General => false,
            Mode::Auto => scan.staged,
        }
    }

    /// The estimator's units (characters) of the working list `items`.
    fn items_units(&self, scan: &Scan, items: &[Item], digest: Option<&Message>) -> u64 {
        items
            .iter()
            .map(|&i| match (i, digest) {
                (DIGEST, Some(m)) => self.estimator.message_units(m),
                (DIGEST, None) => 0,
                (i, _) => scan.units(i),
            })
            .sum()
    }

    fn items_tokens(&self, scan: &Scan, items: &[Item], digest: Option<&Message>) -> u64 {
        self.estimator.tokens_from_units(self.items_units(scan, items, digest))
    }

    /// The estimate of the context `layout` builds (as [`build_layout`] builds it), without
    /// building it.
    fn layout_tokens(&self, ctx: &Context, layout: &[Slot], summaries: &[SummaryOutcome]) -> u64 {
        self.estimator.tokens_from_units(layout.iter().map(|slot| self.slot_units(ctx, slot, summaries)).sum())
    }

    /// The estimator's units of the message `slot` builds.
    fn slot_units(&self, ctx: &Context, slot: &Slot, summaries: &[SummaryOutcome]) -> u64 {
        match slot {
            Slot::Keep { index } => ctx.get(*index).map_or(0, |e| e.units(&self.estimator)),
            Slot::Mask { index, placeholder } => ctx.get(*index).map_or(0, |e| {
                let mut m = e.message().clone();
                m.content.clone_from(placeholder);
                self.estimator.message_units(&m)
            }),
            Slot::Summary { request, role, prefix, suffix } => {
                let text = match summaries.get(*request) {
                    Some(Ok(t)) => t.as_str(),
                    _ => "",
                };
                self.estimator.message_units(&Message::new(*role, format!("{prefix}{text}{suffix}")))
            }
            Slot::Insert { message, .. } => self.estimator.message_units(message),
        }
    }

    /// The role of working-list item `i`.
    fn item_role(scan: &Scan, i: Item) -> Role {
        match i {
            DIGEST => Role::System,
            i => scan.role(i),
        }
    }

    /// The working list as layout slots.
    fn to_slots(items: &[Item], digest: Option<&Message>) -> Vec<Slot> {
        let mut slots = Vec::with_capacity(items.len());
        Self::extend_slots(&mut slots, items, digest);
        slots
    }

    /// Append the working list `items` to `slots`, as layout slots.
    fn extend_slots(slots: &mut Vec<Slot>, items: &[Item], digest: Option<&Message>) {
        slots.extend(items.iter().map(|&i| match i {
            DIGEST => Slot::insert(digest.cloned().unwrap_or_else(|| Message::system("")), Inserted::StageDigest),
            index => Slot::Keep { index },
        }));
    }

    /// Whether `items` reproduce `ctx` entry for entry.
    fn is_identity_items(ctx: &Context, items: &[Item]) -> bool {
        items.len() == ctx.len() && items.iter().enumerate().all(|(p, &i)| p == i)
    }

    /// Whether the paper-mode trim (Task 9) shortens `ctx`: paper mode, the trim on, and more
    /// conversation messages than it keeps.
    pub fn trims(&self, ctx: &Context) -> bool {
        let keep = self.params.paper_trim_last;
        keep > 0 && self.paper_mode(ctx) && self.index(ctx).body.len() > keep
    }

    /// [`PriorityChain::trims`] from a scan, with paper mode already known.
    fn trims_in(&self, scan: &Scan, paper: bool) -> bool {
        let keep = self.params.paper_trim_last;
        keep > 0 && paper && scan.roles.iter().filter(|r| **r != Role::System).nth(keep).is_some()
    }

    /// The scan whose pairs the P3 split moves for, if it does.
    fn pairs_for<'p, 'a>(&self, scan: &'p Scan<'a>) -> Option<&'p Scan<'a>> {
        self.params.keep_tool_pairs.then_some(scan)
    }

    /// The list the chain starts from: the whole context, or in paper mode the route's legacy
    /// trim (`modelMessages.slice(-MAX_CHAT_HISTORY_PAIRS * 2)`): every system message, then the
    /// newest `paper_trim_last` conversation messages (moved forward past a cut tool pair).
    fn base(&self, scan: &Scan, paper: bool) -> Vec<Item> {
        if self.trims_in(scan, paper) {
            let split = |seq: &[Option<usize>], k| scan.safe_split(seq, k);
            keep_last_positions(
                scan.roles.len(),
                |p| scan.roles[p] == Role::System,
                Some,
                self.params.paper_trim_last,
                self.params.keep_tool_pairs.then_some(&split),
            )
        } else {
            (0..scan.roles.len()).collect()
        }
    }

    /// The estimator's units of the list the chain starts from.
    fn base_units(&self, scan: &Scan) -> u64 {
        let paper = self.paper_in(scan);
        if self.trims_in(scan, paper) {
            self.items_units(scan, &self.base(scan, paper), None)
        } else {
            scan.units.iter().sum()
        }
    }

    /// Completed stages, oldest first, with their boundaries (first and last entry).
    fn completed_stages(ctx: &Context) -> Vec<(String, usize, usize)> {
        let mut stages: Vec<(String, usize, usize)> = Vec::new();
        for (i, m) in ctx.messages().enumerate() {
            if let Some(s) = &m.stage {
                match stages.iter_mut().find(|(l, _, _)| l == s) {
                    Some(st) => st.2 = i,
                    None => stages.push((s.clone(), i, i)),
                }
            }
        }
        let current = Self::current_stage(ctx).map(str::to_string);
        stages.retain(|(l, _, _)| Some(l) != current.as_ref());
        stages
    }

    /// The stage being worked on: the label of the last labelled message.
    fn current_stage(ctx: &Context) -> Option<&str> {
        ctx.entries().iter().rev().find_map(|e| e.message().stage.as_deref())
    }

    /// Digest entry lines for `stages`, from the last `stage_decision` of each.
    fn digest_entries(ctx: &Context, stages: &[String]) -> Vec<String> {
        let mut last: HashMap<&str, (usize, &str)> = HashMap::new();
        for (i, m) in ctx.messages().enumerate() {
            if let (Some(stage), Some(decision)) = (m.stage.as_deref(), m.meta_str("stage_decision")) {
                if stages.iter().any(|s| s == stage) {
                    last.insert(stage, (i, decision));
                }
            }
        }
        let mut entries: Vec<(usize, String)> =
            last.into_iter().map(|(stage, (i, decision))| (i, format!("- {stage}: {decision}"))).collect();
        entries.sort();
        entries.into_iter().map(|(_, e)| e).collect()
    }

    /// Put the stage digest for `compacted` after the system messages, merging an earlier one.
    fn inject_digest(&self, scan: &Scan, chain: &mut Chain) {
        let ctx = scan.ctx;
        let compacted = &chain.compacted_stages;
        if compacted.is_empty() {
            return;
        }
        let items = &mut chain.items;
        let mut count = compacted.len();
        let mut lines = Vec::new();
        let previous = items.iter().position(|&i| {
            i != DIGEST
                && ctx.get(i).is_some_and(|e| matches!(e.origin(), Origin::Inserted { what: Inserted::StageDigest }))
        });
        let mut prev_text = None;
        if let Some(p) = previous {
            if let Some((n, entries)) = ctx.get(items[p]).and_then(|e| parse_digest(&e.message().content)) {
                items.remove(p);
                count += n;
                prev_text = Some(entries);
            }
        }
        lines.extend(prev_text);
        lines.extend(Self::digest_entries(ctx, compacted));
        if lines.is_empty() {
            return;
        }
        let at = items.iter().filter(|&&i| Self::item_role(scan, i) == Role::System).count().min(items.len());
        items.insert(at, DIGEST);
        chain.digest = Some(Message::system(stage_digest_text(count, &lines.join("\n"))));
    }

    /// P1, P2 and the P3 split, as far as they go without the summary.
    fn run_chain(&self, scan: &Scan, base: Vec<Item>, thresholds: &ChainBudget, paper: bool) -> Chain {
        let ctx = scan.ctx;
        let cthr = thresholds.compaction_threshold;
        let start = base.len();
        let mut chain =
            Chain { items: base, digest: None, stripped: 0, compacted_stages: Vec::new(), resolved: None, p3: None };

        // P1: strip chitchat.
        chain.items.retain(|&i| i == DIGEST || !scan.chitchat.get(i).copied().unwrap_or(false));
        chain.stripped = start - chain.items.len();
        if self.items_tokens(scan, &chain.items, chain.digest.as_ref()) < cthr {
            chain.resolved = Some("P1");
            return chain;
        }

        // P2: drop the oldest completed stages.
        if paper {
            let stage_pairs = if self.params.keep_tool_pairs { scan.pairs() } else { &[] };
            for (stage, first, last) in Self::completed_stages(ctx) {
                let mut drop: Vec<bool> = (0..ctx.len()).map(|i| (first..=last).contains(&i)).collect();
                loop {
                    let mut changed = false;
                    for &(c, r) in stage_pairs {
                        if drop[c] != drop[r] {
                            drop[c] = true;
                            drop[r] = true;
                            changed = true;
                        }
                    }
                    if !changed {
                        break;
                    }
                }
                chain.items.retain(|&i| i == DIGEST || scan.role(i) == Role::System || !drop[i]);
                chain.compacted_stages.push(stage);
                if self.items_tokens(scan, &chain.items, chain.digest.as_ref()) < cthr {
                    self.inject_digest(scan, &mut chain);
                    chain.resolved = Some("P2");
                    return chain;
                }
            }
            self.inject_digest(scan, &mut chain);
        }

        // P3: summarize the oldest conversation messages.
        let (system, conversation): (Vec<Item>, Vec<Item>) =
            chain.items.iter().partition(|&&i| Self::item_role(scan, i) == Role::System);
        let n = conversation.len();
        let count = self.p3_count(paper, n);
        if count > self.params.summarize_more_than {
            let k = match self.pairs_for(scan) {
                Some(scan) => {
                    let seq: Vec<Option<usize>> = conversation.iter().map(|&i| (i != DIGEST).then_some(i)).collect();
                    scan.safe_split(&seq, count)
                }
                None => count,
            };
            let span: Vec<usize> = conversation[..k].iter().copied().filter(|&i| i != DIGEST).collect();
            let request = self.p3_request(ctx, paper, span, ctx.last_round() + 1);
            let mut layout = Vec::with_capacity(system.len() + 1 + n - k);
            Self::extend_slots(&mut layout, &system, chain.digest.as_ref());
            layout.push(Self::summary_slot());
            Self::extend_slots(&mut layout, &conversation[k..], chain.digest.as_ref());
            chain.p3 = Some((request, layout));
        }
        chain
    }

    /// P3's count of the oldest conversation messages to summarize, out of `n`.
    fn p3_count(&self, paper: bool, n: usize) -> usize {
        if paper {
            ((n as f64 * self.params.paper_summarize_ratio).floor() as usize).min(self.params.paper_summarize_max)
        } else {
            self.params.general_summarize_max.min((n as f64 * self.params.general_summarize_ratio).floor() as usize)
        }
    }

    /// P3's request to summarize entries `span` in summary round `round`.
    fn p3_request(&self, ctx: &Context, paper: bool, span: Vec<usize>, round: u32) -> SummaryRequest {
        let prompt = if paper {
            paper_mid_stage_prompt(Self::current_stage(ctx).unwrap_or("unknown"))
        } else {
            general_chat_prompt()
        };
        let mut request = SummaryRequest::new(span, prompt, self.params.summary_max_tokens, round);
        request.target_chars = Some(self.params.summary_max_chars);
        request
    }

    /// The slot of P3's summary: a system message.
    fn summary_slot() -> Slot {
        Slot::Summary {
            request: 0,
            role: Role::System,
            prefix: SUMMARY_PREFIX.to_string(),
            suffix: SUMMARY_SUFFIX.to_string(),
        }
    }

    /// P5 on a layout: every system message, then the last `prune_keep_last` conversation
    /// messages. It reads only the layout's entries: a layout P5 has already pruned costs what
    /// it holds.
    fn prune(&self, ctx: &Context, slots: &[Slot]) -> Vec<Slot> {
        let split = |seq: &[Option<usize>], k| split_in(ctx, seq, k);
        keep_last_positions(
            slots.len(),
            |p| slot_role(ctx, &slots[p]) == Role::System,
            |p| slot_entry(&slots[p]),
            self.params.prune_keep_last,
            self.params.keep_tool_pairs.then_some(&split),
        )
        .into_iter()
        .map(|p| slots[p].clone())
        .collect()
    }

    /// P5 on the working list.
    fn prune_items(&self, scan: &Scan, items: &[Item]) -> Vec<Item> {
        let split = |seq: &[Option<usize>], k| scan.safe_split(seq, k);
        keep_last_positions(
            items.len(),
            |p| Self::item_role(scan, items[p]) == Role::System,
            |p| (items[p] != DIGEST).then_some(items[p]),
            self.params.prune_keep_last,
            self.params.keep_tool_pairs.then_some(&split),
        )
        .into_iter()
        .map(|p| items[p])
        .collect()
    }

    /// The priorities that acted, joined (`trim+P1+P3+P5`).
    fn steps(trimmed: bool, stripped: usize, stages: usize, summarized: bool, p4: bool, pruned: bool) -> String {
        let acted = [
            (trimmed, "trim"),
            (stripped > 0, "P1"),
            (stages > 0, "P2"),
            (summarized, "P3"),
            (p4, "P4"),
            (pruned, "P5"),
        ];
        let s: Vec<&str> = acted.iter().filter(|(a, _)| *a).map(|(_, n)| *n).collect();
        if s.is_empty() {
            "none".to_string()
        } else {
            s.join("+")
        }
    }
}

impl Strategy for PriorityChain {
    fn profile(&self) -> Profile {
        Profile {
            documented_rejections: {
                let mut rules = vec![
                    (Provider::AnthropicMessages, RequestRule::FirstNotUser),
                    (Provider::AnthropicMessages, RequestRule::ThinkingModified),
                ];
                if !self.params.keep_tool_pairs {
                    for provider in Provider::ALL {
                        for rule in [
                            RequestRule::OrphanToolResult,
                            RequestRule::UnansweredToolCall,
                            RequestRule::MisplacedToolResult,
                        ] {
                            rules.push((provider, rule));
                        }
                    }
                }
                rules
            },
            rebuilds_from_history: self.params.rebuild_from_history,
            ..Profile::default()
        }
    }
    fn name(&self) -> &'static str {
        "priority-chain"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.estimator
    }
    /// The lower of the chain's trigger and the prune's threshold: with the document's numbers
    /// the prune (80%) acts before the chain (85%).
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        let b = self.check_context_budget(0, budget.context_window);
        Some(b.compaction_threshold.min(b.prune_threshold))
    }
    /// The prune's threshold (P5) and the chain's trigger, lowest first.
    fn thresholds(&self, _ctx: &Context, budget: &Budget) -> Vec<(&'static str, u64)> {
        let b = self.check_context_budget(0, budget.context_window);
        let mut out = vec![("prune (P5)", b.prune_threshold), ("chain trigger", b.compaction_threshold)];
        out.sort_by_key(|(_, t)| *t);
        out
    }
    fn reacts_to(&self, trigger: Trigger) -> bool {
        trigger == Trigger::Overflow && self.params.react_to_overflow
    }
    /// Over the threshold, or in paper mode with more conversation messages than the trim keeps
    /// (the route trims every such request before it estimates).
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        self.threshold(ctx, budget).is_some_and(|t| self.estimate(ctx) > t) || self.trims(ctx)
    }
    /// In general chat over the prune's threshold the plan holds what P5 leaves (its layouts
    /// pruned, from the index kept with the context); otherwise it holds the chain's context,
    /// which `apply` prunes.
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        if !self.paper_mode(ctx) {
            let b = self.check_context_budget(ctx.units(&self.estimator), budget.context_window);
            if self.prunes_in_plan(false, &b) {
                return self.plan_pruned(ctx, &self.index(ctx), b, trigger);
            }
            if !b.should_compact && !b.should_prune {
                // Under both thresholds, and general chat has no trim.
                return None;
            }
        }
        self.plan_in(&Scan::new(ctx, self), budget, trigger)
    }
    /// Finish the chain on the built context: P3's threshold check, the P4 signal, the P5 prune.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        self.apply_in(ctx, budget, plan, summaries)
    }
    fn promises(&self, ctx: &Context, budget: &Budget) -> Promises {
        let mut deviations = vec![ViolationKind::RoleAlternation];
        let index = self.index(ctx);
        if index.summaries > 0 {
            deviations.push(ViolationKind::MultipleSummaries);
        }
        // A system message after the first conversation message.
        if index.body.first().is_some_and(|first| index.systems.last().is_some_and(|last| last > first)) {
            deviations.push(ViolationKind::OutOfOrder);
        }
        // Let the index go before `plan` extends it.
        drop(index);
        if !self.params.keep_tool_pairs {
            deviations.extend([ViolationKind::OrphanToolResult, ViolationKind::UnansweredToolCall]);
        }
        if self.trims(ctx) {
            // The paper-mode trim runs on every request, under the threshold too.
            deviations.push(ViolationKind::CompactedBelowThreshold);
        }
        // The tail the plan keeps verbatim, assuming the prune runs (it only shortens it).
        let recent_window = match self.plan(ctx, budget, Trigger::Proactive) {
            None => ctx.len(),
            Some(plan) => {
                let mut w = verbatim_tail(ctx, &self.prune(ctx, &plan.layout));
                if let Fallback::Layout { layout, .. } = &plan.fallback {
                    w = w.min(verbatim_tail(ctx, &self.prune(ctx, layout)));
                }
                w
            }
        };
        Promises { keeps_system_prompt: true, recent_window, documented_deviations: deviations }
    }
}

impl PriorityChain {
    /// [`Strategy::plan`] over a scan of the context.
    fn plan_in(&self, scan: &Scan, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let ctx = scan.ctx;
        let paper = self.paper_in(scan);
        let base = self.base(scan, paper);
        let trimmed = ctx.len() - base.len();
        let b = self.check_context_budget(self.items_units(scan, &base, None), budget.context_window);
        if !b.should_compact && !b.should_prune && trimmed == 0 {
            return None;
        }
        let mut notes = Self::plan_notes(paper, trimmed, &b);
        if !b.should_compact {
            // Under the trigger: the trim, and between the prune threshold and the trigger the
            // prune, alone.
            let identity = if b.should_prune {
                Self::is_identity_items(ctx, &self.prune_items(scan, &base))
            } else {
                Self::is_identity_items(ctx, &base)
            };
            if identity {
                return None;
            }
            let step = if trimmed > 0 { "trim" } else { "P5" };
            let mut plan = Plan::deterministic(trigger, step, Self::to_slots(&base, None));
            plan.notes = notes;
            return Some(plan);
        }
        let chain = self.run_chain(scan, base, &b, paper);
        notes.insert("stripped_chitchat".into(), json!(chain.stripped));
        notes.insert("compacted_stages".into(), json!(chain.compacted_stages));
        if let Some(r) = chain.resolved {
            notes.insert("resolved_at".into(), json!(r));
        }
        let steps = Self::steps(trimmed > 0, chain.stripped, chain.compacted_stages.len(), false, false, false);
        match chain.p3 {
            Some((request, layout)) => {
                notes.insert("summarized_messages".into(), json!(request.span.len()));
                let step = if steps == "none" { "P3".to_string() } else { format!("{steps}+P3") };
                Some(Plan {
                    trigger,
                    layout,
                    requests: vec![request],
                    fallback: Fallback::Layout {
                        label: "P3 summary failed".into(),
                        layout: Self::to_slots(&chain.items, chain.digest.as_ref()),
                    },
                    step,
                    notes,
                })
            }
            None => {
                let prune_gate = match self.params.prune_check {
                    PruneCheck::BeforeChain => b.should_prune,
                    PruneCheck::AfterChain => {
                        self.items_tokens(scan, &chain.items, chain.digest.as_ref()) > b.prune_threshold
                    }
                };
                let identity = if prune_gate {
                    Self::is_identity_items(ctx, &self.prune_items(scan, &chain.items))
                } else {
                    Self::is_identity_items(ctx, &chain.items)
                };
                if identity {
                    return None;
                }
                let mut plan = Plan::deterministic(trigger, steps, Self::to_slots(&chain.items, chain.digest.as_ref()));
                plan.notes = notes;
                Some(plan)
            }
        }
    }
    /// The notes every plan starts with.
    fn plan_notes(paper: bool, trimmed: usize, b: &ChainBudget) -> serde_json::Map<String, Value> {
        let mut notes = serde_json::Map::new();
        notes.insert("mode".into(), json!(if paper { "paper" } else { "general" }));
        notes.insert("trimmed".into(), json!(trimmed));
        notes.insert("estimate_before".into(), json!(b.total_tokens));
        notes.insert("compaction_threshold".into(), json!(b.compaction_threshold));
        notes.insert("prune_threshold".into(), json!(b.prune_threshold));
        notes.insert("chain_ran".into(), json!(b.should_compact));
        notes
    }

    /// [`Strategy::apply`].
    fn apply_in(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        let failure = match (plan.requests.is_empty(), summaries.first()) {
            (true, _) => None,
            (false, Some(Ok(t))) if !t.is_empty() => None,
            (false, Some(Ok(_))) => Some("empty summary".to_string()),
            (false, Some(Err(e))) => Some(e.reason.clone()),
            (false, None) => Some("no summary given".to_string()),
        };
        let (layout, fallback) = match (&failure, &plan.fallback) {
            (None, _) => (&plan.layout, None),
            (Some(reason), Fallback::Layout { label, layout }) => (layout, Some(format!("{label}: {reason}"))),
            (Some(_), Fallback::Unchanged) => return apply_layout(self, ctx, budget, plan, summaries),
        };
        let summarized = !plan.requests.is_empty() && failure.is_none();
        let paper = plan.notes.get("mode").and_then(Value::as_str) == Some("paper");
        let b = if paper {
            self.check_context_budget(self.base_units(&Scan::new(ctx, self)), budget.context_window)
        } else {
            self.check_context_budget(ctx.units(&self.estimator), budget.context_window)
        };
        let chain_ran = plan.notes.get("chain_ran").and_then(Value::as_bool).unwrap_or(b.should_compact);
        // The context the chain leaves, before the prune: its estimate, and how many messages
        // it holds. A plan that holds what P5 keeps gives it from the index.
        let (after_chain, chain_len) = if self.prunes_in_plan(paper, &b) {
            let index = self.index(ctx);
            let (units, len) = self.chain_extent(ctx, &index, plan, layout, chain_ran, summarized, summaries);
            (self.estimator.tokens_from_units(units), len)
        } else {
            (self.layout_tokens(ctx, layout, summaries), layout.len())
        };

        let mut notes = plan.notes.clone();
        let resolved = match plan.notes.get("resolved_at").and_then(Value::as_str) {
            Some(r) => r.to_string(),
            None if !chain_ran => "none".to_string(),
            None if summarized && after_chain < b.compaction_threshold => "P3".to_string(),
            None if paper => "P4".to_string(),
            None => "none".to_string(),
        };
        let p4 = resolved == "P4";
        notes.insert("resolved_at".into(), json!(resolved));
        notes.insert("llm_summarized".into(), json!(summarized));
        notes.insert("p4_signal".into(), json!(p4));

        let prune_gate = match self.params.prune_check {
            PruneCheck::BeforeChain => b.should_prune,
            PruneCheck::AfterChain => after_chain > b.prune_threshold,
        };
        let (mut built, pruned): (Built, usize) = if prune_gate {
            let fin = self.prune(ctx, layout);
            let dropped = chain_len - fin.len();
            (build_layout(ctx, &fin, &plan.requests, summaries, &[&self.estimator]), dropped)
        } else {
            (build_layout(ctx, layout, &plan.requests, summaries, &[&self.estimator]), 0)
        };
        notes.insert("pruned".into(), json!(pruned));

        let stripped = notes.get("stripped_chitchat").and_then(Value::as_u64).unwrap_or(0) as usize;
        let trimmed = notes.get("trimmed").and_then(Value::as_u64).unwrap_or(0);
        let stages = notes.get("compacted_stages").and_then(Value::as_array).map_or(0, |a| a.len());
        let step = Self::steps(trimmed > 0, stripped, stages, summarized, p4, pruned > 0);
        let before = (self.estimate(ctx), ctx.len());
        let change = built.change(fallback);
        let event = CompactionEvent::new(self, budget, (plan.trigger, step, notes), before, change);
        Compacted { context: built.context, event }
    }
}

/// What the chain reads of a context in general chat, kept with the context
/// ([`Context::memo`]) and extended by the entries appended since it was last read: the
/// entries by role and by P1's test, and what [`Strategy::promises`] states of them. A request
/// rebuilt from a growing history reads only what was appended since the previous one.
#[derive(Debug, Clone)]
struct Index {
    /// Entries read so far.
    len: usize,
    /// P1's parameters (`chitchat_max_length`, `chitchat_short_length`) it was read with.
    chitchat: (u64, u64),
    /// The system messages, in order.
    systems: Vec<usize>,
    /// The other messages, in order.
    body: Vec<usize>,
    /// The messages of `body` P1 keeps (not chitchat).
    talk: Vec<usize>,
    /// The estimator's units of the chitchat P1 strips.
    chitchat_units: u64,
    /// How many entries are summaries, and the highest round among them.
    summaries: usize,
    last_round: u32,
}

impl Index {
    fn new(chitchat: (u64, u64)) -> Index {
        Index {
            len: 0,
            chitchat,
            systems: Vec::new(),
            body: Vec::new(),
            talk: Vec::new(),
            chitchat_units: 0,
            summaries: 0,
            last_round: 0,
        }
    }

    /// Read the entries of `ctx` from `self.len` on.
    fn extend(&mut self, ctx: &Context, chain: &PriorityChain) {
        for (i, e) in ctx.entries().iter().enumerate().skip(self.len) {
            let m = e.message();
            if m.role == Role::System {
                self.systems.push(i);
            } else {
                self.body.push(i);
                if chain.is_chitchat(m) {
                    self.chitchat_units += e.units(&chain.estimator);
                } else {
                    self.talk.push(i);
                }
            }
            if let Origin::Summary { round, .. } = e.origin() {
                self.summaries += 1;
                self.last_round = self.last_round.max(*round);
            }
        }
        self.len = ctx.len();
    }
}

impl PriorityChain {
    /// This context's [`Index`], read as far as the context goes.
    fn index(&self, ctx: &Context) -> Arc<Index> {
        let key = (self.params.chitchat_max_length, self.params.chitchat_short_length);
        ctx.memo(|kept: Option<Arc<Index>>| {
            let mut index =
                kept.filter(|i| i.chitchat == key && i.len <= ctx.len()).unwrap_or_else(|| Arc::new(Index::new(key)));
            if index.len < ctx.len() {
                // A copy only when a caller still holds the index: none does while planning.
                Arc::make_mut(&mut index).extend(ctx, self);
            }
            index
        })
    }

    /// Whether P5 prunes whatever the chain leaves, so that the plan can hold the pruned
    /// layouts: general chat (the chain starts from every entry: no trim, no P2), the prune
    /// decided on the estimate from before the chain ([`PruneCheck::BeforeChain`]), and that
    /// estimate over the prune's threshold.
    fn prunes_in_plan(&self, paper: bool, b: &ChainBudget) -> bool {
        !paper && self.params.prune_check == PruneCheck::BeforeChain && b.should_prune
    }

    /// Where the part of `conv` (conversation entries, in order) that P5 keeps starts: the
    /// newest `prune_keep_last`, the cut moved forward past a tool pair it would split.
    fn prune_start(&self, ctx: &Context, conv: &[usize]) -> usize {
        let k = conv.len().saturating_sub(self.params.prune_keep_last);
        if self.params.keep_tool_pairs && k > 0 {
            sorted_split(ctx, conv, k, || Cow::Owned(tool_pairs(ctx)))
        } else {
            k
        }
    }

    /// [`Strategy::plan`] when it can hold what P5 leaves ([`PriorityChain::prunes_in_plan`]).
    /// The chain starts from every entry, P1 keeps `index.talk`, P3 summarizes its oldest
    /// messages and P5 keeps the system messages and the newest of the rest: the plan is the
    /// one [`PriorityChain::plan_in`] makes with its layouts pruned, and costs what it keeps
    /// rather than the whole context.
    fn plan_pruned(&self, ctx: &Context, index: &Index, b: ChainBudget, trigger: Trigger) -> Option<Plan> {
        let mut notes = Self::plan_notes(false, 0, &b);
        // Every system message, then the newest messages of `conv` P5 keeps.
        let kept = |conv: &[usize]| -> Vec<Item> {
            let tail = &conv[self.prune_start(ctx, conv)..];
            index.systems.iter().chain(tail).copied().collect()
        };
        let deterministic = |step: String, items: Vec<Item>, notes| {
            if Self::is_identity_items(ctx, &items) {
                return None;
            }
            let mut plan = Plan::deterministic(trigger, step, Self::to_slots(&items, None));
            plan.notes = notes;
            Some(plan)
        };
        if !b.should_compact {
            // Between the prune's threshold and the chain's trigger: the prune alone.
            return deterministic("P5".to_string(), kept(&index.body), notes);
        }
        let talk = &index.talk;
        let stripped = index.body.len() - talk.len();
        notes.insert("stripped_chitchat".into(), json!(stripped));
        notes.insert("compacted_stages".into(), json!([]));
        let units = ctx.units(&self.estimator) - index.chitchat_units;
        let p1 = self.estimator.tokens_from_units(units) < b.compaction_threshold;
        if p1 {
            notes.insert("resolved_at".into(), json!("P1"));
        }
        let steps = Self::steps(false, stripped, 0, false, false, false);
        let count = self.p3_count(false, talk.len());
        if p1 || count <= self.params.summarize_more_than {
            return deterministic(steps, kept(talk), notes);
        }
        let k = if self.params.keep_tool_pairs {
            sorted_split(ctx, talk, count, || Cow::Owned(tool_pairs(ctx)))
        } else {
            count
        };
        let request = self.p3_request(ctx, false, talk[..k].to_vec(), index.last_round + 1);
        notes.insert("summarized_messages".into(), json!(request.span.len()));
        let rest = &talk[k..];
        let mut layout = Self::to_slots(&index.systems, None);
        layout.push(Self::summary_slot());
        Self::extend_slots(&mut layout, &rest[self.prune_start(ctx, rest)..], None);
        Some(Plan {
            trigger,
            layout,
            requests: vec![request],
            fallback: Fallback::Layout { label: "P3 summary failed".into(), layout: Self::to_slots(&kept(talk), None) },
            step: if steps == "none" { "P3".to_string() } else { format!("{steps}+P3") },
            notes,
        })
    }

    /// The estimator's units and the length of the context the chain leaves before the prune,
    /// for a plan of [`PriorityChain::plan_pruned`] whose `layout` is used: every entry when
    /// the chain did not run; else the entries P1 keeps, with P3's summary in place of its
    /// span when it was made.
    #[allow(clippy::too_many_arguments)]
    fn chain_extent(
        &self,
        ctx: &Context,
        index: &Index,
        plan: &Plan,
        layout: &[Slot],
        chain_ran: bool,
        summarized: bool,
        summaries: &[SummaryOutcome],
    ) -> (u64, usize) {
        let all = ctx.units(&self.estimator);
        if !chain_ran {
            return (all, ctx.len());
        }
        let (units, len) = (all - index.chitchat_units, index.systems.len() + index.talk.len());
        match plan.requests.first().filter(|_| summarized) {
            None => (units, len),
            Some(request) => {
                let span: u64 = request.span.iter().filter_map(|&i| ctx.get(i)).map(|e| e.units(&self.estimator)).sum();
                let summary: u64 = layout
                    .iter()
                    .filter(|s| matches!(s, Slot::Summary { .. }))
                    .map(|s| self.slot_units(ctx, s, summaries))
                    .sum();
                (units - span + summary, len + 1 - request.span.len())
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// The implementation before it was rewritten for speed, kept as the oracle the rewrite is
/// held to. It lives with the tests (`tests/it/oracles/priority_chain.rs`) and is compiled into this
/// module's unit tests, because it compares private steps.
#[cfg(test)]
#[path = "../tests/it/oracles/priority_chain.rs"]
pub(crate) mod legacy;
