//! The CUDA C of the LSD radix sort ([`super::RadixSort`]): one histogram kernel over all four
//! 8-bit digits, then one onesweep pass per digit (Adinets & Merrill, "Onesweep", 2022): each
//! block ranks a tile of keys by digit within the tile, learns where the tile's keys of each
//! digit start in the output from the tiles before it by decoupled look-back, and scatters the
//! tile through shared memory so that writes of one digit run together.
//!
//! Ranking is warp-level multisplit with ballots (eight `__ballot_sync` find the lanes sharing
//! a digit; no `__match_any_sync`, which ran slowly in the aggregation kernels): keys are held
//! warp-striped (lane `l`'s item `j` of warp `w` is the tile's key `w·32·ITEMS + j·32 + l`), so
//! ranks follow input order and the sort is stable, as LSD needs.

/// Threads of a pass's block: one per digit value for the look-back and the scans.
pub(super) const THREADS: u32 = 256;
/// Keys each thread of a pass ranks.
pub(super) const ITEMS: u32 = 16;
/// Keys one block of a pass handles.
pub(super) const TILE: u64 = (THREADS * ITEMS) as u64;
/// Threads of a histogram block.
pub(super) const HIST_THREADS: u32 = 256;

/// The kernels' source: the block shapes above as `#define`s, then [`BODY`].
pub(super) fn source() -> String {
    format!("#define THREADS {THREADS}\n#define ITEMS {ITEMS}\n#define HIST_THREADS {HIST_THREADS}\n{BODY}")
}

const BODY: &str = r#"
typedef unsigned int u32;
typedef unsigned long long u64;
#define RADIX 256
#define TILE (THREADS * ITEMS)
#define WARPS (THREADS / 32)
#define FULL 0xFFFFFFFFu
// A look-back word: 0 while the tile has not counted; its own count of one digit plus one
// (AGG); or INC and the count of every tile up to it (31 bits: a sort holds at most 2^30 keys).
#define FLAG_INC 0x80000000u
#define COUNT_MASK 0x7FFFFFFFu

// hist[p * 256 + d]: keys whose digit p (bits 8p..8p+7) is d. A thread counts runs of equal
// digits in registers and adds a run to the block's shared histogram when it ends, so keys
// whose high digits are all equal (small keys) do not serialize on one shared counter.
extern "C" __global__ void __launch_bounds__(HIST_THREADS) radix_hist(const u32* __restrict__ keys, u64 n, u32* hist) {
  __shared__ u32 sh[4 * RADIX];
  for (int i = threadIdx.x; i < 4 * RADIX; i += blockDim.x) sh[i] = 0;
  __syncthreads();
  u32 prev[4], run[4];
#pragma unroll
  for (int p = 0; p < 4; p++) { prev[p] = 0; run[p] = 0; }
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 base = (u64)blockIdx.x * blockDim.x + threadIdx.x; base < n; base += 4 * stride) {
    u32 k[4];
#pragma unroll
    for (int j = 0; j < 4; j++) { const u64 i = base + j * stride; k[j] = i < n ? keys[i] : 0; }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      if (base + j * stride >= n) break;
#pragma unroll
      for (int p = 0; p < 4; p++) {
        const u32 d = (k[j] >> (8 * p)) & 255u;
        if (run[p] != 0 && d != prev[p]) { atomicAdd(&sh[p * RADIX + prev[p]], run[p]); run[p] = 0; }
        prev[p] = d; run[p]++;
      }
    }
  }
#pragma unroll
  for (int p = 0; p < 4; p++) if (run[p] != 0) atomicAdd(&sh[p * RADIX + prev[p]], run[p]);
  __syncthreads();
  for (int i = threadIdx.x; i < 4 * RADIX; i += blockDim.x) if (sh[i] != 0) atomicAdd(&hist[i], sh[i]);
}

// One stable pass over the digit at `shift`: keys_in/vals_in -> keys_out/vals_out. `vals_in`
// null: the values are the keys' positions (row ids). `offsets[d]`: where digit d starts in the
// output (the exclusive scan of this digit's histogram). `lookback` (tiles x 256 words) and
// `tile_counter` are zero at launch. Tiles are taken in the order blocks start (the counter),
// so every tile a block looks back on belongs to a block already running: the spin ends.
extern "C" __global__ void __launch_bounds__(THREADS) radix_pass(
    const u32* __restrict__ keys_in, const u32* __restrict__ vals_in,
    u32* __restrict__ keys_out, u32* __restrict__ vals_out,
    u64 n, u32 shift, const u32* __restrict__ offsets, u32* lookback, u32* tile_counter) {
  __shared__ u32 s_warp[WARPS][RADIX];
  __shared__ u32 s_start[RADIX];
  __shared__ u32 s_dest[RADIX];
  __shared__ u32 s_wsum[WARPS];
  __shared__ u32 s_buf[TILE];
  __shared__ u32 s_tile;
  const u32 tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  if (tid == 0) s_tile = atomicAdd(tile_counter, 1u);
  for (u32 i = tid; i < WARPS * RADIX; i += THREADS) (&s_warp[0][0])[i] = 0;
  __syncthreads();
  const u64 tile = s_tile;
  const u64 first = tile * TILE;
  const u64 base = first + (u64)warp * (32 * ITEMS) + lane;
  const u32 valid = (u32)(n - first < (u64)TILE ? n - first : (u64)TILE);

  // Keys past the end read as the largest key: they rank last in the tile and are not written.
  u32 k[ITEMS], rank[ITEMS];
#pragma unroll
  for (int j = 0; j < ITEMS; j++) { const u64 i = base + (u64)j * 32; k[j] = i < n ? keys_in[i] : FULL; }

  // Warp-level multisplit: the lanes whose digit equals this lane's, by eight ballots.
  const u32 lt = (1u << lane) - 1u;
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    const u32 d = (k[j] >> shift) & 255u;
    u32 peers = FULL;
#pragma unroll
    for (int b = 0; b < 8; b++) {
      const u32 vote = __ballot_sync(FULL, (d >> b) & 1u);
      peers &= ((d >> b) & 1u) ? vote : ~vote;
    }
    const u32 before = s_warp[warp][d];
    rank[j] = before + __popc(peers & lt);
    __syncwarp();
    if ((peers & lt) == 0) s_warp[warp][d] = before + __popc(peers);
    __syncwarp();
  }
  __syncthreads();

  // Thread d: the warps' counts of digit d become their exclusive offsets within the tile.
  const u32 d = tid;
  u32 count = 0;
#pragma unroll
  for (int w = 0; w < WARPS; w++) { const u32 c = s_warp[w][d]; s_warp[w][d] = count; count += c; }
  volatile u32* lb = lookback + tile * RADIX + d;
  *lb = tile == 0 ? (FLAG_INC | count) : count + 1u;

  // Exclusive scan of the tile's counts over digits: where each digit's keys start in the tile.
  u32 x = count;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) { const u32 y = __shfl_up_sync(FULL, x, o); if (lane >= (u32)o) x += y; }
  if (lane == 31) s_wsum[warp] = x;
  __syncthreads();
  u32 start = x - count;
  for (u32 w = 0; w < warp; w++) start += s_wsum[w];
  s_start[d] = start;

  // Decoupled look-back: the keys of digit d in every tile before this one.
  u32 prefix = 0;
  if (tile > 0) {
    for (u64 p = tile - 1;; p--) {
      volatile const u32* q = lookback + p * RADIX + d;
      u32 v;
      do { v = *q; } while (v == 0);
      if ((v & FLAG_INC) != 0) { prefix += v & COUNT_MASK; break; }
      prefix += v - 1u;
      if (p == 0) break;
    }
    *lb = FLAG_INC | (prefix + count);
  }
  s_dest[d] = offsets[d] + prefix - start;
  __syncthreads();

  // The tile in digit order in shared memory, then out: position i of the tile goes to
  // s_dest[digit] + i, so a digit's keys are written together.
  u32 pos[ITEMS];
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    const u32 dj = (k[j] >> shift) & 255u;
    pos[j] = s_start[dj] + s_warp[warp][dj] + rank[j];
    s_buf[pos[j]] = k[j];
  }
  __syncthreads();
  u32 dest[ITEMS];
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    const u32 i = tid + j * THREADS;
    const u32 key = s_buf[i];
    dest[j] = s_dest[(key >> shift) & 255u] + i;
    if (i < valid) keys_out[dest[j]] = key;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    const u64 i = base + (u64)j * 32;
    s_buf[pos[j]] = vals_in == 0 ? (u32)i : (i < n ? vals_in[i] : 0u);
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    const u32 i = tid + j * THREADS;
    if (i < valid) vals_out[dest[j]] = s_buf[i];
  }
}
"#;
