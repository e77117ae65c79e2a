// Kernels whose work is known exactly, shared by the GPU test cases (one definition each;
// a test that needs a variant defines its own and says why).
#pragma once

#include <cstddef>

namespace kscope_test {

// Spins until %globaltimer (ns) has advanced by `ns`: a kernel of known duration,
// independent of the SM clock.
__global__ inline void spin_for_ns(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// dst[i] = src[i], grid-stride: reads and writes 4n bytes.
__global__ inline void copy_floats(const float* __restrict__ src, float* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}

// One thread per output, row-major; __fmaf_rn makes the one FFMA per (i, j, k) explicit,
// whatever nvcc's contraction choices: exactly n^3 FFMA, 2 n^3 FP32 FLOPs.
__global__ inline void naive_sgemm(const float* a, const float* b, float* c, int n) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc = __fmaf_rn(a[row * n + k], b[k * n + col], acc);
  c[row * n + col] = acc;
}

}  // namespace kscope_test
