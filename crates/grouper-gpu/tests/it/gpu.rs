//! Every GPU strategy against the CPU reference on the device: random keys of every key type
//! (NULLs, skew, sorted runs, keys wider than 64 bits), every aggregate and value type, fused
//! filters and expressions, forced tiny tables (trap, grow, resume), 1 … 2^24 groups.
//!
//! They are `#[ignore]`d, so a machine without a GPU (CI) reports them as skipped; the device
//! script runs them with `--include-ignored` and `GROUPER_REQUIRE_GPU=1`, under which a missing
//! GPU fails them instead of passing quietly.
//!
//! Float tolerance: values are multiples of 0.25 small enough that every partial sum is exact,
//! so float results must match to the last bit whatever the atomic order; `compare` still
//! allows 1e-9 relative for the averages' final division.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int16Array, Int64Array, StringArray, StringViewArray, UInt64Array, UInt8Array,
};
use arrow::compute::filter as keep_rows;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use grouper_core::agg::{pair_type, AggKind, AggregateSpec};
use grouper_core::compare::same_groups;
use grouper_core::expr::{BinOp, Expr, Scalar};
use grouper_core::hash::HashFn;
use grouper_core::{reference, GrouperError, InputBatch, QuerySpec};
use grouper_gpu::{
    gpu_required, Gpu, GpuOptions, GpuParams, GpuQuery, GpuStrategy, Prepared, Probing,
};
use proptest::prelude::*;

/// Whether a GPU is there; fails instead of skipping when the device scripts require one.
pub(crate) fn have_gpu() -> bool {
    match Gpu::get() {
        Ok(_) => true,
        Err(e) if gpu_required() => panic!("GROUPER_REQUIRE_GPU=1 but {e}"),
        Err(e) => {
            eprintln!("GPU test skipped: {e}");
            false
        }
    }
}

/// Random cases of the GPU property test (`GROUPER_GPU_CASES`, default 12).
fn gpu_cases() -> u32 {
    std::env::var("GROUPER_GPU_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// A fixed-seed stream of pseudo-random words (xorshift64) for test data.
pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyKind {
    I16,
    I64,
    U64Scattered,
    Str,
    StrView,
    Bool,
    Date,
    DecWide,
    F64,
}

const KEY_KINDS: [KeyKind; 9] = [
    KeyKind::I16,
    KeyKind::I64,
    KeyKind::U64Scattered,
    KeyKind::Str,
    KeyKind::StrView,
    KeyKind::Bool,
    KeyKind::Date,
    KeyKind::DecWide,
    KeyKind::F64,
];

fn key_column(kind: KeyKind, idx: &[u64], valid: &[bool]) -> ArrayRef {
    let it = || idx.iter().zip(valid).map(|(&g, &ok)| (g, ok));
    match kind {
        KeyKind::I16 => Arc::new(Int16Array::from_iter(
            it().map(|(g, ok)| ok.then_some(g as i16 - 300)),
        )),
        KeyKind::I64 => Arc::new(Int64Array::from_iter(
            it().map(|(g, ok)| ok.then_some(g as i64 * 1_000_003 - 7)),
        )),
        KeyKind::U64Scattered => {
            Arc::new(UInt64Array::from_iter(it().map(|(g, ok)| {
                ok.then_some(g.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
            })))
        }
        KeyKind::Str => Arc::new(StringArray::from_iter(
            it().map(|(g, ok)| ok.then(|| format!("k{g}"))),
        )),
        KeyKind::StrView => Arc::new(StringViewArray::from_iter(
            it().map(|(g, ok)| ok.then(|| format!("a-rather-long-key-{g}"))),
        )),
        KeyKind::Bool => Arc::new(BooleanArray::from_iter(
            it().map(|(g, ok)| ok.then_some(g % 2 == 0)),
        )),
        KeyKind::Date => Arc::new(Date32Array::from_iter(
            it().map(|(g, ok)| ok.then_some(8000 + g as i32)),
        )),
        KeyKind::DecWide => Arc::new(
            Decimal128Array::from_iter(
                it().map(|(g, ok)| ok.then_some(g as i128 * 10_i128.pow(30) - 5)),
            )
            .with_precision_and_scale(38, 2)
            .unwrap(),
        ),
        KeyKind::F64 => Arc::new(Float64Array::from_iter(
            it().map(|(g, ok)| ok.then_some(g as f64 * 0.5 - 3.0)),
        )),
    }
}

/// Value columns and the aggregates over them (GPU-supported types only).
pub(crate) fn values(
    rows: usize,
    null_pct: u64,
    seed: u64,
) -> (Vec<ArrayRef>, Vec<(AggregateSpec, Option<usize>)>) {
    let mut r = xorshift(seed);
    let v: Vec<u64> = (0..rows).map(|_| r() % 1_000_000).collect();
    let ok: Vec<bool> = (0..rows).map(|_| r() % 100 >= null_pct).collect();
    let z = || v.iter().zip(&ok).map(|(&x, &ok)| (x, ok));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter(z().map(|(x, ok)| {
            ok.then_some(x as i64 * 1_000_000 - 500_000_000_000)
        }))),
        Arc::new(Float64Array::from_iter(
            z().map(|(x, ok)| ok.then_some(x as f64 * 0.25 - 70_000.0)),
        )),
        Arc::new(
            Decimal128Array::from_iter(
                z().map(|(x, ok)| ok.then_some(x as i128 * 1_000 - 123_456)),
            )
            .with_precision_and_scale(15, 2)
            .unwrap(),
        ),
        Arc::new(BooleanArray::from_iter(
            z().map(|(x, ok)| ok.then_some(x % 3 == 0)),
        )),
        Arc::new(Float32Array::from_iter(
            z().map(|(x, ok)| ok.then_some(x as f32 - 1000.5)),
        )),
        Arc::new(UInt64Array::from_iter(
            z().map(|(x, ok)| ok.then_some(x * 7)),
        )),
        Arc::new(UInt8Array::from_iter(
            z().map(|(x, ok)| ok.then_some((x % 250) as u8)),
        )),
        Arc::new(Date32Array::from_iter(
            z().map(|(x, ok)| ok.then_some(x as i32 % 20000)),
        )),
        // Beyond 64 bits either way: MIN/MAX compare both words, SUM carries between them.
        Arc::new(
            Decimal128Array::from_iter(
                z().map(|(x, ok)| ok.then_some((x as i128 - 500_000) * 10i128.pow(22) + x as i128)),
            )
            .with_precision_and_scale(38, 4)
            .unwrap(),
        ),
    ];
    // CORR's pair: the doubles above and a second column NULL on other rows (quarters, so
    // that every partial sum of products stays exact too).
    let second: ArrayRef = Arc::new(Float64Array::from_iter((0..rows).map(|i| {
        let x = v[i];
        (r() % 100 >= null_pct).then_some((x % 1013) as f64 * 0.25 - 100.0)
    })));
    let pair = grouper_core::expr::tuple(vec![Arc::clone(&cols[1]), second], rows).unwrap();
    let mut cols = cols;
    cols.push(pair);
    use AggKind::*;
    let a = |k, t: DataType, c| (AggregateSpec::new(k, t), Some(c));
    let aggs = vec![
        (AggregateSpec::count_star(), None),
        a(Count, DataType::Int64, 0),
        a(Sum, DataType::Int64, 0),
        a(Min, DataType::Int64, 0),
        a(Max, DataType::Int64, 0),
        a(Sum, DataType::Float64, 1),
        a(Avg, DataType::Float64, 1),
        a(Max, DataType::Float64, 1),
        a(Sum, DataType::Decimal128(15, 2), 2),
        a(Avg, DataType::Decimal128(15, 2), 2),
        a(Min, DataType::Decimal128(15, 2), 2),
        a(Max, DataType::Boolean, 3),
        a(Min, DataType::Float32, 4),
        a(Sum, DataType::UInt64, 5),
        a(Max, DataType::UInt8, 6),
        a(Min, DataType::Date32, 7),
        a(Min, DataType::Decimal128(38, 4), 8),
        a(Max, DataType::Decimal128(38, 4), 8),
        a(Sum, DataType::Decimal128(38, 4), 8),
        a(Corr, pair_type(), 9),
    ];
    (cols, aggs)
}

/// A query over keys and values as one record batch per slice, and its reference input.
pub(crate) struct Case {
    pub(crate) query: GpuQuery,
    pub(crate) batches: Vec<RecordBatch>,
    pub(crate) spec: QuerySpec,
    pub(crate) reference: Vec<InputBatch>,
}

pub(crate) fn case(
    keys: Vec<ArrayRef>,
    vals: Vec<ArrayRef>,
    aggs: &[(AggregateSpec, Option<usize>)],
    slices: usize,
) -> Case {
    let nk = keys.len();
    // The GPU reads a pair argument as its parts, columns of their own (as the CPU backend
    // hands evaluated tuples over); the reference reads the pair.
    let mut cols: Vec<ArrayRef> = keys.clone();
    let mut at = Vec::with_capacity(vals.len());
    for v in &vals {
        let parts = match v.as_any().downcast_ref::<arrow::array::StructArray>() {
            Some(s) => s.columns().to_vec(),
            None => vec![Arc::clone(v)],
        };
        at.push((cols.len()..cols.len() + parts.len()).collect::<Vec<_>>());
        cols.extend(parts);
    }
    let arg = |c: usize| -> Expr {
        let refs: Vec<Expr> = at[c]
            .iter()
            .map(|&i| Expr::column(i, cols[i].data_type().clone()))
            .collect();
        match vals[c].data_type() {
            DataType::Struct(_) => Expr::Tuple(refs),
            _ => refs.into_iter().next().unwrap(),
        }
    };
    let rows = cols.first().map_or(0, |c| c.len());
    let schema = Arc::new(Schema::new(
        cols.iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let query = GpuQuery {
        columns: cols.iter().map(|c| c.data_type().clone()).collect(),
        filter: None,
        keys: (0..nk).collect(),
        aggregates: aggs.iter().map(|(s, c)| (s.clone(), c.map(arg))).collect(),
    };
    let spec = QuerySpec {
        key_types: keys.iter().map(|k| k.data_type().clone()).collect(),
        aggregates: aggs.iter().map(|(s, _)| s.clone()).collect(),
    };
    let per = rows.div_ceil(slices.max(1)).max(1);
    let mut batches = Vec::new();
    let mut reference = Vec::new();
    let mut off = 0;
    while off < rows {
        let len = per.min(rows - off);
        let b = RecordBatch::try_new(
            schema.clone(),
            cols.iter().map(|c| c.slice(off, len)).collect(),
        )
        .unwrap();
        reference.push(
            InputBatch::try_new(
                &spec,
                keys.iter().map(|c| c.slice(off, len)).collect(),
                aggs.iter()
                    .map(|(_, c)| c.map(|c| vals[c].slice(off, len)))
                    .collect(),
                len,
            )
            .unwrap(),
        );
        batches.push(b);
        off += len;
    }
    Case {
        query,
        batches,
        spec,
        reference,
    }
}

/// Options that force `strategy`, a partitioned one, with `key_ranges` (None: the planner's).
pub(crate) fn in_key_ranges(strategy: GpuStrategy, key_ranges: Option<u32>) -> GpuOptions {
    GpuOptions {
        strategy: Some(strategy),
        params: GpuParams {
            key_ranges,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Runs `query` with `strategy` (None: auto); `None` when the strategy does not apply.
pub(crate) fn run_gpu(
    query: &GpuQuery,
    batches: &[RecordBatch],
    strategy: Option<GpuStrategy>,
    opts: GpuOptions,
) -> Option<Vec<ArrayRef>> {
    let opts = GpuOptions { strategy, ..opts };
    match Prepared::new(query, batches, &opts).and_then(|mut p| p.run()) {
        Ok(out) => Some(out.columns),
        Err(GrouperError::InvalidOption(why)) if strategy.is_some() => {
            eprintln!("{strategy:?} does not apply: {why}");
            None
        }
        Err(e) => panic!("{strategy:?}: {e}"),
    }
}

/// The ways chunks reach the kernel: (resident, compress, zero_copy).
const TRANSFERS: [(bool, bool, bool); 6] = [
    (true, true, false),
    (false, true, false),
    (false, false, false),
    (false, true, true),
    (false, false, true),
    (true, false, false),
];

pub(crate) fn transfer(i: usize) -> GpuOptions {
    let (resident, compress, zero_copy) = TRANSFERS[i % TRANSFERS.len()];
    GpuOptions {
        resident,
        compress,
        zero_copy,
        ..Default::default()
    }
}

/// Every strategy (and auto), each with another transfer mode, against `expected`.
pub(crate) fn check_all(c: &Case, expected: &[ArrayRef], params: GpuParams, batch_rows: usize) {
    let strategies = std::iter::once(None).chain(GpuStrategy::ALL.into_iter().map(Some));
    let mut ran = 0;
    for (i, s) in strategies.enumerate() {
        let opts = GpuOptions {
            params,
            batch_rows,
            ..transfer(i)
        };
        let Some(actual) = run_gpu(&c.query, &c.batches, s, opts) else {
            continue;
        };
        ran += 1;
        if let Err(e) = same_groups(expected, &actual, c.spec.key_types.len()) {
            panic!("{s:?} differs from the reference: {e}");
        }
    }
    assert!(ran >= 3, "only {ran} strategies ran");
}

pub(crate) fn keyed(
    kinds: &[KeyKind],
    rows: usize,
    groups: u64,
    null_pct: u64,
    sorted: bool,
    skew: bool,
    seed: u64,
) -> Vec<ArrayRef> {
    let per = if kinds.len() > 1 {
        (groups as f64).powf(1.0 / kinds.len() as f64).ceil() as u64
    } else {
        groups
    };
    kinds
        .iter()
        .enumerate()
        .map(|(c, &k)| {
            let mut r = xorshift(seed + 31 * c as u64);
            let mut idx: Vec<u64> = (0..rows)
                .map(|_| {
                    let x = r() % per.max(1);
                    if skew {
                        x * x / per.max(1)
                    } else {
                        x
                    }
                })
                .collect();
            if sorted {
                idx.sort_unstable();
            }
            let valid: Vec<bool> = (0..rows).map(|_| r() % 100 >= null_pct).collect();
            key_column(k, &idx, &valid)
        })
        .collect()
}

proptest! {
    // 12 cases by default (each: every strategy, each in another transfer mode); every run
    // draws new ones. GROUPER_GPU_CASES sets another number (a device call is 10 minutes).
    #![proptest_config(ProptestConfig { cases: gpu_cases(), .. ProptestConfig::default() })]

    #[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
    fn every_gpu_strategy_matches_the_reference(
        kinds in prop::collection::vec(prop::sample::select(KEY_KINDS.to_vec()), 0..=3),
        rows in 0usize..20_000,
        groups in 1u64..5_000,
        null_pct in prop::sample::select(vec![0u64, 10, 50]),
        sorted in any::<bool>(),
        skew in any::<bool>(),
        slices in 1usize..4,
        hash in prop::sample::select(HashFn::ALL.to_vec()),
        probing in prop::sample::select(vec![Probing::Linear, Probing::Chained, Probing::ChainedPlus]),
        seed in any::<u64>(),
    ) {
        if !have_gpu() {
            return Ok(());
        }
        let keys = keyed(&kinds, rows, groups, null_pct, sorted, skew, seed);
        let (vals, aggs) = values(rows, null_pct, seed ^ 0xabc);
        let c = case(keys, vals, &aggs, slices);
        let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
        let params = GpuParams { hash, probing, threads_per_block: Some(128), ..Default::default() };
        check_all(&c, &expected, params, 4096);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn tiny_tables_trap_grow_and_resume() {
    if !have_gpu() {
        return;
    }
    for (groups, rows) in [(10_000u64, 200_000usize), (70_000, 300_000)] {
        let keys = keyed(
            &[KeyKind::I64, KeyKind::Str],
            rows,
            groups,
            5,
            false,
            false,
            groups,
        );
        let (vals, aggs) = values(rows, 5, 7);
        let c = case(keys, vals, &aggs, 3);
        let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
        // `sorted` lists the rows of the runs the full table could not take, in sorted order;
        // `partitioned` lists them by their place among the partitioned rows.
        // hash_partitioned three times: in the planner's one key range, in three, whose jobs
        // each list and spill their own rows, and in six, whose rows are split by range first
        // (a job lists rows by their place in its range's run, and the re-run reads them
        // there).
        for (s, key_ranges) in [
            (GpuStrategy::GLOBAL, None),
            (GpuStrategy::BLOCK_LOCAL, None),
            (GpuStrategy::THREAD_PRIVATE, None),
            (GpuStrategy::SORTED, None),
            (GpuStrategy::HASH_PARTITIONED, None),
            (GpuStrategy::HASH_PARTITIONED, Some(3)),
            (GpuStrategy::HASH_PARTITIONED, Some(6)),
        ] {
            let opts = GpuOptions {
                strategy: Some(s),
                params: GpuParams {
                    initial_groups: Some(1),
                    key_ranges,
                    ..Default::default()
                },
                batch_rows: 50_000,
                ..Default::default()
            };
            let mut p = Prepared::new(&c.query, &c.batches, &opts).unwrap();
            let out = p.run().unwrap();
            assert!(
                out.report.grows > 0,
                "{s} {key_ranges:?}: the tiny table never grew"
            );
            same_groups(&expected, &out.columns, 2)
                .unwrap_or_else(|e| panic!("{s} {key_ranges:?}: {e}"));
            // a second run on the same prepared query gives the same answer
            let again = p.run().unwrap();
            same_groups(&expected, &again.columns, 2)
                .unwrap_or_else(|e| panic!("{s} {key_ranges:?} (rerun): {e}"));
        }
    }
}

/// block_local at the planner's own launch shapes (the property test fixes 128-thread blocks,
/// and its twenty aggregates leave room for one copy): with COUNT(*) and two sums (56 bytes a
/// slot on an H100 or H200), 1–40 groups take 2–4 interleaved copies of a block's table, 2,000
/// one table in a whole SM's shared memory (1024 threads), 3,000 and 40,000 overflow it into
/// the global table. NULL keys, a hot key and every transfer mode alike equal the reference.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn block_tables_with_copies_or_a_whole_sm_match_the_reference() {
    if !have_gpu() {
        return;
    }
    for (i, groups) in [1u64, 3, 40, 2000, 3000, 40_000].into_iter().enumerate() {
        for skew in [false, true] {
            let keys = keyed(&[KeyKind::I64], 300_000, groups, 5, false, skew, groups);
            let (vals, aggs) = values(300_000, 5, groups ^ 0x5eed);
            // COUNT(*), SUM(i64), SUM(f64).
            let aggs = vec![aggs[0].clone(), aggs[2].clone(), aggs[5].clone()];
            let c = case(keys, vals, &aggs, 3);
            let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
            let opts = GpuOptions {
                batch_rows: 1 << 17,
                ..transfer(i)
            };
            let actual = run_gpu(&c.query, &c.batches, Some(GpuStrategy::BLOCK_LOCAL), opts)
                .expect("block_local takes any key");
            same_groups(&expected, &actual, 1)
                .unwrap_or_else(|e| panic!("{groups} groups, skew {skew}: {e}"));
        }
    }
}

/// hash_partitioned's fold tables where twice a partition's groups need more slots than a
/// whole SM holds: the table then takes every slot that fits, a count that is not a power of
/// two (with COUNT(*) and two sums, 52-byte slots: 4,288 on an H100 or H200, a fill limit of
/// 2,144), probed from the hash scaled to it (from ~270,000 groups). 400,000 groups in 2
/// million rows (~1,550 a partition) stay under that limit in one key range. 3 million in 4
/// million (~8,400 a partition) are over it: the planner folds them in five key ranges; in
/// one they fill the table and send the rest of a partition's rows to the global table; three
/// ranges split by a count that is not a power of two; six lay the rows out by range before
/// the fold. All equal the reference.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn fold_tables_and_key_ranges_match_the_reference() {
    if !have_gpu() {
        return;
    }
    // (groups, rows, [(fixed key ranges, the ranges planned)]): the planner's follow the
    // group estimate (exactly, 1 at 400,000 and 5 at 3 million; the data are seeded), so
    // within a margin where several fit.
    type Ranges = &'static [(Option<u32>, std::ops::RangeInclusive<u32>)];
    let cases: [(u64, usize, Ranges); 2] = [
        (400_000, 2_000_000, &[(None, 1..=1)]),
        (
            3_000_000,
            4_000_000,
            &[
                (None, 4..=7),
                (Some(1), 1..=1),
                (Some(3), 3..=3),
                (Some(6), 6..=6),
            ],
        ),
    ];
    for (groups, rows, ranges) in cases {
        let keys = keyed(&[KeyKind::I64], rows, groups, 5, false, false, groups);
        let (vals, aggs) = values(rows, 5, groups ^ 0xf01d);
        // COUNT(*), SUM(i64), SUM(f64).
        let aggs = vec![aggs[0].clone(), aggs[2].clone(), aggs[5].clone()];
        let c = case(keys, vals, &aggs, 2);
        let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
        for (key_ranges, planned) in ranges.iter().cloned() {
            let opts = in_key_ranges(GpuStrategy::HASH_PARTITIONED, key_ranges);
            let mut p = Prepared::new(&c.query, &c.batches, &opts).unwrap();
            let out = p.run().unwrap();
            same_groups(&expected, &out.columns, 1)
                .unwrap_or_else(|e| panic!("{groups}, {key_ranges:?}: {e}"));
            assert!(
                planned.contains(&out.report.copies),
                "{groups}, {key_ranges:?}: {} key ranges",
                out.report.copies
            );
            // The planned table is a multiple of 64 slots that is not a power of two.
            let slots = out.report.shared_bytes / 52;
            assert!(
                slots.is_multiple_of(64) && !slots.is_power_of_two(),
                "{groups}: {} shared bytes",
                out.report.shared_bytes
            );
        }
    }
}

/// One Int64 key column of `rows` uniform keys below `domain`, 5% of them NULL: the dense keys
/// of the partitioned direct-fold tests.
fn dense_keys(rows: usize, domain: u64, seed: u64) -> Vec<ArrayRef> {
    let mut r = xorshift(seed);
    vec![Arc::new(Int64Array::from_iter((0..rows).map(|_| {
        let k = r() % domain;
        (r() % 100 >= 5).then_some(k as i64)
    })))]
}

/// perfect_partitioned where a partition's keys are more than its shared table's slots: dense
/// keys over 2^22 values leave a partition 16,384 keys, and a table of 44-byte slots (COUNT(*)
/// and two sums) holds 4,096. The planner's four key ranges cover them; in two the keys past
/// their slots update the device-memory table; three split unevenly, the last sending the keys
/// past them all to the device-memory table; six, split by range before the fold, leave two
/// ranges empty. Over 2^23 values (32,768 keys a partition) six split ranges cover 24,576,
/// and the last run of the split also holds the keys past them all, which its job sends to
/// the device-memory table. NULL keys among them. All equal the reference.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn direct_fold_key_ranges_match_the_reference() {
    if !have_gpu() {
        return;
    }
    // Keys below 2^22 - 2 (2^23 - 2): with the NULL key's slot the domain stays under 2^22
    // (2^23), so a partition holds 2^14 (2^15) keys.
    let cases: [(u64, &[Option<u32>], u32); 2] = [
        ((1 << 22) - 2, &[None, Some(2), Some(3), Some(6)], 4),
        ((1 << 23) - 2, &[Some(6)], 8),
    ];
    for (domain, ranges, planned) in cases {
        let rows = 3_000_000usize;
        let keys = dense_keys(rows, domain, 0xd1ec7 ^ domain);
        let (vals, aggs) = values(rows, 5, 0xd1ec7);
        // COUNT(*), SUM(i64), SUM(f64).
        let aggs = vec![aggs[0].clone(), aggs[2].clone(), aggs[5].clone()];
        let c = case(keys, vals, &aggs, 2);
        let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
        for &key_ranges in ranges {
            let opts = in_key_ranges(GpuStrategy::PERFECT_PARTITIONED, key_ranges);
            let mut p = Prepared::new(&c.query, &c.batches, &opts).unwrap();
            let out = p.run().unwrap();
            same_groups(&expected, &out.columns, 1).unwrap_or_else(|e| {
                panic!("2^{} {key_ranges:?}: {e}", 64 - domain.leading_zeros())
            });
            // 4,096 slots of 44 bytes, whatever the ranges; unless fixed, the fewest ranges
            // that cover a partition's keys.
            assert_eq!(out.report.shared_bytes, 4096 * 44, "{key_ranges:?}");
            assert_eq!(
                out.report.copies,
                key_ranges.unwrap_or(planned),
                "{key_ranges:?}"
            );
        }
    }
}

/// The partitioned strategies with their rows split by key range (six ranges) under a filter
/// that drops about half the rows (an Int64 value at most 0; its NULLs drop too): a dropped
/// row is in no partition's or range's count, the split lays out only the rows kept, and a
/// fold reads only those. Dense keys over 2^22 values, as above, for both indexes; hashed
/// also in the planner's ranges. All equal the reference over the rows kept.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn split_key_ranges_under_a_filter_match_the_reference() {
    if !have_gpu() {
        return;
    }
    let (rows, domain) = (1_500_000usize, (1u64 << 22) - 2);
    let keys = dense_keys(rows, domain, 0xf117e5);
    let (vals, aggs) = values(rows, 5, 0xf117e5);
    // COUNT(*), SUM(i64), SUM(f64).
    let aggs = vec![aggs[0].clone(), aggs[2].clone(), aggs[5].clone()];
    // The filter reads the Int64 values (vals[0]: column 1, after the key).
    let filter = Expr::Binary {
        op: BinOp::LtEq,
        left: Box::new(Expr::column(1, DataType::Int64)),
        right: Box::new(Expr::Literal {
            value: Scalar::Int(0),
            data_type: DataType::Int64,
        }),
        data_type: DataType::Boolean,
    };
    let ints = vals[0].as_any().downcast_ref::<Int64Array>().unwrap();
    let mask: BooleanArray = ints
        .iter()
        .map(|v| Some(v.is_some_and(|v| v <= 0)))
        .collect();
    let kept = mask.true_count();
    assert!(
        kept > rows / 3 && kept < rows * 2 / 3,
        "{kept} of {rows} rows kept"
    );
    let keep = |a: &ArrayRef| keep_rows(a.as_ref(), &mask).unwrap();
    let only_kept = case(
        keys.iter().map(keep).collect(),
        vals.iter().map(keep).collect(),
        &aggs,
        1,
    );
    let expected = reference::aggregate(&only_kept.spec, &only_kept.reference).unwrap();
    let mut c = case(keys, vals, &aggs, 2);
    c.query.filter = Some(filter);
    for (s, key_ranges) in [
        (GpuStrategy::PERFECT_PARTITIONED, Some(6)),
        (GpuStrategy::HASH_PARTITIONED, Some(6)),
        (GpuStrategy::HASH_PARTITIONED, None),
    ] {
        let opts = in_key_ranges(s, key_ranges);
        let mut p = Prepared::new(&c.query, &c.batches, &opts).unwrap();
        let out = p.run().unwrap();
        same_groups(&expected, &out.columns, 1)
            .unwrap_or_else(|e| panic!("{s} {key_ranges:?}: {e}"));
        if let Some(k) = key_ranges {
            assert_eq!(out.report.copies, k, "{s}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn streams_inputs_many_times_the_memory_limit() {
    if !have_gpu() {
        return;
    }
    // 4M rows of 64-bit keys and six value columns (about 190 MB as they are) through a 24 MiB
    // device budget: dozens of chunks, the table kept on the GPU across them.
    let rows = 1 << 22;
    let limit = 24u64 << 20;
    for (groups, strategy) in [(4u64, None), (3000, Some(GpuStrategy::GLOBAL))] {
        let keys = keyed(&[KeyKind::I64], rows, groups, 1, false, true, groups);
        let (vals, aggs) = values(rows, 1, 11);
        let c = case(keys, vals, &aggs, 7);
        let cpu = grouper_core::aggregate(&c.spec, &c.reference, &Default::default()).unwrap();
        for i in 1..5 {
            let opts = GpuOptions {
                strategy,
                memory_limit: Some(limit),
                ..transfer(i)
            };
            let mut p = Prepared::new(&c.query, &c.batches, &opts).unwrap();
            let out = p
                .run()
                .unwrap_or_else(|e| panic!("{}: {e}", opts.transfer()));
            let r = &out.report;
            assert!(
                r.chunks >= 8 && rows as f64 * r.raw_bytes_per_row > 4.0 * limit as f64,
                "{}: {} chunks of {} rows, {} B/row",
                r.transfer,
                r.chunks,
                r.batch_rows,
                r.raw_bytes_per_row
            );
            same_groups(&cpu.columns, &out.columns, 1)
                .unwrap_or_else(|e| panic!("{} {strategy:?}: {e}", r.transfer));
            if opts.compress {
                assert!(r.sent_bytes_per_row < r.raw_bytes_per_row, "{r:?}");
            }
        }
        // Resident, the whole input must fit: a clear error.
        let opts = GpuOptions {
            resident: true,
            compress: false,
            memory_limit: Some(limit),
            ..Default::default()
        };
        match Prepared::new(&c.query, &c.batches, &opts) {
            Err(GrouperError::Gpu(m)) => assert!(m.contains("memory limit"), "{m}"),
            Err(e) => panic!("resident over the limit: {e}"),
            Ok(_) => panic!("resident over the limit was accepted"),
        }
    }
}

/// A resident input uploads once for every query over the same arrays (the prepared-input
/// cache keeps its device copy), with the same groups as the CPU; equal values in other
/// buffers are another input, which replaces it.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn a_resident_input_uploads_once_for_queries_over_the_same_arrays() {
    if !have_gpu() {
        return;
    }
    let rows = 1 << 20;
    let keys = keyed(&[KeyKind::I64], rows, 1 << 12, 5, false, false, 7);
    let (vals, aggs) = values(rows, 5, 7);
    let aggs: Vec<_> = aggs.into_iter().take(7).collect();
    let c = case(keys, vals, &aggs, 4);
    let cpu = grouper_core::aggregate(&c.spec, &c.reference, &Default::default()).unwrap();
    let opts = GpuOptions {
        resident: true,
        ..Default::default()
    };
    let run = |batches: &[RecordBatch], strategy: Option<GpuStrategy>| {
        let opts = GpuOptions {
            strategy,
            ..opts.clone()
        };
        let out = Prepared::new(&c.query, batches, &opts)
            .and_then(|mut p| p.run())
            .unwrap();
        same_groups(&cpu.columns, &out.columns, 1).unwrap_or_else(|e| panic!("{strategy:?}: {e}"));
        out.report
    };
    grouper_gpu::cache::clear();
    let first = run(&c.batches, None);
    assert!(!first.cached && first.upload_ms > 0.0, "{first:?}");
    for s in [
        None,
        Some(GpuStrategy::GLOBAL),
        Some(GpuStrategy::BLOCK_LOCAL),
    ] {
        let again = run(&c.batches, s);
        assert!(
            again.cached && again.upload_ms == 0.0 && again.prepare_ms == 0.0,
            "{s:?}: {again:?}"
        );
    }
    // The same values in new buffers (`take` copies; `concat` of one array does not): another
    // input, which takes the first one's place.
    let copy: Vec<RecordBatch> = c
        .batches
        .iter()
        .map(|b| {
            let all = arrow::array::UInt32Array::from_iter_values(0..b.num_rows() as u32);
            let columns = b
                .columns()
                .iter()
                .map(|a| arrow::compute::take(a, &all, None).unwrap())
                .collect();
            RecordBatch::try_new(b.schema(), columns).unwrap()
        })
        .collect();
    assert!(!run(&copy, None).cached);
    assert!(run(&copy, None).cached);
    assert!(
        !run(&c.batches, None).cached,
        "the first input was replaced"
    );
    grouper_gpu::cache::clear();
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn many_groups_up_to_2_pow_24() {
    if !have_gpu() {
        return;
    }
    for log2 in [20u32, 24] {
        let groups = 1u64 << log2;
        let rows = (groups as usize) * 2;
        for kind in [KeyKind::I64, KeyKind::U64Scattered] {
            let keys = keyed(&[kind], rows, groups, 0, false, false, log2 as u64);
            let (vals, aggs) = values(rows, 0, 3);
            let aggs: Vec<_> = aggs.into_iter().take(7).collect();
            let c = case(keys, vals, &aggs, 1);
            // The CPU engine (itself tested against the reference) is the oracle at this size.
            let cpu = grouper_core::aggregate(&c.spec, &c.reference, &Default::default()).unwrap();
            for s in [
                None,
                Some(GpuStrategy::GLOBAL),
                Some(GpuStrategy::PERFECT_GLOBAL),
                Some(GpuStrategy::BLOCK_LOCAL),
                Some(GpuStrategy::HASH_PARTITIONED),
                Some(GpuStrategy::PERFECT_PARTITIONED),
            ] {
                let opts = GpuOptions {
                    resident: true,
                    ..Default::default()
                };
                if let Some(actual) = run_gpu(&c.query, &c.batches, s, opts) {
                    same_groups(&cpu.columns, &actual, 1)
                        .unwrap_or_else(|e| panic!("2^{log2} {kind:?} {s:?}: {e}"));
                }
            }
        }
    }
}
