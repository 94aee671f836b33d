//! A whole query through [`grouper_core::aggregate`]: `SELECT k, SUM(v), COUNT(*) GROUP BY k`
//! over 1M rows with the `thread_local` strategy, as the reference point the microbenchmarks
//! of `keys`, `table` and `agg` add up to.
//!
//! This is the engine's public entry point, and what the DataFusion operator's workers run
//! piecewise (`Worker::push`, then `Aggregation::finish`): planning from the first batch, key
//! encoding (and widening), morsel-driven mapping and updating on every thread of the rayon pool,
//! the radix-partitioned merge of the per-thread tables, key decoding and finalization.
//!
//! Input: 128 batches of 8192 rows (DataFusion's batch size) of an Int64 key drawn uniformly
//! from 2^10 values (~1k groups) or 2^20 values (~663k groups), spread by a stride so the keys
//! are sparse, and an Int64 argument in `0..1000`. The batches are built once; each iteration
//! is a full query from them, output included.

mod common;

use std::hint::black_box;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array};
use arrow::datatypes::DataType;
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use grouper_core::agg::{AggKind, AggregateSpec};
use grouper_core::cpu::Strategy;
use grouper_core::{aggregate, InputBatch, Options, QuerySpec};

use common::{config, XorShift, ROWS};

/// Rows per input batch.
const BATCH_ROWS: usize = 8192;

fn spec() -> QuerySpec {
    QuerySpec {
        key_types: vec![DataType::Int64],
        aggregates: vec![
            AggregateSpec::new(AggKind::Sum, DataType::Int64),
            AggregateSpec::count_star(),
        ],
    }
}

/// `ROWS` rows of keys drawn from `domain` values, in batches of `BATCH_ROWS`.
fn batches(spec: &QuerySpec, domain: u64) -> Vec<InputBatch> {
    let mut rng = XorShift::new(0x0065_3265 ^ domain);
    (0..ROWS / BATCH_ROWS)
        .map(|_| {
            let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(
                (0..BATCH_ROWS).map(|_| rng.below(domain) as i64 * 1_000_003),
            ));
            let values: ArrayRef = Arc::new(Int64Array::from_iter_values(
                (0..BATCH_ROWS).map(|_| rng.below(1000) as i64),
            ));
            InputBatch::try_new(spec, vec![keys], vec![Some(values), None], BATCH_ROWS).unwrap()
        })
        .collect()
}

fn bench_end_to_end(c: &mut Criterion) {
    let spec = spec();
    let options = Options {
        strategy: Some(Strategy::ThreadLocal),
        ..Options::default()
    };
    let mut group = c.benchmark_group("end_to_end/thread_local");
    group.throughput(Throughput::Elements(ROWS as u64));
    // Iterations of tens to hundreds of ms: equal samples, not criterion's 1 + 2 + ... + 10.
    group.sampling_mode(SamplingMode::Flat);
    for (label, domain) in [("1k", 1u64 << 10), ("1M", 1 << 20)] {
        let input = batches(&spec, domain);
        let out = aggregate(&spec, &input, &options).unwrap();
        assert_eq!(
            out.decision.as_ref().map(|d| d.strategy),
            Some(Strategy::ThreadLocal)
        );
        group.bench_function(label, |b| {
            b.iter(|| black_box(aggregate(&spec, &input, &options).unwrap()))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_end_to_end
}
criterion_main!(benches);
