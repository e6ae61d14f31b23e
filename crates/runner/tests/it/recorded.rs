//! The `recorded` reference through the replay engine: it cuts where the recording's agent
//! compacted and is scored on that agent's summary, while every other strategy replays the
//! history without the recorded summary. On an imported Claude Code session when the corpora
//! are present.

// The test prints why it skips.
#![allow(clippy::print_stdout)]

use compaction::{Conversation, Encoding, Message, Probe, ProbeKind, TokenCounter, ToolCall};
use compaction_strategies::StrategyConfig;
use runlog::record::{FoundIn, PairMetrics};
use runlog::settings::CacheProfile;
use runner::judge::OfflineJudge;
use runner::replay::{replay, ReplaySettings};
use runner::summarize::OfflineSummarizer;
use serde_json::json;

fn run(conversation: &Conversation, strategy: &str, window: u64) -> PairMetrics {
    let settings = ReplaySettings {
        strategy: StrategyConfig::default_for(strategy).expect("known strategy"),
        window,
        encoding: Encoding::O200kBase,
        cache: CacheProfile::Anthropic,
        price: None,
        overflow: runlog::settings::OverflowPolicy::Continue,
    };
    replay(conversation, &settings, &OfflineSummarizer::new(), &OfflineJudge).expect("replays")
}

/// `n` rounds of a `Bash` call and its 200-word result.
fn tool_rounds(messages: &mut Vec<Message>, n: usize) {
    for i in 0..n {
        let id = format!("t{i}");
        messages.push(Message::assistant_calls(
            "",
            vec![ToolCall {
                id: id.clone(),
                name: "Bash".into(),
                arguments: json!({"command": format!("step {i}")}).to_string(),
            }],
        ));
        messages.push(Message::tool_result(id, "Bash", "ok ".repeat(200)));
    }
}

/// A session whose agent compacted once: the summary keeps the ticket id, not the port.
fn session() -> Conversation {
    let mut messages = vec![Message::user("Deploy ticket OPS-4711 to the staging host on port 8443.")];
    tool_rounds(&mut messages, 6);
    messages.push(
        Message::user("This session is being continued from a previous conversation. Summary: deploying OPS-4711.")
            .with_meta("compact_summary", true.into())
            .with_meta("compact_boundary", json!({"trigger": "auto", "pre_tokens": 150000})),
    );
    messages.push(Message::assistant("Continuing the deployment."));
    let probe = Probe {
        id: "p".into(),
        kind: ProbeKind::Recall,
        question: "Which ticket and port?".into(),
        answer: "OPS-4711 on 8443".into(),
        facts: vec![vec!["OPS-4711".into()], vec!["8443".into()]],
        source_message: 0,
        asked_at: None,
        tier: None,
        ..Default::default()
    };
    let mut conv = Conversation::new("s", messages);
    conv.probes.push(probe);
    conv
}

#[test]
fn recorded_cuts_at_the_recorded_summary_and_is_scored_on_it() {
    let conv = session();
    let m = run(&conv, "recorded", 1_000_000);
    assert_eq!(m.compactions, 1);
    let event = &m.compaction_events[0];
    assert_eq!(event.removed, 13, "everything before the summary");
    assert!(event.summary.contains("deploying OPS-4711"));
    assert_eq!(m.violations, 0, "{:?}", m.violations_by_kind);
    // At the end (the last checkpoint), the recorded summary has replaced the source.
    let p = m.probes.iter().rfind(|p| p.probe_id == m.probes[0].probe_id).expect("asked");
    assert_eq!(p.checkpoint, 100);
    assert!(p.at_risk);
    assert_eq!(p.facts, vec![FoundIn::Summary, FoundIn::Lost]);
    assert_eq!(p.score, 0.5);
}

#[test]
fn recorded_pays_for_its_summary_call() {
    let conv = session();
    let exact = compaction::Exact::new(Encoding::O200kBase);
    let settings = ReplaySettings {
        strategy: StrategyConfig::default_for("recorded").expect("known strategy"),
        window: 1_000_000,
        encoding: Encoding::O200kBase,
        cache: CacheProfile::None,
        price: Some(runlog::settings::Price { input: 3.0, cached_input: 0.3, output: 15.0, cache_write: None }),
        overflow: runlog::settings::OverflowPolicy::default(),
    };
    let m = replay(&conv, &settings, &OfflineSummarizer::new(), &OfflineJudge).expect("replays");
    // One summary call: the 13 messages it replaced in, the recorded summary out.
    let replaced: u64 = conv.messages[..13].iter().map(|msg| exact.message_tokens(msg)).sum();
    let summary = exact.text_tokens(&conv.messages[13].content);
    assert_eq!((m.summarizer_calls, m.summarizer_input_tokens, m.summarizer_output_tokens), (1, replaced, summary));
    let expected = (replaced as f64 * 3.0 + summary as f64 * 15.0) / 1e6;
    assert!((m.summary_cost_usd.expect("priced") - expected).abs() < 1e-12, "{:?}", m.summary_cost_usd);
    assert!(m.cost_usd.expect("priced") > expected);
    // Without a price, cost is not measured.
    assert_eq!(run(&conv, "recorded", 1_000_000).cost_usd, None);
}

#[test]
fn other_strategies_never_see_the_recorded_summary() {
    let conv = session();
    let without: Conversation = {
        let mut c = conv.clone();
        c.messages.retain(|m| !m.meta_flag("compact_summary"));
        c
    };
    let mut compacted = 0;
    for name in compaction_strategies::NAMES {
        let a = run(&conv, name, 1_000_000);
        let b = run(&without, name, 1_000_000);
        assert_eq!(a.final_tokens, b.final_tokens, "{name}: the summary is not in the context");
        assert_eq!(a.probes[0].facts, vec![FoundIn::Verbatim, FoundIn::Verbatim], "{name}");
        // Compacting, they see the same history too (the probe is asked one message later).
        let a = run(&conv, name, 600);
        let b = run(&without, name, 600);
        let seen = |m: &PairMetrics| (m.final_tokens, m.compactions, m.probes[0].facts.clone(), m.probes[0].at_risk);
        assert_eq!(seen(&a), seen(&b), "{name}");
        compacted += usize::from(a.compactions > 0);
    }
    // split-fraction is not among them: its 16,384 reserved output tokens leave no proactive
    // threshold at this window, and its document has no over-window path.
    assert!(compacted >= 4, "the small window makes most strategies compact ({compacted})");
}

#[test]
fn recorded_replays_the_compaction_of_a_real_claude_code_session() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpora/claude-code-spotter/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
    );
    let Ok(text) = std::fs::read_to_string(path) else {
        println!("skipped: no corpus file at {path}");
        return;
    };
    let options = dataset::import::ImportOptions {
        format: dataset::import::FormatChoice::Auto,
        strict: true,
        include_compaction_calls: false,
    };
    let out = dataset::import::import_str(&text, path.as_ref(), "fa812bfe", &options);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let mut conv = out.conversations.into_iter().next().expect("one session");
    dataset::probes::replace_derived(&mut conv, &dataset::probes::DeriveParams::default());
    let boundary = conv.messages.iter().position(|m| m.meta_flag("compact_summary")).expect("a recorded compaction");
    assert_eq!(conv.messages[boundary].meta["compact_boundary"], json!({"trigger": "auto", "pre_tokens": 167117}));

    let recorded = run(&conv, "recorded", 200_000);
    assert_eq!(recorded.compactions, 1);
    assert_eq!(recorded.compaction_events[0].removed, boundary);
    assert_eq!(recorded.overflows, 0);
    let none = run(&conv, "none", 200_000);
    assert_eq!(none.compactions, 0);
    assert!(none.final_tokens > recorded.final_tokens);
    assert_eq!(none.probes.len(), recorded.probes.len());
}

/// The session above with two answer keys at its recorded compaction (the summary is message
/// 13): the ticket, which the recorded summary keeps, and the port, which it drops.
fn keyed_session() -> Conversation {
    let mut conv = session();
    conv.probes.clear();
    for (id, alias) in [("k1-01", "OPS-4711"), ("k1-02", "port 8443")] {
        conv.probes.push(Probe {
            id: id.into(),
            kind: ProbeKind::Task,
            question: "What is being deployed, and where?".into(),
            answer: alias.into(),
            facts: vec![vec![alias.into()]],
            source_message: 0,
            asked_at: Some(13),
            tier: Some(compaction::Tier::Critical),
            origin: Some(compaction::ProbeOrigin::Written),
            ..Default::default()
        });
    }
    conv
}

#[test]
fn an_answer_key_is_asked_on_the_request_after_its_checkpoint() {
    let conv = keyed_session();
    assert!(dataset::check_keys(&conv).is_empty(), "{:?}", dataset::check_keys(&conv));
    // `recorded` cuts at the summary: on the request of the call after it, the summary holds
    // the ticket and not the port, and the first message is gone (both keys at risk).
    let m = run(&conv, "recorded", 1_000_000);
    let keys: Vec<_> = m.probes.iter().filter(|p| p.written).collect();
    assert_eq!(keys.len(), 2, "each key asked once");
    assert!(keys.iter().all(|k| k.at_risk && k.asked_at == 15), "{keys:?}");
    assert_eq!(keys[0].facts, vec![FoundIn::Summary]);
    assert_eq!(keys[1].facts, vec![FoundIn::Lost]);
    // Keys are state retention: the probes' retention is over the other probes (none here).
    assert_eq!(m.retention, None);
    // `none` never compacts: the first message is still there, both keys kept verbatim.
    let m = run(&conv, "none", 1_000_000);
    let keys: Vec<_> = m.probes.iter().filter(|p| p.written).collect();
    assert!(keys.iter().all(|k| !k.at_risk && k.score == 1.0), "{keys:?}");
}

/// A session whose user rejects a tool call with their own words, then whose agent compacts
/// with `summary`; the last request is "Rename the retry budget to max_attempts in RetryPolicy".
fn rejecting_session(summary: &str) -> Conversation {
    let mut messages = vec![Message::user("Rename the retry budget to max_attempts in RetryPolicy.")];
    messages.push(Message::assistant_calls(
        "",
        vec![ToolCall {
            id: "r".into(),
            name: "Bash".into(),
            arguments: json!({"command": "git commit -am wip"}).to_string(),
        }],
    ));
    messages.push(Message::tool_result(
        "r",
        "Bash",
        "The user doesn't want to proceed with this tool use. The tool use was rejected. To tell you how to proceed, the user said:\nno commits until the tests pass",
    ));
    tool_rounds(&mut messages, 4);
    messages.push(Message::user(summary).with_meta("compact_summary", true.into()));
    messages.push(Message::assistant("Continuing."));
    Conversation::new("r", messages)
}

#[test]
fn a_persons_words_in_a_tool_rejection_are_theirs_and_a_summary_can_carry_the_request() {
    // The summary says what the user said in the rejection: not invented. It carries the
    // request's words: the request is not dropped.
    let m = run(
        &rejecting_session(
            "Summary: the user said no commits until the tests pass. Task: rename the retry budget to max_attempts in RetryPolicy.",
        ),
        "recorded",
        1_000_000,
    );
    assert_eq!(m.compactions, 1);
    assert!(m.fabricated_directives.is_empty(), "{:?}", m.fabricated_directives);
    assert_eq!(m.latest_user_message_dropped, 0);
    // A summary that invents an instruction and loses the request is flagged for both.
    let m =
        run(&rejecting_session("Summary: the user asked to deploy the service to production."), "recorded", 1_000_000);
    assert_eq!(m.fabricated_directives.len(), 1, "{:?}", m.fabricated_directives);
    assert_eq!(m.latest_user_message_dropped, 1);
}

/// A session whose first request is earlier than the latest, whose agent asks a question the
/// person answers, then compacts with `summary`.
fn answering_session(summary: &str) -> Conversation {
    let mut messages = vec![Message::user("Add a dry-run flag to the deploy script.")];
    tool_rounds(&mut messages, 2);
    messages.push(Message::user("Now make the staging deploy use it."));
    messages.push(Message::assistant_calls(
        "",
        vec![ToolCall {
            id: "q".into(),
            name: "AskUserQuestion".into(),
            arguments: json!({"questions": [{"question": "Which database should the migration target?"}]}).to_string(),
        }],
    ));
    messages.push(Message::tool_result(
        "q",
        "AskUserQuestion",
        "User has answered your questions: \"Which database should the migration target?\"=\"Migrate the schema to Postgres first\". You can now continue with the user's answers in mind.",
    ));
    tool_rounds(&mut messages, 4);
    messages.push(Message::user(summary).with_meta("compact_summary", true.into()));
    messages.push(Message::assistant("Continuing."));
    Conversation::new("q", messages)
}

#[test]
fn an_answer_to_a_question_and_an_earlier_request_are_the_persons_words_and_a_flag_shows_the_nearest() {
    // The answer chosen to the agent's question and a request made before the latest one are
    // the person's words: a summary that states them invents nothing.
    let m = run(
        &answering_session(
            "The user said to migrate the schema to Postgres. The user asked to add a dry-run flag to the deploy script. Next: make the staging deploy use it.",
        ),
        "recorded",
        1_000_000,
    );
    assert_eq!(m.compactions, 1);
    assert!(m.fabricated_directives.is_empty(), "{:?}", m.fabricated_directives);
    assert_eq!(m.latest_user_message_dropped, 0, "the summary carries the latest request");
    // An instruction nobody gave is flagged, with the person's nearest sentence beside it.
    let m = run(
        &answering_session("The user asked to delete the billing script and rotate every credential."),
        "recorded",
        1_000_000,
    );
    assert_eq!(m.fabricated_directives.len(), 1, "{:?}", m.fabricated_directives);
    let flag = &m.fabricated_directives[0];
    assert_eq!(flag.nearest, "Add a dry-run flag to the deploy script.", "{flag:?}");
    assert_eq!(m.latest_user_message_dropped, 1, "the summary does not carry the latest request");
}
