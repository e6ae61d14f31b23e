//! What an LLM run will cost before it starts, and a budget it stops at: `run --dry-run`
//! against a closed port (nothing sent, no run folder, the same requests per role as the real
//! run against the local stub), and `max_cost` / `--max-cost` stopping a run with everything
//! written, then `--resume` with a new budget finishing it with the CSVs of an uninterrupted run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use testkit::server::{MockServer, Recorded, Reply};

// A coding session that compacts in a 32k window, with two probes.
use crate::llm_run::conversation;

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-llm-budget-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("data")).expect("temp dir is writable");
    dir
}

/// Both roles on models of their own, priced in the experiment's table; `extra` goes at the top.
fn experiment(url: &str, extra: &str) -> String {
    format!(
        r#"
name = "llm-budget"
datasets = ["data"]
windows = [32000]
judge = "llm"
judge_repeats = 2
cache_mode = "off"
{extra}

[summarizer]
kind = "llm"

[summarizer.llm]
base_url = "{url}/v1"
model = "summarizer-model"
max_retries = 0
max_concurrency = 2

[llm]
base_url = "{url}/v1"
model = "judge-model"
max_retries = 0
max_concurrency = 2

[[strategy]]
name = "split-fraction"
react_to_overflow = true

[[strategy]]
name = "keep-last-n"
recent_messages_to_keep = 6
system_reserve = 0
output_reserve = 0
safety_buffer = 24000
"#
    )
}

const PRICES: &str = "[models.\"summarizer-model\"]\ninput = 3.0\ncached_input = 0.3\noutput = 15.0\n\
                      [models.\"judge-model\"]\ninput = 1.0\ncached_input = 0.1\noutput = 4.0\n";

fn setup(test: &str, url: &str, ids: &[&str], extra: &str) -> PathBuf {
    let dir = temp_dir(test);
    let text: String = ids.iter().map(|id| format!("{}\n", conversation(id))).collect();
    fs::write(dir.join("data/set.jsonl"), text).expect("dataset");
    fs::write(dir.join("exp.toml"), experiment(url, extra)).expect("experiment");
    fs::write(dir.join("prices.toml"), PRICES).expect("prices");
    dir
}

/// Replies that depend only on the request: a summary for the summarizer's model, a verdict for
/// grading prompts, a short answer else. The usage reported is what the dry run estimates: the
/// prompt at about four bytes a token, the whole output limit.
fn answer(r: &Recorded) -> Reply {
    let body = r.json()["messages"].to_string();
    let (prompt, completion) = ((body.len() / 4) as u64, r.json()["max_tokens"].as_u64().unwrap_or(0));
    let text = if r.model() == "summarizer-model" {
        format!("- The user asked to fix a ticket ({} bytes).\n- Read f0.rs.", body.len())
    } else if body.contains("accuracy") {
        r#"{"accuracy": 4, "completeness": 3, "artifact_trail": 5, "continuity": 4, "decisions": 2, "rationale": "ok"}"#
            .to_string()
    } else {
        "TICKET and f0.rs".to_string()
    };
    Reply::text(text, prompt, completion)
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn compactlens(args: &[&str], cwd: &Path) -> Outcome {
    let out = Command::new(BIN).args(args).current_dir(cwd).env_remove("CI").output().expect("the binary runs");
    Outcome {
        code: out.status.code().expect("exited"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A closed port: bind a listener, take its port, drop it.
fn closed_port_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

/// The dry run's line for `role`: (requests, cached, to send, cost in dollars when known).
fn dry_line(stdout: &str, role: &str) -> (u64, u64, u64, Option<f64>) {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(role))
        .unwrap_or_else(|| panic!("no {role} line: {stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let n = |i: usize| words[i].parse::<u64>().unwrap_or_else(|_| panic!("{line}"));
    let cost = words.last().and_then(|c| c.strip_prefix('$')).and_then(|c| c.parse().ok());
    // role model requests cached to-send input output cost ("total" has no model).
    let at = if role == "total" { 1 } else { 2 };
    (n(at), n(at + 1), n(at + 2), cost)
}

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(dir.join("run.json")).expect("run.json")).expect("run.json is JSON")
}

#[test]
fn a_dry_run_sends_nothing_writes_no_folder_and_counts_the_requests_of_the_real_run() {
    // The dry run against a closed port: nothing can answer, and nothing is asked.
    let dir = setup("dry", &closed_port_url(), &["a", "b"], "");
    let before: Vec<PathBuf> = fs::read_dir(&dir).expect("dir").flatten().map(|e| e.path()).collect();
    let dry = compactlens(&["run", "--config", "exp.toml", "--dry-run", "--jobs", "2"], &dir);
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    let after: Vec<PathBuf> = fs::read_dir(&dir).expect("dir").flatten().map(|e| e.path()).collect();
    assert_eq!(before.len(), after.len(), "the dry run wrote nothing here: {after:?}");
    assert!(dry.stdout.contains("nothing was sent"), "{}", dry.stdout);
    let (s_requests, s_cached, s_send, s_cost) = dry_line(&dry.stdout, "summarizer");
    let (j_requests, _, _, j_cost) = dry_line(&dry.stdout, "judge");
    let (t_requests, _, _, t_cost) = dry_line(&dry.stdout, "total");
    assert!(s_requests > 0 && j_requests > 0, "{}", dry.stdout);
    assert_eq!((s_cached, s_send), (0, s_requests), "a cold cache holds nothing");
    assert_eq!(t_requests, s_requests + j_requests);
    let (s_cost, j_cost, t_cost) = (s_cost.expect("priced"), j_cost.expect("priced"), t_cost.expect("priced"));
    assert!(s_cost > 0.0 && j_cost > 0.0 && (t_cost - s_cost - j_cost).abs() < 1e-3, "{}", dry.stdout);
    assert!(dry.stdout.contains("expected LLM wall time"), "{}", dry.stdout);

    // The real run against the stub: the same requests per role.
    let server = MockServer::start();
    server.respond_with(answer);
    fs::write(dir.join("exp.toml"), experiment(&server.url(), "")).expect("experiment");
    let real = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "2"], &dir);
    assert_eq!(real.code, 0, "{}", real.stderr);
    let stats = run_json(&dir.join("run"))["llm"].clone();
    let sent = |role: &str| stats[role]["client"]["requests"].as_u64().unwrap_or(0);
    assert_eq!(sent("summarizer"), s_requests, "summarizer: {stats}\n{}", dry.stdout);
    assert_eq!(sent("judge"), j_requests, "judge: {stats}\n{}", dry.stdout);
    // Every request went over the network: two preflights besides.
    assert_eq!(server.count() as u64, s_requests + j_requests + 2);

    // A model missing from the price table: the dry run says the cost is unknown, not $0.
    fs::write(
        dir.join("prices.toml"),
        "[models.\"summarizer-model\"]\ninput = 3.0\ncached_input = 0.3\noutput = 15.0\n",
    )
    .expect("prices");
    let unpriced = compactlens(&["run", "--config", "exp.toml", "--dry-run"], &dir);
    assert_eq!(unpriced.code, 0, "{}", unpriced.stderr);
    assert!(
        unpriced.stdout.contains("judge: cost unknown: the judge model \"judge-model\" is not in the price table"),
        "{}",
        unpriced.stdout
    );
    assert_eq!(dry_line(&unpriced.stdout, "total").3, None, "{}", unpriced.stdout);
    assert!(unpriced.stderr.contains("the cost is not known"), "{}", unpriced.stderr);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_warm_cache_makes_a_dry_run_free() {
    let server = MockServer::start();
    server.respond_with(answer);
    let dir = setup("warm", &server.url(), &["a"], "");
    let exp =
        experiment(&server.url(), "").replace("cache_mode = \"off\"", "cache_mode = \"use\"\ncache_dir = \"cache\"");
    fs::write(dir.join("exp.toml"), exp).expect("experiment");
    let real = compactlens(&["run", "--config", "exp.toml", "--out", "run"], &dir);
    assert_eq!(real.code, 0, "{}", real.stderr);
    let count = server.count();
    let dry = compactlens(&["run", "--config", "exp.toml", "--dry-run"], &dir);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(server.count(), count, "a dry run sends nothing, not even a preflight");
    let (requests, cached, to_send, cost) = dry_line(&dry.stdout, "total");
    assert!(requests > 0);
    assert_eq!((cached, to_send, cost), (requests, 0, Some(0.0)), "{}", dry.stdout);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_run_stops_at_its_budget_with_everything_written_and_a_resume_finishes_it() {
    let server = MockServer::start();
    server.respond_with(answer);
    let ids = ["a", "b", "c", "d"];
    let dir = setup("budget", &server.url(), &ids, "");
    let dry = compactlens(&["run", "--config", "exp.toml", "--dry-run"], &dir);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let estimate = dry_line(&dry.stdout, "total").3.expect("priced");

    // The uninterrupted run, for comparison.
    let full = compactlens(&["run", "--config", "exp.toml", "--out", "full", "--jobs", "1"], &dir);
    assert_eq!(full.code, 0, "{}", full.stderr);

    // max_cost in [llm] at a third of the estimate: the run stops, everything written.
    let budget = format!("{:.6}", estimate / 3.0);
    let exp = experiment(&server.url(), "")
        .replace("model = \"judge-model\"\n", &format!("model = \"judge-model\"\nmax_cost = {budget}\n"));
    fs::write(dir.join("exp.toml"), exp).expect("experiment");
    let stopped = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "1"], &dir);
    assert_eq!(stopped.code, 1, "{}", stopped.stderr);
    assert!(stopped.stderr.contains("the run stopped at its budget:"), "{}", stopped.stderr);
    assert!(stopped.stderr.contains(&format!("of max_cost ${:.4}", estimate / 3.0)), "{}", stopped.stderr);
    assert!(stopped.stderr.contains("--resume --out run --max-cost USD"), "{}", stopped.stderr);
    let run = dir.join("run");
    for name in ["results.csv", "summary.csv", "probes.csv", "compactions.csv", "report.html", "run.json"] {
        assert!(run.join(name).is_file(), "{name} is written");
    }
    let manifest = run_json(&run);
    assert_eq!(manifest["complete"], false);
    assert!(manifest["stopped"].as_str().is_some_and(|s| s.contains("budget")), "{manifest}");
    let b = &manifest["llm"]["budget"];
    let spent = b["spent_usd"].as_f64().expect("spent");
    assert!(spent > 0.0 && spent <= estimate / 3.0 + 1e-9, "spent within the budget: {b}");
    assert!(b["refused_requests"].as_u64() > Some(0), "{b}");
    let results = fs::read_to_string(run.join("results.csv")).expect("results.csv");
    let full_results = fs::read_to_string(dir.join("full/results.csv")).expect("results.csv");
    assert!(results != full_results, "the stopped run is not the whole run");

    // A resume with a new budget runs the rest: the same CSVs as the uninterrupted run.
    let resumed = compactlens(
        &["run", "--config", "exp.toml", "--out", "run", "--resume", "--jobs", "1", "--max-cost", "100"],
        &dir,
    );
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(run_json(&run)["complete"], true);
    for name in ["results.csv", "summary.csv", "probes.csv", "compactions.csv"] {
        let a = fs::read_to_string(dir.join("full").join(name)).expect("csv");
        let b = fs::read_to_string(run.join(name)).expect("csv");
        assert!(a == b, "{name}: the resumed run differs from the uninterrupted one");
    }

    // A budget needs every model's price.
    fs::write(dir.join("prices.toml"), "[models.\"judge-model\"]\ninput = 1.0\ncached_input = 0.1\noutput = 4.0\n")
        .expect("prices");
    let unpriced = compactlens(&["run", "--config", "exp.toml", "--out", "x"], &dir);
    assert_eq!(unpriced.code, 2, "{}", unpriced.stderr);
    assert!(unpriced.stderr.contains("max_cost needs the price of every model"), "{}", unpriced.stderr);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_dry_run_counts_the_next_action_requests_of_the_real_run() {
    // next_action = "llm" on the [llm] endpoint: one request per compacted call and one
    // full-history request per distinct point, in the dry run as in the run.
    let extra = "next_action = \"llm\"";
    let dir = setup("dry-next", &closed_port_url(), &["a", "b"], extra);
    let dry = compactlens(&["run", "--config", "exp.toml", "--dry-run", "--jobs", "2"], &dir);
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    let (n_requests, _, _, n_cost) = dry_line(&dry.stdout, "next_action");
    assert!(n_requests > 0 && n_cost.is_some_and(|c| c > 0.0), "{}", dry.stdout);
    let (s, j, t) =
        (dry_line(&dry.stdout, "summarizer").0, dry_line(&dry.stdout, "judge").0, dry_line(&dry.stdout, "total").0);
    assert_eq!(t, s + j + n_requests, "{}", dry.stdout);

    let server = MockServer::start();
    server.respond_with(answer);
    fs::write(dir.join("exp.toml"), experiment(&server.url(), extra)).expect("experiment");
    let real = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "2"], &dir);
    assert_eq!(real.code, 0, "{}", real.stderr);
    let stats = run_json(&dir.join("run"))["llm"]["next_action"].clone();
    let sent = stats["compacted_requests"].as_u64().unwrap_or(0) + stats["full_requests"].as_u64().unwrap_or(0);
    let points = stats["points"].as_u64().unwrap_or(0);
    // One compacted request per point in both. The full-history requests are one per distinct
    // point: where two configurations compact at the same message depends on the summaries,
    // which the dry run's stand-in writes, so its count lies between the run's and one per
    // point (here the run's summaries brought two configurations to the same point twice).
    assert_eq!(stats["compacted_requests"].as_u64(), Some(points), "{stats}");
    assert!(n_requests >= sent && n_requests <= 2 * points, "dry {n_requests}, sent {sent}: {stats}\n{}", dry.stdout);
    let _ = fs::remove_dir_all(&dir);
}
