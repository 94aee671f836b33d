//! Co-processing (`--backend hybrid`; Tomé §3.6 data parallelism, Luan's intra-operator split):
//! the GPU feeder and CPU workers take chunks of the input from one queue, so the split
//! follows their real speeds; both sides' groups merge (the aggregate algebra's `merge`) and are
//! finalized once.
//!
//! ```text
//!            ChunkQueue (chunk i = a run of input rows, the GPU's batch)
//!              │ claim                         │ claim (while it would finish before the GPU)
//!   GPU: streaming pipeline, fused kernel     CPU: QueueSourceExec partitions ─▶ DataFusion's
//!              │                                   filter/projection ─▶ grouper CPU workers
//!              └──── PartialGroups ──── merge ─────┘
//! ```
//!
//! A CPU worker takes a chunk only while the GPU, at its measured pace, would not finish the
//! remaining chunks before the worker finishes this one (its own last chunk's time, or before
//! its first a prior: an optimistic [`CPU_PRIOR_NS_PER_ROW`], plus [`CPU_GROUP_NS_PER_ROW`] as
//! far as the estimated groups fill a chunk): otherwise the GPU takes it, and the query does
//! not wait on a slow last CPU chunk. Until the GPU's pace is known (a few chunks past its
//! initial burst of copies) CPU workers wait; once the GPU is done they take what is left.
//!
//! A [`Split::Static`] share instead hands the CPU a fixed part of the chunks up front (the
//! best static split is what the dynamic one is measured against: `bench q1 --hybrid-splits`).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::BaselineMetrics;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use grouper_core::partial::PartialGroups;
use grouper_gpu::pipeline as gpu;
use grouper_gpu::{GpuOptions, GpuQuery, Piece, Prepared};

use super::cpu::{run_cpu_with, Finished};
use super::gpu::collect;
use super::{external, over_budget, Ran};
use crate::config::{Engine, Split};
use crate::group_by::GroupByPlan;

/// What a CPU worker gets from the queue.
#[derive(Debug, PartialEq, Eq)]
enum Claim {
    /// Chunk `i` is this worker's.
    Take(usize),
    /// Ask again shortly (the GPU's pace is not known yet).
    Wait,
    /// Nothing more for the CPU.
    Done,
}

/// Before a CPU worker has timed a chunk: an optimistic single-core cost per row (a simple
/// aggregation runs at about 50–100 M rows/s per core), so a worker declines a first chunk
/// the GPU would finish sooner even at that speed.
pub const CPU_PRIOR_NS_PER_ROW: f64 = 10.0;

/// Before a CPU worker has timed a chunk, what a row costs it on top of
/// [`CPU_PRIOR_NS_PER_ROW`] when every row of the chunk may open a group of its own (a share of
/// it when the estimated groups fill part of a chunk, [`prior_ns_per_row`]): the worker builds
/// those groups in a table of its own, past its caches, and they are merged with the GPU's at
/// the end. Measured: db-benchmark q3 (1e6 string groups, 1e8 rows in memory) on the H200 host's
/// 16 threads, where on the flat prior five workers each took a first chunk of 2^19 rows, spent
/// ~270 ms on it (515 ns a row) and their groups' merge with the GPU's ~580 ms more: 879 ms for
/// the query, against 230-250 when the CPU took none and 855 for DataFusion alone
/// (`bench/results/groupby-q3-1e8-h200-16t-trace-3392bf9.json`).
pub const CPU_GROUP_NS_PER_ROW: f64 = 500.0;

/// The prior cost of a row of a chunk of `chunk_rows` rows to a CPU worker that has not timed
/// one, with `groups` groups estimated for the query.
fn prior_ns_per_row(groups: u64, chunk_rows: usize) -> f64 {
    let opened = (groups as f64 / chunk_rows.max(1) as f64).min(1.0);
    CPU_PRIOR_NS_PER_ROW + opened * CPU_GROUP_NS_PER_ROW
}

/// The chunks of one input, handed out once each, and the GPU's measured pace.
#[derive(Debug)]
pub struct ChunkQueue {
    next: AtomicUsize,
    /// A static split: the first chunk of the CPU's part, and its next chunk.
    cpu_part: Option<(usize, AtomicUsize)>,
    /// Rows of each chunk.
    rows: Vec<usize>,
    /// The groups the planner estimates (for a CPU worker's prior, [`prior_ns_per_row`]).
    groups: u64,
    /// Nanoseconds per chunk the GPU takes (0 until measured).
    gpu_ns: AtomicU64,
    gpu_last: Mutex<Option<Instant>>,
    /// Chunks the GPU claimed.
    gpu_claims: AtomicUsize,
    /// Whether the GPU has stopped (done or failed).
    gpu_done: AtomicBool,
    /// Rows and chunks the CPU took.
    cpu_rows: AtomicU64,
    cpu_chunks: AtomicUsize,
    /// The query was dropped (cancelled): no more chunks for anyone ([`CloseOnDrop`]).
    closed: AtomicBool,
}

/// Closes the queue when dropped: held by the query's future, so that a cancelled query's GPU
/// side stops at its next claim instead of taking every chunk the CPU workers (aborted with the
/// future) left.
struct CloseOnDrop(Arc<ChunkQueue>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
    }
}

impl ChunkQueue {
    /// A queue over chunks of `rows` rows each, divided as `split` says, for a query of about
    /// `groups` groups.
    pub fn new(rows: Vec<usize>, split: Split, groups: u64) -> Self {
        let cpu_part = match split {
            Split::Dynamic => None,
            Split::Static(share) => {
                let cpu = (share.clamp(0.0, 1.0) * rows.len() as f64).round() as usize;
                let first = rows.len() - cpu.min(rows.len());
                Some((first, AtomicUsize::new(first)))
            }
        };
        Self {
            next: AtomicUsize::new(0),
            cpu_part,
            rows,
            groups,
            gpu_ns: AtomicU64::new(0),
            gpu_last: Mutex::new(None),
            gpu_claims: AtomicUsize::new(0),
            gpu_done: AtomicBool::new(false),
            cpu_rows: AtomicU64::new(0),
            cpu_chunks: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// The next chunk of the shared queue (of the GPU's part, when the split is static), if
    /// `take(chunk)` agrees.
    fn claim_if(&self, take: impl Fn(usize) -> bool) -> Option<usize> {
        let end = self.cpu_part.as_ref().map_or(self.rows.len(), |c| c.0);
        let mut i = self.next.load(Ordering::Acquire);
        loop {
            if i >= end || self.closed.load(Ordering::Acquire) || !take(i) {
                return None;
            }
            match self
                .next
                .compare_exchange(i, i + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(i),
                Err(now) => i = now,
            }
        }
    }

    /// The GPU's claim: always the next chunk; the time between claims is its pace (it
    /// claims a few chunks ahead of its kernel, so in steady state this is its throughput).
    pub fn gpu_claim(&self) -> Option<usize> {
        let i = self.claim_if(|_| true)?;
        self.gpu_claims.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut last) = self.gpu_last.lock() {
            let now = Instant::now();
            if let Some(prev) = last.replace(now) {
                let ns = now.duration_since(prev).as_nanos() as u64;
                let old = self.gpu_ns.load(Ordering::Relaxed);
                let ema = if old == 0 { ns } else { (3 * old + ns) / 4 };
                self.gpu_ns.store(ema, Ordering::Relaxed);
            }
        }
        Some(i)
    }

    /// Marks the GPU stopped: CPU workers take every chunk left.
    pub fn gpu_finished(&self) {
        self.gpu_done.store(true, Ordering::Release);
    }

    /// A CPU worker's claim, given how long its last chunk took (`None`: none yet).
    fn cpu_claim(&self, cpu_ns: Option<u64>) -> Claim {
        if self.closed.load(Ordering::Acquire) {
            return Claim::Done;
        }
        if let Some((_, next)) = &self.cpu_part {
            let i = next.fetch_add(1, Ordering::AcqRel);
            return match self.rows.get(i) {
                Some(&rows) => self.cpu_took(i, rows),
                None => Claim::Done,
            };
        }
        let gpu_done = self.gpu_done.load(Ordering::Acquire);
        // The first claims come in a burst (the pipeline's copies ahead): no pace yet.
        let known = self.gpu_claims.load(Ordering::Relaxed) > gpu::SLOTS + 2;
        if !gpu_done && !known {
            return if self.next.load(Ordering::Acquire) >= self.rows.len() {
                Claim::Done
            } else {
                Claim::Wait
            };
        }
        let gpu = self.gpu_ns.load(Ordering::Relaxed);
        let taken = self.claim_if(|i| {
            let cpu = cpu_ns.unwrap_or_else(|| {
                let rows = self.rows.get(i).copied().unwrap_or(0);
                (rows as f64 * prior_ns_per_row(self.groups, rows)) as u64
            });
            gpu_done || ((self.rows.len() - i - 1) as u64).saturating_mul(gpu) >= cpu
        });
        match taken {
            Some(i) => self.cpu_took(i, self.rows.get(i).copied().unwrap_or(0)),
            None => Claim::Done,
        }
    }

    /// Counts chunk `i` of `rows` rows as the CPU's.
    fn cpu_took(&self, i: usize, rows: usize) -> Claim {
        self.cpu_chunks.fetch_add(1, Ordering::Relaxed);
        self.cpu_rows.fetch_add(rows as u64, Ordering::Relaxed);
        Claim::Take(i)
    }

    /// (rows, chunks) the CPU took.
    pub fn cpu_share(&self) -> (u64, usize) {
        (
            self.cpu_rows.load(Ordering::Relaxed),
            self.cpu_chunks.load(Ordering::Relaxed),
        )
    }

    /// Chunks in all.
    pub fn chunks(&self) -> usize {
        self.rows.len()
    }
}

/// A leaf that replaces the fused source in the CPU's copy of the input plan: each of its
/// partitions claims chunks from the queue and yields their slices of the source's batches.
pub struct QueueSourceExec {
    schema: SchemaRef,
    batches: Arc<Vec<RecordBatch>>,
    pieces: Arc<Vec<Vec<Piece>>>,
    queue: Arc<ChunkQueue>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for QueueSourceExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QueueSourceExec({} chunks)", self.queue.chunks())
    }
}

impl QueueSourceExec {
    /// `partitions` CPU workers over `batches` (the source's output), chunked as `pieces`.
    pub fn new(
        schema: SchemaRef,
        batches: Arc<Vec<RecordBatch>>,
        pieces: Arc<Vec<Vec<Piece>>>,
        queue: Arc<ChunkQueue>,
        partitions: usize,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(partitions.max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Self {
            schema,
            batches,
            pieces,
            queue,
            properties,
        }
    }
}

impl DisplayAs for QueueSourceExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "QueueSourceExec: chunks={}", self.queue.chunks())
    }
}

/// One CPU worker's pull state: the chunk it is on and when it took it.
struct Cursor {
    pending: std::vec::IntoIter<RecordBatch>,
    took: Option<Instant>,
}

impl ExecutionPlan for QueueSourceExec {
    fn name(&self) -> &'static str {
        "QueueSourceExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(DataFusionError::Internal(
                "QueueSourceExec has no children".into(),
            ))
        }
    }

    fn execute(
        &self,
        _partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let batches = Arc::clone(&self.batches);
        let pieces = Arc::clone(&self.pieces);
        let queue = Arc::clone(&self.queue);
        let start = Cursor {
            pending: Vec::new().into_iter(),
            took: None,
        };
        // The time from one claim to the next is how long this worker took for a chunk.
        let stream = futures::stream::unfold(start, move |mut c| {
            let (batches, pieces, queue) = (
                Arc::clone(&batches),
                Arc::clone(&pieces),
                Arc::clone(&queue),
            );
            async move {
                loop {
                    if let Some(b) = c.pending.next() {
                        return Some((Ok(b), c));
                    }
                    let spent = c.took.map(|t| t.elapsed().as_nanos() as u64);
                    let i = match queue.cpu_claim(spent) {
                        Claim::Take(i) => i,
                        Claim::Wait => {
                            tokio::time::sleep(std::time::Duration::from_micros(200)).await;
                            continue;
                        }
                        Claim::Done => return None,
                    };
                    c.took = Some(Instant::now());
                    let slices: Vec<RecordBatch> = pieces
                        .get(i)
                        .map(|ps| {
                            ps.iter()
                                .filter_map(|p| {
                                    batches.get(p.batch).map(|x| x.slice(p.offset, p.rows))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    c.pending = slices.into_iter();
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }
}

/// Co-processing: the fused source's batches chunked once; the GPU and CPU workers (running
/// DataFusion's filter and projections over a [`QueueSourceExec`] in place of the source) take
/// chunks from one [`ChunkQueue`]; their partial groups merge. Returns the result columns, its
/// rows and what ran.
pub(crate) async fn run(
    query: GpuQuery,
    input: &Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
) -> Result<(Vec<arrow::array::ArrayRef>, usize, Ran)> {
    let (groups, ran) = run_partial(query, input, plan, engine, context, baseline).await?;
    let (columns, rows) = groups.finalize().map_err(external)?;
    Ok((columns, rows, ran))
}

/// [`run`] up to the merged partial groups, not finalized (a distributed plan's partial
/// phase sends them on).
pub(crate) async fn run_partial(
    query: GpuQuery,
    input: &Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
) -> Result<(PartialGroups, Ran)> {
    let source = plan
        .fused
        .as_ref()
        .map(|f| Arc::clone(&f.source))
        .ok_or_else(|| DataFusionError::Internal("hybrid without a fused source".into()))?;
    let (batches, _held) = collect(&source, context, None).await?;
    let batches = Arc::new(batches);
    // Smaller chunks than the GPU alone uses (2^22 rows): a CPU worker's chunk then takes tens
    // of milliseconds, so the last one does not hold the query up.
    let opts = GpuOptions {
        batch_rows: (engine.gpu.batch_rows / 8).max(1 << 16),
        ..engine.gpu_options()
    };
    let shared = Arc::clone(&batches);
    let mut prepared = tokio::task::spawn_blocking(move || Prepared::new(&query, &shared, &opts))
        .await
        .map_err(external)?
        .map_err(external)?;
    let queue = Arc::new(ChunkQueue::new(
        prepared.chunk_rows(),
        engine.hybrid_split,
        prepared.est_groups(),
    ));
    let _close = CloseOnDrop(Arc::clone(&queue));
    let pieces: Vec<Vec<grouper_gpu::Piece>> = (0..queue.chunks())
        .map(|i| prepared.chunk_pieces(i).to_vec())
        .collect();
    let leaf: Arc<dyn ExecutionPlan> = Arc::new(QueueSourceExec::new(
        source.schema(),
        Arc::clone(&batches),
        Arc::new(pieces),
        Arc::clone(&queue),
        engine.pool.threads(),
    ));
    let replaced = Arc::clone(input).transform_down(|node| {
        Ok(if Arc::ptr_eq(&node, &source) {
            Transformed::new(Arc::clone(&leaf), true, TreeNodeRecursion::Jump)
        } else {
            Transformed::no(node)
        })
    })?;
    if !replaced.transformed {
        // The CPU side would read the whole source again: count rows twice. Never expected
        // (the fused form is dropped whenever the input is rebuilt).
        return Err(DataFusionError::Internal(
            "co-processing: the fused source is not in the input plan".into(),
        ));
    }
    let cpu_input = replaced.data;
    let gpu_queue = Arc::clone(&queue);
    let gpu = tokio::task::spawn_blocking(move || {
        let claim = || gpu_queue.gpu_claim();
        let out = prepared.run_partial(&claim);
        gpu_queue.gpu_finished();
        out
    });
    let finished = run_cpu_with(cpu_input, None, plan, engine, context, baseline, |a, w| {
        a.finish_partial(w)
    })
    .await?;
    // The GPU's groups do not join a spill: `auto` reruns the query on the CPU, which spills.
    let Finished::Merged((cpu_part, decision)) = finished else {
        return Err(over_budget(DataFusionError::ResourcesExhausted(
            "co-processing's CPU side spilled".into(),
        )));
    };
    let (gpu_part, report) = gpu.await.map_err(external)?.map_err(external)?;
    let groups = cpu_part
        .merge(gpu_part, &plan.spec.key_types)
        .map_err(external)?;
    Ok((
        groups,
        Ran::Hybrid(
            Box::new(report),
            queue.cpu_share(),
            decision,
            queue.chunks(),
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_query_closes_its_queue() {
        let q = Arc::new(ChunkQueue::new(vec![10; 8], Split::Dynamic, 1));
        let guard = CloseOnDrop(Arc::clone(&q));
        assert_eq!(q.gpu_claim(), Some(0));
        drop(guard);
        assert_eq!(q.gpu_claim(), None);
        assert!(matches!(q.cpu_claim(None), Claim::Done));
    }

    #[test]
    fn every_chunk_is_claimed_once() {
        let q = Arc::new(ChunkQueue::new(vec![10; 1000], Split::Dynamic, 1));
        let seen = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for t in 0..4 {
                let (q, seen) = (Arc::clone(&q), Arc::clone(&seen));
                s.spawn(move || loop {
                    let c = if t == 0 {
                        q.gpu_claim().map_or(Claim::Done, Claim::Take)
                    } else {
                        q.cpu_claim(None)
                    };
                    match c {
                        Claim::Take(i) => seen.lock().unwrap().push(i),
                        Claim::Wait => std::thread::yield_now(),
                        Claim::Done if t == 0 => {
                            q.gpu_finished();
                            break;
                        }
                        Claim::Done => break,
                    }
                });
            }
        });
        let mut all = seen.lock().unwrap().clone();
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
        let (rows, chunks) = q.cpu_share();
        assert_eq!(rows, 10 * chunks as u64);
    }

    #[test]
    fn a_slow_cpu_leaves_the_last_chunks_to_the_gpu() {
        let q = ChunkQueue::new(vec![100; 20], Split::Dynamic, 1);
        // No GPU pace yet: the CPU waits.
        assert_eq!(q.cpu_claim(Some(5_000)), Claim::Wait);
        for i in 0..=gpu::SLOTS + 2 {
            assert_eq!(q.gpu_claim(), Some(i));
        }
        let next = gpu::SLOTS + 3;
        q.gpu_ns.store(1_000, Ordering::Relaxed);
        // A CPU chunk takes as long as 5 GPU chunks: with 5 or more left after it, take it.
        assert_eq!(q.cpu_claim(Some(5_000)), Claim::Take(next));
        q.next.store(15, Ordering::Relaxed);
        assert_eq!(q.cpu_claim(Some(5_000)), Claim::Done);
        // Before its first chunk, a worker assumes the optimistic prior (100 rows of one
        // group: ~1.5 us, under the 4 us the GPU takes for the four chunks after it).
        assert_eq!(q.cpu_claim(None), Claim::Take(15));
        // Once the GPU stops, the CPU takes the rest.
        q.gpu_finished();
        assert_eq!(q.cpu_claim(Some(1 << 40)), Claim::Take(16));
    }

    #[test]
    fn a_first_chunk_of_many_groups_is_priced_by_them() {
        // The GPU at 20 us a chunk of 1,000 rows; 10 chunks left after the next (200 us).
        let queue = |groups| {
            let q = ChunkQueue::new(vec![1_000; 20], Split::Dynamic, groups);
            for i in 0..=gpu::SLOTS + 2 {
                assert_eq!(q.gpu_claim(), Some(i));
            }
            q.gpu_ns.store(20_000, Ordering::Relaxed);
            q.next.store(9, Ordering::Relaxed);
            q
        };
        // Few groups: 18 ns a row, 18 us for the chunk: taken.
        assert_eq!(queue(16).cpu_claim(None), Claim::Take(9));
        // A group a row: 510 ns a row, 510 us: left to the GPU (the flat prior took it).
        assert_eq!(queue(1 << 20).cpu_claim(None), Claim::Done);
        // Groups filling a fifth of the chunk: 110 ns a row, 110 us: taken.
        assert_eq!(queue(200).cpu_claim(None), Claim::Take(9));
        // A worker's own time decides once it has one, whatever the groups.
        assert_eq!(queue(1 << 20).cpu_claim(Some(50_000)), Claim::Take(9));
        assert_eq!(prior_ns_per_row(0, 1_000), CPU_PRIOR_NS_PER_ROW);
        assert_eq!(
            prior_ns_per_row(500, 0),
            CPU_PRIOR_NS_PER_ROW + CPU_GROUP_NS_PER_ROW
        );
    }

    #[test]
    fn a_static_split_gives_the_cpu_its_share_whatever_the_speeds() {
        let q = ChunkQueue::new(vec![100; 20], Split::Static(0.25), 1);
        // No pace known, a slow CPU: it takes its five chunks all the same, the last five.
        for i in 15..20 {
            assert_eq!(q.cpu_claim(Some(1 << 40)), Claim::Take(i));
        }
        assert_eq!(q.cpu_claim(None), Claim::Done);
        let gpu: Vec<usize> = std::iter::from_fn(|| q.gpu_claim()).collect();
        assert_eq!(gpu, (0..15).collect::<Vec<_>>());
        assert_eq!(q.cpu_share(), (500, 5));
        // The ends: all to one side.
        let all_gpu = ChunkQueue::new(vec![1; 4], Split::Static(0.0), 1);
        assert_eq!(all_gpu.cpu_claim(None), Claim::Done);
        assert_eq!(std::iter::from_fn(|| all_gpu.gpu_claim()).count(), 4);
        let all_cpu = ChunkQueue::new(vec![1; 4], Split::Static(1.0), 1);
        assert_eq!(all_cpu.gpu_claim(), None);
        assert_eq!(all_cpu.cpu_share(), (0, 0));
        assert!(Split::cpu_share(1.5).is_err() && Split::cpu_share(-0.1).is_err());
        assert_eq!(" 0.5".parse::<Split>(), Ok(Split::Static(0.5)));
        assert!("half".parse::<Split>().is_err());
    }
}
