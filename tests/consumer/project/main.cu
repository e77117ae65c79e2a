// A CUDA consumer: kscope.hpp in a translation unit with device code.
#include <kscope/kscope.hpp>

__global__ void consumer_kernel(float* x) { x[threadIdx.x] *= 2.0f; }

int main() {
  kscope::work w{2.0, 8.0};
  return w.flops == 2.0 ? 0 : 1;
}
