//! The implementation before it was rewritten for speed (every step over `Vec<Slot>` lists,
//! the tool pairs found with a map of vectors, the pair-safe split moved one pair at a time),
//! kept as the oracle `fast_paths_make_the_plans_of_the_straightforward_ones` holds the rewrite
//! to.
//!
//! Not a module of the integration tests (`main.rs` does not name it): `src/priority_chain.rs` compiles
//! it into its own unit tests with `#[path]`, since it reads the module's private steps. The
//! module's source files hold production code only.
#![allow(clippy::all)]
use super::*;

struct Chain {
    /// The working list after P1 and P2 (and the digest).
    slots: Vec<Slot>,
    stripped: usize,
    compacted_stages: Vec<String>,
    /// `P1` or `P2` when the chain resolved before P3.
    resolved: Option<&'static str>,
    /// The P3 request and the layout that holds its summary.
    p3: Option<(SummaryRequest, Vec<Slot>)>,
}

/// `(call entry, result entry)` pairs, paired as the invariant checker pairs them (a result
/// answers the most recent unanswered call of its id before it).
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

/// The smallest split `>= k` of `seq` (entries of the context, by index; `None` for new
/// messages) that leaves no tool call before the split with a result after it.
fn pair_safe_split(seq: &[Option<usize>], k: usize, pairs: &[(usize, usize)]) -> usize {
    let pos: HashMap<usize, usize> = seq.iter().enumerate().filter_map(|(p, i)| i.map(|i| (i, p))).collect();
    let spans: Vec<(usize, usize)> =
        pairs.iter().filter_map(|(c, r)| Some((*pos.get(c)?, *pos.get(r)?))).filter(|(c, r)| c < r).collect();
    let mut k = k;
    loop {
        let mut moved = false;
        for &(c, r) in &spans {
            if c < k && k <= r {
                k = r + 1;
                moved = true;
            }
        }
        if !moved {
            return k.min(seq.len());
        }
    }
}

fn slot_role(ctx: &Context, slot: &Slot) -> Role {
    match slot {
        Slot::Keep { index } | Slot::Mask { index, .. } => ctx.get(*index).map_or(Role::User, |e| e.role()),
        Slot::Summary { role, .. } => *role,
        Slot::Insert { message, .. } => message.role,
    }
}

fn slot_entry(slot: &Slot) -> Option<usize> {
    match slot {
        Slot::Keep { index } | Slot::Mask { index, .. } => Some(*index),
        _ => None,
    }
}

/// How many trailing slots reproduce the context's trailing entries verbatim.
fn verbatim_tail(ctx: &Context, layout: &[Slot]) -> usize {
    layout
        .iter()
        .rev()
        .enumerate()
        .take_while(|(j, s)| matches!(s, Slot::Keep { index } if ctx.len() > *j && *index == ctx.len() - 1 - j))
        .count()
}

fn is_identity(ctx: &Context, layout: &[Slot]) -> bool {
    layout.len() == ctx.len() && verbatim_tail(ctx, layout) == ctx.len()
}

pub(crate) struct Legacy {
    params: Params,
    estimator: CharsOver4,
    inner: PriorityChain,
}

impl Legacy {
    pub(crate) fn new(params: Params) -> Legacy {
        let inner = PriorityChain::new(params.clone()).expect("valid params");
        Legacy { params, estimator: CharsOver4, inner }
    }
    fn slots_tokens(&self, ctx: &Context, slots: &[Slot]) -> u64 {
        self.estimator.tokens_from_units(self.slots_units(ctx, slots))
    }

    /// The estimator's units (characters) of `slots`; summaries count 0.
    fn slots_units(&self, ctx: &Context, slots: &[Slot]) -> u64 {
        slots
            .iter()
            .map(|s| match s {
                Slot::Keep { index } => ctx.get(*index).map_or(0, |e| e.units(&self.estimator)),
                Slot::Insert { message, .. } => self.estimator.message_units(message),
                Slot::Mask { placeholder, .. } => js_len(placeholder),
                Slot::Summary { .. } => 0,
            })
            .sum()
    }

    /// Whether the paper-mode trim (Task 9) shortens `ctx`: paper mode, the trim on, and more
    /// conversation messages than it keeps.
    pub fn trims(&self, ctx: &Context) -> bool {
        let keep = self.params.paper_trim_last;
        keep > 0
            && self.inner.paper_mode(ctx)
            && ctx.entries().iter().filter(|e| e.role() != Role::System).nth(keep).is_some()
    }

    /// The list the chain starts from: the whole context, or in paper mode the route's legacy
    /// trim (`modelMessages.slice(-MAX_CHAT_HISTORY_PAIRS * 2)`): every system message, then the
    /// newest `paper_trim_last` conversation messages (moved forward past a cut tool pair).
    fn base(&self, ctx: &Context) -> Vec<Slot> {
        let all: Vec<Slot> = (0..ctx.len()).map(|index| Slot::Keep { index }).collect();
        if self.trims(ctx) {
            self.keep_last(ctx, &all, self.params.paper_trim_last)
        } else {
            all
        }
    }

    /// Completed stages, oldest first, with their boundaries (first and last entry).
    fn completed_stages(ctx: &Context) -> Vec<(String, usize, usize)> {
        let mut stages: Vec<(String, usize, usize)> = Vec::new();
        for (i, m) in ctx.messages().enumerate() {
            if let Some(s) = &m.stage {
                match stages.iter_mut().find(|(l, _, _)| l == s) {
                    Some(st) => st.2 = i,
                    None => stages.push((s.clone(), i, i)),
                }
            }
        }
        let current = Self::current_stage(ctx).map(str::to_string);
        stages.retain(|(l, _, _)| Some(l) != current.as_ref());
        stages
    }

    /// The stage being worked on: the label of the last labelled message.
    fn current_stage(ctx: &Context) -> Option<&str> {
        ctx.entries().iter().rev().find_map(|e| e.message().stage.as_deref())
    }

    /// Digest entry lines for `stages`, from the last `stage_decision` of each.
    fn digest_entries(ctx: &Context, stages: &[String]) -> Vec<String> {
        let mut last: HashMap<&str, (usize, &str)> = HashMap::new();
        for (i, m) in ctx.messages().enumerate() {
            if let (Some(stage), Some(decision)) = (m.stage.as_deref(), m.meta_str("stage_decision")) {
                if stages.iter().any(|s| s == stage) {
                    last.insert(stage, (i, decision));
                }
            }
        }
        let mut entries: Vec<(usize, String)> =
            last.into_iter().map(|(stage, (i, decision))| (i, format!("- {stage}: {decision}"))).collect();
        entries.sort();
        entries.into_iter().map(|(_, e)| e).collect()
    }

    /// Put the stage digest for `compacted` after the system messages, merging an earlier one.
    fn inject_digest(&self, ctx: &Context, slots: &mut Vec<Slot>, compacted: &[String]) {
        if compacted.is_empty() {
            return;
        }
        let mut count = compacted.len();
        let mut lines = Vec::new();
        let previous = slots.iter().position(|s| {
            matches!(s, Slot::Keep { index } if ctx.get(*index)
                    .is_some_and(|e| matches!(e.origin(), Origin::Inserted { what: Inserted::StageDigest })))
        });
        let mut prev_text = None;
        if let Some(p) = previous {
            let parsed =
                slot_entry(&slots[p]).and_then(|i| ctx.get(i)).and_then(|e| parse_digest(&e.message().content));
            if let Some((n, entries)) = parsed {
                slots.remove(p);
                count += n;
                prev_text = Some(entries);
            }
        }
        lines.extend(prev_text);
        lines.extend(Self::digest_entries(ctx, compacted));
        if lines.is_empty() {
            return;
        }
        let message = Message::system(stage_digest_text(count, &lines.join("\n")));
        let at = slots.iter().filter(|s| slot_role(ctx, s) == Role::System).count().min(slots.len());
        slots.insert(at, Slot::insert(message, Inserted::StageDigest));
    }

    /// P1, P2 and the P3 split, as far as they go without the summary.
    fn run_chain(&self, ctx: &Context, base: Vec<Slot>, thresholds: &ChainBudget, paper: bool) -> Chain {
        let cthr = thresholds.compaction_threshold;
        let pairs = if self.params.keep_tool_pairs { tool_pairs(ctx) } else { Vec::new() };
        let start = base.len();
        let mut chain = Chain { slots: base, stripped: 0, compacted_stages: Vec::new(), resolved: None, p3: None };

        // P1: strip chitchat.
        chain
            .slots
            .retain(|s| !slot_entry(s).and_then(|i| ctx.get(i)).is_some_and(|e| self.inner.is_chitchat(e.message())));
        chain.stripped = start - chain.slots.len();
        if self.slots_tokens(ctx, &chain.slots) < cthr {
            chain.resolved = Some("P1");
            return chain;
        }

        // P2: drop the oldest completed stages.
        if paper {
            for (stage, first, last) in Self::completed_stages(ctx) {
                let mut drop: Vec<bool> = (0..ctx.len()).map(|i| (first..=last).contains(&i)).collect();
                loop {
                    let mut changed = false;
                    for &(c, r) in &pairs {
                        if drop[c] != drop[r] {
                            drop[c] = true;
                            drop[r] = true;
                            changed = true;
                        }
                    }
                    if !changed {
                        break;
                    }
                }
                chain.slots.retain(|s| match slot_entry(s) {
                    Some(i) => ctx.get(i).is_some_and(|e| e.role() == Role::System) || !drop[i],
                    None => true,
                });
                chain.compacted_stages.push(stage);
                if self.slots_tokens(ctx, &chain.slots) < cthr {
                    let stages = chain.compacted_stages.clone();
                    self.inject_digest(ctx, &mut chain.slots, &stages);
                    chain.resolved = Some("P2");
                    return chain;
                }
            }
            let stages = chain.compacted_stages.clone();
            self.inject_digest(ctx, &mut chain.slots, &stages);
        }

        // P3: summarize the oldest conversation messages.
        let (system, conversation): (Vec<Slot>, Vec<Slot>) =
            chain.slots.iter().cloned().partition(|s| slot_role(ctx, s) == Role::System);
        let n = conversation.len();
        let count = if paper {
            ((n as f64 * self.params.paper_summarize_ratio).floor() as usize).min(self.params.paper_summarize_max)
        } else {
            self.params.general_summarize_max.min((n as f64 * self.params.general_summarize_ratio).floor() as usize)
        };
        if count > self.params.summarize_more_than {
            let seq: Vec<Option<usize>> = conversation.iter().map(slot_entry).collect();
            let k = if self.params.keep_tool_pairs { pair_safe_split(&seq, count, &pairs) } else { count };
            let span: Vec<usize> = seq[..k].iter().flatten().copied().collect();
            let prompt = if paper {
                paper_mid_stage_prompt(Self::current_stage(ctx).unwrap_or("unknown"))
            } else {
                general_chat_prompt()
            };
            let mut request = SummaryRequest::new(span, prompt, self.params.summary_max_tokens, ctx.last_round() + 1);
            request.target_chars = Some(self.params.summary_max_chars);
            let mut layout = system;
            layout.push(Slot::Summary {
                request: 0,
                role: Role::System,
                prefix: SUMMARY_PREFIX.to_string(),
                suffix: SUMMARY_SUFFIX.to_string(),
            });
            layout.extend(conversation[k..].iter().cloned());
            chain.p3 = Some((request, layout));
        }
        chain
    }

    /// P5: every system message, then the last `prune_keep_last` conversation messages.
    pub(crate) fn prune(&self, ctx: &Context, slots: &[Slot]) -> Vec<Slot> {
        self.keep_last(ctx, slots, self.params.prune_keep_last)
    }

    /// Every system slot, then the last `keep` conversation slots (moved forward past a cut
    /// tool pair when `keep_tool_pairs`).
    fn keep_last(&self, ctx: &Context, slots: &[Slot], keep: usize) -> Vec<Slot> {
        let (mut out, conversation): (Vec<Slot>, Vec<Slot>) =
            slots.iter().cloned().partition(|s| slot_role(ctx, s) == Role::System);
        let mut k = conversation.len().saturating_sub(keep);
        if self.params.keep_tool_pairs && k > 0 {
            let seq: Vec<Option<usize>> = conversation.iter().map(slot_entry).collect();
            k = pair_safe_split(&seq, k, &tool_pairs(ctx));
        }
        out.extend(conversation[k..].iter().cloned());
        out
    }

    pub(crate) fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let paper = self.inner.paper_mode(ctx);
        let base = self.base(ctx);
        let trimmed = ctx.len() - base.len();
        let b = self.inner.check_context_budget(self.slots_units(ctx, &base), budget.context_window);
        if !b.should_compact && !b.should_prune && trimmed == 0 {
            return None;
        }
        let mut notes = serde_json::Map::new();
        notes.insert("mode".into(), json!(if paper { "paper" } else { "general" }));
        notes.insert("trimmed".into(), json!(trimmed));
        notes.insert("estimate_before".into(), json!(b.total_tokens));
        notes.insert("compaction_threshold".into(), json!(b.compaction_threshold));
        notes.insert("prune_threshold".into(), json!(b.prune_threshold));
        notes.insert("chain_ran".into(), json!(b.should_compact));
        if !b.should_compact {
            // Under the trigger: the trim, and between the prune threshold and the trigger the
            // prune, alone.
            let fin = if b.should_prune { self.prune(ctx, &base) } else { base.clone() };
            if is_identity(ctx, &fin) {
                return None;
            }
            let step = if trimmed > 0 { "trim" } else { "P5" };
            let mut plan = Plan::deterministic(trigger, step, base);
            plan.notes = notes;
            return Some(plan);
        }
        let chain = self.run_chain(ctx, base, &b, paper);
        notes.insert("stripped_chitchat".into(), json!(chain.stripped));
        notes.insert("compacted_stages".into(), json!(chain.compacted_stages));
        if let Some(r) = chain.resolved {
            notes.insert("resolved_at".into(), json!(r));
        }
        let steps =
            PriorityChain::steps(trimmed > 0, chain.stripped, chain.compacted_stages.len(), false, false, false);
        match chain.p3 {
            Some((request, layout)) => {
                notes.insert("summarized_messages".into(), json!(request.span.len()));
                let step = if steps == "none" { "P3".to_string() } else { format!("{steps}+P3") };
                Some(Plan {
                    trigger,
                    layout,
                    requests: vec![request],
                    fallback: Fallback::Layout { label: "P3 summary failed".into(), layout: chain.slots },
                    step,
                    notes,
                })
            }
            None => {
                let prune_gate = match self.params.prune_check {
                    PruneCheck::BeforeChain => b.should_prune,
                    PruneCheck::AfterChain => self.slots_tokens(ctx, &chain.slots) > b.prune_threshold,
                };
                let fin = if prune_gate { self.prune(ctx, &chain.slots) } else { chain.slots.clone() };
                if is_identity(ctx, &fin) {
                    return None;
                }
                let mut plan = Plan::deterministic(trigger, steps, chain.slots);
                plan.notes = notes;
                Some(plan)
            }
        }
    }
    /// Finish the chain on the built context: P3's threshold check, the P4 signal, the P5 prune.
    pub(crate) fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        let failure = match (plan.requests.is_empty(), summaries.first()) {
            (true, _) => None,
            (false, Some(Ok(t))) if !t.is_empty() => None,
            (false, Some(Ok(_))) => Some("empty summary".to_string()),
            (false, Some(Err(e))) => Some(e.reason.clone()),
            (false, None) => Some("no summary given".to_string()),
        };
        let (layout, fallback) = match (&failure, &plan.fallback) {
            (None, _) => (&plan.layout, None),
            (Some(reason), Fallback::Layout { label, layout }) => (layout, Some(format!("{label}: {reason}"))),
            (Some(_), Fallback::Unchanged) => return apply_layout(&self.inner, ctx, budget, plan, summaries),
        };
        let summarized = !plan.requests.is_empty() && failure.is_none();
        let b = self.inner.check_context_budget(self.slots_units(ctx, &self.base(ctx)), budget.context_window);
        let paper = plan.notes.get("mode").and_then(Value::as_str) == Some("paper");
        let chain_ran = plan.notes.get("chain_ran").and_then(Value::as_bool).unwrap_or(b.should_compact);
        let chained = build_layout(ctx, layout, &plan.requests, summaries, &[self.inner.estimator()]);
        let after_chain = self.inner.estimate(&chained.context);

        let mut notes = plan.notes.clone();
        let resolved = match plan.notes.get("resolved_at").and_then(Value::as_str) {
            Some(r) => r.to_string(),
            None if !chain_ran => "none".to_string(),
            None if summarized && after_chain < b.compaction_threshold => "P3".to_string(),
            None if paper => "P4".to_string(),
            None => "none".to_string(),
        };
        let p4 = resolved == "P4";
        notes.insert("resolved_at".into(), json!(resolved));
        notes.insert("llm_summarized".into(), json!(summarized));
        notes.insert("p4_signal".into(), json!(p4));

        let prune_gate = match self.params.prune_check {
            PruneCheck::BeforeChain => b.should_prune,
            PruneCheck::AfterChain => after_chain > b.prune_threshold,
        };
        let (mut built, pruned): (Built, usize) = if prune_gate {
            let fin = self.prune(ctx, layout);
            let dropped = layout.len() - fin.len();
            (build_layout(ctx, &fin, &plan.requests, summaries, &[self.inner.estimator()]), dropped)
        } else {
            (chained, 0)
        };
        notes.insert("pruned".into(), json!(pruned));

        let stripped = notes.get("stripped_chitchat").and_then(Value::as_u64).unwrap_or(0) as usize;
        let trimmed = notes.get("trimmed").and_then(Value::as_u64).unwrap_or(0);
        let stages = notes.get("compacted_stages").and_then(Value::as_array).map_or(0, |a| a.len());
        let step = PriorityChain::steps(trimmed > 0, stripped, stages, summarized, p4, pruned > 0);
        let before = (self.inner.estimate(ctx), ctx.len());
        let change = built.change(fallback);
        let event = CompactionEvent::new(&self.inner, budget, (plan.trigger, step, notes), before, change);
        Compacted { context: built.context, event }
    }
    pub(crate) fn promises(&self, ctx: &Context, budget: &Budget) -> Promises {
        let mut deviations = vec![ViolationKind::RoleAlternation];
        if ctx.summaries().next().is_some() {
            deviations.push(ViolationKind::MultipleSummaries);
        }
        let first_body = ctx.entries().iter().position(|e| e.role() != Role::System).unwrap_or(ctx.len());
        if ctx.entries()[first_body..].iter().any(|e| e.role() == Role::System) {
            deviations.push(ViolationKind::OutOfOrder);
        }
        if !self.params.keep_tool_pairs {
            deviations.extend([ViolationKind::OrphanToolResult, ViolationKind::UnansweredToolCall]);
        }
        if self.trims(ctx) {
            // The paper-mode trim runs on every request, under the threshold too.
            deviations.push(ViolationKind::CompactedBelowThreshold);
        }
        // The tail the plan keeps verbatim, assuming the prune runs (it only shortens it).
        let recent_window = match self.plan(ctx, budget, Trigger::Proactive) {
            None => ctx.len(),
            Some(plan) => {
                let mut w = verbatim_tail(ctx, &self.prune(ctx, &plan.layout));
                if let Fallback::Layout { layout, .. } = &plan.fallback {
                    w = w.min(verbatim_tail(ctx, &self.prune(ctx, layout)));
                }
                w
            }
        };
        Promises { keeps_system_prompt: true, recent_window, documented_deviations: deviations }
    }
}

pub(crate) fn tool_pairs_of(ctx: &Context) -> Vec<(usize, usize)> {
    tool_pairs(ctx)
}

pub(crate) fn pair_safe_split_of(seq: &[Option<usize>], k: usize, pairs: &[(usize, usize)]) -> usize {
    pair_safe_split(seq, k, pairs)
}
