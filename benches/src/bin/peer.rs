//! The Rust side of the peer comparison, run by `benches/peers/run.sh`.
//!
//! ```text
//! peer inputs DIR              write the corpus, the conversation and the vocabulary into DIR
//! peer count DIR               count the corpus exactly (o200k_base), single-threaded
//! peer trim DIR COUNTER        the agent loop with `truncate` and COUNTER (chars/4 or o200k_base)
//! ```
//!
//! Each task prints one JSON object on stdout. The timed part excludes reading the inputs and
//! loading the vocabulary, as on the Python side; the outputs are checked after the timer.
#![allow(clippy::print_stdout)] // This binary's output is its JSON report.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context as _};
use compaction::{Exact, Strategy};
use compaction_strategies::common::Counter;
use compactlens_benches::peer;
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, dir) = match args.as_slice() {
        [task, dir, ..] => (task.as_str(), PathBuf::from(dir)),
        _ => bail!("usage: peer inputs|count|trim DIR [COUNTER]"),
    };
    let report = match task {
        "inputs" => serde_json::to_value(peer::write_inputs(&dir, compactlens_benches::SEED)?)?,
        "count" => count(&dir)?,
        "trim" => {
            let counter: Counter = serde_json::from_value(json!(args.get(2).context("trim needs a COUNTER")?))
                .context("COUNTER is chars/4, o200k_base or cl100k_base")?;
            trim(&dir, counter)?
        }
        other => bail!("unknown task {other}: inputs, count or trim"),
    };
    println!("{report}");
    Ok(())
}

fn count(dir: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    let docs = peer::read_corpus(dir)?;
    let exact = Exact::o200k();
    // Load the vocabulary before the timer.
    exact.count("warm up");
    let start = Instant::now();
    let tokens: u64 = docs.iter().map(|d| exact.count(d)).sum();
    let seconds = start.elapsed().as_secs_f64();
    let bytes: usize = docs.iter().map(String::len).sum();
    Ok(json!({
        "side": "compactlens",
        "task": "count",
        "seconds": seconds,
        "tokens": tokens,
        "docs": docs.len(),
        "bytes": bytes,
    }))
}

fn trim(dir: &std::path::Path, counter: Counter) -> anyhow::Result<serde_json::Value> {
    let messages = peer::read_conversation(dir)?;
    let strategy = peer::trimmer(counter)?;
    let entries = peer::entries(&messages);
    // Load the vocabulary before the timer.
    strategy.estimator().text_tokens("warm up");
    let start = Instant::now();
    let trims = peer::agent_loop(&strategy, entries);
    let seconds = start.elapsed().as_secs_f64();
    let check = peer::check_trims(&messages, &trims, strategy.estimator());
    Ok(json!({
        "side": "compactlens",
        "task": "trim",
        "counter": strategy.estimator().name(),
        "seconds": seconds,
        "messages": messages.len(),
        "calls": trims.calls.len(),
        "starts": trims.starts,
        "check": check,
    }))
}
