//! Prompt templates for the LLM summarizer and judge, and the transcripts they embed.
//!
//! Prompts are Markdown files in `crates/runner/prompts/`, embedded at compile time. A file is
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
//! `question`, `expected`, `facts`, `answer`.
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

use compaction::{Context, InputCuts, Message, Origin, PromptKind, Role};
use llm::ChatMessage;

/// Placeholders a summary prompt may use.
pub const SUMMARY_VARS: &[&str] = &["messages", "previous", "task", "round", "stage", "max_tokens", "instructions"];
/// Placeholders the judge's answer prompt may use.
pub const ANSWER_VARS: &[&str] = &["question"];
/// Placeholders the judge's grading prompt may use.
pub const GRADE_VARS: &[&str] = &["question", "expected", "facts", "answer"];
/// Placeholders the judge's directive-listing prompt may use.
pub const DIRECTIVE_VARS: &[&str] = &["summary"];
/// Placeholders the probe writer's prompt may use (`compactbench probes generate`).
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

/// The built-in prompt files, by name.
pub mod builtin {
    pub const PAPER_MID_STAGE: &str = include_str!("../../prompts/paper_mid_stage.md");
    pub const GENERAL_CHAT: &str = include_str!("../../prompts/general_chat.md");
    pub const SESSION_SUMMARY: &str = include_str!("../../prompts/session_summary.md");
    pub const PROGRESSIVE: &str = include_str!("../../prompts/progressive.md");
    pub const SPLIT_TURN_PREFIX: &str = include_str!("../../prompts/split_turn_prefix.md");
    pub const COMPACT_SUMMARY: &str = include_str!("../../prompts/compact_summary.md");
    pub const CONTINUATION: &str = include_str!("../../prompts/continuation.md");
    pub const OPENCODE_ANCHORED: &str = include_str!("../../prompts/opencode_anchored.md");
    pub const CODEX_HANDOFF: &str = include_str!("../../prompts/codex_handoff.md");
    pub const GOOSE_COMPACTION: &str = include_str!("../../prompts/goose_compaction.md");
    pub const OPENHANDS_CONDENSATION: &str = include_str!("../../prompts/openhands_condensation.md");
    pub const ANTHROPIC_COMPACTION: &str = include_str!("../../prompts/anthropic_compaction.md");
    pub const LANGCHAIN_SUMMARY: &str = include_str!("../../prompts/langchain_summary.md");
    pub const EXTERNAL: &str = include_str!("../../prompts/external.md");
    pub const LETTA_SUMMARY: &str = include_str!("../../prompts/letta_summary.md");
    pub const JUDGE_ANSWER: &str = include_str!("../../prompts/judge_answer.md");
    pub const JUDGE_GRADE: &str = include_str!("../../prompts/judge_grade.md");
    pub const JUDGE_DIRECTIVES: &str = include_str!("../../prompts/judge_directives.md");
    pub const PROBE_WRITER: &str = include_str!("../../prompts/probe_writer.md");
}

/// How a span is written into a summary prompt; each seed's code has its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transcript {
    /// Seed 000's `llmSummarize`: `[role]: content`, one message after another, joined by a
    /// newline.
    Brackets,
    /// Seed 001's `formatMessagesForSummary`: `[i] ROLE:\ncontent` joined by `\n\n---\n\n`;
    /// tool calls as `[Tool: name(args)]`, tool results as `[Result: <JSON string, first 500
    /// characters>...]`; content over 2,000 characters cut with `\n[...truncated...]`.
    Indexed,
    /// Seed 004's `messagesToText`: `ROLE:\ncontent` joined by `\n\n---\n\n`; tool calls as
    /// `[Called name with: args]`, results as `[name result: <first 500 characters>...]`, or
    /// `[name result: cleared]` once pruned. Also used for 002, 003 and custom prompts.
    Sections,
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn compact_args(args: &str) -> String {
    serde_json::from_str::<serde_json::Value>(args).map(|v| v.to_string()).unwrap_or_else(|_| args.to_string())
}

fn first_chars(s: &str, n: Option<usize>) -> &str {
    InputCuts::first_chars(s, n).0
}

fn tool_name(m: &Message) -> &str {
    m.name.as_deref().unwrap_or("tool")
}

impl Transcript {
    /// Write entries `span` of `ctx`, cut as the request's document cuts them (`cuts`: 001's
    /// 2,000 characters per message and 500 per result, 004's 500 per result, none for 000,
    /// 002 and 003).
    pub fn render(self, ctx: &Context, span: &[usize], cuts: &InputCuts) -> String {
        let entries: Vec<_> = span.iter().filter_map(|&i| ctx.get(i)).collect();
        match self {
            Transcript::Brackets => entries
                .iter()
                .map(|e| {
                    let m = e.message();
                    let mut text = format!("[{}]: {}", m.role, m.content);
                    for c in &m.tool_calls {
                        text.push_str(&format!(" [tool call {}({})]", c.name, compact_args(&c.arguments)));
                    }
                    text
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Transcript::Indexed => entries
                .iter()
                .enumerate()
                .map(|(idx, e)| {
                    let m = e.message();
                    let mut parts = Vec::new();
                    if m.role == Role::Tool {
                        parts.push(format!(
                            "[Result: {}...]",
                            first_chars(&json_string(&m.content), cuts.tool_result_chars)
                        ));
                    } else {
                        parts.push(m.content.clone());
                        for c in &m.tool_calls {
                            parts.push(format!("[Tool: {}({})]", c.name, compact_args(&c.arguments)));
                        }
                    }
                    let mut content = parts.join("\n");
                    if let (head, true) = InputCuts::first_chars(&content, cuts.message_chars) {
                        content = format!("{head}\n[...truncated...]");
                    }
                    format!("[{idx}] {}:\n{content}", m.role.as_str().to_uppercase())
                })
                .collect::<Vec<_>>()
                .join("\n\n---\n\n"),
            Transcript::Sections => entries
                .iter()
                .map(|e| {
                    let m = e.message();
                    let mut parts = Vec::new();
                    if m.role == Role::Tool {
                        if matches!(e.origin(), Origin::Masked { .. }) {
                            parts.push(format!("[{} result: cleared]", tool_name(m)));
                        } else {
                            match InputCuts::first_chars(&json_string(&m.content), cuts.tool_result_chars) {
                                (head, true) => parts.push(format!("[{} result: {head}...]", tool_name(m))),
                                (whole, false) if cuts.tool_result_chars.is_some() => {
                                    parts.push(format!("[{} result: {whole}...]", tool_name(m)))
                                }
                                (whole, false) => parts.push(format!("[{} result: {whole}]", tool_name(m))),
                            }
                        }
                    } else {
                        if !m.content.is_empty() {
                            parts.push(m.content.clone());
                        }
                        for c in &m.tool_calls {
                            parts.push(format!("[Called {} with: {}]", c.name, compact_args(&c.arguments)));
                        }
                    }
                    format!("{}:\n{}", m.role.as_str().to_uppercase(), parts.join("\n"))
                })
                .collect::<Vec<_>>()
                .join("\n\n---\n\n"),
        }
    }
}

/// What a seed's code does with one summary request besides the prompt text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeedCall {
    /// The prompt file.
    pub file: &'static str,
    pub name: &'static str,
    pub transcript: Transcript,
    /// The temperature the document sets (`None`: the configured one).
    pub temperature: Option<f32>,
    /// The document's code treats an empty answer as a failure.
    pub empty_fails: bool,
}

/// The prompt, transcript, temperature and empty-answer rule of each prompt kind.
pub fn seed_call(kind: &PromptKind) -> SeedCall {
    use builtin::*;
    match kind {
        // 000: `return result.text || null`, and null skips P3.
        PromptKind::PaperMidStage { .. } => SeedCall {
            file: PAPER_MID_STAGE,
            name: "paper_mid_stage.md",
            transcript: Transcript::Brackets,
            temperature: None,
            empty_fails: true,
        },
        PromptKind::GeneralChat => SeedCall {
            file: GENERAL_CHAT,
            name: "general_chat.md",
            transcript: Transcript::Brackets,
            temperature: None,
            empty_fails: true,
        },
        // 001: `return text`, whatever it is; temperature 0.3.
        PromptKind::SessionSummary => SeedCall {
            file: SESSION_SUMMARY,
            name: "session_summary.md",
            transcript: Transcript::Indexed,
            temperature: Some(0.3),
            empty_fails: false,
        },
        PromptKind::Progressive => SeedCall {
            file: PROGRESSIVE,
            name: "progressive.md",
            transcript: Transcript::Sections,
            temperature: None,
            empty_fails: true,
        },
        PromptKind::SplitTurnPrefix => SeedCall {
            file: SPLIT_TURN_PREFIX,
            name: "split_turn_prefix.md",
            transcript: Transcript::Sections,
            temperature: None,
            empty_fails: true,
        },
        // 003: "LLM summarization fails (timeout, error, empty)".
        PromptKind::CompactSummary => SeedCall {
            file: COMPACT_SUMMARY,
            name: "compact_summary.md",
            transcript: Transcript::Sections,
            temperature: None,
            empty_fails: true,
        },
        // 004: `summary: result.text`, whatever it is.
        PromptKind::Continuation => SeedCall {
            file: CONTINUATION,
            name: "continuation.md",
            transcript: Transcript::Sections,
            temperature: None,
            empty_fails: false,
        },
        // The production systems: an empty answer is no summary.
        PromptKind::OpencodeAnchored => production(OPENCODE_ANCHORED, "opencode_anchored.md"),
        PromptKind::CodexHandoff => production(CODEX_HANDOFF, "codex_handoff.md"),
        PromptKind::GooseCompaction => production(GOOSE_COMPACTION, "goose_compaction.md"),
        PromptKind::OpenhandsCondensation => production(OPENHANDS_CONDENSATION, "openhands_condensation.md"),
        PromptKind::AnthropicCompaction => production(ANTHROPIC_COMPACTION, "anthropic_compaction.md"),
        // LangChain returns whatever the model wrote.
        PromptKind::LangchainSummary => {
            SeedCall { empty_fails: false, ..production(LANGCHAIN_SUMMARY, "langchain_summary.md") }
        }
        PromptKind::LettaSummary => production(LETTA_SUMMARY, "letta_summary.md"),
        // The strategy sees an empty answer as the error it is.
        PromptKind::External { .. } => production(EXTERNAL, "external.md"),
    }
}

fn production(file: &'static str, name: &'static str) -> SeedCall {
    SeedCall { file, name, transcript: Transcript::Sections, temperature: None, empty_fails: true }
}

/// Every built-in summary prompt kind: the seeds', then the production systems'.
pub fn builtin_kinds() -> Vec<PromptKind> {
    vec![
        PromptKind::PaperMidStage { stage: String::new() },
        PromptKind::GeneralChat,
        PromptKind::SessionSummary,
        PromptKind::Progressive,
        PromptKind::SplitTurnPrefix,
        PromptKind::CompactSummary,
        PromptKind::Continuation,
        PromptKind::OpencodeAnchored,
        PromptKind::CodexHandoff,
        PromptKind::GooseCompaction,
        PromptKind::OpenhandsCondensation,
        PromptKind::AnthropicCompaction,
        PromptKind::LangchainSummary,
        PromptKind::LettaSummary,
        PromptKind::External { instructions: String::new() },
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::{Entry, ToolCall};
    use compaction_strategies::{keep_last_n, prune_then_summarize};

    fn all_kinds() -> Vec<PromptKind> {
        builtin_kinds()
    }

    #[test]
    fn every_builtin_prompt_parses_and_embeds_the_transcript() {
        for kind in all_kinds() {
            let call = seed_call(&kind);
            let t = PromptTemplate::parse(call.name, call.file, SUMMARY_VARS).unwrap();
            assert!(t.uses("messages"), "{}", call.name);
            assert!(t.system.is_some(), "{} has a system prompt", call.name);
            assert!(!call.file.contains("{{round}}") || t.uses("round"));
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
    }

    #[test]
    fn seed_000_prompt_is_verbatim_with_the_stage() {
        let t = PromptTemplate::parse("p", builtin::PAPER_MID_STAGE, SUMMARY_VARS).unwrap();
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
        let t = PromptTemplate::parse("s", builtin::SESSION_SUMMARY, SUMMARY_VARS).unwrap();
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
        let t = PromptTemplate::parse("c", builtin::CONTINUATION, SUMMARY_VARS).unwrap();
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
        let t = PromptTemplate::parse("p", builtin::PROGRESSIVE, SUMMARY_VARS).unwrap();
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
