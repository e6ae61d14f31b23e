//! The strategy catalog over the `compaction` kernel: five strategies from the seed documents,
//! three baselines, ten production systems (`PRODUCTION.md`, modules named after them); and
//! the `recorded` reference, which replays the compaction a recording contains
//! ([`REFERENCE_NAMES`], [`reference_catalog`]).
//!
//! Each strategy is one module that owns its parameters (one params struct with serde defaults
//! taken from its document), its source header, its rules and its summary prompts (Markdown
//! files in a folder named after the module, included at compile time, listed by the module's
//! `prompts()`); what several share is in
//! [`common`], and no strategy module imports another. [`StrategyConfig`] names a strategy
//! with its params and builds it after validation. Adding a strategy is its module plus one
//! row of the catalog below.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use compaction::Strategy;

pub use common::ParamError;

pub mod anthropic_clear_tool_uses;
pub mod anthropic_compaction;
pub mod codex;
pub mod common;
pub mod cut_point;
pub mod gemini_cli;
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
pub mod prune_then_summarize;
pub mod recorded;
pub mod split_fraction;
pub mod truncate;

/// Counts its arguments (for the catalog's array lengths).
macro_rules! count {
    () => { 0 };
    ($head:tt $($tail:tt)*) => { 1 + count!($($tail)*) };
}

/// The strategy catalog, written once: each row names the config variant, the strategy's name,
/// its module and type, and its source. From these rows come [`StrategyConfig`], [`NAMES`],
/// [`PRODUCTION_NAMES`], [`REFERENCE_NAMES`], [`family`], [`StrategyConfig::default_for`],
/// [`StrategyConfig::name`], [`StrategyConfig::build`], [`catalog`], [`prompts`] and [`reference_catalog`], so
/// a strategy is added in one place.
macro_rules! strategy_catalog {
    (
        seed { $( $sv:ident => $sn:literal, $sm:ident :: $st:ident, $ss:literal; )* }
        baseline { $( $bv:ident => $bn:literal, $bm:ident :: $bt:ident; )* }
        production { $( $pv:ident => $pn:literal, $pm:ident :: $pt:ident, $ps:literal; )* }
        reference { $( $rv:ident => $rn:literal, $rm:ident :: $rt:ident; )* }
    ) => {
        /// A strategy named with its parameters, as written in an experiment file.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "name", rename_all = "kebab-case")]
        pub enum StrategyConfig {
            $( #[doc = concat!("`", $sn, "`")] $sv($sm::Params), )*
            $( #[doc = concat!("`", $bn, "`")] $bv($bm::Params), )*
            $( #[doc = concat!("`", $pn, "`")] $pv($pm::Params), )*
            $( #[doc = concat!("`", $rn, "`: a reference, not one of [`NAMES`]")] $rv($rm::Params), )*
        }

        /// Every strategy name, in catalog order: the seeds, the baselines, then the production
        /// systems ([`PRODUCTION_NAMES`]).
        pub const NAMES: [&str; count!($($sn)* $($bn)* $($pn)*)] = [$($sn,)* $($bn,)* $($pn,)*];

        /// The production systems of `PRODUCTION.md`, in catalog order (a suffix of [`NAMES`]).
        pub const PRODUCTION_NAMES: [&str; count!($($pn)*)] = [$($pn,)*];

        /// References: configurations that replay what the recording did rather than a strategy
        /// of their own. They are not in [`NAMES`] (the strategies) nor in [`catalog`].
        pub const REFERENCE_NAMES: [&str; count!($($rn)*)] = [$($rn,)*];

        /// A strategy's family: `seed` (the five documents in `seeds/`), `production` (the
        /// systems of `PRODUCTION.md`), `baseline`, or `reference` (`recorded`). `None` for an
        /// unknown name.
        pub fn family(name: &str) -> Option<&'static str> {
            Some(match name {
                $( $sn => "seed", )*
                $( $bn => "baseline", )*
                $( $pn => "production", )*
                $( $rn => "reference", )*
                _ => return None,
            })
        }

        impl StrategyConfig {
            /// The strategy with its document's defaults.
            pub fn default_for(name: &str) -> Option<StrategyConfig> {
                Some(match name {
                    $( $sn => StrategyConfig::$sv(Default::default()), )*
                    $( $bn => StrategyConfig::$bv(Default::default()), )*
                    $( $pn => StrategyConfig::$pv(Default::default()), )*
                    $( $rn => StrategyConfig::$rv(Default::default()), )*
                    _ => return None,
                })
            }

            /// The strategy's name.
            pub fn name(&self) -> &'static str {
                match self {
                    $( StrategyConfig::$sv(_) => $sn, )*
                    $( StrategyConfig::$bv(_) => $bn, )*
                    $( StrategyConfig::$pv(_) => $pn, )*
                    $( StrategyConfig::$rv(_) => $rn, )*
                }
            }

            /// Validate the parameters and build the strategy.
            pub fn build(&self) -> Result<Box<dyn Strategy>, ParamError> {
                Ok(match self {
                    $( StrategyConfig::$sv(p) => Box::new($sm::$st::new(p.clone())?), )*
                    $( StrategyConfig::$bv(p) => Box::new($bm::$bt::new(p.clone())?), )*
                    $( StrategyConfig::$pv(p) => Box::new($pm::$pt::new(p.clone())?), )*
                    $( StrategyConfig::$rv(p) => Box::new($rm::$rt::new(p.clone())?), )*
                })
            }
        }

        /// Every strategy with its source document and parameters.
        pub fn catalog() -> Vec<StrategyInfo> {
            vec![
                $( StrategyInfo { name: $sn, family: "seed", source: $ss, summary: $sm::SUMMARY, params: params_of::<$sm::Params>() }, )*
                $( StrategyInfo { name: $bn, family: "baseline", source: "baseline", summary: $bm::SUMMARY, params: params_of::<$bm::Params>() }, )*
                $( StrategyInfo { name: $pn, family: "production", source: $ps, summary: $pm::SUMMARY, params: params_of::<$pm::Params>() }, )*
            ]
        }

        /// Every summary prompt of the catalog with its strategy's name, in catalog order (a
        /// strategy's module lists its own in `prompts()`; the references have none).
        pub fn prompts() -> Vec<(&'static str, compaction::Prompt)> {
            let mut out = Vec::new();
            $( out.extend($sm::prompts().into_iter().map(|p| ($sn, p))); )*
            $( out.extend($bm::prompts().into_iter().map(|p| ($bn, p))); )*
            $( out.extend($pm::prompts().into_iter().map(|p| ($pn, p))); )*
            $( out.extend($rm::prompts().into_iter().map(|p| ($rn, p))); )*
            out
        }

        /// The references ([`REFERENCE_NAMES`]) with their parameters.
        pub fn reference_catalog() -> Vec<StrategyInfo> {
            vec![
                $( StrategyInfo { name: $rn, family: "reference", source: "reference", summary: $rm::SUMMARY, params: params_of::<$rm::Params>() }, )*
            ]
        }
    };
}

/// The catalog's rows, handed to `$callback!`: `strategy_catalog!` here, and any test suite
/// that writes one test per strategy (`tests/it/conformance.rs`), so a strategy is added in
/// one row and every such suite covers it.
#[macro_export]
macro_rules! catalog_rows {
    ($callback:ident) => {
        $callback! {
            seed {
                PriorityChain => "priority-chain", priority_chain::PriorityChain, "000_2fac289758ab7930.txt";
                KeepLastN => "keep-last-n", keep_last_n::KeepLastN, "001_de18f529e65eee2b.txt";
                CutPoint => "cut-point", cut_point::CutPoint, "002_42c9180b380c45a6.txt";
                SplitFraction => "split-fraction", split_fraction::SplitFraction, "003_3df80400101a2bd6.txt";
                PruneThenSummarize => "prune-then-summarize", prune_then_summarize::PruneThenSummarize, "004_147aab84aa2c9315.txt";
            }
            baseline {
                None => "none", none::NoCompaction;
                Truncate => "truncate", truncate::Truncate;
                ObservationMask => "observation-mask", observation_mask::ObservationMask;
            }
            production {
                Opencode => "opencode", opencode::Opencode, "sst/opencode packages/opencode/src/session/compaction.ts (31e22f65)";
                Codex => "codex", codex::Codex, "openai/codex codex-rs/core/src/compact.rs";
                Goose => "goose", goose::Goose, "block/goose crates/goose/src/context_mgmt/mod.rs";
                Openhands => "openhands", openhands::Openhands, "OpenHands/software-agent-sdk openhands-sdk/openhands/sdk/context/condenser/llm_summarizing_condenser.py";
                OpenhandsMasking => "openhands-masking", openhands_masking::OpenhandsMasking, "OpenHands/OpenHands openhands/memory/condenser/impl/observation_masking_condenser.py";
                AnthropicClearToolUses => "anthropic-clear-tool-uses", anthropic_clear_tool_uses::AnthropicClearToolUses, "Anthropic API docs: context editing, clear_tool_uses_20250919";
                AnthropicCompaction => "anthropic-compaction", anthropic_compaction::AnthropicCompaction, "Anthropic API docs: compaction, compact_20260112";
                LangchainSummarization => "langchain-summarization", langchain_summarization::LangchainSummarization, "langchain-ai/langchain libs/langchain_v1/langchain/agents/middleware/summarization.py";
                Letta => "letta", letta::Letta, "letta-ai/letta letta/services/summarizer/summarizer_sliding_window.py";
                GeminiCli => "gemini-cli", gemini_cli::GeminiCli, "google-gemini/gemini-cli packages/core/src/context/chatCompressionService.ts (5411f113)";
            }
            reference {
                Recorded => "recorded", recorded::Recorded;
            }
        }
    };
}

catalog_rows!(strategy_catalog);

/// The families in report order.
pub const FAMILIES: [&str; 4] = ["seed", "production", "baseline", "reference"];

impl StrategyConfig {
    /// The parameters as a JSON object (for config ids and CSV).
    pub fn params_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.remove("name");
        }
        v
    }
}

/// One parameter of a strategy, for `compactlens strategies`.
#[derive(Debug, Clone, Serialize)]
pub struct ParamInfo {
    /// The parameter's key in an experiment table.
    pub name: String,
    /// The JSON type: `integer`, `number`, `boolean` or `string`; an optional parameter adds
    /// `|null` (`integer|null`). An enumeration is a `string` with its values in `allowed`.
    #[serde(rename = "type")]
    pub ty: String,
    /// The values an enumeration accepts (empty for any other parameter).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// Its default value.
    pub default: serde_json::Value,
    /// What it means, in words.
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
    /// The strategy's name in experiment files.
    pub name: &'static str,
    /// `seed`, `production`, `baseline` or `reference` (see [`family`]).
    pub family: &'static str,
    /// The seed document it implements, the production system's repository and path, or
    /// `baseline` / `reference`.
    pub source: &'static str,
    /// One line: what it does.
    pub summary: &'static str,
    /// Its parameters.
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
