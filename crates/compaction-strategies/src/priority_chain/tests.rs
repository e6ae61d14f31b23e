use super::*;
use compaction::message::ToolCall;
use compaction::{check_compaction, check_context};

fn chain() -> PriorityChain {
    PriorityChain::new(Params::default()).expect("default params are valid")
}

fn with(f: impl FnOnce(&mut Params)) -> PriorityChain {
    let mut p = Params::default();
    f(&mut p);
    PriorityChain::new(p).expect("valid params")
}

fn msg(role: &str, content: &str) -> Message {
    let role = match role {
        "system" => Role::System,
        "user" => Role::User,
        _ => Role::Assistant,
    };
    Message::new(role, content)
}

fn text(n: usize, c: char) -> String {
    std::iter::repeat_n(c, n).collect()
}

/// System prompt, then `n` conversation messages (user/assistant alternating) of `size` chars.
fn convo(n: usize, size: usize) -> Vec<Message> {
    let mut m = vec![Message::system("You help write papers.")];
    for i in 0..n {
        let body = format!("{i:04} {}", text(size.saturating_sub(5), 'x'));
        m.push(if i % 2 == 0 { Message::user(body) } else { Message::assistant(body) });
    }
    m
}

fn run(s: &PriorityChain, ctx: &Context, budget: &Budget, summary: &str) -> Compacted {
    let plan = s.plan(ctx, budget, Trigger::Proactive).expect("a plan");
    let summaries: Vec<SummaryOutcome> = plan.requests.iter().map(|_| Ok(summary.to_string())).collect();
    s.apply(ctx, budget, &plan, &summaries)
}

fn note<'a>(c: &'a Compacted, key: &str) -> &'a Value {
    c.event.notes.get(key).unwrap_or(&Value::Null)
}

/// Violations not documented by the strategy.
fn undocumented(s: &PriorityChain, ctx: &Context, budget: &Budget, out: &Compacted) -> Vec<String> {
    let promised = s.promises(ctx, budget).documented_deviations;
    check_compaction(s, ctx, budget, Trigger::Proactive, out)
        .into_iter()
        .filter(|v| !promised.contains(&v.kind()))
        .map(|v| v.to_string())
        .collect()
}

// ---- Task 6: the document's six stripChitchat cases, verbatim ----

#[test]
fn chitchat_removes_short_user_confirmations() {
    let messages = vec![
        msg("user", "ok"),
        msg("assistant", "Baik, saya akan melanjutkan."),
        msg("user", "ya"),
        msg("assistant", "Berikut hasilnya."),
    ];
    let result = chain().strip_chitchat(&messages);
    assert_eq!(result.len(), 2);
    assert!(result.iter().all(|m| m.role == Role::Assistant));
}

#[test]
fn chitchat_keeps_user_messages_with_questions() {
    let messages = vec![msg("user", "ok?"), msg("assistant", "Ya, benar.")];
    assert_eq!(chain().strip_chitchat(&messages).len(), 2);
}

#[test]
fn chitchat_keeps_user_messages_longer_than_50_chars() {
    let messages =
        vec![msg("user", "Saya setuju dengan pendekatan yang kamu sarankan tadi"), msg("assistant", "Baik.")];
    assert_eq!(chain().strip_chitchat(&messages).len(), 2);
}

#[test]
fn chitchat_keeps_system_messages() {
    let messages = vec![msg("system", "ok"), msg("user", "ok")];
    let result = chain().strip_chitchat(&messages);
    assert_eq!(result.len(), 1);
    assert_eq!(result[0].role, Role::System);
}

#[test]
fn chitchat_handles_empty_array() {
    assert!(chain().strip_chitchat(&[]).is_empty());
}

#[test]
fn chitchat_keeps_messages_with_exclamation_marks() {
    let messages = vec![msg("user", "bagus!"), msg("assistant", "Terima kasih.")];
    assert_eq!(chain().strip_chitchat(&messages).len(), 2);
}

#[test]
fn chitchat_limits_are_raw_50_and_trimmed_15() {
    let s = chain();
    // 2 chars of text padded to exactly 50 raw chars: chitchat; 51 raw chars: not.
    assert!(s.is_chitchat(&Message::user(format!("ok{}", text(48, ' ')))));
    assert!(!s.is_chitchat(&Message::user(format!("ok{}", text(49, ' ')))));
    // 14 trimmed chars: chitchat; 15: not.
    assert!(s.is_chitchat(&Message::user("  oke lanjutkan ")));
    assert!(!s.is_chitchat(&Message::user("oke, lanjutkan.")));
    assert!(!s.is_chitchat(&Message::assistant("ok")));
}

// ---- Task 1: checkContextBudget ----

#[test]
fn budget_examples_of_task_1_follow_the_code() {
    let s = chain();
    // "128k window, compaction at 0.85 = 108800 tokens; prune at 0.8 = 102400 tokens".
    let b = s.check_context_budget(436_000, 128_000);
    assert_eq!((b.compaction_threshold, b.prune_threshold, b.total_tokens), (108_800, 102_400, 109_000));
    assert!(b.should_compact);
    // The document's test expects `shouldPrune` false here; its code gives true (109000 > 102400).
    assert!(b.should_prune);

    let b = s.check_context_budget(400_000, 128_000);
    assert!(!b.should_compact);
    assert!(!b.should_prune);

    let b = s.check_context_budget(420_000, 128_000);
    // The document's test expects `shouldCompact` true; its code gives false (105000 <= 108800).
    assert!(!b.should_compact);
    assert!(b.should_prune);
}

#[test]
fn threshold_is_the_prune_threshold_and_below_it_nothing_happens() {
    let s = chain();
    let budget = Budget::new(1_000);
    assert_eq!(s.threshold(&Context::new(), &budget), Some(800));
    assert_eq!(s.thresholds(&Context::new(), &budget), vec![("prune (P5)", 800), ("chain trigger", 850)]);
    let ctx = Context::from_messages(convo(4, 790)); // ~800 tokens, not over 800
    assert!(s.estimate(&ctx) <= 800);
    assert!(!s.should_compact(&ctx, &budget));
    assert!(s.plan(&ctx, &budget, Trigger::Proactive).is_none());
}

// ---- P1 ----

#[test]
fn resolves_at_p1_when_stripping_chitchat_is_enough() {
    let s = chain();
    let budget = Budget::new(1_000);
    let mut m =
        vec![Message::system(text(520, 's')), Message::user(text(1_200, 'q')), Message::assistant(text(1_200, 'a'))];
    for _ in 0..10 {
        m.push(Message::user(format!("ok{}", text(48, ' '))));
    }
    let ctx = Context::from_messages(m);
    assert_eq!(s.estimate(&ctx), 855);
    let out = run(&s, &ctx, &budget, "unused");
    assert_eq!(note(&out, "resolved_at"), "P1");
    assert_eq!(note(&out, "stripped_chitchat"), 10);
    assert_eq!(out.event.step, "P1");
    assert_eq!(out.context.len(), 3);
    assert_eq!(out.event.estimate_after, 730);
    assert!(out.event.shortfall.is_none());
    assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
}

// ---- P2 ----

fn staged() -> Vec<Message> {
    vec![
        Message::system("Kamu membantu menulis paper."),
        Message::user(text(800, 'g')).with_stage("gagasan"),
        Message::assistant(text(800, 'h')).with_stage("gagasan"),
        Message::user("setuju, gagasan final")
            .with_stage("gagasan")
            .with_meta("stage_decision", json!("ide awal: dampak AI pada UMKM")),
        Message::user(text(800, 't')).with_stage("topik"),
        Message::assistant(text(800, 'u'))
            .with_stage("topik")
            .with_meta("stage_decision", json!("topik lama"))
            .with_meta("note", json!(1)),
        Message::user("revisi topik lagi")
            .with_stage("topik")
            .with_meta("stage_decision", json!("AI untuk UMKM di Jawa")),
        Message::user(text(400, 'o')).with_stage("outline"),
        Message::assistant(text(400, 'p')).with_stage("outline"),
    ]
}

#[test]
fn p2_drops_the_oldest_stage_and_injects_the_digest_after_the_system_messages() {
    let s = chain();
    let ctx = Context::from_messages(staged());
    // 5 * 800 + 2 * 400 + short ones: about 1220 tokens. Dropping gagasan (~410) brings it under 85% of 1000.
    let budget = Budget::new(1_000);
    assert!(s.estimate(&ctx) > 850);
    let out = run(&s, &ctx, &budget, "unused");
    assert_eq!(note(&out, "resolved_at"), "P2");
    assert_eq!(note(&out, "compacted_stages"), &json!(["gagasan"]));
    let digest = out.context.get(1).expect("digest");
    assert_eq!(digest.origin(), &Origin::Inserted { what: Inserted::StageDigest });
    assert_eq!(digest.role(), Role::System);
    assert_eq!(
        digest.message().content,
        "[CONTEXT COMPACTION: 1 tahap sebelumnya di-compact]\n- gagasan: ide awal: dampak AI pada UMKM\n\n\
             Detail tersimpan di stageData. Pesan asli tetap ada di database."
    );
    // System prompt, digest, then the topik and outline messages.
    assert_eq!(out.context.len(), 2 + 5);
    assert!(out.context.entries()[2..].iter().all(|e| e.message().stage.as_deref() != Some("gagasan")));
    assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
}

#[test]
fn p2_drops_stages_until_under_and_uses_the_last_decision_of_each() {
    let s = chain();
    let mut m = staged();
    m.insert(1, Message::system("Aturan tambahan."));
    let ctx = Context::from_messages(m);
    let budget = Budget::new(700); // 85% = 595: both completed stages must go
    let out = run(&s, &ctx, &budget, "unused");
    assert_eq!(note(&out, "compacted_stages"), &json!(["gagasan", "topik"]));
    assert_eq!(note(&out, "resolved_at"), "P2");
    // After the two system messages.
    let digest = out.context.get(2).expect("digest");
    assert_eq!(
        digest.message().content,
        "[CONTEXT COMPACTION: 2 tahap sebelumnya di-compact]\n- gagasan: ide awal: dampak AI pada UMKM\n\
             - topik: AI untuk UMKM di Jawa\n\nDetail tersimpan di stageData. Pesan asli tetap ada di database."
    );
    assert_eq!(out.context.len(), 3 + 2);
}

#[test]
fn a_later_digest_merges_the_earlier_one() {
    let s = chain();
    let ctx = Context::from_messages(staged());
    let first = run(&s, &ctx, &Budget::new(1_000), "unused");
    assert_eq!(note(&first, "compacted_stages"), &json!(["gagasan"]));
    let second = run(&s, &first.context, &Budget::new(600), "unused");
    assert_eq!(note(&second, "compacted_stages"), &json!(["topik"]));
    let digests: Vec<_> = second
        .context
        .entries()
        .iter()
        .filter(|e| matches!(e.origin(), Origin::Inserted { what: Inserted::StageDigest }))
        .collect();
    assert_eq!(digests.len(), 1);
    assert!(digests[0].message().content.starts_with(
            "[CONTEXT COMPACTION: 2 tahap sebelumnya di-compact]\n- gagasan: ide awal: dampak AI pada UMKM\n- topik: AI untuk UMKM di Jawa\n\n"
        ));
    assert_eq!(second.context.get(1).map(|e| e.message()), Some(digests[0].message()));
}

#[test]
fn general_mode_skips_p2() {
    let s = with(|p| p.mode = Mode::General);
    let ctx = Context::from_messages(staged());
    let plan = s.plan(&ctx, &Budget::new(1_000), Trigger::Proactive).expect("a plan");
    assert_eq!(plan.notes.get("compacted_stages"), Some(&json!([])));
    assert!(!plan.layout.iter().any(|s| matches!(s, Slot::Insert { .. })));
}

// ---- P3 ----

fn p3_count(s: &PriorityChain, n: usize) -> Option<usize> {
    let ctx = Context::from_messages(convo(n, 100));
    let plan = s.plan(&ctx, &Budget::new(100), Trigger::Proactive)?;
    plan.requests.first().map(|r| r.span.len())
}

#[test]
fn p3_counts_in_paper_mode_are_30_percent_at_most_30() {
    // The P3 rule on its own: without Task 9's trim, which keeps 40 of them.
    let s = with(|p| {
        p.mode = Mode::Paper;
        p.paper_trim_last = 0;
    });
    assert_eq!(p3_count(&s, 10), Some(3));
    assert_eq!(p3_count(&s, 50), Some(15));
    assert_eq!(p3_count(&s, 99), Some(29));
    assert_eq!(p3_count(&s, 200), Some(30));
    // floor(9 x 0.3) = 2 is not over 2: no summary.
    assert_eq!(p3_count(&s, 9), None);
}

#[test]
fn p3_counts_in_general_chat_are_min_20_and_40_percent() {
    let s = chain();
    assert_eq!(p3_count(&s, 8), Some(3));
    assert_eq!(p3_count(&s, 30), Some(12));
    assert_eq!(p3_count(&s, 50), Some(20));
    assert_eq!(p3_count(&s, 120), Some(20));
    // floor(7 x 0.4) = 2: no summary.
    assert_eq!(p3_count(&s, 7), None);
}

#[test]
fn p3_request_uses_the_document_prompts_and_limit() {
    let s = chain();
    let ctx = Context::from_messages(convo(30, 100));
    let plan = s.plan(&ctx, &Budget::new(100), Trigger::Proactive).expect("plan");
    assert_eq!(plan.requests[0].prompt, general_chat_prompt());
    assert_eq!(plan.requests[0].max_tokens, 200);
    assert_eq!(plan.requests[0].span, (1..=12).collect::<Vec<_>>());
    let mut m = staged();
    m.extend(convo(30, 100).into_iter().skip(1).map(|m| m.with_stage("outline")));
    let ctx = Context::from_messages(m);
    let plan = s.plan(&ctx, &Budget::new(100), Trigger::Proactive).expect("plan");
    assert_eq!(plan.requests[0].prompt.var("stage"), Some("outline"));
    assert_eq!(plan.requests[0].prompt.name, "paper_mid_stage");
}

#[test]
fn resolves_at_p3_with_the_summary_as_a_system_message() {
    let s = chain();
    // Four big old messages (40% of 10 = 4), six small recent ones.
    let mut m = vec![Message::system("sys")];
    for i in 0..10 {
        let size = if i < 4 { 1_000 } else { 40 };
        let body = format!("{i} {}", text(size, 'z'));
        m.push(if i % 2 == 0 { Message::user(body) } else { Message::assistant(body) });
    }
    let ctx = Context::from_messages(m);
    let budget = Budget::new(1_000);
    let out = run(&s, &ctx, &budget, "- poin satu");
    assert_eq!(note(&out, "resolved_at"), "P3");
    assert_eq!(note(&out, "llm_summarized"), true);
    assert_eq!(out.event.step, "P3");
    let summary = out.context.get(1).expect("summary");
    assert_eq!(summary.role(), Role::System);
    assert_eq!(
        summary.message().content,
        "[RINGKASAN DISKUSI SEBELUMNYA]\n- poin satu\n\nPercakapan berlanjut dari sini."
    );
    assert_eq!(summary.origin(), &Origin::Summary { round: 1, covers: vec![1, 2, 3, 4] });
    assert_eq!(out.context.len(), 1 + 1 + 6);
    assert_eq!(out.context.get(2).and_then(|e| e.origin().verbatim_index()), Some(5));
    assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
}

#[test]
fn signals_p4_in_paper_mode_when_the_summary_is_not_enough() {
    let s = with(|p| p.mode = Mode::Paper);
    let ctx = Context::from_messages(convo(20, 400));
    let budget = Budget::new(1_000);
    let out = run(&s, &ctx, &budget, "- ringkas");
    assert_eq!(note(&out, "resolved_at"), "P4");
    assert_eq!(note(&out, "p4_signal"), true);
    assert_eq!(out.event.step, "P3+P4");
    assert!(out.event.shortfall.is_some());
    // 30% of 20 = 6 summarized.
    assert_eq!(out.context.len(), 1 + 1 + 14);
}

#[test]
fn general_chat_exhausts_the_chain_without_p4() {
    let s = chain();
    let ctx = Context::from_messages(convo(20, 400));
    let out = run(&s, &ctx, &Budget::new(1_000), "- ringkas");
    assert_eq!(note(&out, "resolved_at"), "none");
    assert_eq!(note(&out, "p4_signal"), false);
    assert_eq!(out.event.step, "P3");
    assert_eq!(out.context.len(), 1 + 1 + 12);
}

// ---- P5 and the failure path ----

#[test]
fn prune_alone_between_80_and_85_percent() {
    let s = chain();
    let ctx = Context::from_messages(convo(60, 60));
    // 60 x 60 chars + 22 = 3622 chars = 906 tokens; window 1100: 880 < 906 <= 935.
    let budget = Budget::new(1_100);
    let b = s.check_context_budget(ctx.units(&CharsOver4), 1_100);
    assert!(b.should_prune && !b.should_compact);
    let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
    assert_eq!(plan.step, "P5");
    let out = s.apply(&ctx, &budget, &plan, &[]);
    assert_eq!(out.event.step, "P5");
    assert_eq!(note(&out, "pruned"), 10);
    assert_eq!(out.context.len(), 51);
    assert_eq!(out.context.get(1).and_then(|e| e.origin().verbatim_index()), Some(11));
    assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
}

#[test]
fn prune_follows_the_chain_on_the_pre_chain_estimate_by_default() {
    // 80 messages: P3 summarizes 20, the prune then keeps the last 50 of the 60 left.
    let ctx = Context::from_messages(convo(80, 100));
    let budget = Budget::new(1_000); // far over both thresholds
    let out = run(&chain(), &ctx, &budget, "- s");
    assert_eq!(out.event.step, "P3+P5");
    assert_eq!(note(&out, "pruned"), 10);
    assert_eq!(out.context.len(), 2 + 50);
    assert!(out.context.get(1).is_some_and(|e| e.origin().is_summary()));

    // 20 big old messages, 80 small recent ones: the summary of the 20 brings the context far
    // under 80%. Checked before the chain (the code), the prune still cuts to 50; checked after
    // (the text), it does not run.
    let mut m = vec![Message::system("sys")];
    for i in 0..100 {
        let size = if i < 20 { 400 } else { 20 };
        m.push(if i % 2 == 0 { Message::user(text(size, 'u')) } else { Message::assistant(text(size, 'a')) });
    }
    let ctx = Context::from_messages(m);
    let budget = Budget::new(2_000);
    let out = run(&chain(), &ctx, &budget, "- s");
    assert_eq!(note(&out, "resolved_at"), "P3");
    assert_eq!(note(&out, "pruned"), 30);
    assert_eq!(out.context.len(), 2 + 50);
    let after = with(|p| p.prune_check = PruneCheck::AfterChain);
    let out = run(&after, &ctx, &budget, "- s");
    assert_eq!(note(&out, "resolved_at"), "P3");
    assert_eq!(note(&out, "pruned"), 0);
    assert_eq!(out.context.len(), 2 + 80);
}

#[test]
fn failed_summary_falls_through_to_the_prune() {
    let s = chain();
    let ctx = Context::from_messages(convo(80, 100));
    let budget = Budget::new(1_000);
    let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
    let failed = compaction::SummaryFailure { reason: "timeout".into() };
    let out = s.apply(&ctx, &budget, &plan, &[Err(failed)]);
    assert_eq!(out.event.fallback.as_deref(), Some("P3 summary failed: timeout"));
    assert_eq!(out.event.step, "P5");
    assert_eq!(note(&out, "llm_summarized"), false);
    assert!(out.event.summaries.is_empty());
    assert_eq!(out.context.len(), 1 + 50);
    assert_eq!(out.context.get(1).and_then(|e| e.origin().verbatim_index()), Some(31));
    // `result.text || null`: an empty summary fails too.
    let out = s.apply(&ctx, &budget, &plan, &[Ok(String::new())]);
    assert!(out.event.fallback.as_deref().is_some_and(|f| f.contains("empty")));
}

// ---- tool calls ----

fn tool_convo() -> Vec<Message> {
    let mut m = vec![Message::system("sys")];
    for t in 0..30 {
        let id = format!("c{t}");
        m.push(Message::user(format!("turn {t} {}", text(80, 'u'))));
        m.push(Message::assistant_calls(
            "",
            vec![ToolCall { id: id.clone(), name: "read".into(), arguments: "{}".into() }],
        ));
        m.push(Message::tool_result(id, "read", text(200, 'r')));
    }
    m
}

#[test]
fn p3_split_and_prune_keep_tool_calls_with_their_results() {
    let s = chain();
    let ctx = Context::from_messages(tool_convo());
    let budget = Budget::new(500);
    // 90 conversation messages: 40% = 36 > 20 -> 20, which falls between call 6 and its result.
    let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
    assert_eq!(plan.requests[0].span.len(), 21);
    let out = run(&s, &ctx, &budget, "- s");
    assert!(check_context(&out.context).is_empty(), "{:?}", check_context(&out.context));
    // 69 left; the prune keeps the last 50, which start at a tool call.
    assert_eq!(out.context.len(), 2 + 50);
    assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
    // Keeping 49 would start at a tool result: the prune moves one on.
    let s49 = with(|p| p.prune_keep_last = 49);
    let out = run(&s49, &ctx, &budget, "- s");
    assert_eq!(out.context.len(), 2 + 48);
    assert!(check_context(&out.context).is_empty());
    assert!(out.context.get(2).is_some_and(|e| e.role() == Role::User));

    let raw = with(|p| p.keep_tool_pairs = false);
    let plan = raw.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
    assert_eq!(plan.requests[0].span.len(), 20);
    // Without the prune, the document's count leaves result 6 without its call. (A plan
    // that prunes after the chain holds the chain's layout, not yet pruned.)
    let unpruned = with(|p| {
        p.keep_tool_pairs = false;
        p.prune_check = PruneCheck::AfterChain;
    });
    let plan = unpruned.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
    let summarized = build_layout(&ctx, &plan.layout, &plan.requests, &[Ok("- s".into())], &[]);
    assert!(!check_context(&summarized.context).is_empty());
    assert!(raw.promises(&ctx, &budget).documented_deviations.contains(&ViolationKind::OrphanToolResult));
}

// ---- Task 9, Task 7 and Task 5 ----

/// Task 9, "Remove legacy paper message trimming": the route keeps only the last
/// `MAX_CHAT_HISTORY_PAIRS * 2` = 40 messages in paper mode, and the document says "do NOT
/// remove it yet".
#[test]
fn task_9_paper_mode_keeps_only_the_newest_40_messages() {
    let s = with(|p| p.mode = Mode::Paper);
    assert_eq!(Params::default().paper_trim_last, 40);
    let ctx = Context::from_messages(convo(60, 20));
    let budget = Budget::new(1_000_000);
    assert!(!s.check_context_budget(ctx.units(&CharsOver4), 1_000_000).should_prune, "far under every threshold");
    assert!(s.should_compact(&ctx, &budget), "the trim runs on every request over 40 messages");
    let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("the trim");
    assert_eq!(plan.step, "trim");
    let out = s.apply(&ctx, &budget, &plan, &[]);
    assert_eq!(out.context.len(), 1 + 40);
    assert_eq!(out.context.get(0).map(|e| e.role()), Some(Role::System));
    assert_eq!(out.context.get(1).map(|e| e.origin().clone()), Some(Origin::Recorded { index: 21 }));
    assert_eq!(out.event.step, "trim");
    assert_eq!(note(&out, "trimmed"), &json!(20));
    // The trim is declared: it compacts under the threshold.
    let promised = s.promises(&ctx, &budget).documented_deviations;
    assert!(promised.contains(&ViolationKind::CompactedBelowThreshold));
    assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
    // 40 messages or fewer, general chat, or the trim off: nothing to do.
    let forty = Context::from_messages(convo(40, 20));
    assert!(!s.should_compact(&forty, &budget));
    assert!(s.plan(&forty, &budget, Trigger::Proactive).is_none());
    assert!(!with(|p| p.mode = Mode::General).should_compact(&ctx, &budget));
    let off = with(|p| {
        p.mode = Mode::Paper;
        p.paper_trim_last = 0;
    });
    assert!(!off.should_compact(&ctx, &budget));
}

/// Task 7: the chain runs on the trimmed list (the trim at lines 413-421 comes before the
/// compaction layer at 492-526), so its thresholds see 40 messages, not 60.
#[test]
fn task_7_the_chain_estimates_the_trimmed_list() {
    let s = with(|p| p.mode = Mode::Paper);
    let ctx = Context::from_messages(convo(60, 100));
    // 60 x 100 chars = 1,500 tokens in all; 40 of them are 1,000 (+ the system prompt).
    let budget = Budget::new(1_250);
    assert!(s.check_context_budget(ctx.units(&CharsOver4), 1_250).should_compact);
    let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("the trim");
    assert_eq!(plan.notes.get("chain_ran"), Some(&json!(false)), "{:?}", plan.notes);
    assert!(plan.requests.is_empty());
    // A window the trimmed list is still over: P3 summarizes 30% of the 40.
    let plan = s.plan(&ctx, &Budget::new(1_000), Trigger::Proactive).expect("the chain");
    assert_eq!(plan.requests[0].span.len(), 12);
    assert!(plan.step.starts_with("trim+"), "{}", plan.step);
}

/// Task 7: the route runs the chain on `fullMessagesBase` rebuilt from the stored
/// conversation on every request, so the default starts from the full history.
#[test]
fn task_7_rebuilds_from_the_full_history_by_default() {
    assert!(Params::default().rebuild_from_history);
    assert!(chain().profile().rebuilds_from_history);
    assert!(!with(|p| p.rebuild_from_history = false).profile().rebuilds_from_history);
}

/// Task 5: "Max 500 karakter total" is the summary's target, under `maxTokens: 200`.
#[test]
fn task_5_the_summary_aims_at_500_characters() {
    let s = chain();
    let ctx = Context::from_messages(convo(30, 100));
    let plan = s.plan(&ctx, &Budget::new(100), Trigger::Proactive).expect("a plan");
    let request = &plan.requests[0];
    assert_eq!(request.target_chars, Some(500));
    assert_eq!(request.max_tokens, 200);
    // `[${m.role}]: ${m.content}`: the messages go to the model whole.
    assert_eq!(request.input, compaction::InputCuts::NONE);
}

/// Task 7 inserts the chain before the brute prune and nothing catches a rejected request.
#[test]
fn no_reactive_path_unless_asked() {
    assert!(!chain().reacts_to(Trigger::Overflow));
    assert!(!chain().reacts_to(Trigger::LengthStop));
    assert!(with(|p| p.react_to_overflow = true).reacts_to(Trigger::Overflow));
}

// ---- params ----

#[test]
fn params_have_the_document_defaults_and_are_checked() {
    let p: Params = serde_json::from_str("{}").expect("empty params");
    assert_eq!(p, Params::default());
    assert_eq!((p.compaction_ratio, p.prune_ratio, p.prune_keep_last), (0.85, 0.80, 50));
    assert!(serde_json::from_str::<Params>(r#"{"trigger": 0.9}"#).is_err());
    let err = PriorityChain::new(Params { compaction_ratio: 1.5, ..Params::default() }).expect_err("out of range");
    assert_eq!(err.param, "compaction_ratio");
    let p: Params = serde_json::from_str(r#"{"mode": "paper", "prune_check": "after_chain"}"#).expect("params");
    assert_eq!((p.mode, p.prune_check), (Mode::Paper, PruneCheck::AfterChain));
}

#[test]
fn promises_cover_the_stripped_last_message() {
    let s = chain();
    let mut m = convo(10, 400);
    m.push(Message::user("ok"));
    let ctx = Context::from_messages(m);
    let budget = Budget::new(500);
    assert_eq!(s.promises(&ctx, &budget).recent_window, 0);
    let out = run(&s, &ctx, &budget, "- s");
    assert!(undocumented(&s, &ctx, &budget, &out).is_empty());
}

// ---- the rewrite for speed against the implementation before it ----

use compaction::context::Entry;
use proptest::prelude::{
    prop, prop_assert, prop_assert_eq, prop_oneof, proptest, Just, ProptestConfig, Strategy as Gen,
};

/// One generated message, before it becomes an entry.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// A user message of `n` characters, or (`chat`) one of a few short confirmations.
    User {
        n: usize,
        chat: Option<u8>,
    },
    Assistant {
        n: usize,
    },
    /// An assistant message calling tools, by ids from a small pool (ids get reused).
    Calls {
        ids: Vec<u8>,
    },
    /// A tool result answering an id from the pool (maybe no call, maybe an old one).
    Result {
        id: u8,
        n: usize,
    },
    System {
        n: usize,
    },
    /// A summary entry (a system message), or a stage digest this strategy wrote.
    Summary,
    Digest,
}

pub(crate) fn arb_step() -> impl Gen<Value = Step> {
    prop_oneof![
        4 => (0usize..300, prop::option::weighted(0.3, 0u8..8)).prop_map(|(n, chat)| Step::User { n, chat }),
        3 => (0usize..300).prop_map(|n| Step::Assistant { n }),
        3 => prop::collection::vec(0u8..6, 1..4).prop_map(|ids| Step::Calls { ids }),
        4 => (0u8..6, 0usize..600).prop_map(|(id, n)| Step::Result { id, n }),
        1 => (0usize..100).prop_map(|n| Step::System { n }),
        1 => Just(Step::Summary),
        1 => Just(Step::Digest),
    ]
}

/// A context of `steps`, with stage labels and stage decisions when `stages` says so.
pub(crate) fn context_of(steps: &[(Step, Option<u8>, bool)], system: bool) -> Context {
    const CHAT: [&str; 8] = ["ok", " sure ", "ok?", "bagus!", "İİ", "\u{feff}ya", "ok thanks", "next"];
    let mut entries = Vec::new();
    if system {
        entries.push(Entry::recorded(0, Message::system("You help.")));
    }
    for (k, (step, stage, decision)) in steps.iter().enumerate() {
        let i = entries.len();
        let body = |n: usize| format!("{k} {}", text(n, 'x'));
        let (m, origin) = match step {
            Step::User { n, chat } => {
                (Message::user(chat.map_or_else(|| body(*n), |c| CHAT[c as usize].to_string())), None)
            }
            Step::Assistant { n } => (Message::assistant(body(*n)), None),
            Step::Calls { ids } => {
                let calls = ids
                    .iter()
                    .map(|id| ToolCall { id: format!("c{id}"), name: "read".into(), arguments: "{}".into() })
                    .collect();
                (Message::assistant_calls("", calls), None)
            }
            Step::Result { id, n } => (Message::tool_result(format!("c{id}"), "read", body(*n)), None),
            Step::System { n } => (Message::system(body(*n)), None),
            Step::Summary => (Message::system("earlier summary"), Some(Origin::Summary { round: 1, covers: vec![0] })),
            Step::Digest => (
                Message::system(stage_digest_text(2, "- a: x\n- b: y")),
                Some(Origin::Inserted { what: Inserted::StageDigest }),
            ),
        };
        let mut m = m;
        if let Some(s) = stage {
            m = m.with_stage(["a", "b", "c"][*s as usize % 3]);
            if *decision {
                m = m.with_meta("stage_decision", json!(format!("decided {k}")));
            }
        }
        entries.push(Entry::new(m, origin.unwrap_or(Origin::Recorded { index: i })));
    }
    Context::from_entries(entries)
}

pub(crate) fn arb_context() -> impl Gen<Value = Context> {
    let step = (arb_step(), prop::option::weighted(0.3, 0u8..3), prop::bool::weighted(0.2));
    (prop::collection::vec(step, 0..90), prop::bool::weighted(0.85))
        .prop_map(|(steps, system)| context_of(&steps, system))
}

/// Entries as comparable values.
pub(crate) fn entries_of(ctx: &Context) -> Vec<(Message, Origin)> {
    ctx.entries().iter().map(|e| (e.message().clone(), e.origin().clone())).collect()
}

fn arb_params() -> impl Gen<Value = Params> {
    (0u8..3, any_bool(), any_bool(), prop::sample::select(vec![0usize, 3, 40]), prop::sample::select(vec![2usize, 50]))
        .prop_map(|(mode, pairs, after, trim, keep)| Params {
            mode: [Mode::Auto, Mode::Paper, Mode::General][mode as usize],
            keep_tool_pairs: pairs,
            prune_check: if after { PruneCheck::AfterChain } else { PruneCheck::BeforeChain },
            paper_trim_last: trim,
            prune_keep_last: keep,
            ..Params::default()
        })
}

fn any_bool() -> impl Gen<Value = bool> {
    prop::bool::ANY
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The tool pairs, the pair-safe split (from the whole list of pairs and from the pairs
    /// near the split) and every plan, applied with a summary, an empty one and a failed
    /// one, are those of the implementation before the rewrite.
    #[test]
    fn fast_paths_make_the_plans_of_the_straightforward_ones(
        ctx in arb_context(),
        params in arb_params(),
        ratio in prop::sample::select(vec![0.2f64, 0.6, 0.9, 1.0, 1.1, 1.3, 3.0]),
        k in 0usize..100,
    ) {
        let pairs = tool_pairs(&ctx);
        prop_assert_eq!(&pairs, &legacy::tool_pairs_of(&ctx));
        let seq: Vec<Option<usize>> =
            (0..ctx.len()).filter(|i| i % 7 != 3).map(|i| (i % 11 != 5).then_some(i)).collect();
        let expected = legacy::pair_safe_split_of(&seq, k, &pairs);
        prop_assert_eq!(pair_safe_split(&seq, k, &pairs), expected);
        let s = PriorityChain::new(params.clone()).expect("valid params");
        prop_assert_eq!(Scan::new(&ctx, &s).safe_split(&seq, k), expected);
        // Either local search, whatever the budget, finds that split or gives up.
        for budget in [0, 3, 1_000] {
            let scan = Scan::new(&ctx, &s);
            if k < seq.len() {
                for local in [scan.split_from_calls(&seq, k, budget), scan.split_from_results(&seq, k, budget)] {
                    prop_assert!(local.is_none() || local == Some(expected), "{local:?} vs {expected}");
                }
            }
        }

        let old = legacy::Legacy::new(params);
        let window = ((ctx.units(&CharsOver4).div_ceil(4) as f64 * ratio) as u64).max(1);
        let budget = Budget::new(window);
        // In general chat over the prune's threshold the plan holds what the prune leaves
        // of the legacy plan's layouts.
        let b = s.check_context_budget(ctx.units(&CharsOver4), window);
        let pruned_in_plan = s.prunes_in_plan(s.paper_mode(&ctx), &b);
        for trigger in [Trigger::Proactive, Trigger::Overflow] {
            let plan = s.plan(&ctx, &budget, trigger);
            let mut was_plan = old.plan(&ctx, &budget, trigger);
            if let Some(p) = was_plan.as_mut().filter(|_| pruned_in_plan) {
                p.layout = old.prune(&ctx, &p.layout);
                if let Fallback::Layout { layout, .. } = &mut p.fallback {
                    *layout = old.prune(&ctx, layout);
                }
            }
            prop_assert_eq!(&plan, &was_plan);
            let Some(plan) = plan else { continue };
            let was_plan = old.plan(&ctx, &budget, trigger).expect("the legacy plan");
            let failed = compaction::SummaryFailure { reason: "x".into() };
            for summaries in [vec![Ok("- s".to_string())], vec![Ok(String::new())], vec![Err(failed)], vec![]] {
                let was = old.apply(&ctx, &budget, &was_plan, &summaries);
                // Each plan applied, and the legacy plan applied by the new code.
                for new in [s.apply(&ctx, &budget, &plan, &summaries), s.apply(&ctx, &budget, &was_plan, &summaries)] {
                    prop_assert_eq!(entries_of(&new.context), entries_of(&was.context));
                    prop_assert_eq!(&new.event, &was.event);
                }
            }
        }
        let (p, q) = (s.promises(&ctx, &budget), old.promises(&ctx, &budget));
        prop_assert_eq!((p.recent_window, p.documented_deviations), (q.recent_window, q.documented_deviations));
    }

    /// The index kept with a context ([`Context::memo`]) follows it as it grows one entry at
    /// a time, and is read again once an entry is replaced: plans, applies and promises on
    /// the context are those on a fresh copy, which reads its entries from scratch.
    #[test]
    fn the_kept_index_follows_a_growing_context(
        ctx in arb_context(),
        params in arb_params(),
        ratio in prop::sample::select(vec![0.3f64, 0.9, 1.1]),
        replaced in 0usize..90,
    ) {
        let s = PriorityChain::new(params).expect("valid params");
        let same = |grown: &Context| -> Result<(), proptest::test_runner::TestCaseError> {
            let fresh = Context::from_entries(grown.entries().to_vec());
            let window = ((grown.units(&CharsOver4).div_ceil(4) as f64 * ratio) as u64).max(1);
            let budget = Budget::new(window);
            let plan = s.plan(grown, &budget, Trigger::Proactive);
            prop_assert_eq!(&plan, &s.plan(&fresh, &budget, Trigger::Proactive));
            if let Some(plan) = plan {
                let summaries = [Ok("- s".to_string())];
                let (a, b) = (s.apply(grown, &budget, &plan, &summaries), s.apply(&fresh, &budget, &plan, &summaries));
                prop_assert_eq!(entries_of(&a.context), entries_of(&b.context));
                prop_assert_eq!(a.event, b.event);
            }
            let (p, q) = (s.promises(grown, &budget), s.promises(&fresh, &budget));
            prop_assert_eq!((p.recent_window, p.documented_deviations), (q.recent_window, q.documented_deviations));
            Ok(())
        };
        let mut grown = Context::new();
        for e in ctx.entries() {
            grown.push(e.clone());
            same(&grown)?;
        }
        if replaced < grown.len() {
            // A short confirmation in place of entry `replaced`: P1 strips it.
            grown.replace(replaced, Entry::recorded(replaced, Message::user("ok")), &[&CharsOver4]);
            same(&grown)?;
            grown.push(Entry::recorded(grown.len(), Message::assistant("after the change")));
            same(&grown)?;
        }
    }
}
