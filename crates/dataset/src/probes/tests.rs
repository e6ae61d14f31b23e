//! Unit tests of derived probes.

use compaction::{Conversation, Message, Probe, ProbeKind, ToolCall};
use serde_json::json;

use super::*;

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: args.to_string() }
}

fn of(probes: &[Probe], kind: ProbeKind) -> Vec<&Probe> {
    probes.iter().filter(|p| p.kind == kind).collect()
}

/// Every alias of every probe occurs in its source message, as the judge reads it.
fn assert_grounded(conv: &Conversation, probes: &[Probe]) {
    for p in probes {
        let rendered = normalize(&render_message(&conv.messages[p.source_message]));
        // The files changed so far: each file in the message that changed it, at or before the
        // source (the last change).
        let earlier: Vec<String> =
            conv.messages[..=p.source_message].iter().map(|m| normalize(&render_message(m))).collect();
        let list = p.question.starts_with("Which files has the agent changed so far");
        for alias in p.facts.iter().flatten() {
            let found = if list {
                earlier.iter().any(|r| occurs(r, &normalize(alias)))
            } else {
                occurs(&rendered, &normalize(alias))
            };
            assert!(found, "{}: {alias:?} not in message {}", p.id, p.source_message);
        }
        assert!(p.id.starts_with(DERIVED_PREFIX));
    }
}

/// `conv` with `n` assistant messages of small talk appended: a fact of a short fixture is in
/// a quarter of its messages by construction, and would be dropped as everywhere.
fn padded(mut conv: Conversation, n: usize) -> Conversation {
    for _ in 0..n {
        conv.messages.push(Message::assistant("Still on it."));
    }
    conv
}

fn coding_session() -> Conversation {
    padded(coding_session_core(), 20)
}

fn coding_session_core() -> Conversation {
    Conversation::new(
        "c",
        vec![
            Message::user("<system-reminder>Hooks are active.</system-reminder>").with_meta("injected", true.into()),
            Message::user("Port utils.py to Rust; keep the API of parse_config and the constant MAX_RETRIES = 250."),
            Message::assistant_calls(
                "Reading first.",
                vec![
                    call("1", "Read", json!({"file_path": "/repo/utils.py"})),
                    call("2", "Bash", json!({"command": "cat README.md | head -5"})),
                ],
            ),
            Message::tool_result("1", "Read", "def parse_config():\n    raise ValueError('error: bad config')"),
            Message::tool_result("2", "Bash", "# utils"),
            Message::assistant_calls(
                "",
                vec![
                    call("3", "Write", json!({"file_path": "/repo/src/lib.rs", "content": "pub fn parse_config() {}"})),
                    call("4", "Bash", json!({"command": "cargo test > test.log"})),
                ],
            ),
            Message::tool_result("3", "Write", "File created successfully at: /repo/src/lib.rs"),
            Message::tool_result(
                "4",
                "Bash",
                "Exit code 101\nerror[E0425]: cannot find value `MAX_RETRIES` in this scope\nwarning: unused",
            )
            .with_error(),
            Message::assistant_calls(
                "",
                vec![call(
                    "5",
                    "TodoWrite",
                    json!({"todos": [
                        {"content": "Port parse_config", "status": "completed", "activeForm": "Porting"},
                        {"content": "Add MAX_RETRIES constant", "status": "in_progress", "activeForm": "Adding"},
                        {"content": "Delete utils.py", "status": "pending", "activeForm": "Deleting"}
                    ]}),
                )],
            ),
            Message::tool_result("5", "TodoWrite", "Todos have been modified successfully."),
            Message::user("This session is being continued. Summary: porting utils.py, MAX_RETRIES missing.")
                .with_meta("compact_summary", true.into()),
            Message::user("Also run cargo clippy --all-targets when done."),
            Message::assistant_calls(
                "",
                vec![call(
                    "6",
                    "Edit",
                    json!({"file_path": "src/lib.rs", "old_string": "{}", "new_string": "const MAX_RETRIES: u32 = 250;"}),
                )],
            ),
            Message::tool_result("6", "Edit", "The file src/lib.rs has been updated."),
            Message::assistant("Done."),
        ],
    )
}

#[test]
fn the_task_is_the_first_real_request() {
    let conv = coding_session();
    let probes = derive(&conv, &DeriveParams::default());
    assert_grounded(&conv, &probes);
    let task = of(&probes, ProbeKind::Task);
    assert_eq!(task.len(), 1);
    assert_eq!(task[0].source_message, 1);
    let facts: Vec<&str> = task[0].facts.iter().map(|f| f[0].as_str()).collect();
    assert_eq!(facts, ["utils.py", "parse_config", "MAX_RETRIES", "250"]);
    assert_eq!(task[0].id, "derived-task-1");
}

#[test]
fn artifacts_come_from_call_arguments_and_commands() {
    let conv = coding_session();
    let probes = derive(&conv, &DeriveParams::default());
    let (lists, artifacts): (Vec<&Probe>, Vec<&Probe>) =
        of(&probes, ProbeKind::Artifact).into_iter().partition(|p| p.id.starts_with("derived-state"));
    // The files changed so far, newest change first, then one probe per file.
    assert_eq!(
        lists.iter().map(|p| (p.answer.as_str(), p.source_message)).collect::<Vec<_>>(),
        [("src/lib.rs, test.log", 12)]
    );
    let answers: Vec<(&str, usize)> = artifacts.iter().map(|p| (p.answer.as_str(), p.source_message)).collect();
    // Written and edited files first; `/repo/src/lib.rs` and `src/lib.rs` are one file, last
    // touched by the Edit at message 12 (which names it `src/lib.rs`).
    assert_eq!(answers, [("/repo/utils.py", 2), ("README.md", 2), ("test.log", 5), ("src/lib.rs", 12)]);
    // In the short session alone, `src/lib.rs` is in 4 of 14 messages (a quarter): everywhere.
    let short = derive(&coding_session_core(), &DeriveParams::default());
    assert!(of(&short, ProbeKind::Artifact).iter().all(|p| p.answer != "src/lib.rs"), "{short:#?}");
    let lib = artifacts.iter().find(|p| p.answer == "src/lib.rs").expect("lib.rs");
    assert_eq!(lib.facts, vec![vec!["src/lib.rs".to_string(), "lib.rs".to_string()]]);
    assert!(lib.question.starts_with("Which file did the agent edit with the Edit tool at call 4"), "{}", lib.question);
    let read = artifacts.iter().find(|p| p.answer == "/repo/utils.py").expect("utils.py");
    assert_eq!(read.question, "Which file did the agent read with the Read tool at call 1?");
}

#[test]
fn recall_takes_errors_and_identifiers_the_user_gave() {
    let conv = coding_session();
    let probes = derive(&conv, &DeriveParams::default());
    let recall = of(&probes, ProbeKind::Recall);
    // The Read result mentions an error but is file content; the failed cargo test is an error.
    // It is also the last command that failed: the state probe asks it, and the error
    // family's probe with the same facts is merged into it.
    let errors: Vec<&&Probe> =
        recall.iter().filter(|p| p.question.starts_with("What error") || p.question.contains("command")).collect();
    assert_eq!(errors.len(), 1, "{recall:#?}");
    assert_eq!(errors[0].answer, "error[E0425]: cannot find value `MAX_RETRIES` in this scope");
    assert_eq!(errors[0].question, "Why did the last command that failed, `cargo test > test.log`, fail?");
    assert_eq!(errors[0].source_message, 7);
    // Only identifiers the user gave: the path, not the number 250 or the name parse_config.
    let ids: Vec<&str> =
        recall.iter().filter(|p| p.question.contains("did the user give")).map(|p| p.answer.as_str()).collect();
    assert_eq!(ids, ["utils.py"], "{recall:#?}");
    let path = recall.iter().find(|p| p.answer == "utils.py").expect("the path");
    assert_eq!(path.question, "Which path did the user give in their message 1, right after \"Port\"?");
}

#[test]
fn only_identifiers_are_asked_for_by_themselves() {
    for id in [
        "Q69X3R",
        "mia_li_3668",
        "#W9373487",
        "286422338955",
        "src/lib.rs",
        "config.yaml",
        "a3f9c2e1b",
        "https://example.com/x",
        "E0425",
        "aarav.ahmed6699@example.com",
    ] {
        assert!(is_id(id), "{id}");
    }
    for not in ["1.2.3", "v2.0", "lib/", "###", "250", "parse_config", "Code", "no", "USA", "business"] {
        assert!(!is_id(not), "{not}");
    }
}

#[test]
fn weak_facts_are_dropped_and_counted() {
    for w in ["business", "Code", "confirming", "difference", "no", "of"] {
        assert!(is_common_word(w), "{w}");
    }
    assert!(!is_common_word("42") && !is_common_word("Q69X3R") && !is_common_word("two words"));
    // `ZX-9` is in the system prompt; `Zebrafish` in every message; `Q69X3R` only in the request.
    let mut messages = vec![
        Message::system("Agent policy for ZX-9 devices."),
        Message::user("About ZX-9: please cancel Q69X3R, Zebrafish."),
    ];
    for i in 0..6 {
        messages.push(Message::assistant(format!("Zebrafish step {i}")));
    }
    let conv = Conversation::new("w", messages);
    let (probes, dropped) = derive_counted(&conv, &DeriveParams::default());
    let task = of(&probes, ProbeKind::Task);
    assert_eq!(task[0].facts, vec![vec!["Q69X3R".to_string()]]);
    assert!(dropped.in_system_prompt >= 1 && dropped.frequent >= 1, "{dropped:?}");
    for p in &probes {
        for a in p.facts.iter().flatten() {
            assert!(!["ZX-9", "Zebrafish"].contains(&a.as_str()), "{a}");
        }
    }
    // Nothing left: the probe is dropped and counted.
    let bare = Conversation::new("b", vec![Message::user("Please help."), Message::assistant("Sure.")]);
    let (probes, dropped) = derive_counted(&bare, &DeriveParams::default());
    assert!(probes.is_empty());
    assert_eq!(dropped.probes, 1, "{dropped:?}");
}

#[test]
fn state_probes_name_the_last_failing_test_and_command() {
    let conv = padded(
        Conversation::new(
            "st",
            vec![
                Message::user("Make the parser tests pass."),
                Message::assistant_calls("", vec![call("1", "Bash", json!({"command": "pytest tests/"}))]),
                Message::tool_result(
                    "1",
                    "Bash",
                    "Exit code 1\nFAILED tests/test_parse.py::test_empty_input - IndexError: list index out of range",
                )
                .with_error(),
                Message::assistant_calls("", vec![call("2", "Bash", json!({"command": "make lint"}))]),
                Message::tool_result("2", "Bash", "Exit code 2\nmake: *** No rule to make target 'lint'.  Stop.")
                    .with_error(),
            ],
        ),
        12,
    );
    let probes = derive(&conv, &DeriveParams::default());
    assert_grounded(&conv, &probes);
    let test = probes.iter().find(|p| p.question.starts_with("Which test failed last")).expect("a test probe");
    assert_eq!(test.source_message, 2);
    assert_eq!(test.facts[0][0], "tests/test_parse.py::test_empty_input");
    assert!(test.question.contains("`pytest tests/`"), "{}", test.question);
    let cmd = probes.iter().find(|p| p.question.starts_with("Why did the last command")).expect("a command probe");
    assert_eq!(cmd.source_message, 4);
    assert!(cmd.question.contains("`make lint`"));
    assert_eq!(failing_test("test parser::empty ... FAILED"), Some("parser::empty".into()));
    assert_eq!(failing_test("--- FAIL: TestParse (0.00s)"), Some("TestParse".into()));
    assert_eq!(failing_test("FAILED (errors=1)"), None);
}

/// The files changed so far: edits, writes and applied patches, newest first, each fact
/// checked against the message that changed it; a file only read is not one of them.
#[test]
fn state_probe_lists_the_files_changed_so_far() {
    let patch =
        "diff --git a/src/lexer.rs b/src/lexer.rs\n--- a/src/lexer.rs\n+++ b/src/lexer.rs\n@@ -1 +1 @@\n-a\n+b\n";
    let conv = padded(
        Conversation::new(
            "files",
            vec![
                Message::user("Fix the tokenizer crash on empty input."),
                Message::assistant_calls("", vec![call("1", "Read", json!({"file_path": "src/main.rs"}))]),
                Message::tool_result("1", "Read", "fn main() {}"),
                Message::assistant_calls(
                    "",
                    vec![call(
                        "2",
                        "Edit",
                        json!({"file_path": "src/parser.rs", "old_string": "x", "new_string": "y"}),
                    )],
                ),
                Message::tool_result("2", "Edit", "The file src/parser.rs has been updated."),
                Message::assistant_calls("", vec![call("3", "apply_patch", json!({"input": patch}))]),
                Message::tool_result("3", "apply_patch", "Done."),
                Message::assistant_calls(
                    "",
                    vec![call(
                        "4",
                        "Write",
                        json!({"file_path": "tests/empty_input.rs", "content": "#[test] fn t() {}"}),
                    )],
                ),
                Message::tool_result("4", "Write", "File created."),
            ],
        ),
        16,
    );
    let probes = derive(&conv, &DeriveParams::default());
    assert_grounded(&conv, &probes);
    let list = probes
        .iter()
        .find(|p| p.question.starts_with("Which files has the agent changed so far"))
        .expect("a files-changed probe");
    assert_eq!(list.kind, ProbeKind::Artifact);
    assert_eq!(list.source_message, 7, "the last change");
    let firsts: Vec<&str> = list.facts.iter().map(|f| f[0].as_str()).collect();
    assert_eq!(firsts, ["tests/empty_input.rs", "src/lexer.rs", "src/parser.rs"]);
    assert!(!list.answer.contains("main.rs"), "a file only read was not changed: {}", list.answer);
    // Each changed file keeps its own artifact probe too.
    assert!(probes
        .iter()
        .any(|p| p.kind == ProbeKind::Artifact && p.facts.len() == 1 && p.facts[0][0] == "src/parser.rs"));
    // One changed file: no list (its artifact probe says it).
    let one = Conversation::new("one", conv.messages[..5].to_vec());
    let probes = derive(&padded(one, 16), &DeriveParams::default());
    assert!(probes.iter().all(|p| !p.question.starts_with("Which files has the agent changed")));
}

#[test]
fn continuation_is_the_last_request_and_the_pending_todos() {
    let conv = coding_session();
    let probes = derive(&conv, &DeriveParams::default());
    let cont = of(&probes, ProbeKind::Continuation);
    assert_eq!(cont.len(), 2);
    assert_eq!(cont[0].source_message, 11, "the recorded summary at 10 is never a source");
    assert_eq!(cont[0].facts, vec![vec!["--all-targets".to_string()]]);
    assert_eq!(cont[1].source_message, 8);
    assert_eq!(
        cont[1].facts,
        vec![
            vec!["Add MAX_RETRIES constant".to_string(), "MAX_RETRIES".to_string()],
            vec!["Delete utils.py".to_string(), "utils.py".to_string()],
        ]
    );
    assert!(probes.iter().all(|p| p.source_message != 10));
}

#[test]
fn gold_actions_are_sourced_at_the_matching_call() {
    let mut conv = Conversation::new(
        "t",
        vec![
            Message::system("# Airline policy"),
            Message::user("Cancel reservation Q69X3R please, my id is mia_li_3668."),
            Message::assistant_calls(
                "",
                vec![call("a", "get_reservation_details", json!({"reservation_id": "Q69X3R"}))],
            ),
            Message::tool_result("a", "get_reservation_details", "{\"status\": \"active\"}"),
            Message::assistant_calls("", vec![call("b", "cancel_reservation", json!({"reservation_id": "Q69X3R"}))]),
            Message::tool_result("b", "cancel_reservation", "{\"status\": \"cancelled\"}"),
            Message::assistant("Cancelled."),
        ],
    );
    conv.meta.insert(
        "gold_actions".into(),
        json!([
            {"name": "cancel_reservation", "arguments": {"reservation_id": "Q69X3R"}},
            {"name": "send_certificate", "arguments": {"user_id": "noah_1", "amount": 150}},
            {"name": "transfer_to_human_agents", "arguments": {}}
        ]),
    );
    let conv = padded(conv, 12);
    let probes = derive(&conv, &DeriveParams::default());
    assert_grounded(&conv, &probes);
    let gold = of(&probes, ProbeKind::Decision);
    // The second action was never called (its values are not in the recording either): a
    // user turn or tool result is never a decision's source. The third has no arguments.
    assert_eq!(gold.len(), 1, "{gold:#?}");
    assert_eq!(gold[0].source_message, 4);
    assert_eq!(gold[0].facts, vec![vec!["Q69X3R".to_string()]]);
    assert_eq!(gold[0].id, "derived-gold-1");
    assert_eq!(
        gold[0].question,
        "With which arguments did the agent call cancel_reservation at call 2 (gold action 1 of 3)?"
    );
}

#[test]
fn a_submitted_patch_gives_one_probe_per_changed_file() {
    let conv = Conversation::new(
        "s",
        vec![
            Message::user("Fix SIZE in widgets/core.py"),
            Message::assistant_calls(
                "",
                vec![call("1", "bash", json!({"command": "sed -i 's/0/1/' widgets/core.py"}))],
            ),
            Message::tool_result("1", "bash", ""),
            Message::assistant("The flag is FLAG{d0n3}."),
        ],
    );
    let mut conv = padded(conv, 10);
    conv.meta
        .insert("submission".into(), json!("diff --git a/widgets/core.py b/widgets/core.py\n-SIZE = 0\n+SIZE = 1\n"));
    let probes = derive(&conv, &DeriveParams::default());
    assert_grounded(&conv, &probes);
    let gold: Vec<&Probe> = probes.iter().filter(|p| p.id.starts_with("derived-gold")).collect();
    assert_eq!(gold.len(), 1);
    assert_eq!(gold[0].kind, ProbeKind::Artifact);
    assert_eq!(gold[0].source_message, 1);
    assert_eq!(gold[0].facts, vec![vec!["widgets/core.py".to_string(), "core.py".to_string()]]);
    // The heuristic artifact for the same file is merged into the gold one.
    assert!(of(&probes, ProbeKind::Artifact).len() == 1, "{probes:#?}");

    conv.meta.insert("submission".into(), json!("FLAG{d0n3}"));
    let probes = derive(&conv, &DeriveParams::default());
    let answer = probes.iter().find(|p| p.id == "derived-gold-1").expect("the submitted answer");
    assert_eq!((answer.kind, answer.source_message, answer.answer.as_str()), (ProbeKind::Recall, 3, "FLAG{d0n3}"));
}

#[test]
fn bounds_are_kept_and_selection_spreads_over_the_conversation() {
    let mut messages = vec![Message::user("Create the report files.")];
    for i in 0..20 {
        let id = i.to_string();
        messages.push(Message::assistant_calls(
            "",
            vec![call(&id, "Write", json!({"file_path": format!("out/report_{i}.txt"), "content": "x"}))],
        ));
        messages.push(Message::tool_result(&id, "Write", "ok"));
    }
    let conv = Conversation::new("b", messages);
    // Four artifact probes: the list of files changed so far (the newest four), then three
    // files spread over the conversation.
    let params = DeriveParams { max_artifact: 4, ..DeriveParams::default() };
    let probes = derive(&conv, &params);
    let answers: Vec<&str> = of(&probes, ProbeKind::Artifact).iter().map(|p| p.answer.as_str()).collect();
    assert_eq!(
        answers,
        [
            "out/report_19.txt, out/report_18.txt, out/report_17.txt, out/report_16.txt",
            "out/report_0.txt",
            "out/report_10.txt",
            "out/report_19.txt"
        ]
    );
    let none = DeriveParams { max_artifact: 0, max_task: 0, ..DeriveParams::default() };
    assert!(derive(&conv, &none).iter().all(|p| p.kind != ProbeKind::Artifact && p.kind != ProbeKind::Task));
    assert_eq!(spread(vec![1, 2, 3, 4, 5], 2), vec![1, 5]);
    assert_eq!(spread(vec![1, 2, 3], 5), vec![1, 2, 3]);
}

#[test]
fn replacing_derived_probes_keeps_the_others_and_is_deterministic() {
    let mut conv = coding_session();
    conv.probes.push(Probe {
        id: "hand-1".into(),
        kind: ProbeKind::Decision,
        question: "Which language?".into(),
        answer: "Rust".into(),
        facts: vec![vec!["Rust".into()]],
        source_message: 1,
        asked_at: None,
    });
    let first = replace_derived(&mut conv, &DeriveParams::default());
    let once = conv.probes.clone();
    let second = replace_derived(&mut conv, &DeriveParams::default());
    assert_eq!(first, second);
    assert_eq!(conv.probes, once);
    assert_eq!(conv.probes[0].id, "hand-1");
    assert_eq!(conv.probes.len(), 1 + first);
    assert!(uses_tools(&conv));
    assert!(crate::check_conversation(&conv).is_empty());
}

#[test]
fn terms_and_error_lines() {
    assert_eq!(
        key_terms("Hi! I'm looking to book a flight from New York to Seattle on May 20th.", 3),
        ["York", "Seattle", "20th"]
    );
    assert_eq!(term_score("e.g", false), 0);
    assert_eq!(term_score("config.yaml", false), 3);
    assert_eq!(term_score("PayPal", false), 2);
    assert_eq!(term_score("everything", false), 0);
    assert_eq!(request_text("Thanks! ###STOP###"), "Thanks!");
    assert_eq!(
        request_text("<pr_description>Fix x</pr_description>\n<instructions>Be careful</instructions>"),
        "<pr_description>Fix x</pr_description>"
    );
    let traceback = "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'user_id'";
    assert_eq!(error_line(traceback, false, false).as_deref(), Some("KeyError: 'user_id'"));
    assert_eq!(
        error_line("ERROR:\nInvalid `path` parameter: /x", true, false).as_deref(),
        Some("Invalid `path` parameter: /x")
    );
    assert_eq!(error_line("all good", false, false), None);
    assert_eq!(error_line("error: in a file", false, true), None);
    assert_eq!(
        shell_files("cd /r && sed -i 's/a/b/' src/x.py && cat notes.md > out/all.txt"),
        vec![
            ("src/x.py".to_string(), Verb::Edit),
            ("out/all.txt".to_string(), Verb::Write),
            ("notes.md".to_string(), Verb::Read)
        ]
    );
    assert!(same_file("/repo/src/lib.rs", "./src/lib.rs"));
    assert!(!same_file("/repo/src/lib.rs", "b.rs"));
}

#[test]
fn each_kind_is_bounded_over_all_families() {
    // A submitted patch changes five files (gold artifact probes) and the agent writes five
    // others (artifact probes): both families give artifacts, and the kind keeps its bound.
    let mut messages = vec![Message::user("Update the modules and write the notes.")];
    for i in 0..5 {
        let (a, b) = (format!("a{i}"), format!("b{i}"));
        messages.push(Message::assistant_calls(
            "",
            vec![
                call(&a, "Edit", json!({"file_path": format!("pkg/mod_{i}.py"), "old_string": "x", "new_string": "y"})),
                call(&b, "Write", json!({"file_path": format!("notes/note_{i}.md"), "content": "n"})),
            ],
        ));
        messages.push(Message::tool_result(&a, "Edit", "ok"));
        messages.push(Message::tool_result(&b, "Write", "ok"));
    }
    let mut conv = Conversation::new("k", messages);
    let patch: String = (0..5).map(|i| format!("diff --git a/pkg/mod_{i}.py b/pkg/mod_{i}.py\n-x\n+y\n")).collect();
    conv.meta.insert("submission".into(), json!(patch));
    for max_artifact in [0, 3, 6, 20] {
        let params = DeriveParams { max_artifact, ..DeriveParams::default() };
        let probes = derive(&conv, &params);
        assert_grounded(&conv, &probes);
        for (kind, n) in count_by_kind(&probes) {
            assert!(n <= params.max_of(kind), "max_artifact {max_artifact}: {n} {kind:?} probes");
        }
        let artifacts = of(&probes, ProbeKind::Artifact);
        // Ten files, and the list of files changed so far.
        assert_eq!(artifacts.len(), max_artifact.min(11), "max_artifact {max_artifact}");
        // The gold family comes first: the patched files take the room before the notes.
        let gold = artifacts.iter().filter(|p| p.id.starts_with("derived-gold")).count();
        assert_eq!(gold, max_artifact.min(5), "max_artifact {max_artifact}");
    }
}
