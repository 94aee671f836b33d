//! LSD radix sort of 32-bit keys with their row ids on the GPU (issue 25 item 3; the
//! sort-based aggregation of Karnagel §5.2 and the sort-based atomics paper sort first). Our own
//! kernels, compiled with NVRTC like the rest ([`kernels`]): one histogram of all four 8-bit
//! digits, then one onesweep pass per digit with decoupled look-back (Adinets & Merrill 2022),
//! each pass reading and writing every pair once.
//!
//! A digit whose histogram puts every key in one bucket (the high digits of small keys) leaves
//! the order as it is, so its pass is skipped: group ids below 2^16 take two passes, not four.

mod kernels;

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use crate::compile::compile;
use crate::device::{gpu_err, Gpu};
use grouper_core::error::{GrouperError, Result};

use kernels::{source, HIST_THREADS, THREADS, TILE};

const RADIX: usize = 256;
const DIGITS: usize = 4;

/// Tiles (blocks of a pass) over `n` keys: at least one, so an empty sort still launches.
fn tiles(n: usize) -> usize {
    n.div_ceil(TILE as usize).max(1)
}

/// The sort's kernels, loaded.
pub struct RadixSort {
    hist: CudaFunction,
    pass: CudaFunction,
    /// Blocks of the histogram kernel: a few per multiprocessor, each looping over the keys.
    hist_blocks: u32,
    /// Milliseconds the compile (or load from the cache) took.
    pub compile_ms: f64,
}

/// Device memory for sorting up to [`SortBuffers::cap`] pairs: keys and values twice (each
/// pass reads one pair of buffers and writes the other), the histograms, and the look-back
/// words of every tile.
pub struct SortBuffers {
    /// The keys: the caller writes `keys[0]`; the sort leaves them in `keys[Sorted::buffer]`.
    pub keys: [CudaSlice<u32>; 2],
    /// The row ids, in `vals[Sorted::buffer]` after a sort (the input's positions).
    pub vals: [CudaSlice<u32>; 2],
    hist: CudaSlice<u32>,
    offsets: CudaSlice<u32>,
    lookback: CudaSlice<u32>,
    counter: CudaSlice<u32>,
    cap: usize,
}

impl SortBuffers {
    /// Buffers for `cap` pairs (at most [`RadixSort::MAX_KEYS`]).
    pub fn new(stream: &Arc<CudaStream>, cap: usize) -> Result<Self> {
        if cap > RadixSort::MAX_KEYS {
            return Err(GrouperError::InvalidOption(format!(
                "the GPU radix sort takes at most {} keys at once, not {cap}",
                RadixSort::MAX_KEYS
            )));
        }
        let err = gpu_err("allocating the sort's buffers");
        let n = cap.max(1);
        // SAFETY: the caller writes keys[0] before sorting; every other buffer is written by a
        // kernel (or zeroed) before it is read.
        let alloc = |len: usize| unsafe { stream.alloc::<u32>(len) }.map_err(&err);
        Ok(Self {
            keys: [alloc(n)?, alloc(n)?],
            vals: [alloc(n)?, alloc(n)?],
            hist: alloc(DIGITS * RADIX)?,
            offsets: alloc(DIGITS * RADIX)?,
            lookback: alloc(tiles(cap) * RADIX)?,
            counter: alloc(1)?,
            cap,
        })
    }

    /// Pairs these buffers hold.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Device bytes buffers for `cap` pairs take.
    pub fn bytes(cap: usize) -> u64 {
        let words = tiles(cap) * RADIX + 2 * DIGITS * RADIX + 1;
        16 * cap.max(1) as u64 + 4 * words as u64
    }
}

/// Where a sort left its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sorted {
    /// Which of the buffers holds the sorted keys and their row ids.
    pub buffer: usize,
    /// Passes run (digits whose keys were not all in one bucket; at least one).
    pub passes: u32,
}

impl RadixSort {
    /// Most keys one sort takes (as many as a launch's chunk holds): a look-back word counts
    /// keys in 31 bits.
    pub const MAX_KEYS: usize = 1 << 30;

    /// Compiles (or fetches) the sort's kernels for `gpu`.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let compiled = compile(gpu, &source())?;
        Ok(Self {
            hist: compiled.function("radix_hist")?,
            pass: compiled.function("radix_pass")?,
            hist_blocks: gpu.info.sms * 4,
            compile_ms: compiled.compile_ms,
        })
    }

    /// Sorts the first `n` keys of `bufs.keys[0]` with their positions, stably. Reads the
    /// histograms back once (to skip digits that do not move any key), so it returns with the
    /// passes queued on `stream`, not finished.
    pub fn sort(
        &self,
        stream: &Arc<CudaStream>,
        bufs: &mut SortBuffers,
        n: usize,
    ) -> Result<Sorted> {
        if n > bufs.cap {
            return Err(GrouperError::Gpu(format!(
                "sorting {n} keys in buffers for {}",
                bufs.cap
            )));
        }
        stream
            .memset_zeros(&mut bufs.hist)
            .map_err(gpu_err("zeroing the sort's histograms"))?;
        let n64 = n as u64;
        if n > 0 {
            let cfg = LaunchConfig {
                grid_dim: (self.hist_blocks, 1, 1),
                block_dim: (HIST_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&self.hist);
            b.arg(&bufs.keys[0]).arg(&n64).arg(&mut bufs.hist);
            // SAFETY: radix_hist(const u32*, u64, u32*) reads n keys of keys[0] (n <= cap) and
            // adds into the 4 x 256 histogram words.
            unsafe { b.launch(cfg) }.map_err(gpu_err("launching radix_hist"))?;
        }
        let hist = stream
            .clone_dtoh(&bufs.hist)
            .map_err(gpu_err("reading the sort's histograms"))?;
        let (offsets, mut passes) = plan_passes(&hist, n64);
        if passes.is_empty() {
            // Every digit leaves the order as it is; one pass still writes the row ids.
            passes.push(0);
        }
        stream
            .memcpy_htod(&offsets, &mut bufs.offsets)
            .map_err(gpu_err("writing the sort's offsets"))?;
        let cfg = LaunchConfig {
            grid_dim: (tiles(n) as u32, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let null = 0u64;
        let mut cur = 0usize;
        for (i, &digit) in passes.iter().enumerate() {
            stream
                .memset_zeros(&mut bufs.lookback)
                .map_err(gpu_err("zeroing the look-back words"))?;
            stream
                .memset_zeros(&mut bufs.counter)
                .map_err(gpu_err("zeroing the tile counter"))?;
            let shift = 8 * digit as u32;
            let offs = bufs.offsets.slice(digit * RADIX..(digit + 1) * RADIX);
            let (lo_k, hi_k) = bufs.keys.split_at_mut(1);
            let (lo_v, hi_v) = bufs.vals.split_at_mut(1);
            let (src_k, dst_k, src_v, dst_v) = if cur == 0 {
                (&lo_k[0], &mut hi_k[0], &lo_v[0], &mut hi_v[0])
            } else {
                (&hi_k[0], &mut lo_k[0], &hi_v[0], &mut lo_v[0])
            };
            let mut b = stream.launch_builder(&self.pass);
            b.arg(src_k);
            if i == 0 {
                b.arg(&null);
            } else {
                b.arg(src_v);
            }
            b.arg(dst_k)
                .arg(dst_v)
                .arg(&n64)
                .arg(&shift)
                .arg(&offs)
                .arg(&mut bufs.lookback)
                .arg(&mut bufs.counter);
            // SAFETY: radix_pass(const u32*, const u32* or null, u32*, u32*, u64, u32,
            // const u32*, u32*, u32*): reads n keys (and values) of the source buffers, writes
            // n of the destinations (a permutation of 0..n by the offsets of this digit's
            // histogram, which sum to n), 256 offsets, one look-back word per tile and digit
            // (tiles x 256 allocated) and the counter.
            unsafe { b.launch(cfg) }.map_err(gpu_err("launching radix_pass"))?;
            cur = 1 - cur;
        }
        Ok(Sorted {
            buffer: cur,
            passes: passes.len() as u32,
        })
    }
}

/// What [`RadixSort::time`] measured: each timed sort's milliseconds, and the last sort's
/// result read back.
pub struct Timed {
    /// Milliseconds of each timed sort (CUDA events around the histogram, its read-back and the
    /// passes).
    pub ms: Vec<f64>,
    /// Passes each sort ran.
    pub passes: u32,
    /// The sorted keys.
    pub keys: Vec<u32>,
    /// Their row ids.
    pub rows: Vec<u32>,
}

impl RadixSort {
    /// Sorts `keys` on `gpu` once to warm up and `reps` times timed (each from the same input,
    /// copied on the device), and reads the last result back: the benchmark's measure.
    pub fn time(&self, gpu: &Gpu, keys: &[u32], reps: usize) -> Result<Timed> {
        let stream = &gpu.stream;
        let n = keys.len();
        let mut bufs = SortBuffers::new(stream, n)?;
        let pristine = stream
            .clone_htod(keys)
            .map_err(gpu_err("copying the keys to the device"))?;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let event = || {
            gpu.ctx
                .new_event(timing)
                .map_err(gpu_err("making an event"))
        };
        let (start, end) = (event()?, event()?);
        let mut ms = Vec::with_capacity(reps);
        let mut last = None;
        for rep in 0..=reps {
            if n > 0 {
                let mut first = bufs.keys[0].slice_mut(0..n);
                stream
                    .memcpy_dtod(&pristine, &mut first)
                    .map_err(gpu_err("copying the keys"))?;
            }
            start
                .record(stream)
                .map_err(gpu_err("recording an event"))?;
            let sorted = self.sort(stream, &mut bufs, n)?;
            end.record(stream).map_err(gpu_err("recording an event"))?;
            stream.synchronize().map_err(gpu_err("sorting"))?;
            if rep > 0 {
                ms.push(
                    start
                        .elapsed_ms(&end)
                        .map_err(gpu_err("reading an event"))? as f64,
                );
            }
            last = Some(sorted);
        }
        let sorted = last.ok_or_else(|| GrouperError::Gpu("no sort ran".into()))?;
        let read = |s: &CudaSlice<u32>| -> Result<Vec<u32>> {
            let mut v = stream
                .clone_dtoh(s)
                .map_err(gpu_err("reading the sort back"))?;
            v.truncate(n);
            Ok(v)
        };
        Ok(Timed {
            ms,
            passes: sorted.passes,
            keys: read(&bufs.keys[sorted.buffer])?,
            rows: read(&bufs.vals[sorted.buffer])?,
        })
    }
}

/// From the histograms of the four digits, the exclusive offsets of every digit's buckets and
/// the digits worth a pass (those that do not hold all `n` keys in one bucket), lowest first.
fn plan_passes(hist: &[u32], n: u64) -> (Vec<u32>, Vec<usize>) {
    let mut offsets = vec![0u32; DIGITS * RADIX];
    let mut passes = Vec::new();
    for (digit, (counts, offs)) in hist
        .chunks(RADIX)
        .zip(offsets.chunks_mut(RADIX))
        .enumerate()
    {
        let mut sum = 0u32;
        for (o, &c) in offs.iter_mut().zip(counts) {
            *o = sum;
            sum = sum.wrapping_add(c);
        }
        if !counts.iter().any(|&c| c as u64 == n) {
            passes.push(digit);
        }
    }
    (offsets, passes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_with_one_bucket_are_skipped() {
        // Keys 0..1000: digits 0 and 1 vary, digits 2 and 3 are all zero.
        let mut hist = vec![0u32; DIGITS * RADIX];
        for k in 0u32..1000 {
            for p in 0..DIGITS {
                hist[p * RADIX + ((k >> (8 * p)) & 255) as usize] += 1;
            }
        }
        let (offsets, passes) = plan_passes(&hist, 1000);
        assert_eq!(passes, vec![0, 1]);
        // Digit 1's buckets: keys 0-255 (256 of them), 256-511, 512-767, 768-999.
        assert_eq!(&offsets[RADIX..RADIX + 5], &[0, 256, 512, 768, 1000]);
        assert_eq!(offsets[2 * RADIX + 1], 1000);
    }

    #[test]
    fn an_empty_sort_plans_no_pass() {
        let hist = vec![0u32; DIGITS * RADIX];
        assert!(plan_passes(&hist, 0).1.is_empty());
    }
}
