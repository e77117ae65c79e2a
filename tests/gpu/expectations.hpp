// What must work on the GPU a test runs on, and what a case does when it does not.
//
// A refusal is not a pass. Where this table expects a feature (by the device's compute
// capability and the CUPTI that loads), a refusal from kscope ("unsupported device",
// "disabled", "busy", "no permission", "failed") is a test failure naming the call, the
// state and kscope's message (which names the CUPTI call and its error). Where the table
// does not expect it (an architecture or CUPTI nobody measured), the case records why it
// did not run and returns; the GPU test main (gpu_main.cpp) then prints a "SKIP: <case>:
// <reason>" line per such case and exits 77 (ctest's "Skipped") unless a case failed,
// never 0. A case that cannot run for another reason (two GPUs needed, one present) says so
// with skip_case().
//
//   TEST_CASE("PC sampling of a GEMM") {
//     KSCOPE_TEST_NEEDS(kscope_test::feature::pc_sampling);        // 77 where not expected
//     const kscope::warp_stall_result r = kscope::profile_warp_stalls(work);
//     if (!r.ok())                                                  // FAIL where expected
//       KSCOPE_TEST_REFUSED(kscope_test::feature::pc_sampling, "profile_warp_stalls",
//                           kscope::to_string(r.state), r.message);
//     ...
//   }
//
// The table (expectation_table below) holds only what was seen working: a new row needs a
// GPU run of the whole suite on that architecture and CUPTI (bench/gpu_tests.sh).
#pragma once

#include <kscope/cupti/detail/api.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

namespace kscope_test {

// The features a GPU case may need.
enum class feature : std::uint8_t {
  activity,     // the CUPTI activity collector: kernels, copies, memsets, synchronizations
  graph_trace,  // CUPTI's graph-level trace (one record per graph replay; graphs sampled)
  counters,     // hardware counters through the range profiler (profile_counters, per scope)
  pm_sampling,  // PM sampling (metric_sampler, session::enable_metric_sampling)
  pc_sampling,  // PC sampling (profile_warp_stalls)
  cublas,       // cuBLAS, loaded at run time (ships with the CUDA toolkit the tests were built with)
};

inline constexpr feature all_features[] = {feature::activity,    feature::graph_trace, feature::counters,
                                           feature::pm_sampling, feature::pc_sampling, feature::cublas};

[[nodiscard]] constexpr const char* to_string(feature f) noexcept {
  switch (f) {
    case feature::activity: return "activity tracing";
    case feature::graph_trace: return "graph-level trace";
    case feature::counters: return "hardware counters (range profiler)";
    case feature::pm_sampling: return "PM sampling";
    case feature::pc_sampling: return "PC sampling (warp stalls)";
    case feature::cublas: return "cuBLAS";
  }
  return "?";
}

[[nodiscard]] constexpr std::uint32_t bit(feature f) noexcept { return 1u << static_cast<unsigned>(f); }

// One row: the features seen working on an architecture (cc_major < 0: any) with a CUPTI
// whose cuptiGetVersion lies in [min_cupti, end_cupti).
struct expectation_row {
  int cc_major;
  int cc_minor;
  std::uint32_t min_cupti;
  std::uint32_t end_cupti;
  std::uint32_t features;
  const char* seen;  // where and how the row was established
};

inline constexpr std::uint32_t every_feature = bit(feature::activity) | bit(feature::graph_trace) |
                                               bit(feature::counters) | bit(feature::pm_sampling) |
                                               bit(feature::pc_sampling);

// cuptiGetVersion: 130000 is CUDA 13.0, 130001 13.0 Update 1 (cupti_version.h).
inline constexpr expectation_row expectation_table[] = {
    {9, 0, 130000, 140000, every_feature,
     "Hopper (sm_90) with CUPTI 13: every feature measured on the lent H100 and H200 (bench/RESULTS.md)"},
    // The activity collector has been required on every GPU the suite ran on.
    {-1, 0, 1, 0xffffffffu, bit(feature::activity), "any architecture with a CUPTI that loads"},
};

// The device the cases run on (the current device) and the CUPTI kscope loads.
struct gpu_facts {
  bool device_known = false;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  std::uint32_t cupti_version = 0;  // 0: libcupti did not load (cupti_problem says why)
  std::string cupti_path;
  std::string cupti_problem;
  std::string device_problem;

  // "NVIDIA H100 80GB HBM3 (sm_90, CUPTI 130001)"
  [[nodiscard]] std::string describe() const {
    std::string out = device_known ? name + " (sm_" + std::to_string(cc_major) + std::to_string(cc_minor)
                                   : "no device (" + device_problem;
    out += cupti_version != 0 ? ", CUPTI " + std::to_string(cupti_version) + ")"
                              : ", CUPTI not loaded: " + cupti_problem + ")";
    return out;
  }
};

namespace detail {

struct expectation_state {
  std::mutex mutex;
  bool facts_read = false;
  std::string current_case;           // set by gpu_main.cpp's listener
  std::vector<std::string> skipped;   // "<case>: <reason>"
};

inline expectation_state& state() {
  static expectation_state s;
  return s;
}

inline gpu_facts read_facts() {
  gpu_facts f;
  int device = 0;
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDevice(&device);
  const cudaError_t p = e == cudaSuccess ? cudaGetDeviceProperties(&prop, device) : e;
  if (p == cudaSuccess) {
    f.device_known = true;
    f.name = prop.name;
    f.cc_major = prop.major;
    f.cc_minor = prop.minor;
  } else {
    f.device_problem = cudaGetErrorName(p);
    (void)cudaGetLastError();
  }
  kscope::detail::cupti_api api;  // the same search kscope's features use
  if (kscope::detail::load_cupti(api, "", f.cupti_problem)) {
    f.cupti_version = api.version;
    f.cupti_path = api.path;
    if (f.cupti_version == 0) f.cupti_problem = api.path + " does not say its version (no cuptiGetVersion)";
  }
  return f;
}

}  // namespace detail

// Read once, at the first question (not before main runs the cases: nothing here may load
// a module or start CUPTI ahead of a case that watches for it).
inline const gpu_facts& facts() {
  static const gpu_facts f = [] {
    gpu_facts read = detail::read_facts();
    std::lock_guard<std::mutex> lock(detail::state().mutex);
    detail::state().facts_read = true;
    return read;
  }();
  return f;
}

// The table's row that expects `f` on this device, or nullptr.
inline const expectation_row* expecting_row(feature f) {
  const gpu_facts& g = facts();
  if (f == feature::cublas) return nullptr;
  for (const expectation_row& row : expectation_table) {
    if ((row.features & bit(f)) == 0) continue;
    if (row.cc_major >= 0 && (!g.device_known || row.cc_major != g.cc_major || row.cc_minor != g.cc_minor)) continue;
    if (g.cupti_version < row.min_cupti || g.cupti_version >= row.end_cupti) continue;
    return &row;
  }
  return nullptr;
}

// Whether `f` must work here. cuBLAS is expected wherever there is a device: it ships with
// the toolkit that built these tests, and the GPU machine has it.
[[nodiscard]] inline bool expected(feature f) {
  if (f == feature::cublas) return facts().device_known;
  return expecting_row(f) != nullptr;
}

// "expected: activity tracing, ...; not expected: ..." for this device.
[[nodiscard]] inline std::string expectation_line() {
  std::string yes, no;
  for (feature f : all_features) {
    std::string& list = expected(f) ? yes : no;
    if (!list.empty()) list += ", ";
    list += to_string(f);
  }
  return "GPU expectations (tests/gpu/expectations.hpp) on " + facts().describe() + ": expected: " +
         (yes.empty() ? "none" : yes) + "; not expected: " + (no.empty() ? "none" : no);
}

// The case that is running cannot: recorded (main exits 77 with the reason unless a case
// failed) and printed now. The caller returns from the case.
inline void skip_case(const std::string& reason) {
  std::lock_guard<std::mutex> lock(detail::state().mutex);
  const std::string& name = detail::state().current_case;
  const std::string line = (name.empty() ? std::string("(outside a case)") : name) + ": " + reason;
  detail::state().skipped.push_back(line);
  std::printf("kscope_test: case not run: %s\n", line.c_str());
  std::fflush(stdout);
}

// Whether the case may go on: true where `f` is expected; elsewhere the case is recorded as
// not run, with the device and the reason, and false comes back (KSCOPE_TEST_NEEDS returns).
[[nodiscard]] inline bool needs(feature f) {
  if (expected(f)) return true;
  skip_case(std::string(to_string(f)) + " is not expected to work on " + facts().describe() +
            " (no row of tests/gpu/expectations.hpp lists it)");
  return false;
}

// A kscope call refused, or a feature did not start. Where `f` is expected: a failure that
// ends the case, at `file`:`line` (KSCOPE_TEST_REFUSED passes the caller's), naming the
// call, the state and kscope's message. Elsewhere: the case is recorded as not run and the
// caller returns (KSCOPE_TEST_REFUSED does).
inline void refused(feature f, const std::string& call, const std::string& state, const std::string& message,
                    const char* file = __FILE__, int line = __LINE__) {
  if (expected(f)) {
    const expectation_row* row = expecting_row(f);
    const std::string why = call + " refused on " + facts().describe() + ", where " + to_string(f) +
                            " is expected to work (" +
                            (row != nullptr ? row->seen : "tests/gpu/expectations.hpp") + "): state \"" + state +
                            "\": " + message;
    ADD_FAIL_AT(file, line, why);
  }
  skip_case(call + " refused (" + state + ": " + message + "); " + to_string(f) + " is not expected on " +
            facts().describe());
}

// For gpu_main.cpp.
namespace detail {
inline void set_current_case(const std::string& name) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().current_case = name;
}
inline std::vector<std::string> skipped_cases() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().skipped;
}
inline bool facts_were_read() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().facts_read;
}
}  // namespace detail

// Runs this test binary again, in a child process, on the cases `test_case_filter` names
// (doctest's --test-case pattern), with `environment` ("NAME=value" entries) as its whole
// environment, ended by SIGALRM after `alarm_s` seconds. Everything is built here, before the
// fork: the child of a threaded parent allocates nothing before its exec. Returns the
// child's wait status; -1 where fork failed or the wait was lost.
inline int run_cases_in_child(const std::string& test_case_filter, const std::vector<std::string>& environment,
                              unsigned alarm_s) {
  std::vector<char*> envp;
  for (const std::string& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  std::string filter = "--test-case=" + test_case_filter;
  char* argv[] = {self.data(), filter.data(), nullptr};
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::alarm(alarm_s);
    ::execve(argv[0], argv, envp.data());
    ::_exit(121);
  }
  int status = 0;
  pid_t waited = -1;
  do waited = ::waitpid(pid, &status, 0);
  while (waited < 0 && errno == EINTR);
  return waited == pid ? status : -1;
}

// This process's environment less the variables `removed` names, plus `added` ("NAME=value").
inline std::vector<std::string> environment_with(std::initializer_list<const char*> removed,
                                                 std::initializer_list<std::string> added) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool keep = true;
    for (const char* name : removed)
      if (entry.compare(0, std::strlen(name), name) == 0 && entry.size() > std::strlen(name) &&
          entry[std::strlen(name)] == '=')
        keep = false;
    if (keep) out.push_back(entry);
  }
  out.insert(out.end(), added.begin(), added.end());
  return out;
}

}  // namespace kscope_test

// Ends the case (it returns) where the feature is not expected; see needs().
#define KSCOPE_TEST_NEEDS(f)                       \
  do {                                             \
    if (!::kscope_test::needs(f)) return;          \
  } while (0)

// A refusal: a failure where the feature is expected, else the case is recorded as not run
// and returns; see refused().
#define KSCOPE_TEST_REFUSED(f, call, state, message)                            \
  do {                                                                          \
    ::kscope_test::refused((f), (call), (state), (message), __FILE__, __LINE__); \
    return;                                                                     \
  } while (0)
