//! Context compaction for LLM agents.
//!
//! When a conversation nears the model's window, an agent must drop, mask or summarize old
//! messages. This crate holds the message model, token meters, the compaction strategies and
//! the invariant checker. It is pure and synchronous: no I/O, no async, no HTTP. A strategy
//! never calls a model; it plans, the caller summarizes, the strategy applies:
//!
//! ```
//! use compaction::{Budget, Context, Message, StrategyConfig, Trigger};
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
//!     let plan = strategy.plan(&ctx, &budget, Trigger::Proactive).unwrap();
//!     // Produce one summary per request (none for truncate), then apply.
//!     let summaries: Vec<_> = plan.requests.iter().map(|_| Ok(String::from("summary"))).collect();
//!     let out = strategy.apply(&ctx, &budget, &plan, &summaries);
//!     assert!(out.context.len() < ctx.len());
//!     assert!(compaction::check_compaction(strategy.as_ref(), &ctx, &budget, Trigger::Proactive, &out).is_empty());
//! }
//! ```

pub mod context;
pub mod invariants;
pub mod message;
pub mod pairing;
pub mod request;
pub mod strategies;
pub mod strategy;
pub mod tokens;

pub use context::{Context, Entry, Inserted, Origin};
pub use invariants::{check_compaction, check_context, Violation, ViolationKind};
pub use message::{Conversation, Message, Probe, ProbeKind, Role, ToolCall};
pub use request::{check_messages, check_request, Provider, Rejection, RequestRule};
pub use strategies::{catalog, ParamError, StrategyConfig, StrategyInfo};
pub use strategy::{
    apply_layout, build_layout, Budget, Compacted, CompactionEvent, Fallback, InputCuts, Plan, Promises, PromptKind,
    Slot, Strategy, SummaryFailure, SummaryOutcome, SummaryRequest, Trigger,
};
pub use tokens::{Encoding, Exact, TokenCounter};
