// kscope/warp_stalls/detail/pc_sampling_api.hpp — CUPTI's PC sampling entry points
// (cupti_pcsampling.h), resolved with dlsym from the libcupti that load_cupti() opened for
// the counters (one copy of CUPTI per process; kscope never links it).
//
// Compiled in only where the toolkit has cupti_pcsampling.h and the range profiler headers
// (KSCOPE_HAS_RANGE_PROFILER: CUDA 12.6 and later), because the warp-stall pass shares the
// counters' library state, their error mapping and their one-pass-at-a-time lock;
// elsewhere KSCOPE_HAS_PC_SAMPLING is 0 and warp_stalls/collect.hpp reports "disabled". At
// run time a libcupti without the entry points is named by resolve_pc_sampling_symbols().
// The two utility entry points of the same header that give PCs their source lines,
// cuptiGetCubinCrc and cuptiGetSassToSourceCorrelation, are resolved by cupti/detail/cubin_store.hpp:
// the activity collector needs the first one too, in toolkits without the range profiler.
#pragma once

#include "../../core/config.hpp"
#include "../../cupti/detail/profiler_api.hpp"

#if KSCOPE_HAS_RANGE_PROFILER && defined(__has_include)
#  if __has_include(<cupti_pcsampling.h>)
#    define KSCOPE_HAS_PC_SAMPLING 1
#  endif
#endif
#ifndef KSCOPE_HAS_PC_SAMPLING
#  define KSCOPE_HAS_PC_SAMPLING 0
#endif

#if KSCOPE_HAS_PC_SAMPLING

#include <cupti_pcsampling.h>

#include <string>

namespace kscope {
namespace detail {

struct pc_sampling_api {
  decltype(&::cuptiPCSamplingEnable) enable = nullptr;
  decltype(&::cuptiPCSamplingDisable) disable = nullptr;
  decltype(&::cuptiPCSamplingSetConfigurationAttribute) set_configuration = nullptr;
  decltype(&::cuptiPCSamplingGetConfigurationAttribute) get_configuration = nullptr;
  decltype(&::cuptiPCSamplingGetData) get_data = nullptr;
  decltype(&::cuptiPCSamplingGetNumStallReasons) get_num_stall_reasons = nullptr;
  decltype(&::cuptiPCSamplingGetStallReasons) get_stall_reasons = nullptr;
  decltype(&::cuptiPCSamplingStart) start = nullptr;
  decltype(&::cuptiPCSamplingStop) stop = nullptr;

  [[nodiscard]] bool resolved() const noexcept { return enable != nullptr; }
};

// Resolves every entry point (one table, core/detail/symbol_table.hpp); returns the first one
// missing, or "" (then `out` is complete; else untouched).
KSCOPE_DECL std::string resolve_pc_sampling_symbols(void* handle, pc_sampling_api& out);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string resolve_pc_sampling_symbols(void* handle, pc_sampling_api& out) {
  pc_sampling_api api;
  const symbol_entry entries[] = {
      required_symbol("cuptiPCSamplingEnable", api.enable),
      required_symbol("cuptiPCSamplingDisable", api.disable),
      required_symbol("cuptiPCSamplingSetConfigurationAttribute", api.set_configuration),
      required_symbol("cuptiPCSamplingGetConfigurationAttribute", api.get_configuration),
      required_symbol("cuptiPCSamplingGetData", api.get_data),
      required_symbol("cuptiPCSamplingGetNumStallReasons", api.get_num_stall_reasons),
      required_symbol("cuptiPCSamplingGetStallReasons", api.get_stall_reasons),
      required_symbol("cuptiPCSamplingStart", api.start),
      required_symbol("cuptiPCSamplingStop", api.stop),
  };
  if (const char* missing = resolve_symbols(handle, entries)) return missing;
  out = api;
  return "";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_PC_SAMPLING
