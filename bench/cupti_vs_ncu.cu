// Does kscope's CUPTI timing agree with Nsight Compute's? (GPU needed; driven by
// bench/cupti_vs_ncu.sh, which builds this file with nvcc and runs it twice.)
//
// A ~200 us spin kernel is launched `count` times inside a scope; kscope's collector times
// each launch through CUPTI, and the program prints the median:
//
//   KSCOPE_CUPTI_KERNEL_NS median=200512 n=20 min=... max=...
//   KSCOPE_EVENT_KERNEL_NS median=...      (CUDA events around each launch, for reference)
//
// Run plainly, the collector owns CUPTI. Run under `ncu --clock-control none --metrics
// gpu__time_duration.sum`, ncu owns it: the collector must degrade without failing and
// print the warning line (KSCOPE_WARNING: CUPTI owned by another tool (...)), and the
// script compares ncu's per-kernel gpu__time_duration.sum with the plain run's median.
//
// The spin waits on %globaltimer (wall-clock ns) by default, so the kernel lasts 200 us
// whatever the SM clock does between the two runs (ncu with --clock-control none leaves
// the clocks free, and it pauses between kernels, letting them drop); --spin clock64
// waits for a cycle count derived from the device clock rate instead.
//
//   cupti_vs_ncu [--us 200] [--count 20] [--warmup 5] [--spin globaltimer|clock64]
#include <kscope/activity/collector.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One block, one thread: the duration is the spin, nothing else.
__global__ void spin_kernel(long long amount, int use_clock64, unsigned long long* sink) {
  unsigned long long spins = 0;
  if (use_clock64 != 0) {
    const long long start = clock64();
    while (clock64() - start < amount) ++spins;
  } else {
    const unsigned long long start = global_ns();
    while (global_ns() - start < static_cast<unsigned long long>(amount)) ++spins;
  }
  if (sink != nullptr) *sink = spins;
}

#define CHECK_CUDA(call)                                                          \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));     \
      return 2;                                                                   \
    }                                                                             \
  } while (0)

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  double target_us = 200;
  int count = 20;
  int warmup = 5;
  bool use_clock64 = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--us") == 0) target_us = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--count") == 0) count = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--spin") == 0) use_clock64 = std::strcmp(argv[i + 1], "clock64") == 0;
  }
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 0;
  }

  auto& collector = kscope::cupti_collector::global();
  const bool cupti = collector.start();
  std::printf("KSCOPE_STATUS %s\n", collector.status().message.c_str());
  if (!cupti) std::printf("KSCOPE_WARNING: %s\n", collector.status().message.c_str());

  int clock_khz = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long amount = use_clock64 ? static_cast<long long>(target_us * clock_khz / 1000.0)
                                       : static_cast<long long>(target_us * 1000.0);
  std::printf("spin: %s, %lld %s\n", use_clock64 ? "clock64" : "globaltimer", amount,
              use_clock64 ? "cycles" : "ns");

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned long long* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&sink, sizeof(unsigned long long)));
  cudaEvent_t before, after;
  CHECK_CUDA(cudaEventCreate(&before));
  CHECK_CUDA(cudaEventCreate(&after));

  constexpr kscope::node_id spin_node = 77;
  auto& thread = kscope::detail::this_thread_state();
  const kscope::node_id saved = thread.current;
  thread.current = spin_node;  // what kscope::scope does while open
  std::vector<double> event_ns;
  for (int i = 0; i < warmup + count; ++i) {
    CHECK_CUDA(cudaEventRecord(before, stream));
    spin_kernel<<<1, 1, 0, stream>>>(amount, use_clock64 ? 1 : 0, sink);
    CHECK_CUDA(cudaEventRecord(after, stream));
    CHECK_CUDA(cudaEventSynchronize(after));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, before, after));
    if (i >= warmup) event_ns.push_back(ms * 1e6);
  }
  thread.current = saved;
  CHECK_CUDA(cudaGetLastError());

  if (cupti) {
    collector.flush();
    const kscope::cupti_snapshot snap = collector.snapshot();
    std::vector<const kscope::gpu_activity_event*> spins;
    for (const auto& e : snap.activity.recent) {
      if (e.kind == kscope::activity_kind::kernel && e.name.find("spin_kernel") != std::string_view::npos &&
          e.node == spin_node) {
        spins.push_back(&e);
      }
    }
    std::sort(spins.begin(), spins.end(), [](const auto* a, const auto* b) { return a->start_ns < b->start_ns; });
    std::vector<double> cupti_ns;
    for (std::size_t i = static_cast<std::size_t>(warmup); i < spins.size(); ++i) {
      cupti_ns.push_back(static_cast<double>(spins[i]->end_ns - spins[i]->start_ns));
    }
    if (cupti_ns.empty()) {
      std::printf("KSCOPE_ERROR: no spin_kernel records attributed to the scope\n");
      return 1;
    }
    std::printf("KSCOPE_CUPTI_KERNEL_NS median=%.0f n=%zu min=%.0f max=%.0f\n", median(cupti_ns), cupti_ns.size(),
                *std::min_element(cupti_ns.begin(), cupti_ns.end()),
                *std::max_element(cupti_ns.begin(), cupti_ns.end()));
    for (const auto& w : snap.warnings) std::printf("KSCOPE_WARNING: %s\n", w.c_str());
  }
  std::printf("KSCOPE_EVENT_KERNEL_NS median=%.0f n=%zu\n", median(event_ns), event_ns.size());
  CHECK_CUDA(cudaFree(sink));
  CHECK_CUDA(cudaEventDestroy(before));
  CHECK_CUDA(cudaEventDestroy(after));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
