// What planning the per-scope counters' one-pass metric groups costs, without a GPU: CUPTI's
// profiler host API answers for a chip by name (no device, no counter-availability image),
// so the plan kscope makes at the first profiled step (evidence/metrics.hpp,
// plan_one_pass_groups) is made here with the same questions, each on a throwaway host
// object as counters/collect.hpp asks them, and timed: questions asked, the time in
// cuptiProfilerHostInitialize and in cuptiProfilerHostConfigAddMetrics (the rest is the
// config image and the pass count). A plan kept on disk (counters/detail/plan_cache.hpp)
// saves all of it in later runs.
//
// A program of its own, not a Google Benchmark (hence not named *_bench.cpp, which
// bench/CMakeLists.txt builds as one); it links CUPTI, which kscope itself never does:
//
//   g++ -std=c++17 -O1 -Iinclude -I/usr/local/cuda/include bench/counter_plan_probe.cpp
//       -o counter_plan_probe -L/usr/local/cuda/lib64 -lcupti
//   LD_LIBRARY_PATH=/usr/local/cuda/lib64 ./counter_plan_probe [chip, default GH100]
#include <kscope/evidence/metrics.hpp>

#include <cupti_profiler_host.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

const char* chip = "GH100";
std::size_t questions = 0;
double host_ms = 0, init_ms = 0, add_ms = 0;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// CUPTI's parameter structs: zeroed, with their size set (what CUPTI checks).
template <class Params>
Params params(std::size_t struct_size) {
  Params p{};
  p.structSize = struct_size;
  return p;
}

// The question the plan asks: how many passes do these metrics need together on `chip`?
// 0 where CUPTI refuses them.
std::size_t passes(const std::vector<std::string>& names) {
  ++questions;
  const auto t0 = std::chrono::steady_clock::now();
  auto init = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  init.pChipName = chip;
  if (cuptiProfilerHostInitialize(&init) != CUPTI_SUCCESS) return 0;
  const auto initialized = std::chrono::steady_clock::now();
  init_ms += ms_since(t0);
  std::vector<const char*> pointers;
  for (const std::string& n : names) pointers.push_back(n.c_str());
  auto add = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = init.pHostObject;
  add.ppMetricNames = pointers.data();
  add.numMetrics = pointers.size();
  const bool added = cuptiProfilerHostConfigAddMetrics(&add) == CUPTI_SUCCESS;
  add_ms += ms_since(initialized);
  std::size_t out = 0;
  if (added) {
    auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    size.pHostObject = init.pHostObject;
    if (cuptiProfilerHostGetConfigImageSize(&size) == CUPTI_SUCCESS) {
      std::vector<std::uint8_t> image(size.configImageSize);
      auto get = params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
      get.pHostObject = init.pHostObject;
      get.configImageSize = image.size();
      get.pConfigImage = image.data();
      auto count = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
      count.configImageSize = image.size();
      count.pConfigImage = image.data();
      if (cuptiProfilerHostGetConfigImage(&get) == CUPTI_SUCCESS && cuptiProfilerHostGetNumOfPasses(&count) == CUPTI_SUCCESS)
        out = count.numOfPasses;
    }
  }
  auto done = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
  done.pHostObject = init.pHostObject;
  (void)cuptiProfilerHostDeinitialize(&done);
  host_ms += ms_since(t0);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) chip = argv[1];
  const auto t0 = std::chrono::steady_clock::now();
  const auto plan = kscope::plan_one_pass_groups(kscope::scope_metric_names(), passes, chip);
  std::printf("%s: %zu groups, %zu questions, %.0f ms (host %.0f ms: init %.0f, add %.0f)\n", chip, plan.groups.size(),
              questions, ms_since(t0), host_ms, init_ms, add_ms);
  for (const auto& g : plan.groups) std::printf(" [%zu]", g.size());
  std::printf("\n");
  for (const auto& n : plan.notes) std::printf("note: %s\n", n.c_str());
}
