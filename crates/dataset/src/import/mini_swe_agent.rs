//! `mini-swe-agent`: trajectory files (`*.traj.json`, trajectory format 1.x, tool-calling).
//!
//! One object per file: `{trajectory_format, instance_id, info: {config, exit_status,
//! submission, model_stats}, messages: [...]}`. `messages` are chat-completions messages (read
//! by the `openai` importer's message mapping); `extra` (raw API responses and outputs) and
//! `reasoning_content` are left out. The last record, role `exit`, is not a chat turn: its
//! submission (`info.submission`, the final patch) becomes `meta.submission`, and
//! `info.exit_status` becomes `meta.exit_status`. The final `submit` call has no result: it is
//! in flight when the recording ends.

use serde_json::Value;

use super::json::{self, documents, str_of};
use super::openai::{self, Legacy};
use super::{Draft, FileCtx, Format, ImportProblem, Located};

pub(crate) fn parse(text: &str, file: &FileCtx) -> Vec<Result<Draft, Located>> {
    documents(text).into_iter().map(|doc| doc.and_then(|(at, v)| conversation(&v, &at, file))).collect()
}

fn conversation(v: &Value, at: &super::At, file: &FileCtx) -> Result<Draft, Located> {
    let id = if at.line.is_some_and(|l| l > 1) {
        file.id(str_of(v, "instance_id").unwrap_or("record"))
    } else {
        file.key.clone()
    };
    let messages = json::array(v, "messages", at).map_err(|e| e.in_conversation(&id))?;
    let mut draft = Draft::new(id, Format::MiniSweAgent, file);
    if let Some(instance) = str_of(v, "instance_id") {
        draft.meta("instance_id", instance);
    }
    let info = v.get("info");
    if let Some(status) = info.and_then(|i| str_of(i, "exit_status")) {
        draft.meta("exit_status", status);
    }
    if let Some(sub) = info.and_then(|i| str_of(i, "submission")).filter(|s| !s.trim().is_empty()) {
        draft.meta("submission", sub);
    }
    let config = info.and_then(|i| i.get("config")).and_then(json::maybe_embedded);
    let model = config.as_ref().and_then(|c| c.get("model")).and_then(|m| str_of(m, "model_name"));
    draft.conversation.model = model.map(str::to_string);
    let mut legacy = Legacy::default();
    let messages_at = at.key("messages");
    for (i, m) in messages.iter().enumerate() {
        if str_of(m, "role") == Some("exit") {
            continue;
        }
        let m_at = messages_at.at(i);
        let sourced = openai::message(m, &m_at, &mut legacy).map_err(|e| e.in_conversation(&draft.conversation.id))?;
        draft.messages.push(sourced);
    }
    if draft.messages.is_empty() {
        let problem = ImportProblem::Shape { expected: "at least one message".into() };
        return Err(Located::new(messages_at, problem).in_conversation(&draft.conversation.id));
    }
    Ok(draft)
}
