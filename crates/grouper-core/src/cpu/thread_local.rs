//! `thread_local`: every worker aggregates its batches into a private linear-probing table (no
//! sharing, no atomics: Rosenfeld's INDEPENDENT, Luan's "independent tables"; the per-worker state
//! is [`super::streaming::Partial`] over a [`LinearTable`]), then the tables are merged in parallel by radix partition, as
//! DuckDB does: each group goes to the partition named by its hash, and each partition is merged
//! by one thread into its own table, so no two threads touch the same group and the merge scales
//! with the threads.

use rayon::prelude::*;

use super::group_index::{GroupIndex, Groups};
use super::{new_accumulators, Accumulators, Chunk, Params};
use crate::error::Result;
use crate::hash::murmur3;
use crate::input::QuerySpec;
use crate::table::LinearTable;

/// Partition of a key word for the merge. Uses murmur3's low bits, independent of the high bits
/// the partition tables index with, whatever hash function those use.
#[inline]
fn partition_of(word: u64, bits: u32) -> usize {
    (murmur3(word) & ((1u64 << bits) - 1)) as usize
}

impl GroupIndex for LinearTable {
    fn intern(&mut self, words: &[u64], gids: &mut Vec<u32>) {
        self.map(words, gids);
    }

    fn len(&self) -> usize {
        LinearTable::len(self)
    }

    fn words(&self) -> Vec<u64> {
        self.keys().to_vec()
    }

    fn into_groups(self: Box<Self>) -> Groups {
        Groups {
            words: self.into_keys(),
            ids: None,
        }
    }

    fn memory_bytes(&self) -> usize {
        LinearTable::memory_bytes(self)
    }
}

/// One worker's group ids by merge partition, and its smallest and largest key word.
type WorkerParts = (Vec<Vec<u32>>, (u64, u64));

/// Merges per-worker groups (key words by group id, and their accumulators) by radix partition;
/// returns one chunk per partition.
pub fn merge(
    spec: &QuerySpec,
    locals: Vec<(Vec<u64>, Accumulators)>,
    params: &Params,
) -> Result<Vec<Chunk>> {
    let mut locals: Vec<_> = locals.into_iter().filter(|l| !l.0.is_empty()).collect();
    if locals.len() <= 1 {
        return Ok(locals
            .pop()
            .map(|(words, accs)| Chunk {
                words,
                accs,
                select: None,
            })
            .into_iter()
            .collect());
    }
    let total: usize = locals.iter().map(|l| l.0.len()).sum();
    let threads = rayon::current_num_threads();
    // Enough partitions to balance threads; each at least a few thousand groups.
    let bits = ((threads * 4).min(total / 4096 + 1))
        .next_power_of_two()
        .trailing_zeros();
    let parts = 1usize << bits;
    // For each worker: the group ids falling into each partition, and its smallest and largest
    // key word.
    let by_part: Vec<WorkerParts> = locals
        .par_iter()
        .map(|(words, _)| {
            let mut lists = vec![Vec::new(); parts];
            let mut range = (u64::MAX, 0);
            for (g, &w) in words.iter().enumerate() {
                lists[partition_of(w, bits)].push(g as u32);
                range = (range.0.min(w), range.1.max(w));
            }
            (lists, range)
        })
        .collect();
    let disjoint = disjoint(by_part.iter().map(|b| b.1).collect());
    (0..parts)
        .into_par_iter()
        .map(|p| {
            // Workers over disjoint key ranges (a sorted or clustered key: TPC-H Q18's
            // `l_orderkey`) share no group: the partition's table holds the sum of their groups,
            // sized for it at once rather than grown from the largest worker's share (16
            // workers: four doublings, each rehashing the groups so far and zeroing new pages).
            let sizes = by_part.iter().map(|b| b.0[p].len());
            let expect = match disjoint {
                true => sizes.sum(),
                false => sizes.max().unwrap_or(0),
            };
            let mut table = LinearTable::new(expect, params.hash, params.fill_factor);
            let mut accs = new_accumulators(spec)?;
            let mut dst = Vec::new();
            for ((words, local_accs), (lists, _)) in locals.iter().zip(&by_part) {
                let src = &lists[p];
                dst.clear();
                dst.extend(src.iter().map(|&g| table.find_or_insert(words[g as usize])));
                for (a, b) in accs.iter_mut().zip(local_accs) {
                    a.resize(table.len());
                    a.merge(b.as_ref(), src, &dst)?;
                }
            }
            Ok(Chunk {
                words: table.into_keys(),
                accs,
                select: None,
            })
        })
        .collect()
}

/// Whether the key-word ranges (smallest, largest) overlap nowhere.
fn disjoint(mut ranges: Vec<(u64, u64)>) -> bool {
    ranges.sort_unstable();
    ranges.windows(2).all(|w| w[0].1 < w[1].0)
}

#[cfg(test)]
mod tests {
    use super::disjoint;

    #[test]
    fn ranges_are_disjoint_only_when_none_overlap() {
        assert!(disjoint(vec![]));
        assert!(disjoint(vec![(5, 9)]));
        assert!(disjoint(vec![(10, 19), (0, 9), (20, 20)]));
        assert!(!disjoint(vec![(10, 19), (0, 10)]), "sharing key 10");
        assert!(!disjoint(vec![(0, 100), (20, 30), (200, 300)]), "nested");
    }
}
