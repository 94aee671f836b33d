//! Cuckoo hashing in each thread's private table (Luan's Cuckoo2 and Cuckoo4 with independent
//! tables, his `-I-GPU` configurations: he ran no shared cuckoo table, as a key in flight
//! between two slots is in neither, which a table all threads find keys in cannot allow).
//!
//! `find_or_insert_cuckoo<D>` takes the arguments of `find_or_insert_private` and the thread's
//! index: `D` sub-tables of `cap / D` one-byte entry numbers, one hash function each (the
//! table's own for the first; for the others the key's hash salted and mixed by murmur3's
//! finalizer, as the CPU's cuckoo tables salt theirs). The entries themselves — key and state
//! words — are taken densely in the private slots and never move, so an eviction moves a
//! byte, not a state; the private table's flush and reset stay as they are. The index lives in
//! the thread's local memory for the launch the private table lives for (at most 64 entries:
//! a byte each).
//!
//! An insert that finds no place within `CUCKOO_TRIES` evictions (the CPU's tables rebuild
//! then) leaves the last evicted entry unindexed: it keeps its rows so far and is flushed with
//! the others, and a later row of its key takes a new entry — one group in two private
//! entries, which the global table merges exactly, as it merges the same group from two
//! threads.

/// The source, where `ways` sub-tables index the private table.
pub(super) fn source(ways: u32) -> String {
    format!(
        "#define CUCKOO_WAYS {ways}\n{}",
        r#"
#define CNIL 0xFF
#define CUCKOO_TRIES 16
// Sub-table t's index slot for a key hashed to h0.
__device__ __forceinline__ u64 cuckoo_slot(const u64 h0, const int t, const u64 sub) {
  u64 h = h0;
  if (t > 0) {
    h ^= 0x9e3779b97f4a7c15ULL * (u64)t;
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 33;
  }
  return (u64)t * sub + probe_start<HIGH>(h, sub);
}
__device__ __forceinline__ i64 find_or_insert_cuckoo(u64* keys, const u64 sst, const u64 cap, const u64 limit, const u64* key, u64* count, unsigned char* index) {
  const u64 sub = cap / CUCKOO_WAYS;
  const u64 h0 = hash_key(key);
#pragma unroll
  for (int t = 0; t < CUCKOO_WAYS; t++) {
    const unsigned e = index[cuckoo_slot(h0, t, sub)];
    if (e == CNIL) continue;
    bool eq = true;
    for (int w = 0; w < K; w++) eq = eq && keys[e * sst + w] == key[w];
    if (eq) return (i64)e;
  }
  if (*count >= limit) return -1;
  const u64 entry = (*count)++;
  for (int w = 0; w < K; w++) keys[entry * sst + w] = key[w];
  // Place the new entry; an evicted one goes on to a sub-table other than the one it left.
  unsigned cur = (unsigned)entry;
  u64 h = h0;
  int from = -1;
  for (int i = 0; i < CUCKOO_TRIES; i++) {
#pragma unroll
    for (int t = 0; t < CUCKOO_WAYS; t++) {
      const u64 s = cuckoo_slot(h, t, sub);
      if (index[s] == CNIL) { index[s] = (unsigned char)cur; return (i64)entry; }
    }
    const int t = from < 0 ? 0 : (from + 1 + i % (CUCKOO_WAYS - 1)) % CUCKOO_WAYS;
    const u64 s = cuckoo_slot(h, t, sub);
    const unsigned out = index[s];
    index[s] = (unsigned char)cur;
    cur = out;
    from = t;
    h = hash_key(keys + cur * sst);
  }
  return (i64)entry;
}
"#
    )
}
