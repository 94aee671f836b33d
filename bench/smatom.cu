// Shared-memory atomic ceilings for SUM(f64)+COUNT per block table (perfect_shared-like):
// 2^28 rows (u32 key = hash(i) % G, f32 value), one table of G slots per block, flushed once.
// nvcc -O3 -arch=sm_90 -o smatom bench/smatom.cu && ./smatom 28
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#include "probe_data.cuh"
__device__ __forceinline__ void cas_add(double* p, double v) {
  unsigned long long* a = (unsigned long long*)p; unsigned long long old = *a, assumed;
  do { assumed = old; old = atomicCAS(a, assumed, __double_as_longlong(__longlong_as_double(assumed) + v)); } while (assumed != old);
}
// MODE 0: f64 atomicAdd (whatever the compiler emits) + u32 count
// MODE 1: explicit CAS loop f64 + u32 count
// MODE 2: f32 atomicAdd + u32 count
// MODE 3: u32 count only
// MODE 4: u64 integer add (fixed-point stand-in) + u32 count
// MODE 5: f64 atomicAdd only
template <int MODE>
__global__ void agg(const uint32_t* __restrict__ k, const float* __restrict__ v, size_t n, uint32_t g, double* out) {
  extern __shared__ unsigned char smem[];
  double* s = (double*)smem; unsigned* c = (unsigned*)(s + g);
  for (uint32_t i = threadIdx.x; i < g; i += blockDim.x) { s[i] = 0; c[i] = 0; }
  __syncthreads();
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t key = k[i]; float val = v[i];
    if (MODE == 0) { atomicAdd(&s[key], (double)val); atomicAdd(&c[key], 1u); }
    if (MODE == 1) { cas_add(&s[key], (double)val); atomicAdd(&c[key], 1u); }
    if (MODE == 2) { atomicAdd((float*)&s[key], val); atomicAdd(&c[key], 1u); }
    if (MODE == 3) { atomicAdd(&c[key], 1u); }
    if (MODE == 4) { atomicAdd((unsigned long long*)&s[key], (unsigned long long)(val * 4.0f)); atomicAdd(&c[key], 1u); }
    if (MODE == 5) { atomicAdd(&s[key], (double)val); }
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < g; i += blockDim.x) if (c[i] == 0xFFFFFFFFu || s[i] == -1.0) out[i] = s[i] + c[i];
}
template <int MODE>
float run(const uint32_t* k, const float* v, size_t n, uint32_t g, double* out, int threads) {
  size_t sh = (size_t)g * 12;
  cudaFuncSetAttribute(agg<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int per = 0; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, agg<MODE>, threads, sh);
  int blocks = sms * (per > 0 ? per : 1);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  float best = 1e9;
  for (int r = 0; r < 4; r++) {
    cudaEventRecord(a);
    agg<MODE><<<blocks, threads, sh>>>(k, v, n, g, out);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); if (r > 0 && ms < best) best = ms;
  }
  return best;
}
int main(int argc, char** argv) {
  size_t n = 1ull << (argc > 1 ? atoi(argv[1]) : 28);
  uint32_t* k; float* v; double* out;
  cudaMalloc(&k, n * 4); cudaMalloc(&v, n * 4); cudaMalloc(&out, 8 << 14);
  printf("{\"rows\": %zu, \"points\": [\n", n);
  bool first = true;
  for (int lg = 4; lg <= 14; lg += 2) {
    uint32_t g = 1u << lg;
    gen<<<1024, 256>>>(k, v, n, g); cudaDeviceSynchronize();
    for (int threads : {256, 1024}) {
      float t0 = run<0>(k, v, n, g, out, threads), t1 = run<1>(k, v, n, g, out, threads), t2 = run<2>(k, v, n, g, out, threads);
      float t3 = run<3>(k, v, n, g, out, threads), t4 = run<4>(k, v, n, g, out, threads), t5 = run<5>(k, v, n, g, out, threads);
      printf("%s{\"groups_log2\": %d, \"threads\": %d, \"f64_atomicAdd_u32_count_ms\": %.3f, \"f64_cas_loop_u32_count_ms\": %.3f, \"f32_add_u32_count_ms\": %.3f, \"u32_count_ms\": %.3f, \"u64_int_add_u32_count_ms\": %.3f, \"f64_atomicAdd_only_ms\": %.3f}\n",
             first ? "" : ",", lg, threads, t0, t1, t2, t3, t4, t5);
      first = false; fflush(stdout);
    }
  }
  printf("], \"error\": \"%s\"}\n", cudaGetErrorString(cudaGetLastError()));
}
