//! Hashed index per block in shared memory (Rosenfeld's WORKGROUPLOCAL): rows whose key finds
//! or claims a slot update it there; once the table reaches its fill limit, new keys' rows go
//! to the global table. At the end each block flushes its slots into the global table (or
//! spills them while that table grows).

use std::fmt::Write;

use super::{pow2_floor, Room, Sizing};
use crate::codegen::rows::{FLUSH_SLOT, GLOBAL_UPDATE, ROW_LOOP_HEAD, ROW_LOOP_TAIL};
use crate::codegen::spec::KernelSpec;
use crate::table::{fill_limit, pow2_at_least};

/// The smallest block whose table holds ~groups / fill slots at full occupancy; else the
/// largest table that keeps the SM full with the largest blocks. Fits from 16 slots.
pub(super) fn size(room: &Room) -> Option<Sizing> {
    let want = pow2_at_least(((room.groups as f64 / room.fill) as u64).max(64));
    let bytes = 8 * (room.words + room.key_words);
    let (threads, local_slots) = room
        .block_sizes
        .iter()
        .find(|&&t| want * bytes <= room.at_full(t))
        .map(|&t| (t, want))
        .unwrap_or((
            room.largest(),
            pow2_floor(room.at_full(room.largest()) / bytes).min(want),
        ));
    (local_slots >= 16).then_some(Sizing {
        threads,
        copies: 0,
        local_slots,
    })
}

pub(super) fn shared_bytes(w: u64, spec: &KernelSpec) -> u64 {
    8 * (w + spec.key_count() as u64) * spec.local_slots
}

/// Every block's whole table may spill; no private tables.
pub(super) fn scratch_slots(blocks: u64, spec: &KernelSpec) -> (u64, u64) {
    (blocks * spec.local_slots, 0)
}

pub(super) fn body(spec: &KernelSpec) -> String {
    let sc = spec.local_slots;
    let limit = fill_limit(sc, spec.fill_factor);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  extern __shared__ u64 sm[];\n  __shared__ u64 scount;\n  const u64 SC = {sc}ULL;\n\
         u64* lkeys = sm; u64* lwords = sm + K * SC; const u64 lst = SC;\n\
         #define LKEY(w) lkeys[(w) * SC + ls]\n\
         for (u64 i = threadIdx.x; i < K * SC; i += blockDim.x) lkeys[i] = EMPTY;\n\
         for (u64 i = threadIdx.x; i < W * SC; i += blockDim.x) lwords[i] = IDENT[i / SC];\n\
         if (threadIdx.x == 0) scount = 0;\n  __syncthreads();"
    );
    s.push_str(ROW_LOOP_HEAD);
    let _ = writeln!(
        s,
        "      const i64 l = find_or_insert(lkeys, 1, SC, SC, {limit}ULL, key, &scount);\n\
         if (l >= 0) {{ update_slot<true, true>(lwords, SC, (u64)l, in, mask); continue; }}"
    );
    s.push_str(GLOBAL_UPDATE);
    s.push_str(ROW_LOOP_TAIL);
    s.push_str("  __syncthreads();\n  for (u64 ls = threadIdx.x; ls < SC; ls += blockDim.x) {\n    if (lkeys[ls] == EMPTY) continue;\n    const u64* lslot = lwords + ls;\n");
    s.push_str(FLUSH_SLOT);
    s.push_str("  }\n");
    s
}
