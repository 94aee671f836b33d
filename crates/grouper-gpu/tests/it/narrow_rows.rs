//! The partitioned strategies keep a row's words that are 32-bit values widened in 32 bits
//! (`codegen::stored`): arguments read from narrow columns or cast from them exactly, a dense
//! key, the NULL mask. Here every such argument type, at its extremes, against the reference —
//! a wrong extension (zero for sign, or the reverse) or a float kept inexactly changes sums,
//! minima and maxima. The reference half runs everywhere (CI checks the query is well formed);
//! the GPU half on the device.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Array, Float32Array, Int16Array, Int32Array, Int8Array, RecordBatch,
    UInt16Array, UInt32Array,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema};
use grouper_core::agg::{AggKind, AggregateSpec};
use grouper_core::compare::same_groups;
use grouper_core::expr::Expr;
use grouper_core::{reference, InputBatch, QuerySpec};
use grouper_gpu::{GpuQuery, GpuStrategy, Prepared};

use crate::gpu::{have_gpu, in_key_ranges, xorshift};

/// Rows with `nulls` percent NULL in every column: an Int32 key over `groups` values, and
/// value columns of every narrow type, their extremes among them.
fn columns(rows: usize, groups: u64, nulls: u64) -> Vec<ArrayRef> {
    let mut r = xorshift(0x005e_ed0f_4a11);
    let mut draw = |n: u64| -> Vec<Option<u64>> {
        (0..rows)
            .map(|_| {
                let x = r();
                (x % 100 >= nulls).then_some((x >> 8) % n)
            })
            .collect()
    };
    let key = draw(groups);
    let (a, b, c, d, e, f, g) = (
        draw(256),
        draw(1 << 16),
        draw(1 << 16),
        draw(1 << 32),
        draw(1 << 32),
        draw(4000),
        draw(40_000),
    );
    // Every 97th row an extreme, so most groups see one.
    let edge = |i: usize| i.is_multiple_of(97);
    vec![
        Arc::new(Int32Array::from_iter(
            key.iter().map(|k| k.map(|k| k as i32 - 7)),
        )),
        Arc::new(Int8Array::from_iter(
            a.iter().map(|x| x.map(|x| x as u8 as i8)),
        )),
        Arc::new(Int16Array::from_iter(
            b.iter().map(|x| x.map(|x| x as u16 as i16)),
        )),
        Arc::new(UInt16Array::from_iter(
            c.iter().map(|x| x.map(|x| x as u16)),
        )),
        Arc::new(Int32Array::from_iter(d.iter().enumerate().map(|(i, x)| {
            x.map(|x| match edge(i) {
                true if i.is_multiple_of(2) => i32::MIN,
                true => i32::MAX,
                false => x as u32 as i32,
            })
        }))),
        Arc::new(UInt32Array::from_iter(e.iter().enumerate().map(
            |(i, x)| x.map(|x| if edge(i) { u32::MAX } else { x as u32 }),
        ))),
        // Quarters (every partial sum exact, whatever the order), -0.0 and tiny values among
        // them for MIN and MAX.
        Arc::new(Float32Array::from_iter(f.iter().enumerate().map(
            |(i, x)| {
                x.map(|x| match (edge(i), i % 3) {
                    (true, 0) => -0.0,
                    (true, 1) => -1e-40,
                    _ => x as f32 * 0.25 - 500.0,
                })
            },
        ))),
        Arc::new(Date32Array::from_iter(
            g.iter().map(|x| x.map(|x| x as i32 - 20_000)),
        )),
    ]
}

/// The aggregates: (kind, result type, column, the type the argument is cast to, if any).
fn aggregates() -> Vec<(AggKind, DataType, usize, Option<DataType>)> {
    use AggKind::*;
    use DataType::*;
    vec![
        (CountStar, Int64, 0, None),
        (Sum, Float64, 6, Some(Float64)),
        (Avg, Float64, 2, Some(Float64)),
        (Sum, Int64, 4, Some(Int64)),
        (Sum, Int64, 5, Some(Int64)),
        (Sum, UInt64, 5, Some(UInt64)),
        (Min, Int64, 5, Some(Int64)),
        (Max, Float32, 2, Some(Float32)),
        (Min, Int8, 1, None),
        (Max, Int8, 1, None),
        (Max, UInt16, 3, None),
        (Min, Int32, 4, None),
        (Max, Int32, 4, None),
        (Min, Float32, 6, None),
        (Max, Float32, 6, None),
        (Min, Date32, 7, None),
        (Max, Int64, 2, Some(Int64)),
    ]
}

struct Narrow {
    query: GpuQuery,
    batches: Vec<RecordBatch>,
    expected: Vec<ArrayRef>,
}

/// The query over `cols` (padded with COUNT(x) to `at_least` aggregates) and its answer by
/// the reference.
fn narrow_case(cols: Vec<ArrayRef>, at_least: usize) -> Narrow {
    let mut aggs = aggregates();
    while aggs.len() < at_least {
        let c = 1 + aggs.len() % 7;
        aggs.push((AggKind::Count, cols[c].data_type().clone(), c, None));
    }
    let rows = cols[0].len();
    let types: Vec<DataType> = cols.iter().map(|c| c.data_type().clone()).collect();
    let arg = |c: usize, to: &Option<DataType>| {
        let col = Expr::column(c, types[c].clone());
        match to {
            Some(t) => Expr::Cast {
                expr: Box::new(col),
                to: t.clone(),
            },
            None => col,
        }
    };
    let specs: Vec<AggregateSpec> = aggs
        .iter()
        .map(|(k, t, _, _)| match k {
            AggKind::CountStar => AggregateSpec::count_star(),
            _ => AggregateSpec::new(*k, t.clone()),
        })
        .collect();
    let query = GpuQuery {
        columns: types.clone(),
        filter: None,
        keys: vec![0],
        aggregates: aggs
            .iter()
            .zip(&specs)
            .map(|((k, _, c, to), s)| (s.clone(), (*k != AggKind::CountStar).then(|| arg(*c, to))))
            .collect(),
    };
    let spec = QuerySpec {
        key_types: vec![types[0].clone()],
        aggregates: specs,
    };
    let args = aggs
        .iter()
        .map(|(k, _, c, to)| {
            (*k != AggKind::CountStar).then(|| match to {
                Some(t) => cast(&cols[*c], t).unwrap(),
                None => Arc::clone(&cols[*c]),
            })
        })
        .collect();
    let input = InputBatch::try_new(&spec, vec![Arc::clone(&cols[0])], args, rows).unwrap();
    let expected = reference::aggregate(&spec, &[input]).unwrap();
    let schema = Arc::new(Schema::new(
        types
            .iter()
            .enumerate()
            .map(|(i, t)| Field::new(format!("c{i}"), t.clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batches = vec![RecordBatch::try_new(schema, cols).unwrap()];
    Narrow {
        query,
        batches,
        expected,
    }
}

/// Every narrow argument type, a dense key, NULLs (the mask in 32 bits), and 33 aggregates
/// (the mask whole), under both partitioned strategies, with and without key ranges.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn narrow_row_words_match_the_reference() {
    let rows = 1 << 20;
    let cases = [
        narrow_case(columns(rows, 1 << 16, 5), 0),
        narrow_case(columns(rows, 1 << 16, 5), 33),
    ];
    // The reference answered (the query is well formed) before any GPU is asked.
    assert!(cases.iter().all(|c| c.expected[0].len() > 60_000));
    if !have_gpu() {
        return;
    }
    for (n, c) in cases.iter().enumerate() {
        for strategy in [
            GpuStrategy::PERFECT_PARTITIONED,
            GpuStrategy::HASH_PARTITIONED,
        ] {
            for key_ranges in [None, Some(3), Some(6)] {
                let opts = in_key_ranges(strategy, key_ranges);
                let out = Prepared::new(&c.query, &c.batches, &opts)
                    .and_then(|mut p| p.run())
                    .unwrap_or_else(|e| panic!("case {n}, {strategy} {key_ranges:?}: {e}"));
                same_groups(&c.expected, &out.columns, 1)
                    .unwrap_or_else(|e| panic!("case {n}, {strategy} {key_ranges:?}: {e}"));
            }
        }
    }
}
