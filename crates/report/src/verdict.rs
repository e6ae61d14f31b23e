//! The verdict: at each window, which configuration to ship, how sure that is, and why.
//!
//! Computed once from a run folder's files (`run.json`, `summary.csv`, `results.csv`,
//! `probes.csv`), read by column name so a column a newer or older run lacks is tolerated and
//! said to be missing, never guessed. Shown three ways from the one [`Verdict`]: text for the
//! terminal ([`Verdict::text`], [`Verdict::short_text`]), markdown for a CI job summary
//! ([`Verdict::markdown`]) and JSON (serde), and drawn first in `report.html`.
//!
//! **Views.** Per window: every dataset pooled (`all`), then each dataset alone.
//!
//! **Figures**, each with its 95% interval and its denominator:
//! - completion: the share of conversations with no rejected call (bootstrap over conversations);
//! - paired at-risk retention: the mean score over the probes at risk under every configuration
//!   of the view's window that compacted on that dataset (the `paired_at_risk_retention` of
//!   `summary.csv`, over critical and useful probes when `probes.csv` has a `tier` column),
//!   its interval a bootstrap over conversations of that mean over probes;
//! - cost per conversation (bootstrap over conversations).
//!
//! **The front.** A configuration is *ranked* when it can operate at the window (`applicable`
//! is not `false`), compacted at least once in the view, and completes every conversation or
//! no ranked configuration does (one that loses conversations to rejected calls is not a choice
//! when another completes them all). The front is the ranked configurations no other ranked one
//! beats on all three figures (completion and retention higher or equal, cost lower or equal,
//! one strictly). The best is the front's first by completion, then retention, then cost.
//!
//! **Why.** Every configuration off the front is compared with the front configuration that
//! beats it, conversation by conversation on the conversations both replayed, with the gate's
//! paired test ([`crate::gate::paired_test`], weighted by probes for retention): the mean
//! difference with its 95% interval, and "no detectable difference" where the interval
//! covers 0 (or, under [`crate::gate::SIGN_TEST_BELOW`] pairs, the sign test finds nothing).
//! The best is compared with the front's second the same way: that is how sure the verdict is.
//!
//! **Warnings** that change the reading: a stand-in summarizer; a view whose paired figures rest
//! on fewer than [`MIN_EVIDENCE`] conversations ("too little evidence to rank"); configurations
//! that cannot operate at the window or never compacted; rejected calls and requests a provider
//! would refuse; failed replays; unscored probes; fabricated directives and dropped user
//! messages when the run records them.
//!
//! ```no_run
//! let verdict = report::verdict::Verdict::read(std::path::Path::new("reports/default-20250101-000000")).unwrap();
//! let text = verdict.text();
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::gate::{paired_test, weighted_paired_test, PairedTest};
use crate::stats::mean;
use crate::summary::{bootstrap_ci, metric_seed, weighted_bootstrap_ci, weighted_mean, ALL_DATASETS};

pub mod render;
mod table;

use table::Table;

/// A view whose paired figures rest on fewer conversations than this cannot rank.
pub const MIN_EVIDENCE: usize = 20;

/// The manifest's file name in a run folder.
pub const RUN_JSON: &str = "run.json";
/// What a run needs before its summarizing strategies can be ranked against masking or
/// truncation: a model writing the summaries. The verdict and the report's manifest say it
/// whenever the summaries come from the stand-in.
pub const STAND_IN_REMEDY: &str = "summarizer = \"llm\"";

/// Why a verdict could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum VerdictError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{file}:{line}: {problem}")]
    Csv { file: String, line: u64, problem: String },
    #[error("{file}:{line}: column {column}: {value:?} is not a number")]
    Number { file: String, line: u64, column: String, value: String },
    #[error("{file}: no column {column}")]
    MissingColumn { file: String, column: String },
    #[error("{file}: {problem}")]
    Manifest { file: String, problem: String },
}

/// The texts of a run folder's files the verdict reads.
#[derive(Debug, Clone, Default)]
pub struct RunFiles {
    pub manifest: String,
    pub summary: String,
    pub results: String,
    /// Empty when the folder has no `probes.csv` (the retention figures are then missing).
    pub probes: String,
}

impl RunFiles {
    /// Read the files of a run folder.
    pub fn read(dir: &Path) -> Result<RunFiles, VerdictError> {
        // Through the bounded reader: a device or FIFO at a file's name is refused before it
        // is opened, a file over its cap before it is read.
        let read = |name: &str| {
            let path = dir.join(name);
            let kind = if name == RUN_JSON { inputs::Kind::Manifest } else { inputs::Kind::RunTable };
            inputs::read_to_string(&path, kind).map_err(|e| VerdictError::Io { path, source: e.into_io() })
        };
        let probes_path = dir.join(crate::PROBES_CSV);
        Ok(RunFiles {
            manifest: read(RUN_JSON)?,
            summary: read(crate::SUMMARY_CSV)?,
            results: read(crate::RESULTS_CSV)?,
            probes: if probes_path.exists() { read(crate::PROBES_CSV)? } else { String::new() },
        })
    }

    /// The files a run in memory writes, as text (what [`crate::write_outputs`] would write).
    pub fn of_run(data: &runlog::log::RunData) -> RunFiles {
        let experiment = &data.manifest.experiment;
        let text = |header: &[&str], bytes: Result<Vec<u8>, ::csv::Error>| match bytes {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(_) => header.join(","),
        };
        let csv = |header: &[&str], write: &dyn Fn(&mut Vec<u8>) -> Result<(), ::csv::Error>| {
            let mut bytes = Vec::new();
            let result = write(&mut bytes).map(|()| bytes);
            text(header, result)
        };
        let summary = crate::csv::summary_rows(&experiment.configurations, &data.records, data.manifest.seed);
        let results = crate::csv::result_rows(&data.records);
        let probes = crate::csv::probe_rows(&data.records);
        RunFiles {
            manifest: serde_json::to_string(&data.manifest).unwrap_or_default(),
            summary: csv(&crate::csv::SUMMARY_HEADER, &|w| {
                crate::csv::write_rows(w, &crate::csv::SUMMARY_HEADER, &summary)
            }),
            results: csv(&crate::csv::RESULTS_HEADER, &|w| {
                crate::csv::write_rows(w, &crate::csv::RESULTS_HEADER, &results)
            }),
            probes: csv(&crate::csv::PROBES_HEADER, &|w| {
                crate::csv::write_rows(w, &crate::csv::PROBES_HEADER, &probes)
            }),
        }
    }
}

/// The verdict of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub experiment: String,
    pub summarizer: String,
    pub judge: String,
    /// Summaries come from a stand-in (the offline extractive summarizer), not a model.
    pub stand_in_summary: bool,
    /// Warnings about the whole run.
    pub warnings: Vec<Warning>,
    /// What the run's files do not say, and what the verdict assumes instead.
    pub notes: Vec<String>,
    pub windows: Vec<WindowVerdict>,
}

/// The views of one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowVerdict {
    /// `None`: each conversation's own window.
    pub window: Option<u64>,
    /// The pooled view first, then each dataset.
    pub views: Vec<View>,
}

/// One window over one dataset, or every dataset pooled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct View {
    /// A dataset label, or [`ALL_DATASETS`].
    pub dataset: String,
    /// Conversations replayed in the view.
    pub conversations: usize,
    /// Conversations that compacted under at least one configuration.
    pub compacting_conversations: usize,
    /// Every configuration of the window with rows in the view, in experiment order.
    pub configurations: Vec<Entry>,
    /// The front's configuration ids, best first.
    pub front: Vec<String>,
    /// The front's first, compared with its second (how sure the verdict is).
    pub best: Option<Best>,
    /// Front configurations with no detectable difference from the best in completion or
    /// retention, on enough conversations compacted under both: the cheapest of them is the pick.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tie: Option<Tie>,
    pub warnings: Vec<Warning>,
    /// Parameters swept over in the view, with the values on the front.
    pub sweeps: Vec<Sweep>,
    /// State retention on the answer keys, in one line (`None` where the view has no keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Next-action readiness on the front, in one line, where it separates the front (`None`
    /// elsewhere; see [`Verdict`]'s `readiness_line`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness: Option<String>,
}

/// The best configuration of a view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Best {
    pub config_id: String,
    /// The front's second and how the best compares with it; `None` with a front of one.
    pub runner_up: Option<Comparison>,
    /// The best against every other front configuration, in front order (the runner-up first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub against: Vec<Against>,
}

/// The best against one other front configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Against {
    pub config_id: String,
    pub comparison: Comparison,
}

/// Front configurations the runs cannot tell apart in quality: no detectable difference from
/// the best in completion or at-risk retention, each comparison on at least [`MIN_EVIDENCE`]
/// conversations compacted under both.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tie {
    /// The best first, then the others in front order.
    pub members: Vec<String>,
    /// The cheapest member by cost per conversation: the one to ship.
    pub cheapest: String,
    /// What the cheapest saves per conversation against the best (`best - cheapest`, paired;
    /// `None` when unpriced or when the best is the cheapest).
    pub saving: Option<f64>,
    /// The saving as a share of the best's cost per conversation.
    pub saving_share: Option<f64>,
    /// The fewest conversations compacted under both that a member's comparison rests on.
    pub conversations: usize,
}

/// One configuration in one view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub config_id: String,
    pub strategy: String,
    /// The parameters as the experiment wrote them (the ones that differ from the defaults),
    /// `key=value`, in key order.
    pub params: Vec<(String, String)>,
    pub completion: Figure,
    pub retention: Figure,
    pub cost: Figure,
    /// Conversations in which the configuration compacted.
    pub compacted_conversations: usize,
    pub compactions_mean: Option<f64>,
    /// Conversations that ended on a rejected call.
    pub rejected_conversations: usize,
    /// Requests the OpenAI and the Anthropic API would refuse.
    pub refused_openai: u64,
    pub refused_anthropic: u64,
    pub failed: usize,
    pub standing: Standing,
}

/// A mean with its 95% interval and what it is over.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Figure {
    pub value: Option<f64>,
    pub interval: Option<(f64, f64)>,
    /// Conversations the figure is over.
    pub conversations: usize,
    /// Probes (probe-checkpoint pairs) it is over, for retention.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probes: Option<usize>,
}

/// Where a configuration stands in a view.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Standing {
    /// On the front.
    Front,
    /// Off the front, beaten by a front configuration.
    Beaten(Box<Comparison>),
    /// Not ranked, and why.
    NotRanked { reason: String },
}

/// A front configuration against another, conversation by conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The front configuration.
    pub by: String,
    /// Conversations compacted under both: what the comparison rests on. Under
    /// [`MIN_EVIDENCE`] the comparison says "too little evidence".
    pub both_compacted: usize,
    /// Probe-checkpoint pairs at risk under both (the retention difference's probes).
    pub probes: usize,
    /// `front - other`: positive when the front configuration completes more.
    pub completion: Difference,
    /// `front - other` in paired at-risk retention.
    pub retention: Difference,
    /// `front - other` in cost per conversation: negative when the front one is cheaper.
    pub cost: Difference,
}

impl Comparison {
    /// Some difference is detectable.
    pub fn detectable(&self) -> bool {
        self.completion.detectable || self.retention.detectable || self.cost.detectable
    }

    /// The comparison rests on enough conversations compacted under both.
    pub fn enough_evidence(&self) -> bool {
        self.both_compacted >= MIN_EVIDENCE
    }
}

/// A paired difference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Difference {
    /// Pairs (conversations) compared; 0: nothing to compare.
    pub pairs: usize,
    pub mean: Option<f64>,
    /// The bootstrap's 95% interval, from [`crate::gate::SIGN_TEST_BELOW`] pairs on.
    pub interval: Option<(f64, f64)>,
    /// The sign test's smaller one-sided p-value, under that many pairs.
    pub sign_p: Option<f64>,
    /// The interval excludes 0 (or the sign test finds a difference at 95%).
    pub detectable: bool,
}

/// A warning that changes the reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Warning {
    pub kind: WarningKind,
    pub message: String,
    /// The configurations concerned, if any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub configurations: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    StandInSummarizer,
    TooLittleEvidence,
    Inapplicable,
    NeverExercised,
    RejectedCalls,
    ProviderRefusals,
    FailedReplays,
    UnscoredProbes,
    FabricatedDirectives,
    UserMessageDropped,
}

/// A parameter swept over for one strategy at one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    pub strategy: String,
    pub parameter: String,
    /// One point per configuration, by value.
    pub points: Vec<SweepPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    pub value: String,
    /// The value as a number, when it is one.
    pub number: Option<f64>,
    pub config_id: String,
    pub on_front: bool,
}

/// A configuration as the manifest lists it.
#[derive(Debug, Clone)]
struct Config {
    id: String,
    strategy: String,
    params: BTreeMap<String, serde_json::Value>,
    window: Option<u64>,
}

/// One replayed conversation of one configuration, from `results.csv`.
#[derive(Debug, Clone, Copy, Default)]
struct Replay {
    completed: bool,
    compacted: bool,
    cost: Option<f64>,
}

/// (dataset, conversation).
type ConvKey = (String, String);

/// Everything read from the files, indexed.
struct Inputs {
    configs: Vec<Config>,
    seed: u64,
    summary: Table,
    /// config -> (dataset, conversation) -> replay (ok rows only).
    replays: BTreeMap<String, BTreeMap<ConvKey, Replay>>,
    /// config -> (dataset, conversation) -> probe id -> scores of its checkpoints, at risk or not;
    /// only probes that count toward the headline (scored; critical or useful when tiered).
    scores: BTreeMap<String, BTreeMap<ConvKey, BTreeMap<String, Vec<f64>>>>,
    /// config -> (dataset, conversation, probe) at risk under it.
    at_risk: BTreeMap<String, BTreeSet<(String, String, String)>>,
    unscored_probes: usize,
    tiered: bool,
    /// The summaries come from the stand-in.
    stand_in: bool,
}

impl Verdict {
    /// The verdict of a run folder.
    pub fn read(dir: &Path) -> Result<Verdict, VerdictError> {
        Verdict::from_files(&RunFiles::read(dir)?, &dir.display().to_string())
    }

    /// The verdict of a run in memory, through the same files it writes.
    pub fn of_run(data: &runlog::log::RunData) -> Result<Verdict, VerdictError> {
        Verdict::from_files(&RunFiles::of_run(data), "run")
    }

    /// The verdict of a run's files; `dir` names them in errors.
    pub fn from_files(files: &RunFiles, dir: &str) -> Result<Verdict, VerdictError> {
        let name = |file: &str| format!("{dir}/{file}");
        let manifest: serde_json::Value = serde_json::from_str(&files.manifest)
            .map_err(|e| VerdictError::Manifest { file: name(RUN_JSON), problem: e.to_string() })?;
        let text = |key: &str| manifest.get(key).and_then(serde_json::Value::as_str).unwrap_or("").to_string();
        let experiment = manifest.get("experiment").unwrap_or(&serde_json::Value::Null);
        let configs = read_configs(experiment, &name(RUN_JSON))?;
        let summary = Table::parse(&files.summary, &name(crate::SUMMARY_CSV))?;
        let results = Table::parse(&files.results, &name(crate::RESULTS_CSV))?;
        let probes = if files.probes.trim().is_empty() {
            None
        } else {
            Some(Table::parse(&files.probes, &name(crate::PROBES_CSV))?)
        };
        let mut inputs = Inputs {
            configs,
            seed: manifest.get("seed").and_then(serde_json::Value::as_u64).unwrap_or(0),
            summary,
            replays: BTreeMap::new(),
            scores: BTreeMap::new(),
            at_risk: BTreeMap::new(),
            unscored_probes: 0,
            tiered: false,
            stand_in: false,
        };
        inputs.read_results(&results)?;
        if let Some(p) = &probes {
            inputs.read_probes(p)?;
        }

        let summarizer = text("summarizer");
        let flag = manifest.get("stand_in_summary").and_then(serde_json::Value::as_bool);
        let stand_in = flag.unwrap_or(summarizer == "offline");
        inputs.stand_in = stand_in;
        let mut notes = Vec::new();
        if flag.is_none() {
            notes.push(format!(
                "run.json has no stand_in_summary flag: the summarizer is taken to be a stand-in because it is `{summarizer}`"
            ))
        }
        if probes.is_none() {
            notes.push("no probes.csv: retention figures and comparisons are missing".into());
        } else if !inputs.tiered {
            notes.push(
                "probes.csv has no tier column: paired at-risk retention is over every probe, not only critical and useful ones"
                    .into(),
            );
        }
        if inputs.summary.col("applicable").is_none() {
            notes.push(
                "summary.csv has no applicable column: a configuration that cannot operate at its window shows as never exercised or rejected"
                    .into(),
            );
        }
        let mut warnings = Vec::new();
        if stand_in {
            warnings.push(Warning {
                kind: WarningKind::StandInSummarizer,
                message: format!(
                    "summaries come from a stand-in (`{summarizer}`, extractive), not a model: retention measures what verbatim extraction keeps, not what a model's summary would; ranking a summarizer against masking or truncation needs `{STAND_IN_REMEDY}`"
                ),
                configurations: Vec::new(),
            });
        }
        if inputs.unscored_probes > 0 {
            warnings.push(Warning {
                kind: WarningKind::UnscoredProbes,
                message: format!(
                    "{} probe scores are missing (the judge gave no verdict): they are left out of every mean",
                    inputs.unscored_probes
                ),
                configurations: Vec::new(),
            });
        }
        let mut window_list: Vec<Option<u64>> = Vec::new();
        for c in &inputs.configs {
            if !window_list.contains(&c.window) {
                window_list.push(c.window);
            }
        }
        let mut windows = Vec::new();
        for w in window_list {
            let ids: Vec<&Config> = inputs.configs.iter().filter(|c| c.window == w).collect();
            let mut datasets: BTreeSet<String> = BTreeSet::new();
            for c in &ids {
                if let Some(r) = inputs.replays.get(&c.id) {
                    datasets.extend(r.keys().map(|(d, _)| d.clone()));
                }
            }
            let mut views = vec![inputs.view(&ids, ALL_DATASETS)?];
            if datasets.len() > 1 {
                for d in &datasets {
                    views.push(inputs.view(&ids, d)?);
                }
            }
            windows.push(WindowVerdict { window: w, views });
        }
        Ok(Verdict {
            experiment: experiment.get("name").and_then(serde_json::Value::as_str).unwrap_or("").to_string(),
            summarizer,
            judge: text("judge"),
            stand_in_summary: stand_in,
            warnings,
            notes,
            windows,
        })
    }

    /// The pooled view of each window.
    pub fn pooled(&self) -> impl Iterator<Item = (Option<u64>, &View)> {
        self.windows.iter().filter_map(|w| w.views.first().map(|v| (w.window, v)))
    }

    /// An entry by configuration id in a view.
    pub fn entry<'a>(view: &'a View, config_id: &str) -> Option<&'a Entry> {
        view.configurations.iter().find(|e| e.config_id == config_id)
    }
}

fn read_configs(experiment: &serde_json::Value, file: &str) -> Result<Vec<Config>, VerdictError> {
    let list = experiment.get("configurations").and_then(serde_json::Value::as_array).ok_or_else(|| {
        VerdictError::Manifest { file: file.to_string(), problem: "no experiment.configurations".into() }
    })?;
    list.iter()
        .enumerate()
        .map(|(i, c)| {
            let field = |k: &str| c.get(k).and_then(serde_json::Value::as_str).map(str::to_string);
            let missing = |k: &str| VerdictError::Manifest {
                file: file.to_string(),
                problem: format!("experiment.configurations[{i}] has no {k}"),
            };
            Ok(Config {
                id: field("config_id").ok_or_else(|| missing("config_id"))?,
                strategy: field("strategy").ok_or_else(|| missing("strategy"))?,
                params: c
                    .get("params")
                    .and_then(serde_json::Value::as_object)
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default(),
                window: c.get("window").and_then(serde_json::Value::as_u64),
            })
        })
        .collect()
}

/// A parameter value as written: a string without its quotes, anything else as JSON.
fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value of the `at_risk` or `completed` columns.
fn truthy(cell: &str) -> bool {
    matches!(cell.trim(), "true" | "1")
}

impl Inputs {
    fn read_results(&mut self, t: &Table) -> Result<(), VerdictError> {
        let id = t.require("config_id")?;
        let conv = t.require("conversation_id")?;
        let dataset = t.col("dataset");
        let status = t.col("status");
        let completed = t.require("completed")?;
        let compactions = t.require("compactions")?;
        let cost = t.col("cost_usd");
        for row in 0..t.len() {
            if status.is_some_and(|s| t.text(row, s) != "ok") {
                continue;
            }
            let key = (dataset.map(|d| t.text(row, d)).unwrap_or("").to_string(), t.text(row, conv).to_string());
            let replay = Replay {
                completed: truthy(t.text(row, completed)),
                compacted: t.num(row, compactions)?.is_some_and(|n| n > 0.0),
                cost: match cost {
                    Some(c) => t.num(row, c)?,
                    None => None,
                },
            };
            self.replays.entry(t.text(row, id).to_string()).or_default().insert(key, replay);
        }
        Ok(())
    }

    fn read_probes(&mut self, t: &Table) -> Result<(), VerdictError> {
        let id = t.require("config_id")?;
        let conv = t.require("conversation_id")?;
        let dataset = t.col("dataset");
        let probe = t.require("probe_id")?;
        let at_risk = t.require("at_risk")?;
        let score = t.require("score")?;
        let tier = t.col("tier");
        let written = t.col("written");
        self.tiered = tier.is_some();
        for row in 0..t.len() {
            if tier.is_some_and(|c| !matches!(t.text(row, c), "critical" | "useful")) {
                continue;
            }
            // Answer keys are state retention (summary.csv), not the probes' figures.
            if written.is_some_and(|c| truthy(t.text(row, c))) {
                continue;
            }
            let Some(value) = t.num(row, score)? else {
                self.unscored_probes += 1;
                continue;
            };
            let config = t.text(row, id).to_string();
            let d = dataset.map(|d| t.text(row, d)).unwrap_or("").to_string();
            let (c, p) = (t.text(row, conv).to_string(), t.text(row, probe).to_string());
            if truthy(t.text(row, at_risk)) {
                self.at_risk.entry(config.clone()).or_default().insert((d.clone(), c.clone(), p.clone()));
            }
            self.scores.entry(config).or_default().entry((d, c)).or_default().entry(p).or_default().push(value);
        }
        Ok(())
    }

    /// The summary row of a configuration in a view.
    fn summary_row(&self, config: &str, dataset: &str) -> Option<usize> {
        let id = self.summary.col("config_id")?;
        let ds = self.summary.col("dataset");
        (0..self.summary.len()).find(|&r| {
            self.summary.text(r, id) == config
                && ds.is_none_or(|c| {
                    self.summary.text(r, c) == dataset
                        || (dataset == ALL_DATASETS && self.summary.text(r, c).is_empty())
                })
        })
    }

    fn summary_num(&self, row: Option<usize>, column: &str) -> Result<Option<f64>, VerdictError> {
        match (row, self.summary.col(column)) {
            (Some(r), Some(c)) => self.summary.num(r, c),
            _ => Ok(None),
        }
    }

    /// The replays of a configuration in a view.
    fn replays_in(&self, config: &str, view: &str) -> BTreeMap<&ConvKey, Replay> {
        self.replays
            .get(config)
            .map(|m| m.iter().filter(|((d, _), _)| view == ALL_DATASETS || d == view).map(|(k, v)| (k, *v)).collect())
            .unwrap_or_default()
    }

    /// Per conversation of a view: the scores (every checkpoint) of the probes at risk under a
    /// configuration, the probes that count toward the headline only.
    fn at_risk_scores(&self, config: &str, view: &str) -> BTreeMap<ConvKey, BTreeMap<String, Vec<f64>>> {
        let mut out: BTreeMap<ConvKey, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
        let (Some(at_risk), Some(scores)) = (self.at_risk.get(config), self.scores.get(config)) else { return out };
        for (d, c, p) in at_risk.iter().filter(|(d, _, _)| view == ALL_DATASETS || d == view) {
            let key = (d.clone(), c.clone());
            if let Some(s) = scores.get(&key).and_then(|probes| probes.get(p)) {
                out.entry(key).or_default().insert(p.clone(), s.clone());
            }
        }
        out
    }

    fn view(&self, configs: &[&Config], view: &str) -> Result<View, VerdictError> {
        let mut entries = Vec::new();
        let mut per_conv: Vec<Series> = Vec::new();
        let mut all_convs: BTreeSet<&ConvKey> = BTreeSet::new();
        let mut compacting: BTreeSet<&ConvKey> = BTreeSet::new();
        let mut warnings = Vec::new();
        let applicable_col = self.summary.col("applicable");
        let reason_col = self.summary.col("inapplicable_reason");
        let mut extra: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for c in configs {
            let row = self.summary_row(&c.id, view);
            let replays = self.replays_in(&c.id, view);
            if row.is_none() && replays.is_empty() {
                continue;
            }
            all_convs.extend(replays.keys().copied());
            compacting.extend(replays.iter().filter(|(_, r)| r.compacted).map(|(k, _)| *k));
            let at_risk = self.at_risk_scores(&c.id, view);
            // Its own at-risk retention: per conversation, the mean over the probes at risk under it.
            let (rv, rw): (Vec<f64>, Vec<f64>) = at_risk
                .values()
                .filter_map(|probes| {
                    let scores: Vec<f64> = probes.values().flatten().copied().collect();
                    mean(&scores).map(|m| (m, scores.len() as f64))
                })
                .unzip();
            let seed_id = format!("{}@{view}", c.id);
            let completion_values: Vec<f64> = replays.values().map(|r| if r.completed { 1.0 } else { 0.0 }).collect();
            let cost_values: Vec<f64> = replays.values().filter_map(|r| r.cost).collect();
            let figure = |values: &[f64], metric: &str| Figure {
                value: mean(values),
                interval: bootstrap_ci(values, metric_seed(self.seed, &seed_id, metric)),
                conversations: values.len(),
                probes: None,
            };
            let applicable = match (row, applicable_col) {
                (Some(r), Some(col)) => !matches!(self.summary.text(r, col).trim(), "false" | "0"),
                _ => true,
            };
            let reason = match (row, reason_col) {
                (Some(r), Some(col)) => self.summary.text(r, col).to_string(),
                _ => String::new(),
            };
            let num = |column: &str| self.summary_num(row, column);
            let entry = Entry {
                config_id: c.id.clone(),
                strategy: c.strategy.clone(),
                params: c.params.iter().map(|(k, v)| (k.clone(), value_text(v))).collect(),
                completion: figure(&completion_values, "verdict/completion"),
                retention: Figure {
                    value: weighted_mean(&rv, &rw),
                    interval: weighted_bootstrap_ci(&rv, &rw, metric_seed(self.seed, &seed_id, "verdict/retention")),
                    conversations: rv.len(),
                    probes: Some(rw.iter().sum::<f64>() as usize),
                },
                cost: figure(&cost_values, "verdict/cost"),
                compacted_conversations: replays.values().filter(|r| r.compacted).count(),
                compactions_mean: num("compactions_mean")?,
                rejected_conversations: replays.values().filter(|r| !r.completed).count(),
                refused_openai: num("rejected_requests_openai")?.unwrap_or(0.0) as u64,
                refused_anthropic: num("rejected_requests_anthropic")?.unwrap_or(0.0) as u64,
                failed: num("failed")?.unwrap_or(0.0) as usize,
                standing: if applicable {
                    Standing::Front
                } else {
                    Standing::NotRanked {
                        reason: if reason.is_empty() {
                            "cannot operate at this window".into()
                        } else {
                            format!("cannot operate at this window: {reason}")
                        },
                    }
                },
            };
            for (column, kind) in [("fabricated_directives", "fabricated"), ("latest_user_message_dropped", "dropped")]
            {
                if num(column)?.is_some_and(|v| v > 0.0) {
                    extra.entry(kind).or_default().push(c.id.clone());
                }
            }
            per_conv.push(Series {
                completion: replays.iter().map(|(k, r)| ((*k).clone(), if r.completed { 1.0 } else { 0.0 })).collect(),
                cost: replays.iter().filter_map(|(k, r)| r.cost.map(|v| ((*k).clone(), v))).collect(),
                compacted: replays.iter().filter(|(_, r)| r.compacted).map(|(k, _)| (*k).clone()).collect(),
                at_risk,
            });
            entries.push(entry);
        }
        rank(&mut entries, &per_conv, self.seed, view);
        let front: Vec<String> = front_order(&entries, &per_conv);
        let best = front.first().map(|first| {
            let a = index(&entries, first);
            let against: Vec<Against> = front[1..]
                .iter()
                .map(|other| {
                    let b = index(&entries, other);
                    Against {
                        config_id: other.clone(),
                        comparison: compare(&entries[a], &per_conv[a], &entries[b], &per_conv[b], self.seed, view),
                    }
                })
                .collect();
            Best { config_id: first.clone(), runner_up: against.first().map(|x| x.comparison.clone()), against }
        });
        let tie = best.as_ref().and_then(|b| tie(b, &entries));
        self.view_warnings(&entries, best.as_ref(), &extra, &mut warnings);
        let sweeps = sweeps(configs, &entries);
        let state = self.state_line(configs, view)?;
        let mut out = View {
            dataset: view.to_string(),
            conversations: all_convs.len(),
            compacting_conversations: compacting.len(),
            configurations: entries,
            front,
            best,
            tie,
            warnings,
            sweeps,
            state,
            readiness: None,
        };
        out.readiness = self.readiness_line(&out, view)?;
        Ok(out)
    }

    /// Next-action readiness where it separates the front: the most and the least ready of
    /// the front's configurations that have a readiness (summary.csv `next_action_ready`),
    /// when their 95% intervals do not overlap, each with the compactions it rests on.
    /// `None` with fewer than two such configurations or overlapping intervals.
    fn readiness_line(&self, v: &View, view: &str) -> Result<Option<String>, VerdictError> {
        let pct = |x: f64| format!("{:.1}%", x * 100.0);
        let mut rows: Vec<(&str, f64, f64, f64, f64)> = Vec::new();
        for id in &v.front {
            let row = self.summary_row(id, view);
            let Some(ready) = self.summary_num(row, "next_action_ready")? else { continue };
            let low = self.summary_num(row, "next_action_ready_ci_low")?.unwrap_or(ready);
            let high = self.summary_num(row, "next_action_ready_ci_high")?.unwrap_or(ready);
            let n = self.summary_num(row, "next_action_compactions")?.unwrap_or(0.0);
            rows.push((id, ready, low, high, n));
        }
        if rows.len() < 2 {
            return Ok(None);
        }
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        let (top, bottom) = (rows[0], rows[rows.len() - 1]);
        if top.2 <= bottom.3 {
            return Ok(None);
        }
        let one = |r: (&str, f64, f64, f64, f64)| {
            format!("{} {} [{}, {}] over {:.0} compactions", v.label_of(r.0), pct(r.1), pct(r.2), pct(r.3), r.4)
        };
        Ok(Some(format!("next-action readiness separates the front: {} against {}", one(top), one(bottom))))
    }

    /// The answer keys' figures of a view in one line: the recorded agent's own summaries
    /// beside the configurations that compacted, each with what it rests on.
    fn state_line(&self, configs: &[&Config], view: &str) -> Result<Option<String>, VerdictError> {
        let pct = |v: f64| format!("{:.1}%", v * 100.0);
        let mut recorded: Option<(f64, Option<f64>)> = None;
        let mut others: Vec<(String, f64, Option<f64>)> = Vec::new();
        let mut keys = 0.0f64;
        let mut convs = 0.0f64;
        for c in configs {
            let row = self.summary_row(&c.id, view);
            let Some(state) = self.summary_num(row, "state_retention")? else { continue };
            keys = keys.max(self.summary_num(row, "state_keys")?.unwrap_or(0.0));
            convs = convs.max(self.summary_num(row, "state_conversations")?.unwrap_or(0.0));
            // A share over no key at risk says nothing.
            let at_risk = match self.summary_num(row, "state_at_risk_keys")? {
                Some(0.0) => None,
                _ => self.summary_num(row, "state_at_risk_retention")?,
            };
            let compacted = self.summary_num(row, "compacted_conversations")?.unwrap_or(0.0);
            if c.strategy == "recorded" {
                recorded = Some((state, at_risk));
            } else if compacted > 0.0 {
                others.push((c.strategy.clone(), state, at_risk));
            }
        }
        if recorded.is_none() && others.is_empty() {
            return Ok(None);
        }
        let mut parts = Vec::new();
        if let Some((state, at_risk)) = recorded {
            parts.push(format!(
                "the recorded agent's own summaries {}{}",
                pct(state),
                at_risk.map(|a| format!(" (at risk {})", pct(a))).unwrap_or_default()
            ));
        }
        if !others.is_empty() {
            others.sort_by(|a, b| a.1.total_cmp(&b.1));
            let (low, high) = (&others[0], &others[others.len() - 1]);
            let risks: Vec<f64> = others.iter().filter_map(|o| o.2).collect();
            let risk = match (risks.iter().copied().reduce(f64::min), risks.iter().copied().reduce(f64::max)) {
                (Some(a), Some(b)) => format!("; at risk {} to {}", pct(a), pct(b)),
                _ => String::new(),
            };
            parts.push(format!(
                "{} configurations that compacted{} {} ({}) to {} ({}){risk}",
                others.len(),
                if self.stand_in { " (summaries by the stand-in)" } else { "" },
                pct(low.1),
                low.0,
                pct(high.1),
                high.0
            ));
        }
        Ok(Some(format!(
            "state retention on the answer keys ({keys:.0} keys in {convs:.0} conversations): {}",
            parts.join("; ")
        )))
    }

    fn view_warnings(
        &self,
        entries: &[Entry],
        best: Option<&Best>,
        extra: &BTreeMap<&str, Vec<String>>,
        warnings: &mut Vec<Warning>,
    ) {
        let ids = |f: &dyn Fn(&Entry) -> bool| -> Vec<String> {
            entries.iter().filter(|e| f(e)).map(|e| e.config_id.clone()).collect()
        };
        let mut push = |kind, message: String, configurations: Vec<String>| {
            warnings.push(Warning { kind, message, configurations })
        };
        // Said of the best's comparisons that lack evidence, each with its count; a thin
        // comparison never stands for the others.
        if let Some(best) = best {
            let thin: Vec<&Against> = best.against.iter().filter(|a| !a.comparison.enough_evidence()).collect();
            if !thin.is_empty() {
                let mut counts: Vec<usize> = thin.iter().map(|a| a.comparison.both_compacted).collect();
                counts.dedup();
                let counts: Vec<String> = match counts.as_slice() {
                    [one] if thin.len() > 1 => vec![format!("{one} conversations each")],
                    _ => counts.iter().map(|n| format!("{n} conversations")).collect(),
                };
                push(
                    WarningKind::TooLittleEvidence,
                    format!(
                        "too little evidence to tell the best from {} on the front ({} compacted under both; at least {MIN_EVIDENCE} are needed)",
                        if thin.len() == 1 { "one other".to_string() } else { format!("{} others", thin.len()) },
                        counts.join(", ")
                    ),
                    thin.iter().map(|a| a.config_id.clone()).collect(),
                );
            }
        }
        let inapplicable =
            ids(&|e| matches!(&e.standing, Standing::NotRanked { reason } if reason.starts_with("cannot operate")));
        if !inapplicable.is_empty() {
            push(
                WarningKind::Inapplicable,
                format!("{} cannot operate at this window", inapplicable.len()),
                inapplicable,
            );
        }
        let never = ids(&|e| {
            e.compacted_conversations == 0
                && !matches!(&e.standing, Standing::NotRanked { reason } if reason.starts_with("cannot operate"))
        });
        if !never.is_empty() {
            push(
                WarningKind::NeverExercised,
                format!("{} never compacted here: their retention says nothing about their compaction", never.len()),
                never,
            );
        }
        let rejected = ids(&|e| e.rejected_conversations > 0);
        if !rejected.is_empty() {
            let total: usize = entries.iter().map(|e| e.rejected_conversations).sum();
            push(
                WarningKind::RejectedCalls,
                format!(
                    "{} lose conversations to a rejected call (over the window): {total} conversations in all",
                    rejected.len()
                ),
                rejected,
            );
        }
        let refused = ids(&|e| e.refused_openai + e.refused_anthropic > 0);
        if !refused.is_empty() {
            let (o, a): (u64, u64) =
                (entries.iter().map(|e| e.refused_openai).sum(), entries.iter().map(|e| e.refused_anthropic).sum());
            push(
                WarningKind::ProviderRefusals,
                format!("{} send requests a provider would refuse ({o} OpenAI, {a} Anthropic)", refused.len()),
                refused,
            );
        }
        let failed = ids(&|e| e.failed > 0);
        if !failed.is_empty() {
            push(
                WarningKind::FailedReplays,
                format!("{} have failed replays, left out of every figure", failed.len()),
                failed,
            );
        }
        if let Some(c) = extra.get("fabricated") {
            push(
                WarningKind::FabricatedDirectives,
                format!("{} fabricate directives in their summaries", c.len()),
                c.clone(),
            );
        }
        if let Some(c) = extra.get("dropped") {
            push(WarningKind::UserMessageDropped, format!("{} drop the latest user message", c.len()), c.clone());
        }
    }
}

/// Per-conversation values of one configuration in a view, for the paired comparisons.
struct Series {
    completion: BTreeMap<ConvKey, f64>,
    cost: BTreeMap<ConvKey, f64>,
    /// The conversations it compacted.
    compacted: BTreeSet<ConvKey>,
    /// Per conversation, the scores of the probes at risk under it.
    at_risk: BTreeMap<ConvKey, BTreeMap<String, Vec<f64>>>,
}

impl Series {
    /// Per conversation with probes at risk under both: (own mean, other's mean, probe
    /// count) over the probes at risk under both.
    fn paired_retention(&self, other: &Series) -> Vec<(f64, f64, f64)> {
        let mut out = Vec::new();
        for (key, mine) in &self.at_risk {
            let Some(theirs) = other.at_risk.get(key) else { continue };
            let (mut a, mut b, mut n, mut m) = (0.0, 0.0, 0usize, 0usize);
            for (probe, scores) in mine {
                if let Some(other_scores) = theirs.get(probe) {
                    a += scores.iter().sum::<f64>();
                    n += scores.len();
                    b += other_scores.iter().sum::<f64>();
                    m += other_scores.len();
                }
            }
            if n > 0 && m > 0 {
                out.push((a / n as f64, b / m as f64, n as f64));
            }
        }
        out
    }

    /// `self - other`, paired means only (no test): completion, at-risk retention over the
    /// probes at risk under both (`None` with none), cost (`None` unpriced).
    fn mean_differences(&self, other: &Series) -> [Option<f64>; 3] {
        let plain = |a: &BTreeMap<ConvKey, f64>, b: &BTreeMap<ConvKey, f64>| {
            let d: Vec<f64> = a.iter().filter_map(|(k, av)| b.get(k).map(|bv| av - bv)).collect();
            mean(&d)
        };
        let pairs = self.paired_retention(other);
        let weight: f64 = pairs.iter().map(|p| p.2).sum();
        let retention = (weight > 0.0).then(|| pairs.iter().map(|(a, b, n)| (a - b) * n).sum::<f64>() / weight);
        [plain(&self.completion, &other.completion), retention, plain(&self.cost, &other.cost)]
    }
}

fn index(entries: &[Entry], id: &str) -> usize {
    entries.iter().position(|e| e.config_id == id).unwrap_or(0)
}

/// `a` is at least as good as `b` on every paired figure and better on one: completion and
/// cost on the conversations both replayed, retention on the probes at risk under both (a
/// missing figure counts as equal).
fn dominates(a: &Series, b: &Series) -> bool {
    let [completion, retention, cost] = a.mean_differences(b);
    let sign = |d: Option<f64>, higher: bool| match d {
        Some(d) if d.abs() > 1e-12 => {
            if (d > 0.0) == higher {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Less
            }
        }
        _ => std::cmp::Ordering::Equal,
    };
    let all = [sign(completion, true), sign(retention, true), sign(cost, false)];
    all.iter().all(|o| o.is_ge()) && all.iter().any(|o| o.is_gt())
}

/// The front, best first: by completion, then by paired retention wins against the rest of
/// the front (wins minus losses) in comparisons on at least [`MIN_EVIDENCE`] conversations
/// compacted under both, then by the same count over every comparison, then by cost. A
/// configuration that compacts rarely cannot lead on comparisons too thin to count.
fn front_order(entries: &[Entry], series: &[Series]) -> Vec<String> {
    let front: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].standing == Standing::Front).collect();
    let wins = |i: usize| -> (i64, i64) {
        let (mut evidenced, mut all) = (0, 0);
        for &j in front.iter().filter(|&&j| j != i) {
            let w = match series[i].mean_differences(&series[j])[1] {
                Some(d) if d > 1e-12 => 1,
                Some(d) if d < -1e-12 => -1,
                _ => 0,
            };
            all += w;
            if series[i].compacted.intersection(&series[j].compacted).count() >= MIN_EVIDENCE {
                evidenced += w;
            }
        }
        (evidenced, all)
    };
    let mut keyed: Vec<(usize, (i64, i64))> = front.iter().map(|&i| (i, wins(i))).collect();
    let key = |v: Option<f64>, missing: f64| v.unwrap_or(missing);
    keyed.sort_by(|(a, wa), (b, wb)| {
        let (a, b) = (&entries[*a], &entries[*b]);
        key(b.completion.value, f64::NEG_INFINITY)
            .total_cmp(&key(a.completion.value, f64::NEG_INFINITY))
            .then(wb.cmp(wa))
            .then(key(a.cost.value, f64::INFINITY).total_cmp(&key(b.cost.value, f64::INFINITY)))
    });
    keyed.into_iter().map(|(i, _)| entries[i].config_id.clone()).collect()
}

/// Set every entry's standing.
fn rank(entries: &mut [Entry], series: &[Series], seed: u64, view: &str) {
    for e in entries.iter_mut() {
        if e.standing != Standing::Front {
            continue;
        }
        if e.completion.conversations == 0 {
            e.standing = Standing::NotRanked { reason: "no conversation replayed".into() };
        } else if e.compacted_conversations == 0 {
            e.standing = Standing::NotRanked { reason: "never compacted here (not exercised)".into() };
        }
    }
    let someone_completes = entries.iter().any(|e| e.standing == Standing::Front && e.completion.value == Some(1.0));
    let ranked: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].standing == Standing::Front).collect();
    let front: Vec<usize> = ranked
        .iter()
        .copied()
        .filter(|&i| !someone_completes || entries[i].completion.value == Some(1.0))
        .filter(|&i| !ranked.iter().any(|&j| j != i && dominates(&series[j], &series[i])))
        .collect();
    let order = front_order_of(entries, series, &front);
    for &i in &ranked {
        if front.contains(&i) {
            continue;
        }
        // What beats it: the first front configuration that dominates it, else the first
        // ranked one that does (pairwise dominance need not pass through the front), else
        // (it loses conversations while the front completes them all) the front's first.
        let by = order
            .iter()
            .copied()
            .find(|&f| dominates(&series[f], &series[i]))
            .or_else(|| ranked.iter().copied().find(|&j| j != i && dominates(&series[j], &series[i])))
            .or(order.first().copied());
        let Some(by) = by else { continue };
        let comparison = compare(&entries[by], &series[by], &entries[i], &series[i], seed, view);
        entries[i].standing = Standing::Beaten(Box::new(comparison));
    }
}

/// The indices of `front` in front order.
fn front_order_of(entries: &[Entry], series: &[Series], front: &[usize]) -> Vec<usize> {
    let marked: Vec<Entry> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut e = e.clone();
            if !front.contains(&i) {
                e.standing = Standing::NotRanked { reason: String::new() };
            }
            e
        })
        .collect();
    front_order(&marked, series).iter().map(|id| index(entries, id)).collect()
}

/// `front - other`, conversation by conversation: completion and cost on the conversations
/// both replayed, retention on the probes at risk under both.
fn compare(front: &Entry, fs: &Series, other: &Entry, os: &Series, seed: u64, view: &str) -> Comparison {
    let key = format!("{}/{}@{view}", front.config_id, other.config_id);
    let plain = |a: &BTreeMap<ConvKey, f64>, b: &BTreeMap<ConvKey, f64>, metric: &str, higher: bool| {
        let pairs: Vec<(f64, f64)> = b.iter().filter_map(|(k, bv)| a.get(k).map(|av| (*bv, *av))).collect();
        let s = metric_seed(seed, &key, metric);
        difference(paired_test(&pairs, higher, s), paired_test(&pairs, !higher, s))
    };
    let paired = fs.paired_retention(os);
    let probes = paired.iter().map(|p| p.2).sum::<f64>() as usize;
    let (p, w): (Vec<(f64, f64)>, Vec<f64>) = paired.into_iter().map(|(f, o, n)| ((o, f), n)).unzip();
    let s = metric_seed(seed, &key, "verdict/retention");
    Comparison {
        by: front.config_id.clone(),
        both_compacted: fs.compacted.intersection(&os.compacted).count(),
        probes,
        completion: plain(&fs.completion, &os.completion, "verdict/completion", true),
        retention: difference(weighted_paired_test(&p, &w, true, s), weighted_paired_test(&p, &w, false, s)),
        cost: plain(&fs.cost, &os.cost, "verdict/cost", false),
    }
}

/// The best's tie: the front configurations it cannot be told apart from in completion or
/// retention, each on enough conversations compacted under both; `None` when it has none.
fn tie(best: &Best, entries: &[Entry]) -> Option<Tie> {
    let tied: Vec<&Against> = best
        .against
        .iter()
        .filter(|a| {
            let c = &a.comparison;
            c.enough_evidence() && c.retention.mean.is_some() && !c.retention.detectable && !c.completion.detectable
        })
        .collect();
    if tied.is_empty() {
        return None;
    }
    let cost = |id: &str| entries.iter().find(|e| e.config_id == id).and_then(|e| e.cost.value);
    let mut members = vec![best.config_id.clone()];
    members.extend(tied.iter().map(|a| a.config_id.clone()));
    let cheapest = members
        .iter()
        .min_by(|a, b| cost(a).unwrap_or(f64::INFINITY).total_cmp(&cost(b).unwrap_or(f64::INFINITY)))
        .cloned()
        .unwrap_or_else(|| best.config_id.clone());
    let saving = tied.iter().find(|a| a.config_id == cheapest).and_then(|a| a.comparison.cost.mean);
    let saving_share = match (saving, cost(&best.config_id)) {
        (Some(s), Some(c)) if c > 0.0 => Some(s / c),
        _ => None,
    };
    Some(Tie {
        members,
        cheapest,
        saving,
        saving_share,
        conversations: tied.iter().map(|a| a.comparison.both_compacted).min().unwrap_or(0),
    })
}

/// A difference from the paired test run both ways (a loss each way).
pub(crate) fn difference(one: PairedTest, other: PairedTest) -> Difference {
    if one.n == 0 {
        return Difference::default();
    }
    Difference {
        pairs: one.n,
        mean: Some(one.mean_difference),
        interval: one.interval,
        sign_p: match (one.sign_p, other.sign_p) {
            (Some(a), Some(b)) => Some(a.min(b)),
            _ => None,
        },
        detectable: one.significant_loss || other.significant_loss,
    }
}

/// The parameters swept over per strategy, with the values on the front.
fn sweeps(configs: &[&Config], entries: &[Entry]) -> Vec<Sweep> {
    let mut out = Vec::new();
    let mut strategies: Vec<&str> = Vec::new();
    for c in configs {
        if !strategies.contains(&c.strategy.as_str()) {
            strategies.push(&c.strategy);
        }
    }
    for s in strategies {
        let mine: Vec<&&Config> = configs.iter().filter(|c| c.strategy == s).collect();
        if mine.len() < 2 {
            continue;
        }
        let keys: BTreeSet<&String> = mine.iter().flat_map(|c| c.params.keys()).collect();
        for k in keys {
            let values: BTreeSet<String> =
                mine.iter().map(|c| c.params.get(k).map(value_text).unwrap_or_default()).collect();
            if values.len() < 2 {
                continue;
            }
            let mut points: Vec<SweepPoint> = mine
                .iter()
                .filter_map(|c| {
                    let e = entries.iter().find(|e| e.config_id == c.id)?;
                    let v = c.params.get(k);
                    Some(SweepPoint {
                        value: v.map(value_text).unwrap_or_else(|| "default".into()),
                        number: v.and_then(serde_json::Value::as_f64),
                        config_id: c.id.clone(),
                        on_front: e.standing == Standing::Front,
                    })
                })
                .collect();
            points.sort_by(|a, b| {
                a.number
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&b.number.unwrap_or(f64::INFINITY))
                    .then(a.value.cmp(&b.value))
            });
            out.push(Sweep { strategy: s.to_string(), parameter: k.clone(), points });
        }
    }
    out
}

#[cfg(test)]
mod tests;
