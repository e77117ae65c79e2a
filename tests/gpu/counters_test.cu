// counters/collect.hpp on a real GPU (run by the lead on an H100/H200; skipped without a
// device): the CUPTI range profiler must measure what the kernels provably do.
//
// - A copy of n floats reads 4n bytes from DRAM and writes 4n bytes, within 3 %. n = 2^30
//   (4 GiB per buffer) where memory allows, so that what L2 (60 MiB on an H200) still holds
//   before or after the kernel is under 1.5 % of the traffic.
// - A naive fp32 GEMM, n = 512, one thread per output and one explicit FMA per (i, j, k),
//   executes exactly n^3 FFMA and nothing else in floating point: 2 n^3 FLOP.
// - The default set on a copy: every catalog name kscope has not marked uncertain is
//   offered, the copy executes no FP instruction, and classify() calls it memory-bound at
//   DRAM. Kernel names follow the launch order; a whole-callable range sums its kernels.
// - A kernel that only reads writes < 1 % of its reads to DRAM in every mode, with the L2
//   left dirty before the pass: what the profiler writes when a pass starts is swept first.
// - A 16 MiB copy (under the L2's size) writes 16 MiB, within 3 %, in every mode: the
//   sweep after the work writes back, and counts, what the copy left dirty in the L2.
// - Unavailable paths answer with one message and never run the work: an unknown metric
//   (with close names), a missing libnvperf_host, a pass inside a pass.
// Every case but the last needs the counters: where tests/gpu/expectations.hpp does not
// expect them those cases do not run (exit 77); where it does, a refusal fails (r.ok()).
// Every result message and note is printed, for bench/RESULTS.md.
#include <kscope/evidence/metrics.hpp>
#include <kscope/counters/collect.hpp>

#include <doctest/doctest.h>

#include "expectations.hpp"

#include "test_kernels.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace {

#define REQUIRE_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)

using kscope_test::copy_floats;

__global__ void scale_floats(float* data, std::size_t n, float factor) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    data[i] *= factor;
}

using kscope_test::naive_sgemm;

// Device memory for one test case.
class device_buffer {
 public:
  explicit device_buffer(std::size_t bytes) {
    REQUIRE_MESSAGE(cudaMalloc(&data_, bytes) == cudaSuccess, "cudaMalloc of " << bytes << " bytes");
    REQUIRE_CUDA(cudaMemset(data_, 0, bytes));
  }
  ~device_buffer() { cudaFree(data_); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  float* get() const { return static_cast<float*>(data_); }

 private:
  void* data_ = nullptr;
};

// The largest power of two <= 2^30 floats for which two buffers fit in 80 % of free memory.
std::size_t copy_length() {
  std::size_t free_bytes = 0, total_bytes = 0;
  REQUIRE_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::size_t n = std::size_t{1} << 30;
  while (n > (std::size_t{1} << 20) && 2 * n * sizeof(float) > free_bytes / 10 * 8) n /= 2;
  return n;
}

int copy_blocks() {
  int device = 0, sms = 0;
  REQUIRE_CUDA(cudaGetDevice(&device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms * 8;
}

void print(const kscope::counter_result& r) {
  MESSAGE(r.message);
  for (const std::string& note : r.notes) MESSAGE("note: " << note);
  for (const kscope::counter_values& k : r.kernels) {
    std::string line = "range " + k.range + " '" + k.name + "':";
    for (const auto& [name, value] : k.values) line += " " + name + "=" + std::to_string(value);
    MESSAGE(line);
  }
}

bool within(double value, double expected, double tolerance) {
  return std::fabs(value - expected) <= tolerance * expected;
}

}  // namespace

TEST_CASE("a copy of n floats reads and writes 4n bytes of DRAM, within 3 %") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  const std::size_t n = copy_length();
  MESSAGE("copy of " << n << " floats (" << n * sizeof(float) << " bytes per buffer)");
  device_buffer src(n * sizeof(float)), dst(n * sizeof(float));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  const int blocks = copy_blocks();
  int calls = 0;
  const kscope::counter_result r = kscope::profile_counters(
      {"dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"}, [&] {
        ++calls;
        copy_floats<<<blocks, 256>>>(src.get(), dst.get(), n);
      });
  print(r);
  REQUIRE_MESSAGE(r.ok(), r.message);
  CHECK(calls == 1);  // kernel replay: the work runs once
  REQUIRE(r.kernels.size() == 1);
  const kscope::counter_values& k = r.kernels[0];
  CHECK(k.name.find("copy_floats") != std::string::npos);
  const double bytes = 4.0 * static_cast<double>(n);
  const double read = k.value("dram__bytes_read.sum");
  const double written = k.value("dram__bytes_write.sum");
  CHECK_MESSAGE(within(read, bytes, 0.03), "read " << read << " bytes, expected " << bytes);
  CHECK_MESSAGE(within(written, bytes, 0.03), "wrote " << written << " bytes, expected " << bytes);
  CHECK(k.value("gpu__time_duration.sum") > 0);
  const kscope::measured_roofline m = kscope::measure_roofline(k.values);
  REQUIRE(m.find(kscope::memory_level::dram));
  MESSAGE("measured: " << kscope::describe(m));
}

TEST_CASE("a naive fp32 GEMM, n = 512, executes exactly 2 n^3 FP32 FLOPs") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  constexpr int n = 512;
  device_buffer a(sizeof(float) * n * n), b(sizeof(float) * n * n), c(sizeof(float) * n * n);
  const dim3 block(16, 16);
  const dim3 grid(n / 16, n / 16);
  std::vector<std::string> metrics;
  for (const char* op : {"fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma"})
    metrics.push_back(std::string("sm__sass_thread_inst_executed_op_") + op + "_pred_on.sum");
  metrics.emplace_back("gpu__time_duration.sum");
  const kscope::counter_result r =
      kscope::profile_counters(metrics, [&] { naive_sgemm<<<grid, block>>>(a.get(), b.get(), c.get(), n); });
  print(r);
  REQUIRE_MESSAGE(r.ok(), r.message);
  REQUIRE(r.kernels.size() == 1);
  const kscope::flop_count f = kscope::count_flops(r.kernels[0].values);
  const double n3 = static_cast<double>(n) * n * n;
  CHECK(f.complete);
  CHECK(f.of(kscope::data_type::fp32).fmas == n3);
  CHECK(f.of(kscope::data_type::fp32).adds == 0);
  CHECK(f.of(kscope::data_type::fp32).muls == 0);
  CHECK(f.of(kscope::data_type::fp32).flops == 2 * n3);  // 268435456
  CHECK(f.of(kscope::data_type::fp64).flops == 0);
  // Measured on an H200: 262144 = n^2 HFMA2 instructions. No half arithmetic is in the
  // kernel: nvcc sets registers to constants with `HFMA2.MMA Rd, -RZ, RZ, c, c`, which the
  // hfma counter counts. At most one per output element here; kscope reports them (it
  // cannot tell them apart) but they do not make fp16 a precision that did the work.
  CHECK(f.of(kscope::data_type::fp16).fmas <= static_cast<double>(n) * n);
  CHECK(f.total == 2 * n3 + f.of(kscope::data_type::fp16).flops);
  CHECK(f.precision_text() == "fp32");
}

TEST_CASE("the device offers the catalog's names, and a copy under the default set is memory-bound at DRAM") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  const kscope::counter_metric_list list = kscope::list_counter_metrics();
  MESSAGE(list.message);
  REQUIRE_MESSAGE(list.ok(), list.message);
  CHECK(!list.chip.empty());
  for (const kscope::metric_info& m : kscope::metric_catalog()) {
    for (std::string_view name : m.names) {
      const kscope::metric_name_check c = kscope::check_metric_name(name, list.base_metrics);
      MESSAGE(list.chip << (c.known ? " offers   " : " lacks    ") << name);
    }
    if (m.in_default_set && !m.name_uncertain) {
      CAPTURE(m.name());
      CHECK(kscope::check_metric_name(m.name(), list.base_metrics).known);
    }
  }

  const std::size_t n = std::min<std::size_t>(copy_length(), std::size_t{1} << 26);  // 256 MiB: replays stay quick
  device_buffer src(n * sizeof(float)), dst(n * sizeof(float));
  const int blocks = copy_blocks();
  const kscope::counter_result r =
      kscope::profile_counters({}, [&] { copy_floats<<<blocks, 256>>>(src.get(), dst.get(), n); });
  print(r);
  REQUIRE_MESSAGE(r.ok(), r.message);
  REQUIRE(r.kernels.size() == 1);
  CHECK(r.passes >= 1);
  const kscope::metric_values& v = r.kernels[0].values;
  const kscope::flop_count f = kscope::count_flops(v);
  CHECK(f.total == 0);  // a copy executes no floating-point instruction
  kscope::classification_input in;
  in.counters = v;
  const kscope::classification c = kscope::classify(in);
  MESSAGE("verdict: " << c.verdict.text);
  for (const kscope::finding& also : c.also) MESSAGE("also: " << also.text);
  for (const std::string& missing : c.missing) MESSAGE("missing: " << missing);
  MESSAGE("measured: " << kscope::describe(kscope::measure_roofline(v)));
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  CHECK(c.verdict.where == "DRAM");
}

TEST_CASE("per-kernel ranges carry kernel names in launch order") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  constexpr std::size_t n = std::size_t{1} << 22;
  device_buffer src(n * sizeof(float)), dst(n * sizeof(float));
  const kscope::counter_result r = kscope::profile_counters({"gpu__time_duration.sum"}, [&] {
    copy_floats<<<256, 256>>>(src.get(), dst.get(), n);
    scale_floats<<<256, 256>>>(dst.get(), n, 0.5f);
    copy_floats<<<256, 256>>>(dst.get(), src.get(), n);
  });
  print(r);
  REQUIRE_MESSAGE(r.ok(), r.message);
  REQUIRE(r.kernels.size() == 3);
  CHECK(r.kernels[0].name.find("copy_floats") != std::string::npos);
  CHECK(r.kernels[1].name.find("scale_floats") != std::string::npos);
  CHECK(r.kernels[2].name.find("copy_floats") != std::string::npos);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(r.kernels[i].index == i);
    CHECK(r.kernels[i].range == std::to_string(i));
    CHECK(r.kernels[i].value("gpu__time_duration.sum") > 0);
  }
  kscope::counter_aggregate scope;
  scope.add_call(r.kernels);
  CHECK(scope.kernels() == 3);
  CHECK(scope.total("gpu__time_duration.sum") == doctest::Approx(r.kernels[0].value("gpu__time_duration.sum") +
                                                                  r.kernels[1].value("gpu__time_duration.sum") +
                                                                  r.kernels[2].value("gpu__time_duration.sum")));
}

TEST_CASE("a whole-callable range sums the traffic of all its kernels") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  // 2 GiB per buffer: what L2 holds across the two copies stays under 1.5 % of the traffic.
  const std::size_t n = std::min<std::size_t>(copy_length(), std::size_t{1} << 29);
  device_buffer src(n * sizeof(float)), dst(n * sizeof(float));
  const int blocks = copy_blocks();
  kscope::counter_options o;
  o.ranges = kscope::counter_ranges::whole_callable;
  o.range_name = "two copies";
  int calls = 0;
  const kscope::counter_result r = kscope::profile_counters(
      {"dram__bytes_read.sum", "dram__bytes_write.sum"},
      [&] {
        ++calls;
        copy_floats<<<blocks, 256>>>(src.get(), dst.get(), n);
        copy_floats<<<blocks, 256>>>(dst.get(), src.get(), n);
      },
      o);
  print(r);
  REQUIRE_MESSAGE(r.ok(), r.message);
  REQUIRE(r.kernels.size() == 1);
  CHECK(r.kernels[0].name == "two copies");
  CHECK(static_cast<std::size_t>(calls) == r.runs);
  CHECK(r.runs == r.passes);
  const double bytes = 2 * 4.0 * static_cast<double>(n);
  CHECK_MESSAGE(within(r.kernels[0].value("dram__bytes_read.sum"), bytes, 0.03),
                "read " << r.kernels[0].value("dram__bytes_read.sum") << ", expected " << bytes);
  CHECK_MESSAGE(within(r.kernels[0].value("dram__bytes_write.sum"), bytes, 0.03),
                "wrote " << r.kernels[0].value("dram__bytes_write.sum") << ", expected " << bytes);
}

// Reads a buffer and writes nothing (the condition is never true for zeros): the L2 then
// holds clean lines only.
__global__ void read_only_sweep(const float* __restrict__ x, std::size_t n, float* sink) {
  float acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    acc += x[i];
  if (acc == 12345.678f) *sink = acc;
}

TEST_CASE("user replay runs the work once per pass, the hook before each run, and keeps per-kernel names") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  const std::size_t n = copy_length();
  device_buffer src(n * sizeof(float)), dst(n * sizeof(float));
  int device = 0, l2_bytes = 0;
  REQUIRE_CUDA(cudaGetDevice(&device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  const std::size_t sweep_n = 2 * static_cast<std::size_t>(l2_bytes) / sizeof(float);
  device_buffer sweep(sweep_n * sizeof(float)), sink(sizeof(float));
  const int blocks = copy_blocks();
  kscope::counter_options o;
  o.replay = kscope::counter_replay::user;
  int calls = 0, hooks = 0;
  o.before_each_run = [&] {
    ++hooks;
    read_only_sweep<<<blocks, 256>>>(sweep.get(), sweep_n, sink.get());
  };
  // The default set needs several passes: the work runs once per pass.
  const kscope::counter_result r = kscope::profile_counters(
      {},
      [&] {
        ++calls;
        copy_floats<<<blocks, 256>>>(src.get(), dst.get(), n);
        scale_floats<<<blocks, 256>>>(dst.get(), n, 0.5f);
      },
      o);
  print(r);
  REQUIRE_MESSAGE(r.ok(), r.message);
  CHECK(r.passes > 1);
  CHECK(static_cast<std::size_t>(calls) == r.runs);
  CHECK(r.runs == r.passes);
  CHECK(hooks == calls);
  REQUIRE(r.kernels.size() == 2);  // the hook's kernels are outside the ranges
  CHECK(r.kernels[0].name.find("copy_floats") != std::string::npos);
  CHECK(r.kernels[1].name.find("scale_floats") != std::string::npos);
  // With the L2 clean before the copy, its writes are its own 4n bytes (less what is still
  // dirty in the L2 when it ends: at most the L2 size, <= 1.5 % of 4 GiB).
  const double bytes = 4.0 * static_cast<double>(n);
  const double tolerance = std::max(0.03, 1.5 * l2_bytes / bytes);
  CHECK_MESSAGE(within(r.kernels[0].value("dram__bytes_write.sum"), bytes, tolerance),
                "copy wrote " << r.kernels[0].value("dram__bytes_write.sum") << ", expected " << bytes);
  CHECK_MESSAGE(within(r.kernels[0].value("dram__bytes_read.sum"), bytes, tolerance),
                "copy read " << r.kernels[0].value("dram__bytes_read.sum") << ", expected " << bytes);
  CHECK(std::none_of(r.notes.begin(), r.notes.end(),
                     [](const std::string& note) { return note.find("kernel replay") == 0; }));
}

// The profiler writes its own buffers through the L2 when a pass starts; without kscope's
// L2 sweep the first large kernel of the pass counted their write-back as its DRAM writes
// (~29 MB on an H200). A kernel that only reads must count (almost) none, in every mode,
// even with the L2 left full of dirty lines by the kernel before the pass.
TEST_CASE("a kernel that only reads writes almost no DRAM bytes: the pass's own writes are swept first") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  int device = 0, l2_bytes = 0;
  REQUIRE_CUDA(cudaGetDevice(&device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  const std::size_t sweep_n = 2 * static_cast<std::size_t>(l2_bytes) / sizeof(float);
  const std::size_t dirty_n = static_cast<std::size_t>(l2_bytes) / sizeof(float);
  device_buffer reads(sweep_n * sizeof(float)), dirty(dirty_n * sizeof(float)), sink(sizeof(float));
  const int blocks = copy_blocks();
  const double read_bytes = 4.0 * static_cast<double>(sweep_n);
  // The per-range records CUPTI writes are a few KB; 1 % of the bytes read is ~1.2 MB here.
  const double allowed = 0.01 * read_bytes;
  const std::vector<std::string> dram = {"dram__bytes_read.sum", "dram__bytes_write.sum"};
  const auto dirty_the_l2 = [&] {
    scale_floats<<<blocks, 256>>>(dirty.get(), dirty_n, 0.5f);
    REQUIRE_CUDA(cudaDeviceSynchronize());
  };
  const auto read_only = [&] { read_only_sweep<<<blocks, 256>>>(reads.get(), sweep_n, sink.get()); };

  struct mode {
    const char* label;
    kscope::counter_options options;
  };
  std::vector<mode> modes(3);
  modes[0].label = "per-kernel, kernel replay";
  modes[1].label = "per-kernel, user replay, default set";
  modes[1].options.replay = kscope::counter_replay::user;
  modes[2].label = "whole callable";
  modes[2].options.ranges = kscope::counter_ranges::whole_callable;
  for (const mode& m : modes) {
    CAPTURE(m.label);
    dirty_the_l2();
    const bool default_set = m.options.replay == kscope::counter_replay::user;
    const kscope::counter_result r =
        kscope::profile_counters(default_set ? std::vector<std::string>{} : dram, read_only, m.options);
    print(r);
    REQUIRE_MESSAGE(r.ok(), r.message);
    REQUIRE(r.kernels.size() == 1);  // the sweep's range is not a result
    if (m.options.ranges == kscope::counter_ranges::per_kernel) {
      CHECK(r.kernels[0].name.find("read_only_sweep") != std::string::npos);
      CHECK(r.kernels[0].index == 0);
    }
    const double written = r.kernels[0].value("dram__bytes_write.sum");
    const double read = r.kernels[0].value("dram__bytes_read.sum");
    MESSAGE(m.label << ": read " << read << " bytes, wrote " << written << " bytes");
    CHECK_MESSAGE(written <= allowed, m.label << ": a read-only kernel wrote " << written << " bytes");
    const double later = r.kernels[0].value(kscope::dram_write_back_metric);
    MESSAGE(m.label << ": write-back after it " << later << " bytes");
    CHECK_MESSAGE(later <= allowed, m.label << ": a read-only kernel left " << later << " bytes dirty");
    CHECK_MESSAGE(within(read, read_bytes, 0.03), m.label << ": read " << read << ", expected " << read_bytes);
    CHECK(std::none_of(r.notes.begin(), r.notes.end(),
                       [](const std::string& note) { return note.find("L2 sweep") != std::string::npos; }));
  }

  // Kernel replay in several passes (the default set): CUPTI's save and restore of device
  // memory leave dirty lines that the kernel's pass writes back, where no sweep can run.
  // The result says so, with what the leading sweep measured, and records no write-back.
  dirty_the_l2();
  const kscope::counter_result replayed = kscope::profile_counters({}, read_only);
  print(replayed);
  REQUIRE_MESSAGE(replayed.ok(), replayed.message);
  REQUIRE(replayed.kernels.size() == 1);
  CHECK(replayed.passes > 1);
  MESSAGE("kernel replay in " << replayed.passes << " passes: the read-only kernel wrote "
                              << replayed.kernels[0].value("dram__bytes_write.sum") << " bytes, the leading sweep "
                              << replayed.replay_dirty_bytes);
  CHECK(std::isfinite(replayed.replay_dirty_bytes));
  CHECK(std::isnan(replayed.kernels[0].value(kscope::dram_write_back_metric)));
  CHECK(std::any_of(replayed.notes.begin(), replayed.notes.end(),
                    [](const std::string& n) { return n.find("kernel replay in") == 0; }));

  // For the record (bench/RESULTS.md): the same kernel without the sweep.
  kscope::counter_options unswept;
  unswept.sweep_l2 = false;
  dirty_the_l2();
  const kscope::counter_result r = kscope::profile_counters(dram, read_only, unswept);
  REQUIRE_MESSAGE(r.ok(), r.message);
  REQUIRE(r.kernels.size() == 1);
  MESSAGE("without the L2 sweep: the read-only kernel wrote " << r.kernels[0].value("dram__bytes_write.sum")
                                                               << " bytes");
}

// A copy smaller than the L2 leaves most of its output dirty in the L2 when it ends: its
// range's dram__bytes_write.sum misses it (as Nsight Compute's does); the sweep after the
// work writes it back and records it as kscope__dram_bytes_write_back.sum. Together they
// make the 16 MiB copy's 16 MiB (within 3 %) in each mode, and two chained copies write
// 32 MiB in all: the first's output, still in the L2 at the end, is the last's write-back.
TEST_CASE("a copy smaller than the L2 writes all its output: the trailing sweep counts what it left dirty") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  constexpr std::size_t n = std::size_t{4} << 20;  // 16 MiB per buffer
  device_buffer a(n * sizeof(float)), b(n * sizeof(float)), c(n * sizeof(float));
  const int blocks = copy_blocks();
  const double bytes = 4.0 * static_cast<double>(n);
  const std::vector<std::string> dram = {"dram__bytes_read.sum", "dram__bytes_write.sum"};
  const auto written = [](const kscope::counter_values& k) {
    const double later = k.value(kscope::dram_write_back_metric);
    return k.value("dram__bytes_write.sum") + (std::isfinite(later) ? later : 0.0);
  };
  for (const kscope::counter_replay replay : {kscope::counter_replay::kernel, kscope::counter_replay::user}) {
    kscope::counter_options o;
    o.replay = replay;
    const char* label = replay == kscope::counter_replay::kernel ? "kernel replay" : "user replay";
    CAPTURE(label);
    const kscope::counter_result r =
        kscope::profile_counters(dram, [&] { copy_floats<<<blocks, 256>>>(a.get(), b.get(), n); }, o);
    print(r);
    REQUIRE_MESSAGE(r.ok(), r.message);
    REQUIRE(r.kernels.size() == 1);
    MESSAGE(label << ": in the range " << r.kernels[0].value("dram__bytes_write.sum") << " bytes written, after it "
                  << r.kernels[0].value(kscope::dram_write_back_metric));
    CHECK(std::isfinite(r.kernels[0].value(kscope::dram_write_back_metric)));
    CHECK_MESSAGE(within(written(r.kernels[0]), bytes, 0.03),
                  label << ": wrote " << written(r.kernels[0]) << ", expected " << bytes);
    CHECK_MESSAGE(within(r.kernels[0].value("dram__bytes_read.sum"), bytes, 0.03),
                  label << ": read " << r.kernels[0].value("dram__bytes_read.sum") << ", expected " << bytes);
  }

  // Two chained copies: 32 MiB written in all, per kernel and as one range.
  const auto chain = [&] {
    copy_floats<<<blocks, 256>>>(a.get(), b.get(), n);
    copy_floats<<<blocks, 256>>>(b.get(), c.get(), n);
  };
  const kscope::counter_result per_kernel = kscope::profile_counters(dram, chain);
  print(per_kernel);
  REQUIRE_MESSAGE(per_kernel.ok(), per_kernel.message);
  REQUIRE(per_kernel.kernels.size() == 2);
  const double both = written(per_kernel.kernels[0]) + written(per_kernel.kernels[1]);
  CHECK(std::isnan(per_kernel.kernels[0].value(kscope::dram_write_back_metric)));  // the last kernel's only
  CHECK_MESSAGE(within(both, 2 * bytes, 0.03), "two copies wrote " << both << ", expected " << 2 * bytes);
  kscope::counter_options whole;
  whole.ranges = kscope::counter_ranges::whole_callable;
  const kscope::counter_result one = kscope::profile_counters(dram, chain, whole);
  print(one);
  REQUIRE_MESSAGE(one.ok(), one.message);
  REQUIRE(one.kernels.size() == 1);
  CHECK_MESSAGE(within(written(one.kernels[0]), 2 * bytes, 0.03),
                "one range wrote " << written(one.kernels[0]) << ", expected " << 2 * bytes);
  // The first copy's source comes from DRAM, the second's from the L2: 16 MiB read.
  MESSAGE("one range read " << one.kernels[0].value("dram__bytes_read.sum") << " bytes");

  // For the record: without the sweeps.
  kscope::counter_options unswept;
  unswept.sweep_l2 = false;
  const kscope::counter_result bare =
      kscope::profile_counters(dram, [&] { copy_floats<<<blocks, 256>>>(a.get(), b.get(), n); }, unswept);
  REQUIRE_MESSAGE(bare.ok(), bare.message);
  CHECK(std::isnan(bare.kernels.at(0).value(kscope::dram_write_back_metric)));
  MESSAGE("without the L2 sweeps the 16 MiB copy wrote " << bare.kernels.at(0).value("dram__bytes_write.sum")
                                                          << " bytes");
}

// The sweeps are ranges of the pass but never results: a work that launches no kernel has
// none, and a work past max_kernels keeps max_kernels of them, the rest counted as dropped.
TEST_CASE("the sweeps are never results: no kernel gives none, max_kernels holds with them") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  const std::vector<std::string> dram = {"dram__bytes_read.sum", "dram__bytes_write.sum"};
  for (const kscope::counter_replay replay : {kscope::counter_replay::kernel, kscope::counter_replay::user}) {
    kscope::counter_options o;
    o.replay = replay;
    int calls = 0;
    const kscope::counter_result none = kscope::profile_counters(dram, [&] { ++calls; }, o);
    print(none);
    REQUIRE_MESSAGE(none.ok(), none.message);
    CHECK(calls >= 1);
    CHECK(none.kernels.empty());
    CHECK(none.ranges_dropped == 0);
    CHECK(none.message.find("the work launched no kernel") != std::string::npos);
  }

  constexpr std::size_t n = std::size_t{1} << 20;
  device_buffer a(n * sizeof(float)), b(n * sizeof(float));
  kscope::counter_options two;
  two.max_kernels = 2;
  const kscope::counter_result r = kscope::profile_counters(
      dram,
      [&] {
        copy_floats<<<64, 256>>>(a.get(), b.get(), n);
        scale_floats<<<64, 256>>>(b.get(), n, 0.5f);
        copy_floats<<<64, 256>>>(b.get(), a.get(), n);
      },
      two);
  print(r);
  REQUIRE_MESSAGE(r.ok(), r.message);
  REQUIRE(r.kernels.size() == 2);
  CHECK(r.ranges_dropped == 1);
  CHECK(r.kernels[0].name.find("copy_floats") != std::string::npos);
  CHECK(r.kernels[1].name.find("scale_floats") != std::string::npos);
  CHECK(std::any_of(r.notes.begin(), r.notes.end(),
                    [](const std::string& note) { return note.find("beyond max_kernels") != std::string::npos; }));
  // Neither result is a sweep (a sweep reads twice the L2: 100+ MB; these read 4 MiB each).
  for (const kscope::counter_values& k : r.kernels) CHECK(k.value("dram__bytes_read.sum") < 16e6);

  // Without kernel names the number of lost kernels is unknown: the full image is said.
  // (CUPTI 13.0 reported numOfRangeDropped = 0 here, with 8 of 10 launches dropped.)
  two.name_kernels = false;
  const kscope::counter_result unnamed = kscope::profile_counters(
      dram,
      [&] {
        for (int i = 0; i < 5; ++i) copy_floats<<<64, 256>>>(a.get(), b.get(), n);
      },
      two);
  print(unnamed);
  REQUIRE_MESSAGE(unnamed.ok(), unnamed.message);
  CHECK(unnamed.kernels.size() == 2);
  CHECK(std::any_of(unnamed.notes.begin(), unnamed.notes.end(),
                    [](const std::string& note) { return note.find("counter-data image was full") != std::string::npos; }));
  for (const kscope::counter_values& k : unnamed.kernels) CHECK(k.value("dram__bytes_read.sum") < 16e6);
}

TEST_CASE("unavailable paths answer with one message and never run the work") {
  int calls = 0;
  const auto work = [&calls] { ++calls; };

  kscope::counter_result r = kscope::profile_counters({"dram__byte_read.sum"}, work);
  MESSAGE(r.message);
  CHECK(r.state == kscope::counter_state::unknown_metric);
  CHECK(r.message.find("did you mean dram__bytes_read.sum") != std::string::npos);
  CHECK(calls == 0);

  kscope::counter_options missing_library;
  missing_library.nvperf_host_library = "/nonexistent/libnvperf_host.so";
  r = kscope::profile_counters({"dram__bytes_read.sum"}, work, missing_library);
  MESSAGE(r.message);
  CHECK(r.state == kscope::counter_state::unavailable);
  CHECK(r.message.find("libnvperf_host") != std::string::npos);
  CHECK(r.message.find("/nonexistent/libnvperf_host.so") != std::string::npos);
  CHECK(calls == 0);

  // A pass inside a pass: the inner one is refused at once, the outer one completes.
  constexpr std::size_t n = std::size_t{1} << 20;
  device_buffer src(n * sizeof(float)), dst(n * sizeof(float));
  kscope::counter_result inner;
  const kscope::counter_result outer = kscope::profile_counters({"gpu__time_duration.sum"}, [&] {
    inner = kscope::profile_counters({"gpu__time_duration.sum"}, work);
    copy_floats<<<64, 256>>>(src.get(), dst.get(), n);
  });
  MESSAGE(inner.message);
  CHECK(inner.state == kscope::counter_state::busy);
  CHECK(inner.message.find("another counter pass is running") != std::string::npos);
  CHECK(calls == 0);
  REQUIRE_MESSAGE(outer.ok(), outer.message);
  CHECK(outer.kernels.size() == 1);
}
