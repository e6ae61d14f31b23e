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
//! | `violations` | `violations` | higher | 0 (any new violation) |
//! | `failed` | `failed` | higher | 0 (any newly failing conversation) |
//! | `cost` | `cost_usd_mean` | higher | 5% of the baseline |
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
}

/// A metric the gate can fail on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    Retention,
    AtRiskRetention,
    OverflowRate,
    Violations,
    Failed,
    Cost,
}

impl Metric {
    pub const ALL: [Metric; 6] = [
        Metric::Retention,
        Metric::AtRiskRetention,
        Metric::OverflowRate,
        Metric::Violations,
        Metric::Failed,
        Metric::Cost,
    ];

    /// The name used in `--tolerance` and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Retention => "retention",
            Metric::AtRiskRetention => "at_risk_retention",
            Metric::OverflowRate => "overflow_rate",
            Metric::Violations => "violations",
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
            Metric::Violations => "violations",
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

    /// Higher values are better.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::Retention | Metric::AtRiskRetention)
    }

    pub fn default_tolerance(self) -> Tolerance {
        match self {
            Metric::Retention => Tolerance::Absolute(0.01),
            Metric::AtRiskRetention => Tolerance::Absolute(0.02),
            Metric::OverflowRate | Metric::Violations | Metric::Failed => Tolerance::Absolute(0.0),
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
            _ => None,
        })
    }

    fn format(self, v: f64) -> String {
        match self {
            Metric::Retention | Metric::AtRiskRetention | Metric::OverflowRate => format!("{:.1}%", v * 100.0),
            Metric::Violations | Metric::Failed => format!("{v}"),
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
}

impl Tolerance {
    fn allowed(self, baseline: f64) -> f64 {
        match self {
            Tolerance::Absolute(d) => d,
            Tolerance::Relative(r) => r * baseline.abs(),
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::Absolute(d) => write!(f, "{d}"),
            Tolerance::Relative(r) => write!(f, "{}%", trim(&format!("{:.4}", r * 100.0))),
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
const TEXT_COLUMNS: [&str; 5] = ["config_id", "dataset", "strategy", "params", "judge"];

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
}

impl SummaryTable {
    /// Read a `summary.csv` (or the `summary.csv` of a run folder).
    pub fn read(path: &Path) -> Result<SummaryTable, GateError> {
        let path = if path.is_dir() { path.join(crate::SUMMARY_CSV) } else { path.to_path_buf() };
        let text = std::fs::read_to_string(&path).map_err(|source| GateError::Io { path: path.clone(), source })?;
        SummaryTable::parse(&text, &path.display().to_string())
    }

    /// Parse the text of a summary file; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<SummaryTable, GateError> {
        let mut reader = ::csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
        let csv_err = |e: ::csv::Error| GateError::Csv {
            file: file.to_string(),
            line: e.position().map(|p| p.line()).unwrap_or(1),
            problem: e.to_string(),
        };
        let header: Vec<String> = reader.headers().map_err(csv_err)?.iter().map(|h| h.trim().to_string()).collect();
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
                continue;
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
                let v: f64 = cell.parse().map_err(|_| GateError::Number {
                    file: file.into(),
                    line,
                    column: column.clone(),
                    value: cell.to_string(),
                })?;
                entry.values.insert(column.clone(), v);
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
}

/// Values closer than this are equal (CSV values are rounded to 6 or 8 decimals).
const EPSILON: f64 = 1e-9;

/// Compare `current` against `baseline`.
pub fn compare(baseline: &SummaryTable, current: &SummaryTable, tolerances: &Tolerances) -> GateReport {
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
                verdict: Verdict::MissingInCurrent,
                gated: None,
            });
            continue;
        };
        compared += 1;
        for metric in Metric::ALL {
            if let Some(change) = judge(metric, base, cur, tolerances.get(metric)) {
                changes.push(change);
            }
        }
        let gated_columns: Vec<&str> = Metric::ALL
            .iter()
            .flat_map(|m| {
                let (lo, hi) = m.ci_columns().unwrap_or(("", ""));
                [m.column(), lo, hi]
            })
            .collect();
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
                "### compactbench gate: passed\n\n{} rows (configurations, pooled and per dataset) compared with the baseline; no regression.\n\n",
                self.compared
            ));
        } else {
            let configs: std::collections::BTreeSet<&str> = self.failures().map(|c| c.config_id.as_str()).collect();
            out.push_str(&format!(
                "### compactbench gate: FAILED\n\n{} {} in {} {} ({} rows compared with the baseline).\n\n",
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
                "| configuration | metric | baseline | current | change | baseline 95% CI | tolerance | verdict |\n",
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
                let delta = match (c.baseline, c.current) {
                    (Some(b), Some(a)) => {
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
                let interval = match (c.interval, c.gated) {
                    (Some((lo, hi)), Some(m)) => format!("[{}, {}]", m.format(lo), m.format(hi)),
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
        at_risk_retention_mean,at_risk_retention_ci_low,at_risk_retention_ci_high,compression_ratio,overflow_rate,violations,cost_usd_mean";

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
    fn new_overflows_violations_failures_and_cost_regress() {
        let worse = "a,keep-last-n,{},10,1,0.8,0.7,0.9,0.6,0.4,0.8,0.5,0.02,3,0.02";
        let r = compare(&table(&[BASE]), &table(&[worse]), &Tolerances::default());
        let failing: Vec<String> = r.failures().map(|c| c.metric.clone()).collect();
        assert_eq!(failing, ["overflow_rate", "violations", "failed", "cost"]);
        let md = r.markdown();
        assert!(md.contains("### compactbench gate: FAILED"));
        assert!(md.contains("| a | violations | 0 | 3 | +3 | – | 0 | **regression** |"), "{md}");
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
        let worse = SummaryTable::parse(old.replace("0.9,0.85", "0.5,0.85").as_str(), "cur.csv").expect("parses");
        let report = compare(&base, &worse, &Tolerances::default());
        assert!(!report.passed());
        assert!(report.changes.iter().all(|c| c.metric != "at_risk_retention_task"));
    }
}
