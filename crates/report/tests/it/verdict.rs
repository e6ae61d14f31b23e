//! The verdict on the synthetic set: the gate's experiment (`experiments/ci.toml`, every
//! strategy at 32k) run with the offline summarizer and judge. A request over the window is a
//! rejected call, so `none`, which never compacts, must rank below every strategy that
//! completes more conversations than it does, and stay off the Pareto frontier wherever it is
//! rejected, in the pooled view and in every dataset's view.

use std::path::Path;

use dataset::LoadOptions;
use report::summary::{self, ConfigSummary, ALL_DATASETS};
use runlog::experiment::Experiment;
use runlog::log::RunData;
use runner::run::{self, Engine, Plan, Provenance, RunOptions};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn run_ci() -> RunData {
    let dir = std::env::temp_dir().join(format!("compactlens-verdict-{}", std::process::id()));
    let (_, data) = ci_run_folder(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    data
}

/// The gate's experiment run into `root/run`, with its CSV files and report.html.
pub fn ci_run_folder(root: &Path) -> (std::path::PathBuf, RunData) {
    let exp = Experiment::load(&Path::new(ROOT).join("experiments/ci.toml"), &runner::catalog::Catalog)
        .expect("experiments/ci.toml is valid");
    let plan = Plan::load(exp, &LoadOptions::default()).expect("the synthetic datasets load");
    let summarizer = runner::summarize::OfflineSummarizer::default();
    let judge = runner::judge::OfflineJudge;
    let engine = Engine {
        summarizer: &summarizer,
        judge: &judge,
        next_action: None,
        replay: runner::replay::replay_with,
        budget: None,
    };
    let dir = root.join("run");
    let _ = std::fs::remove_dir_all(&dir);
    let options = RunOptions { out: dir.clone(), resume: false, jobs: None, shard: None };
    let provenance = Provenance { tool_version: "test".into(), git_commit: None, started_at: "t".into() };
    let data = run::run(&plan, &engine, &options, &provenance, &|_| {}).expect("the gate's experiment runs");
    report::write_outputs(&dir, &data).expect("the CSV files");
    report::html::write_report_for(&dir, &data, compaction_strategies::family).expect("report.html");
    (dir, data)
}

/// The verdict read from the run folder is the one computed in memory, and its figures are
/// summary.csv's (completion, cost) and probes.csv's (at-risk retention: the critical and
/// useful probe-checkpoints at risk under the configuration, scored, not answer keys).
#[test]
fn the_verdict_of_a_folder_is_the_verdict_of_the_run_and_its_figures_are_the_summary_s() {
    let root = std::env::temp_dir().join(format!("compactlens-verdict-folder-{}", std::process::id()));
    let (dir, data) = ci_run_folder(&root);
    let verdict = report::verdict::Verdict::read(&dir).expect("a verdict");
    assert_eq!(verdict, report::verdict::Verdict::of_run(&data).expect("a verdict"));
    let summaries = summary::summarize(&data.manifest.experiment.configurations, &data.records, data.manifest.seed);
    // (config, dataset) -> (sum of scores, count) over the checkpoints of the probes at risk
    // under it (at some checkpoint).
    let mut at_risk: std::collections::HashMap<(String, String), (f64, usize)> = Default::default();
    let mut reader = ::csv::Reader::from_path(dir.join("probes.csv")).expect("probes.csv");
    let header = reader.headers().expect("a header").clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (config, dataset, conv, probe, risk, score, tier, written) = (
        col("config_id"),
        col("dataset"),
        col("conversation_id"),
        col("probe_id"),
        col("at_risk"),
        col("score"),
        col("tier"),
        col("written"),
    );
    let rows: Vec<::csv::StringRecord> = reader.records().map(|r| r.expect("a row")).collect();
    let counted = |row: &::csv::StringRecord| {
        row[written] != *"true" && matches!(&row[tier], "critical" | "useful") && row[score].parse::<f64>().is_ok()
    };
    let key = |row: &::csv::StringRecord| (row[config].to_string(), row[conv].to_string(), row[probe].to_string());
    let risky: std::collections::HashSet<(String, String, String)> =
        rows.iter().filter(|r| counted(r) && r[risk] == *"true").map(key).collect();
    for row in rows.iter().filter(|r| counted(r) && risky.contains(&key(r))) {
        for view in [row[dataset].to_string(), ALL_DATASETS.to_string()] {
            let e = at_risk.entry((row[config].to_string(), view)).or_default();
            e.0 += row[score].parse::<f64>().expect("a score");
            e.1 += 1;
        }
    }
    let mut compared = 0;
    for w in &verdict.windows {
        for view in &w.views {
            for e in &view.configurations {
                let s = summaries
                    .iter()
                    .find(|s| s.config.config_id == e.config_id && s.dataset == view.dataset)
                    .expect("a summary row");
                let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) => (a - b).abs() < 1e-9,
                    (a, b) => a == b,
                };
                assert!(close(e.completion.value, s.completion_rate), "{} {}", e.config_id, view.dataset);
                assert!(close(e.cost.value, s.cost_usd_mean), "{} {}", e.config_id, view.dataset);
                let (sum, n) = at_risk.get(&(e.config_id.clone(), view.dataset.clone())).copied().unwrap_or((0.0, 0));
                assert_eq!(e.retention.probes.unwrap_or(0), n, "{} {}", e.config_id, view.dataset);
                if n > 0 {
                    // Weighted by probes, the mean over conversations is the mean over probes.
                    assert!(close(e.retention.value, Some(sum / n as f64)), "{} {}", e.config_id, view.dataset);
                }
                assert_eq!(e.compacted_conversations, s.compacted_conversations);
                compared += 1;
            }
        }
    }
    assert!(compared > 17, "every configuration pooled and per dataset");
    // The offline summarizer is a stand-in, and the synthetic set has under 20 conversations:
    // a comparison of the best says so, with its count.
    assert!(verdict.stand_in_summary);
    assert!(verdict.windows[0].views[0]
        .warnings
        .iter()
        .any(|w| w.message.contains("too little evidence to tell the best from")
            && w.message.contains("compacted under both")));
    // The stand-in caveat, from the one computation, in all three outputs: ranking a summarizer
    // against masking or truncation needs an LLM summarizer. The report's manifest states it too.
    let remedy = "ranking a summarizer against masking or truncation needs `summarizer = \"llm\"`";
    assert!(verdict.text().contains(remedy), "{}", verdict.text());
    assert!(verdict.markdown().contains(remedy), "{}", verdict.markdown());
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    let warning = html.find("<p class=\"warning\">").expect("the verdict's first warning");
    assert!(
        html[warning..]
            .starts_with(&format!("<p class=\"warning\">⚠ {}", report::html::escape(&verdict.warnings[0].message))),
        "{}",
        &html[warning..warning + 400]
    );
    assert!(html[warning..].contains(&report::html::escape(remedy)));
    let manifest = &html[html.find("id=\"manifest\"").expect("manifest")..];
    let summarizer = &manifest[manifest.find("<dt>summarizer</dt>").expect("the summarizer row")..];
    let summarizer = &summarizer[..summarizer.find("</dd>").expect("end")];
    assert!(summarizer.contains("stand-in summary"), "{summarizer}");
    assert!(summarizer.contains(&report::html::escape("needs summarizer = \"llm\"")), "{summarizer}");
    let _ = std::fs::remove_dir_all(&root);
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
    let html = report::html::render(&data, &report::html::ProbeTexts::default(), compaction_strategies::family);
    for title in html.split("<circle class=\"point\"").skip(1) {
        let title = &title[..title.find("</title>").expect("a title")];
        if title.contains("(none)") {
            assert!(title.contains("off the frontier"), "{title}");
            assert!(!title.contains("on the Pareto frontier"), "{title}");
        }
    }
    assert!(html.contains("not exercised"), "none is marked not exercised");
}
