//! The vocabulary of a compaction: what the caller knows (`Budget`), why compaction runs
//! (`Trigger`), what a strategy decides (`Plan`, its `Slot`s and `SummaryRequest`s, or a
//! `MaskPlan`), what it promises (`Promises`, in terms of `ViolationKind`) and what one
//! compaction did (`CompactionEvent`). Data only: no strategy, no check.

use serde::{Deserialize, Serialize};

use crate::context::{Context, Entry, Inserted};
use crate::message::{Message, Role};
use crate::prompt::{InputCuts, Prompt};

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

/// A span of the context the caller must summarize.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRequest {
    /// Indices into the current context of the entries to summarize, in order.
    pub span: Vec<usize>,
    /// The prompt the summarizer uses: the strategy's own ([`Prompt`]).
    pub prompt: Prompt,
    /// The previous summary to integrate, if the strategy chains summaries.
    pub previous: Option<String>,
    /// The original user task, for prompts that restate it.
    pub task: Option<String>,
    /// Upper bound on the summary's length, in tokens (the API's output cap).
    pub max_tokens: u32,
    /// The length the prompt itself asks for, in tokens, when the document states one below
    /// `max_tokens` (a prompt that says "Maximum 800 tokens" under a 1,000-token cap).
    #[serde(default)]
    pub target_tokens: Option<u32>,
    /// The length the prompt asks for in characters, when the document states it that way
    /// (a prompt that says "Max 500 karakter total").
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
    pub fn new(span: Vec<usize>, prompt: Prompt, max_tokens: u32, round: u32) -> SummaryRequest {
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
    /// Return the context unchanged.
    Unchanged,
    /// Build this layout instead (a truncation, a pruned context, a brute prune).
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

/// What a compaction left, as its [`CompactionEvent`] reports it (the event's constructor,
/// [`CompactionEvent::new`], measures the rest with the strategy).
#[derive(Debug, Clone)]
pub enum Change<'c> {
    /// The context was left as it was, for the reason given (a failure path): the estimate
    /// and the entries after are those before, and no shortfall is reported.
    Unchanged {
        /// Why, as the event's `fallback`.
        fallback: String,
    },
    /// `context` is what the compaction left.
    Built {
        /// The context after the compaction.
        context: &'c Context,
        /// Entries of the old context that are not in the new one in any form.
        removed: usize,
        /// Entries whose content was replaced by a placeholder.
        masked: usize,
        /// The summary texts inserted, in order.
        summaries: Vec<String>,
        /// The summary round reached, if a summary was inserted.
        round: Option<u32>,
        /// Set when a summary failed and the strategy's failure path built this context.
        fallback: Option<String>,
    },
}

/// The result of [`Strategy::apply`](crate::Strategy::apply).
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

/// The kinds of violation, for counting and for strategies' documented deviations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A tool result whose call is not before it.
    OrphanToolResult,
    /// A tool call with no result after it.
    UnansweredToolCall,
    /// The system prompt was changed, moved or removed.
    SystemPromptChanged,
    /// Recorded messages kept out of their recorded order.
    OutOfOrder,
    /// The recent window was not kept verbatim.
    RecentWindowNotVerbatim,
    /// A proactive compaction below the threshold.
    CompactedBelowThreshold,
    /// More than one live summary.
    MultipleSummaries,
    /// Two same-role messages side by side, or a non-user first message.
    RoleAlternation,
    /// Over the threshold with no shortfall reported.
    OverBudgetUnreported,
}

impl ViolationKind {
    /// Every kind, in report order.
    pub const ALL: [ViolationKind; 9] = [
        ViolationKind::OrphanToolResult,
        ViolationKind::UnansweredToolCall,
        ViolationKind::SystemPromptChanged,
        ViolationKind::OutOfOrder,
        ViolationKind::RecentWindowNotVerbatim,
        ViolationKind::CompactedBelowThreshold,
        ViolationKind::MultipleSummaries,
        ViolationKind::RoleAlternation,
        ViolationKind::OverBudgetUnreported,
    ];
    /// The name used in files and reports (`orphan_tool_result`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationKind::OrphanToolResult => "orphan_tool_result",
            ViolationKind::UnansweredToolCall => "unanswered_tool_call",
            ViolationKind::SystemPromptChanged => "system_prompt_changed",
            ViolationKind::OutOfOrder => "out_of_order",
            ViolationKind::RecentWindowNotVerbatim => "recent_window_not_verbatim",
            ViolationKind::CompactedBelowThreshold => "compacted_below_threshold",
            ViolationKind::MultipleSummaries => "multiple_summaries",
            ViolationKind::RoleAlternation => "role_alternation",
            ViolationKind::OverBudgetUnreported => "over_budget_unreported",
        }
    }
}

/// A compaction that only masks: the content of each listed entry is replaced by its
/// placeholder; every entry stays where it is.
#[derive(Debug, Clone)]
pub struct MaskPlan {
    /// What the plan was made for.
    pub trigger: Trigger,
    /// The step, as [`Plan::step`].
    pub step: String,
    /// The entries to mask, ascending, each with the entry that replaces it
    /// ([`masked_entry`](crate::masked_entry): its content replaced by the placeholder).
    pub masks: Vec<(usize, Entry)>,
    /// Notes kept with the event, as [`Plan::notes`].
    pub notes: serde_json::Map<String, serde_json::Value>,
    /// What the strategy promises for the context before the masks ([`Strategy::promises`](crate::Strategy::promises)).
    pub promises: Promises,
    /// Once the masks are in, no entry before this index needs anything from the strategy:
    /// the `settled` of its next [`Strategy::plan_masks`](crate::Strategy::plan_masks) on this context (grown by appends
    /// and by these masks only).
    pub settled: usize,
}

impl MaskPlan {
    /// The same compaction as a [`Plan`] over a context of `len` entries.
    pub fn to_plan(&self, len: usize) -> Plan {
        let mut masks = self.masks.iter().peekable();
        let layout = (0..len)
            .map(|index| match masks.next_if(|(i, _)| *i == index) {
                Some((_, e)) => Slot::Mask { index, placeholder: e.message().content.clone() },
                None => Slot::Keep { index },
            })
            .collect();
        let mut plan = Plan::deterministic(self.trigger, self.step.clone(), layout);
        plan.notes = self.notes.clone();
        plan
    }
}

/// A strategy's answer to [`Strategy::plan_masks`](crate::Strategy::plan_masks).
#[derive(Debug, Clone)]
pub enum MaskAnswer {
    /// The strategy has no in-place path for this context: use [`Strategy::plan`](crate::Strategy::plan).
    Unsupported,
    /// Nothing to do: [`Strategy::plan`](crate::Strategy::plan) has no plan. `settled` is the
    /// hint for the next call, as [`MaskPlan::settled`].
    Nothing {
        /// No entry before this index needs anything from the strategy.
        settled: usize,
    },
    /// The plan [`Strategy::plan`](crate::Strategy::plan) would make, which only masks.
    Masks(MaskPlan),
}
