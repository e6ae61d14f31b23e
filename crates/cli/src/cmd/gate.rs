//! `compactbench gate --baseline FILE --current FILE [--tolerance METRIC=DELTA]...`: compare a
//! run's `summary.csv` with a baseline's (see `report::gate` for the rules and the default
//! tolerances).
//!
//! Prints a markdown table of every change to stdout, and appends it to the file named by
//! `$GITHUB_STEP_SUMMARY` when that is set (the job summary of a GitHub Actions step).
//! Exit 0 when nothing regressed, 1 on a regression or a configuration missing from the
//! current run, 2 when a file cannot be read, cannot be compared (no rows, a gated column only
//! one file has, no `retention_mean`, a value that is not a finite number) or a tolerance is
//! malformed.

use std::io::Write;
use std::path::PathBuf;

use report::gate::{self, SummaryTable, Tolerances};

use crate::exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The baseline's summary.csv (or its run folder).
    #[arg(long, value_name = "FILE")]
    baseline: PathBuf,
    /// The current run's summary.csv (or its run folder).
    #[arg(long, value_name = "FILE")]
    current: PathBuf,
    /// Override a metric's tolerance: retention, at_risk_retention, overflow_rate, violations,
    /// failed or cost; a plain number is absolute, `N%` is relative to the baseline.
    /// Defaults: retention=0.01, at_risk_retention=0.02, overflow_rate=0, violations=0,
    /// failed=0, cost=5%.
    #[arg(long = "tolerance", value_name = "METRIC=DELTA")]
    tolerances: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let mut tolerances = Tolerances::default();
    for t in &args.tolerances {
        if let Err(e) = tolerances.apply(t) {
            eprintln!("error: {e}");
            return Ok(exit::USAGE);
        }
    }
    let verdict = SummaryTable::read(&args.baseline)
        .and_then(|b| Ok((b, SummaryTable::read(&args.current)?)))
        .and_then(|(baseline, current)| gate::compare_checked(&baseline, &current, &tolerances));
    let verdict = match verdict {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    let table = verdict.markdown();
    print!("{table}");
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{table}\n").as_bytes()));
        if let Err(e) = appended {
            eprintln!("warning: cannot append to $GITHUB_STEP_SUMMARY ({}): {e}", PathBuf::from(path).display());
        }
    }
    if verdict.passed() {
        Ok(exit::OK)
    } else {
        for c in verdict.failures() {
            if c.metric.is_empty() {
                eprintln!("regression: configuration {} is missing from the current run", c.config_id);
            } else {
                eprintln!("regression: {} {}", c.config_id, c.metric);
            }
        }
        Ok(exit::FAILED)
    }
}
