//! `reports/README.md` documents every CSV column: the test reads its tables and checks they
//! list exactly the columns the row structs serialize, in order, so the two cannot drift.

use report::csv::{CompactionRow, ProbeRow, ResultRow, SummaryRow};
use serde::Serialize;

const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../reports/README.md"));

/// The header a row struct produces through serde (what the CSV writer writes).
fn serialized_header<T: Serialize>(row: &T) -> Vec<String> {
    let mut w = csv::WriterBuilder::new().has_headers(true).from_writer(Vec::new());
    w.serialize(row).expect("serializes");
    let bytes = w.into_inner().expect("flushes");
    let text = String::from_utf8(bytes).expect("utf-8");
    text.lines().next().expect("a header line").split(',').map(String::from).collect()
}

/// The first column of the table under the heading ``### `file` ``: the documented columns.
fn documented(file: &str) -> Vec<String> {
    let heading = format!("### `{file}`");
    let at = README.find(&heading).unwrap_or_else(|| panic!("reports/README.md has no {heading} section"));
    let section = &README[at + heading.len()..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    let mut rows = section.lines().map(str::trim).skip_while(|l| !l.starts_with('|'));
    let header = rows.next().expect("a table");
    assert!(header.starts_with("| column | type | unit | meaning |"), "{file}: table header {header:?}");
    rows.next().expect("the separator row");
    rows.take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 4, "{file}: row {l:?} must have column, type, unit and meaning");
            assert!(
                ["string", "integer", "number", "boolean", "JSON"].contains(&cells[1]),
                "{file}: row {l:?}: unknown type {:?}",
                cells[1]
            );
            assert!(!cells[3].is_empty(), "{file}: row {l:?} has no meaning");
            cells[0].trim_matches('`').to_string()
        })
        .collect()
}

#[test]
fn the_readme_lists_every_csv_column_in_order() {
    assert_eq!(documented("results.csv"), serialized_header(&ResultRow::default()));
    assert_eq!(documented("summary.csv"), serialized_header(&SummaryRow::default()));
    assert_eq!(documented("probes.csv"), serialized_header(&ProbeRow::default()));
    assert_eq!(documented("compactions.csv"), serialized_header(&CompactionRow::default()));
}

#[test]
fn the_readme_documents_the_gate_metrics_and_their_columns() {
    for m in report::gate::Metric::ALL {
        let row = format!("| `{}` | `{}`", m.name(), m.column());
        assert!(README.contains(&row), "reports/README.md: the gate table has no row starting {row:?}");
    }
}
