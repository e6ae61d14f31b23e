//! One module per subcommand; each exposes `Args` and `run(Args) -> anyhow::Result<u8>`.

pub mod conform;
pub mod gate;
pub mod generated;
pub mod import;
pub mod judge;
pub mod merge;
pub mod probes;
pub mod report;
pub mod run;
pub mod strategies;
pub mod synth;
pub mod validate;
pub mod verdict;
