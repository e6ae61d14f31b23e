//! Over the shared Claude Code corpora: every to-do list the agent wrote (and every change to
//! the task tools' list), every answer the
//! user chose to an `AskUserQuestion`, every `git commit`, `git push` and `gh pr create` yields
//! a derived probe (one whose source messages hold the call or its result), and no derived
//! probe takes a fact from a message the harness injected or queued. Over the tau corpora, no
//! derived fact carries the user simulator's marker (`###STOP###`). Skipped, with the reason
//! printed, when the corpora folder is absent.

// The test prints why it skips and what it counted.
#![allow(clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use compaction::{Conversation, Role};
use dataset::import::{import, FormatChoice, ImportOptions};
use dataset::probes::{derive, DeriveParams};

const CORPORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpora");
const CLAUDE_CODE: [&str; 3] = ["claude-code-entire", "claude-code-spotter", "claude-code-reliability"];

/// What a call records, when it is one of the records every one of which yields a probe.
fn record(name: &str, arguments: &str) -> Option<&'static str> {
    match name {
        "TodoWrite" | "todo_write" | "update_plan" => return Some("to-do list"),
        "TaskCreate" | "TaskUpdate" => return Some("task list change"),
        "AskUserQuestion" => return Some("question answered"),
        _ => {}
    }
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let cmd = args.get("command")?.as_str()?;
    if cmd.contains("git commit") {
        Some("git commit")
    } else if cmd.contains("git push") {
        Some("git push")
    } else if cmd.contains("gh pr create") {
        Some("gh pr create")
    } else {
        None
    }
}

fn conversations() -> Option<Vec<Conversation>> {
    let root = Path::new(CORPORA);
    if !root.is_dir() {
        println!("skipped: no corpora folder at {CORPORA}");
        return None;
    }
    let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
    Some(
        CLAUDE_CODE
            .iter()
            .flat_map(|c| import(&[root.join(c)], &options))
            .flat_map(|file| file.conversations)
            .collect(),
    )
}

#[test]
fn every_to_do_list_answer_commit_push_and_pull_request_yields_its_probe() {
    let Some(convs) = conversations() else { return };
    let mut total: BTreeMap<&str, usize> = BTreeMap::new();
    let mut missing: Vec<String> = Vec::new();
    for conv in &convs {
        let probes = derive(conv, &DeriveParams::default());
        let sources: BTreeSet<usize> = probes.iter().flat_map(|p| p.sources()).collect();
        for (i, m) in conv.messages.iter().enumerate() {
            for call in &m.tool_calls {
                let Some(kind) = record(&call.name, &call.arguments) else { continue };
                *total.entry(kind).or_default() += 1;
                let result = conv.messages[i + 1..]
                    .iter()
                    .position(|r| r.role == Role::Tool && r.tool_call_id.as_deref() == Some(call.id.as_str()))
                    .map(|k| i + 1 + k);
                if !sources.contains(&i) && !result.is_some_and(|j| sources.contains(&j)) {
                    missing.push(format!("{} message {i}: {kind}", conv.id));
                }
            }
        }
    }
    println!("records: {total:?}");
    assert!(total.values().sum::<usize>() > 100, "the corpora hold the records: {total:?}");
    assert!(missing.is_empty(), "records without a probe:\n{}", missing.join("\n"));
}

#[test]
fn no_derived_probe_takes_a_fact_from_an_injected_or_queued_message() {
    let Some(convs) = conversations() else { return };
    let mut marked = 0;
    for conv in &convs {
        let probes = derive(conv, &DeriveParams::default());
        for p in &probes {
            for s in p.sources() {
                let m = &conv.messages[s];
                let flag = ["injected", "queued"].into_iter().find(|f| m.meta_flag(f));
                assert!(flag.is_none(), "{} {}: source message {s} is {flag:?}: {}", conv.id, p.id, p.question);
            }
        }
        marked += conv.messages.iter().filter(|m| m.meta_flag("injected") || m.meta_flag("queued")).count();
    }
    assert!(marked > 0, "the corpora hold injected or queued messages to avoid");
}

/// The corpora whose user is a simulator that ends or hands off the episode with a marker
/// (`###STOP###`, `###TRANSFER###`).
const SIMULATED_USER: [&str; 2] = ["tau-bench-airline-gpt4o", "tau2-bench-retail-toolorchestra"];

#[test]
fn no_derived_fact_carries_the_user_simulators_marker() {
    let root = Path::new(CORPORA);
    if !root.is_dir() {
        println!("skipped: no corpora folder at {CORPORA}");
        return;
    }
    let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
    let (mut marked, mut facts) = (0, 0);
    for file in SIMULATED_USER.iter().flat_map(|c| import(&[root.join(c)], &options)) {
        for conv in &file.conversations {
            marked += conv.messages.iter().filter(|m| m.role == Role::User && m.content.contains("###")).count();
            for p in derive(conv, &DeriveParams::default()) {
                for alias in p.facts.iter().flatten() {
                    facts += 1;
                    assert!(!alias.contains("###"), "{} {}: fact {alias:?} of {:?}", conv.id, p.id, p.question);
                }
            }
        }
    }
    println!("user messages with a marker: {marked}; facts checked: {facts}");
    assert!(marked > 100, "the corpora hold the simulator's markers: {marked}");
}
