//! `compactbench strategies [--json]`.

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON: an array of {name, source, summary, params}.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let catalog = compaction::catalog();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&catalog)?);
        return Ok(crate::exit::OK);
    }
    for s in &catalog {
        println!("{}  ({})", s.name, s.source);
        println!("    {}", s.summary);
        for p in &s.params {
            println!("    --{} <{}> = {}    {}", p.name, p.ty, p.default, p.meaning);
        }
        println!();
    }
    Ok(crate::exit::OK)
}
