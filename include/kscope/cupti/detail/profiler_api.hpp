// kscope/cupti/detail/profiler_api.hpp — the CUPTI range profiler and profiler host API,
// reached through dlopen like the activity API (api.hpp), and libnvperf_host loaded
// before CUPTI needs it.
//
// Compiled in only where the toolkit's CUPTI headers have the range profiler
// (cupti_range_profiler.h, cupti_profiler_host.h: CUDA 12.6 and later, CUPTI_API_VERSION
// >= 24); elsewhere KSCOPE_HAS_RANGE_PROFILER is 0 and counters/collect.hpp reports counters
// as disabled. At run time a libcupti older than that lacks the entry points, and
// resolve_profiler_symbols() names the first one missing.
//
// libnvperf_host: CUPTI's host API loads it by its soname, "libnvperf_host.so", with the
// default library search — which fails when the toolkit's lib directory is not on
// LD_LIBRARY_PATH, the usual case for a program that only links cudart. kscope therefore
// loads it first, from beside the libcupti in use (then the toolkit kscope was built
// against, then the default search); the dynamic loader then hands CUPTI that copy, since
// a library already loaded is found by its soname. The handle is never closed: CUPTI keeps
// using it.
#pragma once

#include "../../core/config.hpp"
#include "api.hpp"

#if KSCOPE_HAS_CUPTI && defined(__has_include)
#  if __has_include(<cupti_range_profiler.h>) && __has_include(<cupti_profiler_host.h>) && \
      __has_include(<cupti_profiler_target.h>) && __has_include(<cupti_target.h>)
#    if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 24  // 24: CUDA 12.6
#      define KSCOPE_HAS_RANGE_PROFILER 1
#    endif
#  endif
#endif
#ifndef KSCOPE_HAS_RANGE_PROFILER
#  define KSCOPE_HAS_RANGE_PROFILER 0
#endif

// Every CUPTI parameter struct: zeroed, structSize from the header's <Type>_STRUCT_SIZE
// (the range profiler's, PC and PM sampling's, the host API's alike).
#define KSCOPE_CUPTI_PARAMS(type, var) \
  type var{};                          \
  var.structSize = type##_STRUCT_SIZE

#if KSCOPE_HAS_RANGE_PROFILER

#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kscope {
namespace detail {

// The oldest libcupti with the range profiler: cuptiGetVersion 24 (CUDA 12.6). CUDA 13
// numbers its versions 130000 and up.
inline constexpr std::uint32_t range_profiler_min_cupti_version = 24;

// The profiler entry points kscope uses, resolved from the libcupti that load_cupti()
// opened (one copy of CUPTI per process).
struct profiler_api {
  decltype(&::cuptiProfilerInitialize) initialize = nullptr;
  decltype(&::cuptiProfilerGetCounterAvailability) get_counter_availability = nullptr;
  decltype(&::cuptiDeviceGetChipName) get_chip_name = nullptr;
  decltype(&::cuptiProfilerHostInitialize) host_initialize = nullptr;
  decltype(&::cuptiProfilerHostDeinitialize) host_deinitialize = nullptr;
  decltype(&::cuptiProfilerHostGetBaseMetrics) host_get_base_metrics = nullptr;
  decltype(&::cuptiProfilerHostConfigAddMetrics) host_config_add_metrics = nullptr;
  decltype(&::cuptiProfilerHostGetConfigImageSize) host_get_config_image_size = nullptr;
  decltype(&::cuptiProfilerHostGetConfigImage) host_get_config_image = nullptr;
  decltype(&::cuptiProfilerHostGetNumOfPasses) host_get_num_of_passes = nullptr;
  decltype(&::cuptiProfilerHostEvaluateToGpuValues) host_evaluate_to_gpu_values = nullptr;
  decltype(&::cuptiRangeProfilerEnable) range_enable = nullptr;
  decltype(&::cuptiRangeProfilerDisable) range_disable = nullptr;
  decltype(&::cuptiRangeProfilerGetCounterDataSize) range_get_counter_data_size = nullptr;
  decltype(&::cuptiRangeProfilerCounterDataImageInitialize) range_counter_data_image_initialize = nullptr;
  decltype(&::cuptiRangeProfilerSetConfig) range_set_config = nullptr;
  decltype(&::cuptiRangeProfilerStart) range_start = nullptr;
  decltype(&::cuptiRangeProfilerStop) range_stop = nullptr;
  decltype(&::cuptiRangeProfilerPushRange) range_push = nullptr;
  decltype(&::cuptiRangeProfilerPopRange) range_pop = nullptr;
  decltype(&::cuptiRangeProfilerDecodeData) range_decode_data = nullptr;
  decltype(&::cuptiRangeProfilerGetCounterDataInfo) range_get_counter_data_info = nullptr;
  // Optional: a device check that names why profiling is unsupported (vGPU, MIG, WSL...).
  decltype(&::cuptiProfilerDeviceSupported) device_supported = nullptr;

  [[nodiscard]] bool resolved() const noexcept { return initialize != nullptr; }
};

// Resolves every entry point from a loaded libcupti (one table, core/detail/symbol_table.hpp);
// returns the first required one missing, or "" (then `out` is complete; else untouched).
KSCOPE_DECL std::string resolve_profiler_symbols(void* handle, profiler_api& out);

// Where libnvperf_host.so may be, in search order: the explicit path alone when given;
// else beside the libcupti in use, the toolkit kscope was built against, the libcudart in
// use, and finally the soname for the default search.
KSCOPE_DECL std::vector<std::string> nvperf_host_candidates(const std::string& explicit_path,
                                                       const std::string& cupti_path);

// Loads libnvperf_host once per process (see the top of this header). On failure `why`
// says what was tried. An explicit path that does not load is a failure even when another
// copy is loaded already: the caller asked for that file.
KSCOPE_DECL bool load_nvperf_host(const std::string& explicit_path, const std::string& cupti_path, std::string& why);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string resolve_profiler_symbols(void* handle, profiler_api& out) {
  profiler_api api;
  const symbol_entry entries[] = {
      required_symbol("cuptiProfilerInitialize", api.initialize),
      required_symbol("cuptiProfilerGetCounterAvailability", api.get_counter_availability),
      required_symbol("cuptiDeviceGetChipName", api.get_chip_name),
      required_symbol("cuptiProfilerHostInitialize", api.host_initialize),
      required_symbol("cuptiProfilerHostDeinitialize", api.host_deinitialize),
      required_symbol("cuptiProfilerHostGetBaseMetrics", api.host_get_base_metrics),
      required_symbol("cuptiProfilerHostConfigAddMetrics", api.host_config_add_metrics),
      required_symbol("cuptiProfilerHostGetConfigImageSize", api.host_get_config_image_size),
      required_symbol("cuptiProfilerHostGetConfigImage", api.host_get_config_image),
      required_symbol("cuptiProfilerHostGetNumOfPasses", api.host_get_num_of_passes),
      required_symbol("cuptiProfilerHostEvaluateToGpuValues", api.host_evaluate_to_gpu_values),
      required_symbol("cuptiRangeProfilerEnable", api.range_enable),
      required_symbol("cuptiRangeProfilerDisable", api.range_disable),
      required_symbol("cuptiRangeProfilerGetCounterDataSize", api.range_get_counter_data_size),
      required_symbol("cuptiRangeProfilerCounterDataImageInitialize", api.range_counter_data_image_initialize),
      required_symbol("cuptiRangeProfilerSetConfig", api.range_set_config),
      required_symbol("cuptiRangeProfilerStart", api.range_start),
      required_symbol("cuptiRangeProfilerStop", api.range_stop),
      required_symbol("cuptiRangeProfilerPushRange", api.range_push),
      required_symbol("cuptiRangeProfilerPopRange", api.range_pop),
      required_symbol("cuptiRangeProfilerDecodeData", api.range_decode_data),
      required_symbol("cuptiRangeProfilerGetCounterDataInfo", api.range_get_counter_data_info),
      optional_symbol("cuptiProfilerDeviceSupported", api.device_supported),
  };
  if (const char* missing = resolve_symbols(handle, entries)) return missing;
  out = api;
  return "";
}

KSCOPE_DECL std::vector<std::string> nvperf_host_candidates(const std::string& explicit_path,
                                                       const std::string& cupti_path) {
  if (!explicit_path.empty()) return {explicit_path};
  std::vector<std::string> out;
  auto add = [&out](const std::string& p) {
    for (const std::string& q : out)
      if (q == p) return;
    out.push_back(p);
  };
  const std::string cupti_dir = directory_of(cupti_path);
  if (!cupti_dir.empty()) add(cupti_dir + "/libnvperf_host.so");
#ifdef KSCOPE_CUDA_LIBRARY_DIR
  add(std::string(KSCOPE_CUDA_LIBRARY_DIR) + "/libnvperf_host.so");
  add(std::string(KSCOPE_CUDA_LIBRARY_DIR) + "/../extras/CUPTI/lib64/libnvperf_host.so");
#endif
  const std::string cudart_dir = cudart_directory();
  if (!cudart_dir.empty()) {
    add(cudart_dir + "/libnvperf_host.so");
    add(cudart_dir + "/../extras/CUPTI/lib64/libnvperf_host.so");
  }
  add("libnvperf_host.so");
  return out;
}

KSCOPE_DECL bool load_nvperf_host(const std::string& explicit_path, const std::string& cupti_path, std::string& why) {
  static void* loaded = nullptr;  // never closed: CUPTI uses it for the rest of the process
  if (explicit_path.empty()) {
    if (loaded != nullptr) return true;
    if (void* h = ::dlopen("libnvperf_host.so", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
      loaded = h;
      return true;
    }
  }
  std::string tried, last_error;
  for (const std::string& path : nvperf_host_candidates(explicit_path, cupti_path)) {
    ::dlerror();
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      if (loaded == nullptr) loaded = h;
      return true;
    }
    const char* e = ::dlerror();
    last_error = e != nullptr ? e : "";
    tried += (tried.empty() ? "" : ", ") + path;
  }
  why = "libnvperf_host.so, which CUPTI needs to configure counters, not found (tried " + tried + ")";
  if (!last_error.empty()) why += "; last dlopen error: " + last_error;
  return false;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Why CUPTI says a device cannot be profiled with `api` (range profiling, PM sampling),
// from cuptiProfilerDeviceSupported: `unsupported` false when the library lacks the call,
// the call fails, or the device is supported; otherwise the named reasons ("GPU
// architecture", "vGPU (disabled by the system)", ...), possibly none. One reading for the
// counters and the sampler, which each word their own refusal.
struct device_support {
  bool unsupported = false;
  std::string reasons;
};
KSCOPE_DECL device_support read_device_support(const profiler_api& api, int device, CUpti_Profiler_API which);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL device_support read_device_support(const profiler_api& api, int device, CUpti_Profiler_API which) {
  device_support out;
  if (api.device_supported == nullptr) return out;
  KSCOPE_CUPTI_PARAMS(CUpti_Profiler_DeviceSupported_Params, p);
  p.cuDevice = device;
  p.api = which;
  if (api.device_supported(&p) != CUPTI_SUCCESS) return out;  // unknown: the next calls say
  if (p.isSupported != CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED && p.isSupported != CUPTI_PROFILER_CONFIGURATION_DISABLED)
    return out;
  out.unsupported = true;
  const auto add = [&out](CUpti_Profiler_Support_Level level, const char* what) {
    if (level == CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED || level == CUPTI_PROFILER_CONFIGURATION_DISABLED)
      out.reasons += (out.reasons.empty() ? "" : ", ") + std::string(what) +
                     (level == CUPTI_PROFILER_CONFIGURATION_DISABLED ? " (disabled by the system)" : "");
  };
  add(p.architecture, "GPU architecture");
  add(p.sli, "SLI");
  add(p.vGpu, "vGPU");
  add(p.confidentialCompute, "confidential computing");
  add(p.cmp, "CMP device");
  add(p.wsl, "WSL");
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_RANGE_PROFILER
