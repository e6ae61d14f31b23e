//! External strategies end to end: a program speaking the JSON-lines protocol runs beside a
//! built-in strategy, its summaries come from the experiment's summarizer, its label names its
//! rows, and each way a program can fail (crash, hang, malformed JSON, an answer out of turn,
//! an invalid range) fails that pair with a clear error while the run finishes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

/// A strategy in Python (standard library only): keeps the system prompt and a pair-safe tail
/// once the request passes 70% of the window, summarizing what it drops through the harness.
/// `mode` makes it misbehave on purpose.
const STRATEGY: &str = r#"
import json, sys, time

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)

init = read()
mode = init["params"].get("mode", "ok")
if mode == "early_compact":
    # A `compact` before any call, written with `ready`.
    sys.stdout.write(json.dumps({"type": "ready", "name": "t", "version": "0"}) + "\n"
                     + json.dumps({"type": "compact", "context": [{"keep": [0, 1]}]}) + "\n")
    sys.stdout.flush()
else:
    send({"type": "ready", "name": "test-tail", "version": "0.3.1"})
ctx, window, calls = [], 0, 0
while True:
    msg = read()
    if msg["type"] == "begin":
        ctx, window, calls = [], msg["window"], 0
        continue
    if msg["type"] == "end":
        continue
    assert msg["type"] == "call", msg
    ctx.extend(msg["append"])
    calls += 1
    if calls == 3:
        if mode == "crash":
            print("Traceback: something broke in compact()", file=sys.stderr, flush=True)
            sys.exit(3)
        if mode == "hang":
            print("thinking...", file=sys.stderr, flush=True)
            time.sleep(30)
        if mode == "garbage":
            sys.stdout.write("this is not json\n"); sys.stdout.flush()
            continue
        if mode == "out_of_turn":
            send({"type": "ready", "name": "again", "version": "0"})
            continue
        if mode in ("two_answers", "summarize_after"):
            second = {"type": "keep"} if mode == "two_answers" else {"type": "summarize", "id": "late", "messages": ctx[1:2], "instructions": "x", "max_tokens": 10}
            sys.stdout.write(json.dumps({"type": "keep"}) + "\n" + json.dumps(second) + "\n")
            sys.stdout.flush()
            time.sleep(0.5)
            continue
        if mode == "huge_line":
            sys.stdout.write("x" * (20 * 1024 * 1024)); sys.stdout.flush()
            time.sleep(30)
        if mode == "grandchild":
            import subprocess
            child = subprocess.Popen(["sleep", "300"])
            open("grandchild.pid", "w").write(str(child.pid))
            time.sleep(30)
        if mode == "bad_range":
            send({"type": "compact", "context": [{"keep": [0, len(ctx) + 5]}]})
            continue
    if msg["tokens"] <= 0.7 * window or len(ctx) < 12:
        send({"type": "keep"})
        continue
    cut = len(ctx) - 8
    while cut < len(ctx) and ctx[cut]["role"] == "tool":
        cut += 1
    head = 1 if ctx and ctx[0]["role"] == "system" else 0
    send({"type": "summarize", "id": "s%d" % calls, "messages": ctx[head:cut],
          "instructions": "Summarize the task, the booking details and what is left to do.", "max_tokens": 400})
    answer = read()
    assert answer["type"] == "summary" and answer["id"] == "s%d" % calls, answer
    text = answer.get("text") or "(no summary)"
    summary = {"role": "user", "content": "Summary of the conversation so far:\n" + text, "summary": True}
    items = ([{"keep": [0, head]}] if head else []) + [{"message": summary}, {"keep": [cut, len(ctx)]}]
    send({"type": "compact", "context": items})
    ctx = ctx[:head] + [{k: v for k, v in summary.items() if k != "summary"}] + ctx[cut:]
"#;

fn setup(name: &str, modes: &[&str]) -> PathBuf {
    let dir: PathBuf = std::env::temp_dir().join(format!("compactlens-external-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("data")).expect("temp dir");
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/synthetic/support.jsonl");
    let first = fs::read_to_string(support).expect("the synthetic dataset").lines().next().expect("a line").to_string();
    fs::write(dir.join("data/support.jsonl"), format!("{first}\n")).expect("dataset");
    fs::write(dir.join("tail.py"), STRATEGY).expect("strategy");
    let mut exp = String::from(
        "name = \"external\"\ndatasets = [\"data\"]\nwindows = [16000]\n\n[[strategy]]\nname = \"keep-last-n\"\n",
    );
    for mode in modes {
        exp.push_str(&format!(
            "\n[[strategy]]\nname = \"external\"\ncommand = [\"python3\", \"tail.py\"]\nlabel = \"tail-{}\"\ntimeout_s = 2\nmode = \"{mode}\"\n",
            mode.replace('_', "-")
        ));
    }
    fs::write(dir.join("exp.toml"), exp).expect("experiment");
    dir
}

fn run(dir: &Path) -> (i32, String) {
    let out = Command::new(BIN)
        .args(["run", "--config", "exp.toml", "--out", "out"])
        .current_dir(dir)
        .env_remove("CI")
        .output()
        .expect("the binary runs");
    (out.status.code().expect("exited"), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn records(dir: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(dir.join("out/results.jsonl"))
        .expect("results.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

#[test]
fn an_external_strategy_runs_beside_a_built_in_one() {
    let dir = setup("ok", &["ok"]);
    let (code, stderr) = run(&dir);
    assert_eq!(code, 0, "{stderr}");
    let recs = records(&dir);
    assert_eq!(recs.len(), 2);
    let ext = recs.iter().find(|r| r["strategy"] == "tail-ok").expect("the external row, by its label");
    assert_eq!(ext["outcome"]["status"], "ok", "{ext}");
    let m = &ext["outcome"];
    assert!(m["compactions"].as_u64() > Some(0), "it compacted: {m}");
    assert!(m["summarizer_calls"].as_u64() > Some(0), "its summaries came from the harness: {m}");
    assert_eq!(m["rejected_requests_openai"], 0, "a pair-safe tail: {m}");
    let events = m["compaction_events"].as_array().expect("events");
    assert!(events.iter().any(|e| e["summary"].as_str().is_some_and(|s| !s.is_empty())), "summaries recorded");
    // The label names the row in every CSV; the program's name and version are in run.json.
    let summary = fs::read_to_string(dir.join("out/summary.csv")).expect("summary.csv");
    assert!(summary.lines().any(|l| l.contains("tail-ok")), "{summary}");
    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("out/run.json")).expect("run.json")).expect("JSON");
    assert_eq!(manifest["external"][0]["label"], "tail-ok");
    assert_eq!(manifest["external"][0]["version"], "0.3.1");
    assert_eq!(manifest["external"][0]["protocol"], 1, "this program speaks version 1, still accepted");
    let report = fs::read_to_string(dir.join("out/report.html")).expect("report.html");
    assert!(report.contains("tail-ok") && report.contains("test-tail 0.3.1"), "the report names it and its version");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn each_way_a_program_fails_fails_its_pair_and_the_run_finishes() {
    let modes = ["crash", "hang", "garbage", "out_of_turn", "bad_range"];
    let dir = setup("fail", &modes);
    let (code, stderr) = run(&dir);
    assert_eq!(code, 1, "failed pairs make exit code 1: {stderr}");
    let recs = records(&dir);
    assert_eq!(recs.len(), 1 + modes.len(), "every pair has its record");
    let built_in = recs.iter().find(|r| r["strategy"] == "keep-last-n").expect("the built-in row");
    assert_eq!(built_in["outcome"]["status"], "ok");
    let expected = [
        ("tail-crash", "exited"),
        ("tail-hang", "no answer within 2 s"),
        ("tail-garbage", "not JSON"),
        ("tail-out-of-turn", "`ready` message"),
        ("tail-bad-range", "invalid range"),
    ];
    for (label, what) in expected {
        let r = recs.iter().find(|r| r["strategy"] == label).unwrap_or_else(|| panic!("{label}'s record"));
        assert_eq!(r["outcome"]["status"], "failed", "{r}");
        assert_eq!(r["failure"], "strategy", "{r}");
        let error = r["outcome"]["error"].as_str().expect("an error");
        assert!(error.contains(what), "{label}: {error}");
        assert!(error.contains("conversation synth-support-s42-000") && error.contains("call 2"), "{label}: {error}");
    }
    let crash = recs.iter().find(|r| r["strategy"] == "tail-crash").expect("crash");
    assert!(
        crash["outcome"]["error"].as_str().is_some_and(|e| e.contains("something broke in compact()")),
        "stderr tail: {crash}"
    );
    let hang = recs.iter().find(|r| r["strategy"] == "tail-hang").expect("hang");
    assert!(hang["outcome"]["error"].as_str().is_some_and(|e| e.contains("thinking...")), "stderr tail: {hang}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn out_of_turn_messages_a_huge_line_and_a_grandchild_are_strategy_faults() {
    let modes = ["early_compact", "two_answers", "summarize_after", "huge_line", "grandchild"];
    let dir = setup("turns", &modes);
    let (code, stderr) = run(&dir);
    assert_eq!(code, 1, "failed pairs make exit code 1: {stderr}");
    let recs = records(&dir);
    let expected = [
        ("tail-early-compact", "wrote a `compact` message out of turn"),
        ("tail-two-answers", "wrote a `keep` message out of turn"),
        ("tail-summarize-after", "wrote a `summarize` message out of turn"),
        ("tail-huge-line", "wrote a line over 16777216 bytes"),
        ("tail-grandchild", "no answer within 2 s"),
    ];
    for (label, what) in expected {
        let r = recs.iter().find(|r| r["strategy"] == label).unwrap_or_else(|| panic!("{label}'s record"));
        assert_eq!(r["outcome"]["status"], "failed", "{label}: {r}");
        assert_eq!(r["failure"], "strategy", "{r}");
        let error = r["outcome"]["error"].as_str().expect("an error");
        assert!(error.contains(what), "{label}: {error}");
    }
    // The timed-out program's own child was killed with it (gone, or a zombie awaiting its reaper).
    let pid = fs::read_to_string(dir.join("grandchild.pid")).expect("the grandchild's pid");
    let state = fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    assert!(state.is_empty() || state.contains(") Z"), "the grandchild still runs: {state}");
    let _ = fs::remove_dir_all(&dir);
}

/// The SDKs' example strategies speak protocol version 2 under `run` (every answer carries its
/// call id, `begin` and `end` are answered `ok`), over three conversations, and run.json says so.
#[test]
fn the_sdks_examples_speak_protocol_version_2() {
    let dir = setup("v2", &[]);
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/synthetic/support.jsonl");
    fs::copy(support, dir.join("data/support.jsonl")).expect("dataset");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/strategies");
    let exp = format!(
        "name = \"v2\"\ndatasets = [\"data\"]\nwindows = [16000]\n\
         \n[[strategy]]\nname = \"external\"\ncommand = [\"python3\", \"{}\"]\nlabel = \"py\"\n\
         \n[[strategy]]\nname = \"external\"\ncommand = [\"node\", \"{}\"]\nlabel = \"js\"\n",
        examples.join("keep_last_n.py").display(),
        examples.join("keep_last_n.mjs").display()
    );
    fs::write(dir.join("exp.toml"), exp).expect("experiment");
    let out = Command::new(BIN)
        .args(["run", "--config", "exp.toml", "--out", "out", "--jobs", "1"])
        .current_dir(&dir)
        .env_remove("CI")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let recs = records(&dir);
    assert_eq!(recs.len(), 6);
    assert!(recs.iter().all(|r| r["outcome"]["status"] == "ok"), "{recs:?}");
    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("out/run.json")).expect("run.json")).expect("JSON");
    let external = manifest["external"].as_array().expect("the external strategies");
    assert_eq!(external.len(), 2);
    for e in external {
        assert_eq!(e["protocol"], 2, "{e}");
    }
    let _ = fs::remove_dir_all(&dir);
}

/// An experiment of every built-in strategy, the tail strategy above and `broken`.
fn conform(dir: &Path, extra: &str, cases: &str) -> (i32, String) {
    let mut exp = String::from("name = \"conform\"\ndatasets = [\"data\"]\n");
    for name in compaction_strategies::NAMES {
        exp.push_str(&format!("\n[[strategy]]\nname = \"{name}\"\n"));
    }
    exp.push_str(extra);
    fs::write(dir.join("conform.toml"), exp).expect("experiment");
    let out = Command::new(BIN)
        .args(["conform", "--config", "conform.toml", "--cases", cases, "--out", "failures"])
        .current_dir(dir)
        .output()
        .expect("the binary runs");
    (out.status.code().expect("exited"), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn conform_passes_every_built_in_strategy_and_the_python_and_node_examples() {
    let dir = setup("conform-ok", &[]);
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/strategies");
    let extra = format!(
        "\n[[strategy]]\nname = \"external\"\ncommand = [\"python3\", \"tail.py\"]\nlabel = \"tail\"\n\
         \n[[strategy]]\nname = \"external\"\ncommand = [\"python3\", \"{}\"]\nlabel = \"py-keep-last-n\"\n\
         \n[[strategy]]\nname = \"external\"\ncommand = [\"node\", \"{}\"]\nlabel = \"js-keep-last-n\"\n",
        examples.join("keep_last_n.py").display(),
        examples.join("keep_last_n.mjs").display()
    );
    let (code, stdout) = conform(&dir, &extra, "8");
    assert_eq!(code, 0, "{stdout}");
    for name in compaction_strategies::NAMES.iter().copied().chain(["tail", "py-keep-last-n", "js-keep-last-n"]) {
        assert!(stdout.lines().any(|l| l.starts_with(&format!("ok   {name}:"))), "{name}: {stdout}");
    }
    assert!(!dir.join("failures").exists());
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn conform_fails_a_strategy_that_orphans_a_tool_result_and_writes_the_smallest_case() {
    let dir = setup("conform-broken", &[]);
    let broken = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/strategies/broken_orphans.py");
    let extra = format!(
        "\n[[strategy]]\nname = \"external\"\ncommand = [\"python3\", \"{}\"]\nlabel = \"broken\"\n",
        broken.display()
    );
    let (code, stdout) = conform(&dir, &extra, "8");
    assert_eq!(code, 1, "{stdout}");
    let line = stdout.lines().find(|l| l.starts_with("FAIL broken:")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("orphan_tool_result") && line.contains("call"), "names the rule and the call: {line}");
    assert!(stdout.lines().filter(|l| l.starts_with("FAIL")).count() == 1, "only the broken one fails: {stdout}");
    // The smallest failing conversation is a dataset line with the failing window.
    let case = fs::read_to_string(dir.join("failures/broken.jsonl")).expect("the failing case");
    let conversation: serde_json::Value = serde_json::from_str(case.trim()).expect("one JSON line");
    assert!(conversation["context_window"].as_u64().is_some());
    let messages = conversation["messages"].as_array().expect("messages").len();
    assert!((2..=12).contains(&messages), "shrunk to a few messages: {messages}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn an_external_strategys_summaries_come_from_the_llm_summarizer_and_its_cache() {
    use testkit::server::{MockServer, Recorded, Reply};
    let server = MockServer::start();
    server.respond_with(|_: &Recorded| Reply::text("The user is changing reservation ABC123; bags added.", 900, 30));
    let dir = setup("llm", &["ok"]);
    let exp = fs::read_to_string(dir.join("exp.toml")).expect("experiment").replace(
        "windows = [16000]\n",
        &format!(
            "windows = [16000]\nsummarizer = \"llm\"\ncache_dir = \"cache\"\n\n[llm]\nbase_url = \"{}/v1\"\nmodel = \"m\"\napi_key_env = \"\"\n",
            server.url()
        ),
    );
    fs::write(dir.join("exp.toml"), exp).expect("experiment");
    let (code, stderr) = run(&dir);
    assert_eq!(code, 0, "{stderr}");
    let recs = records(&dir);
    let ext = recs.iter().find(|r| r["strategy"] == "tail-ok").expect("the external row");
    let m = &ext["outcome"];
    assert!(m["summarizer_calls"].as_u64() > Some(0), "{m}");
    assert!(m["summarizer_input_tokens"].as_u64() > Some(0), "billed like a built-in's: {m}");
    let events = m["compaction_events"].as_array().expect("events");
    assert!(events.iter().any(|e| e["summary"].as_str().is_some_and(|s| s.contains("ABC123"))), "{m}");
    // The program's instructions are the summarizer's system prompt.
    let asked = server.requests().iter().any(|r| {
        r.json()["messages"][0]["content"].as_str().is_some_and(|s| s.contains("booking details and what is left"))
    });
    assert!(asked, "the instructions reached the model");
    // A rerun from the cache alone gives the same results.
    let first = fs::read_to_string(dir.join("out/summary.csv")).expect("summary.csv");
    let again = Command::new(BIN)
        .args(["run", "--config", "exp.toml", "--out", "out2", "--cache-mode", "only"])
        .current_dir(&dir)
        .env_remove("CI")
        .output()
        .expect("the binary runs");
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(first, fs::read_to_string(dir.join("out2/summary.csv")).expect("summary.csv"));
    let _ = fs::remove_dir_all(&dir);
}

/// `keep_last_n.py`, except that every compaction also drops the thinking blocks of the last
/// assistant message it keeps: in a tool loop still running, Anthropic refuses that request.
const STRIPS_THINKING: &str = r#"
import sys
sys.path.insert(0, sys.argv[1])
import keep_last_n

class StripsThinking(keep_last_n.KeepLastN):
    name = "strips-thinking"

    def compact(self, messages, call):
        out = keep_last_n.KeepLastN.compact(self, messages, call)
        if out is None:
            return None
        last = max((k for k, m in enumerate(out) if m.get("role") == "assistant"), default=None)
        if last is not None and out[last].get("thinking"):
            out[last] = {k: v for k, v in out[last].items() if k != "thinking"}
        return out

keep_last_n.run(StripsThinking)
"#;

#[test]
fn conform_fails_a_strategy_that_drops_the_thinking_blocks_of_a_running_tool_loop() {
    let dir = setup("conform-thinking", &[]);
    fs::write(dir.join("strips_thinking.py"), STRIPS_THINKING).expect("strategy");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/strategies");
    let extra = format!(
        "\n[[strategy]]\nname = \"external\"\ncommand = [\"python3\", \"strips_thinking.py\", \"{}\"]\nlabel = \"strips-thinking\"\n\
         \n[[strategy]]\nname = \"external\"\ncommand = [\"python3\", \"{}\"]\nlabel = \"py-keep-last-n\"\n",
        examples.display(),
        examples.join("keep_last_n.py").display()
    );
    // These two only: the built-in strategies are checked above.
    fs::write(dir.join("conform.toml"), format!("name = \"conform\"\ndatasets = [\"data\"]\n{extra}"))
        .expect("experiment");
    let out = Command::new(BIN)
        .args(["conform", "--config", "conform.toml", "--cases", "16", "--out", "failures"])
        .current_dir(&dir)
        .output()
        .expect("the binary runs");
    let (code, stdout) = (out.status.code().expect("exited"), String::from_utf8_lossy(&out.stdout).into_owned());
    assert_eq!(code, 1, "{stdout}");
    let line = stdout.lines().find(|l| l.starts_with("FAIL strips-thinking:")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains("anthropic-messages/thinking_modified") && line.contains("call"),
        "names the rule and the call: {line}"
    );
    // The same strategy without the bug passes: the failure is the thinking blocks, nothing else.
    assert!(stdout.lines().any(|l| l.starts_with("ok   py-keep-last-n:")), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("FAIL")).count(), 1, "only the broken one fails: {stdout}");
    // The smallest failing conversation still holds a thinking block for the rule to apply to.
    let case = fs::read_to_string(dir.join("failures/strips-thinking.jsonl")).expect("the failing case");
    let conversation: serde_json::Value = serde_json::from_str(case.trim()).expect("one JSON line");
    let messages = conversation["messages"].as_array().expect("messages");
    assert!(messages.iter().any(|m| m["thinking"].as_array().is_some_and(|t| !t.is_empty())), "{case}");
    let _ = fs::remove_dir_all(&dir);
}

/// A strategy that records its process id and that of a child it starts, then, asked to
/// compact, never answers.
const BUSY: &str = r#"
import json, os, subprocess, sys, time
sys.stdin.readline()
child = subprocess.Popen(["sleep", "300"])
with open("pids.txt", "w") as f:
    f.write(f"{os.getpid()} {child.pid}\n")
sys.stdout.write(json.dumps({"type": "ready", "name": "busy", "version": "1"}) + "\n")
sys.stdout.flush()
for line in sys.stdin:
    time.sleep(300)
"#;

/// Whether process `pid` still runs (a zombie waiting for its reaper does not).
fn alive(pid: &str) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// SIGTERM or SIGINT to a run stops the busy external strategy's process group (the program
/// and the child it started), and the run exits 143 or 130.
#[cfg(target_os = "linux")]
#[test]
fn a_signal_to_the_run_stops_the_external_strategies_process_groups() {
    for (signal, code) in [("-TERM", 143), ("-INT", 130)] {
        let dir = setup(&format!("signal{signal}"), &[]);
        fs::write(dir.join("busy.py"), BUSY).expect("strategy");
        fs::write(
            dir.join("exp.toml"),
            "name = \"busy\"\ndatasets = [\"data\"]\nwindows = [16000]\n\n[[strategy]]\nname = \"external\"\n\
             command = [\"python3\", \"busy.py\"]\ntimeout_s = 600\n",
        )
        .expect("experiment");
        let mut child = Command::new(BIN)
            .args(["run", "--config", "exp.toml", "--out", "out"])
            .current_dir(&dir)
            .env_remove("CI")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the binary runs");
        let started = std::time::Instant::now();
        let pids = loop {
            if let Some(p) = fs::read_to_string(dir.join("pids.txt")).ok().filter(|p| p.ends_with('\n')) {
                break p;
            }
            assert!(started.elapsed().as_secs() < 60, "the strategy did not start");
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let pids: Vec<String> = pids.split_whitespace().map(String::from).collect();
        assert_eq!(pids.len(), 2);
        // Busy: asked to compact, it never answers.
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(pids.iter().all(|p| alive(p)));
        let sent = Command::new("kill").args([signal, &child.id().to_string()]).status().expect("kill runs");
        assert!(sent.success());
        let status = child.wait().expect("exits");
        assert_eq!(status.code(), Some(code), "{signal}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pids.iter().any(|p| alive(p)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        for p in &pids {
            assert!(!alive(p), "{signal}: process {p} outlived the run");
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
