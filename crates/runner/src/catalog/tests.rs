use std::path::Path;

use runlog::experiment::{id_hash, Experiment, ExperimentError};
use runlog::llm_settings::{JudgeSpec, SummarizerSpec};
use runlog::settings::CacheProfile;

use super::*;

const BASE: &str = r#"
name = "t"
datasets = ["data"]
windows = [32000, 128000]
tokenizer = "o200k_base"
cache = "openai"
summarizer = "offline"
judge = "offline"
seed = 7
"#;

fn parse(strategies: &str) -> Result<Experiment, ExperimentError> {
    Experiment::parse(&format!("{BASE}\n{strategies}"), Path::new("exp/t.toml"), &Catalog)
}

fn parse_err(strategies: &str) -> String {
    match parse(strategies) {
        Ok(e) => panic!("expected an error, got {} configurations", e.configurations.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn grid_expands_to_the_cross_product_of_list_params_and_windows() {
    let exp = parse(
        r#"
[[strategy]]
name = "keep-last-n"
recent_messages_to_keep = [5, 10, 20]
threshold_percent = [0.7, 0.8]
summary_max_tokens = 500
summary_target_tokens = 400

[[strategy]]
name = "none"
"#,
    )
    .expect("valid experiment");
    // 3 x 2 grid x 2 windows + 1 x 2 windows
    assert_eq!(exp.configurations.len(), 14);
    let first = &exp.configurations[0];
    assert_eq!(first.strategy, "keep-last-n");
    assert_eq!(first.window, Some(32_000));
    assert_eq!(
        first.params,
        serde_json::json!({
            "recent_messages_to_keep": 5,
            "summary_max_tokens": 500,
            "summary_target_tokens": 400,
            "threshold_percent": 0.7
        })
    );
    // Windows vary fastest, then the last sorted axis (threshold_percent).
    assert_eq!(exp.configurations[1].window, Some(128_000));
    assert_eq!(exp.configurations[2].params["threshold_percent"], serde_json::json!(0.8));
    assert_eq!(exp.configurations[2].params["recent_messages_to_keep"], serde_json::json!(5));
    match strategy_config(&first.resolved).expect("reads back") {
        compaction_strategies::StrategyConfig::KeepLastN(p) => {
            assert_eq!(p.recent_messages_to_keep, 5);
            assert_eq!(p.summary_max_tokens, 500);
            // Not written: the document's default.
            assert_eq!(p.system_reserve, 2_000);
        }
        other => panic!("resolved to {other:?}"),
    }
    let ids: std::collections::BTreeSet<_> = exp.configurations.iter().map(|c| c.config_id.clone()).collect();
    assert_eq!(ids.len(), 14, "config ids are unique");
    assert!(exp.configurations[13].config_id.starts_with("none-128k-"));
    assert_eq!(exp.cache, CacheProfile::Openai);
    assert_eq!(exp.seed, 7);
}

#[test]
fn no_windows_means_each_conversations_own_window() {
    let text = BASE.replace("windows = [32000, 128000]\n", "");
    let exp = Experiment::parse(&format!("{text}\n[[strategy]]\nname = \"truncate\"\n"), Path::new("t.toml"), &Catalog)
        .expect("valid experiment");
    assert_eq!(exp.configurations.len(), 1);
    assert_eq!(exp.configurations[0].window, None);
    assert!(exp.configurations[0].config_id.starts_with("truncate-own-"));
}

#[test]
fn unknown_strategy_key_is_named_with_table_index_and_line() {
    let msg = parse_err(
        r#"
[[strategy]]
name = "none"

[[strategy]]
name = "keep-last-n"
recent_messages = [5]
"#,
    );
    assert!(msg.contains("key `recent_messages`"), "{msg}");
    assert!(msg.contains("[[strategy]] #2 (keep-last-n)"), "{msg}");
    assert!(msg.contains("recent_messages_to_keep"), "lists the allowed keys: {msg}");
    // BASE has 10 lines (leading newline included), then a blank line; table 2 starts at line 15.
    assert!(msg.starts_with("exp/t.toml:15:"), "{msg}");
}

#[test]
fn bad_value_type_names_the_key() {
    let msg = parse_err("[[strategy]]\nname = \"keep-last-n\"\nrecent_messages_to_keep = \"ten\"\n");
    assert!(msg.contains("key `recent_messages_to_keep`"), "{msg}");
    assert!(msg.contains("invalid type"), "{msg}");
}

#[test]
fn out_of_range_value_in_a_grid_names_the_key_and_the_value() {
    let msg = parse_err("[[strategy]]\nname = \"keep-last-n\"\nthreshold_percent = [0.8, 1.5]\n");
    assert!(msg.contains("key `threshold_percent`: 1.5:"), "{msg}");
}

#[test]
fn unknown_strategy_name_and_missing_name_are_errors() {
    let msg = parse_err("[[strategy]]\nname = \"keep-first-n\"\n");
    assert!(msg.contains("key `name`: unknown strategy"), "{msg}");
    assert!(msg.contains("keep-last-n"), "{msg}");
    let msg = parse_err("[[strategy]]\nthreshold = 1\n");
    assert!(msg.contains("key `name`: missing"), "{msg}");
}

#[test]
fn unknown_top_level_key_and_bad_enum_values_are_errors() {
    let err =
        Experiment::parse(&format!("{BASE}colour = 1\n[[strategy]]\nname = \"none\"\n"), Path::new("t.toml"), &Catalog)
            .expect_err("unknown key");
    let msg = err.to_string();
    assert!(msg.contains("colour"), "{msg}");
    let text = BASE.replace("o200k_base", "p50k_base");
    let err = Experiment::parse(&format!("{text}[[strategy]]\nname = \"none\"\n"), Path::new("t.toml"), &Catalog)
        .expect_err("bad tokenizer");
    assert!(err.to_string().contains("p50k_base"), "{err}");
    let text = BASE.replace("summarizer = \"offline\"", "summarizer = \"llm\"");
    let err = Experiment::parse(&format!("{text}[[strategy]]\nname = \"none\"\n"), Path::new("t.toml"), &Catalog)
        .expect_err("llm summarizer");
    assert!(err.to_string().contains("key `summarizer`"), "{err}");
}

#[test]
fn provider_is_an_alias_of_cache() {
    let text = BASE.replace("cache = \"openai\"", "provider = \"anthropic\"");
    let exp = Experiment::parse(&format!("{text}[[strategy]]\nname = \"none\"\n"), Path::new("t.toml"), &Catalog)
        .expect("provider alias");
    assert_eq!(exp.cache, CacheProfile::Anthropic);
}

#[test]
fn duplicate_configurations_are_rejected() {
    let msg = parse_err("[[strategy]]\nname = \"none\"\n\n[[strategy]]\nname = \"none\"\n");
    assert!(msg.contains("[[strategy]] #2") && msg.contains("#1"), "{msg}");
    let msg = parse_err("[[strategy]]\nname = \"truncate\"\ntarget_ratio = [0.5, 0.5]\n");
    assert!(msg.contains("listed twice"), "{msg}");
    let msg = parse_err("[[strategy]]\nname = \"truncate\"\ntarget_ratio = []\n");
    assert!(msg.contains("empty list"), "{msg}");
}

#[test]
fn config_id_is_stable_and_depends_on_what_defines_the_configuration() {
    let a = parse("[[strategy]]\nname = \"keep-last-n\"\nrecent_messages_to_keep = 5\nthreshold_percent = 0.8\n")
        .expect("valid");
    // Same configuration, keys in another order, a list of one, another table before it.
    let b = parse(
        "[[strategy]]\nname = \"none\"\n[[strategy]]\nname = \"keep-last-n\"\nthreshold_percent = [0.8]\nrecent_messages_to_keep = 5\n",
    )
    .expect("valid");
    assert_eq!(a.configurations[0].config_id, b.configurations[2].config_id);
    // Pinned: the id must not change between versions unless the configuration does. The hash
    // is the first 16 hex digits of the SHA-256 of this canonical text (`printf %s TEXT |
    // sha256sum`).
    let canonical = r#"{"cache":"openai","judge":"offline","params":{"recent_messages_to_keep":5,"threshold_percent":0.8},"price":null,"strategy":"keep-last-n","summarizer":"offline","tokenizer":"o200k_base","window":32000}"#;
    assert_eq!(id_hash(canonical), "991c790a6d861978");
    assert_eq!(a.configurations[0].config_id, "keep-last-n-32k-991c790a6d861978");
    assert_eq!(a.configurations[1].config_id.split('-').nth(3), Some("128k"));

    let cheaper = Experiment::parse(
        &format!(
            "{}\n[[strategy]]\nname = \"keep-last-n\"\nrecent_messages_to_keep = 5\nthreshold_percent = 0.8\n",
            BASE.replace("cache = \"openai\"", "cache = \"none\"")
        ),
        Path::new("exp/t.toml"),
        &Catalog,
    )
    .expect("valid");
    assert_ne!(a.configurations[0].config_id, cheaper.configurations[0].config_id, "cache enters the id");
    let c = parse("[[strategy]]\nname = \"keep-last-n\"\nrecent_messages_to_keep = 6\nthreshold_percent = 0.8\n")
        .expect("valid");
    assert_ne!(a.configurations[0].config_id, c.configurations[0].config_id, "params enter the id");
}

#[test]
fn inline_price_and_price_table_lookup() {
    let dir = std::env::temp_dir().join(format!("compactlens-exp-price-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("prices.toml"), "[models.\"m-1\"]\ninput = 2.0\ncached_input = 0.5\noutput = 8.0\n")
        .expect("write prices");
    let path = dir.join("e.toml");
    let with =
        |price: &str| Experiment::parse(&format!("{BASE}{price}\n[[strategy]]\nname = \"none\"\n"), &path, &Catalog);
    let exp = with("price = \"m-1\"").expect("known model");
    let p = exp.price.expect("priced");
    assert_eq!((p.model.as_deref(), p.input, p.cached_input, p.output), (Some("m-1"), 2.0, 0.5, 8.0));
    let err = with("price = \"m-2\"").expect_err("unknown model").to_string();
    assert!(err.contains("unknown model \"m-2\"") && err.contains("m-1"), "{err}");
    let exp = with("price = { input = 1.0, cached_input = 0.1, output = 4.0 }").expect("inline");
    assert_eq!(exp.price.expect("priced").model, None);
    let err = with("price = { input = 1.0, output = 4.0 }").expect_err("missing field").to_string();
    assert!(err.contains("cached_input"), "{err}");
    let err = with("price = { input = -1.0, cached_input = 0.1, output = 4.0 }").expect_err("negative").to_string();
    assert!(err.contains("price.input"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cache_ttl_picks_the_cache_write_price() {
    let dir = std::env::temp_dir().join(format!("compactlens-exp-ttl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("prices.toml"),
        "[models.\"c\"]\ninput = 3.0\ncached_input = 0.3\noutput = 15.0\ncache_write_5m = 3.75\ncache_write_1h = 6.0\n\
         [models.\"o\"]\ninput = 2.0\ncached_input = 0.5\noutput = 8.0\n",
    )
    .expect("write prices");
    let path = dir.join("e.toml");
    let with =
        |extra: &str| Experiment::parse(&format!("{BASE}{extra}\n[[strategy]]\nname = \"none\"\n"), &path, &Catalog);
    let write = |extra: &str| with(extra).expect("valid").price.expect("priced").cache_write;
    assert_eq!(write("price = \"c\""), Some(3.75), "5 minutes by default");
    assert_eq!(write("price = \"c\"\ncache_ttl = \"5m\""), Some(3.75));
    assert_eq!(write("price = \"c\"\ncache_ttl = \"1h\""), Some(6.0));
    assert_eq!(write("price = \"o\""), None, "no write premium: writes cost plain input");
    assert_eq!(
        write("price = { input = 1.0, cached_input = 0.1, output = 4.0, cache_write_1h = 2.0 }\ncache_ttl = \"1h\""),
        Some(2.0)
    );
    // The TTL changes the price, so the configuration id.
    let id = |extra: &str| with(extra).expect("valid").configurations[0].config_id.clone();
    assert_ne!(id("price = \"c\""), id("price = \"c\"\ncache_ttl = \"1h\""));
    let err = with("price = \"c\"\ncache_ttl = \"2h\"").expect_err("unknown ttl").to_string();
    assert!(err.contains("cache_ttl") || err.contains("2h"), "{err}");
    let err = with("price = { input = 1.0, cached_input = 0.1, output = 4.0, cache_write_5m = -2.0 }")
        .expect_err("negative")
        .to_string();
    assert!(err.contains("price.cache_write_5m"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_corpora_experiments_set_a_price() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments"));
    for name in ["corpora.toml", "ci-corpora.toml"] {
        let path = dir.join(name);
        if !path.exists() {
            eprintln!("skipped: {} not found", path.display());
            continue;
        }
        let exp = Experiment::load(&path, &Catalog).unwrap_or_else(|e| panic!("{name}: {e}"));
        let price = exp.price.unwrap_or_else(|| panic!("{name} sets a price, so its runs measure cost"));
        assert!(price.cache_write.is_some_and(|w| w > price.input), "{name}: Anthropic cache writes at their premium");
    }
}

#[test]
fn the_repository_experiments_parse() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments"));
    let default = dir.join("default.toml");
    if !default.exists() {
        eprintln!("skipped: {} not found", default.display());
        return;
    }
    let exp = Experiment::load(&default, &Catalog).expect("experiments/default.toml parses");
    let strategies: std::collections::BTreeSet<_> = exp.configurations.iter().map(|c| c.strategy.as_str()).collect();
    // The main job is the seeds and the baselines; the production systems have their own
    // experiment (experiments/production.toml), beside the seeds.
    let seeds_and_baselines: std::collections::BTreeSet<_> = compaction_strategies::NAMES
        .iter()
        .copied()
        .filter(|n| compaction_strategies::family(n) != Some("production"))
        .collect();
    assert_eq!(
        strategies, seeds_and_baselines,
        "every seed and baseline is in the main job: run `scripts/regenerate.sh`"
    );
    let production =
        Experiment::load(&dir.join("production.toml"), &Catalog).expect("experiments/production.toml parses");
    let names: std::collections::BTreeSet<_> = production.configurations.iter().map(|c| c.strategy.as_str()).collect();
    let all: std::collections::BTreeSet<_> = compaction_strategies::NAMES.iter().copied().collect();
    assert_eq!(
        names, all,
        "the production experiment runs the production systems beside the seeds and baselines: run `scripts/regenerate.sh`"
    );
    assert_eq!(production.windows, vec![32_000, 128_000]);
    assert!(exp.windows.len() >= 2);
    assert!(exp.price.is_some(), "the main job prices its calls");
}

/// Two tables that differ only in `output_reserve` (71730 and 89147) had one 32-bit id and the
/// second was refused as a duplicate; their ids now differ.
#[test]
fn tables_that_collided_under_a_32_bit_hash_get_different_ids() {
    let e = parse(
        "[[strategy]]\nname = \"keep-last-n\"\noutput_reserve = 71730\n[[strategy]]\nname = \"keep-last-n\"\noutput_reserve = 89147\n",
    )
    .expect("two configurations, not a duplicate");
    let ids: Vec<&str> =
        e.configurations.iter().filter(|c| c.window == Some(32_000)).map(|c| c.config_id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(|id| id.rsplit('-').next().is_some_and(|h| h.len() == 16)), "{ids:?}");
}

#[test]
fn an_external_table_is_a_configuration_named_by_its_label() {
    let exp = parse(
        r#"
[[strategy]]
name = "external"
command = ["python3", "mine.py"]
label = "mine"
keep = [4, 8]
"#,
    )
    .unwrap();
    assert_eq!(exp.configurations.len(), 2, "one per window: a list is a value sent as written, not an axis");
    let c = &exp.configurations[0];
    assert_eq!(c.strategy, "mine");
    assert!(c.config_id.starts_with("mine-32k-"), "{}", c.config_id);
    let spec = c.external.as_ref().expect("external");
    assert_eq!(spec.params["keep"], serde_json::json!([4, 8]));
    // The id hashes the table as written: another command is another configuration.
    let other =
        parse("[[strategy]]\nname = \"external\"\ncommand = [\"python3\", \"other.py\"]\nlabel = \"mine\"\n").unwrap();
    assert_ne!(other.configurations[0].config_id, c.config_id);
    // Two tables the same: a duplicate, as for built-in strategies.
    let twice = "[[strategy]]\nname = \"external\"\ncommand = [\"x\"]\n";
    assert!(parse_err(&format!("{twice}\n{twice}")).contains("the same as one of"));
    let e = parse_err("[[strategy]]\nname = \"external\"\nlabel = \"mine\"\n");
    assert!(e.contains("[[strategy]] #1 (external)") && e.contains("command"), "{e}");
}

#[test]
fn a_grid_past_the_limit_is_refused_with_its_axes_before_it_is_expanded() {
    let values: Vec<String> = (1..=1000).map(|n| n.to_string()).collect();
    let list = values.join(", ");
    // 1000 x 1000 x 100 = 10^8 combinations: refused at once, not after allocating them.
    let table = format!(
        "[[strategy]]\nname = \"keep-last-n\"\nrecent_messages_to_keep = [{list}]\nsafety_buffer = [{list}]\nsummary_max_tokens = [{}]\n",
        values[..100].join(", ")
    );
    let e = parse_err(&table);
    assert!(e.contains("1000 recent_messages_to_keep x 1000 safety_buffer x 100 summary_max_tokens"), "{e}");
    assert!(e.contains("100000000 parameter combinations x 2 windows") && e.contains("100000"), "{e}");
    // Within the limit, it expands.
    let ok = format!("[[strategy]]\nname = \"keep-last-n\"\nrecent_messages_to_keep = [{}]\n", values[..50].join(", "));
    assert_eq!(parse(&ok).unwrap().configurations.len(), 100);
}

/// experiments/llm.toml is real-summaries.toml with both roles on a model named by the
/// environment only: the same datasets, windows, keys and strategies; the endpoint, the model
/// and the key's variable come from the environment, and without them it says which is unset.
#[test]
fn the_llm_experiment_is_the_real_summaries_comparison_on_a_model_from_the_environment() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments"));
    let (llm_path, real_path) = (dir.join("llm.toml"), dir.join("real-summaries.toml"));
    if !llm_path.exists() {
        eprintln!("skipped: {} not found", llm_path.display());
        return;
    }
    let env = |name: &str| match name {
        "COMPACTLENS_LLM_BASE_URL" => Some("http://127.0.0.1:9/v1".to_string()),
        "COMPACTLENS_LLM_MODEL" => Some("gpt-4.1-mini".to_string()),
        _ => None,
    };
    let llm = Experiment::load_with_env(&llm_path, &env, &Catalog).expect("experiments/llm.toml parses");
    let real = Experiment::load(&real_path, &Catalog).expect("experiments/real-summaries.toml parses");
    assert_eq!((llm.datasets.clone(), llm.windows.clone(), llm.keys.clone()), (real.datasets, real.windows, real.keys));
    assert_eq!(llm.strategies, real.strategies);
    assert_eq!((llm.summarizer, llm.judge), (SummarizerSpec::Llm, JudgeSpec::Llm));
    let settings = llm.llm.as_ref().expect("[llm]");
    for cfg in [settings.summarizer.as_ref().expect("summarizer"), settings.judge.as_ref().expect("judge")] {
        assert_eq!((cfg.model.as_str(), cfg.base_url()), ("gpt-4.1-mini", "http://127.0.0.1:9/v1"));
        assert_eq!(cfg.api_key_env.as_deref(), Some("COMPACTLENS_LLM_API_KEY"));
    }
    let text = std::fs::read_to_string(&llm_path).expect("readable");
    assert!(!text.lines().any(|l| l.starts_with("model =") || l.starts_with("base_url =")), "no endpoint in the file");
    let err = Experiment::load(&llm_path, &Catalog).expect_err("no environment").to_string();
    assert!(err.contains("environment variable COMPACTLENS_LLM_MODEL is not set"), "{err}");
}

/// A configuration's resolved strategy is written as the catalog's type writes it (field order
/// included: `run.json` and the pair's content hash read it), and reads back as that type.
#[test]
fn the_resolved_strategy_is_written_as_the_catalog_writes_it() {
    for name in compaction_strategies::NAMES.iter().chain(compaction_strategies::REFERENCE_NAMES.iter()) {
        let config = compaction_strategies::StrategyConfig::default_for(name).expect("in the catalog");
        let resolved = Catalog.default_for(name).expect("resolves");
        assert_eq!(
            serde_json::to_string(&resolved).expect("writes"),
            serde_json::to_string(&config).expect("writes"),
            "{name}"
        );
        assert_eq!(strategy_config(&resolved).expect("reads back"), config, "{name}");
        let written = Catalog.resolve(name, &serde_json::Map::new()).expect("defaults build");
        assert_eq!(written, resolved, "{name}: no parameter written is every default");
    }
    let other = Resolved::of(&serde_json::json!({"name": "keep-first-n"})).expect("an object");
    assert!(strategy_config(&other).expect_err("no such strategy").problem.contains("keep-first-n"));
}
