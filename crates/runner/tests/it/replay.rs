//! The replay engine on small hand-built conversations, with exact numbers.
//!
//! Message sizes are chosen so exact counts are easy to follow: `words(k)` is `k` tokens under
//! `o200k_base` (`w w w ...`), and a message costs its content plus 3 tokens of chat template.

use compaction::{
    Context, Conversation, Encoding, Message, Probe, ProbeKind, SummaryFailure, SummaryRequest, TokenCounter, Trigger,
};
use compaction_strategies::StrategyConfig;
use runlog::record::{FoundIn, PairMetrics};
use runlog::settings::{CacheProfile, OverflowPolicy, Price};
use runner::judge::OfflineJudge;
use runner::replay::{replay, ReplayError, ReplaySettings, Summarizer, Summary};
use runner::summarize::OfflineSummarizer;
use serde_json::json;
use testkit::ContextBuilder;

/// `k` tokens of text.
fn words(k: usize) -> String {
    vec!["w"; k].join(" ")
}

fn exact() -> compaction::Exact {
    compaction::Exact::o200k()
}

fn strategy(config: serde_json::Value) -> StrategyConfig {
    serde_json::from_value(config).expect("a valid strategy config")
}

/// Settings under `overflow = "continue"`, the replay's behaviour the exact numbers below
/// were written for; the `fail` tests set the policy themselves.
fn settings(strategy: StrategyConfig, window: u64) -> ReplaySettings {
    ReplaySettings {
        strategy,
        window,
        encoding: Encoding::O200kBase,
        cache: CacheProfile::None,
        price: None,
        overflow: OverflowPolicy::Continue,
    }
}

fn failing(strategy: StrategyConfig, window: u64) -> ReplaySettings {
    ReplaySettings { overflow: OverflowPolicy::Fail, ..settings(strategy, window) }
}

fn run(conversation: &Conversation, settings: &ReplaySettings) -> PairMetrics {
    replay(conversation, settings, &OfflineSummarizer::new(), &OfflineJudge).expect("replay runs")
}

/// `k` tokens of text starting with the number `t` (`t w w ...`), so that no two turns are
/// byte-identical; below 10 it has as many characters as `words(k)`.
fn numbered(t: usize, k: usize) -> String {
    format!("{t} {}", words(k - 1))
}

/// A system prompt of `system` tokens, then `turns` of a user message of `user` tokens and an
/// assistant answer of `assistant` tokens (all including the 3-token template).
fn chat(system: usize, turns: usize, user: usize, assistant: usize) -> ContextBuilder {
    assert!(turns <= 10, "numbered() keeps its length below 10");
    let mut b = ContextBuilder::new().system(words(system - 3));
    for t in 0..turns {
        b = b.user(numbered(t, user - 3)).assistant(numbered(t, assistant - 3));
    }
    b
}

fn compaction_calls(m: &PairMetrics) -> Vec<u32> {
    m.compaction_events.iter().map(|e| e.call).collect()
}

fn requests(m: &PairMetrics) -> Vec<u64> {
    m.timeline.iter().map(|c| c.request_tokens).collect()
}

fn cached(m: &PairMetrics) -> Vec<u64> {
    m.timeline.iter().map(|c| c.cached_tokens).collect()
}

/// A summarizer that always fails.
struct FailingSummarizer;

impl Summarizer for FailingSummarizer {
    fn name(&self) -> String {
        "failing".into()
    }
    fn summarize(&self, _ctx: &Context, _request: &SummaryRequest) -> Result<Summary, SummaryFailure> {
        Err(SummaryFailure { reason: "summarizer unavailable".into() })
    }
}

#[test]
fn words_are_one_token_each() {
    assert_eq!(exact().count(&words(1)), 1);
    assert_eq!(exact().count(&words(997)), 997);
    assert_eq!(exact().message_tokens(&Message::user(words(47))), 50);
    assert_eq!(exact().count(&numbered(7, 47)), 47);
    assert_eq!(numbered(7, 47).len(), words(47).len());
}

#[test]
fn none_counts_calls_tokens_and_overflows() {
    // Requests: 19 + 50 (k + 1) + 10 k = 69, 129, 189, 249, 309.
    let conversation = chat(19, 5, 50, 10).conversation("c");
    let m = run(&conversation, &settings(StrategyConfig::default_for("none").expect("none"), 200));
    assert_eq!(m.calls, 5);
    assert_eq!(requests(&m), [69, 129, 189, 249, 309]);
    assert_eq!(m.timeline.iter().map(|c| c.message_index).collect::<Vec<_>>(), [2, 4, 6, 8, 10]);
    assert_eq!(m.timeline.iter().filter(|c| c.overflow).map(|c| c.call).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(m.overflows, 2);
    assert_eq!(m.compactions, 0);
    assert_eq!(m.peak_tokens, 309);
    assert_eq!(m.input_tokens, 945);
    assert_eq!(m.uncompacted_input_tokens, 945);
    assert_eq!(m.output_tokens, 50);
    assert_eq!(m.final_tokens, 319);
    assert_eq!(m.violations, 0);
    assert_eq!(m.cost_usd, None, "no price: cost is not measured");
    assert_eq!((m.retention, m.at_risk_retention), (None, None));
    // `none` estimates with 4 + ceil(chars / 4): system 4 + 8, user 4 + 24.
    assert_eq!(m.timeline[0].estimate, 12 + 28);
}

#[test]
fn under_fail_the_conversation_ends_at_its_first_rejected_call() {
    // Requests 69, 129, 189, 249, 309 against a window of 200: call 3 (message 8) is rejected.
    let mut conversation = chat(19, 5, 50, 10).conversation("c");
    // The fact of user message 1 ("0 w w ..."), asked before and after the rejected call.
    conversation.probes = vec![
        probe("before", vec![vec!["0 w"]], 1, Some(8)),
        probe("after", vec![vec!["0 w"]], 1, Some(9)),
        probe("end", vec![vec!["0 w"]], 1, None),
    ];
    let price = Price { input: 2.0, cached_input: 0.5, output: 8.0, cache_write: None };
    let none = StrategyConfig::default_for("none").expect("none");
    let fail = ReplaySettings { price: Some(price), ..failing(none.clone(), 200) };
    let cont = ReplaySettings { price: Some(price), ..settings(none, 200) };
    let f = run(&conversation, &fail);
    let c = run(&conversation, &cont);
    assert_eq!((f.first_rejected_call, c.first_rejected_call), (Some(3), None));
    // Billed: the three calls before the rejected one (69 + 129 + 189 request tokens, 3 x 10
    // output tokens); under continue every call.
    assert_eq!((f.input_tokens, f.output_tokens, f.uncompacted_input_tokens), (387, 30, 387));
    assert_eq!((c.input_tokens, c.output_tokens), (945, 50));
    assert!((f.cost_usd.expect("priced") - price.cost(387, 0, 30)).abs() < 1e-12);
    assert_eq!(f.summary_cost_usd, Some(0.0), "none makes no summary call");
    // The replay itself covers the recording as if every request had been sent.
    assert_eq!((f.calls, f.overflows, f.timeline.len()), (5, 2, 5));
    // The probes asked before the rejected call are scored; the later ones score 0, at risk,
    // every fact lost, with the score as if sent kept. The probe with no `asked_at` is asked at
    // each of the four checkpoints: twice before the rejected call, twice after.
    let scores: Vec<(f64, bool, Option<f64>)> = f.probes.iter().map(|p| (p.score, p.at_risk, p.if_sent)).collect();
    let (kept, lost) = ((1.0, false, None), (0.0, true, Some(1.0)));
    assert_eq!(scores, [kept, kept, kept, lost, lost, lost]);
    assert!(f.probes[3..].iter().all(|p| p.facts == [FoundIn::Lost]));
    assert_eq!(f.retention, Some(0.5));
    assert_eq!(f.retention_if_sent, Some(1.0));
    assert_eq!((c.retention, c.retention_if_sent), (Some(1.0), Some(1.0)));
    assert!(c.probes.iter().all(|p| p.if_sent.is_none() && !p.at_risk));
}

#[test]
fn a_strategy_that_recovers_by_compacting_is_not_rejected() {
    // The reactive path runs first: truncate's forced compactions bring every request under
    // the window of 150 (see the reactive test below), `none` is rejected at call 2.
    let conversation = chat(19, 5, 50, 10).conversation("c");
    let s = failing(strategy(json!({"name": "truncate", "max_tokens": 10_000})), 150);
    let m = run(&conversation, &s);
    assert_eq!(m.first_rejected_call, None);
    assert_eq!(m.compactions, 3);
    assert_eq!(m.input_tokens, 69 + 129 * 4);
    let none = run(&conversation, &failing(StrategyConfig::default_for("none").expect("none"), 150));
    assert_eq!(none.first_rejected_call, Some(2));
    assert_eq!(none.input_tokens, 69 + 129);
}

#[test]
fn trigger_checks_record_the_strategys_estimate_and_the_exact_count() {
    let conversation = chat(19, 5, 50, 10).conversation("c");
    let m = run(&conversation, &settings(StrategyConfig::default_for("truncate").expect("truncate"), 250));
    // Before each call's compaction: the context of requests 69, 129, 189, 249, then 199 + 60.
    let checks: Vec<(u64, u64)> = m.timeline.iter().map(|c| (c.check_tokens, c.check_estimate)).collect();
    assert_eq!(checks[..4], [(69, 69), (129, 129), (189, 189), (249, 249)], "truncate estimates exactly");
    // `none` has no threshold: it never checks.
    let none = run(&conversation, &settings(StrategyConfig::default_for("none").expect("none"), 250));
    assert!(none.timeline.iter().all(|c| (c.check_tokens, c.check_estimate) == (0, 0)));
    // keep-last-n estimates with chars/4 and its overhead: not the exact count.
    let k = run(&conversation, &settings(keep_last_n(), 250));
    assert!(k.timeline.iter().all(|c| c.check_tokens > 0));
    assert!(k.timeline.iter().any(|c| c.check_estimate != c.check_tokens));
}

#[test]
fn a_conversation_without_assistant_messages_still_has_metrics() {
    let mut conversation = ContextBuilder::new().system("Be brief.").user("Book flight HAT170.").conversation("c");
    conversation.probes.push(probe("p", vec![vec!["HAT170"]], 1, None));
    let m = run(&conversation, &settings(StrategyConfig::default_for("truncate").expect("truncate"), 1_000));
    assert_eq!((m.calls, m.compactions, m.input_tokens), (0, 0, 0));
    assert!(m.timeline.is_empty());
    assert_eq!(m.final_tokens, exact().messages_tokens(&conversation.messages));
    assert_eq!(m.retention, Some(1.0));
    assert_eq!(m.probes[0].asked_at, 2);
    let empty = Conversation::new("empty", Vec::new());
    let m = run(&empty, &settings(StrategyConfig::default_for("none").expect("none"), 1_000));
    assert_eq!((m.calls, m.final_tokens), (0, 0));
}

#[test]
fn invalid_params_and_probes_are_errors() {
    let conversation = chat(19, 2, 50, 10).conversation("c");
    let bad = strategy(json!({"name": "truncate", "target_ratio": 0.0}));
    match replay(&conversation, &settings(bad, 1_000), &OfflineSummarizer::new(), &OfflineJudge) {
        Err(ReplayError::Params(e)) => assert_eq!(e.param, "target_ratio"),
        other => panic!("expected a params error, got {other:?}"),
    }
    let mut conversation = conversation;
    conversation.probes.push(probe("far", vec![vec!["x"]], 99, None));
    let err = replay(
        &conversation,
        &settings(StrategyConfig::default_for("none").expect("none"), 1_000),
        &OfflineSummarizer::new(),
        &OfflineJudge,
    )
    .expect_err("source_message out of range");
    assert_eq!(
        err.to_string(),
        "conversation c: probe far, field source_message: 99 is outside the conversation (5 messages)"
    );
}

#[test]
fn truncate_compacts_at_the_call_that_crosses_its_target() {
    // Window 250, target floor(0.8 x 250) = 200. Requests 69, 129, 189, then 249 > 200 at call 3:
    // dropping u1 leaves 199, the cut moves on to the next user message: 249 - 60 = 189.
    let conversation = chat(19, 5, 50, 10).conversation("c");
    let m = run(&conversation, &settings(StrategyConfig::default_for("truncate").expect("truncate"), 250));
    assert_eq!(compaction_calls(&m), [3, 4]);
    assert_eq!(requests(&m), [69, 129, 189, 189, 189]);
    let e = &m.compaction_events[0];
    assert_eq!((e.trigger, e.step.as_str()), (Trigger::Proactive, "truncate"));
    assert_eq!((e.tokens_before, e.tokens_after), (249, 189));
    assert_eq!((e.messages_before, e.messages_after, e.removed), (8, 6, 2));
    assert_eq!(e.estimate_before, 249, "truncate estimates with exact o200k_base");
    assert!(e.violations.is_empty(), "{:?}", e.violations);
    assert_eq!(m.overflows, 0);
    assert_eq!(m.compactions, 2);
    assert_eq!(m.uncompacted_input_tokens, 945);
    assert_eq!(m.input_tokens, 69 + 129 + 189 * 3);
    assert_eq!(m.timeline.iter().map(|c| c.compacted).collect::<Vec<_>>(), [false, false, false, true, true]);
    assert_eq!(m.final_tokens, 189 + 10);
}

#[test]
fn truncate_takes_the_reactive_path_when_its_target_is_above_the_window() {
    // The target (10,000) never triggers; from call 2 the request (189) is over the window
    // (150): a forced truncation drops one group and moves on to a user message.
    let conversation = chat(19, 5, 50, 10).conversation("c");
    let s = settings(strategy(json!({"name": "truncate", "max_tokens": 10_000})), 150);
    let m = run(&conversation, &s);
    assert_eq!(compaction_calls(&m), [2, 3, 4]);
    assert!(m.compaction_events.iter().all(|e| e.trigger == Trigger::Overflow));
    assert_eq!(requests(&m), [69, 129, 129, 129, 129]);
    assert_eq!(m.overflows, 0);
    // The same window without the reactive path: `none` overflows.
    let none = run(&conversation, &settings(StrategyConfig::default_for("none").expect("none"), 150));
    assert_eq!(none.overflows, 3);
}

#[test]
fn openai_and_anthropic_prefix_caches_and_cost() {
    // Requests 2,500, 3,100, 3,700; each shares the whole previous request.
    let conversation = chat(2_000, 3, 500, 100).conversation("c");
    let mut s = settings(StrategyConfig::default_for("none").expect("none"), 100_000);
    s.cache = CacheProfile::Openai;
    s.price = Some(Price { input: 2.0, cached_input: 0.5, output: 8.0, cache_write: None });
    let m = run(&conversation, &s);
    assert_eq!(requests(&m), [2_500, 3_100, 3_700]);
    // floor(2,500 / 128) x 128 = 2,432; floor(3,100 / 128) x 128 = 3,072.
    assert_eq!(cached(&m), [0, 2_432, 3_072]);
    assert_eq!((m.input_tokens, m.cached_tokens, m.output_tokens), (9_300, 5_504, 300));
    // (3,796 x 2 + 5,504 x 0.5 + 300 x 8) / 1e6
    assert!((m.cost_usd.expect("priced") - 0.012_744).abs() < 1e-12, "{:?}", m.cost_usd);
    assert_eq!(m.cache_write_tokens, 0, "OpenAI has no cache writes to price");

    s.cache = CacheProfile::Anthropic;
    let m = run(&conversation, &s);
    assert_eq!(cached(&m), [0, 2_500, 3_100]);
    // Each request writes its uncached part: 2,500 + 600 + 600.
    assert_eq!(m.cache_write_tokens, 3_700);
    // Writes at 1.25x input: (3,700 x 2.5 + 5,600 x 0.5 + 300 x 8) / 1e6.
    s.price = Some(Price { input: 2.0, cached_input: 0.5, output: 8.0, cache_write: Some(2.5) });
    let m = run(&conversation, &s);
    assert!((m.cost_usd.expect("priced") - 0.014_45).abs() < 1e-12, "{:?}", m.cost_usd);
    assert_eq!(m.summary_cost_usd, Some(0.0), "none never summarizes");
    s.cache = CacheProfile::None;
    assert_eq!(cached(&run(&conversation, &s)), [0, 0, 0]);

    // Below 1,024 shared tokens nothing is cached.
    let small = chat(19, 5, 50, 10).conversation("small");
    s.cache = CacheProfile::Openai;
    assert!(cached(&run(&small, &s)).iter().all(|c| *c == 0));
    s.cache = CacheProfile::Anthropic;
    assert!(cached(&run(&small, &s)).iter().all(|c| *c == 0));
}

#[test]
fn after_truncation_only_the_system_prompt_is_shared() {
    // Requests 1,400 + 350 k; max_tokens 2,500 is crossed at call 4 (2,800), which drops one
    // turn (2,450); so is call 5. Only the 1,100-token system prompt is shared then.
    let conversation = chat(1_100, 6, 300, 50).conversation("c");
    let mut s = settings(strategy(json!({"name": "truncate", "max_tokens": 2_500})), 100_000);
    s.cache = CacheProfile::Openai;
    let m = run(&conversation, &s);
    assert_eq!(compaction_calls(&m), [4, 5]);
    assert_eq!(requests(&m), [1_400, 1_750, 2_100, 2_450, 2_450, 2_450]);
    // 1,400 -> 1,280; 1,750 -> 1,664; 2,100 -> 2,048; the system prompt 1,100 -> 1,024.
    assert_eq!(cached(&m), [0, 1_280, 1_664, 2_048, 1_024, 1_024]);
    s.cache = CacheProfile::Anthropic;
    // Anthropic reads the system prompt's breakpoint whole.
    assert_eq!(cached(&run(&conversation, &s)), [0, 1_400, 1_750, 2_100, 1_100, 1_100]);
}

/// `keep-last-n` with its threshold at floor((4,000 - 2,000) x 0.8) = 1,600 estimated tokens and
/// the last 4 messages kept.
fn keep_last_n() -> StrategyConfig {
    strategy(json!({
        "name": "keep-last-n",
        "system_reserve": 2_000,
        "output_reserve": 0,
        "safety_buffer": 0,
        "recent_messages_to_keep": 4,
        "summary_max_tokens": 200,
        "summary_target_tokens": 200,
    }))
}

#[test]
fn keep_last_n_summary_at_index_1_is_counted_priced_and_cached() {
    // Estimates (2 + ceil(chars / 4) per message): system 551, user 151, assistant 26, so
    // request k is 702 + 177 k and reaches 1,600 at call 6 (1,764).
    let conversation = chat(1_100, 8, 300, 50).conversation("c");
    let mut s = settings(keep_last_n(), 4_000);
    s.cache = CacheProfile::Openai;
    s.price = Some(Price { input: 1.0, cached_input: 0.25, output: 4.0, cache_write: None });
    let m = run(&conversation, &s);
    assert_eq!(m.timeline[5].estimate, 1_587);
    assert_eq!(compaction_calls(&m)[0], 6);
    let e = &m.compaction_events[0];
    assert_eq!(e.estimate_before, 1_764);
    assert_eq!((e.trigger, e.step.as_str(), e.round), (Trigger::Proactive, "summarize", Some(1)));
    // [system, u0 .. u6 with answers]: the boundary is 14 - 4 = 10; u0 .. a3 (9 messages) go.
    assert_eq!((e.messages_before, e.messages_after, e.removed), (14, 6, 9));
    assert_eq!(e.tokens_before, 1_100 + 7 * 300 + 6 * 50);
    assert!(e.summary.starts_with("## Session Summary (Compaction Round 1)"), "{}", e.summary);
    let summary_tokens = exact().count(&e.summary);
    assert!(summary_tokens <= 200);
    // After: system, summary (+3), a4, u5, a5, u6.
    assert_eq!(e.tokens_after, 1_100 + summary_tokens + 3 + 2 * 300 + 3 * 50 - 50);
    assert_eq!(m.timeline[6].request_tokens, e.tokens_after);
    // The summary replaced u0 at index 1: only the system prompt is shared with call 5.
    assert_eq!(m.timeline[6].cached_tokens, 1_024);
    // Call 7 appends to the compacted request, so all of it is shared.
    assert_eq!(m.timeline[7].cached_tokens, e.tokens_after / 128 * 128);
    // One summarizer call per compaction, priced at the input and output prices.
    assert_eq!(m.summarizer_calls, m.compactions);
    assert_eq!(m.summarizer_failures, 0);
    // The only compaction: the summary's 5 users and 4 answers in, the summary out.
    assert_eq!(compaction_calls(&m), [6]);
    assert_eq!((m.summarizer_calls, m.summarizer_input_tokens), (1, 5 * 300 + 4 * 50));
    assert_eq!(m.summarizer_output_tokens, summary_tokens);
    let priced = ((m.input_tokens - m.cached_tokens) as f64
        + 0.25 * m.cached_tokens as f64
        + 4.0 * m.output_tokens as f64
        + m.summarizer_input_tokens as f64
        + 4.0 * m.summarizer_output_tokens as f64)
        / 1e6;
    assert!((m.cost_usd.expect("priced") - priced).abs() < 1e-12);
    let summary_priced = (m.summarizer_input_tokens as f64 + 4.0 * m.summarizer_output_tokens as f64) / 1e6;
    assert!((m.summary_cost_usd.expect("priced") - summary_priced).abs() < 1e-12);
    assert!(m.input_tokens < m.uncompacted_input_tokens);
    // The document's assistant summary first in the conversation: Anthropic refuses the two
    // requests after the compaction (calls 6 and 7), OpenAI accepts them.
    assert_eq!((m.rejected_requests_openai, m.rejected_requests_anthropic), (0, 2));
    assert_eq!(m.rejections_by_rule.get("anthropic-messages/first_not_user"), Some(&2));
}

#[test]
fn keep_last_n_with_a_failing_summarizer_keeps_the_context_and_counts_failures() {
    let conversation = chat(1_100, 8, 300, 50).conversation("c");
    let s = settings(keep_last_n(), 4_000);
    let m = replay(&conversation, &s, &FailingSummarizer, &OfflineJudge).expect("replay runs");
    // Calls 6 and 7 try and fail: the document returns the messages unchanged.
    assert_eq!(compaction_calls(&m), [6, 7]);
    assert_eq!((m.summarizer_calls, m.summarizer_failures), (2, 2));
    assert_eq!((m.summarizer_input_tokens, m.summarizer_output_tokens), (0, 0));
    assert!(m.compaction_events.iter().all(|e| e.fallback.as_deref() == Some("unchanged: summarizer unavailable")));
    assert_eq!(m.input_tokens, m.uncompacted_input_tokens);
}

/// `split-fraction` with 6,000 output tokens reserved: the denominator is 8,000 - 548 - 6,000 =
/// 1,452 and the threshold floor(1,452 x 0.8) = 1,161 message tokens.
fn split_fraction() -> StrategyConfig {
    strategy(json!({"name": "split-fraction", "max_output_tokens": 6_000}))
}

#[test]
fn split_fraction_pair_after_the_system_prompt() {
    // Message tokens (len / 4 + 4): user 152, assistant 27; request k is 152 + 179 k, over
    // 1,161 at call 6 (1,226).
    let conversation = chat(1_100, 8, 300, 50).conversation("c");
    let mut s = settings(split_fraction(), 8_000);
    s.cache = CacheProfile::Openai;
    let m = run(&conversation, &s);
    assert_eq!(m.timeline[5].estimate, 1_047);
    assert_eq!(compaction_calls(&m)[0], 6);
    let e = &m.compaction_events[0];
    assert_eq!(e.estimate_before, 1_226);
    // 13 messages after the system prompt, floor(13 x 40%) = 5 preserved (u4 .. u6).
    assert_eq!((e.messages_before, e.messages_after, e.removed), (14, 8, 8));
    assert!(e.violations.is_empty(), "{:?}", e.violations);
    let pair = exact().count(&format!("[COMPACT SUMMARY]\n{}", e.summary)) + 3 + exact().count("Understood.") + 3;
    assert_eq!(e.tokens_after, 1_100 + pair + 3 * 300 + 2 * 50);
    assert_eq!(m.timeline[6].cached_tokens, 1_024);
    assert_eq!(m.timeline[7].cached_tokens, e.tokens_after / 128 * 128);
    assert_eq!(compaction_calls(&m), [6]);
    assert_eq!((m.summarizer_calls, m.summarizer_input_tokens), (1, 4 * 300 + 4 * 50));
    assert_eq!(m.summarizer_output_tokens, exact().count(&e.summary));
}

#[test]
fn split_fraction_reacts_to_a_length_stop() {
    let mut conversation = chat(1_100, 8, 300, 50).conversation("c");
    // a1 (under the threshold) and a5 (before call 6) stopped at their output limit.
    conversation.messages[4].finish_reason = Some("length".into());
    conversation.messages[12].finish_reason = Some("length".into());
    let m = run(&conversation, &settings(split_fraction(), 8_000));
    assert_eq!(compaction_calls(&m)[0], 6);
    assert_eq!(m.compaction_events[0].trigger, Trigger::LengthStop);
    assert!(m.compaction_events[1..].iter().all(|e| e.trigger == Trigger::Proactive));
    // Truncate does not react to length stops: the same call compacts proactively.
    let t = run(&conversation, &settings(strategy(json!({"name": "truncate", "max_tokens": 3_000})), 8_000));
    assert!(t.compaction_events.iter().all(|e| e.trigger == Trigger::Proactive));
}

#[test]
fn split_fraction_falls_back_to_truncation_when_the_summary_fails() {
    let conversation = chat(1_100, 8, 300, 50).conversation("c");
    let m = replay(&conversation, &settings(split_fraction(), 8_000), &FailingSummarizer, &OfflineJudge)
        .expect("replay runs");
    assert_eq!(compaction_calls(&m)[0], 6);
    let e = &m.compaction_events[0];
    assert_eq!(e.fallback.as_deref(), Some("truncate: summarizer unavailable"));
    assert_eq!(e.removed, 8);
    assert_eq!(compaction_calls(&m), [6]);
    assert_eq!((m.summarizer_calls, m.summarizer_failures), (1, 1));
    assert!(m.input_tokens < m.uncompacted_input_tokens);
}

/// `prune-then-summarize` with its overflow line at 8,000 - 6,500 = 1,500 estimated tokens and
/// pruning past 300 tokens of protected outputs; only at the overflow line (no end-of-run prune).
fn prune_then_summarize() -> StrategyConfig {
    strategy(json!({
        "name": "prune-then-summarize",
        "output_reserve": 6_500,
        "prune_protect": 300,
        "prune_minimum": 100,
        "end_of_run_prune": false,
    }))
}

/// A system prompt of 1,100 tokens, then turns of a user message (50 tokens), a `read` call
/// (6), its output (400) and a reply (10).
fn tool_chat(turns: usize) -> Conversation {
    let mut b = ContextBuilder::new().system(words(1_097));
    for t in 0..turns {
        b = b.user(numbered(t, 47)).tool_call("read", "{}", numbered(t, 397)).assistant(numbered(t, 7));
    }
    b.conversation("tools")
}

#[test]
fn prune_then_summarize_masking_keeps_a_longer_cached_prefix() {
    let conversation = tool_chat(9);
    let sizes: Vec<u64> = conversation.messages[1..5].iter().map(|m| exact().message_tokens(m)).collect();
    assert_eq!(sizes, [50, 6, 400, 10]);
    // The strategy's own estimate (4 + o200k tokens per message, outputs as JSON strings,
    // without the system prompt).
    let meter = compaction::tokens::BpeRole4::new(None);
    let output = meter.message_tokens(&conversation.messages[3]);
    let mut s = settings(prune_then_summarize(), 8_000);
    s.cache = CacheProfile::Openai;
    let m = run(&conversation, &s);
    let c = compaction_calls(&m)[0] as usize;
    assert!(m.timeline[c - 1].estimate <= 1_500);
    let e = &m.compaction_events[0];
    assert!(e.estimate_before > 1_500);
    // The last 2 turns are skipped; walking back, outputs are protected up to 300 tokens and
    // every older one is cleared (each saves its tokens minus the 4 of `[Output cleared]`);
    // no summary is needed.
    assert!(e.masked >= 1);
    assert_eq!((e.removed, e.summary.as_str()), (0, ""));
    assert_eq!(e.estimate_after, e.estimate_before - e.masked as u64 * (output - 8));
    assert_eq!(m.timeline[c].estimate, e.estimate_after);
    // The request after the prune shares the system prompt and what precedes the first cleared
    // output, more than the system prompt alone; the next one shares all of it.
    assert!(m.timeline[c].cached_tokens >= 1_152, "{}", m.timeline[c].cached_tokens);
    assert!(m.timeline[c].cached_tokens < m.timeline[c - 1].request_tokens);
    assert_eq!(m.timeline[c + 1].cached_tokens, m.timeline[c].request_tokens / 128 * 128);
    assert_eq!(m.overflows, 0);
}

/// A travel conversation: the reservation code is only in the first user message, the flight
/// number only in the last one.
fn travel() -> Conversation {
    let mut b = ContextBuilder::new()
        .system("You are a travel agent.")
        .user("Change reservation ZFA04Y to an aisle seat.")
        .assistant(words(47));
    for _ in 0..8 {
        b = b.user(words(297)).assistant(words(47));
    }
    let mut c = b.user("Also book flight HAT170.").assistant("Done.").conversation("travel");
    let last_user = c.messages.len() - 2;
    c.probes = vec![
        probe("code", vec![vec!["ZFA04Y"]], 1, None),
        probe("flight", vec![vec!["HAT170", "HAT 170"]], last_user, None),
        probe("early", vec![vec!["zfa04y"]], 1, Some(2)),
    ];
    c
}

#[test]
fn checkpoints_are_at_a_quarter_of_the_calls_and_the_end() {
    use runner::replay::checkpoints_of;
    assert_eq!(checkpoints_of(&travel()), [(7, 25), (11, 50), (17, 75), (21, 100)]);
    // One call: the first three checkpoints fall after it, the last at the end.
    let one = Conversation::new("o", vec![Message::user("a"), Message::assistant("b"), Message::user("c")]);
    assert_eq!(checkpoints_of(&one), [(2, 75), (3, 100)]);
    // Its only call ends the conversation: a single checkpoint.
    let end = Conversation::new("e", vec![Message::user("a"), Message::assistant("b")]);
    assert_eq!(checkpoints_of(&end), [(2, 100)]);
    let none = Conversation::new("n", vec![Message::user("a")]);
    assert_eq!(checkpoints_of(&none), [(1, 100)]);
}

#[test]
fn retention_truncate_loses_the_early_fact_a_summary_keeps_it() {
    let conversation = travel();
    let t = run(&conversation, &settings(StrategyConfig::default_for("truncate").expect("truncate"), 3_000));
    assert!(t.compactions > 0);
    let scores: Vec<(&str, f64, bool, usize, u32)> =
        t.probes.iter().map(|p| (p.probe_id.as_str(), p.score, p.at_risk, p.asked_at, p.checkpoint)).collect();
    // The early probe is asked once, after 2 messages (no call made yet), before anything was
    // compacted. The others are asked at every checkpoint after their source: 10 calls, so
    // after calls 3, 5, 8 (messages 6, 10, 16) and at the end.
    println!("{scores:?}");
    assert_eq!(
        scores,
        [
            ("early", 1.0, false, 2, 0),
            ("code", 1.0, false, 7, 25),
            ("code", 1.0, false, 11, 50),
            ("code", 0.0, true, 17, 75),
            ("code", 0.0, true, 21, 100),
            ("flight", 1.0, false, 21, 100)
        ]
    );
    assert_eq!(t.probes[4].facts, [FoundIn::Lost]);
    // The mean over (probe, checkpoint) pairs.
    assert_eq!(t.retention, Some(4.0 / 6.0));
    assert_eq!(t.at_risk_retention, Some(0.0));

    let mut s = settings(keep_last_n(), 3_000);
    s.strategy = strategy(json!({
        "name": "keep-last-n",
        "system_reserve": 1_500,
        "output_reserve": 0,
        "safety_buffer": 0,
        "recent_messages_to_keep": 4,
        "summary_max_tokens": 200,
        "summary_target_tokens": 200,
    }));
    let k = run(&conversation, &s);
    assert!(k.compactions > 0);
    let code = &k.probes[4];
    assert_eq!(
        (code.probe_id.as_str(), code.checkpoint, code.at_risk, code.facts.as_slice()),
        ("code", 100, true, [FoundIn::Summary].as_slice())
    );
    assert_eq!(k.retention, Some(1.0));
    assert_eq!(k.at_risk_retention, Some(1.0));
    assert_eq!(k.probes[5].facts, [FoundIn::Verbatim]);
}

#[test]
fn a_violation_carried_from_request_to_request_counts_once() {
    let conversation = Conversation::new(
        "c",
        vec![
            Message::user("hi"),
            Message::tool_result("ghost", "bash", "orphan output"),
            Message::assistant("ok"),
            Message::user("more"),
            Message::assistant("done"),
        ],
    );
    let m = run(&conversation, &settings(StrategyConfig::default_for("none").expect("none"), 1_000));
    assert_eq!(m.calls, 2);
    // Both requests carry the recording's orphaned result: one violation, the recording's own
    // (no strategy is charged, so no provider rejection either).
    assert_eq!(m.recording_violations, 1);
    assert_eq!((m.violations, m.findings), (0, 0));
    assert_eq!((m.rejected_requests_openai, m.rejected_requests_anthropic), (0, 0));
    assert!(m.rejections_by_rule.is_empty(), "{:?}", m.rejections_by_rule);
}

#[test]
fn replays_are_deterministic() {
    let conversation = travel();
    let s = settings(keep_last_n(), 3_000);
    let mut a = run(&conversation, &s);
    let mut b = run(&conversation, &s);
    a.elapsed_ms = 0;
    b.elapsed_ms = 0;
    assert_eq!(a, b);
}

fn probe(id: &str, facts: Vec<Vec<&str>>, source: usize, asked_at: Option<usize>) -> Probe {
    Probe {
        id: id.into(),
        kind: ProbeKind::Recall,
        question: "?".into(),
        answer: "!".into(),
        facts: facts.into_iter().map(|f| f.into_iter().map(String::from).collect()).collect(),
        source_message: source,
        asked_at,
        tier: None,
        ..Default::default()
    }
}

mod generated {
    use super::*;
    use compaction::Role;
    use compaction_strategies::NAMES;
    use proptest::prelude::*;

    /// What holds for any replay, whatever the strategy did.
    fn check_metrics(conversation: &Conversation, s: &ReplaySettings, m: &PairMetrics) {
        let assistants: Vec<&Message> = conversation.messages.iter().filter(|m| m.role == Role::Assistant).collect();
        assert_eq!(m.calls as usize, assistants.len());
        assert_eq!(m.timeline.len(), assistants.len());
        // An assistant message's output counts its thinking blocks too.
        let thinking = |a: &Message| a.thinking.iter().map(|b| exact().text_tokens(b.text())).sum::<u64>();
        assert_eq!(m.output_tokens, assistants.iter().map(|a| exact().message_tokens(a) + thinking(a)).sum::<u64>());
        assert_eq!(m.compactions as usize, m.compaction_events.len());
        assert_eq!(m.input_tokens, m.timeline.iter().map(|c| c.request_tokens).sum::<u64>());
        assert_eq!(m.cached_tokens, m.timeline.iter().map(|c| c.cached_tokens).sum::<u64>());
        assert_eq!(m.peak_tokens, m.timeline.iter().map(|c| c.request_tokens).max().unwrap_or(0));
        assert_eq!(m.overflows as usize, m.timeline.iter().filter(|c| c.overflow).count());
        for c in &m.timeline {
            assert_eq!(c.overflow, c.request_tokens > s.window);
            assert!(c.cached_tokens <= c.request_tokens);
            assert_eq!(conversation.messages[c.message_index].role, Role::Assistant);
        }
        assert_eq!(m.violations, m.violations_by_kind.values().sum::<u64>());
        assert!(m.summarizer_failures <= m.summarizer_calls);
        for e in &m.compaction_events {
            assert!((e.call as u64) < m.calls.max(1));
        }
        if m.compactions == 0 {
            assert_eq!(m.input_tokens, m.uncompacted_input_tokens);
        }
        // One score per (probe, checkpoint after its source); a probe with `asked_at` once.
        let marks = runner::replay::checkpoints_of(conversation);
        let expected: usize = conversation
            .probes
            .iter()
            .map(|p| match p.asked_at {
                Some(_) => 1,
                None => marks.iter().filter(|(at, _)| *at > p.source_message).count(),
            })
            .sum();
        assert_eq!(m.probes.len(), expected);
        for p in &m.probes {
            assert!((0.0..=1.0).contains(&p.score));
            assert!(p.checkpoint <= 100);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn every_strategy_replays_any_conversation(
            spec in testkit::gen::arb_conversation_with(1..10),
            fraction in 0.2f64..1.5,
        ) {
            let mut conversation = Conversation::new("gen", spec.build().to_messages());
            let last = conversation.messages.len() - 1;
            conversation.probes = vec![probe("first", vec![vec!["careful"]], 0, None), probe("last", vec![vec!["x"]], last, Some(last))];
            let total = exact().messages_tokens(&conversation.messages);
            let window = ((total as f64 * fraction) as u64).max(1);
            for name in NAMES {
                let mut s = settings(StrategyConfig::default_for(name).expect("every name has defaults"), window);
                s.cache = CacheProfile::Openai;
                s.price = Some(Price { input: 1.0, cached_input: 0.1, output: 2.0, cache_write: None });
                let m = run(&conversation, &s);
                check_metrics(&conversation, &s, &m);
                prop_assert!(m.cost_usd.is_some_and(|c| c >= 0.0));
            }
        }
    }
}

/// 000, Task 7: the route rebuilds `fullMessagesBase` from the stored conversation on every
/// request and runs the chain on it, so by default each compaction starts from the full
/// history (every recorded message so far), and each P3 it runs is a summarizer call.
#[test]
fn priority_chain_rebuilds_every_request_from_the_full_history() {
    let conversation = chat(20, 10, 100, 100).conversation("c");
    let rebuild = run(&conversation, &settings(strategy(json!({"name": "priority-chain"})), 600));
    let carry =
        run(&conversation, &settings(strategy(json!({"name": "priority-chain", "rebuild_from_history": false})), 600));
    assert!(rebuild.compactions >= 2, "{:?}", compaction_calls(&rebuild));
    for e in &rebuild.compaction_events {
        // Before call t: the system prompt, t turns and the user message.
        assert_eq!(e.messages_before, 2 + 2 * e.call as usize, "call {}", e.call);
        assert!(e.step.contains("P3"), "{}", e.step);
    }
    assert_eq!(rebuild.summarizer_calls, rebuild.compactions);
    assert!(
        carry.compaction_events.iter().any(|e| e.messages_before < 2 + 2 * e.call as usize),
        "carrying starts from the compacted context"
    );
    assert!(rebuild.summarizer_input_tokens > carry.summarizer_input_tokens);
    // The call after a rebuild shares with the request that was sent, not with the history.
    let mut s = settings(strategy(json!({"name": "priority-chain"})), 600);
    s.cache = CacheProfile::Openai;
    let cached_run = run(&conversation, &s);
    for (c, p) in cached_run.timeline.iter().zip(&cached_run.timeline[1..]) {
        assert!(p.cached_tokens <= c.request_tokens, "call {}: {} > {}", p.call, p.cached_tokens, c.request_tokens);
    }
}

/// 002, "Cache points after compaction": the previous-turn, round `N-4` and tail points are
/// where an Anthropic request is cached. The system prompt is not one of them, so the request
/// after a compaction (which changes everything after the system prompt) reads nothing, and
/// every other request reads the previous one up to its tail.
#[test]
fn cut_point_places_its_own_cache_points_under_the_anthropic_profile() {
    let conversation = chat(1_100, 6, 300, 50).conversation("c");
    let mut s = settings(strategy(json!({"name": "cut-point", "keep_recent_tokens": 200})), 2_500);
    s.cache = CacheProfile::Anthropic;
    let m = run(&conversation, &s);
    assert!(m.compactions >= 1);
    for (prev, now) in m.timeline.iter().zip(&m.timeline[1..]) {
        if now.compacted {
            assert_eq!(now.cached_tokens, 0, "call {}: the system prompt is not a cache point of 002", now.call);
        } else if prev.request_tokens >= 1_024 {
            assert_eq!(now.cached_tokens, prev.request_tokens, "call {}: the tail point", now.call);
        }
    }
    // The default rule reads the 1,100-token system prompt after the same kind of cut.
    let mut t = settings(strategy(json!({"name": "truncate", "max_tokens": 2_500})), 100_000);
    t.cache = CacheProfile::Anthropic;
    let truncated = run(&conversation, &t);
    assert!(truncated.timeline.iter().any(|c| c.compacted && c.cached_tokens == 1_100));
}

#[test]
fn the_offline_summarizer_does_not_depend_on_the_probes() {
    // keep-last-n summarizes the travel conversation; its summaries must be the same bytes
    // whatever probes are attached: none, the travel probes, or probes on other facts.
    let s = settings(
        strategy(json!({
            "name": "keep-last-n",
            "system_reserve": 1_500,
            "output_reserve": 0,
            "safety_buffer": 0,
            "recent_messages_to_keep": 4,
            "summary_max_tokens": 200,
            "summary_target_tokens": 200,
        })),
        3_000,
    );
    let summaries = |c: &Conversation| -> Vec<String> {
        let m = run(c, &s);
        m.compaction_events.iter().map(|e| e.summary.clone()).collect()
    };
    let with = travel();
    let mut without = travel();
    without.probes.clear();
    let mut other = travel();
    other.probes = vec![probe("aisle", vec![vec!["aisle seat"]], 1, None), probe("w", vec![vec!["w"]], 3, None)];
    let expected = summaries(&with);
    assert!(!expected.is_empty() && expected.iter().any(|s| !s.is_empty()), "the strategy summarized");
    assert_eq!(summaries(&without), expected);
    assert_eq!(summaries(&other), expected);
}

#[test]
fn under_fail_no_summary_after_the_rejected_call_is_billed() {
    // At a 1,700-token window call 1 (1,750 tokens) is rejected and keep-last-n compacts at
    // every call from 2 on: those summaries are made (for the figures as if sent) but not
    // billed under fail, and billed under continue.
    let conversation = chat(1_100, 10, 300, 50).conversation("c");
    let price = Price { input: 1.0, cached_input: 0.25, output: 4.0, cache_write: None };
    let window = 1_700;
    let f = run(&conversation, &ReplaySettings { price: Some(price), ..failing(keep_last_n(), window) });
    let c = run(&conversation, &ReplaySettings { price: Some(price), ..settings(keep_last_n(), window) });
    let rejected = f.first_rejected_call.expect("a call is rejected at this window");
    assert!(f.compaction_events.iter().any(|e| e.call > rejected), "a compaction after the rejected call");
    // The replay goes on: the same summary calls are made and counted under both policies.
    assert_eq!(f.summarizer_calls, c.summarizer_calls);
    assert!(f.summarizer_input_tokens < c.summarizer_input_tokens);
    let (fs, cs) = (f.summary_cost_usd.expect("priced"), c.summary_cost_usd.expect("priced"));
    assert!(fs < cs, "summary cost {fs} under fail, {cs} under continue");
    let billed = (f.summarizer_input_tokens as f64 + 4.0 * f.summarizer_output_tokens as f64) / 1e6;
    assert!((fs - billed).abs() < 1e-12);
    assert!(f.cost_usd.expect("priced") < c.cost_usd.expect("priced"));
}

/// A recording `validate` rejects (a result with no call, a call never answered), replayed with
/// `--allow-invalid`: its own violations are counted in `recording_violations` and charged to no
/// strategy: `none` shows no violation and no request a provider refuses.
#[test]
fn a_recordings_own_violations_are_charged_to_no_strategy() {
    let mut conversation = ContextBuilder::new()
        .system(words(20))
        .user(numbered(1, 10))
        .message(Message::tool_result("ghost", "read", numbered(2, 10)))
        .assistant(numbered(3, 5))
        .user(numbered(4, 10))
        .tool_call("read", "{}", numbered(5, 10))
        .assistant(numbered(6, 5))
        .conversation("invalid");
    // Drop the answer of the `read` call: it is never answered.
    let unanswered = conversation
        .messages
        .iter()
        .position(|m| m.role == compaction::Role::Tool && m.tool_call_id.as_deref() != Some("ghost"))
        .expect("a result");
    let call_id = conversation.messages[unanswered].tool_call_id.clone().expect("an id");
    conversation.messages.remove(unanswered);
    conversation.messages.push(Message::user(numbered(7, 10)));
    conversation.messages.push(Message::assistant(numbered(8, 5)));
    let faults = runner::replay::recording_faults(&conversation);
    assert_eq!(faults, ["ghost".to_string(), call_id].into_iter().collect());

    let m = run(&conversation, &settings(strategy(json!({"name": "none"})), 100_000));
    assert_eq!((m.violations, m.findings), (0, 0), "{:?}", m.violations_by_kind);
    assert_eq!((m.rejected_requests_openai, m.rejected_requests_anthropic), (0, 0), "{:?}", m.rejections_by_rule);
    // The orphan result from the first request on, the unanswered call from the third: each
    // counted once, where it first appears.
    assert_eq!(m.recording_violations, 2);

    // A valid recording has no faults, so nothing is set aside.
    assert!(runner::replay::recording_faults(&tool_chat(3)).is_empty());
}

/// A recording that gives one id to two consecutive calls (as tau-bench's airline agents do):
/// a provider refuses every request carrying both, whatever the strategy; that is the
/// recording's, not `none`'s.
#[test]
fn an_id_the_recording_reuses_is_charged_to_no_strategy() {
    let conversation = ContextBuilder::new()
        .system(words(20))
        .user(numbered(1, 10))
        .calls("", vec![testkit::Call::ok("search", "{}", numbered(2, 10)).with_id("dup")])
        .calls("", vec![testkit::Call::ok("search", "{}", numbered(3, 10)).with_id("dup")])
        .assistant(numbered(4, 5))
        .user(numbered(5, 10))
        .assistant(numbered(6, 5))
        .conversation("reused");
    assert_eq!(runner::replay::recording_faults(&conversation), ["dup".to_string()].into_iter().collect());
    let m = run(&conversation, &settings(strategy(json!({"name": "none"})), 100_000));
    assert_eq!((m.rejected_requests_openai, m.rejected_requests_anthropic), (0, 0), "{:?}", m.rejections_by_rule);
}

/// A recording that opens with the agent's greeting (tau2's conversations do) breaks
/// Anthropic's `first_not_user` as recorded: `none` is not charged for it, while a strategy
/// that puts its own assistant message first still is.
#[test]
fn a_rule_the_recording_breaks_as_recorded_is_charged_to_no_strategy() {
    let mut b = ContextBuilder::new().system(words(20)).assistant("Hi! How can I help you today?");
    for t in 0..6 {
        b = b.user(numbered(t, 200)).assistant(numbered(t, 100));
    }
    let conversation = b.conversation("greeting");
    let none = run(&conversation, &settings(strategy(json!({"name": "none"})), 100_000));
    assert_eq!(none.rejected_requests_anthropic, 0, "{:?}", none.rejections_by_rule);
    // keep-last-n puts its summary, an assistant message, first: its own doing.
    let keep = run(&conversation, &settings(strategy(json!({"name": "keep-last-n"})), 1_500));
    assert!(keep.compactions > 0);
    assert!(
        keep.rejections_by_rule.get("anthropic-messages/first_not_user").copied().unwrap_or(0) > 0,
        "{:?}",
        keep.rejections_by_rule
    );
}

/// The replay records the strategy's thresholds at the first call, on that call's context (the
/// report draws them from the record, never from today's code).
#[test]
fn the_first_call_records_the_strategys_thresholds() {
    let conversation = chat(1_000, 3, 50, 10).conversation("t");
    let m = run(&conversation, &settings(strategy(json!({"name": "priority-chain"})), 10_000));
    let labels: Vec<&str> = m.thresholds.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, ["prune (P5)", "chain trigger"], "{:?}", m.thresholds);
    assert_eq!(m.thresholds.iter().map(|(_, t)| *t).collect::<Vec<_>>(), [8_000, 8_500]);
    let none = run(&conversation, &settings(strategy(json!({"name": "none"})), 10_000));
    assert!(none.thresholds.is_empty());
}

/// Anthropic's context editing runs server-side on each request while the client keeps the
/// full history ("Context editing", platform.claude.com, read 2026-11-27): every request past
/// the trigger (tested on the unedited history) is the history with every tool result but the
/// newest 3 cleared, so the cleared boundary moves forward with each new tool use, and no
/// request is built from an earlier edited one.
#[test]
fn anthropic_clear_tool_uses_edits_every_request_from_the_full_history() {
    let conversation = tool_chat(10);
    let config = strategy(json!({"name": "anthropic-clear-tool-uses", "trigger": 2_500}));
    let m = run(&conversation, &settings(config, 100_000));
    assert!(m.compactions >= 10, "{:?}", compaction_calls(&m));
    let first = m.compaction_events[0].call;
    // Past the trigger every request is edited, not only those whose edited view passes it again.
    let edited: Vec<u32> = m.timeline.iter().filter(|c| c.compacted).map(|c| c.call).collect();
    let expected: Vec<u32> = (first..m.calls as u32).collect();
    assert_eq!(edited, expected);
    for e in &m.compaction_events {
        let at = m.timeline[e.call as usize].message_index;
        let history = &conversation.messages[..at];
        let results = history.iter().filter(|msg| msg.role == compaction::Role::Tool).count();
        // Each request starts from the whole recorded history, not from the previous edit.
        assert_eq!(e.messages_before, history.len(), "call {}", e.call);
        assert_eq!(e.messages_after, history.len(), "call {}", e.call);
        // Every result but the newest 3 is cleared in this request.
        assert_eq!(e.masked, results - 3, "call {}", e.call);
    }
    // The boundary moves: each new tool use clears one more result.
    let masked: Vec<usize> = m.compaction_events.iter().map(|e| e.masked).collect();
    assert!(masked.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1), "{masked:?}");
    assert!(masked.last() > masked.first());
}

/// Goose checks its 80% threshold when a user message arrives (`Agent::reply`), not before the
/// tool loop's later calls, where only a context-length error compacts. On a recording with one
/// prompt and a long tool loop the context fills to the window, and every compaction follows a
/// refused request: none is proactive, and none happens while the context is under the window.
#[test]
fn goose_compacts_in_a_tool_loop_only_on_a_context_length_error() {
    let mut b = ContextBuilder::new().system(words(97)).user(numbered(0, 47));
    for t in 0..20 {
        b = b.tool_call("read", "{}", numbered(t % 10, 297));
    }
    let conversation = b.assistant(numbered(1, 7)).conversation("loop");
    let window = 2_000;
    let m = run(&conversation, &settings(strategy(json!({"name": "goose"})), window));
    assert!(m.compactions >= 2, "{:?}", compaction_calls(&m));
    for e in &m.compaction_events {
        assert_eq!(e.trigger, Trigger::Overflow, "call {}", e.call);
        assert!(e.tokens_before > window, "call {}: {} tokens", e.call, e.tokens_before);
    }
    // With a user message arriving over 80% instead, the threshold compacts before the reply
    // (a small summary cap, so that the summary request fits this small window).
    let chat = chat(20, 10, 100, 100).conversation("c");
    let m = run(&chat, &settings(strategy(json!({"name": "goose", "summary_max_tokens": 100})), 1_200));
    assert!(m.compaction_events.iter().any(|e| e.trigger == Trigger::Proactive), "{:?}", requests(&m));
    for e in m.compaction_events.iter().filter(|e| e.trigger == Trigger::Proactive) {
        let at = m.timeline[e.call as usize].message_index;
        assert_eq!(chat.messages[at - 1].role, compaction::Role::User, "call {}", e.call);
    }
}

#[test]
fn gemini_cli_asks_two_summaries_per_compression_and_bills_both() {
    // Requests grow by about 350 tokens a turn; half of the 3,000-token window is reported
    // after four turns, and each compression asks for the snapshot, then its verification.
    let conversation = chat(100, 8, 300, 50).conversation("c");
    let mut s = settings(strategy(json!({"name": "gemini-cli", "summary_max_tokens": 100})), 3_000);
    s.price = Some(Price { input: 1.0, cached_input: 0.25, output: 4.0, cache_write: None });
    let m = run(&conversation, &s);
    let compressions = m.compaction_events.iter().filter(|e| e.step == "compress").count();
    assert!(compressions >= 1, "{:?}", m.compaction_events.iter().map(|e| &e.step).collect::<Vec<_>>());
    assert_eq!(m.summarizer_calls as usize, 2 * compressions);
    assert_eq!(m.summarizer_failures, 0);
    // Both calls read the same head: the input billed is twice one call's.
    assert!(m.summarizer_input_tokens > 0 && m.summarizer_input_tokens.is_multiple_of(2));
    let summary_priced = (m.summarizer_input_tokens as f64 + 4.0 * m.summarizer_output_tokens as f64) / 1e6;
    assert!((m.summary_cost_usd.expect("priced") - summary_priced).abs() < 1e-12);
}

#[test]
fn gemini_cli_passes_the_provider_checks_at_16k_32k_and_128k() {
    // A long session: a request, then 300 tool rounds of about 700 tokens each (about 210k
    // tokens in all) with the user's word every ten rounds (Gemini CLI splits only before a
    // user message), so every window compacts again and again.
    let mut b =
        ContextBuilder::new().system("You are a coding agent.").user("Port the parser in parse.rs to the new lexer.");
    for r in 0..300 {
        b = b.tool_call("bash", &format!("{{\"cmd\":\"step {r}\"}}"), format!("{r} {}", words(700)));
        if r % 10 == 9 {
            b = b.assistant(format!("Done with step {r}.")).user(format!("Go on after step {r}."));
        }
    }
    let conversation = b.assistant("Ported.").conversation("long");
    for window in [16_000, 32_000, 128_000] {
        // Every request is checked (`continue`): at 16k a ten-round tool loop can outgrow the
        // window between two turns, which Gemini CLI does not guard (an over-window request,
        // not a refusal; the production experiment counts them).
        let mut s = settings(strategy(json!({"name": "gemini-cli"})), window);
        s.cache = CacheProfile::Anthropic;
        let m = run(&conversation, &s);
        assert!(m.compactions > 0, "{window}: never compacted");
        assert_eq!(m.inapplicable_reason, None, "{window}");
        assert_eq!(
            (m.rejected_requests_openai, m.rejected_requests_anthropic),
            (0, 0),
            "{window}: {:?}",
            m.rejections_by_rule
        );
        assert_eq!(m.violations, 0, "{window}: {:?}", m.violations_by_kind);
    }
}
