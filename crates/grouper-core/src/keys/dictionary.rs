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

#[derive(Debug, Default)]
struct Inner {
    values: Vec<Box<[u8]>>,
    index: HashTable<u32>,
    /// Bytes of the values.
    bytes: usize,
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
        self.read(|i| i.values.len())
    }

    /// Bytes held (values, their boxes and the index), for memory accounting: a dictionary is
    /// shared by a query's workers, so no worker's groups count it.
    pub fn memory_bytes(&self) -> usize {
        self.read(|i| {
            i.bytes
                + i.values.capacity() * std::mem::size_of::<Box<[u8]>>()
                + i.index.capacity() * (std::mem::size_of::<u32>() + 1)
        })
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
        let mut missing = false;
        let mut past = false;
        let codes: Vec<Option<u32>> = self.read(|inner| {
            values
                .clone()
                .map(|v| {
                    v.map(|v| match self.find(inner, v) {
                        Some(c) => {
                            past |= u64::from(c) >= capacity;
                            c
                        }
                        None => {
                            missing = true;
                            u32::MAX
                        }
                    })
                })
                .collect()
        });
        if past {
            return None;
        }
        if !missing {
            return Some(codes);
        }
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let mut out = codes;
        for (code, v) in out.iter_mut().zip(values) {
            if let (Some(c), Some(v)) = (code.as_mut(), v) {
                if *c == u32::MAX {
                    *c = match self.find(&inner, v) {
                        Some(found) if u64::from(found) >= capacity => return None,
                        Some(found) => found,
                        None => {
                            if inner.values.len() as u64 >= capacity {
                                return None;
                            }
                            self.append(&mut inner, v)
                        }
                    };
                }
            }
        }
        Some(out)
    }

    /// Appends `values` that are absent (used to seed a dictionary); returns the new length.
    pub fn extend<'a>(&self, values: impl Iterator<Item = &'a [u8]>) -> usize {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        for v in values {
            if self.find(&inner, v).is_none() {
                self.append(&mut inner, v);
            }
        }
        inner.values.len()
    }

    fn find(&self, inner: &Inner, v: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(v);
        inner
            .index
            .find(h, |&c| &*inner.values[c as usize] == v)
            .copied()
    }

    fn append(&self, inner: &mut Inner, v: &[u8]) -> u32 {
        let code = inner.values.len() as u32;
        inner.values.push(v.into());
        inner.bytes += v.len();
        let Inner { values, index, .. } = inner;
        index.insert_unique(self.hasher.hash_one(v), code, |&c| {
            self.hasher.hash_one(&values[c as usize])
        });
        code
    }

    /// Calls `f` with the value of each code.
    pub fn with_values<R>(&self, codes: &[u32], f: impl FnOnce(Vec<&[u8]>) -> R) -> R {
        self.read(|inner| f(codes.iter().map(|&c| &*inner.values[c as usize]).collect()))
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
