//! `tau-bench`: tau-bench result files.
//!
//! A JSON array of `{task_id, trial, reward, info: {task: {user_id, actions, instruction}},
//! traj: [...]}`. `traj` is a chat-completions message list (read by the `openai` importer's
//! message mapping: `content: null` becomes empty, `tool_calls[i].function` gives name and
//! arguments). Call ids are reused within a conversation: the repair pass renames them and
//! pairs results by position. The gold actions `info.task.actions` (`[{name, kwargs}]`) become
//! `meta.gold_actions` (`[{name, arguments}]`); `reward`, `task_id` and `trial` are kept in
//! `meta`. Conversation ids are `<file key>/task<T>-trial<N>`.

use serde_json::{json, Value};

use super::json::{self, documents, scalar_string};
use super::openai::{self, Legacy};
use super::source::At;
use super::{Draft, FileCtx, Format, ImportProblem, Located};

pub(crate) fn parse(text: &str, file: &FileCtx) -> Vec<Result<Draft, Located>> {
    let mut out = Vec::new();
    for doc in documents(text) {
        match doc {
            Ok((at, Value::Array(records))) => {
                out.extend(records.iter().enumerate().map(|(i, r)| record(r, &at.at(i), i, file)));
            }
            Ok((at, v @ Value::Object(_))) => out.push(record(&v, &at, 0, file)),
            Ok((at, _)) => {
                let problem = ImportProblem::Shape { expected: "an array of tau-bench records".into() };
                out.push(Err(Located::new(at, problem)));
            }
            Err(e) => out.push(Err(e)),
        }
    }
    out
}

fn record(r: &Value, at: &At, index: usize, file: &FileCtx) -> Result<Draft, Located> {
    let task = scalar_string(r.get("task_id"));
    let trial = scalar_string(r.get("trial"));
    let id = match (&task, &trial) {
        (Some(t), Some(n)) => file.id(&format!("task{t}-trial{n}")),
        (Some(t), None) => file.id(&format!("task{t}")),
        _ => file.id(&format!("record{index}")),
    };
    let traj = json::array(r, "traj", at).map_err(|e| e.in_conversation(&id))?;
    let mut draft = Draft::new(id, Format::TauBench, file);
    if let Some(t) = r.get("task_id") {
        draft.meta("task_id", t.clone());
    }
    if let Some(n) = r.get("trial") {
        draft.meta("trial", n.clone());
    }
    if let Some(reward) = r.get("reward").filter(|v| v.is_number()) {
        draft.meta("reward", reward.clone());
    }
    let actions = r.get("info").and_then(|i| i.get("task")).and_then(|t| t.get("actions")).and_then(Value::as_array);
    if let Some(actions) = actions {
        let gold: Vec<Value> = actions
            .iter()
            .map(|a| json!({ "name": a.get("name").cloned().unwrap_or(Value::Null), "arguments": a.get("kwargs").cloned().unwrap_or(json!({})) }))
            .collect();
        draft.meta("gold_actions", Value::Array(gold));
    }
    let mut legacy = Legacy::default();
    let traj_at = at.key("traj");
    for (i, m) in traj.iter().enumerate() {
        let sourced =
            openai::message(m, &traj_at.at(i), &mut legacy).map_err(|e| e.in_conversation(&draft.conversation.id))?;
        draft.messages.push(sourced);
    }
    Ok(draft)
}
