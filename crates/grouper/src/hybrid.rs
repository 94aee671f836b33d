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
//! remaining chunks before the worker finishes this one: otherwise the GPU takes it, and the
//! query does not wait on a slow last CPU chunk.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};

/// The chunks of one input, handed out once each, and the GPU's measured pace.
#[derive(Debug)]
pub struct ChunkQueue {
    next: AtomicUsize,
    chunks: usize,
    /// Rows of each chunk.
    rows: Vec<usize>,
    /// Nanoseconds per chunk the GPU takes (0 until measured).
    gpu_ns: AtomicU64,
    gpu_last: Mutex<Option<Instant>>,
    /// Rows and chunks the CPU took.
    cpu_rows: AtomicU64,
    cpu_chunks: AtomicUsize,
}

impl ChunkQueue {
    /// A queue over chunks of `rows` rows each.
    pub fn new(rows: Vec<usize>) -> Self {
        Self {
            next: AtomicUsize::new(0),
            chunks: rows.len(),
            rows,
            gpu_ns: AtomicU64::new(0),
            gpu_last: Mutex::new(None),
            cpu_rows: AtomicU64::new(0),
            cpu_chunks: AtomicUsize::new(0),
        }
    }

    /// The next chunk, if `take(chunk)` agrees.
    fn claim_if(&self, take: impl Fn(usize) -> bool) -> Option<usize> {
        let mut i = self.next.load(Ordering::Acquire);
        loop {
            if i >= self.chunks || !take(i) {
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

    /// A CPU worker's claim, given how long its last chunk took (`None`: none yet).
    fn cpu_claim(&self, cpu_ns: Option<u64>) -> Option<usize> {
        let gpu = self.gpu_ns.load(Ordering::Relaxed);
        let i = self.claim_if(|i| match cpu_ns {
            Some(cpu) if gpu > 0 => ((self.chunks - i - 1) as u64).saturating_mul(gpu) >= cpu,
            _ => true,
        })?;
        self.cpu_chunks.fetch_add(1, Ordering::Relaxed);
        self.cpu_rows.fetch_add(
            self.rows.get(i).copied().unwrap_or(0) as u64,
            Ordering::Relaxed,
        );
        Some(i)
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
        self.chunks
    }
}

/// A leaf that replaces the fused source in the CPU's copy of the input plan: each of its
/// partitions claims chunks from the queue and yields their slices of the source's batches.
pub struct QueueSourceExec {
    schema: SchemaRef,
    batches: Arc<Vec<RecordBatch>>,
    pieces: Arc<Vec<Vec<(usize, usize, usize)>>>,
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
        pieces: Arc<Vec<Vec<(usize, usize, usize)>>>,
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
                    let i = queue.cpu_claim(spent)?;
                    c.took = Some(Instant::now());
                    let slices: Vec<RecordBatch> = pieces
                        .get(i)
                        .map(|ps| {
                            ps.iter()
                                .filter_map(|&(b, off, len)| {
                                    batches.get(b).map(|x| x.slice(off, len))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_is_claimed_once() {
        let q = Arc::new(ChunkQueue::new(vec![10; 1000]));
        let seen = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for t in 0..4 {
                let (q, seen) = (Arc::clone(&q), Arc::clone(&seen));
                s.spawn(move || loop {
                    let c = if t == 0 {
                        q.gpu_claim()
                    } else {
                        q.cpu_claim(None)
                    };
                    match c {
                        Some(i) => seen.lock().unwrap().push(i),
                        None => break,
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
        let q = ChunkQueue::new(vec![1; 10]);
        q.gpu_ns.store(1_000, Ordering::Relaxed);
        // A CPU chunk takes as long as 5 GPU chunks: with 5 or more left after it, take it.
        assert_eq!(q.cpu_claim(Some(5_000)), Some(0));
        q.next.store(5, Ordering::Relaxed);
        assert_eq!(q.cpu_claim(Some(5_000)), None);
        assert_eq!(q.gpu_claim(), Some(5));
        // Before any measurement it takes what there is.
        assert_eq!(q.cpu_claim(None), Some(6));
    }
}
