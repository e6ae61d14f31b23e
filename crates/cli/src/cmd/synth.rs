//! `compactlens synth --seed N --out DIR [--families a,b] [--per-family K]`: write the
//! synthetic datasets, one JSONL file per family (`DIR/<family>.jsonl`).
//!
//! The same seed writes the same bytes on every platform; conversation `i` of a family does
//! not depend on `--per-family` or `--families`. One summary line per file goes to stdout.

use std::path::PathBuf;

use anyhow::Context as _;
use compaction::{Exact, TokenCounter};
use synth::{self, Family};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The seed; the shipped datasets use 42.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Folder to write `<family>.jsonl` files into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Families to generate, comma-separated (coding, cms, paper, support, data). Default: all.
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    families: Vec<Family>,
    /// Conversations per family: item i is small, medium or large by i % 3.
    /// At most 100000: the conversations of a family are held in memory before they are written.
    #[arg(long, default_value_t = 3, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    per_family: u32,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let families = if args.families.is_empty() { Family::ALL.to_vec() } else { args.families };
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let meter = Exact::o200k();
    for family in families {
        let conversations = synth::generate_family(args.seed, family, args.per_family as usize);
        let text = synth::to_jsonl(&conversations).context("serializing conversations")?;
        let path = args.out.join(format!("{}.jsonl", family.name()));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        let messages: usize = conversations.iter().map(|c| c.messages.len()).sum();
        let probes: usize = conversations.iter().map(|c| c.probes.len()).sum();
        let tokens: Vec<u64> = conversations.iter().map(|c| meter.messages_tokens(&c.messages)).collect();
        say!(
            "{}: {}, {}, {}, {} tokens (o200k_base; per conversation: {})",
            path.display(),
            count(conversations.len(), "conversation"),
            count(messages, "message"),
            count(probes, "probe"),
            tokens.iter().sum::<u64>(),
            tokens.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
        );
    }
    Ok(crate::exit::OK)
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
