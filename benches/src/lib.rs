//! Fixtures of the compactlens benches: a mixed text corpus and long agent conversations,
//! both built reproducibly from a seed, and the input files of the peer comparison.
//!
//! The criterion benches (`cargo bench -p compactlens-benches`) and the Rust side of the peer
//! comparison (`bash benches/peers/run.sh`, binary `peer`) measure the same inputs:
//!
//! - [`corpus::mixed`]: prose, JSON tool output and source code, about a megabyte;
//! - [`conversations::generated`]: an agent conversation of at least `n` messages, built by
//!   testkit's proptest generators from a fixed seed (tool calls, parallel calls, errors, huge
//!   outputs, chitchat);
//! - [`peer`]: the files both sides of the comparison read, the agent loop and its checks.
//!
//! ```
//! let docs = compactlens_benches::corpus::mixed(7, 20_000);
//! assert!(docs.iter().map(|d| d.text.len()).sum::<usize>() >= 20_000);
//! let convo = compactlens_benches::conversations::generated(200, 7);
//! assert!(convo.messages.len() >= 200);
//! ```

//! Every bench and binary here runs with the global allocator of the `compactlens` binary
//! (mimalloc), so that the figures are those of the program users run; the feature
//! `system-allocator` measures with the system allocator instead (what a program that embeds
//! the `compaction` crate without choosing an allocator gets).

#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod conversations;
pub mod corpus;
pub mod peer;

/// The seed every fixture uses unless a bench says otherwise.
pub const SEED: u64 = 7;
