//! Judges: the [`Judge`] trait the replay calls, the offline string judge ([`offline`]) and the
//! LLM judge ([`llm`]).

pub mod llm;
pub mod offline;
pub mod text;

use compaction::{Context, Conversation, Probe};

use runlog::record::ProbeScore;

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
    /// True for a judge the replay should not wait on (a model): each checkpoint is scored on
    /// its own thread, against a copy of its context, while the replay goes on, and collected
    /// in order at the end. The offline judge is scored in place.
    fn defers(&self) -> bool {
        false
    }
}
