//! Every strategy on every fixture: the shape of the context before and after compaction, as
//! insta snapshots a reviewer reads at a glance.
//!
//! Each strategy runs with its defaults at the largest window (from the fixture's exact o200k
//! size down by 10% steps) at which its own trigger fires, so the snapshot shows what it does
//! when compaction first becomes necessary. A strategy whose trigger never fires is shown on
//! its reactive path (`Overflow`) at half the fixture's size, or as "no compaction". Summaries
//! are the deterministic offline ones. Accept new snapshots with `INSTA_UPDATE=always`.

use compaction::{Budget, Context, Exact, TokenCounter, Trigger};
use compaction_strategies::{StrategyConfig, NAMES};
use testkit::builder::{Call, ContextBuilder};
use testkit::shape::{before_after, format_tokens, render};
use testkit::summaries::{fulfil, Length};
use testkit::text::{huge, render as text, TextKind};

/// A coding session: a task, reads, greps, parallel reads, an edit, a failing and a passing test
/// run, and large tool outputs.
fn coding_session() -> Context {
    let read = |path: &str, kb: usize, seed: u64| {
        Call::ok("read_file", format!(r#"{{"path":"{path}"}}"#), huge(kb * 1024, seed))
    };
    ContextBuilder::new()
        .system("You are a coding agent working in a Rust repository. Use the tools to read, edit and test code.")
        .user("The config parser panics when the file is missing. Make it return an error instead, and add a test.")
        .calls("Let me look at the parser.", vec![read("src/config.rs", 24, 1)])
        .tool_call("grep", r#"{"pattern":"unwrap\\(\\)","path":"src"}"#, "src/config.rs:42: let text = fs::read_to_string(path).unwrap();\nsrc/main.rs:17: let cfg = Config::load(p).unwrap();")
        .parallel(vec![read("src/main.rs", 12, 2), read("src/error.rs", 3, 3), read("tests/config.rs", 8, 4)])
        .assistant("The panic comes from `unwrap()` on `read_to_string` in `Config::load`. I'll return `ConfigError::Missing` instead.")
        .tool_call(
            "edit_file",
            r#"{"path":"src/config.rs","old":"fs::read_to_string(path).unwrap()","new":"fs::read_to_string(path).map_err(|_| ConfigError::Missing(path.into()))?"}"#,
            "Edited src/config.rs (1 replacement).",
        )
        .calls("Running the tests.", vec![Call::err("bash", r#"{"cmd":"cargo test"}"#, format!("error[E0433]: failed to resolve: use of undeclared type `ConfigError`\n --> src/config.rs:42:52\n{}", huge(6 * 1024, 5)))])
        .assistant("`ConfigError` is not imported. Adding the import.")
        .tool_call("edit_file", r#"{"path":"src/config.rs","old":"use std::fs;","new":"use std::fs;\nuse crate::error::ConfigError;"}"#, "Edited src/config.rs (1 replacement).")
        .user("Also make sure the error message names the file.")
        .calls("", vec![read("src/error.rs", 3, 6)])
        .tool_call("edit_file", r#"{"path":"src/error.rs","old":"Missing","new":"Missing(PathBuf)"}"#, "Edited src/error.rs (2 replacements).")
        .tool_call("bash", r#"{"cmd":"cargo test"}"#, format!("{}\ntest result: ok. 48 passed; 0 failed", huge(20 * 1024, 7)))
        .assistant("Done: `Config::load` now returns `ConfigError::Missing(path)` and the message names the file; all 48 tests pass.")
        .user("Great, now add the regression test.")
        .tool_call("write_file", r#"{"path":"tests/missing_config.rs"}"#, "Wrote tests/missing_config.rs (14 lines).")
        .build()
}

/// A staged paper-writing chat: stages with decisions, long drafts, and chitchat.
fn paper_chat() -> Context {
    let long = |seed: u64| text(TextKind::Prose, 450, seed);
    ContextBuilder::new()
        .system("You help a researcher write a paper, stage by stage: brainstorm, outline, draft, revise.")
        .stage("brainstorm")
        .user("I want to write about context compaction for LLM agents. What angles are there?")
        .assistant(format!("Three angles: what is lost, when to compact, and how to measure it. {}", long(1)))
        .user("ok")
        .assistant("Shall we pick the measurement angle?")
        .user("Yes, measurement: retention of facts after compaction.")
        .assistant("Agreed: the paper measures fact retention under compaction strategies.")
        .decision("Angle: measure fact retention after compaction, across strategies.")
        .stage("outline")
        .user("Draft an outline.")
        .assistant(format!("1. Introduction\n2. Strategies\n3. Probes\n4. Results\n{}", long(2)))
        .user("thanks")
        .assistant("You're welcome.")
        .user("Merge sections 3 and 4?")
        .assistant("Merged: 1. Introduction 2. Strategies 3. Probes and results 4. Discussion.")
        .decision("Outline: Introduction, Strategies, Probes and results, Discussion.")
        .stage("draft")
        .user("Write the introduction.")
        .assistant(long(3))
        .user("👍")
        .assistant("Next: the strategies section.")
        .user("Write the strategies section, covering the five systems.")
        .assistant(long(4))
        .user("sounds good")
        .assistant(long(5))
        .user("Now the probes and results section, with the retention table.")
        .assistant(long(6))
        .build()
}

/// A customer-service session that was compacted before: a previous summary at index 1, then
/// order lookups, a failed refund and a ticket update.
fn customer_service() -> Context {
    ContextBuilder::new()
        .system("You are an airline support agent. Verify the customer before changing bookings. Refunds over $500 need a ticket.")
        .previous_summary(
            1,
            14,
            "## Session Summary (Compaction Round 1)\n\n#### Original Task\nCustomer Mia Chen (user id mia_chen_4412) wants to cancel flight HAT-1042 and get a refund.\n\n#### Current State\n- Identity verified by email and zip code.\n- Booking HAT-1042: 2 passengers, economy, $742 total.",
        )
        .user("So can I get the refund now? It's been a week.")
        .tool_call("get_order", r#"{"order_id":"HAT-1042"}"#, text(TextKind::Json, 40, 11))
        .assistant("Your booking HAT-1042 is eligible for a refund of $742 to the original card.")
        .user("Please go ahead.")
        .tool_error("refund", r#"{"order_id":"HAT-1042","amount":742}"#, "Error 403: refunds over $500 require a supervisor ticket")
        .assistant("The refund needs a supervisor ticket because it is over $500. I'll open one.")
        .tool_call("update_ticket", r#"{"order_id":"HAT-1042","action":"refund_review"}"#, r#"{"ticket":"T-88123","status":"open","eta_days":3}"#)
        .assistant("Ticket T-88123 is open; a supervisor will review the refund within 3 days.")
        .user("Can you also check my other booking, HAT-2210, and my loyalty points?")
        .parallel(vec![
            Call::ok("get_order", r#"{"order_id":"HAT-2210"}"#, text(TextKind::Json, 60, 12)),
            Call::ok("get_loyalty", r#"{"user_id":"mia_chen_4412"}"#, r#"{"tier":"silver","points":18250}"#),
        ])
        .assistant(format!("HAT-2210 is confirmed for May 3; you have 18,250 silver points. {}", text(TextKind::Prose, 120, 13)))
        .user("ok thanks")
        .assistant("Anything else I can help with?")
        .user("What's the baggage allowance on HAT-2210?")
        .build()
}

const WINDOW_STEPS: u32 = 40;

/// The shape of `strategy` compacting `ctx`, with what was decided.
fn snapshot(name: &str, ctx: &Context) -> String {
    let config = StrategyConfig::default_for(name).expect("catalog name");
    let strategy = config.build().expect("defaults build");
    let exact = ctx.tokens(&Exact::o200k());
    let mut window = exact;
    let mut found = None;
    for _ in 0..WINDOW_STEPS {
        let budget = Budget::new(window);
        if strategy.should_compact(ctx, &budget) {
            found = Some((budget, Trigger::Proactive));
            break;
        }
        window = (window * 9 / 10).max(300);
    }
    if found.is_none() && strategy.reacts_to(Trigger::Overflow) {
        found = Some((Budget::new(exact / 2), Trigger::Overflow));
    }
    let head = format!(
        "{name} with defaults {}\nfixture: {} ({})\n",
        config.params_json(),
        format_tokens(exact),
        Exact::o200k().name()
    );
    let Some((budget, trigger)) = found else {
        return format!(
            "{head}no compaction: its trigger never fires and it does not react to overflow\n{}",
            render(ctx, &Exact::o200k())
        );
    };
    let Some(plan) = strategy.plan(ctx, &budget, trigger) else {
        return format!(
            "{head}window {} ({}): no plan\n{}",
            budget.context_window,
            trigger.as_str(),
            render(ctx, &Exact::o200k())
        );
    };
    let out = strategy.apply(ctx, &budget, &plan, &fulfil(ctx, &plan, Length::Short));
    let documented = strategy.promises(ctx, &budget).documented_deviations;
    let violations: Vec<String> = compaction::check_compaction(strategy.as_ref(), ctx, &budget, trigger, &out)
        .iter()
        .map(|v| if documented.contains(&v.kind()) { format!("{v} (documented)") } else { v.to_string() })
        .collect();
    format!(
        "{head}window {} ({}), {} summary request(s), violations: {}\n{}",
        budget.context_window,
        trigger.as_str(),
        plan.requests.len(),
        if violations.is_empty() { "none".to_string() } else { violations.join("; ") },
        before_after(ctx, &out)
    )
}

fn run_fixture(fixture: &str, ctx: &Context) {
    assert!(compaction::check_context(ctx).is_empty(), "{fixture} is not well formed");
    for name in NAMES {
        let text = snapshot(name, ctx);
        insta::assert_snapshot!(format!("{fixture}__{name}"), text);
    }
}

#[test]
fn coding_session_shapes() {
    run_fixture("coding", &coding_session());
}

#[test]
fn paper_chat_shapes() {
    run_fixture("paper", &paper_chat());
}

#[test]
fn customer_service_shapes() {
    run_fixture("customer", &customer_service());
}

#[test]
fn fixtures_have_what_they_claim() {
    let coding = coding_session();
    assert!(coding.messages().any(|m| m.tool_calls.len() > 1), "parallel calls");
    assert!(coding.messages().any(|m| m.is_error), "a tool error");
    assert!(coding.tokens(&Exact::o200k()) > 20_000, "large outputs");
    let paper = paper_chat();
    assert_eq!(paper.messages().filter(|m| m.meta.contains_key("stage_decision")).count(), 2);
    assert!(paper.messages().any(|m| m.stage.as_deref() == Some("draft")));
    assert!(paper.messages().any(|m| m.content == "ok"));
    let cs = customer_service();
    assert!(cs.get(1).is_some_and(|e| e.origin().is_summary()));
    assert!(cs.get(1).is_some_and(|e| e.message().content.starts_with("## Session Summary")));
}
