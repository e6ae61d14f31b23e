//! `swe-agent`: SWE-agent trajectories (`*.traj`).
//!
//! One object per file: `{history: [...], trajectory: [...], info: {submission, exit_status,
//! model_stats}}`. `history` is the chat the model saw and is what is imported (`trajectory`
//! repeats it step by step). Two kinds of history:
//!
//! - **function-calling**: assistant messages carry `tool_calls`; results are `tool` messages
//!   naming their call in `tool_call_ids` (read by the `openai` importer's message mapping).
//!   Some replays reuse call ids: the repair pass pairs them by position.
//! - **text-action**: assistant messages carry `thought` and `action` (the command, also
//!   fenced in `content`) and no call id; the tool output comes back as the next `user`
//!   message. Each action becomes a call `{id: "action-<n>", name: "bash", arguments:
//!   {"command": action}}` with the thought as content, and the user message after it the
//!   `tool` result of that call.
//!
//! `is_demo` user messages (an in-context demonstration) are kept as user text and flagged
//! `meta.demo = true`. `info.submission` (the final patch, or a CTF flag) becomes
//! `meta.submission`; the last `submit` action usually has no result (in flight at the end).

use compaction::{Message, Role, ToolCall};
use serde_json::Value;

use super::json::{self, documents, str_of, text};
use super::openai::{self, Legacy};
use super::{Draft, FileCtx, Format, Located, Sourced};

pub(crate) fn parse(text: &str, file: &FileCtx) -> Vec<Result<Draft, Located>> {
    documents(text).into_iter().map(|doc| doc.and_then(|(at, v)| conversation(&v, &at, file))).collect()
}

fn conversation(v: &Value, at: &super::At, file: &FileCtx) -> Result<Draft, Located> {
    let id = if at.line.is_some_and(|l| l > 1) {
        file.id(&format!("line{}", at.line.unwrap_or(0)))
    } else {
        file.key.clone()
    };
    let history = json::array(v, "history", at).map_err(|e| e.in_conversation(&id))?;
    let mut draft = Draft::new(id, Format::SweAgent, file);
    let info = v.get("info");
    if let Some(status) = info.and_then(|i| str_of(i, "exit_status")) {
        draft.meta("exit_status", status);
    }
    if let Some(sub) = info.and_then(|i| str_of(i, "submission")).filter(|s| !s.trim().is_empty()) {
        draft.meta("submission", sub);
    }
    let mut legacy = Legacy::default();
    let history_at = at.key("history");
    let mut actions = 0usize;
    // The synthetic call the next user message answers (text-action histories).
    let mut pending: Option<(String, String)> = None;
    for (i, m) in history.iter().enumerate() {
        let m_at = history_at.at(i);
        let role = json::role(m, &m_at).map_err(|e| e.in_conversation(&draft.conversation.id))?;
        let has_calls = m.get("tool_calls").and_then(json::maybe_embedded).is_some_and(|c| c.is_array());
        match role {
            "assistant" if !has_calls && m.get("action").is_some() => {
                let action = text(m.get("action"));
                let thought = match m.get("thought") {
                    Some(t) if !t.is_null() => text(Some(t)),
                    _ => text(m.get("content")),
                };
                let mut msg = Message::assistant(thought.trim());
                if !action.trim().is_empty() {
                    actions += 1;
                    let id = format!("action-{actions}");
                    let arguments = serde_json::json!({ "command": action.trim_end() }).to_string();
                    msg.tool_calls.push(ToolCall { id: id.clone(), name: "bash".into(), arguments });
                    pending = Some((id, "bash".into()));
                }
                draft.messages.push(Sourced { message: msg, at: m_at.clone(), calls: vec![m_at.key("action")] });
            }
            "user" if pending.is_some() && !is_demo(m) => {
                let (id, name) = pending.take().unwrap_or_default();
                let mut msg = Message::new(Role::Tool, text(m.get("content")));
                msg.tool_call_id = Some(id);
                msg.name = Some(name);
                draft.push(msg, m_at);
            }
            _ => {
                pending = None;
                let mut sourced =
                    openai::message(m, &m_at, &mut legacy).map_err(|e| e.in_conversation(&draft.conversation.id))?;
                if is_demo(m) {
                    sourced.message.meta.insert("demo".into(), true.into());
                }
                draft.messages.push(sourced);
            }
        }
    }
    Ok(draft)
}

fn is_demo(m: &Value) -> bool {
    match m.get("is_demo") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}
