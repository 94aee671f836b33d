//! The GPU backend's host side of a transfer, which needs no GPU: choosing each column's
//! transfer encoding ([`Encoding::choose`]) and writing one chunk's image ([`ImageLayout::new`]
//! and [`ImageLayout::fill`]).
//!
//! Every GPU query that copies its input (rather than keeping it resident) chooses encodings
//! once over the whole input, then fills one image per chunk into a pinned staging buffer while
//! the previous chunk aggregates on the device; when filling is slower than PCIe, the CPU and
//! not the link bounds the GPU's throughput.
//!
//! Input: 1M rows (one chunk; the default chunk is 4M rows) in pieces of 8192 rows, as a scan
//! hands them over:
//! - `choose/int64_small_range`: Int64 values in `10^9..10^9 + 200` (frame of reference,
//!   8 bits: the range alone decides);
//! - `choose/int64_few_distinct`: Int64 multiples of 10^6 with 50 distinct values (a 26-bit
//!   span: the distinct-value pass runs and a 6-bit dictionary wins);
//! - `fill/4_columns`: the image of an Int32 key (frame of reference), the small-range Int64
//!   with every tenth value NULL (packed values and a validity region), the few-distinct Int64
//!   (dictionary) and a Float64 (plain, copied as is), into a reused buffer; then each of
//!   these columns' image alone (`fill/<column>_<scheme>`), to see where the time goes.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array};
use arrow::datatypes::DataType;
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use grouper_gpu::encode::{Encoding, Scheme};
use grouper_gpu::image::ImageLayout;

/// Rows of the chunk (2^20, "1M").
const ROWS: usize = 1 << 20;
/// Rows per piece.
const PIECE_ROWS: usize = 8192;

/// xorshift64*: deterministic inputs without a dependency on `rand`.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// A value uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        ((x.wrapping_mul(0x2545_f491_4f6c_dd1d) as u128 * n as u128) >> 64) as u64
    }
}

/// A column of `ROWS` rows cut into pieces, from a generator of `Some(value)` or `None`.
fn pieces<T>(
    mut value: impl FnMut(usize) -> Option<T>,
    array: fn(Vec<Option<T>>) -> ArrayRef,
) -> Vec<ArrayRef> {
    (0..ROWS)
        .step_by(PIECE_ROWS)
        .map(|at| array((at..at + PIECE_ROWS).map(&mut value).collect()))
        .collect()
}

fn int64(v: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from(v))
}

fn bench_transfer(c: &mut Criterion) {
    let mut rng = XorShift::new(0x0074_7261_6e73);
    let small_range = pieces(|_| Some(1_000_000_000 + rng.below(200) as i64), int64);
    let few_distinct = pieces(|_| Some(rng.below(50) as i64 * 1_000_000), int64);
    let nullable = pieces(
        |r| (r % 10 != 0).then(|| 1_000_000_000 + rng.below(200) as i64),
        int64,
    );
    let keys = pieces(
        |_| Some(rng.below(100_000) as i32 - 50_000),
        |v| Arc::new(Int32Array::from(v)),
    );
    let floats = pieces(
        |_| Some(rng.below(1 << 40) as f64 * 0.01),
        |v| Arc::new(Float64Array::from(v)),
    );

    let mut choose = c.benchmark_group("transfer/choose");
    choose.throughput(Throughput::Elements(ROWS as u64));
    for (name, column, scheme) in [
        ("int64_small_range", &small_range, Scheme::FrameOfReference),
        ("int64_few_distinct", &few_distinct, Scheme::Dictionary),
    ] {
        let e = Encoding::choose(&DataType::Int64, column).unwrap();
        assert_eq!(e.scheme, scheme, "{name}: {e}");
        choose.bench_function(name, |b| {
            b.iter(|| Encoding::choose(&DataType::Int64, column).unwrap())
        });
    }
    choose.finish();

    let columns = [
        ("int32_key", DataType::Int32, keys, false),
        ("int64_nullable", DataType::Int64, nullable, true),
        ("int64_few_distinct", DataType::Int64, few_distinct, false),
        ("float64", DataType::Float64, floats, false),
    ];
    let encodings: Vec<Option<Encoding>> = columns
        .iter()
        .map(|(_, t, p, _)| Some(Encoding::choose(t, p).unwrap()))
        .collect();
    let schemes: Vec<Scheme> = encodings.iter().flatten().map(|e| e.scheme).collect();
    assert_eq!(
        schemes,
        [
            Scheme::FrameOfReference,
            Scheme::FrameOfReference,
            Scheme::Dictionary,
            Scheme::Plain
        ]
    );
    let nullable: Vec<bool> = columns.iter().map(|c| c.3).collect();
    let names: Vec<&str> = columns.iter().map(|c| c.0).collect();
    let pieces: Vec<Option<Vec<ArrayRef>>> =
        columns.into_iter().map(|(_, _, p, _)| Some(p)).collect();

    let mut fill = c.benchmark_group("transfer/fill");
    bench_fill(&mut fill, "4_columns", &pieces, &encodings, &nullable);
    // Each column alone, to see which scheme the image's time goes to.
    for (c, name) in names.iter().enumerate() {
        let one = |v: usize| v..v + 1;
        bench_fill(
            &mut fill,
            &format!("{name}_{}", schemes[c].name()),
            &pieces[one(c)],
            &encodings[one(c)],
            &nullable[one(c)],
        );
    }
    fill.finish();
}

/// Benchmarks laying out and filling the image of `pieces` into a reused buffer; throughput
/// in bytes of the image (what then crosses PCIe).
fn bench_fill(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    pieces: &[Option<Vec<ArrayRef>>],
    encodings: &[Option<Encoding>],
    nullable: &[bool],
) {
    let bytes = ImageLayout::new(ROWS, encodings, nullable).bytes;
    let mut out = vec![0u8; bytes];
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function(name, |b| {
        b.iter(|| {
            let layout = ImageLayout::new(ROWS, encodings, nullable);
            layout.fill(pieces, encodings, &mut out).unwrap();
            black_box(&out);
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_transfer
}
criterion_main!(benches);
