// core/dtype.hpp and device/roof_choice.hpp: the one reader of dtype names (canonical
// names, aliases, case, unknown text) and the one rule from a dtype to a compute roof,
// checked where it is used: a session scope and a benchmark tagged alike land under the
// same roof. CPU only: the benchmark runs on a fake timer against a described device.
#include <kscope/core/dtype.hpp>
#include <kscope/device/roof_choice.hpp>

#include <kscope/bench/bench.hpp>
#include <kscope/session/detail/context.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace dtype_test {  // one per file: the unit tests build as one program

namespace {

using kscope::core_kind;
using kscope::data_type;

kscope::device_info h200_like() {
  kscope::device_info d;
  d.present = true;
  d.name = "test H200";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.sm_clock_khz = 1'980'000;
  d.memory_clock_khz = 3'201'000;
  d.memory_bus_width_bits = 6016;
  d.l2_bytes = 50331648;
  return d;
}

kscope::device_info a100_like() {
  kscope::device_info d = h200_like();
  d.cc_major = 8;
  d.sm_count = 108;
  d.sm_clock_khz = 1'410'000;
  return d;
}

// 1 ms per launch with a small deterministic wobble, on a virtual clock: enough for
// the sampler to converge; only the roof the result was placed under matters here.
struct steady_timer final : kscope::bench_timer {
  std::int64_t t_ns = 0;
  std::size_t calls = 0;
  kscope::timed_sample time(std::size_t, std::size_t launches) override {
    const double per_launch = 1e-3 * (1 + 1e-3 * static_cast<double>(static_cast<int>(calls++ % 7) - 3));
    const double total = per_launch * static_cast<double>(launches);
    t_ns += static_cast<std::int64_t>(total * 1e9) + 20'000;
    return {total, 1980.0};
  }
  std::int64_t now_ns() override { return t_ns; }
};

// 1 ms of work whose intensity (5e4 flop/B) is far right of every ridge point, so the
// placement's roof is the compute roof itself.
constexpr double work_flops = 5e10;
constexpr double work_bytes = 1e6;

// A session scope tagged `dtype` that ran that workload once in 1 ms, placed on `gpu`.
kscope::scope_report placed_scope(const std::string& dtype, const kscope::device_info& gpu) {
  kscope::scope_report s;
  s.name = s.path = "gemm";
  s.calls = s.work_calls = s.gpu_calls = 1;
  s.declared = {work_flops, work_bytes};
  s.gpu_ns.median = 1e6;
  s.gpu_ns.median_ci = {0.99e6, 1.01e6, 0.95};
  if (!dtype.empty()) s.tags.push_back({"dtype", dtype, 1});
  kscope::detail::place_scope(s, kscope::theoretical_peaks(gpu));
  return s;
}

// A benchmark with the same dtype and workload, run as if on `gpu`.
kscope::bench_result placed_bench(const std::string& dtype, const kscope::device_info& gpu) {
  kscope::bench b{"gemm", [](kscope::bench_stream) {}};
  b.set_work({work_flops, work_bytes});
  if (!dtype.empty()) b.dtype(dtype);
  steady_timer timer;
  return b.run(timer, gpu);
}

bool said(const kscope::bench_result& r, const std::string& part) {
  for (const std::string& w : r.warnings)
    if (w.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("parse_data_type reads every canonical name back") {
  for (data_type t : kscope::all_data_types) {
    data_type read = t == data_type::fp64 ? data_type::int8 : data_type::fp64;
    CHECK(kscope::parse_data_type(kscope::to_string(t), read));
    CHECK(read == t);
  }
}

TEST_CASE("parse_data_type reads the aliases of C++, CUDA, NumPy and PyTorch, in any case") {
  const std::pair<const char*, data_type> aliases[] = {
      {"half", data_type::fp16},          {"float16", data_type::fp16},      {"__half", data_type::fp16},
      {"f16", data_type::fp16},           {"float", data_type::fp32},        {"float32", data_type::fp32},
      {"single", data_type::fp32},        {"f32", data_type::fp32},          {"double", data_type::fp64},
      {"float64", data_type::fp64},       {"bfloat16", data_type::bf16},     {"__nv_bfloat16", data_type::bf16},
      {"tf32", data_type::tf32},          {"e4m3", data_type::fp8},          {"e5m2", data_type::fp8},
      {"float8_e4m3fn", data_type::fp8},  {"__nv_fp8_e5m2", data_type::fp8}, {"int8_t", data_type::int8},
      {"char", data_type::int8},          {"s8", data_type::int8},           {"uint8", data_type::int8},
      {"HALF", data_type::fp16},          {"BFloat16", data_type::bf16},     {"__NV_BFLOAT16", data_type::bf16},
      {"Float", data_type::fp32},         {"FP8", data_type::fp8},           {" half\t", data_type::fp16},
      {"unsigned char", data_type::int8},
  };
  for (const auto& [text, want] : aliases) {
    CAPTURE(text);
    data_type read = data_type::fp64;
    CHECK(kscope::parse_data_type(text, read));
    CHECK(read == want);
  }
}

TEST_CASE("parse_data_type refuses what it does not know and leaves the output alone") {
  for (const char* text : {"", "   ", "complex128", "int4", "fp16x", "half-precision", "(mixed)", "bytes", "fp 16"}) {
    CAPTURE(text);
    data_type read = data_type::tf32;
    CHECK_FALSE(kscope::parse_data_type(text, read));
    CHECK(read == data_type::tf32);
  }
}

TEST_CASE("choose_roof: a known dtype gets its fastest roof, anything else fp32 plain") {
  const kscope::device_peaks h200 = kscope::theoretical_peaks(h200_like());
  const auto theoretical = [&](data_type t, core_kind k) { return h200.find(t, k)->theoretical_flops_per_s; };

  const kscope::roof_choice half = kscope::choose_roof(h200, "half");
  CHECK(half.label == "fp16 tensor");
  CHECK(half.dtype_known);
  CHECK(half.type == data_type::fp16);
  CHECK(half.cores == core_kind::tensor);
  CHECK(half.theoretical_flops_per_s == theoretical(data_type::fp16, core_kind::tensor));
  CHECK(std::isnan(half.measured_flops_per_s));

  // fp32 has no tensor roof in the table (tf32 is its own type): plain cores.
  const kscope::roof_choice single = kscope::choose_roof(h200, "float");
  CHECK(single.label == "fp32 plain");
  CHECK(single.dtype_known);
  // fp64 on Hopper: DMMA tensor cores at twice the DFMA rate, so the tensor roof.
  const kscope::roof_choice dbl = kscope::choose_roof(h200, "double");
  CHECK(dbl.label == "fp64 tensor");
  CHECK(dbl.theoretical_flops_per_s == theoretical(data_type::fp64, core_kind::tensor));
  CHECK(dbl.theoretical_flops_per_s > theoretical(data_type::fp64, core_kind::plain));

  // No dtype and an unknown one: the fp32 plain-core default, flagged as such.
  for (const char* text : {"", "complex128", "(mixed)"}) {
    CAPTURE(text);
    const kscope::roof_choice r = kscope::choose_roof(h200, text);
    CHECK(r.label == "fp32 plain");
    CHECK_FALSE(r.dtype_known);
    CHECK(r.theoretical_flops_per_s == theoretical(data_type::fp32, core_kind::plain));
  }

  // A type the device has no rate for: no roof, not another type's.
  const kscope::roof_choice fp8_on_a100 = kscope::choose_roof(kscope::theoretical_peaks(a100_like()), "e4m3");
  CHECK(fp8_on_a100.dtype_known);
  CHECK(fp8_on_a100.label.empty());
  CHECK(std::isnan(fp8_on_a100.theoretical_flops_per_s));
  // An architecture kscope's table does not know: no roof at all.
  kscope::device_info future = h200_like();
  future.cc_major = 42;
  CHECK(kscope::choose_roof(kscope::theoretical_peaks(future), "bf16").label.empty());

  // Measured peaks ride along with the chosen roof; they do not change the choice.
  kscope::device_peaks measured = h200;
  measured.find_or_add(data_type::fp16, core_kind::tensor).measured_flops_per_s = 700e12;
  const kscope::roof_choice with_measured = kscope::choose_roof(measured, "fp16");
  CHECK(with_measured.label == "fp16 tensor");
  CHECK(with_measured.measured_flops_per_s == 700e12);
}

TEST_CASE("a scope and a benchmark tagged alike are placed under the same roof") {
  const kscope::device_info gpu = h200_like();
  const kscope::device_peaks peaks = kscope::theoretical_peaks(gpu);
  // "half" used to give a scope the fp32 roof and a benchmark the fp16 tensor roof.
  for (const char* dtype : {"half", "fp16", "bfloat16", "double", "float", "tf32", "", "complex128"}) {
    CAPTURE(dtype);
    const kscope::roof_choice roof = kscope::choose_roof(peaks, dtype);
    const kscope::scope_report s = placed_scope(dtype, gpu);
    const kscope::bench_result b = placed_bench(dtype, gpu);
    REQUIRE(s.roofline);
    REQUIRE(b.roofline);
    CHECK(s.roof == roof.label);
    CHECK(b.peak_flops_per_s == roof.theoretical_flops_per_s);
    CHECK(s.roofline->roof_flops_per_s == roof.theoretical_flops_per_s);
    CHECK(b.roofline->roof_flops_per_s == roof.theoretical_flops_per_s);
    // The same DRAM peak too: the device's, derived once.
    CHECK(b.peak_bytes_per_s == peaks.theoretical_bytes_per_s);
  }
  const kscope::bench_result half = placed_bench("half", gpu);
  CHECK(placed_scope("half", gpu).roof == "fp16 tensor");
  CHECK(half.peak_flops_source == "theoretical fp16 on tensor cores, Hopper (sm_90) at the rated clock");
  CHECK(half.sm_clock_max_mhz == 1980);
  CHECK_FALSE(said(half, "not a type kscope reads"));
}

TEST_CASE("a benchmark with an unknown dtype says its compute roof is the fp32 default") {
  const kscope::bench_result r = placed_bench("complex128", h200_like());
  CHECK(r.peak_flops_source.find("fp32 on plain cores (the default for dtype 'complex128')") != std::string::npos);
  CHECK(said(r, "dtype 'complex128' is not a type kscope reads"));
  // Without declared flops the compute roof does not matter: no warning (a copy tagged
  // "int4" is a memory benchmark).
  kscope::bench copy{"copy", [](kscope::bench_stream) {}};
  copy.dtype("int4").set_work({0, 4e9});  // 4 TB/s in 1 ms
  steady_timer timer;
  const kscope::bench_result c = copy.run(timer, h200_like());
  CHECK_FALSE(said(c, "not a type kscope reads"));
  REQUIRE(c.roofline);
  CHECK(c.roofline->limiter == kscope::bound::memory);
  // Peaks given with bench::peaks win over the device's.
  kscope::bench given{"gemm", [](kscope::bench_stream) {}};
  given.dtype("complex128").set_work({work_flops, work_bytes}).peaks(123e12, 2e12);
  steady_timer t2;
  const kscope::bench_result g = given.run(t2, h200_like());
  CHECK(g.peak_flops_per_s == 123e12);
  CHECK(g.peak_bytes_per_s == 2e12);
  CHECK(g.peak_flops_source == "given");
  CHECK_FALSE(said(g, "not a type kscope reads"));
}

TEST_CASE("a type the device has no roof for: the benchmark skips the placement and says why") {
  const kscope::bench_result r = placed_bench("fp8", a100_like());
  CHECK(std::isnan(r.peak_flops_per_s));
  CHECK(r.peak_flops_source.empty());
  CHECK_FALSE(r.roofline);
  CHECK(said(r, "no compute peak known for dtype 'fp8'"));
  const kscope::scope_report s = placed_scope("fp8", a100_like());
  CHECK_FALSE(s.roofline);
  CHECK(s.roof.empty());
}

}  // namespace dtype_test
