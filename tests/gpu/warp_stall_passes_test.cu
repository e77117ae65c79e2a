// Warp stalls in every pass of one process (issue 39, done-criterion (b)): how everyone
// uses it — warm the kernels up, then sample each in turn. Five kernels of this file: first
// each warmed up right before its own pass (its code loaded between two passes), then all
// of them again, one kernel-serialized pass per kernel, twice over, the second round with
// kscope's activity collector running. Run it with CUDA_MODULE_LOADING=EAGER too. Every pass must
// sample its kernel and name its top stall; where the stall is known by construction it
// must be that one:
//   copy_floats      streams a buffer larger than the L2: long scoreboard (Nsight Compute
//                    says so for a copy, 99 %)
//   barrier_bound    warp 0 works while seven warps wait at __syncthreads: barrier
//   pointer_chase    each load's address is the previous load's value: long scoreboard
//   fma_chain        dependent FMAs, whatever the top stall is: a stall is named
//   sqrt_chain       dependent square roots: a stall is named
// A last case takes a counter pass (range profiler) and then a warp-stall pass on a warmed
// kernel: it samples, or its message gives the measured reason, never "no kernel ran"
// while samples were taken.
#include <kscope/counters/collect.hpp>
#include <kscope/kscope.hpp>
#include <kscope/warp_stalls/collect.hpp>
#include <kscope/warp_stalls/stalls.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace {

#define KSCOPE_TEST_REQUIRE_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)

__global__ void copy_floats(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n4) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride)
    dst[i] = src[i];
}

__global__ void barrier_bound(float* out, int rounds, int chain) {
  float x = 1.0f + 1e-3f * static_cast<float>(threadIdx.x);
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x < 32)
      for (int i = 0; i < chain; ++i) x = fmaf(x, 0.999f, 0.25f);
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

__global__ void pointer_chase(const int* next, int n, int steps, int* out) {
  const int tid = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  int i = (tid * 7919) % n;
  for (int s = 0; s < steps; ++s) i = next[i];
  out[tid] = i;
}

__global__ void fma_chain(float* out, int iters) {
  float x = 1.0f + 1e-3f * static_cast<float>(threadIdx.x);
  for (int i = 0; i < iters; ++i) x = fmaf(x, 0.9999f, 0.5f);
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

__global__ void sqrt_chain(float* out, int iters) {
  float x = 2.0f + static_cast<float>(threadIdx.x);
  for (int i = 0; i < iters; ++i) x = sqrtf(x + 1.0f);
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

struct workload {
  std::size_t floats = std::size_t{64} << 20;  // 256 MiB each way
  int nodes = 1 << 24;                         // 64 MiB of indexes
  int sms = 0;
  float* src = nullptr;
  float* dst = nullptr;
  float* out = nullptr;
  int* next = nullptr;
  int* iout = nullptr;

  workload() {
    int device = 0;
    KSCOPE_TEST_REQUIRE_CUDA(cudaGetDevice(&device));
    KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    KSCOPE_TEST_REQUIRE_CUDA(cudaMalloc(&src, floats * sizeof(float)));
    KSCOPE_TEST_REQUIRE_CUDA(cudaMalloc(&dst, floats * sizeof(float)));
    KSCOPE_TEST_REQUIRE_CUDA(cudaMalloc(&out, static_cast<std::size_t>(sms) * 8 * 256 * sizeof(float)));
    KSCOPE_TEST_REQUIRE_CUDA(cudaMalloc(&iout, static_cast<std::size_t>(sms) * 8 * 256 * sizeof(int)));
    KSCOPE_TEST_REQUIRE_CUDA(cudaMalloc(&next, static_cast<std::size_t>(nodes) * sizeof(int)));
    KSCOPE_TEST_REQUIRE_CUDA(cudaMemset(src, 0, floats * sizeof(float)));
    std::vector<int> host(static_cast<std::size_t>(nodes));
    for (int i = 0; i < nodes; ++i) host[static_cast<std::size_t>(i)] = static_cast<int>((static_cast<long long>(i) * 40503 + 977) % nodes);
    KSCOPE_TEST_REQUIRE_CUDA(cudaMemcpy(next, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice));
  }
  ~workload() {
    cudaFree(src);
    cudaFree(dst);
    cudaFree(out);
    cudaFree(iout);
    cudaFree(next);
  }
  workload(const workload&) = delete;
  workload& operator=(const workload&) = delete;

  void launch(int which) const {
    const unsigned blocks = static_cast<unsigned>(sms * 8);
    switch (which) {
      case 0: copy_floats<<<blocks, 256>>>(reinterpret_cast<const float4*>(src), reinterpret_cast<float4*>(dst), floats / 4); break;
      case 1: barrier_bound<<<blocks, 256>>>(out, 400, 256); break;
      case 2: pointer_chase<<<static_cast<unsigned>(sms * 2), 256>>>(next, nodes, 3000, iout); break;
      case 3: fma_chain<<<blocks, 256>>>(out, 50000); break;
      case 4: sqrt_chain<<<blocks, 256>>>(out, 20000); break;
      default: break;
    }
  }
};

constexpr int kernel_count = 5;
const char* const kernel_names[kernel_count] = {"copy_floats", "barrier_bound", "pointer_chase", "fma_chain",
                                                "sqrt_chain"};
// The top stall each kernel has by construction; "" where any named stall will do.
const char* const expected_stall[kernel_count] = {"long_scoreboard", "barrier", "long_scoreboard", "", ""};

kscope::warp_stall_options sampling_options() {
  kscope::warp_stall_options o;
  o.sampling_period = 12;
  return o;
}

// One pass over kernel `which`, already warmed up: it samples and names the top stall.
void check_pass(const workload& w, int which, const char* round) {
  CAPTURE(round);
  CAPTURE(kernel_names[which]);
  KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceSynchronize());
  const kscope::warp_stall_result r = kscope::profile_warp_stalls([&] { w.launch(which); }, sampling_options());
  std::printf("WARPSTALL %s %s: %s\n", round, kernel_names[which], r.message.c_str());
  for (const std::string& note : r.notes) std::printf("WARPSTALL   note: %s\n", note.c_str());
  // On the GPU machine PC sampling is expected to work: a refusal is a failure.
  REQUIRE_MESSAGE(r.ok(), r.message);
  CHECK(r.message.find("no kernel") == std::string::npos);
  REQUIRE_MESSAGE(r.kernels.size() == 1, r.message);
  const kscope::warp_stall_profile& k = r.kernels[0];
  CHECK(k.name.find(kernel_names[which]) != std::string::npos);
  CHECK_MESSAGE(k.total_samples() > 500, k.total_samples() << " samples");
  const kscope::warp_stall_finding d = kscope::dominant_stall(k);
  std::printf("WARPSTALL   top stall: %s\n", d.text.c_str());
  REQUIRE_MESSAGE(d.found, d.text);
  if (expected_stall[which][0] != '\0') CHECK_MESSAGE(d.reason == expected_stall[which], d.text);
}

}  // namespace

// First in the file on purpose (doctest runs a file's cases in line order): no kernel of
// this file has run yet, so each kernel's code is loaded by its warm-up, between two passes.
TEST_CASE("warp stalls in every pass: each kernel warmed up right before its own pass") {
  workload w;
  for (int k = 0; k < kernel_count; ++k) {
    w.launch(k);  // the warm-up: this kernel's code is loaded now, after the previous pass
    KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceSynchronize());
    check_pass(w, k, "interleaved");
  }
}

TEST_CASE("warp stalls in every pass: five warmed-up kernels, two rounds, the second with the collector") {
  workload w;
  for (int k = 0; k < kernel_count; ++k) w.launch(k);  // the warm-up: every kernel's code is loaded now
  KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceSynchronize());
  for (int k = 0; k < kernel_count; ++k) check_pass(w, k, "round 1");
  REQUIRE_MESSAGE(kscope::session::global().enable_cupti(), kscope::session::global().report().cupti_status);
  for (int k = 0; k < kernel_count; ++k) {
    kscope::scope s{kernel_names[k]};
    check_pass(w, k, "round 2, collector on");
  }
}

TEST_CASE("after a counter pass, a warp-stall pass samples or says why, measured") {
  workload w;
  w.launch(0);
  KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceSynchronize());
  // User replay: the collector of the case before is still tracing, and a kernel-replay
  // pass would stop its records (profile_counters refuses it then).
  kscope::counter_options user_replay;
  user_replay.replay = kscope::counter_replay::user;
  const kscope::counter_result c = kscope::profile_counters({"dram__bytes.sum"}, [&] { w.launch(0); }, user_replay);
  std::printf("WARPSTALL counter pass: %s\n", c.message.c_str());
  REQUIRE_MESSAGE(c.ok(), c.message);
  const kscope::warp_stall_result r = kscope::profile_warp_stalls([&] { w.launch(1); }, sampling_options());
  std::printf("WARPSTALL after counters: %s\n", r.message.c_str());
  REQUIRE_MESSAGE(r.ok(), r.message);
  if (r.kernels.empty()) {
    // CUPTI could not name the kernel: the message must say that samples were taken and
    // why none could be attributed, not that nothing ran.
    CHECK(r.message.find("no kernel was sampled") == std::string::npos);
    CHECK(r.message.find("range profiler") != std::string::npos);
    MESSAGE("after a counter pass CUPTI named no kernel: " << r.message);
  } else {
    const kscope::warp_stall_finding d = kscope::dominant_stall(r.kernels[0]);
    CHECK_MESSAGE(d.reason == "barrier", d.text);
  }
}
