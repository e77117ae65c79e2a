// How long a scope on one thread can wait while another thread builds a report: the
// session's report() copies the recorder's data, and a scope needs the recorder's lock
// when its thread's ring fills up (every 1024 scopes) or when it meets a new name. A
// report must never stall the program it observes.
//
// Setup: 4,000 call-path nodes with 4,000 samples each (16 M values, inside the default
// sample budget). Measured: every iteration of a tight KSCOPE_SCOPE loop on one thread,
// timed with the steady clock, while a second thread calls session::report() in a loop
// (BM_scope_while_reporting), recorder::snapshot() in a loop (BM_scope_while_snapshotting)
// and with no report running (BM_scope_alone). Counters: the
// worst iteration, the 99.9th percentile, and how many reports completed meanwhile.
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kNodes = 4000;
constexpr int kCallsPerNode = 4000;

void fill_recorder_once() {
  static const bool filled = [] {
    kscope::recorder::global().set_nvtx(false);
    std::vector<std::string> names;
    for (int i = 0; i < kNodes; ++i) names.push_back("node_" + std::to_string(i));
    for (int c = 0; c < kCallsPerNode; ++c)
      for (const std::string& name : names) kscope::scope s{name};
    return true;
  }();
  (void)filled;
}

// Times `iterations` scopes one by one; returns each duration in nanoseconds.
std::vector<double> time_scopes(std::size_t iterations) {
  std::vector<double> ns(iterations);
  for (std::size_t i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    {
      KSCOPE_SCOPE("probe");
      benchmark::ClobberMemory();
    }
    ns[i] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  }
  return ns;
}

enum class reader { none, report, snapshot };

void report_latency(benchmark::State& state, reader what) {
  const bool reporting = what != reader::none;
  fill_recorder_once();
  std::atomic<bool> stop{false};
  std::atomic<int> reports{0};
  std::thread reporter;
  if (reporting)
    reporter = std::thread([&] {
      while (!stop.load()) {
        if (what == reader::report) benchmark::DoNotOptimize(kscope::session::global().report());
        else benchmark::DoNotOptimize(kscope::recorder::global().snapshot());
        reports.fetch_add(1);
      }
    });
  // Long enough to span several whole reports.
  while (reporting && reports.load() == 0) std::this_thread::yield();
  std::vector<double> all;
  for (auto _ : state) {
    std::vector<double> ns = time_scopes(2'000'000);
    all.insert(all.end(), ns.begin(), ns.end());
  }
  stop = true;
  if (reporter.joinable()) reporter.join();
  std::sort(all.begin(), all.end());
  state.counters["worst_us"] = all.back() / 1e3;
  state.counters["p999_us"] = all[static_cast<std::size_t>(0.999 * static_cast<double>(all.size() - 1))] / 1e3;
  state.counters["median_ns"] = all[all.size() / 2];
  state.counters["reports"] = reports.load();
}

void BM_scope_alone(benchmark::State& state) { report_latency(state, reader::none); }
void BM_scope_while_reporting(benchmark::State& state) { report_latency(state, reader::report); }
// The recorder's copy alone, in a loop (no statistics): the lock at its busiest.
void BM_scope_while_snapshotting(benchmark::State& state) { report_latency(state, reader::snapshot); }
BENCHMARK(BM_scope_alone)->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_scope_while_reporting)->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_scope_while_snapshotting)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
