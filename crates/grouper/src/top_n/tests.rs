//! Every replaced plan answers as DataFusion's sort plan does; plans it must not touch keep
//! their sort.

use std::sync::Arc;

use arrow::array::{Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::contains_top_per_group;
use crate::test_support::answer_lines;
use crate::{Backend, GrouperConfig};

/// `rows` random rows in `parts` partitions: `k` (0..groups, 3% NULL), `s` (a few strings),
/// `v` (doubles with repeats, NULLs and NaNs), `w` (integers), `id` (unique).
fn table(rows: usize, groups: i64, parts: usize, seed: u64) -> MemTable {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("s", DataType::Utf8, false),
        Field::new("v", DataType::Float64, true),
        Field::new("w", DataType::Int32, false),
        Field::new("id", DataType::Int64, false),
    ]));
    let mut rng = SmallRng::seed_from_u64(seed);
    let per = rows.div_ceil(parts);
    let partitions = (0..parts)
        .map(|p| {
            let lo = p * per;
            let hi = rows.min(lo + per);
            (lo..hi)
                .step_by(4096)
                .map(|start| {
                    let end = hi.min(start + 4096);
                    let n = end - start;
                    let k: Int64Array = (0..n)
                        .map(|_| (rng.random::<f64>() > 0.03).then(|| rng.random_range(0..groups)))
                        .collect();
                    let s = StringArray::from_iter_values(
                        (0..n).map(|_| ["a", "bb", "ccc"][rng.random_range(0..3)]),
                    );
                    let v: Float64Array = (0..n)
                        .map(|_| match rng.random_range(0..100) {
                            0..=2 => None,
                            3 => Some(f64::NAN),
                            _ => Some(f64::from(rng.random_range(-50..50)) / 4.0),
                        })
                        .collect();
                    let w = Int32Array::from_iter_values((0..n).map(|_| rng.random_range(0..1000)));
                    let id = Int64Array::from_iter_values((start..end).map(|i| i as i64));
                    RecordBatch::try_new(
                        Arc::clone(&schema),
                        vec![
                            Arc::new(k),
                            Arc::new(s),
                            Arc::new(v),
                            Arc::new(w),
                            Arc::new(id),
                        ],
                    )
                    .unwrap()
                })
                .collect()
        })
        .collect();
    MemTable::try_new(schema, partitions).unwrap()
}

/// The answer's rows as text (sorted unless `ordered`) and whether the plan selected per group
/// and numbered the rows itself (no window left).
async fn run(
    config: GrouperConfig,
    t: &Arc<MemTable>,
    sql: &str,
    ordered: bool,
) -> (Vec<String>, bool) {
    let ctx: SessionContext = crate::session_context(&config).unwrap();
    ctx.register_table("t", Arc::clone(t) as _).unwrap();
    let plan = crate::test_support::physical_plan(&ctx, sql).await;
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    let shown = datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string();
    (
        answer_lines(&batches, ordered),
        contains_top_per_group(&plan) && !shown.contains("BoundedWindowAggExec"),
    )
}

/// A session of `backend` on `threads` threads.
fn on(backend: Backend, threads: usize) -> GrouperConfig {
    GrouperConfig {
        backend,
        threads: Some(threads),
        ..Default::default()
    }
}

#[tokio::test]
async fn top_rows_per_group_equal_the_sort_plans() {
    let window =
        |k: &str, o: &str| format!("row_number() OVER (PARTITION BY {k} ORDER BY {o}) AS rn");
    // (query, ordered output compared as is, replaced)
    let cases: Vec<(String, bool, bool)> = vec![
        // db-benchmark q8 (the selected v, not which of tied rows)
        (
            format!("SELECT k, v FROM (SELECT k, v, {} FROM t WHERE v IS NOT NULL) q WHERE rn <= 2", window("k", "v DESC")),
            false,
            true,
        ),
        (
            format!("SELECT k, v, rn FROM (SELECT k, s, v, {} FROM t) q WHERE rn < 4", window("k", "v ASC NULLS FIRST")),
            false,
            true,
        ),
        (
            format!("SELECT k, w, rn FROM (SELECT k, w, {} FROM t) q WHERE 1 >= rn", window("k", "w DESC, v")),
            false,
            true,
        ),
        (
            format!("SELECT k, w, rn FROM (SELECT k, w, {} FROM t) q WHERE rn <= 5 ORDER BY k, rn", window("k", "w")),
            true,
            true,
        ),
        // an ordering the window's sort gives and a parent relies on
        (
            format!("SELECT k, rn, w FROM (SELECT k, w, {} FROM t) q WHERE rn <= 3 ORDER BY k NULLS FIRST, rn", window("k", "w DESC")),
            true,
            true,
        ),
        // not replaced: rank, a second window function, a string order, n < 1, a string key
        // (no range bounds its groups), a key of few rows a group
        (
            format!("SELECT s, w FROM (SELECT s, w, {} FROM t) q WHERE rn <= 2", window("s", "w")),
            false,
            false,
        ),
        (
            format!("SELECT id, w FROM (SELECT id, w, {} FROM t) q WHERE rn <= 2", window("id", "w")),
            false,
            false,
        ),
        (
            "SELECT k, v FROM (SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v) AS rn FROM t) q WHERE rn <= 2".into(),
            false,
            false,
        ),
        (
            "SELECT k, w, c FROM (SELECT k, w, row_number() OVER (PARTITION BY k ORDER BY w) AS rn, count(*) OVER (PARTITION BY k ORDER BY w) AS c FROM t) q WHERE rn <= 2".into(),
            false,
            false,
        ),
        (
            format!("SELECT k, s FROM (SELECT k, s, {} FROM t) q WHERE rn <= 2", window("k", "s")),
            false,
            false,
        ),
        (
            format!("SELECT k, w FROM (SELECT k, w, {} FROM t) q WHERE rn < 1", window("k", "w")),
            false,
            false,
        ),
    ];
    // Tests compact the candidates every 4096 retained rows: the larger tables pass through
    // several compactions. One row is too few for any group to pay back.
    for (rows, groups, parts, seed) in [(1, 1, 1, 1), (5000, 7, 2, 2), (60_000, 300, 3, 3)] {
        let t = Arc::new(table(rows, groups, parts, seed));
        for (sql, ordered, replaced) in &cases {
            let (want, _) = run(on(Backend::DataFusion, 3), &t, sql, *ordered).await;
            let (got, top) = run(on(Backend::Cpu, 3), &t, sql, *ordered).await;
            assert_eq!(top, *replaced && rows > 1, "{sql}");
            assert_eq!(got, want, "{rows} rows, {groups} groups: {sql}");
        }
    }
}

#[tokio::test]
async fn a_memory_limit_compacts_instead_of_failing() {
    // Every batch a slice of one 200k-row table: each reports the whole table's buffers
    // (~6 MB), over a 2 MB limit from the first batch on; keeping only the candidates' rows
    // fits it.
    let whole = table(200_000, 50, 1, 11);
    let batches = whole.batches[0].read().await.clone();
    let one = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    let slices: Vec<RecordBatch> = (0..one.num_rows())
        .step_by(4096)
        .map(|s| one.slice(s, 4096.min(one.num_rows() - s)))
        .collect();
    let t = Arc::new(MemTable::try_new(one.schema(), vec![slices]).unwrap());
    let sql = "SELECT k, w, rn FROM (SELECT k, w, row_number() OVER (PARTITION BY k ORDER BY w DESC) AS rn FROM t) q WHERE rn <= 2";
    let (want, _) = run(on(Backend::DataFusion, 1), &t, sql, false).await;
    let limited = GrouperConfig {
        memory_limit: Some(2 << 20),
        ..on(Backend::Cpu, 1)
    };
    let (got, top) = run(limited, &t, sql, false).await;
    assert!(top);
    assert_eq!(got, want);
}

/// Order words compare as the sort orders their rows: for one column of each direct type
/// (ascending and descending, NULLs first and last, NaNs, signed zeros, extremes) and for
/// several columns through the row format, the words' order equals Arrow's sort of the rows.
#[test]
fn order_words_sort_as_arrow_sorts() {
    use arrow::array::{ArrayRef, Float32Array, UInt64Array};
    use arrow::compute::SortOptions;
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_expr::PhysicalSortExpr;

    let mut rng = SmallRng::seed_from_u64(7);
    let n = 3000;
    let pick = |rng: &mut SmallRng, special: &[f64]| -> Option<f64> {
        match rng.random_range(0..10) {
            0 => None,
            1 if !special.is_empty() => Some(special[rng.random_range(0..special.len())]),
            _ => Some(f64::from(rng.random_range(-20..20))),
        }
    };
    let specials = [
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        f64::MAX,
    ];
    let f64s: Float64Array = (0..n).map(|_| pick(&mut rng, &specials)).collect();
    let f32s: Float32Array = (0..n)
        .map(|_| pick(&mut rng, &specials).map(|v| v as f32))
        .collect();
    let i64s: Int64Array = (0..n)
        .map(|_| pick(&mut rng, &[i64::MIN as f64, i64::MAX as f64]).map(|v| v as i64))
        .collect();
    let u64s: UInt64Array = (0..n)
        .map(|_| pick(&mut rng, &[u64::MAX as f64]).map(|v| v.abs() as u64))
        .collect();
    let i32s: Int32Array = (0..n)
        .map(|_| pick(&mut rng, &[]).map(|v| v as i32))
        .collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("f64", Arc::new(f64s)),
        ("f32", Arc::new(f32s)),
        ("i64", Arc::new(i64s)),
        ("u64", Arc::new(u64s)),
        ("i32", Arc::new(i32s)),
    ];
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, c)| Field::new(*name, c.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        columns.iter().map(|(_, c)| Arc::clone(c)).collect(),
    )
    .unwrap();
    let orders: Vec<Vec<&str>> = vec![
        vec!["f64"],
        vec!["f32"],
        vec!["i64"],
        vec!["u64"],
        vec!["i32"],
        vec!["i32", "f64"],
        vec!["i64", "u64", "f32"],
    ];
    for names in orders {
        for (descending, nulls_first) in
            [(false, false), (false, true), (true, false), (true, true)]
        {
            let options = SortOptions {
                descending,
                nulls_first,
            };
            let exprs: Vec<PhysicalSortExpr> = names
                .iter()
                .map(|c| PhysicalSortExpr::new(col(c, &schema).unwrap(), options))
                .collect();
            let mut order = super::order::OrderWords::new(&exprs, &schema).unwrap();
            let mut words = Vec::new();
            order.encode(&batch, &mut words).unwrap();
            let width = order.width().unwrap();
            let key = |r: usize| &words[r * width..(r + 1) * width];
            let rows = arrow::row::RowConverter::new(
                exprs
                    .iter()
                    .map(|e| {
                        arrow::row::SortField::new_with_options(
                            e.expr.data_type(&schema).unwrap(),
                            options,
                        )
                    })
                    .collect(),
            )
            .unwrap()
            .convert_columns(
                &names
                    .iter()
                    .map(|c| Arc::clone(batch.column_by_name(c).unwrap()))
                    .collect::<Vec<_>>(),
            )
            .unwrap();
            // Arrow's row format is its sort order as bytes: every pair of rows (repeats and
            // specials among them) compares the same way in words.
            for _ in 0..20_000 {
                let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
                let want = rows.row(a).cmp(&rows.row(b));
                assert_eq!(
                    key(a).cmp(key(b)),
                    want,
                    "{names:?} {options:?} rows {a} {b}"
                );
                assert_eq!(super::order::before(key(a), key(b)), want.is_lt());
            }
        }
    }
}

/// Group ids are numbered first seen, first numbered, whether the key is indexed directly,
/// re-based to lower values, widened, or handed to DataFusion's hash table midway (a range past
/// the test's 4096 values), NULL keys one group; every key emits in id order as its type.
#[test]
fn group_ids_number_keys_as_first_seen() {
    use super::groups::GroupIds;
    use arrow::array::{Array, ArrayRef};
    use std::collections::HashMap;

    let mut rng = SmallRng::seed_from_u64(5);
    for (t, wide_at) in [
        (DataType::Int64, Some(6)),
        (DataType::Int32, None),
        (DataType::Int16, Some(3)),
        (DataType::UInt32, Some(0)),
    ] {
        let mut ids = GroupIds::new(std::slice::from_ref(&t)).unwrap();
        let mut seen: HashMap<Option<i64>, usize> = HashMap::new();
        let mut order: Vec<Option<i64>> = Vec::new();
        let mut gids = Vec::new();
        for batch in 0..10 {
            // Ranges that move down (re-base) and up (widen); one batch far away.
            let (lo, span) = match (batch, wide_at) {
                (b, Some(w)) if b == w => (20_000, 10),
                (b, _) => (1000 - 90 * b as i64, 50 + 40 * b as i64),
            };
            let values: Vec<Option<i64>> = (0..500)
                .map(|_| (rng.random::<f64>() > 0.05).then(|| lo + rng.random_range(0..span)))
                .collect();
            let key: ArrayRef = Arc::new(values.iter().copied().collect::<Int64Array>());
            let key = arrow::compute::cast(&key, &t).unwrap();
            ids.intern(&[key], &mut gids).unwrap();
            let want: Vec<usize> = values
                .iter()
                .map(|v| {
                    *seen.entry(*v).or_insert_with(|| {
                        order.push(*v);
                        order.len() - 1
                    })
                })
                .collect();
            assert_eq!(gids, want, "{t} batch {batch}");
            assert_eq!(ids.len(), order.len());
        }
        let emitted = ids.emit().unwrap();
        assert_eq!(emitted[0].data_type(), &t);
        let as_i64 = arrow::compute::cast(&emitted[0], &DataType::Int64).unwrap();
        let got: Vec<Option<i64>> = as_i64
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .iter()
            .collect();
        assert_eq!(got, order, "{t}");
    }
}
