//! Sniffing, file keys and folder expansion.

use std::path::{Path, PathBuf};

use super::*;

fn sniffed(name: &str, text: &str) -> Result<Format, String> {
    sniff(Path::new(name), text).map(|s| s.format)
}

#[test]
fn sniff_tells_the_formats_apart() {
    let cases = [
        ("a.json", r#"[{"role":"user","content":"hi"}]"#, Format::Openai),
        ("a.json", r#"{"messages":[{"role":"tool","tool_call_id":"x","content":"r"}]}"#, Format::Openai),
        ("a.json", r#"{"system":"s","messages":[{"role":"user","content":"hi"}]}"#, Format::Anthropic),
        (
            "a.json",
            r#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]"#,
            Format::Anthropic,
        ),
        (
            "a.jsonl",
            "{\"type\":\"user\",\"sessionId\":\"s\",\"message\":{}}\n{\"type\":\"progress\"}\n",
            Format::ClaudeCode,
        ),
        ("a.traj.json", r#"{"trajectory_format":"mini-swe-agent-1.1","messages":[]}"#, Format::MiniSweAgent),
        ("a.traj", r#"{"history":[{"role":"system","content":"s"}],"info":{}}"#, Format::SweAgent),
        (
            "o.jsonl",
            "{\"instance_id\":\"i\",\"history\":[{\"action\":\"system\"}]}\n{\"instance_id\":\"j\",\"history\":[]}\n",
            Format::Openhands,
        ),
        ("t.json", r#"[{"task_id":0,"trial":0,"traj":[]}]"#, Format::TauBench),
        ("t.json", r#"{"info":{},"tasks":[],"simulations":[]}"#, Format::Tau2),
    ];
    for (name, text, want) in cases {
        assert_eq!(sniffed(name, text), Ok(want), "{name}: {text}");
    }
    assert!(sniffed("x.json", "hello").is_err());
    assert!(sniffed("x.json", r#"{"a":1}"#).is_err());
}

#[test]
fn file_keys_drop_known_extensions() {
    assert_eq!(file_key(Path::new("out/run/x.traj.json")), "out/run/x");
    assert_eq!(file_key(Path::new("s/subagents/agent-a1.jsonl")), "s/subagents/agent-a1");
    assert_eq!(file_key(Path::new("gpt-4o-airline.shared.json")), "gpt-4o-airline.shared");
    assert_eq!(file_key(Path::new("notes.txt")), "notes.txt");
}

#[test]
fn a_session_file_brings_its_subagents_and_ids_stay_unique() {
    let dir = std::env::temp_dir().join(format!("compactlens-import-{}", std::process::id()));
    let sub = dir.join("s1").join("subagents");
    std::fs::create_dir_all(&sub).expect("temp dir");
    let line = |text: &str| {
        format!("{{\"type\":\"user\",\"sessionId\":\"s1\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\"}}}}\n")
    };
    std::fs::write(dir.join("s1.jsonl"), line("main task")).expect("write");
    std::fs::write(sub.join("agent-a1.jsonl"), line("sub task")).expect("write");
    std::fs::write(dir.join("README.md"), "not data").expect("write");

    let files = input_files(&[dir.join("s1.jsonl")]);
    let keys: Vec<&str> = files.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(keys, ["s1", "s1/subagents/agent-a1"]);

    // The folder and the file again: each file once; the markdown file is not an input.
    let files = input_files(&[dir.clone(), dir.join("s1.jsonl")]);
    assert_eq!(files.len(), 2, "{files:?}");

    let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
    let out = import(&[dir.join("s1.jsonl"), PathBuf::from(&dir)], &options);
    let ids: Vec<String> = out.iter().flat_map(|f| f.conversations.iter().map(|c| c.id.clone())).collect();
    assert_eq!(ids, ["s1", "s1/subagents/agent-a1"]);
    assert_eq!(out[1].conversations[0].meta["kind"], "subagent");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn unknown_files_and_broken_json_are_errors_that_do_not_stop_the_import() {
    let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
    let out = import_str("not json", Path::new("x.json"), "x", &options);
    assert!(out.conversations.is_empty());
    assert!(out.errors[0].to_string().starts_with("x.json: format not recognized"), "{}", out.errors[0]);

    let exact =
        ImportOptions { format: FormatChoice::Exact(Format::TauBench), strict: false, include_compaction_calls: false };
    let out = import_str("[\n  {\"task_id\": 1,\n   \"traj\": [}\n]", Path::new("t.json"), "t", &exact);
    assert_eq!(out.errors.len(), 1);
    assert!(out.errors[0].to_string().starts_with("t.json:3: not valid JSON"), "{}", out.errors[0]);
}

#[test]
fn format_names_round_trip() {
    for f in Format::ALL {
        assert_eq!(f.name().parse::<Format>(), Ok(f));
    }
    assert_eq!("auto".parse::<FormatChoice>(), Ok(FormatChoice::Auto));
    assert!("chatml".parse::<FormatChoice>().unwrap_err().contains("known: auto, openai"));
}
