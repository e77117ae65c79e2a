// Compiles the umbrella header with nvcc, in a translation unit that has device code.
#include <kscope/kscope.hpp>

__global__ void kscope_header_check_kernel(int* out) { out[threadIdx.x] = 1; }

int kscope_header_check_anchor_cuda() { return KSCOPE_VERSION_MAJOR; }
