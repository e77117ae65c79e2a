// kscope/bench/result.hpp — what a benchmark run produces, as plain values.
//
// Plain data so results can be built by hand in tests, written as markdown, JSON and
// CSV (format.hpp) and compared without a GPU: nothing here includes a CUDA header. The
// device is described by device_info (device/device_info.hpp), the same description
// session reports carry. Users include <kscope/bench/bench.hpp>; the types below are part
// of its public API.
#pragma once

#include "../core/config.hpp"
#include "../evidence/metrics.hpp"
#include "../core/roofline.hpp"
#include "../core/stats.hpp"
#include "../core/sweep.hpp"
#include "../device/device_info.hpp"
#include "sampler.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// Where benchmark numbers were taken: printed above every table and stored in the JSON
// "context" block. The GPU is the device_info query_device() gives (gpu.present == false:
// no GPU, gpu.problem says why); the rest is what only a benchmark record needs.
// describe_bench_context() (bench.hpp) fills it for the current device.
//
//   kscope::bench_context c = kscope::describe_bench_context();
//   if (c.gpu.present) std::printf("%s, %d SMs\n", c.gpu.name.c_str(), c.gpu.sm_count);
struct bench_context {
  std::string kscope_version = KSCOPE_VERSION_STRING;
  std::string timestamp_utc;  // ISO 8601, when the context was taken
  std::string host_name;
  device_info gpu;
};

// Resources of a kernel and its theoretical occupancy at the launch configuration the
// benchmark declared (bench::kernel). Empty `error` means the query worked.
//
//   kscope::bench_result r = b.kernel(my_kernel, 256).run();
//   if (r.resources) std::printf("%d regs, %.0f %% occupancy\n", r.resources->registers_per_thread,
//                                100 * r.resources->occupancy);
struct kernel_resources {
  int block_threads = 0;
  std::size_t dynamic_smem_bytes = 0;
  int registers_per_thread = 0;
  std::size_t static_smem_bytes = 0;
  std::size_t local_bytes_per_thread = 0;   // spills and local arrays
  int max_threads_per_block = 0;
  int active_blocks_per_sm = 0;
  int max_warps_per_sm = 0;
  double occupancy = std::numeric_limits<double>::quiet_NaN();  // active warps / max warps
  int ptx_version = 0;
  int binary_version = 0;
  std::string error;
};

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

// The hardware counters of a benchmark's call (bench::counters), profiled after the timed
// samples: the kernels it launched, one range each under user replay (the call runs once
// per counter pass), aggregated into one call
// (counter_aggregate: counts and bytes summed, percentages weighted by kernel time), and
// what they say: the measured roofline point, where the declared work differs from it,
// and the classification with its evidence. The profiled calls are slow (serialised) and
// never part of the timing statistics.
//
//   kscope::bench_result r = copy.counters().run();
//   if (r.counters && r.counters->collected()) {
//     double dram = kscope::metric_value(r.counters->metrics, kscope::counter_metric::dram_read_bytes);
//     std::puts(r.counters->classified->verdict.text.c_str());   // "memory-bound: DRAM at 91% ..."
//   } else if (r.counters) {
//     std::puts(r.counters->message.c_str());                     // why there are none
//   }
// The warp-stall pass of the profiled call (PC sampling): the stall shares the
// classification takes as evidence of why warps wait, or why there are none.
struct bench_warp_stalls {
  bool collected = false;
  std::string message;              // one line: what was sampled, or why not
  std::vector<stall_share> shares;  // every reason but "selected", as a share of all samples
  std::uint64_t samples = 0;
};

struct bench_counters {
  // kscope::to_string(counter_state) of the pass: "collected", "no permission",
  // "unavailable", "disabled", "busy", "unknown metric", "failed", ...
  std::string state;
  std::string message;             // one line: what was collected, or why not
  std::vector<std::string> notes;  // default metrics left out, fallbacks taken, kernels dropped
  std::vector<std::string> requested;     // the metric names asked for (empty: the default set)
  metric_values metrics;                  // per call: every kernel of the call aggregated
  std::size_t kernels = 0;                // kernels profiled in the call
  std::vector<std::string> kernel_names;  // in launch order ("kernel #i" when names were withheld)
  std::size_t passes = 0;                 // replay passes the metric set needed
  // Only when collected; the roofs are the benchmark's (peak_flops_per_s,
  // peak_bytes_per_s), L2 and L1 points unplaced (no roof for them is known here).
  std::optional<measured_roofline> measured;
  // Declared work (bench::set_work) against the measured work of the call; `text` is ""
  // when they agree within 10 % or nothing was declared.
  std::optional<work_check> declared_vs_measured;
  std::optional<classification> classified;
  // One PC-sampling pass of the call (bench::warp_stalls, on with counters()); nullopt when
  // not taken.
  std::optional<bench_warp_stalls> warp_stalls;

  [[nodiscard]] bool collected() const noexcept { return state == "collected"; }
};

// Everything one benchmark run measured.
//
//   kscope::bench_result r = b.run();
//   if (!r.valid()) std::fprintf(stderr, "%s: %s\n", r.name.c_str(), r.invalid_reason.c_str());
//   r.median_s();                    // seconds per launch, the median of the samples used
//   r.analysis.stats.median_ci;      // its confidence interval
//   r.stopped;                       // target_reached, which budget ran out, error or invalid
//   r.stop_message;                  // what happened, in words
//   r.flops_per_s.median;            // with r.flops_per_s.ci (NaN when invalid)
//   if (r.reference) r.reference->relative_speed;
struct bench_result {
  std::string name;
  bench_metadata metadata;
  work declared{};
  bench_options options;
  stop_reason stopped = stop_reason::error;
  // Why the run stopped, true to what happened: "target reached: ...", "time budget of
  // 10 s spent after 26 samples; not met: ...", "error: ...", "invalid: ...".
  std::string stop_message;
  // Why the numbers are not the benchmark's (stop_reason::invalid: the evidence and the
  // likely cause; stop_reason::error: what failed); empty when valid().
  std::string invalid_reason;
  double wall_s = 0;          // harness wall time: estimates, warm-up, samples, reference
  std::size_t rounds = 0;
  // The timer's empty sample (its events with nothing between them): what "no work"
  // reads as on this stream; NaN when the timer does not know.
  double empty_stream_s = std::numeric_limits<double>::quiet_NaN();
  sample_series series;
  series_analysis analysis;
  double sm_clock_max_mhz = std::numeric_limits<double>::quiet_NaN();  // rated_sm_clock_mhz(context.gpu)
  rate_estimate flops_per_s;
  rate_estimate bytes_per_s;
  double peak_flops_per_s = std::numeric_limits<double>::quiet_NaN();
  double peak_bytes_per_s = std::numeric_limits<double>::quiet_NaN();
  std::string peak_flops_source;  // "given", or which theoretical roof the dtype implied (choose_roof)
  double fraction_of_peak_bandwidth = std::numeric_limits<double>::quiet_NaN();
  std::optional<placement> roofline;
  std::optional<kernel_resources> resources;
  std::optional<reference_result> reference;
  // bench::counters(): the profiled call, or nullopt when counters were not asked for or
  // the result is not valid (an invalid or failed run is never profiled).
  std::optional<bench_counters> counters;
  std::vector<std::string> warnings;

  [[nodiscard]] double median_s() const noexcept { return analysis.stats.median; }
  [[nodiscard]] interval median_ci_s() const noexcept;
  [[nodiscard]] bool target_reached() const noexcept;
  // Whether the numbers are the benchmark's: false when the run failed (error) or what
  // was timed cannot have been its work (invalid); invalid_reason says why. A valid
  // result may still have missed its precision target (target_reached() says that).
  [[nodiscard]] bool valid() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL interval bench_result::median_ci_s() const noexcept { return analysis.stats.median_ci; }

KSCOPE_DECL bool bench_result::target_reached() const noexcept { return stopped == stop_reason::target_reached; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool bench_result::valid() const noexcept {
  return stopped != stop_reason::error && stopped != stop_reason::invalid;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
