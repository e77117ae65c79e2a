// kscope/bench/sampler.hpp — the sampling loop of the benchmark harness, with
// no CUDA in it: first estimate, batch size, warm-up, ABBA rounds, adaptive stopping,
// clock-throttle flagging.
//
// Every sample comes from a bench_timer. The real one (detail/cuda_timer.hpp) times
// with CUDA events; tests inject a fake that returns prescribed durations and advances
// a virtual clock, so each decision below is tested on a CPU-only machine with exactly
// the code that runs on the GPU. Users include <kscope/bench/bench.hpp>; the types this
// header declares in namespace kscope (bench_options, bench_timer, ...) are public.
#pragma once

#include "../core/config.hpp"
#include "../core/detail/clock.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/roofline.hpp"
#include "../core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// Whether the L2 cache holds the benchmark's data when a sample starts.
//   hot:  whatever the previous run left there (the steady state of a loop).
//   cold: the harness overwrites a buffer of twice the L2 size before every sample
//         (not timed), so the first launch of each sample reads from DRAM.
enum class cache_mode { hot, cold };

// Why the sampling loop stopped. Reports print it beside every median, with a message
// that says what happened (bench_result::stop_message).
//   target_reached: the median CI half-width fell under the target (and minimums met).
//   time_budget:    the wall-time budget ran out first; the message lists the stopping
//                   conditions that were not met (CI width, samples, span, steady state).
//   sample_limit:   max_samples were taken first; the message lists the same.
//   error:          the timer failed (e.g. a CUDA error, no GPU); the result has no median.
//   invalid:        what was timed cannot be the benchmark's work: no work reached the
//                   stream (an empty captured graph, a capture rejected for the legacy
//                   default stream, times no longer than an empty event pair) or a rate
//                   above the device's peak. The result carries no rates and says why.
enum class stop_reason { target_reached, time_budget, sample_limit, error, invalid };

// "target_reached", "time_budget", "sample_limit", "error", "invalid".
[[nodiscard]] KSCOPE_DECL const char* to_string(stop_reason r) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* to_string(stop_reason r) noexcept {
  switch (r) {
    case stop_reason::target_reached: return "target_reached";
    case stop_reason::time_budget: return "time_budget";
    case stop_reason::sample_limit: return "sample_limit";
    case stop_reason::error: return "error";
    case stop_reason::invalid: return "invalid";
  }
  return "unknown";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS
// "hot", "cold".
[[nodiscard]] KSCOPE_DECL const char* to_string(cache_mode m) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* to_string(cache_mode m) noexcept {
  return m == cache_mode::cold ? "cold" : "hot";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// How the harness samples (docs/bench_schema.md, "How the numbers are produced"; the
// minimum time is argued in docs/decisions.md). The defaults: warm up for at
// least 25 ms and 10 calls, then sample until the median's 95 % CI half-width is under
// 1 % of the median, with at least 20 samples spread over 0.5 s (1 s when the GPU's
// power controller is moving the SM clock), or until 10 s of wall time have passed.
//
//   kscope::bench_options o;
//   o.cache = kscope::cache_mode::cold;
//   o.target_rel_ci = 0.005;   // stop at +-0.5 %
//   o.time_budget_s = 30;
struct bench_options {
  cache_mode cache = cache_mode::hot;

  // Warm-up phase (its samples are never part of the result): both must hold.
  double warmup_min_s = 0.025;          // GPU time spent in warm-up samples
  std::size_t warmup_min_calls = 10;    // launches of the target during warm-up
  bool detect_warmup = true;            // MSER-5 on the measured series as well

  // Stopping: all of min_samples, min_time_s and target_rel_ci, or a budget.
  // Why a minimum time and not only a CI: the median CI assumes independent samples,
  // but consecutive samples share the GPU's clock state, which drifts over 0.1-1 s.
  // The minimum is on the wall time the measurement spans, since that is the time
  // scale of the clock (a 5 us kernel timed one launch per sample would otherwise need
  // 100 000 samples to cover 0.5 s of GPU time).
  // On an H200 a cuBLAS GEMM measured for 50 ms gave a +-0.05 % CI while five such
  // processes spread by 1.9-2.2 %; measured for 0.5-1 s they agree within 0.3-0.9 %
  // (bench/RESULTS.md, "Cross-process reproducibility").
  double target_rel_ci = 0.01;          // median CI half-width / median
  double level = 0.95;                  // confidence level of the interval
  std::size_t min_samples = 20;         // samples used (after warm-up removal)
  double min_time_s = 0.5;              // wall time spanned by the measured samples
  double time_budget_s = 10.0;          // wall time for the whole run, warm-up included
  std::size_t max_samples = 20000;      // per target

  // Batching: a sample times `launches` back-to-back runs and reports time / launches.
  // 0 = automatic: one launch unless the first estimate is under min_sample_s, then
  // enough launches (captured in a CUDA graph) to make one sample last min_sample_s.
  std::size_t launches_per_sample = 0;
  double min_sample_s = 100e-6;
  std::size_t max_launches_per_sample = 10000;
  bool use_graphs = true;               // false: batch with a plain loop of launches

  // Clock throttling: a sample whose SM clock is under throttle_fraction x the median
  // clock of the run is flagged (counted, reported); with discard_throttled it is also
  // left out of the statistics.
  double throttle_fraction = 0.90;
  bool discard_throttled = false;

  // Power-managed clocks. A heavy kernel (a large GEMM) draws enough power that the
  // GPU's controller pulls the SM clock under its rated maximum within ~0.2 s of load
  // and then keeps moving it by ~1 % over seconds. A run is "clock-managed" when a
  // quarter of its samples ran under managed_clock_fraction x the rated clock (or, if
  // the rated clock is unknown, x the 90th percentile of its clocks); occasional dips
  // are the throttle flag's business, not this. Such a run
  //   - drops the clock's transient as warm-up (MSER-5 on the per-sample SM clock
  //     series, in addition to MSER-5 on the times), and
  //   - measures for at least managed_min_time_s (wall time spanned), with the clock
  //     steady by MSER-5, or 3 x managed_min_time_s when the clock never settles,
  // so that its median is the sustained speed and agrees across processes.
  double managed_clock_fraction = 0.98;
  double managed_min_time_s = 1.0;

  // A burst measurement: what a short do_bench-style loop sees, the first ~0.1 s of
  // load, at the boost clock for a heavy kernel. Fast, and for a kernel that the power
  // controller throttles, faster than the sustained speed and not reproducible to 1 %
  // across processes (it depends on how long the GPU idled before). The defaults give
  // the sustained speed.
  //   kscope::bench b{"gemm", launch};
  //   b.options(kscope::bench_options::burst());
  [[nodiscard]] static bench_options burst();

  // Hold the stream with a tiny spin kernel while the host enqueues a sample, so the
  // timed launches run back to back instead of trickling in at the host's launch rate.
  // The same kernel measures the SM clock (clock64 against %globaltimer).
  bool hold_launches = true;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bench_options bench_options::burst() {
  bench_options o;
  o.min_time_s = 0.02;
  o.managed_clock_fraction = 0;
  return o;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// What one timed sample measured: `launches` back-to-back runs of one target.
//   kscope::timed_sample s{2.0e-3, 1980.0};   // 2 ms at 1980 MHz
struct timed_sample {
  double total_s = std::numeric_limits<double>::quiet_NaN();       // NaN or < 0: invalid, dropped
  double sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();  // NaN: unknown
};

// What batching a target into a CUDA graph showed about its work (bench_timer::capture).
// A callable that launches on the stream it receives leaves one graph node per kernel or
// copy; one that launches on another stream, on the legacy default stream, or nothing,
// leaves none, or makes the driver reject the capture.
//   kscope::batch_capture c{0, "the CUDA graph captured from 50 calls has no nodes"};
struct batch_capture {
  long long graph_nodes = -1;  // nodes of the captured graph; -1: no graph was captured
  std::string no_work;         // evidence that no work reached the stream; "" when none
};

// The source of samples. The harness asks it to time target `which` (0: the benchmark,
// 1: its reference) `launches` times in a row. The CUDA implementation uses events; a
// test implements it with prescribed durations and a virtual clock:
//
//   struct fake_timer : kscope::bench_timer {
//     std::int64_t t_ns = 0;
//     kscope::timed_sample time(std::size_t, std::size_t launches) override {
//       t_ns += 50'000 * launches;
//       return {50e-6 * launches, 1980};
//     }
//     std::int64_t now_ns() override { return t_ns; }
//   };
class bench_timer {
 public:
  bench_timer() = default;
  bench_timer(const bench_timer&) = delete;
  bench_timer& operator=(const bench_timer&) = delete;
  virtual ~bench_timer() = default;

  // Called once a batch size is chosen, before warm-up. Returns how the batch runs:
  // "none" (one launch), "graph" (captured into a CUDA graph) or "loop".
  virtual KSCOPE_DECL std::string prepare(std::size_t /*which*/, std::size_t launches);
  // What the last prepare() of `which` learnt from capturing its launches (see
  // batch_capture); a timer that captures nothing returns the default (no evidence).
  virtual batch_capture capture(std::size_t /*which*/) const { return {}; }
  virtual timed_sample time(std::size_t which, std::size_t launches) = 0;
  // The time the timer reads for an empty sample: its events with nothing between
  // them, timed exactly as time() does (the CUDA timer takes the median of a few, once,
  // and keeps it). A sample no longer than this, within the margin no_work_limit_s()
  // gives, saw no work. NaN: unknown, and only a zero time counts as no work.
  virtual KSCOPE_DECL double empty_stream_s();
  // Runs target `which` once, untimed, and waits for it (for the output check).
  virtual void execute(std::size_t /*which*/) {}
  // The clock of the time budget (steady_clock ns; a fake advances its own).
  virtual std::int64_t now_ns() { return detail::now_ns(); }
  // Notes the timer wants in the report (e.g. "hold kernel unavailable: ...").
  virtual std::vector<std::string> notes() const { return {}; }
  // The rated (maximum) SM clock in MHz, used to tell a power-managed run; NaN when the
  // timer does not know it (a real run takes it from the device instead).
  virtual KSCOPE_DECL double rated_sm_clock_mhz() const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string bench_timer::prepare(std::size_t /*which*/, std::size_t launches) {
  return launches > 1 ? "loop" : "none";
}

KSCOPE_DECL double bench_timer::empty_stream_s() { return std::numeric_limits<double>::quiet_NaN(); }

KSCOPE_DECL double bench_timer::rated_sm_clock_mhz() const { return std::numeric_limits<double>::quiet_NaN(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The raw series of one target, as sampled.
struct sample_series {
  std::vector<double> samples_s;        // per-launch seconds, measurement phase, in order
  std::vector<double> sm_clock_mhz;     // per sample (NaN: unknown)
  std::size_t launches_per_sample = 1;
  std::string batching = "none";        // "none", "graph" or "loop"
  double first_estimate_s = std::numeric_limits<double>::quiet_NaN();
  std::size_t warmup_samples = 0;       // samples of the warm-up phase (not in samples_s)
  std::size_t warmup_calls = 0;         // launches before measurement (estimates included)
  double warmup_s = 0;                  // GPU time of those launches
  std::size_t invalid_samples = 0;      // samples the timer could not measure
  double measured_s = 0;                // GPU time of the measured samples
  double measured_span_s = 0;           // wall time (timer's clock) the measurement phase spans
  long long graph_nodes = -1;           // nodes of the batch's CUDA graph; -1: no graph
};

// The series after analysis: throttle flags, the samples used, and their summary.
struct series_analysis {
  std::vector<bool> throttled;          // per sample of sample_series::samples_s
  std::size_t throttled_samples = 0;
  double median_sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();
  double min_sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();
  double max_sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();
  // bench_options "Power-managed clocks": whether the run was clock-managed, how many
  // leading samples were dropped as the clock's transient, and whether the clock
  // series reached a steady state (MSER-5). Unknown clocks: not managed.
  bool clock_managed = false;
  std::size_t clock_warmup = 0;
  bool clock_steady = true;
  std::vector<double> used_s;           // samples handed to summarize()
  summary stats{};
  double rel_half_width = std::numeric_limits<double>::infinity();  // of the median CI
};

// What the sampling loop produced for all its targets.
struct sampling_outcome {
  std::vector<sample_series> series;
  std::vector<series_analysis> analysis;
  stop_reason stopped = stop_reason::error;
  double wall_s = 0;                    // wall time of the whole run (timer's clock)
  std::size_t rounds = 0;               // measurement rounds (ABBA with a reference)
  std::vector<std::string> notes;
  double empty_stream_s = std::numeric_limits<double>::quiet_NaN();  // bench_timer::empty_stream_s()
  // stop_reason::invalid: which target (0: the benchmark, 1: its reference) and the
  // evidence that no work reached its stream ("the CUDA graph ... has no nodes").
  std::size_t invalid_target = 0;
  std::string invalid_evidence;
  // stop_reason::error: what failed.
  std::string error;
};

namespace detail {
namespace harness {

// Half-width of the median CI relative to the median; +inf when there is no interval
// (fewer than 6 samples, or a non-positive median).
// Times are positive: a non-positive median cannot be judged (infinite width).
KSCOPE_DECL double relative_ci_half_width(const summary& s);

// Flags throttled samples against the median clock of the run, picks the samples to
// use and summarizes them. The reference clock is the run's own median, not the rated
// maximum: a long GEMM that runs at a steady power-limited 1.7 GHz is the real,
// sustained speed, whereas a sample far under the run's typical clock was disturbed
// (a power transient, another process) and is what the flag is for.
//
// A clock-managed run also drops the SM clock's transient: the samples before the
// clock series' MSER-5 steady state are left out, because a GEMM's first ~0.3 s run
// faster at the boost clock than the sustained load that follows.
KSCOPE_DECL series_analysis analyze_series(const sample_series& s, const bench_options& o,
                                      double rated_sm_clock_mhz = std::numeric_limits<double>::quiet_NaN());

// The stopping conditions of bench_options that a series does not meet yet, each as the
// sentence a report prints ("18 samples used < min_samples 20 (8 removed as warm-up by
// MSER-5)"); empty when the run may stop with its target reached. converged() and the
// stop message both read this list, so a message can only name a condition that failed.
KSCOPE_DECL std::vector<std::string> unmet_conditions(const sample_series& s, const series_analysis& a,
                                                 const bench_options& o);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double relative_ci_half_width(const summary& s) {
  if (!(s.median > 0)) return std::numeric_limits<double>::infinity();
  return relative_half_width(s.median_ci, s.median);
}

KSCOPE_DECL series_analysis analyze_series(const sample_series& s, const bench_options& o,
                                      double rated_sm_clock_mhz) {
  series_analysis a;
  a.throttled.assign(s.samples_s.size(), false);
  std::vector<double> clocks;
  for (double c : s.sm_clock_mhz)
    if (std::isfinite(c) && c > 0) clocks.push_back(c);
  if (!clocks.empty()) {
    a.median_sm_clock_mhz = quantile(clocks, 0.5);
    a.min_sm_clock_mhz = *std::min_element(clocks.begin(), clocks.end());
    a.max_sm_clock_mhz = *std::max_element(clocks.begin(), clocks.end());
    const double threshold = o.throttle_fraction * a.median_sm_clock_mhz;
    for (std::size_t i = 0; i < s.samples_s.size() && i < s.sm_clock_mhz.size(); ++i) {
      const double c = s.sm_clock_mhz[i];
      if (std::isfinite(c) && c > 0 && c < threshold) {
        a.throttled[i] = true;
        ++a.throttled_samples;
      }
    }
    const double p25 = quantile(clocks, 0.25);
    const double reference = std::isfinite(rated_sm_clock_mhz) && rated_sm_clock_mhz > 0
                                 ? rated_sm_clock_mhz
                                 : quantile(clocks, 0.90);
    a.clock_managed = p25 < o.managed_clock_fraction * reference;
    // Only a series with every clock known can be aligned with the samples.
    if (a.clock_managed && clocks.size() == s.samples_s.size()) {
      const steady_state st = find_steady_state(s.sm_clock_mhz);
      a.clock_steady = st.steady;
      if (st.steady) a.clock_warmup = st.warmup;
    }
  }
  a.used_s.reserve(s.samples_s.size());
  for (std::size_t i = a.clock_warmup; i < s.samples_s.size(); ++i)
    if (!(o.discard_throttled && a.throttled[i])) a.used_s.push_back(s.samples_s[i]);
  stats_options so;
  so.level = o.level;
  so.detect_warmup = o.detect_warmup;
  a.stats = summarize(a.used_s, so);
  a.rel_half_width = relative_ci_half_width(a.stats);
  return a;
}

KSCOPE_DECL std::vector<std::string> unmet_conditions(const sample_series& s, const series_analysis& a,
                                                 const bench_options& o) {
  std::vector<std::string> unmet;
  auto seconds = [](double x) { return format_general(x, 3) + " s"; };
  auto percent = [](double fraction) { return format_general(100 * fraction, 3) + " %"; };
  if (a.stats.n < o.min_samples) {
    std::string text = std::to_string(a.stats.n) + (a.stats.n == 1 ? " sample" : " samples") + " used < min_samples " +
                       std::to_string(o.min_samples);
    if (a.stats.warmup > 0 || a.clock_warmup > 0 || a.used_s.size() < s.samples_s.size())
      text += " (" + std::to_string(s.samples_s.size()) + " taken, " + std::to_string(a.stats.warmup) +
              " removed as warm-up by MSER-5" +
              (a.clock_warmup > 0 ? ", " + std::to_string(a.clock_warmup) + " as the clock's transient" : "") +
              (o.discard_throttled && a.throttled_samples > 0
                   ? ", " + std::to_string(a.throttled_samples) + " throttled discarded"
                   : "") +
              ")";
    unmet.push_back(text);
  }
  if (s.measured_span_s < o.min_time_s)
    unmet.push_back("the measurement spans " + seconds(s.measured_span_s) + " < min_time_s " + seconds(o.min_time_s));
  if (!std::isfinite(a.rel_half_width)) {
    // No interval at all: say why, never print a width that was not computed.
    if (a.stats.n < 6) unmet.push_back("no median CI: it needs at least 6 samples used, there are " +
                                       std::to_string(a.stats.n));
    else unmet.push_back("no median CI: the median is not a positive time");
  } else if (a.rel_half_width > o.target_rel_ci) {
    unmet.push_back("median CI half-width " + percent(a.rel_half_width) + " > target " + percent(o.target_rel_ci));
  }
  if (a.stats.n > 0 && !a.stats.steady) unmet.push_back("no steady state (MSER-5): the series drifts");
  if (a.clock_managed) {
    // A clock-managed run must span the controller's swings: long enough, and either
    // with a steady clock or so long that the swings average out.
    if (s.measured_span_s < o.managed_min_time_s)
      unmet.push_back("power-managed SM clock: the measurement spans " + seconds(s.measured_span_s) +
                      " < managed_min_time_s " + seconds(o.managed_min_time_s));
    else if (!a.clock_steady && s.measured_span_s < 3 * o.managed_min_time_s)
      unmet.push_back("power-managed SM clock that never settled: the measurement spans " +
                      seconds(s.measured_span_s) + " < 3 x managed_min_time_s " + seconds(3 * o.managed_min_time_s));
  }
  return unmet;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

KSCOPE_DECL bool converged(const sample_series& s, const series_analysis& a, const bench_options& o);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool converged(const sample_series& s, const series_analysis& a, const bench_options& o) {
  return unmet_conditions(s, a, o).empty();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- "no work reached the stream" -------------------------------------------------
// A sample is indistinguishable from an empty one when its time (the whole sample, all
// its launches) is at most no_work_factor x the timer's empty-sample time plus
// no_work_floor_s. The empty sample is the timer's events with nothing between them,
// held the same way as a real sample. Measured on an H200 (driver 580, CUDA 13.0;
// tests/gpu/bench_test.cu prints them): an empty sample reads 1.31 us, an empty
// <<<1,1>>> kernel on the stream 2.78 us (the front end adds ~1.5 us for the smallest
// launch), a kernel on the legacy default stream or nothing at all 1.31 us. The limit
// must fall between those: 1.2 x 1.31 + 0.3 = 1.87 us. The factor absorbs the empty
// sample's jitter (median of 7, stable to a few %); docs/bench_schema.md, "Invalid
// results", states the rule.
inline constexpr double no_work_factor = 1.2;
inline constexpr double no_work_floor_s = 0.3e-6;

// The longest sample time that still counts as "nothing ran"; with the empty time
// unknown (NaN), only a zero time does.
KSCOPE_DECL double no_work_limit_s(double empty_stream_s);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double no_work_limit_s(double empty_stream_s) {
  if (!std::isfinite(empty_stream_s) || empty_stream_s < 0) return 0;
  return no_work_factor * empty_stream_s + no_work_floor_s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool indistinguishable_from_empty(double sample_s, double empty_stream_s);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool indistinguishable_from_empty(double sample_s, double empty_stream_s) {
  return sample_s >= 0 && sample_s <= no_work_limit_s(empty_stream_s);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS
// "a single call took 120 ns, no longer than an empty sample on the stream (95.0 ns;
// the limit is 1.2 x that + 300 ns)".
KSCOPE_DECL std::string empty_time_evidence(const std::string& what, double sample_s, double empty_stream_s);

// The sentence of an invalid result: what did not happen, the evidence, the likely
// causes. `stream` names the stream: "the benchmark's stream", "the stream of the
// reference 'cuBLAS'".
KSCOPE_DECL std::string no_work_reason(const std::string& stream, const std::string& evidence);

// The order of targets in one measurement round: A for one target, A B B A for two
// (ABBA: a linear drift in clocks or temperature over the round hits both equally),
// and in general forward then backward.
KSCOPE_DECL std::vector<std::size_t> round_order(std::size_t targets);

// Batch size from a first per-launch estimate: enough launches for one sample to last
// min_sample_s (events resolve ~0.5 us, and a per-sample overhead of a few us must not
// count), capped by max_launches_per_sample.
KSCOPE_DECL std::size_t choose_launches(double estimate_s, const bench_options& o);

// Runs the whole sampling procedure for `targets` targets (1: a benchmark; 2: a
// benchmark and its reference, interleaved ABBA) and analyses the series. It stops early,
// with stop_reason::invalid, as soon as a target shows that no work reaches its stream:
// after the first estimate (a single call no longer than an empty sample), after the
// batch is captured (an empty graph, a rejected capture), and once more on the final
// medians. Spending the time budget on such a target would only time empty streams.
KSCOPE_DECL sampling_outcome sample_targets(bench_timer& timer, std::size_t targets, const bench_options& o,
                                       double rated_sm_clock_mhz = std::numeric_limits<double>::quiet_NaN());

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string empty_time_evidence(const std::string& what, double sample_s, double empty_stream_s) {
  std::string s = what + " took " + (sample_s == 0 ? std::string("0 s") : format_si(sample_s, "s"));
  if (!std::isfinite(empty_stream_s) || empty_stream_s < 0) return s + ": nothing ran between the events";
  return s + ", no longer than an empty sample on the stream (" + format_si(empty_stream_s, "s") + "; the limit is " +
         format_general(no_work_factor, 3) + " x that + " + format_si(no_work_floor_s, "s") + ")";
}

KSCOPE_DECL std::string no_work_reason(const std::string& stream, const std::string& evidence) {
  return "no work reached " + stream + ": " + evidence +
         ". The callable launched on another stream, on the legacy default stream, or launched nothing; "
         "it must launch its work on the cudaStream_t it receives";
}

KSCOPE_DECL std::vector<std::size_t> round_order(std::size_t targets) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < targets; ++i) order.push_back(i);
  if (targets > 1)
    for (std::size_t i = targets; i-- > 0;) order.push_back(i);
  return order;
}

KSCOPE_DECL std::size_t choose_launches(double estimate_s, const bench_options& o) {
  if (o.launches_per_sample > 0) return o.launches_per_sample;
  if (!(estimate_s > 0) || estimate_s >= o.min_sample_s) return 1;
  const double n = std::ceil(o.min_sample_s / estimate_s);
  const double cap = static_cast<double>(std::max<std::size_t>(1, o.max_launches_per_sample));
  return static_cast<std::size_t>(std::min(n, cap));
}

KSCOPE_DECL sampling_outcome sample_targets(bench_timer& timer, std::size_t targets, const bench_options& o,
                                       double rated_sm_clock_mhz) {
  if (!std::isfinite(rated_sm_clock_mhz)) rated_sm_clock_mhz = timer.rated_sm_clock_mhz();
  sampling_outcome out;
  out.series.resize(targets);
  const std::int64_t start_ns = timer.now_ns();
  const double budget_s = o.time_budget_s > 0 ? o.time_budget_s : std::numeric_limits<double>::infinity();
  auto elapsed_s = [&] { return static_cast<double>(timer.now_ns() - start_ns) * 1e-9; };
  // Measured once per run, before any call of the targets, so it sees an idle stream.
  out.empty_stream_s = timer.empty_stream_s();
  // A target whose timer keeps failing ends the run with stop_reason::error rather than
  // spinning until the budget runs out.
  constexpr std::size_t max_consecutive_invalid = 8;
  std::vector<std::size_t> consecutive_invalid(targets, 0);
  bool failed = false;
  bool invalid = false;
  auto declare_invalid = [&](std::size_t t, std::string evidence) {
    invalid = true;
    out.invalid_target = t;
    out.invalid_evidence = std::move(evidence);
  };

  // A time of exactly 0 is a measurement (nothing ran between the events), not a
  // failure: the no-work rule judges it. NaN, infinity and negative times are failures.
  auto take = [&](std::size_t t, std::size_t launches) -> timed_sample {
    timed_sample s = timer.time(t, launches);
    if (!(s.total_s >= 0) || !std::isfinite(s.total_s)) {
      ++out.series[t].invalid_samples;
      if (++consecutive_invalid[t] >= max_consecutive_invalid) failed = true;
      s.total_s = std::numeric_limits<double>::quiet_NaN();
    } else {
      consecutive_invalid[t] = 0;
    }
    return s;
  };

  // 1. First estimate: one launch to load modules and allocate (never used), then the
  //    median of three single launches.
  for (std::size_t t = 0; t < targets && !failed && !invalid; ++t) {
    sample_series& s = out.series[t];
    take(t, 1);
    ++s.warmup_calls;
    std::vector<double> first;
    // A very long kernel must not spend the budget on estimates: one is enough then.
    while (first.size() < 3 && !failed && !(first.size() >= 1 && elapsed_s() >= budget_s)) {
      const timed_sample x = take(t, 1);
      ++s.warmup_calls;
      if (std::isfinite(x.total_s)) {
        first.push_back(x.total_s);
        s.warmup_s += x.total_s;
      }
    }
    s.first_estimate_s = quantile(first, 0.5);
    if (failed || std::isnan(s.first_estimate_s)) {
      failed = true;
      break;
    }
    if (indistinguishable_from_empty(s.first_estimate_s, out.empty_stream_s)) {
      declare_invalid(t, empty_time_evidence("a single call (median of " + std::to_string(first.size()) + ")",
                                             s.first_estimate_s, out.empty_stream_s));
      break;
    }
    s.launches_per_sample = choose_launches(s.first_estimate_s, o);
    s.batching = timer.prepare(t, s.launches_per_sample);
    const batch_capture c = timer.capture(t);
    s.graph_nodes = c.graph_nodes;
    if (!c.no_work.empty()) {
      declare_invalid(t, c.no_work);
      break;
    }
  }

  // 2. Warm-up, round-robin over the targets so that each one's warm-up also warms the
  //    GPU for the others; half of the budget at most, so measurement still happens.
  if (!failed && !invalid) {
    auto warm = [&](const sample_series& s) {
      return s.warmup_calls >= o.warmup_min_calls && s.warmup_s >= o.warmup_min_s;
    };
    bool all_warm = false;
    while (!all_warm && !failed) {
      if (elapsed_s() >= budget_s / 2) {
        out.notes.push_back("warm-up cut short at half of the time budget");
        break;
      }
      all_warm = true;
      for (std::size_t t = 0; t < targets && !failed; ++t) {
        sample_series& s = out.series[t];
        if (warm(s)) continue;
        all_warm = false;
        const timed_sample x = take(t, s.launches_per_sample);
        ++s.warmup_samples;
        s.warmup_calls += s.launches_per_sample;
        if (std::isfinite(x.total_s)) s.warmup_s += x.total_s;
      }
    }
  }

  // 3. Measurement rounds until every target's median is precise enough, or a budget
  //    runs out. The CI is recomputed on a geometric schedule (every ~5 % more
  //    samples), so the cost of summarize() stays O(n log n) overall.
  const std::vector<std::size_t> order = round_order(targets);
  std::size_t next_check = std::max<std::size_t>(o.min_samples, 6);
  out.stopped = stop_reason::error;
  const std::int64_t measure_start_ns = timer.now_ns();
  while (!failed && !invalid) {
    for (std::size_t t : order) {
      sample_series& s = out.series[t];
      const timed_sample x = take(t, s.launches_per_sample);
      if (failed) break;
      if (!std::isfinite(x.total_s)) continue;
      s.samples_s.push_back(x.total_s / static_cast<double>(s.launches_per_sample));
      s.sm_clock_mhz.push_back(x.sm_clock_mhz);
      s.measured_s += x.total_s;
    }
    if (failed) break;
    ++out.rounds;
    const double span_s = static_cast<double>(timer.now_ns() - measure_start_ns) * 1e-9;
    for (sample_series& s : out.series) s.measured_span_s = span_s;

    std::size_t fewest = out.series[0].samples_s.size();
    for (const sample_series& s : out.series) fewest = std::min(fewest, s.samples_s.size());
    if (fewest >= next_check) {
      bool all_done = true;
      for (std::size_t t = 0; t < targets && all_done; ++t)
        all_done = converged(out.series[t], analyze_series(out.series[t], o, rated_sm_clock_mhz), o);
      if (all_done) {
        out.stopped = stop_reason::target_reached;
        break;
      }
      next_check = fewest + std::max<std::size_t>(2, fewest / 20);
    }
    if (fewest >= o.max_samples) {
      out.stopped = stop_reason::sample_limit;
      break;
    }
    if (elapsed_s() >= budget_s) {
      out.stopped = stop_reason::time_budget;
      break;
    }
  }
  if (failed) {
    out.stopped = stop_reason::error;
    out.error = "the timer failed on 8 consecutive samples; sampling stopped";
    out.notes.push_back(out.error);
  }
  out.wall_s = elapsed_s();
  for (const sample_series& s : out.series) out.analysis.push_back(analyze_series(s, o, rated_sm_clock_mhz));
  if (!failed && !invalid && (out.stopped == stop_reason::time_budget || out.stopped == stop_reason::sample_limit)) {
    // The last check may lie a few samples back (geometric schedule): if the final
    // series meets every condition, the target was reached and the report says so.
    bool all_done = true;
    for (std::size_t t = 0; t < targets && all_done; ++t) all_done = converged(out.series[t], out.analysis[t], o);
    if (all_done) out.stopped = stop_reason::target_reached;
  }
  // The final medians: a whole sample no longer than an empty one saw no work, whatever
  // the estimate said (a callable that stops launching, or an estimate that was noise).
  for (std::size_t t = 0; t < targets && !failed && !invalid; ++t) {
    const sample_series& s = out.series[t];
    const double sample_median_s = out.analysis[t].stats.median * static_cast<double>(s.launches_per_sample);
    if (indistinguishable_from_empty(sample_median_s, out.empty_stream_s))
      declare_invalid(t, empty_time_evidence("the median sample of " + std::to_string(s.launches_per_sample) +
                                                 (s.launches_per_sample == 1 ? " call" : " calls"),
                                             sample_median_s, out.empty_stream_s));
  }
  if (invalid) out.stopped = stop_reason::invalid;
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace harness
}  // namespace detail
}  // namespace kscope
