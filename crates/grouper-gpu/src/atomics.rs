//! The sort-based atomics paper's microbenchmark (its §2.2, Fig. 3): how many additions a
//! second the GPU makes into one of `targets` counters with an atomic add, against a plain
//! read-add-write of the same counter (which loses updates under contention: the paper's
//! measure of what the atomic itself costs), in device memory and in a block's shared memory.
//! One target is every thread on one address; addition `i` goes to counter `i mod targets`, so
//! a warp's threads spread over consecutive counters. Nothing is read but the counters:
//! the rate is the atomics', not the input's.

use cudarc::driver::sys::{CUevent_flags, CUfunction_attribute};
use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::compile::compile;
use crate::device::{gpu_err, Gpu};
use grouper_core::error::{GrouperError, Result};

/// The kernels: `<memory>_<op>(counters, additions, targets)`.
pub(crate) const SOURCE: &str = r#"
typedef unsigned long long u64;
template <bool A> __device__ __forceinline__ void add_one(unsigned* p) {
  if (A) atomicAdd(p, 1u); else { volatile unsigned* q = p; *q = *q + 1u; }
}
// The counter of the addition `stride` further on: `(j + stride) mod m` kept by one add and
// one compare, not a 64-bit modulo an addition, which cost more instructions than the add
// itself and made every shared-memory way equally fast (bound by the index, not the add).
__device__ __forceinline__ unsigned next(unsigned j, unsigned step, unsigned m) {
  j += step;
  return j >= m ? j - m : j;
}
template <bool A> __device__ __forceinline__ void global_adds(unsigned* t, const u64 n, const unsigned m) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  const unsigned step = (unsigned)(stride % m);
  u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  for (unsigned j = (unsigned)(i % m); i < n; i += stride) { add_one<A>(t + j); j = next(j, step, m); }
}
// Each block adds into its own copy of the counters in shared memory, then into the device's.
template <bool A> __device__ __forceinline__ void shared_adds(unsigned* t, const u64 n, const unsigned m) {
  extern __shared__ unsigned s[];
  for (unsigned j = threadIdx.x; j < m; j += blockDim.x) s[j] = 0u;
  __syncthreads();
  const u64 stride = (u64)gridDim.x * blockDim.x;
  const unsigned step = (unsigned)(stride % m);
  u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  for (unsigned j = (unsigned)(i % m); i < n; i += stride) { add_one<A>(s + j); j = next(j, step, m); }
  __syncthreads();
  for (unsigned j = threadIdx.x; j < m; j += blockDim.x) atomicAdd(t + j, s[j]);
}
extern "C" __global__ void global_atomic(unsigned* t, const u64 n, const unsigned m) { global_adds<true>(t, n, m); }
extern "C" __global__ void global_plain(unsigned* t, const u64 n, const unsigned m) { global_adds<false>(t, n, m); }
extern "C" __global__ void shared_atomic(unsigned* t, const u64 n, const unsigned m) { shared_adds<true>(t, n, m); }
extern "C" __global__ void shared_plain(unsigned* t, const u64 n, const unsigned m) { shared_adds<false>(t, n, m); }
"#;

/// One measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct AtomicsPoint {
    /// "global" or "shared".
    pub memory: &'static str,
    /// "atomic" or "plain".
    pub op: &'static str,
    /// Counters the additions spread over.
    pub targets: u32,
    /// Fastest of the runs, milliseconds (CUDA events).
    pub ms: f64,
    /// Additions a second.
    pub adds_per_s: f64,
    /// Whether the counters summed to the additions (atomics must; plain adds lose updates
    /// wherever threads collide).
    pub exact: bool,
}

/// `additions` additions over each of `targets` counters, each way, on `threads`-thread blocks
/// filling every SM: the fastest of `reps` runs each. Shared memory takes the targets that fit
/// a block's (a u32 each); the device's memory every one.
pub fn atomics(
    gpu: &Gpu,
    additions: u64,
    targets: &[u32],
    threads: u32,
    reps: usize,
) -> Result<Vec<AtomicsPoint>> {
    let compiled = compile(gpu, SOURCE)?;
    let stream = &gpu.stream;
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let event = || {
        gpu.ctx
            .new_event(timing)
            .map_err(gpu_err("creating an event"))
    };
    let (start, end) = (event()?, event()?);
    let shared_room = u64::from(gpu.info.shared_per_block);
    let blocks = gpu.info.sms * (gpu.info.threads_per_sm / threads.max(32)).max(1);
    let mut out = Vec::new();
    for &m in targets.iter().filter(|&&m| m > 0) {
        let mut counters = stream
            .alloc_zeros::<u32>(m as usize)
            .map_err(gpu_err("allocating the counters"))?;
        for (memory, op) in [
            ("global", "atomic"),
            ("global", "plain"),
            ("shared", "atomic"),
            ("shared", "plain"),
        ] {
            let shared = if memory == "shared" {
                4 * u64::from(m)
            } else {
                0
            };
            if shared > shared_room {
                continue;
            }
            let f = compiled.function(&format!("{memory}_{op}"))?;
            if shared > 48 * 1024 {
                f.set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )
                .map_err(gpu_err("raising the shared memory limit"))?;
            }
            // Fewer resident blocks where each takes much shared memory.
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (threads, 1, 1),
                shared_mem_bytes: shared as u32,
            };
            let mut best = f64::MAX;
            let mut exact = true;
            for _ in 0..reps.max(1) + 1 {
                stream
                    .memset_zeros(&mut counters)
                    .map_err(gpu_err("clearing the counters"))?;
                start
                    .record(stream)
                    .map_err(gpu_err("recording an event"))?;
                let mut b = stream.launch_builder(&f);
                b.arg(&mut counters).arg(&additions).arg(&m);
                // SAFETY: the kernel (u32*, u64, u32) adds into counters[0..m), which the
                // allocation holds, and takes `shared` bytes of shared memory: 4 m, within the
                // block's room (checked above, the limit raised past 48 KiB).
                unsafe { b.launch(cfg) }
                    .map_err(gpu_err("launching the atomics microbenchmark"))?;
                end.record(stream).map_err(gpu_err("recording an event"))?;
                stream
                    .synchronize()
                    .map_err(gpu_err("running the atomics microbenchmark"))?;
                best = best.min(f64::from(
                    start.elapsed_ms(&end).map_err(gpu_err("timing"))?,
                ));
                let sum: u64 = stream
                    .clone_dtoh(&counters)
                    .map_err(gpu_err("reading the counters"))?
                    .iter()
                    .map(|&c| u64::from(c))
                    .sum();
                exact &= sum == additions;
            }
            if op == "atomic" && !exact {
                return Err(GrouperError::Gpu(format!(
                    "{memory} atomics over {m} counters lost updates"
                )));
            }
            out.push(AtomicsPoint {
                memory,
                op,
                targets: m,
                ms: best,
                adds_per_s: additions as f64 / (best * 1e-3),
                exact,
            });
        }
    }
    Ok(out)
}
