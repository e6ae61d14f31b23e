//! The workspace's rules, checked (rust-analyzer's `tidy` in spirit): the crate layering read
//! from `cargo metadata`, no module circle inside the kernel nor inside the runner, and no
//! production file over 1,500 lines. ARCHITECTURE.md states these rules and points here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The longest a production file may be: its lines before its unit-test module.
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
    let never: [(&str, &[&str]); 5] = [
        ("report", &["tokio", "reqwest", "rayon", "runner", "dataset"]),
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

/// A file's production part: its lines before its `#[cfg(test)]` module, comment lines and
/// doc lines left out.
fn production(text: &str) -> Vec<&str> {
    text.lines().take_while(|l| !l.starts_with("#[cfg(test)]")).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_kernel_has_no_module_circle() {
    let src = root().join("crates/compaction/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(String::from))
        .filter(|m| m != "lib")
        .collect();
    // module -> the modules its production code names as `crate::module`.
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let module = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("readable");
        let mut named = BTreeSet::new();
        for line in production(&text).into_iter().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if word != module && modules.contains(&word) && rest[word.len()..].starts_with("::") {
                    named.insert(word);
                }
            }
        }
        uses.insert(module, named);
    }
    // A depth-first walk; a module met again on the current path closes a circle.
    fn visit(
        m: &str,
        uses: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|x| x == m) {
            let mut circle = path[at..].to_vec();
            circle.push(m.to_string());
            return Some(circle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in uses.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, uses, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in uses.keys() {
        if let Some(circle) = visit(m, &uses, &mut Vec::new(), &mut done) {
            panic!("a module circle in the kernel (crates/compaction/src): {}", circle.join(" -> "));
        }
    }
    // The layering holds one way: what a module names is named nowhere below it.
    assert!(!uses["plan"].contains("strategy"), "plan.rs (the vocabulary) must not name the Strategy trait");
}

/// The paths a runner module's production code names other modules by: `crate::a::b` (also
/// inside `crate::{a, b::c}` trees) and `super::` paths, resolved against `module` (its
/// path, `judge::offline`), each given as a module path from the crate root.
fn named_paths(module: &str, text: &str) -> Vec<String> {
    let word = |rest: &str| -> String {
        rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect()
    };
    let mut out = Vec::new();
    for line in production(text).into_iter().filter(|l| !l.trim_start().starts_with("//")) {
        for (i, _) in line.match_indices("crate::") {
            let rest = &line[i + "crate::".len()..];
            match rest.strip_prefix('{') {
                Some(tree) => {
                    let tree = tree.split('}').next().unwrap_or_default();
                    out.extend(tree.split(',').map(|item| word(item.trim())));
                }
                None => out.push(word(rest)),
            }
        }
        for (i, _) in line.match_indices("super::") {
            // Only the first `super::` of a run: `super::super::x` is read once.
            if line[..i].ends_with("super::") {
                continue;
            }
            let mut rest = &line[i..];
            let mut base: Vec<&str> = module.split("::").collect();
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let mut path = base.join("::");
            let named = word(rest);
            if !named.is_empty() {
                path = if path.is_empty() { named } else { format!("{path}::{named}") };
            }
            out.push(path);
        }
    }
    out
}

/// A circle in `uses` (module -> the modules it names), if there is one.
fn circle_in(uses: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        uses: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|x| x == m) {
            let mut circle = path[at..].to_vec();
            circle.push(m.to_string());
            return Some(circle);
        }
        if !done.insert(m.to_string()) {
            return None;
        }
        path.push(m.to_string());
        for next in uses.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, uses, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    uses.keys().find_map(|m| visit(m, uses, &mut Vec::new(), &mut done))
}

#[test]
fn the_runner_has_no_module_circle() {
    let src = root().join("crates/runner/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // Each file's module path: `replay/recorded.rs` is `replay::recorded`, `judge/mod.rs` is
    // `judge`.
    let module_of = |p: &Path| -> Option<String> {
        let rel = p.strip_prefix(&src).ok()?.with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|l| l == "mod") {
            parts.pop();
        }
        (parts != ["lib"]).then(|| parts.join("::"))
    };
    let modules: BTreeSet<String> = files.iter().filter_map(|p| module_of(p)).collect();
    assert!(modules.contains("replay::recorded") && modules.contains("judge::offline"), "{modules:?}");
    // The longest module a path names.
    let resolve = |path: &str| -> Option<String> {
        let parts: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|m| modules.contains(m))
    };
    // File by file, and folded to the top-level modules (`replay` with everything under it).
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let Some(module) = module_of(path) else { continue };
        let text = std::fs::read_to_string(path).expect("readable");
        let named: BTreeSet<String> =
            named_paths(&module, &text).iter().filter_map(|p| resolve(p)).filter(|m| *m != module).collect();
        let head = |m: &str| m.split("::").next().unwrap_or_default().to_string();
        let above: BTreeSet<String> = named.iter().map(|m| head(m)).filter(|m| *m != head(&module)).collect();
        top.entry(head(&module)).or_default().extend(above);
        uses.insert(module, named);
    }
    assert!(uses["replay"].contains("judge"), "the replay names the judge: {:?}", uses["replay"]);
    if let Some(circle) = circle_in(&uses) {
        panic!("a module circle in the runner (crates/runner/src): {}", circle.join(" -> "));
    }
    if let Some(circle) = circle_in(&top) {
        panic!("a circle among the runner's top-level modules: {}", circle.join(" -> "));
    }
}

#[test]
fn no_production_file_is_over_the_limit() {
    let mut files = Vec::new();
    for dir in ["crates", "benches/src"] {
        let mut all = Vec::new();
        rust_files(&root().join(dir), &mut all);
        files.extend(all.into_iter().filter(|p| {
            let s = p.to_string_lossy();
            s.contains("/src/") && !s.contains("/tests/")
        }));
    }
    assert!(files.len() > 50, "found only {} source files under {}", files.len(), root().display());
    let mut over: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            let n = production(&text).len();
            (n > MAX_PRODUCTION_LINES).then(|| format!("{} has {n} production lines", p.display()))
        })
        .collect();
    over.sort();
    assert!(
        over.is_empty(),
        "production files over {MAX_PRODUCTION_LINES} lines (split them, or move test oracles to tests/):\n{}",
        over.join("\n")
    );
}
