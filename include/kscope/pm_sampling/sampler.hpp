// kscope/pm_sampling/sampler.hpp — GPU-wide hardware counters read at a fixed interval
// while the program runs (CUPTI PM sampling: no kernel replay, no serialisation), CUPTI and
// libnvperf_host loaded with dlopen and set up as for the range profiler (cupti/counter_pass.hpp).
//
//   kscope::metric_sampler sampler;
//   if (!sampler.start())                                   // default metrics and windows
//     std::fprintf(stderr, "%s\n", sampler.status().message.c_str());   // one line: why not
//   ... the program runs; a background thread samples in windows and decodes ...
//   sampler.drain([&](const kscope::metric_sample_view& s) { agg.add_sample(s); });
//   sampler.stop();                                         // decodes the rest
//
// The samples are on kscope's clock (steady_clock ns, as the activity records), so the
// session can hand them with the kernel intervals to evidence/pm_samples.hpp's
// sampled_metrics, which shares each sample among the scopes whose kernels overlapped it.
//
// Windows, because decoding is slow. Measured on an H200 (CUPTI 13.0, 7 metrics): turning
// one sample into values costs the host ~0.05 ms in cuptiPmSamplingDecodeData, ~0.035 ms
// in the evaluation and ~0.02 ms (amortised) in starting the counter-data image over:
// about 0.1 ms of CPU per sample. At a 20 µs interval the GPU makes 50 samples per ms and
// a decoder can never keep up (the first version tried: its hardware buffer overflowed
// and every later sample was lost). So the sampler samples for `window` (default 50 ms),
// stops the hardware, decodes that window completely, and waits until its own CPU time is
// at most `max_decoder_share` of one core (default 25 %) before the next window, with a
// random ±20 % on the wait so windows never lock onto a periodic step. Every sample of a
// window is kept; the status says which share of the run the samples covered. With
// `window` 0 the sampler runs continuously and decodes every decode_period: right for
// long intervals (≥ 0.5 ms), where the decoder keeps up; losses are counted either way.
//
// The sequence (CUPTI 13 / 12.6+), after the range profiler's setup (libraries, profiler
// initialization, chip name): PM-sampling counter availability, a PM-sampling host object,
// the metric set checked (one pass? else each metric alone: known? how many passes?),
// config image, cuptiPmSamplingEnable on the device, SetConfig (GPU time-interval trigger,
// the hardware buffer), a counter-data image for counter_data_samples samples; then per
// window Start, Stop, DecodeData into the image until the hardware buffer is empty, per
// sample GetSampleInfo (timestamps) and cuptiProfilerHostEvaluateToGpuValues, and a
// re-initialization of the image after each pass; at the end Disable.
//
// Why these defaults (measured on an H200, bench/RESULTS.md):
// - 100 µs interval: 10 to 100 samples inside a 1–10 ms decode step, and with 50 ms
//   windows and a 25 % decoder share the windows cover about a fifth of the run (at 20 µs
//   about 1/20). PM sampling slowed a copy + GEMM workload by 0.27 % at 100 µs (0.45 % at
//   20 µs), within the 2 % goal.
// - The default metrics fit one pass on GH100: plain sm__throughput needs 19 passes there,
//   so the single-pass TriageCompute.sm__throughput variant stands for SM throughput.
// - The counter-data image takes ~68 KB per sample with these metrics; 512 samples
//   (~35 MB) are decoded per round, and the image is reused.
// - A window's first sample can start long before the window (the hardware's previous
//   trigger): a sample longer than 4 intervals is not a sample of the window; it is
//   counted (samples_irregular) and left out.
//
// Never breaks the program: nothing here throws or aborts. Unavailable cases — built
// without cupti_pmsampling.h, no device, libcupti or libnvperf_host missing or too old, no
// permission to the counters, another profiler holding them (Nsight, DCGM, another PM
// sampler), an unsupported device or trigger (Turing and GA100 have no time-interval
// trigger; vGPU, MIG...), a metric unknown or needing more than one pass — end start()
// with false and one message in status(). While the sampler runs, a counter pass
// (profile_counters) on the same device may be refused by CUPTI as busy.
#pragma once

#include "../core/config.hpp"
#include "../evidence/metrics.hpp"
#include "../core/detail/once.hpp"
#include "../core/detail/option_text.hpp"
#include "../evidence/pm_samples.hpp"
#include "../cupti/detail/api.hpp"
#include "detail/pm_sampling_api.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>  // getpid: a forked child's copy of the running sampler is not stopped at exit

#if KSCOPE_HAS_PM_SAMPLING
#  include "../core/detail/clock.hpp"
#  include "../cupti/counter_pass.hpp"
#  include "../cupti/detail/profiler_host.hpp"
#endif

namespace kscope {

enum class metric_sampler_state : std::uint8_t {
  idle,                // never started
  running,             // sampling; a background thread decodes
  stopped,             // stopped after running: samples() / drain() hold the rest
  invalid_request,     // bad options (checked before touching the GPU)
  disabled,            // built without cupti_pmsampling.h (CUDA < 12.6)
  unavailable,         // no device, libcupti / libnvperf_host missing or too old
  no_permission,       // counters restricted to administrators
  busy,                // another profiler or sampler holds the counters, or a counter pass runs here
  unsupported_device,  // PM sampling or its time-interval trigger not offered by this device
  unknown_metric,      // a metric the device does not offer (message lists close names)
  too_many_passes,     // the metric set needs more than the one pass PM sampling collects
  failed,              // any other CUPTI or CUDA error (message names the call)
};

[[nodiscard]] constexpr const char* to_string(metric_sampler_state s) noexcept {
  switch (s) {
    case metric_sampler_state::idle: return "idle";
    case metric_sampler_state::running: return "running";
    case metric_sampler_state::stopped: return "stopped";
    case metric_sampler_state::invalid_request: return "invalid request";
    case metric_sampler_state::disabled: return "disabled";
    case metric_sampler_state::unavailable: return "unavailable";
    case metric_sampler_state::no_permission: return "no permission";
    case metric_sampler_state::busy: return "busy";
    case metric_sampler_state::unsupported_device: return "unsupported device";
    case metric_sampler_state::unknown_metric: return "unknown metric";
    case metric_sampler_state::too_many_passes: return "too many passes";
    case metric_sampler_state::failed: return "failed";
  }
  return "unknown";
}

// The default set: one pass on GH100 (the H200 probe); SM clock so clock drops show.
[[nodiscard]] KSCOPE_DECL std::vector<std::string> default_sampling_metrics();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> default_sampling_metrics() {
  return {
      "TriageCompute.sm__throughput.avg.pct_of_peak_sustained_elapsed",   // SM throughput %, single-pass variant
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",               // DRAM throughput %
      "dram__bytes_read.sum",                                             // bytes per sample
      "dram__bytes_write.sum",
      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",  // tensor pipe %
      "sm__warps_active.avg.pct_of_peak_sustained_elapsed",               // warps active %
      "gpc__cycles_elapsed.avg.per_second",                               // SM clock, Hz
  };
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The on-chip units the default set adds when the device offers them in the same single
// pass: L2 and L1/shared throughput, so a verdict from sampling can tell an L2- or
// L1-bound kernel from a latency-bound one. Each entry lists the spellings tried, first
// first (the single-pass "Triage" variants are what GH100 offers for PM sampling); a unit
// none of whose spellings fits is left out and a note names it.
struct optional_sampling_unit {
  std::string unit;                   // "L2", "L1/shared"
  std::vector<std::string> spellings;
};

[[nodiscard]] KSCOPE_DECL std::vector<optional_sampling_unit> optional_sampling_units();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<optional_sampling_unit> optional_sampling_units() {
  return {
      {"L2",
       {"LTS.TriageCompute.lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "TriageCompute.lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed"}},
      {"L1/shared",
       {"SM_A.TriageCompute.l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
        "TriageCompute.l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__throughput.avg.pct_of_peak_sustained_elapsed"}},
  };
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

struct metric_sampler_options {
  std::vector<std::string> metrics;              // empty: default_sampling_metrics() + optional_sampling_units()
  std::uint64_t interval_ns = 100'000;           // GPU time between samples
  std::chrono::milliseconds window{50};          // sampling time per window; 0: continuous
  double max_decoder_share = 0.25;               // decoder CPU time / wall time, one core
  std::size_t hardware_buffer_bytes = std::size_t(128) << 20;  // where the GPU writes records
  std::chrono::milliseconds decode_period{10};   // continuous mode: decode period
  std::uint32_t counter_data_samples = 0;        // image capacity; 0: from window / interval
  std::size_t max_counter_data_bytes = std::size_t(256) << 20;  // the image's cap (shrinks the window)
  std::size_t max_buffered_samples = 65536;      // decoded, not yet drained; more are dropped and counted
  // Called by the decoder thread after each window is decoded (continuous mode: about
  // every 250 ms), with no sampler lock held: where a consumer drains the samples and
  // folds them (session/live_metric_sampling.hpp). Must not call stop() on this sampler.
  std::function<void()> after_decode;
  std::string cupti_library;                     // explicit libcupti, as counter_options
  std::string nvperf_host_library;               // explicit libnvperf_host.so
};

// Where sampling stands, and everything lost, counted.
struct metric_sampler_status {
  metric_sampler_state state = metric_sampler_state::idle;
  std::string message;               // one line: what runs, or why not
  std::vector<std::string> notes;    // decode problems, clock notes
  std::vector<std::string> metrics;  // sample values come in this order
  std::string chip;
  int device = 0;                    // the CUDA device sampled (current at start())
  std::uint64_t interval_ns = 0;
  double mean_interval_ns = std::numeric_limits<double>::quiet_NaN();  // observed start to start
  std::uint64_t samples = 0;                 // decoded, evaluated and buffered
  std::uint64_t samples_dropped = 0;         // buffer full (drain more often)
  std::uint64_t samples_unusable = 0;        // no timestamps, or evaluation failed
  std::uint64_t samples_lost_at_reset = 0;   // partly decoded when the full image was reset
  std::uint64_t samples_irregular = 0;       // longer than 4 intervals (a window's lead-in): left out
  std::uint64_t samples_missing = 0;         // gaps in the timeline inside a window: lost before decoding
  std::uint64_t hardware_overflows = 0;      // the hardware buffer overflowed: samples lost
  std::uint64_t decodes = 0;
  std::uint64_t decode_errors = 0;
  // Windows (window > 0): how much of the run the samples cover.
  std::uint64_t windows = 0;
  std::uint64_t sampled_ns = 0;      // sum of the windows' lengths (host clock)
  // The time the delivered samples cover (their lengths summed). Shorter than sampled_ns:
  // on an H200 the first sample after each (re)start spans the pause and is left out
  // (samples_irregular), and the hardware takes a while to produce samples after a start.
  std::uint64_t sample_time_ns = 0;
  std::uint64_t running_ns = 0;      // start() to now / stop()
  // Every sample ending before this (kscope's clock) has been delivered: the end of the
  // last decoded window (continuous: the last decoded sample's end).
  std::int64_t decoded_until_ns = 0;
  // The share of the run the samples cover (their own time, not the windows'), NaN before any.
  [[nodiscard]] double coverage() const noexcept;
  // Where the decoder's time went (its CPU cost; a background thread, never a scope).
  std::uint64_t decode_ns = 0;    // cuptiPmSamplingDecodeData
  std::uint64_t evaluate_ns = 0;  // sample info and metric evaluation
  std::uint64_t reset_ns = 0;     // starting the counter-data image over
  std::size_t counter_data_bytes = 0;        // the counter-data image
  std::size_t counter_data_samples = 0;      // ... and the samples it holds
  std::chrono::milliseconds window{0};       // the window used (may be shorter than asked)
  sample_timeline timeline = sample_timeline::unknown;

  [[nodiscard]] bool ok() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double metric_sampler_status::coverage() const noexcept {
  return running_ns > 0 ? static_cast<double>(sample_time_ns) / static_cast<double>(running_ns)
        : std::numeric_limits<double>::quiet_NaN();
}

KSCOPE_DECL bool metric_sampler_status::ok() const noexcept {
  return state == metric_sampler_state::running || state == metric_sampler_state::stopped;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Applies "key=value,key=value" (KSCOPE_METRIC_SAMPLING_OPTIONS) to `options`. Returns one
// line per item that was not understood, naming it (that option keeps its value); the others
// apply. Keys:
//   interval_us        GPU time between samples, µs (1 .. 1000000)
//   window_ms          sampling time per window, ms (0 .. 60000; 0: continuous)
//   decoder_share      the decoder's CPU time at most, % of one core (1 .. 100)
//   decode_period_ms   continuous mode: the decode period, ms (1 .. 10000)
//
//   kscope::apply_metric_sampler_options_text("interval_us=1000,decoder_share=5", o);
KSCOPE_DECL std::vector<std::string> apply_metric_sampler_options_text(
    std::string_view text, metric_sampler_options& options, std::string_view source = "KSCOPE_METRIC_SAMPLING_OPTIONS");

// The options with $KSCOPE_METRIC_SAMPLING_OPTIONS applied (the session does this for every
// sampling it starts: enable_metric_sampling(), KSCOPE_METRIC_SAMPLING=1, the production preset).
KSCOPE_DECL std::vector<std::string> apply_metric_sampler_options_environment(metric_sampler_options& options);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> apply_metric_sampler_options_text(std::string_view text,
                                                                 metric_sampler_options& options,
                                                                 std::string_view source) {
  std::vector<std::string> problems;
  detail::for_each_option(text, [&](std::string_view key, std::string_view value, std::string_view item) {
    const auto refuse = [&](const char* expected) {
      problems.push_back(detail::option_refusal(source, item, expected));
    };
    std::uint64_t n = 0;
    if (key == "interval_us") {
      if (detail::parse_option_count(value, 1, 1'000'000, n)) options.interval_ns = n * 1000;
      else refuse("microseconds, 1 .. 1000000");
    } else if (key == "window_ms") {
      if (detail::parse_option_count(value, 0, 60'000, n)) options.window = std::chrono::milliseconds(n);
      else refuse("milliseconds, 0 (continuous) .. 60000");
    } else if (key == "decoder_share") {
      if (detail::parse_option_count(value, 1, 100, n)) options.max_decoder_share = static_cast<double>(n) / 100.0;
      else refuse("percent of one core, 1 .. 100");
    } else if (key == "decode_period_ms") {
      if (detail::parse_option_count(value, 1, 10'000, n)) options.decode_period = std::chrono::milliseconds(n);
      else refuse("milliseconds, 1 .. 10000");
    } else {
      refuse(key.empty() ? "expected key=value" : "keys: interval_us, window_ms, decoder_share, decode_period_ms");
    }
  });
  return problems;
}

KSCOPE_DECL std::vector<std::string> apply_metric_sampler_options_environment(metric_sampler_options& options) {
  const char* text = std::getenv("KSCOPE_METRIC_SAMPLING_OPTIONS");
  if (text == nullptr) return {};
  return apply_metric_sampler_options_text(text, options);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// "" when the options can be tried, else what is wrong with them.
KSCOPE_DECL std::string metric_sampler_request_error(const metric_sampler_options& o);

// One PM sampler per process: the device has one, and a second Enable would fight the
// first inside CUPTI. Set by a successful start(), cleared by its stop().
KSCOPE_DECL std::atomic<bool>& pm_sampler_active() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string metric_sampler_request_error(const metric_sampler_options& o) {
  if (o.interval_ns < 1000 || o.interval_ns > 1'000'000'000)
    return "metric_sampler_options::interval_ns must be between 1000 (1 µs) and 1e9 (1 s), got " +
           std::to_string(o.interval_ns);
  if (o.hardware_buffer_bytes < (std::size_t(1) << 20))
    return "metric_sampler_options::hardware_buffer_bytes must be at least 1 MiB, got " +
           std::to_string(o.hardware_buffer_bytes);
  if (o.window.count() < 0 || o.window.count() > 60'000)
    return "metric_sampler_options::window must be between 0 (continuous) and 60000 ms, got " +
           std::to_string(o.window.count()) + " ms";
  if (!(o.max_decoder_share > 0.0 && o.max_decoder_share <= 1.0))
    return "metric_sampler_options::max_decoder_share must be in (0, 1], got " + std::to_string(o.max_decoder_share);
  if (o.decode_period.count() < 1 || o.decode_period.count() > 10'000)
    return "metric_sampler_options::decode_period must be between 1 ms and 10 s, got " +
           std::to_string(o.decode_period.count()) + " ms";
  if (o.counter_data_samples != 0 && (o.counter_data_samples < 16 || o.counter_data_samples > (1u << 20)))
    return "metric_sampler_options::counter_data_samples must be 0 (sized from the window) or between 16 and "
           "1048576, got " +
           std::to_string(o.counter_data_samples);
  if (o.max_buffered_samples == 0) return "metric_sampler_options::max_buffered_samples must be at least 1";
  for (const std::string& m : o.metrics)
    if (m.empty()) return "empty metric name in metric_sampler_options::metrics";
  return {};
}

KSCOPE_DECL std::atomic<bool>& pm_sampler_active() noexcept {
  static std::atomic<bool> active{false};
  return active;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_HAS_PM_SAMPLING

KSCOPE_DECL metric_sampler_state sampler_state_for(counter_state s) noexcept;

// The PM sampling entry points, resolved once per process (under counter_pass_mutex).
KSCOPE_DECL pm_sampling_api& pm_sampling_library_state();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL metric_sampler_state sampler_state_for(counter_state s) noexcept {
  switch (s) {
    case counter_state::invalid_request: return metric_sampler_state::invalid_request;
    case counter_state::disabled: return metric_sampler_state::disabled;
    case counter_state::unavailable: return metric_sampler_state::unavailable;
    case counter_state::no_permission: return metric_sampler_state::no_permission;
    case counter_state::busy: return metric_sampler_state::busy;
    case counter_state::unsupported_device: return metric_sampler_state::unsupported_device;
    case counter_state::unknown_metric: return metric_sampler_state::unknown_metric;
    default: return metric_sampler_state::failed;
  }
}

KSCOPE_DECL pm_sampling_api& pm_sampling_library_state() {
  static lazy_global<pm_sampling_api> api{lock_rank::init};  // fork-safe (core/detail/once.hpp)
  return api.get([] { return new pm_sampling_api(); });
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One PM sampling run on one device: set up by open(), decoded by the background thread
// (then by stop(), never concurrently), closed once.
class pm_sampling_run {
 public:
  pm_sampling_run() = default;
  pm_sampling_run(const pm_sampling_run&) = delete;
  pm_sampling_run& operator=(const pm_sampling_run&) = delete;
  ~pm_sampling_run() { close(); }

  metric_sampler_state state = metric_sampler_state::failed;
  std::string message;

  // Everything up to a started sampler; false with state and message on the first failure.
  bool open(const metric_sampler_options& options, metric_sampler_status& status);

  std::chrono::milliseconds effective_window{0};  // the window open() settled on
  std::string window_note;                         // why it differs from the option's

  // Starts (or, after stop_sampling(), restarts) the hardware; false with the message.
  bool start_sampling();

  // Decodes what the hardware buffer holds and hands each usable sample (kscope's clock)
  // to sink(start_ns, end_ns, values). Counts and the time spent go to `status`.
  //
  // The image is started over after every pass whose samples are all read (every
  // populated sample completed), so it only ever holds one decode period's samples and
  // each pass decodes into a fresh image. Keeping samples in it across passes, as an
  // earlier version did, stalled on an H200: once the image held its 1,024 samples the
  // decoder neither reported it FULL nor took more records, and every later sample was
  // lost. A partly decoded sample (populated, not completed) keeps the image until the
  // next pass completes it, unless the image is full; then it is counted as lost.
  template <class Sink>
  void decode(metric_sampler_status& status, std::vector<std::string>& notes, Sink&& sink) {
    if (object_ == nullptr) return;
    for (int round = 0; round < 64; ++round) {  // bounded: each full image is one round
      KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_DecodeData_Params, decode);
      decode.pPmSamplingObject = object_;
      decode.pCounterDataImage = counter_data_.data();
      decode.counterDataImageSize = counter_data_.size();
      std::int64_t t0 = now_ns();
      const CUptiResult r = pm_->decode_data(&decode);
      std::int64_t t1 = now_ns();
      status.decode_ns += static_cast<std::uint64_t>(t1 - t0);
      ++status.decodes;
      if (r == CUPTI_ERROR_OUT_OF_MEMORY) {  // the header's meaning: hardware-buffer overflow
        ++status.hardware_overflows;
        note_once(notes, "the PM sampling hardware buffer overflowed: samples were lost (raise "
                         "hardware_buffer_bytes or shorten decode_period)");
        return;
      }
      if (r != CUPTI_SUCCESS) {
        ++status.decode_errors;
        note_once(notes, "cuptiPmSamplingDecodeData failed with " + libs_->cupti.result_name(r));
        return;
      }
      if (decode.overflow != 0) ++status.hardware_overflows;
      KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params, info);
      info.pCounterDataImage = counter_data_.data();
      info.counterDataImageSize = counter_data_.size();
      if (pm_->get_counter_data_info(&info) != CUPTI_SUCCESS) {
        ++status.decode_errors;
        return;
      }
      t0 = now_ns();
      evaluate(info.numCompletedSamples, status, notes, sink);
      t1 = now_ns();
      status.evaluate_ns += static_cast<std::uint64_t>(t1 - t0);
      const bool full = decode.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL ||
                        (info.numTotalSamples > 0 && info.numPopulatedSamples >= info.numTotalSamples);
      const bool all_read = info.numPopulatedSamples <= info.numCompletedSamples;
      if (info.numPopulatedSamples == 0) return;  // nothing decoded: the image stays fresh
      if (!all_read && !full) return;             // a partial sample waits for the next pass
      if (!all_read) status.samples_lost_at_reset += info.numPopulatedSamples - info.numCompletedSamples;
      t0 = now_ns();
      const bool reset = reset_image();
      status.reset_ns += static_cast<std::uint64_t>(now_ns() - t0);
      if (!reset) {
        ++status.decode_errors;
        note_once(notes, message);
        return;
      }
      // More records may wait behind a full image; otherwise this pass is done.
      if (!full) return;
    }
  }

  [[nodiscard]] bool sampling() const noexcept { return started_; }

  // Stops the hardware (the records already written stay decodable).
  void stop_sampling() noexcept;

  void close() noexcept;

 private:
  bool refuse(metric_sampler_state s, std::string why);

  bool ok(CUptiResult r, const char* call);

  static void note_once(std::vector<std::string>& notes, const std::string& text);

  // cuptiProfilerDeviceSupported for the PM sampling API, where the library has it.
  bool device_supported();

  bool new_host(profiler_host& out);

  // Adds `names` to `host`, builds the config image (into *image when given) and its pass
  // count (into *passes when given). A failure to add is left to the caller to explain when
  // `passes` is given (the metric checks), else refused here.
  bool build_config(profiler_host& host, std::vector<const char*> names, std::vector<std::uint8_t>* image,
                    std::size_t* passes, CUptiResult* add_result = nullptr);

  // Every metric known and single-pass alone, then the set in one pass; else one message
  // naming the metric (and its pass count, or its close names).
  bool check_metrics();

  // Adds each optional unit's first spelling that keeps metrics_ in one pass; a note for
  // each unit left out. Never refuses: the default set alone still samples.
  void add_optional_units(std::vector<std::string>& notes);

  // The counter-data image's size for `samples` samples.
  bool counter_data_size(std::size_t samples, std::size_t& bytes);

  bool reset_image();

  // (CUPTI timeline, kscope) read as close together as this thread can: the tightest of a
  // few (now, cupti, now) triples.
  clock_reading read_clocks() const noexcept;

  template <class Sink>
  void evaluate(std::size_t completed, metric_sampler_status& status, std::vector<std::string>& notes, Sink& sink) {
    if (completed <= read_) return;
    const clock_reading now = read_clocks();
    std::int64_t previous_start = 0;
    bool have_previous = false;
    for (std::size_t i = read_; i < completed; ++i) {
      KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params, info);
      info.pPmSamplingObject = object_;
      info.pCounterDataImage = counter_data_.data();
      info.counterDataImageSize = counter_data_.size();
      info.sampleIndex = i;
      if (pm_->get_sample_info(&info) != CUPTI_SUCCESS || info.startTimestamp == 0 ||
          info.endTimestamp <= info.startTimestamp) {
        ++status.samples_unusable;
        continue;
      }
      if (host_.evaluate(counter_data_, i, names_.data(), names_.size(), values_.data()) != CUPTI_SUCCESS) {
        ++status.samples_unusable;
        continue;
      }
      const auto start = static_cast<std::int64_t>(info.startTimestamp);
      const auto end = static_cast<std::int64_t>(info.endTimestamp);
      if (end - start > 4 * interval_ns_) {  // a window's lead-in, not a sample of it
        ++status.samples_irregular;
        have_previous = false;
        chain_valid_ = false;
        continue;
      }
      // Samples follow each other without gaps while the hardware runs; a gap is samples
      // lost before they reached the decoder (counted, whatever lost them).
      if (chain_valid_ && start - chain_end_ns_ > interval_ns_ + interval_ns_ / 2)
        status.samples_missing += static_cast<std::uint64_t>(
            (static_cast<double>(start - chain_end_ns_) / static_cast<double>(interval_ns_)) + 0.5);
      chain_end_ns_ = end;
      chain_valid_ = true;
      status.sample_time_ns += static_cast<std::uint64_t>(end - start);
      if (status.timeline == sample_timeline::unknown && !timeline_checked_) {
        // The first sample decides (it is at most a few decode periods old).
        timeline_checked_ = true;
        status.timeline = detect_sample_timeline(end, now, std::int64_t(10'000'000'000));
        if (status.timeline == sample_timeline::unknown)
          note_once(notes, "PM sample timestamps fit neither CUPTI's clock nor kscope's: mapped as CUPTI "
                           "timestamps, their placement among kernels is unproven");
      }
      const sample_clock_map map = status.timeline == sample_timeline::kscope
                                       ? sample_clock_map::identity()
                                       : sample_clock_map::from_readings(first_reading_, now);
      if (have_previous && start - previous_start <= 4 * interval_ns_) {  // not across a gap
        interval_sum_ += static_cast<double>(start - previous_start);
        ++interval_count_;
      }
      previous_start = start;
      have_previous = true;
      sink(map.to_kscope(start), map.to_kscope(end), values_.data());
    }
    read_ = completed;
    if (interval_count_ > 0) status.mean_interval_ns = interval_sum_ / static_cast<double>(interval_count_);
  }

  counter_libraries* libs_ = nullptr;
  pm_sampling_api* pm_ = nullptr;
  std::string chip_;
  int device_ = 0;
  std::vector<std::uint8_t> availability_;
  std::vector<std::string> metrics_;
  std::vector<const char*> names_;  // into metrics_
  profiler_host host_;  // a PM-sampling host object (cupti/detail/profiler_host.hpp)
  std::vector<std::uint8_t> config_;
  CUpti_PmSampling_Object* object_ = nullptr;
  bool started_ = false;
  std::vector<std::uint8_t> counter_data_;
  std::size_t read_ = 0;  // samples of the current image already evaluated
  std::vector<double> values_;
  clock_reading first_reading_{};
  std::int64_t interval_ns_ = 100'000;
  std::int64_t chain_end_ns_ = 0;  // the last sample's end (sample timeline)
  bool chain_valid_ = false;
  bool timeline_checked_ = false;
  double interval_sum_ = 0;
  std::uint64_t interval_count_ = 0;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool pm_sampling_run::open(const metric_sampler_options& options, metric_sampler_status& status) {
  counter_setup setup;  // libraries, profiler initialization, device, chip (cupti/counter_pass.hpp)
  if (!setup.open(options.cupti_library, options.nvperf_host_library)) {
    // One subject in the message: the setup speaks of "hardware counters".
    std::string why = setup.message;
    const std::string theirs = "hardware counters unavailable: ";
    if (why.compare(0, theirs.size(), theirs) == 0) why.erase(0, theirs.size());
    return refuse(sampler_state_for(setup.state), "metric sampling unavailable: " + why);
  }
  libs_ = setup.libs;
  status.chip = chip_ = setup.chip;
  status.device = device_ = setup.device;
  pm_sampling_api& pm = pm_sampling_library_state();
  if (!pm.resolved()) {
    const std::string missing = resolve_pm_sampling_symbols(libs_->cupti.handle, pm);
    if (!missing.empty())
      return refuse(metric_sampler_state::unavailable, "metric sampling unavailable: " + libs_->cupti.path +
                                                           " has no " + missing +
                                                           " (PM sampling needs CUDA 12.6 or later)");
  }
  pm_ = &pm;
  if (!device_supported()) return false;

  // Counter availability for PM sampling (where missing permission shows first).
  KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_GetCounterAvailability_Params, avail);
  avail.deviceIndex = static_cast<std::size_t>(device_);
  if (!ok(read_counter_availability(pm.get_counter_availability, avail, availability_),
          "cuptiPmSamplingGetCounterAvailability"))
    return false;

  metrics_ = options.metrics.empty() ? default_sampling_metrics() : options.metrics;
  if (options.metrics.empty()) add_optional_units(status.notes);
  status.metrics = metrics_;
  for (const std::string& m : metrics_) names_.push_back(m.c_str());
  if (!check_metrics()) return false;
  if (!new_host(host_) || !build_config(host_, names_, &config_, nullptr)) return false;

  KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_Enable_Params, enable);
  enable.deviceIndex = static_cast<std::size_t>(device_);
  mark_cupti_state_beyond_activity();  // the collector must not finalize CUPTI under it
  if (!ok(pm.enable(&enable), "cuptiPmSamplingEnable")) return false;
  object_ = enable.pPmSamplingObject;

  KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_SetConfig_Params, set);
  set.pPmSamplingObject = object_;
  set.configSize = config_.size();
  set.pConfig = config_.data();
  set.hardwareBufferSize = options.hardware_buffer_bytes;
  set.samplingInterval = options.interval_ns;
  set.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;  // interval in ns
  // Keep-oldest is what the probe ran; an overflow is reported by DecodeData and counted.
  set.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
  const CUptiResult configured = pm.set_config(&set);
  if (configured == CUPTI_ERROR_NOT_SUPPORTED)
    return refuse(metric_sampler_state::unsupported_device,
                  "metric sampling unavailable: " + chip_ +
                      " has no GPU time-interval trigger for PM sampling (Turing and GA100 lack it)");
  if (!ok(configured, "cuptiPmSamplingSetConfig")) return false;

  // The image must hold every sample one decode finds: a decode that fills it loses
  // the rest of what it read from the hardware buffer (on an H200 a full 512-sample
  // image after a 240 ms window at 20 µs kept the first 10 ms; the other 11,500 samples
  // were gone). So it is sized from the window (continuous: four decode periods), with
  // a quarter more, and where that exceeds max_counter_data_bytes the window shrinks.
  std::size_t fixed_bytes = 0, per_sample_bytes = 0;
  if (!counter_data_size(16, fixed_bytes) || !counter_data_size(32, per_sample_bytes)) return false;
  per_sample_bytes = per_sample_bytes > fixed_bytes ? (per_sample_bytes - fixed_bytes) / 16 : 1;
  fixed_bytes = fixed_bytes > 16 * per_sample_bytes ? fixed_bytes - 16 * per_sample_bytes : 0;
  const double interval = static_cast<double>(options.interval_ns);
  const double span_ns = options.window.count() > 0
                             ? 1e6 * static_cast<double>(options.window.count())
                             : 4e6 * static_cast<double>(options.decode_period.count());
  std::size_t samples = options.counter_data_samples > 0
                            ? options.counter_data_samples
                            : static_cast<std::size_t>(span_ns / interval * 1.25) + 64;
  const std::size_t fitting = options.max_counter_data_bytes > fixed_bytes
                                  ? (options.max_counter_data_bytes - fixed_bytes) / std::max<std::size_t>(1, per_sample_bytes)
                                  : 0;
  if (samples > fitting) samples = fitting;
  if (samples < 16)
    return refuse(metric_sampler_state::invalid_request,
                  "metric sampling not started: max_counter_data_bytes (" +
                      std::to_string(options.max_counter_data_bytes) + ") holds fewer than 16 samples of " +
                      std::to_string(per_sample_bytes) + " bytes");
  effective_window = options.window;
  const double held_ns = static_cast<double>(samples - samples / 5) * interval;  // a fifth spare
  if (options.window.count() > 0 && held_ns < span_ns) {
    effective_window = std::chrono::milliseconds(std::max<long long>(1, static_cast<long long>(held_ns / 1e6)));
    window_note = "windows shortened from " + std::to_string(options.window.count()) + " ms to " +
                  std::to_string(effective_window.count()) + " ms: the counter-data image holds " +
                  std::to_string(samples) + " samples (" + std::to_string(per_sample_bytes) +
                  " bytes each; max_counter_data_bytes " + std::to_string(options.max_counter_data_bytes) + ")";
  } else if (options.window.count() == 0 && held_ns < span_ns / 2) {
    window_note = "continuous sampling: the counter-data image holds " + std::to_string(samples) +
                  " samples, less than two decode periods; samples are lost whenever a decode finds more";
  }
  std::size_t data_bytes = 0;
  if (!counter_data_size(samples, data_bytes)) return false;
  try {
    counter_data_.assign(data_bytes, 0);
  } catch (...) {
    return refuse(metric_sampler_state::failed, "metric sampling not started: no memory for a counter-data image of " +
                                                    std::to_string(data_bytes) +
                                                    " bytes (lower max_counter_data_bytes)");
  }
  status.counter_data_samples = samples;
  status.counter_data_bytes = counter_data_.size();
  if (!reset_image()) return false;
  values_.assign(names_.size(), 0.0);

  interval_ns_ = static_cast<std::int64_t>(options.interval_ns);
  first_reading_ = read_clocks();
  return start_sampling();
}

KSCOPE_DECL bool pm_sampling_run::start_sampling() {
  if (started_) return true;
  KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_Start_Params, start);
  start.pPmSamplingObject = object_;
  if (!ok(pm_->start(&start), "cuptiPmSamplingStart")) return false;
  started_ = true;
  chain_valid_ = false;  // the gap to the previous window is no loss
  return true;
}

KSCOPE_DECL void pm_sampling_run::stop_sampling() noexcept {
  if (!started_) return;
  KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_Stop_Params, stop);
  stop.pPmSamplingObject = object_;
  (void)pm_->stop(&stop);
  started_ = false;
}

KSCOPE_DECL void pm_sampling_run::close() noexcept {
  stop_sampling();
  if (object_ != nullptr) {
    KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_Disable_Params, disable);
    disable.pPmSamplingObject = object_;
    (void)pm_->disable(&disable);
    object_ = nullptr;
  }
}

KSCOPE_DECL bool pm_sampling_run::refuse(metric_sampler_state s, std::string why) {
  state = s;
  message = std::move(why);
  return false;
}

KSCOPE_DECL bool pm_sampling_run::ok(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return true;
  const counter_state s = counter_state_for(r);
  const std::string advice = counter_error_advice(r);
  return refuse(s == counter_state::collected ? metric_sampler_state::failed : sampler_state_for(s),
                std::string("metric sampling unavailable: ") + call + " failed with " +
                    libs_->cupti.result_name(r) + (advice.empty() ? std::string() : ": " + advice));
}

KSCOPE_DECL void pm_sampling_run::note_once(std::vector<std::string>& notes, const std::string& text) {
  if (std::find(notes.begin(), notes.end(), text) == notes.end() && notes.size() < 16) notes.push_back(text);
}

KSCOPE_DECL bool pm_sampling_run::device_supported() {
  const device_support support = read_device_support(libs_->profiler, device_, CUPTI_PROFILER_PM_SAMPLING);
  if (!support.unsupported) return true;
  return refuse(metric_sampler_state::unsupported_device,
                "metric sampling unavailable: CUPTI cannot PM-sample this device" +
                    (support.reasons.empty() ? std::string() : " (" + support.reasons + ")"));
}

KSCOPE_DECL bool pm_sampling_run::new_host(profiler_host& out) {
  return ok(out.initialize(libs_->profiler, CUPTI_PROFILER_TYPE_PM_SAMPLING, chip_, availability_),
            "cuptiProfilerHostInitialize");
}

KSCOPE_DECL bool pm_sampling_run::build_config(profiler_host& host, std::vector<const char*> names, std::vector<std::uint8_t>* image,
                  std::size_t* passes, CUptiResult* add_result) {
  const CUptiResult added = host.add_metrics(names.data(), names.size());
  if (add_result != nullptr) *add_result = added;
  if (added != CUPTI_SUCCESS && add_result != nullptr) return false;
  if (!ok(added, "cuptiProfilerHostConfigAddMetrics")) return false;
  std::vector<std::uint8_t> config;
  if (const profiler_host_step step = host.config_image(config, passes); !ok(step.result, step.call)) return false;
  if (image != nullptr) image->swap(config);
  return true;
}

KSCOPE_DECL void pm_sampling_run::add_optional_units(std::vector<std::string>& notes) {
  for (const optional_sampling_unit& unit : optional_sampling_units()) {
    bool taken = false;
    for (const std::string& name : unit.spellings) {
      std::vector<const char*> trial;
      for (const std::string& m : metrics_) trial.push_back(m.c_str());
      trial.push_back(name.c_str());
      profiler_host probe;
      if (probe.initialize(libs_->profiler, CUPTI_PROFILER_TYPE_PM_SAMPLING, chip_, availability_) != CUPTI_SUCCESS)
        return;  // the default set's own checks will say why
      if (probe.add_metrics(trial.data(), trial.size()) != CUPTI_SUCCESS) continue;
      std::vector<std::uint8_t> config;
      std::size_t passes = 0;
      if (probe.config_image(config, &passes).result != CUPTI_SUCCESS || passes != 1) continue;
      metrics_.push_back(name);
      taken = true;
      break;
    }
    if (!taken)
      note_once(notes, unit.unit + " throughput is not sampled: none of its spellings fits the one pass on " + chip_ +
                           " (" + unit.spellings.front() + ", ...); a verdict from sampling cannot see " + unit.unit);
  }
}

KSCOPE_DECL bool pm_sampling_run::check_metrics() {
  {  // The usual case first: the whole set is known and fits one pass (one host object).
    profiler_host probe;
    if (!new_host(probe)) return false;
    std::size_t passes = 0;
    CUptiResult added = CUPTI_SUCCESS;
    if (build_config(probe, names_, nullptr, &passes, &added) && passes == 1) return true;
    if (added == CUPTI_SUCCESS && passes == 0) return false;  // a later call failed: message set
  }
  std::string unknown, multi_pass;
  std::vector<std::string> bases;
  for (const char* name : names_) {
    profiler_host probe;
    if (!new_host(probe)) return false;
    std::size_t passes = 0;
    CUptiResult added = CUPTI_SUCCESS;
    if (!build_config(probe, {name}, nullptr, &passes, &added)) {
      if (added == CUPTI_SUCCESS) return false;  // a later call failed: message set
      if (bases.empty()) bases = probe.base_metrics();
      const metric_name_check c = check_metric_name(name, bases);
      unknown += (unknown.empty() ? "" : "; ") +
                 (c.known || c.message.empty() ? "'" + std::string(name) + "' is not offered for PM sampling on " + chip_
                                               : c.message);
      continue;
    }
    if (passes > 1)
      multi_pass += (multi_pass.empty() ? "" : "; ") + std::string(name) + " needs " + std::to_string(passes) +
                    " passes";
  }
  if (!unknown.empty()) return refuse(metric_sampler_state::unknown_metric, "metric sampling not started: " + unknown);
  if (!multi_pass.empty())
    return refuse(metric_sampler_state::too_many_passes,
                  "metric sampling not started: PM sampling collects one pass only, and " + multi_pass +
                      " on " + chip_);
  // Together: the first metric that pushes the set past one pass.
  std::vector<const char*> prefix;
  for (const char* name : names_) {
    prefix.push_back(name);
    profiler_host probe;
    if (!new_host(probe)) return false;
    std::size_t passes = 0;
    if (!build_config(probe, prefix, nullptr, &passes)) return false;
    if (passes > 1)
      return refuse(metric_sampler_state::too_many_passes,
                    "metric sampling not started: " + std::string(name) +
                        " does not fit in one pass with the metrics before it (together " + std::to_string(passes) +
                        " passes on " + chip_ + "); PM sampling collects one pass only");
    if (prefix.size() == names_.size()) break;
  }
  return true;
}

KSCOPE_DECL bool pm_sampling_run::counter_data_size(std::size_t samples, std::size_t& bytes) {
  KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_GetCounterDataSize_Params, size);
  size.pPmSamplingObject = object_;
  size.pMetricNames = names_.data();
  size.numMetrics = names_.size();
  // The caller sizes `samples` from a memory budget; a count past 32 bits would be an image of
  // terabytes, which the allocation after this refuses anyway.
  size.maxSamples = static_cast<std::uint32_t>(std::min<std::size_t>(samples, UINT32_MAX));
  if (!ok(pm_->get_counter_data_size(&size), "cuptiPmSamplingGetCounterDataSize")) return false;
  bytes = size.counterDataSize;
  return true;
}

KSCOPE_DECL bool pm_sampling_run::reset_image() {
  KSCOPE_CUPTI_PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params, init);
  init.pPmSamplingObject = object_;
  init.counterDataSize = counter_data_.size();
  init.pCounterData = counter_data_.data();
  read_ = 0;
  return ok(pm_->counter_data_image_initialize(&init), "cuptiPmSamplingCounterDataImageInitialize");
}

KSCOPE_DECL clock_reading pm_sampling_run::read_clocks() const noexcept {
  clock_reading best{0, now_ns()};
  if (libs_->cupti.get_timestamp == nullptr) return best;
  std::int64_t tightest = std::numeric_limits<std::int64_t>::max();
  for (int i = 0; i < 5; ++i) {
    const std::int64_t before = now_ns();
    std::uint64_t cupti = 0;
    if (libs_->cupti.get_timestamp(&cupti) != CUPTI_SUCCESS) break;
    const std::int64_t after = now_ns();
    if (after - before < tightest) {
      tightest = after - before;
      best = {static_cast<std::int64_t>(cupti), before + (after - before) / 2};
    }
  }
  return best;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#endif  // KSCOPE_HAS_PM_SAMPLING

}  // namespace detail

// Samples GPU-wide counters of the current device from start() to stop(). One sampler per
// process runs at a time (the hardware has one PM sampler); start() and stop() may be
// called from different threads, drain() from any thread.
class metric_sampler {
 public:
  metric_sampler() = default;
  metric_sampler(const metric_sampler&) = delete;
  metric_sampler& operator=(const metric_sampler&) = delete;
  ~metric_sampler();

  // Starts sampling; false with status().message saying why not. Never throws.
  bool start(const metric_sampler_options& options = {}) noexcept;

  // Stops sampling and decodes what is left; the samples stay for samples() / drain().
  void stop() noexcept;

  [[nodiscard]] metric_sampler_status status() const;

  // The metric names, in the order of every sample's values.
  [[nodiscard]] std::vector<std::string> metrics() const;

  // Hands every buffered sample to f(const metric_sample_view&), oldest first, and forgets
  // them; returns how many. f runs without the sampler's lock, so decoding goes on.
  template <class F>
  std::size_t drain(F&& f) {
    std::lock_guard<std::mutex> draining(drain_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::swap(buffer_, spare_);
    }
    const std::size_t n = spare_.size();
    for (std::size_t i = 0; i < n; ++i) f(spare_[i]);
    spare_.clear();  // storage kept: the next swap reuses it
    return n;
  }

  // The buffered samples as values (drained).
  [[nodiscard]] std::vector<metric_sample> samples();

 private:
  bool finish_start(metric_sampler_status& fresh, metric_sampler_state state, std::string message);

  static std::int64_t now_ns() noexcept;

  // Waits up to `d` or until stop() asks; true when asked to stop.
  bool wait_or_stop(std::chrono::nanoseconds d);

  // The hardware has just stopped: the window [window_started_ns_, now) counts as sampled.
  // Returns the window's end.
  std::int64_t end_window();

  void decode_loop() noexcept;

  // Exit: the decoder thread must not outlive the CUDA runtime. exit() runs the runtime's
  // teardown (its atexit handler) while the thread may be inside cuptiPmSamplingStart or
  // DecodeData; on an H100 (torch, the production preset) the thread then wrote into memory
  // the teardown had freed, and the process aborted at exit ("malloc(): unsorted double
  // linked list corrupted") in up to 4 runs of 5. So a running sampler is stopped by an
  // atexit handler of its own, registered at the first start: a sampler needs a CUDA
  // context, so the runtime registered its teardown before, and this handler runs first
  // (atexit is last-in, first-out). In a forked child the parent's sampler is not running.
  // The handler holds exit_state().mutex from reading the pointer to the end of stop(), and the
  // destructor holds it around its own stop(): a sampler another thread destroys meanwhile
  // is either stopped by the handler first or gone from the pointer before it is read.
  struct exit_watch {
    std::mutex mutex;  // taken before control_mutex_
    std::atomic<metric_sampler*> running{nullptr};
    std::atomic<long> pid{0};  // the process that started it
  };
  static exit_watch& exit_state() noexcept;  // never destroyed
  static void stop_running_at_exit() noexcept;
  void watch_at_exit() noexcept;
  void forget_at_exit() noexcept;

  // One decode of the hardware buffer into the sample buffer. Called by the decoder
  // thread, or by stop() once it has joined: never twice at once.
  void decode_now() noexcept;

  mutable std::mutex mutex_;     // status, notes, the sample buffer, the stop flag
  std::mutex control_mutex_;     // start / stop
  std::mutex drain_mutex_;       // one drain at a time (the spare buffer)
  std::condition_variable wake_;
  bool stop_requested_ = false;
  std::chrono::milliseconds decode_period_{10};
  std::chrono::milliseconds window_{50};
  double max_decoder_share_ = 0.25;
  std::int64_t started_at_ns_ = 0;
  std::int64_t window_started_ns_ = 0;
  std::int64_t last_sample_end_ns_ = 0;  // under mutex_
  std::function<void()> after_decode_;
  bool window_sampling_ = true;  // the hardware runs (set at start, cleared by end_window)
  std::thread decoder_;
  metric_sampler_status status_;
  std::vector<std::string> notes_;
  std::vector<std::string> metrics_;
  metric_sample_buffer buffer_;
  metric_sample_buffer spare_;
#if KSCOPE_HAS_PM_SAMPLING
  std::unique_ptr<detail::pm_sampling_run> run_;
#endif
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool metric_sampler::start(const metric_sampler_options& options) noexcept {
  try {
    std::lock_guard<std::mutex> control(control_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (status_.state == metric_sampler_state::running) return false;  // already running: nothing changes
    }
    metric_sampler_status fresh;
    fresh.interval_ns = options.interval_ns;
    const std::string error = detail::metric_sampler_request_error(options);
    if (!error.empty()) return finish_start(fresh, metric_sampler_state::invalid_request,
                                            "metric sampling not started: " + error);
#if KSCOPE_HAS_PM_SAMPLING
    bool expected = false;
    if (!detail::pm_sampler_active().compare_exchange_strong(expected, true))
      return finish_start(fresh, metric_sampler_state::busy,
                          "metric sampling not started: another kscope metric sampler is running in this process");
    // Released on every way out below except a running sampler (stop() releases it then).
    struct active_guard {
      bool keep = false;
      ~active_guard() {
        if (!keep) detail::pm_sampler_active().store(false);
      }
    } active;
    std::unique_lock<std::mutex> pass(detail::counter_pass_mutex(), std::try_to_lock);
    if (!pass.owns_lock())
      return finish_start(fresh, metric_sampler_state::busy,
                          "metric sampling not started: a counter pass is running in this process");
    detail::release_kept_range_profiler();  // the per-scope counters' range profiler, kept between calls
    detail::release_kept_pc_sampling();     // a warp-stall pass's PC sampling, kept between passes
    auto run = std::make_unique<detail::pm_sampling_run>();
    if (!run->open(options, fresh)) return finish_start(fresh, run->state, run->message);
    pass.unlock();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      buffer_ = metric_sample_buffer(fresh.metrics.size(), options.max_buffered_samples);
      spare_ = metric_sample_buffer(fresh.metrics.size(), options.max_buffered_samples);
      metrics_ = fresh.metrics;
      status_ = fresh;
      status_.window = run->effective_window;
      notes_.clear();
      if (!run->window_note.empty()) notes_.push_back(run->window_note);
      last_sample_end_ns_ = 0;
      started_at_ns_ = now_ns();
      window_started_ns_ = started_at_ns_;
      window_sampling_ = true;
      status_.state = metric_sampler_state::running;
      status_.message = "metric sampling: " + std::to_string(fresh.metrics.size()) + " metrics every " +
                        std::to_string(options.interval_ns) + " ns" +
                        (run->effective_window.count() > 0
                             ? " in " + std::to_string(run->effective_window.count()) + " ms windows (decoder at most " +
                                   std::to_string(static_cast<int>(options.max_decoder_share * 100 + 0.5)) +
                                   " % of a core)"
                             : std::string(", continuously")) +
                        " on " + fresh.chip + " (device " + std::to_string(fresh.device) + ")";
      stop_requested_ = false;
    }
    const std::chrono::milliseconds window = run->effective_window;
    run_ = std::move(run);
    decode_period_ = options.decode_period;
    window_ = window;
    max_decoder_share_ = options.max_decoder_share;
    after_decode_ = options.after_decode;
    watch_at_exit();  // before the thread: an exit() from elsewhere meanwhile stops it too
    try {
      decoder_ = std::thread([this] { decode_loop(); });
    } catch (...) {
      forget_at_exit();
      run_.reset();
      std::lock_guard<std::mutex> lock(mutex_);
      status_.state = metric_sampler_state::failed;
      status_.message = "metric sampling not started: no thread for decoding";
      return false;
    }
    active.keep = true;
    return true;
#else
    return finish_start(fresh, metric_sampler_state::disabled,
                        "metric sampling unavailable: kscope was built without CUPTI's PM sampling headers "
                        "(cupti_pmsampling.h, CUDA 12.6 or later)");
#endif
  } catch (...) {  // out of memory in kscope's own bookkeeping
    std::lock_guard<std::mutex> lock(mutex_);
    status_.state = metric_sampler_state::failed;
    status_.message = "metric sampling not started: out of memory";
    return false;
  }
}

KSCOPE_DECL void metric_sampler::stop() noexcept {
  try {
    std::lock_guard<std::mutex> control(control_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_requested_ = true;
    }
    wake_.notify_all();
    if (decoder_.joinable()) {
      // exit() called on the decoder thread itself (from an after_decode callback): the
      // exit handler runs on it, so there is nothing to wait for.
      if (decoder_.get_id() == std::this_thread::get_id()) decoder_.detach();
      else decoder_.join();
    }
#if KSCOPE_HAS_PM_SAMPLING
    if (!run_) return;
    const bool was_sampling = run_->sampling();
    run_->stop_sampling();
    if (was_sampling) end_window();
    decode_now();
    run_->close();
    run_.reset();
    forget_at_exit();
    detail::pm_sampler_active().store(false);
    std::lock_guard<std::mutex> lock(mutex_);
    status_.running_ns = static_cast<std::uint64_t>(now_ns() - started_at_ns_);
    status_.decoded_until_ns = std::max(now_ns(), last_sample_end_ns_);
    status_.state = metric_sampler_state::stopped;
    char coverage[96];
    std::snprintf(coverage, sizeof coverage, "; %llu windows, the samples cover %.1f %% of %.3f s",
                  static_cast<unsigned long long>(status_.windows), 100.0 * status_.coverage(),
                  static_cast<double>(status_.running_ns) / 1e9);
    status_.message = "metric sampling stopped: " + std::to_string(status_.samples) + " samples of " +
                      std::to_string(status_.metrics.size()) + " metrics on " + status_.chip + coverage;
#endif
  } catch (...) {
  }
}

KSCOPE_DECL metric_sampler_status metric_sampler::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  metric_sampler_status s = status_;
  s.notes = notes_;
  if (s.state == metric_sampler_state::running) {
    const std::int64_t now = now_ns();
    s.running_ns = static_cast<std::uint64_t>(now - started_at_ns_);
    if (window_sampling_) s.sampled_ns += static_cast<std::uint64_t>(now - window_started_ns_);
  }
  return s;
}

KSCOPE_DECL std::vector<std::string> metric_sampler::metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return metrics_;
}

KSCOPE_DECL std::vector<metric_sample> metric_sampler::samples() {
  std::vector<metric_sample> out;
  const std::size_t metric_count = metrics().size();
  drain([&](const metric_sample_view& s) {
    out.push_back({s.start_ns, s.end_ns, std::vector<double>(s.values, s.values + metric_count)});
  });
  return out;
}

KSCOPE_DECL bool metric_sampler::finish_start(metric_sampler_status& fresh, metric_sampler_state state, std::string message) {
  std::lock_guard<std::mutex> lock(mutex_);
  status_ = std::move(fresh);
  status_.state = state;
  status_.message = std::move(message);
  notes_.clear();
  return false;
}

KSCOPE_DECL metric_sampler::exit_watch& metric_sampler::exit_state() noexcept {
  static exit_watch* const state = new exit_watch;  // leaked: usable in exit handlers and static destructors
  return *state;
}

KSCOPE_DECL void metric_sampler::watch_at_exit() noexcept {
  exit_watch& w = exit_state();
  w.pid.store(static_cast<long>(::getpid()), std::memory_order_relaxed);
  w.running.store(this, std::memory_order_release);
  static const bool registered = std::atexit(&stop_running_at_exit) == 0;
  (void)registered;
}

KSCOPE_DECL void metric_sampler::forget_at_exit() noexcept {
  metric_sampler* self = this;
  (void)exit_state().running.compare_exchange_strong(self, nullptr, std::memory_order_acq_rel);
}

KSCOPE_DECL void metric_sampler::stop_running_at_exit() noexcept {
  exit_watch& w = exit_state();
  try {
    std::lock_guard<std::mutex> lock(w.mutex);
    metric_sampler* const running = w.running.load(std::memory_order_acquire);
    if (running != nullptr && w.pid.load(std::memory_order_relaxed) == static_cast<long>(::getpid())) running->stop();
  } catch (...) {
  }
}

KSCOPE_DECL metric_sampler::~metric_sampler() {
  std::unique_lock<std::mutex> lock(exit_state().mutex, std::defer_lock);
  try {
    lock.lock();
  } catch (...) {  // a system error: stopped anyway
  }
  stop();
  forget_at_exit();
}

KSCOPE_DECL std::int64_t metric_sampler::now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

KSCOPE_DECL bool metric_sampler::wait_or_stop(std::chrono::nanoseconds d) {
  std::unique_lock<std::mutex> lock(mutex_);
  return wake_.wait_for(lock, d, [this] { return stop_requested_; });
}

KSCOPE_DECL std::int64_t metric_sampler::end_window() {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::int64_t end = now_ns();
  if (!window_sampling_) return end;
  window_sampling_ = false;
  ++status_.windows;
  status_.sampled_ns += static_cast<std::uint64_t>(end - window_started_ns_);
  return end;
}

KSCOPE_DECL void metric_sampler::decode_loop() noexcept {
  try {
    if (window_.count() == 0) {  // continuous: decode every period while sampling runs
      std::int64_t last_hook = now_ns();
      while (!wait_or_stop(decode_period_)) {
        decode_now();
        {
          std::lock_guard<std::mutex> lock(mutex_);
          status_.decoded_until_ns = std::max(status_.decoded_until_ns, last_sample_end_ns_);
        }
        if (after_decode_ && now_ns() - last_hook >= 250'000'000) {
          last_hook = now_ns();
          after_decode_();
        }
      }
      return;
    }
    std::uint64_t jitter = static_cast<std::uint64_t>(now_ns()) | 1u;  // xorshift state
    for (;;) {
      if (wait_or_stop(window_)) return;  // stop() ends the window and decodes it
#if KSCOPE_HAS_PM_SAMPLING
      run_->stop_sampling();
#endif
      const std::int64_t window_end = end_window();
      const std::int64_t t0 = now_ns();
      decode_now();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        status_.decoded_until_ns = std::max(status_.decoded_until_ns, window_end);
      }
      if (after_decode_) after_decode_();
      const std::int64_t busy = now_ns() - t0;
      // Pause so that busy / (window + busy + pause) <= max_decoder_share, ±20 %.
      jitter ^= jitter << 13;
      jitter ^= jitter >> 7;
      jitter ^= jitter << 17;
      const double spread = 0.8 + 0.4 * static_cast<double>(jitter % 1000) / 999.0;
      const double cycle = static_cast<double>(busy) / max_decoder_share_;
      const double window_ns = static_cast<double>(std::chrono::nanoseconds(window_).count());
      const double pause = std::max(0.0, cycle - window_ns - static_cast<double>(busy)) * spread;
      if (wait_or_stop(std::chrono::nanoseconds(static_cast<std::int64_t>(pause)))) return;
#if KSCOPE_HAS_PM_SAMPLING
      if (!run_->start_sampling()) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (std::find(notes_.begin(), notes_.end(), run_->message) == notes_.end()) notes_.push_back(run_->message);
        return;  // no more windows; what was sampled stays
      }
#endif
      std::lock_guard<std::mutex> lock(mutex_);
      window_started_ns_ = now_ns();
      window_sampling_ = true;
    }
  } catch (...) {
  }
}

KSCOPE_DECL void metric_sampler::decode_now() noexcept {
#if KSCOPE_HAS_PM_SAMPLING
  try {
    metric_sampler_status counts;
    std::vector<std::string> new_notes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      counts = status_;
      new_notes = notes_;
    }
    std::uint64_t pushed = 0, dropped = 0;
    run_->decode(counts, new_notes, [&](std::int64_t start, std::int64_t end, const double* values) {
      std::lock_guard<std::mutex> lock(mutex_);
      last_sample_end_ns_ = std::max(last_sample_end_ns_, end);
      if (buffer_.push(start, end, values))
        ++pushed;
      else
        ++dropped;
    });
    std::lock_guard<std::mutex> lock(mutex_);
    // Only the decoder changes these counts, so the copy taken above is current.
    status_.samples += pushed;
    status_.samples_dropped += dropped;
    status_.samples_unusable = counts.samples_unusable;
    status_.samples_lost_at_reset = counts.samples_lost_at_reset;
    status_.samples_irregular = counts.samples_irregular;
    status_.sample_time_ns = counts.sample_time_ns;
    status_.samples_missing = counts.samples_missing;
    status_.hardware_overflows = counts.hardware_overflows;
    status_.decodes = counts.decodes;
    status_.decode_errors = counts.decode_errors;
    status_.decode_ns = counts.decode_ns;
    status_.evaluate_ns = counts.evaluate_ns;
    status_.reset_ns = counts.reset_ns;
    status_.mean_interval_ns = counts.mean_interval_ns;
    status_.timeline = counts.timeline;
    notes_ = std::move(new_notes);
  } catch (...) {
  }
#endif
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
