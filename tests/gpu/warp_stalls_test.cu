// warp_stalls/collect.hpp on a real GPU (run by the lead on an H100/H200; skipped without a
// device): CUPTI PC sampling must say where the warps of known kernels wait.
//
// - A naive fp32 GEMM, n = 1024, one thread per output (row-major, inner loop over k): more
//   than 1000 samples and a dominant stall, printed whatever it is (expected: a memory wait,
//   long scoreboard or LG/MIO throttle).
// - A kernel written to be barrier-bound: in every round warp 0 of each 256-thread block
//   runs a chain of dependent FMAs while the other seven warps wait at __syncthreads, so
//   about 7 of 8 sampled warps sit at the barrier: barrier must be the top reason, with
//   more than half of the samples.
// - Two kernels in one kernel-serialized pass come back as two launches with their names.
// - A pass inside a pass is refused (busy) without running its work; an exception from the
//   work comes out after sampling is disabled, and the next pass works.
// - Source lines (first case, and it must stay the first: doctest runs a file's cases in
//   line order): this file is built with -lineinfo (tests/CMakeLists.txt) and no kernel of
//   it runs before that case's pass, so lazy loading loads its module inside the pass,
//   where kscope watches module loads and keeps the cubin. The hottest PC of a
//   pointer-chasing kernel must map to this file, inside the kernel's lines. With
//   CUDA_MODULE_LOADING=EAGER the module loads at context creation, before any watch, and
//   the PC must say so instead. The later cases' kernels share the module: their tables
//   print their lines too.
// A refusal is not a pass: where tests/gpu/expectations.hpp expects PC sampling (sm_90 with
// CUPTI 13), any refusal (no permission, unsupported device, busy, failed) fails the case
// with kscope's message, which names the CUPTI call and its error; where the table does
// not expect it, the cases do not run and the executable exits 77 with the reason.
// Every line of the tables starts with "WARPSTALL", for the lead's logs.
#include <kscope/warp_stalls/stalls.hpp>
#include <kscope/counters/collect.hpp>
#include <kscope/warp_stalls/collect.hpp>

#include <doctest/doctest.h>

#include "expectations.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

#define KSCOPE_TEST_REQUIRE_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)

// One thread per output, row-major, the plain inner loop over k.
__global__ void naive_sgemm(const float* a, const float* b, float* c, int n) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += a[row * n + k] * b[k * n + col];
  c[row * n + col] = acc;
}

// Barrier-bound by construction: per round, warp 0 does `chain` dependent FMAs (a few
// cycles each, nothing to overlap) while warps 1..7 reach __syncthreads at once and wait
// for it. The result is stored so the chain cannot be removed.
__global__ void barrier_bound(float* out, int rounds, int chain) {
  float x = 1.0f + 1e-3f * static_cast<float>(threadIdx.x);
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x < 32)
      for (int i = 0; i < chain; ++i) x = fmaf(x, 0.999f, 0.25f);
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

// Each step loads the index of the next one: every load waits for the one before (long
// scoreboard), so nearly every sample sits in the loop. Its lines, as the compiler sees
// them, lie strictly between these two markers: the range its hottest PC must fall in.
constexpr unsigned chase_first_line = __LINE__;
__global__ void lineinfo_chase(const int* next, int n, int steps, int* out) {
  const int tid = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  int i = tid % n;
  for (int s = 0; s < steps; ++s) i = next[i];
  out[tid] = i;
}
constexpr unsigned chase_last_line = __LINE__;

class device_buffer {
 public:
  explicit device_buffer(std::size_t bytes) {
    REQUIRE_MESSAGE(cudaMalloc(&data_, bytes) == cudaSuccess, "cudaMalloc of " << bytes << " bytes");
    KSCOPE_TEST_REQUIRE_CUDA(cudaMemset(data_, 0, bytes));
  }
  ~device_buffer() { cudaFree(data_); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  float* get() const { return static_cast<float*>(data_); }

 private:
  void* data_ = nullptr;
};

__global__ void fill(float* p, std::size_t n, float v) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

int sm_count() {
  int device = 0, sms = 0;
  KSCOPE_TEST_REQUIRE_CUDA(cudaGetDevice(&device));
  KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// One sample per SM every 2^12 cycles: tens of thousands of samples per millisecond of
// kernel on an H200, well inside CUPTI's default buffers.
kscope::warp_stall_options sampling_options() {
  kscope::warp_stall_options o;
  o.sampling_period = 12;
  return o;
}

// Prints the result and every profile's table, prefixed "WARPSTALL".
void print(const kscope::warp_stall_result& r) {
  std::printf("WARPSTALL %s: %s\n", kscope::to_string(r.state), r.message.c_str());
  for (const std::string& note : r.notes) std::printf("WARPSTALL note: %s\n", note.c_str());
  std::printf("WARPSTALL CUPTI: %llu samples, %llu dropped, %llu in non-user kernels, %zu stall reasons\n",
              static_cast<unsigned long long>(r.cupti_total_samples),
              static_cast<unsigned long long>(r.dropped_samples),
              static_cast<unsigned long long>(r.non_user_samples), r.stall_reasons.size());
  // Whether "_not_issued" is the subset kscope takes it for: then the profile's total
  // matches CUPTI's count less dropped and non-user samples, and the not-issued sum is
  // smaller; were the twins disjoint, total + not-issued would match instead.
  std::uint64_t not_issued = 0;
  for (const auto& [key, c] : r.total.reasons) not_issued += c.not_issued;
  std::printf("WARPSTALL totals: profile %llu samples (%llu of them not issued), CUPTI %llu - dropped %llu - "
              "non-user %llu\n",
              static_cast<unsigned long long>(r.total.total_samples()), static_cast<unsigned long long>(not_issued),
              static_cast<unsigned long long>(r.cupti_total_samples),
              static_cast<unsigned long long>(r.dropped_samples), static_cast<unsigned long long>(r.non_user_samples));
  std::printf("WARPSTALL module loads: %s\n", r.module_loads.c_str());
  kscope::warp_stall_print_options o;
  o.prefix = "WARPSTALL ";
  for (const kscope::warp_stall_profile& k : r.kernels)
    std::fputs(kscope::format_warp_stalls(k, o).c_str(), stdout);
  std::fflush(stdout);
}

// A pass that did not collect: printed, then a failure where PC sampling is expected
// (the case ends), else the case is recorded as not run and returns.
#define KSCOPE_TEST_REQUIRE_COLLECTED(r)                                                                          \
  do {                                                                                                            \
    if (!(r).ok()) {                                                                                              \
      std::printf("WARPSTALL refused (%s): %s\n", kscope::to_string((r).state), (r).message.c_str());             \
      KSCOPE_TEST_REFUSED(kscope_test::feature::pc_sampling, "profile_warp_stalls", kscope::to_string((r).state), \
                          (r).message);                                                                           \
    }                                                                                                             \
  } while (0)

// The profile whose name contains `part`, or nullptr.
const kscope::warp_stall_profile* find(const kscope::warp_stall_result& r, const std::string& part) {
  for (const kscope::warp_stall_profile& k : r.kernels)
    if (k.name.find(part) != std::string::npos) return &k;
  return nullptr;
}

}  // namespace

// First in the file on purpose (see the top): its pass is where this file's module loads.
TEST_CASE("source lines: the hottest PC of a -lineinfo kernel loaded inside the pass maps to this file") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::pc_sampling);
  constexpr int n = 1 << 16;  // 256 KiB of indices: cache-resident, latency-bound
  std::vector<int> host(n);
  for (int i = 0; i < n; ++i) host[static_cast<std::size_t>(i)] = static_cast<int>((i * 4099LL + 1) % n);
  int* next = nullptr;
  KSCOPE_TEST_REQUIRE_CUDA(cudaMalloc(&next, n * sizeof(int)));
  KSCOPE_TEST_REQUIRE_CUDA(cudaMemcpy(next, host.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  const int blocks = sm_count() * 4, threads = 256;
  device_buffer out(static_cast<std::size_t>(blocks) * threads * sizeof(int));
  KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceSynchronize());  // no kernel of this file has run yet

  const kscope::warp_stall_result r = kscope::profile_warp_stalls(
      [&] { lineinfo_chase<<<blocks, threads>>>(next, n, 8192, reinterpret_cast<int*>(out.get())); },
      sampling_options());
  print(r);
  cudaFree(next);
  KSCOPE_TEST_REQUIRE_COLLECTED(r);
  REQUIRE(r.kernels.size() == 1);
  const kscope::warp_stall_profile& k = r.kernels[0];
  CHECK(k.name.find("lineinfo_chase") != std::string::npos);
  CHECK_MESSAGE(k.total_samples() > 1000, k.total_samples() << " samples");
  const std::vector<kscope::warp_stall_pc> hot = k.hottest_pcs(5);
  REQUIRE(!hot.empty());
  for (const kscope::warp_stall_pc& pc : hot) {
    const std::string line = pc.source().empty() ? std::string(kscope::source_line_reason(pc.line_status))
                                                 : pc.source();
    std::printf("WARPSTALL source line: %s -> %s [%s] (%llu samples)\n", pc.where().c_str(), line.c_str(),
                kscope::to_string(pc.line_status), static_cast<unsigned long long>(pc.samples()));
    // std::string: doctest prints a bare const char* as a pointer.
    MESSAGE(pc.where() << " -> " << line << " [" << std::string(kscope::to_string(pc.line_status)) << "]");
  }
  std::printf("WARPSTALL kernel lines %u..%u; json: %s\n", chase_first_line, chase_last_line,
              kscope::warp_stalls_json({k}, 3).c_str());
  std::fputs(kscope::format_warp_stalls_markdown(k).c_str(), stdout);
  std::fflush(stdout);

  const kscope::warp_stall_pc& top = hot.front();
  const char* loading = std::getenv("CUDA_MODULE_LOADING");
  if (loading != nullptr && std::string(loading) == "EAGER") {
    // Loaded with the context, before the pass watched: the PC says so, in words.
    CHECK_MESSAGE(top.line_status == kscope::source_line_status::module_not_seen,
                  std::string(kscope::to_string(top.line_status)));
    CHECK(std::string(kscope::source_line_reason(top.line_status)).find("module loaded before kscope saw it") !=
          std::string::npos);
    return;
  }
  // "module loads watched during the pass" (or "... by kscope's activity collector").
  CHECK_MESSAGE(r.module_loads.rfind("module loads watched", 0) == 0, r.module_loads);
  REQUIRE_MESSAGE(top.line_status == kscope::source_line_status::resolved,
                  top.where() << ": " << std::string(kscope::to_string(top.line_status)) << ": "
                              << std::string(kscope::source_line_reason(top.line_status)));
  CHECK_MESSAGE(top.file.find("warp_stalls_test.cu") != std::string::npos, top.file);
  CHECK_MESSAGE(top.line > chase_first_line, top.source() << " is before the kernel (" << chase_first_line << ")");
  CHECK_MESSAGE(top.line < chase_last_line, top.source() << " is after the kernel (" << chase_last_line << ")");
  // The total lists the same PC with the same line.
  const std::vector<kscope::warp_stall_pc> total_hot = r.total.hottest_pcs(1);
  REQUIRE(!total_hot.empty());
  CHECK(total_hot.front().source() == top.source());
}

TEST_CASE("naive fp32 GEMM, n = 1024: more than 1000 samples and a dominant stall") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::pc_sampling);
  constexpr int n = 1024;
  const std::size_t elements = static_cast<std::size_t>(n) * n;
  device_buffer a(elements * sizeof(float)), b(elements * sizeof(float)), c(elements * sizeof(float));
  fill<<<static_cast<unsigned>((elements + 255) / 256), 256>>>(a.get(), elements, 1.0f);
  fill<<<static_cast<unsigned>((elements + 255) / 256), 256>>>(b.get(), elements, 2.0f);
  const dim3 block(16, 16);
  const dim3 grid(n / 16, n / 16);
  // No launch before sampling. With lazy module loading a kernel's code is loaded at its
  // first launch, and CUPTI knows the functions loaded before its first PC-sampling pass
  // or during a pass, not those loaded between two passes: seen on an H200, a kernel
  // first launched between two passes had all its samples reported as "non-user".
  KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceSynchronize());

  int calls = 0;
  const kscope::warp_stall_result r = kscope::profile_warp_stalls(
      [&] {
        ++calls;
        naive_sgemm<<<grid, block>>>(a.get(), b.get(), c.get(), n);
      },
      sampling_options());
  print(r);
  KSCOPE_TEST_REQUIRE_COLLECTED(r);
  CHECK(calls == 1);
  // The sampled run computed the product: every output is the sum of n products 1 * 2.
  std::vector<float> host(elements);
  KSCOPE_TEST_REQUIRE_CUDA(cudaMemcpy(host.data(), c.get(), elements * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(host.front() == 2.0f * n);
  CHECK(host.back() == 2.0f * n);

  REQUIRE(r.kernels.size() == 1);
  const kscope::warp_stall_profile& k = r.kernels[0];
  CHECK(k.name.find("naive_sgemm") != std::string::npos);
  CHECK_MESSAGE(k.total_samples() > 1000, k.total_samples() << " samples");
  const kscope::warp_stall_finding d = kscope::dominant_stall(k);
  REQUIRE_MESSAGE(d.found, d.text);
  std::printf("WARPSTALL naive GEMM dominant stall: %s (%s, %s)\n", d.reason.c_str(), kscope::to_string(d.category),
              d.category == kscope::stall_category::memory ? "a memory wait, as expected"
                                                           : "NOT a memory wait: look at the table above");
  CHECK(!k.hottest_pcs(3).empty());
  CHECK(r.total.total_samples() == k.total_samples());
  std::printf("WARPSTALL json: %s\n", kscope::warp_stalls_json({k}, 3).c_str());
}

TEST_CASE("a barrier-bound kernel: barrier is the top stall reason") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::pc_sampling);
  constexpr int threads = 256;  // 8 warps: warp 0 works, 7 wait
  const int blocks = sm_count() * 8;
  device_buffer out(static_cast<std::size_t>(blocks) * threads * sizeof(float));
  constexpr int rounds = 2000, chain = 256;
  KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceSynchronize());  // no warm-up launch: see the first case

  const kscope::warp_stall_result r = kscope::profile_warp_stalls(
      [&] { barrier_bound<<<blocks, threads>>>(out.get(), rounds, chain); }, sampling_options());
  print(r);
  KSCOPE_TEST_REQUIRE_COLLECTED(r);
  REQUIRE(r.kernels.size() == 1);
  const kscope::warp_stall_profile& k = r.kernels[0];
  CHECK(k.name.find("barrier_bound") != std::string::npos);
  CHECK_MESSAGE(k.total_samples() > 1000, k.total_samples() << " samples");
  const kscope::warp_stall_finding d = kscope::dominant_stall(k);
  std::printf("WARPSTALL barrier kernel dominant stall: %s\n", d.text.c_str());
  CHECK_MESSAGE(d.reason == "barrier", d.text);
  CHECK_MESSAGE(k.share_of("barrier") > 0.5, "barrier share " << k.share_of("barrier"));
}

TEST_CASE("two kernels in one kernel-serialized pass: two launches, each named") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::pc_sampling);
  constexpr int n = 256;
  const std::size_t elements = static_cast<std::size_t>(n) * n;
  device_buffer a(elements * sizeof(float)), b(elements * sizeof(float)), c(elements * sizeof(float));
  const int blocks = sm_count() * 8;
  device_buffer out(static_cast<std::size_t>(blocks) * 256 * sizeof(float));
  const dim3 block(16, 16), grid(n / 16, n / 16);
  KSCOPE_TEST_REQUIRE_CUDA(cudaDeviceSynchronize());  // both kernels were loaded during earlier passes

  const kscope::warp_stall_result r = kscope::profile_warp_stalls(
      [&] {
        naive_sgemm<<<grid, block>>>(a.get(), b.get(), c.get(), n);
        barrier_bound<<<blocks, 256>>>(out.get(), 200, 256);
      },
      sampling_options());
  print(r);
  KSCOPE_TEST_REQUIRE_COLLECTED(r);
  CHECK(r.kernels.size() == 2);
  const kscope::warp_stall_profile* gemm = find(r, "naive_sgemm");
  const kscope::warp_stall_profile* barrier = find(r, "barrier_bound");
  REQUIRE(gemm != nullptr);
  REQUIRE(barrier != nullptr);
  CHECK(gemm->launches == 1);  // kernel-serialized: each record carries its launch
  CHECK(barrier->launches == 1);
  CHECK(r.total.launches == 2);
  CHECK(r.total.total_samples() == gemm->total_samples() + barrier->total_samples());
  CHECK(r.total.name == "all kernels");
}

TEST_CASE("a pass inside a pass is busy; an exception from the work comes out and sampling stops") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::pc_sampling);
  int inner_calls = 0;
  kscope::warp_stall_result inner;
  kscope::counter_result counters;
  const kscope::warp_stall_result outer = kscope::profile_warp_stalls([&] {
    inner = kscope::profile_warp_stalls([&] { ++inner_calls; });
    counters = kscope::profile_counters({"gpu__time_duration.sum"}, [&] { ++inner_calls; });
  });
  print(outer);
  KSCOPE_TEST_REQUIRE_COLLECTED(outer);
  CHECK(inner.state == kscope::counter_state::busy);
  CHECK(counters.state == kscope::counter_state::busy);
  CHECK(inner_calls == 0);

  CHECK_THROWS_AS((void)kscope::profile_warp_stalls([] { throw std::runtime_error("work failed"); }),
                  std::runtime_error);
  // Sampling was disabled on the way out: the next pass enables it again.
  device_buffer out(256 * sizeof(float));
  const kscope::warp_stall_result again =
      kscope::profile_warp_stalls([&] { barrier_bound<<<1, 256>>>(out.get(), 10, 16); }, sampling_options());
  CHECK_MESSAGE(again.ok(), again.message);
}
