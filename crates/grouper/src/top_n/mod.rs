//! Top-N rows per group: `ROW_NUMBER() OVER (PARTITION BY k ORDER BY v) <= N`, the
//! db-benchmark's question 8 (`largest two v3 by id6`), as a grouped selection instead of a
//! sort of the whole input.
//!
//! DataFusion plans the query as a sort of every row by (k, v), a window numbering the rows
//! and a filter keeping the first N of each group. [`TopPerGroupRule`] replaces the sort and
//! the window by [`TopPerGroupExec`]: one pass that keeps each group's best N rows so far
//! ([`select::Selection`], group ids with N slots each), then emits them in the
//! sort's order with each row's number in its group (the window's column), so the filter
//! above stays as it was:
//!
//! ```text
//!  FilterExec(rn <= N)                        FilterExec(rn <= N)
//!    [ProjectionExec]*                          [ProjectionExec]*
//!      BoundedWindowAggExec(ROW_NUMBER)   ==>     TopPerGroupExec(n = N, numbered)
//!        SortExec(k.., v..)                         input
//!          input
//! ```
//!
//! (The window numbered the 200k rows q8 selects, a group of two at a time, in ~84 ms of CPU
//! on 2 threads.)
//!
//! Measured (db-benchmark q8, 1e7 rows, 100k groups, 2 threads, in memory): the sort plan took
//! 1.76 s against DuckDB's 0.36 s; DataFusion's own `PartitionedTopKExec`
//! (`enable_window_topn`, a heap per group) 4.97 s at this many groups. Only `ROW_NUMBER`
//! (ties take any of the tied rows, as in the sort plan), a window node computing nothing
//! else, fixed-width `ORDER BY` columns, and partition keys whose statistics (or an in-memory
//! sample) bound them to at least [`MIN_ROWS_PER_GROUP`] rows a group are matched (with few
//! rows a group every row is a candidate and the sort is as fast); anything else keeps the
//! sort.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

mod exec;
mod groups;
mod order;
mod select;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_expr::window::{StandardWindowExpr, WindowExpr};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowUDFExpr};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

pub use exec::TopPerGroupExec;

/// Input rows a group at least (by the keys' domain) for the selection to replace the sort.
/// TPC-H SF 1 lineitem from Parquet, 2 threads, one fresh process each: 600 rows a group
/// (`PARTITION BY l_suppkey`) ran 0.17–0.21 s against the sort plan's 1.10–1.12 s; 4 rows a
/// group (`l_orderkey`) 1.36–1.51 s against 1.32–2.08 s; one row a group (`l_orderkey,
/// l_linenumber`) 6.4–6.8 s against 4.8–5.1 s, with 2.6x its memory (every row a candidate,
/// every group sorted at the end).
pub const MIN_ROWS_PER_GROUP: u128 = 16;

/// The largest N replaced: each group holds N slots from its first row, and past a few hundred
/// rows a group the sort is as good.
pub const MAX_N: usize = 256;

/// Puts [`TopPerGroupExec`] in place of the sort below a `ROW_NUMBER` window whose rows a
/// filter bounds.
#[derive(Debug, Default)]
pub struct TopPerGroupRule;

impl PhysicalOptimizerRule for TopPerGroupRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(plan
            .transform_down(|p| {
                Ok(match replace(&p)? {
                    Some(new) => Transformed::yes(new),
                    None => Transformed::no(p),
                })
            })?
            .data)
    }

    fn name(&self) -> &str {
        "grouper_top_per_group"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with its window's sort replaced, when it is a filter bounding a `ROW_NUMBER`.
fn replace(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(filter) = plan.downcast_ref::<FilterExec>() else {
        return Ok(None);
    };
    let Some((mut col, n)) = row_limit(filter.predicate()) else {
        return Ok(None);
    };
    // Down through projections that pass the numbered column on.
    let mut between = Vec::new();
    let mut node = filter.input();
    while let Some(p) = node.downcast_ref::<ProjectionExec>() {
        let Some(c) = p
            .expr()
            .get(col)
            .and_then(|e| e.expr.downcast_ref::<Column>())
        else {
            return Ok(None);
        };
        col = c.index();
        between.push(Arc::clone(node));
        node = p.input();
    }
    let Some(window) = node.downcast_ref::<BoundedWindowAggExec>() else {
        return Ok(None);
    };
    let [w] = window.window_expr() else {
        return Ok(None);
    };
    if col != window.input().schema().fields().len() || !is_row_number(w) {
        return Ok(None);
    }
    let Some(sort) = window.input().downcast_ref::<SortExec>() else {
        return Ok(None);
    };
    if !sorts_as_window_needs(sort, w.as_ref())? || !many_rows_a_group(sort.input(), w.as_ref()) {
        return Ok(None);
    }
    let top = TopPerGroupExec::replacing(sort, w.partition_by().len(), n);
    let recompute = || ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
    // The selection numbers its rows in the window's place where the window's column is a
    // non-NULL UInt64 (ROW_NUMBER's), else under the window.
    let numbers = window
        .schema()
        .fields()
        .last()
        .map(|f| (f.data_type().clone(), f.is_nullable()));
    let mut new: Arc<dyn ExecutionPlan> = match numbers {
        Some((DataType::UInt64, false)) => Arc::new(top.numbering(window)),
        _ => Arc::clone(node).replace_children(vec![Arc::new(top)], recompute())?,
    };
    for p in between.into_iter().rev() {
        new = p.replace_children(vec![new], recompute())?;
    }
    Ok(Some(
        Arc::clone(plan).replace_children(vec![new], recompute())?,
    ))
}

/// Whether `sort` orders each partition by the window's keys (in any order), then its
/// `ORDER BY` of fixed-width columns, with no fetch, partition by partition.
fn sorts_as_window_needs(sort: &SortExec, w: &dyn WindowExpr) -> Result<bool> {
    let (keys, order) = (w.partition_by(), w.order_by());
    let exprs: Vec<_> = sort.expr().iter().collect();
    if keys.is_empty()
        || sort.fetch().is_some()
        || exprs.len() != keys.len() + order.len()
        || !(sort.preserve_partitioning()
            || sort.input().output_partitioning().partition_count() == 1)
    {
        return Ok(false);
    }
    let (sorted_keys, sorted_order) = exprs.split_at(keys.len());
    let same_keys = sorted_keys
        .iter()
        .all(|s| keys.iter().any(|k| k == &s.expr))
        && keys
            .iter()
            .all(|k| sorted_keys.iter().any(|s| k == &s.expr));
    let same_order = sorted_order.iter().zip(order).all(|(s, o)| *s == o);
    let schema = sort.input().schema();
    let fixed_width = order
        .iter()
        .map(|o| o.expr.data_type(&schema))
        .collect::<Result<Vec<_>>>()?
        .iter()
        .all(|t| t.primitive_width().is_some() || t == &DataType::Boolean);
    Ok(same_keys && same_order && fixed_width)
}

/// Whether the statistics (or, in memory, a sample: [`crate::stats::sampled_range`]) bound
/// the partition keys to at most one group per [`MIN_ROWS_PER_GROUP`] input rows.
fn many_rows_a_group(input: &Arc<dyn ExecutionPlan>, w: &dyn WindowExpr) -> bool {
    let schema = input.schema();
    let Ok(types) = w
        .partition_by()
        .iter()
        .map(|k| k.data_type(&schema))
        .collect::<Result<Vec<_>>>()
    else {
        return false;
    };
    let keys: Vec<_> = w.partition_by().iter().zip(&types).collect();
    let Some(stats) = crate::stats::keys_stats(input, &keys) else {
        return false;
    };
    match (stats.domain(), stats.rows) {
        (Some(domain), Some(rows)) => domain.saturating_mul(MIN_ROWS_PER_GROUP) <= u128::from(rows),
        _ => false,
    }
}

/// Whether the window function is `ROW_NUMBER`.
fn is_row_number(w: &Arc<dyn WindowExpr>) -> bool {
    w.as_any()
        .downcast_ref::<StandardWindowExpr>()
        .and_then(|s| {
            s.get_standard_func_expr()
                .as_any()
                .downcast_ref::<WindowUDFExpr>()
                .map(|u| u.fun().name() == "row_number")
        })
        .unwrap_or(false)
}

/// `(column, n)` of a predicate that keeps rows whose `column` is at most `n`: `c <= n`,
/// `c < n + 1`, `n >= c`, `n + 1 > c` over an integer literal.
fn row_limit(predicate: &Arc<dyn PhysicalExpr>) -> Option<(usize, usize)> {
    let b = predicate.downcast_ref::<BinaryExpr>()?;
    let literal = |e: &Arc<dyn PhysicalExpr>| -> Option<i128> {
        match e.downcast_ref::<Literal>()?.value() {
            ScalarValue::Int8(Some(v)) => Some(i128::from(*v)),
            ScalarValue::Int16(Some(v)) => Some(i128::from(*v)),
            ScalarValue::Int32(Some(v)) => Some(i128::from(*v)),
            ScalarValue::Int64(Some(v)) => Some(i128::from(*v)),
            ScalarValue::UInt8(Some(v)) => Some(i128::from(*v)),
            ScalarValue::UInt16(Some(v)) => Some(i128::from(*v)),
            ScalarValue::UInt32(Some(v)) => Some(i128::from(*v)),
            ScalarValue::UInt64(Some(v)) => Some(i128::from(*v)),
            _ => None,
        }
    };
    let column = |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Column>().map(Column::index);
    let (col, n) = match b.op() {
        Operator::LtEq => (column(b.left())?, literal(b.right())?),
        Operator::Lt => (column(b.left())?, literal(b.right())? - 1),
        Operator::GtEq => (column(b.right())?, literal(b.left())?),
        Operator::Gt => (column(b.right())?, literal(b.left())? - 1),
        _ => return None,
    };
    // Row numbers start at 1: n < 1 keeps nothing (left to DataFusion, which knows that too);
    // n over [`MAX_N`] keeps the sort.
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| (1..=MAX_N).contains(&n))?;
    Some((col, n))
}

/// Whether `plan` holds a [`TopPerGroupExec`] (tests, `--explain` readers).
pub fn contains_top_per_group(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<TopPerGroupExec>().is_some()
        || plan.children().into_iter().any(contains_top_per_group)
}
