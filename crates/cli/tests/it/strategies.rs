//! `compactlens strategies --json`: the catalog as data.

use std::process::Command;

#[test]
fn strategies_json_lists_every_strategy_with_its_family_and_params() {
    let out = Command::new(env!("CARGO_BIN_EXE_compactlens"))
        .args(["strategies", "--json"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let entries = json.as_array().expect("an array");

    let names: Vec<&str> = entries.iter().map(|e| e["name"].as_str().expect("name is a string")).collect();
    let mut want = compaction_strategies::NAMES.to_vec();
    want.extend(compaction_strategies::REFERENCE_NAMES);
    assert_eq!(names, want);
    for e in entries {
        let name = e["name"].as_str().unwrap_or_default();
        assert_eq!(e["family"].as_str(), compaction_strategies::family(name), "{name}: family");
    }
    let count = |f: &str| entries.iter().filter(|e| e["family"] == f).count();
    for family in ["seed", "production", "baseline", "reference"] {
        let in_catalog = want.iter().filter(|n| compaction_strategies::family(n) == Some(family)).count();
        assert!(count(family) > 0, "{family}: at least one strategy");
        assert_eq!(count(family), in_catalog, "{family}");
    }

    for e in entries {
        let name = &e["name"];
        let source = e["source"].as_str().unwrap_or_else(|| panic!("{name}: source is a string"));
        assert!(!source.is_empty(), "{name}: empty source");
        let params = e["params"].as_array().unwrap_or_else(|| panic!("{name}: params is an array"));
        for p in params {
            let pname = p["name"].as_str().unwrap_or_else(|| panic!("{name}: param name is a string"));
            assert!(!pname.is_empty(), "{name}: empty param name");
            assert!(p["type"].as_str().is_some_and(|t| !t.is_empty()), "{name}.{pname}: type is a non-empty string");
            assert!(p.get("default").is_some(), "{name}.{pname}: default present");
            // Every params field carries a doc comment, which becomes its meaning.
            assert!(p["meaning"].as_str().is_some_and(|m| !m.trim().is_empty()), "{name}.{pname}: meaning is empty");
        }
    }
    // Types are resolved: an enumeration is a string with its values, an optional parameter is
    // nullable, a plain number is its JSON type.
    let param = |strategy: &str, name: &str| -> serde_json::Value {
        let e = entries.iter().find(|e| e["name"] == strategy).unwrap_or_else(|| panic!("{strategy} listed"));
        let params = e["params"].as_array().unwrap_or_else(|| panic!("{strategy}: params"));
        params.iter().find(|p| p["name"] == name).cloned().unwrap_or_else(|| panic!("{strategy}.{name} listed"))
    };
    let mode = param("priority-chain", "mode");
    assert_eq!(mode["type"], "string", "{mode}");
    assert_eq!(mode["allowed"], serde_json::json!(["auto", "paper", "general"]), "{mode}");
    assert_eq!(mode["default"], "auto", "{mode}");
    let max_tokens = param("truncate", "max_tokens");
    assert_eq!(max_tokens["type"], "integer|null", "{max_tokens}");
    assert_eq!(max_tokens["default"], serde_json::Value::Null, "{max_tokens}");
    assert_eq!(param("prune-then-summarize", "approaching_ratio")["type"], "number|null");
    let keep = param("keep-last-n", "recent_messages_to_keep");
    assert_eq!(keep["type"], "integer", "{keep}");
    assert!(keep.get("allowed").is_none(), "{keep}");
    assert_eq!(param("cut-point", "trigger_ratio")["type"], "number");
    let engine = param("opencode", "engine");
    assert_eq!((engine["allowed"].clone(), engine["default"].clone()), (serde_json::json!(["v1", "v2"]), "v1".into()));
    let gemini = entries.iter().find(|e| e["name"] == "gemini-cli").expect("gemini-cli listed");
    assert_eq!(gemini["family"], "production");
    assert!(gemini["source"].as_str().is_some_and(|s| s.contains("google-gemini/gemini-cli")), "{gemini}");
    assert_eq!(param("gemini-cli", "compression_threshold")["default"], 0.5);
    assert_eq!(param("gemini-cli", "mask_min_prunable_tokens")["default"], 30_000);
    for e in entries {
        for p in e["params"].as_array().into_iter().flatten() {
            let ty = p["type"].as_str().unwrap_or_default();
            assert!(!ty.contains("object") && !ty.contains('['), "{}.{}: unresolved type {ty}", e["name"], p["name"]);
        }
    }

    // The five seed strategies name their document, the production systems their repository
    // or documentation; the baselines and the reference name their family.
    for e in entries {
        let (family, source) = (e["family"].as_str().unwrap_or_default(), e["source"].as_str().unwrap_or_default());
        match family {
            "seed" => assert!(source.ends_with(".txt"), "{e}"),
            "production" => assert!(source.contains('/') || source.starts_with("Anthropic"), "{e}"),
            other => assert_eq!(source, other, "{e}"),
        }
    }
    // The production systems' parameters and defaults, from their sources.
    assert_eq!(param("codex", "trigger_ratio")["default"], 0.9);
    assert_eq!(param("codex", "user_message_max_tokens")["default"], 20_000);
    assert_eq!(param("goose", "threshold")["default"], 0.8);
    assert_eq!(param("openhands", "max_size")["default"], 80);
    assert_eq!(param("openhands", "keep_first")["default"], 4);
    assert_eq!(param("openhands-masking", "attention_window")["default"], 100);
    assert_eq!(param("anthropic-clear-tool-uses", "keep")["default"], 3);
    assert_eq!(param("langchain-summarization", "keep_messages")["default"], 20);
    assert_eq!(param("langchain-summarization", "trim_tokens_to_summarize")["default"], 4_000);
    assert_eq!(param("letta", "sliding_window_percentage")["default"], 0.3);
    assert_eq!(param("opencode", "prune_protect")["default"], 40_000);
    assert_eq!(param("opencode", "prune_minimum")["default"], 20_000);
}
