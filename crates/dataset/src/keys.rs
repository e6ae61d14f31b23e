//! Answer keys: the facts an agent must still know at a checkpoint, written by a person who
//! read the history before it, kept in files of their own and attached to a dataset's
//! conversations by id.
//!
//! A keys file is JSON lines, one key a line: a probe in the dataset schema with the id of its
//! conversation beside it.
//!
//! ```json
//! {"conversation": "s1", "id": "k1-03", "asked_at": 120, "kind": "constraint", "tier": "critical",
//!  "question": "Where does the database run?", "facts": [["runs in docker", "docker compose"]],
//!  "meaning": "Postgres runs in a container the user starts.", "source_message": 40,
//!  "source_messages": [40, 52], "in_real_summary": "verbatim"}
//! ```
//!
//! `origin` may be left out (a keys file holds written keys; any other origin is an error) and
//! so may `answer` (it is the `meaning`). [`load_keys`] reads a file, [`attach`] puts its keys on
//! the conversations they name, replacing the written keys they had; the keys are then checked
//! with the rest of the conversation ([`crate::check_keys`]).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use compaction::{Conversation, Probe, ProbeOrigin};

use crate::{DatasetError, Problem};

/// A keys file, loaded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Keys {
    /// The file, as opened.
    pub path: PathBuf,
    /// The keys that loaded, by conversation id, in file order, each with its 1-based line.
    pub by_conversation: BTreeMap<String, Vec<(usize, Probe)>>,
    /// Lines that could not be read as a key, and file-level problems.
    pub problems: Vec<DatasetError>,
}

impl Keys {
    /// Every key, in conversation order.
    pub fn len(&self) -> usize {
        self.by_conversation.values().map(Vec::len).sum()
    }

    /// No key loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The distinct checkpoints (conversation, `asked_at`).
    pub fn checkpoints(&self) -> usize {
        self.by_conversation
            .values()
            .map(|keys| {
                let mut at: Vec<Option<usize>> = keys.iter().map(|(_, k)| k.asked_at).collect();
                at.sort_unstable();
                at.dedup();
                at.len()
            })
            .sum()
    }
}

/// Load a keys file. Never fails: an unreadable file or a bad line is a problem naming the
/// file, the line and the field, and the other lines still load.
pub fn load_keys(path: impl AsRef<Path>) -> Keys {
    let path = path.as_ref();
    let mut keys = Keys { path: path.to_path_buf(), ..Keys::default() };
    let file = match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(std::io::Error::other("not a regular file; give a keys file (JSON lines)")),
        _ => std::fs::File::open(path),
    };
    let file = match file {
        Ok(f) => f,
        Err(e) => {
            keys.problems.push(DatasetError::new(Problem::Io { detail: e.to_string() }).in_file(path));
            return keys;
        }
    };
    // Probe ids per conversation, to report a repeated one where it is.
    let mut ids: HashMap<(String, String), usize> = HashMap::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let number = i + 1;
        let at = |p: Problem| DatasetError::new(p).in_file(path).at_line(number);
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                keys.problems.push(at(Problem::Io { detail: e.to_string() }));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match parse_key(&line) {
            Ok((conversation, probe)) => {
                if let Some(first) = ids.insert((conversation.clone(), probe.id.clone()), number) {
                    keys.problems.push(
                        at(Problem::DuplicateProbeId { id: probe.id.clone(), first })
                            .in_conversation(Some(&conversation))
                            .at_field("id"),
                    );
                    continue;
                }
                keys.by_conversation.entry(conversation).or_default().push((number, probe));
            }
            Err((field, problem)) => keys.problems.push(at(problem).at_field(field)),
        }
    }
    keys
}

/// One line of a keys file: its conversation id and the key as a probe.
fn parse_key(line: &str) -> Result<(String, Probe), (String, Problem)> {
    let mut value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| (String::new(), Problem::MalformedJson { column: e.column(), detail: e.to_string() }))?;
    let Some(object) = value.as_object_mut() else {
        return Err((
            String::new(),
            Problem::WrongType { expected: "an object".into(), found: json_type(&value).into() },
        ));
    };
    let conversation = match object.remove("conversation") {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => s,
        Some(serde_json::Value::String(_)) => return Err(("conversation".into(), Problem::EmptyConversationId)),
        Some(other) => {
            return Err((
                "conversation".into(),
                Problem::WrongType { expected: "string".into(), found: json_type(&other).into() },
            ))
        }
        None => return Err(("conversation".into(), Problem::MissingField)),
    };
    match object.get("origin") {
        None => {
            object.insert("origin".into(), "written".into());
        }
        Some(serde_json::Value::String(s)) if s == "written" => {}
        Some(other) => {
            return Err((
                "origin".into(),
                Problem::UnknownValue {
                    what: "origin in a keys file".into(),
                    value: other.to_string(),
                    allowed: vec!["written".into()],
                },
            ))
        }
    }
    if !object.contains_key("answer") {
        if let Some(meaning) = object.get("meaning").cloned() {
            object.insert("answer".into(), meaning);
        }
    }
    for field in ["id", "kind", "question", "answer", "facts", "source_message", "asked_at"] {
        if !object.contains_key(field) {
            return Err((field.into(), Problem::MissingField));
        }
    }
    let probe: Probe = serde_json::from_value(value)
        .map_err(|e| (String::new(), Problem::Invalid { column: None, detail: e.to_string() }))?;
    debug_assert_eq!(probe.origin, Some(ProbeOrigin::Written));
    Ok((conversation, probe))
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// What [`attach`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attached {
    /// Keys put on a conversation.
    pub keys: usize,
    /// Conversations that got keys.
    pub conversations: usize,
    /// Conversations the keys file names that are not among the conversations given, each
    /// with the line of its first key.
    pub unknown: Vec<(String, usize)>,
}

/// Put `keys` on the conversations they name: each named conversation loses the written keys it
/// had (a keys file replaces them) and gets the file's, after its other probes. A key whose
/// probe id another probe of the conversation already has is renamed `written-<id>`.
pub fn attach<'a>(conversations: impl IntoIterator<Item = &'a mut Conversation>, keys: &Keys) -> Attached {
    let mut out = Attached::default();
    let mut used: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for conv in conversations {
        let Some(list) = keys.by_conversation.get(&conv.id) else { continue };
        used.insert(keys.by_conversation.get_key_value(&conv.id).map(|(k, _)| k.as_str()).unwrap_or_default());
        conv.probes.retain(|p| !p.is_written());
        let taken: std::collections::HashSet<String> = conv.probes.iter().map(|p| p.id.clone()).collect();
        for (_, key) in list {
            let mut key = key.clone();
            if taken.contains(&key.id) {
                key.id = format!("written-{}", key.id);
            }
            conv.probes.push(key);
            out.keys += 1;
        }
        out.conversations += 1;
    }
    out.unknown = keys
        .by_conversation
        .iter()
        .filter(|(id, _)| !used.contains(id.as_str()))
        .map(|(id, list)| (id.clone(), list.first().map(|(line, _)| *line).unwrap_or(0)))
        .collect();
    out
}

/// Whether one of `probes` tests `key`'s facts at its checkpoint: a probe asked there (with no
/// `asked_at`, or asked at or after the checkpoint, and not out of date there) whose source
/// message is before it, with a fact alias that occurs in one of the key's aliases or holds one
/// (normalized, at word boundaries; common words and bare small numbers left out).
pub fn tested_by<'a>(key: &Probe, probes: impl IntoIterator<Item = &'a Probe>) -> bool {
    use crate::text::{expand_aliases, is_weak_alias, normalize, occurs};
    let Some(at) = key.asked_at else { return false };
    let key_aliases: Vec<String> = key.facts.iter().flat_map(|f| expand_aliases(f)).collect();
    probes.into_iter().filter(|p| !p.is_written()).any(|p| {
        p.source_message < at
            && p.asked_at.is_none_or(|a| a >= at)
            && p.stands_at(at)
            && p.facts.iter().flatten().filter(|a| !is_weak_alias(a)).any(|alias| {
                let d = normalize(alias);
                !d.is_empty() && key_aliases.iter().any(|k| occurs(k, &d) || occurs(&d, k))
            })
    })
}

/// What a person needs to write keys for `conv` at checkpoint `at` (its first `at` messages):
/// every human message in full (injected text, queued messages and command output marked),
/// the to-do list as it stands, the questions asked and the answers given, every git and test
/// command with its outcome, every event in one line, and the last `full` events in full
/// (each clipped at `clip` characters). Summaries a recorded agent wrote are hidden: a key is
/// written from the history, before any summary is read.
pub fn authoring_view(conv: &Conversation, at: usize, full: usize, clip: usize) -> String {
    use compaction::Role;
    use std::fmt::Write as _;
    let at = at.min(conv.messages.len());
    let ms = &conv.messages[..at];
    let mut out = String::new();
    let hidden = |m: &compaction::Message| m.meta_flag(compaction::message::COMPACT_SUMMARY);
    let marks = |m: &compaction::Message| {
        let mut v: Vec<&str> = ["injected", "queued", "synthetic"].into_iter().filter(|k| m.meta_flag(k)).collect();
        if m.role == Role::User && is_command_output(&m.content) && !v.contains(&"injected") {
            v.push("command output");
        }
        v
    };
    let _ = writeln!(
        out,
        "# conversation {} (source {}), checkpoint at {at} of {} messages\n# Summaries the recorded agent wrote are hidden: write keys from the history alone.\n",
        conv.id,
        conv.source,
        conv.messages.len()
    );
    let _ = writeln!(out, "## Human messages (index: text); marked: injected, queued, command output");
    for (i, m) in ms.iter().enumerate() {
        if m.role == Role::User {
            if hidden(m) {
                let _ = writeln!(out, "[{i}] [a recorded summary: hidden]");
                continue;
            }
            let mk = marks(m);
            let text = if mk.is_empty() { m.content.clone() } else { one_line(&m.content, 300) };
            let tag = if mk.is_empty() { String::new() } else { format!(" [{}]", mk.join(", ")) };
            let _ = writeln!(out, "[{i}]{tag} {text}\n");
        } else if m.role == Role::Tool && is_rejection(&m.content) {
            let _ = writeln!(
                out,
                "[{i}] [a tool call the user rejected, with their words] {}\n",
                clip_to(&m.content, 1500)
            );
        }
    }
    let _ = writeln!(out, "\n## The to-do list as it stands");
    let todo =
        ms.iter().enumerate().rev().find_map(|(i, m)| {
            m.tool_calls.iter().rev().find(|c| TODO_TOOLS.contains(&c.name.as_str())).map(|c| (i, c))
        });
    match todo {
        Some((i, c)) => {
            let _ = writeln!(out, "[{i}] {}: {}", c.name, clip_to(&c.arguments, 4000));
        }
        None => {
            let _ = writeln!(out, "(none)");
        }
    }
    let _ = writeln!(out, "\n## Questions asked, plans proposed, and the answers");
    let mut results: HashMap<&str, usize> = HashMap::new();
    for (i, m) in ms.iter().enumerate() {
        if let Some(id) = m.tool_call_id.as_deref() {
            results.insert(id, i);
        }
    }
    for (i, m) in ms.iter().enumerate() {
        for c in m.tool_calls.iter().filter(|c| QUESTION_TOOLS.contains(&c.name.as_str())) {
            let _ = writeln!(out, "[{i}] {}: {}", c.name, clip_to(&c.arguments, 3000));
            if let Some(&j) = results.get(c.id.as_str()) {
                let _ = writeln!(out, "   -> [{j}] {}", clip_to(&ms[j].content, 2000));
            }
        }
    }
    let _ = writeln!(out, "\n## git and test commands with their outcome");
    for (i, m) in ms.iter().enumerate() {
        for c in m.tool_calls.iter().filter(|c| is_git_or_test(&c.arguments)) {
            let outcome = match results.get(c.id.as_str()) {
                Some(&j) => {
                    let r = &ms[j];
                    let tail: Vec<&str> = r.content.trim().lines().rev().take(3).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    format!("[{j}]{} {}", if r.is_error { " ERROR" } else { "" }, one_line(&tail.join(" | "), 300))
                }
                None => "(no result before the checkpoint)".to_string(),
            };
            let _ = writeln!(out, "[{i}] {}\n      {outcome}", one_line(&call_summary(c), 300));
        }
    }
    let _ = writeln!(out, "\n## Every event in one line");
    for (i, m) in ms.iter().enumerate() {
        match m.role {
            _ if hidden(m) => {
                let _ = writeln!(out, "[{i}] user: [a recorded summary: hidden]");
            }
            Role::Assistant => {
                let _ = writeln!(out, "[{i}] assistant: {}", one_line(&m.content, 200));
                for c in &m.tool_calls {
                    let _ = writeln!(out, "      call {}", one_line(&call_summary(c), 240));
                }
            }
            Role::Tool => {
                let first = m.content.trim().lines().next().unwrap_or_default();
                let name = m.name.as_deref().unwrap_or_default();
                let err = if m.is_error { " ERROR" } else { "" };
                let _ = writeln!(out, "[{i}] tool {name}{err}: {}", one_line(first, 160));
            }
            role => {
                let mk = marks(m);
                let tag = if mk.is_empty() { String::new() } else { format!("[{}] ", mk.join(", ")) };
                let _ = writeln!(out, "[{i}] {}: {tag}{}", role.as_str(), one_line(&m.content, 200));
            }
        }
    }
    let start = at.saturating_sub(full);
    let _ = writeln!(out, "\n## The last {} events in full (each clipped at {clip} characters)", at - start);
    for (i, m) in ms.iter().enumerate().skip(start) {
        if hidden(m) {
            let _ = writeln!(out, "\n--- [{i}] user: [a recorded summary: hidden]");
            continue;
        }
        let mk = marks(m);
        let tag = if mk.is_empty() { String::new() } else { format!(" [{}]", mk.join(", ")) };
        let err = if m.is_error { " ERROR" } else { "" };
        let _ = writeln!(out, "\n--- [{i}] {}{tag}{err}\n{}", m.role.as_str(), clip_to(&m.content, clip));
        for c in &m.tool_calls {
            let _ = writeln!(out, "  call {}: {}", c.name, clip_to(&c.arguments, clip));
        }
    }
    out
}

const TODO_TOOLS: [&str; 5] = ["TodoWrite", "TaskCreate", "TaskUpdate", "todo_write", "update_plan"];
const QUESTION_TOOLS: [&str; 2] = ["AskUserQuestion", "ExitPlanMode"];

fn one_line(s: &str, n: usize) -> String {
    let folded = s.split_whitespace().collect::<Vec<_>>().join(" ");
    clip_to(&folded, n)
}

fn clip_to(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

/// A user-role message that is the output of a command the harness ran (`<bash-stdout>`,
/// `<local-command-stdout>`, `<command-name>`).
fn is_command_output(text: &str) -> bool {
    let t = text.trim_start();
    ["<bash-stdout>", "<bash-stderr>", "<bash-input>", "<local-command-stdout>", "<command-name>", "<command-message>"]
        .iter()
        .any(|tag| t.starts_with(tag))
}

/// A tool result that carries the user's rejection of the call, often with their words.
fn is_rejection(text: &str) -> bool {
    text.contains("The user doesn't want to proceed")
        || text.contains("the user said:")
        || text.contains("The user provided the following reason")
}

fn is_git_or_test(arguments: &str) -> bool {
    const MARKERS: [&str; 16] = [
        "git commit",
        "git push",
        "git merge",
        "git checkout",
        "git switch",
        "git rebase",
        "git stash",
        "git reset",
        "gh pr",
        "cargo test",
        "pytest",
        "npm test",
        "go test",
        "mix test",
        "make test",
        "npm run test",
    ];
    MARKERS.iter().any(|m| arguments.contains(m))
}

/// A tool call in one line: its name and its main arguments.
fn call_summary(call: &compaction::ToolCall) -> String {
    const KEYS: [&str; 8] = ["command", "file_path", "path", "pattern", "query", "description", "url", "content"];
    let Ok(serde_json::Value::Object(args)) = serde_json::from_str::<serde_json::Value>(&call.arguments) else {
        return format!("{}({})", call.name, one_line(&call.arguments, 200));
    };
    let mut parts: Vec<String> = Vec::new();
    for k in KEYS {
        if let Some(v) = args.get(k) {
            parts.push(format!(
                "{k}={}",
                one_line(&v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()), 120)
            ));
        }
    }
    for (k, v) in args.iter().filter(|(k, _)| !KEYS.contains(&k.as_str())).take(6usize.saturating_sub(parts.len())) {
        parts.push(format!("{k}={}", one_line(&v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()), 80)));
    }
    format!("{}({})", call.name, parts.join("; "))
}

/// How many answer keys the derived probes (and the generated ones) test at the keys'
/// checkpoints ([`tested_by`]), by source and tier.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// (source, tier) -> (keys, tested by a derived probe, tested by a generated probe,
    /// conversations with generated probes at all).
    pub rows: BTreeMap<(String, compaction::Tier), CoverageRow>,
    /// The critical keys no derived probe tests, in the order they were counted.
    pub untested: Vec<Untested>,
}

/// A critical key no derived probe tests at its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untested {
    /// The source (dataset name).
    pub source: String,
    /// The conversation's id.
    pub conversation: String,
    /// The key's id.
    pub key: String,
    /// Its checkpoint.
    pub asked_at: usize,
    /// Its question.
    pub question: String,
    /// Its facts, each with its aliases joined by ` | `.
    pub facts: Vec<String>,
}

/// One row of [`Coverage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoverageRow {
    /// Keys of this source and tier.
    pub keys: usize,
    /// Keys a derived probe tests.
    pub derived: usize,
    /// Keys a generated probe tests.
    pub generated: usize,
    /// Keys whose conversation has generated probes at all (the generated share's denominator).
    pub with_generated: usize,
}

impl Coverage {
    /// Count `conv`'s keys, under `source`.
    pub fn add(&mut self, source: &str, conv: &Conversation) {
        let derived: Vec<&Probe> =
            conv.probes.iter().filter(|p| p.id.starts_with(crate::probes::DERIVED_PREFIX)).collect();
        let generated: Vec<&Probe> = conv.probes.iter().filter(|p| p.id.starts_with(GENERATED_PREFIX)).collect();
        for key in conv.probes.iter().filter(|p| p.is_written()) {
            let row = self.rows.entry((source.to_string(), key.tier())).or_default();
            row.keys += 1;
            let tested = tested_by(key, derived.iter().copied());
            row.derived += usize::from(tested);
            if !tested && key.tier() == compaction::Tier::Critical {
                self.untested.push(Untested {
                    source: source.to_string(),
                    conversation: conv.id.clone(),
                    key: key.id.clone(),
                    asked_at: key.asked_at.unwrap_or(0),
                    question: key.question.clone(),
                    facts: key.facts.iter().map(|f| f.join(" | ")).collect(),
                });
            }
            if !generated.is_empty() {
                row.with_generated += 1;
                row.generated += usize::from(tested_by(key, generated.iter().copied()));
            }
        }
    }

    /// The table `probes audit --keys` prints: one row per source and tier, then all sources.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::from(
            "\nanswer keys tested by the probes at the same checkpoint\nsource                                  tier       keys  derived            generated\n",
        );
        let share = |n: usize, d: usize| {
            if d == 0 {
                "-".to_string()
            } else {
                format!("{n} ({:.0}%)", 100.0 * n as f64 / d as f64)
            }
        };
        let line = |out: &mut String, source: &str, tier: compaction::Tier, row: &CoverageRow| {
            let generated = if row.with_generated == 0 {
                "none generated".to_string()
            } else {
                format!("{} of {}", share(row.generated, row.with_generated), row.with_generated)
            };
            let _ = writeln!(
                out,
                "{source:<40}{:<11}{:>4}  {:<19}{generated}",
                tier.as_str(),
                row.keys,
                share(row.derived, row.keys)
            );
        };
        let mut total: BTreeMap<compaction::Tier, CoverageRow> = BTreeMap::new();
        for ((source, tier), row) in &self.rows {
            let t = total.entry(*tier).or_default();
            t.keys += row.keys;
            t.derived += row.derived;
            t.generated += row.generated;
            t.with_generated += row.with_generated;
            line(&mut out, source, *tier, row);
        }
        for (tier, row) in &total {
            line(&mut out, "all", *tier, row);
        }
        out
    }

    /// The critical keys no derived probe tests, one a line: source, conversation, key,
    /// checkpoint, question and facts.
    pub fn render_untested(&self) -> String {
        use std::fmt::Write as _;
        let mut out = format!("\ncritical keys no derived probe tests: {}\n", self.untested.len());
        for u in &self.untested {
            let _ = writeln!(
                out,
                "{} {} {} @{}: {} [{}]",
                u.source,
                u.conversation,
                u.key,
                u.asked_at,
                u.question,
                u.facts.join("; ")
            );
        }
        out
    }
}

/// The id prefix of probes a model wrote (`probes generate`).
pub const GENERATED_PREFIX: &str = "llm-";
