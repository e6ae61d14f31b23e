use super::*;
use compaction::context::Entry;
use compaction::message::ToolCall;
use compaction::SummaryFailure;
use compaction::{check_compaction, check_context};

fn body(label: &str, n: usize) -> String {
    format!("{label} {}", "x".repeat(n))
}

fn simple(label: &str) -> Vec<Message> {
    vec![Message::user(body(label, 400)), Message::assistant(body(label, 400))]
}

/// user, tool call, tool result, completion.
fn with_tool(label: &str, result: usize) -> Vec<Message> {
    let id = format!("call-{label}");
    vec![
        Message::user(body(label, 400)),
        Message::assistant_calls("", vec![ToolCall { id: id.clone(), name: "read".into(), arguments: "{}".into() }]),
        Message::tool_result(id, "read", body(label, result)),
        Message::assistant(body(label, 400)),
    ]
}

fn timeline(turns: Vec<Vec<Message>>) -> Context {
    let mut m = vec![Message::system("You are a research agent.")];
    m.extend(turns.into_iter().flatten());
    Context::from_messages(m)
}

fn strategy(keep: u64, ttl_turns: usize) -> CutPoint {
    CutPoint::new(Params { keep_recent_tokens: Some(keep), ttl_turns, ..Params::default() }).expect("valid params")
}

fn tokens(ctx: &Context, range: std::ops::Range<usize>) -> u64 {
    ctx.range_tokens(range, &CharsOver4Role4)
}

fn undocumented(s: &CutPoint, ctx: &Context, budget: &Budget, trigger: Trigger, out: &Compacted) -> Vec<String> {
    let promised = s.promises(ctx, budget).documented_deviations;
    check_compaction(s, ctx, budget, trigger, out)
        .into_iter()
        .filter(|v| !promised.contains(&v.kind()))
        .map(|v| v.to_string())
        .collect()
}

fn origins(ctx: &Context) -> Vec<Option<usize>> {
    ctx.entries().iter().map(|e| e.origin().verbatim_index()).collect()
}

#[test]
fn budget_threshold_is_ninety_percent_of_the_window() {
    let b = CutPointBudget::new(&Params::default(), &Budget::new(128_000));
    assert_eq!(b, CutPointBudget { max_tokens: 128_000, trigger_ratio: 0.9 });
    assert_eq!(b.threshold(), 115_200);
    let s = CutPoint::new(Params::default()).expect("defaults are valid");
    assert_eq!(s.budget(&Budget::new(128_000)), b);
    assert_eq!(s.threshold(&Context::new(), &Budget::new(128_000)), Some(115_200));
    // Rounded down.
    assert_eq!(CutPointBudget { max_tokens: 1_001, trigger_ratio: 0.9 }.threshold(), 900);
}

/// The document's first diagram: turns A..E, the summary covers A..C, D..E stay visible.
#[test]
fn summary_insertion_covers_a_to_c_and_keeps_d_e() {
    let ctx = timeline(["A", "B", "C", "D", "E"].map(simple).to_vec());
    let s = strategy(tokens(&ctx, 7..11), 0);
    let budget = Budget::new(100_000);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("forced compaction");
    assert_eq!(plan.step, "cut");
    assert_eq!(plan.requests.len(), 1);
    assert_eq!(plan.requests[0].prompt, progressive_prompt());
    assert_eq!(plan.requests[0].span, vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(plan.requests[0].max_tokens, 800);
    assert_eq!(plan.requests[0].previous, None);
    assert_eq!(plan.notes["cut_index"], 7);
    assert_eq!(plan.notes["covered_turn_ids"], json!(["turn-1", "turn-3", "turn-5"]));
    assert!(!plan.notes.contains_key("split_turn_id"));
    assert_eq!(plan.notes["path"], "su:turn-7.conv.range.summary");

    let out = s.apply(&ctx, &budget, &plan, &[Ok("A to C".into())]);
    assert_eq!(origins(&out.context), vec![Some(0), None, Some(7), Some(8), Some(9), Some(10)]);
    let summary = out.context.get(1).expect("summary");
    assert_eq!(summary.role(), Role::System);
    assert_eq!(summary.message().content, "A to C");
    assert_eq!(summary.origin(), &Origin::Summary { round: 1, covers: vec![1, 2, 3, 4, 5, 6] });
    assert_eq!(out.event.removed, 6);
    assert!(undocumented(&s, &ctx, &budget, Trigger::Overflow, &out).is_empty());
}

/// The document's second diagram: the cut lands inside turn C.
#[test]
fn split_turn_summarizes_the_prefix_of_c_separately() {
    let turns = vec![simple("A"), simple("B"), with_tool("C", 400), simple("D"), simple("E")];
    let ctx = timeline(turns);
    // 0 sys | A 1,2 | B 3,4 | C 5 user, 6 call, 7 result, 8 completion | D 9,10 | E 11,12
    let s = strategy(tokens(&ctx, 8..13) + 1, 0);
    let budget = Budget::new(100_000);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("forced compaction");
    assert_eq!(plan.step, "cut+split_turn");
    assert_eq!(plan.notes["cut_index"], 8);
    assert_eq!(plan.notes["split_turn_id"], "turn-5");
    assert_eq!(plan.notes["covered_turn_ids"], json!(["turn-1", "turn-3", "turn-5"]));
    assert_eq!(plan.requests.len(), 2);
    assert_eq!((&plan.requests[0].prompt, &plan.requests[0].span), (&progressive_prompt(), &vec![1, 2, 3, 4]));
    assert_eq!((&plan.requests[1].prompt, &plan.requests[1].span), (&split_turn_prefix_prompt(), &vec![5, 6, 7]));
    assert_eq!(plan.requests[1].max_tokens, 400);

    let out = s.apply(&ctx, &budget, &plan, &[Ok("A and B".into()), Ok("C began".into())]);
    // [SUMMARY(A..B + C-prefix)] [TURN C (tail)] [TURN D] [TURN E]
    assert_eq!(origins(&out.context), vec![Some(0), None, Some(8), Some(9), Some(10), Some(11), Some(12)]);
    let summary = out.context.get(1).expect("summary");
    assert_eq!(summary.message().content, "A and B\n\n---\n\n**Turn Context (split turn):**\n\nC began");
    assert_eq!(summary.origin(), &Origin::Summary { round: 1, covers: (1..=7).collect() });
    assert_eq!(out.event.summaries, vec![summary.message().content.clone()]);
    assert!(s.promises(&ctx, &budget).documented_deviations.contains(&ViolationKind::RoleAlternation));
    assert!(undocumented(&s, &ctx, &budget, Trigger::Overflow, &out).is_empty());
}

#[test]
fn no_compaction_under_the_limit() {
    let ctx = timeline(["A", "B", "C", "D", "E"].map(simple).to_vec());
    let s = CutPoint::new(Params::default()).expect("defaults");
    let est = s.estimate(&ctx);
    // Exactly 90%: not over.
    let budget = Budget::new(est * 10 / 9 + 1);
    assert!(s.threshold(&ctx, &budget).is_some_and(|t| t >= est));
    assert!(!s.should_compact(&ctx, &budget));
    assert!(s.plan(&ctx, &budget, Trigger::Proactive).is_none());
    let small = Budget::new(est);
    assert!(s.should_compact(&ctx, &small));
    assert!(s.plan(&ctx, &small, Trigger::Proactive).is_some());
}

#[test]
fn overflow_forces_compaction_regardless_of_the_threshold() {
    let ctx = timeline(["A", "B", "C", "D", "E"].map(simple).to_vec());
    let s = strategy(tokens(&ctx, 7..11), 0);
    let budget = Budget::new(1_000_000);
    assert!(!s.should_compact(&ctx, &budget));
    assert!(s.reacts_to(Trigger::Overflow));
    assert!(s.plan(&ctx, &budget, Trigger::Proactive).is_none());
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("forced");
    assert_eq!(plan.notes["forced"], true);
}

#[test]
fn compaction_after_an_existing_summary_replaces_it() {
    let ctx = timeline(["A", "B", "C", "D", "E"].map(simple).to_vec());
    let budget = Budget::new(100_000);
    let first = strategy(tokens(&ctx, 7..11), 0);
    let plan = first.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    let mut ctx2 = first.apply(&ctx, &budget, &plan, &[Ok("A to C".into())]).context;
    for (i, m) in ["F", "G"].into_iter().flat_map(simple).enumerate() {
        ctx2.push(Entry::recorded(11 + i, m));
    }
    // [sys, summary(A..C), D, D, E, E, F, F, G, G]: keep G only.
    let n = ctx2.len();
    let s = strategy(tokens(&ctx2, n - 2..n), 0);
    let plan = s.plan(&ctx2, &budget, Trigger::Overflow).expect("plan");
    assert_eq!(plan.requests.len(), 1);
    assert_eq!(plan.requests[0].span, vec![2, 3, 4, 5, 6, 7]);
    assert_eq!(plan.requests[0].previous.as_deref(), Some("A to C"));
    assert_eq!(plan.requests[0].round, 2);
    assert_eq!(plan.notes["covered_turn_ids"], json!(["turn-7", "turn-9", "turn-11"]));
    let out = s.apply(&ctx2, &budget, &plan, &[Ok("A to F".into())]);
    assert_eq!(out.context.summaries().count(), 1);
    assert_eq!(origins(&out.context), vec![Some(0), None, Some(13), Some(14)]);
    assert_eq!(out.context.get(1).map(|e| e.origin()), Some(&Origin::Summary { round: 2, covers: (1..=12).collect() }));
    assert!(undocumented(&s, &ctx2, &budget, Trigger::Overflow, &out).is_empty());
}

#[test]
fn split_turn_right_after_a_summary_reuses_the_previous_text() {
    let mut entries = vec![
        Entry::recorded(0, Message::system("sys")),
        Entry::new(Message::system("old summary"), Origin::Summary { round: 1, covers: vec![1, 2] }),
    ];
    for (i, m) in with_tool("C", 400).into_iter().enumerate() {
        entries.push(Entry::recorded(3 + i, m));
    }
    let ctx = Context::from_entries(entries);
    // 0 sys, 1 summary, 2 user, 3 call, 4 result, 5 completion: keep reaches the result.
    let s = strategy(tokens(&ctx, 5..6) + 1, 0);
    let budget = Budget::new(100_000);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    assert_eq!(plan.notes["main_summary"], "previous");
    assert_eq!(plan.requests.len(), 1);
    assert_eq!(plan.requests[0].prompt, split_turn_prefix_prompt());
    let out = s.apply(&ctx, &budget, &plan, &[Ok("looked at C".into())]);
    let summary = out.context.get(1).expect("summary");
    assert_eq!(summary.message().content, "old summary\n\n---\n\n**Turn Context (split turn):**\n\nlooked at C");
    assert_eq!(summary.origin(), &Origin::Summary { round: 2, covers: vec![1, 2, 3, 4, 5] });
    assert_eq!(out.context.len(), 3);
}

#[test]
fn digest_includes_hidden_blocks() {
    let turns = ["A", "B", "C", "D", "E"].map(|l| with_tool(l, 2_000)).to_vec();
    let ctx = timeline(turns);
    // Turn k (1-based) holds entries 4k-3..=4k; D starts at 13.
    let s = strategy(tokens(&ctx, 13..21), 2);
    let budget = Budget::new(100_000);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    assert_eq!(plan.step, "ttl+cut");
    assert_eq!(plan.notes["ttl_hidden"], 3);
    assert_eq!(plan.notes["cut_index"], 13);
    let digest = &plan.notes["compaction_digest"];
    assert_eq!(digest["blocks"], 12);
    assert_eq!(digest["tool_outputs"], json!({"read": 3}));
    let hidden = digest["hidden"].as_object().expect("hidden blocks by tool");
    assert_eq!(hidden.keys().collect::<Vec<_>>(), vec!["read"]);
    let read = hidden["read"].as_array().expect("hidden list");
    assert_eq!(read.iter().map(|h| h[0].as_u64()).collect::<Vec<_>>(), vec![Some(3), Some(7), Some(11)]);
    assert!(read.iter().all(|h| h[1].as_str().is_some_and(|t| t.starts_with("[read result hidden: "))));
    // A result hidden in an earlier round (already masked) is listed too.
    let mut entries: Vec<Entry> = ctx.entries().to_vec();
    let mut masked = entries[3].message().clone();
    masked.content = "[gone]".into();
    entries[3] = Entry::new(masked, Origin::Masked { index: 3 });
    let ctx = Context::from_entries(entries);
    let plan = strategy(tokens(&ctx, 13..21), 0).plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    assert_eq!(plan.notes["compaction_digest"]["hidden"], json!({"read": [[3, "[gone]"]]}));
}

#[test]
fn ttl_pruning_alone_when_it_brings_the_context_under() {
    let turns = ["A", "B", "C", "D", "E"].map(|l| with_tool(l, 4_000)).to_vec();
    let ctx = timeline(turns);
    let s = CutPoint::new(Params::default()).expect("defaults");
    let est = s.estimate(&ctx);
    // Over 90% before pruning, under it once A..C results are hidden.
    let budget = Budget::new(est * 10 / 9 - 10);
    assert!(s.should_compact(&ctx, &budget));
    let plan = s.plan(&ctx, &budget, Trigger::Proactive).expect("plan");
    assert_eq!(plan.step, "ttl");
    assert!(plan.requests.is_empty());
    let out = s.apply(&ctx, &budget, &plan, &[]);
    assert_eq!(out.event.masked, 3);
    assert_eq!(out.context.len(), ctx.len());
    assert!(out.event.shortfall.is_none());
    assert_eq!(out.context.get(3).map(|e| e.origin()), Some(&Origin::Masked { index: 3 }));
    assert!(check_context(&out.context).is_empty());
    assert!(undocumented(&s, &ctx, &budget, Trigger::Proactive, &out).is_empty());
}

#[test]
fn tool_boundary_preservation() {
    // The walk back stops on a tool result: the cut moves to the next candidate.
    let turns = vec![simple("A"), with_tool("B", 400), simple("C")];
    let ctx = timeline(turns);
    // 0 sys | A 1,2 | B 3 user, 4 call, 5 result, 6 completion | C 7,8
    let s = strategy(tokens(&ctx, 6..9) + 1, 0);
    let budget = Budget::new(100_000);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    assert_eq!(plan.notes["cut_index"], 6);
    let out = s.apply(&ctx, &budget, &plan, &[Ok("a".into()), Ok("b".into())]);
    assert!(check_context(&out.context).is_empty());
    assert!(out.context.entries().iter().all(|e| e.role() != Role::Tool));

    // Parallel calls: both results stay with their call.
    let mut m = vec![Message::system("sys"), Message::user(body("A", 400)), Message::assistant(body("A", 400))];
    m.push(Message::user(body("B", 400)));
    let calls = ["p", "q"].map(|id| ToolCall { id: id.into(), name: "grep".into(), arguments: "{}".into() });
    m.push(Message::assistant_calls("", calls.to_vec()));
    m.push(Message::tool_result("p", "grep", body("p", 400)));
    m.push(Message::tool_result("q", "grep", body("q", 400)));
    m.push(Message::assistant(body("B", 400)));
    let ctx = Context::from_messages(m);
    let s = strategy(tokens(&ctx, 5..8), 0);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    // The walk stops on result `p`; the next candidate is the completion, so the call and both
    // results go into the split-turn prefix together.
    assert_eq!(plan.notes["cut_index"], 7);
    assert_eq!(plan.requests[1].span, vec![3, 4, 5, 6]);
    let out = s.apply(&ctx, &budget, &plan, &[Ok("a".into()), Ok("b".into())]);
    assert!(check_context(&out.context).is_empty());

    // A user message between a call and its result: the guard moves the cut back to the call.
    let call = ToolCall { id: "c1".into(), name: "run".into(), arguments: "{}".into() };
    let m = vec![
        Message::system("sys"),
        Message::user(body("U1", 400)),
        Message::assistant_calls("", vec![call]),
        Message::user(body("U2", 400)),
        Message::tool_result("c1", "run", body("r", 400)),
        Message::assistant(body("done", 400)),
    ];
    let ctx = Context::from_messages(m);
    let s = strategy(tokens(&ctx, 3..6), 0);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    assert_eq!(plan.notes["cut_index"], 2);
    assert_eq!(plan.notes["main_summary"], "none");
    let out = s.apply(&ctx, &budget, &plan, &[Ok("U1 asked".into())]);
    assert!(check_context(&out.context).is_empty());
    assert_eq!(
        out.context.get(1).map(|e| e.message().content.as_str()),
        Some("No prior history.\n\n---\n\n**Turn Context (split turn):**\n\nU1 asked")
    );
}

#[test]
fn cache_points_after_render() {
    // Before: pre-tail at the end of A (round N-4), previous turn at the end of D, tail at E.
    let ctx = timeline(["A", "B", "C", "D", "E"].map(simple).to_vec());
    let s = strategy(tokens(&ctx, 7..11), 0);
    assert_eq!(s.cache_points(&ctx), CachePoints { previous_turn: Some(8), pre_tail: Some(2), tail: Some(10) });
    let budget = Budget::new(100_000);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    let out = s.apply(&ctx, &budget, &plan, &[Ok("A to C".into())]);
    // After: [SUMMARY(A..C)] [D] [E]: previous turn at the end of D, tail at E, no pre-tail.
    assert_eq!(s.cache_points(&out.context), CachePoints { previous_turn: Some(3), pre_tail: None, tail: Some(5) });

    // After a split-turn cut: C's tail is its own round.
    let ctx = timeline(vec![simple("A"), simple("B"), with_tool("C", 400), simple("D"), simple("E")]);
    let s = strategy(tokens(&ctx, 8..13) + 1, 0);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    let out = s.apply(&ctx, &budget, &plan, &[Ok("a".into()), Ok("b".into())]);
    assert_eq!(s.cache_points(&out.context), CachePoints { previous_turn: Some(4), pre_tail: None, tail: Some(6) });

    // One turn with six tool rounds and a final answer: 7 rounds, pre-tail on round N-4.
    let mut m = vec![Message::system("sys"), Message::user("fix the bug")];
    for k in 0..6 {
        let id = format!("t{k}");
        m.push(Message::assistant_calls(
            "",
            vec![ToolCall { id: id.clone(), name: "bash".into(), arguments: "{}".into() }],
        ));
        m.push(Message::tool_result(id, "bash", "ok"));
    }
    m.push(Message::assistant("fixed"));
    let ctx = Context::from_messages(m);
    // Rounds end at 3, 5, 7, 9, 11, 13, 14: N-4 is the third.
    assert_eq!(s.cache_points(&ctx), CachePoints { previous_turn: None, pre_tail: Some(7), tail: Some(14) });
}

#[test]
fn failed_summary_abandons_the_compaction_but_keeps_ttl_pruning() {
    let ctx = timeline(["A", "B", "C", "D", "E"].map(|l| with_tool(l, 2_000)).to_vec());
    let s = strategy(tokens(&ctx, 13..21), 2);
    let budget = Budget::new(100_000);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    let out = s.apply(&ctx, &budget, &plan, &[Err(SummaryFailure { reason: "rate limited".into() })]);
    assert_eq!(out.event.fallback.as_deref(), Some("summary failed, compaction abandoned: rate limited"));
    assert_eq!(out.context.len(), ctx.len());
    assert_eq!(out.event.masked, 3);
    assert_eq!(out.context.summaries().count(), 0);
    // An empty summary is a failure too.
    let out = s.apply(&ctx, &budget, &plan, &[Ok("  ".into())]);
    assert!(out.event.fallback.as_deref().is_some_and(|f| f.ends_with("empty summary")));
    // Without TTL pruning, the context is unchanged.
    let s = strategy(tokens(&ctx, 13..21), 0);
    let plan = s.plan(&ctx, &budget, Trigger::Overflow).expect("plan");
    let out = s.apply(&ctx, &budget, &plan, &[]);
    assert!(out.event.is_noop());
    assert!(out.event.fallback.is_some());
}

#[test]
fn default_keep_recent_tokens_is_70_percent_of_the_window_after_the_system_prompt() {
    let ctx = timeline(vec![simple("A")]);
    let s = CutPoint::new(Params::default()).expect("defaults");
    let system = tokens(&ctx, 0..1);
    assert_eq!(s.keep_recent_tokens(&ctx, &Budget::new(10_000)), ((10_000 - system) as f64 * 0.7) as u64);
}

#[test]
fn params_have_documented_defaults_and_are_checked() {
    let p: Params = serde_json::from_str("{}").expect("empty params");
    assert_eq!(p, Params::default());
    assert_eq!((p.trigger_ratio, p.summary_max_tokens, p.split_turn_max_tokens), (0.9, 800, 400));
    assert_eq!((p.cache_offset_rounds, p.cache_min_rounds, p.ttl_turns), (4, 2, 2));
    assert!(serde_json::from_str::<Params>(r#"{"keep": 3}"#).is_err());
    let err = CutPoint::new(Params { trigger_ratio: 0.0, ..Params::default() }).expect_err("out of range");
    assert_eq!(err.param, "trigger_ratio");
    let err = CutPoint::new(Params { keep_recent_tokens: Some(0), ..Params::default() }).expect_err("zero");
    assert_eq!(err.param, "keep_recent_tokens");
}

// ---- the rewrite for speed against the implementation before it ----

use crate::priority_chain::tests::{arb_context, entries_of};
use proptest::prelude::{prop, prop_assert_eq, proptest, ProptestConfig};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every plan, its cache points and its promises, and the plan applied with summaries,
    /// blank ones and failed ones, are those of the implementation before the rewrite; so
    /// is the guard, with or without the whole list of pairs.
    #[test]
    fn fast_paths_make_the_plans_of_the_straightforward_ones(
        ctx in arb_context(),
        ttl in 0usize..3,
        keep in prop::option::of(prop::sample::select(vec![1u64, 40, 300])),
        ratio in prop::sample::select(vec![0.2f64, 0.6, 0.95, 1.05, 1.3, 3.0]),
        at in 0usize..100,
    ) {
        let params = Params { ttl_turns: ttl, keep_recent_tokens: keep, ..Params::default() };
        let (s, old) = (CutPoint::new(params.clone()).expect("valid"), legacy::Legacy::new(params));
        let start = at.min(ctx.len()) / 2;
        let cut = at.min(ctx.len());
        prop_assert_eq!(guard_cut(&ctx, start, cut), guard_cut_with_pairs(&legacy::tool_pairs_of(&ctx), start, cut));
        let window = ((ctx.units(&CharsOver4Role4).div_ceil(4) as f64 * ratio) as u64).max(1);
        let budget = Budget::new(window);
        prop_assert_eq!(s.cache_points(&ctx), old.cache_points(&ctx));
        for trigger in [Trigger::Proactive, Trigger::Overflow] {
            let plan = s.plan(&ctx, &budget, trigger);
            prop_assert_eq!(&plan, &old.plan(&ctx, &budget, trigger));
            let Some(plan) = plan else { continue };
            let ok: Vec<SummaryOutcome> = plan.requests.iter().map(|_| Ok("- s".to_string())).collect();
            let blank: Vec<SummaryOutcome> = plan.requests.iter().map(|_| Ok(" ".to_string())).collect();
            let failed = vec![Err(SummaryFailure { reason: "x".into() })];
            for summaries in [ok, blank, failed] {
                let (new, was) = (s.apply(&ctx, &budget, &plan, &summaries), old.apply(&ctx, &budget, &plan, &summaries));
                prop_assert_eq!(entries_of(&new.context), entries_of(&was.context));
                prop_assert_eq!(new.event, was.event);
            }
        }
    }

    /// TTL masks are measured on a message holding only the result's role, text and calls:
    /// the estimator reads nothing else of a message.
    #[test]
    fn the_estimator_reads_role_text_and_calls_only(
        role in prop::sample::select(vec![Role::System, Role::User, Role::Assistant, Role::Tool]),
        content in ".{0,40}",
        calls in prop::collection::vec(("[a-z]{0,6}", "[a-z{}\":]{0,12}"), 0..3),
        id in prop::option::of("[a-z0-9]{0,8}"),
        name in prop::option::of("[a-z]{0,8}"),
        stage in prop::option::of("[a-z]{0,4}"),
        error in prop::bool::ANY,
    ) {
        let calls: Vec<ToolCall> =
            calls.into_iter().map(|(name, arguments)| ToolCall { id: "i".into(), name, arguments }).collect();
        let mut full = Message::new(role, content.clone());
        full.tool_calls = calls.clone();
        full.tool_call_id = id;
        full.name = name;
        full.stage = stage;
        full.is_error = error;
        full.finish_reason = Some("stop".into());
        full = full.with_meta("k", json!(1));
        let mut bare = Message::new(role, content);
        bare.tool_calls = calls;
        prop_assert_eq!(CharsOver4Role4.message_units(&full), CharsOver4Role4.message_units(&bare));
    }
}
