//! Hashed index per block in shared memory (Rosenfeld's WORKGROUPLOCAL), in as many
//! interleaved copies as fit (Tomé's copies, as for direct tables): rows whose key finds
//! or claims a slot update it there; once the table reaches its fill limit, new keys' rows go
//! to the global table. At the end each block flushes its slots into the global table (or
//! spills them, widened, while that table grows). The tables are narrow (`codegen` module doc):
//! 28 bytes a slot for a key and a sum that may be NULL, where 32 bytes put 2^12 groups' 8,192
//! slots beyond an SM's shared memory and sent half their rows to the global table.

use std::fmt::Write;

use super::{
    hash_slots_within, kept_words, narrow_init, narrow_slot_bytes, pow2_floor, Room, Sizing,
};
use crate::codegen::rows::{FLUSH_SLOT, GLOBAL_UPDATE, ROW_LOOP_HEAD, ROW_LOOP_TAIL};
use crate::codegen::spec::KernelSpec;
use crate::table::{fill_limit, pow2_at_least};

/// The smallest block whose table holds ~groups / fill slots at full occupancy, with as many
/// interleaved copies of it as fit there (up to one per lane of a warp: lanes whose rows share
/// a key then update different words, where one table serialized them — at four scattered
/// groups block_local ran 42 Grows/s against 89 at sixteen, H100, 2^28 rows). Else one table,
/// as large as the groups need and shared memory allows, in a block of the largest size; that
/// block takes a whole SM's shared memory where it keeps at least half the SM's threads (the
/// table's hits spare the global table's atomics: a table of a quarter of the groups sent the
/// rest's rows there, 25 Grows/s at 2^12 scattered groups against 111 at 2^10), else only its
/// share at full occupancy. Fits from 16 slots.
///
/// With headroom ([`HEADROOM`]), for a [light](Room::light) state: a table of four, else two
/// times those slots where one copy still fits a block at full occupancy. A warp waits for its
/// lanes' longest probe, and at the fill limit that is 5-7 slots (host simulation of the
/// sweep's keys, murmur3, linear probing: 5.0 / 6.7 / 7.1 at 2^6 / 2^8 / 2^10 groups, against
/// 3.9 / 2.6 / 2.8 at a quarter full). On the H100 (2^28 rows, scattered u64 keys) a table
/// four times larger took 1.88 ms at 2^6 groups against 3.17, 1.89 against 2.82 at 2^8; twice
/// as large, 1.78 against 2.55 at 2^10 (`gpu-sizing-h100-2p28-78c0260.json`). Tables the
/// 64-slot floor already leaves half empty keep their copies instead (16 groups: 8 copies of
/// 128 slots took 1.48 ms, 16 of 64 1.33).
pub(super) fn size(room: &Room) -> Option<Sizing> {
    let need = (room.groups as f64 / room.fill) as u64;
    let want = pow2_at_least(need.max(64));
    let bytes = narrow_slot_bytes(room.key_words, room.narrow_words);
    let largest = room.largest();
    // The smallest block holding a copy of `slots` at full occupancy, and its copies.
    let fitting = |slots: u64| {
        let table = slots.saturating_mul(bytes);
        room.block_sizes
            .iter()
            .map(|&t| (t, pow2_floor((room.at_full(t) / table).min(32)), slots))
            .find(|&(_, c, _)| c > 0)
    };
    let roomy = if need > 64 && room.light() {
        HEADROOM
    } else {
        &[1][..]
    };
    let (threads, copies, local_slots) = roomy
        .iter()
        .find_map(|&h| fitting(want.saturating_mul(h)))
        .unwrap_or_else(|| {
            // As many slots as the block's shared memory holds, up to the headroom's: the
            // probe's start scales the hash to any count (`codegen::probing`), so a whole SM's
            // 11,571 narrow slots of 20 bytes hold 2^12 groups at a fill of 0.35, not 0.5 in
            // 8,192 (a warp's longest probe, host simulation of the sweep's keys: 4.1 slots
            // against 6.6), and more of 2^13 groups and up.
            let fit = hash_slots_within(room.largest_block_table() / bytes);
            let most = want.saturating_mul(roomy.first().copied().unwrap_or(1));
            (largest, 1, fit.min(most))
        });
    (local_slots >= 16).then_some(Sizing {
        threads,
        copies: copies as u32,
        local_slots,
    })
}

/// Multiples of the slots its groups need that a block's hash table tries, largest first.
const HEADROOM: &[u64] = &[4, 2, 1];

/// The copies of a block's table (at least one).
fn copies(spec: &KernelSpec) -> u64 {
    spec.copies.max(1) as u64
}

pub(super) fn shared_bytes(spec: &KernelSpec) -> u64 {
    (narrow_slot_bytes(spec.key_count() as u64, kept_words(spec)) * spec.local_slots * copies(spec))
        .next_multiple_of(8)
}

/// Every block's tables may spill whole; no private tables.
pub(super) fn scratch_slots(blocks: u64, spec: &KernelSpec) -> (u64, u64) {
    (blocks * spec.local_slots * copies(spec), 0)
}

/// The copies are interleaved (slot `l` of copy `c` at `l * R + c`), so lanes updating the
/// same slot of different copies fall in different banks; a thread uses copy `lane % R`.
/// Each copy fills to its own limit; at the end the copies fold into copy 0, which is flushed.
pub(super) fn body(spec: &KernelSpec) -> String {
    let sc = spec.local_slots;
    let r = copies(spec);
    let limit = fill_limit(sc, spec.fill_factor);
    // A whole-SM table of any count probes by scaling (`codegen::probing`).
    let find = match sc.is_power_of_two() {
        true => "find_or_insert",
        false => "find_or_insert<ANY>",
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  extern __shared__ u64 sm[];\n  __shared__ u64 scount[{r}];\n  const u64 SC = {sc}ULL, R = {r}ULL, SCR = SC * R;\n\
         u64* lkeys = sm; u64* lwords = sm + K * SCR; const u64 lst = SCR;\n\
         #define LKEY(w) lkeys[(w) * SCR + ls]\n\
         for (u64 i = threadIdx.x; i < K * SCR; i += blockDim.x) lkeys[i] = EMPTY;\n{}\
         if (threadIdx.x < R) scount[threadIdx.x] = 0;\n  __syncthreads();\n\
         const u64 cp = threadIdx.x & (R - 1);",
        narrow_init("lwords", "SCR")
    );
    s.push_str(ROW_LOOP_HEAD);
    let _ = writeln!(
        s,
        "      const i64 l = {find}(lkeys + cp, R, SCR, SC, {limit}ULL, key, &scount[cp]);\n\
         if (l >= 0) {{ update_slot<true, true, true>(lwords, SCR, (u64)l * R + cp, in, mask); continue; }}"
    );
    s.push_str(GLOBAL_UPDATE);
    s.push_str(ROW_LOOP_TAIL);
    s.push_str("  __syncthreads();\n");
    if r > 1 {
        // The copies fold into copy 0 here, in shared memory, before the flush: each block
        // then merges a group once into the global table, not once per copy (16 copies of 16
        // scattered groups in 1,056 blocks made 270,000 global merges onto 16 slots, and ran
        // 8% slower than 8 copies, H100). A slot copy 0 has no room for is flushed itself.
        let _ = writeln!(
            s,
            "  for (u64 ls = threadIdx.x; ls < SCR; ls += blockDim.x) {{\n\
             if ((ls & (R - 1)) == 0 || lkeys[ls] == EMPTY) continue;\n\
             u64 k[K];\n    for (int w = 0; w < K; w++) k[w] = LKEY(w);\n\
             const i64 l = {find}(lkeys, R, SCR, SC, {limit}ULL, k, &scount[0]);\n\
             if (l < 0) continue;\n\
             merge_slot<true, true, true>(lwords, SCR, (u64)l * R, lwords, SCR, ls);\n\
             lkeys[ls] = EMPTY;\n  }}\n  __syncthreads();"
        );
    }
    s.push_str("  constexpr bool LN = true;\n  const u64* lslot = lwords;\n  for (u64 ls = threadIdx.x; ls < SCR; ls += blockDim.x) {\n    if (lkeys[ls] == EMPTY) continue;\n    const u64 lss = ls;\n");
    s.push_str(FLUSH_SLOT);
    s.push_str("  }\n");
    s
}
