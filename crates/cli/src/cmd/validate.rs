//! `compactbench validate FILE...`.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Dataset files (JSONL, one conversation per line).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("validate: not implemented yet")
}
