//! The LLM summarizer: each summary request goes to a model with its seed's own prompt.
//!
//! [`LlmSummarizer`] implements [`Summarizer`] over an [`llm::Client`]. It owns a small tokio
//! runtime and blocks on it, so the replay stays synchronous; calls from several replay threads
//! share the client's concurrency cap, rate limit and cache.
//!
//! Per request: the strategy's own prompt, carried by the request ([`compaction::Prompt`]; or
//! the experiment's custom prompt file for every prompt but an external strategy's), the span
//! written the way that document's code writes it ([`compaction::Transcript`]), the request's
//! `max_tokens` as the output limit (the strategies set each
//! document's number: 200 for 000, 1,000 for 001, 800 and 400 for 002, 2,000 for 004), and the
//! document's temperature where it sets one (0.3 for 001). A provider error, a context-length
//! rejection, a cache miss in mode `only`, or an empty answer where the seed's code treats
//! empty as failure (000, 002, 003) returns a [`SummaryFailure`], so the strategy's own failure
//! path runs; failures are counted by kind.
//!
//! Where a document's code fills gaps, so does this, from the prompt's defaults: 001 writes no
//! previous summary as "None - this is the first compaction round.", no task as "Unknown task".

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use compaction::{Context, Prompt, SummaryFailure, SummaryRequest, Transcript};
use llm::{ChatRequest, Client, ClientStats, LlmError};

use super::{FailureKind, Summarizer, Summary, SummaryError};
use crate::summarize::prompts::{parse_prompt, PromptError, PromptTemplate, Vars, SUMMARY_VARS};
use runlog::settings::Price;

/// Why an LLM summarizer or judge could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LlmSetupError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("{}: cannot read prompt file: {source}", path.display())]
    PromptFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the LLM runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("{0}")]
    Invalid(String),
}

/// The tokio runtime an LLM summarizer or judge blocks on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, LlmSetupError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("compactlens-llm")
        .enable_all()
        .build()
        .map_err(LlmSetupError::Runtime)
}

/// Which prompts the summarizer uses.
#[derive(Debug, Clone)]
pub enum Prompts {
    /// Each request's own prompt: the strategy's ([`compaction::Prompt`]).
    Own,
    /// One prompt file for every request but an external strategy's (whose instructions are
    /// its own, [`Prompt::fixed`]).
    Custom(Arc<PromptTemplate>),
}

impl Prompts {
    /// Every catalog prompt, checked: each strategy's templates parse. An [`Prompts::Own`]
    /// summarizer parses a request's template when it first sees it; this check fails early
    /// instead, naming the file and line.
    pub fn own() -> Result<Prompts, PromptError> {
        for (_, prompt) in compaction_strategies::prompts() {
            parse_prompt(&prompt)?;
        }
        Ok(Prompts::Own)
    }
    /// A custom prompt file (see [`crate::summarize::prompts`] for its format).
    pub fn custom(path: &Path) -> Result<Prompts, LlmSetupError> {
        let text = inputs::read_to_string(path, inputs::Kind::Settings)
            .map_err(|e| LlmSetupError::PromptFile { path: path.to_path_buf(), source: e.into_io() })?;
        Ok(Prompts::Custom(Arc::new(PromptTemplate::parse(&path.display().to_string(), &text, SUMMARY_VARS)?)))
    }
}

/// Counters of an [`LlmSummarizer`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SummarizerStats {
    pub calls: u64,
    pub failures: u64,
    /// Failures by kind (`timeout`, `context_length_exceeded`, `empty`, ...).
    pub failures_by_kind: BTreeMap<String, u64>,
    /// The client's counters: HTTP attempts, retries, cache hits, usage.
    pub client: ClientStats,
}

/// Summaries by a model (see the module docs).
#[derive(Debug)]
pub struct LlmSummarizer {
    client: Arc<Client>,
    prompts: Prompts,
    /// Each strategy prompt's template, parsed when first asked for, by name and text.
    parsed: Mutex<BTreeMap<(String, u64), Arc<PromptTemplate>>>,
    runtime: tokio::runtime::Runtime,
    calls: AtomicU64,
    failures: Mutex<BTreeMap<String, u64>>,
    /// The summarizer model's own price, when the price table has it.
    price: Option<Price>,
}

impl LlmSummarizer {
    pub fn new(client: Arc<Client>, prompts: Prompts) -> Result<LlmSummarizer, LlmSetupError> {
        Ok(LlmSummarizer {
            client,
            prompts,
            parsed: Mutex::default(),
            runtime: runtime()?,
            calls: AtomicU64::new(0),
            failures: Mutex::default(),
            price: None,
        })
    }
    /// Price this summarizer's tokens at `price` (its model's entry in the price table) rather
    /// than at the replayed model's.
    pub fn with_price(mut self, price: Option<Price>) -> LlmSummarizer {
        self.price = price;
        self
    }
    /// With each strategy's own prompts.
    pub fn with_own_prompts(client: Arc<Client>) -> Result<LlmSummarizer, LlmSetupError> {
        LlmSummarizer::new(client, Prompts::own()?)
    }
    pub fn client(&self) -> &Client {
        &self.client
    }
    pub fn stats(&self) -> SummarizerStats {
        let failures_by_kind = self.failures.lock().map(|m| m.clone()).unwrap_or_default();
        SummarizerStats {
            calls: self.calls.load(Ordering::Relaxed),
            failures: failures_by_kind.values().sum(),
            failures_by_kind,
            client: self.client.stats(),
        }
    }
    /// Cache keys missed in cache mode `only`.
    pub fn missing_keys(&self) -> Vec<String> {
        self.client.cache().map(|c| c.missing()).unwrap_or_default()
    }

    /// `prompt`'s template, parsed once.
    fn template(&self, prompt: &Prompt) -> Result<Arc<PromptTemplate>, PromptError> {
        let key = (prompt.name.to_string(), seeded::fnv1a(prompt.template.as_bytes()));
        if let Some(t) = self.parsed.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(t);
        }
        let t = Arc::new(parse_prompt(prompt)?);
        if let Ok(mut m) = self.parsed.lock() {
            m.insert(key, t.clone());
        }
        Ok(t)
    }

    /// The chat request for `request` over `ctx`, and whether an empty answer fails. `Err`
    /// when the request's own template does not parse.
    pub fn chat_request(&self, ctx: &Context, request: &SummaryRequest) -> Result<(ChatRequest, bool), PromptError> {
        let prompt = &request.prompt;
        let (template, transcript, temperature, empty_fails, own) = match &self.prompts {
            Prompts::Custom(t) if !prompt.fixed => (t.clone(), Transcript::Sections, None, true, false),
            _ => (self.template(prompt)?, prompt.transcript, prompt.temperature, prompt.empty_fails, true),
        };
        let mut vars = Vars::default();
        vars.set("messages", transcript.render(ctx, &request.span, &request.input))
            .set("round", request.round.to_string())
            .set("max_tokens", request.max_tokens.to_string());
        if let Some(p) = &request.previous {
            vars.set("previous", p.as_str());
        }
        if let Some(t) = &request.task {
            vars.set("task", t.as_str());
        }
        if own {
            for (name, value) in &prompt.defaults {
                // As 001's code: only a missing value is filled, an empty one is kept.
                if !vars.is_set(name) {
                    vars.set(name, value.as_ref());
                }
            }
        }
        for (name, value) in &prompt.vars {
            vars.set(name, value.as_str());
        }
        let mut chat = ChatRequest::new(template.render(&vars)).max_tokens(request.max_tokens.max(1));
        chat.temperature = temperature;
        Ok((chat, empty_fails))
    }

    fn failed(&self, kind: &str, reason: String) -> SummaryFailure {
        if let Ok(mut m) = self.failures.lock() {
            *m.entry(kind.to_string()).or_insert(0) += 1;
        }
        SummaryFailure { reason }
    }
}

impl Summarizer for LlmSummarizer {
    fn name(&self) -> String {
        format!("llm:{}", self.client.config().model)
    }

    fn summarize(&self, ctx: &Context, request: &SummaryRequest) -> Result<Summary, SummaryFailure> {
        self.summarize_with_kind(ctx, request).map_err(|e| e.failure)
    }

    fn summarize_with_kind(&self, ctx: &Context, request: &SummaryRequest) -> Result<Summary, SummaryError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let (chat, empty_fails) = self
            .chat_request(ctx, request)
            .map_err(|e| SummaryError::from(self.failed("prompt", format!("the strategy's prompt: {e}"))))?;
        match self.runtime.block_on(self.client.complete(chat)) {
            // A refusal (the provider's refusal field, or a finish reason that says so) is
            // never a summary, whatever the strategy's document does with the model's text.
            Ok(r) if r.is_refusal() => Err(SummaryError::from(self.failed(
                "refusal",
                format!("the model refused to summarize (finish reason {})", r.finish_reason.as_deref().unwrap_or("")),
            ))),
            Ok(r) if empty_fails && r.text.trim().is_empty() => {
                Err(SummaryError::from(self.failed("empty", "the model returned an empty summary".to_string())))
            }
            Ok(r) if r.text.trim().is_empty() => {
                // The document's code takes the empty text as the summary: the strategy gets
                // it, and it still counts as a failed summary.
                self.failed("empty", "the model returned an empty summary".to_string());
                Ok(Summary {
                    text: r.text,
                    input_tokens: r.usage.prompt_tokens,
                    output_tokens: r.usage.completion_tokens,
                    cached_tokens: r.usage.cached_tokens,
                })
            }
            Ok(r) => Ok(Summary {
                text: r.text,
                input_tokens: r.usage.prompt_tokens,
                output_tokens: r.usage.completion_tokens,
                cached_tokens: r.usage.cached_tokens,
            }),
            Err(e) => {
                let kind = match e {
                    LlmError::ContextLengthExceeded { .. } => FailureKind::ContextLength,
                    LlmError::CacheMiss { .. } => FailureKind::CacheMiss,
                    LlmError::OverBudget { .. } => FailureKind::Budget,
                    ref e if e.is_endpoint_fault() => FailureKind::Endpoint,
                    _ => FailureKind::Other,
                };
                Err(SummaryError::new(self.failed(e.kind(), format!("{}: {e}", e.kind())), kind))
            }
        }
    }

    fn price(&self) -> Option<Price> {
        self.price
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use compaction::{Budget, Message, Trigger};
    use compaction_strategies::{
        cut_point, keep_last_n, priority_chain, prune_then_summarize, split_fraction, StrategyConfig,
    };
    use llm::{LlmConfig, Protocol};
    use testkit::server::{MockServer, Reply};

    fn client(server: &MockServer) -> Arc<Client> {
        let mut cfg = LlmConfig::new(Protocol::Openai, "summarizer-model");
        cfg.base_url = Some(format!("{}/v1", server.url()));
        cfg.max_retries = 1;
        cfg.backoff_initial_ms = 1;
        cfg.temperature = 0.7;
        Arc::new(Client::new(cfg, None).unwrap())
    }

    fn request(prompt: Prompt, span: Vec<usize>, max_tokens: u32) -> SummaryRequest {
        SummaryRequest::new(span, prompt, max_tokens, 1)
    }

    fn ctx() -> Context {
        Context::from_messages(vec![
            Message::system("You are a coding agent."),
            Message::user("Refactor src/lib.rs"),
            Message::assistant("Done: split into modules."),
        ])
    }

    #[test]
    fn each_seed_request_carries_its_prompt_limit_and_temperature() {
        let server = MockServer::start();
        let s = LlmSummarizer::with_own_prompts(client(&server)).unwrap();
        let cases: Vec<(Prompt, u32, &str, f64)> = vec![
            (priority_chain::paper_mid_stage_prompt("Abstrak"), 200, "Tahap paper \"Abstrak\"", 0.7),
            (priority_chain::general_chat_prompt(), 200, "3-7 bullet points", 0.7),
            (keep_last_n::prompt(), 1000, "coding agent's conversation history", 0.3),
            (cut_point::progressive_prompt(), 800, "running summary", 0.7),
            (cut_point::split_turn_prefix_prompt(), 400, "beginning of an agent's current turn", 0.7),
            (split_fraction::prompt(), 16384, "[COMPACT SUMMARY]", 0.7),
            (prune_then_summarize::prompt(), 2000, "CMS agent conversation", 0.7),
        ];
        for (kind, max, system_has, temp) in &cases {
            let out = s.summarize(&ctx(), &request(kind.clone(), vec![1, 2], *max)).unwrap();
            assert_eq!(out.text, "ok");
            let body = server.requests().last().unwrap().json();
            assert_eq!(body["max_tokens"], *max, "{kind:?}");
            assert!((body["temperature"].as_f64().unwrap() - temp).abs() < 1e-6, "{kind:?}");
            assert_eq!(body["messages"][0]["role"], "system");
            assert!(body["messages"][0]["content"].as_str().unwrap().contains(system_has), "{kind:?}");
            assert!(body["messages"][1]["content"].as_str().unwrap().contains("Refactor src/lib.rs"), "{kind:?}");
        }
        assert_eq!(s.stats().calls, cases.len() as u64);
        assert_eq!(s.name(), "llm:summarizer-model");
    }

    #[test]
    fn seed_001_fills_previous_task_and_round_like_its_code() {
        let server = MockServer::start();
        let s = LlmSummarizer::with_own_prompts(client(&server)).unwrap();
        let mut req = request(keep_last_n::prompt(), vec![1, 2], 1000);
        req.round = 2;
        s.summarize(&ctx(), &req).unwrap();
        let user = server.requests()[0].json()["messages"][1]["content"].as_str().unwrap().to_string();
        assert!(user.starts_with(&format!(
            "## Previous Summary\n{}\n\n## Original User Task\n{}\n",
            keep_last_n::NO_PREVIOUS_SUMMARY,
            keep_last_n::UNKNOWN_TASK
        )));
        assert!(user.contains("[0] USER:\nRefactor src/lib.rs\n\n---\n\n[1] ASSISTANT:\nDone: split into modules."));
        assert!(user.contains("### Session Summary (Compaction Round 2)"));
        req.previous = Some("## Session Summary (Compaction Round 1)\nolder".into());
        req.task = Some("Refactor src/lib.rs".into());
        s.summarize(&ctx(), &req).unwrap();
        let user = server.requests()[1].json()["messages"][1]["content"].as_str().unwrap().to_string();
        assert!(user.starts_with("## Previous Summary\n## Session Summary (Compaction Round 1)\nolder\n\n## Original User Task\nRefactor src/lib.rs\n"));
        // An empty previous summary (001 keeps a model's empty answer) is written as it is:
        // only a missing one reads "None - ...".
        req.previous = Some(String::new());
        s.summarize(&ctx(), &req).unwrap();
        let user = server.requests()[2].json()["messages"][1]["content"].as_str().unwrap().to_string();
        assert!(user.starts_with("## Previous Summary\n\n\n## Original User Task\n"), "{user}");
    }

    #[test]
    fn usage_is_reported_with_the_summary() {
        let server = MockServer::start();
        server.push(Reply::text("- bullet", 321, 12));
        let s = LlmSummarizer::with_own_prompts(client(&server)).unwrap();
        let out = s.summarize(&ctx(), &request(priority_chain::general_chat_prompt(), vec![1, 2], 200)).unwrap();
        assert_eq!((out.text.as_str(), out.input_tokens, out.output_tokens), ("- bullet", 321, 12));
        assert_eq!(s.stats().client.usage.prompt_tokens, 321);
    }

    #[test]
    fn empty_answers_fail_where_the_seed_says_so() {
        let server = MockServer::start();
        server.push_all([Reply::text("  ", 5, 0), Reply::text("", 5, 0)]);
        let s = LlmSummarizer::with_own_prompts(client(&server)).unwrap();
        let e = s.summarize(&ctx(), &request(split_fraction::prompt(), vec![1, 2], 100)).unwrap_err();
        assert!(e.reason.contains("empty"), "{e}");
        // 001's code returns whatever text came back; the empty answer still counts as a failed
        // summary, so a run of them is not green.
        assert_eq!(s.summarize(&ctx(), &request(keep_last_n::prompt(), vec![1, 2], 100)).unwrap().text, "");
        assert_eq!(s.stats().failures_by_kind.get("empty"), Some(&2));
    }

    #[test]
    fn provider_faults_are_summary_failures_counted_by_kind() {
        let server = MockServer::start();
        server.push_all([Reply::ContextLength, Reply::ServerError, Reply::ServerError, Reply::Malformed]);
        let s = LlmSummarizer::with_own_prompts(client(&server)).unwrap();
        let r = request(prune_then_summarize::prompt(), vec![1, 2], 100);
        let e = s.summarize(&ctx(), &r).unwrap_err();
        assert!(e.reason.starts_with("context_length_exceeded"), "{e}");
        let e = s.summarize(&ctx(), &r).unwrap_err();
        assert!(e.reason.starts_with("server_error"), "{e}");
        let e = s.summarize(&ctx(), &r).unwrap_err();
        assert!(e.reason.starts_with("malformed"), "{e}");
        let st = s.stats();
        assert_eq!((st.calls, st.failures), (3, 3));
        assert_eq!(
            st.failures_by_kind.keys().collect::<Vec<_>>(),
            ["context_length_exceeded", "malformed", "server_error"]
        );
    }

    fn long_context() -> Context {
        let mut m = vec![Message::system("You are a coding agent.")];
        for i in 0..40 {
            m.push(Message::user(format!("step {i}: {}", "lorem ipsum dolor ".repeat(25))));
            m.push(Message::assistant(format!("done with step {i}")));
        }
        Context::from_messages(m)
    }

    #[test]
    fn a_failed_summary_takes_the_strategys_own_failure_path() {
        let server = MockServer::start();
        server.respond_with(|_| Reply::ServerError);
        let s = LlmSummarizer::with_own_prompts(client(&server)).unwrap();
        let ctx = long_context();
        let budget = Budget::new(20_000);
        // split-fraction (003) falls back to truncation with its placeholder.
        let strategy = StrategyConfig::default_for("split-fraction").unwrap().build().unwrap();
        let plan = strategy.plan(&ctx, &budget, Trigger::Overflow).expect("a plan");
        let outcomes: Vec<_> = plan.requests.iter().map(|r| s.summarize(&ctx, r).map(|x| x.text)).collect();
        assert!(outcomes.iter().all(Result::is_err));
        let out = strategy.apply(&ctx, &budget, &plan, &outcomes);
        assert!(out.event.fallback.is_some(), "{:?}", out.event);
        assert!(out.context.len() < ctx.len());
        // keep-last-n (001) leaves the context unchanged.
        let strategy = StrategyConfig::default_for("keep-last-n").unwrap().build().unwrap();
        let plan = strategy.plan(&ctx, &budget, Trigger::Overflow).expect("a plan");
        let outcomes: Vec<_> = plan.requests.iter().map(|r| s.summarize(&ctx, r).map(|x| x.text)).collect();
        let out = strategy.apply(&ctx, &budget, &plan, &outcomes);
        assert_eq!(out.context.len(), ctx.len());
        assert!(out.event.fallback.as_deref().unwrap().starts_with("unchanged"));
        assert_eq!(s.stats().failures_by_kind.get("server_error"), Some(&2));
    }

    /// A 3k-window replay of `long_context()` through `small_split_fraction()`.
    fn long_replay_settings(price: Option<runlog::settings::Price>) -> crate::replay::ReplaySettings {
        crate::replay::ReplaySettings {
            strategy: small_split_fraction(),
            window: 3_000,
            encoding: compaction::Encoding::O200kBase,
            cache: runlog::settings::CacheProfile::None,
            price,
            overflow: runlog::settings::OverflowPolicy::Continue,
        }
    }

    fn replay_long(s: &LlmSummarizer, settings: &crate::replay::ReplaySettings) -> runlog::record::PairMetrics {
        let conversation =
            compaction::Conversation::new("c", long_context().entries().iter().map(|e| e.message().clone()).collect());
        crate::replay::replay(&conversation, settings, s, &crate::judge::OfflineJudge).unwrap()
    }

    /// split-fraction with room to compact proactively in a 3,000-token window, and with the
    /// reactive path its document does not have turned on, which the retry needs.
    fn small_split_fraction() -> StrategyConfig {
        serde_json::from_value(serde_json::json!({
            "name": "split-fraction",
            "max_output_tokens": 500,
            "react_to_overflow": true
        }))
        .unwrap()
    }

    /// A summary rejected as over the summarizer's context window, in either provider's
    /// shape, makes the replay plan again once with the reactive trigger and summarize again.
    #[test]
    fn a_context_length_rejection_takes_the_reactive_path_once() {
        for protocol in [Protocol::Openai, Protocol::Anthropic] {
            let server = MockServer::start();
            server.push(Reply::ContextLength);
            server.respond_with(|_| Reply::Text {
                text: "- short summary".into(),
                prompt: 50,
                cached: 20,
                completion: 5,
            });
            let mut cfg = LlmConfig::new(protocol, "summarizer-model");
            cfg.base_url = Some(match protocol {
                Protocol::Openai => format!("{}/v1", server.url()),
                Protocol::Anthropic => server.url(),
            });
            cfg.api_key_env = Some(String::new());
            cfg.max_retries = 0;
            let s = LlmSummarizer::with_own_prompts(Arc::new(Client::new(cfg, None).unwrap())).unwrap();
            let settings = long_replay_settings(Some(runlog::settings::Price {
                input: 1.0,
                cached_input: 0.5,
                output: 2.0,
                cache_write: None,
            }));
            let m = replay_long(&s, &settings);
            assert_eq!(m.summarizer_context_retries, 1, "{protocol:?}: one re-plan");
            assert_eq!(m.summarizer_failures, 1, "{protocol:?}");
            let first = &m.compaction_events[0];
            assert_eq!(first.trigger, Trigger::Overflow, "{protocol:?}: recorded with the trigger it used");
            assert!(first.fallback.is_none() && first.summary.contains("short summary"), "{protocol:?}: {first:?}");
            assert_eq!(s.stats().failures_by_kind.get("context_length_exceeded"), Some(&1), "{protocol:?}");
            // The summarizer's cached tokens are kept and priced as cached.
            let ok = m.summarizer_calls - m.summarizer_failures;
            assert_eq!((m.summarizer_input_tokens, m.summarizer_cached_tokens), (50 * ok, 20 * ok), "{protocol:?}");
            let price = settings.price.unwrap();
            let expected = price.cost(m.input_tokens, m.cached_tokens, m.output_tokens)
                + price.cost(m.summarizer_input_tokens, m.summarizer_cached_tokens, m.summarizer_output_tokens);
            assert!((m.cost_usd.expect("priced") - expected).abs() < 1e-12, "{protocol:?}");
        }
    }

    #[test]
    fn a_rejecting_summarizer_is_retried_once_per_compaction_and_other_faults_never() {
        let run = |reply: Reply| {
            let server = MockServer::start();
            server.respond_with(move |_| reply.clone());
            let s = LlmSummarizer::with_own_prompts(client(&server)).unwrap();
            replay_long(&s, &long_replay_settings(None))
        };
        let m = run(Reply::ContextLength);
        assert!(m.summarizer_context_retries >= 1);
        assert!(m.summarizer_context_retries <= m.compactions, "at most once per compaction");
        assert_eq!(m.summarizer_failures, m.summarizer_calls);
        assert!(m.compaction_events.iter().all(|e| e.fallback.is_some() && e.trigger == Trigger::Overflow));
        let m = run(Reply::ServerError);
        assert!(m.summarizer_failures > 0);
        assert_eq!(m.summarizer_context_retries, 0, "a server error is an ordinary failure");
        assert!(m.compaction_events.iter().any(|e| e.trigger == Trigger::Proactive));
    }

    #[test]
    fn a_custom_prompt_serves_every_kind() {
        let dir = std::env::temp_dir().join(format!("runner-custom-prompt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mine.md");
        std::fs::write(&path, "<!-- system -->\nSummarize for round {{round}}.\n<!-- user -->\n{{messages}}\n")
            .unwrap();
        let server = MockServer::start();
        let s = LlmSummarizer::new(client(&server), Prompts::custom(&path).unwrap()).unwrap();
        s.summarize(&ctx(), &request(keep_last_n::prompt(), vec![1], 50)).unwrap();
        let body = server.requests()[0].json();
        assert_eq!(body["messages"][0]["content"], "Summarize for round 1.");
        assert_eq!(body["messages"][1]["content"], "USER:\nRefactor src/lib.rs");
        std::fs::write(&path, "{{nope}}").unwrap();
        let e = Prompts::custom(&path).unwrap_err();
        assert!(e.to_string().contains("mine.md:1"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
