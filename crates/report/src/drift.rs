//! Drift across repeated compactions, per configuration and compaction round.
//!
//! A conversation's compaction **rounds** are its calls that compacted, in order (several
//! compaction events of one call, a proactive one and a reactive retry, are one round). For
//! each round: the exact size of the context right after it (the last event of that call's
//! `tokens_after`), the calls until the next round, and the retention of the probes whose
//! source message went through that many rounds before they were asked (round 0: none).
//!
//! - `post_compaction_growth`: per conversation with at least two rounds, the size after its
//!   last round over the size after its first, minus 1 (0.25: the context starts 25% larger
//!   after the last compaction than after the first, so compactions come closer together);
//!   the mean over those conversations.
//! - `median_calls_between_compactions`: the median, over every pair of consecutive rounds of
//!   every conversation, of the calls between them.

use runlog::record::PairMetrics;

use crate::stats::{mean, percentile};

/// One compaction round of a configuration, over its conversations.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Round {
    /// 1-based round; 0 is the row of probes whose source went through no compaction.
    pub round: u32,
    /// Conversations that reached this round.
    pub conversations: usize,
    /// Mean exact tokens of the context right after this round.
    pub size_after: Option<f64>,
    /// Median calls from this round to the next (over the conversations that had a next).
    pub calls_to_next: Option<f64>,
    /// Mean score of the probes whose source went through this many rounds.
    pub retention: Option<f64>,
    /// Probe scores the retention is over.
    pub probes: usize,
}

/// The drift figures of one configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Drift {
    pub post_compaction_growth: Option<f64>,
    pub median_calls_between_compactions: Option<f64>,
    /// Round 0 (probes that went through no compaction) to the last round reached.
    pub rounds: Vec<Round>,
}

/// The rounds of one pair: (call, exact tokens right after it).
pub fn rounds_of(m: &PairMetrics) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = Vec::new();
    for e in &m.compaction_events {
        match out.last_mut() {
            Some(last) if last.0 == e.call => last.1 = e.tokens_after,
            _ => out.push((e.call, e.tokens_after)),
        }
    }
    out
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    percentile(&values, 0.5)
}

/// The drift of a configuration over its replayed pairs.
pub fn drift(pairs: &[&PairMetrics]) -> Drift {
    let per_pair: Vec<Vec<(u32, u64)>> = pairs.iter().map(|m| rounds_of(m)).collect();
    let growth: Vec<f64> = per_pair
        .iter()
        .filter(|r| r.len() >= 2 && r[0].1 > 0)
        .map(|r| r[r.len() - 1].1 as f64 / r[0].1 as f64 - 1.0)
        .collect();
    let gaps: Vec<f64> =
        per_pair.iter().flat_map(|r| r.windows(2).map(|w| f64::from(w[1].0 - w[0].0)).collect::<Vec<_>>()).collect();
    let deepest_round = per_pair.iter().map(Vec::len).max().unwrap_or(0);
    let deepest_probe = pairs.iter().flat_map(|m| m.probe_compactions.iter().copied()).max().unwrap_or(0) as usize;
    let last = deepest_round.max(deepest_probe);
    let mut rounds = Vec::with_capacity(last + 1);
    for k in 0..=last {
        let reached: Vec<&Vec<(u32, u64)>> = per_pair.iter().filter(|r| k >= 1 && r.len() >= k).collect();
        let sizes: Vec<f64> = reached.iter().map(|r| r[k - 1].1 as f64).collect();
        let to_next: Vec<f64> =
            reached.iter().filter(|r| r.len() > k).map(|r| f64::from(r[k].0 - r[k - 1].0)).collect();
        let scores: Vec<f64> = pairs
            .iter()
            .flat_map(|m| m.probes.iter().zip(&m.probe_compactions))
            .filter(|(p, rounds)| **rounds as usize == k && p.score.is_finite() && runlog::record::is_scored(p))
            .map(|(p, _)| p.score)
            .collect();
        rounds.push(Round {
            round: u32::try_from(k).unwrap_or(u32::MAX),
            conversations: reached.len(),
            size_after: mean(&sizes),
            calls_to_next: median(to_next),
            retention: mean(&scores),
            probes: scores.len(),
        });
    }
    Drift { post_compaction_growth: mean(&growth), median_calls_between_compactions: median(gaps), rounds }
}

#[cfg(test)]
mod tests {
    use runlog::record::{CompactionRecord, ProbeScore};

    use super::*;

    fn event(call: u32, tokens_after: u64) -> CompactionRecord {
        let mut e: CompactionRecord =
            serde_json::from_value(serde_json::json!({"call": call, "trigger": "proactive", "step": "s",
                "tokens_before": 0, "tokens_after": tokens_after, "estimate_before": 0, "estimate_after": 0,
                "messages_before": 0, "messages_after": 0, "removed": 0, "masked": 0, "round": 1,
                "fallback": null, "shortfall": 0, "summary": "", "violations": []}))
            .expect("a compaction record");
        e.call = call;
        e
    }

    fn probe(score: f64) -> ProbeScore {
        serde_json::from_value(serde_json::json!({"probe_id": "p", "kind": "recall", "asked_at": 1, "at_risk": true,
            "score": score, "facts": [], "judge": "offline"}))
        .expect("a probe score")
    }

    #[test]
    fn a_context_that_starts_larger_after_each_compaction_shows_growth_and_closer_rounds() {
        // Rounds at calls 10, 16, 20, 22 (a reactive retry at call 16 is the same round),
        // each leaving a larger context: 1,000 -> 1,600 tokens.
        let m = PairMetrics {
            compaction_events: vec![
                event(10, 1_000),
                event(16, 1_300),
                event(16, 1_200),
                event(20, 1_400),
                event(22, 1_600),
            ],
            probes: vec![probe(1.0), probe(0.5), probe(0.0), probe(1.0)],
            probe_compactions: vec![0, 1, 4, 4],
            ..PairMetrics::default()
        };
        let d = drift(&[&m]);
        assert_eq!(rounds_of(&m), vec![(10, 1_000), (16, 1_200), (20, 1_400), (22, 1_600)]);
        let growth = d.post_compaction_growth.expect("two rounds or more");
        assert!((growth - 0.6).abs() < 1e-12, "{growth}");
        // Gaps 6, 4, 2: the median is 4.
        assert_eq!(d.median_calls_between_compactions, Some(4.0));
        assert_eq!(d.rounds.len(), 5);
        assert_eq!(d.rounds[0].retention, Some(1.0));
        assert_eq!(d.rounds[1].size_after, Some(1_000.0));
        assert_eq!(d.rounds[1].calls_to_next, Some(6.0));
        assert_eq!(d.rounds[1].retention, Some(0.5));
        assert_eq!(d.rounds[4].calls_to_next, None, "the last round has no next");
        assert_eq!((d.rounds[4].retention, d.rounds[4].probes), (Some(0.5), 2));
    }

    #[test]
    fn one_round_has_no_growth_and_no_gap() {
        let m = PairMetrics { compaction_events: vec![event(3, 500)], ..PairMetrics::default() };
        let d = drift(&[&m]);
        assert_eq!(d.post_compaction_growth, None);
        assert_eq!(d.median_calls_between_compactions, None);
    }
}
