// roofline.hpp with real kernels (run by the lead on the H200): a ~1 GiB saxpy is
// memory-bound, a large bf16 GEMM (cuBLAS, dlopen'ed) compute-bound, a one-thread
// kernel latency-bound. Peaks are the device's theoretical ones (device.hpp). Times are
// medians of CUDA-event-timed runs after warm-up; the numbers are printed. cuBLAS that does
// not load fails the GEMM case on any GPU (tests/gpu/expectations.hpp).
#include <kscope/device/device.hpp>
#include <kscope/device/detail/cublas_loader.hpp>
#include <kscope/core/roofline.hpp>

#include <doctest/doctest.h>

#include "expectations.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

__global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = a * x[i] + y[i];
  }
}

__global__ void one_thread(float* out) { out[0] = out[0] * 0.5f + 1.0f; }

// Random bf16 bits in [0.5, 1) with random sign: never zero.
__global__ void fill_bf16(std::uint16_t* data, std::size_t n, std::uint32_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    data[i] = static_cast<std::uint16_t>(((h >> 31) << 15) | (126u << 7) | (h & 0x7fu));
  }
}

// Median seconds of `runs` event-timed calls of `body` on the legacy stream, after warm-up.
template <class Body>
double median_seconds(Body body, int warmup, int runs) {
  for (int i = 0; i < warmup; ++i) body();
  cudaEvent_t start, stop;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    REQUIRE(cudaEventRecord(start) == cudaSuccess);
    body();
    REQUIRE(cudaEventRecord(stop) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
    float ms = 0;
    REQUIRE(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
    seconds.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

void report(const char* what, const kscope::placement& p) {
  // std::string: doctest prints a bare const char* as a pointer.
  MESSAGE(std::string(what) << ": " << p.flops_per_s / 1e12 << " TFLOP/s, " << p.bytes_per_s / 1e12 << " TB/s, intensity "
               << p.intensity << " FLOP/B, " << 100 * p.fraction_of_roof << " % of roof "
               << p.roof_flops_per_s / 1e12 << " TFLOP/s -> " << std::string(kscope::to_string(p.limiter)) << " ("
               << std::string(kscope::hint(p)) << ")");
}

}  // namespace

TEST_CASE("saxpy over 1 GiB vectors is memory-bound") {
  const kscope::device_info gpu = kscope::query_device(0);
  REQUIRE(gpu.present);
  const double peak_bytes = kscope::theoretical_bytes_per_s(gpu);
  const double peak_flops = kscope::theoretical_flops_per_s(gpu, kscope::data_type::fp32, kscope::core_kind::plain);
  REQUIRE(std::isfinite(peak_bytes));
  REQUIRE(std::isfinite(peak_flops));

  const std::size_t n = std::size_t{1} << 28;  // 1 GiB of floats per vector
  float* x = nullptr;
  float* y = nullptr;
  REQUIRE(cudaMalloc(&x, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&y, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemset(x, 0, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemset(y, 0, n * sizeof(float)) == cudaSuccess);
  const unsigned blocks = static_cast<unsigned>(gpu.sm_count) * 8;
  const double seconds = median_seconds([&] { saxpy<<<blocks, 256>>>(2.0f, x, y, n); }, 3, 15);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  cudaFree(x);
  cudaFree(y);

  // 2 flops per element; 4 bytes read of x, 4 read and 4 written of y.
  const kscope::work w{2.0 * static_cast<double>(n), 12.0 * static_cast<double>(n)};
  const kscope::placement p = kscope::place(w, seconds, peak_flops, peak_bytes);
  MESSAGE("saxpy median " << seconds * 1e3 << " ms");
  report("saxpy", p);
  CHECK(p.intensity == doctest::Approx(1.0 / 6));
  CHECK(p.limiter == kscope::bound::memory);
}

TEST_CASE("bf16 GEMM 8192^3 is compute-bound") {
  const kscope::device_info gpu = kscope::query_device(0);
  REQUIRE(gpu.present);
  const kscope::detail::cublas_api& blas = kscope::detail::cublas();
  if (!blas.ok()) KSCOPE_TEST_REFUSED(kscope_test::feature::cublas, "kscope::detail::cublas()", "not loaded", blas.error);
  const double peak_bytes = kscope::theoretical_bytes_per_s(gpu);
  const double peak_flops = kscope::theoretical_flops_per_s(gpu, kscope::data_type::bf16, kscope::core_kind::tensor);
  REQUIRE(std::isfinite(peak_flops));

  const int n = 8192;
  const std::size_t elements = static_cast<std::size_t>(n) * n;
  std::uint16_t *a = nullptr, *b = nullptr, *c = nullptr;
  REQUIRE(cudaMalloc(&a, elements * 2) == cudaSuccess);
  REQUIRE(cudaMalloc(&b, elements * 2) == cudaSuccess);
  REQUIRE(cudaMalloc(&c, elements * 2) == cudaSuccess);
  fill_bf16<<<1024, 256>>>(a, elements, 1u);
  fill_bf16<<<1024, 256>>>(b, elements, 2u);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  void* handle = nullptr;
  REQUIRE(blas.create(&handle) == 0);
  const float alpha = 1.0f, beta = 0.0f;
  namespace abi = kscope::detail::cublas_abi;
  int status = 0;
  const double seconds = median_seconds(
      [&] {
        status |= blas.gemm_ex(handle, abi::op_n, abi::op_n, n, n, n, &alpha, a, abi::r_16bf, n, b, abi::r_16bf, n,
                               &beta, c, abi::r_16bf, n, abi::compute_32f, abi::gemm_default);
      },
      5, 20);
  CHECK(status == 0);
  blas.destroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);

  // 2 n^3 flops; A and B read once, C written once, 2 bytes each (the minimum traffic).
  const kscope::work w{2.0 * n * static_cast<double>(n) * n, 3.0 * 2.0 * static_cast<double>(elements)};
  const kscope::placement p = kscope::place(w, seconds, peak_flops, peak_bytes);
  MESSAGE("bf16 GEMM median " << seconds * 1e3 << " ms");
  report("bf16 GEMM", p);
  CHECK(p.intensity > kscope::ridge_intensity(peak_flops, peak_bytes));
  CHECK(p.limiter == kscope::bound::compute);
}

TEST_CASE("a one-thread kernel is latency-bound") {
  const kscope::device_info gpu = kscope::query_device(0);
  REQUIRE(gpu.present);
  const double peak_bytes = kscope::theoretical_bytes_per_s(gpu);
  const double peak_flops = kscope::theoretical_flops_per_s(gpu, kscope::data_type::fp32, kscope::core_kind::plain);
  float* out = nullptr;
  REQUIRE(cudaMalloc(&out, sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemset(out, 0, sizeof(float)) == cudaSuccess);
  const double seconds = median_seconds([&] { one_thread<<<1, 1>>>(out); }, 10, 51);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  cudaFree(out);

  // One FMA (2 flops), one float read and written.
  const kscope::placement p = kscope::place({2, 8}, seconds, peak_flops, peak_bytes);
  MESSAGE("one-thread kernel median " << seconds * 1e6 << " us");
  report("one-thread kernel", p);
  CHECK(p.limiter == kscope::bound::latency);
  CHECK(p.fraction_of_roof < 1e-3);
}
