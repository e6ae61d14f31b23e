//! The four CSV files of a real run load with Python's standard `csv` module: each has the
//! header `reports/README.md` documents, and every cell of a column documented as integer,
//! number, boolean or JSON parses as one (or is empty, "not applicable"). This is the reader a
//! user's script is most likely to use, and it owes nothing to the writer's crate.
//!
//! Without `python3` on the PATH the test says so and passes.

#![allow(clippy::print_stderr)]

use std::collections::BTreeMap;
use std::process::Command;

const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../reports/README.md"));

/// The documented (column, type) pairs of one file, in order.
fn documented(file: &str) -> Vec<(String, String)> {
    let heading = format!("### `{file}`");
    let at = README.find(&heading).unwrap_or_else(|| panic!("reports/README.md has no {heading} section"));
    let section = &README[at + heading.len()..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    section
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with('|'))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].trim_matches('`').to_string(), cells[1].to_string())
        })
        .collect()
}

const CHECK: &str = r#"
import csv, json, math, os, sys
spec = json.loads(sys.argv[2])
out = {}
for name, columns in spec.items():
    with open(os.path.join(sys.argv[1], name), newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        want = [c for c, _ in columns]
        if header != want:
            sys.exit(f"{name}: header {header} != documented {want}")
        kinds = dict(columns)
        rows = 0
        for line, row in enumerate(reader, start=2):
            rows += 1
            if len(row) != len(header):
                sys.exit(f"{name}:{line}: {len(row)} fields, header has {len(header)}")
            for column, cell in zip(header, row):
                if cell == "":
                    continue
                kind = kinds[column]
                try:
                    if kind == "integer":
                        int(cell)
                    elif kind == "number":
                        if not math.isfinite(float(cell)):
                            raise ValueError("not finite")
                    elif kind == "boolean":
                        if cell not in ("true", "false"):
                            raise ValueError("not true/false")
                    elif kind == "JSON":
                        json.loads(cell)
                except ValueError as e:
                    sys.exit(f"{name}:{line}: column {column} ({kind}): {cell!r}: {e}")
        out[name] = rows
print(json.dumps(out))
"#;

#[test]
fn the_csv_files_load_with_pythons_csv_module_and_their_numbers_parse() {
    if Command::new("python3").arg("--version").output().map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("skipped: python3 is not on the PATH");
        return;
    }
    let root = crate::common::temp_dir("python-csv");
    let (run_dir, data) = crate::common::adversarial_run(&root);
    let files = [report::RESULTS_CSV, report::SUMMARY_CSV, report::PROBES_CSV, report::COMPACTIONS_CSV];
    let spec: BTreeMap<&str, Vec<(String, String)>> = files.iter().map(|f| (*f, documented(f))).collect();
    let check = || {
        Command::new("python3")
            .arg("-c")
            .arg(CHECK)
            .arg(&run_dir)
            .arg(serde_json::to_string(&spec).expect("serializes"))
            .output()
            .expect("python3 runs")
    };
    let out = check();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python's csv module rejects the files: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: BTreeMap<String, u64> = serde_json::from_str(stdout.trim()).expect("the check prints row counts");
    let configurations = data.manifest.experiment.configurations.len() as u64;
    assert_eq!(rows[report::RESULTS_CSV], data.records.len() as u64);
    // A pooled row per configuration, and one per configuration and dataset.
    let datasets =
        data.records.iter().map(|r| r.dataset.as_str()).collect::<std::collections::BTreeSet<_>>().len() as u64;
    assert_eq!(rows[report::SUMMARY_CSV], configurations * (1 + datasets));
    assert!(rows[report::PROBES_CSV] >= 3 * data.records.len() as u64, "three probes per pair: {rows:?}");
    assert!(rows[report::COMPACTIONS_CSV] > 0, "the run compacted: {rows:?}");
    // A cell that is not a number in a number column is caught (the check can fail).
    let summary = run_dir.join(report::SUMMARY_CSV);
    let text = std::fs::read_to_string(&summary).expect("readable");
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let col = documented(report::SUMMARY_CSV).iter().position(|(c, _)| c == "calls").expect("calls column");
    let mut cells: Vec<String> = lines[1].split(',').map(String::from).collect();
    // The params cell of the first configuration is `{}` (no comma), so splitting is safe here.
    assert_eq!(cells.len(), spec[report::SUMMARY_CSV].len(), "{}", lines[1]);
    cells[col] = "many".into();
    lines[1] = cells.join(",");
    std::fs::write(&summary, lines.join("\n") + "\n").expect("writable");
    let bad = check();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("summary.csv:2: column calls (integer): 'many'"));
    let _ = std::fs::remove_dir_all(&root);
}

/// The report is a view of the run folder alone: rendered again after the datasets and the
/// experiment file are moved away, it is byte-identical to the one the run wrote (probe texts
/// come from run.json, thresholds from the records, not from today's datasets or strategy
/// code).
#[test]
fn the_report_re_renders_byte_identical_from_the_run_folder_alone() {
    let root = crate::common::temp_dir("rerender");
    let (out, _) = crate::common::adversarial_run(&root);
    let original = std::fs::read(out.join("report.html")).expect("report written");
    let text = String::from_utf8_lossy(&original);
    assert!(text.contains("class=\"threshold\""), "the timelines draw thresholds");
    // Move the inputs away: nothing but the run folder is left.
    std::fs::remove_file(root.join("adversarial.jsonl")).expect("dataset removed");
    std::fs::remove_file(root.join("adversarial.toml")).expect("experiment removed");
    std::fs::remove_file(out.join("report.html")).expect("report removed");
    report::html::write_report(&out, compaction_strategies::family).expect("re-rendered");
    let again = std::fs::read(out.join("report.html")).expect("report re-written");
    assert!(original == again, "the re-rendered report differs from the original");
    let _ = std::fs::remove_dir_all(&root);
}
