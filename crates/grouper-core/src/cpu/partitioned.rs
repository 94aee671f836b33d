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
//! Where it loses: few groups (a private table reduces the rows before anything moves; copying
//! every row costs 0.12 s at 2^25 rows on 16 threads, whatever the groups) and a key in a large
//! share of the rows (its partition is one thread's work, unless the sample names it a heavy
//! hitter, below). The planner keeps it to many groups over keys too wide to index, or
//! per-thread direct arrays too large for all threads, and no key in a quarter of the sampled
//! rows.
//!
//! Heavy hitters ([`HotKeys`]: skewed keys' most frequent few) are not copied: each block folds
//! their rows into states of its own as it scatters the rest, and each partition merges the
//! blocks' states of its heavy hitters, block after block (so float sums add in one order
//! whatever the threads).

use std::ops::Range;

use arrow::array::{Array, ArrayRef};
use arrow::compute::interleave;
use rayon::prelude::*;

use super::hot_keys::{HotKeys, NOT_HOT};
use super::key_words::KeyWords;
use super::{new_accumulators, thread_local::partition_of, Accumulators, Chunk, Params};
use crate::error::{GrouperError, Result};
use crate::input::{InputBatch, QuerySpec};
use crate::keys::{Dictionary, HashedValues, KeyCodec, KeyRows};
use crate::table::{KeyTable, LinearTable};
use crate::trace;

/// Groups a partition's table is aimed at: a table of 2^16 groups (2 MiB of slots at load 0.5)
/// and its states stay in a core's L2/L3 share, where a table of all groups would miss on
/// nearly every probe.
const PARTITION_GROUPS: usize = 1 << 16;

/// Most partitions: each block keeps an offset per partition, and each partition visits every
/// block.
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

/// Morsels scattered together into one [`Block`]: 64k rows, whose key words and values (about a
/// MiB) stay in a core's cache while the scatter reads them in partition order.
const BLOCK_MORSELS: usize = 8;

/// A block of morsels' rows copied in partition order: the rows of partition `p` are
/// `offsets[p]..offsets[p + 1]` of `keys` and of each argument array, in input order. Each
/// partition then reads a contiguous run from every block, where gathering its rows from the
/// morsels themselves read a cache line for each 8-byte value (one in 512 of a line's rows
/// was the partition's): 0.14 s of 0.25 at 2^25 rows on 16 threads.
struct Block<K> {
    /// Key words ([`run`]), or interned rows' bytes with their hashes, which picked the
    /// partition and probe its dictionary shard ([`run_interned`]).
    keys: K,
    args: Vec<Option<ArrayRef>>,
    offsets: Vec<u32>,
    /// The block's rows of heavy hitters folded, one group per [`HotKeys`] index; `None`
    /// where it has none.
    hot: Option<Accumulators>,
}

/// Morsels' rows in partition order.
struct Order {
    /// Each partition's first position, and the end.
    offsets: Vec<u32>,
    /// The (morsel, row) at each position.
    at: Vec<(usize, usize)>,
    /// The aggregates' arguments copied into that order.
    args: Vec<Option<ArrayRef>>,
}

/// The partition order of `morsels`' rows, given each row's partition (`part`, morsel after
/// morsel) of `parts`, rows of partition `parts` left out (heavy hitters'): a stable counting
/// sort, so each partition keeps the input's row order and float sums add as the input lists
/// them. The rows left out are placed too, past the others, and cut off: no branch per row.
fn partition_order(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    part: &[u16],
    parts: usize,
) -> Result<Order> {
    let mut offsets = vec![0u32; parts + 2];
    for &p in part {
        offsets[p as usize + 1] += 1;
    }
    for p in 0..=parts {
        offsets[p + 1] += offsets[p];
    }
    let mut next = offsets.clone();
    let mut at = vec![(0usize, 0usize); part.len()];
    let mut i = 0;
    for (m, morsel) in morsels.iter().enumerate() {
        for r in 0..morsel.num_rows() {
            let slot = &mut next[part[i] as usize];
            at[*slot as usize] = (m, r);
            *slot += 1;
            i += 1;
        }
    }
    offsets.truncate(parts + 1);
    at.truncate(offsets[parts] as usize);
    let args = gather_args(spec, morsels, &at)?;
    Ok(Order { offsets, at, args })
}

/// Each aggregate's argument at the `(morsel, row)`s of `at`, in that order.
fn gather_args(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    at: &[(usize, usize)],
) -> Result<Vec<Option<ArrayRef>>> {
    Ok((0..spec.aggregates.len())
        .map(|a| {
            let arrays: Option<Vec<&dyn Array>> = morsels
                .iter()
                .map(|m| m.args[a].as_ref().map(|x| x.as_ref() as &dyn Array))
                .collect();
            arrays.map(|arrays| interleave(&arrays, at)).transpose()
        })
        .collect::<std::result::Result<_, _>>()?)
}

/// The heavy hitters' rows of `morsels` (at `at`, of indexes `gids`) folded into states of
/// `groups` groups.
fn fold_hot(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    at: &[(usize, usize)],
    gids: &[u32],
    groups: usize,
) -> Result<Accumulators> {
    let mut accs = new_accumulators(spec)?;
    for (acc, arg) in accs.iter_mut().zip(gather_args(spec, morsels, at)?) {
        acc.resize(groups);
        acc.update(gids, arg.as_ref())?;
    }
    Ok(accs)
}

/// Copies `morsels` (with their key `words`) in partition order, but for the rows of `hot`
/// keys, which it folds.
fn scatter(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    words: &[Vec<u64>],
    bits: u32,
    hot: Option<&HotKeys>,
) -> Result<Block<Vec<u64>>> {
    let rows: usize = words.iter().map(Vec::len).sum();
    let (mut hot_at, mut hot_gids) = (Vec::new(), Vec::new());
    let part: Vec<u16> = match hot {
        None => words
            .iter()
            .flatten()
            .map(|&w| partition_of(w, bits) as u16)
            .collect(),
        Some(h) => {
            // Every row written to the heavy hitters' lists, which keep the hot ones: a branch
            // on hot or not would miss on every other row of skewed keys.
            let mut part = Vec::with_capacity(rows);
            hot_at.resize(rows, (0, 0));
            hot_gids.resize(rows, 0);
            let mut n = 0;
            for (m, w) in words.iter().enumerate() {
                for (r, &w) in w.iter().enumerate() {
                    let g = h.index(w);
                    hot_at[n] = (m, r);
                    hot_gids[n] = g;
                    let hot = g != NOT_HOT;
                    n += hot as usize;
                    part.push(match hot {
                        true => 1 << bits,
                        false => partition_of(w, bits) as u16,
                    });
                }
            }
            hot_at.truncate(n);
            hot_gids.truncate(n);
            part
        }
    };
    let order = partition_order(spec, morsels, &part, 1 << bits)?;
    let hot = match (hot, hot_at.is_empty()) {
        (Some(h), false) => Some(fold_hot(spec, morsels, &hot_at, &hot_gids, h.len())?),
        _ => None,
    };
    Ok(Block {
        keys: order.at.iter().map(|&(m, r)| words[m][r]).collect(),
        args: order.args,
        offsets: order.offsets,
        hot,
    })
}

/// Copies `morsels` in partition order with their keys as interned rows: a row's partition is
/// its shard of `dict`.
fn scatter_rows(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    codec: &KeyCodec,
    dict: &Dictionary,
) -> Result<Block<HashedValues>> {
    let rows: Vec<KeyRows> = morsels
        .iter()
        .map(|m| codec.rows(&m.keys, m.num_rows()))
        .collect::<Result<_>>()?;
    let n: usize = rows.iter().map(KeyRows::num_rows).sum();
    let (mut hashes, mut part) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut firsts = Vec::with_capacity(rows.len());
    for r in &rows {
        firsts.push(hashes.len());
        for i in 0..r.num_rows() {
            let (h, shard) = dict.place(r.row(i));
            hashes.push(h);
            part.push(shard as u16);
        }
    }
    let order = partition_order(spec, morsels, &part, dict.shard_count())?;
    let bytes: usize = rows.iter().map(KeyRows::bytes).sum();
    let mut keys = HashedValues::with_capacity(n, bytes);
    for &(m, r) in &order.at {
        keys.push(hashes[firsts[m] + r], rows[m].row(r));
    }
    Ok(Block {
        keys,
        args: order.args,
        offsets: order.offsets,
        hot: None,
    })
}

/// A partition's heavy hitters: their indexes in the blocks' folded states (`src`) and their
/// group ids in the partition's table (`dst`, the first ids: inserted before any row).
#[derive(Debug, Default)]
struct HotShare {
    src: Vec<u32>,
    dst: Vec<u32>,
}

/// Aggregates partition `p` of `blocks`: `map` gives the group ids of a block's run of rows
/// (and the groups so far), told how many of the partition's rows came before and in all;
/// the blocks' states of the partition's heavy hitters (`hot`) merge in block order.
fn fold_partition<K>(
    spec: &QuerySpec,
    blocks: &[Block<K>],
    p: usize,
    gids: &mut Vec<u32>,
    hot: &HotShare,
    mut map: impl FnMut(&K, Range<usize>, &mut Vec<u32>, (usize, usize)) -> Result<usize>,
) -> Result<Accumulators> {
    let range = |b: &Block<K>| b.offsets[p] as usize..b.offsets[p + 1] as usize;
    let total: usize = blocks.iter().map(|b| range(b).len()).sum();
    let mut accs = new_accumulators(spec)?;
    let mut done = 0;
    let mut groups = hot.dst.len();
    for b in blocks {
        let rows = range(b);
        if !rows.is_empty() {
            groups = map(&b.keys, rows.clone(), gids, (done, total))?;
            done += rows.len();
            for (acc, arg) in accs.iter_mut().zip(&b.args) {
                let arg = arg.as_ref().map(|a| a.slice(rows.start, rows.len()));
                acc.resize(groups);
                acc.update(gids, arg.as_ref())?;
            }
        }
        if let (Some(states), false) = (&b.hot, hot.src.is_empty()) {
            for (acc, from) in accs.iter_mut().zip(states) {
                acc.resize(groups);
                acc.merge(from.as_ref(), &hot.src, &hot.dst)?;
            }
        }
    }
    for acc in &mut accs {
        acc.resize(groups);
    }
    Ok(accs)
}

/// Runs the strategy: one chunk per partition.
pub fn run(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    words: &KeyWords<'_>,
    params: &Params,
) -> Result<Vec<Chunk>> {
    run_with(spec, morsels, params, |m| words.of(m))
}

/// [`run`] given the key words of morsel `m` by `words_of(m)`: each block's words are made
/// just before it is scattered, and read from cache.
fn run_with(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    params: &Params,
    words_of: impl Fn(usize) -> Result<Vec<u64>> + Sync,
) -> Result<Vec<Chunk>> {
    let rows: usize = morsels.iter().map(InputBatch::num_rows).sum();
    let bits = bits_for_rows(rows, params);
    let sample = HotKeys::sample(morsels.len())
        .map(&words_of)
        .collect::<Result<Vec<_>>>()?;
    let hot = HotKeys::find(&sample);
    drop(sample);
    let blocks: Vec<Block<Vec<u64>>> = morsels
        .par_chunks(BLOCK_MORSELS)
        .enumerate()
        .map(|(b, m)| {
            let first = b * BLOCK_MORSELS;
            let words = (first..first + m.len())
                .map(&words_of)
                .collect::<Result<Vec<_>>>()?;
            scatter(spec, m, &words, bits, hot.as_ref())
        })
        .collect::<Result<_>>()?;
    trace::event(|| {
        format!(
            "partitioned: rows scattered to {} partitions, {} heavy hitters folded in place",
            1 << bits,
            hot.as_ref().map_or(0, HotKeys::len)
        )
    });
    // Each partition's heavy hitters: (index, key word).
    let mut hot_of: Vec<Vec<(u32, u64)>> = vec![Vec::new(); 1 << bits];
    for (i, &k) in hot.iter().flat_map(|h| h.keys()).enumerate() {
        hot_of[partition_of(k, bits)].push((i as u32, k));
    }
    let expect = (params.initial_groups >> bits).max(1);
    (0..1usize << bits)
        .into_par_iter()
        .map_init(Vec::new, |gids, p| {
            let mut table = LinearTable::new(expect, params.hash, params.fill_factor);
            let hot = HotShare {
                src: hot_of[p].iter().map(|&(i, _)| i).collect(),
                dst: hot_of[p]
                    .iter()
                    .map(|&(_, k)| table.find_or_insert(k))
                    .collect(),
            };
            let accs = fold_partition(
                spec,
                &blocks,
                p,
                gids,
                &hot,
                |words, rows, gids, (done, total)| {
                    // Once some rows are in, room for the groups they project to (an estimate from
                    // a sample runs low for nearly unique keys: 10M groups of db-benchmark q10
                    // planned as 32k, and nine doublings took a fifth of the time).
                    if done > 0 && done < total {
                        let projected = table.len() as f64 * total as f64 / done as f64;
                        table.reserve((projected * 1.125) as usize);
                    }
                    table.map(&words[rows], gids);
                    Ok(table.len())
                },
            )?;
            Ok(Chunk {
                words: table.into_keys(),
                accs,
                select: None,
            })
        })
        .collect()
}

/// Partition bits for `rows` input rows on the pool's threads: partitions for the rows, not
/// the estimate. The planner takes this strategy where groups are nearly as many as rows, and
/// a sample's estimate of such keys runs low (2.65M groups of 4M rows planned as 32k: 8
/// partitions of tables far out of cache, 4x slower).
fn bits_for_rows(rows: usize, params: &Params) -> u32 {
    partition_bits(
        rows.max(params.initial_groups),
        rayon::current_num_threads(),
    )
}

/// Partitions a buffered partitioned aggregation over interned keys wants for `rows` rows
/// (the shards of the codec's dictionary, [`KeyCodec::plan_open`]).
pub fn interned_partitions(rows: usize, params: &Params) -> usize {
    1 << bits_for_rows(rows, params)
}

/// Runs the strategy over keys too wide to pack (an open interned `codec` whose dictionary has
/// [`interned_partitions`] shards): each row's `arrow-row` bytes go to the partition of their
/// shard, and each partition interns them into its own shard, whose dense local indexes are
/// the group ids. The grouping is done once, by the interning: planning over every row, then
/// encoding, then grouping the codes in a table of their own did it three times (db-benchmark
/// q10 at 3e7 rows on 2 threads: 20 s, DataFusion 3.9 s).
pub fn run_interned(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    codec: &KeyCodec,
) -> Result<Vec<Chunk>> {
    let dict = codec.row_dictionary().ok_or_else(|| {
        GrouperError::InvalidInput("interned aggregation over packed keys".into())
    })?;
    let blocks: Vec<Block<HashedValues>> = morsels
        .par_chunks(BLOCK_MORSELS)
        .map(|m| scatter_rows(spec, m, codec, dict))
        .collect::<Result<_>>()?;
    let parts = dict.shard_count();
    trace::event(|| format!("partitioned: interned rows scattered to {parts} partitions"));
    (0..parts)
        .into_par_iter()
        .map_init(Vec::new, |gids, p| {
            let mut groups = 0;
            let accs = fold_partition(
                spec,
                &blocks,
                p,
                gids,
                &HotShare::default(),
                |keys, rows, gids, _| {
                    let values = rows.map(|i| (keys.hash(i), keys.get(i)));
                    groups = dict.intern_in_shard(p, values, gids);
                    Ok(groups)
                },
            )?;
            let words: Vec<u64> = (0..groups as u32).map(|l| dict.code(p, l)).collect();
            if words.last().is_some_and(|&w| w > u64::from(u32::MAX)) {
                return Err(GrouperError::Unsupported(
                    "more than 2^32 groups of keys too wide to pack".into(),
                ));
            }
            Ok(Chunk {
                words,
                accs,
                select: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::DataType;

    use super::*;
    use crate::agg::{AggKind, AggregateSpec};

    #[test]
    fn blocks_hold_rows_in_partition_order_and_input_order_within() {
        let spec = QuerySpec {
            key_types: vec![DataType::Int64],
            aggregates: vec![
                AggregateSpec::new(AggKind::Sum, DataType::Int64),
                AggregateSpec::count_star(),
            ],
        };
        // Two morsels; each row's value names it: morsel * 1000 + row.
        let words: Vec<Vec<u64>> = (0..2u64)
            .map(|m| (0..500u64).map(|r| (r * 7919 + m) % 613).collect())
            .collect();
        let morsels: Vec<InputBatch> = (0..2i64)
            .map(|m| {
                let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(0..500));
                let vals: ArrayRef =
                    Arc::new(Int64Array::from_iter_values((0..500).map(|r| m * 1000 + r)));
                InputBatch::try_new(&spec, vec![keys], vec![Some(vals), None], 500).unwrap()
            })
            .collect();
        let bits = 3;
        let b = scatter(&spec, &morsels, &words, bits, None).unwrap();
        assert_eq!(b.offsets[0], 0);
        assert_eq!(b.offsets[8], 1000);
        assert!(b.args[1].is_none(), "COUNT(*) has no argument");
        let vals = b.args[0].as_ref().unwrap();
        let vals = vals.as_any().downcast_ref::<Int64Array>().unwrap();
        let mut seen = vec![false; 1000];
        for p in 0..8 {
            let rows = b.offsets[p] as usize..b.offsets[p + 1] as usize;
            let ids: Vec<i64> = rows.clone().map(|i| vals.value(i)).collect();
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "input order in {p}");
            for i in rows {
                let (m, r) = (vals.value(i) / 1000, vals.value(i) % 1000);
                assert_eq!(b.keys[i], words[m as usize][r as usize]);
                assert_eq!(partition_of(b.keys[i], bits), p);
                assert!(!std::mem::replace(&mut seen[(m * 500 + r) as usize], true));
            }
        }
        assert!(seen.iter().all(|&s| s), "every row placed once");
    }

    #[test]
    fn heavy_hitters_fold_in_place_to_the_same_groups() {
        use std::collections::HashMap;

        use arrow::array::Float64Array;

        use crate::hash::HashFn;

        let spec = QuerySpec {
            key_types: vec![DataType::Int64],
            aggregates: vec![
                AggregateSpec::new(AggKind::Sum, DataType::Int64),
                AggregateSpec::new(AggKind::Min, DataType::Float64),
                AggregateSpec::count_star(),
            ],
        };
        // 40 morsels of 4096 rows: keys 3 and 9 in a third of the rows each, 5000 others;
        // some values NULL.
        let key = |m: u64, r: u64| match (m * 4096 + r) % 3 {
            0 => 3,
            1 => 9,
            _ => 100 + (m * 4096 + r) * 7919 % 5000,
        };
        let words: Vec<Vec<u64>> = (0..40u64)
            .map(|m| (0..4096u64).map(|r| key(m, r)).collect())
            .collect();
        assert_eq!(HotKeys::find(&words).map(|h| h.len()), Some(2));
        let mut expect: HashMap<u64, (i64, f64, u64)> = HashMap::new();
        let morsels: Vec<InputBatch> = (0..40u64)
            .map(|m| {
                let v =
                    |r: u64| (!(m * 4096 + r).is_multiple_of(11)).then_some((m * 4096 + r) as i64);
                let f = |r: u64| -(((m * 4096 + r) % 1000) as f64);
                for r in 0..4096 {
                    let e = expect.entry(key(m, r)).or_insert((0, f64::INFINITY, 0));
                    e.0 += v(r).unwrap_or(0);
                    e.1 = e.1.min(f(r));
                    e.2 += 1;
                }
                let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(0..4096));
                let vals: ArrayRef = Arc::new(Int64Array::from_iter((0..4096).map(v)));
                let floats: ArrayRef = Arc::new(Float64Array::from_iter_values((0..4096).map(f)));
                InputBatch::try_new(
                    &spec,
                    vec![keys],
                    vec![Some(vals), Some(floats), None],
                    4096,
                )
                .unwrap()
            })
            .collect();
        let params = Params {
            hash: HashFn::default(),
            fill_factor: 0.5,
            probing: Default::default(),
            buckets: Default::default(),
            initial_groups: 16,
            private_groups: 16,
        };
        let mut got: HashMap<u64, (i64, f64, u64)> = HashMap::new();
        for chunk in run_with(&spec, &morsels, &params, |m| Ok(words[m].clone())).unwrap() {
            let mut accs = chunk.accs.into_iter();
            let mut next = || accs.next().unwrap().finalize(None).unwrap();
            let (sums, mins, counts) = (next(), next(), next());
            let sums = sums.as_any().downcast_ref::<Int64Array>().unwrap();
            let mins = mins.as_any().downcast_ref::<Float64Array>().unwrap();
            let counts = counts.as_any().downcast_ref::<Int64Array>().unwrap();
            for (i, &w) in chunk.words.iter().enumerate() {
                let row = (sums.value(i), mins.value(i), counts.value(i) as u64);
                assert!(got.insert(w, row).is_none(), "group {w} in two chunks");
            }
        }
        assert_eq!(got, expect);
    }

    #[test]
    fn partitions_balance_threads_and_bound_tables() {
        assert_eq!(partition_bits(0, 2), 3);
        assert_eq!(partition_bits(1 << 20, 2), 4);
        assert_eq!(partition_bits(1 << 24, 16), 8);
        assert_eq!(partition_bits(1 << 40, 16), MAX_PARTITION_BITS);
    }
}
