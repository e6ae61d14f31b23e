//! A small fluent builder for conversations and contexts.
//!
//! ```
//! use testkit::builder::{Call, ContextBuilder};
//!
//! let ctx = ContextBuilder::new()
//!     .system("You are a coding agent.")
//!     .previous_summary(1, 6, "## Session Summary (Compaction Round 1)\n\nFixed the parser.")
//!     .user("Run the tests")
//!     .tool_call("bash", r#"{"cmd":"cargo test"}"#, "test result: ok. 12 passed")
//!     .parallel(vec![Call::ok("read_file", r#"{"path":"a.rs"}"#, "fn a() {}"), Call::err("grep", "{}", "no match")])
//!     .assistant("All green.")
//!     .build();
//! assert_eq!(ctx.len(), 9);
//! assert!(compaction::check_context(&ctx).is_empty());
//! ```
//!
//! Recorded indices count the messages of the recording: a previous summary covering `k`
//! recorded messages advances the index by `k`, so the messages after it keep the indices they
//! had in the recording. Call ids are `call_<index>_<k>`, where `index` is the recorded index
//! of the calling assistant message, unless a [`Call`] names its own id.

use compaction::{Context, Conversation, Entry, Inserted, Message, Origin, Role, ToolCall};

/// One tool call and its result, for [`ContextBuilder::calls`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub id: Option<String>,
    pub name: String,
    pub arguments: String,
    pub result: String,
    pub error: bool,
}

impl Call {
    /// A call that succeeds with `result`.
    pub fn ok(name: impl Into<String>, arguments: impl Into<String>, result: impl Into<String>) -> Call {
        Call { id: None, name: name.into(), arguments: arguments.into(), result: result.into(), error: false }
    }
    /// A call whose result is an error.
    pub fn err(name: impl Into<String>, arguments: impl Into<String>, error: impl Into<String>) -> Call {
        Call { error: true, ..Call::ok(name, arguments, error) }
    }
    /// Use this call id instead of a generated one (for reused ids).
    pub fn with_id(mut self, id: impl Into<String>) -> Call {
        self.id = Some(id.into());
        self
    }
}

/// Builds a [`Context`] (or a plain message list) message by message.
#[derive(Debug, Clone, Default)]
pub struct ContextBuilder {
    entries: Vec<Entry>,
    next_index: usize,
    stage: Option<String>,
}

impl ContextBuilder {
    pub fn new() -> ContextBuilder {
        ContextBuilder::default()
    }

    /// The next recorded index.
    pub fn next_index(&self) -> usize {
        self.next_index
    }

    /// Start recorded indices at `index` (for messages appended to an existing context).
    pub fn starting_at(mut self, index: usize) -> ContextBuilder {
        self.next_index = index;
        self
    }

    /// Append a recorded message as it is (the current stage label is applied when it has none).
    pub fn message(mut self, mut message: Message) -> ContextBuilder {
        if message.stage.is_none() {
            message.stage = self.stage.clone();
        }
        self.entries.push(Entry::recorded(self.next_index, message));
        self.next_index += 1;
        self
    }

    /// Append an entry with its own origin (recorded indices are not advanced).
    pub fn entry(mut self, entry: Entry) -> ContextBuilder {
        self.entries.push(entry);
        self
    }

    pub fn system(self, text: impl Into<String>) -> ContextBuilder {
        self.message(Message::system(text))
    }
    pub fn user(self, text: impl Into<String>) -> ContextBuilder {
        self.message(Message::user(text))
    }
    pub fn assistant(self, text: impl Into<String>) -> ContextBuilder {
        self.message(Message::assistant(text))
    }

    /// An assistant message with `text` calling every one of `calls` (in parallel when more than
    /// one), followed by their results in call order.
    pub fn calls(mut self, text: impl Into<String>, calls: Vec<Call>) -> ContextBuilder {
        let index = self.next_index;
        let ids: Vec<String> = calls
            .iter()
            .enumerate()
            .map(|(k, c)| c.id.clone().unwrap_or_else(|| format!("call_{index}_{k}")))
            .collect();
        let tool_calls = calls
            .iter()
            .zip(&ids)
            .map(|(c, id)| ToolCall { id: id.clone(), name: c.name.clone(), arguments: c.arguments.clone() })
            .collect();
        let mut assistant = Message::assistant_calls(text, tool_calls);
        assistant.finish_reason = Some("tool_calls".to_string());
        self = self.message(assistant);
        for (c, id) in calls.into_iter().zip(ids) {
            let mut m = Message::tool_result(id, c.name, c.result);
            m.is_error = c.error;
            self = self.message(m);
        }
        self
    }

    /// An assistant message with `text` calling every one of `calls`, whose results have not
    /// arrived yet: a call round in flight at the end of the context.
    pub fn calls_in_flight(self, text: impl Into<String>, calls: Vec<Call>) -> ContextBuilder {
        let index = self.next_index;
        let tool_calls = calls
            .iter()
            .enumerate()
            .map(|(k, c)| ToolCall {
                id: c.id.clone().unwrap_or_else(|| format!("call_{index}_{k}")),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect();
        let mut assistant = Message::assistant_calls(text, tool_calls);
        assistant.finish_reason = Some("tool_calls".to_string());
        self.message(assistant)
    }

    /// One tool call with its successful result.
    pub fn tool_call(self, name: &str, arguments: &str, result: impl Into<String>) -> ContextBuilder {
        self.calls("", vec![Call::ok(name, arguments, result)])
    }

    /// One tool call whose result is an error.
    pub fn tool_error(self, name: &str, arguments: &str, error: impl Into<String>) -> ContextBuilder {
        self.calls("", vec![Call::err(name, arguments, error)])
    }

    /// Parallel tool calls from one assistant message, results in call order.
    pub fn parallel(self, calls: Vec<Call>) -> ContextBuilder {
        self.calls("", calls)
    }

    /// An assistant message whose calls have no result yet (a call in flight; put it last).
    pub fn in_flight(self, name: &str, arguments: &str) -> ContextBuilder {
        let id = format!("call_{}_0", self.next_index);
        let call = ToolCall { id, name: name.to_string(), arguments: arguments.to_string() };
        self.message(Message::assistant_calls("", vec![call]))
    }

    /// Label every following message with `stage`.
    pub fn stage(mut self, stage: impl Into<String>) -> ContextBuilder {
        self.stage = Some(stage.into());
        self
    }

    /// Stop labelling following messages with a stage.
    pub fn no_stage(mut self) -> ContextBuilder {
        self.stage = None;
        self
    }

    /// Record a stage decision (`meta.stage_decision`) on the last message.
    pub fn decision(self, text: impl Into<String>) -> ContextBuilder {
        self.meta("stage_decision", serde_json::Value::String(text.into()))
    }

    /// Set a metadata key on the last message.
    pub fn meta(mut self, key: &str, value: serde_json::Value) -> ContextBuilder {
        if let Some(last) = self.entries.pop() {
            let message = last.message().clone().with_meta(key, value);
            self.entries.push(Entry::new(message, last.origin().clone()));
        }
        self
    }

    /// A summary from an earlier compaction round, as an assistant message standing for the
    /// next `covers` recorded messages (as `keep-last-n` places it at index 1).
    pub fn previous_summary(self, round: u32, covers: usize, text: impl Into<String>) -> ContextBuilder {
        self.summary_as(Role::Assistant, round, covers, text)
    }

    /// A summary from an earlier compaction round with `role`, standing for the next `covers`
    /// recorded messages.
    pub fn summary_as(mut self, role: Role, round: u32, covers: usize, text: impl Into<String>) -> ContextBuilder {
        let start = self.next_index;
        let covers: Vec<usize> = (start..start + covers).collect();
        self.next_index = start + covers.len();
        self.entries.push(Entry::new(Message::new(role, text), Origin::Summary { round, covers }));
        self
    }

    /// A message the strategy inserted (an acknowledgement, a digest, a truncation notice).
    pub fn inserted(mut self, message: Message, what: Inserted) -> ContextBuilder {
        self.entries.push(Entry::new(message, Origin::Inserted { what }));
        self
    }

    /// The context.
    pub fn build(self) -> Context {
        Context::from_entries(self.entries)
    }

    /// The messages, without provenance.
    pub fn messages(&self) -> Vec<Message> {
        self.entries.iter().map(|e| e.message().clone()).collect()
    }

    /// The messages as a conversation with `id`.
    pub fn conversation(&self, id: &str) -> Conversation {
        Conversation::new(id, self.messages())
    }
}

/// The next recorded index after everything `ctx` stands for (recorded, masked or covered by
/// a summary).
pub fn next_recorded_index(ctx: &Context) -> usize {
    ctx.entries()
        .iter()
        .filter_map(|e| match e.origin() {
            Origin::Recorded { index } | Origin::Masked { index } => Some(*index),
            Origin::Summary { covers, .. } => covers.last().copied(),
            Origin::Inserted { .. } => None,
        })
        .max()
        .map_or(0, |i| i + 1)
}

/// `ctx` followed by the entries of `more` (whose recorded indices should start at
/// [`next_recorded_index`]).
pub fn extend(ctx: &Context, more: ContextBuilder) -> Context {
    let mut out = ctx.clone();
    for e in more.entries {
        out.push(e);
    }
    out
}
