use std::io::Read;

use compaction::{Message, Probe, ProbeKind, Role, ToolCall};

use super::*;

fn load(text: &str) -> Dataset {
    load_bytes(text.as_bytes())
}

fn load_bytes(bytes: &[u8]) -> Dataset {
    Dataset::from_reader("t.jsonl", "t.jsonl", bytes, &LoadOptions::default())
}

fn messages(ds: &Dataset) -> Vec<String> {
    ds.problems.iter().map(|e| e.to_string()).collect()
}

const GOOD: &str = r#"{"id":"ok","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}"#;

#[test]
fn good_lines_load_with_their_line_numbers_and_blank_lines_are_skipped() {
    let text = format!("{GOOD}\n\n   \n{}\n", GOOD.replace("\"ok\"", "\"ok2\""));
    let ds = load(&text);
    assert!(ds.problems.is_empty(), "{:?}", ds.problems);
    assert_eq!(ds.conversations.len(), 2);
    assert_eq!(ds.lines, vec![1, 4]);
    assert_eq!(ds.conversations[1].id, "ok2");
    assert_eq!(ds.message_count(), 4);
    assert!(ds.validate().is_empty());
}

#[test]
fn crlf_line_ends_and_a_byte_order_mark_are_accepted() {
    let text = format!("\u{feff}{GOOD}\r\n{}\r\n", GOOD.replace("\"ok\"", "\"b\""));
    let ds = load(&text);
    assert!(ds.problems.is_empty(), "{:?}", ds.problems);
    assert_eq!(ds.conversations.len(), 2);
}

#[test]
fn malformed_json_names_the_line_and_column_and_loading_goes_on() {
    let text = format!("{GOOD}\n{{\"id\": \"x\", \"messages\": [}}\n{}\n", GOOD.replace("\"ok\"", "\"z\""));
    let ds = load(&text);
    assert_eq!(ds.conversations.len(), 2, "the good lines around the bad one load");
    assert_eq!(ds.problems.len(), 1);
    let e = &ds.problems[0];
    assert_eq!(e.line, Some(2));
    assert!(matches!(e.problem, Problem::MalformedJson { column: 26, .. }), "{e:?}");
    assert!(e.to_string().starts_with("t.jsonl:2: malformed JSON at column 26: "), "{e}");
}

#[test]
fn truncated_json_says_the_line_ends_early() {
    let ds = load(r#"{"id":"x","messages":[{"role":"user""#);
    assert!(messages(&ds)[0].contains("the line ends before the JSON value does"), "{:?}", messages(&ds));
}

#[test]
fn unknown_role_names_the_role_and_the_allowed_ones() {
    let ds = load(r#"{"id":"c9","messages":[{"role":"user","content":"a"},{"role":"bot","content":"b"}]}"#);
    assert_eq!(
        messages(&ds),
        vec![
            r#"t.jsonl:1: conversation c9, message 1, field role: unknown role "bot" (allowed: system, user, assistant, tool)"#
        ]
    );
    assert!(ds.conversations.is_empty());
}

#[test]
fn unknown_probe_kind_names_the_allowed_kinds() {
    let line = r#"{"id":"c","messages":[{"role":"user","content":"a"}],"probes":[{"id":"p","kind":"trivia","question":"q","answer":"a","facts":[["a"]],"source_message":0}]}"#;
    let ds = load(line);
    assert_eq!(
        messages(&ds),
        vec![
            r#"t.jsonl:1: conversation c, field probes[0].kind: unknown probe kind "trivia" (allowed: task, recall, artifact, decision, continuation, constraint, choice, work_state, lesson, next_step)"#
        ]
    );
}

#[test]
fn missing_required_fields_are_each_named() {
    let ds = load(r#"{"messages":[{"content":"a"}],"probes":[{"id":"p","kind":"task"}]}"#);
    let got = messages(&ds);
    for expected in [
        "t.jsonl:1: field id: missing required field",
        "t.jsonl:1: message 0, field role: missing required field",
        "t.jsonl:1: field probes[0].question: missing required field",
        "t.jsonl:1: field probes[0].answer: missing required field",
        "t.jsonl:1: field probes[0].facts: missing required field",
        "t.jsonl:1: field probes[0].source_message: missing required field",
    ] {
        assert!(got.iter().any(|g| g == expected), "missing {expected:?} in {got:#?}");
    }
    assert_eq!(got.len(), 6, "{got:#?}");
}

#[test]
fn wrong_types_say_what_was_expected_and_found() {
    let line = r#"{"id":"w","messages":[{"role":"user","content":3},{"role":"assistant","tool_calls":{"id":"x"}}],"probes":[{"id":"p","kind":"task","question":"q","answer":"a","facts":[["a", 7]],"source_message":-1}],"context_window":"big"}"#;
    let got = messages(&load(line));
    assert_eq!(
        got,
        vec![
            r#"t.jsonl:1: conversation w, field context_window: wrong type: expected non-negative integer or null, found string "big""#,
            "t.jsonl:1: conversation w, message 0, field content: wrong type: expected string, found integer 3",
            "t.jsonl:1: conversation w, message 1, field tool_calls: wrong type: expected array, found object",
            "t.jsonl:1: conversation w, field probes[0].facts[0][1]: wrong type: expected string, found integer 7",
            "t.jsonl:1: conversation w, field probes[0].source_message: wrong type: expected non-negative integer, found integer -1",
        ]
    );
}

#[test]
fn a_line_that_is_not_an_object_says_so() {
    let got = messages(&load("[1, 2]\n"));
    assert_eq!(got, vec!["t.jsonl:1: wrong type: expected object, found array of 2"]);
}

#[test]
fn duplicate_json_keys_fall_back_to_serdes_message() {
    let ds = load(r#"{"id":"d","id":"d","messages":[{"role":"user","content":"a"}]}"#);
    assert_eq!(ds.problems.len(), 1);
    let e = &ds.problems[0];
    assert!(
        matches!(&e.problem, Problem::Invalid { column: Some(_), detail } if detail.contains("duplicate field `id`"))
    );
    assert_eq!(e.conversation.as_deref(), Some("d"));
}

#[test]
fn non_utf8_bytes_are_reported_at_their_byte_offset() {
    let mut bytes = format!("{GOOD}\n").into_bytes();
    let line2_start = bytes.len();
    bytes.extend_from_slice(br#"{"id":"u","messages":[{"role":"user","content":"caf"#);
    let bad_at = bytes.len();
    bytes.extend_from_slice(b"\xe9\"}]}\n");
    let ds = load_bytes(&bytes);
    assert_eq!(ds.conversations.len(), 1);
    assert_eq!(
        ds.problems[0].problem,
        Problem::InvalidUtf8 { offset: bad_at as u64, column: bad_at - line2_start + 1 }
    );
    assert_eq!(
        ds.problems[0].to_string(),
        format!(
            "t.jsonl:2: invalid UTF-8 at byte offset {bad_at} of the file (line byte {})",
            bad_at - line2_start + 1
        )
    );
}

#[test]
fn empty_and_blank_only_files_are_reported() {
    for text in ["", "\n\n  \n"] {
        let ds = load(text);
        assert_eq!(ds.problems.len(), 1);
        assert_eq!(ds.problems[0].problem, Problem::EmptyFile);
        assert_eq!(ds.problems[0].line, None);
        assert!(messages(&ds)[0].starts_with("t.jsonl: empty file"));
    }
}

#[test]
fn duplicate_conversation_ids_keep_the_first() {
    let text = format!("{GOOD}\n{GOOD}\n");
    let ds = load(&text);
    assert_eq!(ds.conversations.len(), 1);
    assert_eq!(ds.lines, vec![1]);
    assert_eq!(
        messages(&ds),
        vec!["t.jsonl:2: conversation ok, field id: duplicate conversation id (first on line 1); this line is skipped"]
    );
}

/// A reader that produces `prefix`, then `fill` bytes of `x`, then `suffix`, without ever
/// holding the whole line.
struct Generated {
    parts: Vec<(Vec<u8>, u64)>,
}

impl Generated {
    fn line(prefix: &str, fill: u64, suffix: &str) -> Generated {
        Generated {
            parts: vec![(prefix.as_bytes().to_vec(), 1), (b"x".to_vec(), fill), (suffix.as_bytes().to_vec(), 1)],
        }
    }
    fn then(mut self, text: &str) -> Generated {
        self.parts.push((text.as_bytes().to_vec(), 1));
        self
    }
}

impl Read for Generated {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while let Some((bytes, repeat)) = self.parts.first_mut() {
            if *repeat == 0 {
                self.parts.remove(0);
                continue;
            }
            if bytes.len() == 1 {
                // A run of one byte: emit as much of it as fits.
                let n = (*repeat).min(out.len() as u64) as usize;
                out[..n].fill(bytes[0]);
                *repeat -= n as u64;
                return Ok(n);
            }
            let n = bytes.len().min(out.len());
            out[..n].copy_from_slice(&bytes[..n]);
            bytes.drain(..n);
            if bytes.is_empty() {
                *repeat = 0;
            }
            return Ok(n);
        }
        Ok(0)
    }
}

const BIG_PREFIX: &str = r#"{"id":"big","messages":[{"role":"user","content":""#;
const BIG_SUFFIX: &str = "\"}]}\n";

#[test]
fn a_50_mb_line_loads_under_the_default_limit() {
    let fill = 50_000_000u64;
    let reader = Generated::line(BIG_PREFIX, fill, BIG_SUFFIX).then(&format!("{GOOD}\n"));
    let ds = Dataset::from_reader("big.jsonl", "big.jsonl", reader, &LoadOptions::default());
    assert!(ds.problems.is_empty(), "{:?}", ds.problems);
    assert_eq!(ds.conversations.len(), 2);
    assert_eq!(ds.conversations[0].messages[0].content.len() as u64, fill);
    assert_eq!(ds.lines, vec![1, 2]);
}

#[test]
fn a_line_over_the_limit_is_skipped_with_its_length_and_the_next_line_loads() {
    let fill = 50_000_000u64;
    let reader = Generated::line(BIG_PREFIX, fill, BIG_SUFFIX).then(&format!("{GOOD}\n"));
    let options = LoadOptions { max_line_bytes: 1 << 20, ..LoadOptions::default() };
    let ds = Dataset::from_reader("big.jsonl", "big.jsonl", reader, &options);
    let line_len = (BIG_PREFIX.len() + BIG_SUFFIX.len() - 1) as u64 + fill;
    assert_eq!(ds.problems.len(), 1);
    assert_eq!(ds.problems[0].problem, Problem::LineTooLong { bytes: line_len, limit: 1 << 20 });
    assert_eq!(
        ds.problems[0].to_string(),
        format!("big.jsonl:1: line is {line_len} bytes long, over the limit of 1048576 bytes (raise it with --max-line-bytes)")
    );
    assert_eq!(ds.conversations.len(), 1);
    assert_eq!(ds.lines, vec![2]);
}

#[test]
fn a_read_error_is_reported_and_keeps_what_loaded() {
    struct Failing(bool);
    impl Read for Failing {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if std::mem::replace(&mut self.0, true) {
                return Err(std::io::Error::other("disk on fire"));
            }
            let line = format!("{GOOD}\n");
            out[..line.len()].copy_from_slice(line.as_bytes());
            Ok(line.len())
        }
    }
    let ds = Dataset::from_reader("f.jsonl", "f.jsonl", Failing(false), &LoadOptions::default());
    assert_eq!(ds.conversations.len(), 1);
    assert_eq!(messages(&ds), vec!["f.jsonl:2: cannot read: disk on fire"]);
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compactlens-dataset-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

#[test]
fn load_dir_finds_jsonl_files_recursively_sorted_and_named_relative_to_the_root() {
    let dir = temp_dir("load-dir");
    fs::create_dir_all(dir.join("b/deeper")).expect("mkdir");
    fs::create_dir_all(dir.join("a")).expect("mkdir");
    for f in ["z.jsonl", "b/deeper/x.jsonl", "a/y.jsonl", "b/w.jsonl"] {
        fs::write(dir.join(f), format!("{GOOD}\n")).expect("write");
    }
    fs::write(dir.join("notes.txt"), "not a dataset").expect("write");
    fs::write(dir.join("a/skip.json"), GOOD).expect("write");
    let sets = load_dir(&dir, &LoadOptions::default());
    let names: Vec<&str> = sets.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, vec!["a/y.jsonl", "b/deeper/x.jsonl", "b/w.jsonl", "z.jsonl"]);
    assert!(sets.iter().all(|d| d.problems.is_empty() && d.conversations.len() == 1));
    assert_eq!(sets[1].path, dir.join("b/deeper/x.jsonl"));
    let missing = load_dir(dir.join("nope"), &LoadOptions::default());
    assert_eq!(missing.len(), 1);
    assert!(matches!(missing[0].problems[..], [DatasetError { problem: Problem::Io { .. }, .. }]));
    assert!(missing[0].conversations.is_empty());
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn load_file_reports_a_missing_file_as_a_problem() {
    let ds = load_file("no/such/file.jsonl", &LoadOptions::default());
    assert_eq!(ds.name, "file.jsonl");
    assert!(matches!(ds.problems[..], [DatasetError { problem: Problem::Io { .. }, .. }]));
    assert!(ds.problems[0].to_string().starts_with("no/such/file.jsonl: cannot read: "));
}

// --- validation ---

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: "{}".into() }
}

fn probe(id: &str, source_message: usize) -> Probe {
    Probe {
        id: id.into(),
        kind: ProbeKind::Recall,
        question: "what?".into(),
        answer: "that".into(),
        facts: vec![vec!["that".into()]],
        source_message,
        asked_at: None,
        tier: None,
        ..Default::default()
    }
}

fn problems(conv: &Conversation) -> Vec<String> {
    check_conversation(conv).iter().map(|e| e.to_string()).collect()
}

fn good() -> Conversation {
    let mut c = Conversation::new(
        "v",
        vec![
            Message::system("sys"),
            Message::user("task"),
            Message::assistant_calls("", vec![call("a", "read"), call("b", "grep")]),
            Message::tool_result("a", "read", "text"),
            Message::tool_result("b", "grep", "no match").with_error(),
            Message::assistant("done"),
        ],
    );
    c.probes = vec![probe("p1", 3), Probe { asked_at: Some(4), ..probe("p2", 3) }];
    c
}

#[test]
fn a_good_conversation_has_no_problems_and_a_call_in_flight_at_the_end_is_fine() {
    assert_eq!(problems(&good()), Vec::<String>::new());
    let mut c = good();
    c.messages.push(Message::assistant_calls("", vec![call("c", "read")]));
    assert_eq!(problems(&c), Vec::<String>::new());
}

#[test]
fn orphan_result_and_unanswered_call_are_located() {
    let mut c = good();
    c.messages[3] = Message::tool_result("zz", "read", "text");
    assert_eq!(
        problems(&c),
        vec![
            r#"conversation v, message 2, field tool_calls[0].id: tool call "a" has no tool result"#,
            r#"conversation v, message 3, field tool_call_id: tool result for call "zz" has no tool call before it"#,
        ]
    );
}

#[test]
fn a_result_before_its_call_is_an_orphan() {
    let c = Conversation::new(
        "o",
        vec![
            Message::user("u"),
            Message::tool_result("a", "read", "early"),
            Message::assistant_calls("", vec![call("a", "read")]),
            Message::tool_result("a", "read", "ok"),
            Message::assistant("done"),
        ],
    );
    assert_eq!(
        problems(&c),
        vec![r#"conversation o, message 1, field tool_call_id: tool result for call "a" has no tool call before it"#]
    );
}

#[test]
fn empty_content_rules_follow_the_role() {
    let mut c = good();
    c.messages[0].content = "  ".into();
    c.messages[1].content.clear();
    c.messages[5].content.clear();
    assert_eq!(
        problems(&c),
        vec![
            "conversation v, message 0, field content: empty content: a system message needs text",
            "conversation v, message 1, field content: empty content: a user message needs text",
            "conversation v, message 5, field content: empty assistant message: it needs content or tool calls",
        ]
    );
    // An empty tool result is allowed: tools do return nothing.
    let mut c = good();
    c.messages[3].content.clear();
    assert!(problems(&c).is_empty());
}

#[test]
fn tool_results_need_an_id_and_the_name_of_their_call() {
    let mut c = good();
    c.messages[3].tool_call_id = None;
    c.messages[4].name = Some("read".into());
    assert_eq!(
        problems(&c),
        vec![
            r#"conversation v, message 2, field tool_calls[0].id: tool call "a" has no tool result"#,
            "conversation v, message 3, field tool_call_id: a tool result needs tool_call_id (the id of the call it answers)",
            r#"conversation v, message 4, field name: tool result names "read" but call "b" (message 2) is "grep""#,
        ]
    );
    // A result without a name is fine.
    let mut c = good();
    c.messages[3].name = None;
    assert!(problems(&c).is_empty());
}

#[test]
fn tool_calls_need_ids_and_names_and_only_assistants_make_them() {
    let mut c = good();
    c.messages[2].tool_calls[1] = call("a", " ");
    c.messages[1].tool_calls = vec![call("u1", "read")];
    let got = check_conversation(&c);
    let kinds: Vec<(Option<usize>, Option<&str>, &'static str)> =
        got.iter().map(|e| (e.message, e.field.as_deref(), e.problem.label())).collect();
    assert!(kinds.contains(&(Some(1), Some("tool_calls"), "calls_on_non_assistant")), "{kinds:?}");
    assert!(kinds.contains(&(Some(2), Some("tool_calls[1].id"), "duplicate_call_id")), "{kinds:?}");
    assert!(kinds.contains(&(Some(2), Some("tool_calls[1].name"), "empty_tool_name")), "{kinds:?}");
    let mut c = good();
    c.messages[2].tool_calls[0].id.clear();
    c.messages[3].tool_call_id = Some(String::new());
    let labels: Vec<&str> = check_conversation(&c).iter().map(|e| e.problem.label()).collect();
    assert_eq!(labels, vec!["empty_call_id", "missing_tool_call_id"]);
}

#[test]
fn conversation_needs_an_id_and_messages() {
    let c = Conversation::new(" ", vec![]);
    assert_eq!(
        problems(&c),
        vec![
            "conversation  , field id: empty conversation id",
            "conversation  , field messages: conversation has no messages"
        ]
    );
}

#[test]
fn probe_checks() {
    let mut c = good();
    c.probes = vec![
        probe("p1", 6),
        Probe { asked_at: Some(0), ..probe("p2", 1) },
        Probe { asked_at: Some(7), ..probe("p3", 1) },
        Probe { asked_at: Some(3), ..probe("p4", 3) },
        Probe { facts: vec![], ..probe("p1", 1) },
        Probe { facts: vec![vec![], vec!["ok".into(), " ".into()]], question: "".into(), ..probe("", 1) },
    ];
    assert_eq!(
        problems(&c),
        vec![
            "conversation v, field probes[0].source_message: source_message 6 is out of range (the conversation has 6 messages)",
            "conversation v, field probes[1].asked_at: asked_at 0 is out of range (1..=6: it counts messages in context)",
            "conversation v, field probes[2].asked_at: asked_at 7 is out of range (1..=6: it counts messages in context)",
            "conversation v, field probes[3].asked_at: asked_at 3 comes before the answer: source_message 3 is not yet in context",
            r#"conversation v, field probes[4].id: duplicate probe id "p1" (first at probes[0])"#,
            "conversation v, field probes[4].facts: a probe needs at least one fact",
            "conversation v, field probes[5].id: empty probe id",
            "conversation v, field probes[5].question: empty question",
            "conversation v, field probes[5].facts[0]: empty fact: a fact needs at least one alias",
            "conversation v, field probes[5].facts[1][1]: empty alias",
        ]
    );
}

#[test]
fn dataset_validate_adds_file_and_line() {
    let mut c = good();
    c.messages[1].content.clear();
    let line = serde_json::to_string(&c).expect("serializable");
    let ds = load(&format!("\n{line}\n"));
    assert!(ds.problems.is_empty());
    let got: Vec<String> = ds.validate().iter().map(|e| e.to_string()).collect();
    assert_eq!(
        got,
        vec!["t.jsonl:2: conversation v, message 1, field content: empty content: a user message needs text"]
    );
}

#[test]
fn every_role_round_trips_through_the_loader() {
    let roles = [Role::System, Role::User, Role::Assistant, Role::Tool];
    for r in roles {
        let line = format!(r#"{{"id":"r","messages":[{{"role":"{}","content":"x","tool_call_id":"i"}}]}}"#, r.as_str());
        let ds = load(&line);
        assert!(ds.problems.is_empty(), "{r}: {:?}", ds.problems);
        assert_eq!(ds.conversations[0].messages[0].role, r);
    }
}
