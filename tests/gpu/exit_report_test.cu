// KSCOPE_REPORT on a GPU: the report written at exit keeps the stream scopes' CUDA-event
// times and, with KSCOPE_CUPTI=1, their kernels. That needs the exit handler to run before
// the CUDA runtime's own teardown (session/detail/exit_report.hpp). The case runs this
// executable again as a child, with KSCOPE_REPORT set; the child's case launches kernels in
// stream scopes and returns without synchronizing or asking for a report.
#include <kscope/kscope.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

constexpr const char* child_variable = "KSCOPE_TEST_EXIT_REPORT_CHILD";

bool is_child() { return std::getenv(child_variable) != nullptr; }

// Runs for `ns` nanoseconds of the GPU's global timer.
__global__ void spin_for(long long ns) {
  long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("exit report child: stream scopes, then exit with the kernels maybe still running" *
          doctest::skip(!is_child())) {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  for (int i = 0; i < 20; ++i) {
    kscope::scope s{"exit_step", stream};
    spin_for<<<1, 1, 0, stream>>>(20'000);
  }
}

TEST_CASE("KSCOPE_REPORT at exit keeps the GPU times and the kernels" * doctest::skip(is_child())) {
  char dir[] = "/tmp/kscope_gpu_exit_report_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  for (const char* cupti : {"0", "1"}) {
    CAPTURE(cupti);
    const std::string path = std::string(dir) + "/run" + cupti + ".json";
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setenv(child_variable, "1", 1);
      ::setenv("KSCOPE_REPORT", path.c_str(), 1);
      ::setenv("KSCOPE_CUPTI", cupti, 1);
      ::unsetenv("KSCOPE_PRODUCTION");
      ::unsetenv("KSCOPE_METRICS");
      ::alarm(120);
      ::execl("/proc/self/exe", "/proc/self/exe", "--test-case=exit report child*", static_cast<char*>(nullptr));
      ::_exit(121);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    const auto doc = nlohmann::json::parse(read_file(path));
    const nlohmann::json* step = nullptr;
    for (const auto& s : doc["scopes"])
      if (s["path"] == "exit_step") step = &s;
    REQUIRE(step != nullptr);
    CHECK((*step)["calls"] == 20);
    CHECK((*step)["gpu_calls"] == 20);
    REQUIRE((*step)["gpu_ns"].is_object());
    CHECK((*step)["gpu_ns"]["median"].get<double>() > 15'000);
    for (const auto& w : doc["warnings"]) CHECK(w.get<std::string>().find("CUDA event errors") == std::string::npos);
    CHECK(doc["context"]["gpu"].is_array());  // the devices were still there to describe
    if (std::string(cupti) == "1") {
      REQUIRE((*step)["gpu_activity"].is_object());
      CHECK((*step)["gpu_activity"]["kernel_count"] == 20);
    }
    std::remove(path.c_str());
  }
  ::rmdir(dir);
}
