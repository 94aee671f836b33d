//! The fused pipeline on the CPU: where the filter and projections below an aggregate translate
//! into the IR ([`crate::fuse`]), the CPU workers read the scan's batches themselves and
//! evaluate the filter as a selection vector and the arguments as one vectorised
//! [`Program`] (common subexpressions once, decimals in 64 bits), instead of DataFusion's
//! `FilterExec` copying every column and its `ProjectionExec` computing in 128-bit decimals.
//!
//! ```text
//!   scan batch ──filter (Arrow comparison kernels)──> selection (row indices)
//!              ──keys: Arrow's filter of the key columns only
//!              ──Program over the selected rows────> arguments ──> Worker::push
//!                (a decimal SUM or AVG gets 64-bit lanes while its values fit)
//! ```

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use grouper_core::expr::select::{fully_vectorised, selection};
use grouper_core::expr::vector::{Program, Scratch, Selection};
use grouper_core::expr::Expr;
use grouper_core::{InputBatch, QuerySpec};

use super::external;
use crate::group_by::GroupByPlan;

/// How the CPU reads a fused aggregate's input.
#[derive(Debug)]
pub(crate) struct CpuFusion {
    /// The node whose batches the workers read (below the absorbed filter and projections).
    pub(crate) source: Arc<dyn ExecutionPlan>,
    filter: Option<Expr>,
    keys: Vec<usize>,
    program: Program,
    spec: QuerySpec,
    /// What the source reads in another form ([`super::fused_scan`]), as `--explain` says it.
    read: String,
}

impl CpuFusion {
    /// The CPU's fused form of `plan` over `input`, or `None` where it would not help or not
    /// be exact: nothing absorbed, a filter or an argument without a vectorised form, or a
    /// source with fewer partitions than `input` (the repartition between gave the workers
    /// their parallelism).
    pub(crate) fn new(plan: &GroupByPlan, input: &Arc<dyn ExecutionPlan>) -> Option<Self> {
        let fused = plan.fused.as_ref()?;
        if Arc::ptr_eq(&fused.source, input)
            || fused.source.output_partitioning().partition_count()
                < input.output_partitioning().partition_count()
        {
            return None;
        }
        if fused.filter.as_ref().is_some_and(|f| !fully_vectorised(f)) {
            return None;
        }
        let args: Vec<Option<&Expr>> = fused.args.iter().map(Option::as_ref).collect();
        let lanes: Vec<bool> = plan
            .spec
            .aggregates
            .iter()
            .map(|a| a.lanes_type().is_some())
            .collect();
        let program = Program::compile_with_lanes(&args, &lanes)?;
        Some(Self {
            source: Arc::clone(&fused.source),
            filter: fused.filter.clone(),
            keys: fused.keys.clone(),
            program,
            spec: plan.spec.clone(),
            read: String::new(),
        })
    }

    /// The source columns the workers read only as the program's 64-bit lanes (no filter, key
    /// or passed-through argument reads them): a scan may produce its decimals among them as
    /// `Decimal64` ([`super::fused_scan`]).
    pub(crate) fn lane_only_columns(&self) -> Vec<usize> {
        let elsewhere = self.columns_read(true);
        let mut lanes = self.program.lane_columns();
        lanes.retain(|c| !elsewhere.contains(c));
        lanes
    }

    /// The source columns the workers read only as group keys (no filter or argument reads
    /// them): a scan may produce its strings among them dictionary-encoded
    /// ([`super::fused_scan`]), which only the key codec reads.
    pub(crate) fn key_only_columns(&self) -> Vec<usize> {
        let elsewhere = self.columns_read(false);
        let mut keys = self.keys.clone();
        keys.retain(|c| !elsewhere.contains(c));
        keys
    }

    /// The source columns the filter reads, with the keys' (`keys`) or the program's.
    fn columns_read(&self, keys: bool) -> Vec<usize> {
        let mut read = match keys {
            true => self.keys.clone(),
            false => self.program.source_columns(),
        };
        if let Some(f) = &self.filter {
            f.columns(&mut read);
        }
        read
    }

    /// The same fusion over `source` (the same columns, in the same order), which reads some
    /// of them in another form, as `read` says.
    pub(crate) fn over(self, source: Arc<dyn ExecutionPlan>, read: String) -> Self {
        Self {
            source,
            read,
            ..self
        }
    }

    /// The source column each group key is.
    pub(crate) fn key_columns(&self) -> &[usize] {
        &self.keys
    }

    /// What `--explain` says of the fusion.
    pub(crate) fn describe(&self) -> String {
        let narrowed = match self.read.is_empty() {
            true => String::new(),
            false => format!(" ({})", self.read),
        };
        format!(
            "fused: {}{} nodes over {}{narrowed}",
            if self.filter.is_some() {
                "filter + "
            } else {
                ""
            },
            self.program.node_count(),
            self.source.name()
        )
    }

    /// The keys and arguments of the rows of `batch` the filter keeps; `None` when it keeps
    /// none. `scratch` is the calling worker's.
    pub(crate) fn evaluate(
        &self,
        scratch: &mut Scratch,
        batch: &RecordBatch,
    ) -> Result<Option<InputBatch>> {
        let rows = batch.num_rows();
        let columns = batch.columns();
        let sel = match &self.filter {
            None => None,
            Some(f) => {
                let keep = selection(f, columns, rows).map_err(external)?;
                match keep.true_count() {
                    0 => return Ok(None),
                    n if n == rows => None,
                    _ => Some(Selection::new(&keep)),
                }
            }
        };
        let kept = sel.as_ref().map_or(rows, Selection::len);
        let keys = self
            .keys
            .iter()
            .map(|&k| {
                let c = columns.get(k).ok_or_else(|| {
                    DataFusionError::Internal(format!("fused key column {k} missing"))
                })?;
                Ok(match &sel {
                    None => Arc::clone(c),
                    Some(s) => s.predicate.filter(c)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let args = self
            .program
            .run(scratch, columns, sel.as_ref(), rows)
            .map_err(external)?;
        InputBatch::try_new(&self.spec, keys, args, kept)
            .map(Some)
            .map_err(external)
    }
}
