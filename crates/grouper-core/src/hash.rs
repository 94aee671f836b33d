//! Hash functions for 64-bit group-key words (Luan §3; Karnagel §4).
//!
//! Keys reach the tables already normalized into one `u64` word (see [`crate::keys`]), so every
//! function here hashes exactly one word. The papers compare the same three families:
//! `murmur3` (the 64-bit finalizer: full avalanche, a few multiplies), `multiply_shift`
//! (Dietzfelbinger's one multiply, weak low bits but the top bits are good, which is what we use)
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
    /// Multiply by an odd constant; the high bits carry the hash.
    MultiplyShift,
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

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            HashFn::Murmur3 => "murmur3",
            HashFn::MultiplyShift => "multiply_shift",
            HashFn::Fnv1a => "fnv1a",
            HashFn::Identity => "identity",
        }
    }

    /// Hashes one key word.
    #[inline(always)]
    pub fn hash(self, key: u64) -> u64 {
        match self {
            HashFn::Murmur3 => murmur3(key),
            HashFn::MultiplyShift => multiply_shift(key),
            HashFn::Fnv1a => fnv1a(key),
            HashFn::Identity => key.reverse_bits(),
        }
    }
}

impl fmt::Display for HashFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HashFn {
    type Err = GrouperError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HashFn::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| {
                GrouperError::InvalidOption(format!(
                    "unknown hash function '{s}' (expected murmur3, multiply_shift, fnv1a or identity)"
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
        for h in HashFn::ALL {
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
