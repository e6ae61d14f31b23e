//! experiments/README.md documents every strategy parameter: its generated section is exactly
//! what `compactlens strategies --markdown` prints, and names every parameter of the catalog.

use std::path::Path;
use std::process::Command;

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text between the `strategies` markers.
fn section(text: &str) -> &str {
    let begin = "<!-- strategies:begin -->\n";
    let start = text.find(begin).expect("experiments/README.md has a strategies:begin marker") + begin.len();
    let len = text[start..].find("<!-- strategies:end -->").expect("and a strategies:end marker");
    &text[start..start + len]
}

#[test]
fn the_parameter_section_is_the_catalog_as_markdown() {
    let out = Command::new(env!("CARGO_BIN_EXE_compactlens"))
        .args(["strategies", "--markdown"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let generated = String::from_utf8(out.stdout).expect("UTF-8");
    let text = readme();
    assert!(
        section(&text) == generated,
        "experiments/README.md's parameter tables differ from `compactlens strategies --markdown`: run `scripts/regenerate.sh`"
    );
}

#[test]
fn every_parameter_of_every_strategy_has_a_row_with_its_default() {
    let text = readme();
    let section = section(&text);
    for s in compaction_strategies::catalog() {
        let heading = format!("#### `{}`\n", s.name);
        let start = section.find(&heading).unwrap_or_else(|| panic!("no heading for {}", s.name));
        let body = &section[start + heading.len()..];
        let body = &body[..body.find("#### ").unwrap_or(body.len())];
        for p in &s.params {
            let row = format!("| `{}` | ", p.name);
            let line = body
                .lines()
                .find(|l| l.starts_with(&row))
                .unwrap_or_else(|| panic!("{}: no row for {}", s.name, p.name));
            assert!(
                line.contains(&format!("`{}`", p.default)),
                "{}.{}: default {} missing in {line}",
                s.name,
                p.name,
                p.default
            );
        }
    }
}
