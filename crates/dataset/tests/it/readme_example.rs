//! The example conversation in `datasets/README.md` loads and validates clean, and the
//! README's field tables name every field of the schema.

use std::collections::BTreeSet;

use compaction::{Conversation, Role};
use dataset::{conversation_schema, Dataset, LoadOptions};

const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/README.md");
const MARKER: &str = "<!-- example: conversation -->";

fn readme() -> String {
    std::fs::read_to_string(README).expect("datasets/README.md is readable")
}

/// The JSON block that follows the marker.
fn example(readme: &str) -> String {
    let after = &readme[readme.find(MARKER).expect("README has the example marker") + MARKER.len()..];
    let mut lines = after.lines().skip_while(|l| l.trim().is_empty());
    assert_eq!(lines.next().map(str::trim), Some("```json"), "the marker is followed by a ```json block");
    let body: Vec<&str> = lines.take_while(|l| l.trim() != "```").collect();
    body.join("\n")
}

#[test]
fn readme_example_loads_and_validates_clean() {
    let text = example(&readme());
    let value: serde_json::Value = serde_json::from_str(&text).expect("the README example is JSON");
    let line = serde_json::to_string(&value).expect("re-serializable");
    let ds = Dataset::from_reader("README.md", "datasets/README.md", line.as_bytes(), &LoadOptions::default());
    assert!(ds.problems.is_empty(), "{:#?}", ds.problems.iter().map(ToString::to_string).collect::<Vec<_>>());
    let problems: Vec<String> = ds.validate().iter().map(ToString::to_string).collect();
    assert!(problems.is_empty(), "{problems:#?}");
    let conv: &Conversation = &ds.conversations[0];

    // It shows what the README says it shows.
    assert_eq!(conv.messages[0].role, Role::System);
    assert_eq!(conv.messages[1].role, Role::User);
    assert!(conv.messages.iter().any(|m| m.role == Role::Assistant && m.tool_calls.len() >= 2), "parallel calls");
    let results: Vec<_> = conv.messages.iter().filter(|m| m.role == Role::Tool).collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results.iter().filter(|m| m.is_error).count(), 1, "one result is an error");
    assert!(conv.messages.iter().any(|m| m.stage.is_some()), "a staged message");
    assert!(conv.messages.iter().any(|m| m.meta_str("stage_decision").is_some()), "a stage decision");
    let kinds: BTreeSet<_> = conv.probes.iter().map(|p| p.kind).collect();
    assert_eq!(kinds.len(), compaction::ProbeKind::CLASSIC.len(), "one probe of each kind");
    assert!(conv.probes.iter().any(|p| p.asked_at.is_some()));

    // It is written in canonical form: serializing the loaded conversation gives it back.
    assert_eq!(serde_json::to_value(conv).expect("serializable"), value);
}

#[test]
fn readme_tables_name_every_schema_field() {
    let readme = readme();
    let schema = conversation_schema();
    let mut objects = vec![("Conversation", &schema["properties"])];
    for def in ["Message", "ToolCall", "Probe"] {
        objects.push((def, &schema["$defs"][def]["properties"]));
    }
    for (name, props) in objects {
        for field in props.as_object().expect("properties").keys() {
            assert!(
                readme.contains(&format!("| `{field}` |")),
                "datasets/README.md has no table row for {name}.{field}"
            );
        }
    }
    for kind in compaction::ProbeKind::ALL {
        assert!(readme.contains(&format!("| `{}` |", kind.as_str())), "no row for probe kind {}", kind.as_str());
    }
}
