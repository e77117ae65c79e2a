// kscope/bench/bench.hpp — the micro-benchmark harness: time a callable on a stream with CUDA
// events until its median is known to 1 %, compare it with a reference, and print the
// numbers with their intervals, clocks, resources and roofline placement.
//
//   kscope::bench gemm{"sgemm 4096", [&](cudaStream_t s) { my_sgemm<<<grid, block, 0, s>>>(a, b, c); }};
//   gemm.shape({4096, 4096, 4096}).dtype("fp32").set_work({2.0 * n * n * n, 3.0 * 4 * n * n})
//    .kernel(my_sgemm, 256);                        // registers, shared memory, occupancy
//   kscope::bench ref{"cuBLAS", [&](cudaStream_t s) { cublasSetStream(h, s); cublasSgemm(h, ...); }};
//   ref.output([&] { return read_back(c_ref); });            // before reference(): it copies ref
//   gemm.output([&] { return read_back(c); }, 1e-2).reference(ref);   // ABBA-interleaved, checked
//   kscope::bench_report report{kscope::describe_bench_context(), {gemm.run()}};
//   report.print();                       // markdown table: "72.0 % of cuBLAS, 95 % CI [71.4, 72.6]"
//   report.write_json("sgemm.json");      // schema kscope.bench/2 (docs/bench_schema.md)
//
// How a run goes (docs/bench_schema.md, "How the numbers are produced", has the details):
//   1. One call whose time is thrown away (module loading, allocations), then a first
//      estimate from three single launches.
//   2. Batching: a kernel shorter than 100 us is captured N times into a CUDA graph and
//      a sample times one replay; the per-launch time is reported, with "batched N".
//   3. Warm-up for >= 25 ms of GPU time and >= 10 calls; those samples are discarded.
//   4. Samples until the median's 95 % CI half-width is under 1 % of the median (with
//      >= 20 samples covering >= 50 ms), or the 10 s budget runs out; MSER-5 removes any
//      remaining transient. The report says which way it stopped.
//   5. With a reference: both are sampled in A B B A rounds, and the ratio of medians
//      comes with its interval (stats compare()).
//   6. Invalid results: a callable whose work never reaches the stream it receives (it
//      launches on the legacy default stream, on a stream of its own, or nothing) is
//      found by an empty captured graph, a capture the driver rejects, or times no longer
//      than an empty event pair; a rate above the device's peak is impossible too. The
//      result is then stop_reason::invalid, valid() is false, and it carries the reason
//      instead of rates, roofline and advice (docs/bench_schema.md, "Invalid results").
//   7. Counters (bench::counters, opt-in): after the timed samples, the call is profiled
//      with the CUPTI range profiler (per-kernel ranges, user replay: one extra call per
//      pass the metric set needs, so no device memory is saved and restored and the DRAM
//      writes are exact); its kernels' values are aggregated into the result with the
//      measured roofline point and the classification. Those calls are never samples. An
//      invalid or failed result is not profiled; unavailable counters leave one note and
//      the timing as it was.
// CUPTI is never enabled while timing: timings come from CUDA events only. The SM clock is
// measured around every sample by a one-thread probe kernel (clock64 over %globaltimer);
// samples under 90 % of the run's median clock are flagged, and optionally discarded.
// The roofline uses the device's theoretical peaks (device/device_info.hpp) and the
// compute roof of the benchmark's dtype by the rule every kscope report follows
// (device/roof_choice.hpp: "half" -> fp16 tensor, "float" or none -> fp32 plain), unless
// bench::peaks gives them.
//
// The callable must launch its work on the stream it receives (that stream is what the
// events, the graph capture and the hold kernel see) and should not synchronize it.
// Google Benchmark users: see gbench.hpp (not included by kscope.hpp).
#pragma once

#include "../core/config.hpp"
#include "../evidence/metrics.hpp"
#include "../counters/collect.hpp"
#include "../device/device.hpp"
#include "../warp_stalls/collect.hpp"
#include "detail/counter_pass.hpp"
#include "detail/cuda_timer.hpp"
#include "format.hpp"
#include "result.hpp"
#include "sampler.hpp"
#include "../core/roofline.hpp"
#include "../core/stats.hpp"
#include "../core/sweep.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>
#endif

namespace kscope {

// The stream a benchmark's callable receives. Without CUDA the type still exists so
// that code naming it compiles; bench::run() then reports that nothing could be timed.
#if KSCOPE_HAS_CUDA
using bench_stream = cudaStream_t;
#else
using bench_stream = void*;
#endif

// Compares a benchmark's output with a reference's (see output_check for the metric).
//   kscope::output_check c = kscope::check_outputs(mine, theirs, 1e-2);
//   if (!c.passed) std::puts(c.note.c_str());
[[nodiscard]] KSCOPE_DECL output_check check_outputs(const std::vector<double>& got, const std::vector<double>& want,
                                                double tolerance = std::numeric_limits<double>::quiet_NaN());

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL output_check check_outputs(const std::vector<double>& got, const std::vector<double>& want,
                                                double tolerance) {
  output_check c;
  c.tolerance = tolerance;
  c.values = want.size();
  if (got.size() != want.size()) {
    c.passed = false;
    c.note = "output sizes differ: " + std::to_string(got.size()) + " values vs " + std::to_string(want.size()) +
             " in the reference";
    return c;
  }
  c.performed = true;
  double scale = 0;
  for (double w : want)
    if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
  const double floor = scale > 0 ? 1e-3 * scale : std::numeric_limits<double>::min();
  double max_rel = 0, max_abs = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double diff = std::fabs(got[i] - want[i]);
    if (std::isnan(diff)) {
      // NaN on either side is a wrong result; equal infinities are not.
      if (!(got[i] == want[i])) {
        max_rel = max_abs = std::numeric_limits<double>::infinity();
      }
      continue;
    }
    max_abs = std::max(max_abs, diff);
    max_rel = std::max(max_rel, diff / std::max(std::fabs(want[i]), floor));
  }
  c.max_rel_error = max_rel;
  c.max_abs_error = max_abs;
  if (std::isfinite(tolerance) && !(max_rel <= tolerance)) {
    c.passed = false;
    c.note = "max relative error " + detail::harness::printf_string("%.3g", max_rel) + " exceeds the tolerance " +
             detail::harness::printf_string("%.3g", tolerance);
  }
  return c;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Where bench::counters() gets its values: the benchmark's call, profiled. The
// default is the CUPTI range profiler (cupti_counter_source); tests and custom tools
// inject their own, as they inject a bench_timer.
//   struct canned : kscope::bench_counter_source {
//     kscope::counter_result profile(const std::vector<std::string>&, const std::function<void()>& call) override {
//       call();
//       return prepared_result;
//     }
//   };
//   b.counters().counter_source(std::make_shared<canned>());
class bench_counter_source {
 public:
  bench_counter_source() = default;
  bench_counter_source(const bench_counter_source&) = delete;
  bench_counter_source& operator=(const bench_counter_source&) = delete;
  virtual ~bench_counter_source() = default;
  // Profiles `call` (one call of the benchmark on its stream) for `metrics` (empty: the
  // default set) and returns the values of each kernel it launched, or why there are
  // none. May rethrow what `call` throws; the bench catches it.
  virtual counter_result profile(const std::vector<std::string>& metrics, const std::function<void()>& call) = 0;
  // Samples the warps of one more call (PC sampling) for the stall reasons the
  // classification takes as evidence. The default takes none (nullopt): a source that
  // cannot sample says so by not overriding it.
  virtual std::optional<bench_warp_stalls> warp_stalls(const std::function<void()>& call) {
    (void)call;
    return std::nullopt;
  }
};

// The default source: profile_counters with one range per kernel and user replay: the
// call runs once per pass (a benchmark's call is repeatable by contract), with no save
// and restore of device memory, whose copies would leave dirty lines that the kernels'
// DRAM writes count (counters/collect.hpp). Pass options with counter_replay::kernel to run
// the call once instead.
KSCOPE_DECL counter_options bench_counter_options();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL counter_options bench_counter_options() {
  counter_options o;
  o.replay = counter_replay::user;
  return o;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS
class cupti_counter_source final : public bench_counter_source {
 public:
  // `options` chooses the libraries, the kernel limit and the replay; its ranges are per
  // kernel whatever they say (the values are reported per kernel).
  explicit cupti_counter_source(counter_options options = bench_counter_options());
  KSCOPE_DECL counter_result profile(const std::vector<std::string>& metrics, const std::function<void()>& call) override;
  // profile_warp_stalls on one call (kernel-serialized, CUPTI's default period).
  KSCOPE_DECL std::optional<bench_warp_stalls> warp_stalls(const std::function<void()>& call) override;

 private:
  counter_options options_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL counter_result cupti_counter_source::profile(const std::vector<std::string>& metrics, const std::function<void()>& call) {
  return profile_counters(metrics, call, options_);
}

KSCOPE_DECL std::optional<bench_warp_stalls> cupti_counter_source::warp_stalls(const std::function<void()>& call) {
  warp_stall_options o;
  o.cupti_library = options_.cupti_library;
  const warp_stall_result r = profile_warp_stalls(call, o);
  bench_warp_stalls out;
  out.message = r.message;
  out.collected = r.ok() && r.total.total_samples() > 0;
  if (out.collected) {
    out.shares = to_stall_shares(r.total);
    out.samples = r.total.total_samples();
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL cupti_counter_source::cupti_counter_source(counter_options options) : options_(std::move(options)) {
  options_.ranges = counter_ranges::per_kernel;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {
namespace harness {

struct bench_definition {
  std::string name;
  std::function<void(bench_stream)> fn;
  bench_metadata metadata;
  std::function<std::vector<double>()> output;
  double tolerance = std::numeric_limits<double>::quiet_NaN();
};

// The samples a comparison should see: those used, past the MSER warm-up.
KSCOPE_DECL std::vector<double> steady_samples(const series_analysis& a);

// A reference ratio printed outside its own interval (ratio_outside_interval, core/stats.hpp:
// the timings differ in shape, e.g. on a loaded machine) must say why: the warning for that,
// "" when the ratio lies inside.
KSCOPE_DECL std::string ratio_outside_interval_note(const comparison& versus);

// Where a benchmark's compute roof came from, for the report: "theoretical fp16 on
// tensor cores, Hopper (sm_90) at the rated clock"; "" when the device has none.
KSCOPE_DECL std::string roof_source(const roof_choice& roof, const device_info& gpu, const std::string& dtype);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<double> steady_samples(const series_analysis& a) {
  const std::size_t skip = std::min(a.stats.warmup, a.used_s.size());
  return std::vector<double>(a.used_s.begin() + static_cast<std::ptrdiff_t>(skip), a.used_s.end());
}

KSCOPE_DECL std::string ratio_outside_interval_note(const comparison& versus) {
  if (!ratio_outside_interval(versus)) return {};
  const interval& ci = versus.ratio_ci;
  return "the ratio of the medians to the reference, " + format_fixed(versus.ratio, 3) + ", lies outside the " +
         format_general(100 * ci.level, 3) + " % interval of the typical ratio, [" + format_fixed(ci.lo, 3) + ", " +
         format_fixed(ci.hi, 3) +
         "]: the two timings differ in shape, not only in scale (one is spread out or has a second mode), so no "
         "one ratio describes them; the verdict rests on the interval";
}

KSCOPE_DECL std::string roof_source(const roof_choice& roof, const device_info& gpu, const std::string& dtype) {
  if (!(roof.theoretical_flops_per_s > 0)) return {};
  const std::string unread = dtype.empty() ? "no dtype" : "dtype '" + dtype + "'";
  return std::string("theoretical ") + to_string(roof.type) + " on " + to_string(roof.cores) + " cores" +
         (roof.dtype_known ? "" : " (the default for " + unread + ")") + ", " +
         architecture_name(gpu.cc_major, gpu.cc_minor) + " at the rated clock";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- rates above the device's peak ------------------------------------------------
// A rate more than peak_margin over a theoretical peak cannot have been achieved: the
// theoretical peaks are at the rated boost clock, which the SM clock never exceeds by
// more than a few %, so 10 % is noise and rounding, not a faster GPU. Bytes: the DRAM
// peak bounds only what comes from DRAM. With a cold L2 and one launch per sample every
// launch starts from DRAM, so the DRAM peak applies; with a hot L2 (or batched cold
// launches, all but the first of which run hot) data may come from L2, which is faster
// than DRAM by up to ~10 x on GPUs with a large L2 and slow GDDR, so only a rate above
// hot_l2_bandwidth_factor x the DRAM peak counts as impossible there.
inline constexpr double peak_margin = 1.10;
inline constexpr double hot_l2_bandwidth_factor = 20.0;

// The ceilings a result is checked against, with the words that name them.
struct rate_ceilings {
  double flops_per_s = std::numeric_limits<double>::quiet_NaN();
  std::string flops_name;  // "the 989 TFLOP/s bf16 tensor peak"
  double dram_bytes_per_s = std::numeric_limits<double>::quiet_NaN();
  bool default_roof = false;  // the compute roof is choose_roof's fp32 default for an unread dtype
};

// The ceilings a result's own peaks give (run(timer) with bench::peaks, hand-built results).
KSCOPE_DECL rate_ceilings ceilings_of(const bench_result& r);

// Why `declared` work in `seconds` per launch is impossible under `c`; "" when it is not.
// every_launch_cold: the L2 was flushed before every timed launch (cold, one per sample).
KSCOPE_DECL std::string impossible_rate(const work& declared, double seconds, const rate_ceilings& c,
                                   bool every_launch_cold);

// The device's fastest theoretical compute roof as the FLOP/s ceiling: whatever the
// dtype, no work runs faster than that.
KSCOPE_DECL void use_fastest_roof(const device_peaks& peaks, rate_ceilings& c);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL rate_ceilings ceilings_of(const bench_result& r) {
  rate_ceilings c;
  c.flops_per_s = r.peak_flops_per_s;
  c.flops_name = "the " + format_rate(r.peak_flops_per_s, "FLOP/s") + " compute peak" +
                 (r.peak_flops_source.empty() ? std::string() : " (" + r.peak_flops_source + ")");
  c.dram_bytes_per_s = r.peak_bytes_per_s;
  return c;
}

KSCOPE_DECL std::string impossible_rate(const work& declared, double seconds, const rate_ceilings& c,
                                   bool every_launch_cold) {
  if (!(seconds > 0)) return {};
  const std::string cause =
      ": what was timed cannot be the declared work. Either no work reached the stream that was timed (the "
      "callable launched on another stream, on the legacy default stream, or launched nothing) or set_work "
      "declares more work than one launch does";
  const std::string at = "the median time, " + format_seconds(seconds) + " per launch, implies ";
  if (declared.flops > 0 && c.flops_per_s > 0 && declared.flops / seconds > peak_margin * c.flops_per_s)
    return at + format_rate(declared.flops / seconds, "FLOP/s") + ", over " + c.flops_name + " by more than " +
           printf_string("%.0f %%", 100 * (peak_margin - 1)) + cause;
  const double factor = every_launch_cold ? peak_margin : peak_margin * hot_l2_bandwidth_factor;
  if (declared.bytes > 0 && c.dram_bytes_per_s > 0 && declared.bytes / seconds > factor * c.dram_bytes_per_s) {
    const std::string limit =
        every_launch_cold
            ? "over the " + format_rate(c.dram_bytes_per_s, "B/s") + " DRAM peak by more than " +
                  printf_string("%.0f %%", 100 * (peak_margin - 1)) + " with every launch starting from a cold L2"
            : "over " + printf_string("%.0f", factor) + " x the " + format_rate(c.dram_bytes_per_s, "B/s") +
                  " DRAM peak (more than any L2 serves)";
    return at + format_rate(declared.bytes / seconds, "B/s") + ", " + limit + cause;
  }
  return {};
}

KSCOPE_DECL void use_fastest_roof(const device_peaks& peaks, rate_ceilings& c) {
  for (const compute_roof& roof : peaks.compute) {
    const double rate = roof.theoretical_flops_per_s;
    if (!std::isfinite(rate) || (std::isfinite(c.flops_per_s) && rate <= c.flops_per_s)) continue;
    c.flops_per_s = rate;
    c.flops_name = "the device's fastest roof (" + format_rate(rate, "FLOP/s") + " " + to_string(roof.type) + " " +
                   to_string(roof.cores) + ")";
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// "1 sample", "26 samples".
KSCOPE_DECL std::string count_text(std::size_t n, const char* one, const char* many);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string count_text(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// What happened, in the words every printer uses (bench_result::stop_message). Each
// sentence is true of the result: a budget message lists the conditions that were not
// met (unmet_conditions), never a width that was met or not computed.
KSCOPE_DECL std::string stop_message_of(const bench_result& r);

// What an error or invalid result keeps: the reason and the timer's notes. No rates, no
// roofline, no comparison and no advice: none of them would be about the benchmark.
KSCOPE_DECL void strip_numbers(bench_result& r);

// Rates, roofline and the warnings a reader must see next to the numbers; for a result
// that cannot be trusted (error, invalid, or a rate above the device's peak, found
// here), the reason instead of all of them.
KSCOPE_DECL void finish_result(bench_result& r, const std::optional<rate_ceilings>& given_ceilings = std::nullopt);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string stop_message_of(const bench_result& r) {
  const std::size_t taken = r.series.samples_s.size();
  const auto unmet = [&] {
    std::string list;
    for (const std::string& u : unmet_conditions(r.series, r.analysis, r.options)) list += (list.empty() ? "" : "; ") + u;
    return list.empty() ? std::string() : "; not met: " + list;
  };
  switch (r.stopped) {
    case stop_reason::target_reached:
      return "target reached: median CI half-width " + format_general(100 * r.analysis.rel_half_width, 3) +
             " % <= target " + format_general(100 * r.options.target_rel_ci, 3) + " % with " +
             count_text(r.analysis.stats.n, "sample", "samples") + " used over " +
             format_general(r.series.measured_span_s, 3) + " s";
    case stop_reason::time_budget:
      return "time budget of " + format_general(r.options.time_budget_s, 3) + " s spent after " +
             count_text(taken, "sample", "samples") + unmet();
    case stop_reason::sample_limit:
      return "sample limit of " + count_text(r.options.max_samples, "sample", "samples") + " reached" + unmet();
    case stop_reason::error:
      return "error: " + (r.invalid_reason.empty() ? std::string("nothing could be measured") : r.invalid_reason);
    case stop_reason::invalid:
      return "invalid: " + r.invalid_reason;
  }
  return {};
}

KSCOPE_DECL void strip_numbers(bench_result& r) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.flops_per_s = rate_estimate{};
  r.bytes_per_s = rate_estimate{};
  r.fraction_of_peak_bandwidth = nan;
  r.roofline.reset();
  if (r.reference) {
    reference_result& ref = *r.reference;
    ref.versus = comparison{nan, interval{nan, nan, nan}, nan, verdict::inconclusive};
    ref.relative_speed = nan;
    ref.relative_speed_ci = interval{nan, nan, nan};
  }
}

KSCOPE_DECL void finish_result(bench_result& r, const std::optional<rate_ceilings>& given_ceilings) {
  const rate_ceilings ceilings = given_ceilings ? *given_ceilings : ceilings_of(r);
  const summary& st = r.analysis.stats;
  const double median = st.median;
  if (r.valid() && median > 0) {
    const bool every_launch_cold = r.options.cache == cache_mode::cold && r.series.launches_per_sample == 1;
    std::string why = impossible_rate(r.declared, median, ceilings, every_launch_cold);
    if (!why.empty()) {
      r.stopped = stop_reason::invalid;
      r.invalid_reason = std::move(why);
    }
  }
  r.stop_message = stop_message_of(r);
  if (!r.valid()) {
    strip_numbers(r);
    return;
  }

  if (r.declared.flops > 0 && median > 0) {
    r.flops_per_s.median = r.declared.flops / median;
    r.flops_per_s.ci = rate_interval(r.declared.flops, st.median_ci);
  }
  if (r.declared.bytes > 0 && median > 0) {
    r.bytes_per_s.median = r.declared.bytes / median;
    r.bytes_per_s.ci = rate_interval(r.declared.bytes, st.median_ci);
    if (r.peak_bytes_per_s > 0) r.fraction_of_peak_bandwidth = r.bytes_per_s.median / r.peak_bytes_per_s;
  }
  // Above the fp32 default roof of an unread dtype, yet under the device's fastest: the
  // work ran on faster units than the default assumes, so a placement under that roof
  // (">100 % of the roof") would be false. Say so instead of placing it.
  const bool over_default_roof = ceilings.default_roof && r.declared.flops > 0 && median > 0 &&
                                 r.peak_flops_per_s > 0 && r.flops_per_s.median > peak_margin * r.peak_flops_per_s;
  if ((r.declared.flops > 0 || r.declared.bytes > 0) && median > 0 && !over_default_roof)
    r.roofline = try_place(r.declared, median, r.peak_flops_per_s, r.peak_bytes_per_s);

  auto warn = [&](std::string w) { r.warnings.push_back(std::move(w)); };
  if (over_default_roof)
    warn(format_rate(r.flops_per_s.median, "FLOP/s") + " is over the " + format_rate(r.peak_flops_per_s, "FLOP/s") +
         " fp32 plain-core roof assumed for " +
         (r.metadata.dtype.empty() ? std::string("no dtype") : "dtype '" + r.metadata.dtype + "'") +
         ": the work ran on faster units (tensor cores?); roofline placement skipped. Tag the dtype with "
         "bench::dtype (e.g. \"bf16\") or give the roof with bench::peaks");
  if (r.stopped == stop_reason::time_budget || r.stopped == stop_reason::sample_limit)
    warn("target not reached: " + r.stop_message);
  if (st.n > 0 && !st.steady)
    warn("no steady state found (MSER-5): the series drifts, so the median may not represent a steady run");
  if (r.analysis.throttled_samples > 0 && r.series.samples_s.size() > 0 &&
      r.analysis.throttled_samples * 10 >= r.series.samples_s.size())
    warn(std::to_string(r.analysis.throttled_samples) + " of " + std::to_string(r.series.samples_s.size()) +
         " samples ran under " + format_percent(r.options.throttle_fraction, 0) + " of the median SM clock");
  if (std::isfinite(r.analysis.median_sm_clock_mhz) && std::isfinite(r.sm_clock_max_mhz) &&
      r.analysis.median_sm_clock_mhz < r.options.throttle_fraction * r.sm_clock_max_mhz)
    warn(printf_string("the SM clock ran at a median %.0f MHz", r.analysis.median_sm_clock_mhz) +
         printf_string(", under %.0f %%", 100 * r.options.throttle_fraction) +
         printf_string(" of the rated %.0f MHz (power or thermal limit, or locked clocks)", r.sm_clock_max_mhz));
  if (r.analysis.clock_managed && !r.analysis.clock_steady)
    warn("the SM clock never settled (power-managed and drifting): the median averages over " +
         printf_string("%.1f s", r.series.measured_span_s) + " of a moving clock");
  if (r.options.cache == cache_mode::cold && r.series.launches_per_sample > 1)
    warn("cold L2 with batching: only the first of the " + std::to_string(r.series.launches_per_sample) +
         " launches in a sample starts with a flushed L2; set launches_per_sample = 1 for all-cold launches");
  if (r.series.invalid_samples > 0)
    warn(std::to_string(r.series.invalid_samples) + " samples could not be measured and were dropped");
  if (r.resources && r.resources->local_bytes_per_thread > 0)
    warn("the kernel uses " + std::to_string(r.resources->local_bytes_per_thread) +
         " bytes of local memory per thread (register spills or local arrays)");
  if (r.reference) {
    const output_check& c = r.reference->check;
    if (!c.passed) warn("output check failed: " + c.note);
  }
  if (r.declared.flops > 0 && !r.roofline && median > 0 && !over_default_roof) {
    if (!(r.peak_flops_per_s > 0))
      warn("no compute peak known for dtype '" + r.metadata.dtype +
           "': roofline placement skipped (set it with bench::peaks)");
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace harness
}  // namespace detail

// The context of the given CUDA device (-1: the current one, where bench::run() times):
// its device_info from query_device(), the host and the time. Without CUDA or a device,
// gpu.present is false and gpu.problem says why.
//   kscope::bench_context c = kscope::describe_bench_context();
[[nodiscard]] KSCOPE_DECL bench_context describe_bench_context(int device = -1);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bench_context describe_bench_context(int device) {
  bench_context c;
  c.timestamp_utc = detail::harness::utc_timestamp();
  c.host_name = detail::harness::host_name();
#if KSCOPE_HAS_CUDA
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();  // query_device(0) below says what is wrong
    device = 0;
  }
#endif
  c.gpu = query_device(device < 0 ? 0 : device);
  return c;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A named benchmark around a callable that receives a stream.
//
//   kscope::bench copy{"copy 1 GiB", [&](cudaStream_t s) {
//     cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s); }};
//   copy.set_work({0, 2.0 * n}).cold().target_rel_ci(0.005);
//   kscope::bench_result r = copy.run();
//
// Setters return *this. A bench is a recipe: run() may be called again and samples anew.
class bench {
 public:
  using function = std::function<void(bench_stream)>;

  bench(std::string name, function fn);

  [[nodiscard]] const std::string& name() const noexcept { return def_.name; }
  [[nodiscard]] const bench_metadata& metadata() const noexcept { return def_.metadata; }

  // ---- what is measured (printed with every result) ----
  bench& shape(std::vector<long long> dims);
  bench& dtype(std::string type);
  bench& strides(std::vector<long long> s);
  // A free-form parameter; setting a key again replaces its value.
  bench& param(std::string key, param_value value);
  // Every value of a sweep point as a parameter.
  bench& params(const sweep_point& point);
  // The work of one launch: FLOP/s, B/s and the roofline placement come from it.
  bench& set_work(work w) { work_ = w; return *this; }
  // Compute and bandwidth peaks for the roofline; a value that is not positive keeps the
  // default: the device's theoretical DRAM bandwidth and the compute roof choose_roof()
  // gives for the dtype (device/roof_choice.hpp).
  bench& peaks(double flops_per_s, double bytes_per_s);

  // ---- how it is measured ----
  bench& options(const bench_options& o) { options_ = o; return *this; }
  [[nodiscard]] const bench_options& options() const noexcept { return options_; }
  bench& cold();
  bench& hot();
  bench& target_rel_ci(double fraction);
  bench& time_budget_s(double seconds);
  bench& min_samples(std::size_t n);
  bench& launches_per_sample(std::size_t n);
  // The stream to run on (default: a non-blocking stream the harness creates).
  bench& stream(bench_stream s) { stream_ = s; return *this; }

  // ---- comparison and checks ----
  // Compares with `other` (copied: its name, callable, metadata and output reader).
  // Both are sampled in the same run, interleaved A B B A.
  bench& reference(const bench& other, compare_options how = {});
  // Reads this benchmark's output after one untimed run, for the check against the
  // reference's output. tolerance (max relative error) turns the report into pass/fail.
  bench& output(std::function<std::vector<double>()> read,
                double tolerance = std::numeric_limits<double>::quiet_NaN());
  // ---- hardware counters ----
  // After the timed samples, profiles one more call of the benchmark for `metrics` (empty:
  // the default set, evidence/metrics.hpp) and adds the values to the result
  // (bench_result::counters): per-metric values over the call's kernels, the measured
  // roofline point, the declared-vs-measured line and the classification. The profiled
  // call is slow (kernels serialised and replayed) and never a sample.
  //   kscope::bench_result r = copy.set_work({0, 2.0 * bytes}).counters().run();
  bench& counters(std::vector<std::string> metrics = {});
  // Where the values come from (default: cupti_counter_source). Implies counters() with
  // the metrics given there, or the default set.
  bench& counter_source(std::shared_ptr<bench_counter_source> source);
  [[nodiscard]] bool counters_enabled() const noexcept { return counters_; }
  // With counters, one more call sampled for its warp stalls (PC sampling, one extra call,
  // kernels serialized): the classification then names why warps wait. On by default.
  bench& warp_stalls(bool on = true);

#if KSCOPE_HAS_CUDA
  // The kernel the callable launches, with its launch configuration: its registers,
  // shared and local memory and theoretical occupancy go into the report.
  //   b.kernel(my_kernel, 256, shared_bytes);
  template <class... Args>
  bench& kernel(void (*kernel_function)(Args...), int block_threads, std::size_t dynamic_smem_bytes = 0) {
    kernel_ = reinterpret_cast<const void*>(kernel_function);
    block_threads_ = block_threads;
    dynamic_smem_bytes_ = dynamic_smem_bytes;
    return *this;
  }
#endif

  // Runs on the current CUDA device and returns the result; never throws for CUDA
  // errors or a throwing callable (the result then has stop_reason::error and says why).
  // A callable whose work never reaches the stream it receives gives stop_reason::invalid
  // (see bench_result::valid()).
  [[nodiscard]] bench_result run();

  // Runs with an injected timer (tests, or a custom time source); queries no device.
  // Only the peaks given with bench::peaks are used.
  [[nodiscard]] bench_result run(bench_timer& timer);

  // Runs with an injected timer as if on `gpu`: the roofline peaks and the rated SM clock
  // come from that description exactly as run() takes them from the live device, so the
  // choice of roof can be checked (or replayed for another GPU) without one.
  //   kscope::bench_result r = b.run(fake_timer, kscope::query_device(0));
  [[nodiscard]] bench_result run(bench_timer& timer, const device_info& gpu);

 private:
  // The counter pass (bench::counters): one call of the benchmark on `stream`, after the
  // result is final, so nothing of it reaches the samples, the rates or the comparison. A
  // result that is not valid is not profiled: its counters would describe work that is not
  // the benchmark's (or no work). A call that throws, or a source that cannot collect,
  // leaves the state and one message; the timing stays as it was.
  void profile_counters_into(bench_result& r, bench_stream stream);

  bench_result skeleton() const;

  // A run that could not time anything: stop_reason::error and why.
  bench_result failed(std::string why) const;

  // Peaks from the device, unless bench::peaks gave them: its theoretical DRAM bandwidth
  // and the compute roof of the dtype by choose_roof, the rule session reports use too.
  // The rates are checked against the same roof when the dtype is read (or the peak was
  // given), and against the device's fastest roof when it is not: whatever the dtype,
  // no work runs faster than that.
  bench_result run_on(bench_timer& timer, const device_info& gpu, std::optional<kernel_resources> resources);

  bench_result run_with(bench_timer& timer, double peak_flops, double peak_bytes, double sm_clock_max_mhz,
                        std::optional<kernel_resources> resources, const detail::harness::rate_ceilings& ceilings);

  output_check check_against_reference(bench_timer& timer);

  detail::harness::bench_definition def_;
  std::shared_ptr<const detail::harness::bench_definition> reference_;
  compare_options compare_{};
  work work_{};
  bench_options options_{};
  double peak_flops_per_s_ = std::numeric_limits<double>::quiet_NaN();
  double peak_bytes_per_s_ = std::numeric_limits<double>::quiet_NaN();
  bench_stream stream_ = nullptr;
  const void* kernel_ = nullptr;
  int block_threads_ = 0;
  std::size_t dynamic_smem_bytes_ = 0;
  bool counters_ = false;
  bool warp_stalls_ = true;
  std::vector<std::string> counter_metrics_;
  std::shared_ptr<bench_counter_source> counter_source_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bench& bench::shape(std::vector<long long> dims) { def_.metadata.shape = std::move(dims); return *this; }

KSCOPE_DECL bench& bench::dtype(std::string type) { def_.metadata.dtype = std::move(type); return *this; }

KSCOPE_DECL bench& bench::strides(std::vector<long long> s) { def_.metadata.strides = std::move(s); return *this; }

KSCOPE_DECL bench& bench::cold() { options_.cache = cache_mode::cold; return *this; }

KSCOPE_DECL bench& bench::hot() { options_.cache = cache_mode::hot; return *this; }

KSCOPE_DECL bench& bench::target_rel_ci(double fraction) { options_.target_rel_ci = fraction; return *this; }

KSCOPE_DECL bench& bench::time_budget_s(double seconds) { options_.time_budget_s = seconds; return *this; }

KSCOPE_DECL bench& bench::min_samples(std::size_t n) { options_.min_samples = n; return *this; }

KSCOPE_DECL bench& bench::launches_per_sample(std::size_t n) { options_.launches_per_sample = n; return *this; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bench::bench(std::string name, function fn) {
  def_.name = std::move(name);
  def_.fn = std::move(fn);
}

KSCOPE_DECL bench& bench::param(std::string key, param_value value) {
  for (auto& [k, v] : def_.metadata.params) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  def_.metadata.params.emplace_back(std::move(key), std::move(value));
  return *this;
}

KSCOPE_DECL bench& bench::params(const sweep_point& point) {
  for (const auto& [k, v] : point.values()) param(k, v);
  return *this;
}

KSCOPE_DECL bench& bench::peaks(double flops_per_s, double bytes_per_s) {
  peak_flops_per_s_ = flops_per_s;
  peak_bytes_per_s_ = bytes_per_s;
  return *this;
}

KSCOPE_DECL bench& bench::reference(const bench& other, compare_options how) {
  reference_ = std::make_shared<detail::harness::bench_definition>(other.def_);
  compare_ = how;
  return *this;
}

KSCOPE_DECL bench& bench::output(std::function<std::vector<double>()> read,
              double tolerance) {
  def_.output = std::move(read);
  def_.tolerance = tolerance;
  return *this;
}

KSCOPE_DECL bench& bench::counters(std::vector<std::string> metrics) {
  counters_ = true;
  counter_metrics_ = std::move(metrics);
  return *this;
}

KSCOPE_DECL bench& bench::warp_stalls(bool on) {
  warp_stalls_ = on;
  return *this;
}

KSCOPE_DECL bench& bench::counter_source(std::shared_ptr<bench_counter_source> source) {
  counters_ = true;
  counter_source_ = std::move(source);
  return *this;
}

KSCOPE_DECL bench_result bench::run() {
#if KSCOPE_HAS_CUDA
    const bench_context context = describe_bench_context();
    if (!context.gpu.present)
      return failed("no GPU: " + (context.gpu.problem.empty() ? std::string("unknown reason") : context.gpu.problem));
    std::vector<detail::harness::cuda_bench_timer::function> functions{def_.fn};
    if (reference_) functions.push_back(reference_->fn);
    detail::harness::cuda_bench_timer timer(std::move(functions), stream_, options_);
    if (!timer.ready()) return failed("the CUDA timer could not start: " + timer.error());
    std::optional<kernel_resources> resources;
    if (kernel_ != nullptr) resources = detail::harness::query_resources(kernel_, block_threads_, dynamic_smem_bytes_);
    bench_result r = run_on(timer, context.gpu, std::move(resources));
    profile_counters_into(r, timer.stream());
    return r;
#else
    return failed("kscope was built without CUDA: nothing was timed");
#endif
  }

KSCOPE_DECL bench_result bench::run(bench_timer& timer) {
  detail::harness::rate_ceilings ceilings;
  ceilings.flops_per_s = peak_flops_per_s_;
  ceilings.flops_name = "the given " + detail::harness::format_rate(peak_flops_per_s_, "FLOP/s") +
        " compute peak (bench::peaks)";
  ceilings.dram_bytes_per_s = peak_bytes_per_s_;
  bench_result r = run_with(timer, peak_flops_per_s_, peak_bytes_per_s_, std::numeric_limits<double>::quiet_NaN(),
            std::nullopt, ceilings);
  if (peak_flops_per_s_ > 0) r.peak_flops_source = "given";
  profile_counters_into(r, stream_);
  return r;
}

KSCOPE_DECL bench_result bench::run(bench_timer& timer, const device_info& gpu) {
  bench_result r = run_on(timer, gpu, std::nullopt);
  profile_counters_into(r, stream_);
  return r;
}

KSCOPE_DECL void bench::profile_counters_into(bench_result& r, bench_stream stream) {
  if (!counters_ || !r.valid()) return;
  detail::harness::counter_pass_context context;
  context.declared = work_;
  context.peak_flops_per_s = r.peak_flops_per_s;
  context.peak_bytes_per_s = r.peak_bytes_per_s;
  context.median_s = r.median_s();
  context.graph_nodes = r.series.graph_nodes;
  context.launches_per_sample = r.series.launches_per_sample;
  const function& fn = def_.fn;
  const std::function<void()> call = [&fn, stream] { fn(stream); };
  try {
    if (!counter_source_) counter_source_ = std::make_shared<cupti_counter_source>();
    // The stall pass first: once a range-profiler pass has run in the process, CUPTI's PC
    // sampling names no kernel whose code was loaded before it (H100, CUDA 13.0: every
    // sample of such a kernel counted as taken in code it gives no PCs for), and the
    // benchmark's kernels were loaded by its warm-up. Kept only where the counters
    // collected: it explains their verdict.
    std::optional<bench_warp_stalls> stalls;
    if (warp_stalls_) stalls = counter_source_->warp_stalls(call);
    const counter_result pass = counter_source_->profile(counter_metrics_, call);
    if (!pass.ok()) stalls.reset();
    r.counters = detail::harness::counters_from_pass(pass, counter_metrics_, context, stalls);
  } catch (const std::exception& e) {
    r.counters = detail::harness::counters_not_collected(std::string("the profiled call threw: ") + e.what(),
                                                         counter_metrics_);
  } catch (...) {
    r.counters = detail::harness::counters_not_collected("the profiled call threw an exception", counter_metrics_);
  }
}

KSCOPE_DECL bench_result bench::skeleton() const {
  bench_result r;
  r.name = def_.name;
  r.metadata = def_.metadata;
  r.declared = work_;
  r.options = options_;
  r.peak_flops_per_s = peak_flops_per_s_;
  r.peak_bytes_per_s = peak_bytes_per_s_;
  r.stopped = stop_reason::error;
  return r;
}

KSCOPE_DECL bench_result bench::failed(std::string why) const {
  bench_result r = skeleton();
  r.invalid_reason = std::move(why);
  r.warnings.push_back(r.invalid_reason);
  detail::harness::finish_result(r);
  return r;
}

KSCOPE_DECL bench_result bench::run_on(bench_timer& timer, const device_info& gpu, std::optional<kernel_resources> resources) {
  const device_peaks peaks = theoretical_peaks(gpu);
  const roof_choice roof = choose_roof(peaks, def_.metadata.dtype);
  const bool given = peak_flops_per_s_ > 0;
  const double peak_flops = given ? peak_flops_per_s_ : roof.theoretical_flops_per_s;
  const double peak_bytes = peak_bytes_per_s_ > 0 ? peak_bytes_per_s_ : peaks.theoretical_bytes_per_s;
  const std::string source = given ? "given" : detail::harness::roof_source(roof, gpu, def_.metadata.dtype);

  detail::harness::rate_ceilings ceilings;
  ceilings.dram_bytes_per_s = peak_bytes;
  if (given || roof.dtype_known) {
    ceilings.flops_per_s = peak_flops;
    ceilings.flops_name = "the " + detail::harness::format_rate(peak_flops, "FLOP/s") + " " +
                          (given ? std::string("compute peak given with bench::peaks") : roof.label + " peak");
  } else {
    detail::harness::use_fastest_roof(peaks, ceilings);
    ceilings.default_roof = true;
  }
  bench_result r = run_with(timer, peak_flops, peak_bytes, rated_sm_clock_mhz(gpu), std::move(resources), ceilings);
  r.peak_flops_source = source;
  // The fp32 default is a guess for a type kscope cannot read; say so where it matters.
  if (r.valid() && !given && !roof.dtype_known && work_.flops > 0 && !def_.metadata.dtype.empty())
    r.warnings.push_back("dtype '" + def_.metadata.dtype +
                         "' is not a type kscope reads (core/dtype.hpp): the compute roof is the fp32 plain-core "
                         "default; tag a known type with bench::dtype or give the roof with bench::peaks");
  return r;
}

KSCOPE_DECL bench_result bench::run_with(bench_timer& timer, double peak_flops, double peak_bytes, double sm_clock_max_mhz,
                      std::optional<kernel_resources> resources, const detail::harness::rate_ceilings& ceilings) {
  bench_result r = skeleton();
  r.peak_flops_per_s = peak_flops;
  r.peak_bytes_per_s = peak_bytes;
  r.sm_clock_max_mhz = sm_clock_max_mhz;
  r.resources = std::move(resources);
  const std::size_t targets = reference_ ? 2 : 1;
  sampling_outcome s = detail::harness::sample_targets(timer, targets, options_, sm_clock_max_mhz);
  r.stopped = s.stopped;
  r.wall_s = s.wall_s;
  r.rounds = s.rounds;
  r.empty_stream_s = s.empty_stream_s;
  r.series = std::move(s.series[0]);
  r.analysis = std::move(s.analysis[0]);
  for (std::string& n : s.notes) r.warnings.push_back(std::move(n));
  std::vector<std::string> timer_notes = timer.notes();
  if (s.stopped == stop_reason::error) {
    // The sampler knows that the timer failed; the timer's last note says how.
    r.invalid_reason = s.error.empty() ? std::string("the timer failed") : s.error;
    if (!timer_notes.empty()) r.invalid_reason += ": " + timer_notes.back();
  } else if (s.stopped == stop_reason::invalid) {
    const std::string stream = s.invalid_target == 0 ? std::string("the benchmark's stream")
                                                      : "the stream of the reference '" + reference_->name + "'";
    r.invalid_reason = detail::harness::no_work_reason(stream, s.invalid_evidence);
  }
  for (std::string& n : timer_notes) r.warnings.push_back(std::move(n));

  if (reference_) {
    reference_result ref;
    ref.name = reference_->name;
    ref.metadata = reference_->metadata;
    ref.series = std::move(s.series[1]);
    ref.analysis = std::move(s.analysis[1]);
    const std::vector<double> base = detail::harness::steady_samples(ref.analysis);
    const std::vector<double> mine = detail::harness::steady_samples(r.analysis);
    if (r.valid() && base.size() >= 6 && mine.size() >= 6) {
      ref.versus = compare(base, mine, compare_);
      ref.relative_speed = 1.0 / ref.versus.ratio;
      ref.relative_speed_ci = ref.versus.ratio_ci;
      ref.relative_speed_ci.lo = 1.0 / ref.versus.ratio_ci.hi;
      ref.relative_speed_ci.hi = 1.0 / ref.versus.ratio_ci.lo;
      if (std::string note = detail::harness::ratio_outside_interval_note(ref.versus); !note.empty())
        r.warnings.push_back(std::move(note));
    } else {
      const double nan = std::numeric_limits<double>::quiet_NaN();
      ref.versus = comparison{nan, interval{nan, nan, compare_.level}, nan, verdict::inconclusive};
      if (r.valid()) r.warnings.push_back("too few samples to compare with the reference");
    }
    if ((def_.output || reference_->output) && r.valid()) {
      ref.check = check_against_reference(timer);
    }
    r.reference = std::move(ref);
  }
  detail::harness::finish_result(r, ceilings);
  return r;
}

KSCOPE_DECL output_check bench::check_against_reference(bench_timer& timer) {
  output_check c;
  if (!def_.output || !reference_->output) {
    c.passed = false;
    c.note = std::string("no output reader on the ") + (def_.output ? "reference" : "benchmark") +
             ": set one with bench::output on both";
    return c;
  }
  try {
    timer.execute(0);
    const std::vector<double> got = def_.output();
    timer.execute(1);
    const std::vector<double> want = reference_->output();
    c = check_outputs(got, want, def_.tolerance);
  } catch (const std::exception& e) {
    c.passed = false;
    c.note = std::string("reading the outputs threw: ") + e.what();
  } catch (...) {
    c.passed = false;
    c.note = "reading the outputs threw an exception";
  }
  return c;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Results with the context they were taken in, and the three output formats.
//
//   kscope::bench_report report{kscope::describe_bench_context(), {a.run(), b.run()}};
//   report.print();                          // markdown on stdout
//   report.write_json("results.json");       // kscope.bench/2, raw samples included
//   report.write_csv("results.csv");         // one row per benchmark
struct bench_report {
  bench_context context;
  std::vector<bench_result> results;

  [[nodiscard]] std::string markdown() const;
  [[nodiscard]] std::string json(bool include_samples = true) const;
  [[nodiscard]] std::string csv() const;
  // Whether every result is valid (bench_result::valid()): what a program's exit code
  // should say, so that a CI job never passes on numbers that are not the benchmarks'.
  //   return report.all_valid() ? 0 : 1;
  [[nodiscard]] bool all_valid() const noexcept;
  [[nodiscard]] std::string samples_csv() const;

  void print(std::FILE* out = stdout) const;
  // Each returns false, after saying why on stderr, when the file cannot be written.
  bool write_json(const std::string& path, bool include_samples = true) const;
  bool write_csv(const std::string& path) const;
  bool write_samples_csv(const std::string& path) const;

 private:
  // All or nothing (core/detail/atomic_file.hpp); the reason goes to stderr.
  static bool write_file(const std::string& path, const std::string& content);
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string bench_report::markdown() const { return detail::harness::to_markdown(context, results); }

KSCOPE_DECL std::string bench_report::json(bool include_samples) const {
  return detail::harness::to_json(context, results, include_samples);
}

KSCOPE_DECL std::string bench_report::csv() const { return detail::harness::to_csv(results); }

KSCOPE_DECL std::string bench_report::samples_csv() const { return detail::harness::to_samples_csv(results); }

KSCOPE_DECL bool bench_report::write_json(const std::string& path, bool include_samples) const {
  return write_file(path, json(include_samples));
}

KSCOPE_DECL bool bench_report::write_csv(const std::string& path) const { return write_file(path, csv()); }

KSCOPE_DECL bool bench_report::write_samples_csv(const std::string& path) const { return write_file(path, samples_csv()); }

KSCOPE_DECL bool bench_report::write_file(const std::string& path, const std::string& content) {
  return detail::harness::write_output_file(path, content);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool bench_report::all_valid() const noexcept {
  for (const bench_result& r : results)
    if (!r.valid()) return false;
  return true;
}

KSCOPE_DECL void bench_report::print(std::FILE* out) const {
  const std::string text = markdown();
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {
namespace harness {

KSCOPE_DECL bool stderr_is_terminal();

// "[3/12] attention (batch=8 seq_len=512): 41.23 us ±0.42 %": one line per finished
// benchmark; on a terminal the line is first shown as "running" and then overwritten.
KSCOPE_DECL void progress_start(std::size_t i, std::size_t n, const std::string& name);
KSCOPE_DECL void progress_done(std::size_t i, std::size_t n, const bench_result& r);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool stderr_is_terminal() {
#if defined(KSCOPE_DETAIL_HAS_UNISTD)
  return isatty(fileno(stderr)) != 0;
#else
  return false;
#endif
}

KSCOPE_DECL void progress_start(std::size_t i, std::size_t n, const std::string& name) {
  if (!stderr_is_terminal()) return;
  std::fprintf(stderr, "\r\033[K[%zu/%zu] %s ...", i + 1, n, printable_name(name).c_str());
  std::fflush(stderr);
}

KSCOPE_DECL void progress_done(std::size_t i, std::size_t n, const bench_result& r) {
  const char* clear = stderr_is_terminal() ? "\r\033[K" : "";
  if (!r.valid()) {
    // No median for a result that has none, or whose median is not the benchmark's.
    std::fprintf(stderr, "%s[%zu/%zu] %s: %s\n", clear, i + 1, n, printable_name(display_name(r)).c_str(),
                 printable_name(r.stop_message).c_str());
  } else {
    const std::string stop = r.target_reached() ? std::string() : " (" + stop_text(r) + ")";
    std::fprintf(stderr, "%s[%zu/%zu] %s: %s ±%s%s\n", clear, i + 1, n, printable_name(display_name(r)).c_str(),
                 format_seconds(r.median_s()).c_str(), format_percent(r.analysis.rel_half_width, 2).c_str(),
                 stop.c_str());
  }
  std::fflush(stderr);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace harness
}  // namespace detail

// Runs benchmarks one after another, with a progress line per benchmark on stderr.
//   std::vector<kscope::bench> all{copy, gemm};
//   kscope::run_all(all).print();
[[nodiscard]] KSCOPE_DECL bench_report run_all(std::vector<bench>& benches, bool progress = true);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bench_report run_all(std::vector<bench>& benches, bool progress) {
  bench_report report;
  report.context = describe_bench_context();
  for (std::size_t i = 0; i < benches.size(); ++i) {
    if (progress) detail::harness::progress_start(i, benches.size(), benches[i].name());
    report.results.push_back(benches[i].run());
    if (progress) detail::harness::progress_done(i, benches.size(), report.results.back());
  }
  return report;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Builds and runs one benchmark per sweep point (the point's values become its params),
// with progress on stderr.
//   auto report = kscope::run_sweep(points, [&](const kscope::sweep_point& p) {
//     return kscope::bench{"attention", [&, p](cudaStream_t s) { attention(p, s); }};
//   });
[[nodiscard]] KSCOPE_DECL bench_report run_sweep(const sweep& points, const std::function<bench(const sweep_point&)>& make,
                                            bool progress = true);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bench_report run_sweep(const sweep& points, const std::function<bench(const sweep_point&)>& make,
                                            bool progress) {
  bench_report report;
  report.context = describe_bench_context();
  for (std::size_t i = 0; i < points.size(); ++i) {
    bench b = make(points[i]);
    b.params(points[i]);
    if (progress) detail::harness::progress_start(i, points.size(), b.name() + " (" + points[i].label() + ")");
    report.results.push_back(b.run());
    if (progress) detail::harness::progress_done(i, points.size(), report.results.back());
  }
  return report;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
