//! The decode kernel: a page image's program ([`super::segments`]) run on the GPU, one thread
//! block per segment and one thread per value, writing the chunk image the aggregation kernel
//! then reads. Its source is fixed (not generated per query): it compiles once per device and
//! driver and comes from the kernel cache after that.
//!
//! A dictionary index past its dictionary (a corrupt page the CPU could not see: bit-packed
//! indices are only read here) sets flag 1 and decodes as entry 0; a run header or run past its
//! page's end sets flag 2 and stops that page (so does a DELTA_BINARY_PACKED block header or
//! miniblock past its page's end). The caller checks the flags and fails the query,
//! so the answer is an error, never a read outside the page or the dictionary.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use crate::compile::compile;
use crate::device::{gpu_err, DeviceInfo, Gpu};
use grouper_core::error::Result;

/// Threads per block: a segment holds at most 2048 values, 8 per thread (a page's hybrid
/// stream, more, round by round).
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

/* Reads bit-packed index `j` of width `bits` starting at payload bit `bit0`. */
__device__ __forceinline__ u64 unpack(const unsigned char* pay, u64 bit0, u64 j, int bits) {
    u64 bit = bit0 + j * bits;
    const unsigned char* p = pay + (bit >> 3);
    int shift = (int)(bit & 7);
    int n = (shift + bits + 7) >> 3;
    u64 w = 0;
    for (int i = 0; i < n; i++) w |= ((u64)p[i]) << (8 * i);
    return (w >> shift) & ((1ull << bits) - 1);
}

/* Dictionary entry `idx` widened; an index past the dictionary raises flag 1 and reads 0. */
__device__ __forceinline__ u128 lookup(const Seg& s, const unsigned char* pay, u64 idx, u64 flags) {
    if (idx >= s.dict_len) {
        atomicOr((u64*)flags, 1ull);
        idx = 0;
    }
    return extend(entry(pay + s.dict, idx, s.sw), s.sw, s.sign);
}

#define RUNS 1024

/* A page's RLE/bit-packed hybrid stream of dictionary indices, by one block: thread 0 reads
   up to RUNS run headers into shared memory, then every thread expands values of those runs
   (each finding its run by binary search), round after round. A header or run past the
   stream's end raises flag 2 and stops the segment. */
__device__ void hybrid(const Seg& s, const unsigned char* pay, unsigned char* o, u64 flags) {
    __shared__ unsigned int start[RUNS + 1];
    __shared__ u64 src[RUNS];
    __shared__ unsigned char packed[RUNS];
    __shared__ unsigned int nruns, made;
    __shared__ int bad;
    u64 pos = s.src;
    const u64 end = s.src + s.stride;
    const int bits = s.bits;
    unsigned int done = 0;
    while (done < s.count) {
        if (threadIdx.x == 0) {
            unsigned int n = 0, v = done;
            int broken = 0;
            while (n < RUNS && v < s.count) {
                u64 h = 0;
                int shift = 0;
                unsigned char b;
                do {
                    if (pos >= end || shift > 63) { broken = 1; break; }
                    b = pay[pos++];
                    h |= (u64)(b & 0x7f) << shift;
                    shift += 7;
                } while (b & 0x80);
                if (broken) break;
                u64 left = s.count - v;
                start[n] = v - done;
                if (h & 1) {
                    u64 groups = h >> 1;
                    u64 take = groups * 8 < left ? groups * 8 : left;
                    if (take == 0 || pos + ((take * bits + 7) >> 3) > end) { broken = 1; break; }
                    packed[n] = 1;
                    src[n] = pos * 8;
                    pos += groups * bits;
                    v += (unsigned int)take;
                } else {
                    u64 cnt = h >> 1;
                    int w = (bits + 7) >> 3;
                    if (cnt == 0 || pos + w > end) { broken = 1; break; }
                    u64 val = 0;
                    for (int i = 0; i < w; i++) val |= ((u64)pay[pos + i]) << (8 * i);
                    pos += w;
                    packed[n] = 0;
                    src[n] = val;
                    v += (unsigned int)(cnt < left ? cnt : left);
                }
                n++;
            }
            start[n] = v - done;
            nruns = n;
            made = v - done;
            bad = broken || n == 0;
        }
        __syncthreads();
        if (bad) {
            if (threadIdx.x == 0) atomicOr((u64*)flags, 2ull);
            return;
        }
        const unsigned int n = nruns, total = made;
        for (unsigned int j = threadIdx.x; j < total; j += blockDim.x) {
            int lo = 0, hi = (int)n - 1;
            while (lo < hi) {
                int mid = (lo + hi + 1) >> 1;
                if (start[mid] <= j) lo = mid; else hi = mid - 1;
            }
            u64 idx = packed[lo] ? unpack(pay, src[lo], j - start[lo], bits) : src[lo];
            store(o + s.dst + (u64)(done + j) * s.dw, lookup(s, pay, idx, flags), s.dw);
        }
        done += total;
        __syncthreads();
    }
}

#define MINIS 64

/* Bit `bit`'s `w`-bit field (w <= 64) of the payload. */
__device__ __forceinline__ u64 field(const unsigned char* pay, u64 bit, int w) {
    if (w == 0) return 0;
    const unsigned char* p = pay + (bit >> 3);
    int shift = (int)(bit & 7);
    int n = (shift + w + 7) >> 3;
    u128 v = 0;
    for (int i = 0; i < n; i++) v |= ((u128)p[i]) << (8 * i);
    u64 x = (u64)(v >> shift);
    return w == 64 ? x : (x & ((1ull << w) - 1));
}

/* An unsigned LEB128 varint at *pos (before `end`); sets *bad past the end or over 64 bits. */
__device__ __forceinline__ u64 uleb(const unsigned char* pay, u64* pos, u64 end, int* bad) {
    u64 v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= end) { *bad = 1; return 0; }
        unsigned char b = pay[(*pos)++];
        v |= (u64)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    *bad = 1;
    return 0;
}

__device__ __forceinline__ u64 unzigzag(u64 v) { return (v >> 1) ^ (0ull - (v & 1)); }

/* The `sw`-byte value `v` (its low bytes) widened to the decoded width. */
__device__ __forceinline__ u128 narrow(u64 v, int sw, int sign) {
    u128 x = sw == 8 ? (u128)v : (u128)(v & 0xffffffffull);
    return extend(x, sw, sign);
}

/* The stretch of a DELTA page's table of valid rows (`n` pairs of first value, first row) that
   holds value `j`: the last whose first value is at most `j`. */
__device__ unsigned int delta_stretch(const unsigned int* t, unsigned int n, unsigned int j) {
    unsigned int lo = 0, hi = n;
    while (hi - lo > 1) {
        unsigned int mid = (lo + hi) / 2;
        if (t[2 * mid] <= j) lo = mid; else hi = mid;
    }
    return lo;
}

/* The row (from the segment's first) of value `j`: `j` itself in a page without NULLs, else by
   the table `t` of valid rows, from stretch `*k` (at or before j's) moved forward. */
__device__ __forceinline__ u64 delta_row(const unsigned int* t, unsigned int n, unsigned int j,
                                         unsigned int* k) {
    if (n == 0) return j;
    while (*k + 1 < n && t[2 * (*k + 1)] <= j) (*k)++;
    return (u64)t[2 * *k + 1] + (j - t[2 * *k]);
}

/* A page's DELTA_BINARY_PACKED stream, by one block: thread 0 reads block headers for up to
   MINIS miniblocks into shared memory; every thread unpacks a stretch of those deltas and adds
   them up; a scan over the threads' sums places each stretch; the tile's total carries on. A
   page with NULLs places value j on its row by the page's table of valid rows (`dict`).
   A header, width or miniblock past the stream's end raises flag 2 and stops the segment. */
__device__ void delta(const Seg& s, const unsigned char* pay, unsigned char* o, u64 flags) {
    __shared__ u64 mbit[MINIS], mmin[MINIS];
    __shared__ unsigned char mw[MINIS], widths[MINIS];
    __shared__ u64 sums[256];
    __shared__ u64 carry, pos, bmin;
    __shared__ unsigned int per, minis, next, nmb, made;
    __shared__ int bad;
    const u64 end = s.src + s.stride;
    const int dw = s.dw, sw = s.sw, sign = s.sign;
    const unsigned int* rows = (const unsigned int*)(pay + s.dict);
    if (threadIdx.x == 0) {
        int b = 0;
        u64 p = s.src;
        u64 block = uleb(pay, &p, end, &b);
        u64 mb = uleb(pay, &p, end, &b);
        u64 total = uleb(pay, &p, end, &b);
        u64 first = unzigzag(uleb(pay, &p, end, &b));
        if (!b && (block == 0 || block % 128 || mb == 0 || mb > MINIS || block % mb
                   || (block / mb) % 32 || total < s.count)) b = 1;
        bad = b;
        if (!b) {
            per = (unsigned int)(block / mb);
            minis = (unsigned int)mb;
            next = (unsigned int)mb;
            pos = p;
            carry = first;
            unsigned int k0 = 0;
            if (s.count > 0)
                store(o + s.dst + delta_row(rows, s.dict_len, 0, &k0) * dw, narrow(first, sw, sign), dw);
        }
    }
    __syncthreads();
    if (bad) {
        if (threadIdx.x == 0) atomicOr((u64*)flags, 2ull);
        return;
    }
    unsigned int done = 1;
    while (done < s.count) {
        if (threadIdx.x == 0) {
            unsigned int n = 0, got = 0;
            int b = 0;
            u64 p = pos;
            while (n < MINIS && done + got < s.count) {
                if (next == minis) {
                    bmin = unzigzag(uleb(pay, &p, end, &b));
                    if (b || p + minis > end) { b = 1; break; }
                    for (unsigned int i = 0; i < minis; i++) widths[i] = pay[p + i];
                    p += minis;
                    next = 0;
                }
                int w = widths[next];
                unsigned int take = per < s.count - done - got ? per : s.count - done - got;
                if (w > 64 || p + (((u64)take * w + 7) >> 3) > end) { b = 1; break; }
                mbit[n] = p * 8;
                mw[n] = (unsigned char)w;
                mmin[n] = bmin;
                p += (u64)per * w / 8;
                next++;
                got += take;
                n++;
            }
            pos = p;
            nmb = n;
            made = got;
            bad = b;
        }
        __syncthreads();
        if (bad) {
            if (threadIdx.x == 0) atomicOr((u64*)flags, 2ull);
            return;
        }
        const unsigned int total = made, step = (total + blockDim.x - 1) / blockDim.x;
        const unsigned int lo = threadIdx.x * step < total ? threadIdx.x * step : total;
        const unsigned int hi = lo + step < total ? lo + step : total;
        u64 local = 0;
        for (unsigned int j = lo; j < hi; j++) {
            unsigned int m = j / per;
            local += mmin[m] + field(pay, mbit[m] + (u64)(j - m * per) * mw[m], mw[m]);
        }
        sums[threadIdx.x] = local;
        __syncthreads();
        for (unsigned int off = 1; off < blockDim.x; off <<= 1) {
            u64 t = threadIdx.x >= off ? sums[threadIdx.x - off] : 0;
            __syncthreads();
            sums[threadIdx.x] += t;
            __syncthreads();
        }
        u64 v = carry + sums[threadIdx.x] - local;
        unsigned int k = s.dict_len && lo < hi ? delta_stretch(rows, s.dict_len, done + lo) : 0;
        for (unsigned int j = lo; j < hi; j++) {
            unsigned int m = j / per;
            v += mmin[m] + field(pay, mbit[m] + (u64)(j - m * per) * mw[m], mw[m]);
            u64 row = delta_row(rows, s.dict_len, done + j, &k);
            store(o + s.dst + row * dw, narrow(v, sw, sign), dw);
        }
        __syncthreads();
        if (threadIdx.x == 0) carry += sums[blockDim.x - 1];
        done += total;
        __syncthreads();
    }
}

extern "C" __global__ void decode_pages(u64 program, u64 segments, u64 payload, u64 out,
                                        u64 flags) {
    const Seg* segs = (const Seg*)program;
    const unsigned char* pay = (const unsigned char*)payload;
    unsigned char* o = (unsigned char*)out;
    for (u64 k = blockIdx.x; k < segments; k += gridDim.x) {
        const Seg s = segs[k];
        const int dw = s.dw, sw = s.sw;
        if (s.kind == 5) {
            hybrid(s, pay, o, flags);
            continue;
        }
        if (s.kind == 6) {
            delta(s, pay, o, flags);
            continue;
        }
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
                store(o + s.dst + (u64)j * dw, lookup(s, pay, unpack(pay, s.src, j, s.bits), flags), dw);
                break;
            case 3:
                store(o + s.dst + (u64)j * dw, lookup(s, pay, s.src, flags), dw);
                break;
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
    /// Starts compiling (or fetching) the decode kernel for `gpu` on a thread of its own, so
    /// that NVRTC works on it while the aggregation kernel compiles; [`Decoder::new`] then
    /// finds it in the memory cache (or waits for it).
    pub fn warm(gpu: &Arc<Gpu>) {
        let gpu = Arc::clone(gpu);
        std::thread::spawn(move || {
            let _ = compile(&gpu, SOURCE);
        });
    }

    /// Starts compiling the decode kernel for the device `info` describes into the disk cache
    /// on a thread of its own, before the GPU has started ([`crate::compile::prebuild`]): on a
    /// machine that has not compiled it (~1 s of NVRTC on the H200 host), the compile runs
    /// while the context is made instead of after.
    pub fn prebuild(info: DeviceInfo) {
        std::thread::spawn(move || {
            let _ = crate::compile::prebuild(&info, SOURCE);
        });
    }

    /// Compiles (or fetches) the decode kernel for `gpu`.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let compiled = compile(gpu, SOURCE)?;
        Ok(Self {
            func: compiled.function("decode_pages")?,
            compile_ms: compiled.compile_ms,
        })
    }

    /// Enqueues the decode of a page image on the device — its program of `segments` segments
    /// at `program`, the payload they read at `payload` — into the chunk image at `out`; an
    /// index past its dictionary sets `flags[0]`. (A [`super::PageImage::write`] image has its
    /// program at its start and its payload at [`super::PageImage::payload_offset`]; a
    /// streamed chunk, its program after the payload.)
    ///
    /// # Safety
    /// `program` and `payload` must hold a page image's program and payload, whose segments
    /// were checked against that payload and a decoded image of at most the bytes `out` holds;
    /// all must stay allocated until the stream has run the kernel.
    pub unsafe fn launch(
        &self,
        stream: &Arc<CudaStream>,
        program: u64,
        segments: usize,
        payload: u64,
        out: u64,
        flags: &mut CudaSlice<u64>,
    ) -> Result<()> {
        if segments == 0 {
            return Ok(());
        }
        let n = segments as u64;
        let cfg = LaunchConfig {
            grid_dim: (n.min(MAX_BLOCKS) as u32, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(&self.func);
        b.arg(&program).arg(&n).arg(&payload).arg(&out).arg(flags);
        // SAFETY: decode_pages(u64, u64, u64, u64, u64*) reads the image's `n` segments and the
        // payload they point into, and writes inside the decoded image: the segments were
        // checked on the CPU (PageImage::push) against both, as the caller guarantees.
        unsafe { b.launch(cfg) }.map_err(gpu_err("launching decode_pages"))?;
        Ok(())
    }
}
