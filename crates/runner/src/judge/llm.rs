//! The LLM judge: answer, then grade.
//!
//! 1. **Answer**: the answering model reads only the compacted context, as the agent would
//!    send it (system, user and assistant messages; tool calls written as `[tool call
//!    name(args)]` lines of the assistant message; tool results as user messages headed
//!    `[tool result name]`), followed by the probe's question (`prompts/judge_answer.md`). It
//!    never sees the expected answer.
//! 2. **Grade**: the grading model reads the question, the expected answer, the probe's facts and
//!    the answer (`prompts/judge_grade.md`) and returns a JSON verdict scoring accuracy,
//!    completeness, artifact trail, continuity and decisions from 0 to 5.
//!
//! **Parse contract**: the verdict is the whole reply, one JSON object (a reply that is exactly
//! one fenced code block holding it is accepted), with the five integer fields in 0..=5 and
//! optionally `rationale`; nothing else. Anything else is kept raw and counted as unscored;
//! no number is guessed from it.
//!
//! **Repeats**: with `repeats = N` the answer is produced once and graded N times (distinct
//! draws, kept apart in the response cache). The probe's score is the mean over parsed
//! verdicts of `(sum of the five grades) / 25`; the spread is their standard deviation. When
//! no verdict parses, or the answer itself failed, the probe is unscored: its `score` is 0,
//! `llm.scored` is false, and [`is_scored`](runlog::record::is_scored) tells it apart so aggregates can leave it out.
//!
//! **Quoted evidence**: the answering model ends its answer with the passages of the context it
//! rests on, quoted; the grader says per fact whether the answer states it and copies the
//! passage that states it (`facts`: `[{"stated": true, "quote": "..."}]`, in the probe's fact
//! order). A fact stated with a quote that is not in the context (whitespace and case aside)
//! is **unscored**, not credited: the grader cannot vouch for what the context does not say.
//! The first parsed verdict's facts are kept in the detail (`facts`, with `verified`), their
//! unscored count in `unscored_facts` and in [`JudgeStats::unscored_facts`]. A verdict
//! without `facts` still parses (older prompts); its facts are then not judged one by one.
//!
//! The grades, answer, raw verdicts and errors are kept in [`ProbeScore::llm`].
//!
//! **Directives**: on every summary a model wrote, the grading model also lists the user
//! directives the summary states (`prompts/judge_directives.md`: a JSON object
//! `{"directives": [{"sentence", "directive"}]}`, the same strict contract as a verdict). The
//! replay checks each against the user messages ([`crate::directives::fabricated_listed`]); a
//! listed sentence the summary does not hold is dropped and counted
//! ([`JudgeStats::stray_directives`]), a reply that does not parse is counted
//! ([`JudgeStats::unreadable_directive_lists`]) and its summary gets no model check.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use compaction::{Context, Conversation, Probe, Role};
use llm::{ChatMessage, ChatRequest, Client, ClientStats, LlmError, Priority};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{Judge, ListError, Listed};
use crate::summarize::llm::{runtime, LlmSetupError};
use crate::summarize::prompts::{builtin, PromptTemplate, Vars, ANSWER_VARS, DIRECTIVE_VARS, GRADE_VARS};
use runlog::llm_settings::VerdictFormat;
use runlog::record::{ProbeScore, Verdict as ProbeVerdict};

/// The five grading dimensions, in verdict order.
pub const DIMENSIONS: [&str; 5] = ["accuracy", "completeness", "artifact_trail", "continuity", "decisions"];

/// One parsed verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grades {
    pub accuracy: u8,
    pub completeness: u8,
    pub artifact_trail: u8,
    pub continuity: u8,
    pub decisions: u8,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Verdict {
    accuracy: u8,
    completeness: u8,
    artifact_trail: u8,
    continuity: u8,
    decisions: u8,
    #[serde(default)]
    #[allow(dead_code)]
    rationale: Option<String>,
    #[serde(default)]
    facts: Option<Vec<FactVerdict>>,
}

/// The grader's word on one fact: stated or not, and the passage of the context that states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactVerdict {
    pub stated: bool,
    #[serde(default)]
    pub quote: String,
}

/// A text for quote checking: lowercase, whitespace collapsed, surrounding quotes and ellipses
/// dropped.
fn quote_text(text: &str) -> String {
    let t = text.trim().trim_matches(|c: char| "\"'`…".contains(c)).trim_end_matches("...").trim_start_matches("...");
    t.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// The context's entries as quote checking reads them, with where each is found.
pub fn quotable(ctx: &Context) -> Vec<(runlog::record::FoundIn, String)> {
    use compaction::Origin;
    use runlog::record::FoundIn;
    ctx.entries()
        .iter()
        .map(|e| {
            let found = match e.origin() {
                Origin::Recorded { .. } => FoundIn::Verbatim,
                Origin::Summary { .. } => FoundIn::Summary,
                _ => FoundIn::Other,
            };
            (found, quote_text(&dataset::text::render_message(e.message())))
        })
        .collect()
}

/// Where `quote` occurs in the context (`None`: it does not, or it is too short to vouch for
/// anything).
pub fn locate_quote(entries: &[(runlog::record::FoundIn, String)], quote: &str) -> Option<runlog::record::FoundIn> {
    let q = quote_text(quote);
    if q.chars().count() < 3 {
        return None;
    }
    entries.iter().find(|(_, text)| text.contains(&q)).map(|(f, _)| *f)
}

impl Grades {
    pub fn values(&self) -> [u8; 5] {
        [self.accuracy, self.completeness, self.artifact_trail, self.continuity, self.decisions]
    }
    /// The sum of the grades over 25, in 0..=1.
    pub fn score(&self) -> f64 {
        f64::from(self.values().iter().map(|v| u32::from(*v)).sum::<u32>()) / 25.0
    }
}

/// Parse a verdict under the strict contract (see the module docs).
pub fn parse_verdict(reply: &str) -> Result<Grades, String> {
    parse_verdict_facts(reply).map(|(g, _)| g)
}

/// A reply's JSON: the whole reply, or the inside of the one fenced code block it is.
pub(crate) fn unfenced(reply: &str) -> Result<&str, &'static str> {
    let text = reply.trim();
    match text.strip_prefix("```") {
        Some(fenced) => {
            let inner = fenced.strip_suffix("```").ok_or("an unclosed code fence")?;
            let inner = inner.strip_prefix("json").unwrap_or(inner);
            if inner.contains("```") {
                return Err("more than one code block");
            }
            Ok(inner.trim())
        }
        None => Ok(text),
    }
}

/// Parse a verdict and its per-fact part (empty when the verdict has none).
pub fn parse_verdict_facts(reply: &str) -> Result<(Grades, Vec<FactVerdict>), String> {
    let body = unfenced(reply)?;
    let v: Verdict = serde_json::from_str(body).map_err(|e| format!("not a verdict object: {e}"))?;
    let g = Grades {
        accuracy: v.accuracy,
        completeness: v.completeness,
        artifact_trail: v.artifact_trail,
        continuity: v.continuity,
        decisions: v.decisions,
    };
    if let Some((name, value)) = DIMENSIONS.iter().zip(g.values()).find(|(_, v)| *v > 5) {
        return Err(format!("{name} = {value} is outside 0..=5"));
    }
    Ok((g, v.facts.unwrap_or_default()))
}

/// True for a probe a completion of which the response cache could not answer in mode `only`
/// (its score, if any, is not what the cached run would give).
pub fn missed_cache(score: &ProbeScore) -> bool {
    score.verdict.cache_miss()
}

/// The error of a probe whose model request failed at the endpoint (see
/// [`LlmError::is_endpoint_fault`]), `None` for any other probe.
pub fn endpoint_fault(score: &ProbeScore) -> Option<String> {
    score.verdict.endpoint_fault().map(str::to_string)
}

/// Every future to completion, polled together on the calling task; the outputs in order.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in futures.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *slot = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// The typed verdict of the judge's detail, built once where the detail is made (the only
/// place its keys are read).
fn verdict_of(scored: bool, detail: &Value) -> ProbeVerdict {
    let flag = |k: &str| detail.get(k).and_then(Value::as_bool).unwrap_or(false);
    let error = detail
        .get("error")
        .and_then(Value::as_str)
        .or_else(|| detail.pointer("/errors/0").and_then(Value::as_str))
        .map(str::to_string);
    let cache_miss = flag("cache_miss");
    let over_budget = flag("over_budget");
    let endpoint = flag("endpoint_fault").then(|| error.clone().unwrap_or_else(|| "endpoint failure".into()));
    if !scored {
        ProbeVerdict::Unscored {
            reason: error.unwrap_or_else(|| "no grade could be read".into()),
            cache_miss,
            endpoint,
            over_budget,
        }
    } else if cache_miss || endpoint.is_some() || over_budget {
        ProbeVerdict::Partial { cache_miss, endpoint, over_budget }
    } else {
        ProbeVerdict::Scored
    }
}

/// The compacted context as the answering model reads it.
pub fn context_messages(ctx: &Context) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    for e in ctx.entries() {
        let m = e.message();
        match m.role {
            Role::System => out.push(ChatMessage::system(m.content.clone())),
            Role::User => out.push(ChatMessage::user(m.content.clone())),
            Role::Assistant => {
                let mut text = m.content.clone();
                for c in &m.tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!("[tool call {}({})]", c.name, c.arguments));
                }
                if !text.is_empty() {
                    out.push(ChatMessage::assistant(text));
                }
            }
            Role::Tool => out.push(ChatMessage::user(format!(
                "[tool result {}]\n{}",
                m.name.as_deref().unwrap_or("tool"),
                m.content
            ))),
        }
    }
    out
}

/// Counters of an [`LlmJudge`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JudgeStats {
    pub probes: u64,
    pub scored: u64,
    pub unscored: u64,
    /// Facts the grader said were stated with a quote the context does not hold.
    pub unscored_facts: u64,
    /// Verdicts that did not parse, over all repeats.
    pub unparsed_verdicts: u64,
    /// Summaries whose user directives the grader was asked to list.
    pub directive_lists: u64,
    /// Of those, lists that could not be read (not the list's JSON, or the request failed).
    pub unreadable_directive_lists: u64,
    /// Listed directives whose sentence the summary does not hold (the grader's own text).
    pub stray_directives: u64,
    pub answerer: ClientStats,
    pub grader: ClientStats,
    /// The answering and grading clients' counters together (once when they are the same).
    pub client: ClientStats,
}

/// Two clients' counters added up.
fn sum_stats(a: &ClientStats, b: &ClientStats) -> ClientStats {
    let mut out = a.clone();
    out.requests += b.requests;
    out.http_attempts += b.http_attempts;
    out.retries += b.retries;
    out.cache_hits += b.cache_hits;
    out.cache_misses += b.cache_misses;
    out.failures += b.failures;
    for (k, v) in &b.failures_by_kind {
        *out.failures_by_kind.entry(k.clone()).or_insert(0) += v;
    }
    out.usage.add(b.usage);
    out
}

/// The LLM judge (see the module docs).
#[derive(Debug)]
pub struct LlmJudge {
    answerer: Arc<Client>,
    grader: Arc<Client>,
    repeats: u32,
    /// The `response_format` of grading requests, when the grader is held to a schema.
    verdict_format: Option<Value>,
    /// The `response_format` of directive-list requests, under the same setting.
    directive_format: Option<Value>,
    answer_prompt: PromptTemplate,
    grade_prompt: PromptTemplate,
    directive_prompt: PromptTemplate,
    runtime: tokio::runtime::Runtime,
    probes: AtomicU64,
    scored: AtomicU64,
    unparsed: AtomicU64,
    unscored_facts: AtomicU64,
    directive_lists: AtomicU64,
    unreadable_lists: AtomicU64,
    stray_directives: AtomicU64,
}

impl LlmJudge {
    /// A judge answering with `answerer` and grading `repeats` times with `grader` (they may be
    /// the same client).
    pub fn new(answerer: Arc<Client>, grader: Arc<Client>, repeats: u32) -> Result<LlmJudge, LlmSetupError> {
        if repeats == 0 {
            return Err(LlmSetupError::Invalid("judge_repeats must be at least 1".into()));
        }
        Ok(LlmJudge {
            answerer,
            grader,
            repeats,
            verdict_format: None,
            directive_format: None,
            answer_prompt: PromptTemplate::parse("judge_answer.md", builtin::JUDGE_ANSWER, ANSWER_VARS)?,
            grade_prompt: PromptTemplate::parse("judge_grade.md", builtin::JUDGE_GRADE, GRADE_VARS)?,
            directive_prompt: PromptTemplate::parse("judge_directives.md", builtin::JUDGE_DIRECTIVES, DIRECTIVE_VARS)?,
            runtime: runtime()?,
            probes: AtomicU64::new(0),
            scored: AtomicU64::new(0),
            unparsed: AtomicU64::new(0),
            unscored_facts: AtomicU64::new(0),
            directive_lists: AtomicU64::new(0),
            unreadable_lists: AtomicU64::new(0),
            stray_directives: AtomicU64::new(0),
        })
    }
    /// Hold the grader to the verdict's schema with `format` (see [`VerdictFormat`]).
    pub fn with_verdict_format(mut self, format: Option<VerdictFormat>) -> LlmJudge {
        self.verdict_format = format.map(|f| f.response_format(&DIMENSIONS));
        self.directive_format = format.map(directive_list_format);
        self
    }
    pub fn stats(&self) -> JudgeStats {
        let probes = self.probes.load(Ordering::Relaxed);
        let scored = self.scored.load(Ordering::Relaxed);
        JudgeStats {
            probes,
            scored,
            unscored: probes - scored.min(probes),
            unscored_facts: self.unscored_facts.load(Ordering::Relaxed),
            unparsed_verdicts: self.unparsed.load(Ordering::Relaxed),
            directive_lists: self.directive_lists.load(Ordering::Relaxed),
            unreadable_directive_lists: self.unreadable_lists.load(Ordering::Relaxed),
            stray_directives: self.stray_directives.load(Ordering::Relaxed),
            answerer: self.answerer.stats(),
            grader: self.grader.stats(),
            client: if Arc::ptr_eq(&self.answerer, &self.grader) {
                self.answerer.stats()
            } else {
                sum_stats(&self.answerer.stats(), &self.grader.stats())
            },
        }
    }
    /// The client that answers probes.
    pub fn answerer(&self) -> &Client {
        &self.answerer
    }
    /// The client that grades answers and lists directives.
    pub fn grader(&self) -> &Client {
        &self.grader
    }
    /// How many times each answer is graded.
    pub fn repeats(&self) -> u32 {
        self.repeats
    }
    /// Cache keys missed in cache mode `only`, by either client.
    pub fn missing_keys(&self) -> Vec<String> {
        let mut keys = self.answerer.cache().map(|c| c.missing()).unwrap_or_default();
        if !Arc::ptr_eq(&self.answerer, &self.grader) {
            for k in self.grader.cache().map(|c| c.missing()).unwrap_or_default() {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        keys
    }

    /// The answering request for `probe` over `ctx`.
    pub fn answer_request(&self, ctx: &Context, probe: &Probe) -> ChatRequest {
        let mut messages = context_messages(ctx);
        let mut vars = Vars::default();
        vars.set("question", probe.question.as_str());
        messages.extend(self.answer_prompt.render(&vars));
        // Scored beside the replay: nothing waits on it but the end of the pair.
        ChatRequest::new(messages).priority(Priority::Background)
    }

    /// The grading request for draw `sample`.
    pub fn grade_request(&self, probe: &Probe, answer: &str, sample: u32) -> ChatRequest {
        let facts = if probe.facts.is_empty() {
            format!("- {}", probe.answer)
        } else {
            probe.facts.iter().map(|f| format!("- {}", f.join(" | "))).collect::<Vec<_>>().join("\n")
        };
        let mut vars = Vars::default();
        vars.set("question", probe.question.as_str())
            .set("expected", probe.answer.as_str())
            .set("facts", facts)
            .set("answer", if answer.trim().is_empty() { "(no answer)" } else { answer });
        ChatRequest::new(self.grade_prompt.render(&vars))
            .sample(sample)
            .response_format(self.verdict_format.clone())
            .priority(Priority::Background)
    }

    /// The grader's request for the user directives `summary` states.
    pub fn directive_request(&self, summary: &str) -> ChatRequest {
        let mut vars = Vars::default();
        vars.set("summary", summary);
        // The replay waits on it, at the compaction that wrote the summary.
        ChatRequest::new(self.directive_prompt.render(&vars))
            .response_format(self.directive_format.clone())
            .priority(Priority::Urgent)
    }

    async fn judge(&self, ctx: &Context, probe: &Probe) -> (Option<f64>, Value) {
        let answer = match self.answerer.complete(self.answer_request(ctx, probe)).await {
            Ok(r) => r.text,
            Err(e) => {
                let mut detail = json!({"scored": false, "error": format!("answer: {}: {e}", e.kind())});
                if matches!(e, LlmError::CacheMiss { .. }) {
                    detail["cache_miss"] = json!(true);
                }
                if matches!(e, LlmError::OverBudget { .. }) {
                    detail["over_budget"] = json!(true);
                }
                if e.is_endpoint_fault() {
                    detail["endpoint_fault"] = json!(true);
                }
                return (None, detail);
            }
        };
        let mut raw = Vec::new();
        let mut grades: Vec<Value> = Vec::new();
        let mut scores = Vec::new();
        let mut per_dim = [0f64; 5];
        let mut errors = Vec::new();
        let mut cache_miss = false;
        let mut over_budget = false;
        let mut endpoint_fault = false;
        let mut fact_verdicts: Option<Vec<FactVerdict>> = None;
        for sample in 0..self.repeats {
            match self.grader.complete(self.grade_request(probe, &answer, sample)).await {
                Ok(r) => {
                    match parse_verdict_facts(&r.text) {
                        Ok((g, facts)) => {
                            if fact_verdicts.is_none() && !facts.is_empty() {
                                fact_verdicts = Some(facts);
                            }
                            for (acc, v) in per_dim.iter_mut().zip(g.values()) {
                                *acc += f64::from(v);
                            }
                            scores.push(g.score());
                            grades.push(json!(g));
                        }
                        Err(problem) => {
                            self.unparsed.fetch_add(1, Ordering::Relaxed);
                            errors.push(format!("verdict {sample}: {problem}"));
                            grades.push(Value::Null);
                        }
                    }
                    raw.push(Value::String(r.text));
                }
                Err(e) => {
                    cache_miss |= matches!(e, LlmError::CacheMiss { .. });
                    over_budget |= matches!(e, LlmError::OverBudget { .. });
                    endpoint_fault |= e.is_endpoint_fault();
                    errors.push(format!("grade {sample}: {}: {e}", e.kind()));
                    grades.push(Value::Null);
                    raw.push(Value::Null);
                }
            }
        }
        let n = scores.len();
        let mut detail = json!({
            "scored": n > 0,
            "answer": answer,
            "repeats": self.repeats,
            "scored_repeats": n,
            "grades": grades,
            "raw": raw,
        });
        if !errors.is_empty() {
            detail["errors"] = json!(errors);
        }
        if cache_miss {
            detail["cache_miss"] = json!(true);
        }
        if over_budget {
            detail["over_budget"] = json!(true);
        }
        if endpoint_fault {
            detail["endpoint_fault"] = json!(true);
        }
        if let Some(facts) = fact_verdicts {
            let entries = quotable(ctx);
            let mut unscored = 0u64;
            let judged: Vec<Value> = facts
                .iter()
                .map(|f| {
                    let found = if f.stated { locate_quote(&entries, &f.quote) } else { None };
                    let verified = !f.stated || found.is_some();
                    if !verified {
                        unscored += 1;
                    }
                    json!({"stated": f.stated, "quote": f.quote, "verified": verified, "found_in": found})
                })
                .collect();
            self.unscored_facts.fetch_add(unscored, Ordering::Relaxed);
            detail["facts"] = Value::Array(judged);
            detail["unscored_facts"] = json!(unscored);
        }
        if n == 0 {
            return (None, detail);
        }
        let mean = scores.iter().sum::<f64>() / n as f64;
        let spread = (scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        let dims: serde_json::Map<String, Value> =
            DIMENSIONS.iter().zip(per_dim).map(|(d, sum)| (d.to_string(), json!(sum / n as f64))).collect();
        detail["mean"] = json!(mean);
        detail["spread"] = json!(spread);
        detail["min"] = json!(scores.iter().copied().fold(f64::INFINITY, f64::min));
        detail["max"] = json!(scores.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        detail["dimensions"] = Value::Object(dims);
        (Some(mean), detail)
    }
}

impl Judge for LlmJudge {
    fn name(&self) -> String {
        let (a, g) = (&self.answerer.config().model, &self.grader.config().model);
        if a == g {
            format!("llm:{a}")
        } else {
            format!("llm:{a}+{g}")
        }
    }

    fn score(&self, conversation: &Conversation, ctx: &Context, probe: &Probe) -> ProbeScore {
        let judged = self.runtime.block_on(self.judge(ctx, probe));
        self.record(conversation, ctx, probe, judged)
    }

    /// The probes of one checkpoint are asked at once: each is its own chain (answer, then
    /// grades), and the endpoint's concurrency cap, not the probe order, bounds how many
    /// requests are in flight.
    fn score_checkpoint(&self, conversation: &Conversation, ctx: &Context, probes: &[&Probe]) -> Vec<ProbeScore> {
        let judged = self.runtime.block_on(join_all(probes.iter().map(|p| self.judge(ctx, p)).collect()));
        probes.iter().zip(judged).map(|(p, j)| self.record(conversation, ctx, p, j)).collect()
    }

    fn defers(&self) -> bool {
        true
    }

    fn list_directives(&self, summary: &str) -> Option<Result<Vec<Listed>, ListError>> {
        self.directive_lists.fetch_add(1, Ordering::Relaxed);
        let listed = match self.runtime.block_on(self.grader.complete(self.directive_request(summary))) {
            Ok(r) => parse_directive_list(&r.text).map_err(ListError::Unreadable),
            Err(e @ LlmError::CacheMiss { .. }) => Err(ListError::CacheMiss(e.to_string())),
            Err(e @ LlmError::OverBudget { .. }) => Err(ListError::OverBudget(e.to_string())),
            Err(e) if e.is_endpoint_fault() => Err(ListError::Endpoint(format!("{}: {e}", e.kind()))),
            Err(e) => Err(ListError::Unreadable(format!("{}: {e}", e.kind()))),
        };
        let listed = match listed {
            Ok(l) => l,
            Err(e) => {
                self.unreadable_lists.fetch_add(1, Ordering::Relaxed);
                return Some(Err(e));
            }
        };
        let (kept, stray): (Vec<Listed>, Vec<Listed>) =
            listed.into_iter().partition(|l| crate::directives::stated_in(summary, l));
        self.stray_directives.fetch_add(stray.len() as u64, Ordering::Relaxed);
        Some(Ok(kept))
    }
}

/// The directive list's schema as `format` sends it (see [`VerdictFormat`]).
fn directive_list_format(format: VerdictFormat) -> Value {
    let item = json!({"type": "object", "properties": {"sentence": {"type": "string"}, "directive": {"type": "string"}},
        "required": ["sentence", "directive"], "additionalProperties": false});
    let schema = json!({"type": "object", "properties": {"directives": {"type": "array", "items": item}},
        "required": ["directives"], "additionalProperties": false});
    match format {
        VerdictFormat::JsonSchema => {
            json!({"type": "json_schema", "json_schema": {"name": "directives", "strict": true, "schema": schema}})
        }
        VerdictFormat::JsonObject => json!({"type": "json_object", "schema": schema}),
    }
}

/// Parse the grader's list of directives: the whole reply is `{"directives": [...]}` (or one
/// fenced code block holding it), each entry `{"sentence", "directive"}`; nothing else.
pub fn parse_directive_list(reply: &str) -> Result<Vec<Listed>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct List {
        directives: Vec<Listed>,
    }
    let body = unfenced(reply)?;
    serde_json::from_str::<List>(body).map(|l| l.directives).map_err(|e| format!("not a directive list: {e}"))
}

impl LlmJudge {
    fn record(
        &self,
        conversation: &Conversation,
        ctx: &Context,
        probe: &Probe,
        judged: (Option<f64>, Value),
    ) -> ProbeScore {
        let (score, detail) = judged;
        self.probes.fetch_add(1, Ordering::Relaxed);
        if score.is_some() {
            self.scored.fetch_add(1, Ordering::Relaxed);
        }
        let n = conversation.messages.len();
        let verdict = verdict_of(score.is_some(), &detail);
        ProbeScore {
            probe_id: probe.id.clone(),
            kind: probe.kind,
            tier: Some(probe.tier()),
            asked_at: probe.asked_at.unwrap_or(n).min(n),
            checkpoint: 100,
            at_risk: !ctx.entries().iter().any(|e| e.origin().verbatim_index() == Some(probe.source_message)),
            score: score.unwrap_or(0.0),
            facts: Vec::new(),
            judge: self.name(),
            llm: Some(detail),
            if_sent: None,
            verdict,
            evidence: Vec::new(),
            written: probe.is_written(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::{Message, ProbeKind, ToolCall};
    use llm::{LlmConfig, Protocol};
    use runlog::record::is_scored;
    use testkit::server::{MockServer, Reply};

    fn client(server: &MockServer, protocol: Protocol) -> Arc<Client> {
        let mut cfg = LlmConfig::new(protocol, "judge-model");
        cfg.base_url = Some(if protocol == Protocol::Openai { format!("{}/v1", server.url()) } else { server.url() });
        cfg.max_retries = 0;
        Arc::new(Client::new(cfg, None).unwrap())
    }

    fn probe() -> Probe {
        Probe {
            id: "p-file".into(),
            kind: ProbeKind::Artifact,
            question: "Which file holds the parser?".into(),
            answer: "The parser lives in src/parse/grammar.rs".into(),
            facts: vec![vec!["src/parse/grammar.rs".into(), "grammar.rs".into()]],
            source_message: 2,
            asked_at: None,
            tier: None,
            ..Default::default()
        }
    }

    fn ctx() -> Context {
        Context::from_messages(vec![
            Message::system("You are a coding agent."),
            Message::user("Where is the parser?"),
            Message::assistant_calls(
                "Looking.",
                vec![ToolCall { id: "c1".into(), name: "grep".into(), arguments: "{\"q\":\"parse\"}".into() }],
            ),
            Message::tool_result("c1", "grep", "src/parse/grammar.rs:1: fn parse()"),
        ])
    }

    fn conversation() -> Conversation {
        Conversation::new("c", ctx().to_messages())
    }

    fn verdict(g: [u8; 5]) -> Reply {
        Reply::text(
            format!(
                "{{\"accuracy\": {}, \"completeness\": {}, \"artifact_trail\": {}, \"continuity\": {}, \"decisions\": {}, \"rationale\": \"r\"}}",
                g[0], g[1], g[2], g[3], g[4]
            ),
            50,
            20,
        )
    }

    #[test]
    fn verdict_parsing_is_strict() {
        let ok = r#"{"accuracy": 5, "completeness": 4, "artifact_trail": 3, "continuity": 2, "decisions": 1}"#;
        assert_eq!(parse_verdict(ok).unwrap().values(), [5, 4, 3, 2, 1]);
        assert_eq!(parse_verdict(&format!("```json\n{ok}\n```")).unwrap().score(), 15.0 / 25.0);
        for bad in [
            format!("Here is my verdict: {ok}"),
            format!("{ok} Hope this helps"),
            ok.replace("5,", "5.0,"),
            ok.replace("5,", "6,"),
            ok.replace("5,", "-1,"),
            ok.replace(", \"decisions\": 1", ""),
            ok.replace("}", ", \"bonus\": 1}"),
            "```json\n{}\n".to_string(),
            "The answer is good, 5/5.".to_string(),
            String::new(),
        ] {
            assert!(parse_verdict(&bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn directive_list_parsing_is_strict() {
        let ok = r#"{"directives": [{"sentence": "The user asked to ship.", "directive": "ship"}]}"#;
        let listed = parse_directive_list(ok).unwrap();
        assert_eq!((listed[0].sentence.as_str(), listed[0].directive.as_str()), ("The user asked to ship.", "ship"));
        assert_eq!(parse_directive_list(&format!("```json\n{ok}\n```")).unwrap(), listed);
        assert_eq!(parse_directive_list(r#"{"directives": []}"#).unwrap(), Vec::new());
        for bad in [
            format!("Here it is: {ok}"),
            ok.replace("\"directive\"", "\"instruction\""),
            r#"{"directives": ["ship"]}"#.to_string(),
            "[]".to_string(),
            String::new(),
        ] {
            assert!(parse_directive_list(&bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn the_probes_of_a_checkpoint_are_asked_at_once() {
        let server = MockServer::start();
        server.respond_with(|r: &testkit::server::Recorded| {
            let reply =
                if r.body.contains("accuracy") { verdict([4, 4, 4, 4, 4]) } else { Reply::text("an answer", 50, 5) };
            reply.delayed(std::time::Duration::from_millis(150))
        });
        let mut cfg = LlmConfig::new(Protocol::Openai, "judge-model");
        cfg.base_url = Some(format!("{}/v1", server.url()));
        cfg.max_retries = 0;
        cfg.max_concurrency = 4;
        let c = Arc::new(Client::new(cfg, None).unwrap());
        let judge = LlmJudge::new(c.clone(), c, 1).unwrap();
        let probes: Vec<Probe> = (0..4).map(|i| Probe { id: format!("p{i}"), ..probe() }).collect();
        let asked: Vec<&Probe> = probes.iter().collect();
        let scores = judge.score_checkpoint(&conversation(), &ctx(), &asked);
        assert_eq!(scores.iter().map(|s| s.probe_id.as_str()).collect::<Vec<_>>(), ["p0", "p1", "p2", "p3"]);
        assert!(scores.iter().all(is_scored));
        assert_eq!(server.count(), 8, "an answer and a grade per probe");
        assert_eq!(server.max_in_flight(), 4, "the four answers, then the four grades, were in flight together");
    }

    #[test]
    fn a_verdict_format_goes_with_the_grading_request_only() {
        let server = MockServer::start();
        server.push_all([Reply::text("src/parse/grammar.rs", 80, 6), verdict([5, 5, 5, 4, 4])]);
        let judge = LlmJudge::new(client(&server, Protocol::Openai), client(&server, Protocol::Openai), 1)
            .unwrap()
            .with_verdict_format(Some(VerdictFormat::JsonObject));
        assert!(is_scored(&judge.score(&conversation(), &ctx(), &probe())));
        let reqs = server.requests();
        assert!(reqs[0].json().get("response_format").is_none(), "the answer is free text");
        let grade = reqs[1].json();
        assert_eq!(grade["response_format"]["type"], "json_object");
        assert_eq!(grade["response_format"]["schema"]["required"][0], "accuracy");
        // The format is part of the cache key: a held and a free grade are different requests.
        let free = judge.grade_request(&probe(), "x", 0).response_format(None);
        let held = judge.grade_request(&probe(), "x", 0);
        let c = client(&server, Protocol::Openai);
        assert_ne!(c.cache_key(&free).hex(), c.cache_key(&held).hex());
        // The directive list is held to its own schema under the same setting.
        let list = judge.directive_request("The user asked to ship.").response_format.unwrap();
        assert_eq!(
            (list["type"].as_str(), list["schema"]["required"][0].as_str()),
            (Some("json_object"), Some("directives"))
        );
        assert!(judge.answer_request(&ctx(), &probe()).response_format.is_none());
    }

    #[test]
    fn answers_from_the_context_only_then_grades() {
        let server = MockServer::start();
        server.push_all([Reply::text("src/parse/grammar.rs", 80, 6), verdict([5, 5, 5, 4, 4])]);
        let judge = LlmJudge::new(client(&server, Protocol::Openai), client(&server, Protocol::Openai), 1).unwrap();
        let s = judge.score(&conversation(), &ctx(), &probe());
        assert!((s.score - 23.0 / 25.0).abs() < 1e-9, "{}", s.score);
        assert!(is_scored(&s));
        assert!(!s.at_risk);
        assert_eq!((s.judge.as_str(), s.asked_at), ("llm:judge-model", 4));
        let detail = s.llm.unwrap();
        assert_eq!(detail["answer"], "src/parse/grammar.rs");
        assert_eq!(detail["dimensions"]["continuity"], 4.0);
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2);
        let answer = reqs[0].json();
        let msgs = answer["messages"].as_array().unwrap();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user", "user"]);
        assert_eq!(msgs[2]["content"], "Looking.\n[tool call grep({\"q\":\"parse\"})]");
        assert!(msgs[3]["content"].as_str().unwrap().starts_with("[tool result grep]\n"));
        assert!(msgs[4]["content"].as_str().unwrap().ends_with("Question: Which file holds the parser?"));
        assert!(!reqs[0].body.contains("The parser lives in"), "the answerer never sees the expected answer");
        let grade = reqs[1].body.clone();
        assert!(grade.contains("The parser lives in src/parse/grammar.rs"));
        assert!(grade.contains("src/parse/grammar.rs | grammar.rs"));
    }

    #[test]
    fn repeats_give_mean_and_spread_and_skip_unparsed_verdicts() {
        let server = MockServer::start();
        server.push_all([
            Reply::text("grammar.rs", 1, 1),
            verdict([5, 5, 5, 5, 5]),
            Reply::text("I think it is good", 1, 1),
            verdict([0, 0, 0, 0, 0]),
        ]);
        let judge =
            LlmJudge::new(client(&server, Protocol::Anthropic), client(&server, Protocol::Anthropic), 3).unwrap();
        let s = judge.score(&conversation(), &ctx(), &probe());
        assert!((s.score - 0.5).abs() < 1e-9);
        let d = s.llm.unwrap();
        assert_eq!((d["repeats"].as_u64(), d["scored_repeats"].as_u64()), (Some(3), Some(2)));
        assert!((d["spread"].as_f64().unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(d["raw"][1], "I think it is good");
        assert!(d["grades"][1].is_null());
        // Each draw is a distinct cache key.
        let keys: std::collections::BTreeSet<String> = (0..3)
            .map(|i| judge.grader.cache_key(&judge.grade_request(&probe(), "grammar.rs", i)).hex().to_string())
            .collect();
        assert_eq!(keys.len(), 3);
        assert_eq!(judge.stats().unparsed_verdicts, 1);
    }

    #[test]
    fn an_unparseable_verdict_is_kept_raw_and_unscored() {
        let server = MockServer::start();
        server.push_all([Reply::text("grammar.rs", 1, 1), Reply::text("Score: 4/5, pretty good!", 1, 1)]);
        let judge = LlmJudge::new(client(&server, Protocol::Openai), client(&server, Protocol::Openai), 1).unwrap();
        let s = judge.score(&conversation(), &ctx(), &probe());
        assert!(!is_scored(&s));
        assert_eq!(s.score, 0.0);
        let d = s.llm.unwrap();
        assert_eq!(d["raw"][0], "Score: 4/5, pretty good!");
        assert!(d.get("mean").is_none(), "no number is guessed");
        let st = judge.stats();
        assert_eq!((st.probes, st.scored, st.unscored), (1, 0, 1));
    }

    #[test]
    fn a_fact_quoted_from_outside_the_context_is_unscored_not_credited() {
        let server = MockServer::start();
        server.push(Reply::text("src/parse/grammar.rs\nQuotes: \"src/parse/grammar.rs:1: fn parse()\"", 50, 10));
        server.push(Reply::text(
            r#"{"accuracy": 5, "completeness": 3, "artifact_trail": 5, "continuity": 4, "decisions": 4, "rationale": "r",
               "facts": [{"stated": true, "quote": "src/parse/grammar.rs:1:   fn parse()"},
                         {"stated": true, "quote": "the lexer lives in src/lex.rs"},
                         {"stated": false, "quote": ""}]}"#,
            50,
            20,
        ));
        let judge = LlmJudge::new(client(&server, Protocol::Openai), client(&server, Protocol::Openai), 1).unwrap();
        let mut p = probe();
        p.facts.push(vec!["src/lex.rs".into()]);
        p.facts.push(vec!["tokenizer".into()]);
        let s = judge.score(&conversation(), &ctx(), &p);
        assert!(is_scored(&s));
        let detail = s.llm.as_ref().unwrap();
        let facts = detail["facts"].as_array().unwrap();
        // Found (whitespace and case aside) in the tool result, kept verbatim.
        assert_eq!((facts[0]["verified"].as_bool(), facts[0]["found_in"].as_str()), (Some(true), Some("verbatim")));
        // Stated with a quote the context does not hold: unscored.
        assert_eq!(facts[1]["verified"].as_bool(), Some(false));
        // Not stated: nothing to verify.
        assert_eq!(facts[2]["verified"].as_bool(), Some(true));
        assert_eq!(detail["unscored_facts"].as_u64(), Some(1));
        assert_eq!(judge.stats().unscored_facts, 1);
        // The grader was asked per fact, from the answer's quotes.
        let grade = &server.requests()[1].body;
        assert!(grade.contains("Quotes:") && grade.contains("\\\"facts\\\""), "{grade}");
    }

    #[test]
    fn a_failed_answer_is_unscored_with_its_error() {
        let server = MockServer::start();
        server.push(Reply::ContextLength);
        let judge = LlmJudge::new(client(&server, Protocol::Openai), client(&server, Protocol::Openai), 2).unwrap();
        let s = judge.score(&conversation(), &ctx(), &probe());
        assert!(!is_scored(&s));
        // The verdict is typed: unscored, with the reason; neither the cache nor the endpoint
        // was at fault (a context-length refusal is the model's own answer).
        match &s.verdict {
            ProbeVerdict::Unscored { reason, cache_miss: false, endpoint: None, over_budget: false } => {
                assert!(reason.starts_with("answer: context_length_exceeded"), "{reason}")
            }
            other => panic!("not unscored as expected: {other:?}"),
        }
        assert!(!missed_cache(&s) && endpoint_fault(&s).is_none());
        assert!(s.llm.unwrap()["error"].as_str().unwrap().starts_with("answer: context_length_exceeded"));
        assert_eq!(server.count(), 1, "no grading without an answer");
    }

    #[test]
    fn unscored_probes_stay_out_of_retention() {
        use crate::replay::{replay, ReplaySettings};
        use runlog::settings::CacheProfile;
        let server = MockServer::start();
        // Probe 1: an answer and a verdict; probe 2: an answer and prose instead of a verdict.
        // (The probes of a checkpoint are asked at once: replies go by request, not by order.)
        server.respond_with(|r: &testkit::server::Recorded| {
            match (r.body.contains("accuracy"), r.body.contains("Which other file")) {
                (false, false) => Reply::text("src/parse/grammar.rs", 1, 1),
                (true, false) => verdict([5, 5, 5, 5, 5]),
                (false, true) => Reply::text("no idea", 1, 1),
                (true, true) => Reply::text("Looks fine to me.", 1, 1),
            }
        });
        let judge = LlmJudge::new(client(&server, Protocol::Openai), client(&server, Protocol::Openai), 1).unwrap();
        let mut conversation = conversation();
        let mut second = probe();
        second.id = "p-other".into();
        second.question = "Which other file holds the parser?".into();
        // Asked once each, at the end: the server's script has one answer and grade per probe.
        let end = conversation.messages.len();
        let mut first = probe();
        first.asked_at = Some(end);
        second.asked_at = Some(end);
        conversation.probes = vec![first, second];
        let settings = ReplaySettings {
            strategy: compaction_strategies::StrategyConfig::default_for("none").unwrap(),
            window: 128_000,
            encoding: compaction::Encoding::O200kBase,
            cache: CacheProfile::None,
            price: None,
            overflow: runlog::settings::OverflowPolicy::Continue,
        };
        let summarizer = crate::llm_setup::NeedsRoles;
        let m = replay(&conversation, &settings, &summarizer, &judge).unwrap();
        assert_eq!(m.probes.len(), 2);
        assert_eq!(m.probes.iter().filter(|p| is_scored(p)).count(), 1);
        assert_eq!(m.retention, Some(1.0), "the unscored probe is not averaged in as 0");
    }

    #[test]
    fn zero_repeats_is_rejected() {
        let server = MockServer::start();
        assert!(LlmJudge::new(client(&server, Protocol::Openai), client(&server, Protocol::Openai), 0).is_err());
    }
}
