//! What adding a strategy needs besides its module and its catalog row, each missing piece
//! named: a conformance test (`conformance.rs`, checked there), a reviewed snapshot per fixture,
//! a doc line for each parameter, and each prompt file beside the module listed by its
//! `prompts()` (that every requested prompt is listed is checked in `conformance.rs`).

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

#[test]
fn every_prompt_file_beside_a_module_is_listed_by_its_strategy() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let listed = compaction_strategies::prompts();
    let mut missing = Vec::new();
    let mut files = 0;
    for dir in std::fs::read_dir(&src).expect("src").flatten().filter(|e| e.path().is_dir()) {
        let module = dir.file_name().to_string_lossy().to_string();
        for file in std::fs::read_dir(dir.path()).expect("module folder").flatten() {
            let path = file.path();
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            files += 1;
            let stem = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
            let text = std::fs::read_to_string(&path).expect("prompt file");
            let found = listed
                .iter()
                .any(|(owner, p)| owner.replace('-', "_") == module && p.name == stem && p.template == text);
            if !found {
                missing.push(format!(
                    "src/{module}/{stem}.md: no prompt of `{module}` named {stem} with this text; list it in the \
                     module's prompts()"
                ));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    assert_eq!(files, listed.len(), "every listed prompt is a file beside its module");
}
