//! Judges: the [`Judge`] trait the replay calls, the offline string judge ([`offline`]) and the
//! LLM judge ([`llm`]).

pub mod llm;
pub mod offline;
pub mod text;

use compaction::{Context, Conversation, Probe};

use runlog::record::ProbeScore;

pub use crate::directives::Listed;

pub use offline::*;

/// Scores one probe against a context.
pub trait Judge: Send + Sync {
    /// Name recorded with every score (`offline`, or a model).
    fn name(&self) -> String;
    /// Score `probe` against the compacted context `ctx` (the agent's view when it is asked).
    fn score(&self, conversation: &Conversation, ctx: &Context, probe: &Probe) -> ProbeScore;
    /// Score every probe asked at one checkpoint against the same context, in order. The
    /// default scores them one by one; a judge that prepares the context once overrides it.
    fn score_checkpoint(&self, conversation: &Conversation, ctx: &Context, probes: &[&Probe]) -> Vec<ProbeScore> {
        probes.iter().map(|p| self.score(conversation, ctx, p)).collect()
    }
    /// [`Judge::score_checkpoint`] with the conversation's [`offline::Store`], when the caller
    /// keeps one (a run keeps one per conversation, shared by its workers): the offline judge
    /// prepares each recorded message there once for every configuration. The replay calls
    /// this; the default ignores the store.
    fn score_checkpoint_with(
        &self,
        conversation: &Conversation,
        ctx: &Context,
        probes: &[&Probe],
        store: Option<&std::sync::Arc<offline::Store>>,
    ) -> Vec<ProbeScore> {
        let _ = store;
        self.score_checkpoint(conversation, ctx, probes)
    }
    /// True for a judge the replay should not wait on (a model): each checkpoint is scored on
    /// its own thread, against a copy of its context, while the replay goes on, and collected
    /// in order at the end. The offline judge is scored in place.
    fn defers(&self) -> bool {
        false
    }
    /// The user directives a model-written `summary` states, as the judge's model lists them
    /// ([`crate::directives::fabricated_listed`] checks each); `None` for a judge without a
    /// model (the offline judge: the offline reading of [`crate::directives`] alone applies).
    fn list_directives(&self, _summary: &str) -> Option<Result<Vec<Listed>, ListError>> {
        None
    }
}

/// Why the judge's model gave no list of directives for a summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListError {
    /// The response cache could not answer in mode `only`.
    #[error("the response cache has no answer for the directive list: {0}")]
    CacheMiss(String),
    /// The run's budget refused the request.
    #[error("the directive list was not asked for: {0}")]
    OverBudget(String),
    /// The endpoint failed (unreachable, refused, 5xx after every retry).
    #[error("the directive list request failed at the endpoint: {0}")]
    Endpoint(String),
    /// The model answered, but not with the list's JSON object (or the request failed otherwise).
    #[error("the directive list could not be read: {0}")]
    Unreadable(String),
}
