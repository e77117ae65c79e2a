// The session's checks of a scope's time against its kernels, impossible placements and
// evidence-based advice (session/detail/advice.hpp, session/detail/context.hpp), on
// synthetic scopes: every rule on both sides of its threshold, and once through the
// session with an injected GPU activity source.
#include <kscope/scope/scope.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/session/session.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace advice_test {  // one per file: the unit tests build as one program

namespace {

kscope::device_info h200_like() {
  kscope::device_info d;
  d.present = true;
  d.name = "test H200";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.sm_clock_khz = 1980000;
  d.memory_clock_khz = 3201000;
  d.memory_bus_width_bits = 6016;
  return d;
}

const kscope::device_peaks& peaks() {
  static const kscope::device_peaks p = kscope::theoretical_peaks(h200_like());
  return p;
}

double fp32_peak() {
  return peaks().find(kscope::data_type::fp32, kscope::core_kind::plain)->theoretical_flops_per_s;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A stream scope timed by events: `calls` calls of `event_ns` each, declaring per call
// `flops` and flops / 1000 bytes (intensity 1000 FLOP/B: the compute side of every roof).
kscope::scope_report event_scope(const std::string& name, std::uint64_t calls, double event_ns, double flops) {
  kscope::scope_report s;
  s.id = 7;
  s.parent = 0;  // the root: a top-level scope
  s.name = s.path = name;
  s.depth = 1;
  s.calls = s.gpu_calls = s.work_calls = calls;
  s.host_ns.median = event_ns;
  s.host_inclusive_ns = event_ns * static_cast<double>(calls);
  s.gpu_ns.median = event_ns;
  s.gpu_ns.median_ci = {event_ns * 0.99, event_ns * 1.01, 0.95};
  s.gpu_total_ns = event_ns * static_cast<double>(calls);
  s.declared = {flops * static_cast<double>(calls), flops / 1000 * static_cast<double>(calls)};
  return s;
}

// CUPTI activity of `kernels` kernels of `kernel_ns` each, back to back (busy = sum).
kscope::node_gpu_activity kernels(std::uint64_t count, double kernel_ns) {
  kscope::node_gpu_activity a;
  a.kernel_count = count;
  a.kernel_ns = static_cast<std::int64_t>(kernel_ns * static_cast<double>(count));
  a.busy_ns = a.kernel_ns;
  a.devices.push_back(kscope::device_gpu_activity{0, count, a.kernel_ns, a.busy_ns, 0, 0});
  return a;
}

kscope::gpu_activity_event kernel_event(kscope::node_id node, std::uint32_t device, std::uint32_t stream) {
  kscope::gpu_activity_event e;
  e.kind = kscope::activity_kind::kernel;
  e.node = node;
  e.device = device;
  e.stream = stream;
  e.name = "spin";
  return e;
}

// The report of one scope after the session's pass, as report() runs it.
kscope::session_report advised(const kscope::scope_report& s, const std::vector<kscope::gpu_activity_event>& recent,
                               bool timeline) {
  kscope::session_report r;
  r.scopes = {s};
  kscope::detail::place_scope(r.scopes[0], peaks());
  kscope::gpu_activity_report activity;
  activity.recent = recent;
  kscope::detail::reconcile_and_advise(r, activity, &peaks(), timeline);
  kscope::decide_verdicts(r);
  return r;
}

}  // namespace

TEST_CASE("events that disagree with the scope's kernels: a warning with both numbers, placement by kernel time") {
  // The user's case: events on s1 measured 5 us, the kernels on s2 ran 3.79 ms each.
  const double kernel_ns = 3.79e6;
  const double flops = 0.6 * fp32_peak() * kernel_ns * 1e-9;  // 60% of the fp32 roof at the kernels' time
  kscope::scope_report s = event_scope("decode", 40, 5000, flops);
  s.gpu_activity = kernels(40, kernel_ns);

  // Placed by its events alone it sits far above the roof, and says it cannot be true.
  kscope::scope_report by_events = s;
  kscope::detail::place_scope(by_events, peaks());
  REQUIRE(by_events.roofline);
  CHECK(by_events.roofline->fraction_of_roof == doctest::Approx(0.6 * kernel_ns / 5000));
  CHECK(by_events.roofline_impossible);
  CHECK(by_events.roofline_time_source == "events");

  const kscope::session_report r = advised(s, {kernel_event(7, 0, 14), kernel_event(7, 0, 14)}, true);
  const kscope::scope_report& out = r.scopes[0];
  REQUIRE(r.warnings.size() == 1);
  const std::string& w = r.warnings[0];
  CHECK(w == out.gpu_time_disagreement);
  CHECK_MESSAGE(contains(w, "'decode'"), w);
  CHECK_MESSAGE(contains(w, "5.00 us per call"), w);  // the events' number
  CHECK_MESSAGE(contains(w, "3.79 ms per call"), w);  // the kernels' number
  CHECK_MESSAGE(contains(w, "different stream than its kernels (kernels ran on stream 14 of GPU 0)"), w);
  CHECK_MESSAGE(contains(w, "placed on the roofline by its GPU work instead"), w);

  REQUIRE(out.roofline);
  CHECK(out.roofline_time_source == "kernels (CUPTI)");
  CHECK(out.roofline_time_ns == doctest::Approx(kernel_ns));
  CHECK(out.roofline->fraction_of_roof == doctest::Approx(0.6));
  CHECK_FALSE(out.roofline_impossible);
  CHECK(out.roofline->limiter == kscope::bound::compute);
  CHECK(std::isnan(out.flops_per_s_ci.lo));  // no interval of the kernels' time per call

  const std::string text = r.text();
  CHECK_MESSAGE(contains(text, "≠CUPTI"), text);  // the event median is not shown as GPU time
  // The roofline section says how it was timed; the advice is the scope's verdict's (declared work decided).
  CHECK_MESSAGE(contains(text, "\ndecode [timed by kernels (CUPTI)]\n"), text);
  REQUIRE(r.scopes[0].verdict);
  CHECK_MESSAGE(contains(text, "decode: compute-bound (fp32 plain), from declared work over "), text);
  CHECK_MESSAGE(contains(text, "  - compute-bound (declared work: "), text);
  CHECK_MESSAGE(contains(r.scopes[0].verdict->verdict.text, "at the compute roof: 60% of the fp32 plain roof"),
                r.scopes[0].verdict->verdict.text);
  CHECK_MESSAGE(!contains(text, "impossible"), text);
  const auto doc = nlohmann::json::parse(r.json());
  CHECK(doc["scopes"][0]["gpu_time_disagreement"] == w);
  CHECK(doc["scopes"][0]["roofline"]["time_source"] == "kernels (CUPTI)");
  CHECK(doc["scopes"][0]["roofline"]["time_ns"].get<double>() == doctest::Approx(kernel_ns));
  CHECK(doc["scopes"][0]["roofline"]["impossible"] == false);
  CHECK(doc["scopes"][0]["roofline"].find("limiter") == doc["scopes"][0]["roofline"].end());
  CHECK(doc["scopes"][0]["verdict"]["class"] == "compute-bound");
  CHECK(doc["scopes"][0]["verdict"]["source"] == "declared work");
}

TEST_CASE("the disagreement rule: kernel busy per call > 1.5 x event time per call + 5 us") {
  // 10 us events: the threshold is 20 us of kernel busy time per call.
  kscope::scope_report s = event_scope("step", 10, 10000, 1e6);
  SUBCASE("agreeing: kernels shorter than the events, no warning, placed by events") {
    s.gpu_activity = kernels(10, 9000);
    const kscope::session_report r = advised(s, {}, true);
    CHECK(r.warnings.empty());
    CHECK(r.scopes[0].gpu_time_disagreement.empty());
    CHECK(r.scopes[0].roofline_time_source == "events");
    CHECK(r.scopes[0].roofline_time_ns == doctest::Approx(10000));
    CHECK(!contains(r.text(), "≠CUPTI"));
  }
  SUBCASE("just under the threshold: still no warning") {
    s.gpu_activity = kernels(10, 19900);
    CHECK(advised(s, {}, true).warnings.empty());
  }
  SUBCASE("just over the threshold: a warning, even with the streams no longer in the ring") {
    s.gpu_activity = kernels(10, 20100);
    const kscope::session_report r = advised(s, {}, true);
    REQUIRE(r.warnings.size() == 1);
    CHECK_MESSAGE(contains(r.warnings[0], "their streams are no longer in CUPTI's recent-event ring"), r.warnings[0]);
    CHECK(r.scopes[0].roofline_time_source == "kernels (CUPTI)");
  }
  SUBCASE("the means are compared, not the median: a few slow calls do not make a disagreement") {
    s.gpu_ns.median = 1000;  // most calls short, the total dominated by a few long ones
    s.gpu_activity = kernels(10, 9000);
    CHECK(advised(s, {}, true).warnings.empty());
  }
}

TEST_CASE("a scope without a stream is held to its host time only when it is placed") {
  kscope::scope_report s = event_scope("launch_only", 4, 12000, 1e9);
  s.gpu_calls = 0;
  s.gpu_ns = kscope::summary{};
  s.gpu_total_ns = 0;
  s.gpu_activity = kernels(4, 2.76e8);
  const kscope::session_report r = advised(s, {kernel_event(7, 0, 7)}, true);
  REQUIRE(r.warnings.size() == 1);
  CHECK_MESSAGE(contains(r.warnings[0], "has no stream, and its host time, 12.0 us per call"), r.warnings[0]);
  CHECK_MESSAGE(contains(r.warnings[0], "276 ms per call"), r.warnings[0]);
  CHECK(r.scopes[0].roofline_time_source == "kernels (CUPTI)");
  // No declared work: its host time is only a host time, and nothing is placed on it.
  s.work_calls = 0;
  s.declared = {};
  CHECK(advised(s, {kernel_event(7, 0, 7)}, true).warnings.empty());
}

TEST_CASE("above 110% of the theoretical roof a placement is impossible and gets no advice") {
  const double event_ns = 1e6;
  SUBCASE("150%: flagged, cause named, no limiter or advice in text and JSON") {
    kscope::scope_report s = event_scope("fast", 10, event_ns, 1.5 * fp32_peak() * event_ns * 1e-9);
    s.tags = {{"dtype", "fp32", 10}};  // tagged: the fp32 roof is the one roof that counts
    const kscope::session_report r = advised(s, {}, false);
    const kscope::scope_report& out = r.scopes[0];
    REQUIRE(out.roofline);
    CHECK(out.roofline_impossible);
    CHECK(out.advice.empty());
    CHECK_MESSAGE(contains(out.roofline_impossible_reason, "another stream than its kernels"),
                  out.roofline_impossible_reason);
    CHECK(kscope::detail::placement_advice(out) ==
          "impossible: 150% of the theoretical roof — the time measured (1.00 ms per call, events) is shorter than "
          "the work can take (1.50 ms at the roof); " + out.roofline_impossible_reason);
    const std::string text = r.text();
    CHECK_MESSAGE(contains(text, "fast: impossible: 150% of the theoretical roof"), text);
    CHECK_MESSAGE(contains(text, "impossible fp32 plain"), text);  // the table row has no limiter
    CHECK_MESSAGE(!contains(text, "at the compute roof"), text);
    const auto doc = nlohmann::json::parse(r.json());
    const auto& roofline = doc["scopes"][0]["roofline"];
    CHECK(roofline["impossible"] == true);
    CHECK(roofline.find("limiter") == roofline.end());
    CHECK(roofline.find("hint") == roofline.end());
    // No verdict rests on it: the scope ran on the GPU and nothing decided.
    CHECK(doc["scopes"][0]["verdict"]["class"] == "undetermined");
    CHECK(contains(roofline["impossible_reason"].get<std::string>(), "impossible: 150%"));
    CHECK(!contains(r.html(), "at the compute roof"));
  }
  SUBCASE("105%: within what a placement's inexactness allows, advised as usual") {
    kscope::scope_report s = event_scope("near", 10, event_ns, 1.05 * fp32_peak() * event_ns * 1e-9);
    const kscope::session_report r = advised(s, {}, false);
    CHECK_FALSE(r.scopes[0].roofline_impossible);
    CHECK_MESSAGE(contains(r.scopes[0].advice, "at the compute roof: 105% of the fp32 plain roof"), r.scopes[0].advice);
  }
  SUBCASE("with CUPTI agreeing, the cause is the declared work") {
    kscope::scope_report s = event_scope("overdeclared", 10, event_ns, 3 * fp32_peak() * event_ns * 1e-9);
    s.tags = {{"dtype", "float", 10}};
    s.gpu_activity = kernels(10, 0.9 * event_ns);
    const kscope::session_report r = advised(s, {}, true);
    CHECK(r.warnings.empty());
    CHECK(r.scopes[0].roofline_impossible);
    CHECK_MESSAGE(contains(r.scopes[0].roofline_impossible_reason, "agrees with its events, so the declared work"),
                  r.scopes[0].roofline_impossible_reason);
  }
  SUBCASE("a report built by hand with an impossible placement is not printed as true either") {
    kscope::session_report r;
    kscope::scope_report s;
    s.name = s.path = "by_hand";
    s.depth = 1;
    s.roofline = kscope::place({2e12, 1e9}, 1e-3, 67e12, 4.8e12);  // 2 PFLOP/s: 30x the roof
    r.scopes = {s};
    CHECK_MESSAGE(contains(r.text(), "by_hand: impossible: 2985% of the theoretical roof"), r.text());
    const auto doc = nlohmann::json::parse(r.json());
    CHECK(doc["scopes"][0]["roofline"]["impossible"] == true);
    CHECK(doc["scopes"][0]["verdict"].is_null());  // decided by nobody: a report built by hand
  }
}

TEST_CASE("untagged work above the fp32 roof: roof unknown while a faster roof allows it, never impossible") {
  // A cuBLAS half-precision GEMM at 894 TFLOP/s in an untagged scope: 13x the fp32 plain
  // roof, under the H200's bf16 tensor roof.
  const double event_ns = 1e6;
  const double rate = 894e12;
  kscope::scope_report s = event_scope("hgemm", 10, event_ns, rate * event_ns * 1e-9);
  kscope::session_report r = advised(s, {}, false);
  const kscope::scope_report& out = r.scopes[0];
  REQUIRE(out.roofline);
  CHECK_FALSE(out.roofline_impossible);
  CHECK_FALSE(kscope::detail::placement_impossible(out));
  CHECK(kscope::detail::placement_roof_unknown(out));
  CHECK_FALSE(kscope::detail::placement_has_limiter(out));
  CHECK_MESSAGE(contains(out.roofline_roof_unknown, "above the fp32 plain roof"), out.roofline_roof_unknown);
  CHECK_MESSAGE(contains(out.roofline_roof_unknown, "tag the dtype"), out.roofline_roof_unknown);
  CHECK(out.advice.empty());
  const std::string text = r.text();
  CHECK_MESSAGE(!contains(text, "impossible"), text);
  CHECK_MESSAGE(contains(text, "roof?"), text);
  const auto doc = nlohmann::json::parse(r.json());
  CHECK(doc["scopes"][0]["roofline"]["impossible"] == false);
  CHECK(doc["scopes"][0]["roofline"].find("limiter") == doc["scopes"][0]["roofline"].end());
  CHECK(doc["scopes"][0]["verdict"]["class"] == "undetermined");
  CHECK(contains(doc["scopes"][0]["roofline"]["roof_unknown"].get<std::string>(), "tag the dtype"));
  CHECK(!contains(r.html(), "impossible"));

  SUBCASE("the tensor pipe busy in its counters: placed under the half-precision tensor roof, saying why") {
    r.scopes[0].counters = kscope::scope_counter_report{};
    r.scopes[0].counters->totals = {{"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 93.0}};
    kscope::detail::place_by_evidence(r, peaks());
    const kscope::scope_report& placed = r.scopes[0];
    REQUIRE(placed.roofline);
    CHECK(placed.roof == "bf16 tensor");
    CHECK(kscope::detail::placement_has_limiter(placed));
    CHECK(placed.roofline->fraction_of_roof < 1.1);
    CHECK(placed.roofline->fraction_of_roof > 0.5);
    CHECK_MESSAGE(contains(placed.roof_basis, "tensor pipe 93% busy (counters)"), placed.roof_basis);
    CHECK_MESSAGE(contains(r.text(), "[roof from the kernels: tensor pipe 93% busy (counters)"), r.text());
  }
  SUBCASE("a quiet tensor pipe is no evidence: the roof stays unknown") {
    r.scopes[0].counters = kscope::scope_counter_report{};
    r.scopes[0].counters->totals = {{"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 2.0}};
    kscope::detail::place_by_evidence(r, peaks());
    CHECK(kscope::detail::placement_roof_unknown(r.scopes[0]));
  }
  SUBCASE("a tagged scope keeps its tag's roof, whatever the pipe") {
    r.scopes[0].tags = {{"dtype", "fp32", 10}};
    kscope::detail::place_scope(r.scopes[0], peaks());
    CHECK(r.scopes[0].roofline_impossible);
    r.scopes[0].counters = kscope::scope_counter_report{};
    r.scopes[0].counters->totals = {{"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 93.0}};
    kscope::detail::place_by_evidence(r, peaks());
    CHECK(r.scopes[0].roof == "fp32 plain");
    CHECK(r.scopes[0].roofline_impossible);
  }
  SUBCASE("above every roof of the device: impossible, tagged or not") {
    kscope::scope_report far = event_scope("far", 10, event_ns, 50 * rate * event_ns * 1e-9);
    const kscope::session_report fr = advised(far, {}, false);
    CHECK(fr.scopes[0].roofline_impossible);
    CHECK(fr.scopes[0].roofline_roof_unknown.empty());
  }
}

TEST_CASE("one long kernel far under both roofs is not told to look for CPU gaps") {
  // A naive fp32 GEMM: one 276 ms kernel per call, under 1% of the fp32 roof.
  const double n = 4096;
  const double kernel_ns = 2.76e8;
  kscope::scope_report s = event_scope("naive_gemm", 5, kernel_ns + 20000, 2 * n * n * n);
  SUBCASE("with CUPTI: the time is inside the kernel") {
    s.gpu_activity = kernels(5, kernel_ns);
    const kscope::session_report r = advised(s, {}, true);
    REQUIRE(r.scopes[0].roofline);
    CHECK(r.scopes[0].roofline->limiter == kscope::bound::latency);
    const std::string& a = r.scopes[0].advice;
    CHECK_MESSAGE(contains(a, "one long kernel far under both roofs"), a);
    CHECK_MESSAGE(contains(a, "1 kernel per call of 276 ms on average"), a);
    CHECK_MESSAGE(contains(a, "GPU busy 100% of the scope's span"), a);
    CHECK_MESSAGE(contains(a, "hardware counters"), a);
    CHECK_MESSAGE(!contains(a, "CPU gaps"), a);
    CHECK(contains(r.text(), "naive_gemm: latency-bound, from declared work over 5 calls"));
    CHECK(contains(r.text(), "  - latency-bound (declared work: "));
    REQUIRE(r.scopes[0].verdict);
    CHECK(contains(r.scopes[0].verdict->verdict.text, "one long kernel far under both roofs"));
  }
  SUBCASE("without CUPTI: no evidence either way, and it says so") {
    const kscope::session_report r = advised(s, {}, false);
    const std::string& a = r.scopes[0].advice;
    CHECK_MESSAGE(contains(a, "latency-bound: far under both roofs (0."), a);
    CHECK_MESSAGE(contains(a, "no kernel timeline to tell launch gaps from a slow kernel — enable CUPTI"), a);
    CHECK_MESSAGE(!contains(a, "CPU gaps"), a);
  }
  SUBCASE("CUPTI on but nothing attributed to the scope: no timeline, said so") {
    const kscope::session_report r = advised(s, {}, true);
    CHECK_MESSAGE(contains(r.scopes[0].advice, "CUPTI attributed no kernels to this scope or its children"),
                  r.scopes[0].advice);
    CHECK(!contains(r.scopes[0].advice, "CPU gaps"));
  }
}

TEST_CASE("many short kernels with the GPU mostly idle get the CPU-gaps advice with its numbers") {
  // 40 kernels of 3 us per call in a 316 us span: busy 120 us, idle 62%.
  kscope::scope_report s = event_scope("decode_step", 20, 316000, 1e7);
  s.gpu_activity = kernels(20 * 40, 3000);
  const kscope::session_report r = advised(s, {}, true);
  REQUIRE(r.scopes[0].roofline);
  CHECK(r.scopes[0].roofline->limiter == kscope::bound::latency);
  const std::string& a = r.scopes[0].advice;
  CHECK_MESSAGE(contains(a, "GPU idle 62% of the scope's span between its 40 kernels per call"), a);
  CHECK_MESSAGE(contains(a, "GPU work 120 us of 316 us per call"), a);
  CHECK_MESSAGE(contains(a, "check CPU gaps between launches"), a);
}

TEST_CASE("short kernels keeping the GPU busy are told to fuse, not to look for gaps") {
  kscope::scope_report s = event_scope("tiny_kernels", 20, 130000, 1e7);
  s.gpu_activity = kernels(20 * 40, 3000);  // 120 us of 130 us busy
  const std::string a = advised(s, {}, true).scopes[0].advice;
  CHECK_MESSAGE(contains(a, "GPU busy 92% of the scope's span"), a);
  CHECK_MESSAGE(contains(a, "40 kernels per call of 3.00 us on average"), a);
  CHECK_MESSAGE(contains(a, "kernels too short to fill the GPU"), a);
  CHECK(!contains(a, "CPU gaps"));
}

TEST_CASE("a parent's idle share counts its children's GPU work") {
  // The parent launches nothing itself; its child keeps the GPU busy 900 us of 1 ms.
  kscope::session_report r;
  kscope::scope_report parent = event_scope("layer", 10, 1e6, 1e8);
  kscope::scope_report child;
  child.id = 8;
  child.parent = 7;
  child.name = "matmul";
  child.path = "layer/matmul";
  child.depth = 2;
  child.calls = 10;
  child.gpu_activity = kernels(10, 9e5);
  kscope::scope_report ranged = child;  // a cross-thread range under it: not its work
  ranged.id = 9;
  ranged.name = "prefetch";
  ranged.path = "layer/prefetch";
  ranged.cross_thread = true;
  r.scopes = {parent, child, ranged};
  CHECK(kscope::detail::subtree_work(r.scopes, 0).busy_ns == doctest::Approx(9e6));
  kscope::detail::place_scope(r.scopes[0], peaks());
  kscope::detail::reconcile_and_advise(r, kscope::gpu_activity_report{}, &peaks(), true);
  const std::string& a = r.scopes[0].advice;
  CHECK_MESSAGE(contains(a, "GPU busy 90% of the scope's span"), a);
  CHECK(!contains(a, "CPU gaps"));
}

TEST_CASE("memory- and compute-bound advice names the numbers it rests on") {
  kscope::scope_report copy = event_scope("copy", 10, 0.25e6, 0);
  copy.declared = {0, 10 * 1e9};  // 1 GB per call in 0.25 ms: 4 TB/s
  const std::string a = advised(copy, {}, true).scopes[0].advice;
  CHECK_MESSAGE(contains(a, "memory-bound: 83% of the DRAM roof (4.00 TB/s at 0 FLOP/B)"), a);
  kscope::scope_report unused = event_scope("fp32_gemm", 10, 1e6, 0.2 * fp32_peak() * 1e-3);
  const std::string b = advised(unused, {}, true).scopes[0].advice;
  CHECK_MESSAGE(contains(b, "compute path not used: 1000 FLOP/B is above the ridge, yet 20% of the fp32 plain roof"), b);
}

TEST_CASE("the kernels' streams are listed per device") {
  std::set<std::pair<std::uint32_t, std::uint32_t>> streams{{0, 13}, {0, 14}, {1, 7}};
  CHECK(kscope::detail::kernel_streams_text(streams) == "streams 13, 14 of GPU 0 and stream 7 of GPU 1");
  CHECK(kscope::detail::kernel_streams_text({}).empty());
  std::set<std::pair<std::uint32_t, std::uint32_t>> many;
  for (std::uint32_t k = 0; k < 11; ++k) many.insert({0, k});
  CHECK(kscope::detail::kernel_streams_text(many) == "streams 0, 1, 2, 3, 4, 5, 6, 7 and 3 more");
}

namespace {

// A GPU activity source that returns what the test put in it.
struct fake_gpu_source final : kscope::gpu_activity_source {
  kscope::cupti_snapshot data;
  bool start(const kscope::cupti_options&) override {
    data.status.state = kscope::cupti_state::running;
    return true;
  }
  void flush() override {}
  kscope::cupti_snapshot snapshot(std::size_t) override { return data; }
  void reset() override { data.activity = kscope::gpu_activity_report{}; }
  kscope::cupti_status status() const override { return data.status; }
};

}  // namespace

TEST_CASE("the session reconciles and advises from an injected GPU activity source") {
  auto& session = kscope::session::global();
  auto fake = std::make_shared<fake_gpu_source>();
  session.set_gpu_activity_source(fake);
  session.set_peaks(peaks());
  session.reset();

  // A host scope (no stream) that declares a GEMM's work and returns as soon as its kernel
  // is launched: its host time is far shorter than the kernel.
  kscope::node_id gemm = 0;
  const double flops = 2.0 * 4096 * 4096 * 4096;
  for (int i = 0; i < 3; ++i) {
    kscope::scope s{"adv_gemm"};
    s.set_work({flops, 3.0 * 4096 * 4096 * 4});
    gemm = s.node();
  }
  SUBCASE("CUPTI not started: placed by its host time, and the advice says there is no timeline") {
    const kscope::session_report r = session.report();
    const kscope::scope_report* s = r.find("adv_gemm");
    REQUIRE(s);
    REQUIRE(s->roofline);
    CHECK(s->roofline_time_source == "host");
    // A host time of microseconds for 137 GFLOP is far above the roof: impossible, with
    // the no-stream cause, and no advice.
    CHECK(s->roofline_impossible);
    CHECK_MESSAGE(contains(s->roofline_impossible_reason, "the scope has no stream"), s->roofline_impossible_reason);
    CHECK(s->advice.empty());
  }
  SUBCASE("CUPTI on: placed by its kernel's 276 ms, with the warning and the long-kernel advice") {
    REQUIRE(session.enable_cupti());
    fake->data.activity.nodes = {{gemm, kernels(3, 2.76e8)}};
    fake->data.activity.recent = {kernel_event(gemm, 0, 7)};
    const kscope::session_report r = session.report();
    const kscope::scope_report* s = r.find("adv_gemm");
    REQUIRE(s);
    REQUIRE(s->roofline);
    CHECK(s->roofline_time_source == "kernels (CUPTI)");
    CHECK(s->roofline_time_ns == doctest::Approx(2.76e8));
    CHECK_FALSE(s->roofline_impossible);
    CHECK_MESSAGE(contains(s->advice, "one long kernel far under both roofs"), s->advice);
    bool warned = false;
    for (const std::string& w : r.warnings)
      warned = warned || (contains(w, "'adv_gemm'") && contains(w, "276 ms per call") && contains(w, "stream 7 of GPU 0"));
    CHECK_MESSAGE(warned, r.text());
  }
  session.set_gpu_activity_source(nullptr);
  session.reset();
}

TEST_CASE("declared bytes above the DRAM roof that the counters measured as less DRAM traffic: reused through cache") {
  // A 5-point stencil: 6.44 GB declared per call (what it reads logically), 2.15 GB of DRAM
  // traffic measured, in 1 ms per call: 6.44 TB/s declared is above the 4.8 TB/s roof,
  // 2.15 TB/s is under it. Nothing impossible happened: neighbours came from cache.
  const double event_ns = 1e6, declared_bytes = 6.44e9, dram_bytes = 2.15e9;
  kscope::scope_report s = event_scope("stencil", 10, event_ns, 0);
  s.declared = {2e9 * 10, declared_bytes * 10};  // 2 GFLOP per call: memory side of the roof
  kscope::session_report r = advised(s, {}, false);
  REQUIRE(kscope::detail::placement_impossible(r.scopes[0]));
  SUBCASE("the counters' DRAM bytes explain it") {
    r.scopes[0].counters = kscope::scope_counter_report{};
    r.scopes[0].counters->profiled_calls = 4;
    kscope::work_check w;
    w.declared_bytes = declared_bytes;
    w.measured_dram_bytes = dram_bytes;
    r.scopes[0].counters->declared_vs_measured = w;
    kscope::detail::explain_cache_reuse(r, peaks());
    const kscope::scope_report& out = r.scopes[0];
    CHECK_FALSE(kscope::detail::placement_impossible(out));
    CHECK_MESSAGE(contains(out.roofline_roof_unknown, "declared bytes exceed DRAM traffic: reused through cache"),
                  out.roofline_roof_unknown);
    CHECK_MESSAGE(contains(out.roofline_roof_unknown, "declared 6.44 GB per call"), out.roofline_roof_unknown);
    CHECK_MESSAGE(contains(out.roofline_roof_unknown, "DRAM moved 2.15 GB per call by the hardware counters over 4 calls"),
                  out.roofline_roof_unknown);
    const std::string text = r.text();
    CHECK_MESSAGE(!contains(text, "impossible"), text);
    CHECK_MESSAGE(contains(text, "reused through cache"), text);
  }
  SUBCASE("DRAM traffic as large as declared: still impossible") {
    r.scopes[0].counters = kscope::scope_counter_report{};
    kscope::work_check w;
    w.declared_bytes = declared_bytes;
    w.measured_dram_bytes = declared_bytes * 1.01;
    r.scopes[0].counters->declared_vs_measured = w;
    kscope::detail::explain_cache_reuse(r, peaks());
    CHECK(kscope::detail::placement_impossible(r.scopes[0]));
  }
  SUBCASE("even the measured traffic above the roof: still impossible") {
    r.scopes[0].counters = kscope::scope_counter_report{};
    kscope::work_check w;
    w.declared_bytes = declared_bytes;
    w.measured_dram_bytes = declared_bytes * 0.95;  // 6.1 TB/s: above the roof too
    r.scopes[0].counters->declared_vs_measured = w;
    kscope::detail::explain_cache_reuse(r, peaks());
    CHECK(kscope::detail::placement_impossible(r.scopes[0]));
  }
}

TEST_CASE("reuse through cache on an untagged scope whose rate only a faster roof allows: roof unknown, not impossible") {
  // 100 GFLOP and 6.44 GB declared per call in 1 ms: above the fp32 plain roof (untagged) at
  // any traffic, and above DRAM's at the declared bytes. At the 2.15 GB of DRAM traffic the
  // counters measured, a tensor roof of the device allows it: nothing says impossible.
  const double event_ns = 1e6;
  kscope::scope_report s = event_scope("fused", 10, event_ns, 0);
  s.declared = {100e9 * 10, 6.44e9 * 10};
  kscope::session_report r = advised(s, {}, false);
  REQUIRE(kscope::detail::placement_impossible(r.scopes[0]));
  r.scopes[0].counters = kscope::scope_counter_report{};
  r.scopes[0].counters->profiled_calls = 4;
  kscope::work_check w;
  w.declared_bytes = 6.44e9;
  w.measured_dram_bytes = 2.15e9;
  r.scopes[0].counters->declared_vs_measured = w;
  kscope::detail::explain_cache_reuse(r, peaks());
  const kscope::scope_report& out = r.scopes[0];
  CHECK_FALSE(kscope::detail::placement_impossible(out));
  CHECK_MESSAGE(contains(out.roofline_roof_unknown, "reused through cache"), out.roofline_roof_unknown);
  CHECK_MESSAGE(contains(out.roofline_roof_unknown, "which only a faster roof of this device allows"), out.roofline_roof_unknown);
  CHECK_MESSAGE(contains(out.roofline_roof_unknown, "tag the dtype"), out.roofline_roof_unknown);
  CHECK_MESSAGE(!contains(r.text(), "impossible"), r.text());
  // Tagged fp32: its roof is known, and the rate is above it: still impossible.
  kscope::session_report tagged = advised(s, {}, false);
  tagged.scopes[0].tags.push_back(kscope::tag_count{"dtype", "fp32", 10});
  tagged.scopes[0].counters = r.scopes[0].counters;
  kscope::detail::explain_cache_reuse(tagged, peaks());
  CHECK(kscope::detail::placement_impossible(tagged.scopes[0]));
}

TEST_CASE("a report read back prints the roofline section it was written with") {
  const double event_ns = 1e6;
  kscope::scope_report placed = event_scope("gemm", 10, event_ns, 20e12 * event_ns * 1e-9);  // 20 TFLOP/s
  kscope::scope_report unknown = event_scope("hgemm", 10, event_ns, 894e12 * event_ns * 1e-9);
  kscope::scope_report far = event_scope("far", 10, event_ns, 50 * 894e12 * event_ns * 1e-9);
  unknown.id = 8;
  far.id = 9;
  kscope::session_report r;
  r.scopes = {advised(placed, {}, false).scopes[0], advised(unknown, {}, false).scopes[0],
              advised(far, {}, false).scopes[0]};
  REQUIRE(kscope::detail::placement_has_limiter(r.scopes[0]));
  REQUIRE(kscope::detail::placement_roof_unknown(r.scopes[1]));
  REQUIRE(kscope::detail::placement_impossible(r.scopes[2]));
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(r.json(), &error);
  REQUIRE_MESSAGE(back, error);
  REQUIRE(back->scopes.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    const kscope::scope_report& was = r.scopes[i];
    const kscope::scope_report& is = back->scopes[i];
    CAPTURE(was.path);
    REQUIRE(is.roofline);
    CHECK(is.roof == was.roof);
    CHECK(is.roofline->fraction_of_roof == doctest::Approx(was.roofline->fraction_of_roof));
    CHECK(kscope::detail::placement_impossible(is) == kscope::detail::placement_impossible(was));
    CHECK(kscope::detail::placement_has_limiter(is) == kscope::detail::placement_has_limiter(was));
    // The advice of a placement that holds is its verdict's; an impossible or roof-unknown
    // placement keeps its own line.
    if (kscope::detail::placement_has_limiter(was)) {
      REQUIRE(is.verdict);
      REQUIRE(was.verdict);
      CHECK(is.verdict->verdict.text == was.verdict->verdict.text);
    } else {
      CHECK(kscope::detail::placement_advice(is) == kscope::detail::placement_advice(was));
    }
  }
  // The roofline section itself, line for line.
  const auto section = [](const std::string& text) {
    const std::size_t from = text.find("roofline (median call)");
    if (from == std::string::npos) return std::string();
    const std::size_t to = text.find("\n\n", from);
    return text.substr(from, to == std::string::npos ? std::string::npos : to - from);
  };
  const std::string written = section(r.text());
  REQUIRE_FALSE(written.empty());
  CHECK(section(back->text()) == written);
}

}  // namespace advice_test
