// evidence/pm_samples.hpp: GPU-wide metric samples shared out among the nodes whose
// kernels ran during them, on synthetic samples whose answers are worked out in the
// comments; the clock mapping arithmetic; and (pm_sampling/sampler.hpp) what the sampler
// says without a GPU: its option checks and the unavailable paths.
#include <kscope/evidence/pm_samples.hpp>
#include <kscope/pm_sampling/sampler.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace metric_samples_test {  // one per file: the unit tests build as one program

namespace {

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();
const std::string pct = "dram__throughput.avg.pct_of_peak_sustained_elapsed";  // a mean
const std::string bytes = "dram__bytes_read.sum";                             // a count
const std::vector<std::string> two_metrics = {pct, bytes};

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

kscope::kernel_interval kernel(std::int64_t start, std::int64_t end, kscope::sampled_node node,
                               std::uint32_t device = 0) {
  kscope::kernel_interval k;
  k.start_ns = start;
  k.end_ns = end;
  k.node = node;
  k.device = device;
  return k;
}

kscope::metric_sample sample(std::int64_t start, std::int64_t end, double percent, double byte_count) {
  return {start, end, {percent, byte_count}};
}

}  // namespace

TEST_CASE("metric samples: a sample is shared among nodes by their overlap") {
  // Sample A [0, 100): 80 %, 1000 bytes. Node 1 ran [0, 50), node 2 [50, 100).
  // Sample B [100, 200): 20 %, 0 bytes. Node 1 ran [100, 125); the rest idle.
  const std::vector<kscope::metric_sample> samples = {sample(0, 100, 80, 1000), sample(100, 200, 20, 0)};
  const std::vector<kscope::kernel_interval> kernels = {kernel(0, 50, 1), kernel(50, 100, 2), kernel(100, 125, 1)};
  const kscope::sampled_metrics_report r = kscope::attribute_samples(two_metrics, samples, kernels);

  REQUIRE(r.nodes.size() == 2);
  const kscope::node_sampled_metrics* one = r.find(1);
  const kscope::node_sampled_metrics* two = r.find(2);
  REQUIRE(one != nullptr);
  REQUIRE(two != nullptr);
  CHECK(r.find(3) == nullptr);

  // Node 1: 50 ns of A at 80 % and 25 ns of B at 20 %: (50*80 + 25*20) / 75 = 60 %.
  CHECK(one->samples == 2);
  CHECK(one->attributed_ns == doctest::Approx(75));
  CHECK(one->kernel_ns == doctest::Approx(75));
  CHECK(one->values[0].mean == doctest::Approx(60));
  CHECK(one->values[0].weight_ns == doctest::Approx(75));
  CHECK(std::isnan(one->values[0].total));  // a percentage has no total
  // Bytes: half of A's 1000 and a quarter of B's 0 -> 500; rate (50 * 1e10 + 25 * 0) / 75 per s.
  CHECK(one->values[1].total == doctest::Approx(500));
  CHECK(one->values[1].mean == doctest::Approx(50.0 * 1e10 / 75.0));
  // Idle share: it touched 200 ns of samples, 75 of them idle (B after 125).
  CHECK(one->idle_share() == doctest::Approx(0.375));

  // Node 2: only A's second half.
  CHECK(two->samples == 1);
  CHECK(two->values[0].mean == doctest::Approx(80));
  CHECK(two->values[1].total == doctest::Approx(500));
  CHECK(two->idle_share() == doctest::Approx(0));

  // Device: length-weighted (80 + 20) / 2 = 50 %, busy 125 of 200 ns.
  CHECK(r.device_wide.samples == 2);
  CHECK(r.device_wide.sampled_ns == doctest::Approx(200));
  CHECK(r.device_wide.busy_share() == doctest::Approx(0.625));
  CHECK(r.device_wide.values[0].mean == doctest::Approx(50));
  CHECK(r.device_wide.values[1].total == doctest::Approx(1000));
  CHECK(r.counters.samples_attributed == 2);
  CHECK(r.warnings().empty());
  CHECK(r.is_count == std::vector<bool>{false, true});
  CHECK(r.index_of(bytes) == 1);
  CHECK(r.index_of("nope") == 2);
}

TEST_CASE("metric samples: tracing in windows: untraced sample time is neither busy nor idle") {
  // The example above with the collector traced only over [0, 150): sample B's second half
  // had kernels nobody saw. Busy 125 of the 150 traced ns, not of the 200 sampled.
  const std::vector<kscope::metric_sample> samples = {sample(0, 100, 80, 1000), sample(100, 200, 20, 0)};
  const std::vector<kscope::kernel_interval> kernels = {kernel(0, 50, 1), kernel(50, 100, 2), kernel(100, 125, 1)};
  kscope::sampled_metrics agg(two_metrics);
  agg.set_traced(std::vector<kscope::traced_interval>{{0, 150}});
  for (const kscope::metric_sample& m : samples) agg.add_sample(m.start_ns, m.end_ns, m.values.data());
  for (const kscope::kernel_interval& k : kernels) agg.add_kernel(k);
  agg.attribute_all();
  const kscope::sampled_metrics_report r = agg.report();
  CHECK(r.device_wide.sampled_ns == doctest::Approx(200));
  CHECK(r.device_wide.known_ns == doctest::Approx(150));
  CHECK(r.device_wide.busy_share() == doctest::Approx(125.0 / 150));  // not 0.625: the untraced 50 ns are not idle
  CHECK(r.device_wide.values[0].mean == doctest::Approx(50));        // GPU-wide values count whole
  const kscope::node_sampled_metrics* one = r.find(1);
  REQUIRE(one != nullptr);
  CHECK(one->values[0].mean == doctest::Approx(60));  // its slices are unchanged
  CHECK(one->idle_share() == doctest::Approx(25.0 / 150));  // idle within the traced 150 ns it touched

  // A hand-built device summary with no known time: all of the sampled time.
  kscope::device_sampled_metrics d;
  d.sampled_ns = 100;
  d.busy_ns = 40;
  CHECK(d.busy_share() == doctest::Approx(0.4));
  // Nothing traced at all: no busy share (never 0).
  kscope::sampled_metrics none(two_metrics);
  none.set_traced(std::vector<kscope::traced_interval>{});
  none.add_sample(0, 100, samples[0].values.data());
  none.attribute_all();
  CHECK(std::isnan(none.report().device_wide.busy_share()));
}

TEST_CASE("metric samples: two nodes running side by side split the busy time") {
  // One sample [0, 100) at 40 %. Node 1 ran the whole sample, node 2 [0, 50) beside it:
  // busy 100, overlaps 100 and 50 -> slices 100 * 100/150 and 100 * 50/150.
  const kscope::sampled_metrics_report r = kscope::attribute_samples(
      two_metrics, {sample(0, 100, 40, 900)}, {kernel(0, 100, 1), kernel(0, 50, 2)});
  const kscope::node_sampled_metrics* one = r.find(1);
  const kscope::node_sampled_metrics* two = r.find(2);
  REQUIRE(one != nullptr);
  REQUIRE(two != nullptr);
  CHECK(one->attributed_ns == doctest::Approx(200.0 / 3));
  CHECK(two->attributed_ns == doctest::Approx(100.0 / 3));
  CHECK(one->attributed_ns + two->attributed_ns == doctest::Approx(100));  // slices + idle = sample
  CHECK(one->values[0].mean == doctest::Approx(40));
  CHECK(two->values[0].mean == doctest::Approx(40));
  CHECK(one->values[1].total == doctest::Approx(600));
  CHECK(two->values[1].total == doctest::Approx(300));
  CHECK(one->kernel_ns == doctest::Approx(100));
  CHECK(two->kernel_ns == doctest::Approx(50));
  CHECK(r.device_wide.busy_share() == doctest::Approx(1));
}

TEST_CASE("metric samples: a node's own overlapping kernels count once") {
  // Node 1 on two streams: [0, 60) and [40, 100) -> 100 ns, not 120; node 2 [0, 100).
  const kscope::sampled_metrics_report r = kscope::attribute_samples(
      two_metrics, {sample(0, 100, 10, 0)}, {kernel(0, 60, 1), kernel(40, 100, 1), kernel(0, 100, 2)});
  REQUIRE(r.find(1) != nullptr);
  CHECK(r.find(1)->kernel_ns == doctest::Approx(100));
  CHECK(r.find(1)->attributed_ns == doctest::Approx(50));
  CHECK(r.find(2)->attributed_ns == doctest::Approx(50));
}

TEST_CASE("metric samples: samples before and after every kernel are idle device time") {
  // Kernel [100, 200) of node 1; samples [0, 100), [100, 200), [200, 300). A kernel
  // touching a sample's edge ([100, 200) vs [0, 100)) does not overlap it: [start, end).
  const kscope::sampled_metrics_report r = kscope::attribute_samples(
      two_metrics, {sample(0, 100, 1, 10), sample(100, 200, 90, 1000), sample(200, 300, 3, 30)},
      {kernel(100, 200, 1)});
  REQUIRE(r.nodes.size() == 1);
  CHECK(r.find(1)->samples == 1);
  CHECK(r.find(1)->values[0].mean == doctest::Approx(90));
  CHECK(r.find(1)->idle_share() == doctest::Approx(0));
  CHECK(r.device_wide.samples == 3);
  CHECK(r.device_wide.busy_share() == doctest::Approx(1.0 / 3));
  CHECK(r.device_wide.values[0].mean == doctest::Approx(94.0 / 3));
  CHECK(r.device_wide.values[1].total == doctest::Approx(1040));
}

TEST_CASE("metric samples: input order does not matter") {
  std::vector<kscope::metric_sample> samples;
  std::vector<kscope::kernel_interval> kernels;
  for (int i = 0; i < 200; ++i) samples.push_back(sample(i * 100, i * 100 + 100, i % 7 * 10.0, i * 3.0));
  for (int i = 0; i < 300; ++i) kernels.push_back(kernel(i * 61, i * 61 + 45 + i % 30, static_cast<kscope::sampled_node>(i % 5)));
  const kscope::sampled_metrics_report sorted = kscope::attribute_samples(two_metrics, samples, kernels);
  std::mt19937 rng(7);
  std::shuffle(samples.begin(), samples.end(), rng);
  std::shuffle(kernels.begin(), kernels.end(), rng);
  const kscope::sampled_metrics_report shuffled = kscope::attribute_samples(two_metrics, samples, kernels);
  REQUIRE(sorted.nodes.size() == 5);
  REQUIRE(shuffled.nodes.size() == 5);
  for (std::size_t n = 0; n < sorted.nodes.size(); ++n) {
    CHECK(shuffled.nodes[n].node == sorted.nodes[n].node);
    CHECK(shuffled.nodes[n].samples == sorted.nodes[n].samples);
    CHECK(shuffled.nodes[n].attributed_ns == doctest::Approx(sorted.nodes[n].attributed_ns));
    for (std::size_t m = 0; m < 2; ++m) {
      CHECK(shuffled.nodes[n].values[m].mean == doctest::Approx(sorted.nodes[n].values[m].mean));
      CHECK(shuffled.nodes[n].values[1].total == doctest::Approx(sorted.nodes[n].values[1].total));
    }
  }
  CHECK(shuffled.device_wide.busy_ns == doctest::Approx(sorted.device_wide.busy_ns));
  // Every sample is partitioned: node slices + idle = sampled time.
  double slices = 0;
  for (const auto& n : sorted.nodes) slices += n.attributed_ns;
  CHECK(slices == doctest::Approx(sorted.device_wide.busy_ns));
}

TEST_CASE("metric samples: a NaN value leaves out that metric only") {
  // Node 1 over both samples; the first has no percentage.
  const kscope::sampled_metrics_report r = kscope::attribute_samples(
      two_metrics, {sample(0, 100, nan_value, 100), sample(100, 200, 30, 300)}, {kernel(0, 200, 1)});
  const kscope::node_sampled_metrics* one = r.find(1);
  REQUIRE(one != nullptr);
  CHECK(one->values[0].mean == doctest::Approx(30));
  CHECK(one->values[0].weight_ns == doctest::Approx(100));
  CHECK(one->values[1].total == doctest::Approx(400));
  CHECK(one->values[1].weight_ns == doctest::Approx(200));
  CHECK(one->attributed_ns == doctest::Approx(200));
  CHECK(r.counters.nan_values == 1);
  CHECK(r.device_wide.values[0].mean == doctest::Approx(30));

  // A metric NaN in every sample: no mean, no total, not zero.
  const kscope::sampled_metrics_report all_nan =
      kscope::attribute_samples(two_metrics, {sample(0, 100, nan_value, nan_value)}, {kernel(0, 100, 1)});
  CHECK(std::isnan(all_nan.find(1)->values[0].mean));
  CHECK(std::isnan(all_nan.find(1)->values[1].total));
  CHECK(all_nan.counters.nan_values == 2);

  // A sample with fewer values than metrics: the missing ones are NaN.
  const kscope::sampled_metrics_report short_sample =
      kscope::attribute_samples(two_metrics, {{0, 100, {55.0}}}, {kernel(0, 100, 1)});
  CHECK(short_sample.find(1)->values[0].mean == doctest::Approx(55));
  CHECK(std::isnan(short_sample.find(1)->values[1].mean));
}

TEST_CASE("metric samples: empty inputs") {
  const kscope::sampled_metrics_report none = kscope::attribute_samples(two_metrics, {}, {});
  CHECK(none.nodes.empty());
  CHECK(none.device_wide.samples == 0);
  CHECK(std::isnan(none.device_wide.busy_share()));
  CHECK(std::isnan(none.device_wide.values[0].mean));

  // Samples and no kernel: all idle, no node.
  const kscope::sampled_metrics_report idle =
      kscope::attribute_samples(two_metrics, {sample(0, 100, 0.5, 0), sample(100, 200, 0.5, 0)}, {});
  CHECK(idle.nodes.empty());
  CHECK(idle.device_wide.busy_share() == doctest::Approx(0));
  CHECK(idle.device_wide.values[0].mean == doctest::Approx(0.5));

  // Kernels and no sample: nothing to attribute.
  const kscope::sampled_metrics_report no_samples = kscope::attribute_samples(two_metrics, {}, {kernel(0, 10, 1)});
  CHECK(no_samples.nodes.empty());
  CHECK(no_samples.counters.kernels_seen == 1);

  // No metrics at all still counts time.
  const kscope::sampled_metrics_report no_metrics = kscope::attribute_samples({}, {{0, 100, {}}}, {kernel(0, 40, 1)});
  REQUIRE(no_metrics.find(1) != nullptr);
  CHECK(no_metrics.find(1)->attributed_ns == doctest::Approx(40));
  CHECK(no_metrics.find(1)->idle_share() == doctest::Approx(0.6));
}

TEST_CASE("metric samples: invalid intervals and other devices are counted, not used") {
  kscope::sampled_metrics_limits limits;
  limits.device = 1;
  const kscope::sampled_metrics_report r = kscope::attribute_samples(
      two_metrics, {sample(0, 100, 10, 0), sample(50, 50, 99, 0), sample(60, 40, 99, 0)},
      {kernel(0, 100, 1, 1), kernel(0, 100, 2, 0), kernel(30, 30, 3, 1), kernel(40, 20, 3, 1)}, {}, limits);
  CHECK(r.device == 1);
  CHECK(r.counters.samples_invalid == 2);
  CHECK(r.counters.kernels_invalid == 2);
  CHECK(r.counters.kernels_other_device == 1);
  CHECK(r.counters.kernels_seen == 4);
  REQUIRE(r.nodes.size() == 1);
  CHECK(r.find(1)->values[0].mean == doctest::Approx(10));
  CHECK(contains(r.warnings().front(), "no length"));
}

TEST_CASE("metric samples: per step scope p50 / p90 of per-call means") {
  // Samples of 100 ns at 80, 20, 60, 40 %. Step node 9 calls:
  //   [0, 100) -> 80; [100, 200) -> 20; [50, 150) -> (50*80 + 50*20)/100 = 50;
  //   [200, 400) -> 50; [1000, 1100) -> no sample.
  // Per-call means sorted: 20, 50, 50, 80: p50 = 50, p90 = 50 + 0.7 * 30 = 71 (type 7).
  const std::vector<kscope::metric_sample> samples = {sample(0, 100, 80, 0), sample(100, 200, 20, 0),
                                                      sample(200, 300, 60, 0), sample(300, 400, 40, 0)};
  const std::vector<kscope::step_call> calls = {
      {9, 0, 100}, {9, 100, 200}, {9, 50, 150}, {9, 200, 400}, {9, 1000, 1100}, {4, 0, 400}};
  const kscope::sampled_metrics_report r = kscope::attribute_samples(two_metrics, samples, {}, calls);
  REQUIRE(r.steps.size() == 2);
  CHECK(r.steps[0].node == 4);  // by node id
  const kscope::step_sampled_metrics* step = r.find_step(9);
  REQUIRE(step != nullptr);
  CHECK(step->calls == 4);
  CHECK(step->calls_without_samples == 1);
  CHECK_FALSE(step->calls_subsampled);
  CHECK(step->values[0].calls == 4);
  CHECK(step->values[0].p50 == doctest::Approx(50));
  CHECK(step->values[0].p90 == doctest::Approx(71));
  // The other step: one call over everything: 50 %.
  CHECK(r.find_step(4)->values[0].p50 == doctest::Approx(50));
  CHECK(r.find_step(4)->values[0].p90 == doctest::Approx(50));
  CHECK(r.find_step(5) == nullptr);
}

TEST_CASE("metric samples: folding by watermark gives the all-at-once answer, late input is counted") {
  kscope::sampled_metrics streamed(two_metrics);
  std::vector<kscope::metric_sample> samples;
  std::vector<kscope::kernel_interval> kernels;
  for (int i = 0; i < 100; ++i) samples.push_back(sample(i * 100, i * 100 + 100, i % 10 * 10.0, 100.0 * i));
  for (int i = 0; i < 40; ++i) kernels.push_back(kernel(i * 250 + 10, i * 250 + 180, static_cast<kscope::sampled_node>(1 + i % 3)));
  kernels.push_back(kernel(1000, 9000, 7));  // a long kernel across many folds
  const kscope::sampled_metrics_report whole = kscope::attribute_samples(two_metrics, samples, kernels);

  // Feed in time order, folding every 1000 ns of samples; the contract: every kernel that
  // started before the watermark has been given.
  std::size_t next_kernel = 0;
  std::sort(kernels.begin(), kernels.end(),
            [](const kscope::kernel_interval& a, const kscope::kernel_interval& b) { return a.start_ns < b.start_ns; });
  for (std::size_t i = 0; i < samples.size(); ++i) {
    streamed.add_sample(samples[i].start_ns, samples[i].end_ns, samples[i].values.data());
    const std::int64_t now = samples[i].end_ns;
    while (next_kernel < kernels.size() && kernels[next_kernel].start_ns < now) streamed.add_kernel(kernels[next_kernel++]);
    if (i % 10 == 9) streamed.attribute_until(now - 50);  // the last sample waits
  }
  while (next_kernel < kernels.size()) streamed.add_kernel(kernels[next_kernel++]);
  streamed.attribute_all();
  const kscope::sampled_metrics_report r = streamed.report();
  REQUIRE(r.nodes.size() == whole.nodes.size());
  for (std::size_t n = 0; n < r.nodes.size(); ++n) {
    CHECK(r.nodes[n].samples == whole.nodes[n].samples);
    CHECK(r.nodes[n].attributed_ns == doctest::Approx(whole.nodes[n].attributed_ns));
    CHECK(r.nodes[n].values[0].mean == doctest::Approx(whole.nodes[n].values[0].mean));
  }
  CHECK(r.counters.samples_late == 0);
  CHECK(r.counters.kernels_late == 0);
  CHECK(streamed.pending_samples() == 0);
  CHECK(streamed.pending_kernels() == 0);

  // After a fold up to 5000, input that ended before it is late.
  kscope::sampled_metrics late(two_metrics);
  const double v[] = {1, 1};
  late.add_sample(4000, 5000, v);
  late.attribute_until(5000);
  late.add_sample(4900, 5000, v);       // ended at the watermark: late
  late.add_kernel(kernel(4100, 4200, 1));  // its sample is folded: late
  late.add_kernel(kernel(4500, 5500, 2));  // late for its first half; its second half counts
  late.add_step_call(3, 4000, 4500);
  late.add_sample(5000, 6000, v);       // fine
  late.add_kernel(kernel(5500, 5600, 1));
  late.attribute_all();
  const kscope::sampled_metrics_report lr = late.report();
  CHECK(lr.counters.samples_late == 1);
  CHECK(lr.counters.kernels_late == 2);
  CHECK(lr.counters.step_calls_late == 1);
  CHECK(lr.counters.samples_attributed == 2);
  REQUIRE(lr.find(1) != nullptr);
  CHECK(lr.find(1)->samples == 1);
  REQUIRE(lr.find(2) != nullptr);
  CHECK(lr.find(2)->kernel_ns == doctest::Approx(500));  // [5000, 5500) of the second sample
  CHECK(lr.warnings().size() == 3);
}

TEST_CASE("metric samples: bounded buffers and caps count what they turn away") {
  kscope::sampled_metrics_limits limits;
  limits.max_pending_samples = 2;
  limits.max_pending_kernels = 2;
  limits.max_nodes = 1;
  limits.max_steps = 1;
  limits.max_pending_calls = 1;
  limits.step_call_cap = 3;
  kscope::sampled_metrics agg(two_metrics, limits);
  const double v[] = {50, 10};
  agg.add_sample(0, 100, v);
  agg.add_sample(100, 200, v);
  agg.add_sample(200, 300, v);  // buffer full
  agg.add_kernel(kernel(0, 100, 1));
  agg.add_kernel(kernel(100, 200, 2));
  agg.add_kernel(kernel(150, 200, 3));  // buffer full
  agg.add_step_call(8, 0, 100);
  agg.add_step_call(8, 100, 200);       // pending calls full
  agg.add_step_call(9, 0, 100);         // a second step scope: past max_steps
  agg.attribute_all();
  kscope::sampled_metrics_report r = agg.report();
  CHECK(r.counters.samples_dropped == 1);
  CHECK(r.counters.kernels_dropped == 1);
  CHECK(r.counters.node_slices_over_cap == 1);  // node 2's slice of the second sample
  CHECK(r.counters.step_calls_dropped == 2);
  CHECK(r.nodes.size() == 1);
  CHECK(r.warnings().size() == 4);

  // The step reservoir: 11 calls, 3 kept (uniformly), the count says 11.
  kscope::sampled_metrics_limits few_calls;
  few_calls.step_call_cap = 3;
  kscope::sampled_metrics steps(two_metrics, few_calls);
  for (int i = 0; i < 11; ++i) {
    steps.add_sample(i * 100, 100 + i * 100, v);
    steps.add_step_call(8, i * 100, 100 + i * 100);
  }
  steps.attribute_all();
  r = steps.report();
  const kscope::step_sampled_metrics* step = r.find_step(8);
  REQUIRE(step != nullptr);
  CHECK(step->calls == 11);
  CHECK(step->calls_subsampled);
  CHECK(step->values[0].calls == 3);
  CHECK(step->values[0].p50 == doctest::Approx(50));

  // The memory bound grows with the limits and does not depend on the run's length.
  const kscope::sampled_metrics big(two_metrics);
  CHECK(big.memory_bound_bytes() > agg.memory_bound_bytes());
  CHECK(big.memory_bound_bytes() < std::size_t(64) << 20);  // the defaults stay under 64 MiB
}

TEST_CASE("metric sample buffer: flat storage, capacity, compaction") {
  kscope::metric_sample_buffer b(2, 3);
  const double v1[] = {1, 2}, v2[] = {3, 4}, v3[] = {5, 6};
  CHECK(b.push(0, 10, v1));
  CHECK(b.push(10, 20, v2));
  CHECK(b.push(20, 30, v3));
  CHECK_FALSE(b.push(30, 40, v1));
  CHECK(b.dropped() == 1);
  CHECK(b.size() == 3);
  CHECK(b[1].values[1] == 4);
  CHECK(b[2].length_ns() == 10);
  b.keep_if([](const kscope::metric_sample_view& s) { return s.start_ns != 10; });
  REQUIRE(b.size() == 2);
  CHECK(b[1].start_ns == 20);
  CHECK(b[1].values[0] == 5);
  CHECK(b.memory_bound_bytes() == 3 * (16 + 2 * sizeof(double)));
  b.clear();
  CHECK(b.empty());
  CHECK(b.dropped() == 1);
}

TEST_CASE("sample clock map: offset, fitted scale, and which timeline") {
  using kscope::clock_reading;
  using kscope::sample_clock_map;
  // CUPTI's timeline near 1.7e18 ns (since 1970), steady_clock near 5e12 (since boot).
  const clock_reading first{1'700'000'000'000'000'000, 5'000'000'000'000};
  const sample_clock_map offset = sample_clock_map::from_reading(first);
  CHECK(offset.to_kscope(first.source_ns) == first.kscope_ns);
  CHECK(offset.to_kscope(first.source_ns + 12345) == first.kscope_ns + 12345);
  CHECK(offset.to_kscope(first.source_ns - 20000) == first.kscope_ns - 20000);
  CHECK(sample_clock_map::identity().to_kscope(777) == 777);

  // The source clock runs 1 ppm slow: 1 s of it is 1 s + 1000 ns of steady_clock.
  const clock_reading later{first.source_ns + 1'000'000'000, first.kscope_ns + 1'000'001'000};
  const sample_clock_map fitted = sample_clock_map::from_readings(first, later);
  CHECK(fitted.scale == doctest::Approx(1.000001).epsilon(1e-12));
  CHECK(fitted.to_kscope(first.source_ns + 500'000'000) == first.kscope_ns + 500'000'500);
  CHECK(fitted.to_kscope(later.source_ns) == later.kscope_ns);
  // Too close together to fit: the offset of the first.
  const clock_reading soon{first.source_ns + 1'000'000, first.kscope_ns + 1'000'100};
  CHECK(sample_clock_map::from_readings(first, soon).scale == 1.0);
  // An insane ratio (a clock jump, a wrong reading): offset only.
  const clock_reading jumped{first.source_ns + 1'000'000'000, first.kscope_ns + 3'000'000'000};
  CHECK(sample_clock_map::from_readings(first, jumped).scale == 1.0);
  CHECK(sample_clock_map::from_readings(later, first).scale == 1.0);

  // Which clock the newest sample is on: the one whose "now" it is just before.
  const std::int64_t second = 1'000'000'000;
  CHECK(kscope::detect_sample_timeline(first.source_ns - 30'000, first, second) == kscope::sample_timeline::cupti);
  CHECK(kscope::detect_sample_timeline(first.kscope_ns - 30'000, first, second) == kscope::sample_timeline::kscope);
  CHECK(kscope::detect_sample_timeline(first.kscope_ns + 30'000, first, second) == kscope::sample_timeline::unknown);
  CHECK(kscope::detect_sample_timeline(42, first, second) == kscope::sample_timeline::unknown);
  // CUPTI's clock replaced by kscope's (the collector's timestamp callback): both fit, one clock.
  const kscope::clock_reading same{first.kscope_ns + 10, first.kscope_ns};
  CHECK(kscope::detect_sample_timeline(first.kscope_ns - 30'000, same, second) == kscope::sample_timeline::kscope);
  CHECK(std::string(kscope::to_string(kscope::sample_timeline::cupti)) == "CUPTI timestamp timeline");
}

TEST_CASE("metric sampler: the default set, and how each metric is averaged") {
  const std::vector<std::string> defaults = kscope::default_sampling_metrics();
  REQUIRE(defaults.size() == 7);
  const kscope::sampled_metrics agg(defaults);
  const kscope::sampled_metrics_report r = agg.report();
  // Byte counters are per-sample totals (a total and a rate); the rest are means.
  for (std::size_t i = 0; i < defaults.size(); ++i)
    CHECK_MESSAGE(r.is_count[i] == contains(defaults[i], "bytes"), defaults[i]);
  CHECK(r.index_of("TriageCompute.sm__throughput.avg.pct_of_peak_sustained_elapsed") == 0);
  CHECK(r.index_of("gpc__cycles_elapsed.avg.per_second") == 6);
}

TEST_CASE("metric sampler: bad options are refused before touching the GPU") {
  kscope::metric_sampler sampler;
  CHECK(sampler.status().state == kscope::metric_sampler_state::idle);
  const auto refused = [&sampler](const kscope::metric_sampler_options& o, std::string_view field) {
    CHECK_FALSE(sampler.start(o));
    const kscope::metric_sampler_status s = sampler.status();
    CHECK(s.state == kscope::metric_sampler_state::invalid_request);
    CHECK_FALSE(s.ok());
    CHECK_MESSAGE(contains(s.message, field), s.message);
  };
  kscope::metric_sampler_options o;
  o.interval_ns = 0;
  refused(o, "interval_ns");
  o = {};
  o.hardware_buffer_bytes = 1024;
  refused(o, "hardware_buffer_bytes");
  o = {};
  o.decode_period = std::chrono::milliseconds(0);
  refused(o, "decode_period");
  o = {};
  o.counter_data_samples = 1;
  refused(o, "counter_data_samples");
  o = {};
  o.max_buffered_samples = 0;
  refused(o, "max_buffered_samples");
  o = {};
  o.window = std::chrono::milliseconds(-1);
  refused(o, "window");
  o = {};
  o.max_decoder_share = 0;
  refused(o, "max_decoder_share");
  o.max_decoder_share = 1.5;
  refused(o, "max_decoder_share");
  o.max_decoder_share = std::nan("");
  refused(o, "max_decoder_share");
  o = {};
  o.metrics = {"dram__bytes_read.sum", ""};
  refused(o, "empty metric name");
  sampler.stop();  // never started: nothing to do
  CHECK(sampler.status().state == kscope::metric_sampler_state::invalid_request);
  CHECK(sampler.drain([](const kscope::metric_sample_view&) {}) == 0);
  CHECK(sampler.samples().empty());
}

TEST_CASE("metric sampler: options from text (KSCOPE_METRIC_SAMPLING_OPTIONS)") {
  kscope::metric_sampler_options o;
  CHECK(kscope::apply_metric_sampler_options_text(" interval_us = 1000 ,window_ms=0,, decoder_share=5,"
                                                  "decode_period_ms=250", o)
            .empty());
  CHECK(o.interval_ns == 1'000'000);
  CHECK(o.window.count() == 0);
  CHECK(o.max_decoder_share == doctest::Approx(0.05));
  CHECK(o.decode_period.count() == 250);
  CHECK(kscope::detail::metric_sampler_request_error(o).empty());  // every value it takes is one start() takes

  // Each bad item is named once and leaves its option as it was; the good ones apply.
  const kscope::metric_sampler_options before = o;
  const std::vector<std::string> problems = kscope::apply_metric_sampler_options_text(
      "interval_us=0,interval_us=1000001,window_ms=-1,window_ms=60001,decoder_share=0,decoder_share=101,"
      "decoder_share=2.5,decode_period_ms=0,decode_period_ms=x,no_such_key=1,just_a_word,=5,interval_us=20",
      o, "TEST_SOURCE");
  REQUIRE(problems.size() == 12);
  for (const std::string& p : problems) {
    CHECK_MESSAGE(contains(p, "TEST_SOURCE: '"), p);
    CHECK_MESSAGE(contains(p, "that option keeps its value"), p);
  }
  CHECK(contains(problems[0], "'interval_us=0'"));
  CHECK(contains(problems[9], "keys: interval_us, window_ms, decoder_share, decode_period_ms"));
  CHECK(contains(problems[10], "'just_a_word' not understood (expected key=value"));
  CHECK(o.interval_ns == 20'000);  // the one good item
  CHECK(o.window == before.window);
  CHECK(o.max_decoder_share == before.max_decoder_share);
  CHECK(o.decode_period == before.decode_period);
  CHECK(kscope::apply_metric_sampler_options_text("", o).empty());
}

TEST_CASE("metric sampler: unavailable gives one message and no exception") {
  // A CPU machine has no device; a GPU machine gets a libcupti path that does not exist.
  // Either way: false, one line naming the reason, nothing thrown, stop() harmless.
  kscope::metric_sampler sampler;
  kscope::metric_sampler_options o;
  o.cupti_library = "/nonexistent/libcupti.so";
  CHECK_FALSE(sampler.start(o));
  const kscope::metric_sampler_status s = sampler.status();
  MESSAGE(s.message);
  CHECK_FALSE(s.ok());
  CHECK_FALSE(s.message.empty());
  CHECK(s.message.find('\n') == std::string::npos);
  CHECK(contains(s.message, "metric sampling"));
#if KSCOPE_HAS_PM_SAMPLING
  CHECK(s.state == kscope::metric_sampler_state::unavailable);
#else
  CHECK(s.state == kscope::metric_sampler_state::disabled);
  CHECK(contains(s.message, "cupti_pmsampling.h"));
#endif
  sampler.stop();
  CHECK(std::string(kscope::to_string(kscope::metric_sampler_state::too_many_passes)) == "too many passes");
}

TEST_CASE("metric sample buffer: overwrite replaces one sample in place (the trace's ring)") {
  kscope::metric_sample_buffer b(2, 3);
  const double v1[] = {1, 2}, v2[] = {3, 4}, v3[] = {5, 6};
  CHECK(b.push(0, 10, v1));
  CHECK(b.push(10, 20, v2));
  b.overwrite(0, 20, 30, v3);
  CHECK(b[0].start_ns == 20);
  CHECK(b[0].end_ns == 30);
  CHECK(b[0].values[1] == 6);
  CHECK(b[1].values[0] == 3);
  b.overwrite(5, 0, 1, v1);  // past size(): nothing
  CHECK(b.size() == 2);
}

TEST_CASE("sampled columns: found by what they measure") {
  const auto c = kscope::sampled_metric_columns::of(kscope::default_sampling_metrics());
  CHECK(c.sm_pct == 0);
  CHECK(c.dram_pct == 1);
  CHECK(c.tensor_pct == 4);
  CHECK(c.warps_pct == 5);
  CHECK(c.clock_hz == 6);
  const auto user = kscope::sampled_metric_columns::of({"dram__bytes_read.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed"});
  CHECK(user.sm_pct == 1);
  CHECK(user.dram_pct == user.none);
  CHECK(kscope::sampled_metric_columns::of({}).sm_pct == kscope::sampled_metric_columns::none);
  // The optional on-chip units, in any of their spellings.
  std::vector<std::string> with_units = kscope::default_sampling_metrics();
  for (const kscope::optional_sampling_unit& u : kscope::optional_sampling_units()) {
    REQUIRE(!u.spellings.empty());
    with_units.push_back(u.spellings.front());
  }
  const auto units = kscope::sampled_metric_columns::of(with_units);
  CHECK(units.l2_pct == 7);
  CHECK(units.l1_pct == 8);
  CHECK(kscope::sampled_metric_columns::of({"lts__throughput.avg.pct_of_peak_sustained_elapsed"}).l2_pct == 0);
  CHECK(kscope::sampled_metric_columns::of({"lts__t_bytes.sum"}).l2_pct == kscope::sampled_metric_columns::none);
}

namespace {
// A node with the default metrics' means and an idle share.
// L2 and L1/shared in columns 7 and 8 (sampled_metrics_with_units()); NaN: not sampled.
kscope::node_sampled_metrics sampled_node_with(double sm, double dram, double tensor, double idle,
                                               std::uint64_t samples = 40, double l2 = 20, double l1 = 20) {
  kscope::node_sampled_metrics n;
  n.samples = samples;
  n.touched_sample_ns = 1e6;
  n.touched_idle_ns = idle * 1e6;
  n.values.resize(9);
  n.values[0].mean = sm;
  n.values[1].mean = dram;
  n.values[4].mean = tensor;
  n.values[7].mean = l2;
  n.values[8].mean = l1;
  return n;
}

// The metric names of a default sampling run on GH100: the default set and both units.
std::vector<std::string> sampled_metrics_with_units() {
  std::vector<std::string> metrics = kscope::default_sampling_metrics();
  for (const kscope::optional_sampling_unit& u : kscope::optional_sampling_units())
    metrics.push_back(u.spellings.front());
  return metrics;
}
}  // namespace

TEST_CASE("classify_sampled: each verdict with the numbers it rests on") {
  const std::vector<std::string> metrics = sampled_metrics_with_units();
  SUBCASE("memory-bound: DRAM at the roof, above SM") {
    const kscope::finding f = kscope::classify_sampled(sampled_node_with(12, 82, 0, 0.05), metrics);
    CHECK(f.kind == kscope::bottleneck::memory);
    CHECK(f.where == "DRAM");
    CHECK(contains(f.text, "from sampling, 40 samples"));
    CHECK(contains(f.text, "DRAM 82%"));
    CHECK(contains(f.text, "SM 12%"));
  }
  SUBCASE("compute-bound on the tensor pipe") {
    const kscope::finding f = kscope::classify_sampled(sampled_node_with(88, 20, 93, 0.0), metrics);
    CHECK(f.kind == kscope::bottleneck::compute);
    CHECK(f.where == "tensor pipe");
    CHECK(contains(f.text, "tensor pipe 93%"));
  }
  SUBCASE("compute-bound, tensor pipe quiet: the SM, and a counter pass to find the pipe") {
    const kscope::finding f = kscope::classify_sampled(sampled_node_with(75, 10, 2, 0.1), metrics);
    CHECK(f.kind == kscope::bottleneck::compute);
    CHECK(f.where == "SM");
    CHECK(contains(f.text, "profile_counters"));
  }
  SUBCASE("latency-bound: both under 60 % while busy") {
    const kscope::finding f = kscope::classify_sampled(sampled_node_with(30, 25, 0, 0.1), metrics);
    CHECK(f.kind == kscope::bottleneck::latency);
    CHECK(contains(f.text, "busy 90%"));
  }
  SUBCASE("launch/CPU-bound: mostly idle around its kernels, whatever the throughputs") {
    const kscope::finding f = kscope::classify_sampled(sampled_node_with(90, 90, 0, 0.8), metrics);
    CHECK(f.kind == kscope::bottleneck::launch);
    CHECK(contains(f.text, "80%"));
  }
  SUBCASE("exactly at the thresholds") {
    CHECK(kscope::classify_sampled(sampled_node_with(10, 60, 0, 0.49), metrics).kind == kscope::bottleneck::memory);
    CHECK(kscope::classify_sampled(sampled_node_with(10, 59.9, 0, 0.49), metrics).kind == kscope::bottleneck::latency);
    CHECK(kscope::classify_sampled(sampled_node_with(10, 90, 0, 0.5), metrics).kind == kscope::bottleneck::launch);
  }
  SUBCASE("an L2-bound kernel (L2 78 % in counters): memory-bound at L2, not latency-bound") {
    const kscope::finding f = kscope::classify_sampled(sampled_node_with(35, 40, 0, 0.05, 40, 78, 30), metrics);
    CHECK(f.kind == kscope::bottleneck::memory);
    CHECK(f.where == "L2");
    CHECK(contains(f.text, "L2 78%"));
    CHECK(contains(f.text, "keep reused data in L1 / shared memory"));
    // DRAM at its roof with L2 within a quarter of it: DRAM (L2 counts its fills).
    CHECK(kscope::classify_sampled(sampled_node_with(20, 70, 0, 0.05, 40, 80, 30), metrics).where == "DRAM");
    // SM is weighed against the busiest memory unit, as the counters weigh it: SM 65 %, DRAM
    // 62 %, L2 70 % is memory-bound at DRAM (was compute-bound: SM against DRAM alone).
    const kscope::finding streaming = kscope::classify_sampled(sampled_node_with(65, 62, 0, 0.05, 40, 70, 30), metrics);
    CHECK(streaming.kind == kscope::bottleneck::memory);
    CHECK(streaming.where == "DRAM");
    CHECK(contains(streaming.text, "DRAM at 62% is the limit"));
    CHECK(kscope::classify_sampled(sampled_node_with(85, 80, 0, 0.05, 40, 90, 30), metrics).kind ==
          kscope::bottleneck::memory);
    // SM above every memory unit: compute-bound, as before.
    CHECK(kscope::classify_sampled(sampled_node_with(75, 62, 0, 0.05, 40, 70, 30), metrics).kind ==
          kscope::bottleneck::compute);
    // L1/shared the busiest.
    CHECK(kscope::classify_sampled(sampled_node_with(40, 10, 0, 0.05, 40, 20, 90), metrics).where == "L1");
  }
  SUBCASE("a tensor pipe at its roof is compute-bound whatever L1 reads") {
    const kscope::finding f = kscope::classify_sampled(sampled_node_with(60, 15, 91, 0.0, 40, 35, 97), metrics);
    CHECK(f.kind == kscope::bottleneck::compute);
    CHECK(f.where == "tensor pipe");
  }
  SUBCASE("L2 or L1 not sampled: under the roofs is undetermined, naming the unit not seen") {
    const kscope::finding both = kscope::classify_sampled(sampled_node_with(30, 25, 0, 0.1),
                                                          kscope::default_sampling_metrics());
    CHECK(both.kind == kscope::bottleneck::undetermined);
    CHECK(contains(both.text, "L2 and L1/shared throughput were not sampled"));
    CHECK(!contains(both.text, "latency-bound:"));
    const kscope::finding l1_only =
        kscope::classify_sampled(sampled_node_with(30, 25, 0, 0.1, 40, 30, std::nan("")), metrics);
    CHECK(l1_only.kind == kscope::bottleneck::undetermined);
    CHECK(contains(l1_only.text, "L1/shared throughput was not sampled"));
    // A verdict at a roof needs no unseen unit.
    CHECK(kscope::classify_sampled(sampled_node_with(12, 82, 0, 0.05), kscope::default_sampling_metrics()).kind ==
          kscope::bottleneck::memory);
  }
  SUBCASE("no evidence: undetermined, never a guess") {
    CHECK(kscope::classify_sampled(sampled_node_with(50, 50, 0, 0.1, 0), metrics).kind ==
          kscope::bottleneck::undetermined);
    const kscope::finding f = kscope::classify_sampled(sampled_node_with(90, 10, 0, 0.1), {"dram__bytes_read.sum"});
    CHECK(f.kind == kscope::bottleneck::undetermined);
    CHECK(contains(f.text, "not both sampled"));
    CHECK(kscope::classify_sampled(sampled_node_with(std::nan(""), 80, 0, 0.1), metrics).kind ==
          kscope::bottleneck::undetermined);
  }
}

}  // namespace metric_samples_test
