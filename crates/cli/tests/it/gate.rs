//! `compactlens gate` and `compactlens report` through the binary: a real run is the
//! baseline; an identical run passes; planted regressions in a copy of its summary.csv (a
//! retention drop, a new overflow, a new violation, a cost rise, a missing configuration) fail
//! with exit 1; changes within tolerance pass; bad input exits 2.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use compaction::{Conversation, Message, Probe, ProbeKind};
use runlog::experiment::Experiment;
use runlog::log::RunData;
use runner::judge::OfflineJudge;
use runner::run::{self, Engine, Plan, PlannedConversation, Provenance, RunOptions};
use runner::summarize::OfflineSummarizer;

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

const EXPERIMENT: &str = r#"
name = "gate-test"
datasets = ["unused"]
windows = [1500]
seed = 5
price = { input = 2.0, cached_input = 0.5, output = 8.0 }

[[strategy]]
name = "none"

[[strategy]]
name = "truncate"

[[strategy]]
name = "keep-last-n"
recent_messages_to_keep = 4
"#;

fn conversation(id: &str, turns: usize) -> Conversation {
    let mut messages = vec![Message::system("You are a helpful agent.")];
    for i in 0..turns {
        messages.push(Message::user(format!("Step {i}: remember the code word cw-{id}-{i}. {}", "filler ".repeat(60))));
        messages.push(Message::assistant(format!("Noted cw-{id}-{i}. {}", "reply ".repeat(40))));
    }
    let mut c = Conversation::new(id, messages);
    c.probes = (0..turns)
        .step_by(3)
        .map(|i| Probe {
            id: format!("p{i}"),
            kind: ProbeKind::Recall,
            question: format!("What was code word {i}?"),
            answer: format!("cw-{id}-{i}"),
            facts: vec![vec![format!("cw-{id}-{i}")]],
            source_message: 1 + 2 * i,
            asked_at: None,
            tier: None,
            ..Default::default()
        })
        .collect();
    c
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-cli-gate-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

/// Run the experiment into `out` with the offline summarizer and judge, and write the CSVs.
fn real_run(out: &Path) -> RunData {
    let experiment = Experiment::parse(EXPERIMENT, Path::new("gate-test.toml"), &runner::catalog::Catalog)
        .expect("valid experiment");
    let conversations = (0..6)
        .map(|i| PlannedConversation {
            dataset: "synthetic.jsonl".into(),
            conversation: std::sync::Arc::new(conversation(&format!("c{i}"), 12 + i)),
        })
        .collect();
    let plan = Plan::from_conversations(experiment, conversations, Vec::new());
    let summarizer = OfflineSummarizer::new();
    let options = RunOptions { out: out.to_path_buf(), resume: false, jobs: Some(1), shard: None };
    let provenance = Provenance { tool_version: "test".into(), git_commit: None, started_at: "t".into() };
    let data = run::run(&plan, &Engine::new(&summarizer, &OfflineJudge), &options, &provenance, &|_| {})
        .expect("the run runs");
    report::write_outputs(out, &data).expect("outputs written");
    data
}

/// The baseline run, made once for all tests of this file.
fn baseline() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = temp_dir("baseline");
        real_run(&dir);
        dir
    })
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn compactlens(args: &[&str], env: &[(&str, &Path)]) -> Outcome {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("GITHUB_STEP_SUMMARY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the binary runs");
    Outcome {
        code: out.status.code().expect("exited normally"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn gate(current: &Path, extra: &[&str]) -> Outcome {
    let base = baseline().join("summary.csv");
    let mut args =
        vec!["gate", "--baseline", base.to_str().expect("utf-8"), "--current", current.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    compactlens(&args, &[])
}

/// A copy of the baseline's summary.csv with `edit` applied to its rows (header included as
/// the names), written to a fresh folder.
fn planted(test: &str, edit: impl Fn(&[String], &mut Vec<Vec<String>>)) -> PathBuf {
    let mut reader = csv::Reader::from_path(baseline().join("summary.csv")).expect("baseline summary");
    let header: Vec<String> = reader.headers().expect("header").iter().map(String::from).collect();
    let mut rows: Vec<Vec<String>> =
        reader.records().map(|r| r.expect("row").iter().map(String::from).collect()).collect();
    edit(&header, &mut rows);
    let dir = temp_dir(test);
    let path = dir.join("summary.csv");
    let mut w = csv::Writer::from_path(&path).expect("writable");
    w.write_record(&header).expect("header");
    for r in &rows {
        w.write_record(r).expect("row");
    }
    w.flush().expect("flushed");
    path
}

fn col(header: &[String], name: &str) -> usize {
    header.iter().position(|h| h == name).unwrap_or_else(|| panic!("summary.csv has no {name}"))
}

fn num(cell: &str) -> f64 {
    cell.parse().unwrap_or_else(|_| panic!("{cell:?} is not a number"))
}

/// The row of the configuration whose strategy is `strategy`.
fn row_of(header: &[String], rows: &[Vec<String>], strategy: &str) -> usize {
    let c = col(header, "strategy");
    rows.iter().position(|r| r[c] == strategy).unwrap_or_else(|| panic!("no {strategy} row"))
}

#[test]
fn an_identical_run_passes() {
    let dir = temp_dir("identical");
    real_run(&dir);
    let out = gate(&dir.join("summary.csv"), &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("### compactlens gate: passed"), "{}", out.stdout);
    // Three configurations, pooled and on the one dataset.
    assert!(out.stdout.contains("6 rows (configurations, pooled and per dataset) compared"), "{}", out.stdout);
    assert!(out.stdout.contains("No value changed."), "{}", out.stdout);
    // A run folder works as well as its summary.csv.
    assert_eq!(gate(&dir, &[]).code, 0);
}

#[test]
fn the_baseline_run_has_what_the_planted_regressions_need() {
    let mut reader = csv::Reader::from_path(baseline().join("summary.csv")).expect("baseline summary");
    let header: Vec<String> = reader.headers().expect("header").iter().map(String::from).collect();
    let rows: Vec<Vec<String>> = reader.records().map(|r| r.expect("row").iter().map(String::from).collect()).collect();
    // Truncate at this window compacts and loses some facts, and breaks no invariant: the
    // planted regressions below start from a configuration with room to get worse.
    let t = row_of(&header, &rows, "truncate");
    let retention = num(&rows[t][col(&header, "retention_mean")]);
    assert!(retention > 0.2 && retention < 0.95, "truncate retains some facts: {retention}");
    assert!(num(&rows[t][col(&header, "retention_ci_low")]) < retention, "a real interval");
    assert!(num(&rows[t][col(&header, "compactions_mean")]) > 0.0);
    assert!(num(&rows[t][col(&header, "cost_usd_mean")]) > 0.0, "the experiment has a price");
    assert_eq!(num(&rows[t][col(&header, "overflow_rate")]), 0.0);
    assert_eq!(num(&rows[t][col(&header, "violations")]), 0.0);
    assert_eq!(num(&rows[t][col(&header, "rejected_requests_openai")]), 0.0);
    assert_eq!(num(&rows[t][col(&header, "rejected_requests_anthropic")]), 0.0);
    assert_eq!(num(&rows[t][col(&header, "findings")]), 0.0);
    // Without compaction the small window overflows.
    let n = row_of(&header, &rows, "none");
    assert!(num(&rows[n][col(&header, "overflow_rate")]) > 0.0);
}

#[test]
fn a_retention_drop_fails() {
    let path = planted("retention", |h, rows| {
        let k = row_of(h, rows, "truncate");
        let low = num(&rows[k][col(h, "retention_ci_low")]);
        rows[k][col(h, "retention_mean")] = format!("{}", (low - 0.1).max(0.0));
    });
    let out = gate(&path, &[]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("### compactlens gate: FAILED"), "{}", out.stdout);
    assert!(out.stdout.contains("| retention |"), "{}", out.stdout);
    assert!(out.stdout.contains("**regression**"));
    assert!(out.stderr.contains("regression: truncate-1500-"), "{}", out.stderr);
    // A wide enough tolerance lets it through.
    assert_eq!(gate(&path, &["--tolerance", "retention=1"]).code, 0);
}

#[test]
fn a_new_overflow_fails() {
    let path = planted("overflow", |h, rows| {
        let k = row_of(h, rows, "truncate");
        rows[k][col(h, "overflow_rate")] = "0.012".into();
    });
    let out = gate(&path, &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("| overflow_rate | 0.0% | 1.2% | +1.2 pt |"), "{}", out.stdout);
}

#[test]
fn a_request_a_provider_refuses_fails_and_a_finding_passes() {
    // An orphaned tool result: one more request both providers refuse.
    let path = planted("orphan", |h, rows| {
        let k = row_of(h, rows, "truncate");
        for column in ["rejected_requests_openai", "rejected_requests_anthropic", "violations"] {
            rows[k][col(h, column)] = (num(&rows[k][col(h, column)]) + 1.0).to_string();
        }
    });
    let out = gate(&path, &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("| rejected_requests_openai | 0 | 1 | +1 |"), "{}", out.stdout);
    assert!(out.stdout.contains("| rejected_requests_anthropic | 0 | 1 | +1 |"), "{}", out.stdout);
    // An alternation break: a finding both providers accept, reported without failing.
    let path = planted("alternation", |h, rows| {
        let k = row_of(h, rows, "truncate");
        for column in ["findings", "violations"] {
            rows[k][col(h, column)] = (num(&rows[k][col(h, column)]) + 1.0).to_string();
        }
    });
    let out = gate(&path, &[]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stdout.contains("| findings | 0 | 1 | +1 | – | reported only | worse, within tolerance |"),
        "{}",
        out.stdout
    );
    assert_eq!(gate(&path, &["--tolerance", "findings=0"]).code, 1, "a tolerance makes findings fail");
}

#[test]
fn a_cost_rise_fails() {
    let path = planted("cost", |h, rows| {
        let k = row_of(h, rows, "none");
        let c = col(h, "cost_usd_mean");
        rows[k][c] = format!("{:.8}", num(&rows[k][c]) * 1.2);
    });
    let out = gate(&path, &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("| cost |"), "{}", out.stdout);
}

#[test]
fn changes_within_tolerance_pass_and_are_listed() {
    let path = planted("within", |h, rows| {
        let t = row_of(h, rows, "truncate");
        let r = col(h, "retention_mean");
        rows[t][r] = format!("{:.6}", num(&rows[t][r]) - 0.005);
        let c = col(h, "cost_usd_mean");
        rows[t][c] = format!("{:.8}", num(&rows[t][c]) * 1.02);
        let n = row_of(h, rows, "none");
        let o = col(h, "overflow_rate");
        rows[n][o] = format!("{:.6}", num(&rows[n][o]) / 2.0);
    });
    let out = gate(&path, &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("worse, within tolerance"), "{}", out.stdout);
    assert!(out.stdout.contains("improved"), "{}", out.stdout);
}

#[test]
fn a_missing_configuration_fails_and_a_new_one_is_a_note() {
    let missing = planted("missing", |h, rows| {
        let k = row_of(h, rows, "truncate");
        rows.remove(k);
    });
    let out = gate(&missing, &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("**missing in current**"), "{}", out.stdout);
    assert!(out.stderr.contains("is missing from the current run"), "{}", out.stderr);

    let added = planted("added", |h, rows| {
        let mut extra = rows[0].clone();
        extra[col(h, "config_id")] = "brand-new-3k-00000000".into();
        rows.push(extra);
    });
    let out = gate(&added, &[]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(out.stdout.contains("| brand-new-3k-00000000 | – |"), "{}", out.stdout);
    assert!(out.stdout.contains("new in current"));
}

#[test]
fn the_table_is_appended_to_the_github_step_summary() {
    let path = planted("step-summary", |h, rows| {
        let k = row_of(h, rows, "truncate");
        rows[k][col(h, "rejected_requests_anthropic")] = "2".into();
    });
    let summary = path.with_file_name("step-summary.md");
    std::fs::write(&summary, "earlier step\n").expect("writable");
    let base = baseline().join("summary.csv");
    let out = compactlens(
        &["gate", "--baseline", base.to_str().expect("utf-8"), "--current", path.to_str().expect("utf-8")],
        &[("GITHUB_STEP_SUMMARY", &summary)],
    );
    assert_eq!(out.code, 1);
    let text = std::fs::read_to_string(&summary).expect("readable");
    assert!(text.starts_with("earlier step\n### compactlens gate: FAILED"), "{text}");
    assert!(text.contains(&out.stdout));
}

#[test]
fn bad_input_exits_2_and_names_it() {
    let base = baseline().join("summary.csv");
    let out = gate(&base, &["--tolerance", "speed=1"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--tolerance speed=1: unknown metric"), "{}", out.stderr);

    let out = gate(Path::new("/nonexistent/summary.csv"), &[]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("/nonexistent/summary.csv"), "{}", out.stderr);

    let bad = planted("bad-number", |h, rows| {
        rows[1][col(h, "violations")] = "many".into();
    });
    let out = gate(&bad, &[]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains(":3: column `violations`: \"many\" is not a number"), "{}", out.stderr);
}

#[test]
fn report_re_renders_the_page_of_a_run_folder() {
    let dir = temp_dir("report");
    real_run(&dir);
    let page = dir.join("report.html");
    assert!(!page.exists(), "write_outputs writes the CSV files only");
    let out = compactlens(&["report", dir.to_str().expect("utf-8")], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), page.display().to_string());
    let html = std::fs::read_to_string(&page).expect("written");
    assert!(html.contains("compactlens: gate-test") && html.contains("id=\"leaderboard-table\""));

    let empty = temp_dir("report-empty");
    let out = compactlens(&["report", empty.to_str().expect("utf-8")], &[]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("run.json"), "{}", out.stderr);
}

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Run `plan` into `out` with the offline summarizer and judge, and write the CSVs.
fn run_plan(plan: &Plan, out: &Path) -> RunData {
    let summarizer = OfflineSummarizer::new();
    let options = RunOptions { out: out.to_path_buf(), resume: false, jobs: Some(2), shard: None };
    let provenance = Provenance { tool_version: "test".into(), git_commit: None, started_at: "t".into() };
    let data =
        run::run(plan, &Engine::new(&summarizer, &OfflineJudge), &options, &provenance, &|_| {}).expect("the run runs");
    report::write_outputs(out, &data).expect("outputs written");
    data
}

/// A real information loss fails the gate: the project's gate experiment (`experiments/ci.toml`,
/// its `keep-last-n` configuration over the synthetic conversations) against the same slice run
/// with `keep-last-n` damaged, written under the baseline configuration's `config_id` as a
/// broken change to the strategy would be: summaries capped at 60 tokens instead of 1,000,
/// the document's 10 recent messages kept. (Keeping fewer recent messages as well would not
/// do: a smaller context meets fewer rejected calls, completes more conversations and retains
/// more.) The loss shows on the per-dataset rows, which the gate compares too.
#[test]
fn a_damaged_strategy_that_loses_information_fails_the_gate() {
    let ci_path = Path::new(ROOT).join("experiments/ci.toml");
    let mut ci = Experiment::load(&ci_path, &runner::catalog::Catalog).expect("experiments/ci.toml is valid");
    ci.configurations.retain(|c| c.strategy == "keep-last-n");
    assert_eq!(ci.configurations.len(), 1, "the gate experiment runs keep-last-n once");
    let config_id = ci.configurations[0].config_id.clone();

    // The same experiment text with keep-last-n damaged.
    let text = std::fs::read_to_string(&ci_path).expect("readable");
    let head = &text[..text.find("[[strategy]]").expect("a strategy table")];
    let damaged_text =
        format!("{head}[[strategy]]\nname = \"keep-last-n\"\nsummary_max_tokens = 60\nsummary_target_tokens = 60\n");
    let mut damaged =
        Experiment::parse(&damaged_text, &ci_path, &runner::catalog::Catalog).expect("the damaged experiment is valid");
    assert_ne!(damaged.configurations[0].resolved, ci.configurations[0].resolved, "the damage changes the strategy");
    damaged.configurations[0].config_id = config_id.clone();

    let base_plan = Plan::load(ci, &dataset::LoadOptions::default()).expect("the synthetic datasets load");
    assert!(base_plan.conversations.len() >= 10, "the slice has the synthetic conversations");
    let damaged_plan = Plan::from_conversations(damaged, base_plan.conversations.clone(), Vec::new());
    let dir = temp_dir("damaged");
    let (base_dir, damaged_dir) = (dir.join("baseline"), dir.join("damaged"));
    run_plan(&base_plan, &base_dir);
    run_plan(&damaged_plan, &damaged_dir);

    let args = |current: &Path| {
        let (b, c) = (base_dir.join("summary.csv"), current.join("summary.csv"));
        vec![
            "gate".to_string(),
            "--baseline".into(),
            b.display().to_string(),
            "--current".into(),
            c.display().to_string(),
        ]
    };
    let run_gate = |current: &Path| {
        let a = args(current);
        compactlens(&a.iter().map(String::as_str).collect::<Vec<_>>(), &[])
    };
    // The undamaged slice reproduces its baseline exactly (a copy of its summary outside the
    // run folder: a run compared with itself is refused).
    let undamaged = base_dir.with_file_name("undamaged");
    std::fs::create_dir_all(&undamaged).expect("mkdir");
    std::fs::copy(base_dir.join("summary.csv"), undamaged.join("summary.csv")).expect("copy");
    let same = run_gate(&undamaged);
    assert_eq!(same.code, 0, "{}{}", same.stdout, same.stderr);
    // The damaged one loses facts: retention falls below the baseline's interval.
    let out = run_gate(&damaged_dir);
    assert_eq!(out.code, 1, "the gate must fail:\n{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains(&format!("regression: {config_id}")), "{}", out.stderr);
    assert!(out.stdout.contains(&format!("| {config_id}")) && out.stdout.contains("| retention |"), "{}", out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SplitMix64 (the workspace's), for the planted losses' choice of conversations.
fn splitmix(state: &mut u64) -> u64 {
    let mut r = seeded::SplitMix64::new(*state);
    let out = r.next_u64();
    *state = state.wrapping_add(seeded::GOLDEN);
    out
}

/// The paired gate's power, measured on the CI slice (`experiments/ci.toml`, its `keep-last-n`
/// configuration over the 15 synthetic conversations): the slice is run as is, once more
/// unchanged, and with `keep-last-n` damaged (60-token summaries). A loss of
/// L points is planted in a copy of the baseline's results by giving conversations, in a seeded
/// random order, their damaged results until the mean retention is at least L points lower (so a
/// loss is a few conversations losing a lot, as a broken change does). For each L and each of 20
/// seeds (the order and the bootstrap seed) the paired gate and the interval gate judge it. The
/// table goes to reports/README.md between the `power-table` markers (COMPACTLENS_BLESS=1
/// rewrites it; otherwise the test fails when it is stale).
#[test]
fn the_paired_gate_catches_small_losses_and_raises_no_false_alarm() {
    use report::gate::{compare, compare_paired, ResultsTable, SummaryTable, Tolerances};

    let ci_path = Path::new(ROOT).join("experiments/ci.toml");
    let mut ci = Experiment::load(&ci_path, &runner::catalog::Catalog).expect("experiments/ci.toml is valid");
    ci.configurations.retain(|c| c.strategy == "keep-last-n");
    let config_id = ci.configurations[0].config_id.clone();
    let text = std::fs::read_to_string(&ci_path).expect("readable");
    let head = &text[..text.find("[[strategy]]").expect("a strategy table")];
    // Summaries capped only: under `overflow = "fail"` fewer recent messages would complete more
    // conversations and raise retention, not lower it.
    let damaged_text =
        format!("{head}[[strategy]]\nname = \"keep-last-n\"\nsummary_max_tokens = 60\nsummary_target_tokens = 60\n");
    let mut damaged =
        Experiment::parse(&damaged_text, &ci_path, &runner::catalog::Catalog).expect("the damaged experiment is valid");
    damaged.configurations[0].config_id = config_id.clone();
    let base_plan = Plan::load(ci, &dataset::LoadOptions::default()).expect("the synthetic datasets load");
    let damaged_plan = Plan::from_conversations(damaged, base_plan.conversations.clone(), Vec::new());
    let dir = temp_dir("power");
    let (base_dir, rerun_dir, damaged_dir) = (dir.join("baseline"), dir.join("rerun"), dir.join("damaged"));
    run_plan(&base_plan, &base_dir);
    run_plan(&base_plan, &rerun_dir);
    run_plan(&damaged_plan, &damaged_dir);

    let summary = SummaryTable::read(&base_dir).expect("summary");
    let base = ResultsTable::read(&base_dir).expect("results");
    let rerun = ResultsTable::read(&rerun_dir).expect("results");
    let broken = ResultsTable::read(&damaged_dir).expect("results");
    for (a, b) in base.rows.iter().zip(&broken.rows) {
        assert_eq!((&a.dataset, &a.conversation_id), (&b.dataset, &b.conversation_id), "rows in the same order");
    }
    let retention = |t: &ResultsTable, i: usize| t.rows[i].values.get("retention").copied().unwrap_or(0.0);
    let n = base.rows.len();
    assert_eq!(n, 16, "the CI slice has 16 conversations (the five synthetic families and the long one)");
    assert_eq!(rerun, ResultsTable { file: rerun.file.clone(), ..base.clone() }, "an offline rerun is identical");
    let full_loss = (0..n).map(|i| retention(&base, i) - retention(&broken, i)).sum::<f64>() / n as f64;
    assert!(full_loss > 0.10, "the damage loses more than the largest planted loss: {full_loss}");

    let tolerances = Tolerances::default();
    let fired = |report: &report::gate::GateReport| report.failures().any(|c| c.metric == "retention");
    // The interval gate sees only the planted mean, against the baseline's interval.
    let with_mean = |mean: f64| {
        let mut s = summary.clone();
        s.entries[0].values.insert("retention_mean".into(), mean);
        s
    };
    let base_mean = (0..n).map(|i| retention(&base, i)).sum::<f64>() / n as f64;
    let mut rows = Vec::new();
    let mut smallest = None;
    for loss in [0.02, 0.05, 0.10] {
        let (mut paired, mut interval, mut realized) = (0, 0, 0.0);
        for seed in 1..=20u64 {
            let mut state = seed;
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                order.swap(i, (splitmix(&mut state) % (i as u64 + 1)) as usize);
            }
            let mut planted = base.clone();
            let mut lost = 0.0;
            for &i in &order {
                if lost / n as f64 >= loss - 1e-12 {
                    break;
                }
                lost += retention(&base, i) - retention(&broken, i);
                planted.rows[i] = broken.rows[i].clone();
            }
            realized += lost / n as f64;
            paired += usize::from(fired(&compare_paired(&summary, &summary, &base, &planted, &tolerances, seed)));
            interval += usize::from(fired(&compare(&summary, &with_mean(base_mean - lost / n as f64), &tolerances)));
        }
        if paired >= 19 && smallest.is_none() {
            smallest = Some(loss);
        }
        rows.push(format!(
            "| {:.0} points | {:.1} points | {paired} of 20 | {interval} of 20 |",
            loss * 100.0,
            realized / 20.0 * 100.0
        ));
    }
    let false_alarms = (1..=20u64)
        .filter(|&seed| fired(&compare_paired(&summary, &summary, &base, &rerun, &tolerances, seed)))
        .count();
    rows.push(format!("| none (unchanged rerun) | 0.0 points | {false_alarms} of 20 (false alarms) | 0 of 20 |"));
    assert_eq!(false_alarms, 0, "the paired gate raises no alarm on unchanged reruns");
    let smallest = smallest.expect("the paired gate catches a 10-point loss in at least 19 of 20 seeds");

    let table = format!(
        "<!-- power-table: written by crates/cli/tests/it/gate.rs, \
         the_paired_gate_catches_small_losses_and_raises_no_false_alarm -->\n\
         | loss planted | mean loss realized | paired gate fired | interval gate fired |\n\
         |---|---|---|---|\n{}\n\nThe smallest planted loss the paired gate catches in at least 19 of 20 seeds: \
         **{:.0} points** (`keep-last-n`, {n} conversations, default tolerance 1 point).\n<!-- /power-table -->",
        rows.join("\n"),
        smallest * 100.0
    );
    let readme_path = Path::new(ROOT).join("reports/README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("reports/README.md");
    let start = readme.find("<!-- power-table").expect("reports/README.md has the power-table markers");
    let end = readme.find("<!-- /power-table -->").expect("the closing marker") + "<!-- /power-table -->".len();
    let fresh = format!("{}{table}{}", &readme[..start], &readme[end..]);
    if std::env::var_os("COMPACTLENS_BLESS").is_some() {
        std::fs::write(&readme_path, &fresh).expect("writable");
    } else {
        assert_eq!(
            readme[start..end],
            table,
            "the power table in reports/README.md is stale; rerun with COMPACTLENS_BLESS=1"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
