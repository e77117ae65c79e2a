// A CUDA consumer: kscope.hpp in a translation unit with device code, in the compiled mode
// (it links kscope::compiled, which gives it KSCOPE_SEPARATE_COMPILATION: nvcc parses the
// declarations and the inline hot paths, the library holds the definitions). With the CUDA
// language enabled this is the consumer program the packaging test builds and runs.
#include <kscope/kscope.hpp>

#include <cstdio>
#include <vector>

#ifndef KSCOPE_SEPARATE_COMPILATION
#  error "kscope::compiled must define KSCOPE_SEPARATE_COMPILATION for its consumers"
#endif

__global__ void consumer_kernel(float* x) { x[threadIdx.x] *= 2.0f; }

int main() {
  kscope::work w{2.0, 8.0};
  std::vector<double> samples{5, 1, 4, 2, 3, 3, 3, 2, 4, 3};
  const kscope::summary s = kscope::summarize(samples, {0.95, false});
  std::printf("median %.1f over %zu samples\n", s.median, s.n);
  return w.flops == 2.0 && s.median == 3.0 ? 0 : 1;
}
