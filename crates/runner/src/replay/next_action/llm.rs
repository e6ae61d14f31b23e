//! Next-action agreement with a model (`next_action = "llm"`): at each call that compacted,
//! the model reads the context as the LLM judge's answering model does
//! ([`crate::judge::llm::context_messages`]) followed by the built-in prompt
//! (`prompts/next_action.md`) and answers with one JSON object, `{"tool", "arguments"}` or
//! `{"reply"}`; once with the compacted context, once with the full history at the same point.
//!
//! **Parse contract** (lenient, unlike the judge's verdict): the first JSON object in the answer
//! (code fences and prose around it allowed) that names a tool (`tool`, `name`, `tool_name` or
//! `function`, a string or an object holding `name` and `arguments`) or a reply (`reply`,
//! `answer`, `response`); a tool's arguments are `arguments`, `args`, `input`, `parameters` or
//! `params`, an object or a string. Anything else is kept raw as
//! [`ModelAction::Unparsed`], counted, and never agreement.
//!
//! **Sharing**: the full-history request of a point is the same for every configuration; it is
//! made once per run (keyed by its cache key, waited on by every configuration that reaches the
//! point while it is in flight) and stored in the response cache like every request, so a
//! rerun makes none. A failed full-history request is not kept: the next configuration to
//! reach the point asks again.
//!
//! Requests go through the experiment's client (cache, retries, concurrency cap and rate limit
//! shared with the other roles on the same endpoint), queued as background work: the replay
//! does not wait on them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use compaction::{Context, Conversation};
use llm::{ChatRequest, Client, LlmError, Priority};
use runlog::llm_settings::NextActionRunStats;
use serde_json::Value;

use super::{agreement, full_history, Asked, NextActionModel};
use crate::judge::llm::context_messages;
use crate::summarize::llm::{runtime, LlmSetupError};
use crate::summarize::prompts::{builtin, PromptTemplate, Vars, NEXT_ACTION_VARS};
use runlog::record::ModelAction;

/// Characters of an unparsed answer kept in the record.
const RAW_CHARS: usize = 2_000;

/// How a request ended, for the pair's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fault {
    None,
    CacheMiss,
    Endpoint(String),
}

type Answer = (ModelAction, Fault);

/// The next-action model (see the module docs).
#[derive(Debug)]
pub struct LlmNextAction {
    client: Arc<Client>,
    prompt: PromptTemplate,
    runtime: tokio::runtime::Runtime,
    /// Full-history answers by their request's cache key.
    full: Mutex<HashMap<String, Arc<OnceLock<Answer>>>>,
    points: AtomicU64,
    compacted_requests: AtomicU64,
    full_requests: AtomicU64,
    full_shared: AtomicU64,
    unparsed_compacted: AtomicU64,
    unparsed_full: AtomicU64,
    failures: AtomicU64,
}

impl LlmNextAction {
    pub fn new(client: Arc<Client>) -> Result<LlmNextAction, LlmSetupError> {
        Ok(LlmNextAction {
            client,
            prompt: PromptTemplate::parse("next_action.md", builtin::NEXT_ACTION, NEXT_ACTION_VARS)?,
            runtime: runtime()?,
            full: Mutex::new(HashMap::new()),
            points: AtomicU64::new(0),
            compacted_requests: AtomicU64::new(0),
            full_requests: AtomicU64::new(0),
            full_shared: AtomicU64::new(0),
            unparsed_compacted: AtomicU64::new(0),
            unparsed_full: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// A hash of the built-in prompt's text (FNV-1a, hex).
    pub fn prompt_hash() -> String {
        format!("{:016x}", seeded::fnv1a(builtin::NEXT_ACTION.as_bytes()))
    }

    /// Its counters, as run.json's `llm.next_action` records them.
    pub fn stats(&self) -> NextActionRunStats {
        NextActionRunStats {
            model: self.client.config().model.clone(),
            prompt_hash: Self::prompt_hash(),
            points: self.points.load(Ordering::Relaxed),
            compacted_requests: self.compacted_requests.load(Ordering::Relaxed),
            full_requests: self.full_requests.load(Ordering::Relaxed),
            full_shared: self.full_shared.load(Ordering::Relaxed),
            unparsed_compacted: self.unparsed_compacted.load(Ordering::Relaxed),
            unparsed_full: self.unparsed_full.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            client: self.client.stats(),
        }
    }

    /// Cache keys missed in cache mode `only`.
    pub fn missing_keys(&self) -> Vec<String> {
        self.client.cache().map(|c| c.missing()).unwrap_or_default()
    }

    /// The request asking for the next action after `ctx`.
    pub fn request(&self, ctx: &Context) -> ChatRequest {
        let mut messages = context_messages(ctx);
        messages.extend(self.prompt.render(&Vars::default()));
        ChatRequest::new(messages).priority(Priority::Background)
    }

    fn complete(&self, request: ChatRequest, unparsed: &AtomicU64) -> Answer {
        match self.runtime.block_on(self.client.complete(request)) {
            Ok(r) => match parse_action(&r.text) {
                Some(a) => (a, Fault::None),
                None => {
                    unparsed.fetch_add(1, Ordering::Relaxed);
                    (ModelAction::Unparsed { raw: r.text.chars().take(RAW_CHARS).collect() }, Fault::None)
                }
            },
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                let error = format!("{}: {e}", e.kind());
                let fault = match &e {
                    LlmError::CacheMiss { .. } => Fault::CacheMiss,
                    e if e.is_endpoint_fault() => Fault::Endpoint(error.clone()),
                    _ => Fault::None,
                };
                (ModelAction::Failed { error }, fault)
            }
        }
    }

    /// The full-history answer at `at`, asked once per run (see the module docs).
    fn full_answer(&self, conversation: &Conversation, at: usize) -> Answer {
        let request = self.request(&full_history(conversation, at));
        let key = self.client.cache_key(&request).hex().to_string();
        let cell = {
            let mut map = self.full.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            map.entry(key.clone()).or_default().clone()
        };
        let mut made = false;
        let answer = cell
            .get_or_init(|| {
                made = true;
                self.complete(request, &self.unparsed_full)
            })
            .clone();
        if made {
            self.full_requests.fetch_add(1, Ordering::Relaxed);
            if matches!(answer.0, ModelAction::Failed { .. }) {
                // Not kept: the next configuration to reach the point asks again.
                let mut map = self.full.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if map.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                    map.remove(&key);
                }
            }
        } else {
            self.full_shared.fetch_add(1, Ordering::Relaxed);
        }
        answer
    }
}

impl NextActionModel for LlmNextAction {
    fn name(&self) -> String {
        format!("llm:{}", self.client.config().model)
    }

    fn ask(&self, conversation: &Conversation, at: usize, ctx: &Context) -> Asked {
        self.points.fetch_add(1, Ordering::Relaxed);
        self.compacted_requests.fetch_add(1, Ordering::Relaxed);
        let (compacted, c_fault) = self.complete(self.request(ctx), &self.unparsed_compacted);
        let (full, f_fault) = self.full_answer(conversation, at);
        let mut asked = Asked {
            agreement: match conversation.messages.get(at) {
                Some(recorded) => agreement(recorded, compacted, full),
                None => agreement(&compaction::Message::assistant(""), compacted, full),
            },
            cache_misses: 0,
            endpoint_error: None,
            endpoint_failures: 0,
        };
        // A shared answer's failure counts against every pair that reads it: its agreement
        // with the full history is not what a run with the answer gives.
        for f in [c_fault, f_fault] {
            match f {
                Fault::None => {}
                Fault::CacheMiss => asked.cache_misses += 1,
                Fault::Endpoint(e) => {
                    asked.endpoint_failures += 1;
                    asked.endpoint_error.get_or_insert(e);
                }
            }
        }
        asked
    }
}

/// Parse a next-action answer under the lenient contract of the module docs; `None` when no
/// JSON object in it names a tool or a reply.
///
/// ```
/// use runner::replay::next_action::llm::parse_action;
/// use runlog::record::ModelAction;
///
/// let a = parse_action("Sure!\n```json\n{\"tool\": \"Read\", \"arguments\": {\"file_path\": \"a.rs\"}}\n```").unwrap();
/// assert_eq!(a, ModelAction::Tool { name: "Read".into(), arguments: r#"{"file_path":"a.rs"}"#.into() });
/// assert_eq!(parse_action(r#"{"reply": "Done."}"#), Some(ModelAction::Reply { text: "Done.".into() }));
/// assert_eq!(parse_action("I would read the file."), None);
/// ```
pub fn parse_action(answer: &str) -> Option<ModelAction> {
    // Each `{` in turn, at most a bounded number of them: the first object that reads as an
    // action.
    for (i, _) in answer.match_indices('{').take(64) {
        let mut values = serde_json::Deserializer::from_str(&answer[i..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(map))) = values.next() {
            if let Some(a) = action_of(&map) {
                return Some(a);
            }
        }
    }
    None
}

fn action_of(map: &serde_json::Map<String, Value>) -> Option<ModelAction> {
    let pick = |keys: &[&str]| keys.iter().find_map(|k| map.get(*k)).cloned();
    let arguments = |v: Option<Value>| match v {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => v.to_string(),
            _ => s,
        },
        Some(v) => v.to_string(),
    };
    let args = || pick(&["arguments", "args", "input", "parameters", "params"]);
    match pick(&["tool", "name", "tool_name", "function"]) {
        Some(Value::String(name)) if !name.trim().is_empty() => {
            return Some(ModelAction::Tool { name: name.trim().to_string(), arguments: arguments(args()) })
        }
        Some(Value::Object(inner)) => {
            if let Some(Value::String(name)) = inner.get("name") {
                let inner_args =
                    ["arguments", "args", "input", "parameters"].iter().find_map(|k| inner.get(*k)).cloned();
                return Some(ModelAction::Tool {
                    name: name.trim().to_string(),
                    arguments: arguments(inner_args.or_else(args)),
                });
            }
        }
        _ => {}
    }
    match pick(&["reply", "answer", "response"]) {
        Some(Value::String(text)) => Some(ModelAction::Reply { text }),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::Message;
    use llm::{LlmConfig, Protocol};
    use testkit::server::{MockServer, Reply};

    #[test]
    fn a_failed_answer_counts_against_the_pair_and_a_failed_full_answer_is_asked_again() {
        let server = MockServer::start();
        server.respond_with(|_: &testkit::server::Recorded| Reply::ServerError);
        let mut cfg = LlmConfig::new(Protocol::Openai, "m");
        cfg.base_url = Some(format!("{}/v1", server.url()));
        cfg.max_retries = 0;
        let model = LlmNextAction::new(Arc::new(Client::new(cfg, None).unwrap())).unwrap();
        let conversation = Conversation::new(
            "c",
            vec![Message::user("Read src/a.rs."), Message::assistant("Reading src/a.rs."), Message::user("And?")],
        );
        let ctx = Context::from_messages(vec![Message::user("And?")]);
        let asked = model.ask(&conversation, 1, &ctx);
        assert!(matches!(asked.agreement.compacted, ModelAction::Failed { .. }), "{asked:?}");
        assert_eq!((asked.agreement.agrees_recorded, asked.agreement.agrees_full), (None, None));
        assert_eq!((asked.endpoint_failures, asked.cache_misses), (2, 0), "the compacted and the full request");
        assert!(asked.endpoint_error.as_deref().is_some_and(|e| e.starts_with("server_error")), "{asked:?}");
        model.ask(&conversation, 1, &ctx);
        let st = model.stats();
        assert_eq!((st.full_requests, st.full_shared, st.failures), (2, 0, 4), "a failure is not shared");
    }

    #[test]
    fn answers_parse_leniently_and_prose_does_not() {
        let tool = |n: &str, a: &str| Some(ModelAction::Tool { name: n.into(), arguments: a.into() });
        assert_eq!(
            parse_action(r#"{"tool": "Bash", "arguments": {"command": "ls"}}"#),
            tool("Bash", r#"{"command":"ls"}"#)
        );
        assert_eq!(
            parse_action(r#"{"name": "Bash", "arguments": "{\"command\": \"ls\"}"}"#),
            tool("Bash", r#"{"command":"ls"}"#)
        );
        assert_eq!(
            parse_action(r#"{"tool": {"name": "Read", "args": {"path": "a"}}}"#),
            tool("Read", r#"{"path":"a"}"#)
        );
        assert_eq!(parse_action(r#"Next: {"tool": "make"} then done"#), tool("make", "{}"));
        assert_eq!(parse_action(r#"{"thought": "x"} {"reply": "ok"}"#), Some(ModelAction::Reply { text: "ok".into() }));
        for bad in ["", "{}", r#"{"tool": ""}"#, r#"{"tool": 3}"#, "{not json", r#"{"thought": "read a.rs"}"#] {
            assert_eq!(parse_action(bad), None, "{bad:?}");
        }
    }
}
