//! Real summaries against the stand-in: where a run replays the recording's own compactions
//! (the `recorded` reference: Claude Code's cut and summary), each configuration that inserts a
//! summary is set beside it on the same probes, so the reader sees what the recorded agent's
//! real summary kept against what the strategy's summary kept.
//!
//! **Pairs.** For a summarizing configuration `C` and a `recorded` configuration `R` of the same
//! window, on one dataset: the probe-checkpoint pairs (a probe asked at one checkpoint of one
//! conversation) that are at risk under both (the probe's source left the context verbatim
//! under each), critical or useful, and scored under both. Each is scored as if every request
//! had been sent (a probe asked after a rejected call scores 0 in the headline figures, since
//! the agent has nothing; here the question is what the summary keeps, so the judge's score as
//! if sent is used, and the pairs concerned are counted). On those pairs: `R`'s mean score
//! (the real summary), `C`'s (the stand-in's, when the run's summarizer is the offline
//! stand-in, else the model's), and the mean difference `C - R`, each weighted by the pairs
//! of a conversation while the bootstrap resamples conversations (the verdict's paired test,
//! [`crate::gate::weighted_paired_test`]: a 95% interval from
//! [`crate::gate::SIGN_TEST_BELOW`] conversations on, a sign test under that).
//!
//! A configuration *summarizes* when one of its pairs inserted a non-empty summary; `recorded`
//! is never one of them. A run without a `recorded` configuration has no rows. With several
//! datasets, each dataset has its rows, then every dataset pooled (`all`) for the pairs found
//! on more than one.
//!
//! ```no_run
//! let data = runlog::log::RunData::read(std::path::Path::new("reports/corpora-20250101-000000")).unwrap();
//! for row in report::real::compare(&data) {
//!     let _ = (row.config_id, row.probes, row.real.value, row.stand_in.value, row.difference.mean);
//! }
//! ```

use std::collections::{BTreeMap, BTreeSet};

use runlog::log::RunData;
use runlog::record::{PairOutcome, PairRecord, ProbeScore};
use serde::Serialize;

use crate::gate::weighted_paired_test;
use crate::summary::{metric_seed, weighted_bootstrap_ci, weighted_mean, ALL_DATASETS};
use crate::verdict::{difference, Difference, Figure};

/// The file name of the CSV view, written only when the run has a `recorded` configuration.
pub const REAL_CSV: &str = "real_vs_stand_in.csv";

/// The reference strategy whose summaries are the recording's own.
pub const RECORDED: &str = "recorded";

/// One summarizing configuration against `recorded` on one dataset (or every dataset pooled).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The window (0: each conversation's own).
    pub window: u64,
    /// A dataset label, or [`ALL_DATASETS`].
    pub dataset: String,
    /// The summarizing configuration.
    pub config_id: String,
    pub strategy: String,
    /// The `recorded` configuration it is paired with.
    pub recorded_config_id: String,
    /// Its summaries come from the offline stand-in, not a model.
    pub stand_in_summary: bool,
    /// Probe-checkpoint pairs at risk under both.
    pub probes: usize,
    /// Conversations those pairs come from.
    pub conversations: usize,
    /// Of the pairs, those asked after a rejected call under either configuration (scored as
    /// if the requests had been sent).
    pub rejected_probes: usize,
    /// `recorded`'s retention on the pairs (the real summary).
    pub real: Figure,
    /// The configuration's retention on the same pairs.
    pub stand_in: Figure,
    /// `stand_in - real`, conversation by conversation.
    pub difference: Difference,
}

/// Per conversation: (dataset, conversation) -> (mean score under `recorded`, mean under the
/// configuration, pairs, pairs asked after a rejected call under either).
type PerConversation = BTreeMap<(String, String), (f64, f64, usize, usize)>;

/// The scores, as if every request had been sent, of one pair's headline probes that are at
/// risk and scored, by (probe, checkpoint), with whether a rejected call came before.
fn at_risk_scores(m: &runlog::record::PairMetrics) -> BTreeMap<(&str, u32), (f64, bool)> {
    m.probes
        .iter()
        .filter(|p| p.at_risk && crate::summary::headline(p))
        .map(|p: &ProbeScore| {
            ((p.probe_id.as_str(), p.checkpoint), (p.if_sent.unwrap_or(p.score), p.if_sent.is_some()))
        })
        .collect()
}

/// The configurations whose pairs inserted a summary, `recorded` aside, sorted.
pub fn summarizing(data: &RunData) -> Vec<String> {
    let set: BTreeSet<&str> = data
        .records
        .iter()
        .filter(|r| r.strategy != RECORDED)
        .filter(
            |r| matches!(&r.outcome, PairOutcome::Ok(m) if m.compaction_events.iter().any(|e| !e.summary.is_empty())),
        )
        .map(|r| r.config_id.as_str())
        .collect();
    set.into_iter().map(str::to_string).collect()
}

/// Every summarizing configuration against every `recorded` configuration of its window: per
/// dataset, then pooled where the pairs span several datasets. Empty without `recorded`.
pub fn compare(data: &RunData) -> Vec<Comparison> {
    let configs = &data.manifest.experiment.configurations;
    let references: Vec<_> = configs.iter().filter(|c| c.strategy == RECORDED).collect();
    if references.is_empty() {
        return Vec::new();
    }
    let summarizing = summarizing(data);
    // config id -> (dataset, conversation) -> its ok record.
    let mut by_config: BTreeMap<&str, BTreeMap<(&str, &str), &PairRecord>> = BTreeMap::new();
    for r in &data.records {
        if matches!(r.outcome, PairOutcome::Ok(_)) {
            by_config.entry(&r.config_id).or_default().insert((&r.dataset, &r.conversation_id), r);
        }
    }
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    for reference in references {
        let real_records = by_config.get(reference.config_id.as_str()).unwrap_or(&empty);
        for c in configs.iter().filter(|c| c.window == reference.window && summarizing.contains(&c.config_id)) {
            let mine = by_config.get(c.config_id.as_str()).unwrap_or(&empty);
            let mut per_dataset: BTreeMap<&str, PerConversation> = BTreeMap::new();
            for (key, real) in real_records {
                let (Some(other), PairOutcome::Ok(rm)) = (mine.get(key), &real.outcome) else { continue };
                let PairOutcome::Ok(om) = &other.outcome else { continue };
                let ours = at_risk_scores(om);
                let (mut real_sum, mut our_sum, mut n, mut rejected) = (0.0, 0.0, 0usize, 0usize);
                for (probe, (score, real_rejected)) in at_risk_scores(rm) {
                    if let Some((s, our_rejected)) = ours.get(&probe) {
                        real_sum += score;
                        our_sum += s;
                        n += 1;
                        rejected += usize::from(real_rejected || *our_rejected);
                    }
                }
                let d = per_dataset.entry(key.0).or_default();
                if n > 0 {
                    let value = (real_sum / n as f64, our_sum / n as f64, n, rejected);
                    d.insert((key.0.to_string(), key.1.to_string()), value);
                }
            }
            let window = reference.window.unwrap_or(0);
            let row = |dataset: &str, conversations: &PerConversation| {
                let seed_key = format!("{}/{}@{dataset}", c.config_id, reference.config_id);
                let seed = |metric: &str| metric_seed(data.manifest.seed, &seed_key, metric);
                let weights: Vec<f64> = conversations.values().map(|(_, _, n, _)| *n as f64).collect();
                let real: Vec<f64> = conversations.values().map(|(r, _, _, _)| *r).collect();
                let ours: Vec<f64> = conversations.values().map(|(_, o, _, _)| *o).collect();
                let probes = weights.iter().sum::<f64>() as usize;
                let figure = |values: &[f64], metric: &str| Figure {
                    value: weighted_mean(values, &weights),
                    interval: weighted_bootstrap_ci(values, &weights, seed(metric)),
                    conversations: values.len(),
                    probes: Some(probes),
                };
                let pairs: Vec<(f64, f64)> = real.iter().copied().zip(ours.iter().copied()).collect();
                let s = seed("real/difference");
                Comparison {
                    window,
                    dataset: dataset.to_string(),
                    config_id: c.config_id.clone(),
                    strategy: c.strategy.clone(),
                    recorded_config_id: reference.config_id.clone(),
                    stand_in_summary: data.manifest.stand_in_summary,
                    probes,
                    conversations: conversations.len(),
                    rejected_probes: conversations.values().map(|(_, _, _, r)| r).sum(),
                    real: figure(&real, "real/recorded"),
                    stand_in: figure(&ours, "real/summarizer"),
                    difference: difference(
                        weighted_paired_test(&pairs, &weights, true, s),
                        weighted_paired_test(&pairs, &weights, false, s),
                    ),
                }
            };
            for (dataset, conversations) in &per_dataset {
                out.push(row(dataset, conversations));
            }
            let with_pairs = per_dataset.values().filter(|c| !c.is_empty()).count();
            if with_pairs > 1 {
                let pooled: PerConversation = per_dataset.into_values().flatten().collect();
                out.push(row(ALL_DATASETS, &pooled));
            }
        }
    }
    out
}

/// Columns of `real_vs_stand_in.csv`.
pub const REAL_HEADER: [&str; 20] = [
    "window",
    "dataset",
    "config_id",
    "strategy",
    "recorded_config_id",
    "stand_in_summary",
    "probes",
    "conversations",
    "rejected_probes",
    "real_retention",
    "real_retention_ci_low",
    "real_retention_ci_high",
    "stand_in_retention",
    "stand_in_retention_ci_low",
    "stand_in_retention_ci_high",
    "difference",
    "difference_ci_low",
    "difference_ci_high",
    "difference_sign_p",
    "detectable",
];

/// A row of `real_vs_stand_in.csv`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RealRow {
    pub window: Option<u64>,
    pub dataset: String,
    pub config_id: String,
    pub strategy: String,
    pub recorded_config_id: String,
    pub stand_in_summary: bool,
    pub probes: usize,
    pub conversations: usize,
    pub rejected_probes: usize,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub real_retention: Option<f64>,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub real_retention_ci_low: Option<f64>,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub real_retention_ci_high: Option<f64>,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub stand_in_retention: Option<f64>,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub stand_in_retention_ci_low: Option<f64>,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub stand_in_retention_ci_high: Option<f64>,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub difference: Option<f64>,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub difference_ci_low: Option<f64>,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub difference_ci_high: Option<f64>,
    #[serde(serialize_with = "crate::csv::ratio6")]
    pub difference_sign_p: Option<f64>,
    pub detectable: bool,
}

impl RealRow {
    pub fn of(c: &Comparison) -> RealRow {
        RealRow {
            window: (c.window > 0).then_some(c.window),
            dataset: c.dataset.clone(),
            config_id: c.config_id.clone(),
            strategy: c.strategy.clone(),
            recorded_config_id: c.recorded_config_id.clone(),
            stand_in_summary: c.stand_in_summary,
            probes: c.probes,
            conversations: c.conversations,
            rejected_probes: c.rejected_probes,
            real_retention: c.real.value,
            real_retention_ci_low: c.real.interval.map(|i| i.0),
            real_retention_ci_high: c.real.interval.map(|i| i.1),
            stand_in_retention: c.stand_in.value,
            stand_in_retention_ci_low: c.stand_in.interval.map(|i| i.0),
            stand_in_retention_ci_high: c.stand_in.interval.map(|i| i.1),
            difference: c.difference.mean,
            difference_ci_low: c.difference.interval.map(|i| i.0),
            difference_ci_high: c.difference.interval.map(|i| i.1),
            difference_sign_p: c.difference.sign_p,
            detectable: c.difference.detectable,
        }
    }
}

/// Whether the run has a `recorded` configuration (and so a `real_vs_stand_in.csv`).
pub fn has_recorded(data: &RunData) -> bool {
    data.manifest.experiment.configurations.iter().any(|c| c.strategy == RECORDED)
}

#[cfg(test)]
mod tests;
