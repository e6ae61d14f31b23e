//! Context compaction for LLM agents.
//!
//! When a conversation nears the model's window, an agent must drop, mask or summarize old
//! messages. This crate is the kernel: the message model, token meters, plans and layouts, the
//! pairing rule, the invariant checker, provider checks, the [`compact`] driver, the per-conversation
//! [`Compactor`] and the
//! [`Strategy`] trait (the strategies themselves are the `compaction-strategies` crate). It is pure and synchronous: no I/O, no async, no HTTP. A strategy
//! never calls a model; it plans, the caller summarizes, the strategy applies, and
//! [`compact`] drives the three (with a re-plan when the summarizer's own request is too long):
//!
//! ```
//! use compaction::{compact, Budget, Context, Message, Summaries, Trigger};
//! use compaction_strategies::StrategyConfig;
//!
//! let mut messages = vec![Message::system("You are a coding agent.")];
//! for i in 0..40 {
//!     messages.push(Message::user(format!("step {i}: {}", "lorem ipsum ".repeat(200))));
//!     messages.push(Message::assistant("done"));
//! }
//! let ctx = Context::from_messages(messages);
//! let strategy = StrategyConfig::default_for("truncate").unwrap().build().unwrap();
//! let budget = Budget::new(8_000);
//! if strategy.should_compact(&ctx, &budget) {
//!     // One summary per request (none for truncate).
//!     let summarize = |_: &Context, requests: &[compaction::SummaryRequest]| {
//!         Summaries::of(requests.iter().map(|_| Ok(String::from("summary"))).collect())
//!     };
//!     let step = compact(strategy.as_ref(), &ctx, &budget, Trigger::Proactive, summarize).unwrap();
//!     assert!(step.compacted.context.len() < ctx.len());
//!     let out = &step.compacted;
//!     assert!(compaction::check_compaction(strategy.as_ref(), &ctx, &budget, step.trigger, out).is_empty());
//! }
//! ```

#![deny(missing_docs)]
pub mod compactor;
pub mod context;
pub mod driver;
pub mod invariants;
pub mod layout;
pub mod masking;
pub mod message;
pub mod pairing;
pub mod plan;
pub mod prompt;
pub mod request;
pub mod strategy;
pub mod tokens;

pub use compactor::{Compaction, Compactor};
pub use context::{Context, Entry, Inserted, Origin, ToolResults};
pub use driver::{compact, Step, Summaries};
pub use invariants::{check_compaction, check_context, Violation};
pub use layout::{build_layout, covered, Built};
pub use masking::{check_masks, mask_in_place, masked_entry, ContextShape, Masked};
#[cfg(feature = "dataset")]
pub use message::{Conversation, InRealSummary, Probe, ProbeKind, ProbeOrigin, Tier};
pub use message::{Message, Role, ThinkingBlock, ThinkingKind, ToolCall};
pub use plan::{
    Budget, Change, Compacted, CompactionEvent, Fallback, MaskAnswer, MaskPlan, Plan, Promises, Slot, SummaryFailure,
    SummaryOutcome, SummaryRequest, Trigger, ViolationKind,
};
pub use prompt::{InputCuts, Prompt, Transcript};
pub use request::{
    check_messages, check_request, thinking_rejection, IncrementalCheck, Provider, Rejection, RequestRule,
};
pub use strategy::{apply_layout, Profile, Strategy};
pub use tokens::{Encoding, Exact, TokenCounter};
