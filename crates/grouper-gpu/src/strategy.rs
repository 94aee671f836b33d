//! What a GPU plan is made of: the strategy (where the aggregation table lives and how rows
//! reach it) and the kernel parameters the planner and the runtime tuner set.

use std::fmt;
use std::str::FromStr;

use grouper_core::error::GrouperError;
use grouper_core::hash::HashFn;

/// Where the aggregation table lives and how rows reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuStrategy {
    /// Direct index; each thread accumulates in registers, then merges into shared memory and
    /// the global table (Tomé's in_registers): a handful of groups.
    PerfectRegisters,
    /// Direct index into copies of the table in interleaved shared memory, bank-conflict free
    /// (Tomé §4.1); copies are per thread when they fit, else shared with atomics.
    PerfectShared,
    /// Direct index into one device-memory table with atomics: dense keys beyond shared memory.
    PerfectGlobal,
    /// Per-block shared-memory hash table, flushed to the global table (WORKGROUPLOCAL).
    BlockLocal,
    /// Per-thread private hash tables in device memory, merged at the end (INDEPENDENT).
    ThreadPrivate,
    /// One device-memory hash table, CAS linear probing (SHARED; Karnagel §2).
    Global,
}

impl GpuStrategy {
    /// Every GPU strategy.
    pub const ALL: [GpuStrategy; 6] = [
        GpuStrategy::PerfectRegisters,
        GpuStrategy::PerfectShared,
        GpuStrategy::PerfectGlobal,
        GpuStrategy::BlockLocal,
        GpuStrategy::ThreadPrivate,
        GpuStrategy::Global,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            GpuStrategy::PerfectRegisters => "perfect_registers",
            GpuStrategy::PerfectShared => "perfect_shared",
            GpuStrategy::PerfectGlobal => "perfect_global",
            GpuStrategy::BlockLocal => "block_local",
            GpuStrategy::ThreadPrivate => "thread_private",
            GpuStrategy::Global => "global",
        }
    }

    /// Whether the strategy indexes directly by key word (needs a small key domain).
    pub fn is_perfect(self) -> bool {
        matches!(
            self,
            GpuStrategy::PerfectRegisters | GpuStrategy::PerfectShared | GpuStrategy::PerfectGlobal
        )
    }
}

impl fmt::Display for GpuStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GpuStrategy {
    type Err = GrouperError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GpuStrategy::ALL
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| GrouperError::InvalidOption(format!("unknown GPU strategy '{s}'")))
    }
}

/// The knobs the planner and the runtime tuner set. `None` lets the planner decide
/// from the device's properties.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuParams {
    /// Blocks per multiprocessor.
    pub blocks_per_sm: Option<u32>,
    /// Threads per block (a multiple of 32, ≤ 1024); `None`: 256, or up to 1024 where a
    /// shared-memory table would otherwise leave the multiprocessor part empty.
    pub threads_per_block: Option<u32>,
    /// Rows each thread handles per loop step (memory-level parallelism). One by default: in
    /// the H100's exhaustive searches (`bench tuner`) one item was the fastest or within 2% of
    /// it for every strategy but `thread_private` (whose best took 8, one item 3.5% slower);
    /// a grid of enough resident threads hides the loads' latency without unrolling.
    pub items_per_thread: u32,
    /// Fill factor of hash tables before they grow.
    pub fill_factor: f64,
    /// Hash function of hash tables.
    pub hash: HashFn,
    /// Initial capacity of the global hash table in groups (the estimate when `None`).
    pub initial_groups: Option<u64>,
}

impl Default for GpuParams {
    fn default() -> Self {
        Self {
            blocks_per_sm: None,
            threads_per_block: None,
            items_per_thread: 1,
            fill_factor: 0.5,
            hash: HashFn::Murmur3,
            initial_groups: None,
        }
    }
}

/// A launch shape the runtime tuner may pick.
pub type GpuConfig = grouper_core::tune::Config<GpuStrategy>;
