//! The compaction crate's integration tests: one binary, one module per topic.

mod applicability;
mod conformance;
mod core;
mod snapshots;
