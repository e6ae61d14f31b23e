//! `compactlens validate` on good and bad files: messages, summaries and exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_compactlens");

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
    let dir = std::env::temp_dir().join(format!("compactlens-cli-validate-{}-{test}", std::process::id()));
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

/// One case of `tests/bad-inputs/cases.txt`.
#[derive(Debug, Default)]
struct BadInput {
    name: String,
    setup: Vec<String>,
    args: Vec<String>,
    exit: Option<i32>,
    expect: Vec<String>,
    /// Fragments the output must not hold (`unexpected: TEXT`).
    unexpected: Vec<String>,
    absent: Vec<(String, String)>,
    same: Vec<String>,
    /// Pairs of files of the case's folder that must be byte-identical afterwards.
    same_as: Vec<(String, String)>,
    /// Environment variables of the command (`env: NAME VALUE`).
    env: Vec<(String, String)>,
    /// The most bytes the command may print (`max-output: BYTES`).
    max_output: Option<usize>,
}

fn bad_input_cases(text: &str) -> Vec<BadInput> {
    let mut cases: Vec<BadInput> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if let Some(name) = line.strip_prefix("## ") {
            cases.push(BadInput { name: name.trim().to_string(), ..BadInput::default() });
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let case = cases.last_mut().unwrap_or_else(|| panic!("cases.txt:{}: a line before the first case", n + 1));
        let (key, value) =
            line.split_once(": ").unwrap_or_else(|| panic!("cases.txt:{}: expected `key: value`", n + 1));
        match key {
            "args" => case.args = value.split_whitespace().map(String::from).collect(),
            "exit" => case.exit = Some(value.trim().parse().unwrap_or_else(|_| panic!("cases.txt:{}: exit", n + 1))),
            "expect" => case.expect.push(value.to_string()),
            "unexpected" => case.unexpected.push(value.to_string()),
            "setup" => case.setup.push(value.to_string()),
            "same" => case.same.push(value.trim().to_string()),
            "max-output" => {
                case.max_output =
                    Some(value.trim().parse().unwrap_or_else(|_| panic!("cases.txt:{}: max-output", n + 1)))
            }
            "env" => {
                let (name, v) = value.trim().split_once(' ').unwrap_or_else(|| panic!("cases.txt:{}: env", n + 1));
                case.env.push((name.to_string(), v.to_string()));
            }
            "same-as" => {
                let (a, b) = value.trim().split_once(' ').unwrap_or_else(|| panic!("cases.txt:{}: same-as", n + 1));
                case.same_as.push((a.to_string(), b.to_string()));
            }
            "absent-nul" => case.absent.push((value.trim().to_string(), "\0".to_string())),
            "absent" => {
                let (file, text) = value.split_once(' ').unwrap_or_else(|| panic!("cases.txt:{}: absent", n + 1));
                case.absent.push((file.to_string(), text.to_string()));
            }
            other => panic!("cases.txt:{}: unknown key {other:?}", n + 1),
        }
    }
    cases
}

/// Copy `from` into `to`, replacing the URL placeholders in files that are text.
fn copy_fixtures(from: &Path, to: &Path, urls: &[(&str, String)]) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("fixtures") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_fixtures(&entry.path(), &target, urls);
            continue;
        }
        let bytes = std::fs::read(entry.path()).expect("fixture");
        let bytes = match String::from_utf8(bytes) {
            Ok(mut text) => {
                for (placeholder, url) in urls {
                    text = text.replace(placeholder, url);
                }
                text.into_bytes()
            }
            Err(e) => e.into_bytes(),
        };
        std::fs::write(target, bytes).expect("copy");
    }
}

/// Run one setup step in `dir`; a `hold-lock` step returns the lock file it holds (locked
/// until the value is dropped, after the case's command).
fn bad_input_setup(dir: &Path, step: &str) -> Option<std::fs::File> {
    let words: Vec<&str> = step.split_whitespace().collect();
    let path = dir.join(words.get(1).expect("a setup step names a path"));
    match words[0] {
        "fifo" => {
            let ok = Command::new("mkfifo").arg(&path).status().is_ok_and(|s| s.success());
            assert!(ok, "mkfifo {}", path.display());
        }
        "huge-grid" => {
            // Three axes of VALUES values each: VALUES^3 configurations.
            let n: u64 = words[2].parse().expect("values");
            let axis = (0..n).map(|v| (v + 1).to_string()).collect::<Vec<_>>().join(", ");
            let exp = format!(
                "name = \"grid\"\ndatasets = [\"data\"]\nwindows = [8000]\n[[strategy]]\nname = \"keep-last-n\"\n\
                 output_reserve = [{axis}]\nsafety_buffer = [{axis}]\nsummary_max_tokens = [{axis}]\n"
            );
            std::fs::write(path, exp).expect("write");
        }
        "symlink" => {
            let _ = std::fs::remove_file(&path);
            #[cfg(unix)]
            std::os::unix::fs::symlink(dir.join(words[2]), &path).expect("symlink");
        }
        "run" => {
            let args: Vec<&str> = words[1..].to_vec();
            let out = Command::new(BIN).args(&args).current_dir(dir).output().expect("the binary runs");
            assert!(
                out.status.code().is_some_and(|c| c <= 1),
                "setup run {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        "symlink-loop" => {
            #[cfg(unix)]
            std::os::unix::fs::symlink(&path, &path).expect("symlink");
        }
        "huge-line" => {
            let bytes: usize = words[2].parse().expect("bytes");
            let head = r#"{"id": "huge", "messages": [{"role": "user", "content": ""#;
            let tail = "\"}]}";
            let line = format!("{head}{}{tail}\n", "x".repeat(bytes - head.len() - tail.len()));
            std::fs::write(path, line).expect("write");
        }
        "deep" => {
            let depth: usize = words[2].parse().expect("depth");
            std::fs::write(path, format!("{}{}\n", "[".repeat(depth), "]".repeat(depth))).expect("write");
        }
        "non-utf8" => {
            std::fs::write(path, b"{\"id\": \"caf\xe9\", \"messages\": []}\n").expect("write");
        }
        "dir" => std::fs::create_dir_all(path).expect("mkdir"),
        "copy" => {
            std::fs::copy(dir.join(words[1]), dir.join(words[2])).expect("copy");
        }
        "many-tables" => {
            // An experiment of N one-line `[[strategy]]` tables.
            let n: usize = words[2].parse().expect("count");
            let mut exp = String::from("name = \"many\"\ndatasets = [\"data\"]\nwindows = [8000]\n");
            for _ in 0..n {
                exp.push_str("[[strategy]]\n");
            }
            std::fs::write(path, exp).expect("write");
        }
        "long-toml-line" => {
            // A TOML error on one line of BYTES bytes.
            let bytes: usize = words[2].parse().expect("bytes");
            let exp = format!("name = \"long\"\ndatasets = [\"data\"]\nbroken = {}\n", "x".repeat(bytes));
            std::fs::write(path, exp).expect("write");
        }
        "repeat-dataset" => {
            // An experiment listing one dataset N times.
            let n: usize = words[2].parse().expect("count");
            let listing = vec![format!("{:?}", words[3]); n].join(", ");
            let exp =
                format!("name = \"repeat\"\ndatasets = [{listing}]\nwindows = [8000]\n[[strategy]]\nname = \"none\"\n");
            std::fs::write(path, exp).expect("write");
        }
        "hold-lock" => {
            // The OS lock of a run folder, held by this process as a live run holds it.
            let lock = path.join(".compactlens.lock");
            std::fs::write(&lock, "process 77 on test-host").expect("lock file");
            let file = std::fs::OpenOptions::new().write(true).open(&lock).expect("opens");
            file.lock().expect("locks");
            return Some(file);
        }
        "empty" => std::fs::write(path, b"").expect("write"),
        "remove" => std::fs::remove_file(path).expect("remove"),
        "cut" => {
            // Drop the last BYTES bytes.
            let bytes: usize = words[2].parse().expect("bytes");
            let text = std::fs::read(&path).expect("read");
            std::fs::write(&path, &text[..text.len().saturating_sub(bytes)]).expect("write");
        }
        "edit" => {
            // Replace the first FROM with TO.
            let text = std::fs::read_to_string(&path).expect("read");
            assert!(text.contains(words[2]), "edit: no {:?} in {}", words[2], path.display());
            std::fs::write(&path, text.replacen(words[2], words[3], 1)).expect("write");
        }
        "write" => {
            // The rest of the step, as the file's text (`\n` for a newline).
            let text = words[2..].join(" ").replace("\\n", "\n");
            std::fs::write(&path, text).expect("write");
        }
        other => panic!("unknown setup step {other:?}"),
    }
    None
}

/// `path` if it is a file, every file under it if it is a folder, nothing if it is missing.
fn files_under(path: &Path) -> Vec<std::path::PathBuf> {
    if !path.is_dir() {
        return if path.exists() { vec![path.to_path_buf()] } else { Vec::new() };
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).expect("a readable folder") {
        out.extend(files_under(&entry.expect("an entry").path()));
    }
    out.sort();
    out
}

/// Run `args` in `dir`, killing it after `limit`; `None` when it had to be killed.
fn run_limited(
    args: &[String],
    env: &[(String, String)],
    dir: &Path,
    limit: std::time::Duration,
) -> Option<(i32, String)> {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("COMPACTLENS_BAD_INPUTS_KEY", "sk-bad-inputs-key-0000")
        .env_remove("CI")
        .env_remove("GITHUB_STEP_SUMMARY")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let started = std::time::Instant::now();
    loop {
        if child.try_wait().expect("waits").is_some() {
            let out = child.wait_with_output().expect("output");
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            return Some((out.status.code().unwrap_or(-1), text));
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The bad-input suite: every case of `tests/bad-inputs/cases.txt` gives its exit code and
/// message, in a fresh copy of the fixtures, within a minute.
#[test]
fn bad_inputs_suite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad-inputs");
    let cases = bad_input_cases(&std::fs::read_to_string(root.join("cases.txt")).expect("cases.txt"));
    assert!(cases.len() >= 30, "the suite holds {} cases", cases.len());
    let unauthorized = testkit::server::MockServer::start();
    unauthorized.respond_with(|_| testkit::server::Reply::Raw {
        status: 401,
        headers: vec![],
        body: r#"{"error": {"message": "invalid api key", "type": "invalid_request_error"}}"#.into(),
    });
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        format!("http://127.0.0.1:{}", l.local_addr().expect("addr").port())
    };
    // Servers answering every request with one body: an empty answer, a refusal (OpenAI's
    // refusal field), and an echo of the key in four disguises.
    let answering = |message: serde_json::Value, finish: &'static str| {
        let server = testkit::server::MockServer::start();
        let body =
            serde_json::json!({"model": "m", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
            .to_string();
        server.respond_with(move |_| testkit::server::Reply::Raw { status: 200, headers: vec![], body: body.clone() });
        server
    };
    let empty = answering(serde_json::json!({"role": "assistant", "content": "  \n "}), "stop");
    let refusal = answering(
        serde_json::json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}),
        "stop",
    );
    let echo = testkit::server::MockServer::start();
    echo.respond_with(|r| {
        let key = r.header("authorization").unwrap_or_default().trim_start_matches("Bearer ").to_string();
        let spaced: Vec<String> = key.chars().map(String::from).collect();
        let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
        let percent: String = key.bytes().map(|b| format!("%{b:02X}")).collect();
        let html: String = key.bytes().map(|b| format!("&#{b};")).collect();
        let tail: String = key.chars().skip(key.len().saturating_sub(15)).collect();
        let text = format!(
            "Summary: TICKET-1. {} {} {} {} nodash {} tail {tail} hex {hex} url {percent} html {html}",
            key.to_lowercase(),
            key.to_uppercase(),
            key.chars().rev().collect::<String>(),
            spaced.join(" "),
            key.replace('-', "")
        );
        testkit::server::Reply::text(text, 10, 5)
    });
    let urls = [
        ("{closed_url}", closed),
        ("{unauthorized_url}", unauthorized.url()),
        ("{empty_url}", empty.url()),
        ("{refusal_url}", refusal.url()),
        ("{echo_url}", echo.url()),
    ];
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let dir = temp_dir(&format!("bad-{i}"));
        copy_fixtures(&root.join("files"), &dir.0, &urls);
        let held: Vec<std::fs::File> = case.setup.iter().filter_map(|step| bad_input_setup(&dir.0, step)).collect();
        let max_output = case.max_output;
        let Some((code, output)) = run_limited(&case.args, &case.env, &dir.0, std::time::Duration::from_secs(60))
        else {
            failures.push(format!("{}: still running after 60 s", case.name));
            continue;
        };
        drop(held);
        if let Some(max) = max_output {
            if output.len() > max {
                failures.push(format!("{}: {} bytes of output, more than {max}", case.name, output.len()));
            }
        }
        if Some(code) != case.exit {
            failures.push(format!("{}: exit {code}, expected {:?}\n{output}", case.name, case.exit));
        }
        for fragment in &case.expect {
            if !output.contains(fragment.as_str()) {
                failures.push(format!("{}: no {fragment:?} in\n{output}", case.name));
            }
        }
        for fragment in &case.unexpected {
            if output.contains(fragment.as_str()) {
                failures.push(format!("{}: {fragment:?} in\n{output}", case.name));
            }
        }
        for (file, text) in &case.absent {
            // A folder: every file under it.
            let files = files_under(&dir.join(file));
            if files.is_empty() {
                failures.push(format!("{}: {file}: no file there", case.name));
            }
            for path in files {
                match std::fs::read(&path) {
                    Ok(content) if String::from_utf8_lossy(&content).contains(text.as_str()) => {
                        failures.push(format!("{}: {} contains {text:?}", case.name, path.display()))
                    }
                    Ok(_) => {}
                    Err(e) => failures.push(format!("{}: {}: {e}", case.name, path.display())),
                }
            }
        }
        for (a, b) in &case.same_as {
            if std::fs::read(dir.join(a)).ok() != std::fs::read(dir.join(b)).ok() {
                failures.push(format!("{}: {a} is not the same as {b}", case.name));
            }
        }
        for file in &case.same {
            let before = std::fs::read(root.join("files").join(file)).expect("fixture");
            if std::fs::read(dir.join(file)).ok() != Some(before) {
                failures.push(format!("{}: {file} changed", case.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad-input cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
