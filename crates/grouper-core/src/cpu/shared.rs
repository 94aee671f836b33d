//! `shared`: one hash table for all threads (Luan's "shared table", Rosenfeld's SHARED,
//! Karnagel §2 on the GPU). Keys are claimed with compare-and-swap on the slot's group id;
//! aggregate states are arrays of atomics updated with `fetch_add` / `fetch_min` / CAS loops
//! ([`atomic`]); aggregates with no atomic form fall back to striped locks around the scalar
//! algebra.
//!
//! Overflow (Karnagel's trap flag): the table is sized from the estimate. A worker maps a whole
//! morsel to group ids *before* it updates any state; when the table is full it sets the trap,
//! puts the morsel back and stops. Once every worker has stopped, the table doubles (existing
//! groups keep their ids, so states stay where they are) and the remaining morsels run. No row
//! is lost, and none is counted twice.

pub mod atomic;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::key_words::KeyWords;
use super::{Chunk, Params};
use crate::error::Result;
use crate::hash::HashFn;
use crate::input::{InputBatch, QuerySpec};
use crate::table::capacity_for;
use atomic::{new_atomic_accumulator, AtomicAccumulator};

const EMPTY: u32 = u32::MAX;
const BUSY: u32 = u32::MAX - 1;

/// A fixed-capacity concurrent linear-probing table from key words to dense group ids.
struct SharedTable {
    keys: Vec<AtomicU64>,
    gids: Vec<AtomicU32>,
    key_of_gid: Vec<AtomicU64>,
    next_gid: AtomicU32,
    max_groups: u32,
    shift: u32,
    hash: HashFn,
}

impl SharedTable {
    fn new(groups: usize, hash: HashFn, fill: f64) -> Self {
        let cap = capacity_for(groups, fill);
        let max_groups = ((cap as f64 * fill) as usize).min(BUSY as usize - 1) as u32;
        Self {
            keys: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            gids: (0..cap).map(|_| AtomicU32::new(EMPTY)).collect(),
            key_of_gid: (0..max_groups).map(|_| AtomicU64::new(0)).collect(),
            next_gid: AtomicU32::new(0),
            max_groups,
            shift: 64 - cap.trailing_zeros(),
            hash,
        }
    }

    /// Groups inserted so far.
    fn len(&self) -> usize {
        self.next_gid.load(Ordering::Acquire).min(self.max_groups) as usize
    }

    /// The group id of `key`, inserting it if absent; `None` when the table is full.
    #[inline]
    fn find_or_insert(&self, key: u64) -> Option<u32> {
        let mask = self.gids.len() - 1;
        let mut i = (self.hash.hash(key) >> self.shift) as usize;
        loop {
            let mut g = self.gids[i].load(Ordering::Acquire);
            if g == EMPTY {
                match self.gids[i].compare_exchange(
                    EMPTY,
                    BUSY,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        let n = self.next_gid.fetch_add(1, Ordering::AcqRel);
                        if n >= self.max_groups {
                            self.gids[i].store(EMPTY, Ordering::Release);
                            return None;
                        }
                        self.keys[i].store(key, Ordering::Relaxed);
                        self.key_of_gid[n as usize].store(key, Ordering::Relaxed);
                        self.gids[i].store(n, Ordering::Release);
                        return Some(n);
                    }
                    Err(cur) => g = cur,
                }
            }
            while g == BUSY {
                std::hint::spin_loop();
                g = self.gids[i].load(Ordering::Acquire);
            }
            if g == EMPTY {
                continue; // a claim was withdrawn on overflow: look at this slot again
            }
            if self.keys[i].load(Ordering::Relaxed) == key {
                return Some(g);
            }
            i = (i + 1) & mask;
        }
    }

    /// A table twice as large holding the same groups under the same ids.
    fn grown(&self, fill: f64) -> Self {
        let n = self.len();
        let bigger = Self::new((self.max_groups as usize * 2).max(16), self.hash, fill);
        for g in 0..n {
            let key = self.key_of_gid[g].load(Ordering::Relaxed);
            let mask = bigger.gids.len() - 1;
            let mut i = (bigger.hash.hash(key) >> bigger.shift) as usize;
            while bigger.gids[i].load(Ordering::Relaxed) != EMPTY {
                i = (i + 1) & mask;
            }
            bigger.keys[i].store(key, Ordering::Relaxed);
            bigger.gids[i].store(g as u32, Ordering::Relaxed);
            bigger.key_of_gid[g].store(key, Ordering::Relaxed);
        }
        bigger.next_gid.store(n as u32, Ordering::Release);
        bigger
    }
}

/// Runs the strategy; returns one chunk holding every group.
pub fn run(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    words: &KeyWords<'_>,
    params: &Params,
) -> Result<Vec<Chunk>> {
    let words = words.all()?;
    let mut table = SharedTable::new(params.initial_groups, params.hash, params.fill_factor);
    let mut accs = spec
        .aggregates
        .iter()
        .map(new_atomic_accumulator)
        .collect::<Result<Vec<_>>>()?;
    accs.iter_mut()
        .for_each(|a| a.grow(table.max_groups as usize));
    let mut pending: Vec<usize> = (0..morsels.len()).collect();
    while !pending.is_empty() {
        let failed = round(&table, &accs, morsels, &words, &pending)?;
        if failed.is_empty() {
            break;
        }
        table = table.grown(params.fill_factor);
        accs.iter_mut()
            .for_each(|a| a.grow(table.max_groups as usize));
        pending = failed;
    }
    let n = table.len();
    let words = (0..n)
        .map(|g| table.key_of_gid[g].load(Ordering::Relaxed))
        .collect();
    let accs = accs
        .into_iter()
        .map(|a| a.into_groups(n))
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![Chunk {
        words,
        accs,
        select: None,
    }])
}

/// One pass over `pending` morsels; returns those to retry after the table grows (the morsel
/// that hit the trap, and every morsel not yet started).
fn round(
    table: &SharedTable,
    accs: &[Box<dyn AtomicAccumulator>],
    morsels: &[InputBatch],
    words: &[Vec<u64>],
    pending: &[usize],
) -> Result<Vec<usize>> {
    let next = AtomicUsize::new(0);
    let trap = AtomicBool::new(false);
    let retry = Mutex::new(Vec::new());
    let results: Vec<Result<()>> = rayon::broadcast(|_| {
        let mut gids = Vec::new();
        while !trap.load(Ordering::Acquire) {
            let k = next.fetch_add(1, Ordering::AcqRel);
            let Some(&m) = pending.get(k) else { break };
            gids.clear();
            for &w in &words[m] {
                match table.find_or_insert(w) {
                    Some(g) => gids.push(g),
                    None => break,
                }
            }
            if gids.len() < words[m].len() {
                trap.store(true, Ordering::Release);
                retry.lock().unwrap_or_else(|p| p.into_inner()).push(m);
                break;
            }
            for (acc, arg) in accs.iter().zip(&morsels[m].args) {
                acc.update(&gids, arg.as_ref())?;
            }
        }
        Ok(())
    });
    results.into_iter().collect::<Result<()>>()?;
    let mut retry = retry.into_inner().unwrap_or_else(|p| p.into_inner());
    let started = next.load(Ordering::Acquire).min(pending.len());
    retry.extend_from_slice(&pending[started..]);
    Ok(retry)
}
