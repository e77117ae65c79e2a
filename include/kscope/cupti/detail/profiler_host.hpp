// kscope/cupti/detail/profiler_host.hpp — the profiler host API's setup, shared by the range
// profiler (counters/collect.hpp) and PM sampling (pm_sampling/sampler.hpp): the chip name,
// the counter-availability image, a host object for the chip, metrics added to it, its
// config image and pass count, its base-metric lists, the evaluation of counter data, and
// the deinitialization when it goes.
//
//   profiler_host host;
//   if (host.initialize(api, CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, availability) != CUPTI_SUCCESS) ...
//   const char* names[] = {"dram__bytes_read.sum"};
//   std::vector<std::uint8_t> config;
//   std::size_t passes = 0;
//   if (host.add_metrics(names, 1) == CUPTI_SUCCESS) {
//     const profiler_host_step step = host.config_image(config, &passes);
//     if (!step.ok()) fail(step.call, step.result);  // the call that failed, by its CUPTI name
//   }
//
// Each call returns CUPTI's result and records nothing: the caller decides what a failure
// means (the counters say "hardware counters unavailable: <call> failed with ...", the
// sampler "metric sampling unavailable: ...", a probe just answers no), and which of its
// steps to take in which order; these functions only spare each caller the parameter
// structs. The profiler type and the counter-availability query (per context for the
// range profiler, per device for PM sampling) are the callers' to choose.
#pragma once

#include "../../core/config.hpp"
#include "profiler_api.hpp"

#if KSCOPE_HAS_RANGE_PROFILER

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kscope {
namespace detail {

// The chip name of `device` (cuptiDeviceGetChipName): "" when CUPTI names none.
KSCOPE_DECL CUptiResult read_chip_name(const profiler_api& api, int device, std::string& chip);

// The counter-availability image in CUPTI's two calls: its size (`image` is then sized
// for it, zeroed), then its contents. `query` is cuptiProfilerGetCounterAvailability or
// cuptiPmSamplingGetCounterAvailability, `params` its parameters with the structSize and
// the context or device set; the result is the first failure or CUPTI_SUCCESS.
template <class Query, class Params>
CUptiResult read_counter_availability(Query query, Params& params, std::vector<std::uint8_t>& image) {
  const CUptiResult sized = query(&params);
  if (sized != CUPTI_SUCCESS) return sized;
  image.assign(params.counterAvailabilityImageSize, 0);
  params.pCounterAvailabilityImage = image.data();
  return query(&params);
}

// How a sequence of host calls ended: the first call that failed, by its CUPTI name (as the
// callers' messages spell it), and its result; `call` is null when every call succeeded.
struct profiler_host_step {
  CUptiResult result = CUPTI_SUCCESS;
  const char* call = nullptr;
  [[nodiscard]] bool ok() const noexcept { return result == CUPTI_SUCCESS; }
};

// A profiler host object for one chip, deinitialized (cuptiProfilerHostDeinitialize) when
// it goes. A host object keeps every metric added to it, so a question about one metric set
// needs a fresh one.
class profiler_host {
 public:
  profiler_host() = default;
  profiler_host(const profiler_host&) = delete;
  profiler_host& operator=(const profiler_host&) = delete;
  ~profiler_host();

  // cuptiProfilerHostInitialize for `type` (CUPTI_PROFILER_TYPE_RANGE_PROFILER or
  // CUPTI_PROFILER_TYPE_PM_SAMPLING) on `chip`, with the counter-availability image (none
  // when empty). On failure the host holds no object. Call once per host.
  CUptiResult initialize(const profiler_api& api, CUpti_ProfilerType type, const std::string& chip,
                         const std::vector<std::uint8_t>& availability);

  [[nodiscard]] CUpti_Profiler_Host_Object* object() const noexcept { return object_; }

  // The calls below need an initialized host; on one without an object they make no CUPTI
  // call and answer CUPTI_ERROR_NOT_INITIALIZED (base_metrics: none).

  // cuptiProfilerHostConfigAddMetrics: `count` full metric names.
  CUptiResult add_metrics(const char** names, std::size_t count) const;

  // The config image of the metrics added so far: cuptiProfilerHostGetConfigImageSize,
  // `image` sized for it (zeroed), cuptiProfilerHostGetConfigImage; then, when `passes` is
  // given, cuptiProfilerHostGetNumOfPasses into it. Stops at the first failure.
  profiler_host_step config_image(std::vector<std::uint8_t>& image, std::size_t* passes) const;

  // The base metrics of the chip (cuptiProfilerHostGetBaseMetrics for counters, ratios and
  // throughputs, in that order; a type CUPTI refuses is skipped), unsorted.
  [[nodiscard]] std::vector<std::string> base_metrics() const;

  // cuptiProfilerHostEvaluateToGpuValues: the values of `count` metrics (added to this host)
  // in range or sample `index` of a decoded counter-data image, into `values`.
  CUptiResult evaluate(const std::vector<std::uint8_t>& counter_data, std::size_t index, const char** names,
                       std::size_t count, double* values) const;

 private:
  const profiler_api* api_ = nullptr;
  CUpti_Profiler_Host_Object* object_ = nullptr;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL CUptiResult read_chip_name(const profiler_api& api, int device, std::string& chip) {
  KSCOPE_CUPTI_PARAMS(CUpti_Device_GetChipName_Params, name);
  name.deviceIndex = static_cast<std::size_t>(device);
  const CUptiResult r = api.get_chip_name(&name);
  if (r == CUPTI_SUCCESS) chip = name.pChipName != nullptr ? name.pChipName : "";
  return r;
}

KSCOPE_DECL profiler_host::~profiler_host() {
  if (object_ == nullptr) return;
  KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Host_Deinitialize_Params, p);
  p.pHostObject = object_;
  (void)api_->host_deinitialize(&p);
}

KSCOPE_DECL CUptiResult profiler_host::initialize(const profiler_api& api, CUpti_ProfilerType type, const std::string& chip,
                                                  const std::vector<std::uint8_t>& availability) {
  KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params, init);
  init.profilerType = type;
  init.pChipName = chip.c_str();
  init.pCounterAvailabilityImage = availability.empty() ? nullptr : availability.data();
  const CUptiResult r = api.host_initialize(&init);
  if (r != CUPTI_SUCCESS) return r;
  api_ = &api;
  object_ = init.pHostObject;
  return r;
}

KSCOPE_DECL CUptiResult profiler_host::add_metrics(const char** names, std::size_t count) const {
  if (api_ == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params, add);
  add.pHostObject = object_;
  add.ppMetricNames = names;
  add.numMetrics = count;
  return api_->host_config_add_metrics(&add);
}

KSCOPE_DECL profiler_host_step profiler_host::config_image(std::vector<std::uint8_t>& image, std::size_t* passes) const {
  if (api_ == nullptr) return {CUPTI_ERROR_NOT_INITIALIZED, "cuptiProfilerHostGetConfigImageSize"};
  KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params, size);
  size.pHostObject = object_;
  if (const CUptiResult r = api_->host_get_config_image_size(&size); r != CUPTI_SUCCESS)
    return {r, "cuptiProfilerHostGetConfigImageSize"};
  image.assign(size.configImageSize, 0);
  KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params, get);
  get.pHostObject = object_;
  get.configImageSize = image.size();
  get.pConfigImage = image.data();
  if (const CUptiResult r = api_->host_get_config_image(&get); r != CUPTI_SUCCESS)
    return {r, "cuptiProfilerHostGetConfigImage"};
  if (passes != nullptr) {
    KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params, count);
    count.configImageSize = image.size();
    count.pConfigImage = image.data();
    if (const CUptiResult r = api_->host_get_num_of_passes(&count); r != CUPTI_SUCCESS)
      return {r, "cuptiProfilerHostGetNumOfPasses"};
    *passes = count.numOfPasses;
  }
  return {};
}

KSCOPE_DECL std::vector<std::string> profiler_host::base_metrics() const {
  std::vector<std::string> out;
  if (api_ == nullptr) return out;
  for (CUpti_MetricType type : {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO, CUPTI_METRIC_TYPE_THROUGHPUT}) {
    KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Host_GetBaseMetrics_Params, p);
    p.pHostObject = object_;
    p.metricType = type;
    if (api_->host_get_base_metrics(&p) != CUPTI_SUCCESS || p.ppMetricNames == nullptr) continue;
    for (std::size_t i = 0; i < p.numMetrics; ++i)
      if (p.ppMetricNames[i] != nullptr) out.emplace_back(p.ppMetricNames[i]);
  }
  return out;
}

KSCOPE_DECL CUptiResult profiler_host::evaluate(const std::vector<std::uint8_t>& counter_data, std::size_t index,
                                                const char** names, std::size_t count, double* values) const {
  if (api_ == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params, eval);
  eval.pHostObject = object_;
  eval.pCounterDataImage = counter_data.data();
  eval.counterDataImageSize = counter_data.size();
  eval.rangeIndex = index;
  eval.ppMetricNames = names;
  eval.numMetrics = count;
  eval.pMetricValues = values;
  return api_->host_evaluate_to_gpu_values(&eval);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_RANGE_PROFILER
