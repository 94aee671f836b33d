//! Linear probing: the functions every hashed table's code calls — the global table's where
//! it probes linearly, and every shared-memory, partition and private table's (these probe
//! linearly under every scheme).
//!
//! - `find_or_insert(keys, sst, kst, cap, limit, key, count)`: a table many threads share
//!   (atomics);
//! - `find_or_insert_private(keys, sst, cap, limit, key, count)`: a table one thread owns.
//!
//! Both return the key's slot, or -1 when the key is absent and may not be inserted (the table
//! reached `limit` entries; the caller lists the row: Karnagel's trap).

pub(super) const LINEAR: &str = r#"
// Linear probing over `cap` slots (>= 16) whose key word w is at keys[slot * sst + w * kst]
// (sst = 1: struct of arrays; kst = 1: array of structs).
// Claims an empty slot only while *count < limit; returns -1 when the key is absent and may
// not be inserted (the caller lists the row: Karnagel's trap).
// The probe starts from the top bits of `h`: the key's hash (`find_or_insert`), or for a table
// whose keys share the top bits of their hash, as a partition's do, the bits below them.
// The bucket mapping M: 0 (HIGH) over a power of two `cap`, the hash's top bits; 1 (ANY) over
// any count (a block's whole-SM table takes the slots shared memory holds), h * cap / 2^64; 2
// (MOD) over any count, h mod cap (Karnagel's mapping: the global table under --bucket-map
// modulo). Past the first two, the probe wraps by comparison. Only those tables pay for it:
// with a runtime test of the count in every probe (41ede25), block_local ran 23-35% slower at
// 2^16-2^20 groups (H100), where rows mostly probe the global table.
#define HIGH 0
#define ANY 1
#define MOD 2
template <int M>
__device__ __forceinline__ u64 probe_start(u64 h, u64 cap) {
  return M == ANY ? __umul64hi(h, cap) : M == MOD ? h % cap : h >> (__clzll(cap) + 1);
}
template <int M>
__device__ __forceinline__ u64 probe_next(u64 slot, u64 cap) {
  return M != HIGH ? (slot + 1 == cap ? 0 : slot + 1) : (slot + 1) & (cap - 1);
}
template <int M = HIGH>
__device__ __forceinline__ i64 find_or_insert_at(u64* keys, u64 sst, u64 kst, u64 cap, u64 limit, const u64* key, u64* count, const u64 h) {
  u64 slot = probe_start<M>(h, cap);
  for (u64 p = 0; p < cap; p++) {
    volatile u64* kp = (volatile u64*)(keys + slot * sst);
    u64 cur = *kp;
    if (K > 1) while (cur == BUSY) cur = *kp;
    if (cur == EMPTY) {
      if (*(volatile u64*)count >= limit) return -1;
      u64 prev = atomicCAS((u64*)kp, EMPTY, K > 1 ? BUSY : key[0]);
      if (prev == EMPTY) {
        if (K > 1) {
          for (int w = 1; w < K; w++) ((volatile u64*)keys)[slot * sst + w * kst] = key[w];
          __threadfence();
          *kp = key[0];
        }
        atomicAdd(count, 1ULL);
        return (i64)slot;
      }
      cur = prev;
      if (K > 1) while (cur == BUSY) cur = *kp;
    }
    if (cur == key[0]) {
      bool eq = true;
      for (int w = 1; w < K; w++) eq = eq && ((volatile u64*)keys)[slot * sst + w * kst] == key[w];
      if (eq) return (i64)slot;
    }
    slot = probe_next<M>(slot, cap);
  }
  return -1;
}

template <int M = HIGH>
__device__ __forceinline__ i64 find_or_insert(u64* keys, u64 sst, u64 kst, u64 cap, u64 limit, const u64* key, u64* count) {
  return find_or_insert_at<M>(keys, sst, kst, cap, limit, key, count, hash_key(key));
}

// The same for a table only this thread touches (array of structs): no atomics.
__device__ __forceinline__ i64 find_or_insert_private(u64* keys, u64 sst, u64 cap, u64 limit, const u64* key, u64* count) {
  u64 slot = probe_start<HIGH>(hash_key(key), cap);
  for (u64 p = 0; p < cap; p++) {
    u64 cur = keys[slot * sst];
    if (cur == EMPTY) {
      if (*count >= limit) return -1;
      for (int w = 0; w < K; w++) keys[slot * sst + w] = key[w];
      *count += 1;
      return (i64)slot;
    }
    if (cur == key[0]) {
      bool eq = true;
      for (int w = 1; w < K; w++) eq = eq && keys[slot * sst + w] == key[w];
      if (eq) return (i64)slot;
    }
    slot = probe_next<HIGH>(slot, cap);
  }
  return -1;
}
"#;

/// The global table's `global_find_or_insert` where it probes linearly: its slots are its
/// entries, array of structs; its buckets by the mapping `GMAP` (HIGH or MOD).
pub(super) const GLOBAL_LINEAR: &str = r#"
__device__ __forceinline__ i64 global_find_or_insert(u64* gt, const u64 gcap, const u64 glimit, const u64* key, u64* count) {
  return find_or_insert<GMAP>(gt, GS, 1, gcap, glimit, key, count);
}
"#;
