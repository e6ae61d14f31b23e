//! `compactlens report DIR`: re-render `report.html` in a run folder from its `run.json` and
//! `results.jsonl` (the probes' questions and facts are read from the experiment's datasets
//! when they can still be found). Prints the page's path. Exit 2 when the folder is not a run.

use std::path::PathBuf;

use crate::exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run folder (holds run.json and results.jsonl).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match report::html::write_report(&args.dir, compaction_strategies::family) {
        Ok(path) => {
            say!("{}", path.display());
            Ok(exit::OK)
        }
        Err(e) => {
            tell!("error: {e}");
            Ok(exit::USAGE)
        }
    }
}
