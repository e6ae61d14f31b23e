//! `probes audit`: what a dataset's probes ask, per source, and whether they keep to the rules
//! of a fact (see [`super::facts`]).
//!
//! Per source (a conversation's `source`): probes by kind and by tier, facts by type
//! ([`FactType`]), facts tested twice at one checkpoint (the same normalized alias in two
//! probes asked at the same point), and conversations of [`LONG`] messages or more without a
//! critical task probe. [`Audit::violations`] names what passes the limits:
//! [`MAX_PLAIN_WORD_SHARE`] of plain-word facts, no code fragment, no duplicate, every long
//! conversation with a critical task probe.

use std::collections::{BTreeMap, HashMap};

use compaction::{Conversation, ProbeKind, Tier};
use serde::Serialize;

use super::facts::{fact_type, FactType};
use crate::text::normalize;

/// A conversation of this many messages or more needs a critical task probe.
pub const LONG: usize = 20;
/// The most plain-word facts a source may have, as a share of its facts.
pub const MAX_PLAIN_WORD_SHARE: f64 = 0.10;

/// The audit of one source.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SourceAudit {
    pub conversations: usize,
    pub probes: usize,
    /// Probes per kind, by name.
    pub by_kind: BTreeMap<String, usize>,
    /// Probes per tier, by name.
    pub by_tier: BTreeMap<String, usize>,
    /// Facts per type (a fact's type is its first alias's), by name.
    pub fact_types: BTreeMap<String, usize>,
    pub facts: usize,
    /// Facts tested by two probes asked at the same checkpoint: `conversation: fact`.
    pub duplicates: Vec<String>,
    /// Conversations of [`LONG`] messages or more without a critical task probe.
    pub long_without_task: Vec<String>,
    /// Code-fragment facts, `conversation/probe: fact` (the first few).
    pub code_fragments: Vec<String>,
}

impl SourceAudit {
    /// The share of facts that are a lone plain word.
    pub fn plain_word_share(&self) -> f64 {
        let n = self.fact_types.get(FactType::PlainWord.as_str()).copied().unwrap_or(0);
        if self.facts == 0 {
            0.0
        } else {
            n as f64 / self.facts as f64
        }
    }

    fn count(&self, t: FactType) -> usize {
        self.fact_types.get(t.as_str()).copied().unwrap_or(0)
    }
}

/// A probe that tests a fact, with the checkpoints it stands over (after its source message,
/// up to its `until`).
type Standing<'a> = (&'a str, (usize, usize));

/// The audit of a set of conversations, per source.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Audit {
    pub sources: BTreeMap<String, SourceAudit>,
}

impl Audit {
    /// Add the probes of `conv`.
    pub fn add(&mut self, conv: &Conversation) {
        let source = if conv.source.is_empty() { "(none)".to_string() } else { conv.source.clone() };
        let a = self.sources.entry(source).or_default();
        a.conversations += 1;
        // Per checkpoint (asked_at, None: every checkpoint), the probes that test each fact
        // with the span of checkpoints each stands over: two probes of one fact are a
        // duplicate where their spans meet (a to-do list's probe stands until the list is
        // written again, and the next one's starts there).
        let mut tested: HashMap<(Option<usize>, String), Vec<Standing>> = HashMap::new();
        for p in &conv.probes {
            a.probes += 1;
            *a.by_kind.entry(p.kind.as_str().to_string()).or_default() += 1;
            *a.by_tier.entry(p.tier().as_str().to_string()).or_default() += 1;
            for f in &p.facts {
                let Some(first) = f.first() else { continue };
                a.facts += 1;
                let t = fact_type(first);
                *a.fact_types.entry(t.as_str().to_string()).or_default() += 1;
                if t == FactType::CodeFragment && a.code_fragments.len() < 20 {
                    a.code_fragments.push(format!("{}/{}: {first}", conv.id, p.id));
                }
                let mut dup = false;
                let span = (p.source_message + 1, p.until.unwrap_or(usize::MAX));
                for alias in f {
                    let key = (p.asked_at, normalize(alias));
                    let others = tested.entry(key).or_default();
                    if others.iter().any(|(id, (lo, hi))| *id != p.id.as_str() && *lo <= span.1 && span.0 <= *hi) {
                        dup = true;
                    }
                    others.push((&p.id, span));
                }
                if dup {
                    a.duplicates.push(format!("{}: {first}", conv.id));
                }
            }
        }
        let has_task =
            conv.probes.iter().any(|p| p.kind == ProbeKind::Task && p.tier() == Tier::Critical && !p.facts.is_empty());
        if conv.messages.len() >= LONG && !has_task {
            a.long_without_task.push(conv.id.clone());
        }
    }

    /// What passes the limits, one line each, per source; empty when every source keeps them.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (source, a) in &self.sources {
            let share = a.plain_word_share();
            if share > MAX_PLAIN_WORD_SHARE {
                out.push(format!(
                    "{source}: {:.1}% of facts are a lone plain word ({} of {}; the limit is {:.0}%)",
                    share * 100.0,
                    a.count(FactType::PlainWord),
                    a.facts,
                    MAX_PLAIN_WORD_SHARE * 100.0
                ));
            }
            if a.count(FactType::CodeFragment) > 0 {
                out.push(format!(
                    "{source}: {} code-fragment facts (none allowed), e.g. {}",
                    a.count(FactType::CodeFragment),
                    a.code_fragments.iter().take(3).cloned().collect::<Vec<_>>().join(" | ")
                ));
            }
            if !a.duplicates.is_empty() {
                out.push(format!(
                    "{source}: {} facts tested twice at one checkpoint, e.g. {}",
                    a.duplicates.len(),
                    a.duplicates.iter().take(3).cloned().collect::<Vec<_>>().join(" | ")
                ));
            }
            if !a.long_without_task.is_empty() {
                out.push(format!(
                    "{source}: {} conversations of {LONG}+ messages without a critical task probe: {}",
                    a.long_without_task.len(),
                    a.long_without_task.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        out
    }

    /// The audit as text, one block per source.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (source, a) in &self.sources {
            let join =
                |m: &BTreeMap<String, usize>| m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
            out.push_str(&format!(
                "{source}: {} conversations, {} probes, {} facts\n  by kind: {}\n  by tier: {}\n  fact types: {}\n  plain-word share: {:.1}%; duplicates at a checkpoint: {}; {}+ message conversations without a critical task probe: {}\n",
                a.conversations,
                a.probes,
                a.facts,
                join(&a.by_kind),
                join(&a.by_tier),
                FactType::ALL
                    .iter()
                    .map(|t| format!("{} {}", t.as_str(), a.count(*t)))
                    .collect::<Vec<_>>()
                    .join(", "),
                a.plain_word_share() * 100.0,
                a.duplicates.len(),
                LONG,
                a.long_without_task.len(),
            ));
        }
        out
    }
}
