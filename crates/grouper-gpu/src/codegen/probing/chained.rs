//! Chained hashing for the global table (Luan's Chain and Chain+ with a shared table, his
//! `-S-GPU` configurations): `global_find_or_insert` as linear probing defines it, over a table
//! laid out as [`crate::table::GlobalScheme`] sizes it, and `init_directory`, which empties the
//! directory of a new table.
//!
//! Entries never move once inserted — a group's state is updated in place by atomics while
//! other threads insert — so the directory holds 32-bit entry indices, and a new key is
//! prepended to its bucket's chain under a latch on the bucket's head, which makes "find, else
//! insert" one step: two threads never enter one key twice. Unused entries keep their empty
//! key and zero row count, so read-back and `merge_entries` scan the entries as they scan a
//! linear-probing table.

/// Shared by both variants: the chain walk and the latched prepend.
const CHAIN: &str = r#"
#define NIL 0xFFFFFFFFu
#define LATCH 0xFFFFFFFEu
// Whether the entry at `e` holds `key` (volatile: another thread may have just written it).
__device__ __forceinline__ bool entry_holds(const u64* e, const u64* key) {
  bool eq = true;
#pragma unroll
  for (int w = 0; w < K; w++) eq = eq && ((const volatile u64*)e)[w] == key[w];
  return eq;
}
// The entry holding `key` in the chain from `from` up to (not including) `to`, or NIL. Chains
// grow only at their head, so a thread that finds the head changed compares only the entries
// prepended since (`to`: the head it walked from before).
__device__ __forceinline__ unsigned chain_find(const u64* gt, const unsigned* next, unsigned from, unsigned to, const u64* key) {
  for (unsigned e = from; e != to; e = ((const volatile unsigned*)next)[e])
    if (entry_holds(gt + (u64)e * GS, key)) return e;
  return NIL;
}
// Finds `key` in the chain whose head is at `head`, else takes the next of `room` entries
// counted at `taken` (entry `base + i`) and prepends it; counts the group in *count. Returns
// the entry, or -1 when the key is absent and may not be inserted (*count reached `limit`,
// or no entry is left: the caller lists the row, Karnagel's trap). The latch on the head is
// held only from the claim to the publication of the new head; a thread that finds it latched
// reads the head again (independent thread scheduling, Volta on, lets the holder finish
// while its warp's other threads spin).
__device__ __forceinline__ i64 chain_find_or_insert(u64* gt, unsigned* next, unsigned* head, const u64 limit, const u64* key, u64* count, u64* taken, const u64 base, const u64 room) {
  unsigned seen = NIL;
  while (true) {
    const unsigned h = *(volatile unsigned*)head;
    if (h == LATCH) continue;
    const unsigned f = chain_find(gt, next, h, seen, key);
    if (f != NIL) return (i64)f;
    seen = h;
    if (*(volatile u64*)count >= limit) return -1;
    if (atomicCAS(head, h, LATCH) != h) continue;
    const u64 i = atomicAdd(taken, 1ULL);
    if (i >= room) {
      atomicAdd(taken, ~0ULL);  // given back: the count stays exact once every thread is done
      atomicExch(head, h);
      return -1;
    }
    const u64 e = base + i;
    if (taken != count) atomicAdd(count, 1ULL);
    for (int w = 0; w < K; w++) ((volatile u64*)gt)[e * GS + w] = key[w];
    ((volatile unsigned*)next)[e] = h;
    __threadfence();  // the key and the link are visible before the head that reaches them
    atomicExch(head, (unsigned)e);
    return (i64)e;
  }
}
"#;

/// Luan's Chain: `gcap` entries taken densely in arrival order (the group count takes them),
/// then `gcap` bucket heads and `gcap` links, 32 bits each.
const CHAINED: &str = r#"
__device__ __forceinline__ i64 global_find_or_insert(u64* gt, const u64 gcap, const u64 glimit, const u64* key, u64* count) {
  unsigned* heads = (unsigned*)(gt + gcap * GS);
  unsigned* head = heads + probe_start<GMAP>(hash_key(key), gcap);
  return chain_find_or_insert(gt, heads + gcap, head, glimit, key, count, count, 0, gcap);
}
// Every head and link NIL.
extern "C" __global__ void init_directory(u64* gt, const u64 gcap) {
  u64* dir = gt + gcap * GS;
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < gcap; i += stride) dir[i] = EMPTY;
}
"#;

/// Luan's Chain+: the directory holds each bucket's first entry inline — slot `b` of the
/// first `gcap`, claimed as a linear-probing slot is — so most keys are found by one read with
/// no link followed; a bucket's further entries are taken from the `gcap` after them, densely
/// (a counter after the links), and chained from the bucket's link. Twice linear probing's
/// entries: the memory Luan's variant pays for its inline directory.
const CHAINED_PLUS: &str = r#"
__device__ __forceinline__ i64 global_find_or_insert(u64* gt, const u64 gcap, const u64 glimit, const u64* key, u64* count) {
  unsigned* next = (unsigned*)(gt + 2 * gcap * GS);
  u64* taken = (u64*)(next + 2 * gcap);
  const u64 b = probe_start<GMAP>(hash_key(key), gcap);
  volatile u64* kp = (volatile u64*)(gt + b * GS);
  u64 cur = *kp;
  if (K > 1) while (cur == BUSY) cur = *kp;
  if (cur == EMPTY) {
    if (*(volatile u64*)count >= glimit) return -1;
    const u64 prev = atomicCAS((u64*)kp, EMPTY, K > 1 ? BUSY : key[0]);
    if (prev == EMPTY) {
      if (K > 1) {
        for (int w = 1; w < K; w++) kp[w] = key[w];
        __threadfence();
        *kp = key[0];
      }
      atomicAdd(count, 1ULL);
      return (i64)b;
    }
    cur = prev;
    if (K > 1) while (cur == BUSY) cur = *kp;
  }
  if (cur == key[0]) {  // the first word was read: the others only (as linear probing does)
    bool eq = true;
    for (int w = 1; w < K; w++) eq = eq && kp[w] == key[w];
    if (eq) return (i64)b;
  }
  return chain_find_or_insert(gt, next, next + b, glimit, key, count, taken, gcap, gcap);
}
// Every link (a bucket's first is its chain's head) NIL, no further entry taken.
extern "C" __global__ void init_directory(u64* gt, const u64 gcap) {
  u64* dir = gt + 2 * gcap * GS;
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i <= gcap; i += stride) dir[i] = i < gcap ? EMPTY : 0;
}
"#;

/// The source of chained hashing's global table: Chain, or Chain+ when `plus`.
pub(super) fn source(plus: bool) -> String {
    [CHAIN, if plus { CHAINED_PLUS } else { CHAINED }].concat()
}
