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
fn a_todo_list_yields_its_open_items_as_the_next_step_and_its_done_items_as_work_state() {
    let todos = json!({"todos": [
        {"content": "Add the retry budget to RetryPolicy", "status": "completed", "activeForm": "Adding"},
        {"content": "Wire backoff jitter into send_with_retry", "status": "in_progress", "activeForm": "Wiring"},
        {"content": "Document the retry budget in docs/retries.md", "status": "pending", "activeForm": "Documenting"}
    ]});
    let conv =
        session("Make the HTTP client retry with jitter.", vec![("TodoWrite", todos, "Todos have been modified")]);
    let probes = derive(&conv, &DeriveParams::default());
    let next = of_kind(&probes, ProbeKind::NextStep);
    assert_eq!(next.len(), 1, "{probes:#?}");
    assert_eq!(next[0].tier(), Tier::Critical);
    assert_eq!(next[0].source_message, 1);
    assert!(aliases(next[0]).contains(&"send_with_retry"), "{:?}", aliases(next[0]));
    assert!(aliases(next[0]).iter().any(|a| a.contains("docs/retries.md")), "{:?}", aliases(next[0]));
    let done = of_kind(&probes, ProbeKind::WorkState);
    assert_eq!(done.len(), 1, "{probes:#?}");
    assert!(aliases(done[0]).contains(&"RetryPolicy"), "{:?}", aliases(done[0]));
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
    assert!(constraints.contains(&"Don't touch the public API"), "{constraints:?}");
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
