// Tests for kscope/report/compare.hpp: the gate behind `kscope compare` never passes by
// accident. Documents of each kind are loaded (report, bench, merged, unrelated, not JSON),
// the gate's four outcomes are produced from hand-built runs, and the environment
// warnings are checked. The CLI's exit codes for the same cases are tested by ctest on
// the fixtures in tests/data (tools/CMakeLists.txt).
#include <kscope/report/compare.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace compare_test {  // one per file: the unit tests build as one program

namespace {

kscope::summary summary_around(double median, double relative_half_width = 0.01) {
  kscope::summary s{};
  s.n = 20;
  s.median = s.mean = s.min = s.max = s.p90 = s.p99 = median;
  s.median_ci = kscope::interval{median * (1 - relative_half_width), median * (1 + relative_half_width), 0.95};
  s.steady = true;
  return s;
}

kscope::scope_report scope(const std::string& path, double host_ns, double gpu_ns) {
  kscope::scope_report s;
  s.path = path;
  s.name = path.substr(path.rfind('/') + 1);
  s.depth = 1;
  s.calls = 20;
  s.host_ns = summary_around(host_ns);
  if (gpu_ns > 0) {
    s.gpu_calls = 20;
    s.gpu_ns = summary_around(gpu_ns);
  }
  return s;
}

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

// A kscope.bench/1 document as bench/format.hpp writes it, reduced to what the gate reads.
std::string bench_doc(double gemm_median_s, bool with_gpu = true) {
  const std::string gpu = with_gpu ? R"("has_gpu": true, "gpu": {"name": "NVIDIA H200", "driver_version": 13000})"
                                   : R"("has_gpu": false, "gpu": {"name": "", "driver_version": 0})";
  const auto bench = [](const std::string& name, const std::string& params, double median_s) {
    char numbers[200];
    std::snprintf(numbers, sizeof numbers,
                  R"("median": %.17g, "median_ci": {"lo": %.17g, "hi": %.17g, "level": 0.95}, "n": 100)",
                  median_s, median_s * 0.998, median_s * 1.002);
    return R"({"name": ")" + name + R"(", "params": )" + params + R"(, "measurement": {"time_s": {)" + numbers +
           "}}}";
  };
  return R"({"schema": "kscope.bench/1", "kscope_version": "0.1.0", "context": {)" + gpu +
         R"(}, "benchmarks": [)" + bench("gemm", R"({"n": 4096, "dtype": "bf16"})", gemm_median_s) + ", " +
         bench("gemm", R"({"n": 8192, "dtype": "bf16"})", 1.1e-3) + ", " + bench("copy", "{}", 2.5e-5) + ", " +
         bench("copy", "{}", 5.0e-5) + ", " +
         R"({"name": "broken", "params": {}, "measurement": {"time_s": {"median": null, "n": 0}}}]})";
}

}  // namespace

TEST_CASE("load_comparable: a report's scopes become host and GPU times; the environment is read") {
  const kscope::comparable_load l = kscope::load_comparable(read_fixture("compare_h200.json"));
  REQUIRE_MESSAGE(l.ok(), l.error);
  CHECK(l.schema == "kscope.report/1");
  CHECK(l.run.format == "kscope.report/2");  // a /1 file is compared as the current reports
  CHECK(l.run.item == "scope");
  CHECK(l.run.names == std::vector<std::string>{"step", "step/allreduce", "decode"});
  REQUIRE(l.run.entries.size() == 5);  // decode has no GPU time
  CHECK(l.run.entries[0].name == "step");
  CHECK(l.run.entries[0].time == "host");
  CHECK(l.run.entries[1].time == "gpu");
  CHECK(l.run.entries[1].ns.median == 1e6);
  CHECK(l.run.environment.gpu == "NVIDIA H200");
  CHECK(l.run.environment.driver_version == "13.0");
  CHECK(l.run.environment.kscope_version == "0.1.0");
  // "gpu": null — the run had no GPU, which is something to compare too.
  const kscope::comparable_load none = kscope::load_comparable(read_fixture("compare_baseline.json"));
  REQUIRE(none.ok());
  CHECK(none.run.environment.gpu == "none");
  CHECK(none.run.environment.driver_version.empty());
}

TEST_CASE("load_comparable: a bench document's benchmarks, by name and parameters, in nanoseconds") {
  const kscope::comparable_load l = kscope::load_comparable(bench_doc(1.42e-4));
  REQUIRE_MESSAGE(l.ok(), l.error);
  CHECK(l.schema == "kscope.bench/1");
  CHECK(l.run.format == "kscope.bench/2");  // a /1 file is compared as the current results
  CHECK(l.run.item == "benchmark");
  // Sweep points stay apart; a repeated name pairs up by position; a benchmark without a
  // median (stop_reason "error") is a name without a time.
  CHECK(l.run.names ==
        std::vector<std::string>{"gemm (n=4096 dtype=bf16)", "gemm (n=8192 dtype=bf16)", "copy", "copy #2", "broken"});
  REQUIRE(l.run.entries.size() == 4);
  CHECK(l.run.entries[0].time == "gpu");
  CHECK(l.run.entries[0].ns.median == doctest::Approx(1.42e5));
  CHECK(l.run.entries[0].ns.median_ci.lo == doctest::Approx(1.42e5 * 0.998));
  CHECK(l.run.entries[3].name == "copy #2");
  CHECK(l.run.entries[3].ns.median == doctest::Approx(5.0e4));
  CHECK(l.run.environment.gpu == "NVIDIA H200");
  CHECK(l.run.environment.driver_version == "13.0");
  CHECK(kscope::load_comparable(bench_doc(1.42e-4, false)).run.environment.gpu == "none");
  // The real writer's output (tests/data/bench_baseline.json was written by bench/format.hpp).
  const kscope::comparable_load fixture = kscope::load_comparable(read_fixture("bench_baseline.json"));
  REQUIRE_MESSAGE(fixture.ok(), fixture.error);
  CHECK(fixture.run.names == std::vector<std::string>{"gemm (n=4096)", "gemm (n=8192)", "copy"});
  CHECK(fixture.run.entries.size() == 3);
}

TEST_CASE("load_comparable: every other document is refused with a status that names what it saw") {
  using kscope::load_status;
  const auto check = [](const std::string& text, load_status status, const std::string& words) {
    const kscope::comparable_load l = kscope::load_comparable(text);
    CAPTURE(text.substr(0, 60));
    CHECK(l.status == status);
    CHECK_FALSE(l.ok());
    CHECK_MESSAGE(l.error.find(words) != std::string::npos, l.error);
  };
  check("name,median_s\ngemm,0.000142\n", load_status::not_json, "not valid JSON: offset 0");
  check("", load_status::not_json, "not valid JSON");
  check(R"({"name": "my-app", "version": "1.2.0"})", load_status::not_kscope, "without a \"schema\" member");
  check("[1, 2, 3]", load_status::not_kscope, "the JSON is not an object");
  check(R"({"schema": "kscope.report/3", "scopes": []})", load_status::not_kscope, "schema \"kscope.report/3\"");
  check(R"({"schema": 7})", load_status::not_kscope, "without a \"schema\" member");
  check(R"({"schema": "kscope.report/1"})", load_status::malformed, "no \"scopes\" array");
  check(R"({"schema": "kscope.bench/1", "results": []})", load_status::malformed, "no \"benchmarks\" array");
  check(R"({"schema": "kscope.bench/1", "benchmarks": [{"params": {}}]})", load_status::malformed,
        "without a \"name\"");
  check(read_fixture("multigpu_merged.json"), load_status::not_comparable, "kscope.merged/1");
}

TEST_CASE("compare_runs: the gate's outcomes") {
  kscope::session_report base;
  base.scopes = {scope("step", 1e6, 9e5), scope("decode", 3e6, 0)};
  SUBCASE("same times: pass") {
    const kscope::report_comparison c = kscope::compare_reports(base, base);
    CHECK(c.scopes.size() == 3);
    CHECK(c.gate() == kscope::gate_result::pass);
    CHECK(c.failure().empty());
    CHECK(c.text().find("no scope slower: PASS") != std::string::npos);
  }
  SUBCASE("a slower time: slower, whatever else") {
    kscope::session_report cand = base;
    cand.scopes[0].gpu_ns = summary_around(9e5 * 1.2);
    cand.scopes.pop_back();  // and decode is gone
    const kscope::report_comparison c = kscope::compare_reports(base, cand);
    CHECK(c.gate() == kscope::gate_result::slower);
    CHECK(c.failure() == "1 slower");
    const std::string text = c.text();
    CHECK(text.find("1 baseline time missing in the candidate") != std::string::npos);
    CHECK(text.find("1 slower: FAIL") != std::string::npos);
    CHECK(text.find("PASS") == std::string::npos);
  }
  SUBCASE("an empty candidate (a KSCOPE=0 run): nothing compared") {
    const kscope::report_comparison c = kscope::compare_reports(base, kscope::session_report{});
    CHECK(c.scopes.empty());
    CHECK(c.gate() == kscope::gate_result::nothing_compared);
    CHECK(c.failure().find("candidate has no scopes") != std::string::npos);
    CHECK(c.text().find("PASS") == std::string::npos);
    // allow_missing accepts missing scopes, never an empty comparison.
    kscope::compare_settings lenient;
    lenient.allow_missing = true;
    CHECK(kscope::compare_reports(base, kscope::session_report{}, lenient).gate() ==
          kscope::gate_result::nothing_compared);
    CHECK(kscope::compare_reports(kscope::session_report{}, kscope::session_report{}, lenient).gate() ==
          kscope::gate_result::nothing_compared);
  }
  SUBCASE("renamed scopes: nothing compared, both sides listed") {
    kscope::session_report cand;
    cand.scopes = {scope("train_step", 1e6, 9e5), scope("generate", 3e6, 0)};
    const kscope::report_comparison c = kscope::compare_reports(base, cand);
    CHECK(c.gate() == kscope::gate_result::nothing_compared);
    CHECK(c.only_in_candidate == std::vector<std::string>{"train_step", "generate"});
    CHECK(c.only_in_baseline == std::vector<std::string>{"step", "decode"});
    CHECK(c.failure().find("renamed scopes") != std::string::npos);
  }
  SUBCASE("a lost scope, a lost GPU time, a scope without calls: missing, unless allowed") {
    kscope::session_report cand = base;
    cand.scopes[0].gpu_calls = 0;  // step lost its stream
    cand.scopes[1].calls = 0;      // decode is still there, but never ran
    const kscope::report_comparison c = kscope::compare_reports(base, cand);
    CHECK(c.scopes.size() == 1);  // step's host time
    CHECK(c.missing_times == std::vector<std::string>{"step: gpu"});
    CHECK(c.only_in_baseline == std::vector<std::string>{"decode (no timed calls in candidate)"});
    CHECK(c.missing_count() == 2);
    CHECK(c.gate() == kscope::gate_result::missing);
    CHECK(c.failure().find("2 baseline times missing in the candidate") != std::string::npos);
    kscope::compare_settings lenient;
    lenient.allow_missing = true;
    const kscope::report_comparison allowed = kscope::compare_reports(base, cand, lenient);
    CHECK(allowed.gate() == kscope::gate_result::pass);
    CHECK(allowed.text().find("2 baseline times missing in the candidate (allowed)") != std::string::npos);
  }
  SUBCASE("a scope new in the candidate fails nothing") {
    kscope::session_report cand = base;
    cand.scopes.push_back(scope("prefill", 5e5, 0));
    const kscope::report_comparison c = kscope::compare_reports(base, cand);
    CHECK(c.only_in_candidate == std::vector<std::string>{"prefill"});
    CHECK(c.gate() == kscope::gate_result::pass);
  }
}

TEST_CASE("compare_runs on bench documents: per benchmark, compare_summaries' verdict") {
  const kscope::comparable_load base = kscope::load_comparable(bench_doc(1.42e-4));
  const kscope::comparable_load cand = kscope::load_comparable(bench_doc(1.42e-4 * 1.10));
  REQUIRE(base.ok());
  REQUIRE(cand.ok());
  const kscope::report_comparison c = kscope::compare_runs(base.run, cand.run);
  REQUIRE(c.scopes.size() == 4);
  CHECK(c.item == "benchmark");
  CHECK(c.scopes[0].path == "gemm (n=4096 dtype=bf16)");
  CHECK(c.scopes[0].result.ratio == doctest::Approx(1.10));
  CHECK(c.scopes[0].result.result == kscope::verdict::slower);
  CHECK(c.scopes[1].result.result == kscope::verdict::same);
  // The same numbers through the library's rule directly.
  CHECK(c.scopes[0].result.result ==
        kscope::compare_summaries(base.run.entries[0].ns, cand.run.entries[0].ns, 0.02).result);
  CHECK(c.gate() == kscope::gate_result::slower);
  CHECK(c.text().find("kscope.bench/2") != std::string::npos);
  CHECK(c.text().find("1 slower: FAIL") != std::string::npos);
  // "broken" has no median on either side: nothing lost, nothing compared.
  CHECK(c.missing_count() == 0);
}

TEST_CASE("environment_differences: GPU, driver and kscope version; unknown is never a difference") {
  kscope::run_environment h200{"0.1.0", "NVIDIA H200", "13.0"};
  kscope::run_environment h100{"0.0.9", "NVIDIA H100 80GB HBM3", "12.4"};
  const std::vector<std::string> w = kscope::environment_differences(h200, h100);
  REQUIRE(w.size() == 3);
  CHECK(w[0] == "GPU differs: baseline \"NVIDIA H200\", candidate \"NVIDIA H100 80GB HBM3\"");
  CHECK(w[1] == "driver version differs: baseline \"13.0\", candidate \"12.4\"");
  CHECK(w[2] == "kscope version differs: baseline \"0.1.0\", candidate \"0.0.9\"");
  CHECK(kscope::environment_differences(h200, h200).empty());
  CHECK(kscope::environment_differences(h200, kscope::run_environment{}).empty());
  // Through the comparison: warnings in the table, the gate unchanged.
  const kscope::comparable_load a = kscope::load_comparable(read_fixture("compare_h200.json"));
  const kscope::comparable_load b = kscope::load_comparable(read_fixture("compare_h100.json"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const kscope::report_comparison c = kscope::compare_runs(a.run, b.run);
  CHECK(c.environment_warnings.size() == 3);
  CHECK(c.gate() == kscope::gate_result::pass);
  CHECK(c.text().find("warning: GPU differs") != std::string::npos);
}

TEST_CASE("parse_report keeps the context's GPU array, so a report read back still names its GPU") {
  const std::string doc = read_fixture("compare_h200.json");
  std::string error;
  const auto r = kscope::parse_report(doc, &error);
  REQUIRE_MESSAGE(r.has_value(), error);
  REQUIRE_FALSE(r->context.devices_json.empty());
  CHECK(kscope::comparable_from_report(*r).environment.gpu == "NVIDIA H200");
  // And json() writes it back instead of null.
  const auto again = kscope::parse_report(r->json(), &error);
  REQUIRE_MESSAGE(again.has_value(), error);
  CHECK(again->context.devices == r->context.devices);
  CHECK(again->context.devices_json == r->context.devices_json);
}

}  // namespace compare_test
