//! The single-threaded linear-probing hash table that maps key words to dense group ids.
//!
//! Slots hold `(key, group id)` side by side so a probe touches one cache line; group ids index
//! the accumulators and `keys()` (the key word of each group, in insertion order). Slot index =
//! the *high* bits of the hash by default, which all our hash functions fill well
//! (`multiply_shift` only there), or the hash modulo the size ([`super::ByModulo`]). The table
//! doubles when it passes its fill factor (Luan §3: linear probing is the fastest scheme below
//! ~0.5–0.7 load on CPUs).

use super::{Buckets, ByHighBits, EMPTY};
use crate::hash::HashFn;

#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    gid: u32,
}

/// Linear-probing table from key words to dense group ids.
///
/// A table made [`LinearTable::in_key_order`] starts without slots: while every new word is
/// larger than the last (keys arriving sorted, as a file written in key order gives each
/// worker a run of them: TPC-H's `l_orderkey`), a row is its group's word or the next group,
/// found by one compare with the last word and no hash. Hashing scattered sorted keys over
/// slots and states, one cache miss per group. The first word below the last builds the slots
/// from the groups so far, and the table hashes from then on.
pub struct LinearTable<M: Buckets = ByHighBits> {
    slots: Vec<Slot>,
    map: M,
    pub(super) keys: Vec<u64>,
    hash: HashFn,
    fill: f64,
    grow_at: usize,
    /// Whether the groups so far arrived in increasing key order (and no slot is built).
    ordered: bool,
    /// Slots the table was sized for before it went into key order: leaving the order builds
    /// at least these, so that unsorted keys grow from the planned size, not from a few groups
    /// (hashed keys over 2^16 groups ran 13–15% slower growing from 16 slots).
    planned: usize,
}

impl LinearTable {
    /// A table sized for `groups` groups at load `fill` (which must satisfy
    /// [`super::check_fill_factor`]), indexed by the hash's high bits.
    pub fn new(groups: usize, hash: HashFn, fill: f64) -> Self {
        Self::with_buckets(groups, hash, fill)
    }
}

impl<M: Buckets> LinearTable<M> {
    /// A table sized for `groups` groups at load `fill`, its buckets mapped by `M`.
    pub fn with_buckets(groups: usize, hash: HashFn, fill: f64) -> Self {
        let cap = M::capacity_for(groups, fill);
        Self {
            slots: vec![Slot { key: 0, gid: EMPTY }; cap],
            map: M::with_capacity(cap),
            keys: Vec::with_capacity(groups.min(1 << 20)),
            hash,
            fill,
            grow_at: (cap as f64 * fill) as usize,
            ordered: false,
            planned: cap,
        }
    }

    /// The same empty table, in key order until a word arrives below the last one.
    pub fn in_key_order(mut self) -> Self {
        self.planned = self.slots.len();
        self.slots = Vec::new();
        self.ordered = self.keys.is_empty();
        self
    }

    /// Whether every group so far arrived in increasing key order (no hashing yet).
    pub fn is_ordered(&self) -> bool {
        self.ordered
    }

    /// Bytes the table holds (slots and keys), for memory accounting.
    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>() + self.keys.capacity() * 8
    }

    /// Consumes the table, returning the key words by group id.
    pub fn into_keys(self) -> Vec<u64> {
        self.keys
    }

    /// The group id of `key`, inserting it as a new group if absent.
    #[inline]
    pub fn find_or_insert(&mut self, key: u64) -> u32 {
        if self.ordered {
            match self.keys.last() {
                Some(&last) if last == key => return self.keys.len() as u32 - 1,
                Some(&last) if last > key => self.leave_key_order(),
                _ => {
                    self.keys.push(key);
                    return self.keys.len() as u32 - 1;
                }
            }
        }
        if self.keys.len() >= self.grow_at {
            self.grow();
        }
        let mut i = self.map.bucket(self.hash.hash(key));
        loop {
            let slot = self.slots[i];
            if slot.gid == EMPTY {
                let gid = self.keys.len() as u32;
                self.slots[i] = Slot { key, gid };
                self.keys.push(key);
                return gid;
            }
            if slot.key == key {
                return slot.gid;
            }
            i = self.map.next(i);
        }
    }

    /// Makes room for `groups` groups in one rebuild, rather than the doublings that would
    /// otherwise reach it (each a fresh allocation and a rehash of every group so far).
    pub fn reserve(&mut self, groups: usize) {
        if self.ordered {
            self.planned = self.planned.max(M::capacity_for(groups, self.fill));
        } else if groups > self.grow_at {
            self.rebuild(M::capacity_for(groups, self.fill));
        }
    }

    /// Builds the slots from the groups so far (with room to grow) and hashes from now on.
    fn leave_key_order(&mut self) {
        self.ordered = false;
        self.rebuild(M::capacity_for(self.keys.len() * 2, self.fill).max(self.planned));
    }

    fn grow(&mut self) {
        self.rebuild(self.slots.len() * 2);
    }

    /// Slots of `cap` entries holding every group so far.
    fn rebuild(&mut self, cap: usize) {
        self.slots = vec![Slot { key: 0, gid: EMPTY }; cap];
        self.map = M::with_capacity(cap);
        self.grow_at = (cap as f64 * self.fill) as usize;
        for (gid, &key) in self.keys.iter().enumerate() {
            let mut i = self.map.bucket(self.hash.hash(key));
            while self.slots[i].gid != EMPTY {
                i = self.map.next(i);
            }
            self.slots[i] = Slot {
                key,
                gid: gid as u32,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{capacity_for, check_fill_factor, KeyTable};
    use super::*;

    #[test]
    fn assigns_dense_ids_and_grows() {
        for hash in HashFn::ALL {
            let mut t = LinearTable::new(1, hash, 0.5);
            let keys: Vec<u64> = (0..10_000u64)
                .map(|k| k.wrapping_mul(0x1234_5678_9abc_def1))
                .collect();
            for (i, &k) in keys.iter().enumerate() {
                assert_eq!(t.find_or_insert(k), i as u32);
            }
            for (i, &k) in keys.iter().enumerate().rev() {
                assert_eq!(t.find_or_insert(k), i as u32, "{hash}");
            }
            assert_eq!(t.keys(), &keys[..]);
            assert!(t.find_or_insert(u64::MAX) == 10_000);
        }
    }

    #[test]
    fn a_table_in_key_order_hashes_from_the_first_word_below_the_last() {
        for hash in HashFn::ALL {
            // Sorted runs (each word repeated), then words seen before and new ones below the
            // last: ids stay those of the first appearance, new ones dense.
            let mut t = LinearTable::new(1, hash, 0.5).in_key_order();
            let mut gids = Vec::new();
            t.map(&[3, 3, 5, 9, 9, 9, 20], &mut gids);
            assert_eq!(gids, [0, 0, 1, 2, 2, 2, 3]);
            assert!(t.is_ordered());
            assert_eq!(
                t.memory_bytes(),
                t.keys.capacity() * 8,
                "no slots in key order"
            );
            t.map(&[20, 21, 5, 4, 21, 3, 100, 4], &mut gids);
            assert_eq!(gids, [3, 4, 1, 5, 4, 0, 6, 5], "{hash}");
            assert!(!t.is_ordered());
            // Slots for the size it was planned for (at 0.5 load: 1 group, 16 slots).
            assert!(t.slots.len() >= 16);
            assert_eq!(t.keys(), &[3, 5, 9, 20, 21, 4, 100]);
            // It grows as a hashed table from there.
            let more: Vec<u64> = (1000..5000).rev().collect();
            t.map(&more, &mut gids);
            assert_eq!(gids, (7..4007).collect::<Vec<u32>>());
            assert_eq!(t.find_or_insert(9), 2);
        }
    }

    #[test]
    fn unsorted_keys_leave_key_order_at_the_planned_size() {
        let mut t = LinearTable::new(1 << 16, HashFn::Murmur3, 0.5).in_key_order();
        let mut gids = Vec::new();
        t.map(&[5, 3], &mut gids);
        assert!(!t.is_ordered());
        assert_eq!(t.slots.len(), capacity_for(1 << 16, 0.5));
    }

    #[test]
    fn a_reserved_table_takes_its_groups_without_growing_and_keeps_its_ids() {
        let mut t = LinearTable::new(4, HashFn::Murmur3, 0.5);
        let mut gids = Vec::new();
        t.map(&[10, 20, 30], &mut gids);
        t.reserve(10_000);
        let slots = t.slots.len();
        assert_eq!(slots, capacity_for(10_000, 0.5));
        let words: Vec<u64> = (0..10_000u64).map(|w| w * 10).collect();
        t.map(&words, &mut gids);
        assert_eq!(t.slots.len(), slots, "no growth within the reservation");
        assert_eq!(
            &gids[..4],
            &[3, 0, 1, 2],
            "ids from before the rebuild kept"
        );
        t.reserve(100);
        assert_eq!(
            t.slots.len(),
            slots,
            "a smaller reservation shrinks nothing"
        );
        // In key order, the reservation is what leaving it builds.
        let mut o = LinearTable::new(4, HashFn::Murmur3, 0.5).in_key_order();
        o.reserve(5000);
        o.map(&[5, 3], &mut gids);
        assert_eq!(o.slots.len(), capacity_for(5000, 0.5));
    }

    #[test]
    fn fill_factor_bounds() {
        assert!(check_fill_factor(0.5).is_ok());
        assert!(check_fill_factor(0.0).is_err());
        assert!(check_fill_factor(1.0).is_err());
        assert_eq!(capacity_for(100, 0.5), 256);
    }
}
