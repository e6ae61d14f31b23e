//! A crate's module tree read from its source text, for the tidy checks: which files are
//! production code, how many production lines each has, and which modules each one names.
//!
//! The reading is lexical, not a compiler's: whole-line comments are left out, a top-level
//! `#[cfg(test)]` item (a `mod tests { ... }`, a `mod tests;` and its file) is not production,
//! and a module names another when a path in its production text resolves to it: `use` trees
//! (`use crate::{a::{b, c}, d}`), `crate::`, `super::` and `self::` paths anywhere in the
//! code, and paths that start with the name of one of its own child modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One module with a file of its own.
#[derive(Debug)]
pub struct Module {
    pub file: PathBuf,
    /// The file's lines that are production code: every line but those of a top-level
    /// `#[cfg(test)]` item.
    pub production_lines: usize,
    /// The production text, whole-line comments left out.
    text: String,
    /// Its child modules with a file, by name (test modules left out).
    children: BTreeSet<String>,
}

impl Module {
    /// The production text, whole-line comments left out.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// A crate's modules by path (`[]` for the crate root, `["replay", "recorded"]` for
/// `replay/recorded.rs`).
pub type Tree = BTreeMap<Vec<String>, Module>;

/// The production module tree of the crate whose root file is `root` (`src/lib.rs` or
/// `src/main.rs`).
pub fn tree(root: &Path) -> Tree {
    let mut out = Tree::new();
    load(root, Vec::new(), &mut out);
    out
}

fn load(file: &Path, path: Vec<String>, out: &mut Tree) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let lines = production(&text);
    let production_lines = lines.len();
    let text: String = lines.into_iter().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    let dir = if matches!(stem, "lib" | "main" | "mod") {
        file.parent().expect("a file has a folder").to_path_buf()
    } else {
        file.with_extension("")
    };
    let mut children = BTreeSet::new();
    for name in declared_modules(&text) {
        let flat = dir.join(format!("{name}.rs"));
        let nested = dir.join(&name).join("mod.rs");
        let child = if flat.exists() {
            flat
        } else if nested.exists() {
            nested
        } else {
            continue; // an inline `mod name { ... }`: part of this file
        };
        let mut child_path = path.clone();
        child_path.push(name.clone());
        load(&child, child_path, out);
        children.insert(name);
    }
    out.insert(path, Module { file: file.to_path_buf(), production_lines, text, children });
}

/// The lines of `text` that are production code: a top-level `#[cfg(test)]` attribute and the
/// item it is on (to its closing brace at column 0, or its `;`) are left out, wherever in the
/// file they are.
pub fn production(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if !line.starts_with("#[cfg(test)]") {
            out.push(line);
            continue;
        }
        // The item's doc comment is the item's.
        while out.last().is_some_and(|l: &&str| l.starts_with("///")) {
            out.pop();
        }
        // Skip the attributes, then the item.
        while let Some(next) = lines.peek() {
            if next.starts_with("#[") {
                lines.next();
            } else {
                break;
            }
        }
        // The item: one line ending in `;`, or to its closing brace at column 0 (the code is
        // rustfmt's, so a top-level item closes there, whatever braces its strings hold).
        let Some(first) = lines.next() else { break };
        if first.trim_end().ends_with(';') {
            continue;
        }
        for item in lines.by_ref() {
            if item.starts_with('}') {
                break;
            }
        }
    }
    out
}

/// The `mod name;` and `mod name {` declarations at the top level of a production text.
fn declared_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('\t'))
        .filter_map(|l| {
            let l = l.strip_prefix("pub ").or_else(|| l.strip_prefix("pub(crate) ")).unwrap_or(l);
            let rest = l.strip_prefix("mod ")?;
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// Every path a production text writes: each `use` tree expanded into its paths, and each
/// `a::b::c` path elsewhere, as segments.
fn paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // `use` trees.
    let mut rest = text;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        // ` as ` becomes `@` before the whitespace goes, so a renamed leaf keeps its path.
        let words: Vec<&str> = after[..end].split_whitespace().collect();
        let tree: String = words.join(" ").replace(" as ", "@").chars().filter(|c| !c.is_whitespace()).collect();
        expand(&tree, &mut Vec::new(), &mut out);
        rest = &after[end..];
    }
    // Paths in the code: a run of `ident::ident...` that no `::` precedes.
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if is_ident(bytes[i]) && (i == 0 || !is_ident(bytes[i - 1])) && !text[..i].ends_with("::") {
            let mut segments = Vec::new();
            let mut j = i;
            loop {
                let start = j;
                while j < bytes.len() && is_ident(bytes[j]) {
                    j += 1;
                }
                segments.push(text[start..j].to_string());
                if text[j..].starts_with("::")
                    && text[j + 2..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                {
                    j += 2;
                } else {
                    break;
                }
            }
            if segments.len() > 1 {
                out.push(segments);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// The byte offset of `word` standing alone (not inside a longer identifier) in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if !before.is_some_and(is_ident) && after.is_some_and(|c| c.is_whitespace()) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// Expand a `use` tree written without whitespace, a rename as `@` (`crate::{a::{b,c@d},e}`),
/// into its paths.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.strip_prefix("::").unwrap_or(tree);
    // The segments before a `{`, if any.
    match tree.find('{') {
        None => {
            let path = tree.split('@').next().unwrap_or(tree);
            let mut full = prefix.clone();
            full.extend(path.split("::").filter(|s| !s.is_empty() && *s != "*").map(String::from));
            if full.last().is_some_and(|s| s == "self") {
                full.pop();
            }
            if !full.is_empty() {
                out.push(full);
            }
        }
        Some(open) => {
            let head = &tree[..open];
            let body = tree[open + 1..].strip_suffix('}').unwrap_or(&tree[open + 1..]);
            let depth_before = prefix.len();
            prefix.extend(head.split("::").filter(|s| !s.is_empty()).map(String::from));
            // Split the body at top-level commas.
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in body.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&body[start..i], prefix, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            if start < body.len() {
                expand(&body[start..], prefix, out);
            }
            prefix.truncate(depth_before);
        }
    }
}

/// Module -> the other modules of its crate its production code names. A path resolves to
/// the longest module it starts with. A module's ancestors are not edges: a child module is a
/// part of its parent and lives in its namespace (and `crate::Name` of an item the root
/// re-exports resolves to the root, whichever module defines it), so a circle is among
/// modules none of which contains another.
pub fn uses(tree: &Tree) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut out = BTreeMap::new();
    for (here, module) in tree {
        let mut named = BTreeSet::new();
        for path in paths(&module.text) {
            let (mut base, rest): (Vec<String>, &[String]) = match path[0].as_str() {
                "crate" => (Vec::new(), &path[1..]),
                "self" => (here.clone(), &path[1..]),
                "super" => {
                    let mut base = here.clone();
                    let mut rest = &path[..];
                    while rest.first().is_some_and(|s| s == "super") {
                        base.pop();
                        rest = &rest[1..];
                    }
                    (base, rest)
                }
                first if module.children.contains(first) => (here.clone(), &path[..]),
                _ => continue,
            };
            let mut target = base.clone();
            for segment in rest {
                base.push(segment.clone());
                if tree.contains_key(&base) {
                    target = base.clone();
                } else {
                    break;
                }
            }
            if !here.starts_with(&target) {
                named.insert(target);
            }
        }
        out.insert(here.clone(), named);
    }
    out
}

/// The circles among a crate's modules: each strongly connected set of two or more modules,
/// written as one circle through them.
pub fn circles(uses: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for start in uses.keys() {
        if seen.contains(start) {
            continue;
        }
        // The modules `start` reaches and that reach it back.
        let forward = reach(uses, start);
        let set: Vec<&Vec<String>> = forward.iter().filter(|m| *m != start && reach(uses, m).contains(start)).collect();
        if set.is_empty() {
            continue;
        }
        let mut members: BTreeSet<Vec<String>> = set.into_iter().cloned().collect();
        members.insert(start.clone());
        seen.extend(members.iter().cloned());
        out.push(circle_through(uses, start, &members));
    }
    out
}

fn reach(uses: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>, from: &[String]) -> BTreeSet<Vec<String>> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_vec()];
    while let Some(m) = stack.pop() {
        for next in uses.get(&m).into_iter().flatten() {
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    seen
}

/// A shortest circle from `start` back to it inside `members` (a breadth-first walk).
fn circle_through(
    uses: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    start: &Vec<String>,
    members: &BTreeSet<Vec<String>>,
) -> Vec<Vec<String>> {
    let mut came_from: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.clone()]);
    while let Some(m) = queue.pop_front() {
        for next in uses.get(&m).into_iter().flatten().filter(|n| members.contains(*n)) {
            if next == start {
                let mut circle = vec![m.clone()];
                let mut at = m.clone();
                while &at != start {
                    at = came_from[&at].clone();
                    circle.push(at.clone());
                }
                circle.reverse();
                circle.push(start.clone());
                return circle;
            }
            if !came_from.contains_key(next) {
                came_from.insert(next.clone(), m.clone());
                queue.push_back(next.clone());
            }
        }
    }
    members.iter().cloned().collect()
}

/// A module path as its file would be named: `replay::recorded`, or `crate` for the root.
pub fn name(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        path.join("::")
    }
}

// The reading itself, on small texts: a tidy check that reads wrongly passes whatever it reads.

#[test]
fn a_top_level_test_item_is_not_production_wherever_it_is() {
    let text = "fn a() {}\n/// The tests.\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { let _ = \"{{\"; }\n}\n\nfn b() {}\n#[cfg(test)]\n#[path = \"x.rs\"]\nmod oracle;\nfn c() {}\n";
    assert_eq!(production(text), vec!["fn a() {}", "", "fn b() {}", "fn c() {}"]);
    // An indented `#[cfg(test)]` (on an item inside an impl) is left to the compiler.
    assert_eq!(production("impl A {\n    #[cfg(test)]\n    fn t() {}\n}\n").len(), 4);
}

#[test]
fn use_trees_and_inline_paths_are_read_whole() {
    let text = "use crate::{a::{b, c as d}, e::*};\nuse super::f;\nfn g() { crate::h::i(); x.y(); kid::z(); }";
    let got: BTreeSet<String> = paths(text).into_iter().map(|p| p.join("::")).collect();
    for want in ["crate::a::b", "crate::a::c", "crate::e", "super::f", "crate::h::i", "kid::z"] {
        assert!(got.contains(want), "{want} not read from the text; read {got:?}");
    }
    assert!(!got.iter().any(|p| p.contains("::d") || p.starts_with("x")), "{got:?}");
}

#[test]
fn a_circle_is_found_through_siblings_and_a_parent_is_not_one() {
    let m = |s: &str| -> Vec<String> { s.split("::").filter(|x| !x.is_empty()).map(String::from).collect() };
    let mut uses = BTreeMap::new();
    uses.insert(m("a"), BTreeSet::from([m("b::c")]));
    uses.insert(m("b"), BTreeSet::new());
    uses.insert(m("b::c"), BTreeSet::from([m("d")]));
    uses.insert(m("d"), BTreeSet::from([m("a")]));
    let found = circles(&uses);
    assert_eq!(found, vec![vec![m("a"), m("b::c"), m("d"), m("a")]]);
    uses.insert(m("d"), BTreeSet::new());
    assert!(circles(&uses).is_empty());
}
