//! A run folder on disk: the results log (`results.jsonl`, one [`PairRecord`] per pair), the
//! manifest (`run.json`), reading them back (a truncated last line is tolerated), writing them
//! through a temporary file, and merging shard folders. Everything the report shows is read
//! from here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use compaction::Encoding;
use serde::{Deserialize, Serialize};

use crate::experiment::Experiment;
use crate::record::{PairOutcome, PairRecord};
use crate::settings::CacheProfile;

/// The results log in a run folder.
pub const RESULTS_FILE: &str = "results.jsonl";
/// The manifest in a run folder.
pub const MANIFEST_FILE: &str = "run.json";
/// The lock file of a run folder: an exclusive OS lock held by the running process (see
/// the run lock, `folder::RunLock`); it holds the owner's host and process id for the message.
pub const LOCK_FILE: &str = ".compactlens.lock";
/// Version of the manifest's shape.
pub const MANIFEST_FORMAT: u32 = 1;

/// Why a run (or a merge, or reading a run folder) could not go on. Per-pair problems are not
/// errors: they are [`PairOutcome::Failed`] records.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// A dataset entry of the experiment that cannot be used at all.
    #[error("dataset {}: {problem}", path.display())]
    Dataset { path: PathBuf, problem: String },
    /// The run folder already holds results and `resume` was not asked.
    #[error("{}: already holds {RESULTS_FILE}; resume it, or choose another folder", dir.display())]
    Exists { dir: PathBuf },
    /// The run folder (or a shard folder) belongs to another experiment or shard.
    #[error("{}: {problem}", dir.display())]
    Mismatch { dir: PathBuf, problem: String },
    /// A line of `results.jsonl` other than the last cannot be read.
    #[error("{}:{line}: not a result record: {problem}", path.display())]
    Corrupt { path: PathBuf, line: usize, problem: String },
    /// `--out` names a folder with files in it that is not a run folder.
    #[error("{}: not empty and not a run folder (it holds {entry}); choose a new or empty folder", dir.display())]
    NotARun { dir: PathBuf, entry: String },
    /// Another process is running into the folder.
    #[error("{}: another run ({owner}) is writing into this folder; it holds the lock {LOCK_FILE}", dir.display())]
    Locked { dir: PathBuf, owner: String },
    /// A file of a run folder is a symbolic link.
    #[error("{}: a symbolic link; a run folder's files are never links (remove it, or copy the file it points to in its place)", path.display())]
    Link { path: PathBuf },
    /// `results.jsonl` does not hold what `run.json` says the run recorded.
    #[error("{}: {problem}; {MANIFEST_FILE} says {expected}: the results log is damaged or was replaced, nothing was written", path.display())]
    Disagrees { path: PathBuf, problem: String, expected: String },
    /// A shard folder is still being written by a run.
    #[error("{}: a run ({owner}) is still writing into it; merge it when the run has finished", dir.display())]
    Busy { dir: PathBuf, owner: String },
    /// Two folders of a merge hold different records for one pair.
    #[error("{} and {} hold different records for conversation {conversation} of {dataset} under {config}; merge folders of disjoint shards, or keep one of them", first.display(), second.display())]
    Conflict { first: PathBuf, second: PathBuf, dataset: String, conversation: String, config: String },
    #[error("--shard {given}: {problem}")]
    Shard { given: String, problem: String },
    #[error("nothing to merge: name at least one run folder")]
    NothingToMerge,
}

pub fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RunError + '_ {
    move |source| RunError::Io { path: path.to_path_buf(), source }
}

/// The key that names a pair in the log: dataset, conversation id, config id.
pub fn pair_key(dataset: &str, conversation_id: &str, config_id: &str) -> String {
    format!("{dataset}\u{1f}{conversation_id}\u{1f}{config_id}")
}

/// The key of a record.
pub fn record_key(record: &PairRecord) -> String {
    pair_key(&record.dataset, &record.conversation_id, &record.config_id)
}

/// Pair counts of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Pairs of the whole experiment (every shard).
    pub pairs_total: usize,
    /// Pairs this run (or shard) was to run.
    pub pairs_planned: usize,
    pub ok: usize,
    pub failed: usize,
    /// Pairs of the plan with no record (an interrupted run, or a merge missing a shard).
    pub missing: usize,
    /// Pairs found in the log when resuming (not run again).
    pub resumed: usize,
    /// Pairs found in the log when resuming whose conversation or configuration changed since
    /// (their content hash differs): run again.
    #[serde(default)]
    pub stale: usize,
    /// Summaries asked of the summarizer over every pair.
    #[serde(default)]
    pub summaries: u64,
    /// Summaries that failed: an error, an empty or whitespace-only answer, or a refusal.
    #[serde(default)]
    pub summaries_failed: u64,
}

/// Wall times, and where the time went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// This invocation, in milliseconds (a merge adds its shards').
    pub wall_ms: u64,
    /// Sum of the pairs' replay times, in milliseconds.
    pub replay_ms: u64,
    /// The process's CPU time (user + system, all threads) over this invocation, in
    /// milliseconds, where the system tells it (Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// Worker threads the pairs ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Per phase of the run, in the order they happen (`compactlens run --timings` prints
    /// them): the run's own steps with their wall and CPU time, and the phases of the replays
    /// with their CPU time summed over the workers. Empty for a merge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseTiming>,
}

/// The time of one phase of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseTiming {
    /// `load`, `replay`, `replay/provider_checks`, `write/csv`, ...: a phase named
    /// `parent/child` is part of its parent's time.
    pub phase: String,
    /// Wall time, in milliseconds: `None` for a phase of the replays, which runs on every
    /// worker at once, interleaved with the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<u64>,
    /// CPU time in milliseconds, summed over the threads that did the work; `None` where the
    /// system does not tell it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// Thread time in milliseconds (the time the phase's code ran on its thread, off the CPU
    /// included), summed over the threads: on a machine with a core per worker, the CPU time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_ms: Option<u64>,
}

/// An external strategy of a run: its configuration, label and command, and the `name`,
/// `version` and protocol version its program reported (`None` when no process started).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalRun {
    pub config_id: String,
    pub label: String,
    pub command: Vec<String>,
    pub name: Option<String>,
    pub version: Option<String>,
    /// The protocol version it spoke (absent in runs made before version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
}

/// `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// See `runner::run::Plan::experiment_id`.
    pub experiment_id: String,
    pub experiment: Experiment,
    /// Name and version of each crate that shaped the results.
    pub versions: BTreeMap<String, String>,
    pub tool_version: String,
    pub git_commit: Option<String>,
    pub started_at: String,
    /// Seed of the bootstrap confidence intervals.
    pub seed: u64,
    pub tokenizer: Encoding,
    pub cache: CacheProfile,
    /// The provider whose refusals ([`compaction::check_request`]) end a conversation as an
    /// over-window request does: the one the experiment names with `cache` (alias
    /// `provider`). `None`: no provider named, so no refusal ends a conversation; both
    /// providers' refusals are reported columns only ([`Manifest::refusals`] says so).
    #[serde(default)]
    pub target_provider: Option<compaction::Provider>,
    /// In words, what a provider's refusal does in this run.
    #[serde(default)]
    pub refusals: String,
    /// The summarizer's and the judge's names as they report them.
    pub summarizer: String,
    pub judge: String,
    /// The summaries are the offline stand-in's (`summarizer = "offline"`): retention of the
    /// summarizing strategies measures the stand-in, not their prompts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stand_in_summary: bool,
    /// The shard this folder holds (`K/N`), if any.
    pub shard: Option<String>,
    /// The folders a merge combined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    pub jobs: Option<usize>,
    pub conversations: usize,
    pub counts: Counts,
    pub timings: Timings,
    /// Dataset lines that could not be loaded, and duplicates left out.
    pub dataset_problems: Vec<String>,
    /// `true` once the run (or merge) finished writing its records.
    pub complete: bool,
    /// What the LLM summarizer and judge did in this invocation (requests, retries, cache hits
    /// and misses, failures by kind, tokens), when a role used a model. The caller that built
    /// the roles fills it in (see `runner::llm_setup::LlmRoles::stats`). A merge leaves it out:
    /// each shard's `run.json` keeps its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<crate::llm_settings::LlmRunStats>,
    /// Why the run stopped before every planned pair ran (the circuit breaker), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The external strategies that ran, with what their programs said in `ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external: Vec<ExternalRun>,
    /// The question, answer and facts of every probe of the run's conversations, so the report
    /// shows them from the run folder alone (empty in run folders written before they were
    /// recorded; the report then reads the datasets if they are still there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<crate::record::ProbeText>,
}

/// A finished run: its manifest and its records, sorted by [`sort_records`]. Everything
/// the CSV and HTML views need.
#[derive(Debug, Clone, PartialEq)]
pub struct RunData {
    pub manifest: Manifest,
    pub records: Vec<PairRecord>,
}

impl RunData {
    /// Read a run folder (its manifest and log, tolerating a truncated last line).
    ///
    /// The log must agree with the manifest: a finished run's (or merge's) `results.jsonl`
    /// holds one whole record per pair `run.json` counts (ok and failed), and an interrupted
    /// run's at least the pairs it resumed; otherwise [`RunError::Disagrees`] says how.
    pub fn read(dir: &Path) -> Result<RunData, RunError> {
        let manifest = read_manifest(dir)?;
        let path = dir.join(RESULTS_FILE);
        if !path.exists() {
            return Err(RunError::Disagrees {
                path,
                problem: "does not exist".into(),
                expected: format!("{} records", manifest.counts.ok + manifest.counts.failed),
            });
        }
        let (mut records, truncated) = read_results(&path)?;
        dedupe(&mut records);
        let c = &manifest.counts;
        let counted = c.ok + c.failed;
        let problem = if manifest.complete && truncated {
            Some(format!("its last line is cut short ({} whole records before it)", records.len()))
        } else if manifest.complete && records.len() != counted {
            Some(if records.is_empty() {
                "holds no record".to_string()
            } else {
                format!("holds {} records", records.len())
            })
        } else if !manifest.complete && records.len() < c.resumed {
            Some(format!("holds {} records", records.len()))
        } else {
            None
        };
        if let Some(problem) = problem {
            let expected = if manifest.complete {
                format!("{counted} ({} ok, {} failed)", c.ok, c.failed)
            } else {
                format!("at least {} (the pairs it resumed)", c.resumed)
            };
            return Err(RunError::Disagrees { path, problem, expected });
        }
        sort_records(&manifest.experiment, &mut records);
        Ok(RunData { manifest, records })
    }
}

pub fn versions() -> BTreeMap<String, String> {
    // The workspace crates share one version.
    let v = env!("CARGO_PKG_VERSION").to_string();
    ["compaction", "runner"].iter().map(|c| (c.to_string(), v.clone())).collect()
}

/// Sort records by configuration (experiment order), dataset, then conversation id.
pub fn sort_records(experiment: &Experiment, records: &mut [PairRecord]) {
    let order: HashMap<&str, usize> =
        experiment.configurations.iter().enumerate().map(|(i, c)| (c.config_id.as_str(), i)).collect();
    records.sort_by(|a, b| {
        let oa = order.get(a.config_id.as_str()).copied().unwrap_or(usize::MAX);
        let ob = order.get(b.config_id.as_str()).copied().unwrap_or(usize::MAX);
        (oa, &a.config_id, &a.dataset, &a.conversation_id).cmp(&(ob, &b.config_id, &b.dataset, &b.conversation_id))
    });
}

/// Keep the first record of each pair key.
pub fn dedupe(records: &mut Vec<PairRecord>) {
    let mut seen = HashSet::new();
    records.retain(|r| seen.insert(record_key(r)));
}

/// Read `results.jsonl`. A last line that does not parse (a write cut short by a kill) is
/// dropped; the second value tells whether that happened. A bad line before the last is an
/// error. A missing file reads as empty.
pub fn read_results(path: &Path) -> Result<(Vec<PairRecord>, bool), RunError> {
    let text = match inputs::read(path, inputs::Kind::ResultsLog).map_err(inputs::InputError::into_io) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(e) => return Err(io_err(path)(e)),
    };
    let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    // `split` yields a last empty piece after a final newline.
    let last_non_empty = lines.iter().rposition(|l| !l.iter().all(u8::is_ascii_whitespace));
    let mut records = Vec::new();
    let mut dropped = false;
    for (i, line) in lines.iter().enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<PairRecord>(line) {
            Ok(r) => records.push(r),
            Err(e) if Some(i) == last_non_empty => {
                let _ = e;
                dropped = true;
            }
            Err(e) => return Err(RunError::Corrupt { path: path.to_path_buf(), line: i + 1, problem: e.to_string() }),
        }
    }
    // A file that does not end with a newline was cut short even if its last line parsed.
    if !text.is_empty() && !text.ends_with(b"\n") {
        dropped = true;
    }
    Ok((records, dropped))
}

/// Write records as JSON lines to `path` (replacing it), through a temporary file.
pub fn write_results(path: &Path, records: &[PairRecord]) -> Result<(), RunError> {
    let mut out = String::new();
    for r in records {
        out.push_str(&record_line(r));
    }
    crate::atomic::write_atomic(path, out.as_bytes()).map_err(io_err(path))
}

pub fn record_line(record: &PairRecord) -> String {
    // A record is plain data (strings, numbers, JSON values): serializing it cannot fail,
    // and a failure would be a bug worth a visible message in the log rather than a panic.
    let mut line =
        serde_json::to_string(record).unwrap_or_else(|e| format!("{{\"serialization_error\":{:?}}}", e.to_string()));
    line.push('\n');
    line
}

pub fn read_manifest(dir: &Path) -> Result<Manifest, RunError> {
    let path = dir.join(MANIFEST_FILE);
    let text = inputs::read_to_string(&path, inputs::Kind::Manifest)
        .map_err(inputs::InputError::into_io)
        .map_err(io_err(&path))?;
    serde_json::from_str(&text).map_err(|e| RunError::Mismatch {
        dir: dir.to_path_buf(),
        problem: format!("{MANIFEST_FILE} cannot be read: {e}"),
    })
}

pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), RunError> {
    let path = dir.join(MANIFEST_FILE);
    let mut text = serde_json::to_string_pretty(manifest)
        .map_err(|e| RunError::Io { path: path.clone(), source: io::Error::other(e) })?;
    text.push('\n');
    crate::atomic::write_atomic(&path, text.as_bytes()).map_err(io_err(&path))
}

/// Count ok and failed records.
pub fn count(records: &[PairRecord]) -> (usize, usize) {
    let failed = records.iter().filter(|r| matches!(r.outcome, PairOutcome::Failed { .. })).count();
    (records.len() - failed, failed)
}

/// Summaries asked and failed over the pairs that ran.
pub fn count_summaries(records: &[PairRecord]) -> (u64, u64) {
    records.iter().fold((0, 0), |(calls, failed), r| match &r.outcome {
        PairOutcome::Ok(m) => (calls + m.summarizer_calls, failed + m.summarizer_failures),
        PairOutcome::Failed { .. } => (calls, failed),
    })
}

pub fn replay_ms(records: &[PairRecord]) -> u64 {
    records
        .iter()
        .map(|r| match &r.outcome {
            PairOutcome::Ok(m) => m.elapsed_ms,
            PairOutcome::Failed { .. } => 0,
        })
        .sum()
}
