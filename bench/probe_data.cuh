// The input every atomics probe here (l2atom.cu, smatom.cu, dsmem.cu) aggregates, so their
// figures compare: n rows of (u32 key = hash(i) % g, f32 value).
#pragma once
#include <cstdint>
__global__ void gen(uint32_t* k, float* v, size_t n, uint32_t g) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u; x ^= x >> 15; x *= 2246822519u; x ^= x >> 13;
    k[i] = x % g; v[i] = (float)((x >> 8) % 1000) * 0.25f;
  }
}
