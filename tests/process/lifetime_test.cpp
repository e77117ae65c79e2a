// Scopes that run while the program or a thread is shutting down: from a static
// destructor, an atexit handler, a thread_local destructor (on the main thread and on a
// worker), and a pthread key destructor that may run after kscope freed the thread's
// state. Each must be recorded exactly once, never touch freed memory (run under
// MALLOC_PERTURB_ here, and under AddressSanitizer in the sanitizer build), and never
// crash the program.
//
// The process-exit cases can only be checked after main returns: a handler registered
// before anything else runs last, counts the late scopes and ends the process with
// exit status 1 if any is missing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <kscope/scope/recorder_snapshot.hpp>
#include <kscope/scope/scope.hpp>

#include <pthread.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

// A literal call site (the cached path) with a run-time-named child (the name lookup).
void late_work(const char* which) {
  KSCOPE_SCOPE("late");
  kscope::scope named{std::string(which)};
}

std::uint64_t calls_of(const std::string& name) {
  const kscope::recorder_snapshot data = kscope::recorder::global().snapshot();
  std::uint64_t calls = 0;
  for (const kscope::recorded_node& n : data.nodes)
    if (n.name == name) calls += n.calls;
  return calls;
}

struct runs_a_scope_when_destroyed {
  const char* which;
  ~runs_a_scope_when_destroyed() { late_work(which); }
};

void check_after_everything_else() {
  struct expectation {
    const char* name;
    std::uint64_t calls;
  };
  const expectation expected[] = {{"main_thread_local_destructor", 1}, {"static_destructor", 1}, {"atexit_handler", 1}};
  int missing = 0;
  for (const expectation& e : expected) {
    const std::uint64_t got = calls_of(e.name);
    if (got != e.calls) {
      std::fprintf(stderr, "lifetime_test: scope \"%s\" recorded %llu times at exit, expected %llu\n", e.name,
                   static_cast<unsigned long long>(got), static_cast<unsigned long long>(e.calls));
      ++missing;
    }
  }
  if (missing) {
    std::fflush(stderr);
    _exit(1);
  }
  std::printf("lifetime_test: every scope run during exit was recorded\n");
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("a scope in a worker's thread_local destructor is recorded") {
  const std::uint64_t before = calls_of("worker_thread_local_destructor");
  std::thread worker([] {
    // Constructed before the thread's first scope, so destroyed after kscope's own
    // per-thread objects would be, were they thread_local.
    thread_local runs_a_scope_when_destroyed user{"worker_thread_local_destructor"};
    (void)&user;
    KSCOPE_SCOPE("worker_body");
  });
  worker.join();
  CHECK(calls_of("worker_thread_local_destructor") == before + 1);
}

TEST_CASE("a scope in a pthread key destructor, before or after kscope's own, is recorded") {
  // Keys' destructors run in an order the program does not choose; one made before and
  // one after the thread's first scope cover both sides of kscope's.
  static pthread_key_t early_key, late_key;
  auto destructor = [](void* which) { late_work(static_cast<const char*>(which)); };
  REQUIRE(pthread_key_create(&early_key, destructor) == 0);
  const std::uint64_t before = calls_of("key_destructor");
  std::thread worker([destructor] {
    pthread_setspecific(early_key, const_cast<char*>("key_destructor"));
    KSCOPE_SCOPE("worker_body");
    if (pthread_key_create(&late_key, destructor) == 0) pthread_setspecific(late_key, const_cast<char*>("key_destructor"));
  });
  worker.join();
  CHECK(calls_of("key_destructor") == before + 2);
  pthread_key_delete(early_key);
  pthread_key_delete(late_key);
}

TEST_CASE("thousands of short-lived threads: every scope counted, every thread's state freed") {
  const std::uint64_t before = calls_of("short_lived");
  constexpr int threads = 2000;
  constexpr int scopes_per_thread = 3;
  for (int batch = 0; batch < threads / 8; ++batch) {
    std::vector<std::thread> pool;
    for (int i = 0; i < 8; ++i)
      pool.emplace_back([] {
        for (int k = 0; k < scopes_per_thread; ++k) {
          KSCOPE_SCOPE("short_lived");
        }
      });
    for (std::thread& t : pool) t.join();
  }
  CHECK(calls_of("short_lived") == before + static_cast<std::uint64_t>(threads) * scopes_per_thread);
}

int main(int argc, char** argv) {
  std::atexit(check_after_everything_else);  // registered first: runs last
  static runs_a_scope_when_destroyed static_user{"static_destructor"};
  thread_local runs_a_scope_when_destroyed main_thread_user{"main_thread_local_destructor"};
  (void)&main_thread_user;
  late_work("main");
  std::atexit([] { late_work("atexit_handler"); });
  doctest::Context context(argc, argv);
  return context.run();
}
