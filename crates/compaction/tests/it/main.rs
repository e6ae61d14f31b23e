//! The kernel's integration tests: one binary, one module per topic (the strategies' own
//! conformance, snapshots and applicability tests are the `compaction-strategies` crate's).

mod core;
