//! What DataFusion's statistics (Parquet footers, in-memory tables, carried through filters,
//! projections and joins) say of an aggregation's input and keys before a row is read.
//!
//! A key range from statistics bounds every batch; one taken from the first batch bounds only
//! that batch (a sorted or clustered key then widens the table batch after batch). Both the
//! CPU planner ([`crate::backend::cpu`]) and `auto`'s do-no-harm rule ([`crate::harm`]) plan
//! from these facts where they exist.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::catalog::memory::{DataSourceExec, MemorySourceConfig};
use datafusion::common::ScalarValue;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::repartition::RepartitionExec;
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

impl InputStats {
    /// Values the keys can take together (the product of their ranges' widths, NULL counted
    /// where a key may be NULL); `None` when a key has no range.
    pub(crate) fn domain(&self) -> Option<u128> {
        self.keys.iter().try_fold(1u128, |acc, k| {
            let (lo, hi) = k.range?;
            let width = u128::try_from(hi - lo).ok()? + 1 + u128::from(k.may_null);
            Some(acc.saturating_mul(width))
        })
    }
}

/// What the statistics say of one key.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyStats {
    /// Whether the key is a plain column of the input (an expression has no statistics).
    pub column: bool,
    /// Smallest and largest ordinal of the key's values (ordinal types only).
    pub range: Option<(i128, i128)>,
    /// Whether `range` comes from a sample of an in-memory table's rows ([`sampled_range`])
    /// rather than from statistics: then it is likely, not certain, and the codec widens
    /// when a batch leaves it.
    pub sampled: bool,
    /// Whether the key may be NULL (unknown counts as may).
    pub may_null: bool,
}

/// The statistics of `input` for `plan`'s keys; `None` where DataFusion computes none.
pub(crate) fn input_stats(
    input: &Arc<dyn ExecutionPlan>,
    plan: &GroupByPlan,
) -> Option<InputStats> {
    let keys: Vec<_> = plan
        .keys
        .iter()
        .map(|(e, _)| e)
        .zip(&plan.spec.key_types)
        .collect();
    keys_stats(input, &keys)
}

/// The statistics of `input` for `keys` (each an expression over `input` and its type).
pub(crate) fn keys_stats(
    input: &Arc<dyn ExecutionPlan>,
    keys: &[(&Arc<dyn PhysicalExpr>, &DataType)],
) -> Option<InputStats> {
    let stats = StatisticsContext::new()
        .compute(input.as_ref(), &StatisticsArgs::new())
        .ok()?;
    let schema = input.schema();
    let key_stats: Vec<KeyStats> = keys
        .iter()
        .map(|&(e, t)| {
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
                    ..Default::default()
                };
            };
            let nullable = schema
                .fields()
                .get(col.index())
                .is_none_or(|f| f.is_nullable());
            let range = match (cs.min_value.get_value(), cs.max_value.get_value()) {
                (Some(lo), Some(hi)) => ordinal_of(lo, t).zip(ordinal_of(hi, t)),
                _ => None,
            }
            .filter(|(lo, hi)| lo <= hi);
            let sample = match range {
                Some(_) => None,
                None => sampled_range(input, col.index()),
            };
            KeyStats {
                column: true,
                range: range.or(sample),
                sampled: sample.is_some(),
                may_null: nullable && cs.null_count.get_value() != Some(&0),
            }
        })
        .collect();
    let distinct = keys.iter().try_fold(1u64, |acc, (e, _)| {
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
        distinct: distinct.filter(|_| !keys.is_empty()),
        keys: key_stats,
    })
}

/// Rows read from each of up to [`SAMPLE_WINDOWS`] evenly spaced places of an in-memory
/// partition by [`sampled_range`].
pub(crate) const SAMPLE_WINDOW_ROWS: usize = 1024;

/// Places of an in-memory table [`sampled_range`] reads, shared among its partitions (two at
/// least each: its first and last rows).
pub(crate) const SAMPLE_WINDOWS: usize = 32;

/// The range of column `index` of `input` in a sample of its rows, when `input` is an in-memory
/// table (DataFusion keeps no minimum or maximum for those): [`SAMPLE_WINDOWS`] windows of
/// [`SAMPLE_WINDOW_ROWS`] rows shared among its partitions, each partition's first and last rows
/// included (so a sorted key shows its whole range). Without it `auto` left every in-memory
/// aggregation to DataFusion (no statistics bound the keys), although grouper's `perfect` ran
/// 1.3–2.3× faster over 1 to 256 groups of 2^24 rows (`bench cpu-sweep`, 2 threads). It reads
/// about 32k rows (2k a partition at least): microseconds, where an exact minimum and maximum
/// (a pass over the whole column) would cost a third of such a query. A sample is not a bound:
/// a batch outside it widens the key codec.
///
/// Filters and repartitions above the table are looked through: they drop or move rows, so
/// the table's range still bounds theirs.
pub(crate) fn sampled_range(input: &Arc<dyn ExecutionPlan>, index: usize) -> Option<(i128, i128)> {
    let mut range: Option<(i128, i128)> = None;
    sample_windows(input, index, |window| {
        if let Some((lo, hi)) = grouper_core::keys::ordinal_min_max(window) {
            range = Some(range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
        true
    })?;
    range
}

/// The distinct values of string column `index` of `input`, an in-memory table, in the sample
/// [`sampled_range`] reads, when there are at most `limit`; `None` otherwise (more values, not
/// a string column, not an in-memory table). Likely, not certain: a value outside the sample
/// only widens the dictionary.
pub(crate) fn sampled_strings(
    input: &Arc<dyn ExecutionPlan>,
    index: usize,
    limit: usize,
) -> Option<usize> {
    let mut values: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut strings = true;
    sample_windows(input, index, |window| {
        let all = all_strings(window, |v| {
            if let Some(v) = v {
                if !values.contains(v) {
                    values.insert(v.to_string());
                }
            }
            values.len() <= limit
        });
        strings &= all.is_some();
        all.unwrap_or(false)
    })?;
    (strings && values.len() <= limit).then_some(values.len())
}

/// Calls `f` on each value of `window` (NULL as `None`) while it returns true, when `window`
/// holds strings (Utf8, LargeUtf8, Utf8View): whether every call did; `None` for other types.
fn all_strings(
    window: &arrow::array::ArrayRef,
    f: impl FnMut(Option<&str>) -> bool,
) -> Option<bool> {
    match window.data_type() {
        DataType::Utf8 => Some(window.as_string::<i32>().iter().all(f)),
        DataType::LargeUtf8 => Some(window.as_string::<i64>().iter().all(f)),
        DataType::Utf8View => Some(window.as_string_view().iter().all(f)),
        _ => None,
    }
}

/// About how many distinct values string column `index` of `input`, an in-memory table, holds,
/// from the sample [`sampled_range`] reads: the bias-corrected Chao1 estimate, `d + f1 (f1 - 1)
/// / (2 (f2 + 1))` over the sample's `d` values, `f1` of them seen once and `f2` twice: close
/// to their number for values spread evenly over many rows each; above it where each value
/// has only a few rows (the sample is drawn without replacement: a value a row gives about
/// `d²/2`, so callers cap it by the rows), below it for a skewed column. `None` when `input`
/// is no in-memory table or the column holds no strings, and where the sample's windows hold
/// under 80% of the distinct values that many values spread evenly over the rows would put in
/// them ([`spread_evenly`]: a sorted or clustered column, or rows repeated in pairs, whose
/// sample says little of the other rows). Each value is counted by a 64-bit hash of its bytes.
pub(crate) fn sampled_distinct_strings(
    input: &Arc<dyn ExecutionPlan>,
    index: usize,
) -> Option<u64> {
    let mut hashes: Vec<u64> = Vec::new();
    // Rows and distinct values of each window's slice.
    let mut slices: Vec<(usize, usize)> = Vec::new();
    let mut strings = true;
    sample_windows(input, index, |window| {
        let from = hashes.len();
        strings &= all_strings(window, |v| {
            hashes.extend(v.map(|v| grouper_core::hash::hash_bytes(v.as_bytes())));
            true
        })
        .is_some();
        let mut slice = hashes.get(from..).unwrap_or_default().to_vec();
        slice.sort_unstable();
        slice.dedup();
        slices.push((hashes.len() - from, slice.len()));
        strings
    })?;
    if !strings {
        return None;
    }
    hashes.sort_unstable();
    let (mut d, mut f1, mut f2) = (0u64, 0u64, 0u64);
    for run in hashes.chunk_by(|a, b| a == b) {
        d += 1;
        match run.len() {
            1 => f1 += 1,
            2 => f2 += 1,
            _ => {}
        }
    }
    let estimate = d + f1 * f1.saturating_sub(1) / (2 * (f2 + 1));
    (d > 0 && spread_evenly(estimate, &slices)).then_some(estimate)
}

/// Whether windows of `(rows, distinct values)` hold at least 80% of the distinct values that
/// `values` values drawn evenly would put in them (`values (1 - e^(-rows / values))` each;
/// evenly spread values fill it to within a few percent over the ~32 windows). A column sorted
/// by its values puts each in one stretch of rows: a window of 1,024 rows of one with a million
/// values over 1e7 rows holds about 100 where an even spread of the (far fewer) values its
/// sample shows would put hundreds in it; rows repeated in pairs fill about half.
fn spread_evenly(values: u64, slices: &[(usize, usize)]) -> bool {
    let values = values.max(1) as f64;
    let expected: f64 = slices
        .iter()
        .map(|&(rows, _)| values * -(-(rows as f64) / values).exp_m1())
        .sum();
    let seen: usize = slices.iter().map(|&(_, distinct)| distinct).sum();
    seen as f64 >= 0.8 * expected
}

/// Calls `f` on each window of column `index` that [`sampled_range`] samples (a slice of one
/// batch; a window across batches in several), until `f` returns false; `None` when `input` is
/// not an in-memory table (below filters and repartitions) or has no such column.
fn sample_windows(
    input: &Arc<dyn ExecutionPlan>,
    index: usize,
    mut f: impl FnMut(&arrow::array::ArrayRef) -> bool,
) -> Option<()> {
    let scan = below_row_moves(input)?;
    let mem = memory_source(scan)?;
    // A narrowed table's column is sampled in its declared type.
    let declared = scan.schema().fields().get(index)?.data_type().clone();
    let mut f = |a: &arrow::array::ArrayRef| match a.data_type() == &declared {
        true => f(a),
        false => arrow::compute::cast(a, &declared).is_ok_and(|a| f(&a)),
    };
    let column = match mem.projection() {
        Some(p) => *p.get(index)?,
        None => index,
    };
    // The table's windows shared among its partitions, each keeping its first and last rows:
    // 32 windows of each of 16 partitions (db-benchmark's table on 16 threads) read 512k rows,
    // a millisecond of a 13 ms query, at every run.
    let each = (SAMPLE_WINDOWS / mem.partitions().len().max(1)).max(2);
    for part in mem.partitions() {
        let rows: usize = part.iter().map(RecordBatch::num_rows).sum();
        let last = rows.saturating_sub(SAMPLE_WINDOW_ROWS);
        // Each window's rows, batch by batch: [start, start + window) of the partition. In a
        // partition of fewer rows than its windows hold, each starts where the one before
        // ended (the last one shorter), so no row is read twice: a value counted twice would
        // look repeated to `sampled_distinct_strings`.
        let mut free = 0usize;
        let mut windows = (0..each)
            .map(|w| last * w / (each - 1))
            .filter_map(|start| {
                let start = start.max(free);
                free = start + SAMPLE_WINDOW_ROWS;
                (start < rows).then_some(start)
            })
            .peekable();
        let mut base = 0usize;
        for batch in part {
            let end = base + batch.num_rows();
            let array = batch.columns().get(column)?;
            while let Some(&start) = windows.peek() {
                if start >= end {
                    break;
                }
                let from = start.max(base);
                let to = end.min(start + SAMPLE_WINDOW_ROWS);
                if !f(&array.slice(from - base, to - from)) {
                    return Some(());
                }
                if start + SAMPLE_WINDOW_ROWS > end {
                    break; // the window goes on in the next batch
                }
                windows.next();
            }
            base = end;
        }
    }
    Some(())
}

/// The node below the filters and repartitions over `input` (with the same columns: a filter
/// that projects ends the walk with `None`). They drop or move rows, so what bounds the
/// node's rows bounds theirs (not their order: a repartition interleaves partitions).
pub(crate) fn below_row_moves(input: &Arc<dyn ExecutionPlan>) -> Option<&Arc<dyn ExecutionPlan>> {
    let mut input = input;
    loop {
        if let Some(f) = input.downcast_ref::<FilterExec>() {
            if f.projection().is_some() {
                return None;
            }
            input = f.input();
        } else if let Some(r) = input.downcast_ref::<RepartitionExec>() {
            input = r.input();
        } else if let Some(c) = input.downcast_ref::<CoalescePartitionsExec>() {
            input = c.input();
        } else {
            return Some(input);
        }
    }
}

/// The in-memory table `plan` scans, when it is one (a narrowed table's stored batches, below
/// their widening: [`crate::narrow_table`]).
pub(crate) fn memory_source(plan: &Arc<dyn ExecutionPlan>) -> Option<&MemorySourceConfig> {
    let plan = match plan.downcast_ref::<crate::narrow_table::WidenExec>() {
        Some(w) => w.input(),
        None => plan,
    };
    let ds = plan.downcast_ref::<DataSourceExec>()?;
    (ds.data_source().as_ref() as &dyn std::any::Any).downcast_ref::<MemorySourceConfig>()
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::prelude::SessionContext;

    /// The scan of `SELECT b FROM t`, `t` in memory: `a` (0), `b` sorted from -5 over
    /// `rows` rows cut into `parts` partitions of uneven batches.
    async fn scan(rows: i64, parts: i64) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("b", DataType::Int64, false),
        ]));
        let per = rows / parts;
        let partitions = (0..parts)
            .map(|p| {
                let (lo, hi) = (p * per, if p + 1 == parts { rows } else { (p + 1) * per });
                let mut batches = Vec::new();
                let mut start = lo;
                let mut len = 1;
                while start < hi {
                    let end = hi.min(start + len);
                    batches.push(
                        RecordBatch::try_new(
                            Arc::clone(&schema),
                            vec![
                                Arc::new(Int32Array::from(vec![0; (end - start) as usize])),
                                Arc::new(Int64Array::from_iter_values((start..end).map(|r| r - 5))),
                            ],
                        )
                        .unwrap(),
                    );
                    start = end;
                    len = len * 3 + 1;
                }
                batches
            })
            .collect();
        let ctx = SessionContext::new();
        let table = datafusion::catalog::MemTable::try_new(schema, partitions).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        crate::test_support::physical_plan(&ctx, "SELECT b FROM t").await
    }

    #[tokio::test]
    async fn a_sample_of_in_memory_strings_counts_few_values() {
        // `flag`: 3 values, one of them only in the last rows (the sample reads the last rows);
        // `name`: a value a row; `n`: not strings.
        let schema = Arc::new(Schema::new(vec![
            Field::new("flag", DataType::Utf8, true),
            Field::new("name", DataType::Utf8View, false),
            Field::new("n", DataType::Int64, false),
        ]));
        let rows = 100_000usize;
        let flag = (0..rows).map(|r| match r {
            _ if r + 10 >= rows => Some("R"),
            _ if r % 7 == 0 => None,
            _ => Some(["A", "N"][r % 2]),
        });
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(arrow::array::StringArray::from_iter(flag)),
                Arc::new(arrow::array::StringViewArray::from_iter_values(
                    (0..rows).map(|r| format!("name {r}")),
                )),
                Arc::new(Int64Array::from_iter_values(0..rows as i64)),
            ],
        )
        .unwrap();
        let ctx = SessionContext::new();
        let table = datafusion::catalog::MemTable::try_new(schema, vec![vec![batch]]).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        let plan = crate::test_support::physical_plan(&ctx, "SELECT flag, name, n FROM t").await;
        assert_eq!(sampled_strings(&plan, 0, 4), Some(3));
        assert_eq!(sampled_strings(&plan, 0, 2), None, "more than the limit");
        assert_eq!(sampled_strings(&plan, 1, 4), None);
        assert_eq!(sampled_strings(&plan, 2, 4), None, "not strings");
        assert_eq!(sampled_strings(&plan, 3, 4), None, "no such column");
    }

    #[tokio::test]
    async fn a_sample_of_in_memory_strings_estimates_their_distinct_values() {
        // 1e6 rows in 2 partitions: `u` 131,072 values at random rows, `few` 100, `unique` a
        // value a row, `sorted` 100,000 values each on 10 rows in a row, `n` no strings,
        // `pairs` a value on every two rows in a row.
        let schema = Arc::new(Schema::new(vec![
            Field::new("u", DataType::Utf8, false),
            Field::new("few", DataType::Utf8View, false),
            Field::new("unique", DataType::LargeUtf8, false),
            Field::new("sorted", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
            Field::new("pairs", DataType::Utf8, false),
        ]));
        let rows = 1_000_000u64;
        let spread = |r: u64, values: u64| grouper_core::hash::murmur3(r) % values;
        let batch = |from: u64, to: u64| {
            let strings = |f: &dyn Fn(u64) -> String| (from..to).map(f).collect::<Vec<_>>();
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(arrow::array::StringArray::from(strings(&|r| {
                        format!("id{:010}", spread(r, 1 << 17))
                    }))),
                    Arc::new(arrow::array::StringViewArray::from_iter_values(strings(
                        &|r| format!("f{}", spread(r, 100)),
                    ))),
                    Arc::new(arrow::array::LargeStringArray::from(strings(&|r| {
                        format!("row {r}")
                    }))),
                    Arc::new(arrow::array::StringArray::from(strings(&|r| {
                        format!("s{:08}", r / 10)
                    }))),
                    Arc::new(Int64Array::from_iter_values((from..to).map(|r| r as i64))),
                    Arc::new(arrow::array::StringArray::from(strings(&|r| {
                        format!("p{:020}", grouper_core::hash::murmur3(r / 2))
                    }))),
                ],
            )
            .unwrap()
        };
        let part = |from: u64, to: u64| {
            (from..to)
                .step_by(8192)
                .map(|b| batch(b, to.min(b + 8192)))
                .collect::<Vec<_>>()
        };
        let partitions = vec![part(0, rows / 2), part(rows / 2, rows)];
        let ctx = SessionContext::new();
        let table = datafusion::catalog::MemTable::try_new(schema, partitions).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        let plan = crate::test_support::physical_plan(
            &ctx,
            "SELECT u, few, unique, sorted, n, pairs FROM t",
        )
        .await;
        let u = sampled_distinct_strings(&plan, 0).unwrap();
        assert!((100_000..170_000).contains(&u), "{u}");
        assert_eq!(sampled_distinct_strings(&plan, 1), Some(100));
        // A value a row: far above the rows (callers cap it by them).
        let unique = sampled_distinct_strings(&plan, 2).unwrap();
        assert!(unique > rows, "{unique}");
        assert_eq!(sampled_distinct_strings(&plan, 3), None, "sorted");
        assert_eq!(sampled_distinct_strings(&plan, 4), None, "not strings");
        // 500,000 values each on two rows in a row: the windows hold half the values an even
        // spread of the ~16k the sample shows would put in them.
        assert_eq!(sampled_distinct_strings(&plan, 5), None, "rows in pairs");
        assert_eq!(sampled_distinct_strings(&plan, 6), None, "no such column");
    }

    #[tokio::test]
    async fn a_sample_of_sorted_in_memory_rows_spans_their_range() {
        for (rows, parts) in [(1, 1), (1000, 1), (100_000, 3), (1_000_000, 2)] {
            let plan = scan(rows, parts).await;
            assert_eq!(
                sampled_range(&plan, 0),
                Some((-5, i128::from(rows) - 6)),
                "{rows} rows in {parts} partitions"
            );
            assert_eq!(sampled_range(&plan, 1), None, "no such column");
        }
    }
}
