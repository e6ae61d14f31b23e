//! compactlens's engine: load and validate datasets, replay conversations through strategies,
//! summarize and judge offline, run experiment matrices and keep a resumable result log.

pub mod calibrate;
pub mod catalog;
pub mod directives;
pub mod dry_run;
pub mod external;
pub mod judge;
pub mod llm_setup;
pub mod probegen;
pub mod replay;
pub mod run;
pub mod session;
pub mod summarize;
pub mod timing;
