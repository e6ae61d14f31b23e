//! The strategy catalog's integration tests: one binary, one module per topic.

mod applicability;
mod catalog;
mod conformance;
mod driver;
mod masking;
mod snapshots;
