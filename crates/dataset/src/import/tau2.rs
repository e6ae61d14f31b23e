//! `tau2`: tau2-bench simulation files.
//!
//! One object `{info: {agent_info, environment_info: {policy}}, tasks: [...], simulations:
//! [...]}`. Each simulation `{id, task_id, trial, reward_info, termination_reason, messages}`
//! becomes a conversation `<file key>/task<T>-trial<N>`, led by a system message holding the
//! domain policy (`info.environment_info.policy`, the agent's system prompt). Messages are
//! chat-completions-like: `tool_calls[i].arguments` is a JSON object (serialized compactly)
//! and a tool result names its call in `id`. Tool calls the simulated *user* makes
//! (`requestor: "user"`, telecom domain) and their results are not part of the agent's
//! context and are left out. The task's gold actions (`evaluation_criteria.actions` with
//! requestor `assistant`) become `meta.gold_actions` (`[{name, arguments}]`).

use std::collections::HashMap;

use compaction::Message;
use serde_json::{json, Value};

use super::json::{self, documents, scalar_string, str_of};
use super::openai::{self, Legacy};
use super::source::{self, At};
use super::{Draft, FileCtx, Format, ImportProblem, Located};

pub(crate) fn parse(text: &str, file: &FileCtx) -> Vec<Result<Draft, Located>> {
    let mut out = Vec::new();
    for doc in documents(text) {
        match doc {
            Ok((at, v)) => out.extend(file_object(&v, &at, file, text)),
            Err(e) => out.push(Err(e)),
        }
    }
    out
}

fn file_object(v: &Value, at: &At, file: &FileCtx, text: &str) -> Vec<Result<Draft, Located>> {
    let sims = match json::array(v, "simulations", at) {
        Ok(s) => s,
        Err(e) => return vec![Err(e)],
    };
    let info = v.get("info");
    let policy = info.and_then(|i| i.get("environment_info")).and_then(|e| str_of(e, "policy"));
    let model = info.and_then(|i| i.get("agent_info")).and_then(|a| str_of(a, "llm"));
    let mut gold: HashMap<String, Value> = HashMap::new();
    if let Some(Value::Array(tasks)) = v.get("tasks") {
        for t in tasks {
            let (Some(id), Some(actions)) = (
                scalar_string(t.get("id")),
                t.get("evaluation_criteria").and_then(|c| c.get("actions")).and_then(Value::as_array),
            ) else {
                continue;
            };
            let list: Vec<Value> = actions
                .iter()
                .filter(|a| str_of(a, "requestor").unwrap_or("assistant") == "assistant")
                .map(|a| json!({ "name": a.get("name").cloned().unwrap_or(Value::Null), "arguments": a.get("arguments").cloned().unwrap_or(json!({})) }))
                .collect();
            gold.insert(id, Value::Array(list));
        }
    }
    let sims_at = at.key("simulations");
    let shared = Shared { file, policy, model, gold };
    sims.iter()
        .enumerate()
        .map(|(i, s)| {
            let sim_at = sims_at.at(i);
            let mut draft = simulation(s, &sim_at, i, &shared)?;
            // Arguments are objects: keep their text as recorded, found within the simulation.
            if let Some(raw) = source::raw_at(text, sim_at.field.steps()).filter(|_| at.line.is_none()) {
                let skip = sim_at.field.steps().len();
                for m in &mut draft.messages {
                    json::keep_argument_order(m, raw, skip, "arguments");
                }
            }
            Ok(draft)
        })
        .collect()
}

/// What every simulation of a file shares.
struct Shared<'a> {
    file: &'a FileCtx,
    /// The domain policy: the agent's system prompt.
    policy: Option<&'a str>,
    model: Option<&'a str>,
    /// Gold actions by task id.
    gold: HashMap<String, Value>,
}

fn simulation(s: &Value, at: &At, index: usize, shared: &Shared) -> Result<Draft, Located> {
    let Shared { file, policy, model, gold } = shared;
    let task = scalar_string(s.get("task_id"));
    let trial = scalar_string(s.get("trial"));
    let id = match (&task, &trial) {
        (Some(t), Some(n)) => file.id(&format!("task{t}-trial{n}")),
        (Some(t), None) => file.id(&format!("task{t}")),
        _ => file.id(&format!("simulation{index}")),
    };
    let messages = json::array(s, "messages", at).map_err(|e| e.in_conversation(&id))?;
    let mut draft = Draft::new(id, Format::Tau2, file);
    draft.conversation.model = model.map(str::to_string);
    if let Some(t) = &task {
        draft.meta("task_id", t.as_str());
        if let Some(g) = gold.get(t) {
            draft.meta("gold_actions", g.clone());
        }
    }
    if let Some(n) = s.get("trial") {
        draft.meta("trial", n.clone());
    }
    if let Some(r) = s.get("reward_info").and_then(|r| r.get("reward")).filter(|r| r.is_number()) {
        draft.meta("reward", r.clone());
    }
    if let Some(t) = str_of(s, "termination_reason") {
        draft.meta("termination_reason", t);
    }
    if let Some(p) = policy {
        draft.push(
            Message::system(*p),
            At { line: None, field: super::Field::root().key("info").key("environment_info").key("policy") },
        );
    }
    let mut legacy = Legacy::default();
    let messages_at = at.key("messages");
    for (i, m) in messages.iter().enumerate() {
        if str_of(m, "requestor") == Some("user") {
            continue;
        }
        let m_at = messages_at.at(i);
        if str_of(m, "role") == Some("user")
            && m.get("tool_calls").and_then(Value::as_array).is_some_and(|c| !c.is_empty())
        {
            // The simulated user's own tool calls: keep only what the user said.
            draft.push(Message::user(json::text(m.get("content"))), m_at);
            continue;
        }
        let role = json::role(m, &m_at).map_err(|e| e.in_conversation(&draft.conversation.id))?;
        if !matches!(role, "assistant" | "user" | "tool" | "system") {
            let problem = ImportProblem::UnknownRole { role: role.to_string() };
            return Err(Located::new(m_at.key("role"), problem).in_conversation(&draft.conversation.id));
        }
        let sourced = openai::message(m, &m_at, &mut legacy).map_err(|e| e.in_conversation(&draft.conversation.id))?;
        draft.messages.push(sourced);
    }
    Ok(draft)
}
