//! The one rule for writing into a folder, and the run lock.
//!
//! - [`refuse_foreign_folder`]: a command writes into a folder only if it is missing, empty,
//!   or a run folder of the same experiment (`run`, `run --resume` and `merge` alike).
//! - [`crate::atomic::write_atomic`]: every file a command writes goes through a temporary file
//!   created exclusively (`create_new`, so a link or file planted at its name is never followed
//!   or overwritten) under a random name in the same folder, then renamed over the target.
//! - [`RunLock`]: an exclusive OS file lock (`flock` on Unix) on `.compactlens.lock`, held for
//!   the run's life and released by the OS when the process ends, however it ends. Process ids
//!   are not trusted (two containers sharing a volume have separate PID namespaces): the owner's
//!   host and process id are written into the file for the message only.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::log::{io_err, read_manifest, RunError, LOCK_FILE, MANIFEST_FILE, RESULTS_FILE};

/// The files a run folder holds, which a command reads or writes there: none of them may be
/// a symbolic link ([`refuse_links`]), so no write or append goes through one to a file
/// outside the folder, and no read follows one to a device.
pub const RUN_FOLDER_FILES: [&str; 9] = [
    RESULTS_FILE,
    MANIFEST_FILE,
    "results.csv",
    "summary.csv",
    "probes.csv",
    "compactions.csv",
    "real_vs_stand_in.csv",
    "report.html",
    LOCK_FILE,
];

/// Refuse a run folder where one of [`RUN_FOLDER_FILES`] is a symbolic link.
pub fn refuse_links(dir: &Path) -> Result<(), RunError> {
    for name in RUN_FOLDER_FILES {
        let path = dir.join(name);
        if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(RunError::Link { path });
        }
    }
    Ok(())
}

/// Open `dir` to write a run of `experiment_id` into it: refuse a foreign folder
/// ([`refuse_foreign_folder`]), create it, take its [`RunLock`], then check again under the
/// lock (the folder may have changed while the lock was waited for) and refuse links in it
/// ([`refuse_links`]). A folder this call created is removed again when it fails.
pub fn open_run_folder(dir: &Path, experiment_id: &str) -> Result<RunLock, RunError> {
    // Checked before the lock file is created (none is left in someone else's folder); a
    // folder a live process holds the lock of is in the middle of being written, so its state
    // says nothing yet: that process is named instead.
    if let Err(e) = refuse_foreign_folder(dir, experiment_id) {
        return Err(match lock_holder(dir) {
            Some(owner) => RunError::Locked { dir: dir.to_path_buf(), owner },
            None => e,
        });
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    let created = match fs::create_dir(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => false,
        Err(e) => return Err(RunError::Io { path: dir.to_path_buf(), source: e }),
    };
    let opened = RunLock::take(dir).and_then(|lock| {
        refuse_links(dir)?;
        refuse_foreign_folder(dir, experiment_id)?;
        Ok(lock)
    });
    if opened.is_err() && created {
        // Only an empty folder is removed: one another process wrote into meanwhile stays.
        let _ = fs::remove_dir(dir);
    }
    opened
}

/// Who holds the lock of `dir`, if a live process does; the lock file is neither created nor
/// changed (for folders a command only reads, such as the shards a merge combines).
pub fn lock_holder(dir: &Path) -> Option<String> {
    let path = dir.join(LOCK_FILE);
    if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let file = fs::File::open(&path).ok()?;
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            None
        }
        Err(fs::TryLockError::WouldBlock) => {
            let owner = fs::read_to_string(&path).unwrap_or_default().trim().to_string();
            Some(if owner.is_empty() { "a process that has not written its name yet".into() } else { owner })
        }
        Err(fs::TryLockError::Error(_)) => None,
    }
}

/// Refuse an existing, non-empty `dir` that is not a run folder (no `run.json`), or that is
/// the run of another experiment: a command never writes its files over someone else's.
pub fn refuse_foreign_folder(dir: &Path, experiment_id: &str) -> Result<(), RunError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(RunError::Io { path: dir.to_path_buf(), source: e }),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(LOCK_FILE))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    if !names.iter().any(|n| n == MANIFEST_FILE) {
        names.sort();
        return Err(RunError::NotARun { dir: dir.to_path_buf(), entry: names[0].clone() });
    }
    same_experiment(dir, &read_manifest(dir)?, experiment_id)
}

/// Refuse a run folder whose manifest `old` is of another experiment.
pub fn same_experiment(dir: &Path, old: &crate::log::Manifest, experiment_id: &str) -> Result<(), RunError> {
    if old.experiment_id != experiment_id {
        return Err(RunError::Mismatch {
            dir: dir.to_path_buf(),
            problem: format!(
                "holds experiment {}, not {experiment_id} (the experiment file or its datasets changed)",
                old.experiment_id
            ),
        });
    }
    Ok(())
}

/// A run folder's lock: an exclusive OS lock on `.compactlens.lock`, held while the value
/// lives (the OS releases it when the process ends, a `kill -9` included).
pub struct RunLock {
    path: PathBuf,
    _file: fs::File,
}

/// This machine's name, for the lock's message.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "an unknown host".into())
}

impl RunLock {
    /// The folder this lock holds.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Take the lock of `dir`, or say who holds it.
    pub fn take(dir: &Path) -> Result<RunLock, RunError> {
        let path = dir.join(LOCK_FILE);
        for _ in 0..4 {
            if fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
                return Err(RunError::Io { path, source: io::Error::other("the lock is not a regular file") });
            }
            let mut file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(io_err(&path))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => {
                    let owner = fs::read_to_string(&path).unwrap_or_default().trim().to_string();
                    let owner =
                        if owner.is_empty() { "a process that has not written its name yet".into() } else { owner };
                    return Err(RunError::Locked { dir: dir.to_path_buf(), owner });
                }
                Err(fs::TryLockError::Error(e)) => return Err(RunError::Io { path, source: e }),
            }
            // The file may have been removed (by the holder releasing it) between our open and
            // our lock: then the lock is on a file no one else will see; take it again.
            if !same_file(&file, &path) {
                continue;
            }
            let owner = format!("process {} on {}", std::process::id(), host_name());
            file.set_len(0).and_then(|()| file.write_all(owner.as_bytes())).map_err(io_err(&path))?;
            return Ok(RunLock { path, _file: file });
        }
        Err(RunError::Locked { dir: dir.to_path_buf(), owner: "another process, taking and releasing it".into() })
    }
}

#[cfg(unix)]
fn same_file(file: &fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_file: &fs::File, path: &Path) -> bool {
    path.exists()
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Removed while still held: a process that opened it before sees it locked, one that
        // opens it after creates a new one.
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::atomic::write_atomic;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("runlog-folder-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp");
        dir
    }

    #[test]
    fn the_lock_is_exclusive_names_its_owner_and_is_released() {
        let dir = temp("lock");
        let held = RunLock::take(&dir).expect("free");
        let e = RunLock::take(&dir).err().expect("held");
        let text = e.to_string();
        assert!(text.contains(&format!("process {} on ", std::process::id())), "{text}");
        drop(held);
        assert!(!dir.join(LOCK_FILE).exists());
        // A lock file left by a process that is gone (a killed run, or PID 1 of another
        // container) holds no OS lock: it is taken.
        fs::write(dir.join(LOCK_FILE), "process 1 on elsewhere").expect("write");
        assert!(RunLock::take(&dir).is_ok());
        let _ = fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_a_temporary_name_is_never_written_through() {
        let dir = temp("link");
        let victim = dir.join("victim.txt");
        fs::write(&victim, "precious").expect("write");
        for planted in ["report.html.tmp", "run.json.tmp", ".report.html.tmp"] {
            std::os::unix::fs::symlink(&victim, dir.join(planted)).expect("link");
        }
        write_atomic(&dir.join("report.html"), b"new").expect("writes");
        assert_eq!(fs::read_to_string(&victim).expect("read"), "precious");
        assert_eq!(fs::read_to_string(dir.join("report.html")).expect("read"), "new");
        // A link at the target itself is replaced, not written through.
        std::os::unix::fs::symlink(&victim, dir.join("run.json")).expect("link");
        write_atomic(&dir.join("run.json"), b"{}").expect("writes");
        assert_eq!(fs::read_to_string(&victim).expect("read"), "precious");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_folder_is_written_only_when_empty_or_a_run_of_the_same_experiment() {
        let dir = temp("rule");
        assert!(refuse_foreign_folder(&dir.join("missing"), "e").is_ok());
        assert!(refuse_foreign_folder(&dir, "e").is_ok());
        fs::write(dir.join("summary.csv"), "x").expect("write");
        let e = refuse_foreign_folder(&dir, "e").expect_err("foreign");
        assert!(e.to_string().contains("not empty and not a run folder (it holds summary.csv)"), "{e}");
        let _ = fs::remove_dir_all(&dir);
    }
}
