//! What a provider refuses: [`check_request`] applies the documented request rules of the OpenAI
//! Chat Completions API ([`Provider::OpenaiChat`]) and the Anthropic Messages API
//! ([`Provider::AnthropicMessages`]) to one request, and returns every rule it breaks.
//!
//! These are the rules a provider answers with a 400; everything else the invariant checker
//! reports (a role-alternation break, a summary at an odd place, a document's deliberate
//! deviation) is a *finding*: both providers accept it.
//!
//! | rule | OpenAI | Anthropic |
//! |---|---|---|
//! | [`RequestRule::MisplacedToolResult`]: a result not right after the assistant message holding its call | tool messages right after the assistant message, every call answered before any other message | results in the next user turn, all of a turn's results before any text |
//! | [`RequestRule::OrphanToolResult`]: a result with no call before it | yes | yes |
//! | [`RequestRule::UnansweredToolCall`]: a call with no result, except those of the final assistant message | yes | yes |
//! | [`RequestRule::DuplicateCallId`]: two calls with one id | yes | yes |
//! | [`RequestRule::FirstNotUser`]: the first message after the system prompt is not a user message | no | yes |
//! | [`RequestRule::SystemInConversation`]: a system message after the first non-system message | no | yes (no such role in `messages`) |
//! | [`RequestRule::EmptyText`]: a user or assistant message with no text and no tool call | no | yes |
//! | [`RequestRule::ThinkingModified`]: in a tool loop still running, the latest assistant message lost or changed its `thinking` / `redacted_thinking` blocks | no | yes |
//!
//! The leading system messages are the system prompt (Anthropic's top-level `system`). For
//! Anthropic, consecutive messages of one turn role (tool results are user turns) form one
//! turn, as the API combines them; OpenAI sees each message on its own. Calls of the final
//! assistant message may be in flight when nothing but their results follows them.
//!
//! ```
//! use compaction::{check_request, Context, Message, Provider, RequestRule, ToolCall};
//!
//! let call = ToolCall { id: "c1".into(), name: "ls".into(), arguments: "{}".into() };
//! let ctx = Context::from_messages([
//!     Message::user("list the files"),
//!     Message::assistant_calls("", vec![call]),
//!     Message::user("and be quick"),
//!     Message::tool_result("c1", "ls", "a.txt"),
//!     Message::assistant("a.txt"),
//! ]);
//! for provider in Provider::ALL {
//!     let rules: Vec<RequestRule> = check_request(&ctx, provider).iter().map(|r| r.rule).collect();
//!     assert_eq!(rules, [RequestRule::MisplacedToolResult]);
//! }
//! ```

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::message::{Message, Role, ThinkingBlock};

/// A provider whose request rules [`check_request`] knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provider {
    /// The OpenAI Chat Completions API.
    OpenaiChat,
    /// The Anthropic Messages API.
    AnthropicMessages,
}

impl Provider {
    /// Both providers.
    pub const ALL: [Provider; 2] = [Provider::OpenaiChat, Provider::AnthropicMessages];

    /// The name used in files and reports (`openai`, `anthropic`).
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenaiChat => "openai-chat",
            Provider::AnthropicMessages => "anthropic-messages",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A documented request rule of a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestRule {
    /// A result not right after the assistant message holding its call.
    MisplacedToolResult,
    /// A result with no call before it.
    OrphanToolResult,
    /// A call with no result, except those of the final assistant message.
    UnansweredToolCall,
    /// Two calls with one id.
    DuplicateCallId,
    /// The first message after the system prompt is not a user message (Anthropic).
    FirstNotUser,
    /// A system message after the first non-system message (Anthropic).
    SystemInConversation,
    /// A user or assistant message with no text and no tool call (Anthropic).
    EmptyText,
    /// In a tool loop still running (the request ends with the results of the latest assistant
    /// message's calls), that message lost or changed its thinking blocks (Anthropic: "`thinking`
    /// or `redacted_thinking` blocks in the latest assistant message cannot be modified").
    ThinkingModified,
}

impl RequestRule {
    /// Every rule, in report order.
    pub const ALL: [RequestRule; 8] = [
        RequestRule::MisplacedToolResult,
        RequestRule::OrphanToolResult,
        RequestRule::UnansweredToolCall,
        RequestRule::DuplicateCallId,
        RequestRule::FirstNotUser,
        RequestRule::SystemInConversation,
        RequestRule::EmptyText,
        RequestRule::ThinkingModified,
    ];

    /// The name used in files and reports (`orphan_tool_result`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            RequestRule::MisplacedToolResult => "misplaced_tool_result",
            RequestRule::OrphanToolResult => "orphan_tool_result",
            RequestRule::UnansweredToolCall => "unanswered_tool_call",
            RequestRule::DuplicateCallId => "duplicate_call_id",
            RequestRule::FirstNotUser => "first_not_user",
            RequestRule::SystemInConversation => "system_in_conversation",
            RequestRule::EmptyText => "empty_text",
            RequestRule::ThinkingModified => "thinking_modified",
        }
    }

    /// Whether `provider` refuses a request that breaks this rule.
    pub fn applies_to(self, provider: Provider) -> bool {
        match self {
            RequestRule::MisplacedToolResult
            | RequestRule::OrphanToolResult
            | RequestRule::UnansweredToolCall
            | RequestRule::DuplicateCallId => true,
            RequestRule::FirstNotUser
            | RequestRule::SystemInConversation
            | RequestRule::EmptyText
            | RequestRule::ThinkingModified => provider == Provider::AnthropicMessages,
        }
    }
}

impl std::fmt::Display for RequestRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule: which, at which message of the request, and the call id it is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Rejection {
    /// The rule broken.
    pub rule: RequestRule,
    /// Position of the offending message in the request.
    pub index: usize,
    /// The tool call id, for the pairing rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.rule {
            RequestRule::MisplacedToolResult => "tool result not right after the assistant message holding its call",
            RequestRule::OrphanToolResult => "tool result with no call before it",
            RequestRule::UnansweredToolCall => "tool call with no result",
            RequestRule::DuplicateCallId => "a second tool call with this id",
            RequestRule::FirstNotUser => "the first message after the system prompt is not a user message",
            RequestRule::SystemInConversation => "system message inside the conversation",
            RequestRule::EmptyText => "message with empty text",
            RequestRule::ThinkingModified => {
                "the latest assistant message of a running tool loop lost or changed its thinking blocks"
            }
        };
        match &self.call_id {
            Some(id) => write!(f, "message {}: {what} ({id:?})", self.index),
            None => write!(f, "message {}: {what}", self.index),
        }
    }
}

/// Every rule `provider` documents that the request `ctx` breaks, in message order.
pub fn check_request(ctx: &Context, provider: Provider) -> Vec<Rejection> {
    let messages: Vec<&Message> = ctx.entries().iter().map(|e| e.message()).collect();
    check_messages(&messages, provider)
}

/// [`check_request`] over plain messages.
pub fn check_messages(messages: &[&Message], provider: Provider) -> Vec<Rejection> {
    let mut out = match provider {
        Provider::OpenaiChat => openai(messages),
        Provider::AnthropicMessages => {
            let mut out = anthropic(messages);
            out.extend(thinking_rejection(messages, None));
            out
        }
    };
    out.sort();
    out.dedup();
    out
}

/// Anthropic's rule on thinking blocks, for a request that ends in a tool loop still running
/// (its latest assistant message calls tools and only their results follow): that message must
/// carry its thinking blocks as the model returned them. `expected` is what the model returned
/// (the recording's message, when the caller has it); `None` infers it from the request:
/// extended thinking is on when any message of the request carries a block, and the latest
/// assistant message must then carry one.
pub fn thinking_rejection(messages: &[&Message], expected: Option<&[ThinkingBlock]>) -> Option<Rejection> {
    let last = messages.iter().rposition(|m| m.role == Role::Assistant)?;
    let after = &messages[last + 1..];
    let running = messages[last].has_tool_calls() && !after.is_empty() && after.iter().all(|m| m.role == Role::Tool);
    if !running {
        return None;
    }
    let kept = &messages[last].thinking;
    let broken = match expected {
        Some(blocks) => !blocks.is_empty() && kept.as_slice() != blocks,
        None => kept.is_empty() && messages.iter().any(|m| !m.thinking.is_empty()),
    };
    broken.then(|| rejection(RequestRule::ThinkingModified, last, None))
}

fn rejection(rule: RequestRule, index: usize, call_id: Option<&str>) -> Rejection {
    Rejection { rule, index, call_id: call_id.map(str::to_string) }
}

/// Where the conversation starts: after the leading system messages.
fn body_start(messages: &[&Message]) -> usize {
    messages.iter().position(|m| m.role != Role::System).unwrap_or(messages.len())
}

fn result_id(m: &Message) -> &str {
    m.tool_call_id.as_deref().unwrap_or("")
}

/// Shared bookkeeping of the pairing rules.
#[derive(Default)]
struct Pairing<'a> {
    /// Every call id seen so far.
    called: HashSet<&'a str>,
    out: Vec<Rejection>,
}

impl<'a> Pairing<'a> {
    /// Record the calls of one assistant message at `index`; returns its distinct ids.
    fn calls(&mut self, index: usize, m: &'a Message) -> Vec<&'a str> {
        let mut ids = Vec::new();
        for c in &m.tool_calls {
            if !self.called.insert(c.id.as_str()) {
                self.out.push(rejection(RequestRule::DuplicateCallId, index, Some(&c.id)));
            }
            if !ids.contains(&c.id.as_str()) {
                ids.push(c.id.as_str());
            }
        }
        ids
    }

    /// A result at `index` that answers none of the calls it may answer.
    fn stray(&mut self, index: usize, id: &str) {
        let rule =
            if self.called.contains(id) { RequestRule::MisplacedToolResult } else { RequestRule::OrphanToolResult };
        self.out.push(rejection(rule, index, Some(id)));
    }

    /// Calls of the assistant message at `index` left without a result where it belongs. One
    /// answered later (out of place) is reported there, as a misplaced result.
    fn unanswered(&mut self, messages: &[&Message], index: usize, after: usize, pending: &[&str]) {
        for id in pending {
            let later = messages[after..].iter().any(|m| m.role == Role::Tool && result_id(m) == *id);
            if !later {
                self.out.push(rejection(RequestRule::UnansweredToolCall, index, Some(id)));
            }
        }
    }
}

fn openai(messages: &[&Message]) -> Vec<Rejection> {
    let n = messages.len();
    let last_assistant = messages.iter().rposition(|m| m.role == Role::Assistant);
    let mut p = Pairing::default();
    let mut i = body_start(messages);
    while i < n {
        let m = messages[i];
        match m.role {
            Role::Assistant if m.has_tool_calls() => {
                let mut pending = p.calls(i, m);
                let mut j = i + 1;
                while j < n && messages[j].role == Role::Tool {
                    let id = result_id(messages[j]);
                    match pending.iter().position(|p| *p == id) {
                        Some(k) => {
                            pending.remove(k);
                        }
                        None => p.stray(j, id),
                    }
                    j += 1;
                }
                let in_flight = Some(i) == last_assistant && j == n;
                if !in_flight {
                    p.unanswered(messages, i, j, &pending);
                }
                i = j;
            }
            Role::Tool => {
                p.stray(i, result_id(m));
                i += 1;
            }
            _ => i += 1,
        }
    }
    p.out
}

/// The role of a message's turn in the Anthropic API: tool results are user content.
fn turn_role(r: Role) -> Role {
    if r == Role::Tool {
        Role::User
    } else {
        r
    }
}

fn anthropic(messages: &[&Message]) -> Vec<Rejection> {
    let start = body_start(messages);
    let mut out = Vec::new();
    // The conversation without its system messages: those inside it are refused on their own.
    let mut body: Vec<usize> = Vec::new();
    for (i, m) in messages.iter().enumerate().skip(start) {
        if m.role == Role::System {
            out.push(rejection(RequestRule::SystemInConversation, i, None));
            continue;
        }
        if m.role != Role::Tool && !m.has_tool_calls() && m.content.trim().is_empty() {
            out.push(rejection(RequestRule::EmptyText, i, None));
        }
        body.push(i);
    }
    if let Some(&first) = body.first() {
        if messages[first].role != Role::User {
            out.push(rejection(RequestRule::FirstNotUser, first, None));
        }
    }
    // Turns: runs of one turn role, as the API combines them.
    let mut turns: Vec<(Role, Vec<usize>)> = Vec::new();
    for &i in &body {
        let role = turn_role(messages[i].role);
        match turns.last_mut() {
            Some((r, members)) if *r == role => members.push(i),
            _ => turns.push((role, vec![i])),
        }
    }
    let last_assistant_turn = turns.iter().rposition(|(r, _)| *r == Role::Assistant);
    let mut p = Pairing::default();
    let mut pending: Vec<&str> = Vec::new();
    let mut caller: Option<usize> = None;
    for (t, (role, members)) in turns.iter().enumerate() {
        if *role == Role::Assistant {
            pending.clear();
            caller = None;
            for &i in members {
                if messages[i].has_tool_calls() {
                    caller.get_or_insert(i);
                    for id in p.calls(i, messages[i]) {
                        if !pending.contains(&id) {
                            pending.push(id);
                        }
                    }
                }
            }
            // A request that ends on this turn's calls has them in flight.
            continue;
        }
        // A user turn: the results of the previous assistant turn's calls come first, together.
        let mut text_seen = false;
        for &i in members {
            let m = messages[i];
            if m.role != Role::Tool {
                text_seen = true;
                continue;
            }
            let id = result_id(m);
            match pending.iter().position(|p| *p == id) {
                Some(k) if !text_seen => {
                    pending.remove(k);
                }
                Some(k) => {
                    pending.remove(k);
                    p.out.push(rejection(RequestRule::MisplacedToolResult, i, Some(id)));
                }
                None => p.stray(i, id),
            }
        }
        if let Some(index) = caller.take() {
            let only_results = members.iter().all(|&i| messages[i].role == Role::Tool);
            let in_flight = t > 0 && Some(t - 1) == last_assistant_turn && t + 1 == turns.len() && only_results;
            if !in_flight {
                let after = members.last().map_or(messages.len(), |&i| i + 1);
                p.unanswered(messages, index, after, &pending);
            }
        }
        pending.clear();
    }
    out.extend(p.out);
    out
}

/// [`check_messages`] kept up to date as messages are appended: the replay's check of every
/// request, at O(new messages) per request rather than O(request).
///
/// Between two compactions a request is the previous one plus appended messages. The checker
/// scans each message once, in order, keeping what the full scan would know at that point
/// (the call ids seen, the open call batch or turn, the calls still waiting for a later
/// result), so [`IncrementalCheck::rejections`] equals [`check_messages`] of every message
/// pushed so far (tested below on generated requests). After a compaction that rewrites the
/// request, start a new one.
#[derive(Debug, Clone)]
pub struct IncrementalCheck {
    provider: Provider,
    /// Messages pushed.
    len: usize,
    /// A non-system message was pushed: the system prompt has ended.
    body: bool,
    /// Rejections no later message can take back.
    settled: Vec<Rejection>,
    /// Every call id seen (a second one is [`RequestRule::DuplicateCallId`]).
    called: HashSet<String>,
    /// Calls left without a result when their batch (OpenAI) or turn (Anthropic) closed,
    /// by id: each is [`RequestRule::UnansweredToolCall`] unless a later tool message carries
    /// the id.
    waiting: std::collections::HashMap<String, Vec<usize>>,
    /// The open OpenAI call batch, or the open Anthropic turn.
    open: Option<Open>,
}

/// The batch (OpenAI) or turn (Anthropic) the next message may join.
#[derive(Debug, Clone)]
struct Open {
    /// OpenAI: always true (a batch is an assistant message and its results). Anthropic: the
    /// turn is an assistant turn.
    assistant: bool,
    /// The first message holding calls of this batch or assistant turn (for a user turn: of
    /// the assistant turn before it).
    caller: Option<usize>,
    /// Call ids still without a result.
    pending: Vec<String>,
    /// Anthropic user turn: a member that is not a tool result was seen.
    text_seen: bool,
}

impl IncrementalCheck {
    /// An empty request for `provider`.
    pub fn new(provider: Provider) -> IncrementalCheck {
        IncrementalCheck {
            provider,
            len: 0,
            body: false,
            settled: Vec::new(),
            called: HashSet::new(),
            waiting: std::collections::HashMap::new(),
            open: None,
        }
    }

    /// The provider it checks for.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// Messages pushed so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no message was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Append the request's next message.
    pub fn push(&mut self, m: &Message) {
        let i = self.len;
        self.len += 1;
        if !self.body {
            if m.role == Role::System {
                return;
            }
            self.body = true;
            if self.provider == Provider::AnthropicMessages && m.role != Role::User {
                self.settled.push(rejection(RequestRule::FirstNotUser, i, None));
            }
        }
        match self.provider {
            Provider::OpenaiChat => self.push_openai(i, m),
            Provider::AnthropicMessages => self.push_anthropic(i, m),
        }
    }

    /// The calls of `m` (message `index`): duplicates are settled, the distinct ids returned.
    fn calls(&mut self, index: usize, m: &Message) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for c in &m.tool_calls {
            if !self.called.insert(c.id.clone()) {
                self.settled.push(rejection(RequestRule::DuplicateCallId, index, Some(&c.id)));
            }
            if !ids.contains(&c.id) {
                ids.push(c.id.clone());
            }
        }
        ids
    }

    fn stray(&mut self, index: usize, id: &str) {
        let rule =
            if self.called.contains(id) { RequestRule::MisplacedToolResult } else { RequestRule::OrphanToolResult };
        self.settled.push(rejection(rule, index, Some(id)));
    }

    /// Close the open batch or turn with its calls still pending: they wait for a later result.
    fn close(&mut self) {
        if let Some(open) = self.open.take() {
            if let Some(caller) =
                open.caller.filter(|_| !(self.provider == Provider::AnthropicMessages && open.assistant))
            {
                for id in open.pending {
                    self.waiting.entry(id).or_default().push(caller);
                }
            }
        }
    }

    fn push_openai(&mut self, i: usize, m: &Message) {
        match m.role {
            Role::Tool => {
                let id = result_id(m);
                let matched = self
                    .open
                    .as_mut()
                    .and_then(|o| o.pending.iter().position(|p| p == id).map(|k| o.pending.remove(k)))
                    .is_some();
                if !matched {
                    self.stray(i, id);
                }
                self.waiting.remove(id);
            }
            Role::Assistant if m.has_tool_calls() => {
                self.close();
                let pending = self.calls(i, m);
                self.open = Some(Open { assistant: true, caller: Some(i), pending, text_seen: false });
            }
            _ => self.close(),
        }
    }

    fn push_anthropic(&mut self, i: usize, m: &Message) {
        if m.role == Role::System {
            self.settled.push(rejection(RequestRule::SystemInConversation, i, None));
            return;
        }
        if m.role != Role::Tool && !m.has_tool_calls() && m.content.trim().is_empty() {
            self.settled.push(rejection(RequestRule::EmptyText, i, None));
        }
        let assistant = m.role == Role::Assistant;
        if self.open.as_ref().is_none_or(|o| o.assistant != assistant) {
            // A new turn. An assistant turn's calls pass to the user turn after it.
            let (caller, pending) = match self.open.take() {
                Some(o) if o.assistant => (o.caller, o.pending),
                other => {
                    self.open = other;
                    self.close();
                    (None, Vec::new())
                }
            };
            let (caller, pending) = if assistant { (None, Vec::new()) } else { (caller, pending) };
            self.open = Some(Open { assistant, caller, pending, text_seen: false });
        }
        if assistant {
            if m.has_tool_calls() {
                let ids = self.calls(i, m);
                if let Some(o) = self.open.as_mut() {
                    o.caller.get_or_insert(i);
                    for id in ids {
                        if !o.pending.contains(&id) {
                            o.pending.push(id);
                        }
                    }
                }
            }
            return;
        }
        if m.role != Role::Tool {
            if let Some(o) = self.open.as_mut() {
                o.text_seen = true;
            }
            return;
        }
        let id = result_id(m);
        let found = self.open.as_mut().and_then(|o| {
            o.pending.iter().position(|p| p == id).map(|k| {
                o.pending.remove(k);
                o.text_seen
            })
        });
        match found {
            Some(false) => {}
            Some(true) => self.settled.push(rejection(RequestRule::MisplacedToolResult, i, Some(id))),
            None => self.stray(i, id),
        }
        self.waiting.remove(id);
    }

    /// Every rule the messages pushed so far break: [`check_messages`] of them.
    pub fn rejections(&self) -> Vec<Rejection> {
        let mut out = self.settled.clone();
        out.extend(self.unanswered());
        out.sort();
        out.dedup();
        out
    }

    /// The rejections no later message can take back, in the order they were found (a
    /// rejection may appear twice): they only grow as messages are pushed, so a caller can
    /// read the new ones since its last look.
    pub fn settled(&self) -> &[Rejection] {
        &self.settled
    }

    /// The rest of [`IncrementalCheck::rejections`]: calls without a result, which a later
    /// result can still answer.
    pub fn unanswered(&self) -> Vec<Rejection> {
        let mut out = Vec::new();
        for (id, callers) in &self.waiting {
            out.extend(callers.iter().map(|&c| rejection(RequestRule::UnansweredToolCall, c, Some(id))));
        }
        // The open user turn that is not only results: its calls are no longer in flight.
        if let Some(o) = &self.open {
            if self.provider == Provider::AnthropicMessages && !o.assistant && o.text_seen {
                if let Some(caller) = o.caller {
                    out.extend(o.pending.iter().map(|id| rejection(RequestRule::UnansweredToolCall, caller, Some(id))));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "t".into(), arguments: "{}".into() }
    }
    fn calls(ids: &[&str]) -> Message {
        Message::assistant_calls("", ids.iter().map(|i| call(i)).collect())
    }
    fn result(id: &str) -> Message {
        Message::tool_result(id, "t", "ok")
    }
    fn rules(messages: Vec<Message>, provider: Provider) -> Vec<(RequestRule, usize)> {
        check_request(&Context::from_messages(messages), provider).into_iter().map(|r| (r.rule, r.index)).collect()
    }
    use Provider::{AnthropicMessages as A, OpenaiChat as O};
    use RequestRule::*;

    #[test]
    fn a_well_formed_agent_request_passes_both() {
        let ok = vec![
            Message::system("sys"),
            Message::user("go"),
            calls(&["a", "b"]),
            result("a"),
            result("b"),
            Message::assistant("done"),
            Message::user("more"),
            calls(&["c"]),
            result("c"),
        ];
        assert_eq!(rules(ok, O), []);
        let ok = vec![Message::user("go"), calls(&["a"]), result("a"), Message::assistant("x")];
        assert_eq!(rules(ok, A), []);
    }

    #[test]
    fn misplaced_result_openai() {
        let m = vec![Message::user("go"), calls(&["a"]), Message::user("hm"), result("a"), Message::assistant("x")];
        assert_eq!(rules(m, O), [(MisplacedToolResult, 3)]);
        // A parallel batch split by an assistant message.
        let m = vec![Message::user("go"), calls(&["a", "b"]), result("a"), Message::assistant("x"), result("b")];
        assert_eq!(rules(m, O), [(MisplacedToolResult, 4)]);
    }

    #[test]
    fn misplaced_result_anthropic() {
        // Text before the result in the next user turn.
        let m = vec![Message::user("go"), calls(&["a"]), Message::user("hm"), result("a"), Message::assistant("x")];
        assert_eq!(rules(m, A), [(MisplacedToolResult, 3)]);
        // A result two turns later.
        let m = vec![
            Message::user("go"),
            calls(&["a"]),
            Message::user("hm"),
            Message::assistant("y"),
            result("a"),
            Message::assistant("x"),
        ];
        assert_eq!(rules(m, A), [(MisplacedToolResult, 4)]);
        // Anthropic combines consecutive assistant messages into one turn: text after the call
        // in that turn is accepted, which OpenAI refuses.
        let m = vec![Message::user("go"), calls(&["a"]), Message::assistant("thinking"), result("a")];
        assert_eq!(rules(m.clone(), A), []);
        assert_eq!(rules(m, O), [(MisplacedToolResult, 3)]);
    }

    #[test]
    fn orphan_result_both() {
        let m = vec![Message::user("go"), result("zz"), Message::assistant("x")];
        assert_eq!(rules(m.clone(), O), [(OrphanToolResult, 1)]);
        assert_eq!(rules(m, A), [(OrphanToolResult, 1)]);
        let m = vec![Message::user("go"), calls(&["a"]), result("a"), result("zz"), Message::assistant("x")];
        assert_eq!(rules(m.clone(), O), [(OrphanToolResult, 3)]);
        assert_eq!(rules(m, A), [(OrphanToolResult, 3)]);
    }

    #[test]
    fn unanswered_call_both_but_the_final_assistants_calls_may_be_in_flight() {
        let m =
            vec![Message::user("go"), calls(&["a", "b"]), result("a"), Message::user("next"), Message::assistant("x")];
        assert_eq!(rules(m.clone(), O), [(UnansweredToolCall, 1)]);
        assert_eq!(rules(m, A), [(UnansweredToolCall, 1)]);
        // The final assistant message, partly answered: in flight.
        let m = vec![Message::user("go"), calls(&["a", "b"]), result("a")];
        assert_eq!(rules(m.clone(), O), []);
        assert_eq!(rules(m, A), []);
        let m = vec![Message::user("go"), calls(&["a"])];
        assert_eq!(rules(m.clone(), O), []);
        assert_eq!(rules(m, A), []);
        // Not the final one when a user message follows.
        let m = vec![Message::user("go"), calls(&["a"]), Message::user("still there?")];
        assert_eq!(rules(m.clone(), O), [(UnansweredToolCall, 1)]);
        assert_eq!(rules(m, A), [(UnansweredToolCall, 1)]);
    }

    #[test]
    fn duplicate_call_ids_both() {
        let m =
            vec![Message::user("go"), calls(&["a"]), result("a"), calls(&["a"]), result("a"), Message::assistant("x")];
        assert_eq!(rules(m.clone(), O), [(DuplicateCallId, 3)]);
        assert_eq!(rules(m, A), [(DuplicateCallId, 3)]);
    }

    #[test]
    fn first_message_after_the_system_prompt_must_be_a_user_message_for_anthropic() {
        let m = vec![Message::system("s"), Message::assistant("summary"), Message::user("go"), Message::assistant("x")];
        assert_eq!(rules(m.clone(), A), [(FirstNotUser, 1)]);
        assert_eq!(rules(m, O), []);
    }

    #[test]
    fn a_system_message_inside_the_conversation_is_refused_by_anthropic() {
        let m = vec![
            Message::system("s"),
            Message::system("also the prompt"),
            Message::user("go"),
            Message::system("digest"),
            Message::assistant("x"),
        ];
        assert_eq!(rules(m.clone(), A), [(SystemInConversation, 3)]);
        assert_eq!(rules(m, O), []);
    }

    #[test]
    fn empty_text_is_refused_by_anthropic() {
        let m = vec![Message::user("go"), Message::assistant(""), Message::user("  \n"), Message::assistant("x")];
        assert_eq!(rules(m.clone(), A), [(EmptyText, 1), (EmptyText, 2)]);
        assert_eq!(rules(m, O), []);
        // An assistant message that only calls tools, and an empty tool result, are fine.
        let m = vec![Message::user("go"), calls(&["a"]), Message::tool_result("a", "t", ""), Message::assistant("x")];
        assert_eq!(rules(m, A), []);
    }

    #[test]
    fn every_rule_applies_to_the_providers_that_document_it() {
        for rule in RequestRule::ALL {
            assert!(rule.applies_to(A), "{rule}");
        }
        let openai: Vec<RequestRule> = RequestRule::ALL.into_iter().filter(|r| r.applies_to(O)).collect();
        assert_eq!(openai, [MisplacedToolResult, OrphanToolResult, UnansweredToolCall, DuplicateCallId]);
    }

    /// A message of a small alphabet: every role, empty text, calls sharing ids, results of
    /// ids that were and were not called.
    fn arbitrary_message() -> impl proptest::strategy::Strategy<Value = Message> {
        use proptest::prelude::*;
        let id = prop::sample::select(vec!["a", "b", "c", "d"]);
        prop_oneof![
            2 => Just(Message::user("go")),
            1 => Just(Message::user(" ")),
            2 => Just(Message::assistant("ok")),
            1 => Just(Message::assistant("")),
            1 => Just(Message::system("note")),
            3 => prop::collection::vec(id.clone(), 1..3).prop_map(|ids| calls(&ids)),
            4 => id.prop_map(result),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn the_incremental_check_agrees_with_the_full_one_after_every_message(
            messages in proptest::collection::vec(arbitrary_message(), 0..14)
        ) {
            for provider in Provider::ALL {
                let mut check = IncrementalCheck::new(provider);
                for k in 0..messages.len() {
                    check.push(&messages[k]);
                    let prefix: Vec<&Message> = messages[..=k].iter().collect();
                    proptest::prop_assert_eq!(
                        check.rejections(),
                        check_messages(&prefix, provider),
                        "{} after {} messages", provider, k + 1
                    );
                }
            }
        }
    }
}
