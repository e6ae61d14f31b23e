//! The families derived from what an agent records as structure rather than prose: its to-do
//! list with each item's status, the questions it asked and the answer chosen, the plan the user
//! approved or rejected, what it committed, pushed and opened as a pull request, and the
//! constraints the user stated in their own messages. Each is a fact the rest of the work
//! depends on, so each is critical.

use compaction::{ProbeKind, Role, Tier};
use serde_json::Value;

use super::work::key_phrase;
use super::{clip, facts, is_real_user, request_text, Candidate, Deriver};

/// User-role text a person did not type as a request: the output of a command they ran in the
/// harness (`<bash-stdout>`), a notification, a slash command with no arguments.
pub(super) fn is_command_text(text: &str) -> bool {
    let t = text.trim_start();
    const TAGS: [&str; 6] = [
        "<bash-input>",
        "<bash-stdout>",
        "<bash-stderr>",
        "<agent-notification>",
        "<command-message>",
        "<command-name>",
    ];
    TAGS.iter().any(|tag| t.starts_with(tag)) && command_args(text).is_none()
}

/// The arguments of a slash command (`<command-args>...</command-args>`), when it has any.
pub(super) fn command_args(text: &str) -> Option<String> {
    let t = text.trim_start();
    if !(t.starts_with("<command-message>") || t.starts_with("<command-name>")) {
        return None;
    }
    let start = t.find("<command-args>")? + "<command-args>".len();
    let end = t[start..].find("</command-args>").map_or(t.len(), |e| start + e);
    let args = t[start..end].trim();
    (!args.is_empty()).then(|| args.to_string())
}

/// Words that open a constraint or a preference.
const CONSTRAINTS: [&str; 14] = [
    "don't",
    "dont",
    "do not",
    "never",
    "only",
    "always",
    "must",
    "mustn't",
    "must not",
    "without",
    "instead of",
    "no need to",
    "avoid",
    "make sure",
];

/// One to-do item with its status.
struct Todo {
    text: String,
    status: String,
}

/// The items of a to-do list call: `TodoWrite`'s `todos`, Codex's `update_plan` `plan`.
fn todo_items(arguments: &str) -> Vec<Todo> {
    let Ok(v) = serde_json::from_str::<Value>(arguments) else { return Vec::new() };
    let list = v.get("todos").or_else(|| v.get("plan")).and_then(Value::as_array).cloned().unwrap_or_default();
    list.iter()
        .filter_map(|t| {
            let text = t.get("content").or_else(|| t.get("step")).and_then(Value::as_str)?;
            let status = t.get("status").and_then(Value::as_str).unwrap_or("pending");
            Some(Todo { text: text.to_string(), status: status.to_string() })
        })
        .collect()
}

/// The facts of one item's text: its key phrase (2 to 8 words) and its identifiers.
fn item_facts(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // A short item is its own phrase; a long one its key phrase (never cut inside a token).
    let item = text.trim().trim_end_matches(['.', ':', ';']);
    if (2..=8).contains(&item.split_whitespace().count()) && !item.contains('\n') {
        out.push(item.to_string());
    } else if let Some(p) = key_phrase(text) {
        out.push(p);
    }
    for token in text.split_whitespace() {
        let t = token.trim_matches(|c: char| "(),:;.'\"`".contains(c));
        if is_symbol(t) && facts::allowed(t) && !out.contains(&t.to_string()) {
            out.push(t.to_string());
        }
    }
    out.truncate(3);
    out
}

/// A symbol, path or file name: `send_with_retry`, `RetryPolicy`, `docs/retries.md`.
fn is_symbol(t: &str) -> bool {
    let inner_upper = t.chars().skip(1).any(char::is_uppercase) && t.chars().any(char::is_lowercase);
    t.chars().count() >= 4
        && t.chars().all(|c| c.is_alphanumeric() || "_./-:".contains(c))
        && (t.contains('_') || t.contains('/') || inner_upper || t.split('.').filter(|p| !p.is_empty()).count() >= 2)
}

/// The value of `"key"` in a shell command's first `-m`/`--title` style argument.
fn quoted_after(cmd: &str, flags: &[&str]) -> Option<String> {
    for flag in flags {
        let Some(at) = cmd.find(flag) else { continue };
        let rest = cmd[at + flag.len()..].trim_start();
        let rest = rest.strip_prefix('=').unwrap_or(rest);
        let (quote, body) = match rest.chars().next()? {
            q @ ('"' | '\'') => (q, &rest[1..]),
            _ => (' ', rest),
        };
        // A heredoc message: `-m "$(cat <<'EOF'\nsubject\n...`: the first line after it.
        if body.starts_with("$(cat <<") {
            let line = body.split('\n').nth(1)?.trim();
            return (!line.is_empty()).then(|| line.to_string());
        }
        let end = body.find(quote).unwrap_or(body.len());
        let value = body[..end].lines().next().unwrap_or_default().trim();
        if !value.is_empty() {
            return Some(value.to_string());
        }
    }
    None
}

/// A critical candidate whose facts are all in its source message.
fn critical(kind: ProbeKind, question: &str, answer: String, facts: Vec<Vec<String>>, source: usize) -> Candidate {
    Candidate {
        kind,
        question: question.to_string(),
        answer,
        facts,
        source,
        secondary: false,
        fact_sources: Vec::new(),
        tier: Tier::Critical,
    }
}

impl Deriver<'_> {
    /// The command of a shell call, when the call is one.
    fn shell_command(&self, arguments: &str) -> Option<String> {
        super::command_of(arguments)
    }

    /// The result of call `id` made in message `i`: its index.
    fn result_of(&self, i: usize, id: &str) -> Option<usize> {
        (i + 1..self.conv.messages.len())
            .take(64)
            .find(|&j| self.msg(j).role == Role::Tool && self.msg(j).tool_call_id.as_deref() == Some(id))
    }

    /// Every to-do list the agent wrote: the items still open as the next step, the items it
    /// marked done as work done; the list as it stands at each write.
    pub(super) fn todos(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            for call in
                m.tool_calls.iter().filter(|c| matches!(c.name.as_str(), "TodoWrite" | "todo_write" | "update_plan"))
            {
                let items = todo_items(&call.arguments);
                let open: Vec<&Todo> = items.iter().filter(|t| t.status != "completed").collect();
                let done: Vec<&Todo> = items.iter().filter(|t| t.status == "completed").collect();
                if let Some(current) = open.first() {
                    let facts: Vec<Vec<String>> = open.iter().take(3).map(|t| item_facts(&t.text)).collect();
                    out.push(critical(
                        ProbeKind::NextStep,
                        "Which items of its to-do list had the agent not finished yet?",
                        format!(
                            "{} (status {}){}",
                            clip(&current.text, 160),
                            current.status,
                            if open.len() > 1 { format!(", and {} more", open.len() - 1) } else { String::new() }
                        ),
                        facts,
                        i,
                    ));
                }
                if let Some(last) = done.last() {
                    out.push(critical(
                        ProbeKind::WorkState,
                        "Which items of its to-do list had the agent finished?",
                        clip(&last.text, 200),
                        done.iter().rev().take(2).map(|t| item_facts(&t.text)).collect(),
                        i,
                    ));
                }
            }
            // Claude Code's task tools: a task created is an item still to do.
            for call in m.tool_calls.iter().filter(|c| c.name == "TaskCreate") {
                let Ok(v) = serde_json::from_str::<Value>(&call.arguments) else { continue };
                let Some(subject) = v.get("subject").and_then(Value::as_str) else { continue };
                out.push(critical(
                    ProbeKind::NextStep,
                    "Which task did the agent add to its task list?",
                    clip(subject, 200),
                    vec![item_facts(subject)],
                    i,
                ));
            }
        }
        // The latest lists first: what the work stands on now.
        out.reverse();
        out
    }

    /// The answers the user chose to the agent's questions (`AskUserQuestion`), and the plans
    /// the user approved or turned down with their own words (`ExitPlanMode`).
    pub(super) fn asked(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            for call in &m.tool_calls {
                let Some(j) = self.result_of(i, &call.id) else { continue };
                let result = &self.msg(j).content;
                match call.name.as_str() {
                    "AskUserQuestion" => {
                        // `"question"="answer"` pairs, as Claude Code reports them.
                        for pair in result.split("\"=\"").skip(1) {
                            let answer = pair.split('"').next().unwrap_or_default().trim();
                            if answer.is_empty() {
                                continue;
                            }
                            let mut aliases = vec![answer.to_string()];
                            if answer.split_whitespace().count() > 8 {
                                aliases = key_phrase(answer).into_iter().collect();
                            }
                            out.push(critical(
                                ProbeKind::Choice,
                                "What did the user answer when the agent asked them to choose?",
                                clip(answer, 300),
                                vec![aliases],
                                j,
                            ));
                        }
                    }
                    "ExitPlanMode" => {
                        let plan = serde_json::from_str::<Value>(&call.arguments)
                            .ok()
                            .and_then(|v| v.get("plan").and_then(Value::as_str).map(str::to_string))
                            .unwrap_or_default();
                        let title = plan
                            .lines()
                            .map(|l| l.trim_start_matches('#').trim())
                            .find(|l| !l.is_empty())
                            .map(|l| l.trim_start_matches("Plan:").trim().to_string());
                        if let Some(words) =
                            result.split("the user said:").nth(1).map(str::trim).filter(|w| !w.is_empty())
                        {
                            out.push(critical(
                                ProbeKind::Choice,
                                "What did the user say when they turned down the agent's plan?",
                                clip(words, 300),
                                vec![key_phrase(words).into_iter().collect()],
                                j,
                            ));
                        } else if let Some(title) = title.filter(|_| !self.msg(j).is_error) {
                            out.push(critical(
                                ProbeKind::Choice,
                                "Which plan did the user approve?",
                                clip(&title, 300),
                                vec![vec![title.clone()]],
                                i,
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
        out.reverse();
        out
    }

    /// What the agent committed (subject, hash, branch), pushed (branch) and opened as a pull
    /// request (its number and title), from the commands and their output.
    pub(super) fn git(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            for call in &m.tool_calls {
                let Some(cmd) = self.shell_command(&call.arguments) else { continue };
                let Some(j) = self.result_of(i, &call.id) else { continue };
                let result = self.msg(j);
                if result.is_error {
                    continue;
                }
                if cmd.contains("git commit") {
                    // `[branch 7e00b6e] subject`
                    let Some(line) = result.content.lines().find(|l| l.starts_with('[') && l.contains("] ")) else {
                        continue;
                    };
                    let (head, subject) = line.split_once("] ").unwrap_or_default();
                    let mut parts = head.trim_start_matches('[').split_whitespace();
                    let (branch, hash) = (parts.next().unwrap_or_default(), parts.last().unwrap_or_default());
                    // A conventional subject (`feat(session): add X`) is also written without its
                    // type and scope.
                    let subject = subject.trim();
                    let mut said = vec![subject.to_string()];
                    if let Some((_, rest)) = subject.split_once(": ") {
                        said.push(rest.trim().to_string());
                    }
                    out.push(critical(
                        ProbeKind::WorkState,
                        "What did the agent commit, and on which branch?",
                        format!("{subject} ({hash} on {branch})"),
                        vec![said, vec![hash.to_string()], vec![branch.to_string()]],
                        j,
                    ));
                } else if cmd.contains("git push") {
                    let branch = cmd
                        .split_whitespace()
                        .skip_while(|w| *w != "push")
                        .skip(1)
                        .filter(|w| !w.starts_with('-'))
                        .nth(1)
                        .map(|b| b.trim_matches(|c: char| "\"';&".contains(c)).to_string());
                    let Some(branch) = branch.filter(|b| b.len() >= 3) else { continue };
                    out.push(critical(
                        ProbeKind::WorkState,
                        "Which branch did the agent push?",
                        branch.clone(),
                        vec![vec![branch]],
                        i,
                    ));
                } else if cmd.contains("gh pr create") {
                    let url = result.content.split_whitespace().find(|w| w.contains("/pull/")).map(str::to_string);
                    let Some(url) = url else { continue };
                    let number = url.rsplit('/').next().unwrap_or_default().to_string();
                    let mut facts = vec![vec![url.clone(), format!("pull/{number}")]];
                    let mut sources = vec![j];
                    if let Some(title) = quoted_after(&cmd, &["--title", "-t"]) {
                        let mut said = vec![title.clone()];
                        if let Some((_, rest)) = title.split_once(": ") {
                            said.push(rest.trim().to_string());
                        }
                        facts.push(said);
                        sources.push(i);
                    }
                    out.push(Candidate {
                        kind: ProbeKind::WorkState,
                        question: "Which pull request did the agent open?".into(),
                        answer: url,
                        facts,
                        source: j,
                        secondary: false,
                        fact_sources: sources,
                        tier: Tier::Critical,
                    });
                }
            }
        }
        out.reverse();
        out
    }

    /// The constraints and preferences the user stated in their own messages ("don't",
    /// "never", "only", "always", "must", "without", "instead of"): the constrained thing with
    /// its verb, a phrase of two to six words from the marker on.
    pub(super) fn constraints(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            if !self.usable[i] || !is_real_user(m) {
                continue;
            }
            let text = request_text(&m.content);
            for sentence in text.split(['.', '!', '?', '\n', ';']) {
                let words: Vec<&str> = sentence
                    .split_whitespace()
                    .map(|w| w.trim_matches(|c: char| ",:()\"`".contains(c)))
                    .filter(|w| !w.is_empty())
                    .collect();
                let lower: Vec<String> = words.iter().map(|w| w.to_lowercase().replace('’', "'")).collect();
                // The first word that opens a constraint (a marker of one or two words).
                let found = (0..lower.len()).find_map(|k| {
                    CONSTRAINTS.iter().find_map(|c| {
                        let parts: Vec<&str> = c.split_whitespace().collect();
                        let hit = parts.iter().enumerate().all(|(o, p)| lower.get(k + o).is_some_and(|w| w == p));
                        hit.then_some((k, parts.len()))
                    })
                });
                let Some((at, marker)) = found else { continue };
                // The marker and up to four words after it, in the sentence's own spelling.
                let words: Vec<&str> = words[at..].iter().take(marker + 4).copied().collect();
                if words.len() < marker + 2 {
                    continue;
                }
                let phrase = words.join(" ");
                if !facts::allowed(&phrase) {
                    continue;
                }
                out.push(critical(
                    ProbeKind::Constraint,
                    "What did the user tell the agent it must or must not do?",
                    clip(sentence.trim(), 300),
                    vec![vec![phrase]],
                    i,
                ));
            }
        }
        out.reverse();
        out
    }
}
