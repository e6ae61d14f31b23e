//! The issue tracker as the agent's work queue: the issues it read (`bd show`, `gh issue
//! view`), whose text is the task as its author wrote it, with its constraints and the files it
//! names; the issues it started (`bd update --status in_progress`) and closed (`bd close`,
//! `gh issue close`). A session that works through a tracker's issues records its state there
//! rather than in a to-do list, so each is critical.

use compaction::{ProbeKind, Tier};

use super::structure::constraint_phrases;
use super::work::key_phrase;
use super::{basename, clip, Candidate, Deriver};

/// One tracker command of a shell command line: what it does and to which issues.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    /// `bd show ID`, `gh issue view N`.
    Show(String),
    /// `bd update ID --status S`.
    Start(String),
    /// `bd close ID...`, `gh issue close N`.
    Close(Vec<String>),
}

/// The tracker commands of a command line (`bd show a; echo ===; bd show b`), in order.
fn ops(cmd: &str) -> Vec<Op> {
    let mut out = Vec::new();
    for part in cmd.split(['\n', ';', '|']).flat_map(|p| p.split("&&")) {
        let words: Vec<&str> = part
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| "\"'".contains(c)))
            .filter(|w| !w.is_empty() && !w.starts_with("2>"))
            .collect();
        let args = |from: usize| -> Vec<String> {
            words[from.min(words.len())..]
                .iter()
                .take_while(|w| !w.starts_with('-'))
                .filter(|w| w.chars().any(|c| c.is_ascii_alphanumeric()))
                .map(|w| w.trim_start_matches('#').to_string())
                .collect()
        };
        let op = match words.as_slice() {
            ["bd", "show", ..] => args(2).into_iter().next().map(Op::Show),
            ["gh", "issue", "view", ..] => args(3).into_iter().next().map(Op::Show),
            ["bd", "update", ..] if part.contains("in_progress") => args(2).into_iter().next().map(Op::Start),
            ["bd", "close", ..] => Some(Op::Close(args(2))).filter(|o| o != &Op::Close(Vec::new())),
            ["gh", "issue", "close", ..] => Some(Op::Close(args(3))).filter(|o| o != &Op::Close(Vec::new())),
            _ => None,
        };
        out.extend(op);
    }
    out
}

/// The text of issue `id` in a show command's output: from the line that names it (`○ ID ·
/// title`, `title:` for `gh`) up to the next issue's header line or the end.
fn issue_text<'a>(output: &'a str, id: &str) -> Option<&'a str> {
    let header = |l: &str| is_header(l, id) || l.starts_with("title:");
    let start = output.lines().position(header)?;
    let lines: Vec<&str> = output.lines().collect();
    let from = output.find(lines[start]).unwrap_or(0);
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.contains(" · ") && l.contains("[●"))
        .map_or(output.len(), |k| output.find(lines[start + 1 + k]).unwrap_or(output.len()));
    Some(&output[from..end.max(from)])
}

/// True when `line` is issue `id`'s header (`○ ID · title`, `○ ID [EPIC] · title`).
fn is_header(line: &str, id: &str) -> bool {
    line.split_once(" · ").is_some_and(|(head, _)| head.split_whitespace().any(|w| w == id))
}

/// An issue's title: its header line without the id, the status glyphs and the bracketed
/// priority (`○ spotter-dov.3 · Implement debug JSON sidecar   [● P1 · OPEN]`), or the value of
/// a `title:` line.
fn title_of(text: &str, id: &str) -> Option<String> {
    let first = text.lines().next()?;
    let t = match first.strip_prefix("title:") {
        Some(t) => t.trim(),
        None => first.split_once(" · ").filter(|_| is_header(first, id)).map(|(_, t)| t)?.split("  [").next()?.trim(),
    };
    (t.split_whitespace().count() >= 2).then(|| t.to_string())
}

/// True when a constraint phrase forbids: `do not`, `don't`, `never`, `must not`.
fn is_prohibition(phrase: &str) -> bool {
    let p = phrase.to_lowercase().replace('’', "'");
    ["do not ", "don't ", "dont ", "never ", "must not ", "mustn't "].iter().any(|m| p.starts_with(m))
}

/// The files an issue's text names in backticks (`lib/x.ex`), basenames, in order.
fn named_files(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (k, part) in text.split('`').enumerate() {
        let p = part.trim();
        let looks_like_file = p.contains('/')
            && !p.contains(' ')
            && basename(p).contains('.')
            && basename(p).rsplit('.').next().is_some_and(|e| (1..=5).contains(&e.len()));
        if k % 2 == 1 && looks_like_file {
            let b = basename(p).to_string();
            if !out.contains(&b) {
                out.push(b);
            }
        }
    }
    out
}

impl Deriver<'_> {
    /// The issues the agent read, started and closed in an issue tracker.
    pub(super) fn tracker(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        // Titles of the issues read so far, for a later start or close.
        let mut titles: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            for call in &m.tool_calls {
                let Some(cmd) = super::command_of(&call.arguments) else { continue };
                let ops = ops(&cmd);
                if ops.is_empty() {
                    continue;
                }
                let Some(j) = self.result_of(i, &call.id) else { continue };
                let result = self.msg(j);
                if result.is_error || super::is_rejection(&result.content) {
                    continue;
                }
                let n = self.call_number(i);
                for op in ops {
                    match op {
                        Op::Show(id) => {
                            let Some(text) = issue_text(&result.content, &id) else { continue };
                            let Some(title) = title_of(text, &id) else { continue };
                            titles.insert(id.clone(), title.clone());
                            let mut said = vec![title.clone()];
                            said.extend(key_phrase(&title).filter(|p| *p != title));
                            out.push(Candidate {
                                kind: ProbeKind::Task,
                                question: format!(
                                    "Which issue did the agent read at call {n}, and what does it ask for?"
                                ),
                                answer: format!("{id}: {title}"),
                                facts: vec![said, vec![id.clone()]],
                                source: j,
                                tier: Tier::Critical,
                                ..Candidate::default()
                            });
                            // What its author forbade: an issue's text states many obligations
                            // (`must return 404`), its prohibitions are its rules.
                            for found in constraint_phrases(text).into_iter().filter(|c| is_prohibition(&c.phrase)) {
                                out.push(Candidate {
                                    kind: ProbeKind::Constraint,
                                    question: format!("What does the issue the agent read at call {n} forbid?"),
                                    answer: clip(&found.sentence, 300),
                                    facts: vec![vec![found.phrase]],
                                    source: j,
                                    tier: Tier::Critical,
                                    ..Candidate::default()
                                });
                            }
                            let files = named_files(text);
                            if !files.is_empty() {
                                out.push(Candidate {
                                    kind: ProbeKind::NextStep,
                                    question: format!("Which files does the issue the agent read at call {n} name?"),
                                    answer: files.join(", "),
                                    facts: files.into_iter().take(self.params.max_facts).map(|f| vec![f]).collect(),
                                    source: j,
                                    tier: Tier::Critical,
                                    ..Candidate::default()
                                });
                            }
                        }
                        Op::Start(id) => {
                            let mut facts = vec![vec![id.clone()]];
                            if let Some(t) = titles.get(&id) {
                                facts.push(vec![t.clone()]);
                            }
                            out.push(Candidate {
                                kind: ProbeKind::WorkState,
                                question: format!("Which issue did the agent start work on at call {n}?"),
                                answer: titles.get(&id).map_or(id.clone(), |t| format!("{id}: {t}")),
                                facts,
                                source: i,
                                fact_sources: vec![i, i],
                                tier: Tier::Critical,
                                ..Candidate::default()
                            });
                        }
                        Op::Close(ids) => {
                            // What the tracker reported closed (`✓ Closed ID: reason`).
                            let closed: Vec<String> = ids
                                .iter()
                                .filter(|id| result.content.contains(&format!("Closed {id}")))
                                .cloned()
                                .collect();
                            let closed = if closed.is_empty() && !result.content.trim().is_empty() {
                                ids.clone()
                            } else {
                                closed
                            };
                            if closed.is_empty() {
                                continue;
                            }
                            let facts: Vec<Vec<String>> =
                                closed.iter().map(|id| vec![format!("Closed {id}"), id.clone()]).collect();
                            out.push(Candidate {
                                kind: ProbeKind::WorkState,
                                question: format!("Which issues did the agent close at call {n}?"),
                                answer: closed
                                    .iter()
                                    .map(|id| titles.get(id).map_or(id.clone(), |t| format!("{id}: {t}")))
                                    .collect::<Vec<_>>()
                                    .join("; "),
                                facts,
                                source: j,
                                tier: Tier::Critical,
                                ..Candidate::default()
                            });
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracker_commands_are_read_from_a_command_line() {
        assert_eq!(
            ops("bd show spotter-gqc.5 2>&1; echo \"===\"; bd show spotter-gqc.6 2>&1"),
            vec![Op::Show("spotter-gqc.5".into()), Op::Show("spotter-gqc.6".into())]
        );
        assert_eq!(ops("bd update spotter-dov.1 --status in_progress"), vec![Op::Start("spotter-dov.1".into())]);
        assert_eq!(ops("bd update x --status=closed"), vec![]);
        assert_eq!(
            ops("bd close a.1 a.2 --reason=\"done\" && git push"),
            vec![Op::Close(vec!["a.1".into(), "a.2".into()])]
        );
        assert_eq!(ops("gh issue view #42 --repo o/r"), vec![Op::Show("42".into())]);
        assert_eq!(ops("git status"), vec![]);
    }

    #[test]
    fn an_issue_text_runs_to_the_next_header_and_names_its_title_and_files() {
        let out = "○ x.1 · Add the thing to the parser   [● P1 · OPEN]\nOwner: A\n- `src/parse.rs`\n===\n○ x.2 · Other   [● P2 · OPEN]\nbody";
        let text = issue_text(out, "x.1").expect("found");
        assert!(text.contains("src/parse.rs") && !text.contains("Other"));
        assert_eq!(title_of(text, "x.1").as_deref(), Some("Add the thing to the parser"));
        assert_eq!(named_files(text), vec!["parse.rs".to_string()]);
        let epic = "○ x [EPIC] · Unified transcript view   [● P1 · OPEN]\nbody";
        assert_eq!(title_of(issue_text(epic, "x").expect("found"), "x").as_deref(), Some("Unified transcript view"));
        assert!(is_prohibition("Do not replace highlight.js") && !is_prohibition("must be exactly 10 lines"));
        let gh = "title:\tCrash on empty input\nstate:\tOPEN\n--\nSee `lib/a.py`.";
        assert_eq!(title_of(issue_text(gh, "42").expect("found"), "42").as_deref(), Some("Crash on empty input"));
    }
}
