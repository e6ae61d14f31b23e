//! Hand-written fixtures for every import format, checked by one function.
//!
//! `tests/fixtures/import/<format>/` holds small input files. For each input `<case>.<ext>`
//! the check imports it with `--format <format>` and compares the result with two expected
//! files beside it: `<case>.expected.jsonl` (the conversations, one per line, as `import`
//! writes them) and `<case>.strict.txt` (the repair report in the default mode, then the
//! errors `--strict` gives, which name file, line and field). It also checks that `auto` picks
//! the same format and that every imported conversation validates.
//!
//! For the cases in [`PROBE_CASES`], a third file, `<case>.probes.jsonl`, holds the probes
//! `compactlens probes derive` gives with its default bounds (one line per probe, with its
//! conversation id), so a change to the derivation shows up as a reviewed diff.
//!
//! Run with `COMPACTLENS_BLESS=1` to rewrite the expected files after a deliberate change,
//! then review the diff.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use dataset::check_conversation;
use dataset::import::{import_str, sniff, Format, FormatChoice, ImportOptions};
use dataset::probes::{derive, DeriveParams};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/import");

/// Fixtures whose derived probes are pinned: a Claude Code session (task, artifact, recall and
/// continuation probes from the recording) and a tau2 simulation file (gold actions).
const PROBE_CASES: [(Format, &str); 2] = [(Format::ClaudeCode, "session.jsonl"), (Format::Tau2, "simulations.json")];

fn is_expectation(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.ends_with(".expected.jsonl") || name.ends_with(".strict.txt") || name.ends_with(".probes.jsonl")
}

/// The inputs of one format's folder, in name order.
fn cases(format: Format) -> Vec<PathBuf> {
    let dir = Path::new(FIXTURES).join(format.name());
    let mut out: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && !is_expectation(p))
        .collect();
    out.sort();
    out
}

/// Compare `actual` with the file at `path`, or rewrite it when blessing. Returns a
/// description of the mismatch, if any.
fn expect(path: &Path, actual: &str) -> Option<String> {
    if std::env::var_os("COMPACTLENS_BLESS").is_some() {
        fs::write(path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return None;
    }
    let expected = fs::read_to_string(path).unwrap_or_default();
    (expected != actual).then(|| {
        format!(
            "{} differs (run with COMPACTLENS_BLESS=1 to accept):\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        )
    })
}

/// Import one case both ways and compare with its expectations.
fn check(format: Format, input: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let text = fs::read_to_string(input).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
    let name = input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let key = dataset::import::file_key(Path::new(&name));
    let display = PathBuf::from(format!("{}/{name}", format.name()));

    match sniff(input, &text) {
        Ok(s) if s.format == format => {}
        other => problems.push(format!("{}: auto picks {other:?}, not {format}", display.display())),
    }

    let lenient = import_str(
        &text,
        &display,
        &key,
        &ImportOptions { format: FormatChoice::Exact(format), strict: false, include_compaction_calls: false },
    );
    let mut jsonl = String::new();
    for conv in &lenient.conversations {
        jsonl.push_str(&serde_json::to_string(conv).expect("a conversation serializes"));
        jsonl.push('\n');
        for p in check_conversation(conv) {
            problems.push(format!("{}: imported conversation does not validate: {p}", display.display()));
        }
    }
    let strict = import_str(
        &text,
        &display,
        &key,
        &ImportOptions { format: FormatChoice::Exact(format), strict: true, include_compaction_calls: false },
    );
    let mut report = String::new();
    let _ = writeln!(report, "default: {}", lenient.report);
    for r in &lenient.report.repairs {
        let _ = writeln!(report, "  repair: line {:?}, field {}: {}: {}", r.line, r.field, r.kind, r.detail);
    }
    for e in &lenient.errors {
        let _ = writeln!(report, "  error: {e}");
    }
    let _ = writeln!(report, "strict: {} conversations, {} errors", strict.conversations.len(), strict.errors.len());
    for e in &strict.errors {
        let _ = writeln!(report, "  {e}");
    }
    let stem = input.with_file_name(key.rsplit('/').next().unwrap_or(&key));
    let stem = stem.to_string_lossy();
    problems.extend(expect(Path::new(&format!("{stem}.expected.jsonl")), &jsonl));
    problems.extend(expect(Path::new(&format!("{stem}.strict.txt")), &report));
    problems
}

#[test]
fn derived_probes_of_the_pinned_fixtures_are_as_expected() {
    let mut problems = Vec::new();
    for (format, name) in PROBE_CASES {
        let input = Path::new(FIXTURES).join(format.name()).join(name);
        let text = fs::read_to_string(&input).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        let key = dataset::import::file_key(Path::new(name));
        let out = import_str(
            &text,
            &input,
            &key,
            &ImportOptions { format: FormatChoice::Exact(format), strict: false, include_compaction_calls: false },
        );
        assert!(out.errors.is_empty(), "{}: {:?}", input.display(), out.errors);
        let mut jsonl = String::new();
        let mut count = 0;
        for conv in &out.conversations {
            let probes = derive(conv, &DeriveParams::default());
            assert!(!probes.is_empty(), "{}: {} has no derived probe", input.display(), conv.id);
            count += probes.len();
            for p in &probes {
                let line = serde_json::json!({"conversation": conv.id, "probe": p});
                jsonl.push_str(&serde_json::to_string(&line).expect("a probe serializes"));
                jsonl.push('\n');
            }
        }
        assert!(count > 0);
        let stem = input.with_file_name(&key);
        problems.extend(expect(Path::new(&format!("{}.probes.jsonl", stem.display())), &jsonl));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn every_fixture_imports_as_expected() {
    let mut problems = Vec::new();
    for format in Format::ALL {
        let inputs = cases(format);
        assert!(!inputs.is_empty(), "{format}: no fixtures");
        let mut strict_errors = 0;
        for input in &inputs {
            problems.extend(check(format, input));
            let text = fs::read_to_string(input).expect("readable");
            let options =
                ImportOptions { format: FormatChoice::Exact(format), strict: true, include_compaction_calls: false };
            strict_errors += import_str(&text, input, "k", &options).errors.len();
        }
        assert!(strict_errors > 0, "{format}: no fixture shows a strict-mode error");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
