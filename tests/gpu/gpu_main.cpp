// Runner for the GPU test executables: without a usable CUDA device every case would
// fail for a reason unrelated to kscope, so the executable says why (no driver, no
// device, a driver too old: kscope's own words, device/availability.hpp) and exits with
// 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <kscope/device/availability.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  const kscope::gpu_availability& gpu = kscope::probe_gpu();
  if (!gpu.available()) {
    std::printf("SKIP: %s (the GPU cases need a GPU)\n", gpu.message.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
