//! The LLM settings of an experiment, and building the summarizer and judge they ask for.
//!
//! An experiment chooses a model per role with `summarizer = "llm"` / `judge = "llm"` and an
//! `[llm]` table, or per role with a `[summarizer]` / `[judge]` table (`kind = "llm"`) holding
//! its own `[summarizer.llm]` / `[judge.llm]` endpoint (TOML cannot give a key both a string and
//! a table, so the per-role form is a table). `judge_repeats`, `cache_mode` and `cache_dir` are
//! top-level keys. See `experiments/README.md`.
//!
//! Building needs the API keys, which only the binary reads: [`LlmRoles::build`] takes a lookup
//! function (the caller passes its environment) and resolves each endpoint's `api_key_env`.
//! The keys live in memory only: configuration ids, `run.json` and the cache record the
//! variable's name at most.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use llm::cache::{CacheMode, ResponseCache};
use llm::{Client, LlmConfig, LlmError};
use serde::{Deserialize, Serialize};

use compaction::{Context, Conversation, Probe, SummaryFailure, SummaryRequest};

use crate::experiment::{Experiment, JudgeSpec, SummarizerSpec};
use crate::llm_judge::LlmJudge;
use crate::llm_summarize::{LlmSetupError, LlmSummarizer, Prompts};
use crate::record::ProbeScore;
use crate::replay::{Judge, Summarizer, Summary};

/// The default response cache folder, relative to the experiment file.
pub const DEFAULT_CACHE_DIR: &str = "llm-cache";

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
    /// The LLM judge's endpoint (`[judge.llm]`, else `[llm]`); `None` when the judge is offline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<LlmConfig>,
    /// How many times the LLM judge grades each answer.
    pub judge_repeats: u32,
    pub cache_mode: CacheMode,
    /// The response cache folder, relative to the experiment file.
    pub cache_dir: String,
}

impl LlmSettings {
    /// What enters every configuration id: the endpoints' identity (protocol, base URL, model,
    /// temperature, output limit), the prompt file and the repeats; not the limits, retries,
    /// key variable or cache mode, which do not change results.
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
        serde_json::json!({
            "summarizer": endpoint(&self.summarizer),
            "prompt_file": self.prompt_file,
            "judge": endpoint(&self.judge),
            "judge_repeats": self.judge_repeats,
        })
    }
}

/// One role as written: `"offline"`, `"llm"`, or a table.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawRole {
    Name(String),
    Table(RawRoleTable),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoleTable {
    kind: String,
    #[serde(default)]
    llm: Option<LlmConfig>,
    #[serde(default)]
    prompt_file: Option<String>,
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
    pub llm: Option<LlmConfig>,
    pub judge_repeats: Option<u32>,
    pub cache_mode: Option<CacheMode>,
    pub cache_dir: Option<String>,
}

/// A bad LLM key: (key, problem).
pub(crate) type KeyProblem = (String, String);

/// Check the LLM keys and resolve each role. `base` is the experiment file's folder.
pub(crate) fn resolve(
    raw: RawLlm,
    base: &Path,
) -> Result<(SummarizerSpec, JudgeSpec, Option<LlmSettings>), KeyProblem> {
    let problem = |key: &str, p: String| (key.to_string(), p);
    let (s_kind, s_llm, prompt_file) = match raw.summarizer {
        RawRole::Name(n) => (n, None, None),
        RawRole::Table(t) => (t.kind, t.llm, t.prompt_file),
    };
    let (j_kind, j_llm, j_prompt) = match raw.judge {
        RawRole::Name(n) => (n, None, None),
        RawRole::Table(t) => (t.kind, t.llm, t.prompt_file),
    };
    if j_prompt.is_some() {
        return Err(problem(
            "judge.prompt_file",
            "the judge's prompts are built in; prompt_file is for the summarizer".into(),
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
                let cfg = own.or_else(|| raw.llm.clone()).ok_or_else(|| {
                    problem(role, format!("`llm` needs an [llm] table or a [{role}.llm] table naming at least `model`"))
                })?;
                cfg.validate().map_err(|e| problem(&format!("{role}.llm.{}", e.field), e.problem))?;
                Ok(Some(cfg))
            }
            other => Err(problem(role, format!("unknown {role} {other:?} (allowed: offline, llm)"))),
        }
    };
    let summarizer = pick("summarizer", &s_kind, s_llm)?;
    let judge = pick("judge", &j_kind, j_llm)?;
    if let Some(p) = &prompt_file {
        if summarizer.is_none() {
            return Err(problem("summarizer.prompt_file", "only the LLM summarizer uses a prompt file".into()));
        }
        Prompts::custom(&base.join(p)).map_err(|e| problem("summarizer.prompt_file", e.to_string()))?;
    }
    let repeats = raw.judge_repeats.unwrap_or(1);
    if repeats == 0 {
        return Err(problem("judge_repeats", "must be at least 1".into()));
    }
    let s_spec = if summarizer.is_some() { SummarizerSpec::Llm } else { SummarizerSpec::Offline };
    let j_spec = if judge.is_some() { JudgeSpec::Llm } else { JudgeSpec::Offline };
    if summarizer.is_none() && judge.is_none() {
        for (key, set) in [
            ("llm", raw.llm.is_some()),
            ("judge_repeats", raw.judge_repeats.is_some()),
            ("cache_mode", raw.cache_mode.is_some()),
            ("cache_dir", raw.cache_dir.is_some()),
        ] {
            if set {
                return Err(problem(key, "has no effect: neither the summarizer nor the judge is `llm`".into()));
            }
        }
        return Ok((s_spec, j_spec, None));
    }
    let settings = LlmSettings {
        summarizer,
        prompt_file,
        judge,
        judge_repeats: repeats,
        cache_mode: raw.cache_mode.unwrap_or_default(),
        cache_dir: raw.cache_dir.unwrap_or_else(|| DEFAULT_CACHE_DIR.to_string()),
    };
    Ok((s_spec, j_spec, Some(settings)))
}

/// The LLM roles of a run; a role that is `None` is offline.
#[derive(Debug, Default)]
pub struct LlmRoles {
    pub summarizer: Option<Arc<LlmSummarizer>>,
    pub judge: Option<Arc<LlmJudge>>,
    /// The response cache folder, when a role uses a model.
    pub cache_dir: Option<PathBuf>,
}

impl LlmRoles {
    /// Build the LLM summarizer and judge `experiment` asks for (none when both are offline).
    /// `lookup` resolves the API key variables (the caller passes its environment);
    /// `cache_mode` overrides the file's.
    pub fn build(
        experiment: &Experiment,
        lookup: &dyn Fn(&str) -> Option<String>,
        cache_mode: Option<CacheMode>,
    ) -> Result<LlmRoles, LlmSetupError> {
        let Some(settings) = &experiment.llm else { return Ok(LlmRoles::default()) };
        let base = experiment.base_dir();
        let dir = base.join(&settings.cache_dir);
        let cache = Arc::new(ResponseCache::new(&dir, cache_mode.unwrap_or(settings.cache_mode)));
        let client = |cfg: &LlmConfig| -> Result<Arc<Client>, LlmSetupError> {
            let key = cfg.resolve_key(lookup).map_err(LlmError::from)?;
            Ok(Arc::new(Client::new(cfg.clone(), key)?.with_cache(cache.clone())))
        };
        let mut roles = LlmRoles { cache_dir: Some(dir.clone()), ..LlmRoles::default() };
        if let Some(cfg) = &settings.summarizer {
            let prompts = match &settings.prompt_file {
                Some(p) => Prompts::custom(&base.join(p))?,
                None => Prompts::seeds()?,
            };
            roles.summarizer = Some(Arc::new(LlmSummarizer::new(client(cfg)?, prompts)?));
        }
        if let Some(cfg) = &settings.judge {
            let c = client(cfg)?;
            roles.judge = Some(Arc::new(LlmJudge::new(c.clone(), c, settings.judge_repeats)?));
        }
        Ok(roles)
    }

    /// Cache keys missed in cache mode `only`, by either role, in order of first miss.
    pub fn missing_keys(&self) -> Vec<String> {
        let mut keys = self.summarizer.as_ref().map(|s| s.missing_keys()).unwrap_or_default();
        for k in self.judge.as_ref().map(|j| j.missing_keys()).unwrap_or_default() {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    }
}

/// What [`SummarizerSpec::build`] and [`JudgeSpec::build`] give for `llm`: a model needs its
/// endpoint and key, which the spec alone does not have, so every summary fails and every
/// probe is unscored, saying to build the roles with [`LlmRoles::build`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NeedsRoles;

const NEEDS_ROLES: &str = "the LLM summarizer and judge need their endpoint and key: build them with LlmRoles::build";

impl Summarizer for NeedsRoles {
    fn name(&self) -> String {
        "llm (not built)".into()
    }
    fn summarize(&self, _ctx: &Context, _request: &SummaryRequest) -> Result<Summary, SummaryFailure> {
        Err(SummaryFailure { reason: NEEDS_ROLES.into() })
    }
}

impl Judge for NeedsRoles {
    fn name(&self) -> String {
        "llm (not built)".into()
    }
    fn score(&self, conversation: &Conversation, ctx: &Context, probe: &Probe) -> ProbeScore {
        let n = conversation.messages.len();
        ProbeScore {
            probe_id: probe.id.clone(),
            kind: probe.kind,
            asked_at: probe.asked_at.unwrap_or(n).min(n),
            at_risk: !ctx.entries().iter().any(|e| e.origin().verbatim_index() == Some(probe.source_message)),
            score: 0.0,
            facts: Vec::new(),
            judge: Judge::name(self),
            llm: Some(serde_json::json!({"scored": false, "error": NEEDS_ROLES})),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const STRATEGY: &str = "\n[[strategy]]\nname = \"keep-last-n\"\n";

    fn parse(head: &str) -> Result<Experiment, String> {
        let text = format!("name = \"t\"\ndatasets = [\"data\"]\nwindows = [32000]\n{head}\n{STRATEGY}");
        Experiment::parse(&text, Path::new("experiments/t.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn offline_by_default_with_unchanged_ids() {
        let e = parse("").unwrap();
        assert_eq!((e.summarizer, e.judge, e.llm.is_none()), (SummarizerSpec::Offline, JudgeSpec::Offline, true));
        let explicit = parse("summarizer = \"offline\"\njudge = \"offline\"").unwrap();
        assert_eq!(e.configurations[0].config_id, explicit.configurations[0].config_id);
    }

    #[test]
    fn one_llm_table_serves_both_roles() {
        let e = parse("summarizer = \"llm\"\njudge = \"llm\"\njudge_repeats = 3\ncache_mode = \"only\"\n[llm]\nmodel = \"gpt-4o-mini\"")
            .unwrap();
        assert_eq!((e.summarizer, e.judge), (SummarizerSpec::Llm, JudgeSpec::Llm));
        let s = e.llm.as_ref().unwrap();
        assert_eq!(s.summarizer.as_ref().unwrap().model, "gpt-4o-mini");
        assert_eq!(s.judge.as_ref().unwrap().model, "gpt-4o-mini");
        assert_eq!((s.judge_repeats, s.cache_mode, s.cache_dir.as_str()), (3, CacheMode::Only, DEFAULT_CACHE_DIR));
        assert_ne!(e.configurations[0].config_id, parse("").unwrap().configurations[0].config_id);
    }

    #[test]
    fn per_role_tables_override_the_shared_one() {
        let e = parse(
            "judge = \"llm\"\n[summarizer]\nkind = \"llm\"\n[summarizer.llm]\nmodel = \"small\"\ntemperature = 0.2\n\
             [llm]\nprotocol = \"anthropic\"\nmodel = \"big\"",
        )
        .unwrap();
        let s = e.llm.as_ref().unwrap();
        assert_eq!(s.summarizer.as_ref().unwrap().model, "small");
        let j = s.judge.as_ref().unwrap();
        assert_eq!((j.model.as_str(), j.protocol), ("big", llm::Protocol::Anthropic));
    }

    #[test]
    fn the_model_enters_the_configuration_id_but_limits_do_not() {
        let id = |llm: &str| {
            parse(&format!("summarizer = \"llm\"\n[llm]\n{llm}")).unwrap().configurations[0].config_id.clone()
        };
        let base = id("model = \"a\"");
        assert_ne!(base, id("model = \"b\""));
        assert_ne!(base, id("model = \"a\"\ntemperature = 0.5"));
        assert_eq!(base, id("model = \"a\"\nmax_concurrency = 16\nrequests_per_minute = 60\napi_key_env = \"K\""));
    }

    #[test]
    fn bad_llm_settings_name_the_key() {
        let cases = [
            ("summarizer = \"llm\"", "key `summarizer`"),
            ("judge = \"gpt\"", "unknown judge"),
            ("summarizer = \"llm\"\njudge_repeats = 0\n[llm]\nmodel = \"m\"", "key `judge_repeats`"),
            ("judge = \"llm\"\n[llm]\nmodel = \"m\"\nmax_concurrency = 0", "key `judge.llm.max_concurrency`"),
            ("summarizer = \"llm\"\n[llm]\nmodel = \"m\"\napi_key = \"sk-1\"", "api_key"),
            ("cache_mode = \"only\"", "key `cache_mode`"),
            (
                "[summarizer]\nkind = \"llm\"\nprompt_file = \"nope.md\"\n[summarizer.llm]\nmodel = \"m\"",
                "summarizer.prompt_file",
            ),
        ];
        for (head, expected) in cases {
            let err = parse(head).unwrap_err();
            assert!(err.contains(expected), "{head}: {err}");
        }
    }

    #[test]
    fn roles_resolve_keys_through_the_callers_lookup() {
        let e = parse("summarizer = \"llm\"\njudge = \"llm\"\n[llm]\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"MY_KEY\"")
            .unwrap();
        let err = LlmRoles::build(&e, &|_| None, None).err().unwrap();
        assert!(err.to_string().contains("MY_KEY"), "{err}");
        let roles = LlmRoles::build(&e, &|n| (n == "MY_KEY").then(|| "k".to_string()), None).unwrap();
        assert_eq!(roles.summarizer.as_ref().unwrap().name(), "llm:m");
        assert_eq!(roles.judge.as_ref().unwrap().name(), "llm:m");
        assert_eq!(roles.cache_dir.as_deref(), Some(Path::new("experiments/llm-cache")));
        assert!(roles.missing_keys().is_empty());
        let offline = LlmRoles::build(&parse("").unwrap(), &|_| None, None).unwrap();
        assert!(offline.summarizer.is_none() && offline.judge.is_none() && offline.cache_dir.is_none());
    }

    #[test]
    fn a_spec_alone_cannot_call_a_model() {
        assert!(SummarizerSpec::Llm.to_string() == "llm" && JudgeSpec::Llm.to_string() == "llm");
        let ctx = Context::new();
        let req = SummaryRequest {
            span: vec![],
            prompt: compaction::PromptKind::GeneralChat,
            previous: None,
            task: None,
            max_tokens: 10,
            target_tokens: None,
            round: 1,
        };
        assert!(NeedsRoles.summarize(&ctx, &req).unwrap_err().reason.contains("LlmRoles::build"));
    }
}
