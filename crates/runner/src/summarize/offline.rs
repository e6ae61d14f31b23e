//! The offline summarizer: a deterministic, structured summary of a span, with no model.
//!
//! It stands in for an LLM summarizer when a run must be free, fast and reproducible: the same
//! request over the same context always gives the same bytes. It is extractive, not a model:
//! it copies lines it selects by general rules, so retention under it measures what verbatim
//! extraction keeps, and comparing summary quality needs `summarizer = "llm"`. It never sees
//! the probes (a summary request carries the context and the span only; a test checks that its
//! output does not change with the probes attached to the conversation). It keeps what an
//! agent needs to continue, in markdown sections, one `- item` line each:
//!
//! | section | what goes in | priority |
//! |---|---|---|
//! | Task | the original task: the previous summary's task, else `request.task`, else the span's first user message | 10 (the first), 5 |
//! | Earlier summary | lines of a previous summary that are not in this format | 5 |
//! | User requests | later user messages (not text the harness injects) | 5 |
//! | Status | the latest task list (`todos` arguments: done, in progress, pending), each test command's last outcome (tests pass / tests fail), the last commit, and the files changed since it (not committed) | 7 |
//! | Files changed | paths in arguments of tools that write, edit, create, patch, move or delete, each with its number of changes and the last one (the first differing line before and after) | 8 |
//! | Errors | error tool results and error lines of outputs that are not a file's content or code, each with what the agent said next (its diagnosis or fix) and its resolution when a later call of the same tool succeeded | 6 |
//! | Decisions | sentences with decided / chose / will use / rejected / instead of / prefer / going with / opted | 6 |
//! | Constraints | the user's sentences with must / don't / never / always / make sure / avoid, and the agent's with needs a / requires / cannot / not supported | 7 |
//! | Pending | `- [ ]` items and `TODO` lines, and the user's lines with next / remaining (not the agent's chatter) | 7 |
//! | Last state | the span's last assistant text | 8 (the last), 3 |
//! | Next step | the user's latest message when nothing answered it, and the last action the agent announced (let me / I'll / next) | 8 |
//! | Files read | paths in arguments of other tools | 6 |
//! | Files mentioned | paths found in text and tool outputs | 4 |
//! | Commands | `command` / `cmd` arguments of shell tools | 5 |
//! | Identifiers | ids like `ABC-1234`, uuids, reservation codes (`ZFA04Y`), `#W2378156`, `mia_li_3668`, hashes, URLs; not colours, versions or tool-call ids | 6 |
//! | Numbers | numbers with units (`80%`, `42 ms`, `$120.50`, `3 GB`) | 4 |
//!
//! The output of a call that shows a file (a read or view tool, `cat`, `grep`, `git diff`...)
//! is code and fixtures, not events: no error, path, identifier or number is taken from it.
//!
//! **Budget**: the summary fits `min(request.target_tokens, request.max_tokens)` (the length
//! the prompt asks for when the request carries one), else `min(DEFAULT_TARGET_TOKENS,
//! request.max_tokens)`, measured with the exact `o200k_base` counter. A request without a
//! target carries only an API cap (003 caps its summary at the 16,384 max output tokens): a model
//! writes far less than such a cap (001's document puts a summary call at about 500-1,000 output
//! tokens), and a stand-in that filled it would grow each summary to the cap and, at small
//! windows, keep the context over its threshold after every compaction. Lines are dropped lowest priority first and, within a priority, oldest first (an
//! LLM summary compresses old detail before recent detail); a section whose lines are all
//! dropped loses its heading too. Long lines are clipped (a task to 600 characters, other lines
//! to 200-300).
//!
//! **Chaining**: `request.previous`, and any summary, notice or digest inside the span, are
//! integrated: their `### Section` lines in this format join the same sections ahead of the new
//! span's lines (duplicates dropped); other text is kept line by line under *Earlier summary*.
//!
//! **Input cuts**: the span is read as the document cuts it before its summary call
//! (`request.input`: 001 cuts each message to 2,000 characters and each tool result to 500,
//! 004 each tool result to 500), exactly as the LLM path's transcript does, so a detail past a
//! cut is in neither summary.
//!
//! **Character target**: a request with `target_chars` (000's "Max 500 karakter total") gets a
//! summary of at most that many characters: the token budget shrinks until the text fits.
//!
//! **Accounting**: `input_tokens` is the exact `o200k_base` size of the span's messages as cut,
//! `output_tokens` that of the summary.
//!
//! ```
//! use compaction::{Context, Message, SummaryRequest};
//! use runner::replay::Summarizer;
//! use runner::summarize::OfflineSummarizer;
//!
//! let ctx = Context::from_messages(vec![
//!     Message::system("You are a coding agent."),
//!     Message::user("Fix ticket PAY-4411 in src/billing.rs"),
//!     Message::assistant("I decided to use checked arithmetic instead of wrapping."),
//! ]);
//! let request = SummaryRequest::new(vec![1, 2], compaction_strategies::keep_last_n::prompt(), 200, 1);
//! let summary = OfflineSummarizer::new().summarize(&ctx, &request).unwrap();
//! assert!(summary.text.starts_with("## Session Summary (Compaction Round 1)"));
//! assert!(summary.text.contains("### Identifiers\n- PAY-4411"));
//! assert!(summary.text.contains("### Decisions\n- I decided to use checked arithmetic"));
//! assert!(summary.output_tokens <= 200);
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use compaction::{
    Context, Entry, Exact, InputCuts, Inserted, Message, Origin, Role, SummaryFailure, SummaryRequest, TokenCounter,
};

use super::{Summarizer, Summary, SummaryError};

/// The length an offline summary aims at when its request names only a cap, in tokens: the
/// largest summary budget a seed states (004's 2,000).
pub const DEFAULT_TARGET_TOKENS: u32 = 2_000;

/// The deterministic offline summarizer (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct OfflineSummarizer {
    exact: Exact,
}

impl Default for OfflineSummarizer {
    fn default() -> OfflineSummarizer {
        OfflineSummarizer::new()
    }
}

impl OfflineSummarizer {
    /// A summarizer measuring with `o200k_base`.
    pub fn new() -> OfflineSummarizer {
        OfflineSummarizer { exact: Exact::o200k() }
    }
}

/// The sections, in the order they are rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Section {
    Task,
    Earlier,
    Requests,
    Status,
    FilesChanged,
    Errors,
    Decisions,
    Constraints,
    Pending,
    LastState,
    NextStep,
    FilesRead,
    FilesMentioned,
    Commands,
    Identifiers,
    Numbers,
}

impl Section {
    const ALL: [Section; 16] = [
        Section::Task,
        Section::Earlier,
        Section::Requests,
        Section::Status,
        Section::FilesChanged,
        Section::Errors,
        Section::Decisions,
        Section::Constraints,
        Section::Pending,
        Section::LastState,
        Section::NextStep,
        Section::FilesRead,
        Section::FilesMentioned,
        Section::Commands,
        Section::Identifiers,
        Section::Numbers,
    ];
    fn title(self) -> &'static str {
        match self {
            Section::Task => "Task",
            Section::Earlier => "Earlier summary",
            Section::Requests => "User requests",
            Section::Status => "Status",
            Section::Constraints => "Constraints",
            Section::NextStep => "Next step",
            Section::FilesChanged => "Files changed",
            Section::FilesRead => "Files read",
            Section::FilesMentioned => "Files mentioned",
            Section::Commands => "Commands",
            Section::Identifiers => "Identifiers",
            Section::Numbers => "Numbers",
            Section::Errors => "Errors",
            Section::Decisions => "Decisions",
            Section::Pending => "Pending",
            Section::LastState => "Last state",
        }
    }
    fn from_title(title: &str) -> Option<Section> {
        Section::ALL.into_iter().find(|s| s.title().eq_ignore_ascii_case(title.trim()))
    }
    /// Priority of the section's `k`-th of `n` lines (higher is kept longer).
    fn priority(self, k: usize, n: usize) -> u8 {
        match self {
            Section::Task if k == 0 => 10,
            Section::Task => 5,
            Section::LastState if k + 1 == n => 8,
            Section::LastState => 3,
            Section::FilesChanged | Section::NextStep => 8,
            Section::Pending | Section::Status | Section::Constraints => 7,
            Section::Errors | Section::Decisions | Section::Identifiers | Section::FilesRead => 6,
            Section::Earlier | Section::Commands | Section::Requests => 5,
            Section::FilesMentioned | Section::Numbers => 4,
        }
    }
    /// Longest line, in characters.
    fn clip(self) -> usize {
        match self {
            Section::Task | Section::LastState => 600,
            Section::Decisions | Section::Pending | Section::Earlier | Section::Constraints | Section::NextStep => 300,
            Section::Status | Section::FilesChanged => 250,
            Section::Errors => 400,
            _ => 200,
        }
    }
    /// Most lines collected (the budget usually keeps far fewer).
    fn cap(self) -> usize {
        match self {
            Section::Earlier => 2_000,
            _ => 300,
        }
    }
}

/// Collapse whitespace and clip to `max` characters (`...` marks a cut).
fn clip(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        let extra = word.chars().count() + usize::from(!out.is_empty());
        if chars + extra > max {
            if out.is_empty() {
                out.extend(word.chars().take(max));
            }
            out.push_str("...");
            return out;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
        chars += extra;
    }
    out
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Text scanned per message for paths, identifiers and numbers.
const SCAN_BYTES: usize = 64 * 1024;

/// The notes gathered from a span, section by section, in order, without duplicates.
#[derive(Debug, Default, Clone)]
struct Notes {
    lines: BTreeMap<Section, Vec<String>>,
    seen: BTreeSet<(Section, String)>,
}

impl Notes {
    fn add(&mut self, section: Section, text: &str) {
        let line = clip(text, section.clip());
        if line.is_empty() || line == "..." {
            return;
        }
        let lines = self.lines.entry(section).or_default();
        if lines.len() >= section.cap() {
            return;
        }
        if self.seen.insert((section, line.clone())) {
            lines.push(line);
        }
    }
    /// True when `text`, clipped for `section`, is already one of its lines.
    fn contains(&self, section: Section, text: &str) -> bool {
        self.seen.contains(&(section, clip(text, section.clip())))
    }
    fn has(&self, section: Section) -> bool {
        self.lines.get(&section).is_some_and(|l| !l.is_empty())
    }
}

/// An error seen in the span, waiting for its fix and resolution.
#[derive(Debug)]
struct ErrorNote {
    text: String,
    tool: Option<String>,
    resolution: Option<String>,
    /// What the agent said next: its diagnosis or fix.
    fix: Option<String>,
}

impl ErrorNote {
    fn new(text: String, tool: Option<String>) -> ErrorNote {
        ErrorNote { text, tool, resolution: None, fix: None }
    }
}

/// A file the span changed: how often, and the last change.
#[derive(Debug)]
struct FileChange {
    path: String,
    edits: usize,
    last: String,
    /// The message number of the last change.
    at: usize,
}

/// Words that make a sentence a constraint: from the user, or learned by the agent.
const CONSTRAINT_WORDS: [&str; 14] = [
    "must ",
    "must not",
    "don't",
    "do not",
    "never ",
    "always ",
    "make sure",
    "avoid ",
    "needs a ",
    "requires ",
    "cannot ",
    "can't ",
    "not supported",
    "unsupported",
];
/// How an agent announces its next action.
const NEXT_WORDS: [&str; 8] =
    ["let me ", "now let me ", "i'll ", "i will ", "next, ", "next i", "now i'll ", "i need to "];

/// A line of code or of a numbered file listing, not an error message: `t.Errorf(...)`,
/// `/* Error panel */`, `  45→ return err`.
fn looks_like_code(line: &str) -> bool {
    let t = line.trim_start();
    let numbered = t
        .split_once(['→', '\t'])
        .is_some_and(|(n, _)| !n.trim().is_empty() && n.trim().chars().all(|c| c.is_ascii_digit()));
    numbered
        || ["//", "/*", "*", "#", "<!--", "--"].iter().any(|p| t.starts_with(p))
        || [
            "Errorf(",
            ".Error(",
            "Error(\"",
            "errors.New(",
            "raise ",
            "throw ",
            "except ",
            "catch ",
            "return ",
            "func ",
            "def ",
            "fn ",
            "=>",
            "assert",
        ]
        .iter()
        .any(|w| t.contains(w))
}

/// An identifier that says nothing about the task: a hex colour (`#1a2b3c`), a version
/// (`v1.2.3`, `2.1.32`), a tool-call id (`toolu_01...`, `call_...`).
fn is_noise_identifier(t: &str) -> bool {
    let colour = t
        .strip_prefix('#')
        .is_some_and(|h| matches!(h.len(), 3 | 4 | 6 | 8) && h.chars().all(|c| c.is_ascii_hexdigit()));
    let v = t.strip_prefix(['v', 'V']).unwrap_or(t);
    let version = v.contains('.')
        && v.split(['.', '-', '+']).next().is_some_and(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && v.split('.').count() >= 2
        && v.split('.').nth(1).is_some_and(|p| p.chars().next().is_some_and(|c| c.is_ascii_digit()));
    colour || version || t.starts_with("toolu_") || t.starts_with("call_")
}

/// A shell command that shows a file's content (its output is code, not events).
fn shows_files(command: &str) -> bool {
    let first = command.split_whitespace().next().unwrap_or("");
    matches!(first, "cat" | "head" | "tail" | "less" | "grep" | "rg" | "sed" | "awk" | "find" | "ls" | "tree" | "git" if first != "git" || command.contains("git show") || command.contains("git diff") || command.contains("git log"))
}

/// A shell command that runs tests.
fn runs_tests(command: &str) -> bool {
    let c = command.to_lowercase();
    c.contains("pytest")
        || c.contains(" test")
        || c.starts_with("test")
        || c.contains("test:")
        || c.contains("jest")
        || c.contains("rspec")
}

/// A test run's output that reports a failure.
fn reports_failure(output: &str) -> bool {
    output.contains("FAIL")
        || output.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.windows(2).any(|w| {
                w[1].trim_matches(|c: char| !c.is_alphanumeric()).eq_ignore_ascii_case("failed")
                    && w[0].trim_matches(|c: char| !c.is_ascii_digit()).parse::<u64>().is_ok_and(|n| n > 0)
            })
        })
}

/// The message of a `git commit -m "..."` command.
fn commit_message(command: &str) -> Option<String> {
    let rest = &command[command.find(" -m ")? + 4..];
    let rest = rest.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let body = &rest[1..];
    let end = body.find(quote).unwrap_or(body.len());
    let first = body[..end].lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("$(cat"))?;
    Some(first.to_string())
}

/// What a change tool's arguments say it changed.
fn change_description(args: &serde_json::Value) -> Option<String> {
    let s = |k: &str| args.get(k).and_then(|v| v.as_str());
    if let (Some(old), Some(new)) = (s("old_string").or(s("old_str")), s("new_string").or(s("new_str"))) {
        // The first line that differs on each side: what changed, not the shared context.
        let differing = |a: &str, b: &str| -> String {
            let others: BTreeSet<&str> = b.lines().map(str::trim).collect();
            a.lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !others.contains(l))
                .map_or(String::new(), |l| clip(l, 70))
        };
        let (was, now) = (differing(old, new), differing(new, old));
        return Some(match (was.is_empty(), now.is_empty()) {
            (true, true) => "edited".to_string(),
            (true, false) => format!("added `{now}`"),
            (false, true) => format!("removed `{was}`"),
            (false, false) => format!("`{was}` -> `{now}`"),
        });
    }
    if let Some(edits) = args.get("edits").and_then(|v| v.as_array()) {
        return Some(format!("{} edits", edits.len()));
    }
    if let Some(content) = s("content").or(s("file_text")) {
        return Some(format!("written ({} lines)", content.lines().count()));
    }
    None
}

const PATH_KEYS: [&str; 10] =
    ["path", "file_path", "filepath", "filename", "file", "notebook_path", "target_file", "paths", "files", "dir"];
const COMMAND_KEYS: [&str; 3] = ["command", "cmd", "script"];
const CHANGE_WORDS: [&str; 14] = [
    "write", "edit", "create", "patch", "replace", "update", "delete", "remove", "move", "rename", "insert", "apply",
    "save", "mkdir",
];
/// Editor sub-commands that are not shell commands (`str_replace_editor`-style tools).
const EDITOR_COMMANDS: [&str; 7] = ["view", "create", "str_replace", "insert", "undo_edit", "write", "edit"];
const EXTENSIONS: [&str; 44] = [
    "rs", "py", "ts", "tsx", "js", "jsx", "mjs", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs", "rb", "php",
    "swift", "scala", "sh", "md", "txt", "json", "jsonl", "toml", "yaml", "yml", "lock", "xml", "html", "css", "sql",
    "csv", "cfg", "ini", "env", "log", "ipynb", "proto", "vue", "svelte", "mod", "tex",
];
const DECISION_WORDS: [&str; 11] = [
    "decided",
    "decide to",
    "chose",
    "choose to",
    "will use",
    "'ll use",
    "rejected",
    "instead of",
    "prefer",
    "going with",
    "opted",
];
const UNITS: [&str; 52] = [
    "%",
    "ms",
    "s",
    "sec",
    "secs",
    "second",
    "seconds",
    "min",
    "mins",
    "minute",
    "minutes",
    "h",
    "hr",
    "hrs",
    "hour",
    "hours",
    "day",
    "days",
    "week",
    "weeks",
    "kb",
    "mb",
    "gb",
    "tb",
    "kib",
    "mib",
    "gib",
    "b",
    "bytes",
    "tokens",
    "k",
    "x",
    "usd",
    "eur",
    "dollars",
    "lines",
    "files",
    "tests",
    "passed",
    "failed",
    "errors",
    "warnings",
    "items",
    "rows",
    "px",
    "kg",
    "km",
    "lbs",
    "nights",
    "passengers",
    "bags",
    "points",
];

/// Characters that split text into candidate tokens.
fn is_split(c: char) -> bool {
    c.is_whitespace() || "\"'`,;()[]{}<>=|".contains(c)
}

fn trim_token(t: &str) -> &str {
    t.trim_matches(|c: char| ".:!?*".contains(c))
}

/// Candidate tokens of `text` (paths, identifiers).
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(is_split).map(trim_token).filter(|t| t.len() >= 3 && t.len() <= 200)
}

fn has_extension(t: &str) -> bool {
    let last = t.rsplit('/').next().unwrap_or(t);
    match last.rsplit_once('.') {
        Some((stem, ext)) => !stem.is_empty() && EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()),
        None => false,
    }
}

/// A file path: with a known extension, or absolute / relative with a directory.
fn is_path(t: &str) -> bool {
    if t.contains("://") || t.chars().any(|c| c.is_control()) {
        return false;
    }
    let t2 = t.replace('\\', "/");
    if has_extension(&t2) {
        return t2.chars().next().is_some_and(|c| c.is_alphanumeric() || "/._~".contains(c));
    }
    let rooted = ["/", "./", "../", "~/"].iter().any(|p| t2.starts_with(p));
    rooted && t2.len() > 2 && t2[1..].chars().any(|c| c.is_alphanumeric()) && !t2.contains("//")
}

fn is_uuid(t: &str) -> bool {
    let parts: Vec<&str> = t.split('-').collect();
    parts.len() == 5
        && parts.iter().zip([8, 4, 4, 4, 12]).all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// An identifier: `ABC-1234`, a uuid, a reservation code, `#W2378156`, `mia_li_3668`, a hash,
/// a URL.
fn is_identifier(t: &str) -> bool {
    if t.len() > 64 && !t.starts_with("http") {
        return false;
    }
    if t.starts_with("http://") || t.starts_with("https://") {
        return t.len() > 10;
    }
    if is_uuid(t) {
        return true;
    }
    let digits = t.chars().filter(|c| c.is_ascii_digit()).count();
    let letters = t.chars().filter(|c| c.is_alphabetic()).count();
    // ABC-1234
    if let Some((a, b)) = t.split_once('-') {
        if a.len() >= 2
            && a.chars().all(|c| c.is_ascii_uppercase())
            && !b.is_empty()
            && b.chars().all(|c| c.is_ascii_digit())
        {
            return true;
        }
    }
    // #W2378156, #123
    if let Some(rest) = t.strip_prefix('#') {
        return rest.len() >= 2
            && rest.chars().all(|c| c.is_ascii_alphanumeric())
            && rest.chars().any(|c| c.is_ascii_digit());
    }
    if digits == 0 || letters == 0 || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return false;
    }
    // Reservation codes and similar: ZFA04Y, 8JX2WO.
    if (5..=10).contains(&t.len()) && t.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
        return true;
    }
    // mia_li_3668, user-42-x
    if t.contains('_') || (t.contains('-') && t.len() >= 6) {
        return true;
    }
    // Hashes: 7-40 lowercase hex characters with letters and digits.
    (7..=40).contains(&t.len()) && t.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// The numeric part of a token with an optional currency prefix, and what follows it.
fn split_number(t: &str) -> Option<(bool, &str)> {
    let (currency, rest) = match t.chars().next()? {
        c @ ('$' | '€' | '£') => (true, &t[c.len_utf8()..]),
        _ => (false, t),
    };
    if !rest.chars().next()?.is_ascii_digit() {
        return None;
    }
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',')).unwrap_or(rest.len());
    let number = rest[..end].trim_end_matches(['.', ',']);
    Some((currency, &rest[number.len()..]))
}

/// Numbers with units in `text`, each added to `notes`.
#[cfg(test)]
fn numbers(text: &str, notes: &mut Notes) {
    numbers_into(text, &mut |item| notes.add(Section::Numbers, &item));
}

/// Numbers with units in `text`, each passed to `found`, in order (at most 20).
fn numbers_into(text: &str, each: &mut dyn FnMut(String)) {
    let words: Vec<&str> = text
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| "()[]{}\"'`,;:*".contains(c)))
        .map(|w| w.trim_end_matches(['.', '!', '?']))
        .collect();
    let mut found = 0;
    for (i, w) in words.iter().enumerate() {
        let Some((currency, suffix)) = split_number(w) else { continue };
        let unit = suffix.to_lowercase();
        let item = if currency && suffix.is_empty() {
            Some(w.to_string())
        } else if !suffix.is_empty() {
            UNITS.contains(&unit.as_str()).then(|| w.to_string())
        } else {
            words.get(i + 1).and_then(|next| {
                let n = next.to_lowercase();
                (UNITS.contains(&n.as_str()) && (n.len() >= 2 || n == "%")).then(|| format!("{w} {next}"))
            })
        };
        if let Some(item) = item {
            each(item);
            found += 1;
            if found >= 20 {
                return;
            }
        }
    }
}

fn is_error_line(line: &str) -> bool {
    let t = line.trim_start().to_lowercase();
    line.contains("Error")
        || line.contains("Traceback")
        || line.contains("FAILED")
        || t.starts_with("error:")
        || t.starts_with("error[")
        || t.contains("panicked at")
}

fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
}

fn words_of(line: &str) -> impl Iterator<Item = String> + '_ {
    line.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// Sentences of `text`: split at line ends and at `. `, `! `, `? `.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            if matches!(bytes[i], b'.' | b'!' | b'?') && bytes.get(i + 1) == Some(&b' ') {
                out.push(line[start..=i].trim());
                start = i + 1;
            }
        }
        out.push(line[start..].trim());
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Paths under path-like keys of `value` (depth-limited), in document order.
fn arg_paths(value: &serde_json::Value, depth: usize, out: &mut Vec<String>) {
    use serde_json::Value;
    if depth > 3 {
        return;
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if PATH_KEYS.contains(&k.to_ascii_lowercase().as_str()) {
                    match v {
                        Value::String(s) => out.push(s.clone()),
                        Value::Array(items) => {
                            out.extend(items.iter().filter_map(|i| i.as_str()).map(str::to_string));
                        }
                        _ => {}
                    }
                } else {
                    arg_paths(v, depth + 1, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| arg_paths(v, depth + 1, out)),
        _ => {}
    }
}

/// The string values of `value`, for identifier scanning.
fn arg_strings<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    use serde_json::Value;
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| arg_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| arg_strings(v, out)),
        _ => {}
    }
}

/// What [`Gatherer::scan_text`] notes for a text, in order: paths, identifiers, numbers. A
/// function of the text alone, so a recorded message's is made once per conversation and
/// input cut ([`Store`]).
#[derive(Debug, Default)]
pub(crate) struct Scan(Vec<(Section, String)>);

impl Scan {
    fn of(text: &str) -> Scan {
        let text = head(text, SCAN_BYTES);
        let mut out = Vec::new();
        for t in tokens(text) {
            if is_path(t) {
                out.push((Section::FilesMentioned, t.replace('\\', "/")));
            } else if is_identifier(t) && !is_noise_identifier(t) {
                out.push((Section::Identifiers, t.to_string()));
            }
        }
        numbers_into(text, &mut |item| out.push((Section::Numbers, item)));
        Scan(out)
    }
}

/// What the offline summarizer keeps for a conversation's recorded messages while its pairs
/// run, shared by every worker: per message and input cut, the scan of its text and its tokens
/// as cut. Every configuration summarizes the same messages, and a strategy that summarizes its
/// history again each round rereads them. The replay hands it to
/// [`Summarizer::summarize_with_store`] (a run keeps one per conversation).
#[derive(Debug, Default)]
pub struct Store {
    /// The conversation's shared entries: what is kept for a message applies to a span's
    /// entry only when it holds the same message (not a copy, nor one a strategy changed).
    entries: Vec<Entry>,
    messages: Vec<Mutex<Kept>>,
    /// The exact tokens of summary lines (`- line\n`): a chained summary carries its
    /// predecessor's lines, and every configuration writes many of the same lines.
    lines: Mutex<HashMap<String, u64>>,
}

/// One message's [`Store`] part.
#[derive(Debug, Default)]
struct Kept {
    scans: Vec<(InputCuts, Arc<Scan>)>,
    tokens: Vec<(InputCuts, u64)>,
}

impl Store {
    /// An empty store for the conversation whose recorded messages are `entries`.
    pub fn new(entries: &[Entry]) -> Store {
        Store {
            entries: entries.to_vec(),
            messages: (0..entries.len()).map(|_| Mutex::default()).collect(),
            lines: Mutex::default(),
        }
    }

    /// The exact tokens of `line`, counted once per conversation.
    fn line_tokens(&self, line: &str, count: impl FnOnce() -> u64) -> u64 {
        if let Some(n) = lock(&self.lines).get(line) {
            return *n;
        }
        let n = count();
        lock(&self.lines).insert(line.to_string(), n);
        n
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A span entry's message as cut, with where its shared work is kept when it has any.
struct Read<'a> {
    kept: Option<&'a Mutex<Kept>>,
    cuts: InputCuts,
    message: std::borrow::Cow<'a, Message>,
}

impl<'a> Read<'a> {
    fn new(recorded: Option<&'a Store>, e: &'a Entry, cuts: InputCuts) -> Read<'a> {
        Read { kept: Read::kept(recorded, e), cuts, message: cuts.apply(e.message()) }
    }

    /// The exact tokens of `e`'s message as `cuts` cut it (kept with a shared message's).
    fn tokens(recorded: Option<&Store>, e: &Entry, cuts: InputCuts, exact: &Exact) -> u64 {
        let kept = Read::kept(recorded, e);
        if let Some((_, n)) = kept.and_then(|k| lock(k).tokens.iter().find(|(c, _)| *c == cuts).copied()) {
            return n;
        }
        let n = match cuts.apply(e.message()) {
            std::borrow::Cow::Borrowed(_) => e.tokens(exact),
            std::borrow::Cow::Owned(m) => exact.message_tokens(&m),
        };
        if let Some(k) = kept {
            lock(k).tokens.push((cuts, n));
        }
        n
    }

    /// Where the work on `e`'s message is kept, when it is a shared recorded message.
    fn kept(recorded: Option<&'a Store>, e: &'a Entry) -> Option<&'a Mutex<Kept>> {
        match (recorded, e.origin()) {
            (Some(r), Origin::Recorded { index }) => {
                r.entries.get(*index).filter(|s| std::ptr::eq(s.message(), e.message()))?;
                r.messages.get(*index)
            }
            _ => None,
        }
    }

    /// The scan of the message's content as cut.
    fn scan(&self) -> Arc<Scan> {
        let Some(kept) = self.kept else { return Arc::new(Scan::of(&self.message.content)) };
        if let Some((_, s)) = lock(kept).scans.iter().find(|(c, _)| *c == self.cuts) {
            return s.clone();
        }
        let scan = Arc::new(Scan::of(&self.message.content));
        lock(kept).scans.push((self.cuts, scan.clone()));
        scan
    }
}

/// Gathers notes from a span, message by message.
#[derive(Debug, Default)]
struct Gatherer {
    notes: Notes,
    errors: Vec<ErrorNote>,
    /// Tool name by call id, for results that do not carry one.
    call_names: BTreeMap<String, String>,
    /// Shell command by call id, for reading its result.
    call_commands: BTreeMap<String, String>,
    /// Calls whose output is a file's content.
    file_views: BTreeSet<String>,
    last_state: Option<String>,
    /// The user's latest message, when no assistant text followed it.
    unanswered: Option<String>,
    changes: Vec<FileChange>,
    /// The latest task list (`TodoWrite`-style `todos`): status and content.
    todos: Vec<(String, String)>,
    /// The last commit: message number and message.
    commit: Option<(usize, String)>,
    git_seen: bool,
    /// Test commands and whether their last run passed.
    tests: Vec<(String, bool)>,
    /// Messages read so far.
    at: usize,
}

impl Gatherer {
    /// Integrate a previous summary (or any text standing for earlier messages).
    fn previous(&mut self, text: &str) {
        let mut section = Section::Earlier;
        for line in text.lines() {
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            if let Some(title) = t.strip_prefix("### ") {
                match Section::from_title(title) {
                    Some(s) => section = s,
                    None => {
                        section = Section::Earlier;
                        self.notes.add(Section::Earlier, t);
                    }
                }
                continue;
            }
            // Headings, the stand-in's own and a summary's marker line (`[COMPACT SUMMARY]`, the
            // prefix `split-fraction` puts before its summaries), carry no note.
            if t.starts_with("## Session Summary") || t.starts_with("## Summary") || t == "[COMPACT SUMMARY]" {
                continue;
            }
            self.notes.add(section, t.strip_prefix("- ").unwrap_or(t));
        }
    }

    /// Paths, identifiers and numbers in `text`.
    fn scan_text(&mut self, text: &str) {
        self.add_scan(&Scan::of(text));
    }

    /// The notes of a scan, in its order.
    fn add_scan(&mut self, scan: &Scan) {
        for (section, item) in &scan.0 {
            self.notes.add(*section, item);
        }
    }

    /// A user message: the task when none is known yet, else a later request.
    fn user(&mut self, m: &Message, task_known: bool, scan: &dyn Fn() -> Arc<Scan>) {
        self.at += 1;
        let injected = m.meta_flag("injected") || dataset::import::is_harness_text(&m.content);
        if !injected && !m.content.trim().is_empty() {
            self.unanswered = Some(m.content.clone());
            self.constraints(&m.content);
            if task_known {
                if !self.notes.contains(Section::Task, &m.content) {
                    self.notes.add(Section::Requests, &m.content);
                }
            } else {
                self.notes.add(Section::Task, &m.content);
            }
            self.decisions_and_pending(&m.content, true);
        }
        if !injected {
            for line in m.content.lines().filter(|l| is_error_line(l) && !looks_like_code(l)).take(3) {
                self.errors.push(ErrorNote::new(clip(line, 200), None));
            }
        }
        self.add_scan(&scan());
    }

    /// Constraint sentences of `text`.
    fn constraints(&mut self, text: &str) {
        for s in sentences(text) {
            let lower = s.to_lowercase();
            if s.chars().count() <= 300 && !looks_like_code(s) && CONSTRAINT_WORDS.iter().any(|w| lower.contains(w)) {
                self.notes.add(Section::Constraints, s.trim_start_matches("- "));
            }
        }
    }

    fn decisions_and_pending(&mut self, text: &str, from_user: bool) {
        for s in sentences(text) {
            let lower = s.to_lowercase();
            if DECISION_WORDS.iter().any(|w| lower.contains(w)) && !looks_like_code(s) {
                self.notes.add(Section::Decisions, s.trim_start_matches("- "));
            }
        }
        // Pending work as a list states it, not chatter ("Now let me check what's next.").
        for line in text.lines() {
            let t = line.trim().trim_start_matches("- ").trim();
            let pending = line.contains("- [ ]")
                || line.contains("TODO")
                || (from_user && words_of(line).any(|w| w == "todo" || w == "next" || w == "remaining"));
            if pending {
                self.notes.add(Section::Pending, t.trim_start_matches("[ ]").trim());
            }
        }
    }

    fn assistant(&mut self, m: &Message, scan: &dyn Fn() -> Arc<Scan>) {
        self.at += 1;
        if !m.content.trim().is_empty() {
            self.decisions_and_pending(&m.content, false);
            self.last_state = Some(m.content.clone());
            self.unanswered = None;
            // The agent's first words after an error: its diagnosis or fix.
            let said = sentences(&m.content).into_iter().take(2).collect::<Vec<_>>().join(" ");
            for e in self.errors.iter_mut().filter(|e| e.fix.is_none()) {
                e.fix = Some(clip(&said, 200));
            }
            for s in sentences(&m.content) {
                let lower = s.to_lowercase();
                let learned = ["needs a ", "requires ", "cannot ", "can't ", "not supported", "unsupported", "must "];
                if s.chars().count() <= 300 && !looks_like_code(s) && learned.iter().any(|w| lower.contains(w)) {
                    self.notes.add(Section::Constraints, s.trim_start_matches("- "));
                }
            }
        }
        self.add_scan(&scan());
        for call in &m.tool_calls {
            self.call_names.insert(call.id.clone(), call.name.clone());
            let Ok(args) = serde_json::from_str::<serde_json::Value>(&call.arguments) else {
                self.scan_text(&call.arguments);
                continue;
            };
            let name = call.name.to_lowercase();
            let sub = COMMAND_KEYS.iter().find_map(|k| args.get(*k).and_then(|v| v.as_str())).map(str::to_lowercase);
            let editor_op = sub.as_deref().is_some_and(|s| EDITOR_COMMANDS.contains(&s));
            let changes = CHANGE_WORDS.iter().any(|w| name.contains(w))
                || (editor_op && sub.as_deref().is_some_and(|s| s != "view"));
            let mut paths = Vec::new();
            arg_paths(&args, 0, &mut paths);
            for p in &paths {
                let p = p.replace('\\', "/");
                if changes {
                    let what = change_description(&args).unwrap_or_else(|| call.name.clone());
                    match self.changes.iter_mut().find(|c| c.path == p) {
                        Some(c) => {
                            c.edits += 1;
                            c.last = what;
                            c.at = self.at;
                        }
                        None => self.changes.push(FileChange { path: p, edits: 1, last: what, at: self.at }),
                    }
                } else {
                    self.notes.add(Section::FilesRead, &p);
                    self.file_views.insert(call.id.clone());
                }
            }
            if let Some(todos) = args.get("todos").and_then(|v| v.as_array()) {
                self.todos = todos
                    .iter()
                    .filter_map(|t| {
                        let content = t.get("content").or_else(|| t.get("title")).and_then(|v| v.as_str())?;
                        let status = t.get("status").and_then(|v| v.as_str()).unwrap_or("pending");
                        Some((status.to_string(), content.to_string()))
                    })
                    .collect();
            }
            if let Some(command) = COMMAND_KEYS.iter().find_map(|k| args.get(*k).and_then(|v| v.as_str())) {
                if !editor_op {
                    self.call_commands.insert(call.id.clone(), command.to_string());
                    if shows_files(command) {
                        self.file_views.insert(call.id.clone());
                    }
                    self.git_seen |= command.contains("git ");
                }
            }
            if !editor_op {
                for k in COMMAND_KEYS {
                    match args.get(k) {
                        Some(serde_json::Value::String(s)) => self.notes.add(Section::Commands, s),
                        Some(serde_json::Value::Array(items)) => {
                            let parts: Vec<&str> = items.iter().filter_map(|i| i.as_str()).collect();
                            self.notes.add(Section::Commands, &parts.join(" "));
                        }
                        _ => {}
                    }
                }
            }
            let mut strings = Vec::new();
            arg_strings(&args, &mut strings);
            for s in strings {
                let s = head(s, SCAN_BYTES);
                for t in tokens(s) {
                    if !is_path(t) && is_identifier(t) && !is_noise_identifier(t) {
                        self.notes.add(Section::Identifiers, t);
                    }
                }
            }
        }
    }

    fn tool(&mut self, m: &Message, scan: &dyn Fn() -> Arc<Scan>) {
        self.at += 1;
        let tool = m.name.clone().or_else(|| m.tool_call_id.as_ref().and_then(|id| self.call_names.get(id).cloned()));
        let id = m.tool_call_id.clone().unwrap_or_default();
        let command = self.call_commands.get(&id).cloned();
        // A file's content is code and fixtures: no errors, ids or numbers are read from it.
        let shows_file = self.file_views.contains(&id) && !m.is_error;
        if let Some(c) = &command {
            if c.contains("git commit") && !m.is_error && !m.content.contains("nothing to commit") {
                let message = commit_message(c).unwrap_or_else(|| clip(first_line(&m.content), 100));
                self.commit = Some((self.at, message));
            }
            if runs_tests(c) {
                let passed = !m.is_error && !reports_failure(&m.content);
                let c = clip(c, 100);
                match self.tests.iter_mut().find(|(t, _)| *t == c) {
                    Some(t) => t.1 = passed,
                    None => self.tests.push((c, passed)),
                }
            }
        }
        if shows_file {
            return;
        }
        let error_lines: Vec<&str> =
            m.content.lines().filter(|l| is_error_line(l) && !looks_like_code(l)).take(3).collect();
        let label = tool.as_deref().map(|t| format!("{t}: ")).unwrap_or_default();
        if m.is_error {
            let line = error_lines.first().copied().unwrap_or_else(|| first_line(&m.content));
            self.errors.push(ErrorNote::new(clip(&format!("{label}{line}"), 200), tool.clone()));
        } else if error_lines.is_empty() {
            // A success resolves the open errors of the same tool.
            if let Some(t) = &tool {
                for e in
                    self.errors.iter_mut().filter(|e| e.tool.as_deref() == Some(t.as_str()) && e.resolution.is_none())
                {
                    e.resolution = Some(format!("a later {t} call succeeded"));
                }
            }
        } else {
            for line in error_lines {
                self.errors.push(ErrorNote::new(clip(&format!("{label}{line}"), 200), tool.clone()));
            }
        }
        self.add_scan(&scan());
    }

    fn finish(mut self) -> Notes {
        // Status: the task list, the tests' last runs, what is committed.
        for (status, content) in std::mem::take(&mut self.todos) {
            let status = match status.as_str() {
                "completed" | "done" => "done",
                "in_progress" | "in-progress" => "in progress",
                other => other,
            };
            self.notes.add(Section::Status, &format!("{status}: {content}"));
        }
        for (command, passed) in std::mem::take(&mut self.tests) {
            let outcome = if passed { "tests pass" } else { "tests fail" };
            self.notes.add(Section::Status, &format!("{outcome}: `{command}`"));
        }
        let since = self.commit.as_ref().map_or(0, |(at, _)| *at);
        let uncommitted: Vec<&str> = self.changes.iter().filter(|c| c.at > since).map(|c| c.path.as_str()).collect();
        if let Some((_, message)) = &self.commit {
            self.notes.add(Section::Status, &format!("committed: {message}"));
        }
        if (self.git_seen || self.commit.is_some()) && !uncommitted.is_empty() {
            let n = uncommitted.len();
            let names = uncommitted.iter().take(5).copied().collect::<Vec<_>>().join(", ");
            self.notes.add(Section::Status, &format!("not committed: {n} changed files ({names})"));
        }
        for c in std::mem::take(&mut self.changes) {
            let edits = if c.edits > 1 { format!(" ({} changes)", c.edits) } else { String::new() };
            self.notes.add(Section::FilesChanged, &format!("{}{edits}: {}", c.path, c.last));
        }
        for e in std::mem::take(&mut self.errors) {
            let mut line = e.text.clone();
            if let Some(fix) = e.fix.filter(|f| !f.is_empty()) {
                line.push_str(&format!(" -> {fix}"));
            }
            if let Some(r) = e.resolution {
                line.push_str(&format!(" (resolved: {r})"));
            }
            self.notes.add(Section::Errors, &line);
        }
        if let Some(request) = self.unanswered.take() {
            self.notes.add(Section::NextStep, &format!("answer the user's latest message: {request}"));
        }
        if let Some(s) = self.last_state.take() {
            // The last announced action is the next step.
            if let Some(next) = sentences(&s).into_iter().rev().find(|x| {
                let lower = x.to_lowercase();
                NEXT_WORDS.iter().any(|w| lower.starts_with(w))
            }) {
                self.notes.add(Section::NextStep, next);
            }
            // The last state is not repeated as a pending line.
            let line = clip(&s, Section::Pending.clip());
            if let Some(pending) = self.notes.lines.get_mut(&Section::Pending) {
                pending.retain(|p| *p != line);
            }
            self.notes.add(Section::LastState, &s);
        }
        self.notes
    }
}

/// The summary's first line: the heading the request's prompt asks for (its `{round}` the
/// request's round), or a neutral one.
fn title(request: &SummaryRequest) -> String {
    match &request.prompt.heading {
        Some(heading) => heading.replace("{round}", &request.round.to_string()),
        None => format!("## Summary (round {})", request.round),
    }
}

/// One line of the summary, with what the budget needs to know.
#[derive(Debug)]
struct Line {
    section: Section,
    text: String,
    priority: u8,
    order: usize,
    tokens: u64,
    kept: bool,
}

fn render(title: &str, lines: &[Line]) -> String {
    let mut out = String::from(title);
    out.push('\n');
    let mut current = None;
    for l in lines.iter().filter(|l| l.kept) {
        if current != Some(l.section) {
            out.push_str("\n### ");
            out.push_str(l.section.title());
            out.push('\n');
            current = Some(l.section);
        }
        out.push_str("- ");
        out.push_str(&l.text);
        out.push('\n');
    }
    out
}

impl OfflineSummarizer {
    /// The summary text for `request` over `ctx`, within `request.max_tokens` and
    /// `request.target_tokens` when set.
    pub fn summary_text(&self, ctx: &Context, request: &SummaryRequest) -> Result<String, SummaryFailure> {
        self.summary_counted(ctx, request, None).map(|(text, _)| text)
    }

    /// [`OfflineSummarizer::summary_text`], with the text's exact tokens when they were
    /// counted on the way.
    fn summary_counted(
        &self,
        ctx: &Context,
        request: &SummaryRequest,
        recorded: Option<&Store>,
    ) -> Result<(String, Option<u64>), SummaryFailure> {
        if request.max_tokens == 0 {
            return Err(SummaryFailure { reason: "max_tokens is 0".to_string() });
        }
        if let Some(&bad) = request.span.iter().find(|&&i| i >= ctx.len()) {
            return Err(SummaryFailure {
                reason: format!("span index {bad} is outside the context ({} entries)", ctx.len()),
            });
        }
        let mut g = Gatherer::default();
        if let Some(p) = &request.previous {
            g.previous(p);
        }
        for &i in &request.span {
            let Some(e) = ctx.get(i) else { continue };
            let m = e.message();
            match e.origin() {
                Origin::Inserted { what: Inserted::Acknowledgement } => {}
                Origin::Summary { .. } | Origin::Inserted { .. } => g.previous(&m.content),
                Origin::Recorded { .. } | Origin::Masked { .. }
                    if m.meta_flag(compaction::message::COMPACT_SUMMARY) =>
                {
                    g.previous(&m.content)
                }
                Origin::Recorded { .. } | Origin::Masked { .. } => {}
            }
        }
        if let Some(task) = request.task.as_deref().filter(|t| !t.trim().is_empty()) {
            if g.notes.has(Section::Task) {
                g.notes.add(Section::Requests, task);
            } else {
                g.notes.add(Section::Task, task);
            }
        }
        for &i in &request.span {
            let Some(e) = ctx.get(i) else { continue };
            // The span as the document cuts it before summarizing (`request.input`).
            let read = Read::new(recorded, e, request.input);
            let m: &Message = &read.message;
            if !matches!(e.origin(), Origin::Recorded { .. } | Origin::Masked { .. })
                || m.meta_flag(compaction::message::COMPACT_SUMMARY)
            {
                continue;
            }
            let scan = || read.scan();
            match m.role {
                Role::System => g.add_scan(&scan()),
                Role::User => {
                    let known = g.notes.has(Section::Task);
                    g.user(m, known, &scan);
                }
                Role::Assistant => g.assistant(m, &scan),
                Role::Tool => g.tool(m, &scan),
            }
        }
        let notes = g.finish();
        let limit = request.target_tokens.unwrap_or(DEFAULT_TARGET_TOKENS).clamp(1, request.max_tokens);
        let title = title(request);
        let shared = recorded;
        let Some(chars) = request.target_chars.map(|c| c.max(1) as usize) else {
            return Ok(self.fit(&title, notes, u64::from(limit), shared));
        };
        // A target in characters (000's "Max 500 karakter total"): shrink the token budget
        // until the text fits it, then cut what no line drop could.
        let mut max = u64::from(limit);
        loop {
            let (text, tokens) = self.fit(&title, notes.clone(), max, shared);
            let len = text.chars().count();
            if len <= chars {
                return Ok((text, tokens));
            }
            if max <= 1 {
                return Ok((text.chars().take(chars).collect(), None));
            }
            max = (max * chars as u64 / len as u64).min(max - 1).max(1);
        }
    }

    /// Render `notes` under `title` within `max` tokens, dropping the lowest-priority lines
    /// first; with the text's exact tokens when it was not cut. Line counts are kept in
    /// `shared` when given.
    fn fit(&self, title: &str, notes: Notes, max: u64, shared: Option<&Store>) -> (String, Option<u64>) {
        let mut lines = Vec::new();
        let mut order = 0;
        for (section, items) in notes.lines {
            let n = items.len();
            for (k, text) in items.into_iter().enumerate() {
                let line = format!("- {text}\n");
                let tokens = match shared {
                    Some(s) => s.line_tokens(&line, || self.exact.count(&line)),
                    None => self.exact.count(&line),
                };
                lines.push(Line { section, text, priority: section.priority(k, n), order, tokens, kept: true });
                order += 1;
            }
        }
        let heading = |s: Section| self.exact.count(&format!("\n### {}\n", s.title()));
        let mut drop_order: Vec<usize> = (0..lines.len()).collect();
        drop_order.sort_by_key(|&i| (lines[i].priority, lines[i].order));
        let mut live: BTreeMap<Section, usize> = BTreeMap::new();
        for l in &lines {
            *live.entry(l.section).or_default() += 1;
        }
        let mut estimate = self.exact.count(title)
            + 1
            + lines.iter().map(|l| l.tokens).sum::<u64>()
            + live.keys().map(|s| heading(*s)).sum::<u64>();
        let mut next = 0;
        // Drop the next line in drop order; false when none is left.
        let mut drop_one = |lines: &mut [Line], estimate: &mut u64| -> bool {
            let Some(&i) = drop_order.get(next) else { return false };
            next += 1;
            let l = &mut lines[i];
            l.kept = false;
            *estimate = estimate.saturating_sub(l.tokens);
            let left = live.entry(l.section).or_default();
            *left = left.saturating_sub(1);
            if *left == 0 {
                *estimate = estimate.saturating_sub(heading(l.section));
            }
            true
        };
        while estimate > max && drop_one(&mut lines, &mut estimate) {}
        loop {
            let text = render(title, &lines);
            let actual = self.exact.count(&text);
            if actual <= max {
                return (text, Some(actual));
            }
            // Lines are not exactly additive: drop at least one more line and measure again.
            let target = estimate.saturating_sub(actual - max);
            if !drop_one(&mut lines, &mut estimate) {
                return (self.cut_to(&text, max), None);
            }
            while estimate > target && drop_one(&mut lines, &mut estimate) {}
        }
    }

    /// The longest prefix of `text` (in characters) within `max` tokens.
    fn cut_to(&self, text: &str, max: u64) -> String {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let (mut lo, mut hi) = (0, chars.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let end = chars.get(mid).map_or(text.len(), |(b, _)| *b);
            if self.exact.count(&text[..end]) <= max {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let end = chars.get(lo).map_or(text.len(), |(b, _)| *b);
        text[..end].to_string()
    }
}

impl Summarizer for OfflineSummarizer {
    fn name(&self) -> String {
        "offline".to_string()
    }
    fn summarize(&self, ctx: &Context, request: &SummaryRequest) -> Result<Summary, SummaryFailure> {
        self.summarize_in(ctx, request, None)
    }
    fn summarize_with_store(
        &self,
        ctx: &Context,
        request: &SummaryRequest,
        store: Option<&Store>,
    ) -> Result<Summary, SummaryError> {
        self.summarize_in(ctx, request, store).map_err(SummaryError::from)
    }
}

impl OfflineSummarizer {
    /// [`Summarizer::summarize`], keeping the work on the conversation's recorded messages in
    /// `store` when given.
    fn summarize_in(
        &self,
        ctx: &Context,
        request: &SummaryRequest,
        store: Option<&Store>,
    ) -> Result<Summary, SummaryFailure> {
        let (text, counted) = self.summary_counted(ctx, request, store)?;
        let input_tokens = request
            .span
            .iter()
            .filter_map(|&i| ctx.get(i))
            .map(|e| Read::tokens(store, e, request.input, &self.exact))
            .sum();
        let output_tokens = counted.unwrap_or_else(|| self.exact.count(&text));
        Ok(Summary { text, input_tokens, output_tokens, cached_tokens: 0 })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::{Entry, ToolCall};

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: args.into() }
    }

    #[test]
    fn a_conversations_shared_messages_summarize_as_fresh_ones_do() {
        let conversation = std::sync::Arc::new(compaction::Conversation::new("c", session().to_messages()));
        let entries: Vec<Entry> =
            conversation.messages.iter().enumerate().map(|(i, m)| Entry::recorded(i, m.clone())).collect();
        let store = Store::new(&entries);
        let mut ctx = Context::new();
        for e in &entries {
            ctx.push(e.clone());
        }
        let summarizer = OfflineSummarizer::new();
        let cut = InputCuts { message_chars: Some(40), tool_result_chars: Some(20) };
        for cuts in [InputCuts::NONE, cut] {
            let mut request =
                SummaryRequest::new((0..ctx.len()).collect(), compaction_strategies::keep_last_n::prompt(), 300, 1);
            request.input = cuts;
            let fresh = summarizer.summarize(&ctx, &request).unwrap();
            // The ticket id is past the cut.
            assert_eq!(fresh.text.contains("PAY-4411"), cuts == InputCuts::NONE, "{}", fresh.text);
            // Twice: the second time the scans, cut sizes and line counts come from the store.
            for _ in 0..2 {
                assert_eq!(summarizer.summarize_with_store(&ctx, &request, Some(&store)).unwrap(), fresh);
            }
        }
        let kept = lock(&store.messages[1]);
        assert_eq!((kept.scans.len(), kept.tokens.len()), (2, 2), "one scan and size per input cut");
    }

    /// A small coding session touching every section.
    fn session() -> Context {
        Context::from_messages(vec![
            Message::system("You are a coding agent."),
            Message::user("Fix the flaky test in crates/parser/src/lexer.rs for ticket PAY-4411."),
            Message::assistant_calls(
                "Let me read the file.",
                vec![call("c1", "read_file", r#"{"path":"crates\\parser\\src\\lexer.rs"}"#)],
            ),
            Message::tool_result("c1", "read_file", "fn lex() {}\n// see crates/parser/src/token.rs"),
            Message::assistant_calls(
                "Running the tests.",
                vec![call("c2", "bash", r#"{"command":"cargo test -p parser"}"#)],
            ),
            Message::tool_result(
                "c2",
                "bash",
                "running 12 tests\ntest lex_unicode ... FAILED\nError: index out of bounds",
            )
            .with_error(),
            Message::assistant_calls(
                "I decided to use char_indices instead of byte offsets. TODO: add a regression test.",
                vec![call(
                    "c3",
                    "str_replace_editor",
                    r#"{"command":"str_replace","path":"crates/parser/src/lexer.rs","old_str":"a","new_str":"b"}"#,
                )],
            ),
            Message::tool_result("c3", "str_replace_editor", "edited"),
            Message::assistant_calls("Again.", vec![call("c4", "bash", r#"{"command":"cargo test -p parser"}"#)]),
            Message::tool_result("c4", "bash", "test result: ok. 12 passed; finished in 340 ms"),
            Message::user("Session 5f0c2a9e-1b2c-4d3e-8f90-a1b2c3d4e5f6 is done; remaining: update CHANGELOG.md"),
            Message::assistant("The fix is in; next I will write the regression test."),
        ])
    }

    fn request(span: std::ops::Range<usize>, max_tokens: u32) -> SummaryRequest {
        SummaryRequest {
            span: span.collect(),
            prompt: compaction_strategies::keep_last_n::prompt(),
            previous: None,
            task: None,
            max_tokens,
            target_tokens: None,
            target_chars: None,
            input: Default::default(),
            round: 1,
        }
    }

    fn section<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
        let heading = format!("### {title}");
        text.lines()
            .skip_while(|l| *l != heading)
            .skip(1)
            .take_while(|l| !l.starts_with("### "))
            .filter_map(|l| l.strip_prefix("- "))
            .collect()
    }

    #[test]
    fn extracts_every_section() {
        let ctx = session();
        let s = OfflineSummarizer::new().summarize(&ctx, &request(1..12, 2_000)).unwrap();
        let t = &s.text;
        assert!(t.starts_with("## Session Summary (Compaction Round 1)\n"), "{t}");
        assert_eq!(section(t, "Task"), ["Fix the flaky test in crates/parser/src/lexer.rs for ticket PAY-4411."]);
        assert_eq!(section(t, "Files changed"), ["crates/parser/src/lexer.rs: `a` -> `b`"]);
        assert_eq!(section(t, "Files read"), ["crates/parser/src/lexer.rs"]);
        assert_eq!(section(t, "Status"), ["tests pass: `cargo test -p parser`"]);
        // A file's content is code: the path in a comment of the file read is not an event.
        assert!(!t.contains("crates/parser/src/token.rs"), "{t}");
        assert!(section(t, "Files mentioned").contains(&"CHANGELOG.md"), "{t}");
        assert_eq!(section(t, "Commands"), ["cargo test -p parser"]);
        let ids = section(t, "Identifiers");
        assert!(ids.contains(&"PAY-4411") && ids.contains(&"5f0c2a9e-1b2c-4d3e-8f90-a1b2c3d4e5f6"), "{ids:?}");
        let numbers = section(t, "Numbers");
        assert!(numbers.contains(&"12 tests") && numbers.contains(&"340 ms"), "{numbers:?}");
        assert_eq!(
            section(t, "Errors"),
            ["bash: test lex_unicode ... FAILED -> I decided to use char_indices instead of byte offsets. TODO: add a \
              regression test. (resolved: a later bash call succeeded)"]
        );
        assert_eq!(section(t, "Decisions"), ["I decided to use char_indices instead of byte offsets."]);
        let pending = section(t, "Pending");
        assert!(pending.iter().any(|p| p.contains("TODO: add a regression test")), "{pending:?}");
        assert!(pending.iter().any(|p| p.contains("remaining: update CHANGELOG.md")), "{pending:?}");
        assert_eq!(
            section(t, "User requests"),
            ["Session 5f0c2a9e-1b2c-4d3e-8f90-a1b2c3d4e5f6 is done; remaining: update CHANGELOG.md"]
        );
        assert_eq!(section(t, "Last state"), ["The fix is in; next I will write the regression test."]);
        let exact = Exact::o200k();
        assert_eq!(s.output_tokens, exact.count(t));
        let span_tokens: u64 = (1..12).map(|i| ctx.get(i).unwrap().tokens(&exact)).sum();
        assert_eq!(s.input_tokens, span_tokens);
    }

    #[test]
    fn same_input_same_bytes() {
        let ctx = session();
        let a = OfflineSummarizer::new().summarize(&ctx, &request(1..12, 300)).unwrap();
        let b = OfflineSummarizer::new().summarize(&ctx, &request(1..12, 300)).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn fits_max_tokens_dropping_low_priority_lines_first() {
        let ctx = session();
        let s = OfflineSummarizer::new();
        let full = s.summarize(&ctx, &request(1..12, 2_000)).unwrap();
        for max in [1, 5, 12, 30, 60, 90, 150, 2_000] {
            let out = s.summarize(&ctx, &request(1..12, max)).unwrap();
            assert!(out.output_tokens <= u64::from(max), "{max}: {}", out.output_tokens);
        }
        assert!(full.output_tokens < 2_000);
        let tight = s.summarize(&ctx, &request(1..12, 100)).unwrap().text;
        // The task (priority 10), the changed file and the last state (8) stay; pending lines
        // (7), identifiers (6), numbers and mentions (4) go.
        assert_eq!(section(&tight, "Files changed"), ["crates/parser/src/lexer.rs: `a` -> `b`"]);
        for kept in ["### Task", "### Last state"] {
            assert!(tight.contains(kept), "{tight}");
        }
        for gone in ["### Pending", "### Identifiers", "### Numbers", "### Files mentioned"] {
            assert!(!tight.contains(gone), "{tight}");
        }
        // Tiny budgets cut the heading itself.
        let tiny = s.summarize(&ctx, &request(1..12, 5)).unwrap();
        assert!(tiny.output_tokens <= 5 && tiny.text.starts_with("## Session"), "{}", tiny.text);
    }

    #[test]
    fn fits_the_target_when_the_request_carries_one() {
        let ctx = session();
        let s = OfflineSummarizer::new();
        let capped = s.summarize(&ctx, &request(1..12, 150)).unwrap();
        assert!(capped.output_tokens > 60, "{}", capped.output_tokens);
        // The target is below the cap: the summary fits the target.
        let targeted = SummaryRequest { target_tokens: Some(60), ..request(1..12, 150) };
        let out = s.summarize(&ctx, &targeted).unwrap();
        assert!(out.output_tokens <= 60, "{}", out.output_tokens);
        assert!(out.output_tokens < capped.output_tokens);
        // A target above the cap leaves the cap in charge.
        let above = SummaryRequest { target_tokens: Some(5_000), ..request(1..12, 150) };
        assert_eq!(s.summarize(&ctx, &above).unwrap(), capped);
        // keep-last-n's defaults ask for 800 under a 1,000 cap.
        let p = compaction_strategies::keep_last_n::Params::default();
        assert_eq!((p.summary_target_tokens, p.summary_max_tokens), (800, 1_000));
    }

    /// 000's prompts, "Max 500 karakter total": the character target is met.
    #[test]
    fn fits_a_character_target() {
        let ctx = session();
        let s = OfflineSummarizer::new();
        let whole = s.summarize(&ctx, &request(1..12, 2_000)).unwrap();
        assert!(whole.text.chars().count() > 500, "{}", whole.text.chars().count());
        let chars = SummaryRequest { target_chars: Some(500), ..request(1..12, 200) };
        let out = s.summarize(&ctx, &chars).unwrap();
        assert!(out.text.chars().count() <= 500, "{}", out.text.chars().count());
        assert!(out.text.starts_with("## Session Summary"));
        let p = compaction_strategies::priority_chain::Params::default();
        assert_eq!((p.summary_max_chars, p.summary_max_tokens), (500, 200));
    }

    /// 001 cuts each tool result to 500 characters and each message to 2,000 before its
    /// summary call; 004 cuts tool results to 500. The offline summarizer reads the same cut
    /// text as the LLM path: a path past the cut is in neither summary, and the input is
    /// counted as cut.
    #[test]
    fn reads_the_span_through_the_documents_cuts() {
        let late = format!("{} see src/late_module.rs", "filler ".repeat(100));
        let ctx = Context::from_messages(vec![
            Message::system("s"),
            Message::user("Fix the parser"),
            Message::assistant_calls("", vec![call("c1", "bash", r#"{"command":"make build"}"#)]),
            Message::tool_result("c1", "bash", late.clone()),
            Message::user(format!("{} and also src/far_away.rs", "word ".repeat(500))),
            Message::assistant("done"),
        ]);
        let s = OfflineSummarizer::new();
        let whole = s.summarize(&ctx, &request(1..6, 2_000)).unwrap();
        assert!(whole.text.contains("src/late_module.rs"), "{}", whole.text);
        assert!(whole.text.contains("src/far_away.rs"), "{}", whole.text);
        for cuts in
            [compaction_strategies::keep_last_n::INPUT_CUTS, compaction_strategies::prune_then_summarize::INPUT_CUTS]
        {
            let cut = s.summarize(&ctx, &SummaryRequest { input: cuts, ..request(1..6, 2_000) }).unwrap();
            assert!(!cut.text.contains("src/late_module.rs"), "{}", cut.text);
            assert!(cut.input_tokens < whole.input_tokens);
        }
        let cut = s
            .summarize(
                &ctx,
                &SummaryRequest { input: compaction_strategies::keep_last_n::INPUT_CUTS, ..request(1..6, 2_000) },
            )
            .unwrap();
        assert!(!cut.text.contains("src/far_away.rs"), "001 cuts the 2,500-character message at 2,000");
        let cut = s
            .summarize(
                &ctx,
                &SummaryRequest {
                    input: compaction_strategies::prune_then_summarize::INPUT_CUTS,
                    ..request(1..6, 2_000)
                },
            )
            .unwrap();
        assert!(cut.text.contains("src/far_away.rs"), "004 leaves messages whole");
    }

    #[test]
    fn integrates_the_previous_summary_before_the_new_span() {
        let ctx = session();
        let s = OfflineSummarizer::new();
        let first = s.summarize(&ctx, &request(1..6, 2_000)).unwrap().text;
        let mut second = request(6..12, 2_000);
        second.previous = Some(first.clone());
        second.round = 2;
        second.task = Some("Session 5f0c2a9e".into());
        let text = s.summarize(&ctx, &second).unwrap().text;
        assert!(text.starts_with("## Session Summary (Compaction Round 2)"));
        // The original task comes from the previous summary; `task` becomes a later request.
        assert_eq!(section(&text, "Task"), ["Fix the flaky test in crates/parser/src/lexer.rs for ticket PAY-4411."]);
        assert_eq!(section(&text, "User requests")[0], "Session 5f0c2a9e");
        // Previous lines first, then the new span's, without duplicates.
        assert_eq!(section(&text, "Files read"), ["crates/parser/src/lexer.rs"]);
        assert_eq!(section(&text, "Files changed"), ["crates/parser/src/lexer.rs: `a` -> `b`"]);
        let errors = section(&text, "Errors");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            section(&text, "Last state"),
            ["Running the tests.", "The fix is in; next I will write the regression test."]
        );

        // Free text that is not in this format is kept line by line.
        let mut third = request(10..12, 2_000);
        third.previous = Some("The user wants the parser fixed.\nWe agreed on a patch release.".into());
        let text = s.summarize(&ctx, &third).unwrap().text;
        assert_eq!(
            section(&text, "Earlier summary"),
            ["The user wants the parser fixed.", "We agreed on a patch release."]
        );
    }

    #[test]
    fn summaries_and_notices_inside_the_span_are_integrated() {
        let mut entries = vec![Entry::recorded(0, Message::system("sys"))];
        entries.push(Entry::new(
            Message::user(format!(
                "{}## Summary (round 1)\n\n### Task\n- Book ZFA04Y\n",
                compaction_strategies::split_fraction::SUMMARY_PREFIX
            )),
            Origin::Summary { round: 1, covers: vec![1, 2] },
        ));
        entries
            .push(Entry::new(Message::assistant("Understood."), Origin::Inserted { what: Inserted::Acknowledgement }));
        entries.push(Entry::recorded(3, Message::user("Also add a bag.")));
        entries.push(Entry::recorded(4, Message::assistant("Added 1 bag for $35.")));
        let ctx = Context::from_entries(entries);
        let text = OfflineSummarizer::new().summary_text(&ctx, &request(1..5, 500)).unwrap();
        assert_eq!(section(&text, "Task"), ["Book ZFA04Y"]);
        assert_eq!(section(&text, "User requests"), ["Also add a bag."]);
        assert_eq!(section(&text, "Numbers"), ["$35"]);
        assert!(!text.contains("Understood"), "{text}");
        assert!(!text.contains("[COMPACT SUMMARY]"), "{text}");
    }

    #[test]
    fn bad_requests_fail_as_values() {
        let ctx = session();
        let s = OfflineSummarizer::new();
        let err = s.summarize(&ctx, &request(10..20, 100)).unwrap_err();
        assert_eq!(err.reason, "span index 12 is outside the context (12 entries)");
        assert_eq!(s.summarize(&ctx, &request(1..3, 0)).unwrap_err().reason, "max_tokens is 0");
    }

    #[test]
    fn recognizers() {
        for id in ["ABC-1234", "ZFA04Y", "8JX2WO", "#W2378156", "mia_li_3668", "3f9a2c1", "https://example.com/x"] {
            assert!(is_identifier(id), "{id}");
        }
        for not in ["hello", "2024", "v1", "and-or", "HTTP", "e.g", "abcdef"] {
            assert!(!is_identifier(not), "{not}");
        }
        for path in ["src/main.rs", "Cargo.toml", "/etc/hosts", "./run.sh", "a\\b.py"] {
            assert!(is_path(path), "{path}");
        }
        for not in ["and/or", "1/2", "e.g", "https://x.io/a.rs", "3.14"] {
            assert!(!is_path(not), "{not}");
        }
        let mut notes = Notes::default();
        numbers("took 42 ms, used 80% and 3.5GB for $120.50 (10 tests) in 2024", &mut notes);
        assert_eq!(notes.lines[&Section::Numbers], ["42 ms", "80%", "3.5GB", "$120.50", "10 tests"]);
        assert_eq!(clip("  a   b  c ", 10), "a b c");
        assert_eq!(clip("alpha beta gamma", 10), "alpha beta...");
        assert_eq!(sentences("One. Two! Three?\nFour"), ["One.", "Two!", "Three?", "Four"]);
    }
}
