//! The committed JSON Schema of a dataset line must match the types.

use std::path::Path;

const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/conversation.schema.json");

#[test]
fn committed_schema_matches_the_conversation_type() {
    let generated = dataset::conversation_schema_text();
    if std::env::var("COMPACTLENS_UPDATE_SCHEMA").is_ok_and(|v| v == "1") {
        std::fs::write(SCHEMA_PATH, &generated).expect("datasets/ is writable");
    }
    let committed = std::fs::read_to_string(Path::new(SCHEMA_PATH)).unwrap_or_default();
    assert!(
        committed == generated,
        "datasets/conversation.schema.json is out of date with compaction::Conversation.\n\
         Refresh it with:\n    COMPACTLENS_UPDATE_SCHEMA=1 cargo test -p dataset --test it schema\n\
         and commit the result."
    );
}

#[test]
fn schema_names_the_required_fields_and_the_closed_sets() {
    let schema = dataset::conversation_schema();
    let required = |v: &serde_json::Value| -> Vec<String> {
        v["required"].as_array().expect("required list").iter().filter_map(|s| s.as_str().map(String::from)).collect()
    };
    assert_eq!(required(&schema), vec!["id", "messages"]);
    assert_eq!(required(&schema["$defs"]["Message"]), vec!["role"]);
    assert_eq!(required(&schema["$defs"]["ToolCall"]), vec!["id", "name"]);
    let roles: Vec<&str> = schema["$defs"]["Role"]["oneOf"]
        .as_array()
        .expect("roles, each with its description")
        .iter()
        .filter_map(|v| v["const"].as_str())
        .collect();
    assert_eq!(roles, vec!["system", "user", "assistant", "tool"]);
    let kinds: Vec<&str> = schema["$defs"]["ProbeKind"]["oneOf"]
        .as_array()
        .expect("probe kinds")
        .iter()
        .filter_map(|v| v["const"].as_str())
        .collect();
    assert_eq!(kinds, compaction::ProbeKind::ALL.map(|k| k.as_str()));
}
