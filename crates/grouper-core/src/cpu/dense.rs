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
        accs: Vec<Box<dyn super::GroupAccumulator>>,
        present: Vec<bool>,
        gids: Vec<u32>,
    }
    let mut locals = run_workers(
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
    let Some(mut base) = locals.pop() else {
        return Ok(Chunk {
            words: Vec::new(),
            accs: new_accumulators(spec)?,
            select: Some(Vec::new()),
        });
    };
    for other in &locals {
        let idx: Vec<u32> = (0..domain as u32)
            .filter(|&g| other.present[g as usize])
            .collect();
        for (a, b) in base.accs.iter_mut().zip(&other.accs) {
            a.merge(b.as_ref(), &idx, &idx)?;
        }
        for &g in &idx {
            base.present[g as usize] = true;
        }
    }
    let select: Vec<u32> = (0..domain as u32)
        .filter(|&g| base.present[g as usize])
        .collect();
    Ok(Chunk {
        words: Vec::new(),
        accs: base.accs,
        select: Some(select),
    })
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
