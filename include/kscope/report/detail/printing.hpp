// kscope/report/detail/printing.hpp — what the report's printers share: number and share
// formats, the placement advice line, the display order of scopes, the GPU-time and request
// sections, and the JSON pieces more than one printer writes.
#pragma once

#include "../../core/config.hpp"
#include "../data.hpp"
#include "../../core/detail/verdict_text.hpp"  // the one verdict, worded and written as JSON

#include <unordered_set>

namespace kscope {

namespace detail {

// The name the function had before it was public; tests/session_test.cpp still spells it.
using kscope::format_duration_ns;

// The median CI as "±x.x%" of the median (half the interval's width), or "" without one.
KSCOPE_DECL std::string format_ci_percent(const summary& s);

// A scope's GPU work split by device, as a JSON array (report and merged report).
KSCOPE_DECL void write_device_split_json(json_writer& w, const std::vector<device_gpu_activity>& devices);

// The path of scope `id` in a report's own scope list (graph_capture names scopes by id);
// "(unscoped)" for the root, "node N" when the report does not list it.
KSCOPE_DECL std::string scope_path_of(const std::vector<scope_report>& scopes, node_id id);

// One text line per scope that replayed CUDA graphs built elsewhere:
// "graph kernels built in: prefill/attention (40 kernels, 1.20 ms), decode (3 kernels, 20.0 us)".
KSCOPE_DECL std::string graph_capture_text(const std::vector<graph_capture_origin>& origins,
                                      const std::vector<scope_report>& scopes);

// One line on a scope's CUDA-graph replays when some were traced as one record: "graph
// replays: 618 (60 traced node by node, 558 as one record); scaled: 4200 kernels, 12.3 ms
// of kernel time, 11.9 ms busy".
KSCOPE_DECL std::string graph_replays_text(const node_gpu_activity& a);

// graph_capture as JSON: [{"captured_in": path, "kernels": n, "ns": t, ...}].
KSCOPE_DECL void write_graph_capture_json(json_writer& w, const std::vector<graph_capture_origin>& origins,
                                     const std::vector<scope_report>& scopes);

// A fraction as a percentage with two significant digits or more: "38210%", "62%",
// "3.5%", "0.42%" (what the roofline advice and the impossible line print; no space, so
// wrapped text never puts the number and its "%" on two lines).
KSCOPE_DECL std::string roofline_percent_text(double fraction);

// Whether a placement must not be printed as true: flagged by the session, or (in a
// report built by hand) above the roof by more than roofline_impossible_above.
KSCOPE_DECL bool placement_impossible(const scope_report& s);

// Whether the placement's roof is unknown (scope_report::roofline_roof_unknown): above the
// untagged roof, within a faster one the evidence did not name.
KSCOPE_DECL bool placement_roof_unknown(const scope_report& s);

// Whether the placement may be printed with a limiter and advice: placed, possible, its
// roof known.
KSCOPE_DECL bool placement_has_limiter(const scope_report& s);

// The line under the roofline table for a placed scope: why it is impossible, else the
// session's evidence-based advice, else the placement's hint().
KSCOPE_DECL std::string placement_advice(const scope_report& s);

KSCOPE_DECL void write_summary_json(json_writer& w, const summary& s);

// A scope's own GPU time: the busy union of its kernels plus its copies and memsets
// (CUPTI, exclusive of its children); 0 without activity.
KSCOPE_DECL double own_gpu_ns(const scope_report& s);

// The sort actually used for `requested` (automatic decided, see report_sort).
KSCOPE_DECL report_sort resolve_sort(const std::vector<scope_report>& scopes, report_sort requested);

// The order in which text() lists `scopes` (indices): depth-first as recorded, siblings
// sorted by the key of `sort` (largest first; ties keep their recorded order). Scopes
// whose parent is not listed stay where they are, as top-level rows.
KSCOPE_DECL std::vector<std::size_t> display_order(const std::vector<scope_report>& scopes, report_sort sort);

// "34.2%" or "-".
KSCOPE_DECL std::string share_text(double fraction);

// What the text and the HTML "GPU time" sections both say: the busy headline (finite
// busy_share), what the account covered, the scopes that waited for the GPU (longest first).
KSCOPE_DECL std::string gpu_busy_text(const gpu_time_report& t);
KSCOPE_DECL std::string gpu_time_covered_text(const gpu_time_report& t);
KSCOPE_DECL std::vector<const scope_report*> scopes_waiting(const std::vector<scope_report>& scopes);

// A launch's grid or block: "128", "64x2", "8x8x4".
KSCOPE_DECL std::string dims_text(const std::array<std::int32_t, 3>& d);

// The "GPU time" section of text(): the session's busy share, the longest idle gaps with
// the scope the host was in, and per scope its GPU total, share, kernels and per-call
// busy time and gaps; rows in `order`. `window` (a window report's, else null): the totals
// are then the window's own events, and an unknown busy share is given its reason.
KSCOPE_DECL std::string gpu_time_text(const gpu_time_report& t, const std::vector<scope_report>& scopes,
                                 const std::vector<std::size_t>& order, const report_window* window = nullptr);

KSCOPE_DECL void write_gpu_time_json(json_writer& w, const gpu_time_report& t);

// The "Requests" section: latency distributions of the cross-thread ranges ("request",
// "ttft", "queue", ...), from each range's host samples (every call, no warm-up removed:
// the session summarizes ranges whole). "" when there is none.
KSCOPE_DECL std::string requests_text(const std::vector<scope_report>& scopes);

KSCOPE_DECL void write_requests_json(json_writer& w, const std::vector<scope_report>& scopes);

// The feature sections (report/section.hpp) every printer prints: those with a valid key,
// the first of each key, in the order added, with what their key() and heading() returned.
// `problems` gets one line for each left out (a null pointer, an invalid or repeated key, a
// key() or heading() that threw), which the printers print as warnings.
struct feature_section_view {
  const report_section* section = nullptr;
  std::string key;
  std::string heading;  // one line, printable
};
KSCOPE_DECL std::vector<feature_section_view> printed_feature_sections(const session_report& r,
                                                               std::vector<std::string>& problems);

// A section's text() (its lines, each ending in '\n'), or the line saying what it threw.
KSCOPE_DECL std::string feature_section_body(const feature_section_view& v, const session_report& r);

// The feature sections' part of text(): each as "section KEY: HEADING", a rule and its
// lines, after an empty line.
KSCOPE_DECL std::string feature_sections_text(const std::vector<feature_section_view>& views,
                                              const session_report& r);

// json()'s "sections" array: {"key", "heading", "data"} each; data null with an "error"
// when the section's json() threw or is not one valid JSON value.
KSCOPE_DECL void write_feature_sections_json(json_writer& w, const std::vector<feature_section_view>& views);


#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string format_ci_percent(const summary& s) {
  if (!std::isfinite(s.median_ci.lo) || !std::isfinite(s.median_ci.hi) || s.median == 0) return "";
  const double half = 0.5 * (s.median_ci.hi - s.median_ci.lo) / std::fabs(s.median) * 100.0;
  return "±" + format_fixed(half, half < 0.095 ? 2 : 1) + "%";
}

KSCOPE_DECL void write_device_split_json(json_writer& w, const std::vector<device_gpu_activity>& devices) {
  w.begin_array();
  for (const device_gpu_activity& d : devices) {
    w.begin_object();
    w.member("device", static_cast<unsigned long long>(d.device));
    w.member("kernel_count", static_cast<unsigned long long>(d.kernel_count));
    w.member("kernel_ns", static_cast<long long>(d.kernel_ns));
    w.member("busy_ns", static_cast<long long>(d.busy_ns));
    w.member("comm_kernel_count", static_cast<unsigned long long>(d.comm_kernel_count));
    w.member("comm_ns", static_cast<long long>(d.comm_ns));
    w.end_object();
  }
  w.end_array();
}

KSCOPE_DECL std::string scope_path_of(const std::vector<scope_report>& scopes, node_id id) {
  for (const scope_report& s : scopes)
    if (s.id == id) return s.path;
  return id == unscoped_node ? std::string(unscoped_node_name) : "node " + std::to_string(id);
}

KSCOPE_DECL std::string graph_capture_text(const std::vector<graph_capture_origin>& origins,
                                      const std::vector<scope_report>& scopes) {
  std::string line = "graph kernels built in: ";
  for (std::size_t i = 0; i < origins.size(); ++i) {
    const graph_capture_origin& o = origins[i];
    if (i > 0) line += ", ";
    line += scope_path_of(scopes, o.captured_in) + " (";
    if (o.kernel_count > 0 || o.copy_count == 0) {
      line += std::to_string(o.kernel_count) + (o.kernel_count == 1 ? " kernel, " : " kernels, ") +
              format_duration_ns(static_cast<double>(o.kernel_ns));
    }
    if (o.copy_count > 0) {
      line += std::string(o.kernel_count > 0 ? "; " : "") + std::to_string(o.copy_count) + " copies/memsets, " +
              format_duration_ns(static_cast<double>(o.copy_ns));
    }
    line += ")";
  }
  return line;
}

KSCOPE_DECL std::string graph_replays_text(const node_gpu_activity& a) {
  std::string out = "graph replays: " + std::to_string(a.graph_replays) + " (" +
                    std::to_string(a.graph_replays_traced) + " traced node by node, " +
                    std::to_string(a.graph_replays - a.graph_replays_traced) + " as one record)";
  if (a.scaled_kernel_count > 0 || a.scaled_kernel_ns > 0)
    out += "; scaled from the node-level replays: " + std::to_string(a.scaled_kernel_count) + " kernels, " +
           format_duration_ns(static_cast<double>(a.scaled_kernel_ns)) + " of kernel time";
  if (a.graph_replays_unsampled > 0)
    out += "; " + std::to_string(a.graph_replays_unsampled) +
           " replays of graphs never traced node by node: their spans count as busy, their kernels are unknown";
  return out;
}

KSCOPE_DECL void write_graph_capture_json(json_writer& w, const std::vector<graph_capture_origin>& origins,
                                     const std::vector<scope_report>& scopes) {
  w.begin_array();
  for (const graph_capture_origin& o : origins) {
    w.begin_object();
    w.member("captured_in", scope_path_of(scopes, o.captured_in));
    w.member("captured_in_id", static_cast<unsigned long long>(o.captured_in));
    w.member("kernels", static_cast<unsigned long long>(o.kernel_count));
    w.member("ns", static_cast<long long>(o.kernel_ns));
    w.member("copies", static_cast<unsigned long long>(o.copy_count));
    w.member("copy_ns", static_cast<long long>(o.copy_ns));
    w.end_object();
  }
  w.end_array();
}

KSCOPE_DECL std::string roofline_percent_text(double fraction) {
  const double v = 100 * fraction;
  return format_fixed(v, std::fabs(v) >= 10 ? 0 : std::fabs(v) >= 1 ? 1 : 2) + "%";
}

KSCOPE_DECL bool placement_impossible(const scope_report& s) {
  return s.roofline && s.roofline_roof_unknown.empty() &&
         (s.roofline_impossible || s.roofline->fraction_of_roof > roofline_impossible_above);
}

KSCOPE_DECL bool placement_roof_unknown(const scope_report& s) {
  return s.roofline && !s.roofline_roof_unknown.empty();
}

KSCOPE_DECL bool placement_has_limiter(const scope_report& s) {
  return s.roofline && !placement_impossible(s) && !placement_roof_unknown(s);
}

KSCOPE_DECL std::string placement_advice(const scope_report& s) {
  const placement& p = *s.roofline;
  if (placement_roof_unknown(s)) return s.roofline_roof_unknown;
  if (placement_impossible(s)) {
    std::string line = "impossible: " + roofline_percent_text(p.fraction_of_roof) +
                       " of the theoretical roof — the time measured";
    if (std::isfinite(s.roofline_time_ns)) {
      line += " (" + format_duration_ns(s.roofline_time_ns) + " per call";
      if (!s.roofline_time_source.empty()) line += ", " + s.roofline_time_source;
      line += ")";
    }
    line += " is shorter than the work can take";
    // work / roof = time * (achieved / roof): the least time the declared work needs.
    if (std::isfinite(s.roofline_time_ns))
      line += " (" + format_duration_ns(s.roofline_time_ns * p.fraction_of_roof) + " at the roof)";
    line += "; " + (s.roofline_impossible_reason.empty()
                        ? std::string("the time is wrong (events on another stream than the kernels, or a host time "
                                      "that ends before the kernels do) or the declared work is more than what ran")
                        : s.roofline_impossible_reason);
    return line;
  }
  return s.advice.empty() ? std::string(hint(p)) : s.advice;
}

KSCOPE_DECL void write_summary_json(json_writer& w, const summary& s) {
  w.begin_object();
  w.member("n", static_cast<unsigned long long>(s.n));
  w.member("warmup", static_cast<unsigned long long>(s.warmup));
  w.member("median", s.median).member("mean", s.mean).member("stddev", s.stddev);
  w.member("min", s.min).member("max", s.max).member("mad", s.mad);
  w.member("p90", s.p90).member("p99", s.p99);
  w.key("median_ci").begin_object();
  w.member("lo", s.median_ci.lo).member("hi", s.median_ci.hi).member("level", s.median_ci.level);
  w.end_object();
  w.member("outliers", static_cast<unsigned long long>(s.outliers));
  w.member("steady", s.steady);
  w.end_object();
}

KSCOPE_DECL double own_gpu_ns(const scope_report& s) {
  if (!s.gpu_activity) return 0;
  const node_gpu_activity& a = *s.gpu_activity;
  double ns = static_cast<double>(a.busy_ns + a.memset.ns);
  for (const copy_totals& c : a.memcpy) ns += static_cast<double>(c.ns);
  return ns;
}

KSCOPE_DECL report_sort resolve_sort(const std::vector<scope_report>& scopes, report_sort requested) {
  if (requested != report_sort::automatic) return requested;
  double gpu = 0, host = 0;
  for (const scope_report& s : scopes) {
    gpu += own_gpu_ns(s);
    if (s.depth == 1 && !s.cross_thread && std::isfinite(s.host_inclusive_ns)) host += s.host_inclusive_ns;
  }
  return gpu > host ? report_sort::gpu : report_sort::host;
}

KSCOPE_DECL std::vector<std::size_t> display_order(const std::vector<scope_report>& scopes, report_sort sort) {
  std::vector<std::size_t> order;
  order.reserve(scopes.size());
  sort = resolve_sort(scopes, sort);
  if (sort == report_sort::recorded) {
    for (std::size_t i = 0; i < scopes.size(); ++i) order.push_back(i);
    return order;
  }
  // Subtree ends (scopes are depth-first: a subtree is the run of deeper rows after it).
  const std::size_t n = scopes.size();
  std::vector<std::size_t> end(n);
  std::vector<double> key(n, 0);
  for (std::size_t i = n; i-- > 0;) {
    std::size_t j = i + 1;
    double gpu = own_gpu_ns(scopes[i]);
    while (j < n && scopes[j].depth > scopes[i].depth) {
      if (scopes[j].depth == scopes[i].depth + 1) gpu += key[j];  // children's subtrees (GPU key)
      j = end[j];
    }
    end[i] = j;
    // The loop runs backwards, so the children's keys (subtree sums) are final here.
    key[i] = sort == report_sort::gpu ? gpu : (std::isfinite(scopes[i].host_inclusive_ns) ? scopes[i].host_inclusive_ns : 0);
  }
  const auto emit = [&](auto&& self, std::size_t first, std::size_t last) -> void {
    std::vector<std::size_t> siblings;
    for (std::size_t i = first; i < last; i = end[i]) siblings.push_back(i);
    std::stable_sort(siblings.begin(), siblings.end(), [&](std::size_t a, std::size_t b) { return key[a] > key[b]; });
    for (std::size_t i : siblings) {
      order.push_back(i);
      self(self, i + 1, end[i]);
    }
  };
  emit(emit, 0, n);
  return order;
}

KSCOPE_DECL std::string share_text(double fraction) {
  return std::isfinite(fraction) ? format_fixed(100 * fraction, 1) + "%" : std::string("-");
}

KSCOPE_DECL std::string gpu_busy_text(const gpu_time_report& t) {
  return "GPU busy " + share_text(t.busy_share) + (t.windowed ? " of the traced time (" : " of the wall time (") +
         format_duration_ns(t.busy_ns) + " of " + format_duration_ns(t.wall_ns) +
         ", union of all kernels, copies and memsets" +
         (t.windowed ? ", in " + std::to_string(t.traced_windows) +
                           (t.traced_windows == 1 ? " traced window" : " traced windows") + "; between them unknown)"
                     : ")");
}

KSCOPE_DECL std::string gpu_time_covered_text(const gpu_time_report& t) {
  std::string covered = "covered: " + std::to_string(t.host_intervals) + " recent host intervals";
  if (t.host_overwritten) covered += " (" + std::to_string(t.host_overwritten) + " older overwritten)";
  covered += " and " + std::to_string(t.gpu_events) + " recent GPU events";
  if (t.gpu_overwritten) covered += " (" + std::to_string(t.gpu_overwritten) + " older overwritten)";
  covered += ", window " + format_duration_ns(t.wall_ns);
  if (t.gpu_events_unmatched)
    covered += "; " + std::to_string(t.gpu_events_unmatched) + " GPU events had no call of their scope in the host ring";
  if (t.calls_before_gpu_ring)
    covered += "; " + std::to_string(t.calls_before_gpu_ring) +
               " calls started before the GPU event ring held every event and are not in the per-call figures";
  return covered;
}

KSCOPE_DECL std::vector<const scope_report*> scopes_waiting(const std::vector<scope_report>& scopes) {
  std::vector<const scope_report*> waiting;
  for (const scope_report& s : scopes)
    if (s.gpu_activity && s.gpu_activity->host_sync.count > 0) waiting.push_back(&s);
  std::stable_sort(waiting.begin(), waiting.end(), [](const scope_report* a, const scope_report* b) {
    return a->gpu_activity->host_sync.ns > b->gpu_activity->host_sync.ns;
  });
  return waiting;
}

KSCOPE_DECL std::string dims_text(const std::array<std::int32_t, 3>& d) {
  std::string t = std::to_string(d[0]);
  if (d[1] > 1 || d[2] > 1) t += "x" + std::to_string(d[1]);
  if (d[2] > 1) t += "x" + std::to_string(d[2]);
  return t;
}

KSCOPE_DECL std::string gpu_time_text(const gpu_time_report& t, const std::vector<scope_report>& scopes,
                                 const std::vector<std::size_t>& order, const report_window* window) {
  std::string out = "\n";
  if (std::isfinite(t.busy_share)) {
    out += wrap(gpu_busy_text(t), 98);
  } else if (!t.unknown_reason.empty()) {
    out += wrap("GPU busy: unknown (" + printable_name(t.unknown_reason) +
                    "); idle time could be records the account never got, so no idle gap is listed",
                98);
  } else if (window != nullptr && !window->gpu_busy_unavailable.empty()) {
    out += wrap("GPU busy: - (" + printable_name(window->gpu_busy_unavailable) + ")", 98);
  } else {
    out += "GPU busy: - (no GPU events in CUPTI's recent-event ring)\n";
  }
  if (!t.idle_gaps.empty()) {
    std::string gaps = "longest GPU idle gaps (scope open on the host): ";
    for (std::size_t i = 0; i < t.idle_gaps.size(); ++i) {
      const gpu_idle_gap& g = t.idle_gaps[i];
      gaps += (i ? ", " : "") + format_duration_ns(static_cast<double>(g.ns)) + " in " +
              (g.open_path.empty() ? std::string("(no scope)") : printable_name(g.open_path));
    }
    out += wrap(gaps, 98);
  }
  if (!t.idle_by_scope.empty() && t.busy_ns < t.wall_ns) {
    std::string by = "GPU idle by the scope open on the host: ";
    for (std::size_t i = 0; i < t.idle_by_scope.size() && i < 5; ++i) {
      const gpu_idle_by_scope& g = t.idle_by_scope[i];
      by += (i ? ", " : "") + (g.path.empty() ? std::string("(no scope)") : printable_name(g.path)) + " " +
            format_duration_ns(g.ns) + " (" + std::to_string(g.gaps) + (g.gaps == 1 ? " gap)" : " gaps)");
    }
    if (t.idle_by_scope.size() > 5) by += ", " + std::to_string(t.idle_by_scope.size() - 5) + " more in the JSON";
    out += wrap(by, 98);
  }
  // Host waits (CUPTI synchronization records), the scopes that waited longest.
  const std::vector<const scope_report*> waiting = scopes_waiting(scopes);
  if (!waiting.empty()) {
    std::string line = "host waits for the GPU (stream/event/device synchronizes): ";
    for (std::size_t i = 0; i < waiting.size() && i < 5; ++i) {
      const scope_report& s = *waiting[i];
      const host_sync_totals& h = s.gpu_activity->host_sync;
      line += (i ? ", " : "") + printable_name(s.path) + " " + format_duration_ns(static_cast<double>(h.ns)) + " in " +
              std::to_string(h.count) + (h.count == 1 ? " call" : " calls");
      if (s.calls > 0 && !t.windowed)  // traced in windows: the waits are the windows' only
        line += " (" + format_general(static_cast<double>(h.count) / static_cast<double>(s.calls), 3) + " per scope call)";
    }
    if (waiting.size() > 5) line += ", " + std::to_string(waiting.size() - 5) + " more in the JSON";
    out += wrap(line, 98);
  }
  // name 28 | GPU total 10 | %GPU 7 | kernels 9 | calls 8 | busy/call 10 | gaps/call 10 | kern/call 10
  out += "\n" + fit("GPU time (CUPTI)", 28) + fit("GPU total", 10, true) + fit("%GPU", 7, true) +
         fit("kernels", 9, true) + fit("calls", 8, true) + fit("busy/call", 10, true) + fit("gaps/call", 10, true) +
         fit("kern/call", 10, true) + "\n";
  out += std::string(92, '-') + "\n";
  bool any_unknown = false;
  for (std::size_t i : order) {
    const scope_report& s = scopes[i];
    const scope_gpu_time* g = t.find(s.id);
    if (g == nullptr || (g->gpu_ns <= 0 && !(g->busy_per_call_ns.n > 0 && g->busy_per_call_ns.max > 0))) continue;
    std::string name(indent_width(s.depth), ' ');
    name += printable_name(s.name);
    any_unknown = any_unknown || !g->totals_known;
    out += fit(name, 28) + fit(g->totals_known ? format_duration_ns(g->gpu_ns) : "-", 10, true) +
           fit(share_text(g->share_of_gpu), 7, true) +
           fit(g->totals_known ? std::to_string(g->kernel_count) : "-", 9, true) +
           fit(std::to_string(g->calls_seen), 8, true) +
           fit(g->calls_seen ? format_duration_ns(g->busy_per_call_ns.median) : "-", 10, true) +
           fit(g->calls_seen ? format_duration_ns(g->gaps_per_call_ns.median) : "-", 10, true) +
           fit(g->calls_seen ? format_general(g->kernels_per_call, 3) : "-", 10, true) + "\n";
  }
  std::string legend = std::string("GPU total: the scope's own kernel busy time plus its copies and memsets (") +
                       (window != nullptr ? "its events in this window" : "all records") +
                       "); %GPU: of the sum over scopes";
  if (any_unknown) legend += " (-: unknown, the GPU event ring lost some of this window's events)";
  legend += "; calls: calls in the host ring; busy/call, gaps/call (medians), kern/call (mean): from those calls, "
            "children's GPU work included; gaps: time between the call's GPU work";
  out += wrap(legend + "; " + gpu_time_covered_text(t), 98);
  return out;
}

KSCOPE_DECL void write_gpu_time_json(json_writer& w, const gpu_time_report& t) {
  w.begin_object();
  w.member("window_start_ns", static_cast<long long>(t.window_start_ns));
  w.member("window_end_ns", static_cast<long long>(t.window_end_ns));
  w.member("wall_ns", t.wall_ns).member("busy_ns", t.busy_ns).member("busy_share", t.busy_share);
  if (!t.unknown_reason.empty()) w.member("unknown_reason", t.unknown_reason);
  w.member("host_intervals", static_cast<unsigned long long>(t.host_intervals));
  w.member("host_intervals_overwritten", static_cast<unsigned long long>(t.host_overwritten));
  w.member("gpu_events", static_cast<unsigned long long>(t.gpu_events));
  w.member("gpu_events_overwritten", static_cast<unsigned long long>(t.gpu_overwritten));
  w.member("gpu_known_from_ns", static_cast<long long>(t.gpu_known_from_ns));
  w.member("gpu_events_unmatched", static_cast<unsigned long long>(t.gpu_events_unmatched));
  w.member("calls_before_gpu_ring", static_cast<unsigned long long>(t.calls_before_gpu_ring));
  w.key("idle_gaps").begin_array();
  for (const gpu_idle_gap& g : t.idle_gaps) {
    w.begin_object();
    w.member("start_ns", static_cast<long long>(g.start_ns)).member("ns", static_cast<long long>(g.ns));
    w.member("open_scope", g.open_path).member("open_scope_id", static_cast<unsigned long long>(g.open_scope));
    w.end_object();
  }
  w.end_array();
  w.key("idle_by_scope").begin_array();
  for (const gpu_idle_by_scope& g : t.idle_by_scope) {
    w.begin_object();
    w.member("scope", g.path).member("scope_id", static_cast<unsigned long long>(g.scope));
    w.member("ns", g.ns).member("gaps", static_cast<unsigned long long>(g.gaps));
    w.end_object();
  }
  w.end_array();
  w.key("scopes").begin_array();
  for (const scope_gpu_time& s : t.scopes) {
    w.begin_object();
    w.member("id", static_cast<unsigned long long>(s.id)).member("path", s.path);
    w.member("gpu_ns", s.gpu_ns).member("share_of_gpu", s.share_of_gpu);
    w.key("kernel_count");  // null: unknown (totals_known), never a count that may be short
    if (s.totals_known) w.value(static_cast<unsigned long long>(s.kernel_count)); else w.value(nullptr);
    w.member("calls_seen", static_cast<unsigned long long>(s.calls_seen));
    w.key("busy_per_call_ns");
    if (s.calls_seen) write_summary_json(w, s.busy_per_call_ns); else w.value(nullptr);
    w.key("gaps_per_call_ns");
    if (s.calls_seen) write_summary_json(w, s.gaps_per_call_ns); else w.value(nullptr);
    w.member("kernels_per_call", s.kernels_per_call).member("d2h_per_call", s.d2h_per_call);
    w.member("max_gap_ns", s.max_gap_ns);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

KSCOPE_DECL std::string requests_text(const std::vector<scope_report>& scopes) {
  std::string rows;
  for (const scope_report& s : scopes) {
    if (!s.cross_thread || s.host_ns.n == 0) continue;
    const std::string ci = format_ci_percent(s.host_ns);
    rows += fit(printable_name(s.path), 30) + fit(std::to_string(s.calls) + (s.samples_capped ? "*" : ""), 8, true) +
            fit(format_duration_ns(s.host_ns.median), 10, true) + " " + fit(ci, 7) +
            fit(format_duration_ns(s.host_ns.p90), 10, true) + fit(format_duration_ns(s.host_ns.p99), 10, true) +
            fit(format_duration_ns(s.host_ns.mean), 10, true) + fit(format_duration_ns(s.host_ns.max), 10, true) +
            "\n";
  }
  if (rows.empty()) return {};
  std::string out = "\n" + fit("Requests (cross-thread ranges)", 30) + fit("count", 8, true) + fit("p50", 10, true) +
                    " " + fit("CI95", 7) + fit("p90", 10, true) + fit("p99", 10, true) + fit("mean", 10, true) +
                    fit("max", 10, true) + "\n";
  out += std::string(95, '-') + "\n" + rows;
  out += wrap("start-to-end time of each range instance (any threads); p50 with the half-width of its 95% interval; "
              "p90, p99: type 7 percentiles; *: from a uniform sample of the instances",
              98);
  return out;
}

KSCOPE_DECL void write_requests_json(json_writer& w, const std::vector<scope_report>& scopes) {
  w.begin_array();
  for (const scope_report& s : scopes) {
    if (!s.cross_thread || s.host_ns.n == 0) continue;
    w.begin_object();
    w.member("id", static_cast<unsigned long long>(s.id)).member("path", s.path);
    w.member("count", static_cast<unsigned long long>(s.calls));
    w.member("samples", static_cast<unsigned long long>(s.host_ns.n));
    w.member("p50_ns", s.host_ns.median);
    w.member("p50_ci_lo_ns", s.host_ns.median_ci.lo).member("p50_ci_hi_ns", s.host_ns.median_ci.hi);
    w.member("p90_ns", s.host_ns.p90).member("p99_ns", s.host_ns.p99);
    w.member("mean_ns", s.host_ns.mean).member("max_ns", s.host_ns.max);
    w.end_object();
  }
  w.end_array();
}
KSCOPE_DECL std::vector<feature_section_view> printed_feature_sections(const session_report& r,
                                                               std::vector<std::string>& problems) {
  std::vector<feature_section_view> views;
  std::unordered_set<std::string> keys;
  for (std::size_t i = 0; i < r.sections.size(); ++i) {
    const report_section* section = r.sections[i].get();
    const std::string which = "report section " + std::to_string(i + 1);
    if (section == nullptr) {
      problems.push_back(which + " is empty (a null pointer): not printed");
      continue;
    }
    feature_section_view v;
    v.section = section;
    try {
      v.key = section->key();
      v.heading = section->heading();
    } catch (const std::exception& e) {
      problems.push_back(which + " could not say its key or heading (" + printable_name(e.what()) + "): not printed");
      continue;
    } catch (...) {
      problems.push_back(which + " could not say its key or heading: not printed");
      continue;
    }
    if (!valid_report_section_key(v.key)) {
      problems.push_back(which + " has the key \"" + printable_name(v.key) +
                         "\", not a valid one (1-64 of a-z 0-9 _ -, not a name of the report's own sections): "
                         "not printed");
      continue;
    }
    if (!keys.insert(v.key).second) {
      problems.push_back(which + " repeats the key \"" + v.key + "\" of an earlier one: not printed");
      continue;
    }
    for (char& c : v.heading)
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    v.heading = printable_name(v.heading.empty() ? v.key : v.heading);
    views.push_back(std::move(v));
  }
  return views;
}

KSCOPE_DECL std::string feature_section_body(const feature_section_view& v, const session_report& r) {
  std::string body;
  try {
    body = v.section->text(r);
  } catch (const std::exception& e) {
    return "(this section could not be printed: " + printable_name(e.what()) + ")\n";
  } catch (...) {
    return "(this section could not be printed)\n";
  }
  if (!body.empty() && body.back() != '\n') body += '\n';
  return body;
}

KSCOPE_DECL std::string feature_sections_text(const std::vector<feature_section_view>& views,
                                              const session_report& r) {
  std::string out;
  for (const feature_section_view& v : views) {
    out += "\nsection " + v.key + ": " + v.heading + "\n";
    out += std::string(98, '-') + "\n";
    // Its lines indented: nothing a section prints can start a line that reads as another
    // section of the report (sections_of_text takes no indented line for a section's start).
    const std::string body = feature_section_body(v, r);
    for (std::size_t at = 0; at < body.size();) {
      const std::size_t end = body.find('\n', at);
      if (end != at) out += "  ";
      out += body.substr(at, end + 1 - at);
      at = end + 1;
    }
  }
  return out;
}

KSCOPE_DECL void write_feature_sections_json(json_writer& w, const std::vector<feature_section_view>& views) {
  w.begin_array();
  for (const feature_section_view& v : views) {
    w.begin_object();
    w.member("key", v.key);
    w.member("heading", v.heading);
    std::string error;
    json_parse_result parsed;
    try {
      // The entry nests the data three levels down: the whole file stays within the depth
      // a report reader takes.
      json_limits limits;
      limits.max_depth = json_limits::default_max_depth - 3;
      parsed = parse_json(v.section->json(), limits);
      if (!parsed.ok()) error = "its json() is not one valid JSON value: " + parsed.error;
    } catch (const std::exception& e) {
      error = std::string("its json() threw: ") + e.what();
    } catch (...) {
      error = "its json() threw";
    }
    w.key("data");
    if (error.empty()) write_json_value(w, parsed.value, json_whole_numbers::as_integer); else w.value(nullptr);
    if (!error.empty()) w.member("error", error);
    w.end_object();
  }
  w.end_array();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

}  // namespace kscope
