//! `compactlens probes generate` against the scripted local endpoint: the model's probes are
//! validated against their source messages (an invented fact is rejected, counted and listed),
//! kept beside the derived probes, cached (a rerun in cache mode `only` makes no request and
//! writes the same file), and a reply that is not the probe list's JSON is a clear error that
//! writes nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use testkit::server::{MockServer, Recorded, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

fn setup(test: &str, url: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-probes-generate-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    let conversation = json!({
        "id": "conv-1",
        "source": "test/generate",
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Add a function called multiply_numbers to src/math.rs, and keep the tests green."},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "edit", "arguments": "{\"path\":\"src/math.rs\"}"}]},
            {"role": "tool", "tool_call_id": "c1", "name": "edit", "content": "ok"},
            {"role": "assistant", "content": "multiply_numbers is in src/math.rs; cargo test passes. Next: update the CHANGELOG."}
        ],
        "probes": [
            {"id": "hand-1", "kind": "task", "question": "Which file?", "answer": "src/math.rs",
             "facts": [["src/math.rs"]], "source_message": 1}
        ]
    });
    fs::write(dir.join("in.jsonl"), format!("{conversation}\n")).expect("dataset");
    fs::write(
        dir.join("exp.toml"),
        format!(
            "name = \"gen\"\ndatasets = [\"in.jsonl\"]\njudge = \"llm\"\ncache_dir = \"cache\"\n\n[llm]\nbase_url = \"{url}/v1\"\nmodel = \"writer\"\napi_key_env = \"\"\nmax_retries = 0\n\n[[strategy]]\nname = \"keep-last-n\"\n"
        ),
    )
    .expect("experiment");
    dir
}

fn generate(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(["probes", "generate", "in.jsonl", "--config", "exp.toml", "--out", "out.jsonl"])
        .args(extra)
        .current_dir(dir)
        .output()
        .expect("the binary runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const PROBES: &str = r#"{"probes": [
  {"question": "What function does the user want, and where?", "answer": "multiply_numbers in src/math.rs",
   "facts": [["multiply_numbers"], ["src/math.rs", "math.rs"]], "kind": "task", "tier": "critical", "source_messages": [1]},
  {"question": "What is the next step?", "answer": "Update the CHANGELOG", "facts": [["CHANGELOG"]],
   "kind": "continuation", "tier": "critical", "source_messages": [4]},
  {"question": "Which branch was pushed?", "answer": "release/2.4", "facts": [["release/2.4"]],
   "kind": "recall", "tier": "useful", "source_messages": [3, 4]}
]}"#;

#[test]
fn generated_probes_are_validated_counted_cached_and_kept_beside_the_others() {
    let server = MockServer::start();
    server.respond_with(|_: &Recorded| Reply::text(PROBES, 400, 120));
    let dir = setup("ok", &server.url());
    let (code, stdout, stderr) = generate(&dir, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // The model read the transcript with each message's index.
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one request per conversation");
    let body = requests[0].json().to_string();
    assert!(
        body.contains("[1] USER: Add a function called multiply_numbers") && body.contains("\"model\":\"writer\""),
        "{body}"
    );
    // The invented branch is rejected, listed with its reason and counted; never silently.
    let line = stderr.lines().find(|l| l.starts_with("rejected: conv-1 probe 2")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("release/2.4") && line.contains("does not occur in source messages [3, 4]"), "{line}");
    assert!(stderr.contains("warning: 1 of 3 proposed probes were rejected"), "{stderr}");
    assert!(stdout.contains("2 generated probes kept (task 1, continuation 1), 1 rejected of 3 proposed"), "{stdout}");
    let written = fs::read_to_string(dir.join("out.jsonl")).expect("out.jsonl");
    let conv: serde_json::Value = serde_json::from_str(written.trim()).expect("one line");
    let probes = conv["probes"].as_array().expect("probes");
    let ids: Vec<&str> = probes.iter().map(|p| p["id"].as_str().expect("id")).collect();
    assert_eq!(ids, ["hand-1", "llm-1", "llm-2"], "beside the probes it had");
    assert_eq!(probes[1]["tier"], "critical");
    assert_eq!(probes[1]["source_message"], 1);
    assert_eq!(probes[2]["kind"], "continuation");
    // The output loads as a dataset and its probes pass the dataset's checks.
    let v = Command::new(BIN).args(["validate", "out.jsonl"]).current_dir(&dir).output().expect("the binary runs");
    assert_eq!(v.status.code(), Some(0), "{}", String::from_utf8_lossy(&v.stderr));
    // Cached: the same file again with no request, in cache mode `only`.
    fs::rename(dir.join("out.jsonl"), dir.join("first.jsonl")).expect("rename");
    let (code, _, stderr) = generate(&dir, &["--cache-mode", "only"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(server.count(), 1, "answered from the cache");
    assert_eq!(fs::read_to_string(dir.join("out.jsonl")).expect("out"), written);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_reply_that_is_not_a_probe_list_is_a_clear_error_and_nothing_is_written() {
    let server = MockServer::start();
    server.respond_with(|_: &Recorded| Reply::text("Sure! Here are some probes: {\"probes\": [", 400, 20));
    let dir = setup("malformed", &server.url());
    let (code, stdout, stderr) = generate(&dir, &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stderr.contains("conversation conv-1: the model's reply is not a probe list"), "{stderr}");
    assert!(stderr.contains("Sure! Here are some probes"), "the reply's start is shown: {stderr}");
    assert!(stderr.contains("out.jsonl is not written"), "{stderr}");
    assert!(!dir.join("out.jsonl").exists());
    // Without a model in the experiment, it says what is missing.
    fs::write(
        dir.join("exp.toml"),
        "name = \"gen\"\ndatasets = [\"in.jsonl\"]\n\n[[strategy]]\nname = \"keep-last-n\"\n",
    )
    .expect("experiment");
    let (code, _, stderr) = generate(&dir, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("names no model"), "{stderr}");
    let _ = fs::remove_dir_all(&dir);
}

/// `--max-probes N` keeps at most N of the model's valid probes per conversation, whatever
/// the model sends; the rest are listed as rejected.
#[test]
fn max_probes_is_honoured_whatever_the_model_sends() {
    let server = MockServer::start();
    server.respond_with(|_: &Recorded| Reply::text(PROBES, 400, 120));
    let dir = setup("max-probes", &server.url());
    let (code, stdout, stderr) = generate(&dir, &["--max-probes", "1"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("over --max-probes 1: only the first 1 valid probes are kept"), "{stderr}");
    let written = fs::read_to_string(dir.join("out.jsonl")).expect("out.jsonl");
    let conv: serde_json::Value = serde_json::from_str(written.trim()).expect("one line");
    let ids: Vec<&str> =
        conv["probes"].as_array().expect("probes").iter().map(|p| p["id"].as_str().expect("id")).collect();
    assert_eq!(ids, ["hand-1", "llm-1"]);
    let (code, _, stderr) = generate(&dir, &["--max-probes", "0"]);
    assert_eq!(code, 2, "{stderr}");
    let _ = fs::remove_dir_all(&dir);
}
