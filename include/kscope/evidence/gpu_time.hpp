// kscope/evidence/gpu_time.hpp — where the GPU's time went, per scope and per call, and
// where it idled: HTA's temporal breakdown, online, with kernels attributed by the scope
// that launched them (correlation id), not by time overlap.
//
// Pure C++ on plain data, so every number is tested on the CPU: the session hands over the
// recent host intervals (the recorder's trace ring), the recent GPU events (the CUPTI
// collector's ring) and the scope tree; nothing here reads a clock or takes a lock.
//
//   kscope::gpu_time_input in;
//   in.nodes = {{1, 0, 1, false, "step", nullptr}, {2, 1, 2, false, "step/decode", &decode_activity}};
//   in.host = host_intervals;              // any order
//   in.gpu = snapshot.activity.recent;     // any order
//   const kscope::gpu_time_report t = kscope::account_gpu_time(in);
//   std::printf("GPU busy %.0f %% of %.1f ms\n", 100 * t.busy_share, t.wall_ns / 1e6);
//
// Definitions (docs/report_schema.md, `gpu_time`):
//   - what the GPU ring knows: once it overflowed, only what happened after the latest end
//     of an event it overwrote (gpu_time_input::gpu_overwritten_end_ns; the ring is in
//     arrival order and CUPTI delivers buffers out of time order across streams, so an event
//     it dropped may have ended after the oldest one it holds). gpu_known_from_ns.
//   - window: the first host interval's start to the last end of a host interval or GPU
//     event; without host intervals, the GPU events' span. When the GPU ring overflowed
//     and knows only what happened after a later time, the window starts there instead:
//     before it the GPU's activity is unknown, not idle.
//   - busy: the union of every kernel, copy, memset and CUDA-graph replay traced as one
//     record (its span: the GPU ran the graph's nodes throughout, as CUDA events around the
//     launch say) over all devices and streams, clipped to the window; busy_share = busy /
//     wall. The union does not depend on the order the events arrived in.
//   - whole or not: records the rings never got (dropped by CUPTI, graph replays whose
//     timestamps wait for a check, kernels replayed by the per-scope counters and kept out)
//     leave holes that would read as idle time. The caller names them
//     (gpu_time_input::incomplete); then busy and busy_share are unknown (NaN), the idle
//     gaps are not listed, and gpu_time_report::unknown_reason says why.
//   - idle gaps: the stretches between consecutive busy intervals (a leading or trailing
//     stretch of the window is not a gap: Nsight Systems' gpu_gaps leaves those out too),
//     each given to the scope open on the host at its midpoint (the deepest host interval
//     of a scope, not a cross-thread range, that covers it; a range when no scope does):
//     the longest gpu_time_top_gaps of them, and all of them summed per open scope.
//   - per scope: GPU time from the CUPTI aggregates (exact over the whole run, exclusive
//     of children: busy union of its kernels plus its copies and memsets) and its share
//     of the sum over scopes; per call, from the rings: each GPU event goes to the latest
//     call of its launching scope on its launching thread that started before it, and to
//     the calls of that scope's ancestors that contain that call; a call's busy time is the
//     union of its events, its gaps the time between them (span − busy). When the GPU ring
//     overflowed, calls that started before gpu_known_from_ns are left out of the per-call
//     figures (their GPU work is unknown) and counted in calls_before_gpu_ring.
//   - a given window (gpu_time_input::window_start_ns/window_end_ns, session::window()):
//     the window is that interval instead; only host intervals and GPU events that overlap
//     it count, busy time is clipped to it, and each scope's GPU time and kernel count come
//     from its own events in it (clipped), not from the CUPTI aggregates, which are the
//     whole run's. busy_share is then defined with no GPU event at all (an idle GPU: 0),
//     and unknown (NaN) when the GPU ring overflowed and knows only what happened after the
//     window's start: part of the window's GPU activity is gone, not idle, so busy_ns, each
//     scope's gpu_ns, share_of_gpu and kernel_count are unknown too (totals_known false) and
//     only the idle gaps after gpu_known_from_ns are listed.
//   - tracing in windows (gpu_time_input::traced, evidence/trace_windows.hpp): the GPU's
//     activity is known inside the traced windows only, and within a window only from the
//     start of its first GPU record on: work launched before the window opened may still
//     run at its start and made no record, so the time before that first record is
//     unknown, not idle (a window with no record at all is left out whole). The wall time
//     is those spans' overlap with the account's window, busy is clipped to them, an idle
//     gap is one that lies inside one of them, and per-call figures come from the calls that
//     lie whole inside a window (their launches were all traced; calls_untraced counts the
//     others). Time between windows is unknown, not idle. The scopes' totals are what the
//     aggregates hold: the traced windows' work.
#pragma once

#include "../core/stats.hpp"
#include "activity_results.hpp"
#include "trace_windows.hpp"
#include "../scope/host_interval.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// The idle gaps listed, longest first.
inline constexpr std::size_t gpu_time_top_gaps = 5;

// One node of the scope tree as the accounting needs it. `activity` (may be null) is the
// node's CUPTI aggregate, exclusive of its children; it must outlive the call.
struct gpu_time_node {
  node_id id = 0;
  node_id parent = 0;  // 0: top level
  std::size_t depth = 1;
  bool cross_thread = false;
  std::string path;
  const node_gpu_activity* activity = nullptr;
};

struct gpu_time_input {
  std::vector<gpu_time_node> nodes;        // any order
  std::vector<host_interval> host;         // recent host intervals, any order
  std::vector<gpu_activity_event> gpu;     // recent GPU events, any order
  std::uint64_t host_overwritten = 0;      // host intervals pushed out of the trace ring
  std::uint64_t gpu_overwritten = 0;       // GPU events pushed out of CUPTI's ring
  // The latest end of an event pushed out (attribution_counters::recent_overwritten_end_ns).
  // Unset: not known, and the ring's oldest event stands in for it, which is right only for
  // events that arrived in time order.
  std::optional<std::int64_t> gpu_overwritten_end_ns;
  // What the rings lack (above), one reason each ("CUPTI dropped 12 records"); empty: whole.
  std::vector<std::string> incomplete;
  // A window given by the caller (above); unset (end <= start): derived from the rings.
  std::int64_t window_start_ns = 0;
  std::int64_t window_end_ns = 0;
  [[nodiscard]] bool window_given() const noexcept { return window_end_ns > window_start_ns; }
  // Tracing in windows (above): the intervals in which launches were traced, in time order.
  // Unset: traced throughout.
  std::optional<std::vector<traced_interval>> traced;
};

// An idle stretch of the GPU and the scope the host was in meanwhile.
struct gpu_idle_gap {
  std::int64_t start_ns = 0;
  std::int64_t ns = 0;
  node_id open_scope = 0;   // 0: no host interval covered its midpoint
  std::string open_path;    // "" when none
};

// The GPU's idle time while one scope was open on the host: every gap between busy
// stretches goes to the scope open at its midpoint (same choice as for gpu_idle_gap).
struct gpu_idle_by_scope {
  node_id scope = 0;     // 0: no host interval covered the gaps
  std::string path;      // "" when none
  double ns = 0;         // summed gap time
  std::uint64_t gaps = 0;
};

// One scope's GPU time. The totals come from the CUPTI aggregates (whole run); the per-call
// figures from the calls the rings still hold (`calls_seen`), children's work included.
struct scope_gpu_time {
  node_id id = 0;
  std::string path;
  // False in a given window the GPU ring no longer holds whole: gpu_ns and share_of_gpu
  // are then NaN and kernel_count 0, not counts (the JSON writes null).
  bool totals_known = true;
  double gpu_ns = 0;              // own busy union + own copies and memsets (whole run)
  double share_of_gpu = std::numeric_limits<double>::quiet_NaN();  // of the sum over scopes
  std::uint64_t kernel_count = 0; // own kernels (whole run)
  std::uint64_t calls_seen = 0;   // calls in the host ring that the GPU ring covers
  summary busy_per_call_ns{};     // union of the call's GPU events (subtree), per call
  summary gaps_per_call_ns{};     // span of the call's GPU events minus their union
  double kernels_per_call = std::numeric_limits<double>::quiet_NaN();  // subtree, mean
  double d2h_per_call = std::numeric_limits<double>::quiet_NaN();      // D2H copies, mean
  double max_gap_ns = std::numeric_limits<double>::quiet_NaN();        // longest gap in one call
};

struct gpu_time_report {
  std::int64_t window_start_ns = 0;
  std::int64_t window_end_ns = 0;
  double wall_ns = 0;
  double busy_ns = 0;
  double busy_share = std::numeric_limits<double>::quiet_NaN();  // NaN: no GPU events, or unknown
  // Why busy_ns and busy_share are unknown although there were GPU events ("" : they are
  // known): the rings lack records (gpu_time_input::incomplete).
  std::string unknown_reason;
  std::vector<gpu_idle_gap> idle_gaps;   // the longest, longest first
  std::vector<gpu_idle_by_scope> idle_by_scope;  // all gaps by open scope, most idle time first
  std::vector<scope_gpu_time> scopes;    // in the order of the input nodes with GPU work or calls
  // What it covered: the rings hold the most recent intervals and events only.
  std::size_t host_intervals = 0;
  std::size_t gpu_events = 0;
  std::uint64_t host_overwritten = 0;
  std::uint64_t gpu_overwritten = 0;
  // When gpu_overwritten > 0: from when on the GPU ring holds every event it got (above);
  // 0 when it never overflowed.
  std::int64_t gpu_known_from_ns = 0;
  std::size_t gpu_events_unmatched = 0;  // no call of their launching scope in the host ring
  // Host calls that started before an overflowed GPU ring knows everything
  // (gpu_known_from_ns): their GPU work is unknown, not absent, so they are left out of the
  // per-call figures (counting them as calls with no GPU work drove the medians to 0).
  std::uint64_t calls_before_gpu_ring = 0;
  // Tracing in windows: wall_ns is the traced part of the window (the header says why), the
  // traced windows it overlapped, and the calls left out of the per-call figures because
  // they do not lie whole inside one.
  bool windowed = false;
  std::size_t traced_windows = 0;
  std::uint64_t calls_untraced = 0;

  [[nodiscard]] const scope_gpu_time* find(node_id id) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const scope_gpu_time* gpu_time_report::find(node_id id) const noexcept {
  for (const scope_gpu_time& s : scopes)
    if (s.id == id) return &s;
  return nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// The union of [start, end) intervals, sorted and merged in place.
KSCOPE_DECL void merge_intervals(std::vector<std::pair<std::int64_t, std::int64_t>>& v);

KSCOPE_DECL double union_length(const std::vector<std::pair<std::int64_t, std::int64_t>>& merged);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void merge_intervals(std::vector<std::pair<std::int64_t, std::int64_t>>& v) {
  std::sort(v.begin(), v.end());
  std::size_t out = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (out > 0 && v[i].first <= v[out - 1].second) {
      v[out - 1].second = std::max(v[out - 1].second, v[i].second);
    } else {
      v[out++] = v[i];
    }
  }
  v.resize(out);
}

KSCOPE_DECL double union_length(const std::vector<std::pair<std::int64_t, std::int64_t>>& merged) {
  double sum = 0;
  for (const auto& [s, e] : merged) sum += static_cast<double>(e - s);
  return sum;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// The accounting described at the top of this header. Cost: O((H + G) log H) for H host
// intervals and G GPU events times the tree depth; memory: a few copies of the input.
[[nodiscard]] KSCOPE_DECL gpu_time_report account_gpu_time(const gpu_time_input& in);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL gpu_time_report account_gpu_time(const gpu_time_input& in) {
  using span = std::pair<std::int64_t, std::int64_t>;
  gpu_time_report out;
  out.host_overwritten = in.host_overwritten;
  out.gpu_overwritten = in.gpu_overwritten;

  std::map<node_id, std::size_t> index;  // node id -> position in in.nodes
  for (std::size_t i = 0; i < in.nodes.size(); ++i) index.emplace(in.nodes[i].id, i);

  // Valid inputs only: an interval that ends before it starts says nothing. With a given
  // window, only what overlaps it.
  const bool given = in.window_given();
  const auto overlaps = [&](std::int64_t start, std::int64_t end) {
    return !given || (end > in.window_start_ns && start < in.window_end_ns);
  };
  std::vector<const host_interval*> host;
  host.reserve(in.host.size());
  for (const host_interval& h : in.host)
    if (h.end_ns >= h.start_ns && overlaps(h.start_ns, h.end_ns)) host.push_back(&h);
  std::vector<const gpu_activity_event*> gpu;
  gpu.reserve(in.gpu.size());
  // The oldest event the ring holds, in the window or not: what an overflowed ring knows
  // is no older (known_from below).
  std::int64_t ring_first = std::numeric_limits<std::int64_t>::max();
  for (const gpu_activity_event& e : in.gpu) {
    if (e.end_ns < e.start_ns || e.start_ns <= 0 ||
        (e.kind != activity_kind::kernel && e.kind != activity_kind::memcpy && e.kind != activity_kind::memset &&
         e.kind != activity_kind::graph))
      continue;
    ring_first = std::min(ring_first, e.start_ns);
    if (overlaps(e.start_ns, e.end_ns)) gpu.push_back(&e);
  }
  out.host_intervals = host.size();
  out.gpu_events = gpu.size();
  // From when on the ring holds every GPU event it got (the header's "what the GPU ring
  // knows"); with no end given, its oldest event, as good as arrival in time order.
  const bool overflowed = in.gpu_overwritten > 0;
  const std::int64_t known_from = !overflowed ? std::numeric_limits<std::int64_t>::min()
                                  : in.gpu_overwritten_end_ns ? *in.gpu_overwritten_end_ns
                                                              : ring_first;
  if (overflowed) out.gpu_known_from_ns = known_from;
  // A given window whose events the ring holds whole; otherwise its GPU figures are
  // partial, and never given as whole.
  const bool covered = !given || !overflowed || known_from <= in.window_start_ns;

  // ---- the window and the GPU's busy union ----
  std::int64_t gpu_first = std::numeric_limits<std::int64_t>::max(), gpu_last = std::numeric_limits<std::int64_t>::min();
  for (const gpu_activity_event* e : gpu) {
    gpu_first = std::min(gpu_first, e->start_ns);
    gpu_last = std::max(gpu_last, e->end_ns);
  }
  if (given) {
    out.window_start_ns = in.window_start_ns;
    out.window_end_ns = in.window_end_ns;
  } else if (!host.empty()) {
    std::int64_t first = std::numeric_limits<std::int64_t>::max(), last = std::numeric_limits<std::int64_t>::min();
    for (const host_interval* h : host) {
      first = std::min(first, h->start_ns);
      last = std::max(last, h->end_ns);
    }
    if (!gpu.empty()) {
      if (overflowed) first = std::max(first, known_from);
      last = std::max(last, gpu_last);
    }
    out.window_start_ns = first;
    out.window_end_ns = std::max(first, last);
  } else if (!gpu.empty()) {
    out.window_start_ns = overflowed ? std::max(gpu_first, known_from) : gpu_first;
    out.window_end_ns = std::max(out.window_start_ns, gpu_last);
  }
  out.wall_ns = static_cast<double>(out.window_end_ns - out.window_start_ns);

  // The traced part of the window (tracing in windows), merged and in time order.
  // `traced`: the windows as the host saw them (a call inside one had every launch traced);
  // `known`: each from its first GPU record on (the header says why), for the GPU side.
  std::vector<span> traced, known;
  if (in.traced) {
    out.windowed = true;
    for (const traced_interval& w : *in.traced) {
      if (w.end_ns > w.start_ns) traced.emplace_back(w.start_ns, w.end_ns);
    }
    detail::merge_intervals(traced);
    std::vector<std::int64_t> first(traced.size(), std::numeric_limits<std::int64_t>::max());
    for (const gpu_activity_event* e : gpu) {
      auto it = std::upper_bound(traced.begin(), traced.end(), e->start_ns,
                                 [](std::int64_t t, const span& w) { return t < w.first; });
      if (it == traced.begin()) continue;
      --it;
      if (e->start_ns < it->second) {
        std::int64_t& f = first[static_cast<std::size_t>(it - traced.begin())];
        f = std::min(f, e->start_ns);
      }
    }
    for (std::size_t i = 0; i < traced.size(); ++i) {
      const std::int64_t s = std::max(first[i], out.window_start_ns), t = std::min(traced[i].second, out.window_end_ns);
      if (first[i] != std::numeric_limits<std::int64_t>::max() && t > s) known.emplace_back(s, t);
    }
    out.traced_windows = known.size();
    out.wall_ns = detail::union_length(known);
  }
  // Whether [start, end] lies whole inside one span of `spans` (sorted, disjoint).
  const auto inside = [&](const std::vector<span>& spans, std::int64_t start, std::int64_t end) {
    if (!in.traced) return true;
    auto it = std::upper_bound(spans.begin(), spans.end(), start,
                               [](std::int64_t t, const span& w) { return t < w.first; });
    if (it == spans.begin()) return false;
    --it;
    return start >= it->first && end <= it->second;
  };

  std::vector<span> busy;
  busy.reserve(gpu.size());
  for (const gpu_activity_event* e : gpu) {
    const std::int64_t s = std::max(e->start_ns, out.window_start_ns), t = std::min(e->end_ns, out.window_end_ns);
    if (t > s) busy.emplace_back(s, t);
  }
  detail::merge_intervals(busy);
  if (in.traced) {  // clipped to the traced spans: work running past a window's end is not in it
    std::vector<span> clipped;
    std::size_t w = 0;
    for (const span& b : busy) {
      while (w < known.size() && known[w].second <= b.first) ++w;
      for (std::size_t k = w; k < known.size() && known[k].first < b.second; ++k) {
        const std::int64_t s = std::max(b.first, known[k].first), t = std::min(b.second, known[k].second);
        if (t > s) clipped.emplace_back(s, t);
      }
    }
    busy = std::move(clipped);
  }
  out.busy_ns = detail::union_length(busy);
  if (given) {
    if (covered && out.wall_ns > 0) out.busy_share = out.busy_ns / out.wall_ns;
    else if (!covered) out.busy_ns = std::numeric_limits<double>::quiet_NaN();
  } else if (!gpu.empty() && out.wall_ns > 0) {
    out.busy_share = out.busy_ns / out.wall_ns;
  }

  // ---- host intervals by (node, thread), sorted by start: calls to match events to ----
  std::map<std::pair<node_id, std::uint32_t>, std::vector<const host_interval*>> calls;
  for (const host_interval* h : host) calls[{h->node, h->thread_index}].push_back(h);
  for (auto& [key, list] : calls)
    std::sort(list.begin(), list.end(), [](const host_interval* a, const host_interval* b) { return a->start_ns < b->start_ns; });

  // ---- idle gaps and the scope open during each ----
  // A sweep over the gaps' midpoints in time order with a priority queue of the host
  // intervals started so far (best first: a scope before a range, then deeper, then later);
  // an interval at the top that ended before the midpoint can cover no later one and is
  // dropped. O((gaps + H) log H).
  {
    struct candidate {
      const host_interval* h;
      bool range;
      std::size_t depth;
    };
    const auto worse = [](const candidate& a, const candidate& b) {
      if (a.range != b.range) return a.range;  // a range is worse than a scope
      if (a.depth != b.depth) return a.depth < b.depth;
      return a.h->start_ns < b.h->start_ns;
    };
    std::vector<candidate> by_start;
    by_start.reserve(host.size());
    for (const host_interval* h : host) {
      const auto it = index.find(h->node);
      by_start.push_back(candidate{h, it != index.end() && in.nodes[it->second].cross_thread,
                                   it != index.end() ? in.nodes[it->second].depth : 0});
    }
    std::sort(by_start.begin(), by_start.end(),
              [](const candidate& a, const candidate& b) { return a.h->start_ns < b.h->start_ns; });
    std::vector<candidate> heap;  // std::push_heap with `worse`: the best at the front
    std::size_t next = 0;
    std::vector<gpu_idle_gap> gaps;
    gaps.reserve(busy.size());
    std::map<node_id, gpu_idle_by_scope> by_scope;
    // In a given window the ring holds only in part, a gap before it knows everything may
    // hide an event it dropped: only the later ones are gaps for sure.
    const std::int64_t gaps_known_from = covered ? std::numeric_limits<std::int64_t>::min() : known_from;
    for (std::size_t i = 1; i < busy.size(); ++i) {  // busy is sorted: midpoints increase
      gpu_idle_gap g{busy[i - 1].second, busy[i].first - busy[i - 1].second, 0, {}};
      if (g.start_ns < gaps_known_from) continue;
      if (!inside(known, g.start_ns, busy[i].first)) continue;  // between windows: unknown, not idle
      const std::int64_t mid = g.start_ns + g.ns / 2;
      while (next < by_start.size() && by_start[next].h->start_ns <= mid) {
        heap.push_back(by_start[next++]);
        std::push_heap(heap.begin(), heap.end(), worse);
      }
      while (!heap.empty() && heap.front().h->end_ns < mid) {
        std::pop_heap(heap.begin(), heap.end(), worse);
        heap.pop_back();
      }
      if (!heap.empty()) {
        const host_interval* best = heap.front().h;
        g.open_scope = best->node;
        const auto it = index.find(best->node);
        g.open_path = it != index.end() ? in.nodes[it->second].path : std::string(best->name);
      }
      gpu_idle_by_scope& total = by_scope[g.open_scope];
      if (total.gaps++ == 0) {
        total.scope = g.open_scope;
        total.path = g.open_path;
      }
      total.ns += static_cast<double>(g.ns);
      gaps.push_back(std::move(g));
    }
    const std::size_t top = std::min(gaps.size(), gpu_time_top_gaps);
    std::partial_sort(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(top), gaps.end(),
                      [](const gpu_idle_gap& a, const gpu_idle_gap& b) {
                        return a.ns != b.ns ? a.ns > b.ns : a.start_ns < b.start_ns;
                      });
    gaps.resize(top);
    out.idle_gaps = std::move(gaps);
    for (auto& [node, total] : by_scope) out.idle_by_scope.push_back(std::move(total));
    std::sort(out.idle_by_scope.begin(), out.idle_by_scope.end(),
              [](const gpu_idle_by_scope& a, const gpu_idle_by_scope& b) { return a.ns > b.ns; });
  }

  // An account with holes: every idle figure could be a record the rings never got.
  if (!in.incomplete.empty()) {
    for (const std::string& why : in.incomplete) out.unknown_reason += (out.unknown_reason.empty() ? "" : "; ") + why;
    out.busy_ns = std::numeric_limits<double>::quiet_NaN();
    out.busy_share = std::numeric_limits<double>::quiet_NaN();
    out.idle_gaps.clear();
    out.idle_by_scope.clear();
  }

  // ---- per call: each event to its launching call, then to that call's ancestors ----
  // Each call (a host interval of the ring) -> the GPU events it launched, its subtree's included.
  std::map<const host_interval*, std::vector<const gpu_activity_event*>> per_call;
  const auto latest_started_by = [&](node_id node, std::uint32_t thread, std::int64_t t) -> const host_interval* {
    const auto it = calls.find({node, thread});
    if (it == calls.end()) return nullptr;
    const std::vector<const host_interval*>& list = it->second;
    auto after = std::upper_bound(list.begin(), list.end(), t,
                                  [](std::int64_t v, const host_interval* h) { return v < h->start_ns; });
    if (after == list.begin()) return nullptr;
    return *(after - 1);
  };
  for (const gpu_activity_event* e : gpu) {
    const host_interval* call = latest_started_by(e->node, e->thread_index, e->start_ns);
    if (call == nullptr) {
      ++out.gpu_events_unmatched;
      continue;
    }
    per_call[call].push_back(e);
    // Ancestors: the call of each enclosing scope on the same thread that contains it.
    auto it = index.find(e->node);
    std::size_t guard = 0;
    while (it != index.end() && in.nodes[it->second].parent != 0 && ++guard < 256) {
      const node_id parent = in.nodes[it->second].parent;
      const host_interval* outer = latest_started_by(parent, e->thread_index, call->start_ns);
      if (outer != nullptr && outer->end_ns >= call->end_ns) per_call[outer].push_back(e);
      it = index.find(parent);
    }
  }

  // ---- per scope ----
  // Before an overflowed GPU ring knows everything, a call's GPU work is unknown.
  const std::int64_t gpu_known_from = known_from;
  // A scope's own GPU time: the CUPTI aggregate (whole run), or with a given window its own
  // events in it: the union of its kernels plus its copies and memsets, clipped.
  struct own_time {
    double ns = 0;
    std::uint64_t kernels = 0;
  };
  std::map<node_id, own_time> in_window;
  if (given) {
    std::map<node_id, std::vector<span>> kernel_spans;
    for (const gpu_activity_event* e : gpu) {
      const std::int64_t s = std::max(e->start_ns, out.window_start_ns), t = std::min(e->end_ns, out.window_end_ns);
      own_time& o = in_window[e->node];
      if (e->kind == activity_kind::kernel) {
        ++o.kernels;
        if (t > s) kernel_spans[e->node].emplace_back(s, t);
      } else if (t > s) {
        o.ns += static_cast<double>(t - s);
      }
    }
    for (auto& [node, spans] : kernel_spans) {
      detail::merge_intervals(spans);
      in_window[node].ns += detail::union_length(spans);
    }
  }
  const auto own_gpu_ns = [&](const gpu_time_node& n) -> std::optional<own_time> {
    if (given) {
      const auto it = in_window.find(n.id);
      if (it == in_window.end()) return std::nullopt;
      return it->second;
    }
    if (n.activity == nullptr) return std::nullopt;
    own_time o;
    o.ns = static_cast<double>(n.activity->busy_ns + n.activity->memset.ns);
    for (const copy_totals& c : n.activity->memcpy) o.ns += static_cast<double>(c.ns);
    o.kernels = n.activity->kernel_count;
    return o;
  };
  double total_gpu_ns = 0;
  for (const gpu_time_node& n : in.nodes)
    if (const std::optional<own_time> o = own_gpu_ns(n)) total_gpu_ns += o->ns;
  stats_options whole;
  whole.detect_warmup = false;  // a call's GPU time is a population here, not a steady-state estimate
  std::vector<double> busy_calls, gap_calls;
  for (const gpu_time_node& n : in.nodes) {
    scope_gpu_time s;
    s.id = n.id;
    s.path = n.path;
    const std::optional<own_time> own_total = own_gpu_ns(n);
    if (!covered) {
      s.totals_known = false;
      s.gpu_ns = std::numeric_limits<double>::quiet_NaN();
    } else if (own_total) {
      s.gpu_ns = own_total->ns;
      s.kernel_count = own_total->kernels;
      if (total_gpu_ns > 0) s.share_of_gpu = s.gpu_ns / total_gpu_ns;
    }
    busy_calls.clear();
    gap_calls.clear();
    double kernels = 0, d2h = 0, max_gap = 0;
    std::vector<span> own;
    for (auto it = calls.lower_bound({n.id, 0}); it != calls.end() && it->first.first == n.id; ++it) {
      for (const host_interval* h : it->second) {
        if (h->start_ns < gpu_known_from) {
          ++out.calls_before_gpu_ring;
          continue;
        }
        if (!inside(traced, h->start_ns, h->end_ns)) {  // its launches were traced in part, or not at all
          ++out.calls_untraced;
          continue;
        }
        ++s.calls_seen;
        own.clear();
        const auto found = per_call.find(h);
        if (found != per_call.end()) {
          for (const gpu_activity_event* e : found->second) {
            own.emplace_back(e->start_ns, e->end_ns);
            if (e->kind == activity_kind::kernel) ++kernels;
            if (e->kind == activity_kind::memcpy && e->copy_kind == memcpy_kind::d2h) ++d2h;
          }
        }
        detail::merge_intervals(own);
        const double b = detail::union_length(own);
        busy_calls.push_back(b);
        double gaps = 0;
        for (std::size_t i = 1; i < own.size(); ++i) {
          const double g = static_cast<double>(own[i].first - own[i - 1].second);
          gaps += g;
          max_gap = std::max(max_gap, g);
        }
        gap_calls.push_back(gaps);
      }
    }
    if (s.calls_seen == 0 && !own_total) continue;
    if (s.calls_seen > 0) {
      const double c = static_cast<double>(s.calls_seen);
      s.busy_per_call_ns = summarize(busy_calls, whole);
      s.gaps_per_call_ns = summarize(gap_calls, whole);
      s.kernels_per_call = kernels / c;
      s.d2h_per_call = d2h / c;
      s.max_gap_ns = max_gap;
    }
    out.scopes.push_back(std::move(s));
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
