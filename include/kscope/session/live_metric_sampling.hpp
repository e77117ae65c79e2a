// kscope/session/live_metric_sampling.hpp — PM samples (pm_sampling/sampler.hpp) shared among
// the program's scopes while it runs: the sampler's windows, the activity collector's kernel
// intervals and evidence/pm_samples.hpp's attribution, held together with a fixed memory
// footprint however long the program runs. It joins two features, so it is the session's.
//
//   auto live = std::make_shared<kscope::live_metric_sampling>();
//   if (!live->start())                                    // sampler + interval sink
//     std::fprintf(stderr, "%s\n", live->status().message.c_str());
//   ... scopes and kernels run; the sampler's decoder thread folds after each window ...
//   live->stop();                                          // the rest decoded and folded
//   kscope::live_metrics_snapshot s = live->snapshot();    // per scope, per step, device
//
// The session (session.hpp: enable_metric_sampling, KSCOPE_METRIC_SAMPLING=1) owns one and
// puts its snapshot into the report. How the pieces meet:
// - Kernel intervals: the collector's attribution hands every kernel, copy and memset to
//   add_interval() as it attributes it (kernel_interval_sink), so the intervals arrive
//   with the scope that launched them. They wait in the aggregator's bounded buffer.
// - Samples: after each window the sampler's decoder thread calls back; the callback
//   flushes the collector (so every kernel that ended before the flush is delivered), then
//   folds: drains the decoded samples into the aggregator and attributes every sample that
//   ended more than fold_lag before the flush and before the last decoded window's end.
//   The lag is for kernels still running at the flush: their records come later, and a
//   sample they overlapped must wait for them. A kernel running longer than fold_lag
//   leaves the samples of its first part counted as idle (kernels_late says so).
// - Folding is the only place samples and kernels are dropped from memory; everything
//   folded is in the aggregates (per node means, per step distributions, device-wide).
//   Memory: the aggregator's limits (sampled_metrics_limits), the sampler's buffers and
//   the recent-sample ring for the trace; all fixed at start.
#pragma once

#include "../core/config.hpp"
#include "../core/detail/clock.hpp"
#include "../evidence/pm_samples.hpp"
#include "../core/detail/fork_guard.hpp"
#include "../activity/attribution.hpp"
#include "../activity/collector.hpp"
#include "../pm_sampling/sampler.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

class live_metric_sampling;

struct metric_sampling_options {
  metric_sampler_options sampler;             // its after_decode is replaced by the fold
  sampled_metrics_limits limits;              // `device` is set to the sampled device
  std::chrono::milliseconds fold_lag{1000};   // samples wait this long for late kernel records
  std::size_t trace_samples = 65536;          // most recent samples kept for the trace
  bool flush_collector = true;                // flush the activity collector before each fold
  // Called before each fold with no lock held (the decoder thread, report(), stop()):
  // where the session adds the calls of step scopes (add_step_call).
  std::function<void(live_metric_sampling&)> before_fold;
};

// What the report and the trace read.
struct live_metrics_snapshot {
  metric_sampler_status status;   // state, message, coverage, losses
  bool attributed = false;        // kernel intervals arrived (the collector ran)
  sampled_metrics_report report;  // per node, per step, device-wide (folded samples only)
  std::vector<metric_sample> recent;  // the most recent samples, oldest first (trace)
  std::int64_t folded_until_ns = 0;   // samples that ended before this are in `report`
};

class live_metric_sampling final : public kernel_interval_sink {
 public:
  live_metric_sampling();
  live_metric_sampling(const live_metric_sampling&) = delete;
  live_metric_sampling& operator=(const live_metric_sampling&) = delete;
  ~live_metric_sampling() override { sampler_.stop(); }

  // Starts the sampler; false with status().message saying why (one line). Calls of step
  // scopes (whose metrics get distributions over calls) come through add_step_call().
  bool start(const metric_sampling_options& options = {});

  // Stops sampling, decodes and folds everything. The aggregates stay for snapshot().
  void stop();

  [[nodiscard]] bool running() const;
  [[nodiscard]] metric_sampler_status status() const { return sampler_.status(); }

  // kernel_interval_sink: from the collector's attribution (its lock held).
  KSCOPE_DECL void add_interval(const kernel_interval& interval) noexcept override;

  // One call of a step scope (node), kscope's clock: its metrics' distribution over calls.
  void add_step_call(sampled_node node, std::int64_t start_ns, std::int64_t end_ns);

  // Drains the decoded samples into the aggregator and attributes every sample that ended
  // before min(watermark_ns, the sampler's last decoded window end).
  void fold(std::int64_t watermark_ns);

  // The report's view. Folds first up to `watermark_ns` (the caller flushed the collector
  // just before taking it, so kernels that ended before then are in).
  [[nodiscard]] live_metrics_snapshot snapshot(std::int64_t watermark_ns = std::numeric_limits<std::int64_t>::min(),
                                               bool with_recent = false);

 private:
  static void flush_collector();

  void background_fold() noexcept;

  // Keeps the most recent samples for the trace: a ring over the buffer's storage.
  void remember(const metric_sample_view& s);

  std::mutex control_mutex_;  // start / stop
  mutable std::mutex mutex_;  // everything below
  metric_sampling_options options_;
  metric_sampler sampler_;
  std::unique_ptr<sampled_metrics> aggregator_;
  std::size_t metric_count_ = 0;
  metric_sample_buffer recent_;
  std::size_t recent_next_ = 0;
  std::uint64_t recent_overwritten_ = 0;
  std::int64_t folded_until_ns_ = 0;
  bool attributed_ = false;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL live_metric_sampling::live_metric_sampling() { detail::guard_across_fork(mutex_, detail::lock_rank::sampled_metrics); }

KSCOPE_DECL bool live_metric_sampling::running() const { return sampler_.status().state == metric_sampler_state::running; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool live_metric_sampling::start(const metric_sampling_options& options) {
  std::lock_guard<std::mutex> control(control_mutex_);
  if (sampler_.status().state == metric_sampler_state::running) return true;
  metric_sampler_options so = options.sampler;
  // The decoder thread folds after each window; the destructor stops the sampler (and
  // joins that thread) first, so `this` outlives every call.
  so.after_decode = [this] { background_fold(); };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    options_ = options;
  }
  if (!sampler_.start(so)) return false;
  const metric_sampler_status s = sampler_.status();
  std::lock_guard<std::mutex> lock(mutex_);
  sampled_metrics_limits limits = options.limits;
  limits.device = static_cast<std::uint32_t>(s.device);
  aggregator_ = std::make_unique<sampled_metrics>(s.metrics, limits);
  metric_count_ = s.metrics.size();
  recent_ = metric_sample_buffer(metric_count_, options.trace_samples);
  recent_next_ = 0;
  recent_overwritten_ = 0;
  folded_until_ns_ = 0;
  attributed_ = false;
  return true;
}

KSCOPE_DECL void live_metric_sampling::stop() {
  std::lock_guard<std::mutex> control(control_mutex_);
  sampler_.stop();
  if (options_.flush_collector) flush_collector();
  if (options_.before_fold) options_.before_fold(*this);
  fold(std::numeric_limits<std::int64_t>::max());
}

KSCOPE_DECL void live_metric_sampling::add_interval(const kernel_interval& interval) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aggregator_ == nullptr) return;
  attributed_ = true;
  aggregator_->add_kernel(interval);
}

KSCOPE_DECL void live_metric_sampling::add_step_call(sampled_node node, std::int64_t start_ns, std::int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aggregator_ != nullptr) aggregator_->add_step_call(node, start_ns, end_ns);
}

KSCOPE_DECL void live_metric_sampling::fold(std::int64_t watermark_ns) {
  const std::int64_t decoded_until = sampler_.status().decoded_until_ns;
  // Tracing in windows: kernels are known inside the collector's windows only. Read before
  // this object's lock: the collector's control lock comes first (a flush delivers kernel
  // intervals into add_interval under it).
  const trace_window_summary windows = cupti_collector::global().trace_windows();
  std::lock_guard<std::mutex> lock(mutex_);
  if (aggregator_ == nullptr) return;
  sampler_.drain([this](const metric_sample_view& s) {
    aggregator_->add_sample(s);
    remember(s);
  });
  const std::int64_t until = std::min(watermark_ns, decoded_until);
  if (until > folded_until_ns_) {
    aggregator_->set_traced(windows.windowed ? std::optional<std::vector<traced_interval>>(windows.recent) : std::nullopt);
    aggregator_->attribute_until(until);
    folded_until_ns_ = until;
  }
}

KSCOPE_DECL live_metrics_snapshot live_metric_sampling::snapshot(std::int64_t watermark_ns,
                             bool with_recent) {
  if (watermark_ns != std::numeric_limits<std::int64_t>::min()) {
    if (options_.before_fold) options_.before_fold(*this);
    fold(watermark_ns);
  }
  live_metrics_snapshot out;
  out.status = sampler_.status();
  std::lock_guard<std::mutex> lock(mutex_);
  out.folded_until_ns = folded_until_ns_;
  out.attributed = attributed_;
  if (aggregator_ != nullptr) out.report = aggregator_->report();
  if (with_recent) {
    const std::size_t n = recent_.size();
    out.recent.reserve(n);
    // recent_ is a ring once full: oldest at recent_next_.
    for (std::size_t i = 0; i < n; ++i) {
      const metric_sample_view v = recent_[(recent_next_ + i) % n];
      out.recent.push_back({v.start_ns, v.end_ns, std::vector<double>(v.values, v.values + metric_count_)});
    }
  }
  return out;
}

KSCOPE_DECL void live_metric_sampling::flush_collector() {
  cupti_collector& c = cupti_collector::global();
  if (c.running()) c.flush();
}

KSCOPE_DECL void live_metric_sampling::background_fold() noexcept {
  try {
    const std::int64_t flushed_at = detail::now_ns();
    if (options_.flush_collector) flush_collector();
    if (options_.before_fold) options_.before_fold(*this);
    fold(flushed_at - std::chrono::duration_cast<std::chrono::nanoseconds>(options_.fold_lag).count());
  } catch (...) {
  }
}

KSCOPE_DECL void live_metric_sampling::remember(const metric_sample_view& s) {
  if (recent_.capacity() == 0) return;
  if (recent_.size() < recent_.capacity()) {
    (void)recent_.push(s.start_ns, s.end_ns, s.values);
    return;
  }
  recent_.overwrite(recent_next_, s.start_ns, s.end_ns, s.values);
  recent_next_ = (recent_next_ + 1) % recent_.size();
  ++recent_overwritten_;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
