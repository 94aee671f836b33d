//! Spilling on the CPU backend: when a worker's groups (or the shared key dictionaries) pass
//! what the session's memory pool grants (`--memory-limit`), the query starts a new generation
//! ([`grouper_core::Aggregation::start_generation`]), every worker evicts its groups at its
//! next batch, and they go to DataFusion's temporary files as radix-partitioned Arrow IPC runs
//! ([`grouper_core::spill`]). At the end the workers' last groups follow, and the result is
//! produced in waves of partitions ([`SpilledGroups`]): each partition's batch of every run
//! merged and finalized, one partition per thread, so memory holds a wave's groups at a time.
//!
//! Every CPU strategy spills this way (`shared` and `sort` aggregate their kept batches when
//! evicted). The GPU's routes do not spill on the device: a GPU plan that fails for memory
//! falls back to the CPU under `auto`, which then spills.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::ArrayRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::disk_manager::DiskManager;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryReservation};
use datafusion::execution::SpillFile;
use datafusion::execution::TaskContext;
use grouper_core::partial::PartialGroups;
use grouper_core::planner::Decision;
use grouper_core::spill::{Run, PARTITIONS};
use grouper_core::{Aggregation, QuerySpec, Worker};
use rayon::prelude::*;
use rayon::ThreadPool;

use super::{external, over_budget};

/// One worker's memory: its reservation from the session's pool, the query's shared reservation
/// for the key dictionaries, and where to spill when they cannot grow.
pub(crate) struct Budget {
    reservation: MemoryReservation,
    dictionaries: Arc<MemoryReservation>,
    spill: Option<Arc<Spill>>,
    pool: Arc<ThreadPool>,
    /// This worker's fair share of a finite pool (the limit over the workers).
    share: Option<usize>,
    /// Whether the worker's groups were evicted after its previous batch.
    fresh: bool,
}

impl Budget {
    /// A budget over `reservation` from `limit`'s pool, one of `workers`.
    pub(crate) fn new(
        limit: MemoryLimit,
        reservation: MemoryReservation,
        dictionaries: Arc<MemoryReservation>,
        spill: Option<Arc<Spill>>,
        pool: Arc<ThreadPool>,
        workers: usize,
    ) -> Self {
        let share = match limit {
            MemoryLimit::Finite(limit) => Some(limit / workers.max(1)),
            _ => None,
        };
        Self {
            reservation,
            dictionaries,
            spill,
            pool,
            share,
            fresh: false,
        }
    }

    /// After each batch: grows the reservations to what `worker` and the dictionaries hold;
    /// where the pool refuses, starts a new generation and spills `worker`'s groups (and
    /// spills them too when another worker started one). Fails where nothing can spill, or
    /// where one batch's groups alone pass the worker's share (a `perfect` table wider than
    /// the budget: spilling after every batch would only repeat).
    pub(crate) fn after_batch(&mut self, agg: &Aggregation, worker: &mut Worker) -> Result<()> {
        // Twice the groups: evicting copies them once more (compacted states, decoded keys,
        // the partitioned batches), and that copy must fit too.
        let held = 2 * worker.memory_bytes();
        let over = self
            .reservation
            .try_resize(held)
            .and_then(|()| self.dictionaries.try_resize(agg.dictionary_bytes()))
            .err();
        let evict = match (over, &self.spill) {
            (None, _) => worker.has_evicted(),
            (Some(e), None) => return Err(over_budget(e)),
            (Some(e), Some(_)) => {
                if self.fresh && self.share.is_some_and(|s| held > s) {
                    return Err(over_budget(e));
                }
                agg.start_generation();
                true
            }
        };
        self.fresh = false;
        if let (true, Some(spill)) = (evict, &self.spill) {
            let groups = self.pool.install(|| worker.evict()).map_err(external)?;
            spill.write(groups)?;
            self.reservation
                .try_resize(2 * worker.memory_bytes())
                .map_err(over_budget)?;
            self.fresh = true;
        }
        Ok(())
    }
}

/// The runs one execution spilled, shared by its worker tasks.
pub(crate) struct Spill {
    disk: Arc<DiskManager>,
    runs: Mutex<Vec<(Arc<dyn SpillFile>, Run)>>,
}

impl Spill {
    /// Spilling for `context`'s session, when its disk manager may create temporary files.
    pub(crate) fn new(context: &TaskContext) -> Option<Arc<Self>> {
        let disk = Arc::clone(&context.runtime_env().disk_manager);
        disk.tmp_files_enabled().then(|| {
            Arc::new(Self {
                disk,
                runs: Mutex::new(Vec::new()),
            })
        })
    }

    /// Writes each of `groups` as a run of its own.
    pub(crate) fn write(&self, groups: Vec<PartialGroups>) -> Result<()> {
        for g in groups.into_iter().filter(|g| g.len > 0) {
            let file = self.disk.create_tmp_file("grouper's GroupByExec spill")?;
            let path = file
                .path()
                .ok_or_else(|| {
                    DataFusionError::NotImplemented(
                        "spilling to a temporary-file backend without local paths".into(),
                    )
                })?
                .to_path_buf();
            let run = Run::write(&g, file.open_writer()?, &path).map_err(external)?;
            if let Some(run) = run {
                self.runs
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((file, run));
            }
        }
        Ok(())
    }

    /// Whether any run was written.
    pub(crate) fn spilled(&self) -> bool {
        !self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// What was spilled, for `--explain`.
    pub(crate) fn report(&self) -> SpillReport {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        SpillReport {
            runs: runs.len(),
            bytes: runs.iter().map(|(_, r)| r.bytes()).sum(),
            groups: runs
                .iter()
                .map(|(_, r)| (0..PARTITIONS).map(|p| r.groups(p)).sum::<u64>())
                .sum(),
        }
    }
}

/// What one execution spilled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpillReport {
    runs: usize,
    bytes: u64,
    /// Partial groups written (a key spilled in several runs counts once per run).
    groups: u64,
}

impl fmt::Display for SpillReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "spilled {:.1} MiB ({} partial groups) in {} runs of {} partitions, merged partition by partition in parallel",
            self.bytes as f64 / (1u64 << 20) as f64,
            self.groups,
            self.runs,
            PARTITIONS
        )
    }
}

/// One merged partition: keys then finalized aggregates, and its groups.
pub(crate) type Merged = (Vec<ArrayRef>, usize);

/// The result of a spilled aggregation, produced a wave of partitions at a time.
pub(crate) struct SpilledGroups {
    spill: Arc<Spill>,
    spec: QuerySpec,
    next: usize,
    /// The memory of the partitions being merged.
    reservation: MemoryReservation,
    /// grouper's pool, which merges a wave of partitions at once.
    pool: Arc<ThreadPool>,
    /// The planner's decision.
    pub(crate) decision: Option<Decision>,
    pub(crate) report: SpillReport,
}

impl SpilledGroups {
    /// The result of `spill`'s runs for a query of `spec`.
    pub(crate) fn new(
        spill: Arc<Spill>,
        spec: QuerySpec,
        decision: Option<Decision>,
        pool: Arc<ThreadPool>,
        context: &TaskContext,
    ) -> Self {
        let report = spill.report();
        let reservation =
            MemoryConsumer::new("GroupByExec (spill merge)").register(context.memory_pool());
        Self {
            spill,
            spec,
            next: 0,
            reservation,
            pool,
            decision,
            report,
        }
    }

    /// Keys then finalized aggregates (and their number) of each partition with groups in
    /// the next wave of partitions, merged in parallel on grouper's pool, one partition per
    /// thread; `None` after the last wave. A wave's spilled bytes are reserved while it merges.
    pub(crate) fn next_wave(&mut self) -> Result<Option<Vec<Merged>>> {
        if self.next >= PARTITIONS {
            return Ok(None);
        }
        let wave = self.next..(self.next + self.pool.current_num_threads().max(1)).min(PARTITIONS);
        self.next = wave.end;
        let runs = self
            .spill
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let read = |p: usize| -> Result<Vec<PartialGroups>> {
            let mut parts = Vec::new();
            for (_, run) in runs.iter() {
                parts.extend(run.read(&self.spec, p).map_err(external)?);
            }
            Ok(parts)
        };
        let waves: Vec<Vec<PartialGroups>> = self
            .pool
            .install(|| wave.into_par_iter().map(read).collect::<Result<_>>())?;
        let bytes: usize = waves.iter().flatten().map(partial_bytes).sum();
        // The parts, and the merged groups growing beside them: reserved where the pool has
        // room. Where other operators hold it (an aggregate above this one buffering its
        // input), the merge goes on regardless: a wave is a few 256ths of what spilled, the
        // margin docs/ARCHITECTURE.md measures.
        let _ = self.reservation.try_resize(2 * bytes);
        let key_types = &self.spec.key_types;
        let out = self.pool.install(|| {
            waves
                .into_par_iter()
                .filter(|parts| !parts.is_empty())
                .map(|parts| {
                    PartialGroups::merge_all(parts, key_types).and_then(PartialGroups::finalize)
                })
                .collect::<grouper_core::Result<Vec<_>>>()
        });
        self.reservation.free();
        out.map(Some).map_err(external)
    }
}

/// Bytes of partial groups in memory: key arrays and aggregate states.
fn partial_bytes(g: &PartialGroups) -> usize {
    let keys: usize = g.keys.iter().map(|k| k.get_array_memory_size()).sum();
    let states: usize = g.accs.iter().map(|a| a.state_bytes() * a.len()).sum();
    keys + states
}
