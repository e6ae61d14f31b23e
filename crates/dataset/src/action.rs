//! What a recorded action needs: the identifiers in an assistant message's tool calls (or in
//! its reply), the files a call reads or changes, and whether a tool result reports a failure.
//! The replay's next-action readiness (`runner::replay`) reads a recording with these; they
//! use the probe derivation's own rules ([`crate::probes::is_id`], its file and error readers),
//! so an identifier here is what a probe would take for one.
//!
//! ```
//! use compaction::{Message, ToolCall};
//! use dataset::action::{action_identifiers, identifiers};
//!
//! let edit = Message::assistant_calls(
//!     "",
//!     vec![ToolCall {
//!         id: "c1".into(),
//!         name: "Edit".into(),
//!         arguments: r#"{"file_path": "src/parser/lexer.rs", "old_string": "a", "new_string": "b"}"#.into(),
//!     }],
//! );
//! assert_eq!(action_identifiers(&edit), vec!["src/parser/lexer.rs".to_string()]);
//! assert_eq!(identifiers("see ticket HAT-1234 and order #W2378156."), vec!["HAT-1234", "#W2378156"]);
//! ```

use std::collections::HashSet;

use compaction::{Message, ToolCall};
use serde_json::Value;

use crate::probes::{self, Verb};

/// The identifiers of `text` ([`probes::is_id`]: ids, hashes, paths, URLs, error codes), each
/// once, in order of first occurrence; a path with a line number (`src/a.rs:42:7`, as grep and
/// compilers print it) is the path.
pub fn identifiers(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    probes::tokens(text)
        .into_iter()
        .map(|(_, t, _)| without_line(&t).to_string())
        .filter(|t| probes::is_id(t) && seen.insert(t.clone()))
        .collect()
}

/// `path:42` or `path:42:7` without the line and column.
fn without_line(t: &str) -> &str {
    let mut head = t;
    for _ in 0..2 {
        match head.rsplit_once(':') {
            Some((h, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) && !h.contains("://") => head = h,
            _ => break,
        }
    }
    head
}

/// The identifiers an assistant message's action uses: for each tool call, every string
/// argument that is an identifier as a whole (a `file_path`), then the identifiers inside the
/// others (a command line); with no tool call, the identifiers of its reply text. The tool's
/// name is not one (it comes from the tool definitions), nor a number argument (a timeout of
/// `60000` is a setting of the tool, not something learned from the conversation).
pub fn action_identifiers(m: &Message) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |t: String| {
        if !out.contains(&t) {
            out.push(t);
        }
    };
    if m.tool_calls.is_empty() {
        identifiers(&m.content).into_iter().for_each(&mut push);
        return out;
    }
    for call in &m.tool_calls {
        let mut values = Vec::new();
        match serde_json::from_str::<Value>(&call.arguments) {
            Ok(v) => strings(&v, &mut values),
            Err(_) => values.push(call.arguments.clone()),
        }
        for v in values {
            let whole = v.trim();
            if probes::is_id(whole) {
                push(whole.to_string());
            } else {
                identifiers(whole).into_iter().for_each(&mut push);
            }
        }
    }
    out
}

/// The string values of a JSON value, in order.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|x| strings(x, out)),
        Value::Object(map) => map.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The identifiers of a message as a history holds them: those of its text and tool calls,
/// and for a path each shorter path it ends with (`/repo/src/a.rs` also as `src/a.rs` and
/// `a.rs`), so an action that names a file relative to where an earlier message named it
/// absolutely is found in that message.
pub fn history_identifiers(m: &Message) -> Vec<String> {
    let mut out = identifiers(&crate::text::render_message(m));
    if !m.tool_calls.is_empty() {
        let mut whole = action_identifiers(m);
        whole.retain(|t| !out.contains(t));
        out.extend(whole);
    }
    let suffixes: Vec<String> = out.iter().flat_map(|t| shorter_paths(t)).collect();
    out.extend(suffixes);
    out
}

/// The shorter paths `t` ends with at a `/` boundary that are still identifiers
/// (`/repo/src/a.rs`: `repo/src/a.rs`, `src/a.rs`, `a.rs`), longest first; none for a URL or
/// a token without `/`. A recording without its system prompt does not say the working
/// directory: an absolute path an action uses is the relative one a summary names.
pub fn shorter_paths(t: &str) -> Vec<String> {
    let mut out = Vec::new();
    if t.contains("://") {
        return out;
    }
    let mut rest = t;
    while let Some((_, tail)) = rest.split_once('/') {
        if !tail.is_empty() && probes::is_id(tail) {
            out.push(tail.to_string());
        }
        rest = tail;
    }
    out
}

/// How a call uses a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileUse {
    /// It reads the file (its output is the file's content).
    Read,
    /// It edits or writes the file.
    Change,
}

/// The files a tool call reads or changes, as far as the derivation's rules tell (a path
/// argument with the tool's verb, `cat`/`sed -n`/`head` and redirections of a command).
pub fn file_uses(call: &ToolCall) -> Vec<(String, FileUse)> {
    probes::touches(&call.name, &call.arguments)
        .into_iter()
        .map(|t| (t.path, if t.verb == Verb::Read { FileUse::Read } else { FileUse::Change }))
        .collect()
}

/// Two paths name the same file when one ends with the other at a `/` boundary.
pub fn same_file(a: &str, b: &str) -> bool {
    probes::same_file(a, b)
}

/// The line of `result` (the output of `call`) that reports its failure: flagged as an error,
/// or an output that states one (a traceback, `error:`, `command not found`, ...); outputs of
/// calls that only read files are failures only when flagged. A call the user refused is not a
/// failure. `None` when it did not fail.
pub fn failure(call: &ToolCall, result: &Message) -> Option<String> {
    if probes::is_rejection(&result.content) {
        return None;
    }
    let reads = probes::reads_files(&call.name, &call.arguments);
    probes::error_line(&result.content, result.is_error, reads).or_else(|| {
        // A flagged result with no informative line is still a failure.
        result.is_error.then(|| result.content.lines().next().unwrap_or_default().trim().to_string())
    })
}

/// Two calls with the same tool and the same arguments (as JSON values: key order and
/// spacing do not matter).
pub fn same_call(a: &ToolCall, b: &ToolCall) -> bool {
    if a.name != b.name {
        return false;
    }
    match (serde_json::from_str::<Value>(&a.arguments), serde_json::from_str::<Value>(&b.arguments)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.arguments.trim() == b.arguments.trim(),
    }
}

/// Whether a proposed action agrees with a reference action, both assistant messages: for a
/// reference that calls tools, the proposal calls one of the same name (ASCII case aside)
/// whose arguments hold every identifier that reference call uses ([`action_identifiers`] of
/// it alone: its paths, ids, hashes, URLs; a number argument or free text is not a key
/// argument), a path also as a longer or shorter form of it ([`same_file`]); for a reply, the
/// proposal is a reply that holds every identifier of the reference's text. A reference call
/// whose arguments hold no identifier agrees on its name alone. Agreement with any one of a
/// reference's parallel calls is agreement.
///
/// ```
/// use compaction::{Message, ToolCall};
/// use dataset::action::agrees;
///
/// let call = |name: &str, args: &str| {
///     Message::assistant_calls("", vec![ToolCall { id: "c".into(), name: name.into(), arguments: args.into() }])
/// };
/// let recorded = call("Read", r#"{"file_path": "/repo/src/lexer.rs", "limit": 200}"#);
/// assert!(agrees(&recorded, &call("read", r#"{"file_path": "src/lexer.rs"}"#)));
/// assert!(!agrees(&recorded, &call("Read", r#"{"file_path": "src/parser.rs"}"#)));
/// assert!(!agrees(&recorded, &Message::assistant("I will read src/lexer.rs.")));
/// ```
pub fn agrees(reference: &Message, proposed: &Message) -> bool {
    if reference.tool_calls.is_empty() {
        if !proposed.tool_calls.is_empty() {
            return false;
        }
        let held = identifiers(&proposed.content);
        return identifiers(&reference.content).iter().all(|t| holds_id(&held, t));
    }
    reference.tool_calls.iter().any(|r| {
        let needed = action_identifiers(&Message::assistant_calls("", vec![r.clone()]));
        proposed.tool_calls.iter().filter(|p| p.name.eq_ignore_ascii_case(&r.name)).any(|p| {
            let held = action_identifiers(&Message::assistant_calls("", vec![p.clone()]));
            needed.iter().all(|t| holds_id(&held, t))
        })
    })
}

/// `t` is among `held`, a path also as a longer or shorter form of it.
fn holds_id(held: &[String], t: &str) -> bool {
    held.iter().any(|h| h == t || ((h.contains('/') || t.contains('/')) && same_file(h, t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall { id: "c".into(), name: name.into(), arguments: args.to_string() }
    }

    #[test]
    fn an_action_needs_its_paths_ids_and_the_ids_of_its_command() {
        let m = Message::assistant_calls(
            "",
            vec![call("Bash", serde_json::json!({"command": "pytest tests/test_parser.py -k test_lexer_42"}))],
        );
        assert_eq!(action_identifiers(&m), vec!["tests/test_parser.py", "test_lexer_42"]);
        let timed =
            Message::assistant_calls("", vec![call("Bash", serde_json::json!({"command": "make", "timeout": 60000}))]);
        assert!(action_identifiers(&timed).is_empty(), "a number argument is a setting");
        let reply = Message::assistant("Your reservation Q69X3R is confirmed.");
        assert_eq!(action_identifiers(&reply), vec!["Q69X3R"]);
        assert_eq!(identifiers("src/a.rs:42:7: error"), vec!["src/a.rs"]);
        assert!(action_identifiers(&Message::assistant("Done, thank you.")).is_empty());
    }

    #[test]
    fn a_history_holds_a_path_also_by_its_shorter_forms() {
        let m = Message::tool_result("c", "Read", "contents of /repo/src/parser/lexer.rs");
        let ids = history_identifiers(&m);
        for t in ["/repo/src/parser/lexer.rs", "repo/src/parser/lexer.rs", "src/parser/lexer.rs", "lexer.rs"] {
            assert!(ids.iter().any(|i| i == t), "{t} in {ids:?}");
        }
    }

    #[test]
    fn agreement_is_the_tool_and_its_key_arguments() {
        let bash = |cmd: &str| Message::assistant_calls("", vec![call("Bash", serde_json::json!({"command": cmd}))]);
        let recorded = bash("pytest tests/test_parser.py -k test_lexer_42");
        assert!(agrees(&recorded, &bash("python -m pytest tests/test_parser.py -k test_lexer_42 -x")));
        assert!(!agrees(&recorded, &bash("pytest tests/test_parser.py")), "the test's id is a key argument");
        assert!(agrees(&bash("make"), &bash("make test")), "no identifier: the tool alone");
        let two = Message::assistant_calls(
            "",
            vec![
                call("Read", serde_json::json!({"file_path": "a.rs"})),
                call("Grep", serde_json::json!({"pattern": "x"})),
            ],
        );
        assert!(agrees(&two, &Message::assistant_calls("", vec![call("grep", serde_json::json!({"pattern": "y"}))])));
        let reply = Message::assistant("Your reservation Q69X3R is confirmed.");
        assert!(agrees(&reply, &Message::assistant("Done: Q69X3R is booked.")));
        assert!(!agrees(&reply, &Message::assistant("Done.")));
        assert!(!agrees(&reply, &bash("echo Q69X3R")));
        assert!(agrees(&Message::assistant("Done, thank you."), &Message::assistant("Anything else?")));
    }

    #[test]
    fn files_failures_and_repeats() {
        let read = call("Read", serde_json::json!({"file_path": "src/a.rs"}));
        let edit = call("Edit", serde_json::json!({"file_path": "src/a.rs", "old_string": "x", "new_string": "y"}));
        assert_eq!(file_uses(&read), vec![("src/a.rs".to_string(), FileUse::Read)]);
        assert_eq!(file_uses(&edit), vec![("src/a.rs".to_string(), FileUse::Change)]);
        let test = call("Bash", serde_json::json!({"command": "cargo test"}));
        let failed = Message::tool_result("c", "Bash", "error[E0425]: cannot find value `x` in this scope");
        assert!(failure(&test, &failed).is_some());
        assert!(failure(&test, &Message::tool_result("c", "Bash", "test result: ok. 3 passed")).is_none());
        let spaced = ToolCall { arguments: "{ \"command\" : \"cargo test\" }".into(), ..test.clone() };
        assert!(same_call(&test, &spaced));
        assert!(!same_call(&test, &read));
        assert!(same_file("/repo/src/a.rs", "src/a.rs") && !same_file("src/a.rs", "src/ba.rs"));
    }
}
