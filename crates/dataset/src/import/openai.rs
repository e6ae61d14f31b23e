//! `openai`: chat-completions message lists.
//!
//! A file holds a bare list of messages, `{messages: [...]}` (with optional `id` and `model`),
//! a list of such lists, or JSONL with one list or object per line. Messages map one to one:
//! `system` and `developer` become system messages; `content` may be a string, null, or a list
//! of parts (texts joined by a newline, images as `[image]`); `tool_calls` take
//! `{id, function: {name, arguments}}` or the flat `{id, name, arguments}` (arguments as a JSON
//! string, or an object serialized compactly); a `tool` message names its call in
//! `tool_call_id` (or `id`, or the first of `tool_call_ids`). The legacy `function_call` /
//! `function` pair is given generated ids `function_call-<n>`. `reasoning_content` is hidden
//! reasoning and is left out.

use compaction::{Message, Role, ToolCall};
use serde_json::Value;

use super::json::{self, documents, role, scalar_string, str_of, text};
use super::source::At;
use super::{Draft, FileCtx, Format, ImportProblem, Located, Sourced};

pub(crate) fn parse(text: &str, file: &FileCtx) -> Vec<Result<Draft, Located>> {
    let mut records: Vec<Result<(At, Value), Located>> = Vec::new();
    for doc in documents(text) {
        match doc {
            Ok((at, Value::Array(items))) if items.first().is_some_and(Value::is_array) => {
                records.extend(items.into_iter().enumerate().map(|(i, v)| Ok((at.at(i), v))));
            }
            other => records.push(other),
        }
    }
    let single = records.len() == 1;
    records
        .into_iter()
        .enumerate()
        .map(|(i, rec)| {
            let (at, v) = rec?;
            let id = record_id(file, &v, &at, i, single);
            conversation(Format::Openai, id, &v, &at, file)
        })
        .collect()
}

/// The id of record `i`: the file key alone when the file holds one conversation, else the
/// record's own `id`, or `line<N>` / its index.
pub(crate) fn record_id(file: &FileCtx, v: &Value, at: &At, i: usize, single: bool) -> String {
    if single {
        return file.key.clone();
    }
    match (scalar_string(v.get("id")), at.line) {
        (Some(id), _) => file.id(&id),
        (None, Some(line)) => file.id(&format!("line{line}")),
        (None, None) => file.id(&i.to_string()),
    }
}

/// One conversation from a message list or an object holding `messages`.
fn conversation(format: Format, id: String, v: &Value, at: &At, file: &FileCtx) -> Result<Draft, Located> {
    let (messages, messages_at) = match v {
        Value::Array(items) => (items, at.clone()),
        Value::Object(_) => (json::array(v, "messages", at).map_err(|e| e.in_conversation(&id))?, at.key("messages")),
        _ => {
            let problem = ImportProblem::Shape { expected: "a message list or an object with messages".into() };
            return Err(Located::new(at.clone(), problem).in_conversation(&id));
        }
    };
    let mut draft = Draft::new(id, format, file);
    if let Some(model) = str_of(v, "model") {
        draft.conversation.model = Some(model.to_string());
    }
    let mut legacy = Legacy::default();
    for (i, m) in messages.iter().enumerate() {
        let sourced =
            message(m, &messages_at.at(i), &mut legacy).map_err(|e| e.in_conversation(&draft.conversation.id))?;
        draft.messages.push(sourced);
    }
    Ok(draft)
}

/// Ids generated for legacy `function_call`s.
#[derive(Debug, Default)]
pub(crate) struct Legacy {
    count: usize,
    last: Option<String>,
}

/// One chat-completions message (see the module docs); an unknown role is an error.
pub(crate) fn message(m: &Value, at: &At, legacy: &mut Legacy) -> Result<Sourced, Located> {
    let role = role(m, at)?;
    let content = text(m.get("content"));
    let out = match role {
        "system" | "developer" => Sourced::new(Message::system(content), at.clone()),
        "user" => Sourced::new(Message::user(content), at.clone()),
        "assistant" => {
            let mut msg = Message::assistant(content);
            let mut calls_at = Vec::new();
            if let Some(Value::Array(calls)) = m.get("tool_calls").and_then(json::maybe_embedded) {
                for (j, c) in calls.iter().enumerate() {
                    msg.tool_calls.push(tool_call(c));
                    calls_at.push(at.key("tool_calls").at(j));
                }
            }
            if let Some(fc) = m.get("function_call").filter(|v| v.is_object()) {
                legacy.count += 1;
                let id = format!("function_call-{}", legacy.count);
                legacy.last = Some(id.clone());
                let name = str_of(fc, "name").unwrap_or_default().to_string();
                msg.tool_calls.push(ToolCall { id, name, arguments: json::arguments(fc.get("arguments")) });
                calls_at.push(at.key("function_call"));
            }
            msg.finish_reason = str_of(m, "finish_reason").map(str::to_string);
            Sourced { message: msg, at: at.clone(), calls: calls_at }
        }
        "tool" | "function" | "ipython" => {
            let call_id = if role == "function" {
                legacy.last.clone()
            } else {
                scalar_string(m.get("tool_call_id"))
                    .or_else(|| scalar_string(m.get("id")))
                    .or_else(|| first_of_list(m.get("tool_call_ids")))
            };
            let mut msg = Message::new(Role::Tool, content);
            msg.tool_call_id = call_id;
            msg.name = str_of(m, "name").map(str::to_string);
            msg.is_error = m.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            Sourced::new(msg, at.clone())
        }
        other => {
            return Err(Located::new(at.key("role"), ImportProblem::UnknownRole { role: other.to_string() }));
        }
    };
    Ok(out)
}

/// A tool call in either the nested (`function: {name, arguments}`) or the flat shape.
pub(crate) fn tool_call(c: &Value) -> ToolCall {
    let f = c.get("function").filter(|f| f.is_object()).unwrap_or(c);
    ToolCall {
        id: scalar_string(c.get("id")).unwrap_or_default(),
        name: str_of(f, "name").unwrap_or_default().to_string(),
        arguments: json::arguments(f.get("arguments")),
    }
}

/// The first item of a list (or of a JSON string holding one).
fn first_of_list(v: Option<&Value>) -> Option<String> {
    match v.and_then(json::maybe_embedded)? {
        Value::Array(items) => scalar_string(items.first()),
        other => scalar_string(Some(&other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> FileCtx {
        FileCtx { key: "f".into() }
    }

    #[test]
    fn jsonl_of_lists_and_objects_gives_one_conversation_per_line() {
        let text = "[{\"role\":\"user\",\"content\":\"a\"}]\n\n{\"id\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"b\"},{\"type\":\"image_url\"}]}]}\n{oops\n";
        let out = parse(text, &file());
        assert_eq!(out.len(), 3);
        let a = out[0].as_ref().expect("first parses");
        assert_eq!(a.conversation.id, "f/line1");
        let b = out[1].as_ref().expect("second parses");
        assert_eq!(b.conversation.id, "f/x");
        assert_eq!(b.messages[0].message.content, "b\n[image]");
        let err = out[2].as_ref().expect_err("third is broken");
        assert_eq!(err.at.line, Some(4));
    }

    #[test]
    fn legacy_function_calls_get_ids() {
        let text = r#"{"messages":[{"role":"user","content":"q"},
            {"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},
            {"role":"function","name":"f","content":"r"}]}"#;
        let out = parse(text, &file());
        let d = out[0].as_ref().expect("parses");
        assert_eq!(d.conversation.id, "f");
        assert_eq!(d.messages[1].message.tool_calls[0].id, "function_call-1");
        assert_eq!(d.messages[2].message.tool_call_id.as_deref(), Some("function_call-1"));
    }

    #[test]
    fn unknown_roles_are_located() {
        let out = parse(r#"[{"role":"user","content":"q"},{"role":"robot","content":"x"}]"#, &file());
        let err = out[0].as_ref().expect_err("bad role");
        assert_eq!(err.at.field.to_string(), "[1].role");
        assert_eq!(err.problem, ImportProblem::UnknownRole { role: "robot".into() });
    }
}
