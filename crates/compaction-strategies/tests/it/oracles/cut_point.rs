//! The implementation before it was rewritten for speed (a copy of every masked message to
//! measure it, the turn ids as strings, the tool pairs of the whole context for the cut's
//! guard, the plan copied whole in `apply`), kept as the oracle
//! `fast_paths_make_the_plans_of_the_straightforward_ones` holds the rewrite to.
//!
//! Not a module of the integration tests (`main.rs` does not name it): `src/cut_point.rs` compiles
//! it into its own unit tests with `#[path]`, since it reads the module's private steps. The
//! module's source files hold production code only.
#![allow(clippy::all)]
use super::*;

fn regions(ctx: &Context) -> Regions {
    let sys_end =
        ctx.entries().iter().position(|e| e.role() != Role::System || e.origin().is_summary()).unwrap_or(ctx.len());
    let last_summary = ctx.summaries().map(|(i, _)| i).filter(|i| *i >= sys_end).last();
    let boundary = last_summary.map_or(sys_end, |s| s + 1);
    Regions { sys_end, last_summary, boundary }
}

fn is_candidate(ctx: &Context, i: usize) -> bool {
    ctx.get(i).is_some_and(|e| !e.origin().is_summary() && matches!(e.role(), Role::User | Role::Assistant))
}

fn is_message_block(ctx: &Context, i: usize) -> bool {
    is_candidate(ctx, i) || ctx.get(i).is_some_and(|e| e.role() == Role::Tool)
}

fn is_turn_start(ctx: &Context, i: usize) -> bool {
    ctx.get(i).is_some_and(|e| !e.origin().is_summary() && e.role() == Role::User)
}

fn recorded(ctx: &Context, i: usize) -> usize {
    match ctx.get(i).map(|e| e.origin()) {
        Some(Origin::Recorded { index } | Origin::Masked { index }) => *index,
        _ => i,
    }
}

/// `(call entry, result entry)` pairs, paired as the invariant checker pairs them.
fn tool_pairs(ctx: &Context) -> Vec<(usize, usize)> {
    let mut open: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut out = Vec::new();
    for (i, e) in ctx.entries().iter().enumerate() {
        let m = e.message();
        for c in &m.tool_calls {
            open.entry(c.id.as_str()).or_default().push(i);
        }
        if m.role == Role::Tool {
            if let Some(c) = m.tool_call_id.as_deref().and_then(|id| open.get_mut(id)).and_then(|v| v.pop()) {
                out.push((c, i));
            }
        }
    }
    out
}

/// The turn id of every entry from `from` on (`None` before it).
fn turn_ids(ctx: &Context, from: usize) -> Vec<Option<String>> {
    let mut out = vec![None; ctx.len()];
    let mut current: Option<String> = None;
    for (i, slot) in out.iter_mut().enumerate().skip(from) {
        if ctx.get(i).is_some_and(|e| e.origin().is_summary()) {
            continue;
        }
        if is_turn_start(ctx, i) || current.is_none() {
            current = Some(format!("turn-{}", recorded(ctx, i)));
        }
        slot.clone_from(&current);
    }
    out
}

pub(crate) struct Legacy {
    params: Params,
    estimator: CharsOver4Role4,
    inner: CutPoint,
}

impl Legacy {
    pub(crate) fn new(params: Params) -> Legacy {
        let inner = CutPoint::new(params.clone()).expect("valid params");
        Legacy { params, estimator: CharsOver4Role4, inner }
    }
    /// TTL pruning: placeholders for the tool results of turns older than the last `ttl_turns`.
    fn ttl_masks(&self, ctx: &Context, boundary: usize) -> BTreeMap<usize, String> {
        let mut out = BTreeMap::new();
        let ttl = self.params.ttl_turns;
        if ttl == 0 {
            return out;
        }
        let mut turn = vec![0usize; ctx.len()];
        let mut t = 0;
        for (i, slot) in turn.iter_mut().enumerate().skip(boundary) {
            if is_turn_start(ctx, i) {
                t += 1;
            }
            *slot = t;
        }
        let total = t;
        for (i, e) in ctx.entries().iter().enumerate().skip(boundary) {
            let old = turn[i] + ttl <= total;
            if !old || e.role() != Role::Tool || !matches!(e.origin(), Origin::Recorded { .. }) {
                continue;
            }
            let tokens = e.tokens(&self.estimator);
            let name = e.message().name.as_deref().unwrap_or("tool");
            let text = format!("[{name} result hidden: {tokens} tokens, from an earlier turn]");
            let mut masked = e.message().clone();
            masked.content.clone_from(&text);
            if self.estimator.message_units(&masked) < e.units(&self.estimator) {
                out.insert(i, text);
            }
        }
        out
    }

    fn entry_units(&self, ctx: &Context, i: usize, masks: &BTreeMap<usize, String>) -> u64 {
        match (ctx.get(i), masks.get(&i)) {
            (Some(e), Some(text)) => {
                let mut m: Message = e.message().clone();
                m.content.clone_from(text);
                self.estimator.message_units(&m)
            }
            (Some(e), None) => e.units(&self.estimator),
            (None, _) => 0,
        }
    }

    fn slot(i: usize, masks: &BTreeMap<usize, String>) -> Slot {
        match masks.get(&i) {
            Some(placeholder) => Slot::Mask { index: i, placeholder: placeholder.clone() },
            None => Slot::Keep { index: i },
        }
    }

    /// `_find_compaction_cut_point` over `start..ctx.len()`: the cut, and the start of the turn
    /// it splits (if it splits one).
    fn find_cut(&self, ctx: &Context, start: usize, keep: u64, units: &[u64]) -> (usize, Option<usize>) {
        let end = ctx.len();
        let candidates: Vec<usize> = (start..end).filter(|i| is_candidate(ctx, *i)).collect();
        let Some(&first) = candidates.first() else {
            return (start, None);
        };
        let mut cut = first;
        let mut accumulated = 0u64;
        for i in (start..end).rev() {
            if !is_message_block(ctx, i) {
                continue;
            }
            accumulated += self.estimator.tokens_from_units(units[i]);
            if accumulated >= keep {
                if let Some(&c) = candidates.iter().find(|c| **c >= i) {
                    cut = c;
                }
                break;
            }
        }
        while cut > start {
            let prev = cut - 1;
            if ctx.get(prev).is_some_and(|e| e.origin().is_summary()) || is_message_block(ctx, prev) {
                break;
            }
            cut -= 1;
        }
        // Guard: never leave a result after the cut whose call is before it.
        let pairs = tool_pairs(ctx);
        while let Some(&(c, _)) = pairs.iter().find(|(c, r)| *c < cut && cut <= *r && *c >= start) {
            cut = c;
        }
        if is_turn_start(ctx, cut) {
            return (cut, None);
        }
        let turn_start = (start..cut).rev().find(|i| is_turn_start(ctx, *i));
        (cut, turn_start)
    }

    /// The compaction digest of `range`.
    fn digest(
        &self,
        ctx: &Context,
        range: std::ops::Range<usize>,
        units: &[u64],
        masks: &BTreeMap<usize, String>,
    ) -> Value {
        let mut tool_outputs: BTreeMap<String, usize> = BTreeMap::new();
        let mut hidden: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut tokens = 0;
        for i in range.clone() {
            let Some(e) = ctx.get(i) else { continue };
            tokens += self.estimator.tokens_from_units(units[i]);
            if e.role() != Role::Tool {
                continue;
            }
            let name = e.message().name.clone().unwrap_or_else(|| "tool".to_string());
            *tool_outputs.entry(name.clone()).or_default() += 1;
            let replacement = match (e.origin(), masks.get(&i)) {
                (_, Some(text)) => Some(text.clone()),
                (Origin::Masked { .. }, None) => Some(e.message().content.clone()),
                _ => None,
            };
            if let Some(text) = replacement {
                hidden.entry(name).or_default().push(json!([recorded(ctx, i), text]));
            }
        }
        json!({"blocks": range.len(), "tokens": tokens, "tool_outputs": tool_outputs, "hidden": hidden})
    }

    /// The cache points of `ctx` after rendering: the last block before the current turn, the
    /// last block of round `N - cache_offset_rounds` (when there are at least that many rounds
    /// before the last, and at least `cache_min_rounds`), and the last block.
    ///
    /// Rounds are counted over the visible stream (from the live summary on): each assistant
    /// message with tool calls is a round with its results; the assistant messages without
    /// calls of one turn make its final completion round.
    pub(crate) fn cache_points(&self, ctx: &Context) -> CachePoints {
        let r = regions(ctx);
        let start = r.last_summary.unwrap_or(r.sys_end);
        let end = ctx.len();
        if start >= end {
            return CachePoints::default();
        }
        let tail = Some(end - 1);
        let previous_turn =
            (start..end).rev().find(|i| is_turn_start(ctx, *i)).filter(|ts| *ts > start).map(|ts| ts - 1);

        let turns = turn_ids(ctx, start);
        let mut last_of: HashMap<usize, usize> = HashMap::new();
        for (c, res) in tool_pairs(ctx) {
            if c >= start {
                let e = last_of.entry(c).or_insert(c);
                *e = (*e).max(res);
            }
        }
        let mut rounds: BTreeMap<String, usize> = BTreeMap::new();
        for (i, e) in ctx.entries().iter().enumerate().skip(start) {
            if e.role() != Role::Assistant || e.origin().is_summary() {
                continue;
            }
            let (key, last) = if e.message().has_tool_calls() {
                (format!("call-{i}"), last_of.get(&i).copied().unwrap_or(i))
            } else {
                (format!("final-{}", turns[i].as_deref().unwrap_or("")), i)
            };
            let slot = rounds.entry(key).or_insert(last);
            *slot = (*slot).max(last);
        }
        let mut lasts: Vec<usize> = rounds.into_values().collect();
        lasts.sort_unstable();
        let n = lasts.len();
        let offset = self.params.cache_offset_rounds;
        let pre_tail = (n >= self.params.cache_min_rounds && n > offset).then(|| lasts[n - 1 - offset]);
        CachePoints { previous_turn, pre_tail, tail }
    }

    fn summary_slot() -> Slot {
        Slot::Summary { request: 0, role: Role::System, prefix: String::new(), suffix: String::new() }
    }
    pub(crate) fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let forced = trigger == Trigger::Overflow;
        let threshold = self.inner.trigger_threshold(budget);
        let before = self.inner.estimate(ctx);
        if !forced && before <= threshold {
            return None;
        }
        let r = regions(ctx);
        let masks = self.ttl_masks(ctx, r.boundary);
        let units: Vec<u64> = (0..ctx.len()).map(|i| self.entry_units(ctx, i, &masks)).collect();
        let after_ttl = self.estimator.tokens_from_units(units.iter().sum());

        let mut notes = serde_json::Map::new();
        notes.insert("forced".into(), json!(forced));
        notes.insert("trigger_threshold".into(), json!(threshold));
        notes.insert("ttl_hidden".into(), json!(masks.len()));
        notes.insert("estimate_after_ttl".into(), json!(after_ttl));
        let ttl_layout: Vec<Slot> = (0..ctx.len()).map(|i| Self::slot(i, &masks)).collect();
        let ttl_only = |notes: serde_json::Map<String, Value>| {
            (!masks.is_empty()).then(|| {
                let mut plan = Plan::deterministic(trigger, "ttl", ttl_layout.clone());
                plan.notes = notes;
                plan
            })
        };
        if !forced && after_ttl <= threshold {
            return ttl_only(notes);
        }

        let keep = self.inner.keep_recent_tokens(ctx, budget);
        notes.insert("keep_recent_tokens".into(), json!(keep));
        let (cut, turn_start) = self.find_cut(ctx, r.boundary, keep, &units);
        if cut <= r.boundary {
            return ttl_only(notes);
        }
        let history_end = turn_start.unwrap_or(cut);
        let history: Vec<usize> = (r.boundary..history_end).collect();
        let prefix: Vec<usize> = turn_start.map(|ts| (ts..cut).collect()).unwrap_or_default();
        let previous = r.last_summary.and_then(|s| ctx.get(s)).map(|e| e.message().content.trim().to_string());
        let previous = previous.filter(|p| !p.is_empty());
        let round = ctx.last_round() + 1;

        let mut requests = Vec::new();
        let main = if !history.is_empty() {
            let mut request =
                SummaryRequest::new(history.clone(), progressive_prompt(), self.params.summary_max_tokens, round);
            request.previous.clone_from(&previous);
            requests.push(request);
            Main::Request
        } else if previous.is_some() {
            Main::Previous
        } else {
            Main::Nothing
        };
        if !prefix.is_empty() {
            requests.push(SummaryRequest::new(
                prefix.clone(),
                split_turn_prefix_prompt(),
                self.params.split_turn_max_tokens,
                round,
            ));
        }

        let turns = turn_ids(ctx, r.sys_end);
        // First occurrences in order; the set keeps this linear in the covered range.
        let mut seen: HashSet<&str> = HashSet::new();
        let mut covered_turns: Vec<String> = Vec::new();
        for id in turns[r.boundary..cut].iter().flatten() {
            if seen.insert(id.as_str()) {
                covered_turns.push(id.clone());
            }
        }
        let summary_turn = turns[cut].clone().unwrap_or_default();
        notes.insert("cut_index".into(), json!(cut));
        notes.insert("covered_turn_ids".into(), json!(covered_turns));
        if let Some(ts) = turn_start {
            notes.insert("split_turn_id".into(), json!(turns[ts]));
        }
        notes.insert("compaction_digest".into(), self.digest(ctx, r.boundary..cut, &units, &masks));
        notes.insert("path".into(), json!(format!("su:{summary_turn}.conv.range.summary")));
        notes.insert("main_summary".into(), json!(main.as_str()));
        if let Some(s) = r.last_summary {
            notes.insert("previous_summary_index".into(), json!(s));
        }

        let mut layout: Vec<Slot> = (0..r.sys_end).map(|index| Slot::Keep { index }).collect();
        layout.push(Self::summary_slot());
        layout.extend((cut..ctx.len()).map(|i| Self::slot(i, &masks)));
        let mut steps = Vec::new();
        if !masks.is_empty() {
            steps.push("ttl");
        }
        steps.push("cut");
        if turn_start.is_some() {
            steps.push("split_turn");
        }
        Some(Plan {
            trigger,
            layout,
            requests,
            fallback: Fallback::Layout { label: "summary failed, compaction abandoned".into(), layout: ttl_layout },
            step: steps.join("+"),
            notes,
        })
    }
    /// Join the progressive summary (or the reused previous one) and the split-turn prefix into
    /// the one summary block, covering the previous summary, the history and the prefix.
    pub(crate) fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        let failed = plan
            .requests
            .iter()
            .enumerate()
            .any(|(i, _)| !matches!(summaries.get(i), Some(Ok(t)) if !t.trim().is_empty()));
        let has_summary_slot = plan.layout.iter().any(|s| matches!(s, Slot::Summary { .. }));
        if failed || !has_summary_slot {
            let reasons: Vec<SummaryOutcome> = plan
                .requests
                .iter()
                .enumerate()
                .map(|(i, _)| match summaries.get(i) {
                    Some(Ok(t)) if t.trim().is_empty() => {
                        Err(compaction::SummaryFailure { reason: "empty summary".into() })
                    }
                    Some(s) => s.clone(),
                    None => Err(compaction::SummaryFailure { reason: "no summary given".into() }),
                })
                .collect();
            return apply_layout(&self.inner, ctx, budget, plan, &reasons);
        }
        let text_of = |name: &str| {
            plan.requests.iter().position(|r| r.prompt.name == name).and_then(|i| match summaries.get(i) {
                Some(Ok(t)) => Some(t.trim().to_string()),
                _ => None,
            })
        };
        let r = regions(ctx);
        let main = match plan.notes.get("main_summary").and_then(Value::as_str) {
            Some("previous") => r.last_summary.and_then(|s| ctx.get(s)).map(|e| e.message().content.trim().to_string()),
            Some("none") => Some(NO_PRIOR_HISTORY.to_string()),
            _ => text_of(PROGRESSIVE),
        }
        .unwrap_or_else(|| NO_PRIOR_HISTORY.to_string());
        let text = match text_of(SPLIT_TURN_PREFIX) {
            Some(prefix) => format!("{main}{SPLIT_TURN_HEADING}{prefix}"),
            None => main,
        };
        let mut span: Vec<usize> = r.last_summary.into_iter().collect();
        for req in &plan.requests {
            span.extend_from_slice(&req.span);
        }
        let combined = SummaryRequest::new(
            span,
            progressive_prompt(),
            self.params.summary_max_tokens,
            plan.requests.first().map_or(ctx.last_round() + 1, |q| q.round),
        );
        let joined = Plan { requests: vec![combined], ..plan.clone() };
        apply_layout(&self.inner, ctx, budget, &joined, &[Ok(text)])
    }
}

pub(crate) fn tool_pairs_of(ctx: &Context) -> Vec<(usize, usize)> {
    tool_pairs(ctx)
}
