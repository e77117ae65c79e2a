// kscope/bench/gbench.hpp — Google Benchmark adapter: each benchmark iteration is timed on
// the GPU with CUDA events and reported through State::SetIterationTime, with an
// optional L2 flush between iterations (not timed) and FLOP/s, B/s and % of roof
// counters.
//
//   #include <benchmark/benchmark.h>
//   #include <kscope/bench/gbench.hpp>
//
//   static void BM_copy(benchmark::State& state) {
//     kscope::gbench_options o;
//     o.flush_l2 = true;                      // cold L2 before every iteration
//     o.per_launch = {0, 2.0 * bytes};        // read + write
//     kscope::time_gpu_iterations(state, [&](kscope::bench_stream s) { copy<<<g, b, 0, s>>>(dst, src, n); }, o);
//   }
//   BENCHMARK(BM_copy)->UseManualTime();      // manual time = the GPU time reported here
//   KSCOPE_BENCHMARK_MAIN();                  // not BENCHMARK_MAIN(): see "Exit code" below
//
// Not included by kscope.hpp: only programs that include this header depend on Google
// Benchmark. Google Benchmark's statistics are its own (mean of iterations, optional
// repetitions); for medians with confidence intervals and adaptive stopping use
// kscope::bench (bench.hpp). Iterations share the harness's CUDA-event timer: a probe
// kernel holds the stream while each iteration is enqueued, so short kernels are timed
// back to back rather than at the host's launch rate, and it samples the SM clock,
// reported as the SM_MHz counter (median over iterations).
//
// A GPU benchmark that cannot be measured ends with State::SkipWithError and the reason:
//   - no GPU, or kscope built without CUDA (KSCOPE_HAS_CUDA=0: this header still compiles,
//     CPU benchmarks in the same program run as usual);
//   - a CUDA error or a throwing callable;
//   - an invalid result, by the rules kscope::bench applies (bench_schema.md, "Invalid
//     results"): no work reached the stream (a captured graph with no nodes, a capture
//     rejected for the legacy default stream, iterations no longer than an empty event
//     pair) or a rate above the device's peak.
//
// Exit code. Google Benchmark exits 0 when benchmarks report errors, so a CI job whose
// GPU benchmarks all failed would pass. kscope::gbench_main() (or KSCOPE_BENCHMARK_MAIN())
// runs the benchmarks and returns 1 when any GPU benchmark could not be measured, after
// listing why on stderr. To exit 0 anyway (a CPU-only CI machine running a mixed suite):
// set KSCOPE_GBENCH_ALLOW_SKIP=1 in the environment, or call kscope::gbench_allow_skip()
// before gbench_main. With your own main(), return kscope::gbench_exit_code() after
// RunSpecifiedBenchmarks().
#pragma once

#include "../core/config.hpp"

#if defined(__has_include)
#  if __has_include(<benchmark/benchmark.h>)
#    include <benchmark/benchmark.h>
#  else
#    error "kscope/bench/gbench.hpp needs Google Benchmark (<benchmark/benchmark.h>); install it and link benchmark::benchmark, or use kscope/bench/bench.hpp"
#  endif
#else
#  include <benchmark/benchmark.h>
#endif

#include "bench.hpp"
#include "detail/gbench_status.hpp"
#include "../core/detail/once.hpp"
#include "../core/detail/text_escape.hpp"
#include "../core/roofline.hpp"
#include "../device/device_info.hpp"

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// How time_gpu_iterations() times and labels a Google Benchmark run.
//   kscope::gbench_options o;
//   o.flush_l2 = true;
//   o.per_launch = {2.0 * m * n * k, 2.0 * (m * k + k * n + m * n)};
//   o.peak_flops_per_s = 989e12;            // for the roof_% counter
struct gbench_options {
  bool flush_l2 = false;                 // overwrite 2 x L2 before each iteration (untimed)
  std::size_t launches_per_iteration = 1;  // > 1: N launches per iteration (CUDA graph)
  work per_launch{};                     // work of one launch; zero: no rate counters
  // The compute roof for roof_%; NaN: no roof_% counter. Rates are checked against it,
  // or against the device's fastest theoretical roof when it is not given.
  double peak_flops_per_s = std::numeric_limits<double>::quiet_NaN();
  double peak_bytes_per_s = std::numeric_limits<double>::quiet_NaN();  // NaN: the device's theoretical DRAM peak
  bool hold_launches = true;             // see bench_options::hold_launches
  bench_stream stream = nullptr;         // nullptr: a stream the adapter creates
};

// Lets GPU benchmarks that could not be measured leave the exit code at 0 (they still
// report their error). The environment variable KSCOPE_GBENCH_ALLOW_SKIP=1 does the same.
//   kscope::gbench_allow_skip();        // e.g. when no GPU is expected on this runner
inline void gbench_allow_skip(bool allow = true) { detail::harness::gbench_failures().allow_skip(allow); }

// 1 when a GPU benchmark of this process could not be measured (no GPU, an error, an
// invalid result) and skipping is not allowed; else 0. For programs with their own main:
//   benchmark::RunSpecifiedBenchmarks();
//   return kscope::gbench_exit_code();
[[nodiscard]] inline int gbench_exit_code() {
  return detail::harness::gbench_exit_code(detail::harness::gbench_failures().count(),
                                           detail::harness::skip_allowed());
}

// Google Benchmark's main, with an exit code that says whether the GPU benchmarks ran:
// the failures are listed on stderr and the result is gbench_exit_code() (2 for
// unrecognized arguments, as BENCHMARK_MAIN's 1 would be ambiguous with a failure).
//   int main(int argc, char** argv) { return kscope::gbench_main(argc, argv); }
inline int gbench_main(int argc, char** argv) {
  char program[] = "benchmark";
  char* default_argv[] = {program, nullptr};
  if (argv == nullptr || argc < 1) {
    argc = 1;
    argv = default_argv;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const bool allowed = detail::harness::skip_allowed();
  const std::string summary = detail::harness::gbench_failure_summary(detail::harness::gbench_failures(), allowed);
  if (!summary.empty()) {
    std::fputs(detail::printable_text(summary).c_str(), stderr);
    std::fflush(stderr);
  }
  return gbench_exit_code();
}

// A main() that runs the registered benchmarks through kscope::gbench_main.
//   KSCOPE_BENCHMARK_MAIN();
#define KSCOPE_BENCHMARK_MAIN()                                                       \
  int main(int argc, char** argv) { return ::kscope::gbench_main(argc, argv); }      \
  static_assert(true, "KSCOPE_BENCHMARK_MAIN() takes a semicolon")

namespace detail {
namespace harness {

// Ends a GPU benchmark that cannot be measured: the reason goes to Google Benchmark (its
// output line) and to the process's record (the exit code). The loop that follows runs
// no iteration once an error is set; Google Benchmark expects it to be entered.
inline void gbench_fail(benchmark::State& state, const std::string& why, bool after_loop = false) {
  const std::string message = "kscope: " + why;
  gbench_failures().add(why);
  state.SkipWithError(message.c_str());
  if (!after_loop) {
    for (auto _ : state) {
    }
  }
}

// The device the benchmarks run on, queried once per process. A fork during the query
// waits for it, and the child never inherits it half-done (core/detail/once.hpp).
inline const bench_context& gbench_context() {
  static lazy_global<const bench_context> context{lock_rank::init_bench_context};
  return context.get([] {
    auto* built = new bench_context;
    *built = describe_bench_context();
    return built;
  });
}

}  // namespace harness
}  // namespace detail

#if KSCOPE_HAS_CUDA

// Runs the `for (auto _ : state)` loop: every iteration calls `launch(stream)`
// launches_per_iteration times between two CUDA events and reports the GPU time with
// SetIterationTime. Register the benchmark with ->UseManualTime(). Counters (per
// launch, from the mean iteration time, like Google Benchmark's own time column):
//   FLOP/s, B/s       from options.per_launch
//   roof_%            fraction of the roofline at the work's intensity (needs peaks)
//   BW_%              fraction of peak DRAM bandwidth
//   SM_MHz            median SM clock measured around the iterations
//   launches/iter     the batch size
// No GPU, CUDA errors, a throwing callable or an invalid result end the run with
// State::SkipWithError and count in gbench_exit_code().
template <class Launch>
void time_gpu_iterations(benchmark::State& state, Launch&& launch, const gbench_options& options = {}) {
  using detail::harness::gbench_fail;
  const bench_context& context = detail::harness::gbench_context();
  if (!context.gpu.present) {
    gbench_fail(state, "no GPU: " + (context.gpu.problem.empty() ? std::string("unknown reason") : context.gpu.problem) +
                           "; GPU benchmark skipped");
    return;
  }
  bench_options timer_options;
  timer_options.cache = options.flush_l2 ? cache_mode::cold : cache_mode::hot;
  timer_options.hold_launches = options.hold_launches;
  std::function<void(cudaStream_t)> fn = [&launch](cudaStream_t s) { launch(s); };
  detail::harness::cuda_bench_timer timer({std::move(fn)}, options.stream, timer_options);
  if (!timer.ready()) {
    gbench_fail(state, "the CUDA timer could not start: " + timer.error());
    return;
  }
  const std::size_t launches = options.launches_per_iteration > 0 ? options.launches_per_iteration : 1;
  auto timer_failure = [&timer] {
    return timer.error().empty() ? std::string("an iteration could not be timed") : timer.error();
  };
  const double empty_s = timer.empty_stream_s();
  // One call before anything else: module loading and allocations (e.g. cuBLAS
  // workspaces) belong to no iteration, and must not happen inside a graph capture.
  (void)timer.time(0, 1);
  // Three single calls: a call no longer than an empty sample put no work on the stream.
  std::vector<double> singles;
  for (int i = 0; i < 3; ++i) {
    const timed_sample x = timer.time(0, 1);
    if (x.total_s >= 0) singles.push_back(x.total_s);
  }
  if (singles.empty()) {
    gbench_fail(state, timer_failure());
    return;
  }
  const double single_s = quantile(singles, 0.5);
  if (detail::harness::indistinguishable_from_empty(single_s, empty_s)) {
    gbench_fail(state, "invalid: " + detail::harness::no_work_reason(
                                         "the benchmark's stream",
                                         detail::harness::empty_time_evidence("a single call (median of 3)", single_s,
                                                                              empty_s)));
    return;
  }
  timer.prepare(0, launches);
  const batch_capture captured = timer.capture(0);
  if (!captured.no_work.empty()) {
    gbench_fail(state, "invalid: " + detail::harness::no_work_reason("the benchmark's stream", captured.no_work));
    return;
  }
  (void)timer.time(0, launches);  // the first replay of a fresh graph

  double total_s = 0;
  std::size_t timed = 0;
  std::vector<double> clocks;
  std::string failure;
  for (auto _ : state) {
    const timed_sample s = timer.time(0, launches);
    if (!(s.total_s > 0)) {
      // A zero time is no work as surely as an empty sample is; anything else failed.
      failure = s.total_s == 0 ? "invalid: " + detail::harness::no_work_reason(
                                                   "the benchmark's stream",
                                                   detail::harness::empty_time_evidence("an iteration", 0, empty_s))
                               : timer_failure();
      break;
    }
    state.SetIterationTime(s.total_s);
    total_s += s.total_s;
    ++timed;
    if (std::isfinite(s.sm_clock_mhz)) clocks.push_back(s.sm_clock_mhz);
  }
  if (!failure.empty()) {
    gbench_fail(state, failure, true);
    return;
  }
  if (timed == 0) return;

  const double per_iteration_s = total_s / static_cast<double>(timed);
  if (detail::harness::indistinguishable_from_empty(per_iteration_s, empty_s)) {
    gbench_fail(state,
                "invalid: " + detail::harness::no_work_reason(
                                  "the benchmark's stream",
                                  detail::harness::empty_time_evidence("the mean iteration", per_iteration_s, empty_s)),
                true);
    return;
  }
  const double per_launch_s = per_iteration_s / static_cast<double>(launches);
  // The same ceilings as kscope::bench: the given compute peak, or the device's fastest
  // theoretical roof (no work runs faster); the given or theoretical DRAM peak.
  const device_peaks peaks = theoretical_peaks(context.gpu);
  double peak_bytes = options.peak_bytes_per_s;
  if (!(peak_bytes > 0)) peak_bytes = peaks.theoretical_bytes_per_s;
  detail::harness::rate_ceilings ceilings;
  ceilings.dram_bytes_per_s = peak_bytes;
  if (options.peak_flops_per_s > 0) {
    ceilings.flops_per_s = options.peak_flops_per_s;
    ceilings.flops_name = "the given " + detail::harness::format_rate(options.peak_flops_per_s, "FLOP/s") +
                          " compute peak (gbench_options::peak_flops_per_s)";
  } else {
    detail::harness::use_fastest_roof(peaks, ceilings);
  }
  const std::string impossible =
      detail::harness::impossible_rate(options.per_launch, per_launch_s, ceilings, options.flush_l2 && launches == 1);
  if (!impossible.empty()) {
    gbench_fail(state, "invalid: " + impossible, true);
    return;
  }

  if (options.per_launch.flops > 0) state.counters["FLOP/s"] = benchmark::Counter(options.per_launch.flops / per_launch_s);
  if (options.per_launch.bytes > 0) state.counters["B/s"] = benchmark::Counter(options.per_launch.bytes / per_launch_s);
  if (options.per_launch.bytes > 0 && peak_bytes > 0)
    state.counters["BW_%"] = benchmark::Counter(100.0 * options.per_launch.bytes / per_launch_s / peak_bytes);
  if (auto p = try_place(options.per_launch, per_launch_s, options.peak_flops_per_s, peak_bytes))
    state.counters["roof_%"] = benchmark::Counter(100.0 * p->fraction_of_roof);
  if (!clocks.empty()) state.counters["SM_MHz"] = benchmark::Counter(quantile(clocks, 0.5));
  state.counters["launches/iter"] = benchmark::Counter(static_cast<double>(launches));
}

#else  // !KSCOPE_HAS_CUDA

// Without CUDA the adapter still compiles, so one program can hold CPU and GPU
// benchmarks: each GPU benchmark reports why it was skipped (and counts in
// gbench_exit_code()). Write the callable with kscope::bench_stream to compile in both.
template <class Launch>
void time_gpu_iterations(benchmark::State& state, Launch&& /*launch*/, const gbench_options& /*options*/ = {}) {
  detail::harness::gbench_fail(state, "kscope was built without CUDA (KSCOPE_HAS_CUDA=0); GPU benchmark skipped");
}

#endif  // KSCOPE_HAS_CUDA

}  // namespace kscope
