//! LLM-written probes (`compactlens probes generate`): the experiment's model reads a recording
//! and proposes probes in the schema of the derived ones (question, answer, facts, kind, tier,
//! source messages); each is validated before it is kept.
//!
//! - **The model**: the experiment's judge endpoint, else its summarizer's, built as a run builds
//!   them ([`crate::llm_setup::LlmRoles`]): the same key handling, response cache (mode and
//!   folder), seed, retries, concurrency cap and rate limit. One request per conversation
//!   (`prompts/probe_writer.md`), the transcript with each message headed by its index (a
//!   message's text is cut at [`MESSAGE_CHARS`] characters in the prompt, never in the check).
//! - **Parse contract**: the whole reply is `{"probes": [...]}` (or one fenced code block holding
//!   it). Anything else is a [`GenerateError::Malformed`] naming the conversation, never a guess.
//!   An entry of the list that is not a probe object is rejected like an invalid probe.
//! - **Validation**: a probe is kept only when its question and facts are not empty, its kind
//!   and tier are the schema's, its source messages exist, and every alias list (fact) occurs in
//!   its source messages as the offline judge finds facts ([`crate::judge::OfflineJudge`]:
//!   the same normalization and matching). A fact already tested by a kept probe of the
//!   conversation is a duplicate. Every rejected probe is returned with its reason
//!   ([`Rejected`]); none is dropped silently.
//! - **The probe**: id `llm-<n>` ([`LLM_PREFIX`]), `source_message` the last of its source
//!   messages, asked at the end of the recording. [`replace_generated`] swaps a conversation's
//!   earlier `llm-` probes for the new ones and keeps every other probe, derived ones included:
//!   the generated probes sit beside the derived ones.

use compaction::{Context, Conversation, Probe, ProbeKind, Tier};
use llm::{ChatRequest, Client, LlmError};
use serde::Deserialize;

use crate::judge::{OfflineJudge, RenderedContext};
use crate::summarize::llm::{runtime, LlmSetupError};
use crate::summarize::prompts::{builtin, PromptTemplate, Vars, PROBE_VARS};
use runlog::record::FoundIn;

/// The id prefix of a generated probe.
pub const LLM_PREFIX: &str = "llm-";

/// Characters of one message's text in the prompt.
pub const MESSAGE_CHARS: usize = 2_000;

/// A probe the model proposed that was not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The conversation.
    pub conversation: String,
    /// Its position in the model's list (0-based).
    pub index: usize,
    /// Its question, as proposed (empty when it had none).
    pub question: String,
    /// Why it was rejected.
    pub reason: String,
}

/// Why a conversation got no probes from the model.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The request failed (endpoint, key, cache miss in mode `only`, ...).
    #[error("conversation {conversation}: the probe request failed: {source}")]
    Request {
        conversation: String,
        #[source]
        source: LlmError,
    },
    /// The reply is not the probe list's JSON object.
    #[error("conversation {conversation}: the model's reply is not a probe list ({problem}); it begins: {start:?}")]
    Malformed { conversation: String, problem: String, start: String },
}

/// One probe as the model writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Proposed {
    question: String,
    #[serde(default)]
    answer: String,
    facts: Vec<Vec<String>>,
    kind: ProbeKind,
    tier: Tier,
    source_messages: Vec<usize>,
}

/// Writes probes for conversations with one model client.
#[derive(Debug)]
pub struct ProbeWriter<'a> {
    client: &'a Client,
    prompt: PromptTemplate,
    runtime: tokio::runtime::Runtime,
    max_probes: usize,
}

impl<'a> ProbeWriter<'a> {
    /// A writer asking `client` for at most `max_probes` probes per conversation.
    pub fn new(client: &'a Client, max_probes: usize) -> Result<ProbeWriter<'a>, LlmSetupError> {
        Ok(ProbeWriter {
            client,
            prompt: PromptTemplate::parse("probe_writer.md", builtin::PROBE_WRITER, PROBE_VARS)?,
            runtime: runtime()?,
            max_probes,
        })
    }

    /// The request for `conversation`'s probes.
    pub fn request(&self, conversation: &Conversation) -> ChatRequest {
        let transcript: Vec<String> = conversation
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let text = dataset::text::render_message(m);
                let cut: String = text.chars().take(MESSAGE_CHARS).collect();
                let more = if cut.len() < text.len() { " [...]" } else { "" };
                format!("[{i}] {}: {cut}{more}", m.role.as_str().to_uppercase())
            })
            .collect();
        let mut vars = Vars::default();
        vars.set("transcript", transcript.join("\n\n")).set("max_probes", self.max_probes.to_string());
        ChatRequest::new(self.prompt.render(&vars))
    }

    /// The validated probes the model writes for `conversation`, and those it rejected.
    pub fn generate(&self, conversation: &Conversation) -> Result<(Vec<Probe>, Vec<Rejected>), GenerateError> {
        let reply = self
            .runtime
            .block_on(self.client.complete(self.request(conversation)))
            .map_err(|source| GenerateError::Request { conversation: conversation.id.clone(), source })?;
        let items = parse_probe_list(&reply.text).map_err(|problem| GenerateError::Malformed {
            conversation: conversation.id.clone(),
            problem,
            start: reply.text.chars().take(120).collect(),
        })?;
        let (mut kept, mut rejected) = validate(conversation, items);
        // The model was asked for at most `max_probes`; the rest are dropped, each said.
        for (index, extra) in kept.split_off(self.max_probes.min(kept.len())).into_iter().enumerate() {
            rejected.push(Rejected {
                conversation: conversation.id.clone(),
                index: self.max_probes + index,
                question: extra.question,
                reason: format!(
                    "over --max-probes {}: only the first {} valid probes are kept",
                    self.max_probes, self.max_probes
                ),
            });
        }
        Ok((kept, rejected))
    }
}

/// The entries of a probe list reply (see the module docs).
pub fn parse_probe_list(reply: &str) -> Result<Vec<serde_json::Value>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct List {
        probes: Vec<serde_json::Value>,
    }
    let body = crate::judge::llm::unfenced(reply)?;
    serde_json::from_str::<List>(body).map(|l| l.probes).map_err(|e| e.to_string())
}

/// Keep the proposed probes that pass validation (see the module docs).
pub fn validate(conversation: &Conversation, items: Vec<serde_json::Value>) -> (Vec<Probe>, Vec<Rejected>) {
    let mut kept: Vec<Probe> = Vec::new();
    let mut rejected = Vec::new();
    let mut tested: Vec<String> = Vec::new();
    for (index, item) in items.into_iter().enumerate() {
        let question = item.get("question").and_then(|q| q.as_str()).unwrap_or_default().to_string();
        let reject = |reason: String| Rejected {
            conversation: conversation.id.clone(),
            index,
            question: question.clone(),
            reason,
        };
        let p: Proposed = match serde_json::from_value(item) {
            Ok(p) => p,
            Err(e) => {
                rejected.push(reject(format!("not a probe: {e}")));
                continue;
            }
        };
        match check(conversation, &p, &tested) {
            Ok(()) => {}
            Err(reason) => {
                rejected.push(reject(reason));
                continue;
            }
        }
        tested.extend(p.facts.iter().map(|f| fact_key(f)));
        let source = p.source_messages.iter().copied().max().unwrap_or_default();
        let facts = p.facts.iter().map(|f| f.iter().map(|a| a.trim().to_string()).collect()).collect();
        kept.push(Probe {
            id: format!("{LLM_PREFIX}{}", kept.len() + 1),
            kind: p.kind,
            question: p.question.trim().to_string(),
            answer: if p.answer.trim().is_empty() {
                p.facts[0][0].trim().to_string()
            } else {
                p.answer.trim().to_string()
            },
            facts,
            source_message: source,
            asked_at: None,
            tier: Some(p.tier),
            ..Default::default()
        });
    }
    (kept, rejected)
}

/// The key under which a fact counts as tested: its aliases, normalized and sorted.
fn fact_key(fact: &[String]) -> String {
    let mut aliases: Vec<String> = fact.iter().map(|a| dataset::text::normalize(a)).collect();
    aliases.sort();
    aliases.join("|")
}

/// Why `p` cannot be kept, if it cannot.
fn check(conversation: &Conversation, p: &Proposed, tested: &[String]) -> Result<(), String> {
    if p.question.trim().is_empty() {
        return Err("no question".into());
    }
    if p.facts.is_empty() {
        return Err("no facts".into());
    }
    if let Some(f) = p.facts.iter().find(|f| f.is_empty() || f.iter().any(|a| a.trim().is_empty())) {
        return Err(format!("an empty fact or alias: {f:?}"));
    }
    if p.source_messages.is_empty() {
        return Err("no source messages".into());
    }
    let n = conversation.messages.len();
    if let Some(i) = p.source_messages.iter().find(|i| **i >= n) {
        return Err(format!("source message {i} does not exist (the conversation has {n} messages)"));
    }
    let sources = Context::from_messages(p.source_messages.iter().map(|i| conversation.messages[*i].clone()));
    let probe = Probe {
        id: "check".into(),
        kind: p.kind,
        question: p.question.clone(),
        answer: String::new(),
        facts: p.facts.clone(),
        source_message: 0,
        asked_at: None,
        tier: Some(p.tier),
        ..Default::default()
    };
    let score = OfflineJudge.score_rendered(conversation, &RenderedContext::new(&sources), &probe);
    if let Some((fact, _)) = p.facts.iter().zip(&score.facts).find(|(_, f)| **f == FoundIn::Lost) {
        return Err(format!("fact {fact:?} does not occur in source messages {:?}", p.source_messages));
    }
    if let Some(fact) = p.facts.iter().find(|f| tested.contains(&fact_key(f))) {
        return Err(format!("fact {fact:?} is already tested by another probe"));
    }
    Ok(())
}

/// Replace `conversation`'s generated probes (ids starting with [`LLM_PREFIX`]) with `probes`,
/// keeping every other probe.
pub fn replace_generated(conversation: &mut Conversation, probes: Vec<Probe>) {
    conversation.probes.retain(|p| !p.id.starts_with(LLM_PREFIX));
    conversation.probes.extend(probes);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::Message;
    use serde_json::json;

    fn conversation() -> Conversation {
        Conversation::new(
            "c1",
            vec![
                Message::system("You are a coding agent."),
                Message::user("Add a function called multiply_numbers to src/math.rs and a test for it."),
                Message::assistant("Done: multiply_numbers is in src/math.rs; cargo test passes (12 tests)."),
            ],
        )
    }

    fn item(facts: serde_json::Value, sources: serde_json::Value) -> serde_json::Value {
        json!({"question": "What is the task?", "answer": "Add multiply_numbers", "facts": facts,
               "kind": "task", "tier": "critical", "source_messages": sources})
    }

    #[test]
    fn facts_must_occur_in_their_source_messages_as_the_offline_judge_reads_them() {
        let c = conversation();
        let items = vec![
            // `Multiply_Numbers.` normalizes to the identifier; `math.rs` is found in `src/math.rs`.
            item(json!([["Multiply_Numbers."], ["math.rs"]]), json!([1])),
            // In the conversation, but not in the source message named.
            item(json!([["12 tests"]]), json!([1])),
            // Invented.
            item(json!([["src/physics.rs"]]), json!([1, 2])),
            item(json!([["src/math.rs"]]), json!([7])),
            json!({"question": "Which kind?", "facts": [["x"]], "kind": "trivia", "tier": "critical", "source_messages": [1]}),
            // The same fact again.
            item(json!([["multiply_numbers"]]), json!([2])),
            item(json!([["12 tests"]]), json!([2])),
        ];
        let (kept, rejected) = validate(&c, items);
        assert_eq!(kept.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["llm-1", "llm-2"]);
        assert_eq!((kept[0].source_message, kept[0].tier, kept[0].kind), (1, Some(Tier::Critical), ProbeKind::Task));
        assert_eq!(kept[1].facts, vec![vec!["12 tests".to_string()]]);
        let reasons: Vec<(usize, &str)> = rejected.iter().map(|r| (r.index, r.reason.as_str())).collect();
        assert_eq!(reasons.len(), 5, "{reasons:?}");
        assert!(
            reasons[0].0 == 1 && reasons[0].1.contains("\"12 tests\"") && reasons[0].1.contains("[1]"),
            "{reasons:?}"
        );
        assert!(reasons[1].1.contains("src/physics.rs"), "{reasons:?}");
        assert!(reasons[2].1.contains("source message 7 does not exist"), "{reasons:?}");
        assert!(reasons[3].1.starts_with("not a probe") && reasons[3].1.contains("trivia"), "{reasons:?}");
        assert!(reasons[4].1.contains("already tested"), "{reasons:?}");
        assert!(rejected.iter().all(|r| r.conversation == "c1"));
    }

    #[test]
    fn a_reply_that_is_not_the_probe_list_is_an_error() {
        assert_eq!(parse_probe_list("```json\n{\"probes\": []}\n```").unwrap(), Vec::<serde_json::Value>::new());
        for bad in ["Here are the probes: {\"probes\": []}", "{\"probes\": [", "[]", "{\"questions\": []}", ""] {
            assert!(parse_probe_list(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn generated_probes_replace_earlier_generated_ones_and_sit_beside_the_others() {
        let mut c = conversation();
        let p = |id: &str| Probe {
            id: id.into(),
            kind: ProbeKind::Task,
            question: "q".into(),
            answer: "a".into(),
            facts: vec![vec!["src/math.rs".into()]],
            source_message: 1,
            asked_at: None,
            tier: None,
            ..Default::default()
        };
        c.probes = vec![p("derived-task-1"), p("llm-1"), p("hand-1")];
        replace_generated(&mut c, vec![p("llm-1"), p("llm-2")]);
        let ids: Vec<&str> = c.probes.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["derived-task-1", "hand-1", "llm-1", "llm-2"]);
    }
}
