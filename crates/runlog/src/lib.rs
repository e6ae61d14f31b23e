//! The run log of compactlens: what a run records and how it is read back.
//!
//! Serde data and file I/O only (no network, no threads, no strategy): the experiment as parsed
//! ([`experiment`], checked against the strategy catalog its caller supplies ([`catalog`]), with
//! its LLM settings in [`llm_settings`] and the replay settings it names in [`settings`]), one
//! record per (conversation, configuration) pair ([`record`]), and the run folder's files
//! ([`log`]: `results.jsonl`, `run.json`, written with [`atomic`]; [`folder`]: the lock and which
//! folders a command writes into; [`merge`]: shards into one). The runner writes these; the
//! report reads nothing else, so a report can be rendered again from a run folder alone.

pub mod atomic;
pub mod catalog;
pub mod experiment;
pub mod external;
pub mod folder;
pub mod llm_settings;
pub mod log;
pub mod merge;
pub mod record;
pub mod settings;
