// Tests of the benchmark harness's CPU-side logic, driven by a fake timer that returns
// prescribed durations and advances a virtual clock: stopping (target reached, budget
// exhausted, minimum samples, sample limit), warm-up, batching, ABBA interleaving with a
// reference, throttle flagging, the output check, and the JSON / CSV / markdown outputs
// (parsed back with nlohmann-json and a CSV reader). No GPU is touched, except in the
// last case, which checks that run() fails cleanly where there is no GPU.
#include <kscope/bench/bench.hpp>
#include <kscope/bench/detail/gbench_status.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bench_test {  // one per file: the unit tests build as one program

namespace {

// Per-launch durations and clocks as functions of (target, call number of that target).
struct fake_timer final : kscope::bench_timer {
  std::function<double(std::size_t, std::size_t)> duration_s;
  std::function<double(std::size_t, std::size_t)> clock_mhz = [](std::size_t, std::size_t) { return 1980.0; };
  double overhead_s = 30e-6;  // wall time per sample on top of the GPU time
  std::int64_t t_ns = 0;
  std::vector<std::pair<std::size_t, std::size_t>> log;  // (target, launches) per time()
  std::vector<std::pair<std::size_t, std::size_t>> prepared;
  std::size_t calls[2] = {0, 0};
  int executed[2] = {0, 0};
  double empty_s = std::numeric_limits<double>::quiet_NaN();  // what empty_stream_s() reports
  std::size_t empty_requests = 0;
  kscope::batch_capture captured[2];                          // what capture() reports

  explicit fake_timer(std::function<double(std::size_t, std::size_t)> d) : duration_s(std::move(d)) {}

  kscope::timed_sample time(std::size_t which, std::size_t launches) override {
    const std::size_t k = calls[which]++;
    const double total = duration_s(which, k) * static_cast<double>(launches);
    t_ns += static_cast<std::int64_t>((std::isfinite(total) ? total : 0) * 1e9 + overhead_s * 1e9);
    log.emplace_back(which, launches);
    return {total, clock_mhz(which, k)};
  }
  std::string prepare(std::size_t which, std::size_t launches) override {
    prepared.emplace_back(which, launches);
    return launches > 1 ? "graph" : "none";
  }
  void execute(std::size_t which) override { ++executed[which]; }
  std::int64_t now_ns() override { return t_ns; }
  double empty_stream_s() override {
    ++empty_requests;
    return empty_s;
  }
  kscope::batch_capture capture(std::size_t which) const override { return captured[which]; }
};

// Durations around `median_s` with relative Gaussian noise, reproducible (fixed seed).
std::function<double(std::size_t, std::size_t)> noisy(double median_s, double relative_sd, unsigned seed = 7) {
  auto engine = std::make_shared<std::mt19937_64>(seed);
  return [=](std::size_t, std::size_t) {
    std::normal_distribution<double> noise(0.0, relative_sd);
    return median_s * (1 + noise(*engine));
  };
}

kscope::bench make_bench(std::string name = "kernel") {
  return kscope::bench{std::move(name), [](kscope::bench_stream) {}};
}

}  // namespace

TEST_CASE("stopping: the median CI reaches the 1 % target") {
  fake_timer timer(noisy(1e-3, 0.002));
  kscope::bench b = make_bench();
  const kscope::bench_result r = b.run(timer);
  CHECK(r.stopped == kscope::stop_reason::target_reached);
  CHECK(r.target_reached());
  CHECK(r.analysis.rel_half_width <= 0.01);
  CHECK(r.analysis.stats.n >= 20);                // min_samples
  CHECK(r.series.measured_span_s >= 0.5);         // min_time_s: ~485 samples of 1 ms + 30 us
  CHECK(r.series.samples_s.size() >= 480);
  CHECK(r.series.samples_s.size() <= 520);        // ... and not many more: 0.2 % noise converges fast
  CHECK_FALSE(r.analysis.clock_managed);          // 1980 MHz throughout, rated unknown
  CHECK(r.analysis.clock_warmup == 0);
  CHECK(r.median_s() == doctest::Approx(1e-3).epsilon(0.002));
  CHECK(r.median_ci_s().lo <= r.median_s());
  CHECK(r.median_ci_s().hi >= r.median_s());
  CHECK(r.series.launches_per_sample == 1);       // 1 ms needs no batching
  CHECK(r.series.batching == "none");
  CHECK(r.warnings.empty());

  SUBCASE("a tighter target needs more samples") {
    fake_timer t2(noisy(1e-3, 0.002));
    kscope::bench tight = make_bench();
    tight.target_rel_ci(0.0001);
    const kscope::bench_result r2 = tight.run(t2);
    CHECK(r2.stopped == kscope::stop_reason::target_reached);
    CHECK(r2.analysis.rel_half_width <= 0.0001);
    CHECK(r2.series.samples_s.size() > r.series.samples_s.size());
  }
}

TEST_CASE("stopping: the time budget runs out before a noisy series gets precise") {
  fake_timer timer(noisy(1e-3, 0.5));
  kscope::bench b = make_bench();
  b.target_rel_ci(0.001).time_budget_s(1.0);
  const kscope::bench_result r = b.run(timer);
  CHECK(r.stopped == kscope::stop_reason::time_budget);
  CHECK_FALSE(r.target_reached());
  CHECK(r.analysis.rel_half_width > 0.001);
  CHECK(r.wall_s >= 1.0);
  CHECK(r.wall_s < 1.01);                         // stops within one sample of the budget
  REQUIRE_FALSE(r.warnings.empty());
  CHECK(r.warnings.front().find("target not reached") != std::string::npos);
  CHECK(r.warnings.front().find("time budget") != std::string::npos);
  // The markdown marks it, so nobody mistakes it for a precise number.
  const std::string md = kscope::bench_report{{}, {r}}.markdown();
  CHECK(md.find("(!)") != std::string::npos);
  CHECK(md.find("- time budget of 1 s spent after ") != std::string::npos);
}

TEST_CASE("stopping: a kernel longer than the budget allows still ends near the budget") {
  fake_timer timer([](std::size_t, std::size_t) { return 1.0; });  // 1 s per launch
  kscope::bench b = make_bench();
  b.time_budget_s(2);
  const kscope::bench_result r = b.run(timer);
  CHECK(r.stopped == kscope::stop_reason::time_budget);
  CHECK(timer.log.size() == 3);  // discarded call, one estimate, one sample; no warm-up left
  CHECK(r.series.samples_s.size() == 1);
  CHECK(std::isnan(r.median_ci_s().lo));  // one sample: no interval, and none is invented
  bool cut = false;
  for (const std::string& w : r.warnings) cut |= w.find("warm-up cut short") != std::string::npos;
  CHECK(cut);
}

TEST_CASE("stopping: minimum samples and the sample limit") {
  SUBCASE("a noiseless series still waits for min_samples") {
    fake_timer timer([](std::size_t, std::size_t) { return 1e-3; });
    kscope::bench b = make_bench();
    kscope::bench_options o;
    o.min_samples = 40;
    o.min_time_s = 0;
    b.options(o);
    const kscope::bench_result r = b.run(timer);
    CHECK(r.stopped == kscope::stop_reason::target_reached);
    CHECK(r.analysis.stats.n >= 40);
    CHECK(r.series.samples_s.size() <= 45);
    CHECK(r.median_s() == 1e-3);
    CHECK(r.analysis.rel_half_width == 0);
  }
  SUBCASE("min_time_s counts the wall time the measurement spans, not GPU time") {
    fake_timer timer([](std::size_t, std::size_t) { return 1e-3; });
    timer.overhead_s = 1e-3;  // each sample spans 2 ms of wall time for 1 ms of GPU time
    kscope::bench b = make_bench();
    kscope::bench_options o;
    o.min_samples = 10;
    o.min_time_s = 0.2;
    b.options(o);
    const kscope::bench_result r = b.run(timer);
    CHECK(r.stopped == kscope::stop_reason::target_reached);
    CHECK(r.series.measured_span_s >= 0.2);
    CHECK(r.series.measured_s < 0.11);
    CHECK(r.series.samples_s.size() >= 100);
    CHECK(r.series.samples_s.size() <= 110);
  }
  SUBCASE("max_samples") {
    fake_timer timer(noisy(1e-3, 0.5));
    kscope::bench b = make_bench();
    kscope::bench_options o;
    o.max_samples = 30;
    o.target_rel_ci = 1e-4;
    b.options(o);
    const kscope::bench_result r = b.run(timer);
    CHECK(r.stopped == kscope::stop_reason::sample_limit);
    CHECK(r.series.samples_s.size() == 30);
  }
}

TEST_CASE("warm-up: by time and calls first, then MSER removes what is left") {
  SUBCASE("warm-up phase lasts >= 25 ms and >= 10 calls") {
    fake_timer fast([](std::size_t, std::size_t) { return 1e-3; });
    kscope::bench b = make_bench();
    const kscope::bench_result r = b.run(fast);
    // 4 estimate calls (1 discarded + 3) = 3 ms counted, then 22 samples of 1 ms -> 25 ms.
    CHECK(r.series.warmup_calls == 4 + 22);
    CHECK(r.series.warmup_samples == 22);
    CHECK(r.series.warmup_s == doctest::Approx(0.025));

    fake_timer slow([](std::size_t, std::size_t) { return 10e-3; });
    kscope::bench c = make_bench();
    const kscope::bench_result q = c.run(slow);
    CHECK(q.series.warmup_calls == 10);              // 4 estimate calls + 6 samples: calls bind
    CHECK(q.series.warmup_samples == 6);
  }
  SUBCASE("a slow transient past the warm-up phase is removed by MSER") {
    // Calls 0..59 ramp down from 2 ms to 1 ms (clocks and caches settling), then 1 ms
    // with 0.1 % noise. The warm-up phase ends after ~15 calls, so the measured series
    // starts with ~45 samples of the ramp; MSER-5 must cut them.
    auto base = noisy(1e-3, 0.001);
    auto ramp = [base](std::size_t t, std::size_t k) {
      return k < 60 ? 1e-3 * (1 + static_cast<double>(60 - k) / 60) : base(t, k);
    };
    fake_timer timer(ramp);
    kscope::bench b = make_bench();
    const kscope::bench_result r = b.run(timer);
    CHECK(r.series.warmup_calls == 4 + r.series.warmup_samples);
    CHECK(r.series.samples_s.front() == ramp(0, r.series.warmup_calls));
    const std::size_t ramp_in_series = 60 - r.series.warmup_calls;
    CHECK(r.stopped == kscope::stop_reason::target_reached);
    CHECK(r.analysis.stats.steady);
    CHECK(r.analysis.stats.warmup >= ramp_in_series - 10);  // the last ramp samples are within 10 %
    CHECK(r.analysis.stats.warmup <= ramp_in_series + 5);   // batch-of-5 granularity
    CHECK(r.median_s() == doctest::Approx(1e-3).epsilon(0.002));
    CHECK(r.analysis.stats.max < 1.17e-3);
  }
  SUBCASE("a constant slow phase longer than min_time_s looks steady: the harness cannot know it will end") {
    // Documented limitation: 0.5 s of samples at exactly 2 ms satisfy every stopping rule.
    fake_timer timer([](std::size_t, std::size_t k) { return k < 600 ? 2e-3 : 1e-3; });
    kscope::bench b = make_bench();
    CHECK(b.run(timer).median_s() == 2e-3);
  }
  SUBCASE("a slow phase shorter than min_time_s is outlasted and removed") {
    fake_timer timer([](std::size_t, std::size_t k) { return k < 60 ? 2e-3 : 1e-3; });
    kscope::bench b = make_bench();
    CHECK(b.run(timer).median_s() == 1e-3);
  }
}

TEST_CASE("batching: short kernels are timed N launches per sample") {
  fake_timer timer(noisy(2e-6, 0.002));
  kscope::bench b = make_bench();
  const kscope::bench_result r = b.run(timer);
  // First estimate 2 us -> ceil(100 us / 2 us) = 50 launches; the noise moves it by one at most.
  CHECK(r.series.launches_per_sample >= 49);
  CHECK(r.series.launches_per_sample <= 51);
  CHECK(r.series.batching == "graph");
  REQUIRE(timer.prepared.size() == 1);
  CHECK(timer.prepared[0].second == r.series.launches_per_sample);
  // Every sample after the 4 single-launch estimates uses the batch.
  for (std::size_t i = 4; i < timer.log.size(); ++i) CHECK(timer.log[i].second == r.series.launches_per_sample);
  CHECK(r.median_s() == doctest::Approx(2e-6).epsilon(0.003));  // per launch, not per sample
  CHECK(r.stopped == kscope::stop_reason::target_reached);

  SUBCASE("the user can set N, and N is capped") {
    fake_timer t2(noisy(2e-6, 0.002));
    kscope::bench fixed = make_bench();
    fixed.launches_per_sample(7);
    CHECK(fixed.run(t2).series.launches_per_sample == 7);

    fake_timer t3([](std::size_t, std::size_t) { return 1e-9; });
    kscope::bench tiny = make_bench();
    CHECK(tiny.run(t3).series.launches_per_sample == 10000);
  }
  SUBCASE("cold L2 with batching is flagged") {
    fake_timer t4(noisy(2e-6, 0.002));
    kscope::bench cold = make_bench();
    cold.cold();
    const kscope::bench_result c = cold.run(t4);
    bool flagged = false;
    for (const std::string& w : c.warnings) flagged |= w.find("cold L2 with batching") != std::string::npos;
    CHECK(flagged);
  }
}

TEST_CASE("reference: ABBA rounds and the ratio of medians with its interval") {
  // The benchmark (target 0) takes 1 ms, the reference (target 1) 0.72 ms.
  auto a = noisy(1e-3, 0.003, 1);
  auto b = noisy(0.72e-3, 0.003, 2);
  fake_timer timer([a, b](std::size_t t, std::size_t k) { return t == 0 ? a(t, k) : b(t, k); });
  kscope::bench ref{"cuBLAS", [](kscope::bench_stream) {}};
  kscope::bench mine{"tiled", [](kscope::bench_stream) {}};
  mine.reference(ref);
  const kscope::bench_result r = mine.run(timer);
  REQUIRE(r.reference);
  CHECK(r.stopped == kscope::stop_reason::target_reached);

  // Estimates (4 per target) first, then warm-up round-robin, then A B B A rounds.
  const std::size_t warm = r.series.warmup_samples + r.reference->series.warmup_samples;
  const std::size_t start = 8 + warm;
  REQUIRE(timer.log.size() > start + 8);
  CHECK((timer.log.size() - start) % 4 == 0);
  for (std::size_t i = start; i < timer.log.size(); i += 4) {
    CHECK(timer.log[i].first == 0);
    CHECK(timer.log[i + 1].first == 1);
    CHECK(timer.log[i + 2].first == 1);
    CHECK(timer.log[i + 3].first == 0);
  }
  CHECK(r.series.samples_s.size() == r.reference->series.samples_s.size());
  CHECK(r.rounds * 2 == r.series.samples_s.size());

  const kscope::reference_result& ref_result = *r.reference;
  CHECK(ref_result.name == "cuBLAS");
  CHECK(ref_result.versus.ratio == doctest::Approx(1 / 0.72).epsilon(0.01));
  CHECK(ref_result.relative_speed == doctest::Approx(0.72).epsilon(0.01));
  CHECK(ref_result.relative_speed_ci.lo <= 0.72 * 1.003);
  CHECK(ref_result.relative_speed_ci.hi >= 0.72 * 0.997);
  CHECK(ref_result.relative_speed_ci.lo == doctest::Approx(1 / ref_result.versus.ratio_ci.hi));
  CHECK(ref_result.versus.result == kscope::verdict::slower);
  CHECK_FALSE(ref_result.check.performed);  // no output readers

  const std::string md = kscope::bench_report{{}, {r}}.markdown();
  CHECK(md.find("% of cuBLAS, 95 % CI [") != std::string::npos);
}

TEST_CASE("throttle: samples under 90 % of the median clock are flagged, optionally discarded") {
  // Every 8th call runs at 1300 MHz and 1.5x slower.
  auto base = noisy(1e-3, 0.001);
  auto duration = [base](std::size_t t, std::size_t k) { return k % 8 == 7 ? 1.5e-3 : base(t, k); };
  auto clock = [](std::size_t, std::size_t k) { return k % 8 == 7 ? 1300.0 : 1980.0 + static_cast<double>(k % 3); };

  fake_timer flagged(duration);
  flagged.clock_mhz = clock;
  kscope::bench b = make_bench();
  const kscope::bench_result r = b.run(flagged);
  const std::size_t n = r.series.samples_s.size();
  CHECK(r.analysis.throttled_samples >= n / 8 - 1);
  CHECK(r.analysis.throttled_samples <= n / 8 + 1);
  CHECK_FALSE(r.analysis.clock_managed);            // dips in 1 of 8 samples: flagged, not managed
  CHECK(r.analysis.median_sm_clock_mhz == doctest::Approx(1981).epsilon(0.001));
  CHECK(r.analysis.min_sm_clock_mhz == 1300);
  for (std::size_t i = 0; i < n; ++i) CHECK(r.analysis.throttled[i] == (r.series.sm_clock_mhz[i] < 1782));
  CHECK(r.analysis.used_s.size() == n);             // flagged, kept
  CHECK(r.analysis.stats.max == 1.5e-3);
  bool warned = false;
  for (const std::string& w : r.warnings) warned |= w.find("under 90 % of the median SM clock") != std::string::npos;
  CHECK(warned);

  fake_timer discarded(duration);
  discarded.clock_mhz = clock;
  kscope::bench d = make_bench();
  kscope::bench_options o;
  o.discard_throttled = true;
  d.options(o);
  const kscope::bench_result q = d.run(discarded);
  CHECK(q.analysis.used_s.size() == q.series.samples_s.size() - q.analysis.throttled_samples);
  CHECK(q.analysis.stats.max < 1.1e-3);

  SUBCASE("a run far under its rated clock says so") {
    fake_timer low([](std::size_t, std::size_t) { return 1e-3; });
    low.clock_mhz = [](std::size_t, std::size_t) { return 1400.0; };
    kscope::bench_result lr = make_bench().run(low);
    lr.sm_clock_max_mhz = 1980;  // run(timer) queries no device; run() fills this in
    lr.warnings.clear();
    kscope::detail::harness::finish_result(lr);
    bool said = false;
    for (const std::string& w : lr.warnings) said |= w.find("of the rated 1980 MHz") != std::string::npos;
    CHECK(said);
  }
}

TEST_CASE("output check against the reference") {
  SUBCASE("metric") {
    kscope::output_check c = kscope::check_outputs({1.0, 2.02, 0.0}, {1.0, 2.0, 0.0});
    CHECK(c.performed);
    CHECK(c.values == 3);
    CHECK(c.max_abs_error == doctest::Approx(0.02));
    CHECK(c.max_rel_error == doctest::Approx(0.01));
    CHECK(c.passed);  // no tolerance: report only
    // Near-zero reference entries use the floor 1e-3 * max |reference| = 1.
    c = kscope::check_outputs({1000.0, 1e-3}, {1000.0, 0.0});
    CHECK(c.max_rel_error == doctest::Approx(1e-3));
    c = kscope::check_outputs({1000.0, 10.1}, {1000.0, 10.0});  // above the floor: its own scale
    CHECK(c.max_rel_error == doctest::Approx(0.01));
    c = kscope::check_outputs({1.0, NAN}, {1.0, 2.0}, 1e-2);
    CHECK(std::isinf(c.max_rel_error));
    CHECK_FALSE(c.passed);
    c = kscope::check_outputs({1.0, 2.5}, {1.0, 2.0}, 1e-2);
    CHECK(c.max_rel_error == doctest::Approx(0.25));
    CHECK_FALSE(c.passed);
    CHECK(c.note.find("exceeds the tolerance") != std::string::npos);
    c = kscope::check_outputs({1.0}, {1.0, 2.0});
    CHECK_FALSE(c.performed);
    CHECK_FALSE(c.passed);
    CHECK(c.note == "output sizes differ: 1 values vs 2 in the reference");
  }
  SUBCASE("runs each target once, untimed, then reads both outputs") {
    fake_timer timer(noisy(1e-3, 0.002));
    kscope::bench ref{"reference", [](kscope::bench_stream) {}};
    ref.output([] { return std::vector<double>{1.0, 2.0, 4.0}; });
    kscope::bench mine{"candidate", [](kscope::bench_stream) {}};
    mine.output([] { return std::vector<double>{1.0, 2.0, 4.004}; }, 1e-2).reference(ref);
    const kscope::bench_result r = mine.run(timer);
    REQUIRE(r.reference);
    CHECK(timer.executed[0] == 1);
    CHECK(timer.executed[1] == 1);
    CHECK(r.reference->check.performed);
    CHECK(r.reference->check.max_rel_error == doctest::Approx(0.001));
    CHECK(r.reference->check.passed);
    const std::string md = kscope::bench_report{{}, {r}}.markdown();
    CHECK(md.find("output check: max rel. error 0.001") != std::string::npos);
  }
  SUBCASE("a reader that throws is reported, not propagated") {
    fake_timer timer(noisy(1e-3, 0.002));
    kscope::bench ref{"reference", [](kscope::bench_stream) {}};
    ref.output([]() -> std::vector<double> { throw std::runtime_error("copy failed"); });
    kscope::bench mine{"candidate", [](kscope::bench_stream) {}};
    mine.output([] { return std::vector<double>{1.0}; }).reference(ref);
    const kscope::bench_result r = mine.run(timer);
    REQUIRE(r.reference);
    CHECK_FALSE(r.reference->check.passed);
    CHECK(r.reference->check.note == "reading the outputs threw: copy failed");
  }
}

TEST_CASE("a timer that keeps failing ends the run with stop_reason::error") {
  fake_timer timer([](std::size_t, std::size_t) { return std::nan(""); });
  kscope::bench b = make_bench();
  const kscope::bench_result r = b.run(timer);
  CHECK(r.stopped == kscope::stop_reason::error);
  CHECK(r.series.samples_s.empty());
  CHECK(std::isnan(r.median_s()));
  CHECK(timer.log.size() == 8);  // gives up after 8 consecutive failures, in the first estimate
  bool said = false;
  for (const std::string& w : r.warnings) said |= w.find("8 consecutive samples") != std::string::npos;
  CHECK(said);
}

TEST_CASE("rates carry the transformed interval; roofline when peaks are known") {
  fake_timer timer(noisy(1e-3, 0.002));
  kscope::bench b = make_bench("gemm");
  // 8e11 FLOP and 1e8 B in 1 ms: 800 TFLOP/s and 100 GB/s, possible under these peaks.
  b.set_work({8e11, 1e8}).peaks(1000e12, 4e12);
  const kscope::bench_result r = b.run(timer);
  CHECK(r.valid());
  CHECK(r.flops_per_s.median == doctest::Approx(8e11 / r.median_s()));
  CHECK(r.flops_per_s.ci.lo == doctest::Approx(8e11 / r.median_ci_s().hi));
  CHECK(r.flops_per_s.ci.hi == doctest::Approx(8e11 / r.median_ci_s().lo));
  CHECK(r.bytes_per_s.ci.lo == doctest::Approx(1e8 / r.median_ci_s().hi));
  CHECK(r.fraction_of_peak_bandwidth == doctest::Approx(r.bytes_per_s.median / 4e12));
  REQUIRE(r.roofline);
  CHECK(r.roofline->flops_per_s == doctest::Approx(r.flops_per_s.median));
  CHECK(r.roofline->fraction_of_roof == doctest::Approx(r.flops_per_s.median / 1000e12));
  CHECK(r.roofline->limiter == kscope::bound::compute);

  fake_timer t2(noisy(1e-3, 0.002));
  kscope::bench no_peak = make_bench("gemm");
  no_peak.set_work({8e11, 1e8});
  const kscope::bench_result q = no_peak.run(t2);
  CHECK_FALSE(q.roofline);
  bool said = false;
  for (const std::string& w : q.warnings) said |= w.find("roofline placement skipped") != std::string::npos;
  CHECK(said);
}

namespace {

kscope::bench_result sample_result() {
  // 2 x 4096^3 FLOP in 2.78 ms: 49 TFLOP/s, possible under the 67 TFLOP/s fp32 peak given.
  auto a = noisy(2.78e-3, 0.002, 3);
  auto b = noisy(2.0e-3, 0.002, 4);
  fake_timer timer([a, b](std::size_t t, std::size_t k) { return t == 0 ? a(t, k) : b(t, k); });
  timer.clock_mhz = [](std::size_t, std::size_t k) { return k == 50 ? std::nan("") : 1755.0 + static_cast<double>(k % 7); };
  kscope::bench ref{"cuBLAS", [](kscope::bench_stream) {}};
  ref.output([] { return std::vector<double>{1, 2, 3}; });
  kscope::bench mine{"tiled, \"v2\"", [](kscope::bench_stream) {}};  // comma and quotes: CSV must quote
  mine.shape({4096, 4096, 4096})
      .dtype("fp32")
      .strides({4096, 1})
      .param("tile", 32)
      .param("alpha", 0.5)
      .param("layout", "NT")
      .set_work({2.0 * 4096.0 * 4096.0 * 4096.0, 3.0 * 4 * 4096.0 * 4096.0})
      .peaks(67e12, 4.8e12)
      .output([] { return std::vector<double>{1, 2, 3.003}; }, 1e-2)
      .reference(ref);
  kscope::bench_result r = mine.run(timer);
  kscope::kernel_resources k;
  k.block_threads = 256;
  k.registers_per_thread = 64;
  k.static_smem_bytes = 8192;
  k.occupancy = 0.5;
  k.active_blocks_per_sm = 4;
  k.max_warps_per_sm = 64;
  r.resources = k;
  return r;
}

kscope::bench_context sample_context() {
  kscope::bench_context c;
  c.timestamp_utc = "2026-12-02T10:00:00Z";
  c.host_name = "h200-node";
  kscope::device_info& d = c.gpu;
  d.present = true;
  d.ordinal = 0;
  d.device_count = 1;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.driver_version = 13000;
  d.runtime_version = 13000;
  d.sm_clock_khz = 1'980'000;
  d.memory_clock_khz = 3'201'000;
  d.memory_bus_width_bits = 6016;
  d.l2_bytes = 50331648;
  d.memory_bytes = 150ull << 30;
  d.uuid = "GPU-00000000-1111-2222-3333-444444444444";
  return c;
}

// A small RFC 4180 reader: quoted fields, doubled quotes, commas inside quotes.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') { field += '"'; ++i; }
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') { quoted = true; }
    else if (c == ',') { rows.back().push_back(field); field.clear(); }
    else if (c == '\n') { rows.back().push_back(field); field.clear(); rows.emplace_back(); }
    else field += c;
    any = true;
  }
  if (rows.back().empty()) rows.pop_back();
  (void)any;
  return rows;
}

}  // namespace

TEST_CASE("JSON round trip: kscope.bench/2 parsed back with nlohmann-json") {
  const kscope::bench_result r = sample_result();
  const kscope::bench_report report{sample_context(), {r}};
  const nlohmann::json j = nlohmann::json::parse(report.json());

  CHECK(j["schema"] == "kscope.bench/2");
  CHECK(j["kscope_version"] == KSCOPE_VERSION_STRING);
  const auto& gpu = j["context"]["gpu"];
  CHECK(gpu["name"] == "NVIDIA H200");
  CHECK(gpu["compute_capability"] == "9.0");
  CHECK(gpu["sm_count"] == 132);
  CHECK(gpu["driver_version"] == 13000);
  CHECK(gpu["sm_clock_max_mhz"].get<double>() == 1980);
  CHECK(gpu["memory_clock_mhz"].get<double>() == 3201);
  CHECK(gpu["l2_bytes"] == 50331648);
  // The DRAM peak is device_info's (device.hpp), not a second derivation.
  CHECK(gpu["peak_bytes_per_s"].get<double>() == kscope::theoretical_bytes_per_s(sample_context().gpu));
  CHECK(gpu["peak_bytes_per_s"].get<double>() == doctest::Approx(3201e6 * 6016 / 8 * 2));
  CHECK(gpu["architecture"] == "Hopper (sm_90)");
  CHECK(gpu["uuid"] == "GPU-00000000-1111-2222-3333-444444444444");
  CHECK(j["context"]["has_gpu"] == true);
  CHECK(j["context"]["notes"].empty());
  CHECK(j["context"]["timestamp_utc"] == "2026-12-02T10:00:00Z");

  REQUIRE(j["benchmarks"].size() == 1);
  const auto& b = j["benchmarks"][0];
  CHECK(b["name"] == "tiled, \"v2\"");
  CHECK(b["shape"] == nlohmann::json::array({4096, 4096, 4096}));
  CHECK(b["strides"] == nlohmann::json::array({4096, 1}));
  CHECK(b["dtype"] == "fp32");
  CHECK(b["params"]["tile"].is_number_integer());  // typed: numbers stay numbers
  CHECK(b["params"]["tile"] == 32);
  CHECK(b["params"]["alpha"].get<double>() == 0.5);
  CHECK(b["params"]["layout"] == "NT");
  CHECK(b["work"]["flops"].get<double>() == r.declared.flops);
  CHECK(b["statistic"] == "median");
  CHECK(b["stop_reason"] == "target_reached");
  CHECK(b["valid"] == true);
  CHECK(b["invalid_reason"] == "");
  CHECK(b["stop_message"] == r.stop_message);
  CHECK(b["stop_message"].get<std::string>().rfind("target reached: ", 0) == 0);
  CHECK(b["empty_stream_s"].is_null());             // the fake timer does not know it
  CHECK(b["measurement"]["graph_nodes"] == -1);     // nor does it capture graphs
  CHECK(b["settings"]["cache"] == "hot");
  CHECK(b["settings"]["target_rel_ci"].get<double>() == 0.01);
  CHECK(b["settings"]["warmup_min_calls"] == 10);

  const auto& m = b["measurement"];
  CHECK(m["launches_per_sample"] == 1);
  CHECK(m["batching"] == "none");
  CHECK(m["warmup"]["calls"] == r.series.warmup_calls);
  CHECK(m["samples_taken"] == r.series.samples_s.size());
  // Doubles are written with enough digits to come back bit for bit.
  CHECK(m["time_s"]["median"].get<double>() == r.median_s());
  CHECK(m["time_s"]["median_ci"]["lo"].get<double>() == r.median_ci_s().lo);
  CHECK(m["time_s"]["median_ci"]["hi"].get<double>() == r.median_ci_s().hi);
  CHECK(m["time_s"]["median_ci"]["level"].get<double>() == 0.95);
  CHECK(m["time_s"]["rel_half_width"].get<double>() == r.analysis.rel_half_width);
  CHECK(m["time_s"]["n"] == r.analysis.stats.n);
  CHECK(m["time_s"]["steady"] == r.analysis.stats.steady);
  CHECK(m["sm_clock_mhz"]["median"].get<double>() == r.analysis.median_sm_clock_mhz);
  REQUIRE(m["samples_s"].size() == r.series.samples_s.size());
  for (std::size_t i = 0; i < r.series.samples_s.size(); ++i) CHECK(m["samples_s"][i].get<double>() == r.series.samples_s[i]);
  // The one unknown clock is null, not a made-up number.
  std::size_t nulls = 0;
  for (const auto& x : m["samples_sm_clock_mhz"]) nulls += x.is_null();
  CHECK(nulls == 1);
  CHECK(m["samples_throttled"].size() == r.series.samples_s.size());

  CHECK(b["rates"]["flops_per_s"]["median"].get<double>() == r.flops_per_s.median);
  CHECK(b["rates"]["flops_per_s"]["ci"]["lo"].get<double>() == r.flops_per_s.ci.lo);
  CHECK(b["roofline"].find("bound") == b["roofline"].end());  // the row's one conclusion is its verdict
  CHECK(b["verdict"]["class"] == "compute-bound");
  CHECK(b["verdict"]["source"] == "declared work");
  CHECK(b["verdict"]["count_of"] == "timed samples");
  CHECK(b["roofline"]["fraction_of_roof"].get<double>() == r.roofline->fraction_of_roof);
  CHECK(b["resources"]["registers_per_thread"] == 64);
  CHECK(b["resources"]["occupancy"].get<double>() == 0.5);

  const auto& ref = b["reference"];
  CHECK(ref["name"] == "cuBLAS");
  CHECK(ref["comparison"]["ratio"].get<double>() == r.reference->versus.ratio);
  CHECK(ref["comparison"]["ratio_ci"]["lo"].get<double>() == r.reference->versus.ratio_ci.lo);
  CHECK(ref["comparison"]["relative_speed"].get<double>() == r.reference->relative_speed);
  CHECK(ref["comparison"]["verdict"] == "slower");
  CHECK(ref["measurement"]["samples_s"].size() == r.reference->series.samples_s.size());
  CHECK(ref["output_check"]["performed"] == true);
  CHECK(ref["output_check"]["max_rel_error"].get<double>() == r.reference->check.max_rel_error);
  CHECK(ref["output_check"]["tolerance"].get<double>() == 1e-2);
  CHECK(b["warnings"].is_array());

  SUBCASE("without raw samples, and with nothing optional") {
    const nlohmann::json small = nlohmann::json::parse(report.json(false));
    CHECK_FALSE(small["benchmarks"][0]["measurement"].contains("samples_s"));
    fake_timer timer(noisy(1e-3, 0.002));
    kscope::bench plain = make_bench("plain");
    const nlohmann::json p = nlohmann::json::parse(kscope::bench_report{{}, {plain.run(timer)}}.json());
    CHECK(p["benchmarks"][0]["reference"].is_null());
    CHECK(p["benchmarks"][0]["roofline"].is_null());
    CHECK(p["benchmarks"][0]["resources"].is_null());
    CHECK(p["benchmarks"][0]["rates"]["flops_per_s"]["median"].is_null());  // NaN -> null
    CHECK(p["context"]["has_gpu"] == false);
    CHECK(p["context"]["gpu"]["sm_clock_max_mhz"].is_null());   // unknown, not 0
    CHECK(p["context"]["gpu"]["peak_bytes_per_s"].is_null());
  }
}

TEST_CASE("CSV round trip: one row per benchmark, one per sample") {
  const kscope::bench_result r = sample_result();
  const kscope::bench_report report{sample_context(), {r, r}};
  const auto rows = parse_csv(report.csv());
  REQUIRE(rows.size() == 3);
  const std::vector<std::string>& header = rows[0];
  for (const auto& row : rows) CHECK(row.size() == header.size());
  auto column = [&](const std::string& name) -> const std::string& {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return rows[1][i];
    FAIL("no column " << name);
    return header[0];
  };
  CHECK(column("name") == "tiled, \"v2\"");
  CHECK(column("params") == "tile=32;alpha=0.5;layout=NT");
  CHECK(column("shape") == "4096x4096x4096");
  CHECK(column("strides") == "4096x1");
  CHECK(column("statistic") == "median");
  CHECK(column("stop_reason") == "target_reached");
  CHECK(column("valid") == "true");
  CHECK(column("invalid_reason").empty());
  CHECK(std::stod(column("median_s")) == r.median_s());
  CHECK(std::stod(column("ci_lo_s")) == r.median_ci_s().lo);
  CHECK(std::stod(column("ci_hi_s")) == r.median_ci_s().hi);
  CHECK(std::stod(column("flops_per_s_lo")) == r.flops_per_s.ci.lo);
  CHECK(std::stod(column("relative_speed")) == r.reference->relative_speed);
  CHECK(std::stoul(column("samples_taken")) == r.series.samples_s.size());
  CHECK(column("reference") == "cuBLAS");
  CHECK(column("verdict") == "slower");
  CHECK(column("bound") == "compute");
  CHECK(column("bound_source") == "declared work");

  const auto samples = parse_csv(report.samples_csv());
  REQUIRE(samples.size() == 1 + 2 * (r.series.samples_s.size() + r.reference->series.samples_s.size()));
  CHECK(samples[0] == std::vector<std::string>{"benchmark", "params", "role", "index", "seconds", "sm_clock_mhz", "throttled"});
  CHECK(samples[1][0] == "tiled, \"v2\"");
  CHECK(samples[1][2] == "benchmark");
  CHECK(std::stod(samples[1][4]) == r.series.samples_s[0]);
  CHECK(samples[1 + r.series.samples_s.size()][2] == "reference");
}

TEST_CASE("markdown: context line, one row per benchmark, notes with how it was measured") {
  const kscope::bench_result r = sample_result();
  const std::string md = kscope::bench_report{sample_context(), {r}}.markdown();
  CHECK(md.find("kscope " KSCOPE_VERSION_STRING " | NVIDIA H200 (cc 9.0, 132 SMs) | driver 13.0, runtime 13.0") !=
        std::string::npos);
  CHECK(md.find("| tiled, \"v2\" (tile=32 alpha=0.5 layout=NT) | 4096x4096x4096 | fp32 | 2.78") != std::string::npos);
  CHECK(md.find("TFLOP/s") != std::string::npos);
  CHECK(md.find("% of cuBLAS, 95 % CI [") != std::string::npos);
  CHECK(md.find("- target reached: median CI half-width ") != std::string::npos);
  CHECK(md.find("INVALID") == std::string::npos);  // no legend for results that are all valid
  CHECK(md.find("64 registers/thread") != std::string::npos);
  CHECK(md.find("occupancy 50 %") != std::string::npos);
  CHECK(md.find("SM clock median 17") != std::string::npos);
  CHECK(md.find("roofline: intensity") != std::string::npos);
  CHECK(md.find("strides 4096, 1") != std::string::npos);
  CHECK(md.find("| SM clock max 1980 MHz | memory 4.81 TB/s | L2 48 MiB |") != std::string::npos);

  // Without a GPU the context says why, in the table and in the JSON notes.
  kscope::bench_context none;
  none.gpu.problem = "no CUDA device: cudaGetDeviceCount found 0 devices";
  const kscope::bench_report empty{none, {r}};
  CHECK(empty.markdown().find(" | no GPU (no CUDA device: cudaGetDeviceCount found 0 devices)\n") != std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(empty.json());
  CHECK(j["context"]["has_gpu"] == false);
  CHECK(j["context"]["notes"] == nlohmann::json::array({none.gpu.problem}));
}

TEST_CASE("run() without a usable GPU fails cleanly") {
  const kscope::bench_context c = kscope::describe_bench_context();
  if (c.gpu.present) {
    MESSAGE("a GPU is present: the no-GPU path is not exercised here (tests/gpu covers the GPU path)");
    return;
  }
  kscope::bench b = make_bench();
  const kscope::bench_result r = b.run();
  CHECK(r.stopped == kscope::stop_reason::error);
  REQUIRE_FALSE(r.warnings.empty());
  CHECK(r.series.samples_s.empty());
}

namespace {

// A GPU under a heavy load: the first `boost_s` of virtual GPU time run at the rated
// 1980 MHz, then the power controller brings the clock to 1870 MHz; the time of a
// launch scales with 1 / clock. Clock and time are a function of the GPU time spent.
struct power_managed_timer final : kscope::bench_timer {
  double base_s = 180e-6;   // at 1870 MHz
  double boost_s = 0.3;
  double rated = 1980;
  double gpu_s = 0;
  std::int64_t t_ns = 0;
  std::mt19937_64 engine{11};
  double clock_now() const { return gpu_s < boost_s ? 1980.0 : 1870.0; }
  kscope::timed_sample time(std::size_t, std::size_t launches) override {
    std::normal_distribution<double> noise(0.0, 0.002);
    const double clock = clock_now();
    const double total = base_s * 1870.0 / clock * (1 + noise(engine)) * static_cast<double>(launches);
    gpu_s += total;
    t_ns += static_cast<std::int64_t>(total * 1e9 + 20e3);
    return {total, clock + static_cast<double>(engine() % 3)};
  }
  std::int64_t now_ns() override { return t_ns; }
  double rated_sm_clock_mhz() const override { return rated; }
};

}  // namespace

TEST_CASE("power-managed clock: the boost transient is dropped and the run spans managed_min_time_s") {
  power_managed_timer timer;
  kscope::bench b = make_bench("gemm");
  const kscope::bench_result r = b.run(timer);
  CHECK(r.stopped == kscope::stop_reason::target_reached);
  CHECK(r.analysis.clock_managed);
  CHECK(r.analysis.clock_steady);
  CHECK(r.series.measured_span_s >= 1.0);            // managed_min_time_s, not min_time_s
  // The transient (~0.3 s of GPU time, minus the warm-up) is gone: the median is the
  // sustained 180 us, not a mix with the 170 us of the boost phase.
  CHECK(r.analysis.clock_warmup > 1000);
  CHECK(r.median_s() == doctest::Approx(180e-6).epsilon(0.002));
  CHECK(r.analysis.used_s.size() == r.series.samples_s.size() - r.analysis.clock_warmup);

  // Without the clock logic (fraction 0: never managed) and with the old 50 ms minimum,
  // the same run stops inside the boost phase: a median 5.5 % faster than sustained,
  // which is what made separate processes disagree on the H200.
  power_managed_timer plain_timer;
  kscope::bench p = make_bench("gemm");
  kscope::bench_options o;
  o.managed_clock_fraction = 0;
  o.min_time_s = 0.05;
  p.options(o);
  const kscope::bench_result q = p.run(plain_timer);
  CHECK_FALSE(q.analysis.clock_managed);
  CHECK(q.series.measured_span_s < 0.1);
  CHECK(q.median_s() == doctest::Approx(180e-6 * 1870 / 1980).epsilon(0.003));

  // The JSON says what happened.
  const nlohmann::json j = nlohmann::json::parse(kscope::bench_report{{}, {r}}.json());
  const nlohmann::json& m = j["benchmarks"][0]["measurement"];
  CHECK(m["clock_managed"].get<bool>());
  CHECK(m["clock_steady"].get<bool>());
  CHECK(m["clock_warmup_removed"].get<std::size_t>() == r.analysis.clock_warmup);
  CHECK(j["benchmarks"][0]["settings"]["managed_min_time_s"].get<double>() == 1.0);
  CHECK(kscope::bench_report{{}, {r}}.markdown().find("power-managed clock") != std::string::npos);
}

TEST_CASE("power-managed clock: rated clock unknown, a clock that sits 5 % under its top is managed") {
  fake_timer timer(noisy(1e-3, 0.002));
  // Half of the samples at 1980, half at 1880, interleaved: a managed clock with no
  // transient to remove (rated clock unknown to this timer: the 90th percentile is used).
  timer.clock_mhz = [](std::size_t, std::size_t k) { return k % 2 ? 1880.0 : 1980.0; };
  kscope::bench b = make_bench();
  const kscope::bench_result r = b.run(timer);
  CHECK(r.analysis.clock_managed);
  CHECK(r.series.measured_span_s >= 1.0);
  CHECK(r.stopped == kscope::stop_reason::target_reached);
}

TEST_CASE("power-managed clock: a clock that never settles needs 3 x managed_min_time_s") {
  // The clock falls linearly through the whole run: MSER-5 finds no steady state.
  struct drifting final : kscope::bench_timer {
    double gpu_s = 0;
    std::int64_t t_ns = 0;
    std::mt19937_64 engine{5};
    kscope::timed_sample time(std::size_t, std::size_t launches) override {
      // -200 MHz per GPU second; the time does not follow the clock (a memory-bound
      // kernel), so only the clock rule can hold the run.
      const double clock = std::max(1000.0, 1980.0 - 200.0 * gpu_s);
      std::normal_distribution<double> noise(0.0, 0.002);
      const double total = 400e-6 * (1 + noise(engine)) * static_cast<double>(launches);
      gpu_s += total;
      t_ns += static_cast<std::int64_t>(total * 1e9 + 20e3);
      return {total, clock};
    }
    std::int64_t now_ns() override { return t_ns; }
    double rated_sm_clock_mhz() const override { return 1980; }
  } clock_drift;
  kscope::bench b = make_bench();
  kscope::bench_options o;
  o.detect_warmup = false;      // judge the clock rule alone, not MSER on the times
  o.time_budget_s = 20;
  b.options(o);
  const kscope::bench_result r = b.run(clock_drift);
  CHECK(r.analysis.clock_managed);
  CHECK_FALSE(r.analysis.clock_steady);
  CHECK(r.series.measured_span_s >= 3.0);
  bool warned = false;
  for (const std::string& w : r.warnings) warned |= w.find("never settled") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("power-managed clock: unknown clocks (NaN) leave the run unmanaged") {
  fake_timer timer(noisy(1e-3, 0.002));
  timer.clock_mhz = [](std::size_t, std::size_t) { return std::numeric_limits<double>::quiet_NaN(); };
  kscope::bench b = make_bench();
  const kscope::bench_result r = b.run(timer);
  CHECK_FALSE(r.analysis.clock_managed);
  CHECK(r.analysis.clock_warmup == 0);
  CHECK(r.series.measured_span_s < 0.6);
}

// ---- stop messages: each one true to what happened ---------------------------------

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool any_warning(const kscope::bench_result& r, const std::string& part) {
  for (const std::string& w : r.warnings)
    if (contains(w, part)) return true;
  return false;
}

}  // namespace

TEST_CASE("stop message: target_reached states the width that met the target") {
  fake_timer timer(noisy(1e-3, 0.002));
  const kscope::bench_result r = make_bench().run(timer);
  REQUIRE(r.stopped == kscope::stop_reason::target_reached);
  CHECK(r.valid());
  CHECK(r.stop_message.rfind("target reached: median CI half-width ", 0) == 0);
  CHECK(contains(r.stop_message, " % <= target 1 % with " + std::to_string(r.analysis.stats.n) + " samples used over "));
  CHECK(r.invalid_reason.empty());
}

TEST_CASE("stop message: time_budget names the condition that failed, not a CI width that was met") {
  // The reported case: a 276 ms kernel under the 10 s budget. Its first measured samples
  // are 8 % slower (a transient MSER-5 removes), so fewer than min_samples remain when the
  // budget runs out, while the CI of those that remain is far under 1 %. The old message
  // said "median CI half-width 0.00 % > target 1.00 %".
  auto steady = noisy(0.276, 0.0005, 9);
  fake_timer timer([steady](std::size_t t, std::size_t k) { return k < 20 ? 0.298 : steady(t, k); });
  kscope::bench b = make_bench("long kernel");
  const kscope::bench_result r = b.run(timer);
  REQUIRE(r.stopped == kscope::stop_reason::time_budget);
  CHECK(r.valid());                           // the median is real, only less certain than asked
  REQUIRE(r.analysis.stats.n < 20);
  CHECK(r.analysis.stats.warmup > 0);
  CHECK(r.analysis.rel_half_width <= 0.01);   // the CI target was met ...
  CHECK_FALSE(contains(r.stop_message, "half-width"));  // ... so the message does not claim otherwise
  CHECK(r.stop_message.rfind("time budget of 10 s spent after " + std::to_string(r.series.samples_s.size()) +
                                 " samples; not met: " + std::to_string(r.analysis.stats.n) +
                                 " samples used < min_samples 20 (" + std::to_string(r.series.samples_s.size()) +
                                 " taken, " + std::to_string(r.analysis.stats.warmup) +
                                 " removed as warm-up by MSER-5)",
                             0) == 0);
  CHECK(any_warning(r, "target not reached: time budget of 10 s spent"));
  const std::string md = kscope::bench_report{{}, {r}}.markdown();
  CHECK(contains(md, "- " + r.stop_message + "\n"));

  SUBCASE("one sample: no interval, and the message says why instead of printing a width") {
    fake_timer slow([](std::size_t, std::size_t) { return 1.0; });
    kscope::bench one = make_bench();
    one.time_budget_s(2);
    const kscope::bench_result q = one.run(slow);
    REQUIRE(q.stopped == kscope::stop_reason::time_budget);
    CHECK(q.stop_message ==
          "time budget of 2 s spent after 1 sample; not met: 1 sample used < min_samples 20; "
          "no median CI: it needs at least 6 samples used, there are 1");
  }
  SUBCASE("a noisy series: the width that missed the target, with the digits to show it") {
    fake_timer noisy_timer(noisy(1e-3, 0.5));
    kscope::bench n = make_bench();
    n.target_rel_ci(0.001).time_budget_s(1.0);
    const kscope::bench_result q = n.run(noisy_timer);
    REQUIRE(q.stopped == kscope::stop_reason::time_budget);
    CHECK(q.analysis.rel_half_width > 0.001);
    CHECK(contains(q.stop_message, "; not met: median CI half-width " +
                                       kscope::detail::format_general(100 * q.analysis.rel_half_width, 3) +
                                       " % > target 0.1 %"));
  }
}

TEST_CASE("stop message: sample_limit, and a limit hit with every condition met is target_reached") {
  fake_timer timer(noisy(1e-3, 0.5));
  kscope::bench b = make_bench();
  kscope::bench_options o;
  o.max_samples = 30;
  o.target_rel_ci = 1e-4;
  b.options(o);
  const kscope::bench_result r = b.run(timer);
  REQUIRE(r.stopped == kscope::stop_reason::sample_limit);
  CHECK(r.stop_message.rfind("sample limit of 30 samples reached; not met: ", 0) == 0);
  CHECK(contains(r.stop_message, "median CI half-width " +
                                     kscope::detail::format_general(100 * r.analysis.rel_half_width, 3) +
                                     " % > target 0.01 %"));
  CHECK(contains(r.stop_message, "the measurement spans "));  // 30 ms < min_time_s 0.5 s, also unmet
  CHECK(any_warning(r, "target not reached: sample limit of 30 samples reached"));

  SUBCASE("the last sample met the target between two scheduled checks") {
    // Noise-free 1 ms samples 1.03 ms apart: checks run at 20, 22, ... samples; the span
    // reaches min_time_s at the 21st, which is also max_samples. The series meets every
    // condition, so "sample limit" would be untrue.
    fake_timer exact([](std::size_t, std::size_t) { return 1e-3; });
    kscope::bench e = make_bench();
    kscope::bench_options eo;
    eo.min_samples = 20;
    eo.min_time_s = 0.0215;
    eo.max_samples = 21;
    e.options(eo);
    const kscope::bench_result q = e.run(exact);
    CHECK(q.series.samples_s.size() == 21);
    CHECK(q.stopped == kscope::stop_reason::target_reached);
    CHECK(q.stop_message.rfind("target reached: ", 0) == 0);
  }
}

TEST_CASE("stop message: error says what failed, and the result carries no numbers") {
  fake_timer timer([](std::size_t, std::size_t) { return std::nan(""); });
  kscope::bench b = make_bench();
  b.set_work({1e9, 1e6}).peaks(1e15, 1e12);
  const kscope::bench_result r = b.run(timer);
  REQUIRE(r.stopped == kscope::stop_reason::error);
  CHECK_FALSE(r.valid());
  CHECK(r.invalid_reason == "the timer failed on 8 consecutive samples; sampling stopped");
  CHECK(r.stop_message == "error: the timer failed on 8 consecutive samples; sampling stopped");
  CHECK(std::isnan(r.flops_per_s.median));
  const kscope::bench_report report{{}, {r}};
  CHECK_FALSE(report.all_valid());
  const std::string md = report.markdown();
  CHECK(contains(md, "| kernel |  |  | ERROR |"));
  CHECK(contains(md, "- error: the timer failed on 8 consecutive samples"));
  const nlohmann::json j = nlohmann::json::parse(report.json());
  CHECK(j["benchmarks"][0]["valid"] == false);
  CHECK(j["benchmarks"][0]["stop_reason"] == "error");
  CHECK(j["benchmarks"][0]["invalid_reason"] == r.invalid_reason);
}

// ---- invalid results: no work reached the stream, or a rate above the peak ----------

TEST_CASE("invalid: a captured graph with no nodes stops the run at once") {
  fake_timer timer([](std::size_t, std::size_t) { return 1e-6; });
  timer.captured[0] = kscope::batch_capture{0, "the CUDA graph captured from 100 calls on the stream has no nodes"};
  kscope::bench b = make_bench("gemm on the legacy stream");
  b.set_work({2.0 * 4096 * 4096 * 4096, 3.0 * 4 * 4096 * 4096}).peaks(989e12, 4.8e12);
  const kscope::bench_result r = b.run(timer);
  REQUIRE(r.stopped == kscope::stop_reason::invalid);
  CHECK_FALSE(r.valid());
  CHECK(timer.log.size() == 4);  // the discarded call and three estimates; no warm-up, no samples
  CHECK(r.series.samples_s.empty());
  CHECK(r.series.graph_nodes == 0);
  CHECK(r.invalid_reason ==
        "no work reached the benchmark's stream: the CUDA graph captured from 100 calls on the stream has no "
        "nodes. The callable launched on another stream, on the legacy default stream, or launched nothing; it "
        "must launch its work on the cudaStream_t it receives");
  CHECK(r.stop_message == "invalid: " + r.invalid_reason);
  // No rates, no roofline placement, no advice.
  CHECK(std::isnan(r.flops_per_s.median));
  CHECK(std::isnan(r.bytes_per_s.median));
  CHECK_FALSE(r.roofline);
  CHECK_FALSE(any_warning(r, "bound"));

  const kscope::bench_report report{{}, {r}};
  CHECK_FALSE(report.all_valid());
  const std::string md = report.markdown();
  CHECK(contains(md, "| gemm on the legacy stream |  |  | INVALID |  |  | 0 |  |  |  |  |  |\n"));
  CHECK(contains(md, "- INVALID: no work reached the benchmark's stream"));
  CHECK(contains(md, "INVALID: what was timed cannot be the benchmark's work"));
  CHECK(md.find("FLOP/s") == md.rfind("FLOP/s"));  // only in the table's header
  CHECK_FALSE(contains(md, "rates at the median"));
  CHECK_FALSE(contains(md, "roofline"));
  const nlohmann::json j = nlohmann::json::parse(report.json());
  const nlohmann::json& jb = j["benchmarks"][0];
  CHECK(jb["valid"] == false);
  CHECK(jb["stop_reason"] == "invalid");
  CHECK(jb["invalid_reason"] == r.invalid_reason);
  CHECK(jb["rates"]["flops_per_s"]["median"].is_null());
  CHECK(jb["roofline"].is_null());
  CHECK(jb["measurement"]["time_s"]["median"].is_null());
  CHECK(jb["measurement"]["graph_nodes"] == 0);
  const auto rows = parse_csv(report.csv());
  REQUIRE(rows.size() == 2);
  const std::vector<std::string>& header = rows[0];
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "valid") CHECK(rows[1][i] == "false");
    if (header[i] == "stop_reason") CHECK(rows[1][i] == "invalid");
    if (header[i] == "median_s" || header[i] == "flops_per_s") CHECK(rows[1][i].empty());
  }
}

TEST_CASE("reference: a ratio of medians outside its own interval says why") {
  using kscope::detail::harness::ratio_outside_interval_note;
  // Two timings that differ in shape, not in scale: the reference has 10 samples at 1 ms and
  // 11 at 2 ms (median 2), the benchmark 11 at 1 ms and 10 at 2 ms (median 1). The medians'
  // ratio is 0.5; of the 441 pairwise log differences, 220 are 0 and the middle of them, so
  // the typical ratio's interval sits at 1 and leaves 0.5 out.
  std::vector<double> reference(10, 1e-3), mine(11, 1e-3);
  reference.insert(reference.end(), 11, 2e-3);
  mine.insert(mine.end(), 10, 2e-3);
  const kscope::comparison split = kscope::compare(reference, mine);
  CHECK(split.ratio == doctest::Approx(0.5));
  REQUIRE(std::isfinite(split.ratio_ci.lo));
  CHECK(split.ratio_ci.lo > 0.5);
  const std::string note = ratio_outside_interval_note(split);
  CHECK(note.find("0.500") != std::string::npos);
  CHECK(note.find("differ in shape") != std::string::npos);
  CHECK(note.find("95 %") != std::string::npos);

  // A pure change of scale: the two estimates agree, nothing to say.
  std::vector<double> scaled;
  for (double t : reference) scaled.push_back(0.25 * t);
  const kscope::comparison shift = kscope::compare(reference, scaled);
  CHECK(shift.ratio == doctest::Approx(0.25));
  CHECK(ratio_outside_interval_note(shift).empty());

  // No interval (too few samples, NaN): nothing is claimed, so nothing to reconcile.
  kscope::comparison none;
  none.ratio = 0.5;
  CHECK(ratio_outside_interval_note(none).empty());
}

TEST_CASE("invalid: a time no longer than the empty stream's, with the margin documented") {
  // Empty sample 2 us: the limit is 1.2 x 2 us + 0.3 us = 2.7 us per sample.
  CHECK(kscope::detail::harness::no_work_limit_s(2e-6) == doctest::Approx(2.7e-6));
  CHECK(kscope::detail::harness::no_work_limit_s(std::nan("")) == 0);

  SUBCASE("at the first estimate: 2.6 us single calls, nothing else is run") {
    fake_timer timer([](std::size_t, std::size_t) { return 2.6e-6; });
    timer.empty_s = 2e-6;
    const kscope::bench_result r = make_bench().run(timer);
    REQUIRE(r.stopped == kscope::stop_reason::invalid);
    CHECK(timer.empty_requests == 1);
    CHECK(timer.log.size() == 4);
    CHECK(timer.prepared.empty());
    CHECK(r.empty_stream_s == 2e-6);
    CHECK(contains(r.invalid_reason, "no work reached the benchmark's stream: a single call (median of 3) took 2.60 us, "
                                     "no longer than an empty sample on the stream (2.00 us; the limit is 1.2 x that + "
                                     "300 ns). The callable launched on another stream"));
    const nlohmann::json j = nlohmann::json::parse(kscope::bench_report{{}, {r}}.json());
    CHECK(j["benchmarks"][0]["empty_stream_s"].get<double>() == 2e-6);
  }
  SUBCASE("just above the limit is real work: batched and valid") {
    fake_timer timer([](std::size_t, std::size_t) { return 2.8e-6; });
    timer.empty_s = 2e-6;
    const kscope::bench_result r = make_bench().run(timer);
    CHECK(r.valid());
    CHECK(r.stopped == kscope::stop_reason::target_reached);
    CHECK(r.series.launches_per_sample == 36);  // ceil(100 us / 2.8 us)
  }
  SUBCASE("a zero time is no work even when the empty time is unknown") {
    fake_timer timer([](std::size_t, std::size_t) { return 0.0; });
    const kscope::bench_result r = make_bench().run(timer);
    REQUIRE(r.stopped == kscope::stop_reason::invalid);  // not "error": the timer did measure
    CHECK(contains(r.invalid_reason, "a single call (median of 3) took 0 s: nothing ran between the events"));
  }
  SUBCASE("on the final median: a callable that stops putting work on the stream") {
    // Real 1 ms launches during the estimate and warm-up, then samples as short as an
    // empty one: what the stream saw at the end was not the benchmark.
    fake_timer timer([](std::size_t, std::size_t k) { return k < 40 ? 1e-3 : 1e-6; });
    timer.empty_s = 1e-6;
    const kscope::bench_result r = make_bench().run(timer);
    REQUIRE(r.stopped == kscope::stop_reason::invalid);
    CHECK(contains(r.invalid_reason, "the median sample of 1 call took 1.00 us, no longer than an empty sample"));
    CHECK(r.stop_message == "invalid: " + r.invalid_reason);
  }
}

TEST_CASE("invalid: the reference's work did not reach its stream") {
  fake_timer timer([](std::size_t, std::size_t) { return 1e-3; });
  timer.captured[1] = kscope::batch_capture{-1, "capturing 2 calls into a CUDA graph failed with a launch: "
                                                "cudaErrorStreamCaptureImplicit (...)"};
  kscope::bench ref{"cuBLAS", [](kscope::bench_stream) {}};
  kscope::bench mine{"tiled", [](kscope::bench_stream) {}};
  mine.reference(ref);
  const kscope::bench_result r = mine.run(timer);
  REQUIRE(r.stopped == kscope::stop_reason::invalid);
  CHECK(r.invalid_reason.rfind("no work reached the stream of the reference 'cuBLAS': capturing 2 calls", 0) == 0);
  REQUIRE(r.reference);
  CHECK(std::isnan(r.reference->relative_speed));  // no reference ratio
  CHECK(r.reference->versus.result == kscope::verdict::inconclusive);
  CHECK_FALSE(contains(kscope::bench_report{{}, {r}}.markdown(), "% of cuBLAS"));
}

TEST_CASE("invalid: rates above the peak by more than 10 %") {
  auto run_at = [](double seconds, kscope::work w, kscope::cache_mode cache, std::size_t launches = 1) {
    fake_timer timer([seconds](std::size_t, std::size_t) { return seconds; });
    kscope::bench b = make_bench("rate");
    b.set_work(w).peaks(1000e12, 4e12).launches_per_sample(launches);
    if (cache == kscope::cache_mode::cold) b.cold();
    return b.run(timer);
  };
  const auto hot = kscope::cache_mode::hot, cold = kscope::cache_mode::cold;
  // FLOP/s: 1.05 x the peak passes (clock and rounding margin), 1.2 x does not.
  CHECK(run_at(1e-3, {1.05e12, 0}, hot).valid());
  const kscope::bench_result over = run_at(1e-3, {1.2e12, 0}, hot);
  REQUIRE(over.stopped == kscope::stop_reason::invalid);
  CHECK(over.invalid_reason ==
        "the median time, 1.000 ms per launch, implies 1.20 PFLOP/s, over the given 1.00 PFLOP/s compute peak "
        "(bench::peaks) by more than 10 %: what was timed cannot be the declared work. Either no work reached the "
        "stream that was timed (the callable launched on another stream, on the legacy default stream, or launched "
        "nothing) or set_work declares more work than one launch does");
  CHECK(std::isnan(over.flops_per_s.median));
  CHECK_FALSE(over.roofline);
  // Bytes, cold L2 and one launch per sample: the DRAM peak applies.
  CHECK(run_at(1e-3, {0, 4.2e9}, cold).valid());
  const kscope::bench_result dram = run_at(1e-3, {0, 4.6e9}, cold);
  REQUIRE(dram.stopped == kscope::stop_reason::invalid);
  CHECK(contains(dram.invalid_reason, "implies 4.60 TB/s, over the 4.00 TB/s DRAM peak by more than 10 % with every "
                                      "launch starting from a cold L2"));
  // Hot L2 (or batched cold launches): L2 may serve more than DRAM; only 20 x is impossible.
  CHECK(run_at(1e-3, {0, 4.6e9}, hot).valid());
  CHECK(run_at(1e-3, {0, 4.6e9}, cold, 4).valid());
  CHECK(run_at(1e-3, {0, 80e9}, hot).valid());
  const kscope::bench_result l2 = run_at(1e-3, {0, 90e9}, hot);
  REQUIRE(l2.stopped == kscope::stop_reason::invalid);
  CHECK(contains(l2.invalid_reason, "implies 90.0 TB/s, over 22 x the 4.00 TB/s DRAM peak (more than any L2 serves)"));
}

namespace {

kscope::device_info fake_h200() {
  kscope::device_info d;
  d.present = true;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.sm_clock_khz = 1'980'000;
  d.memory_clock_khz = 3'201'000;
  d.memory_bus_width_bits = 6016;
  d.l2_bytes = 50331648;
  return d;
}

}  // namespace

TEST_CASE("invalid: the reported case, a 3.8 ms bf16 GEMM read as 16 ns, against a device's roofs") {
  // The user's numbers: 8192^3 bf16 in 16 ns is 68.7 EFLOP/s per launch. Whatever the
  // timer's other evidence, the rate alone rules it out, under the bf16 roof ...
  const double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  fake_timer timer([](std::size_t, std::size_t) { return 16e-9; });
  kscope::bench b = make_bench("gemm");
  b.dtype("bf16").set_work({flops, 3.0 * 2 * 8192 * 8192});
  const kscope::bench_result r = b.run(timer, fake_h200());
  REQUIRE(r.stopped == kscope::stop_reason::invalid);
  CHECK(contains(r.invalid_reason, "bf16 tensor peak by more than 10 %"));
  CHECK_FALSE(r.roofline);
  CHECK(std::isnan(r.flops_per_s.median));
  const std::string md = kscope::bench_report{{}, {r}}.markdown();
  CHECK_FALSE(contains(md, "EFLOP/s |"));  // no rate in the table
  CHECK_FALSE(contains(md, "% of the roof"));

  // ... and, with no dtype, under the device's fastest roof (no work runs faster).
  fake_timer t2([](std::size_t, std::size_t) { return 16e-9; });
  kscope::bench untagged = make_bench("gemm");
  untagged.set_work({flops, 0});
  const kscope::bench_result q = untagged.run(t2, fake_h200());
  REQUIRE(q.stopped == kscope::stop_reason::invalid);
  CHECK(contains(q.invalid_reason, "over the device's fastest roof ("));
}

TEST_CASE("an untagged GEMM over the fp32 default roof but under the device's fastest is valid, not placed") {
  // 8192^3 in 3.8 ms: 289 TFLOP/s, over the H200's 67 TFLOP/s fp32 plain roof (the default
  // for no dtype) but possible on tensor cores: a true number, with no false "% of roof".
  const double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  fake_timer timer(noisy(3.8e-3, 0.001));
  kscope::bench b = make_bench("gemm");
  b.set_work({flops, 0});
  const kscope::bench_result r = b.run(timer, fake_h200());
  CHECK(r.valid());
  CHECK(r.flops_per_s.median == doctest::Approx(flops / 3.8e-3).epsilon(0.01));
  CHECK_FALSE(r.roofline);
  CHECK(any_warning(r, "fp32 plain-core roof assumed for no dtype: the work ran on faster units"));
}

TEST_CASE("all_valid(): the exit code of a benchmark program") {
  fake_timer good_timer(noisy(1e-3, 0.002));
  fake_timer empty_timer([](std::size_t, std::size_t) { return 0.0; });
  kscope::bench b = make_bench();
  kscope::bench_report report{{}, {b.run(good_timer)}};
  CHECK(report.all_valid());
  report.results.push_back(b.run(empty_timer));
  CHECK_FALSE(report.all_valid());
}

// ---- the Google Benchmark adapter's exit code (bench/gbench.hpp) -------------------
// gbench.hpp needs Google Benchmark to compile; the decision it takes at exit lives in
// detail/gbench_status.hpp, tested here.

TEST_CASE("gbench: a GPU benchmark that could not run makes the exit code non-zero unless allowed") {
  using namespace kscope::detail::harness;
  gbench_failure_record record;
  CHECK(gbench_exit_code(record.count(), false) == 0);
  CHECK(gbench_failure_summary(record, false).empty());

  record.add("no GPU: no CUDA device; GPU benchmark skipped");
  record.add("no GPU: no CUDA device; GPU benchmark skipped");  // the same benchmark, tried again
  record.add("invalid: no work reached the benchmark's stream: ...");
  CHECK(record.count() == 3);
  REQUIRE(record.messages().size() == 2);
  CHECK(record.messages()[0].second == 2);
  CHECK(gbench_exit_code(record.count(), false) == 1);
  CHECK(gbench_exit_code(record.count(), true) == 0);
  CHECK(gbench_failure_summary(record, false) ==
        "kscope: 3 GPU benchmark runs could not be measured:\n"
        "  - no GPU: no CUDA device; GPU benchmark skipped (2 times)\n"
        "  - invalid: no work reached the benchmark's stream: ...\n"
        "kscope: exit code 1; set KSCOPE_GBENCH_ALLOW_SKIP=1 to exit 0 when GPU benchmarks cannot run\n");
  CHECK(contains(gbench_failure_summary(record, true), "kscope: exit code 0: skipping is allowed"));
  record.clear();
  CHECK(gbench_exit_code(record.count(), false) == 0);

  // The opt-out: KSCOPE_GBENCH_ALLOW_SKIP=1 (or true/yes/on), or gbench_allow_skip().
  CHECK(allow_skip_value("1"));
  CHECK(allow_skip_value("TRUE"));
  CHECK(allow_skip_value("on"));
  CHECK_FALSE(allow_skip_value(nullptr));
  CHECK_FALSE(allow_skip_value(""));
  CHECK_FALSE(allow_skip_value("0"));
  CHECK_FALSE(allow_skip_value("no"));
  gbench_failures().allow_skip(true);
  CHECK(skip_allowed());
  gbench_failures().allow_skip(false);
}

// ---- hardware counters (bench::counters), through a fake counter source -------------

namespace {

// Returns a prepared pass, after making the one call the bench hands it; records when it
// was asked (how many samples the timer had given by then).
struct fake_counter_source final : kscope::bench_counter_source {
  kscope::counter_result prepared;
  const fake_timer* timer = nullptr;
  std::size_t profiles = 0;
  std::size_t timer_samples_when_profiled = 0;
  std::vector<std::string> metrics_asked;

  kscope::counter_result profile(const std::vector<std::string>& metrics, const std::function<void()>& call) override {
    ++profiles;
    if (timer) timer_samples_when_profiled = timer->log.size();
    metrics_asked = metrics;
    call();
    return prepared;
  }

  // The warp-stall pass: what `stalls` holds (nullopt: this source takes none).
  std::optional<kscope::bench_warp_stalls> stalls;
  std::size_t stall_passes = 0;
  std::optional<kscope::bench_warp_stalls> warp_stalls(const std::function<void()>& call) override {
    ++stall_passes;
    if (stalls) call();  // a source that samples runs the call; one that cannot does not
    return stalls;
  }
};

// One kernel's counters under the default set's names: `dram` bytes each way, no FP
// instruction, the given duration and speed-of-light throughputs.
kscope::counter_values copy_kernel_values(std::size_t index, double duration_ns, double dram_each_way,
                                          double memory_pct, double sm_pct) {
  kscope::counter_values k;
  k.index = index;
  k.range = std::to_string(index);
  k.name = "copy_kernel(float const*, float*, unsigned long)";
  k.values = {{"gpu__time_duration.sum", duration_ns},
              {"dram__bytes_read.sum", dram_each_way},
              {"dram__bytes_write.sum", dram_each_way},
              {"lts__t_bytes.sum", 2.1 * dram_each_way},
              {"l1tex__t_bytes.sum", 2.0 * dram_each_way},
              {"sm__throughput.avg.pct_of_peak_sustained_elapsed", sm_pct},
              {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", memory_pct},
              {"dram__throughput.avg.pct_of_peak_sustained_elapsed", memory_pct},
              {"lts__throughput.avg.pct_of_peak_sustained_elapsed", 0.6 * memory_pct},
              {"l1tex__throughput.avg.pct_of_peak_sustained_active", 0.3 * memory_pct},
              {"sm__warps_active.avg.pct_of_peak_sustained_active", 80}};
  for (const char* op : {"fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma"})
    k.values[std::string("sm__sass_thread_inst_executed_op_") + op + "_pred_on.sum"] = 0;
  return k;
}

// Two kernels: 400 us moving 2 x 1 GB at 90 % memory throughput, 100 us moving 2 x 0.25 GB
// at 70 %. Per call: DRAM 2.5 GB, memory throughput (90 x 400 + 70 x 100) / 500 = 86 %.
kscope::counter_result two_copy_kernels() {
  kscope::counter_result r;
  r.state = kscope::counter_state::collected;
  r.message = "hardware counters: 21 metrics for 2 kernels in 19 replay passes on GH100 (CUPTI 130000)";
  r.passes = 19;
  r.kernels = {copy_kernel_values(0, 400e3, 1e9, 90, 20), copy_kernel_values(1, 100e3, 0.25e9, 70, 10)};
  r.notes = {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed (tensor) is not offered: left out"};
  return r;
}

std::string csv_column(const std::string& csv, const std::string& name, std::size_t row = 1) {
  const auto rows = parse_csv(csv);
  for (std::size_t i = 0; i < rows[0].size(); ++i)
    if (rows[0][i] == name) return rows.at(row).at(i);
  FAIL("no column " << name);
  return {};
}

}  // namespace

TEST_CASE("counters: one profiled call after the timed samples, its kernels aggregated into the result") {
  int calls = 0;
  kscope::bench b{"copy", [&calls](kscope::bench_stream) { ++calls; }};
  b.set_work({0, 2.5e9}).peaks(60e12, 4.8e12);

  fake_timer plain_timer(noisy(1e-3, 0.002));
  const kscope::bench_result plain = b.run(plain_timer);
  CHECK_FALSE(plain.counters);  // not asked for

  fake_timer timer(noisy(1e-3, 0.002));
  auto source = std::make_shared<fake_counter_source>();
  source->prepared = two_copy_kernels();
  source->timer = &timer;
  b.counters().counter_source(source);
  CHECK(b.counters_enabled());
  const kscope::bench_result r = b.run(timer);
  REQUIRE(r.valid());

  // One call, after every timed sample, and nothing of it in the statistics: the same
  // samples, median and interval as the run without counters.
  CHECK(source->profiles == 1);
  CHECK(calls == 1);  // the fake timer never calls the callable: this is the profiled call
  CHECK(source->timer_samples_when_profiled == timer.log.size());
  CHECK(source->metrics_asked.empty());  // the default set
  CHECK(r.series.samples_s == plain.series.samples_s);
  CHECK(r.median_s() == plain.median_s());
  CHECK(r.median_ci_s().lo == plain.median_ci_s().lo);
  CHECK(r.bytes_per_s.median == plain.bytes_per_s.median);

  REQUIRE(r.counters);
  const kscope::bench_counters& c = *r.counters;
  CHECK(c.collected());
  CHECK(c.state == "collected");
  CHECK(c.kernels == 2);
  CHECK(c.passes == 19);
  CHECK(c.kernel_names.size() == 2);
  CHECK(c.notes.size() == 1);
  CHECK(c.metrics.at("dram__bytes_read.sum") == 1.25e9);
  CHECK(c.metrics.at("gpu__time_duration.sum") == 500e3);
  CHECK(c.metrics.at("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed") == doctest::Approx(86));
  CHECK(c.metrics.at("sm__throughput.avg.pct_of_peak_sustained_elapsed") == doctest::Approx(18));
  REQUIRE(c.measured);
  REQUIRE(c.measured->find(kscope::memory_level::dram));
  CHECK(c.measured->find(kscope::memory_level::dram)->bytes == 2.5e9);
  CHECK(c.measured->find(kscope::memory_level::l2)->bytes == doctest::Approx(2.1 * 1.25e9));
  CHECK(c.measured->flops.total == 0);
  CHECK(c.measured->seconds == doctest::Approx(500e-6));
  // 2.5 GB in the kernels' 500 us: 5 TB/s against the 4.8 TB/s bandwidth given.
  CHECK(c.measured->find(kscope::memory_level::dram)->fraction_of_bandwidth == doctest::Approx(5e12 / 4.8e12));
  // Declared 2.5 GB: it agrees, so no line.
  REQUIRE(c.declared_vs_measured);
  CHECK_FALSE(c.declared_vs_measured->bytes_differ);
  CHECK(c.declared_vs_measured->text.empty());
  REQUIRE(c.classified);
  CHECK(c.classified->verdict.kind == kscope::bottleneck::memory);
  CHECK(c.classified->verdict.where == "DRAM");
  // No graph was captured: whether copies share the span is unknown, so no launch check.
  bool launch_unchecked = false;
  for (const std::string& m : c.classified->missing) launch_unchecked |= contains(m, "launch gaps not checked");
  CHECK(launch_unchecked);

  SUBCASE("metrics asked for by name reach the source") {
    fake_timer t2(noisy(1e-3, 0.002));
    auto named = std::make_shared<fake_counter_source>();
    named->prepared = two_copy_kernels();
    kscope::bench n{"copy", [](kscope::bench_stream) {}};
    n.counter_source(named).counters({"dram__bytes_read.sum", "dram__bytes_write.sum"});
    const kscope::bench_result q = n.run(t2);
    CHECK(named->metrics_asked == std::vector<std::string>{"dram__bytes_read.sum", "dram__bytes_write.sum"});
    REQUIRE(q.counters);
    CHECK(q.counters->requested == named->metrics_asked);
    CHECK_FALSE(q.counters->declared_vs_measured);  // no work declared: nothing to compare
  }
}

TEST_CASE("counters: the warp-stall pass joins the classification, on by default, off when asked") {
  // A call whose kernels sit under both roofs, 31 of 32 warps waiting at a barrier.
  kscope::counter_result pass = two_copy_kernels();
  for (kscope::counter_values& k : pass.kernels) {
    k.values["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] = 20;
    k.values["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 20;
    k.values["lts__throughput.avg.pct_of_peak_sustained_elapsed"] = 12;
    k.values["l1tex__throughput.avg.pct_of_peak_sustained_active"] = 6;
  }
  auto source = std::make_shared<fake_counter_source>();
  source->prepared = pass;
  kscope::bench_warp_stalls stalls;
  stalls.collected = true;
  stalls.message = "warp stalls: 40000 samples in 2 kernel launches";
  stalls.samples = 40000;
  stalls.shares = {{"barrier", 0.73, "warps wait at a block barrier"}, {"long_scoreboard", 0.1}};
  source->stalls = stalls;

  fake_timer timer(noisy(1e-3, 0.002));
  kscope::bench b = make_bench("barrier");
  b.counter_source(source);
  const kscope::bench_result r = b.run(timer);
  CHECK(source->stall_passes == 1);
  REQUIRE(r.counters);
  REQUIRE(r.counters->warp_stalls);
  REQUIRE(r.counters->classified);
  CHECK(r.counters->classified->verdict.kind == kscope::bottleneck::latency);
  CHECK(contains(r.counters->classified->verdict.text, "dominant stall: barrier 73% of the warp samples"));
  const std::string md = kscope::bench_report{{}, {r}}.markdown();
  CHECK(contains(md, "- warp stalls (one more call, PC sampling, never timed): warp stalls: 40000 samples"));
  const nlohmann::json j = nlohmann::json::parse(kscope::bench_report{{}, {r}}.json());
  CHECK(j["benchmarks"][0]["counters"]["warp_stalls"]["samples"] == 40000);
  CHECK(j["benchmarks"][0]["counters"]["warp_stalls"]["shares"][0]["reason"] == "barrier");

  SUBCASE("a pass that sampled nothing is named as missing evidence") {
    kscope::bench_warp_stalls none;
    none.message = "warp stalls unavailable: no permission";
    source->stalls = none;
    fake_timer t2(noisy(1e-3, 0.002));
    const kscope::bench_result q = make_bench("barrier").counter_source(source).run(t2);
    REQUIRE(q.counters->classified);
    bool named = false;
    for (const std::string& m : q.counters->classified->missing)
      named |= contains(m, "warp stalls: warp stalls unavailable: no permission");
    CHECK(named);
  }
  SUBCASE("off when asked: no extra call") {
    fake_timer t2(noisy(1e-3, 0.002));
    const std::size_t before = source->stall_passes;
    const kscope::bench_result q = make_bench("barrier").counter_source(source).warp_stalls(false).run(t2);
    CHECK(source->stall_passes == before);
    CHECK_FALSE(q.counters->warp_stalls);
  }
}

TEST_CASE("counters: declared work that differs from the measured by more than 10 % gets one line") {
  fake_timer timer(noisy(1e-3, 0.002));
  auto source = std::make_shared<fake_counter_source>();
  source->prepared = two_copy_kernels();
  kscope::bench b = make_bench("copy");
  b.set_work({2e9, 1e9}).peaks(60e12, 4.8e12).counter_source(source);  // 1 GB declared, 2.5 GB moved; 2 GFLOP, none
  const kscope::bench_result r = b.run(timer);
  REQUIRE(r.counters);
  REQUIRE(r.counters->declared_vs_measured);
  const kscope::work_check& d = *r.counters->declared_vs_measured;
  CHECK(d.bytes_differ);
  CHECK(d.bytes_ratio == doctest::Approx(2.5));
  CHECK(d.flops_differ);
  CHECK(contains(d.text, "declared 1.00 GB, DRAM moved 2.50 GB: 2.5\xC3\x97"));
  CHECK(contains(d.text, "declared 2.00 GFLOP, executed "));
  const std::string md = kscope::bench_report{{}, {r}}.markdown();
  CHECK(contains(md, "- declared vs measured (per call, over 10 % apart): declared 1.00 GB, DRAM moved 2.50 GB"));

  // Within 10 % (2.4 GB declared, 2.5 GB moved): no line.
  fake_timer t2(noisy(1e-3, 0.002));
  kscope::bench close = make_bench("copy");
  close.set_work({0, 2.4e9}).peaks(60e12, 4.8e12).counter_source(source);
  const kscope::bench_result q = close.run(t2);
  REQUIRE(q.counters);
  CHECK(q.counters->declared_vs_measured->text.empty());
  CHECK_FALSE(contains(kscope::bench_report{{}, {q}}.markdown(), "declared vs measured"));
}

TEST_CASE("counters: markdown columns and notes, JSON object, CSV columns") {
  fake_timer timer(noisy(1e-3, 0.002));
  auto source = std::make_shared<fake_counter_source>();
  source->prepared = two_copy_kernels();
  kscope::bench b = make_bench("copy");
  b.set_work({0, 2.5e9}).peaks(60e12, 4.8e12).counter_source(source);
  const kscope::bench_result r = b.run(timer);
  fake_timer t2(noisy(1e-3, 0.002));
  const kscope::bench_result plain = make_bench("plain").run(t2);
  const kscope::bench_report report{{}, {r, plain}};

  const std::string md = report.markdown();
  CHECK(contains(md, "| vs reference | DRAM B | FLOP (meas.) | bound |\n"));
  CHECK(contains(md, " | 2.50 GB | 0 FLOP | memory (DRAM) |\n"));
  CHECK(contains(md, "|  |  |  |\n"));  // the result without counters: empty measured cells
  CHECK(contains(md, "- counters (profiled after the timed samples, never timed): hardware counters: 21 metrics for 2 kernels"));
  CHECK(contains(md, "- counters note: sm__pipe_tensor_cycles_active"));
  CHECK(contains(md, "- measured: 0.00 FLOP none (no FP instructions) in 500 us"));
  CHECK(contains(md, "DRAM 2.50 GB"));
  // One conclusion per row, the counters' (they decided), its evidence under it.
  CHECK_MESSAGE(contains(md, "- verdict: memory-bound (DRAM), from hardware counters over 1 profiled call; busiest unit "),
                md);
  CHECK(contains(md, "\n  - memory-bound: DRAM at 86% of its peak "
                     "(dram__throughput.avg.pct_of_peak_sustained_elapsed = 86)"));
  CHECK_MESSAGE(contains(md, "\n  - declared work (" ), md);
  CHECK_FALSE(contains(md, "bound (measured)"));
  CHECK_FALSE(contains(md, "- also: "));
  // A table without counters keeps its columns.
  CHECK_FALSE(contains(kscope::bench_report{{}, {plain}}.markdown(), "DRAM B"));
  // The declared point keeps its numbers but leaves the bound to the counters: one verdict.
  CHECK(contains(md, "of the roof (" ));
  CHECK(contains(md, "at this intensity), from the declared work"));
  CHECK_FALSE(contains(md, "- roofline: intensity 0 flop/B, 52.1 % of the roof (0 FLOP/s at this intensity), memory-bound"));
  // One row, one verdict: the roof column shows the declared point's share, not a limiter
  // beside the measured bound.
  CHECK_MESSAGE(contains(md, "% of roof |"), md);
  CHECK_FALSE(contains(md, "% memory |"));
  CHECK_FALSE(contains(md, "% latency |"));

  const nlohmann::json j = nlohmann::json::parse(report.json());
  const nlohmann::json& c = j["benchmarks"][0]["counters"];
  CHECK(j["benchmarks"][1]["counters"].is_null());
  CHECK(c["state"] == "collected");
  CHECK(c["kernels"] == 2);
  CHECK(c["passes"] == 19);
  CHECK(c["kernel_names"].size() == 2);
  CHECK(c["requested"].empty());
  CHECK(c["metrics"]["dram__bytes_read.sum"] == 1.25e9);
  CHECK(c["measured"]["flops"] == 0);
  CHECK(c["measured"]["precision"] == "none (no FP instructions)");
  CHECK(c["measured"]["levels"][0]["level"] == "DRAM");
  CHECK(c["measured"]["levels"][0]["bytes"] == 2.5e9);
  CHECK(c["measured"]["levels"][0]["roof_bytes_per_s"] == 4.8e12);
  CHECK(c["measured"]["levels"][1]["roof_bytes_per_s"].is_null());  // no L2 roof known here
  CHECK(c["declared_vs_measured"]["bytes_differ"] == false);
  CHECK(c.find("classification") == c.end());  // the row's one conclusion is its verdict
  for (const auto& level : c["measured"]["levels"]) CHECK(level.find("bound") == level.end());
  const nlohmann::json& v = j["benchmarks"][0]["verdict"];
  CHECK(v["class"] == "memory-bound");
  CHECK(v["unit"] == "DRAM");
  CHECK(v["source"] == "hardware counters");
  REQUIRE(v["evidence"].size() == 2);  // the counters, and the declared work that agrees
  CHECK(v["evidence"][1]["source"] == "declared work");
  CHECK(j["benchmarks"][1]["verdict"].is_null());  // no counters, no declared work
  bool evidence = false;
  for (const auto& e : v["evidence"][0]["facts"])
    evidence |= e["metric"] == "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed" &&
                std::fabs(e["value"].get<double>() - 86) < 1e-9 && e["unit"] == "%";
  CHECK(evidence);

  const std::string csv = report.csv();
  CHECK(csv_column(csv, "counters_state") == "collected");
  CHECK(std::stod(csv_column(csv, "dram_bytes")) == 2.5e9);
  CHECK(std::stod(csv_column(csv, "l2_bytes")) == doctest::Approx(2.625e9));
  CHECK(std::stod(csv_column(csv, "l1_bytes")) == doctest::Approx(2.5e9));
  CHECK(std::stod(csv_column(csv, "flops_measured")) == 0);
  CHECK(std::stod(csv_column(csv, "sm_throughput_pct")) == doctest::Approx(18));
  CHECK(std::stod(csv_column(csv, "memory_throughput_pct")) == doctest::Approx(86));
  CHECK(csv_column(csv, "bound") == "memory (DRAM)");
  CHECK(csv_column(csv, "bound_source") == "hardware counters");
  CHECK(csv_column(csv, "counters_state", 2).empty());
  CHECK(csv_column(csv, "dram_bytes", 2).empty());
}

TEST_CASE("a bench row whose sources disagree: one conclusion in markdown, JSON and CSV") {
  // Declared work far under both roofs (5 % of the DRAM roof: latency-bound by itself) and
  // counters that measured DRAM at 86 % of its peak: the row says memory-bound, once.
  fake_timer timer(noisy(1e-3, 0.002));
  auto source = std::make_shared<fake_counter_source>();
  source->prepared = two_copy_kernels();
  kscope::bench b = make_bench("copy");
  b.set_work({0, 2.5e8}).peaks(60e12, 4.8e12).counter_source(source);
  const kscope::bench_result r = b.run(timer);
  REQUIRE(r.roofline);
  REQUIRE(r.roofline->limiter == kscope::bound::latency);
  const std::optional<kscope::scope_verdict> v = kscope::bench_verdict(r);
  REQUIRE(v);
  CHECK(v->basis == "hardware counters");
  CHECK(v->verdict.kind == kscope::bottleneck::memory);
  REQUIRE(v->evidence.size() == 2);
  CHECK_FALSE(v->evidence[1].agrees);
  const kscope::bench_report report{{}, {r}};
  // The class words a text holds, each once.
  const auto bound_words = [](const std::string& text) {
    std::vector<std::string> found;
    for (const char* w : {"memory-bound", "compute-bound", "latency-bound", "launch/CPU-bound", "undetermined", "latency"})
      if (text.find(w) != std::string::npos) found.push_back(w);
    return found;
  };
  const std::string md = report.markdown();
  CHECK_MESSAGE(bound_words(md) == std::vector<std::string>{"memory-bound"}, md);
  // ... said in the row's verdict note alone: its headline and its text under it.
  const std::size_t note = md.find("- verdict: ");
  REQUIRE(note != std::string::npos);
  CHECK(md.find("memory-bound") > note);
  CHECK_MESSAGE(contains(md, "- verdict: memory-bound (DRAM), from hardware counters"), md);
  CHECK_MESSAGE(contains(md, "\n  - memory-bound: DRAM at 86% of its peak"), md);
  CHECK_MESSAGE(contains(md, " | memory (DRAM) |\n"), md);
  CHECK_MESSAGE(contains(md, "\n  - declared work ("), md);
  CHECK_MESSAGE(contains(md, ", outweighed): "), md);
  const nlohmann::json j = nlohmann::json::parse(report.json());
  CHECK(j["benchmarks"][0]["verdict"]["class"] == "memory-bound");
  CHECK(j["benchmarks"][0]["verdict"]["evidence"][1]["agrees"] == false);
  std::size_t strings_with_a_class = 0;
  const auto walk = [&](const nlohmann::json& x, const auto& self) -> void {
    if (x.is_object() || x.is_array()) {
      for (const auto& item : x) self(item, self);
    } else if (x.is_string()) {
      strings_with_a_class += !bound_words(x.get<std::string>()).empty();
    }
  };
  walk(j, walk);
  CHECK(strings_with_a_class == 2);  // verdict.class and verdict.text
  const std::string csv = report.csv();
  CHECK(csv_column(csv, "bound") == "memory (DRAM)");
  CHECK(csv_column(csv, "bound_source") == "hardware counters");
  CHECK_MESSAGE(bound_words(csv).empty(), csv);
}

TEST_CASE("counters: an invalid or failed result is never profiled") {
  auto source = std::make_shared<fake_counter_source>();
  source->prepared = two_copy_kernels();

  fake_timer empty_graph([](std::size_t, std::size_t) { return 1e-6; });
  empty_graph.captured[0] = kscope::batch_capture{0, "the CUDA graph captured from 100 calls on the stream has no nodes"};
  kscope::bench b = make_bench("gemm on the legacy stream");
  b.set_work({0, 2.5e9}).counter_source(source);
  const kscope::bench_result invalid = b.run(empty_graph);
  REQUIRE(invalid.stopped == kscope::stop_reason::invalid);

  fake_timer failing([](std::size_t, std::size_t) { return std::nan(""); });
  const kscope::bench_result failed = b.run(failing);
  REQUIRE(failed.stopped == kscope::stop_reason::error);

  // A rate over the peak: invalid after sampling, still not profiled.
  fake_timer fast([](std::size_t, std::size_t) { return 1e-3; });
  kscope::bench over = make_bench("over");
  over.set_work({2e12, 0}).peaks(1e15, 4e12).counter_source(source);
  const kscope::bench_result impossible = over.run(fast);
  REQUIRE(impossible.stopped == kscope::stop_reason::invalid);

  CHECK(source->profiles == 0);
  for (const kscope::bench_result* r : {&invalid, &failed, &impossible}) {
    CHECK_FALSE(r->counters);
    const kscope::bench_report report{{}, {*r}};
    CHECK_FALSE(contains(report.markdown(), "DRAM B"));
    CHECK_FALSE(contains(report.markdown(), "- verdict: "));
    CHECK(nlohmann::json::parse(report.json())["benchmarks"][0]["verdict"].is_null());
    CHECK(nlohmann::json::parse(report.json())["benchmarks"][0]["counters"].is_null());
    CHECK(csv_column(report.csv(), "counters_state").empty());
  }

  // Counters attached by hand to an invalid result are still not printed as true.
  kscope::bench_result forged = invalid;
  forged.counters = kscope::detail::harness::counters_from_pass(two_copy_kernels(), {}, {});
  const kscope::bench_report report{{}, {forged}};
  CHECK_FALSE(contains(report.markdown(), "2.50 GB"));
  CHECK(nlohmann::json::parse(report.json())["benchmarks"][0]["counters"].is_null());
  CHECK(csv_column(report.csv(), "dram_bytes").empty());
}

TEST_CASE("counters: unavailable counters leave one note and the timing as it was") {
  fake_timer plain_timer(noisy(1e-3, 0.002));
  kscope::bench b = make_bench("copy");
  b.set_work({0, 2.5e9}).peaks(60e12, 4.8e12);
  const kscope::bench_result plain = b.run(plain_timer);

  fake_timer timer(noisy(1e-3, 0.002));
  auto source = std::make_shared<fake_counter_source>();
  source->prepared.state = kscope::counter_state::no_permission;
  source->prepared.message =
      "hardware counters unavailable: cuptiProfilerHostInitialize: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES; the GPU "
      "performance counters are restricted to administrators (ERR_NVGPUCTRPERM)";
  b.counter_source(source);
  const kscope::bench_result r = b.run(timer);
  REQUIRE(r.valid());
  CHECK(r.series.samples_s == plain.series.samples_s);
  CHECK(r.median_s() == plain.median_s());
  CHECK(r.warnings == plain.warnings);
  REQUIRE(r.counters);
  CHECK_FALSE(r.counters->collected());
  CHECK(r.counters->state == "no permission");
  CHECK(r.counters->metrics.empty());
  CHECK_FALSE(r.counters->measured);
  CHECK_FALSE(r.counters->classified);

  const kscope::bench_report report{{}, {r}};
  const std::string md = report.markdown();
  std::size_t mentions = 0;
  for (std::size_t at = md.find("ERR_NVGPUCTRPERM"); at != std::string::npos; at = md.find("ERR_NVGPUCTRPERM", at + 1))
    ++mentions;
  CHECK(mentions == 1);
  CHECK(contains(md, "- counters (profiled after the timed samples, never timed): hardware counters unavailable: "));
  CHECK_FALSE(contains(md, "DRAM B"));  // nothing measured: no measured columns
  const nlohmann::json c = nlohmann::json::parse(report.json())["benchmarks"][0]["counters"];
  CHECK(c["state"] == "no permission");
  CHECK(c["measured"].is_null());
  CHECK(c.find("classification") == c.end());
  // The declared work decides; the counters that could not run are named under it, once.
  const nlohmann::json v = nlohmann::json::parse(report.json())["benchmarks"][0]["verdict"];
  CHECK(v["source"] == "declared work");
  CHECK(v["missing"][0] == "hardware counters: no permission (the counters note says why)");
  CHECK(csv_column(report.csv(), "counters_state") == "no permission");
  CHECK(csv_column(report.csv(), "dram_bytes").empty());

  SUBCASE("a call that throws in the profiled pass: state failed, the timing kept") {
    struct throwing_source final : kscope::bench_counter_source {
      kscope::counter_result profile(const std::vector<std::string>&, const std::function<void()>& call) override {
        call();
        return {};
      }
    };
    fake_timer t2(noisy(1e-3, 0.002));
    int calls = 0;
    kscope::bench thrower{"throws when profiled", [&calls](kscope::bench_stream) {
                            if (++calls == 1) throw std::runtime_error("out of device memory");
                          }};
    thrower.counter_source(std::make_shared<throwing_source>());
    const kscope::bench_result q = thrower.run(t2);
    CHECK(q.valid());
    REQUIRE(q.counters);
    CHECK(q.counters->state == "failed");
    CHECK(q.counters->message == "hardware counters not collected: the profiled call threw: out of device memory");
  }
}

TEST_CASE("counters: the timeline is used only when the call's graph holds nothing but the profiled kernels") {
  // Two kernels of 1 us each per 10 us call (batched 10 per sample): the GPU idles 80 %.
  kscope::counter_result pass = two_copy_kernels();
  pass.kernels[0].values["gpu__time_duration.sum"] = 1e3;
  pass.kernels[1].values["gpu__time_duration.sum"] = 1e3;
  auto source = std::make_shared<fake_counter_source>();
  source->prepared = pass;

  fake_timer timer([](std::size_t, std::size_t) { return 10e-6; });
  timer.captured[0] = kscope::batch_capture{20, ""};  // 10 calls x 2 kernels
  kscope::bench b = make_bench("two short kernels");
  b.launches_per_sample(10).counter_source(source);
  const kscope::bench_result r = b.run(timer);
  REQUIRE(r.valid());
  REQUIRE(r.series.graph_nodes == 20);
  REQUIRE(r.counters);
  REQUIRE(r.counters->classified);
  CHECK(r.counters->classified->verdict.kind == kscope::bottleneck::launch);
  CHECK(contains(r.counters->classified->verdict.text, "GPU idle 80%"));

  // A graph with a node more than the kernels (a copy the counters do not see): no timeline.
  fake_timer t2([](std::size_t, std::size_t) { return 10e-6; });
  t2.captured[0] = kscope::batch_capture{30, ""};
  const kscope::bench_result q = b.run(t2);
  REQUIRE(q.counters);
  REQUIRE(q.counters->classified);
  CHECK(q.counters->classified->verdict.kind == kscope::bottleneck::memory);
}

}  // namespace bench_test
