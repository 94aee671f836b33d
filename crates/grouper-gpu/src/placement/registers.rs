//! Direct index in registers: each thread keeps every group's states in registers (a handful
//! of groups), merges them into one shared-memory copy per block, and the block into the
//! global table (Tomé's in_registers).

use std::fmt::Write;

use super::{Room, Sizing};
use crate::codegen::rows::{ROW_LOOP_HEAD, ROW_LOOP_TAIL};
use crate::codegen::spec::KernelSpec;

/// Fits while all groups' states take at most 64 registers' words.
pub(super) fn size(room: &Room) -> Option<Sizing> {
    (room.single() && room.domain.saturating_mul(room.words) <= 64).then_some(Sizing {
        threads: room.default_threads,
        copies: 0,
        local_slots: 0,
    })
}

/// One copy of the table per block, where the threads' registers merge.
pub(super) fn shared_bytes(w: u64, spec: &KernelSpec) -> u64 {
    (8 * w).saturating_mul(spec.domain)
}

pub(super) fn body(spec: &KernelSpec) -> String {
    let d = spec.domain;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  extern __shared__ u64 sm[];\n  const u64 D = {d}ULL;\n\
         for (u64 i = threadIdx.x; i < W * D; i += blockDim.x) sm[i] = IDENT[i / D];\n\
         u64 acc[W * {d}];\n#pragma unroll\n  for (int i = 0; i < W * {d}; i++) acc[i] = IDENT[i / {d}];\n  __syncthreads();"
    );
    s.push_str(ROW_LOOP_HEAD);
    let _ = writeln!(
        s,
        "#pragma unroll\n      for (int sl = 0; sl < {d}; sl++) if (key[0] == (u64)sl) update_slot<false>(acc, D, sl, in, mask);"
    );
    s.push_str(ROW_LOOP_TAIL);
    // A warp's registers reduce by shuffles first (five steps), so one lane a warp merges into
    // the block's shared copy: 32 times fewer shared atomics on the D hot slots (an f64 sum's
    // is a CAS loop). Every lane reaches here: the row loop has no early exit.
    let _ = writeln!(
        s,
        "#pragma unroll\n  for (int off = 16; off > 0; off >>= 1) {{\n\
         #pragma unroll\n    for (int sl = 0; sl < {d}; sl++) {{\n\
               u64 other[W];\n\
         #pragma unroll\n      for (int w = 0; w < W; w++) other[w] = __shfl_down_sync(0xffffffffu, acc[w * {d} + sl], off);\n\
               merge_slot<false>(acc, D, sl, other, 1, 0);\n    }}\n  }}\n\
         if ((threadIdx.x & 31) == 0) {{\n\
         #pragma unroll\n    for (int sl = 0; sl < {d}; sl++) merge_slot<true>(sm, D, sl, acc, D, sl);\n  }}\n  __syncthreads();\n\
         for (u64 sl = threadIdx.x; sl < D; sl += blockDim.x) merge_slot<true>(gt + sl * GS, 1, 0, sm, D, sl);"
    );
    s
}
