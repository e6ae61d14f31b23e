//! Test helpers: conversation builders, proptest generators, offline summaries and the context
//! shape renderer.
//!
//! - [`builder`]: a fluent [`builder::ContextBuilder`] for hand-written fixtures.
//! - [`gen`]: proptest generators of realistic, well-formed agent conversations.
//! - [`shape`]: one line per entry (`03 assistant tool_call read_file`), for insta snapshots.
//! - [`summaries`]: deterministic offline summary texts and a failing summarizer.
//! - [`text`]: deterministic text expanded from small seeds.
//! - [`server`]: a local HTTP server speaking the OpenAI and Anthropic protocols, scripted
//!   per request (successes, 429, 500, hangs, malformed and truncated bodies, context-length
//!   errors), that records what it receives.
//!
//! ```
//! use testkit::builder::ContextBuilder;
//!
//! let ctx = ContextBuilder::new().system("Be brief.").user("hi").assistant("hello").build();
//! let shape = testkit::shape::render(&ctx, &compaction::Exact::o200k());
//! assert_eq!(shape.lines().count(), 3);
//! assert!(shape.starts_with("00 system"));
//! ```

pub mod builder;
pub mod gen;
pub mod server;
pub mod shape;
pub mod summaries;
pub mod text;

pub use builder::{Call, ContextBuilder};
