// device.hpp on the CPU: the bandwidth formula, the per-architecture peak table against
// the datasheet figures it was built from (within 5 %), unknown architectures and
// unsupported types giving NaN, query_device() on a machine without a usable GPU, the
// JSON and text renderings, and the cuBLAS loader's ABI constants and search order.
#include <kscope/device/device.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

#if KSCOPE_HAS_CUDA
#  include <kscope/device/detail/cublas_loader.hpp>
#  if defined(__has_include)
#    if __has_include(<cublas_api.h>)
#      include <cublas_api.h>
#      define KSCOPE_TEST_HAS_CUBLAS_HEADER 1
#    endif
#  endif
#endif

namespace device_test {  // one per file: the unit tests build as one program

namespace {

using kscope::core_kind;
using kscope::data_type;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A published figure: product, compute capability, SMs, the clock NVIDIA's figure uses
// (MHz), type, cores, and the dense rate in units of 1e12 per second.
struct datasheet_figure {
  const char* product;
  int major, minor, sms;
  double clock_mhz;
  data_type type;
  core_kind cores;
  double tera_per_s;
};

// Sources: see the comment of each row in include/kscope/device/detail/peak_table.hpp.
const datasheet_figure datasheet[] = {
    // H100 SXM5 (H100 whitepaper Table 3 / datasheet): CUDA-core figures at 1980 MHz,
    // tensor figures at 1830 MHz.
    {"H100 SXM", 9, 0, 132, 1830, data_type::bf16, core_kind::tensor, 989.4},
    {"H100 SXM", 9, 0, 132, 1830, data_type::fp16, core_kind::tensor, 989.4},
    {"H100 SXM", 9, 0, 132, 1830, data_type::tf32, core_kind::tensor, 494.7},
    {"H100 SXM", 9, 0, 132, 1830, data_type::fp8, core_kind::tensor, 1978.9},
    {"H100 SXM", 9, 0, 132, 1830, data_type::int8, core_kind::tensor, 1978.9},
    {"H100 SXM", 9, 0, 132, 1980, data_type::fp32, core_kind::plain, 66.9},
    {"H100 SXM", 9, 0, 132, 1980, data_type::fp64, core_kind::plain, 33.5},
    {"H100 SXM", 9, 0, 132, 1980, data_type::fp64, core_kind::tensor, 66.9},
    {"H100 SXM", 9, 0, 132, 1980, data_type::fp16, core_kind::plain, 133.8},
    {"H100 SXM", 9, 0, 132, 1980, data_type::bf16, core_kind::plain, 133.8},
    // A100 SXM4 (A100 whitepaper Table 1): 108 SMs, 1410 MHz.
    {"A100 SXM", 8, 0, 108, 1410, data_type::bf16, core_kind::tensor, 312},
    {"A100 SXM", 8, 0, 108, 1410, data_type::fp16, core_kind::tensor, 312},
    {"A100 SXM", 8, 0, 108, 1410, data_type::tf32, core_kind::tensor, 156},
    {"A100 SXM", 8, 0, 108, 1410, data_type::int8, core_kind::tensor, 624},
    {"A100 SXM", 8, 0, 108, 1410, data_type::fp32, core_kind::plain, 19.5},
    {"A100 SXM", 8, 0, 108, 1410, data_type::fp64, core_kind::plain, 9.7},
    {"A100 SXM", 8, 0, 108, 1410, data_type::fp64, core_kind::tensor, 19.5},
    {"A100 SXM", 8, 0, 108, 1410, data_type::fp16, core_kind::plain, 78},
    {"A100 SXM", 8, 0, 108, 1410, data_type::bf16, core_kind::plain, 39},
    // V100 SXM2 (V100 whitepaper Table 1; A100 whitepaper Table 1): 80 SMs, 1530 MHz.
    {"V100 SXM2", 7, 0, 80, 1530, data_type::fp64, core_kind::plain, 7.8},
    {"V100 SXM2", 7, 0, 80, 1530, data_type::fp32, core_kind::plain, 15.7},
    {"V100 SXM2", 7, 0, 80, 1530, data_type::fp16, core_kind::tensor, 125},
    {"V100 SXM2", 7, 0, 80, 1530, data_type::fp16, core_kind::plain, 31.4},
    {"V100 SXM2", 7, 0, 80, 1530, data_type::int8, core_kind::plain, 62},
    // T4 (datasheet): 40 SMs, 1590 MHz.
    {"T4", 7, 5, 40, 1590, data_type::fp32, core_kind::plain, 8.1},
    {"T4", 7, 5, 40, 1590, data_type::fp16, core_kind::tensor, 65},
    {"T4", 7, 5, 40, 1590, data_type::int8, core_kind::tensor, 130},
    // A40 (datasheet): 84 SMs, 1740 MHz.
    {"A40", 8, 6, 84, 1740, data_type::fp32, core_kind::plain, 37.4},
    {"A40", 8, 6, 84, 1740, data_type::tf32, core_kind::tensor, 74.8},
    {"A40", 8, 6, 84, 1740, data_type::bf16, core_kind::tensor, 149.7},
    {"A40", 8, 6, 84, 1740, data_type::int8, core_kind::tensor, 299.3},
    // RTX 3090 (GA102 whitepaper): 82 SMs, 1695 MHz; FP16 tensor with FP16 accumulate.
    {"RTX 3090", 8, 6, 82, 1695, data_type::fp32, core_kind::plain, 35.6},
    {"RTX 3090", 8, 6, 82, 1695, data_type::fp16, core_kind::plain, 35.6},
    {"RTX 3090", 8, 6, 82, 1695, data_type::fp16, core_kind::tensor, 142},
    // Jetson AGX Orin (technical brief): 16 SMs, 1300 MHz.
    {"AGX Orin", 8, 7, 16, 1300, data_type::fp32, core_kind::plain, 5.3},
    {"AGX Orin", 8, 7, 16, 1300, data_type::int8, core_kind::tensor, 85},
    // L40S (datasheet): 142 SMs, 2520 MHz.
    {"L40S", 8, 9, 142, 2520, data_type::fp32, core_kind::plain, 91.6},
    {"L40S", 8, 9, 142, 2520, data_type::tf32, core_kind::tensor, 183},
    {"L40S", 8, 9, 142, 2520, data_type::bf16, core_kind::tensor, 362},
    {"L40S", 8, 9, 142, 2520, data_type::fp8, core_kind::tensor, 733},
    {"L40S", 8, 9, 142, 2520, data_type::int8, core_kind::tensor, 733},
    // RTX 4090 (Ada whitepaper): 128 SMs, 2520 MHz.
    {"RTX 4090", 8, 9, 128, 2520, data_type::fp32, core_kind::plain, 82.6},
    {"RTX 4090", 8, 9, 128, 2520, data_type::fp64, core_kind::plain, 1.3},
    // RTX 5090 (RTX Blackwell whitepaper): 170 SMs, 2407 MHz; FP16 with FP16 accumulate.
    {"RTX 5090", 12, 0, 170, 2407, data_type::fp32, core_kind::plain, 104.8},
    {"RTX 5090", 12, 0, 170, 2407, data_type::fp16, core_kind::tensor, 419},
    {"RTX 5090", 12, 0, 170, 2407, data_type::fp8, core_kind::tensor, 838},
};

// An H100 SXM as query_device() would describe it.
kscope::device_info h100_sxm() {
  kscope::device_info d;
  d.present = true;
  d.ordinal = 0;
  d.device_count = 1;
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.sm_clock_khz = 1'980'000;
  d.memory_clock_khz = 2'619'000;
  d.memory_bus_width_bits = 5120;
  d.l2_bytes = 50 * 1024 * 1024;
  d.memory_bytes = 85'520'809'984ull;
  d.driver_version = 13000;
  d.runtime_version = 13000;
  d.uuid = "GPU-01234567-89ab-cdef-0123-456789abcdef";
  d.pci_bus_id = "0000:19:00.0";
  return d;
}

}  // namespace

TEST_CASE("DRAM bandwidth = memory clock x bus width x 2 / 8") {
  // H200: 3 201 000 kHz x 6016 bits x 2 / 8 = 4.814304e12 B/s (4.8 TB/s datasheet).
  CHECK(kscope::theoretical_bytes_per_s(3'201'000, 6016) == doctest::Approx(4.814304e12));
  // H100 SXM: 2 619 000 kHz x 5120 bits -> 3.352 TB/s (datasheet 3.35 TB/s).
  CHECK(kscope::theoretical_bytes_per_s(2'619'000, 5120) == doctest::Approx(3.35232e12));
  // A100 40GB: 1 215 000 kHz x 5120 bits -> 1.5552 TB/s (datasheet 1555 GB/s).
  CHECK(kscope::theoretical_bytes_per_s(1'215'000, 5120) == doctest::Approx(1.5552e12));
  // RTX 4090 (GDDR6X reports the per-pin rate / 2): 10 501 000 kHz x 384 -> 1008 GB/s.
  CHECK(kscope::theoretical_bytes_per_s(10'501'000, 384) == doctest::Approx(1.008096e12));
  CHECK(std::isnan(kscope::theoretical_bytes_per_s(0, 5120)));
  CHECK(std::isnan(kscope::theoretical_bytes_per_s(1'215'000, -1)));
  CHECK(std::isnan(kscope::theoretical_bytes_per_s(std::nan(""), 5120)));
}

TEST_CASE("peak table reproduces the datasheets within 5 %") {
  for (const datasheet_figure& f : datasheet) {
    CAPTURE(f.product);
    CAPTURE(kscope::to_string(f.type));
    CAPTURE(kscope::to_string(f.cores));
    const double peak = kscope::theoretical_flops_per_s(f.major, f.minor, f.sms, f.clock_mhz * 1e3, f.type, f.cores);
    REQUIRE(std::isfinite(peak));
    CHECK(peak / (f.tera_per_s * 1e12) == doctest::Approx(1.0).epsilon(0.05));
  }
}

TEST_CASE("the live-device clock: H100/H200 theoretical peaks use the max SM clock") {
  // At 1980 MHz (cudaDevAttrClockRate on H100 SXM / H200) dense bf16 is 4096 x 132 x
  // 1.98e9 = 1070.5 TFLOP/s, 8 % above the datasheet's 989.4 at the 1830 MHz tensor clock.
  const double bf16 = kscope::theoretical_flops_per_s(9, 0, 132, 1'980'000, data_type::bf16, core_kind::tensor);
  CHECK(bf16 == doctest::Approx(1.07053056e15));
  // Blackwell B200 doubles Hopper's tensor rate per SM per clock.
  CHECK(kscope::theoretical_flops_per_s(10, 0, 1, 1e3, data_type::bf16, core_kind::tensor) ==
        doctest::Approx(2 * kscope::theoretical_flops_per_s(9, 0, 1, 1e3, data_type::bf16, core_kind::tensor)));
}

TEST_CASE("unknown architectures and unsupported types are NaN, never a guess") {
  for (data_type type : kscope::all_data_types) {
    for (core_kind cores : {core_kind::plain, core_kind::tensor}) {
      CHECK(std::isnan(kscope::theoretical_flops_per_s(6, 1, 28, 1.5e6, type, cores)));    // Pascal: not listed
      CHECK(std::isnan(kscope::theoretical_flops_per_s(10, 3, 148, 2e6, type, cores)));    // B300: not listed
      CHECK(std::isnan(kscope::theoretical_flops_per_s(99, 0, 100, 2e6, type, cores)));    // future
      CHECK(std::isnan(kscope::theoretical_flops_per_s(9, 0, 0, 1.98e6, type, cores)));    // no SMs
      CHECK(std::isnan(kscope::theoretical_flops_per_s(9, 0, 132, -1, type, cores)));      // bad clock
    }
  }
  CHECK(std::isnan(kscope::theoretical_flops_per_s(7, 0, 80, 1.53e6, data_type::bf16, core_kind::tensor)));  // Volta
  CHECK(std::isnan(kscope::theoretical_flops_per_s(7, 5, 40, 1.59e6, data_type::tf32, core_kind::tensor)));  // Turing
  CHECK(std::isnan(kscope::theoretical_flops_per_s(8, 0, 108, 1.41e6, data_type::fp8, core_kind::tensor)));  // A100
  CHECK(std::isnan(kscope::theoretical_flops_per_s(9, 0, 132, 1.98e6, data_type::fp32, core_kind::tensor)));
  CHECK(kscope::architecture_name(9, 0) == "Hopper (sm_90)");
  CHECK(contains(kscope::architecture_name(6, 1), "not in kscope's peak table"));
}

TEST_CASE("query_device answers without a usable GPU, and sanely with one") {
  const kscope::device_info gpu = kscope::query_device(0);
  const std::string line = kscope::describe(gpu);
  MESSAGE("query_device(0): " << line);
  const nlohmann::json json = nlohmann::json::parse(kscope::to_json(gpu));
  CHECK(json["present"].get<bool>() == gpu.present);
  CHECK(json.contains("runtime_version"));
  if (!gpu.present) {
    // The process's one answer to "why no GPU" (device/availability.hpp), in its words.
    CHECK(gpu.problem == kscope::probe_gpu().message);
    CHECK_FALSE(gpu.problem.empty());
    CHECK(contains(line, gpu.problem));
    CHECK(json["problem"].get<std::string>() == gpu.problem);
    CHECK(std::isnan(kscope::theoretical_bytes_per_s(gpu)));
    CHECK(std::isnan(kscope::theoretical_flops_per_s(gpu, data_type::fp32, core_kind::plain)));
    // No device: measure_peaks answers at once, with the reason and no numbers.
    const kscope::device_peaks peaks = kscope::measure_peaks(0);
    CHECK_FALSE(peaks.device.present);
    REQUIRE_FALSE(peaks.failures.empty());
    CHECK(contains(peaks.failures.front(), gpu.problem));
    CHECK(std::isnan(peaks.measured_bytes_per_s));
  } else {
    CHECK(gpu.problem.empty());
    CHECK_FALSE(gpu.name.empty());
    CHECK(gpu.sm_count > 0);
    CHECK(gpu.sm_clock_khz > 0);
    CHECK(gpu.memory_clock_khz > 0);
    CHECK(gpu.memory_bus_width_bits > 0);
    CHECK(gpu.uuid.size() == 40);  // "GPU-" + 32 hex digits + 4 dashes
    CHECK(gpu.uuid.rfind("GPU-", 0) == 0);
    CHECK(std::isfinite(kscope::theoretical_bytes_per_s(gpu)));
    CHECK(json["sm_count"].get<int>() == gpu.sm_count);
  }
  // Out-of-range ordinals never crash and never report a device.
  CHECK_FALSE(kscope::query_device(-1).present);
  CHECK_FALSE(kscope::query_device(4096).present);
  CHECK_FALSE(kscope::query_device(4096).problem.empty());
}

TEST_CASE("describe and JSON of a device") {
  const kscope::device_info d = h100_sxm();
  const std::string line = kscope::describe(d);
  CHECK(contains(line, "NVIDIA H100 80GB HBM3: Hopper (sm_90), 132 SMs at 1980 MHz"));
  CHECK(contains(line, "2619 MHz x 5120-bit memory (3.35 TB/s)"));
  CHECK(contains(line, "50 MiB L2"));
  CHECK(contains(line, "driver 13.0, runtime 13.0"));
  CHECK(contains(line, d.uuid));

  const nlohmann::json json = nlohmann::json::parse(kscope::to_json(d));
  CHECK(json["present"] == true);
  CHECK(json["name"] == "NVIDIA H100 80GB HBM3");
  CHECK(json["compute_capability"] == "9.0");
  CHECK(json["sm_count"] == 132);
  CHECK(json["sm_clock_khz"] == 1980000);
  CHECK(json["memory_clock_khz"] == 2619000);
  CHECK(json["memory_bus_width_bits"] == 5120);
  CHECK(json["theoretical_bytes_per_s"].get<double>() == doctest::Approx(3.35232e12));
  CHECK(json["driver_version"] == "13.0");
  CHECK(json["uuid"] == d.uuid);

  kscope::device_info none;
  none.problem = "no CUDA device: test";
  none.runtime_version = 12040;
  CHECK(kscope::describe(none) == "no CUDA device: test; driver none, runtime 12.4");
}

TEST_CASE("theoretical_peaks, roof_lines and the peaks JSON") {
  kscope::device_peaks peaks = kscope::theoretical_peaks(h100_sxm());
  CHECK(peaks.theoretical_bytes_per_s == doctest::Approx(3.35232e12));
  CHECK(std::isnan(peaks.measured_bytes_per_s));
  // Hopper: fp64 plain+tensor, fp32, fp16 plain+tensor, bf16 plain+tensor, tf32, fp8, int8.
  CHECK(peaks.compute.size() == 10);
  const kscope::compute_roof* bf16 = peaks.find(data_type::bf16, core_kind::tensor);
  REQUIRE(bf16 != nullptr);
  CHECK(bf16->theoretical_flops_per_s == doctest::Approx(1.07053056e15));
  CHECK(std::isnan(bf16->measured_flops_per_s));
  CHECK(peaks.find(data_type::fp8, core_kind::plain) == nullptr);

  std::vector<kscope::roof_line> lines = kscope::roof_lines(peaks);
  REQUIRE(lines.size() == 2);  // fp32 plain and bf16 tensor, theoretical only
  CHECK(lines[0].label == "fp32 plain");
  CHECK_FALSE(lines[0].measured);
  CHECK(lines[1].peak_flops_per_s == doctest::Approx(1.07053056e15));

  // As measure_peaks() would fill them in.
  peaks.measured_bytes_per_s = 2.9e12;
  peaks.find_or_add(data_type::bf16, core_kind::tensor).measured_flops_per_s = 7.5e14;
  peaks.find_or_add(data_type::fp16, core_kind::tensor).error = "cublasGemmEx failed: CUBLAS_STATUS_NOT_SUPPORTED";
  lines = kscope::roof_lines(peaks, {{data_type::bf16, core_kind::tensor}, {data_type::int8, core_kind::plain}});
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].label == "bf16 tensor (measured)");
  CHECK(lines[1].measured);
  CHECK(lines[1].peak_flops_per_s == doctest::Approx(7.5e14));
  CHECK(lines[1].peak_bytes_per_s == doctest::Approx(2.9e12));

  const std::string table = kscope::describe(peaks);
  MESSAGE(table);
  CHECK(contains(table, "DRAM"));
  CHECK(contains(table, "3.35 TB/s"));
  CHECK(contains(table, "2.90 TB/s"));
  CHECK(contains(table, "87 %"));  // 2.9 / 3.352
  CHECK(contains(table, "70 %"));  // 750 / 1070.5
  CHECK(contains(table, "failed: cublasGemmEx failed: CUBLAS_STATUS_NOT_SUPPORTED"));

  const nlohmann::json json = nlohmann::json::parse(kscope::to_json(peaks));
  CHECK(json["device"]["sm_count"] == 132);
  CHECK(json["bandwidth"]["measured_bytes_per_s"].get<double>() == doctest::Approx(2.9e12));
  REQUIRE(json["compute"].is_array());
  CHECK(json["compute"].size() == 10);
  bool found_bf16 = false;
  for (const auto& roof : json["compute"]) {
    if (roof["data_type"] == "bf16" && roof["cores"] == "tensor") {
      found_bf16 = true;
      CHECK(roof["measured_flops_per_s"].get<double>() == doctest::Approx(7.5e14));
    }
    if (roof["data_type"] == "fp64" && roof["cores"] == "plain") CHECK(roof["measured_flops_per_s"].is_null());
  }
  CHECK(found_bf16);

  // A device the table does not know: no compute roofs, the bandwidth still known.
  kscope::device_info pascal = h100_sxm();
  pascal.cc_major = 6;
  pascal.cc_minor = 0;
  const kscope::device_peaks unknown = kscope::theoretical_peaks(pascal);
  CHECK(unknown.compute.empty());
  CHECK(std::isfinite(unknown.theoretical_bytes_per_s));
  CHECK(kscope::roof_lines(unknown).empty());
  CHECK(contains(kscope::describe(unknown), "not in kscope's peak table"));
}

#if KSCOPE_HAS_CUDA
TEST_CASE("cuBLAS loader: ABI constants and search order") {
#  ifdef KSCOPE_TEST_HAS_CUBLAS_HEADER
  namespace abi = kscope::detail::cublas_abi;
  static_assert(abi::status_success == CUBLAS_STATUS_SUCCESS);
  static_assert(abi::op_n == CUBLAS_OP_N && abi::op_t == CUBLAS_OP_T);
  static_assert(abi::gemm_default == CUBLAS_GEMM_DEFAULT);
  static_assert(abi::compute_32f == CUBLAS_COMPUTE_32F);
  static_assert(abi::compute_32f_fast_tf32 == CUBLAS_COMPUTE_32F_FAST_TF32);
  static_assert(abi::compute_64f == CUBLAS_COMPUTE_64F);
  static_assert(abi::r_32f == CUDA_R_32F && abi::r_64f == CUDA_R_64F);
  static_assert(abi::r_16f == CUDA_R_16F && abi::r_16bf == CUDA_R_16BF);
#  else
  MESSAGE("cublas_api.h not found: ABI constants not cross-checked");
#  endif
  // The environment variable comes first.
  ::setenv("KSCOPE_CUBLAS_LIBRARY", "/nonexistent/libcublas-test.so", 1);
  const std::vector<std::string> names = kscope::detail::cublas_candidates();
  ::unsetenv("KSCOPE_CUBLAS_LIBRARY");
  REQUIRE(names.size() >= 4);
  CHECK(names[0] == "/nonexistent/libcublas-test.so");
  CHECK(contains(names[1] + names[2], "libcublas.so.1"));

  // Opening works without a GPU (only the symbols are resolved); report what happened.
  const kscope::detail::cublas_api& blas = kscope::detail::cublas();
  if (blas.ok()) {
    MESSAGE("cuBLAS loaded from " << blas.path);
    CHECK(blas.error.empty());
    CHECK_FALSE(blas.describe(0).empty());  // cuBLAS 13 says "success"
  } else {
    MESSAGE("cuBLAS not loadable here: " << blas.error);
    CHECK(contains(blas.error, "cuBLAS not found"));
  }
}
#endif

}  // namespace device_test
