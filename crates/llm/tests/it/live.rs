//! Live calls to a hosted provider, only when asked for:
//!
//! ```text
//! COMPACTLENS_LIVE=1 \
//! COMPACTLENS_LIVE_PROTOCOL=openai|anthropic \
//! COMPACTLENS_LIVE_MODEL=gpt-4o-mini \
//! COMPACTLENS_LIVE_KEY_ENV=OPENAI_API_KEY \        # the NAME of the variable holding the key
//! [COMPACTLENS_LIVE_BASE_URL=https://...] \
//! cargo test -p llm --test it live -- --nocapture
//! ```
//!
//! Without them each test prints why it skipped and passes. The calls are tiny (a few tokens).

#![allow(clippy::print_stderr)] // a skipped live test says why

use std::sync::Arc;

use llm::cache::{CacheMode, ResponseCache};
use llm::{ChatMessage, ChatRequest, Client, LlmConfig, LlmError, Protocol};

fn live_config() -> Option<LlmConfig> {
    if std::env::var("COMPACTLENS_LIVE").ok().as_deref() != Some("1") {
        eprintln!("skipped: set COMPACTLENS_LIVE=1 and the COMPACTLENS_LIVE_* endpoint variables to call a provider");
        return None;
    }
    let (Ok(protocol), Ok(model)) =
        (std::env::var("COMPACTLENS_LIVE_PROTOCOL"), std::env::var("COMPACTLENS_LIVE_MODEL"))
    else {
        eprintln!("skipped: COMPACTLENS_LIVE_PROTOCOL and COMPACTLENS_LIVE_MODEL must be set");
        return None;
    };
    let protocol = match protocol.as_str() {
        "openai" => Protocol::Openai,
        "anthropic" => Protocol::Anthropic,
        other => panic!("COMPACTLENS_LIVE_PROTOCOL={other}: expected openai or anthropic"),
    };
    let mut cfg = LlmConfig::new(protocol, model);
    cfg.base_url = std::env::var("COMPACTLENS_LIVE_BASE_URL").ok();
    cfg.api_key_env = std::env::var("COMPACTLENS_LIVE_KEY_ENV").ok();
    cfg.max_tokens = 16;
    cfg.max_retries = 2;
    Some(cfg)
}

fn client(cfg: LlmConfig) -> Client {
    let key = cfg.resolve_key(|name| std::env::var(name).ok()).expect("the key variable is set");
    Client::new(cfg, key).expect("client")
}

#[tokio::test]
async fn live_completion_reports_text_and_usage() {
    let Some(cfg) = live_config() else { return };
    let c = client(cfg);
    let r = c
        .complete(ChatRequest::new(vec![ChatMessage::user("Reply with the single word: pong")]).temperature(0.0))
        .await
        .expect("a live completion");
    assert!(!r.text.trim().is_empty(), "empty answer");
    assert!(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0, "{:?}", r.usage);
}

#[tokio::test]
async fn live_rerun_from_the_cache_makes_no_request() {
    let Some(cfg) = live_config() else { return };
    let dir = std::env::temp_dir().join(format!("llm-live-cache-{}", std::process::id()));
    let req = ChatRequest::new(vec![ChatMessage::user("Say: cached")]).temperature(0.0);
    let first = client(cfg.clone()).with_cache(Arc::new(ResponseCache::new(&dir, CacheMode::Use)));
    let a = first.complete(req.clone()).await.expect("live");
    let second = client(cfg).with_cache(Arc::new(ResponseCache::new(&dir, CacheMode::Only)));
    let b = second.complete(req).await.expect("from cache");
    assert_eq!((a.text, b.from_cache, second.stats().http_attempts), (b.text, true, 0));
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn live_bad_key_is_rejected_not_retried() {
    let Some(cfg) = live_config() else { return };
    let c = Client::new(cfg, Some(llm::Secret::new("sk-invalid-key-for-test"))).expect("client");
    let err = c.complete(ChatRequest::new(vec![ChatMessage::user("hi")])).await.expect_err("rejected");
    assert!(matches!(err, LlmError::Rejected { status: 401 | 403, .. }), "{err:?}");
    assert_eq!(c.stats().http_attempts, 1);
}
