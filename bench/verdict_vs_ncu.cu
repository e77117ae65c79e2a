// kscope's verdict against Nsight Compute's, one kernel class at a time (issue 28).
//
//   verdict_vs_ncu --list                    # "<case> <ncu -k regex>" per case
//   verdict_vs_ncu --case copy --kscope      # counters + warp stalls + classify: KSCOPE lines
//   verdict_vs_ncu --case copy --plain       # the case's kernel once, nothing else: what ncu profiles
//
// Seven classes, each a kernel whose limit is known before it is measured:
//   copy         streaming float4 copy of 256 MiB (DRAM-bound)
//   stencil      5-point stencil on an 8192 x 8192 float grid (L2 / L1 traffic of the neighbours)
//   transpose    naive 8192 x 8192 transpose: coalesced reads, one sector per thread written
//   tensor_gemm  cuBLAS HGEMM 8192^3 (cublasGemmEx, fp16 in and out, CUBLAS_COMPUTE_32F): tensor pipe
//   fp32_gemm    register-tiled SGEMM 4096^3 (128 x 128 block tile, 8 x 8 per thread): FMA pipe
//   barrier      1024-thread blocks whose warp 0 works alone before every __syncthreads: 31 of
//                32 warps wait at the barrier (latency-bound, barrier stall)
//   tiny         one block of one warp chasing pointers (latency-bound, long scoreboard)
//
// --kscope profiles the case with the public API only: profile_counters with the default
// metric set (the speed-of-light rollups and the DRAM / L2 / L1 throughputs) plus the pipe
// metrics (pipe_metric_names(), those the device offers), user replay, then
// profile_warp_stalls for the stall shares, and classify() on the case's kernel (the longest
// one the work launched). It prints, before the verdict:
//   KSCOPE_METRIC case=<c> name=<metric> value=<pct>     every "% of peak" value collected
//   KSCOPE_STALL case=<c> reason=<key> share=<0..1>      the stall shares classify() was given
//   KSCOPE_NOTE case=<c> <text>                          notes, evidence that was missing, also-findings
// and last the one line bench/verdict_vs_ncu.py reads:
//   KSCOPE case=<c> class=<memory|compute|latency|launch|undetermined> unit=<where, spaces as _> text=<verdict>
// bench/verdict_vs_ncu.sh builds this, runs both modes per case and compares.
#include <kscope/counters/collect.hpp>
#include <kscope/evidence/metrics.hpp>
#include <kscope/warp_stalls/collect.hpp>
#include <kscope/warp_stalls/stalls.hpp>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

#define VVN_CHECK_CUDA(call)                                                              \
  do {                                                                                    \
    const cudaError_t e = (call);                                                         \
    if (e != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e));                     \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

// ---------------------------------------------------------------------------------------
// Kernels. Every name starts with vvn_ so ncu's -k regex matches the case's kernel and never
// a fill kernel; the fills run before the case's kernel in both modes.

__global__ void vvn_fill_floats(float* x, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = v + static_cast<float>(i % 7) * 0.125f;
}

__global__ void vvn_fill_halves(__half* x, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = __float2half(v + static_cast<float>(i % 5) * 0.0625f);
}

// next[i] = (i + stride) mod n: a chain whose consecutive loads are far apart, so each one
// waits for memory (the GPU does not prefetch a dependent load).
__global__ void vvn_fill_chain(unsigned* next, unsigned n, unsigned stride) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    next[i] = static_cast<unsigned>((static_cast<unsigned long long>(i) + stride) % n);
}

__global__ void vvn_copy(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n4) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// 5-point stencil, one output per thread, 32 x 8 blocks; the border is copied.
__global__ void vvn_stencil(const float* __restrict__ in, float* __restrict__ out, int nx, int ny) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= nx || y >= ny) return;
  const std::size_t i = static_cast<std::size_t>(y) * nx + x;
  if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
    out[i] = in[i];
    return;
  }
  out[i] = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
}

// Naive transpose: a warp reads 32 consecutive floats of a row and writes them down a
// column, 32 rows apart: every store of the warp touches its own 32-byte sector.
__global__ void vvn_transpose(const float* __restrict__ in, float* __restrict__ out, int nx, int ny) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= nx || y >= ny) return;
  out[static_cast<std::size_t>(x) * ny + y] = in[static_cast<std::size_t>(y) * nx + x];
}

// Register-tiled SGEMM, C = A B, row-major n x n, n a multiple of 128. A block computes a
// 128 x 128 tile of C with 256 threads, each an 8 x 8 sub-tile held in registers; per step of
// 8 along k it stages A (transposed) and B in shared memory. Per thread and k: 4 shared float4
// loads feed 64 FFMAs, so the FMA pipe, not shared memory, is the busy unit (a one-output-
// per-thread tiled GEMM does two shared loads per FMA and is L1-bound instead).
constexpr int sgemm_tile = 128, sgemm_step = 8, sgemm_sub = 8, sgemm_threads = 256;

__global__ void __launch_bounds__(sgemm_threads, 2)
    vvn_sgemm(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
  __shared__ __align__(16) float a_tile[sgemm_step][sgemm_tile];  // [k][m]: transposed on the way in
  __shared__ __align__(16) float b_tile[sgemm_step][sgemm_tile];  // [k][n]
  const int t = threadIdx.x;
  const int tx = t % 16, ty = t / 16;  // this thread's 8 x 8 sub-tile: rows ty*8.., columns tx*8..
  const int row0 = blockIdx.y * sgemm_tile, col0 = blockIdx.x * sgemm_tile;
  const int a_row = t / 2, a_col = (t % 2) * 4;    // A tile: 128 rows x 8, one float4 per thread
  const int b_row = t / 32, b_col = (t % 32) * 4;  // B tile: 8 rows x 128, one float4 per thread
  float acc[sgemm_sub][sgemm_sub];
#pragma unroll
  for (int i = 0; i < sgemm_sub; ++i)
#pragma unroll
    for (int j = 0; j < sgemm_sub; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < n; k0 += sgemm_step) {
    const float4 av = *reinterpret_cast<const float4*>(a + static_cast<std::size_t>(row0 + a_row) * n + k0 + a_col);
    a_tile[a_col + 0][a_row] = av.x;
    a_tile[a_col + 1][a_row] = av.y;
    a_tile[a_col + 2][a_row] = av.z;
    a_tile[a_col + 3][a_row] = av.w;
    *reinterpret_cast<float4*>(&b_tile[b_row][b_col]) =
        *reinterpret_cast<const float4*>(b + static_cast<std::size_t>(k0 + b_row) * n + col0 + b_col);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < sgemm_step; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&a_tile[k][ty * sgemm_sub]);
      const float4 a1 = *reinterpret_cast<const float4*>(&a_tile[k][ty * sgemm_sub + 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&b_tile[k][tx * sgemm_sub]);
      const float4 b1 = *reinterpret_cast<const float4*>(&b_tile[k][tx * sgemm_sub + 4]);
      const float ar[sgemm_sub] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float br[sgemm_sub] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < sgemm_sub; ++i)
#pragma unroll
        for (int j = 0; j < sgemm_sub; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < sgemm_sub; ++i) {
    float* out = c + static_cast<std::size_t>(row0 + ty * sgemm_sub + i) * n + col0 + tx * sgemm_sub;
    *reinterpret_cast<float4*>(out) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(out + 4) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

// Warp 0 of each 1024-thread block runs a dependent FMA chain alone, then the whole block
// meets at __syncthreads; `rounds` times. The other 31 warps spend almost all their time at
// the barrier, and the SM has almost nothing to issue.
__global__ void __launch_bounds__(1024) vvn_barrier(float* out, int rounds, int work) {
  float x = static_cast<float>(threadIdx.x) * 1e-3f;
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x < 32)
      for (int i = 0; i < work; ++i) x = fmaf(x, 0.999f, 0.5f);
    __syncthreads();
  }
  out[blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x] = x;
}

// One warp, each thread following its own chain of dependent loads: nothing to overlap.
__global__ void vvn_tiny(const unsigned* __restrict__ next, int steps, unsigned* out) {
  unsigned i = threadIdx.x * 4099u;
  for (int s = 0; s < steps; ++s) i = next[i];
  out[threadIdx.x] = i;
}

// ---------------------------------------------------------------------------------------
// Cases

struct kernel_case {
  const char* name;
  const char* ncu_regex;  // ncu -k regex: the case's kernel, never a fill kernel
};

constexpr kernel_case cases[] = {
    {"copy", "vvn_copy"},
    {"stencil", "vvn_stencil"},
    {"transpose", "vvn_transpose"},
    {"tensor_gemm", "gemm|sm90|cutlass|xmma|nvjet"},
    {"fp32_gemm", "vvn_sgemm"},
    {"barrier", "vvn_barrier"},
    {"tiny", "vvn_tiny"},
};

// A case ready to run: its launch and what classify() should know about its grid.
struct prepared_case {
  std::function<void()> launch;
  double grid_blocks = std::numeric_limits<double>::quiet_NaN();  // NaN: not known (cuBLAS)
};

template <class T>
T* device_alloc(std::size_t count) {
  T* p = nullptr;
  VVN_CHECK_CUDA(cudaMalloc(&p, count * sizeof(T)));
  return p;
}

// Allocates and fills the case's buffers (fill kernels only; kept for the program's life)
// and returns its launch. The sizes keep every launch in the milliseconds, so that ncu's
// and kscope's replay passes stay short.
prepared_case prepare(const std::string& name, int sms, cublasHandle_t* cublas) {
  prepared_case p;
  const int fill_blocks = sms * 8;
  if (name == "copy") {
    const std::size_t n = (std::size_t{256} << 20) / sizeof(float);  // 256 MiB read, 256 MiB written
    float* src = device_alloc<float>(n);
    float* dst = device_alloc<float>(n);
    vvn_fill_floats<<<fill_blocks, 256>>>(src, n, 1.0f);
    const int blocks = sms * 8;  // 2048 threads per SM: full occupancy, grid-stride
    p.grid_blocks = blocks;
    p.launch = [=] { vvn_copy<<<blocks, 256>>>(reinterpret_cast<const float4*>(src), reinterpret_cast<float4*>(dst), n / 4); };
  } else if (name == "stencil" || name == "transpose") {
    const int nx = 8192, ny = 8192;
    const std::size_t n = static_cast<std::size_t>(nx) * ny;
    float* in = device_alloc<float>(n);
    float* out = device_alloc<float>(n);
    vvn_fill_floats<<<fill_blocks, 256>>>(in, n, 0.5f);
    const dim3 block(32, 8), grid(nx / 32, ny / 8);
    p.grid_blocks = static_cast<double>(grid.x) * grid.y;
    if (name == "stencil")
      p.launch = [=] { vvn_stencil<<<grid, block>>>(in, out, nx, ny); };
    else
      p.launch = [=] { vvn_transpose<<<grid, block>>>(in, out, nx, ny); };
  } else if (name == "tensor_gemm") {
    const int n = 8192;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    __half* a = device_alloc<__half>(nn);
    __half* b = device_alloc<__half>(nn);
    __half* c = device_alloc<__half>(nn);
    vvn_fill_halves<<<fill_blocks, 256>>>(a, nn, 0.25f);
    vvn_fill_halves<<<fill_blocks, 256>>>(b, nn, 0.5f);
    if (cublasCreate(cublas) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "cublasCreate failed\n");
      std::exit(2);
    }
    const cublasHandle_t handle = *cublas;
    p.launch = [=] {
      const float one = 1.0f, zero = 0.0f;
      const cublasStatus_t s = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16F, n, b,
                                            CUDA_R_16F, n, &zero, c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT);
      if (s != CUBLAS_STATUS_SUCCESS) std::fprintf(stderr, "cublasGemmEx failed: %d\n", static_cast<int>(s));
    };
  } else if (name == "fp32_gemm") {
    const int n = 4096;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    float* a = device_alloc<float>(nn);
    float* b = device_alloc<float>(nn);
    float* c = device_alloc<float>(nn);
    vvn_fill_floats<<<fill_blocks, 256>>>(a, nn, 0.5f);
    vvn_fill_floats<<<fill_blocks, 256>>>(b, nn, 0.25f);
    const dim3 grid(n / sgemm_tile, n / sgemm_tile);
    p.grid_blocks = static_cast<double>(grid.x) * grid.y;
    p.launch = [=] { vvn_sgemm<<<grid, sgemm_threads>>>(a, b, c, n); };
  } else if (name == "barrier") {
    const int blocks = sms * 2;  // two 1024-thread blocks fill an SM's 64 warp slots
    float* out = device_alloc<float>(static_cast<std::size_t>(blocks) * 1024);
    p.grid_blocks = blocks;
    p.launch = [=] { vvn_barrier<<<blocks, 1024>>>(out, 32, 4096); };
  } else if (name == "tiny") {
    const unsigned n = 16u << 20;  // 64 MiB of links: more than the L2 holds
    unsigned* next = device_alloc<unsigned>(n);
    unsigned* out = device_alloc<unsigned>(32);
    vvn_fill_chain<<<fill_blocks, 256>>>(next, n, 32771u);  // ~128 KiB between consecutive links
    p.grid_blocks = 1;
    p.launch = [=] { vvn_tiny<<<1, 32>>>(next, 2048, out); };
  }
  VVN_CHECK_CUDA(cudaGetLastError());
  VVN_CHECK_CUDA(cudaDeviceSynchronize());
  return p;
}

// ---------------------------------------------------------------------------------------
// The kscope side

const char* class_word(kscope::bottleneck b) {
  switch (b) {
    case kscope::bottleneck::memory: return "memory";
    case kscope::bottleneck::compute: return "compute";
    case kscope::bottleneck::latency: return "latency";
    case kscope::bottleneck::launch: return "launch";
    case kscope::bottleneck::undetermined: return "undetermined";
  }
  return "undetermined";
}

// One machine-readable token: spaces become '_', nothing becomes '-'.
std::string token(std::string s) {
  if (s.empty()) return "-";
  std::replace(s.begin(), s.end(), ' ', '_');
  return s;
}

// The default set and the pipe metrics the device offers. An explicitly named metric the
// device lacks fails the whole pass (counters/collect.hpp), so names the metric listing
// does not know, under any catalog fallback, are left out here and said so.
std::vector<std::string> metric_request(const std::string& case_name) {
  std::vector<std::string> names = kscope::default_metric_names();
  const kscope::counter_metric_list offered = kscope::list_counter_metrics();
  std::set<std::string> have(names.begin(), names.end());
  for (const std::string& pipe : kscope::pipe_metric_names()) {
    if (have.count(pipe)) continue;
    bool known = !offered.ok() || offered.base_metrics.empty();  // no listing: let the pass decide
    if (!known) {
      std::vector<std::string> candidates{pipe};
      if (const kscope::metric_info* info = kscope::find_metric_info(pipe))
        for (std::string_view n : info->names) candidates.emplace_back(n);
      for (const std::string& c : candidates)
        if (kscope::check_metric_name(c, offered.base_metrics).known) known = true;
    }
    if (known) {
      names.push_back(pipe);
      have.insert(pipe);
    } else {
      std::printf("KSCOPE_NOTE case=%s pipe metric %s is not offered by this device: left out\n", case_name.c_str(),
                  pipe.c_str());
    }
  }
  return names;
}

// The case's kernel among a pass's ranges: the longest one (a cuBLAS call may add a small
// kernel beside its GEMM).
const kscope::counter_values* main_kernel(const kscope::counter_result& r) {
  const kscope::counter_values* best = nullptr;
  for (const kscope::counter_values& k : r.kernels) {
    const double t = k.value("gpu__time_duration.sum");
    const double best_t = best != nullptr ? best->value("gpu__time_duration.sum") : 0.0;
    if (best == nullptr || (std::isfinite(t) && (!std::isfinite(best_t) || t > best_t))) best = &k;
  }
  return best;
}

int run_kscope(const std::string& name, const prepared_case& c, int sms) {
  // One call outside any pass: module loading and cuBLAS's first-call set-up are not profiled.
  c.launch();
  VVN_CHECK_CUDA(cudaDeviceSynchronize());

  // Warp stalls first (the profile with the most samples): once a range-profiler pass has
  // run in the process, CUPTI's PC sampling names no kernel loaded before it.
  kscope::warp_stall_options stall_options;
  stall_options.sampling_period = 10;  // 2^10 cycles: thousands of samples even for the one-warp case
  stall_options.source_line_pcs = 0;   // no source lines: only the shares are used
  const kscope::warp_stall_result stalls = kscope::profile_warp_stalls(c.launch, stall_options);

  kscope::counter_options options;
  options.replay = kscope::counter_replay::user;  // the work is idempotent: no memory save and restore
  kscope::counter_result r = kscope::profile_counters(metric_request(name), c.launch, options);
  if (r.state == kscope::counter_state::unknown_metric) {
    std::printf("KSCOPE_NOTE case=%s %s; retrying with the default set alone\n", name.c_str(), r.message.c_str());
    r = kscope::profile_counters({}, c.launch, options);
  }
  const kscope::counter_values* k = r.ok() ? main_kernel(r) : nullptr;
  if (k == nullptr) {
    std::printf("KSCOPE case=%s class=unavailable unit=- text=%s\n", name.c_str(),
                r.ok() ? "no kernel was profiled" : r.message.c_str());
    return 3;
  }
  std::printf("KSCOPE_NOTE case=%s counters: %s; %zu passes; kernel %s (%zu of %zu ranges)\n", name.c_str(),
              r.message.c_str(), r.passes, k->name.c_str(), k->index + 1, r.kernels.size());
  for (const std::string& note : r.notes) std::printf("KSCOPE_NOTE case=%s %s\n", name.c_str(), note.c_str());
  std::vector<std::pair<std::string, double>> pcts;
  for (const auto& [metric, value] : k->values)
    if (metric.find("pct_of_peak") != std::string::npos) pcts.emplace_back(metric, value);
  std::sort(pcts.begin(), pcts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [metric, value] : pcts)
    std::printf("KSCOPE_METRIC case=%s name=%s value=%.3f\n", name.c_str(), metric.c_str(), value);

  kscope::classification_input in;
  in.counters = k->values;
  in.grid_blocks = c.grid_blocks;
  in.sm_count = sms;

  if (stalls.ok()) {
    const kscope::warp_stall_profile* best = nullptr;
    for (const kscope::warp_stall_profile& p : stalls.kernels)
      if (best == nullptr || p.total_samples() > best->total_samples()) best = &p;
    if (best != nullptr && best->total_samples() > 0) {
      in.stalls = kscope::to_stall_shares(*best);
      std::printf("KSCOPE_NOTE case=%s warp stalls: %llu samples in %s\n", name.c_str(),
                  static_cast<unsigned long long>(best->total_samples()), best->name.c_str());
      for (const kscope::stall_share& s : in.stalls)
        std::printf("KSCOPE_STALL case=%s reason=%s share=%.4f\n", name.c_str(), s.reason.c_str(), s.share);
    } else {
      std::printf("KSCOPE_NOTE case=%s warp stalls: no samples (%s)\n", name.c_str(), stalls.message.c_str());
    }
  } else {
    std::printf("KSCOPE_NOTE case=%s warp stalls unavailable: %s\n", name.c_str(), stalls.message.c_str());
  }

  const kscope::classification verdict = kscope::classify(in);
  for (const kscope::finding& f : verdict.also)
    std::printf("KSCOPE_NOTE case=%s also: %s\n", name.c_str(), f.text.c_str());
  for (const std::string& m : verdict.missing)
    std::printf("KSCOPE_NOTE case=%s missing: %s\n", name.c_str(), m.c_str());
  std::printf("KSCOPE case=%s class=%s unit=%s text=%s\n", name.c_str(), class_word(verdict.verdict.kind),
              token(verdict.verdict.where).c_str(), verdict.verdict.text.c_str());
  return 0;
}

int usage() {
  std::fprintf(stderr, "usage: verdict_vs_ncu --list | --case NAME (--kscope | --plain)\ncases:");
  for (const kernel_case& c : cases) std::fprintf(stderr, " %s", c.name);
  std::fprintf(stderr, "\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name;
  bool kscope_mode = false, plain = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--list") == 0) {
      for (const kernel_case& c : cases) std::printf("%s %s\n", c.name, c.ncu_regex);
      return 0;
    }
    if (std::strcmp(argv[i], "--case") == 0 && i + 1 < argc) name = argv[++i];
    else if (std::strcmp(argv[i], "--kscope") == 0) kscope_mode = true;
    else if (std::strcmp(argv[i], "--plain") == 0) plain = true;
    else return usage();
  }
  const bool known = std::any_of(std::begin(cases), std::end(cases), [&](const kernel_case& c) { return name == c.name; });
  if (!known || kscope_mode == plain) return usage();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines in order with CUPTI's and ncu's output

  int sms = 0;
  VVN_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cublasHandle_t cublas = nullptr;
  const prepared_case c = prepare(name, sms, &cublas);
  int rc = 0;
  if (plain) {
    c.launch();  // the one launch ncu profiles (-c 1)
    VVN_CHECK_CUDA(cudaGetLastError());
    VVN_CHECK_CUDA(cudaDeviceSynchronize());
  } else {
    rc = run_kscope(name, c, sms);
  }
  if (cublas != nullptr) cublasDestroy(cublas);
  return rc;
}
