//! `compactbench import` and `compactbench probes derive` on the runner's import fixtures:
//! what they print, what they write, and their exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_compactbench");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../runner/tests/fixtures/import");

/// A fresh folder under the system temp dir, unique to this process and test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("compactbench-cli-import-{}-{test}", std::process::id()));
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

    let o = run(&["probes", "derive", imported.to_str().expect("utf-8"), "--out", derived.to_str().expect("utf-8")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("2 conversations,") && o.stdout.contains("derived probes (task"), "{}", o.stdout);
    let convs = lines(&derived);
    for c in &convs {
        let probes = c["probes"].as_array().expect("probes");
        assert!(!probes.is_empty(), "{}", c["id"]);
        assert!(probes.iter().all(|p| p["id"].as_str().is_some_and(|id| id.starts_with("derived-"))));
    }
    let gold = convs[0]["probes"].as_array().expect("probes").iter().filter(|p| p["kind"] == "decision").count();
    assert_eq!(gold, 2, "both tau2 gold actions are found in the conversation");

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
