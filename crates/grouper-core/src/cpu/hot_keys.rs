//! Heavy hitters: the few keys that hold a large share of the rows (the sort-based
//! aggregation paper's "heavy hitter" distribution; zipf keys), found from a sample of the key
//! words and looked up in a small open-addressing table that stays in a core's L1/L2.
//!
//! Why: `partitioned` copies every row to its key's partition before anything is aggregated.
//! Zipf 1.1 keys over 2^22 values put about half their rows on the ~150 most frequent keys;
//! folding those rows where they are read, into per-block states of a few hundred groups,
//! leaves half the rows uncopied and the partitions' tables half the probes
//! ([`super::partitioned`]).

use crate::hash::multiply_shift;

/// Morsels the sample reads from, spread evenly over the input.
const SAMPLE_MORSELS: usize = 16;

/// Key words the sample reads from each of those morsels, spread evenly over it.
const SAMPLE_PER_MORSEL: usize = 1024;

/// Fewest sampled words for a sample to name heavy hitters (smaller inputs gain nothing).
const MIN_SAMPLE: usize = 1024;

/// A heavy hitter takes at least one in this many sampled rows (and [`MIN_COUNT`] of them):
/// 8 of the 16,384 a large input's sample reads.
const SHARE: usize = 2048;

/// Fewest sampled rows that make a key a heavy hitter.
const MIN_COUNT: u32 = 4;

/// Most heavy hitters kept (the most frequent): their per-block states stay small.
const MAX_HOT: usize = 1024;

/// Heavy hitters pay only while together they take at least one in this many sampled rows:
/// elsewhere the lookup is a probe more for nearly every row and saves little.
const MIN_ROWS_SHARE: usize = 8;

/// The index of a word that is no heavy hitter, and of an empty slot.
pub(crate) const NOT_HOT: u32 = u32::MAX;

/// The heavy hitters of an input, each with a dense index.
#[derive(Debug)]
pub(crate) struct HotKeys {
    /// `(key word, index)` slots, open addressing with linear probing, at most an eighth full
    /// (a word that is no heavy hitter then finds an empty first slot seven times in eight).
    slots: Vec<(u64, u32)>,
    /// Right shift of a word's hash to a slot.
    shift: u32,
    /// The key word of each index.
    keys: Vec<u64>,
}

impl HotKeys {
    /// The morsels, of `n`, whose words [`HotKeys::find`] reads: [`SAMPLE_MORSELS`] spread
    /// evenly.
    pub(crate) fn sample(n: usize) -> impl Iterator<Item = usize> {
        (0..n).step_by(n.div_ceil(SAMPLE_MORSELS).max(1))
    }

    /// The heavy hitters among the words of the morsels [`HotKeys::sample`] names, or `None`
    /// when they show none worth it.
    pub(crate) fn find(sample: &[Vec<u64>]) -> Option<Self> {
        let mut counts: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
        let mut sampled = 0usize;
        for morsel in sample {
            let stride = morsel.len().div_ceil(SAMPLE_PER_MORSEL).max(1);
            for &w in morsel.iter().step_by(stride) {
                *counts.entry(w).or_insert(0) += 1;
                sampled += 1;
            }
        }
        if sampled < MIN_SAMPLE {
            return None;
        }
        let least = MIN_COUNT.max((sampled / SHARE) as u32);
        let mut hot: Vec<(u64, u32)> = counts.into_iter().filter(|&(_, c)| c >= least).collect();
        // The most frequent first (ties by key, so the choice does not depend on hash order).
        hot.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        hot.truncate(MAX_HOT);
        let rows: usize = hot.iter().map(|&(_, c)| c as usize).sum();
        if rows * MIN_ROWS_SHARE < sampled {
            return None;
        }
        Some(Self::new(hot.into_iter().map(|(w, _)| w).collect()))
    }

    /// The table of `keys` (distinct), indexed in that order.
    fn new(keys: Vec<u64>) -> Self {
        let capacity = (keys.len() * 8).next_power_of_two().max(64);
        let shift = 64 - capacity.trailing_zeros();
        let mut slots = vec![(0u64, NOT_HOT); capacity];
        for (i, &k) in keys.iter().enumerate() {
            let mut s = (multiply_shift(k) >> shift) as usize;
            while slots[s].1 != NOT_HOT {
                s = (s + 1) & (capacity - 1);
            }
            slots[s] = (k, i as u32);
        }
        Self { slots, shift, keys }
    }

    /// How many heavy hitters there are.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The key word of each index.
    pub(crate) fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The index of `word` when it is a heavy hitter, else [`NOT_HOT`]. One branch, nearly
    /// always taken, for most words: the first slot holds the word, or is empty (whose index
    /// is [`NOT_HOT`], also where the word is 0, an empty slot's key); a branch on whether the
    /// word is hot would miss on every other row of skewed keys.
    #[inline]
    pub(crate) fn index(&self, word: u64) -> u32 {
        let mask = self.slots.len() - 1;
        let mut s = (multiply_shift(word) >> self.shift) as usize;
        loop {
            let (k, i) = self.slots[s];
            if k == word || i == NOT_HOT {
                return i;
            }
            s = (s + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Morsels of 8192 words: key 7 in every `every`-th row, distinct keys elsewhere.
    fn morsels(n: usize, every: usize) -> Vec<Vec<u64>> {
        (0..n)
            .map(|m| {
                (0..8192u64)
                    .map(|r| match r as usize % every {
                        0 => 7,
                        _ => 1000 + (m as u64) * 8192 + r,
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_key_in_many_rows_is_hot_and_the_rest_are_not() {
        let hot = HotKeys::find(&morsels(32, 3)).expect("a key in a third of the rows");
        assert_eq!(hot.keys(), &[7]);
        assert_eq!(hot.index(7), 0);
        assert!((0..1100).all(|w| w == 7 || hot.index(w) == NOT_HOT));
        // Distinct keys only, or a frequent key in too few rows, or too small a sample.
        assert!(HotKeys::find(&morsels(32, usize::MAX)).is_none());
        assert!(HotKeys::find(&morsels(32, 23)).is_none());
        assert!(HotKeys::find(&[vec![7; 100]]).is_none());
    }

    #[test]
    fn every_hot_key_is_found_at_its_index() {
        let keys: Vec<u64> = (0..1000u64).map(|k| k * 0x1_0000_0001).collect();
        let hot = HotKeys::new(keys.clone());
        assert_eq!(hot.len(), 1000);
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(hot.index(k), i as u32);
            assert_eq!(hot.index(k + 1), NOT_HOT);
        }
    }
}
