//! The workspace's one seeded generator and one fast hash, written once.
//!
//! - [`SplitMix64`]: a tiny, well-mixed generator whose stream depends on nothing but the seed
//!   (64-bit wrapping integer arithmetic only, so a seed gives the same stream on every platform
//!   and Rust version). The synthetic datasets, the bootstrap's resampling, the LLM client's
//!   retry jitter and the test generators all draw from it.
//! - [`fnv1a`] and [`Fnv`]: FNV-1a, 64 bits, for naming streams, content hashes that only need
//!   to be stable, and the tokenizer's vocabulary lookups (no untrusted keys).
//!
//! Neither is for cryptography; configuration ids and cache keys use SHA-256.

/// The golden-ratio increment of SplitMix64.
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 output function.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The stream whose state starts at `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next number of the stream.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// A number in `0..n` by remainder (`0` when `n` is 0): the generators' draw, kept as
    /// written so seeded outputs stay byte-identical.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A number in `0..n` by multiply-shift (the bias is below 2^-32 for any realistic `n`):
    /// the bootstrap's resampling draw.
    pub fn index(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// The FNV-1a offset basis.
const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
/// The FNV-1a prime.
const FNV_PRIME: u64 = 0x0100_0000_01B3;

/// FNV-1a, 64 bits, of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

/// FNV-1a as a [`std::hash::Hasher`], for maps whose keys are trusted short byte strings.
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(FNV_OFFSET)
    }
}

impl std::hash::Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(FNV_PRIME);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher;

    /// The reference values: SplitMix64 seeded with 0 (the published first outputs), FNV-1a of
    /// "" and "a" (the published test vectors). Every seeded output of the project rests on these.
    #[test]
    fn known_values() {
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(fnv1a(b""), 0xCBF2_9CE4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xAF63_DC4C_8601_EC8C);
        let mut h = Fnv::default();
        h.write(b"a");
        assert_eq!(h.finish(), fnv1a(b"a"));
    }

    #[test]
    fn draws_stay_in_range() {
        let mut r = SplitMix64::new(42);
        for n in [1, 2, 7, 1000] {
            for _ in 0..100 {
                assert!(r.below(n) < n && r.index(n) < n);
            }
        }
        assert_eq!(r.below(0), 0);
    }
}
