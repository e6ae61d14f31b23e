//! What the replay checks on each request: the structural violations, kept up to date as the
//! context grows ([`RequestChecker`]), the provider rules (both providers, with the recording's
//! own faults charged to no strategy) and Anthropic's thinking rule.

use compaction::pairing::ToolPairing;
use compaction::{
    Context, Message, Origin, Provider, Rejection, RequestRule, Role, TokenCounter, Violation, ViolationKind,
};

use super::Replayer;

/// The violations [`compaction::check_context`] reports, counted on requests.
pub(super) fn is_structural(kind: ViolationKind) -> bool {
    matches!(
        kind,
        ViolationKind::OrphanToolResult | ViolationKind::UnansweredToolCall | ViolationKind::MultipleSummaries
    )
}

/// A stable identity for a request's violation, so that one carried from request to request
/// counts once: the entry and call id of a pairing problem, the live summaries of
/// [`Violation::MultipleSummaries`].
pub(super) fn violation_key(ctx: &Context, checker: &RequestChecker, v: &Violation) -> String {
    match v {
        Violation::OrphanToolResult { index, call_id } | Violation::UnansweredToolCall { index, call_id } => {
            format!("{}|{:?}|{call_id}", v.kind().as_str(), ctx.get(*index).map(|e| e.origin()))
        }
        Violation::MultipleSummaries { .. } => format!("{}|{:?}", v.kind().as_str(), checker.summaries),
        other => other.to_string(),
    }
}

/// [`compaction::check_context`], kept up to date as the context grows.
///
/// Between compactions a request is the previous one plus appended messages, so the checker
/// scans only the new entries (pairing results with open calls as `check_context` does) and
/// lists the calls still open; after a compaction it rescans the new context. Its answer is the
/// same set of violations as `check_context` on the same context (tested below), at O(new
/// messages) per request.
#[derive(Debug, Default)]
pub(super) struct RequestChecker {
    /// The pairing of the entries scanned so far (compaction's one pairing rule).
    pairing: ToolPairing,
    /// The live summaries: round and first and last recorded message covered.
    pub(super) summaries: Vec<(u32, Option<usize>, Option<usize>)>,
}

impl RequestChecker {
    /// Forget everything: the context was replaced.
    pub(super) fn reset(&mut self) {
        *self = RequestChecker::default();
    }

    /// The violations of `ctx`, which extends the context of the previous call (or was reset).
    pub(super) fn check(&mut self, ctx: &Context) -> Vec<Violation> {
        for e in ctx.entries().iter().skip(self.pairing.len()) {
            self.pairing.push(e.message());
            if let Origin::Summary { round, covers } = e.origin() {
                self.summaries.push((*round, covers.first().copied(), covers.last().copied()));
            }
        }
        let mut out: Vec<Violation> = self
            .pairing
            .orphans()
            .iter()
            .map(|(index, call_id)| Violation::OrphanToolResult { index: *index, call_id: call_id.clone() })
            .collect();
        out.extend(
            self.pairing
                .unanswered()
                .into_iter()
                .map(|(index, call_id)| Violation::UnansweredToolCall { index, call_id }),
        );
        if self.summaries.len() > 1 {
            out.push(Violation::MultipleSummaries { count: self.summaries.len() });
        }
        out
    }
}

impl<'a, 's> Replayer<'a, 's> {
    /// Exact tokens of the thinking blocks Anthropic counts in the request: those of the
    /// assistant messages of the current tool loop (after the last user message that is not a
    /// tool result); earlier turns' blocks are stripped. 0 for a recording without thinking.
    pub(super) fn loop_thinking_tokens(&self) -> u64 {
        if !self.thinking_in_use {
            return 0;
        }
        let entries = self.compactor.context().entries();
        let start = entries.iter().rposition(|e| e.role() == Role::User).map_or(0, |i| i + 1);
        entries[start..]
            .iter()
            .filter(|e| e.role() == Role::Assistant)
            .flat_map(|e| e.message().thinking.iter())
            .map(|b| self.exact.text_tokens(b.text()))
            .sum()
    }

    /// Anthropic's thinking rule on the current request: in a tool loop still running, the
    /// latest assistant message must carry the thinking blocks the recording's has.
    pub(super) fn thinking_refused(&self) -> bool {
        let Some(recorded) = self.last_assistant.map(|i| &self.conversation.messages[i]) else { return false };
        if recorded.thinking.is_empty() {
            return false;
        }
        let entries = self.compactor.context().entries();
        let Some(last) = entries.iter().rposition(|e| e.role() == Role::Assistant) else { return false };
        let tail: Vec<&Message> = entries[last..].iter().map(|e| e.message()).collect();
        compaction::thinking_rejection(&tail, Some(&recorded.thinking)).is_some()
    }

    pub(super) fn count(&mut self, kind: ViolationKind) {
        self.metrics.violations += 1;
        if !matches!(kind, ViolationKind::OrphanToolResult | ViolationKind::UnansweredToolCall) {
            self.metrics.findings += 1;
        }
        *self.metrics.violations_by_kind.entry(kind.as_str().to_string()).or_default() += 1;
    }

    /// Count the request's structural violations that the previous request did not have.
    pub(super) fn check_request(&mut self) {
        let violations = self.checker.check(self.compactor.context());
        let keyed: Vec<(String, ViolationKind)> =
            violations.iter().map(|v| (violation_key(self.compactor.context(), &self.checker, v), v.kind())).collect();
        for ((key, kind), v) in keyed.iter().zip(&violations) {
            if self.open_violations.contains(key) {
                continue;
            }
            if self.is_recording_fault(v) {
                self.metrics.recording_violations += 1;
            } else {
                self.count(*kind);
            }
        }
        self.open_violations = keyed.into_iter().map(|(key, _)| key).collect();
    }

    /// A violation on a tool call the recording itself leaves unpaired.
    pub(super) fn is_recording_fault(&self, v: &Violation) -> bool {
        match v {
            Violation::OrphanToolResult { call_id, .. } | Violation::UnansweredToolCall { call_id, .. } => {
                self.recording_faults.contains(call_id)
            }
            _ => false,
        }
    }

    /// Count the request once per provider that would refuse it, and once per rule it breaks.
    /// A rule broken only where the recording itself breaks it (on a tool call the recording
    /// gets wrong, or at the recorded message where the whole recording breaks that rule) is
    /// the recording's and not counted.
    /// Returns the providers that refused it, each with its rules (`provider/rule`).
    pub(super) fn check_providers(&mut self) -> Vec<(Provider, Vec<String>)> {
        let mut refused = Vec::new();
        let thinking_refused = self.thinking_in_use && self.thinking_refused();
        let entries = self.compactor.context().entries();
        for check in &mut self.providers {
            for e in &entries[check.len()..] {
                check.push(e.message());
            }
        }
        for ((provider, check), (seen, charged)) in
            Provider::ALL.into_iter().zip(&self.providers).zip(&mut self.provider_rules)
        {
            // Whether the strategy is charged with `r`: not when the recording breaks the same
            // rule on the same call id or at the same recorded message (masked or not).
            let charged_with = |r: &Rejection| {
                let recorded = entries.get(r.index).and_then(|e| e.origin().recorded_index());
                let by_id = r.call_id.as_ref().is_some_and(|id| self.recording_faults.contains(id));
                let as_recorded = recorded.is_some_and(|i| self.recording_rejections.contains(&(provider, r.rule, i)));
                !by_id && !as_recorded
            };
            // A settled rejection stays as long as the context only grows and masks: each is
            // judged once.
            for r in &check.settled()[*seen..] {
                if charged_with(r) {
                    charged.insert(r.rule);
                }
            }
            *seen = check.settled().len();
            let mut rules = charged.clone();
            rules.extend(check.unanswered().iter().filter(|r| charged_with(r)).map(|r| r.rule));
            if provider == Provider::AnthropicMessages && thinking_refused {
                rules.insert(RequestRule::ThinkingModified);
            }
            if rules.is_empty() {
                continue;
            }
            match provider {
                Provider::OpenaiChat => self.metrics.rejected_requests_openai += 1,
                Provider::AnthropicMessages => self.metrics.rejected_requests_anthropic += 1,
            }
            let call = u32::try_from(self.metrics.calls).unwrap_or(u32::MAX);
            let mut keys = Vec::with_capacity(rules.len());
            for rule in rules {
                let key = format!("{provider}/{rule}");
                keys.push(key.clone());
                match &mut self.metrics.first_rule_rejection {
                    None => self.metrics.first_rule_rejection = Some((call, vec![key.clone()])),
                    Some((c, keys)) if *c == call && !keys.contains(&key) => keys.push(key.clone()),
                    Some(_) => {}
                }
                *self.metrics.rejections_by_rule.entry(key).or_default() += 1;
            }
            refused.push((provider, keys));
        }
        refused
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::{check_context, Entry, ToolCall};
    use proptest::prelude::*;

    fn sorted(mut v: Vec<Violation>) -> Vec<String> {
        let mut out: Vec<String> = v.drain(..).map(|v| format!("{v:?}")).collect();
        out.sort();
        out
    }

    /// A message from a small alphabet: roles, calls and results over three reused ids.
    fn message(kind: u8, id: u8) -> Message {
        let id = format!("id{id}");
        match kind {
            0 => Message::user("u"),
            1 => Message::assistant_calls("", vec![ToolCall { id, name: "t".into(), arguments: "{}".into() }]),
            2 => Message::tool_result(id, "t", "r"),
            3 => Message::assistant("a"),
            _ => Message::system("s"),
        }
    }

    proptest! {
        #[test]
        fn the_incremental_checker_agrees_with_check_context(
            steps in prop::collection::vec((0u8..5, 0u8..3), 0..40),
            resets in prop::collection::vec(any::<bool>(), 40),
            summaries in prop::collection::vec(0usize..40, 0..3),
        ) {
            let mut ctx = Context::new();
            let mut checker = RequestChecker::default();
            for (i, (kind, id)) in steps.iter().enumerate() {
                let origin = if summaries.contains(&i) {
                    Origin::Summary { round: 1, covers: vec![i] }
                } else {
                    Origin::Recorded { index: i }
                };
                ctx.push(Entry::new(message(*kind, *id), origin));
                if resets[i] {
                    checker.reset();
                }
                prop_assert_eq!(sorted(checker.check(&ctx)), sorted(check_context(&ctx)));
            }
        }
    }
}
