//! Next-action readiness and repeat risks: on a recorded session whose agent compacted once,
//! the action after the compaction is ready only when the summary kept the file path it
//! edits; a repeat of a failed command and a re-read of an unchanged file are flagged when the
//! context lost their earlier result; a configuration that never compacts has no readiness;
//! and `keep-last-n` keeping 2 messages is less ready than keeping 40.

use compaction::{Conversation, Encoding, Message, ToolCall};
use compaction_strategies::StrategyConfig;
use runlog::record::PairMetrics;
use runlog::settings::{CacheProfile, OverflowPolicy};
use runner::judge::OfflineJudge;
use runner::replay::{replay, ReplaySettings};
use runner::summarize::OfflineSummarizer;
use serde_json::{json, Value};

fn run_with(conversation: &Conversation, strategy: StrategyConfig, window: u64) -> PairMetrics {
    let settings = ReplaySettings {
        strategy,
        window,
        encoding: Encoding::O200kBase,
        cache: CacheProfile::Anthropic,
        price: None,
        overflow: OverflowPolicy::Continue,
    };
    replay(conversation, &settings, &OfflineSummarizer::new(), &OfflineJudge).expect("replays")
}

fn run(conversation: &Conversation, strategy: &str, window: u64) -> PairMetrics {
    run_with(conversation, StrategyConfig::default_for(strategy).expect("known strategy"), window)
}

fn call(id: &str, name: &str, args: Value) -> Message {
    Message::assistant_calls("", vec![ToolCall { id: id.into(), name: name.into(), arguments: args.to_string() }])
}

/// A session that finds the file to fix, reads it, runs the tests (they fail), is compacted
/// by its agent with `summary`, and then takes `next`.
fn session(summary: &str, next: Message) -> Conversation {
    let mut failed = Message::tool_result("t3", "Bash", "error[E0425]: cannot find value `last_char` in this scope");
    failed.is_error = true;
    let messages = vec![
        Message::user("The tokenizer drops the last character of its input; please fix it."),
        call("t1", "Grep", json!({"pattern": "fn next_token"})),
        Message::tool_result("t1", "Grep", "src/parser/lexer.rs:42: fn next_token(&mut self) -> Token {"),
        call("t2", "Read", json!({"file_path": "src/parser/lexer.rs"})),
        Message::tool_result("t2", "Read", "while pos < len { advance } ".repeat(40)),
        call("t3", "Bash", json!({"command": "cargo test -p parser"})),
        failed,
        Message::user(format!("This session is being continued from a previous conversation. Summary: {summary}"))
            .with_meta("compact_summary", true.into())
            .with_meta("compact_boundary", json!({"trigger": "auto", "pre_tokens": 150000})),
        next,
        Message::tool_result("t4", "Tool", "done"),
        Message::assistant("Fixed."),
    ];
    Conversation::new("s", messages)
}

fn edit() -> Message {
    call(
        "t4",
        "Edit",
        json!({"file_path": "src/parser/lexer.rs", "old_string": "pos < len", "new_string": "pos <= len"}),
    )
}

#[test]
fn an_edit_is_not_ready_when_the_summary_dropped_its_path_and_ready_when_it_kept_it() {
    let dropped = run(&session("fixing the tokenizer's off-by-one.", edit()), "recorded", 1_000_000);
    assert_eq!(dropped.compactions, 1);
    let action = dropped.compaction_events[0].next_action.as_ref().expect("read after the compaction");
    assert_eq!(action.message, 8);
    assert_eq!(action.tools, "Edit");
    assert_eq!(action.needed, 1, "the path came from the Grep and the Read");
    assert_eq!(action.missing, vec!["src/parser/lexer.rs".to_string()]);
    assert_eq!(action.ready(), Some(0.0));
    assert_eq!((dropped.next_action_ready, dropped.next_action_compactions), (Some(0.0), 1));

    let kept = run(&session("fixing the off-by-one in src/parser/lexer.rs.", edit()), "recorded", 1_000_000);
    let action = kept.compaction_events[0].next_action.as_ref().expect("read after the compaction");
    assert!(action.missing.is_empty(), "{:?}", action.missing);
    assert_eq!(kept.next_action_ready, Some(1.0));
    assert_eq!(kept.repeat_risk_failed + kept.repeat_risk_reread, 0, "an edit repeats nothing");
}

#[test]
fn a_path_the_user_gives_in_the_turn_is_not_needed_from_earlier() {
    let mut conv = session("fixing the tokenizer.", edit());
    conv.messages[0] = Message::user("Fix the off-by-one in src/parser/lexer.rs please.");
    let m = run(&conv, "recorded", 1_000_000);
    let action = m.compaction_events[0].next_action.as_ref().expect("read");
    assert_eq!(action.needed, 0);
    assert_eq!(action.ready(), None, "not applicable");
    assert_eq!((m.next_action_ready, m.next_action_compactions), (None, 0));
}

#[test]
fn a_repeat_of_the_failed_command_and_a_reread_are_flagged_when_the_context_lost_them() {
    let again = call("t4", "Bash", json!({"command": "cargo test -p parser"}));
    let m = run(&session("fixing the tokenizer.", again.clone()), "recorded", 1_000_000);
    let action = m.compaction_events[0].next_action.as_ref().expect("read");
    assert!(action.repeat_failed && !action.repeat_reread, "{action:?}");
    assert_eq!((m.repeat_risk_failed, m.repeat_risk_reread), (1, 0));
    assert_eq!(m.next_action_ready, None, "the command needs no identifier from earlier");

    let reread = call("t4", "Read", json!({"file_path": "src/parser/lexer.rs"}));
    let m = run(&session("fixing the tokenizer.", reread), "recorded", 1_000_000);
    assert_eq!((m.repeat_risk_failed, m.repeat_risk_reread), (0, 1));

    // A different command is no repeat.
    let other = call("t4", "Bash", json!({"command": "cargo test -p parser --lib"}));
    let m = run(&session("fixing the tokenizer.", other), "recorded", 1_000_000);
    assert_eq!(m.repeat_risk_failed, 0);
}

#[test]
fn a_configuration_that_never_compacts_has_no_readiness_not_full_readiness() {
    let m = run(&session("fixing the tokenizer.", edit()), "none", 1_000_000);
    assert_eq!(m.compactions, 0);
    assert_eq!((m.next_action_ready, m.next_action_compactions), (None, 0));
    assert_eq!((m.repeat_risk_failed, m.repeat_risk_reread), (0, 0));
}

/// A refactoring session: each step reads one module and edits the module read eight steps
/// (32 messages) before: the edit needs that module's path and the name of the function its
/// read showed, from well outside the last few messages (a summary keeps paths, not what a
/// file read showed).
fn refactoring() -> Conversation {
    let mut messages = vec![Message::user("Refactor every module of the crate to the new error type.")];
    let path = |k: usize| format!("src/module_{k}/handler_{k}.rs");
    for k in 0..48 {
        messages.push(call(&format!("r{k}"), "Read", json!({"file_path": path(k)})));
        let body = format!("fn legacy_handler_{k}x() {{ {} }}", "handle the request and return early ".repeat(60));
        messages.push(Message::tool_result(format!("r{k}"), "Read", body));
        let target = k.saturating_sub(8);
        messages.push(call(
            &format!("e{k}"),
            "Edit",
            json!({"file_path": path(target), "old_string": format!("fn legacy_handler_{target}x()"), "new_string": "fn handler() -> Result<(), Error>"}),
        ));
        messages.push(Message::tool_result(format!("e{k}"), "Edit", "The file has been updated."));
    }
    messages.push(Message::assistant("Every module now returns the new error type."));
    Conversation::new("refactor", messages)
}

#[test]
fn keep_last_n_keeping_2_messages_is_less_ready_than_keeping_40() {
    let conv = refactoring();
    let keep = |n: usize| {
        let config: StrategyConfig =
            serde_json::from_value(json!({"name": "keep-last-n", "recent_messages_to_keep": n})).expect("params");
        run_with(&conv, config, 32_000)
    };
    let (two, forty) = (keep(2), keep(40));
    assert!(two.compactions > 0 && forty.compactions > 0, "both compact at 32k");
    let (r2, r40) = (two.next_action_ready.expect("scored"), forty.next_action_ready.expect("scored"));
    assert!(r2 < r40, "keeping 2 messages: {r2}, keeping 40: {r40}");
    assert_eq!(r40, 1.0, "the path read 32 messages before is among the 40 kept");
}

#[test]
fn an_absolute_path_is_held_by_the_relative_path_a_summary_names() {
    let mut conv = session("fixing the off-by-one in src/parser/lexer.rs.", edit());
    conv.messages[2] = Message::tool_result("t1", "Grep", "/home/dev/parser/src/parser/lexer.rs:42: fn next_token()");
    conv.messages[3] = call("t2", "Read", json!({"file_path": "/home/dev/parser/src/parser/lexer.rs"}));
    conv.messages[8] = call(
        "t4",
        "Edit",
        json!({"file_path": "/home/dev/parser/src/parser/lexer.rs", "old_string": "pos < len", "new_string": "pos <= len"}),
    );
    let m = run(&conv, "recorded", 1_000_000);
    let action = m.compaction_events[0].next_action.as_ref().expect("read");
    assert_eq!(action.needed, 1);
    assert!(action.missing.is_empty(), "{:?}", action.missing);
    // A summary that names another file under the same folder does not hold it.
    let mut other = conv.clone();
    other.messages[7].content = "This session is being continued. Summary: fixing src/parser/mod.rs.".into();
    let m = run(&other, "recorded", 1_000_000);
    assert_eq!(m.next_action_ready, Some(0.0));
}

mod agreement {
    //! Next-action agreement with a model, against the scripted local server: it answers with
    //! the recorded action in one conversation, a wrong one in another, and prose in a third;
    //! the full-history request of a point is made once, whatever the number of
    //! configurations that compacted there; a configuration that never compacts asks nothing.

    use std::collections::BTreeSet;
    use std::sync::Arc;

    use compaction::{Conversation, Encoding, Message, ToolCall};
    use compaction_strategies::StrategyConfig;
    use llm::{Client, LlmConfig, Protocol};
    use runlog::record::{ModelAction, PairMetrics};
    use runlog::settings::{CacheProfile, OverflowPolicy};
    use runner::judge::OfflineJudge;
    use runner::replay::next_action::llm::LlmNextAction;
    use runner::replay::next_action::{full_history, NextActionModel};
    use runner::replay::{replay_with, Models, ReplaySettings};
    use runner::session::Compactor;
    use runner::summarize::OfflineSummarizer;
    use serde_json::json;
    use testkit::server::{MockServer, Recorded, Reply};

    /// Twelve reads, each result naming the file read next; the last result names none and
    /// the agent replies. The system prompt names the conversation (every strategy keeps it).
    fn session(id: &str) -> Conversation {
        let mut messages = vec![
            Message::system(format!("You are agent {id}.")),
            Message::user(format!("Read the files of ticket T-{id} in order.")),
        ];
        for t in 0..12 {
            let call = format!("{id}-c{t}");
            let args = json!({"path": format!("src/{id}/f{t}.rs")}).to_string();
            messages.push(Message::assistant_calls(
                "",
                vec![ToolCall { id: call.clone(), name: "read_file".into(), arguments: args }],
            ));
            let body: Vec<String> = (0..120).map(|i| format!("let v{t}_{i} = {};", (t * 131 + i * 17) % 997)).collect();
            let next = if t < 11 { format!("\nnext: src/{id}/f{}.rs", t + 1) } else { String::new() };
            messages.push(Message::tool_result(&call, "read_file", format!("{}{next}", body.join(" "))));
        }
        messages.push(Message::assistant("Done."));
        Conversation::new(id, messages)
    }

    /// `good`: the file the last result names (the recorded action), or the reply; `bad`: a
    /// file no result names; `prose`: no JSON at all.
    fn answer(r: &Recorded) -> Reply {
        let body = &r.body;
        let text = if body.contains("You are agent good.") {
            let messages = r.json()["messages"].as_array().cloned().unwrap_or_default();
            let last_result = messages
                .iter()
                .filter_map(|m| m["content"].as_str())
                .rfind(|c| c.starts_with("[tool result"))
                .unwrap_or_default()
                .to_string();
            match last_result.split_once("next: ") {
                Some((_, path)) => json!({"tool": "read_file", "arguments": {"path": path.trim()}}).to_string(),
                None => json!({"reply": "Done."}).to_string(),
            }
        } else if body.contains("You are agent bad.") {
            format!("```json\n{}\n```", json!({"tool": "read_file", "arguments": {"path": "src/elsewhere.rs"}}))
        } else {
            "I would read the next file.".to_string()
        };
        Reply::text(text, 100, 10)
    }

    fn settings(strategy: serde_json::Value, cache: CacheProfile) -> ReplaySettings {
        ReplaySettings {
            strategy: serde_json::from_value::<StrategyConfig>(strategy).expect("a strategy"),
            window: 14_000,
            encoding: Encoding::O200kBase,
            cache,
            price: None,
            overflow: OverflowPolicy::Continue,
        }
    }

    #[test]
    fn agreement_with_the_recorded_action_and_the_full_history_and_one_full_request_per_point() {
        let server = MockServer::start();
        server.respond_with(answer);
        let mut cfg = LlmConfig::new(Protocol::Openai, "next-model");
        cfg.base_url = Some(format!("{}/v1", server.url()));
        cfg.max_retries = 0;
        cfg.max_concurrency = 4;
        let model = LlmNextAction::new(Arc::new(Client::new(cfg, None).expect("client"))).expect("model");
        // Two configurations that compact at the same calls (they differ in the prefix cache
        // only), one that compacts elsewhere, one that never compacts.
        let keep4 = json!({"name": "keep-last-n", "recent_messages_to_keep": 4});
        let configurations = [
            settings(keep4.clone(), CacheProfile::Anthropic),
            settings(keep4, CacheProfile::Openai),
            settings(json!({"name": "keep-last-n", "recent_messages_to_keep": 8}), CacheProfile::Anthropic),
            settings(json!({"name": "none"}), CacheProfile::Anthropic),
        ];
        let (summarizer, judge) = (OfflineSummarizer::new(), OfflineJudge);
        let models = Models { summarizer: &summarizer, judge: &judge, next_action: Some(&model), recorded: None };
        let conversations: Vec<Conversation> = ["good", "bad", "prose"].iter().map(|id| session(id)).collect();
        let mut points: Vec<(usize, usize)> = Vec::new();
        let mut asked = 0;
        let mut metrics: Vec<Vec<PairMetrics>> = Vec::new();
        for (c, conversation) in conversations.iter().enumerate() {
            let mut row = Vec::new();
            for s in &configurations {
                let strategy = s.strategy.build().expect("builds");
                let m = replay_with(conversation, Compactor::Stateless(strategy.as_ref()), s, models).expect("replays");
                for e in m.compaction_events.iter().filter(|e| e.agreement.is_some()) {
                    points.push((c, e.next_action.as_ref().expect("read").message));
                    asked += 1;
                }
                row.push(m);
            }
            metrics.push(row);
        }
        let distinct: BTreeSet<(usize, usize)> = points.iter().copied().collect();
        assert!(distinct.len() < asked, "configurations share points: {} of {asked}", distinct.len());

        // Good: every answer is the recorded action, and the full history's.
        for m in &metrics[0][..3] {
            assert!(m.compactions > 0, "keep-last-n compacts");
            let a = m.next_action_agreement.as_ref().expect("asked");
            assert_eq!((a.agree_recorded, a.agree_full, a.unparsed), (Some(1.0), Some(1.0), 0), "{a:?}");
            assert!(a.agree_recorded_compactions > 0);
            assert_eq!(a.agree_recorded_compactions, a.agree_full_compactions);
        }
        // Bad: never the recorded action, always the full history's (the same wrong file).
        for m in &metrics[1][..3] {
            let a = m.next_action_agreement.as_ref().expect("asked");
            assert_eq!((a.agree_recorded, a.agree_full, a.unparsed), (Some(0.0), Some(1.0), 0), "{a:?}");
        }
        // Prose: nothing parses, nothing agrees, every answer counted.
        for m in &metrics[2][..3] {
            let a = m.next_action_agreement.as_ref().expect("asked");
            let points = m.compaction_events.iter().filter(|e| e.agreement.is_some()).count() as u64;
            assert_eq!((a.agree_recorded, a.agree_full, a.agree_recorded_compactions), (None, None, 0), "{a:?}");
            assert_eq!(a.unparsed, 2 * points, "the compacted and the full answer of each point");
            let e = m.compaction_events.iter().find_map(|e| e.agreement.as_ref()).expect("a point");
            assert!(matches!(&e.compacted, ModelAction::Unparsed { raw } if raw.contains("next file")), "{e:?}");
        }
        // Never compacted: asked, over no point: not applicable, not 1.0.
        for row in &metrics {
            let none = &row[3];
            assert_eq!(none.compactions, 0);
            let a = none.next_action_agreement.as_ref().expect("the model was asked for this pair");
            assert_eq!((a.agree_recorded, a.agree_recorded_compactions, a.agree_full), (None, 0, None));
        }

        // One request per point with the compacted context, one per distinct point with the
        // full history (recognized by its exact messages).
        let full: Vec<serde_json::Value> = distinct
            .iter()
            .map(|(c, at)| json!(model.request(&full_history(&conversations[*c], *at)).messages))
            .collect();
        let requests = server.requests();
        let full_made = requests.iter().filter(|r| full.contains(&r.json()["messages"])).count();
        assert_eq!(full_made, distinct.len(), "one full-history request per point");
        assert_eq!(requests.len(), asked + distinct.len());
        let st = model.stats();
        assert_eq!((st.points, st.compacted_requests), (asked as u64, asked as u64));
        assert_eq!((st.full_requests, st.full_shared), (distinct.len() as u64, (asked - distinct.len()) as u64));
        // Unparsed answers as requests: every prose point's, its full-history answer once.
        let prose = points.iter().filter(|(c, _)| *c == 2).count() as u64;
        let prose_distinct = distinct.iter().filter(|(c, _)| *c == 2).count() as u64;
        assert_eq!((st.unparsed_compacted, st.unparsed_full), (prose, prose_distinct));
        assert_eq!(model.name(), "llm:next-model");
    }
}
