//! SplitMix64: a tiny, well-mixed generator whose output depends on nothing but the seed.
//!
//! Only 64-bit integer arithmetic (wrapping), so a seed gives the same stream on every
//! platform and every Rust version. Not for cryptography; it only has to be reproducible.

use seeded::{mix64, GOLDEN};

/// A deterministic pseudo-random stream (SplitMix64).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

/// FNV-1a over the bytes of `label`: a stable hash for naming streams.
pub(crate) fn fnv1a(label: &str) -> u64 {
    seeded::fnv1a(label.as_bytes())
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const UPPER_ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const HEX: &[u8] = b"0123456789abcdef";

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The stream for item `index` of the set named `label` under `seed`: independent of every
    /// other label and index, so generating one item never shifts another.
    pub fn stream(seed: u64, label: &str, index: u64) -> Rng {
        Rng::new(mix64(mix64(seed ^ fnv1a(label)).wrapping_add(index.wrapping_mul(GOLDEN))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// A child stream, so a sub-generator can draw without shifting its parent's sequence by
    /// more than one step.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }

    /// A number in `0..n`; `0` when `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A number in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo + 1)
        }
    }

    /// A `usize` in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        self.range(lo as u64, hi as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    /// One item of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// One string of a non-empty list.
    pub fn pick_str<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// `k` distinct items of `items` (all of them, shuffled, when `k >= len`).
    pub fn sample<T: Clone>(&mut self, items: &[T], k: usize) -> Vec<T> {
        let mut v = items.to_vec();
        self.shuffle(&mut v);
        v.truncate(k);
        v
    }

    fn chars(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n).map(|_| char::from(alphabet[self.below(alphabet.len())])).collect()
    }

    /// `n` lowercase hex digits.
    pub fn hex(&mut self, n: usize) -> String {
        self.chars(HEX, n)
    }

    /// `n` characters of `[0-9A-Za-z]`.
    pub fn base62(&mut self, n: usize) -> String {
        self.chars(BASE62, n)
    }

    /// `n` characters of `[A-Z0-9]`.
    pub fn upper_alnum(&mut self, n: usize) -> String {
        self.chars(UPPER_ALNUM, n)
    }

    /// `n` decimal digits, the first not zero.
    pub fn digits(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n);
        for i in 0..n {
            let d = if i == 0 { 1 + self.below(9) } else { self.below(10) };
            s.push(char::from(b'0' + d as u8));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_splitmix64_stream() {
        // Reference values of SplitMix64 (Vigna's splitmix64.c) seeded with 1234567.
        let mut r = Rng::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
        assert_eq!(r.next_u64(), 9817491932198370423);
    }

    #[test]
    fn streams_differ_by_label_and_index_and_repeat_by_seed() {
        let a = Rng::stream(42, "coding", 0).next_u64();
        assert_eq!(a, Rng::stream(42, "coding", 0).next_u64());
        assert_ne!(a, Rng::stream(42, "coding", 1).next_u64());
        assert_ne!(a, Rng::stream(42, "cms", 0).next_u64());
        assert_ne!(a, Rng::stream(43, "coding", 0).next_u64());
    }

    #[test]
    fn ranges_stay_in_bounds() {
        let mut r = Rng::new(7);
        for _ in 0..1000 {
            let x = r.range(10, 12);
            assert!((10..=12).contains(&x));
            assert!(r.below(3) < 3);
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range(5, 5), 5);
        let id = r.upper_alnum(6);
        assert_eq!(id.len(), 6);
        assert!(id.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
        assert!(!r.digits(7).starts_with('0'));
    }
}
