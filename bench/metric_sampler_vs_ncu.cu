// PM sampling (pm_sampling/sampler.hpp) on the GPU machine: what it costs the workload,
// and whether its per-phase values agree with Nsight Compute's for the same kernels.
//
//   metric_sampler_vs_ncu                 overhead, then the per-phase sampled values
//   metric_sampler_vs_ncu --plain         the kernels only (run under ncu by the script)
//
// Overhead: a GEMM + copy workload (10 x 1 GiB float4 copies, 5 x cuBLAS HGEMM 8192^3,
// about 50 ms on an H200) timed with CUDA events, 9 rounds per mode in an interleaved order
// (off, defaults, 20 µs continuous, off, ...); the statistic is the median per mode and the
// ratio of medians (on / off). Lines "PMBENCH overhead ...".
// Values: the copy and the HGEMM each run for ~0.3 s inside one long sampling window at
// 20 µs; the mean of the samples lying wholly inside each phase (two intervals of guard)
// is printed as "PMBENCH phase <name> <metric> <value>" for the script to set beside ncu.
#include <kscope/core/detail/clock.hpp>
#include <kscope/pm_sampling/sampler.hpp>
#include <kscope/device/detail/cublas_loader.hpp>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define PMBENCH_CHECK(call)                                                              \
  do {                                                                                  \
    const cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));           \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

__global__ void copy_float4(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}

__global__ void fill_halves(__half* p, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = __float2half(static_cast<float>(i % 17) / 17.0f - 0.5f);
}

struct workload {
  cudaStream_t stream = nullptr;
  float4 *src = nullptr, *dst = nullptr;
  std::size_t n4 = 0;
  int blocks = 0;
  __half *a = nullptr, *b = nullptr, *c = nullptr;
  void* handle = nullptr;
  const kscope::detail::cublas_api* blas = nullptr;
  static constexpr int n = 8192;

  workload() {
    cudaDeviceProp prop{};
    PMBENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
    PMBENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const std::size_t bytes = std::size_t(1) << 30;
    PMBENCH_CHECK(cudaMalloc(&src, bytes));
    PMBENCH_CHECK(cudaMalloc(&dst, bytes));
    PMBENCH_CHECK(cudaMemset(src, 0x3c, bytes));
    n4 = bytes / sizeof(float4);
    blocks = prop.multiProcessorCount * 8;
    blas = &kscope::detail::cublas();
    if (!blas->ok()) {
      std::fprintf(stderr, "cuBLAS not loaded: %s\n", blas->error.c_str());
      std::exit(2);
    }
    const std::size_t hb = std::size_t(n) * n * sizeof(__half);
    PMBENCH_CHECK(cudaMalloc(&a, hb));
    PMBENCH_CHECK(cudaMalloc(&b, hb));
    PMBENCH_CHECK(cudaMalloc(&c, hb));
    fill_halves<<<1024, 256, 0, stream>>>(a, hb / sizeof(__half));
    fill_halves<<<1024, 256, 0, stream>>>(b, hb / sizeof(__half));
    if (blas->create(&handle) != kscope::detail::cublas_abi::status_success ||
        blas->set_stream(handle, stream) != kscope::detail::cublas_abi::status_success) {
      std::fprintf(stderr, "cublasCreate failed\n");
      std::exit(2);
    }
    copies(1);
    gemms(1);
    PMBENCH_CHECK(cudaStreamSynchronize(stream));
  }
  void copies(int count) {
    for (int i = 0; i < count; ++i) copy_float4<<<blocks, 256, 0, stream>>>(src, dst, n4);
  }
  void gemms(int count) {
    namespace abi = kscope::detail::cublas_abi;
    const float alpha = 1.0f, beta = 0.0f;
    for (int i = 0; i < count; ++i)
      (void)blas->gemm_ex(handle, abi::op_n, abi::op_n, n, n, n, &alpha, a, abi::r_16f, n, b, abi::r_16f, n, &beta, c,
                          abi::r_16f, n, abi::compute_32f, abi::gemm_default);
  }
  // One timed round of the mixed workload, ms (CUDA events).
  float round_ms() {
    cudaEvent_t e0, e1;
    PMBENCH_CHECK(cudaEventCreate(&e0));
    PMBENCH_CHECK(cudaEventCreate(&e1));
    PMBENCH_CHECK(cudaEventRecord(e0, stream));
    copies(10);
    gemms(5);
    PMBENCH_CHECK(cudaEventRecord(e1, stream));
    PMBENCH_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    PMBENCH_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    (void)cudaEventDestroy(e0);
    (void)cudaEventDestroy(e1);
    return ms;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

}  // namespace

int main(int argc, char** argv) {
  const bool plain = argc > 1 && std::strcmp(argv[1], "--plain") == 0;
  workload w;
  if (plain) {  // for ncu: three copies, three HGEMMs
    w.copies(3);
    w.gemms(3);
    PMBENCH_CHECK(cudaStreamSynchronize(w.stream));
    return 0;
  }

  // ---- overhead
  struct mode {
    const char* name;
    bool on;
    kscope::metric_sampler_options options;
    std::vector<double> ms;
  };
  std::vector<mode> modes(3);
  modes[0].name = "off";
  modes[0].on = false;
  modes[1].name = "defaults";
  modes[1].on = true;
  modes[2].name = "20us_continuous";
  modes[2].on = true;
  modes[2].options.interval_ns = 20'000;
  modes[2].options.window = std::chrono::milliseconds(0);
  for (int round = 0; round < 9; ++round) {
    for (mode& m : modes) {
      kscope::metric_sampler sampler;
      if (m.on && !sampler.start(m.options)) {
        std::printf("PMBENCH not started: %s\n", sampler.status().message.c_str());
        return 1;
      }
      // Three rounds inside one sampler run: the first takes the start-up, the median the rest.
      std::vector<double> inner;
      for (int i = 0; i < 3; ++i) inner.push_back(w.round_ms());
      m.ms.push_back(median({inner[1], inner[2]}));
      sampler.stop();
    }
  }
  const double off = median(modes[0].ms);
  for (const mode& m : modes)
    std::printf("PMBENCH overhead %-16s median %.3f ms over %zu rounds, ratio to off %.4f\n", m.name, median(m.ms),
                m.ms.size(), median(m.ms) / off);

  // ---- per-phase values in one long window at 20 µs
  kscope::metric_sampler sampler;
  kscope::metric_sampler_options options;
  options.interval_ns = 20'000;
  options.window = std::chrono::milliseconds(10'000);
  if (!sampler.start(options)) {
    std::printf("PMBENCH not started: %s\n", sampler.status().message.c_str());
    return 1;
  }
  struct phase {
    const char* name;
    std::int64_t start = 0, end = 0;
  };
  std::vector<phase> phases = {{"copy"}, {"hgemm"}};
  for (phase& p : phases) {
    PMBENCH_CHECK(cudaStreamSynchronize(w.stream));
    p.start = kscope::detail::now_ns();
    if (std::strcmp(p.name, "copy") == 0)
      w.copies(30);
    else
      w.gemms(25);
    PMBENCH_CHECK(cudaStreamSynchronize(w.stream));
    p.end = kscope::detail::now_ns();
  }
  sampler.stop();
  const kscope::metric_sampler_status st = sampler.status();
  const std::vector<kscope::metric_sample> samples = sampler.samples();
  std::printf("PMBENCH sampler: %s\n", st.message.c_str());
  const std::int64_t guard = 2 * static_cast<std::int64_t>(options.interval_ns) + 200'000;
  for (const phase& p : phases) {
    std::vector<double> sum(st.metrics.size(), 0.0);
    std::size_t count = 0;
    for (const kscope::metric_sample& s : samples) {
      if (s.start_ns < p.start + guard || s.end_ns > p.end - guard) continue;
      ++count;
      for (std::size_t m = 0; m < st.metrics.size(); ++m) sum[m] += s.values[m];
    }
    std::printf("PMBENCH phase %s samples %zu ms %.2f\n", p.name, count, (p.end - p.start) / 1e6);
    for (std::size_t m = 0; m < st.metrics.size(); ++m)
      std::printf("PMBENCH phase %s %s %.4f\n", p.name, st.metrics[m].c_str(), count ? sum[m] / count : 0.0);
  }
  return 0;
}
