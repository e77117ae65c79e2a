// device.hpp on a real GPU (run by the lead on the H200): query_device() fields, the
// theoretical bandwidth from the attributes, and measure_peaks(): the copy kernel, the
// FMA kernel and the cuBLAS bf16 GEMM (dlopen'ed) against the theoretical roofs. The
// measured numbers are printed (MESSAGE) so they can be quoted.
#include <kscope/device/device.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <string>

namespace {
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
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

  const double bandwidth = kscope::theoretical_bytes_per_s(gpu);
  MESSAGE("theoretical DRAM bandwidth: " << bandwidth / 1e12 << " TB/s");
  if (contains(gpu.name, "H200")) {
    // 3 201 000 kHz x 6016 bits x 2 / 8 = 4.81 TB/s; NVIDIA's datasheet says 4.8 TB/s.
    CHECK(bandwidth == doctest::Approx(4.8e12).epsilon(0.02));
    CHECK(gpu.cc_major == 9);
    CHECK(gpu.sm_count == 132);
  } else {
    MESSAGE("not an H200: the 4.8 TB/s check does not apply");
    CHECK(std::isfinite(bandwidth));
  }

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
  if (!kscope::detail::cublas().ok()) {
    MESSAGE("cuBLAS not loadable, bf16 GEMM check skipped: " << kscope::detail::cublas().error);
  } else {
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
