//! The offline stand-in summarizer against Claude Code's own summaries: at every real
//! compaction of the shared Claude Code sessions (`claude-code-spotter`, `claude-code-entire`),
//! the stand-in summarizes the same span (from the previous compaction, or the start, to the
//! message before the summary) and the two are compared on what a reader would look for:
//!
//! - **files**: file names (the last segment of every path-like token);
//! - **identifiers**: snake_case, camelCase, kebab-case with a letter, and qualified names;
//! - **status**: the status facts stated (done, in progress, pending, committed, not
//!   committed, tests pass, tests fail, not fixed), read with the offline judge's
//!   normalization;
//! - **user requests**: the span's user messages each summary states (half of a message's
//!   first 20 content words present).
//!
//! For each, **covered** is the share of the real summary's items the stand-in holds too, and
//! **added** the share of the stand-in's items the real summary lacks. The figures (pooled
//! over all compactions) are printed, recorded in reports/README.md, and held above the
//! floors below. Skipped, with the reason printed, when the corpora folder is absent.

// The test prints why it skips, and the figures.
#![allow(clippy::print_stdout)]

use std::collections::BTreeSet;
use std::path::Path;

use compaction::{Context, Conversation, Role, SummaryRequest};
use dataset::import::{import, is_harness_text, FormatChoice, ImportOptions};
use runner::judge::text::normalize;
use runner::replay::Summarizer;
use runner::summarize::OfflineSummarizer;

const CORPORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpora");

/// The floors, in percent: the figures reports/README.md records, rounded down.
const FLOORS: [(&str, f64); 4] = [("files", 75.0), ("identifiers", 18.0), ("status", 42.0), ("user requests", 60.0)];

fn sessions() -> Option<Vec<Conversation>> {
    let root = Path::new(CORPORA);
    if !root.is_dir() {
        println!("skipped: no corpora folder at {CORPORA}");
        return None;
    }
    let options = ImportOptions { format: FormatChoice::Auto, strict: false, include_compaction_calls: false };
    let mut out = Vec::new();
    for dir in ["claude-code-spotter", "claude-code-entire"] {
        for f in import(&[root.join(dir)], &options) {
            out.extend(
                f.conversations.into_iter().filter(|c| c.meta.get("kind").and_then(|v| v.as_str()) != Some("subagent")),
            );
        }
    }
    Some(out)
}

const EXTENSIONS: [&str; 24] = [
    "go", "rs", "py", "ts", "tsx", "js", "ex", "exs", "heex", "md", "json", "jsonl", "toml", "yaml", "yml", "sh",
    "css", "html", "sql", "lock", "txt", "eex", "mod", "sum",
];

/// Tokens of `text`, split at whitespace and at punctuation that never sits inside a name.
fn raw_tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || "`'\"()[]{}<>,;|*=".contains(c))
        .map(|t| t.trim_matches(|c: char| ".:!?#".contains(c)))
        .filter(|t| t.len() >= 3)
}

fn file_names(text: &str) -> BTreeSet<String> {
    raw_tokens(text)
        .filter_map(|t| {
            let name = t.rsplit('/').next()?;
            let (stem, ext) = name.rsplit_once('.')?;
            (!stem.is_empty() && EXTENSIONS.contains(&ext)).then(|| name.to_lowercase())
        })
        .collect()
}

fn identifiers(text: &str) -> BTreeSet<String> {
    raw_tokens(text)
        .filter(|t| !t.contains('/') && !t.contains("://"))
        .filter(|t| {
            let letters = t.chars().filter(|c| c.is_alphabetic()).count();
            let ident = t.chars().all(|c| c.is_alphanumeric() || "_.-".contains(c));
            let camel = t.as_bytes().windows(2).any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
            let qualified = t.split('.').filter(|p| !p.is_empty()).count() >= 2
                && !EXTENSIONS.contains(&t.rsplit('.').next().unwrap_or(""))
                && t.split('.').all(|p| p.chars().next().is_some_and(char::is_alphabetic));
            ident && letters >= 3 && (t.contains('_') || camel || qualified || (t.contains('-') && letters >= 4))
        })
        .map(|t| t.trim_end_matches('.').to_lowercase())
        .collect()
}

/// The status facts `text` states, in the judge's normalized words.
fn statuses(text: &str) -> BTreeSet<&'static str> {
    const STATUS: [&str; 8] =
        ["done", "in-progress", "pending", "committed", "uncommitted", "tests-pass", "tests-fail", "unfixed"];
    let n = normalize(text);
    let words: BTreeSet<&str> = n.split([' ', '\n']).collect();
    STATUS.into_iter().filter(|s| words.contains(s)).collect()
}

fn content_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 4)
        .map(str::to_lowercase)
        .take(20)
        .collect()
}

/// The user messages of a span that `summary` states.
fn requests_stated(requests: &[Vec<String>], summary: &str) -> BTreeSet<usize> {
    let words: BTreeSet<String> = content_words_all(summary);
    requests
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.is_empty() && r.iter().filter(|w| words.contains(*w)).count() * 2 >= r.len())
        .map(|(i, _)| i)
        .collect()
}

fn content_words_all(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.chars().count() >= 4).map(str::to_lowercase).collect()
}

/// Pooled counts of one kind of item.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    real: usize,
    covered: usize,
    stand_in: usize,
    added: usize,
}

impl Tally {
    fn add<T: Ord>(&mut self, real: &BTreeSet<T>, stand_in: &BTreeSet<T>) {
        self.real += real.len();
        self.covered += real.intersection(stand_in).count();
        self.stand_in += stand_in.len();
        self.added += stand_in.difference(real).count();
    }
    fn covered(&self) -> f64 {
        100.0 * self.covered as f64 / self.real.max(1) as f64
    }
    fn added(&self) -> f64 {
        100.0 * self.added as f64 / self.stand_in.max(1) as f64
    }
}

#[test]
fn the_stand_in_covers_what_real_summaries_keep() {
    let Some(convs) = sessions() else { return };
    let mut tallies = [Tally::default(); 4];
    let mut compactions = 0;
    let (mut real_chars, mut stand_in_chars) = (0usize, 0usize);
    for conv in &convs {
        let mut start = 0;
        let mut round = 1;
        for (i, m) in conv.messages.iter().enumerate() {
            if !m.meta_flag("compact_summary") {
                continue;
            }
            let span = &conv.messages[start..i];
            let ctx = Context::from_messages(span.to_vec());
            let request = SummaryRequest::new(
                (0..span.len()).collect(),
                compaction_strategies::keep_last_n::prompt(),
                16_384,
                round,
            );
            let summary = OfflineSummarizer::new().summarize(&ctx, &request).expect("summarizes").text;
            let real = m.content.as_str();
            // To read the pairs side by side: the folder to write them to.
            if let Ok(dir) = std::env::var("COMPACTLENS_DUMP_SUMMARIES") {
                std::fs::create_dir_all(&dir).expect("the dump folder");
                let base = Path::new(&dir).join(format!("{}-{i}", conv.id));
                std::fs::write(base.with_extension("real.md"), real).expect("write");
                std::fs::write(base.with_extension("stand-in.md"), &summary).expect("write");
            }
            compactions += 1;
            real_chars += real.chars().count();
            stand_in_chars += summary.chars().count();
            tallies[0].add(&file_names(real), &file_names(&summary));
            tallies[1].add(&identifiers(real), &identifiers(&summary));
            tallies[2].add(&statuses(real), &statuses(&summary));
            let requests: Vec<Vec<String>> = span
                .iter()
                .filter(|u| u.role == Role::User && !is_harness_text(&u.content) && !u.meta_flag("compact_summary"))
                .map(|u| content_words(&u.content))
                .collect();
            tallies[3].add(&requests_stated(&requests, real), &requests_stated(&requests, &summary));
            start = i;
            round += 1;
        }
    }
    assert!(compactions >= 20, "{compactions} real compactions found");
    let names = ["files", "identifiers", "status", "user requests"];
    let figures: Vec<String> = names
        .iter()
        .zip(&tallies)
        .map(|(n, t)| {
            format!("{n} {:.1}% covered (of {}), {:.1}% added (of {})", t.covered(), t.real, t.added(), t.stand_in)
        })
        .collect();
    let line = format!(
        "stand-in against {compactions} real compactions: {}; mean length {} against {} characters",
        figures.join("; "),
        stand_in_chars / compactions,
        real_chars / compactions
    );
    println!("{line}");
    for ((name, floor), t) in FLOORS.iter().zip(&tallies) {
        assert!(t.covered() >= *floor, "{name}: {:.1}% covered, below the floor {floor}%", t.covered());
    }
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reports/README.md"))
        .expect("reports/README.md");
    assert!(readme.contains(&line), "reports/README.md must record:\n{line}");
}
