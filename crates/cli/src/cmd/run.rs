//! `compactlens run`: run an experiment into a run folder.
//!
//! Loads the experiment and its datasets (problems in either exit 2 before anything runs),
//! runs every (conversation, configuration) pair in parallel, appending each to
//! `results.jsonl` as it finishes, then writes `results.csv`, `summary.csv`, `probes.csv`,
//! `compactions.csv`, `report.html` and `run.json`. A progress bar shows on a terminal
//! unless `CI` is set.
//! Exit 0 when every pair ran, 1 when any pair failed, a dataset line was skipped or every
//! summary failed (all outputs are still written), 2 for a bad experiment, dataset or folder.
//!
//! `--dry-run` replays every pair offline with stand-ins for the model roles and prints what
//! the LLM run would ask for and cost (requests, tokens, cache hits, dollars per role), with no
//! request sent and no run folder written ([`runner::dry_run`]); exit 0, or 2 as above.
//!
//! `--max-cost` (or `[llm] max_cost`) is the run's budget: once what was spent plus what is in
//! flight would pass it, no request is started; those in flight finish, every pair that
//! finished is written with all the views, the pairs a refused request cut short are recorded
//! as failed (retried by a resume), and the run says where it stopped and exits 1, as a run
//! stopped by its circuit breaker does (run.json: `complete: false`, `stopped`). `--resume`
//! runs the rest with a new budget (this invocation's `--max-cost`, else the file's).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use dataset::LoadOptions;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use runlog::experiment::Experiment;
use runlog::log::{RunData, Timings};
use runlog::record::PairOutcome;
use runner::llm_setup::LlmRoles;
use runner::replay::{Judge, Summarizer};
use runner::run::{self, Engine, Plan, Progress, Provenance, RunOptions, Shard};
use runner::timing::Stopwatch;

use crate::exit;

/// The experiment `run` reads when `--config` is not given.
const DEFAULT_CONFIG: &str = "experiments/default.toml";
/// The same file, built into the binary for runs started outside a checkout.
const EMBEDDED_DEFAULT: &str = include_str!("../../../../experiments/default.toml");
/// The price table beside it, which the default experiment's `price` key reads.
const EMBEDDED_PRICES: &str = include_str!("../../../../experiments/prices.toml");
/// The real set and its answer keys (`datasets/real/SOURCE.md`), built in: real recordings
/// cannot be regenerated from a seed.
const EMBEDDED_REAL: [(&str, &str); 4] = [
    ("datasets/real/claude-code-entire.jsonl", include_str!("../../../../datasets/real/claude-code-entire.jsonl")),
    ("datasets/real/claude-code-spotter.jsonl", include_str!("../../../../datasets/real/claude-code-spotter.jsonl")),
    (
        "datasets/keys/real/claude-code-entire.jsonl",
        include_str!("../../../../datasets/keys/real/claude-code-entire.jsonl"),
    ),
    (
        "datasets/keys/real/claude-code-spotter.jsonl",
        include_str!("../../../../datasets/keys/real/claude-code-spotter.jsonl"),
    ),
];
/// The seed and size of the shipped synthetic datasets (`datasets/synthetic/README.md`).
const SHIPPED_SEED: u64 = 42;
const SHIPPED_PER_FAMILY: usize = 3;

/// `experiments/default.toml` when the working directory has it (a checkout); otherwise the
/// embedded copy, written with the datasets it names into a folder under the system's temp
/// directory. The synthetic datasets are generated from the seed the shipped ones use, which
/// gives the same bytes (a test in the runner checks the committed files against the
/// generator); the real set and its keys are built in. The run is the same as in a checkout.
fn default_experiment() -> anyhow::Result<PathBuf> {
    use anyhow::Context as _;
    let local = PathBuf::from(DEFAULT_CONFIG);
    if local.is_file() {
        return Ok(local);
    }
    let root = std::env::temp_dir().join(format!("compactlens-default-{}", env!("CARGO_PKG_VERSION")));
    let config = root.join(DEFAULT_CONFIG);
    let datasets = root.join("datasets").join("synthetic");
    std::fs::create_dir_all(config.parent().unwrap_or(&root))
        .and_then(|()| std::fs::create_dir_all(&datasets))
        .with_context(|| format!("creating {}", root.display()))?;
    write_if_changed(&config, EMBEDDED_DEFAULT.as_bytes())?;
    write_if_changed(&config.with_file_name("prices.toml"), EMBEDDED_PRICES.as_bytes())?;
    for family in synth::Family::ALL {
        let conversations = synth::generate_family(SHIPPED_SEED, family, SHIPPED_PER_FAMILY);
        let text = synth::to_jsonl(&conversations).context("serializing the synthetic datasets")?;
        write_if_changed(&datasets.join(format!("{}.jsonl", family.name())), text.as_bytes())?;
    }
    for (path, text) in EMBEDDED_REAL {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(&root))
            .with_context(|| format!("creating {}", path.display()))?;
        write_if_changed(&path, text.as_bytes())?;
    }
    tell!("note: no {DEFAULT_CONFIG} here; running the built-in default experiment from {}", config.display());
    Ok(config)
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context as _;
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    // Write then rename, so a run started at the same moment never reads half a file.
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    std::fs::write(&partial, bytes)
        .and_then(|()| std::fs::rename(&partial, path))
        .with_context(|| format!("writing {}", path.display()))
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment file (TOML; its keys are described in experiments/README.md)
    /// [default: experiments/default.toml, or the embedded copy of it outside a checkout].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The run folder [default: reports/<experiment name>-<UTC time>/].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Continue the run in --out: keep the pairs already in its results.jsonl, run the rest.
    #[arg(long, requires = "out")]
    resume: bool,
    /// Worker threads [default: one per core].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Run only the K-th of N disjoint slices of the pairs (merge the slices with `merge`).
    /// `auto` takes K from the environment of the engine running the shards: a Kubernetes
    /// Indexed Job's `JOB_COMPLETION_INDEX`, else `COMPACTLENS_SHARD_INDEX` (both 0-based; set
    /// the latter from a CI matrix), and N from --shards or `COMPACTLENS_SHARDS`.
    #[arg(long, value_name = "K/N|auto")]
    shard: Option<String>,
    /// The number of shards, for `--shard auto`.
    #[arg(long, value_name = "N", requires = "shard")]
    shards: Option<u32>,
    /// Use the LLM response cache this way for every role, whatever the experiment's
    /// `cache_mode` says: use, refresh, off or only.
    #[arg(long, value_name = "MODE")]
    cache_mode: Option<llm::cache::CacheMode>,
    /// Replay conversations that `validate` rejects (unmatched tool results, unanswered calls,
    /// no messages) instead of skipping them; they are reported either way.
    #[arg(long)]
    allow_invalid: bool,
    /// The longest dataset line accepted, in bytes; longer lines are reported and skipped.
    #[arg(long, value_name = "BYTES", default_value_t = dataset::DEFAULT_MAX_LINE_BYTES)]
    max_line_bytes: usize,
    /// Print where the time went, per phase (loading, the replays' steps summed over the
    /// workers, writing the views); run.json's `timings` records it either way.
    #[arg(long)]
    timings: bool,
    /// Print one line (the counts and the report's path) instead of the verdict.
    #[arg(long)]
    quiet: bool,
    /// Send nothing and write no run folder: replay every pair offline, with stand-ins where
    /// a model would answer, and print the requests, tokens and cost each model role would
    /// spend (the response cache's hits cost nothing).
    #[arg(long, conflicts_with_all = ["resume", "out"])]
    dry_run: bool,
    /// With --dry-run: the seconds one request is assumed to take, for the expected LLM wall
    /// time at the endpoints' max_concurrency.
    #[arg(long, value_name = "SECONDS", default_value_t = runner::dry_run::DEFAULT_REQUEST_LATENCY_S, requires = "dry_run")]
    request_latency: f64,
    /// The run's budget in US dollars (overrides `[llm] max_cost`): no request is started once
    /// what was spent plus what is in flight would pass it. A resume starts a new budget.
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let started = Instant::now();
    let load_watch = Stopwatch::start();
    let now = SystemTime::now();
    let config = match args.config {
        Some(path) => path,
        None => default_experiment()?,
    };
    let experiment =
        match Experiment::load_with_env(&config, &|name| std::env::var(name).ok(), &runner::catalog::Catalog) {
            Ok(e) => e,
            Err(e) => {
                tell!("error: {e}");
                return Ok(exit::USAGE);
            }
        };
    let plan = match Plan::load(
        experiment,
        &LoadOptions { max_line_bytes: args.max_line_bytes, allow_invalid: args.allow_invalid },
    ) {
        Ok(p) => p,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    for note in &plan.notes {
        tell!("note: {note}");
    }
    for problem in &plan.problems {
        let what = if problem.ends_with("(invalid, replayed anyway)") { "warning" } else { "warning: skipped" };
        tell!("{what}: {problem}");
    }
    if plan.experiment.price.is_none() {
        tell!(
            "note: {} sets no price: cost is not measured (the cost columns are empty); add `price = \"MODEL\"`",
            config.display()
        );
    }
    if args.dry_run {
        return dry_run(
            &plan,
            &config,
            args.jobs.map(usize::from),
            args.shard.as_deref(),
            args.shards,
            args.cache_mode,
            args.request_latency,
        );
    }
    let out = args.out.unwrap_or_else(|| {
        PathBuf::from("reports").join(format!("{}-{}", folder_name(&plan.experiment.name), utc(now).compact()))
    });
    // A role that uses a model needs its API key: the only place keys are read. They stay in
    // memory; run.json records the variable's name at most.
    let roles = match LlmRoles::build_with_budget(
        &plan.experiment,
        &|name| std::env::var(name).ok(),
        args.cache_mode,
        args.max_cost,
    ) {
        Ok(r) => r,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    // One small request per model endpoint: a dead or rejecting endpoint stops the run here,
    // instead of every summary taking its strategy's failure path and every probe going
    // unscored.
    if let Err(e) = roles.preflight() {
        tell!("error: {e}");
        tell!("error: no pair was run; fix the endpoint or its key (cache mode only makes no request)");
        return Ok(exit::USAGE);
    }
    let offline_summarizer = runner::llm_setup::build_summarizer(&plan.experiment.summarizer);
    let offline_judge = runner::llm_setup::build_judge(&plan.experiment.judge);
    let summarizer: &dyn Summarizer = match &roles.summarizer {
        Some(s) => s.as_ref(),
        None => offline_summarizer.as_ref(),
    };
    let judge: &dyn Judge = match &roles.judge {
        Some(j) => j.as_ref(),
        None => offline_judge.as_ref(),
    };
    let engine =
        Engine::new(summarizer, judge).with_next_action(roles.next_action_model()).with_budget(roles.budget.as_deref());
    let shard = match resolve_shard(args.shard.as_deref(), args.shards, |k| std::env::var(k).ok()) {
        Ok(Some((shard, from))) => {
            if let Some(from) = from {
                tell!("shard {shard} ({from})");
            }
            Some(shard)
        }
        Ok(None) => None,
        Err(e) => {
            tell!("error: --shard: {e}");
            return Ok(exit::USAGE);
        }
    };
    let load_phase = load_watch.phase("load");
    let options = RunOptions { out: out.clone(), resume: args.resume, jobs: args.jobs.map(usize::from), shard };
    let provenance = Provenance {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: git_commit(&plan.experiment.base_dir()),
        started_at: utc(now).iso(),
    };

    let bar = progress_bar();
    let on_progress = |p: &Progress| {
        if let Some(bar) = &bar {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
            let resumed = if p.resumed > 0 { format!(", {} resumed", p.resumed) } else { String::new() };
            let spent = match &roles.budget {
                Some(b) => format!(", ${:.4} of ${:.4} spent", b.spent(), b.limit()),
                None => String::new(),
            };
            bar.set_message(format!("{} failed{resumed}{spent}", p.failed));
        }
    };
    // The folder's lock is held until its last file is written: a merge, a report or another
    // run into it is refused meanwhile.
    let _lock = match run::open_folder(&plan, &options) {
        Ok(lock) => lock,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    let result = run::run_locked(&plan, &engine, &options, &provenance, &on_progress, &_lock);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let mut data = match result {
        Ok(d) => d,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    // What the models did goes into run.json beside the run's counts.
    data.manifest.llm = roles.stats();
    let csv_watch = Stopwatch::start();
    report::write_outputs(&out, &data)?;
    let csv_phase = csv_watch.phase("write/csv");
    let html_watch = Stopwatch::start();
    report::html::write_report_for(&out, &data, compaction_strategies::family)?;
    let html_phase = html_watch.phase("write/report");
    let timings = &mut data.manifest.timings;
    timings.phases.insert(0, load_phase);
    timings.phases.extend([csv_phase, html_phase]);
    timings.cpu_ms = runner::timing::process_cpu().map(|d| d.as_millis() as u64);
    runlog::log::write_manifest(&out, &data.manifest)?;
    if args.timings {
        for line in timings_table(&data.manifest.timings, started.elapsed()) {
            say!("{line}");
        }
    }
    let mut code = finish(&data, &out, started, !plan.problems.is_empty(), args.quiet);
    if let Some(stats) = &data.manifest.llm {
        for line in llm_summary(stats) {
            tell!("{line}");
        }
    }
    if let Some(why) = &data.manifest.stopped {
        match &roles.budget {
            Some(b) if b.closed() => {
                let c = &data.manifest.counts;
                let cut =
                    data.records.iter().filter(|r| r.failure == Some(runlog::record::PairFailure::Budget)).count();
                let done = data.records.len() - cut;
                tell!(
                    "error: the run stopped at its budget: {done} of {} pairs done, {} left; ${:.4} spent of max_cost ${:.4}",
                    c.pairs_planned,
                    c.pairs_planned - done,
                    b.spent(),
                    b.limit()
                );
                tell!("error: `run --resume --out {} --max-cost USD` runs the rest with a new budget", out.display());
            }
            _ => tell!("error: the run stopped: {why}; `run --resume --out {}` runs the rest", out.display()),
        }
        code = exit::FAILED;
    }
    // cache_mode = "only": every request the cache could not answer failed at once; list them.
    let missing = roles.missing_keys();
    if !missing.is_empty() {
        let dir = roles.cache_dir.as_deref().map(|d| d.display().to_string()).unwrap_or_default();
        tell!("error: cache_mode = \"only\": {} responses are not in the cache {dir}:", missing.len());
        for key in &missing {
            tell!("  missing {key}");
        }
        return Ok(exit::FAILED);
    }
    Ok(code)
}

/// Print what happened and pick the exit code.
pub fn finish(data: &RunData, out: &Path, started: Instant, skipped_lines: bool, quiet: bool) -> u8 {
    let c = &data.manifest.counts;
    let failures: Vec<_> = data
        .records
        .iter()
        .filter_map(|r| match &r.outcome {
            PairOutcome::Failed { error } => Some((r, error)),
            PairOutcome::Ok(_) => None,
        })
        .collect();
    const SHOWN: usize = 5;
    for (r, error) in failures.iter().take(SHOWN) {
        let line = format!("failed: {} {} under {}: {error}", r.dataset, r.conversation_id, r.config_id);
        tell!("{line}");
    }
    if failures.len() > SHOWN {
        tell!("failed: {} more (status and error columns of results.csv)", failures.len() - SHOWN);
    }
    if c.missing > 0 {
        tell!("warning: {} pairs of the plan have no result", c.missing);
    }
    if c.stale > 0 {
        tell!(
            "note: {} pairs rerun: their conversation's content or their configuration changed since they were recorded",
            c.stale
        );
    }
    let resumed = if c.resumed > 0 { format!(", {} resumed", c.resumed) } else { String::new() };
    let shard = data.manifest.shard.as_deref().map(|s| format!(" (shard {s})")).unwrap_or_default();
    let counts = format!(
        "{}{shard}: {} pairs: {} ok, {} failed{resumed} in {:.1}s",
        data.manifest.experiment.name,
        c.pairs_planned,
        c.ok,
        c.failed,
        started.elapsed().as_secs_f64()
    );
    let report = out.join(report::html::REPORT_HTML);
    if quiet {
        say!("{counts}: {}", report.display());
    } else {
        // The verdict, from the files just written: the same one `compactlens verdict` prints.
        match report::verdict::Verdict::read(out) {
            Ok(v) => say!("{}", v.short_text()),
            Err(e) => tell!("warning: no verdict: {e}"),
        }
        say!("{counts}");
        say!("report: {}", report.display());
        say!("{}", out.display());
    }
    // An empty, whitespace-only or refused summary is a failed one: the run says how many,
    // and a run whose every summary failed is not green.
    let all_summaries_failed = c.summaries > 0 && c.summaries_failed == c.summaries;
    if c.summaries_failed > 0 {
        tell!(
            "{}: {} of {} summaries failed (an error, an empty answer or a refusal; summarizer_failures in results.csv): their strategies fell back",
            if all_summaries_failed { "error" } else { "warning" },
            c.summaries_failed,
            c.summaries
        );
    }
    if c.failed > 0 || c.missing > 0 || skipped_lines || all_summaries_failed {
        exit::FAILED
    } else {
        exit::OK
    }
}

/// The `--timings` table: each phase's wall and CPU time and its share of the process's CPU.
pub fn timings_table(t: &Timings, wall: std::time::Duration) -> Vec<String> {
    let ms = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| format!("{:.2}", v as f64 / 1e3));
    let share = |v: Option<u64>| match (v, t.cpu_ms) {
        (Some(v), Some(all)) if all > 0 => format!("{:.1}%", 100.0 * v as f64 / all as f64),
        _ => "-".to_string(),
    };
    let mut lines = vec![
        format!("{:<24} {:>9} {:>9} {:>9} {:>7}", "phase", "wall s", "cpu s", "thread s", "of cpu"),
        format!("{:-<24} {:->9} {:->9} {:->9} {:->7}", "", "", "", "", ""),
    ];
    for p in &t.phases {
        // A replay step is part of the replay above it.
        let name = match p.phase.strip_prefix("replay/") {
            Some(step) => format!("  {step}"),
            None => p.phase.clone(),
        };
        lines.push(format!(
            "{name:<24} {:>9} {:>9} {:>9} {:>7}",
            ms(p.wall_ms),
            ms(p.cpu_ms),
            ms(p.thread_ms),
            share(p.cpu_ms)
        ));
    }
    lines.push(format!(
        "{:<24} {:>9} {:>9} {:>9} {:>7}",
        "total (process)",
        format!("{:.2}", wall.as_secs_f64()),
        ms(t.cpu_ms),
        "",
        ""
    ));
    let threads = t.threads.map(|n| format!("{n} worker threads; ")).unwrap_or_default();
    lines.push(format!(
        "{threads}a replay step's cpu is its pairs' CPU time (each worker's clock) split by its time on the thread"
    ));
    lines
}

/// The end-of-run account of the models: summaries asked and failed, probes judged and
/// unscored, next actions asked and unparsed, each with its reasons (failures by kind).
pub fn llm_summary(stats: &runlog::llm_settings::LlmRunStats) -> Vec<String> {
    let reasons = |m: &std::collections::BTreeMap<String, u64>| -> String {
        let parts: Vec<String> = m.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{k} {n}")).collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    };
    let mut lines = Vec::new();
    if let Some(s) = &stats.summarizer {
        lines.push(format!(
            "llm summarizer {}: {} summaries, {} failed{}",
            s.model,
            s.calls,
            s.failures,
            reasons(&s.failures_by_kind)
        ));
    }
    if let Some(j) = &stats.judge {
        let mut why = j.client.failures_by_kind.clone();
        if j.unparsed_verdicts > 0 {
            why.insert("unparsed_verdict".into(), j.unparsed_verdicts);
        }
        lines.push(format!("llm judge {}: {} probes, {} unscored{}", j.model, j.probes, j.unscored, reasons(&why)));
        if j.directive_lists > 0 {
            lines.push(format!(
                "llm judge {}: user directives listed for {} summaries, {} lists unreadable, {} listed sentences not in their summary",
                j.model, j.directive_lists, j.unreadable_directive_lists, j.stray_directives
            ));
        }
    }
    if let Some(n) = &stats.next_action {
        // Unparsed answers are never agreement: said on every run that has them.
        lines.push(format!(
            "llm next action {}: {} compaction points, {} full-history requests ({} shared), {} unparsed answers, {} failed{}",
            n.model,
            n.points,
            n.full_requests,
            n.full_shared,
            n.unparsed_compacted + n.unparsed_full,
            n.failures,
            reasons(&n.client.failures_by_kind)
        ));
    }
    lines
}

/// A progress bar on stderr when it is a terminal and `CI` is not set.
fn progress_bar() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() || std::env::var_os("CI").is_some() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} pairs, {msg}, ETA {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    Some(bar)
}

/// `git rev-parse HEAD` in `dir`, with `-dirty` when the work tree has changes.
fn git_commit(dir: &Path) -> Option<String> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let head = Command::new("git").arg("-C").arg(dir).args(["rev-parse", "HEAD"]).output().ok()?;
    if !head.status.success() {
        return None;
    }
    let commit = String::from_utf8(head.stdout).ok()?.trim().to_string();
    let dirty = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| o.status.success() && !o.stdout.is_empty());
    Some(if dirty { format!("{commit}-dirty") } else { commit })
}

/// An experiment name as a folder name: letters, digits, `.`, `_` and `-`.
fn folder_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' }).collect()
}

/// A UTC time of day and date.
pub struct Utc {
    year: i64,
    month: u32,
    day: u32,
    hour: u64,
    minute: u64,
    second: u64,
}

impl Utc {
    /// `20250131-235959`
    pub fn compact(&self) -> String {
        format!("{:04}{:02}{:02}-{:02}{:02}{:02}", self.year, self.month, self.day, self.hour, self.minute, self.second)
    }
    /// `2025-01-31T23:59:59Z`
    pub fn iso(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// Break a system time into a UTC date and time (days to civil date after H. Hinnant).
pub fn utc(t: SystemTime) -> Utc {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Utc { year, month, day, hour: rem / 3_600, minute: rem % 3_600 / 60, second: rem % 60 }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(UNIX_EPOCH).iso(), "1970-01-01T00:00:00Z");
        // 2000-02-29 12:34:56 UTC (a leap day) and 2024-12-31 23:59:59 UTC.
        assert_eq!(utc(UNIX_EPOCH + Duration::from_secs(951_827_696)).iso(), "2000-02-29T12:34:56Z");
        assert_eq!(utc(UNIX_EPOCH + Duration::from_secs(1_735_689_599)).compact(), "20241231-235959");
    }

    #[test]
    fn folder_names_are_safe() {
        assert_eq!(folder_name("my run/v2"), "my-run-v2");
        assert_eq!(folder_name("default"), "default");
    }
}

/// The shard `--shard` names, and for `auto` where its numbers came from. `env` reads a
/// variable (the process environment; a table in tests).
pub fn resolve_shard(
    given: Option<&str>,
    shards: Option<u32>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<(Shard, Option<String>)>, String> {
    let Some(given) = given else { return Ok(None) };
    if given != "auto" {
        if shards.is_some() {
            return Err("--shards goes with --shard auto; K/N already says N".into());
        }
        return given.parse::<Shard>().map(|s| Some((s, None))).map_err(|e| e.to_string());
    }
    let (count, count_from) = match (shards, env("COMPACTLENS_SHARDS")) {
        (Some(n), _) => (n, format!("--shards {n}")),
        (None, Some(v)) => {
            let n = v.trim().parse::<u32>().map_err(|_| format!("COMPACTLENS_SHARDS={v:?} is not a number"))?;
            (n, format!("COMPACTLENS_SHARDS={n}"))
        }
        (None, None) => return Err("auto needs the number of shards: --shards N or COMPACTLENS_SHARDS".into()),
    };
    let (name, value) = ["JOB_COMPLETION_INDEX", "COMPACTLENS_SHARD_INDEX"]
        .into_iter()
        .find_map(|k| env(k).map(|v| (k, v)))
        .ok_or("auto found no index: neither JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) nor COMPACTLENS_SHARD_INDEX is set")?;
    let index = value.trim().parse::<u32>().map_err(|_| format!("{name}={value:?} is not a number"))?;
    if count == 0 || index >= count {
        return Err(format!("{name}={index} is not an index of {count} shards (0 to {})", count.saturating_sub(1)));
    }
    let shard = format!("{}/{count}", index + 1).parse::<Shard>().map_err(|e| e.to_string())?;
    Ok(Some((shard, Some(format!("from {name}={index} and {count_from}")))))
}

#[cfg(test)]
mod shard_tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn auto_reads_the_engines_index_and_says_where_from() {
        let (s, from) = resolve_shard(Some("auto"), Some(4), env(&[("JOB_COMPLETION_INDEX", "1")])).unwrap().unwrap();
        assert_eq!(s.to_string(), "2/4");
        assert_eq!(from.as_deref(), Some("from JOB_COMPLETION_INDEX=1 and --shards 4"));
        let vars = [("COMPACTLENS_SHARD_INDEX", "0"), ("COMPACTLENS_SHARDS", "3")];
        let (s, from) = resolve_shard(Some("auto"), None, env(&vars)).unwrap().unwrap();
        assert_eq!(s.to_string(), "1/3");
        assert!(from.unwrap().contains("COMPACTLENS_SHARDS=3"));
        assert_eq!(resolve_shard(Some("2/5"), None, env(&[])).unwrap().unwrap().0.to_string(), "2/5");
    }

    #[test]
    fn auto_without_its_numbers_says_what_is_missing() {
        for (shards, vars, expected) in [
            (None, vec![("JOB_COMPLETION_INDEX", "0")], "number of shards"),
            (Some(2), vec![], "no index"),
            (Some(2), vec![("JOB_COMPLETION_INDEX", "2")], "not an index of 2 shards"),
            (Some(2), vec![("COMPACTLENS_SHARD_INDEX", "one")], "not a number"),
        ] {
            let e = resolve_shard(Some("auto"), shards, env(&vars)).unwrap_err();
            assert!(e.contains(expected), "{e}");
        }
        assert!(resolve_shard(Some("1/2"), Some(2), env(&[])).is_err());
    }
}

/// `run --dry-run`: the estimate of what the LLM run would send and cost (see
/// [`runner::dry_run`]). No key is needed and none is read: nothing is sent.
fn dry_run(
    plan: &Plan,
    config: &Path,
    jobs: Option<usize>,
    shard: Option<&str>,
    shards: Option<u32>,
    cache_mode: Option<llm::cache::CacheMode>,
    latency: f64,
) -> anyhow::Result<u8> {
    if !(latency.is_finite() && latency >= 0.0) {
        tell!("error: --request-latency {latency} is not a number of seconds");
        return Ok(exit::USAGE);
    }
    let shard = match resolve_shard(shard, shards, |k| std::env::var(k).ok()) {
        Ok(s) => s.map(|(s, _)| s),
        Err(e) => {
            tell!("error: --shard: {e}");
            return Ok(exit::USAGE);
        }
    };
    // Clients are built to make each request as the run would and to read the cache; the key
    // they are given is never sent.
    let roles = match LlmRoles::build(&plan.experiment, &|_| Some("dry-run-sends-nothing".into()), cache_mode) {
        Ok(r) => r,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    let estimate = match runner::dry_run::dry_run(plan, &roles, jobs, shard) {
        Ok(e) => e,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    for line in dry_run_lines(&plan.experiment.name, &config.display().to_string(), &estimate, latency) {
        say!("{line}");
    }
    if let Err(why) = estimate.total_cost() {
        tell!("warning: the cost is not known: {why}");
    }
    Ok(exit::OK)
}

/// The dry run's account: one line per role, the total, the wall times and the assumptions.
pub fn dry_run_lines(name: &str, config: &str, e: &runner::dry_run::DryEstimate, latency: f64) -> Vec<String> {
    let money = |c: &Result<f64, String>| match c {
        Ok(c) => format!("${c:.4}"),
        Err(_) => "unknown".to_string(),
    };
    let mut lines = vec![
        format!(
            "dry run of {name} ({config}): {} pairs replayed offline in {:.1}s; nothing was sent, no run folder written",
            e.pairs,
            e.offline_wall.as_secs_f64()
        ),
        format!(
            "{:<11} {:<24} {:>9} {:>9} {:>9} {:>13} {:>13} {:>11}",
            "role", "model", "requests", "cached", "to send", "input tok", "output tok", "cost"
        ),
    ];
    if e.roles.is_empty() {
        lines.push("no role calls a model: the run sends nothing and costs nothing".into());
        return lines;
    }
    let (mut requests, mut cached, mut input, mut output) = (0, 0, 0, 0);
    for r in &e.roles {
        lines.push(format!(
            "{:<11} {:<24} {:>9} {:>9} {:>9} {:>13} {:>13} {:>11}",
            r.role,
            r.model,
            r.requests,
            r.cache_hits,
            r.to_send(),
            r.input_tokens,
            r.output_tokens,
            if r.to_send() == 0 { "$0.0000".to_string() } else { money(&r.cost_usd) }
        ));
        requests += r.requests;
        cached += r.cache_hits;
        input += r.input_tokens;
        output += r.output_tokens;
    }
    lines.push(format!(
        "{:<11} {:<24} {:>9} {:>9} {:>9} {:>13} {:>13} {:>11}",
        "total",
        "",
        requests,
        cached,
        requests - cached,
        input,
        output,
        money(&e.total_cost())
    ));
    for r in &e.roles {
        if let (Err(why), true) = (&r.cost_usd, r.to_send() > 0) {
            lines.push(format!("{}: cost unknown: {why}", r.role));
        }
    }
    if e.cache_mode == Some(llm::cache::CacheMode::Only) {
        lines.push(format!(
            "cache_mode = \"only\": the run sends nothing; the {} requests the cache does not hold would fail their pairs",
            requests - cached
        ));
    }
    let wall = e.llm_wall(std::time::Duration::from_secs_f64(latency));
    let limits: Vec<String> = {
        let mut seen: Vec<String> = Vec::new();
        for r in &e.roles {
            let rpm =
                if r.requests_per_minute > 0 { format!(", {} a minute", r.requests_per_minute) } else { String::new() };
            let text = format!("{} (max_concurrency {}{rpm})", r.endpoint, r.max_concurrency);
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        seen
    };
    lines.push(format!(
        "expected LLM wall time: {:.0}s for the requests to send at {}, assuming {latency}s a request (--request-latency)",
        wall.as_secs_f64(),
        limits.join(" and ")
    ));
    lines.push(
        "input tokens by the experiment's tokenizer; output tokens at each request's max_tokens (an upper bound); \
         requests the response cache holds cost nothing; after a compaction that missed the cache the stand-in's \
         summary stands in for the model's"
            .into(),
    );
    lines
}
