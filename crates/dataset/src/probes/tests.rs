//! Unit tests of derived probes.

use compaction::{Conversation, Message, Probe, ProbeKind, Tier, ToolCall};
use serde_json::json;

use super::files::shell_files;
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
            // A fact from another message (a choice's proposal, a run's command) is in one of
            // the probe's source messages.
            let found = if list {
                earlier.iter().any(|r| occurs(r, &normalize(alias)))
            } else {
                occurs(&rendered, &normalize(alias))
                    || p.source_messages
                        .iter()
                        .any(|&m| occurs(&normalize(&render_message(&conv.messages[m])), &normalize(alias)))
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
    // The first request, and the later one that carries an identifier of its own.
    assert_eq!(task.len(), 2);
    assert_eq!(task[0].source_message, 1);
    let facts: Vec<&str> = task[0].facts.iter().map(|f| f[0].as_str()).collect();
    // Its key phrase, then its identifiers.
    assert_eq!(facts, ["Port utils.py to Rust", "utils.py", "parse_config", "MAX_RETRIES"]);
    assert_eq!(task[0].id, "derived-task-1");
    assert_eq!(task[1].source_message, 11);
    assert_eq!(
        task[1].facts,
        vec![vec!["run cargo clippy --all-targets when done".to_string()], vec!["--all-targets".to_string()]]
    );
    assert!(task.iter().all(|p| p.tier == Some(Tier::Critical)));
}

#[test]
fn artifacts_come_from_call_arguments_and_commands() {
    let conv = coding_session();
    let probes = derive(&conv, &DeriveParams::default());
    let artifacts = of(&probes, ProbeKind::Artifact);
    let answers: Vec<(&str, usize)> = artifacts.iter().map(|p| (p.answer.as_str(), p.source_message)).collect();
    // Written and edited files first; `/repo/src/lib.rs` and `src/lib.rs` are one file, last
    // touched by the Edit at message 12 (which names it `src/lib.rs`).
    assert_eq!(answers, [("/repo/utils.py", 2), ("README.md", 2), ("test.log", 5), ("src/lib.rs (MAX_RETRIES)", 12)]);
    // In the short session alone, `src/lib.rs` is in 4 of 14 messages: still asked (a fact
    // found often is still a fact).
    let short = derive(&coding_session_core(), &DeriveParams::default());
    assert!(of(&short, ProbeKind::Artifact).iter().any(|p| p.answer.starts_with("src/lib.rs")), "{short:#?}");
    // Its change touched MAX_RETRIES, which the task probe already tests: one fact, one probe.
    let lib = artifacts.iter().find(|p| p.answer == "src/lib.rs (MAX_RETRIES)").expect("lib.rs");
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
    // The fact is the cause line, with the error code as an alias.
    assert_eq!(
        errors[0].facts,
        vec![vec!["cannot find value `MAX_RETRIES` in this scope".to_string(), "E0425".to_string()]]
    );
    assert_eq!(errors[0].tier, Some(Tier::Critical), "nothing ran the tests again");
    // The user's identifiers are the task's facts: not asked again.
    assert!(recall.iter().all(|p| !p.question.contains("did the user give")), "{recall:#?}");
    // In a session where the request is not the only place: a later message's identifier.
    let mut more = coding_session();
    more.messages.push(Message::user("The log is in /var/log/build-7.txt, see there."));
    let probes = derive(&more, &DeriveParams::default());
    assert!(probes.iter().any(|p| p.facts.iter().flatten().any(|a| a == "/var/log/build-7.txt")), "{probes:#?}");
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
    // `ZX-9` is in the system prompt; `multiply_numbers` in every message, which does not
    // make it less the task's: repetition keeps a fact available, at-risk scoring sees it.
    let mut messages = vec![
        Message::system("Agent policy for ZX-9 devices."),
        Message::user("About ZX-9: add multiply_numbers that multiplies numbers together, then cancel Q69X3R."),
    ];
    for i in 0..6 {
        messages.push(Message::assistant(format!("multiply_numbers step {i}")));
    }
    let conv = Conversation::new("w", messages);
    let (probes, dropped) = derive_counted(&conv, &DeriveParams::default());
    let task = of(&probes, ProbeKind::Task);
    // The key phrase skips the clause the system prompt names ("About ZX-9").
    assert_eq!(
        task[0].facts,
        vec![
            vec!["add multiply_numbers that multiplies numbers together".to_string()],
            vec!["multiply_numbers".to_string()],
            vec!["Q69X3R".to_string()]
        ]
    );
    assert_eq!(task[0].tier, Some(Tier::Critical));
    assert!(dropped.in_system_prompt >= 1, "{dropped:?}");
    for p in &probes {
        for a in p.facts.iter().flatten() {
            assert!(!["ZX-9", "multiplies", "together"].contains(&a.as_str()), "{a}");
        }
    }
    // Nothing left: the probe is dropped and counted.
    let bare = Conversation::new(
        "b",
        vec![Message::system("Policy for ZX-9."), Message::user("Please fix ZX-9."), Message::assistant("Sure.")],
    );
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

/// Work state: each changed file with the symbol its change touched (useful), a file only
/// read is a detail.
#[test]
fn changed_files_name_the_symbol_the_change_touched() {
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
                        json!({"file_path": "src/parser.rs", "old_string": "fn next(&mut self)", "new_string": "fn next_token(&mut self) -> Option<Token>"}),
                    )],
                ),
                Message::tool_result("2", "Edit", "The file src/parser.rs has been updated."),
            ],
        ),
        16,
    );
    let probes = derive(&conv, &DeriveParams::default());
    assert_grounded(&conv, &probes);
    let edit = probes.iter().find(|p| p.kind == ProbeKind::Artifact && p.source_message == 3).expect("the edit");
    assert_eq!(edit.facts[1], vec!["next_token".to_string()]);
    assert_eq!(edit.tier, Some(Tier::Useful));
    let read = probes.iter().find(|p| p.kind == ProbeKind::Artifact && p.source_message == 1).expect("the read");
    assert_eq!(read.tier, Some(Tier::Detail));
    assert_eq!(
        work::edit_symbol("", "func (s *Server) HandleLogin(w http.ResponseWriter) {"),
        Some("HandleLogin".into())
    );
    assert_eq!(work::edit_symbol("a", "See the docs for details."), None);
}

/// A lesson: the command failed, the same command run differently worked; the fact is the
/// fix, the answer states the cause line, not the output's first line.
#[test]
fn a_lesson_is_the_fix_and_the_cause() {
    let conv = padded(
        Conversation::new(
            "lesson",
            vec![
                Message::user("Commit the plan in docs/plans/plan.md."),
                Message::assistant_calls("", vec![call("1", "Bash", json!({"command": "git add docs/plans/plan.md"}))]),
                Message::tool_result(
                    "1",
                    "Bash",
                    "Exit code 1\nOn branch main\nThe following paths are ignored by one of your .gitignore files:\ndocs/plans\nhint: Use -f if you really want to add them.",
                )
                .with_error(),
                Message::assistant_calls("", vec![call("2", "Bash", json!({"command": "git add -f docs/plans/plan.md"}))]),
                Message::tool_result("2", "Bash", "Done."),
            ],
        ),
        12,
    );
    let probes = derive(&conv, &DeriveParams::default());
    assert_grounded(&conv, &probes);
    let lesson = probes.iter().find(|p| p.id.starts_with("derived-lesson")).expect("a lesson");
    assert_eq!(lesson.source_message, 3);
    // Fixed at the next attempt: a detail.
    assert_eq!(lesson.tier, Some(Tier::Detail));
    assert_eq!(lesson.facts[0], vec!["git add -f".to_string()]);
    assert!(lesson.answer.contains("ignored by one of your .gitignore files"), "{}", lesson.answer);
    // The failure is resolved: its state probe, if any, is a detail.
    for p in probes.iter().filter(|p| p.question.starts_with("Why did the last command")) {
        assert_eq!(p.tier, Some(Tier::Detail));
    }
    assert_eq!(
        work::cause_facts("fatal: not a git repository (or any of the parent directories): .git"),
        [vec!["fatal: not a git repository (or any of the parent directories): .git".to_string()]]
    );
    assert!(facts::is_code_fragment("error[E0425]:") && facts::is_code_fragment("min(a, b)"));
    assert!(!facts::is_code_fragment("(or any of them)") && !facts::is_code_fragment("FLAG{d0n3}"));
    assert_eq!(
        work::cause_line("Exit code 1\nOn branch master\nnothing to commit, working tree clean").as_deref(),
        Some("nothing to commit, working tree clean")
    );
}

/// A user's confirmation asks for what was proposed in the message it answers.
#[test]
fn a_confirmation_asks_for_what_the_user_approved() {
    let conv = Conversation::new(
        "choice",
        vec![
            Message::user("I want to fly from New York to Seattle on May 20th."),
            Message::assistant("I found flight HAT136 at 305 dollars, departing 2024-05-20. Shall I book it?"),
            Message::user("Yes, please book it."),
            Message::assistant("Booked."),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    assert_grounded(&conv, &probes);
    let choice = probes.iter().find(|p| p.id.starts_with("derived-choice")).expect("a choice");
    assert_eq!(choice.kind, ProbeKind::Decision);
    assert_eq!(choice.tier, Some(Tier::Critical));
    // The choice in the user's words and what it was for, from the proposal.
    assert_eq!(choice.source_message, 2);
    assert_eq!(choice.source_messages, vec![1, 2]);
    assert!(choice.facts.contains(&vec!["HAT136".to_string()]), "{:?}", choice.facts);
    assert!(choice.facts.contains(&vec!["book it".to_string()]), "{:?}", choice.facts);
    assert!(!choice.question.contains("book it"), "{}", choice.question);
}

#[test]
fn a_confirmation_of_a_total_asks_for_the_proposal_that_named_what_was_chosen() {
    let conv = Conversation::new(
        "choice-object",
        vec![
            Message::user("I want the cheapest business round trip, without changing the dates."),
            Message::assistant("The cheapest business option is HAT023 then HAT100, 833 dollars each. Proceed?"),
            Message::user("Could we split this into three separate reservations so I can use all three certificates?"),
            Message::assistant("Split that way, the total on your card stays 1172 dollars. Shall I proceed?"),
            Message::user("Yes, please proceed with this arrangement. Thank you!"),
            Message::assistant("Booking now."),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    assert_grounded(&conv, &probes);
    let choice = probes.iter().find(|p| p.id.starts_with("derived-choice")).expect("a choice");
    // The reply's own message answers a total; the flights were named two messages before.
    assert_eq!(choice.source_message, 4);
    assert!(choice.source_messages.contains(&1), "{:?}", choice.source_messages);
    let all: Vec<&str> = choice.facts.iter().flatten().map(String::as_str).collect();
    assert!(all.iter().any(|a| a.starts_with("HAT")), "{all:?}");
    assert!(all.contains(&"proceed with this arrangement"), "{all:?}");
}

#[test]
fn a_question_that_opens_with_okay_is_a_request_not_a_confirmation() {
    assert!(!work::is_confirmation("Okay, could you tell me the sum of my certificate balances then?"));
    assert!(work::is_confirmation("Yes, let's go with the economy class for this option, please."));
}

#[test]
fn the_key_phrase_follows_the_words_that_ask() {
    let text = "Hi there, I'm a bit all over the place right now. I really need to cancel any orders that haven't shipped yet and start returns.";
    assert_eq!(work::key_phrase(text).as_deref(), Some("cancel any orders"));
    // No asking words: the first clause, as before.
    assert_eq!(work::key_phrase("Refactor the retry loop in the client.").as_deref(), Some("Refactor the retry loop"));
}

#[test]
fn a_later_request_reads_its_prose_paragraphs_and_stops_at_pasted_output() {
    let conv = Conversation::new(
        "paragraphs",
        vec![
            Message::user("Look at my orders."),
            Message::assistant("Here they are."),
            Message::user(
                "Please cancel #W4836353 right away.\n\nFor returns, please return everything in #W4597054 as well.\n\n    at com.example.Main(Main.java:12) #W9999999",
            ),
            Message::assistant("Done."),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let task = probes.iter().find(|p| p.source_message == 2 && p.kind == ProbeKind::Task).expect("the request");
    let all: Vec<&str> = task.facts.iter().flatten().map(String::as_str).collect();
    assert!(all.contains(&"#W4597054"), "a second paragraph of prose is the request: {all:?}");
    assert!(!all.contains(&"#W9999999"), "pasted output is not: {all:?}");
}

#[test]
fn what_a_person_says_of_themselves_is_not_a_constraint_but_a_wish_is() {
    let phrases = |t: &str| structure::constraint_phrases(t).into_iter().map(|c| c.phrase).collect::<Vec<_>>();
    assert!(phrases("I don't remember the email on my account.").is_empty());
    assert!(phrases("We never got a return label for it.").is_empty());
    assert_eq!(phrases("I don't want a replacement for the lamp."), vec!["don't want a replacement for the lamp"]);
    assert_eq!(phrases("Please don't touch the migrations."), vec!["don't touch the migrations"]);
    // A question asks about something; it constrains only when it asks the agent to do it.
    assert!(phrases("Is that because we don't care about lines that don't result in a file change?").is_empty());
    assert_eq!(
        phrases("If it is not selectable, can you have it confirmed without delaying the shipment?"),
        vec!["without delaying the shipment"]
    );
    assert_eq!(phrases("Never retry the upload."), vec!["Never retry the upload"]);
}

#[test]
fn a_patch_names_the_functions_its_hunks_change() {
    let patch = "diff --git a/src/config.py b/src/config.py\n--- a/src/config.py\n+++ b/src/config.py\n\
        @@ -10,6 +10,8 @@ def parse_config(path):\n-    x = 1\n+    x = 2\n\
        @@ -40,3 +42,4 @@ class ConfigLoader:\n+    pass\n\
        diff --git a/README.md b/README.md\n@@ -1,2 +1,2 @@ Usage\n-old\n+new\n";
    assert_eq!(hunk_symbols(patch, "src/config.py"), vec!["parse_config".to_string(), "ConfigLoader".to_string()]);
    assert!(hunk_symbols(patch, "README.md").is_empty(), "prose context is not a function");
    assert_eq!(work::defined_symbol("func (s *Store) Flush(ctx context.Context) error {").as_deref(), Some("Flush"));
}

#[test]
fn two_tasks_created_in_one_message_are_one_change_of_the_list() {
    let conv = padded(
        Conversation::new(
            "tasks",
            vec![
                Message::user("Mark sessions as closed when they end."),
                Message::assistant_calls(
                    "",
                    vec![
                        call("a", "TaskCreate", json!({"subject": "Add the EndedAt field"})),
                        call("b", "TaskCreate", json!({"subject": "Write the markSessionEnded helper"})),
                    ],
                ),
                Message::tool_result("a", "TaskCreate", "Task #1 created successfully: Add the EndedAt field"),
                Message::tool_result(
                    "b",
                    "TaskCreate",
                    "Task #2 created successfully: Write the markSessionEnded helper",
                ),
                Message::assistant_calls(
                    "",
                    vec![call("c", "TaskUpdate", json!({"taskId": "1", "status": "completed"}))],
                ),
                Message::tool_result("c", "TaskUpdate", "Updated task #1 status"),
            ],
        ),
        24,
    );
    let probes = derive(&conv, &DeriveParams::default());
    let lists: Vec<&Probe> = probes.iter().filter(|p| p.id.starts_with("derived-todo")).collect();
    assert_eq!(lists.iter().map(|p| (p.source_message, p.until)).collect::<Vec<_>>(), vec![(1, Some(4)), (4, None)]);
    assert_eq!(lists[0].facts.len(), 2, "the list as the message left it: {:?}", lists[0].facts);
    let mut checked = conv.clone();
    checked.probes = probes.clone();
    assert!(crate::check_conversation(&checked).is_empty(), "{:?}", crate::check_conversation(&checked));
}

#[test]
fn a_plan_handed_over_is_asked_by_its_title() {
    let task = "Implement the following plan:\n\n# Plan: Change Session Subfolder Numbering to 1-Based\n\n## Goal\nMove from 0-based to 1-based folders.";
    let conv = padded(Conversation::new("plan", vec![Message::user(task), Message::assistant("On it.")]), 24);
    let probes = derive(&conv, &DeriveParams::default());
    let t = probes.iter().find(|p| p.kind == ProbeKind::Task).expect("the task");
    let firsts: Vec<&str> = t.facts.iter().map(|f| f[0].as_str()).collect();
    assert_eq!(firsts[0], "Change Session Subfolder Numbering to 1-Based");
    // Its identifiers are facts of their own: a summary that words the title otherwise keeps them.
    assert!(firsts.contains(&"1-Based"), "{firsts:?}");
}

#[test]
fn a_test_run_is_also_asked_by_its_largest_count_as_a_summary_words_it() {
    assert_eq!(structure::largest_count("14 doctests 397 tests 0 failures").as_deref(), Some("397 tests"));
    assert_eq!(structure::largest_count("29 passed 0 failed 0 ignored").as_deref(), Some("29 passed"));
    assert_eq!(structure::largest_count("3 passed 0 failed"), None, "a small count is in every run's line");
}

#[test]
fn the_task_says_how_the_work_is_handed_in() {
    let task = "Fix the bug in parse().\n\nWhen you're done, you can submit your changes by simply running the submit command.";
    let conv = padded(Conversation::new("handoff", vec![Message::user(task), Message::assistant("Looking.")]), 24);
    let probes = derive(&conv, &DeriveParams::default());
    let h = probes.iter().find(|p| p.id.starts_with("derived-handoff")).expect("the handoff");
    assert_eq!((h.kind, h.tier), (ProbeKind::Constraint, Some(Tier::Critical)));
    assert_eq!(h.facts, vec![vec!["submit command".to_string()]]);
    let exact = "Fix it.\n\nYou MUST use this EXACT command to submit:\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt\n```";
    let conv = padded(Conversation::new("handoff", vec![Message::user(exact), Message::assistant("Looking.")]), 24);
    let probes = derive(&conv, &DeriveParams::default());
    let h = probes.iter().find(|p| p.id.starts_with("derived-handoff")).expect("the handoff");
    let all: Vec<&str> = h.facts.iter().flatten().map(String::as_str).collect();
    assert_eq!(all, vec!["COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "patch.txt"]);
}

/// Fact hygiene over every fixture: no lone plain word, no code fragment, every probe with a
/// tier, and one fact tested by one probe.
#[test]
fn derived_facts_keep_to_the_rules() {
    for conv in [coding_session(), coding_session_core()] {
        let probes = derive(&conv, &DeriveParams::default());
        let mut seen = HashSet::new();
        for p in &probes {
            assert!(p.tier.is_some(), "{}", p.id);
            for f in &p.facts {
                assert!(facts::allowed(&f[0]), "{}: {:?} is {:?}", p.id, f[0], facts::fact_type(&f[0]));
                for a in f {
                    assert!(seen.insert(normalize(a)), "{}: {a} is tested twice", p.id);
                }
            }
        }
    }
}

/// The audit counts and flags what passes the limits.
#[test]
fn the_audit_flags_plain_words_code_and_long_conversations_without_a_task() {
    let mut conv = padded(Conversation::new("long", vec![Message::user("Hello"), Message::assistant("Hi")]), 24);
    conv.source = "import/x".into();
    let probe = |id: &str, kind, facts: &[&str]| Probe {
        id: id.into(),
        kind,
        question: "?".into(),
        answer: "!".into(),
        facts: facts.iter().map(|f| vec![f.to_string()]).collect(),
        source_message: 0,
        asked_at: None,
        tier: None,
        ..Default::default()
    };
    conv.probes = vec![
        probe("a", ProbeKind::Recall, &["together", "error ->"]),
        probe("b", ProbeKind::Recall, &["HAT136"]),
        probe("c", ProbeKind::Artifact, &["HAT136"]),
    ];
    let mut audit = audit::Audit::default();
    audit.add(&conv);
    let a = &audit.sources["import/x"];
    assert_eq!((a.probes, a.facts), (3, 4));
    assert_eq!(a.fact_types["plain_word"], 1);
    assert_eq!(a.fact_types["code_fragment"], 1);
    assert_eq!(a.by_tier["useful"], 3);
    assert_eq!(a.duplicates.len(), 1);
    assert_eq!(a.long_without_task, vec!["long".to_string()]);
    let v = audit.violations();
    assert_eq!(v.len(), 4, "{v:?}");
    assert!(audit.render().contains("import/x: 1 conversations, 3 probes, 4 facts"));
}

#[test]
fn continuation_is_the_last_request_and_the_pending_todos() {
    let conv = coding_session();
    let probes = derive(&conv, &DeriveParams::default());
    // The last request is a task probe of its own (it carries `--all-targets`); the to-do
    // list is asked as it stands, from the list itself, each item a phrase (their identifiers
    // are the task's facts already), and no continuation probe asks them again.
    let list: Vec<&Probe> = probes.iter().filter(|p| p.id.starts_with("derived-todo")).collect();
    assert_eq!(list.len(), 1, "{probes:#?}");
    assert_eq!((list[0].kind, list[0].source_message, list[0].until), (ProbeKind::WorkState, 8, None));
    // In progress, then done at this write, then still to do.
    let facts: Vec<&str> = list[0].facts.iter().map(|f| f[0].as_str()).collect();
    assert_eq!(facts, vec!["Add MAX_RETRIES constant", "Port parse_config", "Delete utils.py"]);
    assert_eq!(list[0].tier, Some(Tier::Critical));
    assert!(of(&probes, ProbeKind::Continuation).is_empty(), "{probes:#?}");
    assert!(probes.iter().all(|p| p.source_message != 10));
}

#[test]
fn gold_actions_are_sourced_at_the_matching_call() {
    let mut conv = Conversation::new(
        "t",
        vec![
            Message::system("# Airline policy"),
            Message::user("Cancel my last reservation please, my id is mia_li_3668."),
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
            Message::user("Fix SIZE in the widgets module"),
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
    // Four artifact probes times the scale (41 messages: two), files spread over the
    // conversation.
    assert_eq!(scale(&conv), 2);
    let params = DeriveParams { max_artifact: 4, ..DeriveParams::default() };
    let probes = derive(&conv, &params);
    let answers: Vec<&str> = of(&probes, ProbeKind::Artifact).iter().map(|p| p.answer.as_str()).collect();
    assert_eq!(
        answers,
        [
            "out/report_0.txt",
            "out/report_3.txt",
            "out/report_5.txt",
            "out/report_8.txt",
            "out/report_11.txt",
            "out/report_14.txt",
            "out/report_16.txt",
            "out/report_19.txt"
        ]
    );
    let short = Conversation::new("s", conv.messages[..21].to_vec());
    assert_eq!(scale(&short), 1);
    let answers: Vec<String> =
        of(&derive(&short, &params), ProbeKind::Artifact).iter().map(|p| p.answer.clone()).collect();
    assert_eq!(answers, ["out/report_0.txt", "out/report_3.txt", "out/report_6.txt", "out/report_9.txt"]);
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
        tier: None,
        ..Default::default()
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
        work::request_facts("Hi! I'm looking to book a flight from New York to Seattle on May 20th.", 3),
        [vec!["New York".to_string()], vec!["Seattle".to_string()], vec!["May 20th".to_string()]]
    );
    assert_eq!(
        work::request_facts("Add a function called multiply_numbers that multiplies two numbers together.", 4),
        [vec!["multiply_numbers".to_string()]]
    );
    assert_eq!(term_score("e.g", false), 0);
    assert_eq!(term_score("config.yaml", false), 3);
    assert_eq!(term_score("PayPal", false), 2);
    assert_eq!(term_score("everything", false), 0);
    assert_eq!(request_text("Thanks! ###STOP###"), "Thanks!");
    // A marker glued to the word before is the simulator's too; a markdown heading is not one.
    assert_eq!(request_text("Thank you for your help.###STOP###"), "Thank you for your help.");
    assert_eq!(request_text("Transfer me, please.###TRANSFER###"), "Transfer me, please.");
    assert_eq!(request_text("### Plan ###\nDo it"), "### Plan ###\nDo it");
    // A longer clause is cut before "that's" as before "that", so it keeps its proper nouns.
    assert_eq!(
        work::key_phrase_where(
            "Could we start by updating the shipping to my New York City address that's already on file?",
            &|p| p.contains("York")
        )
        .as_deref(),
        Some("start by updating the shipping to my New York City address")
    );
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
        // Ten files.
        assert_eq!(artifacts.len(), max_artifact.min(10), "max_artifact {max_artifact}");
        // The gold family comes first: the patched files take the room before the notes.
        let gold = artifacts.iter().filter(|p| p.id.starts_with("derived-gold")).count();
        assert_eq!(gold, max_artifact.min(5), "max_artifact {max_artifact}");
    }
}
