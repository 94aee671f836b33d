//! What a `GroupByExec` computes, as the rule translated it from DataFusion's aggregate: the
//! key and argument expressions, the engine's view of the query, and (where the filter and
//! projections below translate into the IR) its fused form over the scan.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::compute::cast;
use arrow::datatypes::DataType;
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use grouper_core::QuerySpec;

use crate::fuse::Fused;

/// The expressions of one aggregate's argument: `None` for `COUNT(*)`.
pub type ArgExpr = Option<Arc<dyn PhysicalExpr>>;

/// What a [`crate::exec::GroupByExec`] computes: key and argument expressions over its input's schema, their
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
    /// DataFusion's aggregate this was translated from, over an empty input: what
    /// [`crate::codec::GroupByCodec`] writes, to translate again where the plan is read.
    pub origin: Option<Arc<dyn ExecutionPlan>>,
}

impl GroupByPlan {
    /// The input columns that are group keys as they are and that no aggregate argument reads:
    /// a scan may hand them over in another form only the key codec reads (a string key as a
    /// dictionary).
    pub fn key_only_columns(&self) -> Vec<usize> {
        let read_by_args: Vec<usize> = self
            .args
            .iter()
            .flatten()
            .flat_map(|a| collect_columns(a).into_iter().map(|c| c.index()))
            .collect();
        self.keys
            .iter()
            .filter_map(|(e, _)| e.downcast_ref::<Column>().map(Column::index))
            .filter(|c| !read_by_args.contains(c))
            .collect()
    }
}

/// A state column's type as partial groups cross a network: a `LargeList` (MEDIAN's values)
/// travels as a `List`. arrow-flight 59 announces every `LargeList` field as a `List` in the
/// schema it sends (`prepare_field_for_flight`) while writing 64-bit offsets, and the
/// receiver, reading them as 32-bit ones, failed ("non-monotonic offset").
pub(crate) fn wire_type(t: &DataType) -> DataType {
    match t {
        DataType::LargeList(item) => DataType::List(Arc::clone(item)),
        t => t.clone(),
    }
}

/// `columns` cast, where they differ, to `types`.
pub(crate) fn cast_to(columns: &[ArrayRef], types: &[DataType]) -> Result<Vec<ArrayRef>> {
    columns
        .iter()
        .zip(types)
        .map(|(c, t)| match c.data_type() == t {
            true => Ok(Arc::clone(c)),
            false => Ok(cast(c, t)?),
        })
        .collect()
}
