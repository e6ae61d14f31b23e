//! The testkit crate's integration tests: one binary, one module per topic.

mod kit;

mod tidy;
