//! The dataset error: where a problem is (file, line, conversation, message, field) and what
//! it is, as an enum that tests and reports can match and count.

use std::fmt;
use std::path::PathBuf;

use compaction::Role;

/// One problem found while loading or validating a dataset.
///
/// Displays as `file:line: conversation ID, message N, field F: what is wrong`, leaving out
/// the parts that are not known or do not apply (`file:line: field id: ...`,
/// `file: empty file ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct DatasetError {
    /// The dataset file (`None` when a conversation is checked on its own).
    pub file: Option<PathBuf>,
    /// 1-based line of the file.
    pub line: Option<usize>,
    /// The conversation's `id`, when it could be read.
    pub conversation: Option<String>,
    /// 0-based index into the conversation's `messages`.
    pub message: Option<usize>,
    /// The field, as a path relative to the message (or to the conversation when no message
    /// applies): `content`, `tool_calls[1].id`, `probes[0].facts[2][0]`.
    pub field: Option<String>,
    /// What is wrong.
    pub problem: Problem,
}

impl DatasetError {
    /// A problem with no location yet.
    pub fn new(problem: Problem) -> DatasetError {
        DatasetError { file: None, line: None, conversation: None, message: None, field: None, problem }
    }
    pub fn in_file(mut self, file: impl Into<PathBuf>) -> DatasetError {
        self.file = Some(file.into());
        self
    }
    pub fn at_line(mut self, line: usize) -> DatasetError {
        self.line = Some(line);
        self
    }
    pub fn in_conversation(mut self, id: Option<&str>) -> DatasetError {
        self.conversation = id.map(str::to_string);
        self
    }
    pub fn at_message(mut self, index: usize) -> DatasetError {
        self.message = Some(index);
        self
    }
    pub fn at_field(mut self, field: impl Into<String>) -> DatasetError {
        self.field = Some(field.into());
        self
    }
}

impl fmt::Display for DatasetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}", file.display())?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            f.write_str(": ")?;
        } else if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        let mut parts = Vec::new();
        if let Some(id) = &self.conversation {
            parts.push(format!("conversation {id}"));
        }
        if let Some(m) = self.message {
            parts.push(format!("message {m}"));
        }
        if let Some(field) = &self.field {
            parts.push(format!("field {field}"));
        }
        if !parts.is_empty() {
            write!(f, "{}: ", parts.join(", "))?;
        }
        write!(f, "{}", self.problem)
    }
}

/// What is wrong. Reading and JSON problems reject the line; the others are found by
/// validating a conversation that loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    // --- reading the file ---
    /// The file or folder could not be read.
    #[error("cannot read: {detail}")]
    Io { detail: String },
    /// The file holds no conversation at all (empty, or only blank lines).
    #[error("empty file: a dataset needs at least one conversation (one JSON object per line)")]
    EmptyFile,
    /// A line longer than the configured limit; it is skipped without being buffered.
    #[error("line is {bytes} bytes long, over the limit of {limit} bytes (raise it with --max-line-bytes)")]
    LineTooLong { bytes: u64, limit: usize },
    /// Bytes that are not UTF-8. `offset` is from the start of the file, `column` is the
    /// 1-based byte column in the line.
    #[error("invalid UTF-8 at byte offset {offset} of the file (line byte {column})")]
    InvalidUtf8 { offset: u64, column: usize },
    /// Not JSON. `column` is the 1-based byte column in the line, as serde_json counts it.
    #[error("malformed JSON at column {column}: {detail}")]
    MalformedJson { column: usize, detail: String },

    // --- the shape of the JSON ---
    #[error("missing required field")]
    MissingField,
    #[error("wrong type: expected {expected}, found {found}")]
    WrongType { expected: String, found: String },
    /// A value outside a closed set: `what` is `role` or `probe kind`.
    #[error("unknown {what} {value:?} (allowed: {})", allowed.join(", "))]
    UnknownValue { what: String, value: String, allowed: Vec<String> },
    /// The line does not decode into a conversation for a reason the shape check does not
    /// name (serde's own message).
    #[error("invalid conversation{}: {detail}", column.map(|c| format!(" at column {c}")).unwrap_or_default())]
    Invalid { column: Option<usize>, detail: String },
    #[error("duplicate conversation id (first on line {first_line}); this line is skipped")]
    DuplicateConversationId { first_line: usize },

    // --- conversation structure ---
    #[error("empty conversation id")]
    EmptyConversationId,
    #[error("conversation has no messages")]
    NoMessages,
    /// A system or user message with no text.
    #[error("empty content: a {role} message needs text")]
    EmptyContent { role: Role },
    #[error("empty assistant message: it needs content or tool calls")]
    EmptyAssistant,
    #[error("a {role} message cannot make tool calls (only assistant messages can)")]
    CallsOnNonAssistant { role: Role },
    #[error("empty tool call id")]
    EmptyCallId,
    #[error("empty tool name")]
    EmptyToolName,
    #[error("tool call id {call_id:?} appears twice in the same message")]
    DuplicateCallId { call_id: String },
    #[error("a tool result needs tool_call_id (the id of the call it answers)")]
    MissingToolCallId,
    /// A tool result with no unanswered call of that id before it.
    #[error("tool result for call {call_id:?} has no tool call before it")]
    OrphanToolResult { call_id: String },
    /// A tool call with no result after it (the last assistant message may have calls in flight).
    #[error("tool call {call_id:?} has no tool result")]
    UnansweredToolCall { call_id: String },
    #[error("tool result names {name:?} but call {call_id:?} (message {call_message}) is {call_name:?}")]
    ToolNameMismatch { name: String, call_id: String, call_name: String, call_message: usize },

    // --- probes ---
    #[error("empty probe id")]
    EmptyProbeId,
    #[error("duplicate probe id {id:?} (first at probes[{first}])")]
    DuplicateProbeId { id: String, first: usize },
    #[error("empty question")]
    EmptyQuestion,
    #[error("source_message {index} is out of range (the conversation has {messages} messages)")]
    SourceOutOfRange { index: usize, messages: usize },
    #[error("asked_at {asked_at} is out of range (1..={messages}: it counts messages in context)")]
    AskedAtOutOfRange { asked_at: usize, messages: usize },
    #[error("asked_at {asked_at} comes before the answer: source_message {source_message} is not yet in context")]
    AskedBeforeSource { asked_at: usize, source_message: usize },
    #[error("until {until} must come after source_message {source_message} and be at most the {messages} messages")]
    UntilOutOfRange { until: usize, source_message: usize, messages: usize },
    #[error("a probe needs at least one fact")]
    NoFacts,
    #[error("empty fact: a fact needs at least one alias")]
    EmptyFact,
    #[error("empty alias")]
    EmptyAlias,

    // --- answer keys (probes with origin "written") ---
    /// An answer key is asked at its checkpoint: it needs `asked_at`.
    #[error("an answer key needs asked_at (its checkpoint)")]
    KeyWithoutCheckpoint,
    /// A key's source message at or after its checkpoint: the key must be written from the
    /// history before it.
    #[error("source message {index} is not before the checkpoint (asked_at {asked_at})")]
    KeySourceAfterCheckpoint { index: usize, asked_at: usize },
    /// No alias of a key's fact occurs in its source messages (normalized, at word boundaries).
    #[error("no alias of this fact occurs in its source messages {sources:?}")]
    KeyAliasNotInSources { sources: Vec<usize> },
    /// Every alias of a key's fact is a common word or a bare small number.
    #[error("every alias of this fact is a common word or a bare number under a hundred: {aliases:?}")]
    KeyOnlyWeakAliases { aliases: Vec<String> },
    /// Two keys at one checkpoint test the same fact (a shared alias).
    #[error("the same fact as probes[{first}] at the same checkpoint (alias {alias:?})")]
    DuplicateKey { first: usize, alias: String },
}

impl Problem {
    /// A stable snake_case label, for counting.
    pub fn label(&self) -> &'static str {
        match self {
            Problem::Io { .. } => "io",
            Problem::EmptyFile => "empty_file",
            Problem::LineTooLong { .. } => "line_too_long",
            Problem::InvalidUtf8 { .. } => "invalid_utf8",
            Problem::MalformedJson { .. } => "malformed_json",
            Problem::MissingField => "missing_field",
            Problem::WrongType { .. } => "wrong_type",
            Problem::UnknownValue { .. } => "unknown_value",
            Problem::Invalid { .. } => "invalid",
            Problem::DuplicateConversationId { .. } => "duplicate_conversation_id",
            Problem::EmptyConversationId => "empty_conversation_id",
            Problem::NoMessages => "no_messages",
            Problem::EmptyContent { .. } => "empty_content",
            Problem::EmptyAssistant => "empty_assistant",
            Problem::CallsOnNonAssistant { .. } => "calls_on_non_assistant",
            Problem::EmptyCallId => "empty_call_id",
            Problem::EmptyToolName => "empty_tool_name",
            Problem::DuplicateCallId { .. } => "duplicate_call_id",
            Problem::MissingToolCallId => "missing_tool_call_id",
            Problem::OrphanToolResult { .. } => "orphan_tool_result",
            Problem::UnansweredToolCall { .. } => "unanswered_tool_call",
            Problem::ToolNameMismatch { .. } => "tool_name_mismatch",
            Problem::EmptyProbeId => "empty_probe_id",
            Problem::DuplicateProbeId { .. } => "duplicate_probe_id",
            Problem::EmptyQuestion => "empty_question",
            Problem::SourceOutOfRange { .. } => "source_out_of_range",
            Problem::AskedAtOutOfRange { .. } => "asked_at_out_of_range",
            Problem::AskedBeforeSource { .. } => "asked_before_source",
            Problem::UntilOutOfRange { .. } => "until_out_of_range",
            Problem::NoFacts => "no_facts",
            Problem::EmptyFact => "empty_fact",
            Problem::EmptyAlias => "empty_alias",
            Problem::KeyWithoutCheckpoint => "key_without_checkpoint",
            Problem::KeySourceAfterCheckpoint { .. } => "key_source_after_checkpoint",
            Problem::KeyAliasNotInSources { .. } => "key_alias_not_in_sources",
            Problem::KeyOnlyWeakAliases { .. } => "key_only_weak_aliases",
            Problem::DuplicateKey { .. } => "duplicate_key",
        }
    }
}
