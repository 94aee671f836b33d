//! The runtime tuner at work on the GPU (Rosenfeld's Algorithm 1, [`grouper_core::tune`]): which
//! launch shape each chunk runs, the shapes compiled so far, and what `--explain` reports.
//!
//! Starts: the planner's shape, and (unless the user forced a strategy) the planner's shape of
//! every other strategy of the same table kind that applies — the direct-index strategies share
//! a direct table, the hash strategies a hash table — so the search also picks the strategy.

use std::collections::HashMap;

use crate::prepare::PreparedInput;
use crate::query::GpuOptions;
use crate::report::TuneReport;
use crate::strategy::{GpuConfig, GpuStrategy, Placement};
use crate::variant::Variant;
use grouper_core::error::Result;
use grouper_core::profile::KeyKind;
use grouper_core::tune::{Config, Tuner};

/// The tuner of one prepared query and the shapes it has compiled.
pub(crate) struct Tuning {
    tuner: Tuner<GpuStrategy>,
    starts: Vec<GpuConfig>,
    /// Per (strategy, threads, items), its kernels, or `None` if that shape cannot run here.
    kernels: HashMap<(GpuStrategy, u32, u32), Option<Variant>>,
    compile_ms: f64,
    /// Chunks run since the tuner was made.
    chunks: u64,
}

/// Strategies whose tables have the same kind as `s`'s (direct or hashed). The sorted and the
/// partitioned placements are not among them: the sorted ones gather each row's columns at its
/// sorted place, and ran slower than hashing at every group count timed on the H100 (2^26
/// rows, `gpu-sweep-h100-2p26-sorted-c5fd309.json`); the partitioned ones won only where the
/// planner already takes `perfect_partitioned` (a direct table beyond L2) and, by 6%, at 2^24
/// scattered groups, and lost by 20–80% elsewhere from 2^14 to 2^24 groups
/// (`gpu-sweep-h100-2p26-partitioned-staged-140f7c6.json`). Timing them would only spend chunks.
fn same_table(s: GpuStrategy) -> impl Iterator<Item = GpuStrategy> {
    GpuStrategy::ALL.into_iter().filter(move |o| {
        o.is_perfect() == s.is_perfect()
            && !matches!(o.placement(), Placement::Sorted | Placement::Partitioned)
    })
}

impl Tuning {
    /// A tuner for `planned`, unless the options turn it off or fix the launch shape.
    pub(crate) fn new(input: &PreparedInput, opts: &GpuOptions, planned: &Variant) -> Option<Self> {
        let hyper = opts.tune?;
        let p = &opts.params;
        if p.threads_per_block.is_some() || p.blocks_per_sm.is_some() {
            return None;
        }
        let info = &input.gpu.info;
        let sms = info.sms.max(1);
        let mut starts = vec![Config {
            strategy: planned.spec.strategy,
            blocks_per_sm: (planned.blocks / sms).max(1),
            threads: planned.spec.threads,
            items: p.items_per_thread,
        }];
        // The shape calibration's tuner found for this strategy near this group count: the
        // search refines it rather than starting over.
        let kind = match planned.spec.strategy.is_perfect() {
            true => KeyKind::Dense,
            false => KeyKind::Hashed,
        };
        if let Some((blocks_per_sm, threads, items)) = opts
            .profile
            .as_deref()
            .and_then(|pr| pr.advise(kind, input.estimate.skewed(), input.estimate.groups))
            .filter(|a| a.ranked.first().map(|r| r.0) == Some(planned.spec.strategy.name()))
            .and_then(|a| a.point.shape)
        {
            starts.push(Config {
                strategy: planned.spec.strategy,
                blocks_per_sm,
                threads,
                items,
            });
        }
        // A hash table beyond L2 takes its atomics from device memory, where fewer threads in
        // flight won (H100, 2^20–2^24 groups: the best shapes had 256–1024 threads per SM of
        // 2048, the planner's full occupancy ran up to 2.4x slower, and a descent from it can
        // end in a local minimum of more blocks and items): the search also starts at the other
        // end of the occupancy axis, one block per multiprocessor.
        if !planned.spec.strategy.is_perfect()
            && input.hash_table_bytes(p.fill_factor) > info.l2_bytes
        {
            starts.push(Config {
                strategy: planned.spec.strategy,
                blocks_per_sm: 1,
                threads: planned.spec.threads,
                items: p.items_per_thread,
            });
        }
        if opts.strategy.is_none() {
            for s in same_table(planned.spec.strategy).filter(|&s| s != planned.spec.strategy) {
                // Private tables help only groups few enough to fit them.
                if !s.placement().holds(input.estimate.groups, p.fill_factor) {
                    continue;
                }
                let forced = GpuOptions {
                    strategy: Some(s),
                    ..opts.clone()
                };
                if let Ok(c) = input.choose(&forced, input.demand()) {
                    let blocks_per_sm = s
                        .placement()
                        .blocks_per_sm((info.threads_per_sm / c.threads).max(1));
                    starts.push(Config {
                        strategy: s,
                        blocks_per_sm,
                        threads: c.threads,
                        items: p.items_per_thread,
                    });
                }
            }
        }
        let space = info.tuning_space();
        let tuner = Tuner::new(space.clone(), &starts, hyper);
        let starts: Vec<GpuConfig> = starts.into_iter().map(|c| space.snap(c)).collect();
        let mut kernels = HashMap::new();
        let s = &planned.spec;
        kernels.insert(
            (s.strategy, s.threads, s.items_per_thread),
            Some(planned.clone()),
        );
        Some(Self {
            tuner,
            starts,
            kernels,
            compile_ms: 0.0,
            chunks: 0,
        })
    }

    /// The next chunk's shape: the kernels, and the configuration to time it as while the
    /// search runs (`None` once it has converged). Shapes that cannot run here (too much
    /// shared memory, private tables beyond the memory limit) count as infinitely slow.
    /// `fit` sizes the run's buffers for a shape.
    pub(crate) fn pick(
        &mut self,
        input: &PreparedInput,
        opts: &GpuOptions,
        planned: &Variant,
        mut fit: impl FnMut(&Variant) -> Result<()>,
    ) -> Result<(Option<GpuConfig>, Variant)> {
        self.chunks += 1;
        loop {
            let next = self.tuner.next_config();
            let searching = !self.tuner.converged();
            let shape = next.and_then(|c| self.kernels_for(input, opts, c).map(|v| (c, v)));
            if let Some((c, mut v)) = shape {
                v.blocks = input.gpu.info.sms.max(1) * c.blocks_per_sm;
                match fit(&v) {
                    Ok(()) => return Ok((searching.then_some(c), v)),
                    Err(e) if !searching => return Err(e),
                    Err(_) => {}
                }
            }
            match next {
                Some(c) if searching => self.tuner.fail(c),
                // Nothing measured ran (or no search): the planner's shape.
                _ => {
                    fit(planned)?;
                    return Ok((None, planned.clone()));
                }
            }
        }
    }

    /// Records a timed chunk.
    pub(crate) fn record(&mut self, c: GpuConfig, rows: u64, ms: f64) {
        self.tuner.record(c, rows, ms);
    }

    /// Records that a chunk of `rows` rows added `new_groups` groups to a hash table.
    pub(crate) fn grew(&mut self, rows: u64, new_groups: u64) {
        self.tuner.table_grew(rows, new_groups);
    }

    /// The kernels of `c`'s strategy, threads and items, compiled on first use.
    fn kernels_for(
        &mut self,
        input: &PreparedInput,
        opts: &GpuOptions,
        c: GpuConfig,
    ) -> Option<Variant> {
        let key = (c.strategy, c.threads, c.items);
        if let Some(k) = self.kernels.get(&key) {
            return k.clone();
        }
        let mut opts = opts.clone();
        opts.strategy = Some(c.strategy);
        opts.params.threads_per_block = Some(c.threads);
        opts.params.blocks_per_sm = Some(c.blocks_per_sm);
        opts.params.items_per_thread = c.items;
        let made = Variant::compile(input, &opts, input.demand())
            .ok()
            .map(|(v, _, compiled)| {
                self.compile_ms += compiled.compile_ms;
                v
            });
        self.kernels.insert(key, made.clone());
        made
    }

    /// What it did so far.
    pub(crate) fn report(&self) -> TuneReport {
        TuneReport {
            starts: self.starts.clone(),
            steps: self.tuner.steps().to_vec(),
            best: self.tuner.best(),
            converged: self.tuner.converged(),
            paired: self.tuner.paired(),
            batches: (self.chunks, self.tuner.search_batches()),
            search_ms: self.tuner.search_ms(),
            decision_ms: self.tuner.decision_ms(),
            compile_ms: self.compile_ms,
            space: self.tuner.space().len(),
        }
    }
}
