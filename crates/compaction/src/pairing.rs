//! The tool-call pairing rule, written once. The invariants ([`crate::check_context`]), the
//! replay's incremental request check, the dataset check and the importers' repair all read
//! pairing through [`ToolPairing`], so they cannot disagree on which result answers which call.
//!
//! The rule: a tool result answers the most recent call with its id that is still unanswered;
//! a result with no such call is an orphan. A call left unanswered is *in flight* (not a fault)
//! only when it belongs to the last assistant message and nothing but tool results follow it:
//! the agent is waiting for its tools.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use seeded::Fnv;

use crate::context::Context;
use crate::message::{Message, Role};

/// What pushing a tool result found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// It answers the call made by the message at this index.
    Call(usize),
    /// No unanswered call before it has its id.
    Orphan,
}

/// Pairing state over a sequence of messages, fed one message at a time (so a caller that
/// appends can check only what it appended).
#[derive(Debug, Clone, Default)]
pub struct ToolPairing {
    /// Unanswered calls by id: the indexes of the messages that made them, oldest first.
    open: BTreeMap<String, Vec<usize>>,
    /// Orphan results: (index, call id).
    orphans: Vec<(usize, String)>,
    last_assistant: Option<usize>,
    /// Only tool results follow the last assistant message.
    only_results_after: bool,
    /// Messages pushed.
    len: usize,
}

impl ToolPairing {
    /// No message yet.
    pub fn new() -> ToolPairing {
        ToolPairing::default()
    }

    /// Pairing over `messages`, indexed from 0.
    pub fn scan<'a>(messages: impl IntoIterator<Item = &'a Message>) -> ToolPairing {
        let mut p = ToolPairing::new();
        for m in messages {
            p.push(m);
        }
        p
    }

    /// Messages pushed so far (the index the next one gets).
    pub fn len(&self) -> usize {
        self.len
    }

    /// No message was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Push the next message. For a tool result, which call it answers; `None` otherwise.
    pub fn push(&mut self, m: &Message) -> Option<Answer> {
        let i = self.len;
        self.len += 1;
        for c in &m.tool_calls {
            self.open.entry(c.id.clone()).or_default().push(i);
        }
        let answer = (m.role == Role::Tool).then(|| {
            let id = m.tool_call_id.as_deref().unwrap_or("");
            let (call, emptied) = match self.open.get_mut(id) {
                Some(calls) => (calls.pop(), calls.is_empty()),
                None => (None, false),
            };
            // Only open calls are kept, so that `unanswered` costs what is open.
            if emptied {
                self.open.remove(id);
            }
            match call {
                Some(call) => Answer::Call(call),
                None => {
                    self.orphans.push((i, id.to_string()));
                    Answer::Orphan
                }
            }
        });
        match m.role {
            Role::Assistant => {
                self.last_assistant = Some(i);
                self.only_results_after = true;
            }
            Role::Tool => {}
            _ => self.only_results_after = false,
        }
        answer
    }

    /// Orphan results so far, as (index, call id), in order.
    pub fn orphans(&self) -> &[(usize, String)] {
        &self.orphans
    }

    /// Calls without a result that are not in flight, as (index, call id), sorted.
    pub fn unanswered(&self) -> Vec<(usize, String)> {
        let mut out: Vec<(usize, String)> = self
            .open
            .iter()
            .flat_map(|(id, idxs)| idxs.iter().map(move |&i| (i, id.clone())))
            .filter(|&(i, _)| !(Some(i) == self.last_assistant && self.only_results_after))
            .collect();
        out.sort();
        out
    }
}

// The same rule over a [`Context`], written for speed: the replay asks it on every request of a
// long history.

/// A map keyed by call ids: FNV-1a rather than SipHash (ids are short, and the map is built
/// once per request over the whole history).
type IdMap<'a, V> = HashMap<&'a str, V, BuildHasherDefault<Fnv>>;

/// `(call entry, result entry)` pairs, paired as the invariant checker pairs them (a result
/// answers the most recent unanswered call of its id before it).
pub fn tool_pairs(ctx: &Context) -> Vec<(usize, usize)> {
    const NONE: usize = usize::MAX;
    /// Open calls kept in the short list before they move to the map.
    const RECENT: usize = 16;
    // The open calls, oldest first: the newest few in `recent` (a result almost always answers
    // one of them, found without hashing), the older ones in a stack per id, `open` holding the
    // top node of each id and each node being `(call entry, node below it)`. Every call in
    // `recent` is newer than every call in the stacks, so a result answers the newest call of
    // its id in `recent`, or else the top of its id's stack.
    let mut recent: VecDeque<(u64, &str, usize)> = VecDeque::with_capacity(RECENT);
    let mut open: IdMap<usize> = HashMap::default();
    let mut nodes: Vec<(usize, usize)> = Vec::new();
    let mut out = Vec::new();
    for (i, e) in ctx.entries().iter().enumerate() {
        let m = e.message();
        for c in &m.tool_calls {
            if recent.len() == RECENT {
                if let Some((_, id, call)) = recent.pop_front() {
                    let below = open.insert(id, nodes.len()).unwrap_or(NONE);
                    nodes.push((call, below));
                }
            }
            recent.push_back((id_key(&c.id), c.id.as_str(), i));
        }
        if m.role != Role::Tool {
            continue;
        }
        let Some(id) = m.tool_call_id.as_deref() else { continue };
        let key = id_key(id);
        if let Some(p) = recent.iter().rposition(|(k, x, _)| *k == key && *x == id) {
            if let Some((_, _, call)) = recent.remove(p) {
                out.push((call, i));
            }
        } else if let Some(top) = open.get_mut(id) {
            if *top != NONE {
                let (call, below) = nodes[*top];
                *top = below;
                out.push((call, i));
            }
        }
    }
    out
}

/// A call id's length and last seven bytes: ids that differ there compare unequal without a
/// byte-by-byte comparison.
fn id_key(id: &str) -> u64 {
    let b = id.as_bytes();
    b[b.len().saturating_sub(7)..].iter().fold(b.len() as u64, |k, &x| (k << 8) | u64::from(x))
}

/// The result that answers call `t` of entry `c`, as [`tool_pairs`] pairs them: the call is on
/// top of its id's stack when the results above it are gone, so it is answered by the first
/// result of its id at which no later call of that id is still open. `None` when `budget`
/// (entries looked at) runs out first.
pub fn result_of_call(ctx: &Context, c: usize, t: usize, budget: &mut usize) -> Option<Option<usize>> {
    let e = ctx.entries();
    let m = e[c].message();
    let id = m.tool_calls[t].id.as_str();
    // Later calls of the same id, pushed over this one and not answered yet.
    let mut above = m.tool_calls[t + 1..].iter().filter(|x| x.id == id).count();
    for (j, entry) in e.iter().enumerate().skip(c) {
        let m = entry.message();
        if j > c {
            *budget = budget.checked_sub(1)?;
            above += m.tool_calls.iter().filter(|x| x.id == id).count();
        }
        if m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id) {
            if above == 0 {
                return Some(Some(j));
            }
            above -= 1;
        }
    }
    Some(None)
}

/// The call entry that result `r` answers, as [`tool_pairs`] pairs them, found walking back:
/// each result of the same id met on the way answers one call of that id before it, and the
/// first call of the id left over is the one `r` answers. A result that found no open call
/// (its id had none) answers nothing and every call before it was answered before it, so the
/// walk never takes one of those calls. `None` when `budget` (entries looked at) runs out first.
pub fn call_of_result(ctx: &Context, r: usize, budget: &mut usize) -> Option<Option<usize>> {
    let e = ctx.entries();
    let m = e[r].message();
    let Some(id) = m.tool_call_id.as_deref().filter(|_| m.role == Role::Tool) else { return Some(None) };
    // Results of the id between a call and `r`, each answering a call after that one.
    let mut answered = 0usize;
    for j in (0..=r).rev() {
        let m = e[j].message();
        if j < r {
            *budget = budget.checked_sub(1)?;
            if m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id) {
                answered += 1;
            }
        }
        // An entry's calls come before its own result: newest first.
        for _ in m.tool_calls.iter().rev().filter(|x| x.id == id) {
            if answered == 0 {
                return Some(Some(j));
            }
            answered -= 1;
        }
    }
    Some(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn call(id: &str) -> Message {
        Message::assistant_calls("", vec![ToolCall { id: id.into(), name: "t".into(), arguments: "{}".into() }])
    }

    #[test]
    fn a_result_answers_the_latest_open_call_and_calls_in_flight_are_no_fault() {
        let msgs = [
            Message::user("go"),
            call("a"),
            Message::tool_result("a", "t", "1"),
            Message::tool_result("ghost", "t", "?"),
            call("b"),
            Message::user("more"),
            call("c"),
            Message::tool_result("x", "t", "?"),
        ];
        let mut p = ToolPairing::new();
        let answers: Vec<Option<Answer>> = msgs.iter().map(|m| p.push(m)).collect();
        assert_eq!(answers[2], Some(Answer::Call(1)));
        assert_eq!(answers[3], Some(Answer::Orphan));
        assert_eq!(p.orphans(), [(3, "ghost".to_string()), (7, "x".to_string())]);
        // `b` was never answered and a user message followed; `c` is in flight (only a tool
        // result follows the last assistant message).
        assert_eq!(p.unanswered(), [(4, "b".to_string())]);
        assert_eq!(p.len(), 8);
    }
}
