//! The GPU at run time, against the CPU reference and the interpreter on the device: fused
//! filters and expressions (every operator, NULLs, errors raised in the kernel), clear errors,
//! empty inputs and global aggregates, the tuner switching launch shapes between chunks and the
//! plan changing as groups outgrow the estimate, both over one table.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Int32Array, Int64Array,
    StringArray, StringViewArray,
};
use arrow::compute::filter as keep_rows;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use grouper_core::agg::{AggKind, AggregateSpec};
use grouper_core::compare::same_groups;
use grouper_core::expr::{BinOp, Expr, Scalar};
use grouper_core::keys::ordinal_min_max;
use grouper_core::tune::Hyper;
use grouper_core::{reference, GrouperError, InputBatch, QuerySpec};
use grouper_gpu::{
    ColumnBounds, GpuOptions, GpuOutput, GpuParams, GpuQuery, GpuStrategy, Prepared,
};

use crate::gpu::{
    case, check_all, have_gpu, keyed, run_gpu, transfer, values, xorshift, Case, KeyKind,
};

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn fused_filter_and_expressions_match_the_interpreter() {
    if !have_gpu() {
        return;
    }
    // A Q1-like shape: flags as keys, decimal arithmetic in the arguments, a date filter, a
    // CASE and casts; the reference evaluates the same IR row by row on the CPU.
    let rows = 50_000;
    let mut r = xorshift(99);
    let flag: ArrayRef = Arc::new(StringArray::from_iter(
        (0..rows).map(|_| Some(["A", "N", "R"][(r() % 3) as usize])),
    ));
    let status: ArrayRef = Arc::new(StringViewArray::from_iter(
        (0..rows).map(|_| Some(["F", "O"][(r() % 2) as usize])),
    ));
    let dec = |scale_max: u64, r: &mut dyn FnMut() -> u64| -> ArrayRef {
        Arc::new(
            Decimal128Array::from_iter(
                (0..rows).map(|i| (i % 17 != 0).then(|| (r() % scale_max) as i128)),
            )
            .with_precision_and_scale(15, 2)
            .unwrap(),
        )
    };
    let price = dec(10_000_000, &mut r);
    let disc = dec(11, &mut r);
    let tax = dec(9, &mut r);
    let date: ArrayRef = Arc::new(Date32Array::from_iter(
        (0..rows).map(|_| Some(8000 + (r() % 2600) as i32)),
    ));
    let qty: ArrayRef = Arc::new(Int32Array::from_iter(
        (0..rows).map(|i| (i % 13 != 0).then(|| (r() % 50) as i32)),
    ));
    let cols = vec![flag, status, price, disc, tax, date, qty];
    let d = |p, s| DataType::Decimal128(p, s);
    let col = |i: usize| Box::new(Expr::column(i, cols[i].data_type().clone()));
    let lit_dec = |v: i128, p, s| {
        Box::new(Expr::Literal {
            value: Scalar::Int(v),
            data_type: d(p, s),
        })
    };
    let bin = |op, l: Box<Expr>, rr: Box<Expr>, t: DataType| {
        Box::new(Expr::Binary {
            op,
            left: l,
            right: rr,
            data_type: t,
        })
    };
    let one_minus_disc = bin(BinOp::Sub, lit_dec(100, 15, 2), col(3), d(16, 2));
    let one_plus_tax = bin(BinOp::Add, lit_dec(100, 15, 2), col(4), d(16, 2));
    let disc_price = bin(BinOp::Mul, col(2), one_minus_disc, d(32, 4));
    let charge = bin(BinOp::Mul, disc_price.clone(), one_plus_tax, d(38, 6));
    let filter = Expr::Binary {
        op: BinOp::Or,
        left: bin(
            BinOp::LtEq,
            col(5),
            Box::new(Expr::Literal {
                value: Scalar::Int(10471),
                data_type: DataType::Date32,
            }),
            DataType::Boolean,
        ),
        right: bin(
            BinOp::Eq,
            col(6),
            Box::new(Expr::Literal {
                value: Scalar::Int(7),
                data_type: DataType::Int32,
            }),
            DataType::Boolean,
        ),
        data_type: DataType::Boolean,
    };
    let case_qty = Expr::Case {
        whens: vec![(
            *bin(
                BinOp::Gt,
                col(6),
                Box::new(Expr::Literal {
                    value: Scalar::Int(25),
                    data_type: DataType::Int32,
                }),
                DataType::Boolean,
            ),
            Expr::Cast {
                expr: col(6),
                to: DataType::Int64,
            },
        )],
        otherwise: Some(Box::new(Expr::Negative(Box::new(Expr::Cast {
            expr: col(6),
            to: DataType::Int64,
        })))),
        data_type: DataType::Int64,
    };
    let args: Vec<(AggregateSpec, Option<Expr>)> = vec![
        (
            AggregateSpec::new(AggKind::Sum, d(32, 4)),
            Some(*disc_price),
        ),
        (AggregateSpec::new(AggKind::Sum, d(38, 6)), Some(*charge)),
        (
            AggregateSpec::new(AggKind::Avg, DataType::Float64),
            Some(Expr::Cast {
                expr: col(2),
                to: DataType::Float64,
            }),
        ),
        (
            AggregateSpec::new(AggKind::Sum, DataType::Int64),
            Some(case_qty),
        ),
        (AggregateSpec::new(AggKind::Min, d(15, 2)), Some(*col(3))),
        (AggregateSpec::count_star(), None),
    ];
    // Decimal(32,4) * Decimal(16,2) is capped at Decimal(38,6), as DataFusion types Q1's charge.
    assert_eq!(args[1].1.as_ref().unwrap().data_type(), d(38, 6));
    let query = GpuQuery {
        columns: cols.iter().map(|c| c.data_type().clone()).collect(),
        filter: Some(filter.clone()),
        keys: vec![0, 1],
        aggregates: args.clone(),
    };
    // Reference: interpret the filter and the arguments, then aggregate.
    let mask = filter.evaluate(&cols, rows).unwrap();
    let mask = mask.as_any().downcast_ref::<BooleanArray>().unwrap();
    let mask: BooleanArray = mask.iter().map(|m| Some(m == Some(true))).collect();
    let keep = |a: &ArrayRef| keep_rows(a.as_ref(), &mask).unwrap();
    let spec = QuerySpec {
        key_types: vec![cols[0].data_type().clone(), cols[1].data_type().clone()],
        aggregates: args.iter().map(|(s, _)| s.clone()).collect(),
    };
    let kept_rows = mask.true_count();
    let input = InputBatch::try_new(
        &spec,
        vec![keep(&cols[0]), keep(&cols[1])],
        args.iter()
            .map(|(_, e)| e.as_ref().map(|e| keep(&e.evaluate(&cols, rows).unwrap())))
            .collect(),
        kept_rows,
    )
    .unwrap();
    let expected = reference::aggregate(&spec, &[input]).unwrap();
    let schema = Arc::new(Schema::new(
        cols.iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(schema, cols.clone()).unwrap();
    let c = Case {
        query,
        batches: (0..10).map(|i| batch.slice(i * 5000, 5000)).collect(),
        spec,
        reference: vec![],
    };
    check_all(&c, &expected, GpuParams::default(), 16_384);
    let same = |what: &str, out: GpuOutput| {
        same_groups(&expected, &out.columns, 2).unwrap_or_else(|e| panic!("{what}: {e}"));
        out.report
    };

    // Filter precomputation: the selection computed on the CPU, one bit per row sent in
    // place of the filter's date column (qty stays: an argument reads it).
    let strategies = [
        None,
        Some(GpuStrategy::PERFECT_SHARED),
        Some(GpuStrategy::GLOBAL),
        Some(GpuStrategy::BLOCK_LOCAL),
        Some(GpuStrategy::HASH_PARTITIONED),
    ];
    for (i, s) in strategies.into_iter().enumerate() {
        let opts = GpuOptions {
            strategy: s,
            cpu_filter: true,
            batch_rows: 16_384,
            ..transfer(i)
        };
        let run = Prepared::new(&c.query, &c.batches, &opts).and_then(|mut p| p.run());
        let r = same(&format!("cpu filter, {s:?}"), run.unwrap());
        assert!(r.cpu_filter, "{r:?}");
        assert!(!r.encodings.iter().any(|e| e.starts_with("#5 ")), "{r:?}");
    }

    // Streaming from a scan: planned from each column's bounds, batches pulled one by one
    // (chunks of 8192 rows cut across them), in every transfer form.
    let bounds = bounds_of(&c.batches);
    for (i, s) in strategies.into_iter().enumerate() {
        for (compress, zero_copy, cpu_filter) in [
            (true, false, false),
            (false, false, false),
            (true, true, true),
            (true, false, true),
        ] {
            let opts = GpuOptions {
                strategy: s,
                compress,
                zero_copy,
                cpu_filter,
                batch_rows: 8192,
                ..Default::default()
            };
            let what = format!("streamed {s:?} {opts:?}");
            let out = run_streamed(&c, &bounds, &opts, 1 + i % 2)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let r = same(&what, out);
            assert!(
                r.from_scan && r.rows == rows as u64 && r.chunks == 7,
                "{what}: {r:?}"
            );
        }
    }
    // Statistics that the data contradicts stop the run; the caller then collects.
    let mut narrow = bounds.clone();
    narrow[2].range = narrow[2].range.map(|(lo, hi)| (lo, hi / 4));
    let mut no_nulls = bounds.clone();
    no_nulls[3].may_null = false;
    for (what, b) in [("range", &narrow), ("NULLs", &no_nulls)] {
        match run_streamed(&c, b, &GpuOptions::default(), 1) {
            Err(GrouperError::OutsidePlan(_)) => {}
            other => panic!(
                "{what}: expected OutsidePlan, got {:?}",
                other.map(|o| o.report)
            ),
        }
    }
    // A group key outside its bounds, even sent raw.
    let by_qty = GpuQuery {
        keys: vec![6],
        ..c.query.clone()
    };
    let mut narrow_key = bounds.clone();
    narrow_key[6].range = narrow_key[6].range.map(|(lo, hi)| (lo, hi - 1));
    let raw = GpuOptions {
        compress: false,
        ..Default::default()
    };
    let streamed = Case {
        query: by_qty,
        batches: c.batches.clone(),
        spec: c.spec.clone(),
        reference: vec![],
    };
    assert!(matches!(
        run_streamed(&streamed, &narrow_key, &raw, 1),
        Err(GrouperError::OutsidePlan(_))
    ));
    let out = run_streamed(&streamed, &bounds, &raw, 1).unwrap();
    assert_eq!(out.num_rows, 51, "50 quantities and NULL");
}

/// Each column's statistics as a Parquet footer would give them: min/max and whether any
/// value is NULL.
fn bounds_of(batches: &[RecordBatch]) -> Vec<ColumnBounds> {
    let n = batches.first().map_or(0, |b| b.num_columns());
    (0..n)
        .map(|c| ColumnBounds {
            range: batches
                .iter()
                .filter_map(|b| ordinal_min_max(b.column(c)))
                .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1))),
            may_null: batches.iter().any(|b| b.column(c).null_count() > 0),
        })
        .collect()
}

/// Runs `c` as a scan streams it: planned from `bounds` and the `first` batches, then the rest
/// pulled one at a time.
fn run_streamed(
    c: &Case,
    bounds: &[ColumnBounds],
    opts: &GpuOptions,
    first: usize,
) -> grouper_core::Result<GpuOutput> {
    let (head, tail) = c.batches.split_at(first);
    let mut p = Prepared::streaming(&c.query, head, bounds, None, opts)?;
    let mut rest = tail.iter().cloned();
    let mut next = move || rest.next().map(Ok);
    p.run_stream(head.to_vec(), &mut next)
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn errors_are_clear() {
    if !have_gpu() {
        return;
    }
    // SUM(Int64) overflow is an error, not a wrapped value.
    let k: ArrayRef = Arc::new(Int32Array::from(vec![1, 1, 2]));
    let v: ArrayRef = Arc::new(Int64Array::from(vec![i64::MAX, 1, 5]));
    let c = case(
        vec![k.clone()],
        vec![v],
        &[(AggregateSpec::new(AggKind::Sum, DataType::Int64), Some(0))],
        1,
    );
    for s in [GpuStrategy::PERFECT_SHARED, GpuStrategy::GLOBAL] {
        let opts = GpuOptions {
            strategy: Some(s),
            ..Default::default()
        };
        let err = Prepared::new(&c.query, &c.batches, &opts)
            .and_then(|mut p| p.run())
            .unwrap_err();
        assert!(matches!(err, GrouperError::Overflow { .. }), "{s}: {err}");
    }
    // Integer division by zero in a fused expression.
    let d: ArrayRef = Arc::new(Int64Array::from(vec![3, 0, 1]));
    let mut c = case(
        vec![k],
        vec![d.clone()],
        &[(AggregateSpec::new(AggKind::Sum, DataType::Int64), Some(0))],
        1,
    );
    c.query.aggregates[0].1 = Some(Expr::Binary {
        op: BinOp::Div,
        left: Box::new(Expr::Literal {
            value: Scalar::Int(10),
            data_type: DataType::Int64,
        }),
        right: Box::new(Expr::column(1, DataType::Int64)),
        data_type: DataType::Int64,
    });
    let err = Prepared::new(&c.query, &c.batches, &GpuOptions::default())
        .and_then(|mut p| p.run())
        .unwrap_err();
    assert!(err.to_string().contains("division by zero"), "{err}");
    // A strategy that does not apply says why.
    let wide: ArrayRef = Arc::new(Int64Array::from(vec![0, i64::MAX / 2]));
    let one: ArrayRef = Arc::new(Int64Array::from(vec![1, 1]));
    let c = case(
        vec![wide],
        vec![one],
        &[(AggregateSpec::count_star(), None)],
        1,
    );
    let opts = GpuOptions {
        strategy: Some(GpuStrategy::PERFECT_SHARED),
        ..Default::default()
    };
    assert!(matches!(
        Prepared::new(&c.query, &c.batches, &opts),
        Err(GrouperError::InvalidOption(_))
    ));
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn empty_input_and_global_aggregates() {
    if !have_gpu() {
        return;
    }
    let (vals, aggs) = values(0, 0, 1);
    let c = case(vec![], vals, &aggs, 1);
    let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
    let got = run_gpu(&c.query, &c.batches, None, GpuOptions::default()).unwrap();
    same_groups(&expected, &got, 0).unwrap();
    assert_eq!(
        got[0].len(),
        1,
        "a global aggregate over no rows has one row"
    );
    let (vals, aggs) = values(10_000, 20, 2);
    let c = case(vec![], vals, &aggs, 2);
    let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
    check_all(&c, &expected, GpuParams::default(), 3000);
}

/// The runtime tuner switches launch shapes (and strategies of the same table kind) between
/// chunks; the table carries across them, through growth and across runs, and under a memory
/// limit that rules some shapes out.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn the_tuner_switches_shapes_between_chunks_and_keeps_the_table() {
    if !have_gpu() {
        return;
    }
    let rows = 1 << 18;
    // (key kind, groups): a direct table (small domain), a hash table with few groups (private
    // tables join the starts), a hash table with many.
    for (kind, groups) in [
        (KeyKind::I16, 600u64),
        (KeyKind::U64Scattered, 20),
        (KeyKind::I64, 5000),
    ] {
        let keys = keyed(&[kind], rows, groups, 5, false, false, groups);
        let (vals, aggs) = values(rows, 5, 11);
        let c = case(keys, vals, &aggs, 4);
        let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
        for memory_limit in [None, Some(256u64 << 20)] {
            // A short search (every new shape is an NVRTC compile): patience 3.
            let opts = GpuOptions {
                params: GpuParams {
                    initial_groups: Some(1),
                    ..Default::default()
                },
                batch_rows: 1 << 12,
                memory_limit,
                tune: Some(Hyper {
                    patience: 3,
                    ..Hyper::default()
                }),
                ..Default::default()
            };
            let mut p = Prepared::new(&c.query, &c.batches, &opts).unwrap();
            for run in 0..2 {
                let out = p.run().unwrap();
                same_groups(&expected, &out.columns, 1)
                    .unwrap_or_else(|e| panic!("{kind:?} {memory_limit:?} run {run}: {e}"));
                let t = out.report.tuning.as_ref().expect("the tuner ran");
                assert!(t.steps.len() >= 3, "{kind:?}: {t}");
                let strategies: std::collections::HashSet<_> =
                    t.steps.iter().map(|s| s.config.strategy).collect();
                assert!(strategies.len() >= 2, "{kind:?}: one strategy only: {t}");
                assert!(strategies
                    .iter()
                    .all(|s| s.is_perfect() == out.report.strategy.is_perfect()));
                assert_eq!(t.batches.0, 64 * (run + 1), "{t}");
                eprintln!("{kind:?} {memory_limit:?} run {run}: {t}");
            }
        }
    }
    // Off (the default), the planner's shape runs throughout.
    let keys = keyed(&[KeyKind::I64], 1 << 14, 100, 0, false, false, 3);
    let (vals, aggs) = values(1 << 14, 0, 3);
    let c = case(keys, vals, &aggs, 1);
    let opts = GpuOptions {
        batch_rows: 1 << 12,
        ..Default::default()
    };
    let out = Prepared::new(&c.query, &c.batches, &opts)
        .unwrap()
        .run()
        .unwrap();
    assert!(out.report.tuning.is_none());
}

/// A plan made for the first batch's few groups is made again as the groups seen outgrow it:
/// the next chunks run the strategy chosen for the count seen, on the same table, and the
/// result is the reference's. Hot keys keep per-block tables however many groups there are;
/// uniform ones are partitioned once far more than a block's table holds.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn the_plan_changes_between_chunks_as_groups_outgrow_the_estimate() {
    if !have_gpu() {
        return;
    }
    let per = 1usize << 16;
    let rows = 4 * per;
    // The first batch: 40 keys. The next three: every row a new key.
    let scatter = |k: u64| k.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64;
    let uniform: Vec<i64> = (0..rows as u64)
        .map(|i| scatter(if i < per as u64 { i % 40 } else { i }))
        .collect();
    // Skewed: half the rows on one hot key from the first batch on (where the other half
    // spreads over 1000 keys: the hot one is 500 times as frequent as the average).
    let hot: Vec<i64> = (0..rows as u64)
        .map(|i| match i {
            i if i % 2 == 0 => scatter(1 << 40),
            i if i < per as u64 => scatter(i % 2000),
            i => scatter(i),
        })
        .collect();
    for (what, keys) in [("uniform", uniform), ("hot key", hot)] {
        let keys: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(keys))];
        let (vals, aggs) = values(rows, 5, 21);
        let c = case(keys, vals, &aggs, 4);
        let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
        let bounds = bounds_of(&c.batches);
        let opts = GpuOptions {
            batch_rows: 1 << 14,
            ..Default::default()
        };
        let out = run_streamed(&c, &bounds, &opts, 1).unwrap();
        same_groups(&expected, &out.columns, 1).unwrap_or_else(|e| panic!("{what}: {e}"));
        let r = &out.report;
        eprintln!(
            "{what}: planned {} ({}); {:?}",
            r.strategy, r.reason, r.switches
        );
        assert_eq!(r.strategy, GpuStrategy::BLOCK_LOCAL, "{what}: {r:?}");
        // The hot key keeps block_local however many groups come, and a larger table of the
        // same strategy waits for the next query's plan (replan.rs: no recompile mid-run for
        // the same strategy): no switch. The uniform keys' ~196,000 groups pass 16 times what
        // a block's table holds: where a re-plan sees that many, it switches to
        // hash_partitioned, on the same table.
        match what {
            "uniform" => assert!(
                r.switches.iter().all(|s| s.contains("-> hash_partitioned")),
                "{what}: {:?}",
                r.switches
            ),
            _ => assert!(r.switches.is_empty(), "{what}: {:?}", r.switches),
        }
        // Forced, the strategy stays.
        let forced = GpuOptions {
            strategy: Some(GpuStrategy::BLOCK_LOCAL),
            ..opts
        };
        let out = run_streamed(&c, &bounds, &forced, 1).unwrap();
        same_groups(&expected, &out.columns, 1).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(out.report.switches.is_empty(), "{:?}", out.report.switches);
    }
}
