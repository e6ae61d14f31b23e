//! `openhands`: OpenHands evaluation output (JSONL, one run per line).
//!
//! Each line `{instance_id, instruction, metadata: {llm_config}, history: [events],
//! test_result: {git_patch}}`; `history` is the event stream, read in order:
//!
//! - `action: "system"` -> system message (`args.content`); a user `action: "message"` -> user
//!   message; an agent `action: "message"` without tool metadata -> assistant message.
//! - an agent action with `tool_call_metadata` -> an assistant message whose content is
//!   `args.thought` and whose call is `{id: tool_call_id, name: function_name, arguments}`,
//!   the arguments taken from the matching call in `model_response.choices[0].message.tool_calls`
//!   (else `args` without `thought`). Actions that share one `model_response.id` are one
//!   assistant message with several calls.
//! - an observation with `tool_call_metadata` -> tool message (`content`).
//! - `observation: "error"` (an agent-loop error, no tool metadata) -> a user message flagged
//!   `meta.injected = true`.
//! - `recall` actions and observations, state changes and `null` events are bookkeeping and
//!   are skipped.
//!
//! `test_result.git_patch` becomes `meta.submission`; `llm_config.model` the model and
//! `llm_config.max_input_tokens` the context window when set.

use compaction::{Message, Role, ToolCall};
use serde_json::Value;

use super::json::{self, documents, str_of, text};
use super::source::At;
use super::{Draft, FileCtx, Format, ImportProblem, Located, Sourced};

pub(crate) fn parse(text: &str, file: &FileCtx) -> Vec<Result<Draft, Located>> {
    let records = documents(text);
    let single = records.len() == 1;
    records.into_iter().map(|doc| doc.and_then(|(at, v)| run(&v, &at, file, single))).collect()
}

fn run(v: &Value, at: &At, file: &FileCtx, single: bool) -> Result<Draft, Located> {
    let instance = str_of(v, "instance_id");
    let id = match (single, instance, at.line) {
        (true, _, _) => file.key.clone(),
        (false, Some(i), _) => file.id(i),
        (false, None, line) => file.id(&format!("line{}", line.unwrap_or(0))),
    };
    let history = json::array(v, "history", at).map_err(|e| e.in_conversation(&id))?;
    let mut draft = Draft::new(id, Format::Openhands, file);
    if let Some(i) = instance {
        draft.meta("instance_id", i);
    }
    let llm = v.get("metadata").and_then(|m| m.get("llm_config"));
    draft.conversation.model = llm.and_then(|l| str_of(l, "model")).map(str::to_string);
    draft.conversation.context_window = llm.and_then(|l| l.get("max_input_tokens")).and_then(Value::as_u64);
    let patch = v.get("test_result").and_then(|t| str_of(t, "git_patch")).filter(|p| !p.trim().is_empty());
    if let Some(p) = patch {
        draft.meta("submission", p);
    }
    let history_at = at.key("history");
    // The model response id of the last assistant message built from actions.
    let mut open_response: Option<(String, usize)> = None;
    for (i, e) in history.iter().enumerate() {
        let e_at = history_at.at(i);
        let source = str_of(e, "source").unwrap_or_default();
        let args = e.get("args");
        let tcm = e.get("tool_call_metadata").filter(|t| t.is_object());
        if let Some(action) = str_of(e, "action") {
            match (action, tcm) {
                ("system", _) => {
                    let content = args.and_then(|a| str_of(a, "content")).or_else(|| str_of(e, "message"));
                    draft.push(Message::system(content.unwrap_or_default()), e_at);
                    open_response = None;
                }
                ("recall", _) | ("change_agent_state", _) | ("null", _) => {}
                ("message", None) => {
                    let content = text(args.and_then(|a| a.get("content")).or_else(|| e.get("message")));
                    let msg = if source == "user" { Message::user(content) } else { Message::assistant(content) };
                    draft.push(msg, e_at);
                    open_response = None;
                }
                (_, Some(tcm)) => {
                    let call_id = json::scalar_string(tcm.get("tool_call_id")).unwrap_or_default();
                    let name = str_of(tcm, "function_name").unwrap_or(action).to_string();
                    let response = tcm.get("model_response");
                    let response_id = response.and_then(|r| str_of(r, "id")).map(str::to_string);
                    let call = ToolCall { id: call_id.clone(), name, arguments: arguments(response, &call_id, args) };
                    let thought = args
                        .and_then(|a| str_of(a, "thought"))
                        .filter(|t| !t.trim().is_empty())
                        .or_else(|| args.and_then(|a| str_of(a, "final_thought")))
                        .unwrap_or_default()
                        .to_string();
                    match (&open_response, &response_id) {
                        (Some((open, idx)), Some(rid)) if open == rid => {
                            let s = &mut draft.messages[*idx];
                            if !thought.is_empty() && !s.message.content.contains(&thought) {
                                s.message.content.push_str("\n\n");
                                s.message.content.push_str(&thought);
                            }
                            s.message.tool_calls.push(call);
                            s.calls.push(e_at.key("tool_call_metadata"));
                        }
                        _ => {
                            let msg = Message::assistant_calls(thought, vec![call]);
                            let idx = draft.messages.len();
                            draft.messages.push(Sourced {
                                message: msg,
                                at: e_at.clone(),
                                calls: vec![e_at.key("tool_call_metadata")],
                            });
                            open_response = response_id.map(|r| (r, idx));
                        }
                    }
                }
                // An action with no tool metadata and no chat meaning (e.g. a bare `finish`).
                (_, None) => {
                    let content = args.and_then(|a| str_of(a, "thought")).or_else(|| str_of(e, "message"));
                    if let Some(c) = content.filter(|c| !c.trim().is_empty()) {
                        draft.push(Message::assistant(c), e_at);
                        open_response = None;
                    }
                }
            }
        } else if let Some(observation) = str_of(e, "observation") {
            match (observation, tcm) {
                ("recall", _) | ("agent_state_changed", _) | ("null", _) => {}
                (_, Some(tcm)) => {
                    let mut msg = Message::new(Role::Tool, text(e.get("content")));
                    msg.tool_call_id = json::scalar_string(tcm.get("tool_call_id"));
                    msg.name = str_of(tcm, "function_name").map(str::to_string);
                    draft.push(msg, e_at);
                }
                ("error", None) => {
                    let content = text(e.get("content").or_else(|| e.get("message")));
                    draft.push(Message::user(content).with_meta("injected", true.into()), e_at);
                    open_response = None;
                }
                (_, None) => {}
            }
        } else if e.get("action").is_some() || e.get("observation").is_some() {
            continue;
        } else if !e.is_object() {
            let problem = ImportProblem::Shape { expected: "an event object".into() };
            return Err(Located::new(e_at, problem).in_conversation(&draft.conversation.id));
        }
    }
    Ok(draft)
}

/// The arguments of call `id` as the model produced them, else the parsed `args` without the
/// thought.
fn arguments(response: Option<&Value>, id: &str, args: Option<&Value>) -> String {
    let calls = response
        .and_then(|r| r.get("choices"))
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("message"))
        .and_then(|m| m.get("tool_calls"))
        .and_then(Value::as_array);
    if let Some(c) =
        calls.and_then(|calls| calls.iter().find(|c| json::scalar_string(c.get("id")).as_deref() == Some(id)))
    {
        return json::arguments(c.get("function").and_then(|f| f.get("arguments")));
    }
    match args {
        Some(Value::Object(o)) => {
            let mut o = o.clone();
            o.remove("thought");
            Value::Object(o).to_string()
        }
        _ => "{}".to_string(),
    }
}
