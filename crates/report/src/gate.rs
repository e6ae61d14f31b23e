//! The regression gate: compare a run's `summary.csv` with a baseline's, configuration by
//! configuration (matched by `config_id`), and decide whether anything got worse.
//!
//! Rows are matched by configuration and dataset: a summary with a `dataset` column has a
//! pooled row per configuration (`dataset = all`, matched by `config_id` alone, so a baseline
//! written before per-dataset rows existed still gates the pooled rows) and one row per
//! dataset, named `<config_id>@<dataset>` in the table. Every row is gated the same way.
//!
//! A gated metric *regresses* when it moves the wrong way by more than its tolerance and, for
//! the metrics with a confidence interval in `summary.csv` (retention and at-risk retention),
//! when the current mean also falls outside the baseline's 95% interval. A configuration of
//! the baseline that the current run lacks fails the gate; a configuration new in the current
//! run is a note.
//!
//! | metric | column | worse when | default tolerance |
//! |---|---|---|---|
//! | `retention` | `retention_mean` (CI `retention_ci_low`..`high`) | lower | 0.01 (one point) |
//! | `at_risk_retention` | `at_risk_retention_mean` (CI) | lower | 0.02 |
//! | `overflow_rate` | `overflow_rate` | higher | 0 (any new overflow) |
//! | `rejected_requests_openai` | `rejected_requests_openai` | higher | 0 (any new request OpenAI refuses) |
//! | `rejected_requests_anthropic` | `rejected_requests_anthropic` | higher | 0 (any new request Anthropic refuses) |
//! | `findings` | `findings` | higher | reported only (a tolerance makes them fail) |
//! | `failed` | `failed` | higher | 0 (any newly failing conversation) |
//! | `cost` | `cost_usd_mean` | higher | 5% of the baseline |
//!
//! **Paired.** Given both runs' `results.csv` ([`compare_paired`]), retention and at-risk
//! retention are judged pair by pair: the per-conversation differences of the two runs (the
//! same conversations replayed), a regression when the mean difference is worse than the
//! tolerance and [`paired_test`] (a seeded bootstrap of the mean difference, or a sign test
//! under [`SIGN_TEST_BELOW`] pairs) finds the loss significant at 95%. The baseline's interval
//! is not used then: it measures how retention varies across conversations, which the pairing
//! removes, so a far smaller loss is seen (`reports/README.md` has the detection table).
//!
//! A tolerance is written `METRIC=DELTA`: a plain number is absolute, in the metric's unit
//! (a share for retention and overflow rate, a count for violations and failed, US dollars for
//! cost); a number with `%` is relative to the baseline's value (`cost=10%`). A metric that
//! the baseline has and the current run no longer reports (an empty cell) regresses too.
//!
//! Every other numeric column that changed (compression ratio, cache-hit rate, peak tokens,
//! at-risk retention per kind, ...) is listed as information, when both files have it: a
//! baseline written before a column existed still gates, and that column is not compared. The library returns the verdict and a markdown table; the
//! command prints it and picks the exit code.
//!
//! ```
//! use report::gate::{compare, SummaryTable, Tolerances};
//!
//! let header = "config_id,retention_mean,retention_ci_low,retention_ci_high,violations\n";
//! let base = SummaryTable::parse(&format!("{header}a,0.9,0.85,0.95,0\n"), "base.csv").unwrap();
//! let same = SummaryTable::parse(&format!("{header}a,0.9,0.85,0.95,0\n"), "cur.csv").unwrap();
//! let worse = SummaryTable::parse(&format!("{header}a,0.6,0.5,0.7,1\n"), "cur.csv").unwrap();
//! assert!(compare(&base, &same, &Tolerances::default()).passed());
//! let report = compare(&base, &worse, &Tolerances::default());
//! assert!(!report.passed());
//! assert!(report.markdown().contains("| a | retention | 90.0% | 60.0% |"));
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::stats::mean;
use crate::summary::{bootstrap_ci, metric_seed};

/// Why the gate could not compare.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{file}:{line}: {problem}")]
    Csv { file: String, line: u64, problem: String },
    #[error("{file}:{line}: column `{column}`: {value:?} is not a number")]
    Number { file: String, line: u64, column: String, value: String },
    #[error("{file}: no `config_id` column; is this a summary.csv?")]
    NoConfigId { file: String },
    #[error("{file}:{line}: configuration {config_id} appears twice")]
    Duplicate { file: String, line: u64, config_id: String },
    #[error("--tolerance {given}: {problem}")]
    Tolerance { given: String, problem: String },
    #[error("{file}:{line}: column `{column}`: {value:?} is not a finite number")]
    NotFinite { file: String, line: u64, column: String, value: String },
    #[error("{file}:1: no configuration rows (an empty or header-only file cannot be compared)")]
    Empty { file: String },
    #[error("{file}:1: no column `{column}`{}; the gate cannot compare it", other.as_ref().map(|o| format!(" (which {o} has)")).unwrap_or_default())]
    MissingColumn { file: String, column: String, other: Option<String> },
    #[error("{file}:{line}: column `{column}`: {value:?} {problem}")]
    OutOfRange { file: String, line: u64, column: String, value: String, problem: String },
    #[error("{file}:1: column `{column}` appears twice")]
    DuplicateColumn { file: String, column: String },
    #[error("{file}:{line}: column `{column}` is empty; every row needs one")]
    EmptyId { file: String, line: u64, column: String },
    #[error(
        "{file}: no `{column}` for configuration {config_id}, which {summary} has: the paired test cannot run on it"
    )]
    NoPairs { file: String, column: String, config_id: String, summary: String },
}

/// Columns holding a share (0 to 1): every retention figure and every rate.
fn is_share(column: &str) -> bool {
    column.starts_with("retention")
        || column.starts_with("at_risk_retention")
        || column.starts_with("paired_at_risk_retention")
        || column.ends_with("_rate")
}

/// Columns holding a count (a non-negative integer), in `summary.csv` and `results.csv`.
fn is_count(column: &str) -> bool {
    const COUNTS: [&str; 27] = [
        "window",
        "conversations",
        "failed",
        "at_risk_conversations",
        "calls",
        "violations",
        "peak_tokens_max",
        "rejected_requests_openai",
        "rejected_requests_anthropic",
        "findings",
        "compacted_conversations",
        "paired_at_risk_probes",
        "compactions",
        "overflows",
        "peak_tokens",
        "input_tokens",
        "cached_tokens",
        "output_tokens",
        "uncompacted_input_tokens",
        "final_tokens",
        "summarizer_calls",
        "summarizer_failures",
        "probes",
        "at_risk_probes",
        "first_rejected_call",
        "recording_violations",
        "completed",
    ];
    COUNTS.contains(&column) || column.starts_with("probes_")
}

/// Columns that may not be negative besides shares and counts: costs and means of counts.
fn is_non_negative(column: &str) -> bool {
    column.starts_with("cost_usd") || column.starts_with("summary_cost_usd") || column == "compactions_mean"
}

/// The largest count a file can hold exactly (2^53): past it a "count" is no count at all.
const MAX_COUNT: f64 = 9_007_199_254_740_992.0;

/// Refuse a value its column cannot hold: a share outside [0, 1], a count that is negative or
/// not whole, a negative cost. `None` when the value is possible.
fn impossible(column: &str, v: f64) -> Option<&'static str> {
    if is_share(column) && !(0.0..=1.0).contains(&v) {
        Some("is not a share (between 0 and 1)")
    } else if is_count(column) && (v < 0.0 || v.fract() != 0.0 || v > MAX_COUNT) {
        Some("is not a count (a whole number, zero or more, at most 2^53)")
    } else if is_non_negative(column) && v < 0.0 {
        Some("is negative")
    } else {
        None
    }
}

/// The header's columns, trimmed; a column named twice is refused (which of the two values
/// would be compared?).
fn unique_header(reader: &mut ::csv::Reader<&[u8]>, file: &str) -> Result<Vec<String>, GateError> {
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| GateError::Csv { file: file.into(), line: 1, problem: e.to_string() })?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for h in &header {
        if !seen.insert(h.as_str()) {
            return Err(GateError::DuplicateColumn { file: file.into(), column: h.clone() });
        }
    }
    Ok(header)
}

/// A cell's number, refused when it is not one, not finite, or impossible for its column.
fn cell_value(cell: &str, column: &str, file: &str, line: u64) -> Result<f64, GateError> {
    // `completed` is a boolean in results.csv: 1 when the conversation completed, 0 when not.
    let v: f64 = match cell {
        "true" => Ok(1.0),
        "false" => Ok(0.0),
        _ => cell.parse(),
    }
    .map_err(|_| GateError::Number { file: file.into(), line, column: column.into(), value: cell.into() })?;
    // `inf`, `NaN` and `1e400` (which parses as infinity) would compare as a huge improvement
    // or never compare at all.
    if !v.is_finite() {
        return Err(GateError::NotFinite { file: file.into(), line, column: column.into(), value: cell.into() });
    }
    if let Some(problem) = impossible(column, v) {
        return Err(GateError::OutOfRange {
            file: file.into(),
            line,
            column: column.into(),
            value: cell.into(),
            problem: problem.into(),
        });
    }
    Ok(v)
}

/// A metric the gate can fail on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    Retention,
    AtRiskRetention,
    OverflowRate,
    RejectedOpenai,
    RejectedAnthropic,
    Findings,
    Failed,
    Cost,
}

impl Metric {
    pub const ALL: [Metric; 8] = [
        Metric::Retention,
        Metric::AtRiskRetention,
        Metric::OverflowRate,
        Metric::RejectedOpenai,
        Metric::RejectedAnthropic,
        Metric::Findings,
        Metric::Failed,
        Metric::Cost,
    ];

    /// The name used in `--tolerance` and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Retention => "retention",
            Metric::AtRiskRetention => "at_risk_retention",
            Metric::OverflowRate => "overflow_rate",
            Metric::RejectedOpenai => "rejected_requests_openai",
            Metric::RejectedAnthropic => "rejected_requests_anthropic",
            Metric::Findings => "findings",
            Metric::Failed => "failed",
            Metric::Cost => "cost",
        }
    }

    /// The `summary.csv` column holding the value.
    pub fn column(self) -> &'static str {
        match self {
            Metric::Retention => "retention_mean",
            Metric::AtRiskRetention => "at_risk_retention_mean",
            Metric::OverflowRate => "overflow_rate",
            Metric::RejectedOpenai => "rejected_requests_openai",
            Metric::RejectedAnthropic => "rejected_requests_anthropic",
            Metric::Findings => "findings",
            Metric::Failed => "failed",
            Metric::Cost => "cost_usd_mean",
        }
    }

    /// The columns of the baseline's confidence interval, if the metric has one.
    pub fn ci_columns(self) -> Option<(&'static str, &'static str)> {
        match self {
            Metric::Retention => Some(("retention_ci_low", "retention_ci_high")),
            Metric::AtRiskRetention => Some(("at_risk_retention_ci_low", "at_risk_retention_ci_high")),
            _ => None,
        }
    }

    /// The `results.csv` column the paired gate compares conversation by conversation.
    pub fn paired_column(self) -> Option<&'static str> {
        match self {
            Metric::Retention => Some("retention"),
            Metric::AtRiskRetention => Some("at_risk_retention"),
            _ => None,
        }
    }

    /// Higher values are better.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::Retention | Metric::AtRiskRetention)
    }

    pub fn default_tolerance(self) -> Tolerance {
        match self {
            Metric::Retention => Tolerance::Absolute(0.01),
            Metric::AtRiskRetention => Tolerance::Absolute(0.02),
            Metric::OverflowRate | Metric::RejectedOpenai | Metric::RejectedAnthropic | Metric::Failed => {
                Tolerance::Absolute(0.0)
            }
            Metric::Findings => Tolerance::Report,
            Metric::Cost => Tolerance::Relative(0.05),
        }
    }

    /// A metric by its name, its column, or a short alias (`overflows`, `cost_usd`).
    pub fn parse(name: &str) -> Option<Metric> {
        let n = name.trim().to_ascii_lowercase().replace('-', "_");
        Metric::ALL.into_iter().find(|m| m.name() == n || m.column() == n).or(match n.as_str() {
            "overflows" | "overflow" => Some(Metric::OverflowRate),
            "cost_usd" => Some(Metric::Cost),
            "at_risk" => Some(Metric::AtRiskRetention),
            "rejected_openai" | "openai" => Some(Metric::RejectedOpenai),
            "rejected_anthropic" | "anthropic" => Some(Metric::RejectedAnthropic),
            _ => None,
        })
    }

    fn format(self, v: f64) -> String {
        match self {
            Metric::Retention | Metric::AtRiskRetention | Metric::OverflowRate => format!("{:.1}%", v * 100.0),
            Metric::RejectedOpenai | Metric::RejectedAnthropic | Metric::Findings | Metric::Failed => format!("{v}"),
            Metric::Cost => format!("${}", trim(&format!("{v:.8}"))),
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn trim(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// How far a metric may move the wrong way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    /// In the metric's own unit.
    Absolute(f64),
    /// A share of the baseline's value (0.05 = 5%).
    Relative(f64),
    /// Any change is reported and none fails (the default for findings).
    Report,
}

impl Tolerance {
    fn allowed(self, baseline: f64) -> f64 {
        match self {
            Tolerance::Absolute(d) => d,
            Tolerance::Relative(r) => r * baseline.abs(),
            Tolerance::Report => f64::INFINITY,
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::Absolute(d) => write!(f, "{d}"),
            Tolerance::Relative(r) => write!(f, "{}%", trim(&format!("{:.4}", r * 100.0))),
            Tolerance::Report => f.write_str("reported only"),
        }
    }
}

/// The tolerance of every gated metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Tolerances(BTreeMap<Metric, Tolerance>);

impl Default for Tolerances {
    fn default() -> Tolerances {
        Tolerances(Metric::ALL.into_iter().map(|m| (m, m.default_tolerance())).collect())
    }
}

impl Tolerances {
    pub fn get(&self, m: Metric) -> Tolerance {
        self.0.get(&m).copied().unwrap_or(m.default_tolerance())
    }

    pub fn set(&mut self, m: Metric, t: Tolerance) {
        self.0.insert(m, t);
    }

    /// Apply one `METRIC=DELTA` override.
    pub fn apply(&mut self, given: &str) -> Result<(), GateError> {
        let (m, t) = parse_tolerance(given)?;
        self.set(m, t);
        Ok(())
    }
}

/// Parse `METRIC=DELTA` (`retention=0.02`, `cost=10%`).
pub fn parse_tolerance(given: &str) -> Result<(Metric, Tolerance), GateError> {
    let err = |problem: String| GateError::Tolerance { given: given.to_string(), problem };
    let (name, value) =
        given.split_once('=').ok_or_else(|| err("expected METRIC=DELTA, e.g. retention=0.02".into()))?;
    let metric = Metric::parse(name).ok_or_else(|| {
        err(format!("unknown metric {:?} (one of: {})", name.trim(), Metric::ALL.map(Metric::name).join(", ")))
    })?;
    let value = value.trim();
    let (number, relative) = match value.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (value, false),
    };
    let v: f64 = number.parse().map_err(|_| err(format!("{value:?} is not a number")))?;
    if !v.is_finite() || v < 0.0 {
        return Err(err("the tolerance must be a finite number, zero or more".into()));
    }
    Ok((metric, if relative { Tolerance::Relative(v / 100.0) } else { Tolerance::Absolute(v) }))
}

/// One row of a summary file: its numeric and text cells by column.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SummaryEntry {
    /// The row's key: the configuration id, followed by `@<dataset>` for a per-dataset row.
    pub config_id: String,
    /// The row's dataset; empty in a file without a `dataset` column (the pooled rows).
    pub dataset: String,
    pub strategy: String,
    /// Numeric cells; an empty cell is absent.
    pub values: BTreeMap<String, f64>,
}

/// A `summary.csv`, by configuration, in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SummaryTable {
    pub file: String,
    /// Numeric columns, in file order.
    pub columns: Vec<String>,
    pub entries: Vec<SummaryEntry>,
}

/// Columns that hold text, not numbers.
const TEXT_COLUMNS: [&str; 7] =
    ["config_id", "dataset", "strategy", "params", "judge", "applicable", "inapplicable_reason"];

/// The key a row is matched by: its configuration, and its dataset unless it is the pooled
/// row (`all`) or the file has no `dataset` column.
fn row_key(config_id: &str, dataset: &str) -> String {
    if dataset.is_empty() || dataset == crate::summary::ALL_DATASETS {
        config_id.to_string()
    } else {
        format!("{config_id}@{dataset}")
    }
}

impl SummaryEntry {
    /// The pooled row of its configuration (or a file without per-dataset rows).
    pub fn is_pooled(&self) -> bool {
        self.dataset.is_empty() || self.dataset == crate::summary::ALL_DATASETS
    }

    /// The configuration id alone, without the `@<dataset>` of a per-dataset row.
    pub fn configuration(&self) -> &str {
        if self.is_pooled() {
            return &self.config_id;
        }
        self.config_id.strip_suffix(self.dataset.as_str()).and_then(|c| c.strip_suffix('@')).unwrap_or(&self.config_id)
    }
}

impl SummaryTable {
    /// Read a `summary.csv` (or the `summary.csv` of a run folder).
    pub fn read(path: &Path) -> Result<SummaryTable, GateError> {
        let path = if path.is_dir() { path.join(crate::SUMMARY_CSV) } else { path.to_path_buf() };
        let text = inputs::read_to_string(&path, inputs::Kind::Table)
            .map_err(|e| GateError::Io { path: path.clone(), source: e.into_io() })?;
        SummaryTable::parse(&text, &path.display().to_string())
    }

    /// Parse the text of a summary file; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<SummaryTable, GateError> {
        if text.trim().is_empty() {
            return Err(GateError::Empty { file: file.to_string() });
        }
        let mut reader = ::csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
        let csv_err = |e: ::csv::Error| GateError::Csv {
            file: file.to_string(),
            line: e.position().map(|p| p.line()).unwrap_or(1),
            problem: e.to_string(),
        };
        let header = unique_header(&mut reader, file)?;
        let id_col =
            header.iter().position(|h| h == "config_id").ok_or_else(|| GateError::NoConfigId { file: file.into() })?;
        let strategy_col = header.iter().position(|h| h == "strategy");
        let dataset_col = header.iter().position(|h| h == "dataset");
        let mut table = SummaryTable {
            file: file.to_string(),
            columns: header.iter().filter(|h| !TEXT_COLUMNS.contains(&h.as_str())).cloned().collect(),
            entries: Vec::new(),
        };
        for record in reader.records() {
            let record = record.map_err(csv_err)?;
            let line = record.position().map(|p| p.line()).unwrap_or(0);
            let config_id = record.get(id_col).unwrap_or("").trim().to_string();
            if config_id.is_empty() {
                // Dropped, the configuration would count as new and its regression pass.
                return Err(GateError::EmptyId { file: file.into(), line, column: "config_id".into() });
            }
            let dataset = dataset_col.and_then(|c| record.get(c)).unwrap_or("").trim().to_string();
            let config_id = row_key(&config_id, &dataset);
            if table.entries.iter().any(|e| e.config_id == config_id) {
                return Err(GateError::Duplicate { file: file.into(), line, config_id });
            }
            let mut entry = SummaryEntry {
                dataset,
                strategy: strategy_col.and_then(|c| record.get(c)).unwrap_or("").to_string(),
                config_id,
                values: BTreeMap::new(),
            };
            for (column, cell) in header.iter().zip(record.iter()) {
                let cell = cell.trim();
                if TEXT_COLUMNS.contains(&column.as_str()) || cell.is_empty() {
                    continue;
                }
                entry.values.insert(column.clone(), cell_value(cell, column, file, line)?);
            }
            table.entries.push(entry);
        }
        Ok(table)
    }

    /// A row by its key (see [`SummaryEntry::config_id`]).
    pub fn get(&self, config_id: &str) -> Option<&SummaryEntry> {
        self.entries.iter().find(|e| e.config_id == config_id)
    }
}

/// What happened to one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Worse beyond the tolerance (and outside the baseline's interval): fails the gate.
    Regression,
    /// Worse, but within the tolerance.
    WithinTolerance,
    /// Worse beyond the tolerance, but inside the baseline's confidence interval.
    InsideInterval,
    /// Worse beyond the tolerance, but the paired test does not find the loss significant.
    NotSignificant,
    Improved,
    /// A column the gate does not judge changed.
    Changed,
    /// A configuration of the baseline is not in the current run: fails the gate.
    MissingInCurrent,
    /// A configuration only the current run has.
    NewInCurrent,
}

impl Verdict {
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Regression | Verdict::MissingInCurrent)
    }

    fn label(self) -> &'static str {
        match self {
            Verdict::Regression => "**regression**",
            Verdict::WithinTolerance => "worse, within tolerance",
            Verdict::InsideInterval => "worse, inside the baseline's interval",
            Verdict::NotSignificant => "worse, not significant (paired)",
            Verdict::Improved => "improved",
            Verdict::Changed => "changed",
            Verdict::MissingInCurrent => "**missing in current**",
            Verdict::NewInCurrent => "new in current",
        }
    }
}

/// One line of the gate's table.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub config_id: String,
    /// The gated metric's name, or the column's name for information rows; empty for a
    /// missing or new configuration.
    pub metric: String,
    pub baseline: Option<f64>,
    pub current: Option<f64>,
    /// The baseline's interval, where the metric has one.
    pub interval: Option<(f64, f64)>,
    /// The tolerance, for gated metrics.
    pub tolerance: Option<Tolerance>,
    /// The paired test, when the gate compared runs pair by pair.
    pub paired: Option<PairedTest>,
    pub verdict: Verdict,
    /// How to print the values.
    gated: Option<Metric>,
}

/// The gate's verdict over two summaries.
#[derive(Debug, Clone, PartialEq)]
pub struct GateReport {
    pub baseline_file: String,
    pub current_file: String,
    /// Configurations compared (present on both sides).
    pub compared: usize,
    pub changes: Vec<Change>,
    pub tolerances: Tolerances,
    /// Retention was judged pair by pair.
    pub paired: bool,
}

/// Values closer than this are equal (CSV values are rounded to 6 or 8 decimals).
const EPSILON: f64 = 1e-9;

/// The columns the gate judges: each metric's column and its interval's columns.
fn gated_columns() -> Vec<&'static str> {
    Metric::ALL
        .iter()
        .flat_map(|m| {
            let (lo, hi) = m.ci_columns().unwrap_or(("", ""));
            [m.column(), lo, hi]
        })
        .filter(|c| !c.is_empty())
        .collect()
}

/// Refuse what the gate cannot compare: a file without configuration rows, a file without
/// `retention_mean`, and a gated column (a metric or its interval) that only one file has.
/// Without this check such files pass, since a metric absent on both sides never moves.
pub fn check_comparable(baseline: &SummaryTable, current: &SummaryTable) -> Result<(), GateError> {
    for table in [baseline, current] {
        if table.entries.is_empty() {
            return Err(GateError::Empty { file: table.file.clone() });
        }
    }
    for column in gated_columns() {
        let has = |t: &SummaryTable| t.columns.iter().any(|c| c == column);
        for (table, other) in [(baseline, current), (current, baseline)] {
            if !has(table) && has(other) {
                return Err(GateError::MissingColumn {
                    file: table.file.clone(),
                    column: column.into(),
                    other: Some(other.file.clone()),
                });
            }
        }
    }
    for table in [baseline, current] {
        let column = Metric::Retention.column();
        if !table.columns.iter().any(|c| c == column) {
            return Err(GateError::MissingColumn { file: table.file.clone(), column: column.into(), other: None });
        }
    }
    Ok(())
}

/// Refuse results files the paired test cannot use, instead of skipping the test: a file
/// without rows or without a paired column, and a configuration whose retention both
/// summaries hold but that has no pair of conversations in the results files.
pub fn check_paired(
    baseline: &SummaryTable,
    current: &SummaryTable,
    baseline_results: &ResultsTable,
    current_results: &ResultsTable,
) -> Result<(), GateError> {
    for table in [baseline_results, current_results] {
        if table.rows.is_empty() {
            return Err(GateError::Empty { file: table.file.clone() });
        }
        for metric in Metric::ALL {
            let Some(column) = metric.paired_column() else { continue };
            let in_summaries = [baseline, current].iter().all(|s| s.columns.iter().any(|c| c == metric.column()));
            if in_summaries && !table.columns.iter().any(|c| c == column) {
                return Err(GateError::MissingColumn { file: table.file.clone(), column: column.into(), other: None });
            }
        }
    }
    let input = PairedInput { baseline_results, current_results, seed: 0 };
    for base in &baseline.entries {
        let Some(cur) = current.get(&base.config_id) else { continue };
        for metric in Metric::ALL {
            let Some(column) = metric.paired_column() else { continue };
            let both = base.values.contains_key(metric.column()) && cur.values.contains_key(metric.column());
            if both && input.pairs(base, column).is_empty() {
                let missing = if baseline_results.rows_of(base.configuration()).any(|r| r.values.contains_key(column)) {
                    current_results
                } else {
                    baseline_results
                };
                return Err(GateError::NoPairs {
                    file: missing.file.clone(),
                    column: column.into(),
                    config_id: base.config_id.clone(),
                    summary: if std::ptr::eq(missing, baseline_results) { &baseline.file } else { &current.file }
                        .clone(),
                });
            }
        }
    }
    Ok(())
}

/// [`check_comparable`], then [`compare`].
pub fn compare_checked(
    baseline: &SummaryTable,
    current: &SummaryTable,
    tolerances: &Tolerances,
) -> Result<GateReport, GateError> {
    check_comparable(baseline, current)?;
    Ok(compare(baseline, current, tolerances))
}

/// Compare `current` against `baseline`. It does not check that the files are comparable:
/// [`compare_checked`] does.
pub fn compare(baseline: &SummaryTable, current: &SummaryTable, tolerances: &Tolerances) -> GateReport {
    compare_with(baseline, current, tolerances, None)
}

/// Compare `current` against `baseline` pair by pair: retention and at-risk retention are
/// judged on the per-conversation differences of the two runs' `results.csv` (see
/// [`paired_test`]); every other metric as [`compare`] does. `seed` seeds the bootstrap.
pub fn compare_paired(
    baseline: &SummaryTable,
    current: &SummaryTable,
    baseline_results: &ResultsTable,
    current_results: &ResultsTable,
    tolerances: &Tolerances,
    seed: u64,
) -> GateReport {
    let mut report =
        compare_with(baseline, current, tolerances, Some(&PairedInput { baseline_results, current_results, seed }));
    report.paired = true;
    report.baseline_file = format!("{} + {}", report.baseline_file, baseline_results.file);
    report.current_file = format!("{} + {}", report.current_file, current_results.file);
    report
}

/// The two runs' per-conversation results, for the paired test.
struct PairedInput<'a> {
    baseline_results: &'a ResultsTable,
    current_results: &'a ResultsTable,
    seed: u64,
}

impl PairedInput<'_> {
    /// The per-conversation pairs `(baseline, current)` of `column` for one summary row: every
    /// conversation of its configuration for a pooled row, those of its dataset otherwise.
    fn pairs(&self, entry: &SummaryEntry, column: &str) -> Vec<(f64, f64)> {
        let config_id = entry.configuration();
        let in_row = |r: &&ResultEntry| entry.is_pooled() || r.dataset == entry.dataset;
        let current: BTreeMap<(&str, &str), f64> = self
            .current_results
            .rows_of(config_id)
            .filter(in_row)
            .filter_map(|r| Some(((r.dataset.as_str(), r.conversation_id.as_str()), *r.values.get(column)?)))
            .collect();
        self.baseline_results
            .rows_of(config_id)
            .filter(in_row)
            .filter_map(|r| {
                let b = *r.values.get(column)?;
                let c = *current.get(&(r.dataset.as_str(), r.conversation_id.as_str()))?;
                Some((b, c))
            })
            .collect()
    }
}

fn compare_with(
    baseline: &SummaryTable,
    current: &SummaryTable,
    tolerances: &Tolerances,
    paired: Option<&PairedInput<'_>>,
) -> GateReport {
    let mut changes = Vec::new();
    let mut compared = 0;
    for base in &baseline.entries {
        let Some(cur) = current.get(&base.config_id) else {
            changes.push(Change {
                config_id: base.config_id.clone(),
                metric: String::new(),
                baseline: None,
                current: None,
                interval: None,
                tolerance: None,
                paired: None,
                verdict: Verdict::MissingInCurrent,
                gated: None,
            });
            continue;
        };
        compared += 1;
        for metric in Metric::ALL {
            let pairs = paired.filter(|_| metric.paired_column().is_some()).map(|p| {
                let column = metric.paired_column().unwrap_or_default();
                (p.pairs(base, column), metric_seed(p.seed, &base.config_id, metric.name()))
            });
            let change = match pairs {
                Some((pairs, seed)) => judge_paired(metric, base, cur, &pairs, seed, tolerances.get(metric)),
                None => judge(metric, base, cur, tolerances.get(metric)),
            };
            if let Some(change) = change {
                changes.push(change);
            }
        }
        let gated_columns = gated_columns();
        // Only columns both files have: a baseline written before a column existed (or a
        // current run without it) has nothing to compare it with.
        for column in baseline.columns.iter().filter(|c| current.columns.contains(c)) {
            if gated_columns.contains(&column.as_str()) {
                continue;
            }
            let (b, c) = (base.values.get(column).copied(), cur.values.get(column).copied());
            let moved = match (b, c) {
                (Some(b), Some(c)) => (b - c).abs() > EPSILON,
                (None, None) => false,
                _ => true,
            };
            if moved {
                changes.push(Change {
                    config_id: base.config_id.clone(),
                    metric: column.clone(),
                    baseline: b,
                    current: c,
                    interval: None,
                    tolerance: None,
                    paired: None,
                    verdict: Verdict::Changed,
                    gated: None,
                });
            }
        }
    }
    for cur in &current.entries {
        if baseline.get(&cur.config_id).is_none() {
            changes.push(Change {
                config_id: cur.config_id.clone(),
                metric: String::new(),
                baseline: None,
                current: None,
                interval: None,
                tolerance: None,
                paired: None,
                verdict: Verdict::NewInCurrent,
                gated: None,
            });
        }
    }
    GateReport {
        baseline_file: baseline.file.clone(),
        current_file: current.file.clone(),
        compared,
        changes,
        tolerances: tolerances.clone(),
        paired: false,
    }
}

/// The change of one gated metric of one configuration, `None` when it did not move.
fn judge(metric: Metric, base: &SummaryEntry, cur: &SummaryEntry, tolerance: Tolerance) -> Option<Change> {
    let b = base.values.get(metric.column()).copied();
    let c = cur.values.get(metric.column()).copied();
    let interval = metric.ci_columns().and_then(|(lo, hi)| Some((*base.values.get(lo)?, *base.values.get(hi)?)));
    let change = |verdict| Change {
        config_id: base.config_id.clone(),
        metric: metric.name().to_string(),
        baseline: b,
        current: c,
        interval,
        tolerance: Some(tolerance),
        paired: None,
        verdict,
        gated: Some(metric),
    };
    let (b_val, c_val) = match (b, c) {
        (None, None) => return None,
        // The metric is no longer reported: treat as the worst case.
        (Some(_), None) => return Some(change(Verdict::Regression)),
        (None, Some(_)) => return Some(change(Verdict::Changed)),
        (Some(b), Some(c)) => (b, c),
    };
    if (b_val - c_val).abs() <= EPSILON {
        return None;
    }
    let worse_by = if metric.higher_is_better() { b_val - c_val } else { c_val - b_val };
    if worse_by < 0.0 {
        return Some(change(Verdict::Improved));
    }
    if worse_by <= tolerance.allowed(b_val) + EPSILON {
        return Some(change(Verdict::WithinTolerance));
    }
    if let Some((lo, hi)) = interval {
        if c_val >= lo - EPSILON && c_val <= hi + EPSILON {
            return Some(change(Verdict::InsideInterval));
        }
    }
    Some(change(Verdict::Regression))
}

/// Below this many pairs the paired test is a sign test, from there on a bootstrap.
pub const SIGN_TEST_BELOW: usize = 10;
/// The sign test counts a difference only when its one-sided p-value is under this.
pub const SIGN_TEST_ALPHA: f64 = 0.025;

/// The paired test of one metric of one configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedTest {
    /// Conversations with a value in both runs.
    pub n: usize,
    /// Mean of `current - baseline`.
    pub mean_difference: f64,
    /// Bootstrap: the 95% interval of the mean difference.
    pub interval: Option<(f64, f64)>,
    /// Sign test: the one-sided p-value of as many losses or more.
    pub sign_p: Option<f64>,
    /// The loss is significant at the 95% level (two-sided).
    pub significant_loss: bool,
}

/// The paired test of `current - baseline` over `pairs`, where lower is worse when
/// `higher_is_better`. With [`SIGN_TEST_BELOW`] pairs or more: a seeded percentile bootstrap of
/// the mean difference ([`RESAMPLES`](crate::summary::RESAMPLES) resamples), a loss when the
/// whole 95% interval is on the losing side of 0. With fewer: an exact sign test over the pairs
/// that moved, a loss when the one-sided p-value of that many losses is under 0.025.
///
/// ```
/// use report::gate::paired_test;
///
/// let same: Vec<(f64, f64)> = (0..15).map(|i| (0.5 + i as f64 / 100.0, 0.5 + i as f64 / 100.0)).collect();
/// assert!(!paired_test(&same, true, 1).significant_loss);
/// let lost: Vec<(f64, f64)> = same.iter().map(|(b, c)| (*b, c - 0.03)).collect();
/// assert!(paired_test(&lost, true, 1).significant_loss);
/// ```
pub fn paired_test(pairs: &[(f64, f64)], higher_is_better: bool, seed: u64) -> PairedTest {
    paired(pairs, None, higher_is_better, seed)
}

/// [`paired_test`] of a weighted mean difference: pair `i` weighs `weights[i]` (a
/// conversation's probe count, so the mean difference is over probes while conversations are
/// resampled). The sign test, under [`SIGN_TEST_BELOW`] pairs, counts pairs unweighted.
pub fn weighted_paired_test(pairs: &[(f64, f64)], weights: &[f64], higher_is_better: bool, seed: u64) -> PairedTest {
    paired(pairs, Some(weights), higher_is_better, seed)
}

fn paired(pairs: &[(f64, f64)], weights: Option<&[f64]>, higher_is_better: bool, seed: u64) -> PairedTest {
    let diffs: Vec<f64> = pairs.iter().map(|(b, c)| c - b).collect();
    let n = diffs.len();
    let mean_difference = match weights {
        None => mean(&diffs),
        Some(w) => crate::summary::weighted_mean(&diffs, w),
    }
    .unwrap_or(0.0);
    let loss = |d: f64| if higher_is_better { d < -EPSILON } else { d > EPSILON };
    if n >= SIGN_TEST_BELOW {
        let interval = match weights {
            None => bootstrap_ci(&diffs, seed),
            Some(w) => crate::summary::weighted_bootstrap_ci(&diffs, w, seed),
        };
        let significant_loss =
            interval.is_some_and(|(lo, hi)| if higher_is_better { hi < -EPSILON } else { lo > EPSILON });
        return PairedTest { n, mean_difference, interval, sign_p: None, significant_loss };
    }
    let moved = diffs.iter().filter(|d| d.abs() > EPSILON).count();
    let losses = diffs.iter().filter(|d| loss(**d)).count();
    let p = sign_test_p(losses, moved);
    PairedTest {
        n,
        mean_difference,
        interval: None,
        sign_p: Some(p),
        significant_loss: moved > 0 && p < SIGN_TEST_ALPHA,
    }
}

/// P(X >= k) for X ~ Binomial(n, 1/2).
fn sign_test_p(k: usize, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let mut coefficient = 1.0f64;
    let mut total = 0.0;
    for i in 0..=n {
        if i >= k {
            total += coefficient;
        }
        coefficient = coefficient * (n - i) as f64 / (i + 1) as f64;
    }
    total / 2f64.powi(i32::try_from(n).unwrap_or(i32::MAX))
}

/// A retention metric judged pair by pair: regresses when the mean difference is worse than the
/// tolerance and the paired test finds the loss significant.
fn judge_paired(
    metric: Metric,
    base: &SummaryEntry,
    cur: &SummaryEntry,
    pairs: &[(f64, f64)],
    seed: u64,
    tolerance: Tolerance,
) -> Option<Change> {
    let test = paired_test(pairs, metric.higher_is_better(), seed);
    let b = base.values.get(metric.column()).copied();
    let c = cur.values.get(metric.column()).copied();
    let change = |verdict| Change {
        config_id: base.config_id.clone(),
        metric: metric.name().to_string(),
        baseline: b,
        current: c,
        interval: None,
        tolerance: Some(tolerance),
        paired: Some(test),
        verdict,
        gated: Some(metric),
    };
    if pairs.is_empty() {
        // Nothing to pair: fall back to the means.
        return judge(metric, base, cur, tolerance);
    }
    let d = test.mean_difference;
    if d.abs() <= EPSILON && test.interval.is_none_or(|(lo, hi)| lo.abs() <= EPSILON && hi.abs() <= EPSILON) {
        return None;
    }
    let worse_by = if metric.higher_is_better() { -d } else { d };
    if worse_by < 0.0 {
        return Some(change(Verdict::Improved));
    }
    if worse_by <= tolerance.allowed(b.unwrap_or(0.0)) + EPSILON {
        return Some(change(Verdict::WithinTolerance));
    }
    if !test.significant_loss {
        return Some(change(Verdict::NotSignificant));
    }
    Some(change(Verdict::Regression))
}

/// One row of a `results.csv`: a (conversation, configuration) pair.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResultEntry {
    pub config_id: String,
    pub conversation_id: String,
    pub dataset: String,
    /// Numeric cells; an empty cell is absent.
    pub values: BTreeMap<String, f64>,
}

/// A `results.csv`, in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResultsTable {
    pub file: String,
    /// The header's columns, in file order.
    pub columns: Vec<String>,
    pub rows: Vec<ResultEntry>,
}

/// Text columns of `results.csv`.
const RESULT_TEXT_COLUMNS: [&str; 9] =
    ["conversation_id", "dataset", "strategy", "config_id", "params", "status", "error", "judge", "rejected_because"];

impl ResultsTable {
    /// Read a `results.csv` (or the `results.csv` of a run folder).
    pub fn read(path: &Path) -> Result<ResultsTable, GateError> {
        let path = if path.is_dir() { path.join(crate::RESULTS_CSV) } else { path.to_path_buf() };
        let text = inputs::read_to_string(&path, inputs::Kind::Table)
            .map_err(|e| GateError::Io { path: path.clone(), source: e.into_io() })?;
        ResultsTable::parse(&text, &path.display().to_string())
    }

    /// Parse the text of a results file; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<ResultsTable, GateError> {
        let mut reader = ::csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
        let csv_err = |e: ::csv::Error| GateError::Csv {
            file: file.to_string(),
            line: e.position().map(|p| p.line()).unwrap_or(1),
            problem: e.to_string(),
        };
        let header = unique_header(&mut reader, file)?;
        let col = |name: &str| header.iter().position(|h| h == name);
        let (Some(id), Some(conv)) = (col("config_id"), col("conversation_id")) else {
            return Err(GateError::NoConfigId { file: file.into() });
        };
        let dataset = col("dataset");
        let mut table = ResultsTable { file: file.to_string(), columns: header.clone(), rows: Vec::new() };
        let mut seen = std::collections::BTreeSet::new();
        for record in reader.records() {
            let record = record.map_err(csv_err)?;
            let line = record.position().map(|p| p.line()).unwrap_or(0);
            let mut row = ResultEntry {
                config_id: record.get(id).unwrap_or("").trim().to_string(),
                conversation_id: record.get(conv).unwrap_or("").to_string(),
                dataset: dataset.and_then(|d| record.get(d)).unwrap_or("").to_string(),
                values: BTreeMap::new(),
            };
            if row.config_id.is_empty() {
                return Err(GateError::EmptyId { file: file.into(), line, column: "config_id".into() });
            }
            if !seen.insert((row.config_id.clone(), row.dataset.clone(), row.conversation_id.clone())) {
                return Err(GateError::Duplicate {
                    file: file.into(),
                    line,
                    config_id: format!("{} (conversation {})", row.config_id, row.conversation_id),
                });
            }
            for (column, cell) in header.iter().zip(record.iter()) {
                let cell = cell.trim();
                if RESULT_TEXT_COLUMNS.contains(&column.as_str()) || cell.is_empty() {
                    continue;
                }
                row.values.insert(column.clone(), cell_value(cell, column, file, line)?);
            }
            table.rows.push(row);
        }
        Ok(table)
    }

    /// The rows of one configuration.
    pub fn rows_of<'a>(&'a self, config_id: &'a str) -> impl Iterator<Item = &'a ResultEntry> + 'a {
        self.rows.iter().filter(move |r| r.config_id == config_id)
    }
}

impl GateReport {
    /// No regression and no configuration missing.
    pub fn passed(&self) -> bool {
        !self.changes.iter().any(|c| c.verdict.fails())
    }

    /// The changes that fail the gate.
    pub fn failures(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.verdict.fails())
    }

    /// The verdict and a table of every change, as markdown.
    pub fn markdown(&self) -> String {
        let failures = self.failures().count();
        let mut out = String::new();
        if failures == 0 {
            out.push_str(&format!(
                "### compactlens gate: passed\n\n{} rows (configurations, pooled and per dataset) compared with the baseline; no regression.\n\n",
                self.compared
            ));
        } else {
            let configs: std::collections::BTreeSet<&str> = self.failures().map(|c| c.config_id.as_str()).collect();
            out.push_str(&format!(
                "### compactlens gate: FAILED\n\n{} {} in {} {} ({} rows compared with the baseline).\n\n",
                failures,
                if failures == 1 { "failure" } else { "failures" },
                configs.len(),
                if configs.len() == 1 { "configuration" } else { "configurations" },
                self.compared
            ));
        }
        out.push_str(&format!("Baseline `{}`, current `{}`.\n\n", self.baseline_file, self.current_file));
        if self.changes.is_empty() {
            out.push_str("No value changed.\n");
        } else {
            out.push_str(
                if self.paired {
                    "| configuration | metric | baseline | current | change | baseline 95% CI or paired test | tolerance | verdict |\n"
                } else {
                    "| configuration | metric | baseline | current | change | baseline 95% CI | tolerance | verdict |\n"
                },
            );
            out.push_str("|---|---|---|---|---|---|---|---|\n");
            let mut rows: Vec<&Change> = self.changes.iter().collect();
            // Failures first, then the rest in file order.
            rows.sort_by_key(|c| !c.verdict.fails());
            for c in rows {
                let fmt = |v: Option<f64>| match (v, c.gated) {
                    (Some(v), Some(m)) => m.format(v),
                    (Some(v), None) => trim(&format!("{v:.6}")),
                    (None, _) => "–".into(),
                };
                let delta = match (c.baseline, c.current, c.paired) {
                    (_, _, Some(t)) => {
                        let d = t.mean_difference;
                        format!("{}{:.1} pt (paired)", if d > 0.0 { "+" } else { "−" }, d.abs() * 100.0)
                    }
                    (Some(b), Some(a), None) => {
                        let d = a - b;
                        let sign = if d > 0.0 { "+" } else { "−" };
                        match c.gated {
                            Some(Metric::Retention | Metric::AtRiskRetention | Metric::OverflowRate) => {
                                format!("{sign}{:.1} pt", d.abs() * 100.0)
                            }
                            Some(m) => format!("{sign}{}", m.format(d.abs())),
                            None => format!("{sign}{}", trim(&format!("{:.6}", d.abs()))),
                        }
                    }
                    _ => "–".into(),
                };
                let interval = match (c.paired, c.interval, c.gated) {
                    (Some(t), _, _) => match (t.interval, t.sign_p) {
                        (Some((lo, hi)), _) => {
                            format!("paired Δ [{:+.1}, {:+.1}] pt, n={}", lo * 100.0, hi * 100.0, t.n)
                        }
                        (_, Some(p)) => format!("sign test p={p:.3}, n={}", t.n),
                        _ => "–".into(),
                    },
                    (None, Some((lo, hi)), Some(m)) => format!("[{}, {}]", m.format(lo), m.format(hi)),
                    _ => "–".into(),
                };
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                    md(&c.config_id),
                    if c.metric.is_empty() { "–".to_string() } else { md(&c.metric) },
                    fmt(c.baseline),
                    fmt(c.current),
                    delta,
                    interval,
                    c.tolerance.map(|t| t.to_string()).unwrap_or_else(|| "–".into()),
                    c.verdict.label()
                ));
            }
        }
        out.push_str(&format!(
            "\nTolerances: {}.\n",
            Metric::ALL.map(|m| format!("{m} {}", self.tolerances.get(m))).join(", ")
        ));
        out
    }
}

/// A table cell: pipes and newlines would break the row.
fn md(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "config_id,strategy,params,conversations,failed,retention_mean,retention_ci_low,retention_ci_high,\
        at_risk_retention_mean,at_risk_retention_ci_low,at_risk_retention_ci_high,compression_ratio,overflow_rate,rejected_requests_openai,cost_usd_mean";

    fn table(rows: &[&str]) -> SummaryTable {
        let text = format!("{HEADER}\n{}\n", rows.join("\n"));
        SummaryTable::parse(&text, "t.csv").expect("parses")
    }

    const BASE: &str = "a,keep-last-n,\"{\"\"k\"\":1}\",10,0,0.8,0.7,0.9,0.6,0.4,0.8,0.5,0,0,0.01";

    fn verdicts(report: &GateReport) -> Vec<(String, String, Verdict)> {
        report.changes.iter().map(|c| (c.config_id.clone(), c.metric.clone(), c.verdict)).collect()
    }

    #[test]
    fn identical_summaries_pass_with_no_change() {
        let r = compare(&table(&[BASE]), &table(&[BASE]), &Tolerances::default());
        assert!(r.passed());
        assert!(r.changes.is_empty());
        assert!(r.markdown().contains("No value changed."));
    }

    #[test]
    fn a_drop_outside_the_interval_regresses_one_inside_does_not() {
        let worse = BASE.replace(",0.8,0.7,0.9,", ",0.65,0.55,0.75,");
        let r = compare(&table(&[BASE]), &table(&[&worse]), &Tolerances::default());
        assert_eq!(verdicts(&r), vec![("a".into(), "retention".into(), Verdict::Regression)]);
        assert!(!r.passed());

        let slightly = BASE.replace(",0.8,0.7,0.9,", ",0.75,0.65,0.85,");
        let r = compare(&table(&[BASE]), &table(&[&slightly]), &Tolerances::default());
        assert_eq!(verdicts(&r), vec![("a".into(), "retention".into(), Verdict::InsideInterval)]);
        assert!(r.passed());

        let tiny = BASE.replace(",0.8,0.7,0.9,", ",0.795,0.7,0.9,");
        let r = compare(&table(&[BASE]), &table(&[&tiny]), &Tolerances::default());
        assert_eq!(r.changes[0].verdict, Verdict::WithinTolerance);
    }

    #[test]
    fn new_overflows_rejections_failures_and_cost_regress() {
        let worse = "a,keep-last-n,{},10,1,0.8,0.7,0.9,0.6,0.4,0.8,0.5,0.02,3,0.02";
        let r = compare(&table(&[BASE]), &table(&[worse]), &Tolerances::default());
        let failing: Vec<String> = r.failures().map(|c| c.metric.clone()).collect();
        assert_eq!(failing, ["overflow_rate", "rejected_requests_openai", "failed", "cost"]);
        let md = r.markdown();
        assert!(md.contains("### compactlens gate: FAILED"));
        assert!(md.contains("| a | rejected_requests_openai | 0 | 3 | +3 | – | 0 | **regression** |"), "{md}");
        assert!(md.contains("| a | cost | $0.01 | $0.02 | +$0.01 | – | 5% | **regression** |"), "{md}");
    }

    #[test]
    fn tolerances_can_be_widened() {
        let worse = "a,keep-last-n,{},10,0,0.8,0.7,0.9,0.6,0.4,0.8,0.5,0,0,0.0104";
        let mut t = Tolerances::default();
        let r = compare(&table(&[BASE]), &table(&[worse]), &t);
        assert!(r.passed(), "4% is within the default 5%: {}", r.markdown());
        assert_eq!(r.changes[0].verdict, Verdict::WithinTolerance);
        t.apply("cost=3%").expect("valid");
        assert!(!compare(&table(&[BASE]), &table(&[worse]), &t).passed(), "4% over 3%");
        t.apply("cost=0.0001").expect("valid");
        assert!(!compare(&table(&[BASE]), &table(&[worse]), &t).passed(), "absolute 0.0001 < 0.0004");
        t.apply("cost=10%").expect("valid");
        assert!(compare(&table(&[BASE]), &table(&[worse]), &t).passed());
    }

    #[test]
    fn per_dataset_rows_are_gated_and_the_pooled_row_matches_an_older_baseline() {
        let header = "config_id,dataset,retention_mean,retention_ci_low,retention_ci_high,violations\n";
        let base = SummaryTable::parse(&format!("{header}a,all,0.9,0.85,0.95,0\na,x.jsonl,0.9,0.85,0.95,0\n"), "b.csv")
            .expect("parses");
        assert_eq!(base.entries.iter().map(|e| e.config_id.as_str()).collect::<Vec<_>>(), ["a", "a@x.jsonl"]);
        assert!(base.entries[0].is_pooled() && !base.entries[1].is_pooled());
        // The pooled row holds; the dataset's row regresses.
        let cur = SummaryTable::parse(&format!("{header}a,all,0.9,0.85,0.95,0\na,x.jsonl,0.5,0.4,0.6,0\n"), "c.csv")
            .expect("parses");
        let r = compare(&base, &cur, &Tolerances::default());
        assert_eq!(verdicts(&r), vec![("a@x.jsonl".into(), "retention".into(), Verdict::Regression)]);
        // A baseline without the column gates the pooled rows; the dataset rows are new.
        let old = SummaryTable::parse(
            "config_id,retention_mean,retention_ci_low,retention_ci_high,violations\na,0.9,0.85,0.95,0\n",
            "o.csv",
        )
        .expect("parses");
        let r = compare(&old, &cur, &Tolerances::default());
        assert!(r.passed());
        assert_eq!(verdicts(&r), vec![("a@x.jsonl".into(), "".into(), Verdict::NewInCurrent)]);
        // The same configuration twice for one dataset is still an error.
        let twice = format!("{header}a,x.jsonl,0.9,0.85,0.95,0\na,x.jsonl,0.9,0.85,0.95,0\n");
        assert!(SummaryTable::parse(&twice, "t.csv").is_err());
    }

    #[test]
    fn missing_and_new_configurations() {
        let b = BASE.replacen("a,", "b,", 1);
        let r = compare(&table(&[BASE, &b]), &table(&[BASE, &BASE.replacen("a,", "c,", 1)]), &Tolerances::default());
        assert_eq!(
            verdicts(&r),
            vec![("b".into(), "".into(), Verdict::MissingInCurrent), ("c".into(), "".into(), Verdict::NewInCurrent)]
        );
        assert!(!r.passed());
        // Only new configurations: a note, not a failure.
        let r = compare(&table(&[BASE]), &table(&[BASE, &b]), &Tolerances::default());
        assert!(r.passed());
        assert!(r.markdown().contains("new in current"));
    }

    #[test]
    fn a_metric_no_longer_reported_regresses_and_other_columns_are_information() {
        let cur = "a,keep-last-n,{},10,0,,,,0.6,0.4,0.8,0.4,0,0,0.01";
        let r = compare(&table(&[BASE]), &table(&[cur]), &Tolerances::default());
        assert_eq!(
            verdicts(&r),
            vec![
                ("a".into(), "retention".into(), Verdict::Regression),
                ("a".into(), "compression_ratio".into(), Verdict::Changed)
            ]
        );
    }

    #[test]
    fn findings_are_reported_without_failing_unless_a_tolerance_says_so() {
        let header = "config_id,strategy,rejected_requests_anthropic,findings\n";
        let base = SummaryTable::parse(&format!("{header}a,s,0,2\n"), "b.csv").expect("parses");
        let more = SummaryTable::parse(&format!("{header}a,s,0,9\n"), "c.csv").expect("parses");
        let r = compare(&base, &more, &Tolerances::default());
        assert!(r.passed(), "{}", r.markdown());
        assert_eq!(verdicts(&r), vec![("a".into(), "findings".into(), Verdict::WithinTolerance)]);
        assert!(r.markdown().contains("findings reported only"), "{}", r.markdown());
        let mut t = Tolerances::default();
        t.apply("findings=3").expect("valid");
        assert!(!compare(&base, &more, &t).passed(), "7 new findings over a tolerance of 3");
        let refused = SummaryTable::parse(&format!("{header}a,s,1,2\n"), "c.csv").expect("parses");
        let r = compare(&base, &refused, &Tolerances::default());
        assert_eq!(r.failures().map(|c| c.metric.as_str()).collect::<Vec<_>>(), ["rejected_requests_anthropic"]);
    }

    #[test]
    fn the_paired_test_sees_a_small_consistent_loss_the_interval_misses() {
        // Spread-out retention over 15 conversations, every one 3 points lower.
        let base: Vec<f64> = (0..15).map(|i| 0.3 + 0.04 * i as f64).collect();
        let pairs: Vec<(f64, f64)> = base.iter().map(|b| (*b, b - 0.03)).collect();
        let t = paired_test(&pairs, true, 7);
        assert!(t.significant_loss && t.interval.is_some() && t.sign_p.is_none(), "{t:?}");
        assert!((t.mean_difference + 0.03).abs() < 1e-12);
        // The baseline's own interval of the mean is far wider than 3 points.
        let (lo, hi) = bootstrap_ci(&base, 7).expect("values");
        assert!(hi - lo > 0.15 && base.iter().sum::<f64>() / 15.0 - 0.03 > lo);
        // One conversation lost a lot, the rest nothing: not significant by bootstrap.
        let mut one: Vec<(f64, f64)> = base.iter().map(|b| (*b, *b)).collect();
        one[3].1 -= 0.5;
        assert!(!paired_test(&one, true, 7).significant_loss);
        // No change, whatever the seed.
        let same: Vec<(f64, f64)> = base.iter().map(|b| (*b, *b)).collect();
        assert!((0..20).all(|s| !paired_test(&same, true, s).significant_loss));
        // Few pairs: a sign test. 6 of 6 lower: p = 1/64.
        let small = &pairs[..6];
        let t = paired_test(small, true, 1);
        assert_eq!(t.sign_p, Some(1.0 / 64.0));
        assert!(t.significant_loss);
        // 5 of 5 is p = 1/32, over 0.025.
        assert!(!paired_test(&pairs[..5], true, 1).significant_loss);
        assert_eq!(sign_test_p(0, 4), 1.0);
        assert!((sign_test_p(3, 4) - 5.0 / 16.0).abs() < 1e-12);
    }

    #[test]
    fn the_paired_gate_fails_on_a_significant_loss_and_names_the_test() {
        let summary = "config_id,strategy,retention_mean,retention_ci_low,retention_ci_high\na,s,0.6,0.3,0.9\n";
        let table = SummaryTable::parse(summary, "s.csv").expect("parses");
        let results = |shift: f64| {
            let mut text = String::from("conversation_id,dataset,config_id,retention\n");
            for i in 0..12 {
                text.push_str(&format!("c{i},d.jsonl,a,{}\n", 0.3 + 0.05 * i as f64 - shift));
            }
            ResultsTable::parse(&text, "r.csv").expect("parses")
        };
        let r = compare_paired(&table, &table, &results(0.0), &results(0.0), &Tolerances::default(), 42);
        assert!(r.passed() && r.changes.is_empty(), "{}", r.markdown());
        let r = compare_paired(&table, &table, &results(0.0), &results(0.02), &Tolerances::default(), 42);
        assert!(!r.passed(), "{}", r.markdown());
        let md = r.markdown();
        assert!(md.contains("| a | retention |") && md.contains("paired Δ [") && md.contains("n=12"), "{md}");
        // The same 2-point drop of the mean is inside the baseline's interval for the unpaired gate.
        let lower = SummaryTable::parse(&summary.replace("0.6,0.3", "0.58,0.3"), "c.csv").expect("parses");
        assert!(compare(&table, &lower, &Tolerances::default()).passed());
        // A loss within the tolerance passes.
        let r = compare_paired(&table, &table, &results(0.0), &results(0.005), &Tolerances::default(), 42);
        assert!(r.passed());
        // Bad results files name the file, line and column.
        let e = ResultsTable::parse("conversation_id,config_id,retention\nc,a,x\n", "r.csv").expect_err("bad");
        assert_eq!(e.to_string(), "r.csv:2: column `retention`: \"x\" is not a number");
    }

    #[test]
    fn a_per_dataset_row_pairs_its_own_datasets_conversations() {
        let summary = "config_id,dataset,strategy,retention_mean,retention_ci_low,retention_ci_high\n\
                       a,all,s,0.6,0.3,0.9\na,x.jsonl,s,0.6,0.3,0.9\na,y.jsonl,s,0.6,0.3,0.9\n";
        let table = SummaryTable::parse(summary, "s.csv").expect("parses");
        assert_eq!(table.entries.iter().map(SummaryEntry::configuration).collect::<Vec<_>>(), ["a", "a", "a"]);
        // Twelve conversations per dataset; `completed` is a boolean column of results.csv.
        let results = |shift_y: f64| {
            let mut text = String::from(
                "conversation_id,dataset,config_id,retention,completed
",
            );
            for d in ["x.jsonl", "y.jsonl"] {
                let shift = if d == "y.jsonl" { shift_y } else { 0.0 };
                for i in 0..12 {
                    text.push_str(&format!("c{i},{d},a,{},true\n", 0.3 + 0.05 * i as f64 - shift));
                }
            }
            ResultsTable::parse(&text, "r.csv").expect("parses")
        };
        assert_eq!(results(0.0).rows[0].values.get("completed"), Some(&1.0));
        // y loses 4 points in every conversation: its row and the pooled row (2 points) fail, x's
        // row (no change) does not, and each is judged on its own pairs.
        let r = compare_paired(&table, &table, &results(0.0), &results(0.04), &Tolerances::default(), 42);
        let failed: Vec<&str> = r.failures().map(|c| c.config_id.as_str()).collect();
        assert_eq!(failed, ["a", "a@y.jsonl"], "{}", r.markdown());
        let n = |id: &str| r.changes.iter().find(|c| c.config_id == id).and_then(|c| c.paired).map(|p| p.n);
        assert_eq!((n("a"), n("a@y.jsonl")), (Some(24), Some(12)));
    }

    #[test]
    fn tolerance_parsing() {
        assert_eq!(parse_tolerance("retention=0.02").expect("ok"), (Metric::Retention, Tolerance::Absolute(0.02)));
        assert_eq!(parse_tolerance("cost=10%").expect("ok"), (Metric::Cost, Tolerance::Relative(0.1)));
        assert_eq!(parse_tolerance("overflows=0").expect("ok"), (Metric::OverflowRate, Tolerance::Absolute(0.0)));
        assert_eq!(parse_tolerance("retention_mean = 0.1").expect("ok").0, Metric::Retention);
        for bad in ["retention", "speed=1", "retention=x", "retention=-1", "retention=inf"] {
            let e = parse_tolerance(bad).expect_err(bad).to_string();
            assert!(e.starts_with(&format!("--tolerance {bad}:")), "{e}");
        }
        assert!(parse_tolerance("speed=1").expect_err("unknown").to_string().contains("retention, at_risk_retention"));
    }

    #[test]
    fn bad_files_name_the_file_line_and_column() {
        let e = SummaryTable::parse("strategy,retention_mean\nx,1\n", "s.csv").expect_err("no id");
        assert_eq!(e.to_string(), "s.csv: no `config_id` column; is this a summary.csv?");
        let e = SummaryTable::parse("config_id,retention_mean\na,0.5\nb,high\n", "s.csv").expect_err("bad number");
        assert_eq!(e.to_string(), "s.csv:3: column `retention_mean`: \"high\" is not a number");
        let e = SummaryTable::parse("config_id,retention_mean\na,0.5\na,0.6\n", "s.csv").expect_err("duplicate");
        assert_eq!(e.to_string(), "s.csv:3: configuration a appears twice");
        let e = SummaryTable::parse("config_id,retention_mean\na,0.5,9\n", "s.csv").expect_err("ragged");
        assert!(e.to_string().starts_with("s.csv:2: "), "{e}");
        let e = SummaryTable::read(Path::new("/nonexistent/summary.csv")).expect_err("missing");
        assert!(e.to_string().starts_with("/nonexistent/summary.csv: "), "{e}");
    }

    #[test]
    fn the_real_summary_header_parses() {
        let mut out = Vec::new();
        crate::csv::write_rows(
            &mut out,
            &crate::csv::SUMMARY_HEADER,
            &[crate::csv::SummaryRow {
                config_id: "x".into(),
                params: "{\"a\":1}".into(),
                retention_mean: Some(0.5),
                judge: "offline;llm:a-model".into(),
                ..Default::default()
            }],
        )
        .expect("writes");
        let t = SummaryTable::parse(&String::from_utf8(out).expect("utf-8"), "summary.csv").expect("parses");
        assert_eq!(t.entries[0].values.get("retention_mean"), Some(&0.5));
        for m in Metric::ALL {
            assert!(crate::csv::SUMMARY_HEADER.contains(&m.column()), "{m} reads a real column");
            if let Some((lo, hi)) = m.ci_columns() {
                assert!(crate::csv::SUMMARY_HEADER.contains(&lo) && crate::csv::SUMMARY_HEADER.contains(&hi));
            }
        }
    }

    #[test]
    fn an_older_baseline_without_the_newer_columns_still_gates() {
        // A baseline written before the per-kind at-risk and judge columns existed.
        let old = "config_id,strategy,retention_mean,retention_ci_low,retention_ci_high,violations\n\
                   a,s,0.9,0.85,0.95,0\n";
        let new_header = "config_id,strategy,retention_mean,retention_ci_low,retention_ci_high,violations,\
                          at_risk_retention_task,judge\n";
        let base = SummaryTable::parse(old, "base.csv").expect("parses");
        let same = SummaryTable::parse(&format!("{new_header}a,s,0.9,0.85,0.95,0,0.5,offline\n"), "cur.csv")
            .expect("the judge column is text");
        let report = compare(&base, &same, &Tolerances::default());
        assert!(report.passed(), "{}", report.markdown());
        assert!(report.changes.is_empty(), "a column only one side has is not compared: {:?}", report.changes);
        // Both sides have the per-kind column: a move is listed as information, not a failure.
        let base =
            SummaryTable::parse(&format!("{new_header}a,s,0.9,0.85,0.95,0,0.5,offline\n"), "base.csv").expect("parses");
        let moved =
            SummaryTable::parse(&format!("{new_header}a,s,0.9,0.85,0.95,0,0.25,offline\n"), "cur.csv").expect("parses");
        let report = compare(&base, &moved, &Tolerances::default());
        assert!(report.passed());
        let change = report.changes.iter().find(|c| c.metric == "at_risk_retention_task").expect("listed");
        assert_eq!((change.baseline, change.current, change.verdict), (Some(0.5), Some(0.25), Verdict::Changed));
        // And an older current run against a newer baseline still compares the gated metrics.
        let worse =
            SummaryTable::parse(old.replace("0.9,0.85,0.95", "0.5,0.45,0.55").as_str(), "cur.csv").expect("parses");
        let report = compare(&base, &worse, &Tolerances::default());
        assert!(!report.passed());
        assert!(report.changes.iter().all(|c| c.metric != "at_risk_retention_task"));
    }

    #[test]
    fn a_damaged_baseline_or_current_file_is_refused_naming_file_line_and_column() {
        let full = table(&[BASE]);
        let worse = table(&[&BASE.replace(",0.8,0.7,0.9,", ",0.5,0.4,0.6,")]);
        // Without retention_mean: before the check, the retention drop went unseen and passed.
        let no_retention = SummaryTable::parse(
            &format!("{}\n{}\n", HEADER.replace("retention_mean,retention_ci_low", "x_mean,retention_ci_low"), BASE),
            "base.csv",
        )
        .expect("parses");
        assert!(compare(&no_retention, &worse, &Tolerances::default()).passed(), "unchecked, the drop is unseen");
        let e = compare_checked(&no_retention, &worse, &Tolerances::default()).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "base.csv:1: no column `retention_mean` (which t.csv has); the gate cannot compare it"
        );
        // Only the id columns.
        let ids = SummaryTable::parse("config_id,strategy,params\na,s,{}\n", "base.csv").expect("parses");
        let e = compare_checked(&ids, &worse, &Tolerances::default()).expect_err("refused");
        assert!(e.to_string().contains("base.csv:1: no column `retention_mean`"), "{e}");
        // Only the header.
        let empty = SummaryTable::parse(&format!("{HEADER}\n"), "base.csv").expect("parses");
        let e = compare_checked(&empty, &worse, &Tolerances::default()).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "base.csv:1: no configuration rows (an empty or header-only file cannot be compared)"
        );
        let e = SummaryTable::parse("", "cur.csv").expect_err("an empty file is refused");
        assert!(e.to_string().starts_with("cur.csv:1: no configuration rows"), "{e}");
        // A current file missing a gated column names the column instead of reporting regressions.
        let no_cost = SummaryTable::parse(
            &format!("{}\n{}\n", HEADER.trim_end_matches(",cost_usd_mean"), BASE.trim_end_matches(",0.01")),
            "cur.csv",
        )
        .expect("parses");
        let e = compare_checked(&full, &no_cost, &Tolerances::default()).expect_err("refused");
        assert_eq!(e.to_string(), "cur.csv:1: no column `cost_usd_mean` (which t.csv has); the gate cannot compare it");
        // Comparable files still compare.
        assert!(!compare_checked(&full, &worse, &Tolerances::default()).expect("comparable").passed());
    }

    #[test]
    fn non_finite_values_are_refused_with_file_line_and_column() {
        for value in ["inf", "-inf", "1e400", "NaN", "infinity"] {
            let text = format!(
                "{HEADER}\n{BASE}\n{}\n",
                BASE.replacen("a,", "b,", 1).replace(",0.8,0.7,0.9,", &format!(",{value},0.7,0.9,"))
            );
            let e = SummaryTable::parse(&text, "cur.csv").expect_err(value);
            assert_eq!(
                e.to_string(),
                format!("cur.csv:3: column `retention_mean`: {value:?} is not a finite number"),
                "{value}"
            );
        }
    }

    #[test]
    fn impossible_values_duplicate_headers_and_empty_ids_are_refused() {
        let bad = |row: &str| SummaryTable::parse(&format!("{HEADER}\n{row}\n"), "s.csv").expect_err(row).to_string();
        assert!(bad(&BASE.replace(",0.8,0.7,0.9,", ",-5,0.7,0.9,")).contains("`retention_mean`: \"-5\" is not a share"));
        assert!(bad(&BASE.replace(",0.8,0.7,0.9,", ",1e300,0.7,0.9,")).contains("is not a share"));
        assert!(bad(&BASE.replace(",10,0,0.8,", ",10,1.5,0.8,")).contains("`failed`: \"1.5\" is not a count"));
        assert!(bad(&BASE.replace(",10,0,0.8,", ",10,-3,0.8,")).contains("`failed`: \"-3\" is not a count"));
        assert_eq!(bad(&BASE.replacen("a,", ",", 1)), "s.csv:2: column `config_id` is empty; every row needs one");
        let e =
            SummaryTable::parse("config_id,retention_mean,retention_mean\na,0.5,0.9\n", "s.csv").expect_err("twice");
        assert_eq!(e.to_string(), "s.csv:1: column `retention_mean` appears twice");
        let e = ResultsTable::parse("config_id,conversation_id,retention\na,c,NaN\n", "r.csv").expect_err("NaN");
        assert_eq!(e.to_string(), "r.csv:2: column `retention`: \"NaN\" is not a finite number");
        let e = ResultsTable::parse("config_id,conversation_id,probes\na,c,-1\n", "r.csv").expect_err("negative");
        assert!(e.to_string().contains("is not a count"), "{e}");
    }

    #[test]
    fn a_damaged_results_file_stops_the_paired_gate_instead_of_turning_it_off() {
        let summary = table(&[BASE]);
        let rows = |v: f64| -> String {
            (0..12).map(|i| format!("a,c{i},{},0.5\n", v + f64::from(i) / 100.0)).collect::<String>()
        };
        let good = ResultsTable::parse(
            &format!("config_id,conversation_id,retention,at_risk_retention\n{}", rows(0.7)),
            "b.csv",
        )
        .expect("parses");
        let header_only = ResultsTable::parse("config_id,conversation_id,retention\n", "h.csv").expect("parses");
        let e = check_paired(&summary, &summary, &header_only, &good).expect_err("no rows");
        assert!(e.to_string().starts_with("h.csv:1: no configuration rows"), "{e}");
        let no_retention = ResultsTable::parse("config_id,conversation_id,x\na,c0,1\n", "n.csv").expect("parses");
        let e = check_paired(&summary, &summary, &no_retention, &good).expect_err("no column");
        assert!(e.to_string().starts_with("n.csv:1: no column `retention`"), "{e}");
        let other =
            ResultsTable::parse("config_id,conversation_id,retention,at_risk_retention\nb,c0,0.5,0.5\n", "o.csv")
                .expect("parses");
        let e = check_paired(&summary, &summary, &other, &good).expect_err("no pairs");
        assert!(e.to_string().contains("o.csv: no `retention` for configuration a"), "{e}");
        assert!(check_paired(&summary, &summary, &good, &good).is_ok());
    }
}
