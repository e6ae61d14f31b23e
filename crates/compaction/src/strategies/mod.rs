//! The seventeen strategies: five from the seed documents, three baselines, nine production
//! systems (`PRODUCTION.md`, modules named after them, sharing [`prod`]); and the `recorded`
//! reference, which replays the compaction a recording contains ([`REFERENCE_NAMES`],
//! [`reference_catalog`]).
//!
//! Each strategy has one params struct with serde defaults taken from its document;
//! [`StrategyConfig`] names a strategy with its params and builds it after validation.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::strategy::Strategy;

pub mod anthropic_clear_tool_uses;
pub mod anthropic_compaction;
pub mod codex;
pub mod cut_point;
pub mod goose;
pub mod keep_last_n;
pub mod langchain_summarization;
pub mod letta;
pub mod none;
pub mod observation_mask;
pub mod opencode;
pub mod openhands;
pub mod openhands_masking;
pub mod priority_chain;
pub mod prod;
pub mod prune_then_summarize;
pub mod recorded;
pub mod split_fraction;
pub mod truncate;

/// A parameter value that is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{strategy}: parameter `{param}`: {problem}")]
pub struct ParamError {
    pub strategy: &'static str,
    pub param: &'static str,
    pub problem: String,
}

impl ParamError {
    pub fn new(strategy: &'static str, param: &'static str, problem: impl Into<String>) -> ParamError {
        ParamError { strategy, param, problem: problem.into() }
    }
}

/// A strategy named with its parameters, as written in an experiment file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum StrategyConfig {
    PriorityChain(priority_chain::Params),
    KeepLastN(keep_last_n::Params),
    CutPoint(cut_point::Params),
    SplitFraction(split_fraction::Params),
    PruneThenSummarize(prune_then_summarize::Params),
    None(none::Params),
    Truncate(truncate::Params),
    ObservationMask(observation_mask::Params),
    Opencode(opencode::Params),
    Codex(codex::Params),
    Goose(goose::Params),
    Openhands(openhands::Params),
    OpenhandsMasking(openhands_masking::Params),
    AnthropicClearToolUses(anthropic_clear_tool_uses::Params),
    AnthropicCompaction(anthropic_compaction::Params),
    LangchainSummarization(langchain_summarization::Params),
    Letta(letta::Params),
    /// The reference that replays a recording's own compaction (not one of [`NAMES`]).
    Recorded(recorded::Params),
}

/// References: configurations that replay what the recording did rather than a strategy of
/// their own. They are not in [`NAMES`] (the strategies) nor in [`catalog`].
pub const REFERENCE_NAMES: [&str; 1] = ["recorded"];

/// Every strategy name, in catalog order: the seeds, the baselines, then the production systems
/// ([`PRODUCTION_NAMES`]).
pub const NAMES: [&str; 17] = [
    "priority-chain",
    "keep-last-n",
    "cut-point",
    "split-fraction",
    "prune-then-summarize",
    "none",
    "truncate",
    "observation-mask",
    "opencode",
    "codex",
    "goose",
    "openhands",
    "openhands-masking",
    "anthropic-clear-tool-uses",
    "anthropic-compaction",
    "langchain-summarization",
    "letta",
];

/// The production systems of `PRODUCTION.md`, in catalog order (a suffix of [`NAMES`]).
pub const PRODUCTION_NAMES: [&str; 9] = [
    "opencode",
    "codex",
    "goose",
    "openhands",
    "openhands-masking",
    "anthropic-clear-tool-uses",
    "anthropic-compaction",
    "langchain-summarization",
    "letta",
];

/// A strategy's family: `seed` (the five documents in `seeds/`), `production` (the systems of
/// `PRODUCTION.md`), `baseline`, or `reference` (`recorded`). `None` for an unknown name.
pub fn family(name: &str) -> Option<&'static str> {
    Some(match name {
        "priority-chain" | "keep-last-n" | "cut-point" | "split-fraction" | "prune-then-summarize" => "seed",
        "none" | "truncate" | "observation-mask" => "baseline",
        "recorded" => "reference",
        n if PRODUCTION_NAMES.contains(&n) => "production",
        _ => return None,
    })
}

/// The families in report order.
pub const FAMILIES: [&str; 4] = ["seed", "production", "baseline", "reference"];

impl StrategyConfig {
    /// The strategy with its document's defaults.
    pub fn default_for(name: &str) -> Option<StrategyConfig> {
        Some(match name {
            "priority-chain" => StrategyConfig::PriorityChain(Default::default()),
            "keep-last-n" => StrategyConfig::KeepLastN(Default::default()),
            "cut-point" => StrategyConfig::CutPoint(Default::default()),
            "split-fraction" => StrategyConfig::SplitFraction(Default::default()),
            "prune-then-summarize" => StrategyConfig::PruneThenSummarize(Default::default()),
            "none" => StrategyConfig::None(Default::default()),
            "truncate" => StrategyConfig::Truncate(Default::default()),
            "observation-mask" => StrategyConfig::ObservationMask(Default::default()),
            "opencode" => StrategyConfig::Opencode(Default::default()),
            "codex" => StrategyConfig::Codex(Default::default()),
            "goose" => StrategyConfig::Goose(Default::default()),
            "openhands" => StrategyConfig::Openhands(Default::default()),
            "openhands-masking" => StrategyConfig::OpenhandsMasking(Default::default()),
            "anthropic-clear-tool-uses" => StrategyConfig::AnthropicClearToolUses(Default::default()),
            "anthropic-compaction" => StrategyConfig::AnthropicCompaction(Default::default()),
            "langchain-summarization" => StrategyConfig::LangchainSummarization(Default::default()),
            "letta" => StrategyConfig::Letta(Default::default()),
            "recorded" => StrategyConfig::Recorded(Default::default()),
            _ => return None,
        })
    }
    pub fn name(&self) -> &'static str {
        match self {
            StrategyConfig::PriorityChain(_) => "priority-chain",
            StrategyConfig::KeepLastN(_) => "keep-last-n",
            StrategyConfig::CutPoint(_) => "cut-point",
            StrategyConfig::SplitFraction(_) => "split-fraction",
            StrategyConfig::PruneThenSummarize(_) => "prune-then-summarize",
            StrategyConfig::None(_) => "none",
            StrategyConfig::Truncate(_) => "truncate",
            StrategyConfig::ObservationMask(_) => "observation-mask",
            StrategyConfig::Opencode(_) => "opencode",
            StrategyConfig::Codex(_) => "codex",
            StrategyConfig::Goose(_) => "goose",
            StrategyConfig::Openhands(_) => "openhands",
            StrategyConfig::OpenhandsMasking(_) => "openhands-masking",
            StrategyConfig::AnthropicClearToolUses(_) => "anthropic-clear-tool-uses",
            StrategyConfig::AnthropicCompaction(_) => "anthropic-compaction",
            StrategyConfig::LangchainSummarization(_) => "langchain-summarization",
            StrategyConfig::Letta(_) => "letta",
            StrategyConfig::Recorded(_) => "recorded",
        }
    }
    /// Validate the parameters and build the strategy.
    pub fn build(&self) -> Result<Box<dyn Strategy>, ParamError> {
        Ok(match self {
            StrategyConfig::PriorityChain(p) => Box::new(priority_chain::PriorityChain::new(p.clone())?),
            StrategyConfig::KeepLastN(p) => Box::new(keep_last_n::KeepLastN::new(p.clone())?),
            StrategyConfig::CutPoint(p) => Box::new(cut_point::CutPoint::new(p.clone())?),
            StrategyConfig::SplitFraction(p) => Box::new(split_fraction::SplitFraction::new(p.clone())?),
            StrategyConfig::PruneThenSummarize(p) => {
                Box::new(prune_then_summarize::PruneThenSummarize::new(p.clone())?)
            }
            StrategyConfig::None(p) => Box::new(none::NoCompaction::new(p.clone())?),
            StrategyConfig::Truncate(p) => Box::new(truncate::Truncate::new(p.clone())?),
            StrategyConfig::ObservationMask(p) => Box::new(observation_mask::ObservationMask::new(p.clone())?),
            StrategyConfig::Opencode(p) => Box::new(opencode::Opencode::new(p.clone())?),
            StrategyConfig::Codex(p) => Box::new(codex::Codex::new(p.clone())?),
            StrategyConfig::Goose(p) => Box::new(goose::Goose::new(p.clone())?),
            StrategyConfig::Openhands(p) => Box::new(openhands::Openhands::new(p.clone())?),
            StrategyConfig::OpenhandsMasking(p) => Box::new(openhands_masking::OpenhandsMasking::new(p.clone())?),
            StrategyConfig::AnthropicClearToolUses(p) => {
                Box::new(anthropic_clear_tool_uses::AnthropicClearToolUses::new(p.clone())?)
            }
            StrategyConfig::AnthropicCompaction(p) => {
                Box::new(anthropic_compaction::AnthropicCompaction::new(p.clone())?)
            }
            StrategyConfig::LangchainSummarization(p) => {
                Box::new(langchain_summarization::LangchainSummarization::new(p.clone())?)
            }
            StrategyConfig::Letta(p) => Box::new(letta::Letta::new(p.clone())?),
            StrategyConfig::Recorded(p) => Box::new(recorded::Recorded::new(p.clone())?),
        })
    }
    /// The parameters as a JSON object (for config ids and CSV).
    pub fn params_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.remove("name");
        }
        v
    }
}

/// One parameter of a strategy, for `compactbench strategies`.
#[derive(Debug, Clone, Serialize)]
pub struct ParamInfo {
    pub name: String,
    /// The JSON type: `integer`, `number`, `boolean` or `string`; an optional parameter adds
    /// `|null` (`integer|null`). An enumeration is a `string` with its values in `allowed`.
    #[serde(rename = "type")]
    pub ty: String,
    /// The values an enumeration accepts (empty for any other parameter).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    pub default: serde_json::Value,
    pub meaning: String,
}

/// A schema's types and enumeration values, following `$ref`s into `root`'s `$defs`.
#[derive(Debug, Default)]
struct TypeOf {
    types: Vec<String>,
    allowed: Vec<String>,
}

impl TypeOf {
    fn add_type(&mut self, t: &str) {
        if !self.types.iter().any(|x| x == t) {
            self.types.push(t.to_string());
        }
    }
    fn add_value(&mut self, v: &serde_json::Value) {
        let (ty, text) = match v {
            serde_json::Value::Null => ("null", None),
            serde_json::Value::Bool(b) => ("boolean", Some(b.to_string())),
            serde_json::Value::Number(n) => (if n.is_f64() { "number" } else { "integer" }, Some(n.to_string())),
            serde_json::Value::String(s) => ("string", Some(s.clone())),
            serde_json::Value::Array(_) => ("array", None),
            serde_json::Value::Object(_) => ("object", None),
        };
        self.add_type(ty);
        if let Some(t) = text.filter(|t| !self.allowed.contains(t)) {
            self.allowed.push(t);
        }
    }
    /// The catalog's spelling: the types joined by `|`, `null` last.
    fn ty(&self) -> String {
        let mut types: Vec<&str> = self.types.iter().map(String::as_str).filter(|t| *t != "null").collect();
        if types.is_empty() {
            types.push("object");
        }
        if self.types.iter().any(|t| t == "null") {
            types.push("null");
        }
        types.join("|")
    }
}

fn type_of(schema: &serde_json::Value, root: &serde_json::Value, out: &mut TypeOf, depth: usize) {
    if depth > 16 {
        return;
    }
    if let Some(target) = schema.get("$ref").and_then(|r| r.as_str()) {
        let def = target
            .strip_prefix("#/$defs/")
            .and_then(|name| root.get("$defs").and_then(|d| d.get(name)))
            .or_else(|| target.strip_prefix("#/definitions/").and_then(|n| root.get("definitions")?.get(n)));
        if let Some(def) = def {
            type_of(def, root, out, depth + 1);
        }
    }
    match schema.get("type") {
        Some(serde_json::Value::String(t)) => out.add_type(t),
        Some(serde_json::Value::Array(ts)) => ts.iter().filter_map(|t| t.as_str()).for_each(|t| out.add_type(t)),
        _ => {}
    }
    if let Some(c) = schema.get("const") {
        out.add_value(c);
    }
    if let Some(values) = schema.get("enum").and_then(|e| e.as_array()) {
        values.iter().for_each(|v| out.add_value(v));
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(alternatives) = schema.get(key).and_then(|a| a.as_array()) {
            alternatives.iter().for_each(|a| type_of(a, root, out, depth + 1));
        }
    }
}

/// A strategy's catalog entry.
#[derive(Debug, Clone, Serialize)]
pub struct StrategyInfo {
    pub name: &'static str,
    /// `seed`, `production`, `baseline` or `reference` (see [`family`]).
    pub family: &'static str,
    /// The seed document it implements, the production system's repository and path, or
    /// `baseline` / `reference`.
    pub source: &'static str,
    pub summary: &'static str,
    pub params: Vec<ParamInfo>,
}

fn params_of<T: JsonSchema + Serialize + Default>() -> Vec<ParamInfo> {
    let schema = schemars::schema_for!(T);
    let root = schema.as_value();
    let defaults = serde_json::to_value(T::default()).unwrap_or(serde_json::Value::Null);
    let props = root.get("properties").and_then(|p| p.as_object()).cloned().unwrap_or_default();
    props
        .iter()
        .map(|(name, p)| {
            let mut t = TypeOf::default();
            type_of(p, root, &mut t, 0);
            ParamInfo {
                name: name.clone(),
                ty: t.ty(),
                allowed: t.allowed,
                default: defaults.get(name).cloned().unwrap_or(serde_json::Value::Null),
                meaning: p.get("description").and_then(|d| d.as_str()).unwrap_or("").to_string(),
            }
        })
        .collect()
}

/// Every strategy with its source document and parameters.
pub fn catalog() -> Vec<StrategyInfo> {
    vec![
        StrategyInfo {
            name: "priority-chain",
            family: "seed",
            source: "000_2fac289758ab7930.txt",
            summary: priority_chain::SUMMARY,
            params: params_of::<priority_chain::Params>(),
        },
        StrategyInfo {
            name: "keep-last-n",
            family: "seed",
            source: "001_de18f529e65eee2b.txt",
            summary: keep_last_n::SUMMARY,
            params: params_of::<keep_last_n::Params>(),
        },
        StrategyInfo {
            name: "cut-point",
            family: "seed",
            source: "002_42c9180b380c45a6.txt",
            summary: cut_point::SUMMARY,
            params: params_of::<cut_point::Params>(),
        },
        StrategyInfo {
            name: "split-fraction",
            family: "seed",
            source: "003_3df80400101a2bd6.txt",
            summary: split_fraction::SUMMARY,
            params: params_of::<split_fraction::Params>(),
        },
        StrategyInfo {
            name: "prune-then-summarize",
            family: "seed",
            source: "004_147aab84aa2c9315.txt",
            summary: prune_then_summarize::SUMMARY,
            params: params_of::<prune_then_summarize::Params>(),
        },
        StrategyInfo {
            name: "none",
            family: "baseline",
            source: "baseline",
            summary: none::SUMMARY,
            params: params_of::<none::Params>(),
        },
        StrategyInfo {
            name: "truncate",
            family: "baseline",
            source: "baseline",
            summary: truncate::SUMMARY,
            params: params_of::<truncate::Params>(),
        },
        StrategyInfo {
            name: "observation-mask",
            family: "baseline",
            source: "baseline",
            summary: observation_mask::SUMMARY,
            params: params_of::<observation_mask::Params>(),
        },
        StrategyInfo {
            name: "opencode",
            family: "production",
            source: "sst/opencode packages/opencode/src/session/compaction.ts (31e22f65)",
            summary: opencode::SUMMARY,
            params: params_of::<opencode::Params>(),
        },
        StrategyInfo {
            name: "codex",
            family: "production",
            source: "openai/codex codex-rs/core/src/compact.rs",
            summary: codex::SUMMARY,
            params: params_of::<codex::Params>(),
        },
        StrategyInfo {
            name: "goose",
            family: "production",
            source: "block/goose crates/goose/src/context_mgmt/mod.rs",
            summary: goose::SUMMARY,
            params: params_of::<goose::Params>(),
        },
        StrategyInfo {
            name: "openhands",
            family: "production",
            source: "OpenHands/software-agent-sdk openhands-sdk/openhands/sdk/context/condenser/llm_summarizing_condenser.py",
            summary: openhands::SUMMARY,
            params: params_of::<openhands::Params>(),
        },
        StrategyInfo {
            name: "openhands-masking",
            family: "production",
            source: "OpenHands/OpenHands openhands/memory/condenser/impl/observation_masking_condenser.py",
            summary: openhands_masking::SUMMARY,
            params: params_of::<openhands_masking::Params>(),
        },
        StrategyInfo {
            name: "anthropic-clear-tool-uses",
            family: "production",
            source: "Anthropic API docs: context editing, clear_tool_uses_20250919",
            summary: anthropic_clear_tool_uses::SUMMARY,
            params: params_of::<anthropic_clear_tool_uses::Params>(),
        },
        StrategyInfo {
            name: "anthropic-compaction",
            family: "production",
            source: "Anthropic API docs: compaction, compact_20260112",
            summary: anthropic_compaction::SUMMARY,
            params: params_of::<anthropic_compaction::Params>(),
        },
        StrategyInfo {
            name: "langchain-summarization",
            family: "production",
            source: "langchain-ai/langchain libs/langchain_v1/langchain/agents/middleware/summarization.py",
            summary: langchain_summarization::SUMMARY,
            params: params_of::<langchain_summarization::Params>(),
        },
        StrategyInfo {
            name: "letta",
            family: "production",
            source: "letta-ai/letta letta/services/summarizer/summarizer_sliding_window.py",
            summary: letta::SUMMARY,
            params: params_of::<letta::Params>(),
        },
    ]
}

/// The references ([`REFERENCE_NAMES`]) with their parameters.
pub fn reference_catalog() -> Vec<StrategyInfo> {
    vec![StrategyInfo {
        name: "recorded",
        family: "reference",
        source: "reference",
        summary: recorded::SUMMARY,
        params: params_of::<recorded::Params>(),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(strategy: &str, name: &str) -> ParamInfo {
        let info = catalog().into_iter().find(|s| s.name == strategy).expect("in the catalog");
        info.params.into_iter().find(|p| p.name == name).expect("a parameter of the strategy")
    }

    #[test]
    fn enum_params_are_strings_with_their_values() {
        let mode = param("priority-chain", "mode");
        assert_eq!(mode.ty, "string");
        assert_eq!(mode.allowed, ["auto", "paper", "general"]);
        let check = param("priority-chain", "prune_check");
        assert_eq!(check.allowed, ["before_chain", "after_chain"]);
        let counter = param("truncate", "counter");
        assert_eq!(counter.ty, "string");
        assert_eq!(counter.allowed, ["o200k_base", "cl100k_base", "chars/4"]);
    }

    #[test]
    fn optional_params_are_nullable_and_plain_ones_are_not() {
        assert_eq!(param("truncate", "max_tokens").ty, "integer|null");
        assert_eq!(param("cut-point", "keep_recent_tokens").ty, "integer|null");
        assert_eq!(param("prune-then-summarize", "approaching_ratio").ty, "number|null");
        let plain = param("keep-last-n", "recent_messages_to_keep");
        assert_eq!(plain.ty, "integer");
        assert!(plain.allowed.is_empty());
        assert_eq!(param("cut-point", "trigger_ratio").ty, "number");
        assert_eq!(param("priority-chain", "keep_tool_pairs").ty, "boolean");
        assert_eq!(param("observation-mask", "placeholder").ty, "string");
    }

    #[test]
    fn every_catalog_type_is_resolved() {
        for s in catalog() {
            for p in &s.params {
                assert!(!p.ty.contains("object") && !p.ty.contains('['), "{}.{}: type {}", s.name, p.name, p.ty);
            }
        }
    }
}
