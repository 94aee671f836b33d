//! A worker's private groups in the streaming strategies. Each DataFusion partition (or rayon
//! worker) owns one [`Partial`] — a [`GroupIndex`] (which strategy) and one accumulator per
//! aggregate (the shared algebra) —, folds its batches in as they arrive, and the partials merge
//! at the end: position by position when every index is direct, else by radix partition.

use super::group_index::GroupIndex;
use super::runs::RunBuilder;
use super::{dense, new_accumulators, thread_local, update_all, Accumulators, Chunk, Params};
use crate::error::Result;
use crate::input::{InputBatch, QuerySpec};

/// One worker's groups.
pub struct Partial {
    /// Key word → group id.
    index: Box<dyn GroupIndex>,
    /// One accumulator per aggregate, `index.len() * lanes` groups each.
    accs: Accumulators,
    /// Copies of each group's states ([`LANES`] over a small direct index, else 1).
    lanes: u32,
    /// Buffers for grouping a morsel's rows by group when it holds few groups.
    runs: RunBuilder,
}

/// Copies of each group's states over a direct index of at most [`LANES_MAX_DOMAIN`] ids: row
/// `i` of a morsel folds into copy `i % LANES` of its group. With few groups, consecutive rows
/// mostly update the same state, and each update waits for the previous one's store (a chain
/// through memory of ~5 cycles a row and aggregate); four copies make four independent
/// chains. The copies are folded into one before the merge ([`Partial::folded`]).
pub const LANES: u32 = 4;

/// The largest direct-index domain whose states are kept in [`LANES`] copies: beyond a few
/// hundred groups consecutive rows rarely share one, and the copies would only cost cache.
pub const LANES_MAX_DOMAIN: usize = 256;

/// Fewest aggregates for which a morsel's rows are grouped into runs ([`RunBuilder`]).
pub const RUNS_MIN_AGGREGATES: usize = 3;

impl Partial {
    /// Empty groups over `index`.
    pub fn new(spec: &QuerySpec, index: Box<dyn GroupIndex>) -> Result<Self> {
        let lanes = if index.is_direct() && index.len() <= LANES_MAX_DOMAIN {
            LANES
        } else {
            1
        };
        let mut accs = new_accumulators(spec)?;
        accs.iter_mut()
            .for_each(|a| a.resize(index.len() * lanes as usize));
        Ok(Self {
            index,
            accs,
            lanes,
            runs: RunBuilder::default(),
        })
    }

    /// The same groups with each group's copies folded into one state.
    fn folded(mut self, spec: &QuerySpec) -> Result<Self> {
        if self.lanes == 1 {
            return Ok(self);
        }
        let (n, lanes) = (self.index.len(), self.lanes);
        let dst: Vec<u32> = (0..n as u32)
            .flat_map(|g| std::iter::repeat_n(g, lanes as usize))
            .collect();
        let src: Vec<u32> = (0..(n as u32) * lanes).collect();
        let mut out = new_accumulators(spec)?;
        for (o, a) in out.iter_mut().zip(&mut self.accs) {
            o.resize(n);
            o.merge_take(a.as_mut(), &src, &dst)?;
        }
        self.accs = out;
        self.lanes = 1;
        Ok(self)
    }

    /// Folds a morsel whose key words are `words` into the groups.
    pub fn update(
        &mut self,
        words: &[u64],
        morsel: &InputBatch,
        gids: &mut Vec<u32>,
    ) -> Result<()> {
        if let Some(&first) = words.first().filter(|&&w| words.iter().all(|&x| x == w)) {
            return self.update_one(first, words.len(), morsel, gids);
        }
        self.fold(words, morsel, None, gids)
    }

    /// Whether [`Partial::update`] folds runs of rows ([`RunBuilder`]) rather than a row at a
    /// time: what [`Partial::update_selected`] needs to read a filter's kept rows in place.
    pub fn takes_runs(&self) -> bool {
        self.lanes == 1 && self.accs.len() >= RUNS_MIN_AGGREGATES
    }

    /// Folds the rows `kept` (ascending places) of a morsel whose arguments hold every row, a
    /// fused filter's selection left unmaterialised, and whose kept rows' key words are
    /// `words`: the kept rows are grouped into runs of their places, which the aggregates read
    /// in place. An aggregate that takes no runs (MIN, MAX, an argument with NULLs), or every
    /// one where the morsel holds too many groups for runs, folds its kept rows gathered.
    pub fn update_selected(
        &mut self,
        words: &[u64],
        morsel: &InputBatch,
        kept: &[u32],
        gids: &mut Vec<u32>,
    ) -> Result<()> {
        self.fold(words, morsel, Some(kept), gids)
    }

    /// Folds the rows whose key words are `words` into the groups: every row of `morsel`, or
    /// (`places`) the rows at those places of it.
    fn fold(
        &mut self,
        words: &[u64],
        morsel: &InputBatch,
        places: Option<&[u32]>,
        gids: &mut Vec<u32>,
    ) -> Result<()> {
        self.index.intern(words, gids);
        let groups = self.index.len() * self.lanes as usize;
        let mut rows_left = Vec::new();
        // Runs where the row loop would wait on its stores (states without copies: over a
        // small direct domain the copies already spread them) for enough aggregates to pay for
        // the grouping: for SUM and COUNT it cost more than it saved (`bench cpu-sweep` at 4
        // and 16 groups on the H100 host, 0.66x and 0.88x DuckDB against 0.81x and 1.51x;
        // `bench check`'s SUM+COUNT by 2^10 clustered keys 31% slower); Q1's eight gained.
        let runs = match self.takes_runs() {
            true => self.runs.group_at(gids, self.index.len(), places),
            false => None,
        };
        match runs {
            Some(runs) => {
                for (a, (acc, arg)) in self.accs.iter_mut().zip(&morsel.args).enumerate() {
                    acc.resize(groups);
                    if !acc.update_runs(&runs, arg.as_ref())? {
                        rows_left.push(a);
                    }
                }
                if rows_left.is_empty() {
                    return Ok(());
                }
            }
            None => rows_left.extend(0..self.accs.len()),
        }
        if self.lanes > 1 {
            let mask = self.lanes - 1;
            for (i, g) in gids.iter_mut().enumerate() {
                *g = *g * self.lanes + (i as u32 & mask);
            }
        }
        let Some(places) = places else {
            if rows_left.len() == self.accs.len() {
                return update_all(&mut self.accs, gids, morsel, groups);
            }
            // The aggregates that took no runs (MIN and MAX; inputs with NULLs) run the row
            // loop.
            for a in rows_left {
                let (acc, arg) = (&mut self.accs[a], &morsel.args[a]);
                acc.resize(groups);
                acc.update(gids, arg.as_ref())?;
            }
            return Ok(());
        };
        // ... over the kept rows' values, gathered.
        let indices = arrow::array::UInt32Array::from(places.to_vec());
        for a in rows_left {
            let (acc, arg) = (&mut self.accs[a], &morsel.args[a]);
            let arg = arg
                .as_ref()
                .map(|v| arrow::compute::take(v, &indices, None))
                .transpose()?;
            acc.resize(groups);
            acc.update(gids, arg.as_ref())?;
        }
        Ok(())
    }

    /// Folds a morsel whose `rows` rows all have the key word `word` (one group: a constant
    /// key, a run of sorted keys, no GROUP BY) with each aggregate's reduction over the whole
    /// morsel ([`crate::agg::Aggregate::update_one`]): no group id per row, and sums that the
    /// compiler vectorises. At one group the row loop was ~4 ns a row on 2 cores; DuckDB's
    /// ~3.5 (`bench cpu-sweep`, 1 group).
    fn update_one(
        &mut self,
        word: u64,
        rows: usize,
        morsel: &InputBatch,
        gids: &mut Vec<u32>,
    ) -> Result<()> {
        self.index.intern(&[word], gids);
        // Lane 0 of the group's copies.
        let g = gids[0] * self.lanes;
        let groups = self.index.len() * self.lanes as usize;
        for (acc, arg) in self.accs.iter_mut().zip(&morsel.args) {
            acc.resize(groups);
            acc.update_one(g, rows, arg.as_ref())?;
        }
        Ok(())
    }

    /// The key words of the groups with rows and their accumulators, compacted to those groups.
    pub fn into_words(self, spec: &QuerySpec) -> Result<(Vec<u64>, Accumulators)> {
        let mut this = self.folded(spec)?;
        let groups = this.index.into_groups();
        let Some(ids) = groups.ids else {
            return Ok((groups.words, this.accs));
        };
        let dst: Vec<u32> = (0..ids.len() as u32).collect();
        let mut out = new_accumulators(spec)?;
        for (o, a) in out.iter_mut().zip(&mut this.accs) {
            o.resize(ids.len());
            o.merge_take(a.as_mut(), &ids, &dst)?;
        }
        Ok((groups.words, out))
    }

    /// Bytes held by the groups: the index, each group's aggregate states (`state_bytes`
    /// per group) and what the states hold outside themselves (a MEDIAN's values), for memory
    /// accounting.
    pub fn memory_bytes(&self, state_bytes: usize) -> usize {
        let held: usize = self.accs.iter().map(|a| a.held_bytes()).sum();
        self.index.memory_bytes() + self.index.len() * self.lanes as usize * state_bytes + held
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
        let (_, mut accs) = self.into_words(spec)?;
        let mut dst = Vec::with_capacity(words.len());
        index.intern(words, &mut dst);
        let src: Vec<u32> = (0..words.len() as u32).collect();
        let mut out = Partial::new(spec, index)?;
        // Into lane 0 of each group's copies.
        dst.iter_mut().for_each(|g| *g *= out.lanes);
        for (o, a) in out.accs.iter_mut().zip(&mut accs) {
            o.merge_take(a.as_mut(), &src, &dst)?;
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
            .map(|p| {
                let p = p.folded(spec)?;
                Ok((p.accs, p.index.into_presence().unwrap_or_default()))
            })
            .collect::<Result<_>>()?;
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
