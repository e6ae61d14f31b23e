//! Prompt templates for the LLM summarizer and judge.
//!
//! Prompts are Markdown files embedded at compile time: a strategy's summary prompts beside
//! its module in `compaction-strategies` (each request carries its [`compaction::Prompt`]),
//! the judge's and the probe writer's in `crates/runner/prompts/`. A file is
//! split by two marker lines: the text after `<!-- system -->` is the system prompt, the text
//! after `<!-- user -->` the user message; anything before the first marker is a note for
//! readers and is not sent. A file with no marker is a system prompt whose user message is the
//! transcript (`{{messages}}`). Placeholders are `{{name}}`; `{{#name}}...{{/name}}` keeps its
//! content only when `name` has a value. Values are inserted in one pass, so a transcript that
//! happens to contain `{{...}}` is sent as written.
//!
//! Summary placeholders: `messages` (the span as a transcript), `previous` (the previous summary,
//! or seed 001's "None - this is the first compaction round."), `task` (the original task, or
//! 001's "Unknown task"), `round`, `stage` (000's paper stage), `max_tokens`. Judge placeholders:
//! `question`, `expected`, `facts`, `answer`. The next-action prompt (`next_action.md`) has none:
//! it follows the context it asks about.
//!
//! ```
//! use runner::summarize::prompts::{PromptTemplate, Vars, SUMMARY_VARS};
//!
//! let t = PromptTemplate::parse("mine.md", "<!-- system -->\nBe brief.\n<!-- user -->\n{{#previous}}Before: {{previous}}\n{{/previous}}{{messages}}", SUMMARY_VARS).unwrap();
//! let mut vars = Vars::default();
//! vars.set("messages", "USER:\nhi {{round}}");
//! let msgs = t.render(&vars);
//! assert_eq!(msgs[0].content, "Be brief.");
//! assert_eq!(msgs[1].content, "USER:\nhi {{round}}");
//! ```

use std::collections::BTreeMap;

use compaction::Prompt;
use llm::ChatMessage;

/// Placeholders a summary prompt may use.
pub const SUMMARY_VARS: &[&str] = &["messages", "previous", "task", "round", "stage", "max_tokens", "instructions"];
/// Placeholders the judge's answer prompt may use.
pub const ANSWER_VARS: &[&str] = &["question"];
/// Placeholders the judge's grading prompt may use.
pub const GRADE_VARS: &[&str] = &["question", "expected", "facts", "answer"];
/// Placeholders the judge's directive-listing prompt may use.
pub const DIRECTIVE_VARS: &[&str] = &["summary"];
/// Placeholders the next-action prompt may use (none: the context is the messages before it).
pub const NEXT_ACTION_VARS: &[&str] = &[];
/// Placeholders the probe writer's prompt may use (`compactlens probes generate`).
pub const PROBE_VARS: &[&str] = &["transcript", "max_probes"];

const SYSTEM_MARKER: &str = "<!-- system -->";
const USER_MARKER: &str = "<!-- user -->";

/// A prompt file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {problem}")]
pub struct PromptError {
    pub file: String,
    pub line: usize,
    pub problem: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Text(String),
    Var(String),
    Section(String, Vec<Segment>),
}

/// A parsed prompt file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    pub name: String,
    system: Option<Vec<Segment>>,
    user: Vec<Segment>,
}

/// Values for the placeholders. An unset name renders as empty and drops its sections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars(BTreeMap<String, String>);

impl Vars {
    pub fn set(&mut self, name: &str, value: impl Into<String>) -> &mut Vars {
        self.0.insert(name.to_string(), value.into());
        self
    }
    /// True when `name` was given a value (an empty one too).
    pub fn is_set(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }
}

impl PromptTemplate {
    /// Parse `text` (the file `name`), allowing the placeholders `allowed`.
    pub fn parse(name: &str, text: &str, allowed: &[&str]) -> Result<PromptTemplate, PromptError> {
        #[derive(PartialEq)]
        enum Part {
            Note,
            System,
            User,
        }
        let mut part = Part::Note;
        let mut system: Option<(usize, String)> = None;
        let mut user: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match line.trim() {
                SYSTEM_MARKER => {
                    if system.is_some() || user.is_some() {
                        return Err(err(name, i + 1, "<!-- system --> must come once, before <!-- user -->"));
                    }
                    system = Some((i + 2, String::new()));
                    part = Part::System;
                }
                USER_MARKER => {
                    if user.is_some() {
                        return Err(err(name, i + 1, "second <!-- user --> marker"));
                    }
                    user = Some((i + 2, String::new()));
                    part = Part::User;
                }
                _ => {
                    let buf = match part {
                        Part::Note => None,
                        Part::System => system.as_mut(),
                        Part::User => user.as_mut(),
                    };
                    if let Some((_, buf)) = buf {
                        buf.push_str(line);
                        buf.push('\n');
                    }
                }
            }
        }
        let (system, user) = match (system, user) {
            (None, None) => (Some((1, text.to_string())), (0, "{{messages}}".to_string())),
            (s, Some(u)) => (s, u),
            (Some(s), None) => (Some(s), (0, "{{messages}}".to_string())),
        };
        let system = match system {
            Some((line, body)) => Some(parse_segments(name, line, body.trim_end(), allowed)?),
            None => None,
        };
        let user = parse_segments(name, user.0, user.1.trim_end(), allowed)?;
        if system.as_ref().is_some_and(|s| s.is_empty()) || user.is_empty() {
            return Err(err(name, 1, "a prompt section is empty"));
        }
        Ok(PromptTemplate { name: name.to_string(), system, user })
    }

    /// The messages to send: the system prompt (when the file has one), then the user message.
    pub fn render(&self, vars: &Vars) -> Vec<ChatMessage> {
        let mut out = Vec::new();
        if let Some(system) = &self.system {
            out.push(ChatMessage::system(render(system, vars)));
        }
        out.push(ChatMessage::user(render(&self.user, vars)));
        out
    }

    /// True when the template uses `name` anywhere.
    pub fn uses(&self, name: &str) -> bool {
        fn find(segs: &[Segment], name: &str) -> bool {
            segs.iter().any(|s| match s {
                Segment::Var(v) => v == name,
                Segment::Section(v, inner) => v == name || find(inner, name),
                Segment::Text(_) => false,
            })
        }
        self.system.as_deref().is_some_and(|s| find(s, name)) || find(&self.user, name)
    }
}

fn err(file: &str, line: usize, problem: impl Into<String>) -> PromptError {
    PromptError { file: file.to_string(), line, problem: problem.into() }
}

fn parse_segments(file: &str, first_line: usize, body: &str, allowed: &[&str]) -> Result<Vec<Segment>, PromptError> {
    let mut stack: Vec<(String, usize, Vec<Segment>)> = vec![(String::new(), first_line, Vec::new())];
    let mut rest = body;
    let mut consumed = 0usize;
    let line_at = |offset: usize| first_line + body[..offset].matches('\n').count();
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else {
            return Err(err(file, line_at(consumed + open), "`{{` without `}}`"));
        };
        let tag = &rest[open + 2..open + close];
        let top = stack.last_mut().map(|t| &mut t.2);
        if let Some(top) = top {
            if open > 0 {
                top.push(Segment::Text(rest[..open].to_string()));
            }
        }
        let line = line_at(consumed + open);
        let (kind, name) = match tag.chars().next() {
            Some('#') => ('#', &tag[1..]),
            Some('/') => ('/', &tag[1..]),
            _ => (' ', tag),
        };
        let name = name.trim();
        if !allowed.contains(&name) {
            return Err(err(
                file,
                line,
                format!("unknown placeholder {{{{{tag}}}}} (allowed: {})", allowed.join(", ")),
            ));
        }
        match kind {
            '#' => stack.push((name.to_string(), line, Vec::new())),
            '/' => {
                let (open_name, _, inner) = stack.pop().unwrap_or_default();
                if open_name != name || stack.is_empty() {
                    return Err(err(file, line, format!("{{{{/{name}}}}} closes no open {{{{#{name}}}}}")));
                }
                // A closing tag at the end of its line takes the line break with it.
                let after = &rest[open + close + 2..];
                let skip = usize::from(after.starts_with('\n'));
                if let Some(top) = stack.last_mut() {
                    top.2.push(Segment::Section(name.to_string(), inner));
                }
                consumed += open + close + 2 + skip;
                rest = &after[skip..];
                continue;
            }
            _ => {
                if let Some(top) = stack.last_mut() {
                    top.2.push(Segment::Var(name.to_string()));
                }
            }
        }
        let after_tag = open + close + 2;
        // An opening section tag alone on its line takes the line break with it.
        let skip = usize::from(kind == '#' && rest[after_tag..].starts_with('\n'));
        consumed += after_tag + skip;
        rest = &rest[after_tag + skip..];
    }
    if stack.len() > 1 {
        let (name, line, _) = stack.pop().unwrap_or_default();
        return Err(err(file, line, format!("{{{{#{name}}}}} is never closed")));
    }
    let mut top = stack.pop().map(|t| t.2).unwrap_or_default();
    if !rest.is_empty() {
        top.push(Segment::Text(rest.to_string()));
    }
    Ok(top)
}

fn render(segs: &[Segment], vars: &Vars) -> String {
    let mut out = String::new();
    for s in segs {
        match s {
            Segment::Text(t) => out.push_str(t),
            Segment::Var(v) => out.push_str(vars.get(v).unwrap_or_default()),
            Segment::Section(v, inner) => {
                if vars.get(v).is_some() {
                    out.push_str(&render(inner, vars));
                }
            }
        }
    }
    out
}

/// The runner's own prompt files, by name: the judge's, the probe writer's, and the one an
/// external strategy's instructions go into. A strategy's summary prompts are its own
/// ([`compaction::Prompt`], in `compaction-strategies`).
pub mod builtin {
    pub const EXTERNAL: &str = include_str!("../../prompts/external.md");
    pub const JUDGE_ANSWER: &str = include_str!("../../prompts/judge_answer.md");
    pub const JUDGE_GRADE: &str = include_str!("../../prompts/judge_grade.md");
    pub const JUDGE_DIRECTIVES: &str = include_str!("../../prompts/judge_directives.md");
    pub const PROBE_WRITER: &str = include_str!("../../prompts/probe_writer.md");
    pub const NEXT_ACTION: &str = include_str!("../../prompts/next_action.md");
}

/// The placeholders `prompt`'s template may use: the request's own ([`SUMMARY_VARS`]) and the
/// prompt's extra values and defaults.
pub fn allowed_vars(prompt: &Prompt) -> Vec<&str> {
    let mut out: Vec<&str> = SUMMARY_VARS.to_vec();
    for name in prompt.vars.iter().map(|(k, _)| k.as_ref()).chain(prompt.defaults.iter().map(|(k, _)| k.as_ref())) {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Parse a strategy's prompt: its template, named after the prompt (`session_summary.md`).
pub fn parse_prompt(prompt: &Prompt) -> Result<PromptTemplate, PromptError> {
    PromptTemplate::parse(&format!("{}.md", prompt.name), &prompt.template, &allowed_vars(prompt))
}

/// The prompt of an external strategy's `summarize` request: its instructions, in
/// `external.md`, over the messages it sent. The experiment's custom prompt file does not
/// replace it: the instructions are the strategy's own.
pub fn external_prompt(instructions: impl Into<String>) -> Prompt {
    Prompt { fixed: true, ..Prompt::new("external", builtin::EXTERNAL) }.with_var("instructions", instructions)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::{Context, InputCuts, Message, Origin, Transcript};
    use compaction::{Entry, ToolCall};
    use compaction_strategies::{cut_point, keep_last_n, priority_chain, prune_then_summarize};

    #[test]
    fn every_strategy_prompt_parses_and_embeds_the_transcript() {
        let prompts = compaction_strategies::prompts();
        assert!(prompts.len() >= 14, "{} prompts", prompts.len());
        let mut names = std::collections::BTreeSet::new();
        for (strategy, prompt) in prompts.iter().chain([&("external", external_prompt("x"))]) {
            let t = parse_prompt(prompt).unwrap_or_else(|e| panic!("{strategy}: {e}"));
            assert!(t.uses("messages"), "{strategy}: {}", prompt.name);
            assert!(t.system.is_some(), "{strategy}: {} has a system prompt", prompt.name);
            assert!(names.insert(prompt.name.clone()), "two prompts are named {}", prompt.name);
            for k in prompt.vars.iter().map(|(k, _)| k).chain(prompt.defaults.iter().map(|(k, _)| k)) {
                assert!(t.uses(k), "{strategy}: {} sets {k} but its template never uses it", prompt.name);
            }
        }
        PromptTemplate::parse("judge_answer.md", builtin::JUDGE_ANSWER, ANSWER_VARS).unwrap();
        let g = PromptTemplate::parse("judge_grade.md", builtin::JUDGE_GRADE, GRADE_VARS).unwrap();
        for v in GRADE_VARS {
            assert!(g.uses(v), "{v}");
        }
        let d = PromptTemplate::parse("judge_directives.md", builtin::JUDGE_DIRECTIVES, DIRECTIVE_VARS).unwrap();
        assert!(d.uses("summary") && d.system.is_some());
        let w = PromptTemplate::parse("probe_writer.md", builtin::PROBE_WRITER, PROBE_VARS).unwrap();
        assert!(w.uses("transcript") && w.uses("max_probes"));
        let n = PromptTemplate::parse("next_action.md", builtin::NEXT_ACTION, NEXT_ACTION_VARS).unwrap();
        assert!(n.system.is_none(), "the context's own system prompt stays the system prompt");
    }

    #[test]
    fn seed_000_prompt_is_verbatim_with_the_stage() {
        let t = parse_prompt(&priority_chain::paper_mid_stage_prompt("")).unwrap();
        let mut v = Vars::default();
        v.set("stage", "Topik Definitif").set("messages", "[user]: halo");
        let m = t.render(&v);
        assert!(m[0].content.starts_with("Ringkas diskusi berikut jadi 3-5 bullet points dalam bahasa Indonesia.\n"));
        assert!(m[0].content.contains("Konteks: Tahap paper \"Topik Definitif\" sedang berlangsung.\n"));
        assert!(m[0].content.ends_with("Max 500 karakter total. Hanya bullet points, tanpa pembuka/penutup."));
        assert_eq!(m[1].content, "[user]: halo");
        assert!(!m[0].content.contains("Seed 000"), "the note before the marker is not sent");
    }

    #[test]
    fn seed_001_prompt_is_verbatim_with_round_previous_and_task() {
        let t = parse_prompt(&keep_last_n::prompt()).unwrap();
        let mut v = Vars::default();
        v.set("previous", "None - this is the first compaction round.")
            .set("task", "Build a flashcard CLI")
            .set("messages", "[0] USER:\nhi")
            .set("round", "3");
        let m = t.render(&v);
        assert_eq!(
            m[0].content,
            "You are summarizing a coding agent's conversation history.\nYour summary will replace the compacted \
             messages, so preserve ALL information \nneeded to continue the task successfully.\n\nCRITICAL: Be \
             thorough but concise. Missing information cannot be recovered."
        );
        assert!(m[1].content.starts_with(
            "## Previous Summary\nNone - this is the first compaction round.\n\n## Original User Task\nBuild a \
             flashcard CLI\n\n## Messages to Summarize\n[0] USER:\nhi\n\n## Instructions\n"
        ));
        assert!(m[1].content.contains("### Session Summary (Compaction Round 3)\n\n#### Original Task\n"));
        assert!(m[1].content.ends_with("- If previous summary exists, INTEGRATE (don't duplicate) its content"));
    }

    #[test]
    fn seed_004_prompt_wraps_the_conversation() {
        let t = parse_prompt(&prune_then_summarize::prompt()).unwrap();
        let mut v = Vars::default();
        v.set("messages", "USER:\nmake the hero blue");
        let m = t.render(&v);
        assert!(m[0].content.starts_with("You are summarizing a CMS agent conversation"));
        assert!(m[0].content.ends_with("Keep under 2000 tokens while preserving all critical context."));
        assert!(!m[0].content.contains("<system>"));
        assert_eq!(
            m[1].content,
            "Summarize this conversation:\n\nUSER:\nmake the hero blue\n\nProvide a continuation prompt:"
        );
    }

    #[test]
    fn sections_appear_only_with_a_value() {
        let t = parse_prompt(&cut_point::progressive_prompt()).unwrap();
        let mut v = Vars::default();
        v.set("messages", "USER:\nx").set("max_tokens", "800");
        let without = t.render(&v)[1].content.clone();
        assert!(without.starts_with("## Blocks to summarize\nUSER:\nx\n"), "{without}");
        assert!(without.ends_with("At most 800 tokens."));
        v.set("previous", "old summary");
        let with = t.render(&v)[1].content.clone();
        assert!(with.starts_with("## Summary so far\nold summary\n\n## Blocks to summarize\n"), "{with}");
    }

    #[test]
    fn values_are_not_expanded_again() {
        let t = PromptTemplate::parse("x", "<!-- user -->\n{{messages}} / {{round}}", SUMMARY_VARS).unwrap();
        let mut v = Vars::default();
        v.set("messages", "{{round}} {{#task}}").set("round", "2");
        assert_eq!(t.render(&v)[0].content, "{{round}} {{#task}} / 2");
    }

    #[test]
    fn bad_templates_name_file_and_line() {
        let e =
            PromptTemplate::parse("custom.md", "<!-- system -->\nok\n\nuse {{secret}}\n", SUMMARY_VARS).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("custom.md", 4));
        assert!(e.problem.contains("unknown placeholder"), "{e}");
        let e = PromptTemplate::parse("c.md", "<!-- user -->\n{{#previous}}\nx\n", SUMMARY_VARS).unwrap_err();
        assert!(e.problem.contains("never closed"), "{e}");
        let e = PromptTemplate::parse("c.md", "{{/task}}", SUMMARY_VARS).unwrap_err();
        assert!(e.problem.contains("closes no open"), "{e}");
        let e = PromptTemplate::parse("c.md", "<!-- system -->\n\n<!-- user -->\nx", SUMMARY_VARS).unwrap_err();
        assert!(e.problem.contains("empty"), "{e}");
    }

    #[test]
    fn a_file_without_markers_is_a_system_prompt_over_the_transcript() {
        let t = PromptTemplate::parse("plain.md", "Summarize tersely.\n", SUMMARY_VARS).unwrap();
        let mut v = Vars::default();
        v.set("messages", "USER:\nhi");
        let m = t.render(&v);
        assert_eq!((m[0].content.as_str(), m[1].content.as_str()), ("Summarize tersely.", "USER:\nhi"));
    }

    fn sample_ctx() -> Context {
        let mut ctx = Context::from_messages(vec![
            Message::system("sys"),
            Message::user("Fix src/a.rs"),
            Message::assistant_calls(
                "Reading it.",
                vec![ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\": \"src/a.rs\"}".into(),
                }],
            ),
            Message::tool_result("c1", "read_file", "fn main() {\n  \"quoted\"\n}"),
        ]);
        let mut masked = Message::tool_result("c2", "grep", "[pruned]");
        masked.name = Some("grep".into());
        ctx.push(Entry::new(masked, Origin::Masked { index: 4 }));
        ctx
    }

    #[test]
    fn transcripts_follow_each_seeds_code() {
        let ctx = sample_ctx();
        assert_eq!(
            Transcript::Brackets.render(&ctx, &[1, 2], &InputCuts::NONE),
            "[user]: Fix src/a.rs\n[assistant]: Reading it. [tool call read_file({\"path\":\"src/a.rs\"})]"
        );
        assert_eq!(
            Transcript::Indexed.render(&ctx, &[2, 3], &keep_last_n::INPUT_CUTS),
            "[0] ASSISTANT:\nReading it.\n[Tool: read_file({\"path\":\"src/a.rs\"})]\n\n---\n\n[1] TOOL:\n[Result: \
             \"fn main() {\\n  \\\"quoted\\\"\\n}\"...]"
        );
        assert_eq!(
            Transcript::Sections.render(&ctx, &[2, 3, 4], &prune_then_summarize::INPUT_CUTS),
            "ASSISTANT:\nReading it.\n[Called read_file with: {\"path\":\"src/a.rs\"}]\n\n---\n\nTOOL:\n[read_file \
             result: \"fn main() {\\n  \\\"quoted\\\"\\n}\"...]\n\n---\n\nTOOL:\n[grep result: cleared]"
        );
        // 002 and 003 cut nothing: the result is written whole.
        assert_eq!(
            Transcript::Sections.render(&ctx, &[3], &InputCuts::NONE),
            "TOOL:\n[read_file result: \"fn main() {\\n  \\\"quoted\\\"\\n}\"]"
        );
    }

    /// 001's `formatMessagesForSummary` and 004's `messagesToText` cut as their requests say;
    /// a request without cuts (000, 002, 003) passes the text whole.
    #[test]
    fn seed_001_cuts_long_content_and_results() {
        let long = "é".repeat(2500);
        let ctx =
            Context::from_messages(vec![Message::user(long.clone()), Message::tool_result("c", "t", long.clone())]);
        let whole = Transcript::Sections.render(&ctx, &[1], &InputCuts::NONE);
        assert!(whole.contains(&"é".repeat(2500)));
        let cut = Transcript::Sections.render(&ctx, &[0, 1], &prune_then_summarize::INPUT_CUTS);
        assert!(cut.contains(&"é".repeat(2500)), "004 leaves messages whole");
        assert!(cut.ends_with(&format!("[t result: \"{}...]", "é".repeat(499))));
        let text = Transcript::Indexed.render(&ctx, &[0, 1], &keep_last_n::INPUT_CUTS);
        let (user, tool) = text.split_once("\n\n---\n\n").unwrap();
        assert_eq!(user, format!("[0] USER:\n{}\n[...truncated...]", "é".repeat(2000)));
        assert_eq!(tool, format!("[1] TOOL:\n[Result: \"{}...]", "é".repeat(499)));
    }
}
