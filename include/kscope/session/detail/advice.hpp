// kscope/session/detail/advice.hpp — checks each scope's time against the kernels CUPTI
// saw it launch, and says what to try next from the measurements that back it.
//
// A scope's GPU time is the span between two CUDA events recorded on the scope's stream.
// When the scope's kernels run on another stream the events bracket nothing: a scope
// whose kernels ran 3.79 ms reported 5 us, and its roofline placement 38210 % of the
// roof. The roofline's own hint() cannot see that, nor tell a launch-bound loop of tiny
// kernels from one slow kernel: both sit "far under both roofs". The report has the data
// that can (the kernels' busy time, their count, the idle time between them), so the
// advice is made here, where that data is:
//
//   reconcile_and_advise(report, activity, &peaks, /*timeline=*/true);
//   // report.scopes[i].gpu_time_disagreement, .roofline_time_source, .advice are set
//
// Rules and thresholds (each is tested in tests/advice_test.cpp):
//   - disagreement: the scope's own kernels kept the GPU busy for more than
//     1.5 x its event time per call + 5 us (kernel_time_disagreement_*). Events on the
//     kernels' stream bracket them, so kernel time cannot exceed event time there; the
//     factor and the slack absorb what differs between the two averages (kernels of
//     calls the events did not time, timer resolution). A scope without a stream is held
//     to its host time the same way, when it declared work (its placement would use it).
//   - impossible: a placement above roofline_impossible_above (1.1) x the theoretical
//     roof (report.hpp): no limiter, no advice, the likely cause instead.
//   - launch gaps: the CPU-gaps advice only when the GPU idled at least half the scope's
//     span per call (launch_gap_idle_share) between the kernels CUPTI saw.
//   - long kernels: busier than that, with kernels of 20 us or more on average
//     (long_kernel_ns, about four launch latencies): the time is inside the kernels.
//   - no timeline (CUPTI off, or nothing attributed): say so, never guess.
#pragma once

#include "../../core/roofline.hpp"
#include "../../evidence/activity_results.hpp"
#include "../../report/report.hpp"
#include "context.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kscope {
namespace detail {

// Kernel busy time per call above ratio x the scope's own time per call + slack
// contradicts that time (see the rules at the top).
inline constexpr double kernel_time_disagreement_ratio = 1.5;
inline constexpr double kernel_time_disagreement_slack_ns = 5000;
// The GPU idle for at least this share of a scope's span per call: launch gaps and
// synchronizations are the first thing to look at.
inline constexpr double launch_gap_idle_share = 0.5;
// Kernels this long on average are "long": a launch costs about 5 us, so the time of a
// 20 us kernel is mostly its own execution, not launch overhead.
inline constexpr double long_kernel_ns = 20000;

// What CUPTI saw a scope and its descendants do on the GPU. Sums over nodes: the union of
// several nodes' intervals cannot be rebuilt from their totals, and a sum is never less
// than the union, so a time from it is never too short (a rate never too high) and an
// idle share from it never too large.
struct subtree_gpu_work {
  bool seen = false;          // some node of the subtree has CUPTI activity
  std::uint64_t kernels = 0;  // kernel count
  double kernel_ns = 0;       // sum of kernel durations
  double busy_ns = 0;         // sum of the nodes' kernel busy times (unions)
  double work_ns = 0;         // busy_ns plus copy and memset durations
};

KSCOPE_DECL void add_gpu_work(subtree_gpu_work& sum, const node_gpu_activity& a);

// The GPU work of scopes[i] and of the scopes nested in it. `scopes` is depth-first, so a
// subtree is the run of deeper scopes after it. Cross-thread ranges are left out with
// their subtrees: they may run outside the parent's calls, like host_exclusive_ns does.
KSCOPE_DECL subtree_gpu_work subtree_work(const std::vector<scope_report>& scopes, std::size_t i);

// "stream 14 of GPU 0", "streams 13, 14 of GPU 0 and stream 7 of GPU 1": where the
// node's kernels in CUPTI's recent-event ring ran; "" when the ring holds none of them.
KSCOPE_DECL std::string kernel_streams_text(const std::set<std::pair<std::uint32_t, std::uint32_t>>& device_streams);

// Per node: the (device, stream) pairs of its kernels in the recent-event ring.
KSCOPE_DECL std::map<node_id, std::set<std::pair<std::uint32_t, std::uint32_t>>> kernel_streams_by_node(
    const std::vector<gpu_activity_event>& recent);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void add_gpu_work(subtree_gpu_work& sum, const node_gpu_activity& a) {
  sum.seen = true;
  sum.kernels += a.kernel_count;
  sum.kernel_ns += static_cast<double>(a.kernel_ns);
  sum.busy_ns += static_cast<double>(a.busy_ns);
  double copies_ns = static_cast<double>(a.memset.ns);
  for (const copy_totals& c : a.memcpy) copies_ns += static_cast<double>(c.ns);
  sum.work_ns += static_cast<double>(a.busy_ns) + copies_ns;
}

KSCOPE_DECL subtree_gpu_work subtree_work(const std::vector<scope_report>& scopes, std::size_t i) {
  subtree_gpu_work sum;
  if (scopes[i].gpu_activity) add_gpu_work(sum, *scopes[i].gpu_activity);
  std::size_t skip_below = 0;  // depth of a cross-thread scope being skipped; 0: none
  for (std::size_t j = i + 1; j < scopes.size() && scopes[j].depth > scopes[i].depth; ++j) {
    if (skip_below && scopes[j].depth > skip_below) continue;
    skip_below = 0;
    if (scopes[j].cross_thread) {
      skip_below = scopes[j].depth;
      continue;
    }
    if (scopes[j].gpu_activity) add_gpu_work(sum, *scopes[j].gpu_activity);
  }
  return sum;
}

KSCOPE_DECL std::string kernel_streams_text(const std::set<std::pair<std::uint32_t, std::uint32_t>>& device_streams) {
  std::map<std::uint32_t, std::vector<std::uint32_t>> by_device;
  for (const auto& [device, stream] : device_streams) by_device[device].push_back(stream);
  std::string out;
  std::size_t listed = 0;
  for (const auto& [device, streams] : by_device) {
    if (!out.empty()) out += " and ";
    out += streams.size() == 1 ? "stream " : "streams ";
    for (std::size_t k = 0; k < streams.size(); ++k) {
      if (++listed > 8) {  // a scope spread over many streams: the first few say enough
        out += " and " + std::to_string(device_streams.size() - 8) + " more";
        return out;
      }
      out += (k ? ", " : "") + std::to_string(streams[k]);
    }
    out += " of GPU " + std::to_string(device);
  }
  return out;
}

KSCOPE_DECL std::map<node_id, std::set<std::pair<std::uint32_t, std::uint32_t>>> kernel_streams_by_node(const std::vector<gpu_activity_event>& recent) {
  std::map<node_id, std::set<std::pair<std::uint32_t, std::uint32_t>>> out;
  for (const gpu_activity_event& e : recent)
    if (e.kind == activity_kind::kernel) out[e.node].insert({e.device, e.stream});
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// "40", "1", "2.5": a count per call.
inline std::string per_call_count(double v) { return format_general(v, 3); }

// "1000 FLOP/B", "12.5 FLOP/B", "0 FLOP/B", "inf FLOP/B" (no bytes declared).
KSCOPE_DECL std::string intensity_text(double flop_per_byte);

KSCOPE_DECL std::string kernels_phrase(double kernels_per_call);

// Checks the scope's own time per call (events, or the host time of a scope without a
// stream that declared work) against the busy time per call of the kernels CUPTI
// attributed to it. On disagreement: sets s.gpu_time_disagreement (and returns it, for
// the report's warnings) and, when peaks are known, places the scope again by the GPU
// time of its subtree's kernels, copies and memsets per call. "" when they agree or
// there is nothing to compare.
KSCOPE_DECL std::string reconcile_gpu_time(scope_report& s, const subtree_gpu_work& subtree, const std::string& streams,
                                      const device_peaks* peaks);

// What to try next for a placed scope, naming the numbers it rests on; "" for a scope not
// placed or placed impossibly (report.hpp then prints why, and nothing to try).
// `timeline`: CUPTI was collecting, so a scope without activity really launched nothing.
KSCOPE_DECL std::string scope_advice(const scope_report& s, const subtree_gpu_work& subtree, bool timeline);

// The session's pass over a report's scopes once their CUPTI activity is attached: checks
// each scope's time against its kernels (warnings go to out.warnings), places it again by
// its kernels where its own time was contradicted, and writes each placed scope's advice.
KSCOPE_DECL void reconcile_and_advise(session_report& out, const gpu_activity_report& activity, const device_peaks* peaks,
                                 bool timeline);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string intensity_text(double flop_per_byte) {
  return (std::isfinite(flop_per_byte) && flop_per_byte >= 100 ? format_fixed(flop_per_byte, 0)
                                                                : format_general(flop_per_byte, 3)) +
         " FLOP/B";
}

KSCOPE_DECL std::string kernels_phrase(double kernels_per_call) {
  return per_call_count(kernels_per_call) + (kernels_per_call == 1 ? " kernel" : " kernels") + " per call";
}

KSCOPE_DECL std::string reconcile_gpu_time(scope_report& s, const subtree_gpu_work& subtree, const std::string& streams,
                                      const device_peaks* peaks) {
  s.gpu_time_disagreement.clear();
  if (!s.gpu_activity || s.calls == 0 || s.id == unscoped_node) return {};
  const node_gpu_activity& a = *s.gpu_activity;
  if (a.kernel_count == 0 || a.busy_ns <= 0) return {};
  const double calls = static_cast<double>(s.calls);
  // The node's own kernels only: a lower bound of what its events should bracket (its
  // children's unions cannot be combined with it), so the check can miss, never invent.
  const double kernel_busy_per_call = static_cast<double>(a.busy_ns) / calls;
  const bool timed_by_events = s.gpu_calls > 0;
  // A scope without a stream may legitimately end before its kernels (launches are
  // asynchronous); that matters only when its host time would place it on the roofline.
  if (!timed_by_events && s.work_calls == 0) return {};
  const double own_per_call =
      timed_by_events ? s.gpu_total_ns / static_cast<double>(s.gpu_calls) : s.host_inclusive_ns / calls;
  if (!std::isfinite(own_per_call) ||
      !(kernel_busy_per_call > kernel_time_disagreement_ratio * own_per_call + kernel_time_disagreement_slack_ns))
    return {};

  const std::string where = streams.empty()
                                ? std::string("their streams are no longer in CUPTI's recent-event ring")
                                : "kernels ran on " + streams;
  const std::string kernels = kernels_phrase(static_cast<double>(a.kernel_count) / calls);
  std::string line = "scope '" + s.path + "': ";
  if (timed_by_events) {
    line += "its CUDA events measured " + format_duration_ns(own_per_call) + " per call (mean of " +
            std::to_string(s.gpu_calls) + " timed calls), but its own kernels kept the GPU busy " +
            format_duration_ns(kernel_busy_per_call) + " per call (" + kernels + ", CUPTI): the scope's events were " +
            "recorded on a different stream than its kernels (" + where + "), so they do not bracket them; " +
            "its event time is not its GPU time";
  } else {
    line += "it has no stream, and its host time, " + format_duration_ns(own_per_call) +
            " per call, ends when its launches return, before its kernels finish: they kept the GPU busy " +
            format_duration_ns(kernel_busy_per_call) + " per call (" + kernels + ", CUPTI; " + where +
            ")";
  }
  if (peaks && s.work_calls > 0 && subtree.work_ns > 0) {
    const double time_ns = subtree.work_ns / calls;
    place_scope_at(s, *peaks, time_ns, interval{std::nan(""), std::nan(""), 0.95}, time_source_kernels);
    if (s.roofline) {
      line += "; it is placed on the roofline by its GPU work instead, " + format_duration_ns(time_ns) +
              " per call (kernel busy time";
      line += subtree.work_ns > subtree.busy_ns ? ", copies and memsets" : "";
      line += subtree.busy_ns > static_cast<double>(a.busy_ns) ? ", its children's included)" : ")";
    }
  }
  line += timed_by_events ? ". Give the scope the stream its kernels run on"
                          : ". Give the scope its stream to time it on the GPU";
  s.gpu_time_disagreement = line;
  return line;
}

KSCOPE_DECL std::string scope_advice(const scope_report& s, const subtree_gpu_work& subtree, bool timeline) {
  if (!placement_has_limiter(s)) return {};
  const placement& p = *s.roofline;
  const std::string pct = roofline_percent_text(p.fraction_of_roof);
  const std::string at_intensity = intensity_text(p.intensity);
  const std::string roof = s.roof.empty() ? std::string("compute") : s.roof;
  switch (p.limiter) {
    case bound::memory:
      return "memory-bound: " + pct + " of the DRAM roof (" + format_si(p.bytes_per_s, "B/s") + " at " +
             at_intensity + "): move fewer bytes (fuse kernels, compress or narrow the data type, reuse data "
             "through cache and shared memory)";
    case bound::compute:
      if (p.fraction_of_roof >= roofline_options{}.near_compute_roof)
        return "at the compute roof: " + pct + " of the " + roof + " roof (" + format_si(p.flops_per_s, "FLOP/s") +
               "): do fewer operations or use a faster path (lower precision, tensor cores)";
      return "compute path not used: " + at_intensity + " is above the ridge, yet " + pct + " of the " + roof +
             " roof (" + format_si(p.flops_per_s, "FLOP/s") + "): check the data type, layout, alignment and whether "
             "tensor cores are used";
    case bound::latency: break;
  }
  const std::string far = "far under both roofs (" + pct + " of the roof at " + at_intensity + ")";
  if (!timeline)
    return "latency-bound: " + far + "; no kernel timeline to tell launch gaps from a slow kernel — enable CUPTI "
           "(KSCOPE_CUPTI=1 or session::enable_cupti())";
  const double calls = static_cast<double>(s.calls ? s.calls : 1);
  if (!subtree.seen || subtree.kernels == 0) {
    std::string line = "latency-bound: " + far + "; CUPTI attributed no kernels to this scope or its children";
    if (subtree.work_ns > 0) line += " (copies and memsets: " + format_duration_ns(subtree.work_ns / calls) + " per call)";
    return line + ", so there is no kernel timeline to tell launch gaps from a slow kernel (kernels launched from "
                  "another thread, or before CUPTI started?)";
  }
  const double kernels_per_call = static_cast<double>(subtree.kernels) / calls;
  const double mean_kernel_ns = subtree.kernel_ns / static_cast<double>(subtree.kernels);
  const double work_per_call = subtree.work_ns / calls;
  // The scope's span per call, where a measurement of it is trusted: the events' mean, or
  // the host mean of a scope without a stream. Placed by its kernels, it has none.
  double span_ns = std::nan("");
  if (s.roofline_time_source == time_source_events && s.gpu_calls)
    span_ns = s.gpu_total_ns / static_cast<double>(s.gpu_calls);
  else if (s.roofline_time_source == time_source_host)
    span_ns = s.host_inclusive_ns / calls;
  std::string busy;  // "GPU busy 99 % of the scope's span (276 ms of 277 ms per call)"
  if (span_ns > 0) {
    const double busy_share = std::min(1.0, work_per_call / span_ns);
    if (1 - busy_share >= launch_gap_idle_share)
      return "latency-bound: " + far + "; GPU idle " + roofline_percent_text(1 - busy_share) +
             " of the scope's span between its " + kernels_phrase(kernels_per_call) + " (GPU work " +
             format_duration_ns(work_per_call) + " of " + format_duration_ns(span_ns) +
             " per call, CUPTI): check CPU gaps between launches, synchronizations and host work inside the scope "
             "(CUDA graphs, fewer synchronizations, asynchronous copies)";
    busy = "GPU busy " + roofline_percent_text(busy_share) + " of the scope's span (" +
           format_duration_ns(work_per_call) + " of " + format_duration_ns(span_ns) + " per call) with ";
  } else {
    busy = "GPU work " + format_duration_ns(work_per_call) + " per call in ";
  }
  busy += kernels_phrase(kernels_per_call) + " of " + format_duration_ns(mean_kernel_ns) + " on average (CUPTI)";
  if (mean_kernel_ns >= long_kernel_ns) {
    const bool one = kernels_per_call <= 1.5;
    return (one ? "one long kernel " : "long kernels ") + far + "; " + busy + ": the time is inside the " +
           (one ? "kernel" : "kernels") +
           " — too little parallelism or a poor access pattern inside it; hardware counters (Nsight Compute) "
           "would say which";
  }
  return "latency-bound: " + far + "; " + busy +
         ": kernels too short to fill the GPU — fuse them or batch the work into fewer, larger launches";
}

KSCOPE_DECL void reconcile_and_advise(session_report& out, const gpu_activity_report& activity, const device_peaks* peaks,
                                 bool timeline) {
  // Traced in windows (evidence/trace_windows.hpp): the aggregates hold the windows' work
  // only, and a call straddling a window's edge was traced in part, so no per-call figure is
  // divided out of them here (the report says less, never a false per-call number); the
  // GPU-time account gives per-call figures from the calls whole inside a window.
  const bool whole_run = !activity.windows.windowed;
  const auto streams = kernel_streams_by_node(activity.recent);
  for (std::size_t i = 0; i < out.scopes.size(); ++i) {
    scope_report& s = out.scopes[i];
    if (s.id == unscoped_node) continue;
    const subtree_gpu_work subtree = subtree_work(out.scopes, i);
    const auto it = streams.find(s.id);
    if (whole_run) {
      const std::string warning =
          reconcile_gpu_time(s, subtree, it == streams.end() ? std::string() : kernel_streams_text(it->second), peaks);
      if (!warning.empty()) out.warnings.push_back(warning);
    }
    s.advice = scope_advice(s, subtree, timeline && whole_run);
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
