// evidence/pm_report.hpp: the session report's section for GPU metrics sampled while
// the program ran, printed from synthetic samples (the aggregation is core/metric_samples's,
// tested in metric_samples_test.cpp): the table (numbers only), the scopes' verdicts the
// samples decided, with their numbers, the step
// distributions, the losses line, the JSON, and the not-started case.
#include <kscope/pm_sampling/sampler.hpp>  // default_sampling_metrics
#include <kscope/report/report.hpp>
#include <kscope/verdict/scope_verdict.hpp>  // decide_verdicts: the samples decide each scope's verdict

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace sampled_report_test {  // one per file: the unit tests build as one program

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

kscope::scope_report scope_named(kscope::node_id id, const std::string& name, const std::string& path,
                                 std::size_t depth) {
  kscope::scope_report s;
  s.id = id;
  s.name = name;
  s.path = path;
  s.depth = depth;
  s.calls = 10;
  return s;
}

// Two scopes under a step: "copy" (node 2) alone in samples 0..9, DRAM 80 %; "gemm"
// (node 3) alone in samples 10..19, tensor 90 %; the step (node 1) has two calls.
kscope::session_report report_with_samples() {
  kscope::session_report r;
  r.scopes.push_back(scope_named(1, "step", "step", 1));
  r.scopes.push_back(scope_named(2, "copy", "step/copy", 2));
  r.scopes.push_back(scope_named(3, "gemm", "step/gemm", 2));
  const std::vector<std::string> metrics = kscope::default_sampling_metrics();
  kscope::sampled_metrics agg(metrics);
  agg.add_step_call(1, 0, 1'000'000);
  agg.add_step_call(1, 1'000'000, 2'000'000);
  agg.add_kernel({0, 1'000'000, 2, 0});
  agg.add_kernel({1'000'000, 2'000'000, 3, 0});
  for (int i = 0; i < 20; ++i) {
    const bool copy = i < 10;
    const double v[] = {copy ? 10.0 : 85.0, copy ? 80.0 : 15.0, 2e6, 1e6, copy ? 0.0 : 90.0, 50.0, 1.9e9};
    agg.add_sample(i * 100'000, (i + 1) * 100'000, v);
  }
  agg.attribute_all();
  kscope::session_sampled_metrics m;
  m.status = "metric sampling stopped: 20 samples of 7 metrics on GH100";
  m.running = true;
  m.interval_ns = 100'000;
  m.windows = 4;
  m.coverage = 0.2;
  m.samples = 20;
  m.samples_lost = 3;
  m.attributed = true;
  m.data = agg.report();
  r.sampled_metrics = m;
  kscope::decide_verdicts(r);  // as the session does: the samples are each scope's evidence
  return r;
}

}  // namespace

TEST_CASE("sampled metrics section: table, verdicts, steps, losses") {
  const kscope::session_report r = report_with_samples();
  const std::string text = r.text();
  INFO(text);
  CHECK(contains(text, "GPU metrics sampled while running (PM sampling, no replay)"));
  CHECK(contains(text, "SM %"));
  CHECK(contains(text, "DRAM %"));
  CHECK(contains(text, "tensor %"));
  CHECK(contains(text, "device (every sample)"));
  // copy: 80.0 DRAM in its row; the section names no class: the scope's verdict, which the
  // samples decided, is memory-bound with the numbers, its evidence under it.
  const std::string section = text.substr(text.find("GPU metrics sampled while running"),
                                          text.find("\nverdict per scope") - text.find("GPU metrics sampled while running"));
  CHECK_FALSE(contains(section, "-bound"));
  CHECK(contains(text, "step/copy: memory-bound (DRAM), from sampled metrics over 10 samples; busiest unit"));
  CHECK(contains(text, "  - memory-bound (from sampling, 10 samples): SM 10%, DRAM 80%"));
  CHECK(contains(text, "step/gemm: compute-bound (tensor pipe), from sampled metrics over 10 samples"));
  CHECK(contains(text, "  - compute-bound (from sampling, 10 samples)"));
  CHECK(contains(text, "tensor pipe 90%"));
  // The step: two calls, p50 / p90 of the per-call means.
  CHECK(contains(text, "step step: 2 calls sampled"));
  CHECK(contains(text, "DRAM % p50"));
  // Coverage and losses, never silent.
  CHECK(contains(text, "20 samples every 100 us in 4 windows; the samples cover 20.0% of the run"));
  CHECK(contains(text, "lost: 3 samples in"));
}

TEST_CASE("sampled metrics section: JSON") {
  const kscope::session_report r = report_with_samples();
  const nlohmann::json j = nlohmann::json::parse(r.json());
  const nlohmann::json& m = j.at("sampled_metrics");
  CHECK(m.at("running") == true);
  CHECK(m.at("windows") == 4);
  CHECK(m.at("metrics").size() == 7);
  REQUIRE(m.at("scopes").size() >= 2);
  bool seen_copy = false;
  for (const nlohmann::json& s : m.at("scopes")) {
    if (s.at("path") != "step/copy") continue;
    seen_copy = true;
    CHECK(s.at("samples") == 10);
    CHECK(s.at("values").at(1).at("mean").get<double>() == doctest::Approx(80.0));
    CHECK(s.find("verdict") == s.end());  // the scope's one verdict is in scopes[]
  }
  CHECK(seen_copy);
  const nlohmann::json& copy = j.at("scopes").at(1);
  REQUIRE(copy.at("path") == "step/copy");
  CHECK(copy.at("verdict").at("class") == "memory-bound");
  CHECK(copy.at("verdict").at("source") == "sampled metrics");
  CHECK(copy.at("verdict").at("count") == 10);
  CHECK(copy.at("verdict").at("evidence").at(0).at("facts").size() >= 3);
  REQUIRE(m.at("steps").size() == 1);
  CHECK(m.at("steps").at(0).at("calls") == 2);
  // Without sampling the key is null.
  kscope::session_report plain;
  CHECK(nlohmann::json::parse(plain.json()).at("sampled_metrics").is_null());
}

TEST_CASE("sampled metrics section: not started says why and nothing else") {
  kscope::session_report r;
  kscope::session_sampled_metrics m;
  m.status = "metric sampling unavailable: cuptiPmSamplingEnable failed with CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
  r.sampled_metrics = m;
  const std::string text = r.text();
  CHECK(contains(text, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"));
  CHECK_FALSE(contains(text, "device (every sample)"));
  CHECK(nlohmann::json::parse(r.json()).at("sampled_metrics").at("running") == false);
}

TEST_CASE("session report CSV: one row per scope with the sampled columns") {
  const kscope::session_report r = report_with_samples();
  const std::string csv = r.csv();
  INFO(csv);
  const std::string header = csv.substr(0, csv.find('\n'));
  CHECK(contains(header, "sampled_dram_pct"));
  CHECK(contains(header, ",verdict,verdict_unit,verdict_source"));
  CHECK_FALSE(contains(header, "sampled_verdict"));
  std::size_t rows = 0;
  for (char c : csv) rows += c == '\n';
  CHECK(rows == 1 + r.scopes.size());
  // step/copy: 10 samples, DRAM 80, memory-bound.
  const std::size_t at = csv.find("step/copy,");
  REQUIRE(at != std::string::npos);
  const std::string row = csv.substr(at, csv.find('\n', at) - at);
  CHECK(contains(row, ",10,"));
  CHECK(contains(row, ",80,"));
  CHECK(contains(row, "memory-bound"));
  // Every row has as many fields as the header.
  const auto fields = [](const std::string& line) { return std::count(line.begin(), line.end(), ',') + 1; };
  CHECK(fields(row) == fields(header));
}

}  // namespace sampled_report_test
