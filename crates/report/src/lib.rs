//! compactlens's views of a run log: the CSV files of a run folder and the per-configuration
//! summary with bootstrap confidence intervals.
//!
//! Everything here is computed from a [`runlog::log::RunData`] (the manifest and the records
//! of `results.jsonl`), so a run, a resumed run and a merge of shards write the same files.
//!
//! ```no_run
//! use std::path::Path;
//!
//! let data = runlog::log::RunData::read(Path::new("reports/default-20250101-000000")).unwrap();
//! report::write_outputs(Path::new("reports/default-20250101-000000"), &data).unwrap();
//! ```

use std::path::{Path, PathBuf};

use runlog::log::RunData;

pub mod csv;
pub mod drift;
pub mod gate;
pub mod html;
pub mod real;
pub mod stats;
pub mod summary;
pub mod verdict;

/// File names of the outputs in a run folder.
pub const RESULTS_CSV: &str = "results.csv";
pub const SUMMARY_CSV: &str = "summary.csv";
pub const PROBES_CSV: &str = "probes.csv";
pub const COMPACTIONS_CSV: &str = "compactions.csv";

/// Why an output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {detail}", path.display())]
    Csv { path: PathBuf, detail: String },
    /// The run folder's manifest or log cannot be read.
    #[error(transparent)]
    Run(#[from] runlog::log::RunError),
}

/// Write `results.csv`, `summary.csv`, `probes.csv` and `compactions.csv` into `dir`, and
/// `real_vs_stand_in.csv` when the run has a `recorded` configuration ([`real`]).
pub fn write_outputs(dir: &Path, data: &RunData) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io { path: dir.to_path_buf(), source })?;
    let experiment = &data.manifest.experiment;
    csv::write_file(&dir.join(RESULTS_CSV), &csv::RESULTS_HEADER, &csv::result_rows(&data.records))?;
    let summary = csv::summary_rows(&experiment.configurations, &data.records, data.manifest.seed);
    csv::write_file(&dir.join(SUMMARY_CSV), &csv::SUMMARY_HEADER, &summary)?;
    csv::write_file(&dir.join(PROBES_CSV), &csv::PROBES_HEADER, &csv::probe_rows(&data.records))?;
    csv::write_file(&dir.join(COMPACTIONS_CSV), &csv::COMPACTIONS_HEADER, &csv::compaction_rows(&data.records))?;
    if real::has_recorded(data) {
        let rows: Vec<real::RealRow> = real::compare(data).iter().map(real::RealRow::of).collect();
        csv::write_file(&dir.join(real::REAL_CSV), &real::REAL_HEADER, &rows)?;
    }
    Ok(())
}
