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

use std::fmt;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};
use grouper_core::planner::{Decision, Overrides};
use grouper_core::{InputBatch, QuerySpec};

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
}

/// grouper's `GROUP BY` operator inside a DataFusion plan.
#[derive(Debug)]
pub struct GroupByExec {
    input: Arc<dyn ExecutionPlan>,
    plan: Arc<GroupByPlan>,
    schema: SchemaRef,
    overrides: Overrides,
    pool: Arc<rayon::ThreadPool>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    decision: Arc<Mutex<Option<Decision>>>,
}

impl GroupByExec {
    /// A node computing `plan` over `input`, producing `schema` (DataFusion's planned schema),
    /// with the user's `overrides`, on `pool`.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        plan: Arc<GroupByPlan>,
        schema: SchemaRef,
        overrides: Overrides,
        pool: Arc<rayon::ThreadPool>,
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
            overrides,
            pool,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
            decision: Arc::new(Mutex::new(None)),
        }
    }

    /// The planner's decision from the last execution, if any.
    pub fn last_decision(&self) -> Option<Decision> {
        self.decision.lock().ok().and_then(|d| d.clone())
    }

    fn with_input(&self, input: Arc<dyn ExecutionPlan>) -> Self {
        Self::new(
            input,
            Arc::clone(&self.plan),
            Arc::clone(&self.schema),
            self.overrides,
            Arc::clone(&self.pool),
        )
    }
}

impl DisplayAs for GroupByExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<&str> = self.plan.keys.iter().map(|(_, n)| n.as_str()).collect();
        write!(
            f,
            "GroupByExec: backend=cpu, gby=[{}], aggr=[{}]",
            keys.join(", "),
            self.plan.agg_names.join(", ")
        )?;
        match self.last_decision() {
            Some(d) => write!(f, ", {d}"),
            None => match self.overrides.strategy {
                Some(s) => write!(f, ", strategy={s}"),
                None => write!(f, ", strategy=auto"),
            },
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
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "GroupByExec has one partition, asked for {partition}"
            )));
        }
        let input = Arc::clone(&self.input);
        let plan = Arc::clone(&self.plan);
        let schema = Arc::clone(&self.schema);
        let overrides = self.overrides;
        let pool = Arc::clone(&self.pool);
        let decision = Arc::clone(&self.decision);
        let batch_size = context.session_config().batch_size();
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let out_schema = Arc::clone(&schema);

        let result = async move {
            let agg = grouper_core::Aggregation::new(plan.spec.clone(), overrides)
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            let parts = input.output_partitioning().partition_count();
            let mut tasks = Vec::with_capacity(parts);
            for p in 0..parts {
                let mut stream = input.execute(p, Arc::clone(&context))?;
                let plan = Arc::clone(&plan);
                let mut worker = agg.worker();
                let compute = baseline.elapsed_compute().clone();
                tasks.push(tokio::spawn(async move {
                    while let Some(batch) = stream.next().await {
                        let batch = evaluate(&batch?, &plan)?;
                        let _timer = compute.timer();
                        worker
                            .push(&batch)
                            .map_err(|e| DataFusionError::External(Box::new(e)))?;
                    }
                    Ok::<_, DataFusionError>(worker)
                }));
            }
            let mut workers = Vec::with_capacity(parts);
            for t in tasks {
                workers.push(
                    t.await
                        .map_err(|e| DataFusionError::External(Box::new(e)))??,
                );
            }
            let timer = baseline.elapsed_compute().timer();
            let out = tokio::task::spawn_blocking(move || pool.install(|| agg.finish(workers)))
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))?
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            timer.done();
            if let Ok(mut d) = decision.lock() {
                d.clone_from(&out.decision);
            }
            let batch = if out.columns.is_empty() {
                RecordBatch::try_new_with_options(
                    Arc::clone(&schema),
                    vec![],
                    &arrow::array::RecordBatchOptions::new().with_row_count(Some(out.num_rows)),
                )?
            } else {
                RecordBatch::try_new(Arc::clone(&schema), out.columns)?
            };
            baseline.record_output(batch.num_rows());
            let slices: Vec<Result<RecordBatch>> = (0..batch.num_rows().max(1))
                .step_by(batch_size.max(1))
                .map(|off| Ok(batch.slice(off, batch_size.min(batch.num_rows() - off))))
                .collect();
            Ok::<_, DataFusionError>(futures::stream::iter(slices))
        };
        let stream = futures::stream::once(result).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(out_schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
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
