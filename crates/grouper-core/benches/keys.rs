//! Key normalization: [`KeyCodec`] planning a codec from 1M rows of keys and encoding them into
//! `u64` words, morsel by morsel.
//!
//! Every query with a GROUP BY runs this before any strategy sees a row: the executor plans a
//! codec from the first batch ([`KeyCodec::plan`]; the GPU backend plans an exact one over all
//! input, [`KeyCodec::plan_exact`]) and then encodes each morsel ([`KeyCodec::encode`]), so
//! `encode`'s cost is paid on every input row of every strategy, CPU and GPU alike.
//!
//! Cases (1M rows each, no NULLs):
//! - `int32`: one Int32 column over 1k values, the mixed-radix fast path (`encode_ordinal`);
//! - `int32_int64`: an Int32 (1k values) and an Int64 (1k values around 10^12) packed into
//!   one word (domain 10^6), two passes over the words;
//! - `utf8`: a Utf8 column of 1k distinct 12-byte strings through the string dictionary;
//! - `utf8view`: the same strings as Utf8View (what DataFusion's Parquet scans produce),
//!   which `encode` looks up once per distinct view.
//!
//! `plan_exact` is measured over the whole column (its min/max scan or dictionary seeding);
//! `encode` over morsels of [`MORSEL_ROWS`] rows, as the executor calls it, with a codec that
//! covers every key (no widening inside the loop).

mod common;

use std::hint::black_box;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, StringArray, StringViewArray};
use arrow::datatypes::DataType;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use grouper_core::input::MORSEL_ROWS;
use grouper_core::keys::KeyCodec;

use common::{config, XorShift, ROWS};

/// Distinct values per key column.
const DISTINCT: u64 = 1_000;

/// The key columns of one case: their types and 1M rows of each.
struct Keys {
    name: &'static str,
    types: Vec<DataType>,
    columns: Vec<ArrayRef>,
}

fn int32(rng: &mut XorShift) -> ArrayRef {
    Arc::new(Int32Array::from_iter_values(
        (0..ROWS).map(|_| rng.below(DISTINCT) as i32 - 500),
    ))
}

fn strings(rng: &mut XorShift) -> Vec<String> {
    let names: Vec<String> = (0..DISTINCT).map(|i| format!("key-{i:08}")).collect();
    (0..ROWS)
        .map(|_| names[rng.below(DISTINCT) as usize].clone())
        .collect()
}

fn cases() -> Vec<Keys> {
    let mut rng = XorShift::new(0x6b65_7973);
    let wide: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..ROWS).map(|_| 1_000_000_000_000 + rng.below(DISTINCT) as i64),
    ));
    let values = strings(&mut rng);
    vec![
        Keys {
            name: "int32",
            types: vec![DataType::Int32],
            columns: vec![int32(&mut rng)],
        },
        Keys {
            name: "int32_int64",
            types: vec![DataType::Int32, DataType::Int64],
            columns: vec![int32(&mut rng), wide],
        },
        Keys {
            name: "utf8",
            types: vec![DataType::Utf8],
            columns: vec![Arc::new(StringArray::from_iter_values(&values))],
        },
        Keys {
            name: "utf8view",
            types: vec![DataType::Utf8View],
            columns: vec![Arc::new(StringViewArray::from_iter_values(&values))],
        },
    ]
}

/// The morsels of `columns`: zero-copy slices of [`MORSEL_ROWS`] rows.
fn morsels(columns: &[ArrayRef]) -> Vec<Vec<ArrayRef>> {
    (0..ROWS)
        .step_by(MORSEL_ROWS)
        .map(|at| {
            let len = MORSEL_ROWS.min(ROWS - at);
            columns.iter().map(|c| c.slice(at, len)).collect()
        })
        .collect()
}

fn bench_keys(c: &mut Criterion) {
    let cases = cases();

    let mut plan = c.benchmark_group("keys/plan_exact");
    plan.throughput(Throughput::Elements(ROWS as u64));
    for k in &cases {
        plan.bench_function(k.name, |b| {
            b.iter(|| KeyCodec::plan_exact(&k.types, &[&k.columns]).unwrap())
        });
    }
    plan.finish();

    let mut encode = c.benchmark_group("keys/encode");
    encode.throughput(Throughput::Elements(ROWS as u64));
    for k in &cases {
        let codec = KeyCodec::plan_exact(&k.types, &[&k.columns]).unwrap();
        let morsels = morsels(&k.columns);
        // Every key lies within the codec: encode never asks for a wider one.
        assert!(morsels
            .iter()
            .all(|m| codec.encode(m, m[0].len()).unwrap().is_some()));
        encode.bench_function(k.name, |b| {
            b.iter(|| {
                for m in &morsels {
                    black_box(codec.encode(m, m[0].len()).unwrap());
                }
            })
        });
    }
    encode.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_keys
}
criterion_main!(benches);
