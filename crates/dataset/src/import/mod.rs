//! Importers: recorded agent sessions in public formats, turned into the project's
//! conversations.
//!
//! One module per format parses a file into draft conversations, each message located in the
//! file (line and JSON path); one shared [`repair`] pass then fixes what breaks the
//! conversation format and reports every fix. [`import`] expands folders, picks or sniffs the
//! format of each file ([`sniff`], for `--format auto`), and never stops at a bad file or a bad
//! record: every problem is an [`ImportError`] naming file, line and field, and the rest goes on.
//!
//! | format | files | conversation id |
//! |---|---|---|
//! | `openai` | a chat-completions message list, `{messages: [...]}`, or JSONL of either | file key, `/line<N>` or the record's `id` for several |
//! | `anthropic` | Messages API lists (`text`, `tool_use`, `tool_result` blocks), `{system, messages}`, or JSONL of either | as `openai` |
//! | `claude-code` | Claude Code session JSONL; `<session>/subagents/agent-*.jsonl` beside it are imported too | file key |
//! | `mini-swe-agent` | `*.traj.json` (trajectory format 1.x, tool-calling) | file key |
//! | `swe-agent` | `*.traj`: `history`, function-calling or text-action | file key |
//! | `openhands` | evaluation output JSONL, one event stream (`history`) per line | file key `/` instance id |
//! | `tau-bench` | a JSON array of `{task_id, trial, traj, info}` | file key `/task<T>-trial<N>` |
//! | `tau2` | a simulation file `{info, tasks, simulations}` | file key `/task<T>-trial<N>` |
//!
//! The file key is the file's path relative to the folder given on the command line (its
//! name when a file is given), without its extension (`.jsonl`, `.json`, `.traj`, `.traj.json`).
//!
//! Metadata the importers set. On messages: `synthetic` (a placeholder result added by the
//! repair pass), `injected` (text the agent harness injected, not typed by a person: Claude
//! Code's `isMeta` lines, task notifications, interrupt markers; OpenHands loop errors),
//! `compact_summary` (the summary Claude Code inserted after compacting), `compact_boundary`
//! (on that summary only: `{trigger, pre_tokens}` of the recorded compaction), `queued` (a message
//! the user typed while Claude Code was busy, delivered before its next call), `demo` (a
//! SWE-agent in-context demonstration). On conversations: `format`, `file`, and where the
//! format has them `gold_actions` (`[{name, arguments}]`: tau-bench `info.task.actions`, tau2
//! `evaluation_criteria.actions`), `submission` (the final patch or answer), `kind`
//! (`session`, `subagent`, `compaction` for Claude Code), `task_id`, `trial`, `reward`,
//! `instance_id`, `exit_status`, `session_id`, `agent_id`, `recorded_compactions`.
//!
//! ```
//! use dataset::import::{import_str, Format, FormatChoice, ImportOptions};
//!
//! let text = r#"[{"role":"user","content":"hi"},
//!   {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},
//!   {"role":"assistant","content":"done"}]"#;
//! let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
//! let out = import_str(text, "chat.json".as_ref(), "chat", &options);
//! assert_eq!(out.format, Some(Format::Openai));
//! let conv = &out.conversations[0];
//! assert_eq!(conv.id, "chat");
//! // The call had no result: a placeholder was added, and counted.
//! assert!(conv.messages[2].meta_flag("synthetic"));
//! assert_eq!(out.report.total(), 1);
//!
//! let strict = ImportOptions { format: FormatChoice::Auto, strict: true, include_compaction_calls: false };
//! let out = import_str(text, "chat.json".as_ref(), "chat", &strict);
//! assert!(out.conversations.is_empty());
//! assert_eq!(out.errors[0].to_string(), "chat.json:2: conversation chat, field [1].tool_calls[0].id: \
//!     strict: missing_result: call \"c1\" (ls) has no result; placeholder result added");
//! ```

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use compaction::{Conversation, Message};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod anthropic;
mod claude_code;
mod json;
mod mini_swe_agent;
mod openai;
mod openhands;
pub mod repair;
pub mod source;
mod swe_agent;
mod tau2;
mod tau_bench;

pub use claude_code::{is_harness_text, CLAUDE_WINDOW};
pub use repair::{Repair, RepairKind, RepairReport, PLACEHOLDER_RESULT};
pub use source::{At, Field, Step};

/// The formats `compactlens import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Openai,
    Anthropic,
    ClaudeCode,
    MiniSweAgent,
    SweAgent,
    Openhands,
    TauBench,
    Tau2,
}

impl Format {
    pub const ALL: [Format; 8] = [
        Format::Openai,
        Format::Anthropic,
        Format::ClaudeCode,
        Format::MiniSweAgent,
        Format::SweAgent,
        Format::Openhands,
        Format::TauBench,
        Format::Tau2,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Format::Openai => "openai",
            Format::Anthropic => "anthropic",
            Format::ClaudeCode => "claude-code",
            Format::MiniSweAgent => "mini-swe-agent",
            Format::SweAgent => "swe-agent",
            Format::Openhands => "openhands",
            Format::TauBench => "tau-bench",
            Format::Tau2 => "tau2",
        }
    }
    /// The conversations' `source`: `import/<format>`.
    pub fn source(self) -> String {
        format!("import/{}", self.name())
    }
    fn parse_file(self, text: &str, file: &FileCtx) -> Vec<Result<Draft, Located>> {
        match self {
            Format::Openai => openai::parse(text, file),
            Format::Anthropic => anthropic::parse(text, file),
            Format::ClaudeCode => claude_code::parse(text, file),
            Format::MiniSweAgent => mini_swe_agent::parse(text, file),
            Format::SweAgent => swe_agent::parse(text, file),
            Format::Openhands => openhands::parse(text, file),
            Format::TauBench => tau_bench::parse(text, file),
            Format::Tau2 => tau2::parse(text, file),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            format!("unknown format {s:?} (known: auto, {})", names.join(", "))
        })
    }
}

/// A format, or `auto` to sniff each file's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatChoice {
    Auto,
    Exact(Format),
}

impl FromStr for FormatChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<FormatChoice, String> {
        if s == "auto" {
            Ok(FormatChoice::Auto)
        } else {
            s.parse().map(FormatChoice::Exact)
        }
    }
}

/// How to import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportOptions {
    pub format: FormatChoice,
    /// Turn every repair into an [`ImportError`] (the conversation is left out) instead of
    /// fixing it.
    pub strict: bool,
    /// Keep Claude Code's compaction side-calls (`agent-acompact-*` files, `meta.kind =
    /// "compaction"`) as conversations. Off by default: they are the agent summarizing itself,
    /// not a conversation to compact.
    pub include_compaction_calls: bool,
}

/// What a problem is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportProblem {
    #[error("cannot read: {detail}")]
    Io { detail: String },
    #[error("not valid JSON: {detail}")]
    Json { detail: String },
    #[error("format not recognized ({detail}); name it with --format")]
    UnknownFormat { detail: String },
    #[error("expected {expected}")]
    Shape { expected: String },
    #[error("unknown role {role:?}")]
    UnknownRole { role: String },
    #[error("no conversation in this file")]
    Empty,
    /// A session with no message once its bookkeeping entries are left out: a dataset of it
    /// would fail `validate`.
    #[error("the session holds no message (only bookkeeping entries, or nothing); nothing to import")]
    NoMessages,
    #[error("strict: {kind}: {detail}")]
    Repair { kind: RepairKind, detail: String },
}

/// One problem of an import: `file:line: conversation ID, field F: what`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub conversation: Option<String>,
    /// JSON path in the record (`traj[3].tool_calls[0].id`), when it applies.
    pub field: Option<String>,
    pub problem: ImportProblem,
}

impl std::error::Error for ImportError {}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        let mut parts = Vec::new();
        if let Some(c) = &self.conversation {
            parts.push(format!("conversation {c}"));
        }
        if let Some(field) = &self.field {
            parts.push(format!("field {field}"));
        }
        if !parts.is_empty() {
            write!(f, "{}: ", parts.join(", "))?;
        }
        write!(f, "{}", self.problem)
    }
}

/// A problem located in a record, before the file is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Located {
    pub at: At,
    pub conversation: Option<String>,
    pub problem: ImportProblem,
}

impl Located {
    pub fn new(at: At, problem: ImportProblem) -> Located {
        Located { at, conversation: None, problem }
    }
    pub fn in_conversation(mut self, id: &str) -> Located {
        self.conversation = Some(id.to_string());
        self
    }
}

/// One message of a draft with where it (and each of its calls) comes from.
#[derive(Debug, Clone)]
pub(crate) struct Sourced {
    pub message: Message,
    pub at: At,
    /// The location of each tool call (parallel to `message.tool_calls`; `at` when shorter).
    pub calls: Vec<At>,
}

impl Sourced {
    pub fn new(message: Message, at: At) -> Sourced {
        Sourced { message, at, calls: Vec::new() }
    }
}

/// A conversation as an importer read it, before the repair pass.
#[derive(Debug, Clone)]
pub(crate) struct Draft {
    /// Everything but the messages.
    pub conversation: Conversation,
    pub messages: Vec<Sourced>,
    /// Repairs the importer made itself (what it dropped while reading), reported by the
    /// repair pass with its own.
    pub repairs: Vec<(RepairKind, At, String)>,
}

impl Draft {
    pub fn new(id: String, format: Format, file: &FileCtx) -> Draft {
        let mut conversation = Conversation::new(id, Vec::new());
        conversation.source = format.source();
        conversation.meta.insert("format".into(), format.name().into());
        conversation.meta.insert("file".into(), file.key.clone().into());
        Draft { conversation, messages: Vec::new(), repairs: Vec::new() }
    }
    /// Record a repair the importer made at `at`.
    pub fn repair(&mut self, kind: RepairKind, at: At, detail: String) {
        self.repairs.push((kind, at, detail));
    }
    pub fn push(&mut self, message: Message, at: At) {
        self.messages.push(Sourced::new(message, at));
    }
    pub fn meta(&mut self, key: &str, value: impl Into<Value>) {
        self.conversation.meta.insert(key.to_string(), value.into());
    }
}

/// What an importer knows about the file it parses.
#[derive(Debug, Clone)]
pub(crate) struct FileCtx {
    /// The file key (see the module docs): conversation ids start with it.
    pub key: String,
}

impl FileCtx {
    /// The id of record `record` of a file holding several conversations.
    pub fn id(&self, record: &str) -> String {
        format!("{}/{record}", self.key)
    }
}

/// What `auto` chose for a file, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sniffed {
    pub format: Format,
    pub reason: &'static str,
}

/// One file's import.
#[derive(Debug, Clone)]
pub struct FileImport {
    pub path: PathBuf,
    /// The format used (`None` when it could not be sniffed or the file not read).
    pub format: Option<Format>,
    /// Set when the format was sniffed: why it was chosen.
    pub sniffed: Option<&'static str>,
    pub conversations: Vec<Conversation>,
    pub report: RepairReport,
    pub errors: Vec<ImportError>,
    /// Compaction side-calls left out ([`ImportOptions::include_compaction_calls`]).
    pub skipped_compaction_calls: usize,
}

impl FileImport {
    fn failed(path: &Path, problem: ImportProblem) -> FileImport {
        let error = ImportError { file: path.to_path_buf(), line: None, conversation: None, field: None, problem };
        FileImport {
            path: path.to_path_buf(),
            format: None,
            sniffed: None,
            conversations: Vec::new(),
            report: RepairReport::default(),
            errors: vec![error],
            skipped_compaction_calls: 0,
        }
    }
}

/// A file to import and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub path: PathBuf,
    /// The file key (see the module docs).
    pub key: String,
}

/// File extensions an importer reads in a folder.
const EXTENSIONS: [&str; 3] = ["json", "jsonl", "traj"];

/// The key of a file from its path relative to the input: `/` separators, extension removed.
pub fn file_key(relative: &Path) -> String {
    let text: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let joined = text.join("/");
    for ext in [".traj.json", ".jsonl", ".json", ".traj"] {
        if let Some(stem) = joined.strip_suffix(ext) {
            return stem.to_string();
        }
    }
    joined
}

/// The files of `inputs`: a file as given (with, for a JSONL file, Claude Code subagent files
/// in `<stem>/subagents/` beside it), a folder walked recursively for `*.json`, `*.jsonl` and
/// `*.traj` files in path order. Hidden files are skipped; a file reached twice is listed once.
pub fn input_files(inputs: &[PathBuf]) -> Vec<Input> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut add = |path: PathBuf, key: String, out: &mut Vec<Input>| {
        let canonical = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if seen.insert(canonical) {
            out.push(Input { path, key });
        }
    };
    for input in inputs {
        if input.is_dir() {
            let mut found = Vec::new();
            walk(input, &mut found);
            found.sort();
            for path in found {
                let rel = path.strip_prefix(input).unwrap_or(&path).to_path_buf();
                add(path, file_key(&rel), &mut out);
            }
        } else {
            let name = input.file_name().map(PathBuf::from).unwrap_or_else(|| input.clone());
            let key = file_key(&name);
            add(input.clone(), key.clone(), &mut out);
            if input.extension().is_some_and(|e| e == "jsonl") {
                let dir = input.with_file_name(&key).join("subagents");
                let mut found = Vec::new();
                if dir.is_dir() {
                    walk(&dir, &mut found);
                }
                found.sort();
                for path in found {
                    let rel = path.strip_prefix(&dir).unwrap_or(&path).to_path_buf();
                    add(path, format!("{key}/subagents/{}", file_key(&rel)), &mut out);
                }
            }
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| EXTENSIONS.iter().any(|x| e == *x)) {
            out.push(path);
        }
    }
}

/// Import every file of `inputs` (see [`input_files`]). Conversation ids are unique over the
/// whole import: a repeated id gets `~2`, `~3`, ... in file order.
pub fn import(inputs: &[PathBuf], options: &ImportOptions) -> Vec<FileImport> {
    let mut ids: HashSet<String> = HashSet::new();
    input_files(inputs)
        .into_iter()
        .map(|input| {
            let mut out = import_file(&input.path, &input.key, options);
            if !options.include_compaction_calls {
                let before = out.conversations.len();
                out.conversations.retain(|c| c.meta.get("kind").and_then(|k| k.as_str()) != Some("compaction"));
                out.skipped_compaction_calls = before - out.conversations.len();
            }
            for conv in &mut out.conversations {
                if !ids.insert(conv.id.clone()) {
                    let mut n = 2;
                    while !ids.insert(format!("{}~{n}", conv.id)) {
                        n += 1;
                    }
                    conv.id = format!("{}~{n}", conv.id);
                }
            }
            out
        })
        .collect()
}

/// Import one file; `key` starts its conversation ids.
pub fn import_file(path: &Path, key: &str, options: &ImportOptions) -> FileImport {
    match inputs::read_to_string(path, inputs::Kind::Recording).map_err(inputs::InputError::into_io) {
        Ok(text) => import_str(&text, path, key, options),
        Err(e) => FileImport::failed(path, ImportProblem::Io { detail: e.to_string() }),
    }
}

/// Import `text`, the content of `path`; `key` starts its conversation ids.
pub fn import_str(text: &str, path: &Path, key: &str, options: &ImportOptions) -> FileImport {
    let (format, sniffed) = match options.format {
        FormatChoice::Exact(f) => (f, None),
        FormatChoice::Auto => match sniff(path, text) {
            Ok(s) => (s.format, Some(s.reason)),
            Err(detail) => return FileImport::failed(path, ImportProblem::UnknownFormat { detail }),
        },
    };
    let file = FileCtx { key: key.to_string() };
    let drafts = format.parse_file(text, &file);
    let line_of = |at: &At| at.line.or_else(|| source::line_of(text, at.field.steps()));
    let mut out = FileImport {
        path: path.to_path_buf(),
        format: Some(format),
        sniffed,
        conversations: Vec::new(),
        report: RepairReport::default(),
        errors: Vec::new(),
        skipped_compaction_calls: 0,
    };
    let error = |line, conversation, field: Option<String>, problem| ImportError {
        file: path.to_path_buf(),
        line,
        conversation,
        field,
        problem,
    };
    for draft in drafts {
        match draft {
            Err(l) => {
                let field = (!l.at.field.is_root()).then(|| l.at.field.to_string());
                out.errors.push(error(line_of(&l.at), l.conversation, field, l.problem));
            }
            Ok(d) => {
                let repaired = repair::repair(d, &line_of);
                if options.strict && repaired.report.total() > 0 {
                    for r in repaired.report.repairs {
                        let problem = ImportProblem::Repair { kind: r.kind, detail: r.detail };
                        out.errors.push(error(r.line, Some(r.conversation), Some(r.field), problem));
                    }
                    continue;
                }
                if repaired.conversation.messages.is_empty() {
                    let id = Some(repaired.conversation.id.clone());
                    out.errors.push(error(None, id, None, ImportProblem::NoMessages));
                    continue;
                }
                out.report.merge(&repaired.report);
                out.conversations.push(repaired.conversation);
            }
        }
    }
    if out.conversations.is_empty() && out.errors.is_empty() {
        out.errors.push(error(None, None, None, ImportProblem::Empty));
    }
    out
}

/// Guess the format of `text` (the content of `path`) from its shape. The error says what the
/// file looked like.
pub fn sniff(path: &Path, text: &str) -> Result<Sniffed, String> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let pick = |format, reason| Ok(Sniffed { format, reason });
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return Err("the file does not start with a JSON object or array".into());
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Array(items)) => {
            let first = items.iter().find(|v| !v.is_null());
            match first {
                Some(v) if v.get("traj").is_some() && v.get("task_id").is_some() => {
                    pick(Format::TauBench, "a JSON array of records with task_id and traj")
                }
                Some(Value::Object(_)) => chat_format(&items, None),
                Some(Value::Array(conv)) => chat_format(conv, None),
                _ => Err("a JSON array of neither messages nor tau-bench records".into()),
            }
        }
        Ok(v @ Value::Object(_)) => {
            if v.get("simulations").is_some() && v.get("tasks").is_some() {
                return pick(Format::Tau2, "an object with tasks and simulations");
            }
            if json::str_of(&v, "trajectory_format").is_some_and(|f| f.starts_with("mini-swe-agent"))
                || name.ends_with(".traj.json")
            {
                return pick(Format::MiniSweAgent, "a mini-swe-agent trajectory_format");
            }
            if let Some(Value::Array(history)) = v.get("history") {
                let events = history.iter().any(|e| e.get("action").is_some() || e.get("observation").is_some());
                if events && history.iter().all(|e| e.get("role").is_none()) {
                    return pick(Format::Openhands, "an object with an OpenHands event history");
                }
                return pick(Format::SweAgent, "an object with a SWE-agent history");
            }
            if is_claude_code_line(&v) {
                return pick(Format::ClaudeCode, "Claude Code session lines (type, sessionId)");
            }
            match v.get("messages") {
                Some(Value::Array(messages)) => chat_format(messages, Some(&v)),
                _ => Err("a JSON object with no messages, history, simulations or trajectory_format".into()),
            }
        }
        Ok(_) => Err("a JSON scalar".into()),
        Err(_) => {
            // JSONL: look at the first lines.
            let lines: Vec<Value> = trimmed
                .lines()
                .filter(|l| !l.trim().is_empty())
                .take(8)
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            let Some(first) = lines.first() else {
                return Err("neither a JSON document nor JSON lines".into());
            };
            if lines.iter().any(is_claude_code_line) {
                return pick(Format::ClaudeCode, "Claude Code session lines (type, sessionId)");
            }
            if first.get("instance_id").is_some() && first.get("history").is_some() {
                return pick(Format::Openhands, "JSON lines with instance_id and an event history");
            }
            match first {
                Value::Array(messages) => chat_format(messages, None),
                Value::Object(_) => match first.get("messages") {
                    Some(Value::Array(messages)) => chat_format(messages, Some(first)),
                    _ => Err("JSON lines of an unknown kind of record".into()),
                },
                _ => Err("JSON lines of scalars".into()),
            }
        }
    }
}

fn is_claude_code_line(v: &Value) -> bool {
    let ty = json::str_of(v, "type");
    let known = ty.is_some_and(|t| {
        matches!(
            t,
            "user" | "assistant" | "system" | "progress" | "file-history-snapshot" | "queue-operation" | "summary"
        )
    });
    known && (v.get("sessionId").is_some() || v.get("uuid").is_some() || v.get("leafUuid").is_some())
}

/// `openai` or `anthropic`, from a message list (and the object holding it).
fn chat_format(messages: &[Value], holder: Option<&Value>) -> Result<Sniffed, String> {
    if messages.iter().any(|m| m.get("role").is_none()) {
        return Err("a list whose items have no role".into());
    }
    let anthropic_block = |m: &Value| {
        m.get("content").and_then(Value::as_array).is_some_and(|blocks| {
            blocks
                .iter()
                .any(|b| json::str_of(b, "type").is_some_and(|t| matches!(t, "tool_use" | "tool_result" | "thinking")))
        })
    };
    let openai_only = |m: &Value| m.get("tool_calls").is_some() || json::str_of(m, "role") == Some("tool");
    if messages.iter().any(anthropic_block) {
        return Ok(Sniffed { format: Format::Anthropic, reason: "messages with tool_use or tool_result blocks" });
    }
    if !messages.iter().any(openai_only) && holder.is_some_and(|h| h.get("system").is_some()) {
        return Ok(Sniffed { format: Format::Anthropic, reason: "messages with a top-level system field" });
    }
    Ok(Sniffed { format: Format::Openai, reason: "chat-completions messages" })
}

#[cfg(test)]
mod tests;
