//! The llm crate's integration tests: one binary, one module per topic.

mod faults;
mod live;
