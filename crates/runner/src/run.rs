//! Running an experiment: plan the (conversation, configuration) pairs, run them in parallel,
//! append each finished pair to `results.jsonl` at once, resume after an interruption, split
//! the work into shards and merge the shards back.
//!
//! A run folder holds:
//! - `results.jsonl`: one [`PairRecord`] per line, in the order pairs finished. Each line is
//!   written whole and flushed when its pair finishes, so a killed run loses at most the line
//!   being written; [`run`] with `resume` drops that truncated line, rewrites the file cleanly
//!   and skips every pair already there (failed pairs included: they failed deterministically),
//!   except pairs that failed on a response cache miss (cache mode `only`, see
//!   [`CACHE_MISS_ERROR`]), which a resume runs again once the cache holds their answers.
//! - `run.json`: the [`Manifest`] (the experiment as parsed, versions, git commit, seed,
//!   tokenizer, judge, summarizer, timings, counts). Written when the run starts and again
//!   when it ends. It never holds environment values or keys.
//!
//! The CSV views are written by the `report` crate from [`RunData`].
//!
//! Order: pairs are planned conversation-major (datasets in the order the experiment lists
//! them, conversations in file order, then configurations in experiment order). The records
//! of a finished run are sorted by [`sort_records`] (configuration order, then dataset, then
//! conversation id), which depends only on the records and the experiment, so a resumed run,
//! an uninterrupted run and a merge of shards give the same outputs.
//!
//! Errors per pair never stop the run: a replay error or a panic becomes
//! [`PairOutcome::Failed`]. Only configuration and I/O problems of the run itself are
//! [`RunError`]s. The library never prints: progress goes to a callback.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use compaction::{Conversation, Encoding};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::experiment::{canonical_json, fnv1a, id_hash, Configuration, Experiment};
use crate::llm_setup::OnLlmError;
use crate::record::{PairMetrics, PairOutcome, PairRecord};
use crate::replay::{self, CacheProfile, Judge, ReplayError, ReplaySettings, Summarizer};
use dataset::{self, LoadOptions};

/// The results log in a run folder.
pub const RESULTS_FILE: &str = "results.jsonl";
/// The manifest in a run folder.
pub const MANIFEST_FILE: &str = "run.json";
/// The lock file a running process keeps in its run folder (its process id); a second
/// process refuses the folder while that process is alive.
pub const LOCK_FILE: &str = ".compactbench.lock";
/// Version of the manifest's shape.
pub const MANIFEST_FORMAT: u32 = 1;
/// How the error of a pair that met a response cache miss (cache mode `only`) begins. Such a
/// pair is recorded as failed, not with the degraded metrics its misses gave, and a resume
/// runs it again.
pub const CACHE_MISS_ERROR: &str = "response cache miss (cache mode only)";

/// How the error of a pair begins whose summary or judge request failed at the model endpoint
/// (with `on_llm_error = "fail"`, the default). A resume runs it again.
pub const ENDPOINT_ERROR: &str = "model endpoint failure";

/// Pairs that failed at the endpoint one after the other (in the order they finished) before
/// the run stops taking new pairs: the endpoint is down, and every further pair would only wait
/// out its retries.
pub const CIRCUIT_BREAKER: usize = 8;

/// True for a failed record that a resume runs again (see [`CACHE_MISS_ERROR`] and
/// [`ENDPOINT_ERROR`]).
pub fn is_retryable(record: &PairRecord) -> bool {
    matches!(&record.outcome, PairOutcome::Failed { error }
        if error.starts_with(CACHE_MISS_ERROR) || error.starts_with(ENDPOINT_ERROR))
}

fn is_endpoint_failure(record: &PairRecord) -> bool {
    matches!(&record.outcome, PairOutcome::Failed { error } if error.starts_with(ENDPOINT_ERROR))
}

/// Why a run (or a merge) could not go on. Per-pair problems are not errors: they are
/// [`PairOutcome::Failed`] records.
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
    #[error("{}: another run (process {pid}) is writing into this folder; its lock is {LOCK_FILE}", dir.display())]
    Locked { dir: PathBuf, pid: String },
    #[error("--shard {given}: {problem}")]
    Shard { given: String, problem: String },
    #[error("nothing to merge: name at least one run folder")]
    NothingToMerge,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RunError + '_ {
    move |source| RunError::Io { path: path.to_path_buf(), source }
}

/// One conversation of the plan and the dataset it came from.
#[derive(Debug, Clone)]
pub struct PlannedConversation {
    /// The dataset label recorded with every pair: the file name for a file entry, the
    /// folder's name and the file's path under it for a folder entry (`synthetic/coding.jsonl`).
    pub dataset: String,
    pub conversation: Arc<Conversation>,
}

/// One (conversation, configuration) pair, by index into the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pair {
    pub conversation: usize,
    pub config: usize,
}

/// The key that names a pair in the log: dataset, conversation id, config id.
pub fn pair_key(dataset: &str, conversation_id: &str, config_id: &str) -> String {
    format!("{dataset}\u{1f}{conversation_id}\u{1f}{config_id}")
}

/// The key of a record.
pub fn record_key(record: &PairRecord) -> String {
    pair_key(&record.dataset, &record.conversation_id, &record.config_id)
}

/// An experiment with its conversations loaded: everything needed to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub experiment: Experiment,
    pub conversations: Vec<PlannedConversation>,
    /// Lines of the datasets that could not be loaded (their conversations are not in the
    /// plan), and duplicate conversations that were left out.
    pub problems: Vec<String>,
}

impl Plan {
    /// Load every dataset of `experiment`. A dataset entry that does not exist, a folder
    /// without `*.jsonl` files, or an experiment with no conversation at all is an error; a
    /// bad line is a problem and the rest of its file is used.
    pub fn load(experiment: Experiment, options: &LoadOptions) -> Result<Plan, RunError> {
        let mut conversations = Vec::new();
        let mut problems = Vec::new();
        for (entry, path) in experiment.datasets.iter().zip(experiment.dataset_paths()) {
            let datasets = if path.is_dir() {
                let prefix = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| entry.trim_end_matches('/').to_string());
                let found = dataset::load_dir(&path, options);
                if found.is_empty() {
                    return Err(RunError::Dataset { path, problem: "no *.jsonl files in this folder".into() });
                }
                found.into_iter().map(|ds| (format!("{prefix}/{}", ds.name), ds)).collect::<Vec<_>>()
            } else if path.is_file() {
                let ds = dataset::load_file(&path, options);
                vec![(ds.name.clone(), ds)]
            } else if path.exists() {
                return Err(RunError::Dataset {
                    path,
                    problem: "not a regular file or folder (a FIFO, device or socket)".into(),
                });
            } else {
                return Err(RunError::Dataset {
                    path,
                    problem: format!("not found (the experiment lists {entry:?}, relative to its own folder)"),
                });
            };
            for (label, mut ds) in datasets {
                problems.extend(ds.problems.iter().map(|p| p.to_string()));
                // A conversation `validate` rejects is not replayed (its own violations would
                // be charged to every strategy), unless the caller allows it; either way it
                // is reported.
                let invalid = ds.validate();
                if !invalid.is_empty() {
                    let bad_lines: HashSet<usize> = invalid.iter().filter_map(|e| e.line).collect();
                    for e in &invalid {
                        let what =
                            if options.allow_invalid { "invalid, replayed anyway" } else { "invalid, not replayed" };
                        problems.push(format!("{e} ({what})"));
                    }
                    if !options.allow_invalid {
                        let keep: Vec<bool> = ds.lines.iter().map(|l| !bad_lines.contains(l)).collect();
                        let mut k = keep.iter();
                        ds.conversations.retain(|_| *k.next().unwrap_or(&true));
                        let mut k = keep.iter();
                        ds.lines.retain(|_| *k.next().unwrap_or(&true));
                    }
                }
                for conv in ds.conversations {
                    conversations.push(PlannedConversation { dataset: label.clone(), conversation: Arc::new(conv) });
                }
            }
        }
        let plan = Plan::from_conversations(experiment, conversations, problems);
        if plan.conversations.is_empty() {
            let path = plan.experiment.dataset_paths().into_iter().next().unwrap_or_default();
            let why = match plan.problems.first() {
                Some(first) => format!(
                    "; {} line{} skipped, the first: {first}",
                    plan.problems.len(),
                    if plan.problems.len() == 1 { "" } else { "s" }
                ),
                None => String::new(),
            };
            return Err(RunError::Dataset {
                path,
                problem: format!("the experiment's datasets hold no conversation{why}"),
            });
        }
        Ok(plan)
    }

    /// A plan over conversations already in memory. A conversation whose (dataset, id) is
    /// already in the plan is left out with a problem.
    pub fn from_conversations(
        experiment: Experiment,
        conversations: Vec<PlannedConversation>,
        mut problems: Vec<String>,
    ) -> Plan {
        let mut seen = HashSet::new();
        let mut kept = Vec::with_capacity(conversations.len());
        for c in conversations {
            if seen.insert((c.dataset.clone(), c.conversation.id.clone())) {
                kept.push(c);
            } else {
                problems.push(format!(
                    "dataset {}: conversation {} is listed more than once; only the first is run",
                    c.dataset, c.conversation.id
                ));
            }
        }
        Plan { experiment, conversations: kept, problems }
    }

    /// Every pair, conversation-major, in a deterministic order. The `recorded` reference
    /// gets pairs only for recordings that hold a compaction (on any other it would be `none`
    /// under another name, a configuration that was never exercised).
    pub fn pairs(&self) -> Vec<Pair> {
        let n = self.experiment.configurations.len();
        let configs = &self.experiment.configurations;
        (0..self.conversations.len())
            .flat_map(|conversation| (0..n).map(move |config| Pair { conversation, config }))
            .filter(|p| {
                configs[p.config].strategy != "recorded"
                    || holds_compaction(&self.conversations[p.conversation].conversation)
            })
            .collect()
    }

    /// The pairs of one shard (all of them without a shard).
    pub fn shard_pairs(&self, shard: Option<Shard>) -> Vec<Pair> {
        let all = self.pairs();
        match shard {
            None => all,
            Some(s) => all.into_iter().filter(|p| s.contains(&self.key(*p))).collect(),
        }
    }

    pub fn key(&self, pair: Pair) -> String {
        let c = &self.conversations[pair.conversation];
        pair_key(&c.dataset, &c.conversation.id, &self.experiment.configurations[pair.config].config_id)
    }

    /// A fingerprint of the experiment and its pairs: runs, resumes and shards of the same
    /// experiment over the same conversations share it.
    pub fn experiment_id(&self) -> String {
        let keys: Vec<String> = self.pairs().into_iter().map(|p| self.key(p)).collect();
        let ids: Vec<&str> = self.experiment.configurations.iter().map(|c| c.config_id.as_str()).collect();
        let identity = serde_json::json!({
            "name": self.experiment.name,
            "seed": self.experiment.seed,
            "configurations": ids,
            "pairs": format!("{:016x}", fnv1a(keys.join("\n").as_bytes())),
        });
        format!("{}-{}", self.experiment.name, id_hash(&canonical_json(&identity)))
    }
}

/// The recording holds a compaction its agent made (a summary flagged
/// `meta.compact_summary`), which the `recorded` reference replays.
pub fn holds_compaction(conversation: &Conversation) -> bool {
    conversation.messages.iter().any(|m| m.meta_flag(compaction::strategies::recorded::SUMMARY_FLAG))
}

/// `--shard K/N`: the K-th of N disjoint slices of the pairs (1-based), chosen by a hash of
/// each pair's key, so the slices do not depend on how many pairs there are or their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub fn contains(&self, key: &str) -> bool {
        fnv1a(key.as_bytes()) % u64::from(self.count) == u64::from(self.index - 1)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = RunError;
    fn from_str(s: &str) -> Result<Shard, RunError> {
        let err = |problem: &str| RunError::Shard { given: s.to_string(), problem: problem.to_string() };
        let (k, n) = s.split_once('/').ok_or_else(|| err("expected K/N, e.g. 1/4"))?;
        let index: u32 = k.trim().parse().map_err(|_| err("K is not a number"))?;
        let count: u32 = n.trim().parse().map_err(|_| err("N is not a number"))?;
        if count == 0 || index == 0 || index > count {
            return Err(err("K must be between 1 and N"));
        }
        Ok(Shard { index, count })
    }
}

/// The replay function a run calls for each pair ([`replay::replay`] unless a test swaps it).
pub type ReplayFn = fn(&Conversation, &ReplaySettings, &dyn Summarizer, &dyn Judge) -> Result<PairMetrics, ReplayError>;

/// What replays each pair.
#[derive(Clone, Copy)]
pub struct Engine<'a> {
    pub summarizer: &'a dyn Summarizer,
    pub judge: &'a dyn Judge,
    pub replay: ReplayFn,
}

impl<'a> Engine<'a> {
    /// The replay engine with this summarizer and judge.
    pub fn new(summarizer: &'a dyn Summarizer, judge: &'a dyn Judge) -> Engine<'a> {
        Engine { summarizer, judge, replay: replay::replay }
    }
}

/// How to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// The run folder (created if missing).
    pub out: PathBuf,
    /// Continue the run in `out`, skipping the pairs already in its `results.jsonl`.
    pub resume: bool,
    /// Worker threads; `None`: one per core.
    pub jobs: Option<usize>,
    pub shard: Option<Shard>,
}

/// Where a run comes from, gathered by the caller (the library does not look at the
/// environment or run programs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// Version of the tool that ran it.
    pub tool_version: String,
    /// `git rev-parse HEAD`, when it worked.
    pub git_commit: Option<String>,
    /// When the run started, as the caller formats it (UTC).
    pub started_at: String,
}

/// Progress, passed to the caller's callback after every pair (from worker threads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// Pairs finished in this invocation.
    pub done: usize,
    /// Pairs to run in this invocation (resumed pairs excluded).
    pub total: usize,
    /// Pairs that failed in this invocation.
    pub failed: usize,
    /// Pairs found in the log and skipped.
    pub resumed: usize,
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
}

/// Wall times.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// This invocation, in milliseconds (a merge adds its shards').
    pub wall_ms: u64,
    /// Sum of the pairs' replay times, in milliseconds.
    pub replay_ms: u64,
}

/// `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// See [`Plan::experiment_id`].
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
    /// The summarizer's and the judge's names as they report them.
    pub summarizer: String,
    pub judge: String,
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
    /// the roles fills it in (see [`crate::llm_setup::LlmRoles::stats`]). A merge leaves it out:
    /// each shard's `run.json` keeps its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<crate::llm_setup::LlmRunStats>,
    /// Why the run stopped before every planned pair ran (the circuit breaker), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
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
    pub fn read(dir: &Path) -> Result<RunData, RunError> {
        let manifest = read_manifest(dir)?;
        let (mut records, _) = read_results(&dir.join(RESULTS_FILE))?;
        dedupe(&mut records);
        sort_records(&manifest.experiment, &mut records);
        Ok(RunData { manifest, records })
    }
}

fn versions() -> BTreeMap<String, String> {
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
fn dedupe(records: &mut Vec<PairRecord>) {
    let mut seen = HashSet::new();
    records.retain(|r| seen.insert(record_key(r)));
}

/// Read `results.jsonl`. A last line that does not parse (a write cut short by a kill) is
/// dropped; the second value tells whether that happened. A bad line before the last is an
/// error. A missing file reads as empty.
pub fn read_results(path: &Path) -> Result<(Vec<PairRecord>, bool), RunError> {
    let text = match fs::read(path) {
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
fn write_results(path: &Path, records: &[PairRecord]) -> Result<(), RunError> {
    let tmp = path.with_extension("jsonl.tmp");
    let mut out = String::new();
    for r in records {
        out.push_str(&record_line(r));
    }
    fs::write(&tmp, out).map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))
}

fn record_line(record: &PairRecord) -> String {
    // A record is plain data (strings, numbers, JSON values): serializing it cannot fail,
    // and a failure would be a bug worth a visible message in the log rather than a panic.
    let mut line =
        serde_json::to_string(record).unwrap_or_else(|e| format!("{{\"serialization_error\":{:?}}}", e.to_string()));
    line.push('\n');
    line
}

pub fn read_manifest(dir: &Path) -> Result<Manifest, RunError> {
    let path = dir.join(MANIFEST_FILE);
    let text = fs::read_to_string(&path).map_err(io_err(&path))?;
    serde_json::from_str(&text).map_err(|e| RunError::Mismatch {
        dir: dir.to_path_buf(),
        problem: format!("{MANIFEST_FILE} cannot be read: {e}"),
    })
}

pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), RunError> {
    let path = dir.join(MANIFEST_FILE);
    let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
    let mut text = serde_json::to_string_pretty(manifest)
        .map_err(|e| RunError::Io { path: path.clone(), source: io::Error::other(e) })?;
    text.push('\n');
    fs::write(&tmp, text).map_err(io_err(&tmp))?;
    fs::rename(&tmp, &path).map_err(io_err(&path))
}

/// Count ok and failed records.
fn count(records: &[PairRecord]) -> (usize, usize) {
    let failed = records.iter().filter(|r| matches!(r.outcome, PairOutcome::Failed { .. })).count();
    (records.len() - failed, failed)
}

fn replay_ms(records: &[PairRecord]) -> u64 {
    records
        .iter()
        .map(|r| match &r.outcome {
            PairOutcome::Ok(m) => m.elapsed_ms,
            PairOutcome::Failed { .. } => 0,
        })
        .sum()
}

/// Run `plan` into `options.out`. Returns the run's manifest and all its records (resumed
/// ones included), sorted by [`sort_records`].
pub fn run(
    plan: &Plan,
    engine: &Engine<'_>,
    options: &RunOptions,
    provenance: &Provenance,
    progress: &(dyn Fn(&Progress) + Sync),
) -> Result<RunData, RunError> {
    let started = Instant::now();
    let dir = &options.out;
    let experiment_id = plan.experiment_id();
    refuse_foreign_folder(dir, &experiment_id)?;
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let _lock = RunLock::take(dir)?;
    let results_path = dir.join(RESULTS_FILE);
    let shard_text = options.shard.map(|s| s.to_string());

    let mut done: Vec<PairRecord> = Vec::new();
    let mut earlier_wall_ms = 0;
    if results_path.exists() {
        if !options.resume {
            return Err(RunError::Exists { dir: dir.clone() });
        }
        if dir.join(MANIFEST_FILE).exists() {
            let old = read_manifest(dir)?;
            if old.experiment_id != experiment_id {
                return Err(RunError::Mismatch {
                    dir: dir.clone(),
                    problem: format!(
                        "holds experiment {}, not {experiment_id} (the experiment file or its datasets changed)",
                        old.experiment_id
                    ),
                });
            }
            if old.shard != shard_text {
                return Err(RunError::Mismatch {
                    dir: dir.clone(),
                    problem: format!(
                        "holds shard {}, not {}",
                        old.shard.as_deref().unwrap_or("(none)"),
                        shard_text.as_deref().unwrap_or("(none)")
                    ),
                });
            }
            earlier_wall_ms = old.timings.wall_ms;
        }
        let (mut records, truncated) = read_results(&results_path)?;
        let before = records.len();
        dedupe(&mut records);
        records.retain(|r| !is_retryable(r));
        if truncated || records.len() != before {
            write_results(&results_path, &records)?;
        }
        done = records;
    }

    let planned = plan.shard_pairs(options.shard);
    // A record whose conversation text or configuration changed since it was written is
    // stale: dropped and run again (ids alone would keep it), and so is a record with no hash
    // (written by an older version), which cannot be checked.
    let mut stale = 0usize;
    if !done.is_empty() {
        let hashes: HashMap<String, String> =
            planned.iter().map(|p| (plan.key(*p), pair_hash(plan, engine, *p))).collect();
        let before = done.len();
        done.retain(|r| match (&r.content_hash, hashes.get(&record_key(r))) {
            (Some(old), Some(new)) => old == new,
            // Written before records carried a hash: nothing shows it is current.
            (None, Some(_)) => false,
            (_, None) => true,
        });
        stale = before - done.len();
        if stale > 0 {
            write_results(&results_path, &done)?;
        }
    }
    let planned_keys: HashSet<String> = planned.iter().map(|p| plan.key(*p)).collect();
    if let Some(stray) = done.iter().find(|r| !planned_keys.contains(&record_key(r))) {
        return Err(RunError::Mismatch {
            dir: dir.clone(),
            problem: format!(
                "{RESULTS_FILE} holds conversation {} under {}, which this run does not plan",
                stray.conversation_id, stray.config_id
            ),
        });
    }
    let done_keys: HashSet<String> = done.iter().map(record_key).collect();
    let todo: Vec<Pair> = planned.iter().copied().filter(|p| !done_keys.contains(&plan.key(*p))).collect();

    let mut manifest = Manifest {
        format: MANIFEST_FORMAT,
        experiment_id,
        experiment: plan.experiment.clone(),
        versions: versions(),
        tool_version: provenance.tool_version.clone(),
        git_commit: provenance.git_commit.clone(),
        started_at: provenance.started_at.clone(),
        seed: plan.experiment.seed,
        tokenizer: plan.experiment.tokenizer,
        cache: plan.experiment.cache,
        summarizer: engine.summarizer.name(),
        judge: engine.judge.name(),
        shard: shard_text,
        merged_from: Vec::new(),
        jobs: options.jobs,
        conversations: plan.conversations.len(),
        probes: probe_texts(plan),
        counts: Counts {
            pairs_total: plan.conversations.len() * plan.experiment.configurations.len(),
            pairs_planned: planned.len(),
            resumed: done.len(),
            stale,
            ..Counts::default()
        },
        timings: Timings::default(),
        dataset_problems: plan.problems.clone(),
        complete: false,
        llm: None,
        stopped: None,
    };
    write_manifest(dir, &manifest)?;

    let file = fs::OpenOptions::new().create(true).append(true).open(&results_path).map_err(io_err(&results_path))?;
    let log = LogWriter {
        path: &results_path,
        file: Mutex::new(file),
        error: Mutex::new(None),
        stop: AtomicBool::new(false),
    };
    let new_records: Mutex<Vec<PairRecord>> = Mutex::new(Vec::with_capacity(todo.len()));
    let finished = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    // Consecutive endpoint failures, and the breaker's reason once it trips.
    let streak: Mutex<usize> = Mutex::new(0);
    let tripped: Mutex<Option<String>> = Mutex::new(None);
    let breaker = AtomicBool::new(false);
    let resumed = done.len();
    let total = todo.len();
    progress(&Progress { done: 0, total, failed: 0, resumed });

    let work = || {
        todo.par_iter().for_each(|&pair| {
            if log.stop.load(Ordering::Relaxed) || breaker.load(Ordering::Relaxed) {
                return;
            }
            let record = run_pair(plan, engine, pair);
            if matches!(record.outcome, PairOutcome::Failed { .. }) {
                failed.fetch_add(1, Ordering::Relaxed);
            }
            {
                let mut n = lock(&streak);
                if is_endpoint_failure(&record) {
                    *n += 1;
                    if *n >= CIRCUIT_BREAKER && !breaker.swap(true, Ordering::Relaxed) {
                        let error = match &record.outcome {
                            PairOutcome::Failed { error } => error.clone(),
                            PairOutcome::Ok(_) => String::new(),
                        };
                        *lock(&tripped) = Some(format!(
                            "{CIRCUIT_BREAKER} pairs in a row failed at the model endpoint; the last: {error}"
                        ));
                    }
                } else {
                    *n = 0;
                }
            }
            if log.append(&record) {
                lock(&new_records).push(record);
                let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
                progress(&Progress { done: n, total, failed: failed.load(Ordering::Relaxed), resumed });
            }
        });
    };
    match options.jobs {
        Some(jobs) => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(jobs.max(1))
                .build()
                .map_err(|e| RunError::Io { path: dir.clone(), source: io::Error::other(e) })?;
            pool.install(work);
        }
        None => work(),
    }
    if let Some(source) = lock(&log.error).take() {
        return Err(RunError::Io { path: results_path, source });
    }

    let mut records = done;
    records.extend(lock(&new_records).drain(..));
    sort_records(&plan.experiment, &mut records);
    let (ok, failed) = count(&records);
    manifest.counts.ok = ok;
    manifest.counts.failed = failed;
    manifest.counts.missing = planned.len().saturating_sub(records.len());
    manifest.timings =
        Timings { wall_ms: earlier_wall_ms + started.elapsed().as_millis() as u64, replay_ms: replay_ms(&records) };
    manifest.stopped = lock(&tripped).take();
    manifest.complete = manifest.stopped.is_none();
    write_manifest(dir, &manifest)?;
    Ok(RunData { manifest, records })
}

/// Refuse an existing, non-empty `dir` that is not a run folder (no `run.json`), or that is
/// the run of another experiment: a run never writes its files over someone else's.
fn refuse_foreign_folder(dir: &Path, experiment_id: &str) -> Result<(), RunError> {
    let Ok(entries) = fs::read_dir(dir) else { return Ok(()) };
    let names: Vec<String> =
        entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n != LOCK_FILE).collect();
    if names.is_empty() {
        return Ok(());
    }
    if !names.iter().any(|n| n == MANIFEST_FILE) {
        let mut names = names;
        names.sort();
        return Err(RunError::NotARun { dir: dir.to_path_buf(), entry: names[0].clone() });
    }
    let old = read_manifest(dir)?;
    if old.experiment_id != experiment_id {
        return Err(RunError::Mismatch {
            dir: dir.to_path_buf(),
            problem: format!(
                "holds experiment {}, not {experiment_id} (the experiment file or its datasets changed)",
                old.experiment_id
            ),
        });
    }
    Ok(())
}

/// The run folder's lock, held while a run writes into it and removed when dropped. A lock
/// whose process is gone (a killed run) is taken over, so a resume after `kill -9` works.
struct RunLock(PathBuf);

impl RunLock {
    fn take(dir: &Path) -> Result<RunLock, RunError> {
        let path = dir.join(LOCK_FILE);
        let me = std::process::id().to_string();
        for _ in 0..2 {
            match fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut f) => {
                    f.write_all(me.as_bytes()).map_err(io_err(&path))?;
                    return Ok(RunLock(path));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let pid = fs::read_to_string(&path).unwrap_or_default().trim().to_string();
                    if process_alive(&pid) {
                        return Err(RunError::Locked { dir: dir.to_path_buf(), pid });
                    }
                    // Stale: its process is gone.
                    let _ = fs::remove_file(&path);
                }
                Err(e) => return Err(RunError::Io { path, source: e }),
            }
        }
        Err(RunError::Locked { dir: dir.to_path_buf(), pid: "unknown".into() })
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Whether a process with this id is running. Where `/proc` is not available, a lock is
/// assumed held (remove the lock file by hand after a crash there).
fn process_alive(pid: &str) -> bool {
    if pid.is_empty() || pid.parse::<u32>().is_err() {
        return false;
    }
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return true;
    }
    proc.join(pid).exists()
}

/// Lock a mutex, recovering the data if a worker panicked while holding it (the data is a
/// log handle or a list of finished records: still consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The shared, append-only `results.jsonl`.
struct LogWriter<'a> {
    path: &'a Path,
    file: Mutex<fs::File>,
    /// The first write error; after it the run stops taking new pairs.
    error: Mutex<Option<io::Error>>,
    stop: AtomicBool,
}

impl LogWriter<'_> {
    /// Append one record as one line and flush; `false` when the write failed.
    fn append(&self, record: &PairRecord) -> bool {
        let line = record_line(record);
        let mut file = lock(&self.file);
        let result = file.write_all(line.as_bytes()).and_then(|()| file.flush());
        drop(file);
        match result {
            Ok(()) => true,
            Err(e) => {
                let mut first = lock(&self.error);
                if first.is_none() {
                    *first = Some(io::Error::new(e.kind(), format!("{}: {e}", self.path.display())));
                }
                self.stop.store(true, Ordering::Relaxed);
                false
            }
        }
    }
}

/// Replay one pair; a replay error or a panic becomes a failed record.
fn run_pair(plan: &Plan, engine: &Engine<'_>, pair: Pair) -> PairRecord {
    let planned = &plan.conversations[pair.conversation];
    let conversation = &planned.conversation;
    let config: &Configuration = &plan.experiment.configurations[pair.config];
    let window = config.window.or(conversation.context_window);
    let outcome = match window {
        None => PairOutcome::Failed {
            error: format!(
                "conversation {} has no context_window and the experiment sets no `windows`",
                conversation.id
            ),
        },
        Some(window) => {
            let settings = ReplaySettings {
                strategy: config.resolved.clone(),
                window,
                encoding: plan.experiment.tokenizer,
                cache: plan.experiment.cache,
                price: plan.experiment.price.as_ref().map(|p| p.price()),
                overflow: plan.experiment.overflow,
            };
            let started = Instant::now();
            let result = catch_unwind(AssertUnwindSafe(|| {
                (engine.replay)(conversation, &settings, engine.summarizer, engine.judge)
            }));
            match result {
                Ok(Ok(metrics)) if metrics.cache_misses > 0 => PairOutcome::Failed {
                    error: format!(
                        "{CACHE_MISS_ERROR}: {} summaries or probes had no cached response; \
                         fill the cache (cache mode use) and resume",
                        metrics.cache_misses
                    ),
                },
                Ok(Ok(metrics))
                    if metrics.endpoint_failures > 0
                        && plan.experiment.llm.as_ref().is_some_and(|l| l.on_llm_error == OnLlmError::Fail) =>
                {
                    PairOutcome::Failed {
                        error: format!(
                            "{ENDPOINT_ERROR}: {} summaries or probes failed at the model endpoint (first: {}); \
                             resume to run the pair again",
                            metrics.endpoint_failures,
                            metrics.endpoint_error.as_deref().unwrap_or("unknown")
                        ),
                    }
                }
                Ok(Ok(mut metrics)) => {
                    metrics.elapsed_ms = started.elapsed().as_millis() as u64;
                    PairOutcome::Ok(Box::new(metrics))
                }
                Ok(Err(e)) => PairOutcome::Failed { error: e.to_string() },
                Err(panic) => PairOutcome::Failed { error: format!("panic: {}", panic_message(&*panic)) },
            }
        }
    };
    PairRecord {
        conversation_id: conversation.id.clone(),
        dataset: planned.dataset.clone(),
        config_id: config.config_id.clone(),
        strategy: config.strategy.clone(),
        params: config.params.clone(),
        window: window.unwrap_or(0),
        judge: engine.judge.name(),
        content_hash: Some(pair_hash(plan, engine, pair)),
        outcome,
    }
}

/// The content hash of a pair (see [`PairRecord::content_hash`]).
fn pair_hash(plan: &Plan, engine: &Engine<'_>, pair: Pair) -> String {
    let conversation = &plan.conversations[pair.conversation].conversation;
    let config = &plan.experiment.configurations[pair.config];
    let conv = serde_json::to_string(conversation.as_ref()).unwrap_or_default();
    let cfg = serde_json::to_string(&config.resolved).unwrap_or_default();
    let text = format!(
        "{conv}\u{1f}{cfg}\u{1f}{:?}\u{1f}{}\u{1f}{}\u{1f}{:?}\u{1f}{:?}",
        config.window,
        engine.summarizer.name(),
        engine.judge.name(),
        plan.experiment.tokenizer,
        plan.experiment.cache
    );
    format!("{:016x}", fnv1a(text.as_bytes()))
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

/// Combine run folders (typically the shards of one experiment) into `out`: records are
/// deduplicated by pair key (the first folder wins), the manifests must be of the same
/// experiment, and `out` gets a merged `results.jsonl` (sorted) and `run.json`.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<RunData, RunError> {
    let Some(first_dir) = dirs.first() else {
        return Err(RunError::NothingToMerge);
    };
    let first = read_manifest(first_dir)?;
    let mut records = Vec::new();
    let mut wall_ms = 0;
    let mut problems: Vec<String> = Vec::new();
    for dir in dirs {
        let manifest = read_manifest(dir)?;
        if manifest.experiment_id != first.experiment_id {
            return Err(RunError::Mismatch {
                dir: dir.clone(),
                problem: format!(
                    "holds experiment {}, but {} holds {}; only runs of the same experiment merge",
                    manifest.experiment_id,
                    first_dir.display(),
                    first.experiment_id
                ),
            });
        }
        wall_ms += manifest.timings.wall_ms;
        for p in manifest.dataset_problems {
            if !problems.contains(&p) {
                problems.push(p);
            }
        }
        let (mut shard_records, _) = read_results(&dir.join(RESULTS_FILE))?;
        records.append(&mut shard_records);
    }
    dedupe(&mut records);
    sort_records(&first.experiment, &mut records);

    fs::create_dir_all(out).map_err(io_err(out))?;
    let out_results = out.join(RESULTS_FILE);
    if out_results.exists() && !dirs.iter().any(|d| same_dir(d, out)) {
        return Err(RunError::Exists { dir: out.to_path_buf() });
    }
    write_results(&out_results, &records)?;
    let (ok, failed) = count(&records);
    let manifest = Manifest {
        shard: None,
        merged_from: dirs.iter().map(|d| d.display().to_string()).collect(),
        counts: Counts {
            pairs_total: first.counts.pairs_total,
            pairs_planned: first.counts.pairs_total,
            ok,
            failed,
            missing: first.counts.pairs_total.saturating_sub(records.len()),
            resumed: 0,
            stale: 0,
        },
        timings: Timings { wall_ms, replay_ms: replay_ms(&records) },
        dataset_problems: problems,
        complete: true,
        llm: None,
        stopped: None,
        ..first
    };
    write_manifest(out, &manifest)?;
    Ok(RunData { manifest, records })
}

/// Every probe of the plan's conversations, with its text.
fn probe_texts(plan: &Plan) -> Vec<crate::record::ProbeText> {
    plan.conversations
        .iter()
        .flat_map(|c| {
            c.conversation.probes.iter().map(|p| crate::record::ProbeText {
                dataset: c.dataset.clone(),
                conversation_id: c.conversation.id.clone(),
                probe_id: p.id.clone(),
                question: p.question.clone(),
                answer: p.answer.clone(),
                facts: p.facts.clone(),
            })
        })
        .collect()
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests;
