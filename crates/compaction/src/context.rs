//! The live context: the messages an agent would send, with their provenance and cached
//! token counts.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::message::{Message, Role};
use crate::tokens::{CacheSlot, TokenCounter};

/// What a context entry stands for, relative to the recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// Recorded message `index`, verbatim.
    Recorded {
        /// Its index in the recorded conversation.
        index: usize,
    },
    /// Recorded message `index` with its content replaced by a placeholder.
    Masked {
        /// Its index in the recorded conversation.
        index: usize,
    },
    /// A summary written during compaction round `round`, standing for recorded messages
    /// `covers` (sorted, including those covered by the summaries it integrated).
    Summary {
        /// Which summary round wrote it (1 for the first).
        round: u32,
        /// The recorded indices it stands for.
        covers: Vec<usize>,
    },
    /// A message the strategy added that is neither recorded nor a summary.
    Inserted {
        /// What was inserted.
        what: Inserted,
    },
}

/// Kinds of inserted message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Inserted {
    /// The assistant's acknowledgement after a summary (`Understood.`).
    Acknowledgement,
    /// A digest of a staged workflow's approved stages.
    StageDigest,
    /// A placeholder standing for dropped messages (`[Context truncated...]`).
    TruncationNotice,
    /// Anything else.
    Other,
}

impl Origin {
    /// The recorded message this entry holds, verbatim or masked.
    pub fn recorded_index(&self) -> Option<usize> {
        match self {
            Origin::Recorded { index } | Origin::Masked { index } => Some(*index),
            _ => None,
        }
    }
    /// The recorded message this entry reproduces verbatim, if any.
    pub fn verbatim_index(&self) -> Option<usize> {
        match self {
            Origin::Recorded { index } => Some(*index),
            _ => None,
        }
    }
    /// True for a summary entry.
    pub fn is_summary(&self) -> bool {
        matches!(self, Origin::Summary { .. })
    }
}

const UNKNOWN: u64 = u64::MAX;

/// Per-slot cached units. `u64::MAX` means "not measured yet".
struct UnitCache([AtomicU64; CacheSlot::COUNT]);

impl UnitCache {
    fn new() -> UnitCache {
        UnitCache(std::array::from_fn(|_| AtomicU64::new(UNKNOWN)))
    }
    fn get(&self, slot: CacheSlot) -> Option<u64> {
        let v = self.0[slot.index()].load(Ordering::Relaxed);
        (v != UNKNOWN).then_some(v)
    }
    fn set(&self, slot: CacheSlot, v: u64) {
        self.0[slot.index()].store(v, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for UnitCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnitCache")
    }
}

/// One message of a context with its provenance. Messages are immutable once in an entry,
/// so their token units are measured once per counter and shared by clones.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The message and its cached units, in one allocation.
    stored: Arc<Stored>,
    origin: Origin,
}

#[derive(Debug)]
struct Stored {
    message: Message,
    cache: UnitCache,
}

impl Entry {
    /// An entry holding `message`, from `origin`.
    pub fn new(message: Message, origin: Origin) -> Entry {
        Entry { stored: Arc::new(Stored { message, cache: UnitCache::new() }), origin }
    }
    /// A recorded message, verbatim.
    pub fn recorded(index: usize, message: Message) -> Entry {
        Entry::new(message, Origin::Recorded { index })
    }
    /// The message as sent.
    pub fn message(&self) -> &Message {
        &self.stored.message
    }
    /// Where the entry comes from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }
    /// The message's role.
    pub fn role(&self) -> Role {
        self.stored.message.role
    }
    /// This entry's units under `counter`, measured once and cached.
    pub fn units(&self, counter: &dyn TokenCounter) -> u64 {
        match counter.cache_slot() {
            Some(slot) => match self.stored.cache.get(slot) {
                Some(v) => v,
                None => {
                    let v = counter.message_units(&self.stored.message);
                    self.stored.cache.set(slot, v);
                    v
                }
            },
            None => counter.message_units(&self.stored.message),
        }
    }
    /// This entry's tokens under `counter`, on its own.
    pub fn tokens(&self, counter: &dyn TokenCounter) -> u64 {
        counter.tokens_from_units(self.units(counter))
    }
}

/// The messages an agent would send next, in order, with provenance and cached counts.
///
/// Running unit totals are kept per cache slot once first asked for, so metering a context
/// that grew by k messages costs O(k).
#[derive(Debug, Clone, Default)]
pub struct Context {
    entries: Vec<Entry>,
    totals: Totals,
    /// The same running totals over the tool results, as they are and masked
    /// ([`ToolResults`]), with how many of each there are.
    tool_results: [(Totals, usize); 2],
    /// How many messages carry a stage label ([`Message::stage`]).
    staged: usize,
    /// A strategy's index over the entries ([`Context::memo`]).
    memo: Memo,
}

/// The value [`Context::memo`] keeps: not copied with the context, dropped when an entry is
/// replaced.
#[derive(Default)]
struct Memo(Mutex<Option<Arc<dyn Any + Send + Sync>>>);

impl Clone for Memo {
    fn clone(&self) -> Memo {
        Memo::default()
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memo")
    }
}

/// Which tool results [`Context::tool_result_units`] sums: those still holding their output,
/// or those whose content a placeholder replaced ([`Origin::Masked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolResults {
    /// Tool results not masked.
    Open,
    /// Masked tool results.
    Masked,
}

impl ToolResults {
    /// The kind of tool result `e` is, if it is one.
    fn of(e: &Entry) -> Option<ToolResults> {
        match (e.role(), e.origin()) {
            (Role::Tool, Origin::Masked { .. }) => Some(ToolResults::Masked),
            (Role::Tool, _) => Some(ToolResults::Open),
            _ => None,
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Default)]
struct Totals([AtomicU64Opt; CacheSlot::COUNT]);

impl Totals {
    /// Add `entry`'s units to each known total (a total whose unit `entry` lacks becomes
    /// unknown).
    fn add(&self, entry: &Entry) {
        for (i, total) in self.0.iter().enumerate() {
            let t = total.0.load(Ordering::Relaxed);
            if t != UNKNOWN {
                let v = entry.stored.cache.0[i].load(Ordering::Relaxed);
                total.0.store(if v == UNKNOWN { UNKNOWN } else { t + v }, Ordering::Relaxed);
            }
        }
    }
    /// Take `entry`'s units off each known total (as [`Totals::add`]).
    fn remove(&self, entry: &Entry) {
        for (i, total) in self.0.iter().enumerate() {
            let t = total.0.load(Ordering::Relaxed);
            if t != UNKNOWN {
                let v = entry.stored.cache.0[i].load(Ordering::Relaxed);
                total.0.store(if v == UNKNOWN { UNKNOWN } else { t.saturating_sub(v) }, Ordering::Relaxed);
            }
        }
    }
    /// Totals for an empty list: zero where these are known, unknown elsewhere.
    fn zero_where_known(&self) -> Totals {
        Totals(std::array::from_fn(|i| {
            let known = self.0[i].0.load(Ordering::Relaxed) != UNKNOWN;
            AtomicU64Opt(AtomicU64::new(if known { 0 } else { UNKNOWN }))
        }))
    }
    /// The total for `counter` over the entries `of` yields, summed once and then kept.
    fn units<'e>(&self, counter: &dyn TokenCounter, of: impl Iterator<Item = &'e Entry>) -> u64 {
        match counter.cache_slot() {
            Some(slot) => {
                let total = &self.0[slot.index()].0;
                let t = total.load(Ordering::Relaxed);
                if t != UNKNOWN {
                    return t;
                }
                let sum: u64 = of.map(|e| e.units(counter)).sum();
                total.store(sum, Ordering::Relaxed);
                sum
            }
            None => of.map(|e| e.units(counter)).sum(),
        }
    }
}

#[derive(Debug)]
struct AtomicU64Opt(AtomicU64);

impl Default for AtomicU64Opt {
    fn default() -> AtomicU64Opt {
        AtomicU64Opt(AtomicU64::new(UNKNOWN))
    }
}

impl Clone for Totals {
    fn clone(&self) -> Totals {
        Totals(std::array::from_fn(|i| AtomicU64Opt(AtomicU64::new(self.0[i].0.load(Ordering::Relaxed)))))
    }
}

impl Context {
    /// An empty context.
    pub fn new() -> Context {
        Context::default()
    }
    /// A context of recorded messages `0..messages.len()`, verbatim.
    pub fn from_messages(messages: impl IntoIterator<Item = Message>) -> Context {
        let mut ctx = Context::new();
        for (i, m) in messages.into_iter().enumerate() {
            ctx.push(Entry::recorded(i, m));
        }
        ctx
    }
    /// A context made of `entries`.
    pub fn from_entries(entries: Vec<Entry>) -> Context {
        let mut tool_results: [(Totals, usize); 2] = Default::default();
        for e in &entries {
            if let Some(k) = ToolResults::of(e) {
                tool_results[k.index()].1 += 1;
            }
        }
        let staged = entries.iter().filter(|e| e.message().stage.is_some()).count();
        Context { entries, totals: Totals::default(), tool_results, staged, memo: Memo::default() }
    }
    /// An empty context, with room for `capacity` entries, that keeps the running totals
    /// `other` keeps: built from `other`'s entries (each metered where `other`'s total is
    /// known) and from new entries metered with the same counters, its totals stay known
    /// without a second pass over it.
    pub fn with_totals_of(other: &Context, capacity: usize) -> Context {
        Context {
            entries: Vec::with_capacity(capacity),
            totals: other.totals.zero_where_known(),
            tool_results: std::array::from_fn(|k| (other.tool_results[k].0.zero_where_known(), 0)),
            staged: 0,
            memo: Memo::default(),
        }
    }
    /// Append one entry, updating the running totals that are known.
    pub fn push(&mut self, entry: Entry) {
        self.totals.add(&entry);
        if let Some(k) = ToolResults::of(&entry) {
            let (totals, count) = &mut self.tool_results[k.index()];
            totals.add(&entry);
            *count += 1;
        }
        self.staged += usize::from(entry.message().stage.is_some());
        self.entries.push(entry);
    }
    /// Append one entry and measure it with `counters` so their totals stay known.
    pub fn push_metered(&mut self, entry: Entry, counters: &[&dyn TokenCounter]) {
        for c in counters {
            entry.units(*c);
        }
        self.push(entry);
    }
    /// Replace entry `index` by `entry` and return the entry it replaces. `entry` is metered
    /// with `counters` first, and each running total stays known when both entries were
    /// metered for it.
    ///
    /// # Panics
    /// When `index` is out of range.
    pub fn replace(&mut self, index: usize, entry: Entry, counters: &[&dyn TokenCounter]) -> Entry {
        for c in counters {
            entry.units(*c);
        }
        let old = &self.entries[index];
        self.totals.remove(old);
        self.totals.add(&entry);
        if let Some(k) = ToolResults::of(old) {
            let (totals, count) = &mut self.tool_results[k.index()];
            totals.remove(old);
            *count -= 1;
        }
        if let Some(k) = ToolResults::of(&entry) {
            let (totals, count) = &mut self.tool_results[k.index()];
            totals.add(&entry);
            *count += 1;
        }
        self.staged -= usize::from(old.message().stage.is_some());
        self.staged += usize::from(entry.message().stage.is_some());
        // An index over the entries no longer holds.
        *self.memo.0.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        std::mem::replace(&mut self.entries[index], entry)
    }
    /// A value derived from the entries that its owner extends as the context grows, kept with
    /// the context: `update` gets the value the previous call returned and returns the one to
    /// keep (and to return), extended by the entries appended since. It gets `None` the first
    /// time, after [`Context::replace`] changed an entry (entries only change there or by
    /// [`Context::push`]), in a clone of the context (clones start without one), and when the
    /// value kept is of another type. A strategy that rebuilds its request from a growing
    /// history keeps its scan of the history here, so that each request costs what was
    /// appended since the previous one.
    ///
    /// `update` runs under a lock: it must not call `memo` on the same context.
    pub fn memo<T: Any + Send + Sync>(&self, update: impl FnOnce(Option<Arc<T>>) -> Arc<T>) -> Arc<T> {
        let mut kept = self.memo.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let previous = kept.take().and_then(|v| v.downcast::<T>().ok());
        let value = update(previous);
        *kept = Some(value.clone());
        value
    }
    /// The entries, oldest first.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Entry `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&Entry> {
        self.entries.get(i)
    }
    /// Iterate over the messages.
    pub fn messages(&self) -> impl Iterator<Item = &Message> + '_ {
        self.entries.iter().map(|e| e.message())
    }
    /// The messages, cloned (for sending or rendering).
    pub fn to_messages(&self) -> Vec<Message> {
        self.messages().cloned().collect()
    }
    /// Sum of units under `counter`.
    pub fn units(&self, counter: &dyn TokenCounter) -> u64 {
        self.totals.units(counter, self.entries.iter())
    }
    /// Sum of units under `counter` of the tool results of kind `which`: kept as the context
    /// changes once first asked for, like [`Context::units`].
    pub fn tool_result_units(&self, counter: &dyn TokenCounter, which: ToolResults) -> u64 {
        let of = self.entries.iter().filter(move |e| ToolResults::of(e) == Some(which));
        self.tool_results[which.index()].0.units(counter, of)
    }
    /// True when a message carries a stage label ([`Message::stage`]); O(1).
    pub fn has_stages(&self) -> bool {
        self.staged > 0
    }
    /// How many tool results of kind `which` the context holds.
    pub fn tool_result_count(&self, which: ToolResults) -> usize {
        self.tool_results[which.index()].1
    }
    /// Tokens of the whole context under `counter`.
    pub fn tokens(&self, counter: &dyn TokenCounter) -> u64 {
        counter.tokens_from_units(self.units(counter))
    }
    /// Tokens of entries `range` under `counter` (units summed, then converted).
    pub fn range_tokens(&self, range: std::ops::Range<usize>, counter: &dyn TokenCounter) -> u64 {
        counter.tokens_from_units(self.entries[range].iter().map(|e| e.units(counter)).sum())
    }
    /// Index of the leading system prompt, if the context starts with one.
    pub fn system_prompt(&self) -> Option<&Entry> {
        self.entries.first().filter(|e| e.role() == Role::System)
    }
    /// The live summaries, in order.
    pub fn summaries(&self) -> impl Iterator<Item = (usize, &Entry)> + '_ {
        self.entries.iter().enumerate().filter(|(_, e)| e.origin().is_summary())
    }
    /// The highest summary round in the context (0 when there is none).
    pub fn last_round(&self) -> u32 {
        self.entries
            .iter()
            .filter_map(|e| match e.origin() {
                Origin::Summary { round, .. } => Some(*round),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::CharsOver4;

    /// The counts kept as a context changes are those of its entries, counted again.
    #[test]
    fn kept_counts_follow_pushes_and_replacements() {
        let recount = |ctx: &Context| {
            let staged = ctx.messages().any(|m| m.stage.is_some());
            let open = ctx.entries().iter().filter(|e| ToolResults::of(e) == Some(ToolResults::Open));
            let masked = ctx.entries().iter().filter(|e| ToolResults::of(e) == Some(ToolResults::Masked));
            let units = |it: &mut dyn Iterator<Item = &Entry>| it.map(|e| e.units(&CharsOver4)).sum::<u64>();
            (staged, open.clone().count(), masked.clone().count(), units(&mut open.clone()), units(&mut masked.clone()))
        };
        let kept = |ctx: &Context| {
            (
                ctx.has_stages(),
                ctx.tool_result_count(ToolResults::Open),
                ctx.tool_result_count(ToolResults::Masked),
                ctx.tool_result_units(&CharsOver4, ToolResults::Open),
                ctx.tool_result_units(&CharsOver4, ToolResults::Masked),
            )
        };
        let mut ctx = Context::new();
        // Totals asked for first, so that every change below keeps them.
        assert_eq!(kept(&ctx), (false, 0, 0, 0, 0));
        let counters: [&dyn TokenCounter; 1] = [&CharsOver4];
        ctx.push_metered(Entry::recorded(0, Message::user("plan the paper").with_stage("outline")), &counters);
        ctx.push_metered(Entry::recorded(1, Message::tool_result("c1", "read", "a long output")), &counters);
        ctx.push_metered(Entry::recorded(2, Message::tool_result("c2", "read", "another output")), &counters);
        assert_eq!(kept(&ctx), recount(&ctx));
        assert_eq!(kept(&ctx), (true, 2, 0, 27, 0));
        let masked = Entry::new(Message::tool_result("c1", "read", "[cleared]"), Origin::Masked { index: 1 });
        ctx.replace(1, masked, &counters);
        ctx.replace(0, Entry::recorded(0, Message::user("plan the paper")), &counters);
        assert_eq!(kept(&ctx), recount(&ctx));
        assert_eq!(kept(&ctx), (false, 1, 1, 14, 9));
        let rebuilt = Context::from_entries(ctx.entries().to_vec());
        assert_eq!(kept(&rebuilt), kept(&ctx));
    }

    /// A context built from another's entries keeps the totals the other keeps, through
    /// entries kept and new ones metered; a total the other does not keep is not kept.
    #[test]
    fn a_context_built_from_another_keeps_its_totals() {
        let known = |ctx: &Context, slot: CacheSlot| {
            let t = ctx.totals.0[slot.index()].0.load(Ordering::Relaxed);
            (t != UNKNOWN).then_some(t)
        };
        let ctx = Context::from_messages([
            Message::user("fix the bug"),
            Message::tool_result("c1", "read", "a long output"),
            Message::assistant("done"),
        ]);
        ctx.units(&CharsOver4);
        ctx.tool_result_units(&CharsOver4, ToolResults::Open);
        let mut out = Context::with_totals_of(&ctx, 4);
        out.push(ctx.entries()[0].clone());
        out.push_metered(
            Entry::new(Message::tool_result("c1", "read", "[x]"), Origin::Masked { index: 1 }),
            &[&CharsOver4],
        );
        out.push(ctx.entries()[2].clone());
        out.push_metered(
            Entry::new(Message::user("summary"), Origin::Summary { round: 1, covers: vec![] }),
            &[&CharsOver4],
        );
        let recounted: u64 = out.entries().iter().map(|e| CharsOver4.message_units(e.message())).sum();
        assert_eq!(known(&out, CacheSlot::Chars), Some(recounted));
        assert_eq!(known(&out, CacheSlot::Chars), Some(11 + 3 + 4 + 7));
        assert_eq!(known(&out, CacheSlot::Chars4Plus2), None);
        // Tool results: the open total was known (and none is left open), the masked one not.
        let tool = |k: ToolResults| {
            let (totals, count) = &out.tool_results[k.index()];
            (totals.0[CacheSlot::Chars.index()].0.load(Ordering::Relaxed), *count)
        };
        assert_eq!(tool(ToolResults::Open), (0, 0));
        assert_eq!(tool(ToolResults::Masked), (UNKNOWN, 1));
        // An entry pushed unmetered makes the total unknown, and it is summed again when asked.
        let mut more = out.clone();
        more.push(Entry::new(Message::user("new"), Origin::Inserted { what: Inserted::Other }));
        assert_eq!(known(&more, CacheSlot::Chars), None);
        assert_eq!(more.units(&CharsOver4), recounted + 3);
    }

    /// A memo is handed back as the context grows, and starts again in a clone, for another
    /// type, and once an entry is replaced.
    #[test]
    fn a_memo_follows_pushes_and_is_dropped_when_an_entry_changes() {
        // How many times the memo was asked for since it was last dropped.
        let asked = |ctx: &Context| *ctx.memo(|kept: Option<Arc<usize>>| Arc::new(kept.map_or(1, |n| *n + 1)));
        let mut ctx = Context::from_messages([Message::user("a")]);
        assert_eq!(asked(&ctx), 1);
        ctx.push(Entry::recorded(1, Message::assistant("b")));
        assert_eq!(asked(&ctx), 2);
        assert_eq!(asked(&ctx.clone()), 1);
        assert_eq!(asked(&ctx), 3);
        ctx.memo(|kept: Option<Arc<String>>| {
            assert!(kept.is_none());
            Arc::new(String::new())
        });
        assert_eq!(asked(&ctx), 1);
        assert_eq!(asked(&ctx), 2);
        ctx.replace(0, Entry::recorded(0, Message::user("c")), &[]);
        assert_eq!(asked(&ctx), 1);
    }
}
