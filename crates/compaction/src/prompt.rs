//! A summary prompt, owned by the strategy that asks for it.
//!
//! A strategy that summarizes names its prompt in each [`SummaryRequest`](crate::SummaryRequest):
//! the template text (a Markdown file beside the strategy's module, included at compile time),
//! how the span is written into it ([`Transcript`]), the temperature and empty-answer rule of
//! its document, and any values the template needs beyond the request's own. A summarizer reads
//! everything from the request; it keeps no list of the strategies' prompts.
//!
//! The template format (marker lines `<!-- system -->` and `<!-- user -->`, `{{name}}`
//! placeholders, `{{#name}}...{{/name}}` sections) is parsed by the caller's summarizer (the
//! runner's `summarize::prompts`). Placeholders every summarizer fills from the request:
//! `messages` (the span, written as [`Prompt::transcript`] says), `previous`, `task`, `round`,
//! `max_tokens`; a prompt's [`Prompt::vars`] add their own (`stage`, `instructions`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::context::{Context, Origin};
use crate::message::{Message, Role};

/// A summary prompt: its name, template and the rules its document sets around the call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    /// The prompt's name: its file's name without `.md` (`session_summary`).
    pub name: Cow<'static, str>,
    /// The template text (see the module docs).
    pub template: Cow<'static, str>,
    /// How the span is written into `{{messages}}` (one of the transcript formats).
    pub transcript: Transcript,
    /// The temperature the document sets (`None`: the configured one).
    pub temperature: Option<f32>,
    /// Whether the document's code treats an empty answer as a failure or hands it to the
    /// strategy as the summary. Either way an empty answer is counted as a failed summary.
    pub empty_fails: bool,
    /// Values of placeholders beyond the request's own, by name (a workflow's `stage`, an
    /// external strategy's `instructions`).
    #[serde(default)]
    pub vars: Vec<(Cow<'static, str>, String)>,
    /// What the template's own placeholders read when the request has no value (a document's
    /// code may write "None - this is the first compaction round." for `previous` and
    /// "Unknown task" for `task`). Used with this prompt's template only, not with a custom
    /// prompt file.
    #[serde(default)]
    pub defaults: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    /// The first line of a summary written without a model for this prompt (the offline
    /// stand-in's heading: the one the document's template asks for, such as
    /// `## Session Summary (Compaction Round {round})`, `{round}` standing for the request's
    /// round); `None`: `## Summary (round N)`.
    #[serde(default)]
    pub heading: Option<String>,
    /// The strategy's own words that an experiment's custom prompt file does not replace (an
    /// external strategy's instructions). A custom prompt file replaces every other prompt.
    #[serde(default)]
    pub fixed: bool,
}

impl Prompt {
    /// A prompt from its file: the name and the text, with the document-neutral rules: the
    /// span written as [`Transcript::Sections`], the configured temperature, an empty answer a
    /// failure, no extra values.
    pub const fn new(name: &'static str, template: &'static str) -> Prompt {
        Prompt {
            name: Cow::Borrowed(name),
            template: Cow::Borrowed(template),
            transcript: Transcript::Sections,
            temperature: None,
            empty_fails: true,
            vars: Vec::new(),
            defaults: Vec::new(),
            heading: None,
            fixed: false,
        }
    }

    /// The prompt's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value of placeholder `name` among [`Prompt::vars`].
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// With placeholder `name` set to `value`.
    pub fn with_var(mut self, name: &'static str, value: impl Into<String>) -> Prompt {
        self.vars.retain(|(k, _)| k != name);
        self.vars.push((Cow::Borrowed(name), value.into()));
        self
    }

    /// With the offline stand-in's heading.
    pub fn with_heading(mut self, heading: impl Into<String>) -> Prompt {
        self.heading = Some(heading.into());
        self
    }
}

/// How a span is written into a summary prompt: three transcript formats, each named by its
/// shape. A strategy picks the one its document's code writes; the kernel knows the formats,
/// not the strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transcript {
    /// One line per message, `[role]: content`, a tool call appended as
    /// ` [tool call name(args)]`, the lines joined by a newline.
    Brackets,
    /// Numbered sections, `[i] ROLE:\ncontent` joined by `\n\n---\n\n`; tool calls as
    /// `[Tool: name(args)]`, tool results as `[Result: <JSON string, cut to the request's
    /// `tool_result_chars`>...]`; a section over the request's `message_chars` cut with
    /// `\n[...truncated...]`.
    Indexed,
    /// Unnumbered sections, `ROLE:\ncontent` joined by `\n\n---\n\n`; tool calls as
    /// `[Called name with: args]`, results as `[name result: <JSON string, cut to the
    /// request's `tool_result_chars`>...]`, or `[name result: cleared]` once masked. The
    /// default, and the format of custom prompts.
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
    /// Write entries `span` of `ctx`, cut as the request's document cuts them (`cuts`: a
    /// length per message, per tool result, or none).
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

/// How a document cuts messages before summarizing them: a message's text (its content with
/// its tool calls written out) to `message_chars` characters, a tool result's content to
/// `tool_result_chars` characters. `None` passes the text whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct InputCuts {
    #[serde(default)]
    /// Keep the first this many characters of every message, if set.
    pub message_chars: Option<usize>,
    #[serde(default)]
    /// Keep the first this many characters of every tool result, if set.
    pub tool_result_chars: Option<usize>,
}

impl InputCuts {
    /// No cut: the span as it is.
    pub const NONE: InputCuts = InputCuts { message_chars: None, tool_result_chars: None };

    /// `text` cut to its first `n` characters when `n` is set and the text is longer; the
    /// second value says whether it was cut.
    pub fn first_chars(text: &str, n: Option<usize>) -> (&str, bool) {
        match n.and_then(|n| text.char_indices().nth(n)) {
            Some((i, _)) => (&text[..i], true),
            None => (text, false),
        }
    }

    /// `message` as the summarizer sees it: a tool result's content cut to
    /// `tool_result_chars`; any other message's content cut to `message_chars`, and its tool
    /// calls kept only while the text written so far (content, then one line per call) is
    /// within `message_chars`, as a transcript cut at that length would show them.
    pub fn apply<'m>(&self, message: &'m Message) -> std::borrow::Cow<'m, Message> {
        use std::borrow::Cow;
        if message.role == Role::Tool {
            return match Self::first_chars(&message.content, self.tool_result_chars) {
                (_, false) => Cow::Borrowed(message),
                (head, true) => {
                    let mut m = message.clone();
                    m.content = head.to_string();
                    Cow::Owned(m)
                }
            };
        }
        let Some(n) = self.message_chars else { return Cow::Borrowed(message) };
        let (head, cut) = Self::first_chars(&message.content, Some(n));
        let mut used = head.chars().count();
        let mut calls = 0;
        for c in &message.tool_calls {
            // "\n[Tool: name(args)]"
            let len = 10 + c.name.chars().count() + c.arguments.chars().count();
            if cut || used + len > n {
                break;
            }
            used += len;
            calls += 1;
        }
        if !cut && calls == message.tool_calls.len() {
            return Cow::Borrowed(message);
        }
        let mut m = message.clone();
        m.content = head.to_string();
        m.tool_calls.truncate(calls);
        Cow::Owned(m)
    }
}
