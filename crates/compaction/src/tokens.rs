//! Token meters: the character heuristics strategies' documents use, and exact BPE counting.
//!
//! A [`TokenCounter`] measures a message in its own *units* and turns a sum of units into
//! tokens. For most counters a unit is a token; [`CharsOver4`] is the exception: it
//! sums characters over the whole context and rounds once (`ceil(total_chars / 4)`), so its
//! unit is a character. Units are additive, which is what lets a [`crate::Context`] cache them
//! per message and keep running totals: appending k messages costs O(k).
//!
//! Character counts follow the language a document's code is written in: TypeScript's
//! `String.length` counts UTF-16 code units ([`js_len`]); Go's `len(s)` ([`LenOver4Plus4`])
//! counts bytes. On ASCII text they agree; on CJK or emoji they differ by up to 3x.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

// FNV-1a (the workspace's one copy): a fast hash for the short byte strings of the vocabulary
// (no untrusted keys: the set is built from the vocabulary and only looked up).
use seeded::Fnv;
use std::sync::LazyLock;

use crate::message::Message;

/// Where a counter keeps its per-message units inside a [`crate::Context`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CacheSlot {
    /// [`CharsOver4`].
    Chars,
    /// [`CharsOver4Plus2`].
    Chars4Plus2,
    /// [`LenOver4Plus4`].
    Len4Plus4,
    /// [`CharsOver4Role4`].
    Chars4Role4,
    /// [`Exact`] with o200k_base.
    O200k,
    /// [`Exact`] with cl100k_base.
    Cl100k,
    /// [`BpeRole4`] without a margin.
    Bpe4,
    /// [`BpeRole4`] with the document's 10% margin ([`BpeRole4::DOCUMENT_MARGIN`]).
    Bpe4Margin10,
}

impl CacheSlot {
    /// How many slots there are.
    pub const COUNT: usize = 8;
    /// The slot's position in a per-entry cache.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Measures messages in tokens.
pub trait TokenCounter: Send + Sync {
    /// Stable name, used in reports (`chars/4`, `o200k_base`, ...).
    fn name(&self) -> &'static str;
    /// Additive cost of one message, in this counter's units.
    fn message_units(&self, message: &Message) -> u64;
    /// Tokens for a sum of message units (identity unless the unit is not a token).
    fn tokens_from_units(&self, units: u64) -> u64 {
        units
    }
    /// Tokens of a bare text with no message overhead.
    fn text_tokens(&self, text: &str) -> u64;
    /// The cache slot for this counter's units, if it has one. Counters that return `None`
    /// are recomputed on every call.
    fn cache_slot(&self) -> Option<CacheSlot> {
        None
    }
    /// Tokens of one message on its own.
    fn message_tokens(&self, message: &Message) -> u64 {
        self.tokens_from_units(self.message_units(message))
    }
    /// Tokens of a list of messages.
    fn messages_tokens(&self, messages: &[Message]) -> u64 {
        self.tokens_from_units(messages.iter().map(|m| self.message_units(m)).sum())
    }
}

/// JavaScript `String.length`: UTF-16 code units.
pub fn js_len(text: &str) -> u64 {
    text.encode_utf16().count() as u64
}

/// `Math.ceil(len / 4)` with JavaScript's length.
pub fn js_ceil4(text: &str) -> u64 {
    js_len(text).div_ceil(4)
}

/// The JSON text a tool call's arguments stand for: the recorded string itself. A document's
/// code may stringify an arguments object; our messages already carry that string.
fn call_args(args: &str) -> &str {
    args
}

/// `Math.ceil(totalChars / 4)` over message `content` only, rounded once over the whole list.
/// Tool calls are not counted (only `content` strings are).
#[derive(Debug, Clone, Copy, Default)]
pub struct CharsOver4;

impl TokenCounter for CharsOver4 {
    fn name(&self) -> &'static str {
        "chars/4"
    }
    fn message_units(&self, m: &Message) -> u64 {
        js_len(&m.content)
    }
    fn tokens_from_units(&self, units: u64) -> u64 {
        units.div_ceil(4)
    }
    fn text_tokens(&self, text: &str) -> u64 {
        js_ceil4(text)
    }
    fn cache_slot(&self) -> Option<CacheSlot> {
        Some(CacheSlot::Chars)
    }
}

/// `JSON.stringify(result).length` for a tool result we hold as text.
///
/// Text that parses as a JSON object or array stands for that value and counts as its compact
/// serialization; any other text is a string value, which `JSON.stringify` wraps in quotes and
/// escapes (`"`, `\\`, control characters). Lengths are UTF-16 code units, as in JavaScript.
pub fn js_stringify_result_len(text: &str) -> u64 {
    let t = text.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
            return js_len(&v.to_string());
        }
    }
    2 + text.bytes().map(|b| u64::from(ESCAPED_UNITS[usize::from(b)])).sum::<u64>()
}

/// What each byte of a UTF-8 string adds to the UTF-16 length of its JSON string literal
/// (without the quotes): `"`, `\\` and the control characters with a short escape (`\n`, `\r`,
/// `\t`, `\b`, `\f`) 2, the other control characters 6 (`\u00XX`), any other ASCII byte 1; a
/// continuation byte 0, the lead byte of a four-byte sequence 2 (a surrogate pair), of a
/// shorter one 1. Read byte by byte, the sum is the character-by-character one.
static ESCAPED_UNITS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match b as u8 {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            0x20..=0x7f => 1,
            0x80..=0xbf => 0,
            0xc0..=0xef => 1,
            0xf0..=0xff => 2,
        };
        b += 1;
    }
    t
};

/// Per message `2 + ceil(content/4)`, plus `ceil(name/4) + ceil(args/4)` for
/// every tool call; a tool result counts `ceil(JSON.stringify(result).length / 4)` (see
/// [`js_stringify_result_len`]), as the document's `estimateMessagesTokens` does for its
/// `tool-result` parts.
#[derive(Debug, Clone, Copy, Default)]
pub struct CharsOver4Plus2;

impl TokenCounter for CharsOver4Plus2 {
    fn name(&self) -> &'static str {
        "ceil(chars/4)+2"
    }
    fn message_units(&self, m: &Message) -> u64 {
        let calls: u64 = m.tool_calls.iter().map(|c| js_ceil4(&c.name) + js_ceil4(call_args(&c.arguments))).sum();
        let content = match m.role {
            crate::message::Role::Tool => js_stringify_result_len(&m.content).div_ceil(4),
            _ => js_ceil4(&m.content),
        };
        2 + content + calls
    }
    fn text_tokens(&self, text: &str) -> u64 {
        js_ceil4(text)
    }
    fn cache_slot(&self) -> Option<CacheSlot> {
        Some(CacheSlot::Chars4Plus2)
    }
}

/// Per message `len(content)/4 + 4` with Go's `len` (bytes) and integer
/// division. The system prompt is `len(system)/4` with no overhead.
#[derive(Debug, Clone, Copy, Default)]
pub struct LenOver4Plus4;

impl TokenCounter for LenOver4Plus4 {
    fn name(&self) -> &'static str {
        "len/4+4"
    }
    fn message_units(&self, m: &Message) -> u64 {
        m.content.len() as u64 / 4 + 4
    }
    fn text_tokens(&self, text: &str) -> u64 {
        text.len() as u64 / 4
    }
    fn cache_slot(&self) -> Option<CacheSlot> {
        Some(CacheSlot::Len4Plus4)
    }
}

/// Per message 4 tokens of role overhead plus `ceil(text/4)` over its
/// text, tool-call names and JSON arguments, and tool outputs.
///
/// As a token service's `countPartTokens` does, a tool output counts as
/// `ceil(JSON.stringify(output).length / 4)` (see [`js_stringify_result_len`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct CharsOver4Role4;

impl TokenCounter for CharsOver4Role4 {
    fn name(&self) -> &'static str {
        "ceil(chars/4)+4"
    }
    fn message_units(&self, m: &Message) -> u64 {
        let calls: u64 = m.tool_calls.iter().map(|c| js_ceil4(&c.name) + js_ceil4(call_args(&c.arguments))).sum();
        let body = if m.role == crate::message::Role::Tool {
            js_stringify_result_len(&m.content).div_ceil(4)
        } else {
            js_ceil4(&m.content)
        };
        4 + body + calls
    }
    fn text_tokens(&self, text: &str) -> u64 {
        js_ceil4(text)
    }
    fn cache_slot(&self) -> Option<CacheSlot> {
        Some(CacheSlot::Chars4Role4)
    }
}

/// `JSON.stringify(output)` for a tool result we hold as text: text that parses as a JSON
/// object or array as its compact serialization, any other text as a JSON string.
pub fn js_stringify_result(text: &str) -> String {
    let t = text.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
            return v.to_string();
        }
    }
    serde_json::to_string(text).unwrap_or_default()
}

/// A token service's `countMessageTokens` with `gpt-tokenizer`
/// (o200k_base for current models): 4 tokens of role overhead per message plus the BPE tokens
/// of its text, of each tool call's name and JSON arguments, and of a tool result's
/// `JSON.stringify(output)`. With a margin (Gap 6's `countTokensWithModelAdjustment` for a
/// non-OpenAI model) each counted text is `ceil(tokens x (1 + margin))`.
#[derive(Clone, Copy, Debug)]
pub struct BpeRole4 {
    exact: Exact,
    margin: Option<f64>,
}

impl BpeRole4 {
    /// Gap 6's safety margin for non-OpenAI models (10%).
    pub const DOCUMENT_MARGIN: f64 = 0.10;
    /// The counter with o200k_base and `margin` (`None`: an OpenAI model, counted as is).
    pub fn new(margin: Option<f64>) -> BpeRole4 {
        BpeRole4 { exact: Exact::o200k(), margin: margin.filter(|m| *m > 0.0) }
    }
    /// `countTokens(text)`, adjusted by the margin when there is one.
    pub fn count(&self, text: &str) -> u64 {
        let base = self.exact.count(text);
        match self.margin {
            None => base,
            Some(m) => (base as f64 * (1.0 + m)).ceil() as u64,
        }
    }
}

impl TokenCounter for BpeRole4 {
    fn name(&self) -> &'static str {
        if self.margin.is_some() {
            "o200k_base+4 (+margin)"
        } else {
            "o200k_base+4"
        }
    }
    fn message_units(&self, m: &Message) -> u64 {
        let calls: u64 = m.tool_calls.iter().map(|c| self.count(&c.name) + self.count(call_args(&c.arguments))).sum();
        let body = if m.role == crate::message::Role::Tool {
            self.count(&js_stringify_result(&m.content))
        } else {
            self.count(&m.content)
        };
        4 + body + calls
    }
    fn text_tokens(&self, text: &str) -> u64 {
        self.count(text)
    }
    fn cache_slot(&self) -> Option<CacheSlot> {
        match self.margin {
            None => Some(CacheSlot::Bpe4),
            Some(m) if m == Self::DOCUMENT_MARGIN => Some(CacheSlot::Bpe4Margin10),
            Some(_) => None,
        }
    }
}

/// Which exact BPE vocabulary to count with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, o-series, GPT-5.
    O200kBase,
    /// GPT-4, GPT-3.5.
    Cl100kBase,
}

/// Exact token counting with an OpenAI BPE vocabulary embedded in the binary.
///
/// A message costs the tokens of its content, of each tool call's name and arguments, plus a
/// fixed per-message overhead for the chat template (3 tokens per message and 1 per tool call,
/// as OpenAI's chat format adds).
///
/// Text is split by the vocabulary's pre-tokenization pattern; a piece that is itself a token
/// (most words, numbers and punctuation runs) counts 1 after a hash lookup, and only the other
/// pieces go through the BPE encoder, as tiktoken does.
#[derive(Clone, Copy)]
pub struct Exact {
    encoding: Encoding,
    vocab: &'static Vocab,
}

/// A tokenizer with the set of its tokens' bytes, for the one-token fast path of [`Exact`].
struct Vocab {
    tokenizer: &'static bpe_openai::Tokenizer,
    tokens: HashSet<&'static [u8], BuildHasherDefault<Fnv>>,
    /// Length of the longest token, in bytes: longer pieces skip the lookup.
    longest: usize,
}

impl Vocab {
    fn new(tokenizer: &'static bpe_openai::Tokenizer) -> Vocab {
        let bpe = &tokenizer.bpe;
        let mut tokens = HashSet::with_capacity_and_hasher(bpe.num_tokens(), BuildHasherDefault::default());
        let mut longest = 0;
        // Token ids are below the vocabulary size, which the BPE stores as u32 ids.
        for id in 0..bpe.num_tokens() as u32 {
            let bytes = bpe.token_bytes(id);
            longest = longest.max(bytes.len());
            tokens.insert(bytes);
        }
        Vocab { tokenizer, tokens, longest }
    }
    fn count(&self, text: &str) -> u64 {
        // o200k_base and cl100k_base do not normalize, so the text is split as it is.
        self.tokenizer
            .split(text)
            .map(|piece| {
                let bytes = piece.as_bytes();
                if bytes.len() <= self.longest && self.tokens.contains(bytes) {
                    1
                } else {
                    self.tokenizer.bpe.count(bytes) as u64
                }
            })
            .sum()
    }
}

static O200K: LazyLock<Vocab> = LazyLock::new(|| Vocab::new(bpe_openai::o200k_base()));
static CL100K: LazyLock<Vocab> = LazyLock::new(|| Vocab::new(bpe_openai::cl100k_base()));

impl std::fmt::Debug for Exact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exact").field("encoding", &self.encoding).finish()
    }
}

/// Per-message chat-template overhead of [`Exact`].
pub const EXACT_MESSAGE_OVERHEAD: u64 = 3;
/// Per-tool-call overhead of [`Exact`].
pub const EXACT_CALL_OVERHEAD: u64 = 1;

impl Exact {
    /// An exact counter for `encoding`.
    pub fn new(encoding: Encoding) -> Exact {
        let vocab: &'static Vocab = match encoding {
            Encoding::O200kBase => &O200K,
            Encoding::Cl100kBase => &CL100K,
        };
        Exact { encoding, vocab }
    }
    /// An exact o200k_base counter.
    pub fn o200k() -> Exact {
        Exact::new(Encoding::O200kBase)
    }
    /// An exact cl100k_base counter.
    pub fn cl100k() -> Exact {
        Exact::new(Encoding::Cl100kBase)
    }
    /// Which encoding it counts.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
    /// Tokens of `text` under this encoding.
    ///
    /// Short texts are remembered per thread: the same few (a masking placeholder, `{}`
    /// arguments, a tool's name, a summary's note lines, which the offline summarizer measures
    /// again in each summary that keeps them) are counted over and over, and a lookup costs a
    /// small part of an encoding. The answer is the encoder's either way.
    pub fn count(&self, text: &str) -> u64 {
        if text.len() > SHORT_TEXT {
            return self.vocab.count(text);
        }
        SHORT_COUNTS.with(|counts| {
            let mut counts = counts.borrow_mut();
            let map = &mut counts[self.encoding as usize];
            if let Some(n) = map.get(text) {
                return *n;
            }
            let n = self.vocab.count(text);
            if map.len() >= SHORT_TEXTS_KEPT {
                map.clear();
            }
            map.insert(text.into(), n);
            n
        })
    }
}

/// Texts up to this many bytes are remembered by [`Exact::count`].
const SHORT_TEXT: usize = 256;
/// How many short texts a thread remembers per encoding before it starts again.
const SHORT_TEXTS_KEPT: usize = 16_384;

type ShortCounts = [std::collections::HashMap<Box<str>, u64, BuildHasherDefault<Fnv>>; 2];

thread_local! {
    static SHORT_COUNTS: std::cell::RefCell<ShortCounts> = std::cell::RefCell::new(Default::default());
}

impl TokenCounter for Exact {
    fn name(&self) -> &'static str {
        match self.encoding {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }
    fn message_units(&self, m: &Message) -> u64 {
        let calls: u64 =
            m.tool_calls.iter().map(|c| EXACT_CALL_OVERHEAD + self.count(&c.name) + self.count(&c.arguments)).sum();
        EXACT_MESSAGE_OVERHEAD + self.count(&m.content) + calls
    }
    fn text_tokens(&self, text: &str) -> u64 {
        self.count(text)
    }
    fn cache_slot(&self) -> Option<CacheSlot> {
        Some(match self.encoding {
            Encoding::O200kBase => CacheSlot::O200k,
            Encoding::Cl100kBase => CacheSlot::Cl100k,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::text::{huge, render, TextKind};

    proptest::proptest! {
        /// The byte table gives the length `JSON.stringify` gives, counted character by
        /// character, on any text (not JSON, so it is taken as a string value).
        #[test]
        fn the_escaped_length_read_by_bytes_is_the_one_read_by_characters(text in "\\PC*|[\\x00-\\x1f\"\\\\a-z\u{80}-\u{10ffff}]{0,40}") {
            let by_chars: u64 = text
                .chars()
                .map(|c| match c {
                    '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
                    c if (c as u32) < 0x20 => 6,
                    c => c.len_utf16() as u64,
                })
                .sum();
            let text = format!("x{text}");
            proptest::prop_assert_eq!(js_stringify_result_len(&text), 2 + 1 + by_chars);
        }
    }

    /// The one-token fast path counts what the BPE encoder alone counts.
    #[test]
    fn exact_fast_path_counts_what_the_encoder_counts() {
        let mut texts: Vec<String> = vec![
            String::new(),
            " ".into(),
            "hello world".into(),
            "  leading and trailing  \n\n\t".into(),
            "fn main() { println!(\"{}\", 1234567); }".into(),
            "ÄÖÜ straße 日本語のテキスト 👨\u{200d}👩\u{200d}👧 e\u{301}".into(),
            "a".repeat(500),
            "1".repeat(77),
            " ".repeat(300),
        ];
        for (i, kind) in TextKind::ALL.into_iter().enumerate() {
            for len in [1, 7, 60, 400] {
                texts.push(render(kind, len, (i * 1_000 + len) as u64));
            }
        }
        texts.push(huge(20_000, 3));
        for (exact, tokenizer) in
            [(Exact::o200k(), bpe_openai::o200k_base()), (Exact::cl100k(), bpe_openai::cl100k_base())]
        {
            for text in &texts {
                assert_eq!(
                    exact.count(text),
                    tokenizer.count(text.as_str()) as u64,
                    "{:?} on {text:?}",
                    exact.encoding()
                );
            }
        }
    }

    #[test]
    fn the_vocabulary_set_holds_every_token() {
        let v: &Vocab = &O200K;
        assert_eq!(v.tokens.len(), v.tokenizer.bpe.num_tokens());
        assert!(v.tokens.contains(" the".as_bytes()));
        assert!(v.longest >= 16);
    }
}
