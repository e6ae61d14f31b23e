//! `compactlens run` with `summarizer = "llm"`, `judge = "llm"` and `next_action = "llm"`
//! against a real model:
//! SmolLM2-135M-Instruct served by llama-cpp-python on loopback. Runs only when
//! `COMPACTLENS_SMOLLM2_URL` is set (`scripts/test-llm.sh` installs, serves and sets it);
//! otherwise it prints why it skipped.
//!
//! The model is far too small to summarize or judge well; the test proves the whole path
//! against a real server and real output: odd formatting, verdicts that do not parse (kept raw,
//! unscored), real latency, and a rerun from the cache alone (`--cache-mode only`) with
//! identical outputs and no HTTP request, the models' counters in run.json.

#![allow(clippy::print_stderr)] // a skipped model test says why

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

fn conversation() -> serde_json::Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": "Fix ticket CSV-42: parse_row in src/csv/reader.rs drops quoted commas."}),
    ];
    for t in 0..6 {
        let call = format!("call-{t}");
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": call, "name": "read_file", "arguments": format!("{{\"path\":\"src/csv/part{t}.rs\"}}")}
        ]}));
        let body: Vec<String> = (0..150).map(|i| format!("let c{t}_{i} = {};", (t * 37 + i * 11) % 257)).collect();
        messages.push(json!({"role": "tool", "tool_call_id": call, "name": "read_file", "content": body.join(" ")}));
        messages.push(json!({"role": "assistant", "content": format!("Read part{t}.rs.")}));
    }
    json!({
        "id": "smol",
        "source": "test/smollm2",
        "messages": messages,
        "probes": [
            {"id": "task", "kind": "task", "question": "Which ticket is being fixed?", "answer": "CSV-42",
             "facts": [["CSV-42"]], "source_message": 1},
            {"id": "file", "kind": "artifact", "question": "Which file has the bug?", "answer": "src/csv/reader.rs",
             "facts": [["src/csv/reader.rs"]], "source_message": 1}
        ]
    })
}

fn experiment(url: &str) -> String {
    format!(
        r#"
name = "smollm2"
datasets = ["data"]
windows = [20000]
summarizer = "llm"
next_action = "llm"
cache_dir = "cache"

# A 135M model rarely writes the verdict's JSON from the prompt alone: the server holds it to
# the schema (a grammar), as llama.cpp's servers take one.
[judge]
kind = "llm"
verdict_format = "json_object"

[llm]
base_url = "{url}"
model = "smollm2"
api_key_env = ""
# serve-llm.sh picks a free port each time: key the cache by a name, not the URL.
cache_namespace = "smollm2-135m-q4_1"
max_tokens = 120
timeout_s = 600
max_concurrency = 1

# Small limits keep the model's outputs short on two cores.
[[strategy]]
name = "keep-last-n"
recent_messages_to_keep = 3
safety_buffer = 11000
summary_max_tokens = 150
summary_target_tokens = 150
"#
    )
}

fn compactlens(args: &[&str], cwd: &Path) -> (i32, String) {
    let out = Command::new(BIN).args(args).current_dir(cwd).env_remove("CI").output().expect("the binary runs");
    (out.status.code().expect("exited"), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(dir.join("run.json")).expect("run.json")).expect("run.json is JSON")
}

#[test]
fn a_run_with_smollm2_as_summarizer_judge_and_next_action_model() {
    let Some(url) = std::env::var("COMPACTLENS_SMOLLM2_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("skipped: COMPACTLENS_SMOLLM2_URL is not set (run scripts/test-llm.sh)");
        return;
    };
    let dir: PathBuf = std::env::temp_dir().join(format!("compactlens-smollm2-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("data")).expect("temp dir");
    fs::write(dir.join("data/set.jsonl"), format!("{}\n", conversation())).expect("dataset");
    fs::write(dir.join("exp.toml"), experiment(&url)).expect("experiment");

    let (code, stderr) = compactlens(&["run", "--config", "exp.toml", "--out", "run1"], &dir);
    assert_eq!(code, 0, "stderr: {stderr}");
    let results = fs::read_to_string(dir.join("run1/results.csv")).expect("results.csv");
    assert_eq!(results.lines().count(), 2, "{results}");
    assert!(results.lines().nth(1).is_some_and(|l| l.contains(",ok,")), "{results}");
    let compactions = fs::read_to_string(dir.join("run1/compactions.csv")).expect("compactions.csv");
    assert!(compactions.lines().count() > 1, "keep-last-n compacted: {compactions}");
    let probes = fs::read_to_string(dir.join("run1/probes.csv")).expect("probes.csv");
    // Two probes, each asked at the four checkpoints after its source message.
    assert_eq!(probes.lines().count(), 9, "{probes}");
    assert!(probes.contains("llm:smollm2"), "{probes}");
    let log = fs::read_to_string(dir.join("run1/results.jsonl")).expect("results.jsonl");
    assert!(log.contains("\"raw\""), "the judge's raw verdicts are kept");

    let stats = run_json(&dir.join("run1"));
    for role in ["summarizer", "judge"] {
        let c = &stats["llm"][role]["client"];
        assert!(c["http_attempts"].as_u64() > Some(0), "{role}: {stats}");
        assert!(c["usage"]["prompt_tokens"].as_u64() > Some(0), "{role}: {stats}");
    }
    // Held to the verdict's schema, the model's grades parse.
    assert!(stats["llm"]["judge"]["scored"].as_u64() > Some(0), "{stats}");
    // Next-action agreement: every call that compacted was asked with its context and, once,
    // with the full history; each answer parsed as an action or was counted unparsed (a 135M
    // model often writes prose), and the columns say which.
    let na = &stats["llm"]["next_action"];
    let n = |k: &str| na[k].as_u64().unwrap_or(u64::MAX);
    assert!(n("points") > 0 && n("points") < u64::MAX, "{stats}");
    assert_eq!((n("compacted_requests"), n("full_requests") + n("full_shared")), (n("points"), n("points")), "{stats}");
    assert_eq!(n("failures"), 0, "{stats}");
    assert!(na["client"]["http_attempts"].as_u64() > Some(0), "{stats}");
    let table = |name: &str| -> Vec<std::collections::BTreeMap<String, String>> {
        let mut reader = csv::Reader::from_path(dir.join("run1").join(name)).expect("csv");
        let header: Vec<String> = reader.headers().expect("header").iter().map(String::from).collect();
        reader
            .records()
            .map(|r| header.iter().cloned().zip(r.expect("row").iter().map(String::from)).collect())
            .collect()
    };
    let asked: Vec<_> =
        table("compactions.csv").into_iter().filter(|c| !c["next_action_model_compacted"].is_empty()).collect();
    assert_eq!(asked.len() as u64, n("points"), "one answer per compacted call");
    let mut unparsed = 0;
    for c in &asked {
        let (compacted, full) = (c["next_action_model_compacted"].as_str(), c["next_action_model_full"].as_str());
        assert!(compacted != "failed" && full != "failed", "{c:?}");
        unparsed += u64::from(compacted == "unparsed") + u64::from(full == "unparsed");
        // Agreement is read only on actions.
        assert_eq!(c["next_action_agrees_recorded"].is_empty(), compacted == "unparsed", "{c:?}");
        assert_eq!(c["next_action_agrees_full"].is_empty(), compacted == "unparsed" || full == "unparsed", "{c:?}");
    }
    let row = &table("results.csv")[0];
    assert_eq!(row["next_action_unparsed"], unparsed.to_string(), "{row:?}");
    let scored: u64 = row["next_action_agree_recorded_compactions"].parse().expect("a count");
    assert_eq!(scored, asked.iter().filter(|c| c["next_action_model_compacted"] != "unparsed").count() as u64);
    assert_eq!(row["next_action_agree_recorded"].is_empty(), scored == 0, "{row:?}");

    // The same run from the cache alone: no network, identical outputs.
    let (code, stderr) = compactlens(&["run", "--config", "exp.toml", "--out", "run2", "--cache-mode", "only"], &dir);
    assert_eq!(code, 0, "every response is cached: {stderr}");
    let stats = run_json(&dir.join("run2"));
    for role in ["summarizer", "judge", "next_action"] {
        assert_eq!(stats["llm"][role]["client"]["http_attempts"], 0, "{role}: {stats}");
    }
    for name in ["results.csv", "summary.csv", "probes.csv", "compactions.csv"] {
        let a = fs::read_to_string(dir.join("run1").join(name)).expect("csv");
        let b = fs::read_to_string(dir.join("run2").join(name)).expect("csv");
        assert!(a == b, "{name} differs in the rerun from the cache");
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn judge_calibrate_scores_the_labelled_set_with_smollm2_too() {
    let Some(url) = std::env::var("COMPACTLENS_SMOLLM2_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("skipped: COMPACTLENS_SMOLLM2_URL is not set (run scripts/test-llm.sh)");
        return;
    };
    let dir: PathBuf = std::env::temp_dir().join(format!("compactlens-smollm2-cal-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("data")).expect("temp dir");
    fs::write(dir.join("data/set.jsonl"), format!("{}\n", conversation())).expect("dataset");
    fs::write(dir.join("exp.toml"), experiment(&url)).expect("experiment");
    // Two items of each group of the shipped set: every fact is one answer and one grade on two
    // cores, so the whole set is for a faster model.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/calibration/judge.jsonl");
    let text = fs::read_to_string(&shipped).expect("the shipped labels");
    let mut picked: Vec<&str> = Vec::new();
    for group in ["paraphrase", "extractive", "near-miss"] {
        let in_group = |l: &&str| serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| v["group"] == group);
        picked.extend(text.lines().filter(in_group).take(2));
    }
    assert_eq!(picked.len(), 6);
    fs::write(dir.join("labels.jsonl"), picked.join("\n")).expect("labels");
    let out = Command::new(BIN)
        .args(["judge", "calibrate", "labels.jsonl", "--config", "exp.toml"])
        .current_dir(&dir)
        .env_remove("CI")
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("judge offline:") && stdout.contains("accuracy"), "{stdout}");
    let line = stdout.lines().find(|l| l.starts_with("judge llm:smollm2:")).expect("the LLM judge's line");
    assert!(line.contains("recall"), "{stdout}");
    // The model answered: facts were scored (a dead server would leave every fact unscored).
    assert!(!line.contains(": 0 facts scored"), "{stdout}");
    let _ = fs::remove_dir_all(&dir);
}

/// `judge calibrate --config` alone with SmolLM2 as the judge: the experiment's answer keys
/// labelled against a recorded summary and the calibration set of the working directory, both
/// scored by the model, and the calibration's own cost printed.
#[test]
fn judge_calibrate_on_the_experiments_keys_and_the_calibration_set_with_smollm2() {
    let Some(url) = std::env::var("COMPACTLENS_SMOLLM2_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("skipped: COMPACTLENS_SMOLLM2_URL is not set (run scripts/test-llm.sh)");
        return;
    };
    let dir: PathBuf = std::env::temp_dir().join(format!("compactlens-smollm2-keys-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for sub in ["data", "keys", "datasets/calibration"] {
        fs::create_dir_all(dir.join(sub)).expect("temp dir");
    }
    // A recording whose agent compacted once: its summary states the ticket, not the file.
    let recording = json!({"id": "rec", "source": "test/smollm2", "messages": [
        {"role": "user", "content": "Fix ticket CSV-42: parse_row in src/csv/reader.rs drops quoted commas."},
        {"role": "assistant", "content": "Looking at the reader."},
        {"role": "user", "content": "Summary: the user asked to fix ticket CSV-42 (quoted commas are dropped).", "meta": {"compact_summary": true}},
        {"role": "assistant", "content": "Continuing."}
    ]});
    fs::write(dir.join("data/set.jsonl"), format!("{recording}\n")).expect("dataset");
    let key = |id: &str, alias: &str, label: &str| {
        json!({"conversation": "rec", "id": id, "asked_at": 2, "kind": "task", "tier": "critical",
               "question": format!("What about {alias}?"), "facts": [[alias]], "meaning": format!("The user named {alias}."),
               "source_message": 0, "in_real_summary": label})
    };
    let keys = [key("k1", "CSV-42", "verbatim"), key("k2", "src/csv/reader.rs", "absent")];
    fs::write(dir.join("keys/set.jsonl"), keys.iter().map(|k| format!("{k}\n")).collect::<String>()).expect("keys");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/calibration/judge.jsonl");
    let text = fs::read_to_string(&shipped).expect("the shipped labels");
    let picked: Vec<&str> = text.lines().take(2).collect();
    fs::write(dir.join("datasets/calibration/judge.jsonl"), picked.join("\n")).expect("labels");
    fs::write(dir.join("exp.toml"), format!("{}\n[keys]\n\"data\" = \"keys/set.jsonl\"\n", experiment(&url)))
        .expect("experiment");
    fs::write(dir.join("prices.toml"), "[models.smollm2]\ninput = 0.0\ncached_input = 0.0\noutput = 0.0\n")
        .expect("prices");
    let out = Command::new(BIN)
        .args(["judge", "calibrate", "--config", "exp.toml"])
        .current_dir(&dir)
        .env_remove("CI")
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("answer keys against the real summaries: 2 labelled facts in 1 sources"), "{stdout}");
    let scored: Vec<&str> =
        stdout.lines().filter(|l| l.starts_with("judge llm:smollm2:") && l.contains("facts scored")).collect();
    assert_eq!(scored.len(), 2, "the keys and the calibration set: {stdout}");
    let cost = stdout.lines().find(|l| l.starts_with("calibration cost, judge llm:smollm2:")).expect("the cost line");
    assert!(cost.contains("$0.0000") && !cost.contains(": 0 requests"), "{cost}");
    let _ = fs::remove_dir_all(&dir);
}
