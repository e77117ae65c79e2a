// kscope/report/gbench_json.hpp — reads the JSON that Google Benchmark programs write
// (--benchmark_format=json, --benchmark_out=FILE), so that `kscope compare` can gate them
// like kscope's own bench files. A pure function of the text: no Google Benchmark header
// is needed, and the file may come from any program built on that library.
//
// What the file holds, and what is kept:
//   {"context": {"date", "host_name", "library_version", ...},
//    "benchmarks": [{"name", "run_name", "run_type": "iteration" | "aggregate",
//                    "aggregate_name", "real_time", "cpu_time", "time_unit",
//                    "error_occurred", "error_message", ...}, ...]}
// Each "iteration" entry is one repetition; its real_time is already per iteration. The
// repetitions of one run_name are that benchmark's samples, so with
// --benchmark_repetitions=N (N >= 6 for a 95 % interval of the median) the gate judges
// the median and its distribution-free interval, as for kscope's own results. A file
// with aggregates only (--benchmark_report_aggregates_only) keeps the "median" aggregate
// (else the "mean") without an interval: such a benchmark can only be "inconclusive".
// real_time is the time compared: the wall time, or the GPU time a benchmark registered
// with UseManualTime() reports (bench/gbench.hpp does).
//
//   kscope::gbench_parse_result r = kscope::parse_gbench_json(text);
//   if (!r.ok()) std::fprintf(stderr, "%s\n", r.error.c_str());
//   for (const kscope::gbench_benchmark& b : r.benchmarks) use(b.name, b.real_time_ns);
#pragma once

#include "../core/detail/json_reader.hpp"
#include "../core/detail/text_escape.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kscope {

// One benchmark of a Google Benchmark file: its repetitions gathered under its run name.
struct gbench_benchmark {
  std::string name;                    // run_name: "BM_copy/4096", "BM_x/threads:2"
  std::vector<double> real_time_ns;    // one per repetition ("iteration" entries), in file order
  double aggregate_median_ns = std::numeric_limits<double>::quiet_NaN();  // "median" (else "mean") aggregate
  std::string error;                   // error_message of a benchmark that failed or was skipped
};

// The outcome of parse_gbench_json(): `benchmarks` is meaningful when ok().
struct gbench_parse_result {
  std::string error;                       // why the file cannot be read; empty when ok
  std::string host;                        // context.host_name
  std::string library_version;             // context.library_version (Google Benchmark 1.8+)
  std::vector<gbench_benchmark> benchmarks;  // in order of first appearance

  [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

// The most benchmark entries one file may hold (the same bound as a report's scopes).
inline constexpr std::size_t gbench_max_entries = std::size_t{1} << 16;

// Whether a parsed JSON document looks like Google Benchmark output: an object without a
// kscope "schema", with a "context" object and a "benchmarks" array.
[[nodiscard]] KSCOPE_DECL bool is_gbench_json(const detail::json_value& doc) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool is_gbench_json(const detail::json_value& doc) noexcept {
  if (!doc.is_object() || doc.find("schema") != nullptr) return false;
  const detail::json_value* context = doc.find("context");
  const detail::json_value* benchmarks = doc.find("benchmarks");
  return context != nullptr && context->is_object() && benchmarks != nullptr && benchmarks->is_array();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// Nanoseconds per unit of Google Benchmark's "time_unit"; 0 for a unit it never writes.
[[nodiscard]] KSCOPE_DECL double gbench_unit_ns(std::string_view unit) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double gbench_unit_ns(std::string_view unit) noexcept {
  if (unit == "ns") return 1.0;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  return 0.0;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Reads a parsed Google Benchmark document (is_gbench_json(doc) should hold). Every entry
// is checked: a name, a known time unit, a finite non-negative real_time; the first entry
// that fails makes the whole result an error naming it, because a gate that silently
// dropped a benchmark could pass without comparing it.
[[nodiscard]] KSCOPE_DECL gbench_parse_result read_gbench_json(const detail::json_value& doc);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL gbench_parse_result read_gbench_json(const detail::json_value& doc) {
  gbench_parse_result out;
  const auto fail = [&](const std::string& why) {
    out.error = "malformed Google Benchmark JSON: " + why;
    out.benchmarks.clear();
    return out;
  };
  if (!is_gbench_json(doc)) return fail("expected an object with a \"context\" object and a \"benchmarks\" array");
  const detail::json_value& context = *doc.find("context");
  out.host = context.member_string("host_name");
  out.library_version = context.member_string("library_version");
  const detail::json_value& entries = *doc.find("benchmarks");
  if (entries.items.size() > gbench_max_entries)
    return fail("more than " + std::to_string(gbench_max_entries) + " entries in \"benchmarks\"");
  std::unordered_map<std::string, std::size_t> index;  // run name -> position in out.benchmarks
  for (std::size_t i = 0; i < entries.items.size(); ++i) {
    const detail::json_value& e = entries.items[i];
    const std::string where = "benchmarks[" + std::to_string(i) + "]";
    if (!e.is_object()) return fail(where + " is not an object");
    const detail::json_value* name = e.find("name");
    if (name == nullptr || !name->is_string() || name->string.empty()) return fail(where + " has no \"name\"");
    // run_name is the benchmark without an aggregate's suffix ("BM_x/8" for "BM_x/8_median");
    // files from before it existed are all "iteration" entries named by "name".
    const std::string run_name = e.member_string("run_name", name->string);
    const std::string shown = where + " (\"" + detail::printable_name(run_name) + "\")";
    const auto [slot, added] = index.emplace(run_name, out.benchmarks.size());
    if (added) out.benchmarks.push_back(gbench_benchmark{run_name, {}, std::numeric_limits<double>::quiet_NaN(), ""});
    gbench_benchmark& b = out.benchmarks[slot->second];
    // Failed (SkipWithError) or skipped: no time; the message is kept for the table.
    const bool skipped = e.member_bool("error_occurred", false) || e.member_bool("skipped", false);
    if (skipped) {
      if (b.error.empty()) b.error = e.member_string("error_message", e.member_string("skip_message", "skipped"));
      continue;
    }
    const std::string run_type = e.member_string("run_type", "iteration");
    const std::string aggregate = e.member_string("aggregate_name");
    if (run_type == "aggregate" && aggregate != "median" && aggregate != "mean") continue;  // stddev, cv, ...
    if (run_type != "aggregate" && run_type != "iteration")
      return fail(shown + ": unknown \"run_type\" \"" + detail::printable_name(run_type) + "\"");
    const std::string unit = e.member_string("time_unit", "ns");
    const double ns_per_unit = detail::gbench_unit_ns(unit);
    if (ns_per_unit == 0.0) return fail(shown + ": unknown \"time_unit\" \"" + detail::printable_name(unit) + "\"");
    const detail::json_value* real = e.find("real_time");
    if (real == nullptr || !real->is_number()) return fail(shown + ": no numeric \"real_time\"");
    const double ns = real->number * ns_per_unit;
    if (!std::isfinite(ns) || ns < 0)
      return fail(shown + ": \"real_time\" must be a finite time >= 0, got " + detail::format_round_trip(real->number));
    if (run_type == "iteration") {
      b.real_time_ns.push_back(ns);
    } else if (aggregate == "median" || std::isnan(b.aggregate_median_ns)) {
      b.aggregate_median_ns = ns;  // the median wins over the mean whatever their order
    }
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Parses Google Benchmark JSON text; `error` names a syntax error's byte offset.
[[nodiscard]] KSCOPE_DECL gbench_parse_result parse_gbench_json(std::string_view text);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL gbench_parse_result parse_gbench_json(std::string_view text) {
  const detail::json_parse_result parsed = detail::parse_json(text);
  if (!parsed.ok()) {
    gbench_parse_result out;
    out.error = "not valid JSON: " + parsed.error;
    return out;
  }
  return read_gbench_json(parsed.value);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
