// Tests for kscope/report/merge.hpp and report/compare.hpp: report JSON read back, three
// synthetic rank reports merged with a straggler, malformed and mismatched inputs, hostile
// fields and lists (every integer range-checked, every list bounded, the memory a read
// costs), two reports compared scope by scope. Expected values are hand-computed.
#include <kscope/report/compare.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/scope/recorder.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <new>
#include <optional>
#include <regex>
#include <string>
#include <vector>

// Every allocation of this test program is counted, so that a test can measure the peak
// memory a call needs (the report reader once needed 80x its input). A header in front of
// each block keeps its size for the matching delete.
namespace {
std::atomic<std::size_t> live_bytes{0};
std::atomic<std::size_t> peak_bytes{0};
constexpr std::size_t allocation_header = alignof(std::max_align_t);

void* counted_allocation(std::size_t size) {
  void* raw = std::malloc(size + allocation_header);
  if (raw == nullptr) throw std::bad_alloc();
  *static_cast<std::size_t*>(raw) = size;
  const std::size_t now = live_bytes.fetch_add(size) + size;
  std::size_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
  return static_cast<unsigned char*>(raw) + allocation_header;
}
void counted_release(void* p) noexcept {
  if (p == nullptr) return;
  void* raw = static_cast<unsigned char*>(p) - allocation_header;
  live_bytes.fetch_sub(*static_cast<std::size_t*>(raw));
  std::free(raw);
}
}  // namespace

void* operator new(std::size_t size) { return counted_allocation(size); }
void* operator new[](std::size_t size) { return counted_allocation(size); }
void operator delete(void* p) noexcept { counted_release(p); }
void operator delete[](void* p) noexcept { counted_release(p); }
void operator delete(void* p, std::size_t) noexcept { counted_release(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_release(p); }

namespace {

kscope::summary median_summary(double median) {
  kscope::summary s{};
  s.n = 20;
  s.median = s.mean = s.min = s.max = s.p90 = s.p99 = median;
  s.median_ci = kscope::interval{median * 0.99, median * 1.01, 0.95};
  s.steady = true;
  return s;
}

// A report with "step" (host+GPU), "step/allreduce" (GPU, NCCL time) and, on rank 0 only,
// "warmup" (host only).
std::string rank_report(int rank, double step_gpu_ns, std::int64_t comm_ns, bool with_rank = true) {
  kscope::session_report r;
  r.context.host_name = "node" + std::to_string(rank / 8);
  r.context.rank = with_rank ? rank : -1;
  kscope::scope_report step;
  step.id = 1;
  step.name = step.path = "step";
  step.depth = 1;
  step.calls = 20;
  step.host_ns = median_summary(step_gpu_ns + 1000);
  step.gpu_calls = 20;
  step.gpu_ns = median_summary(step_gpu_ns);
  r.scopes.push_back(step);
  kscope::scope_report ar;
  ar.id = 2;
  ar.parent = 1;
  ar.name = "allreduce";
  ar.path = "step/allreduce";
  ar.depth = 2;
  ar.calls = 20;
  ar.host_ns = median_summary(500);
  ar.gpu_calls = 20;
  ar.gpu_ns = median_summary(static_cast<double>(comm_ns) / 20);
  kscope::node_gpu_activity a;
  a.kernel_count = 40;
  a.kernel_ns = comm_ns + 1000;
  a.busy_ns = comm_ns + 1000;
  a.comm_kernel_count = 20;
  a.comm_ns = comm_ns;
  a.comm_busy_ns = comm_ns;
  a.compute_busy_ns = 1000;
  kscope::device_gpu_activity d;
  d.device = static_cast<std::uint32_t>(rank);
  d.kernel_count = 40;
  d.kernel_ns = a.kernel_ns;
  d.busy_ns = a.busy_ns;
  d.comm_kernel_count = 20;
  d.comm_ns = comm_ns;
  a.devices.push_back(d);
  ar.gpu_activity = a;
  r.scopes.push_back(ar);
  if (rank == 0) {
    kscope::scope_report w;
    w.id = 3;
    w.name = w.path = "warmup";
    w.depth = 1;
    w.calls = 1;
    w.host_ns = median_summary(9e6);
    r.scopes.push_back(w);
  }
  return r.json();
}

}  // namespace

TEST_CASE("parse_report: a report's JSON reads back into the same numbers") {
  const std::string doc = rank_report(3, 1e6, 40000);
  std::string error;
  auto r = kscope::parse_report(doc, &error);
  REQUIRE_MESSAGE(r.has_value(), error);
  CHECK(r->context.rank == 3);
  REQUIRE(r->scopes.size() == 2);
  const kscope::scope_report* ar = r->find("step/allreduce");
  REQUIRE(ar != nullptr);
  CHECK(ar->depth == 2);
  CHECK(ar->gpu_ns.median == doctest::Approx(2000));
  REQUIRE(ar->gpu_activity.has_value());
  CHECK(ar->gpu_activity->comm_ns == 40000);
  CHECK(ar->gpu_activity->compute_busy_ns == 1000);
  REQUIRE(ar->gpu_activity->devices.size() == 1);
  CHECK(ar->gpu_activity->devices[0].device == 3);
  // Round trip: writing the parsed report again gives the same scopes JSON.
  const auto a = nlohmann::json::parse(doc);
  const auto b = nlohmann::json::parse(r->json());
  CHECK(a["scopes"] == b["scopes"]);
  CHECK(a["context"]["rank"] == b["context"]["rank"]);
  // And its text renders (the CLI's `kscope report`).
  CHECK(r->text().find("allreduce") != std::string::npos);
}

TEST_CASE("parse_report: tracing in windows reads back; a report without windows has null; bad windows refused") {
  kscope::session_report r;
  r.cupti_status = "CUPTI 130001: kernel activity; GPU activity traced in 2 windows";
  kscope::trace_window_log log;
  log.configure({100, 10000}, 1000);
  log.begin(1000);
  log.end(100001000);
  log.begin(10000001000);
  r.trace_windows = log.summary(10050001000);
  const std::string doc = r.json();
  const auto j = nlohmann::json::parse(doc);
  REQUIRE(j["cupti"]["trace_windows"].is_object());
  CHECK(j["cupti"]["trace_windows"]["windows"] == 2);
  CHECK(j["cupti"]["trace_windows"]["traced_share"].get<double>() == doctest::Approx(0.15 / 10.05));
  std::string error;
  auto back = kscope::parse_report(doc, &error);
  REQUIRE_MESSAGE(back.has_value(), error);
  CHECK(back->trace_windows.windowed);
  CHECK(back->trace_windows.windows == 2);
  CHECK(back->trace_windows.traced_ns == r.trace_windows.traced_ns);
  CHECK(back->trace_windows.open);
  REQUIRE(back->trace_windows.recent.size() == 2);
  CHECK(back->trace_windows.recent[1].end_ns == 10050001000);
  CHECK(back->trace_windows.describe() == r.trace_windows.describe());
  CHECK(nlohmann::json::parse(back->json())["cupti"]["trace_windows"] == j["cupti"]["trace_windows"]);

  // Every launch traced: null, and nothing windowed read back.
  const kscope::session_report whole;
  CHECK(nlohmann::json::parse(whole.json())["cupti"]["trace_windows"].is_null());
  auto plain = kscope::parse_report(whole.json(), &error);
  REQUIRE(plain.has_value());
  CHECK_FALSE(plain->trace_windows.windowed);

  // A window that ends before it starts, out of order, or a number too large: refused, named.
  for (const char* bad : {"[[5, 1]]", "[[5, 9], [1, 2]]", "[[1e300, 2e300]]", "[[1]]"}) {
    auto edited = j;
    edited["cupti"]["trace_windows"]["recent"] = nlohmann::json::parse(bad);
    CAPTURE(bad);
    CHECK_FALSE(kscope::parse_report(edited.dump(), &error).has_value());
    CHECK(error.find("recent[") != std::string::npos);
  }
  // More traced than elapsed (a share above 100 %), or an interval that ends before it starts.
  for (const auto& [traced, until] : {std::pair<long long, long long>{20'000'000'000, 10'050'001'000},
                                      std::pair<long long, long long>{0, 0}}) {
    auto edited = j;
    edited["cupti"]["trace_windows"]["traced_ns"] = traced;
    edited["cupti"]["trace_windows"]["until_ns"] = until;
    CAPTURE(traced);
    CHECK_FALSE(kscope::parse_report(edited.dump(), &error).has_value());
    CHECK(error.find("traced_ns") != std::string::npos);
  }
}

TEST_CASE("parse_report: a kscope.report/1 file still reads; each scope gets one verdict, written back as /2") {
  // Three scopes as /1 wrote them: one with /1's verdict object (its other conclusion
  // becomes evidence that does not agree) beside a counters verdict and a limiter, one from
  // before verdicts (its placement's limiter and hint become its verdict), one host-only.
  const std::string v1 = R"({"schema": "kscope.report/1", "sampled_metrics": null, "scopes": [
    {"path": "transpose", "calls": 10, "declared_work": {"flops": 1e9, "bytes": 4e9, "calls": 10},
     "roofline": {"roof": "fp32 plain", "flops_per_s": 1e12, "bytes_per_s": 4e12, "intensity": 0.25,
                  "roof_flops_per_s": 1.2e12, "fraction_of_roof": 0.2, "limiter": "latency",
                  "hint": "latency-bound: far under both roofs"},
     "counters": {"profiled_calls": 4, "verdict": {"kind": "latency-bound", "where": "", "text": "latency-bound: x",
                                                   "evidence": [], "missing": []}},
     "verdict": {"basis": "sampled metrics",
                 "verdict": {"kind": "memory-bound", "where": "L2", "text": "memory-bound (L2): L2 76%",
                             "evidence": [{"metric": "lts__throughput.avg.pct_of_peak_sustained_elapsed", "value": 76, "unit": "%"}]},
                 "others": [{"basis": "hardware counters", "agrees": false,
                             "said": {"kind": "latency-bound", "where": "", "text": "latency-bound: x",
                                      "evidence": [{"metric": "lts__t_sectors.avg.pct_of_peak_sustained_elapsed", "value": 22.6, "unit": "%"}]}}],
                 "missing": ["declared work: outweighed"]}},
    {"path": "decode", "calls": 10, "declared_work": {"flops": 1e9, "bytes": 4e9, "calls": 10},
     "roofline": {"roof": "fp32 plain", "flops_per_s": 1e12, "bytes_per_s": 4e12, "intensity": 0.25,
                  "roof_flops_per_s": 1.2e12, "fraction_of_roof": 0.83, "limiter": "memory",
                  "hint": "memory-bound: 83% of the DRAM roof"}},
    {"path": "tokenize", "calls": 3}]})";
  std::string error;
  const std::optional<kscope::session_report> r = kscope::parse_report(v1, &error);
  REQUIRE_MESSAGE(r.has_value(), error);
  REQUIRE(r->scopes.size() == 3);
  REQUIRE(r->scopes[0].verdict);
  const kscope::scope_verdict& t = *r->scopes[0].verdict;
  CHECK(t.basis == "sampled metrics");
  CHECK(t.verdict.kind == kscope::bottleneck::memory);
  CHECK(t.verdict.where == "L2");
  CHECK(t.verdict.facts.size() == 1);
  REQUIRE(t.evidence.size() == 2);
  CHECK(t.evidence[0].source == "sampled metrics");
  CHECK(t.evidence[1].source == "hardware counters");
  CHECK_FALSE(t.evidence[1].agrees);
  CHECK(t.missing == std::vector<std::string>{"declared work: outweighed"});
  REQUIRE(r->scopes[1].verdict);
  const kscope::scope_verdict& d = *r->scopes[1].verdict;
  CHECK(d.basis == "declared work");
  CHECK(d.verdict.kind == kscope::bottleneck::memory);
  CHECK(d.verdict.where == "DRAM");
  CHECK(d.verdict.text == "memory-bound: 83% of the DRAM roof");
  REQUIRE(d.decided() != nullptr);
  CHECK(d.decided()->count == 10);
  CHECK(d.decided()->percent_of_peak == doctest::Approx(83));
  CHECK_FALSE(r->scopes[2].verdict);
  // Printed, each scope says one conclusion, in the verdict section only.
  const std::string text = r->text();
  const std::size_t section = text.find("\nverdict per scope");
  REQUIRE_MESSAGE(section != std::string::npos, text);
  CHECK_MESSAGE(text.find("-bound") > section, text);
  CHECK_MESSAGE(text.find("latency-bound") == std::string::npos, text);
  CHECK_MESSAGE(text.find("transpose: memory-bound (L2), from sampled metrics\n  - memory-bound (L2): L2 76%") !=
                    std::string::npos,
                text);
  CHECK_MESSAGE(text.find("decode: memory-bound (DRAM), from declared work over 10 calls; 83% of the roof it was "
                          "placed under\n  - memory-bound: 83% of the DRAM roof") != std::string::npos,
                text);
  // Written again, it is a /2 report: one verdict object per scope, no limiter beside it.
  const auto doc = nlohmann::json::parse(r->json());
  CHECK(doc["schema"] == "kscope.report/2");
  CHECK(doc["scopes"][0]["verdict"]["class"] == "memory-bound");
  CHECK(doc["scopes"][0]["verdict"]["evidence"][1]["agrees"] == false);
  CHECK(doc["scopes"][1]["verdict"]["source"] == "declared work");
  CHECK(doc["scopes"][1]["roofline"].find("limiter") == doc["scopes"][1]["roofline"].end());
  CHECK(doc["scopes"][2]["verdict"].is_null());
  // And it reads back to the same verdicts.
  const std::optional<kscope::session_report> again = kscope::parse_report(r->json(), &error);
  REQUIRE_MESSAGE(again.has_value(), error);
  CHECK(again->text() == text);
}

TEST_CASE("merge: three ranks, rank 2 straggles on step; per-rank and across-rank values") {
  const std::vector<std::string> docs = {rank_report(0, 1.0e6, 40000), rank_report(1, 1.1e6, 50000),
                                         rank_report(2, 1.5e6, 30000)};
  const kscope::merged_report m = kscope::merge_reports(docs);
  CHECK(m.merged_count() == 3);
  REQUIRE(m.inputs.size() == 3);
  for (const auto& in : m.inputs) {
    CHECK(in.error.empty());
    CHECK(in.rank_from_report);
  }
  REQUIRE(m.scopes.size() == 3);
  CHECK(m.scopes[0].path == "step");
  CHECK(m.scopes[1].path == "step/allreduce");
  CHECK(m.scopes[2].path == "warmup");

  const kscope::merged_scope* step = m.find("step");
  REQUIRE(step != nullptr);
  REQUIRE(step->ranks.size() == 3);
  CHECK(step->ranks[2].rank == 2);
  CHECK(step->ranks[2].gpu_median_ns == doctest::Approx(1.5e6));
  CHECK(step->time_metric == "gpu");
  CHECK(step->time.ranks == 3);
  CHECK(step->time.min_ns == doctest::Approx(1.0e6));
  CHECK(step->time.median_ns == doctest::Approx(1.1e6));
  CHECK(step->time.max_ns == doctest::Approx(1.5e6));
  CHECK(step->time.slowest_rank == 2);
  CHECK(step->time.slowest_ratio == doctest::Approx(1.5 / 1.1));
  CHECK(step->host.median_ns == doctest::Approx(1.101e6));

  const kscope::merged_scope* ar = m.find("step/allreduce");
  REQUIRE(ar != nullptr);
  // Communication: the rank that waits longest in the all-reduce is the FASTEST rank (1).
  CHECK(ar->comm.ranks == 3);
  CHECK(ar->comm.median_ns == doctest::Approx(40000));
  CHECK(ar->comm.slowest_rank == 1);
  REQUIRE(ar->ranks[1].has_gpu_activity);
  CHECK(ar->ranks[1].gpu_activity.devices[0].device == 1);

  // Only rank 0 has "warmup" (host-only): judged on host time, one rank.
  const kscope::merged_scope* warm = m.find("warmup");
  REQUIRE(warm != nullptr);
  CHECK(warm->time_metric == "host");
  CHECK(warm->ranks.size() == 1);
  CHECK(warm->time.slowest_rank == 0);
  CHECK(warm->time.slowest_ratio == doctest::Approx(1.0));

  // Text: within 100 columns, names the straggler.
  const std::string text = m.text();
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::size_t columns = 0;
    for (std::size_t i = start; i < end; ++i) columns += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    CHECK(columns <= 100);
    start = end + 1;
  }
  CHECK(text.find("3 of 3 rank reports merged") != std::string::npos);
  CHECK(text.find("r2") != std::string::npos);
  CHECK(text.find("1.36x") != std::string::npos);

  // JSON: parses, schema, the same numbers.
  const auto j = nlohmann::json::parse(m.json());
  CHECK(j["schema"] == "kscope.merged/1");
  CHECK(j["merged"] == 3);
  CHECK(j["scopes"][0]["time"]["slowest_rank"] == 2);
  CHECK(j["scopes"][0]["time"]["median_ns"].get<double>() == doctest::Approx(1.1e6));
  CHECK(j["scopes"][1]["ranks"][0]["gpu_activity"]["comm_ns"] == 40000);
  CHECK(j["scopes"][2]["gpu"]["slowest_rank"].is_null());
  CHECK(j["inputs"][1]["error"].is_null());
}

TEST_CASE("merge: malformed, wrong-schema and duplicate inputs get an error each, the rest merge") {
  const std::vector<std::string> docs = {
      rank_report(0, 1.0e6, 1),
      "{\"schema\": \"kscope.report/1\", \"scopes\": [",     // truncated
      "{\"schema\": \"kscope.bench/1\", \"scopes\": []}",    // another kscope document
      "[1, 2, 3]",                                           // not an object
      "{\"schema\": \"kscope.report/1\"}",                   // no scopes
      "{\"schema\": \"kscope.report/1\", \"scopes\": [{\"name\": \"x\"}]}",  // scope without path
      rank_report(0, 2.0e6, 1),                              // rank 0 again
      rank_report(1, 3.0e6, 1),
      "",
  };
  const kscope::merged_report m = kscope::merge_reports(docs);
  REQUIRE(m.inputs.size() == docs.size());
  CHECK(m.merged_count() == 2);
  CHECK(m.inputs[0].error.empty());
  CHECK(m.inputs[1].error.find("input 1: not valid JSON") == 0);
  CHECK(m.inputs[2].error.find("kscope.bench/1") != std::string::npos);
  CHECK(m.inputs[3].error.find("not a JSON object") != std::string::npos);
  CHECK(m.inputs[4].error.find("scopes") != std::string::npos);
  CHECK(m.inputs[5].error.find("path") != std::string::npos);
  CHECK(m.inputs[6].error.find("rank 0 appears twice") != std::string::npos);
  CHECK(m.inputs[7].error.empty());
  CHECK_FALSE(m.inputs[8].error.empty());
  const kscope::merged_scope* step = m.find("step");
  REQUIRE(step != nullptr);
  CHECK(step->ranks.size() == 2);
  CHECK(step->time.slowest_rank == 1);
  CHECK(step->time.median_ns == 2.0e6);  // even count: mean of the middle two (type 7)
  const std::string text = m.text();
  CHECK(text.find("2 of 9 rank reports merged") != std::string::npos);
  CHECK(text.find("error: input 1") != std::string::npos);
  CHECK(nlohmann::json::parse(m.json())["inputs"][2]["rank"].is_null());
}

TEST_CASE("merge: no inputs, and reports without a rank use their position") {
  const kscope::merged_report empty = kscope::merge_reports({});
  CHECK(empty.inputs.empty());
  CHECK(empty.scopes.empty());
  CHECK(empty.text().find("0 of 0") != std::string::npos);
  CHECK(nlohmann::json::parse(empty.json())["scopes"].empty());

  const kscope::merged_report m =
      kscope::merge_reports({rank_report(5, 1e6, 1, false), rank_report(5, 2e6, 1, false)});
  CHECK(m.merged_count() == 2);
  CHECK(m.inputs[0].rank == 0);
  CHECK(m.inputs[1].rank == 1);
  CHECK_FALSE(m.inputs[1].rank_from_report);
  CHECK(m.find("step")->time.slowest_rank == 1);
}

TEST_CASE("report text: a scope on two devices gets one @GPU row per device, within 100 columns") {
  kscope::session_report r;
  kscope::scope_report s;
  s.id = 1;
  s.name = s.path = "tensor_parallel_layer_with_a_long_name";
  s.depth = 1;
  s.calls = 1;
  kscope::node_gpu_activity a;
  a.kernel_count = 3;
  a.kernel_ns = 3000;
  a.busy_ns = 2000;
  a.comm_kernel_count = 1;
  a.comm_ns = 1000;
  kscope::device_gpu_activity d0, d1;
  d0.device = 0;
  d0.kernel_count = 2;
  d0.kernel_ns = 2000;
  d0.busy_ns = 2000;
  d1.device = 1;
  d1.kernel_count = 1;
  d1.kernel_ns = 1000;
  d1.busy_ns = 1000;
  d1.comm_kernel_count = 1;
  d1.comm_ns = 1000;
  a.devices = {d0, d1};
  s.gpu_activity = a;
  r.scopes.push_back(s);
  const std::string text = r.text();
  CHECK(text.find("@GPU 0") != std::string::npos);
  CHECK(text.find("@GPU 1") != std::string::npos);
  CHECK(text.find("comm: NCCL") != std::string::npos);
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::size_t columns = 0;
    for (std::size_t i = start; i < end; ++i) columns += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    CHECK(columns <= 100);
    start = end + 1;
  }
  // And the split survives the JSON round trip.
  auto back = kscope::parse_report(r.json());
  REQUIRE(back.has_value());
  REQUIRE(back->scopes[0].gpu_activity.has_value());
  CHECK(back->scopes[0].gpu_activity->devices.size() == 2);
  CHECK(back->scopes[0].gpu_activity->devices[1].comm_ns == 1000);
}

TEST_CASE("compare_reports: per scope and time, the library's verdict and its words") {
  const auto parse = [](const std::string& doc) {
    auto r = kscope::parse_report(doc);
    REQUIRE(r.has_value());
    return *r;
  };
  // Every median interval is +-1 %; the candidate's step is 10 % slower.
  const kscope::session_report base = parse(rank_report(0, 1.0e6, 40000));
  const kscope::session_report cand = parse(rank_report(1, 1.1e6, 40000));
  const kscope::report_comparison c = kscope::compare_reports(base, cand);
  CHECK(c.threshold == 0.02);
  REQUIRE(c.scopes.size() == 4);  // step and step/allreduce, host and gpu each
  CHECK(c.scopes[0].path == "step");
  CHECK(c.scopes[0].time == "host");
  CHECK(c.scopes[1].time == "gpu");
  CHECK(c.scopes[1].baseline_median_ns == 1.0e6);
  CHECK(c.scopes[1].candidate_median_ns == 1.1e6);
  CHECK(c.scopes[1].result.ratio == doctest::Approx(1.1));
  CHECK(c.scopes[1].result.ratio_ci.lo == doctest::Approx(1.1 * 0.99 / 1.01));
  CHECK(c.scopes[1].result.result == kscope::verdict::slower);
  CHECK(c.scopes[0].result.result == kscope::verdict::slower);
  // Equal medians, but two +-1 % intervals bound the ratio only to [0.980, 1.020]: that
  // reaches past a 2 % band, so the verdict is inconclusive, not same.
  CHECK(c.scopes[2].path == "step/allreduce");
  CHECK(c.scopes[2].result.ratio == 1);
  CHECK(c.scopes[2].result.result == kscope::verdict::inconclusive);
  CHECK(c.count(kscope::verdict::slower) == 2);
  CHECK(c.count(kscope::verdict::inconclusive) == 2);
  CHECK(c.only_in_candidate.empty());
  REQUIRE(c.only_in_baseline.size() == 1);
  CHECK(c.only_in_baseline[0] == "warmup");
  const std::string text = c.text();
  CHECK(text.find("threshold 2.0%") != std::string::npos);
  CHECK(text.find("1.100  slower") != std::string::npos);
  CHECK(text.find("1.000  inconclusive") != std::string::npos);
  CHECK(text.find("warmup") != std::string::npos);
  CHECK(text.find("(missing in candidate)") != std::string::npos);
  CHECK(text.find("2 slower: FAIL") != std::string::npos);
  CHECK(text.find("unclear") == std::string::npos);  // one vocabulary: kscope::to_string(verdict)
  // Reversed, the new scope is listed and step is faster; a 5 % band makes allreduce the same.
  const kscope::report_comparison back = kscope::compare_reports(cand, base, 0.05);
  CHECK(back.only_in_candidate == std::vector<std::string>{"warmup"});
  CHECK(back.scopes[1].result.result == kscope::verdict::faster);
  CHECK(back.scopes[2].result.result == kscope::verdict::same);
  CHECK(back.count(kscope::verdict::slower) == 0);
  CHECK(back.text().find("no scope slower: PASS") != std::string::npos);
  CHECK(back.text().find("(new in candidate)") != std::string::npos);
}

TEST_CASE("format_duration_ns: the public duration format every table uses") {
  CHECK(kscope::format_duration_ns(812) == "812 ns");
  CHECK(kscope::format_duration_ns(1234) == "1.23 us");
  CHECK(kscope::format_duration_ns(45600000) == "45.6 ms");
  CHECK(kscope::format_duration_ns(2.5e9) == "2.50 s");
  CHECK(kscope::format_duration_ns(std::nan("")) == "-");
}

namespace {

// A report document with `field` replaced: the first `"field":<number>` after `after`.
std::string with_field(std::string doc, const std::string& after, const std::string& field, const std::string& value) {
  const std::size_t from = doc.find(after);
  REQUIRE(from != std::string::npos);
  const std::regex pattern("\"" + field + "\":\\s*-?[0-9][0-9.e+]*");
  std::smatch match;
  const std::string tail = doc.substr(from);
  REQUIRE(std::regex_search(tail, match, pattern));
  return doc.replace(from + static_cast<std::size_t>(match.position(0)), static_cast<std::size_t>(match.length(0)),
                     "\"" + field + "\":" + value);
}

std::string parse_error(const std::string& doc) {
  std::string error;
  const auto r = kscope::parse_report(doc, &error);
  return r ? std::string("(accepted)") : error;
}

}  // namespace

TEST_CASE("parse_report: every integer field is range-checked; the error names the scope, field and limit") {
  const std::string doc = rank_report(0, 1e6, 40000);  // the writer's order: path before depth
  REQUIRE(parse_error(doc) == "(accepted)");
  const std::string depth_limit = "field \"depth\" must be an integer in [0, 65536], got ";
  // Before: depth 1e9 indented every table row by 2 GB; -5 threw "internal error"
  // (std::string of ~2^64 bytes); 1e300 and -1 in counts were undefined behaviour.
  CHECK(parse_error(with_field(doc, "\"path\":\"step\"", "depth", "1e9")) ==
        "malformed kscope report: scope 0 (\"step\"): " + depth_limit + "1000000000");
  CHECK(parse_error(with_field(doc, "\"path\":\"step/allreduce\"", "depth", "-5")) ==
        "malformed kscope report: scope 1 (\"step/allreduce\"): " + depth_limit + "-5");
  CHECK(parse_error(with_field(doc, "\"path\":\"step\"", "depth", "65537")).find(depth_limit + "65537") !=
        std::string::npos);
  CHECK(parse_error(with_field(doc, "\"path\":\"step\"", "depth", "65536")) == "(accepted)");
  CHECK(parse_error(with_field(doc, "\"path\":\"step\"", "calls", "1e300"))
            .find("field \"calls\" must be an integer in [0, 18446744073709551615], got 1e+300") != std::string::npos);
  CHECK(parse_error(with_field(doc, "\"path\":\"step\"", "calls", "-1")).find("got -1") != std::string::npos);
  CHECK(parse_error(with_field(doc, "\"path\":\"step\"", "calls", "2.5")).find("got 2.5") != std::string::npos);
  CHECK(parse_error(with_field(doc, "\"host_ns\"", "n", "-1")).find("field \"n\"") != std::string::npos);
  CHECK(parse_error(with_field(doc, "\"gpu_activity\"", "kernel_ns", "1e19")).find("field \"kernel_ns\"") !=
        std::string::npos);
  CHECK(parse_error(with_field(doc, "\"devices\"", "device", "4294967296")).find("field \"device\"") !=
        std::string::npos);
  CHECK(parse_error(with_field(doc, "\"context\"", "process_id", "1e300")).find("context: field \"process_id\"") !=
        std::string::npos);
  CHECK(parse_error(with_field(doc, "\"context\"", "rank", "-2")).find("field \"rank\" must be an integer in [-1, ") !=
        std::string::npos);
  CHECK(parse_error(with_field(doc, "\"schema\"", "sample_cap", "-1")).find("sample_cap: field \"sample_cap\"") !=
        std::string::npos);
  // A string where an integer belongs is an error too (it was silently 0).
  const std::string quoted = std::regex_replace(doc, std::regex("\"depth\":2"), "\"depth\":\"2\"");
  CHECK(parse_error(quoted).find(depth_limit + "a string") != std::string::npos);
}

TEST_CASE("parse_report: top kernels: shared memory is bounded so that its printed sum is defined") {
  kscope::session_report r;
  kscope::kernel_summary k;
  k.name = k.mangled_name = "gemm";
  k.calls = 3;
  k.grid = {128, 2, 1};
  k.block = {256, 1, 1};
  k.static_shared_bytes = 1024;
  k.dynamic_shared_bytes = 4096;
  r.top_kernels.push_back(k);
  const std::string doc = r.json();
  std::string error;
  const auto back = kscope::parse_report(doc, &error);
  REQUIRE_MESSAGE(back.has_value(), error);
  REQUIRE(back->top_kernels.size() == 1);
  CHECK(back->top_kernels[0].grid[1] == 2);
  CHECK(back->top_kernels[0].dynamic_shared_bytes == 4096);
  // Two int32 maxima would overflow the int32 sum the text report prints.
  CHECK(parse_error(with_field(doc, "\"top_kernels\"", "static_shared_bytes", "2147483647"))
            .find("top kernel 0: field \"static_shared_bytes\" must be an integer in [0, 1073741823]") !=
        std::string::npos);
  const std::string bad_grid = std::regex_replace(doc, std::regex("\"grid\":\\[128"), "\"grid\":[-1");
  REQUIRE(bad_grid != doc);
  CHECK(parse_error(bad_grid).find("field \"grid\" must be an integer in [0, 2147483647], got -1") !=
        std::string::npos);
}

TEST_CASE("parse_report: lists are bounded: scopes, warnings, top kernels") {
  // The reader's scope limit is the recorder's node cap: no report kscope writes is refused.
  CHECK(kscope::report_max_scopes == kscope::recorder::max_nodes);
  CHECK(kscope::report_max_scope_depth >= kscope::recorder::max_nodes);
  std::string scopes;
  for (std::size_t i = 0; i <= kscope::report_max_scopes; ++i) scopes += "{\"path\": \"a\"},";
  scopes.pop_back();
  const std::string many = "{\"schema\": \"kscope.report/1\", \"scopes\": [" + scopes + "]}";
  CHECK(parse_error(many) == "malformed kscope report: field \"scopes\" has more than 65536 entries (the reader's limit)");
  std::string warnings;
  for (std::size_t i = 0; i <= kscope::report_max_list_entries; ++i) warnings += "0,";
  warnings.pop_back();
  CHECK(parse_error("{\"schema\": \"kscope.report/1\", \"scopes\": [], \"warnings\": [" + warnings + "]}")
            .find("field \"warnings\" has more than 65536 entries") != std::string::npos);
  CHECK(parse_error("{\"schema\": \"kscope.report/1\", \"scopes\": [], \"cupti\": {\"top_kernels\": [" + warnings +
                    "]}}")
            .find("field \"top_kernels\" has more than 65536 entries") != std::string::npos);
}

TEST_CASE("parse_report: reads in one pass; unknown members are skipped, the first of duplicates counts") {
  std::string error;
  const auto r = kscope::parse_report(
      R"({"future": {"x": [1, {"y": null}]}, "schema": "kscope.report/1", "warnings": ["w1", 7],
          "scopes": [{"path": "a\\/b", "depth": 1}, {"path": "a/b", "depth": 2}],
          "scopes": [{"path": "ignored"}], "schema": "ignored", "cupti": {"status": "ok", "status": "no"}})",
      &error);
  REQUIRE_MESSAGE(r.has_value(), error);
  CHECK(r->warnings == std::vector<std::string>{"w1", ""});  // a non-string warning reads as "", as before
  REQUIRE(r->scopes.size() == 2);
  CHECK(r->scopes[0].path == "a\\/b");  // the whole path is the key: an escaped '/' stays
  CHECK(r->scopes[1].path == "a/b");
  CHECK(r->cupti_status == "ok");
  // Syntax errors anywhere, even after a schema that does not match, are reported as JSON
  // errors when the document is not an object; a wrong schema stops reading at once.
  CHECK(parse_error("[1, 2").find("not valid JSON") == 0);
  CHECK(parse_error("[1, 2]") == "not a kscope report: the document is not a JSON object");
  CHECK(parse_error(R"({"schema": "kscope.bench/1", "benchmarks": [)") ==
        "not a kscope report: schema is \"kscope.bench/1\", expected \"kscope.report/2\" or \"kscope.report/1\"");
  CHECK(parse_error(R"({"scopes": []})") ==
        "not a kscope report: schema is \"\", expected \"kscope.report/2\" or \"kscope.report/1\"");
  CHECK(parse_error(R"({"schema": "kscope.report/1", "scopes": {}})") ==
        "malformed kscope report: no \"scopes\" array");
  CHECK(parse_error(R"({"schema": "kscope.report/1", "scopes": [7]})") ==
        "malformed kscope report: scope 0: a scope is not an object");
  CHECK(parse_error(R"({"schema": "kscope.report/1", "scopes": []} x)").find("trailing") != std::string::npos);
  // Over a limit of the JSON reader: "refused", with the offset.
  std::string zeros;
  for (std::size_t i = 0; i <= kscope::report_max_values_per_entry; ++i) zeros += "0,";
  zeros.pop_back();
  CHECK(parse_error(R"({"schema": "kscope.report/1", "scopes": [{"path": "a", "x": [)" + zeros + "]}]}")
            .find("refused: offset ") == 0);
  // The document, the scopes array and the scope are 3 levels: the 62nd '[' (offset 60 + 61)
  // is the 65th.
  CHECK(parse_error(R"({"schema": "kscope.report/1", "scopes": [{"path": "a", "x": )" + std::string(100, '[')) ==
        "refused: offset 121: nesting deeper than 64 levels");
  // Merging keys scopes by the whole path string.
  const auto m = kscope::merge_reports({R"({"schema": "kscope.report/1", "scopes": [{"path": "a\\/b"}, {"path": "a/b"}]})"});
  CHECK(m.scopes.size() == 2);
}

TEST_CASE("parse_report: reading a report costs about its size, not a tree of the whole document") {
  // 1000 scopes with CUPTI activity: about 2.5 MB of JSON. The tree reader held the whole
  // document as a tree (about 6x its text) on top of the result.
  std::string doc;
  {
    kscope::session_report r;
    kscope::scope_report base = kscope::parse_report(rank_report(0, 1e6, 40000))->scopes[1];
    for (int i = 0; i < 1000; ++i) {
      base.name = "scope_" + std::to_string(i);
      base.path = "step/" + base.name;
      r.scopes.push_back(base);
    }
    doc = r.json();
  }
  const std::size_t before = live_bytes.load();
  peak_bytes.store(before);
  std::string error;
  auto r = kscope::parse_report(doc, &error);
  const std::size_t peak = peak_bytes.load() - before;
  REQUIRE_MESSAGE(r.has_value(), error);
  CHECK(r->scopes.size() == 1000);
  MESSAGE("parse_report of ", doc.size(), " bytes: peak ", peak, " bytes allocated (",
          static_cast<double>(peak) / static_cast<double>(doc.size()), "x)");
  CHECK(peak < 2 * doc.size());
}

TEST_CASE("merged text: a deep scope costs no more than a shallow one") {
  kscope::merged_report m;
  kscope::merged_scope s;
  s.path = s.name = "deep";
  s.depth = kscope::report_max_scope_depth;
  m.scopes.push_back(s);
  const std::string text = m.text();
  CHECK(text.size() < 2000);
  CHECK(text.find(std::string(29, ' ') + "~") != std::string::npos);  // cut at the cell, as before
}

namespace {
// "req": a scope (1 us a call) and a cross-thread range (50 us) of the same path, two nodes
// as the recorder keeps them; rank 1 has the scope only.
std::string scope_and_range_report(int rank, bool with_range) {
  kscope::session_report r;
  r.context.rank = rank;
  kscope::scope_report scope;
  scope.id = 1;
  scope.name = scope.path = "req";
  scope.depth = 1;
  scope.calls = 10;
  scope.host_ns = median_summary(1000);
  r.scopes.push_back(scope);
  if (with_range) {
    kscope::scope_report range = scope;
    range.id = 2;
    range.cross_thread = true;
    range.host_ns = median_summary(50000);
    r.scopes.push_back(range);
  }
  return r.json();
}
}  // namespace

TEST_CASE("merge and compare: a range and a scope of one path stay apart") {
  const kscope::merged_report m =
      kscope::merge_reports({scope_and_range_report(0, true), scope_and_range_report(1, false)});
  REQUIRE(m.merged_count() == 2);
  REQUIRE(m.scopes.size() == 2);
  const kscope::merged_scope* scope = m.find("req");
  const kscope::merged_scope* range = m.find("req", /*cross_thread=*/true);
  REQUIRE(scope != nullptr);
  REQUIRE(range != nullptr);
  CHECK(scope->ranks.size() == 2);  // each rank once
  CHECK(scope->time.max_ns == 1000);
  REQUIRE(range->ranks.size() == 1);
  CHECK(range->ranks[0].rank == 0);
  CHECK(range->time.median_ns == 50000);
  const std::string text = m.text();
  CHECK(text.find("\nreq ~ ") != std::string::npos);
  CHECK(text.find("~: cross-thread range") != std::string::npos);
  const auto doc = nlohmann::json::parse(m.json());
  CHECK(doc["scopes"][0]["cross_thread"] == false);
  CHECK(doc["scopes"][1]["cross_thread"] == true);
  CHECK(doc["scopes"][0]["time"]["ranks"] == 2);

  // A report compared with itself: each node with itself, nothing slower.
  const kscope::session_report r = *kscope::parse_report(scope_and_range_report(0, true));
  const kscope::report_comparison same = kscope::compare_reports(r, r);
  REQUIRE(same.scopes.size() == 2);
  CHECK(same.scopes[0].path == "req");
  CHECK(same.scopes[1].path == "req ~");
  CHECK(same.scopes[1].baseline_median_ns == 50000);
  CHECK(same.count(kscope::verdict::slower) == 0);
  CHECK(same.text().find("PASS") != std::string::npos);
  // The range gone from the candidate is missing, not compared with the scope.
  const kscope::session_report without = *kscope::parse_report(scope_and_range_report(0, false));
  const kscope::report_comparison gone = kscope::compare_reports(r, without);
  CHECK(gone.scopes.size() == 1);
  CHECK(gone.only_in_baseline == std::vector<std::string>{"req ~"});

  // A threshold rule for the path applies to the range too, unless one names the range.
  kscope::compare_settings settings;
  settings.rules.push_back(kscope::threshold_rule{"req", 0.10, 1});
  REQUIRE(settings.rule_for("req ~") != nullptr);
  CHECK(settings.rule_for("req ~")->threshold == 0.10);
  settings.rules.push_back(kscope::threshold_rule{"req ~", 0.25, 2});
  CHECK(settings.rule_for("req ~")->threshold == 0.25);
  CHECK(settings.rule_for("req")->threshold == 0.10);
}

TEST_CASE("merge: a report without a rank never takes a rank another report names") {
  // Input 1 names no rank; its position, 1, is input 0's rank: it gets 0, the first free.
  const kscope::merged_report m = kscope::merge_reports({rank_report(1, 1e6, 1), rank_report(7, 2e6, 1, false)});
  CHECK(m.merged_count() == 2);
  CHECK(m.inputs[0].rank == 1);
  CHECK(m.inputs[1].error.empty());
  CHECK(m.inputs[1].rank == 0);
  CHECK_FALSE(m.inputs[1].rank_from_report);
  // Named later than the unnamed input that would have had it: the same.
  const kscope::merged_report later =
      kscope::merge_reports({rank_report(7, 1e6, 1, false), rank_report(0, 2e6, 1), rank_report(7, 3e6, 1, false)});
  CHECK(later.merged_count() == 3);
  CHECK(later.inputs[0].rank == 1);  // 0 is named by input 1
  CHECK(later.inputs[1].rank == 0);
  CHECK(later.inputs[2].rank == 2);  // its position, free
  // Two reports that name one rank are still refused.
  const kscope::merged_report twice = kscope::merge_reports({rank_report(3, 1e6, 1), rank_report(3, 2e6, 1)});
  CHECK(twice.inputs[1].error.find("rank 3 appears twice") != std::string::npos);
}

TEST_CASE("parse_report: every field a printer shows reads back: disagreement, peaks, counters, capture") {
  kscope::session_report r;
  r.context.rank = 0;
  r.context.devices_json = R"([{"ordinal":0,"name":"NVIDIA H100"}])";
  r.context.peaks_json = R"([{"device":{"ordinal":0},"bandwidth":{"theoretical_bytes_per_s":3.35e12}}])";
  r.cupti_counters.records_seen = 5000;
  r.cupti_counters.kernel_records = 3900;
  r.cupti_counters.dropped_by_cupti = 1000;
  r.cupti_counters.graph_records = 800;
  r.cupti_counters.graph_built_elsewhere = 800;
  kscope::scope_report s;
  s.id = 1;
  s.name = s.path = "step";
  s.depth = 1;
  s.calls = 10;
  s.host_ns = median_summary(1e6);
  s.gpu_calls = 10;
  s.gpu_ns = median_summary(1e5);
  s.gpu_time_disagreement = "its kernels kept the GPU busy 900 us a call, the events say 100 us";
  s.profiled_calls = 2;
  kscope::node_gpu_activity a;
  a.kernel_count = 800;
  a.kernel_ns = 120000000;
  a.busy_ns = 117600000;
  a.graph_capture.push_back(kscope::graph_capture_origin{1, 800, 120000000, 3, 4000});
  s.gpu_activity = a;
  r.scopes.push_back(s);
  const std::string doc = r.json();
  std::string error;
  const auto back = kscope::parse_report(doc, &error);
  REQUIRE_MESSAGE(back.has_value(), error);
  const kscope::scope_report& b = back->scopes.at(0);
  CHECK(b.gpu_time_disagreement == s.gpu_time_disagreement);
  CHECK(b.profiled_calls == 2);
  REQUIRE(b.gpu_activity.has_value());
  REQUIRE(b.gpu_activity->graph_capture.size() == 1);
  CHECK(b.gpu_activity->graph_capture[0].captured_in == 1);
  CHECK(b.gpu_activity->graph_capture[0].copy_ns == 4000);
  CHECK(back->cupti_counters.dropped_by_cupti == 1000);
  CHECK(back->cupti_counters.graph_built_elsewhere == 800);
  // Written again, the document says what it said.
  const auto first = nlohmann::json::parse(doc);
  const auto again = nlohmann::json::parse(back->json());
  CHECK(first["scopes"] == again["scopes"]);
  CHECK(first["context"]["peaks"] == again["context"]["peaks"]);
  CHECK(first["cupti"]["counters"] == again["cupti"]["counters"]);
  // The contradicted GPU time is not printed as true after the read-back either.
  const std::string text = back->text();
  CHECK_MESSAGE(text.find("100 us \xe2\x89\xa0" "CUPTI") != std::string::npos, text);
  CHECK(text.find("graph kernels built in: step (800 kernels") != std::string::npos);
}

TEST_CASE("parse_report: a time below zero, an interval upside down or a share a scope cannot have is refused") {
  const auto with = [](const std::function<void(kscope::scope_report&)>& change) {
    kscope::session_report r;
    kscope::scope_report parent;
    parent.id = 1;
    parent.name = parent.path = "step";
    parent.depth = 1;
    parent.calls = 10;
    parent.host_ns = median_summary(1000);
    r.scopes.push_back(parent);
    kscope::scope_report child = parent;
    child.id = 2;
    child.parent = 1;
    child.name = "a";
    child.path = "step/a";
    child.depth = 2;
    child.share_of_parent = 0.5;
    change(child);
    r.scopes.push_back(child);
    std::string error;
    const bool ok = kscope::parse_report(r.json(), &error).has_value();
    return ok ? std::string() : error;
  };
  CHECK(with([](kscope::scope_report&) {}).empty());
  CHECK(with([](kscope::scope_report& s) { s.host_ns.median = -500; }).find("scope 1 (\"step/a\"): median: a duration below zero (-500)") !=
        std::string::npos);
  CHECK(with([](kscope::scope_report& s) { s.host_ns.p99 = -1; }).find("p99: a duration below zero") != std::string::npos);
  CHECK(with([](kscope::scope_report& s) {
          s.gpu_calls = 10;
          s.gpu_ns = median_summary(100);
          s.gpu_ns.median_ci = kscope::interval{110, 90, 0.95};
        }).find("median_ci: an interval that ends before it starts (110 > 90)") != std::string::npos);
  CHECK(with([](kscope::scope_report& s) { s.share_of_parent = 3.0; }).find("share_of_parent: 3 of its parent's time") !=
        std::string::npos);
  CHECK(with([](kscope::scope_report& s) { s.share_of_parent = -0.1; }).find("below zero") != std::string::npos);
  // A range is not nested in its parent's calls: a share above 1 can be true.
  CHECK(with([](kscope::scope_report& s) {
          s.cross_thread = true;
          s.share_of_parent = 3.0;
        }).empty());
  // No interval (fewer than 6 samples): NaN bounds are not "upside down".
  CHECK(with([](kscope::scope_report& s) { s.host_ns.median_ci = kscope::interval{std::nan(""), std::nan(""), 0.95}; })
            .empty());
}

TEST_CASE("parse_report: a document without a context says it has no GPU, never an empty reason") {
  const auto r = kscope::parse_report(R"({"schema": "kscope.report/2", "scopes": []})");
  REQUIRE(r.has_value());
  CHECK(r->context.no_device_reason == "no GPU in the report");
  CHECK(r->text().find("GPU: no GPU in the report; host times only") != std::string::npos);
}
