//! The topics of the bench binary.

pub mod protocol;
pub mod replay;
pub mod strategies;
pub mod tokens;

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;

/// Short runs for a two-core machine: `samples` samples (criterion's minimum is 10), one second
/// of warm-up and `seconds` of measurement per benchmark.
pub fn quick(group: &mut BenchmarkGroup<'_, WallTime>, samples: usize, seconds: u64) {
    group.sample_size(samples.max(10));
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(seconds));
}
