//! Cuckoo hashing (Pagh & Rodler; Luan §3's Cuckoo2 and Cuckoo4): `D` sub-tables, each with its
//! own hash function, and a key in exactly one of its `D` slots, so a lookup reads at most `D`
//! slots whatever the load. An insertion with no free slot among its `D` evicts a resident
//! to one of that one's other slots, and so on (a random walk over the sub-tables); after
//! [`max_kicks`] evictions it gives up and the table is rebuilt twice as large from the key
//! words it keeps by group id (a static scheme: Luan's Cuckoo2 "only works" at 25% load and
//! fails from 35%, his Cuckoo4 up to 70%; here a failure costs a rebuild, counted by
//! [`CuckooTable::rebuilds`], never a wrong or lost group). A table already eight slots a
//! group stashes a group no slot takes rather than doubling again (a stash, as Kirsch,
//! Mitzenmacher and Wieder's cuckoo hashing with a stash), so keys that collide under every
//! sub-table's function cannot grow it without end.
//!
//! Slots hold `(key, group id)`: evictions move those, the group ids and the accumulators they
//! index stay put.

use super::{Buckets, ByHighBits, EMPTY};
use crate::hash::{murmur3, HashFn};

#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    gid: u32,
}

const FREE: Slot = Slot { key: 0, gid: EMPTY };

/// Salts of the sub-tables past the first: sub-table `i` hashes `murmur3(key ^ SALTS[i])`,
/// independent of the table's own function, which the first uses (Luan pairs multiply-shift
/// and murmur, plus `((a·k + b) mod p) mod B` for the third and fourth).
const SALTS: [u64; 4] = [
    0,
    0x5851_f42d_4c95_7f2d,
    0x1405_7b7e_f767_814f,
    0xda94_2042_e4dd_58b5,
];

/// Evictions an insertion may make before the table is rebuilt: a few times the log of the
/// sub-table size (Pagh & Rodler's bound is logarithmic).
fn max_kicks(sub: usize) -> usize {
    (8 * (usize::BITS - sub.leading_zeros()) as usize).max(32)
}

/// Cuckoo hashing over `D` sub-tables (2 or 4).
pub struct CuckooTable<const D: usize, M: Buckets = ByHighBits> {
    /// `D` sub-tables of `sub` slots, sub-table `i` at `i * sub`.
    slots: Vec<Slot>,
    sub: usize,
    /// Buckets of one sub-table.
    map: M,
    pub(super) keys: Vec<u64>,
    hash: HashFn,
    fill: f64,
    grow_at: usize,
    rebuilds: usize,
    /// Groups no slot took in a table already [`ROOMY`] times its groups (keys crafted to
    /// collide under every sub-table's function would otherwise double it without end):
    /// searched after the slots, emptied by the next rebuild.
    stash: Vec<Slot>,
}

/// Slots per group from which a failed insertion stashes the group rather than doubling the
/// table again.
const ROOMY: usize = 8;

impl<const D: usize, M: Buckets> CuckooTable<D, M> {
    /// A table of `groups / fill` slots in all, a `D`th in each sub-table.
    pub fn new(groups: usize, hash: HashFn, fill: f64) -> Self {
        debug_assert!((2..=SALTS.len()).contains(&D));
        let mut t = Self {
            slots: Vec::new(),
            sub: 0,
            map: M::with_capacity(1),
            keys: Vec::with_capacity(groups.min(1 << 20)),
            hash,
            fill,
            grow_at: 0,
            rebuilds: 0,
            stash: Vec::new(),
        };
        t.rebuild(M::capacity_for(groups, fill).max(D * 4));
        t.rebuilds = 0;
        t
    }

    /// Bytes the table holds (slots, stash and keys).
    pub fn memory_bytes(&self) -> usize {
        (self.slots.capacity() + self.stash.capacity()) * std::mem::size_of::<Slot>()
            + self.keys.capacity() * 8
    }

    /// Consumes the table, returning the key words by group id.
    pub fn into_keys(self) -> Vec<u64> {
        self.keys
    }

    /// Rebuilds forced by an insertion that found no place within [`max_kicks`] evictions
    /// (growth at the fill factor not counted).
    pub fn rebuilds(&self) -> usize {
        self.rebuilds
    }

    /// Slot of `key` in sub-table `i`.
    #[inline(always)]
    fn slot_of(&self, i: usize, key: u64) -> usize {
        let h = if i == 0 {
            self.hash.hash(key)
        } else {
            murmur3(key ^ SALTS[i])
        };
        i * self.sub + self.map.bucket(h)
    }

    /// The group id of `key`, inserting it as a new group if absent.
    #[inline]
    pub fn find_or_insert(&mut self, key: u64) -> u32 {
        for i in 0..D {
            let slot = self.slots[self.slot_of(i, key)];
            if slot.gid != EMPTY && slot.key == key {
                return slot.gid;
            }
        }
        if let Some(s) = self.stash.iter().find(|s| s.key == key) {
            return s.gid;
        }
        if self.keys.len() >= self.grow_at {
            self.rebuild(self.slots.len() * 2);
        }
        let gid = self.keys.len() as u32;
        self.keys.push(key);
        if let Some(homeless) = self.place(key, gid) {
            if self.slots.len() >= ROOMY * self.keys.len() {
                self.stash.push(homeless);
            } else {
                self.rebuilds += 1;
                self.rebuild(self.slots.len() * 2);
            }
        }
        gid
    }

    /// Puts group `gid` (of `key`, absent from the table) into a free slot among its `D`, or
    /// evicts: the evicted group tries its other slots, and so on. When it gives up, the group
    /// then in hand, in no slot (a rebuild from `keys` or the stash takes it).
    fn place(&mut self, key: u64, gid: u32) -> Option<Slot> {
        let mut hand = Slot { key, gid };
        // The sub-table the group in hand was just evicted from.
        let mut from = usize::MAX;
        for kick in 0..max_kicks(self.sub) {
            for i in (0..D).filter(|&i| i != from) {
                let s = self.slot_of(i, hand.key);
                if self.slots[s].gid == EMPTY {
                    self.slots[s] = hand;
                    return None;
                }
            }
            let mut t = kick % D;
            if t == from {
                t = (t + 1) % D;
            }
            let s = self.slot_of(t, hand.key);
            hand = std::mem::replace(&mut self.slots[s], hand);
            from = t;
        }
        Some(hand)
    }

    /// Slots of `cap` entries in all holding every group so far; twice as many again while an
    /// insertion fails, up to [`ROOMY`] slots a group, past which a group no slot takes goes to
    /// the stash.
    fn rebuild(&mut self, cap: usize) {
        let mut cap = cap;
        'size: loop {
            self.slots = vec![FREE; cap];
            self.stash.clear();
            self.sub = cap / D;
            self.map = M::with_capacity(self.sub);
            self.grow_at = (cap as f64 * self.fill) as usize;
            for gid in 0..self.keys.len() {
                let key = self.keys[gid];
                if let Some(homeless) = self.place(key, gid as u32) {
                    if cap >= ROOMY * self.keys.len() {
                        self.stash.push(homeless);
                    } else {
                        self.rebuilds += 1;
                        cap *= 2;
                        continue 'size;
                    }
                }
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::KeyTable;

    /// Keys crafted to fall into the same bucket of both sub-tables of any table of up to 2^16
    /// slots a sub-table (the identity's top bits are the key's low bits, all zero; salted
    /// murmur3's top 16 bits zero): no number of doublings separates them, so past eight slots
    /// a group the table stashes them instead of growing without end.
    #[test]
    fn keys_colliding_everywhere_go_to_the_stash_not_to_ever_larger_tables() {
        let mut crafted = Vec::new();
        let mut hi = 1u64;
        while crafted.len() < 6 {
            let k = hi << 24;
            if murmur3(k ^ SALTS[1]) >> 48 == 0 {
                crafted.push(k);
            }
            hi += 1;
        }
        let mut t = CuckooTable::<2, ByHighBits>::new(1, HashFn::Identity, 0.5);
        let mut words = crafted.clone();
        words.extend((1..200u64).map(|k| k.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        let mut gids = Vec::new();
        t.map(&words, &mut gids);
        assert_eq!(gids, (0..words.len() as u32).collect::<Vec<_>>());
        t.map(&words, &mut gids);
        assert_eq!(
            gids,
            (0..words.len() as u32).collect::<Vec<_>>(),
            "found again"
        );
        assert!(!t.stash.is_empty(), "some crafted keys are stashed");
        assert!(
            t.slots.len() <= 16 * ROOMY * words.len(),
            "{} slots for {} groups",
            t.slots.len(),
            words.len()
        );
    }
}
