//! Synthetic agent sessions with planted facts and exact probes.
//!
//! Five scenario families mirror the domains of the seed documents and the recorded corpora:
//!
//! | family | what it is |
//! |---|---|
//! | `coding` | a coding agent reads files, runs failing tests, edits and reruns (`read_file`, `edit_file`, `bash`; parallel calls, tool errors, tracebacks) |
//! | `cms` | a CMS site-builder agent (seed 004): pages, sections and ids, design preferences and rejected options, large JSON tool outputs |
//! | `paper` | a staged paper-writing chat in Indonesian (seed 000): `stage` labels, `meta.stage_decision` on approvals, short chitchat |
//! | `support` | an airline customer-service agent in the style of tau-bench: policy in the system prompt, user and reservation ids, one lookup at a time |
//! | `data` | a data-analysis session with huge tool outputs: query results, logs and CSV dumps of tens of KB |
//! | `long` | one long coding session (the `coding` scenario near [`MAX_TOKENS`]): facts planted early must survive ten and more compactions at 32k, so drift across repeated compactions shows |
//!
//! Every conversation opens with a system prompt, plants facts early (where compaction puts
//! them at risk) and throughout, and ends with what comes next, so each has probes of all five
//! [`ProbeKind`]s. Every alias of every fact occurs verbatim in the probe's source message
//! ([`check`] verifies it). Sizes run from about 40k to 400k exact (o200k) tokens: item `i`
//! of a family falls in the small, medium or large band of [`Family::bands`] by `i % 3`.
//!
//! Generation is deterministic: a SplitMix64 stream per (seed, family, index), integer
//! arithmetic only, JSON written with a fixed key order. The same seed gives the same bytes on
//! every platform, and item `i` does not depend on how many items or which families are asked
//! for.
//!
//! ```
//! use compaction::ProbeKind;
//! use synth::{self, Family};
//!
//! let conv = synth::generate(7, Family::Support, 0);
//! assert_eq!(conv.source, "synthetic/support");
//! assert!(synth::check(&conv).is_empty());
//! assert!(ProbeKind::CLASSIC.iter().all(|k| conv.probes.iter().any(|p| p.kind == *k)));
//! assert_eq!(conv, synth::generate(7, Family::Support, 0));
//! ```

use std::str::FromStr;

use compaction::{check_context, Context, Conversation, Exact, Message, ProbeKind, TokenCounter, Violation};

mod build;
mod cms;
mod coding;
mod data;
mod paper;
mod rng;
mod support;

pub use rng::Rng;

/// The smallest conversation a family produces, in exact (o200k) tokens.
pub const MIN_TOKENS: u64 = 40_000;
/// The largest conversation a family produces, in exact (o200k) tokens.
pub const MAX_TOKENS: u64 = 400_000;

/// A scenario family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Coding,
    Cms,
    Paper,
    Support,
    Data,
    Long,
}

/// A band of target sizes in exact tokens. A conversation stops growing once past its target,
/// so it ends a little above it (by at most one episode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    pub min: u64,
    pub max: u64,
}

const fn band(min: u64, max: u64) -> Band {
    Band { min, max }
}

impl Family {
    pub const ALL: [Family; 6] =
        [Family::Coding, Family::Cms, Family::Paper, Family::Support, Family::Data, Family::Long];

    /// How many conversations the family gives when `per_family` are asked for: `long` has one
    /// (a second would only lengthen every run).
    pub fn items(self, per_family: usize) -> usize {
        match self {
            Family::Long => per_family.min(1),
            _ => per_family,
        }
    }

    /// The name used in files and `source` (`synthetic/<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Coding => "coding",
            Family::Cms => "cms",
            Family::Paper => "paper",
            Family::Support => "support",
            Family::Data => "data",
            Family::Long => "long",
        }
    }

    /// One line on what the family holds.
    pub fn description(self) -> &'static str {
        match self {
            Family::Coding => "coding agent fixing failing tests in a Python service",
            Family::Cms => "CMS site-builder agent building pages and sections to the user's taste",
            Family::Paper => "staged paper-writing chat in Indonesian with approved stages",
            Family::Support => "airline customer-service agent handling a coordinator's many bookings",
            Family::Data => "data analyst chasing a metric drop through queries, logs and CSV dumps",
            Family::Long => "one long coding session across many failing tests, compacted ten times and more at 32k",
        }
    }

    /// Target size bands (small, medium, large), in exact tokens.
    pub fn bands(self) -> [Band; 3] {
        match self {
            Family::Coding => [band(45_000, 60_000), band(110_000, 160_000), band(230_000, 320_000)],
            Family::Cms => [band(45_000, 60_000), band(100_000, 150_000), band(220_000, 300_000)],
            Family::Paper => [band(45_000, 60_000), band(100_000, 140_000), band(180_000, 250_000)],
            Family::Support => [band(42_000, 55_000), band(90_000, 130_000), band(160_000, 220_000)],
            Family::Data => [band(50_000, 70_000), band(130_000, 180_000), band(260_000, 340_000)],
            Family::Long => [band(360_000, 380_000); 3],
        }
    }

    /// The context window stamped on the family's conversations.
    pub fn context_window(self) -> u64 {
        match self {
            Family::Coding | Family::Long => 200_000,
            Family::Cms | Family::Paper | Family::Support | Family::Data => 128_000,
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A family name that is not one of [`Family::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown family {name:?} (known: coding, cms, paper, support, data, long)")]
pub struct UnknownFamily {
    pub name: String,
}

impl FromStr for Family {
    type Err = UnknownFamily;
    fn from_str(s: &str) -> Result<Family, UnknownFamily> {
        Family::ALL.into_iter().find(|f| f.name() == s.trim()).ok_or_else(|| UnknownFamily { name: s.to_string() })
    }
}

/// What a family generator gets: its random stream, its target size and the stamp to put on
/// the conversation.
pub(crate) struct Spec {
    pub rng: Rng,
    pub target: u64,
    pub finish: build::Finish,
}

/// Conversation `index` of `family` under `seed`.
pub fn generate(seed: u64, family: Family, index: usize) -> Conversation {
    let mut rng = Rng::stream(seed, family.name(), index as u64);
    let band = family.bands()[index % 3];
    let target = rng.range(band.min, band.max);
    let finish = build::Finish {
        id: format!("synth-{}-s{seed}-{index:03}", family.name()),
        family: family.name(),
        window: family.context_window(),
        model: None,
        seed,
        index,
        scenario: String::new(),
    };
    let spec = Spec { rng, target, finish };
    match family {
        Family::Coding | Family::Long => coding::generate(spec),
        Family::Cms => cms::generate(spec),
        Family::Paper => paper::generate(spec),
        Family::Support => support::generate(spec),
        Family::Data => data::generate(spec),
    }
}

/// Conversations `0..count` of `family` under `seed` (at most one of `long`: [`Family::items`]).
pub fn generate_family(seed: u64, family: Family, count: usize) -> Vec<Conversation> {
    (0..family.items(count)).map(|i| generate(seed, family, i)).collect()
}

/// JSONL text: one conversation per line, each followed by `\n`.
pub fn to_jsonl(conversations: &[Conversation]) -> Result<String, serde_json::Error> {
    let mut out = String::new();
    for c in conversations {
        out.push_str(&serde_json::to_string(c)?);
        out.push('\n');
    }
    Ok(out)
}

/// What is wrong with a generated conversation (see [`check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("{0}")]
    Structure(Violation),
    #[error("probe {probe}: source message {source_message} is out of range")]
    SourceOutOfRange { probe: String, source_message: usize },
    #[error("probe {probe}: alias {alias:?} does not occur in source message {source_message}")]
    AliasMissing { probe: String, alias: String, source_message: usize },
    #[error("probe {probe}: a fact has no alias")]
    EmptyFact { probe: String },
    #[error("no {} probe", .0.as_str())]
    MissingKind(ProbeKind),
    #[error("{tokens} tokens, outside {min}..={max}")]
    Size { tokens: u64, min: u64, max: u64 },
    #[error("the first message is not a system prompt")]
    NoSystemPrompt,
}

/// The text of a message a fact may be found in: its content, and its tool calls' names and
/// arguments.
pub fn message_text(m: &Message) -> String {
    let mut t = m.content.clone();
    for c in &m.tool_calls {
        t.push('\n');
        t.push_str(&c.name);
        t.push('\n');
        t.push_str(&c.arguments);
    }
    t
}

/// Everything the generator promises about a conversation: a well-formed context (no orphan
/// results, no unanswered calls), a system prompt first, every alias of every probe verbatim in
/// its source message, all five probe kinds, and a size within [`MIN_TOKENS`]..=[`MAX_TOKENS`].
pub fn check(conv: &Conversation) -> Vec<Problem> {
    let mut out: Vec<Problem> = check_context(&Context::from_messages(conv.messages.iter().cloned()))
        .into_iter()
        .map(Problem::Structure)
        .collect();
    if conv.messages.first().map(|m| m.role) != Some(compaction::Role::System) {
        out.push(Problem::NoSystemPrompt);
    }
    for p in &conv.probes {
        let Some(m) = conv.messages.get(p.source_message) else {
            out.push(Problem::SourceOutOfRange { probe: p.id.clone(), source_message: p.source_message });
            continue;
        };
        let text = message_text(m);
        for fact in &p.facts {
            if fact.is_empty() {
                out.push(Problem::EmptyFact { probe: p.id.clone() });
            }
            for alias in fact {
                if alias.is_empty() || !text.contains(alias.as_str()) {
                    out.push(Problem::AliasMissing {
                        probe: p.id.clone(),
                        alias: alias.clone(),
                        source_message: p.source_message,
                    });
                }
            }
        }
    }
    for kind in ProbeKind::CLASSIC {
        if !conv.probes.iter().any(|p| p.kind == kind) {
            out.push(Problem::MissingKind(kind));
        }
    }
    let tokens = Exact::o200k().messages_tokens(&conv.messages);
    if !(MIN_TOKENS..=MAX_TOKENS).contains(&tokens) {
        out.push(Problem::Size { tokens, min: MIN_TOKENS, max: MAX_TOKENS });
    }
    out
}

#[cfg(test)]
mod tests;
