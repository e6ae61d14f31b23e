//! What adding a strategy needs besides its module and its catalog row, each missing piece
//! named: a conformance test (`conformance.rs`, checked there), a reviewed snapshot per fixture
//! and a doc line for each parameter.

use std::path::Path;

use compaction_strategies::{catalog, NAMES};

/// The fixtures of `snapshots.rs`, as their snapshot files name them.
const FIXTURES: [&str; 3] = ["coding", "paper", "customer"];

#[test]
fn every_strategy_has_a_reviewed_snapshot_per_fixture() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    let mut missing = Vec::new();
    for name in NAMES {
        for fixture in FIXTURES {
            let file = format!("it__snapshots__{fixture}__{name}.snap");
            if !dir.join(&file).is_file() {
                missing.push(format!("{name}: no snapshot tests/it/snapshots/{file}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{}\nrun `cargo insta test -p compaction-strategies`, review the new shapes and commit them",
        missing.join("\n")
    );
}

#[test]
fn every_parameter_is_documented() {
    let mut missing = Vec::new();
    for s in catalog() {
        if s.summary.trim().is_empty() {
            missing.push(format!("{}: its module's SUMMARY line is empty", s.name));
        }
        for p in s.params.iter().filter(|p| p.meaning.trim().is_empty()) {
            missing.push(format!(
                "{}.{}: no doc comment on the Params field (it is the parameter's meaning)",
                s.name, p.name
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
