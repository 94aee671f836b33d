//! The pieces of CUDA C every placement's kernel body is made of: the loop over a chunk's rows
//! (`IPT` rows loaded and evaluated before any is folded in), the update of the global hash
//! table, and the flush of a local slot into it.

/// Opens the loop over rows: inside, `row`, `key`, `in` and `mask` are the current row's.
pub(crate) const ROW_LOOP_HEAD: &str = r#"
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 base = (u64)blockIdx.x * blockDim.x * IPT + threadIdx.x; base < n; base += stride * IPT) {
    // All IPT rows are loaded and evaluated before any is folded in, so their loads are in
    // flight together (the table updates could otherwise alias them and serialize).
    u64 keys_[IPT][K]; u64 ins_[IPT][NIN]; u64 masks_[IPT]; u64 rows_[IPT]; bool ok_[IPT];
#pragma unroll
    for (int j = 0; j < IPT; j++) {
      const u64 i = base + (u64)j * blockDim.x;
      ok_[j] = false;
      if (i < n) {
        rows_[j] = LIST ? (u64)list[i] : i;
        ok_[j] = load_row(C, aux, rows_[j], keys_[j], ins_[j], &masks_[j], &ctrl->error);
      }
    }
#pragma unroll
    for (int j = 0; j < IPT; j++) {
      if (!ok_[j]) continue;
      const u64 row = rows_[j]; const u64* key = keys_[j]; const u64* in = ins_[j]; const u64 mask = masks_[j];
"#;

/// Closes the loop [`ROW_LOOP_HEAD`] opened.
pub(crate) const ROW_LOOP_TAIL: &str = "    }\n  }\n";

/// Inserting into the global table (array of structs: a slot's key and state words share
/// cache lines), or listing the row for after the table has grown.
pub(crate) const GLOBAL_UPDATE: &str = r#"
      {
        const i64 g = global_find_or_insert(gt, gcap, glimit, key, &ctrl->groups);
        if (g < 0) { const u64 o = atomicAdd(&ctrl->overflow, 1ULL); overflow[o] = (unsigned)row; }
        else update_slot<true>(gt + (u64)g * GS + GK, 1, 0, in, mask);
      }
"#;

/// Merging a local slot (keys `LKEY(w)`, state words at `lslot[w * lst + lss]`, a narrow table
/// where the constant `LN` says so) into the global table, or spilling it, widened, for after
/// the table has grown.
pub(crate) const FLUSH_SLOT: &str = r#"
      {
        u64 k[K];
        for (int w = 0; w < K; w++) k[w] = LKEY(w);
        const i64 g = global_find_or_insert(gt, gcap, glimit, k, &ctrl->groups);
        if (g >= 0) merge_slot<true, false, LN>(gt + (u64)g * GS + GK, 1, 0, lslot, lst, lss);
        else {
          const u64 o = atomicAdd(&ctrl->spill, 1ULL);
          if (o < spill_cap) {
            for (int w = 0; w < K; w++) spill[o * GS + w] = k[w];
            copy_slot<LN>(spill + o * GS + GK, lslot, lst, lss);
          } else atomicOr(&ctrl->error, ERR_SPILL);
        }
      }
"#;
