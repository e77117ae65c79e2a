// kscope/report/compare.hpp — two runs compared name by name: the CI gate behind
// `kscope compare`.
//
// Reads session reports ("kscope.report/2" or /1: every scope's host and GPU per-call times),
// benchmark results ("kscope.bench/2" or /1: every benchmark's GPU time per launch) and Google
// Benchmark JSON (each benchmark's real time per iteration, its repetitions as samples:
// gbench_json.hpp). All become summaries for the gate, so every time is compared with compare_summaries()
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
// The threshold may differ per scope or benchmark (parse_thresholds: a small file of
// "0.05 decode" lines), and the outcome prints as text, Markdown (a PR comment) or JSON
// ("kscope.compare/1", for scripts).
//
//   kscope::comparable_load base = kscope::load_comparable(baseline_json);
//   kscope::comparable_load cand = kscope::load_comparable(candidate_json);
//   if (!base.ok() || !cand.ok()) return 3;                     // .error says why
//   kscope::report_comparison c = kscope::compare_runs(base.run, cand.run);   // 2 % threshold
//   std::fputs(c.text().c_str(), stdout);
//   return c.gate() == kscope::gate_result::pass ? 0 : 1;
#pragma once

#include "../core/detail/json_reader.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/text_escape.hpp"  // names from the compared files, printed safely
#include "../core/stats.hpp"
#include "../device/device_info.hpp"
#include "gbench_json.hpp"
#include "merge.hpp"
#include "report.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kscope {

// One time of one run, as the gate compares it: a scope's host or GPU per-call time, or
// a benchmark's GPU time per launch. Nanoseconds, whatever the document's unit.
// What follows a cross-thread range's path in the names compared ("request ~"): the text
// report's mark for a range, which the recorder keeps apart from a scope of the same path.
inline constexpr const char* cross_thread_range_mark = " ~";

struct timed_entry {
  std::string name;  // scope path ("request ~" for a range), or benchmark name with its parameters: "gemm (n=4096)"
  std::string time;  // "host" or "gpu"; "real" for Google Benchmark
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
  std::string format;                // "kscope.report/2", "kscope.bench/2" (/1 files too) or gbench_format
  std::string item = "scope";        // what its names are: "scope" or "benchmark"
  run_environment environment;
  std::vector<std::string> names;    // every scope or benchmark, timed or not, in order
  std::vector<timed_entry> entries;  // the times it measured, in order
};

// The format name of Google Benchmark JSON in comparable_run::format and the tables.
inline constexpr const char* gbench_format = "Google Benchmark JSON";

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

  [[nodiscard]] bool ok() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool comparable_load::ok() const noexcept { return status == load_status::ok; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One compared time of one scope or benchmark.
struct scope_comparison {
  std::string path;  // scope path or benchmark name
  std::string time;  // "host", "gpu" or "real": which time was compared
  double baseline_median_ns = detail::stats_nan;
  double candidate_median_ns = detail::stats_nan;
  comparison result;  // compare_summaries(): ratio, ratio_ci, verdict; p_value NaN (no samples)
  double threshold = compare_options{}.threshold;  // the threshold this name was judged with
};

// A threshold for the names matching `pattern`: a scope path or benchmark name, where '*'
// stands for any run of characters ("gemm (n=*)", "step/*").
struct threshold_rule {
  std::string pattern;
  double threshold = compare_options{}.threshold;
  std::size_t line = 0;  // where it came from in a thresholds file (0: made in code)
};

// The outcome of parse_thresholds(): `rules` is meaningful when ok().
struct threshold_rules_parse {
  std::vector<threshold_rule> rules;
  std::string error;  // "line 3: ..." when the file is malformed

  [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

namespace detail {

// Whether `name` matches `pattern`, '*' matching any run of characters (none included).
// Iterative with one backtrack point, so hostile patterns cost O(name x pattern) at most.
[[nodiscard]] KSCOPE_DECL bool threshold_pattern_matches(std::string_view pattern, std::string_view name) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool threshold_pattern_matches(std::string_view pattern, std::string_view name) noexcept {
  std::size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Reads a thresholds file: one rule per line, "THRESHOLD NAME", the threshold a fraction
// (0.05) or a percentage (5%), the name the rest of the line (it may hold spaces, and '*'
// as a wildcard). Blank lines and lines starting with '#' are skipped.
//   # thresholds.txt: sampling is noisy; every size of gemm may move 5 %
//   0.10  sample
//   5%    gemm (n=*)
//   kscope::threshold_rules_parse t = kscope::parse_thresholds(text);
//   if (!t.ok()) std::fprintf(stderr, "%s\n", t.error.c_str());
[[nodiscard]] KSCOPE_DECL threshold_rules_parse parse_thresholds(std::string_view text);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL threshold_rules_parse parse_thresholds(std::string_view text) {
  threshold_rules_parse out;
  constexpr std::size_t max_rules = std::size_t{1} << 16;  // the file is small; bound it anyway
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
    while (!line.empty() && blank(line.front())) line.remove_prefix(1);
    while (!line.empty() && blank(line.back())) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = "line " + std::to_string(line_number) + ": ";
    std::size_t split = 0;
    while (split < line.size() && !blank(line[split])) ++split;
    std::string_view number = line.substr(0, split);
    std::string_view name = line.substr(split);
    while (!name.empty() && blank(name.front())) name.remove_prefix(1);
    const bool percent = !number.empty() && number.back() == '%';
    if (percent) number.remove_suffix(1);
    double value = 0;
    // parse_double reads '.' as the decimal point whatever the C locale of the host program.
    if (!detail::parse_double(number, value) || !(value >= 0) || !(value < (percent ? 1000.0 : 10.0))) {
      out.error = where + "expected \"THRESHOLD NAME\" with THRESHOLD a fraction in [0, 10) (0.05) or a "
                  "percentage (5%), got \"" + detail::printable_name(line) + "\"";
      return out;
    }
    if (name.empty()) {
      out.error = where + "a threshold without a scope or benchmark name";
      return out;
    }
    if (out.rules.size() == max_rules) {
      out.error = where + "more than " + std::to_string(max_rules) + " rules";
      return out;
    }
    out.rules.push_back(threshold_rule{std::string(name), percent ? value / 100.0 : value, line_number});
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// How compare_runs() judges.
//   kscope::compare_settings s;
//   s.threshold = 0.05;        // a 5 % change matters
//   s.allow_missing = true;    // a scope dropped on purpose does not fail the gate
//   s.rules = kscope::parse_thresholds("0.10 sample\n").rules;   // per name
struct compare_settings {
  double threshold = compare_options{}.threshold;  // relative change that matters
  bool allow_missing = false;  // baseline times absent from the candidate do not fail the gate
  std::vector<threshold_rule> rules;  // per-name thresholds (parse_thresholds); the rest get `threshold`

  // The rule deciding `name`: an exact name before any pattern, then the longest pattern
  // (the most specific), then the first in the file; nullptr when none matches. A range's
  // name ("request ~", cross_thread_range_mark) that no rule matches is matched as its path.
  [[nodiscard]] const threshold_rule* rule_for(std::string_view name) const noexcept;
  // The threshold `name` is judged with.
  [[nodiscard]] double threshold_for(std::string_view name) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const threshold_rule* compare_settings::rule_for(std::string_view name) const noexcept {
  const threshold_rule* best = nullptr;
  bool best_exact = false;
  for (const threshold_rule& r : rules) {
    const bool exact = r.pattern == name;
    if (!exact && (r.pattern.find('*') == std::string::npos || !detail::threshold_pattern_matches(r.pattern, name)))
      continue;
    if (best == nullptr || (exact && !best_exact) ||
        (exact == best_exact && !exact && r.pattern.size() > best->pattern.size())) {
      best = &r;
      best_exact = exact;
    }
  }
  const std::string_view mark = cross_thread_range_mark;
  if (best == nullptr && name.size() > mark.size() && name.substr(name.size() - mark.size()) == mark)
    return rule_for(name.substr(0, name.size() - mark.size()));
  return best;
}

KSCOPE_DECL double compare_settings::threshold_for(std::string_view name) const noexcept {
  const threshold_rule* r = rule_for(name);
  return r != nullptr ? r->threshold : threshold;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

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
  std::string format = report_schema;          // what was compared
  std::string item = "scope";                  // "scope" or "benchmark"
  std::size_t baseline_items = 0;              // scopes (benchmarks) in the baseline
  std::size_t candidate_items = 0;             // and in the candidate
  std::vector<scope_comparison> scopes;        // in the candidate's order, host before gpu
  std::vector<std::string> only_in_candidate;  // names the baseline does not have
  std::vector<std::string> only_in_baseline;   // timed names the candidate lost
  std::vector<std::string> missing_times;      // "step: gpu": a time the candidate's scope no longer has
  std::vector<std::string> environment_warnings;  // "GPU differs: ..."
  std::size_t rules = 0;                       // per-name threshold rules given
  std::vector<std::string> unused_rules;       // "line 3: gemm (n=*)": a rule that matched no compared name

  // How many compared times got verdict `v`.
  [[nodiscard]] std::size_t count(verdict v) const noexcept;
  // The baseline's times the candidate lacks (whole scopes and single times).
  [[nodiscard]] std::size_t missing_count() const noexcept;
  // The gate: slower before nothing_compared before missing before pass.
  [[nodiscard]] gate_result gate() const noexcept;
  // One line saying why the gate failed ("" when it passed).
  [[nodiscard]] std::string failure() const;
  // How many compared times had no interval on one side (fewer than 6 samples at 95 %,
  // a Google Benchmark file without repetitions): those can only be inconclusive.
  [[nodiscard]] std::size_t without_interval() const noexcept;
  // The table `kscope compare` prints, ending in "PASS" or "FAIL" with the reason. Names
  // come from the compared files: each is printable_name()d (text_escape.hpp), so a scope
  // called "x\n... PASS" or one holding ESC sequences cannot forge or hide a line.
  [[nodiscard]] std::string text() const;
  // The same as a Markdown section for a pull-request comment: a heading with the
  // verdict, a table, the notes. Names are escaped so that they cannot break the table or
  // inject HTML ('|', '<', '>', '&', '`', '*', '_').
  [[nodiscard]] std::string markdown() const;
  // The same as a "kscope.compare/1" JSON document (docs/reference.md, "The `kscope` command-line tool"):
  // {"schema", "format", "item", "threshold", "allow_missing", "gate", "passed",
  //  "failure", "environment_warnings", "comparisons": [{"name", "time",
  //  "baseline_median_ns", "candidate_median_ns", "ratio", "ratio_ci": {"lo", "hi",
  //  "level"}, "threshold", "verdict"}], "only_in_candidate", "only_in_baseline",
  //  "missing_times", "unused_rules"}.
  [[nodiscard]] std::string json() const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t report_comparison::missing_count() const noexcept { return only_in_baseline.size() + missing_times.size(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t report_comparison::count(verdict v) const noexcept {
  std::size_t n = 0;
  for (const scope_comparison& s : scopes) n += s.result.result == v;
  return n;
}

KSCOPE_DECL gate_result report_comparison::gate() const noexcept {
  if (count(verdict::slower) > 0) return gate_result::slower;
  if (scopes.empty()) return gate_result::nothing_compared;
  if (!allow_missing && missing_count() > 0) return gate_result::missing;
  return gate_result::pass;
}

KSCOPE_DECL std::size_t report_comparison::without_interval() const noexcept {
  std::size_t n = 0;
  for (const scope_comparison& s : scopes) n += !std::isfinite(s.result.ratio_ci.lo) || !std::isfinite(s.result.ratio_ci.hi);
  return n;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// "pass", "slower", "nothing_compared" or "missing".
[[nodiscard]] constexpr const char* to_string(gate_result g) noexcept {
  switch (g) {
    case gate_result::pass: return "pass";
    case gate_result::slower: return "slower";
    case gate_result::nothing_compared: return "nothing_compared";
    case gate_result::missing: return "missing";
  }
  return "unknown";
}

namespace detail {

// Names the devices of a report's "gpu" array (device_info JSON objects).
KSCOPE_DECL void environment_from_devices(const json_value& gpus, run_environment& env);

// "gemm (n=4096 dtype=bf16)": a benchmark's name with its parameters, as the bench tables
// print it, so a sweep's points stay apart.
KSCOPE_DECL std::string bench_entry_name(const json_value& b);

// A benchmark's time_s summary (seconds) as a nanosecond summary for compare_summaries.
KSCOPE_DECL summary bench_summary_ns(const json_value& t);

// "#2", "#3" for the second and later uses of one name, so duplicates pair up in order.
KSCOPE_DECL void make_names_unique(std::vector<std::string>& names);

KSCOPE_DECL comparable_load load_bench(const json_value& doc);

// A Google Benchmark document as a run for the gate: each benchmark's real time per
// iteration, its repetitions summarized as samples (no warm-up removal: each repetition
// is already warmed up by the library). A benchmark that failed, or has neither
// repetitions nor an aggregate, is named but has no time, so a baseline time it lost is
// "missing".
KSCOPE_DECL comparable_load load_gbench(const json_value& doc);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void environment_from_devices(const json_value& gpus, run_environment& env) {
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

KSCOPE_DECL std::string bench_entry_name(const json_value& b) {
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

KSCOPE_DECL summary bench_summary_ns(const json_value& t) {
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

KSCOPE_DECL void make_names_unique(std::vector<std::string>& names) {
  std::unordered_map<std::string, std::size_t> seen;
  for (std::string& n : names) {
    const std::size_t k = ++seen[n];
    if (k > 1) n += " #" + std::to_string(k);
  }
}

KSCOPE_DECL comparable_load load_bench(const json_value& doc) {
  comparable_load out;
  out.schema = doc.member_string("schema", "kscope.bench/2");
  const json_value* benchmarks = doc.find("benchmarks");
  if (benchmarks == nullptr || !benchmarks->is_array()) {
    out.status = load_status::malformed;
    out.error = "malformed " + out.schema + " document: no \"benchmarks\" array";
    return out;
  }
  comparable_run& run = out.run;
  run.format = "kscope.bench/2";  // a /1 file too: the times are the same
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
      out.error = "malformed " + out.schema + " document: a benchmark without a \"name\"";
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

KSCOPE_DECL comparable_load load_gbench(const json_value& doc) {
  comparable_load out;
  out.schema = gbench_format;
  const gbench_parse_result g = read_gbench_json(doc);
  if (!g.ok()) {
    out.status = load_status::malformed;
    out.error = g.error;
    return out;
  }
  comparable_run& run = out.run;
  run.format = gbench_format;
  run.item = "benchmark";
  for (const gbench_benchmark& b : g.benchmarks) {
    run.names.push_back(b.name);
    summary s{};
    if (!b.real_time_ns.empty()) {
      s = summarize(b.real_time_ns, stats_options{0.95, false});
    } else if (std::isfinite(b.aggregate_median_ns)) {
      s.median = b.aggregate_median_ns;  // an aggregate without its repetitions: no interval
    } else {
      continue;
    }
    run.entries.push_back(timed_entry{b.name, "real", s});
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// The times of a session report: each scope's host time when it had calls, its GPU time
// when it had GPU-timed calls. The environment comes from its context.
//   kscope::comparable_run run = kscope::comparable_from_report(kscope::session::global().report());
[[nodiscard]] KSCOPE_DECL comparable_run comparable_from_report(const session_report& report);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL comparable_run comparable_from_report(const session_report& report) {
  comparable_run run;
  run.format = report_schema;  // a /1 file read too: the times are the same
  run.item = "scope";
  run.environment.kscope_version = report.context.kscope_version;
  if (!report.context.devices_json.empty()) {
    const detail::json_parse_result gpus = detail::parse_json(report.context.devices_json);
    if (gpus.ok()) detail::environment_from_devices(gpus.value, run.environment);
  } else if (!report.context.no_device_reason.empty() || !report.context.devices.empty()) {
    run.environment.gpu = report.context.devices.empty() ? "none" : "";
  }
  for (const scope_report& s : report.scopes) {
    // A range and a scope of one path are two nodes (the recorder keeps them apart): the
    // range is named as the text report marks it, so that neither is compared with the other.
    const std::string name = s.cross_thread ? s.path + cross_thread_range_mark : s.path;
    run.names.push_back(name);
    if (s.calls > 0) run.entries.push_back(timed_entry{name, "host", s.host_ns});
    if (s.gpu_calls > 0) run.entries.push_back(timed_entry{name, "gpu", s.gpu_ns});
  }
  return run;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Reads a kscope.report or kscope.bench document (/2 or /1), or Google Benchmark JSON, for the
// gate. Anything else gets a status and an error naming what it saw: not JSON, JSON of
// another kind, a malformed document, or a merged report (refused: no intervals to judge with).
//   kscope::comparable_load l = kscope::load_comparable(text);
//   if (!l.ok()) std::fprintf(stderr, "%s\n", l.error.c_str());
[[nodiscard]] KSCOPE_DECL comparable_load load_comparable(std::string_view json_text);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL comparable_load load_comparable(std::string_view json_text) {
  comparable_load out;
  const detail::json_parse_result parsed = detail::parse_json(json_text);
  if (!parsed.ok()) {
    out.status = load_status::not_json;
    out.error = "not valid JSON: " + parsed.error +
                " (kscope compare reads kscope.report and kscope.bench /2 and /1, and Google Benchmark JSON)";
    return out;
  }
  const detail::json_value& doc = parsed.value;
  if (is_gbench_json(doc)) return detail::load_gbench(doc);
  const detail::json_value* schema = doc.find("schema");
  if (!doc.is_object() || schema == nullptr || !schema->is_string()) {
    out.status = load_status::not_kscope;
    out.error = doc.is_object() ? "not a kscope document: JSON without a \"schema\" member (kscope compare reads "
                                  "kscope.report and kscope.bench /2 and /1, and Google Benchmark JSON)"
                                : "not a kscope document: the JSON is not an object (kscope compare reads "
                                  "kscope.report and kscope.bench /2 and /1, and Google Benchmark JSON)";
    return out;
  }
  out.schema = schema->string;
  if (out.schema == report_schema || out.schema == "kscope.report/1") {
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
  if (out.schema == "kscope.bench/2" || out.schema == "kscope.bench/1") {
    comparable_load bench = detail::load_bench(doc);
    return bench;
  }
  if (out.schema == "kscope.merged/1") {
    out.status = load_status::not_comparable;
    out.error = "a merged multi-rank report (kscope.merged/1) cannot be gated: it keeps each rank's median without "
                "its interval, so every verdict would be inconclusive and the gate could never fail; compare the "
                "per-rank kscope.report/2 files instead (run.rank0.json against run.rank0.json)";
    return out;
  }
  out.status = load_status::not_kscope;
  out.error = "not a document kscope compare reads: schema \"" + detail::printable_name(out.schema) +
              "\" (it reads kscope.report and kscope.bench /2 and /1, and Google Benchmark JSON)";
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The warnings for two runs taken in different places: another GPU, driver or kscope
// version makes a changed time a property of the machine as much as of the change.
//   for (const std::string& w : kscope::environment_differences(a.environment, b.environment)) ...
[[nodiscard]] KSCOPE_DECL std::vector<std::string> environment_differences(const run_environment& baseline,
                                                                      const run_environment& candidate);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> environment_differences(const run_environment& baseline,
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
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Compares every time both runs measured, by name and time. The runs should be of one
// format (the `kscope` tool refuses two formats before calling this).
//   kscope::report_comparison c = kscope::compare_runs(base.run, cand.run, {0.05, false});
[[nodiscard]] KSCOPE_DECL report_comparison compare_runs(const comparable_run& baseline, const comparable_run& candidate,
                                                    const compare_settings& settings = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL report_comparison compare_runs(const comparable_run& baseline, const comparable_run& candidate,
                                                    const compare_settings& settings) {
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
  out.rules = settings.rules.size();
  std::vector<bool> rule_used(settings.rules.size(), false);
  for (const timed_entry& c : candidate.entries) {
    const auto b = base_entries.find(key(c));
    if (b == base_entries.end()) continue;
    const threshold_rule* rule = settings.rule_for(c.name);
    if (rule != nullptr) rule_used[static_cast<std::size_t>(rule - settings.rules.data())] = true;
    const double threshold = rule != nullptr ? rule->threshold : settings.threshold;
    out.scopes.push_back(scope_comparison{c.name, c.time, b->second->ns.median, c.ns.median,
                                          compare_summaries(b->second->ns, c.ns, threshold), threshold});
  }
  // A rule that decided nothing is most often a typo or a renamed scope: say so, or its
  // threshold would silently not apply.
  for (std::size_t i = 0; i < settings.rules.size(); ++i)
    if (!rule_used[i])
      out.unused_rules.push_back((settings.rules[i].line > 0 ? "line " + std::to_string(settings.rules[i].line) + ": "
                                                             : std::string()) + settings.rules[i].pattern);
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
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Compares every scope path found in both reports: its host time when both have calls,
// its GPU time when both have GPU calls. threshold is the relative change that matters
// (0.02: a ratio within 1 +- 2 % is "same" when its interval stays inside that band).
//   kscope::report_comparison c = kscope::compare_reports(baseline, candidate, 0.05);
[[nodiscard]] KSCOPE_DECL report_comparison compare_reports(const session_report& baseline,
                                                       const session_report& candidate,
                                                       const compare_settings& settings);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL report_comparison compare_reports(const session_report& baseline,
                                                       const session_report& candidate,
                                                       const compare_settings& settings) {
  return compare_runs(comparable_from_report(baseline), comparable_from_report(candidate), settings);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS
[[nodiscard]] KSCOPE_DECL report_comparison compare_reports(const session_report& baseline,
                                                       const session_report& candidate,
                                                       double threshold = compare_options{}.threshold);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL report_comparison compare_reports(const session_report& baseline,
                                                       const session_report& candidate,
                                                       double threshold) {
  compare_settings settings;
  settings.threshold = threshold;
  return compare_reports(baseline, candidate, settings);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string report_comparison::failure() const {
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

KSCOPE_DECL std::string report_comparison::text() const {
  const std::string items = item + "s";
  std::string out = "kscope compare (" + format + "; threshold " + detail::format_fixed(threshold * 100, 1) + "%" +
                    (rules > 0 ? " and " + std::to_string(rules) + " per-name rule" + (rules == 1 ? "" : "s") : "") +
                    "; on medians and their 95% intervals only" +
                    (format == report_schema ? std::string(": reports hold no samples") : std::string()) + ")\n";
  using detail::printable_name;
  for (const std::string& w : environment_warnings) out += detail::wrap("warning: " + printable_name(w), 98);
  for (const std::string& r : unused_rules)
    out += detail::wrap("warning: threshold rule \"" + printable_name(r) + "\" matched no compared " + item, 98);
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
           to_string(s.result.result) +
           (s.threshold != threshold ? " (threshold " + detail::format_fixed(s.threshold * 100, 1) + "%)" : "") + "\n";
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
  if (const std::size_t n = without_interval(); n > 0)
    out += detail::wrap(std::to_string(n) + " of " + std::to_string(scopes.size()) +
                            " compared times have no interval and can only be inconclusive" +
                            (format == gbench_format ? ": run the benchmarks with --benchmark_repetitions=10 (at least 6)"
                                                     : ": fewer than 6 samples"),
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
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// A name from a compared file as Markdown table text: printable, and with the characters
// that would end a cell, start markup or open HTML written as entities or escaped.
KSCOPE_DECL std::string markdown_cell(std::string_view text);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string markdown_cell(std::string_view text) {
  const std::string printable = printable_name(text);
  std::string out;
  out.reserve(printable.size());
  for (char c : printable) {
    switch (c) {
      case '|': out += "\\|"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '`': case '*': case '_': case '[': case ']': case '\\': out += '\\'; out += c; break;
      default: out += c;
    }
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string report_comparison::markdown() const {
  using detail::markdown_cell;
  const gate_result g = gate();
  std::string out = "### kscope compare: " + std::string(g == gate_result::pass ? "PASS" : "FAIL");
  if (g != gate_result::pass) out += " (" + markdown_cell(failure()) + ")";
  out += "\n\n" + markdown_cell(format) + ", threshold " + detail::format_fixed(threshold * 100, 1) + " %";
  if (rules > 0) out += " and " + std::to_string(rules) + " per-name rule" + (rules == 1 ? "" : "s");
  out += "; medians and their 95 % intervals.\n\n";
  for (const std::string& w : environment_warnings) out += "> warning: " + markdown_cell(w) + "\n";
  for (const std::string& r : unused_rules)
    out += "> warning: threshold rule \"" + markdown_cell(r) + "\" matched no compared " + item + "\n";
  if (!environment_warnings.empty() || !unused_rules.empty()) out += "\n";
  // The ratio's interval carries the level it was formed at (the product of the two median
  // intervals' levels, 90.25 % for two 95 % intervals): the header prints that level, and a
  // row formed at another level (a report with other intervals) says its own.
  double common_level = std::numeric_limits<double>::quiet_NaN();
  for (const scope_comparison& s : scopes)
    if (std::isfinite(s.result.ratio_ci.level)) {
      common_level = s.result.ratio_ci.level;
      break;
    }
  const auto level_text = [](double level) { return detail::format_general(100 * level, 4) + " %"; };
  out += "| " + item + " | time | baseline | candidate | ratio | ratio CI" +
         (std::isfinite(common_level) ? " (" + level_text(common_level) + ")" : std::string()) + " | verdict |\n";
  out += "|---|---|---:|---:|---:|---|---|\n";
  for (const scope_comparison& s : scopes) {
    const bool has_ci = std::isfinite(s.result.ratio_ci.lo) && std::isfinite(s.result.ratio_ci.hi);
    const std::string v = to_string(s.result.result);
    out += "| " + markdown_cell(s.path) + " | " + markdown_cell(s.time) + " | " + format_duration_ns(s.baseline_median_ns) +
           " | " + format_duration_ns(s.candidate_median_ns) + " | " +
           (std::isfinite(s.result.ratio) ? detail::format_fixed(s.result.ratio, 3) : "-") + " | " +
           (has_ci ? "[" + detail::format_fixed(s.result.ratio_ci.lo, 3) + ", " +
                         detail::format_fixed(s.result.ratio_ci.hi, 3) + "]" +
                         (std::isfinite(s.result.ratio_ci.level) && s.result.ratio_ci.level != common_level
                              ? " (" + level_text(s.result.ratio_ci.level) + ")"
                              : std::string())
                   : "-") +
           " | " + (s.result.result == verdict::slower ? "**" + v + "**" : v) +
           (s.threshold != threshold ? " (threshold " + detail::format_fixed(s.threshold * 100, 1) + " %)" : "") +
           " |\n";
  }
  for (const std::string& p : only_in_candidate) out += "| " + markdown_cell(p) + " | | | | | | new in candidate |\n";
  for (const std::string& p : only_in_baseline) out += "| " + markdown_cell(p) + " | | | | | | **missing in candidate** |\n";
  for (const std::string& t : missing_times) out += "| " + markdown_cell(t) + " | | | | | | **time missing in candidate** |\n";
  if (const std::size_t n = without_interval(); n > 0)
    out += "\n" + std::to_string(n) + " of " + std::to_string(scopes.size()) +
           " compared times have no interval and can only be inconclusive" +
           (format == gbench_format ? " (run the benchmarks with `--benchmark_repetitions=10`)." : " (fewer than 6 samples).") +
           "\n";
  out += "\nratio: candidate / baseline median; its interval is formed from the two median intervals and holds "
         "at least the product of their levels; slower (faster) when it lies above 1 + threshold "
         "(below 1 - threshold).\n";
  return out;
}

KSCOPE_DECL std::string report_comparison::json() const {
  std::string out;
  detail::json_writer w(out);
  const gate_result g = gate();
  const auto strings = [&](const char* key, const std::vector<std::string>& list) {
    w.key(key).begin_array();
    for (const std::string& s : list) w.value(s);
    w.end_array();
  };
  w.begin_object();
  w.member("schema", "kscope.compare/1");
  w.member("format", format);
  w.member("item", item);
  w.member("threshold", threshold);
  w.member("allow_missing", allow_missing);
  w.member("gate", to_string(g));
  w.member("passed", g == gate_result::pass);
  w.member("failure", failure());
  strings("environment_warnings", environment_warnings);
  w.key("comparisons").begin_array();
  for (const scope_comparison& s : scopes) {
    w.begin_object();
    w.member("name", s.path);
    w.member("time", s.time);
    w.member("baseline_median_ns", s.baseline_median_ns);
    w.member("candidate_median_ns", s.candidate_median_ns);
    w.member("ratio", s.result.ratio);
    w.key("ratio_ci").begin_object();
    w.member("lo", s.result.ratio_ci.lo);
    w.member("hi", s.result.ratio_ci.hi);
    w.member("level", s.result.ratio_ci.level);
    w.end_object();
    w.member("threshold", s.threshold);
    w.member("verdict", to_string(s.result.result));
    w.end_object();
  }
  w.end_array();
  strings("only_in_candidate", only_in_candidate);
  strings("only_in_baseline", only_in_baseline);
  strings("missing_times", missing_times);
  strings("unused_rules", unused_rules);
  w.end_object();
  out += '\n';
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
