//! Single-threaded hash tables from key words to dense group ids, one per hashing scheme of
//! Luan's study (§3): [`LinearTable`] (linear probing, the default everywhere),
//! [`ChainedTable`] (Chain: a directory of bucket heads and a next link per group),
//! [`ChainedPlusTable`] (Chain+: the directory holds each bucket's first key inline) and
//! [`CuckooTable`] (2 or 4 sub-tables, one hash function each). Every table hands out dense
//! group ids in insertion order and keeps the key word of each group, so the accumulators and
//! the merge never see the scheme. [`Buckets`] is the other axis Karnagel measured (§4): how a
//! hash picks a bucket, by its high bits (power-of-two tables, the default) or modulo the
//! table's size (any size, as his tables of twice the groups were).

mod chained;
mod cuckoo;
mod linear;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

pub use chained::{ChainedPlusTable, ChainedTable};
pub use cuckoo::CuckooTable;
pub use linear::LinearTable;

use crate::error::{GrouperError, Result};
use crate::hash::HashFn;

/// A free slot's or an absent link's group id.
const EMPTY: u32 = u32::MAX;

/// What every scheme's table is to its users: dense group ids handed out in insertion order,
/// and the key word of each group by id.
pub trait KeyTable {
    /// The group id of `key`, inserting it as a new group if absent.
    fn find_or_insert(&mut self, key: u64) -> u32;

    /// The key word of each group, in group-id order.
    fn keys(&self) -> &[u64];

    /// Consumes the table, returning the key words by group id.
    fn into_keys(self) -> Vec<u64>;

    /// Bytes the table holds (its slots or directory, links and keys), for memory accounting.
    fn memory_bytes(&self) -> usize;

    /// Number of groups.
    fn len(&self) -> usize {
        self.keys().len()
    }

    /// Whether the table holds no group.
    fn is_empty(&self) -> bool {
        self.keys().is_empty()
    }

    /// Maps every key word to its group id, writing into `gids` (cleared first).
    fn map(&mut self, words: &[u64], gids: &mut Vec<u32>) {
        gids.clear();
        gids.extend(words.iter().map(|&w| self.find_or_insert(w)));
    }
}

/// [`KeyTable`] for a table type with inherent `find_or_insert`, `into_keys` and
/// `memory_bytes` and a `keys` field.
macro_rules! key_table {
    ($($ty:ty),* $(,)?) => {$(
        impl<M: Buckets> KeyTable for $ty {
            #[inline]
            fn find_or_insert(&mut self, key: u64) -> u32 {
                <$ty>::find_or_insert(self, key)
            }

            fn keys(&self) -> &[u64] {
                &self.keys
            }

            fn into_keys(self) -> Vec<u64> {
                <$ty>::into_keys(self)
            }

            fn memory_bytes(&self) -> usize {
                <$ty>::memory_bytes(self)
            }
        }
    )*};
}

key_table!(
    LinearTable<M>,
    ChainedTable<M>,
    ChainedPlusTable<M>,
    CuckooTable<2, M>,
    CuckooTable<4, M>,
);

/// Checks a fill factor given by a user or the tuner.
pub fn check_fill_factor(fill: f64) -> Result<()> {
    if fill > 0.0 && fill <= 0.95 {
        Ok(())
    } else {
        Err(GrouperError::InvalidOption(format!(
            "fill factor must be in (0, 0.95], got {fill}"
        )))
    }
}

/// Checks a hash function and bucket mapping chosen together. `identity` bit-reverses the key
/// word so that the high bits a power-of-two table reads vary with dense keys; the modulo
/// mapping reads the low bits, where small keys reversed are all zero, so every key would start
/// probing at one bucket and each insert would walk past every group before it (2^26 rows over
/// 2^19 dense keys: 41 s on an H100, against 3 ms for the other hash functions).
pub fn check_mapping(hash: HashFn, buckets: BucketMap) -> Result<()> {
    if hash == HashFn::Identity && buckets == BucketMap::Modulo {
        return Err(GrouperError::InvalidOption(
            "the identity hash is for the high_bits bucket mapping (it bit-reverses keys, so \
             modulo would put them all in one bucket): use another hash with modulo"
                .into(),
        ));
    }
    Ok(())
}

/// Slots needed so that `groups` entries stay below `fill` load: a power of two, at least 16.
pub fn capacity_for(groups: usize, fill: f64) -> usize {
    ((groups as f64 / fill).ceil() as usize)
        .max(16)
        .next_power_of_two()
}

/// How a hashed table resolves collisions (cuCollections' probing scheme; Luan's hashing
/// scheme). The GPU's hashed indexes take the same axis (`grouper_gpu::Probing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Probing {
    /// Open addressing, the next slot on a collision.
    #[default]
    Linear,
    /// Chained hashing: a directory of bucket heads, a linked list of groups per bucket.
    Chained,
    /// Chain+ (Luan): the directory holds each bucket's first key and group inline, so a
    /// bucket of one group costs one access; further groups chain as in `Chained`.
    ChainedPlus,
    /// Cuckoo hashing over two sub-tables: a key is in one of two slots.
    Cuckoo2,
    /// Cuckoo hashing over four sub-tables.
    Cuckoo4,
}

impl Probing {
    /// Every scheme, for sweeps and property tests.
    pub const ALL: [Probing; 5] = [
        Probing::Linear,
        Probing::Chained,
        Probing::ChainedPlus,
        Probing::Cuckoo2,
        Probing::Cuckoo4,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Probing::Linear => "linear",
            Probing::Chained => "chained",
            Probing::ChainedPlus => "chained_plus",
            Probing::Cuckoo2 => "cuckoo2",
            Probing::Cuckoo4 => "cuckoo4",
        }
    }
}

impl fmt::Display for Probing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Probing {
    type Err = GrouperError;
    fn from_str(s: &str) -> Result<Self> {
        Probing::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                GrouperError::InvalidOption(format!(
                    "unknown probing scheme '{s}' (expected linear, chained, chained_plus, cuckoo2 or cuckoo4)"
                ))
            })
    }
}

/// How a hash picks a bucket, the choice [`Buckets`] implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BucketMap {
    /// The hash's high bits index a power-of-two table (the good bits of multiply-shift).
    #[default]
    HighBits,
    /// The hash modulo the table's size, which need not be a power of two (Karnagel's
    /// mapping: FNV-1a's weak bits then collide at some sizes, his Fig. 6 spikes).
    Modulo,
}

impl BucketMap {
    /// Both mappings.
    pub const ALL: [BucketMap; 2] = [BucketMap::HighBits, BucketMap::Modulo];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            BucketMap::HighBits => "high_bits",
            BucketMap::Modulo => "modulo",
        }
    }
}

impl fmt::Display for BucketMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BucketMap {
    type Err = GrouperError;
    fn from_str(s: &str) -> Result<Self> {
        BucketMap::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                GrouperError::InvalidOption(format!(
                    "unknown bucket mapping '{s}' (expected high_bits or modulo)"
                ))
            })
    }
}

/// A [`BucketMap`] for a table of a given size, as the tables' type parameter: the default
/// (high bits) compiles to the shift and mask it always was.
pub trait Buckets: Copy + Send + Sync + 'static {
    /// Buckets for `groups` groups at load `fill`.
    fn capacity_for(groups: usize, fill: f64) -> usize;
    /// The mapping onto `cap` buckets (`cap` from [`Buckets::capacity_for`] or twice one).
    fn with_capacity(cap: usize) -> Self;
    /// The bucket of hash `h`.
    fn bucket(&self, h: u64) -> usize;
    /// The bucket after `i`, wrapping (linear probing's next slot).
    fn next(&self, i: usize) -> usize;
}

/// [`BucketMap::HighBits`]: a power-of-two table indexed by the hash's top bits.
#[derive(Debug, Clone, Copy)]
pub struct ByHighBits {
    shift: u32,
    mask: usize,
}

impl Buckets for ByHighBits {
    fn capacity_for(groups: usize, fill: f64) -> usize {
        capacity_for(groups, fill)
    }

    fn with_capacity(cap: usize) -> Self {
        debug_assert!(cap.is_power_of_two());
        Self {
            shift: 64 - cap.trailing_zeros(),
            mask: cap - 1,
        }
    }

    #[inline(always)]
    fn bucket(&self, h: u64) -> usize {
        // A 64-bit shift is undefined in Rust's release arithmetic only for 64: a table of
        // one slot never exists (at least 16).
        (h >> self.shift) as usize
    }

    #[inline(always)]
    fn next(&self, i: usize) -> usize {
        (i + 1) & self.mask
    }
}

/// [`BucketMap::Modulo`]: a table of any size indexed by the hash modulo the size.
#[derive(Debug, Clone, Copy)]
pub struct ByModulo {
    cap: usize,
}

impl Buckets for ByModulo {
    fn capacity_for(groups: usize, fill: f64) -> usize {
        ((groups as f64 / fill).ceil() as usize).max(16)
    }

    fn with_capacity(cap: usize) -> Self {
        Self { cap: cap.max(1) }
    }

    #[inline(always)]
    fn bucket(&self, h: u64) -> usize {
        (h % self.cap as u64) as usize
    }

    #[inline(always)]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.cap {
            0
        } else {
            i + 1
        }
    }
}
