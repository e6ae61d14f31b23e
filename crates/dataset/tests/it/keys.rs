//! Answer keys: the keys file, attaching keys to conversations, their checks, and how much of
//! them the derived probes test.

use compaction::{Conversation, Message, Probe, ProbeKind, ProbeOrigin, Tier};
use dataset::keys::{attach, load_keys, tested_by, Coverage};
use dataset::{check_keys, Problem};

fn conversation() -> Conversation {
    Conversation::new(
        "s1",
        vec![
            Message::user("Fix the flaky test in src/net/retry.rs. Don't touch the public API."),
            Message::assistant("I will read src/net/retry.rs first."),
            Message::user("Also: the database runs in docker; never start it yourself."),
            Message::assistant("Understood. Next I will add a backoff jitter test."),
        ],
    )
}

fn write(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-keys-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("keys.jsonl");
    std::fs::write(&path, text).expect("writes");
    path
}

const KEY: &str = r#"{"conversation": "s1", "id": "k1-01", "asked_at": 3, "kind": "constraint", "tier": "critical", "question": "Where does the database run?", "facts": [["runs in docker", "docker"]], "meaning": "The database runs in docker; the agent must not start it.", "source_message": 2, "source_messages": [2], "in_real_summary": "paraphrase"}"#;

#[test]
fn a_keys_file_loads_as_written_probes_with_the_meaning_as_answer() {
    let path = write("load", &format!("{KEY}\n\n"));
    let keys = load_keys(&path);
    assert!(keys.problems.is_empty(), "{:?}", keys.problems);
    assert_eq!((keys.len(), keys.checkpoints()), (1, 1));
    let (line, key) = &keys.by_conversation["s1"][0];
    assert_eq!(*line, 1);
    assert_eq!(key.origin, Some(ProbeOrigin::Written));
    assert_eq!(key.kind, ProbeKind::Constraint);
    assert_eq!(key.answer, "The database runs in docker; the agent must not start it.");
    assert_eq!(key.in_real_summary.map(|l| l.as_str()), Some("paraphrase"));
}

#[test]
fn a_bad_key_line_names_its_file_line_and_field_and_the_rest_loads() {
    let no_conversation = KEY.replace(r#""conversation": "s1", "#, "");
    let derived = KEY.replace(r#""id": "k1-01""#, r#""id": "k1-02", "origin": "derived""#);
    let path = write("bad", &format!("{KEY}\n{no_conversation}\n{derived}\n{{not json\n"));
    let keys = load_keys(&path);
    assert_eq!(keys.len(), 1);
    let lines: Vec<String> = keys.problems.iter().map(|e| e.to_string()).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].contains(":2:") && lines[0].contains("field conversation"), "{}", lines[0]);
    assert!(lines[1].contains(":3:") && lines[1].contains("field origin"), "{}", lines[1]);
    assert!(lines[2].contains(":4:") && lines[2].contains("malformed JSON"), "{}", lines[2]);
}

#[test]
fn attaching_replaces_the_written_keys_a_conversation_had() {
    let path = write("attach", &format!("{KEY}\n{}\n", KEY.replace("\"s1\"", "\"elsewhere\"")));
    let keys = load_keys(&path);
    let mut conv = conversation();
    conv.probes.push(Probe { id: "old".into(), origin: Some(ProbeOrigin::Written), ..Default::default() });
    conv.probes.push(Probe { id: "derived-task-1".into(), ..Default::default() });
    let attached = attach(std::iter::once(&mut conv), &keys);
    assert_eq!((attached.keys, attached.conversations), (1, 1));
    assert_eq!(attached.unknown, vec![("elsewhere".to_string(), 2)]);
    let ids: Vec<&str> = conv.probes.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["derived-task-1", "k1-01"]);
    assert!(check_keys(&conv).is_empty(), "{:?}", check_keys(&conv));
}

fn key(id: &str, alias: &str, sources: Vec<usize>, asked_at: usize) -> Probe {
    Probe {
        id: id.into(),
        kind: ProbeKind::Task,
        question: "?".into(),
        answer: "!".into(),
        facts: vec![vec![alias.into()]],
        source_message: sources[0],
        source_messages: sources,
        asked_at: Some(asked_at),
        tier: Some(Tier::Critical),
        origin: Some(ProbeOrigin::Written),
        ..Default::default()
    }
}

#[test]
fn the_key_checks_find_late_sources_missing_aliases_weak_facts_and_duplicates() {
    let mut conv = conversation();
    conv.probes = vec![
        key("ok", "src/net/retry.rs", vec![0], 3),
        key("late", "backoff jitter test", vec![3], 3),
        key("absent", "exponential backoff", vec![0], 3),
        key("weak", "test", vec![0], 3),
        key("twice", "src/net/retry.rs", vec![0, 1], 3),
        Probe { asked_at: None, ..key("unasked", "docker", vec![2], 3) },
    ];
    let labels: Vec<(usize, &str)> = check_keys(&conv).iter().map(|(p, _, problem)| (*p, problem.label())).collect();
    assert_eq!(
        labels,
        [
            (1, "key_source_after_checkpoint"),
            (2, "key_alias_not_in_sources"),
            (3, "key_only_weak_aliases"),
            (4, "duplicate_key"),
            (5, "key_without_checkpoint"),
        ]
    );
    // validate reports them with the rest of the conversation's problems.
    let problems = dataset::check_conversation(&conv);
    assert!(problems.iter().any(|e| matches!(e.problem, Problem::DuplicateKey { first: 0, .. })), "{problems:?}");
}

#[test]
fn a_derived_probe_tests_a_key_when_it_is_asked_at_the_checkpoint_with_a_matching_alias() {
    let k = key("k", "src/net/retry.rs", vec![0], 3);
    let probe = |alias: &str, source: usize, asked_at: Option<usize>| Probe {
        id: "derived-artifact-1".into(),
        facts: vec![vec![alias.into()]],
        source_message: source,
        asked_at,
        ..Default::default()
    };
    assert!(tested_by(&k, [&probe("retry.rs", 0, None)]), "the file name of the key's path");
    assert!(!tested_by(&k, [&probe("retry.rs", 3, None)]), "its source is not before the checkpoint");
    assert!(!tested_by(&k, [&probe("retry.rs", 0, Some(2))]), "asked before the checkpoint");
    assert!(!tested_by(&k, [&probe("the", 0, None)]), "a common word tests nothing");
    let mut conv = conversation();
    conv.probes = vec![k, probe("src/net/retry.rs", 0, None)];
    let mut coverage = Coverage::default();
    coverage.add("s.jsonl", &conv);
    let row = coverage.rows[&("s.jsonl".to_string(), Tier::Critical)];
    assert_eq!((row.keys, row.derived, row.with_generated), (1, 1, 0));
    assert!(coverage.render().contains("1 (100%)"), "{}", coverage.render());
}

#[test]
fn the_authoring_view_hides_recorded_summaries_and_marks_injected_text() {
    let mut conv = conversation();
    conv.messages.insert(
        2,
        Message::user("Summary of the work so far: the port is 8443.").with_meta("compact_summary", true.into()),
    );
    conv.messages
        .insert(3, Message::user("<system-reminder>be brief</system-reminder>").with_meta("injected", true.into()));
    let view = dataset::keys::authoring_view(&conv, conv.messages.len(), 100, 4000);
    assert!(!view.contains("8443"), "{view}");
    assert!(view.contains("[2] [a recorded summary: hidden]"), "{view}");
    assert!(view.contains("[3] [injected]"), "{view}");
    assert!(view.contains("Don't touch the public API."), "{view}");
    // Only the history before the checkpoint.
    let view = dataset::keys::authoring_view(&conv, 1, 100, 4000);
    assert!(!view.contains("I will read"), "{view}");
}
