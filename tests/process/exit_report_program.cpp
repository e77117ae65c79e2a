// A program that knows nothing of KSCOPE_REPORT: it opens a few scopes and exits. Run by
// exit_report_process_test.cpp with KSCOPE_REPORT set, in one of these ways (argv[1]):
//
//   normal   scopes, then return 0 from main
//   open     scopes, then exit(0) from inside a scope while another thread sits in one
//   status3  scopes, then exit(3): the report is written and the status stays 3
//   throw    a feature whose snapshot throws, so report() throws; return 0
//   fork     scopes, then a child that runs its own scope and exits through exit(0);
//            the parent waits for it, runs one more scope and returns 0
//
// It prints "pid=<pid>" (and "child=<pid>" when it forks) on stdout, so the test knows the
// file names a directory gets. Built with KSCOPE_EXIT_REPORT_PROGRAM_SCOPES_ONLY it uses
// scopes alone (no 'throw' mode): header-only with KSCOPE_NO_ENVIRONMENT_START, it then
// compiles the scopes, not the session and every printer.
#include <kscope/kscope.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

namespace {

void some_steps() {
  for (int i = 0; i < 5; ++i) {
    KSCOPE_SCOPE("step");
    KSCOPE_SCOPE("inner");
  }
}

#if !defined(KSCOPE_EXIT_REPORT_PROGRAM_SCOPES_ONLY)
// A feature whose part of the report fails: the report goes on without its section.
class failing_feature final : public kscope::session_feature {
 public:
  const char* name() const noexcept override { return "failing"; }
  std::unique_ptr<kscope::feature_section> snapshot(std::int64_t) override {
    throw std::runtime_error("the failing feature failed");
  }
};
#endif

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "normal";
  std::printf("pid=%lld\n", static_cast<long long>(::getpid()));
  std::fflush(stdout);
  some_steps();
  if (std::strcmp(mode, "open") == 0) {
    std::thread([] {
      KSCOPE_SCOPE("worker_open_at_exit");
      std::this_thread::sleep_for(std::chrono::hours(1));
    }).detach();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    KSCOPE_SCOPE("main_open_at_exit");
    std::exit(0);
  }
  if (std::strcmp(mode, "status3") == 0) std::exit(3);
  if (std::strcmp(mode, "throw") == 0) {
#if defined(KSCOPE_EXIT_REPORT_PROGRAM_SCOPES_ONLY)
    std::fprintf(stderr, "mode 'throw' needs the session: not in this build\n");
    return 5;
#else
    kscope::session::global().add_feature(std::make_shared<failing_feature>());
    return 0;
#endif
  }
  if (std::strcmp(mode, "fork") == 0) {
    const pid_t child = ::fork();
    if (child < 0) return 2;
    if (child == 0) {
      { KSCOPE_SCOPE("child_only"); }
      std::exit(0);
    }
    std::printf("child=%lld\n", static_cast<long long>(child));
    std::fflush(stdout);
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
    { KSCOPE_SCOPE("parent_only"); }
    return 0;
  }
  return 0;
}
