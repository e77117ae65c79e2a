// What planning the per-scope counters' one-pass metric groups costs, without a GPU: CUPTI's
// profiler host API answers for a chip by name (no device, no counter-availability image),
// so the plan kscope makes at the first profiled step (evidence/metrics.hpp,
// plan_one_pass_groups) is made here with the same questions, each on a throwaway host
// object as counters/collect.hpp asks them, and timed: questions asked, the time in
// cuptiProfilerHostInitialize and in cuptiProfilerHostConfigAddMetrics (the rest is the
// config image and the pass count). A plan kept on disk (counters/detail/plan_cache.hpp)
// saves all of it in later runs.
//
//   g++ -std=c++17 -O1 -Iinclude -I/usr/local/cuda/include bench/counter_plan_bench.cpp \
//     -o counter_plan_bench -L/usr/local/cuda/lib64 -lcupti && \
//     LD_LIBRARY_PATH=/usr/local/cuda/lib64 ./counter_plan_bench [chip, default GH100]
#include <kscope/evidence/metrics.hpp>
#include <cupti_profiler_host.h>
#include <cstdio>
#include <chrono>
#include <vector>
#include <string>
static const char* chip = "GH100";
static size_t questions = 0; static double host_ms = 0, init_ms = 0, add_ms = 0;
size_t passes(const std::vector<std::string>& names) {
  ++questions;
  auto t0 = std::chrono::steady_clock::now();
  CUpti_Profiler_Host_Initialize_Params p = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER; p.pChipName = chip;
  if (cuptiProfilerHostInitialize(&p)) return 0;
  auto ti = std::chrono::steady_clock::now(); init_ms += std::chrono::duration<double, std::milli>(ti - t0).count();
  std::vector<const char*> v; for (auto& n : names) v.push_back(n.c_str());
  CUpti_Profiler_Host_ConfigAddMetrics_Params a = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  a.pHostObject = p.pHostObject; a.ppMetricNames = v.data(); a.numMetrics = v.size();
  size_t out = 0;
  const bool added = cuptiProfilerHostConfigAddMetrics(&a) == 0;
  add_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ti).count();
  if (added) {
    CUpti_Profiler_Host_GetConfigImageSize_Params s = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    s.pHostObject = p.pHostObject; cuptiProfilerHostGetConfigImageSize(&s);
    std::vector<uint8_t> img(s.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params g = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    g.pHostObject = p.pHostObject; g.configImageSize = img.size(); g.pConfigImage = img.data();
    cuptiProfilerHostGetConfigImage(&g);
    CUpti_Profiler_Host_GetNumOfPasses_Params n = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    n.configImageSize = img.size(); n.pConfigImage = img.data();
    if (cuptiProfilerHostGetNumOfPasses(&n) == 0) out = n.numOfPasses;
  }
  CUpti_Profiler_Host_Deinitialize_Params d = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
  d.pHostObject = p.pHostObject; cuptiProfilerHostDeinitialize(&d);
  host_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}
int main(int argc, char** argv) {
  if (argc > 1) chip = argv[1];
  auto t0 = std::chrono::steady_clock::now();
  auto plan = kscope::plan_one_pass_groups(kscope::scope_metric_names(), passes, chip);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %zu groups, %zu questions, %.0f ms (host %.0f ms: init %.0f, add %.0f)\n", chip, plan.groups.size(), questions, ms, host_ms, init_ms, add_ms);
  for (auto& g : plan.groups) { std::printf(" [%zu]", g.size()); } std::printf("\n");
  for (auto& n : plan.notes) std::printf("note: %s\n", n.c_str());
}
