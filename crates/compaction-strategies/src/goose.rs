//! `goose`: Goose's auto-compaction, as `Agent::reply` drives it.
//!
//! Source: block/goose, read with the code search: `crates/goose/src/agents/agent.rs` at
//! 43025f8890d68643e43a6aec1ae0bb71c85cac5e (`Agent::reply`: the threshold check once per user
//! message; `reply_internal`: compaction on a context-length error), and
//! `crates/goose/src/context_mgmt/mod.rs` at 331a842972378d642bb39bd800a8514b25ae3a70
//! (`check_if_compaction_needed`, `compact_messages`, `do_compact`, `filter_tool_responses`)
//! with `crates/goose/src/prompts/compaction.md` (the template).
//!
//! - **Trigger**: `current_tokens / context_limit > threshold`, threshold
//!   `GOOSE_AUTO_COMPACT_THRESHOLD` = 0.8 (`DEFAULT_COMPACTION_THRESHOLD`); a threshold `<= 0`
//!   or `>= 1` disables auto-compaction. `Agent::reply` checks it once, when a user message
//!   arrives, before the reply's first model call: here [`Strategy::should_compact`] holds only
//!   when the context ends with a user message (a recorded user turn). Tokens are the
//!   session's reported usage: exact `o200k_base` here.
//! - **Inside the tool loop** (`reply_internal`) there is no threshold check: only a
//!   context-length error compacts ([`Trigger::Overflow`]). A second context-length error
//!   with no successful response since the compaction (`compaction_attempts >= 2`) ends the
//!   reply: "Unable to continue: Context limit still exceeded after compaction". Here a
//!   context fresh from a compaction (no recorded assistant message after its summary) gets no
//!   second compaction: no plan, so the request overflows and, under `overflow = "fail"`, the
//!   conversation ends there, as the reply does. On agent recordings with one user prompt
//!   Goose therefore fills to the window and pays one refused request per compaction.
//! - **Summary**: every agent-visible message (the whole history after the system prompt,
//!   earlier summary included) goes to the summarizer with the template
//!   (`goose_compaction.md`: Goal; Constraints & Preferences; Progress with Done / In Progress /
//!   Blocked; Key Decisions; Next Steps; Critical Context; keep exact paths, function names and
//!   error messages; leave out what can be re-read from files).
//! - **New context**: the summary as a user message (the response's role is set to `User`,
//!   agent-only), then an assistant continuation notice, then the most recent user text message
//!   (the preserved message). The notice says the conversation continues
//!   (`CONVERSATION_CONTINUATION_TEXT`) when that message was the last one, and that a tool loop
//!   was in progress (`TOOL_LOOP_CONTINUATION_TEXT`) when it was not. Nothing else is kept.
//! - **Summary request too long**: `do_compact` retries with tool responses removed from the
//!   middle outward, 0, 10, 20, 50 and 100% of them (`num_to_remove = max(1, n x pct / 100)`,
//!   alternating below and above the middle), and fails with "context limit exceeded even after
//!   removing all tool responses". Here the plan picks the first step whose span plus the
//!   summary's output cap fits the window (`notes.tool_responses_removed_percent`); when none
//!   does there is no plan (the compaction fails and the request goes on over the window).
//! - **Failure**: a failed compaction ends the reply ("Ran into this error trying to compact",
//!   `return` from the reply stream; in the tool loop, `break`). The event says so loudly: its
//!   fallback is `reply_ended`, and the context stays as it was.
//!
//! Departures, each kept for a reason:
//! - A reply's first call can see both the threshold compaction and one recovery compaction
//!   upstream (`compaction_attempts` counts only the tool loop's); here the recovery is refused
//!   to any context fresh from a compaction. A compaction at the threshold leaves a context
//!   far under the window, so the case needs a summary larger than the window.
//! - A failed compaction ends the reply upstream: the model calls the rest of that reply would
//!   make never happen. A replay cannot drop recorded calls, so they go on with the context
//!   unchanged, and the event's `reply_ended` fallback marks where the reply would have ended.
//! - Tool-pair summarization is not modelled. At 43025f88 `reply_internal` starts
//!   `maybe_summarize_tool_pair` before every model call (always on): when the conversation holds
//!   more than `GOOSE_TOOL_CALL_CUTOFF` (10) agent-visible tool calls, the oldest call and its
//!   response (Goose splits each call into its own assistant message) are summarized by a
//!   second prompt ("[Historical tool call summary] ..."), made agent-invisible after the
//!   response, and the summary is appended after that call's new messages. `context_mgmt/mod.rs`
//!   at 331a8429 has the later form (`maybe_summarize_tool_pairs`: cutoff
//!   `clamp(window x 0.8 / 10,000, 10, 500)`, batches of `max(cutoff / 5, 3)` pairs, the current
//!   turn protected); the two commits read disagree on the cutoff, the batch and the
//!   protection (and later versions put it behind a `GOOSE_TOOL_PAIR_SUMMARIZATION` switch),
//!   so there is no one shipped behaviour to follow. Modelling either needs a summary prompt of its own (a new prompt kind in the shared strategy
//!   interface) and one summary request per call beyond the cutoff. Without it the module keeps
//!   every tool pair verbatim until a compaction: between compactions it keeps more than Goose
//!   does (higher retention, fewer summarizer calls, larger requests).
//! - The summary's output cap (`summary_max_tokens`, 4,096) is a benchmark choice; Goose sets
//!   none. The preserved user message is kept whole (Goose copies its text parts; a message here
//!   is text only). Continuation texts are in the project's words.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{self, ParamError};
use compaction::context::{Context, Inserted};
use compaction::message::{Message, Role};
use compaction::tokens::{Exact, TokenCounter};
use compaction::{Budget, Fallback, Plan, Promises, Prompt, Slot, Strategy, SummaryRequest, Trigger};

/// The six-section compaction prompt (`goose/goose_compaction.md`, beside this module).
pub fn prompt() -> Prompt {
    Prompt::new("goose_compaction", include_str!("goose/goose_compaction.md"))
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![prompt()]
}

/// One line for the catalog: what the strategy does.
pub const SUMMARY: &str = "Goose auto-compaction: when a user message arrives above 80% of the window (inside the \
     tool loop only on a context-length error, once), summarizes the whole history with the six-section template; \
     keeps the summary, a continuation notice and the most recent user message; removes tool responses from the \
     middle outward (0/10/20/50/100%) when the summary request would not fit; a failed compaction ends the reply.";

/// `removal_percentages`.
pub const REMOVAL_PERCENTAGES: [u32; 5] = [0, 10, 20, 50, 100];

/// The notice after the summary when the preserved user message was the last message.
pub const CONVERSATION_CONTINUATION: &str = "The earlier conversation was compacted into the summary above. Continue \
     from it without mentioning the compaction, and answer the user's latest message below.";
/// The notice when the agent was in the middle of a tool loop.
pub const TOOL_LOOP_CONTINUATION: &str = "The earlier conversation was compacted into the summary above while a task \
     was in progress. Continue the work from where it stopped, without mentioning the compaction; the user's latest \
     message is repeated below.";
/// The notice when no user message is preserved.
pub const PLAIN_CONTINUATION: &str = "The earlier conversation was compacted into the summary above. Continue the \
     work from where it stopped, without mentioning the compaction.";

/// Parameters of `goose`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// `GOOSE_AUTO_COMPACT_THRESHOLD`: compact above this fraction of the window (0.8);
    /// `<= 0` or `>= 1` disables auto-compaction.
    pub threshold: f64,
    /// Output cap of the summary request.
    pub summary_max_tokens: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params { threshold: 0.8, summary_max_tokens: 4_096 }
    }
}

/// The `goose` strategy.
#[derive(Debug, Clone)]
pub struct Goose {
    params: Params,
    meter: Exact,
}

/// `filter_tool_responses`: the positions (into `items`) left after removing `percent` of
/// the tool responses from the middle outward. `is_tool[i]` says whether item `i` is one.
pub fn filter_tool_responses(is_tool: &[bool], percent: u32) -> Vec<usize> {
    let all: Vec<usize> = (0..is_tool.len()).collect();
    if percent == 0 {
        return all;
    }
    let tools: Vec<usize> = all.iter().copied().filter(|&i| is_tool[i]).collect();
    if tools.is_empty() {
        return all;
    }
    let to_remove = (tools.len() * percent as usize / 100).max(1);
    let middle = tools.len() / 2;
    // Which items go, marked by position (a lookup per item, not a search of the removed list).
    let mut removed = vec![false; is_tool.len()];
    for i in 0..to_remove {
        let offset = i / 2;
        if i % 2 == 0 {
            if middle > offset {
                removed[tools[middle - offset - 1]] = true;
            }
        } else if middle + offset < tools.len() {
            removed[tools[middle + offset]] = true;
        }
    }
    all.into_iter().filter(|&i| !removed[i]).collect()
}

impl Goose {
    /// Build with `params`, checked: a bad value is a [`ParamError`] naming it.
    pub fn new(params: Params) -> Result<Goose, ParamError> {
        if !params.threshold.is_finite() {
            return Err(ParamError::new("goose", "threshold", "must be a number"));
        }
        if params.summary_max_tokens == 0 {
            return Err(ParamError::new("goose", "summary_max_tokens", "must be at least 1"));
        }
        Ok(Goose { params, meter: Exact::o200k() })
    }

    /// Whether `Agent::reply` is about to make its first model call: the context ends with a
    /// recorded user message.
    pub fn at_user_message(ctx: &Context) -> bool {
        ctx.entries().last().is_some_and(|e| {
            e.role() == Role::User && matches!(e.origin(), compaction::context::Origin::Recorded { .. })
        })
    }

    /// Whether the context is fresh from a compaction: it holds a summary and no recorded
    /// assistant message after it (no model call has succeeded since).
    pub fn fresh_from_compaction(ctx: &Context) -> bool {
        let Some((at, _)) = ctx.summaries().last() else { return false };
        !ctx.entries()[at + 1..]
            .iter()
            .any(|e| e.role() == Role::Assistant && matches!(e.origin(), compaction::context::Origin::Recorded { .. }))
    }

    /// The most recent user text message, and whether it is the last message.
    pub fn preserved_user(&self, ctx: &Context) -> Option<(usize, bool)> {
        let i = *common::user_turns(ctx).last()?;
        Some((i, i + 1 == ctx.len()))
    }
}

impl Strategy for Goose {
    fn name(&self) -> &'static str {
        "goose"
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.meter
    }
    fn threshold(&self, _ctx: &Context, budget: &Budget) -> Option<u64> {
        let t = self.params.threshold;
        if t <= 0.0 || t >= 1.0 {
            return None;
        }
        Some(common::fraction_of(budget.context_window, t))
    }
    /// `check_if_compaction_needed`, as `Agent::reply` calls it: once per user message.
    fn should_compact(&self, ctx: &Context, budget: &Budget) -> bool {
        Self::at_user_message(ctx) && self.threshold(ctx, budget).is_some_and(|t| self.estimate(ctx) > t)
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        // A second context-length error with no successful call since the compaction: "Unable
        // to continue".
        if trigger != Trigger::Proactive && Self::fresh_from_compaction(ctx) {
            return None;
        }
        let start = common::body_start(ctx);
        let visible: Vec<usize> = (start..ctx.len()).collect();
        if visible.is_empty() {
            return None;
        }
        let is_tool: Vec<bool> = visible.iter().map(|&i| ctx.entries()[i].role() == Role::Tool).collect();
        let output = u64::from(self.params.summary_max_tokens);
        let (percent, span) = REMOVAL_PERCENTAGES.iter().find_map(|&pct| {
            let span: Vec<usize> = filter_tool_responses(&is_tool, pct).into_iter().map(|k| visible[k]).collect();
            common::request_fits(ctx, &span, &self.meter, budget.context_window, output).then_some((pct, span))
        })?;
        let mut layout: Vec<Slot> = common::keep(0..start).collect();
        layout.push(Slot::Summary { request: 0, role: Role::User, prefix: String::new(), suffix: String::new() });
        let preserved = self.preserved_user(ctx);
        let notice = match preserved {
            Some((_, true)) => CONVERSATION_CONTINUATION,
            Some((_, false)) => TOOL_LOOP_CONTINUATION,
            None => PLAIN_CONTINUATION,
        };
        layout.push(Slot::insert(Message::assistant(notice), Inserted::Acknowledgement));
        if let Some((index, _)) = preserved {
            layout.push(Slot::Keep { index });
        }
        let request = SummaryRequest::new(span, prompt(), self.params.summary_max_tokens, common::next_round(ctx));
        let mut plan = common::summary_plan(trigger, layout, request, "tool_responses_removed_percent", percent);
        // A failed compaction ends the reply: the context stays, and the event says so.
        plan.fallback = Fallback::Layout { label: "reply_ended".into(), layout: common::keep(0..ctx.len()).collect() };
        Some(plan)
    }
    fn promises(&self, ctx: &Context, _budget: &Budget) -> Promises {
        let last_is_user = self.preserved_user(ctx).is_some_and(|(_, last)| last);
        Promises {
            keeps_system_prompt: true,
            recent_window: usize::from(last_is_user),
            documented_deviations: Vec::new(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::apply_layout;
    use compaction::message::ToolCall;
    use testkit::summaries::proactive_plan;

    fn tool_loop(results: usize, result_words: usize) -> Context {
        let mut m = vec![Message::system("s"), Message::user("refactor the parser")];
        for i in 0..results {
            let id = format!("t{i}");
            m.push(Message::assistant_calls(
                "",
                vec![ToolCall { id: id.clone(), name: "shell".into(), arguments: "{}".into() }],
            ));
            m.push(Message::tool_result(id, "shell", "line ".repeat(result_words)));
        }
        Context::from_messages(m)
    }

    #[test]
    fn trigger_is_strictly_above_80_percent_and_out_of_range_disables() {
        let s = Goose::new(Params::default()).unwrap();
        assert_eq!(s.threshold(&Context::new(), &Budget::new(128_000)), Some(102_400));
        for t in [0.0, 1.0, -0.5, 1.5] {
            let off = Goose::new(Params { threshold: t, ..Params::default() }).unwrap();
            assert_eq!(off.threshold(&Context::new(), &Budget::new(128_000)), None, "{t}");
            assert!(!off.should_compact(&tool_loop(3, 100), &Budget::new(10)));
        }
    }

    #[test]
    fn middle_out_removal_matches_filter_tool_responses() {
        // Ten tool responses at even positions 0, 2, ..., 18; middle = 5.
        let is_tool: Vec<bool> = (0..20).map(|i| i % 2 == 0).collect();
        let removed = |pct| {
            let kept = filter_tool_responses(&is_tool, pct);
            (0..20).filter(|i| !kept.contains(i)).collect::<Vec<_>>()
        };
        assert!(removed(0).is_empty());
        // 10% of 10 = 1: tools[4] (position 8).
        assert_eq!(removed(10), vec![8]);
        // 20% = 2: tools[4], tools[5].
        assert_eq!(removed(20), vec![8, 10]);
        // 50% = 5: tools[4], [5], [3], [6], [2].
        assert_eq!(removed(50), vec![4, 6, 8, 10, 12]);
        assert_eq!(removed(100).len(), 10);
        // A percentage that rounds to 0 still removes one.
        let three: Vec<bool> = vec![true, false, true, false, true];
        // middle = 1, so the first removed is tools[0].
        assert_eq!(filter_tool_responses(&three, 10), vec![1, 2, 3, 4]);
    }

    #[test]
    fn new_context_is_summary_notice_and_the_last_user_message() {
        let s = Goose::new(Params::default()).unwrap();
        let mut ctx = tool_loop(2, 10);
        ctx.push(compaction::context::Entry::recorded(6, Message::user("also add docs")));
        let budget = Budget::new(10_000);
        let plan = s.plan(&ctx, &budget, Trigger::Overflow).unwrap();
        assert_eq!(plan.requests[0].span, (1..7).collect::<Vec<_>>());
        let out = apply_layout(&s, &ctx, &budget, &plan, &[Ok("SUMMARY".into())]);
        let shape: Vec<(Role, &str)> = out.context.messages().map(|m| (m.role, m.content.as_str())).collect();
        assert_eq!(
            shape,
            vec![
                (Role::System, "s"),
                (Role::User, "SUMMARY"),
                (Role::Assistant, CONVERSATION_CONTINUATION),
                (Role::User, "also add docs")
            ]
        );
        // In a tool loop the preserved message is the task, moved after the notice.
        let ctx = tool_loop(2, 10);
        let plan = s.plan(&ctx, &budget, Trigger::Overflow).unwrap();
        let out = apply_layout(&s, &ctx, &budget, &plan, &[Ok("S".into())]);
        assert_eq!(out.context.get(2).unwrap().message().content, TOOL_LOOP_CONTINUATION);
        assert_eq!(out.context.get(3).unwrap().message().content, "refactor the parser");
    }

    #[test]
    fn an_overflowing_summary_request_drops_tool_responses_and_fails_past_100_percent() {
        let s = Goose::new(Params { summary_max_tokens: 100, ..Params::default() }).unwrap();
        // Ten results of about 200 tokens each: 2,000+ tokens of tool output.
        let ctx = tool_loop(10, 200);
        let plan = s.plan(&ctx, &Budget::new(1_500), Trigger::Overflow).unwrap();
        let pct = plan.notes["tool_responses_removed_percent"].as_u64().unwrap();
        assert_eq!(pct, 50);
        assert_eq!(plan.requests[0].span.iter().filter(|&&i| ctx.entries()[i].role() == Role::Tool).count(), 5);
        let all_out = s.plan(&ctx, &Budget::new(400), Trigger::Overflow).unwrap();
        assert_eq!(all_out.notes["tool_responses_removed_percent"], 100);
        // Without any tool response the span is the task and ten calls; a window under it fails.
        let calls: Vec<usize> = (1..ctx.len()).filter(|&i| ctx.entries()[i].role() != Role::Tool).collect();
        let bare = common::span_tokens(&ctx, &calls, &Exact::o200k());
        assert!(s.plan(&ctx, &Budget::new(bare), Trigger::Overflow).is_none());
    }

    /// Goose's own cases (`context_mgmt/mod.rs` tests), on this model of it.
    mod goose_cases {
        use super::*;
        use compaction::check_context;
        use compaction::request::{check_request, Provider};

        /// A compacted context must be a valid conversation for every provider.
        fn assert_valid(ctx: &Context, what: &str) {
            assert!(check_context(ctx).is_empty(), "{what}: {:?}", check_context(ctx));
            for provider in Provider::ALL {
                assert!(
                    check_request(ctx, provider).is_empty(),
                    "{what} ({provider}): {:?}",
                    check_request(ctx, provider)
                );
            }
        }

        fn compacted(ctx: &Context, window: u64) -> Context {
            let s = Goose::new(Params::default()).unwrap();
            let budget = Budget::new(window);
            let plan = s.plan(ctx, &budget, Trigger::Overflow).expect("a plan");
            let summaries: Vec<_> = plan.requests.iter().map(|_| Ok("<mock summary>".to_string())).collect();
            apply_layout(&s, ctx, &budget, &plan, &summaries).context
        }

        /// `test_keeps_tool_request`: user, a `read_file` call and its response compact into a
        /// valid conversation.
        #[test]
        fn keeps_tool_request() {
            let ctx = Context::from_messages(vec![
                Message::user("read hello.txt"),
                Message::assistant_calls(
                    "",
                    vec![ToolCall { id: "tool_0".into(), name: "read_file".into(), arguments: "{}".into() }],
                ),
                Message::tool_result("tool_0", "read_file", "hello, world"),
            ]);
            assert_valid(&compacted(&ctx, 10_000), "compacted");
        }

        /// `test_progressive_removal_on_context_exceeded`: ten tool pairs whose summary request
        /// is too large with more than two responses in it; progressive removal finds a step
        /// that fits and the compaction succeeds.
        #[test]
        fn progressive_removal_on_context_exceeded() {
            let mut m = vec![Message::user("start")];
            for i in 0..10 {
                let id = format!("tool_{i}");
                m.push(Message::assistant_calls(
                    "",
                    vec![ToolCall { id: id.clone(), name: "read_file".into(), arguments: "{}".into() }],
                ));
                m.push(Message::tool_result(id, "read_file", format!("response{i} {}", "word ".repeat(300))));
            }
            let ctx = Context::from_messages(m);
            let s = Goose::new(Params { summary_max_tokens: 100, ..Params::default() }).unwrap();
            // A window that holds the calls, the summary's output and about two responses.
            let exact = Exact::o200k();
            let calls: Vec<usize> = (0..ctx.len()).filter(|&i| ctx.entries()[i].role() != Role::Tool).collect();
            let response = ctx.entries()[2].tokens(&exact);
            let window =
                common::span_tokens(&ctx, &calls, &exact) + u64::from(s.params.summary_max_tokens) + 2 * response + 50;
            let plan = s.plan(&ctx, &Budget::new(window), Trigger::Overflow).expect("progressive removal fits");
            let kept = plan.requests[0].span.iter().filter(|&&i| ctx.entries()[i].role() == Role::Tool).count();
            assert!(kept <= 2, "{kept} responses kept in the summary request");
            assert!(plan.notes["tool_responses_removed_percent"].as_u64().unwrap() > 0);
            let budget = Budget::new(window);
            let summaries = [Ok("<mock summary>".to_string())];
            assert_valid(&apply_layout(&s, &ctx, &budget, &plan, &summaries).context, "compacted after removal");
        }

        /// `test_compaction_output_with_new_tool_pair_is_valid`: after compaction, a new tool
        /// call and its response appended leave a conversation with no issue.
        #[test]
        fn compaction_output_with_new_tool_pair_is_valid() {
            let mut m = vec![Message::user("Help me with a task")];
            for i in 0..3 {
                let id = format!("old_tool_{i}");
                m.push(Message::assistant_calls(
                    "",
                    vec![ToolCall { id: id.clone(), name: "some_tool".into(), arguments: "{}".into() }],
                ));
                m.push(Message::tool_result(id, "some_tool", format!("result {i}")));
            }
            m.push(Message::user("Now do something else"));
            let mut ctx = compacted(&Context::from_messages(m), 10_000);
            let next = ctx.len();
            ctx.push(compaction::context::Entry::recorded(
                next,
                Message::assistant_calls(
                    "I'll run a new tool",
                    vec![ToolCall { id: "new_tool_1".into(), name: "new_tool".into(), arguments: "{}".into() }],
                ),
            ));
            ctx.push(compaction::context::Entry::recorded(
                next + 1,
                Message::tool_result("new_tool_1", "new_tool", "new result"),
            ));
            assert_valid(&ctx, "compacted + new pair");
            assert!(ctx.messages().any(|m| m.tool_call_id.as_deref() == Some("new_tool_1")));
        }
    }

    /// `Agent::reply`: the threshold is checked when a user message arrives, not before the
    /// tool loop's later calls; there only a context-length error compacts.
    #[test]
    fn the_threshold_is_checked_once_per_user_message() {
        let s = Goose::new(Params::default()).unwrap();
        let budget = Budget::new(1_000);
        // A tool loop over 80%: the context ends with a tool result, no proactive compaction.
        let in_loop = tool_loop(6, 200);
        assert!(s.estimate(&in_loop) > 800);
        assert!(!s.should_compact(&in_loop, &budget));
        assert!(proactive_plan(&s, &in_loop, &budget).is_none());
        // The same history with a new user message: compacted before the reply's first call.
        let mut asked = in_loop.clone();
        asked.push(compaction::context::Entry::recorded(in_loop.len(), Message::user("and now?")));
        assert!(s.should_compact(&asked, &budget));
        assert!(s.plan(&asked, &budget, Trigger::Proactive).is_some());
        // In the loop, a context-length error compacts.
        assert!(s.plan(&in_loop, &Budget::new(5_000), Trigger::Overflow).is_some());
    }

    /// `reply_internal`: `compaction_attempts` counts context-length errors since the last
    /// successful response; the second one ends the reply ("Unable to continue") instead of
    /// compacting again.
    #[test]
    fn a_second_context_length_error_after_a_compaction_gets_no_second_compaction() {
        let s = Goose::new(Params::default()).unwrap();
        let budget = Budget::new(5_000);
        let ctx = tool_loop(6, 200);
        let plan = s.plan(&ctx, &budget, Trigger::Overflow).unwrap();
        let out = apply_layout(&s, &ctx, &budget, &plan, &[Ok("SUMMARY".into())]);
        assert!(Goose::fresh_from_compaction(&out.context));
        assert!(s.plan(&out.context, &budget, Trigger::Overflow).is_none());
        // A successful call since (its recorded message appended): the count starts again.
        let mut later = out.context.clone();
        later.push(compaction::context::Entry::recorded(100, Message::assistant("done")));
        assert!(!Goose::fresh_from_compaction(&later));
        assert!(s.plan(&later, &budget, Trigger::Overflow).is_some());
    }

    /// A failed compaction ends the reply upstream; the event carries `reply_ended`.
    #[test]
    fn a_failed_compaction_is_marked_reply_ended() {
        let s = Goose::new(Params::default()).unwrap();
        let budget = Budget::new(5_000);
        let ctx = tool_loop(3, 20);
        let plan = s.plan(&ctx, &budget, Trigger::Overflow).unwrap();
        let failed = [Err(compaction::SummaryFailure { reason: "provider error".into() })];
        let out = apply_layout(&s, &ctx, &budget, &plan, &failed);
        assert_eq!(out.event.fallback.as_deref(), Some("reply_ended: provider error"));
        assert_eq!(out.context.to_messages(), ctx.to_messages());
        assert!(out.event.is_noop());
    }
}
