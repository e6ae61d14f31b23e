//! The Rust side of the peer comparison (`benches/peers/run.sh`).
//!
//! [`write_inputs`] writes, once per run, the files both sides read: the mixed corpus
//! ([`CORPUS_FILE`], a JSON array of strings), the agent conversation ([`CONVERSATION_FILE`], a
//! JSON array of messages in the dataset format) and the `o200k_base` vocabulary in tiktoken's
//! file format ([`VOCAB_FILE`], written from the vocabulary compiled into this binary; tiktoken
//! checks its SHA-256 against the published one before using it, so both sides provably count
//! with the same vocabulary).
//!
//! The agent loop ([`agent_loop`]) replays the conversation as an agent does: before each model
//! call (each assistant message) it trims the history so far to [`MAX_TOKENS`] with `truncate`
//! (`max_tokens`, `start_on_user`, and the counter under test), the job LangChain's
//! `trim_messages(strategy="last", include_system=True, start_on="human")` does on the Python
//! side. [`check_trims`] then rebuilds every trimmed history and checks it is within budget with
//! no orphaned tool result.

use std::path::Path;

use anyhow::Context as _;
use compaction::{check_context, Budget, Context, Entry, Message, Role, Strategy, TokenCounter, Trigger, Violation};
use compaction_strategies::common::Counter;
use compaction_strategies::truncate::{self, Truncate};
use serde::{Deserialize, Serialize};

use crate::conversations::{generate, Shape};
use crate::corpus;

pub const CORPUS_FILE: &str = "corpus.json";
pub const CONVERSATION_FILE: &str = "conversation.json";
pub const VOCAB_FILE: &str = "o200k_base.tiktoken";

/// Messages of the agent-loop conversation.
pub const LOOP_MESSAGES: usize = 2_000;
/// The token budget every trimmed history must fit.
pub const MAX_TOKENS: u64 = 32_000;
/// Turns over this many bytes are left out of the loop conversation, so that one exchange
/// always fits the budget and no trimmed history has to be empty.
pub const LOOP_TURN_BYTES: usize = 16_000;

/// What [`write_inputs`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Inputs {
    pub corpus_docs: usize,
    pub corpus_bytes: usize,
    pub conversation_messages: usize,
    pub model_calls: usize,
    pub tool_results: usize,
}

/// Write the corpus, the conversation and the vocabulary into `dir`.
pub fn write_inputs(dir: &Path, seed: u64) -> anyhow::Result<Inputs> {
    let docs = corpus::mixed(seed, corpus::CORPUS_BYTES);
    let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
    write(dir, CORPUS_FILE, &serde_json::to_string(&texts)?)?;
    let messages = loop_conversation(seed);
    write(dir, CONVERSATION_FILE, &serde_json::to_string(&messages)?)?;
    write(dir, VOCAB_FILE, &tiktoken_file(&bpe_openai::o200k_base().bpe))?;
    Ok(Inputs {
        corpus_docs: docs.len(),
        corpus_bytes: corpus::bytes(&docs),
        conversation_messages: messages.len(),
        model_calls: model_calls(&messages),
        tool_results: messages.iter().filter(|m| m.role == Role::Tool).count(),
    })
}

fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// The agent-loop conversation: [`LOOP_MESSAGES`] messages with tool calls, from testkit's
/// generators, turns over [`LOOP_TURN_BYTES`] left out.
pub fn loop_conversation(seed: u64) -> Vec<Message> {
    let mut messages =
        generate(Shape { messages: LOOP_MESSAGES, seed, max_turn_bytes: Some(LOOP_TURN_BYTES) }).messages;
    // Calls only happen before assistant messages, so a cut inside the last turn changes no call.
    messages.truncate(LOOP_MESSAGES);
    messages
}

/// Model calls of a replay of `messages`: one per assistant message after the first message.
pub fn model_calls(messages: &[Message]) -> usize {
    messages.iter().skip(1).filter(|m| m.role == Role::Assistant).count()
}

pub fn read_corpus(dir: &Path) -> anyhow::Result<Vec<String>> {
    let path = dir.join(CORPUS_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

pub fn read_conversation(dir: &Path) -> anyhow::Result<Vec<Message>> {
    let path = dir.join(CONVERSATION_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// A vocabulary in tiktoken's file format: one `base64(token bytes) rank` line per token.
pub fn tiktoken_file(bpe: &bpe_openai::byte_pair_encoding::BytePairEncoding) -> String {
    let mut out = String::with_capacity(bpe.num_tokens() * 16);
    for id in 0..bpe.num_tokens() {
        // Token ids are below the vocabulary size, which fits u32 (the BPE stores ids as u32).
        let id = id as u32;
        base64(bpe.token_bytes(id), &mut out);
        out.push(' ');
        out.push_str(&id.to_string());
        out.push('\n');
    }
    out
}

/// Standard base64 with padding, appended to `out`.
pub fn base64(bytes: &[u8], out: &mut String) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (k, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if k <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
}

/// The `truncate` strategy of the agent loop.
pub fn trimmer(counter: Counter) -> anyhow::Result<Truncate> {
    Ok(Truncate::new(truncate::Params {
        max_tokens: Some(MAX_TOKENS),
        counter,
        start_on_user: true,
        ..truncate::Params::default()
    })?)
}

/// Where each trimmed history of an agent loop starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trims {
    /// Per model call, the index of the message the call is made before.
    pub calls: Vec<usize>,
    /// Per model call, the index of the first message kept after the system prompt (equal to
    /// the call's index when nothing but the system prompt is kept).
    pub starts: Vec<usize>,
}

/// Replay `entries` (recorded messages `0..n`, in order) as an agent loop: before each model
/// call, trim the history so far with `strategy`, then append the next message. Each message is
/// metered once, when appended; a trim costs O(dropped + kept).
pub fn agent_loop(strategy: &Truncate, entries: Vec<Entry>) -> Trims {
    let budget = Budget::new(MAX_TOKENS);
    let mut ctx = Context::new();
    let mut trims = Trims { calls: Vec::new(), starts: Vec::new() };
    for (i, entry) in entries.into_iter().enumerate() {
        if entry.role() == Role::Assistant && !ctx.is_empty() {
            if strategy.should_compact(&ctx, &budget) {
                if let Some(plan) = strategy.plan(&ctx, &budget, Trigger::Proactive) {
                    ctx = strategy.apply(&ctx, &budget, &plan, &[]).context;
                }
            }
            let body = usize::from(ctx.system_prompt().is_some());
            let start = ctx.get(body).and_then(|e| e.origin().verbatim_index()).unwrap_or(i);
            trims.calls.push(i);
            trims.starts.push(start);
        }
        ctx.push_metered(entry, &[strategy.estimator()]);
    }
    trims
}

/// The recorded messages as entries, ready for [`agent_loop`].
pub fn entries(messages: &[Message]) -> Vec<Entry> {
    messages.iter().cloned().enumerate().map(|(i, m)| Entry::recorded(i, m)).collect()
}

/// What [`check_trims`] found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrimCheck {
    /// Trimmed histories over the budget under the loop's counter.
    pub over_budget: usize,
    /// Tool results whose call was trimmed away, over all histories.
    pub orphans: usize,
    /// Trimmed histories with no message left after the system prompt.
    pub empty: usize,
    /// The largest trimmed history, in the counter's tokens.
    pub max_tokens: u64,
    /// Mean messages per trimmed history, system prompt included.
    pub mean_kept: f64,
}

/// Rebuild every trimmed history of `trims` from `messages` and check it.
pub fn check_trims(messages: &[Message], trims: &Trims, counter: &dyn TokenCounter) -> TrimCheck {
    let all = entries(messages);
    let units: Vec<u64> = all.iter().map(|e| e.units(counter)).collect();
    let mut prefix = vec![0u64; units.len() + 1];
    for (i, u) in units.iter().enumerate() {
        prefix[i + 1] = prefix[i] + u;
    }
    let system = all.first().filter(|e| e.role() == Role::System);
    let mut check = TrimCheck::default();
    let mut kept_total = 0usize;
    for (&call, &start) in trims.calls.iter().zip(&trims.starts) {
        let head = usize::from(system.is_some());
        let units = prefix[head] + prefix[call] - prefix[start.max(head).min(call)];
        let tokens = counter.tokens_from_units(units);
        check.max_tokens = check.max_tokens.max(tokens);
        if tokens > MAX_TOKENS {
            check.over_budget += 1;
        }
        if start >= call {
            check.empty += 1;
        }
        let history: Vec<Entry> = system.into_iter().chain(&all[start.max(head).min(call)..call]).cloned().collect();
        kept_total += history.len();
        check.orphans += check_context(&Context::from_entries(history))
            .iter()
            .filter(|v| matches!(v, Violation::OrphanToolResult { .. }))
            .count();
    }
    check.mean_kept = kept_total as f64 / trims.calls.len().max(1) as f64;
    check
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::Exact;

    #[test]
    fn base64_matches_the_rfc_examples() {
        for (plain, encoded) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")]
        {
            let mut out = String::new();
            base64(plain.as_bytes(), &mut out);
            assert_eq!(out, encoded, "{plain}");
        }
    }

    #[test]
    fn the_vocabulary_file_has_one_line_per_token_in_rank_order() {
        let bpe = &bpe_openai::o200k_base().bpe;
        let file = tiktoken_file(bpe);
        let lines: Vec<&str> = file.lines().collect();
        assert_eq!(lines.len(), bpe.num_tokens());
        // Rank 0 of o200k_base is "!" (base64 "IQ=="), as in the published file.
        assert_eq!(lines[0], "IQ== 0");
        assert!(lines[1000].ends_with(" 1000"));
    }

    #[test]
    fn the_agent_loop_keeps_every_history_within_budget_and_pairs_intact() {
        let messages = loop_conversation(7);
        assert_eq!(messages.len(), LOOP_MESSAGES);
        for counter in [Counter::CharsOver4, Counter::O200kBase] {
            let s = trimmer(counter).unwrap();
            let trims = agent_loop(&s, entries(&messages));
            assert_eq!(trims.calls.len(), model_calls(&messages));
            let check = check_trims(&messages, &trims, s.estimator());
            assert_eq!(check.over_budget, 0, "{counter:?}: {check:?}");
            assert_eq!(check.orphans, 0, "{counter:?}: {check:?}");
            assert_eq!(check.empty, 0, "{counter:?}: {check:?}");
            assert!(check.max_tokens > MAX_TOKENS / 2, "the budget binds: {check:?}");
            // Every kept history starts at a user message.
            assert!(trims.starts.iter().zip(&trims.calls).all(|(&s, &c)| s < c && messages[s].role == Role::User));
        }
    }

    #[test]
    fn a_trim_that_cuts_a_call_from_its_result_is_caught() {
        let messages = vec![
            Message::system("s"),
            Message::user("go"),
            Message::assistant_calls(
                "",
                vec![compaction::ToolCall { id: "c".into(), name: "ls".into(), arguments: "{}".into() }],
            ),
            Message::tool_result("c", "ls", "a b c"),
            Message::assistant("done"),
        ];
        let bad = Trims { calls: vec![4], starts: vec![3] };
        let check = check_trims(&messages, &bad, &Exact::o200k());
        assert_eq!(check.orphans, 1);
        let good = Trims { calls: vec![4], starts: vec![1] };
        assert_eq!(check_trims(&messages, &good, &Exact::o200k()).orphans, 0);
    }
}
