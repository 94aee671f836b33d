//! The CPU hash table: [`LinearTable::map`] turning 1M key words into dense group ids.
//!
//! This is the inner loop of the `thread_local` strategy (each worker maps its morsels' words
//! through a private table, then updates the accumulators by group id) and of every hashed
//! partial of `perfect` that outgrew its direct index; how fast words become group ids bounds
//! the throughput of every query whose keys are not dense.
//!
//! Input: 1M words drawn uniformly from a domain of 2^10 (~1k groups: the table stays in L1/L2,
//! almost every probe is a hit) or 2^20 (~663k groups, since 1M uniform draws over 2^20 values
//! leave 1 - 1/e of them: the table spans tens of MiB, most probes miss cache and a large
//! share insert). Words are scattered over 64 bits by an odd multiplier, as the sparse keys that
//! reach a hash table are. Each iteration maps them in morsels of [`MORSEL_ROWS`] into a fresh
//! table (built outside the timing) with the planner's defaults (murmur3, fill 0.5), either
//! `presized` for the groups (what the planner does from a good estimate) or `grown` from the
//! smallest table, 16 slots (an estimate far too low: every doubling is part of the cost).

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode, Throughput};
use grouper_core::hash::HashFn;
use grouper_core::input::MORSEL_ROWS;
use grouper_core::planner::DEFAULT_FILL;
use grouper_core::table::{KeyTable, LinearTable};

use common::{config, XorShift, ROWS};

/// Words of `ROWS` rows drawn uniformly from `domain` keys, scattered over 64 bits.
fn words(domain: u64) -> Vec<u64> {
    let mut rng = XorShift::new(0x0074_6162_6c65 ^ domain);
    (0..ROWS)
        .map(|_| rng.below(domain).wrapping_mul(0xd6e8_feb8_6659_fd93))
        .collect()
}

fn bench_table(c: &mut Criterion) {
    let mut group = c.benchmark_group("table/map");
    group.throughput(Throughput::Elements(ROWS as u64));
    // Iterations of tens to hundreds of ms: equal samples, not criterion's 1 + 2 + ... + 10.
    group.sampling_mode(SamplingMode::Flat);
    for (label, domain) in [("1k", 1u64 << 10), ("1M", 1 << 20)] {
        let words = words(domain);
        let groups = {
            let mut t = LinearTable::new(domain as usize, HashFn::Murmur3, DEFAULT_FILL);
            let mut gids = Vec::new();
            t.map(&words, &mut gids);
            t.len()
        };
        for (sizing, initial) in [("presized", groups), ("grown", 1)] {
            group.bench_function(format!("{label}/{sizing}"), |b| {
                let mut gids = Vec::with_capacity(MORSEL_ROWS);
                b.iter_batched(
                    || LinearTable::new(initial, HashFn::Murmur3, DEFAULT_FILL),
                    |mut table| {
                        for morsel in words.chunks(MORSEL_ROWS) {
                            table.map(morsel, &mut gids);
                            black_box(&gids);
                        }
                        // Returned, so that freeing the table is not timed.
                        table
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_table
}
criterion_main!(benches);
