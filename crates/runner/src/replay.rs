//! The replay engine: every recorded assistant message is one model call; before each call the
//! strategy may compact (proactively, or reactively when the request is over the window).
//!
//! # One call
//!
//! The context is built incrementally from the recording ([`Entry::recorded`]), every entry
//! metered once with the exact counter and the strategy's estimator, so a step costs O(new
//! messages). Before each recorded assistant message:
//!
//! 1. **Length stop**: when the previous recorded assistant message stopped with
//!    `finish_reason = "length"` and the strategy [`reacts_to`](Strategy::reacts_to)
//!    [`Trigger::LengthStop`], it plans with that trigger (`split-fraction` compacts only if its
//!    threshold holds, as its document says).
//! 2. **Proactive**: otherwise, when [`Strategy::should_compact`] holds, plan, summarize each
//!    request with the [`Summarizer`], apply.
//! 3. **Reactive**: while the request (exact tokens) is over the window and the strategy reacts
//!    to [`Trigger::Overflow`], plan with that trigger and apply, at most
//!    [`MAX_REACTIVE_ATTEMPTS`] times, stopping when a compaction changes nothing.
//! 4. A request still over the window is an **overflow**: a real API would reject it. What
//!    follows depends on [`OverflowPolicy`]. Under [`OverflowPolicy::Fail`] (the default) the
//!    first such call is the conversation's **rejected call** ([`PairMetrics::first_rejected_call`]):
//!    the conversation ends there. It and every later call are not billed (no request, cached
//!    or output tokens, no summarizer tokens, no cost), and every probe asked after it scores 0
//!    (the agent has nothing), at risk, with every fact lost; the judge's score as if the
//!    request had been sent is kept in [`ProbeScore::if_sent`]. The replay itself goes on to the
//!    end of the recording, so `retention_if_sent`, the timeline, and the counts of calls,
//!    overflows, compactions and violations describe the whole recording as if every request
//!    had been sent. Under [`OverflowPolicy::Continue`] (for diagnosis) the call proceeds, as
//!    the recording does, and is billed and scored.
//! 5. The recorded assistant message is appended, then the messages after it.
//!
//! Every compaction goes through the kernel's per-conversation [`compaction::Compactor`],
//! which holds the context, the proactive gate and the in-place masking path; the replay
//! meters, bills, checks providers and asks probes around each of its steps.
//!
//! A compaction whose summary failed and whose strategy keeps the context unchanged is still a
//! compaction event (with its `fallback`), and counts in `compactions`.
//!
//! A strategy that [rebuilds from history](compaction::Profile::rebuilds_from_history) (`priority-chain`,
//! whose route rebuilds its message list from the stored conversation on every request) starts
//! each call from the full history rather than from the context its last compaction left, so
//! its chain, and every summary the chain asks for, runs again on each call that needs it; each
//! of those summaries counts in the summarizer's calls and cost. The context the previous
//! request left stands as the previous request for the prefix cache.
//!
//! A summary the summarizer's provider rejected as over its context window
//! ([`FailureKind::ContextLength`]) is handled like an over-long request: when the compaction
//! was not already reactive and the strategy reacts to [`Trigger::Overflow`], the replay plans
//! again once with that trigger and summarizes again, counting it in
//! `summarizer_context_retries`; the compaction is recorded with the trigger it finally used.
//! A summary the response cache could not answer in mode `only` ([`FailureKind::CacheMiss`])
//! counts in `cache_misses`, and the run records the pair as failed (see [`crate::run`]).
//!
//! # Next action
//!
//! After every compaction, the recorded action of the call it ran before is read against the
//! context it left: the identifiers it needs from earlier in the conversation and which the
//! context lost, and whether it repeats a failed call or re-reads an unchanged file whose
//! result the context lost ([`next_action`]'s module docs; the record's
//! [`CompactionRecord::next_action`], the pair's `next_action_ready`). With a next-action
//! model ([`replay_with`], [`Models::next_action`]) each call that compacted also asks it for
//! the next action with the context the call's compactions left and with the full history,
//! beside the replay, collected at its end ([`next_action`]'s module docs; the record's
//! `agreement`, the pair's `next_action_agreement`).
//!
//! # Invariants
//!
//! [`check_context`](compaction::check_context) runs on every request (incrementally: between compactions only the new
//! messages are scanned, with the same result) and [`check_compaction`](compaction::check_compaction) on every compaction. Every
//! violation counts, documented deviations included (they are findings). Two rules keep counts
//! honest: a structural violation of a request (an orphan result, an unanswered call, several
//! summaries) counts once when it appears, not again on every later request that still carries
//! it; and the structural violations [`check_compaction`](compaction::check_compaction) reports are not counted a second time,
//! since the request after the compaction reports them. Non-structural ones (system prompt
//! changed, order, recent window, below threshold, role alternation, unreported overflow) count
//! once per compaction.
//!
//! # Recorded compactions
//!
//! A recording may hold the compactions its agent made: imported Claude Code sessions carry,
//! right after each cut, the summary Claude Code wrote (a message flagged
//! `meta.compact_summary`). Only a strategy that [sees recorded
//! summaries](compaction::Profile::sees_recorded_summaries) (the `recorded` reference, which cuts there)
//! gets those messages; every other strategy replays the history as if the recording had not
//! been compacted, so no strategy is scored on Claude Code's summary.
//!
//! # Prefix cache
//!
//! Each request is compared with the previous one entry by entry (the same shared message, or
//! byte-identical messages, stop at the first difference); the shared prefix is measured in
//! exact tokens. With no compaction in between the whole previous request is shared.
//!
//! - [`CacheProfile::Openai`]: the shared prefix rounded down to a multiple of 128 when it is at
//!   least 1,024 tokens, else 0.
//! - [`CacheProfile::Anthropic`]: cache breakpoints where agents put them with automatic caching:
//!   at the end of the system prompt and at the end of each request (the last message). A
//!   request reads the longest prefix written at a breakpoint of the previous request that it
//!   shares: the whole previous request when it is a prefix, else the system prompt when that
//!   is shared, else nothing. Prefixes under 1,024 tokens are not cached (Anthropic's minimum for
//!   Sonnet and Opus). A strategy that places its own breakpoints ([`Strategy::cache_breakpoints`]:
//!   `cut-point`'s previous-turn, round `N-4` and tail points) has them used instead: a request
//!   reads the longest prefix of the previous request that ends at one of its breakpoints and
//!   that it shares.
//!   A cacheable request (at least 1,024 tokens) writes its uncached part to
//!   the cache (`cache_write_tokens`), priced at the model's cache-write price for the
//!   experiment's `cache_ttl` (Anthropic: 1.25x input for 5 minutes, 2x for 1 hour), so a
//!   strategy that breaks the cached prefix on every call pays the premium on every call.
//! - [`CacheProfile::None`]: nothing is cached.
//!
//! # Cost
//!
//! Per call, `(input - cached - written) x input + cached x cached_input + written x cache_write
//! + output x output` per million tokens, where output is the exact size of the recorded
//! assistant message; summarizer calls add their input and output tokens at the input and output
//! prices. Every compaction's summary is billed: `recorded`, whose summary the recorded agent
//! wrote, pays one summary call per compaction, the context it replaced as input and the
//! summary as output. `summary_cost_usd` is the summary calls' share. Under `overflow = "fail"`
//! nothing after the first rejected call is billed: not its request, cache reads or writes,
//! output, nor any summary (so `summary_cost_usd` stops there too). With no price, cost is not
//! measured: `cost_usd` is `None`, never a silent 0.
//!
//! # What providers refuse
//!
//! Every request is checked with [`compaction::check_request`] for both providers; a request
//! that breaks any rule counts once in `rejected_requests_openai` or
//! `rejected_requests_anthropic`, and once per rule it breaks in `rejections_by_rule`. Violations
//! of other kinds (both providers accept them) count in `findings`.
//!
//! The experiment's provider (the one [`CacheProfile::provider`] names: `cache` / `provider` =
//! `openai` or `anthropic`) is the target: a request it refuses, for a rule charged to the
//! strategy, is a rejected call exactly as an over-window request is (step 4 above: under
//! `overflow = "fail"` the conversation ends there, [`PairMetrics::rejected_because`] names the
//! rules). The other provider's refusals are counted only; with no provider named
//! (`cache = "none"`) no refusal ends a conversation.
//!
//! For Anthropic, a request whose tool loop is still running must carry the thinking blocks
//! the recording's latest assistant message has, unchanged
//! ([`compaction::RequestRule::ThinkingModified`]); the thinking blocks of the current tool
//! loop count in the request's tokens (Anthropic strips earlier turns'), and a recorded
//! assistant message's blocks in its output tokens.
//!
//! # Findings on the request
//!
//! - `latest_user_message_dropped`: requests without the most recent user message a person
//!   typed (not a tool result, not harness text), neither verbatim nor as a copy of its text.
//! - `fabricated_directives`: user directives a summary a model wrote states that no user
//!   message so far holds ([`crate::directives`]), read offline and, with the LLM judge, listed
//!   by its grader; the offline stand-in's summaries are not checked (they copy sentences: it
//!   cannot invent).
//! - `inapplicable_reason`: [`Strategy::can_operate`] at the window, asked once.
//!
//! # Cost per call
//!
//! A call costs what changed since the previous one, not the length of the request, so a
//! replay is linear in the conversation even when the strategy never drops a message:
//!
//! - the structural and provider checks ([`compaction::IncrementalCheck`]) scan only the
//!   appended messages, and start again only after a compaction that rewrote the context;
//! - a compaction that only masks ([`Strategy::plan_masks`]) is done in place
//!   ([`compaction::masking`]): the strategy looks only past what its previous masking
//!   settled, the context keeps its running totals, the compaction check reads a
//!   [`ContextShape`](compaction::ContextShape) kept as the context grows, and the prefix cache compares from the first
//!   masked entry. Both paths give the same figures (`compaction::masking`'s tests compare
//!   them call by call);
//! - the probes of a checkpoint look their source messages up in one set.
//!
//! # Probes
//!
//! A probe without `asked_at` is asked at every checkpoint after its source message: at 25%,
//! 50%, 75% and 100% of the conversation's calls ([`checkpoints_of`]: right after the
//! assistant message of call ceil(p% of the calls), the end for 100%; the same points for every
//! strategy). A probe with `asked_at` is asked once, when the replay has appended `asked_at`
//! recorded messages (the end when past it), under the percentage of calls made by then. A
//! probe is asked before the compaction of the call that follows: the judge sees the context as
//! it is at that moment. Retention is the mean over (probe, checkpoint) pairs. A probe is at
//! risk when its source message is no longer in the context verbatim.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Instant;

use compaction::compactor::Path;
use compaction::{
    Budget, Context, Conversation, Encoding, Entry, Exact, IncrementalCheck, Message, Probe, Profile, Provider,
    RequestRule, Role, Strategy, Summaries, SummaryOutcome, TokenCounter, Trigger,
};
use compaction_strategies::StrategyConfig;

use crate::session::Compactor;
use crate::timing::{within, Step};
use runlog::record::{CallPoint, CompactionRecord, PairMetrics, ProbeScore};

/// Forced compactions tried per call while the request is over the window.
pub const MAX_REACTIVE_ATTEMPTS: usize = 3;
use runlog::settings::{CacheProfile, OverflowPolicy, PrefixShare, Price, ANTHROPIC_CACHE_MIN};

/// Everything that defines one replay configuration besides the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplaySettings {
    pub strategy: StrategyConfig,
    /// The context window to replay with, in tokens.
    pub window: u64,
    /// The exact meter.
    pub encoding: Encoding,
    pub cache: CacheProfile,
    /// Prices of the replayed model, and of the summarizer's calls unless it has its own
    /// ([`Summarizer::price`]); `None` prices everything at zero.
    pub price: Option<Price>,
    /// What a request still over the window after every compaction attempt does.
    pub overflow: OverflowPolicy,
}

pub use crate::judge::Judge;
pub use crate::summarize::{FailureKind, Summarizer, Summary, SummaryError};

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Params(#[from] compaction_strategies::ParamError),
    #[error("conversation {id}: {problem}")]
    Conversation { id: String, problem: String },
    /// An external strategy's process failed (it exited, hung, or broke the protocol).
    #[error("{0}")]
    Strategy(String),
}

/// Replay `conversation` under `settings`.
///
/// ```
/// use compaction::{Conversation, Encoding, Message};
/// use compaction_strategies::StrategyConfig;
/// use runner::judge::OfflineJudge;
/// use runner::replay::{replay, ReplaySettings};
/// use runlog::settings::{CacheProfile, OverflowPolicy};
/// use runner::summarize::OfflineSummarizer;
///
/// let conversation = Conversation::new(
///     "c1",
///     vec![Message::user("hi"), Message::assistant("hello"), Message::user("bye"), Message::assistant("bye")],
/// );
/// let settings = ReplaySettings {
///     strategy: StrategyConfig::default_for("none").unwrap(),
///     window: 10,
///     encoding: Encoding::O200kBase,
///     cache: CacheProfile::Openai,
///     price: None,
///     overflow: OverflowPolicy::Continue,
/// };
/// let m = replay(&conversation, &settings, &OfflineSummarizer::new(), &OfflineJudge).unwrap();
/// assert_eq!(m.calls, 2);
/// // "hi" is 4 tokens with the chat template; the second request (12 tokens) overflows 10.
/// assert_eq!(m.timeline[0].request_tokens, 4);
/// assert_eq!(m.timeline[1].request_tokens, 12);
/// assert_eq!(m.overflows, 1);
/// // Under the default policy, `fail`, the provider would have rejected that second call.
/// let fail = ReplaySettings { overflow: OverflowPolicy::Fail, ..settings };
/// let m = replay(&conversation, &fail, &OfflineSummarizer::new(), &OfflineJudge).unwrap();
/// assert_eq!(m.first_rejected_call, Some(1));
/// assert_eq!(m.input_tokens, 4, "the rejected request is not billed");
/// ```
pub fn replay(
    conversation: &Conversation,
    settings: &ReplaySettings,
    summarizer: &dyn Summarizer,
    judge: &dyn Judge,
) -> Result<PairMetrics, ReplayError> {
    let strategy = settings.strategy.build()?;
    replay_built(conversation, Compactor::Stateless(strategy.as_ref()), settings, summarizer, judge)
}

mod cache;
mod checks;
pub mod next_action;
mod recorded;
mod recording;
pub use cache::cache_writes;
use cache::PreviousRequest;
use checks::{is_structural, RequestChecker};
pub use recorded::Recorded;
pub use recording::{checkpoints_of, recording_faults};
use recording::{first_call_from, is_live_request, recorded_summary_tokens, recording_rejections, share_of_calls};

/// [`replay`] with `strategy` already built from `settings.strategy` (a run builds each
/// configuration's strategy once for all its pairs), or a strategy that opens a session per
/// conversation ([`Compactor::Sessions`]).
pub fn replay_built(
    conversation: &Conversation,
    strategy: Compactor<'_>,
    settings: &ReplaySettings,
    summarizer: &dyn Summarizer,
    judge: &dyn Judge,
) -> Result<PairMetrics, ReplayError> {
    replay_with(conversation, strategy, settings, Models { summarizer, judge, next_action: None, recorded: None })
}

/// The models a replay asks: the summarizer, the judge, and the next-action model when the
/// experiment measures next-action agreement ([`next_action::NextActionModel`]); and the
/// conversation's shared entries with the offline judge's and summarizer's stores, when the
/// caller keeps them ([`Recorded`]: a run keeps one per conversation for all its pairs).
#[derive(Clone, Copy)]
pub struct Models<'m> {
    pub summarizer: &'m dyn Summarizer,
    pub judge: &'m dyn Judge,
    pub next_action: Option<&'m dyn next_action::NextActionModel>,
    /// Used only when it holds the replayed conversation ([`Recorded::holds`]).
    pub recorded: Option<&'m Recorded>,
}

/// [`replay_built`] with a next-action model besides the summarizer and the judge.
pub fn replay_with(
    conversation: &Conversation,
    strategy: Compactor<'_>,
    settings: &ReplaySettings,
    models: Models<'_>,
) -> Result<PairMetrics, ReplayError> {
    let Models { summarizer, judge, next_action: asker, recorded } = models;
    // The conversation's shared entries and stores, or this replay's own.
    let own;
    let recorded = match recorded.filter(|r| r.holds(conversation)) {
        Some(shared) => shared,
        None => {
            own = Recorded::own(conversation, settings.encoding);
            &own
        }
    };
    let started = Instant::now();
    let n = conversation.messages.len();
    let mut checkpoints: BTreeMap<usize, Vec<(&Probe, u32)>> = BTreeMap::new();
    // Answer keys, by the assistant message whose request they are asked on.
    let mut at_request: BTreeMap<usize, Vec<(&Probe, u32)>> = BTreeMap::new();
    let marks = checkpoints_of(conversation);
    for p in &conversation.probes {
        if p.source_message >= n {
            return Err(ReplayError::Conversation {
                id: conversation.id.clone(),
                problem: format!(
                    "probe {}, field source_message: {} is outside the conversation ({n} messages)",
                    p.id, p.source_message
                ),
            });
        }
        match p.asked_at {
            // Asked at every checkpoint after the message that holds its answer, while it
            // stands.
            None => {
                for &(at, percent) in marks.iter().filter(|(at, _)| *at > p.source_message && p.stands_at(*at)) {
                    checkpoints.entry(at).or_default().push((p, percent));
                }
            }
            // An answer key is asked on the request of the first call at or after its
            // checkpoint: the context the agent goes on with, after that call's compaction.
            Some(at) if p.is_written() => match first_call_from(conversation, at) {
                Some(call) => at_request.entry(call).or_default().push((p, share_of_calls(conversation, call))),
                None => checkpoints.entry(n).or_default().push((p, 100)),
            },
            Some(at) => {
                let at = at.min(n);
                checkpoints.entry(at).or_default().push((p, share_of_calls(conversation, at)));
            }
        }
    }
    // A strategy with per-conversation state (an external process) opens a session; the
    // session is the strategy for this conversation, and its fault fails the pair.
    let budget = Budget::new(settings.window);
    let session = match strategy {
        Compactor::Stateless(_) => None,
        Compactor::Sessions { sessions, .. } => {
            Some(sessions.begin(&conversation.id, &budget).map_err(ReplayError::Strategy)?)
        }
    };
    let fault = || session.as_ref().and_then(|s| s.fault());
    let strategy: &dyn Strategy = match &session {
        Some(s) => s.as_ref(),
        None => strategy.strategy(),
    };
    let exact = Exact::new(settings.encoding);
    std::thread::scope(|scope| {
        let mut r = Replayer::new(conversation, settings, strategy, summarizer, judge, scope, &exact);
        r.asker = asker;
        r.metrics.inapplicable_reason = strategy.can_operate(&budget).err();
        if let Some(probes) = checkpoints.get(&0) {
            within(Step::Judging, || r.ask(probes, 0));
        }
        r.recorded = Some(recorded);
        for (i, m) in conversation.messages.iter().enumerate() {
            let entry = recorded.entries[i].clone();
            if m.role == Role::Assistant {
                let thinking: u64 = m.thinking.iter().map(|b| r.exact.text_tokens(b.text())).sum();
                r.call(i, entry.tokens(&r.exact) + thinking);
                if let Some(fault) = fault() {
                    return Err(ReplayError::Strategy(fault));
                }
                if let Some(probes) = at_request.get(&i) {
                    // Counted as asked with the call's own message in: a rejected call ends
                    // the conversation before it, and its keys score as lost.
                    within(Step::Judging, || r.ask(probes, i + 1));
                }
            }
            // A summary the recorded agent wrote (see "Recorded compactions" above) enters the
            // context only for a strategy that sees recorded summaries.
            let hidden = m.meta_flag(compaction::message::COMPACT_SUMMARY) && !r.profile.sees_recorded_summaries;
            if !hidden {
                r.append(entry);
            }
            if m.role == Role::Assistant {
                r.length_stop = stopped_at_length(m);
            }
            if let Some(probes) = checkpoints.get(&(i + 1)) {
                within(Step::Judging, || r.ask(probes, i + 1));
            }
        }
        if let Some(session) = &session {
            session.close().map_err(ReplayError::Strategy)?;
        }
        Ok(r.finish(started))
    })
}

use runlog::settings::CHECKPOINTS;

fn stopped_at_length(m: &Message) -> bool {
    m.finish_reason.as_deref() == Some("length")
}

/// The state of one replay.
/// One checkpoint's probes, with what was true when they were asked.
struct Checkpoint<'a, 's> {
    /// The scores being made on their own thread, when the judge defers.
    pending: Option<std::thread::ScopedJoinHandle<'s, Vec<ProbeScore>>>,
    asked: Vec<(&'a Probe, u32)>,
    /// Recorded messages in.
    count: usize,
    /// Asked after the rejected call.
    ended: bool,
    /// Per probe: its source message is not in the context verbatim.
    at_risk: Vec<bool>,
    /// Per probe: the compaction rounds its source message went through before it was asked.
    rounds: Vec<u32>,
}

struct Replayer<'a, 's> {
    /// Where a deferring judge's checkpoints are scored while the replay goes on.
    scope: &'s std::thread::Scope<'s, 'a>,
    deferred: Vec<Checkpoint<'a, 's>>,
    conversation: &'a Conversation,
    settings: &'a ReplaySettings,
    strategy: &'a dyn Strategy,
    /// The strategy's harness hints ([`Strategy::profile`]), asked once.
    profile: Profile,
    summarizer: &'a dyn Summarizer,
    judge: &'a dyn Judge,
    exact: Exact,
    budget: Budget,
    /// The conversation's compaction: the context, the full history for a strategy that
    /// rebuilds from it, the masking progress and the proactive gate.
    compactor: compaction::Compactor<'a>,
    metrics: PairMetrics,
    /// Exact tokens of every recorded message appended so far.
    uncompacted: u64,
    /// Thinking tokens of the full history's current tool loop (what an uncompacted request
    /// carries besides `uncompacted`).
    uncompacted_thinking: u64,
    previous: Option<PreviousRequest>,
    /// The context before this call's first compaction: the previous request is its prefix.
    pre_compaction: Option<Context>,
    /// Identities of the previous request's structural violations.
    open_violations: BTreeSet<String>,
    checker: RequestChecker,
    /// The provider checks of the current request, one per [`Provider::ALL`], kept up to date
    /// like `checker`.
    providers: [IncrementalCheck; 2],
    /// Per provider: how many of its settled rejections were judged, and the rules of those
    /// charged to the strategy.
    provider_rules: [(usize, BTreeSet<RequestRule>); 2],
    /// Entries replaced in place since the previous request, before any compaction that
    /// rebuilt the context (index, the entry as the previous request had it): what the prefix
    /// cache compares with.
    edits: Vec<(usize, Entry)>,
    /// The last recorded assistant message stopped at its output limit.
    length_stop: bool,
    /// Index of the recorded assistant message of the first rejected call (`fail` only).
    rejected_at: Option<usize>,
    /// Tool-call ids the recording itself leaves unpaired ([`recording_faults`]): a violation
    /// or provider rejection on one of them is the recording's, charged to no strategy.
    recording_faults: HashSet<String>,
    /// The provider rules the whole recording breaks, with the recorded message that breaks
    /// each (a tau2 conversation that opens with the agent's greeting breaks Anthropic's
    /// `first_not_user` at message 1): a request breaking the same rule at the same recorded
    /// message is refused for the recording's sake, whatever the strategy did.
    recording_rejections: HashSet<(Provider, RequestRule, usize)>,
    /// Index of the most recent recorded user message typed by a person (the live request).
    live_request: Option<usize>,
    /// The current context lacks the live request (settled after each compaction).
    live_dropped: bool,
    /// The recorded user messages appended so far (what a summary's directives are checked
    /// against).
    user_messages: Vec<usize>,
    /// A person's words kept in tool results so far ([`crate::directives::person_words`]).
    person_words: Vec<String>,
    /// The recording holds thinking blocks: they are counted and their rule checked.
    thinking_in_use: bool,
    /// The latest recorded assistant message appended.
    last_assistant: Option<usize>,
    /// The recorded assistant message of every call that compacted, in order.
    compacted_at: Vec<usize>,
    /// The summarizer is a model (not the offline stand-in, which cannot invent an
    /// instruction): its summaries are checked for fabricated directives.
    summarizer_is_model: bool,
    /// The recorded assistant message of the call being made.
    calling: usize,
    /// What the recording held before each compaction's next action.
    tracker: next_action::Tracker,
    /// The next-action model, when agreement is measured.
    asker: Option<&'a dyn next_action::NextActionModel>,
    /// The conversation's entries and the offline judge's and summarizer's stores.
    recorded: Option<&'a Recorded>,
    /// Its answers being made on their own threads: (compaction event, answer).
    asking: Vec<(usize, std::thread::ScopedJoinHandle<'s, next_action::Asked>)>,
}

impl<'a, 's> Replayer<'a, 's> {
    fn new(
        conversation: &'a Conversation,
        settings: &'a ReplaySettings,
        strategy: &'a dyn Strategy,
        summarizer: &'a dyn Summarizer,
        judge: &'a dyn Judge,
        scope: &'s std::thread::Scope<'s, 'a>,
        meter: &'a Exact,
    ) -> Replayer<'a, 's> {
        Replayer {
            scope,
            conversation,
            settings,
            strategy,
            profile: strategy.profile(),
            summarizer,
            judge,
            exact: Exact::new(settings.encoding),
            budget: Budget::new(settings.window),
            compactor: compaction::Compactor::new(strategy, Budget::new(settings.window)).with_meter(meter),
            metrics: PairMetrics::default(),
            deferred: Vec::new(),
            uncompacted: 0,
            uncompacted_thinking: 0,
            previous: None,
            pre_compaction: None,
            open_violations: BTreeSet::new(),
            checker: RequestChecker::default(),
            providers: Provider::ALL.map(IncrementalCheck::new),
            provider_rules: Default::default(),
            edits: Vec::new(),
            length_stop: false,
            rejected_at: None,
            recording_faults: recording_faults(conversation),
            recording_rejections: recording_rejections(conversation),
            live_request: None,
            live_dropped: false,
            user_messages: Vec::new(),
            person_words: Vec::new(),
            compacted_at: Vec::new(),
            thinking_in_use: conversation.messages.iter().any(|m| !m.thinking.is_empty()),
            last_assistant: None,
            summarizer_is_model: summarizer.name() != "offline",
            calling: 0,
            tracker: next_action::Tracker::default(),
            asker: None,
            recorded: None,
            asking: Vec::new(),
        }
    }

    /// The recorded user message the agent is answering (the live request), when there is one.
    fn live_request(&self) -> Option<&'a Message> {
        self.live_request.map(|i| &self.conversation.messages[i])
    }

    /// Whether the context holds the live request, verbatim or as a copy of its text.
    /// A summary that carries the request (its text, or at least half of its content words:
    /// [`crate::directives::carries`]) holds it too: the agent still knows what was asked.
    fn holds_live_request(&self) -> bool {
        let (Some(at), Some(live)) = (self.live_request, self.live_request()) else { return true };
        self.compactor.context().entries().iter().rev().any(|e| {
            e.origin().verbatim_index() == Some(at)
                || (e.role() == Role::User && e.message().content == live.content)
                || (e.origin().is_summary() && crate::directives::carries(&live.content, &e.message().content))
        })
    }

    /// Record the user directives `summaries` state that no user message so far holds: those
    /// the offline reading finds and, with the LLM judge, those its grader lists.
    fn check_directives(&mut self, call: u32, summaries: &[String]) {
        // What a person said so far: their messages, and their words the recording keeps in
        // tool results (a rejection's reason, an answer to a question).
        let said: Vec<String> = self
            .user_messages
            .iter()
            .map(|i| self.conversation.messages[*i].content.clone())
            .chain(self.person_words.iter().cloned())
            .collect();
        for summary in summaries {
            let mut found = crate::directives::fabricated(summary, &said);
            // With the LLM judge, the grader's list too (a list it could not give is counted by
            // the judge; a cache miss or an endpoint fault counts against the pair as a probe's).
            match self.judge.list_directives(summary) {
                None => {}
                Some(Ok(listed)) => found.extend(crate::directives::fabricated_listed(summary, &listed, &said)),
                Some(Err(crate::judge::ListError::CacheMiss(_))) => self.metrics.cache_misses += 1,
                Some(Err(crate::judge::ListError::OverBudget(_))) => self.metrics.budget_refusals += 1,
                Some(Err(crate::judge::ListError::Endpoint(e))) => {
                    self.metrics.endpoint_failures += 1;
                    if self.metrics.endpoint_error.is_none() {
                        self.metrics.endpoint_error = Some(format!("directive list: {e}"));
                    }
                }
                Some(Err(crate::judge::ListError::Unreadable(_))) => {}
            }
            for d in found {
                let nearest = crate::directives::nearest(&d.text, &said).unwrap_or_default();
                self.metrics.fabricated_directives.push(runlog::record::FabricatedDirective {
                    call,
                    directive: d.text,
                    sentence: d.sentence,
                    nearest,
                });
            }
        }
    }

    /// The conversation has ended at a rejected call: nothing more is billed.
    fn ended(&self) -> bool {
        self.rejected_at.is_some()
    }

    fn append(&mut self, entry: Entry) {
        if entry.role() == Role::Assistant {
            self.last_assistant = entry.origin().recorded_index();
        }
        if let Some(words) = crate::directives::person_words(entry.message()) {
            self.person_words.push(words);
        }
        if is_live_request(entry.message()) {
            self.user_messages.extend(entry.origin().recorded_index());
            self.live_request = entry.origin().recorded_index();
            self.live_dropped = false;
        }
        self.uncompacted += entry.tokens(&self.exact);
        match entry.role() {
            Role::User => self.uncompacted_thinking = 0,
            Role::Assistant if self.thinking_in_use => {
                self.uncompacted_thinking +=
                    entry.message().thinking.iter().map(|b| self.exact.text_tokens(b.text())).sum::<u64>();
            }
            _ => {}
        }
        self.compactor.push(entry);
    }

    /// One model call producing recorded message `index`, whose size is `output_tokens`.
    fn call(&mut self, index: usize, output_tokens: u64) {
        let call = u32::try_from(self.metrics.calls).unwrap_or(u32::MAX);
        let events_before = self.metrics.compaction_events.len();
        self.calling = index;
        if call == 0 {
            // The thresholds on the first request's real context (a strategy's may depend on
            // the system prompt), as the report draws them.
            self.metrics.thresholds = self
                .strategy
                .thresholds(self.compactor.context(), &self.budget)
                .into_iter()
                .map(|(label, tokens)| (label.to_string(), tokens))
                .collect();
        }
        let (check_tokens, check_estimate) =
            if self.strategy.threshold(self.compactor.context(), &self.budget).is_some() {
                (self.compactor.context().tokens(&self.exact), self.strategy.estimate(self.compactor.context()))
            } else {
                (0, 0)
            };
        self.pre_compaction = None;
        self.edits.clear();
        // A strategy that rebuilds from history starts the request from it.
        self.compactor.next_request();
        let length_stop = std::mem::take(&mut self.length_stop);
        let after_length_stop = length_stop
            && self.strategy.reacts_to(Trigger::LengthStop)
            && within(Step::Compaction, || self.compact(Trigger::LengthStop, call));
        if !after_length_stop {
            within(Step::Compaction, || self.compact(Trigger::Proactive, call));
        }
        let window = self.settings.window;
        let mut attempts = 0;
        while attempts < MAX_REACTIVE_ATTEMPTS
            && self.compactor.context().tokens(&self.exact) > window
            && self.strategy.reacts_to(Trigger::Overflow)
        {
            attempts += 1;
            if !within(Step::Compaction, || self.compact(Trigger::Overflow, call)) {
                break;
            }
        }

        let tokens = self.compactor.context().tokens(&self.exact) + self.loop_thinking_tokens();
        let overflow = tokens > window;
        let refused = within(Step::ProviderChecks, || {
            self.check_request();
            self.check_providers()
        });
        if self.metrics.compaction_events.len() > events_before || self.live_dropped {
            self.live_dropped = !self.holds_live_request();
        }
        if self.metrics.compaction_events.len() > events_before {
            self.ask_next_action(index);
        }
        self.metrics.latest_user_message_dropped += u64::from(self.live_dropped);
        let share = self.prefix_share();
        let cached = self.settings.cache.cached_tokens(&share).min(tokens);
        let written = cache_writes(self.settings.cache, tokens, cached);
        self.previous = Some(PreviousRequest {
            len: self.compactor.context().len(),
            tokens,
            system_tokens: self.compactor.context().system_prompt().map(|e| e.tokens(&self.exact)),
            breakpoints: self.breakpoints(),
        });
        self.pre_compaction = None;
        self.edits.clear();

        // The target provider (the one the experiment names) refuses the request: it fails as
        // an over-window request does.
        let target = self.settings.cache.provider();
        let refused_by_target = refused.into_iter().find(|(p, _)| Some(*p) == target).map(|(_, rules)| rules);
        let billed = if self.ended() {
            false
        } else if (overflow || refused_by_target.is_some()) && self.settings.overflow == OverflowPolicy::Fail {
            self.rejected_at = Some(index);
            self.metrics.first_rejected_call = Some(call);
            self.metrics.rejected_because = Some(match refused_by_target {
                Some(rules) if !overflow => rules.join(";"),
                Some(rules) => format!("window;{}", rules.join(";")),
                None => "window".to_string(),
            });
            false
        } else {
            true
        };
        let m = &mut self.metrics;
        m.calls += 1;
        m.overflows += u64::from(overflow);
        m.peak_tokens = m.peak_tokens.max(tokens);
        if billed {
            m.input_tokens += tokens;
            m.cached_tokens += cached;
            m.cache_write_tokens += written;
            m.output_tokens += output_tokens;
            m.uncompacted_input_tokens += self.uncompacted + self.uncompacted_thinking;
        }
        if m.compaction_events.len() > events_before {
            self.compacted_at.push(index);
        }
        m.timeline.push(CallPoint {
            call,
            message_index: index,
            request_tokens: tokens,
            estimate: self.strategy.estimate(self.compactor.context()),
            cached_tokens: cached,
            compacted: m.compaction_events.len() > events_before,
            overflow,
            check_tokens,
            check_estimate,
        });
    }

    /// A summary the strategy did not ask the summarizer for (`recorded`: the recorded agent's
    /// own) was still a model call: the context it replaced (`replaced` tokens) as input, the
    /// summary (`written`) as output ([`recorded_summary_tokens`]).
    fn bill_recorded_summary(&mut self, replaced: u64, written: u64) {
        self.metrics.summarizer_calls += 1;
        // After a rejected call the conversation has ended: counted, not billed.
        if self.ended() {
            return;
        }
        self.metrics.summarizer_input_tokens += replaced;
        self.metrics.summarizer_output_tokens += written;
    }

    /// Compact for `trigger` (for [`Trigger::Proactive`], only when the strategy says so)
    /// through the kernel's [`compaction::Compactor`], and count and record what it did; true
    /// when the context changed. A strategy's masking-only compaction is done in place
    /// ([`compaction::masking`]): the same compaction, at the cost of what it masks.
    fn compact(&mut self, trigger: Trigger, call: u32) -> bool {
        let ended = self.ended();
        let tokens_before = self.compactor.source().tokens(&self.exact);
        let (summarizer, metrics) = (self.summarizer, &mut self.metrics);
        let store = self.recorded.map(Recorded::summarizer);
        let compaction::compactor::Outcome { compaction, replaced } = self
            .compactor
            .compact(trigger, |ctx, requests| summarize_plan((summarizer, store), ctx, requests, ended, metrics));
        let Some(c) = compaction else {
            self.context_replaced(replaced);
            return false;
        };
        if let Path::Plan { plan, replanned } = &c.path {
            // The recorded agent's own summary was a model call the replay never made: billed
            // here. (An external program's summaries were made, and billed, through the
            // summarizer.)
            let source = if c.from_history { self.compactor.history() } else { replaced.as_ref() };
            let recorded_summary = source
                .filter(|_| {
                    plan.requests.is_empty() && !c.event.summaries.is_empty() && self.profile.sees_recorded_summaries
                })
                .map(|source| recorded_summary_tokens(source, &self.exact, plan, &c.event));
            if *replanned {
                self.metrics.summarizer_context_retries += 1;
            }
            let model_written = recorded_summary.is_some() || self.summarizer_is_model;
            if let Some((replaced, written)) = recorded_summary {
                self.bill_recorded_summary(replaced, written);
            }
            if model_written {
                self.check_directives(call, &c.event.summaries);
            }
        }
        self.context_replaced(replaced);
        for v in &c.violations {
            if !is_structural(v.kind()) {
                self.count(v.kind());
            }
        }
        let tokens_after = self.compactor.context().tokens(&self.exact);
        let record =
            CompactionRecord::from_event(call, c.trigger, &c.event, (tokens_before, tokens_after), &c.violations);
        self.metrics.compactions += 1;
        self.metrics.compaction_events.push(record);
        if let Path::InPlace { replaced: edits, .. } = c.path {
            // Roles, call ids and summaries are as they were: the structural checker stands. A
            // provider's check reads the text of messages other than tool results.
            if edits.iter().any(|(_, old)| old.role() != Role::Tool) {
                self.providers = Provider::ALL.map(IncrementalCheck::new);
                self.provider_rules = Default::default();
            }
            if self.pre_compaction.is_none() {
                self.edits.extend(edits);
            }
        }
        self.read_next_action();
        !c.event.is_noop()
    }

    /// The compactor replaced its context whole (`replaced` is the one it held): the
    /// incremental checks start again from the new one, and the first context replaced in a
    /// call is what the prefix cache compares with.
    fn context_replaced(&mut self, replaced: Option<Context>) {
        let Some(before) = replaced else { return };
        if self.pre_compaction.is_none() {
            self.pre_compaction = Some(before);
        }
        self.checker.reset();
        self.providers = Provider::ALL.map(IncrementalCheck::new);
        self.provider_rules = Default::default();
    }

    /// Read the call's recorded action against the context the last compaction left.
    fn read_next_action(&mut self) {
        let live = self.live_request();
        let action = self.tracker.score(self.conversation, self.calling, live, self.compactor.context());
        if let Some(e) = self.metrics.compaction_events.last_mut() {
            e.next_action = Some(action);
        }
    }

    /// Ask the next-action model, beside the replay, for the action of recorded message
    /// `index` with the context this call's compactions left (the request); recorded on the
    /// call's last compaction. Not asked after the rejected call: the agent has nothing.
    fn ask_next_action(&mut self, index: usize) {
        let Some(asker) = self.asker else { return };
        if self.ended() {
            return;
        }
        let event = self.metrics.compaction_events.len() - 1;
        let (conversation, ctx) = (self.conversation, self.compactor.context().clone());
        let pending = self.scope.spawn(move || asker.ask(conversation, index, &ctx));
        self.asking.push((event, pending));
    }

    /// Collect the next-action answers onto their compactions, counting failed requests
    /// against the pair as a summary's or a probe's.
    fn collect_next_actions(&mut self) {
        for (event, pending) in std::mem::take(&mut self.asking) {
            let asked = match within(Step::Judging, || pending.join()) {
                Ok(asked) => asked,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            let m = &mut self.metrics;
            m.cache_misses += asked.cache_misses;
            m.endpoint_failures += asked.endpoint_failures;
            if let (None, Some(e)) = (&m.endpoint_error, asked.endpoint_error) {
                m.endpoint_error = Some(format!("next action: {e}"));
            }
            if let Some(e) = m.compaction_events.get_mut(event) {
                e.agreement = Some(asked.agreement);
            }
        }
    }

    /// Ask `probes` now, `count` recorded messages in, each with its checkpoint's percentage.
    fn ask(&mut self, asked: &[(&'a Probe, u32)], count: usize) {
        // Asked after the rejected call (its recorded message is not in the conversation the
        // agent had): the agent has nothing.
        let ended = self.rejected_at.is_some_and(|at| count > at);
        let verbatim: HashSet<usize> =
            self.compactor.context().entries().iter().filter_map(|e| e.origin().verbatim_index()).collect();
        // An answer key is at risk when none of its source messages is in verbatim.
        let at_risk: Vec<bool> = asked
            .iter()
            .map(|(p, _)| {
                if p.is_written() {
                    !p.sources().iter().any(|s| verbatim.contains(s))
                } else {
                    !verbatim.contains(&p.source_message)
                }
            })
            .collect();
        // Calls that compacted after the source message was in: its rounds.
        let marks = &self.compacted_at;
        let rounds: Vec<u32> = asked
            .iter()
            .map(|(p, _)| {
                let after = marks.len() - marks.partition_point(|m| *m <= p.source_message);
                u32::try_from(after).unwrap_or(u32::MAX)
            })
            .collect();
        let checkpoint = Checkpoint { pending: None, asked: asked.to_vec(), count, ended, at_risk, rounds };
        let probes: Vec<&'a Probe> = asked.iter().map(|(p, _)| *p).collect();
        if self.judge.defers() {
            // Scored on its own thread while the replay goes on (see `Judge::defers`).
            let (judge, conversation, ctx) = (self.judge, self.conversation, self.compactor.context().clone());
            let store = self.recorded.map(Recorded::judge);
            let pending = self.scope.spawn(move || judge.score_checkpoint_with(conversation, &ctx, &probes, store));
            self.deferred.push(Checkpoint { pending: Some(pending), ..checkpoint });
            return;
        }
        let store = self.recorded.map(Recorded::judge);
        let scores = self.judge.score_checkpoint_with(self.conversation, self.compactor.context(), &probes, store);
        self.record_scores(&checkpoint, scores);
    }

    /// Collect the deferred checkpoints' scores, in order.
    fn score_deferred(&mut self) {
        for mut checkpoint in std::mem::take(&mut self.deferred) {
            let scores =
                match within(Step::Judging, || checkpoint.pending.take().map(std::thread::ScopedJoinHandle::join)) {
                    Some(Ok(scores)) => scores,
                    Some(Err(panic)) => std::panic::resume_unwind(panic),
                    None => Vec::new(),
                };
            self.record_scores(&checkpoint, scores);
        }
    }

    fn record_scores(&mut self, checkpoint: &Checkpoint<'a, 's>, mut scores: Vec<ProbeScore>) {
        let Checkpoint { asked, count, ended, at_risk, rounds, .. } = checkpoint;
        self.metrics.probe_compactions.extend(rounds.iter().take(scores.len()));
        let (count, ended) = (*count, *ended);
        for ((s, (probe, percent)), risk) in scores.iter_mut().zip(asked).zip(at_risk) {
            s.asked_at = count;
            s.written = probe.is_written();
            s.checkpoint = *percent;
            s.at_risk = *risk;
            if crate::judge::llm::missed_cache(s) {
                self.metrics.cache_misses += 1;
            }
            if s.verdict.over_budget() {
                self.metrics.budget_refusals += 1;
            }
            if let Some(error) = crate::judge::llm::endpoint_fault(s) {
                self.metrics.endpoint_failures += 1;
                if self.metrics.endpoint_error.is_none() {
                    self.metrics.endpoint_error = Some(format!("probe: {error}"));
                }
            }
            if ended {
                s.if_sent = Some(s.score);
                s.score = 0.0;
                s.at_risk = true;
                s.facts.iter_mut().for_each(|f| *f = runlog::record::FoundIn::Lost);
            }
        }
        self.metrics.probes.extend(scores);
    }

    fn finish(mut self, started: Instant) -> PairMetrics {
        self.score_deferred();
        self.collect_next_actions();
        let m = &mut self.metrics;
        m.final_tokens = self.compactor.context().tokens(&self.exact);
        // Probes the LLM judge could not score (no parseable verdict) stay in `probes` but out
        // of the means: their placeholder 0 is not a score.
        // The headline figures are over critical and useful probes; `detail` is reported apart.
        // Answer keys are state retention, reported on their own ([`ProbeScore::written`]).
        let scored =
            || m.probes.iter().filter(|p| !p.written && runlog::record::is_scored(p) && p.tier().in_headline());
        m.retention = mean(scored().map(|p| p.score));
        m.retention_if_sent = mean(scored().map(|p| p.if_sent.unwrap_or(p.score)));
        m.at_risk_retention = mean(scored().filter(|p| p.at_risk).map(|p| p.score));
        if let Some(price) = self.settings.price {
            let s_price = self.summarizer.price().unwrap_or(price);
            let summaries =
                s_price.cost(m.summarizer_input_tokens, m.summarizer_cached_tokens, m.summarizer_output_tokens);
            m.cost_usd = Some(
                price.cost_with_writes(m.input_tokens, m.cached_tokens, m.cache_write_tokens, m.output_tokens)
                    + summaries,
            );
            m.summary_cost_usd = Some(summaries);
        }
        next_action::settle(m);
        if self.asker.is_some() {
            next_action::settle_agreement(m);
        }
        m.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.metrics
    }
}

/// Summarize every request, counting calls, tokens and failures in `metrics`;
/// `too_long` is set when a summary was rejected as over the summarizer's context window.
/// `ended`: a call was already rejected, so the summaries are counted but not billed.
fn summarize_plan(
    (summarizer, store): (&dyn Summarizer, Option<&crate::summarize::offline::Store>),
    ctx: &Context,
    requests: &[compaction::SummaryRequest],
    ended: bool,
    metrics: &mut PairMetrics,
) -> Summaries {
    let mut outcomes: Vec<SummaryOutcome> = Vec::with_capacity(requests.len());
    let mut context_length = false;
    for request in requests {
        metrics.summarizer_calls += 1;
        match within(Step::Summaries, || summarizer.summarize_with_store(ctx, request, store)) {
            Ok(s) => {
                // An empty or whitespace-only answer is no summary, even where the strategy's
                // document takes whatever the model wrote (it gets the empty text then).
                if s.text.trim().is_empty() {
                    metrics.summarizer_failures += 1;
                }
                // After a rejected call the conversation has ended: the summary is made
                // only for the figures as if every request had been sent, and not billed.
                if !ended {
                    metrics.summarizer_input_tokens += s.input_tokens;
                    metrics.summarizer_cached_tokens += s.cached_tokens.min(s.input_tokens);
                    metrics.summarizer_output_tokens += s.output_tokens;
                }
                outcomes.push(Ok(s.text));
            }
            Err(e) => {
                metrics.summarizer_failures += 1;
                match e.kind {
                    FailureKind::ContextLength => context_length = true,
                    FailureKind::CacheMiss => metrics.cache_misses += 1,
                    FailureKind::Budget => metrics.budget_refusals += 1,
                    FailureKind::Endpoint => {
                        metrics.endpoint_failures += 1;
                        if metrics.endpoint_error.is_none() {
                            metrics.endpoint_error = Some(format!("summary: {}", e.failure.reason));
                        }
                    }
                    FailureKind::Other => {}
                }
                outcomes.push(Err(e.failure));
            }
        }
    }
    Summaries { outcomes, too_long: context_length }
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cache_profiles() {
        let share = |shared, previous, whole, system| PrefixShare {
            shared_tokens: shared,
            previous_tokens: previous,
            whole_previous: whole,
            system_tokens: system,
            strategy_breakpoint: None,
        };
        let all = share(3_100, 3_100, true, Some(1_100));
        assert_eq!(CacheProfile::Openai.cached_tokens(&all), 3_072);
        assert_eq!(CacheProfile::Anthropic.cached_tokens(&all), 3_100);
        assert_eq!(CacheProfile::None.cached_tokens(&all), 0);
        // A prefix that stops inside the previous request, past the system prompt.
        let part = share(2_000, 3_100, false, Some(1_100));
        assert_eq!(CacheProfile::Openai.cached_tokens(&part), 1_920);
        assert_eq!(CacheProfile::Anthropic.cached_tokens(&part), 1_100);
        // Below the minimums.
        assert_eq!(CacheProfile::Openai.cached_tokens(&share(1_023, 1_023, true, None)), 0);
        assert_eq!(CacheProfile::Openai.cached_tokens(&share(1_024, 1_024, true, None)), 1_024);
        assert_eq!(CacheProfile::Anthropic.cached_tokens(&share(1_023, 1_023, true, None)), 0);
        assert_eq!(CacheProfile::Anthropic.cached_tokens(&share(900, 3_000, false, Some(900))), 0);
        assert_eq!(CacheProfile::Anthropic.cached_tokens(&share(0, 3_000, false, None)), 0);
        // A strategy's own breakpoint inside the shared prefix is what is read.
        let own = PrefixShare { strategy_breakpoint: Some(2_500), ..part };
        assert_eq!(CacheProfile::Anthropic.cached_tokens(&own), 2_500);
        assert_eq!(CacheProfile::Openai.cached_tokens(&own), 1_920, "OpenAI caches by prefix, not breakpoints");
        let small = PrefixShare { strategy_breakpoint: Some(1_000), ..all };
        assert_eq!(CacheProfile::Anthropic.cached_tokens(&small), 0);
    }
}
