// One verdict per scope (verdict/scope_verdict.hpp): which evidence decides, what the rest
// is said to conclude, what was missing, and the verdict's way through the printers and the
// JSON reader.
#include <kscope/pm_sampling/sampler.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/report/report.hpp>
#include <kscope/verdict/scope_verdict.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& l : lines)
    if (contains(l, part)) return true;
  return false;
}

kscope::finding counters_said(kscope::bottleneck kind, const std::string& where) {
  kscope::finding f;
  f.kind = kind;
  f.where = where;
  f.facts.push_back(kscope::evidence{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 87, "%"});
  f.text = std::string(kscope::to_string(kind)) + " (" + where + " 87%)";
  return f;
}

// A node of the sampled-metrics section with the default metrics' means (SM %, DRAM %,
// tensor %) and the share of its samples the GPU idled.
kscope::node_sampled_metrics sampled_node(double sm, double dram, double tensor, double idle) {
  kscope::node_sampled_metrics n;
  n.samples = 40;
  n.touched_sample_ns = 1e6;
  n.touched_idle_ns = idle * 1e6;
  n.values.resize(7);
  n.values[0].mean = sm;
  n.values[1].mean = dram;
  n.values[4].mean = tensor;
  return n;
}

// A scope that declared work and was placed under the fp32 roof: memory-bound at 40 % of it.
kscope::scope_report placed_scope(kscope::bound limiter, bool impossible = false) {
  kscope::scope_report s;
  s.id = 3;
  s.name = s.path = "decode";
  s.depth = 1;
  s.calls = 10;
  s.work_calls = 10;
  s.declared = kscope::work{1e9, 4e9};
  kscope::placement p{};
  p.flops_per_s = 1e12;
  p.bytes_per_s = 4e12;
  p.intensity = 0.25;
  p.roof_flops_per_s = 1.2e12;
  p.fraction_of_roof = impossible ? 13.4 : 0.4;
  p.limiter = limiter;
  s.roofline = p;
  s.roof = "fp32 plain";
  s.roofline_impossible = impossible;
  if (impossible) s.roofline_impossible_reason = "the declared work is more than what ran";
  return s;
}

}  // namespace

TEST_CASE("measured evidence decides, the busiest unit nearest its peak first; the others are named as agreeing or not") {
  kscope::scope_report s = placed_scope(kscope::bound::memory);
  s.counters = kscope::scope_counter_report{};
  s.counters->classified.verdict = counters_said(kscope::bottleneck::memory, "DRAM");  // DRAM at 87 %
  SUBCASE("counters' unit nearer its peak: the counters decide") {
    const kscope::node_sampled_metrics sampled = sampled_node(70, 20, 85, 0.0);  // compute-bound, tensor at 85 %
    const std::vector<std::string> metrics = kscope::default_sampling_metrics();
    const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, &sampled, &metrics});
    REQUIRE(v);
    CHECK(v->basis == "hardware counters");
    CHECK(v->verdict.kind == kscope::bottleneck::memory);
    CHECK(v->verdict.where == "DRAM");
    REQUIRE(v->others.size() == 2);
    CHECK(v->others[0].basis == "sampled metrics");
    CHECK(v->others[0].said.kind == kscope::bottleneck::compute);
    CHECK_FALSE(v->others[0].agrees);
    CHECK(v->others[1].basis == "declared work");
    CHECK(v->others[1].agrees);
    CHECK(v->missing.empty());
    const std::string line = kscope::detail::verdict_text(*v);
    CHECK(contains(line, "memory-bound (DRAM), from hardware counters"));
    CHECK(contains(line, "sampled metrics say compute-bound (tensor pipe)"));
    CHECK(contains(line, "declared work agree"));
  }
  SUBCASE("the sampled tensor pipe nearer its peak: the sampled metrics decide") {
    const kscope::node_sampled_metrics sampled = sampled_node(88, 20, 93, 0.0);  // tensor pipe at 93 %
    const std::vector<std::string> metrics = kscope::default_sampling_metrics();
    const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, &sampled, &metrics});
    REQUIRE(v);
    CHECK(v->basis == "sampled metrics");
    CHECK(v->verdict.kind == kscope::bottleneck::compute);
    REQUIRE(v->others.size() == 2);
    CHECK(v->others[0].basis == "hardware counters");
    CHECK_FALSE(v->others[0].agrees);
  }
}

TEST_CASE("a counter stand-in that read latency-bound gives way to a sampled unit measured near its peak") {
  // The transpose: per-scope counters with only a stand-in for L2 (lts__t_sectors 22.6 %)
  // said latency-bound; the sampled L2 ran at 76 % (Nsight Compute: L2 at 80 %).
  kscope::scope_report s;
  s.id = 4;
  s.name = s.path = "transpose";
  s.calls = 10;
  s.gpu_activity = kscope::node_gpu_activity{};
  s.gpu_activity->kernel_count = 10;
  s.counters = kscope::scope_counter_report{};
  kscope::finding latency;
  latency.kind = kscope::bottleneck::latency;
  latency.facts = {{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 12, "%"},
                   {"lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 22.6, "%"},
                   {"sm__warps_active.avg.pct_of_peak_sustained_active", 95, "%"}};  // occupancy: no unit
  s.counters->classified.verdict = latency;
  std::vector<std::string> metrics = kscope::default_sampling_metrics();
  kscope::node_sampled_metrics sampled = sampled_node(15, 30, 0, 0.0);
  metrics.push_back("lts__throughput.avg.pct_of_peak_sustained_elapsed");
  sampled.values.resize(metrics.size());
  sampled.values.back().mean = 76;
  const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, &sampled, &metrics});
  REQUIRE(v);
  CHECK(v->basis == "sampled metrics");
  CHECK(v->verdict.kind == kscope::bottleneck::memory);
  CHECK(v->verdict.where == "L2");
  REQUIRE(v->others.size() == 1);
  CHECK(v->others[0].said.kind == kscope::bottleneck::latency);
  CHECK(kscope::detail::measured_peak_pct(latency) == 22.6);  // occupancy left out
}

TEST_CASE("undecided counters give way to sampled metrics, and say why") {
  kscope::scope_report s = placed_scope(kscope::bound::compute);
  s.gpu_activity = kscope::node_gpu_activity{};
  s.counters = kscope::scope_counter_report{};
  s.counters->classified.verdict.kind = kscope::bottleneck::undetermined;
  s.counters->classified.verdict.text = "undetermined: no kernel profiled";
  const kscope::node_sampled_metrics sampled = sampled_node(12, 82, 0, 0.05);  // memory-bound, DRAM
  const std::vector<std::string> metrics = kscope::default_sampling_metrics();
  const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, &sampled, &metrics});
  REQUIRE(v);
  CHECK(v->basis == "sampled metrics");
  CHECK(v->verdict.kind == kscope::bottleneck::memory);
  REQUIRE(v->others.size() == 1);
  CHECK(v->others[0].basis == "declared work");
  CHECK_FALSE(v->others[0].agrees);  // declared work placed it compute-bound
  CHECK(any_contains(v->missing, "hardware counters did not decide: undetermined: no kernel profiled"));
}

TEST_CASE("declared work alone decides, and the report says what would decide better") {
  kscope::scope_report s = placed_scope(kscope::bound::memory);
  s.gpu_activity = kscope::node_gpu_activity{};
  const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, nullptr, nullptr});
  REQUIRE(v);
  CHECK(v->basis == "declared work");
  CHECK(v->verdict.kind == kscope::bottleneck::memory);
  CHECK(v->verdict.where == "DRAM");
  CHECK(contains(v->verdict.text, "declared work"));
  CHECK(contains(v->verdict.text, "of the fp32 plain roof"));
  CHECK(any_contains(v->missing, "hardware counters: not collected"));
  CHECK(any_contains(v->missing, "sampled metrics: not collected"));
}

TEST_CASE("a placement that cannot be true is no verdict, and no evidence is no verdict") {
  SUBCASE("impossible placement, nothing else") {
    const kscope::scope_report s = placed_scope(kscope::bound::compute, /*impossible=*/true);
    CHECK_FALSE(kscope::decide_verdict({&s, nullptr, nullptr}));
    CHECK_FALSE(kscope::detail::declared_work_finding(s));
  }
  SUBCASE("impossible placement beside counters: counters decide, the placement is named as missing") {
    kscope::scope_report s = placed_scope(kscope::bound::compute, /*impossible=*/true);
    s.counters = kscope::scope_counter_report{};
    s.counters->classified.verdict = counters_said(kscope::bottleneck::compute, "tensor pipe");
    const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, nullptr, nullptr});
    REQUIRE(v);
    CHECK(v->basis == "hardware counters");
    CHECK(v->others.empty());
    CHECK(any_contains(v->missing, "declared work: its placement cannot be true (the declared work is more than what ran)"));
  }
  SUBCASE("GPU work and no evidence that decided: undetermined, with what was missing") {
    kscope::scope_report s;
    s.name = s.path = "barrier";
    s.calls = 5;
    s.gpu_activity = kscope::node_gpu_activity{};
    s.gpu_activity->kernel_count = 5;
    const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, nullptr, nullptr});
    REQUIRE(v);
    CHECK(v->verdict.kind == kscope::bottleneck::undetermined);
    CHECK(any_contains(v->missing, "hardware counters: not collected"));
    CHECK(any_contains(v->missing, "declared work: none"));
    const std::string line = kscope::detail::verdict_text(*v);
    CHECK(line.rfind("undetermined: hardware counters: not collected", 0) == 0);
  }
  SUBCASE("a host-only scope") {
    kscope::scope_report s;
    s.name = s.path = "tokenize";
    s.calls = 5;
    CHECK_FALSE(kscope::decide_verdict({&s, nullptr, nullptr}));
  }
  CHECK_FALSE(kscope::decide_verdict({}));
}

TEST_CASE("decide_verdicts finds each scope's sampled node; printers and the reader carry the verdict") {
  kscope::session_report r;
  r.scopes.push_back(placed_scope(kscope::bound::memory));
  kscope::scope_report host;
  host.id = 4;
  host.name = host.path = "tokenize";
  host.depth = 1;
  host.calls = 3;
  r.scopes.push_back(host);
  kscope::session_sampled_metrics section;
  section.data.metrics = kscope::default_sampling_metrics();
  kscope::node_sampled_metrics n = sampled_node(90, 15, 95, 0.0);
  n.node = 3;
  section.data.nodes.push_back(n);
  r.sampled_metrics = section;
  kscope::decide_verdicts(r);
  REQUIRE(r.scopes[0].verdict);
  CHECK(r.scopes[0].verdict->basis == "sampled metrics");
  CHECK(r.scopes[0].verdict->verdict.kind == kscope::bottleneck::compute);
  CHECK_FALSE(r.scopes[1].verdict);

  const std::string text = r.text();
  CHECK(contains(text, "verdict per scope"));
  CHECK(contains(text, "decode: compute-bound (tensor pipe), from sampled metrics; declared work say memory-bound"));
  // The roofline table keeps the declared point, marked as outweighed: never a second verdict.
  CHECK_MESSAGE(contains(text, "~memory"), text);
  CHECK_MESSAGE(contains(text, "[outweighed: the scope's verdict is compute-bound"), text);
  CHECK_MESSAGE(contains(text, "pipe), from sampled metrics]"), text);
  CHECK(contains(text, "~: the declared work's limiter, outweighed by the scope's measured verdict"));
  const std::string html = r.html();
  const bool html_says = contains(html, "[outweighed: the scope&#39;s verdict is compute-bound") ||
                         contains(html, "[outweighed: the scope's verdict is compute-bound");
  CHECK(html_says);

  const std::string json = r.json();
  const auto doc = nlohmann::json::parse(json);
  const auto& v = doc["scopes"][0]["verdict"];
  CHECK(v["basis"] == "sampled metrics");
  CHECK(v["verdict"]["kind"] == "compute-bound");
  CHECK(v["others"][0]["basis"] == "declared work");
  CHECK(v["others"][0]["agrees"] == false);
  CHECK(doc["scopes"][1]["verdict"].is_null());

  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(json, &error);
  REQUIRE_MESSAGE(back, error);
  REQUIRE(back->scopes.size() == 2);
  REQUIRE(back->scopes[0].verdict);
  const kscope::scope_verdict& b = *back->scopes[0].verdict;
  CHECK(b.basis == "sampled metrics");
  CHECK(b.verdict.kind == kscope::bottleneck::compute);
  CHECK(b.verdict.where == "tensor pipe");
  CHECK(b.verdict.text == r.scopes[0].verdict->verdict.text);
  CHECK(b.verdict.facts.size() == r.scopes[0].verdict->verdict.facts.size());
  REQUIRE(b.others.size() == 1);
  CHECK(b.others[0].said.kind == kscope::bottleneck::memory);
  CHECK(b.missing == r.scopes[0].verdict->missing);
  CHECK_FALSE(back->scopes[1].verdict);
  // The report read back prints the same verdict line.
  CHECK(contains(back->text(), "decode: compute-bound (tensor pipe), from sampled metrics"));
}

TEST_CASE("outweighed_note: silent when it agrees, decided, or there is no verdict") {
  kscope::scope_report s = placed_scope(kscope::bound::memory);
  CHECK(kscope::outweighed_note(s, kscope::bottleneck::latency, "sampled metrics").empty());  // no verdict
  kscope::scope_verdict v;
  v.basis = "hardware counters";
  v.verdict = counters_said(kscope::bottleneck::memory, "L2");
  s.verdict = v;
  CHECK(kscope::outweighed_note(s, kscope::bottleneck::memory, "sampled metrics").empty());       // agrees
  CHECK(kscope::outweighed_note(s, kscope::bottleneck::latency, "hardware counters").empty());    // decided
  CHECK(kscope::outweighed_note(s, kscope::bottleneck::undetermined, "sampled metrics").empty()); // no conclusion
  CHECK(kscope::outweighed_note(s, kscope::bottleneck::latency, "sampled metrics") ==
        " [outweighed: the scope's verdict is memory-bound (L2), from hardware counters]");
}

TEST_CASE("bottleneck names read back; anything else is undetermined") {
  for (kscope::bottleneck b : {kscope::bottleneck::memory, kscope::bottleneck::compute, kscope::bottleneck::latency,
                               kscope::bottleneck::launch, kscope::bottleneck::undetermined})
    CHECK(kscope::bottleneck_from_string(kscope::to_string(b)) == b);
  CHECK(kscope::bottleneck_from_string("") == kscope::bottleneck::undetermined);
  CHECK(kscope::bottleneck_from_string("Memory-Bound") == kscope::bottleneck::undetermined);
  CHECK(kscope::bottleneck_from_string("memory-bound\n") == kscope::bottleneck::undetermined);
}
