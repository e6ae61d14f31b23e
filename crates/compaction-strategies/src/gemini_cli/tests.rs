use super::*;
use compaction::message::ToolCall;
use compaction::{compact, Summaries, SummaryFailure};

/// Small budgets, so that a few kilobytes of tool output exercise every step.
fn small() -> GeminiCli {
    GeminiCli::new(Params {
        function_response_budget: 100,
        truncate_tool_output_chars: 200,
        mask_protection_tokens: 100,
        mask_min_prunable_tokens: 50,
        summary_max_tokens: 200,
        ..Params::default()
    })
    .unwrap()
}

/// A system prompt, then `n` turns: a user message, a call, its `chars`-character result, and
/// an answer.
fn turns(n: usize, chars: usize) -> Context {
    let mut m = vec![Message::system("sys")];
    for t in 0..n {
        m.push(Message::user(format!("turn {t}")));
        m.push(Message::assistant_calls(
            "",
            vec![ToolCall { id: format!("c{t}"), name: "read_file".into(), arguments: "{}".into() }],
        ));
        m.push(Message::tool_result(format!("c{t}"), "read_file", format!("line {t}\n").repeat(chars / 7)));
        m.push(Message::assistant(format!("done {t}")));
    }
    Context::from_messages(m)
}

#[test]
fn the_trigger_reads_the_reported_prompt_tokens_at_half_the_window() {
    let s = GeminiCli::new(Params::default()).unwrap();
    let ctx = turns(4, 700);
    // The last call was sent without its own answer: the reported tokens stop before it.
    let reported = s.reported_tokens(&ctx);
    assert_eq!(reported, ctx.tokens(&Exact::o200k()) - ctx.range_tokens(ctx.len() - 1..ctx.len(), &Exact::o200k()));
    assert!(s.compression_due(&ctx, &Budget::new(reported * 2)));
    assert!(!s.compression_due(&ctx, &Budget::new(reported * 2 + 2)));
    assert_eq!(s.threshold(&ctx, &Budget::new(1_000)), Some(499));
    assert_eq!(s.threshold(&ctx, &Budget::new(1_001)), Some(500));
    assert!(!s.reacts_to(Trigger::Overflow) && !s.reacts_to(Trigger::LengthStop));
}

#[test]
fn a_budgeted_output_becomes_a_note_naming_its_file() {
    let s = small();
    let ctx = turns(3, 2_000);
    let notes = s.budget_notes(&ctx, &Budget::new(100_000));
    // The newest output (about 500 estimated tokens) already passes the 100-token budget, so
    // every output is noted, oldest first.
    assert_eq!(notes.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![3, 7, 11]);
    let (_, note) = &notes[0];
    assert!(
        note.starts_with("Output too large. Showing first 40 and last 160 characters. For full output see: tool-outputs/read_file_c0.txt\nline 0\n"),
        "{note}"
    );
    let omitted = ctx.entries()[3].message().content.chars().count() - 200;
    assert!(note.contains(&format!("... [{} characters omitted] ...", grouped(omitted))), "{note}");
    assert!(note.ends_with(&ctx.entries()[3].message().content[ctx.entries()[3].message().content.len() - 160..]));
    // A note keeps at most 4 x the window's unused tokens: none left, nothing of the output.
    let reported = s.reported_tokens(&ctx);
    assert_eq!(s.note_chars(&ctx, &Budget::new(reported + 10)), 40);
    // An output within the note's length is kept whole, though past the budget.
    assert_eq!(budget_note("short", "f", 200), None);
    assert_eq!(grouped(1_234_567), "1,234,567");
    assert_eq!(gemini_tokens("abcd"), 1);
    assert_eq!(gemini_tokens("ééé"), 3);
}

#[test]
fn the_split_keeps_the_newest_30_percent_and_falls_before_a_user_message() {
    let s = small();
    let ctx = turns(10, 700);
    let split = s.split_point(&ctx, &[]);
    assert_eq!(ctx.entries()[split].role(), Role::User);
    // About 70% of ten equal turns is summarized: the split is at turn 7's user message.
    assert_eq!(split, 1 + 7 * 4);
    // No user message past the target and a last call in flight: the last possible split.
    let mut m = ctx.to_messages();
    m.push(Message::assistant_calls(
        "",
        vec![ToolCall { id: "x".into(), name: "read_file".into(), arguments: "{}".into() }],
    ));
    m.push(Message::tool_result("x", "read_file", "y".repeat(20_000)));
    let late = Context::from_messages(m);
    assert_eq!(s.split_point(&late, &[]), 1 + 9 * 4);
    // The last entry an answer without calls: everything may go.
    let mut m = late.to_messages();
    m.push(Message::assistant("finished"));
    let whole = Context::from_messages(m);
    assert_eq!(s.split_point(&whole, &[]), whole.len());
}

/// A summarizer that answers the snapshot and its verification with fixed texts, counting calls.
fn answers<'a>(
    calls: &'a mut Vec<(String, Option<String>)>,
    snapshot: &'a str,
    verified: &'a str,
) -> impl FnMut(&Context, &[SummaryRequest]) -> Summaries + 'a {
    move |_, requests| {
        Summaries::of(
            requests
                .iter()
                .map(|r| {
                    calls.push((r.prompt.name().to_string(), r.previous.clone()));
                    Ok(if r.prompt.name() == "gemini_snapshot" { snapshot.to_string() } else { verified.to_string() })
                })
                .collect(),
        )
    }
}

#[test]
fn a_compaction_asks_for_the_snapshot_then_its_verification() {
    let s = small();
    let ctx = turns(10, 700);
    let budget = Budget::new(s.reported_tokens(&ctx) + 100);
    assert!(s.should_compact(&ctx, &budget));
    let mut calls = Vec::new();
    let step = compact(
        &s,
        &ctx,
        &budget,
        Trigger::Proactive,
        answers(&mut calls, "<state_snapshot>A</state_snapshot>", " <state_snapshot>B</state_snapshot>\n"),
    )
    .unwrap();
    // Two summarizer requests: the snapshot, then the verification holding it.
    assert_eq!(
        calls,
        vec![
            ("gemini_snapshot".to_string(), None),
            ("gemini_verify".to_string(), Some("<state_snapshot>A</state_snapshot>".to_string()))
        ]
    );
    assert_eq!(step.plan.requests.len(), 1);
    assert_eq!(step.plan.requests[0].prompt.var("instructions"), None);
    let out = &step.compacted;
    assert_eq!(out.event.fallback, None);
    let shape: Vec<(Role, &str)> = out.context.messages().map(|m| (m.role, m.content.as_str())).collect();
    assert_eq!(shape[1], (Role::User, "<state_snapshot>B</state_snapshot>"));
    assert_eq!(shape[2], (Role::Assistant, ACKNOWLEDGEMENT));
    assert_eq!(shape[3], (Role::User, "turn 7"));
    assert_eq!(out.event.notes.get("verification").and_then(|v| v.as_str()), Some("answered"));
    assert!(!out.event.notes.contains_key(DRAFT));
    // The kept tail is the truncated one: its outputs past the budget are notes.
    assert!(out.context.messages().skip(3).any(|m| m.content.starts_with("Output too large.")));

    // An empty verification keeps the first snapshot.
    let mut calls = Vec::new();
    let step =
        compact(&s, &ctx, &budget, Trigger::Proactive, answers(&mut calls, "<state_snapshot>A</state_snapshot>", "  "))
            .unwrap();
    assert_eq!(step.compacted.context.get(1).unwrap().message().content, "<state_snapshot>A</state_snapshot>");
    // Both empty: a failed compression, the history stays and nothing is flagged.
    let mut calls = Vec::new();
    let step = compact(&s, &ctx, &budget, Trigger::Proactive, answers(&mut calls, "", "")).unwrap();
    assert_eq!(step.compacted.context.len(), ctx.len());
    assert!(step.compacted.event.fallback.is_some());
    assert!(!GeminiCli::compression_failed(&step.compacted.context));
    // A failed first call: no verification is asked.
    let mut asked = 0;
    let step = compact(&s, &ctx, &budget, Trigger::Proactive, |_, r| {
        asked += r.len();
        Summaries::of(r.iter().map(|_| Err(SummaryFailure { reason: "down".into() })).collect())
    })
    .unwrap();
    assert_eq!(asked, 1);
    assert_eq!(step.compacted.event.fallback.as_deref(), Some("unchanged: down"));

    // The next compaction finds the snapshot in its head and is told to integrate it.
    let mut longer = out.context.clone();
    for t in 0..8 {
        longer.push(Entry::recorded(100 + 2 * t, Message::user(format!("more {t}"))));
        longer.push(Entry::recorded(101 + 2 * t, Message::assistant("z ".repeat(200))));
    }
    let again = s.plan(&longer, &Budget::new(s.reported_tokens(&longer)), Trigger::Proactive).unwrap();
    assert!(again.requests[0].span.contains(&1));
    assert_eq!(again.requests[0].prompt.var("instructions"), Some(ANCHOR_INTEGRATE));
}

#[test]
fn a_compression_that_grows_the_context_is_rejected_and_later_turns_only_truncate() {
    let s = small();
    let ctx = turns(10, 700);
    let budget = Budget::new(s.reported_tokens(&ctx) + 100);
    let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
    assert_eq!(plan.step, "compress");
    let huge = format!("<state_snapshot>{}</state_snapshot>", "fact ".repeat(20_000));
    let out = s.apply(&ctx, &budget, &plan, &[Ok(huge)]);
    // Rejected: the same messages, the last one marked, the reason kept.
    assert_eq!(out.context.len(), ctx.len());
    assert!(out.context.messages().zip(ctx.messages()).all(|(a, b)| a.content == b.content));
    assert!(out.event.fallback.as_deref().unwrap().starts_with("inflated:"));
    assert!(out.event.summaries.is_empty());
    assert!(GeminiCli::compression_failed(&out.context));
    assert!(!GeminiCli::compression_failed(&ctx));

    // The next turn over the threshold truncates only: no summary request, notes in place.
    let mut next = out.context.clone();
    next.push(Entry::recorded(ctx.len(), Message::assistant("next")));
    next.push(Entry::recorded(ctx.len() + 1, Message::user("go on")));
    let budget = Budget::new(s.reported_tokens(&next));
    assert!(s.should_compact(&next, &budget));
    let plan = s.plan(&next, &budget, Trigger::Proactive).unwrap();
    assert_eq!(plan.step, "truncate_only");
    assert!(plan.requests.is_empty());
    let truncated = s.apply(&next, &budget, &plan, &[]);
    assert!(truncated.event.masked > 0);
    assert!(truncated.context.messages().any(|m| m.content.contains("For full output see: tool-outputs/")));
    assert!(truncated.context.tokens(&Exact::o200k()) < next.tokens(&Exact::o200k()));
    // The mark survives the truncation: later turns still truncate only.
    assert!(GeminiCli::compression_failed(&truncated.context));
    // Below the threshold nothing happens (no snapshot yet, so no masking either).
    assert!(!s.should_compact(&next, &Budget::new(10_000_000)));
}

#[test]
fn after_a_compaction_old_tool_outputs_are_masked_every_turn() {
    let s = small();
    // A snapshot, then turns with large outputs; well under the compression threshold.
    let mut ctx = Context::new();
    ctx.push(Entry::recorded(0, Message::system("sys")));
    ctx.push(Entry::new(
        Message::user("<state_snapshot>x</state_snapshot>"),
        Origin::Summary { round: 1, covers: vec![1] },
    ));
    ctx.push(Entry::new(Message::assistant(ACKNOWLEDGEMENT), Origin::Inserted { what: Inserted::Acknowledgement }));
    for (k, m) in turns(5, 1_400).to_messages().into_iter().skip(1).enumerate() {
        ctx.push(Entry::recorded(10 + k, m));
    }
    // An exempt tool's output, old and large, is never masked.
    ctx.push(Entry::recorded(
        40,
        Message::assistant_calls(
            "",
            vec![ToolCall { id: "s".into(), name: "ask_user".into(), arguments: "{}".into() }],
        ),
    ));
    ctx.push(Entry::recorded(41, Message::tool_result("s", "ask_user", "q".repeat(2_000))));
    ctx.push(Entry::recorded(42, Message::user("last")));
    let budget = Budget::new(10_000_000);
    assert!(!s.compression_due(&ctx, &budget));
    assert!(s.should_compact(&ctx, &budget));
    let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
    assert_eq!(plan.step, "mask");
    let out = s.apply(&ctx, &budget, &plan, &[]);
    let masked: Vec<&Message> =
        out.context.messages().filter(|m| m.content.starts_with("<tool_output_masked>")).collect();
    // Each output is about 350 tokens: the newest crosses the 100 protected and is masked with
    // every older one.
    assert_eq!(masked.len(), 5);
    assert!(masked[0].content.contains("Output too large. Full output available at: tool-outputs/read_file_c0.txt"));
    assert!(masked[0].content.contains("\n... [TRUNCATED] ...\n"));
    assert!(out.context.messages().any(|m| m.name.as_deref() == Some("ask_user") && m.content.len() == 2_000));
    // Masked outputs are not masked again.
    assert!(s.mask_list(&out.context).is_empty());
    // Without a compaction before, no masking.
    let fresh = turns(5, 1_400);
    assert!(!s.should_compact(&fresh, &budget));
    // Too little to gain: nothing.
    let strict = GeminiCli::new(Params { mask_min_prunable_tokens: 1_000_000, ..small().params }).unwrap();
    assert!(strict.mask_list(&ctx).is_empty());
    // A shell output keeps its first and last ten lines.
    let shell = Message::tool_result("b", "bash", (0..30).map(|i| format!("l{i}")).collect::<Vec<_>>().join("\n"));
    let snippet = masked_snippet(&shell);
    assert!(snippet.contains("l9\n\n... [10 lines omitted] ...\n\nl20"), "{snippet}");
}

#[test]
fn bad_parameters_are_refused() {
    for params in [
        Params { compression_threshold: 0.0, ..Params::default() },
        Params { preserve_fraction: 1.0, ..Params::default() },
        Params { summary_max_tokens: 0, ..Params::default() },
    ] {
        assert!(GeminiCli::new(params).is_err());
    }
}
