// Runner for the GPU test executables: without a usable CUDA device every case would
// fail for a reason unrelated to kscope, so the executable says why and exits with 77,
// which ctest reports as "Skipped" (SKIP_RETURN_CODE).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include <cuda_runtime_api.h>

int main(int argc, char** argv) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("SKIP: no usable CUDA device (%s); GPU cases need one\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
