//! The client against the scripted local server: every fault, both protocols, the limits and
//! the cache modes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llm::cache::{CacheMode, ResponseCache};
use llm::{ChatMessage, ChatRequest, Client, LlmConfig, LlmError, Protocol, Secret, Usage};
use testkit::server::{MockServer, Reply};

const KEY: &str = "sk-test-NEVER-WRITE-ME-4242";

fn config(server: &MockServer, protocol: Protocol) -> LlmConfig {
    let mut cfg = LlmConfig::new(protocol, "test-model");
    cfg.base_url = Some(match protocol {
        Protocol::Openai => format!("{}/v1", server.url()),
        Protocol::Anthropic => server.url(),
    });
    cfg.timeout_s = 5.0;
    cfg.max_retries = 3;
    cfg.backoff_initial_ms = 10;
    cfg.backoff_max_s = 2.0;
    cfg
}

fn client(cfg: LlmConfig) -> Client {
    Client::new(cfg, Some(Secret::new(KEY))).expect("client")
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::system("Be brief."), ChatMessage::user(text)]).max_tokens(64)
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("llm-faults-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    d
}

fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(all_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test]
async fn openai_success_sends_the_protocol_and_reads_usage() {
    let server = MockServer::start();
    server.push(Reply::Text { text: "hello".into(), prompt: 40, cached: 32, completion: 5 });
    let c = client(config(&server, Protocol::Openai));
    let r = c.complete(ask("hi")).await.expect("success");
    assert_eq!(r.text, "hello");
    assert_eq!(r.usage, Usage { prompt_tokens: 40, cached_tokens: 32, completion_tokens: 5 });
    let req = &server.requests()[0];
    assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(req.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    let body = req.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(body["messages"][1]["content"], "hi");
    assert_eq!(c.stats().usage.completion_tokens, 5);
}

#[tokio::test]
async fn anthropic_success_sends_the_protocol_and_reads_usage() {
    let server = MockServer::start();
    server.push(Reply::Text { text: "bonjour".into(), prompt: 100, cached: 60, completion: 9 });
    let c = client(config(&server, Protocol::Anthropic));
    let r = c.complete(ask("hi")).await.expect("success");
    assert_eq!(r.text, "bonjour");
    assert_eq!(r.usage, Usage { prompt_tokens: 100, cached_tokens: 60, completion_tokens: 9 });
    let req = &server.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some(KEY));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.header("authorization"), None);
    let body = req.json();
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(body["messages"][0]["role"], "user");
}

#[tokio::test]
async fn rate_limit_honours_retry_after_then_succeeds() {
    let server = MockServer::start();
    server.push_all([Reply::rate_limited(1), Reply::text("after the wait", 3, 3)]);
    let c = client(config(&server, Protocol::Openai));
    let t0 = Instant::now();
    let r = c.complete(ask("hi")).await.expect("success after retry");
    assert_eq!(r.text, "after the wait");
    assert!(t0.elapsed() >= Duration::from_millis(950), "waited {:?}, Retry-After said 1 s", t0.elapsed());
    assert_eq!(server.count(), 2);
    let s = c.stats();
    assert_eq!((s.http_attempts, s.retries, s.failures), (2, 1, 0));
}

#[tokio::test]
async fn rate_limit_exhausted_is_typed() {
    let server = MockServer::start();
    server.push_all((0..3).map(|_| Reply::RateLimited { retry_after: "0".into() }));
    let mut cfg = config(&server, Protocol::Anthropic);
    cfg.max_retries = 2;
    let err = client(cfg).complete(ask("hi")).await.expect_err("exhausted");
    assert!(matches!(err, LlmError::RateLimited { attempts: 3, .. }), "{err:?}");
    assert_eq!(server.count(), 3);
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let server = MockServer::start();
    server.push_all([Reply::ServerError, Reply::ServerError, Reply::text("third time", 1, 1)]);
    let c = client(config(&server, Protocol::Openai));
    assert_eq!(c.complete(ask("hi")).await.expect("recovers").text, "third time");
    assert_eq!(server.count(), 3);

    let server = MockServer::start();
    server.respond_with(|_| Reply::ServerError);
    let err = client(config(&server, Protocol::Openai)).complete(ask("hi")).await.expect_err("fails");
    assert!(matches!(err, LlmError::Server { status: 500, attempts: 4, .. }), "{err:?}");
    assert_eq!(server.count(), 4);
}

#[tokio::test]
async fn a_hang_past_the_timeout_is_retried() {
    let server = MockServer::start();
    server.push_all([Reply::Hang(Duration::from_secs(10)), Reply::text("awake", 1, 1)]);
    let mut cfg = config(&server, Protocol::Openai);
    cfg.timeout_s = 0.3;
    let c = client(cfg.clone());
    assert_eq!(c.complete(ask("hi")).await.expect("second attempt").text, "awake");
    assert_eq!(server.count(), 2);

    let server = MockServer::start();
    server.respond_with(|_| Reply::Hang(Duration::from_secs(10)));
    let mut cfg = config(&server, Protocol::Anthropic);
    cfg.timeout_s = 0.2;
    cfg.max_retries = 1;
    let err = client(cfg).complete(ask("hi")).await.expect_err("always hangs");
    assert!(matches!(err, LlmError::Timeout { attempts: 2, .. }), "{err:?}");
}

#[tokio::test]
async fn malformed_json_is_an_error_value_and_not_retried() {
    for protocol in [Protocol::Openai, Protocol::Anthropic] {
        let server = MockServer::start();
        server.push(Reply::Malformed);
        let err = client(config(&server, protocol)).complete(ask("hi")).await.expect_err("malformed");
        assert!(matches!(err, LlmError::Malformed { status: 200, .. }), "{err:?}");
        assert_eq!(server.count(), 1);
    }
}

#[tokio::test]
async fn a_truncated_body_is_a_broken_connection_and_retried() {
    let server = MockServer::start();
    server.push_all([Reply::Truncated, Reply::text("whole", 1, 1)]);
    let c = client(config(&server, Protocol::Openai));
    assert_eq!(c.complete(ask("hi")).await.expect("retried").text, "whole");
    assert_eq!(server.count(), 2);

    let server = MockServer::start();
    server.respond_with(|_| Reply::Truncated);
    let mut cfg = config(&server, Protocol::Anthropic);
    cfg.max_retries = 1;
    let err = client(cfg).complete(ask("hi")).await.expect_err("always cut");
    assert!(matches!(err, LlmError::Connection { attempts: 2, .. }), "{err:?}");
}

#[tokio::test]
async fn context_length_is_typed_in_both_shapes_and_not_retried() {
    for protocol in [Protocol::Openai, Protocol::Anthropic] {
        let server = MockServer::start();
        server.push(Reply::ContextLength);
        let err = client(config(&server, protocol)).complete(ask("hi")).await.expect_err("too long");
        assert!(err.is_context_length_exceeded(), "{protocol:?}: {err:?}");
        assert_eq!(server.count(), 1);
    }
}

#[tokio::test]
async fn other_client_errors_are_rejected_without_retry() {
    let server = MockServer::start();
    server.push(Reply::Raw {
        status: 401,
        headers: vec![],
        body: r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#.into(),
    });
    let err = client(config(&server, Protocol::Openai)).complete(ask("hi")).await.expect_err("401");
    assert!(matches!(err, LlmError::Rejected { status: 401, .. }), "{err:?}");
    assert!(!err.to_string().contains(KEY));
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_reported() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let mut cfg = LlmConfig::new(Protocol::Openai, "m");
    cfg.base_url = Some(format!("http://127.0.0.1:{port}/v1"));
    cfg.max_retries = 2;
    cfg.backoff_initial_ms = 1;
    let err = client(cfg).complete(ask("hi")).await.expect_err("nobody listens");
    assert!(matches!(err, LlmError::Connection { attempts: 3, .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_is_capped() {
    let server = MockServer::start();
    server.respond_with(|_| Reply::text("slow", 1, 1).delayed(Duration::from_millis(150)));
    let mut cfg = config(&server, Protocol::Openai);
    cfg.max_concurrency = 2;
    let c = Arc::new(client(cfg));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { c.complete(ask(&format!("q{i}"))).await })
        })
        .collect();
    for t in tasks {
        t.await.expect("joined").expect("success");
    }
    assert_eq!(server.count(), 8);
    assert_eq!(server.max_in_flight(), 2, "two at a time, and the cap was reached");
}

#[tokio::test]
async fn cache_use_serves_a_warm_request_without_http() {
    let dir = tempdir("use");
    let server = MockServer::start();
    server.push(Reply::Text { text: "cached answer".into(), prompt: 7, cached: 0, completion: 3 });
    let cache = Arc::new(ResponseCache::new(&dir, CacheMode::Use));
    let c = client(config(&server, Protocol::Openai)).with_cache(cache.clone());
    let first = c.complete(ask("same")).await.expect("network");
    let second = c.complete(ask("same")).await.expect("cache");
    assert_eq!(server.count(), 1);
    assert_eq!((first.from_cache, second.from_cache), (false, true));
    assert_eq!((second.text.as_str(), second.usage), (first.text.as_str(), first.usage));
    // A fresh client on the same folder (a rerun) makes no request either.
    let rerun =
        client(config(&server, Protocol::Openai)).with_cache(Arc::new(ResponseCache::new(&dir, CacheMode::Use)));
    assert_eq!(rerun.complete(ask("same")).await.expect("cache").text, "cached answer");
    assert_eq!(server.count(), 1);
    let s = rerun.stats();
    assert_eq!((s.http_attempts, s.cache_hits, s.usage.prompt_tokens), (0, 1, 7));
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn cache_only_fails_fast_and_lists_every_missing_key() {
    let dir = tempdir("only");
    let server = MockServer::start();
    let warm = client(config(&server, Protocol::Openai)).with_cache(Arc::new(ResponseCache::new(&dir, CacheMode::Use)));
    warm.complete(ask("known")).await.expect("filled");
    assert_eq!(server.count(), 1);

    let cache = Arc::new(ResponseCache::new(&dir, CacheMode::Only));
    let c = client(config(&server, Protocol::Openai)).with_cache(cache.clone());
    assert_eq!(c.complete(ask("known")).await.expect("hit").text, "ok");
    let mut expected = Vec::new();
    for q in ["unknown-1", "unknown-2", "unknown-1"] {
        let err = c.complete(ask(q)).await.expect_err("miss");
        let LlmError::CacheMiss { key } = err else { panic!("{err:?}") };
        if !expected.contains(&key) {
            expected.push(key);
        }
    }
    assert_eq!(server.count(), 1, "no network in mode only");
    assert_eq!(cache.missing(), expected);
    assert_eq!(expected.len(), 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn cache_refresh_and_off_always_call() {
    let dir = tempdir("refresh");
    let server = MockServer::start();
    server.push_all([Reply::text("old", 1, 1), Reply::text("new", 1, 1), Reply::text("uncached", 1, 1)]);
    let use_ = || Arc::new(ResponseCache::new(&dir, CacheMode::Use));
    client(config(&server, Protocol::Openai)).with_cache(use_()).complete(ask("q")).await.expect("fill");
    let refresh =
        client(config(&server, Protocol::Openai)).with_cache(Arc::new(ResponseCache::new(&dir, CacheMode::Refresh)));
    assert_eq!(refresh.complete(ask("q")).await.expect("refetch").text, "new");
    assert_eq!(server.count(), 2);
    let reader = client(config(&server, Protocol::Openai)).with_cache(use_());
    assert_eq!(reader.complete(ask("q")).await.expect("hit").text, "new", "refresh overwrote the entry");
    assert_eq!(server.count(), 2);

    let off_dir = tempdir("off");
    let off =
        client(config(&server, Protocol::Openai)).with_cache(Arc::new(ResponseCache::new(&off_dir, CacheMode::Off)));
    assert_eq!(off.complete(ask("q")).await.expect("network").text, "uncached");
    assert_eq!(server.count(), 3);
    assert!(all_files(&off_dir).is_empty(), "off writes nothing");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn the_api_key_never_reaches_the_cache() {
    let dir = tempdir("secret");
    for protocol in [Protocol::Openai, Protocol::Anthropic] {
        let server = MockServer::start();
        let c = client(config(&server, protocol)).with_cache(Arc::new(ResponseCache::new(&dir, CacheMode::Use)));
        c.complete(ask("secret check")).await.expect("success");
        let sent = server.requests()[0].headers.iter().any(|(_, v)| v.contains(KEY));
        assert!(sent, "the key was sent in a header");
    }
    let files = all_files(&dir);
    assert_eq!(files.len(), 2);
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable");
        assert!(!text.contains(KEY), "{} holds the key", f.display());
        assert!(text.contains("secret check"), "the entry keeps the request for inspection");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn errors_are_not_cached() {
    let dir = tempdir("errors");
    let server = MockServer::start();
    server.push_all([Reply::ContextLength, Reply::text("fits now", 1, 1)]);
    let c = client(config(&server, Protocol::Openai)).with_cache(Arc::new(ResponseCache::new(&dir, CacheMode::Use)));
    assert!(c.complete(ask("q")).await.is_err());
    assert_eq!(c.complete(ask("q")).await.expect("asked again").text, "fits now");
    assert_eq!(server.count(), 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_cache_namespace_keeps_hits_when_the_server_moves() {
    let dir = tempdir("namespace");
    let first = MockServer::start();
    first.push(Reply::text("recorded", 7, 3));
    let moved = MockServer::start();
    let cache = Arc::new(ResponseCache::new(&dir, CacheMode::Use));
    let with_namespace = |server: &MockServer| {
        let mut cfg = config(server, Protocol::Openai);
        cfg.cache_namespace = Some("local-smollm2".into());
        cfg
    };
    let a = client(with_namespace(&first)).with_cache(cache.clone());
    assert_eq!(a.complete(ask("same question")).await.expect("answer").text, "recorded");
    // The same server on another port: the namespace stands in for the URL, so it hits.
    let b = client(with_namespace(&moved)).with_cache(cache.clone());
    let hit = b.complete(ask("same question")).await.expect("answer");
    assert_eq!((hit.text.as_str(), hit.from_cache, moved.count()), ("recorded", true, 0));
    assert_eq!(b.stats().cache_hits, 1);
    // Without a namespace the URL is in the key: the moved server is asked.
    let c = client(config(&moved, Protocol::Openai)).with_cache(cache.clone());
    assert!(!c.complete(ask("same question")).await.expect("answer").from_cache);
    assert_eq!((moved.count(), c.stats().cache_misses), (1, 1));
    // A namespace is not a URL and changes nothing else of the key.
    assert_ne!(a.cache_key(&ask("same question")), c.cache_key(&ask("same question")));
    assert_ne!(a.cache_key(&ask("same question")), a.cache_key(&ask("another question")));
    let mut empty = with_namespace(&first);
    empty.cache_namespace = Some(" ".into());
    assert_eq!(empty.validate().expect_err("empty").field, "cache_namespace");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn clients_sharing_limits_never_exceed_the_endpoints_cap() {
    let server = MockServer::start();
    server.respond_with(|_| Reply::text("ok", 1, 1).delayed(Duration::from_millis(30)));
    let mut cfg = config(&server, Protocol::Openai);
    cfg.max_concurrency = 1;
    let a = Arc::new(client(cfg.clone()));
    let b = Arc::new(client(cfg).sharing_limits(a.limits()));
    let mut tasks = Vec::new();
    for i in 0..6 {
        let c = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move { c.complete(ask(&format!("q{i}"))).await }));
    }
    for t in tasks {
        t.await.expect("joined").expect("answer");
    }
    assert_eq!((server.count(), server.max_in_flight()), (6, 1));
    assert_eq!((a.stats().requests, b.stats().requests), (3, 3), "each client keeps its own counters");
}
