// kscope/session/detail/features.hpp — the built-in features a session composes
// (session/feature.hpp): GPU metrics sampled while running (pm_sampling/), per-scope
// hardware counters (counters/), and where a serving loop's GPU time went (evidence/gpu_time.hpp).
//
// Each adapts its feature's snapshot to the session_feature interface and writes its member
// of the report; the collection stays in the feature's folder, the maths and printers in evidence/.
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/clock.hpp"
#include "../../counters/scope_counters.hpp"
#include "../live_metric_sampling.hpp"
#include "../../evidence/pm_report.hpp"
#include "../../report/data.hpp"
#include "../../report/trace.hpp"
#include "../../scope/recorder_snapshot.hpp"
#include "../../evidence/gpu_time.hpp"
#include "../feature.hpp"

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace kscope {
namespace detail {

// GPU metrics sampled while running: the "GPU metrics sampled while running" section and
// one counter track per metric in the trace. The sampling itself is the session's
// enable_metric_sampling(); this feature owns the live attribution it feeds.
class pm_sampling_feature final : public session_feature {
 public:
  pm_sampling_feature() : live_(std::make_shared<live_metric_sampling>()) {}
  [[nodiscard]] const char* name() const noexcept override { return "pm_sampling"; }
  [[nodiscard]] const std::shared_ptr<live_metric_sampling>& sampling() const noexcept { return live_; }
  [[nodiscard]] KSCOPE_DECL std::unique_ptr<feature_section> snapshot(std::int64_t now_ns) override;
  KSCOPE_DECL void add_trace_tracks(trace_options& options, std::int64_t now_ns) override;

 private:
  std::shared_ptr<live_metric_sampling> live_;
};

// Per-scope hardware counters: the counters status and each profiled scope's section
// (roofs: the compute roof of the precision with the most measured FLOPs, DRAM bandwidth).
class counters_feature final : public session_feature {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "counters"; }
  [[nodiscard]] KSCOPE_DECL std::unique_ptr<feature_section> snapshot(std::int64_t now_ns) override;
};

// Where the GPU's time went (evidence/gpu_time.hpp), from the recent host intervals of the
// trace ring and the recent GPU events of the activity source, with the scopes' CUPTI
// aggregates for the totals. Bounded by the two rings; says how much they covered. Only
// with a GPU timeline (the activity collector ran).
class gpu_time_feature final : public session_feature {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "gpu_time"; }
  [[nodiscard]] KSCOPE_DECL std::unique_ptr<feature_section> snapshot(std::int64_t now_ns) override;
};

// `whole_run`: the CUPTI aggregates cover every call (not traced in windows), so a scope's
// kernel busy time per call can be divided out of them.
KSCOPE_DECL void add_scope_counters(session_report& out, const scope_counters_snapshot& snap, const device_peaks* peaks,
                                    bool whole_run = true);
// The GPU-time accounting of `out.scopes` (summarized already) on the trace ring and the
// activity's recent events; over [window_start_ns, window_end_ns] when given
// (session::window(), gpu_time_input's given window), else over what the rings hold.
KSCOPE_DECL gpu_time_report account_session_gpu_time(const session_report& out, const gpu_activity_report& activity,
                                                     const recorder_trace& trace, const tick_map& clock,
                                                     std::int64_t window_start_ns = 0, std::int64_t window_end_ns = 0);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void add_scope_counters(session_report& out, const scope_counters_snapshot& snap, const device_peaks* peaks,
                                    bool whole_run) {
  session_counters_status st;
  st.enabled = snap.enabled;
  st.status = snap.status;
  st.metrics = snap.metrics;
  st.notes = snap.notes;
  st.passes = snap.passes;
  st.skipped_busy = snap.skipped_busy;
  st.cost = snap.cost;
  out.counters = std::move(st);
  for (scope_report& s : out.scopes) {
    const scope_counter_totals* t = snap.find(s.id);
    if (t == nullptr || s.id == unscoped_node) continue;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double calls = static_cast<double>(s.work_calls);
    // A zero in declared work means "not declared" (set_work({flops, 0})): never a mismatch.
    const work declared_per_call =
        s.work_calls > 0 ? work{s.declared.flops > 0 ? s.declared.flops / calls : nan,
                                s.declared.bytes > 0 ? s.declared.bytes / calls : nan}
                         : work{nan, nan};
    const double span = s.host_ns.n > 0 ? s.host_ns.median : nan;
    const double busy = whole_run && s.gpu_activity && s.calls > 0
                            ? static_cast<double>(s.gpu_activity->busy_ns) / static_cast<double>(s.calls)
                            : nan;
    std::optional<hierarchical_roofs> roofs;
    if (peaks != nullptr) {
      const flop_count f = count_flops(t->aggregate.totals());
      const data_type type = f.precisions.empty() ? data_type::fp32 : f.precisions.front();
      const compute_roof* r = peaks->find(type, core_kind::plain);
      if (r == nullptr) r = peaks->find(data_type::fp32, core_kind::plain);
      if (r != nullptr && std::isfinite(r->theoretical_flops_per_s) && std::isfinite(peaks->theoretical_bytes_per_s))
        roofs = hierarchical_roofs{roof_line{std::string(to_string(type)) + " " + to_string(core_kind::plain),
                                             r->theoretical_flops_per_s, peaks->theoretical_bytes_per_s, false}};
    }
    s.counters = make_scope_counter_report(t->aggregate, t->profiled_calls, t->failed_calls, t->kernels,
                                           t->kernels_dropped, declared_per_call, span, busy, roofs ? &*roofs : nullptr,
                                           t->groups, t->partial_calls, t->partial_kernels);
  }
}

KSCOPE_DECL gpu_time_report account_session_gpu_time(const session_report& out, const gpu_activity_report& activity,
                                                const recorder_trace& trace, const tick_map& clock,
                                                std::int64_t window_start_ns, std::int64_t window_end_ns) {
  gpu_time_input in;
  in.nodes.reserve(out.scopes.size());
  for (const scope_report& s : out.scopes)
    in.nodes.push_back(gpu_time_node{s.id, s.id == unscoped_node ? node_id{0} : s.parent, s.depth, s.cross_thread,
                                     s.path, s.gpu_activity ? &*s.gpu_activity : nullptr});
  in.host.reserve(trace.intervals.size());
  for (const recorded_interval& e : trace.intervals)
    in.host.push_back(host_interval{e.node < trace.names.size() ? std::string_view(trace.names[e.node]) : std::string_view(),
                                    e.node, e.thread_index, clock.to_ns(e.start_ticks), clock.to_ns(e.end_ticks)});
  in.gpu = activity.recent;
  in.host_overwritten = trace.overwritten;
  in.gpu_overwritten = activity.counters.recent_overwritten;
  // Every event the ring replaced had a start, hence an end, after 0: 0 is a source that
  // does not say (a fake one in tests), and the ring's oldest event stands in.
  if (activity.counters.recent_overwritten > 0 && activity.counters.recent_overwritten_end_ns > 0)
    in.gpu_overwritten_end_ns = activity.counters.recent_overwritten_end_ns;
  // What the ring never got, so that idle time there is not idle (gpu_time.hpp, "whole").
  const attribution_counters& c = activity.counters;
  if (c.dropped_by_cupti > 0)
    in.incomplete.push_back("CUPTI dropped " + std::to_string(c.dropped_by_cupti) + " activity records");
  if (c.graph_replays_held > 0)
    in.incomplete.push_back(std::to_string(c.graph_replays_held) +
                            " CUDA-graph replays traced node by node wait for a timestamp check");
  if (c.graph_replays_unchecked > 0)
    in.incomplete.push_back(std::to_string(c.graph_replays_unchecked) +
                            " CUDA-graph replays traced node by node could not be checked for CUPTI's timestamp offset");
  if (c.profiled_records > 0)
    in.incomplete.push_back(std::to_string(c.profiled_records) +
                            " GPU records of calls the per-scope counters replayed are left out");
  in.window_start_ns = window_start_ns;
  in.window_end_ns = window_end_ns;
  // Tracing in windows: only the traced windows' GPU activity is known.
  // Windows older than the ones listed (trace_window_log::max_kept) count as untraced: the
  // ring's events from them are left out with them.
  if (activity.windows.windowed) in.traced = activity.windows.recent;
  return account_gpu_time(in);
}

namespace feature_sections {

struct sampled_metrics_section final : feature_section {
  live_metrics_snapshot m;
  void add_to(session_report& out, const report_evidence&) override {
    session_sampled_metrics section;
    section.status = m.status.message;
    section.notes = m.status.notes;
    section.running = m.status.ok();
    section.interval_ns = m.status.interval_ns;
    section.mean_interval_ns = m.status.mean_interval_ns;
    section.windows = m.status.windows;
    section.coverage = m.status.coverage();
    section.samples = m.status.samples;
    section.samples_lost = m.status.samples_dropped + m.status.samples_lost_at_reset + m.status.samples_unusable +
                           m.status.samples_missing;
    section.hardware_overflows = m.status.hardware_overflows;
    section.folded_until_ns = m.folded_until_ns;
    section.attributed = m.attributed;
    section.data = std::move(m.report);
    out.sampled_metrics = std::move(section);
  }
};

struct counters_section final : feature_section {
  scope_counters_snapshot snap;
  void add_to(session_report& out, const report_evidence& evidence) override {
    add_scope_counters(out, snap, evidence.peaks,
                       evidence.activity == nullptr || !evidence.activity->windows.windowed);
  }
};

struct gpu_time_section final : feature_section {
  void add_to(session_report& out, const report_evidence& evidence) override {
    const gpu_activity_report& activity = *evidence.activity;
    if (!evidence.timeline || (activity.nodes.empty() && activity.recent.empty())) return;
    const recorder_trace trace = recorder::global().trace_snapshot();
    out.gpu_time = account_session_gpu_time(out, activity, trace, *evidence.clock);
  }
};

}  // namespace feature_sections

KSCOPE_DECL std::unique_ptr<feature_section> pm_sampling_feature::snapshot(std::int64_t now_ns) {
  // The activity collector was flushed before: kernels that ended before now are attributed.
  auto s = std::make_unique<feature_sections::sampled_metrics_section>();
  s->m = live_->snapshot(now_ns);
  return s;
}

KSCOPE_DECL void pm_sampling_feature::add_trace_tracks(trace_options& options, std::int64_t now_ns) {
  const live_metrics_snapshot m = live_->snapshot(now_ns, /*with_recent=*/true);
  const std::vector<std::string>& metrics = m.status.metrics;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    trace_counter_track track;
    track.name = "sampled " + sampled_metric_label(metrics[i]);
    track.device = m.status.device;
    track.points.reserve(m.recent.size());
    for (const metric_sample& sample : m.recent)
      if (i < sample.values.size()) track.points.emplace_back(sample.start_ns, sample.values[i]);
    options.counter_tracks.push_back(std::move(track));
  }
}

KSCOPE_DECL std::unique_ptr<feature_section> counters_feature::snapshot(std::int64_t) {
  auto s = std::make_unique<feature_sections::counters_section>();
  s->snap = scope_counter_sampler::global().snapshot();
  return s;
}

KSCOPE_DECL std::unique_ptr<feature_section> gpu_time_feature::snapshot(std::int64_t) {
  return std::make_unique<feature_sections::gpu_time_section>();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
