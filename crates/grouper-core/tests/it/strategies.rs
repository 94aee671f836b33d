//! Every CPU strategy against the reference executor, on random data (proptest), plus the edge
//! cases that must hold exactly: empty input, no GROUP BY, NULL keys, overflow, table growth.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float64Array,
    Int32Array, Int64Array, StringArray, StringViewArray, UInt64Array,
};
use arrow::datatypes::{DataType, Int32Type};
use grouper_core::agg::{pair_type, AggKind, AggregateSpec};
use grouper_core::compare::same_groups;
use grouper_core::cpu::Strategy;
use grouper_core::hash::HashFn;
use grouper_core::planner::Overrides;
use grouper_core::table::{BucketMap, Probing};
use grouper_core::{aggregate, reference, GrouperError, InputBatch, QuerySpec};
use proptest::prelude::*;

/// Key column kinds the generator draws from.
#[derive(Debug, Clone, Copy)]
enum KeyKind {
    I32,
    I64,
    U64Wide,
    Str,
    StrView,
    /// Strings dictionary-encoded (Int32 keys), standing for a declared Utf8View key, as a
    /// Parquet scan of a column of few values hands them to the fused pipeline.
    StrDict,
    Bool,
    Date,
    Dec,
    F64,
}

#[derive(Debug, Clone, Copy)]
enum Dist {
    Uniform,
    Skewed,
    Sorted,
    /// The sort-based paper's shapes: 90% of the rows in one group, exponential, normal.
    HeavyHitter,
    Exponential,
    Normal,
}

/// Draws `n` group indices in `0..groups` with the given distribution.
fn draw(n: usize, groups: u64, dist: Dist, seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut v: Vec<u64> = (0..n)
        .map(|_| {
            let r = next() % groups;
            // A uniform draw in (0, 1) for the inverse CDFs.
            let u = ((next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            let last = groups as f64 - 1.0;
            match dist {
                Dist::Skewed => (r * r) / groups.max(1),
                Dist::HeavyHitter if u < 0.9 => 0,
                Dist::Exponential => ((-u.ln() * groups as f64 / 8.0) as u64).min(groups - 1),
                // A sum of four uniforms: near-normal around the middle group.
                Dist::Normal => {
                    let s: f64 = (0..3)
                        .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64)
                        .sum::<f64>()
                        + u;
                    ((s / 4.0) * last).round() as u64
                }
                _ => r,
            }
        })
        .collect();
    if let Dist::Sorted = dist {
        v.sort_unstable();
    }
    v
}

fn nulls(n: usize, frac_pct: u32, seed: u64) -> Vec<bool> {
    draw(n, 100, Dist::Uniform, seed ^ 0x9e37)
        .into_iter()
        .map(|r| (r as u32) >= frac_pct)
        .collect()
}

fn key_column(kind: KeyKind, idx: &[u64], valid: &[bool]) -> ArrayRef {
    let opt = |i: usize| valid[i];
    match kind {
        KeyKind::I32 => Arc::new(Int32Array::from_iter(
            idx.iter()
                .enumerate()
                .map(|(i, &g)| opt(i).then_some(g as i32 - 50)),
        )),
        KeyKind::I64 => Arc::new(Int64Array::from_iter(
            idx.iter()
                .enumerate()
                .map(|(i, &g)| opt(i).then_some((g as i64) * 1_000_003 - 7)),
        )),
        KeyKind::U64Wide => {
            Arc::new(UInt64Array::from_iter(idx.iter().enumerate().map(
                |(i, &g)| opt(i).then_some(g.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            )))
        }
        KeyKind::Str => Arc::new(StringArray::from_iter(
            idx.iter()
                .enumerate()
                .map(|(i, &g)| opt(i).then(|| format!("k{g}"))),
        )),
        KeyKind::StrView => Arc::new(StringViewArray::from_iter(
            idx.iter()
                .enumerate()
                .map(|(i, &g)| opt(i).then(|| format!("a-rather-long-key-{g}"))),
        )),
        KeyKind::StrDict => {
            let s: Vec<Option<String>> = idx
                .iter()
                .enumerate()
                .map(|(i, &g)| opt(i).then(|| format!("d{g}")))
                .collect();
            Arc::new(
                s.iter()
                    .map(Option::as_deref)
                    .collect::<DictionaryArray<Int32Type>>(),
            )
        }
        KeyKind::Bool => Arc::new(BooleanArray::from_iter(
            idx.iter()
                .enumerate()
                .map(|(i, &g)| opt(i).then_some(g % 2 == 0)),
        )),
        KeyKind::Date => Arc::new(Date32Array::from_iter(
            idx.iter()
                .enumerate()
                .map(|(i, &g)| opt(i).then_some(8000 + g as i32)),
        )),
        KeyKind::Dec => Arc::new(
            Decimal128Array::from_iter(
                idx.iter()
                    .enumerate()
                    .map(|(i, &g)| opt(i).then_some(g as i128 * 10_i128.pow(30) - 5)),
            )
            .with_precision_and_scale(38, 2)
            .unwrap(),
        ),
        KeyKind::F64 => Arc::new(Float64Array::from_iter(
            idx.iter()
                .enumerate()
                .map(|(i, &g)| opt(i).then_some(g as f64 * 0.5 - 3.0)),
        )),
    }
}

fn key_type(kind: KeyKind) -> DataType {
    match kind {
        KeyKind::StrDict => DataType::Utf8View,
        _ => key_column(kind, &[0], &[true]).data_type().clone(),
    }
}

/// A query over `rows` rows: the given key kinds, then a fixed mix of aggregates over five value
/// columns (Int64, Float64, Decimal128, Utf8, Boolean) with NULLs.
fn build(
    rows: usize,
    groups: u64,
    keys: &[KeyKind],
    dist: Dist,
    null_pct: u32,
    seed: u64,
    batches: usize,
) -> (QuerySpec, Vec<InputBatch>) {
    let key_cols: Vec<ArrayRef> = keys
        .iter()
        .enumerate()
        .map(|(c, &k)| {
            // Several keys: each draws its own indices, so the combination spreads.
            let g = if keys.len() > 1 {
                (groups as f64).powf(1.0 / keys.len() as f64).ceil() as u64
            } else {
                groups
            };
            key_column(
                k,
                &draw(rows, g.max(1), dist, seed + c as u64),
                &nulls(rows, null_pct, seed + 100 + c as u64),
            )
        })
        .collect();
    let v = draw(rows, 1_000_000, Dist::Uniform, seed + 7);
    let valid = nulls(rows, null_pct, seed + 8);
    let ints: ArrayRef =
        Arc::new(Int64Array::from_iter(v.iter().zip(&valid).map(
            |(&x, &ok)| ok.then_some(x as i64 * 1_000_000 - 500_000_000_000),
        )));
    let floats: ArrayRef = Arc::new(Float64Array::from_iter(
        v.iter()
            .zip(&valid)
            .map(|(&x, &ok)| ok.then_some(x as f64 * 0.25 - 70_000.0)),
    ));
    let decs: ArrayRef = Arc::new(
        Decimal128Array::from_iter(
            v.iter()
                .zip(&valid)
                .map(|(&x, &ok)| ok.then_some(x as i128 * 1_000 - 123_456)),
        )
        .with_precision_and_scale(15, 2)
        .unwrap(),
    );
    // The word forms' other paths: a 2-word unsigned sum, 128-bit decimals under the latch word
    // (beyond 64 bits, both signs), a signed ordinal (flipped in the shared table) of doubles.
    let unsigned: ArrayRef = Arc::new(UInt64Array::from_iter(
        v.iter()
            .zip(&valid)
            .map(|(&x, &ok)| ok.then_some((x << 24) + 7)),
    ));
    let wide_decs: ArrayRef = Arc::new(
        Decimal128Array::from_iter(
            v.iter()
                .zip(&valid)
                .map(|(&x, &ok)| ok.then_some((x as i128 - 500_000) << 70)),
        )
        .with_precision_and_scale(38, 2)
        .unwrap(),
    );
    let strs: ArrayRef = Arc::new(StringArray::from_iter(
        v.iter()
            .zip(&valid)
            .map(|(&x, &ok)| ok.then(|| format!("s{}", x % 997))),
    ));
    let bools: ArrayRef = Arc::new(BooleanArray::from_iter(
        v.iter()
            .zip(&valid)
            .map(|(&x, &ok)| ok.then_some(x % 3 == 0)),
    ));
    // CORR's pair: the doubles above and a second column, NULL on rows of its own.
    let valid2 = nulls(rows, null_pct, seed + 9);
    let others: ArrayRef =
        Arc::new(Float64Array::from_iter(v.iter().zip(&valid2).map(
            |(&x, &ok)| ok.then_some((x % 1013) as f64 * 3.0 - x as f64 * 0.001),
        )));
    let pair = grouper_core::expr::tuple(vec![floats.clone(), others], rows).unwrap();
    let aggs: Vec<(AggregateSpec, Option<ArrayRef>)> = vec![
        (AggregateSpec::count_star(), None),
        (AggregateSpec::new(AggKind::Corr, pair_type()), Some(pair)),
        // The aggregates without a word form: Welford's state and the holistic MEDIAN
        // (whose states move between partial results), over each type it keeps.
        (
            AggregateSpec::new(AggKind::Var, DataType::Float64),
            Some(floats.clone()),
        ),
        (
            AggregateSpec::new(AggKind::StddevPop, DataType::Float64),
            Some(floats.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Median, DataType::Float64),
            Some(floats.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Median, DataType::Int64),
            Some(ints.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Median, DataType::Decimal128(15, 2)),
            Some(decs.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Count, DataType::Int64),
            Some(ints.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Sum, DataType::Int64),
            Some(ints.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Min, DataType::Int64),
            Some(ints.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Max, DataType::Int64),
            Some(ints),
        ),
        (
            AggregateSpec::new(AggKind::Sum, DataType::Float64),
            Some(floats.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Avg, DataType::Float64),
            Some(floats.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Max, DataType::Float64),
            Some(floats.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Min, DataType::Float64),
            Some(floats),
        ),
        (
            AggregateSpec::new(AggKind::Sum, DataType::UInt64),
            Some(unsigned.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Max, DataType::UInt64),
            Some(unsigned),
        ),
        (
            AggregateSpec::new(AggKind::Min, DataType::Decimal128(38, 2)),
            Some(wide_decs.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Max, DataType::Decimal128(38, 2)),
            Some(wide_decs),
        ),
        (
            AggregateSpec::new(AggKind::Sum, DataType::Decimal128(15, 2)),
            Some(decs.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Avg, DataType::Decimal128(15, 2)),
            Some(decs.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Min, DataType::Decimal128(15, 2)),
            Some(decs),
        ),
        (
            AggregateSpec::new(AggKind::Min, DataType::Utf8),
            Some(strs.clone()),
        ),
        (
            AggregateSpec::new(AggKind::Count, DataType::Utf8),
            Some(strs.clone()),
        ),
        (AggregateSpec::new(AggKind::Max, DataType::Utf8), Some(strs)),
        (
            AggregateSpec::new(AggKind::Max, DataType::Boolean),
            Some(bools),
        ),
    ];
    let spec = QuerySpec {
        key_types: keys.iter().map(|&k| key_type(k)).collect(),
        aggregates: aggs.iter().map(|a| a.0.clone()).collect(),
    };
    let per = rows.div_ceil(batches.max(1)).max(1);
    let mut out = Vec::new();
    let mut off = 0;
    while off < rows {
        let len = per.min(rows - off);
        out.push(
            InputBatch::try_new(
                &spec,
                key_cols.iter().map(|c| c.slice(off, len)).collect(),
                aggs.iter()
                    .map(|a| a.1.as_ref().map(|c| c.slice(off, len)))
                    .collect(),
                len,
            )
            .unwrap(),
        );
        off += len;
    }
    (spec, out)
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// Runs every strategy that applies (perfect only when the domain allows) against the oracle.
fn check_all(
    spec: &QuerySpec,
    batches: &[InputBatch],
    hash: HashFn,
    initial_groups: Option<usize>,
) {
    check_all_with(spec, batches, hash, initial_groups, Default::default());
}

/// Every strategy, its private tables of `scheme`, against the reference; `auto` too.
fn check_all_with(
    spec: &QuerySpec,
    batches: &[InputBatch],
    hash: HashFn,
    initial_groups: Option<usize>,
    scheme: (Probing, BucketMap),
) {
    let expected = reference::aggregate(spec, batches).unwrap();
    let keys = spec.key_types.len();
    // Refused together: the bit-reversed identity would put every key in one bucket.
    let refused = hash == HashFn::Identity && scheme.1 == BucketMap::Modulo;
    for strategy in Strategy::ALL {
        let opts = Overrides {
            strategy: Some(strategy),
            hash: Some(hash),
            initial_groups,
            probing: Some(scheme.0),
            buckets: Some(scheme.1),
            ..Default::default()
        };
        match pool(3).install(|| aggregate(spec, batches, &opts)) {
            Ok(out) => {
                assert!(!refused, "{strategy} took identity with modulo");
                assert_eq!(
                    out.num_rows,
                    expected.first().map_or(1, |c| c.len()),
                    "{strategy}"
                );
                if let Err(e) = same_groups(&expected, &out.columns, keys) {
                    panic!("{strategy} with {hash}, {} {}: {e}", scheme.0, scheme.1);
                }
            }
            Err(GrouperError::InvalidOption(m)) if refused => {
                assert!(m.contains("identity hash"), "{m}")
            }
            Err(GrouperError::InvalidOption(m)) if strategy == Strategy::Perfect => {
                assert!(m.contains("domain"), "{m}")
            }
            Err(e) => panic!("{strategy}: {e}"),
        }
    }
    // auto as well
    let out = pool(2)
        .install(|| aggregate(spec, batches, &Overrides::default()))
        .unwrap();
    same_groups(&expected, &out.columns, keys).unwrap();
}

fn key_kind() -> impl proptest::strategy::Strategy<Value = KeyKind> {
    prop_oneof![
        Just(KeyKind::I32),
        Just(KeyKind::I64),
        Just(KeyKind::U64Wide),
        Just(KeyKind::Str),
        Just(KeyKind::StrView),
        Just(KeyKind::StrDict),
        Just(KeyKind::Bool),
        Just(KeyKind::Date),
        Just(KeyKind::Dec),
        Just(KeyKind::F64)
    ]
}

fn dist() -> impl proptest::strategy::Strategy<Value = Dist> {
    prop_oneof![
        Just(Dist::Uniform),
        Just(Dist::Skewed),
        Just(Dist::Sorted),
        Just(Dist::HeavyHitter),
        Just(Dist::Exponential),
        Just(Dist::Normal)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn strategies_match_reference(
        keys in prop::collection::vec(key_kind(), 0..4),
        rows in 0usize..6000,
        groups in 1u64..5000,
        d in dist(),
        null_pct in prop_oneof![Just(0u32), 1u32..50],
        seed in any::<u64>(),
        batches in 1usize..5,
        hash in prop_oneof![
            Just(HashFn::Murmur3),
            Just(HashFn::MultiplyShift),
            proptest::strategy::Strategy::prop_map(any::<u64>(), HashFn::random_multiply_shift),
            Just(HashFn::Fnv1a),
            Just(HashFn::Identity)
        ],
        tiny_table in any::<bool>(),
        probing in prop::sample::select(Probing::ALL.to_vec()),
        buckets in prop::sample::select(BucketMap::ALL.to_vec()),
    ) {
        let (spec, input) = build(rows, groups, &keys, d, null_pct, seed, batches);
        check_all_with(&spec, &input, hash, tiny_table.then_some(1), (probing, buckets));
    }
}

#[test]
fn a_million_groups() {
    // 1.5M rows over 10^6 dense Int64 keys, and over wide u64 keys.
    for kind in [KeyKind::I64, KeyKind::U64Wide] {
        let (spec, input) = build(1_500_000, 1_000_000, &[kind], Dist::Uniform, 5, 42, 7);
        check_all(&spec, &input, HashFn::Murmur3, None);
    }
}

#[test]
fn lane_copies_survive_a_codec_widening() {
    // Interned keys whose dictionary outgrows its first capacity between batches: a worker's
    // groups move to a new direct index that keeps copies of each group's states (found by
    // the proptest above: the moved states landed on another group's copy).
    let (spec, input) = build(
        112,
        1445,
        &[KeyKind::U64Wide, KeyKind::Bool],
        Dist::Sorted,
        12,
        2050482764511631929,
        3,
    );
    check_all(&spec, &input, HashFn::Murmur3, None);
}

#[test]
fn a_corr_that_cancels_to_near_zero() {
    // Groups of 1-3 rows whose CORR cancels to ~2.7e-7: strategies add the co-moments in
    // another order than the reference and land 1.8e-15 apart, rounding noise that the
    // comparison's absolute tolerance accepts (found by the proptest above in CI).
    let (spec, input) = build(
        4157,
        3823,
        &[KeyKind::I32],
        Dist::Uniform,
        0,
        9262574530794804027,
        4,
    );
    check_all(&spec, &input, HashFn::Fnv1a, None);
}

#[test]
fn batches_of_one_group_fold_at_once() {
    // Sorted keys over 1–3 groups: most morsels hold one key word, which a streaming worker
    // folds with each aggregate's reduction (`update_one`) instead of the row loop; the morsels
    // across a key change take the row loop. NULL values and keys, and no GROUP BY, too.
    for (keys, groups, null_pct) in [
        (vec![KeyKind::I64], 1, 0),
        (vec![KeyKind::I64], 3, 20),
        (vec![KeyKind::Str, KeyKind::Bool], 2, 0),
        (vec![KeyKind::Dec], 3, 0),
        (vec![], 1, 10),
    ] {
        let (spec, input) = build(50_000, groups, &keys, Dist::Sorted, null_pct, 7, 4);
        check_all(&spec, &input, HashFn::Murmur3, None);
    }
}

#[test]
fn wide_composite_keys_take_the_interned_path() {
    // Three u64 keys spread over the full range: the domain exceeds 2^64.
    let (spec, input) = build(
        20_000,
        3_000,
        &[KeyKind::U64Wide, KeyKind::U64Wide, KeyKind::Dec],
        Dist::Uniform,
        10,
        3,
        3,
    );
    check_all(&spec, &input, HashFn::Murmur3, Some(1));
    // Strings, NULLs and more rows than one block of morsels holds: `partitioned` interns
    // the rows a partition a dictionary shard, over several blocks.
    let (spec, input) = build(
        200_000,
        150_000,
        &[KeyKind::StrView, KeyKind::U64Wide, KeyKind::U64Wide],
        Dist::Skewed,
        5,
        11,
        4,
    );
    check_all(&spec, &input, HashFn::Murmur3, None);
    // No NULLs: the wide column packs alone, the rest in a second word, and the keys are
    // interned as two words.
    let (spec, input) = build(
        200_000,
        150_000,
        &[KeyKind::U64Wide, KeyKind::StrView, KeyKind::I64],
        Dist::Uniform,
        0,
        12,
        3,
    );
    check_all(&spec, &input, HashFn::Murmur3, None);
}

#[test]
fn empty_input_and_global_aggregates() {
    for keys in [vec![], vec![KeyKind::I64]] {
        let (spec, input) = build(0, 10, &keys, Dist::Uniform, 0, 1, 1);
        check_all(&spec, &input, HashFn::Murmur3, None);
        let out = aggregate(&spec, &input, &Overrides::default()).unwrap();
        // No GROUP BY: one row (count 0, sum NULL); with GROUP BY: no rows.
        assert_eq!(out.num_rows, usize::from(keys.is_empty()));
    }
    let (spec, input) = build(1000, 10, &[], Dist::Uniform, 20, 1, 3);
    check_all(&spec, &input, HashFn::Murmur3, None);
}

#[test]
fn all_null_keys_form_one_group() {
    let (spec, input) = build(
        3000,
        10,
        &[KeyKind::Str, KeyKind::I32],
        Dist::Uniform,
        100,
        9,
        2,
    );
    check_all(&spec, &input, HashFn::Murmur3, None);
    assert_eq!(
        aggregate(&spec, &input, &Overrides::default())
            .unwrap()
            .num_rows,
        1
    );
}

#[test]
fn integer_sum_overflow_is_an_error_in_every_strategy() {
    let spec = QuerySpec {
        key_types: vec![DataType::Int32],
        aggregates: vec![AggregateSpec::new(AggKind::Sum, DataType::Int64)],
    };
    let keys: ArrayRef = Arc::new(Int32Array::from(vec![1; 4]));
    let vals: ArrayRef = Arc::new(Int64Array::from(vec![i64::MAX, 1, 5, 6]));
    let input = vec![InputBatch::try_new(&spec, vec![keys], vec![Some(vals)], 4).unwrap()];
    assert!(matches!(
        reference::aggregate(&spec, &input),
        Err(GrouperError::Overflow { .. })
    ));
    for strategy in Strategy::ALL {
        let opts = Overrides {
            strategy: Some(strategy),
            ..Default::default()
        };
        let err = aggregate(&spec, &input, &opts).unwrap_err();
        assert!(
            matches!(err, GrouperError::Overflow { .. }),
            "{strategy}: {err}"
        );
        assert_eq!(
            err.to_string(),
            "arithmetic overflow in sum: the result does not fit Int64"
        );
    }
}

/// Found by the operator fuzz target: `shared` (exact 128-bit atomics) answered where the other
/// strategies raised, because their 64-bit running sum left Int64 on the way. Every strategy now
/// sums exactly and only a total outside Int64 is an overflow.
#[test]
fn a_running_sum_that_leaves_int64_and_returns_is_exact_in_every_strategy() {
    let spec = QuerySpec {
        key_types: vec![DataType::Int32],
        aggregates: vec![AggregateSpec::new(AggKind::Sum, DataType::Int64)],
    };
    let keys: ArrayRef = Arc::new(Int32Array::from(vec![1, 1, 1, 2, 2]));
    let vals: ArrayRef = Arc::new(Int64Array::from(vec![
        i64::MAX,
        i64::MAX,
        -i64::MAX,
        i64::MIN,
        i64::MAX,
    ]));
    let input = vec![InputBatch::try_new(&spec, vec![keys], vec![Some(vals)], 5).unwrap()];
    let expected = reference::aggregate(&spec, &input).unwrap();
    let sums = expected[1].as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!((sums.value(0), sums.value(1)), (i64::MAX, -1));
    for strategy in Strategy::ALL {
        for initial_groups in [None, Some(1)] {
            let opts = Overrides {
                strategy: Some(strategy),
                initial_groups,
                ..Default::default()
            };
            let got = aggregate(&spec, &input, &opts).unwrap();
            same_groups(&expected, &got.columns, 1).unwrap_or_else(|e| panic!("{strategy}: {e}"));
        }
    }
}

#[test]
fn forced_perfect_on_a_wide_domain_fails_clearly() {
    let (spec, input) = build(100, 100, &[KeyKind::U64Wide], Dist::Uniform, 0, 5, 1);
    let opts = Overrides {
        strategy: Some(Strategy::Perfect),
        ..Default::default()
    };
    let err = aggregate(&spec, &input, &opts).unwrap_err().to_string();
    assert!(err.contains("perfect needs a key domain"), "{err}");
}

#[test]
fn mismatched_input_is_rejected() {
    let spec = QuerySpec {
        key_types: vec![DataType::Int32],
        aggregates: vec![AggregateSpec::count_star()],
    };
    let wrong: ArrayRef = Arc::new(Int64Array::from(vec![1]));
    assert!(InputBatch::try_new(&spec, vec![wrong], vec![None], 1).is_err());
    let unsupported = QuerySpec {
        key_types: vec![DataType::Binary],
        aggregates: vec![],
    };
    assert!(aggregate(&unsupported, &[], &Overrides::default()).is_err());
}
