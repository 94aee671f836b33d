//! `partitioned`: radix-partitioned aggregation without a partial phase. Every row goes to the
//! partition named by its key word's hash; each partition is then aggregated by one thread into
//! one table, whose groups are final. This is the plan DataFusion takes once its partial
//! aggregation stops reducing (a hash repartition feeding final aggregations), and the
//! "partition, then aggregate" side of Karnagel's and Tomé's studies.
//!
//! Where it wins: very many groups on many threads. There `thread_local` inserts every group
//! twice — into a worker's private table, whose groups are nearly as many as its rows, then into
//! a partition's merge table — and `perfect` and `sort` fold into per-thread arrays of the whole
//! domain (16 threads × 2^24 groups: 4 GiB to clear and merge; `bench cpu-sweep` on the H100
//! host's 16 threads, 2^25 rows: `sort` 2.3 s, DataFusion 0.22 s). Here each group is inserted
//! once, into a table of a partition's share of the groups, small enough to stay near the cache.
//!
//! Where it loses: heavy skew (a hot key's partition is one thread's work) and few groups (a
//! private table reduces the rows before anything moves). The planner keeps it to keys whose
//! sample is nearly all distinct and not skewed.

use arrow::array::{Array, ArrayRef};
use arrow::compute::interleave;
use rayon::prelude::*;

use super::{new_accumulators, thread_local::partition_of, Chunk, Params};
use crate::error::{GrouperError, Result};
use crate::input::{InputBatch, QuerySpec};
use crate::table::LinearTable;
use crate::trace;

/// Groups a partition's table is aimed at: a table of 2^16 groups (2 MiB of slots at load 0.5)
/// and its states stay in a core's L2/L3 share, where a table of all groups would miss on
/// nearly every probe.
const PARTITION_GROUPS: usize = 1 << 16;

/// Most partitions: each morsel keeps an offset per partition, and each partition visits every
/// morsel.
const MAX_PARTITION_BITS: u32 = 10;

/// Partition bits for at most `groups` groups on `threads` threads: enough partitions to
/// balance the threads (four each) and to keep each partition's table near
/// [`PARTITION_GROUPS`].
fn partition_bits(groups: usize, threads: usize) -> u32 {
    (threads * 4)
        .max(groups / PARTITION_GROUPS)
        .next_power_of_two()
        .trailing_zeros()
        .min(MAX_PARTITION_BITS)
}

/// One morsel's rows ordered by partition: the rows of partition `p` are
/// `rows[offsets[p]..offsets[p + 1]]`, in row order.
struct Scattered {
    rows: Vec<u32>,
    offsets: Vec<u32>,
}

/// Orders a morsel's rows by the partition of their key words (a counting sort: stable, so each
/// partition keeps the rows' order and float sums add in input order).
fn scatter(words: &[u64], bits: u32) -> Scattered {
    let parts = 1usize << bits;
    let part: Vec<u16> = words
        .iter()
        .map(|&w| partition_of(w, bits) as u16)
        .collect();
    let mut offsets = vec![0u32; parts + 1];
    for &p in &part {
        offsets[p as usize + 1] += 1;
    }
    for p in 0..parts {
        offsets[p + 1] += offsets[p];
    }
    let mut next = offsets.clone();
    let mut rows = vec![0u32; words.len()];
    for (r, &p) in part.iter().enumerate() {
        let at = &mut next[p as usize];
        rows[*at as usize] = r as u32;
        *at += 1;
    }
    Scattered { rows, offsets }
}

/// Runs the strategy: one chunk per partition.
pub fn run(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    words: &[Vec<u64>],
    params: &Params,
) -> Result<Vec<Chunk>> {
    let rows: usize = words.iter().map(Vec::len).sum();
    if rows > u32::MAX as usize {
        return Err(GrouperError::InvalidInput(format!(
            "{rows} rows exceed what one partitioned aggregation indexes (2^32)"
        )));
    }
    // Partitions for the rows, not the estimate: the planner takes this strategy where groups
    // are nearly as many as rows, and a sample's estimate of such keys runs low (2.65M groups
    // of 4M rows planned as 32k: 8 partitions of tables far out of cache, 4x slower).
    let bits = partition_bits(
        rows.max(params.initial_groups),
        rayon::current_num_threads(),
    );
    let scattered: Vec<Scattered> = words.par_iter().map(|w| scatter(w, bits)).collect();
    trace::event(|| format!("partitioned: rows scattered to {} partitions", 1 << bits));
    // Per aggregate argument, every morsel's array, for gathering a partition's rows.
    let args: Vec<Option<Vec<&dyn Array>>> = (0..spec.aggregates.len())
        .map(|a| {
            morsels
                .iter()
                .map(|m| m.args[a].as_ref().map(|x| x.as_ref() as &dyn Array))
                .collect()
        })
        .collect();
    let expect = (params.initial_groups >> bits).max(1);
    (0..1usize << bits)
        .into_par_iter()
        .map_init(Gather::default, |buf, p| {
            let mut table = LinearTable::new(expect, params.hash, params.fill_factor);
            let mut accs = new_accumulators(spec)?;
            let rows = |m: usize| (scattered[m].offsets[p + 1] - scattered[m].offsets[p]) as usize;
            let total: usize = (0..morsels.len()).map(rows).sum();
            let mut done = 0;
            for first in (0..morsels.len()).step_by(GATHER_MORSELS) {
                let last = (first + GATHER_MORSELS).min(morsels.len());
                // After the first gather, room for the groups its rows project to (an estimate
                // from a sample runs low for nearly unique keys: 10M groups of db-benchmark q10
                // planned as 32k, and nine doublings took a fifth of the time).
                if done > 0 && done < total {
                    let projected = table.len() as f64 * total as f64 / done as f64;
                    table.reserve((projected * 1.125) as usize);
                }
                done += (first..last).map(rows).sum::<usize>();
                buf.clear();
                for m in first..last {
                    let s = &scattered[m];
                    let rows = &s.rows[s.offsets[p] as usize..s.offsets[p + 1] as usize];
                    buf.at.extend(rows.iter().map(|&r| (m - first, r as usize)));
                    buf.words.extend(rows.iter().map(|&r| words[m][r as usize]));
                }
                table.map(&buf.words, &mut buf.gids);
                for (acc, arrays) in accs.iter_mut().zip(&args) {
                    let gathered: Option<ArrayRef> = match arrays {
                        Some(arrays) => Some(interleave(&arrays[first..last], &buf.at)?),
                        None => None,
                    };
                    acc.resize(table.len());
                    acc.update(&buf.gids, gathered.as_ref())?;
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

/// Morsels whose rows of one partition are gathered at a time: a bound on the gather buffers
/// (a partition's rows of all morsels at once took a fresh 1.5 GiB at 2^25 rows, and page
/// faults on 16 threads), large enough that each gather copies thousands of rows.
const GATHER_MORSELS: usize = 64;

/// A thread's reused buffers for one gather: each row's (morsel in the gather, row), key word
/// and group id.
#[derive(Default)]
struct Gather {
    at: Vec<(usize, usize)>,
    words: Vec<u64>,
    gids: Vec<u32>,
}

impl Gather {
    fn clear(&mut self) {
        self.at.clear();
        self.words.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_orders_rows_by_partition_and_keeps_row_order() {
        let words: Vec<u64> = (0..1000u64).map(|i| i * 7919 % 613).collect();
        let bits = 3;
        let s = scatter(&words, bits);
        assert_eq!(s.offsets[0], 0);
        assert_eq!(s.offsets[8] as usize, words.len());
        let mut seen = vec![false; words.len()];
        for p in 0..8 {
            let rows = &s.rows[s.offsets[p] as usize..s.offsets[p + 1] as usize];
            assert!(rows.windows(2).all(|w| w[0] < w[1]), "row order in {p}");
            for &r in rows {
                assert_eq!(partition_of(words[r as usize], bits), p);
                assert!(!std::mem::replace(&mut seen[r as usize], true));
            }
        }
        assert!(seen.iter().all(|&s| s), "every row placed once");
    }

    #[test]
    fn partitions_balance_threads_and_bound_tables() {
        assert_eq!(partition_bits(0, 2), 3);
        assert_eq!(partition_bits(1 << 20, 2), 4);
        assert_eq!(partition_bits(1 << 24, 16), 8);
        assert_eq!(partition_bits(1 << 40, 16), MAX_PARTITION_BITS);
    }
}
