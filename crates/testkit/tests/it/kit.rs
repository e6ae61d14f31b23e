//! Tests of the test kit itself: the builder, the generators, the renderer, offline summaries.

use compaction::tokens::CacheSlot;
use compaction::{check_context, Context, Message, Origin, Plan, Role, SummaryRequest, TokenCounter, Trigger};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use testkit::builder::{next_recorded_index, Call, ContextBuilder};
use testkit::gen::{self, ConversationSpec, Previous, Turn};
use testkit::shape::{before_after_with, format_ranges, format_tokens, render};
use testkit::summaries::{fail_all, fulfil, offline_text, Length};
use testkit::text::{huge, render as render_text, TextKind};

/// One token per byte of content plus one per message: numbers a reader can check by hand.
struct Bytes;

impl TokenCounter for Bytes {
    fn name(&self) -> &'static str {
        "bytes+1"
    }
    fn message_units(&self, m: &Message) -> u64 {
        m.content.len() as u64 + 1
    }
    fn text_tokens(&self, text: &str) -> u64 {
        text.len() as u64
    }
    fn cache_slot(&self) -> Option<CacheSlot> {
        None
    }
}

fn coding() -> ContextBuilder {
    ContextBuilder::new()
        .system("sys")
        .previous_summary(2, 5, "## Session Summary (Compaction Round 2)")
        .user("fix it")
        .tool_call("read_file", r#"{"path":"a.rs"}"#, "x".repeat(1200))
        .parallel(vec![Call::ok("grep", "{}", "hit"), Call::err("bash", "{}", "exit 1")])
        .stage("draft")
        .assistant("")
        .decision("approved")
}

#[test]
fn builder_assigns_indices_ids_stages_and_summaries() {
    let ctx = coding().build();
    assert_eq!(ctx.len(), 9);
    assert!(check_context(&ctx).is_empty(), "{:?}", check_context(&ctx));
    assert_eq!(ctx.entries()[1].origin(), &Origin::Summary { round: 2, covers: vec![1, 2, 3, 4, 5] });
    // After a summary covering 1..=5 the recording resumes at 6.
    assert_eq!(ctx.entries()[2].origin(), &Origin::Recorded { index: 6 });
    let call = &ctx.entries()[3].message().tool_calls[0];
    assert_eq!(call.id, "call_7_0");
    assert_eq!(ctx.entries()[4].message().tool_call_id.as_deref(), Some("call_7_0"));
    let parallel = ctx.entries()[5].message();
    assert_eq!(parallel.tool_calls.len(), 2);
    assert_eq!(ctx.entries()[7].message().tool_call_id.as_deref(), Some(parallel.tool_calls[1].id.as_str()));
    assert!(ctx.entries()[7].message().is_error);
    assert!(!ctx.entries()[6].message().is_error);
    let last = ctx.entries()[8].message();
    assert_eq!(last.stage.as_deref(), Some("draft"));
    assert_eq!(last.meta_str("stage_decision"), Some("approved"));
    assert_eq!(ctx.entries()[2].message().stage, None);
    assert_eq!(next_recorded_index(&ctx), 13);
}

#[test]
fn builder_in_flight_call_and_reused_ids() {
    let ctx = ContextBuilder::new()
        .user("a")
        .calls("", vec![Call::ok("t", "{}", "1").with_id("x")])
        .calls("", vec![Call::ok("t", "{}", "2").with_id("x")])
        .in_flight("bash", "{}")
        .build();
    assert!(check_context(&ctx).is_empty(), "{:?}", check_context(&ctx));
    assert_eq!(ctx.entries()[3].message().tool_calls[0].id, "x");
    assert_eq!(ctx.entries()[5].message().tool_calls.len(), 1);
    let conv = ContextBuilder::new().user("q").assistant("a").conversation("c1");
    assert_eq!(conv.id, "c1");
    assert_eq!(conv.messages.len(), 2);
}

#[test]
fn shape_renders_one_line_per_entry() {
    let ctx = coding().build();
    let expected = "\
00 system                                           4 tok  #0
01 summary round 2 (assistant)                     40 tok  #1-5
02 user                                             7 tok  #6
03 assistant tool_call read_file                    1 tok  #7
04 tool result read_file                         1.2k tok  #8
05 assistant tool_calls grep, bash                  1 tok  #9
06 tool result grep                                 4 tok  #10
07 tool result bash error                           7 tok  #11
08 assistant [draft] decision (empty)               1 tok  #12
";
    assert_eq!(render(&ctx, &Bytes), expected);
}

#[test]
fn shape_marks_masked_and_inserted_entries() {
    let masked = compaction::Entry::new(Message::tool_result("c", "bash", "[cleared]"), Origin::Masked { index: 7 });
    let ctx = ContextBuilder::new()
        .summary_as(Role::User, 1, 3, "[COMPACT SUMMARY]\nx")
        .inserted(Message::assistant("Understood."), compaction::Inserted::Acknowledgement)
        .entry(masked)
        .build();
    let text = render(&ctx, &Bytes);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("00 summary round 1 (user)"), "{text}");
    assert!(lines[0].ends_with("#0-2"), "{text}");
    assert!(lines[1].starts_with("01 inserted acknowledgement (assistant)"), "{text}");
    assert!(lines[1].ends_with("12 tok"), "{text}");
    assert!(lines[2].starts_with("02 masked tool result bash"), "{text}");
    assert!(lines[2].ends_with("#7"), "{text}");
}

#[test]
fn shape_pads_indices_of_long_contexts() {
    let mut b = ContextBuilder::new();
    for i in 0..120 {
        b = b.user(format!("m{i}"));
    }
    let text = render(&b.build(), &Bytes);
    assert!(text.starts_with("000 user"), "{}", &text[..40]);
    assert!(text.lines().nth(119).is_some_and(|l| l.starts_with("119 user")));
}

#[test]
fn token_and_range_formats() {
    assert_eq!(format_tokens(0), "0 tok");
    assert_eq!(format_tokens(999), "999 tok");
    assert_eq!(format_tokens(1_200), "1.2k tok");
    assert_eq!(format_tokens(99_949), "99.9k tok");
    assert_eq!(format_tokens(123_456), "123k tok");
    assert_eq!(format_tokens(1_500_000), "1.5M tok");
    assert_eq!(format_ranges(&[]), "");
    assert_eq!(format_ranges(&[3]), "3");
    assert_eq!(format_ranges(&[1, 2, 3, 4, 7, 9, 10]), "1-4,7,9-10");
}

#[test]
fn before_after_shows_both_shapes_and_the_event() {
    let ctx = coding().build();
    let strategy =
        compaction_strategies::StrategyConfig::default_for("none").and_then(|c| c.build().ok()).expect("none builds");
    let plan = Plan::deterministic(
        Trigger::Overflow,
        "test",
        vec![compaction::Slot::Keep { index: 0 }, compaction::Slot::Keep { index: 2 }],
    );
    let out = strategy.apply(&ctx, &compaction::Budget::new(100), &plan, &[]);
    let text = before_after_with(&ctx, &out, &Bytes);
    assert!(text.starts_with("before: 9 messages, "), "{text}");
    assert!(text.contains("\nafter: 2 messages, 11 tok (bytes+1)\n00 system"), "{text}");
    assert!(text.contains("event: none overflow step \"test\""), "{text}");
    assert!(text.contains("removed 7, masked 0, summaries 0, round -, fallback -"), "{text}");
}

#[test]
fn texts_are_deterministic_and_of_their_kind() {
    assert_eq!(render_text(TextKind::Prose, 50, 7), render_text(TextKind::Prose, 50, 7));
    assert_ne!(render_text(TextKind::Prose, 50, 7), render_text(TextKind::Prose, 50, 8));
    assert_eq!(render_text(TextKind::Empty, 50, 7), "");
    assert_eq!(render_text(TextKind::Prose, 12, 1).split(' ').count(), 12);
    let json = render_text(TextKind::Json, 5, 3);
    assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok_and(|v| v.as_object().map(|o| o.len()) == Some(5)));
    let cjk = render_text(TextKind::Cjk, 20, 3);
    assert!(cjk.chars().all(|c| !c.is_ascii()), "{cjk}");
    assert!(cjk.encode_utf16().count() < cjk.len());
    let combining = render_text(TextKind::Combining, 200, 3);
    assert!(combining.chars().any(|c| ('\u{300}'..='\u{36f}').contains(&c)));
    let big = huge(30 * 1024, 9);
    assert!(big.len() >= 30 * 1024 && big.len() < 31 * 1024, "{}", big.len());
    assert_eq!(big, huge(30 * 1024, 9));
}

#[test]
fn offline_summaries_are_deterministic_and_failures_are_values() {
    let ctx = coding().build();
    let req = SummaryRequest {
        span: vec![2, 3, 4],
        prompt: compaction::Prompt::new("session_summary", "{{messages}}"),
        previous: Some("## Session Summary (Compaction Round 2)".into()),
        task: Some("fix it".into()),
        max_tokens: 500,
        target_tokens: None,
        target_chars: None,
        input: Default::default(),
        round: 3,
    };
    let short = offline_text(&ctx, &req, Length::Short);
    assert_eq!(short, "Round 3 summary (session_summary) of 3 messages. First request: fix it");
    let long = offline_text(&ctx, &req, Length::Long);
    assert!(long.starts_with(&short));
    assert!(long.contains("Previously: ## Session Summary"));
    assert!(long.contains("- tool result read_file: xxxx"));
    assert!(long.len() <= 6_000);
    let mut plan = Plan::deterministic(Trigger::Proactive, "p", vec![]);
    plan.requests = vec![req.clone(), req];
    assert_eq!(fulfil(&ctx, &plan, Length::Short), vec![Ok(short.clone()), Ok(short)]);
    let failed = fail_all(&plan);
    assert_eq!(failed.len(), 2);
    assert!(failed.iter().all(|f| f.is_err()));
}

/// What a context contains, for checking that the generators produce every feature.
#[derive(Default, Debug)]
struct Features {
    parallel: usize,
    errors: usize,
    huge: usize,
    staged: usize,
    decisions: usize,
    summary_at_1: usize,
    session_text: usize,
    cjk: usize,
    emoji: usize,
    combining: usize,
    empty: usize,
    chitchat: usize,
    max_len: usize,
    min_len: usize,
}

fn features(ctx: &Context, f: &mut Features) {
    f.max_len = f.max_len.max(ctx.len());
    f.min_len = if f.min_len == 0 { ctx.len() } else { f.min_len.min(ctx.len()) };
    if ctx.get(1).is_some_and(|e| e.origin().is_summary()) {
        f.summary_at_1 += 1;
    }
    for m in ctx.messages() {
        f.parallel += usize::from(m.tool_calls.len() > 1);
        f.errors += usize::from(m.is_error);
        f.huge += usize::from(m.content.len() >= 10 * 1024);
        f.staged += usize::from(m.stage.is_some());
        f.decisions += usize::from(m.meta.contains_key("stage_decision"));
        f.session_text += usize::from(m.content.starts_with("## Session Summary"));
        f.cjk += usize::from(m.content.contains("日本") || m.content.contains("上下文"));
        f.emoji += usize::from(m.content.contains('🚀') || m.content.contains('✅'));
        f.combining += usize::from(m.content.contains('\u{301}'));
        f.empty += usize::from(m.content.is_empty() && m.tool_calls.is_empty());
        f.chitchat += usize::from(m.role == Role::User && gen::CHITCHAT.contains(&m.content.as_str()));
    }
}

#[test]
fn generators_cover_every_feature() {
    let mut runner = TestRunner::deterministic();
    let strategy = gen::arb_conversation();
    let mut f = Features::default();
    let mut in_flight = 0;
    for _ in 0..300 {
        let spec = strategy.new_tree(&mut runner).expect("generates").current();
        let ctx = spec.build();
        in_flight += usize::from(!gen::in_flight_calls(&ctx).is_empty());
        features(&ctx, &mut f);
    }
    assert!(f.min_len <= 5 && f.max_len >= 200, "{f:?}");
    for (what, n) in [
        ("parallel", f.parallel),
        ("errors", f.errors),
        ("huge", f.huge),
        ("staged", f.staged),
        ("decisions", f.decisions),
        ("summary at 1", f.summary_at_1),
        ("session text", f.session_text),
        ("cjk", f.cjk),
        ("emoji", f.emoji),
        ("combining", f.combining),
        ("empty", f.empty),
        ("chitchat", f.chitchat),
        ("calls in flight", in_flight),
    ] {
        assert!(n > 0, "no {what} in 300 generated conversations: {f:?}");
    }
}

fn assert_well_formed(spec: &ConversationSpec, ctx: &Context) -> Result<(), TestCaseError> {
    prop_assert!(check_context(ctx).is_empty(), "{:?}", check_context(ctx));
    // Every call's results follow right after it, in call order, except a round in flight at the
    // very end, which has none.
    let entries = ctx.entries();
    let answered = if spec.in_flight.is_some() {
        let last = entries.last().map(|e| e.message());
        prop_assert!(last.is_some_and(|m| m.role == Role::Assistant && !m.tool_calls.is_empty()));
        prop_assert_eq!(gen::in_flight_calls(ctx).len(), last.map_or(0, |m| m.tool_calls.len()));
        entries.len() - 1
    } else {
        prop_assert!(gen::in_flight_calls(ctx).is_empty());
        entries.len()
    };
    for (i, e) in entries.iter().enumerate().take(answered) {
        let calls = &e.message().tool_calls;
        for (k, c) in calls.iter().enumerate() {
            let r = entries.get(i + 1 + k).map(|r| r.message());
            prop_assert_eq!(r.and_then(|r| r.tool_call_id.as_deref()), Some(c.id.as_str()));
        }
    }
    // Recorded indices increase.
    let idx: Vec<usize> = entries.iter().filter_map(|e| e.origin().verbatim_index()).collect();
    prop_assert!(idx.windows(2).all(|w| w[0] < w[1]));
    let summary_pos = entries.iter().position(|e| e.origin().is_summary());
    match &spec.previous {
        Previous::None | Previous::RecordedText { .. } => prop_assert!(summary_pos.is_none()),
        _ => {
            prop_assert_eq!(summary_pos, Some(1));
            prop_assert_eq!(ctx.entries()[0].role(), Role::System);
        }
    }
    if !spec.staged {
        prop_assert!(ctx.messages().all(|m| m.stage.is_none() && !m.meta.contains_key("stage_decision")));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/proptest-regressions/kit.txt"
        )))),
        ..ProptestConfig::with_cases(64)
    })]

    #[test]
    fn generated_conversations_are_well_formed(spec in gen::arb_conversation()) {
        let ctx = spec.build();
        assert_well_formed(&spec, &ctx)?;
        // Building is deterministic.
        prop_assert_eq!(ctx.to_messages(), spec.build().to_messages());
    }

    #[test]
    fn appended_turns_keep_contexts_well_formed(spec in gen::arb_conversation(), more in gen::arb_turns(1..4)) {
        let ctx = spec.build();
        let longer = gen::append(&ctx, &more);
        prop_assert!(check_context(&longer).is_empty(), "{:?}", check_context(&longer));
        let first_new = longer.entries()[ctx.len()].origin().verbatim_index();
        prop_assert_eq!(first_new, Some(next_recorded_index(&ctx)));
        let exchanges = more.iter().filter(|t| matches!(t, Turn::Exchange { .. })).count();
        prop_assert!(longer.len() >= ctx.len() + exchanges);
    }
}
