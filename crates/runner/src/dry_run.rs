//! A dry run: what an experiment's model roles would ask for, and cost, before anything is sent.
//!
//! Every pair is replayed as a run would replay it, with the model roles swapped for stand-ins
//! that build each request exactly as the role would ([`LlmSummarizer::chat_request`],
//! [`LlmJudge::answer_request`], [`LlmJudge::grade_request`], [`LlmJudge::directive_request`]),
//! look it up in the response cache (a read, never a write), count it, and answer without the
//! network:
//! - a request the cache holds is answered with the cached response, as the run would be, so a
//!   warm cache steers the replay the way the real run goes, and costs nothing;
//! - any other is counted as sent: its input tokens by the experiment's tokenizer (each
//!   message's content plus the chat template's per-message overhead), its output tokens as
//!   the request's `max_tokens` (an upper bound: the model may stop sooner), and it is answered
//!   by the offline stand-in (the offline summary; for the judge, the probe's expected answer
//!   as the answer its grades read, and the offline judge's score).
//!
//! What cannot be foreseen: a model's summaries differ from the stand-in's, so the requests
//! after a compaction that missed the cache (a later summary reads the earlier one, a probe
//! reads the compacted context) are counted with the stand-in's text in them; and a
//! context-length rejection, which makes the replay plan again and ask once more, never
//! happens here. The number of requests is otherwise the run's: the same compactions, the same
//! probes, the same repeats, the same directive lists.
//!
//! The replay writes into a temporary folder that is removed when it ends
//! ([`dry_run`]): a dry run leaves no run folder that could be taken for results.
//!
//! Roles are a list ([`DryLedger::roles`]): a role that calls a model adds its tally and a
//! stand-in that records into it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use compaction::{Context, Conversation, Probe, SummaryFailure, SummaryRequest};
use llm::cache::CacheMode;
use llm::{ChatMessage, ChatRequest, ChatResponse, Client};
use runlog::llm_settings::ModelRole;
use runlog::record::ProbeScore;
use runlog::settings::Price;

use crate::judge::llm::LlmJudge;
use crate::judge::{Judge, ListError, Listed, OfflineJudge};
use crate::llm_setup::LlmRoles;
use crate::replay::next_action::llm::LlmNextAction;
use crate::replay::next_action::{agreement, full_history, Asked, NextActionModel};
use crate::run::{self, Engine, Plan, Provenance, RunOptions, Shard};
use crate::summarize::llm::LlmSummarizer;
use crate::summarize::{OfflineSummarizer, Summarizer, Summary, SummaryError};
use runlog::log::RunError;
use runlog::record::ModelAction;

/// The latency a request is assumed to take when no other is given, in seconds: a hosted
/// model's answer of a few hundred tokens to a prompt of some thousands.
pub const DEFAULT_REQUEST_LATENCY_S: f64 = 4.0;

/// What one role would ask for.
#[derive(Debug)]
pub struct RoleTally {
    /// `summarizer`, `judge`, ...
    pub role: &'static str,
    pub model: String,
    /// What its tokens cost, or why that is not known.
    pub price: Result<Price, String>,
    /// The endpoint it calls (protocol and URL) and that endpoint's limits.
    pub endpoint: String,
    pub max_concurrency: usize,
    pub requests_per_minute: u32,
    requests: AtomicU64,
    cache_hits: AtomicU64,
    input_tokens: AtomicU64,
    output_tokens: AtomicU64,
}

/// A role's tally at the end of a dry run.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleEstimate {
    pub role: &'static str,
    pub model: String,
    /// Requests the run would make.
    pub requests: u64,
    /// Of those, requests the response cache answers (no cost).
    pub cache_hits: u64,
    /// Input tokens of the requests to send (the cache's hits aside).
    pub input_tokens: u64,
    /// Output tokens of the requests to send, at their `max_tokens` (an upper bound).
    pub output_tokens: u64,
    /// Dollars for the requests to send, or why they cannot be priced.
    pub cost_usd: Result<f64, String>,
    pub endpoint: String,
    pub max_concurrency: usize,
    pub requests_per_minute: u32,
}

impl RoleEstimate {
    /// Requests that would go over the network.
    pub fn to_send(&self) -> u64 {
        self.requests - self.cache_hits
    }
}

/// Every role's tally.
#[derive(Default)]
pub struct DryLedger {
    pub roles: Vec<RoleTally>,
    count: Option<llm::budget::TokenCount>,
}

impl std::fmt::Debug for DryLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DryLedger").field("roles", &self.roles).finish_non_exhaustive()
    }
}

impl DryLedger {
    /// A tally for each role of `roles`, counting tokens with `encoding`.
    pub fn new(roles: Vec<ModelRole>, encoding: compaction::Encoding) -> DryLedger {
        let roles = roles
            .into_iter()
            .map(|r| RoleTally {
                role: r.role,
                model: r.config.model.clone(),
                price: r.price,
                endpoint: format!("{} {}", r.config.protocol.as_str(), r.config.base_url()),
                max_concurrency: r.config.max_concurrency,
                requests_per_minute: r.config.requests_per_minute,
                requests: AtomicU64::new(0),
                cache_hits: AtomicU64::new(0),
                input_tokens: AtomicU64::new(0),
                output_tokens: AtomicU64::new(0),
            })
            .collect();
        DryLedger { roles, count: Some(crate::llm_setup::chat_tokens(encoding)) }
    }

    /// Count one request of `role` (max output `max_tokens`), a cache hit when `hit`.
    fn record(&self, role: &str, messages: &[ChatMessage], max_tokens: u32, hit: bool) {
        let Some(t) = self.roles.iter().find(|t| t.role == role) else { return };
        t.requests.fetch_add(1, Ordering::Relaxed);
        if hit {
            t.cache_hits.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let input = self.count.as_ref().map_or(0, |c| c(messages));
        t.input_tokens.fetch_add(input, Ordering::Relaxed);
        t.output_tokens.fetch_add(u64::from(max_tokens), Ordering::Relaxed);
    }

    /// Look `request` up in `client`'s cache and count it for `role`; the cached response
    /// when there is one.
    fn ask(&self, role: &str, client: &Client, request: &ChatRequest) -> Option<ChatResponse> {
        // A cache that cannot be read is a miss here, as the run would send the request.
        let hit = client.cache().and_then(|c| c.get(&client.cache_key(request)).ok().flatten());
        let max_tokens = request.max_tokens.unwrap_or(client.config().max_tokens);
        self.record(role, &request.messages, max_tokens, hit.is_some());
        hit
    }

    /// Every role's estimate.
    pub fn estimates(&self) -> Vec<RoleEstimate> {
        self.roles
            .iter()
            .map(|t| {
                let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
                let (input, output) = (get(&t.input_tokens), get(&t.output_tokens));
                RoleEstimate {
                    role: t.role,
                    model: t.model.clone(),
                    requests: get(&t.requests),
                    cache_hits: get(&t.cache_hits),
                    input_tokens: input,
                    output_tokens: output,
                    cost_usd: t.price.as_ref().map(|p| p.cost(input, 0, output)).map_err(Clone::clone),
                    endpoint: t.endpoint.clone(),
                    max_concurrency: t.max_concurrency,
                    requests_per_minute: t.requests_per_minute,
                }
            })
            .collect()
    }
}

/// The LLM summarizer's stand-in (see the module docs).
pub struct DrySummarizer {
    llm: Arc<LlmSummarizer>,
    offline: OfflineSummarizer,
    ledger: Arc<DryLedger>,
}

impl Summarizer for DrySummarizer {
    /// The model's name: the replay treats the summaries as a model's (their directives are
    /// listed by an LLM judge, as in the run).
    fn name(&self) -> String {
        self.llm.name()
    }
    fn summarize(&self, ctx: &Context, request: &SummaryRequest) -> Result<Summary, SummaryFailure> {
        self.summarize_with_kind(ctx, request).map_err(|e| e.failure)
    }
    fn summarize_with_kind(&self, ctx: &Context, request: &SummaryRequest) -> Result<Summary, SummaryError> {
        self.summarize_with_store(ctx, request, None)
    }
    fn summarize_with_store(
        &self,
        ctx: &Context,
        request: &SummaryRequest,
        store: Option<&crate::summarize::offline::Store>,
    ) -> Result<Summary, SummaryError> {
        let Ok((chat, _)) = self.llm.chat_request(ctx, request) else {
            // The run would fail this summary before sending it.
            return Err(SummaryError::from(SummaryFailure { reason: "the strategy's prompt does not parse".into() }));
        };
        match self.ledger.ask("summarizer", self.llm.client(), &chat) {
            Some(r) => Ok(Summary {
                text: r.text,
                input_tokens: r.usage.prompt_tokens,
                output_tokens: r.usage.completion_tokens,
                cached_tokens: r.usage.cached_tokens,
            }),
            None => self.offline.summarize_with_store(ctx, request, store),
        }
    }
}

/// The LLM judge's stand-in (see the module docs).
pub struct DryJudge {
    llm: Arc<LlmJudge>,
    ledger: Arc<DryLedger>,
}

impl Judge for DryJudge {
    fn name(&self) -> String {
        self.llm.name()
    }
    fn score(&self, conversation: &Conversation, ctx: &Context, probe: &Probe) -> ProbeScore {
        let answer = self.ledger.ask("judge", self.llm.answerer(), &self.llm.answer_request(ctx, probe));
        let answer = answer.map_or_else(|| probe.answer.clone(), |r| r.text);
        for sample in 0..self.llm.repeats() {
            self.ledger.ask("judge", self.llm.grader(), &self.llm.grade_request(probe, &answer, sample));
        }
        OfflineJudge.score(conversation, ctx, probe)
    }
    fn list_directives(&self, summary: &str) -> Option<Result<Vec<Listed>, ListError>> {
        self.ledger.ask("judge", self.llm.grader(), &self.llm.directive_request(summary));
        Some(Ok(Vec::new()))
    }
}

/// The next-action model's stand-in: counts the request with the compacted context at every
/// point, and the full-history request once per distinct one (the run shares it between
/// configurations by its cache key); answers nothing (no agreement is measured offline).
/// Where two configurations compact at the same message depends on their summaries, which
/// the stand-in writes here: the full-history count is an estimate, at most one per point.
pub struct DryNextAction {
    llm: Arc<LlmNextAction>,
    ledger: Arc<DryLedger>,
    /// The full-history requests already counted, by cache key.
    full: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl NextActionModel for DryNextAction {
    fn name(&self) -> String {
        self.llm.name()
    }
    fn ask(&self, conversation: &Conversation, at: usize, ctx: &Context) -> Asked {
        self.ledger.ask("next_action", self.llm.client(), &self.llm.request(ctx));
        let full = self.llm.request(&full_history(conversation, at));
        let key = self.llm.client().cache_key(&full).hex().to_string();
        let first = self.full.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key);
        if first {
            self.ledger.ask("next_action", self.llm.client(), &full);
        }
        let nothing = ModelAction::Failed { error: "a dry run sends nothing".into() };
        let recorded = conversation.messages.get(at).cloned().unwrap_or_else(|| compaction::Message::assistant(""));
        Asked {
            agreement: agreement(&recorded, nothing.clone(), nothing),
            cache_misses: 0,
            endpoint_error: None,
            endpoint_failures: 0,
        }
    }
}

/// What a dry run found.
#[derive(Debug, Clone, PartialEq)]
pub struct DryEstimate {
    /// Pairs replayed (those of the shard, when one is given).
    pub pairs: usize,
    /// The offline replay's wall time.
    pub offline_wall: Duration,
    pub roles: Vec<RoleEstimate>,
    /// The cache mode in force: with `only` the run sends nothing, and every request the
    /// cache does not hold fails its pair.
    pub cache_mode: Option<CacheMode>,
}

impl DryEstimate {
    /// Dollars for every request to send; `Err` names each role that cannot be priced.
    pub fn total_cost(&self) -> Result<f64, String> {
        let mut total = 0.0;
        let mut unknown = Vec::new();
        for r in &self.roles {
            match &r.cost_usd {
                Ok(c) => total += c,
                Err(why) if r.to_send() > 0 => unknown.push(why.clone()),
                Err(_) => {}
            }
        }
        if unknown.is_empty() {
            Ok(total)
        } else {
            Err(unknown.join("; "))
        }
    }

    /// The LLM wall time expected at each endpoint's `max_concurrency` and
    /// `requests_per_minute`, each request to send taking `latency`: per endpoint (roles on
    /// one endpoint share its limits), its requests over its concurrency times the latency,
    /// or its requests over its rate, whichever is longer; the endpoints run side by side.
    pub fn llm_wall(&self, latency: Duration) -> Duration {
        let mut endpoints: Vec<(&str, u64, usize, u32)> = Vec::new();
        for r in &self.roles {
            match endpoints.iter_mut().find(|e| e.0 == r.endpoint) {
                Some(e) => e.1 += r.to_send(),
                None => endpoints.push((&r.endpoint, r.to_send(), r.max_concurrency, r.requests_per_minute)),
            }
        }
        endpoints
            .iter()
            .map(|&(_, n, concurrency, rpm)| {
                let waves = n.div_ceil(concurrency.max(1) as u64);
                let by_latency = latency.as_secs_f64() * waves as f64;
                let by_rate = if rpm > 0 { n as f64 * 60.0 / f64::from(rpm) } else { 0.0 };
                Duration::from_secs_f64(by_latency.max(by_rate))
            })
            .max()
            .unwrap_or_default()
    }
}

/// Replay every pair of `plan` (of `shard`, when given) with the stand-ins of `roles`' model
/// roles and count what they would ask for (see the module docs). Nothing is sent. The
/// replay's folder is a temporary one, removed before this returns.
pub fn dry_run(
    plan: &Plan,
    roles: &LlmRoles,
    jobs: Option<usize>,
    shard: Option<Shard>,
) -> Result<DryEstimate, RunError> {
    let model_roles = plan.experiment.llm.as_ref().map(|s| s.model_roles()).unwrap_or_default();
    let ledger = Arc::new(DryLedger::new(model_roles, plan.experiment.tokenizer));
    let offline_summarizer = crate::llm_setup::build_summarizer(&runlog::experiment::SummarizerSpec::Offline);
    let dry_summarizer = roles.summarizer.as_ref().map(|llm| DrySummarizer {
        llm: llm.clone(),
        offline: OfflineSummarizer::default(),
        ledger: ledger.clone(),
    });
    let dry_judge = roles.judge.as_ref().map(|llm| DryJudge { llm: llm.clone(), ledger: ledger.clone() });
    let summarizer: &dyn Summarizer = match &dry_summarizer {
        Some(s) => s,
        None => offline_summarizer.as_ref(),
    };
    let judge: &dyn Judge = match &dry_judge {
        Some(j) => j,
        None => &OfflineJudge,
    };
    let dry_next = roles.next_action.as_ref().map(|llm| DryNextAction {
        llm: llm.clone(),
        ledger: ledger.clone(),
        full: Default::default(),
    });
    let engine = Engine::new(summarizer, judge).with_next_action(dry_next.as_ref().map(|n| n as &dyn NextActionModel));
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let out = std::env::temp_dir().join(format!("compactlens-dry-run-{}-{nanos}", std::process::id()));
    let options = RunOptions { out: out.clone(), resume: false, jobs, shard };
    let started = Instant::now();
    let result = run::run(plan, &engine, &options, &Provenance::default(), &|_| {});
    let offline_wall = started.elapsed();
    let removed = std::fs::remove_dir_all(&out);
    let data = result?;
    removed.map_err(|source| RunError::Io { path: out, source })?;
    Ok(DryEstimate {
        pairs: data.manifest.counts.pairs_planned,
        offline_wall,
        roles: ledger.estimates(),
        cache_mode: roles.cache_mode,
    })
}
