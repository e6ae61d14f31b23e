//! The compaction crate's integration tests: one binary, one module per topic.

mod conformance;
mod core;
mod snapshots;
