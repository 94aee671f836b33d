//! Append-only dictionaries of byte strings: strings (and whole composite keys that do not pack
//! into 64 bits) become dense codes so they join the fixed-width key path.
//!
//! Codes are handed out in order of first appearance and never change, so workers can keep
//! encoding while the dictionary grows: a new string only appends. One dictionary is shared by
//! all workers of a query behind a read-write lock; a batch takes the read lock once for its
//! lookups and the write lock only if it brings values not seen before.

use std::hash::BuildHasher;
use std::sync::{PoisonError, RwLock};

use hashbrown::{DefaultHashBuilder, HashTable};

/// The values in one arena (no allocation per value), and an index of (hash, code): growing
/// the index rehashes from the stored hashes, never from the bytes. Everything done under the
/// write lock is an append: the hashes of a batch's new values are computed before taking it
/// (with 16 workers and a new key on nearly every row, the lock is the whole cost).
#[derive(Debug, Default)]
struct Inner {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    index: HashTable<(u64, u32)>,
}

impl Inner {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn value(&self, code: u32) -> &[u8] {
        let c = code as usize;
        let start = match c {
            0 => 0,
            _ => self.ends.get(c - 1).copied().unwrap_or(0),
        };
        let end = self.ends.get(c).copied().unwrap_or(start);
        self.bytes.get(start..end).unwrap_or_default()
    }

    fn find(&self, h: u64, v: &[u8]) -> Option<u32> {
        self.index
            .find(h, |&(hc, c)| hc == h && self.value(c) == v)
            .map(|&(_, c)| c)
    }

    fn append(&mut self, h: u64, v: &[u8]) -> u32 {
        let code = self.ends.len() as u32;
        self.bytes.extend_from_slice(v);
        self.ends.push(self.bytes.len());
        self.index.insert_unique(h, (h, code), |&(hc, _)| hc);
        code
    }
}

/// A concurrent, append-only dictionary from byte strings to dense `u32` codes.
#[derive(Debug, Default)]
pub struct Dictionary {
    inner: RwLock<Inner>,
    hasher: DefaultHashBuilder,
}

impl Dictionary {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.read(Inner::len)
    }

    /// Whether the dictionary is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read<R>(&self, f: impl FnOnce(&Inner) -> R) -> R {
        f(&self.inner.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Codes of `values` (`None` rows stay `None`), appending unseen values while the
    /// dictionary stays within `capacity` codes. Returns `None` when a code would be at or past
    /// `capacity`: a value it would append, or one another worker already appended under a
    /// wider codec (the dictionary is shared by every version of a query's codec, so a worker
    /// still on an older, narrower one must widen or catch up, never use such a code).
    pub fn encode<'a>(
        &self,
        values: impl Iterator<Item = Option<&'a [u8]>> + Clone,
        capacity: u64,
    ) -> Option<Vec<Option<u32>>> {
        let mut missing = Vec::new();
        let mut past = false;
        let codes: Vec<Option<u32>> = self.read(|inner| {
            values
                .clone()
                .enumerate()
                .map(|(row, v)| {
                    v.map(|v| {
                        let h = self.hasher.hash_one(v);
                        match inner.find(h, v) {
                            Some(c) => {
                                past |= u64::from(c) >= capacity;
                                c
                            }
                            None => {
                                missing.push((row, h));
                                u32::MAX
                            }
                        }
                    })
                })
                .collect()
        });
        if past {
            return None;
        }
        if missing.is_empty() {
            return Some(codes);
        }
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let mut out = codes;
        let mut rows = missing.iter().peekable();
        for (row, v) in values.enumerate() {
            let Some(&(_, h)) = rows.next_if(|(r, _)| *r == row) else {
                continue;
            };
            let (Some(code), Some(v)) = (out.get_mut(row), v) else {
                continue;
            };
            *code = Some(match inner.find(h, v) {
                Some(found) if u64::from(found) >= capacity => return None,
                Some(found) => found,
                None => {
                    if inner.len() as u64 >= capacity {
                        return None;
                    }
                    inner.append(h, v)
                }
            });
        }
        Some(out)
    }

    /// Appends `values` that are absent (used to seed a dictionary); returns the new length.
    pub fn extend<'a>(&self, values: impl Iterator<Item = &'a [u8]>) -> usize {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        for v in values {
            let h = self.hasher.hash_one(v);
            if inner.find(h, v).is_none() {
                inner.append(h, v);
            }
        }
        inner.len()
    }

    pub fn with_values<R>(&self, codes: &[u32], f: impl FnOnce(Vec<&[u8]>) -> R) -> R {
        self.read(|inner| f(codes.iter().map(|&c| inner.value(c)).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(v: &[&'static str]) -> Vec<Option<&'static [u8]>> {
        v.iter().map(|s| Some(s.as_bytes())).collect()
    }

    #[test]
    fn codes_are_stable_and_capacity_is_respected() {
        let d = Dictionary::new();
        let a = some(&["pear", "apple", "pear"]);
        assert_eq!(
            d.encode(a.iter().copied(), 10).unwrap(),
            vec![Some(0), Some(1), Some(0)]
        );
        let b = [Some(&b"fig"[..]), None, Some(&b"apple"[..])];
        assert_eq!(
            d.encode(b.iter().copied(), 10).unwrap(),
            vec![Some(2), None, Some(1)]
        );
        assert!(d.encode(some(&["kiwi"]).into_iter(), 3).is_none());
        assert_eq!(d.len(), 3);
        // A value another worker appended under a wider codec is past a narrower one's
        // capacity: that worker must widen or catch up, not use the code.
        assert_eq!(
            d.encode(some(&["fig"]).into_iter(), 3).unwrap(),
            vec![Some(2)]
        );
        assert!(d.encode(some(&["fig"]).into_iter(), 2).is_none());
        assert!(d
            .encode(some(&["pear", "fig", "plum"]).into_iter(), 2)
            .is_none());
        assert_eq!(
            d.len(),
            3,
            "nothing appended when a code is past the capacity"
        );
        d.with_values(&[2, 0], |v| assert_eq!(v, vec![&b"fig"[..], &b"pear"[..]]));
    }
}
