//! The runtime tuner at work on the GPU (Rosenfeld's Algorithm 1, [`crate::tune`]): which
//! launch shape each chunk runs, the shapes compiled so far, and what `--explain` reports.
//!
//! Starts: the planner's shape, and (unless the user forced a strategy) the planner's shape of
//! every other strategy of the same table kind that applies — the direct-index strategies share
//! a direct table, the hash strategies a hash table — so the search also picks the strategy.

use std::collections::HashMap;
use std::fmt;

use super::run::{choose, private_tables_hold, Base, Demand, GpuOptions, Prepared};
use super::variant::Variant;
use super::GpuStrategy;
use crate::error::Result;
use crate::profile::KeyKind;
use crate::tune::{Config, Step, Tuner};

/// A launch shape the tuner may pick.
pub type GpuConfig = Config<GpuStrategy>;

/// What the tuner did, for `--explain`, reports and benchmarks.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneReport {
    /// The shapes it started from (the planner's first).
    pub starts: Vec<GpuConfig>,
    /// Every shape measured, in order, with its time per row.
    pub steps: Vec<Step<GpuStrategy>>,
    /// The fastest shape measured and its time per row (ms).
    pub best: Option<(GpuConfig, f64)>,
    /// Whether the search is over.
    pub converged: bool,
    /// Whether shapes were timed in pairs with their reference because the table kept
    /// growing (chunk times drift as it fills).
    pub paired: bool,
    /// Chunks run since the tuner was made, and of those the ones that measured a shape.
    pub batches: (u64, u64),
    /// Kernel time of the chunks that measured a shape, ms.
    pub search_ms: f64,
    /// Time spent deciding, ms.
    pub decision_ms: f64,
    /// Time spent compiling shapes beyond the planner's, ms.
    pub compile_ms: f64,
    /// Shapes of the space (per strategy).
    pub space: usize,
}

impl fmt::Display for TuneReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let starts: Vec<String> = self.starts.iter().map(|c| c.to_string()).collect();
        write!(
            f,
            "tuner (Rosenfeld Alg. 1, shapes blocks/SM x threads x items): from {}; {} of {} shapes measured over {} of {} chunks",
            starts.join(", "),
            self.steps.len(),
            self.space * self.starts.len(),
            self.batches.1,
            self.batches.0
        )?;
        if let Some((best, t)) = &self.best {
            let first = self.steps.first().map_or(*t, |s| s.time);
            write!(
                f,
                "; best {best} at {:.3} ns/row ({:.2}x the planner's shape)",
                t * 1e6,
                t / first
            )?;
        }
        if self.paired {
            write!(
                f,
                "; while the table grew (chunk times drift as it fills), shapes were timed between chunks of the shape they were compared with"
            )?;
        }
        write!(
            f,
            "; {}; deciding took {:.3} ms, compiling {:.0} ms",
            if self.converged {
                "converged"
            } else {
                "still searching (continues in the next run of this query)"
            },
            self.decision_ms,
            self.compile_ms
        )
    }
}

/// The tuner of one prepared query and the shapes it has compiled.
pub(super) struct Tuning {
    tuner: Tuner<GpuStrategy>,
    starts: Vec<GpuConfig>,
    /// Per (strategy, threads, items), its kernels, or `None` if that shape cannot run here.
    kernels: HashMap<(GpuStrategy, u32, u32), Option<Variant>>,
    compile_ms: f64,
    /// Chunks run since the tuner was made.
    chunks: u64,
}

/// Strategies whose tables have the same kind as `s`'s (direct or hashed).
fn same_table(s: GpuStrategy) -> impl Iterator<Item = GpuStrategy> {
    GpuStrategy::ALL
        .into_iter()
        .filter(move |o| o.is_perfect() == s.is_perfect())
}

impl Tuning {
    /// A tuner for `planned`, unless the options turn it off or fix the launch shape.
    pub(super) fn new(base: &Base, opts: &GpuOptions, planned: &Variant) -> Option<Self> {
        let hyper = opts.tune?;
        let p = &opts.params;
        if p.threads_per_block.is_some() || p.blocks_per_sm.is_some() {
            return None;
        }
        let info = &base.gpu.info;
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
            .and_then(|pr| pr.advise(kind, base.estimate.skewed(), base.estimate.groups))
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
            && base.hash_table_bytes(p.fill_factor) > info.l2_bytes
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
                if s == GpuStrategy::ThreadPrivate
                    && !private_tables_hold(base.estimate.groups, p.fill_factor)
                {
                    continue;
                }
                let forced = GpuOptions {
                    strategy: Some(s),
                    ..opts.clone()
                };
                let dims = Demand::of(base);
                if let Ok(c) = choose(&forced, &base.layout, base.key_words.len(), dims, info) {
                    let blocks_per_sm = match s {
                        GpuStrategy::ThreadPrivate => 2,
                        _ => (info.threads_per_sm / c.threads).max(1),
                    };
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
    pub(super) fn pick(
        &mut self,
        p: &Prepared,
        mut fit: impl FnMut(&Variant) -> Result<()>,
    ) -> Result<(Option<GpuConfig>, Variant)> {
        self.chunks += 1;
        loop {
            let next = self.tuner.next_config();
            let searching = !self.tuner.converged();
            let shape = next.and_then(|c| self.kernels_for(p, c).map(|v| (c, v)));
            if let Some((c, mut v)) = shape {
                v.blocks = p.base.gpu.info.sms.max(1) * c.blocks_per_sm;
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
                    fit(&p.planned)?;
                    return Ok((None, p.planned.clone()));
                }
            }
        }
    }

    /// Records a timed chunk.
    pub(super) fn record(&mut self, c: GpuConfig, rows: u64, ms: f64) {
        self.tuner.record(c, rows, ms);
    }

    /// Records that a chunk of `rows` rows added `new_groups` groups to a hash table.
    pub(super) fn grew(&mut self, rows: u64, new_groups: u64) {
        self.tuner.table_grew(rows, new_groups);
    }

    /// The kernels of `c`'s strategy, threads and items, compiled on first use.
    fn kernels_for(&mut self, p: &Prepared, c: GpuConfig) -> Option<Variant> {
        let key = (c.strategy, c.threads, c.items);
        if let Some(k) = self.kernels.get(&key) {
            return k.clone();
        }
        let mut opts = p.opts.clone();
        opts.strategy = Some(c.strategy);
        opts.params.threads_per_block = Some(c.threads);
        opts.params.blocks_per_sm = Some(c.blocks_per_sm);
        opts.params.items_per_thread = c.items;
        let made = Variant::compile(&p.base, &opts, Demand::of(&p.base))
            .ok()
            .map(|(v, _, compiled)| {
                self.compile_ms += compiled.compile_ms;
                v
            });
        self.kernels.insert(key, made.clone());
        made
    }

    /// What it did so far.
    pub(super) fn report(&self) -> TuneReport {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explain_says_where_the_search_started_and_what_it_found() {
        let c = |strategy, blocks_per_sm, threads| Config {
            strategy,
            blocks_per_sm,
            threads,
            items: 4,
        };
        let planned = c(GpuStrategy::BlockLocal, 4, 256);
        let found = c(GpuStrategy::BlockLocal, 8, 128);
        let step = |config, time| Step {
            config,
            time,
            batches: 3,
            reference: None,
        };
        let r = TuneReport {
            starts: vec![planned, c(GpuStrategy::Global, 8, 256)],
            steps: vec![step(planned, 2e-6), step(found, 1e-6)],
            best: Some((found, 1e-6)),
            converged: true,
            paired: false,
            batches: (32, 6),
            search_ms: 1.0,
            decision_ms: 0.01,
            compile_ms: 120.0,
            space: 120,
        };
        let text = r.to_string();
        assert!(!text.contains("table grew"), "{text}");
        let paired = TuneReport {
            paired: true,
            ..r.clone()
        }
        .to_string();
        assert!(paired.contains("while the table grew"), "{paired}");
        for part in [
            "from block_local 4x256x4, global 8x256x4",
            "2 of 240 shapes measured over 6 of 32 chunks",
            "best block_local 8x128x4 at 1.000 ns/row (0.50x the planner's shape)",
            "converged",
            "compiling 120 ms",
        ] {
            assert!(text.contains(part), "{part:?} missing from {text}");
        }
    }
}
