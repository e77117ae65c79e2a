// Probe (issue 39, item 5): what the per-scope counters measure, and what the activity
// collector still receives, in each way a profiled call can be replayed. One mode per
// process (CUPTI's state is per process):
//   kernel    every profiled call by kernel replay, every metric (the bench's set)
//   onepass   the default: one-pass groups rotating over the calls
//   nosass    one-pass groups without the SASS instruction counters (those run under kernel
//             replay while the collector traces)
//   many      300 tiny kernels per call, kernel replay: the image's capacity
//   many1     300 tiny kernels per call, one-pass groups: the image grown after the first call
//   nokeep    as onepass, with keep_profiler off (each call sets CUPTI up afresh)
// Scopes: `transpose` (a naive 8192^2 transpose: L2-bound, Nsight Compute L2 ~80 %) and `mma`
// (a WMMA fp16 kernel: tensor FLOPs exactly 2 m n k per call). Prints "PROBE" lines: the
// records the collector saw, each scope's rollups, tensor FLOPs, verdict and cost.
//   nvcc -O2 -std=c++17 -arch=sm_90 -Iinclude bench/scope_counters_modes_probe.cu -lcuda -ldl -o scm_probe
//   ./scm_probe kernel
#include <kscope/kscope.hpp>

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

__global__ void probe_transpose(const float* __restrict__ in, float* __restrict__ out, int nx, int ny) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= nx || y >= ny) return;
  out[static_cast<std::size_t>(x) * ny + y] = in[static_cast<std::size_t>(y) * nx + x];
}

// One warp per 16x16 output tile, k in steps of 16: 2 * 16 * 16 * 16 FLOP per mma_sync.
__global__ void probe_wmma(const __half* a, const __half* b, float* c, int m, int n, int k) {
  using namespace nvcuda;
  const int tile_m = blockIdx.y, tile_n = blockIdx.x;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  for (int kk = 0; kk < k; kk += 16) {
    wmma::load_matrix_sync(fa, a + static_cast<std::size_t>(tile_m) * 16 * k + kk, k);
    wmma::load_matrix_sync(fb, b + static_cast<std::size_t>(tile_n) * 16 * k + kk, k);
    wmma::mma_sync(fc, fa, fb, fc);
  }
  wmma::store_matrix_sync(c + static_cast<std::size_t>(tile_m) * 16 * n + tile_n * 16, fc, n, wmma::mem_row_major);
}

__global__ void probe_tiny(float* x) {
  if (threadIdx.x == 0) x[blockIdx.x] += 1.0f;
}

void show(const kscope::session_report& r, const char* name) {
  const kscope::scope_report* s = r.find(name);
  if (s == nullptr) {
    std::printf("PROBE %s: not in the report\n", name);
    return;
  }
  std::printf("PROBE %s: calls %llu profiled %llu kernels(activity) %llu\n", name,
              static_cast<unsigned long long>(s->calls), static_cast<unsigned long long>(s->profiled_calls),
              static_cast<unsigned long long>(s->gpu_activity ? s->gpu_activity->kernel_count : 0));
  if (!s->counters) {
    std::printf("PROBE %s: no counters\n", name);
    return;
  }
  const kscope::scope_counter_report& c = *s->counters;
  std::printf("PROBE %s: counters profiled %llu failed %llu kernels %llu dropped %llu groups %zu\n", name,
              static_cast<unsigned long long>(c.profiled_calls), static_cast<unsigned long long>(c.failed_calls),
              static_cast<unsigned long long>(c.kernels), static_cast<unsigned long long>(c.kernels_dropped), c.groups);
  for (kscope::counter_metric id :
       {kscope::counter_metric::sm_throughput, kscope::counter_metric::memory_throughput,
        kscope::counter_metric::l2_throughput, kscope::counter_metric::l1_throughput,
        kscope::counter_metric::dram_throughput, kscope::counter_metric::tensor_fp16_flops,
        kscope::counter_metric::tensor_pipe_active, kscope::counter_metric::fp32_fma}) {
    std::printf("PROBE %s:   %s = %.6g (as %s)\n", name, std::string(kscope::metric_info_of(id).name()).c_str(),
                kscope::metric_value(c.totals, id), std::string(kscope::collected_name(c.totals, id)).c_str());
  }
  std::printf("PROBE %s: verdict: %s\n", name, c.classified.verdict.text.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "kernel";
  auto& session = kscope::session::global();
  if (!session.enable_cupti()) {
    std::printf("PROBE collector refused: %s\n", kscope::cupti_collector::global().status().message.c_str());
    return 1;
  }
  kscope::scope_counter_options options;
  options.first_calls = 1;
  options.every = 1;
  options.max_calls_per_scope = mode == "kernel" || mode == "many" ? 2 : 40;
  options.kernel_replay = mode == "kernel" || mode == "many";
  options.keep_profiler = mode != "nokeep";
  if (mode == "nosass") {
    for (const std::string& m : kscope::scope_metric_names())
      if (m.find("sass") == std::string::npos) options.metrics.push_back(m);
  }
  if (!session.enable_counters(options)) {
    std::printf("PROBE counters refused: %s\n", kscope::scope_counter_sampler::global().snapshot().status.c_str());
    return 1;
  }
  const int nx = 8192, ny = 8192;
  float *in = nullptr, *out = nullptr;
  cudaMalloc(&in, sizeof(float) * nx * ny);
  cudaMalloc(&out, sizeof(float) * nx * ny);
  cudaMemset(in, 0, sizeof(float) * nx * ny);
  const int m = 2048, n = 2048, k = 2048;
  __half *a = nullptr, *b = nullptr;
  float* c = nullptr;
  cudaMalloc(&a, sizeof(__half) * m * k);
  cudaMalloc(&b, sizeof(__half) * n * k);
  cudaMalloc(&c, sizeof(float) * m * n);
  cudaMemset(a, 0, sizeof(__half) * m * k);
  cudaMemset(b, 0, sizeof(__half) * n * k);
  float* tiny = nullptr;
  cudaMalloc(&tiny, sizeof(float) * 64);
  const int calls = options.kernel_replay ? 6 : mode == "many1" ? 8 : 40;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    if (mode == "many" || mode == "many1") {
      kscope::scope s{"many"};
      for (int j = 0; j < 300; ++j) probe_tiny<<<64, 32>>>(tiny);
      cudaDeviceSynchronize();
      continue;
    }
    {
      kscope::scope s{"transpose"};
      probe_transpose<<<dim3(nx / 32, ny / 8), dim3(32, 8)>>>(in, out, nx, ny);
      cudaDeviceSynchronize();
    }
    {
      kscope::scope s{"mma"};
      probe_wmma<<<dim3(n / 16, m / 16), 32>>>(a, b, c, m, n, k);
      cudaDeviceSynchronize();
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  session.disable_counters();
  const kscope::session_report r = session.report();
  const kscope::attribution_counters& got = r.cupti_counters;
  std::printf("PROBE mode %s: %d calls in %.2f s; CUPTI records seen %llu kernels %llu profiled %llu\n", mode.c_str(),
              calls, seconds, static_cast<unsigned long long>(got.records_seen),
              static_cast<unsigned long long>(got.kernel_records), static_cast<unsigned long long>(got.profiled_records));
  std::printf("PROBE expected tensor FLOPs per mma call: %.6g\n", 2.0 * m * n * k);
  if (r.counters)
    for (const std::string& n : r.counters->notes) std::printf("PROBE note: %s\n", n.c_str());
  if (const kscope::scope_report* t = r.find("transpose"); t && t->counters)
    for (const auto& [name, n] : t->counters->metric_calls)
      if (name.rfind("lts__", 0) == 0) std::printf("PROBE transpose calls %s = %zu\n", name.c_str(), n);
  show(r, "transpose");
  show(r, "mma");
  show(r, "many");
  const std::string text = r.text();
  const std::size_t at = text.find("Hardware counters per scope");
  std::printf("%s\n", at == std::string::npos ? "(no counters section)" : text.substr(at).c_str());
  return 0;
}
