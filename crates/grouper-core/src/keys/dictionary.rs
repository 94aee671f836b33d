//! Order-preserving dictionaries of byte strings: strings become dense `u32` codes so that string
//! keys (and whole composite keys that do not pack into 64 bits) join the fixed-width key path.
//!
//! Built in parallel: each morsel collects its distinct values, the sets are concatenated, sorted
//! and deduplicated. Codes are ranks in byte order, so sorting codes sorts the strings (and, for
//! `arrow-row` encoded rows, sorts the composite keys).

use hashbrown::{DefaultHashBuilder, HashSet, HashTable};
use rayon::prelude::*;
use std::hash::BuildHasher;

/// Distinct byte strings in sorted order, with a hash index from value to code.
#[derive(Debug, Default)]
pub struct Dictionary {
    values: Vec<Box<[u8]>>,
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

impl Dictionary {
    /// Builds the dictionary of every value produced by `parts` (one iterator per morsel).
    pub fn build<'a, P, I>(parts: P) -> Self
    where
        P: IndexedParallelIterator<Item = I>,
        I: Iterator<Item = &'a [u8]>,
    {
        let mut values: Vec<&[u8]> = parts
            .map(|it| {
                it.collect::<HashSet<&[u8]>>()
                    .into_iter()
                    .collect::<Vec<_>>()
            })
            .reduce(Vec::new, |mut a, b| {
                a.extend(b);
                a
            });
        values.par_sort_unstable();
        values.dedup();
        let hasher = DefaultHashBuilder::default();
        let mut index = HashTable::with_capacity(values.len());
        for (code, v) in values.iter().enumerate() {
            let h = hasher.hash_one(v);
            index.insert_unique(h, code as u32, |&c| hasher.hash_one(values[c as usize]));
        }
        Self {
            values: values.into_iter().map(Box::from).collect(),
            index,
            hasher,
        }
    }

    /// Number of distinct values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the dictionary is empty.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The code of `value`, if it was present when the dictionary was built.
    #[inline]
    pub fn code(&self, value: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(value);
        self.index
            .find(h, |&c| &*self.values[c as usize] == value)
            .copied()
    }

    /// The value of `code`.
    #[inline]
    pub fn value(&self, code: u32) -> &[u8] {
        &self.values[code as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_sorted_ranks() {
        let parts: Vec<Vec<&[u8]>> = vec![
            vec![b"pear", b"apple", b"pear"],
            vec![b"fig", b"apple"],
            vec![],
        ];
        let d = Dictionary::build(parts.into_par_iter().map(|p| p.into_iter()));
        assert_eq!(d.len(), 3);
        assert_eq!(d.code(b"apple"), Some(0));
        assert_eq!(d.code(b"fig"), Some(1));
        assert_eq!(d.code(b"pear"), Some(2));
        assert_eq!(d.code(b"kiwi"), None);
        assert_eq!(d.value(1), b"fig");
    }
}
