// kscope/pm_sampling/detail/pm_sampling_api.hpp — CUPTI's PM sampling entry points
// (cupti_pmsampling.h), resolved from the libcupti that load_cupti() opened, beside the
// profiler host API of profiler_api.hpp (whose loaders, libnvperf_host included, the
// sampler reuses).
//
// Compiled in only where the toolkit's headers have PM sampling (cupti_pmsampling.h and
// the range profiler headers: CUDA 12.6 and later, CUPTI_API_VERSION >= 24); elsewhere
// KSCOPE_HAS_PM_SAMPLING is 0 and pm_sampling/sampler.hpp reports sampling as disabled.
// At run time a libcupti older than that lacks the entry points, and
// resolve_pm_sampling_symbols() names the first one missing.
#pragma once

#include "../../core/config.hpp"
#include "../../cupti/detail/profiler_api.hpp"

#if KSCOPE_HAS_RANGE_PROFILER && defined(__has_include)
#  if __has_include(<cupti_pmsampling.h>)
#    define KSCOPE_HAS_PM_SAMPLING 1
#  endif
#endif
#ifndef KSCOPE_HAS_PM_SAMPLING
#  define KSCOPE_HAS_PM_SAMPLING 0
#endif

#if KSCOPE_HAS_PM_SAMPLING

#include <cupti_pmsampling.h>

#include <string>

namespace kscope {
namespace detail {

struct pm_sampling_api {
  decltype(&::cuptiPmSamplingGetCounterAvailability) get_counter_availability = nullptr;
  decltype(&::cuptiPmSamplingEnable) enable = nullptr;
  decltype(&::cuptiPmSamplingDisable) disable = nullptr;
  decltype(&::cuptiPmSamplingSetConfig) set_config = nullptr;
  decltype(&::cuptiPmSamplingStart) start = nullptr;
  decltype(&::cuptiPmSamplingStop) stop = nullptr;
  decltype(&::cuptiPmSamplingDecodeData) decode_data = nullptr;
  decltype(&::cuptiPmSamplingGetCounterDataSize) get_counter_data_size = nullptr;
  decltype(&::cuptiPmSamplingCounterDataImageInitialize) counter_data_image_initialize = nullptr;
  decltype(&::cuptiPmSamplingGetCounterDataInfo) get_counter_data_info = nullptr;
  decltype(&::cuptiPmSamplingCounterDataGetSampleInfo) get_sample_info = nullptr;

  [[nodiscard]] bool resolved() const noexcept { return enable != nullptr; }
};

// Resolves every entry point (one table, core/detail/symbol_table.hpp); returns the first one
// missing, or "" (then `out` is complete; else untouched).
KSCOPE_DECL std::string resolve_pm_sampling_symbols(void* handle, pm_sampling_api& out);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string resolve_pm_sampling_symbols(void* handle, pm_sampling_api& out) {
  pm_sampling_api api;
  const symbol_entry entries[] = {
      required_symbol("cuptiPmSamplingGetCounterAvailability", api.get_counter_availability),
      required_symbol("cuptiPmSamplingEnable", api.enable),
      required_symbol("cuptiPmSamplingDisable", api.disable),
      required_symbol("cuptiPmSamplingSetConfig", api.set_config),
      required_symbol("cuptiPmSamplingStart", api.start),
      required_symbol("cuptiPmSamplingStop", api.stop),
      required_symbol("cuptiPmSamplingDecodeData", api.decode_data),
      required_symbol("cuptiPmSamplingGetCounterDataSize", api.get_counter_data_size),
      required_symbol("cuptiPmSamplingCounterDataImageInitialize", api.counter_data_image_initialize),
      required_symbol("cuptiPmSamplingGetCounterDataInfo", api.get_counter_data_info),
      required_symbol("cuptiPmSamplingCounterDataGetSampleInfo", api.get_sample_info),
  };
  if (const char* missing = resolve_symbols(handle, entries)) return missing;
  out = api;
  return "";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_PM_SAMPLING
