// device.hpp on a real GPU (run by the lead on an H100 or H200; any GPU will do):
// query_device() fields, the theoretical DRAM bandwidth from the attributes checked against
// a copy kernel of this file on the same device (no device's number written here), and
// measure_peaks(): the copy kernel, the FMA kernel and the cuBLAS bf16 GEMM (dlopen'ed)
// against the theoretical roofs. The measured numbers are printed (MESSAGE) so they can be
// quoted. cuBLAS that does not load fails (tests/gpu/expectations.hpp).
#include <kscope/device/device.hpp>

#include <doctest/doctest.h>

#include "expectations.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

#define REQUIRE_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)

__global__ void dt_copy_float4(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}

// Bytes per second a plain float4 copy of 1 GiB (2 GiB of DRAM traffic, far beyond any L2)
// moves on `device`: the median of 10 event-timed copies after 3 warm-ups.
double copy_bytes_per_s(int device, int sm_count) {
  REQUIRE_CUDA(cudaSetDevice(device));
  const std::size_t bytes = std::size_t(1) << 30;
  float4 *src = nullptr, *dst = nullptr;
  REQUIRE_CUDA(cudaMalloc(&src, bytes));
  REQUIRE_CUDA(cudaMalloc(&dst, bytes));
  REQUIRE_CUDA(cudaMemset(src, 0x3c, bytes));
  cudaEvent_t start = nullptr, stop = nullptr;
  REQUIRE_CUDA(cudaEventCreate(&start));
  REQUIRE_CUDA(cudaEventCreate(&stop));
  const std::size_t n = bytes / sizeof(float4);
  const unsigned blocks = static_cast<unsigned>(sm_count) * 8;
  std::vector<double> seconds;
  for (int i = 0; i < 13; ++i) {
    REQUIRE_CUDA(cudaEventRecord(start));
    dt_copy_float4<<<blocks, 256>>>(src, dst, n);
    REQUIRE_CUDA(cudaEventRecord(stop));
    REQUIRE_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    REQUIRE_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (i >= 3) seconds.push_back(ms * 1e-3);
  }
  REQUIRE_CUDA(cudaGetLastError());
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  (void)cudaFree(src);
  (void)cudaFree(dst);
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * static_cast<double>(bytes) / seconds[seconds.size() / 2];
}

}  // namespace

TEST_CASE("query_device on a real GPU") {
  const kscope::device_info gpu = kscope::query_device(0);
  MESSAGE(kscope::describe(gpu));
  MESSAGE(kscope::to_json(gpu));
  REQUIRE(gpu.present);
  CHECK(gpu.problem.empty());
  CHECK(gpu.device_count >= 1);
  CHECK(gpu.sm_count > 0);
  CHECK(gpu.sm_clock_khz > 0);
  CHECK(gpu.memory_clock_khz > 0);
  CHECK(gpu.memory_bus_width_bits > 0);
  CHECK(gpu.l2_bytes > 0);
  CHECK(gpu.memory_bytes > 0);
  CHECK(gpu.driver_version >= gpu.runtime_version);
  CHECK(gpu.uuid.size() == 40);
  CHECK_FALSE(gpu.pci_bus_id.empty());

  // The fields are the runtime's own answers for this device.
  cudaDeviceProp prop{};
  REQUIRE_CUDA(cudaGetDeviceProperties(&prop, 0));
  CHECK(gpu.cc_major == prop.major);
  CHECK(gpu.cc_minor == prop.minor);
  CHECK(gpu.sm_count == prop.multiProcessorCount);
  CHECK(gpu.name == std::string(prop.name));
  int memory_clock_khz = 0, bus_width_bits = 0;
  REQUIRE_CUDA(cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, 0));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
  CHECK(gpu.memory_clock_khz == memory_clock_khz);
  CHECK(gpu.memory_bus_width_bits == bus_width_bits);

  // The theoretical DRAM peak (double data rate: clock x bus width x 2), the same in the
  // device's peaks, and a copy of this file on this device reaching a plausible share of
  // it: more than half (a formula off by 2x, or the wrong clock, fails) and never above it
  // (a peak too low fails). No device's number is written here.
  const double bandwidth = kscope::theoretical_bytes_per_s(gpu);
  MESSAGE("theoretical DRAM bandwidth: " << bandwidth / 1e12 << " TB/s");
  REQUIRE(std::isfinite(bandwidth));
  CHECK(bandwidth == doctest::Approx(1e3 * memory_clock_khz * bus_width_bits * 2.0 / 8.0));
  const kscope::device_peaks peaks = kscope::theoretical_peaks(gpu);
  CHECK(peaks.theoretical_bytes_per_s == bandwidth);
  const double copied = copy_bytes_per_s(0, gpu.sm_count);
  const double share = copied / peaks.theoretical_bytes_per_s;
  MESSAGE("1 GiB float4 copy: " << copied / 1e12 << " TB/s = " << 100 * share << " % of the theoretical "
                                << peaks.theoretical_bytes_per_s / 1e12 << " TB/s");
  CHECK(share >= 0.5);
  CHECK(share <= 1.02);

  const kscope::device_info missing = kscope::query_device(gpu.device_count);
  CHECK_FALSE(missing.present);
  CHECK(contains(missing.problem, "ordinals 0.."));
}

TEST_CASE("measure_peaks: sustained roofs beside the theoretical ones") {
  // The caller's current device and its errors must be left as they were.
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  const kscope::device_peaks peaks = kscope::measure_peaks(0);
  int current = -1;
  CHECK(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);
  CHECK(cudaGetLastError() == cudaSuccess);

  MESSAGE("\n" << kscope::describe(peaks));
  MESSAGE(kscope::to_json(peaks));
  for (const std::string& failure : peaks.failures) MESSAGE("failure: " << failure);

  // Bandwidth: the 16-byte copy reaches at least 80 % of memory clock x bus width x 2.
  CHECK(peaks.bandwidth_error.empty());
  REQUIRE(std::isfinite(peaks.measured_bytes_per_s));
  const double copy_fraction = peaks.measured_bytes_per_s / peaks.theoretical_bytes_per_s;
  MESSAGE("copy: " << peaks.measured_bytes_per_s / 1e12 << " TB/s = " << 100 * copy_fraction
                   << " % of theoretical " << peaks.theoretical_bytes_per_s / 1e12 << " TB/s");
  CHECK(copy_fraction >= 0.80);
  CHECK(copy_fraction <= 1.02);

  // Plain fp32: the FMA kernel (loose bounds: it only has to be the right order).
  const kscope::compute_roof* fp32 = peaks.find(kscope::data_type::fp32, kscope::core_kind::plain);
  REQUIRE(fp32 != nullptr);
  CHECK(fp32->error.empty());
  const double fp32_fraction = fp32->measured_flops_per_s / fp32->theoretical_flops_per_s;
  MESSAGE("fp32 FMA: " << fp32->measured_flops_per_s / 1e12 << " TFLOP/s = " << 100 * fp32_fraction
                       << " % of theoretical " << fp32->theoretical_flops_per_s / 1e12 << " TFLOP/s");
  CHECK(fp32_fraction >= 0.5);
  CHECK(fp32_fraction <= 1.05);

  // bf16 tensor: cuBLAS GEMM against the table's dense bf16 peak at the max SM clock.
  // 70-105 % as the issue asks. The theoretical peak uses the 1980 MHz max clock (1070
  // TFLOP/s on H100/H200) while the chip runs tensor work nearer the datasheet's 1830 MHz,
  // so ~75 % is what cuBLAS reaches (804 TFLOP/s measured on the lent H200, 2026-12-02).
  const kscope::compute_roof* bf16 = peaks.find(kscope::data_type::bf16, kscope::core_kind::tensor);
  REQUIRE(bf16 != nullptr);
  if (!kscope::detail::cublas().ok())
    KSCOPE_TEST_REFUSED(kscope_test::feature::cublas, "kscope::detail::cublas()", "not loaded",
                        kscope::detail::cublas().error);
  {
    CHECK(bf16->error.empty());
    const double bf16_fraction = bf16->measured_flops_per_s / bf16->theoretical_flops_per_s;
    MESSAGE("bf16 GEMM: " << bf16->measured_flops_per_s / 1e12 << " TFLOP/s = " << 100 * bf16_fraction
                          << " % of theoretical " << bf16->theoretical_flops_per_s / 1e12 << " TFLOP/s ("
                          << bf16->method << ")");
    CHECK(bf16_fraction >= 0.70);
    CHECK(bf16_fraction <= 1.05);
    for (kscope::data_type type : {kscope::data_type::fp16, kscope::data_type::tf32, kscope::data_type::fp64}) {
      for (kscope::core_kind cores : {kscope::core_kind::tensor, kscope::core_kind::plain}) {
        if (const kscope::compute_roof* r = peaks.find(type, cores); r && std::isfinite(r->measured_flops_per_s)) {
          MESSAGE(std::string(kscope::to_string(type)) << " " << std::string(kscope::to_string(cores)) << " GEMM: "
                                          << r->measured_flops_per_s / 1e12 << " TFLOP/s of "
                                          << r->theoretical_flops_per_s / 1e12 << " theoretical");
          CHECK(r->measured_flops_per_s <= 1.05 * r->theoretical_flops_per_s);
        }
      }
    }
  }

  // The roofs for the picture: theoretical and measured for fp32 and bf16.
  const std::vector<kscope::roof_line> lines = kscope::roof_lines(peaks);
  CHECK(lines.size() >= 3);
}
