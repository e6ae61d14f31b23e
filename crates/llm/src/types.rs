//! Requests and responses, the same for every provider.

use serde::{Deserialize, Serialize};

/// Who wrote a chat message. Tool traffic is rendered to text by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    System,
    User,
    Assistant,
}

/// One message of a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: ChatRole,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::System, content: content.into() }
    }
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::User, content: content.into() }
    }
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::Assistant, content: content.into() }
    }
}

/// One completion to produce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    /// Output token limit; `None` takes the client's `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Temperature; `None` takes the client's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Which draw of the same request this is (0 for the first). Not sent; it only keeps
    /// repeated draws (a judge grading N times) apart in the response cache.
    #[serde(default)]
    pub sample: u32,
    /// OpenAI's `response_format` object, sent as written (a JSON schema the answer must
    /// follow); part of the cache key when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<serde_json::Value>,
    /// Whether a caller is blocked on the answer ([`Priority`]). Not sent, not in the cache key.
    #[serde(skip)]
    pub priority: Priority,
}

/// How a request queues for a slot under the endpoint's concurrency cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// Something waits on it (a replay on its summary): the next free slot is its.
    #[default]
    Urgent,
    /// Nothing waits on it (a probe scored beside the replay): it takes a free slot only while
    /// no urgent request waits for one.
    Background,
}

impl ChatRequest {
    pub fn new(messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            messages,
            max_tokens: None,
            temperature: None,
            sample: 0,
            response_format: None,
            priority: Priority::Urgent,
        }
    }
    pub fn max_tokens(mut self, n: u32) -> ChatRequest {
        self.max_tokens = Some(n);
        self
    }
    pub fn temperature(mut self, t: f32) -> ChatRequest {
        self.temperature = Some(t);
        self
    }
    pub fn sample(mut self, n: u32) -> ChatRequest {
        self.sample = n;
        self
    }
    /// Queue as `priority` for a slot under the concurrency cap.
    pub fn priority(mut self, priority: Priority) -> ChatRequest {
        self.priority = priority;
        self
    }
    /// Constrain the answer with OpenAI's `response_format` object.
    pub fn response_format(mut self, format: Option<serde_json::Value>) -> ChatRequest {
        self.response_format = format;
        self
    }
}

/// Token usage reported by the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// All input tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.cached_tokens += other.cached_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

/// A completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The text of the answer (text parts joined; empty when the model wrote none).
    pub text: String,
    pub usage: Usage,
    /// Why the model stopped (`stop`, `length`, `end_turn`, `max_tokens`, ...), as reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The model that answered, as reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Served from the response cache, not the network.
    #[serde(default, skip_serializing)]
    pub from_cache: bool,
}

/// The finish reasons that mean the model refused: Anthropic's `refusal`, OpenAI's
/// `content_filter`, and `refusal`, which the OpenAI reader sets when the message carries a
/// `refusal` field.
pub const REFUSAL_FINISH_REASONS: [&str; 2] = ["refusal", "content_filter"];

impl ChatResponse {
    /// The model refused to answer (see [`REFUSAL_FINISH_REASONS`]).
    pub fn is_refusal(&self) -> bool {
        self.finish_reason.as_deref().is_some_and(|f| REFUSAL_FINISH_REASONS.contains(&f))
    }
}

/// Counters of one client, all monotonic.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientStats {
    /// Completions asked for.
    pub requests: u64,
    /// HTTP attempts actually sent (retries included, cache hits excluded).
    pub http_attempts: u64,
    /// Attempts that were retries.
    pub retries: u64,
    /// Completions served from the cache.
    pub cache_hits: u64,
    /// Completions the cache was asked for and did not have (modes `use` and `only`).
    #[serde(default)]
    pub cache_misses: u64,
    /// Completions that ended in an error.
    pub failures: u64,
    /// Failures by [`crate::LlmError::kind`].
    #[serde(default)]
    pub failures_by_kind: std::collections::BTreeMap<String, u64>,
    /// Usage of every successful completion, cached ones included (their recorded usage), so
    /// a run replayed from the cache accounts the same tokens as the run that filled it.
    pub usage: Usage,
}
