//! compactlens's benches: one criterion binary, one module per topic.
//!
//! ```text
//! cargo bench -p compactlens-benches                 # everything
//! cargo bench -p compactlens-benches -- tokens/      # one topic (a name filter)
//! cargo test -p compactlens-benches --benches        # each bench once, as a smoke test
//! cargo bench -p compactlens-benches --bench experiment   # the whole default experiment, 1 and 2 threads
//! ```
//!
//! Every group keeps criterion's runs short (see [`topics::quick`]): small samples and short
//! measurement times, so the whole suite fits a two-core machine. `benches/RESULTS.md` records
//! the figures and how they compare with the targets.

#![allow(clippy::print_stderr)] // a bench that cannot load its input says so and the others go on

use criterion::{criterion_group, criterion_main};

mod topics;

criterion_group!(
    benches,
    topics::tokens::bench,
    topics::strategies::bench,
    topics::replay::bench,
    topics::protocol::bench
);
criterion_main!(benches);
