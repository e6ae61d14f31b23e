//! Writing a file atomically, the one way every file of a run folder is written (see
//! [`crate::folder`] for the rule of which folders a command writes into).

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// A name no one can guess ahead of the write: hashed by the standard library's randomly
/// keyed hasher, with the time, the process and a counter.
fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u32(std::process::id());
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    format!("{:016x}", h.finish())
}

/// Write `bytes` to `path` atomically: into `.<name>.<random>.tmp` in the same folder, created
/// exclusively (an existing file or link at that name is an error, never followed), then
/// renamed over `path` (a rename replaces a link at `path`, it does not write through it).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let mut last = None;
    for _ in 0..4 {
        let tmp = dir.join(format!(".{name}.{}.tmp", random_suffix()));
        let mut file = match fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", tmp.display()))),
        };
        let written = file.write_all(bytes).and_then(|()| file.sync_all()).and_then(|()| fs::rename(&tmp, path));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        return written;
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}
