//! `compactlens judge calibrate LABELS.jsonl [--config FILE] [--min-accuracy X]`: how often
//! the judges agree with human labels on whether a fact is stated.
//!
//! `judge calibrate --config FILE` alone calibrates the experiment's LLM judge where its run
//! would use it: on the answer keys of the experiment's `[keys]` labelled against the real
//! summaries (`in_real_summary`: per source and per label) and on the shipped calibration set
//! (`datasets/calibration/judge.jsonl` in the working directory, per category), beside the
//! offline judge, and prints what the calibration itself cost (requests, cache hits, tokens
//! and dollars at the judge model's price; unknown, and said so, when the price table does not
//! have it).
//!
//! Scores every fact of every labelled item with the offline judge, and with the LLM judge when
//! the experiment file given by `--config` names one, and prints per judge the facts scored,
//! accuracy, precision, recall and Cohen's kappa, overall and per item category (with
//! `--config`, the two judges side by side per category first), then every disagreement (item, fact, label, verdict). Exit
//! 0; with `--min-accuracy X`, 1 when a judge's accuracy is below X; 2 for an unreadable labels
//! or config file, a labels file with no item, `X` not a share between 0 and 1, or a judge
//! that scored no fact under a floor (nothing was measured).

use std::path::{Path, PathBuf};

use runlog::experiment::Experiment;
use runner::calibrate::{calibrate, load_labels, CalibrationReport};
use runner::judge::{Judge, OfflineJudge};
use runner::llm_setup::LlmRoles;

use crate::exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Score a labelled set with the offline judge (and the LLM judge the config names):
    /// accuracy, precision, recall and the disagreements.
    Calibrate(CalibrateArgs),
}

#[derive(Debug, clap::Args)]
struct CalibrateArgs {
    /// The labels: JSONL, one `{"id", "context", "facts", "retained"}` item a line.
    /// [default with --config alone: datasets/calibration/judge.jsonl]
    #[arg(value_name = "LABELS", required_unless_present_any = ["keys", "config"])]
    labels: Option<PathBuf>,
    /// Answer keys labelled against the real summaries (`in_real_summary`): score each
    /// labelled key's facts in the summary the recorded agent wrote at its checkpoint, and
    /// print the figures per source (dataset) and per label (verbatim, paraphrase, absent).
    /// Needs `--dataset`.
    #[arg(long, value_name = "KEYS", num_args = 1.., requires = "datasets")]
    keys: Vec<PathBuf>,
    /// The datasets the keys belong to (with the recorded summaries).
    #[arg(long = "dataset", value_name = "DATASET", num_args = 1..)]
    datasets: Vec<PathBuf>,
    /// An experiment file whose `[llm]` section names a judge: score with it too.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Exit 1 when a judge's accuracy is below this share (0..=1); exit 2 when a judge scored
    /// no fact (nothing was measured, so the floor cannot pass).
    #[arg(long, value_name = "X", value_parser = share, allow_hyphen_values = true)]
    min_accuracy: Option<f64>,
}

/// A share between 0 and 1 (`NaN`, infinities and values outside are refused).
fn share(text: &str) -> Result<f64, String> {
    let v: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number"))?;
    if !v.is_finite() || !(0.0..=1.0).contains(&v) {
        return Err(format!(
            "{text:?} is not a share between 0 and 1: a floor no accuracy can miss, or none can meet, measures nothing"
        ));
    }
    Ok(v)
}

/// What a floor says of one report: `Some(code)` when it fails (1 below it, 2 nothing was
/// measured), printing why; `None` when it passes or no floor was asked.
fn floor(min_accuracy: Option<f64>, r: &CalibrationReport, what: &str) -> Option<u8> {
    let min = min_accuracy?;
    match r.accuracy() {
        None => {
            tell!(
                "error: judge {}{what}: nothing was measured ({} facts scored, {} unscored); --min-accuracy {min} cannot pass on nothing",
                r.judge,
                r.scored(),
                r.unscored
            );
            Some(exit::USAGE)
        }
        Some(acc) if acc < min => {
            tell!("judge {}{what}: accuracy {acc:.3} is below {min}", r.judge);
            Some(exit::FAILED)
        }
        Some(_) => None,
    }
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.command {
        Command::Calibrate(a) => run_calibrate(a),
    }
}

/// The shipped calibration set, read from the working directory by `--config` alone.
const DEFAULT_LABELS: &str = "datasets/calibration/judge.jsonl";

fn run_calibrate(args: CalibrateArgs) -> anyhow::Result<u8> {
    let experiment = match &args.config {
        Some(config) => {
            match Experiment::load_with_env(config, &|name| std::env::var(name).ok(), &runner::catalog::Catalog) {
                Ok(e) => Some(e),
                Err(e) => {
                    tell!("error: {e}");
                    return Ok(exit::USAGE);
                }
            }
        }
        None => None,
    };
    let (mut keys, mut datasets, mut labels) = (args.keys.clone(), args.datasets.clone(), args.labels.clone());
    if let (Some(e), None, true) = (&experiment, &labels, keys.is_empty()) {
        // Where the experiment's run would use its judge: its answer keys against the real
        // summaries, and the shipped calibration set.
        (keys, datasets) = experiment_keys(e);
        if Path::new(DEFAULT_LABELS).is_file() {
            labels = Some(PathBuf::from(DEFAULT_LABELS));
        } else {
            tell!("note: no {DEFAULT_LABELS} here (run from a checkout, or give LABELS)");
        }
        if keys.is_empty() && labels.is_none() {
            tell!("error: nothing to calibrate on: the experiment attaches no answer keys and there is no labels file; nothing was measured");
            return Ok(exit::USAGE);
        }
    }
    let mut key_sources: Vec<(String, Vec<runner::calibrate::LabelledItem>)> = Vec::new();
    if !keys.is_empty() {
        match key_items(&datasets, &keys) {
            Ok(sources) => key_sources = sources,
            Err(code) => return Ok(code),
        }
    }
    let items = match &labels {
        Some(path) => match load_labels(path) {
            Ok(items) => Some((path.clone(), items)),
            Err(e) => {
                tell!("error: {e}");
                return Ok(exit::USAGE);
            }
        },
        None => None,
    };
    if let Some((path, items)) = &items {
        if items.iter().map(|i| i.facts.len()).sum::<usize>() == 0 {
            tell!("error: {}: no labelled item: nothing was measured", path.display());
            return Ok(exit::USAGE);
        }
    }
    // The experiment's LLM judge, alone: the calibration calls no summarizer, so only the
    // judge's model needs a price for the calibration's cost.
    let mut roles = LlmRoles::default();
    let mut price_note = None;
    if let (Some(config), Some(e)) = (&args.config, &experiment) {
        let mut judge_only = e.clone();
        if let Some(settings) = judge_only.llm.as_mut() {
            settings.summarizer = None;
            settings.max_cost = None;
        }
        let priced = judge_only.llm.as_ref().and_then(|s| s.model_roles().into_iter().next()).map(|r| r.price);
        let limit = match priced {
            Some(Ok(_)) => Some(f64::MAX),
            Some(Err(why)) => {
                price_note = Some(why);
                None
            }
            None => None,
        };
        roles = match LlmRoles::build_with_budget(&judge_only, &|name| std::env::var(name).ok(), None, limit) {
            Ok(r) => r,
            Err(e) => {
                tell!("error: {e}");
                return Ok(exit::USAGE);
            }
        };
        // A dead or rejecting endpoint stops here, as it stops a run: otherwise every fact
        // would be unscored and the report would still print.
        if let Err(e) = roles.preflight() {
            tell!("error: {e}");
            tell!("error: the LLM judge was not calibrated; fix the endpoint or its key");
            return Ok(exit::USAGE);
        }
        if roles.judge.is_none() {
            tell!("note: {} names no LLM judge; offline judge only", config.display());
        }
    }
    let mut judges: Vec<&dyn Judge> = vec![&OfflineJudge];
    if let Some(j) = &roles.judge {
        judges.push(j.as_ref());
    }
    let mut code =
        if key_sources.is_empty() { exit::OK } else { calibrate_on_keys(&key_sources, &judges, args.min_accuracy) };
    if let Some((path, items)) = &items {
        let facts: usize = items.iter().map(|i| i.facts.len()).sum();
        say!("{}: {} items, {facts} facts", path.display(), items.len());
        let reports: Vec<CalibrationReport> = judges.iter().map(|j| calibrate(items, *j)).collect();
        if reports.len() > 1 {
            print_side_by_side(&reports);
        }
        for r in &reports {
            print_report(r);
            if let Some(failed) = floor(args.min_accuracy, r, "") {
                code = code.max(failed);
            }
        }
    }
    if let Some(judge) = &roles.judge {
        let c = judge.stats().client;
        let cost = match (&roles.budget, &price_note) {
            (Some(b), _) => format!("${:.4}", b.report().by_role.get("judge").copied().unwrap_or(0.0)),
            (None, Some(why)) => format!("cost unknown ({why})"),
            (None, None) => "cost unknown".to_string(),
        };
        say!(
            "calibration cost, judge {}: {} requests ({} from the response cache, {} sent), {} input and {} output tokens, {cost} for the requests sent",
            judge.name(),
            c.requests,
            c.cache_hits,
            c.requests - c.cache_hits,
            c.usage.prompt_tokens,
            c.usage.completion_tokens
        );
    }
    Ok(code)
}

/// The experiment's answer keys (`[keys]`; a folder's `*.jsonl` files) and the datasets they
/// belong to, each relative to the experiment file. A dataset that is not there (a corpus not
/// imported) is left out with a warning.
fn experiment_keys(e: &Experiment) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let base = e.base_dir();
    let (mut keys, mut datasets) = (Vec::new(), Vec::new());
    for (entry, file) in &e.keys {
        let data = base.join(entry);
        let files: Vec<PathBuf> = if data.is_dir() {
            dataset::find_jsonl(&data).into_iter().map(|f| f.path).collect()
        } else if data.is_file() {
            vec![data.clone()]
        } else {
            Vec::new()
        };
        if files.is_empty() {
            tell!(
                "warning: {}: not found; its answer keys are left out (scripts/corpora.sh import writes the shared corpora)",
                data.display()
            );
            continue;
        }
        let path = base.join(file);
        if path.is_dir() {
            keys.extend(dataset::find_jsonl(&path).into_iter().map(|f| f.path));
        } else {
            keys.push(path);
        }
        datasets.extend(files);
    }
    (keys, datasets)
}

/// The answer keys labelled against a real summary, as labelled items per source: the
/// summary the recorded agent wrote at the key's checkpoint is the context, the key's fact
/// the fact, `in_real_summary` the label (stated unless `absent`), the label the category.
fn key_items(
    datasets: &[PathBuf],
    keys: &[PathBuf],
) -> Result<Vec<(String, Vec<runner::calibrate::LabelledItem>)>, u8> {
    let files: Vec<dataset::keys::Keys> = keys.iter().map(dataset::keys::load_keys).collect();
    let mut bad = false;
    for e in files.iter().flat_map(|k| &k.problems) {
        tell!("{e}");
        bad = true;
    }
    let mut out = Vec::new();
    let mut no_summary = 0usize;
    for path in datasets {
        let mut ds = dataset::load_file(path, &dataset::LoadOptions::default());
        for e in &ds.problems {
            tell!("{e}");
            bad = true;
        }
        for k in &files {
            dataset::keys::attach(ds.conversations.iter_mut(), k);
        }
        let mut items = Vec::new();
        for conv in &ds.conversations {
            for key in conv.probes.iter().filter(|p| p.is_written()) {
                let (Some(label), Some(at)) = (key.in_real_summary, key.asked_at) else { continue };
                let Some(summary) = conv.messages.get(at).filter(|m| m.meta_flag(compaction::message::COMPACT_SUMMARY))
                else {
                    no_summary += 1;
                    continue;
                };
                items.push(runner::calibrate::LabelledItem {
                    id: format!("{}/{}", conv.id, key.id),
                    context: summary.content.clone(),
                    facts: key.facts.clone(),
                    retained: vec![label.stated(); key.facts.len()],
                    group: Some(ds.name.clone()),
                    category: Some(label.as_str().to_string()),
                });
            }
        }
        if !items.is_empty() {
            out.push((ds.name.clone(), items));
        }
    }
    if no_summary > 0 {
        tell!("warning: {no_summary} labelled keys have no recorded summary at their checkpoint; not scored");
    }
    if bad {
        return Err(exit::USAGE);
    }
    if out.is_empty() {
        tell!("error: no answer key labelled against a real summary (in_real_summary) in these datasets: nothing was measured");
        return Err(exit::USAGE);
    }
    Ok(out)
}

/// Each judge against the keys' labels, per source and in all (per label within each); 1 when
/// `min_accuracy` is given and a source's accuracy is below it, 2 when a judge scored nothing.
fn calibrate_on_keys(
    sources: &[(String, Vec<runner::calibrate::LabelledItem>)],
    judges: &[&dyn Judge],
    min_accuracy: Option<f64>,
) -> u8 {
    let mut code = exit::OK;
    let all: Vec<runner::calibrate::LabelledItem> = sources.iter().flat_map(|(_, items)| items.clone()).collect();
    say!("answer keys against the real summaries: {} labelled facts in {} sources", all.len(), sources.len());
    let mut sets = vec![("all sources".to_string(), all)];
    if sources.len() > 1 {
        sets.extend(sources.iter().cloned());
    }
    for (name, items) in &sets {
        say!("source {name}:");
        let reports: Vec<CalibrationReport> = judges.iter().map(|j| calibrate(items, *j)).collect();
        if reports.len() > 1 {
            print_side_by_side(&reports);
        }
        for r in &reports {
            print_report(r);
            if let Some(failed) = floor(min_accuracy, r, &format!(" on the keys of {name}")) {
                code = code.max(failed);
            }
        }
    }
    code
}

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{:.1}%", v * 100.0))
}

fn kappa(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.2}"))
}

fn print_report(r: &CalibrationReport) {
    say!(
        "judge {}: {} facts scored ({} unscored): accuracy {}, precision {}, recall {}, kappa {} \
         (credited correctly {}, false credit {}, missed {}, rejected correctly {})",
        r.judge,
        r.scored(),
        r.unscored,
        fmt(r.accuracy()),
        fmt(r.precision()),
        fmt(r.recall()),
        kappa(r.kappa()),
        r.true_positives,
        r.false_positives,
        r.false_negatives,
        r.true_negatives
    );
    for (category, c) in &r.by_category {
        say!(
            "judge {} on {category}: {} facts: accuracy {}, precision {}, recall {}, kappa {}",
            r.judge,
            c.scored(),
            fmt(c.accuracy()),
            fmt(c.precision()),
            fmt(c.recall()),
            kappa(c.kappa())
        );
    }
    for d in &r.disagreements {
        say!(
            "  {} fact {} [{}]: labelled {}, judged {}",
            d.item,
            d.fact + 1,
            d.aliases.join(" | "),
            if d.label { "stated" } else { "not stated" },
            if d.judged { "stated" } else { "not stated" }
        );
    }
}

/// One line per category: each judge's accuracy and kappa, side by side.
fn print_side_by_side(reports: &[CalibrationReport]) {
    let names: Vec<String> = reports.iter().map(|r| format!("{} accuracy / kappa", r.judge)).collect();
    say!("category | facts | {}", names.join(" | "));
    let mut categories: Vec<&String> = reports.iter().flat_map(|r| r.by_category.keys()).collect();
    categories.sort();
    categories.dedup();
    let all = std::iter::once(("all".to_string(), reports.iter().map(|r| r.counts()).collect::<Vec<_>>()));
    let rows = categories
        .into_iter()
        .map(|c| (c.clone(), reports.iter().map(|r| r.by_category.get(c).copied().unwrap_or_default()).collect()));
    for (name, counts) in all.chain(rows) {
        let facts = counts.first().map_or(0, |c| c.scored());
        let cells: Vec<String> =
            counts.iter().map(|c| format!("{} / {}", fmt(c.accuracy()), kappa(c.kappa()))).collect();
        say!("{name} | {facts} | {}", cells.join(" | "));
    }
}
