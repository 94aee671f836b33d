//! Chained hashing (Luan §3, "Chain" and "Chain+"): a directory of buckets, each the head of a
//! linked list of the groups whose hash maps there. Groups never move: a new group links in at
//! its bucket's head, and growing rebuilds only the directory and the links (the "dynamic"
//! scheme, no rehash of slots), which is why Luan keeps chaining for tables that must resize.
//! The price is a dependent load per link and a directory beside the groups.
//!
//! [`ChainedTable`] is the standard scheme: the directory holds a group id per bucket, the
//! keys live by group id, so every lookup reads the directory and then the key. Chain+
//! ([`ChainedPlusTable`]) stores each bucket's first key and group inline in a 16-byte
//! directory entry, so a bucket of one group costs one access.

use super::{Buckets, ByHighBits, EMPTY};
use crate::hash::HashFn;

/// Chained hashing with a directory of bucket heads.
pub struct ChainedTable<M: Buckets = ByHighBits> {
    /// The first group of each bucket (the last one inserted), or `EMPTY`.
    heads: Vec<u32>,
    /// The group after each group in its bucket's chain, or `EMPTY`.
    next: Vec<u32>,
    pub(super) keys: Vec<u64>,
    map: M,
    hash: HashFn,
    fill: f64,
    grow_at: usize,
}

impl<M: Buckets> ChainedTable<M> {
    /// A table whose directory holds `groups / fill` buckets.
    pub fn new(groups: usize, hash: HashFn, fill: f64) -> Self {
        let cap = M::capacity_for(groups, fill);
        Self {
            heads: vec![EMPTY; cap],
            next: Vec::with_capacity(groups.min(1 << 20)),
            keys: Vec::with_capacity(groups.min(1 << 20)),
            map: M::with_capacity(cap),
            hash,
            fill,
            grow_at: (cap as f64 * fill) as usize,
        }
    }

    /// Bytes the table holds (directory, links and keys).
    pub fn memory_bytes(&self) -> usize {
        self.heads.capacity() * 4 + self.next.capacity() * 4 + self.keys.capacity() * 8
    }

    /// Consumes the table, returning the key words by group id.
    pub fn into_keys(self) -> Vec<u64> {
        self.keys
    }

    /// The group id of `key`, inserting it as a new group if absent.
    #[inline]
    pub fn find_or_insert(&mut self, key: u64) -> u32 {
        let h = self.hash.hash(key);
        let mut g = self.heads[self.map.bucket(h)];
        while g != EMPTY {
            if self.keys[g as usize] == key {
                return g;
            }
            g = self.next[g as usize];
        }
        if self.keys.len() >= self.grow_at {
            self.relink(self.heads.len() * 2);
        }
        let b = self.map.bucket(h);
        let gid = self.keys.len() as u32;
        self.keys.push(key);
        self.next.push(self.heads[b]);
        self.heads[b] = gid;
        gid
    }

    /// A directory of `cap` buckets over the same groups: only heads and links change.
    fn relink(&mut self, cap: usize) {
        self.heads = vec![EMPTY; cap];
        self.map = M::with_capacity(cap);
        self.grow_at = (cap as f64 * self.fill) as usize;
        for (gid, &key) in self.keys.iter().enumerate() {
            let b = self.map.bucket(self.hash.hash(key));
            self.next[gid] = self.heads[b];
            self.heads[b] = gid as u32;
        }
    }
}

/// A Chain+ directory entry: the bucket's first group inline, then the head of the rest.
#[derive(Clone, Copy)]
struct Head {
    key: u64,
    gid: u32,
    /// The second group of the bucket (the chain of the others), or `EMPTY`.
    rest: u32,
}

const NO_HEAD: Head = Head {
    key: 0,
    gid: EMPTY,
    rest: EMPTY,
};

/// Chain+: chained hashing whose directory holds each bucket's first key inline.
pub struct ChainedPlusTable<M: Buckets = ByHighBits> {
    heads: Vec<Head>,
    /// For groups past a bucket's first: the next one in its chain, or `EMPTY` (unused for
    /// inline groups).
    next: Vec<u32>,
    pub(super) keys: Vec<u64>,
    map: M,
    hash: HashFn,
    fill: f64,
    grow_at: usize,
}

impl<M: Buckets> ChainedPlusTable<M> {
    /// A table whose directory holds `groups / fill` buckets.
    pub fn new(groups: usize, hash: HashFn, fill: f64) -> Self {
        let cap = M::capacity_for(groups, fill);
        Self {
            heads: vec![NO_HEAD; cap],
            next: Vec::with_capacity(groups.min(1 << 20)),
            keys: Vec::with_capacity(groups.min(1 << 20)),
            map: M::with_capacity(cap),
            hash,
            fill,
            grow_at: (cap as f64 * fill) as usize,
        }
    }

    /// Bytes the table holds (directory, links and keys).
    pub fn memory_bytes(&self) -> usize {
        self.heads.capacity() * std::mem::size_of::<Head>()
            + self.next.capacity() * 4
            + self.keys.capacity() * 8
    }

    /// Consumes the table, returning the key words by group id.
    pub fn into_keys(self) -> Vec<u64> {
        self.keys
    }

    /// The group id of `key`, inserting it as a new group if absent.
    #[inline]
    pub fn find_or_insert(&mut self, key: u64) -> u32 {
        let h = self.hash.hash(key);
        let head = self.heads[self.map.bucket(h)];
        if head.gid != EMPTY {
            if head.key == key {
                return head.gid;
            }
            let mut g = head.rest;
            while g != EMPTY {
                if self.keys[g as usize] == key {
                    return g;
                }
                g = self.next[g as usize];
            }
        }
        if self.keys.len() >= self.grow_at {
            self.relink(self.heads.len() * 2);
        }
        let gid = self.keys.len() as u32;
        self.keys.push(key);
        self.next.push(EMPTY);
        self.link(self.map.bucket(h), key, gid);
        gid
    }

    /// Puts group `gid` into bucket `b`: inline if the bucket is empty, else at the head of
    /// its chain.
    fn link(&mut self, b: usize, key: u64, gid: u32) {
        let head = &mut self.heads[b];
        if head.gid == EMPTY {
            *head = Head {
                key,
                gid,
                rest: EMPTY,
            };
        } else {
            self.next[gid as usize] = head.rest;
            head.rest = gid;
        }
    }

    /// A directory of `cap` buckets over the same groups.
    fn relink(&mut self, cap: usize) {
        self.heads = vec![NO_HEAD; cap];
        self.map = M::with_capacity(cap);
        self.grow_at = (cap as f64 * self.fill) as usize;
        for gid in 0..self.keys.len() {
            let key = self.keys[gid];
            self.next[gid] = EMPTY;
            self.link(self.map.bucket(self.hash.hash(key)), key, gid as u32);
        }
    }
}
