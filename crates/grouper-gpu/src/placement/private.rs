//! Hashed index per thread in device memory (Rosenfeld's INDEPENDENT): no atomics while a
//! thread's few slots hold its keys; rows of other keys go to the global table. At the end each
//! thread flushes its table into the global one and resets it for the next launch.

use std::fmt::Write;

use super::{Room, Sizing};
use crate::codegen::probing;
use crate::codegen::rows::{FLUSH_SLOT, GLOBAL_UPDATE, ROW_LOOP_HEAD, ROW_LOOP_TAIL};
use crate::codegen::spec::KernelSpec;
use crate::table::{fill_limit, pow2_at_least};

/// Slots of a private table at most: one table per thread in device memory, so only few.
const PRIVATE_SLOTS: u64 = 64;

/// Whether `groups` fit private tables at fill factor `fill`: beyond, every thread's table
/// overflows and the placement only adds a pass.
pub(crate) fn private_tables_hold(groups: u64, fill: f64) -> bool {
    groups as f64 / fill <= PRIVATE_SLOTS as f64
}

/// Slots for ~groups / fill, between 16 and [`PRIVATE_SLOTS`].
pub(super) fn size(room: &Room) -> Option<Sizing> {
    Some(Sizing {
        threads: room.default_threads,
        copies: 0,
        local_slots: pow2_at_least(
            ((room.groups as f64 / room.fill) as u64).clamp(16, PRIVATE_SLOTS),
        ),
    })
}

/// Every thread's table: as spill room and as the private tables themselves.
pub(super) fn scratch_slots(blocks: u64, spec: &KernelSpec) -> (u64, u64) {
    let slots = blocks * spec.threads as u64 * spec.local_slots;
    (slots, slots)
}

/// Private tables live in device memory, one per thread: fewer threads, less memory.
pub(super) fn blocks_per_sm(resident: u32) -> u32 {
    2.min(resident)
}

pub(super) fn body(spec: &KernelSpec) -> String {
    let pc = spec.local_slots;
    let limit = fill_limit(pc, spec.fill_factor);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  const u64 T = (u64)gridDim.x * blockDim.x, tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;\n\
         const u64 PC = {pc}ULL, lst = 1;\n\
         u64* mine = aux + tid * PC * GS; u64 lcount = 0;\n\
         #define LKEY(w) mine[ls * GS + (w)]"
    );
    // A cuckoo table's index of entry numbers lives in the thread's local memory for the
    // launch (codegen/probing/cuckoo.rs).
    let find = match probing::private_cuckoo(spec) {
        Some(_) => {
            let _ = writeln!(
                s,
                "  unsigned char cindex[PC];\n  for (u64 i = 0; i < PC; i++) cindex[i] = CNIL;"
            );
            format!("find_or_insert_cuckoo(mine, GS, PC, {limit}ULL, key, &lcount, cindex)")
        }
        None => format!("find_or_insert_private(mine, GS, PC, {limit}ULL, key, &lcount)"),
    };
    s.push_str(ROW_LOOP_HEAD);
    let _ = writeln!(
        s,
        "      const i64 l = {find};\n\
         if (l >= 0) {{ update_slot<false>(mine + (u64)l * GS + GK, 1, 0, in, mask); continue; }}"
    );
    s.push_str(GLOBAL_UPDATE);
    s.push_str(ROW_LOOP_TAIL);
    s.push_str(
        "  constexpr bool LN = false;\n  for (u64 ls = 0; ls < PC; ls++) {\n    if (LKEY(0) == EMPTY) continue;\n    u64* lslot = mine + GK; const u64 lss = ls * GS;\n",
    );
    s.push_str(FLUSH_SLOT);
    // Reset the private table for the next launch.
    s.push_str(
        "    for (int w = 0; w < K; w++) LKEY(w) = EMPTY;\n\
         for (int w = 0; w < W; w++) lslot[lss + w] = IDENT[w];\n  }\n",
    );
    s
}
