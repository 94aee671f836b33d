// L2 atomic throughput ceiling for dense-key SUM+COUNT (issue 25's 2^16-2^20 dense targets).
// Each variant: n rows (u32 key = hash(i) % G, f32 value), grid-stride, one kernel, CUDA events.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#include "probe_data.cuh"
// mode 0: read only (sum of values into a per-thread register, one store per thread)
// mode 1: f64 sum + u64 count, separate arrays (RED.F64 + RED.U64)
// mode 2: f64 sum only
// mode 3: u32 count only
// mode 4: f64 sum + u32 count in one 16-byte slot (interleaved)
// mode 5: f32 sum only
template <int MODE>
__global__ void agg(const uint32_t* __restrict__ k, const float* __restrict__ v, size_t n,
                    double* sum, unsigned long long* cnt, unsigned* cnt32, float* sum32, double* out) {
  double acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t key = k[i]; float val = v[i];
    if (MODE == 0) acc += val + key;
    if (MODE == 1) { atomicAdd(&sum[key], (double)val); atomicAdd(&cnt[key], 1ull); }
    if (MODE == 2) atomicAdd(&sum[key], (double)val);
    if (MODE == 3) atomicAdd(&cnt32[key], 1u);
    if (MODE == 4) { atomicAdd(&sum[2 * key], (double)val); atomicAdd((unsigned*)&sum[2 * key + 1], 1u); }
    if (MODE == 5) atomicAdd(&sum32[key], val);
  }
  if (MODE == 0 && acc == 1234.5) out[0] = acc;
}
template <int MODE>
float run(const uint32_t* k, const float* v, size_t n, double* sum, unsigned long long* cnt, unsigned* c32, float* s32, double* out, int blocks) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  float best = 1e9;
  for (int r = 0; r < 4; r++) {
    cudaEventRecord(a);
    agg<MODE><<<blocks, 256>>>(k, v, n, sum, cnt, c32, s32, out);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); if (r > 0 && ms < best) best = ms;
  }
  return best;
}
int main(int argc, char** argv) {
  size_t n = 1ull << (argc > 1 ? atoi(argv[1]) : 28);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int blocks = sms * 8;
  uint32_t* k; float* v; double* sum; unsigned long long* cnt; unsigned* c32; float* s32; double* out;
  cudaMalloc(&k, n * 4); cudaMalloc(&v, n * 4); cudaMalloc(&out, 8);
  size_t gmax = 1ull << 24;
  cudaMalloc(&sum, gmax * 16); cudaMalloc(&cnt, gmax * 8); cudaMalloc(&c32, gmax * 4); cudaMalloc(&s32, gmax * 4);
  printf("{\"rows\": %zu, \"blocks\": %d, \"points\": [\n", n, blocks);
  for (int lg = 10; lg <= 24; lg += 2) {
    uint32_t g = 1u << lg;
    gen<<<blocks, 256>>>(k, v, n, g); cudaDeviceSynchronize();
    cudaMemset(sum, 0, gmax * 16); cudaMemset(cnt, 0, gmax * 8);
    float t0 = run<0>(k, v, n, sum, cnt, c32, s32, out, blocks);
    float t1 = run<1>(k, v, n, sum, cnt, c32, s32, out, blocks);
    float t2 = run<2>(k, v, n, sum, cnt, c32, s32, out, blocks);
    float t3 = run<3>(k, v, n, sum, cnt, c32, s32, out, blocks);
    float t4 = run<4>(k, v, n, sum, cnt, c32, s32, out, blocks);
    float t5 = run<5>(k, v, n, sum, cnt, c32, s32, out, blocks);
    printf("%s{\"groups_log2\": %d, \"read_only_ms\": %.3f, \"f64_sum_u64_count_ms\": %.3f, \"f64_sum_ms\": %.3f, \"u32_count_ms\": %.3f, \"f64_sum_u32_count_slot_ms\": %.3f, \"f32_sum_ms\": %.3f}\n",
           lg == 10 ? "" : ",", lg, t0, t1, t2, t3, t4, t5);
    fflush(stdout);
  }
  printf("], \"error\": \"%s\"}\n", cudaGetErrorString(cudaGetLastError()));
}
