//! What a GPU plan is made of: the strategy — an [`Index`] (direct or hashed) and a
//! [`Placement`] (where the table lives) — and the kernel parameters the planner and the
//! runtime tuner set, among them the hashed index's [`Probing`] scheme and hash function. The
//! axes are orthogonal, as cuCollections separates hash, probing scheme and storage.

use std::fmt;
use std::str::FromStr;

use grouper_core::error::GrouperError;
use grouper_core::hash::HashFn;

/// How a row's key finds its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Index {
    /// The key word is the slot (Tomé's perfect hash): dense keys in a small domain.
    Direct,
    /// A hash table: the key's hash starts a probe ([`Probing`]) for its slot.
    Hashed,
}

/// Where the table a row updates lives (Karnagel's and Rosenfeld's placements). What a
/// placement needs — its sizing on a device, its kernel body, its scratch memory — is in
/// `placement/`, one file each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Each thread's states in registers, merged into shared memory, then the global table:
    /// a handful of groups (Tomé's in_registers).
    Registers,
    /// Copies of the table in interleaved shared memory, bank-conflict free (Tomé §4.1); per
    /// thread when they fit, else shared by threads with atomics.
    Shared,
    /// One shared-memory table per block, flushed to the global table (WORKGROUPLOCAL).
    Block,
    /// One table per thread in device memory, merged at the end (INDEPENDENT).
    Private,
    /// One table in device memory for all threads, with atomics (SHARED; Karnagel §2).
    Global,
    /// The rows sorted first (LSD radix sort of the key word, or of the hash that places a key
    /// in the global table), then each thread folds its stretch of sorted rows run by run in
    /// registers and merges each run into the global table: sort-based aggregation (Karnagel
    /// §5.2; the sort-based atomics paper's private variable). Its atomics fall once per run,
    /// not per row, on slots in table order.
    Sorted,
    /// The rows scattered first, with their evaluated keys and inputs, into 256 partitions by
    /// the top bits of the word that places a key in the global table; then read in
    /// partition order and merged into the global table, whose slots in use at any moment
    /// are a partition's share and stay in L2 (Tomé §3.5's partitioned tables; DESIGN.md's `partitioned`).
    Partitioned,
}

/// How a hashed index resolves collisions: the CPU's axis ([`grouper_core::table::Probing`]).
/// The GPU's kernels probe linearly (`codegen/probing.rs`); [`crate::GpuQuery::check`] refuses
/// the other schemes, which the CPU's private tables run.
pub use grouper_core::table::{BucketMap, Probing};

/// A GPU strategy: an index and a placement. The probing scheme and hash function of a hashed
/// index are parameters ([`GpuParams`]), orthogonal to both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpuStrategy {
    index: Index,
    placement: Placement,
}

impl GpuStrategy {
    /// Direct index in registers.
    pub const PERFECT_REGISTERS: GpuStrategy =
        GpuStrategy::new(Index::Direct, Placement::Registers);
    /// Direct index in shared memory.
    pub const PERFECT_SHARED: GpuStrategy = GpuStrategy::new(Index::Direct, Placement::Shared);
    /// Direct index in one device-memory table.
    pub const PERFECT_GLOBAL: GpuStrategy = GpuStrategy::new(Index::Direct, Placement::Global);
    /// Hash table per block in shared memory.
    pub const BLOCK_LOCAL: GpuStrategy = GpuStrategy::new(Index::Hashed, Placement::Block);
    /// Hash table per thread in device memory.
    pub const THREAD_PRIVATE: GpuStrategy = GpuStrategy::new(Index::Hashed, Placement::Private);
    /// One hash table in device memory.
    pub const GLOBAL: GpuStrategy = GpuStrategy::new(Index::Hashed, Placement::Global);
    /// Rows sorted by key word, runs merged into a direct table in device memory.
    pub const PERFECT_SORTED: GpuStrategy = GpuStrategy::new(Index::Direct, Placement::Sorted);
    /// Rows sorted by key hash, runs merged into one hash table in device memory.
    pub const SORTED: GpuStrategy = GpuStrategy::new(Index::Hashed, Placement::Sorted);
    /// Rows partitioned by key word, then merged into a direct table in device memory.
    pub const PERFECT_PARTITIONED: GpuStrategy =
        GpuStrategy::new(Index::Direct, Placement::Partitioned);
    /// Rows partitioned by key hash, then merged into one hash table in device memory.
    pub const HASH_PARTITIONED: GpuStrategy =
        GpuStrategy::new(Index::Hashed, Placement::Partitioned);

    /// Every GPU strategy: the pairs of index and placement that make sense (registers and
    /// interleaved shared copies are addressed by the key itself; a block's or a thread's
    /// hash table holds the keys its rows bring).
    pub const ALL: [GpuStrategy; 10] = [
        GpuStrategy::PERFECT_REGISTERS,
        GpuStrategy::PERFECT_SHARED,
        GpuStrategy::PERFECT_GLOBAL,
        GpuStrategy::BLOCK_LOCAL,
        GpuStrategy::THREAD_PRIVATE,
        GpuStrategy::GLOBAL,
        GpuStrategy::PERFECT_SORTED,
        GpuStrategy::SORTED,
        GpuStrategy::PERFECT_PARTITIONED,
        GpuStrategy::HASH_PARTITIONED,
    ];

    const fn new(index: Index, placement: Placement) -> Self {
        GpuStrategy { index, placement }
    }

    /// How a row's key finds its slot.
    pub fn index(self) -> Index {
        self.index
    }

    /// Where the table lives.
    pub fn placement(self) -> Placement {
        self.placement
    }

    /// The name used on the command line and in profiles.
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 10] = [
            "perfect_registers",
            "perfect_shared",
            "perfect_global",
            "block_local",
            "thread_private",
            "global",
            "perfect_sorted",
            "sorted",
            "perfect_partitioned",
            "hash_partitioned",
        ];
        GpuStrategy::ALL
            .iter()
            .position(|&s| s == self)
            .map_or("unnamed", |i| NAMES[i])
    }

    /// Whether the strategy indexes directly by key word (needs a small key domain).
    pub fn is_perfect(self) -> bool {
        self.index == Index::Direct
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
    /// Probing scheme of hash tables.
    pub probing: Probing,
    /// How the global hash table maps a hash to its bucket: by its high bits over a power of
    /// two (the default), or modulo a table of any size (Karnagel's mapping). The tables in
    /// shared memory and the private ones keep their own.
    pub buckets: BucketMap,
    /// Initial capacity of the global hash table in groups (the estimate when `None`).
    pub initial_groups: Option<u64>,
    /// The partitioned strategies: the key ranges a partition's fold splits into, each read of
    /// the partition's rows folding one range's groups (at most 64 and a block's threads; the
    /// planner's when `None`, at most 16 for a hash fold), to weigh the sizing rule.
    pub key_ranges: Option<u32>,
}

impl Default for GpuParams {
    fn default() -> Self {
        Self {
            blocks_per_sm: None,
            threads_per_block: None,
            items_per_thread: 1,
            fill_factor: 0.5,
            hash: HashFn::Murmur3,
            probing: Probing::Linear,
            buckets: BucketMap::HighBits,
            initial_groups: None,
            key_ranges: None,
        }
    }
}

/// A launch shape the runtime tuner may pick.
pub type GpuConfig = grouper_core::tune::Config<GpuStrategy>;
