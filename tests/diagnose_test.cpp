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

namespace diagnose_test {  // one per file: the unit tests build as one program

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

// The text with its 98-column wrapping undone ("\n  " continues a paragraph).
std::string unwrapped(std::string text) {
  for (std::size_t at = text.find("\n  "); at != std::string::npos; at = text.find("\n  ", at)) text.replace(at, 3, " ");
  return text;
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
  CHECK(unwrapped(text).find("no decode at its memory roof setting the pace") != std::string::npos);
  CHECK(nlohmann::json::parse(kscope::diagnosis_json(found))["findings"].empty());
}

TEST_CASE("diagnose: 'no problem found' names only what was checked (no memory-bound decode denied on an idle GPU)") {
  kscope::session_report r = serving_loop();
  r.gpu_time = timeline(0.6, {{"step/schedule", 100'000}});
  r.gpu_time->scopes = {gpu_entry(1, "step", 100, 9.5e6, 0.2e6, 50, 0), gpu_entry(3, "step/decode", 100, 8e6, 0.1e6, 50, 0)};
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(found.empty());
  const std::string text = unwrapped(kscope::diagnosis_text(found, r));
  CHECK_MESSAGE(text.find("memory roof") == std::string::npos, text);
  CHECK(text.find("memory-bound decode") == std::string::npos);
  CHECK_MESSAGE(text.find("decode's memory traffic was not weighed: that check needs the GPU busy 80.0% or more") !=
                    std::string::npos,
                text);
  // The options diagnose() was given set the words too.
  kscope::diagnose_options o;
  o.busy_share_high = 0.5;
  CHECK(unwrapped(kscope::diagnosis_text(kscope::diagnose(r, o), r, o)).find("no decode at its memory roof") !=
        std::string::npos);
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
  // Cost: all of the GPU's idle time (5.5 ms of 1 s), per 10 ms step.
  CHECK(d.cost_basis == "wall time");
  CHECK(d.cost_share == doctest::Approx(5.5e6 / 1e9));
  CHECK(d.cost_ms_per_step == doctest::Approx(0.055));
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
  CHECK_MESSAGE(d.text.find("; cost: 1.20 ms per step (12.0% of the wall time)") != std::string::npos, d.text);
  CHECK(has_evidence(d, "cost.share_of_wall_time"));

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
  SUBCASE("traced in windows: the waits counted are the windows' only, so no per-call count and no finding") {
    // 900 waits in the windows over 100 calls of the run would read 9 per call; they may be
    // 90 per call of the 10 calls the windows held. Saying nothing is true; 9 is not known.
    r.trace_windows.windowed = true;
    r.trace_windows.windows = 3;
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

TEST_CASE("diagnose: decode memory-bound — busy GPU; the KV cache named only on evidence") {
  kscope::session_report r = serving_loop();
  r.gpu_time = timeline(0.96, {{"step/schedule", 100'000}});
  // 1 FLOP/B at 3 TB/s of a 4.8 TB/s roof: memory-bound.
  r.scopes[2].roofline = kscope::place(kscope::work{1e9, 1e9}, 1e9 / 3e12, 989e12, 4.8e12);
  r.scopes[2].roof = "bf16 tensor";
  REQUIRE(r.scopes[2].roofline->limiter == kscope::bound::memory);
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::decode_memory_bound});
  CHECK(has_evidence(found[0], "decode.share_of_gpu"));
  CHECK(has_evidence(found[0], "roofline.fraction_of_roof"));
  CHECK_MESSAGE(found[0].text.find("declared-work roofline") != std::string::npos, found[0].text);
  // Nothing separates the weights' bytes from the KV cache's: both are named, and how to
  // declare them apart.
  CHECK(found[0].title == "decode memory-bound (weights and KV cache)");
  CHECK_MESSAGE(found[0].text.find("reads the weights and the KV cache") != std::string::npos, found[0].text);
  CHECK(found[0].text.find("step reads the KV cache from DRAM") == std::string::npos);
  CHECK_MESSAGE(found[0].suggestion.find("kscope::scope kv{\"kv\", stream}; kv.set_work(") != std::string::npos,
                found[0].suggestion);
  CHECK_FALSE(has_evidence(found[0], "decode.kv_share_of_declared_bytes"));
  // Its cost: the memory-bound scope's GPU time, as a share of the wall time.
  CHECK(found[0].cost_basis == "wall time");
  CHECK(found[0].cost_share == doctest::Approx(0.96));
  CHECK(found[0].cost_ms_per_step == doctest::Approx(0.96 * 10));
  CHECK(has_evidence(found[0], "cost.share_of_wall_time"));
  CHECK_MESSAGE(found[0].text.find("; cost: 9.60 ms per step (96.0% of the wall time), GPU time at the memory roof") !=
                    std::string::npos,
                found[0].text);

  // A "kv" child of decode declaring its bytes; decode declares the whole step's.
  r.scopes[2].declared = kscope::work{100e9, 100e9};
  kscope::scope_report kv = scope(9, 3, "kv", "step/decode/kv", 3, 3200, 0.1e6, 0.12e6);
  SUBCASE("declared: the KV cache is 70 % of decode's bytes — KV-cache traffic") {
    kv.declared = kscope::work{1e9, 70e9};
    r.scopes.insert(r.scopes.begin() + 3, kv);
    const std::vector<kscope::diagnosis> kv_found = kscope::diagnose(r);
    REQUIRE(kinds(kv_found) == std::vector<diagnosis_kind>{diagnosis_kind::kv_cache_traffic});
    CHECK(kv_found[0].title == "decode is memory-bound: KV-cache traffic sets the pace");
    CHECK_MESSAGE(kv_found[0].text.find("the KV cache is 70.0% of decode's declared bytes (70.0 GB of 100 GB)") !=
                      std::string::npos,
                  kv_found[0].text);
    CHECK(has_evidence(kv_found[0], "decode.kv_share_of_declared_bytes"));
    CHECK(kv_found[0].suggestion.find("quantized KV cache") != std::string::npos);
  }
  SUBCASE("declared: the KV cache is 20 % — the weights set the pace") {
    kv.declared = kscope::work{1e9, 20e9};
    r.scopes.insert(r.scopes.begin() + 3, kv);
    const std::vector<kscope::diagnosis> w_found = kscope::diagnose(r);
    REQUIRE(kinds(w_found) == std::vector<diagnosis_kind>{diagnosis_kind::decode_memory_bound});
    CHECK(w_found[0].title == "decode is memory-bound: weight reads set the pace");
    CHECK_MESSAGE(w_found[0].text.find("the KV cache is only 20.0% of decode's declared bytes") != std::string::npos,
                  w_found[0].text);
    CHECK(w_found[0].suggestion.find("larger decode batches") != std::string::npos);
  }
  SUBCASE("declared on a \"weights\" and a \"kv\" scope, decode declaring nothing") {
    r.scopes[2].declared = kscope::work{};
    kv.declared = kscope::work{1e9, 30e9};
    kscope::scope_report weights = scope(10, 3, "weights", "step/decode/weights", 3, 3200, 0.1e6, 0.12e6);
    weights.declared = kscope::work{1e9, 10e9};
    r.scopes.insert(r.scopes.begin() + 3, kv);
    r.scopes.insert(r.scopes.begin() + 4, weights);
    const std::vector<kscope::diagnosis> both = kscope::diagnose(r);
    REQUIRE(kinds(both) == std::vector<diagnosis_kind>{diagnosis_kind::kv_cache_traffic});
    CHECK_MESSAGE(both[0].text.find("75.0% of decode's declared bytes (30.0 GB of 40.0 GB)") != std::string::npos,
                  both[0].text);
  }
  SUBCASE("a kv scope without declared bytes separates nothing") {
    r.scopes.insert(r.scopes.begin() + 3, kv);
    const std::vector<kscope::diagnosis> none = kscope::diagnose(r);
    REQUIRE(kinds(none) == std::vector<diagnosis_kind>{diagnosis_kind::decode_memory_bound});
    CHECK(none[0].title == "decode memory-bound (weights and KV cache)");
  }
  SUBCASE("the memory-bound scope is decode's attention: it reads the KV cache") {
    r.scopes[2].roofline.reset();
    kscope::scope_report attention = scope(11, 3, "attention", "step/decode/attention", 3, 3200, 0.1e6, 0.12e6);
    attention.roofline = kscope::place(kscope::work{1e9, 1e9}, 1e9 / 3e12, 989e12, 4.8e12);
    attention.gpu_activity = kernels(3200, 300e6);
    r.scopes.insert(r.scopes.begin() + 3, attention);
    const std::vector<kscope::diagnosis> att = kscope::diagnose(r);
    REQUIRE(kinds(att) == std::vector<diagnosis_kind>{diagnosis_kind::kv_cache_traffic});
    CHECK_MESSAGE(att[0].text.find("'step/decode/attention' is memory-bound") != std::string::npos, att[0].text);
    CHECK_MESSAGE(att[0].text.find("each decode step reads the KV cache from DRAM") != std::string::npos, att[0].text);
    // Its cost is attention's GPU time: 300 of the 1100 ms the scopes ran, at 96 % busy.
    CHECK(att[0].cost_share == doctest::Approx(300.0 / 1100 * 0.96));
  }

  SUBCASE("decided by hardware counters: the text carries their numbers") {
    kscope::scope_counter_report c;
    c.classified.verdict.kind = kscope::bottleneck::memory;
    c.classified.verdict.where = "DRAM";
    c.classified.verdict.facts = {{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 83.5, "%"},
                                  {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.0, "%"}};
    r.scopes[2].counters = c;
    const std::vector<kscope::diagnosis> by_counters = kscope::diagnose(r);
    REQUIRE(kinds(by_counters) == std::vector<diagnosis_kind>{diagnosis_kind::decode_memory_bound});
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
    REQUIRE(kinds(by_verdict) == std::vector<diagnosis_kind>{diagnosis_kind::decode_memory_bound});
    CHECK(has_evidence(by_verdict[0], "dram__throughput.avg.pct_of_peak_sustained_elapsed"));
    CHECK_MESSAGE(by_verdict[0].text.find("memory-bound (hardware counters, ") != std::string::npos, by_verdict[0].text);
    // A verdict of another kind outranks the memory-side placement of the declared work.
    r.scopes[2].verdict->verdict.kind = kscope::bottleneck::compute;
    CHECK(kscope::diagnose(r).empty());
    // Decided by declared work: the same at-the-roof bar as without a verdict.
    r.scopes[2].verdict->basis = "declared work";
    r.scopes[2].verdict->verdict.kind = kscope::bottleneck::memory;
    const std::vector<kscope::diagnosis> by_declared = kscope::diagnose(r);
    REQUIRE(kinds(by_declared) == std::vector<diagnosis_kind>{diagnosis_kind::decode_memory_bound});
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

namespace {

constexpr std::size_t d2h_index = static_cast<std::size_t>(kscope::copy_direction::d2h);

// A scope inside the step that copies 2 MiB device to host per step from malloc'ed memory
// (CUPTI: dstKind PAGEABLE), 650 us each: 3.23 GB/s.
kscope::scope_report pageable_copy_scope(const std::string& name) {
  kscope::scope_report copy = scope(9, 1, name, "step/" + name, 2, 100, 0.7e6, 0.8e6);
  copy.gpu_activity = kscope::node_gpu_activity{};
  const kscope::copy_totals copies{100, 100ull << 21, 65'000'000};
  copy.gpu_activity->memcpy[d2h_index] = copies;
  copy.gpu_activity->memcpy_pageable[d2h_index] = copies;
  return copy;
}

// The loop of the issue: a busy-enough GPU, the copy scope blocking the host every step
// (1 D2H copy per call in the rings) while the GPU idles 8 % of the wall time.
kscope::session_report pageable_loop(const std::string& name = "copy_out") {
  kscope::session_report r = serving_loop();
  r.scopes.push_back(pageable_copy_scope(name));
  r.gpu_time = timeline(0.6, {{"step/" + name, 40'000'000}, {"step/" + name, 40'000'000}, {"step/schedule", 5'000'000}});
  r.gpu_time->scopes = {gpu_entry(1, "step", 100, 6e6, 1e6, 50, 1), gpu_entry(3, "step/decode", 100, 5.3e6, 0.1e6, 50, 0),
                        gpu_entry(9, "step/" + name, 100, 0.65e6, 0, 0, 1)};
  return r;
}

const kscope::evidence* find_evidence(const kscope::diagnosis& d, const std::string& metric) {
  for (const kscope::evidence& e : d.evidence)
    if (e.metric == metric) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("diagnose: pageable copies — the loop gets exactly this finding, with rate, bytes per call and cost") {
  kscope::session_report r = pageable_loop();
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::pageable_copy});
  const kscope::diagnosis& d = found[0];
  CHECK_MESSAGE(d.text.find("'step/copy_out' copies 2.10 MB per call (1 copy of 2.10 MB), device-to-host, to or "
                            "from pageable host memory (100 copies, 210 MB in all), at 3.23 GB/s (650 us per call)") !=
                    std::string::npos,
                d.text);
  CHECK_MESSAGE(d.text.find("pinned memory (cudaHostAlloc / cudaHostRegister) lets the copy run asynchronously at the "
                            "link's rate") != std::string::npos,
                d.text);
  CHECK_MESSAGE(d.text.find("the GPU idled 80.0 ms (8.0% of 1.00 s) while the host was in it") != std::string::npos, d.text);
  CHECK(d.text.find("GB/s the copy would take") == std::string::npos);  // no link rate invented
  REQUIRE(find_evidence(d, "scope.pageable_bytes_per_s") != nullptr);
  CHECK(find_evidence(d, "scope.pageable_bytes_per_s")->value == doctest::Approx(2097152 / 650e-6));
  CHECK(find_evidence(d, "scope.pageable_bytes_per_call")->value == doctest::Approx(2097152));
  CHECK(find_evidence(d, "host_link.bytes_per_s") == nullptr);
  CHECK(d.suggestion.find("cudaHostRegister") != std::string::npos);
  // Cost: 65 ms of copies over 100 steps of 10 ms.
  CHECK(d.cost_ms_per_step == doctest::Approx(0.65));
  CHECK(d.cost_share == doctest::Approx(0.065));
  CHECK(d.cost_basis == "step time");
  CHECK(has_evidence(d, "cost.ms_per_step"));
  CHECK(has_evidence(d, "cost.share_of_step_time"));
  CHECK_MESSAGE(d.text.find("; cost: 650 us per step (6.5% of the step time)") != std::string::npos, d.text);

  SUBCASE("a host-link rate given: what pinned memory would take") {
    kscope::diagnose_options o;
    o.host_link_bytes_per_s = 50e9;
    const std::vector<kscope::diagnosis> linked = kscope::diagnose(r, o);
    REQUIRE(kinds(linked) == std::vector<diagnosis_kind>{diagnosis_kind::pageable_copy});
    CHECK_MESSAGE(linked[0].text.find("pinned host memory typically reaches the host link's rate: at 50.0 GB/s the copy "
                                      "would take about 41.9 us per call, asynchronously") != std::string::npos,
                  linked[0].text);
    CHECK(has_evidence(linked[0], "host_link.bytes_per_s"));
  }
  SUBCASE("in the token copy's own scope (a sync point): still a finding, and the only one") {
    kscope::session_report named = pageable_loop("d2h");
    CHECK(kinds(kscope::diagnose(named)) == std::vector<diagnosis_kind>{diagnosis_kind::pageable_copy});
    named.gpu_time->busy_share = 0.3;  // the GPU idles, mostly while the host is in 'step/d2h'
    named.gpu_time->scopes[0].busy_per_call_ns = per_call(3e6);
    CHECK(kinds(kscope::diagnose(named)) == std::vector<diagnosis_kind>{diagnosis_kind::pageable_copy});
  }
  SUBCASE("an idle GPU waiting in the copy scope: the pageable finding, not a host sync or launch-bound one") {
    r.gpu_time->busy_share = 0.3;
    r.gpu_time->scopes[0].busy_per_call_ns = per_call(3e6);
    CHECK(kinds(kscope::diagnose(r)) == std::vector<diagnosis_kind>{diagnosis_kind::pageable_copy});
  }
  SUBCASE("the same copies into pinned memory: the host sync they still are, and no pageable finding") {
    r.scopes.back().gpu_activity->memcpy_pageable = {};
    CHECK(kinds(kscope::diagnose(r)) == std::vector<diagnosis_kind>{diagnosis_kind::host_sync});
  }
  SUBCASE("pageable copies outside the step (loading the model) are not the loop's") {
    kscope::scope_report load = pageable_copy_scope("load_model");
    load.id = 12;
    load.parent = 0;
    load.depth = 1;
    load.path = "load_model";
    load.calls = 1;
    r.scopes.back().gpu_activity->memcpy_pageable = {};
    r.scopes.push_back(load);
    CHECK(kinds(kscope::diagnose(r)) == std::vector<diagnosis_kind>{diagnosis_kind::host_sync});
  }
}

TEST_CASE("diagnose: synchronous cudaMemcpy / cudaMemset inside the step") {
  kscope::session_report r = serving_loop();
  r.gpu_time = timeline(0.9, {{"step/schedule", 100'000}});
  kscope::scope_report upload = scope(13, 2, "upload", "step/schedule/upload", 3, 100, 0.1e6, 0.12e6);
  upload.gpu_activity = kscope::node_gpu_activity{};
  upload.gpu_activity->memcpy[0] = kscope::copy_totals{100, 409'600, 2'000'000};
  upload.gpu_activity->memcpy_sync = kscope::copy_totals{100, 409'600, 2'000'000};
  upload.gpu_activity->memset = kscope::copy_totals{200, 25'600, 1'000'000};
  upload.gpu_activity->memset_sync = kscope::copy_totals{200, 25'600, 1'000'000};
  r.scopes.insert(r.scopes.begin() + 2, upload);
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::sync_copy});
  const kscope::diagnosis& d = found[0];
  CHECK_MESSAGE(d.text.find("'step/schedule/upload' issues 1 synchronous cudaMemcpy per step (4.10 kB each) and 2 "
                            "synchronous cudaMemset per step, 30.0 us per step of GPU time") != std::string::npos,
                d.text);
  CHECK(has_evidence(d, "scope.sync_memcpy_per_step"));
  CHECK(d.cost_ms_per_step == doctest::Approx(0.03));
  CHECK(d.cost_share == doctest::Approx(3e6 / 1e9));
  CHECK(d.suggestion.find("cudaMemcpyAsync") != std::string::npos);

  SUBCASE("fewer than one per step: no finding") {
    r.scopes[2].gpu_activity->memcpy_sync.count = 30;
    r.scopes[2].gpu_activity->memset_sync.count = 30;
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("in a sync point: no finding") {
    r.scopes[2].name = "sampling";
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("traced in windows: no count per step out of the windows' copies") {
    r.trace_windows.windowed = true;
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("a scope the host-sync rule already names is not named twice") {
    r.scopes[2].gpu_activity->host_sync = kscope::host_sync_totals{900, 300'000'000, 0, 0, 900};
    r.gpu_time = timeline(0.75, {{"step/schedule/upload", 120'000'000}});
    CHECK(kinds(kscope::diagnose(r)) == std::vector<diagnosis_kind>{diagnosis_kind::host_sync});
  }
}

// The same inline-prefill stall with a tail of 3x and of 10x the median: the cost says
// which is worse, and the findings come largest cost first.
TEST_CASE("diagnose: severity — a 3x tail reads milder than a 10x one, findings ordered by cost") {
  const auto report = [](double tail) {
    kscope::session_report r = serving_loop();
    r.scopes[0].host_ns = times(5e6, tail * 5e6);
    kscope::scope_report prefill = scope(6, 1, "prefill", "step/prefill", 2, 10, 30e6, 31e6);
    prefill.gpu_activity = kernels(40, 10 * 30e6);
    r.scopes.insert(r.scopes.begin() + 2, prefill);
    r.gpu_time = timeline(0.95, {{"step/schedule", 100'000}});
    return r;
  };
  const std::vector<kscope::diagnosis> mild = kscope::diagnose(report(3));
  const std::vector<kscope::diagnosis> bad = kscope::diagnose(report(10));
  REQUIRE(kinds(mild) == std::vector<diagnosis_kind>{diagnosis_kind::prefill_stall});
  REQUIRE(kinds(bad) == std::vector<diagnosis_kind>{diagnosis_kind::prefill_stall});
  CHECK(mild[0].cost_basis == "step p99");
  CHECK(mild[0].cost_ms_per_step == doctest::Approx(10));
  CHECK(mild[0].cost_share == doctest::Approx(2.0 / 3));
  CHECK(bad[0].cost_ms_per_step == doctest::Approx(45));
  CHECK(bad[0].cost_share == doctest::Approx(0.9));
  CHECK_MESSAGE(mild[0].text.find("; cost: 10.0 ms in a p99 step (66.7% of it)") != std::string::npos, mild[0].text);
  CHECK_MESSAGE(bad[0].text.find("; cost: 45.0 ms in a p99 step (90.0% of it)") != std::string::npos, bad[0].text);
  CHECK(has_evidence(mild[0], "cost.share_of_step_p99"));
  CHECK(find_evidence(mild[0], "step.p99_over_p50")->value == doctest::Approx(3));

  // Beside them, communication costing 76 % of the wall time: after the 10x tail, before the 3x one.
  const auto with_comm = [&](double tail) {
    kscope::session_report r = report(tail);
    kscope::scope_report ar = scope(7, 1, "allreduce", "step/allreduce", 2, 100, 3e6, 3.2e6);
    ar.gpu_activity = kernels(100, 3920e6);
    ar.gpu_activity->comm_kernel_count = 100;
    ar.gpu_activity->comm_ns = 3'920'000'000;
    ar.gpu_activity->comm_busy_ns = 3'920'000'000;
    r.scopes.push_back(ar);
    return kscope::diagnose(r);
  };
  const std::vector<kscope::diagnosis> mild_comm = with_comm(3), bad_comm = with_comm(10);
  CHECK(kinds(mild_comm) == std::vector<diagnosis_kind>{diagnosis_kind::communication, diagnosis_kind::prefill_stall});
  CHECK(kinds(bad_comm) == std::vector<diagnosis_kind>{diagnosis_kind::prefill_stall, diagnosis_kind::communication});
  REQUIRE(mild_comm.size() == 2);
  CHECK(mild_comm[0].cost_share == doctest::Approx(3920.0 / 5020 * 0.95));
  CHECK(mild_comm[0].cost_basis == "wall time");
  CHECK(mild_comm[0].cost_ms_per_step == doctest::Approx(39.2));  // 3.92 s of NCCL over 100 steps, none overlapped

  const auto doc = nlohmann::json::parse(kscope::diagnosis_json(mild_comm));
  CHECK(doc["findings"][0]["kind"] == "communication");
  CHECK(doc["findings"][0]["cost_share"].get<double>() == doctest::Approx(mild_comm[0].cost_share));
  CHECK(doc["findings"][1]["cost_ms_per_step"].get<double>() == doctest::Approx(10));
  CHECK(doc["findings"][1]["cost_basis"] == "step p99");
}

TEST_CASE("diagnose: the new copy fields survive JSON, and a report read back gives the same findings") {
  kscope::session_report r = pageable_loop();
  kscope::node_gpu_activity& a = *r.scopes.back().gpu_activity;
  a.memcpy_pageable[0] = kscope::copy_totals{3, 300, 30};
  a.memcpy_sync = kscope::copy_totals{4, 400, 40};
  a.memset_sync = kscope::copy_totals{5, 500, 50};
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(r.json(), &error);
  REQUIRE_MESSAGE(back, error);
  const kscope::scope_report* copy = back->find("step/copy_out");
  REQUIRE(copy != nullptr);
  REQUIRE(copy->gpu_activity);
  const kscope::node_gpu_activity& b = *copy->gpu_activity;
  CHECK(b.memcpy_pageable[d2h_index].count == 100);
  CHECK(b.memcpy_pageable[d2h_index].bytes == (100ull << 21));
  CHECK(b.memcpy_pageable[d2h_index].ns == 65'000'000);
  CHECK(b.memcpy_pageable[0].bytes == 300);
  CHECK(b.memcpy_sync.count == 4);
  CHECK(b.memcpy_sync.ns == 40);
  CHECK(b.memset_sync.bytes == 500);
  const auto doc = nlohmann::json::parse(r.json());
  const auto& written = doc["scopes"][4]["gpu_activity"];
  CHECK(written["memcpy_pageable"]["d2h"]["count"] == 100);
  CHECK(written["memset_sync"]["ns"] == 50);

  const std::vector<kscope::diagnosis> found = kscope::diagnose(r), again = kscope::diagnose(*back);
  CHECK(kinds(again) == kinds(found));
  REQUIRE(again.size() == found.size());
  for (std::size_t i = 0; i < found.size(); ++i) CHECK(again[i].text == found[i].text);

  SUBCASE("a report from before these fields: none known, none claimed") {
    nlohmann::json old = doc;
    for (auto& s : old["scopes"])
      if (s["gpu_activity"].is_object()) {
        s["gpu_activity"].erase("memcpy_pageable");
        s["gpu_activity"].erase("memcpy_sync");
        s["gpu_activity"].erase("memset_sync");
      }
    const std::optional<kscope::session_report> older = kscope::parse_report(old.dump(), &error);
    REQUIRE_MESSAGE(older, error);
    CHECK(older->find("step/copy_out")->gpu_activity->pageable_copies().count == 0);
    CHECK(kinds(kscope::diagnose(*older)) == std::vector<diagnosis_kind>{diagnosis_kind::host_sync});
  }
}

TEST_CASE("diagnose: bad copy input gives a defined result") {
  SUBCASE("zero copies: no finding") {
    kscope::session_report r = pageable_loop();
    r.scopes.back().gpu_activity->memcpy_pageable = {};
    r.scopes.back().gpu_activity->memcpy_pageable[d2h_index].bytes = 1 << 20;  // bytes without a copy: nothing
    r.gpu_time = timeline(0.9, {{"step/schedule", 100'000}});
    CHECK(kscope::diagnose(r).empty());
  }
  SUBCASE("copies timed at 0 ns: the finding, no rate, no cost") {
    kscope::session_report r = pageable_loop();
    r.scopes.back().gpu_activity->memcpy_pageable[d2h_index].ns = 0;
    const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
    REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::pageable_copy});
    CHECK_MESSAGE(found[0].text.find("at a rate CUPTI could not time") != std::string::npos, found[0].text);
    CHECK(find_evidence(found[0], "scope.pageable_bytes_per_s") == nullptr);
    CHECK(found[0].cost_ms_per_step == 0);
    CHECK(found[0].cost_share == 0);
  }
  SUBCASE("negative times read from a damaged file: clamped, never a negative cost") {
    kscope::session_report r = pageable_loop();
    r.scopes.back().gpu_activity->memcpy_pageable[d2h_index].ns = -5;
    const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
    REQUIRE(found.size() == 1);
    CHECK(found[0].cost_ms_per_step == 0);
  }
  SUBCASE("NaN step times: the finding stands, its cost is unknown (null in JSON)") {
    kscope::session_report r = pageable_loop();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    r.scopes[0].host_ns = times(nan, nan);
    r.scopes[0].host_inclusive_ns = nan;
    r.gpu_time->wall_ns = nan;
    r.gpu_time->busy_share = nan;
    const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
    REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::pageable_copy});
    CHECK(found[0].cost_ms_per_step == doctest::Approx(0.65));  // copies over step calls: still known
    CHECK(std::isnan(found[0].cost_share));
    CHECK(found[0].cost_basis.empty());
    CHECK(found[0].text.find("the GPU idled") == std::string::npos);
    const auto doc = nlohmann::json::parse(kscope::diagnosis_json(found));
    CHECK(doc["findings"][0]["cost_share"].is_null());
    CHECK(doc["findings"][0]["cost_basis"] == "");
  }
  SUBCASE("no step scope: repeated copies only, costs unknown, order defined") {
    kscope::session_report r = pageable_loop();
    r.scopes[0].name = r.scopes[0].path = "iteration";
    std::vector<kscope::diagnosis> found = kscope::diagnose(r);
    REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::pageable_copy});
    CHECK(std::isnan(found[0].cost_ms_per_step));
    CHECK(std::isnan(found[0].cost_share));
    r.scopes.back().gpu_activity->memcpy_pageable[d2h_index].count = 3;  // three copies: no loop
    found = kscope::diagnose(r);
    CHECK(std::none_of(found.begin(), found.end(),
                       [](const kscope::diagnosis& d) { return d.kind == diagnosis_kind::pageable_copy; }));
  }
}

// A PyTorch generation loop (examples/python/generate.py on an H100): the GPU idled most in
// the prefill before the loop (a library's first call: 432 ms), which copies a word to the
// host per call. The step's own waiting is decode's: gaps between its own 84 kernels. The
// finding is about the step, so it names the scope inside it and never the prefill.
TEST_CASE("diagnose: idle time outside the step never names the step's cause") {
  kscope::session_report r;
  r.scopes = {scope(1, 0, "prefill", "prefill", 1, 4, 2.9e6, 450e6),
              scope(2, 0, "step", "step", 1, 128, 3.5e6, 3.9e6),
              scope(3, 2, "decode", "step/decode", 2, 128, 2.9e6, 3.2e6),
              scope(4, 2, "sample", "step/sample", 2, 128, 0.37e6, 0.4e6),
              scope(5, 2, "d2h", "step/d2h", 2, 128, 34e3, 40e3)};
  r.scopes[0].gpu_activity = kernels(336, 2e6);
  r.scopes[0].gpu_activity->memcpy[static_cast<std::size_t>(kscope::copy_direction::d2h)] =
      kscope::copy_totals{4, 16, 8'000};
  r.scopes[2].gpu_activity = kernels(10752, 70e6);
  r.scopes[3].gpu_activity = kernels(1792, 4e6);
  r.scopes[4].gpu_activity = kscope::node_gpu_activity{};
  r.scopes[4].gpu_activity->memcpy[static_cast<std::size_t>(kscope::copy_direction::d2h)] =
      kscope::copy_totals{128, 1024, 190'000};
  r.gpu_time = timeline(0.066, {{"prefill", 163'000'000},
                                {"prefill", 40'000'000},
                                {"step/sample", 40'000'000},
                                {"step/decode", 30'000'000},
                                {"step/decode", 30'000'000},
                                {"step/decode", 30'000'000},
                                {"prefill", 229'000'000}});
  r.gpu_time->scopes = {gpu_entry(1, "prefill", 4, 0.5e6, 2.4e6, 84, 1),
                        gpu_entry(2, "step", 128, 0.585e6, 2.8e6, 99, 1),
                        gpu_entry(3, "step/decode", 128, 0.551e6, 2.28e6, 84, 0),
                        gpu_entry(4, "step/sample", 128, 0.031e6, 0.31e6, 14, 0),
                        gpu_entry(5, "step/d2h", 128, 0.0015e6, 0, 0, 1)};
  const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
  REQUIRE(kinds(found) == std::vector<diagnosis_kind>{diagnosis_kind::cpu_launch_bound});
  const kscope::diagnosis& d = found[0];
  CHECK_MESSAGE(d.text.find("while the host was in 'step/decode'") != std::string::npos, d.text);
  CHECK_MESSAGE(d.text.find("waits between its own 84 kernels per call") != std::string::npos, d.text);
  CHECK_MESSAGE(d.text.find("prefill") == std::string::npos, d.text);  // nor among the longest gaps
  // Cost: the idle time inside the step only (130 ms of the 1 s window), not the prefill's 432 ms.
  CHECK(d.cost_share == doctest::Approx(130e6 / 1e9));

  SUBCASE("decode synchronizes once per call but barely waits: launch-bound, not a host sync") {
    // torch's encoder checks its mask on the host: one stream synchronize and one small D2H
    // copy per decode call, 7 us of waiting, while the GPU idles between decode's launches.
    r.scopes[2].gpu_activity->host_sync = kscope::host_sync_totals{128, 128 * 7'000, 128, 0, 0};
    r.scopes[2].gpu_activity->memcpy[static_cast<std::size_t>(kscope::copy_direction::d2h)] =
        kscope::copy_totals{128, 512, 128 * 1'500};
    r.gpu_time->scopes[2].d2h_per_call = 1;
    const std::vector<kscope::diagnosis> launch = kscope::diagnose(r);
    CHECK_MESSAGE(kinds(launch) == std::vector<diagnosis_kind>{diagnosis_kind::cpu_launch_bound},
                  kscope::diagnosis_text(launch, r));

    // The same synchronizes, each waiting 1.4 ms for queued work: the GPU idles because the
    // host blocked, whatever the gaps look like.
    r.scopes[2].gpu_activity->host_sync.ns = 128 * 1'400'000;
    bool sync_found = false;
    for (const kscope::diagnosis& f : kscope::diagnose(r))
      if (f.kind == diagnosis_kind::host_sync) {
        sync_found = true;
        CHECK_MESSAGE(f.text.find("'step/decode'") != std::string::npos, f.text);
      }
    CHECK(sync_found);
  }

  SUBCASE("all of the idle time outside the step: no finding from it") {
    r.gpu_time = timeline(0.066, {{"prefill", 400'000'000}, {"", 100'000'000}});
    r.gpu_time->scopes = {gpu_entry(2, "step", 128, 0.585e6, 2.8e6, 99, 1)};
    for (const kscope::diagnosis& f : kscope::diagnose(r)) {
      CHECK(f.kind != diagnosis_kind::cpu_launch_bound);
      CHECK_MESSAGE(f.text.find("while the host was in 'prefill'") == std::string::npos, f.text);
    }
  }
}

TEST_CASE("diagnose options: every member by name from one declaration, written as JSON") {
  const std::vector<kscope::diagnose_option_field>& fields = kscope::diagnose_option_fields();
  REQUIRE(fields.size() == 18);
  CHECK(std::string(fields.front().name) == "step_names");
  CHECK(std::string(fields.back().name) == "host_link_bytes_per_s");
  kscope::diagnose_options o;
  for (const kscope::diagnose_option_field& f : fields) {
    CAPTURE(f.name);
    switch (f.type) {  // each field points at its own member
      case kscope::diagnose_option_field::kind::names: f.names(o)->push_back(std::string("x_") + f.name); break;
      case kscope::diagnose_option_field::kind::number: *f.number(o) = 0.25; break;
      case kscope::diagnose_option_field::kind::count: *f.count(o) = 7; break;
    }
  }
  CHECK(o.kv_names.back() == "x_kv_names");
  CHECK(o.comm_share == 0.25);
  CHECK(o.min_step_calls == 7);
  const std::string json = kscope::diagnose_options_json(o);
  CHECK(json.find("\"weight_names\":[\"weights\",\"x_weight_names\"]") != std::string::npos);
  CHECK(json.find("\"min_step_calls\":7") != std::string::npos);
  CHECK(kscope::diagnose_options_json().find("\"host_link_bytes_per_s\":null") != std::string::npos);
}

}  // namespace diagnose_test
