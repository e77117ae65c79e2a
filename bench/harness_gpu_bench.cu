// How much GPU time does the kscope harness need to pin a median down to 1 %, and how
// does that compare with a fixed do_bench-style run? For three kernels — a ~2 us
// compute kernel, a 1 GiB copy and a GEMM (cuBLAS bf16 4096^3 when cuBLAS loads, a
// tiled fp32 kernel otherwise) — it runs each method `--repeats` times and prints:
// wall time per run, samples, median, the median CI half-width, and the spread of the
// medians across runs (what a reader of one run should expect the next run to say).
//
// do_bench-style (triton.testing.do_bench defaults): estimate from 5 runs, then
// warm-up for 25 ms, then 100 ms of repetitions, each preceded by an untimed 256 MB
// memset (L2 flush) and timed by its own event pair; the result is the median.
//
// Other modes, used by the scripts next to this file:
//   harness_gpu_bench --repro KERNEL [--json FILE] [--warmup-s S] [--min-time-s S]
//                     [--managed-min-time-s S (0: rule off)] [--budget-s S] [--target F] [--trace]
//       one harness run of KERNEL (short | copy | copy4g | gemm) with the defaults or the
//       given settings; prints "median_s ci_lo_s ci_hi_s ci99_lo_s ci99_hi_s stop_reason"
//       then clock_mhz= managed= samples= warmup_samples= wall_s= (bench/reproducibility.sh,
//       bench/gemm_clock_study.sh); --trace prints the series in 25 chunks on stderr.
//   harness_gpu_bench --ncu-copy N
//       N plain launches of the 4 GiB copy kernel, for Nsight Compute (bench/harness_vs_ncu.sh)
//   harness_gpu_bench --gbench [Google Benchmark flags]
//       the same three kernels through the Google Benchmark adapter (kscope/bench/gbench.hpp):
//       manual GPU time per iteration, L2 flushed between iterations, FLOP/s, B/s and
//       roof counters. Exits non-zero when a GPU benchmark could not be measured
//       (kscope::gbench_main; KSCOPE_GBENCH_ALLOW_SKIP=1 allows it).
#include <benchmark/benchmark.h>
#include <kscope/bench/bench.hpp>
#include <kscope/device/detail/cublas_loader.hpp>
#include <kscope/bench/gbench.hpp>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

#define KSCOPE_BENCH_CUDA(call)                                                                      \
  do {                                                                                               \
    const cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));                        \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)

__global__ void fma_chain(float* out, int iterations) {
  float a = threadIdx.x * 1e-3f, b = 0.999f, c = 1e-4f;
  for (int i = 0; i < iterations; ++i) a = fmaf(a, b, c);
  if (a == 12345.0f) out[threadIdx.x] = a;
}

__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

__global__ void fill_bf16(__nv_bfloat16* x, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u + seed;
    h ^= h >> 15;
    x[i] = __float2bfloat16(static_cast<float>(h & 0xffff) / 32768.0f - 1.0f);
  }
}

// 32x32 shared-memory tiles, fp32: the fallback GEMM when cuBLAS is not available.
__global__ void sgemm_tiled(int n, const float* a, const float* b, float* c) {
  __shared__ float ta[32][33], tb[32][33];
  const int row = blockIdx.y * 32 + threadIdx.y, col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0;
  for (int t = 0; t < n; t += 32) {
    ta[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
    tb[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < 32; ++k) acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  c[row * n + col] = acc;
}

struct workload {
  std::string name;
  std::function<void(cudaStream_t)> launch;
  kscope::work work;
  std::string dtype;
  std::vector<long long> shape;
};

int sm_count() {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms;
}

// Buffers live for the whole process: the workloads capture raw pointers.
workload make_workload(const std::string& which) {
  if (which == "short") {
    static float* out = nullptr;
    if (!out) KSCOPE_BENCH_CUDA(cudaMalloc(&out, 1024 * sizeof(float)));
    const int blocks = sm_count() * 4;
    return {"fma chain ~2 us", [blocks](cudaStream_t s) { fma_chain<<<blocks, 256, 0, s>>>(out, 400); }, {}, "fp32", {blocks, 256}};
  }
  if (which == "copy" || which == "copy4g") {
    const std::size_t bytes = which == "copy" ? std::size_t{1} << 30 : std::size_t{4} << 30;
    int4 *src = nullptr, *dst = nullptr;
    KSCOPE_BENCH_CUDA(cudaMalloc(&src, bytes));
    KSCOPE_BENCH_CUDA(cudaMalloc(&dst, bytes));
    KSCOPE_BENCH_CUDA(cudaMemset(src, 1, bytes));
    const std::size_t n = bytes / sizeof(int4);
    const int blocks = sm_count() * 8;
    return {which == "copy" ? "copy 1 GiB" : "copy 4 GiB",
            [=](cudaStream_t s) { copy_kernel<<<blocks, 512, 0, s>>>(src, dst, n); },
            {0, 2.0 * static_cast<double>(bytes)},
            "int4",
            {static_cast<long long>(bytes)}};
  }
  if (which == "gemm") {
    const auto& blas = kscope::detail::cublas();
    if (blas.ok()) {
      namespace abi = kscope::detail::cublas_abi;
      constexpr int n = 4096;
      const std::size_t elements = static_cast<std::size_t>(n) * n;
      __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
      KSCOPE_BENCH_CUDA(cudaMalloc(&a, elements * 2));
      KSCOPE_BENCH_CUDA(cudaMalloc(&b, elements * 2));
      KSCOPE_BENCH_CUDA(cudaMalloc(&c, elements * 2));
      fill_bf16<<<1024, 256>>>(a, elements, 1);
      fill_bf16<<<1024, 256>>>(b, elements, 2);
      KSCOPE_BENCH_CUDA(cudaDeviceSynchronize());
      static void* handle = nullptr;
      if (!handle && blas.create(&handle) != abi::status_success) {
        std::fprintf(stderr, "cublasCreate failed\n");
        std::exit(1);
      }
      static const float alpha = 1.0f, beta = 0.0f;
      return {"cuBLAS bf16 GEMM 4096^3",
              [=, &blas](cudaStream_t s) {
                blas.set_stream(handle, s);
                blas.gemm_ex(handle, abi::op_n, abi::op_n, n, n, n, &alpha, a, abi::r_16bf, n, b, abi::r_16bf, n,
                             &beta, c, abi::r_16bf, n, abi::compute_32f, abi::gemm_default);
              },
              {2.0 * n * n * n, 3.0 * 2 * static_cast<double>(elements)},
              "bf16",
              {n, n, n}};
    }
    std::fprintf(stderr, "cuBLAS unavailable (%s); using a tiled fp32 GEMM\n", blas.error.c_str());
    constexpr int n = 2048;
    float *a = nullptr, *b = nullptr, *c = nullptr;
    KSCOPE_BENCH_CUDA(cudaMalloc(&a, sizeof(float) * n * n));
    KSCOPE_BENCH_CUDA(cudaMalloc(&b, sizeof(float) * n * n));
    KSCOPE_BENCH_CUDA(cudaMalloc(&c, sizeof(float) * n * n));
    KSCOPE_BENCH_CUDA(cudaMemset(a, 0, sizeof(float) * n * n));
    KSCOPE_BENCH_CUDA(cudaMemset(b, 0, sizeof(float) * n * n));
    return {"tiled fp32 GEMM 2048^3",
            [=](cudaStream_t s) { sgemm_tiled<<<dim3(n / 32, n / 32), dim3(32, 32), 0, s>>>(n, a, b, c); },
            {2.0 * n * n * n, 3.0 * 4 * n * n},
            "fp32",
            {n, n, n}};
  }
  std::fprintf(stderr, "unknown kernel '%s' (short, copy, copy4g, gemm)\n", which.c_str());
  std::exit(2);
}

double now_s() { return static_cast<double>(kscope::detail::now_ns()) * 1e-9; }

struct method_run {
  double wall_s = 0;
  std::size_t samples = 0;
  double median_s = NAN;
  double rel_half_width = NAN;
  std::string stop;
};

// triton.testing.do_bench(fn, warmup=25, rep=100), CUDA-event edition.
method_run do_bench(const workload& w, cudaStream_t stream) {
  static void* cache = nullptr;
  const std::size_t cache_bytes = std::size_t{256} << 20;
  if (!cache) KSCOPE_BENCH_CUDA(cudaMalloc(&cache, cache_bytes));
  method_run m;
  const double t0 = now_s();
  w.launch(stream);
  KSCOPE_BENCH_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, stream);
  for (int i = 0; i < 5; ++i) {
    cudaMemsetAsync(cache, 0, cache_bytes, stream);
    w.launch(stream);
  }
  cudaEventRecord(b, stream);
  KSCOPE_BENCH_CUDA(cudaEventSynchronize(b));
  float estimate_ms = 0;
  cudaEventElapsedTime(&estimate_ms, a, b);
  estimate_ms /= 5;
  const int n_warmup = std::max(1, static_cast<int>(25.0 / estimate_ms));
  const int n_repeat = std::max(1, static_cast<int>(100.0 / estimate_ms));
  std::vector<cudaEvent_t> starts(n_repeat), ends(n_repeat);
  for (int i = 0; i < n_repeat; ++i) {
    cudaEventCreate(&starts[i]);
    cudaEventCreate(&ends[i]);
  }
  for (int i = 0; i < n_warmup; ++i) w.launch(stream);
  for (int i = 0; i < n_repeat; ++i) {
    cudaMemsetAsync(cache, 0, cache_bytes, stream);
    cudaEventRecord(starts[i], stream);
    w.launch(stream);
    cudaEventRecord(ends[i], stream);
  }
  KSCOPE_BENCH_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (int i = 0; i < n_repeat; ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, starts[i], ends[i]);
    times.push_back(ms * 1e-3);
    cudaEventDestroy(starts[i]);
    cudaEventDestroy(ends[i]);
  }
  m.wall_s = now_s() - t0;
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  m.samples = times.size();
  // do_bench reports the plain median of all repetitions; its CI is computed the same
  // way as the harness's (no warm-up removal, to stay faithful to do_bench).
  const kscope::summary s = kscope::summarize(times, {0.95, false});
  m.median_s = s.median;
  m.rel_half_width = kscope::relative_half_width(s.median_ci, s.median);
  m.stop = "fixed 100 ms";
  return m;
}

method_run harness(const workload& w, bool cold, std::size_t launches, double budget_s) {
  kscope::bench b{w.name, w.launch};
  b.set_work(w.work).dtype(w.dtype).shape(w.shape).time_budget_s(budget_s);
  if (cold) b.cold();
  if (launches) b.launches_per_sample(launches);
  const double t0 = now_s();
  const kscope::bench_result r = b.run();
  method_run m;
  m.wall_s = now_s() - t0;
  m.samples = r.series.samples_s.size();
  m.median_s = r.median_s();
  m.rel_half_width = r.analysis.rel_half_width;
  m.stop = kscope::to_string(r.stopped);
  if (r.series.launches_per_sample > 1) m.stop += ", x" + std::to_string(r.series.launches_per_sample);
  if (!r.valid()) {
    // A median that is not the kernel's must not enter the table as one.
    std::fprintf(stderr, "harness_gpu_bench: %s: %s\n", w.name.c_str(), r.stop_message.c_str());
    m.median_s = NAN;
    m.rel_half_width = NAN;
  }
  return m;
}

bool g_any_invalid = false;  // the exit code of the comparison table

void print_rows(const std::string& kernel, const std::string& method, const std::vector<method_run>& runs) {
  std::vector<double> walls, medians, widths;
  std::size_t samples = 0;
  for (const method_run& r : runs) {
    walls.push_back(r.wall_s);
    medians.push_back(r.median_s);
    widths.push_back(r.rel_half_width);
    samples += r.samples;
  }
  std::size_t invalid = 0;
  for (const method_run& r : runs) invalid += std::isnan(r.median_s) ? 1 : 0;
  if (invalid > 0) {
    g_any_invalid = true;
    // One run that timed no work makes the row's median and spread meaningless.
    std::printf("| %s | %s | %zu | | | %zu of %zu runs INVALID (see stderr) | | | %s |\n", kernel.c_str(),
                method.c_str(), runs.size(), invalid, runs.size(), runs.front().stop.c_str());
    std::fflush(stdout);
    return;
  }
  const double med = kscope::quantile(medians, 0.5);
  const double spread = (*std::max_element(medians.begin(), medians.end()) -
                         *std::min_element(medians.begin(), medians.end())) / med;
  std::printf("| %s | %s | %zu | %.3f | %zu | %s | %.2f %% | %.2f %% | %s |\n", kernel.c_str(), method.c_str(),
              runs.size(), kscope::quantile(walls, 0.5), samples / runs.size(),
              kscope::detail::harness::format_seconds(med).c_str(), 100 * kscope::quantile(widths, 0.5),
              100 * spread, runs.front().stop.c_str());
  std::fflush(stdout);
}

struct repro_flags {
  const char* json_path = nullptr;
  double warmup_s = -1;     // < 0: the harness default
  double min_time_s = -1;
  double managed_min_time_s = -1;  // 0 also turns the managed-clock rule off
  double budget_s = -1;
  double target = -1;
  bool trace = false;       // print the measured series in 25 chunks on stderr
};

int repro(const std::string& kernel, const repro_flags& f) {
  const workload w = make_workload(kernel);
  kscope::bench b{w.name, w.launch};
  b.set_work(w.work).dtype(w.dtype).shape(w.shape);
  if (kernel != "short") b.cold();
  kscope::bench_options o = b.options();
  if (f.warmup_s >= 0) o.warmup_min_s = f.warmup_s;
  if (f.min_time_s >= 0) o.min_time_s = f.min_time_s;
  if (f.managed_min_time_s == 0) o.managed_clock_fraction = 0;
  if (f.managed_min_time_s > 0) o.managed_min_time_s = f.managed_min_time_s;
  if (f.budget_s >= 0) o.time_budget_s = f.budget_s;
  if (f.target >= 0) o.target_rel_ci = f.target;
  if (f.trace) o.max_samples = 1000000;
  b.options(o);
  const double t0 = now_s();
  const kscope::bench_result r = b.run();
  const double wall = now_s() - t0;
  kscope::bench_report report{kscope::describe_bench_context(), {r}};
  if (f.json_path) report.write_json(f.json_path);
  // The 99 % interval for the cross-process check in bench/reproducibility.sh.
  const kscope::interval ci99 = kscope::median_ci(kscope::detail::harness::steady_samples(r.analysis), 0.99);
  std::printf("%.9e %.9e %.9e %.9e %.9e %s clock_mhz=%.0f managed=%d clock_warmup=%zu samples=%zu "
              "warmup_samples=%zu measured_s=%.3f wall_s=%.3f\n",
              r.median_s(), r.median_ci_s().lo, r.median_ci_s().hi, ci99.lo, ci99.hi, kscope::to_string(r.stopped),
              r.analysis.median_sm_clock_mhz, r.analysis.clock_managed ? 1 : 0, r.analysis.clock_warmup,
              r.series.samples_s.size(), r.series.warmup_samples, r.series.measured_s, wall);
  if (f.trace) {
    const auto& t = r.series.samples_s;
    const auto& c = r.series.sm_clock_mhz;
    const std::size_t chunks = 25, per = std::max<std::size_t>(1, t.size() / chunks);
    for (std::size_t i = 0; i + per <= t.size(); i += per) {
      std::vector<double> ts(t.begin() + i, t.begin() + i + per), cs(c.begin() + i, c.begin() + i + per);
      std::fprintf(stderr, "trace samples %zu-%zu: median %.4f us clock %.0f MHz\n", i, i + per - 1,
                   1e6 * kscope::quantile(ts, 0.5), kscope::quantile(cs, 0.5));
    }
  }
  if (!r.valid()) std::fprintf(stderr, "harness_gpu_bench --repro: %s\n", r.stop_message.c_str());
  return r.valid() ? 0 : 1;
}

int run_gbench(int argc, char** argv) {
  for (const char* kernel : {"short", "copy", "gemm"}) {
    const workload w = make_workload(kernel);
    kscope::gbench_options o;
    o.flush_l2 = true;
    o.per_launch = w.work;
    benchmark::RegisterBenchmark(w.name.c_str(), [w, o](benchmark::State& state) {
      kscope::time_gpu_iterations(state, w.launch, o);
    })->UseManualTime();
  }
  // Non-zero when a GPU benchmark could not be measured (no GPU, an error, an invalid
  // result): Google Benchmark alone would exit 0.
  return kscope::gbench_main(argc, argv);
}

int ncu_copy(int launches) {
  const workload w = make_workload("copy4g");
  cudaStream_t s;
  KSCOPE_BENCH_CUDA(cudaStreamCreate(&s));
  for (int i = 0; i < launches; ++i) w.launch(s);
  KSCOPE_BENCH_CUDA(cudaStreamSynchronize(s));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 3;
  const kscope::bench_context context = kscope::describe_bench_context();
  if (!context.gpu.present) {
    std::printf("harness_gpu_bench: no GPU (%s)\n", context.gpu.problem.c_str());
    return argc > 1 && std::strcmp(argv[1], "--repro") == 0 ? 1 : 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repro" && i + 1 < argc) {
      repro_flags f;
      for (int j = i + 2; j < argc; ++j) {
        const std::string flag = argv[j];
        const bool has_value = j + 1 < argc;
        if (flag == "--json" && has_value) f.json_path = argv[++j];
        else if (flag == "--warmup-s" && has_value) f.warmup_s = std::atof(argv[++j]);
        else if (flag == "--min-time-s" && has_value) f.min_time_s = std::atof(argv[++j]);
        else if (flag == "--managed-min-time-s" && has_value) f.managed_min_time_s = std::atof(argv[++j]);
        else if (flag == "--budget-s" && has_value) f.budget_s = std::atof(argv[++j]);
        else if (flag == "--target" && has_value) f.target = std::atof(argv[++j]);
        else if (flag == "--trace") f.trace = true;
        else {
          std::fprintf(stderr, "harness_gpu_bench --repro: unknown flag '%s'\n", flag.c_str());
          return 2;
        }
      }
      return repro(argv[i + 1], f);
    }
    if (arg == "--ncu-copy" && i + 1 < argc) return ncu_copy(std::atoi(argv[i + 1]));
    if (arg == "--gbench") {
      argv[i] = argv[0];  // Google Benchmark parses the flags after --gbench
      return run_gbench(argc - i, argv + i);
    }
    if (arg == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
  }
  std::printf("%s\n\n", kscope::detail::harness::context_line(context).c_str());
  std::printf("| kernel | method | runs | wall s per run (median) | samples per run | median of medians | "
              "median CI ± (median) | spread of medians | stop |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  cudaStream_t stream;
  KSCOPE_BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const char* kernel : {"short", "copy", "gemm"}) {
    const workload w = make_workload(kernel);
    std::vector<method_run> d, h, h_cold;
    for (int r = 0; r < repeats; ++r) {
      d.push_back(do_bench(w, stream));
      // Same quantity as do_bench: cold L2, one launch per sample.
      h_cold.push_back(harness(w, true, 1, 5));
      // The harness's default for this kernel (hot, batched when short).
      if (std::string(kernel) == "short") h.push_back(harness(w, false, 0, 5));
    }
    print_rows(w.name, "do_bench-style (25 ms warm-up, 100 ms reps, flush, median)", d);
    print_rows(w.name, "kscope, cold, 1 launch/sample (1 % target)", h_cold);
    if (!h.empty()) print_rows(w.name, "kscope default: hot, graph-batched (1 % target)", h);
  }
  std::printf("\nwall s: host time of one run including estimates, warm-up and flushes; spread: (max - min) / "
              "median of the per-run medians over %d runs.\n", repeats);
  return g_any_invalid ? 1 : 0;
}
