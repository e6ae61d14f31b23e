//! `compactlens gate --baseline FILE --current FILE [--tolerance METRIC=DELTA]...`: compare a
//! run's `summary.csv` with a baseline's (see `report::gate` for the rules and the default
//! tolerances).
//!
//! Pair by pair when both runs' `results.csv` are known: `--baseline-results` and
//! `--current-results`, or `--baseline` and `--current` naming run folders that hold one. Then
//! retention and at-risk retention fail on a loss a paired test finds significant (and beyond
//! the tolerance), not on the baseline's interval.
//!
//! Prints a markdown table of every change to stdout. The table and the current run's verdict
//! (`report::verdict`, when `--current` is a run folder or the `summary.csv` of one) are
//! appended as markdown to the file named by `$GITHUB_STEP_SUMMARY` when that is set (the job
//! summary of a GitHub Actions step), and otherwise written to `--summary FILE` when given.
//! The summary file is never one the gate reads (refused, exit 2, before anything is written),
//! and a baseline that is the current run (the same file or folder however named, or a copy of
//! the run folder) is refused (exit 2).
//! Exit 0 when nothing regressed, 1 on a regression or a configuration missing from the
//! current run, 2 when a file cannot be read, cannot be compared (no rows, a gated column only
//! one file has, no `retention_mean`, a value that is not a finite number) or a tolerance is
//! malformed.

use std::io::Write;
use std::path::{Path, PathBuf};

use report::gate::{self, ResultsTable, SummaryTable, Tolerances};

use crate::exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The baseline's summary.csv (or its run folder).
    #[arg(long, value_name = "FILE")]
    baseline: PathBuf,
    /// The current run's summary.csv (or its run folder).
    #[arg(long, value_name = "FILE")]
    current: PathBuf,
    /// Override a metric's tolerance: retention, at_risk_retention, overflow_rate,
    /// rejected_requests_openai, rejected_requests_anthropic, findings, failed or cost; a plain
    /// number is absolute, `N%` is relative to the baseline. Defaults: retention=0.01,
    /// at_risk_retention=0.02, overflow_rate=0, rejected_requests_*=0, failed=0, cost=5%;
    /// findings are reported and never fail unless given a tolerance.
    #[arg(long = "tolerance", value_name = "METRIC=DELTA")]
    tolerances: Vec<String>,
    /// The baseline's results.csv, for the paired gate (with --current-results).
    #[arg(long, value_name = "FILE", requires = "current_results")]
    baseline_results: Option<PathBuf>,
    /// The current run's results.csv, for the paired gate (with --baseline-results).
    #[arg(long, value_name = "FILE", requires = "baseline_results")]
    current_results: Option<PathBuf>,
    /// Seed of the paired bootstrap.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Write the result and the current run's verdict as markdown to FILE (used when
    /// $GITHUB_STEP_SUMMARY is not set).
    #[arg(long, value_name = "FILE")]
    summary: Option<PathBuf>,
}

/// The run folder of `--current`: the folder itself, or the folder of its summary.csv.
fn current_run(current: &std::path::Path) -> Option<PathBuf> {
    let dir = if current.is_dir() { current.to_path_buf() } else { current.parent()?.to_path_buf() };
    dir.join(report::verdict::RUN_JSON).is_file().then_some(dir)
}

/// The current run's verdict as markdown, or why there is none.
fn verdict_markdown(current: &std::path::Path) -> String {
    match current_run(current) {
        None => format!("No verdict: {} is not in a run folder (no run.json).\n", current.display()),
        Some(dir) => match report::verdict::Verdict::read(&dir) {
            Ok(v) => v.markdown(),
            Err(e) => format!("No verdict: {e}\n"),
        },
    }
}

/// The two results files of the paired gate, when given or found in run folders.
fn results_files(args: &Args) -> Option<(PathBuf, PathBuf)> {
    match (&args.baseline_results, &args.current_results) {
        (Some(b), Some(c)) => Some((b.clone(), c.clone())),
        _ => {
            let (b, c) = (args.baseline.join(report::RESULTS_CSV), args.current.join(report::RESULTS_CSV));
            if !(args.baseline.is_dir() && args.current.is_dir()) {
                return None;
            }
            // A results file on one side only: the paired test cannot run, and says so.
            match (b.exists(), c.exists()) {
                (true, true) => return Some((b, c)),
                (true, false) | (false, true) => {
                    let missing = if b.exists() { &c } else { &b };
                    tell!(
                        "note: no paired test: {} does not exist; retention is gated on the baseline's interval",
                        missing.display()
                    );
                }
                (false, false) => {}
            }
            None
        }
    }
}

/// The run folder of a gate input: the folder itself, or the folder of a file in one.
fn folder_of(input: &Path) -> PathBuf {
    if input.is_dir() {
        input.to_path_buf()
    } else {
        input.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf()
    }
}

/// Every file the gate may read: the inputs, and the run folders' files the gate and the
/// verdict read.
fn inputs_read(args: &Args) -> Vec<PathBuf> {
    let mut files = vec![args.baseline.clone(), args.current.clone()];
    files.extend(args.baseline_results.iter().cloned());
    files.extend(args.current_results.iter().cloned());
    for side in [&args.baseline, &args.current] {
        let dir = folder_of(side);
        for name in [report::SUMMARY_CSV, report::RESULTS_CSV, report::PROBES_CSV, report::verdict::RUN_JSON] {
            files.push(dir.join(name));
        }
    }
    files
}

/// Why the baseline and the current run are one run: the same file or folder (by its
/// canonical path, so `./..` and links are seen through), or two run folders holding the
/// same run (a copy: one experiment, started at one moment).
fn same_run(args: &Args) -> Option<String> {
    if crate::output::same_file(&args.baseline, &args.current) {
        return Some("they are the same file".into());
    }
    let (b, c) = (folder_of(&args.baseline), folder_of(&args.current));
    let both_runs = b.join(report::verdict::RUN_JSON).is_file() && c.join(report::verdict::RUN_JSON).is_file();
    if both_runs && crate::output::same_file(&b, &c) {
        return Some(format!("they are in the same run folder {}", b.display()));
    }
    if !both_runs {
        return None;
    }
    // Two runs, even of one experiment, differ in their manifests (their times); a copied
    // folder does not.
    let read = |dir: &Path| inputs::read(&dir.join(report::verdict::RUN_JSON), inputs::Kind::Manifest).ok();
    let (Some(xb), Some(xc)) = (read(&b), read(&c)) else {
        return None;
    };
    let manifest = runlog::log::read_manifest(&b).ok()?;
    (xb == xc).then(|| {
        format!(
            "{} and {} hold the same run (experiment {}, started at {}, the same run.json): one is a copy of the other",
            b.display(),
            c.display(),
            manifest.experiment_id,
            manifest.started_at
        )
    })
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    // Checked before anything is read or written: the gate never writes over its inputs, and
    // a run compared with itself measures nothing.
    let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()).map(PathBuf::from);
    let target = step_summary.map(|p| (p, true)).or(args.summary.clone().map(|p| (p, false)));
    if let Some((path, append)) = &target {
        let inputs = inputs_read(&args);
        if let Some(input) = crate::output::clobbers(path, inputs.iter().map(PathBuf::as_path)) {
            let what = if *append { "GITHUB_STEP_SUMMARY" } else { "--summary" };
            tell!(
                "error: {what} {} is also an input of the gate ({}); the gate never writes over its inputs: name another file",
                path.display(),
                input.display()
            );
            return Ok(exit::USAGE);
        }
    }
    let mut tolerances = Tolerances::default();
    for t in &args.tolerances {
        if let Err(e) = tolerances.apply(t) {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    }
    if let Some(why) = same_run(&args) {
        tell!(
            "error: --baseline {} and --current {} are one run ({why}): comparing a run with itself measures nothing",
            args.baseline.display(),
            args.current.display()
        );
        return Ok(exit::USAGE);
    }
    let verdict = SummaryTable::read(&args.baseline)
        .and_then(|b| Ok((b, SummaryTable::read(&args.current)?)))
        .and_then(|(baseline, current)| {
            gate::check_comparable(&baseline, &current)?;
            Ok(match results_files(&args) {
                None => gate::compare(&baseline, &current, &tolerances),
                Some((b, c)) => {
                    let (b, c) = (ResultsTable::read(&b)?, ResultsTable::read(&c)?);
                    gate::check_paired(&baseline, &current, &b, &c)?;
                    gate::compare_paired(&baseline, &current, &b, &c, &tolerances, args.seed)
                }
            })
        });
    let verdict = match verdict {
        Ok(v) => v,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    let table = verdict.markdown();
    say_part!("{table}");
    // The job summary is appended to (other steps write there too); --summary is written anew.
    if let Some((path, append)) = target {
        let summary = format!("{table}\n{}\n", verdict_markdown(&args.current));
        let written = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&path)
            .and_then(|mut f| f.write_all(summary.as_bytes()));
        if let Err(e) = written {
            tell!("warning: cannot write the summary to {}: {e}", path.display());
        }
    }
    if verdict.passed() {
        Ok(exit::OK)
    } else {
        for c in verdict.failures() {
            if c.metric.is_empty() {
                tell!("regression: configuration {} is missing from the current run", c.config_id);
            } else {
                tell!("regression: {} {}", c.config_id, c.metric);
            }
        }
        Ok(exit::FAILED)
    }
}
