//! Merging run folders (typically the shards of one experiment) into one.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::folder::{lock_holder, open_run_folder, refuse_links, RunLock};
use crate::log::{
    count, count_summaries, read_manifest, read_results, record_key, record_line, replay_ms, sort_records,
    write_manifest, write_results, Counts, Manifest, RunData, RunError, Timings, RESULTS_FILE,
};
use crate::record::PairRecord;

/// Combine run folders (typically the shards of one experiment) into `out`: records are
/// deduplicated by pair key (two folders holding different records for one pair are refused),
/// the manifests must be of the same experiment, and `out` gets a merged `results.jsonl`
/// (sorted) and `run.json`. See [`merge_locked`], which also hands back `out`'s lock.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<RunData, RunError> {
    merge_locked(dirs, out).map(|(data, _lock)| data)
}

/// [`merge`], returning the lock of `out` with the merged run, so the caller writes the
/// folder's other files (CSV views, report) before another command can write into it. `out`
/// is opened with [`open_run_folder`] (the folder's lock, no links in it); a
/// folder merged from that a run still holds the lock of is refused.
pub fn merge_locked(dirs: &[PathBuf], out: &Path) -> Result<(RunData, RunLock), RunError> {
    let Some(first_dir) = dirs.first() else {
        return Err(RunError::NothingToMerge);
    };
    let first = read_manifest(first_dir)?;
    // The one rule: `out` is missing, empty, or a run folder of the same experiment; its lock
    // is held from here to the end of the caller's writes.
    let lock = open_run_folder(out, &first.experiment_id)?;
    let mut records: Vec<(usize, PairRecord)> = Vec::new();
    let mut wall_ms = 0;
    let mut problems: Vec<String> = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        if !same_dir(dir, out) {
            if let Some(owner) = lock_holder(dir) {
                return Err(RunError::Busy { dir: dir.clone(), owner });
            }
            refuse_links(dir)?;
        }
        let manifest = read_manifest(dir)?;
        if manifest.experiment_id != first.experiment_id {
            return Err(RunError::Mismatch {
                dir: dir.clone(),
                problem: format!(
                    "holds experiment {}, but {} holds {}; only runs of the same experiment merge",
                    manifest.experiment_id,
                    first_dir.display(),
                    first.experiment_id
                ),
            });
        }
        wall_ms += manifest.timings.wall_ms;
        for p in manifest.dataset_problems {
            if !problems.contains(&p) {
                problems.push(p);
            }
        }
        let (shard_records, _) = read_results(&dir.join(RESULTS_FILE))?;
        records.extend(shard_records.into_iter().map(|r| (i, r)));
    }
    // One record per pair; the same pair recorded differently in two folders is refused (a
    // folder given twice, or a merged folder with its shards, holds equal records).
    let mut seen: HashMap<String, (usize, String)> = HashMap::new();
    let mut kept = Vec::with_capacity(records.len());
    for (i, r) in records {
        let line = record_line(&r);
        match seen.get(&record_key(&r)) {
            Some((j, old)) if *old != line && !same_dir(&dirs[*j], &dirs[i]) => {
                return Err(RunError::Conflict {
                    first: dirs[*j].clone(),
                    second: dirs[i].clone(),
                    dataset: r.dataset.clone(),
                    conversation: r.conversation_id.clone(),
                    config: r.config_id.clone(),
                });
            }
            Some(_) => {}
            None => {
                seen.insert(record_key(&r), (i, line));
                kept.push(r);
            }
        }
    }
    let mut records = kept;
    sort_records(&first.experiment, &mut records);

    // `out` must not already hold results, unless it is one of the folders merged.
    let out_results = out.join(RESULTS_FILE);
    if out_results.exists() && !dirs.iter().any(|d| same_dir(d, out)) {
        return Err(RunError::Exists { dir: out.to_path_buf() });
    }
    write_results(&out_results, &records)?;
    let (ok, failed) = count(&records);
    let (summaries, summaries_failed) = count_summaries(&records);
    let manifest = Manifest {
        shard: None,
        merged_from: dirs.iter().map(|d| d.display().to_string()).collect(),
        counts: Counts {
            pairs_total: first.counts.pairs_total,
            pairs_planned: first.counts.pairs_total,
            ok,
            failed,
            missing: first.counts.pairs_total.saturating_sub(records.len()),
            resumed: 0,
            stale: 0,
            summaries,
            summaries_failed,
        },
        timings: Timings { wall_ms, replay_ms: replay_ms(&records), ..Timings::default() },
        dataset_problems: problems,
        complete: true,
        llm: None,
        stopped: None,
        ..first
    };
    write_manifest(out, &manifest)?;
    Ok((RunData { manifest, records }, lock))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
