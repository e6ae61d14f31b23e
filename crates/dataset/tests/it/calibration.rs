//! The hand-graded probe set, `datasets/calibration/probes.jsonl`: every probe derived from the
//! two corpora named in `datasets/calibration/README.md` (60 probes), each graded by reading its
//! source messages: correct (its facts answer its question), discriminating (a context that
//! kept them can be told from one that did not), importance (high, medium or low: how much the
//! work after the checkpoint turns on it), the tier a reader gives it and whether the derived
//! tier fits, with the grade's reason.
//!
//! Checks that at least half of the critical and useful probes are good (correct,
//! discriminating and of high importance), that the derived tier fits the graded one on at
//! least 80%, and re-derives every corpus the set names to check that each graded probe still
//! exists (same conversation, question and first fact) and that every probe derived there is
//! graded. A derivation change that drops, rewords or adds a probe fails here: grade the new
//! probe. Skipped, with the reason printed, when the corpora folder is absent.

// The test prints why it skips and the figures it found.
#![allow(clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use dataset::import::{import, FormatChoice, ImportOptions};
use dataset::probes::{derive, DeriveParams};
use serde::Deserialize;

const CORPORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpora");
const SET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/calibration/probes.jsonl");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    corpus: String,
    conversation: String,
    question: String,
    facts: Vec<Vec<String>>,
    /// The derivation's tier when graded.
    tier: String,
    grade: Grade,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Grade {
    correct: bool,
    discriminating: bool,
    /// `high`, `medium` or `low`.
    importance: String,
    tier: String,
    /// The derived tier is the graded one.
    tier_fits: bool,
    reason: String,
}

fn entries() -> Vec<Entry> {
    let text = std::fs::read_to_string(SET).expect("datasets/calibration/probes.jsonl");
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("probes.jsonl line {}: {e}", n + 1)))
        .collect()
}

#[test]
fn the_graded_set_is_well_formed() {
    let set = entries();
    assert_eq!(set.len(), 60);
    let ids: BTreeSet<&str> = set.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), set.len(), "ids are unique");
    for e in &set {
        assert!(!e.grade.reason.trim().is_empty(), "{}: a grade says why", e.id);
        for t in [&e.tier, &e.grade.tier] {
            assert!(["critical", "useful", "detail"].contains(&t.as_str()), "{}: tier {t}", e.id);
        }
        assert!(["high", "medium", "low"].contains(&e.grade.importance.as_str()), "{}: importance", e.id);
        assert_eq!(e.grade.tier_fits, e.tier == e.grade.tier, "{}: tier_fits says whether the tiers agree", e.id);
        assert!(!e.facts.is_empty() && e.facts.iter().all(|f| !f.is_empty()), "{}", e.id);
    }
    // Good: correct, discriminating and of high importance; among the critical and useful
    // probes, the ones a run scores.
    let scored: Vec<&Entry> = set.iter().filter(|e| e.tier == "critical" || e.tier == "useful").collect();
    let good =
        scored.iter().filter(|e| e.grade.correct && e.grade.discriminating && e.grade.importance == "high").count();
    let agree = set.iter().filter(|e| e.grade.tier_fits).count();
    println!("graded: {good} of {} critical and useful probes good; tier fits {agree} of {}", scored.len(), set.len());
    assert!(good * 2 >= scored.len(), "{good} of {} critical and useful probes good (half needed)", scored.len());
    assert!(agree * 10 >= set.len() * 8, "tier fits {agree} of {} (80% needed)", set.len());
}

#[test]
fn every_graded_probe_is_still_derived_with_its_tier() {
    let root = Path::new(CORPORA);
    if !root.is_dir() {
        println!("skipped: no corpora folder at {CORPORA}");
        return;
    }
    let set = entries();
    let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
    let corpora: BTreeSet<&str> = set.iter().map(|e| e.corpus.as_str()).collect();
    // conversation id -> its derived probes, over every corpus the set names.
    let mut derived: BTreeMap<String, Vec<compaction::Probe>> = BTreeMap::new();
    for corpus in corpora {
        for file in import(&[root.join(corpus)], &options) {
            for conv in &file.conversations {
                derived.insert(conv.id.clone(), derive(conv, &DeriveParams::default()));
            }
        }
    }
    let mut missing = Vec::new();
    let mut agree = 0;
    for e in &set {
        let found = derived
            .get(&e.conversation)
            .and_then(|probes| probes.iter().find(|p| p.question == e.question && p.facts.first() == e.facts.first()));
        match found {
            None => missing.push(format!("{} ({}: {:?})", e.id, e.conversation, e.question)),
            Some(p) => {
                if p.tier().as_str() == e.grade.tier {
                    agree += 1;
                }
            }
        }
    }
    assert!(missing.is_empty(), "graded probes no longer derived (grade their replacements):\n{}", missing.join("\n"));
    // The set is every probe the derivation writes for these corpora: a new one is graded too.
    let graded: BTreeSet<(&str, &str, Option<&Vec<String>>)> =
        set.iter().map(|e| (e.conversation.as_str(), e.question.as_str(), e.facts.first())).collect();
    let ungraded: Vec<String> = derived
        .iter()
        .flat_map(|(conv, probes)| probes.iter().map(move |p| (conv, p)))
        .filter(|(conv, p)| !graded.contains(&(conv.as_str(), p.question.as_str(), p.facts.first())))
        .map(|(conv, p)| format!("{conv}: {:?} {:?}", p.question, p.facts.first()))
        .collect();
    assert!(ungraded.is_empty(), "derived probes without a grade (grade them):\n{}", ungraded.join("\n"));
    println!("derived tier agrees with the grade on {agree} of {}", set.len());
    assert!(agree * 10 >= set.len() * 8, "tier agreement {agree} of {} (80% needed)", set.len());
}
