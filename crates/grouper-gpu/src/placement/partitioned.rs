//! Partitioned aggregation for many groups (issue 25 item 4; Tomé §3.5: a thread concerned
//! with one part of the table at a time, so the part sits in a lower level of the memory
//! hierarchy): a chunk's rows are evaluated once and scattered, with their payload — key words,
//! aggregate inputs, NULL mask; not row ids, whose gather cost the sorted placement most of its
//! time — into [`PARTS`] partitions by the top bits of the word that places their key in the
//! global table: the key's hash for a hash table (linear probing starts at its top bits), the
//! key word itself for a direct table. So the partitioned rows arrive in table order, a
//! partition's 1/256 of the table at a time, which stays in L2 where the whole table would not.
//!
//! Three kernels per chunk: `part_hist` (each partition's rows), `part_scatter` (each block
//! takes a tile of rows, ranks them per partition in shared memory, reserves each partition's
//! run with one atomic on its cursor, and writes the rows there), then the aggregation: each
//! block folds stretches of one partition's rows into a shared-memory table — a hash table of
//! the partition's groups (probing from the hash bits below the partition's, which a
//! stretch's keys share), or a direct table of the partition's keys — and flushes it at each
//! stretch's end, so a row's update is a shared-memory atomic and the global table sees each
//! group once a stretch. A layout too wide for a shared table of 64 slots updates the
//! device-memory table as `global` does, in partition order. Rows within a partition are in no
//! particular order; the aggregate algebra does not need one. The planner picks the direct form
//! where the global direct table is beyond L2 and a block's shared table covers a partition's
//! keys in at most four key ranges, and the hash form from 8 times the groups a block's shared
//! hash table holds, the regions measured to win (`plan.rs`, docs/ARCHITECTURE.md).
//!
//! A hash table that fills (Karnagel's trap) lists the partitioned rows it could not take by
//! their place in the partitioned buffer, and the re-run after it grows reads them there.
//! Partitions with more groups than a shared table holds fold in key ranges (`size`): each
//! range reads the partition's rows and takes the keys whose hash below the partition's bits
//! (a direct table: whose offset in the partition) falls in it.

use std::fmt::Write;

use super::{kept_words, narrow_init, narrow_slot_bytes, pow2_floor, Room, Sizing};
use crate::codegen::rows::{FLUSH_SLOT, GLOBAL_UPDATE};
use crate::codegen::spec::KernelSpec;
use crate::strategy::Index;
use crate::table::{fill_limit, pow2_at_least};

/// Partitions of a chunk: one 8-bit digit of the placing word (one scatter pass; a tile's rows
/// still fill runs of several rows per partition).
pub(crate) const PARTS: u64 = 256;

/// Words before the partitioned rows in their buffer: each partition's rows, each partition's
/// cursor, the rows kept (the filter may drop some), a direct table's partition shift, padding
/// to a 64-byte line.
pub(crate) const HEAD_WORDS: u64 = 2 * PARTS + 8;

/// Bytes of the fold's own `__shared__` arrays (`scount`, and `pstart`, `pieces`, `pitems` of
/// [`PARTS`] words each), which its table leaves room for: a block's static and dynamic shared
/// memory together may not pass the device's limit (the launch fails), and 8,192 narrow slots
/// of 28 bytes (224 KiB) and these 6 KiB would.
pub(crate) const FOLD_STATIC_BYTES: u64 = 8 * (3 * PARTS + 1);

/// Words of one partitioned row: its key words, its aggregate inputs, its NULL mask where an
/// argument may be NULL (else every aggregate's bit is set in every row, and the row leaves the
/// mask out: a key and a sum take 16 bytes, not 24, in the scatter's writes and the fold's reads).
pub(crate) fn row_words(spec: &KernelSpec) -> u64 {
    (spec.key_count()
        + crate::codegen::input_count(&spec.layout).max(1)
        + usize::from(carries_mask(spec))) as u64
}

/// Whether a partitioned row carries its NULL mask: where some aggregate's argument may be NULL
/// (`eval_row` sets the bit of an aggregate without an argument, or with one that is never NULL,
/// in every row).
fn carries_mask(spec: &KernelSpec) -> bool {
    spec.args
        .iter()
        .enumerate()
        .any(|(a, arg)| arg.is_some() && !spec.non_null_args.get(a).copied().unwrap_or(false))
}

/// How far a key word is shifted right to give its partition in a direct table of `cap`
/// slots (the hash table's partition is its hash's top 8 bits, whatever the capacity).
pub(crate) fn direct_shift(cap: u64) -> u32 {
    let bits = 64 - cap.max(2).saturating_sub(1).leading_zeros();
    bits.saturating_sub(PARTS.trailing_zeros())
}

/// Multiple of a partition's average groups a partitioned hash table takes room for
/// ([`size`]).
const PARTITION_HEADROOM: u64 = 2;

/// Most key ranges a partition's fold splits into ([`size`]): each range's block reads all
/// the partition's rows, so 16 ranges read a row 16 times (at about the DRAM rate, measured:
/// the blocks of one piece's ranges do not keep pace enough to share its rows in L2).
const MOST_RANGES: u64 = 16;

/// The key ranges a partition's hash fold splits into (`KernelSpec::copies` of the
/// partitioned placement): one where a partition's groups, `need` slots at the fill limit,
/// fit a table of `fit` slots with [`RANGE_MARGIN`] to spare, else the fewest (at most
/// [`MOST_RANGES`]) whose share does. A range is the hash below the partition's bits scaled to
/// the ranges (`h * R / 2^64`), and the probe starts from what the scaling leaves
/// (`h * R mod 2^64`), so any count splits evenly.
pub(crate) fn key_ranges(need: u64, fit: u64) -> u64 {
    ((need as f64 * RANGE_MARGIN / fit.max(1) as f64).ceil() as u64).clamp(1, MOST_RANGES)
}

/// The key ranges of a direct fold: the fewest (at most [`MOST_RANGES`]) whose tables of
/// `slots` cover a partition's `keys`; past 16, the keys past them update the device-memory
/// table. A range rereads its partition's rows (at about the DRAM rate: at 2^20 scattered
/// groups each extra range of a hash fold added ~1.5 ms to 2^28 rows), yet a shared table for
/// every key won: on the H100 at 2^24 dense groups (2^28 rows, 65,536 keys a partition, 16,384
/// slots of 12 bytes) 14.4 ms in 4 ranges against 17.8 in 2 (half the keys), 22.3 in 1, 18.2
/// in 8 (half of them empty) and `perfect_global`'s 23.6
/// (`gpu-sweep-h100-2p28-key-ranges.json`).
pub(crate) fn direct_key_ranges(keys: u64, slots: u64) -> u64 {
    keys.div_ceil(slots.max(1)).clamp(1, MOST_RANGES)
}

/// How far a range's average groups keep under its table's fill limit: partitions' and
/// ranges' groups spread about their average and the estimate errs, and a table at its limit
/// sends the rest of its rows to the device-memory table (`size`: 2^16 groups sized to their
/// average at the limit ran 17.3 ms against 8.8 with room). 1.25 keeps one range at 2^20
/// scattered groups of 20-byte slots, measured at 10.7 ms (8,192 slots of need in 11,328).
const RANGE_MARGIN: f64 = 1.25;

/// Rows per thread of a scatter tile: tiles of 2,048 rows (runs of eight rows a partition on
/// average), unless the rows' words would not fit the registers a thread of the block has (64K
/// a multiprocessor, at most 255 a thread; about 24 kept for the rest): then fewer.
fn tile_items(spec: &KernelSpec, threads: u32) -> u64 {
    let threads = u64::from(threads.max(32));
    let regs = (65536 / threads).min(255).saturating_sub(24);
    let per_row = 2 * (row_words(spec) + 2);
    pow2_floor((2048 / threads).clamp(1, 16).min(regs / per_row)).max(1)
}

/// Most dynamic shared memory the scatter stages a tile in (a quarter of an H100 SM's).
const STAGE_BYTES: u64 = 56 * 1024;

/// Dynamic shared bytes of `part_scatter`: a tile's rows and their partitions, staged in
/// partition order; 0 where they would take more than [`STAGE_BYTES`] (the rows are then
/// written from registers).
pub(crate) fn scatter_shared_bytes(spec: &KernelSpec) -> u64 {
    let tile = u64::from(spec.threads) * tile_items(spec, spec.threads);
    let bytes = tile * (8 * row_words(spec) + 1);
    if bytes <= STAGE_BYTES {
        bytes.next_multiple_of(8)
    } else {
        0
    }
}

/// The tables `global` takes (a direct table while it fits the room for direct tables, a hash
/// table always: it grows), and besides, per block, one shared-memory table as large as a
/// whole SM's shared memory allows (where a block keeps half the SM's threads; else its share
/// at full occupancy) and no larger than a stretch of about a partition's rows needs: a
/// partition's groups in a hash table; for a direct table, a partition's key range, indexed
/// by the key's offset from the partition's first key. Tables of fewer than 64 slots: none
/// (rows update the device-memory table in partition order).
///
/// A hash table takes twice the slots a partition's average groups need at the fill factor
/// ([`PARTITION_HEADROOM`]), where shared memory holds them: partitions' groups spread about
/// their average (±16 at 256), and an estimate a little under a power of two had sized tables
/// to exactly the average at their fill limit, where a warp's longest probe is 6-7 slots and
/// the partitions above it send new keys' rows to the device-memory table (2^16 scattered
/// groups at 2^28 rows, H100: 17.5 ms, where 2^26 rows, estimated just above 2^16 and so given
/// tables twice as large, took 2.2; `block_local`'s headroom gained 30% at 2^10 groups). With
/// it, on the H100 at 2^28 rows: 2^15 scattered groups 9.2 ms against 17.2, 2^16 8.8 against
/// 17.3 (1,024 slots against 512), 2^18 7.8 against 8.5 (4,096 against 2,048;
/// `gpu-sweep-h100-2p28-partitioned-headroom.json`). Past a power of two's room a hash table
/// takes every slot that fits (to 64s, as `block`'s whole-SM table): at 2^20 groups a
/// partition's ~4,096 keys filled 8,192 slots to their limit, and the rest of its rows went to
/// the device-memory table: 19.9 ms at 2^28 rows, 10.7 in 11,328 slots
/// (`gpu-sweep-h100-2p28-fold-any-count-249392d.json`).
///
/// Where even that leaves a partition's groups over the table's fill limit, its fold splits
/// into key ranges ([`key_ranges`]): a block folds one range's groups of a piece of the
/// partition's rows and skips the rest, so a row is read once per range but updates a shared
/// table, where over the limit it went on to the device-memory table, beyond L2 from 2^22
/// groups. On the H100 at 2^28 rows (`gpu-sweep-h100-2p28-key-ranges.json`): 2^22 scattered
/// groups 18.4 ms in the planner's 4 ranges against 30.2 in one (2: 35.1, 8: 23.6, 16: 23.0);
/// 2^24 39.6 in 15 against 45.2 (2: 55.9, 8: 89.2, their tables over the limit; 16: 41.0).
/// The rereads are not free: a chunk's fold took 2.6-3.0 ms in 4 ranges at 2^22, ~1.1 in one
/// at 2^20 (Nsight Compute, 2^26-row chunks). A direct table splits its partition's key range
/// the same way, in ranges of its slots ([`direct_key_ranges`]; the last takes the keys past
/// them all to the device-memory table).
pub(super) fn size(index: Index, room: &Room) -> Option<Sizing> {
    let global = super::global::size(index, room)?;
    let key_words = match index {
        Index::Hashed => room.key_words,
        Index::Direct => 0,
    };
    let bytes = narrow_slot_bytes(key_words, room.narrow_words);
    let shared = room.largest_block_table().saturating_sub(FOLD_STATIC_BYTES);
    // A hash table takes every slot that fits, to 64s (`block`'s whole-SM table, and
    // `codegen::probing`); a direct one a power of two, its partition's key range.
    let (slots, ranges) = match index {
        Index::Hashed => {
            let fit = super::hash_slots_within(shared / bytes);
            let need = (room.groups as f64 / PARTS as f64 / room.fill) as u64;
            let ranges = room
                .key_ranges
                .unwrap_or_else(|| key_ranges(need, fit))
                .clamp(1, MOST_RANGES);
            let want = pow2_at_least((need.div_ceil(ranges) * PARTITION_HEADROOM).max(64));
            (fit.min(want), ranges)
        }
        Index::Direct => {
            let want = 1 << direct_shift(room.domain);
            let slots = pow2_floor(shared / bytes).min(want);
            let ranges = room
                .key_ranges
                .unwrap_or_else(|| direct_key_ranges(want, slots))
                .clamp(1, MOST_RANGES);
            (slots, ranges)
        }
    };
    Some(match slots >= 64 {
        true => Sizing {
            threads: room.largest(),
            copies: ranges as u32,
            local_slots: slots,
        },
        false => global,
    })
}

/// Spill room: each stretch flushes its hash table once in each key range, and a partition's
/// rows make at most one stretch more than its share of n / [`PARTS`] would, so at most
/// 2 · [`PARTS`] stretches; and a spilled slot holds at least one of the chunk's `rows`, each
/// folded in one range's job, so no more spill than rows (16 ranges of 8,000 slots would have
/// asked 65.5 million slots, 2.6 GB at four words a state). A direct table never fills, so it
/// spills nothing.
pub(super) fn scratch_slots(spec: &KernelSpec, rows: u64) -> (u64, u64) {
    match spec.strategy.index() {
        Index::Hashed => {
            let stretches = 2 * PARTS * ranges(spec) * spec.local_slots.max(1);
            (stretches.min(rows.max(1)), 0)
        }
        Index::Direct => (1, 0),
    }
}

/// Key ranges of a fold (at least one; [`size`]).
fn ranges(spec: &KernelSpec) -> u64 {
    u64::from(spec.copies.max(1))
}

pub(super) fn shared_bytes(spec: &KernelSpec) -> u64 {
    let keys = match spec.strategy.index() {
        Index::Hashed => spec.key_count() as u64,
        Index::Direct => 0,
    };
    (narrow_slot_bytes(keys, kept_words(spec)) * spec.local_slots).next_multiple_of(8)
}

/// Without a shared table: `global`'s updates over the partitioned rows (`load_row`), which
/// arrive in table order, a partition's share of the table at a time. With one: each block
/// takes stretches of one partition's rows, at most n / [`PARTS`] (a hot partition spans
/// several stretches, so several blocks; a stretch that ran into the next partition brought
/// twice the groups its table holds), folds each row into its shared table (a row the table cannot
/// take goes on to the global one) and flushes the table at the stretch's end. The re-run of
/// rows a full global table listed goes straight to the global table.
pub(super) fn body(spec: &KernelSpec) -> String {
    let global = super::global::body(spec);
    let sc = spec.local_slots;
    if sc == 0 {
        return global;
    }
    // Per row: its slot in the shared table, or the global table. Per flushed slot: its key.
    let (setup, fold, flush) = match spec.strategy.index() {
        Index::Hashed => (
            "  u64* lkeys = sm; u64* lwords = sm + K * SC;
             #define LKEY(w) lkeys[(w) * SC + ls]
             for (u64 i = threadIdx.x; i < K * SC; i += blockDim.x) lkeys[i] = EMPTY;
"
            .to_string(),
            format!(
                "        const u64 h8 = hash_key(key) << 8;
                 if (FR > 1 && __umul64hi(h8, FR) != krange) continue;
                 const i64 l = find_or_insert_at<{}>(lkeys, 1, SC, SC, {}ULL, key, &scount[0], h8 * FR);
                 if (l >= 0) {{ update_slot<true, true, true>(lwords, SC, (u64)l, in, mask); continue; }}
{GLOBAL_UPDATE}",
                !sc.is_power_of_two(),
                fill_limit(sc, spec.fill_factor)
            ),
            format!(
                "      if (lkeys[ls] == EMPTY) continue;
      const u64* lslot = lwords; const u64 lss = ls;
{FLUSH_SLOT}                 for (int w = 0; w < K; w++) lkeys[w * SC + ls] = EMPTY;
"
            ),
        ),
        // The stretch's keys from the start of its first row's partition (partitions lie in
        // key order; part_hist left the shift in the head).
        Index::Direct => (
            "  u64* lwords = sm;
  const unsigned pshift = (unsigned)aux[2 * PARTS + 1];
"
            .to_string(),
            // Range r holds offsets [r * SC, (r + 1) * SC); the last also takes those past all
            // ranges, which go on to the device-memory table.
            "        const u64 off = key[0] - kbase;
             if (FR > 1 && (off / SC < FR ? off / SC : FR - 1) != krange) continue;
             const u64 loff = off - krange * SC;
             if (loff < SC) update_slot<true, true, true>(lwords, SC, loff, in, mask);
             else update_slot<true>(gt + key[0] * GS, 1, 0, in, mask);
"
            .to_string(),
            "      merge_slot<true, false, true>(gt + (kbase + krange * SC + ls) * GS, 1, 0, lwords, SC, ls);
"
            .to_string(),
        ),
    };
    let kbase = match spec.strategy.index() {
        Index::Hashed => "",
        Index::Direct => {
            "    const u64 kbase = p << pshift;
"
        }
    };
    let init = narrow_init("lwords", "SC");
    let fr = ranges(spec);
    format!(
        r#"  if (LIST) {{
{global}    return;
  }}
  extern __shared__ u64 sm[];
  __shared__ u64 scount[1];
  const u64 SC = {sc}ULL; const u64 lst = SC; constexpr bool LN = true;
  constexpr u64 FR = {fr}ULL;
{setup}{init}
  if (threadIdx.x == 0) scount[0] = 0;
  __syncthreads();
  // Stretches: each partition's rows (aux[p] of them, from pstart[p]) in pieces of at most
  // span rows, numbered in partition order (pitems[p]: the pieces before partition p).
  const u64 span = n == 0 ? 1 : (n + PARTS - 1) / PARTS;
  __shared__ u64 pstart[PARTS];
  __shared__ u64 pieces[PARTS];
  __shared__ u64 pitems[PARTS];
  for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) pieces[p] = (aux[p] + span - 1) / span;
  __syncthreads();
  scan_parts(aux, pstart);
  scan_parts(pieces, pitems);
  __syncthreads();
  // A fold takes each piece once per key range (FR of them: by the hash below the
  // partition's bits, or a direct key's offset in its partition). Consecutive jobs are the
  // ranges of one piece, so that blocks reading its rows at the same time may share them in
  // L2 (measured on the H100: rereads run at about the DRAM rate all the same).
  const u64 jobs = (pitems[PARTS - 1] + pieces[PARTS - 1]) * FR;
  for (u64 job = blockIdx.x; job < jobs; job += gridDim.x) {{
    const u64 it = job / FR, krange = job % FR;
    // The last partition whose pieces start at or before this one (partitions without rows
    // share their number with the next that has some, which is taken).
    unsigned a = 0, b = PARTS - 1;
    while (a < b) {{ const unsigned m = (a + b + 1) / 2; if (pitems[m] <= it) a = m; else b = m - 1; }}
    const u64 p = a;
    const u64 lo = pstart[p] + (it - pitems[p]) * span, end = pstart[p] + aux[p];
    const u64 hi = lo + span < end ? lo + span : end;
{kbase}    for (u64 base = lo + threadIdx.x; base < hi; base += (u64)blockDim.x * IPT) {{
      u64 keys_[IPT][K]; u64 ins_[IPT][NIN]; u64 masks_[IPT]; bool ok_[IPT];
#pragma unroll
      for (int j = 0; j < IPT; j++) {{
        const u64 i = base + (u64)j * blockDim.x;
        ok_[j] = i < hi && load_row(C, aux, i, keys_[j], ins_[j], &masks_[j], &ctrl->error);
      }}
#pragma unroll
      for (int j = 0; j < IPT; j++) {{
        if (!ok_[j]) continue;
        const u64 row = base + (u64)j * blockDim.x; const u64* key = keys_[j]; const u64* in = ins_[j]; const u64 mask = masks_[j];
{fold}      }}
    }}
    __syncthreads();
    for (u64 ls = threadIdx.x; ls < SC; ls += blockDim.x) {{
{flush}      for (int w = 0; w < NW; w++) lwords[w * SC + ls] = NIDENT[w];
      ((unsigned*)(lwords + NW * SC))[ls] = 0u;
    }}
    if (threadIdx.x == 0) scount[0] = 0;
    __syncthreads();
  }}
"#
    )
}

/// `load_row` for this placement, `part_hist` and `part_scatter`.
pub(crate) fn kernels(spec: &KernelSpec) -> String {
    let part_of = match spec.strategy.index() {
        Index::Direct => "(unsigned)((key[0] >> pshift) < PARTS ? (key[0] >> pshift) : PARTS - 1)",
        Index::Hashed => "(unsigned)(hash_key(key) >> 56)",
    };
    let items = tile_items(spec, spec.threads);
    let staged = u8::from(scatter_shared_bytes(spec) > 0);
    let maskw = u8::from(carries_mask(spec));
    let mut s = String::new();
    let _ = write!(
        s,
        r#"
#define PARTS {PARTS}ULL
#define HEAD {HEAD_WORDS}ULL
#define MASKW {maskw}
#define RW (K + NIN + MASKW)
#define TIPT {items}
#define STAGED {staged}
// A partitioned row: its key words, its inputs, its mask where it carries one (MASKW; else
// every aggregate's bit is set: written by part_scatter).
__device__ __forceinline__ bool load_row(const ColPtrs& C, const u64* aux, u64 row, u64* key, u64* in, u64* maskp, u64* err) {{
  const u64* r = aux + HEAD + row * RW;
#pragma unroll
  for (int w = 0; w < K; w++) key[w] = r[w];
#pragma unroll
  for (int w = 0; w < NIN; w++) in[w] = r[K + w];
  *maskp = MASKW ? r[K + NIN] : ~0ULL;
  return true;
}}
// The rows the aggregation reads: those the scatter wrote.
__device__ __forceinline__ u64 rows_in(const u64* aux, u64 n) {{ const u64 kept = aux[2 * PARTS]; return kept < n ? kept : n; }}
__device__ __forceinline__ unsigned part_of(const u64* key, const unsigned pshift) {{ return {part_of}; }}

// Rows per partition (aux[0..PARTS)) and rows kept (aux[2 * PARTS]); aux's head starts zeroed.
extern "C" __global__ void __launch_bounds__(THREADS) part_hist(const ColPtrs C, const u64 n, u64* aux, Ctrl* ctrl, const unsigned pshift) {{
  __shared__ unsigned h[PARTS];
  for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) h[p] = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) aux[2 * PARTS + 1] = pshift;
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
// scans the histogram itself: 256 words). STAGED: the tile's rows are first laid out in shared
// memory in partition order, so consecutive threads write consecutive words of each run
// (unstaged, each row's words were stores of their own into one of 256 runs).
template <typename T> __device__ __forceinline__ void scan_parts(const T* counts, u64* out) {{
  if (threadIdx.x < 32) {{
    const unsigned lane = threadIdx.x;
    const unsigned per = PARTS / 32;
    u64 sum = 0;
    for (unsigned j = 0; j < per; j++) sum += counts[lane * per + j];
    u64 x = sum;
    for (unsigned o = 1; o < 32; o <<= 1) {{
      const u64 y = __shfl_up_sync(0xFFFFFFFFu, x, o);
      if (lane >= o) x += y;
    }}
    u64 at = x - sum;
    for (unsigned j = 0; j < per; j++) {{ out[lane * per + j] = at; at += counts[lane * per + j]; }}
  }}
}}
extern "C" __global__ void __launch_bounds__(THREADS) part_scatter(const ColPtrs C, const u64 n, u64* aux, Ctrl* ctrl, const unsigned pshift) {{
  __shared__ u64 start[PARTS];
  __shared__ u64 base[PARTS];
  // 32-bit: a shared-memory atomicAdd on 64 bits is a compare-and-swap loop on sm_90
  // (shared-atomics-h100.json), one per row here; a tile holds far fewer than 2^32 rows.
  __shared__ unsigned cnt[PARTS];
  __shared__ u64 loc[PARTS];
  extern __shared__ u64 stage[];
  const u64 tile = (u64)blockDim.x * TIPT;
  unsigned char* spart = (unsigned char*)(stage + (STAGED ? tile * RW : 0));
  scan_parts(aux, start);
  for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) cnt[p] = 0;
  __syncthreads();
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
      if (cnt[p] != 0) base[p] = start[p] + atomicAdd(&aux[PARTS + p], (u64)cnt[p]);
    }}
    if (STAGED) scan_parts(cnt, loc);
    __syncthreads();
    if (STAGED) {{
#pragma unroll
      for (int j = 0; j < TIPT; j++) {{
        if (!ok_[j]) continue;
        const u64 r = loc[part_[j]] + rank_[j];
        u64* st = stage + r * RW;
#pragma unroll
        for (int w = 0; w < K; w++) st[w] = keys_[j][w];
#pragma unroll
        for (int w = 0; w < NIN; w++) st[K + w] = ins_[j][w];
        if (MASKW) st[K + NIN] = masks_[j];
        spart[r] = (unsigned char)part_[j];
      }}
      __syncthreads();
      const u64 kept = loc[PARTS - 1] + cnt[PARTS - 1];
      for (u64 x = threadIdx.x; x < kept * RW; x += blockDim.x) {{
        const u64 r = x / RW, w = x - r * RW;
        const unsigned p = spart[r];
        aux[HEAD + (base[p] + r - loc[p]) * RW + w] = stage[x];
      }}
    }} else {{
#pragma unroll
      for (int j = 0; j < TIPT; j++) {{
        if (!ok_[j]) continue;
        u64* r = aux + HEAD + (base[part_[j]] + rank_[j]) * RW;
#pragma unroll
        for (int w = 0; w < K; w++) r[w] = keys_[j][w];
#pragma unroll
        for (int w = 0; w < NIN; w++) r[K + w] = ins_[j][w];
        if (MASKW) r[K + NIN] = masks_[j];
      }}
    }}
    __syncthreads();
    for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) cnt[p] = 0;
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
    use arrow::datatypes::DataType;
    use grouper_core::agg::layout::Layout;
    use grouper_core::agg::{AggKind, AggregateSpec};

    #[test]
    fn scatter_tiles_take_2048_rows_within_the_registers() {
        let spec = |sums: usize| {
            let mut aggs = vec![AggregateSpec::count_star()];
            aggs.extend((0..sums).map(|_| AggregateSpec::new(AggKind::Sum, DataType::Float64)));
            KernelSpec {
                layout: Layout::new(&aggs).unwrap(),
                ..crate::codegen::tests::spec(crate::GpuStrategy::HASH_PARTITIONED, 1)
            }
        };
        // One key word, one input, the mask (the spec's last argument may be NULL): 3 words.
        assert_eq!(row_words(&spec(1)), 3);
        // Arguments never NULL: no mask word.
        let never_null = KernelSpec {
            non_null_args: vec![true; spec(1).args.len()],
            ..spec(1)
        };
        assert_eq!(row_words(&never_null), 2);
        assert!(crate::codegen::generate(&never_null).contains("#define MASKW 0"));
        assert_eq!(tile_items(&spec(1), 256), 8);
        assert_eq!(tile_items(&spec(1), 1024), 2);
        assert_eq!(tile_items(&spec(1), 128), 16);
        // Forty sums at 1024 threads (64 registers a thread): one row a thread.
        assert_eq!(tile_items(&spec(40), 1024), 1);
        // At 256 threads a thread has 255: two rows of 44 words.
        assert_eq!(tile_items(&spec(40), 256), 2);
    }

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
