//! The recorded messages of a conversation, metered once and shared by its replays.

use std::sync::Arc;

use compaction::{Conversation, Encoding, Entry, Exact};

/// A conversation's recorded messages as context entries, metered once with the exact counter,
/// shared by every replay of the conversation that is handed them ([`super::Models::recorded`]):
/// a run replays each conversation under every configuration, and an entry's token counts are
/// kept with it ([`Entry::units`]), so each message is tokenized once per run instead of once
/// per pair. Replays with or without it give the same figures (an entry's count does not depend
/// on who measured it first). Beside the entries, the offline judge's and the offline
/// summarizer's stores for the conversation, which the replay hands them as an argument.
#[derive(Debug)]
pub struct Recorded {
    /// The conversation, when the entries are shared between replays (`None`: one replay's own).
    conversation: Option<Arc<Conversation>>,
    pub(super) entries: Vec<Entry>,
    /// What the offline judge keeps for the conversation's messages.
    judge: Arc<crate::judge::offline::Store>,
    /// What the offline summarizer keeps for them.
    summarizer: crate::summarize::offline::Store,
    encoding: Encoding,
    /// The first entry no worker has started metering ([`Recorded::meter`]).
    next: std::sync::atomic::AtomicUsize,
}

impl Recorded {
    /// Every recorded message of `conversation` as an entry, metered with `encoding`.
    pub fn new(conversation: Arc<Conversation>, encoding: Encoding) -> Recorded {
        let recorded = Recorded::unmetered(conversation, encoding);
        recorded.meter();
        recorded
    }

    /// The entries, not metered yet: each worker that will replay them calls
    /// [`Recorded::meter`], and the workers share the metering instead of one waiting for it.
    pub fn unmetered(conversation: Arc<Conversation>, encoding: Encoding) -> Recorded {
        let recorded = Recorded::own(&conversation, encoding);
        Recorded { conversation: Some(conversation), ..recorded }
    }

    /// The entries of one replay of `conversation`, not shared with any other
    /// ([`Recorded::holds`] is false for every conversation), nor metered yet.
    pub(super) fn own(conversation: &Conversation, encoding: Encoding) -> Recorded {
        let entries: Vec<Entry> =
            conversation.messages.iter().enumerate().map(|(i, m)| Entry::recorded(i, m.clone())).collect();
        let judge = Arc::new(crate::judge::offline::Store::new(&entries));
        let summarizer = crate::summarize::offline::Store::new(&entries);
        Recorded { conversation: None, entries, judge, summarizer, encoding, next: Default::default() }
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

    /// The entries, one per recorded message.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The offline summarizer's store for this conversation.
    pub fn summarizer(&self) -> &crate::summarize::offline::Store {
        &self.summarizer
    }

    /// The offline judge's store for this conversation.
    pub fn judge(&self) -> &Arc<crate::judge::offline::Store> {
        &self.judge
    }

    /// Whether these are `conversation`'s entries (the same `Arc`'s conversation): a replay of
    /// any other conversation builds its own.
    pub fn holds(&self, conversation: &Conversation) -> bool {
        self.conversation.as_ref().is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), conversation))
    }
}
