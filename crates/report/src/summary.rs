//! Per-configuration aggregates with seeded bootstrap confidence intervals, pooled over every
//! dataset (`dataset = "all"`) and per dataset.
//!
//! Per-dataset rows and the pooled row are computed the same way from their own records, so a
//! pooled mean over conversations is the conversation-weighted mean of the per-dataset means.
//!
//! **Paired at-risk retention** measures every configuration of a dataset and window on the
//! same questions: the probes (conversation, probe id) that are at risk under every
//! configuration of that window that compacted on that dataset (configurations that never
//! compacted there have no at-risk probes to pair), each scored once per configuration, means
//! over probes. The pooled row pairs each dataset's set in turn (their union).
//!
//! **Estimate error**: at each trigger check (each call, before any compaction, of a strategy
//! with a threshold) the strategy's own estimate against the exact count, as the signed ratio
//! `(estimate - exact) / exact`; the 50th and 95th percentiles (nearest rank) over every check
//! of the configuration. A strategy that underestimates stays below its threshold.
//!
//! Retention is averaged over conversations (each conversation's own mean probe score), so a
//! conversation with many probes weighs as much as one with few; the 95% interval is a
//! percentile bootstrap over conversations with [`RESAMPLES`] resamples, seeded from the
//! experiment's seed, the configuration id and the metric, so it does not depend on the
//! order of records, on sharding, or on other configurations.
//!
//! ```
//! use report::stats::mean;
//! use report::summary::bootstrap_ci;
//!
//! let values = [0.2, 0.4, 0.9, 1.0, 0.6];
//! let (low, high) = bootstrap_ci(&values, 42).unwrap();
//! let m = mean(&values).unwrap();
//! assert!(low <= m && m <= high);
//! assert_eq!(bootstrap_ci(&values, 42), Some((low, high)));
//! ```

use std::collections::{BTreeMap, BTreeSet};

use compaction::{ProbeKind, Tier};
use runlog::experiment::Configuration;
use runlog::record::{PairMetrics, PairOutcome, PairRecord};
use seeded::fnv1a;

use crate::stats::{mean, percentile};

/// The `dataset` of a pooled row.
pub const ALL_DATASETS: &str = "all";

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 2_000;
/// Two-sided confidence level of the intervals.
pub const LEVEL: f64 = 0.95;

/// Aggregates of one configuration over its conversations. `None` where a value does not
/// apply (no conversation, no probe of that kind, no calls).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigSummary {
    pub config: Configuration,
    /// The dataset label the row is over, or [`ALL_DATASETS`] for the pooled row.
    pub dataset: String,
    /// Conversations that replayed.
    pub conversations: usize,
    /// Share of the replayed conversations with no rejected call.
    pub completion_rate: Option<f64>,
    /// Replayed conversations with at least one compaction.
    pub compacted_conversations: usize,
    /// Mean retention as if every request had been sent.
    pub retention_if_sent: Option<f64>,
    /// Mean score over the paired at-risk probes (see the module docs).
    pub paired_at_risk_retention: Option<f64>,
    /// Probes the paired at-risk retention is over.
    pub paired_at_risk_probes: usize,
    /// Median and 95th percentile of the strategy's signed estimate error at its trigger checks.
    pub estimate_error_p50: Option<f64>,
    pub estimate_error_p95: Option<f64>,
    /// Conversations that failed.
    pub failed: usize,
    pub retention: Estimate,
    pub at_risk_retention: Estimate,
    /// At-risk probes (scored) the at-risk retention is over.
    pub at_risk_probes: usize,
    /// Mean retention per tier (over the conversations with probes of that tier), in
    /// [`Tier::ALL`] order (critical, useful, detail).
    pub retention_by_tier: [Option<f64>; 3],
    /// Probe-checkpoint pairs (scored) per tier, in [`Tier::ALL`] order: the denominators of
    /// `retention_by_tier`.
    pub probes_by_tier: [usize; 3],
    /// Mean retention per probe kind, in [`ProbeKind::CLASSIC`] order.
    pub retention_by_kind: [Option<f64>; 5],
    /// Mean retention of the at-risk probes per kind (over the conversations with at-risk
    /// probes of that kind), in [`ProbeKind::CLASSIC`] order.
    pub at_risk_retention_by_kind: [Option<f64>; 5],
    /// Mean retention per checkpoint (over the conversations with probes asked there), in
    /// [`runlog::settings::CHECKPOINTS`] order (25%, 50%, 75%, 100% of the calls).
    pub retention_by_checkpoint: [Option<f64>; 4],
    /// The judges that scored the configuration's pairs, distinct, in record order, `;`-joined.
    pub judge: String,
    /// Request tokens sent / request tokens had nothing been compacted.
    pub compression_ratio: Option<f64>,
    /// Overflowing calls / calls.
    pub overflow_rate: Option<f64>,
    pub calls: u64,
    pub compactions_mean: Option<f64>,
    pub violations: u64,
    /// Requests the OpenAI Chat Completions API would refuse, summed over conversations.
    pub rejected_requests_openai: u64,
    /// Requests the Anthropic Messages API would refuse, summed over conversations.
    pub rejected_requests_anthropic: u64,
    /// Violations both providers accept, summed over conversations.
    pub findings: u64,
    pub peak_tokens_max: Option<u64>,
    /// Mean cost per conversation; `None` when no pair was priced (cost not measured).
    pub cost_usd_mean: Option<f64>,
    /// Mean cost of the compaction (summary) calls per conversation, part of `cost_usd_mean`.
    pub summary_cost_usd_mean: Option<f64>,
    /// Cached request tokens / request tokens.
    pub cache_hit_rate: Option<f64>,
    /// The strategy can operate at the configuration's window
    /// ([`compaction::Strategy::can_operate`]); an inapplicable configuration is never ranked.
    pub applicable: bool,
    /// Why not, when it cannot (empty when applicable).
    pub inapplicable_reason: String,
    /// Requests that lacked the most recent user message, summed over conversations.
    pub latest_user_message_dropped: u64,
    /// User directives summaries stated that no user message holds, summed over conversations.
    pub fabricated_directives: u64,
    /// Drift across repeated compactions ([`crate::drift`]).
    pub drift: crate::drift::Drift,
    /// Retention of the answer keys: what the agent must know at each checkpoint, as a person
    /// wrote it (empty where the dataset has no keys).
    pub state: StateRetention,
    /// Next-action readiness and repeat risks over the compactions.
    pub next_action: NextActionSummary,
    /// Next-action agreement with a model; `None` when no pair asked one.
    pub agreement: Option<AgreementSummary>,
}

/// Next-action agreement of a configuration: each conversation's share of agreeing points,
/// then over the conversations with a point, with its bootstrap interval; the points each
/// rests on and the unparsed answers, summed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgreementSummary {
    pub recorded: Estimate,
    pub recorded_compactions: u64,
    pub full: Estimate,
    pub full_compactions: u64,
    pub unparsed: u64,
}

/// [`AgreementSummary`] over `ok`'s pairs that asked a model; `None` when none did.
fn agreement(ok: &[&PairMetrics], seeds: (u64, u64)) -> Option<AgreementSummary> {
    let asked: Vec<&runlog::record::AgreementFigures> =
        ok.iter().filter_map(|m| m.next_action_agreement.as_ref()).collect();
    if asked.is_empty() {
        return None;
    }
    let finite = |v: Vec<f64>| v.into_iter().filter(|x| x.is_finite()).collect::<Vec<f64>>();
    let recorded = finite(asked.iter().filter_map(|a| a.agree_recorded).collect());
    let full = finite(asked.iter().filter_map(|a| a.agree_full).collect());
    Some(AgreementSummary {
        recorded: Estimate::of(&recorded, seeds.0),
        recorded_compactions: asked.iter().map(|a| a.agree_recorded_compactions).sum(),
        full: Estimate::of(&full, seeds.1),
        full_compactions: asked.iter().map(|a| a.agree_full_compactions).sum(),
        unparsed: asked.iter().map(|a| a.unparsed).sum(),
    })
}

/// Next-action readiness of a configuration: each conversation's mean over its compactions
/// whose next action needs an identifier from earlier, then over those conversations, with
/// its bootstrap interval; and the repeat risks, summed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NextActionSummary {
    pub ready: Estimate,
    /// Compactions the mean rests on.
    pub compactions: u64,
    pub repeat_failed: u64,
    pub repeat_reread: u64,
}

/// [`NextActionSummary`] over `ok`'s pairs.
fn next_action(ok: &[&PairMetrics], seed: u64) -> NextActionSummary {
    let ready: Vec<f64> = ok.iter().filter_map(|m| m.next_action_ready).filter(|v| v.is_finite()).collect();
    NextActionSummary {
        ready: Estimate::of(&ready, seed),
        compactions: ok.iter().map(|m| m.next_action_compactions).sum(),
        repeat_failed: ok.iter().map(|m| m.repeat_risk_failed).sum(),
        repeat_reread: ok.iter().map(|m| m.repeat_risk_reread).sum(),
    }
}

/// A mean with its bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Estimate {
    pub mean: Option<f64>,
    pub ci: Option<(f64, f64)>,
    /// Conversations the mean is over.
    pub n: usize,
}

impl ConfigSummary {
    /// The configuration compacted at least once in the row's conversations.
    pub fn exercised(&self) -> bool {
        self.compacted_conversations > 0
    }
}

impl Estimate {
    fn of(values: &[f64], seed: u64) -> Estimate {
        Estimate { mean: mean(values), ci: bootstrap_ci(values, seed), n: values.len() }
    }
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

use seeded::SplitMix64;

/// Percentile bootstrap interval of the mean at [`LEVEL`], with [`RESAMPLES`] resamples.
/// `None` for no values; a single value gives a zero-width interval.
pub fn bootstrap_ci(values: &[f64], seed: u64) -> Option<(f64, f64)> {
    bootstrap(values, None, seed)
}

/// [`bootstrap_ci`] of a weighted mean `sum(w * v) / sum(w)`, resampling (value, weight)
/// pairs: the interval of a mean over probes when conversations are resampled (a value is a
/// conversation's mean, its weight the conversation's probe count). `None` for no values or
/// lengths that differ.
pub fn weighted_bootstrap_ci(values: &[f64], weights: &[f64], seed: u64) -> Option<(f64, f64)> {
    (values.len() == weights.len()).then(|| bootstrap(values, Some(weights), seed)).flatten()
}

/// The weighted mean `sum(w * v) / sum(w)`; `None` for no weight.
pub fn weighted_mean(values: &[f64], weights: &[f64]) -> Option<f64> {
    let total: f64 = weights.iter().sum();
    (total > 0.0).then(|| values.iter().zip(weights).map(|(v, w)| v * w).sum::<f64>() / total)
}

fn bootstrap(values: &[f64], weights: Option<&[f64]>, seed: u64) -> Option<(f64, f64)> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut resample = || match weights {
        None => (0..n).map(|_| values[rng.index(n)]).sum::<f64>() / n as f64,
        Some(w) => {
            let (mut num, mut den) = (0.0, 0.0);
            for _ in 0..n {
                let i = rng.index(n);
                num += values[i] * w[i];
                den += w[i];
            }
            if den > 0.0 {
                num / den
            } else {
                0.0
            }
        }
    };
    let mut means: Vec<f64> = (0..RESAMPLES).map(|_| resample()).collect();
    means.sort_by(f64::total_cmp);
    let alpha = 1.0 - LEVEL;
    let low = ((alpha / 2.0) * RESAMPLES as f64).floor() as usize;
    let high = (((1.0 - alpha / 2.0) * RESAMPLES as f64).ceil() as usize).saturating_sub(1);
    Some((means[low.min(RESAMPLES - 1)], means[high.min(RESAMPLES - 1)]))
}

/// The bootstrap seed of one metric of one configuration.
pub fn metric_seed(seed: u64, config_id: &str, metric: &str) -> u64 {
    seed ^ fnv1a(format!("{config_id}/{metric}").as_bytes())
}

/// Summarize each configuration (in the given order) over its records: first the pooled row
/// of every configuration, then, dataset by dataset (sorted by label), a row per configuration
/// that has records in that dataset.
pub fn summarize(configurations: &[Configuration], records: &[PairRecord], seed: u64) -> Vec<ConfigSummary> {
    let datasets: BTreeSet<&str> = records.iter().map(|r| r.dataset.as_str()).collect();
    let paired = paired_sets(configurations, records);
    let mut out: Vec<ConfigSummary> = configurations
        .iter()
        .map(|c| {
            let mut set: BTreeSet<(&str, &str, &str)> = BTreeSet::new();
            for ((_, window), probes) in &paired {
                if *window == c.window {
                    set.extend(probes.iter().copied());
                }
            }
            summarize_one(c, ALL_DATASETS, records.iter().filter(|r| r.config_id == c.config_id), &set, seed)
        })
        .collect();
    let empty = BTreeSet::new();
    for d in datasets {
        for c in configurations {
            let mine: Vec<&PairRecord> =
                records.iter().filter(|r| r.config_id == c.config_id && r.dataset == d).collect();
            if mine.is_empty() {
                continue;
            }
            let set = paired.get(&(d, c.window)).unwrap_or(&empty);
            out.push(summarize_one(c, d, mine.into_iter(), set, seed));
        }
    }
    out
}

/// Rows ranked for a leaderboard, without the inapplicable ones (never ranked: they could not
/// run): completion rate first (a configuration that loses
/// conversations to rejected calls ranks below every one that completes more), then
/// retention, both descending; ties keep their order.
pub fn rank(mut rows: Vec<&ConfigSummary>) -> Vec<&ConfigSummary> {
    rows.retain(|s| s.applicable);
    let key = |v: Option<f64>| v.filter(|v| v.is_finite()).unwrap_or(f64::NEG_INFINITY);
    rows.sort_by(|a, b| {
        key(b.completion_rate)
            .total_cmp(&key(a.completion_rate))
            .then(key(b.retention.mean).total_cmp(&key(a.retention.mean)))
    });
    rows
}

/// Which rows may stand on a Pareto frontier drawn over them: a configuration that never
/// compacted (not exercised) never may; one with a rejected call may not when some exercised
/// configuration among the rows completed every conversation.
pub fn frontier_eligible(rows: &[&ConfigSummary]) -> Vec<bool> {
    let someone_completes = rows.iter().any(|s| s.applicable && s.exercised() && s.completion_rate == Some(1.0));
    rows.iter()
        .map(|s| s.applicable && s.exercised() && (!someone_completes || s.completion_rate == Some(1.0)))
        .collect()
}

/// The datasets of a summary's rows, in row order, without the pooled label.
pub fn datasets(summaries: &[ConfigSummary]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for s in summaries {
        if s.dataset != ALL_DATASETS && !out.contains(&s.dataset.as_str()) {
            out.push(&s.dataset);
        }
    }
    out
}

type ProbeKey<'a> = (&'a str, &'a str, &'a str);

/// Per (dataset, window): the probes (dataset, conversation, probe id) at risk under every
/// configuration of that window that compacted on that dataset, on the conversations that all
/// of them replayed.
fn paired_sets<'a>(
    configurations: &[Configuration],
    records: &'a [PairRecord],
) -> BTreeMap<(&'a str, Option<u64>), BTreeSet<ProbeKey<'a>>> {
    let window_of: BTreeMap<&str, Option<u64>> =
        configurations.iter().map(|c| (c.config_id.as_str(), c.window)).collect();
    // (dataset, window) -> config -> (conversations replayed, at-risk probes, compacted).
    type PerConfig<'a> = BTreeMap<&'a str, (BTreeSet<&'a str>, BTreeSet<ProbeKey<'a>>, bool)>;
    let mut groups: BTreeMap<(&str, Option<u64>), PerConfig<'a>> = BTreeMap::new();
    for r in records {
        let Some(window) = window_of.get(r.config_id.as_str()) else { continue };
        let PairOutcome::Ok(m) = &r.outcome else { continue };
        let entry = groups.entry((r.dataset.as_str(), *window)).or_default().entry(r.config_id.as_str()).or_default();
        entry.0.insert(r.conversation_id.as_str());
        entry.2 |= m.compactions > 0;
        for p in m.probes.iter().filter(|p| p.at_risk && headline(p)) {
            entry.1.insert((r.dataset.as_str(), r.conversation_id.as_str(), p.probe_id.as_str()));
        }
    }
    groups
        .into_iter()
        .map(|(key, configs)| {
            let mut exercised = configs.values().filter(|(_, _, compacted)| *compacted);
            let set = match exercised.next() {
                None => BTreeSet::new(),
                Some(first) => exercised.fold(first.1.clone(), |acc, (_, probes, _)| &acc & probes),
            };
            (key, set)
        })
        .collect()
}

/// A probe score that enters the probes' means: finite, for the LLM judge with a verdict, and
/// not an answer key (keys are state retention: [`state`]).
fn counts(p: &runlog::record::ProbeScore) -> bool {
    !p.written && scored(p)
}

/// Finite and, for the LLM judge, with a verdict.
fn scored(p: &runlog::record::ProbeScore) -> bool {
    p.score.is_finite() && runlog::record::is_scored(p)
}

/// An answer key's score that enters state retention: scored, critical or useful.
pub(crate) fn state_key(p: &runlog::record::ProbeScore) -> bool {
    p.written && scored(p) && p.tier().in_headline()
}

/// State retention: the mean score of the answer keys (critical and useful) per conversation,
/// then over the conversations that have keys, with its bootstrap interval; per tier; at risk.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StateRetention {
    /// Over every key (critical and useful), per conversation then over conversations.
    pub all: Estimate,
    /// Over the critical keys, and over the useful ones.
    pub critical: Option<f64>,
    pub useful: Option<f64>,
    /// Over the keys at risk (none of their source messages verbatim in the context).
    pub at_risk: Option<f64>,
    /// Keys scored (the denominators): all, critical, useful, at risk.
    pub keys: usize,
    pub critical_keys: usize,
    pub useful_keys: usize,
    pub at_risk_keys: usize,
}

/// [`StateRetention`] over `ok`'s pairs.
fn state(ok: &[&PairMetrics], seed: u64) -> StateRetention {
    let per = |keep: &dyn Fn(&runlog::record::ProbeScore) -> bool| -> (Vec<f64>, usize) {
        let mut n = 0;
        let means = ok
            .iter()
            .filter_map(|m| {
                let scores: Vec<f64> = m.probes.iter().filter(|p| state_key(p) && keep(p)).map(|p| p.score).collect();
                n += scores.len();
                mean(&scores)
            })
            .collect();
        (means, n)
    };
    let (all, keys) = per(&|_| true);
    let (critical, critical_keys) = per(&|p| p.tier() == Tier::Critical);
    let (useful, useful_keys) = per(&|p| p.tier() == Tier::Useful);
    let (at_risk, at_risk_keys) = per(&|p| p.at_risk);
    StateRetention {
        all: Estimate::of(&all, seed),
        critical: mean(&critical),
        useful: mean(&useful),
        at_risk: mean(&at_risk),
        keys,
        critical_keys,
        useful_keys,
        at_risk_keys,
    }
}

/// A probe score that enters the headline figures: it [`counts`] and is critical or useful.
pub(crate) fn headline(p: &runlog::record::ProbeScore) -> bool {
    counts(p) && p.tier().in_headline()
}

/// The signed estimate error of every trigger check of a pair.
fn estimate_errors(m: &PairMetrics) -> impl Iterator<Item = f64> + '_ {
    m.timeline
        .iter()
        .filter(|c| c.check_tokens > 0)
        .map(|c| (c.check_estimate as f64 - c.check_tokens as f64) / c.check_tokens as f64)
}

fn summarize_one<'a>(
    config: &Configuration,
    dataset: &str,
    records: impl Iterator<Item = &'a PairRecord>,
    paired: &BTreeSet<ProbeKey<'_>>,
    seed: u64,
) -> ConfigSummary {
    let mut failed = 0;
    let mut ok = Vec::new();
    let mut scored_by: Vec<&String> = Vec::new();
    let mut paired_scores: Vec<f64> = Vec::new();
    for r in records {
        scored_by.push(&r.judge);
        match &r.outcome {
            PairOutcome::Ok(m) => {
                ok.push(m.as_ref());
                for p in m.probes.iter().filter(|p| counts(p)) {
                    if paired.contains(&(r.dataset.as_str(), r.conversation_id.as_str(), p.probe_id.as_str())) {
                        paired_scores.push(p.score);
                    }
                }
            }
            PairOutcome::Failed { .. } => failed += 1,
        }
    }
    // The pooled row keeps the seeds it always had; a dataset row has its own.
    let seed_id =
        if dataset == ALL_DATASETS { config.config_id.clone() } else { format!("{}@{dataset}", config.config_id) };
    let mut errors: Vec<f64> = ok.iter().flat_map(|m| estimate_errors(m)).filter(|v| v.is_finite()).collect();
    errors.sort_by(f64::total_cmp);
    let if_sent: Vec<f64> =
        ok.iter().filter_map(|m| m.retention_if_sent.or(m.retention)).filter(|v| v.is_finite()).collect();
    let retention: Vec<f64> = ok.iter().filter_map(|m| m.retention).filter(|v| v.is_finite()).collect();
    let at_risk: Vec<f64> = ok.iter().filter_map(|m| m.at_risk_retention).filter(|v| v.is_finite()).collect();
    let kind_mean = |kind: ProbeKind, at_risk_only: bool| {
        let per_conversation: Vec<f64> = ok
            .iter()
            .filter_map(|m| {
                let scores: Vec<f64> = m
                    .probes
                    .iter()
                    .filter(|p| p.kind == kind && (p.at_risk || !at_risk_only))
                    .filter(|p| counts(p))
                    .map(|p| p.score)
                    .collect();
                mean(&scores)
            })
            .collect();
        mean(&per_conversation)
    };
    let by_kind = ProbeKind::CLASSIC.map(|kind| kind_mean(kind, false));
    let by_checkpoint = runlog::settings::CHECKPOINTS.map(|checkpoint| {
        let per_conversation: Vec<f64> = ok
            .iter()
            .filter_map(|m| {
                let scores: Vec<f64> = m
                    .probes
                    .iter()
                    .filter(|p| p.checkpoint == checkpoint)
                    .filter(|p| counts(p))
                    .map(|p| p.score)
                    .collect();
                mean(&scores)
            })
            .collect();
        mean(&per_conversation)
    });
    let at_risk_by_kind = ProbeKind::CLASSIC.map(|kind| kind_mean(kind, true));
    let retention_by_tier = Tier::ALL.map(|tier| {
        let per_conversation: Vec<f64> = ok
            .iter()
            .filter_map(|m| {
                mean(&m.probes.iter().filter(|p| p.tier() == tier && counts(p)).map(|p| p.score).collect::<Vec<_>>())
            })
            .collect();
        mean(&per_conversation)
    });
    let probes_by_tier = Tier::ALL
        .map(|tier| ok.iter().map(|m| m.probes.iter().filter(|p| p.tier() == tier && counts(p)).count()).sum());
    let mut judges: Vec<&str> = Vec::new();
    for r in &scored_by {
        if !judges.contains(&r.as_str()) {
            judges.push(r);
        }
    }
    let sum = |f: fn(&PairMetrics) -> u64| ok.iter().map(|m| f(m)).sum::<u64>();
    let calls = sum(|m| m.calls);
    let input = sum(|m| m.input_tokens);
    let costs: Vec<f64> = ok.iter().filter_map(|m| m.cost_usd).filter(|v| v.is_finite()).collect();
    let summary_costs: Vec<f64> = ok.iter().filter_map(|m| m.summary_cost_usd).filter(|v| v.is_finite()).collect();
    let compactions: Vec<f64> = ok.iter().map(|m| m.compactions as f64).collect();
    // Inapplicable when every replayed pair says so (with one window per configuration they
    // all answer alike); the first pair's reason.
    let reasons: Vec<&str> = ok.iter().filter_map(|m| m.inapplicable_reason.as_deref()).collect();
    let inapplicable = !ok.is_empty() && reasons.len() == ok.len();
    ConfigSummary {
        applicable: !inapplicable,
        inapplicable_reason: if inapplicable { reasons[0].to_string() } else { String::new() },
        latest_user_message_dropped: sum(|m| m.latest_user_message_dropped),
        fabricated_directives: ok.iter().map(|m| m.fabricated_directives.len() as u64).sum(),
        drift: crate::drift::drift(&ok),
        state: state(&ok, metric_seed(seed, &seed_id, "state_retention")),
        next_action: next_action(&ok, metric_seed(seed, &seed_id, "next_action_ready")),
        agreement: agreement(
            &ok,
            (
                metric_seed(seed, &seed_id, "next_action_agree_recorded"),
                metric_seed(seed, &seed_id, "next_action_agree_full"),
            ),
        ),
        dataset: dataset.to_string(),
        conversations: ok.len(),
        completion_rate: ratio(ok.iter().filter(|m| m.first_rejected_call.is_none()).count() as u64, ok.len() as u64),
        compacted_conversations: ok.iter().filter(|m| m.compactions > 0).count(),
        at_risk_probes: ok.iter().map(|m| m.probes.iter().filter(|p| p.at_risk && headline(p)).count()).sum(),
        retention_by_tier,
        probes_by_tier,
        retention_if_sent: mean(&if_sent),
        paired_at_risk_retention: mean(&paired_scores),
        paired_at_risk_probes: paired_scores.len(),
        estimate_error_p50: percentile(&errors, 0.5),
        estimate_error_p95: percentile(&errors, 0.95),
        failed,
        retention: Estimate::of(&retention, metric_seed(seed, &seed_id, "retention")),
        at_risk_retention: Estimate::of(&at_risk, metric_seed(seed, &seed_id, "at_risk_retention")),
        retention_by_kind: by_kind,
        at_risk_retention_by_kind: at_risk_by_kind,
        retention_by_checkpoint: by_checkpoint,
        judge: judges.join(";"),
        compression_ratio: ratio(input, sum(|m| m.uncompacted_input_tokens)),
        overflow_rate: ratio(sum(|m| m.overflows), calls),
        calls,
        compactions_mean: mean(&compactions),
        violations: sum(|m| m.violations),
        rejected_requests_openai: sum(|m| m.rejected_requests_openai),
        rejected_requests_anthropic: sum(|m| m.rejected_requests_anthropic),
        findings: sum(|m| m.findings),
        peak_tokens_max: ok.iter().map(|m| m.peak_tokens).max(),
        cost_usd_mean: mean(&costs),
        summary_cost_usd_mean: mean(&summary_costs),
        cache_hit_rate: ratio(sum(|m| m.cached_tokens), input),
        config: config.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_is_deterministic_and_contains_the_mean() {
        let values: Vec<f64> = (0..40).map(|i| ((i * 37) % 11) as f64 / 10.0).collect();
        let m = mean(&values).expect("values");
        for seed in [0, 1, 42, u64::MAX] {
            let (low, high) = bootstrap_ci(&values, seed).expect("values");
            assert!(low <= m && m <= high, "seed {seed}: {low} <= {m} <= {high}");
            assert!(low < high, "spread values give a non-empty interval");
            assert_eq!(bootstrap_ci(&values, seed), Some((low, high)), "same seed, same interval");
        }
        assert_ne!(bootstrap_ci(&values, 1), bootstrap_ci(&values, 2), "the seed matters");
        // The interval narrows as the sample grows (same spread).
        let more: Vec<f64> = values.iter().cycle().take(400).copied().collect();
        let (l1, h1) = bootstrap_ci(&values, 5).expect("values");
        let (l2, h2) = bootstrap_ci(&more, 5).expect("values");
        assert!(h2 - l2 < h1 - l1);
    }

    #[test]
    fn degenerate_samples() {
        assert_eq!(bootstrap_ci(&[], 1), None);
        assert_eq!(mean(&[]), None);
        assert_eq!(bootstrap_ci(&[0.25], 1), Some((0.25, 0.25)));
        assert_eq!(bootstrap_ci(&[0.5, 0.5, 0.5], 9), Some((0.5, 0.5)));
    }

    #[test]
    fn a_95_percent_interval_covers_the_true_mean_about_95_percent_of_the_time() {
        // Samples of 30 from a uniform distribution on {0, 0.1, ..., 1} (true mean 0.5).
        let mut rng = SplitMix64::new(7);
        let trials = 200;
        let covered = (0..trials)
            .filter(|&t| {
                let sample: Vec<f64> = (0..30).map(|_| rng.index(11) as f64 / 10.0).collect();
                let (low, high) = bootstrap_ci(&sample, t).expect("values");
                low <= 0.5 && 0.5 <= high
            })
            .count();
        // Percentile intervals undercover slightly at n = 30; far outside 85-99% is a bug.
        assert!((170..=199).contains(&covered), "covered {covered} of {trials}");
    }
}
