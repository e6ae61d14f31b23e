//! Strategies with state per conversation, as the runner holds them.
//!
//! The kernel's [`Strategy`] is stateless: one value compacts every conversation. A strategy
//! that keeps state per conversation (an external program speaking the JSON-lines protocol,
//! [`crate::external`]) implements [`Sessions`]: the replay opens a [`Session`] for each
//! conversation, compacts with it as with any strategy, and fails the pair on its
//! [`Session::fault`]. These are the runner's concern; a production agent embedding the kernel
//! never sees them.

use compaction::{Budget, Strategy};

/// A strategy that opens a session for each conversation.
pub trait Sessions: Send + Sync {
    /// Open a session for `conversation` at `budget`'s window; `Err` says why it could not
    /// start.
    fn begin(&self, conversation: &str, budget: &Budget) -> Result<Box<dyn Session + '_>, String>;
}

/// One conversation's strategy: compacts as any [`Strategy`], and can fault.
pub trait Session: Strategy {
    /// A fault that ends the conversation for this strategy (the program crashed, hung or broke
    /// the protocol), with what it said.
    fn fault(&self) -> Option<String>;

    /// End the conversation, after its last call: `Err` is a fault found in doing so (the
    /// program answered out of turn), which fails the pair. Called once, by a replay that
    /// found no fault before.
    fn close(&self) -> Result<(), String> {
        Ok(())
    }
}

/// A strategy as a replay takes it.
#[derive(Clone, Copy)]
pub enum Compactor<'a> {
    /// A stateless strategy: the same value compacts every conversation.
    Stateless(&'a dyn Strategy),
    /// A strategy that opens a session per conversation; `strategy` is the same value as the
    /// catalog sees it (its name, estimator and profile).
    Sessions {
        /// What the configuration reports (name, estimator, operating condition).
        strategy: &'a dyn Strategy,
        /// Where each conversation's session comes from.
        sessions: &'a dyn Sessions,
    },
}

impl<'a> From<&'a dyn Strategy> for Compactor<'a> {
    fn from(strategy: &'a dyn Strategy) -> Compactor<'a> {
        Compactor::Stateless(strategy)
    }
}

impl<'a> Compactor<'a> {
    /// The strategy as the catalog sees it.
    pub fn strategy(&self) -> &'a dyn Strategy {
        match self {
            Compactor::Stateless(s) => *s,
            Compactor::Sessions { strategy, .. } => *strategy,
        }
    }
}
