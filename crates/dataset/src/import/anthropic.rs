//! `anthropic`: Messages API conversations.
//!
//! A file holds a bare list of messages, `{system, messages: [...]}` (with optional `id` and
//! `model`), or JSONL with one of those per line. `system` (a string or text blocks) becomes
//! the leading system message. Content is a string or a list of blocks: in an assistant
//! message `text` blocks become its content and `tool_use` blocks its calls (`input`
//! serialized as the arguments); `thinking` and `redacted_thinking` blocks are kept opaque,
//! with their signatures, in [`Message::thinking`]. In a user message each `tool_result` block becomes a tool message (its
//! content a string or text blocks, `is_error` kept), then the remaining text and image blocks
//! become one user message after them.

use compaction::{Message, Role, ThinkingBlock, ThinkingKind, ToolCall};
use serde_json::Value;

use super::json::{self, documents, role, str_of, text};
use super::openai::record_id;
use super::source::At;
use super::{Draft, FileCtx, Format, ImportProblem, Located, Sourced};

pub(crate) fn parse(text: &str, file: &FileCtx) -> Vec<Result<Draft, Located>> {
    let records = documents(text);
    let single = records.len() == 1;
    records
        .into_iter()
        .enumerate()
        .map(|(i, rec)| {
            let (at, v) = rec?;
            let id = record_id(file, &v, &at, i, single);
            conversation(id, &v, &at, file)
        })
        .collect()
}

fn conversation(id: String, v: &Value, at: &At, file: &FileCtx) -> Result<Draft, Located> {
    let mut draft = Draft::new(id.clone(), Format::Anthropic, file);
    let (messages, messages_at) = match v {
        Value::Array(items) => (items, at.clone()),
        Value::Object(_) => {
            if let Some(system) = v.get("system").filter(|s| !s.is_null()) {
                draft.push(Message::system(text(Some(system))), at.key("system"));
            }
            if let Some(model) = str_of(v, "model") {
                draft.conversation.model = Some(model.to_string());
            }
            (json::array(v, "messages", at).map_err(|e| e.in_conversation(&id))?, at.key("messages"))
        }
        _ => {
            let problem = ImportProblem::Shape { expected: "a message list or an object with messages".into() };
            return Err(Located::new(at.clone(), problem).in_conversation(&id));
        }
    };
    for (i, m) in messages.iter().enumerate() {
        let m_at = messages_at.at(i);
        let role = role(m, &m_at).map_err(|e| e.in_conversation(&id))?;
        match role {
            "assistant" => draft.messages.push(assistant(m, &m_at)),
            "user" => user(m, &m_at, &mut draft),
            "system" => draft.push(Message::system(text(m.get("content"))), m_at),
            other => {
                let problem = ImportProblem::UnknownRole { role: other.to_string() };
                return Err(Located::new(m_at.key("role"), problem).in_conversation(&id));
            }
        }
    }
    Ok(draft)
}

/// An assistant message: text blocks as content, tool_use blocks as calls.
pub(crate) fn assistant(m: &Value, at: &At) -> Sourced {
    let mut msg = Message::assistant("");
    let mut calls = Vec::new();
    let content_at = at.key("content");
    match m.get("content") {
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            for (k, b) in blocks.iter().enumerate() {
                match str_of(b, "type") {
                    Some("tool_use") | Some("server_tool_use") => {
                        msg.tool_calls.push(ToolCall {
                            id: json::scalar_string(b.get("id")).unwrap_or_default(),
                            name: str_of(b, "name").unwrap_or_default().to_string(),
                            arguments: json::arguments(b.get("input")),
                        });
                        calls.push(content_at.at(k));
                    }
                    Some(kind @ ("thinking" | "redacted_thinking")) => msg.thinking.push(ThinkingBlock {
                        kind: if kind == "thinking" { ThinkingKind::Thinking } else { ThinkingKind::RedactedThinking },
                        thinking: str_of(b, "thinking").unwrap_or_default().to_string(),
                        data: str_of(b, "data").unwrap_or_default().to_string(),
                        signature: str_of(b, "signature").unwrap_or_default().to_string(),
                    }),
                    _ => texts.push(text(Some(b))),
                }
            }
            msg.content = texts.join("\n");
        }
        other => msg.content = text(other),
    }
    msg.finish_reason = str_of(m, "stop_reason").map(finish_reason);
    Sourced { message: msg, at: at.clone(), calls }
}

/// Anthropic's stop reasons in chat-completions words.
pub(crate) fn finish_reason(stop: &str) -> String {
    match stop {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        other => other,
    }
    .to_string()
}

/// A user message: tool results first (one tool message each), then the rest as one user
/// message.
pub(crate) fn user(m: &Value, at: &At, draft: &mut Draft) {
    let content_at = at.key("content");
    match m.get("content") {
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            for (k, b) in blocks.iter().enumerate() {
                if str_of(b, "type") == Some("tool_result") {
                    draft.messages.push(tool_result(b, &content_at.at(k)));
                } else {
                    texts.push(text(Some(b)));
                }
            }
            if !texts.is_empty() {
                draft.push(Message::user(texts.join("\n")), at.clone());
            }
        }
        other => draft.push(Message::user(text(other)), at.clone()),
    }
}

/// One `tool_result` block as a tool message.
pub(crate) fn tool_result(b: &Value, at: &At) -> Sourced {
    let mut msg = Message::new(Role::Tool, text(b.get("content")));
    msg.tool_call_id = json::scalar_string(b.get("tool_use_id"));
    msg.is_error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
    Sourced::new(msg, at.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_become_calls_results_and_text() {
        let text = r#"{"system":[{"type":"text","text":"Be brief."}],"messages":[
            {"role":"user","content":"list files"},
            {"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Listing."},
              {"type":"tool_use","id":"t1","name":"ls","input":{"path":"."}}],"stop_reason":"tool_use"},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a.rs"}],"is_error":false},
              {"type":"text","text":"and then?"}]}]}"#;
        let out = parse(text, &FileCtx { key: "k".into() });
        let d = out[0].as_ref().expect("parses");
        let m: Vec<&Message> = d.messages.iter().map(|s| &s.message).collect();
        assert_eq!(m.len(), 5);
        assert_eq!(m[0].content, "Be brief.");
        assert_eq!(m[2].content, "Listing.");
        assert_eq!(m[2].tool_calls[0].arguments, r#"{"path":"."}"#);
        assert_eq!(m[2].finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(m[3].tool_call_id.as_deref(), Some("t1"));
        assert_eq!(m[3].content, "a.rs");
        assert_eq!(m[4].content, "and then?");
        assert_eq!(d.messages[3].at.field.to_string(), "messages[2].content[0]");
        // The thinking block is kept, opaque (no signature recorded here).
        assert_eq!(m[2].thinking.len(), 1);
        assert_eq!((m[2].thinking[0].kind, m[2].thinking[0].thinking.as_str()), (ThinkingKind::Thinking, "hm"));
    }

    #[test]
    fn thinking_and_redacted_thinking_keep_their_signatures_and_data() {
        let text = r#"{"messages":[{"role":"user","content":"go"},
            {"role":"assistant","content":[{"type":"thinking","thinking":"plan it","signature":"EqQBCkYIARgCKkB"},
              {"type":"redacted_thinking","data":"EmwKAhgBEgy3va"},{"type":"text","text":"Done."}]}]}"#;
        let out = parse(text, &FileCtx { key: "k".into() });
        let d = out[0].as_ref().expect("parses");
        let blocks = &d.messages[1].message.thinking;
        assert_eq!(
            blocks,
            &vec![
                ThinkingBlock {
                    kind: ThinkingKind::Thinking,
                    thinking: "plan it".into(),
                    data: String::new(),
                    signature: "EqQBCkYIARgCKkB".into()
                },
                ThinkingBlock {
                    kind: ThinkingKind::RedactedThinking,
                    thinking: String::new(),
                    data: "EmwKAhgBEgy3va".into(),
                    signature: String::new()
                },
            ]
        );
        assert_eq!(d.messages[1].message.content, "Done.");
    }
}
