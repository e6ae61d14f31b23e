//! The dataset crate's integration tests: one binary, one module per topic.

mod calibration;
mod import_fixtures;
mod readme_example;
mod schema;
