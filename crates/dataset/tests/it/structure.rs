//! Derived probes from what the agent recorded as structure: its to-do list, the questions it
//! asked and the answers, the plan the user turned down, git commits, pushes and pull requests,
//! the user's constraints; and no request taken from text a person did not type.

use compaction::{Conversation, Message, Probe, ProbeKind, Tier, ToolCall};
use dataset::probes::{derive, DeriveParams};
use serde_json::json;

/// A session: the user's request, then the calls given, each with its result, then enough
/// filler that no fact is in most messages.
fn session(request: &str, calls: Vec<(&str, serde_json::Value, &str)>) -> Conversation {
    let mut messages = vec![Message::user(request)];
    for (n, (name, args, result)) in calls.into_iter().enumerate() {
        let id = format!("c{n}");
        messages.push(Message::assistant_calls(
            "",
            vec![ToolCall { id: id.clone(), name: name.into(), arguments: args.to_string() }],
        ));
        messages.push(Message::tool_result(id, name, result));
    }
    for _ in 0..16 {
        messages.push(Message::assistant("Working on it."));
    }
    Conversation::new("s", messages)
}

fn of_kind(probes: &[Probe], kind: ProbeKind) -> Vec<&Probe> {
    probes.iter().filter(|p| p.kind == kind).collect()
}

fn aliases(p: &Probe) -> Vec<&str> {
    p.facts.iter().flatten().map(String::as_str).collect()
}

#[test]
fn every_to_do_list_is_asked_as_it_stood_until_the_next_write() {
    let first = json!({"todos": [
        {"content": "Add the retry budget to RetryPolicy", "status": "in_progress", "activeForm": "Adding"},
        {"content": "Document the retry budget in docs/retries.md", "status": "pending", "activeForm": "Documenting"}
    ]});
    let second = json!({"todos": [
        {"content": "Add the retry budget to RetryPolicy", "status": "completed", "activeForm": "Adding"},
        {"content": "Wire backoff jitter into send_with_retry", "status": "in_progress", "activeForm": "Wiring"},
        {"content": "Document the retry budget in docs/retries.md", "status": "pending", "activeForm": "Documenting"}
    ]});
    let conv = session(
        "Make the HTTP client retry with jitter.",
        vec![("TodoWrite", first, "Todos have been modified"), ("TodoWrite", second, "Todos have been modified")],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let lists: Vec<&Probe> = probes.iter().filter(|p| p.id.starts_with("derived-todo")).collect();
    assert_eq!(lists.len(), 2, "one probe per write: {probes:#?}");
    // The first stands until the second write is in context; the second from there on.
    assert_eq!((lists[0].source_message, lists[0].until), (1, Some(3)));
    assert_eq!((lists[1].source_message, lists[1].until), (3, None));
    assert!(lists[0].stands_at(3) && !lists[0].stands_at(4) && lists[1].stands_at(40));
    assert!(lists.iter().all(|p| p.kind == ProbeKind::WorkState && p.tier() == Tier::Critical));
    // In progress first, then what this write marked done, then what is still to do.
    let firsts: Vec<&str> = lists[1].facts.iter().map(|f| f[0].as_str()).collect();
    assert_eq!(
        firsts,
        vec![
            "Wire backoff jitter into send_with_retry",
            "Add the retry budget to RetryPolicy",
            "Document the retry budget in docs/retries.md"
        ]
    );
    assert!(lists[1].answer.contains("done: Add the retry budget"), "{}", lists[1].answer);
}

#[test]
fn the_task_tools_list_is_asked_after_each_task_added_or_set_done() {
    let conv = session(
        "Mark sessions as closed when the user ends them.",
        vec![
            (
                "TaskCreate",
                json!({"subject": "Add EndedAt field to the session State"}),
                "Task #1 created successfully: Add EndedAt field to the session State",
            ),
            (
                "TaskCreate",
                json!({"subject": "Write the markSessionEnded helper"}),
                "Task #2 created successfully: Write the markSessionEnded helper",
            ),
            ("TaskUpdate", json!({"taskId": "1", "status": "completed"}), "Updated task #1 status"),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let lists: Vec<&Probe> = probes.iter().filter(|p| p.id.starts_with("derived-todo")).collect();
    assert_eq!(lists.len(), 3, "one probe per change: {probes:#?}");
    assert_eq!(
        lists.iter().map(|p| (p.source_message, p.until)).collect::<Vec<_>>(),
        vec![(1, Some(3)), (3, Some(5)), (5, None)]
    );
    // The update's probe asks the task it set done first; the text is where it was created.
    assert_eq!(lists[2].facts[0][0], "Add EndedAt field to the session State");
    assert!(lists[2].source_messages.contains(&1), "{:?}", lists[2].source_messages);
    assert!(lists[2].answer.starts_with("done: Add EndedAt"), "{}", lists[2].answer);
}

#[test]
fn a_commit_a_hook_refused_and_a_push_the_user_turned_down_are_work_state() {
    let conv = session(
        "Commit and push the transcript work.",
        vec![
            (
                "Bash",
                json!({"command": "git commit -m \"feat: unified transcript\""}),
                "Pre-commit validation failed:\n\n[FORMAT] Code is not formatted.\nRun 'mix format' to fix.",
            ),
            (
                "Bash",
                json!({"command": "git push"}),
                "The user doesn't want to proceed with this tool use. The tool use was rejected. To tell you how to proceed, the user said:\npull rebase first",
            ),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let state = of_kind(&probes, ProbeKind::WorkState);
    let refused = state.iter().find(|p| p.question.contains("not go through")).unwrap_or_else(|| panic!("{probes:#?}"));
    assert_eq!(refused.source_message, 2);
    assert!(aliases(refused).contains(&"Pre-commit validation failed:"), "{:?}", aliases(refused));
    assert!(aliases(refused).contains(&"[FORMAT] Code is not formatted."), "{:?}", aliases(refused));
    let declined = state.iter().find(|p| p.question.contains("turn down")).expect("the declined push");
    assert_eq!(declined.source_message, 4);
    assert_eq!(aliases(declined), vec!["pull rebase first"]);
    assert!(!state.iter().any(|p| p.question.starts_with("What did the agent commit")), "nothing was committed");
}

#[test]
fn the_answer_the_user_chose_is_a_critical_choice() {
    let question = json!({"questions": [{"question": "Where should the consent flag live?", "header": "Storage",
        "options": [{"label": "In .entire/settings.json", "description": "a file"}, {"label": "In an env var", "description": "env"}]}]});
    let result = "User has answered your questions: \"Where should the consent flag live?\"=\"In .entire/settings.json\". You can now continue with the user's answers in mind.";
    let conv = session("Add a telemetry consent prompt.", vec![("AskUserQuestion", question, result)]);
    let probes = derive(&conv, &DeriveParams::default());
    let choices = of_kind(&probes, ProbeKind::Choice);
    assert_eq!(choices.len(), 1, "{probes:#?}");
    assert_eq!((choices[0].source_message, choices[0].tier()), (2, Tier::Critical));
    assert_eq!(aliases(choices[0]), ["In .entire/settings.json"]);
}

#[test]
fn a_plan_the_user_turned_down_keeps_their_words() {
    let plan =
        json!({"plan": "# Plan: Add unit tests for CLIVersion\n\n1. checkpoint_test.go\n2. the auto strategy test"});
    let result = "The user doesn't want to proceed with this tool use. The tool use was rejected. To tell you how to proceed, the user said:\nwe don't need the auto strategy test";
    let conv = session("Persist the CLI version in metadata.", vec![("ExitPlanMode", plan, result)]);
    let probes = derive(&conv, &DeriveParams::default());
    let choices = of_kind(&probes, ProbeKind::Choice);
    assert_eq!(choices.len(), 1, "{probes:#?}");
    assert_eq!(choices[0].source_message, 2);
    assert!(aliases(choices[0])[0].contains("auto strategy test"), "{:?}", aliases(choices[0]));
}

#[test]
fn commits_pushes_and_pull_requests_are_work_state() {
    let commit =
        json!({"command": "git commit -m \"$(cat <<'EOF'\nfeat(session): add EndedAt timestamp\n\nBody.\nEOF\n)\""});
    let push = json!({"command": "git push -u origin alex/mark-sessions-closed"});
    let pr = json!({"command": "gh pr create --title \"feat(session): track session closure\" --body \"...\""});
    let conv = session(
        "Mark sessions as closed when the user ends them.",
        vec![
            (
                "Bash",
                commit,
                "[alex/mark-sessions-closed 7e00b6e] feat(session): add EndedAt timestamp\n 10 files changed",
            ),
            ("Bash", push, "branch 'alex/mark-sessions-closed' set up to track 'origin/alex/mark-sessions-closed'."),
            ("Bash", pr, "https://github.com/example/cli/pull/136"),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let state = of_kind(&probes, ProbeKind::WorkState);
    let all: Vec<&str> = state.iter().flat_map(|p| aliases(p)).collect();
    for want in ["add EndedAt timestamp", "7e00b6e", "alex/mark-sessions-closed", "pull/136", "track session closure"] {
        assert!(all.contains(&want), "{want} not in {all:?}");
    }
    assert!(state.iter().all(|p| p.tier() == Tier::Critical));
}

#[test]
fn a_constraint_is_the_constrained_thing_with_its_verb() {
    let conv = session(
        "Fix the flaky login test. Don't touch the public API of auth.rs, and never start the database yourself.",
        vec![("Read", json!({"file_path": "src/auth.rs"}), "pub fn login() {}")],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let constraints: Vec<&str> = of_kind(&probes, ProbeKind::Constraint).iter().flat_map(|p| aliases(p)).collect();
    assert!(constraints.contains(&"Don't touch the public API of auth.rs"), "{constraints:?}");
    assert!(constraints.contains(&"never start the database yourself"), "{constraints:?}");
}

#[test]
fn injected_queued_and_command_output_messages_are_never_requests() {
    let mut conv = session("Rename the flag --dry to --dry-run in cli.rs.", vec![]);
    conv.messages.insert(1, Message::user("<bash-input>git pull</bash-input>"));
    conv.messages
        .insert(2, Message::user("<bash-stdout>Updating 1a2b3c4..5d6e7f8 Fast-forward src/main.rs</bash-stdout>"));
    conv.messages.insert(3, Message::user("also check toolu_01ABCdef in the log").with_meta("queued", true.into()));
    conv.messages
        .insert(4, Message::user("<system-reminder>ticket-9981</system-reminder>").with_meta("injected", true.into()));
    let probes = derive(&conv, &DeriveParams::default());
    for p in &probes {
        assert!(p.source_message == 0 || conv.messages[p.source_message].role != compaction::Role::User, "{p:#?}");
    }
    // A slash command's arguments are a request.
    let mut conv = session("Start.", vec![]);
    conv.messages.push(Message::user(
        "<command-message>plan</command-message>\n<command-name>/plan</command-name>\n<command-args>migrate billing_v2 to Postgres</command-args>",
    ));
    for _ in 0..6 {
        conv.messages.push(Message::assistant("Planning."));
    }
    let probes = derive(&conv, &DeriveParams::default());
    let last = conv.messages.iter().rposition(|m| m.role == compaction::Role::User).expect("a user message");
    assert!(probes.iter().any(|p| p.source_message == last && aliases(p).contains(&"billing_v2")), "{probes:#?}");
}

#[test]
fn a_test_or_lint_run_yields_its_suite_and_outcome_the_last_run_critical() {
    let first = json!({"command": "cd /repo && python -m pytest tests/test_retry.py 2>&1 | tail -5"});
    let last = json!({"command": "cargo test -p retry 2>&1"});
    let again = json!({"command": "python -m pytest tests/test_retry.py"});
    let conv = session(
        "Make the retry tests pass.",
        vec![
            (
                "Bash",
                first,
                "FAILED tests/test_retry.py::test_budget - AssertionError\n=========== 1 failed, 11 passed in 0.42s ===========",
            ),
            ("Bash", last, "running 5 tests\ntest result: ok. 5 passed; 0 failed; 0 ignored; 0 measured"),
            ("Bash", again, "=========== 12 passed in 0.40s ==========="),
            ("Bash", json!({"command": "cat tests/test_retry.py"}), "def test_budget(): ..."),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let runs: Vec<&Probe> = probes.iter().filter(|p| p.id.starts_with("derived-tests")).collect();
    // Three runs (reading a test file is not one), each with its counts and suite.
    assert_eq!(runs.len(), 3, "{runs:#?}");
    assert!(aliases(runs[0]).contains(&"1 failed 11 passed in 0.42s"), "{:?}", aliases(runs[0]));
    // The failing test is asked once, by the probe of the last failing test.
    assert!(probes.iter().flat_map(aliases).any(|a| a == "tests/test_retry.py::test_budget"), "{probes:#?}");
    // The first pytest run was run again later: superseded.
    assert_eq!(runs[0].tier(), Tier::Useful);
    assert!(aliases(runs[1]).contains(&"5 passed 0 failed 0 ignored"), "{:?}", aliases(runs[1]));
    assert!(aliases(runs[1]).contains(&"cargo test -p retry"), "{:?}", aliases(runs[1]));
    assert_eq!(runs[1].tier(), Tier::Critical);
    assert_eq!(runs[2].tier(), Tier::Critical);
    // The suite is in the call, the outcome in its result: both are sources.
    assert_eq!(runs[1].source_messages, vec![3, 4]);
}

#[test]
fn the_working_tree_and_the_branch_are_work_state() {
    let status = "On branch alex/ent-112-reuse\nChanges not staged for commit:\n\tmodified:   cmd/cli/hooks.go\n\tmodified:   cmd/cli/session/state.go\n\nUntracked files:\n\tnotes.txt\n";
    let conv = session(
        "Fix the checkpoint id reuse.",
        vec![
            ("Bash", json!({"command": "git checkout -b alex/ent-112-reuse"}), "Switched to a new branch 'alex/ent-112-reuse'"),
            ("Bash", json!({"command": "git status"}), status),
            (
                "Bash",
                json!({"command": "git diff --stat"}),
                " cmd/cli/agent.go | 22 +++++\n cmd/cli/hooks.go |  2 +-\n 2 files changed, 23 insertions(+), 1 deletion(-)",
            ),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let state = of_kind(&probes, ProbeKind::WorkState);
    let all: Vec<&str> = state.iter().flat_map(|p| aliases(p)).collect();
    for want in ["alex/ent-112-reuse", "cmd/cli/hooks.go", "state.go", "cmd/cli/agent.go"] {
        assert!(all.contains(&want), "{want} not in {all:?}");
    }
    // An untracked file is not a change.
    assert!(!all.iter().any(|a| a.contains("notes.txt")), "{all:?}");
    // Each check is asked by its call; the latest is the working tree as it stands (critical),
    // the one it superseded is useful; the branch switched to is critical.
    let checks: Vec<&&Probe> = state.iter().filter(|p| p.question.contains("checked the working tree")).collect();
    assert_eq!(checks.len(), 2, "{checks:?}");
    let latest = checks.iter().max_by_key(|p| p.source_message).expect("a check");
    assert!(latest.question.contains("at call 3"), "{}", latest.question);
    for p in &checks {
        let want = if p.source_message == latest.source_message { Tier::Critical } else { Tier::Useful };
        assert_eq!(p.tier(), want, "{}", p.question);
    }
    assert!(state.iter().filter(|p| !checks.contains(p)).all(|p| p.tier() == Tier::Critical));
}

#[test]
fn the_words_of_a_rejected_call_are_a_request_and_the_rejected_edit_no_change() {
    let edit = json!({"file_path": "/repo/cmd/dispatch.go", "old_string": "func pick() {}", "new_string": "func pickAgent() {}"});
    let rejected = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:\nthe interface is better no? We don't want if-else call site agent selection logic";
    let conv = session("Support Gemini transcripts in the hooks.", vec![("Edit", edit, rejected)]);
    let probes = derive(&conv, &DeriveParams::default());
    let said =
        probes.iter().find(|p| p.question.contains("turned down the agent's Edit call")).expect("the user's words");
    assert_eq!((said.kind, said.tier(), said.source_message), (ProbeKind::Task, Tier::Critical, 2));
    let constraints: Vec<&str> = of_kind(&probes, ProbeKind::Constraint).iter().flat_map(|p| aliases(p)).collect();
    assert!(constraints.iter().any(|a| a.starts_with("don't want if-else")), "{constraints:?}");
    // The rejected edit changed nothing.
    assert!(!probes.iter().any(|p| p.kind == ProbeKind::Artifact), "{probes:#?}");
}

#[test]
fn a_change_made_through_a_domain_tool_is_work_state_and_a_failed_one_is_not() {
    let mut conv = Conversation::new(
        "tau",
        vec![
            Message::system("# Retail agent policy"),
            Message::user("Change the address of order #W9810810 to 555 Highland Drive, please."),
            Message::assistant_calls(
                "",
                vec![ToolCall {
                    id: "a".into(),
                    name: "get_order_details".into(),
                    arguments: json!({"order_id": "#W9810810"}).to_string(),
                }],
            ),
            Message::tool_result("a", "get_order_details", "{\"status\": \"pending\"}"),
            Message::assistant_calls(
                "",
                vec![ToolCall {
                    id: "b".into(),
                    name: "modify_pending_order_address".into(),
                    arguments: json!({"order_id": "#W9810810", "address1": "555 Highland Drive", "zip": "10116"})
                        .to_string(),
                }],
            ),
            Message::tool_result("b", "modify_pending_order_address", "{\"order_id\": \"#W9810810\"}"),
            Message::assistant_calls(
                "",
                vec![ToolCall {
                    id: "c".into(),
                    name: "cancel_pending_order".into(),
                    arguments: json!({"order_id": "#W4860251", "reason": "no longer needed"}).to_string(),
                }],
            ),
            Message::tool_result("c", "cancel_pending_order", "Error: non-pending order cannot be cancelled"),
        ],
    );
    for _ in 0..12 {
        conv.messages.push(Message::assistant("Anything else?"));
    }
    let probes = derive(&conv, &DeriveParams::default());
    let actions: Vec<&Probe> = probes.iter().filter(|p| p.id.starts_with("derived-action")).collect();
    // `get_` is a lookup, and the cancel failed: one change.
    assert_eq!(actions.len(), 1, "{actions:#?}");
    assert_eq!(
        (actions[0].kind, actions[0].tier(), actions[0].source_message),
        (ProbeKind::WorkState, Tier::Critical, 4)
    );
    assert!(!aliases(actions[0]).iter().any(|a| a.contains("W4860251")), "{:?}", aliases(actions[0]));
    // The object and what it was changed to, together.
    assert!(aliases(actions[0]).contains(&"555 Highland Drive"), "{:?}", aliases(actions[0]));
}

#[test]
fn the_plan_the_agent_stated_is_the_next_step() {
    let mut conv = session("Add a debug sidecar to the transcript view.", vec![]);
    conv.messages.insert(
        1,
        Message::assistant(
            "Now I have the full picture. I'll update:\n\n1. **TranscriptComputers** - filter visible_lines\n2. **SubagentLive** - add toggle_debug events\n3. **spotter.css** - add the debug grid styles\n\nLet me start.",
        ),
    );
    let probes = derive(&conv, &DeriveParams::default());
    let plan = probes.iter().find(|p| p.id.starts_with("derived-plan")).expect("a plan probe");
    assert_eq!((plan.kind, plan.tier(), plan.source_message), (ProbeKind::NextStep, Tier::Critical, 1));
    let all = aliases(plan);
    for want in ["visible_lines", "toggle_debug", "spotter.css"] {
        assert!(all.contains(&want), "{want} not in {all:?}");
    }
    // A list that is not a plan (no word of what comes next before it) is not one.
    let mut conv = session("Summarize the options.", vec![]);
    conv.messages.insert(1, Message::assistant("The options:\n\n1. retry_policy\n2. backoff_policy"));
    assert!(!derive(&conv, &DeriveParams::default()).iter().any(|p| p.id.starts_with("derived-plan")));
}

#[test]
fn a_request_whose_short_phrase_the_policy_holds_is_asked_by_its_whole_clause() {
    // Every distinctive word of "use the gift card" is in the policy; the clause goes on to
    // say which card.
    let mut messages = vec![
        Message::system(
            "# Airline policy\nPayment may be by credit card or gift card. Economy class and business class.",
        ),
        Message::user("Change my flight back from Denver, reservation OBUT9V."),
        Message::assistant("Which payment method would you like to use?"),
        Message::user("I want to use the gift card with the smallest balance for payment."),
    ];
    for _ in 0..16 {
        messages.push(Message::assistant("Working on it."));
    }
    let probes = derive(&Conversation::new("s", messages), &DeriveParams::default());
    let asked = of_kind(&probes, ProbeKind::Task);
    let later = asked.iter().find(|p| p.source_message == 3).unwrap_or_else(|| panic!("{probes:#?}"));
    assert!(aliases(later).iter().any(|a| a.contains("smallest balance")), "{:?}", aliases(later));
}

#[test]
fn a_failed_command_fixed_at_the_next_attempt_is_a_detail_and_a_later_fix_useful() {
    let shell = |cmd: &str| json!({"command": cmd});
    let failed = "Exit code 1\nThe following paths are ignored by one of your .gitignore files: build/out.txt";
    let at_once = session(
        "Add the generated report to the repository.",
        vec![("Bash", shell("git add build/out.txt"), failed), ("Bash", shell("git add -f build/out.txt"), "")],
    );
    let lessons: Vec<Probe> =
        derive(&at_once, &DeriveParams::default()).into_iter().filter(|p| p.id.contains("lesson")).collect();
    assert_eq!(lessons.len(), 1, "{lessons:#?}");
    assert_eq!(lessons[0].tier(), Tier::Detail);
    let later = session(
        "Add the generated report to the repository.",
        vec![
            ("Bash", shell("git add build/out.txt"), failed),
            ("Bash", shell("ls build"), "out.txt"),
            ("Bash", shell("cat .gitignore"), "build/"),
            ("Bash", shell("git add -f build/out.txt"), ""),
        ],
    );
    let lessons: Vec<Probe> =
        derive(&later, &DeriveParams::default()).into_iter().filter(|p| p.id.contains("lesson")).collect();
    assert_eq!(lessons.len(), 1, "{lessons:#?}");
    assert_eq!(lessons[0].tier(), Tier::Useful);
}

#[test]
fn a_push_asks_the_commits_and_branch_git_reported_and_a_new_branch_its_remote() {
    let shell = |cmd: &str| json!({"command": cmd});
    let conv = session(
        "Push the retry work.",
        vec![
            (
                "Bash",
                shell("git push --set-upstream origin retry-budget"),
                "remote:\nremote: Create a pull request for 'retry-budget' on GitHub by visiting:\nTo github.com:acme/client.git\n * [new branch]      retry-budget -> retry-budget",
            ),
            ("Bash", shell("git push"), "To github.com:acme/client.git\n   05fd186..a230dbf  retry-budget -> retry-budget"),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let pushes: Vec<&Probe> = probes.iter().filter(|p| p.question.contains("push")).collect();
    assert_eq!(pushes.len(), 2, "{probes:#?}");
    // The new branch by its remote (the later push asks the branch: no alias twice).
    assert_eq!(pushes[0].source_message, 2);
    assert_eq!(aliases(pushes[0]), vec!["github.com:acme/client.git"]);
    // A plain `git push`: what git printed it pushed.
    assert_eq!(pushes[1].source_message, 4);
    assert_eq!(aliases(pushes[1]), vec!["05fd186..a230dbf", "a230dbf", "retry-budget"]);
}

#[test]
fn an_answer_that_reads_as_code_is_asked_by_its_key_phrase() {
    let question = json!({"questions": [{"question": "The hook blocks on old lint issues. How should we proceed?", "header": "Commit",
        "options": [{"label": "Skip hook", "description": "--no-verify"}, {"label": "Fix them", "description": "fix"}]}]});
    let result = "User has answered your questions: \"The hook blocks on old lint issues. How should we proceed?\"=\"main was clean; fix the lint issues\". You can now continue with the user's answers in mind.";
    let conv = session("Commit the transcript work.", vec![("AskUserQuestion", question, result)]);
    let probes = derive(&conv, &DeriveParams::default());
    let chosen = of_kind(&probes, ProbeKind::Choice);
    assert_eq!(chosen.len(), 1, "{probes:#?}");
    assert_eq!(aliases(chosen[0]), vec!["main was clean"]);
}

#[test]
fn an_issue_the_agent_read_started_and_closed_in_its_tracker_is_task_rule_files_and_state() {
    let show = "○ spotter-dov.3 · Implement debug JSON sidecar and expand controls   [● P1 · OPEN]\n\
        Owner: A · Type: task\n\nDESCRIPTION\n## Output Files\n- `lib/spotter_web/components/transcript_components.ex`\n\
        - `priv/static/assets/spotter.css`\n\n## Architecture Constraints\n\
        - Keep expansion state server-authoritative; do not rely on client-only hidden DOM state.\n\
        - Do not replace highlight.js.\n- Responses must be exactly 10 lines.";
    let conv = session(
        "Work on bead spotter-dov. Start with the first ready task.",
        vec![
            ("Bash", json!({"command": "bd show spotter-dov.3"}), show),
            (
                "Bash",
                json!({"command": "bd update spotter-dov.3 --status in_progress"}),
                "✓ Updated issue: spotter-dov.3",
            ),
            (
                "Bash",
                json!({"command": "bd close spotter-dov.3 --reason=\"Sidecar done\""}),
                "✓ Closed spotter-dov.3: Sidecar done",
            ),
        ],
    );
    let probes = derive(&conv, &DeriveParams::default());
    let tracker: Vec<&Probe> = probes.iter().filter(|p| p.id.contains("tracker")).collect();
    let task = tracker.iter().find(|p| p.kind == ProbeKind::Task).expect("the issue read is a task");
    assert!(aliases(task).contains(&"Implement debug JSON sidecar and expand controls"), "{:?}", aliases(task));
    assert_eq!(task.source_message, 2, "the show command's output holds the issue");
    let rules: Vec<&str> =
        tracker.iter().filter(|p| p.kind == ProbeKind::Constraint).flat_map(|p| aliases(p)).collect();
    assert!(rules.contains(&"Do not replace highlight.js"), "{rules:?}");
    assert!(rules.iter().any(|r| r.contains("client-only")), "{rules:?}");
    assert!(!rules.iter().any(|r| r.contains("10 lines")), "an obligation is not the issue's rule: {rules:?}");
    let files: Vec<&str> = tracker.iter().filter(|p| p.kind == ProbeKind::NextStep).flat_map(|p| aliases(p)).collect();
    assert_eq!(files, vec!["transcript_components.ex", "spotter.css"]);
    let closed = tracker
        .iter()
        .find(|p| p.kind == ProbeKind::WorkState && p.question.contains("close"))
        .expect("the close is work state");
    assert!(aliases(closed).contains(&"Closed spotter-dov.3"), "{:?}", aliases(closed));
    assert!(tracker.iter().all(|p| p.tier() == Tier::Critical));
}
