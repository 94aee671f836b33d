//! The operator's inputs: a key/aggregate spec and batches decoded from the fuzzer's bytes,
//! run on every CPU strategy (hash tables started at one group, so they grow) and on the
//! reference executor. No input may panic; an error must be the reference's error too
//! (overflow), and results must equal the reference's.
#![no_main]

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Decimal128Array, Float64Array, Int64Array, StringArray};
use arrow::datatypes::DataType;
use grouper_core::agg::{AggKind, AggregateSpec};
use grouper_core::compare::same_groups;
use grouper_core::cpu::Strategy;
use grouper_core::planner::Overrides;
use grouper_core::{aggregate, reference, InputBatch, QuerySpec};
use libfuzzer_sys::fuzz_target;

/// Bytes as a stream of small decisions.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn i64(&mut self) -> i64 {
        // Mostly small values, sometimes the limits.
        match self.u8() % 8 {
            0 => i64::MAX,
            1 => i64::MIN,
            2 => i64::from_le_bytes(std::array::from_fn(|_| self.u8())),
            _ => i64::from(self.u8() as i8),
        }
    }
}

const TYPES: [DataType; 5] = [
    DataType::Int64,
    DataType::Utf8,
    DataType::Boolean,
    DataType::Float64,
    DataType::Decimal128(20, 2),
];

fn column(b: &mut Bytes, t: &DataType, rows: usize) -> ArrayRef {
    let nulls = b.u8() % 4;
    let mut valid = |b: &mut Bytes| nulls == 0 || b.u8() % 4 >= nulls;
    match t {
        DataType::Int64 => Arc::new((0..rows).map(|_| valid(b).then(|| b.i64())).collect::<Int64Array>()),
        DataType::Utf8 => Arc::new(
            (0..rows)
                .map(|_| valid(b).then(|| format!("s{}", b.u8() % 16)))
                .collect::<StringArray>(),
        ),
        DataType::Boolean => Arc::new((0..rows).map(|_| valid(b).then(|| b.u8() % 2 == 0)).collect::<BooleanArray>()),
        DataType::Float64 => Arc::new((0..rows).map(|_| valid(b).then(|| f64::from(b.u8() as i8) / 4.0)).collect::<Float64Array>()),
        _ => Arc::new(
            (0..rows)
                .map(|_| valid(b).then(|| i128::from(b.i64()) * 1000))
                .collect::<Decimal128Array>()
                .with_precision_and_scale(20, 2)
                .expect("valid precision"),
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let key_types: Vec<DataType> = (0..b.u8() % 4).map(|_| TYPES[usize::from(b.u8()) % 5].clone()).collect();
    let mut aggregates = Vec::new();
    for _ in 0..1 + b.u8() % 3 {
        let t = TYPES[usize::from(b.u8()) % 5].clone();
        let kind = [AggKind::CountStar, AggKind::Count, AggKind::Sum, AggKind::Min, AggKind::Max, AggKind::Avg][usize::from(b.u8()) % 6];
        let spec = AggregateSpec::new(kind, t);
        // Only aggregates the engine declares it supports.
        if (QuerySpec { key_types: vec![], aggregates: vec![spec.clone()] }).output_types().is_ok() {
            aggregates.push(spec);
        }
    }
    let spec = QuerySpec { key_types, aggregates };
    if spec.output_types().is_err() || spec.aggregates.is_empty() {
        return;
    }
    let mut batches = Vec::new();
    for _ in 0..1 + b.u8() % 3 {
        let rows = usize::from(b.u8() % 64);
        let keys = spec.key_types.iter().map(|t| column(&mut b, t, rows)).collect();
        let args = spec
            .aggregates
            .iter()
            .map(|a| (a.kind != AggKind::CountStar).then(|| column(&mut b, &a.input_type.clone().unwrap_or(DataType::Int64), rows)))
            .collect();
        let Ok(batch) = InputBatch::try_new(&spec, keys, args, rows) else { return };
        batches.push(batch);
    }
    let expected = reference::aggregate(&spec, &batches);
    for strategy in Strategy::ALL {
        let options = Overrides { strategy: Some(strategy), initial_groups: Some(1), ..Default::default() };
        match (&expected, aggregate(&spec, &batches, &options)) {
            (Ok(want), Ok(got)) => {
                if let Err(e) = same_groups(want, &got.columns, spec.key_types.len()) {
                    panic!("{strategy}: {e}");
                }
            }
            (Err(_), Err(_)) => {}
            // A forced strategy may refuse a key domain it cannot index.
            (_, Err(grouper_core::GrouperError::InvalidOption(_))) => {}
            (want, got) => panic!("{strategy}: reference {want:?} vs {:?}", got.map(|g| g.num_rows)),
        }
    }
});
