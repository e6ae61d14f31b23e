//! Validation of a loaded conversation: structure, tool pairing and probes.

use std::collections::HashMap;

use compaction::pairing::{Answer, ToolPairing};
use compaction::{check_context, Context, Conversation, Role, Violation};

use super::{DatasetError, Problem};

/// Text with nothing to see: only whitespace and the zero-width characters (zero-width
/// space, joiners, word joiner, byte-order mark), which `trim` keeps.
pub fn is_blank_text(text: &str) -> bool {
    text.chars().all(|c| c.is_whitespace() || matches!(c, '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}'))
}

/// Every structural problem of `conv`, located by conversation, message and field (no file
/// or line: [`super::Dataset::validate`] adds them).
///
/// Checks: a non-empty id and at least one message; user and system messages have content,
/// an assistant message has content or tool calls, only assistant messages call tools, every
/// call has an id and a name, ids are unique within a message; a tool result has
/// `tool_call_id`, answers a call before it (via [`compaction::check_context`]) and, when it
/// carries a `name`, names the same tool as its call; every call has a result, except the
/// calls of the last assistant message when nothing but tool results follow it (in flight);
/// probes have unique non-empty ids, a question, `source_message` in range, `until` after it,
/// `asked_at` in `1..=messages` and after the source, and at least one fact with no empty alias (one of only zero-width characters is empty); answer keys
/// (probes with `origin: "written"`) as [`check_keys`] says.
pub fn check_conversation(conv: &Conversation) -> Vec<DatasetError> {
    let mut out = Vec::new();
    let id = Some(conv.id.as_str());
    let at = |problem: Problem| DatasetError::new(problem).in_conversation(id);

    if conv.id.trim().is_empty() {
        out.push(at(Problem::EmptyConversationId).at_field("id"));
    }
    if conv.messages.is_empty() {
        out.push(at(Problem::NoMessages).at_field("messages"));
    }

    // Tool pairing by compaction's one rule ([`compaction::pairing`]), here to name the call a
    // result answers.
    let mut pairing = ToolPairing::new();
    for (i, m) in conv.messages.iter().enumerate() {
        let here = |problem: Problem| at(problem).at_message(i);
        match m.role {
            Role::System | Role::User if m.content.trim().is_empty() => {
                out.push(here(Problem::EmptyContent { role: m.role }).at_field("content"));
            }
            Role::Assistant if m.content.trim().is_empty() && m.tool_calls.is_empty() => {
                out.push(here(Problem::EmptyAssistant).at_field("content"));
            }
            _ => {}
        }
        if !m.tool_calls.is_empty() && m.role != Role::Assistant {
            out.push(here(Problem::CallsOnNonAssistant { role: m.role }).at_field("tool_calls"));
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (j, c) in m.tool_calls.iter().enumerate() {
            if c.id.trim().is_empty() {
                out.push(here(Problem::EmptyCallId).at_field(format!("tool_calls[{j}].id")));
            } else if seen.insert(c.id.as_str(), j).is_some() {
                out.push(
                    here(Problem::DuplicateCallId { call_id: c.id.clone() }).at_field(format!("tool_calls[{j}].id")),
                );
            }
            if c.name.trim().is_empty() {
                out.push(here(Problem::EmptyToolName).at_field(format!("tool_calls[{j}].name")));
            }
        }
        let answer = pairing.push(m);
        if m.role == Role::Tool {
            match m.tool_call_id.as_deref() {
                None | Some("") => out.push(here(Problem::MissingToolCallId).at_field("tool_call_id")),
                Some(call_id) => {
                    let call = match answer {
                        Some(Answer::Call(j)) => conv.messages[j]
                            .tool_calls
                            .iter()
                            .rev()
                            .find(|c| c.id == call_id)
                            .map(|c| (j, c.name.as_str())),
                        _ => None,
                    };
                    if let (Some((call_message, call_name)), Some(name)) = (call, m.name.as_deref()) {
                        if name != call_name {
                            out.push(
                                here(Problem::ToolNameMismatch {
                                    name: name.to_string(),
                                    call_id: call_id.to_string(),
                                    call_name: call_name.to_string(),
                                    call_message,
                                })
                                .at_field("name"),
                            );
                        }
                    }
                }
            }
        }
    }

    for v in check_context(&Context::from_messages(conv.messages.iter().cloned())) {
        match v {
            // A missing id is already reported as such.
            Violation::OrphanToolResult { index, call_id } if !call_id.is_empty() => {
                out.push(at(Problem::OrphanToolResult { call_id }).at_message(index).at_field("tool_call_id"));
            }
            Violation::UnansweredToolCall { index, call_id } => {
                let j = conv
                    .messages
                    .get(index)
                    .and_then(|m| m.tool_calls.iter().position(|c| c.id == call_id))
                    .unwrap_or(0);
                out.push(
                    at(Problem::UnansweredToolCall { call_id })
                        .at_message(index)
                        .at_field(format!("tool_calls[{j}].id")),
                );
            }
            // Orphans with no id are reported as MissingToolCallId above; recorded messages carry
            // no summaries; check_context reports no other kind.
            _ => {}
        }
    }

    let n = conv.messages.len();
    let mut probe_ids: HashMap<&str, usize> = HashMap::new();
    for (p, probe) in conv.probes.iter().enumerate() {
        let field = |f: &str| format!("probes[{p}].{f}");
        if probe.id.trim().is_empty() {
            out.push(at(Problem::EmptyProbeId).at_field(field("id")));
        } else if let Some(&first) = probe_ids.get(probe.id.as_str()) {
            out.push(at(Problem::DuplicateProbeId { id: probe.id.clone(), first }).at_field(field("id")));
        } else {
            probe_ids.insert(probe.id.as_str(), p);
        }
        if is_blank_text(&probe.question) {
            out.push(at(Problem::EmptyQuestion).at_field(field("question")));
        }
        if probe.source_message >= n {
            out.push(
                at(Problem::SourceOutOfRange { index: probe.source_message, messages: n })
                    .at_field(field("source_message")),
            );
        }
        if let Some(until) = probe.until.filter(|&u| u <= probe.source_message || u > n) {
            out.push(
                at(Problem::UntilOutOfRange { until, source_message: probe.source_message, messages: n })
                    .at_field(field("until")),
            );
        }
        if let Some(asked_at) = probe.asked_at {
            if asked_at == 0 || asked_at > n {
                out.push(at(Problem::AskedAtOutOfRange { asked_at, messages: n }).at_field(field("asked_at")));
            } else if asked_at <= probe.source_message {
                out.push(
                    at(Problem::AskedBeforeSource { asked_at, source_message: probe.source_message })
                        .at_field(field("asked_at")),
                );
            }
        }
        if probe.facts.is_empty() {
            out.push(at(Problem::NoFacts).at_field(field("facts")));
        }
        for (f, fact) in probe.facts.iter().enumerate() {
            if fact.is_empty() {
                out.push(at(Problem::EmptyFact).at_field(field(&format!("facts[{f}]"))));
            }
            for (a, alias) in fact.iter().enumerate() {
                if is_blank_text(alias) {
                    out.push(at(Problem::EmptyAlias).at_field(field(&format!("facts[{f}][{a}]"))));
                }
            }
        }
    }
    out.extend(check_keys(conv).into_iter().map(|(p, field, problem)| {
        DatasetError::new(problem).in_conversation(Some(&conv.id)).at_field(format!("probes[{p}].{field}"))
    }));
    // Read in order: conversation fields, then messages by index, then probes.
    out.sort_by_key(|e| match e.message {
        Some(m) => m + 1,
        None if e.field.as_deref().is_some_and(|f| f.starts_with("probes")) => usize::MAX,
        None => 0,
    });
    out
}

/// The problems of `conv`'s answer keys (probes with `origin: "written"`), as (probe index,
/// field, problem): a key has `asked_at`; every source message (`source_message` and
/// `source_messages`) is before it; each fact has an alias that occurs in its source messages
/// (normalized, at word boundaries, as the offline judge reads them) and one that is not a
/// common word or a bare small number; two keys at one checkpoint never share an alias.
pub fn check_keys(conv: &Conversation) -> Vec<(usize, String, Problem)> {
    use crate::text::{is_weak_alias, normalize, occurs, render_message};
    let mut out = Vec::new();
    let mut rendered: HashMap<usize, String> = HashMap::new();
    // (checkpoint, normalized alias) -> the first key that has it.
    let mut seen: HashMap<(usize, String), usize> = HashMap::new();
    for (p, probe) in conv.probes.iter().enumerate().filter(|(_, p)| p.is_written()) {
        let Some(asked_at) = probe.asked_at else {
            out.push((p, "asked_at".to_string(), Problem::KeyWithoutCheckpoint));
            continue;
        };
        let sources = probe.sources();
        for (s, &index) in sources.iter().enumerate() {
            if index >= asked_at {
                let field = if probe.source_messages.is_empty() {
                    "source_message".to_string()
                } else {
                    format!("source_messages[{s}]")
                };
                out.push((p, field, Problem::KeySourceAfterCheckpoint { index, asked_at }));
            }
        }
        for (f, fact) in probe.facts.iter().enumerate() {
            let in_sources = fact.iter().any(|alias| {
                let a = normalize(alias);
                !a.is_empty()
                    && sources.iter().filter(|&&i| i < conv.messages.len()).any(|&i| {
                        let text = rendered.entry(i).or_insert_with(|| normalize(&render_message(&conv.messages[i])));
                        occurs(text, &a)
                    })
            });
            if !in_sources {
                out.push((p, format!("facts[{f}]"), Problem::KeyAliasNotInSources { sources: sources.clone() }));
            }
            if !fact.is_empty() && fact.iter().all(|a| is_weak_alias(a)) {
                out.push((p, format!("facts[{f}]"), Problem::KeyOnlyWeakAliases { aliases: fact.clone() }));
            }
            for alias in fact {
                let a = normalize(alias);
                if a.is_empty() {
                    continue;
                }
                match seen.get(&(asked_at, a.clone())) {
                    Some(&first) if first != p => {
                        out.push((p, format!("facts[{f}]"), Problem::DuplicateKey { first, alias: alias.clone() }));
                    }
                    Some(_) => {}
                    None => {
                        seen.insert((asked_at, a), p);
                    }
                }
            }
        }
    }
    out
}
