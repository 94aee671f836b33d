//! [`GroupByExec`]: grouper's aggregation as a DataFusion `ExecutionPlan`.
//!
//! ```text
//!   GroupByExec (1 output partition, schema = what DataFusion planned for the aggregate)
//!     └─ input: every partition pulled by its own task, each with a grouper_core::Worker;
//!               keys and arguments are evaluated and folded in as batches arrive (streaming:
//!               nothing is materialised for `perfect` and `thread_local`)
//!   then: Aggregation::finish (merge) on the rayon pool, result sliced to batch_size
//!         (spilled: merged and emitted partition by partition)
//! ```
//!
//! The node replaces DataFusion's Partial + Final pair (or Single) whole: grouper does its own
//! parallelism, so there is no repartition between phases. Each execution picks its route
//! ([`crate::backend::Route::choose`]: CPU, GPU or co-processing) and runs it
//! ([`crate::backend::run`]), falling back to the CPU where `auto` allows.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::fmt;
use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::{StreamExt, TryStreamExt};
use grouper_core::partial::state_types;
use grouper_core::planner::Decision;
#[cfg(feature = "gpu")]
use grouper_gpu::GpuReport;

use crate::backend::{self, Output, Ran, Route};
use crate::config::Engine;
use crate::group_by::{wire_type, GroupByPlan};

/// What a [`GroupByExec`] computes of its aggregation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// All of it: DataFusion's Partial + Final pair (or Single) in one node, with grouper's
    /// own parallelism.
    Whole,
    /// The partial groups of its input: keys, then each aggregate's state (the algebra's
    /// `save`), for a [`crate::merge::MergeExec`] after a shuffle (distributed plans).
    Partial,
}

/// grouper's `GROUP BY` operator inside a DataFusion plan.
#[derive(Debug)]
pub struct GroupByExec {
    input: Arc<dyn ExecutionPlan>,
    phase: Phase,
    plan: Arc<GroupByPlan>,
    schema: SchemaRef,
    engine: Arc<Engine>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    ran: Arc<Mutex<Option<Ran>>>,
    /// Output partitions: each takes a share of the one result's rows.
    outputs: usize,
    /// The aggregation run the output partitions share, and how many took it so far (the
    /// last one clears it, so a later execution runs afresh).
    run: Arc<Mutex<Option<(Run, usize)>>>,
}

/// The one aggregation run every output partition awaits.
type Run = Shared<BoxFuture<'static, std::result::Result<Arc<Ready>, Arc<DataFusionError>>>>;

/// A finished run: the result's parts (each with every column) and its rows, which each
/// partition slices its share of rows from, or the spilled groups (streamed by partition 0
/// alone).
enum Ready {
    Parts(Vec<Vec<ArrayRef>>, usize),
    Spilled(Mutex<Option<Box<crate::backend::spill::SpilledGroups>>>),
}

impl GroupByExec {
    /// A node computing `plan` over `input`, producing `schema` (DataFusion's planned schema),
    /// run as `engine` says.
    ///
    /// The result leaves in `outputs` partitions, each a share of its rows, so the operators
    /// above (a HAVING filter, the repartition a partitioned parent needs) run on as many
    /// threads: with one partition, TPC-H Q18's 15M groups were hash-repartitioned and
    /// filtered by one task (the subquery 0.55 s against DataFusion's 0.26 s on 16 threads).
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        plan: Arc<GroupByPlan>,
        schema: SchemaRef,
        engine: Arc<Engine>,
        outputs: usize,
    ) -> Self {
        let outputs = outputs.max(1);
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(outputs),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            input,
            phase: Phase::Whole,
            plan,
            schema,
            engine,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
            ran: Arc::new(Mutex::new(None)),
            outputs,
            run: Arc::new(Mutex::new(None)),
        }
    }

    /// A node computing the partial groups of `plan` over `input` (the schema: the keys under
    /// their names, then each aggregate's state columns), in `outputs` partitions.
    pub fn partial(
        input: Arc<dyn ExecutionPlan>,
        plan: Arc<GroupByPlan>,
        engine: Arc<Engine>,
        outputs: usize,
    ) -> Result<Self> {
        let schema = partial_schema(&plan)?;
        Ok(Self {
            phase: Phase::Partial,
            ..Self::new(input, plan, schema, engine, outputs)
        })
    }

    /// What the node computes of its aggregation.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Output partitions (shares of the one result).
    pub fn output_partitions(&self) -> usize {
        self.outputs
    }

    /// Starts the aggregation all output partitions share: what `backend::run` makes of the
    /// input (CPU, GPU or both), recorded in `ran` for `--explain`.
    fn start(&self, context: Arc<TaskContext>) -> Result<Run> {
        let route = Route::choose(&self.engine, &self.plan)?;
        let baseline = BaselineMetrics::new(&self.metrics, 0);
        let plan = Arc::clone(&self.plan);
        let engine = Arc::clone(&self.engine);
        let ran = Arc::clone(&self.ran);
        let input = Arc::clone(&self.input);
        let phase = self.phase;
        let run = async move {
            let (out, what) = match phase {
                Phase::Whole => {
                    backend::run(route, input, &plan, &engine, &context, &baseline).await
                }
                Phase::Partial => {
                    backend::run_partial(route, input, &plan, &engine, &context, &baseline).await
                }
            }
            .map_err(Arc::new)?;
            if let Ok(mut r) = ran.lock() {
                *r = Some(what);
            }
            Ok(Arc::new(match out {
                Output::Parts(parts, rows) => Ready::Parts(parts, rows),
                Output::Spilled(s) => Ready::Spilled(Mutex::new(Some(s))),
            }))
        };
        Ok(run.boxed().shared())
    }

    /// What the node computes (keys, arguments, the fused form when there is one).
    pub fn group_by(&self) -> &GroupByPlan {
        &self.plan
    }

    /// The CPU planner's decision from the last execution, if it ran on the CPU.
    pub fn last_decision(&self) -> Option<Decision> {
        match self.ran.lock().ok()?.clone()? {
            Ran::Cpu(d, ..) => d,
            #[cfg(feature = "gpu")]
            Ran::Hybrid(_, _, d, _) => d,
            #[cfg(feature = "gpu")]
            Ran::Gpu(..) => None,
        }
    }

    /// The GPU report of the last execution, if it ran on the GPU.
    #[cfg(feature = "gpu")]
    pub fn last_gpu_report(&self) -> Option<GpuReport> {
        match self.ran.lock().ok()?.clone()? {
            Ran::Gpu(r, _) => Some(r),
            Ran::Hybrid(r, ..) => Some(*r),
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
                origin: self.plan.origin.clone(),
            })
        };
        Self {
            phase: self.phase,
            ..Self::new(
                input,
                plan,
                Arc::clone(&self.schema),
                Arc::clone(&self.engine),
                self.outputs,
            )
        }
    }
}

/// The schema of a partial phase's output: the keys under their names and types, then each
/// aggregate's state columns (`name[j]`), all nullable.
fn partial_schema(plan: &GroupByPlan) -> Result<SchemaRef> {
    let states = state_types(&plan.spec).map_err(backend::external)?;
    let keys = plan
        .keys
        .iter()
        .zip(&plan.spec.key_types)
        .map(|((_, name), t)| Field::new(name, t.clone(), true));
    let states = plan.agg_names.iter().zip(states).flat_map(|(name, types)| {
        types
            .into_iter()
            .enumerate()
            .map(move |(j, t)| Field::new(format!("{name}[{j}]"), wire_type(&t), true))
    });
    Ok(Arc::new(Schema::new(
        keys.chain(states).collect::<Vec<_>>(),
    )))
}

/// Result columns as batches of at most `batch_size` rows (counted as output). No rows, no
/// batch: DataFusion's own aggregation emits none, and operators above may not expect an empty
/// one (a HAVING after DataFusion's DISTINCT rewrite compares mismatched decimal types on any
/// batch, found by difftest).
pub(crate) fn slices(
    schema: &SchemaRef,
    columns: Vec<ArrayRef>,
    rows: usize,
    batch_size: usize,
    baseline: &BaselineMetrics,
) -> Vec<Result<RecordBatch>> {
    let batch = if columns.is_empty() {
        RecordBatch::try_new_with_options(
            Arc::clone(schema),
            vec![],
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )
    } else {
        RecordBatch::try_new(Arc::clone(schema), columns)
    };
    let batch = match batch {
        Ok(b) => b,
        Err(e) => return vec![Err(e.into())],
    };
    baseline.record_output(batch.num_rows());
    (0..batch.num_rows())
        .step_by(batch_size.max(1))
        .map(|off| Ok(batch.slice(off, batch_size.min(batch.num_rows() - off))))
        .collect()
}

/// The rows `range` of a result in `parts` (of `rows` rows in all), as slices of the parts
/// it spans with their row counts. A part without columns (no keys, no aggregates) counts
/// as all of `rows`.
fn share(
    parts: &[Vec<ArrayRef>],
    rows: usize,
    range: std::ops::Range<usize>,
) -> Vec<(Vec<ArrayRef>, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for part in parts {
        let len = part.first().map_or(rows, |c| c.len());
        let (lo, hi) = (range.start.max(start), range.end.min(start + len));
        if lo < hi {
            let cols = part.iter().map(|c| c.slice(lo - start, hi - lo)).collect();
            out.push((cols, hi - lo));
        }
        start += len;
    }
    out
}

/// Spilled groups merged partition by partition, one wave per step on a blocking thread.
fn waves(
    spilled: Box<crate::backend::spill::SpilledGroups>,
    schema: SchemaRef,
    batch_size: usize,
    baseline: BaselineMetrics,
) -> futures::stream::BoxStream<'static, Result<RecordBatch>> {
    futures::stream::try_unfold(Some(spilled), move |state| {
        let (schema, baseline) = (Arc::clone(&schema), baseline.clone());
        async move {
            let Some(mut s) = state else {
                return Ok::<_, DataFusionError>(None);
            };
            let (next, s) = tokio::task::spawn_blocking(move || (s.next_wave(), s))
                .await
                .map_err(backend::external)?;
            Ok(next?.map(|wave| {
                let out: Vec<Result<RecordBatch>> = wave
                    .into_iter()
                    .flat_map(|(columns, rows)| {
                        slices(&schema, columns, rows, batch_size, &baseline)
                    })
                    .collect();
                (futures::stream::iter(out), Some(s))
            }))
        }
    })
    .try_flatten()
    .boxed()
}

impl DisplayAs for GroupByExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<&str> = self.plan.keys.iter().map(|(_, n)| n.as_str()).collect();
        write!(
            f,
            "GroupByExec: {}gby=[{}], aggr=[{}]",
            if self.phase == Phase::Partial {
                "phase=partial, "
            } else {
                ""
            },
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
            Some(ran) => write!(f, ", {ran}"),
            None => write!(f, ", backend={}", self.engine.backend),
        }
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
        if partition >= self.outputs {
            return Err(DataFusionError::Internal(format!(
                "GroupByExec has {} partitions, asked for {partition}",
                self.outputs
            )));
        }
        let run = {
            let mut slot = self.run.lock().map_err(|_| {
                DataFusionError::Internal("GroupByExec's shared run was poisoned".into())
            })?;
            let run = match slot.as_mut() {
                Some((run, taken)) => {
                    *taken += 1;
                    run.clone()
                }
                None => {
                    let run = self.start(Arc::clone(&context))?;
                    *slot = Some((run.clone(), 1));
                    run
                }
            };
            if slot
                .as_ref()
                .is_some_and(|(_, taken)| *taken >= self.outputs)
            {
                *slot = None;
            }
            run
        };
        let batch_size = context.session_config().batch_size();
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let schema = Arc::clone(&self.schema);
        let outputs = self.outputs;
        let result = async move {
            let ready = run.await.map_err(DataFusionError::Shared)?;
            Ok::<_, DataFusionError>(match &*ready {
                Ready::Parts(parts, rows) => {
                    let lo = rows * partition / outputs;
                    let hi = rows * (partition + 1) / outputs;
                    let slices = share(parts, *rows, lo..hi)
                        .into_iter()
                        .flat_map(|(cols, n)| slices(&schema, cols, n, batch_size, &baseline))
                        .collect::<Vec<_>>();
                    futures::stream::iter(slices).boxed()
                }
                Ready::Spilled(spilled) => {
                    let spilled = spilled.lock().ok().and_then(|mut s| s.take());
                    match spilled {
                        Some(spilled) => waves(spilled, schema, batch_size, baseline),
                        None => futures::stream::empty().boxed(),
                    }
                }
            })
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

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::catalog::MemTable;
    use datafusion::physical_plan::{collect, ExecutionPlanProperties};

    use super::*;
    use crate::test_support::answer_lines;
    use crate::{Backend, GrouperConfig};

    #[test]
    fn shares_of_parts_cover_each_row_once_in_order() {
        // Parts of 3, 0, 5 and 2 rows (two columns each): every split of the 10 rows into
        // consecutive shares gives them back in order, slices spanning part boundaries.
        let lens = [3usize, 0, 5, 2];
        let mut next = 0i64;
        let parts: Vec<Vec<ArrayRef>> = lens
            .iter()
            .map(|&n| {
                let v: Vec<i64> = (next..next + n as i64).collect();
                next += n as i64;
                let a: ArrayRef = Arc::new(Int64Array::from(v.clone()));
                let b: ArrayRef = Arc::new(Int64Array::from_iter_values(v.iter().map(|x| -x)));
                vec![a, b]
            })
            .collect();
        for outputs in 1..=11 {
            let mut seen = Vec::new();
            for p in 0..outputs {
                let range = 10 * p / outputs..10 * (p + 1) / outputs;
                let mut n = 0;
                for (cols, rows) in share(&parts, 10, range.clone()) {
                    assert!(rows > 0);
                    assert_eq!(cols.len(), 2);
                    let a = cols[0].as_any().downcast_ref::<Int64Array>().unwrap();
                    let b = cols[1].as_any().downcast_ref::<Int64Array>().unwrap();
                    assert_eq!((a.len(), b.len()), (rows, rows));
                    for i in 0..rows {
                        assert_eq!(b.value(i), -a.value(i));
                        seen.push(a.value(i));
                    }
                    n += rows;
                }
                assert_eq!(n, range.len());
            }
            assert_eq!(seen, (0..10).collect::<Vec<_>>(), "{outputs} outputs");
        }
        // No columns (no keys, no aggregates): one part counts all rows.
        assert_eq!(share(&[vec![]], 1, 0..1).len(), 1);
        assert!(share(&[vec![]], 1, 1..1).is_empty());
    }

    fn find(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
        if plan.downcast_ref::<GroupByExec>().is_some() {
            return Some(Arc::clone(plan));
        }
        plan.children().into_iter().find_map(find)
    }

    #[tokio::test]
    async fn every_output_partition_takes_a_share_of_one_run() {
        // 50k rows into 10k groups over 4 partitions: DataFusion's final aggregation was
        // hash-partitioned 4 ways, so grouper's result leaves in 4 shares of one run.
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
        ]));
        let parts = (0..4i64)
            .map(|p| {
                let rows = (p * 12_500)..((p + 1) * 12_500);
                vec![RecordBatch::try_new(
                    Arc::clone(&schema),
                    vec![
                        Arc::new(Int64Array::from_iter_values(
                            rows.clone().map(|r| r * 7 % 10_000),
                        )),
                        Arc::new(Int64Array::from_iter_values(rows)),
                    ],
                )
                .unwrap()]
            })
            .collect();
        let table = Arc::new(MemTable::try_new(schema, parts).unwrap());
        let sql = "SELECT k, sum(v) AS s FROM t GROUP BY k";
        let config = GrouperConfig {
            backend: Backend::Cpu,
            threads: Some(4),
            ..Default::default()
        };
        let ctx = crate::session_context(&config).unwrap();
        ctx.register_table("t", Arc::clone(&table) as _).unwrap();
        let plan = crate::test_support::physical_plan(&ctx, sql).await;
        let node = find(&plan).expect("a GroupByExec");
        assert_eq!(node.output_partitioning().partition_count(), 4);
        let mut shares = Vec::new();
        for p in 0..4 {
            let batches = datafusion::physical_plan::common::collect(
                node.execute(p, ctx.task_ctx()).unwrap(),
            )
            .await
            .unwrap();
            shares.push(batches.iter().map(RecordBatch::num_rows).sum::<usize>());
        }
        assert_eq!(shares.iter().sum::<usize>(), 10_000, "{shares:?}");
        assert!(shares.iter().all(|&n| n == 2_500), "{shares:?}");
        assert!(node.execute(4, ctx.task_ctx()).is_err());
        // The whole plan (made again: DataFusion's repartitions below run once a plan) answers
        // as DataFusion does.
        let df = crate::session_context(&GrouperConfig {
            backend: Backend::DataFusion,
            ..config.clone()
        })
        .unwrap();
        df.register_table("t", table as _).unwrap();
        let want = answer_lines(&df.sql(sql).await.unwrap().collect().await.unwrap(), false);
        let plan = crate::test_support::physical_plan(&ctx, sql).await;
        assert_eq!(above_group_by(&plan).as_deref(), Some("ProjectionExec"));
        let got = collect(plan, ctx.task_ctx()).await.unwrap();
        assert_eq!(answer_lines(&got, false), want);
        // DataFusion's two-level plan for COUNT(DISTINCT): the outer GroupByExec takes the
        // inner one's output as it is, with no repartition between or above them.
        let distinct = "SELECT k, count(DISTINCT v) AS d FROM t GROUP BY k";
        let plan = crate::test_support::physical_plan(&ctx, distinct).await;
        let shown = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(true)
            .to_string();
        assert_eq!(shown.matches("GroupByExec").count(), 2, "{shown}");
        assert!(!shown.contains("RepartitionExec"), "{shown}");
        let want = answer_lines(
            &df.sql(distinct).await.unwrap().collect().await.unwrap(),
            false,
        );
        let got = collect(plan, ctx.task_ctx()).await.unwrap();
        assert_eq!(answer_lines(&got, false), want);
        // A partitioned join relies on the hash partitioning the replaced aggregation had: the
        // repartition stays, and the answer is DataFusion's.
        let sql = "SELECT t.k, t.v, g.s FROM t JOIN (SELECT k, sum(v) AS s FROM t GROUP BY k) g \
                   ON t.k = g.k";
        for c in [&ctx, &df] {
            for o in ["", "_rows"] {
                let set =
                    format!("SET datafusion.optimizer.hash_join_single_partition_threshold{o} = 0");
                c.sql(&set).await.unwrap();
            }
        }
        let plan = crate::test_support::physical_plan(&ctx, sql).await;
        assert_eq!(above_group_by(&plan).as_deref(), Some("RepartitionExec"));
        let want = answer_lines(&df.sql(sql).await.unwrap().collect().await.unwrap(), false);
        let got = collect(plan, ctx.task_ctx()).await.unwrap();
        assert_eq!(answer_lines(&got, false), want);
    }

    /// The name of the node whose child is the plan's GroupByExec.
    fn above_group_by(plan: &Arc<dyn ExecutionPlan>) -> Option<String> {
        plan.children().into_iter().find_map(|c| {
            if c.downcast_ref::<GroupByExec>().is_some() {
                Some(plan.name().to_string())
            } else {
                above_group_by(c)
            }
        })
    }
}
