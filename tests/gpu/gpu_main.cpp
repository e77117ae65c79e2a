// Runner for the GPU test executables. Exit codes, as ctest reads them:
//   0   every case ran and passed;
//   77  ("Skipped", SKIP_RETURN_CODE) no usable CUDA device (kscope's own words for why:
//       no driver, no device, a driver too old; device/availability.hpp), or no case failed
//       but at least one could not run: a feature the expectations table does not expect on
//       this device, or a need the device cannot meet (two GPUs). One "SKIP: <case>:
//       <reason>" line per such case comes last, for bench/gpu_tests.sh to judge;
//   other: a case failed (doctest's code).
// A case that could not run is never a pass: see expectations.hpp.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <kscope/device/availability.hpp>

#include "expectations.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace {

// Tells expectations.hpp which case runs, so that a case that cannot run is named.
struct case_tracker : doctest::IReporter {
  explicit case_tracker(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& in) override { kscope_test::detail::set_current_case(in.m_name); }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override { kscope_test::detail::set_current_case(""); }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("kscope_gpu_case_tracker", 1, case_tracker);

int main(int argc, char** argv) {
  const kscope::gpu_availability& gpu = kscope::probe_gpu();
  if (!gpu.available()) {
    std::printf("SKIP: %s (the GPU cases need a GPU)\n", gpu.message.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;  // --help, --list-test-cases, ...
  // The table's answer for this device, where a case asked it.
  if (kscope_test::detail::facts_were_read()) std::printf("%s\n", kscope_test::expectation_line().c_str());
  const std::vector<std::string> skipped = kscope_test::detail::skipped_cases();
  for (const std::string& line : skipped) std::printf("SKIP: %s\n", line.c_str());
  std::fflush(stdout);
  if (result != 0) return result;
  return skipped.empty() ? 0 : 77;
}
