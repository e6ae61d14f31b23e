//! `compactbench strategies --json`: the catalog as data.

use std::process::Command;

#[test]
fn strategies_json_lists_the_eight_strategies_with_their_params() {
    let out = Command::new(env!("CARGO_BIN_EXE_compactbench"))
        .args(["strategies", "--json"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let entries = json.as_array().expect("an array");

    let names: Vec<&str> = entries.iter().map(|e| e["name"].as_str().expect("name is a string")).collect();
    assert_eq!(names, compaction::strategies::NAMES.to_vec());

    for e in entries {
        let name = &e["name"];
        let source = e["source"].as_str().unwrap_or_else(|| panic!("{name}: source is a string"));
        assert!(!source.is_empty(), "{name}: empty source");
        let params = e["params"].as_array().unwrap_or_else(|| panic!("{name}: params is an array"));
        for p in params {
            let pname = p["name"].as_str().unwrap_or_else(|| panic!("{name}: param name is a string"));
            assert!(!pname.is_empty(), "{name}: empty param name");
            assert!(p["type"].as_str().is_some_and(|t| !t.is_empty()), "{name}.{pname}: type is a non-empty string");
            assert!(p.get("default").is_some(), "{name}.{pname}: default present");
            // Every params field carries a doc comment, which becomes its meaning.
            assert!(p["meaning"].as_str().is_some_and(|m| !m.trim().is_empty()), "{name}.{pname}: meaning is empty");
        }
    }
    // The five seed strategies name their document; the three baselines do not.
    let seeded = entries.iter().filter(|e| e["source"].as_str() != Some("baseline")).count();
    assert_eq!(seeded, 5, "{json:#}");
}
