//! compactbench's engine: load and validate datasets, replay conversations through strategies,
//! summarize and judge offline, run experiment matrices and keep a resumable result log.

pub mod calibrate;
pub mod experiment;
pub mod judge;
pub mod llm_judge;
pub mod llm_prompts;
pub mod llm_setup;
pub mod llm_summarize;
pub mod record;
pub mod replay;
pub mod run;
pub mod summarize;
