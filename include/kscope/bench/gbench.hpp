// kscope/bench/gbench.hpp — Google Benchmark adapter: each benchmark iteration is timed on
// the GPU with CUDA events and reported through State::SetIterationTime, with an
// optional L2 flush between iterations (not timed) and FLOP/s, B/s and % of roof
// counters.
//
//   #include <benchmark/benchmark.h>
//   #include <kscope/gbench.hpp>
//
//   static void BM_copy(benchmark::State& state) {
//     kscope::gbench_options o;
//     o.flush_l2 = true;                      // cold L2 before every iteration
//     o.per_launch = {0, 2.0 * bytes};        // read + write
//     kscope::time_gpu_iterations(state, [&](cudaStream_t s) { copy<<<g, b, 0, s>>>(dst, src, n); }, o);
//   }
//   BENCHMARK(BM_copy)->UseManualTime();      // manual time = the GPU time reported here
//
// Not included by kscope.hpp: only programs that include this header depend on Google
// Benchmark. Google Benchmark's statistics are its own (mean of iterations, optional
// repetitions); for medians with confidence intervals and adaptive stopping use
// kscope::bench (bench.hpp). Iterations share the harness's CUDA-event timer: a probe
// kernel holds the stream while each iteration is enqueued, so short kernels are timed
// back to back rather than at the host's launch rate, and it samples the SM clock,
// reported as the SM_MHz counter (median over iterations).
#pragma once

#include "../core/config.hpp"

#if defined(__has_include)
#  if __has_include(<benchmark/benchmark.h>)
#    include <benchmark/benchmark.h>
#  else
#    error "kscope/gbench.hpp needs Google Benchmark (<benchmark/benchmark.h>); install it and link benchmark::benchmark, or use kscope/bench.hpp"
#  endif
#else
#  include <benchmark/benchmark.h>
#endif

#include "bench.hpp"
#include "../core/roofline.hpp"

#include <cmath>
#include <cstddef>
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
  double peak_flops_per_s = std::numeric_limits<double>::quiet_NaN();
  double peak_bytes_per_s = std::numeric_limits<double>::quiet_NaN();  // NaN: the device's theoretical DRAM peak
  bool hold_launches = true;             // see bench_options::hold_launches
  bench_stream stream = nullptr;         // nullptr: a stream the adapter creates
};

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
// CUDA errors or a throwing callable end the run with State::SkipWithError.
template <class Launch>
void time_gpu_iterations(benchmark::State& state, Launch&& launch, const gbench_options& options = {}) {
  bench_options timer_options;
  timer_options.cache = options.flush_l2 ? cache_mode::cold : cache_mode::hot;
  timer_options.hold_launches = options.hold_launches;
  std::function<void(cudaStream_t)> fn = [&launch](cudaStream_t s) { launch(s); };
  detail::harness::cuda_bench_timer timer({std::move(fn)}, options.stream, timer_options);
  if (!timer.ready()) {
    const std::string message = "kscope: the CUDA timer could not start: " + timer.error();
    state.SkipWithError(message.c_str());
    for (auto _ : state) {
    }
    return;
  }
  const std::size_t launches = options.launches_per_iteration > 0 ? options.launches_per_iteration : 1;
  // One call before anything else: module loading and allocations (e.g. cuBLAS
  // workspaces) belong to no iteration, and must not happen inside a graph capture.
  (void)timer.time(0, 1);
  timer.prepare(0, launches);
  (void)timer.time(0, launches);  // the first replay of a fresh graph

  double total_s = 0;
  std::size_t timed = 0;
  std::vector<double> clocks;
  std::string failure;
  for (auto _ : state) {
    const timed_sample s = timer.time(0, launches);
    if (!(s.total_s > 0)) {
      failure = timer.error().empty() ? "an iteration could not be timed" : timer.error();
      break;
    }
    state.SetIterationTime(s.total_s);
    total_s += s.total_s;
    ++timed;
    if (std::isfinite(s.sm_clock_mhz)) clocks.push_back(s.sm_clock_mhz);
  }
  if (!failure.empty()) {
    const std::string message = "kscope: " + failure;
    state.SkipWithError(message.c_str());
    return;
  }
  if (timed == 0) return;

  const double per_launch_s = total_s / static_cast<double>(timed * launches);
  if (options.per_launch.flops > 0) state.counters["FLOP/s"] = benchmark::Counter(options.per_launch.flops / per_launch_s);
  if (options.per_launch.bytes > 0) state.counters["B/s"] = benchmark::Counter(options.per_launch.bytes / per_launch_s);
  double peak_bytes = options.peak_bytes_per_s;
  if (!(peak_bytes > 0) && options.per_launch.bytes > 0)
    peak_bytes = theoretical_bytes_per_s(describe_bench_context().gpu);
  if (options.per_launch.bytes > 0 && peak_bytes > 0)
    state.counters["BW_%"] = benchmark::Counter(100.0 * options.per_launch.bytes / per_launch_s / peak_bytes);
  if (auto p = try_place(options.per_launch, per_launch_s, options.peak_flops_per_s, peak_bytes))
    state.counters["roof_%"] = benchmark::Counter(100.0 * p->fraction_of_roof);
  if (!clocks.empty()) state.counters["SM_MHz"] = benchmark::Counter(quantile(clocks, 0.5));
  state.counters["launches/iter"] = benchmark::Counter(static_cast<double>(launches));
}

#endif  // KSCOPE_HAS_CUDA

}  // namespace kscope
