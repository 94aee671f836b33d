//! `thread_local`: every worker aggregates its batches into a private linear-probing table (no
//! sharing, no atomics: Rosenfeld's INDEPENDENT, Luan's "independent tables"; the per-worker state
//! is [`super::streaming::Partial`] over a [`LinearTable`]), then the tables are merged in parallel by radix partition, as
//! DuckDB does: each group goes to the partition named by its hash, and each partition is merged
//! by one thread into its own table, so no two threads touch the same group and the merge scales
//! with the threads.

use rayon::prelude::*;

use super::{new_accumulators, Accumulators, Chunk, Params};
use crate::error::Result;
use crate::hash::murmur3;
use crate::input::QuerySpec;
use crate::table::{KeyTable, LinearTable};

/// Partition of a key word, for this merge and for `partitioned`'s rows. Uses murmur3's low
/// bits, independent of the high bits the partition tables index with, whatever hash function
/// those use.
#[inline]
pub(super) fn partition_of(word: u64, bits: u32) -> usize {
    (murmur3(word) & ((1u64 << bits) - 1)) as usize
}

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
    // Workers over disjoint key ranges (a sorted or clustered key: TPC-H Q18's `l_orderkey`,
    // each worker a run of the file) share no group: each worker's groups are final, and the
    // result is their chunks as they are, with no partitioning pass, no partition tables and
    // no copy of the states (at SF 10, 15M groups hashed again into new tables).
    let ranges: Vec<(u64, u64)> = locals
        .par_iter()
        .map(|(words, _)| {
            words
                .iter()
                .fold((u64::MAX, 0), |(lo, hi), &w| (lo.min(w), hi.max(w)))
        })
        .collect();
    if disjoint(ranges) {
        return Ok(locals
            .into_iter()
            .map(|(words, accs)| Chunk {
                words,
                accs,
                select: None,
            })
            .collect());
    }
    let total: usize = locals.iter().map(|l| l.0.len()).sum();
    let threads = rayon::current_num_threads();
    // Enough partitions to balance threads; each at least a few thousand groups.
    let bits = ((threads * 4).min(total / 4096 + 1))
        .next_power_of_two()
        .trailing_zeros();
    let parts = 1usize << bits;
    // For each worker: the group ids falling into each partition.
    let by_part: Vec<Vec<Vec<u32>>> = locals
        .par_iter()
        .map(|(words, _)| {
            let mut lists = vec![Vec::new(); parts];
            for (g, &w) in words.iter().enumerate() {
                lists[partition_of(w, bits)].push(g as u32);
            }
            lists
        })
        .collect();
    (0..parts)
        .into_par_iter()
        .map(|p| {
            // Sized for the largest worker's share of the partition; it grows past that.
            let expect = by_part.iter().map(|b| b[p].len()).max().unwrap_or(0);
            let mut table = LinearTable::new(expect, params.hash, params.fill_factor);
            let mut accs = new_accumulators(spec)?;
            let mut dst = Vec::new();
            for ((words, local_accs), lists) in locals.iter().zip(&by_part) {
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
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array};
    use arrow::datatypes::DataType;

    use super::*;
    use crate::agg::{AggKind, AggregateSpec};
    use crate::hash::HashFn;

    /// One worker's groups: each word's SUM of `values` and COUNT(*).
    fn worker(spec: &QuerySpec, words: &[u64], values: &[i64]) -> (Vec<u64>, Accumulators) {
        let mut accs = new_accumulators(spec).unwrap();
        let gids: Vec<u32> = (0..words.len() as u32).collect();
        let input: ArrayRef = Arc::new(Int64Array::from(values.to_vec()));
        for (a, arg) in accs.iter_mut().zip([Some(&input), None]) {
            a.resize(words.len());
            a.update(&gids, arg).unwrap();
        }
        (words.to_vec(), accs)
    }

    /// The merged result as word → (sum, count).
    fn merged(
        spec: &QuerySpec,
        locals: Vec<(Vec<u64>, Accumulators)>,
    ) -> (usize, BTreeMap<u64, (i64, i64)>) {
        let params = Params {
            hash: HashFn::Murmur3,
            fill_factor: 0.5,
            probing: Default::default(),
            buckets: Default::default(),
            initial_groups: 1,
            private_groups: 1,
        };
        let chunks = merge(spec, locals, &params).unwrap();
        let n = chunks.len();
        let mut out = BTreeMap::new();
        for c in chunks {
            let mut cols = c
                .accs
                .into_iter()
                .map(|a| a.finalize(c.select.as_deref()).unwrap());
            let (sums, counts) = (cols.next().unwrap(), cols.next().unwrap());
            let sums = sums.as_any().downcast_ref::<Int64Array>().unwrap();
            let counts = counts.as_any().downcast_ref::<Int64Array>().unwrap();
            for (i, &w) in c.words.iter().enumerate() {
                let prev = out.insert(w, (sums.value(i), counts.value(i)));
                assert!(prev.is_none(), "word {w} in two chunks");
            }
        }
        (n, out)
    }

    #[test]
    fn workers_over_disjoint_ranges_keep_their_groups_and_others_merge() {
        let spec = QuerySpec {
            key_types: vec![DataType::Int64],
            aggregates: vec![
                AggregateSpec::new(AggKind::Sum, DataType::Int64),
                AggregateSpec::count_star(),
            ],
        };
        // Disjoint: each worker's groups are the result's, one chunk per worker.
        let (n, out) = merged(
            &spec,
            vec![
                worker(&spec, &[7, 5, 6], &[1, 2, 3]),
                worker(&spec, &[], &[]),
                worker(&spec, &[10, 12], &[4, 5]),
                worker(&spec, &[0, 3], &[6, 7]),
            ],
        );
        assert_eq!(n, 3);
        let want: BTreeMap<u64, (i64, i64)> = [
            (0, (6, 1)),
            (3, (7, 1)),
            (5, (2, 1)),
            (6, (3, 1)),
            (7, (1, 1)),
            (10, (4, 1)),
            (12, (5, 1)),
        ]
        .into_iter()
        .collect();
        assert_eq!(out, want);
        // Ranges that touch at one word (6) merge that group.
        let (_, out) = merged(
            &spec,
            vec![
                worker(&spec, &[5, 6], &[1, 2]),
                worker(&spec, &[6, 9], &[10, 20]),
            ],
        );
        let want: BTreeMap<u64, (i64, i64)> = [(5, (1, 1)), (6, (12, 2)), (9, (20, 1))]
            .into_iter()
            .collect();
        assert_eq!(out, want);
    }

    #[test]
    fn ranges_are_disjoint_only_when_none_overlap() {
        assert!(disjoint(vec![]));
        assert!(disjoint(vec![(5, 9)]));
        assert!(disjoint(vec![(10, 19), (0, 9), (20, 20)]));
        assert!(!disjoint(vec![(10, 19), (0, 10)]), "sharing key 10");
        assert!(!disjoint(vec![(0, 100), (20, 30), (200, 300)]), "nested");
    }
}
