// bench::counters() on a real GPU (run by the lead on an H100/H200; skipped without a
// device): the one profiled call after the timed samples must measure what the kernels
// provably do, and must not touch the timing.
//
// - A copy of n floats (n = 2^30 where memory allows, as in counters_test.cu, so that what
//   the L2 still holds before or after the kernel is under 1.5 % of the traffic): DRAM read
//   + write within 3 % of 2 x 4n bytes, classified memory-bound at DRAM, no discrepancy line
//   for the declared 8n bytes. Timing: the same bench run without counters gives a median
//   within 3 %, and the calls made with counters beyond what the samples account for are
//   exactly those of the profiled call: one per counter pass (user replay), plus one for the
//   warp-stall pass (PC sampling, bench::warp_stalls, on by default) when the result says it
//   ran; none of them is a sample.
// - A naive fp32 GEMM, n = 512, one thread per output, one explicit FMA per (i, j, k):
//   exactly n^3 FFMA, no FADD or FMUL, so 2 n^3 fp32 FLOP; declared with the right FLOPs and
//   wrong bytes, only the bytes get the declared-vs-measured line. One long kernel is not
//   launch-bound.
// Counters are needed: where tests/gpu/expectations.hpp does not expect them the cases do not
// run (exit 77). Every report is printed, for bench/RESULTS.md.
#include <kscope/bench/bench.hpp>

#include <doctest/doctest.h>

#include "expectations.hpp"

#include "test_kernels.cuh"

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <string>

namespace {

#define KSCOPE_TEST_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call ": " << cudaGetErrorString(cudaGetLastError()))

using kscope_test::copy_floats;

using kscope_test::naive_sgemm;

class device_buffer {
 public:
  explicit device_buffer(std::size_t bytes) {
    REQUIRE_MESSAGE(cudaMalloc(&data_, bytes) == cudaSuccess, "cudaMalloc of " << bytes << " bytes");
    KSCOPE_TEST_CUDA(cudaMemset(data_, 0, bytes));
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
  KSCOPE_TEST_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::size_t n = std::size_t{1} << 30;
  while (n > (std::size_t{1} << 20) && 2 * n * sizeof(float) > free_bytes / 10 * 8) n /= 2;
  return n;
}

int copy_blocks() {
  int device = 0, sms = 0;
  KSCOPE_TEST_CUDA(cudaGetDevice(&device));
  KSCOPE_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms * 8;
}

void print(const kscope::bench_result& r) {
  kscope::bench_report{kscope::describe_bench_context(), {r}}.print();
}

// Calls of the callable that the timed samples do not account for (the discarded call,
// estimates and warm-up are in warmup_calls; each measured sample, dropped or not, is
// launches_per_sample calls): the same for two runs of one bench, plus, with counters, the
// profiled calls: one per counter pass (user replay) and, when the warp-stall pass ran
// (bench::warp_stalls, on by default: "warp stalls (one more call, PC sampling, never
// timed)"), one more call for it.
long long unaccounted_calls(long long calls, const kscope::bench_result& r) {
  const std::size_t samples = r.series.samples_s.size() + r.series.invalid_samples;
  return calls - static_cast<long long>(r.series.warmup_calls) -
         static_cast<long long>(samples * r.series.launches_per_sample);
}

// The calls of the warp-stall pass, as the result tells them: {fewest, most}.
// bench_counters::warp_stalls is nullopt when no stall pass was asked for or taken (0
// calls); collected means the sampled call ran (1 call). Present but not collected is the
// one case the result leaves open: profile_warp_stalls does not call the work when sampling
// cannot start ("warp stalls unavailable: ..."), but does when the call ran and gave no
// samples or failed afterwards; then 0 or 1.
struct call_range {
  long long fewest = 0;
  long long most = 0;
};
call_range warp_stall_calls(const kscope::bench_counters& c) {
  if (!c.warp_stalls) return {0, 0};
  if (c.warp_stalls->collected) return {1, 1};
  return {0, 1};
}

}  // namespace

TEST_CASE("bench::counters on a copy: DRAM bytes within 3 % of 2 x bytes, memory-bound at DRAM, timing unaffected") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  const std::size_t n = copy_length();
  const double bytes = 4.0 * static_cast<double>(n);
  MESSAGE("copy of " << n << " floats (" << bytes << " bytes per buffer)");
  device_buffer src(n * sizeof(float)), dst(n * sizeof(float));
  const int blocks = copy_blocks();
  long long calls = 0;
  kscope::bench copy{"copy", [&](cudaStream_t s) {
                       ++calls;
                       copy_floats<<<blocks, 256, 0, s>>>(src.get(), dst.get(), n);
                     }};
  copy.set_work({0, 2 * bytes}).dtype("fp32").launches_per_sample(1);  // one call per launch: calls can be counted

  const kscope::bench_result plain = copy.run();
  print(plain);
  REQUIRE_MESSAGE(plain.valid(), plain.invalid_reason);
  const long long plain_extra = unaccounted_calls(calls, plain);

  calls = 0;
  copy.counters();
  const kscope::bench_result r = copy.run();
  print(r);
  REQUIRE_MESSAGE(r.valid(), r.invalid_reason);
  REQUIRE(r.counters);
  REQUIRE_MESSAGE(r.counters->collected(), r.counters->message);
  const kscope::bench_counters& c = *r.counters;

  // The profiled calls, one per counter pass and one for the warp-stall pass when it ran,
  // are more than the samples account for, and none is a sample.
  CHECK(c.passes >= 1);
  // warp_stalls() is on by default: the result carries the stall pass, taken or not.
  CHECK(c.warp_stalls);
  const call_range stall_calls = warp_stall_calls(c);
  const long long extra = unaccounted_calls(calls, r) - plain_extra - static_cast<long long>(c.passes);
  MESSAGE("profiled calls: " << c.passes << " counter passes, " << extra << " more; warp-stall pass: "
                             << (c.warp_stalls ? c.warp_stalls->message : std::string("not taken")));
  CHECK(extra >= stall_calls.fewest);
  CHECK(extra <= stall_calls.most);
  // The stall pass runs before the counter pass (after one, CUPTI's PC sampling names no
  // kernel loaded before it): a copy of 2 x 4 GiB is sampled, wherever PC sampling is
  // expected to work (tests/gpu/expectations.hpp); elsewhere its refusal is the message.
  if (kscope_test::expected(kscope_test::feature::pc_sampling))
    CHECK_MESSAGE((c.warp_stalls && c.warp_stalls->collected),
                  (c.warp_stalls ? c.warp_stalls->message : std::string("no warp-stall pass in the result")));
  if (c.warp_stalls && c.warp_stalls->collected) CHECK(c.warp_stalls->samples > 0);
  CHECK_MESSAGE(std::fabs(r.median_s() / plain.median_s() - 1) <= 0.03,
                "median " << r.median_s() << " s with counters, " << plain.median_s() << " s without");

  CHECK(c.kernels == 1);
  REQUIRE(c.kernel_names.size() == 1);
  CHECK(c.kernel_names[0].find("copy_floats") != std::string::npos);
  // Read + written in the range, and the write-back of what the copy left dirty in the L2
  // (its last ~22 MB on an H200), which only the volume counts, not the roofline's rate.
  const double in_range = kscope::metric_value(c.metrics, kscope::counter_metric::dram_read_bytes) +
                          kscope::metric_value(c.metrics, kscope::counter_metric::dram_write_bytes);
  const double dram = kscope::dram_bytes_moved(c.metrics);
  MESSAGE("DRAM in the range " << in_range << " bytes, with the write-back " << dram);
  CHECK(dram >= in_range);
  CHECK_MESSAGE(std::fabs(dram / (2 * bytes) - 1) <= 0.01, "DRAM moved " << dram << " bytes, expected " << 2 * bytes);
  REQUIRE(c.measured);
  REQUIRE(c.measured->find(kscope::memory_level::dram));
  CHECK(c.measured->find(kscope::memory_level::dram)->bytes == in_range);
  CHECK(c.measured->flops.total == 0);  // a copy executes no FP instruction
  REQUIRE(c.declared_vs_measured);
  CHECK_MESSAGE(c.declared_vs_measured->text.empty(), c.declared_vs_measured->text);
  REQUIRE(c.classified);
  CHECK_MESSAGE(c.classified->verdict.kind == kscope::bottleneck::memory, c.classified->verdict.text);
  CHECK_MESSAGE(c.classified->verdict.where == "DRAM", c.classified->verdict.text);
}

TEST_CASE("bench::counters on a naive fp32 GEMM, n = 512: exactly 2 n^3 FP32 FLOPs, and a line for wrong bytes") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  constexpr int n = 512;
  device_buffer a(sizeof(float) * n * n), b(sizeof(float) * n * n), c(sizeof(float) * n * n);
  const dim3 block(16, 16);
  const dim3 grid(n / 16, n / 16);
  const double n3 = static_cast<double>(n) * n * n;
  kscope::bench gemm{"naive sgemm 512", [&](cudaStream_t s) { naive_sgemm<<<grid, block, 0, s>>>(a.get(), b.get(), c.get(), n); }};
  // The FLOPs are right; the bytes are wrong on purpose (1 kB for three 1 MiB matrices).
  gemm.shape({n, n, n}).dtype("fp32").set_work({2 * n3, 1e3}).counters();
  const kscope::bench_result r = gemm.run();
  print(r);
  REQUIRE_MESSAGE(r.valid(), r.invalid_reason);
  REQUIRE(r.counters);
  REQUIRE_MESSAGE(r.counters->collected(), r.counters->message);
  const kscope::bench_counters& k = *r.counters;
  CHECK(k.kernels == 1);

  const kscope::flop_count f = kscope::count_flops(k.metrics);
  CHECK(f.complete);
  CHECK(f.of(kscope::data_type::fp32).fmas == n3);
  CHECK(f.of(kscope::data_type::fp32).adds == 0);
  CHECK(f.of(kscope::data_type::fp32).muls == 0);
  CHECK(f.of(kscope::data_type::fp32).flops == 2 * n3);  // 268435456
  CHECK(f.of(kscope::data_type::fp64).flops == 0);
  // nvcc's HFMA2.MMA register moves (tests/gpu/counters_test.cu): at most one per output.
  CHECK(f.of(kscope::data_type::fp16).fmas <= static_cast<double>(n) * n);
  CHECK(f.precision_text() == "fp32");
  REQUIRE(k.measured);
  CHECK(k.measured->flops.total == 2 * n3 + f.of(kscope::data_type::fp16).flops);

  REQUIRE(k.declared_vs_measured);
  const kscope::work_check& d = *k.declared_vs_measured;
  CHECK(d.bytes_differ);
  CHECK_FALSE(d.flops_differ);  // 2 n^3 declared, 2 n^3 (+ <= 2 n^2 fp16 moves) executed
  CHECK_MESSAGE(d.text.find("declared 1.00 kB, DRAM moved ") == 0, d.text);
  const std::string md = kscope::bench_report{kscope::describe_bench_context(), {r}}.markdown();
  CHECK(md.find("- declared vs measured (per call, over 10 % apart): declared 1.00 kB, DRAM moved ") !=
        std::string::npos);

  // One long kernel: whatever limits it, the GPU is not idle between launches.
  REQUIRE(k.classified);
  CHECK_MESSAGE(k.classified->verdict.kind != kscope::bottleneck::launch, k.classified->verdict.text);
}
