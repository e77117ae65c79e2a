// kscope/bench/result.hpp — what a benchmark run produces, as plain values.
//
// Plain data so results can be built by hand in tests, written as markdown, JSON and
// CSV (detail/bench_format.hpp) and compared without a GPU. Users include
// <kscope/bench.hpp>; the types below are part of its public API.
#pragma once

#include "../core/roofline.hpp"
#include "../core/stats.hpp"
#include "../core/sweep.hpp"
#include "detail/cuda_timer.hpp"
#include "sampler.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// What a benchmark computes, printed with every number it produces.
//   kscope::bench_metadata m{{8192, 8192, 8192}, "bf16", {8192, 1}, {{"layout", "NT"}}};
struct bench_metadata {
  std::vector<long long> shape;
  std::string dtype;
  std::vector<long long> strides;
  std::vector<std::pair<std::string, param_value>> params;  // free-form key=value, in order
};

// A rate (FLOP/s or B/s) from the median time, with the median's CI transformed
// (rate = amount / time is monotone, so the interval maps end to end, reversed).
//   r.flops_per_s.median; r.flops_per_s.ci.lo; r.flops_per_s.ci.hi;
struct rate_estimate {
  double median = std::numeric_limits<double>::quiet_NaN();
  interval ci{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN(),
              std::numeric_limits<double>::quiet_NaN()};
};

// The numerical check against a reference: outputs read after one untimed run of each.
// max_rel_error is max_i |x_i - r_i| / max(|r_i|, 1e-3 * max_j |r_j|): entries under
// 0.1 % of the largest reference value are measured against that scale instead of their
// own, because a sum with cancellation (a GEMM output near zero) carries the rounding
// error of its large terms, and dividing that by a tiny result reports noise as a bug.
// A NaN in the output (where the reference has none) makes the error infinite.
struct output_check {
  bool performed = false;
  std::size_t values = 0;
  double max_rel_error = std::numeric_limits<double>::quiet_NaN();
  double max_abs_error = std::numeric_limits<double>::quiet_NaN();
  double tolerance = std::numeric_limits<double>::quiet_NaN();  // NaN: report only, no verdict
  bool passed = true;   // false: tolerance exceeded, sizes differ, or reading failed
  std::string note;     // why the check failed or did not run
};

// The reference a benchmark was compared with (bench::reference), sampled in the same
// process, interleaved A B B A with the benchmark.
struct reference_result {
  std::string name;
  bench_metadata metadata;
  sample_series series;
  series_analysis analysis;
  // compare(reference samples, benchmark samples): ratio = benchmark time / reference time.
  comparison versus{};
  // reference time / benchmark time: 0.72 reads "72 % of the reference's speed".
  double relative_speed = std::numeric_limits<double>::quiet_NaN();
  interval relative_speed_ci{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::quiet_NaN()};
  output_check check;
};

// Everything one benchmark run measured.
//
//   kscope::bench_result r = b.run();
//   r.median_s();                    // seconds per launch, the median of the samples used
//   r.analysis.stats.median_ci;      // its confidence interval
//   r.stopped;                       // target_reached, or which budget ran out
//   r.flops_per_s.median;            // with r.flops_per_s.ci
//   if (r.reference) r.reference->relative_speed;
struct bench_result {
  std::string name;
  bench_metadata metadata;
  work declared{};
  bench_options options;
  stop_reason stopped = stop_reason::error;
  double wall_s = 0;          // harness wall time: estimates, warm-up, samples, reference
  std::size_t rounds = 0;
  sample_series series;
  series_analysis analysis;
  double sm_clock_max_mhz = std::numeric_limits<double>::quiet_NaN();  // rated (context)
  rate_estimate flops_per_s;
  rate_estimate bytes_per_s;
  double peak_flops_per_s = std::numeric_limits<double>::quiet_NaN();
  double peak_bytes_per_s = std::numeric_limits<double>::quiet_NaN();
  std::string peak_flops_source;  // "given", or which theoretical roof the dtype implied
  double fraction_of_peak_bandwidth = std::numeric_limits<double>::quiet_NaN();
  std::optional<placement> roofline;
  std::optional<kernel_resources> resources;
  std::optional<reference_result> reference;
  std::vector<std::string> warnings;

  [[nodiscard]] double median_s() const noexcept { return analysis.stats.median; }
  [[nodiscard]] interval median_ci_s() const noexcept { return analysis.stats.median_ci; }
  [[nodiscard]] bool target_reached() const noexcept { return stopped == stop_reason::target_reached; }
};

}  // namespace kscope
