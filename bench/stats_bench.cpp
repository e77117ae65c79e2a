// Cost of kscope's statistics on log-normal timings (fixed seed): summarize() and
// compare() on 1e3, 1e5 and 1e6 samples (compare: that many on each side), and one
// sample_reservoir::add. items/s counts input samples (both sides for compare).
#include <kscope/core/stats.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

std::vector<double> lognormal_samples(std::size_t n, double scale, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = scale * std::exp(0.25 * normal(engine));
  return v;
}

void BM_summarize(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<double> samples = lognormal_samples(n, 1e-3, 1);
  for (auto _ : state) {
    kscope::summary s = kscope::summarize(samples);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_summarize)->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_compare(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<double> baseline = lognormal_samples(n, 1e-3, 2);
  const std::vector<double> candidate = lognormal_samples(n, 1.03e-3, 3);
  for (auto _ : state) {
    kscope::comparison c = kscope::compare(baseline, candidate);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(2 * n));
}
BENCHMARK(BM_compare)->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_median_ci(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<double> samples = lognormal_samples(n, 1e-3, 4);
  for (auto _ : state) {
    kscope::interval ci = kscope::median_ci(samples);
    benchmark::DoNotOptimize(ci);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_median_ci)->Arg(1000)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_reservoir_add(benchmark::State& state) {
  const std::vector<double> samples = lognormal_samples(1 << 16, 1e-3, 5);
  kscope::sample_reservoir reservoir;
  std::size_t i = 0;
  for (auto _ : state) {
    reservoir.add(samples[i++ & (samples.size() - 1)]);
  }
  benchmark::DoNotOptimize(reservoir.count());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_reservoir_add);

}  // namespace

BENCHMARK_MAIN();
