//! The on-disk response cache, content-addressed.
//!
//! The key is the SHA-256 of a canonical JSON document holding what determines a response:
//! the protocol, base URL (or, when the endpoint sets one, its `cache_namespace`, which stands
//! in for the URL so a local server on another port still hits), model, messages, output
//! limit, temperature and draw number. Never the
//! API key or any header, so the key cannot leak into the cache and a key rotation keeps hits.
//! Each response is one file, `<dir>/<key[0..2]>/<key>.json`, holding the key document (for
//! inspection) and the response; it is written to a temporary file in the same folder and
//! renamed into place, so a crash never leaves a half-written entry.
//!
//! ```
//! use llm::cache::{CacheKey, CacheMode, ResponseCache};
//! use llm::{ChatMessage, ChatResponse, Protocol, Usage};
//!
//! let dir = std::env::temp_dir().join(format!("llm-cache-doc-{}", std::process::id()));
//! let cache = ResponseCache::new(&dir, CacheMode::Use);
//! let key = CacheKey::new(Protocol::Openai, "http://127.0.0.1:1/v1", "m", &[ChatMessage::user("hi")], 10, 0.0, 0);
//! assert!(cache.get(&key).unwrap().is_none());
//! let response = ChatResponse { text: "hello".into(), usage: Usage::default(), finish_reason: None, model: None, from_cache: false };
//! cache.put(&key, &response).unwrap();
//! assert_eq!(cache.get(&key).unwrap().unwrap().text, "hello");
//! # std::fs::remove_dir_all(&dir).ok();
//! ```

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::config::Protocol;
use crate::error::LlmError;
use crate::types::{ChatMessage, ChatResponse};

/// How the cache is used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// Read hits, call the provider on a miss and store the answer.
    #[default]
    Use,
    /// Always call the provider and overwrite the stored answer.
    Refresh,
    /// Neither read nor write.
    Off,
    /// Read hits; a miss is an error, with no network. Every missing key is remembered, so the
    /// caller can list them all.
    Only,
}

impl CacheMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheMode::Use => "use",
            CacheMode::Refresh => "refresh",
            CacheMode::Off => "off",
            CacheMode::Only => "only",
        }
    }
}

impl FromStr for CacheMode {
    type Err = String;
    fn from_str(s: &str) -> Result<CacheMode, String> {
        match s {
            "use" => Ok(CacheMode::Use),
            "refresh" => Ok(CacheMode::Refresh),
            "off" => Ok(CacheMode::Off),
            "only" => Ok(CacheMode::Only),
            other => Err(format!("unknown cache mode {other:?} (use, refresh, off, only)")),
        }
    }
}

/// Version of the key document; bump it when the document's meaning changes.
const KEY_VERSION: u32 = 1;

/// A cache key: the canonical request document and its hash.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheKey {
    hex: String,
    document: Value,
}

impl CacheKey {
    /// The key of one request. Temperature enters as its decimal text so that `0.3` written in
    /// a file and `0.3` computed are the same key.
    pub fn new(
        protocol: Protocol,
        base_url: &str,
        model: &str,
        messages: &[ChatMessage],
        max_tokens: u32,
        temperature: f32,
        sample: u32,
    ) -> CacheKey {
        // The document's text is deterministic: serde_json writes map keys sorted (or, with its
        // preserve_order feature, in the fixed order written here), and messages serialize
        // their fields in declaration order.
        let document = json!({
            "v": KEY_VERSION,
            "protocol": protocol.as_str(),
            "base_url": base_url,
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": format!("{temperature}"),
            "sample": sample,
        });
        let digest = Sha256::digest(document.to_string().as_bytes());
        let hex = digest.iter().map(|b| format!("{b:02x}")).collect();
        CacheKey { hex, document }
    }
    /// The key with one more field of the request in its document (a field absent from most
    /// requests, so that the keys of those without it are unchanged).
    pub fn with(mut self, field: &str, value: Value) -> CacheKey {
        if let Some(document) = self.document.as_object_mut() {
            document.insert(field.to_string(), value);
        }
        let digest = Sha256::digest(self.document.to_string().as_bytes());
        self.hex = digest.iter().map(|b| format!("{b:02x}")).collect();
        self
    }
    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.hex
    }
}

impl std::fmt::Display for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex)
    }
}

#[derive(Serialize, Deserialize)]
struct Stored {
    key: String,
    request: Value,
    response: ChatResponse,
}

/// A folder of cached responses.
#[derive(Debug)]
pub struct ResponseCache {
    dir: PathBuf,
    mode: CacheMode,
    missing: Mutex<Vec<String>>,
}

impl ResponseCache {
    pub fn new(dir: impl Into<PathBuf>, mode: CacheMode) -> ResponseCache {
        ResponseCache { dir: dir.into(), mode, missing: Mutex::new(Vec::new()) }
    }
    pub fn mode(&self) -> CacheMode {
        self.mode
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// Where the entry for `key` lives.
    pub fn path(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(&key.hex[..2]).join(format!("{}.json", key.hex))
    }
    /// The stored response for `key`, if the mode reads and the entry is there. An entry that
    /// cannot be parsed counts as absent (it is overwritten on the next store).
    pub fn get(&self, key: &CacheKey) -> Result<Option<ChatResponse>, LlmError> {
        if matches!(self.mode, CacheMode::Off | CacheMode::Refresh) {
            return Ok(None);
        }
        let path = self.path(key);
        // Through the bounded reader: a device or a FIFO planted at the entry's name is refused
        // before it is opened; an entry over the cap (by its size, before a byte is read) or
        // not UTF-8 is a miss, as any entry that cannot be parsed.
        let text = match inputs::read_to_string(&path, inputs::Kind::CacheEntry) {
            Ok(t) => t,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(None),
            Err(e) if e.is_too_large() || matches!(e, inputs::InputError::NotUtf8 { .. }) => return Ok(None),
            Err(e) => return Err(LlmError::Cache { path, source: e.into_io() }),
        };
        Ok(serde_json::from_str::<Stored>(&text)
            .ok()
            .filter(|s| s.key == key.hex)
            .map(|s| ChatResponse { from_cache: true, ..s.response }))
    }
    /// Record that `key` was wanted and absent (mode `only`), and return the error for it.
    pub fn miss(&self, key: &CacheKey) -> LlmError {
        if let Ok(mut m) = self.missing.lock() {
            if !m.contains(&key.hex) {
                m.push(key.hex.clone());
            }
        }
        LlmError::CacheMiss { key: key.hex.clone() }
    }
    /// Every key missed so far in mode `only`, in order of first miss.
    pub fn missing(&self) -> Vec<String> {
        self.missing.lock().map(|m| m.clone()).unwrap_or_default()
    }
    /// Store `response` under `key`, atomically, if the mode writes.
    pub fn put(&self, key: &CacheKey, response: &ChatResponse) -> Result<(), LlmError> {
        if matches!(self.mode, CacheMode::Off | CacheMode::Only) {
            return Ok(());
        }
        let path = self.path(key);
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| self.dir.clone());
        let io = |source| LlmError::Cache { path: path.clone(), source };
        fs::create_dir_all(&dir).map_err(io)?;
        let stored = Stored { key: key.hex.clone(), request: key.document.clone(), response: response.clone() };
        let text = serde_json::to_string_pretty(&stored).map_err(|e| io(std::io::Error::other(e)))?;
        // Unique across processes (the pid) and within one (a process-wide counter: two
        // caches over one folder in one process must not share a temporary file either), so
        // concurrent writers of one key each rename a whole file and one of them wins.
        static TMP: AtomicU64 = AtomicU64::new(0);
        let n = TMP.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{}.{}.{n}.tmp", key.hex, std::process::id()));
        let written = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        })();
        if let Err(source) = written {
            fs::remove_file(&tmp).ok();
            return Err(io(source));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Usage;

    fn key(text: &str) -> CacheKey {
        CacheKey::new(Protocol::Openai, "http://h/v1", "m", &[ChatMessage::user(text)], 100, 0.3, 0)
    }

    fn response(text: &str) -> ChatResponse {
        ChatResponse {
            text: text.into(),
            usage: Usage { prompt_tokens: 3, cached_tokens: 1, completion_tokens: 2 },
            finish_reason: Some("stop".into()),
            model: None,
            from_cache: false,
        }
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("llm-cache-{name}-{}", std::process::id()));
        fs::remove_dir_all(&d).ok();
        d
    }

    /// A device or a FIFO at an entry's name is refused at once (never read, never waited on);
    /// an entry over the cap is a miss, decided by its size without reading it.
    #[cfg(unix)]
    #[test]
    fn special_and_oversized_entries_are_refused_or_missed_without_reading_them() {
        let dir = tempdir("special");
        let cache = ResponseCache::new(&dir, CacheMode::Use);
        let k = key("planted");
        let path = cache.path(&k);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink("/dev/zero", &path).expect("link");
        let started = std::time::Instant::now();
        let e = cache.get(&k).expect_err("a device");
        assert!(e.to_string().contains("not a regular file (a device)"), "{e}");
        fs::remove_file(&path).expect("rm");
        let made = std::process::Command::new("mkfifo").arg(&path).status().is_ok_and(|s| s.success());
        assert!(made, "mkfifo");
        let e = cache.get(&k).expect_err("a FIFO");
        assert!(e.to_string().contains("not a regular file (a FIFO)"), "{e}");
        fs::remove_file(&path).expect("rm");
        // Sparse: no disk used, and a reader that read it whole would take seconds.
        let f = fs::File::create(&path).expect("create");
        f.set_len(3 * 1024 * 1024 * 1024).expect("sparse");
        assert!(cache.get(&k).expect("a miss, not an error").is_none());
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn concurrent_writers_of_one_key_leave_one_whole_file() {
        let dir = tempdir("race");
        let k = key("shared");
        let texts: Vec<String> = (0..8).map(|w| format!("writer {w} {}", "x".repeat(20_000))).collect();
        std::thread::scope(|scope| {
            for text in &texts {
                let (dir, k) = (dir.clone(), k.clone());
                // A cache each, as two shards over one folder have.
                scope.spawn(move || {
                    let cache = ResponseCache::new(dir, CacheMode::Use);
                    for _ in 0..50 {
                        cache.put(&k, &response(text)).unwrap();
                        let got = cache.get(&k).unwrap().expect("a whole entry, never a torn one");
                        assert!(texts_contains(&got.text), "a torn or mixed entry");
                    }
                });
            }
        });
        let got = ResponseCache::new(&dir, CacheMode::Use).get(&k).unwrap().expect("an entry");
        assert!(texts.contains(&got.text));
        let leftovers: Vec<_> = fs::read_dir(dir.join(&k.hex()[..2]))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        fs::remove_dir_all(&dir).ok();

        fn texts_contains(t: &str) -> bool {
            t.starts_with("writer ") && t.len() > 20_000
        }
    }

    #[test]
    fn key_depends_on_every_field_and_is_stable() {
        let base = key("hi");
        assert_eq!(base, key("hi"));
        assert_eq!(base.hex().len(), 64);
        let m = [ChatMessage::user("hi")];
        let variants = [
            CacheKey::new(Protocol::Anthropic, "http://h/v1", "m", &m, 100, 0.3, 0),
            CacheKey::new(Protocol::Openai, "http://other/v1", "m", &m, 100, 0.3, 0),
            CacheKey::new(Protocol::Openai, "http://h/v1", "m2", &m, 100, 0.3, 0),
            CacheKey::new(Protocol::Openai, "http://h/v1", "m", &[ChatMessage::system("hi")], 100, 0.3, 0),
            CacheKey::new(Protocol::Openai, "http://h/v1", "m", &m, 101, 0.3, 0),
            CacheKey::new(Protocol::Openai, "http://h/v1", "m", &m, 100, 0.0, 0),
            CacheKey::new(Protocol::Openai, "http://h/v1", "m", &m, 100, 0.3, 1),
        ];
        for v in &variants {
            assert_ne!(v.hex(), base.hex(), "{:?}", v.document);
        }
    }

    #[test]
    fn modes_read_and_write_as_documented() {
        let dir = tempdir("modes");
        let k = key("q");
        let use_ = ResponseCache::new(&dir, CacheMode::Use);
        assert!(use_.get(&k).expect("read").is_none());
        use_.put(&k, &response("one")).expect("write");
        let hit = use_.get(&k).expect("read").expect("hit");
        assert_eq!((hit.text.as_str(), hit.from_cache, hit.usage.prompt_tokens), ("one", true, 3));

        let refresh = ResponseCache::new(&dir, CacheMode::Refresh);
        assert!(refresh.get(&k).expect("read").is_none(), "refresh never reads");
        refresh.put(&k, &response("two")).expect("write");
        assert_eq!(use_.get(&k).expect("read").expect("hit").text, "two");

        let off = ResponseCache::new(&dir, CacheMode::Off);
        assert!(off.get(&k).expect("read").is_none());
        off.put(&key("other"), &response("x")).expect("no-op");
        assert!(!use_.path(&key("other")).exists(), "off never writes");

        let only = ResponseCache::new(&dir, CacheMode::Only);
        assert_eq!(only.get(&k).expect("read").expect("hit").text, "two");
        only.put(&key("other"), &response("x")).expect("no-op");
        assert!(!use_.path(&key("other")).exists(), "only never writes");
        assert!(matches!(only.miss(&key("a")), LlmError::CacheMiss { .. }));
        only.miss(&key("b"));
        only.miss(&key("a"));
        assert_eq!(only.missing(), vec![key("a").hex().to_string(), key("b").hex().to_string()]);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn writes_leave_no_temporary_files_and_corrupt_entries_are_misses() {
        let dir = tempdir("atomic");
        let cache = ResponseCache::new(&dir, CacheMode::Use);
        for i in 0..5 {
            cache.put(&key(&i.to_string()), &response("r")).expect("write");
        }
        let mut files = Vec::new();
        for sub in fs::read_dir(&dir).expect("dir") {
            for f in fs::read_dir(sub.expect("entry").path()).expect("subdir") {
                files.push(f.expect("entry").file_name().to_string_lossy().to_string());
            }
        }
        assert_eq!(files.len(), 5);
        assert!(files.iter().all(|f| f.ends_with(".json") && !f.starts_with('.')), "{files:?}");
        let k = key("0");
        fs::write(cache.path(&k), "{ truncated").expect("corrupt");
        assert!(cache.get(&k).expect("read").is_none());
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn modes_parse() {
        assert_eq!("only".parse::<CacheMode>(), Ok(CacheMode::Only));
        assert!("sometimes".parse::<CacheMode>().is_err());
        assert_eq!(CacheMode::default(), CacheMode::Use);
    }
}
