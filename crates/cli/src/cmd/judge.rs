//! `compactlens judge calibrate LABELS.jsonl [--config FILE] [--min-accuracy X]`: how often
//! the judges agree with human labels on whether a fact is stated.
//!
//! Scores every fact of every labelled item with the offline judge, and with the LLM judge when
//! the experiment file given by `--config` names one, and prints per judge the facts scored,
//! accuracy, precision, recall and Cohen's kappa, overall and per item category (with
//! `--config`, the two judges side by side per category first), then every disagreement (item, fact, label, verdict). Exit
//! 0; with `--min-accuracy X`, 1 when a judge's accuracy is below X; 2 for an unreadable labels
//! or config file.

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
    #[arg(value_name = "LABELS")]
    labels: PathBuf,
    /// An experiment file whose `[llm]` section names a judge: score with it too.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Exit 1 when a judge's accuracy is below this share (0..1).
    #[arg(long, value_name = "X")]
    min_accuracy: Option<f64>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.command {
        Command::Calibrate(a) => run_calibrate(a),
    }
}

fn run_calibrate(args: CalibrateArgs) -> anyhow::Result<u8> {
    let items = match load_labels(&args.labels) {
        Ok(items) => items,
        Err(e) => {
            tell!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    let facts: usize = items.iter().map(|i| i.facts.len()).sum();
    say!("{}: {} items, {facts} facts", args.labels.display(), items.len());
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
    let mut below = false;
    if reports.len() > 1 {
        print_side_by_side(&reports);
    }
    for r in &reports {
        print_report(r);
        if let (Some(min), Some(acc)) = (args.min_accuracy, r.accuracy()) {
            if acc < min {
                tell!("judge {}: accuracy {:.3} is below {min}", r.judge, acc);
                below = true;
            }
        }
    }
    Ok(if below { exit::FAILED } else { exit::OK })
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
