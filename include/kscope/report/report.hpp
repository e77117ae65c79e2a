// kscope/report/report.hpp — what a session reports, as data, text and JSON.
//
// Pure C++: a report is plain values (the session fills them), so it can be built by
// hand in tests, compared, and formatted without CUDA. The text form is an indented
// call-path tree that fits a 100-column terminal; the JSON form follows the versioned
// schema in docs/report_schema.md ("kscope.report/1").
//
//   auto r = kscope::session::global().report();
//   std::fputs(r.text().c_str(), stdout);
//   r.write_json("run.json");
#pragma once

#include "../activity/results.hpp"  // the result types only, not the attribution machinery
#include "../core/config.hpp"
#include "../core/detail/atomic_file.hpp"  // write_json/write_html: all or nothing
#include "../core/detail/csv.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"  // every number printed with '.', whatever the C locale
#include "../core/detail/text_escape.hpp"    // user strings made safe for a terminal
#include "../scope/detail/thread_state.hpp"
#include "../core/detail/text_layout.hpp"
#include "../serving/gpu_time.hpp"
#include "plot.hpp"
#include "../pm_sampling/report.hpp"
#include "../counters/report.hpp"
#include "../core/roofline.hpp"
#include "../core/stats.hpp"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// One distinct value of a user tag on a scope, with how many instances carried it.
struct tag_count {
  std::string key;
  std::string value;
  std::uint64_t count = 0;
};

// A placement whose fraction_of_roof exceeds this is impossible: no code beats the
// theoretical roof, and 10 % covers what is not exact in a placement (the rated clock,
// boost above it, the time's own noise), so anything beyond it is a wrong time or a wrong
// declared work, never a fast kernel.
//   if (p.fraction_of_roof > kscope::roofline_impossible_above) { /* do not advise */ }
inline constexpr double roofline_impossible_above = 1.1;

// The results for one node of the call-path tree (one (parent, name) pair).
struct scope_report {
  node_id id = 0;
  node_id parent = 0;
  std::string name;
  std::string path;          // "request/decode/attention"
  std::size_t depth = 0;     // 1 for a top-level scope
  bool cross_thread = false; // a start/end range, not nested on one thread's stack
  std::uint64_t calls = 0;

  summary host_ns{};         // per-call host (wall) time, nanoseconds
  double host_inclusive_ns = 0;  // sum over all calls
  double host_exclusive_ns = 0;  // inclusive minus nested children's inclusive time
  double share_of_parent = std::nan("");  // inclusive / parent's inclusive

  std::uint64_t gpu_calls = 0;   // calls that had a stream and were timed with events
  summary gpu_ns{};              // per-call GPU time between the scope's two events
  double gpu_total_ns = 0;

  work declared{};               // declared work summed over all calls
  std::uint64_t work_calls = 0;  // calls that declared work

  // Roofline placement of the median call: declared work per call over the GPU median
  // (the host median when the scope had no stream), against the roof named by
  // `roof` (the "dtype" tag picks it; fp32 plain cores otherwise). Empty when no work
  // was declared or no peaks are known.
  std::optional<placement> roofline;
  std::string roof;                         // "bf16 tensor", "fp32 plain"
  interval flops_per_s_ci{std::nan(""), std::nan(""), 0.95};  // from the time CI
  double fraction_of_measured_roof = std::nan("");           // when measured peaks are set
  // Which time per call the placement used, and its value: "events" (the median between
  // the scope's CUDA events), "host" (the host median: the scope had no stream), or
  // "kernels (CUPTI)" (the scope's own time contradicted its kernels' GPU time, see
  // gpu_time_disagreement, so their busy time per call was used). "" when not placed.
  std::string roofline_time_source;
  double roofline_time_ns = std::nan("");
  // A placement above the theoretical roof by more than roofline_impossible_above cannot
  // be true: it carries the likely cause and is printed without limiter or advice.
  bool roofline_impossible = false;
  std::string roofline_impossible_reason;
  // What to try next, naming the measurements it rests on (the session fills it from the
  // scope's kernel timeline, session/detail/advice.hpp). Empty: printers fall back to
  // the evidence-free hint() of the placement.
  std::string advice;
  // Why the scope's own time was not trusted as its GPU time: its kernels (CUPTI) ran
  // longer per call than its events (or, for a scope with declared work and no stream,
  // its host time) say; both numbers and the kernels' streams. "" when they agree.
  std::string gpu_time_disagreement;

  // Kernels, copies and memsets CUPTI attributed to this node (launched while it was the
  // innermost scope on the launching thread; children's work is theirs). Empty when
  // CUPTI was not collecting or the node launched nothing.
  std::optional<node_gpu_activity> gpu_activity;

  std::size_t samples_kept = 0;  // host samples held (<= the session's sample cap)
  bool samples_capped = false;   // true once the reservoir replaced samples

  std::vector<tag_count> tags;
  // Per-scope hardware counters (session::enable_counters): calls profiled with kernel
  // replay are counted here and in no timing statistic.
  std::uint64_t profiled_calls = 0;
  std::optional<scope_counter_report> counters;
};

// Where and when the numbers were taken: printed at the top of every report.
struct report_context {
  std::string kscope_version = KSCOPE_VERSION_STRING;
  std::string host_name;
  std::string timestamp_utc;   // ISO 8601
  long long process_id = 0;
  bool cuda_compiled = KSCOPE_HAS_CUDA != 0;
  std::vector<std::string> devices;  // one line per device: name, arch, SMs, clocks, memory, versions
  std::string devices_json;          // JSON array of device objects (empty: none)
  std::string no_device_reason;      // why there is no GPU block, when there is none
  std::vector<std::string> roofs;    // the peaks the roofline placements use, one line each
  std::vector<roof_line> roof_lines; // the same roofs for the roofline picture
  std::string peaks_json;            // JSON array: theoretical peaks of every device (empty: none)
  int rank = -1;                     // the process's rank (rank.hpp), -1 when not known
};

// How text() orders the scope table: siblings stay under their parent, sorted by their
// total host time, by their GPU time (CUPTI busy time of the scope and its children), or
// in the order they were first seen. `automatic`: by GPU time when the scopes' GPU time
// adds up to more than the top-level scopes' host time (a GPU-bound program), else by host.
//   r.sort = kscope::report_sort::gpu;
enum class report_sort : std::uint8_t { automatic, host, gpu, recorded };

struct session_report {
  report_context context;
  std::vector<scope_report> scopes;  // depth-first, children after their parent
  std::vector<std::string> warnings;
  // CUPTI: one status line ("" when the collector was never started), the kernels by
  // total GPU time, and what happened to every record.
  std::string cupti_status;
  std::vector<kernel_summary> top_kernels;
  attribution_counters cupti_counters;
  std::size_t sample_cap = 0;
  std::uint64_t gpu_timing_skipped = 0;  // stream scopes that got no event pair
  // GPU metrics sampled while running (PM sampling): absent unless sampling was enabled.
  std::optional<session_sampled_metrics> sampled_metrics;
  // Per-scope hardware counters (sampled calls profiled, one-pass groups rotated): absent unless enabled.
  std::optional<session_counters_status> counters;
  // Where the GPU's time went (gpu_time.hpp): absent without CUPTI activity.
  std::optional<gpu_time_report> gpu_time;
  // The order of the text scope table (not stored in the JSON).
  report_sort sort = report_sort::automatic;

  // The scope at `path` ("a/b/c"), or nullptr.
  [[nodiscard]] const scope_report* find(const std::string& path) const noexcept;

  // The report for a terminal. Every user string in it (scope names and paths, tags,
  // kernel names, and anything read back from a report file) is printable_name()d: ESC
  // sequences, other controls and invalid UTF-8 show as \x1b, \0, U+FFFD, never raw.
  [[nodiscard]] std::string text() const;
  [[nodiscard]] std::string json() const;
  // One row per scope (RFC 4180, full-precision numbers, empty for unknown): timing,
  // CUPTI activity, sampled metrics and per-scope counters; columns in docs/report_schema.md.
  [[nodiscard]] std::string csv() const;
  // A single-file HTML page (no JavaScript, opens offline): the context, the roofline
  // picture with one point per placed scope, and the scope, roofline and kernel tables.
  [[nodiscard]] std::string html() const;
  // Write html() / json() to `path`, all or nothing (core/detail/atomic_file.hpp: a failed
  // write leaves the previous file intact, never a truncated one). False, nothing thrown,
  // and *error = "cannot write PATH: No space left on device" when it cannot be written.
  bool write_html(const std::string& path, std::string* error = nullptr) const noexcept;
  bool write_json(const std::string& path, std::string* error = nullptr) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const scope_report* session_report::find(const std::string& path) const noexcept {
  for (const scope_report& s : scopes)
    if (s.path == path) return &s;
  return nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A duration in nanoseconds as every kscope table prints it: 3 significant digits
// with a time unit ("812 ns", "1.23 us", "45.6 ms", "2.50 s"); "-" when not finite.
//   std::printf("%s\n", kscope::format_duration_ns(s.host_ns.median).c_str());
[[nodiscard]] KSCOPE_DECL std::string format_duration_ns(double ns);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string format_duration_ns(double ns) {
  if (!std::isfinite(ns)) return "-";
  const char* unit = "ns";
  double v = ns;
  if (std::fabs(ns) >= 1e9) { v = ns / 1e9; unit = "s"; }
  else if (std::fabs(ns) >= 1e6) { v = ns / 1e6; unit = "ms"; }
  else if (std::fabs(ns) >= 1e3) { v = ns / 1e3; unit = "us"; }
  const int decimals = (std::fabs(v) >= 100 || unit[0] == 'n') ? 0 : std::fabs(v) >= 10 ? 1 : 2;
  return detail::format_fixed(v, decimals) + " " + unit;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS


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

// The "GPU time" section of text(): the session's busy share, the longest idle gaps with
// the scope the host was in, and per scope its GPU total, share, kernels and per-call
// busy time and gaps; rows in `order`.
KSCOPE_DECL std::string gpu_time_text(const gpu_time_report& t, const std::vector<scope_report>& scopes,
                                 const std::vector<std::size_t>& order);

KSCOPE_DECL void write_gpu_time_json(json_writer& w, const gpu_time_report& t);

// The "Requests" section: latency distributions of the cross-thread ranges ("request",
// "ttft", "queue", ...), from each range's host samples (every call, no warm-up removed:
// the session summarizes ranges whole). "" when there is none.
KSCOPE_DECL std::string requests_text(const std::vector<scope_report>& scopes);

KSCOPE_DECL void write_requests_json(json_writer& w, const std::vector<scope_report>& scopes);

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
  return s.roofline && (s.roofline_impossible || s.roofline->fraction_of_roof > roofline_impossible_above);
}

KSCOPE_DECL std::string placement_advice(const scope_report& s) {
  const placement& p = *s.roofline;
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

KSCOPE_DECL std::string gpu_time_text(const gpu_time_report& t, const std::vector<scope_report>& scopes,
                                 const std::vector<std::size_t>& order) {
  std::string out = "\n";
  if (std::isfinite(t.busy_share)) {
    out += wrap("GPU busy " + share_text(t.busy_share) + " of the wall time (" + format_duration_ns(t.busy_ns) +
                    " of " + format_duration_ns(t.wall_ns) + ", union of all kernels, copies and memsets)",
                98);
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
  std::vector<const scope_report*> waiting;
  for (const scope_report& s : scopes)
    if (s.gpu_activity && s.gpu_activity->host_sync.count > 0) waiting.push_back(&s);
  std::stable_sort(waiting.begin(), waiting.end(), [](const scope_report* a, const scope_report* b) {
    return a->gpu_activity->host_sync.ns > b->gpu_activity->host_sync.ns;
  });
  if (!waiting.empty()) {
    std::string line = "host waits for the GPU (stream/event/device synchronizes): ";
    for (std::size_t i = 0; i < waiting.size() && i < 5; ++i) {
      const scope_report& s = *waiting[i];
      const host_sync_totals& h = s.gpu_activity->host_sync;
      line += (i ? ", " : "") + printable_name(s.path) + " " + format_duration_ns(static_cast<double>(h.ns)) + " in " +
              std::to_string(h.count) + (h.count == 1 ? " call" : " calls");
      if (s.calls > 0)
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
  for (std::size_t i : order) {
    const scope_report& s = scopes[i];
    const scope_gpu_time* g = t.find(s.id);
    if (g == nullptr || (g->gpu_ns <= 0 && !(g->busy_per_call_ns.n > 0 && g->busy_per_call_ns.max > 0))) continue;
    std::string name(indent_width(s.depth), ' ');
    name += printable_name(s.name);
    out += fit(name, 28) + fit(format_duration_ns(g->gpu_ns), 10, true) + fit(share_text(g->share_of_gpu), 7, true) +
           fit(std::to_string(g->kernel_count), 9, true) + fit(std::to_string(g->calls_seen), 8, true) +
           fit(g->calls_seen ? format_duration_ns(g->busy_per_call_ns.median) : "-", 10, true) +
           fit(g->calls_seen ? format_duration_ns(g->gaps_per_call_ns.median) : "-", 10, true) +
           fit(g->calls_seen ? format_general(g->kernels_per_call, 3) : "-", 10, true) + "\n";
  }
  std::string legend =
      "GPU total: the scope's own kernel busy time plus its copies and memsets (all records); %GPU: of the sum over "
      "scopes; calls: calls in the host ring; busy/call, gaps/call (medians), kern/call (mean): from those calls, "
      "children's GPU work included; gaps: time between the call's GPU work";
  std::string covered = "covered: " + std::to_string(t.host_intervals) + " recent host intervals";
  if (t.host_overwritten) covered += " (" + std::to_string(t.host_overwritten) + " older overwritten)";
  covered += " and " + std::to_string(t.gpu_events) + " recent GPU events";
  if (t.gpu_overwritten) covered += " (" + std::to_string(t.gpu_overwritten) + " older overwritten)";
  covered += ", window " + format_duration_ns(t.wall_ns);
  if (t.gpu_events_unmatched)
    covered += "; " + std::to_string(t.gpu_events_unmatched) + " GPU events had no call of their scope in the host ring";
  if (t.calls_before_gpu_ring)
    covered += "; " + std::to_string(t.calls_before_gpu_ring) +
               " calls started before the oldest GPU event still held and are not in the per-call figures";
  out += wrap(legend + "; " + covered, 98);
  return out;
}

KSCOPE_DECL void write_gpu_time_json(json_writer& w, const gpu_time_report& t) {
  w.begin_object();
  w.member("window_start_ns", static_cast<long long>(t.window_start_ns));
  w.member("window_end_ns", static_cast<long long>(t.window_end_ns));
  w.member("wall_ns", t.wall_ns).member("busy_ns", t.busy_ns).member("busy_share", t.busy_share);
  w.member("host_intervals", static_cast<unsigned long long>(t.host_intervals));
  w.member("host_intervals_overwritten", static_cast<unsigned long long>(t.host_overwritten));
  w.member("gpu_events", static_cast<unsigned long long>(t.gpu_events));
  w.member("gpu_events_overwritten", static_cast<unsigned long long>(t.gpu_overwritten));
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
    w.member("kernel_count", static_cast<unsigned long long>(s.kernel_count));
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
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string session_report::text() const {
  std::string out;
  using detail::printable_name;
  out += "kscope " + printable_name(context.kscope_version);
  if (!context.host_name.empty()) out += " on " + printable_name(context.host_name);
  if (!context.timestamp_utc.empty()) out += ", " + printable_name(context.timestamp_utc);
  out += "\n";
  if (context.devices.empty()) {
    out += detail::wrap("GPU: " + (context.cuda_compiled
                                       ? printable_name(context.no_device_reason) + "; host times only"
                                       : std::string("kscope built without CUDA; GPU timing needs a CUDA build and a device")),
                        98);
  } else {
    for (const std::string& d : context.devices) out += detail::wrap("GPU: " + printable_name(d), 98);
    for (const std::string& r : context.roofs) out += detail::wrap("roof: " + printable_name(r), 98);
  }
  out += "\n";
  // name 30 | calls 8 | host median 9, ci 7 | gpu median 9, ci 7 | total 9 | % parent 7
  out += detail::fit("scope", 30) + detail::fit("calls", 8, true) + "  " +
         detail::fit("host med", 9, true) + " " + detail::fit("CI95", 7) +
         detail::fit("gpu med", 9, true) + " " + detail::fit("CI95", 7) +
         detail::fit("total", 9, true) + detail::fit("%par", 7, true) + "\n";
  out += std::string(96, '-') + "\n";
  bool any_unsteady = false, any_capped = false, any_contradicted = false;
  const std::vector<std::size_t> order = detail::display_order(scopes, sort);
  for (std::size_t row : order) {
    const scope_report& s = scopes[row];
    // Event times that the scope's own kernels (CUPTI) contradict are shown, never as true.
    const bool contradicted = s.gpu_calls && !s.gpu_time_disagreement.empty();
    any_contradicted = any_contradicted || contradicted;
    std::string name(detail::indent_width(s.depth), ' ');
    name += printable_name(s.name);
    if (s.cross_thread) name += " ~";
    std::string flags;
    if (!s.host_ns.steady && s.host_ns.n > 0) { flags += "!"; any_unsteady = true; }
    if (s.samples_capped) { flags += "*"; any_capped = true; }
    std::string share = "-";
    if (std::isfinite(s.share_of_parent)) share = detail::format_fixed(100.0 * s.share_of_parent, 1) + "%";
    out += detail::fit(name, 30) + detail::fit(std::to_string(s.calls) + flags, 8, true) + "  " +
           detail::fit(format_duration_ns(s.host_ns.median), 9, true) + " " +
           detail::fit(detail::format_ci_percent(s.host_ns), 7) +
           detail::fit(s.gpu_calls ? format_duration_ns(s.gpu_ns.median) : "-", 9, true) + " " +
           detail::fit(contradicted ? "≠CUPTI" : s.gpu_calls ? detail::format_ci_percent(s.gpu_ns) : "", 7) +
           detail::fit(format_duration_ns(s.host_inclusive_ns), 9, true) +
           detail::fit(share, 7, true) + "\n";
  }
  if (scopes.empty()) out += "(no scopes recorded)\n";
  std::string legend =
      "med: median per call; CI95: half-width of its 95% interval; total: host time over all calls; "
      "%par: share of the parent's total";
  if (any_unsteady) legend += "; !: no steady state found (all samples after the first used)";
  if (any_capped) legend += "; *: samples capped at " + std::to_string(sample_cap) + " (reservoir)";
  legend += "; ~: cross-thread range";
  if (any_contradicted)
    legend += "; ≠CUPTI: the scope's events disagree with its kernels' time (see the warnings); not its GPU time";
  const report_sort used = detail::resolve_sort(scopes, sort);
  if (!scopes.empty() && used != report_sort::recorded)
    legend += used == report_sort::gpu ? "; siblings sorted by GPU time" : "; siblings sorted by host time";
  out += "\n" + detail::wrap(legend, 98);
  out += detail::requests_text(scopes);
  if (gpu_time) out += detail::gpu_time_text(*gpu_time, scopes, order);
  bool any_placed = false;
  for (const scope_report& s : scopes) any_placed = any_placed || s.roofline.has_value();
  if (any_placed) {
    out += "\n" + detail::fit("roofline (median call)", 30) + detail::fit("FLOP/s", 10, true) +
           detail::fit("B/s", 10, true) + detail::fit("FLOP/B", 8, true) + detail::fit("%roof", 7, true) +
           detail::fit("%meas", 7, true) + "  " + detail::fit("limiter", 11) + detail::fit("roof", 12) + "\n";
    out += std::string(98, '-') + "\n";
    std::string hints;
    for (const scope_report& s : scopes) {
      if (!s.roofline) continue;
      const placement& p = *s.roofline;
      const std::string intensity = detail::format_fixed(p.intensity, p.intensity < 10 ? 2 : 0);
      const std::string roof_pct = detail::format_fixed(100 * p.fraction_of_roof, 0) + "%";
      const std::string measured_pct = std::isfinite(s.fraction_of_measured_roof)
                                           ? detail::format_fixed(100 * s.fraction_of_measured_roof, 0) + "%"
                                           : std::string("-");
      std::string name(detail::indent_width(s.depth), ' ');
      name += printable_name(s.name);
      out += detail::fit(name, 30) + detail::fit(detail::format_si(p.flops_per_s, ""), 10, true) +
             detail::fit(detail::format_si(p.bytes_per_s, ""), 10, true) + detail::fit(intensity, 8, true) +
             detail::fit(roof_pct, 7, true) + detail::fit(measured_pct, 7, true) + "  " +
             detail::fit(detail::placement_impossible(s) ? "impossible" : to_string(p.limiter), 11) +
             detail::fit(printable_name(s.roof), 12) + "\n";
      // Said with the advice when the placement is not timed by the scope's events.
      const std::string timed = s.roofline_time_source.empty() || s.roofline_time_source == "events"
                                    ? std::string()
                                    : " [timed by " + s.roofline_time_source + "]";
      hints += detail::wrap(printable_name(s.path + timed + ": " + detail::placement_advice(s)), 98);
    }
    out += "%roof: of the theoretical roof at the scope's intensity; %meas: of the measured roof\n" + hints;
  }
  bool any_activity = false;
  for (const scope_report& s : scopes) any_activity = any_activity || s.gpu_activity.has_value();
  if (any_activity) {
    // name 26 | kernels 8 | kern time 10 | comm 10 | busy 10 | idle 10 | H2D, D2H, D2D 8 = 98
    bool any_comm = false, any_multi_device = false, any_graph_scaled = false;
    for (const scope_report& s : scopes) {
      if (!s.gpu_activity) continue;
      any_comm = any_comm || s.gpu_activity->comm_kernel_count > 0;
      any_multi_device = any_multi_device || s.gpu_activity->devices.size() > 1;
    }
    out += "\n" + detail::fit("GPU activity (CUPTI)", 26) + detail::fit("kernels", 8, true) +
           detail::fit("kern time", 10, true) + detail::fit("comm", 10, true) + detail::fit("busy", 10, true) +
           detail::fit("idle", 10, true) + detail::fit("H2D", 8, true) + detail::fit("D2H", 8, true) +
           detail::fit("D2D", 8, true) + "\n";
    out += std::string(98, '-') + "\n";
    for (const scope_report& s : scopes) {
      if (!s.gpu_activity) continue;
      const node_gpu_activity& a = *s.gpu_activity;
      const std::string indent(detail::indent_width(s.depth), ' ');
      const std::string name = indent + printable_name(s.name);
      const auto bytes = [&](copy_direction d) {
        const copy_totals& c = a.copies(d);
        return c.count ? detail::format_si(static_cast<double>(c.bytes), "B") : std::string("-");
      };
      const auto comm_text = [](std::uint64_t count, std::int64_t ns) {
        return count ? format_duration_ns(static_cast<double>(ns)) : std::string("-");
      };
      out += detail::fit(name, 26) + detail::fit(std::to_string(a.kernel_count), 8, true) +
             detail::fit(format_duration_ns(static_cast<double>(a.kernel_ns)), 10, true) +
             detail::fit(comm_text(a.comm_kernel_count, a.comm_ns), 10, true) +
             detail::fit(format_duration_ns(static_cast<double>(a.busy_ns)), 10, true) +
             detail::fit(format_duration_ns(static_cast<double>(a.idle_ns)), 10, true) +
             detail::fit(bytes(copy_direction::h2d), 8, true) + detail::fit(bytes(copy_direction::d2h), 8, true) +
             detail::fit(bytes(copy_direction::d2d), 8, true) + "\n";
      if (a.devices.size() > 1) {  // one row per device, under the scope
        for (const device_gpu_activity& d : a.devices) {
          out += detail::fit(indent + "  @GPU " + std::to_string(d.device), 26) +
                 detail::fit(std::to_string(d.kernel_count), 8, true) +
                 detail::fit(format_duration_ns(static_cast<double>(d.kernel_ns)), 10, true) +
                 detail::fit(comm_text(d.comm_kernel_count, d.comm_ns), 10, true) +
                 detail::fit(format_duration_ns(static_cast<double>(d.busy_ns)), 10, true) + "\n";
        }
      }
      // CUDA graphs replayed here but built in another scope: which phase built them.
      if (!a.graph_capture.empty())
        out += indent + "  " + printable_name(detail::graph_capture_text(a.graph_capture, scopes)) + "\n";
      // Replays traced as one record: how much of the row is scaled, and from what.
      if (a.graph_scaled()) {
        any_graph_scaled = true;
        out += detail::wrap(indent + "  " + detail::graph_replays_text(a), 98);
      }
    }
    std::string activity_legend =
        "kern time: sum of kernel durations; busy: union of the node's kernel intervals; "
        "idle: its GPU span with none of its work running";
    if (any_comm) activity_legend += "; comm: NCCL kernels' time (part of kern time)";
    if (any_multi_device) activity_legend += "; @GPU n: the scope's kernels on device n";
    if (any_graph_scaled)
      activity_legend += "; graph replays traced as one record count their kernels and time scaled from the replays "
                         "of the same graph traced node by node";
    out += detail::wrap(activity_legend, 98);
  }
  if (!top_kernels.empty()) {
    bool any_kernel_scaled = false;
    out += "\n" + detail::fit("top kernels", 40) + detail::fit("calls", 7, true) + detail::fit("total", 10, true) +
           detail::fit("median", 10, true) + "  " + detail::fit("grid", 11) + detail::fit("block", 9) +
           detail::fit("regs", 5, true) + detail::fit("smem", 8, true) + "\n";
    out += std::string(100, '-') + "\n";
    std::size_t shown = 0;
    for (const kernel_summary& k : top_kernels) {
      if (++shown > 15) break;
      const auto dims = [](const std::array<std::int32_t, 3>& d) {
        std::string t = std::to_string(d[0]);
        if (d[1] > 1 || d[2] > 1) t += "x" + std::to_string(d[1]);
        if (d[2] > 1) t += "x" + std::to_string(d[2]);
        return t;
      };
      any_kernel_scaled = any_kernel_scaled || k.scaled_calls > 0;
      out += detail::fit(printable_name(k.name) + (k.scaled_calls > 0 ? " ~" : ""), 40) +
             detail::fit(std::to_string(k.calls), 7, true) +
             detail::fit(format_duration_ns(static_cast<double>(k.total_ns)), 10, true) +
             detail::fit(format_duration_ns(k.median_ns), 10, true) + "  " +
             detail::fit(dims(k.grid) + (k.launch_config_varies ? "*" : ""), 11) + detail::fit(dims(k.block), 9) +
             detail::fit(std::to_string(k.registers_per_thread), 5, true) +
             detail::fit(detail::format_si(static_cast<double>(k.static_shared_bytes + k.dynamic_shared_bytes), "B"), 8, true) +
             "\n";
    }
    if (top_kernels.size() > 15) out += "(" + std::to_string(top_kernels.size() - 15) + " more in the JSON report)\n";
    if (any_kernel_scaled)
      out += detail::wrap("~: calls and total include replays of CUDA graphs traced as one record, scaled from the "
                          "replays traced node by node; median from traced calls only",
                          98);
  }
  if (counters) out += detail::scope_counters_text(*counters, scopes);
  if (sampled_metrics) out += detail::sampled_metrics_text(*sampled_metrics, scopes);
  if (!cupti_status.empty()) out += detail::wrap("CUPTI: " + printable_name(cupti_status), 98);
  if (gpu_timing_skipped)
    out += "note: " + std::to_string(gpu_timing_skipped) + " stream scopes ran without GPU timing (event pool cap)\n";
  for (const std::string& w : warnings) {
    // A status already printed as its own line above is not said again (the JSON keeps
    // it in both places: `warnings` lists everything kscope could not do).
    if (w == cupti_status || (sampled_metrics && w == sampled_metrics->status) || (counters && w == counters->status))
      continue;
    out += "warning: " + printable_name(w) + "\n";
  }
  // The last guard: whatever a line above let through still reaches no terminal raw (and
  // holds no NUL that would cut the text short in fputs).
  return detail::printable_text(out);
}

KSCOPE_DECL std::string session_report::csv() const {
  using detail::csv_field;
  using detail::csv_number;
  std::string out =
      "path,depth,calls,profiled_calls,host_median_ns,host_median_ci_lo_ns,host_median_ci_hi_ns,host_total_ns,"
      "gpu_median_ns,gpu_total_ns,kernels,kernel_ns,gpu_busy_ns,sampled_samples,sampled_idle_share,sampled_sm_pct,"
      "sampled_dram_pct,sampled_tensor_pct,sampled_verdict,counter_calls,counter_dram_bytes_per_call,"
      "counter_flops_per_call,counter_verdict\n";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  sampled_metric_columns columns;
  if (sampled_metrics) columns = sampled_metric_columns::of(sampled_metrics->data.metrics);
  for (const scope_report& s : scopes) {
    std::vector<std::string> f;
    f.push_back(csv_field(s.path));
    f.push_back(std::to_string(s.depth));
    f.push_back(std::to_string(s.calls));
    f.push_back(std::to_string(s.profiled_calls));
    f.push_back(csv_number(s.host_ns.n ? s.host_ns.median : nan));
    f.push_back(csv_number(s.host_ns.median_ci.lo));
    f.push_back(csv_number(s.host_ns.median_ci.hi));
    f.push_back(csv_number(s.host_inclusive_ns));
    f.push_back(csv_number(s.gpu_calls ? s.gpu_ns.median : nan));
    f.push_back(csv_number(s.gpu_calls ? s.gpu_total_ns : nan));
    f.push_back(s.gpu_activity ? std::to_string(s.gpu_activity->kernel_count) : std::string());
    f.push_back(s.gpu_activity ? csv_number(static_cast<double>(s.gpu_activity->kernel_ns)) : std::string());
    f.push_back(s.gpu_activity ? csv_number(static_cast<double>(s.gpu_activity->busy_ns)) : std::string());
    const node_sampled_metrics* n =
        sampled_metrics ? sampled_metrics->data.find(static_cast<sampled_node>(s.id)) : nullptr;
    const auto sampled = [n](std::size_t column) {
      return n != nullptr && column < n->values.size() ? csv_number(n->values[column].mean) : std::string();
    };
    f.push_back(n ? std::to_string(n->samples) : std::string());
    f.push_back(n ? csv_number(n->idle_share()) : std::string());
    f.push_back(sampled(columns.sm_pct));
    f.push_back(sampled(columns.dram_pct));
    f.push_back(sampled(columns.tensor_pct));
    f.push_back(n ? csv_field(to_string(classify_sampled(*n, sampled_metrics->data.metrics).kind)) : std::string());
    if (s.counters) {
      const scope_counter_report& c = *s.counters;
      f.push_back(std::to_string(c.profiled_calls));
      f.push_back(csv_number(c.per_call(dram_bytes_moved(c.totals))));
      f.push_back(csv_number(c.per_call(c.measured.flops.total)));
      f.push_back(csv_field(to_string(c.classified.verdict.kind)));
    } else {
      f.insert(f.end(), 4, std::string());
    }
    for (std::size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
    out += "\n";
  }
  return out;
}

KSCOPE_DECL std::string session_report::json() const {
  std::string out;
  detail::json_writer w(out);
  w.begin_object();
  w.member("schema", "kscope.report/1");
  w.key("context").begin_object();
  w.member("kscope_version", context.kscope_version);
  w.member("host", context.host_name);
  w.member("timestamp_utc", context.timestamp_utc);
  w.member("process_id", context.process_id);
  w.member("cuda_compiled", context.cuda_compiled);
  w.key("gpu");
  if (context.devices_json.empty()) w.value(nullptr); else w.raw(context.devices_json);
  if (context.devices_json.empty()) w.member("no_device_reason", context.no_device_reason);
  w.key("roofs").begin_array();
  for (const std::string& r : context.roofs) w.value(r);
  w.end_array();
  w.key("peaks");
  if (context.peaks_json.empty()) w.value(nullptr); else w.raw(context.peaks_json);
  w.key("rank");
  if (context.rank < 0) w.value(nullptr); else w.value(context.rank);
  w.end_object();
  w.member("sample_cap", static_cast<unsigned long long>(sample_cap));
  w.member("gpu_timing_skipped", static_cast<unsigned long long>(gpu_timing_skipped));
  w.key("warnings").begin_array();
  for (const std::string& s : warnings) w.value(s);
  w.end_array();
  w.key("cupti").begin_object();
  w.member("status", cupti_status);
  w.key("counters").begin_object();
  const attribution_counters& c = cupti_counters;
  w.member("records_seen", static_cast<unsigned long long>(c.records_seen));
  w.member("kernel_records", static_cast<unsigned long long>(c.kernel_records));
  w.member("memcpy_records", static_cast<unsigned long long>(c.memcpy_records));
  w.member("memset_records", static_cast<unsigned long long>(c.memset_records));
  w.member("sync_records", static_cast<unsigned long long>(c.sync_records));
  w.member("dropped_by_cupti", static_cast<unsigned long long>(c.dropped_by_cupti));
  w.member("dropped_zero_start", static_cast<unsigned long long>(c.dropped_zero_start));
  w.member("dropped_end_before_start", static_cast<unsigned long long>(c.dropped_end_before_start));
  w.member("dropped_malformed", static_cast<unsigned long long>(c.dropped_malformed));
  w.member("unscoped", static_cast<unsigned long long>(c.unscoped));
  w.member("unattributed", static_cast<unsigned long long>(c.unattributed));
  w.member("devices_over_cap", static_cast<unsigned long long>(c.devices_over_cap));
  w.member("graph_records", static_cast<unsigned long long>(c.graph_records));
  w.member("graph_built_elsewhere", static_cast<unsigned long long>(c.graph_built_elsewhere));
  w.member("graph_capture_unknown", static_cast<unsigned long long>(c.graph_capture_unknown));
  w.end_object();
  w.key("top_kernels").begin_array();
  for (const kernel_summary& k : top_kernels) {
    w.begin_object();
    w.member("name", k.name).member("mangled_name", k.mangled_name);
    w.member("calls", static_cast<unsigned long long>(k.calls));
    w.member("total_ns", static_cast<long long>(k.total_ns)).member("median_ns", k.median_ns);
    w.member("min_ns", static_cast<long long>(k.min_ns)).member("max_ns", static_cast<long long>(k.max_ns));
    w.key("grid").begin_array().value(k.grid[0]).value(k.grid[1]).value(k.grid[2]).end_array();
    w.key("block").begin_array().value(k.block[0]).value(k.block[1]).value(k.block[2]).end_array();
    w.member("registers_per_thread", static_cast<unsigned long long>(k.registers_per_thread));
    w.member("static_shared_bytes", k.static_shared_bytes).member("dynamic_shared_bytes", k.dynamic_shared_bytes);
    w.member("launch_config_varies", k.launch_config_varies);
    w.member("communication", k.communication);
    w.member("scaled_calls", static_cast<unsigned long long>(k.scaled_calls));
    w.member("scaled_ns", static_cast<long long>(k.scaled_ns));
    w.end_object();
  }
  w.end_array();
  w.end_object();
  w.key("sampled_metrics");
  if (sampled_metrics) detail::write_sampled_metrics_json(w, *sampled_metrics, scopes); else w.value(nullptr);
  w.key("counters");
  if (counters) detail::write_counters_status_json(w, *counters); else w.value(nullptr);
  w.key("gpu_time");
  if (gpu_time) detail::write_gpu_time_json(w, *gpu_time); else w.value(nullptr);
  w.key("requests");
  detail::write_requests_json(w, scopes);
  w.key("scopes").begin_array();
  for (const scope_report& s : scopes) {
    w.begin_object();
    w.member("id", static_cast<unsigned long long>(s.id));
    w.member("parent", static_cast<unsigned long long>(s.parent));
    w.member("name", s.name).member("path", s.path);
    w.member("depth", static_cast<unsigned long long>(s.depth));
    w.member("cross_thread", s.cross_thread);
    w.member("calls", static_cast<unsigned long long>(s.calls));
    w.key("host_ns"); detail::write_summary_json(w, s.host_ns);
    w.member("host_inclusive_ns", s.host_inclusive_ns);
    w.member("host_exclusive_ns", s.host_exclusive_ns);
    w.member("share_of_parent", s.share_of_parent);
    w.member("gpu_calls", static_cast<unsigned long long>(s.gpu_calls));
    w.key("gpu_ns");
    if (s.gpu_calls) detail::write_summary_json(w, s.gpu_ns); else w.value(nullptr);
    w.member("gpu_total_ns", s.gpu_total_ns);
    w.member("gpu_time_disagreement", s.gpu_time_disagreement);
    w.key("declared_work").begin_object();
    w.member("flops", s.declared.flops).member("bytes", s.declared.bytes);
    w.member("calls", static_cast<unsigned long long>(s.work_calls));
    w.end_object();
    w.key("roofline");
    if (!s.roofline) {
      w.value(nullptr);
    } else {
      const placement& p = *s.roofline;
      w.begin_object();
      w.member("roof", s.roof);
      w.member("flops_per_s", p.flops_per_s).member("bytes_per_s", p.bytes_per_s);
      w.member("intensity", p.intensity).member("roof_flops_per_s", p.roof_flops_per_s);
      w.member("fraction_of_roof", p.fraction_of_roof);
      w.member("fraction_of_measured_roof", s.fraction_of_measured_roof);
      w.member("time_source", s.roofline_time_source);
      w.member("time_ns", s.roofline_time_ns);
      // An impossible placement keeps its numbers (they show what was measured) but has
      // no limiter and no advice: both would rest on a time that cannot be right.
      const bool impossible = detail::placement_impossible(s);
      w.member("impossible", impossible);
      w.member("impossible_reason", impossible ? detail::placement_advice(s) : std::string());
      w.key("limiter");
      if (impossible) w.value(nullptr); else w.value(to_string(p.limiter));
      w.key("hint");
      if (impossible) w.value(nullptr); else w.value(detail::placement_advice(s));
      w.key("flops_per_s_ci").begin_object();
      w.member("lo", s.flops_per_s_ci.lo).member("hi", s.flops_per_s_ci.hi).member("level", s.flops_per_s_ci.level);
      w.end_object();
      w.end_object();
    }
    w.key("gpu_activity");
    if (!s.gpu_activity) {
      w.value(nullptr);
    } else {
      const node_gpu_activity& a = *s.gpu_activity;
      w.begin_object();
      w.member("kernel_count", static_cast<unsigned long long>(a.kernel_count));
      w.member("kernel_ns", static_cast<long long>(a.kernel_ns));
      w.member("busy_ns", static_cast<long long>(a.busy_ns));
      w.member("idle_ns", static_cast<long long>(a.idle_ns));
      w.member("first_start_ns", static_cast<long long>(a.first_start_ns));
      w.member("last_end_ns", static_cast<long long>(a.last_end_ns));
      for (copy_direction d : {copy_direction::h2d, copy_direction::d2h, copy_direction::d2d, copy_direction::other}) {
        const copy_totals& copies = a.copies(d);
        w.key(std::string("memcpy_") + to_string(d)).begin_object();
        w.member("count", static_cast<unsigned long long>(copies.count))
            .member("bytes", static_cast<unsigned long long>(copies.bytes));
        w.member("ns", static_cast<long long>(copies.ns)).end_object();
      }
      w.key("memset").begin_object();
      w.member("count", static_cast<unsigned long long>(a.memset.count))
          .member("bytes", static_cast<unsigned long long>(a.memset.bytes))
          .member("ns", static_cast<long long>(a.memset.ns));
      w.end_object();
      w.key("host_sync").begin_object();
      w.member("count", static_cast<unsigned long long>(a.host_sync.count))
          .member("ns", static_cast<long long>(a.host_sync.ns))
          .member("stream", static_cast<unsigned long long>(a.host_sync.stream))
          .member("event", static_cast<unsigned long long>(a.host_sync.event))
          .member("context", static_cast<unsigned long long>(a.host_sync.context));
      w.end_object();
      w.member("comm_kernel_count", static_cast<unsigned long long>(a.comm_kernel_count));
      w.member("comm_ns", static_cast<long long>(a.comm_ns));
      w.member("comm_busy_ns", static_cast<long long>(a.comm_busy_ns));
      w.member("compute_busy_ns", static_cast<long long>(a.compute_busy_ns));
      w.key("devices");
      detail::write_device_split_json(w, a.devices);
      w.key("graph_capture");
      detail::write_graph_capture_json(w, a.graph_capture, scopes);
      w.key("graphs").begin_object();
      w.member("replays", static_cast<unsigned long long>(a.graph_replays));
      w.member("traced", static_cast<unsigned long long>(a.graph_replays_traced));
      w.member("unsampled", static_cast<unsigned long long>(a.graph_replays_unsampled));
      w.member("span_ns", static_cast<long long>(a.graph_span_ns));
      w.member("scaled_kernel_count", static_cast<unsigned long long>(a.scaled_kernel_count));
      w.member("scaled_kernel_ns", static_cast<long long>(a.scaled_kernel_ns));
      w.member("scaled_busy_ns", static_cast<long long>(a.scaled_busy_ns));
      w.end_object();
      w.end_object();
    }
    w.member("profiled_calls", static_cast<unsigned long long>(s.profiled_calls));
    w.key("counters");
    if (s.counters) detail::write_scope_counters_json(w, *s.counters); else w.value(nullptr);
    w.member("samples_kept", static_cast<unsigned long long>(s.samples_kept));
    w.member("samples_capped", s.samples_capped);
    w.key("tags").begin_array();
    for (const tag_count& t : s.tags) {
      w.begin_object().member("key", t.key).member("value", t.value)
          .member("count", static_cast<unsigned long long>(t.count)).end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return out;
}

KSCOPE_DECL std::string session_report::html() const {
  html_report page;
  page.title = "kscope report";
  page.context_lines.push_back("kscope " + context.kscope_version + " on " + context.host_name + ", " +
                               context.timestamp_utc);
  for (const std::string& d : context.devices) page.context_lines.push_back("GPU: " + d);
  if (context.devices.empty()) page.context_lines.push_back("GPU: " + context.no_device_reason);
  for (const std::string& r : context.roofs) page.context_lines.push_back("roof: " + r);
  std::vector<roof_point> points;
  html_table scope_table{"Scopes (median per call, 95 % CI of the median)",
                         {"scope", "calls", "host median", "host CI", "GPU median", "GPU CI", "total", "% parent"},
                         {}};
  html_table roof_table{"Roofline (median call)",
                        {"scope", "FLOP/s", "B/s", "FLOP/B", "% roof", "% measured roof", "limiter", "roof", "hint"},
                        {}};
  const auto ci_text = [](const summary& s) {
    if (!std::isfinite(s.median_ci.lo)) return std::string("-");
    return "[" + format_duration_ns(s.median_ci.lo) + ", " + format_duration_ns(s.median_ci.hi) + "]";
  };
  const auto percent = [](double f) {
    if (!std::isfinite(f)) return std::string("-");
    return detail::format_fixed(100 * f, 1) + " %";
  };
  for (const scope_report& s : scopes) {
    scope_table.rows.push_back({s.path, std::to_string(s.calls), format_duration_ns(s.host_ns.median),
                                ci_text(s.host_ns), s.gpu_calls ? format_duration_ns(s.gpu_ns.median) : "-",
                                s.gpu_calls ? ci_text(s.gpu_ns) : "-", format_duration_ns(s.host_inclusive_ns),
                                percent(s.share_of_parent)});
    if (!s.roofline) continue;
    const placement& p = *s.roofline;
    // An impossible point would be drawn above the roof as if it were real: the table says
    // why it is left out of the picture.
    const bool impossible = detail::placement_impossible(s);
    if (!impossible) points.push_back(to_roof_point(s.path, p));
    const std::string intensity = detail::format_general(p.intensity, 3);
    roof_table.rows.push_back({s.path, detail::format_si(p.flops_per_s, "FLOP/s"), detail::format_si(p.bytes_per_s, "B/s"),
                               intensity, percent(p.fraction_of_roof), percent(s.fraction_of_measured_roof),
                               impossible ? "impossible" : to_string(p.limiter), s.roof, detail::placement_advice(s)});
  }
  // Measured points (per-scope counters): one per memory level beside the declared one,
  // labelled "path (DRAM)", "path (L2)"; a measured point is what the kernels did.
  html_table measured_table{"Hardware counters per scope (sampled calls profiled)",
                            {"scope", "profiled calls", "DRAM / call", "FLOP / call", "verdict"}, {}};
  for (const scope_report& s : scopes) {
    if (!s.counters) continue;
    const scope_counter_report& c = *s.counters;
    for (memory_level level : {memory_level::dram, memory_level::l2, memory_level::l1})
      if (const std::optional<roof_point> mp = c.measured.chart_point(level, s.path)) points.push_back(*mp);
    measured_table.rows.push_back(
        {s.path, std::to_string(c.profiled_calls),
         detail::counter_cell(c.per_call(dram_bytes_moved(c.totals)), "B"),
         detail::counter_cell(c.per_call(c.measured.flops.total), "FLOP"), c.classified.verdict.text});
  }
  if (!points.empty() && !context.roof_lines.empty()) {
    plot_options options;
    options.title = context.devices.empty() ? "Roofline" : "Roofline: " + context.devices.front().substr(0, context.devices.front().find(':'));
    page.svg = roofline_svg(context.roof_lines, points, options);
  }
  page.tables.push_back(std::move(scope_table));
  if (!roof_table.rows.empty()) page.tables.push_back(std::move(roof_table));
  if (!measured_table.rows.empty()) page.tables.push_back(std::move(measured_table));
  if (!top_kernels.empty()) {
    html_table kernels{"Top kernels (CUPTI)", {"kernel", "calls", "total", "median", "grid", "block", "registers", "shared"}, {}};
    for (const kernel_summary& k : top_kernels) {
      const auto dims = [](const std::array<std::int32_t, 3>& d) {
        return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
      };
      kernels.rows.push_back({k.name, std::to_string(k.calls), format_duration_ns(static_cast<double>(k.total_ns)),
                              format_duration_ns(k.median_ns), dims(k.grid), dims(k.block),
                              std::to_string(k.registers_per_thread),
                              detail::format_si(static_cast<double>(k.static_shared_bytes + k.dynamic_shared_bytes), "B")});
    }
    page.tables.push_back(std::move(kernels));
  }
  if (!warnings.empty()) {
    html_table w{"Warnings", {"warning"}, {}};
    for (const std::string& line : warnings) w.rows.push_back({line});
    page.tables.push_back(std::move(w));
  }
  return render_html(page);
}

KSCOPE_DECL bool session_report::write_html(const std::string& path, std::string* error) const noexcept {
  try {
    return detail::write_file_atomically(path, html(), error);
  } catch (...) {  // out of memory building the page
    if (error) {
      try { *error = detail::file_write_error(path, ENOMEM); } catch (...) {}
    }
    return false;
  }
}

KSCOPE_DECL bool session_report::write_json(const std::string& path, std::string* error) const noexcept {
  try {
    return detail::write_file_atomically(path, json(), error);
  } catch (...) {  // out of memory building the document
    if (error) {
      try { *error = detail::file_write_error(path, ENOMEM); } catch (...) {}
    }
    return false;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
