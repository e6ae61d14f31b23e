//! The replay's settings that a run log records: the prefix-cache profile, the overflow
//! policy, prices, and the checkpoints probes are asked at.

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
