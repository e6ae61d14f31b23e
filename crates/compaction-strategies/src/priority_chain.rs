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
//! - *Summary prompt*: [`PromptKind::PaperMidStage`] with the current stage (or `unknown`), or
//!   [`PromptKind::GeneralChat`]; `maxTokens: 200`, and the prompts' "Max 500 karakter total"
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
//! it. With `keep_tool_pairs = false` its raw message counts cut between a call and its
//! result, which both providers refuse (an orphaned result, an unanswered call). Declared in
//! `documented_rejections`.

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
    apply_layout, build_layout, Budget, Built, Compacted, CompactionEvent, Fallback, Plan, Profile, Promises,
    PromptKind, Slot, Strategy, SummaryOutcome, SummaryRequest, Trigger,
};

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
            PromptKind::PaperMidStage { stage: Self::current_stage(ctx).unwrap_or("unknown").to_string() }
        } else {
            PromptKind::GeneralChat
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
                let mut rules = vec![(Provider::AnthropicMessages, RequestRule::FirstNotUser)];
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
        let (built, pruned): (Built, usize) = if prune_gate {
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
        let estimate_after = self.estimate(&built.context);
        let shortfall =
            self.threshold(&built.context, budget).and_then(|t| estimate_after.checked_sub(t)).filter(|d| *d > 0);
        let event = CompactionEvent {
            strategy: self.name().to_string(),
            trigger: plan.trigger,
            step: Self::steps(trimmed > 0, stripped, stages, summarized, p4, pruned > 0),
            estimate_before: self.estimate(ctx),
            estimate_after,
            messages_before: ctx.len(),
            messages_after: built.context.len(),
            removed: built.removed,
            masked: built.masked,
            summaries: built.summaries,
            round: built.round,
            fallback,
            shortfall,
            notes,
        };
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
pub(crate) mod tests {
    use super::*;
    use compaction::message::ToolCall;
    use compaction::{check_compaction, check_context};

    fn chain() -> PriorityChain {
        PriorityChain::new(Params::default()).expect("default params are valid")
    }

    fn with(f: impl FnOnce(&mut Params)) -> PriorityChain {
        let mut p = Params::default();
        f(&mut p);
        PriorityChain::new(p).expect("valid params")
    }

    fn msg(role: &str, content: &str) -> Message {
        let role = match role {
            "system" => Role::System,
            "user" => Role::User,
            _ => Role::Assistant,
        };
        Message::new(role, content)
    }

    fn text(n: usize, c: char) -> String {
        std::iter::repeat_n(c, n).collect()
    }

    /// System prompt, then `n` conversation messages (user/assistant alternating) of `size` chars.
    fn convo(n: usize, size: usize) -> Vec<Message> {
        let mut m = vec![Message::system("You help write papers.")];
        for i in 0..n {
            let body = format!("{i:04} {}", text(size.saturating_sub(5), 'x'));
            m.push(if i % 2 == 0 { Message::user(body) } else { Message::assistant(body) });
        }
        m
    }

    fn run(s: &PriorityChain, ctx: &Context, budget: &Budget, summary: &str) -> Compacted {
        let plan = s.plan(ctx, budget, Trigger::Proactive).expect("a plan");
        let summaries: Vec<SummaryOutcome> = plan.requests.iter().map(|_| Ok(summary.to_string())).collect();
        s.apply(ctx, budget, &plan, &summaries)
    }

    fn note<'a>(c: &'a Compacted, key: &str) -> &'a Value {
        c.event.notes.get(key).unwrap_or(&Value::Null)
    }

    /// Violations not documented by the strategy.
    fn undocumented(s: &PriorityChain, ctx: &Context, budget: &Budget, out: &Compacted) -> Vec<String> {
        let promised = s.promises(ctx, budget).documented_deviations;
        check_compaction(s, ctx, budget, Trigger::Proactive, out)
            .into_iter()
            .filter(|v| !promised.contains(&v.kind()))
            .map(|v| v.to_string())
            .collect()
    }

    // ---- Task 6: the document's six stripChitchat cases, verbatim ----

    #[test]
    fn chitchat_removes_short_user_confirmations() {
        let messages = vec![
            msg("user", "ok"),
            msg("assistant", "Baik, saya akan melanjutkan."),
            msg("user", "ya"),
            msg("assistant", "Berikut hasilnya."),
        ];
        let result = chain().strip_chitchat(&messages);
        assert_eq!(result.len(), 2);
        assert!(result.iter().all(|m| m.role == Role::Assistant));
    }

    #[test]
    fn chitchat_keeps_user_messages_with_questions() {
        let messages = vec![msg("user", "ok?"), msg("assistant", "Ya, benar.")];
        assert_eq!(chain().strip_chitchat(&messages).len(), 2);
    }

    #[test]
    fn chitchat_keeps_user_messages_longer_than_50_chars() {
        let messages =
            vec![msg("user", "Saya setuju dengan pendekatan yang kamu sarankan tadi"), msg("assistant", "Baik.")];
        assert_eq!(chain().strip_chitchat(&messages).len(), 2);
    }

    #[test]
    fn chitchat_keeps_system_messages() {
        let messages = vec![msg("system", "ok"), msg("user", "ok")];
        let result = chain().strip_chitchat(&messages);
        assert_eq!(result.len(), 1);
        assert_eq!(result[0].role, Role::System);
    }

    #[test]
    fn chitchat_handles_empty_array() {
        assert!(chain().strip_chitchat(&[]).is_empty());
    }

    #[test]
    fn chitchat_keeps_messages_with_exclamation_marks() {
        let messages = vec![msg("user", "bagus!"), msg("assistant", "Terima kasih.")];
        assert_eq!(chain().strip_chitchat(&messages).len(), 2);
    }

    #[test]
    fn chitchat_limits_are_raw_50_and_trimmed_15() {
        let s = chain();
        // 2 chars of text padded to exactly 50 raw chars: chitchat; 51 raw chars: not.
        assert!(s.is_chitchat(&Message::user(format!("ok{}", text(48, ' ')))));
        assert!(!s.is_chitchat(&Message::user(format!("ok{}", text(49, ' ')))));
        // 14 trimmed chars: chitchat; 15: not.
        assert!(s.is_chitchat(&Message::user("  oke lanjutkan ")));
        assert!(!s.is_chitchat(&Message::user("oke, lanjutkan.")));
        assert!(!s.is_chitchat(&Message::assistant("ok")));
    }

    // ---- Task 1: checkContextBudget ----

    #[test]
    fn budget_examples_of_task_1_follow_the_code() {
        let s = chain();
        // "128k window, compaction at 0.85 = 108800 tokens; prune at 0.8 = 102400 tokens".
        let b = s.check_context_budget(436_000, 128_000);
        assert_eq!((b.compaction_threshold, b.prune_threshold, b.total_tokens), (108_800, 102_400, 109_000));
        assert!(b.should_compact);
        // The document's test expects `shouldPrune` false here; its code gives true (109000 > 102400).
        assert!(b.should_prune);

        let b = s.check_context_budget(400_000, 128_000);
        assert!(!b.should_compact);
        assert!(!b.should_prune);

        let b = s.check_context_budget(420_000, 128_000);
        // The document's test expects `shouldCompact` true; its code gives false (105000 <= 108800).
        assert!(!b.should_compact);
        assert!(b.should_prune);
    }

    #[test]
    fn threshold_is_the_prune_threshold_and_below_it_nothing_happens() {
        let s = chain();
        let budget = Budget::new(1_000);
        assert_eq!(s.threshold(&Context::new(), &budget), Some(800));
        assert_eq!(s.thresholds(&Context::new(), &budget), vec![("prune (P5)", 800), ("chain trigger", 850)]);
        let ctx = Context::from_messages(convo(4, 790)); // ~800 tokens, not over 800
        assert!(s.estimate(&ctx) <= 800);
        assert!(!s.should_compact(&ctx, &budget));
        assert!(s.plan(&ctx, &budget, Trigger::Proactive).is_none());
    }

    // ---- P1 ----

    #[test]
    fn resolves_at_p1_when_stripping_chitchat_is_enough() {
        let s = chain();
        let budget = Budget::new(1_000);
        let mut m = vec![
            Message::system(text(520, 's')),
            Message::user(text(1_200, 'q')),
            Message::assistant(text(1_200, 'a')),
        ];
        for _ in 0..10 {
            m.push(Message::user(format!("ok{}", text(48, ' '))));
        }
        let ctx = Context::from_messages(m);
        assert_eq!(s.estimate(&ctx), 855);
        let out = run(&s, &ctx, &budget, "unused");
        assert_eq!(note(&out, "resolved_at"), "P1");
        assert_eq!(note(&out, "stripped_chitchat"), 10);
        assert_eq!(out.event.step, "P1");
        assert_eq!(out.context.len(), 3);
        assert_eq!(out.event.estimate_after, 730);
        assert!(out.event.shortfall.is_none());
        assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
    }

    // ---- P2 ----

    fn staged() -> Vec<Message> {
        vec![
            Message::system("Kamu membantu menulis paper."),
            Message::user(text(800, 'g')).with_stage("gagasan"),
            Message::assistant(text(800, 'h')).with_stage("gagasan"),
            Message::user("setuju, gagasan final")
                .with_stage("gagasan")
                .with_meta("stage_decision", json!("ide awal: dampak AI pada UMKM")),
            Message::user(text(800, 't')).with_stage("topik"),
            Message::assistant(text(800, 'u'))
                .with_stage("topik")
                .with_meta("stage_decision", json!("topik lama"))
                .with_meta("note", json!(1)),
            Message::user("revisi topik lagi")
                .with_stage("topik")
                .with_meta("stage_decision", json!("AI untuk UMKM di Jawa")),
            Message::user(text(400, 'o')).with_stage("outline"),
            Message::assistant(text(400, 'p')).with_stage("outline"),
        ]
    }

    #[test]
    fn p2_drops_the_oldest_stage_and_injects_the_digest_after_the_system_messages() {
        let s = chain();
        let ctx = Context::from_messages(staged());
        // 5 * 800 + 2 * 400 + short ones: about 1220 tokens. Dropping gagasan (~410) brings it under 85% of 1000.
        let budget = Budget::new(1_000);
        assert!(s.estimate(&ctx) > 850);
        let out = run(&s, &ctx, &budget, "unused");
        assert_eq!(note(&out, "resolved_at"), "P2");
        assert_eq!(note(&out, "compacted_stages"), &json!(["gagasan"]));
        let digest = out.context.get(1).expect("digest");
        assert_eq!(digest.origin(), &Origin::Inserted { what: Inserted::StageDigest });
        assert_eq!(digest.role(), Role::System);
        assert_eq!(
            digest.message().content,
            "[CONTEXT COMPACTION: 1 tahap sebelumnya di-compact]\n- gagasan: ide awal: dampak AI pada UMKM\n\n\
             Detail tersimpan di stageData. Pesan asli tetap ada di database."
        );
        // System prompt, digest, then the topik and outline messages.
        assert_eq!(out.context.len(), 2 + 5);
        assert!(out.context.entries()[2..].iter().all(|e| e.message().stage.as_deref() != Some("gagasan")));
        assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
    }

    #[test]
    fn p2_drops_stages_until_under_and_uses_the_last_decision_of_each() {
        let s = chain();
        let mut m = staged();
        m.insert(1, Message::system("Aturan tambahan."));
        let ctx = Context::from_messages(m);
        let budget = Budget::new(700); // 85% = 595: both completed stages must go
        let out = run(&s, &ctx, &budget, "unused");
        assert_eq!(note(&out, "compacted_stages"), &json!(["gagasan", "topik"]));
        assert_eq!(note(&out, "resolved_at"), "P2");
        // After the two system messages.
        let digest = out.context.get(2).expect("digest");
        assert_eq!(
            digest.message().content,
            "[CONTEXT COMPACTION: 2 tahap sebelumnya di-compact]\n- gagasan: ide awal: dampak AI pada UMKM\n\
             - topik: AI untuk UMKM di Jawa\n\nDetail tersimpan di stageData. Pesan asli tetap ada di database."
        );
        assert_eq!(out.context.len(), 3 + 2);
    }

    #[test]
    fn a_later_digest_merges_the_earlier_one() {
        let s = chain();
        let ctx = Context::from_messages(staged());
        let first = run(&s, &ctx, &Budget::new(1_000), "unused");
        assert_eq!(note(&first, "compacted_stages"), &json!(["gagasan"]));
        let second = run(&s, &first.context, &Budget::new(600), "unused");
        assert_eq!(note(&second, "compacted_stages"), &json!(["topik"]));
        let digests: Vec<_> = second
            .context
            .entries()
            .iter()
            .filter(|e| matches!(e.origin(), Origin::Inserted { what: Inserted::StageDigest }))
            .collect();
        assert_eq!(digests.len(), 1);
        assert!(digests[0].message().content.starts_with(
            "[CONTEXT COMPACTION: 2 tahap sebelumnya di-compact]\n- gagasan: ide awal: dampak AI pada UMKM\n- topik: AI untuk UMKM di Jawa\n\n"
        ));
        assert_eq!(second.context.get(1).map(|e| e.message()), Some(digests[0].message()));
    }

    #[test]
    fn general_mode_skips_p2() {
        let s = with(|p| p.mode = Mode::General);
        let ctx = Context::from_messages(staged());
        let plan = s.plan(&ctx, &Budget::new(1_000), Trigger::Proactive).expect("a plan");
        assert_eq!(plan.notes.get("compacted_stages"), Some(&json!([])));
        assert!(!plan.layout.iter().any(|s| matches!(s, Slot::Insert { .. })));
    }

    // ---- P3 ----

    fn p3_count(s: &PriorityChain, n: usize) -> Option<usize> {
        let ctx = Context::from_messages(convo(n, 100));
        let plan = s.plan(&ctx, &Budget::new(100), Trigger::Proactive)?;
        plan.requests.first().map(|r| r.span.len())
    }

    #[test]
    fn p3_counts_in_paper_mode_are_30_percent_at_most_30() {
        // The P3 rule on its own: without Task 9's trim, which keeps 40 of them.
        let s = with(|p| {
            p.mode = Mode::Paper;
            p.paper_trim_last = 0;
        });
        assert_eq!(p3_count(&s, 10), Some(3));
        assert_eq!(p3_count(&s, 50), Some(15));
        assert_eq!(p3_count(&s, 99), Some(29));
        assert_eq!(p3_count(&s, 200), Some(30));
        // floor(9 x 0.3) = 2 is not over 2: no summary.
        assert_eq!(p3_count(&s, 9), None);
    }

    #[test]
    fn p3_counts_in_general_chat_are_min_20_and_40_percent() {
        let s = chain();
        assert_eq!(p3_count(&s, 8), Some(3));
        assert_eq!(p3_count(&s, 30), Some(12));
        assert_eq!(p3_count(&s, 50), Some(20));
        assert_eq!(p3_count(&s, 120), Some(20));
        // floor(7 x 0.4) = 2: no summary.
        assert_eq!(p3_count(&s, 7), None);
    }

    #[test]
    fn p3_request_uses_the_document_prompts_and_limit() {
        let s = chain();
        let ctx = Context::from_messages(convo(30, 100));
        let plan = s.plan(&ctx, &Budget::new(100), Trigger::Proactive).expect("plan");
        assert_eq!(plan.requests[0].prompt, PromptKind::GeneralChat);
        assert_eq!(plan.requests[0].max_tokens, 200);
        assert_eq!(plan.requests[0].span, (1..=12).collect::<Vec<_>>());
        let mut m = staged();
        m.extend(convo(30, 100).into_iter().skip(1).map(|m| m.with_stage("outline")));
        let ctx = Context::from_messages(m);
        let plan = s.plan(&ctx, &Budget::new(100), Trigger::Proactive).expect("plan");
        assert_eq!(plan.requests[0].prompt, PromptKind::PaperMidStage { stage: "outline".into() });
    }

    #[test]
    fn resolves_at_p3_with_the_summary_as_a_system_message() {
        let s = chain();
        // Four big old messages (40% of 10 = 4), six small recent ones.
        let mut m = vec![Message::system("sys")];
        for i in 0..10 {
            let size = if i < 4 { 1_000 } else { 40 };
            let body = format!("{i} {}", text(size, 'z'));
            m.push(if i % 2 == 0 { Message::user(body) } else { Message::assistant(body) });
        }
        let ctx = Context::from_messages(m);
        let budget = Budget::new(1_000);
        let out = run(&s, &ctx, &budget, "- poin satu");
        assert_eq!(note(&out, "resolved_at"), "P3");
        assert_eq!(note(&out, "llm_summarized"), true);
        assert_eq!(out.event.step, "P3");
        let summary = out.context.get(1).expect("summary");
        assert_eq!(summary.role(), Role::System);
        assert_eq!(
            summary.message().content,
            "[RINGKASAN DISKUSI SEBELUMNYA]\n- poin satu\n\nPercakapan berlanjut dari sini."
        );
        assert_eq!(summary.origin(), &Origin::Summary { round: 1, covers: vec![1, 2, 3, 4] });
        assert_eq!(out.context.len(), 1 + 1 + 6);
        assert_eq!(out.context.get(2).and_then(|e| e.origin().verbatim_index()), Some(5));
        assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
    }

    #[test]
    fn signals_p4_in_paper_mode_when_the_summary_is_not_enough() {
        let s = with(|p| p.mode = Mode::Paper);
        let ctx = Context::from_messages(convo(20, 400));
        let budget = Budget::new(1_000);
        let out = run(&s, &ctx, &budget, "- ringkas");
        assert_eq!(note(&out, "resolved_at"), "P4");
        assert_eq!(note(&out, "p4_signal"), true);
        assert_eq!(out.event.step, "P3+P4");
        assert!(out.event.shortfall.is_some());
        // 30% of 20 = 6 summarized.
        assert_eq!(out.context.len(), 1 + 1 + 14);
    }

    #[test]
    fn general_chat_exhausts_the_chain_without_p4() {
        let s = chain();
        let ctx = Context::from_messages(convo(20, 400));
        let out = run(&s, &ctx, &Budget::new(1_000), "- ringkas");
        assert_eq!(note(&out, "resolved_at"), "none");
        assert_eq!(note(&out, "p4_signal"), false);
        assert_eq!(out.event.step, "P3");
        assert_eq!(out.context.len(), 1 + 1 + 12);
    }

    // ---- P5 and the failure path ----

    #[test]
    fn prune_alone_between_80_and_85_percent() {
        let s = chain();
        let ctx = Context::from_messages(convo(60, 60));
        // 60 x 60 chars + 22 = 3622 chars = 906 tokens; window 1100: 880 < 906 <= 935.
        let budget = Budget::new(1_100);
        let b = s.check_context_budget(ctx.units(&CharsOver4), 1_100);
        assert!(b.should_prune && !b.should_compact);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
        assert_eq!(plan.step, "P5");
        let out = s.apply(&ctx, &budget, &plan, &[]);
        assert_eq!(out.event.step, "P5");
        assert_eq!(note(&out, "pruned"), 10);
        assert_eq!(out.context.len(), 51);
        assert_eq!(out.context.get(1).and_then(|e| e.origin().verbatim_index()), Some(11));
        assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
    }

    #[test]
    fn prune_follows_the_chain_on_the_pre_chain_estimate_by_default() {
        // 80 messages: P3 summarizes 20, the prune then keeps the last 50 of the 60 left.
        let ctx = Context::from_messages(convo(80, 100));
        let budget = Budget::new(1_000); // far over both thresholds
        let out = run(&chain(), &ctx, &budget, "- s");
        assert_eq!(out.event.step, "P3+P5");
        assert_eq!(note(&out, "pruned"), 10);
        assert_eq!(out.context.len(), 2 + 50);
        assert!(out.context.get(1).is_some_and(|e| e.origin().is_summary()));

        // 20 big old messages, 80 small recent ones: the summary of the 20 brings the context far
        // under 80%. Checked before the chain (the code), the prune still cuts to 50; checked after
        // (the text), it does not run.
        let mut m = vec![Message::system("sys")];
        for i in 0..100 {
            let size = if i < 20 { 400 } else { 20 };
            m.push(if i % 2 == 0 { Message::user(text(size, 'u')) } else { Message::assistant(text(size, 'a')) });
        }
        let ctx = Context::from_messages(m);
        let budget = Budget::new(2_000);
        let out = run(&chain(), &ctx, &budget, "- s");
        assert_eq!(note(&out, "resolved_at"), "P3");
        assert_eq!(note(&out, "pruned"), 30);
        assert_eq!(out.context.len(), 2 + 50);
        let after = with(|p| p.prune_check = PruneCheck::AfterChain);
        let out = run(&after, &ctx, &budget, "- s");
        assert_eq!(note(&out, "resolved_at"), "P3");
        assert_eq!(note(&out, "pruned"), 0);
        assert_eq!(out.context.len(), 2 + 80);
    }

    #[test]
    fn failed_summary_falls_through_to_the_prune() {
        let s = chain();
        let ctx = Context::from_messages(convo(80, 100));
        let budget = Budget::new(1_000);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
        let failed = compaction::SummaryFailure { reason: "timeout".into() };
        let out = s.apply(&ctx, &budget, &plan, &[Err(failed)]);
        assert_eq!(out.event.fallback.as_deref(), Some("P3 summary failed: timeout"));
        assert_eq!(out.event.step, "P5");
        assert_eq!(note(&out, "llm_summarized"), false);
        assert!(out.event.summaries.is_empty());
        assert_eq!(out.context.len(), 1 + 50);
        assert_eq!(out.context.get(1).and_then(|e| e.origin().verbatim_index()), Some(31));
        // `result.text || null`: an empty summary fails too.
        let out = s.apply(&ctx, &budget, &plan, &[Ok(String::new())]);
        assert!(out.event.fallback.as_deref().is_some_and(|f| f.contains("empty")));
    }

    // ---- tool calls ----

    fn tool_convo() -> Vec<Message> {
        let mut m = vec![Message::system("sys")];
        for t in 0..30 {
            let id = format!("c{t}");
            m.push(Message::user(format!("turn {t} {}", text(80, 'u'))));
            m.push(Message::assistant_calls(
                "",
                vec![ToolCall { id: id.clone(), name: "read".into(), arguments: "{}".into() }],
            ));
            m.push(Message::tool_result(id, "read", text(200, 'r')));
        }
        m
    }

    #[test]
    fn p3_split_and_prune_keep_tool_calls_with_their_results() {
        let s = chain();
        let ctx = Context::from_messages(tool_convo());
        let budget = Budget::new(500);
        // 90 conversation messages: 40% = 36 > 20 -> 20, which falls between call 6 and its result.
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
        assert_eq!(plan.requests[0].span.len(), 21);
        let out = run(&s, &ctx, &budget, "- s");
        assert!(check_context(&out.context).is_empty(), "{:?}", check_context(&out.context));
        // 69 left; the prune keeps the last 50, which start at a tool call.
        assert_eq!(out.context.len(), 2 + 50);
        assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
        // Keeping 49 would start at a tool result: the prune moves one on.
        let s49 = with(|p| p.prune_keep_last = 49);
        let out = run(&s49, &ctx, &budget, "- s");
        assert_eq!(out.context.len(), 2 + 48);
        assert!(check_context(&out.context).is_empty());
        assert!(out.context.get(2).is_some_and(|e| e.role() == Role::User));

        let raw = with(|p| p.keep_tool_pairs = false);
        let plan = raw.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
        assert_eq!(plan.requests[0].span.len(), 20);
        // Without the prune, the document's count leaves result 6 without its call. (A plan
        // that prunes after the chain holds the chain's layout, not yet pruned.)
        let unpruned = with(|p| {
            p.keep_tool_pairs = false;
            p.prune_check = PruneCheck::AfterChain;
        });
        let plan = unpruned.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
        let summarized = build_layout(&ctx, &plan.layout, &plan.requests, &[Ok("- s".into())], &[]);
        assert!(!check_context(&summarized.context).is_empty());
        assert!(raw.promises(&ctx, &budget).documented_deviations.contains(&ViolationKind::OrphanToolResult));
    }

    // ---- Task 9, Task 7 and Task 5 ----

    /// Task 9, "Remove legacy paper message trimming": the route keeps only the last
    /// `MAX_CHAT_HISTORY_PAIRS * 2` = 40 messages in paper mode, and the document says "do NOT
    /// remove it yet".
    #[test]
    fn task_9_paper_mode_keeps_only_the_newest_40_messages() {
        let s = with(|p| p.mode = Mode::Paper);
        assert_eq!(Params::default().paper_trim_last, 40);
        let ctx = Context::from_messages(convo(60, 20));
        let budget = Budget::new(1_000_000);
        assert!(!s.check_context_budget(ctx.units(&CharsOver4), 1_000_000).should_prune, "far under every threshold");
        assert!(s.should_compact(&ctx, &budget), "the trim runs on every request over 40 messages");
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("the trim");
        assert_eq!(plan.step, "trim");
        let out = s.apply(&ctx, &budget, &plan, &[]);
        assert_eq!(out.context.len(), 1 + 40);
        assert_eq!(out.context.get(0).map(|e| e.role()), Some(Role::System));
        assert_eq!(out.context.get(1).map(|e| e.origin().clone()), Some(Origin::Recorded { index: 21 }));
        assert_eq!(out.event.step, "trim");
        assert_eq!(note(&out, "trimmed"), &json!(20));
        // The trim is declared: it compacts under the threshold.
        let promised = s.promises(&ctx, &budget).documented_deviations;
        assert!(promised.contains(&ViolationKind::CompactedBelowThreshold));
        assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
        // 40 messages or fewer, general chat, or the trim off: nothing to do.
        let forty = Context::from_messages(convo(40, 20));
        assert!(!s.should_compact(&forty, &budget));
        assert!(s.plan(&forty, &budget, Trigger::Proactive).is_none());
        assert!(!with(|p| p.mode = Mode::General).should_compact(&ctx, &budget));
        let off = with(|p| {
            p.mode = Mode::Paper;
            p.paper_trim_last = 0;
        });
        assert!(!off.should_compact(&ctx, &budget));
    }

    /// Task 7: the chain runs on the trimmed list (the trim at lines 413-421 comes before the
    /// compaction layer at 492-526), so its thresholds see 40 messages, not 60.
    #[test]
    fn task_7_the_chain_estimates_the_trimmed_list() {
        let s = with(|p| p.mode = Mode::Paper);
        let ctx = Context::from_messages(convo(60, 100));
        // 60 x 100 chars = 1,500 tokens in all; 40 of them are 1,000 (+ the system prompt).
        let budget = Budget::new(1_250);
        assert!(s.check_context_budget(ctx.units(&CharsOver4), 1_250).should_compact);
        let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("the trim");
        assert_eq!(plan.notes.get("chain_ran"), Some(&json!(false)), "{:?}", plan.notes);
        assert!(plan.requests.is_empty());
        // A window the trimmed list is still over: P3 summarizes 30% of the 40.
        let plan = s.plan(&ctx, &Budget::new(1_000), Trigger::Proactive).expect("the chain");
        assert_eq!(plan.requests[0].span.len(), 12);
        assert!(plan.step.starts_with("trim+"), "{}", plan.step);
    }

    /// Task 7: the route runs the chain on `fullMessagesBase` rebuilt from the stored
    /// conversation on every request, so the default starts from the full history.
    #[test]
    fn task_7_rebuilds_from_the_full_history_by_default() {
        assert!(Params::default().rebuild_from_history);
        assert!(chain().profile().rebuilds_from_history);
        assert!(!with(|p| p.rebuild_from_history = false).profile().rebuilds_from_history);
    }

    /// Task 5: "Max 500 karakter total" is the summary's target, under `maxTokens: 200`.
    #[test]
    fn task_5_the_summary_aims_at_500_characters() {
        let s = chain();
        let ctx = Context::from_messages(convo(30, 100));
        let plan = s.plan(&ctx, &Budget::new(100), Trigger::Proactive).expect("a plan");
        let request = &plan.requests[0];
        assert_eq!(request.target_chars, Some(500));
        assert_eq!(request.max_tokens, 200);
        // `[${m.role}]: ${m.content}`: the messages go to the model whole.
        assert_eq!(request.input, compaction::InputCuts::NONE);
    }

    /// Task 7 inserts the chain before the brute prune and nothing catches a rejected request.
    #[test]
    fn no_reactive_path_unless_asked() {
        assert!(!chain().reacts_to(Trigger::Overflow));
        assert!(!chain().reacts_to(Trigger::LengthStop));
        assert!(with(|p| p.react_to_overflow = true).reacts_to(Trigger::Overflow));
    }

    // ---- params ----

    #[test]
    fn params_have_the_document_defaults_and_are_checked() {
        let p: Params = serde_json::from_str("{}").expect("empty params");
        assert_eq!(p, Params::default());
        assert_eq!((p.compaction_ratio, p.prune_ratio, p.prune_keep_last), (0.85, 0.80, 50));
        assert!(serde_json::from_str::<Params>(r#"{"trigger": 0.9}"#).is_err());
        let err = PriorityChain::new(Params { compaction_ratio: 1.5, ..Params::default() }).expect_err("out of range");
        assert_eq!(err.param, "compaction_ratio");
        let p: Params = serde_json::from_str(r#"{"mode": "paper", "prune_check": "after_chain"}"#).expect("params");
        assert_eq!((p.mode, p.prune_check), (Mode::Paper, PruneCheck::AfterChain));
    }

    #[test]
    fn promises_cover_the_stripped_last_message() {
        let s = chain();
        let mut m = convo(10, 400);
        m.push(Message::user("ok"));
        let ctx = Context::from_messages(m);
        let budget = Budget::new(500);
        assert_eq!(s.promises(&ctx, &budget).recent_window, 0);
        let out = run(&s, &ctx, &budget, "- s");
        assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
    }

    // ---- the rewrite for speed against the implementation before it ----

    use compaction::context::Entry;
    use proptest::prelude::{
        prop, prop_assert, prop_assert_eq, prop_oneof, proptest, Just, ProptestConfig, Strategy as Gen,
    };

    /// One generated message, before it becomes an entry.
    #[derive(Debug, Clone)]
    pub(crate) enum Step {
        /// A user message of `n` characters, or (`chat`) one of a few short confirmations.
        User {
            n: usize,
            chat: Option<u8>,
        },
        Assistant {
            n: usize,
        },
        /// An assistant message calling tools, by ids from a small pool (ids get reused).
        Calls {
            ids: Vec<u8>,
        },
        /// A tool result answering an id from the pool (maybe no call, maybe an old one).
        Result {
            id: u8,
            n: usize,
        },
        System {
            n: usize,
        },
        /// A summary entry (a system message), or a stage digest this strategy wrote.
        Summary,
        Digest,
    }

    pub(crate) fn arb_step() -> impl Gen<Value = Step> {
        prop_oneof![
            4 => (0usize..300, prop::option::weighted(0.3, 0u8..8)).prop_map(|(n, chat)| Step::User { n, chat }),
            3 => (0usize..300).prop_map(|n| Step::Assistant { n }),
            3 => prop::collection::vec(0u8..6, 1..4).prop_map(|ids| Step::Calls { ids }),
            4 => (0u8..6, 0usize..600).prop_map(|(id, n)| Step::Result { id, n }),
            1 => (0usize..100).prop_map(|n| Step::System { n }),
            1 => Just(Step::Summary),
            1 => Just(Step::Digest),
        ]
    }

    /// A context of `steps`, with stage labels and stage decisions when `stages` says so.
    pub(crate) fn context_of(steps: &[(Step, Option<u8>, bool)], system: bool) -> Context {
        const CHAT: [&str; 8] = ["ok", " sure ", "ok?", "bagus!", "İİ", "\u{feff}ya", "ok thanks", "next"];
        let mut entries = Vec::new();
        if system {
            entries.push(Entry::recorded(0, Message::system("You help.")));
        }
        for (k, (step, stage, decision)) in steps.iter().enumerate() {
            let i = entries.len();
            let body = |n: usize| format!("{k} {}", text(n, 'x'));
            let (m, origin) = match step {
                Step::User { n, chat } => {
                    (Message::user(chat.map_or_else(|| body(*n), |c| CHAT[c as usize].to_string())), None)
                }
                Step::Assistant { n } => (Message::assistant(body(*n)), None),
                Step::Calls { ids } => {
                    let calls = ids
                        .iter()
                        .map(|id| ToolCall { id: format!("c{id}"), name: "read".into(), arguments: "{}".into() })
                        .collect();
                    (Message::assistant_calls("", calls), None)
                }
                Step::Result { id, n } => (Message::tool_result(format!("c{id}"), "read", body(*n)), None),
                Step::System { n } => (Message::system(body(*n)), None),
                Step::Summary => {
                    (Message::system("earlier summary"), Some(Origin::Summary { round: 1, covers: vec![0] }))
                }
                Step::Digest => (
                    Message::system(stage_digest_text(2, "- a: x\n- b: y")),
                    Some(Origin::Inserted { what: Inserted::StageDigest }),
                ),
            };
            let mut m = m;
            if let Some(s) = stage {
                m = m.with_stage(["a", "b", "c"][*s as usize % 3]);
                if *decision {
                    m = m.with_meta("stage_decision", json!(format!("decided {k}")));
                }
            }
            entries.push(Entry::new(m, origin.unwrap_or(Origin::Recorded { index: i })));
        }
        Context::from_entries(entries)
    }

    pub(crate) fn arb_context() -> impl Gen<Value = Context> {
        let step = (arb_step(), prop::option::weighted(0.3, 0u8..3), prop::bool::weighted(0.2));
        (prop::collection::vec(step, 0..90), prop::bool::weighted(0.85))
            .prop_map(|(steps, system)| context_of(&steps, system))
    }

    /// Entries as comparable values.
    pub(crate) fn entries_of(ctx: &Context) -> Vec<(Message, Origin)> {
        ctx.entries().iter().map(|e| (e.message().clone(), e.origin().clone())).collect()
    }

    fn arb_params() -> impl Gen<Value = Params> {
        (
            0u8..3,
            any_bool(),
            any_bool(),
            prop::sample::select(vec![0usize, 3, 40]),
            prop::sample::select(vec![2usize, 50]),
        )
            .prop_map(|(mode, pairs, after, trim, keep)| Params {
                mode: [Mode::Auto, Mode::Paper, Mode::General][mode as usize],
                keep_tool_pairs: pairs,
                prune_check: if after { PruneCheck::AfterChain } else { PruneCheck::BeforeChain },
                paper_trim_last: trim,
                prune_keep_last: keep,
                ..Params::default()
            })
    }

    fn any_bool() -> impl Gen<Value = bool> {
        prop::bool::ANY
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The tool pairs, the pair-safe split (from the whole list of pairs and from the pairs
        /// near the split) and every plan, applied with a summary, an empty one and a failed
        /// one, are those of the implementation before the rewrite.
        #[test]
        fn fast_paths_make_the_plans_of_the_straightforward_ones(
            ctx in arb_context(),
            params in arb_params(),
            ratio in prop::sample::select(vec![0.2f64, 0.6, 0.9, 1.0, 1.1, 1.3, 3.0]),
            k in 0usize..100,
        ) {
            let pairs = tool_pairs(&ctx);
            prop_assert_eq!(&pairs, &legacy::tool_pairs_of(&ctx));
            let seq: Vec<Option<usize>> =
                (0..ctx.len()).filter(|i| i % 7 != 3).map(|i| (i % 11 != 5).then_some(i)).collect();
            let expected = legacy::pair_safe_split_of(&seq, k, &pairs);
            prop_assert_eq!(pair_safe_split(&seq, k, &pairs), expected);
            let s = PriorityChain::new(params.clone()).expect("valid params");
            prop_assert_eq!(Scan::new(&ctx, &s).safe_split(&seq, k), expected);
            // Either local search, whatever the budget, finds that split or gives up.
            for budget in [0, 3, 1_000] {
                let scan = Scan::new(&ctx, &s);
                if k < seq.len() {
                    for local in [scan.split_from_calls(&seq, k, budget), scan.split_from_results(&seq, k, budget)] {
                        prop_assert!(local.is_none() || local == Some(expected), "{local:?} vs {expected}");
                    }
                }
            }

            let old = legacy::Legacy::new(params);
            let window = ((ctx.units(&CharsOver4).div_ceil(4) as f64 * ratio) as u64).max(1);
            let budget = Budget::new(window);
            // In general chat over the prune's threshold the plan holds what the prune leaves
            // of the legacy plan's layouts.
            let b = s.check_context_budget(ctx.units(&CharsOver4), window);
            let pruned_in_plan = s.prunes_in_plan(s.paper_mode(&ctx), &b);
            for trigger in [Trigger::Proactive, Trigger::Overflow] {
                let plan = s.plan(&ctx, &budget, trigger);
                let mut was_plan = old.plan(&ctx, &budget, trigger);
                if let Some(p) = was_plan.as_mut().filter(|_| pruned_in_plan) {
                    p.layout = old.prune(&ctx, &p.layout);
                    if let Fallback::Layout { layout, .. } = &mut p.fallback {
                        *layout = old.prune(&ctx, layout);
                    }
                }
                prop_assert_eq!(&plan, &was_plan);
                let Some(plan) = plan else { continue };
                let was_plan = old.plan(&ctx, &budget, trigger).expect("the legacy plan");
                let failed = compaction::SummaryFailure { reason: "x".into() };
                for summaries in [vec![Ok("- s".to_string())], vec![Ok(String::new())], vec![Err(failed)], vec![]] {
                    let was = old.apply(&ctx, &budget, &was_plan, &summaries);
                    // Each plan applied, and the legacy plan applied by the new code.
                    for new in [s.apply(&ctx, &budget, &plan, &summaries), s.apply(&ctx, &budget, &was_plan, &summaries)] {
                        prop_assert_eq!(entries_of(&new.context), entries_of(&was.context));
                        prop_assert_eq!(&new.event, &was.event);
                    }
                }
            }
            let (p, q) = (s.promises(&ctx, &budget), old.promises(&ctx, &budget));
            prop_assert_eq!((p.recent_window, p.documented_deviations), (q.recent_window, q.documented_deviations));
        }

        /// The index kept with a context ([`Context::memo`]) follows it as it grows one entry at
        /// a time, and is read again once an entry is replaced: plans, applies and promises on
        /// the context are those on a fresh copy, which reads its entries from scratch.
        #[test]
        fn the_kept_index_follows_a_growing_context(
            ctx in arb_context(),
            params in arb_params(),
            ratio in prop::sample::select(vec![0.3f64, 0.9, 1.1]),
            replaced in 0usize..90,
        ) {
            let s = PriorityChain::new(params).expect("valid params");
            let same = |grown: &Context| -> Result<(), proptest::test_runner::TestCaseError> {
                let fresh = Context::from_entries(grown.entries().to_vec());
                let window = ((grown.units(&CharsOver4).div_ceil(4) as f64 * ratio) as u64).max(1);
                let budget = Budget::new(window);
                let plan = s.plan(grown, &budget, Trigger::Proactive);
                prop_assert_eq!(&plan, &s.plan(&fresh, &budget, Trigger::Proactive));
                if let Some(plan) = plan {
                    let summaries = [Ok("- s".to_string())];
                    let (a, b) = (s.apply(grown, &budget, &plan, &summaries), s.apply(&fresh, &budget, &plan, &summaries));
                    prop_assert_eq!(entries_of(&a.context), entries_of(&b.context));
                    prop_assert_eq!(a.event, b.event);
                }
                let (p, q) = (s.promises(grown, &budget), s.promises(&fresh, &budget));
                prop_assert_eq!((p.recent_window, p.documented_deviations), (q.recent_window, q.documented_deviations));
                Ok(())
            };
            let mut grown = Context::new();
            for e in ctx.entries() {
                grown.push(e.clone());
                same(&grown)?;
            }
            if replaced < grown.len() {
                // A short confirmation in place of entry `replaced`: P1 strips it.
                grown.replace(replaced, Entry::recorded(replaced, Message::user("ok")), &[&CharsOver4]);
                same(&grown)?;
                grown.push(Entry::recorded(grown.len(), Message::assistant("after the change")));
                same(&grown)?;
            }
        }
    }
}

/// The implementation before it was rewritten for speed (every step over `Vec<Slot>` lists,
/// the tool pairs found with a map of vectors, the pair-safe split moved one pair at a time),
/// kept as the oracle `fast_paths_make_the_plans_of_the_straightforward_ones` holds the rewrite
/// to.
#[cfg(test)]
pub(crate) mod legacy {
    #![allow(clippy::all)]
    use super::*;

    struct Chain {
        /// The working list after P1 and P2 (and the digest).
        slots: Vec<Slot>,
        stripped: usize,
        compacted_stages: Vec<String>,
        /// `P1` or `P2` when the chain resolved before P3.
        resolved: Option<&'static str>,
        /// The P3 request and the layout that holds its summary.
        p3: Option<(SummaryRequest, Vec<Slot>)>,
    }

    /// `(call entry, result entry)` pairs, paired as the invariant checker pairs them (a result
    /// answers the most recent unanswered call of its id before it).
    fn tool_pairs(ctx: &Context) -> Vec<(usize, usize)> {
        let mut open: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut out = Vec::new();
        for (i, e) in ctx.entries().iter().enumerate() {
            let m = e.message();
            for c in &m.tool_calls {
                open.entry(c.id.as_str()).or_default().push(i);
            }
            if m.role == Role::Tool {
                if let Some(c) = m.tool_call_id.as_deref().and_then(|id| open.get_mut(id)).and_then(|v| v.pop()) {
                    out.push((c, i));
                }
            }
        }
        out
    }

    /// The smallest split `>= k` of `seq` (entries of the context, by index; `None` for new
    /// messages) that leaves no tool call before the split with a result after it.
    fn pair_safe_split(seq: &[Option<usize>], k: usize, pairs: &[(usize, usize)]) -> usize {
        let pos: HashMap<usize, usize> = seq.iter().enumerate().filter_map(|(p, i)| i.map(|i| (i, p))).collect();
        let spans: Vec<(usize, usize)> =
            pairs.iter().filter_map(|(c, r)| Some((*pos.get(c)?, *pos.get(r)?))).filter(|(c, r)| c < r).collect();
        let mut k = k;
        loop {
            let mut moved = false;
            for &(c, r) in &spans {
                if c < k && k <= r {
                    k = r + 1;
                    moved = true;
                }
            }
            if !moved {
                return k.min(seq.len());
            }
        }
    }

    fn slot_role(ctx: &Context, slot: &Slot) -> Role {
        match slot {
            Slot::Keep { index } | Slot::Mask { index, .. } => ctx.get(*index).map_or(Role::User, |e| e.role()),
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

    fn is_identity(ctx: &Context, layout: &[Slot]) -> bool {
        layout.len() == ctx.len() && verbatim_tail(ctx, layout) == ctx.len()
    }

    pub(crate) struct Legacy {
        params: Params,
        estimator: CharsOver4,
        inner: PriorityChain,
    }

    impl Legacy {
        pub(crate) fn new(params: Params) -> Legacy {
            let inner = PriorityChain::new(params.clone()).expect("valid params");
            Legacy { params, estimator: CharsOver4, inner }
        }
        fn slots_tokens(&self, ctx: &Context, slots: &[Slot]) -> u64 {
            self.estimator.tokens_from_units(self.slots_units(ctx, slots))
        }

        /// The estimator's units (characters) of `slots`; summaries count 0.
        fn slots_units(&self, ctx: &Context, slots: &[Slot]) -> u64 {
            slots
                .iter()
                .map(|s| match s {
                    Slot::Keep { index } => ctx.get(*index).map_or(0, |e| e.units(&self.estimator)),
                    Slot::Insert { message, .. } => self.estimator.message_units(message),
                    Slot::Mask { placeholder, .. } => js_len(placeholder),
                    Slot::Summary { .. } => 0,
                })
                .sum()
        }

        /// Whether the paper-mode trim (Task 9) shortens `ctx`: paper mode, the trim on, and more
        /// conversation messages than it keeps.
        pub fn trims(&self, ctx: &Context) -> bool {
            let keep = self.params.paper_trim_last;
            keep > 0
                && self.inner.paper_mode(ctx)
                && ctx.entries().iter().filter(|e| e.role() != Role::System).nth(keep).is_some()
        }

        /// The list the chain starts from: the whole context, or in paper mode the route's legacy
        /// trim (`modelMessages.slice(-MAX_CHAT_HISTORY_PAIRS * 2)`): every system message, then the
        /// newest `paper_trim_last` conversation messages (moved forward past a cut tool pair).
        fn base(&self, ctx: &Context) -> Vec<Slot> {
            let all: Vec<Slot> = (0..ctx.len()).map(|index| Slot::Keep { index }).collect();
            if self.trims(ctx) {
                self.keep_last(ctx, &all, self.params.paper_trim_last)
            } else {
                all
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
        fn inject_digest(&self, ctx: &Context, slots: &mut Vec<Slot>, compacted: &[String]) {
            if compacted.is_empty() {
                return;
            }
            let mut count = compacted.len();
            let mut lines = Vec::new();
            let previous = slots.iter().position(|s| {
                matches!(s, Slot::Keep { index } if ctx.get(*index)
                    .is_some_and(|e| matches!(e.origin(), Origin::Inserted { what: Inserted::StageDigest })))
            });
            let mut prev_text = None;
            if let Some(p) = previous {
                let parsed =
                    slot_entry(&slots[p]).and_then(|i| ctx.get(i)).and_then(|e| parse_digest(&e.message().content));
                if let Some((n, entries)) = parsed {
                    slots.remove(p);
                    count += n;
                    prev_text = Some(entries);
                }
            }
            lines.extend(prev_text);
            lines.extend(Self::digest_entries(ctx, compacted));
            if lines.is_empty() {
                return;
            }
            let message = Message::system(stage_digest_text(count, &lines.join("\n")));
            let at = slots.iter().filter(|s| slot_role(ctx, s) == Role::System).count().min(slots.len());
            slots.insert(at, Slot::insert(message, Inserted::StageDigest));
        }

        /// P1, P2 and the P3 split, as far as they go without the summary.
        fn run_chain(&self, ctx: &Context, base: Vec<Slot>, thresholds: &ChainBudget, paper: bool) -> Chain {
            let cthr = thresholds.compaction_threshold;
            let pairs = if self.params.keep_tool_pairs { tool_pairs(ctx) } else { Vec::new() };
            let start = base.len();
            let mut chain = Chain { slots: base, stripped: 0, compacted_stages: Vec::new(), resolved: None, p3: None };

            // P1: strip chitchat.
            chain.slots.retain(|s| {
                !slot_entry(s).and_then(|i| ctx.get(i)).is_some_and(|e| self.inner.is_chitchat(e.message()))
            });
            chain.stripped = start - chain.slots.len();
            if self.slots_tokens(ctx, &chain.slots) < cthr {
                chain.resolved = Some("P1");
                return chain;
            }

            // P2: drop the oldest completed stages.
            if paper {
                for (stage, first, last) in Self::completed_stages(ctx) {
                    let mut drop: Vec<bool> = (0..ctx.len()).map(|i| (first..=last).contains(&i)).collect();
                    loop {
                        let mut changed = false;
                        for &(c, r) in &pairs {
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
                    chain.slots.retain(|s| match slot_entry(s) {
                        Some(i) => ctx.get(i).is_some_and(|e| e.role() == Role::System) || !drop[i],
                        None => true,
                    });
                    chain.compacted_stages.push(stage);
                    if self.slots_tokens(ctx, &chain.slots) < cthr {
                        let stages = chain.compacted_stages.clone();
                        self.inject_digest(ctx, &mut chain.slots, &stages);
                        chain.resolved = Some("P2");
                        return chain;
                    }
                }
                let stages = chain.compacted_stages.clone();
                self.inject_digest(ctx, &mut chain.slots, &stages);
            }

            // P3: summarize the oldest conversation messages.
            let (system, conversation): (Vec<Slot>, Vec<Slot>) =
                chain.slots.iter().cloned().partition(|s| slot_role(ctx, s) == Role::System);
            let n = conversation.len();
            let count = if paper {
                ((n as f64 * self.params.paper_summarize_ratio).floor() as usize).min(self.params.paper_summarize_max)
            } else {
                self.params.general_summarize_max.min((n as f64 * self.params.general_summarize_ratio).floor() as usize)
            };
            if count > self.params.summarize_more_than {
                let seq: Vec<Option<usize>> = conversation.iter().map(slot_entry).collect();
                let k = if self.params.keep_tool_pairs { pair_safe_split(&seq, count, &pairs) } else { count };
                let span: Vec<usize> = seq[..k].iter().flatten().copied().collect();
                let prompt = if paper {
                    PromptKind::PaperMidStage { stage: Self::current_stage(ctx).unwrap_or("unknown").to_string() }
                } else {
                    PromptKind::GeneralChat
                };
                let mut request =
                    SummaryRequest::new(span, prompt, self.params.summary_max_tokens, ctx.last_round() + 1);
                request.target_chars = Some(self.params.summary_max_chars);
                let mut layout = system;
                layout.push(Slot::Summary {
                    request: 0,
                    role: Role::System,
                    prefix: SUMMARY_PREFIX.to_string(),
                    suffix: SUMMARY_SUFFIX.to_string(),
                });
                layout.extend(conversation[k..].iter().cloned());
                chain.p3 = Some((request, layout));
            }
            chain
        }

        /// P5: every system message, then the last `prune_keep_last` conversation messages.
        pub(crate) fn prune(&self, ctx: &Context, slots: &[Slot]) -> Vec<Slot> {
            self.keep_last(ctx, slots, self.params.prune_keep_last)
        }

        /// Every system slot, then the last `keep` conversation slots (moved forward past a cut
        /// tool pair when `keep_tool_pairs`).
        fn keep_last(&self, ctx: &Context, slots: &[Slot], keep: usize) -> Vec<Slot> {
            let (mut out, conversation): (Vec<Slot>, Vec<Slot>) =
                slots.iter().cloned().partition(|s| slot_role(ctx, s) == Role::System);
            let mut k = conversation.len().saturating_sub(keep);
            if self.params.keep_tool_pairs && k > 0 {
                let seq: Vec<Option<usize>> = conversation.iter().map(slot_entry).collect();
                k = pair_safe_split(&seq, k, &tool_pairs(ctx));
            }
            out.extend(conversation[k..].iter().cloned());
            out
        }

        pub(crate) fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
            let paper = self.inner.paper_mode(ctx);
            let base = self.base(ctx);
            let trimmed = ctx.len() - base.len();
            let b = self.inner.check_context_budget(self.slots_units(ctx, &base), budget.context_window);
            if !b.should_compact && !b.should_prune && trimmed == 0 {
                return None;
            }
            let mut notes = serde_json::Map::new();
            notes.insert("mode".into(), json!(if paper { "paper" } else { "general" }));
            notes.insert("trimmed".into(), json!(trimmed));
            notes.insert("estimate_before".into(), json!(b.total_tokens));
            notes.insert("compaction_threshold".into(), json!(b.compaction_threshold));
            notes.insert("prune_threshold".into(), json!(b.prune_threshold));
            notes.insert("chain_ran".into(), json!(b.should_compact));
            if !b.should_compact {
                // Under the trigger: the trim, and between the prune threshold and the trigger the
                // prune, alone.
                let fin = if b.should_prune { self.prune(ctx, &base) } else { base.clone() };
                if is_identity(ctx, &fin) {
                    return None;
                }
                let step = if trimmed > 0 { "trim" } else { "P5" };
                let mut plan = Plan::deterministic(trigger, step, base);
                plan.notes = notes;
                return Some(plan);
            }
            let chain = self.run_chain(ctx, base, &b, paper);
            notes.insert("stripped_chitchat".into(), json!(chain.stripped));
            notes.insert("compacted_stages".into(), json!(chain.compacted_stages));
            if let Some(r) = chain.resolved {
                notes.insert("resolved_at".into(), json!(r));
            }
            let steps =
                PriorityChain::steps(trimmed > 0, chain.stripped, chain.compacted_stages.len(), false, false, false);
            match chain.p3 {
                Some((request, layout)) => {
                    notes.insert("summarized_messages".into(), json!(request.span.len()));
                    let step = if steps == "none" { "P3".to_string() } else { format!("{steps}+P3") };
                    Some(Plan {
                        trigger,
                        layout,
                        requests: vec![request],
                        fallback: Fallback::Layout { label: "P3 summary failed".into(), layout: chain.slots },
                        step,
                        notes,
                    })
                }
                None => {
                    let prune_gate = match self.params.prune_check {
                        PruneCheck::BeforeChain => b.should_prune,
                        PruneCheck::AfterChain => self.slots_tokens(ctx, &chain.slots) > b.prune_threshold,
                    };
                    let fin = if prune_gate { self.prune(ctx, &chain.slots) } else { chain.slots.clone() };
                    if is_identity(ctx, &fin) {
                        return None;
                    }
                    let mut plan = Plan::deterministic(trigger, steps, chain.slots);
                    plan.notes = notes;
                    Some(plan)
                }
            }
        }
        /// Finish the chain on the built context: P3's threshold check, the P4 signal, the P5 prune.
        pub(crate) fn apply(
            &self,
            ctx: &Context,
            budget: &Budget,
            plan: &Plan,
            summaries: &[SummaryOutcome],
        ) -> Compacted {
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
                (Some(_), Fallback::Unchanged) => return apply_layout(&self.inner, ctx, budget, plan, summaries),
            };
            let summarized = !plan.requests.is_empty() && failure.is_none();
            let b = self.inner.check_context_budget(self.slots_units(ctx, &self.base(ctx)), budget.context_window);
            let paper = plan.notes.get("mode").and_then(Value::as_str) == Some("paper");
            let chain_ran = plan.notes.get("chain_ran").and_then(Value::as_bool).unwrap_or(b.should_compact);
            let chained = build_layout(ctx, layout, &plan.requests, summaries, &[self.inner.estimator()]);
            let after_chain = self.inner.estimate(&chained.context);

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
            let (built, pruned): (Built, usize) = if prune_gate {
                let fin = self.prune(ctx, layout);
                let dropped = layout.len() - fin.len();
                (build_layout(ctx, &fin, &plan.requests, summaries, &[self.inner.estimator()]), dropped)
            } else {
                (chained, 0)
            };
            notes.insert("pruned".into(), json!(pruned));

            let stripped = notes.get("stripped_chitchat").and_then(Value::as_u64).unwrap_or(0) as usize;
            let trimmed = notes.get("trimmed").and_then(Value::as_u64).unwrap_or(0);
            let stages = notes.get("compacted_stages").and_then(Value::as_array).map_or(0, |a| a.len());
            let estimate_after = self.inner.estimate(&built.context);
            let shortfall = self
                .inner
                .threshold(&built.context, budget)
                .and_then(|t| estimate_after.checked_sub(t))
                .filter(|d| *d > 0);
            let event = CompactionEvent {
                strategy: self.inner.name().to_string(),
                trigger: plan.trigger,
                step: PriorityChain::steps(trimmed > 0, stripped, stages, summarized, p4, pruned > 0),
                estimate_before: self.inner.estimate(ctx),
                estimate_after,
                messages_before: ctx.len(),
                messages_after: built.context.len(),
                removed: built.removed,
                masked: built.masked,
                summaries: built.summaries,
                round: built.round,
                fallback,
                shortfall,
                notes,
            };
            Compacted { context: built.context, event }
        }
        pub(crate) fn promises(&self, ctx: &Context, budget: &Budget) -> Promises {
            let mut deviations = vec![ViolationKind::RoleAlternation];
            if ctx.summaries().next().is_some() {
                deviations.push(ViolationKind::MultipleSummaries);
            }
            let first_body = ctx.entries().iter().position(|e| e.role() != Role::System).unwrap_or(ctx.len());
            if ctx.entries()[first_body..].iter().any(|e| e.role() == Role::System) {
                deviations.push(ViolationKind::OutOfOrder);
            }
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

    pub(crate) fn tool_pairs_of(ctx: &Context) -> Vec<(usize, usize)> {
        tool_pairs(ctx)
    }

    pub(crate) fn pair_safe_split_of(seq: &[Option<usize>], k: usize, pairs: &[(usize, usize)]) -> usize {
        pair_safe_split(seq, k, pairs)
    }
}
