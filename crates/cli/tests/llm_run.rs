//! `compactbench run` with `summarizer = "llm"` and `judge = "llm"` against the scripted local
//! server: faults survived, a warm rerun with zero requests and identical CSVs, cache mode
//! `only` listing what is missing, and the API key in no file.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use testkit::server::{MockServer, Recorded, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_compactbench");
const KEY: &str = "sk-llm-run-test-SECRET-93a1";

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactbench-llm-run-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("data")).expect("temp dir is writable");
    dir
}

/// A coding session long enough for split-fraction to compact in a 32k window.
fn conversation(id: &str) -> serde_json::Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": format!("Fix ticket TICKET-{id} in src/{id}/main.rs.")}),
    ];
    for t in 0..20 {
        let call = format!("call-{t}");
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": call, "name": "read_file", "arguments": format!("{{\"path\":\"src/{id}/f{t}.rs\"}}")}
        ]}));
        let body: Vec<String> = (0..200).map(|i| format!("let v{t}_{i} = {};", (t * 131 + i * 17) % 997)).collect();
        messages.push(json!({"role": "tool", "tool_call_id": call, "name": "read_file", "content": body.join(" ")}));
        messages.push(json!({"role": "assistant", "content": format!("Read f{t}.rs.")}));
    }
    json!({
        "id": id,
        "source": "test/llm",
        "messages": messages,
        "probes": [
            {"id": "task", "kind": "task", "question": "Which ticket?", "answer": format!("TICKET-{id}"),
             "facts": [[format!("TICKET-{id}")]], "source_message": 1},
            {"id": "first-file", "kind": "artifact", "question": "First file read?", "answer": "f0.rs",
             "facts": [[format!("src/{id}/f0.rs")]], "source_message": 2}
        ]
    })
}

fn experiment(url: &str, cache_mode: &str) -> String {
    format!(
        r#"
name = "llm-run"
datasets = ["data"]
windows = [32000]
judge = "llm"
judge_repeats = 2
cache_mode = "{cache_mode}"
cache_dir = "cache"

[summarizer]
kind = "llm"

[summarizer.llm]
base_url = "{url}/v1"
model = "summarizer-model"
api_key_env = "COMPACTBENCH_TEST_KEY"
max_retries = 3
backoff_initial_ms = 5
max_concurrency = 2

[llm]
base_url = "{url}/v1"
model = "judge-model"
api_key_env = "COMPACTBENCH_TEST_KEY"
max_retries = 3
backoff_initial_ms = 5
max_concurrency = 2

[[strategy]]
name = "split-fraction"

[[strategy]]
name = "keep-last-n"
recent_messages_to_keep = 6
system_reserve = 0
output_reserve = 0
safety_buffer = 24000
"#
    )
}

fn setup(test: &str, url: &str, cache_mode: &str) -> PathBuf {
    let dir = temp_dir(test);
    let text: String = ["a", "b"].iter().map(|id| format!("{}\n", conversation(id))).collect();
    fs::write(dir.join("data/set.jsonl"), text).expect("dataset");
    fs::write(dir.join("exp.toml"), experiment(url, cache_mode)).expect("experiment");
    dir
}

/// Replies that depend only on the request: a summary naming the request's size for the
/// summarizer's model, a fixed verdict for the judge's (it answers and grades with it). Every
/// third request first meets a fault, which the client retries.
fn script(server: &MockServer) {
    let n = Arc::new(AtomicUsize::new(0));
    server.respond_with(move |r: &Recorded| {
        let i = n.fetch_add(1, Ordering::Relaxed);
        match i % 9 {
            2 => return Reply::ServerError,
            5 => return Reply::RateLimited { retry_after: "0".into() },
            8 => return Reply::Truncated,
            _ => {}
        }
        if r.model() == "summarizer-model" {
            let size = r.json()["messages"].to_string().len();
            Reply::text(format!("- The user asked to fix a ticket; {size} bytes summarized.\n- Files read: f0.rs and more."), 900, 40)
        } else {
            Reply::text(
                r#"{"accuracy": 4, "completeness": 3, "artifact_trail": 5, "continuity": 4, "decisions": 2, "rationale": "ok"}"#,
                300,
                30,
            )
        }
    });
}

struct Outcome {
    code: i32,
    stderr: String,
}

fn compactbench(args: &[&str], cwd: &Path) -> Outcome {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env("COMPACTBENCH_TEST_KEY", KEY)
        .env_remove("CI")
        .output()
        .expect("the binary runs");
    Outcome { code: out.status.code().expect("exited"), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn an_llm_run_survives_faults_and_replays_from_the_cache() {
    let server = MockServer::start();
    script(&server);
    let dir = setup("warm", &server.url(), "use");

    let first = compactbench(&["run", "--config", "exp.toml", "--out", "run1", "--jobs", "2"], &dir);
    assert_eq!(first.code, 0, "stderr: {}", first.stderr);
    let requests = server.count();
    assert!(requests > 0, "the run called the models");
    let sent = server.requests();
    assert!(sent.iter().any(|r| r.model() == "summarizer-model"), "summaries were asked for");
    assert!(sent.iter().all(|r| r.header("authorization") == Some(&format!("Bearer {KEY}"))), "the key was sent");

    let run1 = dir.join("run1");
    let results = fs::read_to_string(run1.join("results.csv")).expect("results.csv");
    assert_eq!(results.lines().count(), 1 + 2 * 2, "{results}");
    assert!(!results.contains(",failed,"), "no pair lost to a fault: {results}");
    let probes = fs::read_to_string(run1.join("probes.csv")).expect("probes.csv");
    assert!(probes.contains("llm:judge-model"), "the judge is named in each row: {probes}");
    let compactions = fs::read_to_string(run1.join("compactions.csv")).expect("compactions.csv");
    assert!(compactions.contains("bytes summarized"), "the model's summaries are in the context: {compactions}");

    // A rerun into a new folder from the warm cache: no request, the same CSVs.
    let second = compactbench(&["run", "--config", "exp.toml", "--out", "run2", "--jobs", "2"], &dir);
    assert_eq!(second.code, 0, "stderr: {}", second.stderr);
    assert_eq!(server.count(), requests, "a warm rerun makes no HTTP request");
    for name in ["results.csv", "summary.csv", "probes.csv", "compactions.csv"] {
        let a = fs::read_to_string(run1.join(name)).expect("csv");
        let b = fs::read_to_string(dir.join("run2").join(name)).expect("csv");
        assert!(a == b, "{name} differs between the run and its rerun from the cache");
    }

    // The key is in no file of the runs or the cache.
    let all: Vec<PathBuf> = files(&dir);
    assert!(all.iter().any(|p| p.starts_with(dir.join("cache"))), "the cache was written");
    for p in &all {
        let bytes = fs::read(p).expect("readable");
        assert!(!String::from_utf8_lossy(&bytes).contains(KEY), "{} holds the API key", p.display());
    }
    let manifest = fs::read_to_string(run1.join("run.json")).expect("run.json");
    assert!(manifest.contains("COMPACTBENCH_TEST_KEY"), "the manifest names the variable, not its value");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn cache_mode_only_makes_no_request_and_lists_what_is_missing() {
    let server = MockServer::start();
    script(&server);
    let dir = setup("only", &server.url(), "only");
    let out = compactbench(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "1"], &dir);
    assert_eq!(server.count(), 0, "no network in mode only");
    assert_eq!(out.code, 1, "a cold cache fails the run: {}", out.stderr);
    let listed: Vec<&str> = out.stderr.lines().filter(|l| l.trim_start().starts_with("missing ")).collect();
    assert!(!listed.is_empty(), "every missing key is listed: {}", out.stderr);
    assert!(listed.iter().all(|l| l.trim_start().len() == "missing ".len() + 64), "{listed:?}");
    let _ = fs::remove_dir_all(&dir);
}
