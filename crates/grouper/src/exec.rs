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
use arrow::datatypes::SchemaRef;
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
use futures::{StreamExt, TryStreamExt};
use grouper_core::planner::Decision;
#[cfg(feature = "gpu")]
use grouper_gpu::GpuReport;

use crate::backend::{self, Output, Ran, Route};
use crate::config::Engine;
use crate::group_by::GroupByPlan;

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
            Ran::Gpu(r, _) | Ran::Hybrid(r, ..) => Some(r),
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
}

/// Result columns as batches of at most `batch_size` rows (counted as output). No rows, no
/// batch: DataFusion's own aggregation emits none, and operators above may not expect an empty
/// one (a HAVING after DataFusion's DISTINCT rewrite compares mismatched decimal types on any
/// batch, found by difftest).
fn slices(
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
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "GroupByExec has one partition, asked for {partition}"
            )));
        }
        let route = Route::choose(&self.engine, &self.plan)?;
        let batch_size = context.session_config().batch_size();
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let schema = Arc::clone(&self.schema);
        let plan = Arc::clone(&self.plan);
        let engine = Arc::clone(&self.engine);
        let ran = Arc::clone(&self.ran);
        let input = Arc::clone(&self.input);
        let result = async move {
            let (out, what) =
                backend::run(route, input, &plan, &engine, &context, &baseline).await?;
            if let Ok(mut r) = ran.lock() {
                *r = Some(what);
            }
            Ok::<_, DataFusionError>(match out {
                Output::Columns(columns, rows) => {
                    let slices = slices(&schema, columns, rows, batch_size, &baseline);
                    futures::stream::iter(slices).boxed()
                }
                Output::Spilled(spilled) => {
                    // One wave of partitions merged per step, on a blocking thread.
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
