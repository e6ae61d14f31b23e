//! The LLM settings of an experiment, and building the summarizer, judge and next-action model
//! they ask for.
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

use std::path::PathBuf;
use std::sync::Arc;

use llm::cache::{CacheMode, ResponseCache};
use llm::{Client, Limits, LlmConfig, LlmError};
use runlog::llm_settings::{BudgetRunStats, JudgeRunStats, LlmRunStats, SummarizerRunStats};

use compaction::{Context, Conversation, Probe, SummaryFailure, SummaryRequest};

use crate::judge::llm::LlmJudge;
use crate::judge::Judge;
use crate::replay::next_action::llm::LlmNextAction;
use crate::replay::next_action::NextActionModel;
use crate::summarize::llm::{LlmSetupError, LlmSummarizer, Prompts};
use crate::summarize::{Summarizer, Summary};
use runlog::experiment::{Experiment, JudgeSpec, SummarizerSpec};
use runlog::record::ProbeScore;

/// The LLM roles of a run; a role that is `None` is offline.
#[derive(Debug, Default)]
pub struct LlmRoles {
    pub summarizer: Option<Arc<LlmSummarizer>>,
    pub judge: Option<Arc<LlmJudge>>,
    /// The next-action model, when next-action agreement is measured.
    pub next_action: Option<Arc<LlmNextAction>>,
    /// The response cache folder, when a role uses a model.
    pub cache_dir: Option<PathBuf>,
    /// The cache mode in force, when a role uses a model.
    pub cache_mode: Option<CacheMode>,
    /// Why the summarizer's tokens are priced at the replayed model's price, when they are.
    pub summarizer_price_note: Option<String>,
    /// The run's spending limit (`[llm] max_cost`, or the caller's), shared by every client.
    pub budget: Option<Arc<llm::Budget>>,
}

/// The input tokens of a chat request under `encoding`: each message's content plus the chat
/// template's per-message overhead ([`compaction::tokens::EXACT_MESSAGE_OVERHEAD`]), as the
/// replay counts its own requests.
pub fn chat_tokens(encoding: compaction::Encoding) -> llm::budget::TokenCount {
    let exact = compaction::tokens::Exact::new(encoding);
    Arc::new(move |messages: &[llm::ChatMessage]| {
        messages.iter().map(|m| exact.count(&m.content) + compaction::tokens::EXACT_MESSAGE_OVERHEAD).sum()
    })
}

impl LlmRoles {
    /// Build the LLM summarizer, judge and next-action model `experiment` asks for (none when
    /// every role is offline).
    /// `lookup` resolves the API key variables (the caller passes its environment);
    /// `cache_mode` overrides the file's.
    pub fn build(
        experiment: &Experiment,
        lookup: &dyn Fn(&str) -> Option<String>,
        cache_mode: Option<CacheMode>,
    ) -> Result<LlmRoles, LlmSetupError> {
        LlmRoles::build_inner(experiment, lookup, cache_mode, None)
    }

    /// [`LlmRoles::build`] with the run's spending limit: `max_cost` (the caller's, else the
    /// experiment's `[llm] max_cost`) in US dollars, shared by every client. A budget needs
    /// the price of every role's model (the price table's entry); one missing is an error,
    /// not a price of zero.
    pub fn build_with_budget(
        experiment: &Experiment,
        lookup: &dyn Fn(&str) -> Option<String>,
        cache_mode: Option<CacheMode>,
        max_cost: Option<f64>,
    ) -> Result<LlmRoles, LlmSetupError> {
        let limit = max_cost.or(experiment.llm.as_ref().and_then(|s| s.max_cost));
        LlmRoles::build_inner(experiment, lookup, cache_mode, limit)
    }

    fn build_inner(
        experiment: &Experiment,
        lookup: &dyn Fn(&str) -> Option<String>,
        cache_mode: Option<CacheMode>,
        limit: Option<f64>,
    ) -> Result<LlmRoles, LlmSetupError> {
        let Some(settings) = &experiment.llm else {
            if limit.is_some() {
                return Err(LlmSetupError::Invalid(
                    "--max-cost: neither the summarizer nor the judge uses a model; nothing would be spent".into(),
                ));
            }
            return Ok(LlmRoles::default());
        };
        if let Some(l) = limit {
            if !(l.is_finite() && l >= 0.0) {
                return Err(LlmSetupError::Invalid(format!("max_cost {l} is not a number of US dollars")));
            }
        }
        let budget = limit.map(|l| Arc::new(llm::Budget::new(l)));
        let mut meters: Vec<(&'static str, llm::Meter)> = Vec::new();
        if budget.is_some() {
            let count = chat_tokens(experiment.tokenizer);
            for role in settings.model_roles() {
                let price = role.price.map_err(|why| {
                    LlmSetupError::Invalid(format!(
                        "max_cost needs the price of every model a run calls: {why} (add it to the price table)"
                    ))
                })?;
                let rates = llm::Rates { input: price.input, cached_input: price.cached_input, output: price.output };
                meters.push((role.role, llm::Meter { role: role.role.to_string(), rates, count: count.clone() }));
            }
        }
        let base = experiment.base_dir();
        let dir = base.join(&settings.cache_dir);
        let cache = Arc::new(ResponseCache::new(&dir, cache_mode.unwrap_or(settings.cache_mode)));
        // One set of limits per endpoint: a shared [llm] serves both roles through one
        // concurrency cap and one rate limit, as the endpoint sees them.
        let mut limits: Vec<(serde_json::Value, Arc<Limits>)> = Vec::new();
        let mut client = |role: &str, cfg: &LlmConfig| -> Result<Arc<Client>, LlmSetupError> {
            let key = cfg.resolve_key(lookup).map_err(LlmError::from)?;
            let endpoint =
                serde_json::json!([cfg.protocol, cfg.base_url(), cfg.max_concurrency, cfg.requests_per_minute]);
            let shared = match limits.iter().find(|(e, _)| *e == endpoint) {
                Some((_, l)) => l.clone(),
                None => {
                    let l = Arc::new(Limits::new(cfg.max_concurrency, cfg.requests_per_minute));
                    limits.push((endpoint, l.clone()));
                    l
                }
            };
            let mut c = Client::new(cfg.clone(), key)?.with_cache(cache.clone()).sharing_limits(shared);
            if let (Some(b), Some((_, meter))) = (&budget, meters.iter().find(|(r, _)| *r == role)) {
                c = c.with_budget(b.clone(), meter.clone());
            }
            Ok(Arc::new(c))
        };
        let mut roles = LlmRoles { cache_dir: Some(dir.clone()), budget: budget.clone(), ..LlmRoles::default() };
        if let Some(cfg) = &settings.summarizer {
            let prompts = match &settings.prompt_file {
                Some(p) => Prompts::custom(&base.join(p))?,
                None => Prompts::own()?,
            };
            let s = LlmSummarizer::new(client("summarizer", cfg)?, prompts)?.with_price(settings.summarizer_price);
            roles.summarizer = Some(Arc::new(s));
        }
        if let Some(cfg) = &settings.judge {
            let c = client("judge", cfg)?;
            let judge =
                LlmJudge::new(c.clone(), c, settings.judge_repeats)?.with_verdict_format(settings.judge_verdict_format);
            roles.judge = Some(Arc::new(judge));
        }
        if let Some(cfg) = &settings.next_action {
            roles.next_action = Some(Arc::new(LlmNextAction::new(client("next_action", cfg)?)?));
        }
        roles.cache_mode = Some(cache.mode());
        roles.summarizer_price_note = settings.summarizer_price_note.clone();
        Ok(roles)
    }

    /// What the roles did, for `run.json`; `None` when every role is offline.
    pub fn stats(&self) -> Option<LlmRunStats> {
        if self.summarizer.is_none() && self.judge.is_none() && self.next_action.is_none() {
            return None;
        }
        Some(LlmRunStats {
            budget: self.budget.as_ref().map(|b| {
                let r = b.report();
                BudgetRunStats {
                    max_cost_usd: r.limit_usd,
                    spent_usd: r.spent_usd,
                    by_role: r.by_role,
                    refused_requests: r.refused,
                }
            }),
            cache_mode: self.cache_mode,
            summarizer: self.summarizer.as_ref().map(|s| {
                let st = s.stats();
                SummarizerRunStats {
                    model: s.client().config().model.clone(),
                    price: s.price(),
                    price_note: self.summarizer_price_note.clone(),
                    calls: st.calls,
                    failures: st.failures,
                    failures_by_kind: st.failures_by_kind,
                    client: st.client,
                }
            }),
            judge: self.judge.as_ref().map(|j| {
                let st = j.stats();
                JudgeRunStats {
                    model: j.name(),
                    probes: st.probes,
                    scored: st.scored,
                    unscored: st.unscored,
                    unparsed_verdicts: st.unparsed_verdicts,
                    directive_lists: st.directive_lists,
                    unreadable_directive_lists: st.unreadable_directive_lists,
                    stray_directives: st.stray_directives,
                    client: st.client,
                }
            }),
            next_action: self.next_action.as_ref().map(|n| n.stats()),
        })
    }

    /// The next-action model as the engine takes it.
    pub fn next_action_model(&self) -> Option<&dyn NextActionModel> {
        self.next_action.as_deref().map(|n| n as &dyn NextActionModel)
    }

    /// One small request to every distinct endpoint (protocol, URL and model) the roles use,
    /// before a run relies on them; nothing when the cache mode is `only` (no request is
    /// made then). The first endpoint that is unreachable, refuses the key or does not answer
    /// as a model gives the error.
    pub fn preflight(&self) -> Result<(), PreflightError> {
        if self.cache_mode == Some(CacheMode::Only) {
            return Ok(());
        }
        let mut clients: Vec<(&str, &Client)> = Vec::new();
        if let Some(s) = &self.summarizer {
            clients.push(("summarizer", s.client()));
        }
        if let Some(j) = &self.judge {
            clients.push(("judge", j.answerer()));
        }
        if let Some(n) = &self.next_action {
            clients.push(("next-action model", n.client()));
        }
        let mut seen: Vec<(llm::Protocol, String, String)> = Vec::new();
        let rt = crate::summarize::llm::runtime().map_err(|e| PreflightError {
            role: "llm",
            endpoint: String::new(),
            model: String::new(),
            error: LlmError::Client(e.to_string()),
        })?;
        for (role, client) in clients {
            let cfg = client.config();
            let id = (cfg.protocol, client.endpoint().to_string(), cfg.model.clone());
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            if let Err(error) = rt.block_on(client.preflight()) {
                return Err(PreflightError {
                    role,
                    endpoint: client.endpoint().to_string(),
                    model: cfg.model.clone(),
                    error,
                });
            }
        }
        Ok(())
    }

    /// Cache keys missed in cache mode `only`, by any role, in order of first miss.
    pub fn missing_keys(&self) -> Vec<String> {
        let mut keys = self.summarizer.as_ref().map(|s| s.missing_keys()).unwrap_or_default();
        let others =
            [self.judge.as_ref().map(|j| j.missing_keys()), self.next_action.as_ref().map(|n| n.missing_keys())];
        for k in others.into_iter().flatten().flatten() {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    }
}

/// What [`LlmRoles::build`] gives for `llm`: a model needs its
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
            tier: Some(probe.tier()),
            asked_at: probe.asked_at.unwrap_or(n).min(n),
            checkpoint: 100,
            at_risk: !ctx.entries().iter().any(|e| e.origin().verbatim_index() == Some(probe.source_message)),
            score: 0.0,
            facts: Vec::new(),
            judge: Judge::name(self),
            llm: Some(serde_json::json!({"scored": false, "error": NEEDS_ROLES})),
            if_sent: None,
            verdict: runlog::record::Verdict::Unscored {
                reason: NEEDS_ROLES.into(),
                cache_miss: false,
                endpoint: None,
                over_budget: false,
            },
            evidence: Vec::new(),
            written: probe.is_written(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use runlog::llm_settings::{VerdictFormat, DEFAULT_CACHE_DIR};
    use runlog::settings::Price;
    use std::path::Path;

    const STRATEGY: &str = "\n[[strategy]]\nname = \"keep-last-n\"\n";

    fn parse(head: &str) -> Result<Experiment, String> {
        let text = format!("name = \"t\"\ndatasets = [\"data\"]\nwindows = [32000]\n{head}\n{STRATEGY}");
        Experiment::parse(&text, Path::new("experiments/t.toml"), &crate::catalog::Catalog).map_err(|e| e.to_string())
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
    fn next_action_is_a_role_of_its_own() {
        let alone = parse("next_action = \"llm\"\n[llm]\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"").unwrap();
        assert_eq!((alone.summarizer, alone.judge), (SummarizerSpec::Offline, JudgeSpec::Offline));
        let s = alone.llm.as_ref().unwrap();
        assert_eq!(s.next_action.as_ref().unwrap().model, "m");
        assert!(s.summarizer.is_none() && s.judge.is_none());
        // Measured or not, a new configuration; an experiment without it keeps its ids.
        assert_ne!(alone.configurations[0].config_id, parse("").unwrap().configurations[0].config_id);
        let judged = |extra: &str| {
            parse(&format!("judge = \"llm\"\n{extra}\n[llm]\nmodel = \"m\"")).unwrap().configurations[0]
                .config_id
                .clone()
        };
        assert_ne!(judged(""), judged("next_action = \"llm\""));
        assert_eq!(judged(""), judged("next_action = \"offline\""));
        let own = parse("judge = \"llm\"\n[next_action]\nkind = \"llm\"\n[next_action.llm]\nmodel = \"small\"\n[llm]\nmodel = \"big\"")
            .unwrap();
        assert_eq!(own.llm.as_ref().unwrap().next_action.as_ref().unwrap().model, "small");
        let roles = LlmRoles::build(&alone, &|_| None, None).unwrap();
        let model = roles.next_action_model().unwrap();
        assert_eq!(model.name(), "llm:m");
        assert!(roles.summarizer.is_none() && roles.judge.is_none());
        let stats = roles.stats().unwrap();
        let n = stats.next_action.unwrap();
        assert_eq!((n.model.as_str(), n.points, n.prompt_hash.len()), ("m", 0, 16));
        for (head, expected) in [
            ("next_action = \"llm\"", "key `next_action`"),
            ("next_action = \"model\"", "unknown next_action"),
            ("[next_action]\nkind = \"llm\"\nprompt_file = \"p.md\"\n[llm]\nmodel = \"m\"", "next_action.prompt_file"),
            ("[next_action]\nkind = \"offline\"\n[next_action.llm]\nmodel = \"m\"", "next_action.llm"),
            ("[next_action]\nkind = \"llm\"\nmodle = \"m\"", "[next_action]: unknown key `modle`"),
        ] {
            let err = parse(head).unwrap_err();
            assert!(err.contains(expected), "{head}: {err}");
        }
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
    fn a_verdict_format_is_a_new_configuration_and_holds_the_grader_to_the_schema() {
        let plain = parse("judge = \"llm\"\n[llm]\nmodel = \"m\"").unwrap();
        let held = parse("[judge]\nkind = \"llm\"\nverdict_format = \"json_schema\"\n[llm]\nmodel = \"m\"").unwrap();
        assert_eq!(plain.llm.as_ref().unwrap().judge_verdict_format, None);
        assert_eq!(held.llm.as_ref().unwrap().judge_verdict_format, Some(VerdictFormat::JsonSchema));
        // Scores may change with it, so the id does.
        assert_ne!(plain.configurations[0].config_id, held.configurations[0].config_id);
        let f = VerdictFormat::JsonSchema.response_format(&crate::judge::llm::DIMENSIONS);
        assert_eq!(f["type"], "json_schema");
        let schema = &f["json_schema"]["schema"];
        assert_eq!(
            schema["required"].as_array().unwrap().len(),
            7,
            "five grades, the rationale and the quoted facts: {f}"
        );
        assert_eq!(schema["properties"]["accuracy"]["enum"], serde_json::json!([0, 1, 2, 3, 4, 5]));
        let g = VerdictFormat::JsonObject.response_format(&crate::judge::llm::DIMENSIONS);
        assert_eq!(
            (g["type"].as_str(), g["schema"]["properties"]["rationale"]["maxLength"].as_u64()),
            (Some("json_object"), Some(200))
        );
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
            (
                "[summarizer]\nkind = \"llm\"\nverdict_format = \"json_object\"\n[summarizer.llm]\nmodel = \"m\"",
                "summarizer.verdict_format",
            ),
            ("[judge]\nkind = \"offline\"\nverdict_format = \"json_schema\"", "judge.verdict_format"),
            (
                "[judge]\nkind = \"llm\"\nverdict_format = \"json_schema\"\n[judge.llm]\nprotocol = \"anthropic\"\nmodel = \"m\"",
                "OpenAI-protocol",
            ),
            ("[judge]\nkind = \"llm\"\nverdict_format = \"grammar\"\n[judge.llm]\nmodel = \"m\"", "verdict_format"),
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
    fn typos_in_role_tables_name_the_table_and_the_key() {
        let cases = [
            (
                "[summarizer]\nkind = \"llm\"\npromt_file = \"p.md\"\n[summarizer.llm]\nmodel = \"m\"",
                "[summarizer]: unknown key `promt_file`",
            ),
            ("[judge]\nkind = \"llm\"\npromt_file = \"p.md\"", "[judge]: unknown key `promt_file`"),
            (
                "[summarizer]\nkind = \"llm\"\n[summarizer.llm]\nmodle = \"m\"",
                "[summarizer.llm]: unknown field `modle`",
            ),
            ("[judge]\nkind = \"llm\"\n[judge.llm]\nmodle = \"m\"", "[judge.llm]: unknown field `modle`"),
            ("[judge]\n[judge.llm]\nmodel = \"m\"", "[judge]: missing key `kind`"),
        ];
        for (head, expected) in cases {
            let err = parse(head).unwrap_err();
            assert!(err.contains(expected), "{head}: {err}");
            assert!(!err.contains("did not match any variant"), "{err}");
        }
    }

    #[test]
    fn the_prompt_text_enters_the_configuration_id_not_its_path() {
        let dir = std::env::temp_dir().join(format!("runner-prompt-id-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = "<!-- system -->\nSummarize.\n<!-- user -->\n{{messages}}\n";
        std::fs::write(dir.join("a.md"), text).unwrap();
        std::fs::write(dir.join("b.md"), text).unwrap();
        let id = |file: &str| {
            let head = format!(
                "name = \"t\"\ndatasets = [\"data\"]\nwindows = [32000]\n[summarizer]\nkind = \"llm\"\nprompt_file = \"{file}\"\n\
                 [summarizer.llm]\nmodel = \"m\"\n{STRATEGY}"
            );
            Experiment::parse(&head, &dir.join("t.toml"), &crate::catalog::Catalog).unwrap().configurations[0]
                .config_id
                .clone()
        };
        let before = id("a.md");
        assert_eq!(before, id("b.md"), "the same text under another name is the same configuration");
        std::fs::write(dir.join("a.md"), text.replace("Summarize.", "Summarize tersely.")).unwrap();
        assert_ne!(before, id("a.md"), "an edited prompt is a new configuration");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_summarizer_is_priced_at_its_own_model_when_the_table_has_it() {
        let dir = std::env::temp_dir().join(format!("runner-summarizer-price-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("prices.toml"),
            "[models.big]\ninput = 10.0\ncached_input = 1.0\noutput = 40.0\n\
             [models.small]\ninput = 0.5\ncached_input = 0.05\noutput = 2.0\n",
        )
        .unwrap();
        let parse_in = |model: &str| {
            let text = format!(
                "name = \"t\"\ndatasets = [\"data\"]\nwindows = [32000]\nprice = \"big\"\nsummarizer = \"llm\"\n\
                 [llm]\nmodel = \"{model}\"\n{STRATEGY}"
            );
            Experiment::parse(&text, &dir.join("t.toml"), &crate::catalog::Catalog).unwrap()
        };
        let known = parse_in("small");
        let s = known.llm.as_ref().unwrap();
        assert_eq!(s.summarizer_price, Some(Price { input: 0.5, cached_input: 0.05, output: 2.0, cache_write: None }));
        assert!(s.summarizer_price_note.is_none());
        let unknown = parse_in("not-in-the-table");
        let s = unknown.llm.as_ref().unwrap();
        assert_eq!(s.summarizer_price, None);
        let note = s.summarizer_price_note.as_deref().unwrap();
        assert!(note.contains("not-in-the-table") && note.contains("replayed model's price"), "{note}");
        // The note travels with the experiment into run.json.
        let json = serde_json::to_string(&unknown).unwrap();
        assert!(json.contains("summarizer_price_note"), "{json}");
        let roles = LlmRoles::build(&known, &|_| None, None).unwrap();
        assert_eq!(roles.summarizer.as_ref().unwrap().price().map(|p| p.output), Some(2.0));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_shared_llm_table_gives_both_roles_one_set_of_limits() {
        let e =
            parse("summarizer = \"llm\"\njudge = \"llm\"\n[llm]\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"")
                .unwrap();
        let roles = LlmRoles::build(&e, &|_| None, None).unwrap();
        let s = roles.summarizer.as_ref().unwrap().client().limits();
        let j = roles.judge.as_ref().unwrap().answerer().limits();
        assert!(Arc::ptr_eq(&s, &j), "one endpoint, one limit");
        let apart = parse(
            "judge = \"llm\"\n[summarizer]\nkind = \"llm\"\n[summarizer.llm]\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:8/v1\"\n\
             [llm]\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"",
        )
        .unwrap();
        let roles = LlmRoles::build(&apart, &|_| None, None).unwrap();
        let s = roles.summarizer.as_ref().unwrap().client().limits();
        let j = roles.judge.as_ref().unwrap().answerer().limits();
        assert!(!Arc::ptr_eq(&s, &j), "two endpoints, two limits");
    }

    /// Every provider example of experiments/README.md parses as an experiment and names the
    /// model and protocol it shows.
    #[test]
    fn the_provider_examples_of_the_experiments_readme_parse() {
        let readme =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/README.md")).unwrap();
        let after = readme.split("### Pointing a run at a provider").nth(1).unwrap();
        let block = after.split("```toml\n").nth(1).unwrap().split("```").next().unwrap();
        let mut sections: Vec<(String, String)> = Vec::new();
        for line in block.lines() {
            match line.strip_prefix("# ") {
                Some(title) => sections.push((title.to_string(), String::new())),
                None => {
                    let (_, body) = sections.last_mut().unwrap();
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
        let titles: Vec<&str> = sections.iter().map(|(t, _)| t.as_str()).collect();
        for provider in ["OpenAI", "Anthropic", "vLLM", "llama.cpp", "Ollama"] {
            assert!(
                titles.iter().any(|t| t.starts_with(provider) || t.contains(&format!(" {provider} "))),
                "{provider}: {titles:?}"
            );
        }
        let dir = std::env::temp_dir().join(format!("runner-readme-examples-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("prompts")).unwrap();
        std::fs::write(dir.join("prompts/terse.md"), "Summarize tersely.\n").unwrap();
        for (title, body) in &sections {
            let roles = if body.contains("summarizer") || body.contains("judge") {
                ""
            } else {
                "summarizer = \"llm\"\njudge = \"llm\"\n"
            };
            let text = format!("name = \"t\"\ndatasets = [\"data\"]\nwindows = [32000]\n{roles}{body}{STRATEGY}");
            let e = Experiment::parse(&text, &dir.join("t.toml"), &crate::catalog::Catalog)
                .unwrap_or_else(|err| panic!("{title}: {err}"));
            let s = e.llm.as_ref().unwrap();
            let used: Vec<&LlmConfig> = s.summarizer.iter().chain(s.judge.iter()).collect();
            assert_eq!(used.len(), 2, "{title}: both roles use a model");
            for line in body.lines().filter(|l| l.starts_with("model = ")) {
                let model = line.split('"').nth(1).unwrap();
                assert!(used.iter().any(|c| c.model == model), "{title}: {model}");
            }
            let anthropic = body.contains("protocol = \"anthropic\"");
            assert_eq!(used.iter().any(|c| c.protocol == llm::Protocol::Anthropic), anthropic, "{title}");
            if let Some(url) = body.lines().find_map(|l| l.strip_prefix("base_url = ")) {
                assert!(
                    used.iter().any(|c| format!("{:?}", c.base_url()) == url.split_whitespace().next().unwrap()),
                    "{title}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_spec_alone_cannot_call_a_model() {
        assert!(SummarizerSpec::Llm.to_string() == "llm" && JudgeSpec::Llm.to_string() == "llm");
        let ctx = Context::new();
        let req = SummaryRequest {
            span: vec![],
            prompt: compaction_strategies::priority_chain::general_chat_prompt(),
            previous: None,
            task: None,
            max_tokens: 10,
            target_tokens: None,
            target_chars: None,
            input: Default::default(),
            round: 1,
        };
        assert!(NeedsRoles.summarize(&ctx, &req).unwrap_err().reason.contains("LlmRoles::build"));
    }
}

/// A model endpoint that failed its preflight request.
#[derive(Debug, thiserror::Error)]
#[error("the {role}'s model endpoint {endpoint} (model {model}) failed its preflight request: {error}")]
pub struct PreflightError {
    pub role: &'static str,
    pub endpoint: String,
    pub model: String,
    #[source]
    pub error: LlmError,
}

/// The summarizer `spec` names: the offline one, or a placeholder that asks for
/// [`LlmRoles::build`] (the LLM summarizer needs its endpoint and key).
pub fn build_summarizer(spec: &SummarizerSpec) -> Box<dyn Summarizer> {
    match spec {
        SummarizerSpec::Offline => Box::new(crate::summarize::OfflineSummarizer::default()),
        SummarizerSpec::Llm => Box::new(NeedsRoles),
    }
}

/// The judge `spec` names: the offline one, or a placeholder that asks for [`LlmRoles::build`].
pub fn build_judge(spec: &JudgeSpec) -> Box<dyn Judge> {
    match spec {
        JudgeSpec::Offline => Box::new(crate::judge::OfflineJudge),
        JudgeSpec::Llm => Box::new(NeedsRoles),
    }
}
