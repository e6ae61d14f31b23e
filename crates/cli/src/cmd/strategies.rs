//! `compactlens strategies [--json | --markdown]`.

use std::fmt::Write as _;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON: an array of {name, family, source, summary, params}.
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print Markdown: a table of parameters per strategy (the section of experiments/README.md
    /// between its `strategies:begin` and `strategies:end` markers is this output).
    #[arg(long)]
    markdown: bool,
}

/// The strategies, then the references, each with its family.
pub(crate) fn listing() -> Vec<compaction_strategies::StrategyInfo> {
    let mut all = compaction_strategies::catalog();
    all.extend(compaction_strategies::reference_catalog());
    all
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let catalog = listing();
    if args.json {
        say!("{}", serde_json::to_string_pretty(&catalog)?);
        return Ok(crate::exit::OK);
    }
    if args.markdown {
        say_part!("{}", markdown(&catalog));
        return Ok(crate::exit::OK);
    }
    for s in &catalog {
        say!("{}  [{}]  ({})", s.name, s.family, s.source);
        say!("    {}", s.summary);
        say!("    {}", operates_when(s.name));
        for p in &s.params {
            say!("    --{} <{}> = {}    {}", p.name, p.ty, p.default, p.meaning);
        }
        say!("");
    }
    Ok(crate::exit::OK)
}

/// The catalog as Markdown: a heading and a parameter table per strategy, grouped by family.
pub(crate) fn markdown(catalog: &[compaction_strategies::StrategyInfo]) -> String {
    let mut out = String::new();
    let mut family = "";
    for s in catalog {
        if s.family != family {
            family = s.family;
            let title = match family {
                "seed" => "Seeds: the five documents in `seeds/`",
                "production" => "Production systems (`PRODUCTION.md`)",
                "baseline" => "Baselines",
                _ => "References",
            };
            let _ = writeln!(out, "### {title}\n");
        }
        let _ = writeln!(out, "#### `{}`\n", s.name);
        let source = match s.family {
            "seed" => format!("seed `{}`", s.source),
            "production" => format!("production: {}", s.source),
            "baseline" => "a baseline".to_string(),
            _ => "a reference: replays the recording's own compaction".to_string(),
        };
        let _ = writeln!(out, "{} ({source})\n", s.summary.trim());
        let _ = writeln!(out, "{}\n", operates_when(s.name));
        if s.params.is_empty() {
            let _ = writeln!(out, "No parameters.\n");
            continue;
        }
        let _ = writeln!(out, "| parameter | type | default | meaning |");
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for p in &s.params {
            let _ = writeln!(out, "| `{}` | {} | `{}` | {} |", p.name, cell(&p.ty), p.default, cell(&p.meaning));
        }
        out.push('\n');
    }
    out
}

/// The windows `operates_when` tries the defaults at.
const WINDOWS: [u64; 4] = [8_000, 16_000, 32_000, 128_000];

/// When the strategy can operate ([`compaction::Strategy::can_operate`]), in words, and the
/// usual windows where its defaults cannot.
fn operates_when(name: &str) -> String {
    let Some(strategy) = compaction_strategies::StrategyConfig::default_for(name).and_then(|c| c.build().ok()) else {
        return "Operates at any window.".to_string();
    };
    let cannot: Vec<String> = WINDOWS
        .iter()
        .filter(|w| strategy.can_operate(&compaction::Budget::new(**w)).is_err())
        .map(|w| format!("{}k", w / 1_000))
        .collect();
    let condition = strategy.profile().operating_condition;
    if cannot.is_empty() {
        format!("Operates when {condition}.")
    } else {
        format!("Operates when {condition}; with its defaults, inapplicable at {}.", cannot.join(", "))
    }
}

/// Text made safe for one Markdown table cell.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}
