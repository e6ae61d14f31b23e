//! The prefix cache: what the current request shares with the previous one, and what the
//! cache profile reads and writes of it (see the replay's module docs, "Prefix cache").

use compaction::{Entry, TokenCounter};

use super::{CacheProfile, PrefixShare, Replayer, ANTHROPIC_CACHE_MIN};

/// Tokens of a request of `tokens` with `cached` read from the cache that the profile writes to
/// the cache: under [`CacheProfile::Anthropic`], the uncached part of a cacheable request.
pub fn cache_writes(profile: CacheProfile, tokens: u64, cached: u64) -> u64 {
    match profile {
        CacheProfile::Anthropic if tokens >= ANTHROPIC_CACHE_MIN => tokens.saturating_sub(cached),
        _ => 0,
    }
}

/// Two entries that put the same bytes in a request.
pub(super) fn same_message(a: &Entry, b: &Entry) -> bool {
    std::ptr::eq(a.message(), b.message()) || a.message() == b.message()
}

/// What the cache needs to know about the previous request.
#[derive(Debug, Clone)]
pub(super) struct PreviousRequest {
    pub(super) len: usize,
    pub(super) tokens: u64,
    pub(super) system_tokens: Option<u64>,
    /// The strategy's own cache breakpoints, as (entries up to and including the breakpoint,
    /// exact tokens of that prefix), when it places them.
    pub(super) breakpoints: Option<Vec<(usize, u64)>>,
}

impl<'a, 's> Replayer<'a, 's> {
    /// The strategy's breakpoints in the current request as (entries through it, exact
    /// tokens of that prefix), when it places its own and the profile reads breakpoints.
    pub(super) fn breakpoints(&self) -> Option<Vec<(usize, u64)>> {
        if self.settings.cache != CacheProfile::Anthropic {
            return None;
        }
        let points = self.strategy.cache_breakpoints(self.compactor.context())?;
        let entries = self.compactor.context().entries();
        let mut out = Vec::with_capacity(points.len());
        let mut units = 0;
        let mut next = 0;
        for p in points.into_iter().filter(|p| *p < entries.len()) {
            while next <= p {
                units += entries[next].units(&self.exact);
                next += 1;
            }
            out.push((p + 1, self.exact.tokens_from_units(units)));
        }
        Some(out)
    }

    /// What the current request shares with the previous one.
    pub(super) fn prefix_share(&self) -> PrefixShare {
        let Some(prev) = &self.previous else { return PrefixShare::default() };
        // The longest of the previous request's own breakpoints within `k` shared entries.
        let read = |k: usize| {
            prev.breakpoints.as_ref().map(|b| b.iter().filter(|(end, _)| *end <= k).map(|(_, t)| *t).max().unwrap_or(0))
        };
        let new = self.compactor.context().entries();
        let k = match &self.pre_compaction {
            // Only appends and in-place masks since the previous request: it is shared up to
            // the first entry a mask changed.
            None => {
                let mut edits: Vec<&(usize, Entry)> = self.edits.iter().collect();
                edits.sort_by_key(|(i, _)| *i);
                let limit = prev.len.min(new.len());
                edits.into_iter().find(|(i, old)| *i < limit && !same_message(old, &new[*i])).map_or(limit, |(i, _)| *i)
            }
            Some(before) => {
                // Entries masked in place before `before` was taken are compared as they were.
                let mut old: Vec<&Entry> = before.entries()[..prev.len.min(before.len())].iter().collect();
                // The first edit of an entry holds it as it was.
                for (i, e) in self.edits.iter().rev() {
                    if let Some(slot) = old.get_mut(*i) {
                        *slot = e;
                    }
                }
                old.iter().zip(new).take_while(|(a, b)| same_message(a, b)).count()
            }
        };
        if k == prev.len && self.pre_compaction.is_none() && self.edits.is_empty() {
            // Only appends since the previous request: all of it is shared.
            return PrefixShare {
                shared_tokens: prev.tokens,
                previous_tokens: prev.tokens,
                whole_previous: true,
                system_tokens: prev.system_tokens,
                strategy_breakpoint: read(prev.len),
            };
        }
        // The shared prefix's tokens, summed over the shorter side of the cut.
        let units: u64 = if 2 * k >= new.len() {
            self.compactor.context().units(&self.exact) - new[k..].iter().map(|e| e.units(&self.exact)).sum::<u64>()
        } else {
            new[..k].iter().map(|e| e.units(&self.exact)).sum()
        };
        PrefixShare {
            shared_tokens: self.exact.tokens_from_units(units),
            previous_tokens: prev.tokens,
            whole_previous: k == prev.len,
            system_tokens: prev.system_tokens.filter(|_| k >= 1),
            strategy_breakpoint: read(k),
        }
    }
}
