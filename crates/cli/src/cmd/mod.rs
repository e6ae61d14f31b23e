//! One module per subcommand; each exposes `Args` and `run(Args) -> anyhow::Result<u8>`.

pub mod gate;
pub mod merge;
pub mod report;
pub mod run;
pub mod strategies;
pub mod synth;
pub mod validate;
