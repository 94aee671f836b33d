//! [`GroupByExec`]: grouper's aggregation as a DataFusion `ExecutionPlan`.
//!
//! ```text
//!   GroupByExec (1 output partition, schema = what DataFusion planned for the aggregate)
//!     └─ input: every partition pulled by its own task, each with a grouper_core::Worker;
//!               keys and arguments are evaluated and folded in as batches arrive (streaming:
//!               nothing is materialised for `perfect` and `thread_local`)
//!   then: Aggregation::finish (merge) on the rayon pool, result sliced to batch_size
//! ```
//!
//! The node replaces DataFusion's Partial + Final pair (or Single) whole: grouper does its own
//! parallelism, so there is no repartition between phases.
//!
//! On the GPU backend the partitions' batches are collected and handed to the GPU engine; when
//! the rule could translate the filter and projections below into the IR ([`Fused`]), the
//! batches come straight from the scan and the kernel evaluates those expressions itself.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::fmt;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{reset_plan_states, Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};
use grouper_core::expr::Expr;
use grouper_core::planner::{Decision, Hints, Overrides};
use grouper_core::profile::Profile;
use grouper_core::{InputBatch, QuerySpec};
use grouper_gpu::{ColumnBounds, Gpu, GpuOptions, GpuQuery, GpuReport, Prepared};

use datafusion::catalog::memory::{DataSourceExec, MemorySourceConfig};

use crate::fuse::Fused;
use crate::hybrid::{ChunkQueue, QueueSourceExec, Split};
use crate::session::Backend;

/// The expressions of one aggregate's argument: `None` for `COUNT(*)`.
pub type ArgExpr = Option<Arc<dyn PhysicalExpr>>;

/// What a [`GroupByExec`] computes: key and argument expressions over its input's schema, their
/// display names, and the engine's view of the query.
#[derive(Debug)]
pub struct GroupByPlan {
    /// Group key expressions and their output names.
    pub keys: Vec<(Arc<dyn PhysicalExpr>, String)>,
    /// One argument per aggregate (`None` for `COUNT(*)`).
    pub args: Vec<ArgExpr>,
    /// Display names of the aggregates.
    pub agg_names: Vec<String>,
    /// Key types and aggregates for `grouper-core`.
    pub spec: QuerySpec,
    /// The same aggregation over a source further down, when the filter and projections
    /// between translate into the IR (the GPU evaluates them in its kernel).
    pub fused: Option<Fused>,
}

/// How GroupByExec nodes of a session run: backend, CPU overrides, GPU options, thread pool.
#[derive(Debug)]
pub struct Engine {
    /// Which engine aggregates.
    pub backend: Backend,
    /// CPU strategy and table parameters fixed by the user.
    pub overrides: Overrides,
    /// This CPU's profile from `grouper calibrate`, if one is stored.
    pub cpu_profile: Option<Arc<Profile>>,
    /// GPU strategy, kernel parameters, resident or batched.
    pub gpu: GpuOptions,
    /// How co-processing divides the chunks.
    pub hybrid_split: Split,
    /// The CPU worker pool.
    pub pool: Arc<rayon::ThreadPool>,
}

/// What ran, for `--explain`.
#[derive(Debug, Clone)]
enum Ran {
    Cpu(Option<Decision>, Option<String>),
    Gpu(GpuReport),
    /// Co-processing: the GPU's report, the CPU's (rows, chunks) and decision, all chunks.
    Hybrid(GpuReport, (u64, usize), Option<Decision>, usize),
}

/// grouper's `GROUP BY` operator inside a DataFusion plan.
#[derive(Debug)]
pub struct GroupByExec {
    input: Arc<dyn ExecutionPlan>,
    plan: Arc<GroupByPlan>,
    schema: SchemaRef,
    engine: Arc<Engine>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    ran: Arc<Mutex<Option<Ran>>>,
}

impl GroupByExec {
    /// A node computing `plan` over `input`, producing `schema` (DataFusion's planned schema),
    /// run as `engine` says.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        plan: Arc<GroupByPlan>,
        schema: SchemaRef,
        engine: Arc<Engine>,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            input,
            plan,
            schema,
            engine,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
            ran: Arc::new(Mutex::new(None)),
        }
    }

    /// What the node computes (keys, arguments, the fused form when there is one).
    pub fn group_by(&self) -> &GroupByPlan {
        &self.plan
    }

    /// The CPU planner's decision from the last execution, if it ran on the CPU.
    pub fn last_decision(&self) -> Option<Decision> {
        match self.ran.lock().ok()?.clone()? {
            Ran::Cpu(d, _) | Ran::Hybrid(_, _, d, _) => d,
            Ran::Gpu(_) => None,
        }
    }

    /// The GPU report of the last execution, if it ran on the GPU.
    pub fn last_gpu_report(&self) -> Option<GpuReport> {
        match self.ran.lock().ok()?.clone()? {
            Ran::Gpu(r) | Ran::Hybrid(r, ..) => Some(r),
            Ran::Cpu(..) => None,
        }
    }

    fn with_input(&self, input: Arc<dyn ExecutionPlan>) -> Self {
        // A new input invalidates a fused source taken from the old one.
        let same = Arc::ptr_eq(&input, &self.input);
        let plan = if same || self.plan.fused.is_none() {
            Arc::clone(&self.plan)
        } else {
            Arc::new(GroupByPlan {
                keys: self.plan.keys.clone(),
                args: self.plan.args.clone(),
                agg_names: self.plan.agg_names.clone(),
                spec: self.plan.spec.clone(),
                fused: None,
            })
        };
        Self::new(
            input,
            plan,
            Arc::clone(&self.schema),
            Arc::clone(&self.engine),
        )
    }

    /// The GPU form of the query and where its batches come from, or why there is none.
    fn gpu_query(&self) -> grouper_core::Result<(GpuQuery, bool)> {
        let (query, fused) = match &self.plan.fused {
            Some(f) => (
                GpuQuery {
                    columns: f.columns.clone(),
                    filter: f.filter.clone(),
                    keys: f.keys.clone(),
                    aggregates: self
                        .plan
                        .spec
                        .aggregates
                        .iter()
                        .cloned()
                        .zip(f.args.clone())
                        .collect(),
                },
                true,
            ),
            None => (evaluated_query(&self.plan.spec), false),
        };
        query.check(&self.engine.gpu)?;
        Gpu::get()?;
        Ok((query, fused))
    }
}

/// The GPU query over batches of evaluated keys and arguments (keys first, then each
/// aggregate's argument).
fn evaluated_query(spec: &QuerySpec) -> GpuQuery {
    let mut columns = spec.key_types.clone();
    let mut aggregates = Vec::with_capacity(spec.aggregates.len());
    for a in &spec.aggregates {
        let arg = a
            .input_type
            .clone()
            .filter(|_| a.kind != grouper_core::agg::AggKind::CountStar);
        aggregates.push((
            a.clone(),
            arg.map(|t| {
                columns.push(t.clone());
                Expr::column(columns.len() - 1, t)
            }),
        ));
    }
    GpuQuery {
        columns,
        filter: None,
        keys: (0..spec.key_types.len()).collect(),
        aggregates,
    }
}

impl DisplayAs for GroupByExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<&str> = self.plan.keys.iter().map(|(_, n)| n.as_str()).collect();
        write!(
            f,
            "GroupByExec: gby=[{}], aggr=[{}]",
            keys.join(", "),
            self.plan.agg_names.join(", ")
        )?;
        if let Some(fu) = &self.plan.fused {
            write!(
                f,
                ", fusable=[source={}{}]",
                fu.source.name(),
                if fu.filter.is_some() { " +filter" } else { "" }
            )?;
        }
        match self.ran.lock().ok().and_then(|r| r.clone()) {
            Some(Ran::Gpu(r)) => write!(
                f,
                ", backend=gpu, {}",
                gpu_summary(&r, self.plan.fused.is_some())
            ),
            Some(Ran::Hybrid(r, (cpu_rows, cpu_chunks), d, chunks)) => {
                let total = (r.rows_run + cpu_rows).max(1) as f64;
                write!(
                    f,
                    ", backend=hybrid (split: GPU {} rows in {} chunks = {:.1}%, CPU {} rows in {} chunks = {:.1}%), gpu: {}",
                    r.rows_run, chunks - cpu_chunks, 100.0 * r.rows_run as f64 / total,
                    cpu_rows, cpu_chunks, 100.0 * cpu_rows as f64 / total,
                    gpu_summary(&r, true)
                )?;
                match d {
                    Some(d) => write!(f, ", cpu: {d}"),
                    None => Ok(()),
                }
            }
            Some(Ran::Cpu(d, why)) => {
                write!(f, ", backend=cpu")?;
                if let Some(w) = why {
                    write!(f, " ({w})")?;
                }
                match d {
                    Some(d) => write!(f, ", {d}"),
                    None => Ok(()),
                }
            }
            None => write!(f, ", backend={}", self.engine.backend),
        }
    }
}

/// Rows from which `auto` co-processes an in-memory table (see `execute`).
pub const HYBRID_MIN_ROWS: usize = 1 << 24;

/// Rows of `source` when it is an in-memory table.
fn in_memory_rows(source: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    let ds = source.downcast_ref::<DataSourceExec>()?;
    let mem =
        (ds.data_source().as_ref() as &dyn std::any::Any).downcast_ref::<MemorySourceConfig>()?;
    Some(
        mem.partitions()
            .iter()
            .flatten()
            .map(|b| b.num_rows())
            .sum(),
    )
}

/// What the GPU did, for `--explain`.
fn gpu_summary(r: &GpuReport, fused: bool) -> String {
    format!(
        "device={}, strategy={} ({}), fused={}, key_words={}, est_groups={} [{}], groups={}, grows={}, grid={}x{}, shared={}B, compile={:.1}ms ({:?}), transfer={}{}{} ({} chunks of {} rows, {:.2} B/row before, {:.2} B/row sent: [{}]), prepare={:.1}ms{}, upload={:.1}ms, kernels={:.2}ms, gpu_total={:.1}ms",
        r.device, r.strategy, r.reason, fused && r.rows > 0, r.key_words, r.est_groups, r.estimate, r.groups,
        r.grows, r.blocks, r.threads, r.shared_bytes, r.compile_ms, r.cache, r.transfer,
        if r.from_scan { " from the scan as it decodes (planned from its statistics)" } else { "" },
        if r.cpu_filter { ", filter precomputed on the CPU (selection bitmap)" } else { "" },
        r.chunks, r.batch_rows,
        r.raw_bytes_per_row, r.sent_bytes_per_row, r.encodings.join(", "), r.prepare_ms,
        if r.cached { " (cached)" } else { "" }, r.upload_ms, r.kernel_ms, r.total_ms
    ) + &r.tuning.as_ref().map_or_else(
        || "; tuner off (the planner's launch shape; --tune searches it)".to_string(),
        |t| format!("; {t}"),
    ) + &match r.switches.as_slice() {
        [] => String::new(),
        s => format!("; re-planned as groups grew: {}", s.join("; ")),
    }
}

impl ExecutionPlan for GroupByExec {
    fn name(&self) -> &'static str {
        "GroupByExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        let exprs = self
            .plan
            .keys
            .iter()
            .map(|(e, _)| e)
            .chain(self.plan.args.iter().flatten());
        for e in exprs {
            if f(e)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return Err(DataFusionError::Internal(
                "GroupByExec takes exactly one child".into(),
            ));
        }
        Ok(Arc::new(self.with_input(children.swap_remove(0))))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "GroupByExec has one partition, asked for {partition}"
            )));
        }
        // Backend: the GPU when asked for (its absence is an error); hybrid likewise. `auto`
        // co-processes (hybrid) a query the GPU fuses over an in-memory table of at least
        // HYBRID_MIN_ROWS rows, where the GPU's share outruns its set-up (compile, encode; the
        // encoded input is cached for the next query), and otherwise stays on the CPU, saying
        // why. A GPU failure under `auto` falls back to the CPU. `auto` with a GPU strategy
        // asked for runs on the GPU when it can, with the same fallback.
        let mut hybrid = self.engine.backend == Backend::Hybrid;
        let (gpu, cpu_reason) = match self.engine.backend {
            Backend::Gpu | Backend::Hybrid => (Some(self.gpu_query().map_err(external)?), None),
            Backend::Auto if self.engine.gpu.strategy.is_some() => match self.gpu_query() {
                Ok(q) => (Some(q), None),
                Err(e) => (None, Some(format!("{e}; ran on the CPU"))),
            },
            Backend::Auto => match self.gpu_query() {
                Ok(q) => {
                    let rows = match (&self.plan.fused, q.1) {
                        (Some(f), true) => in_memory_rows(&f.source),
                        _ => None,
                    };
                    match rows {
                        Some(r) if r >= HYBRID_MIN_ROWS => {
                            hybrid = true;
                            (Some(q), None)
                        }
                        _ => (
                            None,
                            Some(format!(
                                "GPU {} available; co-processing pays only for a fused query over an in-memory table of at least {HYBRID_MIN_ROWS} rows (input: {})",
                                Gpu::get().map(|g| g.info.name.clone()).unwrap_or_default(),
                                rows.map_or("not an in-memory table".to_string(), |r| format!("{r} rows"))
                            )),
                        ),
                    }
                }
                Err(e) => (None, Some(e.to_string())),
            },
            _ => (None, None),
        };
        let batch_size = context.session_config().batch_size();
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let schema = Arc::clone(&self.schema);
        let plan = Arc::clone(&self.plan);
        let engine = Arc::clone(&self.engine);
        let ran = Arc::clone(&self.ran);
        let input = Arc::clone(&self.input);
        let fallback = self.engine.backend == Backend::Auto;
        let result = async move {
            let attempted = gpu.is_some();
            let gpu_out = match gpu {
                Some((query, true)) if hybrid => {
                    match run_hybrid(query, &input, &plan, &engine, &context, &baseline).await {
                        Ok(out) => Ok(out),
                        Err(e) if fallback => {
                            Err(Some(format!("co-processing failed ({e}); ran on the CPU")))
                        }
                        Err(e) => return Err(e),
                    }
                }
                Some((query, fused)) => {
                    let mut source = match (&plan.fused, fused) {
                        (Some(f), true) => Arc::clone(&f.source),
                        _ => Arc::clone(&input),
                    };
                    // A file scan streams into the GPU as it is decoded, planned from its
                    // statistics; where the data leaves that plan, the query reruns on the
                    // collected input.
                    let bounds = match fused && !engine.gpu.resident {
                        true => stream_bounds(&source, &query),
                        false => None,
                    };
                    let mut streamed = None;
                    let mut abandoned = None;
                    if let Some((bounds, rows)) = bounds {
                        let timer = baseline.elapsed_compute().timer();
                        let out =
                            run_streamed(query.clone(), &source, bounds, rows, &engine, &context)
                                .await?;
                        timer.done();
                        match out {
                            Err(grouper_core::GrouperError::OutsidePlan(why)) => {
                                abandoned = Some(why);
                                source = reset_plan_states(source)?;
                            }
                            out => streamed = Some(out),
                        }
                    }
                    let out = match streamed {
                        Some(out) => out,
                        None => {
                            let batches =
                                collect(&source, &context, (!fused).then(|| Arc::clone(&plan)))
                                    .await?;
                            let timer = baseline.elapsed_compute().timer();
                            let mut opts = engine.gpu.clone();
                            if !fused {
                                // Evaluated batches are new arrays every time: nothing to reuse.
                                opts.cache_bytes = 0;
                            }
                            let out = tokio::task::spawn_blocking(move || {
                                Prepared::new(&query, &batches.0, &opts).and_then(|mut p| p.run())
                            })
                            .await
                            .map_err(external)?;
                            timer.done();
                            out.map(|mut o| {
                                if let Some(why) = abandoned {
                                    o.report.reason +=
                                        &format!("; streaming from the scan stopped ({why}), input collected");
                                }
                                o
                            })
                        }
                    };
                    match out {
                        Ok(out) => Ok((out.columns, out.num_rows, Ran::Gpu(out.report))),
                        Err(e) if fallback => {
                            Err(Some(format!("GPU failed ({e}); ran on the CPU")))
                        }
                        Err(e) => return Err(external(e)),
                    }
                }
                None => Err(cpu_reason),
            };
            let out = match gpu_out {
                Ok((columns, rows, what)) => {
                    if let Ok(mut r) = ran.lock() {
                        *r = Some(what);
                    }
                    (columns, rows)
                }
                Err(cpu_reason) => {
                    // A failed GPU attempt consumed the input once (a repartition's channels
                    // do not replay): run the CPU on a fresh copy of the input plan.
                    let input = if attempted {
                        reset_plan_states(input)?
                    } else {
                        input
                    };
                    let out = run_cpu(input, &plan, &engine, &context, &baseline).await?;
                    if let Ok(mut r) = ran.lock() {
                        *r = Some(Ran::Cpu(out.decision.clone(), cpu_reason));
                    }
                    (out.columns, out.num_rows)
                }
            };
            let batch = if out.0.is_empty() {
                RecordBatch::try_new_with_options(
                    Arc::clone(&schema),
                    vec![],
                    &arrow::array::RecordBatchOptions::new().with_row_count(Some(out.1)),
                )?
            } else {
                RecordBatch::try_new(Arc::clone(&schema), out.0)?
            };
            baseline.record_output(batch.num_rows());
            // No rows, no batch: DataFusion's own aggregation emits none, and operators above
            // may not expect an empty one (a HAVING after DataFusion's DISTINCT rewrite
            // compares mismatched decimal types on any batch, found by difftest).
            let slices: Vec<Result<RecordBatch>> = (0..batch.num_rows())
                .step_by(batch_size.max(1))
                .map(|off| Ok(batch.slice(off, batch_size.min(batch.num_rows() - off))))
                .collect();
            Ok::<_, DataFusionError>(futures::stream::iter(slices))
        };
        let stream = futures::stream::once(result).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Bounds of `source`'s columns from its statistics (Parquet footers), and the rows it expects,
/// when the query can stream from it: not an in-memory table (those are collected and their
/// encoded images cached), and every integer-like group key bounded (strings and booleans
/// need none).
fn stream_bounds(
    source: &Arc<dyn ExecutionPlan>,
    query: &GpuQuery,
) -> Option<(Vec<ColumnBounds>, Option<u64>)> {
    if in_memory_rows(source).is_some() {
        return None;
    }
    let stats = datafusion::physical_plan::StatisticsContext::new()
        .compute(
            source.as_ref(),
            &datafusion::physical_plan::StatisticsArgs::new(),
        )
        .ok()?;
    if stats.column_statistics.len() != query.columns.len() {
        return None;
    }
    let bounds: Vec<ColumnBounds> = stats
        .column_statistics
        .iter()
        .zip(&query.columns)
        .map(|(cs, t)| {
            let ordinal = |v: &ScalarValue| -> Option<i128> {
                let a = v.to_array().ok()?;
                let a = match a.data_type() == t {
                    true => a,
                    false => arrow::compute::cast(&a, t).ok()?,
                };
                grouper_core::keys::ordinal_min_max(&a).map(|r| r.0)
            };
            let range = match (cs.min_value.get_value(), cs.max_value.get_value()) {
                (Some(lo), Some(hi)) => ordinal(lo).zip(ordinal(hi)),
                _ => None,
            };
            // Inexact statistics (a pushed-down predicate prunes row groups) still bound the
            // rows read; every chunk is checked against them anyway.
            ColumnBounds {
                range,
                may_null: cs.null_count.get_value() != Some(&0),
            }
        })
        .collect();
    let bounded = query.keys.iter().all(|&k| {
        query
            .columns
            .get(k)
            .is_some_and(grouper_core::keys::coded_without_bounds)
            || bounds.get(k).is_some_and(|b| b.range.is_some())
    });
    let rows = stats.num_rows.get_value().map(|&r| r as u64);
    bounded.then_some((bounds, rows))
}

/// Runs `query` on the GPU as `source`'s partitions deliver their batches: each partition's
/// task sends its batches into one channel; the GPU side plans from `bounds` and the first
/// batch, then chunks, encodes and copies the rest as they come. The inner error is the
/// engine's ([`grouper_core::GrouperError::OutsidePlan`]: rerun on the collected input).
async fn run_streamed(
    query: GpuQuery,
    source: &Arc<dyn ExecutionPlan>,
    bounds: Vec<ColumnBounds>,
    rows: Option<u64>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
) -> Result<grouper_core::Result<grouper_gpu::GpuOutput>> {
    let parts = source.output_partitioning().partition_count();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<RecordBatch>>(4 * parts.max(1));
    for p in 0..parts {
        let mut stream = source.execute(p, Arc::clone(context))?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(b) = stream.next().await {
                if tx.send(b).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let first = match rx.recv().await {
        Some(b) => vec![b?],
        None => Vec::new(),
    };
    let opts = engine.gpu.clone();
    let (out, scan_error) = tokio::task::spawn_blocking(move || {
        let mut scan_error = None;
        let mut next = || match rx.blocking_recv()? {
            Ok(b) => Some(Ok(b)),
            Err(e) => {
                let why = e.to_string();
                scan_error = Some(e);
                Some(Err(grouper_core::GrouperError::InvalidInput(why)))
            }
        };
        let out = Prepared::streaming(&query, &first, &bounds, rows, &opts)
            .and_then(|mut p| p.run_stream(first, &mut next));
        (out, scan_error)
    })
    .await
    .map_err(external)?;
    match scan_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Co-processing: the fused source's batches chunked once; the GPU and CPU workers (running
/// DataFusion's filter and projections over a [`QueueSourceExec`] in place of the source) take
/// chunks from one [`ChunkQueue`]; their partial groups merge. Returns the result columns, its
/// rows and what ran.
async fn run_hybrid(
    query: GpuQuery,
    input: &Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
) -> Result<(Vec<arrow::array::ArrayRef>, usize, Ran)> {
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
        ..engine.gpu.clone()
    };
    let shared = Arc::clone(&batches);
    let mut prepared = tokio::task::spawn_blocking(move || Prepared::new(&query, &shared, &opts))
        .await
        .map_err(external)?
        .map_err(external)?;
    let queue = Arc::new(ChunkQueue::new(prepared.chunk_rows(), engine.hybrid_split));
    let pieces: Vec<Vec<grouper_gpu::Piece>> = (0..queue.chunks())
        .map(|i| prepared.chunk_pieces(i).to_vec())
        .collect();
    let leaf: Arc<dyn ExecutionPlan> = Arc::new(QueueSourceExec::new(
        source.schema(),
        Arc::clone(&batches),
        Arc::new(pieces),
        Arc::clone(&queue),
        engine.pool.current_num_threads(),
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
    let (cpu_part, decision) = run_cpu_with(cpu_input, plan, engine, context, baseline, |a, w| {
        a.finish_partial(w)
    })
    .await?;
    let (gpu_part, report) = gpu.await.map_err(external)?.map_err(external)?;
    let (columns, rows) = cpu_part
        .merge(gpu_part, &plan.spec.key_types)
        .and_then(|m| m.finalize())
        .map_err(external)?;
    Ok((
        columns,
        rows,
        Ran::Hybrid(report, queue.cpu_share(), decision, queue.chunks()),
    ))
}

/// Streams every partition of `input` through CPU workers and merges them.
async fn run_cpu(
    input: Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
) -> Result<grouper_core::AggregateOutput> {
    run_cpu_with(input, plan, engine, context, baseline, |agg, workers| {
        agg.finish(workers)
    })
    .await
}

/// What `input`'s statistics (DataFusion's, from Parquet footers or in-memory tables) say of
/// the rows and of the distinct keys: the product of the key columns' distinct counts, when
/// every key is a plain column that has one.
fn statistics_hints(input: &Arc<dyn ExecutionPlan>, plan: &GroupByPlan) -> Hints {
    let Ok(stats) = datafusion::physical_plan::StatisticsContext::new().compute(
        input.as_ref(),
        &datafusion::physical_plan::StatisticsArgs::new(),
    ) else {
        return Hints::default();
    };
    let distinct = plan.keys.iter().try_fold(1u64, |acc, (e, _)| {
        let col = e.downcast_ref::<Column>()?;
        let d = *stats
            .column_statistics
            .get(col.index())?
            .distinct_count
            .get_value()?;
        Some(acc.saturating_mul(d as u64))
    });
    Hints {
        rows: stats.num_rows.get_value().map(|&r| r as u64),
        distinct: distinct.filter(|_| !plan.keys.is_empty()),
    }
}

/// Streams every partition of `input` through CPU workers; `finish` merges them.
pub(crate) async fn run_cpu_with<T: Send + 'static>(
    input: Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
    finish: impl FnOnce(&grouper_core::Aggregation, Vec<grouper_core::Worker>) -> grouper_core::Result<T>
        + Send
        + 'static,
) -> Result<T> {
    let agg = grouper_core::Aggregation::informed(
        plan.spec.clone(),
        engine.overrides,
        statistics_hints(&input, plan),
        engine.cpu_profile.clone(),
    )
    .map_err(external)?;
    let parts = input.output_partitioning().partition_count();
    let mut tasks = Vec::with_capacity(parts);
    for p in 0..parts {
        let mut stream = input.execute(p, Arc::clone(context))?;
        let plan = Arc::clone(plan);
        let mut worker = agg.worker();
        let compute = baseline.elapsed_compute().clone();
        let reservation =
            MemoryConsumer::new(format!("GroupByExec[{p}]")).register(context.memory_pool());
        tasks.push(tokio::spawn(async move {
            while let Some(batch) = stream.next().await {
                let batch = evaluate(&batch?, &plan)?;
                let _timer = compute.timer();
                worker.push(&batch).map_err(external)?;
                reservation
                    .try_resize(worker.memory_bytes())
                    .map_err(over_budget)?;
            }
            Ok::<_, DataFusionError>((worker, reservation))
        }));
    }
    let mut workers = Vec::with_capacity(parts);
    let mut reservations = Vec::with_capacity(parts);
    for t in tasks {
        let (w, r) = t.await.map_err(external)??;
        workers.push(w);
        reservations.push(r);
    }
    let timer = baseline.elapsed_compute().timer();
    let pool = Arc::clone(&engine.pool);
    let out = tokio::task::spawn_blocking(move || pool.install(|| finish(&agg, workers)))
        .await
        .map_err(external)?
        .map_err(external)?;
    timer.done();
    drop(reservations);
    Ok(out)
}

/// The error for a memory reservation the session's pool refused.
fn over_budget(e: DataFusionError) -> DataFusionError {
    DataFusionError::ResourcesExhausted(format!(
        "memory limit exceeded: grouper's aggregation state outgrew the session's memory budget (raise --memory-limit): {e}"
    ))
}

/// Every batch of every partition of `source`, with the memory they hold reserved from the
/// session's pool; with `evaluate_for`, each batch becomes the plan's evaluated keys and
/// arguments (the GPU's unfused input).
async fn collect(
    source: &Arc<dyn ExecutionPlan>,
    context: &Arc<TaskContext>,
    evaluate_for: Option<Arc<GroupByPlan>>,
) -> Result<(Vec<RecordBatch>, Vec<MemoryReservation>)> {
    let parts = source.output_partitioning().partition_count();
    let mut tasks = Vec::with_capacity(parts);
    for p in 0..parts {
        let mut stream = source.execute(p, Arc::clone(context))?;
        let plan = evaluate_for.clone();
        let reservation = MemoryConsumer::new(format!("GroupByExec[{p}] (GPU input)"))
            .register(context.memory_pool());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                let batch = match &plan {
                    None => batch,
                    Some(plan) => evaluated_batch(&batch, plan)?,
                };
                reservation
                    .try_grow(batch.get_array_memory_size())
                    .map_err(over_budget)?;
                out.push(batch);
            }
            Ok::<_, DataFusionError>((out, reservation))
        }));
    }
    let mut all = Vec::new();
    let mut held = Vec::with_capacity(parts);
    for t in tasks {
        let (batches, r) = t.await.map_err(external)??;
        all.extend(batches);
        held.push(r);
    }
    Ok((all, held))
}

/// Keys, then the arguments of aggregates that have one, as one record batch.
fn evaluated_batch(batch: &RecordBatch, plan: &GroupByPlan) -> Result<RecordBatch> {
    let b = evaluate(batch, plan)?;
    let columns: Vec<arrow::array::ArrayRef> = b
        .keys
        .iter()
        .cloned()
        .chain(b.args.iter().flatten().cloned())
        .collect();
    let fields: Vec<arrow::datatypes::Field> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| arrow::datatypes::Field::new(format!("c{i}"), c.data_type().clone(), true))
        .collect();
    Ok(RecordBatch::try_new_with_options(
        Arc::new(arrow::datatypes::Schema::new(fields)),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// Evaluates the key and argument expressions of one input batch.
fn evaluate(batch: &RecordBatch, plan: &GroupByPlan) -> Result<InputBatch> {
    let rows = batch.num_rows();
    let keys = plan
        .keys
        .iter()
        .map(|(e, _)| e.evaluate(batch)?.into_array(rows))
        .collect::<Result<Vec<_>>>()?;
    let args = plan
        .args
        .iter()
        .map(|a| {
            a.as_ref()
                .map(|e| e.evaluate(batch)?.into_array(rows))
                .transpose()
        })
        .collect::<Result<Vec<_>>>()?;
    InputBatch::try_new(&plan.spec, keys, args, rows)
        .map_err(|e| DataFusionError::External(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use arrow::array::{Date32Array, Decimal128Array, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::prelude::ParquetReadOptions;

    use super::*;
    use crate::{Backend, GrouperConfig};

    fn find_group_by(plan: &Arc<dyn ExecutionPlan>) -> Option<&GroupByExec> {
        plan.downcast_ref::<GroupByExec>()
            .or_else(|| plan.children().into_iter().find_map(find_group_by))
    }

    /// A Parquet footer's min/max and null counts become the bounds a GPU stream is planned
    /// from: ordinals in the column's own type (unscaled decimals, day numbers), NULLs only
    /// where counted, nothing for strings.
    #[tokio::test]
    async fn parquet_statistics_become_stream_bounds() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int32, false),
            Field::new("s", DataType::Utf8, false),
            Field::new("d", DataType::Decimal128(15, 2), true),
            Field::new("dt", DataType::Date32, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int32Array::from(vec![7, -3, 12, 5])),
                Arc::new(StringArray::from(vec!["a", "b", "a", "c"])),
                Arc::new(
                    Decimal128Array::from(vec![Some(150), None, Some(-25), Some(9999)])
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                ),
                Arc::new(Date32Array::from(vec![100, 90, 250, 180])),
            ],
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("grouper-bounds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.parquet");
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        // Not the CPU backend: the rule fuses only where a GPU may run (planned, not run).
        let ctx = crate::session_context(&GrouperConfig {
            backend: Backend::Auto,
            ..Default::default()
        })
        .unwrap();
        ctx.register_parquet(
            "t",
            path.to_string_lossy().as_ref(),
            ParquetReadOptions::default(),
        )
        .await
        .unwrap();
        let sql = "SELECT s, k, sum(d) FROM t WHERE dt <= DATE '1970-08-01' GROUP BY s, k";
        let plan = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let fused = find_group_by(&plan)
            .and_then(|g| g.group_by().fused.as_ref())
            .expect("a fused GroupByExec");
        let query = GpuQuery {
            columns: fused.columns.clone(),
            filter: fused.filter.clone(),
            keys: fused.keys.clone(),
            aggregates: vec![],
        };
        let (bounds, rows) = stream_bounds(&fused.source, &query).expect("streams");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(rows, Some(4));
        let names: Vec<String> = fused
            .source
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let of = |n: &str| &bounds[names.iter().position(|x| x == n).unwrap()];
        assert_eq!(of("k").range, Some((-3, 12)));
        assert!(!of("k").may_null);
        assert_eq!(of("s").range, None);
        assert_eq!(of("d").range, Some((-25, 9999)));
        assert!(of("d").may_null);
        assert_eq!(of("dt").range, Some((90, 250)));
    }
}
