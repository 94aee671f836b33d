//! The fused pipeline on the CPU: where the filter and projections below an aggregate translate
//! into the IR ([`crate::fuse`]), the CPU workers read the scan's batches themselves and
//! evaluate the filter as a selection vector and the arguments as one vectorised
//! [`Program`] (common subexpressions once, decimals in 64 bits), instead of DataFusion's
//! `FilterExec` copying every column and its `ProjectionExec` computing in 128-bit decimals.
//!
//! ```text
//!   scan batch ──filter (Arrow comparison kernels)──> selection (row indices)
//!   most rows kept:  keys whole, Program over every row ──> Worker::push_selected
//!                    (the aggregates read the kept rows in place)
//!   else:            keys: Arrow's filter of the key columns only,
//!                    Program over the selected rows ──> arguments ──> Worker::push
//!   (a decimal SUM or AVG gets 64-bit lanes while its values fit)
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

/// A filter keeping at least one row in this many leaves a batch's columns whole
/// ([`CpuFusion::evaluate`]): the program's work over the dropped rows costs less than
/// gathering the kept ones, while most are kept.
const DENSE_KEPT: usize = 2;

/// A batch's keys and arguments after the fused filter and program.
#[derive(Debug)]
pub(crate) struct Evaluated {
    /// Every row of the source batch where `kept` is given, else only the kept ones.
    pub(crate) batch: InputBatch,
    /// The rows the filter kept, ascending, where `batch` holds them all.
    pub(crate) kept: Option<Vec<u32>>,
}

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
    /// none. `scratch` is the calling worker's. Where the filter keeps most rows (at least
    /// [`DENSE_KEPT`] of them) and the worker reads kept rows in place (`in_place`:
    /// [`grouper_core::Worker::reads_kept_in_place`]; elsewhere it would gather them from the
    /// whole batch after the program ran over every row, work done twice), the program runs
    /// over every row and the keys stay whole, the
    /// kept rows returned beside them for the worker to read in place
    /// ([`grouper_core::Worker::push_selected`]): gathering the kept rows of each column read
    /// was a tenth of TPC-H Q1's CPU time on the H200 host, and the aggregates gather their
    /// runs' rows anyway. A program that fails over the rows the filter drops (an overflow, a
    /// division by zero there) runs again over the kept rows alone, whose errors stand.
    pub(crate) fn evaluate(
        &self,
        scratch: &mut Scratch,
        batch: &RecordBatch,
        in_place: bool,
    ) -> Result<Option<Evaluated>> {
        let rows = batch.num_rows();
        let columns = batch.columns();
        let (keep, kept) = match &self.filter {
            None => (None, None),
            Some(f) => {
                let keep = selection(f, columns, rows).map_err(external)?;
                match keep.true_count() {
                    0 => return Ok(None),
                    n if n == rows => (None, None),
                    _ => {
                        let kept = Selection::indices(&keep);
                        (Some(keep), Some(kept))
                    }
                }
            }
        };
        let key_columns = || {
            self.keys.iter().map(|&k| {
                columns.get(k).ok_or_else(|| {
                    DataFusionError::Internal(format!("fused key column {k} missing"))
                })
            })
        };
        if in_place && kept.as_ref().is_some_and(|k| k.len() >= rows / DENSE_KEPT) {
            if let Ok(args) = self.program.run(scratch, columns, None, rows) {
                let keys = key_columns()
                    .map(|c| c.cloned())
                    .collect::<Result<Vec<_>>>()?;
                let batch = InputBatch::try_new(&self.spec, keys, args, rows).map_err(external)?;
                return Ok(Some(Evaluated { batch, kept }));
            }
        }
        let sel = match (keep, kept) {
            (Some(keep), Some(kept)) => Some(Selection::with_indices(&keep, kept)),
            _ => None,
        };
        let n = sel.as_ref().map_or(rows, Selection::len);
        let keys = key_columns()
            .map(|c| {
                Ok(match &sel {
                    None => Arc::clone(c?),
                    Some(s) => s.predicate.filter(c?)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let args = self
            .program
            .run(scratch, columns, sel.as_ref(), rows)
            .map_err(external)?;
        let batch = InputBatch::try_new(&self.spec, keys, args, n).map_err(external)?;
        Ok(Some(Evaluated { batch, kept: None }))
    }
}
