//! `compactlens run` and `compactlens merge` end to end on a small generated dataset:
//! outputs, exit codes, resume after a kill, shards and merge.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-cli-run-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

/// A coding-agent conversation long enough to need compaction in an 8k window.
fn conversation(id: &str, window: Option<u64>) -> serde_json::Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": format!("Fix ticket TICKET-{id} in src/{id}/main.rs.")}),
    ];
    for t in 0..24 {
        let call = format!("call-{t}");
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": call, "name": "read_file", "arguments": format!("{{\"path\":\"src/{id}/f{t}.rs\"}}")}
        ]}));
        let body: Vec<String> = (0..120).map(|i| format!("let v{t}_{i} = {};", (t * 131 + i * 17) % 997)).collect();
        messages.push(json!({"role": "tool", "tool_call_id": call, "name": "read_file", "content": body.join(" ")}));
        messages.push(json!({"role": "assistant", "content": format!("Read f{t}.rs.")}));
        if t % 6 == 5 {
            messages.push(json!({"role": "user", "content": format!("Go on after step {t}.")}));
        }
    }
    let mut c = json!({
        "id": id,
        "source": "test/cli",
        "messages": messages,
        "probes": [
            {"id": "task", "kind": "task", "question": "Which ticket?", "answer": format!("TICKET-{id}"),
             "facts": [[format!("TICKET-{id}")]], "source_message": 1},
            {"id": "first-file", "kind": "artifact", "question": "First file read?", "answer": "f0.rs",
             "facts": [[format!("src/{id}/f0.rs")]], "source_message": 2}
        ]
    });
    if let Some(w) = window {
        c["context_window"] = json!(w);
    }
    c
}

fn write_dataset(dir: &Path, name: &str, conversations: &[serde_json::Value]) {
    let data = dir.join("data");
    fs::create_dir_all(&data).expect("data dir");
    let text: String = conversations.iter().map(|c| format!("{c}\n")).collect();
    fs::write(data.join(name), text).expect("write dataset");
}

const EXPERIMENT: &str = r#"
name = "cli-run"
datasets = ["data"]
windows = [8000, 64000]
cache = "openai"
price = { input = 2.0, cached_input = 0.5, output = 8.0 }
seed = 5

[[strategy]]
name = "truncate"
target_ratio = [0.5, 0.8]

[[strategy]]
name = "observation-mask"

[[strategy]]
name = "none"
"#;

/// A folder with a dataset of `n` conversations and `exp.toml`.
fn setup(test: &str, n: usize, experiment: &str) -> PathBuf {
    let dir = temp_dir(test);
    let convs: Vec<_> = (0..n).map(|i| conversation(&format!("c{i}"), None)).collect();
    write_dataset(&dir, "set.jsonl", &convs);
    fs::write(dir.join("exp.toml"), experiment).expect("write experiment");
    dir
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn compactlens(args: &[&str], cwd: &Path) -> Outcome {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env("OPENAI_API_KEY", "sk-test-must-not-leak")
        .env_remove("CI")
        .output()
        .expect("the binary runs");
    Outcome {
        code: out.status.code().expect("exited normally"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const CSVS: [&str; 4] = ["results.csv", "summary.csv", "probes.csv", "compactions.csv"];

fn assert_same_csvs(a: &Path, b: &Path) {
    for name in CSVS {
        let x = fs::read_to_string(a.join(name)).expect("csv");
        let y = fs::read_to_string(b.join(name)).expect("csv");
        assert!(x == y, "{name} differs between {} and {}", a.display(), b.display());
    }
}

#[test]
fn a_run_writes_every_output_and_exits_0() {
    let dir = setup("ok", 3, EXPERIMENT);
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run", "--jobs", "2"], &dir);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert!(out.stdout.contains("cli-run: 24 pairs: 24 ok, 0 failed"), "stdout: {}", out.stdout);
    let run = dir.join("run");
    for name in CSVS.iter().chain(&["results.jsonl", "run.json", "report.html"]) {
        assert!(run.join(name).is_file(), "{name} is written");
    }
    let results = fs::read_to_string(run.join("results.csv")).expect("results.csv");
    assert_eq!(results.lines().count(), 1 + 3 * 8, "header and a row per pair");
    assert!(results.starts_with("conversation_id,dataset,strategy,config_id,params,window,status,error,"));
    assert!(results.contains(",set.jsonl,") || results.contains(",data/set.jsonl,"), "{results}");
    let summary = fs::read_to_string(run.join("summary.csv")).expect("summary.csv");
    // A pooled row per configuration and one per configuration on the one dataset.
    assert_eq!(summary.lines().count(), 1 + 2 * 8);
    assert!(!summary.contains("NaN"));
    // Compaction happened at 8k and left events with summaries or drops.
    assert!(fs::read_to_string(run.join("compactions.csv")).expect("compactions.csv").lines().count() > 1);

    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(run.join("run.json")).expect("run.json")).expect("json");
    assert_eq!(manifest["counts"]["ok"], 24);
    assert_eq!(manifest["counts"]["failed"], 0);
    assert_eq!(manifest["seed"], 5);
    assert_eq!(manifest["tokenizer"], "o200k_base");
    assert_eq!(manifest["judge"], "offline");
    assert_eq!(manifest["experiment"]["configurations"].as_array().map(Vec::len), Some(8));
    let text = fs::read_to_string(run.join("run.json")).expect("run.json");
    assert!(!text.contains("sk-test-must-not-leak"), "no environment value in run.json");
    assert!(!text.contains("OPENAI_API_KEY"));
}

#[test]
fn a_failing_pair_is_recorded_and_exits_1_with_all_outputs() {
    // No `windows`: each conversation's own window; the one without fails alone.
    let dir = temp_dir("failing");
    write_dataset(&dir, "set.jsonl", &[conversation("with", Some(8000)), conversation("without", None)]);
    fs::write(dir.join("exp.toml"), EXPERIMENT.replace("windows = [8000, 64000]\n", "")).expect("experiment");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run"], &dir);
    assert_eq!(out.code, 1, "stdout: {}\nstderr: {}", out.stdout, out.stderr);
    assert!(out.stderr.contains("without") && out.stderr.contains("no context_window"), "{}", out.stderr);
    let results = fs::read_to_string(dir.join("run/results.csv")).expect("results.csv");
    assert_eq!(results.lines().filter(|l| l.contains(",failed,")).count(), 4);
    assert_eq!(results.lines().filter(|l| l.contains(",ok,")).count(), 4);
    let summary = fs::read_to_string(dir.join("run/summary.csv")).expect("summary.csv");
    assert!(summary.lines().nth(1).expect("a row").contains("-own-"), "{summary}");
}

#[test]
fn config_errors_exit_2_and_name_the_key() {
    let dir = setup("config", 1, &EXPERIMENT.replace("target_ratio = [0.5, 0.8]", "target_ratio = [0.5, 1.8]"));
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run"], &dir);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("exp.toml:9: [[strategy]] #1 (truncate), key `target_ratio`: 1.8"), "{}", out.stderr);
    assert!(!dir.join("run").exists(), "nothing runs");

    fs::write(dir.join("exp.toml"), EXPERIMENT.replace("datasets = [\"data\"]", "datasets = [\"missing\"]"))
        .expect("experiment");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "run"], &dir);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("missing") && out.stderr.contains("not found"), "{}", out.stderr);
}

#[test]
fn resume_after_a_kill_gives_the_same_csvs() {
    let dir = setup("resume", 3, EXPERIMENT);
    assert_eq!(compactlens(&["run", "--config", "exp.toml", "--out", "whole"], &dir).code, 0);
    assert_eq!(compactlens(&["run", "--config", "exp.toml", "--out", "killed"], &dir).code, 0);
    // Running again without --resume is refused.
    let again = compactlens(&["run", "--config", "exp.toml", "--out", "killed"], &dir);
    assert_eq!(again.code, 2, "{}", again.stderr);
    // Simulate a kill: 10 whole lines and part of the 11th, no CSVs yet.
    let log = dir.join("killed/results.jsonl");
    let text = fs::read_to_string(&log).expect("log");
    let mut cut: String = text.lines().take(10).map(|l| format!("{l}\n")).collect();
    cut.push_str(&text.lines().nth(10).expect("an 11th line")[..40]);
    fs::write(&log, cut).expect("truncate");
    for name in CSVS {
        fs::remove_file(dir.join("killed").join(name)).expect("remove csv");
    }
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "killed", "--resume"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("10 resumed"), "{}", out.stdout);
    assert_same_csvs(&dir.join("whole"), &dir.join("killed"));
}

#[test]
fn merged_shards_give_the_same_csvs_as_the_whole_run() {
    let dir = setup("shards", 3, EXPERIMENT);
    assert_eq!(compactlens(&["run", "--config", "exp.toml", "--out", "whole"], &dir).code, 0);
    for k in 1..=3 {
        let shard = format!("{k}/3");
        let out = compactlens(&["run", "--config", "exp.toml", "--out", &format!("s{k}"), "--shard", &shard], &dir);
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let partial = compactlens(&["merge", "s1", "s2", "--out", "partial"], &dir);
    assert_eq!(partial.code, 1, "a missing shard is a failed merge");
    assert!(partial.stderr.contains("have no result"), "{}", partial.stderr);
    let out = compactlens(&["merge", "s1", "s2", "s3", "--out", "merged"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("24 pairs: 24 ok"), "{}", out.stdout);
    assert_same_csvs(&dir.join("whole"), &dir.join("merged"));

    // A folder of another experiment does not merge.
    fs::write(dir.join("other.toml"), EXPERIMENT.replace("seed = 5", "seed = 6")).expect("experiment");
    assert_eq!(compactlens(&["run", "--config", "other.toml", "--out", "other"], &dir).code, 0);
    let out = compactlens(&["merge", "s1", "other", "--out", "bad"], &dir);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("same experiment"), "{}", out.stderr);
}

#[test]
fn the_default_out_folder_is_under_reports_and_printed() {
    let dir = setup("default-out", 1, EXPERIMENT);
    let out = compactlens(&["run", "--config", "exp.toml"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let folder = out.stdout.lines().last().expect("the folder is printed");
    assert!(folder.starts_with("reports/cli-run-") || folder.starts_with("reports\\cli-run-"), "{folder}");
    assert!(dir.join(folder).join("summary.csv").is_file());
}

#[test]
fn outside_a_checkout_run_uses_the_built_in_default_experiment_with_the_same_results() {
    let dir = temp_dir("built-in-default");
    // A slice of the default experiment keeps the test short; the slice is the same pairs in both runs.
    let out = compactlens(&["run", "--shard", "1/48", "--out", "built-in"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("built-in default experiment"), "{}", out.stderr);
    let manifest = fs::read_to_string(dir.join("built-in/run.json")).expect("run.json");
    assert!(manifest.contains("\"default\""), "{manifest}");

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let checkout = dir.join("checkout");
    let out = compactlens(
        &["run", "--config", "experiments/default.toml", "--shard", "1/48", "--out", checkout.to_str().expect("utf-8")],
        &root,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!fs::read_to_string(dir.join("built-in/results.csv"))
        .expect("csv")
        .lines()
        .nth(1)
        .unwrap_or("")
        .is_empty());
    assert_same_csvs(&dir.join("built-in"), &checkout);
}

#[test]
fn a_real_kill_mid_run_then_resume_gives_the_same_csvs() {
    // A run slow enough to be caught mid-way: long synthetic sessions, one worker.
    let dir = temp_dir("real-kill");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/synthetic/data.jsonl");
    let experiment = format!(
        "name = \"kill\"\ndatasets = [{:?}]\nwindows = [32000]\nseed = 3\n\n[[strategy]]\nname = \"keep-last-n\"\n\n[[strategy]]\nname = \"cut-point\"\n",
        data.to_str().expect("a UTF-8 path")
    );
    fs::write(dir.join("exp.toml"), experiment).expect("experiment");
    let whole = compactlens(&["run", "--config", "exp.toml", "--out", "whole", "--jobs", "1"], &dir);
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    let total = fs::read_to_string(dir.join("whole/results.jsonl")).expect("log").lines().count();
    assert!(total >= 4, "{total} pairs");

    let mut child = Command::new(BIN)
        .args(["run", "--config", "exp.toml", "--out", "killed", "--jobs", "1"])
        .current_dir(&dir)
        .env_remove("CI")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary starts");
    let log = dir.join("killed/results.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    // Whole lines only: the kill may cut the last one.
    let lines = || fs::read_to_string(&log).map(|t| t.matches('\n').count()).unwrap_or(0);
    while lines() < 1 {
        assert!(child.try_wait().expect("wait").is_none(), "the run ended before it could be killed");
        assert!(std::time::Instant::now() < deadline, "no pair finished in time");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let kept = lines();
    assert!(kept < total, "killed after {kept} of {total} pairs: the kill came too late to test anything");
    assert!(!dir.join("killed/summary.csv").exists(), "a killed run wrote no views");

    let out = compactlens(&["run", "--config", "exp.toml", "--out", "killed", "--resume", "--jobs", "1"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(&format!("{kept} resumed")), "{}", out.stdout);
    assert_same_csvs(&dir.join("whole"), &dir.join("killed"));
}

/// `--out` never writes over a folder that is not a run (an existing summary.csv stays), nor
/// over the run of another experiment; a live process's lock keeps a second run out, and a
/// dead process's lock (a killed run) does not block the resume.
#[test]
fn run_out_refuses_foreign_folders_and_a_locked_run() {
    let dir = setup("foreign", 1, EXPERIMENT);
    let foreign = dir.join("baseline");
    fs::create_dir_all(&foreign).expect("mkdir");
    fs::write(foreign.join("summary.csv"), "config_id,retention_mean\nx,0.9\n").expect("write");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "baseline"], &dir);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("not empty and not a run folder (it holds summary.csv)"), "{}", out.stderr);
    assert_eq!(fs::read_to_string(foreign.join("summary.csv")).expect("kept"), "config_id,retention_mean\nx,0.9\n");

    // An empty folder is fine; a run of another experiment is refused, even with --resume.
    fs::create_dir_all(dir.join("empty")).expect("mkdir");
    assert_eq!(compactlens(&["run", "--config", "exp.toml", "--out", "empty"], &dir).code, 0);
    fs::write(dir.join("other.toml"), EXPERIMENT.replace("name = \"cli-run\"", "name = \"other\"")).expect("write");
    let other = compactlens(&["run", "--config", "other.toml", "--out", "empty", "--resume"], &dir);
    assert_eq!(other.code, 2, "{}", other.stderr);
    assert!(other.stderr.contains("holds experiment cli-run-"), "{}", other.stderr);

    // An OS lock held by a live process (this test's own) keeps a run out; the owner it wrote
    // is in the message.
    let lock = dir.join("empty/.compactlens.lock");
    fs::write(&lock, "process 77 on test-host").expect("lock");
    let held = fs::OpenOptions::new().write(true).open(&lock).expect("opens");
    held.lock().expect("locks");
    let locked = compactlens(&["run", "--config", "exp.toml", "--out", "empty", "--resume"], &dir);
    assert_eq!(locked.code, 2, "{}", locked.stderr);
    assert!(locked.stderr.contains("another run (process 77 on test-host) is writing"), "{}", locked.stderr);
    drop(held);
    // A lock file without an OS lock (a killed run, or PID 1 of another container on a shared
    // volume) is taken over, and released at the end.
    fs::write(&lock, "process 1 on another-container").expect("stale lock");
    let resumed = compactlens(&["run", "--config", "exp.toml", "--out", "empty", "--resume"], &dir);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(!lock.exists(), "the lock is released");
    let _ = fs::remove_dir_all(&dir);
}

/// Two processes resuming into one folder at once: the second is refused by the lock, so no
/// pair is written twice.
#[test]
fn two_concurrent_resumes_write_no_duplicate_record() {
    let dir = setup("concurrent", 3, EXPERIMENT);
    let spawn = || {
        Command::new(BIN)
            .args(["run", "--config", "exp.toml", "--out", "shared", "--resume", "--jobs", "1"])
            .current_dir(&dir)
            .env_remove("CI")
            .output()
    };
    fs::create_dir_all(dir.join("shared")).expect("mkdir");
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().expect("joins").expect("runs"), b.join().expect("joins").expect("runs"))
    });
    let codes = [a.status.code(), b.status.code()];
    assert!(codes.contains(&Some(0)), "{codes:?}");
    let log = fs::read_to_string(dir.join("shared/results.jsonl")).expect("log");
    let mut keys: Vec<String> = log
        .lines()
        .map(|l| {
            let r: serde_json::Value = serde_json::from_str(l).expect("record");
            format!("{} {}", r["conversation_id"], r["config_id"])
        })
        .collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "no duplicate record: {log}");
    let _ = fs::remove_dir_all(&dir);
}

/// The records of a run folder's `results.jsonl`, as pair keys; panics on a line that is not a
/// whole record.
fn logged_pairs(dir: &Path) -> Vec<String> {
    let log = fs::read_to_string(dir.join("results.jsonl")).expect("log");
    log.lines()
        .map(|l| {
            let r: serde_json::Value = serde_json::from_str(l).expect("a whole record");
            format!("{} {} {}", r["dataset"], r["conversation_id"], r["config_id"])
        })
        .collect()
}

/// A run and a merge started together on one new folder: the merge takes the folder's lock as
/// the run does, so one of them refuses (exit 2) and the folder holds exactly what the other
/// said it wrote; nothing is renamed over a log being appended to. Tried several times, as the
/// order the two reach the folder in varies.
#[test]
fn a_run_and_a_merge_started_together_on_one_folder_lose_nothing() {
    let dir = setup("run-merge", 4, EXPERIMENT);
    let shard = compactlens(&["run", "--config", "exp.toml", "--out", "shard", "--shard", "1/2"], &dir);
    assert!(shard.code <= 1, "{}", shard.stderr);
    let shard_pairs = logged_pairs(&dir.join("shard")).len();
    assert!(shard_pairs > 0);
    let mut seen_run_win = false;
    let mut seen_merge_win = false;
    for attempt in 0..6 {
        let out = format!("together-{attempt}");
        let spawn = |args: Vec<String>| {
            let dir = dir.clone();
            move || Command::new(BIN).args(&args).current_dir(&dir).env_remove("CI").output().expect("runs")
        };
        let run_args: Vec<String> =
            ["run", "--config", "exp.toml", "--out", &out, "--jobs", "2"].iter().map(|s| s.to_string()).collect();
        let merge_args: Vec<String> = ["merge", "shard", "--out", &out].iter().map(|s| s.to_string()).collect();
        let (run, merge) = std::thread::scope(|s| {
            let a = s.spawn(spawn(run_args));
            let b = s.spawn(spawn(merge_args));
            (a.join().expect("joins"), b.join().expect("joins"))
        });
        let (rc, mc) = (run.status.code().expect("exits"), merge.status.code().expect("exits"));
        let run_err = String::from_utf8_lossy(&run.stderr).into_owned();
        let merge_err = String::from_utf8_lossy(&merge.stderr).into_owned();
        // Exactly one of them wrote the folder; the other refused.
        assert!(
            (rc <= 1) != (mc <= 1) && (rc == 2 || mc == 2),
            "attempt {attempt}: run exit {rc}, merge exit {mc}\nrun: {run_err}\nmerge: {merge_err}"
        );
        let loser = if rc == 2 { &run_err } else { &merge_err };
        assert!(
            loser.contains("is writing into this folder") || loser.contains("already holds results.jsonl"),
            "attempt {attempt}: {loser}"
        );
        let pairs = logged_pairs(&dir.join(&out));
        let manifest: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join(&out).join("run.json")).expect("run.json"))
                .expect("manifest");
        let counted =
            manifest["counts"]["ok"].as_u64().expect("ok") + manifest["counts"]["failed"].as_u64().expect("failed");
        assert_eq!(pairs.len() as u64, counted, "attempt {attempt}: run.json counts every record of the log");
        if rc <= 1 {
            seen_run_win = true;
            let planned = manifest["counts"]["pairs_planned"].as_u64().expect("planned");
            assert_eq!(pairs.len() as u64, planned, "attempt {attempt}: the run's every pair is in its log");
            assert!(manifest["merged_from"].is_null(), "attempt {attempt}: run.json is the run's");
        } else {
            seen_merge_win = true;
            assert_eq!(pairs.len(), shard_pairs, "attempt {attempt}: the merge's log is the shard's");
        }
    }
    assert!(seen_run_win || seen_merge_win);
    let _ = fs::remove_dir_all(&dir);
}

/// `--resume` after a conversation's text was edited (same id) runs its pairs again and says
/// so; the other pairs are kept.
#[test]
fn resume_reruns_the_pairs_of_an_edited_conversation() {
    let dir = setup("stale", 2, EXPERIMENT);
    assert_eq!(compactlens(&["run", "--config", "exp.toml", "--out", "r"], &dir).code, 0);
    let before = fs::read_to_string(dir.join("r/results.csv")).expect("csv");
    let data = dir.join("data/set.jsonl");
    let text = fs::read_to_string(&data).expect("dataset");
    let edited: Vec<String> = text
        .lines()
        .map(|l| if l.contains("\"id\":\"c1\"") { l.replace("TICKET-c1", "TICKET-EDITED") } else { l.to_string() })
        .collect();
    assert_ne!(edited.join("\n"), text.trim_end(), "the edit applies");
    fs::write(&data, edited.join("\n") + "\n").expect("edit");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "r", "--resume"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let configs = 8; // four configurations at two windows
    assert!(out.stderr.contains(&format!("note: {configs} pairs rerun:")), "{}", out.stderr);
    assert!(out.stdout.contains(&format!("{configs} resumed")), "{}", out.stdout);
    let after = fs::read_to_string(dir.join("r/results.csv")).expect("csv");
    assert_ne!(before, after, "the edited conversation's rows were replayed");
    let _ = fs::remove_dir_all(&dir);
}

/// `--resume` over records written before records carried a content hash: nothing shows they
/// are current, so their pairs run again and the run says so.
#[test]
fn resume_reruns_records_without_a_content_hash() {
    let dir = setup("prehash", 2, EXPERIMENT);
    assert_eq!(compactlens(&["run", "--config", "exp.toml", "--out", "r"], &dir).code, 0);
    let log = dir.join("r/results.jsonl");
    let text = fs::read_to_string(&log).expect("log");
    let mut stripped = Vec::new();
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).expect("a record");
        assert!(v.as_object_mut().expect("an object").remove("content_hash").is_some(), "records carry a hash");
        stripped.push(v.to_string());
    }
    fs::write(&log, stripped.join("\n") + "\n").expect("rewrite");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "r", "--resume"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pairs = stripped.len();
    assert!(out.stderr.contains(&format!("note: {pairs} pairs rerun:")), "{}", out.stderr);
    let after = fs::read_to_string(&log).expect("log");
    assert!(after.lines().all(|l| l.contains("\"content_hash\"")), "every record is rewritten with its hash");
    let _ = fs::remove_dir_all(&dir);
}

/// The `compactlens` command on the line after a step's `run: |` in a workflow file.
fn workflow_command(workflow: &str, verb: &str) -> String {
    let line = workflow
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&format!("compactlens {verb} ")))
        .unwrap_or_else(|| panic!("the workflow has a `compactlens {verb}` command"));
    line.to_string()
}

#[test]
fn the_shard_workflows_commands_run_locally_and_merge_into_the_single_run() {
    let dir = setup("workflow", 3, EXPERIMENT);
    assert_eq!(compactlens(&["run", "--config", "exp.toml", "--out", "whole"], &dir).code, 0);
    let workflow =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/shards-github-actions.yml"))
            .expect("the workflow");
    let (run, merge) = (workflow_command(&workflow, "run"), workflow_command(&workflow, "merge"));
    let bin_dir = Path::new(BIN).parent().expect("the binary's folder");
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    // The matrix: three shard jobs, each in its own folder, as artifacts are downloaded.
    fs::create_dir_all(dir.join("shards")).expect("shards folder");
    for index in 0..3 {
        let out = Command::new("sh")
            .args(["-c", &run])
            .current_dir(dir.join("shards"))
            .env("PATH", &path)
            .env("EXPERIMENT", "../exp.toml")
            .env("COMPACTLENS_SHARD_INDEX", index.to_string())
            .env("COMPACTLENS_SHARDS", "3")
            .env_remove("JOB_COMPLETION_INDEX")
            .env_remove("CI")
            .output()
            .expect("sh runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{run}: {stderr}");
        assert!(stderr.contains(&format!("shard {}/3 (from COMPACTLENS_SHARD_INDEX={index}", index + 1)), "{stderr}");
    }
    let out = Command::new("sh").args(["-c", &merge]).current_dir(&dir).env("PATH", &path).output().expect("sh runs");
    assert_eq!(out.status.code(), Some(0), "{merge}: {}", String::from_utf8_lossy(&out.stderr));
    assert_same_csvs(&dir.join("whole"), &dir.join("merged"));
}

#[test]
fn two_shards_share_one_response_cache_while_running() {
    use testkit::server::{MockServer, Recorded, Reply};
    let server = MockServer::start();
    server.respond_with(|r: &Recorded| {
        std::thread::sleep(std::time::Duration::from_millis(2));
        if r.body.contains("accuracy") {
            let verdict = r#"{"accuracy": 4, "completeness": 3, "artifact_trail": 4, "continuity": 4, "decisions": 3}"#;
            Reply::text(verdict, 300, 20)
        } else {
            Reply::text(format!("an answer to {} bytes", r.body.len()), 500, 20)
        }
    });
    // The judge is a model: every probe is two requests, all through one cache folder.
    let experiment = format!(
        "{}\n[llm]\nbase_url = \"{}/v1\"\nmodel = \"m\"\napi_key_env = \"\"\n",
        EXPERIMENT.replace("seed = 5\n", "seed = 5\njudge = \"llm\"\ncache_dir = \"shared-cache\"\n"),
        server.url()
    );
    let dir = setup("shared-cache", 3, &experiment);
    // Both shards at once, over one cache folder.
    let spawn = |k: u32| {
        Command::new(BIN)
            .args(["run", "--config", "exp.toml", "--out", &format!("s{k}"), "--shard", &format!("{k}/2")])
            .current_dir(&dir)
            .env_remove("CI")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the binary starts")
    };
    let (a, b) = (spawn(1), spawn(2));
    for child in [a, b] {
        let out = child.wait_with_output().expect("finishes");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // Every entry is whole, and the whole experiment reruns from the cache alone.
    let mut entries = 0;
    for sub in fs::read_dir(dir.join("shared-cache")).expect("the cache").filter_map(Result::ok) {
        for f in fs::read_dir(sub.path()).expect("a cache subfolder").filter_map(Result::ok) {
            let name = f.file_name().to_string_lossy().to_string();
            assert!(name.ends_with(".json"), "no temporary file is left: {name}");
            let text = fs::read_to_string(f.path()).expect("readable");
            serde_json::from_str::<serde_json::Value>(&text).expect("a whole JSON entry");
            entries += 1;
        }
    }
    assert!(entries > 0);
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "again", "--cache-mode", "only"], &dir);
    assert_eq!(out.code, 0, "every request of both shards is in the shared cache: {}", out.stderr);
    let out = compactlens(&["merge", "s1", "s2", "--out", "merged"], &dir);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_same_csvs(&dir.join("again"), &dir.join("merged"));
}

/// The three outputs of the verdict tell the same verdict: the run's ending (text), `verdict
/// --format json` and the gate's markdown summary (`--summary FILE`); `--quiet` keeps one line.
#[test]
fn the_run_the_verdict_command_and_the_gate_summary_tell_the_same_verdict() {
    let dir = setup("verdict-three-ways", 3, EXPERIMENT);
    let run = compactlens(&["run", "--config", "exp.toml", "--out", "r"], &dir);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = compactlens(&["verdict", "r", "--format", "json"], &dir);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let verdict: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    // The baseline: the run's summary outside its folder (a run compared with itself is refused).
    fs::create_dir_all(dir.join("base")).expect("mkdir");
    fs::copy(dir.join("r/summary.csv"), dir.join("base/summary.csv")).expect("copy");
    let gate = Command::new(BIN)
        .args(["gate", "--baseline", "base/summary.csv", "--current", "r", "--summary", "summary.md"])
        .current_dir(&dir)
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .expect("the gate runs");
    assert_eq!(gate.status.code(), Some(0));
    let summary = fs::read_to_string(dir.join("summary.md")).expect("the gate wrote its summary");
    assert!(summary.contains("### compactlens gate: passed") && summary.contains("### Verdict: cli-run"), "{summary}");
    let text = compactlens(&["verdict", "r"], &dir).stdout;
    let windows = verdict["windows"].as_array().expect("windows");
    assert_eq!(windows.len(), 2, "8k and 64k");
    for w in windows {
        let window = format!("{}k", w["window"].as_u64().expect("a window") / 1000);
        let pooled = &w["views"][0];
        assert_eq!(pooled["dataset"], "all");
        let label = |id: &serde_json::Value| -> String {
            let e = pooled["configurations"]
                .as_array()
                .expect("entries")
                .iter()
                .find(|e| e["config_id"] == *id)
                .expect("entry");
            let mut l = e["strategy"].as_str().expect("strategy").to_string();
            for p in e["params"].as_array().expect("params") {
                l.push_str(&format!(" {}={}", p[0].as_str().expect("key"), p[1].as_str().expect("value")));
            }
            l
        };
        let front: Vec<String> = pooled["front"].as_array().expect("front").iter().map(label).collect();
        let row = run.stdout.lines().find(|l| l.starts_with(&format!("{window} "))).expect("a row per window");
        if front.is_empty() {
            // Nothing compacted at 64k: no best, and every output says so.
            assert!(window == "64k" && pooled["best"].is_null(), "{window}: the front is empty");
            assert!(row.split_whitespace().nth(1) == Some("none"), "{row}");
            assert!(summary.contains(&format!("| {window} | all datasets pooled | none |")), "{summary}");
            assert!(text.contains("best: none (no configuration can be ranked)"), "{text}");
            continue;
        }
        let best = label(&pooled["best"]["config_id"]);
        assert_eq!(best, front[0]);
        // The run's ending: the table row of the window starts with the best, then the front.
        assert!(row.split_whitespace().nth(1) == best.split_whitespace().next(), "{row} / {best}");
        assert!(run.stdout.contains(&format!("{window} front: {}", front.join(", "))), "{}", run.stdout);
        // The gate's summary: the same best and front in the window's pooled row.
        let quoted: Vec<String> = front.iter().map(|f| format!("`{f}`")).collect();
        assert!(summary.contains(&format!("| {window} | all datasets pooled | `{best}` |")), "{summary}");
        assert!(summary.contains(&quoted.join(", ")), "{summary}");
        // The verdict command's text.
        assert!(text.contains(&format!("  front: {}", front.join(", "))), "{text}");
    }
    // The grid's truncate target_ratio is a sweep: named in the verdict, drawn in the report.
    assert!(text.contains("sweep: truncate target_ratio: "), "{text}");
    let html = fs::read_to_string(dir.join("r/report.html")).expect("report.html");
    assert!(html.contains("truncate at 8k: target_ratio swept (filled: on the front)"), "the sweep is drawn");
    assert!(
        run.stdout.contains("report: r/report.html") || run.stdout.contains("report: r\\report.html"),
        "{}",
        run.stdout
    );
    let quiet = compactlens(&["run", "--config", "exp.toml", "--out", "q", "--quiet"], &dir);
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert_eq!(quiet.stdout.lines().count(), 1, "{}", quiet.stdout);
    assert!(
        quiet.stdout.contains("cli-run: 24 pairs: 24 ok, 0 failed") && quiet.stdout.contains("report.html"),
        "{}",
        quiet.stdout
    );
}

#[test]
fn answer_keys_named_in_the_experiment_give_state_retention_in_every_output() {
    let dir = setup("keys", 3, &EXPERIMENT.replace("seed = 5\n", "seed = 5\n\n[keys]\n\"data\" = \"keys.jsonl\"\n"));
    // One key per conversation at message 40: the ticket of the request (message 1), which
    // truncation at 8k drops and every configuration at 64k keeps.
    let keys: String = (0..3)
        .map(|i| {
            format!(
                "{}\n",
                json!({"conversation": format!("c{i}"), "id": "k1-01", "asked_at": 40, "kind": "task", "tier": "critical",
                       "question": "Which ticket is the work for?", "facts": [[format!("TICKET-c{i}")]],
                       "meaning": "The ticket the user gave.", "source_message": 1})
            )
        })
        .collect();
    fs::write(dir.join("keys.jsonl"), keys).expect("write keys");
    let out = compactlens(&["run", "--config", "exp.toml", "--out", "out"], &dir);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let summary = fs::read_to_string(dir.join("out/summary.csv")).expect("summary.csv");
    let mut rows = csv::Reader::from_reader(summary.as_bytes());
    let header = rows.headers().expect("header").clone();
    let col = |name: &str| header.iter().position(|h| h == name).expect(name);
    let mut seen = 0;
    for row in rows.records() {
        let row = row.expect("row");
        if &row[col("dataset")] != "all" {
            continue;
        }
        seen += 1;
        assert_eq!(&row[col("state_keys")], "3", "{row:?}");
        let state: f64 = row[col("state_retention")].parse().expect("a number");
        if &row[col("window")] == "64000" {
            assert_eq!(state, 1.0, "{row:?}");
        }
        if &row[col("strategy")] == "truncate" && &row[col("window")] == "8000" {
            assert_eq!(state, 0.0, "truncation at 8k dropped the request: {row:?}");
        }
    }
    assert_eq!(seen, 8, "every configuration's pooled row");
    // Keys are not in the probes' figures: probes.csv marks them and the verdict says the line.
    let probes = fs::read_to_string(dir.join("out/probes.csv")).expect("probes.csv");
    assert!(probes.lines().next().expect("header").ends_with(",written"));
    assert!(probes.lines().any(|l| l.contains(",k1-01,") && l.ends_with(",true")), "{probes}");
    let verdict = compactlens(&["verdict", "out"], &dir);
    assert!(
        verdict.stdout.contains("state retention on the answer keys (3 keys in 3 conversations)"),
        "{}",
        verdict.stdout
    );
    let html = fs::read_to_string(dir.join("out/report.html")).expect("report.html");
    assert!(html.contains("state retention (answer keys)"), "the leaderboard's column");
}
