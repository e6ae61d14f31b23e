//! The project's own gate: `experiments/ci.toml` covers every strategy with the offline
//! summarizer and judge, and the committed baseline `reports/baseline/summary.csv` holds
//! exactly its configurations (so a strategy added to the catalog, or a changed experiment,
//! cannot silently escape the gate).

use std::path::Path;

use runlog::experiment::{Experiment, JudgeSpec, SummarizerSpec};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn ci_experiment() -> Experiment {
    Experiment::load(&Path::new(ROOT).join("experiments/ci.toml"), &runner::catalog::Catalog)
        .expect("experiments/ci.toml is valid")
}

#[test]
fn the_ci_experiment_runs_every_strategy_offline() {
    let exp = ci_experiment();
    let mut names: Vec<&str> = exp.configurations.iter().map(|c| c.strategy.as_str()).collect();
    names.dedup();
    let mut expected = compaction_strategies::NAMES.to_vec();
    expected.sort_unstable();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted, expected,
        "experiments/ci.toml must list every strategy of the catalog: run `scripts/regenerate.sh`"
    );
    assert_eq!(exp.summarizer, SummarizerSpec::Offline, "the gate must be deterministic and need no key");
    assert_eq!(exp.judge, JudgeSpec::Offline);
    assert!(exp.price.is_some(), "the gate checks cost, so the experiment needs a price");
}

#[test]
fn the_baseline_holds_exactly_the_ci_configurations() {
    let exp = ci_experiment();
    let path = Path::new(ROOT).join("reports/baseline/summary.csv");
    let baseline =
        report::gate::SummaryTable::read(&path).expect("reports/baseline/summary.csv is committed (just baseline)");
    let ids: Vec<&str> = baseline.entries.iter().filter(|e| e.is_pooled()).map(|e| e.config_id.as_str()).collect();
    let expected: Vec<&str> = exp.configurations.iter().map(|c| c.config_id.as_str()).collect();
    assert_eq!(
        ids, expected,
        "the baseline is stale: `scripts/regenerate.sh` adds a new strategy's rows, `just baseline` refreshes them all"
    );
    // The paired gate of .ci/run reads the baseline's results.csv beside it.
    let results = report::gate::ResultsTable::read(&Path::new(ROOT).join("reports/baseline/results.csv"))
        .expect("reports/baseline/results.csv is committed (just baseline)");
    // Every configuration also has a row per synthetic dataset, which the gate compares too.
    let datasets: std::collections::BTreeSet<&str> =
        baseline.entries.iter().filter(|e| !e.is_pooled()).map(|e| e.dataset.as_str()).collect();
    assert!(datasets.len() > 1, "the baseline has per-dataset rows: {datasets:?}");
    for d in &datasets {
        let rows = baseline.entries.iter().filter(|e| e.dataset == *d).count();
        assert_eq!(rows, expected.len(), "{d}: a row per configuration");
    }
    for e in &baseline.entries {
        let n = results.rows_of(e.configuration()).filter(|r| e.is_pooled() || r.dataset == e.dataset).count() as f64;
        assert_eq!(e.values.get("conversations"), Some(&n), "{}: results.csv and summary.csv disagree", e.config_id);
        assert_eq!(e.values.get("failed"), Some(&0.0), "{}: a baseline with failed conversations", e.config_id);
        assert!(e.values.get("conversations").is_some_and(|n| *n > 0.0), "{}: no conversation", e.config_id);
    }
}

/// The story the synthetic set is built to tell, read from the committed baseline by column
/// name: `none` overflows and, since a request over the window is a rejected call, completes no
/// conversation at 32k; `truncate` completes every one but loses early facts; `split-fraction`,
/// which also completes every conversation, keeps more of the at-risk facts than plain
/// truncation; a strategy's rejected calls cost it retention (never more than as if every
/// request had been sent); and `cut-point`, like `split-fraction`, keeps more of the at-risk
/// facts than plain truncation, while `priority-chain` does not: as its document has it,
/// every request is rebuilt from the full history, so what survives is one summary of at most
/// 30 of the oldest messages (500 characters) and the newest 40-50 messages, which at 32k keeps
/// no more than truncation does.
#[test]
fn the_baseline_tells_the_synthetic_sets_story() {
    let path = Path::new(ROOT).join("reports/baseline/summary.csv");
    let baseline = report::gate::SummaryTable::read(&path).expect("reports/baseline/summary.csv is committed");
    let value = |strategy: &str, column: &str| -> f64 {
        let entry = baseline
            .entries
            .iter()
            .find(|e| e.strategy == strategy && e.is_pooled())
            .unwrap_or_else(|| panic!("the baseline has no {strategy} configuration"));
        *entry.values.get(column).unwrap_or_else(|| panic!("{strategy}: no {column} value in the baseline"))
    };
    assert!(value("none", "overflow_rate") > 0.0, "none never compacts, so a 32k window overflows");
    assert_eq!(value("none", "completion_rate"), 0.0, "every synthetic conversation outgrows 32k");
    assert_eq!(value("truncate", "completion_rate"), 1.0, "truncate always fits");
    assert!(value("truncate", "retention_task") < 1.0, "truncate drops the first messages, and the task with them");
    let truncate = value("truncate", "at_risk_retention_mean");
    assert!(value("priority-chain", "at_risk_retention_mean") > 0.0, "priority-chain keeps some at-risk facts");
    // Under `overflow = "fail"` a probe after a rejected call scores 0, at risk: keep-last-n,
    // prune-then-summarize and observation-mask have rejected calls at 32k and so, on this
    // measure, fall below truncation (their retention as if sent is checked below). The claim
    // holds for the strategies that summarize and whose at-risk facts survive their rejections.
    for strategy in ["cut-point", "split-fraction"] {
        let kept = value(strategy, "at_risk_retention_mean");
        assert!(
            kept > truncate,
            "{strategy} keeps {kept} of the at-risk facts, truncate {truncate}: it must keep more"
        );
    }
    assert_eq!(value("split-fraction", "completion_rate"), 1.0);
    for strategy in compaction_strategies::NAMES {
        let (kept, if_sent) = (value(strategy, "retention_mean"), value(strategy, "retention_if_sent_mean"));
        if value(strategy, "completion_rate") < 1.0 {
            assert!(kept < if_sent, "{strategy}: rejected calls cost nothing ({kept} vs {if_sent} as if sent)");
        } else {
            assert!((kept - if_sent).abs() < 1e-9, "{strategy}: completes everything, so {kept} = {if_sent}");
        }
    }
}
