//! The aggregate algebra: [`Aggregate::update_batch`] folding 1M rows into per-group states,
//! for `SUM(Int64)`, `COUNT(x)` and `COUNT(*)`.
//!
//! After a strategy has mapped a morsel's rows to group ids it calls `update_batch` once per
//! aggregate (through [`GroupAccumulator::update`](grouper_core::agg::GroupAccumulator)), on
//! every CPU strategy, the reference executor, and the CPU side of the GPU's co-processing;
//! with the key encoding and the table it is the third pass every input row makes.
//!
//! Input: 1M group ids drawn uniformly from 2^10 groups (the states stay in L1) or 2^20 groups
//! (8 MiB of counts, 32 MiB of sum states: a cache miss per row), and 1M Int64 values in `0..1000`,
//! either all valid or with every tenth NULL (`nulls`, the validity-checking loop). Updates
//! run in morsels of [`MORSEL_ROWS`] rows over states that persist across iterations (sums of
//! small values cannot overflow their 128-bit accumulators).

mod common;

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array};
use arrow::datatypes::DataType;
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use grouper_core::agg::{Aggregate, Count, CountStar, SumI64};
use grouper_core::input::MORSEL_ROWS;

use common::{config, XorShift, ROWS};

/// A morsel: its group ids and argument values.
type Morsel = (Vec<u32>, ArrayRef);

/// `ROWS` rows over `groups` groups, cut into morsels; every tenth value NULL if `nulls`.
fn input(groups: u64, nulls: bool) -> Vec<Morsel> {
    let mut rng = XorShift::new(0x0061_6767 ^ groups);
    let gids: Vec<u32> = (0..ROWS).map(|_| rng.below(groups) as u32).collect();
    let values: ArrayRef = Arc::new(Int64Array::from_iter((0..ROWS).map(|r| {
        let v = rng.below(1000) as i64;
        (!nulls || r % 10 != 0).then_some(v)
    })));
    gids.chunks(MORSEL_ROWS)
        .enumerate()
        .map(|(i, g)| (g.to_vec(), values.slice(i * MORSEL_ROWS, g.len())))
        .collect()
}

/// Benchmarks `agg.update_batch` over `morsels` into `groups` states.
fn bench_update<A: Aggregate>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    agg: &A,
    morsels: &[Morsel],
    groups: usize,
    with_input: bool,
) {
    let mut states = vec![agg.init(); groups];
    group.bench_function(name, |b| {
        b.iter(|| {
            for (gids, values) in morsels {
                let input = with_input.then_some(values);
                agg.update_batch(&mut states, gids, input).unwrap();
            }
        })
    });
}

fn bench_agg(c: &mut Criterion) {
    let mut group = c.benchmark_group("agg/update_batch");
    group.throughput(Throughput::Elements(ROWS as u64));
    let g = &mut group;
    let sum = SumI64::new(DataType::Int64);
    for (label, groups) in [("1k", 1u64 << 10), ("1M", 1 << 20)] {
        let valid = input(groups, false);
        let n = groups as usize;
        bench_update(g, &format!("sum/{label}"), &sum, &valid, n, true);
        bench_update(g, &format!("count/{label}"), &Count, &valid, n, true);
        bench_update(
            g,
            &format!("count_star/{label}"),
            &CountStar,
            &valid,
            n,
            false,
        );
        let nullable = input(groups, true);
        bench_update(g, &format!("sum/{label}/nulls"), &sum, &nullable, n, true);
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_agg
}
criterion_main!(benches);
