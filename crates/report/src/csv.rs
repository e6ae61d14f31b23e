//! The CSV views of a run: `results.csv`, `summary.csv`, `probes.csv`, `compactions.csv`.
//!
//! Each file comes from one serde row struct whose field order is the column order, pinned
//! by the `*_HEADER` constants (a test checks that the structs and the constants agree, and
//! another pins the constants). A file always has its header, even with no rows. Empty
//! fields mean "not applicable" (a failed pair's metrics, a retention without probes); no
//! field is ever `NaN`. Ratios are rounded to 6 decimals and dollars to 8, written without
//! exponents.

use std::path::Path;

use runlog::experiment::{canonical_json, Configuration};
use runlog::record::{CompactionRecord, FoundIn, PairOutcome, PairRecord};
use serde::{Serialize, Serializer};

use crate::summary::ConfigSummary;
use crate::ReportError;

/// Columns of `results.csv`.
pub const RESULTS_HEADER: [&str; 47] = [
    "conversation_id",
    "dataset",
    "strategy",
    "config_id",
    "params",
    "window",
    "status",
    "error",
    "calls",
    "compactions",
    "overflows",
    "violations",
    "peak_tokens",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "uncompacted_input_tokens",
    "final_tokens",
    "summarizer_calls",
    "summarizer_failures",
    "cost_usd",
    "summary_cost_usd",
    "probes",
    "retention",
    "at_risk_probes",
    "at_risk_retention",
    "cache_hit_rate",
    "judge",
    "rejected_requests_openai",
    "rejected_requests_anthropic",
    "findings",
    "completed",
    "first_rejected_call",
    "recording_violations",
    "rejected_because",
    "applicable",
    "latest_user_message_dropped",
    "fabricated_directives",
    "next_action_ready",
    "next_action_compactions",
    "repeat_risk_failed",
    "repeat_risk_reread",
    "next_action_agree_recorded",
    "next_action_agree_recorded_compactions",
    "next_action_agree_full",
    "next_action_agree_full_compactions",
    "next_action_unparsed",
];

/// Columns of `summary.csv`.
pub const SUMMARY_HEADER: [&str; 83] = [
    "config_id",
    "strategy",
    "params",
    "window",
    "conversations",
    "failed",
    "retention_mean",
    "retention_ci_low",
    "retention_ci_high",
    "at_risk_conversations",
    "at_risk_retention_mean",
    "at_risk_retention_ci_low",
    "at_risk_retention_ci_high",
    "retention_task",
    "retention_recall",
    "retention_artifact",
    "retention_decision",
    "retention_continuation",
    "compression_ratio",
    "overflow_rate",
    "calls",
    "compactions_mean",
    "violations",
    "peak_tokens_max",
    "cost_usd_mean",
    "cache_hit_rate",
    "at_risk_retention_task",
    "at_risk_retention_recall",
    "at_risk_retention_artifact",
    "at_risk_retention_decision",
    "at_risk_retention_continuation",
    "judge",
    "rejected_requests_openai",
    "rejected_requests_anthropic",
    "findings",
    "summary_cost_usd_mean",
    "dataset",
    "completion_rate",
    "compacted_conversations",
    "retention_if_sent_mean",
    "paired_at_risk_retention",
    "paired_at_risk_probes",
    "estimate_error_p50",
    "estimate_error_p95",
    "applicable",
    "inapplicable_reason",
    "latest_user_message_dropped",
    "fabricated_directives",
    "post_compaction_growth",
    "median_calls_between_compactions",
    "retention_critical",
    "retention_useful",
    "retention_detail",
    "probes_critical",
    "probes_useful",
    "probes_detail",
    "state_retention",
    "state_retention_ci_low",
    "state_retention_ci_high",
    "state_conversations",
    "state_keys",
    "state_retention_critical",
    "state_keys_critical",
    "state_retention_useful",
    "state_keys_useful",
    "state_at_risk_retention",
    "state_at_risk_keys",
    "next_action_ready",
    "next_action_ready_ci_low",
    "next_action_ready_ci_high",
    "next_action_conversations",
    "next_action_compactions",
    "repeat_risk_failed",
    "repeat_risk_reread",
    "next_action_agree_recorded",
    "next_action_agree_recorded_ci_low",
    "next_action_agree_recorded_ci_high",
    "next_action_agree_recorded_compactions",
    "next_action_agree_full",
    "next_action_agree_full_ci_low",
    "next_action_agree_full_ci_high",
    "next_action_agree_full_compactions",
    "next_action_unparsed",
];

/// Columns of `probes.csv`.
pub const PROBES_HEADER: [&str; 20] = [
    "conversation_id",
    "dataset",
    "config_id",
    "strategy",
    "window",
    "probe_id",
    "kind",
    "asked_at",
    "checkpoint",
    "at_risk",
    "score",
    "facts_retained",
    "facts_total",
    "found_in",
    "judge",
    "score_spread",
    "scored_repeats",
    "evidence",
    "tier",
    "written",
];

/// Columns of `compactions.csv`.
pub const COMPACTIONS_HEADER: [&str; 31] = [
    "conversation_id",
    "dataset",
    "config_id",
    "strategy",
    "window",
    "call",
    "trigger",
    "step",
    "tokens_before",
    "tokens_after",
    "estimate_before",
    "estimate_after",
    "messages_before",
    "messages_after",
    "removed",
    "masked",
    "round",
    "fallback",
    "shortfall",
    "violations",
    "summary",
    "next_action_message",
    "next_action_tools",
    "next_action_needed",
    "next_action_ready",
    "next_action_missing",
    "repeat_risk",
    "next_action_model_compacted",
    "next_action_model_full",
    "next_action_agrees_recorded",
    "next_action_agrees_full",
];

/// Round to `decimals` and write without an exponent; non-finite and `None` are empty.
fn decimal<S: Serializer>(value: &Option<f64>, decimals: i32, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) if v.is_finite() => {
            let scale = 10f64.powi(decimals);
            let rounded = (v * scale).round() / scale;
            // `-0` reads oddly in a table.
            let rounded = if rounded == 0.0 { 0.0 } else { rounded };
            s.serialize_str(&rounded.to_string())
        }
        _ => s.serialize_none(),
    }
}

pub(crate) fn ratio6<S: Serializer>(value: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    decimal(value, 6, s)
}

fn usd8<S: Serializer>(value: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    decimal(value, 8, s)
}

/// A row of `results.csv`: one (conversation, configuration) pair.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ResultRow {
    pub conversation_id: String,
    pub dataset: String,
    pub strategy: String,
    pub config_id: String,
    /// The parameters as written, canonical JSON.
    pub params: String,
    pub window: Option<u64>,
    /// `ok` or `failed`.
    pub status: String,
    pub error: String,
    pub calls: Option<u64>,
    pub compactions: Option<u64>,
    pub overflows: Option<u64>,
    pub violations: Option<u64>,
    pub peak_tokens: Option<u64>,
    pub input_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub uncompacted_input_tokens: Option<u64>,
    pub final_tokens: Option<u64>,
    pub summarizer_calls: Option<u64>,
    pub summarizer_failures: Option<u64>,
    /// Empty when the experiment sets no price (cost not measured).
    #[serde(serialize_with = "usd8")]
    pub cost_usd: Option<f64>,
    #[serde(serialize_with = "usd8")]
    pub summary_cost_usd: Option<f64>,
    pub probes: Option<u64>,
    #[serde(serialize_with = "ratio6")]
    pub retention: Option<f64>,
    pub at_risk_probes: Option<u64>,
    #[serde(serialize_with = "ratio6")]
    pub at_risk_retention: Option<f64>,
    /// Cached request tokens / request tokens; empty with no request tokens.
    #[serde(serialize_with = "ratio6")]
    pub cache_hit_rate: Option<f64>,
    /// The judge that scored the pair's probes.
    pub judge: String,
    pub rejected_requests_openai: Option<u64>,
    pub rejected_requests_anthropic: Option<u64>,
    pub findings: Option<u64>,
    /// No call was rejected (empty for a failed pair).
    pub completed: Option<bool>,
    /// The first call a provider would have rejected; empty when none was.
    pub first_rejected_call: Option<u32>,
    /// Violations on tool calls the recording itself leaves unpaired (replayed with
    /// `--allow-invalid`): charged to no strategy, so in none of the columns above.
    pub recording_violations: Option<u64>,
    /// What ended the conversation at `first_rejected_call`: `window`, or the target
    /// provider's refused rules.
    pub rejected_because: String,
    /// The strategy can operate at this window (empty for a failed pair).
    pub applicable: Option<bool>,
    /// Requests sent without the most recent user message.
    pub latest_user_message_dropped: Option<u64>,
    /// User directives the pair's summaries stated that no user message holds.
    pub fabricated_directives: Option<u64>,
    /// Mean next-action readiness over the pair's compactions whose next action needs an
    /// identifier from earlier; empty when none does (never compacted included).
    #[serde(serialize_with = "ratio6")]
    pub next_action_ready: Option<f64>,
    /// The compactions it is over.
    pub next_action_compactions: Option<u64>,
    /// Compactions whose next action repeats a failed call the context lost.
    pub repeat_risk_failed: Option<u64>,
    /// Compactions whose next action re-reads an unchanged file the context lost.
    pub repeat_risk_reread: Option<u64>,
    /// Next-action agreement with a model (`next_action = "llm"`; every column empty without
    /// it): the share of the calls that compacted whose answer with the compacted context
    /// agrees with the recorded action, over those where that answer is an action (empty over
    /// none: never compacted included).
    #[serde(serialize_with = "ratio6")]
    pub next_action_agree_recorded: Option<f64>,
    pub next_action_agree_recorded_compactions: Option<u64>,
    /// The share whose answer with the compacted context agrees with the answer with the full
    /// history, over those where both are actions.
    #[serde(serialize_with = "ratio6")]
    pub next_action_agree_full: Option<f64>,
    pub next_action_agree_full_compactions: Option<u64>,
    /// Answers (compacted and full history) that were not an action.
    pub next_action_unparsed: Option<u64>,
}

impl ResultRow {
    pub fn from_record(r: &PairRecord) -> ResultRow {
        let mut row = ResultRow {
            conversation_id: r.conversation_id.clone(),
            dataset: r.dataset.clone(),
            strategy: r.strategy.clone(),
            config_id: r.config_id.clone(),
            params: canonical_json(&r.params),
            window: (r.window > 0).then_some(r.window),
            judge: r.judge.clone(),
            ..ResultRow::default()
        };
        match &r.outcome {
            PairOutcome::Failed { error } => {
                row.status = "failed".into();
                row.error = error.clone();
            }
            PairOutcome::Ok(m) => {
                row.status = "ok".into();
                row.calls = Some(m.calls);
                row.compactions = Some(m.compactions);
                row.overflows = Some(m.overflows);
                row.violations = Some(m.violations);
                row.peak_tokens = Some(m.peak_tokens);
                row.input_tokens = Some(m.input_tokens);
                row.cached_tokens = Some(m.cached_tokens);
                row.output_tokens = Some(m.output_tokens);
                row.uncompacted_input_tokens = Some(m.uncompacted_input_tokens);
                row.final_tokens = Some(m.final_tokens);
                row.summarizer_calls = Some(m.summarizer_calls);
                row.summarizer_failures = Some(m.summarizer_failures);
                row.cost_usd = m.cost_usd;
                row.summary_cost_usd = m.summary_cost_usd;
                row.rejected_requests_openai = Some(m.rejected_requests_openai);
                row.rejected_requests_anthropic = Some(m.rejected_requests_anthropic);
                row.findings = Some(m.findings);
                row.probes = Some(m.probes.len() as u64);
                row.retention = m.retention;
                row.at_risk_probes = Some(m.probes.iter().filter(|p| p.at_risk).count() as u64);
                row.at_risk_retention = m.at_risk_retention;
                row.cache_hit_rate = (m.input_tokens > 0).then(|| m.cached_tokens as f64 / m.input_tokens as f64);
                row.completed = Some(m.first_rejected_call.is_none());
                row.first_rejected_call = m.first_rejected_call;
                row.recording_violations = Some(m.recording_violations);
                row.rejected_because = m.rejected_because.clone().unwrap_or_default();
                row.applicable = Some(m.inapplicable_reason.is_none());
                row.latest_user_message_dropped = Some(m.latest_user_message_dropped);
                row.fabricated_directives = Some(m.fabricated_directives.len() as u64);
                row.next_action_ready = m.next_action_ready;
                row.next_action_compactions = Some(m.next_action_compactions);
                row.repeat_risk_failed = Some(m.repeat_risk_failed);
                row.repeat_risk_reread = Some(m.repeat_risk_reread);
                if let Some(a) = &m.next_action_agreement {
                    row.next_action_agree_recorded = a.agree_recorded;
                    row.next_action_agree_recorded_compactions = Some(a.agree_recorded_compactions);
                    row.next_action_agree_full = a.agree_full;
                    row.next_action_agree_full_compactions = Some(a.agree_full_compactions);
                    row.next_action_unparsed = Some(a.unparsed);
                }
            }
        }
        row
    }
}

/// A row of `summary.csv`: one configuration.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SummaryRow {
    pub config_id: String,
    pub strategy: String,
    pub params: String,
    /// Empty when each conversation used its own window.
    pub window: Option<u64>,
    pub conversations: usize,
    pub failed: usize,
    #[serde(serialize_with = "ratio6")]
    pub retention_mean: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_ci_low: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_ci_high: Option<f64>,
    pub at_risk_conversations: usize,
    #[serde(serialize_with = "ratio6")]
    pub at_risk_retention_mean: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub at_risk_retention_ci_low: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub at_risk_retention_ci_high: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_task: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_recall: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_artifact: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_decision: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_continuation: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub compression_ratio: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub overflow_rate: Option<f64>,
    pub calls: u64,
    #[serde(serialize_with = "ratio6")]
    pub compactions_mean: Option<f64>,
    pub violations: u64,
    pub peak_tokens_max: Option<u64>,
    #[serde(serialize_with = "usd8")]
    pub cost_usd_mean: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub cache_hit_rate: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub at_risk_retention_task: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub at_risk_retention_recall: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub at_risk_retention_artifact: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub at_risk_retention_decision: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub at_risk_retention_continuation: Option<f64>,
    /// The judges that scored the configuration's pairs, `;`-separated.
    pub judge: String,
    pub rejected_requests_openai: u64,
    pub rejected_requests_anthropic: u64,
    pub findings: u64,
    #[serde(serialize_with = "usd8")]
    pub summary_cost_usd_mean: Option<f64>,
    /// The dataset the row is over, or `all` for the pooled row.
    pub dataset: String,
    #[serde(serialize_with = "ratio6")]
    pub completion_rate: Option<f64>,
    pub compacted_conversations: usize,
    #[serde(serialize_with = "ratio6")]
    pub retention_if_sent_mean: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub paired_at_risk_retention: Option<f64>,
    pub paired_at_risk_probes: usize,
    #[serde(serialize_with = "ratio6")]
    pub estimate_error_p50: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub estimate_error_p95: Option<f64>,
    /// The strategy can operate at this window; an inapplicable configuration is never ranked.
    pub applicable: bool,
    /// Why not (empty when applicable).
    pub inapplicable_reason: String,
    pub latest_user_message_dropped: u64,
    pub fabricated_directives: u64,
    /// Size after the last compaction round over size after the first, minus 1 (mean over
    /// conversations with two rounds or more).
    #[serde(serialize_with = "ratio6")]
    pub post_compaction_growth: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub median_calls_between_compactions: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_critical: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_useful: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub retention_detail: Option<f64>,
    /// Probe-checkpoint pairs of each tier (the denominators).
    pub probes_critical: usize,
    pub probes_useful: usize,
    pub probes_detail: usize,
    /// State retention: the answer keys' mean score per conversation, then over the
    /// conversations with keys (`state_conversations`), with its bootstrap interval; empty
    /// where the dataset has no keys.
    #[serde(serialize_with = "ratio6")]
    pub state_retention: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub state_retention_ci_low: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub state_retention_ci_high: Option<f64>,
    pub state_conversations: usize,
    /// Keys scored (critical and useful): the denominator.
    pub state_keys: usize,
    #[serde(serialize_with = "ratio6")]
    pub state_retention_critical: Option<f64>,
    pub state_keys_critical: usize,
    #[serde(serialize_with = "ratio6")]
    pub state_retention_useful: Option<f64>,
    pub state_keys_useful: usize,
    /// Over the keys none of whose source messages was in the context verbatim.
    #[serde(serialize_with = "ratio6")]
    pub state_at_risk_retention: Option<f64>,
    /// Keys at risk: its denominator.
    pub state_at_risk_keys: usize,
    /// Next-action readiness: each conversation's mean over its compactions whose next action
    /// needs an identifier from earlier, then the mean over those conversations, with its
    /// bootstrap interval; empty when no compaction's next action needs one.
    #[serde(serialize_with = "ratio6")]
    pub next_action_ready: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub next_action_ready_ci_low: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub next_action_ready_ci_high: Option<f64>,
    pub next_action_conversations: usize,
    /// The compactions it rests on.
    pub next_action_compactions: u64,
    /// Compactions whose next action repeats a failed call, or re-reads an unchanged file,
    /// whose result the context lost, summed over conversations.
    pub repeat_risk_failed: u64,
    pub repeat_risk_reread: u64,
    /// Next-action agreement with a model: each conversation's share of agreeing compaction
    /// points, then the mean over the conversations with one, with its bootstrap interval;
    /// the points each rests on, summed; every column empty when no model was asked.
    #[serde(serialize_with = "ratio6")]
    pub next_action_agree_recorded: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub next_action_agree_recorded_ci_low: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub next_action_agree_recorded_ci_high: Option<f64>,
    pub next_action_agree_recorded_compactions: Option<u64>,
    #[serde(serialize_with = "ratio6")]
    pub next_action_agree_full: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub next_action_agree_full_ci_low: Option<f64>,
    #[serde(serialize_with = "ratio6")]
    pub next_action_agree_full_ci_high: Option<f64>,
    pub next_action_agree_full_compactions: Option<u64>,
    pub next_action_unparsed: Option<u64>,
}

impl SummaryRow {
    pub fn from_summary(s: &ConfigSummary) -> SummaryRow {
        let [task, recall, artifact, decision, continuation] = s.retention_by_kind;
        let [at_risk_task, at_risk_recall, at_risk_artifact, at_risk_decision, at_risk_continuation] =
            s.at_risk_retention_by_kind;
        let [critical, useful, detail] = s.retention_by_tier;
        SummaryRow {
            config_id: s.config.config_id.clone(),
            dataset: s.dataset.clone(),
            strategy: s.config.strategy.clone(),
            params: canonical_json(&s.config.params),
            window: s.config.window,
            conversations: s.conversations,
            failed: s.failed,
            retention_mean: s.retention.mean,
            retention_ci_low: s.retention.ci.map(|c| c.0),
            retention_ci_high: s.retention.ci.map(|c| c.1),
            at_risk_conversations: s.at_risk_retention.n,
            at_risk_retention_mean: s.at_risk_retention.mean,
            at_risk_retention_ci_low: s.at_risk_retention.ci.map(|c| c.0),
            at_risk_retention_ci_high: s.at_risk_retention.ci.map(|c| c.1),
            retention_task: task,
            retention_recall: recall,
            retention_artifact: artifact,
            retention_decision: decision,
            retention_continuation: continuation,
            compression_ratio: s.compression_ratio,
            overflow_rate: s.overflow_rate,
            calls: s.calls,
            compactions_mean: s.compactions_mean,
            violations: s.violations,
            peak_tokens_max: s.peak_tokens_max,
            cost_usd_mean: s.cost_usd_mean,
            cache_hit_rate: s.cache_hit_rate,
            at_risk_retention_task: at_risk_task,
            at_risk_retention_recall: at_risk_recall,
            at_risk_retention_artifact: at_risk_artifact,
            at_risk_retention_decision: at_risk_decision,
            at_risk_retention_continuation: at_risk_continuation,
            judge: s.judge.clone(),
            rejected_requests_openai: s.rejected_requests_openai,
            rejected_requests_anthropic: s.rejected_requests_anthropic,
            findings: s.findings,
            summary_cost_usd_mean: s.summary_cost_usd_mean,
            completion_rate: s.completion_rate,
            compacted_conversations: s.compacted_conversations,
            retention_if_sent_mean: s.retention_if_sent,
            paired_at_risk_retention: s.paired_at_risk_retention,
            paired_at_risk_probes: s.paired_at_risk_probes,
            estimate_error_p50: s.estimate_error_p50,
            estimate_error_p95: s.estimate_error_p95,
            applicable: s.applicable,
            inapplicable_reason: s.inapplicable_reason.clone(),
            latest_user_message_dropped: s.latest_user_message_dropped,
            fabricated_directives: s.fabricated_directives,
            post_compaction_growth: s.drift.post_compaction_growth,
            median_calls_between_compactions: s.drift.median_calls_between_compactions,
            retention_critical: critical,
            retention_useful: useful,
            retention_detail: detail,
            probes_critical: s.probes_by_tier[0],
            probes_useful: s.probes_by_tier[1],
            probes_detail: s.probes_by_tier[2],
            state_retention: s.state.all.mean,
            state_retention_ci_low: s.state.all.ci.map(|c| c.0),
            state_retention_ci_high: s.state.all.ci.map(|c| c.1),
            state_conversations: s.state.all.n,
            state_keys: s.state.keys,
            state_retention_critical: s.state.critical,
            state_keys_critical: s.state.critical_keys,
            state_retention_useful: s.state.useful,
            state_keys_useful: s.state.useful_keys,
            state_at_risk_retention: s.state.at_risk,
            state_at_risk_keys: s.state.at_risk_keys,
            next_action_ready: s.next_action.ready.mean,
            next_action_ready_ci_low: s.next_action.ready.ci.map(|c| c.0),
            next_action_ready_ci_high: s.next_action.ready.ci.map(|c| c.1),
            next_action_conversations: s.next_action.ready.n,
            next_action_compactions: s.next_action.compactions,
            repeat_risk_failed: s.next_action.repeat_failed,
            repeat_risk_reread: s.next_action.repeat_reread,
            next_action_agree_recorded: s.agreement.as_ref().and_then(|a| a.recorded.mean),
            next_action_agree_recorded_ci_low: s.agreement.as_ref().and_then(|a| a.recorded.ci.map(|c| c.0)),
            next_action_agree_recorded_ci_high: s.agreement.as_ref().and_then(|a| a.recorded.ci.map(|c| c.1)),
            next_action_agree_recorded_compactions: s.agreement.as_ref().map(|a| a.recorded_compactions),
            next_action_agree_full: s.agreement.as_ref().and_then(|a| a.full.mean),
            next_action_agree_full_ci_low: s.agreement.as_ref().and_then(|a| a.full.ci.map(|c| c.0)),
            next_action_agree_full_ci_high: s.agreement.as_ref().and_then(|a| a.full.ci.map(|c| c.1)),
            next_action_agree_full_compactions: s.agreement.as_ref().map(|a| a.full_compactions),
            next_action_unparsed: s.agreement.as_ref().map(|a| a.unparsed),
        }
    }
}

/// A row of `probes.csv`: one probe's score under one pair.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProbeRow {
    pub conversation_id: String,
    pub dataset: String,
    pub config_id: String,
    pub strategy: String,
    pub window: Option<u64>,
    pub probe_id: String,
    pub kind: String,
    pub asked_at: usize,
    /// The checkpoint: the percentage of the conversation's calls made when it was asked.
    pub checkpoint: u32,
    pub at_risk: bool,
    #[serde(serialize_with = "ratio6")]
    pub score: Option<f64>,
    pub facts_retained: usize,
    pub facts_total: usize,
    /// Where each fact was found, `;`-separated, in the probe's fact order.
    pub found_in: String,
    pub judge: String,
    /// The LLM judge's standard deviation over its parsed repeats; 0 for the offline judge
    /// (one deterministic score); empty when no verdict parsed.
    #[serde(serialize_with = "ratio6")]
    pub score_spread: Option<f64>,
    /// Repeats whose verdict parsed; 1 for the offline judge.
    pub scored_repeats: Option<u64>,
    /// Per fact, `;`-separated in fact order, where the judge found it: the alias as it
    /// matched, the message (or context entry) and the character span; empty for a fact lost
    /// and for a judge that records no evidence.
    pub evidence: String,
    /// `critical`, `useful` or `detail`.
    pub tier: String,
    /// An answer key (`true`): counted in state retention, not in the probes' figures.
    pub written: bool,
}

/// A row of `compactions.csv`: one compaction event with its summary text.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CompactionRow {
    pub conversation_id: String,
    pub dataset: String,
    pub config_id: String,
    pub strategy: String,
    pub window: Option<u64>,
    pub call: u32,
    pub trigger: String,
    pub step: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub estimate_before: u64,
    pub estimate_after: u64,
    pub messages_before: usize,
    pub messages_after: usize,
    pub removed: usize,
    pub masked: usize,
    pub round: Option<u32>,
    pub fallback: String,
    pub shortfall: Option<u64>,
    /// Violations this compaction introduced, `;`-separated.
    pub violations: String,
    pub summary: String,
    /// The recorded assistant message of the action after the compaction.
    pub next_action_message: Option<usize>,
    /// Its tools, `;`-separated; empty for a reply.
    pub next_action_tools: String,
    /// Identifiers it needs from earlier in the conversation.
    pub next_action_needed: Option<u32>,
    /// The share of those the context holds; empty when it needs none.
    #[serde(serialize_with = "ratio6")]
    pub next_action_ready: Option<f64>,
    /// The ones the context lost, `;`-separated.
    pub next_action_missing: String,
    /// `failed`, `reread`, both `;`-separated, or empty.
    pub repeat_risk: String,
    /// With a next-action model, on the last compaction of a call: its answer with the
    /// compacted context and with the full history (the tool's name, `reply`, `unparsed` or
    /// `failed`), and whether the first agrees with the recorded action and with the second
    /// (empty where an answer is not an action).
    pub next_action_model_compacted: String,
    pub next_action_model_full: String,
    pub next_action_agrees_recorded: Option<bool>,
    pub next_action_agrees_full: Option<bool>,
}

impl CompactionRow {
    fn from_event(r: &PairRecord, e: &CompactionRecord) -> CompactionRow {
        CompactionRow {
            conversation_id: r.conversation_id.clone(),
            dataset: r.dataset.clone(),
            config_id: r.config_id.clone(),
            strategy: r.strategy.clone(),
            window: (r.window > 0).then_some(r.window),
            call: e.call,
            trigger: e.trigger.as_str().to_string(),
            step: e.step.clone(),
            tokens_before: e.tokens_before,
            tokens_after: e.tokens_after,
            estimate_before: e.estimate_before,
            estimate_after: e.estimate_after,
            messages_before: e.messages_before,
            messages_after: e.messages_after,
            removed: e.removed,
            masked: e.masked,
            round: e.round,
            fallback: e.fallback.clone().unwrap_or_default(),
            shortfall: e.shortfall,
            violations: e.violations.join(";"),
            summary: e.summary.clone(),
            next_action_message: e.next_action.as_ref().map(|a| a.message),
            next_action_tools: e.next_action.as_ref().map(|a| a.tools.clone()).unwrap_or_default(),
            next_action_needed: e.next_action.as_ref().map(|a| a.needed),
            next_action_ready: e.next_action.as_ref().and_then(|a| a.ready()),
            next_action_missing: e.next_action.as_ref().map(|a| a.missing.join(";")).unwrap_or_default(),
            repeat_risk: e
                .next_action
                .as_ref()
                .map(|a| {
                    let risks = [("failed", a.repeat_failed), ("reread", a.repeat_reread)];
                    risks.iter().filter(|(_, on)| *on).map(|(r, _)| *r).collect::<Vec<_>>().join(";")
                })
                .unwrap_or_default(),
            next_action_model_compacted: e
                .agreement
                .as_ref()
                .map(|a| a.compacted.label().to_string())
                .unwrap_or_default(),
            next_action_model_full: e.agreement.as_ref().map(|a| a.full.label().to_string()).unwrap_or_default(),
            next_action_agrees_recorded: e.agreement.as_ref().and_then(|a| a.agrees_recorded),
            next_action_agrees_full: e.agreement.as_ref().and_then(|a| a.agrees_full),
        }
    }
}

fn found_in_str(f: FoundIn) -> &'static str {
    match f {
        FoundIn::Verbatim => "verbatim",
        FoundIn::Summary => "summary",
        FoundIn::Other => "other",
        FoundIn::Lost => "lost",
    }
}

/// The spread of a probe's score over the judge's repeats: the LLM judge's recorded standard
/// deviation, 0 for a judge without repeats (no `llm` detail).
fn score_spread(p: &runlog::record::ProbeScore) -> Option<f64> {
    match &p.llm {
        None => Some(0.0),
        Some(detail) => detail.get("spread").and_then(serde_json::Value::as_f64),
    }
}

/// Repeats whose verdict parsed: the LLM judge's count, 1 for a judge without repeats.
fn scored_repeats(p: &runlog::record::ProbeScore) -> Option<u64> {
    match &p.llm {
        None => Some(1),
        // No count recorded: the answer itself failed, so no verdict was graded.
        Some(detail) => Some(detail.get("scored_repeats").and_then(serde_json::Value::as_u64).unwrap_or(0)),
    }
}

/// The rows of `results.csv`, in record order.
pub fn result_rows(records: &[PairRecord]) -> Vec<ResultRow> {
    records.iter().map(ResultRow::from_record).collect()
}

/// The rows of `probes.csv`, in record order then probe order.
pub fn probe_rows(records: &[PairRecord]) -> Vec<ProbeRow> {
    let mut rows = Vec::new();
    for r in records {
        let PairOutcome::Ok(m) = &r.outcome else { continue };
        for p in &m.probes {
            rows.push(ProbeRow {
                conversation_id: r.conversation_id.clone(),
                dataset: r.dataset.clone(),
                config_id: r.config_id.clone(),
                strategy: r.strategy.clone(),
                window: (r.window > 0).then_some(r.window),
                probe_id: p.probe_id.clone(),
                kind: p.kind.as_str().to_string(),
                asked_at: p.asked_at,
                checkpoint: p.checkpoint,
                at_risk: p.at_risk,
                // An LLM verdict that did not parse is unscored: an empty field, not 0.
                score: runlog::record::is_scored(p).then_some(p.score),
                facts_retained: p.facts.iter().filter(|f| **f != FoundIn::Lost).count(),
                facts_total: p.facts.len(),
                found_in: p.facts.iter().map(|f| found_in_str(*f)).collect::<Vec<_>>().join(";"),
                judge: p.judge.clone(),
                score_spread: score_spread(p),
                scored_repeats: scored_repeats(p),
                evidence: p
                    .evidence
                    .iter()
                    .map(|e| e.as_ref().map(|e| e.describe()).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(";"),
                tier: p.tier().as_str().to_string(),
                written: p.written,
            });
        }
    }
    rows
}

/// The rows of `compactions.csv`, in record order then event order.
pub fn compaction_rows(records: &[PairRecord]) -> Vec<CompactionRow> {
    let mut rows = Vec::new();
    for r in records {
        let PairOutcome::Ok(m) = &r.outcome else { continue };
        rows.extend(m.compaction_events.iter().map(|e| CompactionRow::from_event(r, e)));
    }
    rows
}

/// The rows of `summary.csv`: the pooled row of each configuration in experiment order, then
/// dataset by dataset a row per configuration with records there.
pub fn summary_rows(configurations: &[Configuration], records: &[PairRecord], seed: u64) -> Vec<SummaryRow> {
    crate::summary::summarize(configurations, records, seed).iter().map(SummaryRow::from_summary).collect()
}

/// Write `rows` as CSV to any writer, header first (also with no rows).
pub fn write_rows<W: std::io::Write, T: Serialize>(out: W, header: &[&str], rows: &[T]) -> Result<(), ::csv::Error> {
    let mut w = ::csv::WriterBuilder::new().has_headers(false).from_writer(out);
    w.write_record(header)?;
    // Serialize every row, then write their cells through the formula guard: one writer and
    // one reader for all rows (building a reader per row cost more than the rows).
    let mut all = ::csv::WriterBuilder::new().has_headers(false).flexible(true).from_writer(Vec::new());
    for row in rows {
        all.serialize(row)?;
    }
    let bytes = all.into_inner().map_err(|e| ::csv::Error::from(std::io::Error::other(e.to_string())))?;
    let mut reader = ::csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(bytes.as_slice());
    let mut record = ::csv::StringRecord::new();
    while reader.read_record(&mut record)? {
        for cell in &record {
            w.write_field(guard_formula(cell).as_bytes())?;
        }
        w.write_record(None::<&[u8]>)?;
    }
    w.flush()?;
    Ok(())
}

/// A text cell that a spreadsheet would run as a formula (it starts with `=`, `+`, `-`, `@`,
/// a tab or a carriage return) gets a leading `'`; numbers (`-0.5`) are left as they are.
pub fn guard_formula(cell: &str) -> std::borrow::Cow<'_, str> {
    // NUL and the other control characters but tab and line breaks (an id may hold them) are
    // written as `[U+....]`: many CSV readers stop at a NUL.
    if cell.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r')) {
        let shown: String = cell
            .chars()
            .map(|c| {
                if c.is_control() && !matches!(c, '\n' | '\t' | '\r') {
                    format!("[U+{:04X}]", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect();
        return std::borrow::Cow::Owned(guard_formula(&shown).into_owned());
    }
    let risky = cell.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if risky && cell.trim().parse::<f64>().is_err() {
        std::borrow::Cow::Owned(format!("'{cell}"))
    } else {
        std::borrow::Cow::Borrowed(cell)
    }
}

/// Write `rows` as CSV to `path`, atomically: through a temporary file in the same folder,
/// renamed over `path`, so a reader never sees half a file and a failure leaves the old one.
pub fn write_file<T: Serialize>(path: &Path, header: &[&str], rows: &[T]) -> Result<(), ReportError> {
    let mut bytes = Vec::new();
    write_rows(&mut bytes, header, rows)
        .map_err(|e| ReportError::Csv { path: path.to_path_buf(), detail: e.to_string() })?;
    runlog::atomic::write_atomic(path, &bytes).map_err(|source| ReportError::Io { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_and_control_characters_in_a_cell_are_shown_not_written() {
        assert_eq!(guard_formula("id\u{0}x\u{1b}[2J"), "id[U+0000]x[U+001B][2J");
        assert_eq!(guard_formula("=\u{0}"), "'=[U+0000]");
        assert_eq!(guard_formula("tab\tand\nline"), "tab\tand\nline");
    }

    /// The header a row struct produces through serde.
    fn serde_header<T: Serialize>(row: &T) -> Vec<String> {
        let mut w = ::csv::WriterBuilder::new().has_headers(true).from_writer(Vec::new());
        w.serialize(row).expect("serializes");
        let bytes = w.into_inner().expect("flushes");
        let text = String::from_utf8(bytes).expect("utf-8");
        text.lines().next().expect("a header line").split(',').map(String::from).collect()
    }

    #[test]
    fn text_cells_a_spreadsheet_would_run_are_guarded_and_numbers_are_not() {
        for (cell, written) in [
            ("=HYPERLINK(\"x\")", "'=HYPERLINK(\"x\")"),
            ("+1+2", "'+1+2"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("-0.5", "-0.5"),
            ("+3", "+3"),
            ("plain", "plain"),
        ] {
            assert_eq!(guard_formula(cell), written, "{cell}");
        }
        let mut out = Vec::new();
        write_rows(&mut out, &["config_id", "x"], &[("=cmd|' /C calc'!A0", -1.5)]).expect("writes");
        assert_eq!(String::from_utf8(out).expect("utf-8"), "config_id,x\n'=cmd|' /C calc'!A0,-1.5\n");
    }

    #[test]
    fn row_structs_match_their_headers() {
        assert_eq!(serde_header(&ResultRow::default()), RESULTS_HEADER);
        assert_eq!(serde_header(&SummaryRow::default()), SUMMARY_HEADER);
        assert_eq!(serde_header(&ProbeRow::default()), PROBES_HEADER);
        assert_eq!(serde_header(&CompactionRow::default()), COMPACTIONS_HEADER);
    }

    #[test]
    fn numbers_are_rounded_without_exponents_and_never_nan() {
        let row = SummaryRow {
            retention_mean: Some(2.0 / 3.0),
            cost_usd_mean: Some(0.000_012_345_678),
            compression_ratio: Some(f64::NAN),
            overflow_rate: Some(-0.000_000_01),
            ..SummaryRow::default()
        };
        let mut out = Vec::new();
        write_rows(&mut out, &SUMMARY_HEADER, &[row]).expect("writes");
        let text = String::from_utf8(out).expect("utf-8");
        let line = text.lines().nth(1).expect("a row");
        let fields: Vec<&str> = line.split(',').collect();
        let col = |name: &str| fields[SUMMARY_HEADER.iter().position(|h| *h == name).expect("column")];
        assert_eq!(col("retention_mean"), "0.666667");
        assert_eq!(col("cost_usd_mean"), "0.00001235");
        assert_eq!(col("compression_ratio"), "");
        assert_eq!(col("overflow_rate"), "0");
        assert_eq!(col("window"), "");
        assert!(!text.contains("NaN") && !text.contains("e-"));
    }

    #[test]
    fn an_empty_file_still_has_its_header() {
        let mut out = Vec::new();
        write_rows::<_, CompactionRow>(&mut out, &COMPACTIONS_HEADER, &[]).expect("writes");
        assert_eq!(String::from_utf8(out).expect("utf-8"), format!("{}\n", COMPACTIONS_HEADER.join(",")));
    }

    #[test]
    fn probe_spread_and_repeats_come_from_the_llm_detail_and_default_for_the_offline_judge() {
        let probe = |llm: Option<serde_json::Value>| runlog::record::ProbeScore {
            written: false,
            probe_id: "p".into(),
            kind: compaction::ProbeKind::Recall,
            tier: None,
            asked_at: 1,
            checkpoint: 100,
            at_risk: false,
            score: 0.5,
            facts: vec![FoundIn::Verbatim],
            judge: "j".into(),
            llm,
            if_sent: None,
            verdict: Default::default(),
            evidence: Vec::new(),
        };
        assert_eq!((score_spread(&probe(None)), scored_repeats(&probe(None))), (Some(0.0), Some(1)));
        let llm = probe(Some(serde_json::json!({"scored": true, "repeats": 3, "scored_repeats": 2, "spread": 0.25})));
        assert_eq!((score_spread(&llm), scored_repeats(&llm)), (Some(0.25), Some(2)));
        let unscored = probe(Some(serde_json::json!({"scored": false, "error": "answer: timeout"})));
        assert_eq!((score_spread(&unscored), scored_repeats(&unscored)), (None, Some(0)));
    }
}
