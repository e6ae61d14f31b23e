//! What a client needs to know about its endpoint: [`LlmConfig`], read from an experiment's
//! `[llm]` table, and the API key as a [`Secret`] the caller resolves.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The wire protocol of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// OpenAI-compatible chat completions: `POST {base_url}/chat/completions` (OpenAI, vLLM,
    /// llama.cpp server, Ollama, LM Studio, OpenRouter, most gateways).
    Openai,
    /// The Anthropic Messages API: `POST {base_url}/v1/messages`.
    Anthropic,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Openai => "openai",
            Protocol::Anthropic => "anthropic",
        }
    }
    /// The provider's own endpoint, used when `base_url` is not given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Protocol::Openai => "https://api.openai.com/v1",
            Protocol::Anthropic => "https://api.anthropic.com",
        }
    }
}

/// One endpoint and how to call it. Every field has a default except `model`.
///
/// ```
/// let cfg: llm::LlmConfig = toml_like(r#"{"protocol": "anthropic", "model": "claude-sonnet-4-5"}"#);
/// assert_eq!(cfg.base_url(), "https://api.anthropic.com");
/// assert_eq!(cfg.key_variable(), Some("ANTHROPIC_API_KEY"));
/// # fn toml_like(s: &str) -> llm::LlmConfig { serde_json::from_str(s).unwrap() }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// `openai` (chat completions, the default) or `anthropic` (messages).
    #[serde(default = "default_protocol")]
    pub protocol: Protocol,
    /// Endpoint root. OpenAI-compatible roots include the version (`http://127.0.0.1:8000/v1`);
    /// Anthropic roots do not (`https://api.anthropic.com`). Default: the provider's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model name sent with every request (or the value of `model_env`).
    #[serde(default)]
    pub model: String,
    /// The NAME of an environment variable holding the model name, instead of `model`: an
    /// experiment that names no model of its own (the caller reads the variable when it loads
    /// the experiment, [`LlmConfig::resolve_env`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_env: Option<String>,
    /// The NAME of an environment variable holding the endpoint root, instead of `base_url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url_env: Option<String>,
    /// A name that stands for the endpoint in response cache keys instead of `base_url`, so
    /// a cache recorded against a local server keeps hitting when the server comes back on
    /// another port (`"local-smollm2"`). Default: the base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_namespace: Option<String>,
    /// The NAME of the environment variable that holds the API key (never the key itself).
    /// Default: `OPENAI_API_KEY` or `ANTHROPIC_API_KEY` by protocol; `""` for no key (local
    /// servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Requests in flight at once, per client.
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: usize,
    /// Requests started per minute, per client (`0`: no limit). Retries count.
    #[serde(default)]
    pub requests_per_minute: u32,
    /// Seconds one attempt may take, from sending to the end of the body.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
    /// Retries after the first attempt on 429, 5xx, time-outs and broken connections.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Sampling temperature, unless a request sets its own.
    #[serde(default)]
    pub temperature: f32,
    /// Output token limit, unless a request sets its own.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// First backoff delay in milliseconds; doubles per retry, with jitter.
    #[serde(default = "default_backoff_initial_ms")]
    pub backoff_initial_ms: u64,
    /// Longest wait between attempts in seconds, for backoff and for a server's `Retry-After`.
    #[serde(default = "default_backoff_max_s")]
    pub backoff_max_s: f64,
    /// The run's spending limit in US dollars (`[llm] max_cost`; not read from a role's own
    /// table): a run stops starting requests before what it spent and has in flight would
    /// pass it (see [`crate::budget`]). Not part of any identity: it changes when a run stops,
    /// not its results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
}

fn default_protocol() -> Protocol {
    Protocol::Openai
}
fn default_max_concurrency() -> usize {
    4
}
fn default_timeout_s() -> f64 {
    120.0
}
fn default_max_retries() -> u32 {
    4
}
fn default_max_tokens() -> u32 {
    1_024
}
fn default_backoff_initial_ms() -> u64 {
    1_000
}
fn default_backoff_max_s() -> f64 {
    60.0
}

impl LlmConfig {
    /// A configuration with every default and `model`.
    pub fn new(protocol: Protocol, model: impl Into<String>) -> LlmConfig {
        LlmConfig {
            protocol,
            base_url: None,
            model: model.into(),
            model_env: None,
            base_url_env: None,
            cache_namespace: None,
            api_key_env: None,
            max_concurrency: default_max_concurrency(),
            requests_per_minute: 0,
            timeout_s: default_timeout_s(),
            max_retries: default_max_retries(),
            temperature: 0.0,
            max_tokens: default_max_tokens(),
            backoff_initial_ms: default_backoff_initial_ms(),
            backoff_max_s: default_backoff_max_s(),
            max_cost: None,
        }
    }
    /// The endpoint root, without a trailing slash.
    pub fn base_url(&self) -> &str {
        self.base_url.as_deref().unwrap_or(self.protocol.default_base_url()).trim_end_matches('/')
    }
    /// The name of the variable holding the key; `None` when no key is used.
    pub fn key_variable(&self) -> Option<&str> {
        match self.api_key_env.as_deref() {
            Some("") => None,
            Some(name) => Some(name),
            None => Some(match self.protocol {
                Protocol::Openai => "OPENAI_API_KEY",
                Protocol::Anthropic => "ANTHROPIC_API_KEY",
            }),
        }
    }
    /// The API key, looked up with `lookup` (the caller passes its environment: this crate
    /// never reads it). A variable named explicitly in `api_key_env` must be set and
    /// non-empty; the protocol's default variable may be missing (local servers need no key).
    pub fn resolve_key(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Secret>, ConfigError> {
        let Some(name) = self.key_variable() else { return Ok(None) };
        match lookup(name).filter(|v| !v.is_empty()) {
            Some(v) => Ok(Some(Secret::new(v))),
            None if self.api_key_env.is_some() => {
                Err(ConfigError { field: "api_key_env", problem: format!("environment variable {name} is not set") })
            }
            None => Ok(None),
        }
    }
    /// Fill `model` and `base_url` from the variables `model_env` and `base_url_env` name,
    /// looked up with `lookup` (the caller's environment). A variable named must be set and
    /// non-empty, and a field given both ways is an error.
    pub fn resolve_env(&mut self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let read = |field: &'static str, name: &str| {
            lookup(name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| v.trim().to_string())
                .ok_or_else(|| ConfigError { field, problem: format!("environment variable {name} is not set") })
        };
        if let Some(name) = self.model_env.clone() {
            if !self.model.is_empty() {
                return Err(ConfigError { field: "model_env", problem: "set model or model_env, not both".into() });
            }
            self.model = read("model_env", &name)?;
        }
        if let Some(name) = self.base_url_env.clone() {
            if self.base_url.is_some() {
                return Err(ConfigError {
                    field: "base_url_env",
                    problem: "set base_url or base_url_env, not both".into(),
                });
            }
            self.base_url = Some(read("base_url_env", &name)?);
        }
        Ok(())
    }
    /// Check the numbers; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &'static str, problem: &str| Err(ConfigError { field, problem: problem.to_string() });
        if self.model.trim().is_empty() {
            return bad("model", "must not be empty");
        }
        if self.max_concurrency == 0 {
            return bad("max_concurrency", "must be at least 1");
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return bad("timeout_s", "must be a positive number of seconds");
        }
        if !(self.temperature.is_finite() && (0.0..=2.0).contains(&self.temperature)) {
            return bad("temperature", "must be between 0 and 2");
        }
        if self.max_tokens == 0 {
            return bad("max_tokens", "must be at least 1");
        }
        if self.max_cost.is_some_and(|c| !(c.is_finite() && c >= 0.0)) {
            return bad("max_cost", "must be a non-negative number of US dollars");
        }
        if !(self.backoff_max_s.is_finite() && self.backoff_max_s >= 0.0) {
            return bad("backoff_max_s", "must be a non-negative number of seconds");
        }
        if self.cache_namespace.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return bad("cache_namespace", "must not be empty (leave it out to key the cache by base_url)");
        }
        let url = self.base_url();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return bad("base_url", "must start with http:// or https://");
        }
        Ok(())
    }
}

/// A field of [`LlmConfig`] with a value that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("llm.{field}: {problem}")]
pub struct ConfigError {
    pub field: &'static str,
    pub problem: String,
}

/// An API key. Its `Debug` and `Display` print `***`; only the transport reads it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The key itself, for the request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// `text` with every occurrence of the key replaced by `***`: in any case, with blanks
    /// (whitespace or zero-width characters) or punctuation between its characters or in
    /// place of its own (its dashes left out), reversed, any stretch of it as long as
    /// [`min_stretch`] (its tail alone), and encoded as hex, base64 (standard or URL-safe, at
    /// any alignment), URL percent-escapes or HTML character references, since an endpoint
    /// may echo it any of those ways. A key of fewer than four letters and digits is not
    /// searched for: it would match ordinary text.
    pub fn scrub(&self, text: &str) -> String {
        let key: Vec<char> = self.0.chars().filter(|c| c.is_alphanumeric()).collect();
        if key.len() < 4 {
            return text.to_string();
        }
        let mut text = text.to_string();
        for (needle, exact) in encodings(self.0.as_bytes()) {
            text = replace_all(&text, &needle, exact);
        }
        let reversed: Vec<char> = key.iter().rev().copied().collect();
        let stretch = min_stretch(key.len());
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let mut out = String::with_capacity(text.len());
        let (mut i, mut copied) = (0, 0);
        while i < chars.len() {
            let end = longest_match(&chars, i, &key, stretch).or_else(|| longest_match(&chars, i, &reversed, stretch));
            match end {
                Some(end) => {
                    out.push_str(&text[copied..chars[i].0]);
                    out.push_str("***");
                    copied = chars.get(end).map_or(text.len(), |(b, _)| *b);
                    i = end;
                }
                None => i += 1,
            }
        }
        out.push_str(&text[copied..]);
        out
    }
}

/// The shortest stretch of a key of `len` letters and digits that is scrubbed on its own: the
/// whole key when it is short, else at least 12 characters and at least half of it.
pub fn min_stretch(len: usize) -> usize {
    if len <= 12 {
        len
    } else {
        12.max(len.div_ceil(2))
    }
}

/// Characters an echo may put between a key's characters.
fn is_blank(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}')
}

/// Characters skipped between a key's letters and digits: blanks, and punctuation (the key's
/// own dashes, left out or replaced).
fn is_separator(c: char) -> bool {
    is_blank(c) || (c.is_ascii_punctuation() && c != '*')
}

/// The index after the longest stretch of `key` (of at least `stretch` characters, or the
/// whole key) starting at `chars[start]`, case-insensitive, separators allowed between its
/// characters.
fn longest_match(chars: &[(usize, char)], start: usize, key: &[char], stretch: usize) -> Option<usize> {
    let same = |a: char, b: char| a == b || a.to_lowercase().eq(b.to_lowercase());
    let first = chars.get(start)?.1;
    if !first.is_alphanumeric() {
        return None;
    }
    let mut best: Option<(usize, usize)> = None;
    for offset in 0..key.len() {
        if !same(first, key[offset]) || key.len() - offset < stretch.min(key.len()) {
            continue;
        }
        let (mut i, mut n, mut end) = (start, 0usize, start);
        for k in &key[offset..] {
            if n > 0 {
                while chars.get(i).is_some_and(|(_, c)| is_separator(*c)) {
                    i += 1;
                }
            }
            if !chars.get(i).is_some_and(|(_, c)| same(*c, *k)) {
                break;
            }
            i += 1;
            n += 1;
            end = i;
        }
        if n >= stretch.min(key.len()) && best.is_none_or(|(m, _)| n > m) {
            best = Some((n, end));
        }
    }
    best.map(|(_, end)| end)
}

/// The key's encodings an echo may carry, with whether each must match exactly (base64) or
/// in any case (hex, percent-escapes, character references).
fn encodings(key: &[u8]) -> Vec<(String, bool)> {
    let mut out = vec![
        (key.iter().map(|b| format!("{b:02x}")).collect::<String>(), false),
        (key.iter().map(|b| format!("%{b:02x}")).collect::<String>(), false),
        (key.iter().map(|b| format!("&#{b};")).collect::<String>(), false),
        (key.iter().map(|b| format!("&#x{b:x};")).collect::<String>(), false),
    ];
    // Base64 at each alignment in a longer encoded text: the characters that depend on the
    // key's bytes alone.
    for align in 0..3usize {
        let mut bytes = vec![0u8; align];
        bytes.extend_from_slice(key);
        let encoded = base64(&bytes, false);
        let skip = (align * 4).div_ceil(3);
        let full = bytes.len() * 8 / 6;
        if full > skip + 4 {
            let standard = encoded[skip..full].to_string();
            out.push((standard.replace('+', "-").replace('/', "_"), true));
            out.push((standard, true));
        }
    }
    out
}

/// Standard base64 (without padding when `pad` is false).
fn base64(bytes: &[u8], pad: bool) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
        if pad {
            out.push_str(&"=".repeat(3 - chunk.len()));
        }
    }
    out
}

/// `text` with every occurrence of `needle` (ASCII) replaced by `***`; in any case unless
/// `exact`.
fn replace_all(text: &str, needle: &str, exact: bool) -> String {
    if needle.is_empty() || text.len() < needle.len() {
        return text.to_string();
    }
    let (hay, pat) = if exact {
        (text.as_bytes().to_vec(), needle.as_bytes().to_vec())
    } else {
        (text.to_ascii_lowercase().into_bytes(), needle.to_ascii_lowercase().into_bytes())
    };
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied) = (0, 0);
    while i + pat.len() <= hay.len() {
        if hay[i..i + pat.len()] == pat[..] {
            // The needle is ASCII: its match starts and ends on character boundaries.
            out.push_str(&text[copied..i]);
            out.push_str("***");
            i += pat.len();
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_scrubbed_without_its_dashes_by_its_tail_and_encoded() {
        let key = Secret("sk-AbCd-1234".to_string());
        for echo in [
            "skAbCd1234",
            "sk_AbCd_1234",
            "736b2d416243642d31323334",
            "736B2D416243642D31323334",
            "c2stQWJDZC0xMjM0",
            "QmVhcmVyIHNrLUFiQ2QtMTIzNA==",
            "eHNrLUFiQ2QtMTIzNHk=",
            "%73%6b%2d%41%62%43%64%2d%31%32%33%34",
            "&#115;&#107;&#45;&#65;&#98;&#67;&#100;&#45;&#49;&#50;&#51;&#52;",
            "&#x73;&#x6b;&#x2d;&#x41;&#x62;&#x43;&#x64;&#x2d;&#x31;&#x32;&#x33;&#x34;",
        ] {
            let scrubbed = key.scrub(&format!("before {echo} after"));
            assert!(!scrubbed.contains(echo), "{echo:?}: {scrubbed}");
            assert!(
                scrubbed.contains("***") && scrubbed.starts_with("before ") && scrubbed.ends_with(" after"),
                "{scrubbed}"
            );
        }
        // A long key's tail alone (half of it and at least 12 characters) is the key.
        let long = Secret("sk-proj-0123456789abcdefghijKLMNOP".to_string());
        assert_eq!(long.scrub("tail: 89abcdefghijKLMNOP."), "tail: ***.");
        assert_eq!(long.scrub("short: KLMNOP."), "short: KLMNOP.", "a stretch shorter than the floor stays");
        assert_eq!(key.scrub("ordinary words stay as they are"), "ordinary words stay as they are");
    }

    #[test]
    fn the_key_is_scrubbed_in_every_case_spacing_and_reversed() {
        let key = Secret("sk-AbCd-1234".to_string());
        for echo in [
            "sk-AbCd-1234",
            "SK-ABCD-1234",
            "sk-abcd-1234",
            "s k - A b C d - 1 2 3 4",
            "sk-\tAb\nCd-12\u{200b}34",
            "4321-dCbA-ks",
            "4321-DCBA-KS",
        ] {
            let scrubbed = key.scrub(&format!("before {echo} after"));
            assert_eq!(scrubbed, "before *** after", "{echo:?}");
        }
        assert_eq!(key.scrub("sk-AbCd-123 and sk-abcd-1234sk-ABCD-1234"), "sk-AbCd-123 and ******");
        assert_eq!(key.scrub("ünïcode stays"), "ünïcode stays");
        assert_eq!(Secret("abc".into()).scrub("abc"), "abc", "a short key is not searched");
    }

    #[test]
    fn defaults_fill_everything_but_the_model() {
        let cfg: LlmConfig = serde_json::from_str(r#"{"model": "m"}"#).expect("valid");
        assert_eq!(cfg, LlmConfig::new(Protocol::Openai, "m"));
        assert_eq!(cfg.base_url(), "https://api.openai.com/v1");
        assert_eq!(cfg.key_variable(), Some("OPENAI_API_KEY"));
        assert!(cfg.validate().is_ok());
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = serde_json::from_str::<LlmConfig>(r#"{"model": "m", "api_key": "sk-1"}"#).expect_err("unknown");
        assert!(err.to_string().contains("api_key"), "{err}");
    }

    #[test]
    fn empty_key_variable_means_no_key_and_base_url_is_trimmed() {
        let cfg: LlmConfig =
            serde_json::from_str(r#"{"model": "m", "api_key_env": "", "base_url": "http://127.0.0.1:9/v1/"}"#)
                .expect("valid");
        assert_eq!(cfg.key_variable(), None);
        assert_eq!(cfg.base_url(), "http://127.0.0.1:9/v1");
    }

    #[test]
    fn validation_names_the_field() {
        let mut cfg = LlmConfig::new(Protocol::Anthropic, "m");
        cfg.max_concurrency = 0;
        assert_eq!(cfg.validate().expect_err("zero").field, "max_concurrency");
        let mut cfg = LlmConfig::new(Protocol::Anthropic, "m");
        cfg.timeout_s = 0.0;
        assert_eq!(cfg.validate().expect_err("zero").field, "timeout_s");
        let mut cfg = LlmConfig::new(Protocol::Anthropic, "m");
        cfg.base_url = Some("127.0.0.1:80".into());
        assert_eq!(cfg.validate().expect_err("scheme").field, "base_url");
    }

    #[test]
    fn keys_resolve_through_the_callers_lookup() {
        let named: LlmConfig = serde_json::from_str(r#"{"model": "m", "api_key_env": "MY_KEY"}"#).expect("valid");
        let key = named.resolve_key(|n| (n == "MY_KEY").then(|| "k-1".to_string())).expect("set");
        assert_eq!(key.map(|k| k.expose().to_string()), Some("k-1".to_string()));
        let err = named.resolve_key(|_| None).expect_err("missing");
        assert!(err.to_string().contains("MY_KEY"), "{err}");
        let default = LlmConfig::new(Protocol::Openai, "m");
        assert!(default.resolve_key(|_| None).expect("optional").is_none());
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("sk-very-secret");
        assert_eq!(format!("{s} {s:?}"), "*** ***");
        assert_eq!(s.expose(), "sk-very-secret");
    }
}
