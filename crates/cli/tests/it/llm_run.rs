//! `compactlens run` with `summarizer = "llm"` and `judge = "llm"` against the scripted local
//! server: faults survived (500, 429, a truncated body, a hang past the time-out, malformed
//! JSON, a context-length rejection), a warm rerun with zero requests and identical CSVs, cache
//! mode `only` failing the pairs it cannot answer and listing what is missing, `--cache-mode`,
//! the models' usage and client counters in run.json, the summarizer priced at its own price,
//! one concurrency cap and rate limit per endpoint, and the API key in no file and no output.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use testkit::server::{MockServer, Recorded, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");
const KEY: &str = "sk-llm-run-test-SECRET-93a1";

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-llm-run-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("data")).expect("temp dir is writable");
    dir
}

/// A coding session long enough for split-fraction to compact in a 32k window.
pub(crate) fn conversation(id: &str) -> serde_json::Value {
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
api_key_env = "COMPACTLENS_TEST_KEY"
max_retries = 3
backoff_initial_ms = 5
max_concurrency = 2

[llm]
base_url = "{url}/v1"
model = "judge-model"
api_key_env = "COMPACTLENS_TEST_KEY"
max_retries = 3
backoff_initial_ms = 5
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

fn setup(test: &str, url: &str, cache_mode: &str) -> PathBuf {
    let dir = temp_dir(test);
    let text: String = ["a", "b"].iter().map(|id| format!("{}\n", conversation(id))).collect();
    fs::write(dir.join("data/set.jsonl"), text).expect("dataset");
    fs::write(dir.join("exp.toml"), experiment(url, cache_mode)).expect("experiment");
    dir
}

/// Replies that depend only on the request: a summary naming the request's size for the
/// summarizer's model, a fixed verdict for the judge's (it answers and grades with it). About
/// every third distinct request meets a fault on its first attempt (a 500, a 429 or a cut-short
/// body, chosen by the request's bytes), which the client retries; the retry succeeds. Keyed by
/// the request rather than by arrival order, so concurrent requests never line up a retry on
/// another fault and the faults are the same in every run.
fn script(server: &MockServer) {
    let seen = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    server.respond_with(move |r: &Recorded| {
        let body = r.json().to_string();
        let first = seen.lock().map(|mut s| s.insert(body.clone())).unwrap_or(false);
        let h = body.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        if first {
            match h % 9 {
                2 => return Reply::ServerError,
                5 => return Reply::RateLimited { retry_after: "0".into() },
                8 => return Reply::Truncated,
                _ => {}
            }
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

/// Run the binary with the key in its environment; the key must never reach its output.
fn compactlens(args: &[&str], cwd: &Path) -> Outcome {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env("COMPACTLENS_TEST_KEY", KEY)
        .env_remove("CI")
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stdout.contains(KEY), "the API key is on stdout: {stdout}");
    assert!(!stderr.contains(KEY), "the API key is on stderr: {stderr}");
    Outcome { code: out.status.code().expect("exited"), stderr }
}

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(dir.join("run.json")).expect("run.json")).expect("run.json is JSON")
}

/// The metrics of every ok pair of a run folder, and the errors of the failed ones.
fn results(dir: &Path) -> (Vec<serde_json::Value>, Vec<String>) {
    let text = fs::read_to_string(dir.join("results.jsonl")).expect("results.jsonl");
    let (mut ok, mut failed) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).expect("a record");
        match r["outcome"]["status"].as_str() {
            Some("ok") => ok.push(r["outcome"].clone()),
            _ => failed.push(r["outcome"]["error"].as_str().unwrap_or_default().to_string()),
        }
    }
    (ok, failed)
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

    let first = compactlens(&["run", "--config", "exp.toml", "--out", "run1", "--jobs", "2"], &dir);
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

    // A rerun into a new folder from the warm cache: no request but the preflight, one per
    // endpoint and model (the summarizer's and the judge's), and the same CSVs.
    let second = compactlens(&["run", "--config", "exp.toml", "--out", "run2", "--jobs", "2"], &dir);
    assert_eq!(second.code, 0, "stderr: {}", second.stderr);
    let preflight = &server.requests()[requests..];
    assert_eq!(preflight.len(), 2, "a warm rerun makes only the preflight requests: {preflight:?}");
    assert!(preflight.iter().all(|r| r.json()["max_tokens"] == 1), "{preflight:?}");
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
    assert!(manifest.contains("COMPACTLENS_TEST_KEY"), "the manifest names the variable, not its value");

    // Both roles' usage and client counters are in run.json: the first run went to the
    // network, retrying the scripted faults; the rerun was served by the cache alone.
    let (one, two) = (run_json(&run1)["llm"].clone(), run_json(&dir.join("run2"))["llm"].clone());
    for role in ["summarizer", "judge"] {
        let c = &one[role]["client"];
        assert!(c["requests"].as_u64() > Some(0), "{role}: {one}");
        assert!(c["usage"]["prompt_tokens"].as_u64() > Some(0), "{role}: {one}");
        assert!(c["cache_misses"].as_u64() > Some(0), "{role}: the cold cache missed: {one}");
        let (hits, misses) = (c["cache_hits"].as_u64().unwrap_or(0), c["cache_misses"].as_u64().unwrap_or(0));
        assert_eq!(Some(hits + misses), c["requests"].as_u64(), "{role}: each request hits or misses: {one}");
        let c2 = &two[role]["client"];
        assert_eq!((c2["http_attempts"].as_u64(), &c2["cache_hits"]), (Some(0), &c2["requests"]), "{role}: {two}");
        assert_eq!(c2["usage"], c["usage"], "{role}: the cache replays the recorded usage");
    }
    let retries = one["summarizer"]["client"]["retries"].as_u64().unwrap_or(0)
        + one["judge"]["client"]["retries"].as_u64().unwrap_or(0);
    assert!(retries > 0, "the faults were retried: {one}");
    assert_eq!(one["judge"]["client"]["usage"]["completion_tokens"].as_u64().map(|t| t % 30), Some(0), "{one}");
    assert_eq!(one["cache_mode"], "use");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn cache_mode_only_fails_the_pairs_it_cannot_answer_and_a_resume_reruns_them() {
    let server = MockServer::start();
    script(&server);
    let dir = setup("only", &server.url(), "only");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "1"], &dir);
    assert_eq!(server.count(), 0, "no network in mode only");
    assert_eq!(out.code, 1, "a cold cache fails the run: {}", out.stderr);
    let listed: Vec<&str> = out.stderr.lines().filter(|l| l.trim_start().starts_with("missing ")).collect();
    assert!(!listed.is_empty(), "every missing key is listed: {}", out.stderr);
    assert!(listed.iter().all(|l| l.trim_start().len() == "missing ".len() + 64), "{listed:?}");
    // No degraded result is recorded as finished: every pair failed on the missing responses.
    let (ok, failed) = results(&dir.join("run"));
    assert!(ok.is_empty(), "{ok:?}");
    assert_eq!(failed.len(), 4);
    assert!(failed.iter().all(|e| e.starts_with("response cache miss (cache mode only)")), "{failed:?}");
    let csv = fs::read_to_string(dir.join("run/results.csv")).expect("results.csv");
    assert_eq!(csv.matches(",failed,").count(), 4, "{csv}");
    let stats = &run_json(&dir.join("run"))["llm"];
    assert_eq!(stats["cache_mode"], "only");
    assert!(stats["summarizer"]["client"]["failures_by_kind"]["cache_miss"].as_u64() > Some(0), "{stats}");

    // --cache-mode overrides the file's mode for every role: fill the cache in another folder...
    let fill =
        compactlens(&["run", "--config", "exp.toml", "--out", "fill", "--jobs", "1", "--cache-mode", "use"], &dir);
    assert_eq!(fill.code, 0, "{}", fill.stderr);
    let requests = server.count();
    assert!(requests > 0);
    assert_eq!(run_json(&dir.join("fill"))["llm"]["cache_mode"], "use");
    // ...then resume the failed run in mode only: its failed pairs run again, from the cache.
    let resumed = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--resume", "--jobs", "1"], &dir);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(server.count(), requests, "the resume made no request");
    let (ok, failed) = results(&dir.join("run"));
    assert_eq!((ok.len(), failed.len()), (4, 0), "{failed:?}");
    for name in ["results.csv", "probes.csv"] {
        let a = fs::read_to_string(dir.join("fill").join(name)).expect("csv");
        let b = fs::read_to_string(dir.join("run").join(name)).expect("csv");
        assert!(a == b, "{name}: the resumed run equals the run that filled the cache");
    }
    let bad = compactlens(&["run", "--config", "exp.toml", "--out", "x", "--cache-mode", "sometimes"], &dir);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("sometimes"), "{}", bad.stderr);
    let _ = fs::remove_dir_all(&dir);
}

/// One conversation, one strategy, both roles on one `[llm]` endpoint.
fn small_experiment(url: &str, llm_extra: &str, top_extra: &str) -> String {
    format!(
        r#"
name = "llm-small"
datasets = ["data"]
windows = [32000]
summarizer = "llm"
judge = "llm"
cache_mode = "off"
{top_extra}

[llm]
base_url = "{url}/v1"
model = "summarizer-model"
api_key_env = "COMPACTLENS_TEST_KEY"
backoff_initial_ms = 5
{llm_extra}

# The reactive path its document does not have, which the context-length faults exercise.
[[strategy]]
name = "split-fraction"
react_to_overflow = true
"#
    )
}

fn setup_small(test: &str, experiment: &str, conversations: &[&str]) -> PathBuf {
    let dir = temp_dir(test);
    let text: String = conversations.iter().map(|id| format!("{}\n", conversation(id))).collect();
    fs::write(dir.join("data/set.jsonl"), text).expect("dataset");
    fs::write(dir.join("exp.toml"), experiment).expect("experiment");
    dir
}

/// Every reply: a summary for summary prompts, a verdict for grading prompts, an answer else.
fn answer(r: &Recorded) -> Reply {
    let body = r.json()["messages"].to_string();
    if body.contains("accuracy") {
        Reply::text(
            r#"{"accuracy": 4, "completeness": 4, "artifact_trail": 4, "continuity": 4, "decisions": 4}"#,
            200,
            20,
        )
    } else {
        Reply::Text { text: "- Fixed the ticket; read f0.rs.".into(), prompt: 1000, cached: 400, completion: 50 }
    }
}

#[test]
fn a_full_run_survives_hangs_malformed_bodies_and_context_length_rejections() {
    let server = MockServer::start();
    let n = Arc::new(AtomicUsize::new(0));
    server.respond_with(move |r: &Recorded| {
        // The preflight request (one output token) is not part of the script, nor are the
        // judge's requests: probes asked at every checkpoint would shift which summary a
        // scripted fault lands on.
        let body = r.json()["messages"].to_string();
        if r.json()["max_tokens"] == 1 || body.contains("accuracy") || body.contains("Answer the following question") {
            return answer(r);
        }
        let i = n.fetch_add(1, Ordering::Relaxed);
        match i {
            0 => Reply::ContextLength,
            1 => Reply::Hang(Duration::from_secs(3)),
            3 => Reply::Malformed,
            5 => Reply::ContextLength,
            7 => Reply::Malformed,
            _ => answer(r),
        }
    });
    let prices = "[models.\"gpt-4.1\"]\ninput = 2.0\ncached_input = 0.5\noutput = 8.0\n\
                  [models.\"summarizer-model\"]\ninput = 0.1\ncached_input = 0.01\noutput = 0.4\n";
    let exp = small_experiment(&server.url(), "timeout_s = 1\nmax_retries = 2", "price = \"gpt-4.1\"");
    let dir = setup_small("faults", &exp, &["a", "b"]);
    fs::write(dir.join("prices.toml"), prices).expect("prices");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "1"], &dir);
    assert_eq!(out.code, 0, "faults are survived: {}", out.stderr);
    let (ok, failed) = results(&dir.join("run"));
    assert_eq!((ok.len(), failed.len()), (2, 0), "{failed:?}");
    let sum = |field: &str| ok.iter().map(|m| m[field].as_u64().unwrap_or(0)).sum::<u64>();
    assert!(sum("summarizer_context_retries") >= 1, "the rejected summary took the reactive path");
    assert!(sum("summarizer_cached_tokens") > 0, "the summarizer's cached tokens are kept");
    // The summarizer's tokens are priced at its own price, the replayed calls at gpt-4.1's.
    for m in &ok {
        let t = |f: &str| m[f].as_u64().unwrap_or(0) as f64 / 1e6;
        let replay =
            (t("input_tokens") - t("cached_tokens")) * 2.0 + t("cached_tokens") * 0.5 + t("output_tokens") * 8.0;
        let summ = (t("summarizer_input_tokens") - t("summarizer_cached_tokens")) * 0.1
            + t("summarizer_cached_tokens") * 0.01
            + t("summarizer_output_tokens") * 0.4;
        let cost = m["cost_usd"].as_f64().unwrap_or(-1.0);
        assert!((cost - (replay + summ)).abs() < 1e-9, "{cost} vs {}", replay + summ);
    }
    let stats = run_json(&dir.join("run"))["llm"].clone();
    let s = &stats["summarizer"];
    assert_eq!(s["price"]["input"], 0.1, "{stats}");
    assert!(s.get("price_note").is_none(), "{stats}");
    let mut kinds: Vec<String> = Vec::new();
    for role in ["summarizer", "judge"] {
        let c = &stats[role]["client"];
        kinds.extend(c["failures_by_kind"].as_object().into_iter().flatten().map(|(k, _)| k.clone()));
    }
    assert!(kinds.iter().any(|k| k == "context_length_exceeded"), "{stats}");
    assert!(kinds.iter().any(|k| k == "malformed"), "{stats}");
    let retries =
        s["client"]["retries"].as_u64().unwrap_or(0) + stats["judge"]["client"]["retries"].as_u64().unwrap_or(0);
    assert!(retries >= 1, "the hang timed out and was retried: {stats}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_summarizer_missing_from_the_price_table_is_priced_like_the_replay_and_run_json_says_so() {
    let server = MockServer::start();
    server.respond_with(answer);
    let prices = "[models.\"gpt-4.1\"]\ninput = 2.0\ncached_input = 0.5\noutput = 8.0\n";
    let dir = setup_small("price-note", &small_experiment(&server.url(), "", "price = \"gpt-4.1\""), &["a"]);
    fs::write(dir.join("prices.toml"), prices).expect("prices");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let manifest = run_json(&dir.join("run"));
    let note = manifest["llm"]["summarizer"]["price_note"].as_str().unwrap_or_default();
    assert!(note.contains("summarizer-model") && note.contains("replayed model's price"), "{manifest}");
    let (ok, _) = results(&dir.join("run"));
    let m = &ok[0];
    let t = |f: &str| m[f].as_u64().unwrap_or(0) as f64 / 1e6;
    let expected = (t("input_tokens") - t("cached_tokens")) * 2.0
        + t("cached_tokens") * 0.5
        + t("output_tokens") * 8.0
        + (t("summarizer_input_tokens") - t("summarizer_cached_tokens")) * 2.0
        + t("summarizer_cached_tokens") * 0.5
        + t("summarizer_output_tokens") * 8.0;
    assert!((m["cost_usd"].as_f64().unwrap_or(-1.0) - expected).abs() < 1e-9);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_shared_endpoint_sees_its_concurrency_cap_once() {
    let server = MockServer::start();
    server.respond_with(|r: &Recorded| answer(r).delayed(Duration::from_millis(20)));
    let dir = setup_small("concurrency", &small_experiment(&server.url(), "max_concurrency = 1", ""), &["a", "b", "c"]);
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "3"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(server.count() > 6, "both roles called the endpoint: {}", server.count());
    assert_eq!(server.max_in_flight(), 1, "summarizer and judge share max_concurrency = 1");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn requests_per_minute_spaces_the_requests_of_a_run() {
    let server = MockServer::start();
    server.respond_with(answer);
    // 600 a minute: one start every 100 ms, for both roles together.
    let dir = setup_small("rpm", &small_experiment(&server.url(), "requests_per_minute = 600", ""), &["a"]);
    let started = Instant::now();
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "2"], &dir);
    let elapsed = started.elapsed();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let n = server.count() as u32;
    assert!(n >= 4, "{n} requests");
    let least = Duration::from_millis(100) * (n - 1);
    assert!(elapsed >= least, "{n} requests in {elapsed:?}, faster than 600 a minute allows ({least:?})");
    let _ = fs::remove_dir_all(&dir);
}

/// A closed port: bind a listener, take its port, drop it.
fn closed_port_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

/// A dead endpoint (a closed port), one refusing the key (401) and one failing (500) stop
/// the run before any pair with exit 2, naming the endpoint and the status; none runs
/// for long. (Before the preflight, each ended "N ok, 0 failed" with exit 0.)
#[test]
fn a_dead_or_rejecting_endpoint_stops_the_run_before_any_pair() {
    let unauthorized = MockServer::start();
    unauthorized.respond_with(|_| Reply::Raw {
        status: 401,
        headers: vec![],
        body: r#"{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}"#.into(),
    });
    let failing = MockServer::start();
    failing.respond_with(|_| Reply::ServerError);
    for (name, url, status) in [
        ("closed", closed_port_url(), "connection failed"),
        ("401", unauthorized.url(), "HTTP 401"),
        ("500", failing.url(), "HTTP 500"),
    ] {
        let dir = setup_small(&format!("dead-{name}"), &small_experiment(&url, "max_retries = 2", ""), &["a"]);
        let started = Instant::now();
        let out = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "1"], &dir);
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("{url}/v1/chat/completions")),
            "{name}: names the endpoint: {}",
            out.stderr
        );
        assert!(out.stderr.contains(status), "{name}: names the status: {}", out.stderr);
        assert!(out.stderr.contains("failed its preflight request"), "{name}: {}", out.stderr);
        assert!(!dir.join("run/results.jsonl").exists(), "{name}: no pair ran");
        assert!(started.elapsed() < Duration::from_secs(30), "{name}: took {:?}", started.elapsed());
        let _ = fs::remove_dir_all(&dir);
    }
}

/// The endpoint answers the preflight, then fails every request: each pair fails (not the
/// strategy's fallback), a resume runs it again, and the end-of-run account on stderr says
/// how many summaries failed and probes went unscored, and why. With `on_llm_error =
/// "fallback"` the same outage takes the strategies' failure paths, as before, and the
/// account still says so.
#[test]
fn endpoint_failures_during_a_run_fail_the_pair_and_are_counted_on_stderr() {
    let server = MockServer::start();
    let n = Arc::new(AtomicUsize::new(0));
    let healthy = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (n2, h2) = (n.clone(), healthy.clone());
    server.respond_with(move |r: &Recorded| {
        let i = n2.fetch_add(1, Ordering::Relaxed);
        if i == 0 || h2.load(Ordering::Relaxed) {
            answer(r)
        } else {
            Reply::ServerError
        }
    });
    let dir = setup_small("midrun", &small_experiment(&server.url(), "max_retries = 1", ""), &["a", "b"]);
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "1"], &dir);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let (ok, failed) = results(&dir.join("run"));
    assert_eq!((ok.len(), failed.len()), (0, 2), "{failed:?}");
    assert!(failed.iter().all(|e| e.starts_with("model endpoint failure:") && e.contains("HTTP 500")), "{failed:?}");
    assert!(out.stderr.contains("llm summarizer summarizer-model: "), "{}", out.stderr);
    assert!(out.stderr.contains("failed (server_error "), "{}", out.stderr);
    assert!(out.stderr.contains("unscored (server_error "), "{}", out.stderr);
    // The endpoint recovers: a resume runs the failed pairs again.
    healthy.store(true, Ordering::Relaxed);
    let resumed = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--resume", "--jobs", "1"], &dir);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let (ok, failed) = results(&dir.join("run"));
    assert_eq!((ok.len(), failed.len()), (2, 0), "{failed:?}");
    assert!(resumed.stderr.contains("0 failed"), "{}", resumed.stderr);

    // on_llm_error = "fallback": the strategy's failure path, the pairs ok, the account on stderr.
    healthy.store(false, Ordering::Relaxed);
    n.store(0, Ordering::Relaxed);
    let exp = small_experiment(&server.url(), "max_retries = 1", "on_llm_error = \"fallback\"");
    fs::write(dir.join("exp.toml"), exp).expect("experiment");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "fallback", "--jobs", "1"], &dir);
    // Every summary failed: the pairs ran, and the run is still not green.
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("error: 2 of 2 summaries failed"), "{}", out.stderr);
    let (ok, failed) = results(&dir.join("fallback"));
    assert_eq!((ok.len(), failed.len()), (2, 0), "{failed:?}");
    assert!(ok.iter().all(|m| m["summarizer_failures"].as_u64() > Some(0)), "{ok:?}");
    assert!(out.stderr.contains("failed (server_error "), "{}", out.stderr);
    let _ = fs::remove_dir_all(&dir);
}

/// A server that echoes the Authorization header in its 200, 401 and 500 bodies: the key
/// reaches no file of the run (results, CSVs, report, run.json), no cache entry and no output.
#[test]
fn a_key_echoed_by_the_endpoint_is_scrubbed_from_every_output() {
    let server = MockServer::start();
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    server.respond_with(move |r: &Recorded| {
        let auth = r.header("authorization").unwrap_or("").to_string();
        let i = n2.fetch_add(1, Ordering::Relaxed);
        let echo = serde_json::to_string(&format!("you sent {auth}")).expect("json");
        match i % 4 {
            // A model answer quoting the header.
            0 | 1 => {
                if r.json()["messages"].to_string().contains("accuracy") {
                    Reply::text(
                        format!(r#"{{"accuracy": 4, "completeness": 4, "artifact_trail": 4, "continuity": 4, "decisions": 4, "rationale": "saw {auth}"}}"#),
                        100,
                        10,
                    )
                } else {
                    Reply::text(format!("- summary; header was {auth}"), 100, 10)
                }
            }
            2 => Reply::Raw {
                status: 401,
                headers: vec![],
                body: format!(r#"{{"error": {{"message": {echo}, "type": "auth"}}}}"#),
            },
            _ => Reply::Raw {
                status: 500,
                headers: vec![],
                body: format!(r#"{{"error": {{"message": {echo}, "type": "server"}}}}"#),
            },
        }
    });
    let exp = small_experiment(&server.url(), "max_retries = 0", "on_llm_error = \"fallback\"")
        .replace("cache_mode = \"off\"", "cache_mode = \"use\"\ncache_dir = \"cache\"");
    let dir = setup_small("echo", &exp, &["a", "b"]);
    // compactlens() checks stdout and stderr for the key.
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "1"], &dir);
    assert!(out.code <= 1, "{}", out.stderr);
    assert!(server.requests().iter().any(|r| r.header("authorization") == Some(&format!("Bearer {KEY}"))));
    let all = files(&dir);
    assert!(all.iter().any(|p| p.ends_with("results.jsonl")) && all.iter().any(|p| p.ends_with("report.html")));
    let mut echoed = false;
    for p in &all {
        let text = String::from_utf8_lossy(&fs::read(p).expect("readable")).into_owned();
        assert!(!text.contains(KEY), "{} holds the API key", p.display());
        echoed |= text.contains("Bearer ***");
    }
    assert!(echoed, "the echoed header is kept, scrubbed");
    let _ = fs::remove_dir_all(&dir);
}

/// The endpoint dies after the preflight: after CIRCUIT_BREAKER (8) pairs in a row fail at it,
/// the run stops taking pairs, says so, records why in run.json and exits 1.
#[test]
fn a_circuit_breaker_stops_a_run_whose_endpoint_died() {
    let server = MockServer::start();
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    server.respond_with(
        move |r: &Recorded| if n2.fetch_add(1, Ordering::Relaxed) == 0 { answer(r) } else { Reply::ServerError },
    );
    let ids: Vec<String> = (0..12).map(|i| format!("c{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let dir = setup_small("breaker", &small_experiment(&server.url(), "max_retries = 0", ""), &ids);
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "1"], &dir);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("the run stopped: 8 pairs in a row failed at the model endpoint"), "{}", out.stderr);
    let (ok, failed) = results(&dir.join("run"));
    assert_eq!((ok.len(), failed.len()), (0, 8), "{failed:?}");
    let manifest = run_json(&dir.join("run"));
    assert!(manifest["stopped"].as_str().is_some_and(|s| s.contains("HTTP 500")), "{manifest}");
    assert_eq!(manifest["complete"], false);
    let _ = fs::remove_dir_all(&dir);
}

/// Twelve reads, each result naming the file read next; the last result names none and the
/// agent replies. The system prompt names the conversation (every strategy keeps it).
fn reading_session(id: &str) -> serde_json::Value {
    let mut messages = vec![
        json!({"role": "system", "content": format!("You are agent {id}.")}),
        json!({"role": "user", "content": format!("Read the files of ticket T-{id} in order.")}),
    ];
    for t in 0..12 {
        let call = format!("{id}-c{t}");
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": call, "name": "read_file", "arguments": json!({"path": format!("src/{id}/f{t}.rs")}).to_string()}
        ]}));
        let body: Vec<String> = (0..120).map(|i| format!("let v{t}_{i} = {};", (t * 131 + i * 17) % 997)).collect();
        let next = if t < 11 { format!("\nnext: src/{id}/f{}.rs", t + 1) } else { String::new() };
        messages.push(
            json!({"role": "tool", "tool_call_id": call, "name": "read_file", "content": format!("{}{next}", body.join(" "))}),
        );
    }
    messages.push(json!({"role": "assistant", "content": "Done."}));
    json!({"id": id, "source": "test/next-action", "messages": messages})
}

/// Agent `a` is answered with the recorded action (the file its last result names, or the
/// reply), agent `b` with a file no result names.
fn next_action_answer(r: &Recorded) -> Reply {
    let messages = r.json()["messages"].as_array().cloned().unwrap_or_default();
    let text = |m: &serde_json::Value| m["content"].as_str().unwrap_or_default().to_string();
    let agent_a = messages.first().is_some_and(|m| text(m).contains("agent a."));
    let last_result = messages.iter().map(text).rfind(|c| c.starts_with("[tool result")).unwrap_or_default();
    let answer = match (agent_a, last_result.split_once("next: ")) {
        (true, Some((_, path))) => json!({"tool": "read_file", "arguments": {"path": path.trim()}}),
        (true, None) => json!({"reply": "Done."}),
        (false, _) => json!({"tool": "read_file", "arguments": {"path": "src/elsewhere.rs"}}),
    };
    Reply::text(answer.to_string(), 500, 20)
}

/// A CSV file of a run folder as rows of (column → cell).
fn csv_rows(path: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut reader = csv::Reader::from_path(path).expect("a CSV file");
    let header: Vec<String> = reader.headers().expect("a header").iter().map(String::from).collect();
    reader.records().map(|r| header.iter().cloned().zip(r.expect("a row").iter().map(String::from)).collect()).collect()
}

#[test]
fn next_action_agreement_with_a_model_and_one_full_history_request_per_point() {
    let server = MockServer::start();
    server.respond_with(next_action_answer);
    let exp = format!(
        r#"
name = "next-action"
datasets = ["data"]
windows = [32000]
next_action = "llm"
cache_mode = "use"
cache_dir = "cache"

[llm]
base_url = "{}/v1"
model = "next-model"
api_key_env = "COMPACTLENS_TEST_KEY"
backoff_initial_ms = 5
max_concurrency = 2

[[strategy]]
name = "keep-last-n"
recent_messages_to_keep = 4
system_reserve = 0
output_reserve = 0
safety_buffer = 28000

[[strategy]]
name = "keep-last-n"
recent_messages_to_keep = 6
system_reserve = 0
output_reserve = 0
safety_buffer = 28000

[[strategy]]
name = "none"
"#,
        server.url()
    );
    let dir = temp_dir("next-action");
    let text: String = ["a", "b"].iter().map(|id| format!("{}\n", reading_session(id))).collect();
    fs::write(dir.join("data/set.jsonl"), text).expect("dataset");
    fs::write(dir.join("exp.toml"), exp).expect("experiment");
    let first = compactlens(&["run", "--config", "exp.toml", "--out", "run1", "--jobs", "2"], &dir);
    assert_eq!(first.code, 0, "stderr: {}", first.stderr);
    assert!(first.stderr.contains("llm next action next-model:"), "{}", first.stderr);
    assert!(first.stderr.contains(" 0 unparsed answers"), "{}", first.stderr);

    // Per pair: a agrees with its recorded actions and with the full history; b never with
    // its recorded actions but always with its full-history answer (the same wrong file);
    // `none` never compacts: not applicable, empty.
    let results = csv_rows(&dir.join("run1/results.csv"));
    assert_eq!(results.len(), 6);
    for r in &results {
        let cells = (
            r["next_action_agree_recorded"].as_str(),
            r["next_action_agree_full"].as_str(),
            r["next_action_unparsed"].as_str(),
        );
        match (r["strategy"].as_str(), r["conversation_id"].as_str()) {
            ("none", _) => {
                assert_eq!(cells, ("", "", "0"), "{r:?}");
                assert_eq!(r["next_action_agree_recorded_compactions"], "0");
            }
            (_, "a") => assert_eq!(cells, ("1", "1", "0"), "{r:?}"),
            _ => assert_eq!(cells, ("0", "1", "0"), "{r:?}"),
        }
        if r["strategy"] != "none" {
            let n: u64 = r["next_action_agree_recorded_compactions"].parse().expect("a count");
            assert!(n > 0 && r["next_action_agree_full_compactions"] == n.to_string(), "{r:?}");
        }
    }
    let summary = csv_rows(&dir.join("run1/summary.csv"));
    for s in summary.iter().filter(|s| s["dataset"] == "all") {
        let (recorded, full) = (s["next_action_agree_recorded"].as_str(), s["next_action_agree_full"].as_str());
        if s["strategy"] == "none" {
            assert_eq!((recorded, full), ("", ""), "{s:?}");
        } else {
            assert_eq!((recorded, full), ("0.5", "1"), "the mean of a's 1 and b's 0: {s:?}");
        }
    }

    // Every call that compacted asked once with its context; each distinct point of a
    // conversation asked once with the full history, whatever the configurations there.
    let compactions = csv_rows(&dir.join("run1/compactions.csv"));
    let asked: Vec<(String, String)> = compactions
        .iter()
        .filter(|c| !c["next_action_model_compacted"].is_empty())
        .map(|c| (c["conversation_id"].clone(), c["next_action_message"].clone()))
        .collect();
    let distinct: std::collections::BTreeSet<&(String, String)> = asked.iter().collect();
    assert!(distinct.len() < asked.len(), "the two keep-last-n configurations share points: {asked:?}");
    for c in compactions.iter().filter(|c| !c["next_action_model_compacted"].is_empty()) {
        assert_eq!(c["next_action_model_compacted"], c["next_action_model_full"], "{c:?}");
        let agrees = if c["conversation_id"] == "a" { "true" } else { "false" };
        assert_eq!(
            (c["next_action_agrees_recorded"].as_str(), c["next_action_agrees_full"].as_str()),
            (agrees, "true")
        );
    }
    let requests = server.requests().iter().filter(|r| r.json()["max_tokens"] != 1).count();
    assert_eq!(requests, asked.len() + distinct.len(), "one compacted request per point, one full per distinct point");
    let stats = run_json(&dir.join("run1"))["llm"]["next_action"].clone();
    let n = |k: &str| stats[k].as_u64().unwrap_or(u64::MAX) as usize;
    assert_eq!((n("points"), n("compacted_requests")), (asked.len(), asked.len()), "{stats}");
    assert_eq!((n("full_requests"), n("full_shared")), (distinct.len(), asked.len() - distinct.len()), "{stats}");
    assert_eq!((n("unparsed_compacted"), n("unparsed_full"), n("failures")), (0, 0, 0), "{stats}");
    assert!(stats["client"]["usage"]["prompt_tokens"].as_u64() > Some(0), "{stats}");
    assert!(stats["prompt_hash"].as_str().is_some_and(|h| h.len() == 16), "{stats}");

    // From the cache alone: no request, the same CSVs.
    let second = compactlens(&["run", "--config", "exp.toml", "--out", "run2", "--cache-mode", "only"], &dir);
    assert_eq!(second.code, 0, "stderr: {}", second.stderr);
    assert_eq!(run_json(&dir.join("run2"))["llm"]["next_action"]["client"]["http_attempts"], 0);
    for name in ["results.csv", "summary.csv", "compactions.csv"] {
        let a = fs::read_to_string(dir.join("run1").join(name)).expect("csv");
        let b = fs::read_to_string(dir.join("run2").join(name)).expect("csv");
        assert!(a == b, "{name} differs in the rerun from the cache");
    }
    let _ = fs::remove_dir_all(&dir);
}
