//! What breaks agents in production, on small hand-built conversations: the target provider's
//! refusals end a conversation, configurations that cannot operate, the live request dropped,
//! thinking blocks, and directives a summary puts in the user's mouth.

use compaction::{
    check_request, Context, Conversation, Encoding, Message, Provider, RequestRule, SummaryFailure, SummaryRequest,
    ThinkingBlock, ThinkingKind,
};
use compaction_strategies::StrategyConfig;
use runlog::record::PairMetrics;
use runlog::settings::{CacheProfile, OverflowPolicy};
use runner::judge::OfflineJudge;
use runner::replay::{replay, ReplaySettings, Summarizer, Summary};
use runner::summarize::OfflineSummarizer;
use serde_json::json;
use testkit::ContextBuilder;

fn words(k: usize) -> String {
    vec!["w"; k].join(" ")
}

fn numbered(t: usize, k: usize) -> String {
    format!("{t} {}", words(k - 1))
}

fn strategy(config: serde_json::Value) -> StrategyConfig {
    serde_json::from_value(config).expect("a valid strategy config")
}

fn settings(strategy: StrategyConfig, window: u64, cache: CacheProfile) -> ReplaySettings {
    ReplaySettings {
        strategy,
        window,
        encoding: Encoding::O200kBase,
        cache,
        price: None,
        overflow: OverflowPolicy::Fail,
    }
}

fn run(conversation: &Conversation, settings: &ReplaySettings) -> PairMetrics {
    replay(conversation, settings, &OfflineSummarizer::new(), &OfflineJudge).expect("replay runs")
}

/// A system prompt, then `turns` of a user message and an assistant answer.
fn chat(system: usize, turns: usize, user: usize, assistant: usize) -> ContextBuilder {
    let mut b = ContextBuilder::new().system(words(system - 3));
    for t in 0..turns {
        b = b.user(numbered(t, user - 3)).assistant(numbered(t, assistant - 3));
    }
    b
}

/// `keep-last-n` compacting at call 6 of `chat(1_100, 8, 300, 50)` in a 4,000 window, its
/// assistant summary first in the conversation (Anthropic refuses `first_not_user`).
fn keep_last_n() -> StrategyConfig {
    strategy(json!({
        "name": "keep-last-n", "system_reserve": 2_000, "output_reserve": 0, "safety_buffer": 0,
        "recent_messages_to_keep": 4, "summary_max_tokens": 200, "summary_target_tokens": 200,
    }))
}

#[test]
fn a_request_the_target_provider_refuses_ends_the_conversation_the_others_are_reported() {
    let conversation = chat(1_100, 8, 300, 50).conversation("c");
    let anthropic = run(&conversation, &settings(keep_last_n(), 4_000, CacheProfile::Anthropic));
    let openai = run(&conversation, &settings(keep_last_n(), 4_000, CacheProfile::Openai));
    let unnamed = run(&conversation, &settings(keep_last_n(), 4_000, CacheProfile::None));
    // Anthropic refuses calls 6 and 7 (the summary is an assistant message first): with
    // Anthropic named, the conversation ends at call 6, which and all after are not billed.
    assert_eq!(anthropic.first_rejected_call, Some(6));
    assert_eq!(anthropic.rejected_because.as_deref(), Some("anthropic-messages/first_not_user"));
    assert_eq!(anthropic.overflows, 0, "no request was over the window");
    let billed: u64 = anthropic.timeline[..6].iter().map(|c| c.request_tokens).sum();
    assert_eq!(anthropic.input_tokens, billed);
    // The other provider's refusals, or no provider named: reported, the conversation goes on.
    for m in [&openai, &unnamed] {
        assert_eq!((m.first_rejected_call, m.rejected_because.as_deref()), (None, None));
        assert_eq!(m.rejected_requests_anthropic, 2);
        assert_eq!(m.input_tokens, m.timeline.iter().map(|c| c.request_tokens).sum::<u64>());
    }
    assert_eq!(anthropic.rejected_requests_anthropic, 2, "still counted");
    // The run's manifest says what a refusal does.
    assert!(CacheProfile::None.refusals().contains("no refusal ends a conversation"));
    assert_eq!(CacheProfile::Anthropic.provider(), Some(Provider::AnthropicMessages));
}

#[test]
fn a_configuration_that_cannot_operate_is_marked_with_the_reason() {
    let conversation = chat(1_100, 8, 300, 50).conversation("c");
    let split = |window| {
        run(
            &conversation,
            &settings(StrategyConfig::default_for("split-fraction").expect("catalog"), window, CacheProfile::None),
        )
    };
    let why = split(16_000).inapplicable_reason.expect("16,384 output tokens reserved of 16,000");
    assert!(why.contains("max_output_tokens"), "{why}");
    assert_eq!(split(64_000).inapplicable_reason, None);
}

/// A system prompt, one request, then an agent run of `rounds` tool calls of `result` tokens.
fn agent_run(rounds: usize, result: usize) -> Conversation {
    let mut b = ContextBuilder::new().system("You are a coding agent.").user("Fix the flaky parser test in parse.rs");
    for r in 0..rounds {
        b = b.tool_call("bash", &format!("{{\"cmd\":\"step {r}\"}}"), numbered(r, result));
    }
    b.assistant("Fixed.").conversation("run")
}

#[test]
fn the_live_request_dropped_is_counted_per_request() {
    let conversation = agent_run(10, 100);
    let truncate = StrategyConfig::default_for("truncate").expect("catalog");
    let mut s = settings(truncate, 600, CacheProfile::None);
    s.overflow = OverflowPolicy::Continue;
    let m = run(&conversation, &s);
    assert!(m.compactions > 0);
    // Truncate keeps the newest tool rounds: once the request is cut, the user's ask is gone
    // from every later request.
    let first_cut = m.compaction_events[0].call;
    assert_eq!(m.latest_user_message_dropped, m.calls - u64::from(first_cut), "{:?}", m.compaction_events);
    let none = run(
        &conversation,
        &settings(StrategyConfig::default_for("none").expect("catalog"), 100_000, CacheProfile::None),
    );
    assert_eq!(none.latest_user_message_dropped, 0);
}

fn thinking(index: usize) -> ThinkingBlock {
    ThinkingBlock {
        kind: ThinkingKind::Thinking,
        thinking: format!("I should look at step {index} first"),
        data: String::new(),
        signature: format!("sig{index}"),
    }
}

/// The agent run with a thinking block on every assistant message.
fn thinking_run() -> Conversation {
    let mut c = agent_run(3, 20);
    for (i, m) in c.messages.iter_mut().enumerate() {
        if m.role == compaction::Role::Assistant {
            m.thinking.push(thinking(i));
        }
    }
    c
}

#[test]
fn thinking_blocks_are_counted_for_the_current_tool_loop_only() {
    let c = thinking_run();
    let s = settings(StrategyConfig::default_for("none").expect("catalog"), 100_000, CacheProfile::Anthropic);
    let m = run(&c, &s);
    let plain = {
        let mut c = c.clone();
        c.messages.iter_mut().for_each(|m| m.thinking.clear());
        run(&c, &s)
    };
    let exact = compaction::Exact::o200k();
    use compaction::TokenCounter;
    // Call k (k >= 1) carries the thinking of the k assistant messages of the running loop.
    for (k, (with, without)) in m.timeline.iter().zip(&plain.timeline).enumerate() {
        let loop_thinking: u64 = c.messages[..with.message_index]
            .iter()
            .filter(|m| m.role == compaction::Role::Assistant)
            .flat_map(|m| &m.thinking)
            .map(|b| exact.text_tokens(b.text()))
            .sum();
        assert_eq!(with.request_tokens, without.request_tokens + loop_thinking, "call {k}");
    }
    assert_eq!(m.first_rejected_call, None, "none keeps every block");
}

#[test]
fn anthropic_refuses_a_running_tool_loop_whose_latest_assistant_lost_its_thinking() {
    let c = thinking_run();
    // Up to the second call's results: the loop is still running.
    let mut request: Vec<Message> = c.messages[..6].to_vec();
    assert!(request.last().is_some_and(|m| m.role == compaction::Role::Tool));
    let ctx = |messages: &[Message]| Context::from_messages(messages.iter().cloned());
    assert!(check_request(&ctx(&request), Provider::AnthropicMessages).is_empty());
    // The block stripped from the latest assistant message: refused by Anthropic only.
    request[4].thinking.clear();
    let rules: Vec<RequestRule> =
        check_request(&ctx(&request), Provider::AnthropicMessages).iter().map(|r| r.rule).collect();
    assert_eq!(rules, [RequestRule::ThinkingModified]);
    assert!(check_request(&ctx(&request), Provider::OpenaiChat).is_empty());
    // Changed rather than lost: the replay compares with the recorded block.
    let mut changed = c.messages[4].clone();
    changed.thinking[0].thinking.push_str(" (edited)");
    let tail = [&changed, &c.messages[5]];
    assert!(compaction::thinking_rejection(&tail, Some(&c.messages[4].thinking)).is_some());
    assert!(compaction::thinking_rejection(&[&c.messages[4], &c.messages[5]], Some(&c.messages[4].thinking)).is_none());
    // An earlier turn's blocks may go: once the loop has ended nothing is required.
    let mut finished: Vec<Message> = c.messages.clone();
    finished.push(Message::user("thanks"));
    finished[2].thinking.clear();
    assert!(check_request(&ctx(&finished), Provider::AnthropicMessages).is_empty());
}

/// A summarizer standing in for a model that invents a commit step.
struct Inventing;

impl Summarizer for Inventing {
    fn name(&self) -> String {
        "llm:inventing".into()
    }
    fn summarize(&self, _ctx: &Context, _request: &SummaryRequest) -> Result<Summary, SummaryFailure> {
        let text = "The user asked to fix the parser test. The user asked to commit and push the fix to main.";
        Ok(Summary { text: text.to_string(), input_tokens: 100, output_tokens: 20, cached_tokens: 0 })
    }
}

#[test]
fn a_directive_the_user_never_gave_is_listed_with_its_sentence() {
    let conversation = chat(1_100, 8, 300, 50).conversation("c");
    let mut conversation = conversation;
    conversation.messages[1].content = format!("Please fix the parser test. {}", conversation.messages[1].content);
    let s = settings(keep_last_n(), 4_000, CacheProfile::None);
    let m = replay(&conversation, &s, &Inventing, &OfflineJudge).expect("replay runs");
    assert!(m.compactions > 0);
    assert_eq!(m.fabricated_directives.len() as u64, m.compactions, "one invented step per summary");
    let d = &m.fabricated_directives[0];
    assert_eq!(d.directive, "commit and push the fix to main");
    assert_eq!(d.sentence, "The user asked to commit and push the fix to main.");
    // The offline stand-in copies sentences and cannot invent: its summaries are not checked.
    assert!(run(&conversation, &s).fabricated_directives.is_empty());
}

/// A summarizer standing in for a model that invents a step in words the offline reading does
/// not know, beside one it does.
struct Paraphrasing;

impl Summarizer for Paraphrasing {
    fn name(&self) -> String {
        "llm:paraphrasing".into()
    }
    fn summarize(&self, _ctx: &Context, _request: &SummaryRequest) -> Result<Summary, SummaryFailure> {
        let text = "The user asked to fix the parser test. \
                    Per the user's request, the fix will be committed and pushed to main. \
                    The user asked to deploy the release tonight.";
        Ok(Summary { text: text.to_string(), input_tokens: 100, output_tokens: 20, cached_tokens: 0 })
    }
}

/// An LLM judge against the scripted endpoint: `list` answers the directive-listing request,
/// anything else gets a plain answer or a verdict.
fn listing_judge(list: &'static str) -> (testkit::server::MockServer, runner::judge::llm::LlmJudge) {
    use testkit::server::{MockServer, Recorded, Reply};
    let server = MockServer::start();
    server.respond_with(move |r: &Recorded| {
        if r.body.contains("says the user gave") {
            Reply::text(list, 200, 40)
        } else if r.body.contains("accuracy") {
            Reply::text(
                r#"{"accuracy": 5, "completeness": 5, "artifact_trail": 5, "continuity": 5, "decisions": 5}"#,
                50,
                20,
            )
        } else {
            Reply::text("an answer", 50, 5)
        }
    });
    let mut cfg = llm::LlmConfig::new(llm::Protocol::Openai, "judge-model");
    cfg.base_url = Some(format!("{}/v1", server.url()));
    cfg.max_retries = 0;
    let client = std::sync::Arc::new(llm::Client::new(cfg, None).expect("a client"));
    let judge = runner::judge::llm::LlmJudge::new(client.clone(), client, 1).expect("a judge");
    (server, judge)
}

#[test]
fn with_the_llm_judge_the_graders_list_of_directives_is_checked_against_the_user_messages() {
    let mut conversation = chat(1_100, 8, 300, 50).conversation("c");
    conversation.messages[1].content = format!("Please fix the parser test. {}", conversation.messages[1].content);
    let s = settings(keep_last_n(), 4_000, CacheProfile::None);
    let list = r#"{"directives": [
        {"sentence": "The user asked to fix the parser test.", "directive": "fix the parser test"},
        {"sentence": "Per the user's request, the fix will be committed and pushed to main.", "directive": "commit and push the fix to main"},
        {"sentence": "The user asked to deploy the release tonight.", "directive": "deploy the release tonight"},
        {"sentence": "The user asked to drop the production database.", "directive": "drop the production database"}
    ]}"#;
    let (server, judge) = listing_judge(list);
    let m = replay(&conversation, &s, &Paraphrasing, &judge).expect("replay runs");
    assert!(m.compactions > 0);
    // The grader was asked once per summary, with the summary in its request.
    let asked: Vec<_> = server.requests().into_iter().filter(|r| r.body.contains("says the user gave")).collect();
    assert_eq!(asked.len() as u64, m.compactions, "one list per summary");
    assert!(asked[0].body.contains("Per the user's request, the fix will be committed"));
    // Per summary: the offline reading finds the deploy step, the grader's list adds the commit
    // step; what the user did ask is held, and the grader's own sentence is not the summary's.
    let per_call: Vec<(&str, &str)> = m
        .fabricated_directives
        .iter()
        .filter(|d| d.call == m.fabricated_directives[0].call)
        .map(|d| (d.directive.as_str(), d.sentence.as_str()))
        .collect();
    assert_eq!(
        per_call,
        [
            ("deploy the release tonight", "The user asked to deploy the release tonight."),
            (
                "commit and push the fix to main",
                "Per the user's request, the fix will be committed and pushed to main."
            ),
        ]
    );
    assert_eq!(m.fabricated_directives.len() as u64, 2 * m.compactions);
    let st = judge.stats();
    assert_eq!(
        (st.directive_lists, st.unreadable_directive_lists, st.stray_directives),
        (m.compactions, 0, m.compactions)
    );
    // The offline judge lists nothing: only the offline reading's finding.
    let offline = replay(&conversation, &s, &Paraphrasing, &OfflineJudge).expect("replay runs");
    assert_eq!(offline.fabricated_directives.len() as u64, offline.compactions);
}

#[test]
fn a_directive_list_the_grader_garbles_is_counted_and_adds_nothing() {
    let mut conversation = chat(1_100, 8, 300, 50).conversation("c");
    conversation.messages[1].content = format!("Please fix the parser test. {}", conversation.messages[1].content);
    let s = settings(keep_last_n(), 4_000, CacheProfile::None);
    let (_server, judge) = listing_judge("The user asked for a commit, I think.");
    let m = replay(&conversation, &s, &Paraphrasing, &judge).expect("replay runs");
    assert!(m.compactions > 0);
    let st = judge.stats();
    assert_eq!((st.directive_lists, st.unreadable_directive_lists), (m.compactions, m.compactions));
    assert_eq!(m.fabricated_directives.len() as u64, m.compactions, "the offline reading's alone");
    assert!(m.fabricated_directives.iter().all(|d| d.directive == "deploy the release tonight"));
}
