//! The report crate's integration tests: one binary, one module per topic.

mod browser;
mod ci_gate;
mod common;
mod generated;
mod outputs;
mod python_csv;
mod readme;
mod verdict;
