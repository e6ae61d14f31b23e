//! The mixed corpus of the token-counting benches: prose (some of it with CJK, emoji and
//! combining marks), JSON tool output (compact and pretty-printed) and source code (short
//! functions and long listings), expanded from a seed by testkit's deterministic text.

use serde::{Deserialize, Serialize};
use testkit::text::{self, SplitMix, TextKind};

/// What a document of the corpus is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    Prose,
    Json,
    Code,
}

/// One document of the corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doc {
    pub kind: DocKind,
    pub text: String,
}

/// Size of the corpus the benches count, in bytes (the last document may pass it).
pub const CORPUS_BYTES: usize = 1 << 20;

/// Documents of every kind, in a seeded order, until they add up to at least `bytes` bytes.
/// About 40% of documents are prose, 30% JSON and 30% code; by bytes code and JSON dominate,
/// as they do in agent contexts.
pub fn mixed(seed: u64, bytes: usize) -> Vec<Doc> {
    let mut rng = SplitMix::new(seed);
    let mut docs = Vec::new();
    let mut total = 0;
    while total < bytes {
        let doc_seed = rng.next_u64();
        let doc = match rng.below(10) {
            0..=3 => {
                let kind = if rng.below(8) == 0 { TextKind::Mixed } else { TextKind::Prose };
                Doc { kind: DocKind::Prose, text: text::render(kind, 40 + rng.below(560), doc_seed) }
            }
            4..=6 => {
                let compact = text::render(TextKind::Json, 5 + rng.below(145), doc_seed);
                let text = if rng.below(2) == 0 {
                    compact
                } else {
                    serde_json::from_str::<serde_json::Value>(&compact)
                        .ok()
                        .and_then(|v| serde_json::to_string_pretty(&v).ok())
                        .unwrap_or(compact)
                };
                Doc { kind: DocKind::Json, text }
            }
            _ => {
                let text = if rng.below(3) == 0 {
                    text::huge(2_048 + rng.below(14_336), doc_seed)
                } else {
                    text::render(TextKind::Code, 10 + rng.below(190), doc_seed)
                };
                Doc { kind: DocKind::Code, text }
            }
        };
        total += doc.text.len();
        docs.push(doc);
    }
    docs
}

/// Total size of `docs` in bytes.
pub fn bytes(docs: &[Doc]) -> usize {
    docs.iter().map(|d| d.text.len()).sum()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_is_reproducible_mixed_and_sized() {
        let a = mixed(7, 200_000);
        assert_eq!(a, mixed(7, 200_000));
        assert_ne!(a, mixed(8, 200_000));
        assert!(bytes(&a) >= 200_000);
        // The last document is the one that passed the size.
        assert!(bytes(&a[..a.len() - 1]) < 200_000);
        for kind in [DocKind::Prose, DocKind::Json, DocKind::Code] {
            assert!(a.iter().any(|d| d.kind == kind), "{kind:?} missing");
        }
        assert!(a
            .iter()
            .filter(|d| d.kind == DocKind::Json)
            .all(|d| serde_json::from_str::<serde_json::Value>(&d.text).is_ok()));
        assert!(a.iter().any(|d| d.text.contains("\n  \"")), "no pretty-printed JSON");
        assert!(a.iter().any(|d| !d.text.is_ascii()), "no non-ASCII prose");
    }
}
