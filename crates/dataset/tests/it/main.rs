//! The dataset crate's integration tests: one binary, one module per topic.

mod calibration;
mod import_fixtures;
mod keys;
mod readme_example;
mod recorded_structure;
mod schema;
mod structure;
