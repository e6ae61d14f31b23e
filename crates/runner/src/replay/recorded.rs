//! The recorded messages of a conversation, metered once and shared by its replays.

use compaction::{Conversation, Encoding, Entry, Exact, Message};

/// A conversation's recorded messages as context entries, metered once with the exact counter,
/// shared by every replay of the conversation that runs inside [`Recorded::lend`]: a run
/// replays each conversation under every configuration, and an entry's token counts are kept
/// with it ([`Entry::units`]), so each message is tokenized once per run instead of once per
/// pair. Replays with or without it give the same figures (an entry's count does not depend
/// on who measured it first).
#[derive(Debug)]
pub struct Recorded {
    conversation: std::sync::Arc<Conversation>,
    pub(super) entries: Vec<Entry>,
    /// What the offline judge keeps for the conversation's messages.
    judge: crate::judge::offline::Shared,
    /// What the offline summarizer keeps for them.
    summarizer: crate::summarize::offline::Shared,
    encoding: Encoding,
    /// The first entry no worker has started metering ([`Recorded::meter`]).
    next: std::sync::atomic::AtomicUsize,
}

thread_local! {
    /// The entries lent to the replays of this thread ([`Recorded::lend`]).
    static LENT: std::cell::RefCell<Option<std::sync::Arc<Recorded>>> = const { std::cell::RefCell::new(None) };
}

impl Recorded {
    /// Every recorded message of `conversation` as an entry, metered with `encoding`.
    pub fn new(conversation: std::sync::Arc<Conversation>, encoding: Encoding) -> Recorded {
        let recorded = Recorded::unmetered(conversation, encoding);
        recorded.meter();
        recorded
    }

    /// The entries, not metered yet: each worker that will replay them calls
    /// [`Recorded::meter`], and the workers share the metering instead of one waiting for it.
    pub fn unmetered(conversation: std::sync::Arc<Conversation>, encoding: Encoding) -> Recorded {
        let entries: Vec<Entry> =
            conversation.messages.iter().enumerate().map(|(i, m)| Entry::recorded(i, m.clone())).collect();
        let judge = crate::judge::offline::Shared::new(entries.len());
        let summarizer = crate::summarize::offline::Shared::new(entries.len());
        Recorded { conversation, entries, judge, summarizer, encoding, next: Default::default() }
    }

    /// Meter the entries no other worker has taken yet, a few at a time; returns when every
    /// entry is taken (another worker may still be metering its last few: a replay that
    /// reaches one first meters it too, to the same count).
    pub fn meter(&self) {
        const AT_ONCE: usize = 8;
        let exact = Exact::new(self.encoding);
        loop {
            let start = self.next.fetch_add(AT_ONCE, std::sync::atomic::Ordering::Relaxed);
            let Some(entries) = self.entries.get(start..) else { return };
            if entries.is_empty() {
                return;
            }
            for e in entries.iter().take(AT_ONCE) {
                e.units(&exact);
            }
        }
    }

    /// The offline summarizer's store for this conversation.
    pub(crate) fn summarizer(&self) -> &crate::summarize::offline::Shared {
        &self.summarizer
    }

    /// The entries lent to this thread's replays, whatever their conversation.
    pub(crate) fn lent() -> Option<std::sync::Arc<Recorded>> {
        LENT.with(|l| l.borrow().clone())
    }

    /// The entries, one per recorded message.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The offline judge's store for this conversation.
    pub(crate) fn judge(&self) -> &crate::judge::offline::Shared {
        &self.judge
    }

    /// `Some(self)` when `message` is recorded message `index`'s own, as these entries hold it
    /// (not a copy, nor a message a strategy changed): what is kept for the message applies.
    pub(crate) fn shared_entry(&self, index: usize, message: &Message) -> Option<&Recorded> {
        self.entries.get(index).filter(|e| std::ptr::eq(e.message(), message)).map(|_| self)
    }

    /// Run `f` with these entries lent to the replays it makes on this thread of this
    /// conversation (the same `Arc`); a replay of any other conversation builds its own.
    pub fn lend<T>(self: &std::sync::Arc<Recorded>, f: impl FnOnce() -> T) -> T {
        /// Puts back what was lent before, also when `f` panics.
        struct Restore(Option<std::sync::Arc<Recorded>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let before = self.0.take();
                LENT.with(|l| *l.borrow_mut() = before);
            }
        }
        let _restore = Restore(LENT.with(|l| l.replace(Some(self.clone()))));
        f()
    }

    /// The entries lent for `conversation`, when they are.
    pub(crate) fn lent_for(conversation: &Conversation) -> Option<std::sync::Arc<Recorded>> {
        LENT.with(|l| {
            l.borrow().as_ref().filter(|r| std::ptr::eq(std::sync::Arc::as_ptr(&r.conversation), conversation)).cloned()
        })
    }
}
