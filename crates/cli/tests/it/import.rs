//! `compactlens import` and `compactlens probes derive` on the runner's import fixtures:
//! what they print, what they write, and their exit codes; and the check that ends the corpora
//! CI slice (`scripts/corpora.sh check`).

// A test that needs python3 says why it skips.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../dataset/tests/fixtures/import");

/// A fresh folder under the system temp dir, unique to this process and test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("compactlens-cli-import-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir is writable");
        TempDir(dir)
    }
    fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Outcome {
    let out = Command::new(BIN).args(args).output().expect("the binary runs");
    Outcome {
        code: out.status.code().expect("exited normally"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn fixture(rel: &str) -> String {
    Path::new(FIXTURES).join(rel).display().to_string()
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("output written");
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

#[test]
fn import_auto_says_which_format_it_chose_and_writes_a_valid_dataset() {
    let tmp = TempDir::new("auto");
    let out = tmp.join("nested/cc.jsonl");
    let o = run(&["import", &fixture("claude-code/session.jsonl"), "--out", out.to_str().expect("utf-8")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("format claude-code (auto: Claude Code session lines"), "{}", o.stdout);
    assert!(o.stdout.contains("1 conversations; 0 repairs"), "{}", o.stdout);
    let convs = lines(&out);
    assert_eq!(convs.len(), 1);
    assert_eq!(convs[0]["source"], "import/claude-code");
    let v = run(&["validate", out.to_str().expect("utf-8")]);
    assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
}

#[test]
fn import_counts_repairs_and_strict_turns_them_into_located_errors() {
    let tmp = TempDir::new("strict");
    let out = tmp.join("o.jsonl");
    let out_s = out.to_str().expect("utf-8");
    let input = fixture("openai/lines.jsonl");

    let o = run(&["import", "--format", "openai", &input, "--out", out_s]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("2 conversations; 2 repairs (missing_result 1, orphan_result 1)"), "{}", o.stdout);
    assert_eq!(lines(&out).len(), 2);

    let o = run(&["import", "--format", "openai", "--strict", &input, "--out", out_s]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains(
            "lines.jsonl:3: conversation lines/second, field messages[3].tool_call_id: strict: orphan_result"
        ),
        "{}",
        o.stderr
    );
    // The conversation that needed no repair is still written.
    assert_eq!(lines(&out).len(), 1);
    assert!(o.stdout.contains("1 conversations;"), "{}", o.stdout);
}

#[test]
fn import_walks_folders_and_reports_bad_records_without_stopping() {
    let tmp = TempDir::new("folder");
    let out = tmp.join("t.jsonl");
    let o = run(&["import", "--format", "tau-bench", &fixture("tau-bench"), "--out", out.to_str().expect("utf-8")]);
    assert_eq!(o.code, 2, "the robot record is an error");
    assert!(
        o.stderr.contains("results.json:25: conversation results/task4-trial0, field [1].traj[1].role"),
        "{}",
        o.stderr
    );
    assert!(o.stdout.contains("1 repair (reused_call_id 1)"), "{}", o.stdout);
    assert_eq!(lines(&out).len(), 1);

    let o = run(&["import", "--format", "chatml", &fixture("tau-bench"), "--out", out.to_str().expect("utf-8")]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("unknown format \"chatml\""), "{}", o.stderr);
}

#[test]
fn probes_derive_adds_grounded_probes_deterministically() {
    let tmp = TempDir::new("probes");
    let imported = tmp.join("in.jsonl");
    let derived = tmp.join("out.jsonl");
    let again = tmp.join("again.jsonl");
    let o = run(&[
        "import",
        &fixture("tau2/simulations.json"),
        &fixture("mini-swe-agent/fix.traj.json"),
        "--out",
        imported.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // The trajectory ends on its submit call, with no result: in flight, counted, not repaired.
    assert!(o.stdout.contains("2 conversations; 0 repairs; 1 in-flight calls kept;"), "{}", o.stdout);

    let o = run(&["probes", "derive", imported.to_str().expect("utf-8"), "--out", derived.to_str().expect("utf-8")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("2 conversations,") && o.stdout.contains("derived probes (task"), "{}", o.stdout);
    let convs = lines(&derived);
    for c in &convs {
        let probes = c["probes"].as_array().expect("probes");
        assert!(!probes.is_empty(), "{}", c["id"]);
        assert!(probes.iter().all(|p| p["id"].as_str().is_some_and(|id| id.starts_with("derived-"))));
    }
    // The tau2 gold actions' identifying arguments (zip, order, item, payment method) are each
    // tested once, by the critical task probe that asks for them first; names are plain words.
    let probes = convs[0]["probes"].as_array().expect("probes");
    let facts: Vec<&str> = probes
        .iter()
        .flat_map(|p| p["facts"].as_array().into_iter().flatten())
        .flat_map(|f| f.as_array().into_iter().flatten())
        .filter_map(|a| a.as_str())
        .collect();
    for gold in ["10001", "#W100", "555", "paypal_1"] {
        assert_eq!(facts.iter().filter(|f| **f == gold).count(), 1, "gold argument {gold} tested once: {facts:?}");
    }
    assert!(probes.iter().any(|p| p["kind"] == "task" && p["tier"] == "critical"), "{probes:?}");

    // Deriving again from the output replaces the derived probes with the same ones.
    let o = run(&[
        "probes",
        "derive",
        derived.to_str().expect("utf-8"),
        "--out",
        again.to_str().expect("utf-8"),
        "--max-facts",
        "4",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read(&derived).expect("read"), std::fs::read(&again).expect("read"));
    let v = run(&["validate", again.to_str().expect("utf-8")]);
    assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);

    // --probes on import gives the same probes in one step.
    let o = run(&[
        "import",
        "--probes",
        &fixture("tau2/simulations.json"),
        &fixture("mini-swe-agent/fix.traj.json"),
        "--out",
        again.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read(&derived).expect("read"), std::fs::read(&again).expect("read"));
}

/// `scripts/corpora.sh check DIR`: the check the corpora CI slice ends with. A run of every
/// strategy and `recorded` over imported fixtures passes; the same run without `recorded`, or
/// without one dataset's rows for one configuration, fails with exit 1 and says what is missing.
#[test]
fn the_corpora_check_passes_a_complete_run_and_names_what_an_incomplete_one_lacks() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: the corpora check needs python3, which is not installed");
        return;
    }
    let tmp = TempDir::new("corpora-check");
    let data = tmp.join("data");
    for (input, name) in [("claude-code/session.jsonl", "cc.jsonl"), ("tau2/simulations.json", "tau2.jsonl")] {
        let out = data.join(name);
        let o = run(&["import", "--probes", &fixture(input), "--out", out.to_str().expect("utf-8")]);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    let mut strategies: Vec<&str> = vec!["recorded"];
    let o = run(&["strategies", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&o.stdout).expect("strategies --json is JSON");
    // Every strategy but the reference, which the list above already names.
    let names: Vec<String> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter(|s| s["family"] != "reference")
        .map(|s| s["name"].as_str().expect("a name").to_string())
        .collect();
    assert_eq!(names, compaction_strategies::NAMES, "every strategy of the catalog");
    strategies.extend(names.iter().map(String::as_str));
    let mut toml = String::from(
        "name = \"check\"\ndatasets = [\"data\"]\nwindows = [4000, 16000]\ntokenizer = \"o200k_base\"\n\
         cache = \"anthropic\"\nsummarizer = \"offline\"\njudge = \"offline\"\nseed = 42\n",
    );
    for s in &strategies {
        toml.push_str(&format!("\n[[strategy]]\nname = \"{s}\"\n"));
    }
    let experiment = tmp.join("check.toml");
    std::fs::write(&experiment, toml).expect("experiment written");
    let run_dir = tmp.join("run");
    let o = run(&["run", "--config", experiment.to_str().expect("utf-8"), "--out", run_dir.to_str().expect("utf-8")]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/corpora.sh");
    let check = |dir: &Path| {
        let out = Command::new("bash")
            .arg(&script)
            .arg("check")
            .arg(dir)
            .env("COMPACTLENS", BIN)
            .output()
            .expect("bash runs");
        Outcome {
            code: out.status.code().expect("exited normally"),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    let o = check(&run_dir);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    // Every strategy of the catalog and `recorded`.
    let covered = format!("{} strategies x 2 windows x 2 datasets", compaction_strategies::NAMES.len() + 1);
    assert!(o.stdout.contains(&covered), "{}", o.stdout);
    // `recorded` replays only the recording that holds a compaction (the Claude Code session).
    let results_text = std::fs::read_to_string(run_dir.join("results.csv")).expect("results.csv");
    let recorded: Vec<&str> = results_text.lines().filter(|l| l.contains(",recorded,")).collect();
    assert!(!recorded.is_empty() && recorded.iter().all(|l| l.contains(",data/cc.jsonl,")), "{recorded:?}");

    // Without `recorded` in summary.csv.
    let summary = run_dir.join("summary.csv");
    let full = std::fs::read_to_string(&summary).expect("summary.csv");
    let without: String = full.lines().filter(|l| !l.starts_with("recorded-")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&summary, &without).expect("write");
    let o = check(&run_dir);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("strategies missing ['recorded']"), "{}", o.stderr);
    std::fs::write(&summary, &full).expect("write");

    // Without one dataset's rows for one configuration in results.csv.
    let results = run_dir.join("results.csv");
    let text = std::fs::read_to_string(&results).expect("results.csv");
    let dropped: String = text
        .lines()
        .filter(|l| !(l.contains(",data/tau2.jsonl,") && l.contains(",keep-last-n-16k-")))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(dropped.len() < text.len(), "the run has tau2 rows for keep-last-n at 16k");
    std::fs::write(&results, dropped).expect("write");
    let o = check(&run_dir);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("keep-last-n at window 16000"), "{}", o.stderr);
    assert!(o.stderr.contains("on data/tau2.jsonl: 0 rows, 0 ok"), "{}", o.stderr);
}

/// A Claude Code session brings its `<session>/subagents/` files, given as a file or found in a
/// folder: the session, a subagent and a compaction side-call, each its own conversation with
/// its kind, and the compact boundary on the session's summary.
#[test]
fn a_claude_code_session_imports_with_its_subagent_and_compaction_side_call() {
    let tmp = TempDir::new("subagents");
    for (input, name) in [("claude-code/tree/session.jsonl", "file.jsonl"), ("claude-code/tree", "folder.jsonl")] {
        let out = tmp.join(name);
        let o = run(&[
            "import",
            "--strict",
            "--include-compaction-calls",
            &fixture(input),
            "--out",
            out.to_str().expect("utf-8"),
        ]);
        assert_eq!(o.code, 0, "{input}: {}", o.stderr);
        assert!(o.stdout.contains(": 3 conversations; 0 repairs"), "{input}: {}", o.stdout);
        let mut convs = lines(&out);
        // A folder lists `session/` before `session.jsonl`; the order does not matter here.
        convs.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        let got: Vec<(&str, &str, Option<&str>)> = convs
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().expect("an id"),
                    c["meta"]["kind"].as_str().expect("a kind"),
                    c["meta"]["agent_id"].as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("session", "session", None),
                ("session/subagents/agent-a1", "subagent", Some("a1")),
                ("session/subagents/agent-acompact-x", "compaction", Some("acompact-x")),
            ],
            "{input}"
        );
        let session = &convs[0];
        assert_eq!(session["meta"]["recorded_compactions"], 1);
        let carried: Vec<&serde_json::Value> = session["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["meta"]["compact_boundary"].is_object())
            .collect();
        assert_eq!(carried.len(), 1, "{input}");
        assert_eq!(carried[0]["meta"]["compact_summary"], true);
        assert_eq!(
            carried[0]["meta"]["compact_boundary"],
            serde_json::json!({"trigger": "manual", "pre_tokens": 142311})
        );
        let side_call = convs[2]["messages"].as_array().expect("messages");
        assert!(side_call[1]["content"].as_str().expect("text").contains("Summary: the parser is src/config/parse.rs"));
    }
}

/// When nothing imports, an existing `--out` is left whole; `--out` equal to an input (named or
/// found in a folder) is refused for `import` and `probes derive`, and the input is untouched.
#[test]
fn import_and_probes_derive_never_clobber_an_existing_file() {
    let tmp = TempDir::new("clobber");
    let out = tmp.join("out.jsonl");
    let precious = "{\"keep\":\"me\"}\n";
    std::fs::write(&out, precious).expect("writes");
    let junk = tmp.join("junk.jsonl");
    std::fs::write(&junk, "this is not json\n\u{0}\u{1}binary\n").expect("writes");
    let o = run(&["import", junk.to_str().expect("utf-8"), "--out", out.to_str().expect("utf-8")]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("no conversation could be imported;") && o.stderr.contains("is left unchanged"),
        "{}",
        o.stderr
    );
    assert_eq!(std::fs::read_to_string(&out).expect("still there"), precious, "an existing --out is not truncated");

    // --out is the input itself.
    let src = tmp.join("src.jsonl");
    let o = run(&["import", &fixture("tau2/simulations.json"), "--out", src.to_str().expect("utf-8")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let before = std::fs::read(&src).expect("written");
    let o = run(&["import", src.to_str().expect("utf-8"), "--out", src.to_str().expect("utf-8")]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("is also an input"), "{}", o.stderr);
    assert_eq!(std::fs::read(&src).expect("still there"), before);
    // ... or a file inside an input folder.
    let o = run(&["import", tmp.0.to_str().expect("utf-8"), "--out", src.to_str().expect("utf-8")]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("is also an input"), "{}", o.stderr);
    assert_eq!(std::fs::read(&src).expect("still there"), before);

    // probes derive: the input as --out, and an input where nothing loads.
    let o = run(&["probes", "derive", src.to_str().expect("utf-8"), "--out", src.to_str().expect("utf-8")]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("is the input"), "{}", o.stderr);
    assert_eq!(std::fs::read(&src).expect("still there"), before);
    let o = run(&["probes", "derive", junk.to_str().expect("utf-8"), "--out", out.to_str().expect("utf-8")]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("is left unchanged"), "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(&out).expect("still there"), precious);
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(&tmp.0)
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

/// The default experiment's real set (`datasets/real/`) is what `scripts/corpora.sh real`
/// writes: each committed session is, line for line, the import of its upstream log in the
/// shared corpora, and its answer keys are the corpora keys' lines about it. When the importer
/// or the probe derivation changes, this fails until the set is regenerated by that command.
/// Skipped, with the reason, when the shared corpora are absent.
#[test]
fn the_real_set_is_the_import_of_its_sessions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpora = root.join("../shared/corpora");
    if !corpora.is_dir() {
        eprintln!("skipped: no corpora folder at {}", corpora.display());
        return;
    }
    let tmp = TempDir::new("real-set");
    let mut sessions = 0;
    for source in ["claude-code-entire", "claude-code-spotter"] {
        let out = tmp.join(&format!("{source}.jsonl"));
        let o = run(&[
            "import",
            "--format",
            "auto",
            "--probes",
            corpora.join(source).to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let imported: std::collections::HashMap<String, serde_json::Value> =
            lines(&out).into_iter().map(|c| (c["id"].as_str().expect("an id").to_string(), c)).collect();
        let committed = lines(&root.join(format!("datasets/real/{source}.jsonl")));
        assert!(!committed.is_empty(), "{source}: the real set has sessions");
        for c in &committed {
            let id = c["id"].as_str().expect("an id");
            let fresh = imported.get(id).unwrap_or_else(|| panic!("{source}: {id} is not in the import"));
            assert!(
                fresh == c,
                "{source}: {id} differs from its import: regenerate with `scripts/corpora.sh real` (datasets/real/SOURCE.md)"
            );
            sessions += 1;
        }
        // The selection rule: every imported session over 512,000 bytes, and no other.
        let long = std::fs::read_to_string(&out).expect("the import").lines().filter(|l| l.len() + 1 > 512_000).count();
        assert_eq!(long, committed.len(), "{source}: the real set is every session over 512,000 bytes");
        let ids: std::collections::HashSet<&str> = committed.iter().filter_map(|c| c["id"].as_str()).collect();
        let keys = |path: PathBuf| -> Vec<serde_json::Value> { lines(&path) };
        let all = keys(root.join(format!("datasets/keys/corpora/{source}.jsonl")));
        let theirs: Vec<&serde_json::Value> =
            all.iter().filter(|k| k["conversation"].as_str().is_some_and(|c| ids.contains(c))).collect();
        let real = keys(root.join(format!("datasets/keys/real/{source}.jsonl")));
        assert!(!real.is_empty(), "{source}: the real sessions have answer keys");
        assert!(
            real.iter().eq(theirs.into_iter()),
            "{source}: the real keys are the corpora keys about these sessions"
        );
    }
    assert_eq!(sessions, 15, "datasets/real/SOURCE.md lists 15 sessions");
}
