//! The tool-call pairing rule, written once. The invariants ([`crate::check_context`]), the
//! replay's incremental request check, the dataset check and the importers' repair all read
//! pairing through [`ToolPairing`], so they cannot disagree on which result answers which call.
//!
//! The rule: a tool result answers the most recent call with its id that is still unanswered;
//! a result with no such call is an orphan. A call left unanswered is *in flight* (not a fault)
//! only when it belongs to the last assistant message and nothing but tool results follow it:
//! the agent is waiting for its tools.

use std::collections::BTreeMap;

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
