//! The dataset crate's integration tests: one binary, one module per topic.

mod calibration;
mod import_fixtures;
mod keys;
mod readme_example;
mod schema;
mod structure;
