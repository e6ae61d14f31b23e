//! The verdict on the synthetic set: the gate's experiment (`experiments/ci.toml`, every
//! strategy at 32k) run with the offline summarizer and judge. A request over the window is a
//! rejected call, so `none`, which never compacts, must rank below every strategy that
//! completes more conversations than it does, and stay off the Pareto frontier wherever it is
//! rejected, in the pooled view and in every dataset's view.

use std::path::Path;

use dataset::LoadOptions;
use report::summary::{self, ConfigSummary, ALL_DATASETS};
use runner::experiment::Experiment;
use runner::run::{self, Engine, Plan, Provenance, RunData, RunOptions};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn run_ci() -> RunData {
    let exp = Experiment::load(&Path::new(ROOT).join("experiments/ci.toml")).expect("experiments/ci.toml is valid");
    let plan = Plan::load(exp, &LoadOptions::default()).expect("the synthetic datasets load");
    let summarizer = runner::summarize::OfflineSummarizer::default();
    let judge = runner::judge::OfflineJudge;
    let engine = Engine { summarizer: &summarizer, judge: &judge, replay: runner::replay::replay_built };
    let dir = std::env::temp_dir().join(format!("compactbench-verdict-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = RunOptions { out: dir.clone(), resume: false, jobs: None, shard: None };
    let provenance = Provenance { tool_version: "test".into(), git_commit: None, started_at: "t".into() };
    let data = run::run(&plan, &engine, &options, &provenance, &|_| {}).expect("the gate's experiment runs");
    let _ = std::fs::remove_dir_all(&dir);
    data
}

#[test]
fn none_ranks_below_every_strategy_that_completes_more_and_is_off_the_frontier_where_rejected() {
    let data = run_ci();
    let summaries = summary::summarize(&data.manifest.experiment.configurations, &data.records, data.manifest.seed);
    let mut views: Vec<&str> = summary::datasets(&summaries);
    assert!(views.len() > 1, "the synthetic set has several datasets");
    views.push(ALL_DATASETS);
    let mut rejected_somewhere = false;
    for view in views {
        let rows: Vec<&ConfigSummary> = summaries.iter().filter(|s| s.dataset == view).collect();
        let ranked = summary::rank(rows.clone());
        let position = |s: &ConfigSummary| ranked.iter().position(|r| r.config.config_id == s.config.config_id);
        let none = *rows.iter().find(|s| s.config.strategy == "none").expect("a none row");
        let none_completion = none.completion_rate.expect("none replayed");
        assert_eq!(none.compacted_conversations, 0, "{view}: none never compacts");
        for other in rows.iter().filter(|s| s.completion_rate.is_some_and(|c| c > none_completion)) {
            assert!(
                position(none) > position(other),
                "{view}: none (completion {none_completion}) ranks above {} (completion {:?})",
                other.config.config_id,
                other.completion_rate
            );
        }
        let eligible = summary::frontier_eligible(&rows);
        let none_at = rows.iter().position(|s| s.config.strategy == "none").expect("none");
        if none_completion < 1.0 {
            rejected_somewhere = true;
            assert!(!eligible[none_at], "{view}: none is rejected yet may stand on the frontier");
            // Its retention follows the policy: the probes after its rejected call score 0.
            assert!(none.retention.mean < none.retention_if_sent, "{view}: none lost nothing to its rejections");
        }
    }
    assert!(rejected_somewhere, "the synthetic set at 32k must overflow none somewhere");

    // The page draws none as a hollow point that is never on the frontier.
    let html = report::html::render(&data, &report::html::ProbeTexts::default());
    for title in html.split("<circle class=\"point\"").skip(1) {
        let title = &title[..title.find("</title>").expect("a title")];
        if title.contains("(none)") {
            assert!(title.contains("off the frontier"), "{title}");
            assert!(!title.contains("on the Pareto frontier"), "{title}");
        }
    }
    assert!(html.contains("not exercised"), "none is marked not exercised");
}
