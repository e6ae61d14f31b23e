//! The message model: conversations, messages, tool calls and probes.
//!
//! These types are the on-disk format too: a dataset is JSONL with one [`Conversation`]
//! per line (see `datasets/README.md` and `datasets/conversation.schema.json`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt.
    System,
    /// A user turn.
    User,
    /// An assistant turn, possibly with tool calls.
    Assistant,
    /// A tool result.
    Tool,
}

impl Role {
    /// The name used in the dataset format (`system`, `user`, `assistant`, `tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool call made by an assistant message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// Call id; the tool result names it in `tool_call_id`.
    pub id: String,
    /// Tool (function) name.
    pub name: String,
    /// Arguments as a JSON string, exactly as the model produced them.
    #[serde(default)]
    pub arguments: String,
}

/// The kind of a hidden-reasoning block an Anthropic model returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingKind {
    /// `thinking`: the reasoning text, with its signature.
    Thinking,
    /// `redacted_thinking`: encrypted reasoning (`data`).
    RedactedThinking,
}

/// A `thinking` or `redacted_thinking` block of an assistant message, kept opaque as the
/// recording has it. Anthropic strips the blocks of earlier turns from what it counts and
/// refuses a request whose latest assistant message, in a tool loop still running, lost or
/// changed them ([`crate::RequestRule::ThinkingModified`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ThinkingBlock {
    /// `thinking` or `redacted_thinking`.
    #[serde(rename = "type")]
    pub kind: ThinkingKind,
    /// The reasoning text (`thinking` blocks).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub thinking: String,
    /// The encrypted reasoning (`redacted_thinking` blocks).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data: String,
    /// The signature Anthropic checks the block against (opaque).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

impl ThinkingBlock {
    /// The text Anthropic counts for the block: the reasoning, or the redacted data.
    pub fn text(&self) -> &str {
        match self.kind {
            ThinkingKind::Thinking => &self.thinking,
            ThinkingKind::RedactedThinking => &self.data,
        }
    }
}

/// The metadata flag (`meta.compact_summary = true`) on a summary the recorded agent wrote
/// when it compacted: set by the importers, read by the replay, the `recorded` reference and
/// probe derivation.
pub const COMPACT_SUMMARY: &str = "compact_summary";

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// Text content. May be empty for an assistant message that only calls tools.
    #[serde(default)]
    pub content: String,
    /// Tool calls made by an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// On a tool result: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// On a tool result: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// On a tool result: the tool reported an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// On an assistant message: its `thinking` / `redacted_thinking` blocks, in order, as an
    /// Anthropic model returned them (they come before the text and tool calls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<ThinkingBlock>,
    /// Stage label for staged workflows (a paper-writing chat's stages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Why the model stopped (`stop`, `length`, `tool_calls`, ...), where recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Free metadata. Keys used by the project: `stage_decision` (string: the decision recorded
    /// when a stage was approved; feeds a strategy's stage digest), `synthetic`
    /// (bool: a result added by import repairs), `compact_boundary` (object: a compaction
    /// recorded in the source), `compact_summary` (bool: a summary written by the recorded agent),
    /// `injected` (bool: text injected by the agent harness, not typed by a person).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, serde_json::Value>,
}

impl Message {
    /// A message with a role and text, nothing else.
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            is_error: false,
            thinking: Vec::new(),
            stage: None,
            finish_reason: None,
            meta: BTreeMap::new(),
        }
    }
    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::new(Role::System, content)
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new(Role::User, content)
    }
    /// An assistant message with no tool call.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new(Role::Assistant, content)
    }
    /// An assistant message that calls tools.
    pub fn assistant_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Message {
        let mut m = Message::assistant(content);
        m.tool_calls = calls;
        m
    }
    /// A tool result answering `call_id`.
    pub fn tool_result(call_id: impl Into<String>, name: impl Into<String>, content: impl Into<String>) -> Message {
        let mut m = Message::new(Role::Tool, content);
        m.tool_call_id = Some(call_id.into());
        m.name = Some(name.into());
        m
    }
    /// This message with `content` in place of its text, every other field kept (without
    /// copying the old text first: a masked tool output can be large).
    pub fn with_content(&self, content: impl Into<String>) -> Message {
        Message {
            role: self.role,
            content: content.into(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            name: self.name.clone(),
            is_error: self.is_error,
            thinking: self.thinking.clone(),
            stage: self.stage.clone(),
            finish_reason: self.finish_reason.clone(),
            meta: self.meta.clone(),
        }
    }
    /// Mark the message as belonging to a pipeline stage (the paper-mode prompts key on it).
    pub fn with_stage(mut self, stage: impl Into<String>) -> Message {
        self.stage = Some(stage.into());
        self
    }
    /// Mark a tool result as an error.
    pub fn with_error(mut self) -> Message {
        self.is_error = true;
        self
    }
    /// Attach one metadata value (kept, never sent).
    pub fn with_meta(mut self, key: &str, value: serde_json::Value) -> Message {
        self.meta.insert(key.to_string(), value);
        self
    }
    /// True when the message holds at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        !self.tool_calls.is_empty()
    }
    /// The metadata value at `key` when it is a string.
    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.meta.get(key).and_then(|v| v.as_str())
    }
    /// The metadata value at `key` when it is `true`.
    pub fn meta_flag(&self, key: &str) -> bool {
        self.meta.get(key).and_then(|v| v.as_bool()).unwrap_or(false)
    }
}

#[cfg(feature = "dataset")]
/// The kinds of probe: five that derivation and generators write (`task` to `continuation`),
/// and the kinds answer keys add for the state an agent needs (`constraint` to `next_step`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// The original task.
    #[default]
    Task,
    /// A detail mentioned once: an id, an error, a number.
    Recall,
    /// A file or object created, read or changed.
    Artifact,
    /// A decision taken, or an option rejected.
    Decision,
    /// What to do next.
    Continuation,
    /// A constraint or preference the user stated ("don't", "only", "use X, not Y").
    Constraint,
    /// An option the user chose: an answer to a question, an approved plan.
    Choice,
    /// Where the work stands: what is done, committed, pushed, tested, running.
    WorkState,
    /// An error and the fix that resolved it; an approach known to fail.
    Lesson,
    /// The next step: open to-do items, the plan the agent stated last.
    NextStep,
}

#[cfg(feature = "dataset")]
impl ProbeKind {
    /// Every kind, in report order.
    pub const ALL: [ProbeKind; 10] = [
        ProbeKind::Task,
        ProbeKind::Recall,
        ProbeKind::Artifact,
        ProbeKind::Decision,
        ProbeKind::Continuation,
        ProbeKind::Constraint,
        ProbeKind::Choice,
        ProbeKind::WorkState,
        ProbeKind::Lesson,
        ProbeKind::NextStep,
    ];
    /// The five kinds every generated dataset holds (the first five of [`ProbeKind::ALL`]).
    pub const CLASSIC: [ProbeKind; 5] =
        [ProbeKind::Task, ProbeKind::Recall, ProbeKind::Artifact, ProbeKind::Decision, ProbeKind::Continuation];
    /// The name used in files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Task => "task",
            ProbeKind::Recall => "recall",
            ProbeKind::Artifact => "artifact",
            ProbeKind::Decision => "decision",
            ProbeKind::Continuation => "continuation",
            ProbeKind::Constraint => "constraint",
            ProbeKind::Choice => "choice",
            ProbeKind::WorkState => "work_state",
            ProbeKind::Lesson => "lesson",
            ProbeKind::NextStep => "next_step",
        }
    }
}

#[cfg(feature = "dataset")]
/// How much a probe matters to an agent that has to go on with the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Without it the agent cannot go on correctly: the task and its constraints, the user's
    /// choices, the current state of the work, the next step.
    Critical,
    /// It saves the agent work or a repeated mistake: decisions, lessons, files changed.
    Useful,
    /// Incidental: a one-off read, a transient error already resolved, an incidental id.
    Detail,
}

#[cfg(feature = "dataset")]
impl Tier {
    /// Every tier, in report order.
    pub const ALL: [Tier; 3] = [Tier::Critical, Tier::Useful, Tier::Detail];

    /// The name used in files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Critical => "critical",
            Tier::Useful => "useful",
            Tier::Detail => "detail",
        }
    }

    /// The tier of a probe that does not state one: the task, constraints, choices, work state
    /// and the next step are critical, every other kind useful (a probe is only `detail` when it
    /// says so).
    pub fn of_kind(kind: ProbeKind) -> Tier {
        match kind {
            ProbeKind::Task
            | ProbeKind::Continuation
            | ProbeKind::Constraint
            | ProbeKind::Choice
            | ProbeKind::WorkState
            | ProbeKind::NextStep => Tier::Critical,
            ProbeKind::Recall | ProbeKind::Artifact | ProbeKind::Decision | ProbeKind::Lesson => Tier::Useful,
        }
    }

    /// Counted in the headline figures (retention, at-risk and paired retention): critical and
    /// useful probes; `detail` has columns of its own.
    pub fn in_headline(self) -> bool {
        self != Tier::Detail
    }
}

#[cfg(feature = "dataset")]
/// A question whose answer is in the recorded conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Probe {
    /// Unique within the conversation.
    pub id: String,
    /// What the probe asks about.
    pub kind: ProbeKind,
    /// The question put to the agent.
    pub question: String,
    /// The expected answer, in words.
    pub answer: String,
    /// The facts the answer needs. Each fact is a group of accepted aliases: the fact is
    /// retained when any one alias survives.
    pub facts: Vec<Vec<String>>,
    /// Index (0-based, into `messages`) of the message that holds the answer.
    pub source_message: usize,
    /// Ask after this many messages of the recording are in context (`None`: at every
    /// checkpoint after `source_message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_at: Option<usize>,
    /// Asked only while at most this many messages are in context: the state it asks about
    /// changed at message `until` (a to-do list the agent wrote again), where a later probe
    /// asks it as it then stood. `None`: it never goes out of date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<usize>,
    /// How much it matters ([`Tier`]); absent: [`Tier::of_kind`] of its kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// Who wrote it ([`ProbeOrigin`]); absent: not said (hand-written or generated data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<ProbeOrigin>,
    /// What the fact means, in one sentence (answer keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<String>,
    /// Every message that states or establishes the answer, `source_message` among them
    /// (answer keys); empty: `source_message` alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_messages: Vec<usize>,
    /// Where the recording holds a real compaction at `asked_at`: whether the summary the
    /// recorded agent wrote there states the fact, as a person read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_real_summary: Option<InRealSummary>,
}

#[cfg(feature = "dataset")]
/// Who wrote a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProbeOrigin {
    /// Derived from the recording by rules (`probes derive`, the importers).
    Derived,
    /// Written by a model (`probes generate`).
    Generated,
    /// An answer key: written by a person who read the history before `asked_at`.
    Written,
}

#[cfg(feature = "dataset")]
/// How a recorded agent's own summary holds an answer key's fact, as a person read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InRealSummary {
    /// One of the fact's aliases is in the summary and means the fact.
    Verbatim,
    /// The summary states the fact in other words.
    Paraphrase,
    /// The summary does not state it.
    Absent,
}

#[cfg(feature = "dataset")]
impl InRealSummary {
    /// The name used in files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            InRealSummary::Verbatim => "verbatim",
            InRealSummary::Paraphrase => "paraphrase",
            InRealSummary::Absent => "absent",
        }
    }

    /// The summary states the fact, in its words or the key's.
    pub fn stated(self) -> bool {
        self != InRealSummary::Absent
    }
}

#[cfg(feature = "dataset")]
impl Probe {
    /// An answer key: written by a person at its checkpoint ([`ProbeOrigin::Written`]).
    pub fn is_written(&self) -> bool {
        self.origin == Some(ProbeOrigin::Written)
    }

    /// True when the probe still holds at a checkpoint of `at` messages: it is not out of
    /// date there ([`Probe::until`]).
    pub fn stands_at(&self, at: usize) -> bool {
        self.until.is_none_or(|u| at <= u)
    }

    /// The messages that state the answer: `source_messages`, else `source_message` alone.
    pub fn sources(&self) -> Vec<usize> {
        if self.source_messages.is_empty() {
            vec![self.source_message]
        } else {
            self.source_messages.clone()
        }
    }

    /// Its tier: the one it states, else the default of its kind ([`Tier::of_kind`]).
    pub fn tier(&self) -> Tier {
        self.tier.unwrap_or_else(|| Tier::of_kind(self.kind))
    }
}

#[cfg(feature = "dataset")]
/// A recorded (or synthesized) conversation with its probes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Conversation {
    /// Unique within the dataset.
    pub id: String,
    /// Where it comes from: `synthetic/coding`, `import/claude-code`, ...
    #[serde(default)]
    pub source: String,
    /// The context window of the recording, in tokens, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The model of the recording, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The messages, in recorded order.
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    /// The probes asked of it.
    pub probes: Vec<Probe>,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, serde_json::Value>,
}

#[cfg(feature = "dataset")]
impl Conversation {
    /// A conversation with no probe and no metadata.
    pub fn new(id: impl Into<String>, messages: Vec<Message>) -> Conversation {
        Conversation {
            id: id.into(),
            source: String::new(),
            context_window: None,
            model: None,
            messages,
            probes: Vec::new(),
            meta: BTreeMap::new(),
        }
    }
}
