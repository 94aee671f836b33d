//! [`GrouperRule`]: the physical optimizer rule that puts [`GroupByExec`] in place of
//! DataFusion's aggregation wherever grouper handles every key and aggregate.
//!
//! Matched shapes (after DataFusion's own rules, so the rest of the plan is final):
//!
//! ```text
//!  AggregateExec(Final | FinalPartitioned)            AggregateExec(Single | SinglePartitioned)
//!    [RepartitionExec | CoalescePartitionsExec]*          input
//!      AggregateExec(Partial)                     ==>
//!        input                                     GroupByExec
//!                                                     input
//! ```
//!
//! When the replaced node's output was hash-partitioned over several partitions (a parent such
//! as a partitioned join may rely on it), a `RepartitionExec` with the same partitioning is put
//! back on top. Anything not handled (grouping sets, DISTINCT, FILTER, ordered aggregates,
//! unsupported types, an output ordering the parents rely on) leaves DataFusion's plan as it is,
//! and so does `auto` where grouper would not beat DataFusion's aggregation ([`crate::harm`]).
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};
use grouper_core::agg::{pair_type, AggKind, AggregateSpec};
use grouper_core::QuerySpec;

use crate::config::{Backend, Engine};
use crate::exec::{GroupByExec, Phase};
use crate::fuse::fuse;
use crate::group_by::GroupByPlan;
use crate::harm;
use crate::merge::MergeExec;
use crate::tuple_expr::TupleExpr;

/// Replaces handled aggregations with [`GroupByExec`].
#[derive(Debug)]
pub struct GrouperRule {
    engine: Arc<Engine>,
}

impl GrouperRule {
    /// A rule whose nodes run as `engine` says.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    fn replace(&self, plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(top) = plan.downcast_ref::<AggregateExec>() else {
            return Ok(None);
        };
        // The lower aggregate (the partial one of a pair), and the repartitions and coalesces
        // between the two, top down.
        let mut between: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
        let (lower, lower_node) = match top.mode() {
            AggregateMode::Single | AggregateMode::SinglePartitioned => (top, plan),
            AggregateMode::Final | AggregateMode::FinalPartitioned => {
                let mut child = top.input();
                while child.is::<RepartitionExec>() || child.is::<CoalescePartitionsExec>() {
                    between.push(Arc::clone(child));
                    match child.children().first() {
                        Some(c) => child = c,
                        None => return Ok(None),
                    }
                }
                match child.downcast_ref::<AggregateExec>() {
                    Some(p) if *p.mode() == AggregateMode::Partial => (p, child),
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        if plan.output_ordering().is_some() {
            return Ok(None);
        }
        let Some(mut group_by) = translate(lower)? else {
            return Ok(None);
        };
        // The GPU evaluates the fused form in its kernel, the CPU in its workers
        // (`backend::fusion`).
        if self.engine.backend != Backend::DataFusion {
            let keys: Vec<_> = group_by.keys.iter().map(|(e, _)| Arc::clone(e)).collect();
            group_by.fused = fuse(lower.input(), &keys, &group_by.args);
        }
        // The output must be exactly what DataFusion planned.
        let schema = top.schema();
        let Ok(types) = group_by.spec.output_types() else {
            return Ok(None);
        };
        if types.len() != schema.fields().len()
            || types
                .iter()
                .zip(schema.fields())
                .any(|(t, f)| t != f.data_type())
        {
            return Ok(None);
        }
        if let Some(why) = harm::datafusion_keeps(&self.engine, lower, &group_by) {
            let keys: Vec<&str> = group_by.keys.iter().map(|(_, n)| n.as_str()).collect();
            self.engine
                .kept
                .push(format!("gby=[{}]: {why}", keys.join(", ")));
            return Ok(None);
        }
        group_by.origin = Some(origin_of(lower_node)?);
        if self.engine.distributed && !between.is_empty() {
            // Two phases, for a distributed engine to cut between: the partial groups of
            // each input partition, DataFusion's repartition (a network shuffle there), and
            // their merge per partition.
            let group_by = Arc::new(group_by);
            let mut node: Arc<dyn ExecutionPlan> = Arc::new(GroupByExec::partial(
                Arc::clone(lower.input()),
                Arc::clone(&group_by),
                Arc::clone(&self.engine),
                lower.input().output_partitioning().partition_count(),
            )?);
            for b in between.iter().rev() {
                node = Arc::clone(b).replace_children(
                    vec![node],
                    ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
                )?;
            }
            return Ok(Some(Arc::new(MergeExec::new(node, group_by, schema))));
        }
        // Where DataFusion's aggregation left several hash partitions, grouper's result leaves
        // in as many shares (the operators above run on as many threads) and is repartitioned
        // by the same hash for parents that rely on it; a single partition stays single.
        let outputs = match plan.output_partitioning() {
            Partitioning::Hash(_, n) if *n > 1 => *n,
            _ => 1,
        };
        let node: Arc<dyn ExecutionPlan> = Arc::new(GroupByExec::new(
            Arc::clone(lower.input()),
            Arc::new(group_by),
            schema,
            Arc::clone(&self.engine),
            outputs,
        ));
        Ok(Some(match plan.output_partitioning() {
            p @ Partitioning::Hash(_, n) if *n > 1 => {
                Arc::new(RepartitionExec::try_new(node, p.clone())?)
            }
            _ => node,
        }))
    }
}

/// Whether `plan` leaves its input's partitioning to nothing that relies on it: it requires no
/// distribution of its input, and it reaches its own parent (or the query's result) only
/// through other such nodes when its caller says so.
fn relies_on_no_partitioning(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.is::<ProjectionExec>()
        || plan.is::<FilterExec>()
        || plan.is::<CoalescePartitionsExec>()
        || plan.is::<SortExec>()
        || plan.is::<SortPreservingMergeExec>()
        || plan.is::<GlobalLimitExec>()
        || plan.is::<LocalLimitExec>()
}

/// `plan` without the hash repartitions kept above a [`GroupByExec`] where nothing above relies
/// on them (`free`: every node from the query's result, or from the nearest `GroupByExec`
/// above, down to `plan` relies on no partitioning). A `GroupByExec` needs no particular
/// partitioning of its input (as the outer aggregation of DataFusion's two-level plan for
/// COUNT(DISTINCT)). db-benchmark q10 at 1e8 rows on 16 threads: hashing 1e8 result rows' keys
/// to deal them out again for a projection took 0.8 s, DataFusion's whole query 1.8 s.
fn without_unrelied_repartitions(
    plan: Arc<dyn ExecutionPlan>,
    free: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    if free {
        if let Some(r) = plan.downcast_ref::<RepartitionExec>() {
            let whole = r
                .input()
                .downcast_ref::<GroupByExec>()
                .is_some_and(|g| g.phase() == Phase::Whole);
            if matches!(r.partitioning(), Partitioning::Hash(..)) && whole {
                return without_unrelied_repartitions(Arc::clone(r.input()), free);
            }
        }
    }
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(plan);
    }
    // A whole aggregation needs no partitioning of its input (a merge needs its partial
    // groups hash-partitioned by key: what is below it stays).
    let whole = plan
        .downcast_ref::<GroupByExec>()
        .is_some_and(|g| g.phase() == Phase::Whole);
    let free = whole || (free && relies_on_no_partitioning(&plan));
    let new = children
        .iter()
        .map(|c| without_unrelied_repartitions(Arc::clone(c), free))
        .collect::<Result<Vec<_>>>()?;
    if new.iter().zip(&children).all(|(n, c)| Arc::ptr_eq(n, c)) {
        return Ok(plan);
    }
    plan.replace_children(
        new,
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
    )
}

/// The origin a translated aggregation keeps for [`crate::codec::GroupByCodec`]: `agg` over an empty input
/// of the same schema (the real input is serialised as the node's child).
fn origin_of(agg: &Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    let Some(a) = agg.downcast_ref::<AggregateExec>() else {
        return Err(DataFusionError::Internal(
            "an origin must be an aggregate".into(),
        ));
    };
    let empty: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(Arc::clone(&a.input_schema())));
    Arc::clone(agg).replace_children(
        vec![empty],
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
    )
}

/// The core spec, argument expressions and display names of an aggregate node, or `None` when
/// grouper does not handle it.
pub(crate) fn translate(agg: &AggregateExec) -> Result<Option<GroupByPlan>> {
    let group_by = agg.group_expr();
    if !group_by.is_single()
        || agg.filter_expr().iter().any(Option::is_some)
        || agg.limit_options().is_some()
    {
        return Ok(None);
    }
    let input_schema = agg.input_schema();
    let mut key_types = Vec::new();
    for (e, _) in group_by.expr() {
        key_types.push(e.data_type(&input_schema)?);
    }
    let mut aggregates = Vec::new();
    let mut args = Vec::new();
    let mut names = Vec::new();
    for a in agg.aggr_expr() {
        let exprs = a.expressions();
        if a.is_distinct() || !a.order_bys().is_empty() {
            return Ok(None);
        }
        let kind = match a.fun().name() {
            "count" => AggKind::Count,
            "sum" => AggKind::Sum,
            "min" => AggKind::Min,
            "max" => AggKind::Max,
            "avg" => AggKind::Avg,
            "corr" => AggKind::Corr,
            "var" => AggKind::Var,
            "var_pop" => AggKind::VarPop,
            "stddev" => AggKind::Stddev,
            "stddev_pop" => AggKind::StddevPop,
            "median" => AggKind::Median,
            _ => return Ok(None),
        };
        let arg = match (kind, exprs.as_slice()) {
            // CORR's two arguments (DataFusion coerced both to Float64) as one pair.
            (AggKind::Corr, [x, y]) => {
                let pair: Arc<dyn PhysicalExpr> =
                    Arc::new(TupleExpr::new(vec![Arc::clone(x), Arc::clone(y)]));
                if pair.data_type(&input_schema)? != pair_type() {
                    return Ok(None);
                }
                pair
            }
            (AggKind::Corr, _) => return Ok(None),
            (_, [x]) => Arc::clone(x),
            _ => return Ok(None),
        };
        let is_non_null_literal = arg
            .downcast_ref::<Literal>()
            .is_some_and(|l| !l.value().is_null());
        if kind == AggKind::Count && is_non_null_literal {
            aggregates.push(AggregateSpec::count_star());
            args.push(None);
        } else {
            aggregates.push(AggregateSpec::new(kind, arg.data_type(&input_schema)?));
            args.push(Some(arg));
        }
        names.push(a.name().to_string());
    }
    Ok(Some(GroupByPlan {
        keys: group_by.expr().to_vec(),
        args,
        agg_names: names,
        spec: QuerySpec {
            key_types,
            aggregates,
        },
        fused: None,
        origin: None,
    }))
}

impl PhysicalOptimizerRule for GrouperRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = plan
            .transform_down(|p| {
                Ok(match self.replace(&p)? {
                    Some(new) => Transformed::yes(new),
                    None => Transformed::no(p),
                })
            })?
            .data;
        without_unrelied_repartitions(plan, true)
    }

    fn name(&self) -> &str {
        "grouper"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
