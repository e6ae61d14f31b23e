//! The workspace's rules, checked (rust-analyzer's `tidy` in spirit): the crate layering read
//! from `cargo metadata`, no module circle in any crate (read from `use` trees and paths, see
//! `source`), no crate re-exporting another's items, and no production file over 1,500 lines.
//! ARCHITECTURE.md states these rules and points here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod source;

/// The longest a production file may be: its lines, less those of its top-level
/// `#[cfg(test)]` items.
const MAX_PRODUCTION_LINES: usize = 1_500;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `cargo metadata` of the workspace's own crates.
fn metadata() -> Value {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// The workspace's crates by name, each with its direct normal (not dev, not build)
/// dependencies.
fn direct_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let meta = metadata();
    let mut out = BTreeMap::new();
    for p in meta["packages"].as_array().expect("packages") {
        let name = p["name"].as_str().expect("name");
        let deps = p["dependencies"].as_array().expect("dependencies");
        let normal = deps.iter().filter(|d| d["kind"].is_null()).filter_map(|d| d["name"].as_str()).map(String::from);
        out.insert(name.to_string(), normal.collect());
    }
    out
}

/// Every crate `name` reaches through normal dependencies, with the features `name` itself
/// turns on (`cargo tree` resolves per package; the metadata's graph unifies the features of
/// the whole workspace, so `llm` would look as if it had its `http` feature everywhere).
fn reaches(name: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "-p", name, "-e", "normal", "--prefix", "none", "--format", "{p}"])
        .current_dir(root())
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree -p {name} failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().filter_map(|l| l.split_whitespace().next()).filter(|n| *n != name).map(String::from).collect()
}

#[test]
fn crates_keep_their_layers() {
    let direct = direct_dependencies();
    let mut problems = Vec::new();
    // Direct dependencies a crate may have (normal ones; tests may use more).
    let only: [(&str, &[&str]); 2] = [
        // The kernel: our seeded, serde for the formats, schemars for the dataset schema,
        // thiserror for typed errors, bpe-openai for exact token counts.
        ("compaction", &["seeded", "serde", "serde_json", "schemars", "thiserror", "bpe-openai"]),
        // The catalog: the kernel and what its params need.
        ("compaction-strategies", &["compaction", "seeded", "serde", "serde_json", "schemars", "thiserror"]),
    ];
    for (name, allowed) in only {
        for dep in &direct[name] {
            if !allowed.contains(&dep.as_str()) {
                problems.push(format!("{name} depends on {dep}; it may depend only on {}", allowed.join(", ")));
            }
        }
    }
    // Crates a crate must never reach, through any normal dependency.
    let never: [(&str, &[&str]); 6] = [
        // A report is a view of a run folder: no engine, no datasets, no strategies.
        ("report", &["tokio", "reqwest", "rayon", "runner", "dataset", "compaction-strategies"]),
        // The run log is plain data and files: no strategy, no network, no threads.
        ("runlog", &["tokio", "reqwest", "rayon", "runner", "dataset", "compaction-strategies"]),
        ("dataset", &["tokio", "reqwest", "rayon", "runner", "llm"]),
        ("compaction", &["tokio", "reqwest", "rayon", "compaction-strategies"]),
        ("compaction-strategies", &["tokio", "reqwest", "rayon", "runner", "llm", "dataset"]),
        ("synth", &["tokio", "reqwest", "rayon", "runner", "llm", "dataset", "compaction-strategies"]),
    ];
    for (name, forbidden) in never {
        let reached = reaches(name);
        for f in forbidden.iter().filter(|f| reached.contains(**f)) {
            problems
                .push(format!("{name} reaches {f} through its normal dependencies (`cargo tree -p {name} -e normal`)"));
        }
    }
    // Direct dependencies a crate must not take (it may reach them through another crate).
    for dep in ["runner", "llm"].iter().filter(|d| direct["report"].contains(**d)) {
        problems.push(format!("report depends on {dep} directly"));
    }
    for (name, deps) in &direct {
        if deps.contains("compactlens") {
            problems.push(format!("{name} depends on the binary crate compactlens"));
        }
    }
    assert!(problems.is_empty(), "the crate layering of ARCHITECTURE.md is broken:\n{}", problems.join("\n"));
}

/// `path` from the workspace's root, for messages.
fn relative(path: &Path) -> String {
    let root = root().canonicalize().expect("the workspace root exists");
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(&root).unwrap_or(&path).display().to_string()
}

/// Every crate of the workspace with its root files (`src/lib.rs`, `src/main.rs`), and the
/// benches' library.
fn crate_roots() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/").flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        for file in ["src/lib.rs", "src/main.rs"] {
            let path = entry.path().join(file);
            if path.exists() {
                out.push((format!("{name} ({file})"), path));
            }
        }
    }
    out.push(("benches (src/lib.rs)".to_string(), root().join("benches/src/lib.rs")));
    out.sort();
    assert!(out.len() >= 12, "found only {} crate roots under {}", out.len(), root().display());
    out
}

#[test]
fn no_crate_has_a_module_circle() {
    let mut found = Vec::new();
    for (krate, file) in crate_roots() {
        let tree = source::tree(&file);
        let uses = source::uses(&tree);
        for circle in source::circles(&uses) {
            let names: Vec<String> = circle.iter().map(|m| source::name(m)).collect();
            found.push(format!("{krate}: {}", names.join(" -> ")));
        }
        if krate.starts_with("compaction (") {
            // The layering holds one way: the vocabulary never names the trait that uses it.
            let plan = uses.get(&vec!["plan".to_string()]).expect("the kernel has plan.rs");
            assert!(
                !plan.contains(&vec!["strategy".to_string()]),
                "plan.rs (the vocabulary) must not name the Strategy trait"
            );
        }
    }
    assert!(found.is_empty(), "module circles (each module names the next; break one link):\n{}", found.join("\n"));
}

#[test]
fn no_crate_re_exports_another() {
    let crates: Vec<String> = direct_dependencies().keys().map(|n| n.replace('-', "_")).collect();
    let mut found = Vec::new();
    for (_, file) in crate_roots() {
        for module in source::tree(&file).values() {
            for line in module.text().lines() {
                let Some(path) = line.trim_start().strip_prefix("pub use ") else { continue };
                let first: String = path.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if crates.contains(&first) {
                    found.push(format!("{}: {}", relative(&module.file), line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a crate re-exports another workspace crate's items (import them from their own crate):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_production_file_is_over_the_limit() {
    let mut over = Vec::new();
    let mut files = 0;
    for (_, file) in crate_roots() {
        for module in source::tree(&file).values() {
            files += 1;
            if module.production_lines > MAX_PRODUCTION_LINES {
                over.push(format!("{} has {} production lines", relative(&module.file), module.production_lines));
            }
        }
    }
    assert!(files > 100, "found only {files} production files under {}", root().display());
    over.sort();
    assert!(
        over.is_empty(),
        "production files over {MAX_PRODUCTION_LINES} lines (split them, or move test oracles to tests/):\n{}",
        over.join("\n")
    );
}
