//! The plain statistics the summaries and the drift figures share: the mean and the
//! nearest-rank percentile.

/// The arithmetic mean; `None` for no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Nearest-rank percentile `q` (0..=1) of sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_and_the_nearest_rank_percentile() {
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        let sorted = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&sorted, 0.5), Some(0.5));
        assert_eq!(percentile(&sorted, 0.95), Some(1.0));
        assert_eq!(percentile(&sorted, 0.0), Some(0.1), "rank 0 is the smallest");
        assert_eq!(percentile(&sorted, 1.0), Some(1.0));
    }
}
