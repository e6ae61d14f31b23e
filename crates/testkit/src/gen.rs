//! Proptest generators of realistic agent conversations.
//!
//! A generated value is a [`ConversationSpec`]: a short, printable description (texts are
//! [`Text`] seeds) that [`ConversationSpec::build`] expands into a [`Context`]. Shrinking works
//! on the description, so a failing case shrinks to few turns and short texts.
//!
//! Generated conversations are always well formed: every tool call is answered, in order,
//! right after the assistant message that made it, except a call round in flight at the very end
//! ([`ConversationSpec::in_flight`], about one conversation in seven from [`arb_conversation`];
//! never from [`arb_conversation_with`]). They contain parallel calls, tool errors,
//! huge tool outputs (10 to 60 KB), staged messages (`stage` labels and `meta.stage_decision`),
//! short chitchat, previous summaries (an `Origin::Summary` entry at index 1 in the styles of
//! the seeds, or a recorded message starting `## Session Summary`), unicode (CJK, emoji,
//! combining marks) and empty texts; from a few messages to a few hundred.
//!
//! ```
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//!
//! let mut runner = TestRunner::deterministic();
//! let spec = testkit::gen::arb_conversation().new_tree(&mut runner).unwrap().current();
//! assert!(compaction::check_context(&spec.build()).is_empty());
//! ```

use compaction::{Context, Entry, Inserted, Message, Role, ThinkingBlock, ThinkingKind};
use proptest::prelude::*;

use crate::builder::{next_recorded_index, Call, ContextBuilder};
use crate::text::{self, Text, TextKind, FILES, WORDS};

/// Tool names used by generated calls.
pub const TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "bash",
    "grep",
    "list_dir",
    "run_tests",
    "search_web",
    "get_order",
    "update_ticket",
];

/// Stage labels of staged conversations, in order.
pub const STAGES: &[&str] = &["brainstorm", "outline", "draft", "revise", "final"];

/// Short user replies that carry no information (`priority-chain` strips these).
pub const CHITCHAT: &[&str] = &["ok", "thanks", "sounds good", "👍", "yes", "great", "ok thanks", "next", " sure "];

/// A tool's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Text(Text),
    /// About `kb` kilobytes of file listing or log.
    Huge {
        kb: u8,
        seed: u32,
    },
}

impl Output {
    pub fn render(&self) -> String {
        match self {
            Output::Text(t) => t.render(),
            Output::Huge { kb, seed } => text::huge(*kb as usize * 1024, *seed as u64),
        }
    }
}

/// One tool call with its result.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpec {
    /// Index into [`TOOLS`].
    pub tool: u8,
    /// Seed of the JSON arguments.
    pub args: u32,
    pub output: Output,
    pub error: bool,
}

impl CallSpec {
    pub fn to_call(&self) -> Call {
        let name = TOOLS[self.tool as usize % TOOLS.len()];
        let mut rng = text::SplitMix::new(self.args as u64);
        let args = serde_json::json!({
            "path": rng.pick(FILES),
            "query": format!("{} {}", rng.pick(WORDS), rng.pick(WORDS)),
        })
        .to_string();
        if self.error {
            let detail = self.output.render();
            let message = format!("Error: {name} failed: {}", detail.chars().take(200).collect::<String>());
            Call::err(name, args, message)
        } else {
            Call::ok(name, args, self.output.render())
        }
    }
}

/// One assistant message calling tools (in parallel when more than one), with the results.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    pub text: Text,
    pub calls: Vec<CallSpec>,
}

/// A unit of conversation that leaves it well formed.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// A user request, tool rounds, and (usually) a final assistant reply. When the
    /// conversation is staged and `closes_stage` is set, the last message records the stage
    /// decision and the next turn starts the next stage.
    Exchange { user: Text, rounds: Vec<Round>, reply: Option<Text>, closes_stage: bool },
    /// A chitchat user message (index into [`CHITCHAT`]) and a reply.
    Chitchat { user: u8, reply: Text },
}

/// A summary already in the context when the test starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Previous {
    None,
    /// `keep-last-n` style: an assistant `## Session Summary (Compaction Round N)` entry with
    /// `Origin::Summary`, after the system prompt.
    SessionSummary {
        round: u8,
        covers: u8,
        body: Text,
    },
    /// `split-fraction` style: a user `[COMPACT SUMMARY]` entry and an inserted `Understood.`.
    CompactSummary {
        round: u8,
        covers: u8,
        body: Text,
    },
    /// `priority-chain` style: a system message with `Origin::Summary`.
    SystemSummary {
        round: u8,
        covers: u8,
        body: Text,
    },
    /// A recorded assistant message whose text starts `## Session Summary`: the recorded agent
    /// compacted on its own (`meta.compact_summary`).
    RecordedText {
        round: u8,
        body: Text,
    },
}

/// A generated conversation, before expansion. A previous summary entry always sits at index
/// 1, after the system prompt (a short default one when `system` is `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSpec {
    pub system: Option<Text>,
    pub previous: Previous,
    pub staged: bool,
    pub turns: Vec<Turn>,
    /// A last call round whose results have not arrived: the conversation ends with an
    /// assistant message calling tools, as when the agent is waiting on them.
    pub in_flight: Option<Round>,
}

impl ConversationSpec {
    /// Expand into a context of recorded messages (plus the previous summary, if any).
    pub fn build(&self) -> Context {
        let mut b = ContextBuilder::new();
        // A previous summary entry sits at index 1, after a system prompt: without one, the
        // seeds would take the summary for the system prompt.
        let entry_summary = !matches!(self.previous, Previous::None | Previous::RecordedText { .. });
        let system = self.system.or(entry_summary.then(|| Text::prose(0, 0)));
        if let Some(system) = system {
            let text = system.render();
            b = b.system(format!("You are a careful agent.\n{text}"));
        }
        b = match &self.previous {
            Previous::None => b,
            Previous::SessionSummary { round, covers, body } => b.summary_as(
                Role::Assistant,
                *round as u32,
                *covers as usize,
                format!("## Session Summary (Compaction Round {round})\n\n{}", body.render()),
            ),
            Previous::CompactSummary { round, covers, body } => b
                .summary_as(
                    Role::User,
                    *round as u32,
                    *covers as usize,
                    format!("[COMPACT SUMMARY]\n{}", body.render()),
                )
                .inserted(Message::assistant("Understood."), Inserted::Acknowledgement),
            Previous::SystemSummary { round, covers, body } => b.summary_as(
                Role::System,
                *round as u32,
                *covers as usize,
                format!("Summary of earlier conversation:\n{}", body.render()),
            ),
            Previous::RecordedText { round, body } => b
                .assistant(format!("## Session Summary (Compaction Round {round})\n\n{}", body.render()))
                .meta(compaction::message::COMPACT_SUMMARY, serde_json::Value::Bool(true)),
        };
        let stage = if self.staged { Some(0) } else { None };
        let mut b = add_turns(b, stage, &self.turns);
        if let Some(round) = &self.in_flight {
            b = b.calls_in_flight(round.text.render(), round.calls.iter().map(CallSpec::to_call).collect());
        }
        let ctx = b.build();
        if !self.thinking() {
            return ctx;
        }
        // Extended thinking: every recorded assistant message opens with a signed thinking block.
        let entries = ctx
            .entries()
            .iter()
            .map(|e| match e.origin().recorded_index() {
                Some(i)
                    if e.role() == Role::Assistant && !e.message().meta_flag(compaction::message::COMPACT_SUMMARY) =>
                {
                    let mut m = e.message().clone();
                    m.thinking.push(thinking_block(i));
                    Entry::new(m, e.origin().clone())
                }
                _ => e.clone(),
            })
            .collect();
        Context::from_entries(entries)
    }

    /// Whether the conversation was recorded with extended thinking (every third length of
    /// conversation, so that no random draw is added to the generators' streams).
    pub fn thinking(&self) -> bool {
        self.turns.len() % 3 == 1
    }
}

/// The thinking block of recorded assistant message `index`, with an opaque signature.
pub fn thinking_block(index: usize) -> ThinkingBlock {
    ThinkingBlock {
        kind: if index % 5 == 4 { ThinkingKind::RedactedThinking } else { ThinkingKind::Thinking },
        thinking: if index % 5 == 4 { String::new() } else { format!("Let me think about step {index}.") },
        data: if index % 5 == 4 { format!("EnCrYpTeD{index}") } else { String::new() },
        signature: format!("sig-{index:08x}"),
    }
}

fn add_turns(mut b: ContextBuilder, mut stage: Option<usize>, turns: &[Turn]) -> ContextBuilder {
    for turn in turns {
        if let Some(s) = stage {
            b = b.stage(STAGES[s]);
        }
        match turn {
            Turn::Exchange { user, rounds, reply, closes_stage } => {
                b = b.user(user.render());
                for round in rounds {
                    b = b.calls(round.text.render(), round.calls.iter().map(CallSpec::to_call).collect());
                }
                if let Some(reply) = reply {
                    b = b.assistant(reply.render());
                }
                if let (Some(s), true) = (stage, *closes_stage) {
                    let decision =
                        format!("Approved {}: {}", STAGES[s], user.render().chars().take(80).collect::<String>());
                    b = b.decision(decision);
                    stage = Some((s + 1).min(STAGES.len() - 1));
                }
            }
            Turn::Chitchat { user, reply } => {
                b = b.user(CHITCHAT[*user as usize % CHITCHAT.len()]).assistant(reply.render());
            }
        }
    }
    b
}

/// `ctx` followed by `turns`, recorded after everything `ctx` stands for, continuing the stage
/// of its last message if it has one. Calls in flight at the end of `ctx` get their results
/// first.
pub fn append(ctx: &Context, turns: &[Turn]) -> Context {
    let mut b = ContextBuilder::new().starting_at(next_recorded_index(ctx));
    let stage = ctx
        .entries()
        .last()
        .and_then(|e| e.message().stage.as_deref())
        .and_then(|s| STAGES.iter().position(|x| *x == s));
    if let Some(s) = stage {
        b = b.stage(STAGES[s]);
    }
    for (id, name) in in_flight_calls(ctx) {
        b = b.message(Message::tool_result(id, name, "(result arrived)"));
    }
    crate::builder::extend(ctx, add_turns(b, stage, turns))
}

/// The calls of the last assistant message that have no result after it, in call order.
pub fn in_flight_calls(ctx: &Context) -> Vec<(String, String)> {
    let Some(last) = ctx.entries().iter().rposition(|e| e.role() == Role::Assistant) else { return Vec::new() };
    let answered: Vec<&str> =
        ctx.entries()[last + 1..].iter().filter_map(|e| e.message().tool_call_id.as_deref()).collect();
    ctx.entries()[last]
        .message()
        .tool_calls
        .iter()
        .filter(|c| !answered.contains(&c.id.as_str()))
        .map(|c| (c.id.clone(), c.name.clone()))
        .collect()
}

/// A text of any kind, mostly short prose.
pub fn arb_text() -> impl Strategy<Value = Text> {
    let kind = prop_oneof![
        1 => Just(TextKind::Empty),
        6 => Just(TextKind::Prose),
        2 => Just(TextKind::Code),
        1 => Just(TextKind::Json),
        1 => Just(TextKind::Cjk),
        1 => Just(TextKind::Emoji),
        1 => Just(TextKind::Combining),
        2 => Just(TextKind::Mixed),
    ];
    let len = prop_oneof![6 => 0u16..40, 3 => 40u16..200, 1 => 200u16..800];
    (kind, len, any::<u32>()).prop_map(|(kind, len, seed)| Text { kind, len, seed })
}

/// A short text (up to 40 words).
pub fn arb_short_text() -> impl Strategy<Value = Text> {
    (prop::sample::select(TextKind::ALL.to_vec()), 0u16..40, any::<u32>()).prop_map(|(kind, len, seed)| Text {
        kind,
        len,
        seed,
    })
}

/// A tool output: usually a text, sometimes 10 to 60 KB.
pub fn arb_output() -> impl Strategy<Value = Output> {
    prop_oneof![
        30 => arb_text().prop_map(Output::Text),
        1 => (10u8..60, any::<u32>()).prop_map(|(kb, seed)| Output::Huge { kb, seed }),
    ]
}

pub fn arb_call() -> impl Strategy<Value = CallSpec> {
    (0..TOOLS.len() as u8, any::<u32>(), arb_output(), prop::bool::weighted(0.12))
        .prop_map(|(tool, args, output, error)| CallSpec { tool, args, output, error })
}

/// One call (70%) or two to four parallel calls.
pub fn arb_round() -> impl Strategy<Value = Round> {
    let calls = prop_oneof![7 => prop::collection::vec(arb_call(), 1..2), 3 => prop::collection::vec(arb_call(), 2..5)];
    (arb_short_text(), calls).prop_map(|(text, calls)| Round { text, calls })
}

pub fn arb_turn() -> impl Strategy<Value = Turn> {
    let exchange = (
        arb_text(),
        prop::collection::vec(arb_round(), 0..4),
        prop::option::weighted(0.85, arb_text()),
        prop::bool::weighted(0.25),
    )
        .prop_map(|(user, rounds, reply, closes_stage)| Turn::Exchange { user, rounds, reply, closes_stage });
    let chitchat = (0..CHITCHAT.len() as u8, arb_short_text()).prop_map(|(user, reply)| Turn::Chitchat { user, reply });
    prop_oneof![8 => exchange, 1 => chitchat]
}

/// `n` turns, for appending to a context.
pub fn arb_turns(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Turn>> {
    prop::collection::vec(arb_turn(), n)
}

pub fn arb_previous() -> impl Strategy<Value = Previous> {
    let round = 1u8..4;
    let covers = 2u8..40;
    prop_oneof![
        6 => Just(Previous::None),
        1 => (round.clone(), covers.clone(), arb_text())
            .prop_map(|(round, covers, body)| Previous::SessionSummary { round, covers, body }),
        1 => (round.clone(), covers.clone(), arb_text())
            .prop_map(|(round, covers, body)| Previous::CompactSummary { round, covers, body }),
        1 => (round.clone(), covers, arb_text())
            .prop_map(|(round, covers, body)| Previous::SystemSummary { round, covers, body }),
        1 => (round, arb_text()).prop_map(|(round, body)| Previous::RecordedText { round, body }),
    ]
}

/// A conversation of `turns` turns (each turn is one to about twenty messages).
pub fn arb_conversation_with(turns: std::ops::Range<usize>) -> impl Strategy<Value = ConversationSpec> {
    (
        prop::option::weighted(0.9, arb_text()),
        arb_previous(),
        prop::bool::weighted(0.25),
        prop::collection::vec(arb_turn(), turns),
    )
        .prop_map(|(system, previous, staged, turns)| ConversationSpec {
            system,
            previous,
            staged,
            turns,
            in_flight: None,
        })
}

/// A conversation of a few to a few hundred messages; about one in seven ends with a call round
/// in flight ([`ConversationSpec::in_flight`]).
pub fn arb_conversation() -> impl Strategy<Value = ConversationSpec> {
    let sized = prop_oneof![
        3 => arb_conversation_with(1..6),
        5 => arb_conversation_with(6..30),
        2 => arb_conversation_with(30..90),
    ];
    (sized, prop::option::weighted(0.15, arb_round()))
        .prop_map(|(spec, in_flight)| ConversationSpec { in_flight, ..spec })
}
