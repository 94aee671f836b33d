//! The engine's entry points.
//!
//! [`Aggregation`] is one query; each worker (a DataFusion partition, or a rayon thread in
//! [`aggregate`]) gets a [`Worker`] and pushes batches into it as they arrive:
//!
//! ```text
//!  first batch ─▶ plan: key codec from its keys, estimate, choose strategy (shared by all)
//!  each batch  ─▶ encode keys with the current codec ──miss──▶ widen codec (new version),
//!                 │                                            rekey own groups, encode again
//!                 ▼
//!            perfect / thread_local: fold into the worker's Partial at once (streaming)
//!            shared / sort:          keep the batch (they need all input)
//!  finish      ─▶ rekey stragglers, merge partials (or run shared/sort), decode, finalize
//! ```
//!
//! Over a memory budget the caller evicts workers' groups and spills them ([`evict`],
//! [`crate::spill`]); a new generation of the codec then starts over empty dictionaries.

mod evict;
mod selected;

use std::sync::{Arc, PoisonError, RwLock};

use arrow::array::{new_empty_array, ArrayRef};
use arrow::compute::concat;
use rayon::prelude::*;

use crate::cpu::morsel::run_workers;
use crate::cpu::streaming::{self, Partial};
use crate::cpu::{buffered, dense, finalize_chunk_aggs, new_accumulators, Chunk, Intake, Strategy};
use crate::error::{GrouperError, Result};
use crate::input::{morsels, InputBatch, QuerySpec};
use crate::keys::KeyCodec;
use crate::partial::PartialGroups;
use crate::planner::{self, Decision, Hints, KeyBounds, Overrides};
use crate::profile::Profile;
use crate::table::{check_fill_factor, check_mapping};
use crate::trace;

/// How to run a query; the default lets the planner decide everything.
pub type Options = Overrides;

/// The result of a query: one array per key and per aggregate, and what the planner did.
#[derive(Debug)]
pub struct AggregateOutput {
    /// Key columns, then aggregate columns, all of `num_rows` rows.
    pub columns: Vec<ArrayRef>,
    /// Number of result groups.
    pub num_rows: usize,
    /// The planner's decision (`None` when no input row arrived).
    pub decision: Option<Decision>,
}

/// The result of a query in parts as the merge left them (one per result chunk, each with
/// every key and aggregate column), so that a consumer that streams batches need not copy
/// them into one array per column ([`AggregateParts::concat`] does that for the others).
/// TPC-H Q18's subquery at SF 10 has 15M groups: one thread concatenating them held the other
/// workers idle.
#[derive(Debug)]
pub struct AggregateParts {
    /// Key columns, then aggregate columns, of each part.
    pub parts: Vec<Vec<ArrayRef>>,
    /// Number of result groups, over all parts.
    pub num_rows: usize,
    /// The planner's decision (`None` when no input row arrived).
    pub decision: Option<Decision>,
}

impl AggregateParts {
    /// The parts as one array per column.
    pub fn concat(mut self) -> Result<AggregateOutput> {
        let columns = if self.parts.len() == 1 {
            self.parts.pop().unwrap_or_default()
        } else {
            (0..self.parts.first().map_or(0, Vec::len))
                .map(|c| {
                    let arrays: Vec<&dyn arrow::array::Array> =
                        self.parts.iter().map(|p| p[c].as_ref()).collect();
                    concat(&arrays)
                })
                .collect::<std::result::Result<_, _>>()?
        };
        Ok(AggregateOutput {
            columns,
            num_rows: self.num_rows,
            decision: self.decision,
        })
    }
}

/// The codec in force and the plan made from the first batch.
#[derive(Clone)]
struct Plan {
    codec: Arc<KeyCodec>,
    version: u64,
    /// Spills so far: a worker whose groups are of an older generation evicts them.
    generation: u64,
    decision: Decision,
}

/// The workers' groups merged: result chunks, their key codec, the planner's decision.
type Merged = (Vec<Chunk>, Arc<KeyCodec>, Decision);

/// One running query.
pub struct Aggregation {
    spec: QuerySpec,
    overrides: Overrides,
    /// Largest domain `auto` keeps dense (memory bound of per-worker arrays).
    perfect_limit: u64,
    /// Workers (the pool's threads when this was built): what share of the work one hot key
    /// may take before partitioned rows wait on its partition.
    threads: usize,
    /// Largest domain a requested `perfect` keeps dense (type bound and a larger memory bound).
    forced_perfect_limit: u64,
    /// Bytes of aggregate state per group (all aggregates), for memory accounting.
    state_bytes: usize,
    /// What the input's statistics say, for the estimate.
    hints: Hints,
    /// Key ranges from the input's statistics, planned over instead of the first batch's.
    bounds: Option<KeyBounds>,
    /// This machine's calibration, consulted before the planner's rules.
    profile: Option<Arc<Profile>>,
    plan: RwLock<Option<Plan>>,
}

/// A worker's view of the query: its groups (or kept batches) and the codec version they use.
pub struct Worker {
    agg: Arc<Aggregation>,
    seen: Option<(Arc<KeyCodec>, u64)>,
    /// The plan's generation when the groups were created.
    generation: u64,
    partial: Option<Partial>,
    /// Groups of an older generation with the codec they are keyed by, until
    /// [`Worker::evict`] takes them.
    evicted: Vec<(Partial, Arc<KeyCodec>)>,
    kept: Vec<InputBatch>,
    /// Bytes of the kept batches' slices.
    kept_bytes: usize,
    gids: Vec<u32>,
    rows: u64,
}

impl Aggregation {
    /// A query; fails when a key or aggregate is unsupported or an option is invalid.
    pub fn new(spec: QuerySpec, overrides: Overrides) -> Result<Arc<Self>> {
        Self::informed(spec, overrides, Hints::default(), None)
    }

    /// A query whose input's statistics (`hints`: rows, distinct keys) inform the estimate, and
    /// whose strategy this machine's `profile` informs.
    pub fn informed(
        spec: QuerySpec,
        overrides: Overrides,
        hints: Hints,
        profile: Option<Arc<Profile>>,
    ) -> Result<Arc<Self>> {
        Self::bounded(spec, overrides, hints, None, profile)
    }

    /// [`Aggregation::informed`], with key ranges the statistics give (`bounds`): the key
    /// codec covers them from the first batch on, so a sorted or clustered key (whose first
    /// batch spans a sliver of its range) does not widen the table batch after batch.
    pub fn bounded(
        spec: QuerySpec,
        overrides: Overrides,
        hints: Hints,
        bounds: Option<KeyBounds>,
        profile: Option<Arc<Profile>>,
    ) -> Result<Arc<Self>> {
        spec.output_types()?;
        if let Some(f) = overrides.fill_factor {
            check_fill_factor(f)?;
        }
        check_mapping(
            overrides.hash.unwrap_or_default(),
            overrides.buckets.unwrap_or_default(),
        )?;
        let state_bytes = new_accumulators(&spec)?
            .iter()
            .map(|a| a.state_bytes())
            .sum();
        let threads = rayon::current_num_threads();
        // Under a memory budget, direct-index arrays stay within a quarter of it: reservations
        // count twice the groups, and the rest of the query shares the budget.
        let perfect_limit = planner::perfect_limit(state_bytes, threads).min(
            overrides.memory_budget.map_or(u64::MAX, |b| {
                planner::direct_index_limit(state_bytes, threads, b / 4)
            }),
        );
        let forced_perfect_limit = dense::MAX_DOMAIN.min(planner::direct_index_limit(
            state_bytes,
            threads,
            planner::FORCED_PERFECT_BUDGET_BYTES,
        ));
        Ok(Arc::new(Self {
            spec,
            overrides,
            perfect_limit,
            threads,
            forced_perfect_limit,
            state_bytes,
            hints,
            bounds,
            profile,
            plan: RwLock::new(None),
        }))
    }

    /// A new worker.
    pub fn worker(self: &Arc<Self>) -> Worker {
        Worker {
            agg: Arc::clone(self),
            seen: None,
            generation: 0,
            partial: None,
            evicted: Vec::new(),
            kept: Vec::new(),
            kept_bytes: 0,
            gids: Vec::new(),
            rows: 0,
        }
    }

    fn current(&self) -> Option<Plan> {
        self.plan
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The plan, made from `batch` if no worker made one yet.
    fn plan_from(&self, batch: &InputBatch) -> Result<Plan> {
        if let Some(p) = self.current() {
            return Ok(p);
        }
        let mut guard = self.plan.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = guard.as_ref() {
            return Ok(p.clone());
        }
        let mut codec = match self.bounded_codec(batch) {
            Some(c) => c,
            None => KeyCodec::plan(&self.spec.key_types, &[&batch.keys])?,
        };
        let words = codec
            .encode(&batch.keys, batch.num_rows())?
            .unwrap_or_default();
        let estimate = if codec.has_dictionary() {
            planner::estimate_dictionary(&[words], codec.domain(), self.hints)
        } else {
            planner::estimate(&[words], codec.domain(), self.hints)
        };
        // A growing dictionary's codes reach about its estimated groups (an eighth more for
        // the estimate's error), however few the first batch brought; the domain that makes
        // stays within the projection the planner chose by and the dense bound.
        let room = estimate.dictionary.then(|| {
            (
                estimate.groups + estimate.groups / 8,
                estimate.domain.min(self.dense_limit()),
            )
        });
        let decision = planner::choose(
            estimate,
            &self.overrides,
            self.perfect_limit,
            self.threads,
            self.profile.as_deref(),
        )?;
        if decision.strategy == Strategy::Perfect {
            if let Some((codes, bound)) = room {
                if let Some(wider) = codec.with_dictionary_room(codes, bound)? {
                    codec = wider;
                }
            }
            dense::check_domain(codec.domain())?;
            if self.overrides.strategy == Some(Strategy::Perfect)
                && codec.domain() > self.forced_perfect_limit
            {
                return Err(GrouperError::InvalidOption(format!(
                    "strategy perfect needs a key domain whose direct-index arrays fit {} GiB over all threads (at most {} values for this query's aggregates); this query's keys span {}",
                    planner::FORCED_PERFECT_BUDGET_BYTES >> 30,
                    self.forced_perfect_limit,
                    codec.domain()
                )));
            }
        }
        let plan = Plan {
            codec: Arc::new(codec),
            version: 0,
            generation: 0,
            decision,
        };
        *guard = Some(plan.clone());
        Ok(plan)
    }

    /// A codec over the statistics' key ranges, when every key has one (booleans need none),
    /// they cover `batch`, and they fit a packed word; otherwise `None` (plan from the batch).
    fn bounded_codec(&self, batch: &InputBatch) -> Option<KeyCodec> {
        let b = self.bounds.as_ref()?;
        let types = &self.spec.key_types;
        let all = types.len() == b.ranges.len()
            && types
                .iter()
                .zip(&b.ranges)
                .all(|(t, r)| r.is_some() || t == &arrow::datatypes::DataType::Boolean);
        if !all || types.is_empty() {
            return None;
        }
        let codec = KeyCodec::plan_bounded(types, &b.ranges, &b.may_null, &[]).ok()?;
        batch
            .keys
            .iter()
            .enumerate()
            .all(|(c, k)| codec.covers(c, k))
            .then_some(codec)
    }

    /// Replaces the codec of version `seen` by one that also covers `keys`.
    fn widen(&self, seen: u64, keys: &[ArrayRef]) -> Result<()> {
        let mut guard = self.plan.write().unwrap_or_else(PoisonError::into_inner);
        let Some(plan) = guard.as_mut() else {
            return Err(GrouperError::InvalidInput("widen before plan".into()));
        };
        if plan.version == seen {
            plan.codec = Arc::new(plan.codec.widen(keys)?);
            plan.version += 1;
        }
        Ok(())
    }

    /// The largest domain a worker keeps dense: the planner's bound for `auto`, the hard bound
    /// when `perfect` was requested.
    fn dense_limit(&self) -> u64 {
        match self.overrides.strategy {
            Some(Strategy::Perfect) => self.forced_perfect_limit,
            _ => self.perfect_limit,
        }
    }

    /// Merges the workers' groups and produces the result.
    pub fn finish(&self, workers: Vec<Worker>) -> Result<AggregateOutput> {
        self.finish_parts(workers)?.concat()
    }

    /// Merges the workers' groups and produces the result in the merge's parts.
    pub fn finish_parts(&self, workers: Vec<Worker>) -> Result<AggregateParts> {
        match self.merged(workers)? {
            Some((chunks, codec, decision)) => {
                trace::event(|| format!("merged: {} chunks", chunks.len()));
                let parts = self.assemble(chunks, &codec, decision);
                trace::event(|| "assembled: keys decoded, aggregates finalized".into());
                parts
            }
            None => self.empty(None),
        }
    }

    /// Merges the workers' groups without finalizing them (to be merged with other partial
    /// results, e.g. the GPU's in co-processing), and the planner's decision.
    pub fn finish_partial(
        &self,
        workers: Vec<Worker>,
    ) -> Result<(PartialGroups, Option<Decision>)> {
        match self.merged(workers)? {
            Some((chunks, codec, decision)) => Ok((
                PartialGroups::from_chunks(
                    chunks,
                    &codec,
                    &self.spec.key_types,
                    new_accumulators(&self.spec)?,
                )?,
                Some(decision),
            )),
            None => {
                let mut accs = new_accumulators(&self.spec)?;
                let len = usize::from(self.spec.key_types.is_empty());
                accs.iter_mut().for_each(|a| a.resize(len));
                let keys = self.spec.key_types.iter().map(new_empty_array).collect();
                Ok((PartialGroups { keys, accs, len }, None))
            }
        }
    }

    /// The workers' groups merged: result chunks, their codec, the decision (`None`: no input).
    fn merged(&self, workers: Vec<Worker>) -> Result<Option<Merged>> {
        let Some(plan) = self.current() else {
            return Ok(None);
        };
        if workers.iter().any(Worker::has_evicted) {
            return Err(GrouperError::InvalidInput(
                "a worker's evicted groups were not spilled".into(),
            ));
        }
        let rows: u64 = workers.iter().map(|w| w.rows).sum();
        let mut decision = plan.decision.clone();
        decision.estimate.rows = rows as usize;
        let params = decision.params;
        let (chunks, codec) = if decision.strategy.is_streaming() {
            // Syncing one worker may widen the codec again; repeat until all agree.
            let mut workers = workers;
            let plan = loop {
                let mut latest = None;
                for w in &mut workers {
                    latest = Some(w.sync()?);
                }
                let Some(latest) = latest else { break plan };
                if workers
                    .iter()
                    .all(|w| w.seen.as_ref().is_some_and(|s| s.1 == latest.version))
                {
                    break latest;
                }
            };
            let parts: Vec<Partial> = workers.into_iter().filter_map(|w| w.partial).collect();
            if decision.strategy == Strategy::Perfect && !parts.iter().all(Partial::is_direct) {
                decision.reason += &format!(
                    "; the key range grew past the direct-index bound (domain {}), so workers switched to hash tables",
                    plan.codec.domain()
                );
            }
            (streaming::merge(&self.spec, parts, &params)?, plan.codec)
        } else {
            let kept: Vec<InputBatch> = workers.into_iter().flat_map(|w| w.kept).collect();
            let (chunks, codec) =
                buffered::run_kept(decision.strategy, &self.spec, &kept, &params)?;
            (chunks, Arc::new(codec))
        };
        Ok(Some((chunks, codec, decision)))
    }

    /// Decodes and finalizes chunks into the result's parts.
    fn assemble(
        &self,
        chunks: Vec<Chunk>,
        codec: &KeyCodec,
        decision: Decision,
    ) -> Result<AggregateParts> {
        // Chunks decode and finalize in parallel: with millions of groups (TPC-H Q18's
        // subquery, 15M at SF 10) one thread decoding them all held 15 others idle.
        let chunks: Vec<Chunk> = chunks.into_iter().filter(|c| !c.words.is_empty()).collect();
        let num_rows = chunks.iter().map(|c| c.words.len()).sum();
        codec.prepare_decode()?;
        let parts: Vec<Vec<ArrayRef>> = chunks
            .into_par_iter()
            .map(|chunk| {
                let mut cols = codec.decode(&chunk.words)?;
                cols.extend(finalize_chunk_aggs(chunk.accs, chunk.select.as_deref())?);
                Ok(cols)
            })
            .collect::<Result<_>>()?;
        if parts.is_empty() {
            return self.empty(Some(decision));
        }
        Ok(AggregateParts {
            parts,
            num_rows,
            decision: Some(decision),
        })
    }

    /// No groups: zero rows, except that an aggregate without GROUP BY yields one row of empty
    /// aggregates (`COUNT` 0, the others NULL), as SQL requires.
    fn empty(&self, decision: Option<Decision>) -> Result<AggregateParts> {
        let groups = usize::from(self.spec.key_types.is_empty());
        let mut columns: Vec<ArrayRef> = self.spec.key_types.iter().map(new_empty_array).collect();
        let mut accs = new_accumulators(&self.spec)?;
        accs.iter_mut().for_each(|a| a.resize(groups));
        columns.extend(finalize_chunk_aggs(accs, None)?);
        Ok(AggregateParts {
            parts: vec![columns],
            num_rows: groups,
            decision,
        })
    }
}

impl Worker {
    /// Bytes this worker holds: its groups, or the batches it keeps for `shared` and `sort`.
    /// The DataFusion glue reserves this much from the session's memory pool.
    pub fn memory_bytes(&self) -> usize {
        let groups: usize = self
            .partial
            .iter()
            .chain(self.evicted.iter().map(|(p, _)| p))
            .map(|p| p.memory_bytes(self.agg.state_bytes))
            .sum();
        self.kept_bytes + groups + self.gids.capacity() * 4
    }

    /// Folds a batch in (or keeps it, for the strategies that need all input).
    pub fn push(&mut self, batch: &InputBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        // Plan from the whole first batch: a larger sample than one morsel.
        self.agg.plan_from(batch)?;
        for morsel in morsels(std::slice::from_ref(batch)) {
            self.push_morsel(&morsel)?;
        }
        Ok(())
    }

    fn push_morsel(&mut self, morsel: &InputBatch) -> Result<()> {
        self.rows += morsel.num_rows() as u64;
        let agg = Arc::clone(&self.agg);
        if !agg.plan_from(morsel)?.decision.strategy.is_streaming() {
            let morsel = morsel.widened(&agg.spec);
            self.kept_bytes += morsel
                .keys
                .iter()
                .chain(morsel.args.iter().flatten())
                .map(|a| a.to_data().get_slice_memory_size().unwrap_or(0))
                .sum::<usize>();
            self.kept.push(morsel);
            return Ok(());
        }
        loop {
            let plan = self.sync()?;
            match plan.codec.encode(&morsel.keys, morsel.num_rows())? {
                Some(words) => {
                    let partial = self.partial.as_mut().ok_or_else(|| {
                        GrouperError::InvalidInput("worker without groups".into())
                    })?;
                    return partial.update(&words, morsel, &mut self.gids);
                }
                None => agg.widen(plan.version, &morsel.keys)?,
            }
        }
    }

    /// Brings the worker's groups to the current codec (creating them on first use), widening
    /// the codec further if the groups' own keys do not fit it; returns the plan synced to.
    fn sync(&mut self) -> Result<Plan> {
        let agg = Arc::clone(&self.agg);
        loop {
            let plan = agg
                .current()
                .ok_or_else(|| GrouperError::InvalidInput("sync before plan".into()))?;
            if self.seen.as_ref().is_some_and(|(_, v)| *v == plan.version) {
                return Ok(plan);
            }
            let Intake::Streaming(new_index) = plan.decision.strategy.descriptor().intake else {
                return Err(GrouperError::InvalidInput(
                    "a buffered strategy has no worker groups".into(),
                ));
            };
            let index = || {
                new_index(
                    plan.codec.domain(),
                    agg.dense_limit(),
                    &plan.decision.params,
                )
            };
            match (self.partial.take(), self.seen.take()) {
                (Some(p), Some((old, _))) if self.generation != plan.generation => {
                    self.evicted.push((p, old));
                    self.partial = Some(Partial::new(&agg.spec, index()?)?);
                }
                (Some(p), Some((old, v))) => {
                    let old_words = p.words();
                    let keys = old.decode(&old_words)?;
                    match plan.codec.encode(&keys, old_words.len())? {
                        Some(words) => {
                            self.partial = Some(p.rekeyed(&agg.spec, &words, index()?)?)
                        }
                        None => {
                            self.partial = Some(p);
                            self.seen = Some((old, v));
                            agg.widen(plan.version, &keys)?;
                            continue;
                        }
                    }
                }
                _ => self.partial = Some(Partial::new(&agg.spec, index()?)?),
            }
            self.seen = Some((Arc::clone(&plan.codec), plan.version));
            self.generation = plan.generation;
            return Ok(plan);
        }
    }
}

/// Aggregates `batches` as `spec` says, morsel-driven on all threads of the current rayon pool.
pub fn aggregate(
    spec: &QuerySpec,
    batches: &[InputBatch],
    options: &Options,
) -> Result<AggregateOutput> {
    let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    let hints = Hints {
        rows: Some(rows),
        distinct: None,
    };
    let agg = Aggregation::informed(spec.clone(), *options, hints, None)?;
    let morsels = morsels(batches);
    let workers = run_workers(
        morsels.len(),
        || Ok(agg.worker()),
        |w, m| w.push(&morsels[m]),
    )?;
    agg.finish(workers)
}

#[cfg(test)]
mod tests {
    use arrow::array::Int64Array;
    use arrow::datatypes::DataType;

    use super::*;
    use crate::agg::{AggKind, AggregateSpec};

    /// Sorted keys arriving batch by batch, each batch a sliver of the whole range.
    fn sorted_batches(spec: &QuerySpec) -> Vec<InputBatch> {
        (0..8i64)
            .map(|b| {
                let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(
                    (0..500).map(|i| b * 1000 + i * 2),
                ));
                let args = vec![None, Some(Arc::clone(&keys))];
                InputBatch::try_new(spec, vec![keys], args, 500).unwrap()
            })
            .collect()
    }

    fn run(bounds: Option<KeyBounds>) -> (AggregateOutput, u64) {
        let spec = QuerySpec {
            key_types: vec![DataType::Int64],
            aggregates: vec![
                AggregateSpec::count_star(),
                AggregateSpec::new(AggKind::Sum, DataType::Int64),
            ],
        };
        let agg = Aggregation::bounded(
            spec.clone(),
            Overrides::default(),
            Hints::default(),
            bounds,
            None,
        )
        .unwrap();
        let batches = sorted_batches(&spec);
        let mut w = agg.worker();
        for b in &batches {
            w.push(b).unwrap();
        }
        let version = agg.current().unwrap().version;
        let out = agg.finish(vec![w]).unwrap();
        let want = crate::reference::aggregate(&spec, &batches).unwrap();
        crate::compare::same_groups(&want, &out.columns, 1).unwrap();
        (out, version)
    }

    #[test]
    fn statistics_bounds_plan_the_codec_so_sorted_keys_never_widen_it() {
        // The first batch spans 0..998: planned from it alone, each later batch widens.
        let (_, widened) = run(None);
        assert!(widened > 0, "expected the first batch's plan to widen");
        let (out, version) = run(Some(KeyBounds {
            ranges: vec![Some((0, 7998))],
            may_null: vec![false],
        }));
        assert_eq!(version, 0, "bounds from statistics cover every batch");
        assert_eq!(out.num_rows, 4000);
        // Bounds that do not cover the first batch (stale statistics) are set aside.
        let (out, _) = run(Some(KeyBounds {
            ranges: vec![Some((5000, 6000))],
            may_null: vec![false],
        }));
        assert_eq!(out.num_rows, 4000);
    }

    #[test]
    fn a_first_batch_of_random_id_pairs_plans_no_direct_table_for_its_dictionary() {
        // Two random 62-bit ids: interned, the first batch's 8192 pairs fill a dictionary of
        // 16,384 codes, which once read as an exact key range (issue 29). Of 2^26 rows, each
        // pair new, the groups far outgrow any direct table.
        let spec = QuerySpec {
            key_types: vec![DataType::Int64, DataType::Int64],
            aggregates: vec![AggregateSpec::count_star()],
        };
        let id = |i: u64, salt: u64| (crate::hash::murmur3(i ^ salt) >> 2) as i64;
        let batches: Vec<InputBatch> = (0..3u64)
            .map(|b| {
                let rows = (b * 8192)..((b + 1) * 8192);
                let a: ArrayRef =
                    Arc::new(Int64Array::from_iter_values(rows.clone().map(|i| id(i, 1))));
                let c: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.map(|i| id(i, 2))));
                InputBatch::try_new(&spec, vec![a, c], vec![None], 8192).unwrap()
            })
            .collect();
        let hints = Hints {
            rows: Some(1 << 26),
            distinct: None,
        };
        let agg =
            Aggregation::bounded(spec.clone(), Overrides::default(), hints, None, None).unwrap();
        let mut w = agg.worker();
        for b in &batches {
            w.push(b).unwrap();
        }
        let out = agg.finish(vec![w]).unwrap();
        let d = out.decision.clone().unwrap();
        assert_ne!(d.strategy, Strategy::Perfect, "{d}");
        assert_eq!(d.estimate.source, planner::Source::Sketch, "{d}");
        assert!(d.estimate.groups >= 1 << 24, "{d}");
        let want = crate::reference::aggregate(&spec, &batches).unwrap();
        crate::compare::same_groups(&want, &out.columns, 2).unwrap();
        assert_eq!(out.num_rows, 3 * 8192);
    }
}

#[cfg(test)]
mod race {
    use arrow::array::StringArray;
    use arrow::datatypes::DataType;

    use super::*;
    use crate::agg::AggregateSpec;

    /// Workers on threads of their own feed string keys that keep outgrowing the shared
    /// dictionary's capacity, each batch mixing values other workers just appended: a worker
    /// synced to a narrower codec must never use a code past it (found on the H100 host: TPC-H
    /// Q21 under --backend cpu, "index out of bounds: the len is 3702 but the index is 3807").
    #[test]
    fn workers_growing_one_dictionary_agree_with_the_reference() {
        let spec = QuerySpec {
            key_types: vec![DataType::Utf8],
            aggregates: vec![AggregateSpec::count_star()],
        };
        for round in 0..20u64 {
            let agg = Aggregation::new(spec.clone(), Overrides::default()).unwrap();
            let threads = 8u64;
            let batches: Vec<Vec<InputBatch>> = (0..threads)
                .map(|t| {
                    (0..24u64)
                        .map(|b| {
                            let keys: ArrayRef =
                                Arc::new(StringArray::from_iter_values((0..512u64).map(|i| {
                                    // Most values new in this batch, the rest from others'.
                                    let v = (b * 512 + i) * threads + (t + i % 3) % threads;
                                    format!("k{}", v % (4096 + round * 97))
                                })));
                            InputBatch::try_new(&spec, vec![keys], vec![None], 512).unwrap()
                        })
                        .collect()
                })
                .collect();
            let workers: Vec<Worker> = std::thread::scope(|s| {
                let handles: Vec<_> = batches
                    .iter()
                    .map(|bs| {
                        let agg = Arc::clone(&agg);
                        s.spawn(move || {
                            let mut w = agg.worker();
                            for b in bs {
                                w.push(b).unwrap();
                            }
                            w
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let out = agg.finish(workers).unwrap();
            let all: Vec<InputBatch> = batches.into_iter().flatten().collect();
            let want = crate::reference::aggregate(&spec, &all).unwrap();
            crate::compare::same_groups(&want, &out.columns, 1).unwrap();
        }
    }
}
