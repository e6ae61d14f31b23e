//! Every input file is read through [`read`] (or [`read_to_string`]): the one bounded reader.
//!
//! - Regular files only: a device (`/dev/zero` never ends), a FIFO (blocks forever), a socket
//!   or a folder is refused with a clear error, before it is opened.
//! - A size cap per kind of file ([`Kind::cap`]), checked while reading (a file that grows
//!   while it is read is cut at the cap, not read to the end); the error names the file, its
//!   kind and the flag that raises the cap (`--max-input-bytes`, which sets [`set_max_bytes`]).
//!
//! Dataset files are read line by line with their own per-line cap (`--max-line-bytes`); they
//! use [`check_regular`] for the same refusal of special files.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The flag that raises every cap.
pub const FLAG: &str = "--max-input-bytes";

/// The kinds of input file, each with its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An experiment (`--config`), a price table, a prompt file.
    Settings,
    /// A `summary.csv` or `results.csv` given to the gate.
    Table,
    /// A run folder's `results.jsonl`.
    ResultsLog,
    /// A run folder's `run.json`.
    Manifest,
    /// A recorded session given to `import`, labels given to `judge calibrate`.
    Recording,
    /// One line an external strategy writes (held in memory while it is read).
    StrategyLine,
    /// An entry of the LLM response cache (one request and its response).
    CacheEntry,
    /// A run folder's CSV view read back (`verdict`).
    RunTable,
}

const MIB: u64 = 1024 * 1024;

impl Kind {
    /// The default cap, in bytes.
    pub fn default_cap(self) -> u64 {
        match self {
            Kind::Settings => 16 * MIB,
            Kind::Table => 512 * MIB,
            Kind::ResultsLog => 2048 * MIB,
            Kind::Manifest => 256 * MIB,
            Kind::Recording => 1024 * MIB,
            Kind::StrategyLine => 16 * MIB,
            Kind::CacheEntry => 64 * MIB,
            Kind::RunTable => 512 * MIB,
        }
    }

    /// The cap in force: the default, or what [`set_max_bytes`] set.
    pub fn cap(self) -> u64 {
        match MAX_BYTES.load(Ordering::Relaxed) {
            0 => self.default_cap(),
            n => n,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Settings => "a settings file",
            Kind::Table => "a CSV table",
            Kind::ResultsLog => "a results log",
            Kind::Manifest => "a run manifest",
            Kind::Recording => "a recording",
            Kind::StrategyLine => "an external strategy's line",
            Kind::CacheEntry => "a response cache entry",
            Kind::RunTable => "a run folder's CSV view",
        }
    }
}

/// 0: the defaults.
static MAX_BYTES: AtomicU64 = AtomicU64::new(0);

/// Set the cap of every kind (`--max-input-bytes`); 0 restores the defaults.
pub fn set_max_bytes(bytes: u64) {
    MAX_BYTES.store(bytes, Ordering::Relaxed);
}

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: not a regular file ({what}); give a file", path.display())]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("{}: over the {cap}-byte cap for {kind}; raise it with {FLAG}", path.display())]
    TooLarge { path: PathBuf, cap: u64, kind: &'static str },
    #[error("{}: not UTF-8 text (byte {at})", path.display())]
    NotUtf8 { path: PathBuf, at: usize },
}

impl InputError {
    /// As an I/O error whose message does not repeat the path (for error types that print the
    /// path beside their `io::Error`); the kind is kept (`NotFound` stays `NotFound`).
    pub fn into_io(self) -> io::Error {
        match self {
            InputError::Io { source, .. } => source,
            InputError::NotRegular { what, .. } => {
                io::Error::new(io::ErrorKind::InvalidInput, format!("not a regular file ({what}); give a file"))
            }
            InputError::TooLarge { cap, kind, .. } => io::Error::new(
                io::ErrorKind::InvalidData,
                format!("over the {cap}-byte cap for {kind}; raise it with {FLAG}"),
            ),
            InputError::NotUtf8 { at, .. } => {
                io::Error::new(io::ErrorKind::InvalidData, format!("not UTF-8 text (byte {at})"))
            }
        }
    }

    /// The file is over its cap.
    pub fn is_too_large(&self) -> bool {
        matches!(self, InputError::TooLarge { .. })
    }

    /// The underlying I/O error kind, when there is one (`NotFound` for a missing file).
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            InputError::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// What a file that is not regular is.
fn special(meta: &fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    if t.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO");
        }
        if t.is_socket() {
            return Some("a socket");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("a device");
        }
    }
    Some("a special file")
}

/// Refuse anything but a regular file (links are followed), before it is opened: opening a
/// FIFO would block.
pub fn check_regular(path: &Path) -> Result<(), InputError> {
    let meta = fs::metadata(path).map_err(|source| InputError::Io { path: path.to_path_buf(), source })?;
    match special(&meta) {
        None => Ok(()),
        Some(what) => Err(InputError::NotRegular { path: path.to_path_buf(), what }),
    }
}

/// Read `path`, a regular file of at most `kind`'s cap.
pub fn read(path: &Path, kind: Kind) -> Result<Vec<u8>, InputError> {
    check_regular(path)?;
    let io = |source| InputError::Io { path: path.to_path_buf(), source };
    let file = fs::File::open(path).map_err(io)?;
    // Checked again on the open file: the path may have been swapped since.
    if let Some(what) = special(&file.metadata().map_err(io)?) {
        return Err(InputError::NotRegular { path: path.to_path_buf(), what });
    }
    let cap = kind.cap();
    // A file over the cap by its size is refused before a byte is read (a sparse file of
    // gigabytes costs nothing to make and seconds to read).
    if file.metadata().map_err(io)?.len() > cap {
        return Err(InputError::TooLarge { path: path.to_path_buf(), cap, kind: kind.name() });
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > cap {
        return Err(InputError::TooLarge { path: path.to_path_buf(), cap, kind: kind.name() });
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, kind: Kind) -> Result<String, InputError> {
    String::from_utf8(read(path, kind)?)
        .map_err(|e| InputError::NotUtf8 { path: path.to_path_buf(), at: e.utf8_error().valid_up_to() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_fifos_are_refused_before_reading() {
        #[cfg(unix)]
        {
            let e = read(Path::new("/dev/zero"), Kind::Settings).expect_err("a device");
            assert_eq!(e.to_string(), "/dev/zero: not a regular file (a device); give a file");
        }
        let e = read(Path::new("."), Kind::Table).expect_err("a folder");
        assert!(e.to_string().contains("not a regular file (a folder)"), "{e}");
        let e = read(Path::new("/nonexistent/x"), Kind::Table).expect_err("missing");
        assert_eq!(e.io_kind(), Some(io::ErrorKind::NotFound));
    }

    #[test]
    fn a_file_over_its_cap_names_the_flag() {
        let path = std::env::temp_dir().join(format!("inputs-cap-{}", std::process::id()));
        fs::write(&path, vec![b'x'; 100]).expect("write");
        assert_eq!(read(&path, Kind::Settings).expect("under the default cap").len(), 100);
        set_max_bytes(99);
        let e = read(&path, Kind::Settings).expect_err("over");
        set_max_bytes(0);
        assert!(
            e.to_string().ends_with("over the 99-byte cap for a settings file; raise it with --max-input-bytes"),
            "{e}"
        );
        let _ = fs::remove_file(&path);
    }
}
