// Where a profiled step's time goes, and which CUPTI set-ups may be kept between steps
// (issue 41 item 3: a profiled step <= 3x its unprofiled time). One mode per process (a
// crash in one leaves the others' lines), each a loop of steps of 307 kernels of 65 us, one
// range per kernel (auto range, user replay), the metric groups kscope's per-scope counters
// plan (detail::plan_counter_groups) rotating over the steps. Each step prints how long
// each phase took, how many evaluated values were NaN and the kernels' summed GPU time.
//
//   nvcc -std=c++17 -arch=sm_90 -O2 -DKSCOPE_HAS_CUDA=1 -Xcompiler -pthread -Iinclude \
//     bench/counter_step_probe.cu -o counter_step_probe -ldl
//   for m in fresh cached kept kept_fresh kept_same kept_newdata; do ./counter_step_probe $m 8; done
//   (bench/counter_steps.sh does this, with bench/profiled_steps.cu, in one call)
//
// Modes:
//   fresh       every step: host object, config image, Enable, image, SetConfig, ..., Disable
//   cached      host object and config image kept per group; Enable and Disable every step
//   kept        range profiler enabled once; host, config and counter-data image kept per group
//   kept_fresh  enabled once; each step's host, config and image made afresh and freed after it
//   kept_same   enabled once; one group only, its images re-armed every step
//   kept_newdata  enabled once; host and config kept per group, a new counter-data image each step
//   segments    as cached, but 9 user ranges a step (one per stretch of the step a scope would
//               own) instead of one range per kernel
//   segments_kept  segments with the range profiler enabled once and every group's images kept
//   segments_kept_same  segments, enabled once, one group only (what a kept profiler costs a
//               step with few ranges: a kept profiler keeps its first group, session 21)
//   started     enabled and started once, one group; each step an unprofiled step (timed
//               while started) and a profiled one of 9 ranges decoded without a Stop
#include <kscope/kscope.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#if !KSCOPE_HAS_RANGE_PROFILER
int main() {
  std::puts("SKIP: built without the CUPTI range profiler headers");
  return 77;
}
#else

namespace {

__global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

constexpr int kernels_per_step = 307;

using clock_type = std::chrono::steady_clock;
// Resident memory in MB (/proc/self/statm): what a kept host object and its images cost.
double resident_mb() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * 4096.0 / 1e6;
}

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

struct group_setup {
  std::vector<std::string> metrics;
  std::vector<const char*> names;
  std::unique_ptr<kscope::detail::profiler_host> host;
  std::vector<std::uint8_t> config;
  std::vector<std::uint8_t> data;
};

bool ok(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  std::printf("FAIL %s: %d\n", what, static_cast<int>(r));
  return false;
}

// The counter-data image for `max_ranges` ranges of the group's metrics.
bool size_image(const kscope::detail::profiler_api& p, CUpti_RangeProfiler_Object* object, group_setup& gs,
                std::size_t max_ranges) {
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params, size);
  size.pRangeProfilerObject = object;
  size.pMetricNames = gs.names.data();
  size.numMetrics = gs.names.size();
  size.maxNumOfRanges = max_ranges;
  size.maxNumRangeTreeNodes = static_cast<std::uint32_t>(max_ranges);
  if (!ok(p.range_get_counter_data_size(&size), "GetCounterDataSize")) return false;
  gs.data.assign(size.counterDataSize, 0);
  return true;
}

// Initializes the group's image and sets its config on the profiler (user replay, one level).
bool arm_image(const kscope::detail::profiler_api& p, CUpti_RangeProfiler_Object* object, group_setup& gs,
               std::size_t max_ranges, CUpti_ProfilerRange range) {
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params, init);
  init.pRangeProfilerObject = object;
  init.counterDataSize = gs.data.size();
  init.pCounterData = gs.data.data();
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params, set);
  set.pRangeProfilerObject = object;
  set.configSize = gs.config.size();
  set.pConfig = gs.config.data();
  set.counterDataImageSize = gs.data.size();
  set.pCounterDataImage = gs.data.data();
  set.range = range;
  set.replayMode = CUPTI_UserReplay;
  set.maxRangesPerPass = max_ranges;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  return ok(p.range_counter_data_image_initialize(&init), "DataInit") && ok(p.range_set_config(&set), "SetConfig");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "fresh";
  const int steps = argc > 2 ? std::atoi(argv[2]) : 8;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  // Unprofiled step, for the ratio.
  for (int w = 0; w < 2; ++w) {
    const auto t = clock_type::now();
    for (int k = 0; k < kernels_per_step; ++k) spin<<<1, 32, 0, stream>>>(65000);
    cudaStreamSynchronize(stream);
    if (w == 1) std::printf("%s unprofiled step %.2f ms\n", mode.c_str(), ms_since(t));
  }

  using namespace kscope::detail;
  kscope::counter_options options;
  kscope::one_pass_plan plan;
  kscope::counter_state state{};
  std::string why;
  auto t0 = clock_type::now();
  if (!plan_counter_groups(kscope::scope_metric_names(), options, plan, state, why)) {
    std::printf("FAIL plan: %s\n", why.c_str());
    return 1;
  }
  std::printf("%s plan %.1f ms: %zu groups\n", mode.c_str(), ms_since(t0), plan.groups.size());
  if (mode == "kept_same" || mode == "segments_kept_same") plan.groups.resize(1);

  t0 = clock_type::now();
  counter_setup setup;
  if (!setup.open(options.cupti_library, options.nvperf_host_library)) {
    std::printf("FAIL open: %s\n", setup.message.c_str());
    return 1;
  }
  std::printf("%s open %.1f ms\n", mode.c_str(), ms_since(t0));
  const profiler_api& p = setup.libs->profiler;
  if (mode == "started") {
    // The profiler enabled and STARTED once; each profiled step only pushes and pops its
    // ranges, then decodes without a Stop. Does CUPTI decode ranges while started, and what
    // does an unprofiled step (no range open) cost meanwhile? Answers whether a profiled
    // step can avoid Start's ~53 ms (kept) or ~150-800 ms (fresh) every time.
    group_setup gs;
    gs.metrics = plan.groups[0];
    for (const std::string& m : gs.metrics) gs.names.push_back(m.c_str());
    gs.host = std::make_unique<profiler_host>();
    std::size_t passes = 0;
    if (!ok(gs.host->initialize(p, CUPTI_PROFILER_TYPE_RANGE_PROFILER, setup.chip, setup.availability), "HostInit") ||
        !ok(gs.host->add_metrics(gs.names.data(), gs.names.size()), "AddMetrics"))
      return 1;
    const profiler_host_step st = gs.host->config_image(gs.config, &passes);
    if (!ok(st.result, st.call ? st.call : "config")) return 1;
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params, e);
    e.ctx = setup.context;
    if (!ok(p.range_enable(&e), "Enable")) return 1;
    CUpti_RangeProfiler_Object* object = e.pRangeProfilerObject;
    const std::size_t max_ranges = static_cast<std::size_t>(steps) * 9 + 1;
    if (!size_image(p, object, gs, max_ranges) || !arm_image(p, object, gs, max_ranges, CUPTI_UserRange)) return 1;
    auto t = clock_type::now();
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params, start);
    start.pRangeProfilerObject = object;
    if (!ok(p.range_start(&start), "Start")) return 1;
    std::printf("started start (once) %.1f ms\n", ms_since(t));
    std::size_t evaluated_ranges = 0;
    for (int s = 0; s < steps; ++s) {
      t = clock_type::now();
      for (int k = 0; k < kernels_per_step; ++k) spin<<<1, 32, 0, stream>>>(65000);
      cudaStreamSynchronize(stream);
      const double unprofiled = ms_since(t);
      t = clock_type::now();
      for (int seg = 0; seg < 9; ++seg) {
        const std::string name = std::to_string(s) + " segment " + std::to_string(seg);
        KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_PushRange_Params, push);
        push.pRangeProfilerObject = object;
        push.pRangeName = name.c_str();
        if (!ok(p.range_push(&push), "PushRange")) return 1;
        for (int k = seg * kernels_per_step / 9; k < (seg + 1) * kernels_per_step / 9; ++k)
          spin<<<1, 32, 0, stream>>>(65000);
        KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_PopRange_Params, pop);
        pop.pRangeProfilerObject = object;
        if (!ok(p.range_pop(&pop), "PopRange")) return 1;
      }
      cudaDeviceSynchronize();
      const double work = ms_since(t);
      t = clock_type::now();
      KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params, decode);
      decode.pRangeProfilerObject = object;
      const CUptiResult decoded = p.range_decode_data(&decode);
      KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params, info);
      info.pCounterDataImage = gs.data.data();
      info.counterDataImageSize = gs.data.size();
      const CUptiResult informed = p.range_get_counter_data_info(&info);
      const double decode_ms = ms_since(t);
      std::size_t nan = 0, values = 0;
      std::vector<double> v(gs.names.size());
      for (std::size_t r = evaluated_ranges; informed == CUPTI_SUCCESS && r < info.numTotalRanges; ++r) {
        if (!ok(gs.host->evaluate(gs.data, r, gs.names.data(), gs.names.size(), v.data()), "Evaluate")) break;
        for (double x : v) {
          ++values;
          if (std::isnan(x)) ++nan;
        }
      }
      if (informed == CUPTI_SUCCESS) evaluated_ranges = info.numTotalRanges;
      std::printf("started step %d: unprofiled while started %.2f ms, profiled work %.2f ms, decode %.2f ms (decode %d, "
                  "info %d), ranges in the image %zu, NaN %zu of %zu new values\n",
                  s, unprofiled, work, decode_ms, static_cast<int>(decoded), static_cast<int>(informed),
                  informed == CUPTI_SUCCESS ? static_cast<std::size_t>(info.numTotalRanges) : std::size_t{0}, nan,
                  values);
      std::fflush(stdout);
    }
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params, stop);
    stop.pRangeProfilerObject = object;
    (void)ok(p.range_stop(&stop), "Stop");
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params, d);
    d.pRangeProfilerObject = object;
    (void)ok(p.range_disable(&d), "Disable");
    return 0;
  }
  const bool user_ranges = mode.rfind("segments", 0) == 0;
  const bool keep_enabled = mode.rfind("kept", 0) == 0 || mode == "segments_kept" || mode == "segments_kept_same";
  const bool keep_host = mode != "fresh" && mode != "kept_fresh";
  constexpr int segments = 9;
  std::map<std::size_t, group_setup> groups;
  CUpti_RangeProfiler_Object* object = nullptr;

  const auto enable = [&]() {
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params, e);
    e.ctx = setup.context;
    if (!ok(p.range_enable(&e), "Enable")) return false;
    object = e.pRangeProfilerObject;
    return true;
  };
  const auto disable = [&]() {
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params, d);
    d.pRangeProfilerObject = object;
    (void)ok(p.range_disable(&d), "Disable");
    object = nullptr;
  };
  if (keep_enabled) {
    t0 = clock_type::now();
    if (!enable()) return 1;
    std::printf("%s enable (once) %.1f ms\n", mode.c_str(), ms_since(t0));
  }

  double total_ms = 0;
  for (int s = 0; s < steps; ++s) {
    const std::size_t g = static_cast<std::size_t>(s) % plan.groups.size();
    const auto step_start = clock_type::now();
    double t_host = 0, t_enable = 0, t_size = 0, t_arm = 0, t_start = 0, t_work = 0, t_stop = 0, t_decode = 0,
           t_eval = 0, t_disable = 0;
    group_setup fresh;
    const bool cached = keep_host && groups.count(g) != 0;
    group_setup& gs = keep_host ? groups[g] : fresh;
    auto t = clock_type::now();
    if (!cached) {
      gs.metrics = plan.groups[g];
      gs.names.clear();
      for (const std::string& m : gs.metrics) gs.names.push_back(m.c_str());
      gs.host = std::make_unique<profiler_host>();
      if (!ok(gs.host->initialize(p, CUPTI_PROFILER_TYPE_RANGE_PROFILER, setup.chip, setup.availability), "HostInit") ||
          !ok(gs.host->add_metrics(gs.names.data(), gs.names.size()), "AddMetrics"))
        return 1;
      std::size_t passes = 0;
      const profiler_host_step st = gs.host->config_image(gs.config, &passes);
      if (!ok(st.result, st.call ? st.call : "config")) return 1;
    }
    t_host = ms_since(t);
    t = clock_type::now();
    if (!keep_enabled && !enable()) return 1;
    t_enable = ms_since(t);
    t = clock_type::now();
    const std::size_t max_ranges = user_ranges ? 16 : 1024;
    if (gs.data.empty()) {
      if (!size_image(p, object, gs, max_ranges)) return 1;
    } else {
      std::fill(gs.data.begin(), gs.data.end(), std::uint8_t{0});
    }
    t_size = ms_since(t);
    t = clock_type::now();
    if (!arm_image(p, object, gs, max_ranges, user_ranges ? CUPTI_UserRange : CUPTI_AutoRange)) return 1;
    cudaDeviceSynchronize();
    t_arm = ms_since(t);
    t = clock_type::now();
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params, start);
    start.pRangeProfilerObject = object;
    if (!ok(p.range_start(&start), "Start")) return 1;
    t_start = ms_since(t);
    t = clock_type::now();
    if (user_ranges) {
      for (int seg = 0; seg < segments; ++seg) {
        const std::string name = "segment " + std::to_string(seg);
        KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_PushRange_Params, push);
        push.pRangeProfilerObject = object;
        push.pRangeName = name.c_str();
        if (!ok(p.range_push(&push), "PushRange")) return 1;
        for (int k = seg * kernels_per_step / segments; k < (seg + 1) * kernels_per_step / segments; ++k)
          spin<<<1, 32, 0, stream>>>(65000);
        KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_PopRange_Params, pop);
        pop.pRangeProfilerObject = object;
        if (!ok(p.range_pop(&pop), "PopRange")) return 1;
      }
    } else {
      for (int k = 0; k < kernels_per_step; ++k) spin<<<1, 32, 0, stream>>>(65000);
    }
    cudaDeviceSynchronize();
    t_work = ms_since(t);
    t = clock_type::now();
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params, stop);
    stop.pRangeProfilerObject = object;
    if (!ok(p.range_stop(&stop), "Stop")) return 1;
    t_stop = ms_since(t);
    t = clock_type::now();
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params, decode);
    decode.pRangeProfilerObject = object;
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params, info);
    info.pCounterDataImage = gs.data.data();
    info.counterDataImageSize = gs.data.size();
    if (!ok(p.range_decode_data(&decode), "Decode") || !ok(p.range_get_counter_data_info(&info), "DataInfo")) return 1;
    t_decode = ms_since(t);
    t = clock_type::now();
    std::vector<double> values(gs.names.size());
    std::size_t nan = 0, evaluated = 0;
    double gpu_ns = 0;
    std::size_t duration_index = gs.names.size();
    for (std::size_t m = 0; m < gs.metrics.size(); ++m)
      if (gs.metrics[m] == "gpu__time_duration.sum") duration_index = m;
    for (std::size_t r = 0; r < info.numTotalRanges; ++r) {
      if (!ok(gs.host->evaluate(gs.data, r, gs.names.data(), gs.names.size(), values.data()), "Evaluate")) break;
      for (std::size_t m = 0; m < values.size(); ++m) {
        ++evaluated;
        if (std::isnan(values[m])) ++nan;
      }
      if (duration_index < values.size() && std::isfinite(values[duration_index])) gpu_ns += values[duration_index];
    }
    t_eval = ms_since(t);
    t = clock_type::now();
    if (!keep_enabled) disable();
    if (mode == "kept_newdata") std::vector<std::uint8_t>().swap(gs.data);
    t_disable = ms_since(t);
    const double step_ms = ms_since(step_start);
    total_ms += step_ms;
    std::printf(
        "%s step %d group %zu (%zu metrics, %zu ranges, all submitted %d): %.1f ms = host %.1f enable %.1f size %.1f "
        "arm %.1f start %.1f work %.1f stop %.1f decode %.1f eval %.1f disable %.1f; NaN %zu of %zu; kernel time "
        "%.2f ms; resident %.0f MB\n",
        mode.c_str(), s, g, gs.metrics.size(), static_cast<std::size_t>(info.numTotalRanges),
        static_cast<int>(stop.isAllPassSubmitted), step_ms, t_host, t_enable, t_size, t_arm, t_start, t_work, t_stop,
        t_decode, t_eval, t_disable, nan, evaluated, gpu_ns / 1e6, resident_mb());
    std::fflush(stdout);
  }
  if (keep_enabled) disable();
  std::printf("%s total %.1f ms for %d steps\n", mode.c_str(), total_ms, steps);
  return 0;
}
#endif
