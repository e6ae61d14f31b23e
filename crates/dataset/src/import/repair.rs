//! The one repair pass every importer's output goes through, and its typed report.
//!
//! Recordings break the conversation format in a few recurring ways. The pass fixes each in
//! one place, the same way for every format, and records every fix as a [`Repair`] that names
//! the file, line and field it comes from:
//!
//! - **Reused call ids** ([`RepairKind::ReusedCallId`]): a call whose id an earlier call of the
//!   conversation already used (tau-bench reuses `call_...` ids; SWE-agent's replays too) is
//!   renamed `<id>~<n>`, and results are paired by position: a result answers the open call
//!   of its id in the most recent assistant message that has one (the first such call of that
//!   message). Its result is renamed with it.
//! - **Call with no result** ([`RepairKind::MissingResult`]): a placeholder result
//!   (`[no result recorded]`, flagged `meta.synthetic = true`) is inserted after the results
//!   that follow the call. The calls of the last assistant message, when nothing but results
//!   follow it, were in flight when the recording ended: they are kept as they are and
//!   counted in [`RepairReport::in_flight_calls`].
//! - **Result with no call** ([`RepairKind::OrphanResult`]): dropped.
//! - **Result with no call id** ([`RepairKind::MissingResultId`]): paired by position with the
//!   first open call of the most recent assistant message that has one.
//! - **Call with no id or no name** ([`RepairKind::MissingCallId`], [`RepairKind::MissingToolName`]):
//!   given a fresh id, or the name `unknown`.
//! - **Result naming another tool than its call** ([`RepairKind::ResultNameMismatch`]): takes
//!   the call's name. A result with no name takes its call's name silently.
//! - **Empty message** ([`RepairKind::EmptyMessage`]): a user or system message with no text,
//!   or an assistant message with neither text nor calls (a response that only thought), is
//!   dropped.
//! - **Compaction marker with no summary** ([`RepairKind::LostCompactBoundary`]): found by the
//!   importer (Claude Code's `compact_boundary` with no `isCompactSummary` message after it),
//!   dropped, and reported here with the others.
//!
//! Which result answers which call, and which unanswered calls are in flight, is
//! [`compaction::pairing::ToolPairing`]'s rule, the one the invariants and the replay use; this
//! pass adds only the policy for what that rule finds broken (rename, pair by position, drop,
//! insert a placeholder), and checks its output against the rule.
//!
//! Consecutive messages of the same role are kept as they are (they are what the agent sent)
//! and counted in [`RepairReport::same_role_pairs`]. With `strict`, the importer turns every
//! repair into an error instead (see [`super::ImportOptions::strict`]).

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use compaction::pairing::ToolPairing;
use compaction::{Message, Role};
use serde::{Deserialize, Serialize};

use super::source::At;
use super::Draft;

/// The content of a placeholder result.
pub const PLACEHOLDER_RESULT: &str = "[no result recorded]";

/// The kinds of repair, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairKind {
    ReusedCallId,
    MissingCallId,
    MissingToolName,
    MissingResult,
    OrphanResult,
    MissingResultId,
    ResultNameMismatch,
    EmptyMessage,
    LostCompactBoundary,
}

impl RepairKind {
    pub const ALL: [RepairKind; 9] = [
        RepairKind::ReusedCallId,
        RepairKind::MissingCallId,
        RepairKind::MissingToolName,
        RepairKind::MissingResult,
        RepairKind::OrphanResult,
        RepairKind::MissingResultId,
        RepairKind::ResultNameMismatch,
        RepairKind::EmptyMessage,
        RepairKind::LostCompactBoundary,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            RepairKind::ReusedCallId => "reused_call_id",
            RepairKind::MissingCallId => "missing_call_id",
            RepairKind::MissingToolName => "missing_tool_name",
            RepairKind::MissingResult => "missing_result",
            RepairKind::OrphanResult => "orphan_result",
            RepairKind::MissingResultId => "missing_result_id",
            RepairKind::ResultNameMismatch => "result_name_mismatch",
            RepairKind::EmptyMessage => "empty_message",
            RepairKind::LostCompactBoundary => "lost_compact_boundary",
        }
    }
}

impl fmt::Display for RepairKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One repair, located in the source file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    pub kind: RepairKind,
    pub conversation: String,
    /// 1-based line of the source file, when known.
    pub line: Option<usize>,
    /// The JSON path of the field in the source record.
    pub field: String,
    /// What was found and what was done.
    pub detail: String,
}

/// What the repair pass did, over one or more conversations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairReport {
    /// Conversations that went through the pass.
    pub conversations: usize,
    /// Repairs by kind (kinds with no repair are absent).
    pub counts: BTreeMap<RepairKind, usize>,
    /// Calls of the last assistant message with no result (in flight when the recording
    /// ended), kept as they are.
    pub in_flight_calls: usize,
    /// Adjacent user/user, assistant/assistant or system/system messages, kept as they are.
    pub same_role_pairs: usize,
    /// Every repair, in order.
    pub repairs: Vec<Repair>,
}

impl RepairReport {
    /// Total repairs.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }
    pub fn count(&self, kind: RepairKind) -> usize {
        self.counts.get(&kind).copied().unwrap_or(0)
    }
    /// Add `other` to this report.
    pub fn merge(&mut self, other: &RepairReport) {
        self.conversations += other.conversations;
        for (k, n) in &other.counts {
            *self.counts.entry(*k).or_default() += n;
        }
        self.in_flight_calls += other.in_flight_calls;
        self.same_role_pairs += other.same_role_pairs;
        self.repairs.extend(other.repairs.iter().cloned());
    }
    fn add(&mut self, repair: Repair) {
        *self.counts.entry(repair.kind).or_default() += 1;
        self.repairs.push(repair);
    }
}

impl fmt::Display for RepairReport {
    /// `12 repairs (reused_call_id 9, missing_result 3); 4 in-flight calls kept; 2 same-role pairs kept`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total();
        write!(f, "{total} repair{}", if total == 1 { "" } else { "s" })?;
        if total > 0 {
            let parts: Vec<String> = self.counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
            write!(f, " ({})", parts.join(", "))?;
        }
        write!(f, "; {} in-flight calls kept; {} same-role pairs kept", self.in_flight_calls, self.same_role_pairs)
    }
}

/// A conversation out of the pass.
pub(crate) struct Repaired {
    pub conversation: compaction::Conversation,
    pub report: RepairReport,
}

/// Records repairs with their location.
struct Notes<'a> {
    conversation: String,
    line_of: &'a dyn Fn(&At) -> Option<usize>,
    report: RepairReport,
}

impl Notes<'_> {
    fn add(&mut self, kind: RepairKind, at: &At, suffix: &str, detail: String) {
        let base = at.field.to_string();
        let field = match (base.is_empty(), suffix.is_empty()) {
            (_, true) => base,
            (true, false) => suffix.to_string(),
            (false, false) => format!("{base}.{suffix}"),
        };
        let repair = Repair { kind, conversation: self.conversation.clone(), line: (self.line_of)(at), field, detail };
        self.report.add(repair);
    }
}

/// An open call during pairing.
struct Open {
    /// Index into the kept messages.
    message: usize,
    orig: String,
    id: String,
    name: String,
    at: At,
}

/// Run the pass over one imported conversation. `line_of` turns a location into a line.
pub(crate) fn repair(draft: Draft, line_of: &dyn Fn(&At) -> Option<usize>) -> Repaired {
    let Draft { mut conversation, messages, repairs } = draft;
    let mut notes = Notes { conversation: conversation.id.clone(), line_of, report: RepairReport::default() };
    notes.report.conversations = 1;
    for (kind, at, detail) in repairs {
        notes.add(kind, &at, "", detail);
    }

    // Ids in use, so that renamed and generated ids never collide with recorded ones.
    let mut used: HashSet<String> =
        messages.iter().flat_map(|s| s.message.tool_calls.iter().map(|c| c.id.clone())).collect();
    let fresh = |base: &str, used: &mut HashSet<String>| {
        let mut n = 2usize;
        loop {
            let candidate = format!("{base}~{n}");
            if used.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    };

    // 1. Empty messages, call ids and names.
    let mut kept: Vec<(Message, At, Vec<At>, Vec<String>)> = Vec::with_capacity(messages.len());
    let mut seen: HashSet<String> = HashSet::new();
    for s in messages {
        let mut m = s.message;
        let empty = match m.role {
            Role::System | Role::User => m.content.trim().is_empty(),
            Role::Assistant => m.content.trim().is_empty() && m.tool_calls.is_empty(),
            Role::Tool => false,
        };
        if empty {
            let detail = if m.role == Role::Assistant {
                "assistant message with no text and no calls; dropped".to_string()
            } else {
                format!("{} message with no text; dropped", m.role)
            };
            notes.add(RepairKind::EmptyMessage, &s.at, "content", detail);
            continue;
        }
        let mut origs = Vec::with_capacity(m.tool_calls.len());
        for (j, call) in m.tool_calls.iter_mut().enumerate() {
            let at = s.calls.get(j).unwrap_or(&s.at).clone();
            if call.name.trim().is_empty() {
                call.name = "unknown".to_string();
                notes.add(RepairKind::MissingToolName, &at, "name", "call with no tool name; named `unknown`".into());
            }
            let orig = call.id.clone();
            if call.id.trim().is_empty() {
                call.id = fresh("call", &mut used);
                notes.add(RepairKind::MissingCallId, &at, "id", format!("call with no id; given {:?}", call.id));
            } else if seen.contains(&call.id) {
                let renamed = fresh(&call.id, &mut used);
                notes.add(
                    RepairKind::ReusedCallId,
                    &at,
                    "id",
                    format!(
                        "id {:?} is used by an earlier call; renamed {renamed:?}, results paired by position",
                        call.id
                    ),
                );
                call.id = renamed;
            }
            seen.insert(call.id.clone());
            origs.push(orig);
        }
        kept.push((m, s.at, s.calls, origs));
    }

    // 2. Pair results with calls.
    let mut open: Vec<Open> = Vec::new();
    let mut drop = vec![false; kept.len()];
    for i in 0..kept.len() {
        let (m, at, calls, origs) = &mut kept[i];
        if m.role == Role::Assistant {
            for (j, call) in m.tool_calls.iter().enumerate() {
                open.push(Open {
                    message: i,
                    orig: origs[j].clone(),
                    id: call.id.clone(),
                    name: call.name.clone(),
                    at: calls.get(j).unwrap_or(at).clone(),
                });
            }
            continue;
        }
        if m.role != Role::Tool {
            continue;
        }
        let rid = m.tool_call_id.clone().unwrap_or_default();
        let pick = if rid.trim().is_empty() {
            let last = open.iter().map(|o| o.message).max();
            let pick = last.and_then(|lm| open.iter().position(|o| o.message == lm));
            if let Some(k) = pick {
                let detail = format!("result with no call id; paired by position with call {:?}", open[k].id);
                notes.add(RepairKind::MissingResultId, at, "tool_call_id", detail);
            }
            pick
        } else {
            let last = open.iter().filter(|o| o.orig == rid).map(|o| o.message).max();
            last.and_then(|lm| open.iter().position(|o| o.message == lm && o.orig == rid))
        };
        match pick {
            Some(k) => {
                let o = open.remove(k);
                m.tool_call_id = Some(o.id);
                match &m.name {
                    Some(name) if *name != o.name => {
                        let detail = format!("result names tool {name:?}, its call names {:?}; renamed", o.name);
                        notes.add(RepairKind::ResultNameMismatch, at, "name", detail);
                        m.name = Some(o.name);
                    }
                    Some(_) => {}
                    None => m.name = Some(o.name),
                }
            }
            None => {
                drop[i] = true;
                let detail = if rid.trim().is_empty() {
                    "result with no call id and no open call before it; dropped".to_string()
                } else {
                    format!("result for call {rid:?}, which has no open call before it; dropped")
                };
                notes.add(RepairKind::OrphanResult, at, "tool_call_id", detail);
            }
        }
    }

    // 3. Placeholders for calls with no result, except those in flight at the end.
    let mut new_index = vec![usize::MAX; kept.len()];
    let mut out: Vec<Message> = Vec::with_capacity(kept.len());
    for (i, (m, ..)) in kept.into_iter().enumerate() {
        if !drop[i] {
            new_index[i] = out.len();
            out.push(m);
        }
    }
    // With ids unique and every result renamed with its call, the pairing rule sees the calls
    // left open here; which of them are in flight is its call, not this pass's.
    let unanswered: HashSet<(usize, String)> = ToolPairing::scan(&out).unanswered().into_iter().collect();
    let mut inserts: BTreeMap<usize, Vec<Message>> = BTreeMap::new();
    let mut in_flight = 0usize;
    for o in open {
        let at_msg = new_index[o.message];
        if !unanswered.contains(&(at_msg, o.id.clone())) {
            in_flight += 1;
            continue;
        }
        let pos = out[at_msg + 1..].iter().position(|m| m.role != Role::Tool).map_or(out.len(), |p| at_msg + 1 + p);
        let detail = format!("call {:?} ({}) has no result; placeholder result added", o.id, o.name);
        notes.add(RepairKind::MissingResult, &o.at, "id", detail);
        let placeholder = Message::tool_result(o.id, o.name, PLACEHOLDER_RESULT).with_meta("synthetic", true.into());
        inserts.entry(pos).or_default().push(placeholder);
    }
    for (pos, batch) in inserts.into_iter().rev() {
        out.splice(pos..pos, batch);
    }

    debug_assert!(
        {
            let after = ToolPairing::scan(&out);
            after.orphans().is_empty() && after.unanswered().is_empty()
        },
        "the repaired conversation breaks the pairing rule"
    );
    notes.report.in_flight_calls = in_flight;
    notes.report.same_role_pairs = out.windows(2).filter(|w| w[0].role == w[1].role && w[0].role != Role::Tool).count();
    conversation.messages = out;
    Repaired { conversation, report: notes.report }
}

#[cfg(test)]
mod tests {
    use compaction::{Conversation, ToolCall};

    use super::super::source::Field;
    use super::super::Sourced;
    use super::*;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: "{}".into() }
    }

    fn draft(messages: Vec<Message>) -> Draft {
        let messages = messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let at = At::path(Field::root().key("messages").at(i));
                let calls = (0..m.tool_calls.len()).map(|j| at.key("tool_calls").at(j)).collect();
                Sourced { message: m, at, calls }
            })
            .collect();
        Draft { conversation: Conversation::new("c", Vec::new()), messages, repairs: Vec::new() }
    }

    fn run(messages: Vec<Message>) -> Repaired {
        repair(draft(messages), &|at: &At| Some(at.field.steps().len()))
    }

    #[test]
    fn reused_ids_are_renamed_and_paired_by_position() {
        let r = run(vec![
            Message::user("find flights"),
            Message::assistant_calls("", vec![call("c1", "search")]),
            Message::tool_result("c1", "search", "none"),
            Message::assistant_calls("", vec![call("c1", "search")]),
            Message::tool_result("c1", "search", "HAT136"),
            Message::assistant("HAT136 it is"),
        ]);
        let m = &r.conversation.messages;
        assert_eq!(m[3].tool_calls[0].id, "c1~2");
        assert_eq!(m[2].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(m[4].tool_call_id.as_deref(), Some("c1~2"));
        assert_eq!(r.report.count(RepairKind::ReusedCallId), 1);
        assert_eq!(r.report.repairs[0].field, "messages[3].tool_calls[0].id");
        assert!(compaction::check_context(&compaction::Context::from_messages(m.clone())).is_empty());
    }

    #[test]
    fn a_result_answers_the_most_recent_open_call_of_its_id() {
        // The first call never got a result; the result after the second call is the second's.
        let r = run(vec![
            Message::user("go"),
            Message::assistant_calls("", vec![call("x", "a")]),
            Message::user("never mind"),
            Message::assistant_calls("", vec![call("x", "a")]),
            Message::tool_result("x", "a", "done"),
            Message::assistant("ok"),
        ]);
        let m = &r.conversation.messages;
        assert_eq!(m[5].tool_call_id.as_deref(), Some("x~2"));
        // The placeholder for the first call follows it directly.
        assert_eq!(m[2].tool_call_id.as_deref(), Some("x"));
        assert!(m[2].meta_flag("synthetic"));
        assert_eq!(m[2].content, PLACEHOLDER_RESULT);
        assert_eq!(r.report.count(RepairKind::MissingResult), 1);
    }

    #[test]
    fn placeholders_go_after_the_results_that_follow_the_call() {
        let r = run(vec![
            Message::user("go"),
            Message::assistant_calls("", vec![call("a", "read"), call("b", "read"), call("c", "read")]),
            Message::tool_result("a", "read", "1"),
            Message::user("[Request interrupted by user]"),
            Message::assistant("stopped"),
        ]);
        let roles: Vec<(Role, Option<&str>)> =
            r.conversation.messages.iter().map(|m| (m.role, m.tool_call_id.as_deref())).collect();
        assert_eq!(
            roles,
            vec![
                (Role::User, None),
                (Role::Assistant, None),
                (Role::Tool, Some("a")),
                (Role::Tool, Some("b")),
                (Role::Tool, Some("c")),
                (Role::User, None),
                (Role::Assistant, None),
            ]
        );
        assert_eq!(r.report.count(RepairKind::MissingResult), 2);
    }

    #[test]
    fn calls_in_flight_at_the_end_are_kept() {
        let r = run(vec![Message::user("go"), Message::assistant_calls("submitting", vec![call("s", "submit")])]);
        assert_eq!(r.conversation.messages.len(), 2);
        assert_eq!(r.report.total(), 0);
        assert_eq!(r.report.in_flight_calls, 1);
    }

    #[test]
    fn only_the_final_assistant_messages_calls_are_in_flight() {
        // b (an earlier message, followed by another response) gets a placeholder; d (the final
        // message, with only results after it) is in flight.
        let r = run(vec![
            Message::user("go"),
            Message::assistant_calls("", vec![call("a", "read"), call("b", "read")]),
            Message::tool_result("a", "read", "1"),
            Message::assistant_calls("", vec![call("c", "read"), call("d", "read")]),
            Message::tool_result("c", "read", "3"),
        ]);
        let m = &r.conversation.messages;
        let ids: Vec<Option<&str>> = m.iter().map(|m| m.tool_call_id.as_deref()).collect();
        assert_eq!(ids, vec![None, None, Some("a"), Some("b"), None, Some("c")]);
        assert!(m[3].meta_flag("synthetic"));
        assert_eq!(r.report.count(RepairKind::MissingResult), 1);
        assert_eq!(r.report.in_flight_calls, 1);
        assert!(compaction::check_context(&compaction::Context::from_messages(m.clone())).is_empty());

        // Calls followed by a user message are not in flight: the recording went on without them.
        let r = run(vec![
            Message::user("go"),
            Message::assistant_calls("", vec![call("e", "read")]),
            Message::user("[Request interrupted by user]"),
        ]);
        assert_eq!(r.report.count(RepairKind::MissingResult), 1);
        assert_eq!(r.report.in_flight_calls, 0);
        assert!(r.report.to_string().ends_with("; 0 in-flight calls kept; 0 same-role pairs kept"), "{}", r.report);
    }

    #[test]
    fn orphans_and_empty_messages_are_dropped_and_same_roles_kept() {
        let mut no_id = Message::tool_result("", "read", "late");
        no_id.tool_call_id = None;
        let r = run(vec![
            Message::user("go"),
            Message::user("   "),
            Message::tool_result("ghost", "read", "boo"),
            Message::assistant(""),
            Message::assistant("thinking done"),
            no_id,
            Message::user("again"),
            Message::user("and again"),
        ]);
        let m = &r.conversation.messages;
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(r.report.count(RepairKind::EmptyMessage), 2);
        assert_eq!(r.report.count(RepairKind::OrphanResult), 2);
        assert_eq!(r.report.same_role_pairs, 1);
        let orphan = r.report.repairs.iter().find(|x| x.kind == RepairKind::OrphanResult).expect("an orphan");
        assert_eq!(orphan.field, "messages[2].tool_call_id");
        assert_eq!(orphan.line, Some(2));
    }

    #[test]
    fn missing_ids_names_and_mismatched_names_are_fixed() {
        let mut unnamed = Message::tool_result("", "zzz", "out");
        unnamed.tool_call_id = None;
        unnamed.name = None;
        let r = run(vec![
            Message::user("go"),
            Message::assistant_calls("", vec![call("", ""), call("k", "grep")]),
            unnamed,
            Message::tool_result("k", "find", "hits"),
            Message::assistant("done"),
        ]);
        let m = &r.conversation.messages;
        assert_eq!(m[1].tool_calls[0].name, "unknown");
        assert_eq!(m[1].tool_calls[0].id, "call~2");
        assert_eq!(m[2].tool_call_id.as_deref(), Some("call~2"));
        assert_eq!(m[2].name.as_deref(), Some("unknown"));
        assert_eq!(m[3].name.as_deref(), Some("grep"));
        for kind in [
            RepairKind::MissingToolName,
            RepairKind::MissingCallId,
            RepairKind::MissingResultId,
            RepairKind::ResultNameMismatch,
        ] {
            assert_eq!(r.report.count(kind), 1, "{kind}");
        }
        assert!(r.report.to_string().starts_with("4 repairs ("), "{}", r.report);
    }
}
