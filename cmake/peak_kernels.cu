// Kernels behind kscope::measure_peaks() and the counter passes' L2 sweep. They are NOT compiled into kscope: the
// script cmake/generate_peak_kernels.sh turns this file into PTX (for the lowest
// virtual architecture CUDA 13 supports, compute_75) and embeds the text in
// include/kscope/device/detail/peak_kernels_ptx.hpp, which the CUDA runtime loads with
// cudaLibraryLoadData and the driver JIT-compiles for whatever GPU is present. That
// keeps kscope header-only and usable from a g++-compiled translation unit.
// extern "C": the kernels are looked up by these exact names.

// Bandwidth: a grid-stride copy of 16-byte elements, four loads in flight per thread
// before the stores, so that even a grid of one wave keeps enough bytes in flight to
// saturate HBM. The caller counts bytes read + bytes written.
extern "C" __global__ void kscope_peak_copy(const uint4* __restrict__ source, uint4* __restrict__ destination,
                                            unsigned long long count) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const uint4 a = source[i];
    const uint4 b = source[i + stride];
    const uint4 c = source[i + 2 * stride];
    const uint4 d = source[i + 3 * stride];
    destination[i] = a;
    destination[i + stride] = b;
    destination[i + 2 * stride] = c;
    destination[i + 3 * stride] = d;
  }
  for (; i < count; i += stride) destination[i] = source[i];
}

// Plain fp32 compute: 16 independent FMA chains per thread (enough to hide the FMA
// latency at full occupancy), unrolled so that loop overhead takes almost no issue
// slots. Each thread does iterations * 16 FMAs = iterations * 32 flops. The sums are
// stored so the compiler cannot drop the chains; multiplier and addend are kernel
// arguments so it cannot fold them.
extern "C" __global__ void kscope_peak_fma(float* __restrict__ out, int iterations, float multiplier, float addend) {
  const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
  float acc[16];
#pragma unroll
  for (int c = 0; c < 16; ++c) acc[c] = static_cast<float>(thread + c) * 1e-3f;
#pragma unroll 4
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int c = 0; c < 16; ++c) acc[c] = fmaf(acc[c], multiplier, addend);
  }
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < 16; ++c) sum += acc[c];
  out[thread] = sum;
}

// GEMM operands: random, never zero (zeros let hardware and libraries take shortcuts
// and lower power, so a zero GEMM overstates the sustained rate). Each element gets a
// random sign and mantissa with the exponent of [0.5, 1), written as raw bits of the
// element type: 1 byte = fp8 e4m3, 2 bytes = bf16 (kind 1) or fp16 (kind 0),
// 4 bytes = fp32, 8 bytes = fp64. A 64-bit hash of (seed, index) is the generator.
__device__ __forceinline__ unsigned long long kscope_mix(unsigned long long x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

extern "C" __global__ void kscope_peak_fill(void* data, unsigned long long count, int element_bytes, int kind,
                                            unsigned long long seed) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const unsigned long long r = kscope_mix(seed + 0x9e3779b97f4a7c15ull * (i + 1));
    const unsigned long long sign = r >> 63;
    if (element_bytes == 1) {  // e4m3: bias 7, exponent 6 -> [0.5, 1)
      static_cast<unsigned char*>(data)[i] = static_cast<unsigned char>((sign << 7) | (6u << 3) | (r & 0x7u));
    } else if (element_bytes == 2 && kind == 1) {  // bf16: bias 127, exponent 126
      static_cast<unsigned short*>(data)[i] = static_cast<unsigned short>((sign << 15) | (126u << 7) | (r & 0x7fu));
    } else if (element_bytes == 2) {  // fp16: bias 15, exponent 14
      static_cast<unsigned short*>(data)[i] = static_cast<unsigned short>((sign << 15) | (14u << 10) | (r & 0x3ffu));
    } else if (element_bytes == 4) {  // fp32: bias 127, exponent 126
      static_cast<unsigned int*>(data)[i] = static_cast<unsigned int>((sign << 31) | (126u << 23) | (r & 0x7fffffu));
    } else {  // fp64: bias 1023, exponent 1022
      static_cast<unsigned long long*>(data)[i] = (sign << 63) | (1022ull << 52) | (r & 0xfffffffffffffull);
    }
  }
}

// Counter passes (counters/collect.hpp): reads a buffer twice the L2's size and writes
// nothing, so that afterwards the L2 holds clean lines only. Dirty lines left by earlier
// work, or written by the profiler itself when a pass starts, are then written back
// during this kernel rather than counted as DRAM writes of the kernel measured next.
// The caller passes a null `sink`: the kernel never stores, and the loads stay because
// the compiler cannot know that.
extern "C" __global__ void kscope_l2_sweep(const uint4* __restrict__ source, unsigned long long count,
                                           unsigned* sink) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned mixed = 0;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const uint4 v = source[i];
    mixed ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (sink != nullptr) sink[blockIdx.x * blockDim.x + threadIdx.x] = mixed;
}
