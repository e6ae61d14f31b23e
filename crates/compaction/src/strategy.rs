//! The strategy interface: a trigger, a pure `plan`, and a pure `apply`.
//!
//! A strategy never calls a model. The caller asks [`Strategy::should_compact`], gets a
//! [`Plan`] from [`Strategy::plan`], produces every [`SummaryRequest`] of the plan with any
//! summarizer (an LLM, or an offline one), and hands the outcomes to [`Strategy::apply`],
//! which builds the new [`Context`] and a [`CompactionEvent`].

use serde::{Deserialize, Serialize};

use crate::context::{Context, Entry, Inserted, Origin};
use crate::invariants::ViolationKind;
use crate::message::{Message, Role};
use crate::tokens::TokenCounter;

/// What the caller knows about the model's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// The model's context window, in tokens.
    pub context_window: u64,
}

impl Budget {
    /// The budget of a model with this window (in tokens).
    pub fn new(context_window: u64) -> Budget {
        Budget { context_window }
    }
}

/// Why compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The strategy's own threshold was crossed before a call.
    Proactive,
    /// The provider rejected the request as too long (or would have): forced compaction.
    Overflow,
    /// The previous response stopped at its output limit (`finish_reason = length`).
    LengthStop,
}

impl Trigger {
    /// The name used in files and reports (`proactive`, `overflow`).
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Proactive => "proactive",
            Trigger::Overflow => "overflow",
            Trigger::LengthStop => "length_stop",
        }
    }
}

/// Which prompt a summary request calls for. Each seed has its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PromptKind {
    /// 000, paper mode: mid-stage summary for the current stage.
    PaperMidStage {
        /// The stage being summarized.
        stage: String,
    },
    /// 000, general chat: short bullet summary.
    GeneralChat,
    /// 001: "Session Summary (Compaction Round N)", integrating the previous summary.
    SessionSummary,
    /// 002: progressive summary of the compacted range.
    Progressive,
    /// 002: prefix of a split turn ("Turn Context (split turn)").
    SplitTurnPrefix,
    /// 003: the `[COMPACT SUMMARY]` summary.
    CompactSummary,
    /// 004: continuation prompt with its sections.
    Continuation,
    /// OpenCode: the anchored summary (Objective ... Relevant Files), merged with the previous one.
    OpencodeAnchored,
    /// Codex CLI: the handoff summary over the whole history.
    CodexHandoff,
    /// Goose: the six-section compaction template.
    GooseCompaction,
    /// OpenHands LLMSummarizingCondenser: the forgotten events with the previous summary.
    OpenhandsCondensation,
    /// Anthropic server-side compaction: the summary that replaces everything before it.
    AnthropicCompaction,
    /// LangChain SummarizationMiddleware: the default summary prompt.
    LangchainSummary,
    /// Letta sliding window: the summary of the evicted messages.
    LettaSummary,
    /// An external strategy's own request: its instructions, over the messages it sent.
    External {
        /// The strategy's instructions to the summarizer.
        instructions: String,
    },
}

impl PromptKind {
    /// The name of the prompt (`handoff`, `paper_mid_stage`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            PromptKind::PaperMidStage { .. } => "paper_mid_stage",
            PromptKind::GeneralChat => "general_chat",
            PromptKind::SessionSummary => "session_summary",
            PromptKind::Progressive => "progressive",
            PromptKind::SplitTurnPrefix => "split_turn_prefix",
            PromptKind::CompactSummary => "compact_summary",
            PromptKind::Continuation => "continuation",
            PromptKind::OpencodeAnchored => "opencode_anchored",
            PromptKind::CodexHandoff => "codex_handoff",
            PromptKind::GooseCompaction => "goose_compaction",
            PromptKind::OpenhandsCondensation => "openhands_condensation",
            PromptKind::AnthropicCompaction => "anthropic_compaction",
            PromptKind::LangchainSummary => "langchain_summary",
            PromptKind::LettaSummary => "letta_summary",
            PromptKind::External { .. } => "external",
        }
    }
}

/// A span of the context the caller must summarize.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRequest {
    /// Indices into the current context of the entries to summarize, in order.
    pub span: Vec<usize>,
    /// Which prompt the summarizer uses.
    pub prompt: PromptKind,
    /// The previous summary to integrate, if the strategy chains summaries.
    pub previous: Option<String>,
    /// The original user task, for prompts that restate it.
    pub task: Option<String>,
    /// Upper bound on the summary's length, in tokens (the API's output cap).
    pub max_tokens: u32,
    /// The length the prompt itself asks for, in tokens, when the document states one below
    /// `max_tokens` (001's prompt says "Maximum 800 tokens" under a 1,000-token cap).
    #[serde(default)]
    pub target_tokens: Option<u32>,
    /// The length the prompt asks for in characters, when the document states it that way
    /// (000's "Max 500 karakter total").
    #[serde(default)]
    pub target_chars: Option<u32>,
    /// How the document cuts the span's messages before they reach the summarizer. Every
    /// summarizer (the LLM path and the offline one) reads the span through these cuts.
    #[serde(default)]
    pub input: InputCuts,
    /// The compaction round this summary belongs to (1 for the first).
    pub round: u32,
}

impl SummaryRequest {
    /// A request for `span` with no previous summary, task, target or input cuts.
    pub fn new(span: Vec<usize>, prompt: PromptKind, max_tokens: u32, round: u32) -> SummaryRequest {
        SummaryRequest {
            span,
            prompt,
            previous: None,
            task: None,
            max_tokens,
            target_tokens: None,
            target_chars: None,
            input: InputCuts::default(),
            round,
        }
    }
}

/// How a document cuts messages before summarizing them: a message's text (its content with
/// its tool calls written out) to `message_chars` characters, a tool result's content to
/// `tool_result_chars` characters. `None` passes the text whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct InputCuts {
    #[serde(default)]
    /// Keep the first this many characters of every message, if set.
    pub message_chars: Option<usize>,
    #[serde(default)]
    /// Keep the first this many characters of every tool result, if set.
    pub tool_result_chars: Option<usize>,
}

impl InputCuts {
    /// No cut: the span as it is (000, 002, 003).
    pub const NONE: InputCuts = InputCuts { message_chars: None, tool_result_chars: None };

    /// `text` cut to its first `n` characters when `n` is set and the text is longer; the
    /// second value says whether it was cut.
    pub fn first_chars(text: &str, n: Option<usize>) -> (&str, bool) {
        match n.and_then(|n| text.char_indices().nth(n)) {
            Some((i, _)) => (&text[..i], true),
            None => (text, false),
        }
    }

    /// `message` as the summarizer sees it: a tool result's content cut to
    /// `tool_result_chars`; any other message's content cut to `message_chars`, and its tool
    /// calls kept only while the text written so far (content, then one line per call) is
    /// within `message_chars`, as a transcript cut at that length would show them.
    pub fn apply<'m>(&self, message: &'m Message) -> std::borrow::Cow<'m, Message> {
        use std::borrow::Cow;
        if message.role == Role::Tool {
            return match Self::first_chars(&message.content, self.tool_result_chars) {
                (_, false) => Cow::Borrowed(message),
                (head, true) => {
                    let mut m = message.clone();
                    m.content = head.to_string();
                    Cow::Owned(m)
                }
            };
        }
        let Some(n) = self.message_chars else { return Cow::Borrowed(message) };
        let (head, cut) = Self::first_chars(&message.content, Some(n));
        let mut used = head.chars().count();
        let mut calls = 0;
        for c in &message.tool_calls {
            // "\n[Tool: name(args)]"
            let len = 10 + c.name.chars().count() + c.arguments.chars().count();
            if cut || used + len > n {
                break;
            }
            used += len;
            calls += 1;
        }
        if !cut && calls == message.tool_calls.len() {
            return Cow::Borrowed(message);
        }
        let mut m = message.clone();
        m.content = head.to_string();
        m.tool_calls.truncate(calls);
        Cow::Owned(m)
    }
}

/// Why a summary could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("summary failed: {reason}")]
pub struct SummaryFailure {
    /// What went wrong, in words.
    pub reason: String,
}

/// A summarizer's answer to one request.
pub type SummaryOutcome = Result<String, SummaryFailure>;

/// One piece of the context a plan builds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "slot", rename_all = "snake_case")]
pub enum Slot {
    /// Entry `index` of the current context, unchanged.
    Keep {
        /// The entry of the current context.
        index: usize,
    },
    /// Entry `index` with its content replaced by `placeholder` (tool calls, ids kept).
    Mask {
        /// The entry of the current context.
        index: usize,
        /// The text that replaces its content.
        placeholder: String,
    },
    /// A new message holding the text of summary request `request`, as
    /// `prefix + summary + suffix`, with `role`.
    Summary {
        /// The summary request whose text it holds.
        request: usize,
        /// The role of the new message.
        role: Role,
        /// Text before the summary.
        prefix: String,
        /// Text after the summary.
        suffix: String,
    },
    /// A new literal message.
    Insert {
        /// The message (boxed: a layout holds a slot per entry, and most are a bare index).
        message: Box<Message>,
        /// What it is.
        what: Inserted,
    },
}

impl Slot {
    /// A [`Slot::Insert`] of `message`.
    pub fn insert(message: Message, what: Inserted) -> Slot {
        Slot::Insert { message: Box::new(message), what }
    }
}

/// What to do when a summary the plan needs fails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "on_failure", rename_all = "snake_case")]
pub enum Fallback {
    /// Return the context unchanged (001).
    Unchanged,
    /// Build this layout instead (003's truncation, 004's pruned context, 000's brute prune).
    Layout {
        /// The failure path's name, kept with the event.
        label: String,
        /// The layout to build.
        layout: Vec<Slot>,
    },
}

/// A compaction decided, waiting for its summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// What the plan was made for.
    pub trigger: Trigger,
    /// The new context, slot by slot.
    pub layout: Vec<Slot>,
    /// The summaries the layout needs, produced by the caller.
    pub requests: Vec<SummaryRequest>,
    /// What happens when a summary fails.
    pub fallback: Fallback,
    /// Which step of the strategy decided this (for example `P2` or `prune`).
    pub step: String,
    /// Strategy-specific notes kept with the event (cut index, covered turns, ...).
    #[serde(default)]
    pub notes: serde_json::Map<String, serde_json::Value>,
}

impl Plan {
    /// A plan with no summary: drop, mask and insert only.
    pub fn deterministic(trigger: Trigger, step: impl Into<String>, layout: Vec<Slot>) -> Plan {
        Plan {
            trigger,
            layout,
            requests: Vec::new(),
            fallback: Fallback::Unchanged,
            step: step.into(),
            notes: serde_json::Map::new(),
        }
    }
}

/// What one compaction did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionEvent {
    /// The strategy's name.
    pub strategy: String,
    /// What the compaction was made for.
    pub trigger: Trigger,
    /// Which step of the strategy decided it.
    pub step: String,
    /// The strategy's own estimate before and after.
    pub estimate_before: u64,
    /// The strategy's own estimate after.
    pub estimate_after: u64,
    /// Entries before.
    pub messages_before: usize,
    /// Entries after.
    pub messages_after: usize,
    /// Entries of the old context that are not in the new one in any form.
    pub removed: usize,
    /// Entries whose content was replaced by a placeholder.
    pub masked: usize,
    /// The summary texts inserted, in order.
    pub summaries: Vec<String>,
    /// The summary round reached, if a summary was inserted.
    pub round: Option<u32>,
    /// Set when a summary failed and the strategy's failure path ran.
    pub fallback: Option<String>,
    /// Tokens still over the strategy's target after compaction (its own estimate), if any.
    pub shortfall: Option<u64>,
    /// The plan's strategy-specific notes.
    pub notes: serde_json::Map<String, serde_json::Value>,
}

impl CompactionEvent {
    /// True when the compaction changed nothing.
    pub fn is_noop(&self) -> bool {
        self.removed == 0
            && self.masked == 0
            && self.summaries.is_empty()
            && self.messages_before == self.messages_after
    }
}

/// The result of [`Strategy::apply`].
#[derive(Debug, Clone)]
pub struct Compacted {
    /// The new context.
    pub context: Context,
    /// What the compaction did.
    pub event: CompactionEvent,
}

/// Tells the conformance checker what a strategy promises.
#[derive(Debug, Clone, Default)]
pub struct Promises {
    /// The system prompt stays byte-identical at position 0.
    pub keeps_system_prompt: bool,
    /// How many trailing entries the strategy keeps verbatim, for this context and budget.
    pub recent_window: usize,
    /// Invariants the strategy's own document breaks on purpose (reported, not failed).
    pub documented_deviations: Vec<ViolationKind>,
}

/// A compaction strategy. Implementations are stateless: everything they need to know about
/// earlier compactions is in the context (summaries carry their round and coverage).
pub trait Strategy: Send + Sync {
    /// The strategy's name (`keep-last-n`, ...).
    fn name(&self) -> &'static str;
    /// The token estimator the strategy's own document uses.
    fn estimator(&self) -> &dyn TokenCounter;
    /// The strategy's estimate of the request, as its document computes it.
    fn estimate(&self, ctx: &Context) -> u64 {
        ctx.tokens(self.estimator())
    }
    /// The estimate above which the strategy compacts proactively (`None`: never).
    fn threshold(&self, ctx: &Context, budget: &Budget) -> Option<u64>;
    /// Every trigger threshold the strategy checks, each with a short label, lowest first
    /// (what a report draws as lines). Default: the one [`Strategy::threshold`], labelled
    /// `trigger`; a strategy with several staged thresholds lists each.
    fn thresholds(&self, ctx: &Context, budget: &Budget) -> Vec<(&'static str, u64)> {
        self.threshold(ctx, budget).map(|t| ("trigger", t)).into_iter().collect()
    }
    /// Whether the strategy can operate at `budget`'s window, and why not: `Err` names the
    /// parameter that makes it impossible (an output reserve or a protected tail at least the
    /// window, a trigger threshold it can never reach before the request overflows). A
    /// configuration that cannot operate is reported as inapplicable and never ranked: it was
    /// never able to run. The default: a proactive threshold (on an empty context) above the
    /// window can never fire on a request that fits (one at the window fires on the request
    /// that overflows it, as `letta` and `openhands` do by design).
    fn can_operate(&self, budget: &Budget) -> Result<(), String> {
        match self.threshold(&Context::new(), budget) {
            Some(t) if t > budget.context_window => Err(format!(
                "its trigger threshold ({t} tokens) is above the window ({}): it can never fire on a request that fits",
                budget.context_window
            )),
            _ => Ok(()),
        }
    }
    /// The condition [`Strategy::can_operate`] checks, in words, for `compactbench strategies`.
    fn operating_condition(&self) -> &'static str {
        "its trigger threshold, if it has one, is at most the window"
    }
    /// The strategy's proactive trigger.
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        self.threshold(ctx, budget).is_some_and(|t| self.estimate(ctx) > t)
    }
    /// Whether the strategy reacts to `trigger` when it is not proactive.
    fn reacts_to(&self, trigger: Trigger) -> bool {
        matches!(trigger, Trigger::Overflow)
    }
    /// Decide what to do. `None` means nothing to do (below threshold, or nothing compactable).
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan>;
    /// [`Strategy::plan`] for a strategy that needs summaries while it decides (a process
    /// speaking the external-strategy protocol asks for them before it answers): `summarize`
    /// makes one, as the caller makes a plan's requests. The built-in strategies decide first
    /// and ask after, in [`Plan::requests`]; for them this is `plan`.
    fn plan_with(
        &self,
        ctx: &Context,
        budget: &Budget,
        trigger: Trigger,
        summarize: &mut dyn FnMut(&Context, &SummaryRequest) -> SummaryOutcome,
    ) -> Option<Plan> {
        let _ = summarize;
        self.plan(ctx, budget, trigger)
    }
    /// A strategy with state per conversation (an external process) opens a session for one
    /// conversation: the value to compact that conversation with, or `Ok(None)` to use `self`
    /// (every built-in strategy: they are stateless). `Err` says why the session could not
    /// start.
    fn begin(&self, conversation: &str, budget: &Budget) -> Result<Option<Box<dyn Strategy + '_>>, String> {
        let _ = (conversation, budget);
        Ok(None)
    }
    /// A fault that ends the conversation for this strategy (an external process that crashed,
    /// hung or broke the protocol), with what it said; `None` for every built-in strategy.
    fn fault(&self) -> Option<String> {
        None
    }
    /// The plan [`Strategy::plan`] would make for `trigger`, as masks done in place, when that
    /// plan only masks ([`crate::masking`]): the same compaction at the cost of what changed.
    /// `settled` is the [`MaskPlan::settled`](crate::masking::MaskPlan::settled) of the
    /// previous answer on this context (grown since by appends and by those masks only), or 0:
    /// no entry before it needs looking at. For [`Trigger::Proactive`] the answer is
    /// [`MaskAnswer::Nothing`](crate::masking::MaskAnswer::Nothing) when
    /// [`Strategy::should_compact`] says no. The default,
    /// [`MaskAnswer::Unsupported`](crate::masking::MaskAnswer::Unsupported), sends the caller
    /// to `plan`.
    fn plan_masks(
        &self,
        ctx: &Context,
        budget: &Budget,
        trigger: Trigger,
        settled: usize,
    ) -> crate::masking::MaskAnswer {
        let _ = (ctx, budget, trigger, settled);
        crate::masking::MaskAnswer::Unsupported
    }
    /// Build the new context from a plan and the summaries the caller produced, one per request.
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        apply_layout(self, ctx, budget, plan, summaries)
    }
    /// What the conformance checker may hold the strategy to.
    fn promises(&self, ctx: &Context, budget: &Budget) -> Promises;
    /// Provider request rules ([`crate::check_request`]) the strategy's own document breaks
    /// as written, with its parameters: a finding about the document, stated in the
    /// strategy's module header. The conformance suite holds every other strategy to every
    /// rule of both providers.
    fn documented_rejections(&self) -> Vec<(crate::request::Provider, crate::request::RequestRule)> {
        Vec::new()
    }
    /// Whether summaries the recorded agent wrote (messages flagged `meta.compact_summary`)
    /// enter the context when a recording is replayed. Only the `recorded` reference sees
    /// them; every other strategy replays the history as if the recording had not been
    /// compacted.
    fn sees_recorded_summaries(&self) -> bool {
        false
    }
    /// Whether each request starts again from the full history rather than from the context
    /// the previous compaction left (000's route rebuilds its message list from the stored
    /// conversation on every call). A caller that honours it hands [`Strategy::plan`] the full
    /// history before every call.
    fn rebuilds_from_history(&self) -> bool {
        false
    }
    /// Where the strategy places prompt-cache breakpoints in `ctx`: the indices of the entries
    /// a breakpoint follows, in order. `None`: the caller's default rule (002 recomputes its
    /// own cache points after every render).
    fn cache_breakpoints(&self, _ctx: &Context) -> Option<Vec<usize>> {
        None
    }
}

/// The standard `apply`: build `plan.layout` (or the fallback if any summary failed).
pub fn apply_layout<S: Strategy + ?Sized>(
    strategy: &S,
    ctx: &Context,
    budget: &Budget,
    plan: &Plan,
    summaries: &[SummaryOutcome],
) -> Compacted {
    let estimate_before = strategy.estimate(ctx);
    let failed = plan.requests.iter().enumerate().find_map(|(i, _)| match summaries.get(i) {
        // An empty summary is a failed summary (003: "LLM summarization fails (timeout,
        // error, empty)"); every strategy takes its failure path on it.
        Some(Ok(t)) if t.trim().is_empty() => Some("empty summary".to_string()),
        Some(Ok(_)) => None,
        Some(Err(e)) => Some(e.reason.clone()),
        None => Some("no summary given".to_string()),
    });
    let (layout, fallback): (&[Slot], Option<String>) = match (&failed, &plan.fallback) {
        (None, _) => (&plan.layout, None),
        (Some(reason), Fallback::Unchanged) => {
            let event = CompactionEvent {
                strategy: strategy.name().to_string(),
                trigger: plan.trigger,
                step: plan.step.clone(),
                estimate_before,
                estimate_after: estimate_before,
                messages_before: ctx.len(),
                messages_after: ctx.len(),
                removed: 0,
                masked: 0,
                summaries: Vec::new(),
                round: None,
                fallback: Some(format!("unchanged: {reason}")),
                shortfall: None,
                notes: plan.notes.clone(),
            };
            return Compacted { context: ctx.clone(), event };
        }
        (Some(reason), Fallback::Layout { label, layout }) => (layout, Some(format!("{label}: {reason}"))),
    };
    let built = build_layout(ctx, layout, &plan.requests, summaries, &[strategy.estimator()]);
    let estimate_after = strategy.estimate(&built.context);
    let shortfall =
        strategy.threshold(&built.context, budget).and_then(|t| estimate_after.checked_sub(t)).filter(|d| *d > 0);
    let event = CompactionEvent {
        strategy: strategy.name().to_string(),
        trigger: plan.trigger,
        step: plan.step.clone(),
        estimate_before,
        estimate_after,
        messages_before: ctx.len(),
        messages_after: built.context.len(),
        removed: built.removed,
        masked: built.masked,
        summaries: built.summaries,
        round: built.round,
        fallback,
        shortfall,
        notes: plan.notes.clone(),
    };
    Compacted { context: built.context, event }
}

/// A built layout and what it did.
#[derive(Debug, Clone)]
pub(crate) struct Built {
    pub context: Context,
    pub removed: usize,
    pub masked: usize,
    pub summaries: Vec<String>,
    pub round: Option<u32>,
}

/// Build a context from `layout`. Summary slots take their text from `summaries` (a failed or
/// missing summary becomes an empty string: use a fallback layout to avoid that). New entries
/// are metered with `meters` (the strategy's estimator), so the running totals `ctx` keeps for
/// them stay known in the new context without a second pass over it.
pub(crate) fn build_layout(
    ctx: &Context,
    layout: &[Slot],
    requests: &[SummaryRequest],
    summaries: &[SummaryOutcome],
    meters: &[&dyn TokenCounter],
) -> Built {
    // The entries kept, to count those removed: in a layout's order, which is mostly theirs.
    let mut used: Vec<usize> = Vec::with_capacity(layout.len());
    let mut out = Context::with_totals_of(ctx, layout.len());
    let mut masked = 0;
    let mut texts = Vec::new();
    let mut round = None;
    for slot in layout {
        match slot {
            Slot::Keep { index } => {
                if let Some(e) = ctx.get(*index) {
                    used.push(*index);
                    out.push(e.clone());
                }
            }
            Slot::Mask { index, placeholder } => {
                if let Some(e) = ctx.get(*index) {
                    used.push(*index);
                    masked += 1;
                    let m = e.message().with_content(placeholder.as_str());
                    let origin = match e.origin() {
                        Origin::Recorded { index } | Origin::Masked { index } => Origin::Masked { index: *index },
                        other => other.clone(),
                    };
                    out.push_metered(Entry::new(m, origin), meters);
                }
            }
            Slot::Summary { request, role, prefix, suffix } => {
                let text = match summaries.get(*request) {
                    Some(Ok(t)) => t.clone(),
                    _ => String::new(),
                };
                let req = requests.get(*request);
                let r = req.map(|r| r.round).unwrap_or(1);
                round = Some(round.map_or(r, |x: u32| x.max(r)));
                let covers = req.map(|r| covered(ctx, &r.span)).unwrap_or_default();
                texts.push(text.clone());
                out.push_metered(
                    Entry::new(
                        Message::new(*role, format!("{prefix}{text}{suffix}")),
                        Origin::Summary { round: r, covers },
                    ),
                    meters,
                );
            }
            Slot::Insert { message, what } => {
                out.push_metered(Entry::new(Message::clone(message), Origin::Inserted { what: *what }), meters);
            }
        }
    }
    if !used.windows(2).all(|w| w[0] < w[1]) {
        used.sort_unstable();
        used.dedup();
    }
    let removed = ctx.len() - used.len();
    Built { context: out, removed, masked, summaries: texts, round }
}

/// The recorded indices that entries `span` of `ctx` stand for, sorted and deduplicated.
pub(crate) fn covered(ctx: &Context, span: &[usize]) -> Vec<usize> {
    let mut out = Vec::new();
    for &i in span {
        if let Some(e) = ctx.get(i) {
            match e.origin() {
                Origin::Recorded { index } | Origin::Masked { index } => out.push(*index),
                Origin::Summary { covers, .. } => out.extend_from_slice(covers),
                Origin::Inserted { .. } => {}
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
