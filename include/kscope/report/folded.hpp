// kscope/report/folded.hpp — the scope tree as folded stacks, for flame graphs.
//
// One line per call path, "request;decode;attention 250000": the frames from the root,
// separated by ';', a space, and the path's self time in integer nanoseconds. This is the
// input of flamegraph.pl, inferno (inferno-flamegraph) and speedscope (which opens it as
// is). Self time, so that a path's frame in the graph is as wide as the sum of the lines
// under it: its total.
//
//   kscope::folded_stacks host = kscope::fold_stacks(report, kscope::folded_time::host);
//   kscope::write_text_file("host.folded", host.text);   // flamegraph.pl host.folded > host.svg
//   for (const std::string& note : host.notes) std::fprintf(stderr, "%s\n", note.c_str());
//
// Self time of a node is its total minus its children's totals:
//   - host: the total is the scope's host time over all calls (host_inclusive_ns);
//   - GPU, with CUPTI activity in the report: the GPU busy time of the kernels each scope
//     launched itself (node_gpu_activity::busy_ns). CUPTI gives each kernel to the
//     innermost open scope, so that is already the node's own time; its total is it plus
//     its children's;
//   - GPU without CUPTI: the time between each call's CUDA events (gpu_total_ns), which
//     includes the children's work on that stream; a scope without a stream measured no
//     GPU time: its total is its children's, and it has no self time.
// Where the children's totals exceed the node's (ranges ended on another thread, GPU work
// of a child on another stream running past its parent's events), the self time is 0 and
// a note names the node. Lines whose value is 0 are left out. Frame names are the scope
// names as the text report prints them (core/detail/text_escape.hpp: a newline is \x0a,
// other controls \xNN, invalid UTF-8 U+FFFD) with ';' written \x3b, so a name can neither
// add a frame nor end the line.
// A report may come from outside (kscope report --format folded-host FILE): a scope's own
// time that is negative, not finite or above 2^62 ns (146 years) counts as 0, with a note,
// and a total past int64 stops at its largest value, with a note.
#pragma once

#include "../core/config.hpp"
#include "../core/detail/checked_math.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/text_escape.hpp"
#include "data.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kscope {

// Which time the stacks add up.
enum class folded_time : std::uint8_t { host, gpu };

// Folded stacks and what they rest on.
struct folded_stacks {
  std::string text;         // "a;b;c 1234\n" per call path with a self time, in report order
  std::string time;         // what the values are ("host time, ns"); "" when there is none
  std::int64_t total_ns = 0;  // the sum of the values (at most INT64_MAX, with a note)
  std::size_t stacks = 0;     // lines in text
  std::vector<std::string> notes;  // nodes whose children exceed them; why there is no GPU time
};

// The report's scope tree as folded stacks of `time` (see the top of this file).
[[nodiscard]] KSCOPE_DECL folded_stacks fold_stacks(const session_report& report, folded_time time);

namespace detail {

// "a/b\/c" -> {"a", "b/c"}: a scope path cut at its unescaped '/', each '\x' made 'x'.
[[nodiscard]] KSCOPE_DECL std::vector<std::string> split_scope_path(std::string_view path);
// The path up to its last unescaped '/' ("" for a top-level scope): the parent's path.
[[nodiscard]] KSCOPE_DECL std::string parent_scope_path(std::string_view path);
// One frame of a folded line: printable, with ';' as \x3b.
[[nodiscard]] KSCOPE_DECL std::string folded_frame(std::string_view name);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> split_scope_path(std::string_view path) {
  std::vector<std::string> parts(1);
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '\\' && i + 1 < path.size()) {
      parts.back() += path[++i];
    } else if (path[i] == '/') {
      parts.emplace_back();
    } else {
      parts.back() += path[i];
    }
  }
  return parts;
}

KSCOPE_DECL std::string parent_scope_path(std::string_view path) {
  std::size_t last_slash = std::string_view::npos;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '\\') ++i;  // the escaped character is part of a name
    else if (path[i] == '/') last_slash = i;
  }
  return last_slash == std::string_view::npos ? std::string() : std::string(path.substr(0, last_slash));
}

KSCOPE_DECL std::string folded_frame(std::string_view name) {
  if (name.empty()) return "(no name)";
  std::string out;
  for (const char c : printable_name(name)) {
    if (c == ';') out += "\\x3b";
    else out += c;
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL folded_stacks fold_stacks(const session_report& report, folded_time time) {
  folded_stacks out;
  // Which GPU time: CUPTI's (each kernel's own scope) when the report has any, else the
  // CUDA events'. Never a mix, so that the stacks of one output add up one measure.
  bool any_cupti = false, any_events = false;
  for (const scope_report& s : report.scopes) {
    any_cupti = any_cupti || s.gpu_activity.has_value();
    any_events = any_events || s.gpu_calls > 0;
  }
  const bool cupti = time == folded_time::gpu && any_cupti;
  if (time == folded_time::host) {
    out.time = "host time, ns";
  } else if (cupti) {
    out.time = "GPU busy time of each scope's own kernels (CUPTI), ns";
  } else if (any_events) {
    out.time = "GPU time between each scope's CUDA events, ns";
  } else {
    out.notes.push_back("no GPU time in this report: no CUPTI activity and no scope timed with CUDA events");
    return out;
  }
  // A node's total, from the deepest scopes up (its children's totals are known by then):
  // host: its host time; GPU with CUPTI: its own kernels' busy time plus its children's
  // totals; GPU by events: its events' time, or, for a scope without a stream (nothing
  // measured), its children's totals (it then has no self time, and no note).
  // Each scope's own measure is a time in [0, 2^62) ns (bad ones count as 0, with a note),
  // so a self time below is at most about that: llround of it is defined.
  std::size_t bad_times = 0;
  std::unordered_map<std::string, double> total, children_total;
  std::vector<std::pair<std::size_t, std::size_t>> deepest_first;  // (depth, index)
  deepest_first.reserve(report.scopes.size());
  for (std::size_t i = 0; i < report.scopes.size(); ++i)
    deepest_first.emplace_back(detail::split_scope_path(report.scopes[i].path).size(), i);
  std::stable_sort(deepest_first.begin(), deepest_first.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [depth, i] : deepest_first) {
    const scope_report& s = report.scopes[i];
    const double below = children_total[s.path];
    double own = 0;  // what the scope measured itself
    if (time == folded_time::host) own = s.host_inclusive_ns;
    else if (cupti) own = s.gpu_activity ? static_cast<double>(s.gpu_activity->busy_ns) : 0.0;
    else own = s.gpu_calls > 0 ? s.gpu_total_ns : 0.0;
    if (!(own >= 0 && own < static_cast<double>(detail::max_input_time_ns))) {  // NaN included
      if (++bad_times <= 10)
        out.notes.push_back("'" + detail::printable_name(s.path) + "': its " +
                            (time == folded_time::host ? "host" : "GPU") + " time, " + detail::format_general(own, 6) +
                            " ns, is no duration (negative, not finite or above 2^62 ns): counted as 0");
      own = 0;
    }
    double t = own;
    if (cupti) t = own + below;
    else if (time == folded_time::gpu && s.gpu_calls == 0) t = below;
    total[s.path] = t;
    children_total[detail::parent_scope_path(s.path)] += t;
  }

  std::size_t clamped = 0;
  for (const scope_report& s : report.scopes) {
    const double node_total = total[s.path];
    const auto children = children_total.find(s.path);
    const double below = children == children_total.end() ? 0.0 : children->second;
    double self = node_total - below;
    if (self < 0) {
      // Children longer than their parent: ranges that ended on another thread, or GPU
      // work that ran past the parent's events. Their time is theirs; the parent gets 0.
      // (The excess is a sum of many children: written from the double, never llround.)
      if (++clamped <= 10)
        out.notes.push_back("'" + detail::printable_name(s.path) + "': its children's " + (time == folded_time::host ? "host" : "GPU") +
                            " time exceeds its own by " + detail::format_fixed(std::round(-self), 0) +
                            " ns (work on other threads or streams): its self time is 0");
      self = 0;
    }
    // A self time is at most a scope's own measure (below 2^62): this always has a value.
    const std::int64_t value = detail::rounded_int64(self, static_cast<double>(detail::max_input_time_ns) * 2).value_or(0);
    if (value <= 0) continue;
    std::string line;
    for (const std::string& frame : detail::split_scope_path(s.path)) {
      if (!line.empty()) line += ';';
      line += detail::folded_frame(frame);
    }
    line += ' ';
    line += std::to_string(value);
    line += '\n';
    out.text += line;
    ++out.stacks;
    // 2^15 scopes of 2^62 ns each pass int64: the total stops at its largest value.
    if (const std::optional<std::int64_t> sum = detail::checked_add(out.total_ns, value)) {
      out.total_ns = *sum;
    } else if (out.total_ns != std::numeric_limits<std::int64_t>::max()) {
      out.total_ns = std::numeric_limits<std::int64_t>::max();
      out.notes.push_back("the values add up past 2^63 ns (292 years): their total is given as 9223372036854775807");
    }
  }
  if (clamped > 10)
    out.notes.push_back("... and " + std::to_string(clamped - 10) + " more scopes whose children exceed them");
  if (bad_times > 10)
    out.notes.push_back("... and " + std::to_string(bad_times - 10) + " more scopes whose time is no duration");
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
