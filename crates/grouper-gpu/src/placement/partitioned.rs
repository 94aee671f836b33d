//! Partitioned aggregation for tables beyond L2 (issue 25 item 4; Tomé §3.5: a thread concerned
//! with one part of the table at a time, so the part sits in a lower level of the memory
//! hierarchy): a chunk's rows are evaluated once and scattered, with
//! their payload — key words, aggregate inputs, NULL mask; not row ids, whose gather cost the
//! sorted placement most of its time — into [`PARTS`] partitions by the top bits of the word
//! that places their key in the global table: the key's hash for a hash table (linear probing
//! starts at its top bits), the key word itself for a direct table. The aggregation then reads
//! the partitioned rows in order and updates the global table as `global` does, so the rows in
//! flight at any moment fall in one or a few partitions' 1/256 of the table, which stays in L2
//! where the whole table would not.
//!
//! Three kernels per chunk: `part_hist` (each partition's rows), `part_scatter` (each block
//! takes a tile of rows, ranks them per partition in shared memory, reserves each partition's
//! run with one atomic on its cursor, and writes the rows there), then the aggregation. Rows
//! within a partition are in no particular order; the aggregate algebra does not need one.
//!
//! A hash table that fills (Karnagel's trap) lists the partitioned rows it could not take by
//! their place in the partitioned buffer, and the re-run after it grows reads them there.

use std::fmt::Write;

use super::{pow2_floor, Room, Sizing};
use crate::codegen::spec::KernelSpec;
use crate::strategy::Index;

/// Partitions of a chunk: one 8-bit digit of the placing word (one scatter pass; a tile's rows
/// still fill runs of several rows per partition).
pub(crate) const PARTS: u64 = 256;

/// Words before the partitioned rows in their buffer: each partition's rows, each partition's
/// cursor, the rows kept (the filter may drop some), padding to a 64-byte line.
pub(crate) const HEAD_WORDS: u64 = 2 * PARTS + 8;

/// Words of one partitioned row: its key words, its aggregate inputs, its NULL mask.
pub(crate) fn row_words(spec: &KernelSpec) -> u64 {
    (spec.key_count() + crate::codegen::input_count(&spec.layout).max(1) + 1) as u64
}

/// How far a key word is shifted right to give its partition in a direct table of `cap`
/// slots (the hash table's partition is its hash's top 8 bits, whatever the capacity).
pub(crate) fn direct_shift(cap: u64) -> u32 {
    let bits = 64 - cap.max(2).saturating_sub(1).leading_zeros();
    bits.saturating_sub(PARTS.trailing_zeros())
}

/// Rows per thread of a scatter tile: as many as keep about 48 words of rows in registers (at
/// most 16), so a tile of 256 threads gives each partition runs of several rows.
fn tile_items(spec: &KernelSpec) -> u64 {
    pow2_floor(48 / (row_words(spec) + 2)).clamp(1, 16)
}

/// The table `global` takes: a direct table while it fits the room for direct tables, a hash
/// table always (it grows).
pub(super) fn size(index: Index, room: &Room) -> Option<Sizing> {
    super::global::size(index, room)
}

/// The aggregation over the partitioned rows: `global`'s updates, the rows read from the
/// partitioned buffer (`load_row`).
pub(super) fn body(spec: &KernelSpec) -> String {
    super::global::body(spec)
}

/// `load_row` for this placement, `part_hist` and `part_scatter`.
pub(crate) fn kernels(spec: &KernelSpec) -> String {
    let part_of = match spec.strategy.index() {
        Index::Direct => "(unsigned)((key[0] >> pshift) < PARTS ? (key[0] >> pshift) : PARTS - 1)",
        Index::Hashed => "(unsigned)(hash_key(key) >> 56)",
    };
    let items = tile_items(spec);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"
#define PARTS {PARTS}ULL
#define HEAD {HEAD_WORDS}ULL
#define RW (K + NIN + 1)
#define TIPT {items}
// A partitioned row: its key words, its inputs, its mask (written by part_scatter).
__device__ __forceinline__ bool load_row(const ColPtrs& C, const u64* aux, u64 row, u64* key, u64* in, u64* maskp, u64* err) {{
  const u64* r = aux + HEAD + row * RW;
#pragma unroll
  for (int w = 0; w < K; w++) key[w] = r[w];
#pragma unroll
  for (int w = 0; w < NIN; w++) in[w] = r[K + w];
  *maskp = r[K + NIN];
  return true;
}}
// The rows the aggregation reads: those the scatter wrote.
__device__ __forceinline__ u64 rows_in(const u64* aux, u64 n) {{ const u64 kept = aux[2 * PARTS]; return kept < n ? kept : n; }}
__device__ __forceinline__ unsigned part_of(const u64* key, const unsigned pshift) {{ return {part_of}; }}

// Rows per partition (aux[0..PARTS)) and rows kept (aux[2 * PARTS]); aux's head starts zeroed.
extern "C" __global__ void __launch_bounds__(THREADS) part_hist(const ColPtrs C, const u64 n, u64* aux, Ctrl* ctrl, const unsigned pshift) {{
  __shared__ unsigned h[PARTS];
  for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) h[p] = 0;
  __syncthreads();
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
    u64 key[K]; u64 in[NIN]; u64 mask;
    if (eval_row(C, i, key, in, &mask, &ctrl->error)) atomicAdd(&h[part_of(key, pshift)], 1u);
  }}
  __syncthreads();
  for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) {{
    if (h[p] == 0) continue;
    atomicAdd(&aux[p], (u64)h[p]);
    atomicAdd(&aux[2 * PARTS], (u64)h[p]);
  }}
}}

// Each block takes tiles of TIPT rows per thread: ranks a tile's rows per partition in shared
// memory, reserves each partition's run with one atomic on its cursor (aux[PARTS + p]), and
// writes the rows there. A partition starts where the partitions before it end (each block
// scans the histogram itself: 256 words).
extern "C" __global__ void __launch_bounds__(THREADS) part_scatter(const ColPtrs C, const u64 n, u64* aux, Ctrl* ctrl, const unsigned pshift) {{
  __shared__ u64 start[PARTS];
  __shared__ u64 base[PARTS];
  __shared__ unsigned cnt[PARTS];
  if (threadIdx.x < 32) {{
    const unsigned lane = threadIdx.x;
    const unsigned per = PARTS / 32;
    u64 sum = 0;
    for (unsigned j = 0; j < per; j++) sum += aux[lane * per + j];
    u64 x = sum;
    for (unsigned o = 1; o < 32; o <<= 1) {{
      const u64 y = __shfl_up_sync(0xFFFFFFFFu, x, o);
      if (lane >= o) x += y;
    }}
    u64 at = x - sum;
    for (unsigned j = 0; j < per; j++) {{ start[lane * per + j] = at; at += aux[lane * per + j]; }}
  }}
  for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) cnt[p] = 0;
  __syncthreads();
  const u64 tile = (u64)blockDim.x * TIPT;
  for (u64 t0 = (u64)blockIdx.x * tile; t0 < n; t0 += (u64)gridDim.x * tile) {{
    u64 keys_[TIPT][K]; u64 ins_[TIPT][NIN]; u64 masks_[TIPT]; unsigned part_[TIPT], rank_[TIPT]; bool ok_[TIPT];
#pragma unroll
    for (int j = 0; j < TIPT; j++) {{
      const u64 i = t0 + (u64)j * blockDim.x + threadIdx.x;
#pragma unroll
      for (int w = 0; w < NIN; w++) ins_[j][w] = 0;
      ok_[j] = i < n && eval_row(C, i, keys_[j], ins_[j], &masks_[j], &ctrl->error);
      if (ok_[j]) {{ part_[j] = part_of(keys_[j], pshift); rank_[j] = atomicAdd(&cnt[part_[j]], 1u); }}
    }}
    __syncthreads();
    for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) {{
      const unsigned c = cnt[p];
      if (c != 0) base[p] = start[p] + atomicAdd(&aux[PARTS + p], (u64)c);
      cnt[p] = 0;
    }}
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TIPT; j++) {{
      if (!ok_[j]) continue;
      u64* r = aux + HEAD + (base[part_[j]] + rank_[j]) * RW;
#pragma unroll
      for (int w = 0; w < K; w++) r[w] = keys_[j][w];
#pragma unroll
      for (int w = 0; w < NIN; w++) r[K + w] = ins_[j][w];
      r[K + NIN] = masks_[j];
    }}
    __syncthreads();
  }}
}}
"#
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direct_tables_partition_is_its_keys_top_eight_bits() {
        // 2^20 slots: keys below 2^20, shifted by 12, give 0..=255.
        assert_eq!(direct_shift(1 << 20), 12);
        assert_eq!((((1u64 << 20) - 1) >> direct_shift(1 << 20)), 255);
        // A domain not a power of two rounds up: the top key still lands below 256.
        let cap = 1_000_000u64;
        assert!((cap - 1) >> direct_shift(cap) < PARTS);
        assert!((cap - 1) >> direct_shift(cap) >= PARTS / 2);
        // Small tables: no shift, a partition per slot.
        assert_eq!(direct_shift(256), 0);
        assert_eq!(direct_shift(100), 0);
        assert_eq!(direct_shift(1), 0);
    }
}
