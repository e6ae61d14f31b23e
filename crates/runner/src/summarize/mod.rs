//! Summarizers: the [`Summarizer`] trait the replay calls, the offline extractive stand-in
//! ([`offline`]) and the summaries by a model ([`llm`]) with their prompts ([`prompts`]).

pub mod llm;
pub mod offline;
pub mod prompts;

use compaction::{Context, SummaryFailure, SummaryRequest};
use serde::{Deserialize, Serialize};

use runlog::settings::Price;

pub use offline::*;

/// A summary and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub text: String,
    /// Input tokens, cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens the provider served from its prompt cache (part of `input_tokens`).
    pub cached_tokens: u64,
}

/// What kind of failure a summary met, for the replay to react to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Any other failure: the strategy's failure path runs.
    #[default]
    Other,
    /// The summarizer's provider rejected the request as over its context window: the replay
    /// re-plans once with [`compaction::Trigger::Overflow`] (see the module docs).
    ContextLength,
    /// The response cache (mode `only`) had no answer: the pair cannot be scored.
    CacheMiss,
    /// The model endpoint failed (unreachable, refused, 401/403, 5xx after every retry, not a
    /// model's answer): the outage, not the strategy, would be measured. The strategy's
    /// failure path still runs, and the run records the pair as failed unless the experiment
    /// says `on_llm_error = "fallback"` (see [`crate::run`]).
    Endpoint,
    /// The run's budget (`max_cost`) refused the request: the pair is recorded as failed and
    /// a resume runs it again (see [`crate::run`]).
    Budget,
}

/// A failed summary and its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{failure}")]
pub struct SummaryError {
    pub failure: SummaryFailure,
    pub kind: FailureKind,
}

impl SummaryError {
    pub fn new(failure: SummaryFailure, kind: FailureKind) -> SummaryError {
        SummaryError { failure, kind }
    }
}

impl From<SummaryFailure> for SummaryError {
    fn from(failure: SummaryFailure) -> SummaryError {
        SummaryError { failure, kind: FailureKind::Other }
    }
}

/// Produces the summaries a plan asks for.
pub trait Summarizer: Send + Sync {
    /// Name recorded in the run manifest (`offline`, or a model).
    fn name(&self) -> String;
    /// Summarize entries `request.span` of `ctx`.
    fn summarize(&self, ctx: &Context, request: &SummaryRequest) -> Result<Summary, SummaryFailure>;
    /// [`Summarizer::summarize`] with the kind of a failure; the replay calls this. The default
    /// calls `summarize` and calls every failure [`FailureKind::Other`].
    fn summarize_with_kind(&self, ctx: &Context, request: &SummaryRequest) -> Result<Summary, SummaryError> {
        self.summarize(ctx, request).map_err(SummaryError::from)
    }
    /// [`Summarizer::summarize_with_kind`] with the conversation's [`offline::Store`], when
    /// the caller keeps one (a run keeps one per conversation, shared by its workers): the
    /// offline summarizer keeps its work on each recorded message there for every
    /// configuration. The replay calls this; the default ignores the store.
    fn summarize_with_store(
        &self,
        ctx: &Context,
        request: &SummaryRequest,
        store: Option<&offline::Store>,
    ) -> Result<Summary, SummaryError> {
        let _ = store;
        self.summarize_with_kind(ctx, request)
    }
    /// The summarizer's own price, when it differs from the replayed model's (a model with its
    /// own entry in the price table). `None`: its tokens are priced like the replayed model's.
    fn price(&self) -> Option<Price> {
        None
    }
}
