//! `compactlens generated [--write]`: the files written from the strategy catalog.
//!
//! - `experiments/README.md`, between its `strategies:begin` and `strategies:end` markers:
//!   `compactlens strategies --markdown`.
//! - Every experiment file with a `# catalog: FAMILY...` line: one table at its defaults
//!   (`[[strategy]]` and `name` alone) per strategy of those families. A strategy's table
//!   missing is added after the table of the strategy before it in the catalog; a table of a
//!   strategy no longer in the catalog is removed. Tables with parameters are left as written,
//!   and the tables are never reordered (the order of the tables is the order of the rows).
//! - The gate's baseline (`reports/baseline/`) holds exactly `experiments/ci.toml`'s
//!   configurations: checked here, refreshed by `scripts/regenerate.sh` (a run of the CI
//!   experiment).
//!
//! Without `--write` it only checks, and exits 1 naming each stale file. `scripts/regenerate.sh`
//! is the one command that brings them all up to date.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The command that regenerates every generated file.
pub const REGENERATE: &str = "scripts/regenerate.sh";

/// The line of an experiment file that names the families it lists every strategy of.
const CATALOG_LINE: &str = "# catalog:";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rewrite the stale files (experiments/README.md's strategy section and the experiment
    /// files' strategy tables); without it, only check.
    #[arg(long)]
    write: bool,
    /// The repository's root.
    #[arg(long, default_value = ".")]
    root: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let mut stale: Vec<String> = Vec::new();
    for (path, now, generated) in files(&args.root)? {
        if now == generated {
            continue;
        }
        if args.write {
            crate::output::write_atomic(&path, generated.as_bytes())?;
            say!("wrote {}", path.display());
        } else {
            stale.push(path.display().to_string());
        }
    }
    if let Some(problem) = baseline_problem(&args.root)? {
        if args.write {
            say!("{problem}: {REGENERATE} refreshes it (a run of experiments/ci.toml)");
        } else {
            stale.push(problem);
        }
    }
    if stale.is_empty() {
        if !args.write {
            say!("every generated file is up to date");
        }
        return Ok(crate::exit::OK);
    }
    for s in &stale {
        say!("stale: {s}");
    }
    say!("run {REGENERATE} to regenerate them from the strategy catalog");
    Ok(crate::exit::FAILED)
}

/// Each generated file: its path, its text now and its text as generated.
fn files(root: &Path) -> anyhow::Result<Vec<(PathBuf, String, String)>> {
    let mut out = Vec::new();
    let readme = root.join("experiments/README.md");
    let text = read(&readme)?;
    let section = crate::cmd::strategies::markdown(&crate::cmd::strategies::listing());
    let generated = splice(&text, "strategies", &section).with_context(|| readme.display().to_string())?;
    out.push((readme, text, generated));
    let mut experiments: Vec<PathBuf> = std::fs::read_dir(root.join("experiments"))
        .with_context(|| format!("reading {}", root.join("experiments").display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    experiments.sort();
    for path in experiments {
        let text = read(&path)?;
        if let Some(generated) = sync_tables(&text).with_context(|| path.display().to_string())? {
            out.push((path, text, generated));
        }
    }
    Ok(out)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// `text` with what is between `<!-- NAME:begin -->` and `<!-- NAME:end -->` replaced by
/// `content`.
pub fn splice(text: &str, name: &str, content: &str) -> anyhow::Result<String> {
    let (begin, end) = (format!("<!-- {name}:begin -->\n"), format!("<!-- {name}:end -->"));
    if text.matches(&begin).count() != 1 || text.matches(&end).count() != 1 {
        anyhow::bail!("expected one {} and one {end}", begin.trim_end());
    }
    let start = text.find(&begin).map(|i| i + begin.len()).unwrap_or_default();
    let stop = start + text[start..].find(&end).context("the end marker follows the begin marker")?;
    Ok(format!("{}{content}{}", &text[..start], &text[stop..]))
}

/// The families an experiment file lists every strategy of (its `# catalog:` line), if any.
fn families(text: &str) -> Option<Vec<&str>> {
    let line = text.lines().find_map(|l| l.strip_prefix(CATALOG_LINE))?;
    let words = line.split('(').next().unwrap_or_default();
    Some(words.split_whitespace().collect())
}

/// An experiment file with its tables at defaults in step with the catalog; `None` for a file
/// without a `# catalog:` line.
pub fn sync_tables(text: &str) -> anyhow::Result<Option<String>> {
    let Some(families) = families(text) else {
        return Ok(None);
    };
    for f in &families {
        if !["seed", "baseline", "production"].contains(f) {
            anyhow::bail!("`{CATALOG_LINE}` names {f:?}; the families are seed, baseline and production");
        }
    }
    let expected: Vec<&str> = compaction_strategies::NAMES
        .iter()
        .copied()
        .filter(|n| compaction_strategies::family(n).is_some_and(|f| families.contains(&f)))
        .collect();
    // The head, then one block per table (its `[[strategy]]` line up to the next one).
    let mut blocks: Vec<String> = vec![String::new()];
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "[[strategy]]" {
            blocks.push(String::new());
        }
        if let Some(last) = blocks.last_mut() {
            last.push_str(line);
        }
    }
    let head = blocks.remove(0);
    // A strategy no longer in the catalog (of these families, or at all) loses its table.
    blocks.retain(|b| match bare_name(b) {
        Some(name) => {
            expected.contains(&name.as_str())
                || compaction_strategies::family(&name).is_some_and(|f| !families.contains(&f))
        }
        None => true,
    });
    for (i, name) in expected.iter().enumerate() {
        if blocks.iter().any(|b| bare_name(b).as_deref() == Some(name)) {
            continue;
        }
        // After the table of the nearest strategy before it in the catalog, else before the
        // first table at defaults, else last.
        let before = expected[..i]
            .iter()
            .rev()
            .find_map(|n| blocks.iter().position(|b| bare_name(b).as_deref() == Some(n)).map(|p| p + 1));
        let at = before.or_else(|| blocks.iter().position(|b| bare_name(b).is_some())).unwrap_or(blocks.len());
        let table = format!("[[strategy]]\nname = \"{name}\"\n");
        if at == blocks.len() {
            if let Some(last) = blocks.last_mut() {
                if !last.ends_with("\n\n") {
                    last.push('\n');
                }
            }
            blocks.push(table);
        } else {
            blocks.insert(at, format!("{table}\n"));
        }
    }
    Ok(Some(format!("{head}{}", blocks.concat())))
}

/// The strategy of a table that names it and nothing else (comments and blank lines aside).
fn bare_name(block: &str) -> Option<String> {
    let mut lines = block.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
    if lines.next() != Some("[[strategy]]") {
        return None;
    }
    let name = lines.next()?.strip_prefix("name")?.trim_start().strip_prefix('=')?.trim();
    let name = name.strip_prefix('"')?.strip_suffix('"')?;
    lines.next().is_none().then(|| name.to_string())
}

/// Why the gate's baseline is stale, if it is: its configurations are not `experiments/ci.toml`'s.
fn baseline_problem(root: &Path) -> anyhow::Result<Option<String>> {
    let ci = root.join("experiments/ci.toml");
    let experiment = runlog::experiment::Experiment::load(&ci, &runner::catalog::Catalog)?;
    let path = root.join("reports/baseline/summary.csv");
    let Ok(baseline) = report::gate::SummaryTable::read(&path) else {
        return Ok(Some(format!("{}: missing or unreadable", path.display())));
    };
    let ids: Vec<&str> = baseline.entries.iter().filter(|e| e.is_pooled()).map(|e| e.config_id.as_str()).collect();
    let expected: Vec<&str> = experiment.configurations.iter().map(|c| c.config_id.as_str()).collect();
    Ok((ids != expected).then(|| format!("{}: its configurations are not {}'s", path.display(), ci.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str =
        "# An experiment.\n# catalog: seed baseline (one table per strategy at its defaults)\nname = \"t\"\n\n";

    fn tables(names: &[&str]) -> String {
        names.iter().map(|n| format!("[[strategy]]\nname = \"{n}\"\n")).collect::<Vec<_>>().join("\n")
    }

    fn seeds_and_baselines() -> Vec<&'static str> {
        compaction_strategies::NAMES
            .iter()
            .copied()
            .filter(|n| compaction_strategies::family(n) != Some("production"))
            .collect()
    }

    #[test]
    fn a_file_in_step_with_the_catalog_is_left_as_it_is() {
        let text = format!("{HEAD}{}", tables(&seeds_and_baselines()));
        assert_eq!(sync_tables(&text).expect("syncs"), Some(text));
        assert_eq!(sync_tables("name = \"x\"\n").expect("no catalog line"), None);
    }

    #[test]
    fn a_missing_strategy_is_added_after_the_one_before_it_and_a_removed_one_goes() {
        let all = seeds_and_baselines();
        let (first, second) = (all[0], all[1]);
        // The second strategy missing, a table with a parameter kept where it is, a table of a
        // strategy the catalog no longer has, and a reference left alone.
        let mut without: Vec<&str> = all.clone();
        without.remove(1);
        let text = format!(
            "{HEAD}{}\n[[strategy]]\nname = \"{first}\"\nx = 1\n\n[[strategy]]\nname = \"gone\"\n\n[[strategy]]\nname = \"recorded\"\n",
            tables(&without)
        );
        let synced = sync_tables(&text).expect("syncs").expect("a catalog line");
        let expected = format!(
            "{HEAD}{}\n[[strategy]]\nname = \"{first}\"\nx = 1\n\n[[strategy]]\nname = \"recorded\"\n",
            tables(&all)
        );
        assert_eq!(synced, expected);
        assert!(synced.find(&format!("\"{second}\"")) > synced.find(&format!("\"{first}\"")));
        // The last one missing: appended, a blank line before it.
        let text = format!("{HEAD}{}", tables(&all[..all.len() - 1]));
        assert_eq!(sync_tables(&text).expect("syncs"), Some(format!("{HEAD}{}", tables(&all))));
    }

    #[test]
    fn an_unknown_family_is_an_error_and_splice_needs_its_markers() {
        assert!(sync_tables("# catalog: seeds\n").is_err());
        let text = "a\n<!-- s:begin -->\nold\n<!-- s:end -->\nb\n";
        assert_eq!(splice(text, "s", "new\n").expect("markers"), "a\n<!-- s:begin -->\nnew\n<!-- s:end -->\nb\n");
        assert!(splice("no markers", "s", "x").is_err());
    }
}
