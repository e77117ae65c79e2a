// kscope/evidence/pm_samples.hpp — GPU-wide metric samples (CUPTI PM sampling) shared out
// among the scopes whose kernels ran while each sample was taken.
//
// Pure arithmetic, no CUDA: the samples come from pm_sampling/sampler.hpp (or, in the
// tests, from synthetic numbers), the kernel intervals from the activity records.
//
//   kscope::sampled_metrics agg({"dram__throughput.avg.pct_of_peak_sustained_elapsed",
//                                "dram__bytes_read.sum"});
//   agg.add_kernel({t0, t0 + 5000, /*node*/ 3});            // one kernel of scope 3
//   agg.add_step_call(/*node*/ 1, t0 - 100, t0 + 9000);     // one call of the step scope 1
//   const double v[] = {81.6, 2.9e6};
//   agg.add_sample(t0, t0 + 20000, v);                      // one sample, kscope's clock
//   agg.attribute_all();                                    // or attribute_until(watermark)
//   kscope::sampled_metrics_report r = agg.report();
//   const kscope::node_sampled_metrics* n = r.find(3);      // n->values[0].mean: 81.6 %
//
// Rules, each tested in tests/metric_samples_test.cpp:
// - A sample covers [start_ns, end_ns) of the whole device. The part of it during which
//   some kernel ran (the union of all kernel intervals) is "busy", the rest "idle". The
//   busy part is shared among the nodes whose kernels overlapped the sample, in proportion
//   to each node's own overlap (the union of that node's kernels inside the sample): two
//   nodes running side by side for the whole busy time get half each. A node's slice of a
//   sample is its weight (ns); slices and idle add up to the sample's length.
// - Per node and metric: the mean over its slices weighted by their length (a time-
//   weighted mean). A sample's value is GPU-wide: a node whose kernels filled a tenth of a
//   sample still gets the whole sample's value for that tenth, so its idle share (the idle
//   part of the samples it touched) says how diluted its means are.
// - Counts (metrics whose catalog rule is a sum: bytes, cycles, "*.sum", "*.avg") are
//   per-sample totals. Their mean is a rate, value / sample length, per second; their
//   total is the sum of each sample's value times the node's slice / sample length.
//   Percentages, ratios and rates (everything else) have a mean and no total.
// - A NaN value is left out of that metric only (its weight too) and counted.
// - Per step scope (a node given calls through add_step_call): the time-weighted mean of
//   each metric over the samples overlapping each call, weighted by the overlap with the
//   call, and the p50 / p90 of those per-call means over the calls (type 7 quantile, as
//   everywhere in kscope). A call no sample overlapped is counted, not used.
// - Device-wide: every sample counts, weighted by its length; the busy share is the
//   utilisation (time some kernel ran / time sampled).
// - Tracing in windows (set_traced): kernels are known inside the traced windows only, so
//   a sample's busy and idle parts are taken within its traced part: the device's busy
//   share is busy / traced sample time, a node's idle share likewise; the untraced time of
//   samples is neither (never idle). Metric values are GPU-wide and count whole.
// - Input in any order. Samples and kernels wait in bounded pending buffers until
//   attribute_until(watermark) or attribute_all() folds them into the aggregates, so the
//   memory is fixed (memory_bound_bytes()) however long the program runs. Whatever a full
//   buffer or a cap turns away is counted in sampled_metrics_counters, never silently.
//
// Sample timestamps must be on kscope's clock (steady_clock ns, the activity records'
// clock) before they get here: sample_clock_map maps the CUPTI / GPU timeline onto it.
#pragma once

#include "activity_records.hpp"  // kernel_interval
#include "trace_windows.hpp"
#include "metrics.hpp"
#include "../core/detail/reservoir.hpp"
#include "../core/detail/stats_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {

// ---------------------------------------------------------------------------------------
// Inputs

// A node of the call-path tree, as scope/node_id.hpp's kscope::node_id (the same
// integer; the core layer cannot include the scope layer).
using sampled_node = std::uint32_t;

// kernel_interval (GPU work of one node on one device) is the activity feature's
// (evidence/activity_records.hpp): the collector hands each one over as it attributes it.

// One sample as stored: its interval and a pointer to its values (metric order).
struct metric_sample_view {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  const double* values = nullptr;

  [[nodiscard]] std::int64_t length_ns() const noexcept { return end_ns - start_ns; }
};

// Samples stored flat (one allocation, no per-sample vector), at most `capacity` of them:
// a push into a full buffer is refused and counted, so a consumer that falls behind costs
// samples, never memory. Storage grows geometrically up to the capacity.
//
//   kscope::metric_sample_buffer b(/*metrics*/ 2, /*capacity*/ 4096);
//   const double v[] = {81.6, 2.9e6};
//   b.push(t0, t0 + 20000, v);
//   for (std::size_t i = 0; i < b.size(); ++i) use(b[i].start_ns, b[i].values[0]);
class metric_sample_buffer {
 public:
  explicit metric_sample_buffer(std::size_t metric_count = 0, std::size_t capacity = 0) noexcept;

  // False (and counted in dropped()) when the buffer is full or out of memory.
  bool push(std::int64_t start_ns, std::int64_t end_ns, const double* values) noexcept;

  [[nodiscard]] metric_sample_view operator[](std::size_t i) const noexcept;
  // Replaces sample i (< size()): a ring of the most recent samples over full storage.
  void overwrite(std::size_t i, std::int64_t start_ns, std::int64_t end_ns, const double* values) noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return times_.size(); }
  [[nodiscard]] bool empty() const noexcept { return times_.empty(); }
  [[nodiscard]] std::size_t metric_count() const noexcept { return metric_count_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_; }
  // Bytes the buffer can reach at its capacity.
  [[nodiscard]] std::size_t memory_bound_bytes() const noexcept;

  // Keeps the samples for which keep(view) is true, in their order.
  template <class Keep>
  void keep_if(Keep&& keep) {
    std::size_t out = 0;
    for (std::size_t i = 0; i < times_.size(); ++i) {
      if (!keep((*this)[i])) continue;
      if (out != i) {
        times_[out] = times_[i];
        std::copy_n(values_.begin() + static_cast<std::ptrdiff_t>(i * metric_count_), metric_count_,
                    values_.begin() + static_cast<std::ptrdiff_t>(out * metric_count_));
      }
      ++out;
    }
    times_.resize(out);
    values_.resize(out * metric_count_);
  }

  // Forgets the samples (not the dropped count), keeping the storage for reuse.
  void clear() noexcept;

 private:
  std::size_t metric_count_;
  std::size_t capacity_;
  std::uint64_t dropped_ = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> times_;
  std::vector<double> values_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL metric_sample_buffer::metric_sample_buffer(std::size_t metric_count, std::size_t capacity) noexcept : metric_count_(metric_count), capacity_(capacity) {}

KSCOPE_DECL bool metric_sample_buffer::push(std::int64_t start_ns, std::int64_t end_ns, const double* values) noexcept {
  if (times_.size() >= capacity_) {
    ++dropped_;
    return false;
  }
  try {
    if (times_.size() == times_.capacity() || values_.capacity() - values_.size() < metric_count_) {
      const std::size_t grown = std::min(capacity_, std::max<std::size_t>(64, 2 * times_.size()));
      times_.reserve(grown);
      values_.reserve(grown * metric_count_);
    }
  } catch (...) {
    capacity_ = times_.size();  // out of memory: hold what we have
    ++dropped_;
    return false;
  }
  // Both vectors have room now: neither append allocates.
  times_.emplace_back(start_ns, end_ns);
  values_.insert(values_.end(), values, values + metric_count_);
  return true;
}

KSCOPE_DECL metric_sample_view metric_sample_buffer::operator[](std::size_t i) const noexcept {
  return {times_[i].first, times_[i].second, values_.data() + i * metric_count_};
}

KSCOPE_DECL void metric_sample_buffer::overwrite(std::size_t i, std::int64_t start_ns, std::int64_t end_ns, const double* values) noexcept {
  if (i >= times_.size()) return;
  times_[i] = {start_ns, end_ns};
  std::copy_n(values, metric_count_, values_.begin() + static_cast<std::ptrdiff_t>(i * metric_count_));
}

KSCOPE_DECL std::size_t metric_sample_buffer::memory_bound_bytes() const noexcept {
  return capacity_ * (sizeof(std::pair<std::int64_t, std::int64_t>) + metric_count_ * sizeof(double));
}

KSCOPE_DECL void metric_sample_buffer::clear() noexcept {
  times_.clear();
  values_.clear();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// Clock mapping

// One paired reading of two clocks, taken as close together as the reader could: the
// sample timeline (cuptiGetTimestamp, which PM sample timestamps share) and kscope's.
struct clock_reading {
  std::int64_t source_ns = 0;  // the sample timeline
  std::int64_t kscope_ns = 0;  // steady_clock ns (core/detail/clock.hpp)
};

// Maps a timestamp of the sample timeline to kscope's clock:
//   kscope = origin.kscope_ns + (source - origin.source_ns) * scale
// Identity (the sampler found the samples already on kscope's clock) is origin {0, 0},
// scale 1. With one reading, scale 1 (an offset); with a second reading at least
// min_fit_span_ns later, the scale is fitted between them, so a rate difference of the
// two clocks (a few ppm, a few µs per second) does not grow into a misplacement of many
// samples over an hours-long run.
//
//   auto map = kscope::sample_clock_map::from_readings(first, latest);
//   std::int64_t t = map.to_kscope(sample_start);
struct sample_clock_map {
  clock_reading origin{};
  double scale = 1.0;

  // Below this span, two readings' jitter (~1 µs) would make the fitted scale worse than
  // assuming equal rates: 1e-6 / 0.1 s = 1e-5, the size of the drift it would correct.
  static constexpr std::int64_t min_fit_span_ns = 100'000'000;

  [[nodiscard]] static sample_clock_map identity() noexcept { return {}; }
  [[nodiscard]] static sample_clock_map from_reading(const clock_reading& r) noexcept { return {r, 1.0}; }
  // The scale between two readings when they are far enough apart and the fit is sane
  // (within 0.1 % of 1: two clocks counting nanoseconds), else the offset of `first`.
  [[nodiscard]] static sample_clock_map from_readings(const clock_reading& first, const clock_reading& last) noexcept;

  [[nodiscard]] std::int64_t to_kscope(std::int64_t source_ns) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sample_clock_map sample_clock_map::from_readings(const clock_reading& first, const clock_reading& last) noexcept {
  const std::int64_t source_span = last.source_ns - first.source_ns;
  const std::int64_t kscope_span = last.kscope_ns - first.kscope_ns;
  if (source_span < min_fit_span_ns || kscope_span <= 0) return from_reading(first);
  const double s = static_cast<double>(kscope_span) / static_cast<double>(source_span);
  if (!(s > 0.999 && s < 1.001)) return from_reading(first);
  return {first, s};
}

KSCOPE_DECL std::int64_t sample_clock_map::to_kscope(std::int64_t source_ns) const noexcept {
  const std::int64_t delta = source_ns - origin.source_ns;
  if (scale == 1.0) return origin.kscope_ns + delta;
  return origin.kscope_ns + static_cast<std::int64_t>(std::llround(static_cast<double>(delta) * scale));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Which clock a batch of sample timestamps is on, judged from the end of the newest
// sample and both clocks read just after it was decoded: a timestamp is on a clock when it
// is not in that clock's future and at most `max_age_ns` in its past. Steady-clock ns
// (time since boot) and the CUPTI/GPU timeline (ns since 1970 on current drivers) are
// decades apart, so at most one fits.
enum class sample_timeline : std::uint8_t { cupti, kscope, unknown };

[[nodiscard]] KSCOPE_DECL sample_timeline detect_sample_timeline(std::int64_t newest_end_ns, const clock_reading& now,
                                                            std::int64_t max_age_ns) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sample_timeline detect_sample_timeline(std::int64_t newest_end_ns, const clock_reading& now,
                                                            std::int64_t max_age_ns) noexcept {
  const auto fits = [&](std::int64_t clock_now) {
    return newest_end_ns <= clock_now && clock_now - newest_end_ns <= max_age_ns;
  };
  const bool cupti = fits(now.source_ns), steady = fits(now.kscope_ns);
  // Both fit when the two clocks read the same: CUPTI's timestamps come from kscope's
  // clock (the activity collector registers a timestamp callback), so no mapping is needed.
  if (cupti && steady) return sample_timeline::kscope;
  if (cupti == steady) return sample_timeline::unknown;
  return cupti ? sample_timeline::cupti : sample_timeline::kscope;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

[[nodiscard]] constexpr const char* to_string(sample_timeline t) noexcept {
  switch (t) {
    case sample_timeline::cupti: return "CUPTI timestamp timeline";
    case sample_timeline::kscope: return "kscope's clock (steady_clock ns)";
    case sample_timeline::unknown: return "unknown";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------
// Results

// One metric over a node's (or the device's, or one call's) share of the samples.
struct sampled_value {
  // Time-weighted mean; for a count, the rate per second. NaN when no finite value.
  double mean = std::numeric_limits<double>::quiet_NaN();
  // Counts only: the node's share of the counted quantity (bytes, cycles). NaN otherwise.
  double total = std::numeric_limits<double>::quiet_NaN();
  double weight_ns = 0;  // the time behind the mean (NaN values' slices left out)
};

// The samples' share of one node.
struct node_sampled_metrics {
  sampled_node node = 0;
  std::uint64_t samples = 0;       // samples this node's kernels overlapped
  double attributed_ns = 0;        // the node's slices, summed
  double kernel_ns = 0;            // its kernels' time inside samples (union per sample)
  double touched_sample_ns = 0;    // length of the samples it touched
  double touched_idle_ns = 0;      // the idle part of those samples
  std::vector<sampled_value> values;  // metric order

  // Share of the time of the samples this node touched with no kernel running: high for
  // a launch-bound loop of tiny kernels, whose means are then mostly idle hardware.
  [[nodiscard]] double idle_share() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double node_sampled_metrics::idle_share() const noexcept {
  return touched_sample_ns > 0 ? touched_idle_ns / touched_sample_ns : std::numeric_limits<double>::quiet_NaN();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The distribution of the per-call means of one step scope.
struct step_metric_distribution {
  double p50 = std::numeric_limits<double>::quiet_NaN();
  double p90 = std::numeric_limits<double>::quiet_NaN();
  std::size_t calls = 0;  // calls with a finite per-call mean behind p50 / p90
};

struct step_sampled_metrics {
  sampled_node node = 0;
  std::uint64_t calls = 0;                 // calls with at least one sample
  std::uint64_t calls_without_samples = 0; // calls no sample overlapped
  bool calls_subsampled = false;           // more calls than step_call_cap: a uniform subset
  std::vector<step_metric_distribution> values;  // metric order
};

// The whole sampled device.
struct device_sampled_metrics {
  std::uint64_t samples = 0;
  double sampled_ns = 0;
  double busy_ns = 0;  // some kernel running
  // The sampled time whose kernels were known: sampled_ns, or with tracing in windows
  // (sampled_metrics::set_traced) its part inside the traced windows. NaN: all of sampled_ns.
  double known_ns = std::numeric_limits<double>::quiet_NaN();
  std::vector<sampled_value> values;  // every sample, weighted by its length

  // Utilisation: the share of the sampled time with a kernel running.
  [[nodiscard]] double busy_share() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double device_sampled_metrics::busy_share() const noexcept {
  const double basis = std::isnan(known_ns) ? sampled_ns : known_ns;
  return basis > 0 ? busy_ns / basis : std::numeric_limits<double>::quiet_NaN();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Everything turned away or left out, counted.
struct sampled_metrics_counters {
  std::uint64_t samples_attributed = 0;
  std::uint64_t samples_dropped = 0;          // pending sample buffer full
  std::uint64_t samples_invalid = 0;          // end <= start
  std::uint64_t samples_late = 0;             // arrived after their time was folded
  std::uint64_t nan_values = 0;               // (sample, metric) values that were NaN
  std::uint64_t kernels_seen = 0;
  std::uint64_t kernels_dropped = 0;          // pending kernel buffer full
  std::uint64_t kernels_invalid = 0;          // end <= start
  std::uint64_t kernels_late = 0;             // started before the time already folded
  std::uint64_t kernels_other_device = 0;     // not the sampled device: ignored
  std::uint64_t node_slices_over_cap = 0;     // (sample, node) slices of nodes past max_nodes
  std::uint64_t step_calls_dropped = 0;       // pending call buffer full, or steps past max_steps
  std::uint64_t step_calls_invalid = 0;       // end <= start
  std::uint64_t step_calls_late = 0;          // ended before the time already folded
};

// The limits that fix the memory (sampled_metrics::memory_bound_bytes()).
struct sampled_metrics_limits {
  std::uint32_t device = 0;                  // the sampled device
  std::size_t max_pending_samples = 65536;   // ~1.3 s at 20 µs between two folds
  std::size_t max_pending_kernels = 262144;  // kernels waiting for their samples
  std::size_t max_nodes = 4096;              // nodes with aggregates; more: slices counted, not kept
  std::size_t max_steps = 64;                // step scopes with distributions
  std::size_t step_call_cap = 1024;          // per-call means kept per step (uniform reservoir)
  std::size_t max_pending_calls = 4096;      // step calls waiting for their samples
};

struct sampled_metrics_report {
  std::vector<std::string> metrics;
  std::vector<bool> is_count;  // per metric: a count (total + rate) rather than a mean
  std::uint32_t device = 0;
  device_sampled_metrics device_wide;
  std::vector<node_sampled_metrics> nodes;  // by node id
  std::vector<step_sampled_metrics> steps;  // by node id
  sampled_metrics_counters counters;

  [[nodiscard]] const node_sampled_metrics* find(sampled_node n) const noexcept;
  [[nodiscard]] const step_sampled_metrics* find_step(sampled_node n) const noexcept;
  // The position of a metric in `metrics`, or metrics.size().
  [[nodiscard]] std::size_t index_of(std::string_view metric) const noexcept;
  // One line per kind of loss, for the report's warnings; empty when nothing was lost.
  [[nodiscard]] std::vector<std::string> warnings() const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const node_sampled_metrics* sampled_metrics_report::find(sampled_node n) const noexcept {
  const auto it = std::lower_bound(nodes.begin(), nodes.end(), n,
                   [](const node_sampled_metrics& a, sampled_node b) { return a.node < b; });
  return it != nodes.end() && it->node == n ? &*it : nullptr;
}

KSCOPE_DECL const step_sampled_metrics* sampled_metrics_report::find_step(sampled_node n) const noexcept {
  for (const step_sampled_metrics& s : steps)
    if (s.node == n) return &s;
  return nullptr;
}

KSCOPE_DECL std::size_t sampled_metrics_report::index_of(std::string_view metric) const noexcept {
  for (std::size_t i = 0; i < metrics.size(); ++i)
    if (metrics[i] == metric) return i;
  return metrics.size();
}

KSCOPE_DECL std::vector<std::string> sampled_metrics_report::warnings() const {
  std::vector<std::string> out;
  const auto say = [&out](std::uint64_t n, const char* what) {
    if (n > 0) out.push_back(std::to_string(n) + what);
  };
  const sampled_metrics_counters& c = counters;
  say(c.samples_dropped, " metric samples dropped: the pending buffer was full (fold more often)");
  say(c.samples_invalid, " metric samples had no length and were ignored");
  say(c.samples_late, " metric samples arrived after their time was attributed and were ignored");
  say(c.kernels_dropped, " kernel intervals dropped: the pending buffer was full");
  say(c.kernels_late, " kernel intervals arrived after their time was attributed: their samples went to others");
  say(c.node_slices_over_cap, " sample slices of scopes past the node cap were not kept");
  say(c.step_calls_dropped, " step calls dropped (pending buffer full, or too many step scopes)");
  say(c.step_calls_late, " step calls arrived after their time was attributed");
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// The aggregation

namespace detail {

// Length of the union of intervals (sorted by start here).
KSCOPE_DECL std::int64_t union_length(std::vector<std::pair<std::int64_t, std::int64_t>>& iv);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::int64_t union_length(std::vector<std::pair<std::int64_t, std::int64_t>>& iv) {
  std::sort(iv.begin(), iv.end());
  std::int64_t total = 0, open_start = 0, open_end = 0;
  bool open = false;
  for (const auto& [s, e] : iv) {
    if (open && s <= open_end) {
      open_end = std::max(open_end, e);
      continue;
    }
    if (open) total += open_end - open_start;
    open = true;
    open_start = s;
    open_end = e;
  }
  if (open) total += open_end - open_start;
  return total;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Sums behind one sampled_value.
struct sampled_accumulator {
  double weighted_sum = 0;  // Σ weight · x   (x: value, or value per second for counts)
  double weight = 0;        // Σ weight over finite values
  double total = 0;         // counts: Σ value · weight / sample length

  void add(double x, double w, double count_share) noexcept;
  [[nodiscard]] sampled_value value(bool is_count) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void sampled_accumulator::add(double x, double w, double count_share) noexcept {
  weighted_sum += w * x;
  weight += w;
  total += count_share;
}

KSCOPE_DECL sampled_value sampled_accumulator::value(bool is_count) const noexcept {
  sampled_value v;
  if (weight > 0) v.mean = weighted_sum / weight;
  if (is_count && weight > 0) v.total = total;
  v.weight_ns = weight;
  return v;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Attributes samples to the nodes whose kernels ran during them (rules at the top). Not
// thread-safe: one owner (the session) feeds it and folds.
class sampled_metrics {
 public:
  explicit sampled_metrics(std::vector<std::string> metrics, sampled_metrics_limits limits = {});

  [[nodiscard]] const std::vector<std::string>& metrics() const noexcept { return metrics_; }
  [[nodiscard]] const sampled_metrics_limits& limits() const noexcept { return limits_; }

  // One sample, its timestamps on kscope's clock, metrics().size() values.
  void add_sample(std::int64_t start_ns, std::int64_t end_ns, const double* values) noexcept;
  void add_sample(const metric_sample_view& s) noexcept;

  void add_kernel(const kernel_interval& k) noexcept;

  // One call of a step scope over [start_ns, end_ns): the node becomes a step scope with a
  // per-call distribution (at most limits().max_steps of them).
  void add_step_call(sampled_node node, std::int64_t start_ns, std::int64_t end_ns) noexcept;

  // Folds every pending sample that ended at or before `watermark_ns`. The caller
  // promises that every kernel interval and step call that STARTED before the watermark
  // has been given: activity records arrive only when a kernel ends, so the session passes
  // the time up to which activity is flushed minus the longest kernel it expects (or the
  // start of the oldest kernel still in flight). A kernel that arrives later than that is
  // counted as late and only its part after the watermark is attributed.
  void attribute_until(std::int64_t watermark_ns) { fold(watermark_ns, false); }

  // Folds everything pending, as if every interval had arrived (the end of a run).
  void attribute_all();

  // Tracing in windows (evidence/trace_windows.hpp): the kernel intervals given are only
  // those of these windows, in time order; samples folded from now on count busy and idle
  // within them (the header's rules). Unset: kernels are known all the time.
  void set_traced(std::optional<std::vector<traced_interval>> windows) { traced_ = std::move(windows); }

  [[nodiscard]] std::size_t pending_samples() const noexcept { return pending_.size(); }
  [[nodiscard]] std::size_t pending_kernels() const noexcept { return kernels_.size(); }

  // The most memory the aggregates and pending buffers can reach (excluding the small
  // per-fold scratch and the report's copy).
  [[nodiscard]] std::size_t memory_bound_bytes() const noexcept;

  [[nodiscard]] sampled_metrics_report report() const;

 private:
  static constexpr std::size_t no_index = static_cast<std::size_t>(-1);

  struct node_accumulator {
    std::uint64_t samples = 0;
    double attributed_ns = 0;
    double kernel_ns = 0;
    double touched_sample_ns = 0;
    double touched_idle_ns = 0;
    std::vector<detail::sampled_accumulator> sums;
  };
  struct pending_call {
    sampled_node node;
    std::int64_t start_ns;
    std::int64_t end_ns;
    std::vector<detail::sampled_accumulator> sums;  // this call's samples, weighted by overlap
  };
  struct step_accumulator {
    sampled_node node = 0;
    std::uint64_t calls_without_samples = 0;
    detail::uniform_reservoir<std::uint64_t> kept;  // call ordinals; slot i's means at values[i * m]
    std::vector<double> values;
  };
  // One node's part of one sample (scratch of a fold).
  struct node_slice {
    sampled_node node;
    std::int64_t start_ns;
    std::int64_t end_ns;
  };

  template <class T>
  static bool try_push(std::vector<T>& v, const T& x) noexcept {
    try {
      v.push_back(x);
      return true;
    } catch (...) {
      return false;
    }
  }

  std::size_t step_index(sampled_node node) noexcept;

  node_accumulator* node_of(sampled_node node);

  // A metric's value as it is averaged: counts become a rate per second.
  double averaged(std::size_t m, double value, std::int64_t length_ns) const noexcept;

  void fold(std::int64_t watermark_ns, bool everything);

  void fold_sample(const metric_sample_view& s);

  void finish_call(const pending_call& c);

  std::vector<std::string> metrics_;
  std::vector<bool> is_count_;
  sampled_metrics_limits limits_;
  sampled_metrics_counters counters_;
  metric_sample_buffer pending_;
  std::vector<kernel_interval> kernels_;
  std::vector<pending_call> calls_;
  std::map<sampled_node, node_accumulator> nodes_;
  std::vector<step_accumulator> steps_;
  std::vector<detail::sampled_accumulator> device_;
  std::uint64_t device_samples_ = 0;
  double device_sampled_ns_ = 0;
  double device_busy_ns_ = 0;
  double device_known_ns_ = 0;
  std::optional<std::vector<traced_interval>> traced_;
  // Samples ending at or before this were folded; a sample or call ending there is late.
  std::int64_t folded_until_ = std::numeric_limits<std::int64_t>::min();
  // Kernels ending at or before this were forgotten; one arriving now is late.
  std::int64_t kernels_folded_until_ = std::numeric_limits<std::int64_t>::min();
  std::int64_t longest_sample_ns_ = 0;
  // Scratch of a fold, kept to reuse its storage.
  std::vector<std::size_t> order_;
  std::vector<kernel_interval> active_;
  std::vector<node_slice> slices_;
  std::vector<std::pair<std::int64_t, std::int64_t>> spans_;
  std::vector<std::pair<sampled_node, std::int64_t>> overlaps_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void sampled_metrics::add_sample(const metric_sample_view& s) noexcept { add_sample(s.start_ns, s.end_ns, s.values); }

KSCOPE_DECL void sampled_metrics::attribute_all() { fold(std::numeric_limits<std::int64_t>::max(), true); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sampled_metrics::sampled_metrics(std::vector<std::string> metrics, sampled_metrics_limits limits) : metrics_(std::move(metrics)),
      limits_(limits),
      pending_(metrics_.size(), limits.max_pending_samples),
      device_(metrics_.size()) {
  for (const std::string& m : metrics_) is_count_.push_back(aggregation_for(m) == metric_aggregation::sum);
}

KSCOPE_DECL void sampled_metrics::add_sample(std::int64_t start_ns, std::int64_t end_ns, const double* values) noexcept {
  if (end_ns <= start_ns) {
    ++counters_.samples_invalid;
    return;
  }
  if (end_ns <= folded_until_) {
    ++counters_.samples_late;
    return;
  }
  longest_sample_ns_ = std::max(longest_sample_ns_, end_ns - start_ns);
  if (!pending_.push(start_ns, end_ns, values)) ++counters_.samples_dropped;
}

KSCOPE_DECL void sampled_metrics::add_kernel(const kernel_interval& k) noexcept {
  ++counters_.kernels_seen;
  if (k.device != limits_.device) {
    ++counters_.kernels_other_device;
    return;
  }
  if (k.end_ns <= k.start_ns) {
    ++counters_.kernels_invalid;
    return;
  }
  // Started before the time already folded: the samples of its earlier part went to
  // others. What is left of it still counts.
  if (k.start_ns < folded_until_) ++counters_.kernels_late;
  if (k.end_ns <= kernels_folded_until_) return;
  if (kernels_.size() >= limits_.max_pending_kernels || !try_push(kernels_, k)) ++counters_.kernels_dropped;
}

KSCOPE_DECL void sampled_metrics::add_step_call(sampled_node node, std::int64_t start_ns, std::int64_t end_ns) noexcept {
  if (end_ns <= start_ns) {
    ++counters_.step_calls_invalid;
    return;
  }
  if (end_ns <= folded_until_) {
    ++counters_.step_calls_late;
    return;
  }
  if (calls_.size() >= limits_.max_pending_calls || step_index(node) == no_index) {
    ++counters_.step_calls_dropped;
    return;
  }
  pending_call c{node, start_ns, end_ns, std::vector<detail::sampled_accumulator>()};
  if (!try_push(calls_, c)) {
    ++counters_.step_calls_dropped;
    return;
  }
  try {
    calls_.back().sums.resize(metrics_.size());
  } catch (...) {
    calls_.pop_back();
    ++counters_.step_calls_dropped;
  }
}

KSCOPE_DECL std::size_t sampled_metrics::memory_bound_bytes() const noexcept {
  const std::size_t m = metrics_.size();
  const std::size_t per_node = sizeof(node_accumulator) + m * sizeof(detail::sampled_accumulator) + 64;
  const std::size_t per_step =
      sizeof(step_accumulator) + limits_.step_call_cap * (sizeof(std::uint64_t) + m * sizeof(double)) + 64;
  const std::size_t per_call = sizeof(pending_call) + m * sizeof(detail::sampled_accumulator);
  return pending_.memory_bound_bytes() + limits_.max_pending_kernels * sizeof(kernel_interval) +
         limits_.max_nodes * per_node + limits_.max_steps * per_step + limits_.max_pending_calls * per_call;
}

KSCOPE_DECL sampled_metrics_report sampled_metrics::report() const {
  sampled_metrics_report r;
  r.metrics = metrics_;
  r.is_count = is_count_;
  r.device = limits_.device;
  r.counters = counters_;
  r.device_wide.samples = device_samples_;
  r.device_wide.sampled_ns = device_sampled_ns_;
  r.device_wide.busy_ns = device_busy_ns_;
  r.device_wide.known_ns = device_known_ns_;
  for (std::size_t m = 0; m < metrics_.size(); ++m) r.device_wide.values.push_back(device_[m].value(is_count_[m]));
  for (const auto& [node, acc] : nodes_) {
    node_sampled_metrics n;
    n.node = node;
    n.samples = acc.samples;
    n.attributed_ns = acc.attributed_ns;
    n.kernel_ns = acc.kernel_ns;
    n.touched_sample_ns = acc.touched_sample_ns;
    n.touched_idle_ns = acc.touched_idle_ns;
    for (std::size_t m = 0; m < metrics_.size(); ++m) n.values.push_back(acc.sums[m].value(is_count_[m]));
    r.nodes.push_back(std::move(n));
  }
  std::vector<double> column;
  for (const step_accumulator& s : steps_) {
    step_sampled_metrics out;
    out.node = s.node;
    out.calls = s.kept.seen();
    out.calls_without_samples = s.calls_without_samples;
    out.calls_subsampled = s.kept.saturated();
    const std::size_t held = s.kept.kept().size();
    for (std::size_t m = 0; m < metrics_.size(); ++m) {
      column.clear();
      for (std::size_t i = 0; i < held; ++i) {
        const double x = s.values[i * metrics_.size() + m];
        if (!std::isnan(x)) column.push_back(x);
      }
      std::sort(column.begin(), column.end());
      step_metric_distribution d;
      d.calls = column.size();
      d.p50 = detail::quantile_sorted(column.data(), column.size(), 0.5);
      d.p90 = detail::quantile_sorted(column.data(), column.size(), 0.9);
      out.values.push_back(d);
    }
    r.steps.push_back(std::move(out));
  }
  std::sort(r.steps.begin(), r.steps.end(),
            [](const step_sampled_metrics& a, const step_sampled_metrics& b) { return a.node < b.node; });
  return r;
}

KSCOPE_DECL std::size_t sampled_metrics::step_index(sampled_node node) noexcept {
  for (std::size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].node == node) return i;
  if (steps_.size() >= limits_.max_steps) return no_index;
  try {
    step_accumulator s;
    s.node = node;
    s.kept = detail::uniform_reservoir<std::uint64_t>(limits_.step_call_cap);
    steps_.push_back(std::move(s));
  } catch (...) {
    return no_index;
  }
  return steps_.size() - 1;
}

KSCOPE_DECL auto sampled_metrics::node_of(sampled_node node) -> node_accumulator* {
  const auto it = nodes_.find(node);
  if (it != nodes_.end()) return &it->second;
  if (nodes_.size() >= limits_.max_nodes) return nullptr;
  node_accumulator acc;
  acc.sums.resize(metrics_.size());
  return &nodes_.emplace(node, std::move(acc)).first->second;
}

KSCOPE_DECL double sampled_metrics::averaged(std::size_t m, double value, std::int64_t length_ns) const noexcept {
  return is_count_[m] ? value * 1e9 / static_cast<double>(length_ns) : value;
}

KSCOPE_DECL void sampled_metrics::fold(std::int64_t watermark_ns, bool everything) {
  // The samples that are complete, by start.
  order_.clear();
  for (std::size_t i = 0; i < pending_.size(); ++i)
    if (everything || pending_[i].end_ns <= watermark_ns) order_.push_back(i);
  std::sort(order_.begin(), order_.end(), [this](std::size_t a, std::size_t b) {
    return pending_[a].start_ns < pending_[b].start_ns ||
           (pending_[a].start_ns == pending_[b].start_ns && pending_[a].end_ns < pending_[b].end_ns);
  });
  std::sort(kernels_.begin(), kernels_.end(),
            [](const kernel_interval& a, const kernel_interval& b) { return a.start_ns < b.start_ns; });

  active_.clear();
  std::size_t next_kernel = 0;
  for (const std::size_t index : order_) {
    const metric_sample_view s = pending_[index];
    while (next_kernel < kernels_.size() && kernels_[next_kernel].start_ns < s.end_ns)
      active_.push_back(kernels_[next_kernel++]);
    // Samples come by start: a kernel ending before this one's start overlaps no later one.
    active_.erase(std::remove_if(active_.begin(), active_.end(),
                                 [&s](const kernel_interval& k) { return k.end_ns <= s.start_ns; }),
                  active_.end());
    fold_sample(s);
  }
  counters_.samples_attributed += order_.size();

  // Forget what is folded. A kernel may still overlap a sample that starts before the
  // watermark but has not arrived: keep those within one sample length of it.
  std::int64_t keep_from = everything ? std::numeric_limits<std::int64_t>::max() : watermark_ns - longest_sample_ns_;
  pending_.keep_if([&](const metric_sample_view& s) { return !(everything || s.end_ns <= watermark_ns); });
  for (std::size_t i = 0; i < pending_.size(); ++i) keep_from = std::min(keep_from, pending_[i].start_ns);
  kernels_.erase(std::remove_if(kernels_.begin(), kernels_.end(),
                                [keep_from](const kernel_interval& k) { return k.end_ns <= keep_from; }),
                 kernels_.end());
  kernels_folded_until_ = std::max(kernels_folded_until_, everything ? std::numeric_limits<std::int64_t>::min() : keep_from);
  if (!everything) folded_until_ = std::max(folded_until_, watermark_ns);

  // Step calls whose samples have all been folded.
  const std::int64_t complete_before = everything ? std::numeric_limits<std::int64_t>::max() : keep_from;
  calls_.erase(std::remove_if(calls_.begin(), calls_.end(),
                              [&](pending_call& c) {
                                if (!everything && c.end_ns > complete_before) return false;
                                finish_call(c);
                                return true;
                              }),
               calls_.end());
}

KSCOPE_DECL void sampled_metrics::fold_sample(const metric_sample_view& s) {
  const std::int64_t length = s.length_ns();
  slices_.clear();
  spans_.clear();
  for (const kernel_interval& k : active_) {
    if (k.start_ns >= s.end_ns || k.end_ns <= s.start_ns) continue;
    const node_slice slice{k.node, std::max(k.start_ns, s.start_ns), std::min(k.end_ns, s.end_ns)};
    slices_.push_back(slice);
    spans_.emplace_back(slice.start_ns, slice.end_ns);
  }
  const std::int64_t busy = detail::union_length(spans_);
  // The part of the sample whose kernels are known (all of it unless traced in windows).
  std::int64_t known = length;
  if (traced_) {
    known = 0;
    for (const traced_interval& w : *traced_) {
      const std::int64_t a = std::max(w.start_ns, s.start_ns), b = std::min(w.end_ns, s.end_ns);
      if (b > a) known += b - a;
    }
  }
  const std::int64_t idle = std::max<std::int64_t>(0, known - busy);

  // Each node's overlap: the union of its own slices.
  std::sort(slices_.begin(), slices_.end(), [](const node_slice& a, const node_slice& b) {
    return a.node < b.node || (a.node == b.node && a.start_ns < b.start_ns);
  });
  overlaps_.clear();
  double overlap_sum = 0;
  for (std::size_t i = 0; i < slices_.size();) {
    std::size_t j = i;
    spans_.clear();
    for (; j < slices_.size() && slices_[j].node == slices_[i].node; ++j)
      spans_.emplace_back(slices_[j].start_ns, slices_[j].end_ns);
    const std::int64_t own = detail::union_length(spans_);
    overlaps_.emplace_back(slices_[i].node, own);
    overlap_sum += static_cast<double>(own);
    i = j;
  }

  // Device-wide.
  ++device_samples_;
  device_sampled_ns_ += static_cast<double>(length);
  device_busy_ns_ += static_cast<double>(busy);
  device_known_ns_ += static_cast<double>(std::max(known, busy));
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    const double v = s.values[m];
    if (std::isnan(v)) {
      ++counters_.nan_values;
      continue;
    }
    device_[m].add(averaged(m, v, length), static_cast<double>(length), v);
  }

  // Per node: its slice of the busy time.
  for (const auto& [node, own] : overlaps_) {
    node_accumulator* acc = node_of(node);
    if (acc == nullptr) {
      ++counters_.node_slices_over_cap;
      continue;
    }
    const double weight = static_cast<double>(own) / overlap_sum * static_cast<double>(busy);
    ++acc->samples;
    acc->attributed_ns += weight;
    acc->kernel_ns += static_cast<double>(own);
    acc->touched_sample_ns += static_cast<double>(std::max(known, busy));
    acc->touched_idle_ns += static_cast<double>(idle);
    for (std::size_t m = 0; m < metrics_.size(); ++m) {
      const double v = s.values[m];
      if (std::isnan(v)) continue;
      acc->sums[m].add(averaged(m, v, length), weight, v * weight / static_cast<double>(length));
    }
  }

  // Step calls: weighted by the overlap of the sample with the call.
  for (pending_call& c : calls_) {
    const std::int64_t overlap = std::min(c.end_ns, s.end_ns) - std::max(c.start_ns, s.start_ns);
    if (overlap <= 0) continue;
    for (std::size_t m = 0; m < metrics_.size(); ++m) {
      const double v = s.values[m];
      if (std::isnan(v)) continue;
      c.sums[m].add(averaged(m, v, length), static_cast<double>(overlap),
                    v * static_cast<double>(overlap) / static_cast<double>(length));
    }
  }
}

KSCOPE_DECL void sampled_metrics::finish_call(const pending_call& c) {
  const std::size_t i = step_index(c.node);
  if (i == no_index) return;  // cannot happen: the call was admitted with its step
  step_accumulator& step = steps_[i];
  bool any = false;
  for (const detail::sampled_accumulator& a : c.sums) any = any || a.weight > 0;
  if (!any) {
    ++step.calls_without_samples;
    return;
  }
  const std::size_t m = metrics_.size();
  const std::size_t slot = step.kept.offer(step.kept.seen());
  if (slot == detail::uniform_reservoir<std::uint64_t>::skipped) return;
  if (step.values.size() < (slot + 1) * m) step.values.resize((slot + 1) * m);
  for (std::size_t k = 0; k < m; ++k) step.values[slot * m + k] = c.sums[k].value(false).mean;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The aggregation in one call, for batches already complete (tests, offline analysis).
//   auto r = kscope::attribute_samples(metrics, samples, kernels);
struct metric_sample {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::vector<double> values;  // metric order
};
struct step_call {
  sampled_node node = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

[[nodiscard]] KSCOPE_DECL sampled_metrics_report attribute_samples(const std::vector<std::string>& metrics,
                                                              const std::vector<metric_sample>& samples,
                                                              const std::vector<kernel_interval>& kernels,
                                                              const std::vector<step_call>& calls = {},
                                                              sampled_metrics_limits limits = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sampled_metrics_report attribute_samples(const std::vector<std::string>& metrics,
                                                              const std::vector<metric_sample>& samples,
                                                              const std::vector<kernel_interval>& kernels,
                                                              const std::vector<step_call>& calls,
                                                              sampled_metrics_limits limits) {
  limits.max_pending_samples = std::max(limits.max_pending_samples, samples.size());
  limits.max_pending_kernels = std::max(limits.max_pending_kernels, kernels.size());
  limits.max_pending_calls = std::max(limits.max_pending_calls, calls.size());
  sampled_metrics agg(metrics, limits);
  std::vector<double> padded;
  for (const metric_sample& s : samples) {
    // A sample with too few values gets NaN for the rest (counted), never a read past the end.
    padded.assign(metrics.size(), std::numeric_limits<double>::quiet_NaN());
    std::copy_n(s.values.begin(), std::min(s.values.size(), metrics.size()), padded.begin());
    agg.add_sample(s.start_ns, s.end_ns, padded.data());
  }
  for (const kernel_interval& k : kernels) agg.add_kernel(k);
  for (const step_call& c : calls) agg.add_step_call(c.node, c.start_ns, c.end_ns);
  agg.attribute_all();
  return agg.report();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// Classification from sampled values

// Where the speed-of-light metrics sit in a sampled metric list (npos when absent):
// found by what they measure, so a user's own list with the same metrics works too.
struct sampled_metric_columns {
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  std::size_t sm_pct = none;      // *sm__throughput*pct* (TriageCompute.sm__throughput... on GH100)
  std::size_t dram_pct = none;    // dram__throughput*pct*
  std::size_t tensor_pct = none;  // *pipe_tensor*pct*
  std::size_t warps_pct = none;   // sm__warps_active*pct*
  std::size_t l2_pct = none;      // *lts__throughput*pct* (LTS.TriageCompute.lts__throughput... on GH100)
  std::size_t l1_pct = none;      // *l1tex__throughput*pct*
  std::size_t clock_hz = none;    // gpc__cycles_elapsed.avg.per_second

  [[nodiscard]] static sampled_metric_columns of(const std::vector<std::string>& metrics);
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sampled_metric_columns sampled_metric_columns::of(const std::vector<std::string>& metrics) {
  sampled_metric_columns c;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    const std::string& m = metrics[i];
    const bool pct = m.find("pct") != std::string::npos;
    const auto has = [&m](const char* part) { return m.find(part) != std::string::npos; };
    if (pct && has("sm__throughput") && c.sm_pct == none) c.sm_pct = i;
    else if (pct && has("dram__throughput") && c.dram_pct == none) c.dram_pct = i;
    else if (pct && has("pipe_tensor") && c.tensor_pct == none) c.tensor_pct = i;
    else if (pct && has("sm__warps_active") && c.warps_pct == none) c.warps_pct = i;
    else if (pct && has("lts__throughput") && c.l2_pct == none) c.l2_pct = i;
    else if (pct && has("l1tex__throughput") && c.l1_pct == none) c.l1_pct = i;
    else if (has("cycles_elapsed.avg.per_second") && c.clock_hz == none) c.clock_hz = i;
  }
  return c;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// What limited a scope, from its sampled means: the classification of evidence/metrics.hpp
// on the values PM sampling gives (no replay, so no per-level bytes, instruction mix or
// occupancy). Same thresholds: idle ≥ launch_idle_share of the samples its kernels
// touched → launch/CPU-bound; a tensor pipe at the roof → compute-bound (tensor); else
// the top memory unit sampled (DRAM, L2, L1/shared) against SM %, the higher at
// ≥ at_roof_pct → memory- or compute-bound. Both under → latency-bound only when L2 and
// L1 were sampled too: otherwise undetermined, naming the unit it could not see (an L2-bound
// kernel looks latency-bound to SM and DRAM alone). Every text names its numbers and
// says "from sampling, N samples"; a verdict without its evidence is undetermined.
//   kscope::finding f = kscope::classify_sampled(*report.find(node), report.metrics);
[[nodiscard]] KSCOPE_DECL finding classify_sampled(const node_sampled_metrics& n, const std::vector<std::string>& metrics,
                                              const classification_thresholds& t = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL finding classify_sampled(const node_sampled_metrics& n, const std::vector<std::string>& metrics,
                                              const classification_thresholds& t) {
  finding f;
  const sampled_metric_columns c = sampled_metric_columns::of(metrics);
  const auto mean = [&n](std::size_t i) {
    return i < n.values.size() ? n.values[i].mean : std::numeric_limits<double>::quiet_NaN();
  };
  const std::string basis = "from sampling, " + std::to_string(n.samples) + " samples";
  const double idle = n.idle_share();
  if (n.samples == 0 || !std::isfinite(idle)) {
    f.text = "undetermined: no sample overlapped the scope's kernels";
    return f;
  }
  f.facts.push_back({"sampled.idle_share", idle, "share"});
  f.facts.push_back({"sampled.samples", static_cast<double>(n.samples), "samples"});
  const double sm = mean(c.sm_pct), dram = mean(c.dram_pct), tensor = mean(c.tensor_pct);
  const double l2 = mean(c.l2_pct), l1 = mean(c.l1_pct);
  if (idle >= t.launch_idle_share) {
    f.kind = bottleneck::launch;
    f.text = "launch/CPU-bound (" + basis + "): the GPU ran nothing for " + detail::pct_text(100 * idle) +
             " of the sampled time around the scope's kernels: check CPU gaps between launches, synchronizations "
             "and host work (CUDA graphs, fewer synchronizations, asynchronous copies)";
    return f;
  }
  if (!std::isfinite(sm) || !std::isfinite(dram)) {
    f.text = "undetermined (" + basis + "): SM and DRAM throughput % were not both sampled";
    return f;
  }
  f.facts.push_back({metrics[c.sm_pct], sm, "%"});
  f.facts.push_back({metrics[c.dram_pct], dram, "%"});
  if (std::isfinite(tensor)) f.facts.push_back({metrics[c.tensor_pct], tensor, "%"});
  if (std::isfinite(l2)) f.facts.push_back({metrics[c.l2_pct], l2, "%"});
  if (std::isfinite(l1)) f.facts.push_back({metrics[c.l1_pct], l1, "%"});
  const std::string numbers = "SM " + detail::pct_text(sm) + ", DRAM " + detail::pct_text(dram) +
                              (std::isfinite(l2) ? ", L2 " + detail::pct_text(l2) : std::string()) +
                              (std::isfinite(l1) ? ", L1/shared " + detail::pct_text(l1) : std::string()) +
                              (std::isfinite(tensor) ? ", tensor pipe " + detail::pct_text(tensor) : std::string()) +
                              " of peak";
  // The top memory unit sampled; DRAM at its roof stays the limit while L2 reads within a
  // quarter of it (L2 counts DRAM's fills too), as classify() reads counters.
  std::string level = "DRAM";
  double memory = dram;
  memory_level memory_at = memory_level::dram;
  if (std::isfinite(l2) && l2 > memory && !dram_explains_level(dram, l2, t.at_roof_pct)) {
    level = "L2";
    memory = l2;
    memory_at = memory_level::l2;
  }
  if (std::isfinite(l1) && l1 > memory && !dram_explains_level(dram, l1, t.at_roof_pct)) {
    level = "L1";
    memory = l1;
    memory_at = memory_level::l1;
  }
  // SM is weighed against the busiest memory unit as sampled, as classify() weighs counters:
  // DRAM explaining L2 names the level, it does not make the memory side less busy (SM 65 %,
  // DRAM 62 %, L2 70 % is memory-bound at DRAM, not compute-bound).
  double memory_top = dram;
  if (std::isfinite(l2)) memory_top = std::max(memory_top, l2);
  if (std::isfinite(l1)) memory_top = std::max(memory_top, l1);
  const bool tensor_at_roof = std::isfinite(tensor) && tensor >= t.at_roof_pct;
  if (tensor_at_roof || std::max(sm, memory_top) >= t.at_roof_pct) {
    if (!tensor_at_roof && memory_top >= sm) {
      f.kind = bottleneck::memory;
      f.where = level;
      f.text = "memory-bound (" + basis + "): " + numbers + "; " +
               (memory >= memory_top ? level + " is the busiest unit sampled: "
                                     : level + " at " + detail::pct_text(memory) +
                                           " is the limit (the busier cache carries DRAM's own traffic, within a "
                                           "quarter of it): ") +
               detail::level_advice(memory_at);
    } else {
      f.kind = bottleneck::compute;
      const bool tensor_busy = std::isfinite(tensor) && tensor >= t.busy_pipe_pct;
      f.where = tensor_busy ? "tensor pipe" : "SM";
      f.text = "compute-bound (" + basis + "): " + numbers +
               (tensor_busy ? ": the tensor pipe is busy; fewer or cheaper MMA (lower precision, skip padding) is "
                              "what is left"
                            : ": find the busy pipe with a counter pass (kscope::profile_counters) before "
                              "optimizing");
    }
    return f;
  }
  std::string unseen;
  if (!std::isfinite(l2)) unseen = "L2";
  if (!std::isfinite(l1)) unseen += std::string(unseen.empty() ? "" : " and ") + "L1/shared";
  if (!unseen.empty()) {
    f.text = "undetermined (" + basis + "): " + numbers + ", both under " + detail::pct_text(t.at_roof_pct) +
             ", but " + unseen + " throughput " + (unseen.find(" and ") != std::string::npos ? "were" : "was") +
             " not sampled: a kernel bound by " + unseen + " looks the same, so this is not called latency-bound";
    return f;
  }
  f.kind = bottleneck::latency;
  f.text = "latency-bound (" + basis + "): " + numbers + ", all under " + detail::pct_text(t.at_roof_pct) +
           " while the GPU was busy " + detail::pct_text(100 * (1 - idle)) +
           " of the time: too little parallel work or dependent memory accesses (a counter pass gives occupancy "
           "and grid size, warp-stall sampling the reason warps wait)";
  return f;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
