//! Hash functions for 64-bit group-key words (Luan §3; Karnagel §4).
//!
//! Keys reach the tables already normalized into one `u64` word (see [`crate::keys`]), so every
//! function here hashes exactly one word. The papers compare the same three families:
//! `murmur3` (the 64-bit finalizer: full avalanche, a few multiplies), `multiply_shift`
//! (Dietzfelbinger's one multiply, weak low bits but the top bits are good, which is what we use;
//! `multiply_shift` is the golden-ratio multiplier, `multiply_shift:random` draws a random odd one,
//! as the scheme's universality assumes, and `multiply_shift:0x...` names one)
//! and `fnv1a` (byte-wise, the classic string hash, slowest). `identity` keeps the key itself and is
//! only sensible for dense keys; it exists so the GPU tuner can compare it.

use std::fmt;
use std::str::FromStr;

use crate::error::GrouperError;

/// A hash function for key words. Tables use the *high* bits of the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HashFn {
    /// MurmurHash3's 64-bit finalizer (`fmix64`).
    #[default]
    Murmur3,
    /// Multiply by an odd constant (the golden ratio's); the high bits carry the hash.
    MultiplyShift,
    /// Multiply-shift with this odd multiplier (drawn at random by [`HashFn::random_multiply_shift`]).
    MultiplyShiftBy(u64),
    /// FNV-1a over the eight little-endian bytes of the word.
    Fnv1a,
    /// The word itself, bit-reversed so that the high bits a table uses vary with dense keys.
    Identity,
}

impl HashFn {
    /// Every hash function, for sweeps and property tests.
    pub const ALL: [HashFn; 4] = [
        HashFn::Murmur3,
        HashFn::MultiplyShift,
        HashFn::Fnv1a,
        HashFn::Identity,
    ];

    /// The family's name, as the command line takes it (`multiply_shift` for both
    /// multiply-shift variants; [`fmt::Display`] names the multiplier too).
    pub fn name(self) -> &'static str {
        match self {
            HashFn::Murmur3 => "murmur3",
            HashFn::MultiplyShift | HashFn::MultiplyShiftBy(_) => "multiply_shift",
            HashFn::Fnv1a => "fnv1a",
            HashFn::Identity => "identity",
        }
    }

    /// Multiply-shift with a random odd multiplier drawn from `seed` (splitmix64): the
    /// random choice Dietzfelbinger's bound on collisions is over.
    pub fn random_multiply_shift(seed: u64) -> HashFn {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        HashFn::MultiplyShiftBy((z ^ (z >> 31)) | 1)
    }

    /// Hashes one key word.
    #[inline(always)]
    pub fn hash(self, key: u64) -> u64 {
        match self {
            HashFn::Murmur3 => murmur3(key),
            HashFn::MultiplyShift => multiply_shift(key),
            HashFn::MultiplyShiftBy(a) => key.wrapping_mul(a),
            HashFn::Fnv1a => fnv1a(key),
            HashFn::Identity => key.reverse_bits(),
        }
    }
}

impl fmt::Display for HashFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HashFn::MultiplyShiftBy(a) => write!(f, "multiply_shift:{a:#018x}"),
            h => f.write_str(h.name()),
        }
    }
}

impl FromStr for HashFn {
    type Err = GrouperError;
    /// A name of [`HashFn::ALL`], `multiply_shift:random` (a multiplier drawn from the clock)
    /// or `multiply_shift:0x...` (an odd multiplier, as `Display` prints it).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(m) = s.strip_prefix("multiply_shift:") {
            if m == "random" {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                return Ok(HashFn::random_multiply_shift(nanos));
            }
            let a = u64::from_str_radix(m.trim_start_matches("0x"), 16).ok();
            return match a {
                Some(a) if a % 2 == 1 => Ok(HashFn::MultiplyShiftBy(a)),
                _ => Err(GrouperError::InvalidOption(format!(
                    "multiply_shift's multiplier must be an odd hexadecimal number or 'random', got '{m}'"
                ))),
            };
        }
        HashFn::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| {
                GrouperError::InvalidOption(format!(
                    "unknown hash function '{s}' (expected murmur3, multiply_shift[:random|:0x...], fnv1a or identity)"
                ))
            })
    }
}

/// MurmurHash3 `fmix64`: two xor-shift-multiply rounds, full avalanche.
#[inline(always)]
pub fn murmur3(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// A byte string's hash (a key's `arrow-row` bytes, when spilled groups are partitioned): eight
/// bytes at a time folded through [`murmur3`], the length mixed in. Fixed, so every spilled run
/// puts a key in the same partition.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = murmur3(h ^ u64::from_le_bytes(w)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    }
    let mut w = [0u8; 8];
    w[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    murmur3(h ^ u64::from_le_bytes(w))
}

/// Dietzfelbinger multiply-shift with a fixed odd multiplier (the golden ratio).
#[inline(always)]
pub fn multiply_shift(k: u64) -> u64 {
    k.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// FNV-1a over the word's eight bytes, least significant first.
#[inline(always)]
pub fn fnv1a(k: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in k.to_le_bytes() {
        h ^= byte as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for h in HashFn::ALL {
            assert_eq!(h.name().parse::<HashFn>().unwrap(), h);
        }
        assert!("md5".parse::<HashFn>().is_err());
        let r = HashFn::random_multiply_shift(7);
        assert_eq!(r.to_string().parse::<HashFn>().unwrap(), r);
        assert!("multiply_shift:0x10".parse::<HashFn>().is_err(), "even");
        assert!("multiply_shift:zz".parse::<HashFn>().is_err());
        let a = "multiply_shift:random".parse::<HashFn>().unwrap();
        assert!(matches!(a, HashFn::MultiplyShiftBy(m) if m % 2 == 1));
    }

    #[test]
    fn random_multipliers_are_odd_and_differ_by_seed() {
        let ms: std::collections::HashSet<u64> = (0..100)
            .map(|s| match HashFn::random_multiply_shift(s) {
                HashFn::MultiplyShiftBy(a) => {
                    assert_eq!(a % 2, 1);
                    a
                }
                h => panic!("{h}"),
            })
            .collect();
        assert_eq!(ms.len(), 100);
        assert_eq!(HashFn::MultiplyShiftBy(3).hash(5), 15);
    }

    #[test]
    fn known_values() {
        // fmix64(0) is 0 by construction; fnv1a of eight zero bytes is a published constant chain.
        assert_eq!(murmur3(0), 0);
        assert_eq!(murmur3(1), 0xb456_bcfc_34c2_cb2c);
        assert_eq!(fnv1a(0), 0xa8c7_f832_281a_39c5);
        assert_eq!(multiply_shift(1), 0x9e37_79b9_7f4a_7c15);
    }

    #[test]
    fn high_bits_spread_dense_keys() {
        // 1024 dense keys into 1024 top-10-bit buckets: a random function fills ~647. FNV-1a's
        // top bits are known to be weaker on keys that differ in one byte (~340 here), which is
        // why it is not the default.
        for h in HashFn::ALL
            .into_iter()
            .chain([HashFn::random_multiply_shift(1)])
        {
            let mut seen = std::collections::HashSet::new();
            for k in 0..1024u64 {
                seen.insert(h.hash(k) >> 54);
            }
            let floor = if h == HashFn::Fnv1a { 300 } else { 600 };
            assert!(
                seen.len() > floor,
                "{h} spreads dense keys over {} buckets",
                seen.len()
            );
        }
    }
}
