//! What a tool call touches: the files a file tool or a shell command reads or writes (and
//! the symbol an edit changes), the command of a shell call.

use serde_json::Value;

use super::{clip, work};

pub(super) fn basename(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or(path)
}

/// Two paths name the same file when one ends with the other at a `/` boundary.
pub(crate) fn same_file(a: &str, b: &str) -> bool {
    let a = a.trim_start_matches("./");
    let b = b.trim_start_matches("./");
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    long == short || (long.ends_with(short) && long[..long.len() - short.len()].ends_with('/'))
}

/// How a call touched a file; the order is the strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verb {
    Read,
    Edit,
    Write,
}

impl Verb {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Verb::Read => "read",
            Verb::Edit => "edit",
            Verb::Write => "write",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Touch {
    pub(crate) path: String,
    pub(crate) verb: Verb,
    pub(super) tool: String,
    pub(super) hint: Option<String>,
    /// The symbol a change defines or touches (edits and writes only).
    pub(super) symbol: Option<String>,
    /// The message of the call, and the first message that touched the path: both set by
    /// the caller, which sees the whole conversation.
    pub(super) message: usize,
    pub(super) first: usize,
}

const PATH_KEYS: [&str; 7] = ["file_path", "path", "notebook_path", "filename", "file", "target_file", "filepath"];
const TEXT_KEYS: [&str; 5] = ["new_string", "new_str", "content", "file_text", "new_source"];

/// The files one call touches.
pub(crate) fn touches(tool: &str, arguments: &str) -> Vec<Touch> {
    let Ok(args) = serde_json::from_str::<Value>(arguments) else { return Vec::new() };
    let lower = tool.to_ascii_lowercase();
    let touch = |path: &str, verb, hint| Touch {
        path: path.to_string(),
        verb,
        tool: tool.to_string(),
        hint,
        symbol: None,
        message: 0,
        first: 0,
    };
    let mut out = Vec::new();
    if let Some(path) = PATH_KEYS.iter().find_map(|k| args.get(*k).and_then(Value::as_str)).filter(|p| is_path(p)) {
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        let verb = if command == "create" || lower.contains("write") || lower.contains("create") {
            Verb::Write
        } else if ["str_replace", "insert", "undo_edit"].contains(&command)
            || ["edit", "replace", "patch", "insert", "update"].iter().any(|w| lower.contains(w)) && command != "view"
        {
            Verb::Edit
        } else {
            Verb::Read
        };
        let hint = TEXT_KEYS
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
            .and_then(|t| t.lines().map(str::trim).find(|l| l.chars().count() >= 4))
            .map(|l| format!("its new text includes \"{}\"", clip(l, 50)));
        let mut t = touch(path, verb, if verb == Verb::Read { None } else { hint });
        if verb != Verb::Read {
            let text = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
            let new = TEXT_KEYS.iter().map(|k| text(k)).find(|t| !t.is_empty()).unwrap_or("");
            let old = ["old_string", "old_str"].iter().map(|k| text(k)).find(|t| !t.is_empty()).unwrap_or("");
            t.symbol = work::edit_symbol(old, new);
        }
        out.push(t);
        return out;
    }
    if let Some(cmd) = command_of(arguments) {
        for (path, verb) in shell_files(&cmd) {
            let first_line = cmd.lines().next().unwrap_or_default();
            let hint = Some(format!("command `{}`", clip(&first_line.replace(&path, "…"), 60)));
            out.push(touch(&path, verb, hint));
        }
    }
    out
}

/// The shell command of a call's arguments (`command`, or `cmd`), if any.
pub(super) fn command_of(arguments: &str) -> Option<String> {
    let args: Value = serde_json::from_str(arguments).ok()?;
    ["command", "cmd"].iter().find_map(|k| args.get(*k).and_then(Value::as_str)).map(str::to_string)
}

pub(super) fn is_path(token: &str) -> bool {
    let t = token.trim();
    if t.is_empty() || t.len() > 200 || t.contains("://") || t.starts_with('-') {
        return false;
    }
    if t.chars().any(|c| c.is_whitespace() || "*$`'\"<>|;&(){}=".contains(c)) {
        return false;
    }
    let base = basename(t);
    let ext = base.rsplit_once('.').map(|(stem, ext)| {
        // `13.84s` is a duration: a file's stem or extension has a letter.
        !stem.is_empty()
            && (1..=5).contains(&ext.len())
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && (stem.chars().any(char::is_alphabetic) || ext.chars().all(char::is_alphabetic))
    });
    ext == Some(true) && base.chars().any(|c| c.is_alphabetic())
}

/// Programs whose path arguments are read.
pub(super) const READERS: [&str; 10] = ["cat", "head", "tail", "less", "more", "nl", "open", "view", "bat", "wc"];
/// Programs whose path arguments are written.
const WRITERS: [&str; 3] = ["touch", "create", "tee"];

/// The files a shell command reads or writes, as far as simple rules tell.
pub(super) fn shell_files(cmd: &str) -> Vec<(String, Verb)> {
    let mut out: Vec<(String, Verb)> = Vec::new();
    let add = |p: &str, v: Verb, out: &mut Vec<(String, Verb)>| {
        let p = p.trim_matches(|c| c == '"' || c == '\'');
        if is_path(p) && !out.iter().any(|(x, _)| x == p) {
            out.push((p.to_string(), v));
        }
    };
    // Only the first line: heredoc bodies and scripts are not commands.
    let first = cmd.lines().next().unwrap_or("");
    for segment in first.split(['|', ';', '&']) {
        let words: Vec<&str> = segment.split_whitespace().collect();
        let Some(&program) = words.first() else { continue };
        let program = basename(program);
        for (k, w) in words.iter().enumerate() {
            if *w == ">" || *w == ">>" {
                if let Some(target) = words.get(k + 1) {
                    add(target, Verb::Write, &mut out);
                }
            } else if let Some(target) = w.strip_prefix(">>").or_else(|| w.strip_prefix('>')) {
                add(target, Verb::Write, &mut out);
            }
        }
        let args = words.iter().skip(1).filter(|w| !w.starts_with('-') && !w.starts_with('>'));
        match program {
            "sed" if words.iter().any(|w| w.starts_with("-i")) => {
                if let Some(last) = words.last() {
                    add(last, Verb::Edit, &mut out);
                }
            }
            "cp" | "mv" => {
                if let Some(last) = words.last() {
                    add(last, Verb::Write, &mut out);
                }
            }
            p if WRITERS.contains(&p) => args.for_each(|w| add(w, Verb::Write, &mut out)),
            p if READERS.contains(&p) || p == "sed" || p == "grep" => args.for_each(|w| add(w, Verb::Read, &mut out)),
            _ => {}
        }
    }
    out
}
