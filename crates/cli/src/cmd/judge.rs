//! `compactlens judge calibrate LABELS.jsonl [--config FILE] [--min-accuracy X]`: how often
//! the judges agree with human labels on whether a fact is stated.
//!
//! Scores every fact of every labelled item with the offline judge, and with the LLM judge when
//! the experiment file given by `--config` names one, and prints per judge the facts scored,
//! accuracy, precision, recall and Cohen's kappa, overall and per item category (with
//! `--config`, the two judges side by side per category first), then every disagreement (item, fact, label, verdict). Exit
//! 0; with `--min-accuracy X`, 1 when a judge's accuracy is below X; 2 for an unreadable labels
//! or config file, a labels file with no item, `X` not a share between 0 and 1, or a judge
//! that scored no fact under a floor (nothing was measured).

use std::path::PathBuf;

use runlog::experiment::Experiment;
use runner::calibrate::{calibrate, load_labels, CalibrationReport};
use runner::judge::OfflineJudge;
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
    #[arg(value_name = "LABELS", required_unless_present = "keys")]
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

fn run_calibrate(args: CalibrateArgs) -> anyhow::Result<u8> {
    let mut key_sources: Vec<(String, Vec<runner::calibrate::LabelledItem>)> = Vec::new();
    if !args.keys.is_empty() {
        match key_items(&args.datasets, &args.keys) {
            Ok(sources) => key_sources = sources,
            Err(code) => return Ok(code),
        }
    }
    let Some(labels) = &args.labels else {
        return Ok(calibrate_on_keys(&key_sources, args.min_accuracy));
    };
    let items = match load_labels(labels) {
        Ok(items) => items,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    let keys_code = if key_sources.is_empty() { exit::OK } else { calibrate_on_keys(&key_sources, args.min_accuracy) };
    let facts: usize = items.iter().map(|i| i.facts.len()).sum();
    if facts == 0 {
        tell!("error: {}: no labelled item: nothing was measured", labels.display());
        return Ok(exit::USAGE);
    }
    say!("{}: {} items, {facts} facts", labels.display(), items.len());
    let mut reports = vec![calibrate(&items, &OfflineJudge)];
    if let Some(config) = &args.config {
        let experiment = match Experiment::load(config) {
            Ok(e) => e,
            Err(e) => {
                tell!("error: {e}");
                return Ok(exit::USAGE);
            }
        };
        let roles = match LlmRoles::build(&experiment, &|name| std::env::var(name).ok(), None) {
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
        match &roles.judge {
            Some(judge) => reports.push(calibrate(&items, judge.as_ref())),
            None => tell!("note: {} names no LLM judge; offline judge only", config.display()),
        }
    }
    let mut code = keys_code;
    if reports.len() > 1 {
        print_side_by_side(&reports);
    }
    for r in &reports {
        print_report(r);
        if let Some(failed) = floor(args.min_accuracy, r, "") {
            code = code.max(failed);
        }
    }
    Ok(code)
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

/// The offline judge against the keys' labels, per source and in all; 1 when `min_accuracy`
/// is given and a source's accuracy is below it.
fn calibrate_on_keys(sources: &[(String, Vec<runner::calibrate::LabelledItem>)], min_accuracy: Option<f64>) -> u8 {
    let mut code = exit::OK;
    let all: Vec<runner::calibrate::LabelledItem> = sources.iter().flat_map(|(_, items)| items.clone()).collect();
    say!("answer keys against the real summaries: {} labelled facts in {} sources", all.len(), sources.len());
    let mut reports = vec![("all sources".to_string(), calibrate(&all, &OfflineJudge))];
    if sources.len() > 1 {
        reports.extend(sources.iter().map(|(name, items)| (name.clone(), calibrate(items, &OfflineJudge))));
    }
    for (name, r) in &reports {
        say!("source {name}:");
        print_report(r);
        if let Some(failed) = floor(min_accuracy, r, &format!(" on the keys of {name}")) {
            code = code.max(failed);
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
