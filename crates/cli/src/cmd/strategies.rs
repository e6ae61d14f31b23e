//! `compactbench strategies [--json | --markdown]`.

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
fn listing() -> Vec<compaction::StrategyInfo> {
    let mut all = compaction::catalog();
    all.extend(compaction::strategies::reference_catalog());
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
        for p in &s.params {
            say!("    --{} <{}> = {}    {}", p.name, p.ty, p.default, p.meaning);
        }
        say!("");
    }
    Ok(crate::exit::OK)
}

/// The catalog as Markdown: a heading and a parameter table per strategy, grouped by family.
fn markdown(catalog: &[compaction::StrategyInfo]) -> String {
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

/// Text made safe for one Markdown table cell.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}
