//! grouper's in-memory table: each column stored in the narrowest form that holds its values,
//! declared to DataFusion in its own type.
//!
//! An Arrow table as generators and readers hand it over holds a decimal of at most 18 digits
//! in 16 bytes (`Decimal128`) and a flag such as TPC-H's `l_returnflag` as a 16-byte string view
//! a row. A query over it in memory is bound by those loads: TPC-H Q1 reads about 100 bytes a row
//! of which 38 carry its values, and its fused program on 16 threads spent its time in the loads
//! (the H200 host, 4a243c5). DuckDB stores such a decimal as a 64-bit integer when it loads a
//! table. So does this table, and more:
//!
//! - **Decimals as 64-bit.** A `Decimal128` column of at most 18 digits whose every value fits in
//!   64 bits is stored as `Decimal64` (half the bytes).
//! - **Few strings as dictionaries.** A `Utf8`/`Utf8View` column whose every batch holds a small
//!   set of values (at most [`SMALL_DICTIONARY`] bytes of them) is stored as
//!   `Dictionary(Int32, Utf8)`: 4 bytes a row, and the key codec codes a batch's values once.
//!
//! DataFusion sees the declared types: a scan reads the stored batches and [`WidenExec`] casts the
//! narrowed columns back, batch by batch (exact: every value was checked to fit). grouper's CPU
//! workers skip that cast where they read a narrowed column only as the fused program's 64-bit
//! lanes or only as a group key ([`crate::backend::fused_scan::rebuilt_narrowed`]), which is how they read such columns of Parquet
//! files too ([`crate::backend::fused_scan`]). The GPU backend reads the widened batches; its
//! prepared-input cache knows an input by its arrays, so a table the GPU reads repeatedly is
//! better registered as a plain `MemTable`.

use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal64Array, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{
    DataType, Decimal128Type, Field, Schema, SchemaRef, DECIMAL64_MAX_PRECISION,
};
use arrow::error::ArrowError;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::ColumnStatistics;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildStats, DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties, Statistics, StatisticsArgs,
};
use futures::StreamExt;
use rayon::prelude::*;

/// Bytes of values (offsets included) a batch's dictionary of a string column may hold for the
/// column to be stored dictionary-encoded: each batch's values are coded once, so they must be
/// few beside its rows (16 KiB: about a thousand short strings, as for Parquet files' key
/// dictionaries).
pub const SMALL_DICTIONARY: usize = 16 << 10;

/// The dictionary type a string column is stored as (and a Parquet file's string key is read
/// as: [`crate::backend::fused_scan`]).
pub(crate) fn string_dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// An in-memory table whose columns are stored narrowed where their values allow (see the
/// module's doc), declared to DataFusion in the types it was given.
#[derive(Debug)]
pub struct NarrowTable {
    declared: SchemaRef,
    stored: SchemaRef,
    partitions: Vec<Vec<RecordBatch>>,
}

impl NarrowTable {
    /// `partitions` (batches of `schema`) stored narrowed: each column in the narrowest form
    /// that holds every value of every batch, else as it is. Each column's batches convert in
    /// parallel (rayon's pool); the wide batches live until it returns (its peak holds both).
    pub fn try_new(schema: SchemaRef, partitions: Vec<Vec<RecordBatch>>) -> Result<Self> {
        for b in partitions.iter().flatten() {
            if !fields_agree(&b.schema(), &schema, |a, d| a.data_type() == d.data_type()) {
                return Err(DataFusionError::Plan(format!(
                    "a batch's schema {} is not the table's {schema}",
                    b.schema()
                )));
            }
        }
        // Each column's batches in its narrow form, where every batch has one (each batch
        // converted once, in parallel); `None` keeps the column as it is.
        let batches: Vec<&RecordBatch> = partitions.iter().flatten().collect();
        let columns: Vec<Option<Vec<ArrayRef>>> = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(c, f)| {
                let t = narrow_type(f.data_type())?;
                batches
                    .par_iter()
                    .map(|b| narrowed(b.column(c), &t))
                    .collect()
            })
            .collect();
        let stored = Arc::new(Schema::new_with_metadata(
            schema
                .fields()
                .iter()
                .zip(&columns)
                .map(
                    |(f, narrow)| match narrow.as_ref().and_then(|n| n.first()) {
                        Some(a) => f.as_ref().clone().with_data_type(a.data_type().clone()),
                        None => f.as_ref().clone(),
                    },
                )
                .collect::<Vec<Field>>(),
            schema.metadata().clone(),
        ));
        let mut next = 0;
        let mut stored_partitions = Vec::with_capacity(partitions.len());
        for part in &partitions {
            let mut out = Vec::with_capacity(part.len());
            for b in part {
                let arrays = b
                    .columns()
                    .iter()
                    .zip(&columns)
                    .map(
                        |(a, narrow)| match narrow.as_ref().and_then(|n| n.get(next)) {
                            Some(n) => Arc::clone(n),
                            None => Arc::clone(a),
                        },
                    )
                    .collect();
                out.push(RecordBatch::try_new(Arc::clone(&stored), arrays)?);
                next += 1;
            }
            stored_partitions.push(out);
        }
        let partitions = stored_partitions;
        Ok(Self {
            declared: schema,
            stored,
            partitions,
        })
    }

    /// The schema the columns are stored in.
    pub fn stored_schema(&self) -> SchemaRef {
        Arc::clone(&self.stored)
    }
}

/// The narrow form a column declared `t` may be stored in, if any.
fn narrow_type(t: &DataType) -> Option<DataType> {
    match t {
        DataType::Decimal128(p, s) if *p <= DECIMAL64_MAX_PRECISION => {
            Some(DataType::Decimal64(*p, *s))
        }
        DataType::Utf8 | DataType::Utf8View => Some(string_dictionary()),
        _ => None,
    }
}

/// `a` stored as `t` ([`narrow_type`]), or `None` when a value does not fit: a decimal past 64
/// bits, or a batch of strings whose values pass [`SMALL_DICTIONARY`].
fn narrowed(a: &ArrayRef, t: &DataType) -> Option<ArrayRef> {
    match t {
        DataType::Decimal64(..) => {
            let wide = a.as_primitive_opt::<Decimal128Type>()?;
            // A NULL slot's value may be anything: it is stored as 0.
            let values = wide
                .values()
                .iter()
                .enumerate()
                .map(|(i, &v)| match wide.is_valid(i) {
                    true => i64::try_from(v).ok(),
                    false => Some(0),
                })
                .collect::<Option<Vec<i64>>>()?;
            let narrow =
                Decimal64Array::new(values.into(), wide.nulls().cloned()).with_data_type(t.clone());
            Some(Arc::new(narrow))
        }
        DataType::Dictionary(..) => {
            let utf8 = match a.data_type() {
                DataType::Utf8View => cast(a, &DataType::Utf8).ok()?,
                _ => Arc::clone(a),
            };
            let dict = cast(&utf8, t).ok()?;
            let values = dict.as_any_dictionary_opt()?.values();
            let bytes = values.as_string_opt::<i32>()?.value_data().len() + 4 * values.len();
            (bytes <= SMALL_DICTIONARY).then_some(dict)
        }
        _ => None,
    }
}

#[async_trait]
impl TableProvider for NarrowTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.declared)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let source = MemorySourceConfig::try_new(
            &self.partitions,
            Arc::clone(&self.stored),
            projection.cloned(),
        )?
        .with_show_sizes(state.config_options().explain.show_sizes);
        let declared = match projection {
            Some(p) => Arc::new(self.declared.project(p)?),
            None => Arc::clone(&self.declared),
        };
        widen(DataSourceExec::from_data_source(source), declared)
    }
}

/// Whether `a` and `b` have as many fields and each pair agrees by `same`.
fn fields_agree(a: &SchemaRef, b: &SchemaRef, same: impl Fn(&Field, &Field) -> bool) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields().iter().zip(b.fields()).all(|(x, y)| same(x, y))
}

/// `input` with its columns cast to `schema`'s types where they differ: `input` itself when
/// none does.
pub(crate) fn widen(
    input: Arc<dyn ExecutionPlan>,
    schema: SchemaRef,
) -> Result<Arc<dyn ExecutionPlan>> {
    if fields_agree(&input.schema(), &schema, |a, b| {
        a.data_type() == b.data_type()
    }) {
        return Ok(input);
    }
    Ok(Arc::new(WidenExec::try_new(input, schema)?))
}

/// `batch` (a narrowed table's stored batch) with its columns cast to `schema`'s types where
/// they differ.
pub(crate) fn widened_batch(
    batch: &RecordBatch,
    schema: &SchemaRef,
) -> Result<RecordBatch, ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(a, f)| match a.data_type() == f.data_type() {
            true => Ok(Arc::clone(a)),
            false => cast(a, f.data_type()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(Arc::clone(schema), columns)
}

/// A narrowed table's scan as DataFusion declares it: its input's batches with the narrowed
/// columns cast back to their declared types (the same rows, columns and partitions).
#[derive(Debug)]
pub struct WidenExec {
    pub(crate) input: Arc<dyn ExecutionPlan>,
    pub(crate) schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl WidenExec {
    fn try_new(input: Arc<dyn ExecutionPlan>, schema: SchemaRef) -> Result<Self> {
        let same_names = fields_agree(&input.schema(), &schema, |a, b| a.name() == b.name());
        if !same_names {
            return Err(DataFusionError::Internal(format!(
                "widening {} to {schema}: not the same columns",
                input.schema()
            )));
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(input.output_partitioning().partition_count()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(Self {
            input,
            schema,
            properties,
        })
    }

    /// The scan of the stored batches.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for WidenExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let widened: Vec<_> = self
            .input
            .schema()
            .fields()
            .iter()
            .zip(self.schema.fields())
            .filter(|(a, b)| a.data_type() != b.data_type())
            .map(|(_, b)| b.name().clone())
            .collect();
        write!(f, "WidenExec: {}", widened.join(", "))
    }
}

impl ExecutionPlan for WidenExec {
    fn name(&self) -> &str {
        "WidenExec"
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [child] = <[_; 1]>::try_from(children)
            .map_err(|_| DataFusionError::Internal("WidenExec has one child".into()))?;
        Ok(Arc::new(Self::try_new(child, Arc::clone(&self.schema))?))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let schema = Arc::clone(&self.schema);
        let stream = self.input.execute(partition, context)?;
        let out = Arc::clone(&schema);
        let widened = stream.map(move |b| Ok(widened_batch(&b?, &out)?));
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, widened)))
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    /// The input's statistics, a narrowed column's bounds cast back (unknown where they do not
    /// cast).
    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        let Some(input) = input_stats.first() else {
            return Ok(Arc::new(Statistics::new_unknown(&self.schema)));
        };
        let mut stats = input.as_ref().clone();
        for (c, f) in stats.column_statistics.iter_mut().zip(self.schema.fields()) {
            let bounds = [&mut c.min_value, &mut c.max_value];
            let cast_all = bounds.into_iter().all(|b| match b.get_value() {
                Some(v) if v.data_type() != *f.data_type() => match v.cast_to(f.data_type()) {
                    Ok(w) => {
                        *b = b.clone().map(|_| w.clone());
                        true
                    }
                    Err(_) => false,
                },
                _ => true,
            });
            if !cast_all {
                *c = ColumnStatistics::new_unknown();
            }
        }
        Ok(Arc::new(stats))
    }
}

#[cfg(test)]
mod tests;
