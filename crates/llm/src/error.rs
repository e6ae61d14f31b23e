//! What can go wrong with a completion. Every fault is a value; none panics.

use std::path::PathBuf;

use crate::config::ConfigError;

/// A completion that did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The provider rejected the request as longer than the model's context window, in its own
    /// error shape (OpenAI's `context_length_exceeded`, Anthropic's `prompt is too long`, or the
    /// wording of compatible servers). Never retried.
    #[error("context length exceeded (HTTP {status}): {message}")]
    ContextLengthExceeded { status: u16, message: String },
    /// Still rate limited (429) after every retry.
    #[error("rate limited (HTTP 429) after {attempts} attempts: {message}")]
    RateLimited { attempts: u32, message: String },
    /// A server error (5xx) after every retry.
    #[error("server error (HTTP {status}) after {attempts} attempts: {message}")]
    Server { status: u16, attempts: u32, message: String },
    /// An error status that retrying cannot fix (400, 401, 403, 404, ...).
    #[error("request rejected (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// Every attempt timed out.
    #[error("timed out after {attempts} attempts of {timeout_s} s each")]
    Timeout { attempts: u32, timeout_s: f64 },
    /// The connection failed or broke (refused, reset, body cut short) on every attempt.
    #[error("connection failed after {attempts} attempts: {message}")]
    Connection { attempts: u32, message: String },
    /// A complete response that is not what the protocol promises (bad JSON, missing fields).
    #[error("malformed response (HTTP {status}): {problem}; body starts {excerpt:?}")]
    Malformed { status: u16, problem: String, excerpt: String },
    /// Cache mode `only` and the response is not in the cache.
    #[error("response not in cache (mode only): key {key}")]
    CacheMiss { key: String },
    /// The run's spending limit ([`crate::budget::Budget`]) refused the request: what was spent
    /// plus what is in flight plus its worst case would pass it. Never sent, never retried.
    #[error(
        "not sent: the budget of ${limit_usd:.4} is reached (${spent_usd:.4} spent, ${in_flight_usd:.4} in flight)"
    )]
    OverBudget { limit_usd: f64, spent_usd: f64, in_flight_usd: f64 },
    /// The cache could not be read or written.
    #[error("response cache {path}: {source}")]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error("http client: {0}")]
    Client(String),
}

impl LlmError {
    /// A short stable name for counting (`context_length_exceeded`, `timeout`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::ContextLengthExceeded { .. } => "context_length_exceeded",
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::Server { .. } => "server_error",
            LlmError::Rejected { .. } => "rejected",
            LlmError::Timeout { .. } => "timeout",
            LlmError::Connection { .. } => "connection",
            LlmError::Malformed { .. } => "malformed",
            LlmError::CacheMiss { .. } => "cache_miss",
            LlmError::OverBudget { .. } => "over_budget",
            LlmError::Cache { .. } => "cache",
            LlmError::Config(_) => "config",
            LlmError::Client(_) => "client",
        }
    }
    /// The same error with every message passed through `scrub` (the API key removed from an
    /// error body that echoed it).
    pub fn scrubbed(self, scrub: impl Fn(&str) -> String) -> LlmError {
        match self {
            LlmError::ContextLengthExceeded { status, message } => {
                LlmError::ContextLengthExceeded { status, message: scrub(&message) }
            }
            LlmError::RateLimited { attempts, message } => LlmError::RateLimited { attempts, message: scrub(&message) },
            LlmError::Server { status, attempts, message } => {
                LlmError::Server { status, attempts, message: scrub(&message) }
            }
            LlmError::Rejected { status, message } => LlmError::Rejected { status, message: scrub(&message) },
            LlmError::Connection { attempts, message } => LlmError::Connection { attempts, message: scrub(&message) },
            LlmError::Malformed { status, problem, excerpt } => {
                LlmError::Malformed { status, problem: scrub(&problem), excerpt: scrub(&excerpt) }
            }
            LlmError::Client(m) => LlmError::Client(scrub(&m)),
            other => other,
        }
    }
    /// A fault of the endpoint for a transport, auth or server reason (unreachable, timing
    /// out, refusing the key or the request, failing with 5xx or rate limiting after every
    /// retry) rather than of the model's answer: a run fails the pair on it instead of taking
    /// a strategy's failure path. A malformed answer, an empty one or a context-length
    /// rejection is the model's own failure.
    pub fn is_endpoint_fault(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Server { .. }
                | LlmError::Rejected { .. }
                | LlmError::Timeout { .. }
                | LlmError::Connection { .. }
                | LlmError::Client(_)
        )
    }
    pub fn is_context_length_exceeded(&self) -> bool {
        matches!(self, LlmError::ContextLengthExceeded { .. })
    }
}

/// The first `n` characters of `body`, for error messages.
#[cfg(feature = "http")]
pub(crate) fn excerpt(body: &str, n: usize) -> String {
    body.chars().take(n).collect()
}
