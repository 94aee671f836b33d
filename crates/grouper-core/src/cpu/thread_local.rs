//! `thread_local`: every worker aggregates its morsels into a private linear-probing table (no
//! sharing, no atomics: Rosenfeld's INDEPENDENT, Luan's "independent tables"), then the tables are
//! merged in parallel by radix partition, as DuckDB does: each group goes to the partition named
//! by its hash, and each partition is merged by one thread into its own table, so no two threads
//! touch the same group and the merge scales with the threads.

use rayon::prelude::*;

use super::morsel::run_workers;
use super::{new_accumulators, update_all, Chunk, GroupAccumulator, Params};
use crate::error::Result;
use crate::hash::murmur3;
use crate::input::{InputBatch, QuerySpec};
use crate::table::LinearTable;

struct Local {
    table: LinearTable,
    accs: Vec<Box<dyn GroupAccumulator>>,
    gids: Vec<u32>,
}

/// Runs the strategy; returns one chunk per merge partition.
pub fn run(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    words: &[Vec<u64>],
    params: &Params,
) -> Result<Vec<Chunk>> {
    let locals = run_workers(
        morsels.len(),
        || {
            Ok(Local {
                table: LinearTable::new(params.initial_groups, params.hash, params.fill_factor),
                accs: new_accumulators(spec)?,
                gids: Vec::new(),
            })
        },
        |l, m| {
            l.table.map(&words[m], &mut l.gids);
            update_all(&mut l.accs, &l.gids, &morsels[m], l.table.len())
        },
    )?;
    let mut locals: Vec<Local> = locals.into_iter().filter(|l| !l.table.is_empty()).collect();
    if locals.len() <= 1 {
        return Ok(match locals.pop() {
            Some(l) => vec![Chunk {
                words: l.table.into_keys(),
                accs: l.accs,
                select: None,
            }],
            None => Vec::new(),
        });
    }
    merge_partitioned(spec, &locals, params)
}

/// Partition of a key word for the merge. Uses murmur3's low bits, independent of the high bits
/// the partition tables index with, whatever hash function those use.
#[inline]
fn partition_of(word: u64, bits: u32) -> usize {
    (murmur3(word) & ((1u64 << bits) - 1)) as usize
}

fn merge_partitioned(spec: &QuerySpec, locals: &[Local], params: &Params) -> Result<Vec<Chunk>> {
    let total: usize = locals.iter().map(|l| l.table.len()).sum();
    let threads = rayon::current_num_threads();
    // Enough partitions to balance threads; each at least a few thousand groups.
    let bits = ((threads * 4).min(total / 4096 + 1))
        .next_power_of_two()
        .trailing_zeros();
    let parts = 1usize << bits;
    // For each local table: the group ids falling into each partition.
    let by_part: Vec<Vec<Vec<u32>>> = locals
        .par_iter()
        .map(|l| {
            let mut lists = vec![Vec::new(); parts];
            for (g, &w) in l.table.keys().iter().enumerate() {
                lists[partition_of(w, bits)].push(g as u32);
            }
            lists
        })
        .collect();
    (0..parts)
        .into_par_iter()
        .map(|p| {
            let expect = by_part.iter().map(|l| l[p].len()).max().unwrap_or(0);
            let mut table = LinearTable::new(expect, params.hash, params.fill_factor);
            let mut accs = new_accumulators(spec)?;
            let mut dst = Vec::new();
            for (l, lists) in locals.iter().zip(&by_part) {
                let src = &lists[p];
                dst.clear();
                dst.extend(
                    src.iter()
                        .map(|&g| table.find_or_insert(l.table.keys()[g as usize])),
                );
                for (a, b) in accs.iter_mut().zip(&l.accs) {
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
