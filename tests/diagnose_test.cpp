// diagnose() (verdict/diagnose.hpp) on synthetic reports: each pathology is named, and no
// other; a healthy report gives no finding; bad input (empty, NaN, no CUPTI) gives a
// defined, empty result; the text and JSON printers carry the evidence.
#include <kscope/report/merge.hpp>
#include <kscope/verdict/diagnose.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

using kscope::diagnosis_kind;

kscope::summary times(double p50, double p99) {
  kscope::summary s;
  s.n = 100;
  s.median = p50;
  s.mean = p50;
  s.p90 = p50 + 0.5 * (p99 - p50);
  s.p99 = p99;
  s.min = p50 * 0.9;
  s.max = p99 * 1.1;
  s.median_ci = kscope::interval{p50 * 0.98, p50 * 1.02, 0.95};
  s.steady = true;
  return s;
}

kscope::scope_report scope(kscope::node_id id, kscope::node_id parent, const std::string& name, const std::string& path,
                           std::size_t depth, std::uint64_t calls, double p50, double p99) {
  kscope::scope_report s;
  s.id = id;
  s.parent = parent;
  s.name = name;
  s.path = path;
  s.depth = depth;
  s.calls = calls;
  s.host_ns = times(p50, p99);
  s.host_inclusive_ns = p50 * static_cast<double>(calls);
  return s;
}

kscope::node_gpu_activity kernels(std::uint64_t count, double busy_ns) {
  kscope::node_gpu_activity a;
  a.kernel_count = count;
  a.kernel_ns = static_cast<std::int64_t>(busy_ns);
  a.busy_ns = static_cast<std::int64_t>(busy_ns);
  return a;
}

kscope::summary per_call(double median) { return times(median, median * 1.2); }

kscope::scope_gpu_time gpu_entry(kscope::node_id id, const std::string& path, std::uint64_t calls, double busy,
                                 double gaps, double kernels_per_call, double d2h_per_call) {
  kscope::scope_gpu_time g;
  g.id = id;
  g.path = path;
  g.calls_seen = calls;
  g.busy_per_call_ns = per_call(busy);
  g.gaps_per_call_ns = per_call(gaps);
  g.kernels_per_call = kernels_per_call;
  g.d2h_per_call = d2h_per_call;
  return g;
}

kscope::gpu_time_report timeline(double busy_share, const std::vector<std::pair<std::string, std::int64_t>>& gaps) {
  kscope::gpu_time_report t;
  t.window_start_ns = 0;
  t.window_end_ns = 1'000'000'000;
  t.wall_ns = 1e9;
  t.busy_share = busy_share;
  t.busy_ns = busy_share * 1e9;
  std::int64_t at = 0;
  for (const auto& [path, ns] : gaps) {
    t.idle_gaps.push_back(kscope::gpu_idle_gap{at += 10'000'000, ns, 0, path});
    auto same = std::find_if(t.idle_by_scope.begin(), t.idle_by_scope.end(),
                             [&](const kscope::gpu_idle_by_scope& g) { return g.path == path; });
    if (same == t.idle_by_scope.end()) same = t.idle_by_scope.insert(t.idle_by_scope.end(), kscope::gpu_idle_by_scope{0, path, 0, 0});
    same->ns += static_cast<double>(ns);
    ++same->gaps;
  }
  std::sort(t.idle_by_scope.begin(), t.idle_by_scope.end(),
            [](const kscope::gpu_idle_by_scope& a, const kscope::gpu_idle_by_scope& b) { return a.ns > b.ns; });
  return t;
}

// A serving loop: step > {schedule, decode, sampling, d2h, retire}, 100 steps of 10 ms.
kscope::session_report serving_loop() {
  kscope::session_report r;
  r.scopes = {scope(1, 0, "step", "step", 1, 100, 10e6, 11e6),
              scope(2, 1, "schedule", "step/schedule", 2, 100, 0.5e6, 0.6e6),
              scope(3, 1, "decode", "step/decode", 2, 100, 8e6, 9e6),
              scope(4, 1, "retire", "step/retire", 2, 100, 0.5e6, 0.6e6)};
  r.scopes[2].gpu_activity = kernels(5000, 800e6);
  return r;
}

std::vector<diagnosis_kind> kinds(const std::vector<kscope::diagnosis>& found) {
  std::vector<diagnosis_kind> out;
  for (const kscope::diagnosis& d : found) out.push_back(d.kind);
  return out;
}

bool has_evidence(const kscope::diagnosis& d, const std::string& metric) {
  for (const kscope::evidence& e : d.evidence)
    if (e.metric == metric && std::isfinite(e.value)) return true;
  return false;
}

}  // namespace

TEST_CASE("diagnose: a healthy serving loop has no finding, and the text says so with the numbers") {
  kscope::session_report r = serving_loop();
  r.gpu_time = timeline(0.95, {{"step/schedule", 100'000}});
  r.gpu_time->scopes = {gpu_entry(1, "step", 100, 9.5e6, 0.2e6, 50, 0), gpu_entry(3, "step/decode", 100, 8e6, 0.1e6, 50, 0)};
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  CHECK(found.empty());
  const std::string text = kscope::diagnosis_text(found, r);
  CHECK_MESSAGE(text.find("no problem found: GPU busy 95.0%") != std::string::npos, text);
  CHECK(nlohmann::json::parse(kscope::diagnosis_json(found))["findings"].empty());
}

// The usual end-of-step token copy (a "d2h" scope, one D2H copy per step) is no
// pathology: it is not where the GPU waits.
kscope::scope_report token_copy() {
  kscope::scope_report copy = scope(5, 1, "d2h", "step/d2h", 2, 100, 0.2e6, 0.3e6);
  copy.gpu_activity = kscope::node_gpu_activity{};
  copy.gpu_activity->memcpy[static_cast<std::size_t>(kscope::copy_direction::d2h)] = kscope::copy_totals{100, 6400, 200'000};
  return copy;
}

TEST_CASE("diagnose: launch-bound — gaps between decode's own kernels") {
  kscope::session_report r = serving_loop();
  r.scopes.push_back(token_copy());
  r.gpu_time = timeline(0.2, {{"step/decode", 3'000'000}, {"step/decode", 2'000'000}, {"step/schedule", 500'000}});
  r.gpu_time->scopes = {gpu_entry(1, "step", 100, 2e6, 7e6, 50, 1), gpu_entry(3, "step/decode", 100, 2e6, 6e6, 50, 0),
                        gpu_entry(5, "step/d2h", 100, 0.002e6, 0, 0, 1)};
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::cpu_launch_bound});
  const kscope::diagnosis& d = found[0];
  CHECK(has_evidence(d, "gpu_time.busy_share"));
  CHECK(has_evidence(d, "step.kernels_per_call"));
  CHECK(has_evidence(d, "idle.top_scope_ns"));
  CHECK_MESSAGE(d.text.find("while the host was in 'step/decode'") != std::string::npos, d.text);
  CHECK_MESSAGE(d.text.find("waits between its own 50 kernels per call") != std::string::npos, d.text);
  CHECK_MESSAGE(d.text.find("50 kernel launches per step") != std::string::npos, d.text);
  CHECK_MESSAGE(d.text.find("3.00 ms in step/decode") != std::string::npos, d.text);
  CHECK(d.suggestion.find("CUDA graph") != std::string::npos);
}

TEST_CASE("diagnose: CPU-bound — the GPU idles while the host schedules") {
  kscope::session_report r = serving_loop();
  r.scopes.push_back(token_copy());
  r.gpu_time = timeline(0.3, {{"step/schedule", 3'000'000}, {"step/schedule", 3'000'000}, {"step/decode", 100'000}});
  r.gpu_time->scopes = {gpu_entry(1, "step", 100, 3e6, 1e6, 20, 1), gpu_entry(2, "step/schedule", 100, 0, 0, 0, 0),
                        gpu_entry(3, "step/decode", 100, 3e6, 0.1e6, 20, 0)};
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::cpu_launch_bound});
  CHECK_MESSAGE(found[0].text.find("while the host was in 'step/schedule'") != std::string::npos, found[0].text);
  CHECK(found[0].text.find("its own") == std::string::npos);  // schedule launches nothing
}

TEST_CASE("diagnose: host sync — the GPU idles in decode, which copies to the host every call") {
  kscope::session_report r = serving_loop();
  r.scopes.push_back(token_copy());
  r.scopes[2].gpu_activity->memcpy[static_cast<std::size_t>(kscope::copy_direction::d2h)] =
      kscope::copy_totals{100, 100 << 20, 50'000'000};
  r.gpu_time = timeline(0.35, {{"step/decode", 1'000'000}, {"step/decode", 900'000}, {"step/retire", 500'000}});
  r.gpu_time->scopes = {gpu_entry(1, "step", 100, 3.5e6, 1e6, 50, 2),
                        gpu_entry(3, "step/decode", 100, 3.4e6, 2e6, 50, 1),
                        gpu_entry(4, "step/retire", 100, 0, 0, 0, 0)};
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::host_sync});
  const kscope::diagnosis& d = found[0];
  CHECK(has_evidence(d, "waiting_scope.d2h_copies_per_call"));
  CHECK_MESSAGE(d.text.find("'step/decode' copies device to host 1 times per call") != std::string::npos, d.text);
  CHECK(d.suggestion.find("cudaMemcpyAsync") != std::string::npos);

  SUBCASE("a scope named as a sync point, with no copy CUPTI saw") {
    const std::vector<kscope::scope_gpu_time> entries = r.gpu_time->scopes;
    r.gpu_time = timeline(0.35, {{"step/wait_tokens", 2'000'000}});
    r.gpu_time->scopes = entries;
    r.scopes.push_back(scope(8, 1, "wait_tokens", "step/wait_tokens", 2, 100, 2e6, 2.2e6));
    CHECK(kinds(kscope::diagnose(r)) == std::vector<diagnosis_kind>{diagnosis_kind::cpu_launch_bound});
    kscope::diagnose_options o;
    o.sync_names = {"wait_tokens"};
    CHECK(kinds(kscope::diagnose(r, o)) == std::vector<diagnosis_kind>{diagnosis_kind::host_sync});
  }
}

// A synchronize after every layer inside decode: the GPU is busy most of the time, yet it
// idles whenever decode blocks the host. CUPTI's synchronization records carry the count.
TEST_CASE("diagnose: host sync with a busy GPU — decode synchronizes 9 times per call") {
  kscope::session_report r = serving_loop();
  kscope::scope_report copy = token_copy();
  copy.gpu_activity->host_sync = kscope::host_sync_totals{100, 20'000'000, 100, 0, 0};  // the token sync: fine
  r.scopes.push_back(copy);
  r.scopes[2].gpu_activity->host_sync = kscope::host_sync_totals{900, 300'000'000, 0, 0, 900};
  r.gpu_time = timeline(0.75, {{"step/decode", 60'000'000}, {"step/decode", 60'000'000}, {"step/d2h", 90'000'000}});
  r.gpu_time->scopes = {gpu_entry(1, "step", 100, 7.5e6, 1e6, 50, 1), gpu_entry(3, "step/decode", 100, 7e6, 1.2e6, 50, 0),
                        gpu_entry(5, "step/d2h", 100, 0.002e6, 0, 0, 1)};
  std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::host_sync});
  const kscope::diagnosis& d = found[0];
  CHECK(has_evidence(d, "scope.host_syncs_per_call"));
  CHECK(has_evidence(d, "scope.gpu_idle_share_of_wall"));
  CHECK_MESSAGE(d.text.find("'step/decode' blocks the host in every call: 9 synchronizes per call (900 device/context") !=
                    std::string::npos,
                d.text);
  CHECK_MESSAGE(d.text.find("the host waiting 3.00 ms per call") != std::string::npos, d.text);
  CHECK_MESSAGE(d.text.find("the GPU idled 120 ms (12.0% of 1.00 s, 2 gaps)") != std::string::npos, d.text);

  SUBCASE("the GPU hardly idles in the synchronizing scope: no finding") {
    r.gpu_time = timeline(0.75, {{"step/decode", 10'000'000}, {"step/d2h", 90'000'000}});
    r.gpu_time->scopes = {gpu_entry(3, "step/decode", 100, 7e6, 1.2e6, 50, 0)};
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("only the sync point synchronizes: no finding") {
    r.scopes[2].gpu_activity->host_sync = kscope::host_sync_totals{};
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("fewer than one synchronize per call: no finding") {
    r.scopes[2].gpu_activity->host_sync = kscope::host_sync_totals{50, 10'000'000, 50, 0, 0};
    CHECK(kscope::diagnose(r).empty());
  }
}

TEST_CASE("diagnose: decode stalls behind prefill — a step tail that the prefill steps explain") {
  kscope::session_report r = serving_loop();
  r.scopes[0].host_ns = times(5e6, 25e6);
  kscope::scope_report prefill = scope(6, 1, "prefill", "step/prefill", 2, 10, 18e6, 19e6);
  prefill.gpu_activity = kernels(40, 10 * 18e6);
  r.scopes.insert(r.scopes.begin() + 2, prefill);
  r.gpu_time = timeline(0.9, {{"step/schedule", 100'000}});
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::prefill_stall});
  const kscope::diagnosis& d = found[0];
  CHECK(has_evidence(d, "step.p99_ns"));
  CHECK(has_evidence(d, "prefill.gpu_ns_per_call"));
  CHECK_MESSAGE(d.text.find("'step/prefill' ran in 10.0% of the steps (10 of 100)") != std::string::npos, d.text);
  CHECK(d.suggestion.find("chunked prefill") != std::string::npos);

  SUBCASE("prefill in every step (chunked): no finding") {
    r.scopes[2].calls = 100;
    r.scopes[2].gpu_activity = kernels(400, 100 * 1e6);
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("a tail prefill cannot explain: no finding") {
    r.scopes[2].gpu_activity = kernels(40, 10 * 1e6);
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("the mean prefill falls short, the long prefills explain the tail (H200: 6.2 ms mean, 7.8 ms p90)") {
    // p99 - p50 = 20 ms: a mean of 9 ms per call is under half of it, the p90 of 12 ms is not.
    r.scopes[2].calls = 20;
    r.scopes[2].gpu_activity = kernels(80, 20 * 9e6);
    CHECK(kscope::diagnose(r).empty());
    kscope::scope_gpu_time pg = gpu_entry(6, "step/prefill", 20, 8e6, 0.1e6, 4, 0);
    pg.busy_per_call_ns.p90 = 12e6;
    r.gpu_time->scopes.push_back(pg);
    const std::vector<kscope::diagnosis> tail = kscope::diagnose(r);
    REQUIRE(kinds(tail) == std::vector<diagnosis_kind>{diagnosis_kind::prefill_stall});
    CHECK(has_evidence(tail[0], "prefill.gpu_busy_per_call_p90_ns"));
    CHECK_MESSAGE(tail[0].text.find("12.0 ms of GPU time per call (p90 of 20 calls)") != std::string::npos, tail[0].text);
    // Fewer calls in the rings than min_step_calls: the mean decides, no finding.
    r.gpu_time->scopes.back().calls_seen = 5;
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("the prefill scope found by its phase tag") {
    r.scopes[2].name = "fill_prompt";
    r.scopes[2].tags.push_back(kscope::tag_count{"phase", "prefill", 10});
    CHECK(kinds(kscope::diagnose(r)) == std::vector<diagnosis_kind>{diagnosis_kind::prefill_stall});
  }
}

TEST_CASE("diagnose: KV-cache traffic — busy GPU, memory-bound decode") {
  kscope::session_report r = serving_loop();
  r.gpu_time = timeline(0.96, {{"step/schedule", 100'000}});
  // 1 FLOP/B at 3 TB/s of a 4.8 TB/s roof: memory-bound.
  r.scopes[2].roofline = kscope::place(kscope::work{1e9, 1e9}, 1e9 / 3e12, 989e12, 4.8e12);
  r.scopes[2].roof = "bf16 tensor";
  REQUIRE(r.scopes[2].roofline->limiter == kscope::bound::memory);
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::kv_cache_traffic});
  CHECK(has_evidence(found[0], "decode.share_of_gpu"));
  CHECK(has_evidence(found[0], "roofline.fraction_of_roof"));
  CHECK_MESSAGE(found[0].text.find("declared-work roofline") != std::string::npos, found[0].text);

  SUBCASE("decided by hardware counters: the text carries their numbers") {
    kscope::scope_counter_report c;
    c.classified.verdict.kind = kscope::bottleneck::memory;
    c.classified.verdict.where = "DRAM";
    c.classified.verdict.facts = {{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 83.5, "%"},
                                  {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.0, "%"}};
    r.scopes[2].counters = c;
    const std::vector<kscope::diagnosis> by_counters = kscope::diagnose(r);
    REQUIRE(kinds(by_counters) == std::vector<diagnosis_kind>{diagnosis_kind::kv_cache_traffic});
    CHECK(has_evidence(by_counters[0], "dram__throughput.avg.pct_of_peak_sustained_elapsed"));
    CHECK_MESSAGE(by_counters[0].text.find("memory-bound (hardware counters, "
                                           "dram__throughput.avg.pct_of_peak_sustained_elapsed = 83.5 %") !=
                      std::string::npos,
                  by_counters[0].text);
  }
  SUBCASE("the scope's one verdict decides, as a report read back from JSON holds it (no counters section)") {
    kscope::scope_verdict v;
    v.basis = "hardware counters";
    v.verdict.kind = kscope::bottleneck::memory;
    v.verdict.where = "DRAM";
    v.verdict.facts = {{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 83.5, "%"}};
    r.scopes[2].verdict = v;
    const std::vector<kscope::diagnosis> by_verdict = kscope::diagnose(r);
    REQUIRE(kinds(by_verdict) == std::vector<diagnosis_kind>{diagnosis_kind::kv_cache_traffic});
    CHECK(has_evidence(by_verdict[0], "dram__throughput.avg.pct_of_peak_sustained_elapsed"));
    CHECK_MESSAGE(by_verdict[0].text.find("memory-bound (hardware counters, ") != std::string::npos, by_verdict[0].text);
    // A verdict of another kind outranks the memory-side placement of the declared work.
    r.scopes[2].verdict->verdict.kind = kscope::bottleneck::compute;
    CHECK(kscope::diagnose(r).empty());
    // Decided by declared work: the same at-the-roof bar as without a verdict.
    r.scopes[2].verdict->basis = "declared work";
    r.scopes[2].verdict->verdict.kind = kscope::bottleneck::memory;
    const std::vector<kscope::diagnosis> by_declared = kscope::diagnose(r);
    REQUIRE(kinds(by_declared) == std::vector<diagnosis_kind>{diagnosis_kind::kv_cache_traffic});
    CHECK_MESSAGE(by_declared[0].text.find("declared-work roofline") != std::string::npos, by_declared[0].text);
  }
  SUBCASE("declared work under the ridge but far from the roof: no finding (healthy serving, H200: 54 %)") {
    // 1 FLOP/B at 2.6 TB/s of a 4.8 TB/s roof: memory-side of the ridge, 54 % of the roof.
    r.scopes[2].roofline = kscope::place(kscope::work{1e9, 1e9}, 1e9 / 2.6e12, 989e12, 4.8e12);
    REQUIRE(r.scopes[2].roofline->limiter == kscope::bound::memory);
    CHECK(r.scopes[2].roofline->fraction_of_roof == doctest::Approx(2.6 / 4.8));
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("an idle GPU is not limited by decode's memory traffic") {
    r.gpu_time->busy_share = 0.6;
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("a compute-bound decode: no finding") {
    r.scopes[2].roofline = kscope::place(kscope::work{1e12, 1e8}, 1e12 / 800e12, 989e12, 4.8e12);
    CHECK(kscope::diagnose(r).empty());
  }
}

TEST_CASE("diagnose: communication — NCCL kernels a large share of the kernel time") {
  kscope::session_report r = serving_loop();
  r.gpu_time = timeline(0.9, {{"step/schedule", 100'000}});
  kscope::scope_report ar = scope(7, 1, "allreduce", "step/allreduce", 2, 100, 3e6, 3.2e6);
  ar.gpu_activity = kernels(100, 400e6);
  ar.gpu_activity->comm_kernel_count = 100;
  ar.gpu_activity->comm_ns = 400'000'000;
  ar.gpu_activity->comm_busy_ns = 400'000'000;
  r.scopes.push_back(ar);
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::communication});
  CHECK(has_evidence(found[0], "comm_share_of_kernel_time"));
  CHECK_MESSAGE(found[0].text.find("most in 'step/allreduce'") != std::string::npos, found[0].text);

  const auto doc = nlohmann::json::parse(kscope::diagnosis_json(found));
  CHECK(doc["schema"] == "kscope.diagnosis/1");
  REQUIRE(doc["findings"].size() == 1);
  CHECK(doc["findings"][0]["kind"] == "communication");
  CHECK(doc["findings"][0]["evidence"][0]["metric"] == "comm_share_of_kernel_time");
  CHECK(doc["findings"][0]["evidence"][0]["value"].get<double>() == doctest::Approx(400.0 / 1200));
  const std::string text = kscope::diagnosis_text(found, r);
  CHECK(text.find("[communication]") != std::string::npos);
  CHECK(text.find("try: overlap collectives") != std::string::npos);
}

TEST_CASE("diagnose: custom step names") {
  kscope::session_report r = serving_loop();
  r.scopes[0].name = r.scopes[0].path = "iteration";
  r.gpu_time = timeline(0.2, {{"iteration/decode", 3'000'000}});
  r.gpu_time->scopes = {gpu_entry(1, "iteration", 100, 2e6, 7e6, 50, 0)};
  // Without a step the session-wide share decides alone; with the name, the step's numbers join.
  const std::vector<kscope::diagnosis> plain = kscope::diagnose(r);
  REQUIRE(plain.size() == 1);
  CHECK_FALSE(has_evidence(plain[0], "step.kernels_per_call"));
  kscope::diagnose_options o;
  o.step_names = {"iteration"};
  const std::vector<kscope::diagnosis> named = kscope::diagnose(r, o);
  REQUIRE(named.size() == 1);
  CHECK(has_evidence(named[0], "step.kernels_per_call"));
}

TEST_CASE("diagnose: bad input gives a defined result") {
  SUBCASE("empty report") {
    const kscope::session_report r;
    CHECK(kscope::diagnose(r).empty());
    CHECK(kscope::diagnosis_text({}, r).find("nothing to diagnose") != std::string::npos);
  }
  SUBCASE("NaN everywhere") {
    kscope::session_report r = serving_loop();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    r.scopes[0].host_ns = times(nan, nan);
    r.gpu_time = timeline(nan, {{"step/decode", 3'000'000}});
    r.gpu_time->wall_ns = nan;
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("no CUPTI: a step tail alone is not blamed on anything") {
    kscope::session_report r = serving_loop();
    r.scopes[2].gpu_activity.reset();
    r.scopes[0].host_ns = times(5e6, 25e6);
    kscope::scope_report prefill = scope(6, 1, "prefill", "step/prefill", 2, 10, 0.1e6, 0.2e6);
    r.scopes.push_back(prefill);  // its host time is the launches only: no GPU time to explain the tail
    CHECK(kscope::diagnose(r).empty());
    CHECK(kscope::diagnosis_text({}, r).find("without a GPU timeline") != std::string::npos);
  }
}

TEST_CASE("diagnose: a report saved as JSON and read back gives the same findings (kscope diagnose)") {
  kscope::session_report r = serving_loop();
  r.scopes.push_back(token_copy());
  r.gpu_time = timeline(0.2, {{"step/decode", 3'000'000}, {"step/decode", 2'000'000}, {"step/schedule", 500'000}});
  r.gpu_time->scopes = {gpu_entry(1, "step", 100, 2e6, 7e6, 50, 1), gpu_entry(3, "step/decode", 100, 2e6, 6e6, 50, 0),
                        gpu_entry(5, "step/d2h", 100, 0.002e6, 0, 0, 1)};
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE_FALSE(found.empty());

  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(r.json(), &error);
  REQUIRE_MESSAGE(back, error);
  REQUIRE(back->gpu_time);
  const kscope::gpu_time_report& t = *back->gpu_time;
  CHECK(t.busy_share == doctest::Approx(r.gpu_time->busy_share));
  CHECK(t.wall_ns == doctest::Approx(r.gpu_time->wall_ns));
  REQUIRE(t.idle_gaps.size() == r.gpu_time->idle_gaps.size());
  CHECK(t.idle_gaps[0].open_path == r.gpu_time->idle_gaps[0].open_path);
  CHECK(t.idle_gaps[0].ns == r.gpu_time->idle_gaps[0].ns);
  REQUIRE(t.idle_by_scope.size() == r.gpu_time->idle_by_scope.size());
  REQUIRE(t.scopes.size() == 3);
  const kscope::scope_gpu_time* decode = t.find(3);
  REQUIRE(decode != nullptr);
  CHECK(decode->path == "step/decode");
  CHECK(decode->calls_seen == 100);
  CHECK(decode->kernels_per_call == doctest::Approx(50));
  CHECK(decode->busy_per_call_ns.median == doctest::Approx(r.gpu_time->find(3)->busy_per_call_ns.median));

  const std::vector<kscope::diagnosis> again = kscope::diagnose(*back);
  CHECK(kinds(again) == kinds(found));
  REQUIRE(again.size() == found.size());
  CHECK(again[0].text == found[0].text);
  CHECK(kscope::diagnosis_text(again, *back) == kscope::diagnosis_text(found, r));

  SUBCASE("a gpu_time section of the wrong type is a clear error, not a crash") {
    std::string json = r.json();
    const std::size_t at = json.find("\"gpu_time\":");
    REQUIRE(at != std::string::npos);
    json.insert(at + std::string("\"gpu_time\":").size(), " 7, \"gpu_time_was\":");
    CHECK_FALSE(kscope::parse_report(json, &error));
    CHECK_MESSAGE(error.find("gpu_time") != std::string::npos, error);
  }
}
