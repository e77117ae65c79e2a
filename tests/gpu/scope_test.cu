// GPU cases for stream scopes: known-duration kernels, many threads and streams, and
// the ways a host program can misbehave around scopes.
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>  // the reports the checks read

#include <doctest/doctest.h>

#include "test_kernels.cuh"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using kscope_test::spin_for_ns;

// A copy, not a reference: g++ 13 flags references returned through temporary arguments.
kscope::scope_report must_find(const kscope::session_report& r, const std::string& path) {
  const kscope::scope_report* s = r.find(path);
  if (!s) FAIL("no scope at path " << path << "\n" << r.text());
  return *s;
}

}  // namespace

TEST_CASE("a 1 ms kernel in a stream scope is reported within 3 %") {
  auto& session = kscope::session::global();
  session.reset();
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  spin_for_ns<<<1, 1, 0, stream>>>(1000);  // module load outside the measurement
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  for (int i = 0; i < 30; ++i) {
    KSCOPE_SCOPE_STREAM("gpu_spin_1ms", stream);
    spin_for_ns<<<1, 1, 0, stream>>>(1000000);
  }
  const auto r = session.report();
  const auto s = must_find(r, "gpu_spin_1ms");
  MESSAGE("GPU median " << s.gpu_ns.median << " ns, host median " << s.host_ns.median << " ns");
  CHECK(s.gpu_calls == 30);
  CHECK(s.gpu_ns.median == doctest::Approx(1.0e6).epsilon(0.03));
  // The scope's exit never waited for the GPU: host time is launch time, far below 1 ms.
  CHECK(s.host_ns.median < 0.5e6);
  CHECK(cudaGetLastError() == cudaSuccess);
  cudaStreamDestroy(stream);
}

TEST_CASE("four threads on two streams each get the right per-scope GPU times") {
  auto& session = kscope::session::global();
  session.reset();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      cudaStream_t streams[2];
      for (auto& s : streams)
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) ++failures;
      KSCOPE_SCOPE("gpu_worker");
      for (int i = 0; i < 12; ++i) {
        for (int j = 0; j < 2; ++j) {
          const unsigned long long ns = 200000ull * (t + 1) + 100000ull * j;
          kscope::scope s{"t" + std::to_string(t) + "_s" + std::to_string(j), streams[j]};
          spin_for_ns<<<1, 1, 0, streams[j]>>>(ns);
        }
      }
      for (auto& s : streams) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  const auto r = session.report();
  for (int t = 0; t < 4; ++t) {
    for (int j = 0; j < 2; ++j) {
      const auto s = must_find(r, "gpu_worker/t" + std::to_string(t) + "_s" + std::to_string(j));
      const double expected = 200000.0 * (t + 1) + 100000.0 * j;
      CHECK(s.calls == 12);
      CHECK(s.gpu_calls == 12);
      // 3 %, or 10 us: with eight streams busy the kernel starts a few microseconds after
      // the scope's start event (launch latency the events rightly include).
      CHECK_MESSAGE(std::fabs(s.gpu_ns.median - expected) < std::max(0.03 * expected, 10000.0),
                    "t" << t << "_s" << j << ": " << s.gpu_ns.median << " ns vs " << expected);
    }
  }
}

TEST_CASE("a stream destroyed before the report still gives its scope's GPU time") {
  // The events outlive the stream: they are read at report time. (Destroying a stream
  // while a scope on it is still open is a use of a destroyed handle at the scope's exit,
  // undefined in CUDA like any such use; kscope cannot detect it. See scope.hpp.)
  auto& session = kscope::session::global();
  session.reset();
  cudaStream_t later;
  REQUIRE(cudaStreamCreate(&later) == cudaSuccess);
  for (int i = 0; i < 3; ++i) {
    KSCOPE_SCOPE_STREAM("gpu_stream_destroyed_later", later);
    spin_for_ns<<<1, 1, 0, later>>>(100000);
  }
  REQUIRE(cudaStreamDestroy(later) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);  // kscope left no error behind
  const auto r = session.report();
  const auto ok = must_find(r, "gpu_stream_destroyed_later");
  CHECK(ok.gpu_calls == 3);
  CHECK(ok.gpu_ns.median == doctest::Approx(1e5).epsilon(0.1));
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

// The pool's cap and its recycling (scope/detail/event_pool.hpp). A stream scope holds its
// event pair from its open until the recorder reads the events, which it does only after
// draining the thread's record ring: when the ring is full, at a report, or when the thread
// exits. So threads that each close fewer scopes than a ring holds, and then wait, hold
// every pair they took: 66 threads x 1,000 scopes ask for 66,000 pairs, the pool hands out
// its cap of 65,536 and no more, and the other 464 scopes run without GPU timing, each
// counted. Then, with the pool at its cap (no pair can be created any more), 3 x 65,536
// scopes on one thread must all be timed: only recycled pairs can time them.
TEST_CASE("the event pool: pairs in flight capped, scopes past the cap counted exactly, pairs recycled at the cap") {
  constexpr std::uint32_t cap = kscope::detail::event_pool::default_cap_pairs;
  constexpr std::uint32_t per_thread = 1000;
  static_assert(per_thread < kscope::detail::thread_log::capacity, "a thread's scopes must stay in its ring");
  constexpr std::uint32_t threads = cap / per_thread + 1;
  constexpr std::uint64_t asked = std::uint64_t{threads} * per_thread;
  static_assert(asked > cap, "the threads must ask for more pairs than the cap");
  constexpr std::uint64_t over = asked - cap;

  auto& session = kscope::session::global();
  // Every pair of the earlier cases read and back in the pool.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  (void)session.report();
  session.reset();
  cudaStream_t stream;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);

  std::mutex mutex;
  std::condition_variable changed;
  std::uint32_t holding = 0;
  bool release = false;
  std::vector<std::thread> pool;
  for (std::uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (std::uint32_t i = 0; i < per_thread; ++i) {
        KSCOPE_SCOPE_STREAM("gpu_pool_cap", stream);
      }
      // Hold the pairs (the ring is not drained) until every thread has taken its own.
      std::unique_lock<std::mutex> lock(mutex);
      ++holding;
      changed.notify_all();
      changed.wait(lock, [&] { return release; });
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return holding == threads; });
    release = true;
  }
  changed.notify_all();
  for (std::thread& th : pool) th.join();  // each exit drains its ring: the report reads the events
  const auto capped = session.report();
  const auto at_cap = must_find(capped, "gpu_pool_cap");
  MESSAGE(asked << " scopes asked for pairs at once: " << at_cap.gpu_calls << " timed, "
                << capped.gpu_timing_skipped << " without GPU timing");
  CHECK(at_cap.calls == asked);
  CHECK(at_cap.gpu_calls == cap);                   // the cap, reached and never passed
  CHECK(capped.gpu_timing_skipped == over);         // every scope past it counted
  CHECK(capped.text().find("note: " + std::to_string(over) + " stream scopes ran without GPU timing (event pool cap)") !=
        std::string::npos);

  // At the cap: nothing more can be created, so every pair below is a recycled one. A
  // synchronize every 8,192 scopes bounds the pairs in flight far below the cap.
  constexpr std::uint64_t recycled = 3ull * cap;
  for (std::uint64_t i = 0; i < recycled; ++i) {
    KSCOPE_SCOPE_STREAM("gpu_pool_recycled", stream);
    if (i % 8192 == 8191) REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  }
  const auto r = session.report();
  const auto again = must_find(r, "gpu_pool_recycled");
  CHECK(again.calls == recycled);
  CHECK(again.gpu_calls == recycled);   // 3 x the cap, all timed: each pair reused
  CHECK(r.gpu_timing_skipped == over);  // none skipped since
  CHECK(cudaGetLastError() == cudaSuccess);
  cudaStreamDestroy(stream);
}

TEST_CASE("a scope left open in a thread when the program exits does not crash it") {
  // The thread blocks forever inside a stream scope; the process exits around it at the
  // end of the test run (ctest fails the test if exit crashes).
  static cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  std::atomic<bool> opened{false};
  std::thread([&opened] {
    KSCOPE_SCOPE_STREAM("gpu_open_at_exit", stream);
    opened = true;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }).detach();
  while (!opened) std::this_thread::yield();
  CHECK(kscope::session::global().report().find("gpu_open_at_exit") == nullptr);
}
