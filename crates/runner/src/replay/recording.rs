//! What the replay reads from the recording itself, before any strategy runs: where the probes'
//! checkpoints fall, which user messages a person typed, what a recorded summary replaced, and
//! the provider rules and tool-call ids the recording breaks as recorded.

use std::collections::{BTreeSet, HashSet};

use compaction::{check_messages, Context, Conversation, Exact, Message, Provider, RequestRule, Role, TokenCounter};

use super::CHECKPOINTS;

/// The checkpoints of `conversation`: (recorded messages in, percentage of its calls). The
/// checkpoint at p% comes right after the assistant message of call ceil(p% of the calls)
/// (the same call for every strategy); 100% is the end of the conversation. Checkpoints that
/// fall at the same point (few calls) are one, under the highest percentage.
pub fn checkpoints_of(conversation: &Conversation) -> Vec<(usize, u32)> {
    let n = conversation.messages.len();
    let calls: Vec<usize> =
        conversation.messages.iter().enumerate().filter(|(_, m)| m.role == Role::Assistant).map(|(i, _)| i).collect();
    let mut out: Vec<(usize, u32)> = Vec::new();
    for percent in CHECKPOINTS {
        let at = if percent == 100 || calls.is_empty() {
            n
        } else {
            let c = (calls.len() * percent as usize).div_ceil(100).max(1);
            calls[c - 1] + 1
        };
        match out.last_mut() {
            Some(last) if last.0 == at => last.1 = percent,
            _ => out.push((at, percent)),
        }
    }
    out
}

/// The first assistant message at or after index `at`: the call an answer key asked at `at`
/// is asked on.
pub(super) fn first_call_from(conversation: &Conversation, at: usize) -> Option<usize> {
    conversation.messages.iter().enumerate().skip(at).find(|(_, m)| m.role == Role::Assistant).map(|(i, _)| i)
}

/// The percentage of the conversation's calls made once `count` recorded messages are in.
pub(super) fn share_of_calls(conversation: &Conversation, count: usize) -> u32 {
    let total = conversation.messages.iter().filter(|m| m.role == Role::Assistant).count();
    if total == 0 {
        return 100;
    }
    let done = conversation.messages[..count].iter().filter(|m| m.role == Role::Assistant).count();
    u32::try_from((done * 100 + total / 2) / total).unwrap_or(100)
}

/// A user message a person typed: not a tool result, not text the agent harness injected,
/// not a summary the recorded agent wrote.
pub(super) fn is_live_request(m: &Message) -> bool {
    m.role == Role::User
        && !m.meta_flag("injected")
        && !m.meta_flag(compaction::message::COMPACT_SUMMARY)
        && !m.meta_flag("synthetic")
}

/// The exact tokens of what a recorded summary replaced in `ctx` (every entry `plan` does not
/// keep) and of the summary itself.
pub(super) fn recorded_summary_tokens(
    ctx: &Context,
    exact: &Exact,
    plan: &compaction::Plan,
    event: &compaction::CompactionEvent,
) -> (u64, u64) {
    let kept: BTreeSet<usize> = plan
        .layout
        .iter()
        .filter_map(|slot| match slot {
            compaction::Slot::Keep { index } => Some(*index),
            _ => None,
        })
        .collect();
    let replaced: u64 =
        ctx.entries().iter().enumerate().filter(|(i, _)| !kept.contains(i)).map(|(_, e)| e.tokens(exact)).sum();
    let written: u64 = event.summaries.iter().map(|s| exact.text_tokens(s)).sum();
    (replaced, written)
}

/// The provider rules `conversation` breaks as recorded, each with the message that breaks it.
pub(super) fn recording_rejections(conversation: &Conversation) -> HashSet<(Provider, RequestRule, usize)> {
    let messages: Vec<&Message> = conversation.messages.iter().collect();
    Provider::ALL
        .into_iter()
        .flat_map(|p| check_messages(&messages, p).into_iter().map(move |r| (p, r.rule, r.index)))
        .collect()
}

/// The tool-call ids a recording itself gets wrong: results with no earlier call, calls never
/// answered before a later assistant message (both make `validate` reject the conversation,
/// so only a run with `--allow-invalid` replays them), and ids the recording gives to more
/// than one call (recorded agents reuse an id for consecutive calls, tau-bench's airline
/// trajectories among them; a provider refuses the repeat whatever the strategy does).
pub fn recording_faults(conversation: &Conversation) -> HashSet<String> {
    let mut called: HashSet<&str> = HashSet::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut faults: HashSet<String> = HashSet::new();
    // Calls of the latest assistant message are in flight until the next assistant message.
    let mut open: Vec<&str> = Vec::new();
    for m in &conversation.messages {
        match m.role {
            Role::Assistant => {
                faults.extend(open.drain(..).filter(|id| !answered.contains(id)).map(str::to_string));
                for c in &m.tool_calls {
                    if !called.insert(c.id.as_str()) {
                        faults.insert(c.id.clone());
                    }
                    open.push(c.id.as_str());
                }
            }
            Role::Tool => {
                if let Some(id) = m.tool_call_id.as_deref() {
                    if !called.contains(id) {
                        faults.insert(id.to_string());
                    }
                    answered.insert(id);
                }
            }
            _ => {}
        }
    }
    faults
}
