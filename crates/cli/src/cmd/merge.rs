//! `compactlens merge DIR... --out DIR`: combine the shard folders of one experiment.
//!
//! Records are deduplicated by pair key; the folders must hold the same experiment (exit 2
//! otherwise). Writes the merged `results.jsonl`, `run.json`, the CSV files and
//! `report.html`. Exit 1 when a pair failed or has no record (a shard is missing).

use std::path::PathBuf;
use std::time::Instant;

use crate::exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run folders to combine (the shards of one experiment).
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// The merged run folder.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let started = Instant::now();
    // The merged folder's lock is held until its last file is written.
    let (data, _lock) = match runlog::merge::merge_locked(&args.dirs, &args.out) {
        Ok(d) => d,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    report::write_outputs(&args.out, &data)?;
    report::html::write_report_for(&args.out, &data, compaction_strategies::family)?;
    Ok(super::run::finish(&data, &args.out, started, false, false))
}
