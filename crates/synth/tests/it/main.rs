//! The synth crate's integration tests: one binary, one module per topic.

mod synth;
