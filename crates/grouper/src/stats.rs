//! What DataFusion's statistics (Parquet footers, in-memory tables, carried through filters,
//! projections and joins) say of an aggregation's input and keys before a row is read.
//!
//! A key range from statistics bounds every batch; one taken from the first batch bounds only
//! that batch (a sorted or clustered key then widens the table batch after batch). Both the
//! CPU planner ([`crate::backend::cpu`]) and `auto`'s do-no-harm rule ([`crate::harm`]) plan
//! from these facts where they exist.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::{ExecutionPlan, StatisticsArgs, StatisticsContext};

use crate::group_by::GroupByPlan;

/// The statistics of an aggregation's input, per key where the key is a plain column.
#[derive(Debug, Clone, Default)]
pub(crate) struct InputStats {
    /// Rows of the whole input.
    pub rows: Option<u64>,
    /// The product of the key columns' distinct counts, when every key has one.
    pub distinct: Option<u64>,
    /// One per key, in key order.
    pub keys: Vec<KeyStats>,
}

/// What the statistics say of one key.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyStats {
    /// Whether the key is a plain column of the input (an expression has no statistics).
    pub column: bool,
    /// Smallest and largest ordinal of the key's values (ordinal types only).
    pub range: Option<(i128, i128)>,
    /// Whether the key may be NULL (unknown counts as may).
    pub may_null: bool,
}

/// The statistics of `input` for `plan`'s keys; `None` where DataFusion computes none.
pub(crate) fn input_stats(
    input: &Arc<dyn ExecutionPlan>,
    plan: &GroupByPlan,
) -> Option<InputStats> {
    let stats = StatisticsContext::new()
        .compute(input.as_ref(), &StatisticsArgs::new())
        .ok()?;
    let schema = input.schema();
    let keys: Vec<KeyStats> = plan
        .keys
        .iter()
        .zip(&plan.spec.key_types)
        .map(|((e, _), t)| {
            let Some(col) = e.downcast_ref::<Column>() else {
                return KeyStats {
                    may_null: true,
                    ..Default::default()
                };
            };
            let Some(cs) = stats.column_statistics.get(col.index()) else {
                return KeyStats {
                    column: true,
                    may_null: true,
                    range: None,
                };
            };
            let nullable = schema
                .fields()
                .get(col.index())
                .is_none_or(|f| f.is_nullable());
            let range = match (cs.min_value.get_value(), cs.max_value.get_value()) {
                (Some(lo), Some(hi)) => ordinal_of(lo, t).zip(ordinal_of(hi, t)),
                _ => None,
            };
            KeyStats {
                column: true,
                range: range.filter(|(lo, hi)| lo <= hi),
                may_null: nullable && cs.null_count.get_value() != Some(&0),
            }
        })
        .collect();
    let distinct = plan.keys.iter().try_fold(1u64, |acc, (e, _)| {
        let col = e.downcast_ref::<Column>()?;
        let d = *stats
            .column_statistics
            .get(col.index())?
            .distinct_count
            .get_value()?;
        Some(acc.saturating_mul(d as u64))
    });
    Some(InputStats {
        rows: stats.num_rows.get_value().map(|&r| r as u64),
        distinct: distinct.filter(|_| !plan.keys.is_empty()),
        keys,
    })
}

/// `v` as an ordinal of type `t` (booleans as 0 and 1); `None` for strings, floats and values
/// that do not cast.
pub(crate) fn ordinal_of(v: &ScalarValue, t: &DataType) -> Option<i128> {
    if let ScalarValue::Boolean(Some(b)) = v {
        return Some(i128::from(*b));
    }
    let a = v.to_array().ok()?;
    let a = match a.data_type() == t {
        true => a,
        false => arrow::compute::cast(&a, t).ok()?,
    };
    grouper_core::keys::ordinal_min_max(&a).map(|r| r.0)
}
