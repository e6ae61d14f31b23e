//! LLM providers over HTTP for compactlens: OpenAI-compatible chat completions and the
//! Anthropic Messages API, with retries, rate limits, usage accounting and an on-disk response
//! cache.
//!
//! - [`LlmConfig`]: one endpoint (protocol, base URL, model, limits), read from an
//!   experiment's `[llm]` table. The API key is a [`Secret`] the caller resolves (this crate
//!   never reads the environment).
//! - [`Client::complete`]: one [`ChatRequest`] to one [`ChatResponse`] (text, usage, finish
//!   reason). Retries 429, 5xx, time-outs and broken connections with exponential backoff and
//!   jitter, honouring `Retry-After`; caps requests in flight and requests per minute.
//! - [`LlmError`]: every fault as a value, with [`LlmError::ContextLengthExceeded`] recognised
//!   in each provider's own error shape.
//! - [`cache`]: content-addressed responses on disk; modes `use`, `refresh`, `off`, `only`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use llm::cache::{CacheMode, ResponseCache};
//! use llm::{ChatMessage, ChatRequest, Client, LlmConfig, Protocol};
//!
//! # async fn demo() -> Result<(), llm::LlmError> {
//! let mut cfg = LlmConfig::new(Protocol::Openai, "smollm2");
//! cfg.base_url = Some("http://127.0.0.1:8080/v1".into());
//! let cache = Arc::new(ResponseCache::new(".cache/llm", CacheMode::Use));
//! let client = Client::new(cfg, None)?.with_cache(cache);
//! let r = client.complete(ChatRequest::new(vec![ChatMessage::user("hi")]).max_tokens(20)).await?;
//! assert!(r.usage.completion_tokens <= 20);
//! # Ok(()) }
//! ```

pub mod budget;
pub mod cache;
#[cfg(feature = "http")]
pub mod client;
pub mod config;
pub mod error;
pub mod types;
#[cfg(feature = "http")]
pub mod wire;

pub use budget::{Budget, Meter, Rates};
pub use cache::{CacheKey, CacheMode, ResponseCache};
#[cfg(feature = "http")]
pub use client::{Client, Limits};
pub use config::{ConfigError, LlmConfig, Protocol, Secret};
pub use error::LlmError;
pub use types::{ChatMessage, ChatRequest, ChatResponse, ChatRole, ClientStats, Priority, Usage};
