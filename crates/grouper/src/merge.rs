//! [`MergeExec`]: the final phase of a distributed aggregation. Partial groups (keys and each
//! aggregate's state, from [`crate::exec::GroupByExec`]'s partial phase on the workers) arrive
//! hash-partitioned by key; each output partition merges its input partition's groups with the
//! aggregate algebra's `merge` and finalizes them once, as DataFusion's `FinalPartitioned`
//! aggregation does with its accumulators' states.
//!
//! ```text
//!   MergeExec (partition p: merge_all + finalize of input partition p)
//!     └─ RepartitionExec Hash(keys)   (a network shuffle, distributed)
//!          └─ GroupByExec, partial phase (grouper's CPU strategies, or the GPU)
//! ```
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, ExecutionPlanProperties,
    Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};
use grouper_core::partial::{state_types, PartialGroups};

use crate::backend::external;
use crate::exec::slices;
use crate::group_by::{cast_to, GroupByPlan};

/// Merges partial groups and finalizes them, partition by partition.
#[derive(Debug)]
pub struct MergeExec {
    input: Arc<dyn ExecutionPlan>,
    plan: Arc<GroupByPlan>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl MergeExec {
    /// A node merging `input`'s partial groups of `plan`, producing `schema` (DataFusion's
    /// planned schema of the final aggregation).
    pub fn new(input: Arc<dyn ExecutionPlan>, plan: Arc<GroupByPlan>, schema: SchemaRef) -> Self {
        let n = input.output_partitioning().partition_count();
        let keys = key_columns(&plan);
        // Each partition holds its own keys (its input was hash-partitioned by them), so the
        // output is partitioned as DataFusion's `FinalPartitioned` output is.
        let partitioning = match keys.is_empty() || n <= 1 {
            true => Partitioning::UnknownPartitioning(n),
            false => Partitioning::Hash(keys, n),
        };
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            partitioning,
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            input,
            plan,
            schema,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// What the node merges (the aggregation as the rule translated it).
    pub fn group_by(&self) -> &Arc<GroupByPlan> {
        &self.plan
    }
}

/// The group keys as columns: the first of both the partial groups and the final output.
fn key_columns(plan: &GroupByPlan) -> Vec<Arc<dyn PhysicalExpr>> {
    plan.keys
        .iter()
        .enumerate()
        .map(|(i, (_, name))| Arc::new(Column::new(name, i)) as Arc<dyn PhysicalExpr>)
        .collect()
}

impl DisplayAs for MergeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<&str> = self.plan.keys.iter().map(|(_, n)| n.as_str()).collect();
        write!(
            f,
            "MergeExec: gby=[{}], aggr=[{}]",
            keys.join(", "),
            self.plan.agg_names.join(", ")
        )
    }
}

impl ExecutionPlan for MergeExec {
    fn name(&self) -> &'static str {
        "MergeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        let keys = key_columns(&self.plan);
        vec![match keys.is_empty() {
            true => Distribution::SinglePartition,
            false => Distribution::KeyPartitioned(keys),
        }]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return Err(DataFusionError::Internal(
                "MergeExec takes exactly one child".into(),
            ));
        }
        Ok(Arc::new(Self::new(
            children.swap_remove(0),
            Arc::clone(&self.plan),
            Arc::clone(&self.schema),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, Arc::clone(&context))?;
        let input_schema = self.input.schema();
        let plan = Arc::clone(&self.plan);
        let schema = Arc::clone(&self.schema);
        let batch_size = context.session_config().batch_size().max(1);
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let merged = async move {
            let mut batches: Vec<RecordBatch> = input.try_collect().await?;
            let timer = baseline.elapsed_compute().timer();
            if batches.is_empty() {
                // No groups came: a global aggregate still has its one row (of identities).
                batches.push(RecordBatch::new_empty(input_schema));
            }
            let (columns, rows) = tokio::task::spawn_blocking(move || {
                let types: Vec<DataType> = plan
                    .spec
                    .key_types
                    .iter()
                    .cloned()
                    .chain(
                        state_types(&plan.spec)
                            .map_err(external)?
                            .into_iter()
                            .flatten(),
                    )
                    .collect();
                let parts = batches
                    .iter()
                    .map(|b| {
                        let columns = cast_to(b.columns(), &types)?;
                        PartialGroups::from_columns(&plan.spec, &columns, b.num_rows())
                            .map_err(external)
                    })
                    .collect::<Result<Vec<_>>>()?;
                PartialGroups::merge_all(parts, &plan.spec.key_types)
                    .and_then(PartialGroups::finalize)
                    .map_err(external)
            })
            .await
            .map_err(external)??;
            timer.done();
            let out = slices(&schema, columns, rows, batch_size, &baseline);
            Ok::<_, DataFusionError>(futures::stream::iter(out))
        };
        let stream = futures::stream::once(merged).try_flatten().boxed();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
