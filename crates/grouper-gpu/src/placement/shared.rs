//! Direct index in shared memory: `copies` interleaved copies of the table per block, bank-
//! conflict free (Tomé §4.1); a copy per thread when they fit (no atomics), else threads share
//! copies with shared-memory atomics. Each block merges its copies into the global table.
//! The copies are narrow tables (`codegen` module doc): the words the kernel touches and 32-bit
//! row counts, so a slot of a count and a non-null sum takes 12 bytes, and 2^14 such groups fit
//! one SM's shared memory.

use std::fmt::Write;

use super::{kept_words, narrow_init, narrow_slot_bytes, pow2_floor, Room, Sizing};
use crate::codegen::rows::{ROW_LOOP_HEAD, ROW_LOOP_TAIL};
use crate::codegen::spec::KernelSpec;

/// The smallest block that holds at least one copy at full occupancy — the largest for a
/// [light](Room::light) state — with as many interleaved copies as fit (fewer conflicts on hot
/// slots), up to one per thread; else one copy in a block of the largest size, if it fits at
/// all. A block's share of an SM grows with its threads, so each block size gives its copies
/// the same threads each, and the largest has the fewest blocks to initialize and merge their
/// copies: on the H100 (2^28 rows, dense u32 keys, a count and a sum) 1024-thread blocks took
/// 0.78 ms at 2^8 groups against 0.92 in 256-thread ones, 0.89 against 1.22 at 2^10, 1.23
/// against 1.37 (512 threads) at 2^12 (`gpu-sizing-h100-2p28-78c0260.json`), and ran equal or
/// faster at 1-64 groups (`gpu-sizing-h100-2p28-few-groups-907275c.json`).
pub(super) fn size(room: &Room) -> Option<Sizing> {
    if !room.single() {
        return None;
    }
    let bytes_per_copy = room
        .domain
        .saturating_mul(narrow_slot_bytes(0, room.narrow_words))
        .max(1);
    let smem = room.info.shared_per_block as u64;
    let with_copies = |&t: &u32| {
        (
            t,
            pow2_floor((room.at_full(t) / bytes_per_copy).min(t as u64)) as u32,
        )
    };
    let fits = |&(_, c): &(u32, u32)| c > 0;
    let sizes = room.block_sizes.iter();
    let (threads, copies) = match room.light() {
        true => sizes.rev().map(with_copies).find(fits),
        false => sizes.map(with_copies).find(fits),
    }
    .unwrap_or((room.largest(), (bytes_per_copy <= smem) as u32));
    (copies > 0).then_some(Sizing {
        threads,
        copies,
        local_slots: 0,
    })
}

pub(super) fn shared_bytes(spec: &KernelSpec) -> u64 {
    (narrow_slot_bytes(0, kept_words(spec)) * spec.copies as u64)
        .saturating_mul(spec.domain)
        .next_multiple_of(8)
}

pub(super) fn body(spec: &KernelSpec) -> String {
    let d = spec.domain;
    let r = spec.copies as u64;
    let atomic = spec.copies < spec.threads;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  extern __shared__ u64 sm[];\n  const u64 D = {d}ULL, R = {r}ULL, SST = D * R;\n{}  __syncthreads();\n\
         const u64 mine = threadIdx.x & (R - 1);",
        narrow_init("sm", "SST")
    );
    s.push_str(ROW_LOOP_HEAD);
    let _ = writeln!(
        s,
        "      update_slot<{atomic}, true, true>(sm, SST, key[0] * R + mine, in, mask);"
    );
    s.push_str(ROW_LOOP_TAIL);
    s.push_str(FLUSH);
    s
}

/// The block's copies reduce in a tree in shared memory (log2 R steps, every thread at work),
/// then one merge a slot goes to the global table. Merging every copy there — R atomics a slot
/// from each block, on a few hot addresses for few groups — had serialized the flush: 1.6 ms
/// of a 2^24-row launch at 4 groups on the H200, 22% achieved occupancy (ncu).
const FLUSH: &str = "  __syncthreads();\n\
  for (u64 h = R / 2; h > 0; h /= 2) {\n\
    for (u64 i = threadIdx.x; i < D * h; i += blockDim.x) {\n\
      const u64 sl = i / h, r = i % h;\n\
      merge_slot<false, true, true>(sm, SST, sl * R + r, sm, SST, sl * R + r + h);\n\
    }\n\
    __syncthreads();\n\
  }\n\
  for (u64 sl = threadIdx.x; sl < D; sl += blockDim.x) merge_slot<true, false, true>(gt + sl * GS, 1, 0, sm, SST, sl * R);\n";
