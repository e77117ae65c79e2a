// What a profiled step costs (issue 41 item 3): a step of 8 nested scopes and 307 kernels
// (~20 ms: each kernel spins 65 us on the GPU's clock), 12 steps with the per-scope counters
// on (whole steps, the default), against the same step unprofiled; without and with the
// activity collector. Prints each step's wall time, the 12 steps' total, and the counters'
// own cost line. GPU needed:
//
//   nvcc -std=c++17 -arch=sm_90 -O2 -DKSCOPE_HAS_CUDA=1 -Xcompiler -pthread -Iinclude \
//     bench/profiled_steps.cu -o profiled_steps -ldl && ./profiled_steps [--calls]
//
// --calls: each scope's calls profiled on their own (whole_steps = false), 3 steps only:
// the way before whole steps (the issue measured 25 s for the 12 steps).
// --scopes: whole steps with one range per scope stretch (ranges_per_scope) instead of one
// per kernel. Each nested scope's line then gives its kernels per call and its measured GPU
// time per call (gpu__time_duration.sum; each launched 38 kernels of 65 us: ~2.5 ms).
#include <kscope/kscope.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

__global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

constexpr int nested = 8, per_scope = 38, in_step = 3;  // 8 x 38 + 3 = 307 kernels
const char* const names[nested] = {"embed", "attn", "proj", "norm", "mlp_up", "mlp_down", "logits", "sample"};

double one_step(cudaStream_t stream) {
  const auto t0 = std::chrono::steady_clock::now();
  {
    kscope::scope step{"step"};
    for (int k = 0; k < in_step; ++k) spin<<<1, 32, 0, stream>>>(65000);
    for (const char* name : names) {
      kscope::scope s{name};
      for (int k = 0; k < per_scope; ++k) spin<<<1, 32, 0, stream>>>(65000);
    }
    cudaStreamSynchronize(stream);
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void run(const char* label, cudaStream_t stream, bool whole_steps, int steps, bool per_scope = false) {
  auto& session = kscope::session::global();
  std::vector<double> plain;
  for (int i = 0; i < 20; ++i) plain.push_back(one_step(stream));
  const double unprofiled = median(plain);
  session.reset();
  kscope::scope_counter_sampler::global().reset();
  kscope::scope_counter_options options;
  options.whole_steps = whole_steps;
  options.ranges_per_scope = per_scope;
  if (!session.enable_counters(options)) {
    const kscope::session_report r = session.report();
    std::printf("%s: counters not enabled: %s\n", label, r.counters ? r.counters->status.c_str() : "?");
    return;
  }
  std::vector<double> profiled;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) profiled.push_back(one_step(stream));
  const double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  session.disable_counters();
  const kscope::session_report r = session.report();
  std::printf("%s: unprofiled step %.2f ms (median of 20); %d steps with counters %.0f ms in all (%.2f s); "
              "per step:",
              label, unprofiled, steps, total, total / 1e3);
  for (double ms : profiled) std::printf(" %.1f", ms);
  std::printf("\n%s: median profiled step %.1f ms = %.2fx the unprofiled step\n", label, median(profiled),
              median(profiled) / unprofiled);
  if (r.counters) {
    std::printf("%s: %s\n", label, kscope::describe_cost(r.counters->cost).c_str());
    for (const std::string& n : r.counters->notes) std::printf("%s: note: %s\n", label, n.c_str());
  }
  std::size_t split = 0;
  for (const kscope::scope_report& s : r.scopes) {
    if (!s.counters || s.depth != 2) continue;
    ++split;
    const auto duration = s.counters->totals.find("gpu__time_duration.sum");
    std::printf("%s:   %s: %llu calls, %.1f kernels a call, GPU time %.3f ms a call\n", label, s.name.c_str(),
                static_cast<unsigned long long>(s.counters->profiled_calls),
                s.counters->per_call(static_cast<double>(s.counters->kernels)),
                duration != s.counters->totals.end() ? s.counters->per_call(duration->second) / 1e6 : -1.0);
  }
  std::printf("%s: nested scopes with counters of their own: %zu of %d\n", label, split, nested);
}

}  // namespace

int main(int argc, char** argv) {
  const bool calls = argc > 1 && std::strcmp(argv[1], "--calls") == 0;
  const bool per_scope = argc > 1 && std::strcmp(argv[1], "--scopes") == 0;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) {
    std::printf("no GPU\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s\n", prop.name);
  if (calls) {
    run("scope calls, no collector", stream, false, 3);
    return 0;
  }
  if (per_scope) {
    run("scope ranges, no collector", stream, true, 12, true);
    if (kscope::session::global().enable_cupti()) run("scope ranges, collector on", stream, true, 12, true);
    return 0;
  }
  run("whole steps, no collector", stream, true, 12);
  if (!kscope::session::global().enable_cupti()) {
    std::printf("collector not started\n");
    return 0;
  }
  run("whole steps, collector on", stream, true, 12);
  return 0;
}
