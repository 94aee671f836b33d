//! What the benchmarks of this crate share: the input size, a deterministic generator and
//! criterion's settings (short runs: ten samples of a few seconds each).

use std::time::Duration;

use criterion::Criterion;

/// Rows per benchmark input (2^20, "1M").
pub const ROWS: usize = 1 << 20;

/// xorshift64*: deterministic inputs without a dependency on `rand`.
pub struct XorShift(u64);

impl XorShift {
    /// A generator seeded with `seed` (any value; zero is replaced, xorshift needs a set bit).
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value uniform in `0..n` (Lemire's multiply-high, no modulo bias worth measuring).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Criterion with short runs, so that `cargo bench` of one crate takes a couple of minutes.
pub fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}
