//! A worker's private groups in the streaming strategies: `perfect` keeps dense arrays indexed by
//! the key word (Tomé §3.3), `thread_local` a linear-probing table (Rosenfeld's INDEPENDENT). Each
//! DataFusion partition (or rayon worker) owns one [`Partial`], folds its batches in as they
//! arrive, and the partials merge at the end.

use super::{dense, new_accumulators, thread_local, update_all, Accumulators, Chunk, Params};
use crate::error::Result;
use crate::input::{InputBatch, QuerySpec};
use crate::table::LinearTable;

/// One worker's groups.
pub enum Partial {
    /// Direct-index arrays over the key domain; `present` marks groups with rows.
    Dense {
        /// One accumulator per aggregate, `domain` groups each.
        accs: Accumulators,
        /// Which words occurred.
        present: Vec<bool>,
    },
    /// A hash table from key words to group ids.
    Hashed {
        /// The table.
        table: LinearTable,
        /// One accumulator per aggregate.
        accs: Accumulators,
    },
}

impl Partial {
    /// Empty dense groups over `domain` words.
    pub fn dense(spec: &QuerySpec, domain: u64) -> Result<Self> {
        dense::check_domain(domain)?;
        let mut accs = new_accumulators(spec)?;
        accs.iter_mut().for_each(|a| a.resize(domain as usize));
        Ok(Partial::Dense {
            accs,
            present: vec![false; domain as usize],
        })
    }

    /// An empty hash table sized for `params.private_groups`.
    pub fn hashed(spec: &QuerySpec, params: &Params) -> Result<Self> {
        Ok(Partial::Hashed {
            table: LinearTable::new(params.private_groups, params.hash, params.fill_factor),
            accs: new_accumulators(spec)?,
        })
    }

    /// Folds a morsel whose key words are `words` into the groups.
    pub fn update(
        &mut self,
        words: &[u64],
        morsel: &InputBatch,
        gids: &mut Vec<u32>,
    ) -> Result<()> {
        match self {
            Partial::Dense { accs, present } => {
                gids.clear();
                gids.extend(words.iter().map(|&w| w as u32));
                for &g in gids.iter() {
                    present[g as usize] = true;
                }
                let n = present.len();
                update_all(accs, gids, morsel, n)
            }
            Partial::Hashed { table, accs } => {
                table.map(words, gids);
                update_all(accs, gids, morsel, table.len())
            }
        }
    }

    /// The key words of the groups and their accumulators, compacted to groups with rows.
    pub fn into_words(self, spec: &QuerySpec) -> Result<(Vec<u64>, Accumulators)> {
        match self {
            Partial::Hashed { table, accs } => Ok((table.into_keys(), accs)),
            Partial::Dense { accs, present } => {
                let ids: Vec<u32> = (0..present.len() as u32)
                    .filter(|&g| present[g as usize])
                    .collect();
                let dst: Vec<u32> = (0..ids.len() as u32).collect();
                let mut out = new_accumulators(spec)?;
                for (o, a) in out.iter_mut().zip(&accs) {
                    o.resize(ids.len());
                    o.merge(a.as_ref(), &ids, &dst)?;
                }
                Ok((ids.into_iter().map(u64::from).collect(), out))
            }
        }
    }

    /// Bytes held by the groups: the table or the direct-index arrays, and each group's
    /// aggregate states (`state_bytes` per group), for memory accounting.
    pub fn memory_bytes(&self, state_bytes: usize) -> usize {
        match self {
            Partial::Hashed { table, .. } => table.memory_bytes() + table.len() * state_bytes,
            Partial::Dense { present, .. } => present.len() * (state_bytes + 1),
        }
    }

    /// The key word of each group with rows, in group-id order of [`Partial::rekeyed`].
    pub fn words(&self) -> Vec<u64> {
        match self {
            Partial::Hashed { table, .. } => table.keys().to_vec(),
            Partial::Dense { present, .. } => (0..present.len() as u64)
                .filter(|&g| present[g as usize])
                .collect(),
        }
    }

    /// The same groups under new key words (`words[i]` for the `i`-th of [`Partial::words`]),
    /// after the codec widened to a domain of `domain`. Dense groups stay dense while the domain
    /// is at most `dense_limit`; otherwise they move to a hash table.
    pub fn rekeyed(
        self,
        spec: &QuerySpec,
        words: &[u64],
        domain: u64,
        dense_limit: u64,
        params: &Params,
    ) -> Result<Self> {
        let dense = self.is_dense();
        let (_, accs) = self.into_words(spec)?;
        if dense && domain <= dense_limit {
            let mut out = Partial::dense(spec, domain)?;
            if let Partial::Dense { accs: to, present } = &mut out {
                let src: Vec<u32> = (0..words.len() as u32).collect();
                let dst: Vec<u32> = words.iter().map(|&w| w as u32).collect();
                for (t, a) in to.iter_mut().zip(&accs) {
                    t.merge(a.as_ref(), &src, &dst)?;
                }
                dst.iter().for_each(|&g| present[g as usize] = true);
            }
            return Ok(out);
        }
        // Distinct old keys stay distinct, so group ids are kept as they are.
        let mut table = LinearTable::new(
            words.len().max(params.private_groups),
            params.hash,
            params.fill_factor,
        );
        for &w in words {
            table.find_or_insert(w);
        }
        Ok(Partial::Hashed { table, accs })
    }

    /// Whether the groups are dense.
    pub fn is_dense(&self) -> bool {
        matches!(self, Partial::Dense { .. })
    }
}

/// Merges the partials of all workers into result chunks.
pub fn merge(spec: &QuerySpec, parts: Vec<Partial>, params: &Params) -> Result<Vec<Chunk>> {
    if parts.iter().all(Partial::is_dense) {
        let locals = parts
            .into_iter()
            .filter_map(|p| match p {
                Partial::Dense { accs, present } => Some((accs, present)),
                Partial::Hashed { .. } => None,
            })
            .collect();
        return Ok(dense::merge(locals)?
            .into_iter()
            .map(Chunk::with_words_from_ids)
            .collect());
    }
    let locals = parts
        .into_iter()
        .map(|p| p.into_words(spec))
        .collect::<Result<Vec<_>>>()?;
    thread_local::merge(spec, locals, params)
}
