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

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use compaction::{Conversation, Strategy};

use crate::external::ExternalStrategy;
use crate::session::Compactor;
use serde::{Deserialize, Serialize};

use crate::replay::next_action::NextActionModel;
use crate::replay::{self, Judge, ReplayError, ReplaySettings, Summarizer};
use crate::timing::{PairStart, ReplayTotals, Stopwatch};
use compaction_strategies::StrategyConfig;
use dataset::{self, LoadOptions};
use runlog::catalog::Resolved;
use runlog::experiment::{canonical_json, id_hash, Configuration, Experiment};
use runlog::llm_settings::OnLlmError;
use runlog::log::{
    count, dedupe, io_err, pair_key, read_manifest, read_results, record_key, record_line, replay_ms, sort_records,
    versions, write_manifest, write_results, Counts, ExternalRun, Manifest, RunData, RunError, Timings, MANIFEST_FILE,
    MANIFEST_FORMAT, RESULTS_FILE,
};
use runlog::record::{PairFailure, PairMetrics, PairOutcome, PairRecord};
use seeded::{fnv1a, Fnv};
use std::hash::Hasher;

/// How the error of a pair that met a response cache miss (cache mode `only`) begins. Such a
/// pair is recorded as failed, not with the degraded metrics its misses gave, and a resume
/// runs it again.
pub const CACHE_MISS_ERROR: &str = "response cache miss (cache mode only)";

/// How the error of a pair begins whose summary or judge request failed at the model endpoint
/// (with `on_llm_error = "fail"`, the default). A resume runs it again.
pub const ENDPOINT_ERROR: &str = "model endpoint failure";

/// How the error of a pair begins whose summary or probe request the run's budget
/// (`max_cost`) refused. A resume runs it again.
pub const BUDGET_ERROR: &str = "budget reached";

/// Pairs that failed at the endpoint one after the other (in the order they finished) before
/// the run stops taking new pairs: the endpoint is down, and every further pair would only wait
/// out its retries.
pub const CIRCUIT_BREAKER: usize = 8;

/// True for a failed record that a resume runs again (see [`CACHE_MISS_ERROR`] and
/// [`ENDPOINT_ERROR`]).
pub fn is_retryable(record: &PairRecord) -> bool {
    match record.failure {
        Some(kind) => kind.is_retryable(),
        // A record written before failures carried their kind: read it from the message.
        None => matches!(&record.outcome, PairOutcome::Failed { error }
            if error.starts_with(CACHE_MISS_ERROR) || error.starts_with(ENDPOINT_ERROR)),
    }
}

fn is_endpoint_failure(record: &PairRecord) -> bool {
    match record.failure {
        Some(kind) => kind == PairFailure::Endpoint,
        None => matches!(&record.outcome, PairOutcome::Failed { error } if error.starts_with(ENDPOINT_ERROR)),
    }
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

/// An experiment with its conversations loaded: everything needed to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub experiment: Experiment,
    pub conversations: Vec<PlannedConversation>,
    /// Lines of the datasets that could not be loaded (their conversations are not in the
    /// plan), and duplicate conversations that were left out.
    pub problems: Vec<String>,
    /// What the caller should know but is no problem: a dataset file listed more than once
    /// (repeated, as a folder and a file in it, or through a link), loaded and run once.
    pub notes: Vec<String>,
}

impl Plan {
    /// Load every dataset of `experiment`. A dataset entry that does not exist, a folder
    /// without `*.jsonl` files, or an experiment with no conversation at all is an error; a
    /// bad line is a problem and the rest of its file is used.
    ///
    /// A dataset file is identified by its canonical path, found before it is loaded: a file
    /// listed again, a file inside a folder also listed, or a link to a listed file is loaded
    /// and run once, under its first listing, and [`Plan::notes`] says so once per file.
    pub fn load(experiment: Experiment, options: &LoadOptions) -> Result<Plan, RunError> {
        let mut conversations = Vec::new();
        let mut problems = Vec::new();
        // (name, the path as the experiment lists it, the file on disk, the dataset).
        let mut loaded: Vec<(String, String, PathBuf, dataset::Dataset)> = Vec::new();
        // Every file planned so far, by canonical path: its first listing, and the later ones.
        let mut planned: HashMap<PathBuf, (String, Vec<String>)> = HashMap::new();
        let mut order: Vec<PathBuf> = Vec::new();
        let mut first_time = |file: &Path, listed: &str| -> bool {
            let canonical = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
            match planned.get_mut(&canonical) {
                Some((_, again)) => {
                    if again.len() < 3 {
                        again.push(listed.to_string());
                    } else {
                        again.push(String::new());
                    }
                    false
                }
                None => {
                    planned.insert(canonical.clone(), (listed.to_string(), Vec::new()));
                    order.push(canonical);
                    true
                }
            }
        };
        for (entry, path) in experiment.datasets.iter().zip(experiment.dataset_paths()) {
            let datasets = if path.is_dir() {
                let prefix = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| entry.trim_end_matches('/').to_string());
                let found = dataset::find_jsonl(&path);
                if found.is_empty() {
                    return Err(RunError::Dataset { path, problem: "no *.jsonl files in this folder".into() });
                }
                let listed = entry.trim_end_matches('/').to_string();
                found
                    .into_iter()
                    .filter(|f| f.unreadable.is_some() || first_time(&f.path, &format!("{listed}/{}", f.name)))
                    .map(|f| dataset::load_found(f, options))
                    .map(|ds| (format!("{prefix}/{}", ds.name), format!("{listed}/{}", ds.name), ds))
                    .collect::<Vec<_>>()
            } else if path.is_file() {
                if !first_time(&path, entry) {
                    continue;
                }
                let ds = dataset::load_file(&path, options);
                vec![(ds.name.clone(), entry.clone(), ds)]
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
            let mut datasets = datasets;
            if let Some(keys_file) = experiment.keys.get(entry) {
                let keys_path = experiment.base_dir().join(keys_file);
                // A keys file, or a folder of them (every `*.jsonl` under it).
                let files: Vec<PathBuf> = if keys_path.is_dir() {
                    dataset::find_jsonl(&keys_path).into_iter().map(|f| f.path).collect()
                } else if keys_path.is_file() {
                    vec![keys_path.clone()]
                } else {
                    Vec::new()
                };
                if files.is_empty() {
                    return Err(RunError::Dataset {
                        path: keys_path,
                        problem: format!("the answer keys of {entry:?} (`keys`): no keys file there"),
                    });
                }
                let mut keys = dataset::keys::Keys { path: keys_path.clone(), ..Default::default() };
                for file in &files {
                    let one = dataset::keys::load_keys(file);
                    keys.problems.extend(one.problems);
                    for (id, list) in one.by_conversation {
                        keys.by_conversation.entry(id).or_default().extend(list);
                    }
                }
                problems.extend(keys.problems.iter().map(|p| format!("{p} (this key is not used)")));
                let attached = dataset::keys::attach(
                    datasets.iter_mut().flat_map(|(_, _, ds)| ds.conversations.iter_mut()),
                    &keys,
                );
                for (id, line) in attached.unknown {
                    problems.push(format!(
                        "{}:{line}: conversation {id}: not in {entry:?}; its keys are not used",
                        keys_path.display()
                    ));
                }
            }
            for (name, listed, ds) in datasets {
                let file = std::fs::canonicalize(&ds.path).unwrap_or_else(|_| ds.path.clone());
                loaded.push((name, listed, file, ds));
            }
        }
        // A dataset is named by its file name (or, in a folder, the folder's name and its path
        // in it), as before; two different files that would share a name are both named by
        // their path as the experiment lists it instead, so each is its own dataset. The same
        // file listed twice keeps its one name (its conversations are run once).
        let mut files_by_name: HashMap<&str, HashSet<&Path>> = HashMap::new();
        for (name, _, file, _) in &loaded {
            files_by_name.entry(name.as_str()).or_default().insert(file.as_path());
        }
        let ambiguous: HashSet<String> =
            files_by_name.into_iter().filter(|(_, files)| files.len() > 1).map(|(n, _)| n.to_string()).collect();
        for (name, listed, _, mut ds) in loaded {
            let label = if ambiguous.contains(&name) { listed } else { name };
            problems.extend(ds.problems.iter().map(|p| p.to_string()));
            // A conversation `validate` rejects is not replayed (its own violations would
            // be charged to every strategy), unless the caller allows it; either way it
            // is reported.
            let invalid = ds.validate();
            if !invalid.is_empty() {
                let bad_lines: HashSet<usize> = invalid.iter().filter_map(|e| e.line).collect();
                for e in &invalid {
                    let what = if options.allow_invalid { "invalid, replayed anyway" } else { "invalid, not replayed" };
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
        let notes: Vec<String> = order
            .iter()
            .filter_map(|file| {
                let (first, again) = planned.get(file)?;
                if again.is_empty() {
                    return None;
                }
                let named: Vec<&str> = again.iter().map(String::as_str).filter(|a| !a.is_empty()).collect();
                let more = again.len() - named.len();
                let more = if more > 0 { format!(" and {more} more") } else { String::new() };
                Some(format!(
                    "dataset {first} is listed {} times (again as {}{more}): one file, loaded and run once",
                    again.len() + 1,
                    named.join(", ")
                ))
            })
            .collect();
        let mut plan = Plan::from_conversations(experiment, conversations, problems);
        plan.notes = notes;
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
        Plan { experiment, conversations: kept, problems, notes: Vec::new() }
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
    conversation.messages.iter().any(|m| m.meta_flag(compaction::message::COMPACT_SUMMARY))
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
/// The strategy comes built: a run builds each configuration's strategy once, for all its pairs.
pub type ReplayFn =
    fn(&Conversation, Compactor<'_>, &ReplaySettings, replay::Models<'_>) -> Result<PairMetrics, ReplayError>;

/// What replays each pair.
#[derive(Clone, Copy)]
pub struct Engine<'a> {
    pub summarizer: &'a dyn Summarizer,
    pub judge: &'a dyn Judge,
    /// The next-action model, when the experiment measures next-action agreement.
    pub next_action: Option<&'a dyn NextActionModel>,
    pub replay: ReplayFn,
    /// The run's spending limit, when it has one: once it refuses a request the run starts no
    /// new pair, and a pair any of whose requests it refused is recorded as failed
    /// ([`BUDGET_ERROR`]; a resume runs it again).
    pub budget: Option<&'a llm::Budget>,
}

impl<'a> Engine<'a> {
    /// The replay engine with this summarizer and judge.
    pub fn new(summarizer: &'a dyn Summarizer, judge: &'a dyn Judge) -> Engine<'a> {
        Engine { summarizer, judge, next_action: None, replay: replay::replay_with, budget: None }
    }
    /// Ask `model` for the next action at every call that compacted.
    pub fn with_next_action(mut self, model: Option<&'a dyn NextActionModel>) -> Engine<'a> {
        self.next_action = model;
        self
    }
    /// Spend against `budget` (see [`Engine::budget`]).
    pub fn with_budget(mut self, budget: Option<&'a llm::Budget>) -> Engine<'a> {
        self.budget = budget;
        self
    }
    fn models(&self) -> replay::Models<'a> {
        replay::Models { summarizer: self.summarizer, judge: self.judge, next_action: self.next_action, recorded: None }
    }
}

/// How to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// The run folder (created if missing).
    pub out: PathBuf,
    /// Continue the run in `out`, skipping the pairs already in its `results.jsonl`.
    pub resume: bool,
    /// Worker threads; `None`: one per core, or, when a role uses a model, enough for every
    /// endpoint's `max_concurrency` requests to be in flight ([`default_jobs`]).
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

/// Run `plan` into `options.out`. Returns the run's manifest and all its records (resumed
/// ones included), sorted by [`sort_records`]. The folder is opened with [`open_folder`] and
/// its lock released on return; a caller that writes more files into the folder afterwards
/// opens it itself and calls [`run_locked`].
pub fn run(
    plan: &Plan,
    engine: &Engine<'_>,
    options: &RunOptions,
    provenance: &Provenance,
    progress: &(dyn Fn(&Progress) + Sync),
) -> Result<RunData, RunError> {
    let lock = open_folder(plan, options)?;
    run_locked(plan, engine, options, provenance, progress, &lock)
}

/// Open the run folder of `options.out` for `plan`: refuse a foreign folder or one with links
/// in it, create it, take its lock ([`runlog::folder::open_run_folder`]). Hold the lock until
/// the last file is written.
pub fn open_folder(plan: &Plan, options: &RunOptions) -> Result<runlog::folder::RunLock, RunError> {
    runlog::folder::open_run_folder(&options.out, &plan.experiment_id())
}

/// [`run`] into a folder the caller opened with [`open_folder`] and holds the lock of.
pub fn run_locked(
    plan: &Plan,
    engine: &Engine<'_>,
    options: &RunOptions,
    provenance: &Provenance,
    progress: &(dyn Fn(&Progress) + Sync),
    held: &runlog::folder::RunLock,
) -> Result<RunData, RunError> {
    let started = Instant::now();
    let start_watch = Stopwatch::start();
    let dir = &options.out;
    let experiment_id = plan.experiment_id();
    if fs::canonicalize(held.dir()).ok() != fs::canonicalize(dir).ok() {
        return Err(RunError::Mismatch {
            dir: dir.clone(),
            problem: format!("the lock held is that of {}, not of this folder", held.dir().display()),
        });
    }
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
            runlog::folder::same_experiment(dir, &old, &experiment_id)?;
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
        let mut texts: HashMap<usize, Fnv> = HashMap::new();
        let hashes: HashMap<String, String> = planned
            .iter()
            .map(|p| {
                let text = *texts
                    .entry(p.conversation)
                    .or_insert_with(|| conversation_hash(&plan.conversations[p.conversation].conversation));
                (plan.key(*p), pair_hash(text, plan, engine, *p))
            })
            .collect();
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
        target_provider: plan.experiment.cache.provider(),
        refusals: plan.experiment.cache.refusals(),
        summarizer: engine.summarizer.name(),
        judge: engine.judge.name(),
        stand_in_summary: engine.summarizer.name() == "offline",
        shard: shard_text,
        merged_from: Vec::new(),
        jobs: options.jobs.or_else(|| default_jobs(&plan.experiment)),
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
        external: Vec::new(),
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

    // Each configuration's strategy, built once for all its pairs (the parse checked that it
    // builds; a failure here is still a failed pair, not a stopped run).
    let strategies = build_strategies(&plan.experiment);
    let totals: Mutex<ReplayTotals> = Mutex::new(ReplayTotals::default());
    let start_phase = start_watch.phase("start");
    let replay_watch = Stopwatch::start();
    let shared = SharedConversations::new(plan, &todo);
    // The largest conversations first, each one's pairs together, handed out one at a time as
    // workers free up: the run does not end on one long pair while the other cores idle, and
    // only about one conversation per worker keeps its shared entries at once.
    let order = longest_first(plan, &todo);
    let next = AtomicUsize::new(0);
    let work = || {
        while let Some(&pair) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            if log.stop.load(Ordering::Relaxed) || breaker.load(Ordering::Relaxed) {
                continue;
            }
            // The budget refused a request: no new pair starts (those running finish).
            if engine.budget.is_some_and(llm::Budget::closed) {
                continue;
            }
            let pair_start = PairStart::now();
            let record = run_pair(plan, engine, &strategies[pair.config], pair, &shared);
            lock(&totals).add(&pair_start.finish());
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
        }
    };
    let threads = match options.jobs.or_else(|| default_jobs(&plan.experiment)) {
        Some(jobs) => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(jobs.max(1))
                .build()
                .map_err(|e| RunError::Io { path: dir.clone(), source: io::Error::other(e) })?;
            pool.broadcast(|_| work());
            pool.current_num_threads()
        }
        None => {
            rayon::broadcast(|_| work());
            rayon::current_num_threads()
        }
    };
    let replay_phase = replay_watch.phase("replay");
    let finish_watch = Stopwatch::start();
    if let Some(source) = lock(&log.error).take() {
        return Err(RunError::Io { path: results_path, source });
    }

    let mut records = done;
    records.extend(lock(&new_records).drain(..));
    sort_records(&plan.experiment, &mut records);
    let (ok, failed) = count(&records);
    manifest.counts.ok = ok;
    manifest.counts.failed = failed;
    (manifest.counts.summaries, manifest.counts.summaries_failed) = runlog::log::count_summaries(&records);
    manifest.counts.missing = planned.len().saturating_sub(records.len());
    let mut phases = vec![start_phase, replay_phase];
    phases.extend(lock(&totals).phases());
    phases.push(finish_watch.phase("finish"));
    manifest.timings = Timings {
        wall_ms: earlier_wall_ms + started.elapsed().as_millis() as u64,
        replay_ms: replay_ms(&records),
        cpu_ms: start_watch.phase("run").cpu_ms,
        threads: Some(threads),
        phases,
    };
    manifest.stopped = lock(&tripped).take();
    if let Some(budget) = engine.budget.filter(|b| manifest.stopped.is_none() && b.closed()) {
        manifest.stopped =
            Some(format!("the budget was reached: ${:.4} spent of max_cost ${:.4}", budget.spent(), budget.limit()));
    }
    manifest.complete = manifest.stopped.is_none();
    manifest.external = plan
        .experiment
        .configurations
        .iter()
        .zip(&strategies)
        .filter_map(|(c, b)| {
            let s = b.external.as_ref()?;
            let identity = s.identity();
            Some(ExternalRun {
                config_id: c.config_id.clone(),
                label: c.strategy.clone(),
                command: c.external.as_ref().map(|e| e.command.clone()).unwrap_or_default(),
                name: identity.as_ref().map(|i| i.name.clone()),
                version: identity.as_ref().map(|i| i.version.clone()),
                protocol: identity.map(|i| i.protocol),
            })
        })
        .collect();
    write_manifest(dir, &manifest)?;
    Ok(RunData { manifest, records })
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

/// Worker threads when none are asked for: `None` (one per core) for an offline run; with a
/// model, at least one per request the endpoints may have in flight (the sum of their
/// `max_concurrency`), since a pair waiting on a model holds its thread without using a core.
/// Without it, an LLM-bound run on two cores kept two requests in flight whatever
/// `max_concurrency` allowed.
pub fn default_jobs(experiment: &Experiment) -> Option<usize> {
    let llm = experiment.llm.as_ref()?;
    let mut endpoints: Vec<(String, usize)> = Vec::new();
    for cfg in [&llm.summarizer, &llm.judge, &llm.next_action].into_iter().flatten() {
        let key = format!("{:?} {}", cfg.protocol, cfg.base_url());
        if !endpoints.iter().any(|(k, _)| *k == key) {
            endpoints.push((key, cfg.max_concurrency));
        }
    }
    let in_flight: usize = endpoints.iter().map(|(_, n)| *n).sum();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Some(in_flight.max(cores).min(256))
}

/// Each configuration's strategy: a built-in one from its parameters, an external one as its
/// process pool (run in the experiment file's folder).
pub fn build_strategies(experiment: &Experiment) -> Vec<Built> {
    let base = match Path::new(&experiment.file).parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    experiment
        .configurations
        .iter()
        .map(|c| match &c.external {
            Some(spec) => {
                let s = Arc::new(ExternalStrategy::new(spec.clone(), &base, experiment.tokenizer));
                Built { strategy: Ok(s.clone()), config: resolved_or_none(&c.resolved), external: Some(s) }
            }
            None => Built {
                strategy: crate::catalog::strategy_config(&c.resolved).and_then(|config| config.build()).map(Arc::from),
                config: resolved_or_none(&c.resolved),
                external: None,
            },
        })
        .collect()
}

fn resolved_or_none(resolved: &Resolved) -> StrategyConfig {
    crate::catalog::strategy_config(resolved)
        .unwrap_or_else(|_| StrategyConfig::default_for("none").expect("`none` is in the catalog"))
}

/// A configuration's strategy, built.
pub struct Built {
    /// The strategy, or why its parameters do not build.
    pub strategy: Result<Arc<dyn Strategy>, compaction_strategies::ParamError>,
    /// The strategy as resolved (`none`'s for an external strategy, and when it does not read:
    /// then `strategy` says why).
    pub config: StrategyConfig,
    /// The same, when it is an external strategy (for its program's name and version, and
    /// the session it opens per conversation).
    pub external: Option<Arc<ExternalStrategy>>,
}

impl Built {
    /// The strategy as a replay takes it: an external one opens a session per conversation.
    pub fn compactor(&self) -> Result<Compactor<'_>, compaction_strategies::ParamError> {
        let strategy = self.strategy.as_ref().map_err(Clone::clone)?;
        Ok(match &self.external {
            Some(external) => Compactor::Sessions { strategy: strategy.as_ref(), sessions: external.as_ref() },
            None => Compactor::Stateless(strategy.as_ref()),
        })
    }
}

/// The pairs to run, the largest conversations first (by the bytes of their messages), each
/// conversation's pairs together: each strategy's first configuration (in plan order), then
/// each one's second, and so on. Two workers on one conversation then rarely run one strategy
/// at once: its configurations (mostly the same strategy at other windows) meter the shared
/// entries with the same counter, and two of them at once would both count what neither had.
fn longest_first(plan: &Plan, todo: &[Pair]) -> Vec<Pair> {
    let size = |c: usize| -> usize {
        plan.conversations[c]
            .conversation
            .messages
            .iter()
            .map(|m| m.content.len() + m.tool_calls.iter().map(|t| t.arguments.len()).sum::<usize>())
            .sum()
    };
    let sizes: Vec<usize> = (0..plan.conversations.len()).map(size).collect();
    let configurations = &plan.experiment.configurations;
    // How many configurations of the same strategy come before each one.
    let rank: Vec<usize> = configurations
        .iter()
        .enumerate()
        .map(|(i, c)| configurations[..i].iter().filter(|o| o.strategy == c.strategy).count())
        .collect();
    let mut order = todo.to_vec();
    // Stable: ties keep the plan's order.
    order.sort_by_key(|p| (std::cmp::Reverse(sizes[p.conversation]), p.conversation, rank.get(p.config).copied()));
    order
}

/// A conversation's recorded entries, metered, and the hash state after its text.
type SharedConversation = (Arc<replay::Recorded>, Fnv);

/// What the pairs of one conversation share while any of them is left to run: its recorded
/// messages as entries metered once ([`replay::Recorded`]), and the hash of its text. Made
/// by the first of its pairs to start (another worker that wants it meanwhile waits for it,
/// rather than doing the same work; the entries are then metered by every worker that takes
/// one of its pairs, sharing the work), dropped when the last one finishes.
struct SharedConversations<'p> {
    plan: &'p Plan,
    slots: Vec<Mutex<Option<SharedConversation>>>,
    remaining: Vec<AtomicUsize>,
}

impl<'p> SharedConversations<'p> {
    fn new(plan: &'p Plan, todo: &[Pair]) -> SharedConversations<'p> {
        let remaining: Vec<AtomicUsize> = (0..plan.conversations.len()).map(|_| AtomicUsize::new(0)).collect();
        for p in todo {
            remaining[p.conversation].fetch_add(1, Ordering::Relaxed);
        }
        SharedConversations {
            plan,
            slots: (0..plan.conversations.len()).map(|_| Mutex::new(None)).collect(),
            remaining,
        }
    }

    fn get(&self, conversation: usize) -> SharedConversation {
        let shared = lock(&self.slots[conversation])
            .get_or_insert_with(|| {
                let c = &self.plan.conversations[conversation].conversation;
                let recorded = replay::Recorded::unmetered(c.clone(), self.plan.experiment.tokenizer);
                (Arc::new(recorded), conversation_hash(c))
            })
            .clone();
        // Every worker that starts one of its pairs meters what is left of it, rather than
        // one metering while the others wait.
        shared.0.meter();
        shared
    }

    /// One of the conversation's pairs finished.
    fn done(&self, conversation: usize) {
        if self.remaining[conversation].fetch_sub(1, Ordering::Relaxed) == 1 {
            lock(&self.slots[conversation]).take();
        }
    }
}

/// Replay one pair; a replay error or a panic becomes a failed record.
fn run_pair(
    plan: &Plan,
    engine: &Engine<'_>,
    strategy: &Built,
    pair: Pair,
    shared: &SharedConversations<'_>,
) -> PairRecord {
    let record = run_shared_pair(plan, engine, strategy, pair, &shared.get(pair.conversation));
    shared.done(pair.conversation);
    record
}

fn run_shared_pair(
    plan: &Plan,
    engine: &Engine<'_>,
    strategy: &Built,
    pair: Pair,
    shared: &SharedConversation,
) -> PairRecord {
    let planned = &plan.conversations[pair.conversation];
    let conversation = &planned.conversation;
    let config: &Configuration = &plan.experiment.configurations[pair.config];
    let window = config.window.or(conversation.context_window);
    let (outcome, failure) = match window {
        None => (
            PairOutcome::Failed {
                error: format!(
                    "conversation {} has no context_window and the experiment sets no `windows`",
                    conversation.id
                ),
            },
            Some(PairFailure::Replay),
        ),
        Some(window) => {
            let settings = ReplaySettings {
                strategy: strategy.config.clone(),
                window,
                encoding: plan.experiment.tokenizer,
                cache: plan.experiment.cache,
                price: plan.experiment.price.as_ref().map(|p| p.price()),
                overflow: plan.experiment.overflow,
            };
            let started = Instant::now();
            let result = catch_unwind(AssertUnwindSafe(|| match strategy.compactor() {
                Ok(compactor) => {
                    let models = replay::Models { recorded: Some(&shared.0), ..engine.models() };
                    (engine.replay)(conversation, compactor, &settings, models)
                }
                Err(e) => Err(ReplayError::Params(e)),
            }));
            match result {
                Ok(Ok(metrics)) if metrics.budget_refusals > 0 => (
                    PairOutcome::Failed {
                        error: format!(
                            "{BUDGET_ERROR}: {} summaries or probes were not sent (max_cost); \
                             resume with a new budget (--max-cost) to run the pair again",
                            metrics.budget_refusals
                        ),
                    },
                    Some(PairFailure::Budget),
                ),
                Ok(Ok(metrics)) if metrics.cache_misses > 0 => (
                    PairOutcome::Failed {
                        error: format!(
                            "{CACHE_MISS_ERROR}: {} summaries or probes had no cached response; \
                             fill the cache (cache mode use) and resume",
                            metrics.cache_misses
                        ),
                    },
                    Some(PairFailure::CacheMiss),
                ),
                Ok(Ok(metrics))
                    if metrics.endpoint_failures > 0
                        && plan.experiment.llm.as_ref().is_some_and(|l| l.on_llm_error == OnLlmError::Fail) =>
                {
                    (
                        PairOutcome::Failed {
                            error: format!(
                                "{ENDPOINT_ERROR}: {} summaries or probes failed at the model endpoint (first: {}); \
                                 resume to run the pair again",
                                metrics.endpoint_failures,
                                metrics.endpoint_error.as_deref().unwrap_or("unknown")
                            ),
                        },
                        Some(PairFailure::Endpoint),
                    )
                }
                Ok(Ok(mut metrics)) => {
                    metrics.elapsed_ms = started.elapsed().as_millis() as u64;
                    (PairOutcome::Ok(Box::new(metrics)), None)
                }
                Ok(Err(ReplayError::Strategy(e))) => (PairOutcome::Failed { error: e }, Some(PairFailure::Strategy)),
                Ok(Err(e)) => (PairOutcome::Failed { error: e.to_string() }, Some(PairFailure::Replay)),
                Err(panic) => (
                    PairOutcome::Failed { error: format!("panic: {}", panic_message(&*panic)) },
                    Some(PairFailure::Panic),
                ),
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
        content_hash: Some(pair_hash(shared.1, plan, engine, pair)),
        failure,
        outcome,
    }
}

/// The FNV-1a state after the conversation's JSON, the start of each of its pairs' hashes
/// (serialized into the hash, not into a string).
fn conversation_hash(conversation: &Conversation) -> Fnv {
    struct Hashing(Fnv);
    impl Write for Hashing {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Fnv::default());
    match serde_json::to_writer(&mut h, conversation) {
        Ok(()) => h.0,
        // As the hash of the text when the conversation did not serialize: of nothing.
        Err(_) => Fnv::default(),
    }
}

/// The content hash of a pair (see [`PairRecord::content_hash`]): FNV-1a of the
/// conversation's JSON, then the configuration and the run's settings, `conversation` being
/// the state after the first ([`conversation_hash`]).
fn pair_hash(conversation: Fnv, plan: &Plan, engine: &Engine<'_>, pair: Pair) -> String {
    let config = &plan.experiment.configurations[pair.config];
    let cfg = match &config.external {
        Some(spec) => serde_json::to_string(spec).unwrap_or_default(),
        None => serde_json::to_string(&config.resolved).unwrap_or_default(),
    };
    let rest = format!(
        "\u{1f}{cfg}\u{1f}{:?}\u{1f}{}\u{1f}{}\u{1f}{:?}\u{1f}{:?}",
        config.window,
        engine.summarizer.name(),
        engine.judge.name(),
        plan.experiment.tokenizer,
        plan.experiment.cache
    );
    let mut h = conversation;
    h.write(rest.as_bytes());
    // Only with a next-action model, so the hashes of runs without one stay as they were.
    if let Some(n) = engine.next_action {
        h.write(format!("\u{1f}{}", n.name()).as_bytes());
    }
    format!("{:016x}", h.finish())
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

/// Every probe of the plan's conversations, with its text.
fn probe_texts(plan: &Plan) -> Vec<runlog::record::ProbeText> {
    plan.conversations
        .iter()
        .flat_map(|c| {
            c.conversation.probes.iter().map(|p| runlog::record::ProbeText {
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

#[cfg(test)]
mod tests;
