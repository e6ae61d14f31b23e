//! The run log: one [`PairRecord`] per (conversation, configuration) pair, appended to
//! `results.jsonl` as soon as the pair finishes. Every CSV and the HTML report are views of
//! these records.

use std::collections::BTreeMap;

use compaction::{CompactionEvent, ProbeKind, Tier, Trigger, Violation};
use serde::{Deserialize, Serialize};

/// One line of `results.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRecord {
    pub conversation_id: String,
    /// The dataset file (relative path or name) the conversation came from.
    pub dataset: String,
    /// Stable id of the configuration (strategy + params + window + run-level settings).
    pub config_id: String,
    pub strategy: String,
    /// The strategy's parameters as given (after grid expansion).
    pub params: serde_json::Value,
    pub window: u64,
    /// Who judged retention (`offline`, or the LLM judge's model).
    pub judge: String,
    /// A hash of what the pair's result depends on: the conversation's content, the resolved
    /// configuration, the summarizer and the judge. `--resume` runs a pair again when it
    /// changed. A record written before it existed has none, and `--resume` runs it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Why a failed pair failed, as a type (`None` for a pair that did not fail, and for
    /// records written before the kind was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<PairFailure>,
    pub outcome: PairOutcome,
}

/// Why a pair failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairFailure {
    /// The replay could not run (bad parameters, a dataset problem, no window).
    Replay,
    /// The replay panicked.
    Panic,
    /// A summary or probe had no response in the cache (cache mode `only`).
    CacheMiss,
    /// A summary or probe failed at the model endpoint (`on_llm_error = "fail"`).
    Endpoint,
    /// An external strategy's program exited, hung or broke the protocol.
    Strategy,
    /// A summary or probe was not sent: the run's budget (`max_cost`) was reached.
    Budget,
}

impl PairFailure {
    /// A resume runs the pair again: what failed was the cache, the endpoint or the external
    /// program (fixed since, perhaps), not the pair.
    pub fn is_retryable(self) -> bool {
        matches!(self, PairFailure::CacheMiss | PairFailure::Endpoint | PairFailure::Strategy | PairFailure::Budget)
    }
}

/// A pair either finished with metrics or failed with an error (the run goes on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PairOutcome {
    Ok(Box<PairMetrics>),
    Failed { error: String },
}

/// Everything measured while replaying one conversation under one configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairMetrics {
    /// Model calls replayed (one per recorded assistant message).
    pub calls: u64,
    pub compactions: u64,
    /// Calls whose request was still over the window after every compaction attempt.
    pub overflows: u64,
    /// Invariant violations found on requests and compactions, all kinds.
    pub violations: u64,
    /// Violations by kind (`ViolationKind::as_str`).
    pub violations_by_kind: BTreeMap<String, u64>,
    /// The strategy's trigger thresholds as it reported them at the first call, on that
    /// call's context (label, tokens on the strategy's own meter): what the report draws, so
    /// a report of an old run shows the thresholds it ran with. Empty when it has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<(String, u64)>,
    /// Violations on tool calls the recording itself leaves unpaired (a conversation replayed
    /// with `--allow-invalid`): the recording's own, counted here and in no other column.
    #[serde(default)]
    pub recording_violations: u64,
    /// Requests the OpenAI Chat Completions API would refuse ([`compaction::check_request`]).
    #[serde(default)]
    pub rejected_requests_openai: u64,
    /// Requests the Anthropic Messages API would refuse.
    #[serde(default)]
    pub rejected_requests_anthropic: u64,
    /// Refused requests by provider and rule (`anthropic-messages/first_not_user`): how many
    /// requests broke that rule.
    #[serde(default)]
    pub rejections_by_rule: BTreeMap<String, u64>,
    /// The first refused request: its call and the rules it broke (`provider/rule`), when one
    /// was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_rule_rejection: Option<(u32, Vec<String>)>,
    /// Violations both providers accept (every kind but a tool result without its call and a
    /// call without its result): alternation breaks, summaries at odd places, a document's
    /// deliberate deviations.
    #[serde(default)]
    pub findings: u64,
    /// Largest request, exact tokens.
    pub peak_tokens: u64,
    /// Sum of request tokens over all calls, exact.
    pub input_tokens: u64,
    /// Sum of request tokens served from the provider's prefix cache.
    pub cached_tokens: u64,
    /// Sum of recorded output tokens (the assistant messages), exact.
    pub output_tokens: u64,
    /// Sum of request tokens had nothing been compacted (for the compression ratio).
    pub uncompacted_input_tokens: u64,
    /// Exact tokens of the final context.
    pub final_tokens: u64,
    pub summarizer_calls: u64,
    pub summarizer_failures: u64,
    pub summarizer_input_tokens: u64,
    pub summarizer_output_tokens: u64,
    /// Summarizer input tokens its provider served from its prompt cache.
    #[serde(default)]
    pub summarizer_cached_tokens: u64,
    /// Compactions planned again with the reactive trigger because a summary was rejected as
    /// over the summarizer's context window.
    #[serde(default)]
    pub summarizer_context_retries: u64,
    /// Summaries and probes the response cache could not answer in mode `only`; a pair with
    /// any is recorded as failed.
    #[serde(default)]
    pub cache_misses: u64,
    /// Summaries and probes whose model request failed at the endpoint (unreachable, refused,
    /// 401/403, 5xx or rate limited after every retry, not a model's answer); with
    /// `on_llm_error = "fail"` a pair with any is recorded as failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub endpoint_failures: u64,
    /// Summaries and probes whose request the run's budget (`max_cost`) refused; a pair with
    /// any is recorded as failed, and a resume runs it again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub budget_refusals: u64,
    /// The first of those failures, as the client reported it (the key scrubbed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_error: Option<String>,
    /// Request tokens written to the provider's prefix cache (the Anthropic profile writes the
    /// uncached part of every cacheable request).
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Cost of the replayed calls plus summarizer calls, in US dollars; `None` when the
    /// experiment sets no price (cost not measured).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// The compaction calls' share of `cost_usd` (every summary call, `recorded`'s included;
    /// none after the first rejected call under `overflow = "fail"`).
    #[serde(default)]
    pub summary_cost_usd: Option<f64>,
    /// The first call a provider would have rejected (its request over the window after every
    /// compaction attempt), when there was one. Under `overflow = "fail"` the conversation ends
    /// there: probes asked after it score 0, and it and later calls are not billed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_rejected_call: Option<u32>,
    /// What ended the conversation at `first_rejected_call`: `window` (over the window after
    /// every compaction attempt) or the target provider's refused rules
    /// (`anthropic-messages/unanswered_tool_call`, `;`-joined). `None` when nothing did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_because: Option<String>,
    /// Why the strategy cannot operate at this window ([`compaction::Strategy::can_operate`]);
    /// `None` when it can. The configuration is reported as inapplicable and never ranked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inapplicable_reason: Option<String>,
    /// Requests that lacked the most recent user message (the live request): neither it nor a
    /// copy of its text was in the context sent.
    #[serde(default)]
    pub latest_user_message_dropped: u64,
    /// User directives a summary states that no user message holds (see
    /// `runner::directives`), each with the summary's sentence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fabricated_directives: Vec<FabricatedDirective>,
    /// Mean probe score (0..1) under the run's overflow policy; `None` when the conversation
    /// has no probes.
    pub retention: Option<f64>,
    /// Mean probe score as if every request had been sent (rejected ones included): the
    /// replay's figure under `overflow = "continue"`.
    #[serde(default)]
    pub retention_if_sent: Option<f64>,
    /// Mean score of at-risk probes; `None` when no probe was at risk.
    pub at_risk_retention: Option<f64>,
    pub probes: Vec<ProbeScore>,
    /// Per probe, in the order of `probes`: the compaction rounds (calls that compacted) its
    /// source message went through before it was asked. Empty in records written before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe_compactions: Vec<u32>,
    pub compaction_events: Vec<CompactionRecord>,
    /// Next-action readiness: the mean over the compactions whose next action needs an
    /// identifier from earlier ([`NextAction::ready`]); `None` when none does (a pair that
    /// never compacted included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action_ready: Option<f64>,
    /// The compactions `next_action_ready` is over.
    #[serde(default)]
    pub next_action_compactions: u64,
    /// Compactions whose next action repeats a failed call whose result the context lost.
    #[serde(default)]
    pub repeat_risk_failed: u64,
    /// Compactions whose next action re-reads an unchanged file whose read the context lost.
    #[serde(default)]
    pub repeat_risk_reread: u64,
    /// Next-action agreement with a model ([`AgreementFigures`]); `None` when the experiment
    /// does not ask one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action_agreement: Option<AgreementFigures>,
    /// One point per call: the sawtooth.
    pub timeline: Vec<CallPoint>,
    /// Wall time of the replay, in milliseconds (not part of any comparison).
    pub elapsed_ms: u64,
}

/// A user directive a summary states that no user message of the conversation so far holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricatedDirective {
    /// The call whose compaction wrote the summary.
    pub call: u32,
    /// What the summary attributes to the user.
    pub directive: String,
    /// The summary's sentence that states it.
    pub sentence: String,
    /// The person's sentence nearest to it (most content words shared), empty when none
    /// shares a word: beside the flag, so a reader can tell an invention from a paraphrase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nearest: String,
}

/// One model call of the replay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CallPoint {
    /// 0-based call number.
    pub call: u32,
    /// Index of the recorded assistant message this call produced.
    pub message_index: usize,
    /// Exact request tokens as sent.
    pub request_tokens: u64,
    /// The strategy's own estimate of the same request.
    pub estimate: u64,
    /// Request tokens served from the prefix cache.
    pub cached_tokens: u64,
    /// A compaction ran before this call.
    pub compacted: bool,
    /// The request was over the window (a real API would have rejected it).
    pub overflow: bool,
    /// At the trigger check before this call (before any compaction): the exact tokens of the
    /// context and the strategy's own estimate of them. Zero for a strategy without a
    /// threshold (it never checks).
    #[serde(default)]
    pub check_tokens: u64,
    #[serde(default)]
    pub check_estimate: u64,
}

/// One compaction event of the replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// The call it ran before.
    pub call: u32,
    pub trigger: Trigger,
    /// The strategy's step (`P2`, `prune`, `summarize`, ...).
    pub step: String,
    /// Exact tokens before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// The strategy's own estimate before and after.
    pub estimate_before: u64,
    pub estimate_after: u64,
    pub messages_before: usize,
    pub messages_after: usize,
    pub removed: usize,
    pub masked: usize,
    pub round: Option<u32>,
    /// The failure path taken, if a summary failed.
    pub fallback: Option<String>,
    pub shortfall: Option<u64>,
    /// The summary text(s) inserted, joined by a blank line.
    pub summary: String,
    /// Violations this compaction introduced.
    pub violations: Vec<String>,
    /// The recorded action right after it, and what of it the context left (see
    /// [`NextAction`]); absent in records written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<NextAction>,
    /// What a model proposed as the next action with the context the call's compactions left
    /// and with the full history, and whether they agree (see [`NextActionAgreement`]); on the
    /// last compaction of a call, when the experiment asks a model (`next_action = "llm"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<NextActionAgreement>,
}

/// A model's answer to "what do you do next?" (`runner::replay::next_action::llm`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelAction {
    /// A tool call: the tool's name and its arguments (a JSON object as text).
    Tool { name: String, arguments: String },
    /// A reply to the user.
    Reply { text: String },
    /// An answer that is neither (kept raw, cut to a few thousand characters): never agreement.
    Unparsed { raw: String },
    /// The request failed (its error kind and message).
    Failed { error: String },
}

impl ModelAction {
    /// A tool call or a reply: an answer agreement can be read on.
    pub fn is_action(&self) -> bool {
        matches!(self, ModelAction::Tool { .. } | ModelAction::Reply { .. })
    }
    /// The tool's name, `reply`, `unparsed` or `failed`: what `compactions.csv` shows.
    pub fn label(&self) -> &str {
        match self {
            ModelAction::Tool { name, .. } => name,
            ModelAction::Reply { .. } => "reply",
            ModelAction::Unparsed { .. } => "unparsed",
            ModelAction::Failed { .. } => "failed",
        }
    }
}

/// Next-action agreement at one compaction point: the model's action with the compacted
/// context and with the full (uncompacted) history at the same point, and whether the first
/// agrees (same tool, the key arguments) with the recorded action and with the second.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextActionAgreement {
    pub compacted: ModelAction,
    pub full: ModelAction,
    /// `None` when the compacted answer is not an action (unparsed or failed).
    pub agrees_recorded: Option<bool>,
    /// `None` when either answer is not an action.
    pub agrees_full: Option<bool>,
    /// The full-history answer agrees with the recorded action (the model's own ceiling at
    /// this point); `None` when it is not an action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_agrees_recorded: Option<bool>,
}

/// A pair's next-action agreement figures, over the calls that compacted (present only when
/// the experiment asks a model).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgreementFigures {
    /// The share of compaction points whose compacted-context answer agrees with the recorded
    /// action, over the points where that answer is an action; `None` over no point (a pair
    /// that never compacted included).
    pub agree_recorded: Option<f64>,
    pub agree_recorded_compactions: u64,
    /// The share whose compacted-context answer agrees with the full-history answer, over the
    /// points where both are actions.
    pub agree_full: Option<f64>,
    pub agree_full_compactions: u64,
    /// Answers (compacted and full-history) at the pair's points that were not an action.
    pub unparsed: u64,
}

/// The recorded next assistant action after a compaction, read against the context the
/// compaction left: the identifiers it needs from earlier in the conversation (in messages
/// before the compaction, not in the system prompt or the live user message) and which of
/// them the context no longer holds, and whether it repeats work the context lost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextAction {
    /// The recorded assistant message of the action.
    pub message: usize,
    /// Its tools' names, `;`-joined; empty for a reply to the user.
    pub tools: String,
    /// Identifiers it needs from earlier in the conversation.
    pub needed: u32,
    /// Of those, the ones the context after the compaction does not hold.
    pub missing: Vec<String>,
    /// It repeats a call that failed before the compaction, with the same arguments, and
    /// the context lost that failure's result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat_failed: bool,
    /// It reads a file read before the compaction and not changed since, and the context
    /// lost that read's result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat_reread: bool,
}

impl NextAction {
    /// The share of the needed identifiers the context holds; `None` (not applicable) when
    /// the action needs none.
    pub fn ready(&self) -> Option<f64> {
        (self.needed > 0).then(|| f64::from(self.needed - self.missing.len() as u32) / f64::from(self.needed))
    }
}

impl CompactionRecord {
    /// The record of a compaction before call `call`: what the strategy's `event` says it did,
    /// with the exact tokens of the context before and after (`tokens`) and the violations
    /// the compaction introduced.
    pub fn from_event(
        call: u32,
        trigger: Trigger,
        event: &CompactionEvent,
        tokens: (u64, u64),
        violations: &[Violation],
    ) -> CompactionRecord {
        CompactionRecord {
            call,
            trigger,
            step: event.step.clone(),
            tokens_before: tokens.0,
            tokens_after: tokens.1,
            estimate_before: event.estimate_before,
            estimate_after: event.estimate_after,
            messages_before: event.messages_before,
            messages_after: event.messages_after,
            removed: event.removed,
            masked: event.masked,
            round: event.round,
            fallback: event.fallback.clone(),
            shortfall: event.shortfall,
            summary: event.summaries.join("\n\n"),
            violations: violations.iter().map(|v| format!("{}: {v}", v.kind().as_str())).collect(),
            next_action: None,
            agreement: None,
        }
    }
}

/// Where a fact was found in the compacted context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundIn {
    /// In a recorded message kept verbatim.
    Verbatim,
    /// In a summary.
    Summary,
    /// In another message (a masked placeholder, an inserted digest).
    Other,
    /// Nowhere: lost.
    Lost,
}

/// One probe's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeScore {
    pub probe_id: String,
    pub kind: ProbeKind,
    /// The probe's tier; absent in records written before tiers: [`ProbeScore::tier`] reads
    /// the default of its kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// How many recorded messages were in the replay when it was asked.
    pub asked_at: usize,
    /// The checkpoint it was asked at: the percentage of the conversation's calls made (25,
    /// 50, 75 or 100 for a probe asked at every checkpoint).
    #[serde(default = "full")]
    pub checkpoint: u32,
    /// The probe's source message was no longer verbatim in the context.
    pub at_risk: bool,
    /// Score in 0..1 (the share of facts retained, or the LLM judge's normalized grade).
    pub score: f64,
    /// Per fact: where it was found.
    pub facts: Vec<FoundIn>,
    /// Who scored it.
    pub judge: String,
    /// Asked after the conversation's first rejected call under `overflow = "fail"`: `score`
    /// is 0 (the agent has nothing) and this is the score the judge gave as if every request
    /// had been sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_sent: Option<f64>,
    /// LLM judge only: the per-dimension grades (0-5), the answer, and the raw verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<serde_json::Value>,
    /// The judge's verdict as a type: scored, or unscored and why. The LLM judge's detail in
    /// `llm` says more; nothing reads its keys to decide.
    #[serde(default, skip_serializing_if = "Verdict::is_plain")]
    pub verdict: Verdict,
    /// Offline judge only: per fact, where it was credited (`None` for a fact not found).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Option<Evidence>>,
    /// An answer key ([`compaction::ProbeOrigin::Written`]): asked on the request of the first
    /// call at or after its checkpoint, counted in state retention, not in the probes' figures.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub written: bool,
}

/// Where a judge found a fact: the alias as it matched, the context entry and, when that entry
/// is a recorded message kept verbatim, its index; the span is in characters of the entry's
/// text as the judge reads it (content, then tool calls).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub alias: String,
    pub entry: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<usize>,
    pub start: usize,
    pub end: usize,
}

impl Evidence {
    /// One line: `"alias" @ message 12 [30..38]` (or `@ entry 3` for a summary or other entry).
    pub fn describe(&self) -> String {
        match self.message {
            Some(m) => format!("\"{}\" @ message {m} [{}..{}]", self.alias, self.start, self.end),
            None => format!("\"{}\" @ entry {} [{}..{}]", self.alias, self.entry, self.start, self.end),
        }
    }
}

impl ProbeScore {
    /// The probe's tier: the one recorded, else the default of its kind ([`Tier::of_kind`]).
    pub fn tier(&self) -> Tier {
        self.tier.unwrap_or_else(|| Tier::of_kind(self.kind))
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The checkpoint of a record written before checkpoints: the end.
fn full() -> u32 {
    100
}

/// A probe's text as the run saw it: the report shows it from the run folder alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeText {
    /// The dataset label of its conversation (as in every record).
    pub dataset: String,
    pub conversation_id: String,
    pub probe_id: String,
    pub question: String,
    pub answer: String,
    /// Each fact's accepted aliases.
    pub facts: Vec<Vec<String>>,
}

/// A judge's verdict on one probe.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Verdict {
    /// Scored (`score` is the judge's), with no completion lost on the way.
    #[default]
    Scored,
    /// Scored, but some of its completions failed (a repeat of the grade): `cache_miss` when
    /// the response cache had no answer (mode `only`), `endpoint` with the error when the model
    /// endpoint failed.
    Partial {
        #[serde(default)]
        cache_miss: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint: Option<String>,
        /// A completion was not sent: the run's budget was reached.
        #[serde(default, skip_serializing_if = "is_false")]
        over_budget: bool,
    },
    /// Not scored (`score` is a placeholder 0): why, and whether the cache or the endpoint
    /// was the cause.
    Unscored {
        reason: String,
        #[serde(default)]
        cache_miss: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint: Option<String>,
        /// A completion was not sent: the run's budget was reached.
        #[serde(default, skip_serializing_if = "is_false")]
        over_budget: bool,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Verdict {
    /// Scored with nothing to say (what a record omits).
    pub fn is_plain(&self) -> bool {
        *self == Verdict::Scored
    }

    /// A completion for this probe met a response cache miss.
    pub fn cache_miss(&self) -> bool {
        matches!(self, Verdict::Partial { cache_miss: true, .. } | Verdict::Unscored { cache_miss: true, .. })
    }

    /// A completion for this probe was not sent: the run's budget was reached.
    pub fn over_budget(&self) -> bool {
        matches!(self, Verdict::Partial { over_budget: true, .. } | Verdict::Unscored { over_budget: true, .. })
    }

    /// The endpoint error a completion for this probe met, if any.
    pub fn endpoint_fault(&self) -> Option<&str> {
        match self {
            Verdict::Partial { endpoint, .. } | Verdict::Unscored { endpoint, .. } => endpoint.as_deref(),
            Verdict::Scored => None,
        }
    }
}

/// False for a probe the judge could not score (its `score` is a placeholder 0). A record
/// written before verdicts were typed says so in its LLM detail.
pub fn is_scored(score: &ProbeScore) -> bool {
    match &score.verdict {
        Verdict::Unscored { .. } => false,
        Verdict::Partial { .. } => true,
        Verdict::Scored => {
            score.llm.as_ref().and_then(|v| v.get("scored")).and_then(serde_json::Value::as_bool).unwrap_or(true)
        }
    }
}
