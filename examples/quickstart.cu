// kscope quickstart: a toy inference loop with its phases marked by scopes.
//
// With a CUDA device the GPU phases run real kernels and copies on a stream and the
// report shows their GPU time next to the host time; without one (or built without
// CUDA) the same program times its CPU phases, and the report says once why there is no
// GPU (no NVIDIA driver, no device, a driver too old).
#include <kscope/kscope.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#if defined(__CUDACC__)
// y = a*x + y over n elements: 2 flops and 12 bytes per element.
__global__ void saxpy(int n, float a, const float* x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

// A compute-heavy stand-in for a decode step: many FMAs per element loaded.
__global__ void decode_step(int n, float* state) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = state[i];
  for (int k = 0; k < 256; ++k) v = v * 0.999f + 0.001f;
  state[i] = v;
}
#endif

namespace {

// Busy CPU work of roughly `us` microseconds (tokenizing, sampling...).
double cpu_work(double us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(static_cast<long long>(us * 1000));
  double acc = 0;
  while (std::chrono::steady_clock::now() < until) acc += std::sqrt(acc + 1.0);
  return acc;
}

}  // namespace

int main() {
  double sink = 0;
#if defined(__CUDACC__)
  // Whether there is a usable GPU; when not, the report's GPU line says why.
  const bool gpu = kscope::probe_gpu().available();
  const int n = 1 << 24;  // 64 MiB per vector
  float *x = nullptr, *y = nullptr;
  float* host = nullptr;  // pinned, so copies are asynchronous like an engine's
  cudaStream_t stream = nullptr;
  if (gpu) {
    // Every kernel and copy is then attributed to the scope that launched it.
    kscope::session::global().enable_cupti();
    cudaMallocHost(&host, sizeof(float) * n);
    for (int i = 0; i < n; ++i) host[i] = 1.0f;
    cudaStreamCreate(&stream);
    cudaMalloc(&x, sizeof(float) * n);
    cudaMalloc(&y, sizeof(float) * n);
    cudaMemset(y, 0, sizeof(float) * n);
  }
#else
  const bool gpu = false;
#endif

  for (int step = 0; step < 40; ++step) {
    KSCOPE_SCOPE("request");
    { KSCOPE_SCOPE("tokenize"); sink += cpu_work(50); }
#if defined(__CUDACC__)
    if (gpu) {
      {
        kscope::scope s{"h2d", stream};
        cudaMemcpyAsync(x, host, sizeof(float) * n, cudaMemcpyHostToDevice, stream);
      }
      {
        kscope::scope s{"prefill", stream};
        s.set_work({2.0 * n, 12.0 * n});
        saxpy<<<1024, 256, 0, stream>>>(n, 2.0f, x, y);
      }
      {
        kscope::scope s{"decode", stream};
        s.set_work({8 * 512.0 * n, 8 * 8.0 * n});
        for (int t = 0; t < 8; ++t) decode_step<<<(n + 255) / 256, 256, 0, stream>>>(n, y);
      }
      {
        kscope::scope s{"d2h", stream};
        cudaMemcpyAsync(host, y, sizeof(float) * 1024, cudaMemcpyDeviceToHost, stream);
        const cudaError_t synced = cudaStreamSynchronize(stream);
        // A kernel built for another GPU (no image for this one), or one that faulted,
        // shows here: say so instead of printing a report of work that did not run.
        const cudaError_t launched = cudaGetLastError();
        if (synced != cudaSuccess || launched != cudaSuccess) {
          const cudaError_t e = launched != cudaSuccess ? launched : synced;
          std::fprintf(stderr, "quickstart: a kernel did not run: %s (%s); rebuild for this GPU with "
                               "-DCMAKE_CUDA_ARCHITECTURES=native\n", cudaGetErrorName(e), cudaGetErrorString(e));
          return 1;
        }
      }
    } else
#endif
    {
      KSCOPE_SCOPE("forward_cpu");
      sink += cpu_work(400);
    }
    { KSCOPE_SCOPE("sample"); sink += cpu_work(30); }
  }

  const kscope::session_report report = kscope::session::global().report();
  std::fputs(report.text().c_str(), stdout);
  if (!gpu)
    std::puts("\nOnly host phases were timed (no usable GPU: the GPU line above says why). With\n"
              "a GPU, stream scopes get CUDA-event times and CUPTI attributes kernels to scopes.");
  // The same report as JSON (docs/report_schema.md) and as an HTML page with the roofline
  // picture; the timeline as a Chrome trace (open it in ui.perfetto.dev).
  report.write_json("quickstart_report.json");
  report.write_html("quickstart_report.html");
  kscope::session::global().write_trace("quickstart_trace.json");
#if defined(__CUDACC__)
  if (gpu) {
    cudaFreeHost(host);
    cudaFree(x);
    cudaFree(y);
    cudaStreamDestroy(stream);
  }
#endif
  return sink < 0;  // keep the CPU work observable
}
