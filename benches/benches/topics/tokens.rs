//! Token counting throughput of every meter on the mixed corpus, in bytes and in tokens per
//! second: the four character heuristics of the seeds and exact `o200k_base` / `cl100k_base`.
//!
//! Each corpus document is a message, as a meter sees it in a context: prose as a user message,
//! JSON and code as tool results (the 001 and 004 heuristics count a tool result as
//! `JSON.stringify` of it, which parses JSON outputs). One iteration measures the whole corpus
//! (about 1 MiB) with `message_units`, uncached.

use std::hint::black_box;

use compaction::tokens::{CharsOver4, CharsOver4Plus2, CharsOver4Role4, LenOver4Plus4};
use compaction::{Exact, Message, TokenCounter};
use compactlens_benches::corpus::{self, DocKind};
use criterion::{Criterion, Throughput};

use super::quick;

/// The meters, with short bench names (`/` is criterion's path separator).
fn meters() -> Vec<(&'static str, Box<dyn TokenCounter>)> {
    vec![
        ("000_chars4", Box::new(CharsOver4)),
        ("001_chars4+2", Box::new(CharsOver4Plus2)),
        ("003_len4+4", Box::new(LenOver4Plus4)),
        ("004_chars4+4", Box::new(CharsOver4Role4)),
        ("o200k_base", Box::new(Exact::o200k())),
        ("cl100k_base", Box::new(Exact::cl100k())),
    ]
}

/// The corpus as messages.
pub fn corpus_messages() -> Vec<Message> {
    corpus::mixed(compactlens_benches::SEED, corpus::CORPUS_BYTES)
        .into_iter()
        .enumerate()
        .map(|(i, d)| match d.kind {
            DocKind::Prose => Message::user(d.text),
            DocKind::Json | DocKind::Code => Message::tool_result(format!("call_{i}"), "read_file", d.text),
        })
        .collect()
}

fn units(counter: &dyn TokenCounter, messages: &[Message]) -> u64 {
    messages.iter().map(|m| counter.message_units(black_box(m))).sum()
}

pub fn bench(c: &mut Criterion) {
    let messages = corpus_messages();
    let bytes: u64 = messages.iter().map(|m| m.content.len() as u64).sum();
    let meters = meters();
    for (unit, per_token) in [("bytes", false), ("tokens", true)] {
        let mut group = c.benchmark_group(format!("tokens/{unit}"));
        quick(&mut group, 10, 2);
        for (name, counter) in &meters {
            let throughput = if per_token {
                Throughput::Elements(counter.tokens_from_units(units(counter.as_ref(), &messages)))
            } else {
                Throughput::Bytes(bytes)
            };
            group.throughput(throughput);
            group.bench_function(*name, |b| b.iter(|| units(counter.as_ref(), &messages)));
        }
        group.finish();
    }
}
