// fork() while other threads make their FIRST call into kscope's process-wide objects
// (issue 31). fork_test.cpp forks only after everything is built; here every trial starts
// from a process in which nothing lazy has been built yet: the test process forks a
// fresh trial process (still single-threaded, as the test runner is), which starts one
// thread per one-time initialization and forks grandchildren at once, while those
// threads are inside the initializations. A grandchild then makes the same calls. On a
// library that lets a child inherit an initialization begun by a thread it does not have
// (a function-local static's guard, a lock held around a dlopen), the grandchild waits
// forever; its alarm turns that into a failure that names the call.
//
// Knobs (environment): KSCOPE_FORK_RACE_TRIALS (default 24), KSCOPE_FORK_RACE_CHILDREN
// (grandchildren per trial, default 6), KSCOPE_FORK_RACE_TIMEOUT_S (a grandchild's alarm,
// default 10), KSCOPE_FORK_RACE_ALL=1 (run every trial even after a hang, to count them).
#include <doctest/doctest.h>

#include <kscope/bench/detail/gbench_status.hpp>
#include <kscope/evidence/metrics.hpp>
#include <kscope/core/detail/clock.hpp>
#include <kscope/core/detail/json_reader.hpp>
#include <kscope/core/detail/once.hpp>
#include <kscope/core/sweep.hpp>
#include <kscope/warp_stalls/stalls.hpp>
#include <kscope/activity/collector.hpp>
#include <kscope/counters/collect.hpp>
#include <kscope/cupti/detail/cubin_store.hpp>
#include <kscope/counters/detail/kernel_names.hpp>
#include <kscope/pm_sampling/sampler.hpp>
#include <kscope/counters/scope_counters.hpp>
#include <kscope/warp_stalls/collect.hpp>
#include <kscope/device/availability.hpp>
#include <kscope/device/detail/cublas_loader.hpp>
#include <kscope/scope/detail/nvtx.hpp>
#include <kscope/scope/detail/switches.hpp>
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>
#if KSCOPE_HAS_CUDA
#  include <kscope/bench/detail/cuda_timer.hpp>
#  include <kscope/device/detail/kernel_library.hpp>
#endif

#if defined(__unix__) || defined(__APPLE__)
#  include <dlfcn.h>
#  include <sys/mman.h>
#  include <sys/wait.h>
#  include <unistd.h>
#  define KSCOPE_TEST_HAVE_FORK 1
#else
#  define KSCOPE_TEST_HAVE_FORK 0
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

// One first call into one of kscope's one-time initializations. A costly one (cuBLAS: a
// dlopen of ~0.4 s, and every later fork copies its mappings) runs in every fourth trial.
struct first_call {
  const char* name;
  void (*call)();
  bool costly = false;
};

// Every lazily built process-wide object of kscope, reached the way a program reaches it.
const first_call first_calls[] = {
    {"a scope (recorder::global, NVTX domain, clock)", [] { KSCOPE_SCOPE("fork_race"); }},
    {"session::global().report()", [] { (void)kscope::session::global().report(); }},
    {"recorder::global()", [] { (void)kscope::recorder::global(); }},
    {"probe_gpu()", [] { (void)kscope::probe_gpu(); }},
    {"cupti_collector::global()", [] { (void)kscope::cupti_collector::global().status(); }},
    {"scope_counter_sampler::global()", [] { (void)kscope::scope_counter_sampler::global().snapshot(); }},
    {"cubin_store::global()", [] { (void)kscope::detail::cubin_store::global().counts(); }},
    {"nvtx_domain()",
     [] {
#if KSCOPE_HAS_NVTX
       (void)kscope::detail::nvtx_domain();
#endif
     }},
    {"ticks_are_tsc() / tick_origin()",
     [] {
       (void)kscope::detail::ticks_are_tsc();
       (void)kscope::detail::tick_origin();
     }},
    {"environment switches", [] { (void)kscope::detail::enabled(); }},
    {"metric_catalog()", [] { (void)kscope::metric_catalog(); }},
    {"stall_reason_table()", [] { (void)kscope::stall_reason_table(); }},
    {"json_value::at() (shared null)", [] { (void)kscope::detail::json_value{}.at(3); }},
    {"sweep_results::value_of() (not measured)",
     [] { (void)kscope::sweep_results::value_of(kscope::sweep_row{}, 0); }},
    {"counter_pass_mutex()", [] { (void)kscope::detail::counter_pass_mutex(); }},
    {"gbench_failures()", [] { (void)kscope::detail::harness::gbench_failures().count(); }},
#if KSCOPE_HAS_RANGE_PROFILER
    {"counter_library_state()", [] { (void)kscope::detail::counter_library_state(); }},
    {"profiler_kernel_name_log()", [] { (void)kscope::detail::profiler_kernel_name_log(); }},
#endif
#if KSCOPE_HAS_PM_SAMPLING
    {"pm_sampling_library_state()", [] { (void)kscope::detail::pm_sampling_library_state(); }},
#endif
#if KSCOPE_HAS_PC_SAMPLING
    {"pc_sampling_state()", [] { (void)kscope::detail::pc_sampling_state(); }},
#endif
#if KSCOPE_HAS_CUBIN_CAPTURE
    {"cubin_capture_state()", [] { (void)kscope::detail::resolve_cubin_capture(nullptr); }},
#endif
#if KSCOPE_HAS_CUDA
    {"kscope_kernel_library()", [] { (void)kscope::detail::kscope_kernel_library(); }},
    {"clock_probe()", [] { (void)kscope::detail::harness::clock_probe(); }},
#endif
    {"cublas() (dlopen)", [] { (void)kscope::detail::cublas(); }, true},
};
constexpr int call_count = static_cast<int>(sizeof first_calls / sizeof first_calls[0]);

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  const int n = std::atoi(v);
  return n > 0 ? n : fallback;
}

#if KSCOPE_TEST_HAVE_FORK

// What the trials report to the test process, in memory all of them share.
struct shared_tally {
  std::atomic<int> grandchildren{0};
  std::atomic<int> hung{0};        // killed by their alarm
  std::atomic<int> failed{0};      // exited otherwise than with 0 (a crash, not a hang)
  std::atomic<int> hung_trials{0};
  std::atomic<int> broken_trials{0};  // the trial process itself did not finish cleanly
  std::atomic<int> hung_in[64];       // by first_calls index
};

// One grandchild: the calls whose first call had begun in the trial when it was forked,
// in order; `progress` says which one it is in (read when its alarm kills it).
[[noreturn]] void run_grandchild(const bool* begun, std::atomic<int>* progress, int timeout_s) {
  alarm(static_cast<unsigned>(timeout_s));  // a hang dies of SIGALRM instead of hanging the test
  for (int i = 0; i < call_count; ++i) {
    if (!begun[i]) continue;
    progress->store(i, std::memory_order_relaxed);
    first_calls[i].call();
  }
  progress->store(-1, std::memory_order_relaxed);
  _exit(0);
}

// One trial, in a fresh process forked from the single-threaded test process: a thread
// per first call, released together; grandchildren forked at once and then every few
// hundred microseconds while the threads run.
[[noreturn]] void run_trial(shared_tally* tally, unsigned seed, bool with_costly, int children, int timeout_s) {
  alarm(static_cast<unsigned>(timeout_s * 3 + 60));  // the trial itself never hangs the test
  std::mt19937 random(seed);
  auto* progress = static_cast<std::atomic<int>*>(mmap(nullptr, sizeof(std::atomic<int>) * 64,
                                                       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (progress == MAP_FAILED) _exit(3);
  std::atomic<bool> begun_flags[64];
  for (int i = 0; i < call_count; ++i) begun_flags[i].store(false);
  std::mutex m;
  std::condition_variable cv;
  bool go = false;
  std::vector<int> order;
  for (int i = 0; i < call_count; ++i)
    if (with_costly || !first_calls[i].costly) order.push_back(i);
  std::shuffle(order.begin(), order.end(), random);
  std::vector<std::thread> threads;
  for (int i : order) {
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return go; });
      }
      begun_flags[i].store(true);
      first_calls[i].call();
    });
  }
  {
    std::lock_guard<std::mutex> lock(m);
    go = true;
  }
  cv.notify_all();
  std::vector<pid_t> pids;
  for (int c = 0; c < children; ++c) {
    if (c > 0) {  // spread the forks over the start-up: 0..400 us apart
      const auto pause = std::chrono::microseconds(std::uniform_int_distribution<int>(0, 400)(random));
      const auto until = std::chrono::steady_clock::now() + pause;
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    bool begun[64] = {};
    for (int i = 0; i < call_count; ++i) begun[i] = begun_flags[i].load();
    progress[c].store(-2, std::memory_order_relaxed);
    const pid_t pid = fork();
    if (pid == 0) run_grandchild(begun, &progress[c], timeout_s);
    if (pid > 0) pids.push_back(pid);
  }
  bool any_hung = false;
  for (std::size_t c = 0; c < pids.size(); ++c) {
    int status = 0;
    if (waitpid(pids[c], &status, 0) != pids[c]) continue;
    tally->grandchildren.fetch_add(1);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
      any_hung = true;
      tally->hung.fetch_add(1);
      const int at = progress[c].load(std::memory_order_relaxed);
      if (at >= 0 && at < call_count) tally->hung_in[at].fetch_add(1);
    } else {
      tally->failed.fetch_add(1);
    }
  }
  if (any_hung) tally->hung_trials.fetch_add(1);
  for (std::thread& t : threads) t.join();
  _exit(0);
}

// Runs `body` in a child of this process with an alarm, so that a deadlock is a failed
// check instead of a hung test; returns the child's exit status (0: every check held).
template <class Body>
int in_child_process(Body body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    _exit(body());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#endif  // KSCOPE_TEST_HAVE_FORK

}  // namespace

TEST_CASE("a fork waits for a one-time initialization in progress, starts none, and may come from inside one") {
#if !KSCOPE_TEST_HAVE_FORK
  MESSAGE("SKIPPED: no fork() on this platform");
#else
  using kscope::detail::lazy_global;
  using kscope::detail::lock_rank;

  // Another thread is inside the initialization: fork() returns only once it has finished,
  // and the child has the finished object (its own call does not build it again).
  CHECK(in_child_process([] {
          static lazy_global<int> slow{lock_rank::init};
          std::atomic<bool> inside{false};
          std::thread builder([&] {
            (void)slow.get([&] {
              inside.store(true);
              std::this_thread::sleep_for(std::chrono::milliseconds(300));
              return new int(42);
            });
          });
          while (!inside.load()) std::this_thread::yield();
          const auto before = std::chrono::steady_clock::now();
          const pid_t pid = fork();
          if (pid == 0) {
            const int* built = slow.get_if_built();
            _exit(built != nullptr && *built == 42 && slow.get([] { return new int(7); }) == 42 ? 0 : 1);
          }
          const auto waited = std::chrono::steady_clock::now() - before;
          int status = 0;
          const bool child_ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                                WEXITSTATUS(status) == 0;
          builder.join();
          if (!child_ok) return 2;
          return waited >= std::chrono::milliseconds(200) ? 0 : 3;  // it waited for the build
        }) == 0);

  // A fork made from inside an initialization (a driver starting a helper process) does not
  // wait for itself.
  CHECK(in_child_process([] {
          static lazy_global<int> forking{lock_rank::init};
          int status = -1;
          (void)forking.get([&status] {
            const pid_t pid = fork();
            if (pid == 0) _exit(0);
            if (pid > 0) waitpid(pid, &status, 0);
            return new int(1);
          });
          return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
        }) == 0);

  // The fork handler builds nothing: no CUDA query, no cuBLAS load because of a fork.
  CHECK(in_child_process([] {
          { KSCOPE_SCOPE("registers the handlers"); }
          const bool cublas_loaded_before = dlopen("libcublas.so.13", RTLD_NOW | RTLD_NOLOAD) != nullptr;
          const pid_t pid = fork();
          const bool untouched = kscope::probed_gpu() == nullptr &&
                                 (cublas_loaded_before || dlopen("libcublas.so.13", RTLD_NOW | RTLD_NOLOAD) == nullptr);
          if (pid == 0) _exit(untouched ? 0 : 1);
          int status = 0;
          const bool child_ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                                WEXITSTATUS(status) == 0;
          return untouched && child_ok ? 0 : 1;
        }) == 0);
#endif
}

TEST_CASE("a child forked while other threads make their first kscope calls never hangs") {
#if !KSCOPE_TEST_HAVE_FORK
  MESSAGE("SKIPPED: no fork() on this platform");
#else
  const int trials = env_int("KSCOPE_FORK_RACE_TRIALS", 24);
  const int children = std::min(64, env_int("KSCOPE_FORK_RACE_CHILDREN", 6));
  const int timeout_s = env_int("KSCOPE_FORK_RACE_TIMEOUT_S", 10);
  const bool run_all = env_int("KSCOPE_FORK_RACE_ALL", 0) != 0;
  REQUIRE(call_count <= 64);

  auto* tally = static_cast<shared_tally*>(
      mmap(nullptr, sizeof(shared_tally), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  REQUIRE(tally != MAP_FAILED);
  new (tally) shared_tally();

  // The trials must start from a process in which no first call has run: this one.
  const auto start = std::chrono::steady_clock::now();
  int ran = 0;
  for (int t = 0; t < trials; ++t) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) run_trial(tally, 0x5eed0000u + static_cast<unsigned>(t), t % 4 == 3, children, timeout_s);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    ++ran;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) tally->broken_trials.fetch_add(1);
    if (!run_all && (tally->hung_trials.load() > 0 || tally->broken_trials.load() > 0)) break;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::string where;
  for (int i = 0; i < call_count; ++i)
    if (const int n = tally->hung_in[i].load(); n > 0) where += "\n  " + std::to_string(n) + " in " + first_calls[i].name;
  MESSAGE(ran << " trials, " << tally->grandchildren.load() << " grandchildren: " << tally->hung.load() << " hung ("
              << tally->hung_trials.load() << " trials), " << tally->failed.load() << " failed otherwise, "
              << tally->broken_trials.load() << " trials broken; " << seconds << " s" << where);
  CHECK(tally->hung.load() == 0);
  CHECK(tally->failed.load() == 0);
  CHECK(tally->broken_trials.load() == 0);
  munmap(tally, sizeof(shared_tally));
#endif
}
