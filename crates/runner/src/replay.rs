//! The replay engine: every recorded assistant message is one model call; before each call the
//! strategy may compact (proactively, or reactively when the request is over the window).

use compaction::{Context, Conversation, Encoding, Probe, StrategyConfig, SummaryFailure, SummaryRequest};
use serde::{Deserialize, Serialize};

use crate::record::{PairMetrics, ProbeScore};

/// How the provider's prefix cache is modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheProfile {
    /// No prefix caching.
    None,
    /// OpenAI-style automatic prefix caching: a shared prefix of at least 1,024 tokens is
    /// cached, in 128-token steps.
    Openai,
    /// Anthropic-style: cached up to the last cache breakpoint the request shares.
    Anthropic,
}

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input: f64,
    pub cached_input: f64,
    pub output: f64,
}

/// Everything that defines one replay configuration besides the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplaySettings {
    pub strategy: StrategyConfig,
    /// The context window to replay with, in tokens.
    pub window: u64,
    /// The exact meter.
    pub encoding: Encoding,
    pub cache: CacheProfile,
    /// Prices of the replayed model (and of the summarizer's calls); `None` prices at zero.
    pub price: Option<Price>,
}

/// A summary and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub text: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Produces the summaries a plan asks for.
pub trait Summarizer: Send + Sync {
    /// Name recorded in the run manifest (`offline`, or a model).
    fn name(&self) -> String;
    /// Summarize entries `request.span` of `ctx`.
    fn summarize(&self, ctx: &Context, request: &SummaryRequest) -> Result<Summary, SummaryFailure>;
}

/// Scores one probe against a context.
pub trait Judge: Send + Sync {
    /// Name recorded with every score (`offline`, or a model).
    fn name(&self) -> String;
    /// Score `probe` against the compacted context `ctx` (the agent's view when it is asked).
    fn score(&self, conversation: &Conversation, ctx: &Context, probe: &Probe) -> ProbeScore;
}

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Params(#[from] compaction::ParamError),
    #[error("conversation {id}: {problem}")]
    Conversation { id: String, problem: String },
}

/// Replay `conversation` under `settings`.
pub fn replay(
    conversation: &Conversation,
    settings: &ReplaySettings,
    summarizer: &dyn Summarizer,
    judge: &dyn Judge,
) -> Result<PairMetrics, ReplayError> {
    let _ = (settings, summarizer, judge);
    Err(ReplayError::Conversation { id: conversation.id.clone(), problem: "replay is not implemented yet".into() })
}
