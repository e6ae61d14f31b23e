//! The families derived from what an agent records as structure rather than prose: its to-do
//! list with each item's status, the questions it asked and the answer chosen, the plan the user
//! approved or rejected, what it committed, pushed and opened as a pull request, and the
//! constraints the user stated in their own messages. Each is a fact the rest of the work
//! depends on, so each is critical.

use compaction::{ProbeKind, Role, Tier};
use serde_json::Value;

use super::work::{is_joiner, key_phrase};
use super::{clip, clip_words, facts, is_real_user, said_text, Candidate, Deriver};

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

/// True when a phrase cannot end on `word`: a determiner or a modal that needs what follows.
fn is_open_ended(word: &str) -> bool {
    const OPEN: [&str; 16] = [
        "other", "any", "all", "some", "this", "these", "those", "until", "than", "should", "would", "will", "can",
        "have", "has", "not",
    ];
    OPEN.contains(&word.to_lowercase().as_str())
}

/// Pronouns whose referent is outside the phrase.
const PRONOUNS: [&str; 6] = ["it", "them", "they", "this", "that", "those"];

/// The words of a question that asks for something ("could you never ...?").
const ASKING: [&str; 7] = ["can you", "could you", "would you", "will you", "please", "can we", "could we"];

/// The first words of the markers that state a prohibition or an obligation.
const STRONG_CONSTRAINTS: [&str; 7] = ["don't", "dont", "do", "never", "must", "mustn't", "always"];

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

/// The line where git reports a commit made: `[branch 7e00b6e] subject` (the bracket ends on
/// an abbreviated hash), not a hook's `[FORMAT] Code is not formatted.`
fn commit_line(output: &str) -> Option<&str> {
    output.lines().find(|l| {
        l.starts_with('[')
            && l.split_once("] ").is_some_and(|(head, _)| {
                let hash = head.split_whitespace().last().unwrap_or_default();
                head.split_whitespace().count() >= 2 && hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())
            })
    })
}

/// What `git push` reported it pushed: the commit range (`05fd186..a230dbf`; none for a new
/// branch) and the remote branch, from its first ref line (`   a..b  local -> remote`,
/// ` * [new branch]      local -> remote`, ` + a...b  local -> remote (forced update)`).
fn pushed(output: &str) -> Option<(Option<String>, String)> {
    output.lines().find_map(|line| {
        let (left, right) = line.split_once(" -> ")?;
        let branch = right.split_whitespace().next()?.to_string();
        let left = left.trim_start().trim_start_matches(['+', '*']).trim_start();
        let range = if left.starts_with("[new branch]") || left.starts_with("[new tag]") {
            None
        } else {
            let r = left.split_whitespace().next()?;
            let (a, b) = r.split_once("..")?;
            let b = b.trim_start_matches('.');
            let hex = |h: &str| h.len() >= 7 && h.chars().all(|c| c.is_ascii_hexdigit());
            if !hex(a) || !hex(b) {
                return None;
            }
            Some(r.to_string())
        };
        (branch.len() >= 3).then_some((range, branch))
    })
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

/// The branch a command switched to (`git checkout -b X`, `git switch -c X`) or rebased
/// (`Successfully rebased and updated refs/heads/X`).
fn switched_branch(cmd: &str, output: &str) -> Option<String> {
    if let Some(rest) = output.split("Successfully rebased and updated refs/heads/").nth(1) {
        let b = rest.split(|c: char| c.is_whitespace()).next()?.trim_end_matches('.');
        return (b.len() >= 3).then(|| b.to_string());
    }
    for flag in ["git checkout -b ", "git switch -c ", "git checkout -B ", "git switch -C "] {
        if let Some(rest) = cmd.split(flag).nth(1) {
            let b = rest.split_whitespace().next()?.trim_matches(|c: char| "\"';&".contains(c));
            return (b.len() >= 3).then(|| b.to_string());
        }
    }
    None
}

/// Programs and subcommands that run a test suite or a linter.
const CHECKS: [&str; 15] = [
    "test",
    "pytest",
    "lint",
    "clippy",
    "vet",
    "jest",
    "tox",
    "golangci-lint",
    "eslint",
    "mypy",
    "ruff",
    "rspec",
    "phpunit",
    "unittest",
    "vitest",
];

/// Programs that only show or search files: their command naming a test is not a run.
const VIEWERS: [&str; 12] = ["ls", "cat", "grep", "rg", "find", "head", "tail", "sed", "echo", "wc", "git", "less"];

/// The suite a shell command runs: the command up to its first pipe or redirection, at most
/// five words, when a word of it (split at `:`) names a test runner or a linter.
fn suite_of(cmd: &str) -> Option<String> {
    let line = cmd.lines().next()?;
    // After any `cd DIR &&`.
    let line = line.rsplit("&& ").find(|part| CHECKS.iter().any(|c| part.split([' ', ':']).any(|w| w == *c)))?;
    let core = line.split(['|', '>', ';']).next()?.trim();
    let words: Vec<&str> = core.split_whitespace().filter(|w| !w.starts_with("2") || w.len() > 2).take(5).collect();
    let program = words.first()?;
    if VIEWERS.contains(program) || !words.iter().any(|w| w.split(':').any(|p| CHECKS.contains(&p))) {
        return None;
    }
    Some(words.join(" "))
}

/// The outcome line of a test or lint run: its counts (`5 passed; 0 failed`, `3 failed, 12
/// passed`, `0 issues`), else `FAIL`/`ok` as Go prints them.
fn outcome_of(output: &str) -> Option<String> {
    const COUNTED: [&str; 8] = ["passed", "failed", "issues", "issue", "errors", "error", "tests", "failures"];
    // Of several count lines (unit tests, then doc tests), the one that counts the most.
    let mut best: Option<(u32, String)> = None;
    for line in output.lines().rev() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for (k, w) in words.iter().enumerate() {
            let w = w.trim_matches(|c: char| ",;.:=()".contains(c));
            if !COUNTED.contains(&w.to_lowercase().as_str()) || k == 0 {
                continue;
            }
            if words[k - 1].trim_matches(|c: char| ",;.:=()".contains(c)).parse::<u32>().is_ok() {
                // The counts: from the first number of the line on, at most six words.
                let number = |x: &str| x.trim_matches(|c: char| ",;.:=()".contains(c)).parse::<u32>().ok();
                let Some(start) = words.iter().position(|x| number(x).is_some()) else { break };
                let total: u32 = words.iter().filter_map(|x| number(x)).sum();
                // Without the punctuation between the counts (as the judge reads them).
                let phrase: Vec<&str> = words[start..]
                    .iter()
                    .take(6)
                    .map(|w| w.trim_end_matches(['.', ',', ';', '=', ':']))
                    .filter(|w| !w.is_empty())
                    .collect();
                if best.as_ref().is_none_or(|(t, _)| total > *t) {
                    best = Some((total, phrase.join(" ")));
                }
                break;
            }
        }
    }
    if let Some((_, phrase)) = best {
        return Some(phrase);
    }
    let last = output.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    if last.starts_with("FAIL") {
        return Some(last.split_whitespace().take(2).collect::<Vec<_>>().join(" "));
    }
    None
}

/// The largest count of a count line with the word it counts (`14 doctests 397 tests 0
/// failures` gives `397 tests`), when it is at least ten: a small count (`0 failures`) is in
/// every run's line.
pub(super) fn largest_count(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .windows(2)
        .filter_map(|w| Some((w[0].parse::<u32>().ok()?, w[1])))
        .filter(|(n, word)| *n >= 10 && word.chars().all(char::is_alphabetic))
        .max_by_key(|(n, _)| *n)
        .map(|(n, word)| format!("{n} {word}"))
}

/// The tests a run reports failing (`--- FAIL: TestX`, `FAILED path::test`), at most two.
fn failed_tests(output: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in output.lines() {
        let l = line.trim();
        let name = l
            .strip_prefix("--- FAIL: ")
            .or_else(|| l.strip_prefix("FAILED "))
            .and_then(|r| r.split_whitespace().next())
            .map(str::to_string);
        if let Some(n) = name.filter(|n| n.len() >= 4) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out.truncate(2);
    out
}

/// A critical candidate whose facts are all in its source message.
fn critical(kind: ProbeKind, question: &str, answer: String, facts: Vec<Vec<String>>, source: usize) -> Candidate {
    Candidate {
        kind,
        question: question.to_string(),
        answer,
        facts,
        source,
        tier: Tier::Critical,
        ..Candidate::default()
    }
}

impl Deriver<'_> {
    /// The command of a shell call, when the call is one.
    fn shell_command(&self, arguments: &str) -> Option<String> {
        super::command_of(arguments)
    }

    /// The result of call `id` made in message `i`: its index.
    pub(super) fn result_of(&self, i: usize, id: &str) -> Option<usize> {
        (i + 1..self.conv.messages.len())
            .take(64)
            .find(|&j| self.msg(j).role == Role::Tool && self.msg(j).tool_call_id.as_deref() == Some(id))
    }

    /// True when the agent ran `git commit` after message `i`.
    fn committed_after(&self, i: usize) -> bool {
        self.conv.messages[i + 1..]
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .any(|c| self.shell_command(&c.arguments).is_some_and(|cmd| cmd.contains("git commit")))
    }

    /// Every to-do list the agent wrote, as it stood: one probe per write, asked until the
    /// agent changed the list again (where the next probe takes over), so that at any
    /// checkpoint the list is asked as it then stood. A list is a to-do list call
    /// (`TodoWrite`, Codex's `update_plan`), rewritten whole at each call, or the tasks of
    /// Claude Code's task tools, added one at a time (`TaskCreate`) and set done one at a time
    /// (`TaskUpdate`). Its facts are the items in progress, the items this change marked done,
    /// then the items still to do and the items done before, at most `max_facts`. The items
    /// hold the status; the question asks for it.
    pub(super) fn todos(&self) -> Vec<Candidate> {
        // (message, the list after it, the message that holds each item's text)
        let mut lists: Vec<(usize, Vec<(Todo, usize)>)> = Vec::new();
        let mut tasks: Vec<(Vec<(Todo, usize)>, usize)> = Vec::new();
        // The task tools' list, by task id.
        let mut by_id: Vec<(String, Todo, usize)> = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            for call in &m.tool_calls {
                match call.name.as_str() {
                    "TodoWrite" | "todo_write" | "update_plan" => {
                        let items = todo_items(&call.arguments);
                        if !items.is_empty() {
                            lists.push((i, items.into_iter().map(|t| (t, i)).collect()));
                        }
                    }
                    "TaskCreate" | "TaskUpdate" => {
                        let Ok(v) = serde_json::from_str::<Value>(&call.arguments) else { continue };
                        let Some(j) = self.result_of(i, &call.id).filter(|&j| !self.msg(j).is_error) else { continue };
                        if call.name == "TaskCreate" {
                            let Some(subject) = v.get("subject").and_then(Value::as_str) else { continue };
                            // `Task #9 created successfully: ...`
                            let id = self
                                .msg(j)
                                .content
                                .split('#')
                                .nth(1)
                                .map(|r| r.chars().take_while(char::is_ascii_alphanumeric).collect::<String>());
                            by_id.push((
                                id.unwrap_or_default(),
                                Todo { text: subject.to_string(), status: "pending".into() },
                                i,
                            ));
                        } else {
                            let id = v.get("taskId").map(|t| t.as_str().map_or(t.to_string(), str::to_string));
                            let status = v.get("status").and_then(Value::as_str);
                            let (Some(id), Some(status)) = (id, status) else { continue };
                            if status == "deleted" {
                                by_id.retain(|(k, _, _)| *k != id);
                            } else if let Some(t) = by_id.iter_mut().find(|(k, _, _)| *k == id) {
                                t.1.status = status.to_string();
                            } else {
                                continue;
                            }
                        }
                        tasks.push((
                            by_id
                                .iter()
                                .map(|(_, t, at)| (Todo { text: t.text.clone(), status: t.status.clone() }, *at))
                                .collect(),
                            i,
                        ));
                    }
                    _ => {}
                }
            }
        }
        let tasks: Vec<(usize, Vec<(Todo, usize)>)> = tasks.into_iter().map(|(l, i)| (i, l)).collect();
        let mut out = Vec::new();
        for (what, mut sequence) in [("to-do list", lists), ("task list", tasks)] {
            // Several changes in one message (two tasks created at once): the list as the
            // message left it.
            sequence.dedup_by(|later, earlier| {
                let same = later.0 == earlier.0;
                if same {
                    std::mem::swap(later, earlier);
                }
                same
            });
            for (k, (i, items)) in sequence.iter().enumerate() {
                let before: std::collections::HashMap<&str, &str> = k
                    .checked_sub(1)
                    .map(|p| sequence[p].1.iter().map(|(t, _)| (t.text.as_str(), t.status.as_str())).collect())
                    .unwrap_or_default();
                let done_now = |t: &Todo| t.status == "completed" && before.get(t.text.as_str()) != Some(&"completed");
                let rank = |t: &Todo| match t.status.as_str() {
                    "in_progress" => 0,
                    "completed" if done_now(t) => 1,
                    "completed" => 3,
                    _ => 2,
                };
                let mut ordered: Vec<&(Todo, usize)> = items.iter().collect();
                ordered.sort_by_key(|(t, _)| rank(t));
                let (facts, fact_sources): (Vec<Vec<String>>, Vec<usize>) =
                    ordered.iter().map(|(t, at)| (item_facts(&t.text), *at)).filter(|(f, _)| !f.is_empty()).unzip();
                let group = |pick: &dyn Fn(&Todo) -> bool| -> String {
                    items.iter().filter(|(t, _)| pick(t)).map(|(t, _)| clip(&t.text, 80)).collect::<Vec<_>>().join("; ")
                };
                let answer = [
                    ("done", group(&|t| t.status == "completed")),
                    ("in progress", group(&|t| t.status == "in_progress")),
                    ("to do", group(&|t| t.status != "completed" && t.status != "in_progress")),
                ]
                .iter()
                .filter(|(_, g)| !g.is_empty())
                .map(|(label, g)| format!("{label}: {g}"))
                .collect::<Vec<_>>()
                .join(" | ");
                out.push(Candidate {
                    kind: ProbeKind::WorkState,
                    question: format!(
                        "How did the agent's {what} stand at call {}: which items were done, which in progress, which still to do?",
                        self.call_number(*i)
                    ),
                    answer: clip(&answer, 500),
                    facts,
                    source: *i,
                    fact_sources,
                    until: sequence.get(k + 1).map(|(next, _)| *next),
                    tier: Tier::Critical,
                    ..Candidate::default()
                });
            }
        }
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
                            // A long answer, or one a fact cannot be (`main was clean; fix the
                            // issues` reads as code), is asked by its key phrase.
                            let mut aliases = vec![answer.to_string()];
                            if answer.split_whitespace().count() > 8 || !facts::allowed(answer) {
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
        let mut out: Vec<Candidate> = Vec::new();
        // The working tree's latest check so far (its index in `out`).
        let mut last_check: Option<usize> = None;
        for (i, m) in self.conv.messages.iter().enumerate() {
            for call in &m.tool_calls {
                let Some(cmd) = self.shell_command(&call.arguments) else { continue };
                let Some(j) = self.result_of(i, &call.id) else { continue };
                let result = self.msg(j);
                let git_change = cmd.contains("git commit") || cmd.contains("git push") || cmd.contains("gh pr create");
                if git_change && super::is_rejection(&result.content) {
                    // Turned down: nothing was committed or pushed, and the user's words say
                    // what to do instead.
                    let Some(words) = result.content.split_once("the user said:").map(|(_, w)| w.trim()) else {
                        continue;
                    };
                    let Some(said) = key_phrase(words).or_else(|| {
                        (words.split_whitespace().count() >= 2 && facts::allowed(words)).then(|| words.to_string())
                    }) else {
                        continue;
                    };
                    out.push(critical(
                        ProbeKind::WorkState,
                        &format!(
                            "Which git command did the user turn down at call {}, and what did they ask instead?",
                            self.call_number(i)
                        ),
                        format!("`{}`: {}", clip(&cmd, 80), clip(words, 200)),
                        vec![vec![said]],
                        j,
                    ));
                    continue;
                }
                if cmd.contains("git commit") && (result.is_error || commit_line(&result.content).is_none()) {
                    // A commit that did not go through (a hook refused it): nothing is
                    // committed, and the reason is what the agent must fix first.
                    // Its first lines (the hook's verdict, the check that failed), then the
                    // line that states the cause.
                    // (A hook's output recorded with its line breaks escaped is read as lines.)
                    let output = result.content.replace("\\n", "\n");
                    let mut facts: Vec<Vec<String>> = output
                        .lines()
                        .map(str::trim)
                        .filter(|l| l.split_whitespace().count() >= 2 && !l.starts_with("Exit code"))
                        .take(3)
                        .map(|l| vec![if l.chars().count() <= 80 { l.to_string() } else { clip_words(l, 60) }])
                        .collect();
                    if let Some(cause) = super::work::cause_line(&result.content) {
                        facts.extend(super::work::cause_facts(&cause));
                    }
                    if facts.is_empty() {
                        continue;
                    }
                    out.push(critical(
                        ProbeKind::WorkState,
                        &format!("Why did the agent's commit at call {} not go through?", self.call_number(i)),
                        clip(&result.content, 300),
                        facts,
                        j,
                    ));
                    continue;
                }
                if result.is_error {
                    continue;
                }
                if cmd.contains("git commit") {
                    let Some(line) = commit_line(&result.content) else { continue };
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
                } else if cmd.contains("git status") || cmd.contains("git diff --stat") {
                    // The files with uncommitted changes (`modified:   path`, `new file:   path`,
                    // ` path | 12 ++--`), and the branch (`On branch X`).
                    let mut facts: Vec<Vec<String>> = Vec::new();
                    for line in result.content.lines() {
                        let l = line.trim();
                        let path = ["modified:", "new file:", "deleted:", "renamed:"]
                            .iter()
                            .find_map(|p| l.strip_prefix(p))
                            .map(|p| p.trim().rsplit(" -> ").next().unwrap_or_default().to_string())
                            .or_else(|| {
                                let (p, n) = l.split_once(" | ")?;
                                n.trim_start()
                                    .starts_with(|c: char| c.is_ascii_digit() || c == 'B')
                                    .then(|| p.trim().to_string())
                            });
                        let Some(path) = path.filter(|p| !p.is_empty() && !p.contains(' ')) else { continue };
                        let base = super::basename(&path).to_string();
                        let mut aliases = vec![path.clone()];
                        if base != path {
                            aliases.push(base);
                        }
                        if !facts.iter().any(|f| f[0] == path) {
                            facts.push(aliases);
                        }
                    }
                    if facts.is_empty() {
                        continue;
                    }
                    let branch =
                        result.content.lines().find_map(|l| l.trim().strip_prefix("On branch ")).map(str::trim);
                    facts.truncate(3);
                    if let Some(b) = branch.filter(|b| b.len() >= 3) {
                        facts.push(vec![b.to_string()]);
                    }
                    let mut c = critical(
                        ProbeKind::WorkState,
                        &format!(
                            "Which files had uncommitted changes when the agent checked the working tree at call {}?",
                            self.call_number(i)
                        ),
                        facts.iter().map(|f| f[0].clone()).collect::<Vec<_>>().join(", "),
                        facts,
                        j,
                    );
                    // A commit after it, or a later check, superseded what was uncommitted.
                    if self.committed_after(j) {
                        c.tier = Tier::Useful;
                    }
                    if let Some(earlier) = last_check.replace(out.len()) {
                        out[earlier].tier = Tier::Useful;
                    }
                    out.push(c);
                } else if let Some(branch) = switched_branch(&cmd, &result.content) {
                    out.push(critical(
                        ProbeKind::WorkState,
                        "Which branch did the agent switch to or rebase?",
                        branch.clone(),
                        vec![vec![branch]],
                        j,
                    ));
                } else if cmd.contains("git push") {
                    // What git reported pushed (`   05fd186..a230dbf  main -> main`,
                    // ` * [new branch]      fix -> fix`): the commits and the branch; else the
                    // branch the command names.
                    if let Some((range, branch)) = pushed(&result.content) {
                        let mut facts = Vec::new();
                        if let Some(range) = &range {
                            let head = range.rsplit("..").next().unwrap_or_default().trim_start_matches('.');
                            facts.push(vec![range.clone(), head.to_string()]);
                        }
                        facts.push(vec![branch.clone()]);
                        // A new branch: the remote it now is on (`To github.com:org/repo.git`).
                        if let Some(remote) = result
                            .content
                            .lines()
                            .find_map(|l| l.trim().strip_prefix("To "))
                            .filter(|r| range.is_none() && r.len() >= 8 && !r.contains(' '))
                        {
                            facts.push(vec![remote.to_string()]);
                        }
                        out.push(critical(
                            ProbeKind::WorkState,
                            "Which branch did the agent push, and up to which commit?",
                            match &range {
                                Some(r) => format!("{r} to {branch}"),
                                None => format!("the new branch {branch}"),
                            },
                            facts,
                            j,
                        ));
                        continue;
                    }
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
                        fact_sources: sources,
                        tier: Tier::Critical,
                        ..Candidate::default()
                    });
                }
            }
        }
        out.reverse();
        out
    }

    /// The test and lint runs: the suite (the command), its outcome (the counts it printed,
    /// or `FAIL`) and the tests it reports failing. The last run of a suite is where the work
    /// stands (critical); an earlier one was superseded (useful).
    pub(super) fn test_runs(&self) -> Vec<Candidate> {
        let mut out: Vec<(String, Candidate)> = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            for call in &m.tool_calls {
                let Some(cmd) = self.shell_command(&call.arguments) else { continue };
                let Some(suite) = suite_of(&cmd) else { continue };
                let Some(j) = self.result_of(i, &call.id) else { continue };
                let result = &self.msg(j).content;
                if super::is_rejection(result) {
                    continue;
                }
                let Some(outcome) = outcome_of(result) else { continue };
                // The count line, and its largest count as a summary words it ("397 tests").
                let mut said = vec![outcome.clone()];
                said.extend(largest_count(&outcome).filter(|c| *c != outcome));
                let mut facts = vec![said];
                facts.extend(failed_tests(result).into_iter().map(|t| vec![t]));
                facts.push(vec![suite.clone()]);
                let mut c = Candidate {
                    kind: ProbeKind::WorkState,
                    question: format!("What was the outcome of the test or lint run at call {}?", self.call_number(i)),
                    answer: format!("{suite}: {outcome}"),
                    facts,
                    source: j,
                    tier: Tier::Critical,
                    // Asked for the outcome: a probe left with the command alone is not asked.
                    needs_first: true,
                    ..Candidate::default()
                };
                // The suite is in the call; each fact is found in the call or the result.
                c.fact_sources = c.facts.iter().map(|f| if f[0] == suite { i } else { j }).collect();
                out.push((suite, c));
            }
        }
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<Candidate> = out
            .into_iter()
            .rev()
            .map(|(suite, mut c)| {
                if !seen.insert(suite) {
                    c.tier = Tier::Useful;
                }
                c
            })
            .collect();
        out.reverse();
        out
    }

    /// How the task says the finished work is handed in (`submit your changes by running the
    /// submit command`, `You MUST use this EXACT command to submit:` and the command under
    /// it): the command or token to run, from the task's own text. An agent that loses it
    /// cannot finish. Critical.
    pub(super) fn handoff(&self) -> Vec<Candidate> {
        let Some(&i) = self.user_requests().first() else { return Vec::new() };
        let raw = said_text(&self.msg(i).content);
        let raw_lines: Vec<&str> = raw.lines().collect();
        // Quoted issue text is not the task's instruction; the command a colon introduces
        // is read from the message as written (a code block holds it).
        let text = super::without_quoted(&raw);
        for line in text.lines() {
            let lower = line.to_lowercase();
            let mentions = lower
                .split(|c: char| !c.is_alphanumeric() && c != '-')
                .any(|w| w.starts_with("submit") && w.len() <= "submitting".len());
            if !mentions {
                continue;
            }
            let mut said = line.to_string();
            if line.trim_end().ends_with(':') {
                if let Some(k) = raw_lines.iter().position(|l| l.trim() == line.trim()) {
                    for next in raw_lines[k + 1..].iter().filter(|l| !l.trim().is_empty()).take(3) {
                        said.push('\n');
                        said.push_str(next);
                    }
                }
            }
            // The token to print (`COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`), the file to hand
            // in (`patch.txt`), or the harness's submit command.
            let mut facts: Vec<Vec<String>> = Vec::new();
            for token in said.split_whitespace().map(|t| t.trim_matches(|c: char| "`'\"(),;:".contains(c))) {
                let shouted = token.contains('_') && token.chars().all(|c| c.is_ascii_uppercase() || c == '_');
                let file = super::basename(token).contains('.')
                    && token
                        .rsplit('.')
                        .next()
                        .is_some_and(|e| (2..=4).contains(&e.len()) && e.chars().all(|c| c.is_ascii_lowercase()));
                if (shouted || file) && token.len() >= 5 && !facts.iter().any(|f| f[0] == token) {
                    facts.push(vec![token.to_string()]);
                }
            }
            if lower.contains("submit command") {
                facts.push(vec!["submit command".to_string()]);
            }
            if facts.is_empty() {
                continue;
            }
            facts.truncate(self.params.max_facts);
            return vec![critical(
                ProbeKind::Constraint,
                "How does the task say the finished work is to be handed in?",
                clip(said.trim(), 300),
                facts,
                i,
            )];
        }
        Vec::new()
    }

    /// The constraints and preferences the user stated in their own messages ("don't",
    /// "never", "only", "always", "must", "without", "instead of"): the constrained thing with
    /// its verb, a phrase of two to six words from the marker on.
    pub(super) fn constraints(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        // The user's messages and the words they typed when they turned down a call.
        let mut said: Vec<(usize, String)> = self
            .conv
            .messages
            .iter()
            .enumerate()
            .filter(|(i, m)| self.usable[*i] && is_real_user(m))
            // The instruction sections a harness appends to the task are constraints too.
            // Quoted text (an issue's description, code) is not the user's instruction.
            .map(|(i, m)| (i, super::without_quoted(&said_text(&m.content))))
            .collect();
        said.extend(self.rejection_words());
        said.sort_by_key(|(i, _)| *i);
        for (i, text) in said {
            for found in constraint_phrases(&text) {
                let mut c = critical(
                    ProbeKind::Constraint,
                    "What did the user tell the agent it must or must not do?",
                    clip(&found.sentence, 300),
                    vec![vec![found.phrase]],
                    i,
                );
                // A prohibition or an obligation comes before a preference or a scope,
                // which is useful.
                c.secondary = !found.strong;
                if c.secondary {
                    c.tier = Tier::Useful;
                }
                out.push(c);
            }
        }
        out.reverse();
        out
    }
}

/// A constraint found in a text: its sentence, the constrained thing with its verb (a phrase of
/// two to six words from the marker on), and whether its marker states a prohibition or an
/// obligation rather than a preference or a scope.
pub(super) struct Constraint {
    pub(super) sentence: String,
    pub(super) phrase: String,
    pub(super) strong: bool,
}

/// The constraints `text` states ([`CONSTRAINTS`]), in order.
pub(super) fn constraint_phrases(text: &str) -> Vec<Constraint> {
    let mut out = Vec::new();
    for sentence in super::work::split_sentences(text) {
        // A question states no constraint ("is that because we don't care about lines that
        // don't result in a file change?") unless it asks for something ("can you have it
        // confirmed without delaying the shipment?").
        let end = sentence.as_ptr() as usize - text.as_ptr() as usize + sentence.len();
        let lower = format!(" {} ", sentence.to_lowercase());
        if text[end..].starts_with('?') && !ASKING.iter().any(|a| lower.contains(&format!(" {a} "))) {
            continue;
        }
        // Each word, and whether a clause break follows it.
        let split: Vec<(&str, bool)> = sentence
            .split_whitespace()
            .map(|w| (w.trim_matches(|c: char| ",:()\"`".contains(c)), w.ends_with([',', ':', '(', ')'])))
            .filter(|(w, _)| !w.is_empty())
            .collect();
        let words: Vec<&str> = split.iter().map(|(w, _)| *w).collect();
        let lower: Vec<String> = words.iter().map(|w| w.to_lowercase().replace('’', "'")).collect();
        // Each word that opens a constraint (a marker of one or two words), after the
        // phrase of the one before.
        let mut from = 0;
        while let Some((at, marker)) = (from..lower.len()).find_map(|k| {
            CONSTRAINTS.iter().find_map(|c| {
                let parts: Vec<&str> = c.split_whitespace().collect();
                let hit = parts.iter().enumerate().all(|(o, p)| lower.get(k + o).is_some_and(|w| w == p));
                hit.then_some((k, parts.len()))
            })
        }) {
            from = at + marker;
            // "I don't remember the email", "we never got a label": what the person says of
            // themselves, not what the agent must do; "I don't want a replacement" is a
            // preference all the same.
            let negation = ["don't", "dont", "do", "never"].contains(&lower[at].as_str());
            let of_themselves = at > 0 && ["i", "we"].contains(&lower[at - 1].as_str());
            let wish = lower.get(at + marker).is_some_and(|w| ["want", "need", "like", "wish"].contains(&w.as_str()));
            if negation && of_themselves && !wish {
                continue;
            }
            // The marker and up to six words after it, in the sentence's own spelling,
            // up to a clause break; a longer clause is cut before a joining word, and
            // the phrase does not end on a joining word, a determiner or a modal. A
            // clause too short to say what is constrained (`DO NOT MODIFY: tests`) runs
            // on.
            let breaks: Vec<usize> =
                split[at..].iter().enumerate().filter(|(_, (_, b))| *b).map(|(k, _)| k + 1).collect();
            let clause = breaks.iter().copied().find(|&k| k >= marker + 2).unwrap_or(words.len() - at);
            let mut phrase: Vec<&str> = words[at..at + clause].to_vec();
            if phrase.len() > marker + 6 {
                let cut = (marker + 2..=marker + 6).rev().find(|&k| is_joiner(phrase[k]));
                phrase.truncate(cut.unwrap_or(marker + 6));
            }
            while phrase.len() > marker && phrase.last().is_some_and(|w| is_joiner(w) || is_open_ended(w)) {
                phrase.pop();
            }
            // A phrase whose object is a bare pronoun ("handles them") says nothing.
            let pronoun = phrase[marker..].iter().any(|w| PRONOUNS.contains(&w.to_lowercase().as_str()));
            if phrase.len() < marker + 2 || pronoun {
                continue;
            }
            from = at + phrase.len();
            let phrase = phrase.join(" ");
            if !facts::allowed(&phrase) {
                continue;
            }
            out.push(Constraint {
                sentence: sentence.trim().to_string(),
                phrase,
                strong: STRONG_CONSTRAINTS.contains(&lower[at].as_str()),
            });
        }
    }
    out
}
