//! A filter's kept rows folded in place (`Worker::push_selected`: keys and arguments holding every
//! row, the kept ones named) against the reference over the kept rows gathered: few groups (the
//! runs that read kept rows in place), many (the gathered fallback), NULL arguments and MIN
//! (aggregates that take no runs), string keys of a dictionary.

use std::sync::Arc;

use arrow::array::{ArrayRef, DictionaryArray, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Int32Type};
use grouper_core::agg::{AggKind, AggregateSpec};
use grouper_core::compare::same_groups;
use grouper_core::planner::Overrides;
use grouper_core::{reference, Aggregation, InputBatch, QuerySpec};
use proptest::prelude::*;

/// A batch of `rows` rows: an integer key of `groups` values (or its string, dictionary-encoded),
/// then SUM and MIN of an integer with NULLs where `nulls`, AVG of a float, COUNT(*).
fn batch(spec: &QuerySpec, seed: u64, rows: usize, groups: u64, nulls: bool) -> InputBatch {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Keys spread over a domain past a direct table's copies (as Q1's dictionary codes are).
    let keys: Vec<i64> = (0..rows).map(|_| (next() % groups) as i64 * 97).collect();
    let key: ArrayRef = match spec.key_types[0] {
        DataType::Utf8 => {
            let values = StringArray::from_iter_values((0..groups).map(|g| format!("k{g}")));
            let codes = keys.iter().map(|&k| (k / 97) as i32).collect::<Vec<_>>();
            Arc::new(DictionaryArray::<Int32Type>::try_new(codes.into(), Arc::new(values)).unwrap())
        }
        _ => Arc::new(Int64Array::from(keys)),
    };
    let v: ArrayRef = Arc::new(Int64Array::from_iter((0..rows).map(|_| {
        let n = next();
        (!nulls || n % 7 != 0).then_some((n % 2001) as i64 - 1000)
    })));
    let f: ArrayRef = Arc::new(Float64Array::from_iter_values(
        (0..rows).map(|_| (next() % 1000) as f64 / 8.0),
    ));
    let args = vec![Some(Arc::clone(&v)), Some(v), Some(f), None];
    InputBatch::try_new(spec, vec![key], args, rows).unwrap()
}

fn spec(key: DataType) -> QuerySpec {
    QuerySpec {
        key_types: vec![key],
        aggregates: vec![
            AggregateSpec::new(AggKind::Sum, DataType::Int64),
            AggregateSpec::new(AggKind::Min, DataType::Int64),
            AggregateSpec::new(AggKind::Avg, DataType::Float64),
            AggregateSpec::count_star(),
        ],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn kept_rows_folded_in_place_equal_the_reference(
        seed in any::<u64>(),
        groups in prop::sample::select(vec![1u64, 4, 40, 3000]),
        nulls in any::<bool>(),
        strings in any::<bool>(),
        keep_every in 1u64..6,
        batches in 1usize..5,
    ) {
        let spec = spec(if strings { DataType::Utf8 } else { DataType::Int64 });
        let agg = Aggregation::new(spec.clone(), Overrides::default()).unwrap();
        let mut w = agg.worker();
        let mut gathered = Vec::new();
        for b in 0..batches {
            let input = batch(&spec, seed.wrapping_add(b as u64 * 7919), 4096, groups, nulls);
            // The first batch whole (it plans), then rows dropped by a pattern of the seed.
            let kept: Vec<u32> = (0..4096u32)
                .filter(|&r| b == 0 || (u64::from(r) ^ seed) % keep_every != 1)
                .collect();
            w.push_selected(&input, &kept).unwrap();
            gathered.push(input.take(&kept).unwrap());
        }
        let out = agg.finish(vec![w]).unwrap();
        let want = reference::aggregate(&spec, &gathered).unwrap();
        prop_assert!(same_groups(&want, &out.columns, 1).is_ok(), "{:?}", same_groups(&want, &out.columns, 1));
    }
}
