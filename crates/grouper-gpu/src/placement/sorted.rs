//! Sort-based aggregation (Karnagel §5.2; the sort-based atomics paper's "sort + private
//! variable"): a chunk's rows are sorted by the word that places their key in the global table
//! — the key word itself for a direct table, the top 32 bits of the key's hash for a hash table
//! (linear probing starts at those bits) — with the radix sort ([`crate::sort`]); then each
//! thread takes a stretch of the sorted rows, folds each run of equal keys in registers, and
//! merges the run into the global table with one atomic per state word. Runs cut by a stretch's
//! edges are merged by both threads, so a key's rows may spread over any number of threads.
//!
//! Where rows of the same key are far apart in a chunk (many groups), the other placements pay
//! an atomic per row on a slot anywhere in the table; here the atomics fall once per run, on
//! slots in table order. The price: the sort's passes, and reading each row's columns at its
//! place in the sort (a gather) instead of in order.
//!
//! A hash table that fills (Karnagel's trap) lists the rows of each run it could not take, in
//! their sorted order, so the re-run after it grows finds the same runs.

use std::fmt::Write;

use super::{Room, Sizing};
use crate::codegen::spec::KernelSpec;
use crate::strategy::Index;

/// A direct table as the global placement sizes it, for key words the sort's 32-bit keys
/// hold; a hash table always.
pub(super) fn size(index: Index, room: &Room) -> Option<Sizing> {
    let fits = match index {
        Index::Direct => {
            room.single()
                && room.domain <= 1 << 32
                && room.domain.saturating_mul(8 * room.words) <= room.direct_room
        }
        Index::Hashed => true,
    };
    fits.then_some(Sizing {
        threads: room.default_threads,
        copies: 0,
        local_slots: 0,
    })
}

/// `sort_keys`: each row's sort key (rows the filter drops sort last; the aggregation skips
/// them when it evaluates them again).
pub(crate) fn sort_keys_kernel(spec: &KernelSpec) -> String {
    let sort_key = match spec.strategy.index() {
        Index::Direct => "(unsigned)key[0]",
        Index::Hashed => "(unsigned)(hash_key(key) >> 32)",
    };
    format!(
        "extern \"C\" __global__ void __launch_bounds__(THREADS) sort_keys(const ColPtrs C, const u64 n, unsigned* __restrict__ out, Ctrl* ctrl) {{\n\
         const u64 stride = (u64)gridDim.x * blockDim.x;\n\
         for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{\n\
         u64 key[K]; u64 in[NIN]; u64 mask;\n\
         out[i] = eval_row(C, i, key, in, &mask, &ctrl->error) ? {sort_key} : 0xFFFFFFFFu;\n\
         }}\n}}\n"
    )
}

/// The row loop over the `n` sorted rows `list` names (the sort's row ids, or the rows a full
/// hash table listed): a stretch of consecutive positions per thread.
pub(super) fn body(spec: &KernelSpec) -> String {
    let merge = match spec.strategy.index() {
        Index::Direct => "    merge_slot<true>(gt + rk[0] * GS, 1, 0, rs, 1, 0);\n",
        Index::Hashed => "    const i64 g = global_find_or_insert(gt, gcap, glimit, rk, &ctrl->groups);\n\
             if (g >= 0) { merge_slot<true>(gt + (u64)g * GS + GK, 1, 0, rs, 1, 0); return; }\n\
             // The table is full: the run's rows are listed, in order, for after it grows.\n\
             const u64 o = atomicAdd(&ctrl->overflow, end - start);\n\
             for (u64 r = start; r < end; r++) overflow[o + r - start] = LIST ? list[r] : (unsigned)r;\n",
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "  const u64 T = (u64)gridDim.x * blockDim.x, tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;\n\
         const u64 per = (n + T - 1) / T;\n\
         const u64 lo = tid * per < n ? tid * per : n, hi = lo + per < n ? lo + per : n;\n\
         // The open run: its key, its state, and where it started in the list.\n\
         u64 rk[K]; u64 rs[W]; u64 start = lo; bool open = false;\n\
         auto flush = [&](u64 end) {{\n{merge}  }};\n\
         for (u64 base = lo; base < hi; base += IPT) {{\n\
         u64 keys_[IPT][K]; u64 ins_[IPT][NIN]; u64 masks_[IPT]; bool ok_[IPT];\n\
         #pragma unroll\n\
         for (int j = 0; j < IPT; j++) {{\n\
         const u64 i = base + j;\n\
         ok_[j] = i < hi && eval_row(C, LIST ? (u64)list[i] : i, keys_[j], ins_[j], &masks_[j], &ctrl->error);\n\
         }}\n\
         #pragma unroll\n\
         for (int j = 0; j < IPT; j++) {{\n\
         if (!ok_[j]) continue;\n\
         bool same = open;\n\
         for (int w = 0; w < K; w++) same = same && keys_[j][w] == rk[w];\n\
         if (!same) {{\n\
         if (open) flush(base + j);\n\
         for (int w = 0; w < K; w++) rk[w] = keys_[j][w];\n\
         for (int w = 0; w < W; w++) rs[w] = IDENT[w];\n\
         open = true; start = base + j;\n\
         }}\n\
         update_slot<false>(rs, 1, 0, ins_[j], masks_[j]);\n\
         }}\n\
         }}\n\
         if (open) flush(hi);\n"
    );
    s
}
