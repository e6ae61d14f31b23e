//! `compactbench validate` on good and bad files: messages, summaries and exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_compactbench");

/// A fresh folder under the system temp dir, unique to this process and test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(test: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("compactbench-cli-validate-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    TempDir(dir)
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn validate(args: &[&Path], extra: &[&str]) -> Outcome {
    let out = Command::new(BIN).arg("validate").args(extra).args(args).output().expect("the binary runs");
    Outcome {
        code: out.status.code().expect("exited normally"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Write `bytes` to `dir/name` and validate that one file.
fn validate_bytes(dir: &TempDir, name: &str, bytes: &[u8], extra: &[&str]) -> (PathBuf, Outcome) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write fixture");
    let out = validate(&[&path], extra);
    (path, out)
}

const GOOD: &str = concat!(
    r#"{"id":"g1","messages":["#,
    r#"{"role":"system","content":"You are a coding agent."},"#,
    r#"{"role":"user","content":"Fix the failing test."},"#,
    r#"{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"read_file","arguments":"{\"path\":\"a.rs\"}"}]},"#,
    r#"{"role":"tool","tool_call_id":"c1","name":"read_file","content":"fn main() {}"},"#,
    r#"{"role":"assistant","content":"Fixed."}],"#,
    r#""probes":[{"id":"p1","kind":"artifact","question":"Which file was read?","answer":"a.rs","facts":[["a.rs"]],"source_message":2}]}"#,
);

fn line_of(outcome: &Outcome, needle: &str) -> String {
    outcome.stderr.lines().find(|l| l.contains(needle)).map(String::from).unwrap_or_else(|| {
        panic!("no stderr line contains {needle:?}; stderr was:\n{}", outcome.stderr);
    })
}

#[test]
fn a_good_file_passes_with_exit_code_0_and_a_summary() {
    let dir = temp_dir("good");
    let text = format!("{GOOD}\n\n{}\n", GOOD.replace("\"g1\"", "\"g2\""));
    let (path, out) = validate_bytes(&dir, "good.jsonl", text.as_bytes(), &[]);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout, format!("{}: 2 conversations, 10 messages, 2 probes, 0 problems\n", path.display()));
}

#[test]
fn malformed_json_names_file_line_and_column() {
    let dir = temp_dir("malformed");
    let text = format!("{GOOD}\n{{\"id\": \"x\", \"messages\": [}}\n");
    let (path, out) = validate_bytes(&dir, "bad.jsonl", text.as_bytes(), &[]);
    assert_eq!(out.code, 2);
    assert_eq!(
        line_of(&out, "malformed"),
        format!("{}:2: malformed JSON at column 26: expected value", path.display())
    );
    assert_eq!(out.stdout, format!("{}: 1 conversation, 5 messages, 1 probe, 1 problem\n", path.display()));
}

#[test]
fn unknown_role_names_the_role_and_the_allowed_ones() {
    let dir = temp_dir("role");
    let text = GOOD.replace(r#""role":"user""#, r#""role":"human""#);
    let (path, out) = validate_bytes(&dir, "role.jsonl", text.as_bytes(), &[]);
    assert_eq!(out.code, 2);
    assert_eq!(
        line_of(&out, "unknown role"),
        format!(
            "{}:1: conversation g1, message 1, field role: unknown role \"human\" (allowed: system, user, assistant, tool)",
            path.display()
        )
    );
}

#[test]
fn orphan_tool_result_is_located() {
    let dir = temp_dir("orphan");
    let text = GOOD.replace(r#""tool_call_id":"c1""#, r#""tool_call_id":"c9""#);
    let (path, out) = validate_bytes(&dir, "orphan.jsonl", text.as_bytes(), &[]);
    assert_eq!(out.code, 2);
    assert_eq!(
        line_of(&out, "no tool call before it"),
        format!(
            "{}:1: conversation g1, message 3, field tool_call_id: tool result for call \"c9\" has no tool call before it",
            path.display()
        )
    );
    // Its call is then unanswered, and that is reported too.
    assert!(out.stderr.contains(r#"message 2, field tool_calls[0].id: tool call "c1" has no tool result"#));
}

#[test]
fn unanswered_tool_call_is_located() {
    let dir = temp_dir("unanswered");
    let text = GOOD.replace(
        r#"{"role":"tool","tool_call_id":"c1","name":"read_file","content":"fn main() {}"},"#,
        r#"{"role":"user","content":"go on"},"#,
    );
    let (path, out) = validate_bytes(&dir, "unanswered.jsonl", text.as_bytes(), &[]);
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        format!(
            "{}:1: conversation g1, message 2, field tool_calls[0].id: tool call \"c1\" has no tool result\n",
            path.display()
        )
    );
}

#[test]
fn empty_content_is_reported_per_role() {
    let dir = temp_dir("empty-content");
    let text = GOOD
        .replace(r#""content":"Fix the failing test.""#, r#""content":"""#)
        .replace(r#""content":"Fixed.""#, r#""content":" ""#);
    let (path, out) = validate_bytes(&dir, "empty.jsonl", text.as_bytes(), &[]);
    assert_eq!(out.code, 2);
    let p = path.display();
    assert_eq!(
        out.stderr,
        format!(
            "{p}:1: conversation g1, message 1, field content: empty content: a user message needs text\n\
             {p}:1: conversation g1, message 4, field content: empty assistant message: it needs content or tool calls\n"
        )
    );
    assert!(out.stdout.ends_with("2 problems\n"), "{}", out.stdout);
}

#[test]
fn non_utf8_bytes_are_reported_with_their_byte_offset() {
    let dir = temp_dir("utf8");
    let mut bytes = format!("{GOOD}\n").into_bytes();
    let offset = bytes.len() + 4; // `{"id` comes first
    bytes.extend_from_slice(b"{\"id\xff\":\"x\"}\n");
    let (path, out) = validate_bytes(&dir, "latin1.jsonl", &bytes, &[]);
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        format!("{}:2: invalid UTF-8 at byte offset {offset} of the file (line byte 5)\n", path.display())
    );
}

#[test]
fn an_over_long_line_is_reported_and_the_rest_loads() {
    let dir = temp_dir("long");
    let long = format!(r#"{{"id":"big","messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(5_000));
    let text = format!("{long}\n{GOOD}\n");
    let (path, out) = validate_bytes(&dir, "long.jsonl", text.as_bytes(), &["--max-line-bytes", "4096"]);
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        format!(
            "{}:1: line is {} bytes long, over the limit of 4096 bytes (raise it with --max-line-bytes)\n",
            path.display(),
            long.len()
        )
    );
    assert_eq!(out.stdout, format!("{}: 1 conversation, 5 messages, 1 probe, 1 problem\n", path.display()));
    // With a higher limit the same file is clean.
    let out = validate(&[&path], &["--max-line-bytes", "8192"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn empty_file_missing_file_and_folders() {
    let dir = temp_dir("folders");
    std::fs::create_dir_all(dir.join("set/sub")).expect("mkdir");
    std::fs::write(dir.join("set/a.jsonl"), format!("{GOOD}\n")).expect("write");
    std::fs::write(dir.join("set/sub/b.jsonl"), "").expect("write");
    std::fs::write(dir.join("set/sub/ignored.txt"), "{").expect("write");
    std::fs::create_dir_all(dir.join("nothing")).expect("mkdir");
    let missing = dir.join("missing.jsonl");
    let out = validate(&[&dir.join("set"), &dir.join("nothing"), &missing], &[]);
    assert_eq!(out.code, 2);
    let a = dir.join("set").join("a.jsonl");
    let b = dir.join("set").join("sub").join("b.jsonl");
    assert_eq!(
        out.stdout,
        format!(
            "{}: 1 conversation, 5 messages, 1 probe, 0 problems\n\
             {}: 0 conversations, 0 messages, 0 probes, 1 problem\n\
             {}: 0 conversations, 0 messages, 0 probes, 1 problem\n",
            a.display(),
            b.display(),
            missing.display()
        )
    );
    assert!(line_of(&out, "empty file").starts_with(&format!("{}: empty file", b.display())));
    assert_eq!(
        line_of(&out, "no *.jsonl"),
        format!("{}: no *.jsonl files in this folder", dir.join("nothing").display())
    );
    assert!(line_of(&out, "cannot read").starts_with(&format!("{}: cannot read: ", missing.display())));
}

#[test]
fn no_arguments_is_a_usage_error() {
    let out = Command::new(BIN).arg("validate").output().expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FILE"));
}
