//! The replay's settings that a run log records: the prefix-cache profile, the overflow
//! policy, prices, and the checkpoints probes are asked at.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// OpenAI caches prefixes of at least this many tokens...
pub const OPENAI_CACHE_MIN: u64 = 1_024;
/// ...in steps of this many tokens.
pub const OPENAI_CACHE_STEP: u64 = 128;
/// Anthropic's minimum cacheable prefix (Sonnet and Opus models).
pub const ANTHROPIC_CACHE_MIN: u64 = 1_024;

/// How the provider's prefix cache is modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheProfile {
    /// No prefix caching.
    None,
    /// OpenAI-style automatic prefix caching: a shared prefix of at least 1,024 tokens is
    /// cached, in 128-token steps.
    Openai,
    /// Anthropic-style: cached up to the last cache breakpoint the request shares.
    Anthropic,
}

/// What one request shares with the previous one, for the prefix cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrefixShare {
    /// Exact tokens of the longest shared prefix.
    pub shared_tokens: u64,
    /// Exact tokens of the previous request.
    pub previous_tokens: u64,
    /// The whole previous request is a prefix of this one.
    pub whole_previous: bool,
    /// Exact tokens of the previous request's system prompt, when it had one and it is shared.
    pub system_tokens: Option<u64>,
    /// When the strategy places its own cache breakpoints ([`compaction::Strategy::cache_breakpoints`]):
    /// exact tokens of the longest prefix of the previous request that ends at one of them and
    /// is shared (0 when none is). `None`: the default breakpoints (system prompt, request end).
    pub strategy_breakpoint: Option<u64>,
}

impl CacheProfile {
    /// The provider the profile names, whose refusals end a conversation (`None` names none).
    pub fn provider(self) -> Option<compaction::Provider> {
        match self {
            CacheProfile::None => None,
            CacheProfile::Openai => Some(compaction::Provider::OpenaiChat),
            CacheProfile::Anthropic => Some(compaction::Provider::AnthropicMessages),
        }
    }

    /// What a provider's refusal does under this profile, in words (the manifest's `refusals`).
    pub fn refusals(self) -> String {
        match self.provider() {
            Some(p) => format!(
                "{p}: a request it would refuse ends the conversation as an over-window request does; the other provider's refusals are reported only"
            ),
            None => "no provider named (cache = \"none\"): no refusal ends a conversation; both providers' refusals are reported only".to_string(),
        }
    }

    /// Tokens of a request served from the cache, given what it shares with the previous one.
    pub fn cached_tokens(self, share: &PrefixShare) -> u64 {
        match self {
            CacheProfile::None => 0,
            CacheProfile::Openai if share.shared_tokens >= OPENAI_CACHE_MIN => {
                share.shared_tokens / OPENAI_CACHE_STEP * OPENAI_CACHE_STEP
            }
            CacheProfile::Openai => 0,
            CacheProfile::Anthropic => {
                let breakpoint = match share.strategy_breakpoint {
                    Some(tokens) => tokens,
                    None if share.whole_previous => share.previous_tokens,
                    None => share.system_tokens.unwrap_or(0),
                };
                if breakpoint >= ANTHROPIC_CACHE_MIN {
                    breakpoint
                } else {
                    0
                }
            }
        }
    }
}

/// What a request over the window does (the experiment's `overflow` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverflowPolicy {
    /// The provider rejects it: the conversation ends at its first rejected call.
    #[default]
    Fail,
    /// The request proceeds, billed and scored (the replay's behaviour before rejected calls
    /// were counted; for diagnosis).
    Continue,
}

impl OverflowPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            OverflowPolicy::Fail => "fail",
            OverflowPolicy::Continue => "continue",
        }
    }
}

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input: f64,
    pub cached_input: f64,
    pub output: f64,
    /// Input tokens written to the prefix cache; `None`: priced as plain input (OpenAI has no
    /// write premium).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl Price {
    /// Dollars for `input` tokens of which `cached` were cached, and `output` tokens.
    pub fn cost(&self, input: u64, cached: u64, output: u64) -> f64 {
        self.cost_with_writes(input, cached, 0, output)
    }

    /// [`Price::cost`] with `written` of the uncached input tokens written to the cache.
    pub fn cost_with_writes(&self, input: u64, cached: u64, written: u64, output: u64) -> f64 {
        let per_million = |tokens: u64, usd: f64| tokens as f64 * usd / 1_000_000.0;
        let cached = cached.min(input);
        let written = written.min(input - cached);
        per_million(input - cached - written, self.input)
            + per_million(written, self.cache_write.unwrap_or(self.input))
            + per_million(cached, self.cached_input)
            + per_million(output, self.output)
    }
}

/// The percentages of a conversation's calls at which derived probes are asked.
pub const CHECKPOINTS: [u32; 4] = [25, 50, 75, 100];

/// One model of the price table.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PriceTable {
    pub(crate) input: f64,
    pub(crate) cached_input: f64,
    pub(crate) output: f64,
    #[serde(default)]
    pub(crate) cache_write_5m: Option<f64>,
    #[serde(default)]
    pub(crate) cache_write_1h: Option<f64>,
}

impl PriceTable {
    pub(crate) fn spec(&self, model: Option<String>, ttl: CacheTtl) -> PriceSpec {
        let cache_write = match ttl {
            CacheTtl::FiveMinutes => self.cache_write_5m,
            CacheTtl::OneHour => self.cache_write_1h,
        };
        PriceSpec { model, input: self.input, cached_input: self.cached_input, output: self.output, cache_write }
    }
}

/// `prices.toml`: `[models."gpt-4.1"]` tables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PriceFile {
    pub(crate) models: std::collections::BTreeMap<String, PriceTable>,
}

/// Read and parse a price table: the one parser of `prices.toml`, for the replayed model's
/// price and the LLM summarizer's own.
pub(crate) fn read_price_file(table_path: &Path) -> Result<PriceFile, (Option<std::io::Error>, String)> {
    let text = inputs::read_to_string(table_path, inputs::Kind::Settings).map_err(|e| {
        let e = e.into_io();
        let message = e.to_string();
        (Some(e), message)
    })?;
    toml::from_str(&text).map_err(|e: toml::de::Error| (None, e.to_string().trim().to_string()))
}

/// The price of `model` in the table at `path` as the LLM summarizer is charged (input, cached
/// input and output; no cache-write premium), or why there is none.
pub(crate) fn summarizer_price(path: &Path, model: &str) -> Result<Price, String> {
    model_price(path, "summarizer", model)
}

/// The price of the `role`'s `model` in the table at `path` (input, cached input and output;
/// no cache-write premium), or why there is none.
pub fn model_price(path: &Path, role: &str, model: &str) -> Result<Price, String> {
    let file = read_price_file(path).map_err(|(_, e)| format!("price table {}: {e}", path.display()))?;
    let p = file
        .models
        .get(model)
        .ok_or_else(|| format!("the {role} model {model:?} is not in the price table {}", path.display()))?;
    if [p.input, p.cached_input, p.output].iter().all(|v| v.is_finite() && *v >= 0.0) {
        Ok(Price { input: p.input, cached_input: p.cached_input, output: p.output, cache_write: None })
    } else {
        Err(format!("the {role} model {model:?} has a negative or missing price in {}", path.display()))
    }
}

/// A price: either a model looked up in the price table, or written inline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceSpec {
    /// The model name looked up in the price table; `None` when written inline.
    pub model: Option<String>,
    /// US dollars per million input tokens.
    pub input: f64,
    /// US dollars per million input tokens served from the prefix cache.
    pub cached_input: f64,
    /// US dollars per million output tokens.
    pub output: f64,
    /// US dollars per million input tokens written to the prefix cache, for the experiment's
    /// `cache_ttl`; `None`: writes cost plain input (no write premium, as with OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl PriceSpec {
    pub fn price(&self) -> Price {
        Price { input: self.input, cached_input: self.cached_input, output: self.output, cache_write: self.cache_write }
    }
}

/// How long the provider keeps a cache write (Anthropic: 5 minutes or 1 hour), which picks the
/// write price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CacheTtl {
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "1h")]
    OneHour,
}
