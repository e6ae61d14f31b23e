//! Writing a command's output file safely: never over one of its inputs, and atomically (a
//! temporary file in the same folder, renamed over the target), so an interrupted or failed
//! command leaves the previous file whole.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The same file on disk: equal canonical paths, or (on Unix) the same device and inode, so
/// hard links are one file too (equal paths when either does not exist).
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// `Some(input)` when `out` is one of `inputs` (or a file found under one of them).
pub fn clobbers<'a>(out: &Path, inputs: impl IntoIterator<Item = &'a Path>) -> Option<PathBuf> {
    inputs.into_iter().find(|i| same_file(out, i)).map(Path::to_path_buf)
}

/// Write `bytes` to `path` through an exclusively created temporary file in the same folder
/// ([`runlog::atomic::write_atomic`]), then rename it over `path`. Missing parent folders are
/// created.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    runlog::atomic::write_atomic(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// `text` safe to print on a terminal: control characters other than newline and tab (an ANSI
/// escape sequence starts with ESC) and the bidirectional overrides and isolates are written
/// as `\u{..}`, so a hostile id can neither drive the terminal nor reverse the line.
pub fn terminal(text: &str) -> String {
    // The verdict's markdown uses the same rule, so there is one.
    report::verdict::render::inert(text)
}

/// An error as the binary prints it: its message, then each cause the message does not already
/// hold. The libraries' errors name their cause in their own message (`{path}: {source}`) and
/// keep it as their `source` too, so printing the whole chain would say the OS text twice; a
/// context added in the binary (`creating DIR`) names nothing, so its cause is appended.
pub fn error_text(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !cause.is_empty() && !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_its_cause_once() {
        /// A library's error: its message holds its cause, which is its source too.
        #[derive(Debug)]
        struct Io {
            path: String,
            source: std::io::Error,
        }
        impl std::fmt::Display for Io {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}: {}", self.path, self.source)
            }
        }
        impl std::error::Error for Io {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.source)
            }
        }
        let os = || std::io::Error::from(std::io::ErrorKind::IsADirectory);
        let typed = anyhow::Error::from(Io { path: "r/summary.csv".into(), source: os() });
        assert_eq!(error_text(&typed), format!("r/summary.csv: {}", os()));
        let wrapped = typed.context("writing the run's tables");
        assert_eq!(error_text(&wrapped), format!("writing the run's tables: r/summary.csv: {}", os()));
        let plain = anyhow::Error::from(os()).context("creating out");
        assert_eq!(error_text(&plain), format!("creating out: {}", os()));
    }

    #[test]
    fn terminal_text_shows_escapes_and_bidi_controls_inert() {
        assert_eq!(terminal("id\u{1b}[31mred\u{7}"), "id\\u{1b}[31mred\\u{7}");
        assert_eq!(terminal("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(terminal("line one\n\tük"), "line one\n\tük");
    }
}
