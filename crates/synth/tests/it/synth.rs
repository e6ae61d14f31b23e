//! The shipped synthetic datasets (`datasets/synthetic/`): regenerating them with their seed
//! gives the committed bytes, and every conversation keeps the generator's promises.
//!
//! After an intended change to the generator, refresh the files with
//! `cargo run -p compactlens -- synth --seed 42 --out datasets/synthetic`.

use std::sync::OnceLock;

use compaction::{Conversation, Exact, ProbeKind, Role, TokenCounter};
use dataset::{self, LoadOptions};
use synth::{self, Family};

const SEED: u64 = 42;
const PER_FAMILY: usize = 3;

fn dir() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/synthetic")
}

/// Every family, generated once for all tests of this file.
fn generated() -> &'static [(Family, Vec<Conversation>)] {
    static CELL: OnceLock<Vec<(Family, Vec<Conversation>)>> = OnceLock::new();
    CELL.get_or_init(|| Family::ALL.iter().map(|f| (*f, synth::generate_family(SEED, *f, PER_FAMILY))).collect())
}

fn tokens(c: &Conversation) -> u64 {
    Exact::o200k().messages_tokens(&c.messages)
}

#[test]
fn regenerating_with_the_seed_gives_the_committed_files() {
    for (family, convs) in generated() {
        let path = format!("{}/{}.jsonl", dir(), family.name());
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let fresh = synth::to_jsonl(convs).expect("conversations serialize");
        if fresh != committed {
            let line = fresh.lines().zip(committed.lines()).position(|(a, b)| a != b).map_or(0, |i| i + 1);
            panic!(
                "{path} differs from a fresh generation with seed {SEED} (first differing line {line}; {} vs {} bytes). \
                 Regenerate with `cargo run -p compactlens -- synth --seed {SEED} --out datasets/synthetic`.",
                fresh.len(),
                committed.len()
            );
        }
    }
}

#[test]
fn the_committed_files_validate_clean() {
    for family in Family::ALL {
        let path = format!("{}/{}.jsonl", dir(), family.name());
        let ds = dataset::load_file(&path, &LoadOptions::default());
        let problems: Vec<String> = ds.problems.iter().chain(&ds.validate()).map(|e| e.to_string()).collect();
        assert!(problems.is_empty(), "{path}: {problems:#?}");
        assert_eq!(ds.conversations.len(), family.items(PER_FAMILY), "{path}");
    }
}

#[test]
fn every_conversation_keeps_the_generator_promises() {
    // Structure (check_context), a system prompt first, every alias in its source message,
    // all five probe kinds, and the size range.
    for (family, convs) in generated() {
        for c in convs {
            let problems = synth::check(c);
            assert!(problems.is_empty(), "{}: {:#?}", c.id, problems);
            assert_eq!(c.source, format!("synthetic/{}", family.name()));
            assert_eq!(c.context_window, Some(family.context_window()));
        }
    }
}

#[test]
fn every_family_has_all_five_probe_kinds_in_every_conversation() {
    for (family, convs) in generated() {
        for c in convs {
            for kind in ProbeKind::CLASSIC {
                assert!(
                    c.probes.iter().any(|p| p.kind == kind),
                    "{} ({}) has no {} probe",
                    c.id,
                    family.name(),
                    kind.as_str()
                );
            }
        }
    }
}

#[test]
fn every_alias_occurs_in_its_source_message() {
    let mut checked = 0usize;
    for (_, convs) in generated() {
        for c in convs {
            for p in &c.probes {
                let text = synth::message_text(&c.messages[p.source_message]);
                assert!(!p.facts.is_empty(), "{} {}", c.id, p.id);
                for alias in p.facts.iter().flatten() {
                    assert!(
                        !alias.is_empty() && text.contains(alias.as_str()),
                        "{} {}: {alias:?} not in message {}",
                        c.id,
                        p.id,
                        p.source_message
                    );
                    checked += 1;
                }
                if let Some(at) = p.asked_at {
                    assert!(at > p.source_message && at <= c.messages.len(), "{} {}: asked_at {at}", c.id, p.id);
                }
            }
        }
    }
    assert!(checked > 200, "only {checked} aliases");
}

#[test]
fn sizes_fall_in_the_stated_range_and_grow_by_band() {
    let mut total_bytes = 0usize;
    for (family, convs) in generated() {
        let sizes: Vec<u64> = convs.iter().map(tokens).collect();
        for (c, t) in convs.iter().zip(&sizes) {
            assert!((synth::MIN_TOKENS..=synth::MAX_TOKENS).contains(t), "{}: {t} tokens", c.id);
        }
        if *family == Family::Long {
            // One conversation, long enough for ten compactions and more at 32k.
            assert!(sizes.len() == 1 && sizes[0] > 10 * 32_000, "{sizes:?}");
            total_bytes += synth::to_jsonl(convs).expect("serializes").len();
            continue;
        }
        // Small, medium, large: compaction fires several times at 32k and more than once at
        // 128k in the larger two.
        assert!(sizes[0] < sizes[1] && sizes[1] < sizes[2], "{}: {sizes:?}", family.name());
        assert!(sizes[1] > 2 * 32_000 && sizes[2] > 128_000, "{}: {sizes:?}", family.name());
        total_bytes += synth::to_jsonl(convs).expect("serializes").len();
    }
    assert!(total_bytes < 15_000_000, "{total_bytes} bytes in all");
}

#[test]
fn an_item_does_not_depend_on_how_many_are_asked_for() {
    let (_, convs) = &generated()[0];
    assert_eq!(synth::generate(SEED, Family::ALL[0], 1), convs[1]);
    assert_ne!(synth::generate(SEED + 1, Family::ALL[0], 0), convs[0]);
}

fn family(f: Family) -> &'static [Conversation] {
    generated().iter().find(|(x, _)| *x == f).map(|(_, c)| c.as_slice()).expect("every family is generated")
}

#[test]
fn coding_sessions_have_parallel_calls_tool_errors_and_tracebacks() {
    for c in family(Family::Coding) {
        assert!(c.messages.iter().any(|m| m.tool_calls.len() >= 2), "{}: no parallel calls", c.id);
        assert!(c.messages.iter().any(|m| m.is_error), "{}: no tool error", c.id);
        assert!(
            c.messages.iter().any(|m| m.role == Role::Tool && m.content.contains("short test summary info")),
            "{}",
            c.id
        );
        let tools: Vec<&str> = c.messages.iter().flat_map(|m| m.tool_calls.iter().map(|t| t.name.as_str())).collect();
        for t in ["read_file", "edit_file", "bash"] {
            assert!(tools.contains(&t), "{}: never calls {t}", c.id);
        }
    }
}

#[test]
fn paper_chats_are_staged_with_decisions_and_chitchat() {
    for c in family(Family::Paper) {
        let body = &c.messages[1..];
        assert!(body.iter().all(|m| m.stage.is_some()), "{}: a message without a stage", c.id);
        let decisions = c.messages.iter().filter(|m| m.meta_str("stage_decision").is_some()).count();
        assert!(decisions >= 3, "{}: {decisions} approved stages", c.id);
        for m in c.messages.iter().filter(|m| m.meta_str("stage_decision").is_some()) {
            assert_eq!(m.role, Role::User, "{}", c.id);
        }
        // Chitchat as priority-chain strips it: a user message under 15 characters, no ? or !.
        let chitchat = body
            .iter()
            .filter(|m| {
                m.role == Role::User && m.content.trim().chars().count() < 15 && !m.content.contains(['?', '!'])
            })
            .count();
        assert!(chitchat >= 5, "{}: {chitchat} chitchat messages", c.id);
        // Stages are contiguous: a label never comes back once the next stage has begun.
        let mut seen: Vec<&str> = Vec::new();
        for m in body {
            let s = m.stage.as_deref().unwrap_or("");
            if seen.last() != Some(&s) {
                assert!(!seen.contains(&s), "{}: stage {s} resumes after it ended", c.id);
                seen.push(s);
            }
        }
    }
}

#[test]
fn support_sessions_call_one_tool_at_a_time_and_reuse_an_id() {
    for c in family(Family::Support) {
        assert!(c.messages.iter().all(|m| m.tool_calls.len() <= 1), "{}: a parallel call", c.id);
        assert!(c.messages[0].content.contains("Airline Agent Policy"), "{}", c.id);
        let ids: Vec<&str> = c.messages.iter().flat_map(|m| m.tool_calls.iter().map(|t| t.id.as_str())).collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert!(sorted.len() < ids.len(), "{}: no reused call id", c.id);
    }
}

#[test]
fn cms_and_data_sessions_carry_large_tool_outputs() {
    for (f, min_bytes) in [(Family::Cms, 8_000), (Family::Data, 20_000)] {
        for c in family(f) {
            let largest =
                c.messages.iter().filter(|m| m.role == Role::Tool).map(|m| m.content.len()).max().unwrap_or(0);
            assert!(largest >= min_bytes, "{}: largest tool output {largest} bytes", c.id);
        }
    }
    for c in family(Family::Cms) {
        let json_outputs = c
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool && serde_json::from_str::<serde_json::Value>(&m.content).is_ok())
            .count();
        assert!(json_outputs > 10, "{}: {json_outputs} JSON outputs", c.id);
    }
}
