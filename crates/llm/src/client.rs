//! The client: one endpoint, its limits, its retries, its cache, and what it spent.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{Notify, Semaphore};

use crate::budget::{Budget, Meter};
use crate::cache::{CacheKey, CacheMode, ResponseCache};
use crate::config::{LlmConfig, Protocol, Secret};
use crate::error::LlmError;
pub use crate::types::ClientStats;
use crate::types::{ChatRequest, ChatResponse, Priority, Usage};
use crate::wire::{self, Outcome};

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    http_attempts: AtomicU64,
    retries: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    failures: Mutex<BTreeMap<String, u64>>,
    prompt: AtomicU64,
    cached: AtomicU64,
    completion: AtomicU64,
}

impl Counters {
    fn used(&self, u: Usage) {
        self.prompt.fetch_add(u.prompt_tokens, Ordering::Relaxed);
        self.cached.fetch_add(u.cached_tokens, Ordering::Relaxed);
        self.completion.fetch_add(u.completion_tokens, Ordering::Relaxed);
    }
}

/// Spaces request starts evenly: at most `per_minute` starts in any minute, no bursts.
#[derive(Debug)]
pub struct Pacer {
    interval: Option<Duration>,
    next: Mutex<Option<Instant>>,
}

impl Pacer {
    /// `0` means no limit.
    pub fn new(per_minute: u32) -> Pacer {
        let interval = (per_minute > 0).then(|| Duration::from_secs_f64(60.0 / f64::from(per_minute)));
        Pacer { interval, next: Mutex::new(None) }
    }
    /// Reserve the next start at or after `now` and return it.
    pub fn reserve(&self, now: Instant) -> Instant {
        let Some(interval) = self.interval else { return now };
        let mut next = match self.next.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let slot = next.map_or(now, |n| n.max(now));
        *next = Some(slot + interval);
        slot
    }
    async fn wait(&self) {
        let slot = self.reserve(Instant::now());
        tokio::time::sleep_until(slot.into()).await;
    }
}

/// The limits of one endpoint: requests in flight and requests per minute. Clients of the same
/// endpoint share one (see [`Client::sharing_limits`]), so the endpoint sees the limit once,
/// however many clients call it.
#[derive(Debug)]
pub struct Limits {
    gate: Semaphore,
    pacer: Pacer,
    /// Urgent requests waiting for a slot: a background request does not take one while any is.
    urgent_waiting: AtomicUsize,
    /// Rung when a slot frees or the last urgent request is served.
    changed: Notify,
}

impl Limits {
    pub fn new(max_concurrency: usize, requests_per_minute: u32) -> Limits {
        Limits {
            gate: Semaphore::new(max_concurrency),
            pacer: Pacer::new(requests_per_minute),
            urgent_waiting: AtomicUsize::new(0),
            changed: Notify::new(),
        }
    }

    /// A slot under the concurrency cap. An urgent request queues for the next free slot; a
    /// background one takes a free slot only while no urgent request waits, so work that a
    /// caller is blocked on (a replay waiting for its summary) is not queued behind work that
    /// nothing waits on (a judge's probe scored beside the replay).
    async fn slot(&self, priority: Priority) -> Result<Slot<'_>, LlmError> {
        let permit = match priority {
            Priority::Urgent => {
                self.urgent_waiting.fetch_add(1, Ordering::SeqCst);
                let permit = self.gate.acquire().await;
                if self.urgent_waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
                    self.changed.notify_waiters();
                }
                permit.map_err(|e| LlmError::Client(e.to_string()))?
            }
            Priority::Background => loop {
                // Registered before the check, so a wake-up between the two is not lost.
                let changed = self.changed.notified();
                if self.urgent_waiting.load(Ordering::SeqCst) == 0 {
                    if let Ok(p) = self.gate.try_acquire() {
                        break p;
                    }
                }
                changed.await;
            },
        };
        Ok(Slot { permit: Some(permit), limits: self })
    }
}

/// A held slot; freeing it wakes the background requests waiting for one.
struct Slot<'a> {
    permit: Option<tokio::sync::SemaphorePermit<'a>>,
    limits: &'a Limits,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        // The permit goes back first: a waiter woken while it was still held would find no
        // slot, wait again, and never hear of this one.
        drop(self.permit.take());
        self.limits.changed.notify_waiters();
    }
}

/// A client for one endpoint. Cheap to share behind an `Arc`; every method takes `&self`.
///
/// ```no_run
/// # async fn demo() -> Result<(), llm::LlmError> {
/// use llm::{ChatMessage, ChatRequest, Client, LlmConfig, Protocol};
/// let mut cfg = LlmConfig::new(Protocol::Openai, "gpt-4o-mini");
/// let key = cfg.resolve_key(|name| std::env::var(name).ok())?;
/// let client = Client::new(cfg, key)?;
/// let answer = client.complete(ChatRequest::new(vec![ChatMessage::user("Say hi")])).await?;
/// println!("{} ({} tokens in)", answer.text, answer.usage.prompt_tokens);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Client {
    cfg: LlmConfig,
    key: Option<Secret>,
    endpoint: String,
    http: reqwest::Client,
    limits: Arc<Limits>,
    cache: Option<Arc<ResponseCache>>,
    counters: Counters,
    jitter: AtomicU64,
    /// The run's spending limit and how this client's requests are priced against it.
    budget: Option<(Arc<Budget>, Meter)>,
}

impl Client {
    /// A client for `cfg`, authenticating with `key` when given.
    pub fn new(cfg: LlmConfig, key: Option<Secret>) -> Result<Client, LlmError> {
        cfg.validate()?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs_f64(cfg.timeout_s))
            .user_agent(concat!("compactlens/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Client(e.to_string()))?;
        let seed = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7);
        Ok(Client {
            endpoint: wire::endpoint(cfg.protocol, cfg.base_url()),
            limits: Arc::new(Limits::new(cfg.max_concurrency, cfg.requests_per_minute)),
            cfg,
            key,
            http,
            cache: None,
            counters: Counters::default(),
            jitter: AtomicU64::new(seed),
            budget: None,
        })
    }
    /// Serve and store responses through `cache`.
    pub fn with_cache(mut self, cache: Arc<ResponseCache>) -> Client {
        self.cache = Some(cache);
        self
    }
    /// Take `limits` (shared with other clients of the same endpoint) instead of this
    /// client's own; its `max_concurrency` and `requests_per_minute` then apply to all of them
    /// together.
    pub fn sharing_limits(mut self, limits: Arc<Limits>) -> Client {
        self.limits = limits;
        self
    }
    /// Reserve every request sent over the network against `budget`, priced by `meter`
    /// (see [`crate::budget`]); a refused request fails with [`LlmError::OverBudget`] unsent.
    pub fn with_budget(mut self, budget: Arc<Budget>, meter: Meter) -> Client {
        self.budget = Some((budget, meter));
        self
    }
    /// The budget this client spends against, when it has one.
    pub fn budget(&self) -> Option<&Budget> {
        self.budget.as_ref().map(|(b, _)| b.as_ref())
    }
    /// The limits this client obeys, to share with another client of the same endpoint.
    pub fn limits(&self) -> Arc<Limits> {
        self.limits.clone()
    }
    pub fn config(&self) -> &LlmConfig {
        &self.cfg
    }
    pub fn cache(&self) -> Option<&ResponseCache> {
        self.cache.as_deref()
    }
    /// The counters so far.
    pub fn stats(&self) -> ClientStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let failures_by_kind = match c.failures.lock() {
            Ok(m) => m.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        ClientStats {
            requests: get(&c.requests),
            http_attempts: get(&c.http_attempts),
            retries: get(&c.retries),
            cache_hits: get(&c.cache_hits),
            cache_misses: get(&c.cache_misses),
            failures: failures_by_kind.values().sum(),
            failures_by_kind,
            usage: Usage {
                prompt_tokens: get(&c.prompt),
                cached_tokens: get(&c.cached),
                completion_tokens: get(&c.completion),
            },
        }
    }
    /// `text` without the API key in it.
    /// `response` with the key scrubbed from its text and its reported model and finish reason.
    fn scrub_response(&self, mut response: ChatResponse) -> ChatResponse {
        response.text = self.scrub(&response.text);
        response.model = response.model.map(|m| self.scrub(&m));
        response.finish_reason = response.finish_reason.map(|f| self.scrub(&f));
        response
    }

    pub fn scrub(&self, text: &str) -> String {
        match &self.key {
            Some(k) => k.scrub(text),
            None => text.to_string(),
        }
    }
    /// The cache key `request` would have.
    pub fn cache_key(&self, request: &ChatRequest) -> CacheKey {
        let key = CacheKey::new(
            self.cfg.protocol,
            self.cfg.cache_namespace.as_deref().unwrap_or(self.cfg.base_url()),
            &self.cfg.model,
            &request.messages,
            request.max_tokens.unwrap_or(self.cfg.max_tokens),
            request.temperature.unwrap_or(self.cfg.temperature),
            request.sample,
        );
        match &request.response_format {
            Some(format) => key.with("response_format", format.clone()),
            None => key,
        }
    }

    /// One completion: from the cache when the mode allows, else over HTTP with retries.
    pub async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        // An endpoint may echo the key (an error body quoting the Authorization header, or even
        // an answer): it is scrubbed here, before anything is cached, logged or stored.
        let result = match self.complete_inner(&request).await {
            Ok(r) => Ok(self.scrub_response(r)),
            Err(e) => Err(e.scrubbed(|m| self.scrub(m))),
        };
        match &result {
            Ok(r) => self.counters.used(r.usage),
            Err(e) => {
                let mut m = match self.counters.failures.lock() {
                    Ok(m) => m,
                    Err(poisoned) => poisoned.into_inner(),
                };
                *m.entry(e.kind().to_string()).or_insert(0) += 1;
            }
        }
        result
    }

    async fn complete_inner(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let key = self.cache_key(request);
        if let Some(cache) = &self.cache {
            if let Some(hit) = cache.get(&key)? {
                self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(hit);
            }
            if matches!(cache.mode(), CacheMode::Use | CacheMode::Only) {
                self.counters.cache_misses.fetch_add(1, Ordering::Relaxed);
            }
            if cache.mode() == CacheMode::Only {
                return Err(cache.miss(&key));
            }
        }
        let max_tokens = request.max_tokens.unwrap_or(self.cfg.max_tokens);
        let temperature = request.temperature.unwrap_or(self.cfg.temperature);
        let mut body =
            wire::request_body(self.cfg.protocol, &self.cfg.model, &request.messages, max_tokens, temperature);
        if let (Some(format), Some(fields)) = (&request.response_format, body.as_object_mut()) {
            fields.insert("response_format".into(), format.clone());
        }
        // Dropped unsettled when the request fails: a failed request costs nothing.
        let reservation = match &self.budget {
            Some((budget, meter)) => {
                Some((budget.reserve(&meter.role, meter.worst_case(&request.messages, max_tokens))?, meter))
            }
            None => None,
        };
        // Scrubbed before it is cached: the cache never holds the key.
        let response = self.scrub_response(self.send_with_retries(&body, request.priority).await?);
        if let Some((reservation, meter)) = reservation {
            let u = response.usage;
            // An endpoint that reports no usage is charged the reservation (its worst case).
            let actual = if u == Usage::default() {
                reservation.reserved()
            } else {
                meter.rates.cost(u.prompt_tokens, u.cached_tokens, u.completion_tokens)
            };
            reservation.settle(actual);
        }
        if let Some(cache) = &self.cache {
            cache.put(&key, &response)?;
        }
        Ok(response)
    }

    /// The endpoint's URL (no key in it).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One small request (one output token, no cache, not counted in [`Client::stats`]) to
    /// learn whether the endpoint answers as a model before a run relies on it. A transient
    /// fault (a broken connection, a 5xx) is tried at most [`PREFLIGHT_ATTEMPTS`] times, with
    /// at most a second between attempts. A rate limit or a context-length answer still shows
    /// a live model and passes; an unreachable endpoint, an error status (401, 403, 404, 5xx)
    /// or an answer that is not a model's fails, with the error scrubbed of the key.
    pub async fn preflight(&self) -> Result<(), LlmError> {
        let messages = vec![crate::ChatMessage::user("Reply with OK.")];
        let body = wire::request_body(self.cfg.protocol, &self.cfg.model, &messages, 1, self.cfg.temperature);
        let attempts = self.cfg.max_retries.saturating_add(1).min(PREFLIGHT_ATTEMPTS);
        let mut attempt = 0;
        let outcome = loop {
            attempt += 1;
            let error = match self.attempt_counted(&body, false, Priority::Urgent).await {
                Attempt::Done(_) => break Ok(()),
                Attempt::Fail(e) => break Err(e),
                Attempt::Retry(e, _) => e,
            };
            if matches!(error, LlmError::RateLimited { .. }) {
                break Ok(());
            }
            if attempt >= attempts {
                break Err(with_attempts(error, attempt, self.cfg.timeout_s));
            }
            tokio::time::sleep(self.backoff(attempt).min(Duration::from_secs(1))).await;
        };
        match outcome {
            Err(LlmError::ContextLengthExceeded { .. }) => Ok(()),
            other => other.map_err(|e| e.scrubbed(|m| self.scrub(m))),
        }
    }

    async fn send_with_retries(&self, body: &serde_json::Value, priority: Priority) -> Result<ChatResponse, LlmError> {
        let attempts = self.cfg.max_retries.saturating_add(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            if attempt > 1 {
                self.counters.retries.fetch_add(1, Ordering::Relaxed);
            }
            let (error, asked_wait) = match self.attempt_counted(body, true, priority).await {
                Attempt::Done(r) => return Ok(r),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry(e, wait) => (e, wait),
            };
            if attempt >= attempts {
                return Err(with_attempts(error, attempt, self.cfg.timeout_s));
            }
            let cap = Duration::from_secs_f64(self.cfg.backoff_max_s);
            let wait = asked_wait.unwrap_or_else(|| self.backoff(attempt)).min(cap);
            tokio::time::sleep(wait).await;
        }
    }

    /// Exponential backoff with jitter: `initial x 2^(n-1)`, capped, scaled by a random factor
    /// in [0.5, 1).
    fn backoff(&self, attempt: u32) -> Duration {
        let exp = 2f64.powi(i32::try_from(attempt.saturating_sub(1).min(30)).unwrap_or(30));
        let base = (self.cfg.backoff_initial_ms as f64 / 1000.0 * exp).min(self.cfg.backoff_max_s);
        let r = seeded::mix64(self.jitter.fetch_add(seeded::GOLDEN, Ordering::Relaxed));
        let factor = 0.5 + 0.5 * ((r >> 11) as f64 / (1u64 << 53) as f64);
        Duration::from_secs_f64(base * factor)
    }

    async fn attempt_counted(&self, body: &serde_json::Value, counted: bool, priority: Priority) -> Attempt {
        self.limits.pacer.wait().await;
        let _slot = match self.limits.slot(priority).await {
            Ok(s) => s,
            Err(e) => return Attempt::Fail(e),
        };
        if counted {
            self.counters.http_attempts.fetch_add(1, Ordering::Relaxed);
        }
        let mut req = self.http.post(&self.endpoint).json(body);
        req = match (self.cfg.protocol, &self.key) {
            (Protocol::Openai, Some(k)) => req.bearer_auth(k.expose()),
            (Protocol::Anthropic, Some(k)) => req.header("x-api-key", k.expose()),
            (_, None) => req,
        };
        if self.cfg.protocol == Protocol::Anthropic {
            req = req.header("anthropic-version", wire::ANTHROPIC_VERSION);
        }
        let response = match req.send().await {
            Ok(r) => r,
            Err(e) => return transport(&e),
        };
        let status = response.status().as_u16();
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let wait =
            wire::retry_after(header("retry-after-ms").as_deref(), header("retry-after").as_deref(), SystemTime::now());
        let text = match response.text().await {
            Ok(t) => t,
            Err(e) => return transport(&e),
        };
        match wire::interpret(self.cfg.protocol, status, &text) {
            Outcome::Done(r) => Attempt::Done(r),
            Outcome::Fail(e) => Attempt::Fail(e),
            Outcome::Retry(e) => Attempt::Retry(e, wait),
        }
    }
}

/// The most attempts a preflight request makes.
pub const PREFLIGHT_ATTEMPTS: u32 = 3;

enum Attempt {
    Done(ChatResponse),
    Fail(LlmError),
    /// Retry, after the server's `Retry-After` if it gave one.
    Retry(LlmError, Option<Duration>),
}

/// A transport failure: a time-out, a refused or broken connection, a body cut short. All
/// retried. The message names the error chain, never a header, and each cause once (one that
/// names its own cause in its message is not followed by it again).
fn transport(e: &reqwest::Error) -> Attempt {
    if e.is_timeout() {
        return Attempt::Retry(LlmError::Timeout { attempts: 1, timeout_s: 0.0 }, None);
    }
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = s.source();
    }
    Attempt::Retry(LlmError::Connection { attempts: 1, message }, None)
}

fn with_attempts(e: LlmError, attempts: u32, timeout_s: f64) -> LlmError {
    match e {
        LlmError::RateLimited { message, .. } => LlmError::RateLimited { attempts, message },
        LlmError::Server { status, message, .. } => LlmError::Server { status, attempts, message },
        LlmError::Timeout { .. } => LlmError::Timeout { attempts, timeout_s },
        LlmError::Connection { message, .. } => LlmError::Connection { attempts, message },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_urgent_request_takes_the_next_slot_before_a_background_one() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let limits = Arc::new(Limits::new(1, 0));
            let order = Arc::new(Mutex::new(Vec::new()));
            let held = limits.slot(Priority::Urgent).await.expect("a free slot");
            let task = |name: &'static str, priority: Priority| {
                let (limits, order) = (limits.clone(), order.clone());
                tokio::spawn(async move {
                    let _slot = limits.slot(priority).await.expect("a slot");
                    order.lock().expect("order").push(name);
                    tokio::task::yield_now().await;
                })
            };
            // The background request waits first; the urgent one arrives after it.
            let background = task("background", Priority::Background);
            tokio::task::yield_now().await;
            let urgent = task("urgent", Priority::Urgent);
            tokio::task::yield_now().await;
            assert!(order.lock().expect("order").is_empty(), "the one slot is held");
            drop(held);
            urgent.await.expect("urgent");
            background.await.expect("background");
            assert_eq!(*order.lock().expect("order"), ["urgent", "background"]);
        });
    }

    #[test]
    fn a_background_request_waiting_on_a_busy_slot_gets_it_when_it_frees() {
        // One slot, held; a background request waits for it. Nothing else happens: the only
        // wake-up it can get is the slot's release.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        rt.block_on(async {
            let limits = Arc::new(Limits::new(1, 0));
            for _ in 0..200 {
                let held = limits.slot(Priority::Urgent).await.expect("a free slot");
                let waiter = {
                    let limits = limits.clone();
                    tokio::spawn(async move { limits.slot(Priority::Background).await.map(|_| ()) })
                };
                tokio::task::yield_now().await;
                drop(held);
                let got = tokio::time::timeout(Duration::from_secs(10), waiter).await;
                assert!(matches!(got, Ok(Ok(Ok(())))), "the background request was never woken");
            }
        });
    }

    #[test]
    fn pacer_spaces_starts_evenly() {
        let p = Pacer::new(120);
        let t0 = Instant::now();
        let slots: Vec<Duration> = (0..4).map(|_| p.reserve(t0) - t0).collect();
        assert_eq!(slots, [0, 500, 1000, 1500].map(Duration::from_millis));
        // A start asked for later than the next slot is not delayed.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(p.reserve(later), later);
        let unlimited = Pacer::new(0);
        assert_eq!(unlimited.reserve(t0), t0);
        assert_eq!(unlimited.reserve(t0), t0);
    }

    #[test]
    fn backoff_grows_with_jitter_and_stays_capped() {
        let mut cfg = LlmConfig::new(Protocol::Openai, "m");
        cfg.backoff_initial_ms = 1_000;
        cfg.backoff_max_s = 5.0;
        let c = Client::new(cfg, None).expect("client");
        for attempt in 1..=6u32 {
            let base = (2f64.powi(attempt as i32 - 1)).min(5.0);
            for _ in 0..20 {
                let d = c.backoff(attempt).as_secs_f64();
                assert!(d >= base * 0.5 && d < base, "attempt {attempt}: {d}");
            }
        }
        let draws: std::collections::BTreeSet<u128> = (0..20).map(|_| c.backoff(3).as_nanos()).collect();
        assert!(draws.len() > 1, "jitter varies");
    }
}
