// The program tests/process/openmetrics_check.py runs (docs/openmetrics.md):
//   openmetrics_program hand-built        prints the exposition of the hand-built report of
//                                         tests/support/openmetrics_report.hpp
//   openmetrics_program run SECONDS       runs the scope "om_process/step" for SECONDS (a
//                                         call every 10 ms), prints its call count, returns
//                                         from main: with KSCOPE_METRICS set, the file is
//                                         rewritten meanwhile and once more at exit
//   openmetrics_program fork SECONDS      the same, and half way a child made by fork() runs
//                                         "om_child_only" and exits with exit(): its exit
//                                         handler must neither hang nor write the file;
//                                         exits 3 when the file shows the child's scope
#include <kscope/report/openmetrics.hpp>
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>

#include "../support/openmetrics_report.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace {

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "hand-built") == 0) {
    const std::string text = kscope::openmetrics(kscope_test::openmetrics_report());
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  if (argc < 3 || (std::strcmp(argv[1], "run") != 0 && std::strcmp(argv[1], "fork") != 0)) {
    std::fprintf(stderr, "usage: %s hand-built | run SECONDS | fork SECONDS\n", argv[0]);
    return 2;
  }
  const bool fork_half_way = std::strcmp(argv[1], "fork") == 0;
  const auto length = std::chrono::duration<double>(std::atof(argv[2]));
  const auto start = std::chrono::steady_clock::now();
  bool forked = false;
  unsigned long long calls = 0;
  KSCOPE_SCOPE("om_process");
  while (std::chrono::steady_clock::now() - start < length) {
    {
      KSCOPE_SCOPE("step");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ++calls;
    if (fork_half_way && !forked && std::chrono::steady_clock::now() - start > length / 2) {
      forked = true;
      const pid_t child = ::fork();
      if (child < 0) return 4;
      if (child == 0) {
        { KSCOPE_SCOPE("om_child_only"); }
        std::exit(0);  // runs the exit handlers the child inherited
      }
      int status = 0;
      if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 5;
      const char* path = std::getenv("KSCOPE_METRICS");
      if (path != nullptr && read_file(path).find("om_child_only") != std::string::npos) {
        std::fprintf(stderr, "openmetrics_program: the forked child wrote the metrics file\n");
        return 3;
      }
    }
  }
  std::printf("%llu\n", calls);
  return 0;
}
