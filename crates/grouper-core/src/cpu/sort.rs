//! `sort`: sort-based grouping (the sort-based aggregation paper; Karnagel §5.2). Every row
//! becomes a `(key word, morsel, row)` triple; a parallel sort brings equal keys together; each
//! run of equal keys is one group, numbered in key order. The rows' group ids are then dense, so
//! the values fold into per-thread arrays exactly as in `perfect` ([`super::dense`]).
//!
//! It costs a sort, but its memory traffic is sequential and independent of the group count, and
//! its output comes out ordered by key, which a following `ORDER BY` can use.

use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;

use super::key_words::KeyWords;
use super::{dense, Chunk, Params};
use crate::error::Result;
use crate::input::{InputBatch, QuerySpec};

/// Runs the strategy; returns one chunk with groups in key order (it has no parameters).
pub fn run(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    words: &KeyWords<'_>,
    _: &Params,
) -> Result<Vec<Chunk>> {
    let words = words.all()?;
    let mut pairs: Vec<(u64, u32, u32)> = words
        .par_iter()
        .enumerate()
        .flat_map_iter(|(m, ws)| {
            ws.iter()
                .enumerate()
                .map(move |(r, &w)| (w, m as u32, r as u32))
        })
        .collect();
    pairs.par_sort_unstable_by_key(|p| p.0);

    let is_start = |i: usize| i == 0 || pairs[i].0 != pairs[i - 1].0;
    let chunk = pairs
        .len()
        .div_ceil(rayon::current_num_threads() * 4)
        .max(1024);
    let starts_per_chunk: Vec<u32> = (0..pairs.len())
        .into_par_iter()
        .step_by(chunk)
        .map(|lo| {
            (lo..(lo + chunk).min(pairs.len()))
                .filter(|&i| is_start(i))
                .count() as u32
        })
        .collect();
    let mut first_gid = Vec::with_capacity(starts_per_chunk.len());
    let mut groups = 0u32;
    for s in &starts_per_chunk {
        first_gid.push(groups);
        groups += s;
    }
    let ids: Vec<Vec<AtomicU32>> = words
        .iter()
        .map(|w| (0..w.len()).map(|_| AtomicU32::new(0)).collect())
        .collect();
    let group_words: Vec<u64> = first_gid
        .par_iter()
        .enumerate()
        .flat_map_iter(|(c, &g0)| {
            let lo = c * chunk;
            let mut next = g0;
            let mut keys = Vec::new();
            for (i, &(w, m, r)) in pairs
                .iter()
                .enumerate()
                .take((lo + chunk).min(pairs.len()))
                .skip(lo)
            {
                if is_start(i) {
                    next += 1;
                    keys.push(w);
                }
                ids[m as usize][r as usize].store(next - 1, Ordering::Relaxed);
            }
            keys
        })
        .collect();
    drop(pairs);
    let mut out = dense::aggregate(spec, morsels, groups as usize, |m, gids| {
        gids.clear();
        gids.extend(ids[m].iter().map(|g| g.load(Ordering::Relaxed)));
    })?;
    out.words = group_words;
    Ok(vec![out])
}
