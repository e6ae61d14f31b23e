//! The LLM settings of an experiment as written and resolved: which role uses a model, its
//! endpoint (`llm::LlmConfig`, never the key's value), the prompt file, the cache; and what the
//! roles did in a run (`run.json`'s `llm` section). Building the summarizer and judge from these
//! is the runner's (`runner::llm_setup`).
//!
//! An experiment chooses a model per role with `summarizer = "llm"` / `judge = "llm"` /
//! `next_action = "llm"` and an `[llm]` table, or per role with a `[summarizer]` / `[judge]` /
//! `[next_action]` table (`kind = "llm"`) holding its own `[summarizer.llm]` / `[judge.llm]` /
//! `[next_action.llm]` endpoint (TOML cannot give a key both a string and
//! a table, so the per-role form is a table). `judge_repeats`, `cache_mode` and `cache_dir` are
//! top-level keys. See `experiments/README.md`.

use std::fmt;
use std::path::{Path, PathBuf};

use llm::cache::CacheMode;
use llm::{ClientStats, LlmConfig};
use serde::{Deserialize, Serialize};

use crate::settings::Price;

/// The default response cache folder, relative to the experiment file.
pub const DEFAULT_CACHE_DIR: &str = "llm-cache";

/// What a run does when a model request fails at its endpoint after every retry (see
/// [`llm::LlmError::is_endpoint_fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnLlmError {
    /// The pair fails (a resume runs it again): the outage is never scored as the strategy's.
    #[default]
    Fail,
    /// The strategy's failure path runs and the probe is unscored, as for the model's own
    /// failures.
    Fallback,
}

/// How the LLM judge asks its grader for a parseable verdict (`[judge] verdict_format`). By
/// default the grading prompt alone asks for the JSON object; a small model often answers in
/// prose, and such a verdict is unscored. A format constrains the answer to the verdict's
/// schema at the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictFormat {
    /// OpenAI's structured outputs: `response_format = {"type": "json_schema", ...}`, strict.
    JsonSchema,
    /// `response_format = {"type": "json_object", "schema": ...}`, as llama.cpp's server and
    /// llama-cpp-python take a schema (a grammar built from it).
    JsonObject,
}

impl VerdictFormat {
    /// The `response_format` object for a verdict of these integer fields (each 0 to 5) and a
    /// `rationale` string, in that order.
    pub fn response_format(self, fields: &[&str]) -> serde_json::Value {
        use serde_json::{json, Map, Value};
        let mut properties = Map::new();
        for f in fields {
            properties.insert((*f).to_string(), json!({"type": "integer", "enum": [0, 1, 2, 3, 4, 5]}));
        }
        let mut required: Vec<Value> = fields.iter().map(|f| json!(f)).collect();
        required.push(json!("rationale"));
        // Per fact: stated or not, and the passage of the context that states it.
        let fact = json!({"type": "object", "properties": {"stated": {"type": "boolean"}, "quote": {"type": "string"}},
            "required": ["stated", "quote"], "additionalProperties": false});
        properties.insert("facts".into(), json!({"type": "array", "items": fact}));
        match self {
            VerdictFormat::JsonSchema => {
                properties.insert("rationale".into(), json!({"type": "string"}));
                required.push(json!("facts"));
                let schema = json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
                json!({"type": "json_schema", "json_schema": {"name": "verdict", "strict": true, "schema": schema}})
            }
            VerdictFormat::JsonObject => {
                // A bound on the rationale keeps a small model from running out of output
                // tokens inside it (a cut verdict does not parse).
                properties.insert("rationale".into(), json!({"type": "string", "maxLength": 200}));
                let schema = json!({"type": "object", "properties": properties, "required": required});
                json!({"type": "json_object", "schema": schema})
            }
        }
    }
}

/// What an experiment says about models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmSettings {
    /// The LLM summarizer's endpoint (`[summarizer.llm]`, else `[llm]`); `None` when the
    /// summarizer is offline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<LlmConfig>,
    /// A custom summary prompt file, relative to the experiment file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_file: Option<String>,
    /// A hash of the custom prompt file's text (what enters configuration ids, so an edited
    /// prompt is a new configuration and a moved one is not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_hash: Option<String>,
    /// The LLM judge's endpoint (`[judge.llm]`, else `[llm]`); `None` when the judge is offline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<LlmConfig>,
    /// How many times the LLM judge grades each answer.
    pub judge_repeats: u32,
    /// `[judge] verdict_format`: how the grader is held to the verdict's schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_verdict_format: Option<VerdictFormat>,
    pub cache_mode: CacheMode,
    /// `on_llm_error`: what an endpoint failure does to a pair.
    #[serde(default)]
    pub on_llm_error: OnLlmError,
    /// The response cache folder, relative to the experiment file.
    pub cache_dir: String,
    /// The LLM summarizer model's price from the price table, when the experiment sets a
    /// `price` and the table has the model; `None` prices its tokens like the replayed model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer_price: Option<Price>,
    /// Why the summarizer's tokens are priced at the replayed model's price, when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer_price_note: Option<String>,
    /// The next-action model's endpoint (`[next_action.llm]`, else `[llm]`); `None` when
    /// next-action agreement is not measured (`next_action = "offline"`, the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<LlmConfig>,
    /// `[llm] max_cost`: the run's spending limit in US dollars, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// The price table the roles' models are looked up in (the experiment's `prices`, else
    /// `prices.toml` beside it), for a dry run's estimate and a budget. Not recorded.
    #[serde(skip)]
    pub price_table: Option<PathBuf>,
}

/// A role that calls a model, in the order a run's account lists them.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRole {
    /// `summarizer`, `judge`, ...
    pub role: &'static str,
    pub config: LlmConfig,
    /// What its tokens cost, or why that is not known.
    pub price: Result<Price, String>,
}

impl LlmSettings {
    /// Every role that calls a model, with its endpoint and price: the summarizer at its own
    /// price, the judge at its model's, each looked up in the price table; a model the table
    /// does not have is an `Err` saying so (never a price of zero).
    pub fn model_roles(&self) -> Vec<ModelRole> {
        let lookup = |role: &'static str, cfg: &LlmConfig| -> Result<Price, String> {
            match &self.price_table {
                Some(table) => crate::settings::model_price(table, role, &cfg.model),
                None => Err(format!("no price table to look the {role} model {:?} up in", cfg.model)),
            }
        };
        let mut roles = Vec::new();
        if let Some(cfg) = &self.summarizer {
            let price = match self.summarizer_price {
                Some(p) => Ok(p),
                None => lookup("summarizer", cfg),
            };
            roles.push(ModelRole { role: "summarizer", config: cfg.clone(), price });
        }
        if let Some(cfg) = &self.judge {
            roles.push(ModelRole { role: "judge", config: cfg.clone(), price: lookup("judge", cfg) });
        }
        if let Some(cfg) = &self.next_action {
            roles.push(ModelRole { role: "next_action", config: cfg.clone(), price: lookup("next_action", cfg) });
        }
        roles
    }
}

impl LlmSettings {
    /// What enters every configuration id: the endpoints' identity (protocol, base URL, model,
    /// temperature, output limit), the custom prompt's text (as a hash, not its path), the
    /// repeats and the summarizer's own price; not the limits, retries, key variable, cache
    /// mode or cache namespace, which do not change results.
    pub fn identity(&self) -> serde_json::Value {
        let endpoint = |c: &Option<LlmConfig>| {
            c.as_ref().map(|c| {
                serde_json::json!({
                    "protocol": c.protocol,
                    "base_url": c.base_url(),
                    "model": c.model,
                    "temperature": format!("{}", c.temperature),
                    "max_tokens": c.max_tokens,
                })
            })
        };
        let mut id = serde_json::json!({
            "summarizer": endpoint(&self.summarizer),
            "prompt_file": self.prompt_hash.as_ref().or(self.prompt_file.as_ref()),
            "judge": endpoint(&self.judge),
            "judge_repeats": self.judge_repeats,
        });
        if let Some(p) = &self.summarizer_price {
            id["summarizer_price"] = serde_json::json!(p);
        }
        if let Some(f) = self.judge_verdict_format {
            id["judge_verdict_format"] = serde_json::json!(f);
        }
        // Only present when measured, so the ids of experiments without it stay as they were.
        if self.next_action.is_some() {
            id["next_action"] = serde_json::json!(endpoint(&self.next_action));
        }
        id
    }
}

/// One role as written: `"offline"`, `"llm"`, or a table. Read by [`summarizer_role`] and
/// [`judge_role`], whose errors name the table and the key (`[summarizer]: unknown key
/// `promt_file``) where an untagged enum would only say that no variant matched.
#[derive(Debug, Clone)]
pub(crate) enum RawRole {
    Name(String),
    Table(Box<RawRoleTable>),
}

#[derive(Debug, Clone)]
pub(crate) struct RawRoleTable {
    kind: String,
    llm: Option<LlmConfig>,
    prompt_file: Option<String>,
    verdict_format: Option<VerdictFormat>,
}

struct RoleVisitor(&'static str);

impl<'de> serde::de::Visitor<'de> for RoleVisitor {
    type Value = RawRole;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"offline\", \"llm\", or a [{}] table with `kind`", self.0)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawRole, E> {
        Ok(RawRole::Name(v.to_string()))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RawRole, A::Error> {
        use serde::de::Error;
        let role = self.0;
        let (mut kind, mut llm, mut prompt_file, mut verdict_format) = (None, None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "kind" => {
                    kind =
                        Some(map.next_value::<String>().map_err(|e| A::Error::custom(format!("[{role}] kind: {e}")))?)
                }
                "llm" => {
                    llm = Some(
                        map.next_value::<LlmConfig>().map_err(|e| A::Error::custom(format!("[{role}.llm]: {e}")))?,
                    )
                }
                "prompt_file" => {
                    prompt_file = Some(
                        map.next_value::<String>()
                            .map_err(|e| A::Error::custom(format!("[{role}] prompt_file: {e}")))?,
                    )
                }
                "verdict_format" => {
                    verdict_format = Some(
                        map.next_value::<VerdictFormat>()
                            .map_err(|e| A::Error::custom(format!("[{role}] verdict_format: {e}")))?,
                    )
                }
                other => {
                    return Err(A::Error::custom(format!(
                        "[{role}]: unknown key `{other}` (allowed: kind, llm, prompt_file, verdict_format)"
                    )))
                }
            }
        }
        let kind = kind.ok_or_else(|| A::Error::custom(format!("[{role}]: missing key `kind` (offline or llm)")))?;
        Ok(RawRole::Table(Box::new(RawRoleTable { kind, llm, prompt_file, verdict_format })))
    }
}

/// Read the `summarizer` key (a name or a table).
pub(crate) fn summarizer_role<'de, D: serde::Deserializer<'de>>(d: D) -> Result<RawRole, D::Error> {
    d.deserialize_any(RoleVisitor("summarizer"))
}

/// Read the `judge` key (a name or a table).
pub(crate) fn judge_role<'de, D: serde::Deserializer<'de>>(d: D) -> Result<RawRole, D::Error> {
    d.deserialize_any(RoleVisitor("judge"))
}

/// Read the `next_action` key (a name or a table).
pub(crate) fn next_action_role<'de, D: serde::Deserializer<'de>>(d: D) -> Result<RawRole, D::Error> {
    d.deserialize_any(RoleVisitor("next_action"))
}

impl Default for RawRole {
    fn default() -> RawRole {
        RawRole::Name("offline".into())
    }
}

/// The LLM keys of the experiment file as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawLlm {
    pub summarizer: RawRole,
    pub judge: RawRole,
    pub next_action: RawRole,
    pub llm: Option<LlmConfig>,
    pub judge_repeats: Option<u32>,
    pub cache_mode: Option<CacheMode>,
    pub on_llm_error: Option<OnLlmError>,
    pub cache_dir: Option<String>,
    /// The price table, when the experiment prices its calls (`price` is set): the LLM
    /// summarizer's model is looked up in it.
    pub price_table: Option<PathBuf>,
    /// The price table the experiment names (`prices`) or the default beside it, whether or
    /// not `price` is set: where a dry run and a budget look every role's model up.
    pub prices_file: Option<PathBuf>,
}

/// A bad LLM key: (key, problem).
pub(crate) type KeyProblem = (String, String);

/// Check the LLM keys and resolve each role. `base` is the experiment file's folder.
pub(crate) fn resolve(
    raw: RawLlm,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(SummarizerSpec, JudgeSpec, Option<LlmSettings>), KeyProblem> {
    let problem = |key: &str, p: String| (key.to_string(), p);
    let (s_kind, s_llm, prompt_file, s_format) = match raw.summarizer {
        RawRole::Name(n) => (n, None, None, None),
        RawRole::Table(t) => {
            let t = *t;
            (t.kind, t.llm, t.prompt_file, t.verdict_format)
        }
    };
    let (j_kind, j_llm, j_prompt, verdict_format) = match raw.judge {
        RawRole::Name(n) => (n, None, None, None),
        RawRole::Table(t) => {
            let t = *t;
            (t.kind, t.llm, t.prompt_file, t.verdict_format)
        }
    };
    if j_prompt.is_some() {
        return Err(problem(
            "judge.prompt_file",
            "the judge's prompts are built in; prompt_file is for the summarizer".into(),
        ));
    }
    if s_format.is_some() {
        return Err(problem(
            "summarizer.verdict_format",
            "a summary is free text; verdict_format is for the judge".into(),
        ));
    }
    let pick = |role: &str, kind: &str, own: Option<LlmConfig>| -> Result<Option<LlmConfig>, KeyProblem> {
        match kind {
            "offline" => {
                if own.is_some() {
                    return Err(problem(
                        &format!("{role}.llm"),
                        format!("{role} is offline; set kind = \"llm\" to use it"),
                    ));
                }
                Ok(None)
            }
            "llm" => {
                let mut cfg = own.or_else(|| raw.llm.clone()).ok_or_else(|| {
                    problem(role, format!("`llm` needs an [llm] table or a [{role}.llm] table naming at least `model`"))
                })?;
                cfg.resolve_env(env).map_err(|e| problem(&format!("{role}.llm.{}", e.field), e.problem))?;
                cfg.validate().map_err(|e| problem(&format!("{role}.llm.{}", e.field), e.problem))?;
                Ok(Some(cfg))
            }
            other => Err(problem(role, format!("unknown {role} {other:?} (allowed: offline, llm)"))),
        }
    };
    let (n_kind, n_llm, n_prompt, n_format) = match raw.next_action {
        RawRole::Name(n) => (n, None, None, None),
        RawRole::Table(t) => (t.kind, t.llm, t.prompt_file, t.verdict_format),
    };
    if n_prompt.is_some() {
        return Err(problem(
            "next_action.prompt_file",
            "the next-action prompt is built in; prompt_file is for the summarizer".into(),
        ));
    }
    if n_format.is_some() {
        return Err(problem("next_action.verdict_format", "verdict_format is for the judge".into()));
    }
    for (role, own) in [("summarizer", &s_llm), ("judge", &j_llm), ("next_action", &n_llm)] {
        if own.as_ref().is_some_and(|c| c.max_cost.is_some()) {
            return Err(problem(
                &format!("{role}.llm.max_cost"),
                "the budget is the run's: set max_cost in the [llm] table".into(),
            ));
        }
    }
    let max_cost = raw.llm.as_ref().and_then(|c| c.max_cost);
    let summarizer = pick("summarizer", &s_kind, s_llm)?;
    let judge = pick("judge", &j_kind, j_llm)?;
    let next_action = pick("next_action", &n_kind, n_llm)?;
    let mut prompt_hash = None;
    if let Some(p) = &prompt_file {
        if summarizer.is_none() {
            return Err(problem("summarizer.prompt_file", "only the LLM summarizer uses a prompt file".into()));
        }
        // Read here for its hash; its template is checked where the summarizer is built.
        let path = base.join(p);
        let text = inputs::read(&path, inputs::Kind::Settings)
            .map_err(|e| problem("summarizer.prompt_file", e.to_string()))?;
        prompt_hash = Some(format!("{:016x}", seeded::fnv1a(&text)));
    }
    let repeats = raw.judge_repeats.unwrap_or(1);
    if repeats == 0 {
        return Err(problem("judge_repeats", "must be at least 1".into()));
    }
    let s_spec = if summarizer.is_some() { SummarizerSpec::Llm } else { SummarizerSpec::Offline };
    let j_spec = if judge.is_some() { JudgeSpec::Llm } else { JudgeSpec::Offline };
    if let (Some(_), Some(cfg)) = (verdict_format, &judge) {
        if cfg.protocol != llm::Protocol::Openai {
            return Err(problem(
                "judge.verdict_format",
                "a response format is an OpenAI-protocol field; the judge's endpoint speaks another protocol".into(),
            ));
        }
    }
    if verdict_format.is_some() && judge.is_none() {
        return Err(problem("judge.verdict_format", "only the LLM judge has a verdict format".into()));
    }
    if summarizer.is_none() && judge.is_none() && next_action.is_none() {
        for (key, set) in [
            ("llm", raw.llm.is_some()),
            ("judge_repeats", raw.judge_repeats.is_some()),
            ("cache_mode", raw.cache_mode.is_some()),
            ("on_llm_error", raw.on_llm_error.is_some()),
            ("cache_dir", raw.cache_dir.is_some()),
        ] {
            if set {
                return Err(problem(
                    key,
                    "has no effect: neither the summarizer, the judge nor next_action is `llm`".into(),
                ));
            }
        }
        return Ok((s_spec, j_spec, None));
    }
    let (summarizer_price, summarizer_price_note) = match (&summarizer, &raw.price_table) {
        (Some(cfg), Some(table)) => match crate::settings::summarizer_price(table, &cfg.model) {
            Ok(p) => (Some(p), None),
            Err(why) => (None, Some(format!("{why}: its tokens are priced at the replayed model's price"))),
        },
        _ => (None, None),
    };
    let settings = LlmSettings {
        summarizer,
        prompt_file,
        prompt_hash,
        judge,
        judge_repeats: repeats,
        judge_verdict_format: verdict_format,
        cache_mode: raw.cache_mode.unwrap_or_default(),
        on_llm_error: raw.on_llm_error.unwrap_or_default(),
        cache_dir: raw.cache_dir.unwrap_or_else(|| DEFAULT_CACHE_DIR.to_string()),
        summarizer_price,
        summarizer_price_note,
        next_action,
        max_cost,
        price_table: raw.prices_file.clone(),
    };
    Ok((s_spec, j_spec, Some(settings)))
}

/// What the LLM roles did in one run: the `llm` section of `run.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmRunStats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_mode: Option<CacheMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<SummarizerRunStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeRunStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<NextActionRunStats>,
    /// The run's spending limit and what this invocation spent against it (a resume starts a
    /// new budget), when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetRunStats>,
}

/// The next-action model's part of [`LlmRunStats`]: what it was asked after the compactions
/// (`runner::replay::next_action::llm`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NextActionRunStats {
    pub model: String,
    /// A hash of the built-in prompt's text (`prompts/next_action.md`), as it entered every
    /// request (and so every cache key).
    pub prompt_hash: String,
    /// Compaction points asked: calls that compacted, one per configuration.
    pub points: u64,
    /// Requests with the compacted context (one per point).
    pub compacted_requests: u64,
    /// Requests with the full history: one per distinct point of a conversation, shared by
    /// every configuration that compacted there (`full_shared` counts the reuses).
    pub full_requests: u64,
    pub full_shared: u64,
    /// Answers that were neither `{tool, arguments}` nor `{reply}` (never counted as
    /// agreeing), by request kind.
    pub unparsed_compacted: u64,
    pub unparsed_full: u64,
    /// Requests that failed (the endpoint, the cache in mode `only`, the model refusing).
    pub failures: u64,
    /// Requests, HTTP attempts, retries, cache hits and misses, failures by kind and tokens
    /// (prompt, cached, completion) of its client.
    pub client: ClientStats,
}

/// The budget's part of [`LlmRunStats`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetRunStats {
    pub max_cost_usd: f64,
    /// Dollars spent on requests sent (from the providers' reported usage).
    pub spent_usd: f64,
    /// Spent per role.
    pub by_role: std::collections::BTreeMap<String, f64>,
    /// Requests not sent because they would have passed the limit.
    pub refused_requests: u64,
}

/// The LLM summarizer's part of [`LlmRunStats`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummarizerRunStats {
    pub model: String,
    /// The price its tokens were charged at; `None`: the replayed model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Why its tokens are priced at the replayed model's price, when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_note: Option<String>,
    /// Summaries asked for, and those that failed, by kind (`context_length_exceeded`,
    /// `cache_miss`, `empty`, ...).
    pub calls: u64,
    pub failures: u64,
    pub failures_by_kind: std::collections::BTreeMap<String, u64>,
    /// Requests, HTTP attempts, retries, cache hits and misses, failures by kind and tokens
    /// (prompt, cached, completion) of its client.
    pub client: ClientStats,
}

/// The LLM judge's part of [`LlmRunStats`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JudgeRunStats {
    pub model: String,
    pub probes: u64,
    pub scored: u64,
    pub unscored: u64,
    pub unparsed_verdicts: u64,
    /// Summaries whose user directives the grader listed, those lists it could not give (not
    /// the list's JSON, or the request failed) and listed sentences the summary does not hold.
    #[serde(default)]
    pub directive_lists: u64,
    #[serde(default)]
    pub unreadable_directive_lists: u64,
    #[serde(default)]
    pub stray_directives: u64,
    /// Its client's counters (the answering and the grading calls).
    pub client: ClientStats,
}

/// Who writes the summaries a strategy asks for.
///
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummarizerSpec {
    /// The deterministic offline summarizer: no model, no key.
    Offline,
    /// A model through the `llm` crate, with each strategy's seed prompt
    /// (`runner::summarize::llm`); its endpoint is in [`crate::experiment::Experiment::llm`].
    Llm,
}

/// Who scores the probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeSpec {
    /// The deterministic offline judge: a fact is retained when an alias survives.
    Offline,
    /// A model answers from the compacted context and a model grades the answer
    /// (`runner::judge::llm`); its endpoint is in [`crate::experiment::Experiment::llm`].
    Llm,
}

impl fmt::Display for SummarizerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SummarizerSpec::Offline => "offline",
            SummarizerSpec::Llm => "llm",
        })
    }
}

impl fmt::Display for JudgeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JudgeSpec::Offline => "offline",
            JudgeSpec::Llm => "llm",
        })
    }
}
