//! Partitioned aggregation for many groups (issue 25 item 4; Tomé §3.5: a thread concerned
//! with one part of the table at a time, so the part sits in a lower level of the memory
//! hierarchy): a chunk's rows are evaluated once and scattered, with their payload — key words,
//! aggregate inputs, NULL mask; not row ids, whose gather cost the sorted placement most of its
//! time — into [`PARTS`] partitions by the top bits of the word that places their key in the
//! global table: the key's hash for a hash table (linear probing starts at its top bits), the
//! key word itself for a direct table. So the partitioned rows arrive in table order, a
//! partition's 1/256 of the table at a time, which stays in L2 where the whole table would not.
//!
//! Three kernels per chunk (four where the fold [`splits`] its rows by key range, below):
//! `part_hist` (each partition's rows), `part_scatter` (each block takes a tile of rows, ranks
//! them per partition in shared memory, reserves each partition's run with one atomic on its
//! cursor, and writes the rows there), then the aggregation: each
//! block folds stretches of one partition's rows into a shared-memory table — a hash table of
//! the partition's groups (probing from the hash bits below the partition's, which a
//! stretch's keys share), or a direct table of the partition's keys — and flushes it at each
//! stretch's end, so a row's update is a shared-memory atomic and the global table sees each
//! group once a stretch. A layout too wide for a shared table of 64 slots updates the
//! device-memory table as `global` does, in partition order. Rows within a partition are in no
//! particular order; the aggregate algebra does not need one. The planner picks the direct form
//! where the global direct table is beyond L2 and a block's shared tables cover a partition's
//! keys in key ranges, and the hash form from 8 times the groups a block's shared hash table
//! holds while its ranges' tables hold a tenth of a partition's groups, the regions measured
//! to win (`plan`, docs/ARCHITECTURE.md).
//!
//! A hash table that fills (Karnagel's trap) lists the partitioned rows it could not take by
//! their place in the partitioned buffer, and the re-run after it grows reads them there.
//! Partitions with more groups than a shared table holds fold in key ranges (`size`): each
//! range takes the keys whose hash below the partition's bits (a direct table: whose offset in
//! the partition) falls in it, from all the partition's rows in up to four ranges, and past
//! four from a run of its own that a fourth kernel, `part_split`, lays out ([`splits`]).

use std::fmt::Write;

use super::{kept_words, narrow_init, narrow_slot_bytes, pow2_floor, Room, Sizing};
use crate::codegen::rows::{FLUSH_SLOT, GLOBAL_UPDATE};
use crate::codegen::spec::KernelSpec;
use crate::codegen::stored::{input_storage, key_storage, Stored};
use crate::strategy::Index;
use crate::table::{fill_limit, pow2_at_least};

/// Partitions of a chunk: one 8-bit digit of the placing word (one scatter pass; a tile's rows
/// still fill runs of several rows per partition).
pub(crate) const PARTS: u64 = 256;

/// Words before the partitioned rows in their buffer: each partition's rows, each partition's
/// cursor, the rows kept (the filter may drop some), a direct table's partition shift, padding
/// to a 64-byte line; then, for a fold split by key range ([`splits`]), each (partition, key
/// range)'s rows and cursor, [`MOST_RANGES`] of each a partition.
pub(crate) const HEAD_WORDS: u64 = 2 * PARTS + 8 + 2 * PARTS * MOST_RANGES;

/// Whether a chunk's partitioned rows are split by key range before the fold (`part_split`):
/// a fold in more than [`SPLIT_PAST_RANGES`] key ranges then reads each range's rows once,
/// from a run of their own, where each range had reread all of its partition's rows (at about
/// the DRAM rate) and skipped the other ranges' rows.
pub(crate) fn splits(spec: &KernelSpec) -> bool {
    ranges(spec) > SPLIT_PAST_RANGES && spec.local_slots > 0
}

/// Most key ranges whose fold rereads its partition's rows rather than splitting them first
/// ([`splits`]): the split is one more pass that reads and writes every row, which the
/// rereads it saves paid for from eight ranges (five to seven were not measured). On the H100 at 2^28 rows, against the same
/// kernels rereading (`gpu-sweep-h100-2p28-range-split.json`): 8 ranges (2^23 scattered
/// groups) 23.1 ms split against 26.0, 15 (2^24) 31.5 against 40.3, 16 (2^26) 98.5 against
/// 180.4; dense keys in direct ranges 15.6 ms at 2^25 (8 ranges; `perfect_global` 24.2) and
/// 20.4 against 28.4 at 2^26 (16); but 4 ranges (2^22 scattered) 19.5 split against 18.6, and
/// 13.4 against 13.4 at 2^24 dense.
const SPLIT_PAST_RANGES: u64 = 4;

/// Dynamic shared bytes of `part_hist`: where the fold [`splits`], a count of each
/// (partition, key range)'s rows (64 ranges: 64 KiB); else none.
pub(crate) fn hist_shared_bytes(spec: &KernelSpec) -> u64 {
    match splits(spec) {
        true => 4 * PARTS * ranges(spec),
        false => 0,
    }
}

/// Bytes of the fold's own `__shared__` arrays (`scount`, and `pstart`, `pieces`, `pitems` of
/// [`PARTS`] words each), which its table leaves room for: a block's static and dynamic shared
/// memory together may not pass the device's limit (the launch fails), and 8,192 narrow slots
/// of 28 bytes (224 KiB) and these 6 KiB would.
pub(crate) const FOLD_STATIC_BYTES: u64 = 8 * (3 * PARTS + 1);

/// Words a thread holds of one row before it is partitioned: its key words, its aggregate
/// inputs, its NULL mask where it carries one (the registers [`tile_items`] budgets).
fn row_words(spec: &KernelSpec) -> u64 {
    (spec.key_count()
        + crate::codegen::input_count(&spec.layout).max(1)
        + usize::from(carries_mask(spec))) as u64
}

/// How a partitioned row stores its words, in order: its key words, its aggregate inputs, its
/// NULL mask where an argument may be NULL (else every aggregate's bit is set in every row, and
/// the row leaves the mask out). Words known to be 32-bit values widened take one 32-bit half
/// (`codegen::stored`): a dense u32 key and an f32 sum take 8 bytes, not 16, in the scatter's
/// writes and in each key range's reads of the fold.
fn row_storage(spec: &KernelSpec) -> Vec<Stored> {
    let mut out = key_storage(spec);
    out.extend(input_storage(spec));
    if carries_mask(spec) {
        out.push(match spec.layout.aggs.len() <= 32 {
            true => Stored::ZeroExtended,
            false => Stored::Whole,
        });
    }
    out
}

/// 32-bit halves of one partitioned row ([`row_storage`]).
fn row_halves(spec: &KernelSpec) -> u64 {
    row_storage(spec)
        .iter()
        .map(|w| w.halves())
        .sum::<u64>()
        .max(1)
}

/// Words of the partitioned rows' buffer for a chunk of `rows`: the head, then the rows; where
/// the fold [`splits`] them, a second head and rows after [`split_at`] words.
pub(crate) fn buffer_words(spec: &KernelSpec, rows: u64) -> u64 {
    split_at(spec, rows) * if splits(spec) { 2 } else { 1 }
}

/// Where the rows split by key range start in the partitioned rows' buffer (in words, on a
/// 64-byte line): after the partitioned rows.
pub(crate) fn split_at(spec: &KernelSpec, rows: u64) -> u64 {
    (HEAD_WORDS + (rows * row_halves(spec)).div_ceil(2)).next_multiple_of(8)
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

/// Most key ranges a partition's fold splits into ([`size`]; a user's fixed count too).
/// Unsplit ([`splits`]), each range's block reads all the partition's rows (at about the DRAM
/// rate, measured: the blocks of one piece's ranges do not keep pace enough to share its rows
/// in L2). Split, 64 direct ranges cover a partition's keys at 2^28 dense groups.
const MOST_RANGES: u64 = 64;

/// Most key ranges the planner gives a hash fold ([`key_ranges`]). More ranges hold more of a
/// partition's groups, yet past sixteen the hash fold lost: on the H100 at 2^28 rows
/// (`gpu-sweep-h100-2p28-split-staged.json`) 64 ranges (the split staged) took 108.5 ms at
/// 2^26 scattered u64 groups against 95.2 in sixteen of the same kernels (106.5 against 92.6
/// for dense u32 keys hashed), and 329.7 at 2^28 dense keys hashed against 277.3 in sixteen
/// unstaged (a range's job then holds few rows against its table's init and flush). A direct
/// fold, whose slots need no probe, gained from them (below).
const MOST_HASHED_RANGES: u64 = 16;

/// The key ranges a partition's hash fold splits into (`KernelSpec::copies` of the
/// partitioned placement): one where a partition's groups, `need` slots at the fill limit,
/// fit a table of `fit` slots with [`RANGE_MARGIN`] to spare, else the fewest (at most
/// [`MOST_HASHED_RANGES`]) whose share does. A range is the hash below the partition's bits scaled to
/// the ranges (`h * R / 2^64`), and the probe starts from what the scaling leaves
/// (`h * R mod 2^64`), so any count splits evenly.
pub(crate) fn key_ranges(need: u64, fit: u64) -> u64 {
    ((need as f64 * RANGE_MARGIN / fit.max(1) as f64).ceil() as u64).clamp(1, MOST_HASHED_RANGES)
}

/// The key ranges of a direct fold: the fewest (at most [`MOST_RANGES`]) whose tables of
/// `slots` cover a partition's `keys`; past 64, the keys past them update the device-memory
/// table. Unsplit, a range rereads its partition's rows (at about the DRAM rate: at 2^20
/// scattered groups each extra range of a hash fold added ~1.5 ms to 2^28 rows), yet a shared
/// table for every key won: on the H100 at 2^24 dense groups (2^28 rows, 65,536 keys a
/// partition, 16,384 slots of 12 bytes) 14.4 ms in 4 ranges against 17.8 in 2 (half the keys),
/// 22.3 in 1, 18.2 in 8 (half of them empty) and `perfect_global`'s 23.6
/// (`gpu-sweep-h100-2p28-key-ranges.json`). Split and staged, 32 ranges covering 2^26 keys
/// took 19.0 ms against 20.4 in sixteen covering half, and 64 at 2^28 27.8 against 35.0
/// (`gpu-sweep-h100-2p28-split-staged.json`).
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
    let bytes = tile * (4 * row_halves(spec) + 1);
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
/// at 2^20 (Nsight Compute, 2^26-row chunks); past four ranges the rows are split by range
/// first ([`SPLIT_PAST_RANGES`]: 2^24 31.5 ms, 2^26 98.5). A direct table splits its partition's key range
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
    // `part_split` keeps a counter and a run's base a range in shared memory, each thread
    // below the ranges zeroing one and reserving one: no more ranges than the block's threads
    // (32-thread blocks, which a user may fix, take at most 32).
    let most = MOST_RANGES.min(u64::from(room.largest()));
    // A hash table takes every slot that fits, to 64s (`block`'s whole-SM table, and
    // `codegen::probing`); a direct one a power of two, its partition's key range.
    let (slots, ranges) = match index {
        Index::Hashed => {
            let fit = super::hash_slots_within(shared / bytes);
            let need = (room.groups as f64 / PARTS as f64 / room.fill) as u64;
            let ranges = room
                .key_ranges
                .unwrap_or_else(|| key_ranges(need, fit))
                .clamp(1, most);
            let want = pow2_at_least((need.div_ceil(ranges) * PARTITION_HEADROOM).max(64));
            (fit.min(want), ranges)
        }
        Index::Direct => {
            let want = 1 << direct_shift(room.domain);
            let slots = pow2_floor(shared / bytes).min(want);
            let ranges = room
                .key_ranges
                .unwrap_or_else(|| direct_key_ranges(want, slots))
                .clamp(1, most);
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
                 if (FR > 1 && !SPLIT && hash_range(h8) != krange) continue;
                 const i64 l = find_or_insert_at<{}>(lkeys, 1, SC, SC, {}ULL, key, &scount[0], h8 * FR);
                 if (l >= 0) {{ update_slot<true, true, true>(lwords, SC, (u64)l, in, mask); continue; }}
{GLOBAL_UPDATE}",
                if sc.is_power_of_two() { "HIGH" } else { "ANY" },
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
             if (FR > 1 && !SPLIT && offset_range(off) != krange) continue;
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
    u64 lo = pstart[p] + (it - pitems[p]) * span, end = pstart[p] + aux[p], per = span;
    if (SPLIT) {{
      // The range's own run (part_split), in as many pieces as the partition's rows make.
      const u64 at = range_start(aux, pstart[p], p, krange);
      const u64 m = aux[SUB + p * MRANGES + krange];
      per = (m + pieces[p] - 1) / pieces[p];
      end = at + m;
      lo = at + (it - pitems[p]) * per;
      if (lo > end) lo = end;
    }}
    const u64 hi = lo + per < end ? lo + per : end;
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

/// The bodies of `load_row` and `store_row`: each word of a row ([`row_storage`]) read from or
/// written to its halves at `r`. Whole words come first, so where a row's halves are even
/// (rows start 8-byte aligned) each is one 64-bit access, not two 32-bit ones.
fn row_code(spec: &KernelSpec) -> (String, String) {
    let (keys, inputs) = (
        spec.key_count(),
        crate::codegen::input_count(&spec.layout).max(1),
    );
    let (mut load, mut store) = (String::new(), String::new());
    let storage = row_storage(spec);
    let even = row_halves(spec).is_multiple_of(2);
    let mut order: Vec<usize> = (0..storage.len()).collect();
    order.sort_by_key(|&i| storage[i] != Stored::Whole);
    let mut at = 0u64;
    for i in order {
        let w = storage[i];
        let word = match i {
            _ if i < keys => format!("key[{i}]"),
            _ if i < keys + inputs => format!("in[{}]", i - keys),
            _ => "mask".to_string(),
        };
        let dst = if word == "mask" { "*maskp" } else { &word };
        let aligned = even && at.is_multiple_of(2);
        let _ = writeln!(load, "  {dst} = {};", w.load("r", at, aligned));
        let _ = writeln!(store, "  {}", w.store("r", at, &word, aligned));
        at += w.halves();
    }
    if !carries_mask(spec) {
        load.push_str("  *maskp = ~0ULL;\n");
    }
    (load, store)
}

/// `load_row` for this placement, `part_hist`, `part_scatter` and `part_split`.
pub(crate) fn kernels(spec: &KernelSpec) -> String {
    // The head holds MOST_RANGES counts and cursors a partition; `size` clamps to it.
    debug_assert!(ranges(spec) <= MOST_RANGES, "{} key ranges", ranges(spec));
    let part_of = match spec.strategy.index() {
        Index::Direct => "(unsigned)((key[0] >> pshift) < PARTS ? (key[0] >> pshift) : PARTS - 1)",
        Index::Hashed => "(unsigned)(hash_key(key) >> 56)",
    };
    // The key range a row folds in, as the fold tests it (`body`).
    let range_of = match spec.strategy.index() {
        Index::Direct => "return offset_range(key[0] - ((u64)p << pshift));",
        Index::Hashed => "return hash_range(hash_key(key) << 8);",
    };
    let split = u8::from(splits(spec));
    let (psc, pfr) = (spec.local_slots.max(1), ranges(spec));
    let items = tile_items(spec, spec.threads);
    let staged = u8::from(scatter_shared_bytes(spec) > 0);
    let maskw = u8::from(carries_mask(spec));
    let halves = row_halves(spec);
    let (load, store) = row_code(spec);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"
#define PARTS {PARTS}ULL
#define HEAD {HEAD_WORDS}ULL
#define MASKW {maskw}
#define RH {halves}ULL
#define TIPT {items}
#define STAGED {staged}
// A fold in key ranges whose rows part_split lays out by range first (partitioned::splits):
// the head's counts and cursors of each (partition, range), MOST_RANGES a partition.
#define SPLIT {split}
#define PSC {psc}ULL
#define PFR {pfr}ULL
#define MRANGES {most}ULL
#define SUB (2 * PARTS + 8)
#define CUR2 (SUB + PARTS * MRANGES)
// A partitioned row, RH 32-bit halves: its key words, its inputs, its mask where it carries
// one (MASKW; else every aggregate's bit is set), each word whole or, where it is a 32-bit
// value widened, in one half (codegen::stored).
__device__ __forceinline__ void store_row(unsigned* r, const u64* key, const u64* in, const u64 mask) {{
{store}}}
__device__ __forceinline__ bool load_row(const ColPtrs& C, const u64* aux, u64 row, u64* key, u64* in, u64* maskp, u64* err) {{
  const unsigned* r = (const unsigned*)(aux + HEAD) + row * RH;
{load}  return true;
}}
// The rows the aggregation reads: those the scatter wrote.
__device__ __forceinline__ u64 rows_in(const u64* aux, u64 n) {{ const u64 kept = aux[2 * PARTS]; return kept < n ? kept : n; }}
__device__ __forceinline__ unsigned part_of(const u64* key, const unsigned pshift) {{ return {part_of}; }}
// A key's range in its partition, for the split (range_of) and the unsplit fold alike: the
// hash's bits below the partition's (h8) scaled to the ranges, or a direct key's offset in
// ranges of PSC slots, the last also taking the offsets past them all.
__device__ __forceinline__ unsigned hash_range(const u64 h8) {{ return (unsigned)__umul64hi(h8, PFR); }}
__device__ __forceinline__ unsigned offset_range(const u64 off) {{ return (unsigned)(off / PSC < PFR ? off / PSC : PFR - 1); }}
__device__ __forceinline__ unsigned range_of(const u64* key, const unsigned p, const unsigned pshift) {{ {range_of} }}
// Where range r of partition p starts among the split rows (part_split's runs, which the fold
// reads): after the partition's earlier ranges, whose counts part_hist wrote in the head. R is
// the caller's index (the fold's 64-bit range, part_split's thread index), which the loop keeps.
template <typename R>
__device__ __forceinline__ u64 range_start(const u64* aux, const u64 pstart, const u64 p, const R r) {{
  u64 at = pstart;
  for (R q = 0; q < r; q++) at += aux[SUB + p * MRANGES + q];
  return at;
}}

// Rows per partition (aux[0..PARTS)) and rows kept (aux[2 * PARTS]); aux's head starts zeroed.
// SPLIT: each (partition, range)'s rows too, PFR a partition in dynamic shared memory
// (hist_shared_bytes: up to 64 KiB, past the 48 KiB a static array may take).
extern "C" __global__ void __launch_bounds__(THREADS) part_hist(const ColPtrs C, const u64 n, u64* aux, Ctrl* ctrl, const unsigned pshift) {{
  __shared__ unsigned h[PARTS];
  extern __shared__ unsigned h2[];
  for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) h[p] = 0;
  if (SPLIT) for (u64 q = threadIdx.x; q < PARTS * PFR; q += blockDim.x) h2[q] = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) aux[2 * PARTS + 1] = pshift;
  __syncthreads();
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
    u64 key[K]; u64 in[NIN]; u64 mask;
    if (!eval_row(C, i, key, in, &mask, &ctrl->error)) continue;
    const unsigned p = part_of(key, pshift);
    atomicAdd(&h[p], 1u);
    if (SPLIT) atomicAdd(&h2[p * PFR + range_of(key, p, pshift)], 1u);
  }}
  __syncthreads();
  for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) {{
    if (h[p] == 0) continue;
    atomicAdd(&aux[p], (u64)h[p]);
    atomicAdd(&aux[2 * PARTS], (u64)h[p]);
  }}
  if (SPLIT) for (u64 q = threadIdx.x; q < PARTS * PFR; q += blockDim.x) {{
    if (h2[q] != 0) atomicAdd(&aux[SUB + (q / PFR) * MRANGES + q % PFR], (u64)h2[q]);
  }}
}}

// STAGED: copies a tile's `kept` rows, laid out in shared memory (stage) by run, run b's from
// loc[b] and each row's run in sruns, to their runs in `out` (run b's at base[b]), so
// consecutive threads write consecutive words of a run; rows of even halves a 64-bit word at a
// time. part_scatter's runs are partitions, part_split's a partition's key ranges.
template <typename L>
__device__ __forceinline__ void copy_runs(const u64* stage, const unsigned char* sruns, const u64 kept, const u64* base, const L* loc, unsigned* out) {{
  if (RH % 2 == 0) {{
    constexpr u64 RW = RH / 2;
    for (u64 x = threadIdx.x; x < kept * RW; x += blockDim.x) {{
      const u64 r = x / RW, w = x - r * RW;
      const unsigned b = sruns[r];
      ((u64*)out)[(base[b] + r - loc[b]) * RW + w] = stage[x];
    }}
  }} else {{
    const unsigned* stage32 = (const unsigned*)stage;
    for (u64 x = threadIdx.x; x < kept * RH; x += blockDim.x) {{
      const u64 r = x / RH, w = x - r * RH;
      const unsigned b = sruns[r];
      out[(base[b] + r - loc[b]) * RH + w] = stage32[x];
    }}
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
  unsigned* stage32 = (unsigned*)stage;
  unsigned* rows32 = (unsigned*)(aux + HEAD);
  unsigned char* spart = (unsigned char*)(stage32 + (STAGED ? tile * RH : 0));
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
        store_row(stage32 + r * RH, keys_[j], ins_[j], masks_[j]);
        spart[r] = (unsigned char)part_[j];
      }}
      __syncthreads();
      copy_runs(stage, spart, loc[PARTS - 1] + cnt[PARTS - 1], base, loc, rows32);
    }} else {{
#pragma unroll
      for (int j = 0; j < TIPT; j++) {{
        if (!ok_[j]) continue;
        store_row(rows32 + (base[part_[j]] + rank_[j]) * RH, keys_[j], ins_[j], masks_[j]);
      }}
    }}
    __syncthreads();
    for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) cnt[p] = 0;
    __syncthreads();
  }}
}}

// SPLIT: the partitioned rows (a) laid out again in b, each partition's rows in runs by key
// range (a partition starts where it did in a; its range r after ranges 0..r). Each block
// takes pieces of a partition's rows as the fold does, a tile at a time: ranks a tile's rows
// per range in shared memory, reserves each range's run with one atomic on its cursor
// (a[CUR2 + p * MRANGES + r]), and writes the rows there. STAGED, as part_scatter: the tile's
// rows are first laid out in shared memory in range order, so consecutive threads write
// consecutive words of each run. Block 0 copies the head the fold reads.
__device__ __forceinline__ void scan_ranges(const unsigned* counts, unsigned* out) {{
  if (threadIdx.x < 32) {{
    const unsigned lane = threadIdx.x;
    constexpr unsigned per = (unsigned)((PFR + 31) / 32);
    unsigned sum = 0;
    for (unsigned j = 0; j < per; j++) if (lane * per + j < PFR) sum += counts[lane * per + j];
    unsigned x = sum;
    for (unsigned o = 1; o < 32; o <<= 1) {{
      const unsigned y = __shfl_up_sync(0xFFFFFFFFu, x, o);
      if (lane >= o) x += y;
    }}
    unsigned at = x - sum;
    for (unsigned j = 0; j < per; j++) if (lane * per + j < PFR) {{ out[lane * per + j] = at; at += counts[lane * per + j]; }}
  }}
}}
extern "C" __global__ void __launch_bounds__(THREADS) part_split(const ColPtrs C, const u64 n, u64* a, Ctrl* ctrl, const unsigned pshift, u64* b) {{
  if (blockIdx.x == 0) {{
    for (u64 w = threadIdx.x; w < CUR2; w += blockDim.x) b[w] = w >= PARTS && w < 2 * PARTS ? 0 : a[w];
  }}
  __shared__ u64 pstart[PARTS];
  __shared__ u64 pieces[PARTS];
  __shared__ u64 pitems[PARTS];
  __shared__ unsigned cnt[MRANGES];
  __shared__ unsigned loc[MRANGES];
  __shared__ u64 base[MRANGES];
  extern __shared__ u64 stage[];
  const u64 tile = (u64)blockDim.x * TIPT;
  unsigned* stage32 = (unsigned*)stage;
  unsigned char* srange = (unsigned char*)(stage32 + (STAGED ? tile * RH : 0));
  const u64 span = n == 0 ? 1 : (n + PARTS - 1) / PARTS;
  for (u64 p = threadIdx.x; p < PARTS; p += blockDim.x) pieces[p] = (a[p] + span - 1) / span;
  if (threadIdx.x < MRANGES) cnt[threadIdx.x] = 0;
  __syncthreads();
  scan_parts(a, pstart);
  scan_parts(pieces, pitems);
  __syncthreads();
  unsigned* to = (unsigned*)(b + HEAD);
  const u64 jobs = pitems[PARTS - 1] + pieces[PARTS - 1];
  for (u64 it = blockIdx.x; it < jobs; it += gridDim.x) {{
    unsigned lo_p = 0, hi_p = PARTS - 1;
    while (lo_p < hi_p) {{ const unsigned m = (lo_p + hi_p + 1) / 2; if (pitems[m] <= it) lo_p = m; else hi_p = m - 1; }}
    const unsigned p = lo_p;
    const u64 lo = pstart[p] + (it - pitems[p]) * span, end = pstart[p] + a[p];
    const u64 hi = lo + span < end ? lo + span : end;
    for (u64 t0 = lo; t0 < hi; t0 += tile) {{
      u64 keys_[TIPT][K]; u64 ins_[TIPT][NIN]; u64 masks_[TIPT]; unsigned range_[TIPT], rank_[TIPT]; bool ok_[TIPT];
#pragma unroll
      for (int j = 0; j < TIPT; j++) {{
        const u64 i = t0 + (u64)j * blockDim.x + threadIdx.x;
        ok_[j] = i < hi && load_row(C, a, i, keys_[j], ins_[j], &masks_[j], &ctrl->error);
        if (ok_[j]) {{ range_[j] = range_of(keys_[j], p, pshift); rank_[j] = atomicAdd(&cnt[range_[j]], 1u); }}
      }}
      __syncthreads();
      if (threadIdx.x < PFR && cnt[threadIdx.x] != 0) {{
        base[threadIdx.x] = range_start(a, pstart[p], p, threadIdx.x) + atomicAdd(&a[CUR2 + p * MRANGES + threadIdx.x], (u64)cnt[threadIdx.x]);
      }}
      if (STAGED) scan_ranges(cnt, loc);
      __syncthreads();
      if (STAGED) {{
#pragma unroll
        for (int j = 0; j < TIPT; j++) {{
          if (!ok_[j]) continue;
          const u64 r = loc[range_[j]] + rank_[j];
          store_row(stage32 + r * RH, keys_[j], ins_[j], masks_[j]);
          srange[r] = (unsigned char)range_[j];
        }}
        __syncthreads();
        copy_runs(stage, srange, loc[PFR - 1] + cnt[PFR - 1], base, loc, to);
      }} else {{
#pragma unroll
        for (int j = 0; j < TIPT; j++) {{
          if (ok_[j]) store_row(to + (base[range_[j]] + rank_[j]) * RH, keys_[j], ins_[j], masks_[j]);
        }}
      }}
      __syncthreads();
      if (threadIdx.x < MRANGES) cnt[threadIdx.x] = 0;
      __syncthreads();
    }}
  }}
}}
"#,
        most = MOST_RANGES
    );
    s
}

#[cfg(test)]
mod tests;
