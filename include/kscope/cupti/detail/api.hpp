// kscope/cupti/detail/api.hpp — CUPTI reached through dlopen, never linked.
//
// A program that includes kscope must start where libcupti is missing (CI machines, a
// runtime-only container), so every CUPTI function is resolved at run time with dlsym.
// The function types come from the CUPTI headers of the toolkit kscope is compiled with;
// the record layouts kscope reads are checked against older CUPTI versions in
// parse.hpp, so a libcupti from CUDA 12 works as well.
//
// Search order (first that loads wins; the tried paths go into the warning):
//   0. a libcupti already loaded in the process (RTLD_NOLOAD): two CUPTI copies in one
//      process would fight over the same driver hooks;
//   1. $KSCOPE_CUPTI_LIBRARY (a full path);
//   2. the explicit path in cupti_options::library_path;
//   3. KSCOPE_CUDA_LIBRARY_DIR (set by CMake: the toolkit kscope was built against);
//   4. the directory of the libcudart in use (dladdr on a cudart symbol), and its
//      ../extras/CUPTI/lib64 (older toolkit layout);
//   5. the default sonames libcupti.so.13, libcupti.so.12, libcupti.so.
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/symbol_table.hpp"

#if KSCOPE_HAS_CUDA && defined(__has_include)
#  if __has_include(<cupti.h>)
#    define KSCOPE_HAS_CUPTI 1
#  endif
#endif
#ifndef KSCOPE_HAS_CUPTI
#  define KSCOPE_HAS_CUPTI 0
#endif

#if KSCOPE_HAS_CUPTI

#include "../../core/detail/fork_guard.hpp"
#include "../../core/detail/once.hpp"

#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace kscope {
namespace detail {

// The CUPTI entry points kscope uses, resolved from one loaded libcupti.
//
//   detail::cupti_api api;
//   std::string why;
//   if (!detail::load_cupti(api, "", why)) warn(why);
struct cupti_api {
  void* handle = nullptr;
  std::string path;           // what was loaded
  std::uint32_t version = 0;  // cuptiGetVersion, 0 when unknown

  // Required.
  decltype(&::cuptiGetResultString) get_result_string = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) activity_register_callbacks = nullptr;
  decltype(&::cuptiActivityEnable) activity_enable = nullptr;
  decltype(&::cuptiActivityDisable) activity_disable = nullptr;
  decltype(&::cuptiActivityFlushAll) activity_flush_all = nullptr;
  decltype(&::cuptiActivityGetNextRecord) activity_get_next_record = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) activity_get_num_dropped_records = nullptr;
  decltype(&::cuptiSubscribe) subscribe = nullptr;
  decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&::cuptiEnableCallback) enable_callback = nullptr;
  // Optional: missing ones only switch a feature off.
  decltype(&::cuptiSubscribe_v2) subscribe_v2 = nullptr;
  decltype(&::cuptiGetVersion) get_version = nullptr;
  decltype(&::cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&::cuptiActivityRegisterTimestampCallback) activity_register_timestamp_callback = nullptr;
  decltype(&::cuptiActivityFlushPeriod) activity_flush_period = nullptr;
  // Graph node ids for the capture-time scope of graph kernels (graph_nodes.hpp).
  decltype(&::cuptiGetGraphNodeId) get_graph_node_id = nullptr;
  // Detaching between windows of tracing (cupti_options::pause_detach).
  decltype(&::cuptiFinalize) finalize = nullptr;

  [[nodiscard]] bool loaded() const noexcept { return handle != nullptr; }

  // Subscribes `callback` under `name`: with cuptiSubscribe_v2 (CUPTI 13) another tool
  // that later asks learns who holds CUPTI's one subscriber slot, and when the slot is
  // taken `holder` receives the name its holder gave (empty when CUPTI does not say).
  // On failure `subscriber` is null.
  CUptiResult subscribe_named(CUpti_SubscriberHandle& subscriber, CUpti_CallbackFunc callback, void* userdata,
                              const char* name, std::string& holder) const;

  // "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", or the number when unknown.
  [[nodiscard]] std::string result_name(CUptiResult result) const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL CUptiResult cupti_api::subscribe_named(CUpti_SubscriberHandle& subscriber, CUpti_CallbackFunc callback, void* userdata,
                            const char* name, std::string& holder) const {
  char held_by[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  CUptiResult result;
  if (subscribe_v2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = name;
    params.oldSubscriberName = held_by;
    params.oldSubscriberSize = sizeof(held_by) - 1;
    result = subscribe_v2(&subscriber, callback, userdata, &params);
  } else {
    result = subscribe(&subscriber, callback, userdata);
  }
  if (result != CUPTI_SUCCESS) subscriber = nullptr;
  holder = held_by;
  return result;
}

KSCOPE_DECL std::string cupti_api::result_name(CUptiResult result) const {
  const char* text = nullptr;
  if (get_result_string != nullptr && get_result_string(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Resolves every entry point from api.handle (one table, core/detail/symbol_table.hpp);
// returns the first required one missing, or "".
KSCOPE_DECL std::string resolve_cupti_symbols(cupti_api& api);

KSCOPE_DECL std::string directory_of(const std::string& path);

// The directory of the libcudart this program uses (empty when cudart is static or the
// symbol cannot be placed).
KSCOPE_DECL std::string cudart_directory();

KSCOPE_DECL const char* const* cupti_sonames() noexcept;

// The candidate paths, in search order (step 0, RTLD_NOLOAD, is not listed).
//
//   for (auto& p : detail::cupti_library_candidates("")) std::puts(p.c_str());
KSCOPE_DECL std::vector<std::string> cupti_library_candidates(const std::string& explicit_path);

// Loads libcupti and resolves its entry points. On failure `why` says what was tried.
KSCOPE_DECL bool load_cupti(cupti_api& api, const std::string& explicit_path, std::string& why);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string resolve_cupti_symbols(cupti_api& api) {
  const symbol_entry entries[] = {
      required_symbol("cuptiGetResultString", api.get_result_string),
      required_symbol("cuptiActivityRegisterCallbacks", api.activity_register_callbacks),
      required_symbol("cuptiActivityEnable", api.activity_enable),
      required_symbol("cuptiActivityDisable", api.activity_disable),
      required_symbol("cuptiActivityFlushAll", api.activity_flush_all),
      required_symbol("cuptiActivityGetNextRecord", api.activity_get_next_record),
      required_symbol("cuptiActivityGetNumDroppedRecords", api.activity_get_num_dropped_records),
      required_symbol("cuptiSubscribe", api.subscribe),
      required_symbol("cuptiUnsubscribe", api.unsubscribe),
      required_symbol("cuptiEnableCallback", api.enable_callback),
      optional_symbol("cuptiSubscribe_v2", api.subscribe_v2),
      optional_symbol("cuptiGetVersion", api.get_version),
      optional_symbol("cuptiGetTimestamp", api.get_timestamp),
      optional_symbol("cuptiActivityRegisterTimestampCallback", api.activity_register_timestamp_callback),
      optional_symbol("cuptiActivityFlushPeriod", api.activity_flush_period),
      optional_symbol("cuptiGetGraphNodeId", api.get_graph_node_id),
      optional_symbol("cuptiFinalize", api.finalize),
  };
  const char* missing = resolve_symbols(api.handle, entries);
  return missing != nullptr ? missing : "";
}

KSCOPE_DECL std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

KSCOPE_DECL std::string cudart_directory() {
  void* symbol = ::dlsym(RTLD_DEFAULT, "cudaGetDeviceCount");
  Dl_info info{};
  if (symbol == nullptr || ::dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  return directory_of(info.dli_fname);
}

KSCOPE_DECL const char* const* cupti_sonames() noexcept {
  static const char* const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so", nullptr};
  return names;
}

KSCOPE_DECL std::vector<std::string> cupti_library_candidates(const std::string& explicit_path) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& p) {
    if (p.empty()) return;
    for (const auto& q : out) {
      if (q == p) return;
    }
    out.push_back(p);
  };
  if (const char* env = std::getenv("KSCOPE_CUPTI_LIBRARY"); env != nullptr && *env != '\0') add(env);
  add(explicit_path);
  std::vector<std::string> dirs;
#ifdef KSCOPE_CUDA_LIBRARY_DIR
  dirs.emplace_back(KSCOPE_CUDA_LIBRARY_DIR);
  dirs.push_back(std::string(KSCOPE_CUDA_LIBRARY_DIR) + "/../extras/CUPTI/lib64");
#endif
  const std::string cudart_dir = cudart_directory();
  if (!cudart_dir.empty()) {
    dirs.push_back(cudart_dir);
    dirs.push_back(cudart_dir + "/../extras/CUPTI/lib64");
  }
  for (const auto& dir : dirs) {
    for (const char* const* name = cupti_sonames(); *name != nullptr; ++name) {
      add(dir + "/" + *name);
    }
  }
  for (const char* const* name = cupti_sonames(); *name != nullptr; ++name) add(*name);
  return out;
}

KSCOPE_DECL bool load_cupti(cupti_api& api, const std::string& explicit_path, std::string& why) {
  if (api.loaded()) return true;
  std::vector<std::string> tried;
  std::string last_error;
  auto try_open = [&](const std::string& path, int flags) -> bool {
    ::dlerror();
    void* h = ::dlopen(path.c_str(), flags);
    if (h == nullptr) {
      if ((flags & RTLD_NOLOAD) == 0) {
        tried.push_back(path);
        const char* e = ::dlerror();
        last_error = e != nullptr ? e : "";
      }
      return false;
    }
    cupti_api candidate;
    candidate.handle = h;
    candidate.path = path;
    const std::string missing = resolve_cupti_symbols(candidate);
    if (!missing.empty()) {
      tried.push_back(path + " (no " + missing + ")");
      ::dlclose(h);
      return false;
    }
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(candidate.activity_enable), &info) != 0 &&
        info.dli_fname != nullptr) {
      candidate.path = info.dli_fname;
    }
    if (candidate.get_version != nullptr) {
      std::uint32_t v = 0;
      if (candidate.get_version(&v) == CUPTI_SUCCESS) candidate.version = v;
    }
    api = candidate;
    return true;
  };
  for (const char* const* name = cupti_sonames(); *name != nullptr; ++name) {
    if (try_open(*name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return true;
  }
  for (const auto& path : cupti_library_candidates(explicit_path)) {
    if (try_open(path, RTLD_NOW | RTLD_LOCAL)) return true;
  }
  why = "libcupti.so.13 not found (tried";
  for (std::size_t i = 0; i < tried.size(); ++i) why += (i == 0 ? " " : ", ") + tried[i];
  why += ")";
  if (!last_error.empty()) why += "; last dlopen error: " + last_error;
  return false;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Whether kscope's activity collector is tracing (activity/collector.hpp sets it at start
// and clears it at stop). The counters read it: while CUPTI's activity API traces kernels,
// SASS instruction counters read 0 under user replay and right under kernel replay (H100,
// CUDA 13.0: bench/RESULTS.md), so they are taken with kernel replay or left out.
KSCOPE_DECL std::atomic<bool>& activity_tracing() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::atomic<bool>& activity_tracing() noexcept {
  static std::atomic<bool> tracing{false};  // constant-initialized
  return tracing;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// PC sampling that a warp-stall pass left enabled (warp_stalls/collect.hpp,
// warp_stall_options::keep_enabled) makes CUPTI refuse to enable activity kinds
// (CUPTI_ERROR_NOT_COMPATIBLE, H100, CUDA 13.0), though activity enabled first lets PC
// sampling start. The warp-stall module registers how to let it go (false: a pass is
// running); the activity collector calls it before it enables its kinds.
using pc_sampling_release_hook = bool (*)() noexcept;
KSCOPE_DECL std::atomic<pc_sampling_release_hook>& pc_sampling_release_for_activity() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::atomic<pc_sampling_release_hook>& pc_sampling_release_for_activity() noexcept {
  static std::atomic<pc_sampling_release_hook> hook{nullptr};  // constant-initialized
  return hook;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// cuptiFinalize destroys all of CUPTI's state in the process, not only the activity
// collector's: the profiler's initialization (per-scope counters, PM sampling, warp stalls)
// and PC sampling kept enabled would be gone under the feature that set them up. So the
// collector detaches between windows (cupti_options::pause_detach) only while no other
// feature ever set such state up: each feature marks it, under the mutex, before its first
// such CUPTI call, and the collector checks the mark and finalizes under the same mutex.
// Never destroyed (a static destructor may still stop a feature).
struct cupti_detach_guard {
  std::mutex mutex;
  bool state_beyond_activity = false;  // guarded by mutex; never cleared
};
KSCOPE_DECL cupti_detach_guard& cupti_detach_state() noexcept;

// Marks CUPTI as holding another feature's state from now on (call before that state is set up).
inline void mark_cupti_state_beyond_activity() noexcept {
  cupti_detach_guard& guard = cupti_detach_state();
  std::lock_guard<std::mutex> lock(guard.mutex);
  guard.state_beyond_activity = true;
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL cupti_detach_guard& cupti_detach_state() noexcept {
  // A fork never catches it half-built, nor its mutex held (core/detail/once.hpp, fork_guard.hpp).
  static lazy_global<cupti_detach_guard> instance{lock_rank::init};
  return instance.get([] {
    auto* guard = new cupti_detach_guard();
    guard_across_fork(guard->mutex, lock_rank::cupti_detach);
    return guard;
  });
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_CUPTI
