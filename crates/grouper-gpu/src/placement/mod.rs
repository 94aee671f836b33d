//! What each [`Placement`] knows of itself, one file each: how it is sized on a device (the
//! planner asks through [`Placement::size`]), the CUDA body of its aggregation kernel, the
//! shared memory and scratch buffers it needs, and its default grid. A new placement is one
//! file here, a [`Placement`] variant and its arms below (docs/ARCHITECTURE.md, "Seams").

use crate::codegen::spec::KernelSpec;
use crate::device::DeviceInfo;
use crate::strategy::{Index, Placement};

mod block;
mod global;
mod partitioned;
mod private;
mod registers;
mod shared;
mod sorted;

#[cfg(test)]
pub(crate) use partitioned::FOLD_STATIC_BYTES;
pub(crate) use partitioned::{
    buffer_words as partition_buffer_words, direct_shift as partition_shift, hist_shared_bytes,
    kernels as partition_kernels, scatter_shared_bytes, split_at as partition_split_at,
    splits as partition_splits, HEAD_WORDS as PARTITION_HEAD_WORDS, PARTS,
};
pub(crate) use private::private_tables_hold;
pub(crate) use sorted::sort_keys_kernel;

/// Narrow words besides the row count of the states [`Room::light`] admits: a sum and its
/// `seen` word.
pub(crate) const LIGHT_WORDS: u64 = 2;

/// What a placement is sized from: the device, the block sizes to consider, the table's
/// widths, and what is known of the query's keys.
pub(crate) struct Room<'a> {
    /// The device.
    pub(crate) info: &'a DeviceInfo,
    /// Block sizes to consider, smallest first: the user's, or 256, 512 and 1024 threads.
    /// Larger blocks share one shared-memory table among more threads, so a large table still
    /// leaves the SM full of threads (occupancy hides the input's memory latency).
    pub(crate) block_sizes: Vec<u32>,
    /// Threads per block where the placement has no reason to choose.
    pub(crate) default_threads: u32,
    /// State words per slot.
    pub(crate) words: u64,
    /// Words per slot of a narrow table besides its 32-bit row count (`codegen` module doc).
    pub(crate) narrow_words: u64,
    /// Key words per slot (at least one).
    pub(crate) key_words: u64,
    /// Key domain (`u64::MAX` when unbounded).
    pub(crate) domain: u64,
    /// Expected groups.
    pub(crate) groups: u64,
    /// Fill factor of hash tables.
    pub(crate) fill: f64,
    /// Bytes a direct table in device memory may take.
    pub(crate) direct_room: u64,
    /// Key ranges of a partitioned fold, where the user fixed them.
    pub(crate) key_ranges: Option<u64>,
}

impl Room<'_> {
    /// Whether the key is one word (direct indexes need that).
    pub(crate) fn single(&self) -> bool {
        self.key_words <= 1
    }

    /// Whether a slot holds at most [`LIGHT_WORDS`] narrow words besides its row count: the
    /// states the larger blocks and roomier tables of `shared` and `block` were measured on (a
    /// count and a sum). A 1024-thread block leaves a thread 64 registers, which a wide state's
    /// arithmetic (TPC-H Q1's decimal sums) may spill past; such states keep the smaller
    /// blocks until they are measured.
    pub(crate) fn light(&self) -> bool {
        self.narrow_words <= LIGHT_WORDS
    }

    /// The largest block size considered.
    pub(crate) fn largest(&self) -> u32 {
        *self.block_sizes.last().unwrap_or(&256)
    }

    /// Shared bytes for one table in a block of the largest size: the SM's whole shared memory
    /// where that block keeps at least half the SM's threads, else its share at full occupancy.
    pub(crate) fn largest_block_table(&self) -> u64 {
        let largest = self.largest();
        if 2 * largest >= self.info.threads_per_sm {
            (self.info.shared_per_block as u64).saturating_sub(1024)
        } else {
            self.at_full(largest)
        }
    }

    /// Shared bytes a block of `t` threads may use while the SM stays fully occupied (the
    /// driver reserves 1 KiB per block).
    pub(crate) fn at_full(&self, t: u32) -> u64 {
        let blocks = (self.info.threads_per_sm / t).max(1) as u64;
        (self.info.shared_per_sm as u64 / blocks)
            .saturating_sub(1024)
            .min(self.info.shared_per_block as u64)
    }
}

/// Words a narrow table of `spec`'s query keeps besides its 32-bit row counts (`codegen`
/// module doc).
pub(crate) fn kept_words(spec: &KernelSpec) -> u64 {
    crate::codegen::narrow_words(&spec.layout, &spec.non_null_args).len() as u64
}

/// Bytes of one slot of a narrow shared-memory table: its key words and kept words, 8 bytes
/// each, and a 4-byte row count.
pub(crate) fn narrow_slot_bytes(key_words: u64, kept: u64) -> u64 {
    8 * (key_words + kept) + 4
}

/// CUDA that sets every slot of the narrow table at `base`, of `n` slots (its stride), to the
/// identities, the block's threads taking turns.
pub(crate) fn narrow_init(base: &str, n: &str) -> String {
    format!(
        "  for (u64 i = threadIdx.x; i < NW * {n}; i += blockDim.x) {base}[i] = NIDENT[i / {n}];\n\
         for (u64 i = threadIdx.x; i < {n}; i += blockDim.x) ((unsigned*)({base} + NW * {n}))[i] = 0u;\n"
    )
}

/// The largest power of two at most `x` (0 for 0).
pub(crate) fn pow2_floor(x: u64) -> u64 {
    if x == 0 {
        0
    } else {
        1u64 << (63 - x.leading_zeros())
    }
}

/// The slots a shared hash table takes of the `fit` that shared memory holds: a multiple of 64
/// (linear probing scales the hash to any count, `codegen::probing`), or below 64 slots the
/// power of two below. A whole SM's 11,571 slots of 20 bytes are 11,520, not 8,192.
pub(crate) fn hash_slots_within(fit: u64) -> u64 {
    match fit >= 64 {
        true => fit / 64 * 64,
        false => pow2_floor(fit),
    }
}

/// A placement's sizes on a device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sizing {
    /// Threads per block.
    pub(crate) threads: u32,
    /// Copies of a block's shared table; for a partitioned fold, its key ranges.
    pub(crate) copies: u32,
    /// Slots of a block's or a thread's hash table.
    pub(crate) local_slots: u64,
}

impl Sizing {
    /// A partitioned fold's shared-table slots over all its key ranges and all [`PARTS`]
    /// partitions: the keys (direct) or the slots of groups (hashed) its tables take in
    /// shared memory, where the rest go on to the device-memory table.
    pub(crate) fn fold_slots(&self) -> u64 {
        u64::from(self.copies.max(1))
            .saturating_mul(self.local_slots)
            .saturating_mul(PARTS)
    }
}

impl Placement {
    /// Its sizes in `room` for `index`, or `None` where its table cannot hold the keys there.
    pub(crate) fn size(self, index: Index, room: &Room) -> Option<Sizing> {
        match self {
            Placement::Registers => registers::size(room),
            Placement::Shared => shared::size(room),
            Placement::Block => block::size(room),
            Placement::Private => private::size(room),
            Placement::Global => global::size(index, room),
            Placement::Sorted => sorted::size(index, room),
            Placement::Partitioned => partitioned::size(index, room),
        }
    }

    /// The body of `agg_body` for `spec`: set-up, the row loop, the flush.
    pub(crate) fn body(self, spec: &KernelSpec) -> String {
        match self {
            Placement::Registers => registers::body(spec),
            Placement::Shared => shared::body(spec),
            Placement::Block => block::body(spec),
            Placement::Private => private::body(spec),
            Placement::Global => global::body(spec),
            Placement::Sorted => sorted::body(spec),
            Placement::Partitioned => partitioned::body(spec),
        }
    }

    /// Slots of spilled entries (tables that filled) a launch of `blocks` blocks over chunks
    /// of at most `rows` rows may write, and slots of per-thread private tables.
    pub(crate) fn scratch_slots(self, blocks: u64, spec: &KernelSpec, rows: u64) -> (u64, u64) {
        match self {
            Placement::Block => block::scratch_slots(blocks, spec),
            Placement::Private => private::scratch_slots(blocks, spec),
            Placement::Partitioned => partitioned::scratch_slots(spec, rows),
            _ => (1, 0),
        }
    }

    /// Blocks per multiprocessor when the user does not fix them, where `resident` blocks of
    /// the compiled kernel fit.
    pub(crate) fn blocks_per_sm(self, resident: u32) -> u32 {
        match self {
            Placement::Private => private::blocks_per_sm(resident),
            _ => resident,
        }
    }

    /// Whether its tables are worth trying for `groups` at fill factor `fill` (the planner's
    /// profile advice and the tuner's alternatives skip those that are not).
    pub(crate) fn holds(self, groups: u64, fill: f64) -> bool {
        match self {
            Placement::Private => private_tables_hold(groups, fill),
            _ => true,
        }
    }
}

/// Dynamic shared memory bytes `spec`'s aggregation kernel needs.
pub(crate) fn shared_bytes(spec: &KernelSpec) -> u64 {
    let w = spec.layout.words as u64;
    match spec.strategy.placement() {
        Placement::Registers => registers::shared_bytes(w, spec),
        Placement::Shared => shared::shared_bytes(spec),
        Placement::Block => block::shared_bytes(spec),
        Placement::Partitioned => partitioned::shared_bytes(spec),
        Placement::Private | Placement::Global | Placement::Sorted => 0,
    }
}
