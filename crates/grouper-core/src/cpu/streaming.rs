//! A worker's private groups in the streaming strategies. Each DataFusion partition (or rayon
//! worker) owns one [`Partial`] — a [`GroupIndex`] (which strategy) and one accumulator per
//! aggregate (the shared algebra) —, folds its batches in as they arrive, and the partials merge
//! at the end: position by position when every index is direct, else by radix partition.

use super::group_index::GroupIndex;
use super::{dense, new_accumulators, thread_local, update_all, Accumulators, Chunk, Params};
use crate::error::Result;
use crate::input::{InputBatch, QuerySpec};

/// One worker's groups.
pub struct Partial {
    /// Key word → group id.
    index: Box<dyn GroupIndex>,
    /// One accumulator per aggregate, `index.len()` groups each.
    accs: Accumulators,
}

impl Partial {
    /// Empty groups over `index`.
    pub fn new(spec: &QuerySpec, index: Box<dyn GroupIndex>) -> Result<Self> {
        let mut accs = new_accumulators(spec)?;
        accs.iter_mut().for_each(|a| a.resize(index.len()));
        Ok(Self { index, accs })
    }

    /// Folds a morsel whose key words are `words` into the groups.
    pub fn update(
        &mut self,
        words: &[u64],
        morsel: &InputBatch,
        gids: &mut Vec<u32>,
    ) -> Result<()> {
        self.index.intern(words, gids);
        update_all(&mut self.accs, gids, morsel, self.index.len())
    }

    /// The key words of the groups with rows and their accumulators, compacted to those groups.
    pub fn into_words(self, spec: &QuerySpec) -> Result<(Vec<u64>, Accumulators)> {
        let groups = self.index.into_groups();
        let Some(ids) = groups.ids else {
            return Ok((groups.words, self.accs));
        };
        let dst: Vec<u32> = (0..ids.len() as u32).collect();
        let mut out = new_accumulators(spec)?;
        for (o, a) in out.iter_mut().zip(&self.accs) {
            o.resize(ids.len());
            o.merge(a.as_ref(), &ids, &dst)?;
        }
        Ok((groups.words, out))
    }

    /// Bytes held by the groups: the index and each group's aggregate states (`state_bytes`
    /// per group), for memory accounting.
    pub fn memory_bytes(&self, state_bytes: usize) -> usize {
        self.index.memory_bytes() + self.index.len() * state_bytes
    }

    /// The key word of each group with rows, in the order [`Partial::rekeyed`] expects.
    pub fn words(&self) -> Vec<u64> {
        self.index.words()
    }

    /// The same groups in `index` under new key words (`words[i]` for the `i`-th of
    /// [`Partial::words`]), after the codec widened.
    pub fn rekeyed(
        self,
        spec: &QuerySpec,
        words: &[u64],
        mut index: Box<dyn GroupIndex>,
    ) -> Result<Self> {
        let (_, accs) = self.into_words(spec)?;
        let mut dst = Vec::with_capacity(words.len());
        index.intern(words, &mut dst);
        let src: Vec<u32> = (0..words.len() as u32).collect();
        let mut out = Partial::new(spec, index)?;
        for (o, a) in out.accs.iter_mut().zip(&accs) {
            o.merge(a.as_ref(), &src, &dst)?;
        }
        Ok(out)
    }

    /// Whether the groups are indexed directly by key word.
    pub fn is_direct(&self) -> bool {
        self.index.is_direct()
    }
}

/// Merges the partials of all workers into result chunks.
pub fn merge(spec: &QuerySpec, parts: Vec<Partial>, params: &Params) -> Result<Vec<Chunk>> {
    if parts.iter().all(Partial::is_direct) {
        let locals = parts
            .into_iter()
            .map(|p| (p.accs, p.index.into_presence().unwrap_or_default()))
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
