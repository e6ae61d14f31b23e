//! In-place masking against the full plan-and-apply path, on the three masking strategies.

use proptest::prelude::{any, prop, prop_assert, prop_assert_eq, prop_oneof, proptest, Just, ProptestConfig};
use proptest::strategy::Strategy as Gen;

use compaction::context::Inserted;
use compaction::message::{Message, ToolCall};
use compaction::tokens::Exact;
use compaction::*;
use compaction_strategies::common::Counter;
use compaction_strategies::{anthropic_clear_tool_uses, observation_mask, openhands_masking};

/// One generated message: tool calls and results of short and long outputs, user and
/// assistant text, a system message now and then, and ids that repeat.
fn message() -> impl Gen<Value = Message> {
    let id = prop::sample::select(vec!["a", "b", "c", "d", "e"]);
    let name = prop::sample::select(vec!["bash", "ls"]);
    prop_oneof![
        2 => Just(Message::user("carry on with the task")),
        2 => Just(Message::assistant("looking into it")),
        1 => Just(Message::system("a note")),
        4 => (id.clone(), name.clone()).prop_map(|(id, name)| Message::assistant_calls(
            "",
            vec![ToolCall { id: id.into(), name: name.into(), arguments: "{}".into() }]
        )),
        5 => (id, name, 0usize..400).prop_map(|(id, name, n)| Message::tool_result(id, name, "x ".repeat(n))),
    ]
}

/// One of the masking strategies, with generated parameters.
#[derive(Debug, Clone)]
enum Pick {
    Observation(observation_mask::Params),
    Openhands(openhands_masking::Params),
    Anthropic(anthropic_clear_tool_uses::Params),
}

impl Pick {
    fn build(&self) -> Box<dyn Strategy> {
        match self.clone() {
            Pick::Observation(p) => {
                Box::new(observation_mask::ObservationMask::new(p).expect("generated parameters are valid"))
            }
            Pick::Openhands(p) => {
                Box::new(openhands_masking::OpenhandsMasking::new(p).expect("generated parameters are valid"))
            }
            Pick::Anthropic(p) => Box::new(
                anthropic_clear_tool_uses::AnthropicClearToolUses::new(p).expect("generated parameters are valid"),
            ),
        }
    }
}

fn strategy() -> impl Gen<Value = Pick> {
    prop_oneof![
        (0usize..4, 0.3f64..1.0, any::<bool>()).prop_map(|(keep_last, threshold_ratio, exact)| {
            let counter = if exact { Counter::O200kBase } else { Counter::CharsOver4 };
            Pick::Observation(observation_mask::Params { keep_last, threshold_ratio, counter, ..Default::default() })
        }),
        (1usize..6).prop_map(|attention_window| Pick::Openhands(openhands_masking::Params { attention_window })),
        (0usize..4, prop::option::of(1u64..600), prop::option::of(1u64..400), any::<bool>()).prop_map(
            |(keep, trigger, clear_at_least, exclude)| {
                Pick::Anthropic(anthropic_clear_tool_uses::Params {
                    trigger,
                    keep,
                    clear_at_least,
                    exclude_tools: if exclude { "ls".into() } else { String::new() },
                    clear_tool_inputs: false,
                })
            }
        ),
    ]
}

/// What a context holds, entry by entry.
fn content(ctx: &Context) -> Vec<(Message, Origin)> {
    ctx.entries().iter().map(|e| (e.message().clone(), e.origin().clone())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// A replay's calls through both paths: after every appended message, a proactive
    /// compaction and then a forced one, by `plan` + `apply` + `check_compaction` on one
    /// context (behind the proactive gate, as the `compact` driver holds it) and by a
    /// `Compactor`, which takes the in-place path (`plan_masks` + `mask_in_place` +
    /// `check_masks`) behind its own gate, on the other. Plans, events, violations and
    /// contexts agree throughout.
    #[test]
    fn masking_in_place_is_the_full_compaction(
        s in strategy(),
        messages in prop::collection::vec(message(), 1..40),
        window in 40u64..800,
        irregular in prop::option::of(0usize..3),
    ) {
        let s = s.build();
        let s = s.as_ref();
        let budget = Budget::new(window);
        let exact = Exact::o200k();
        let meters: [&dyn TokenCounter; 2] = [&exact, s.estimator()];
        // A context that starts from a compaction's result: inserted and summary entries,
        // and (sometimes) recorded indices out of order.
        let mut start = vec![Entry::new(Message::system("digest"), Origin::Inserted { what: Inserted::StageDigest })];
        if let Some(k) = irregular {
            start.push(Entry::new(Message::user("summary"), Origin::Summary { round: 1, covers: vec![0] }));
            start.push(Entry::recorded(1000 + k, Message::user("late")));
            start.push(Entry::recorded(999, Message::assistant("early")));
        }
        let mut full = Context::from_entries(start.clone());
        full.units(&exact);
        full.units(s.estimator());
        let mut fast = Compactor::new(s, budget).with_meter(&exact);
        for e in start {
            fast.push(e);
        }
        for (k, m) in messages.into_iter().enumerate() {
            full.push_metered(Entry::recorded(k, m.clone()), &meters);
            fast.push(Entry::recorded(k, m));
            for trigger in [Trigger::Proactive, Trigger::Overflow] {
                let planned = if trigger == Trigger::Proactive && !s.should_compact(&full, &budget) {
                    None
                } else {
                    s.plan(&full, &budget, trigger)
                };
                let len = fast.context().len();
                let outcome = fast.compact(trigger, |_, requests| {
                    Summaries::of(requests.iter().map(|_| Ok(String::from("summary"))).collect())
                });
                prop_assert!(outcome.replaced.is_none(), "a masking strategy keeps its context");
                match outcome.compaction {
                    None => prop_assert!(planned.is_none(), "{}: no masks, but a plan: {:?}", s.name(), planned),
                    Some(Compaction { path: compactor::Path::Plan { .. }, .. }) => {
                        prop_assert!(false, "{} has an in-place path", s.name())
                    }
                    Some(Compaction { path: compactor::Path::InPlace { plan: mask, .. }, event, violations, trigger: done, .. }) => {
                        prop_assert_eq!(done, trigger);
                        let plan = planned.expect("the full path plans too");
                        let as_plan = mask.to_plan(len);
                        prop_assert_eq!(&as_plan.layout, &plan.layout);
                        prop_assert_eq!(&as_plan.step, &plan.step);
                        prop_assert_eq!(&as_plan.notes, &plan.notes);
                        let promised = s.promises(&full, &budget);
                        prop_assert_eq!(mask.promises.recent_window, promised.recent_window);
                        prop_assert_eq!(mask.promises.keeps_system_prompt, promised.keeps_system_prompt);
                        let out = s.apply(&full, &budget, &plan, &[]);
                        let expected = check_compaction(s, &full, &budget, trigger, &out);
                        prop_assert_eq!(&event, &out.event);
                        prop_assert_eq!(violations, expected);
                        full = out.context;
                        full.units(&exact);
                        full.units(s.estimator());
                    }
                }
                let fast = fast.context();
                prop_assert_eq!(content(&full), content(fast));
                prop_assert_eq!(full.tokens(&exact), fast.tokens(&exact));
                prop_assert_eq!(s.estimate(&full), s.estimate(fast));
            }
        }
    }
}
