//! [`TopPerGroupExec`]: the window's input sort replaced by a selection of each group's best
//! `n` rows ([`super::select::Selection`]), emitted in the order the sort would have given
//! them, so the `ROW_NUMBER` window above numbers them as before.

use std::fmt;
use std::sync::Arc;

use arrow::array::{RecordBatch, UInt64Array};
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::windows::BoundedWindowAggExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use futures::StreamExt;

use super::select::Selection;

/// Each group's best `n` rows of every input partition, sorted like the `SortExec` it
/// replaces (its properties, partitioning and ordering are that sort's).
#[derive(Debug)]
pub struct TopPerGroupExec {
    input: Arc<dyn ExecutionPlan>,
    /// The partition keys, as the replaced sort ordered them.
    keys: Vec<PhysicalSortExpr>,
    /// The window's `ORDER BY`.
    order: Vec<PhysicalSortExpr>,
    n: usize,
    /// The `ROW_NUMBER` window's output (the input's columns and the numbers) when this node
    /// numbers the rows itself in the window's place.
    numbered: Option<SchemaRef>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl TopPerGroupExec {
    /// Replaces `sort` (whose first `keys` expressions are the window's partition keys and
    /// the rest its order) by the best `n` rows of each group.
    pub(crate) fn replacing(sort: &SortExec, keys: usize, n: usize) -> Self {
        let exprs: Vec<PhysicalSortExpr> = sort.expr().iter().cloned().collect();
        let (k, o) = exprs.split_at(keys.min(exprs.len()));
        Self {
            input: Arc::clone(sort.input()),
            keys: k.to_vec(),
            order: o.to_vec(),
            n,
            numbered: None,
            properties: Arc::clone(sort.properties()),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The same selection in place of `window` (a `ROW_NUMBER` over it, numbering the same
    /// partitions in the same order): it appends each row's number in its group, which is the
    /// window's column, and takes the window's properties.
    pub(crate) fn numbering(self, window: &BoundedWindowAggExec) -> Self {
        Self {
            numbered: Some(window.schema()),
            properties: Arc::clone(window.properties()),
            ..self
        }
    }

    /// Rows kept per group.
    pub fn n(&self) -> usize {
        self.n
    }
}

impl DisplayAs for TopPerGroupExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let list = |e: &[PhysicalSortExpr]| {
            e.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(
            f,
            "TopPerGroupExec: n={}, partition=[{}], order=[{}]{}",
            self.n,
            list(&self.keys),
            list(&self.order),
            if self.numbered.is_some() {
                ", numbered"
            } else {
                ""
            }
        )
    }
}

impl ExecutionPlan for TopPerGroupExec {
    fn name(&self) -> &'static str {
        "TopPerGroupExec"
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
        for e in self.keys.iter().chain(&self.order) {
            if f(&e.expr)? == TreeNodeRecursion::Stop {
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
                "TopPerGroupExec takes exactly one child".into(),
            ));
        }
        Ok(Arc::new(Self {
            input: children.swap_remove(0),
            keys: self.keys.clone(),
            order: self.order.clone(),
            n: self.n,
            numbered: self.numbered.clone(),
            properties: Arc::clone(&self.properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut input = self.input.execute(partition, Arc::clone(&context))?;
        let schema = self.input.schema();
        let mut selection = Selection::new(&schema, &self.keys, &self.order, self.n)?;
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let reservation = MemoryConsumer::new(format!("TopPerGroupExec[{partition}]"))
            .register(context.memory_pool());
        let batch_size = context.session_config().batch_size();
        let out_schema = self.numbered.clone().unwrap_or_else(|| Arc::clone(&schema));
        let stream_schema = Arc::clone(&out_schema);
        let numbered = self.numbered.is_some();
        let stream = futures::stream::once(async move {
            while let Some(batch) = input.next().await {
                let batch = batch?;
                let _timer = baseline.elapsed_compute().timer();
                selection.push(batch)?;
                if reservation.try_resize(selection.memory_bytes()).is_err() {
                    // Retained batches count whole (an in-memory table's slices report their
                    // table's buffers): keep only the candidates' rows and ask again.
                    selection.compact()?;
                    reservation.try_resize(selection.memory_bytes())?;
                }
            }
            let timer = baseline.elapsed_compute().timer();
            let (out, numbers) = selection.finish(&schema)?;
            let out = match numbered {
                false => out,
                true => {
                    let mut columns = out.columns().to_vec();
                    columns.push(Arc::new(UInt64Array::from(numbers)));
                    RecordBatch::try_new(Arc::clone(&out_schema), columns)?
                }
            };
            timer.done();
            baseline.record_output(out.num_rows());
            let slices: Vec<Result<_>> = (0..out.num_rows())
                .step_by(batch_size.max(1))
                .map(|s| Ok(out.slice(s, batch_size.min(out.num_rows() - s))))
                .collect();
            drop(reservation);
            Ok::<_, DataFusionError>(futures::stream::iter(slices))
        })
        .map(|r| match r {
            Ok(s) => s.boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            stream_schema,
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
