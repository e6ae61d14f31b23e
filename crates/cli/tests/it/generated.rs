//! The files generated from the strategy catalog are up to date: `compactlens generated` (the
//! check `scripts/regenerate.sh` ends with) passes on the repository.

use std::path::Path;
use std::process::Command;

#[test]
fn every_file_generated_from_the_catalog_is_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_compactlens"))
        .args(["generated", "--root"])
        .arg(&root)
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.code() == Some(0),
        "files generated from the strategy catalog are stale: run `scripts/regenerate.sh`\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_stale_file_is_named_with_the_command_and_write_brings_it_up_to_date() {
    let dir = std::env::temp_dir().join(format!("compactlens-generated-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::create_dir_all(dir.join("experiments")).expect("temp dir");
    std::fs::create_dir_all(dir.join("reports/baseline")).expect("temp dir");
    for file in ["experiments/README.md", "experiments/ci.toml", "experiments/prices.toml"] {
        std::fs::copy(root.join(file), dir.join(file)).expect("copies");
    }
    for file in ["summary.csv", "results.csv"] {
        std::fs::copy(root.join("reports/baseline").join(file), dir.join("reports/baseline").join(file))
            .expect("copies");
    }
    // A strategy's table taken out of ci.toml, as when the catalog gains one.
    let ci = std::fs::read_to_string(dir.join("experiments/ci.toml")).expect("reads");
    let last = compaction_strategies::NAMES[compaction_strategies::NAMES.len() - 1];
    let table = format!("\n[[strategy]]\nname = \"{last}\"\n");
    assert!(ci.contains(&table), "ci.toml has a table for {last}");
    std::fs::write(dir.join("experiments/ci.toml"), ci.replace(&table, "")).expect("writes");
    let generated = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_compactlens"))
            .arg("generated")
            .args(args)
            .arg("--root")
            .arg(&dir)
            .output()
            .expect("the binary runs")
    };
    let out = generated(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("stale:") && stdout.contains("ci.toml"), "{stdout}");
    assert!(stdout.contains("scripts/regenerate.sh"), "names the command: {stdout}");
    let out = generated(&["--write"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.join("experiments/ci.toml")).expect("reads"), ci, "the table is back");
    assert_eq!(generated(&[]).status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}
