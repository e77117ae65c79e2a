// The peak kernels' PTX (device/detail/peak_kernels_ptx.hpp, written by
// cmake/generate_peak_kernels.sh) loads on every driver kscope supports: it declares PTX
// ISA 8.0 (CUDA 12.0, R525 drivers) or older and .target sm_80 (Ampere) or older, the
// constants beside it say what it declares, ptxas assembles it for each supported GPU,
// and a driver that refuses it gets a message naming the driver needed.
//
// The ptxas case needs the toolkit's ptxas: $KSCOPE_PTXAS, else the one beside the nvcc
// CMake found (KSCOPE_TEST_PTXAS), else /usr/local/cuda/bin/ptxas. Without one it prints
// "SKIPPED" and passes; ctest's peak_kernels_ptxas entry, which runs only that case,
// then reports Skipped. (Whether the header is what the generator writes is ctest's
// peak_kernels_ptx_generated: cmake/generate_peak_kernels.sh --check.)
#include <kscope/device/detail/peak_kernels_ptx.hpp>
#include <kscope/device/device.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <unistd.h>

#ifndef KSCOPE_TEST_PTXAS
#  define KSCOPE_TEST_PTXAS ""
#endif

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The first word after `directive` at the start of a line of the PTX ("" if none).
std::string directive_value(const std::string& ptx, const std::string& directive) {
  std::size_t at = 0;
  while (at < ptx.size()) {
    const std::size_t end = std::min(ptx.find('\n', at), ptx.size());
    const std::string line = ptx.substr(at, end - at);
    if (line.compare(0, directive.size() + 1, directive + " ") == 0) {
      const std::size_t first = line.find_first_not_of(" \t", directive.size());
      const std::size_t last = line.find_first_of(" \t\r", first);
      return first == std::string::npos ? std::string() : line.substr(first, last - first);
    }
    at = end + 1;
  }
  return {};
}

// "6.3" -> 603, so that versions compare as numbers; -1 if it is not major.minor.
int isa_number(const std::string& version) {
  const std::size_t dot = version.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 >= version.size()) return -1;
  for (std::size_t i = 0; i < version.size(); ++i)
    if (i != dot && (version[i] < '0' || version[i] > '9')) return -1;
  return std::atoi(version.substr(0, dot).c_str()) * 100 + std::atoi(version.substr(dot + 1).c_str());
}

// "sm_75" -> 75; -1 otherwise (a compute_ or family target is not what the generator writes).
int target_number(const std::string& target) {
  if (target.compare(0, 3, "sm_") != 0 || target.size() == 3) return -1;
  for (std::size_t i = 3; i < target.size(); ++i)
    if (target[i] < '0' || target[i] > '9') return -1;
  return std::atoi(target.c_str() + 3);
}

std::string ptxas_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const char* const candidates[] = {std::getenv("KSCOPE_PTXAS"), KSCOPE_TEST_PTXAS, "/usr/local/cuda/bin/ptxas"};
  for (const char* candidate : candidates) {
    if (candidate && *candidate && fs::is_regular_file(candidate, ec)) return candidate;
  }
  return {};
}

// Runs a shell command; its exit status, and stdout and stderr together in `output`.
int run(const std::string& command, std::string& output) {
  output.clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  return pclose(pipe);
}

// The oldest driver kscope supports is CUDA 12.0's (R525), which knows PTX ISA up to 8.0;
// the oldest GPU is Ampere (sm_80).
constexpr int oldest_supported_isa = 800;
constexpr int oldest_supported_gpu = 80;
constexpr int oldest_supported_driver_cuda_version = 12000;

}  // namespace

TEST_CASE("the peak kernels' PTX declares an ISA and target every supported driver and GPU accept") {
  const std::string ptx = kscope::detail::peak_kernels_ptx;
  const std::string version = directive_value(ptx, ".version");
  const std::string target = directive_value(ptx, ".target");
  INFO(".version ", version, ", .target ", target);
  REQUIRE(isa_number(version) > 0);
  REQUIRE(target_number(target) > 0);
  CHECK(isa_number(version) <= oldest_supported_isa);
  CHECK(target_number(target) <= oldest_supported_gpu);

  // The constants the loader quotes are the ones the text declares.
  CHECK(version == kscope::detail::peak_kernels_ptx_isa);
  CHECK(target == kscope::detail::peak_kernels_ptx_target);
  CHECK(kscope::detail::peak_kernels_ptx_driver_cuda_version > 0);
  CHECK(kscope::detail::peak_kernels_ptx_driver_cuda_version <= oldest_supported_driver_cuda_version);
  CHECK(std::string(kscope::detail::peak_kernels_ptx_driver_branch).compare(0, 1, "R") == 0);

  // One .version and one .target, and the three kernels measure_peaks() looks up.
  CHECK(ptx.find("\n.version ") == ptx.rfind("\n.version "));
  CHECK(ptx.find("\n.target ") == ptx.rfind("\n.target "));
  CHECK(contains(ptx, ".entry kscope_peak_copy("));
  CHECK(contains(ptx, ".entry kscope_peak_fma("));
  CHECK(contains(ptx, ".entry kscope_peak_fill("));
}

TEST_CASE("reading .version and .target") {
  CHECK(directive_value("//\n.version 6.3\n.target sm_75\n", ".version") == "6.3");
  CHECK(directive_value("//\n.version 6.3\n.target sm_75\n", ".target") == "sm_75");
  CHECK(directive_value("// .version 9.0\n", ".version").empty());  // a comment is not the directive
  CHECK(isa_number("8.0") == 800);
  CHECK(isa_number("9.0") > oldest_supported_isa);
  CHECK(isa_number("10.1") == 1001);
  CHECK(isa_number("x.1") == -1);
  CHECK(target_number("sm_120") == 120);
  CHECK(target_number("sm_90a") == -1);
  CHECK(target_number("compute_80") == -1);
}

TEST_CASE("ptxas assembles the peak kernels' PTX for every supported GPU") {
  const std::string ptxas = ptxas_path();
  if (ptxas.empty()) {
    std::printf("kscope peak_kernels_ptx_test: SKIPPED: no ptxas (set KSCOPE_PTXAS, or configure with the CUDA "
                "toolkit; looked beside the nvcc CMake found ('%s') and in /usr/local/cuda/bin)\n",
                KSCOPE_TEST_PTXAS);
    return;
  }
  namespace fs = std::filesystem;
  const fs::path file =
      fs::temp_directory_path() / ("kscope_peak_kernels_" + std::to_string(static_cast<long>(getpid())) + ".ptx");
  {
    std::ofstream out(file, std::ios::binary);
    out << kscope::detail::peak_kernels_ptx;
    REQUIRE(out.good());
  }
  std::string output;
  run("'" + ptxas + "' --version", output);
  MESSAGE("ptxas: ", ptxas, "\n", output);
  for (const int gpu : {80, 86, 89, 90, 100, 120}) {
    const std::string command = "'" + ptxas + "' -arch=sm_" + std::to_string(gpu) + " '" + file.string() +
                                "' -o /dev/null";
    const int status = run(command, output);
    INFO(command, "\n", output);
    if (status != 0 && contains(output, "is not defined for option 'gpu-name'")) {
      // An older toolkit (sm_100 and sm_120 need CUDA 12.8): nothing to check against.
      MESSAGE("this ptxas does not know sm_", gpu, ": not checked");
      continue;
    }
    CHECK(status == 0);
    CHECK_FALSE(contains(output, "error"));
  }
  std::error_code ec;
  fs::remove(file, ec);
}

#if KSCOPE_HAS_CUDA
TEST_CASE("a driver that refuses the PTX gets told which driver it needs") {
  using kscope::detail::peak_kernels_load_error;
  // The driver refuses an ISA it does not know when the kernel is first taken from the
  // library (cudaLibraryGetKernel), as an R580 driver does with .version 9.9.
  const std::string too_old = peak_kernels_load_error("cudaLibraryGetKernel", cudaErrorUnsupportedPtxVersion, 11080);
  INFO(too_old);
  CHECK(too_old.rfind("the NVIDIA driver (CUDA 11.8) is too old for the peak kernels' PTX (ISA ", 0) == 0);
  CHECK(contains(too_old, std::string("(ISA ") + kscope::detail::peak_kernels_ptx_isa + ", .target " +
                              kscope::detail::peak_kernels_ptx_target + ")"));
  CHECK(contains(too_old, "it needs a driver for CUDA " +
                              kscope::detail::cuda_version_text(kscope::detail::peak_kernels_ptx_driver_cuda_version) +
                              " (" + kscope::detail::peak_kernels_ptx_driver_branch + ") or newer; update the driver"));
  CHECK(contains(too_old, "[cudaLibraryGetKernel failed: cudaErrorUnsupportedPtxVersion"));  // the raw error, last

  CHECK(peak_kernels_load_error("cudaLibraryLoadData", cudaErrorUnsupportedPtxVersion, 0)
            .rfind("the NVIDIA driver is too old", 0) == 0);
  CHECK(contains(peak_kernels_load_error("cudaLibraryGetKernel", cudaErrorJitCompilationDisabled, 12020),
                 "PTX JIT compilation disabled"));
  CHECK(contains(peak_kernels_load_error("cudaLibraryGetKernel", cudaErrorJitCompilerNotFound, 12020),
                 "libnvidia-ptxjitcompiler"));
  CHECK(contains(peak_kernels_load_error("cudaLibraryGetKernel", cudaErrorInvalidPtx, 12020),
                 "could not JIT-compile"));
  // Anything else: the call and the raw error, as before.
  CHECK(peak_kernels_load_error("cudaLibraryLoadData", cudaErrorMemoryAllocation, 12020)
            .rfind("cudaLibraryLoadData failed: cudaErrorMemoryAllocation", 0) == 0);
}
#endif
