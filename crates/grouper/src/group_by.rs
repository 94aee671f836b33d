//! What a `GroupByExec` computes, as the rule translated it from DataFusion's aggregate: the
//! key and argument expressions, the engine's view of the query, and (where the filter and
//! projections below translate into the IR) its fused form over the scan.

use std::sync::Arc;

use datafusion::physical_expr::PhysicalExpr;
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
}
