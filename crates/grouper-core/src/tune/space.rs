//! The thread-configuration search space: blocks per multiprocessor × threads per block ×
//! items per thread, in powers of two, bounded by what the device reports (Rosenfeld §3.3).

use std::fmt;
use std::hash::Hash;

/// One configuration: a strategy and its launch shape. `S` names the strategy (the GPU's
/// placement strategies; the tuner itself never looks inside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Config<S> {
    /// The strategy the batch runs with.
    pub strategy: S,
    /// Blocks launched per multiprocessor (beyond the resident ones they run in waves).
    pub blocks_per_sm: u32,
    /// Threads per block.
    pub threads: u32,
    /// Rows each thread handles per loop step.
    pub items: u32,
}

impl<S: fmt::Display> fmt::Display for Config<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}x{}x{}",
            self.strategy, self.blocks_per_sm, self.threads, self.items
        )
    }
}

/// The grid the tuner walks. Each axis is a sorted list of powers of two; neighbours differ by
/// one step on one axis, or trade blocks for threads at the same thread count (the ridges of
/// equal total threads Rosenfeld's Fig. 5 shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    /// Blocks per multiprocessor.
    pub blocks_per_sm: Vec<u32>,
    /// Threads per block.
    pub threads: Vec<u32>,
    /// Items per thread.
    pub items: Vec<u32>,
}

/// Powers of two from `lo` to `hi`, both included when they are powers of two.
fn powers(lo: u32, hi: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut x = lo.max(1).next_power_of_two();
    while x <= hi {
        v.push(x);
        x = match x.checked_mul(2) {
            Some(n) => n,
            None => break,
        };
    }
    v
}

impl Space {
    /// The space of a device: up to `max_blocks_per_sm` blocks per multiprocessor, blocks of 64
    /// threads up to `max_threads_per_block`, 1 to 8 items per thread (16 measured no faster
    /// and its unrolled probes take NVRTC seconds per kernel).
    pub fn for_device(max_blocks_per_sm: u32, max_threads_per_block: u32) -> Self {
        Self {
            blocks_per_sm: powers(1, max_blocks_per_sm.max(1)),
            threads: powers(64, max_threads_per_block.max(64)),
            items: powers(1, 8),
        }
    }

    /// Configurations per strategy.
    pub fn len(&self) -> usize {
        self.blocks_per_sm.len() * self.threads.len() * self.items.len()
    }

    /// Whether the space is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every configuration of `strategy`.
    pub fn all<S: Copy>(&self, strategy: S) -> Vec<Config<S>> {
        let mut out = Vec::with_capacity(self.len());
        for &threads in &self.threads {
            for &items in &self.items {
                for &blocks_per_sm in &self.blocks_per_sm {
                    out.push(Config {
                        strategy,
                        blocks_per_sm,
                        threads,
                        items,
                    });
                }
            }
        }
        out
    }

    /// Whether `c` lies on the grid.
    pub fn contains<S>(&self, c: &Config<S>) -> bool {
        self.blocks_per_sm.contains(&c.blocks_per_sm)
            && self.threads.contains(&c.threads)
            && self.items.contains(&c.items)
    }

    /// The grid point nearest to `c` (each axis rounded to the nearest power in its list), so
    /// that a planner's start off the grid (say 3 resident blocks) can be tuned from.
    pub fn snap<S: Copy>(&self, c: Config<S>) -> Config<S> {
        let near = |axis: &[u32], x: u32| -> u32 {
            axis.iter()
                .copied()
                .min_by_key(|&a| (a as i64 - x as i64).unsigned_abs())
                .unwrap_or(x)
        };
        Config {
            strategy: c.strategy,
            blocks_per_sm: near(&self.blocks_per_sm, c.blocks_per_sm),
            threads: near(&self.threads, c.threads),
            items: near(&self.items, c.items),
        }
    }

    /// The neighbours of `c` on the grid, in a fixed order.
    pub fn neighbors<S: Copy>(&self, c: &Config<S>) -> Vec<Config<S>> {
        let step = |axis: &[u32], x: u32, d: i32| -> Option<u32> {
            let i = axis.iter().position(|&a| a == x)? as i32 + d;
            usize::try_from(i).ok().and_then(|i| axis.get(i).copied())
        };
        let mut out = Vec::with_capacity(8);
        for d in [1, -1] {
            if let Some(b) = step(&self.blocks_per_sm, c.blocks_per_sm, d) {
                out.push(Config {
                    blocks_per_sm: b,
                    ..*c
                });
            }
            if let Some(t) = step(&self.threads, c.threads, d) {
                out.push(Config { threads: t, ..*c });
            }
            if let Some(i) = step(&self.items, c.items, d) {
                out.push(Config { items: i, ..*c });
            }
            // Same threads per multiprocessor, in more smaller blocks or fewer larger ones.
            if let (Some(b), Some(t)) = (
                step(&self.blocks_per_sm, c.blocks_per_sm, d),
                step(&self.threads, c.threads, -d),
            ) {
                out.push(Config {
                    blocks_per_sm: b,
                    threads: t,
                    ..*c
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_bounds_the_grid() {
        let s = Space::for_device(32, 1024);
        assert_eq!(s.blocks_per_sm, vec![1, 2, 4, 8, 16, 32]);
        assert_eq!(s.threads, vec![64, 128, 256, 512, 1024]);
        assert_eq!(s.items, vec![1, 2, 4, 8]);
        assert_eq!(s.len(), 120);
        assert_eq!(s.all('g').len(), 120);
        // A device with fewer resident blocks gets a smaller grid, never constants of another.
        assert_eq!(Space::for_device(16, 512).len(), 5 * 4 * 4);
    }

    #[test]
    fn neighbours_are_one_step_away_and_on_the_grid() {
        let s = Space::for_device(32, 1024);
        let c = Config {
            strategy: 0u8,
            blocks_per_sm: 4,
            threads: 256,
            items: 4,
        };
        let n = s.neighbors(&c);
        assert_eq!(n.len(), 8);
        assert!(n.iter().all(|x| s.contains(x) && x != &c));
        let corner = Config {
            blocks_per_sm: 1,
            threads: 64,
            items: 1,
            ..c
        };
        // Only upward steps (and the trade of threads for blocks that stays on the grid).
        assert_eq!(s.neighbors(&corner).len(), 3);
        let off = Config {
            blocks_per_sm: 3,
            threads: 200,
            items: 4,
            ..c
        };
        assert_eq!(
            s.snap(off),
            Config {
                blocks_per_sm: 2,
                threads: 256,
                ..off
            }
        );
    }
}
