//! Aggregation over dense group ids known up front (`0..domain`): per-thread arrays of states,
//! merged at the end. `perfect` uses the key word itself as the id (Tomé §3.3's perfect hash);
//! `sort` uses the rank of the key's run.

use super::morsel::run_workers;
use super::{new_accumulators, update_all, Chunk};
use crate::error::{GrouperError, Result};
use crate::input::{InputBatch, QuerySpec};

/// The largest domain a direct-index table may have: per-thread arrays beyond this stop fitting
/// caches and memory (the planner picks `perfect` far below it).
pub const MAX_DOMAIN: u64 = 1 << 26;

/// Fails when a key domain is too large for direct indexing.
pub fn check_domain(domain: u64) -> Result<()> {
    if domain > MAX_DOMAIN {
        return Err(GrouperError::InvalidOption(format!(
            "strategy perfect needs a key domain of at most {MAX_DOMAIN} values; this query's keys span {domain}"
        )));
    }
    Ok(())
}

/// Aggregates all morsels into `domain` groups; `ids(m, out)` writes morsel `m`'s group ids.
/// The result selects the groups that received at least one row.
pub fn aggregate(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    domain: usize,
    ids: impl Fn(usize, &mut Vec<u32>) + Sync,
) -> Result<Chunk> {
    struct Local {
        accs: super::Accumulators,
        present: Vec<bool>,
        gids: Vec<u32>,
    }
    let locals = run_workers(
        morsels.len(),
        || {
            let mut accs = new_accumulators(spec)?;
            accs.iter_mut().for_each(|a| a.resize(domain));
            Ok(Local {
                accs,
                present: vec![false; domain],
                gids: Vec::new(),
            })
        },
        |l, m| {
            ids(m, &mut l.gids);
            for &g in &l.gids {
                l.present[g as usize] = true;
            }
            update_all(&mut l.accs, &l.gids, &morsels[m], domain)
        },
    )?;
    let merged = merge(locals.into_iter().map(|l| (l.accs, l.present)).collect())?;
    Ok(merged.into_iter().next().unwrap_or(Chunk {
        words: Vec::new(),
        accs: new_accumulators(spec)?,
        select: Some(Vec::new()),
    }))
}

/// Merges per-worker dense arrays (accumulators and presence) into one chunk selecting the
/// groups that received rows; no chunk when there are no workers.
pub fn merge(mut locals: Vec<(super::Accumulators, Vec<bool>)>) -> Result<Option<Chunk>> {
    let Some((mut accs, mut present)) = locals.pop() else {
        return Ok(None);
    };
    for (other_accs, other_present) in &locals {
        let idx: Vec<u32> = (0..other_present.len() as u32)
            .filter(|&g| other_present[g as usize])
            .collect();
        for (a, b) in accs.iter_mut().zip(other_accs) {
            a.merge(b.as_ref(), &idx, &idx)?;
        }
        for &g in &idx {
            present[g as usize] = true;
        }
    }
    let select: Vec<u32> = (0..present.len() as u32)
        .filter(|&g| present[g as usize])
        .collect();
    Ok(Some(Chunk {
        words: Vec::new(),
        accs,
        select: Some(select),
    }))
}

impl Chunk {
    /// For `perfect`: group id and key word coincide, so the selected ids are the words.
    pub(crate) fn with_words_from_ids(mut self) -> Self {
        if let Some(sel) = &self.select {
            self.words = sel.iter().map(|&g| g as u64).collect();
        }
        self
    }
}
