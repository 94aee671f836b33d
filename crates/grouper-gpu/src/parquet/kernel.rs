//! The decode kernel: a page image's program ([`super::segments`]) run on the GPU, one thread
//! block per segment and one thread per value, writing the chunk image the aggregation kernel
//! then reads. Its source is fixed (not generated per query): it compiles once per device and
//! driver and comes from the kernel cache after that.
//!
//! A dictionary index past its dictionary (a corrupt page the CPU could not see: bit-packed
//! indices are only read here) sets a flag and decodes as entry 0; the caller checks the flag
//! and fails the chunk, so the answer is an error, never a read outside the dictionary.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use crate::compile::compile;
use crate::device::{gpu_err, Gpu};
use grouper_core::error::Result;

/// Threads per block: a segment holds at most 2048 values, 8 per thread.
const THREADS: u32 = 256;

/// Most blocks launched (they loop over the segments beyond).
const MAX_BLOCKS: u64 = 1 << 16;

const SOURCE: &str = r#"
struct Seg {
    unsigned long long src, dst;
    unsigned int count, dict, dict_len, stride;
    unsigned char kind, bits, sw, dw, sign, be, pad0, pad1;
};

typedef unsigned long long u64;
typedef unsigned __int128 u128;

__device__ __forceinline__ u128 load_le(const unsigned char* p, int w) {
    u128 v = 0;
    for (int i = 0; i < w; i++) v |= ((u128)p[i]) << (8 * i);
    return v;
}

__device__ __forceinline__ u128 load_be(const unsigned char* p, int w) {
    u128 v = 0;
    for (int i = 0; i < w; i++) v = (v << 8) | (u128)p[i];
    return v;
}

__device__ __forceinline__ u128 extend(u128 v, int w, int sign) {
    int bits = 8 * w;
    if (sign && bits < 128 && ((v >> (bits - 1)) & 1)) v |= (~(u128)0) << bits;
    return v;
}

/* Stores the low `w` bytes of `v` at `p` (aligned to `w`: regions are 256-aligned). */
__device__ __forceinline__ void store(unsigned char* p, u128 v, int w) {
    switch (w) {
        case 1: *p = (unsigned char)v; break;
        case 2: *(unsigned short*)p = (unsigned short)v; break;
        case 4: *(unsigned int*)p = (unsigned int)v; break;
        case 8: *(u64*)p = (u64)v; break;
        default: ((u64*)p)[0] = (u64)v; ((u64*)p)[1] = (u64)(v >> 64); break;
    }
}

/* A dictionary entry of `w` bytes (entries are aligned to their width). */
__device__ __forceinline__ u128 entry(const unsigned char* d, u64 idx, int w) {
    const unsigned char* p = d + idx * w;
    switch (w) {
        case 1: return *p;
        case 2: return *(const unsigned short*)p;
        case 4: return *(const unsigned int*)p;
        case 8: return *(const u64*)p;
        default: return ((u128)((const u64*)p)[1] << 64) | ((const u64*)p)[0];
    }
}

extern "C" __global__ void decode_pages(u64 image, u64 segments, u64 payload_at, u64 out,
                                        u64 flags) {
    const Seg* segs = (const Seg*)image;
    const unsigned char* pay = (const unsigned char*)(image + payload_at);
    unsigned char* o = (unsigned char*)out;
    for (u64 k = blockIdx.x; k < segments; k += gridDim.x) {
        const Seg s = segs[k];
        const int dw = s.dw, sw = s.sw;
        for (unsigned int j = threadIdx.x; j < s.count; j += blockDim.x) {
            switch (s.kind) {
            case 0:
                o[s.dst + j] = pay[s.src + j];
                break;
            case 1: {
                const unsigned char* p = pay + s.src + (u64)j * sw;
                u128 v;
                if (!s.be && sw == dw && (((u64)p) & (sw - 1)) == 0) v = entry(p, 0, sw);
                else v = extend(s.be ? load_be(p, sw) : load_le(p, sw), sw, s.sign);
                store(o + s.dst + (u64)j * dw, v, dw);
                break;
            }
            case 2:
            case 3: {
                u64 idx = s.src;
                if (s.kind == 2) {
                    u64 bit = s.src + (u64)j * s.bits;
                    const unsigned char* p = pay + (bit >> 3);
                    int shift = (int)(bit & 7);
                    int n = (shift + s.bits + 7) >> 3;
                    u64 w = 0;
                    for (int i = 0; i < n; i++) w |= ((u64)p[i]) << (8 * i);
                    idx = (w >> shift) & ((1ull << s.bits) - 1);
                }
                if (idx >= s.dict_len) {
                    atomicOr((u64*)flags, 1ull);
                    idx = 0;
                }
                store(o + s.dst + (u64)j * dw, entry(pay + s.dict, idx, dw), dw);
                break;
            }
            default: {
                u128 v = 0;
                for (int b = 0; b < sw; b++)
                    v |= ((u128)pay[s.src + (u64)b * s.stride + j]) << (8 * b);
                store(o + s.dst + (u64)j * dw, extend(v, sw, s.sign), dw);
                break;
            }
            }
        }
    }
}
"#;

/// The decode kernel, loaded.
pub struct Decoder {
    func: CudaFunction,
    /// Milliseconds its compile (or load from the cache) took.
    pub compile_ms: f64,
}

impl Decoder {
    /// Compiles (or fetches) the decode kernel for `gpu`.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let compiled = compile(gpu, SOURCE)?;
        Ok(Self {
            func: compiled.function("decode_pages")?,
            compile_ms: compiled.compile_ms,
        })
    }

    /// Enqueues the decode of the page image at device address `image` (`segments` segments,
    /// its payload at byte `payload_at`) into the chunk image at `out`; an index past its
    /// dictionary sets `flags[0]`.
    ///
    /// # Safety
    /// `image` must hold the whole page image [`super::PageImage::write`] wrote, whose segments
    /// were checked against a decoded image of at most the bytes `out` holds; both must stay
    /// allocated until the stream has run the kernel.
    pub unsafe fn launch(
        &self,
        stream: &Arc<CudaStream>,
        image: u64,
        segments: usize,
        payload_at: usize,
        out: u64,
        flags: &mut CudaSlice<u64>,
    ) -> Result<()> {
        if segments == 0 {
            return Ok(());
        }
        let n = segments as u64;
        let at = payload_at as u64;
        let cfg = LaunchConfig {
            grid_dim: (n.min(MAX_BLOCKS) as u32, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(&self.func);
        b.arg(&image).arg(&n).arg(&at).arg(&out).arg(flags);
        // SAFETY: decode_pages(u64, u64, u64, u64, u64*) reads the image's `n` segments and the
        // payload they point into, and writes inside the decoded image: the segments were
        // checked on the CPU (PageImage::push) against both, as the caller guarantees.
        unsafe { b.launch(cfg) }.map_err(gpu_err("launching decode_pages"))?;
        Ok(())
    }
}
