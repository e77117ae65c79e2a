// fork() while other threads are inside scopes and a reporter thread takes snapshots:
// the child inherits every kscope lock in whatever state it was, and only the forking
// thread. Each child runs a scope and takes a snapshot; it must finish (an alarm turns a
// deadlock into a failed child rather than a hung test) and see its own scope.
#include <doctest/doctest.h>

#include <kscope/scope/recorder_snapshot.hpp>
#include <kscope/scope/scope.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {

std::uint64_t calls_of(const kscope::recorder_snapshot& data, const std::string& name) {
  std::uint64_t calls = 0;
  for (const kscope::recorded_node& n : data.nodes)
    if (n.name == name) calls += n.calls;
  return calls;
}

}  // namespace

TEST_CASE("children forked while threads record and a reporter snapshots never deadlock") {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&stop, t] {
      const std::string name = "busy_" + std::to_string(t);  // run-time names take the lock on new nodes
      std::uint64_t i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        KSCOPE_SCOPE("busy");
        kscope::scope inner{name + "_" + std::to_string(i++ % 64)};
      }
    });
  threads.emplace_back([&stop] {
    while (!stop.load(std::memory_order_relaxed)) (void)kscope::recorder::global().snapshot();
  });

  constexpr int children = 40;
  int finished = 0;
  for (int c = 0; c < children; ++c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      alarm(10);  // a deadlocked child dies of SIGALRM instead of hanging the test
      { KSCOPE_SCOPE("in_child"); }
      const kscope::recorder_snapshot data = kscope::recorder::global().snapshot();
      _exit(calls_of(data, "in_child") == 1 ? 0 : 2);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ++finished;
    } else {
      const std::string how = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                  : "exited with " + std::to_string(WEXITSTATUS(status));
      MESSAGE("child " << c << " " << how);
    }
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  CHECK(finished == children);
}
