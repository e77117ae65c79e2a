// kscope/report/compare.hpp — two runs compared name by name: the CI gate behind
// `kscope compare`.
//
// Reads session reports ("kscope.report/1": every scope's host and GPU per-call times)
// and benchmark results ("kscope.bench/1": every benchmark's GPU time per launch). Both
// hold summaries for the gate, so every time is compared with compare_summaries()
// (core/stats.hpp): the ratio of the medians, an interval of that ratio built from the
// two median intervals, and the library's one verdict rule (ratio_verdict), printed with
// to_string(verdict).
//
// A gate never passes by accident: gate() is not `pass` when nothing was compared (an
// empty report from a KSCOPE=0 run, renamed scopes, an unrelated file), nor when a time
// the baseline measured is missing from the candidate (unless allow_missing). A merged
// report ("kscope.merged/1") is refused: it keeps per-rank medians without intervals,
// so its every verdict would be inconclusive and the gate could never fail. A different
// GPU, driver or kscope version is reported as a warning, not a failure.
//
//   kscope::comparable_load base = kscope::load_comparable(baseline_json);
//   kscope::comparable_load cand = kscope::load_comparable(candidate_json);
//   if (!base.ok() || !cand.ok()) return 3;                     // .error says why
//   kscope::report_comparison c = kscope::compare_runs(base.run, cand.run);   // 2 % threshold
//   std::fputs(c.text().c_str(), stdout);
//   return c.gate() == kscope::gate_result::pass ? 0 : 1;
#pragma once

#include "../core/detail/json_reader.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/text_escape.hpp"  // names from the compared files, printed safely
#include "../core/stats.hpp"
#include "../device/device_info.hpp"
#include "merge.hpp"
#include "report.hpp"

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kscope {

// One time of one run, as the gate compares it: a scope's host or GPU per-call time, or
// a benchmark's GPU time per launch. Nanoseconds, whatever the document's unit.
struct timed_entry {
  std::string name;  // scope path, or benchmark name with its parameters: "gemm (n=4096)"
  std::string time;  // "host" or "gpu"
  summary ns{};      // the gate reads median and median_ci
};

// Where a run was taken, as far as its document says; an empty member is unknown and
// never compared.
struct run_environment {
  std::string kscope_version;  // "0.1.0"
  std::string gpu;             // device names, ", "-joined; "none" when the run had no GPU
  std::string driver_version;  // CUDA version the driver supports: "13.0"
};

// A run reduced to what the gate compares.
//   kscope::comparable_run run = kscope::comparable_from_report(report);
struct comparable_run {
  std::string format;                // "kscope.report/1" or "kscope.bench/1"
  std::string item = "scope";        // what its names are: "scope" or "benchmark"
  run_environment environment;
  std::vector<std::string> names;    // every scope or benchmark, timed or not, in order
  std::vector<timed_entry> entries;  // the times it measured, in order
};

// Why a document could not be loaded; the `kscope` tool maps these to exit codes.
enum class load_status {
  ok,
  not_json,        // not valid JSON (the strict parser's message names the byte offset)
  not_kscope,      // valid JSON, but no kscope document, or a kscope schema this version does not read
  malformed,       // a kscope schema it reads, but members are missing or of the wrong type
  not_comparable,  // a kscope document the gate refuses (kscope.merged/1), with the reason
};

// The outcome of load_comparable(): `run` is meaningful when ok().
struct comparable_load {
  load_status status = load_status::ok;
  std::string schema;  // what the document said it was ("" when none)
  std::string error;   // why it cannot be compared; names the format it saw
  comparable_run run;

  [[nodiscard]] bool ok() const noexcept { return status == load_status::ok; }
};

// One compared time of one scope or benchmark.
struct scope_comparison {
  std::string path;  // scope path or benchmark name
  std::string time;  // "host" or "gpu": which time was compared
  double baseline_median_ns = detail::stats_nan;
  double candidate_median_ns = detail::stats_nan;
  comparison result;  // compare_summaries(): ratio, ratio_ci, verdict; p_value NaN (no samples)
};

// How compare_runs() judges.
//   kscope::compare_settings s;
//   s.threshold = 0.05;        // a 5 % change matters
//   s.allow_missing = true;    // a scope dropped on purpose does not fail the gate
struct compare_settings {
  double threshold = compare_options{}.threshold;  // relative change that matters
  bool allow_missing = false;  // baseline times absent from the candidate do not fail the gate
};

// What the gate decided, in order of precedence.
enum class gate_result {
  pass,              // something was compared, nothing slower, nothing missing (or allowed)
  slower,            // at least one time is slower
  nothing_compared,  // the two runs share no timed scope or benchmark
  missing,           // a time the baseline measured is missing from the candidate
};

// The outcome of compare_runs() / compare_reports().
//   for (const kscope::scope_comparison& s : c.scopes)
//     if (s.result.result == kscope::verdict::slower) std::printf("%s regressed\n", s.path.c_str());
struct report_comparison {
  double threshold = compare_options{}.threshold;
  bool allow_missing = false;
  std::string format = "kscope.report/1";      // what was compared
  std::string item = "scope";                  // "scope" or "benchmark"
  std::size_t baseline_items = 0;              // scopes (benchmarks) in the baseline
  std::size_t candidate_items = 0;             // and in the candidate
  std::vector<scope_comparison> scopes;        // in the candidate's order, host before gpu
  std::vector<std::string> only_in_candidate;  // names the baseline does not have
  std::vector<std::string> only_in_baseline;   // timed names the candidate lost
  std::vector<std::string> missing_times;      // "step: gpu": a time the candidate's scope no longer has
  std::vector<std::string> environment_warnings;  // "GPU differs: ..."

  // How many compared times got verdict `v`.
  [[nodiscard]] std::size_t count(verdict v) const noexcept {
    std::size_t n = 0;
    for (const scope_comparison& s : scopes) n += s.result.result == v;
    return n;
  }
  // The baseline's times the candidate lacks (whole scopes and single times).
  [[nodiscard]] std::size_t missing_count() const noexcept { return only_in_baseline.size() + missing_times.size(); }
  // The gate: slower before nothing_compared before missing before pass.
  [[nodiscard]] gate_result gate() const noexcept {
    if (count(verdict::slower) > 0) return gate_result::slower;
    if (scopes.empty()) return gate_result::nothing_compared;
    if (!allow_missing && missing_count() > 0) return gate_result::missing;
    return gate_result::pass;
  }
  // One line saying why the gate failed ("" when it passed).
  [[nodiscard]] std::string failure() const;
  // The table `kscope compare` prints, ending in "PASS" or "FAIL" with the reason. Names
  // come from the compared files: each is printable_name()d (text_escape.hpp), so a scope
  // called "x\n... PASS" or one holding ESC sequences cannot forge or hide a line.
  [[nodiscard]] std::string text() const;
};

namespace detail {

// Names the devices of a report's "gpu" array (device_info JSON objects).
inline void environment_from_devices(const json_value& gpus, run_environment& env) {
  if (!gpus.is_array()) return;  // null: the report says there was no GPU
  std::string names;
  for (const json_value& g : gpus.items) {
    if (!g.member_bool("present", true)) continue;
    if (!names.empty()) names += ", ";
    names += g.member_string("name", "?");
    if (env.driver_version.empty()) env.driver_version = g.member_string("driver_version");
  }
  env.gpu = names.empty() ? "none" : names;
}

// "gemm (n=4096 dtype=bf16)": a benchmark's name with its parameters, as the bench tables
// print it, so a sweep's points stay apart.
inline std::string bench_entry_name(const json_value& b) {
  std::string params;
  if (const json_value* p = b.find("params"); p && p->is_object()) {
    for (const auto& [key, value] : p->members) {
      if (!params.empty()) params += ' ';
      params += key + "=";
      if (value.is_number()) params += format_round_trip(value.number);
      else if (value.is_string()) params += value.string;
      else if (value.is_bool()) params += value.boolean ? "true" : "false";
      else params += "null";
    }
  }
  const std::string name = b.member_string("name", "?");
  return params.empty() ? name : name + " (" + params + ")";
}

// A benchmark's time_s summary (seconds) as a nanosecond summary for compare_summaries.
inline summary bench_summary_ns(const json_value& t) {
  summary s{};
  const double nan = stats_nan;
  // A count outside [0, 2^53] or not whole is not a count: read as 0 (no samples), which
  // the comparison reports as "no data" rather than casting it (undefined behaviour).
  const double n = t.member_number("n", 0);
  s.n = n >= 0 && n <= 9007199254740992.0 && n == std::floor(n) ? static_cast<std::size_t>(n) : 0;
  s.median = t.member_number("median", nan) * 1e9;
  s.mean = t.member_number("mean", nan) * 1e9;
  s.min = t.member_number("min", nan) * 1e9;
  s.max = t.member_number("max", nan) * 1e9;
  s.median_ci = interval{nan, nan, 0.95};
  if (const json_value* ci = t.find("median_ci"); ci && ci->is_object()) {
    s.median_ci.lo = ci->member_number("lo", nan) * 1e9;
    s.median_ci.hi = ci->member_number("hi", nan) * 1e9;
    s.median_ci.level = ci->member_number("level", 0.95);
  }
  s.steady = t.member_bool("steady", true);
  return s;
}

// "#2", "#3" for the second and later uses of one name, so duplicates pair up in order.
inline void make_names_unique(std::vector<std::string>& names) {
  std::unordered_map<std::string, std::size_t> seen;
  for (std::string& n : names) {
    const std::size_t k = ++seen[n];
    if (k > 1) n += " #" + std::to_string(k);
  }
}

inline comparable_load load_bench(const json_value& doc) {
  comparable_load out;
  out.schema = "kscope.bench/1";
  const json_value* benchmarks = doc.find("benchmarks");
  if (benchmarks == nullptr || !benchmarks->is_array()) {
    out.status = load_status::malformed;
    out.error = "malformed kscope.bench/1 document: no \"benchmarks\" array";
    return out;
  }
  comparable_run& run = out.run;
  run.format = "kscope.bench/1";
  run.item = "benchmark";
  run.environment.kscope_version = doc.member_string("kscope_version");
  if (const json_value* c = doc.find("context"); c && c->is_object()) {
    const json_value* g = c->find("gpu");
    if (!c->member_bool("has_gpu", true)) {
      run.environment.gpu = "none";
    } else if (g && g->is_object()) {
      run.environment.gpu = g->member_string("name");
      const double driver = g->member_number("driver_version", stats_nan);
      if (std::isfinite(driver) && driver >= 0 && driver <= 1e9)
        run.environment.driver_version = cuda_version_text(static_cast<int>(driver));
    }
  }
  std::vector<std::string> names;
  for (const json_value& b : benchmarks->items) {
    if (!b.is_object() || !b.find("name") || !b.find("name")->is_string()) {
      out.status = load_status::malformed;
      out.error = "malformed kscope.bench/1 document: a benchmark without a \"name\"";
      return out;
    }
    names.push_back(bench_entry_name(b));
  }
  make_names_unique(names);
  for (std::size_t i = 0; i < names.size(); ++i) {
    run.names.push_back(names[i]);
    const json_value* m = benchmarks->items[i].find("measurement");
    const json_value* t = m ? m->find("time_s") : nullptr;
    if (t == nullptr || !t->is_object()) continue;
    summary s = bench_summary_ns(*t);
    // A benchmark without a median (stop_reason "error") measured nothing.
    if (std::isfinite(s.median)) run.entries.push_back(timed_entry{names[i], "gpu", s});
  }
  return out;
}

}  // namespace detail

// The times of a session report: each scope's host time when it had calls, its GPU time
// when it had GPU-timed calls. The environment comes from its context.
//   kscope::comparable_run run = kscope::comparable_from_report(kscope::session::global().report());
[[nodiscard]] inline comparable_run comparable_from_report(const session_report& report) {
  comparable_run run;
  run.format = "kscope.report/1";
  run.item = "scope";
  run.environment.kscope_version = report.context.kscope_version;
  if (!report.context.devices_json.empty()) {
    const detail::json_parse_result gpus = detail::parse_json(report.context.devices_json);
    if (gpus.ok()) detail::environment_from_devices(gpus.value, run.environment);
  } else if (!report.context.no_device_reason.empty() || !report.context.devices.empty()) {
    run.environment.gpu = report.context.devices.empty() ? "none" : "";
  }
  for (const scope_report& s : report.scopes) {
    run.names.push_back(s.path);
    if (s.calls > 0) run.entries.push_back(timed_entry{s.path, "host", s.host_ns});
    if (s.gpu_calls > 0) run.entries.push_back(timed_entry{s.path, "gpu", s.gpu_ns});
  }
  return run;
}

// Reads a kscope.report/1 or kscope.bench/1 document for the gate. Anything else gets a
// status and an error naming what it saw: not JSON, JSON of another kind, a malformed
// kscope document, or a merged report (refused: no intervals to judge with).
//   kscope::comparable_load l = kscope::load_comparable(text);
//   if (!l.ok()) std::fprintf(stderr, "%s\n", l.error.c_str());
[[nodiscard]] inline comparable_load load_comparable(std::string_view json_text) {
  comparable_load out;
  const detail::json_parse_result parsed = detail::parse_json(json_text);
  if (!parsed.ok()) {
    out.status = load_status::not_json;
    out.error = "not valid JSON: " + parsed.error + " (kscope compare reads kscope.report/1 and kscope.bench/1 JSON)";
    return out;
  }
  const detail::json_value& doc = parsed.value;
  const detail::json_value* schema = doc.find("schema");
  if (!doc.is_object() || schema == nullptr || !schema->is_string()) {
    out.status = load_status::not_kscope;
    out.error = doc.is_object() ? "not a kscope document: JSON without a \"schema\" member (kscope compare reads "
                                  "kscope.report/1 and kscope.bench/1)"
                                : "not a kscope document: the JSON is not an object (kscope compare reads "
                                  "kscope.report/1 and kscope.bench/1)";
    return out;
  }
  out.schema = schema->string;
  if (out.schema == "kscope.report/1") {
    std::string error;
    std::optional<session_report> report = parse_report(json_text, &error);
    if (!report) {
      out.status = load_status::malformed;
      out.error = error;
      return out;
    }
    out.run = comparable_from_report(*report);
    return out;
  }
  if (out.schema == "kscope.bench/1") {
    comparable_load bench = detail::load_bench(doc);
    return bench;
  }
  if (out.schema == "kscope.merged/1") {
    out.status = load_status::not_comparable;
    out.error = "a merged multi-rank report (kscope.merged/1) cannot be gated: it keeps each rank's median without "
                "its interval, so every verdict would be inconclusive and the gate could never fail; compare the "
                "per-rank kscope.report/1 files instead (run.rank0.json against run.rank0.json)";
    return out;
  }
  out.status = load_status::not_kscope;
  out.error = "not a document kscope compare reads: schema \"" + detail::printable_name(out.schema) +
              "\" (it reads kscope.report/1 and kscope.bench/1)";
  return out;
}

// The warnings for two runs taken in different places: another GPU, driver or kscope
// version makes a changed time a property of the machine as much as of the change.
//   for (const std::string& w : kscope::environment_differences(a.environment, b.environment)) ...
[[nodiscard]] inline std::vector<std::string> environment_differences(const run_environment& baseline,
                                                                      const run_environment& candidate) {
  std::vector<std::string> out;
  const auto check = [&](const char* what, const std::string& b, const std::string& c) {
    // A message, printed as it is by the tool: the values from the files made printable.
    if (!b.empty() && !c.empty() && b != c)
      out.push_back(std::string(what) + " differs: baseline \"" + detail::printable_name(b) + "\", candidate \"" +
                    detail::printable_name(c) + "\"");
  };
  check("GPU", baseline.gpu, candidate.gpu);
  check("driver version", baseline.driver_version, candidate.driver_version);
  check("kscope version", baseline.kscope_version, candidate.kscope_version);
  return out;
}

// Compares every time both runs measured, by name and time. The runs should be of one
// format (the `kscope` tool refuses two formats before calling this).
//   kscope::report_comparison c = kscope::compare_runs(base.run, cand.run, {0.05, false});
[[nodiscard]] inline report_comparison compare_runs(const comparable_run& baseline, const comparable_run& candidate,
                                                    const compare_settings& settings = {}) {
  report_comparison out;
  out.threshold = settings.threshold;
  out.allow_missing = settings.allow_missing;
  out.format = candidate.format.empty() ? baseline.format : candidate.format;
  out.item = candidate.item;
  out.baseline_items = baseline.names.size();
  out.candidate_items = candidate.names.size();
  out.environment_warnings = environment_differences(baseline.environment, candidate.environment);
  const auto key = [](const timed_entry& e) { return e.name + '\0' + e.time; };
  std::unordered_map<std::string, const timed_entry*> base_entries, cand_entries;
  for (const timed_entry& e : baseline.entries) base_entries.emplace(key(e), &e);
  for (const timed_entry& e : candidate.entries) cand_entries.emplace(key(e), &e);
  const std::unordered_set<std::string> base_names(baseline.names.begin(), baseline.names.end());
  const std::unordered_set<std::string> cand_names(candidate.names.begin(), candidate.names.end());
  std::unordered_set<std::string> cand_timed;
  for (const timed_entry& e : candidate.entries) cand_timed.insert(e.name);

  for (const std::string& name : candidate.names)
    if (base_names.count(name) == 0) out.only_in_candidate.push_back(name);
  for (const timed_entry& c : candidate.entries) {
    const auto b = base_entries.find(key(c));
    if (b == base_entries.end()) continue;
    out.scopes.push_back(scope_comparison{c.name, c.time, b->second->ns.median, c.ns.median,
                                          compare_summaries(b->second->ns, c.ns, settings.threshold)});
  }
  // Baseline times the candidate lacks: a whole scope (gone, or no longer timed), or one
  // of its times (e.g. the GPU time of a scope that lost its stream).
  std::unordered_set<std::string> reported;
  for (const timed_entry& b : baseline.entries) {
    if (cand_entries.count(key(b))) continue;
    if (cand_timed.count(b.name)) {
      out.missing_times.push_back(b.name + ": " + b.time);
    } else if (reported.insert(b.name).second) {
      out.only_in_baseline.push_back(cand_names.count(b.name) ? b.name + " (no timed calls in candidate)" : b.name);
    }
  }
  return out;
}

// Compares every scope path found in both reports: its host time when both have calls,
// its GPU time when both have GPU calls. threshold is the relative change that matters
// (0.02: a ratio within 1 +- 2 % is "same" when its interval stays inside that band).
//   kscope::report_comparison c = kscope::compare_reports(baseline, candidate, 0.05);
[[nodiscard]] inline report_comparison compare_reports(const session_report& baseline,
                                                       const session_report& candidate,
                                                       const compare_settings& settings) {
  return compare_runs(comparable_from_report(baseline), comparable_from_report(candidate), settings);
}
[[nodiscard]] inline report_comparison compare_reports(const session_report& baseline,
                                                       const session_report& candidate,
                                                       double threshold = compare_options{}.threshold) {
  compare_settings settings;
  settings.threshold = threshold;
  return compare_reports(baseline, candidate, settings);
}

inline std::string report_comparison::failure() const {
  const std::string items = item + "s";
  switch (gate()) {
    case gate_result::pass: return "";
    case gate_result::slower: return std::to_string(count(verdict::slower)) + " slower";
    case gate_result::nothing_compared: {
      std::string why = "nothing compared: the two runs share no timed " + item + " (baseline: " +
                        std::to_string(baseline_items) + " " + items + ", candidate: " +
                        std::to_string(candidate_items) + ")";
      if (baseline_items == 0 || candidate_items == 0)
        why += std::string("; the ") + (baseline_items == 0 ? "baseline" : "candidate") + " has no " + items +
               (item == "scope" ? " (a run with KSCOPE=0, or without instrumentation?)" : "");
      else
        why += "; renamed " + items + ", or two unrelated runs?";
      return why;
    }
    case gate_result::missing:
      return std::to_string(missing_count()) + " baseline time" + (missing_count() == 1 ? "" : "s") +
             " missing in the candidate (allow_missing, --allow-missing in the tool, accepts that)";
  }
  return "";
}

inline std::string report_comparison::text() const {
  const std::string items = item + "s";
  std::string out = "kscope compare (" + format + "; threshold " + detail::format_fixed(threshold * 100, 1) +
                    "%; on medians and their 95% intervals only" +
                    (format == "kscope.report/1" ? std::string(": reports hold no samples") : std::string()) + ")\n";
  using detail::printable_name;
  for (const std::string& w : environment_warnings) out += detail::wrap("warning: " + printable_name(w), 98);
  if (!environment_warnings.empty())
    out += detail::wrap("(runs from different machines or versions: a change may be theirs, not the code's)", 98);
  // name 34 | time 5 | baseline 10 | candidate 10 | ratio 8 | verdict
  out += detail::fit(item, 34) + detail::fit("time", 5) + detail::fit("baseline", 10, true) +
         detail::fit("candidate", 10, true) + detail::fit("ratio", 8, true) + "  verdict\n";
  out += std::string(81, '-') + "\n";
  for (const scope_comparison& s : scopes) {
    const std::string ratio = std::isfinite(s.result.ratio) ? detail::format_fixed(s.result.ratio, 3) : "-";
    out += detail::fit(printable_name(s.path), 34) + detail::fit(printable_name(s.time), 5) +
           detail::fit(format_duration_ns(s.baseline_median_ns), 10, true) +
           detail::fit(format_duration_ns(s.candidate_median_ns), 10, true) + detail::fit(ratio, 8, true) + "  " +
           to_string(s.result.result) + "\n";
  }
  for (const std::string& path : only_in_candidate) out += detail::fit(printable_name(path), 34) + "(new in candidate)\n";
  for (const std::string& path : only_in_baseline) out += detail::fit(printable_name(path), 34) + "(missing in candidate)\n";
  for (const std::string& t : missing_times) out += detail::fit(printable_name(t), 34) + "(time missing in candidate)\n";
  out += detail::wrap("ratio: candidate / baseline median. verdict: slower (faster) when the ratio's interval, "
                      "formed from the two median intervals, lies above 1 + threshold (below 1 - threshold); "
                      "same when it lies within 1 +- threshold; inconclusive otherwise, and when a median has no "
                      "interval (fewer than 6 samples at 95%). Slower fails the gate, and so do nothing compared "
                      "and a baseline time missing in the candidate.",
                      98);
  const gate_result g = gate();
  if (g == gate_result::slower && missing_count() > 0 && !allow_missing)
    out += std::to_string(missing_count()) + " baseline time" + (missing_count() == 1 ? "" : "s") +
           " missing in the candidate\n";
  if (allow_missing && missing_count() > 0)
    out += std::to_string(missing_count()) + " baseline time" + (missing_count() == 1 ? "" : "s") +
           " missing in the candidate (allowed)\n";
  if (g == gate_result::pass) out += "no " + item + " slower: PASS\n";
  else out += detail::wrap(failure() + ": FAIL", 98);
  return detail::printable_text(out);  // the last guard, as in session_report::text()
}

}  // namespace kscope
