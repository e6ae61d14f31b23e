//! Unit tests of the core: the invariant checker, context caching, and the token meters.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use compaction::tokens::{
    js_ceil4, js_len, js_stringify_result_len, BpeRole4, CacheSlot, CharsOver4, CharsOver4Plus2, CharsOver4Role4,
    LenOver4Plus4, EXACT_CALL_OVERHEAD, EXACT_MESSAGE_OVERHEAD,
};
use compaction::{
    check_compaction, check_context, Budget, Compacted, CompactionEvent, Context, Encoding, Entry, Exact, Inserted,
    Message, Origin, Plan, Promises, Role, Slot, Strategy, SummaryRequest, TokenCounter, ToolCall, Trigger, Violation,
    ViolationKind,
};
use proptest::prelude::*;
use testkit::builder::{Call, ContextBuilder};

// ---------------------------------------------------------------------------------------------
// A strategy that only answers what the checker asks.

struct Fake {
    threshold: Option<u64>,
    promises: Promises,
    estimator: CharsOver4,
}

impl Fake {
    fn new() -> Fake {
        Fake {
            threshold: None,
            promises: Promises { keeps_system_prompt: true, recent_window: 0, documented_deviations: Vec::new() },
            estimator: CharsOver4,
        }
    }
    fn threshold(mut self, t: u64) -> Fake {
        self.threshold = Some(t);
        self
    }
    fn window(mut self, n: usize) -> Fake {
        self.promises.recent_window = n;
        self
    }
}

impl Strategy for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.estimator
    }
    fn threshold(&self, _ctx: &Context, _budget: &Budget) -> Option<u64> {
        self.threshold
    }
    fn plan(&self, _ctx: &Context, _budget: &Budget, _trigger: Trigger) -> Option<Plan> {
        None
    }
    fn promises(&self, _ctx: &Context, _budget: &Budget) -> Promises {
        self.promises.clone()
    }
}

/// A compaction of `before` into `after`, as an event would report it.
fn outcome(before: &Context, after: Context, trigger: Trigger) -> Compacted {
    let kept: BTreeSet<usize> = after
        .entries()
        .iter()
        .filter_map(|e| match e.origin() {
            Origin::Recorded { index } | Origin::Masked { index } => Some(*index),
            _ => None,
        })
        .collect();
    let removed =
        before.entries().iter().filter(|e| e.origin().verbatim_index().is_some_and(|i| !kept.contains(&i))).count();
    let masked = after.entries().iter().filter(|e| matches!(e.origin(), Origin::Masked { .. })).count();
    let summaries: Vec<String> =
        after.entries().iter().filter(|e| e.origin().is_summary()).map(|e| e.message().content.clone()).collect();
    let event = CompactionEvent {
        strategy: "fake".into(),
        trigger,
        step: "test".into(),
        estimate_before: before.tokens(&CharsOver4),
        estimate_after: after.tokens(&CharsOver4),
        messages_before: before.len(),
        messages_after: after.len(),
        removed,
        masked,
        summaries,
        round: None,
        fallback: None,
        shortfall: None,
        notes: Default::default(),
    };
    Compacted { context: after, event }
}

/// Entries `picks` of `ctx`, unchanged.
fn pick(ctx: &Context, picks: &[usize]) -> Context {
    Context::from_entries(picks.iter().map(|&i| ctx.entries()[i].clone()).collect())
}

/// 0 system, 1 user, 2 assistant calling c1, 3 result c1, 4 assistant, 5 user, 6 assistant.
/// Contents are 4 characters each (one chars/4 token), the system prompt 8.
fn base() -> Context {
    ContextBuilder::new()
        .system("sys-sys-")
        .user("ask1")
        .calls("", vec![Call::ok("read", "", "file").with_id("c1")])
        .assistant("ans1")
        .user("ask2")
        .assistant("ans2")
        .build()
}

fn check(s: &Fake, before: &Context, after: Context, trigger: Trigger) -> Vec<Violation> {
    check_compaction(s, before, &Budget::new(1_000), trigger, &outcome(before, after, trigger))
}

// ---------------------------------------------------------------------------------------------
// Every violation, triggered by a hand-built before/after pair, with its data.

#[test]
fn orphan_tool_result_names_index_and_call() {
    let before = base();
    let v = check(&Fake::new(), &before, pick(&before, &[0, 1, 3, 4, 5, 6]), Trigger::Overflow);
    // Without its call, the result (a user turn) also follows the user message directly.
    assert_eq!(
        v,
        vec![Violation::OrphanToolResult { index: 2, call_id: "c1".into() }, Violation::RoleAlternation { index: 2 }]
    );
    assert_eq!(v[0].kind(), ViolationKind::OrphanToolResult);
    assert_eq!(v[0].to_string(), "message 2: tool result for \"c1\" has no call before it");
    let json = serde_json::to_value(&v[0]).expect("serializes");
    assert_eq!(json, serde_json::json!({"kind": "orphan_tool_result", "index": 2, "call_id": "c1"}));
}

#[test]
fn unanswered_tool_call_names_index_and_call() {
    let before = base();
    let v = check(&Fake::new(), &before, pick(&before, &[0, 1, 2, 4, 5, 6]), Trigger::Overflow);
    assert!(v.contains(&Violation::UnansweredToolCall { index: 2, call_id: "c1".into() }), "{v:?}");
    // Dropping the result also puts two assistant messages side by side.
    assert!(v.contains(&Violation::RoleAlternation { index: 3 }), "{v:?}");
    assert_eq!(v.len(), 2, "{v:?}");
}

#[test]
fn system_prompt_removed_or_changed() {
    let before = base();
    let s = Fake::new();
    assert_eq!(
        check(&s, &before, pick(&before, &[1, 2, 3, 4, 5, 6]), Trigger::Overflow),
        vec![Violation::SystemPromptChanged]
    );
    let mut entries: Vec<Entry> = before.entries().to_vec();
    entries[0] = Entry::recorded(0, Message::system("sys-sys-!"));
    assert_eq!(
        check(&s, &before, Context::from_entries(entries), Trigger::Overflow),
        vec![Violation::SystemPromptChanged]
    );
    // A strategy that does not promise it is not held to it.
    let mut free = Fake::new();
    free.promises.keeps_system_prompt = false;
    assert!(check(&free, &before, pick(&before, &[1, 2, 3, 4, 5, 6]), Trigger::Overflow).is_empty());
}

#[test]
fn a_system_message_the_strategy_inserted_is_not_the_system_prompt() {
    // No recorded system prompt; a stage digest from an earlier round sits at position 0.
    let before = ContextBuilder::new()
        .inserted(Message::system("digest v1"), Inserted::StageDigest)
        .user("ask1")
        .assistant("ans1")
        .build();
    let after = ContextBuilder::new()
        .inserted(Message::system("digest v2"), Inserted::StageDigest)
        .user("ask1")
        .assistant("ans1")
        .build();
    assert!(check(&Fake::new(), &before, after, Trigger::Overflow).is_empty());
}

#[test]
fn out_of_order_names_the_position() {
    let before = base();
    let v = check(&Fake::new(), &before, pick(&before, &[0, 1, 2, 3, 5, 4, 6]), Trigger::Overflow);
    assert!(v.contains(&Violation::OutOfOrder { index: 5 }), "{v:?}");
    assert!(v.iter().all(|x| matches!(x, Violation::OutOfOrder { .. } | Violation::RoleAlternation { .. })), "{v:?}");
}

#[test]
fn recent_window_not_verbatim_reports_window_and_kept() {
    let before = base();
    let s = Fake::new().window(3);
    // The third-to-last entry (4, an assistant message) is masked: only the last 2 are verbatim.
    let mut entries: Vec<Entry> = before.entries().to_vec();
    entries[4] = Entry::new(Message::assistant("[masked]"), Origin::Masked { index: 4 });
    let v = check(&s, &before, Context::from_entries(entries), Trigger::Overflow);
    assert_eq!(v, vec![Violation::RecentWindowNotVerbatim { window: 3, kept: 2 }]);
    assert_eq!(v[0].to_string(), "recent window of 3 messages not verbatim (only the last 2 are)");
    // Same text but another origin is not verbatim either.
    let mut entries: Vec<Entry> = before.entries().to_vec();
    entries[6] = Entry::new(Message::assistant("ans2"), Origin::Inserted { what: Inserted::Other });
    let v = check(&s, &before, Context::from_entries(entries), Trigger::Overflow);
    assert_eq!(v, vec![Violation::RecentWindowNotVerbatim { window: 3, kept: 0 }]);
    // A window larger than the context is capped at its length.
    let v = check(&Fake::new().window(99), &before, before.clone(), Trigger::Overflow);
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn compacted_below_threshold_reports_estimate_and_threshold() {
    let before = base();
    // chars/4 over the whole context: 8 + 4*5 (ask1, file, ans1, ask2, ans2) + 0 = 28 chars = 7 tokens.
    assert_eq!(before.tokens(&CharsOver4), 7);
    let s = Fake::new().threshold(7);
    let after = pick(&before, &[0, 5, 6]);
    let v = check(&s, &before, after.clone(), Trigger::Proactive);
    assert_eq!(v, vec![Violation::CompactedBelowThreshold { estimate: 7, threshold: 7 }]);
    // Forced compaction may run below the threshold; so may a proactive no-op.
    assert!(check(&s, &before, after, Trigger::Overflow).is_empty());
    assert!(check(&s, &before, before.clone(), Trigger::Proactive).is_empty());
    // Above the threshold it is the strategy's job.
    assert!(check(&Fake::new().threshold(6), &before, pick(&before, &[0, 5, 6]), Trigger::Proactive).is_empty());
}

#[test]
fn multiple_summaries_reports_the_count() {
    let before = base();
    let mut entries = vec![before.entries()[0].clone()];
    entries.push(Entry::new(Message::user("s1"), Origin::Summary { round: 1, covers: vec![1, 2, 3] }));
    entries.push(Entry::new(Message::assistant("s2"), Origin::Summary { round: 2, covers: vec![4] }));
    entries.extend(before.entries()[5..].iter().cloned());
    let v = check(&Fake::new(), &before, Context::from_entries(entries), Trigger::Overflow);
    assert_eq!(v, vec![Violation::MultipleSummaries { count: 2 }]);
    assert_eq!(v[0].to_string(), "2 live summaries");
}

#[test]
fn role_alternation_inside_and_at_the_start() {
    let before = base();
    // user ask1, then user ask2: adjacent user turns that were not adjacent before.
    let v = check(&Fake::new(), &before, pick(&before, &[0, 1, 5, 6]), Trigger::Overflow);
    assert_eq!(v, vec![Violation::RoleAlternation { index: 2 }]);
    // The first message after the system prompt was a user turn and is now an assistant.
    let v = check(&Fake::new(), &before, pick(&before, &[0, 4, 5, 6]), Trigger::Overflow);
    assert_eq!(v, vec![Violation::RoleAlternation { index: 1 }]);
}

#[test]
fn role_alternation_allows_parallel_results_and_pairs_adjacent_before() {
    let before = ContextBuilder::new()
        .system("s")
        .user("u")
        .parallel(vec![Call::ok("a", "", "1"), Call::ok("b", "", "2")])
        .user("again")
        .assistant("done")
        .build();
    // Unchanged: the tool result followed by a user message was adjacent before.
    assert!(check(&Fake::new(), &before, before.clone(), Trigger::Overflow).is_empty());
    // Masking the results keeps them adjacent to what followed them.
    let mut entries: Vec<Entry> = before.entries().to_vec();
    for i in [3, 4] {
        let mut m = entries[i].message().clone();
        m.content = "[cleared]".into();
        entries[i] = Entry::new(m, Origin::Masked { index: i });
    }
    let masked = Context::from_entries(entries);
    assert!(check(&Fake::new(), &before, masked.clone(), Trigger::Overflow).is_empty());
    // And a context that already had masked entries compacts to itself without breaks.
    assert!(check(&Fake::new(), &masked, masked.clone(), Trigger::Overflow).is_empty());
}

#[test]
fn over_budget_unreported_unless_shortfall_or_fallback() {
    let before = base();
    let s = Fake::new().threshold(2);
    let after = pick(&before, &[0, 5, 6]);
    // 8 + 4 + 4 chars = 4 tokens > 2.
    let v = check(&s, &before, after.clone(), Trigger::Overflow);
    assert_eq!(v, vec![Violation::OverBudgetUnreported { estimate: 4, threshold: 2 }]);
    let budget = Budget::new(1_000);
    let mut out = outcome(&before, after.clone(), Trigger::Overflow);
    out.event.shortfall = Some(2);
    assert!(check_compaction(&s, &before, &budget, Trigger::Overflow, &out).is_empty());
    let mut out = outcome(&before, after, Trigger::Overflow);
    out.event.fallback = Some("unchanged: summary failed".into());
    assert!(check_compaction(&s, &before, &budget, Trigger::Overflow, &out).is_empty());
}

#[test]
fn structural_problems_already_there_before_are_not_blamed_on_compaction() {
    // The recording itself has an orphan result; keeping it is not a violation.
    let before = ContextBuilder::new().system("s").user("u").message(Message::tool_result("zz", "t", "x")).build();
    assert_eq!(check_context(&before), vec![Violation::OrphanToolResult { index: 2, call_id: "zz".into() }]);
    assert!(check(&Fake::new(), &before, before.clone(), Trigger::Overflow).is_empty());
}

#[test]
fn a_new_orphan_is_reported_even_when_the_recording_had_one() {
    // 0 system, 1 user, 2 orphan result zz (recorded so), 3 user, 4 assistant calling c1,
    // 5 result c1, 6 assistant.
    let before = ContextBuilder::new()
        .system("s")
        .user("u")
        .message(Message::tool_result("zz", "t", "x"))
        .user("ask")
        .calls("", vec![Call::ok("read", "", "file").with_id("c1")])
        .assistant("done")
        .build();
    assert_eq!(check_context(&before), vec![Violation::OrphanToolResult { index: 2, call_id: "zz".into() }]);
    // Dropping the call of c1 orphans its result: a new orphan of the same kind, reported.
    let v = check(&Fake::new(), &before, pick(&before, &[0, 1, 2, 3, 5, 6]), Trigger::Overflow);
    assert!(v.contains(&Violation::OrphanToolResult { index: 4, call_id: "c1".into() }), "{v:?}");
    assert!(!v.iter().any(|x| matches!(x, Violation::OrphanToolResult { call_id, .. } if call_id == "zz")), "{v:?}");
    // The old orphan moved (message 1 dropped) but is the same recorded message: not reported.
    let moved = check(&Fake::new(), &before, pick(&before, &[0, 2, 3, 4, 5, 6]), Trigger::Overflow);
    assert!(!moved.iter().any(|x| x.kind() == ViolationKind::OrphanToolResult), "{moved:?}");
    // A call left unanswered by compaction is new too, whatever the recording had.
    let unanswered = check(&Fake::new(), &before, pick(&before, &[0, 1, 2, 3, 4, 6]), Trigger::Overflow);
    assert!(unanswered.contains(&Violation::UnansweredToolCall { index: 4, call_id: "c1".into() }), "{unanswered:?}");
}

#[test]
fn every_violation_kind_can_be_triggered() {
    let before = base();
    let mut seen = BTreeSet::new();
    let mut note = |v: Vec<Violation>| seen.extend(v.iter().map(Violation::kind));
    note(check(&Fake::new(), &before, pick(&before, &[0, 1, 3, 4, 5, 6]), Trigger::Overflow));
    note(check(&Fake::new(), &before, pick(&before, &[0, 1, 2, 4, 5, 6]), Trigger::Overflow));
    note(check(&Fake::new(), &before, pick(&before, &[1, 2, 3, 4, 5, 6]), Trigger::Overflow));
    note(check(&Fake::new(), &before, pick(&before, &[0, 1, 2, 3, 5, 4, 6]), Trigger::Overflow));
    note(check(&Fake::new().window(2), &before, pick(&before, &[0, 1, 2, 3, 4, 5]), Trigger::Overflow));
    note(check(&Fake::new().threshold(100), &before, pick(&before, &[0, 5, 6]), Trigger::Proactive));
    note(check(&Fake::new().threshold(1), &before, pick(&before, &[0, 5, 6]), Trigger::Overflow));
    let two = Context::from_entries(vec![
        Entry::new(Message::user("a"), Origin::Summary { round: 1, covers: vec![0] }),
        Entry::new(Message::assistant("b"), Origin::Summary { round: 2, covers: vec![1] }),
    ]);
    note(check(&Fake::new(), &before, two, Trigger::Overflow));
    let all: BTreeSet<ViolationKind> = ViolationKind::ALL.into_iter().collect();
    assert_eq!(seen, all);
    // Names are distinct and snake_case.
    let names: BTreeSet<&str> = ViolationKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(names.len(), ViolationKind::ALL.len());
    for k in ViolationKind::ALL {
        assert_eq!(serde_json::to_value(k).expect("serializes"), serde_json::json!(k.as_str()));
    }
}

// ---------------------------------------------------------------------------------------------
// check_context on its own.

fn calls(ids: &[&str]) -> Message {
    let calls =
        ids.iter().map(|id| ToolCall { id: id.to_string(), name: "t".into(), arguments: "{}".into() }).collect();
    Message::assistant_calls("", calls)
}

fn result(id: &str) -> Message {
    Message::tool_result(id, "t", "ok")
}

#[test]
fn reused_call_ids_pair_by_position() {
    let ok = Context::from_messages([
        Message::user("u"),
        calls(&["x"]),
        result("x"),
        calls(&["x"]),
        result("x"),
        Message::assistant("done"),
    ]);
    assert!(check_context(&ok).is_empty(), "{:?}", check_context(&ok));
    // The second call with a reused id has no result: it is that one that is unanswered.
    let second_missing = Context::from_messages([
        Message::user("u"),
        calls(&["x"]),
        result("x"),
        calls(&["x"]),
        Message::user("more"),
        Message::assistant("done"),
    ]);
    assert_eq!(check_context(&second_missing), vec![Violation::UnansweredToolCall { index: 3, call_id: "x".into() }]);
    // A result pairs with the most recent open call of its id.
    let two_open = Context::from_messages([
        Message::user("u"),
        calls(&["x"]),
        calls(&["x"]),
        result("x"),
        Message::user("more"),
        Message::assistant("done"),
    ]);
    assert_eq!(check_context(&two_open), vec![Violation::UnansweredToolCall { index: 1, call_id: "x".into() }]);
    // A result before its call is an orphan; the call after it is answered by the next result.
    let early = Context::from_messages([
        Message::user("u"),
        result("x"),
        calls(&["x"]),
        result("x"),
        Message::assistant("done"),
    ]);
    assert_eq!(check_context(&early), vec![Violation::OrphanToolResult { index: 1, call_id: "x".into() }]);
    // One result cannot answer two calls.
    let extra = Context::from_messages([Message::user("u"), calls(&["x"]), result("x"), result("x")]);
    assert_eq!(check_context(&extra), vec![Violation::OrphanToolResult { index: 3, call_id: "x".into() }]);
}

#[test]
fn a_call_in_flight_at_the_end_is_allowed() {
    let in_flight = Context::from_messages([Message::user("u"), calls(&["a"])]);
    assert!(check_context(&in_flight).is_empty());
    // Parallel calls partly answered are still in flight.
    let partial = Context::from_messages([Message::user("u"), calls(&["a", "b"]), result("a")]);
    assert!(check_context(&partial).is_empty());
    // Not at the end: a user message follows.
    let stale = Context::from_messages([Message::user("u"), calls(&["a"]), Message::user("hello?")]);
    assert_eq!(check_context(&stale), vec![Violation::UnansweredToolCall { index: 1, call_id: "a".into() }]);
    // Not the last assistant message.
    let earlier =
        Context::from_messages([Message::user("u"), calls(&["a"]), Message::assistant("gave up"), calls(&["b"])]);
    assert_eq!(check_context(&earlier), vec![Violation::UnansweredToolCall { index: 1, call_id: "a".into() }]);
}

#[test]
fn unanswered_calls_are_reported_in_context_order() {
    let ctx = Context::from_messages([
        Message::user("u"),
        calls(&["z"]),
        Message::user("u2"),
        calls(&["a"]),
        Message::user("u3"),
        Message::assistant("done"),
    ]);
    assert_eq!(
        check_context(&ctx),
        vec![
            Violation::UnansweredToolCall { index: 1, call_id: "z".into() },
            Violation::UnansweredToolCall { index: 3, call_id: "a".into() },
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Context caching.

/// Counts its calls. Measures exactly what [`CharsOver4`] measures, so it may share its cache
/// slot (the slots are a fixed set; a context metered by both stays consistent).
#[derive(Default)]
struct Counting {
    calls: AtomicUsize,
    slot: Option<CacheSlot>,
}

impl Counting {
    fn cached() -> Counting {
        Counting { calls: AtomicUsize::new(0), slot: Some(CacheSlot::Chars) }
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

impl TokenCounter for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn message_units(&self, m: &Message) -> u64 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        CharsOver4.message_units(m)
    }
    fn tokens_from_units(&self, units: u64) -> u64 {
        CharsOver4.tokens_from_units(units)
    }
    fn text_tokens(&self, text: &str) -> u64 {
        CharsOver4.text_tokens(text)
    }
    fn cache_slot(&self) -> Option<CacheSlot> {
        self.slot
    }
}

fn messages(n: usize, from: usize) -> Vec<Message> {
    (from..from + n).map(|i| Message::user(format!("message number {i} {}", "x".repeat(i % 7)))).collect()
}

/// Tokens recomputed from scratch, without any cache.
fn fresh(ctx: &Context) -> u64 {
    CharsOver4.messages_tokens(&ctx.to_messages())
}

#[test]
fn appending_k_messages_measures_only_those_k() {
    let c = Counting::cached();
    let mut ctx = Context::from_messages(messages(20, 0));
    assert_eq!(ctx.tokens(&c), fresh(&ctx));
    assert_eq!(c.calls(), 20);
    assert_eq!(ctx.tokens(&c), fresh(&ctx));
    assert_eq!(c.calls(), 20, "a second total is free");
    for (i, m) in messages(5, 20).into_iter().enumerate() {
        ctx.push(Entry::recorded(20 + i, m));
    }
    assert_eq!(ctx.tokens(&c), fresh(&ctx));
    assert_eq!(c.calls(), 25, "five new messages, five measurements");
    for (i, m) in messages(7, 25).into_iter().enumerate() {
        ctx.push_metered(Entry::recorded(25 + i, m), &[&c]);
    }
    assert_eq!(c.calls(), 32, "push_metered measures on push");
    assert_eq!(ctx.tokens(&c), fresh(&ctx));
    assert_eq!(ctx.units(&c), ctx.to_messages().iter().map(|m| js_len(&m.content)).sum::<u64>());
    assert_eq!(c.calls(), 32, "and the running total stays known");
}

/// A strategy with a counting estimator whose plan keeps, masks, summarizes and inserts.
struct Layout(Counting);

impl Strategy for Layout {
    fn name(&self) -> &'static str {
        "layout"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.0
    }
    fn threshold(&self, _ctx: &Context, _budget: &Budget) -> Option<u64> {
        Some(1)
    }
    fn plan(&self, ctx: &Context, _budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let mut layout = vec![
            Slot::Summary { request: 0, role: Role::System, prefix: "so far: ".into(), suffix: String::new() },
            Slot::insert(Message::assistant("Understood."), Inserted::Acknowledgement),
            Slot::Mask { index: 2, placeholder: "[hidden]".into() },
        ];
        layout.extend((3..ctx.len()).map(|index| Slot::Keep { index }));
        let mut plan = Plan::deterministic(trigger, "layout", layout);
        plan.requests =
            vec![SummaryRequest::new(vec![0, 1], compaction_strategies::cut_point::progressive_prompt(), 100, 1)];
        Some(plan)
    }
    fn promises(&self, _ctx: &Context, _budget: &Budget) -> Promises {
        Promises { keeps_system_prompt: false, recent_window: 0, documented_deviations: Vec::new() }
    }
}

/// `apply` measures the entries it makes, and only those, and its estimate is the new
/// context's.
#[test]
fn applying_a_layout_measures_only_the_new_entries() {
    let s = Layout(Counting::cached());
    let ctx = Context::from_messages(messages(12, 0));
    let budget = Budget::new(10);
    s.estimate(&ctx);
    assert_eq!(s.0.calls(), 12);
    let plan = s.plan(&ctx, &budget, Trigger::Proactive).unwrap();
    let out = s.apply(&ctx, &budget, &plan, &[Ok("twelve messages".into())]);
    assert_eq!(s.0.calls(), 15, "a summary, an insert and a mask measured, nothing else");
    assert_eq!(out.event.estimate_after, fresh(&out.context));
    assert_eq!(out.context.tokens(&s.0), fresh(&out.context));
    assert_eq!(s.0.calls(), 15);
    assert_eq!((out.event.removed, out.event.masked, out.context.len()), (2, 1, 12));
}

#[test]
fn clones_and_reused_entries_share_measurements() {
    let c = Counting::cached();
    let ctx = Context::from_messages(messages(10, 0));
    ctx.tokens(&c);
    assert_eq!(c.calls(), 10);
    let copy = ctx.clone();
    assert_eq!(copy.tokens(&c), fresh(&ctx));
    // A new context made of the same entries (as a compaction keeps them).
    let kept = Context::from_entries(ctx.entries()[4..].to_vec());
    assert_eq!(kept.tokens(&c), fresh(&kept));
    assert_eq!(kept.range_tokens(1..3, &c), CharsOver4.messages_tokens(&kept.to_messages()[1..3]));
    assert_eq!(c.calls(), 10);
    // Pushing an already measured entry onto a metered context needs no measurement.
    let mut grown = kept.clone();
    grown.push(ctx.entries()[0].clone());
    assert_eq!(grown.tokens(&c), fresh(&grown));
    assert_eq!(c.calls(), 10);
}

#[test]
fn a_counter_without_slot_is_recomputed_and_slots_do_not_mix() {
    let uncached = Counting::default();
    let ctx = Context::from_messages(messages(6, 0));
    ctx.tokens(&uncached);
    ctx.tokens(&uncached);
    assert_eq!(uncached.calls(), 12);
    // Another counter's totals are kept apart from this slot's.
    let exact = Exact::o200k();
    let mut ctx = ctx;
    let before = ctx.tokens(&exact);
    let c = Counting::cached();
    ctx.tokens(&c);
    ctx.push(Entry::recorded(6, Message::user("one more message")));
    assert_eq!(ctx.tokens(&exact), before + exact.message_tokens(&Message::user("one more message")));
    assert_eq!(ctx.tokens(&c), fresh(&ctx));
    assert_eq!(c.calls(), 7);
}

#[test]
fn totals_match_a_fresh_count_after_random_pushes() {
    let c = Counting::cached();
    let mut ctx = Context::new();
    let mut rng = testkit::text::SplitMix::new(7);
    for i in 0..200 {
        let m = Message::user(testkit::text::render(testkit::text::TextKind::Mixed, rng.below(30), i));
        match rng.below(3) {
            0 => ctx.push(Entry::recorded(i as usize, m)),
            1 => ctx.push_metered(Entry::recorded(i as usize, m), &[&c]),
            _ => {
                ctx.push(Entry::recorded(i as usize, m));
                assert_eq!(ctx.tokens(&c), fresh(&ctx), "after {i} pushes");
            }
        }
    }
    assert_eq!(ctx.tokens(&c), fresh(&ctx));
    assert_eq!(c.calls(), 200, "each message measured exactly once");
}

// ---------------------------------------------------------------------------------------------
// Token meters.

const SAMPLES: &[&str] = &[
    "",
    " ",
    "hello",
    "Hello, world! This is a sentence of ordinary English prose, with punctuation; and numbers: 12345.",
    "The quick brown fox jumps over the lazy dog.\n\nA second paragraph.\r\n\tIndented.",
    r#"{"name":"read_file","arguments":{"path":"src/main.rs","lines":[1,2,3]},"ok":true,"value":null}"#,
    "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{x:?}\");\n}\n",
    "def f(x):\n\treturn x ** 2  # square\n",
    "日本語のテキストと中文文本，还有한국어 문장。",
    "emoji 😀🚀👍🏽 family 👨‍👩‍👧 flag 🇯🇵 heart ❤️",
    "combining e\u{301} a\u{308} n\u{303} Z\u{351}\u{36b}\u{343} and hangul \u{1100}\u{1161}\u{11a8}",
    "<|endoftext|> is plain text here",
    "    lots     of     spaces          and\n\n\n\nnewlines   ",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "0123456789 3.14159 -42 1e10 0xDEADBEEF 2026-03-21T12:00:00Z",
    "https://example.com/path?query=value&other=1#anchor",
    "I'm can't won't they're we've you'll he'd",
];

fn reference(encoding: Encoding) -> &'static tiktoken_rs::CoreBPE {
    match encoding {
        Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
        Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
    }
}

#[test]
fn exact_matches_tiktoken_on_varied_text() {
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let exact = Exact::new(encoding);
        let bpe = reference(encoding);
        for text in SAMPLES {
            assert_eq!(exact.count(text), bpe.encode_ordinary(text).len() as u64, "{encoding:?} on {text:?}");
        }
        for kind in testkit::text::TextKind::ALL {
            let text = testkit::text::render(kind, 300, 11);
            assert_eq!(exact.count(&text), bpe.encode_ordinary(&text).len() as u64, "{encoding:?} on {kind:?}");
        }
        let big = testkit::text::huge(40 * 1024, 3);
        assert_eq!(exact.count(&big), bpe.encode_ordinary(&big).len() as u64, "{encoding:?} on a 40 KB output");
    }
    assert_eq!(Exact::o200k().count(""), 0);
}

#[test]
fn exact_message_units_add_the_chat_overhead() {
    let exact = Exact::o200k();
    let bpe = reference(Encoding::O200kBase);
    let n = |t: &str| bpe.encode_ordinary(t).len() as u64;
    let m = Message::assistant_calls(
        "Let me look.",
        vec![
            ToolCall { id: "1".into(), name: "read_file".into(), arguments: r#"{"path":"a.rs"}"#.into() },
            ToolCall { id: "2".into(), name: "grep".into(), arguments: r#"{"q":"fn"}"#.into() },
        ],
    );
    let expected = EXACT_MESSAGE_OVERHEAD
        + n("Let me look.")
        + 2 * EXACT_CALL_OVERHEAD
        + n("read_file")
        + n(r#"{"path":"a.rs"}"#)
        + n("grep")
        + n(r#"{"q":"fn"}"#);
    assert_eq!(exact.message_units(&m), expected);
    assert_eq!(exact.message_tokens(&Message::user("")), EXACT_MESSAGE_OVERHEAD);
    assert_eq!(exact.name(), "o200k_base");
    assert_eq!(Exact::cl100k().name(), "cl100k_base");
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/proptest-regressions/core.txt"
        )))),
        ..ProptestConfig::with_cases(256)
    })]

    #[test]
    fn exact_matches_tiktoken_on_arbitrary_strings(text in any::<String>()) {
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            prop_assert_eq!(Exact::new(encoding).count(&text), reference(encoding).encode_ordinary(&text).len() as u64);
        }
    }

    #[test]
    fn exact_matches_tiktoken_on_word_salad(words in prop::collection::vec(prop::sample::select(testkit::text::WORDS.to_vec()), 0..200), sep in "[ \n\t.,;:]{1,3}") {
        let text = words.join(&sep);
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            prop_assert_eq!(Exact::new(encoding).count(&text), reference(encoding).encode_ordinary(&text).len() as u64);
        }
    }
}

#[test]
fn character_lengths_follow_each_seeds_language() {
    // JavaScript's String.length counts UTF-16 code units; Go's len counts bytes.
    assert_eq!(js_len("日本"), 2);
    assert_eq!("日本".len(), 6);
    assert_eq!(js_len("😀"), 2);
    assert_eq!("😀".len(), 4);
    assert_eq!(js_len("e\u{301}"), 2);
    assert_eq!(js_len(""), 0);
    assert_eq!(js_ceil4("abcd"), 1);
    assert_eq!(js_ceil4("abcde"), 2);
    assert_eq!(js_ceil4("日本"), 1);
    // JSON.stringify of a tool result: quotes and escapes for a string, compact form for JSON.
    assert_eq!(js_stringify_result_len("日本"), 4);
    assert_eq!(js_stringify_result_len("a\"b\n"), 8);
    assert_eq!(js_stringify_result_len(r#"{"a": 1, "b": [1, 2]}"#), r#"{"a":1,"b":[1,2]}"#.len() as u64);
    assert_eq!(js_stringify_result_len(""), 2);
}

#[test]
fn chars_over_4_rounds_once_over_content_only() {
    let c = CharsOver4;
    assert_eq!(c.message_units(&Message::user("日本")), 2);
    assert_eq!(c.message_tokens(&Message::user("日本")), 1);
    assert_eq!(c.messages_tokens(&[Message::user("abc"), Message::user("de")]), 2);
    // Rounded once over the list: three 1-char messages are 1 token, not 3.
    let three = [Message::user("a"), Message::user("a"), Message::user("a")];
    assert_eq!(c.messages_tokens(&three), 1);
    assert_eq!(Context::from_messages(three.clone()).tokens(&c), 1);
    // Tool calls are not counted.
    let call = ToolCall { id: "1".into(), name: "read_file".into(), arguments: r#"{"path":"a.rs"}"#.into() };
    assert_eq!(c.message_units(&Message::assistant_calls("", vec![call])), 0);
    assert_eq!(c.text_tokens("😀😀😀"), 2);
}

#[test]
fn chars_over_4_plus_2_counts_calls_and_stringified_results() {
    let c = CharsOver4Plus2;
    assert_eq!(c.message_units(&Message::user("日本")), 3);
    assert_eq!(c.message_units(&Message::user("")), 2);
    assert_eq!(c.message_units(&Message::user("hello")), 4);
    // name "read_file" (9 chars -> 3) + arguments {"path":"a.rs"} (15 chars -> 4).
    let call = ToolCall { id: "1".into(), name: "read_file".into(), arguments: r#"{"path":"a.rs"}"#.into() };
    assert_eq!(c.message_units(&Message::assistant_calls("", vec![call])), 9);
    // "日本" stringifies to "\"日本\"" (4 UTF-16 units) -> 1; {"a": 1} to {"a":1} (7) -> 2.
    assert_eq!(c.message_units(&Message::tool_result("1", "t", "日本")), 3);
    assert_eq!(c.message_units(&Message::tool_result("1", "t", r#"{"a": 1}"#)), 4);
}

#[test]
fn len_over_4_plus_4_counts_bytes_with_integer_division() {
    let c = LenOver4Plus4;
    assert_eq!(c.message_units(&Message::user("日本")), 6 / 4 + 4);
    assert_eq!(c.message_units(&Message::user("😀😀")), 8 / 4 + 4);
    assert_eq!(c.message_units(&Message::user("abc")), 4);
    assert_eq!(c.message_units(&Message::user("")), 4);
    assert_eq!(c.text_tokens("日本日本"), 3);
    assert_eq!(c.text_tokens("abc"), 0);
}

#[test]
fn chars_over_4_role_4_counts_role_overhead_and_calls() {
    let c = CharsOver4Role4;
    assert_eq!(c.message_units(&Message::user("日本")), 5);
    assert_eq!(c.message_units(&Message::assistant("")), 4);
    assert_eq!(c.message_units(&Message::assistant("abcdefghi")), 4 + 3);
    let call = ToolCall { id: "1".into(), name: "read_file".into(), arguments: r#"{"path":"a.rs"}"#.into() };
    assert_eq!(c.message_units(&Message::assistant_calls("", vec![call])), 4 + 3 + 4);
}

#[test]
fn heuristics_disagree_on_cjk_as_documented() {
    // 40 CJK characters: 40 UTF-16 units, 120 bytes.
    let text = "日本".repeat(20);
    assert_eq!(js_len(&text), 40);
    assert_eq!(text.len(), 120);
    assert_eq!(CharsOver4.message_tokens(&Message::user(text.clone())), 10);
    assert_eq!(CharsOver4Plus2.message_tokens(&Message::user(text.clone())), 12);
    assert_eq!(LenOver4Plus4.message_tokens(&Message::user(text.clone())), 34);
    assert_eq!(CharsOver4Role4.message_tokens(&Message::user(text)), 14);
}

#[test]
fn cache_slots_are_distinct_per_counter() {
    let slots: Vec<Option<CacheSlot>> = vec![
        CharsOver4.cache_slot(),
        CharsOver4Plus2.cache_slot(),
        LenOver4Plus4.cache_slot(),
        CharsOver4Role4.cache_slot(),
        Exact::o200k().cache_slot(),
        Exact::cl100k().cache_slot(),
        BpeRole4::new(None).cache_slot(),
        BpeRole4::new(Some(BpeRole4::DOCUMENT_MARGIN)).cache_slot(),
    ];
    let distinct: BTreeSet<usize> = slots.iter().flatten().map(|s| s.index()).collect();
    assert_eq!(distinct.len(), CacheSlot::COUNT);
    assert!(distinct.iter().all(|i| *i < CacheSlot::COUNT));
}
