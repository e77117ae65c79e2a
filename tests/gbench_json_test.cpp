// Tests for kscope/report/gbench_json.hpp (reading Google Benchmark JSON) and the parts of
// report/compare.hpp that `kscope compare` builds on it: the Google Benchmark runs as the
// gate sees them, per-name thresholds (parse_thresholds, rule_for), and the Markdown and
// JSON printers. The fixtures are tests/data/gbench_*.json, in the layout Google Benchmark
// 1.7 writes with --benchmark_repetitions=10 (the CLI cases on the same files are in
// tools/CMakeLists.txt).
#include <kscope/report/compare.hpp>
#include <kscope/report/gbench_json.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace gbench_json_test {  // one per file: the unit tests build as one program

namespace {

std::string read_fixture(const std::string& name) {
  const std::string path = std::string(KSCOPE_TEST_DATA_DIR) + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE_MESSAGE(f != nullptr, path);
  std::string text;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

// One "iteration" entry as Google Benchmark writes it, with the members the reader uses.
std::string entry(const std::string& name, double real_time, const std::string& unit = "ns",
                  const std::string& extra = "") {
  char number[64];
  std::snprintf(number, sizeof number, "%.17g", real_time);
  return R"({"name": ")" + name + R"(", "run_name": ")" + name + R"(", "run_type": "iteration", "real_time": )" +
         number + R"(, "cpu_time": 1, "time_unit": ")" + unit + "\"" + extra + "}";
}

std::string document(const std::string& entries) {
  return R"({"context": {"host_name": "ci", "library_version": "v1.8.3"}, "benchmarks": [)" + entries + "]}";
}

kscope::comparable_load load_fixture(const std::string& name) { return kscope::load_comparable(read_fixture(name)); }

}  // namespace

TEST_CASE("parse_gbench_json: repetitions become samples, in nanoseconds, per run name") {
  const kscope::gbench_parse_result r = kscope::parse_gbench_json(read_fixture("gbench_baseline.json"));
  REQUIRE(r.ok());
  CHECK(r.host == "ci-runner");
  REQUIRE(r.benchmarks.size() == 3);
  CHECK(r.benchmarks[0].name == "BM_copy/4096");
  CHECK(r.benchmarks[1].name == "BM_saxpy/1048576/manual_time");
  CHECK(r.benchmarks[2].name == "BM_reduce/65536");
  for (const kscope::gbench_benchmark& b : r.benchmarks) {
    CHECK(b.real_time_ns.size() == 10);
    CHECK(b.error.empty());
  }
  // "us" in the file: 61.3 us around +-0.4 %, read as nanoseconds.
  for (double t : r.benchmarks[1].real_time_ns) CHECK(t == doctest::Approx(61300).epsilon(0.005));
  // The aggregates are kept too: the median, not the mean that precedes it in the file.
  CHECK(r.benchmarks[0].aggregate_median_ns == doctest::Approx(1450).epsilon(0.005));
}

TEST_CASE("parse_gbench_json: units, aggregates, errors") {
  SUBCASE("every unit Google Benchmark writes") {
    const auto r = kscope::parse_gbench_json(
        document(entry("a", 2, "ns") + "," + entry("b", 2, "us") + "," + entry("c", 2, "ms") + "," + entry("d", 2, "s")));
    REQUIRE(r.ok());
    CHECK(r.benchmarks[0].real_time_ns[0] == 2.0);
    CHECK(r.benchmarks[1].real_time_ns[0] == 2e3);
    CHECK(r.benchmarks[2].real_time_ns[0] == 2e6);
    CHECK(r.benchmarks[3].real_time_ns[0] == 2e9);
  }
  SUBCASE("aggregates only: the median, whatever its place; stddev and cv are not times") {
    const std::string agg = R"({"name": "x_%s", "run_name": "x", "run_type": "aggregate", "aggregate_name": "%s",
                                "real_time": %s, "time_unit": "ns"})";
    const auto make = [&](const char* which, const char* value) {
      char text[300];
      std::snprintf(text, sizeof text, agg.c_str(), which, which, value);
      return std::string(text);
    };
    const auto r = kscope::parse_gbench_json(
        document(make("median", "10") + "," + make("mean", "12") + "," + make("stddev", "3") + "," + make("cv", "0.3")));
    REQUIRE(r.ok());
    REQUIRE(r.benchmarks.size() == 1);
    CHECK(r.benchmarks[0].real_time_ns.empty());
    CHECK(r.benchmarks[0].aggregate_median_ns == 10.0);
    const auto mean_only = kscope::parse_gbench_json(document(make("mean", "12") + "," + make("stddev", "3")));
    REQUIRE(mean_only.ok());
    CHECK(mean_only.benchmarks[0].aggregate_median_ns == 12.0);
  }
  SUBCASE("a failed benchmark keeps its name and message, no time") {
    const auto r = kscope::parse_gbench_json(
        document(entry("ok", 5) + "," + entry("bad", 0, "ns", R"(, "error_occurred": true, "error_message": "no GPU")")));
    REQUIRE(r.ok());
    REQUIRE(r.benchmarks.size() == 2);
    CHECK(r.benchmarks[1].name == "bad");
    CHECK(r.benchmarks[1].real_time_ns.empty());
    CHECK(r.benchmarks[1].error == "no GPU");
  }
  SUBCASE("malformed entries are errors naming the entry, never dropped") {
    const auto bad_unit = kscope::parse_gbench_json(document(entry("a", 1) + "," + entry("b", 1, "fortnights")));
    CHECK_FALSE(bad_unit.ok());
    CHECK(bad_unit.benchmarks.empty());
    CHECK(bad_unit.error == "malformed Google Benchmark JSON: benchmarks[1] (\"b\"): unknown \"time_unit\" \"fortnights\"");
    const auto negative = kscope::parse_gbench_json(document(entry("a", -1)));
    CHECK(negative.error.find("\"real_time\" must be a finite time >= 0, got -1") != std::string::npos);
    const auto no_name = kscope::parse_gbench_json(document(R"({"real_time": 1})"));
    CHECK(no_name.error == "malformed Google Benchmark JSON: benchmarks[0] has no \"name\"");
    const auto no_time = kscope::parse_gbench_json(document(R"({"name": "a", "real_time": "fast"})"));
    CHECK(no_time.error.find("no numeric \"real_time\"") != std::string::npos);
    const auto run_type = kscope::parse_gbench_json(document(R"({"name": "a", "run_type": "warmup", "real_time": 1})"));
    CHECK(run_type.error.find("unknown \"run_type\" \"warmup\"") != std::string::npos);
    const auto not_json = kscope::parse_gbench_json("{\"context\": ");
    CHECK(not_json.error.rfind("not valid JSON: ", 0) == 0);
  }
}

TEST_CASE("is_gbench_json: Google Benchmark's shape only, never a kscope document") {
  const auto parse = [](const char* text) { return kscope::detail::parse_json(text).value; };
  CHECK(kscope::is_gbench_json(parse(R"({"context": {}, "benchmarks": []})")));
  CHECK_FALSE(kscope::is_gbench_json(parse(R"({"schema": "kscope.bench/1", "context": {}, "benchmarks": []})")));
  CHECK_FALSE(kscope::is_gbench_json(parse(R"({"benchmarks": []})")));
  CHECK_FALSE(kscope::is_gbench_json(parse(R"({"context": [], "benchmarks": []})")));
  CHECK_FALSE(kscope::is_gbench_json(parse(R"([1, 2])")));
}

TEST_CASE("load_comparable on Google Benchmark JSON: real time per benchmark with a median interval") {
  const kscope::comparable_load base = load_fixture("gbench_baseline.json");
  REQUIRE(base.ok());
  CHECK(base.run.format == std::string(kscope::gbench_format));
  CHECK(base.run.item == "benchmark");
  REQUIRE(base.run.entries.size() == 3);
  const kscope::timed_entry& copy = base.run.entries[0];
  CHECK(copy.time == "real");
  CHECK(copy.ns.n == 10);  // no warm-up removed: each repetition is warmed up already
  CHECK(copy.ns.median == doctest::Approx(1450).epsilon(0.005));
  CHECK(copy.ns.median_ci.lo < copy.ns.median);
  CHECK(copy.ns.median_ci.hi > copy.ns.median);

  const kscope::comparable_load regressed = load_fixture("gbench_regressed.json");
  REQUIRE(regressed.ok());
  const kscope::report_comparison c = kscope::compare_runs(base.run, regressed.run);
  REQUIRE(c.scopes.size() == 3);
  CHECK(c.scopes[0].result.result == kscope::verdict::same);
  CHECK(c.scopes[1].path == "BM_saxpy/1048576/manual_time");
  CHECK(c.scopes[1].result.result == kscope::verdict::slower);
  CHECK(c.scopes[1].result.ratio == doctest::Approx(1.12).epsilon(0.005));
  CHECK(c.gate() == kscope::gate_result::slower);

  // Aggregates only: medians, no interval, so inconclusive, and the table says why.
  const kscope::comparable_load aggregates = load_fixture("gbench_aggregates_only.json");
  REQUIRE(aggregates.ok());
  const kscope::report_comparison a = kscope::compare_runs(base.run, aggregates.run);
  CHECK(a.count(kscope::verdict::inconclusive) == 3);
  CHECK(a.without_interval() == 3);
  CHECK(a.text().find("--benchmark_repetitions=10") != std::string::npos);

  // A benchmark that failed in the candidate is missing there, and the gate says so.
  const kscope::comparable_load error = load_fixture("gbench_error.json");
  REQUIRE(error.ok());
  CHECK(error.run.names.size() == 3);
  CHECK(error.run.entries.size() == 2);
  const kscope::report_comparison e = kscope::compare_runs(base.run, error.run);
  CHECK(e.gate() == kscope::gate_result::missing);

  const kscope::comparable_load bad = load_fixture("gbench_bad_unit.json");
  CHECK(bad.status == kscope::load_status::malformed);
  CHECK(bad.error.find("fortnights") != std::string::npos);
}

TEST_CASE("parse_thresholds: fractions and percentages, names with spaces, errors with line numbers") {
  const kscope::threshold_rules_parse t = kscope::parse_thresholds(
      "# comment\n\n  0.05 decode\n5%\tgemm (n=*)\r\n0 step/allreduce\n");
  REQUIRE(t.ok());
  REQUIRE(t.rules.size() == 3);
  CHECK(t.rules[0].pattern == "decode");
  CHECK(t.rules[0].threshold == 0.05);
  CHECK(t.rules[0].line == 3);
  CHECK(t.rules[1].pattern == "gemm (n=*)");
  CHECK(t.rules[1].threshold == doctest::Approx(0.05));
  CHECK(t.rules[1].line == 4);
  CHECK(t.rules[2].threshold == 0.0);

  CHECK(kscope::parse_thresholds("").rules.empty());
  CHECK(kscope::parse_thresholds("decode 0.05\n").error.rfind("line 1: expected \"THRESHOLD NAME\"", 0) == 0);
  CHECK(kscope::parse_thresholds("# x\n0.05\n").error == "line 2: a threshold without a scope or benchmark name");
  CHECK_FALSE(kscope::parse_thresholds("-0.1 decode\n").ok());
  CHECK_FALSE(kscope::parse_thresholds("10 decode\n").ok());    // a fraction: 10 would be 1000 %
  CHECK_FALSE(kscope::parse_thresholds("nan decode\n").ok());
  CHECK_FALSE(kscope::parse_thresholds("0,05 decode\n").ok());  // '.' is the decimal point, always
  CHECK(kscope::parse_thresholds("150% decode\n").rules.at(0).threshold == doctest::Approx(1.5));
}

TEST_CASE("compare_settings::rule_for: exact name, then the longest pattern, then the first") {
  kscope::compare_settings s;
  s.threshold = 0.02;
  s.rules = kscope::parse_thresholds("0.10 gemm*\n0.20 gemm (n=*)\n0.30 gemm (n=4096)\n0.40 *\n0.50 gemm*\n").rules;
  CHECK(s.threshold_for("gemm (n=4096)") == 0.30);  // exact
  CHECK(s.threshold_for("gemm (n=8192)") == 0.20);  // longest pattern
  CHECK(s.threshold_for("gemm_fp8") == 0.10);       // "gemm*" twice: the first
  CHECK(s.threshold_for("copy") == 0.40);
  s.rules.pop_back();
  s.rules.pop_back();
  CHECK(s.threshold_for("copy") == 0.02);           // no rule: the default
  CHECK(kscope::detail::threshold_pattern_matches("a*b*c", "aXXbYYc"));
  CHECK(kscope::detail::threshold_pattern_matches("*", ""));
  CHECK_FALSE(kscope::detail::threshold_pattern_matches("a*b", "aXXc"));
  CHECK_FALSE(kscope::detail::threshold_pattern_matches("abc", "abcd"));
  // A pattern with many stars against a long name ends quickly (one backtrack point).
  CHECK_FALSE(kscope::detail::threshold_pattern_matches(std::string(64, '*') + "b", std::string(100000, 'a')));
}

TEST_CASE("compare_runs with rules: each name judged with its threshold; unused rules reported") {
  const kscope::comparable_load base = load_fixture("gbench_baseline.json");
  const kscope::comparable_load regressed = load_fixture("gbench_regressed.json");
  REQUIRE(base.ok());
  REQUIRE(regressed.ok());
  kscope::compare_settings s;
  s.rules = kscope::parse_thresholds(read_fixture("gbench_thresholds.txt")).rules;
  s.rules.push_back(kscope::threshold_rule{"BM_sxapy/*", 0.5, 0});  // a typo: matches nothing
  const kscope::report_comparison c = kscope::compare_runs(base.run, regressed.run, s);
  REQUIRE(c.scopes.size() == 3);
  CHECK(c.scopes[0].threshold == 0.01);
  CHECK(c.scopes[1].threshold == doctest::Approx(0.15));
  CHECK(c.scopes[1].result.result == kscope::verdict::same);  // 1.12 within 1 +- 0.15
  CHECK(c.scopes[2].threshold == 0.02);
  CHECK(c.gate() == kscope::gate_result::pass);
  CHECK(c.rules == 3);
  REQUIRE(c.unused_rules.size() == 1);
  CHECK(c.unused_rules[0] == "BM_sxapy/*");
  CHECK(c.text().find("warning: threshold rule \"BM_sxapy/*\" matched no compared benchmark") != std::string::npos);
}

TEST_CASE("report_comparison::markdown: verdict heading, table, and names that cannot break it") {
  kscope::comparable_run base, cand;
  base.format = cand.format = "kscope.report/2";
  kscope::summary s{};
  s.n = 20;
  s.median = 1000;
  s.median_ci = kscope::interval{990, 1010, 0.95};
  kscope::summary slow = s;
  slow.median = 1500;
  slow.median_ci = kscope::interval{1490, 1510, 0.95};
  const std::string hostile = "a|b<script>`x`*_";
  base.names = cand.names = {hostile, "ok"};
  base.entries = {{hostile, "host", s}, {"ok", "host", s}};
  cand.entries = {{hostile, "host", slow}, {"ok", "host", s}};
  const kscope::report_comparison c = kscope::compare_runs(base, cand);
  const std::string md = c.markdown();
  CHECK(md.rfind("### kscope compare: FAIL (1 slower)\n", 0) == 0);
  CHECK(md.find("| a\\|b&lt;script&gt;\\`x\\`\\*\\_ | host | 1.00 us | 1.50 us | 1.500 | [1.475, 1.525] | **slower** |") !=
        std::string::npos);
  CHECK(md.find("| ok | host | 1.00 us | 1.00 us | 1.000 | [0.980, 1.020] |") != std::string::npos);
  CHECK(md.find("<script>") == std::string::npos);
  // The header names the level the ratio's interval was formed at (0.95 x 0.95), not 95 %.
  CHECK(c.scopes[0].result.ratio_ci.level == doctest::Approx(0.9025));
  CHECK(md.find("| ratio CI (90.25 %) | verdict |") != std::string::npos);
  CHECK(md.find("95 % CI") == std::string::npos);
  const kscope::report_comparison pass = kscope::compare_runs(base, base);
  CHECK(pass.markdown().rfind("### kscope compare: PASS\n", 0) == 0);
  // A row whose interval was formed at another level says its own.
  kscope::comparable_run wide = cand;
  kscope::summary s99 = s;
  s99.median_ci.level = 0.99;
  wide.entries = {{hostile, "host", slow}, {"ok", "host", s99}};
  const std::string mixed = kscope::compare_runs(base, wide).markdown();
  CHECK(mixed.find("| ratio CI (90.25 %) |") != std::string::npos);
  CHECK(mixed.find("[0.980, 1.020] (94.05 %)") != std::string::npos);
}

TEST_CASE("report_comparison::json: a kscope.compare/1 document that reads back") {
  const kscope::comparable_load base = load_fixture("gbench_baseline.json");
  const kscope::comparable_load regressed = load_fixture("gbench_regressed.json");
  REQUIRE(base.ok());
  REQUIRE(regressed.ok());
  const kscope::report_comparison c = kscope::compare_runs(base.run, regressed.run);
  const kscope::detail::json_parse_result doc = kscope::detail::parse_json(c.json());
  REQUIRE(doc.ok());
  const kscope::detail::json_value& v = doc.value;
  CHECK(v.member_string("schema") == "kscope.compare/1");
  CHECK(v.member_string("format") == "Google Benchmark JSON");
  CHECK(v.member_string("gate") == "slower");
  CHECK_FALSE(v.member_bool("passed", true));
  CHECK(v.member_string("failure") == "1 slower");
  CHECK(v.member_number("threshold", 0) == 0.02);
  const kscope::detail::json_value* list = v.find("comparisons");
  REQUIRE(list != nullptr);
  REQUIRE(list->items.size() == 3);
  const kscope::detail::json_value& saxpy = list->items[1];
  CHECK(saxpy.member_string("name") == "BM_saxpy/1048576/manual_time");
  CHECK(saxpy.member_string("time") == "real");
  CHECK(saxpy.member_string("verdict") == "slower");
  CHECK(saxpy.member_number("ratio", 0) == doctest::Approx(c.scopes[1].result.ratio));
  CHECK(saxpy.find("ratio_ci")->member_number("lo", 0) > 1.02);
  for (const char* key : {"only_in_candidate", "only_in_baseline", "missing_times", "unused_rules", "environment_warnings"})
    CHECK_MESSAGE(v.find(key) != nullptr, key);
}

}  // namespace gbench_json_test
