//! Per-configuration aggregates with seeded bootstrap confidence intervals.
//!
//! Retention is averaged over conversations (each conversation's own mean probe score), so a
//! conversation with many probes weighs as much as one with few; the 95% interval is a
//! percentile bootstrap over conversations with [`RESAMPLES`] resamples, seeded from the
//! experiment's seed, the configuration id and the metric, so it does not depend on the
//! order of records, on sharding, or on other configurations.
//!
//! ```
//! use report::summary::{bootstrap_ci, mean};
//!
//! let values = [0.2, 0.4, 0.9, 1.0, 0.6];
//! let (low, high) = bootstrap_ci(&values, 42).unwrap();
//! let m = mean(&values).unwrap();
//! assert!(low <= m && m <= high);
//! assert_eq!(bootstrap_ci(&values, 42), Some((low, high)));
//! ```

use compaction::ProbeKind;
use runner::experiment::{fnv1a, Configuration};
use runner::record::{PairOutcome, PairRecord};

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 2_000;
/// Two-sided confidence level of the intervals.
pub const LEVEL: f64 = 0.95;

/// Aggregates of one configuration over its conversations. `None` where a value does not
/// apply (no conversation, no probe of that kind, no calls).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigSummary {
    pub config: Configuration,
    /// Conversations that replayed.
    pub conversations: usize,
    /// Conversations that failed.
    pub failed: usize,
    pub retention: Estimate,
    pub at_risk_retention: Estimate,
    /// Mean retention per probe kind, in [`ProbeKind::ALL`] order.
    pub retention_by_kind: [Option<f64>; 5],
    /// Mean retention of the at-risk probes per kind (over the conversations with at-risk
    /// probes of that kind), in [`ProbeKind::ALL`] order.
    pub at_risk_retention_by_kind: [Option<f64>; 5],
    /// Mean retention per checkpoint (over the conversations with probes asked there), in
    /// [`runner::replay::CHECKPOINTS`] order (25%, 50%, 75%, 100% of the calls).
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
}

/// A mean with its bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Estimate {
    pub mean: Option<f64>,
    pub ci: Option<(f64, f64)>,
    /// Conversations the mean is over.
    pub n: usize,
}

impl Estimate {
    fn of(values: &[f64], seed: u64) -> Estimate {
        Estimate { mean: mean(values), ci: bootstrap_ci(values, seed), n: values.len() }
    }
}

/// The arithmetic mean; `None` for no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// SplitMix64: a small, well-distributed generator, enough for resampling indices.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (multiply-shift; the bias is below 2^-32 for any realistic n).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// Percentile bootstrap interval of the mean at [`LEVEL`], with [`RESAMPLES`] resamples.
/// `None` for no values; a single value gives a zero-width interval.
pub fn bootstrap_ci(values: &[f64], seed: u64) -> Option<(f64, f64)> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mut rng = SplitMix64(seed);
    let mut means: Vec<f64> =
        (0..RESAMPLES).map(|_| (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64).collect();
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

/// Summarize each configuration (in the given order) over its records.
pub fn summarize(configurations: &[Configuration], records: &[PairRecord], seed: u64) -> Vec<ConfigSummary> {
    configurations
        .iter()
        .map(|c| summarize_one(c, records.iter().filter(|r| r.config_id == c.config_id), seed))
        .collect()
}

fn summarize_one<'a>(
    config: &Configuration,
    records: impl Iterator<Item = &'a PairRecord>,
    seed: u64,
) -> ConfigSummary {
    let mut failed = 0;
    let mut ok = Vec::new();
    let mut scored_by: Vec<&String> = Vec::new();
    for r in records {
        scored_by.push(&r.judge);
        match &r.outcome {
            PairOutcome::Ok(m) => ok.push(m.as_ref()),
            PairOutcome::Failed { .. } => failed += 1,
        }
    }
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
                    .filter(|p| p.score.is_finite() && runner::llm_judge::is_scored(p))
                    .map(|p| p.score)
                    .collect();
                mean(&scores)
            })
            .collect();
        mean(&per_conversation)
    };
    let by_kind = ProbeKind::ALL.map(|kind| kind_mean(kind, false));
    let by_checkpoint = runner::replay::CHECKPOINTS.map(|checkpoint| {
        let per_conversation: Vec<f64> = ok
            .iter()
            .filter_map(|m| {
                let scores: Vec<f64> = m
                    .probes
                    .iter()
                    .filter(|p| p.checkpoint == checkpoint)
                    .filter(|p| p.score.is_finite() && runner::llm_judge::is_scored(p))
                    .map(|p| p.score)
                    .collect();
                mean(&scores)
            })
            .collect();
        mean(&per_conversation)
    });
    let at_risk_by_kind = ProbeKind::ALL.map(|kind| kind_mean(kind, true));
    let mut judges: Vec<&str> = Vec::new();
    for r in &scored_by {
        if !judges.contains(&r.as_str()) {
            judges.push(r);
        }
    }
    let sum = |f: fn(&runner::record::PairMetrics) -> u64| ok.iter().map(|m| f(m)).sum::<u64>();
    let calls = sum(|m| m.calls);
    let input = sum(|m| m.input_tokens);
    let costs: Vec<f64> = ok.iter().filter_map(|m| m.cost_usd).filter(|v| v.is_finite()).collect();
    let summary_costs: Vec<f64> = ok.iter().filter_map(|m| m.summary_cost_usd).filter(|v| v.is_finite()).collect();
    let compactions: Vec<f64> = ok.iter().map(|m| m.compactions as f64).collect();
    ConfigSummary {
        conversations: ok.len(),
        failed,
        retention: Estimate::of(&retention, metric_seed(seed, &config.config_id, "retention")),
        at_risk_retention: Estimate::of(&at_risk, metric_seed(seed, &config.config_id, "at_risk_retention")),
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
        let mut rng = SplitMix64(7);
        let trials = 200;
        let covered = (0..trials)
            .filter(|&t| {
                let sample: Vec<f64> = (0..30).map(|_| rng.below(11) as f64 / 10.0).collect();
                let (low, high) = bootstrap_ci(&sample, t).expect("values");
                low <= 0.5 && 0.5 <= high
            })
            .count();
        // Percentile intervals undercover slightly at n = 30; far outside 85-99% is a bug.
        assert!((170..=199).contains(&covered), "covered {covered} of {trials}");
    }
}
