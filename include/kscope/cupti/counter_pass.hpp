// kscope/cupti/counter_pass.hpp — what every pass over the GPU's performance counters shares:
// the range profiler's (counters/collect.hpp), PC sampling's (warp_stalls/collect.hpp) and PM
// sampling's (pm_sampling/sampler.hpp). How a pass ended (counter_state); one pass at a time
// per process, and the hooks that let a pass kept between calls go; what a CUPTI error means
// in those terms; the libraries, loaded once; the current context; the setup up to a host
// object for the chip (counter_setup). In the CUPTI edge, so that no feature includes another.
#pragma once

#include "../core/config.hpp"
#include "../core/detail/once.hpp"
#include "../device/availability.hpp"
#include "detail/api.hpp"
#include "detail/profiler_api.hpp"
#include "detail/profiler_host.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#if KSCOPE_HAS_RANGE_PROFILER
#  include <cuda_runtime_api.h>
#endif

namespace kscope {

// How a counter pass ended.
enum class counter_state : std::uint8_t {
  collected,           // values in counter_result::kernels
  invalid_request,     // bad options or metric list (checked before touching the GPU)
  disabled,            // built without the CUPTI range profiler headers (CUDA < 12.6)
  unavailable,         // no device, libcupti / libnvperf_host missing or too old
  no_permission,       // CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: counters restricted to admins
  busy,                // another profiler holds the counters, or a pass is already running here
  unsupported_device,  // vGPU, MIG, confidential computing, CMP, SLI, WSL, old architecture
  unknown_metric,      // a requested metric the device does not offer (message lists close names)
  failed,              // any other CUPTI or CUDA error (message names the call and the error)
};

[[nodiscard]] constexpr const char* to_string(counter_state s) noexcept {
  switch (s) {
    case counter_state::collected: return "collected";
    case counter_state::invalid_request: return "invalid request";
    case counter_state::disabled: return "disabled";
    case counter_state::unavailable: return "unavailable";
    case counter_state::no_permission: return "no permission";
    case counter_state::busy: return "busy";
    case counter_state::unsupported_device: return "unsupported device";
    case counter_state::unknown_metric: return "unknown metric";
    case counter_state::failed: return "failed";
  }
  return "unknown";
}

namespace detail {

// The work of a pass, called through one pointer so the pass itself is not a template.
struct counter_work_ref {
  void* object;
  void (*call)(void*);
  void operator()() const { call(object); }
};

// One pass at a time per process (CUPTI's profiler is per context and process-wide). Not
// registered with the fork guard: it is only ever try-locked, so a child forked during a
// pass gets counter_state::busy from its own passes instead of a deadlock.
KSCOPE_DECL std::mutex& counter_pass_mutex();

// A range profiler kept enabled between passes (the per-scope counters keep one, so that a
// profiled call does not pay for enabling it: counters/scope_counters.hpp) holds the
// context's counters while no pass runs, and another range-profiler pass, PC sampling or
// PM sampling could not start. Its keeper registers how to let it go; every other pass
// calls release_kept_range_profiler() first, with counter_pass_mutex() held (so no kept
// pass is running), and the keeper enables a new one at its next call.
using kept_range_profiler_release = void (*)() noexcept;
KSCOPE_DECL std::atomic<kept_range_profiler_release>& kept_range_profiler_releaser() noexcept;
KSCOPE_DECL void release_kept_range_profiler() noexcept;

// PC sampling kept enabled between warp-stall passes (warp_stalls/collect.hpp,
// warp_stall_options::keep_enabled) holds the context's counters the same way: a
// range-profiler or PM-sampling pass calls release_kept_pc_sampling() first, with
// counter_pass_mutex() held.
KSCOPE_DECL std::atomic<kept_range_profiler_release>& kept_pc_sampling_releaser() noexcept;
KSCOPE_DECL void release_kept_pc_sampling() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::mutex& counter_pass_mutex() {
  static lazy_global<std::mutex> m{lock_rank::init};  // built fork-safely (core/detail/once.hpp)
  return m.get([] { return new std::mutex(); });
}

KSCOPE_DECL std::atomic<kept_range_profiler_release>& kept_range_profiler_releaser() noexcept {
  static std::atomic<kept_range_profiler_release> release{nullptr};  // constant-initialized
  return release;
}

KSCOPE_DECL void release_kept_range_profiler() noexcept {
  if (const kept_range_profiler_release release = kept_range_profiler_releaser().load(std::memory_order_acquire))
    release();
}

KSCOPE_DECL std::atomic<kept_range_profiler_release>& kept_pc_sampling_releaser() noexcept {
  static std::atomic<kept_range_profiler_release> release{nullptr};  // constant-initialized
  return release;
}

KSCOPE_DECL void release_kept_pc_sampling() noexcept {
  if (const kept_range_profiler_release release = kept_pc_sampling_releaser().load(std::memory_order_acquire))
    release();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_HAS_RANGE_PROFILER

// The counter_state a CUPTI error means.
KSCOPE_DECL counter_state counter_state_for(CUptiResult r) noexcept;

// What the user can do about a CUPTI error ("" when there is nothing specific to say).
KSCOPE_DECL std::string counter_error_advice(CUptiResult r);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL counter_state counter_state_for(CUptiResult r) noexcept {
  switch (r) {
    case CUPTI_SUCCESS: return counter_state::collected;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES: return counter_state::no_permission;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_HARDWARE_BUSY:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED: return counter_state::busy;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_INVALID_CHIP_NAME: return counter_state::unsupported_device;
    default: return counter_state::failed;
  }
}

KSCOPE_DECL std::string counter_error_advice(CUptiResult r) {
  switch (counter_state_for(r)) {
    case counter_state::no_permission:
      return "the GPU performance counters are restricted to administrators (ERR_NVGPUCTRPERM): run as root, "
             "or load the nvidia kernel module with NVreg_RestrictProfilingToAdminUsers=0, or start the container "
             "with --cap-add SYS_ADMIN";
    case counter_state::busy:
      return "another profiler holds the GPU counters (Nsight Compute, Nsight Systems GPU metrics, DCGM profiling, "
             "or CUPTI's legacy profiler API in this process): run without it";
    case counter_state::unsupported_device:
      return "this device or configuration does not support CUPTI profiling (vGPU without profiling, MIG, "
             "confidential computing, CMP, SLI or WSL)";
    default: return {};
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A metric set made ready for the range profiler on one chip: the names resolved (fallbacks
// taken, with their notes), a host object with them added and the config image with its
// pass count. Host-side only, so one made for a chip serves every pass over that set, on
// any context of that chip: the per-scope counters rotate a few groups over the profiled
// steps, and building a group's host object and config image for every step cost a large
// part of CUPTI's setup (bench/counter_step_probe.cu). The host object also evaluates every
// range of the passes that use it, so a set is shared (shared_ptr) by those passes.
struct prepared_metric_set {
  std::vector<std::string> metrics;  // what a pass over it collects (counter_result::metrics)
  std::vector<std::string> notes;    // the resolution's notes (counter_result::notes)
  profiler_host host;
  std::vector<std::uint8_t> config;
  std::size_t passes = 0;
};

// How many prepared sets a process keeps (the least recently used goes first): a host object
// holds the chip's metric tables, a few MB each.
inline constexpr std::size_t prepared_metric_sets_kept = 12;

// The libraries, loaded once per process and kept (CUPTI holds on to them).
struct counter_libraries {
  cupti_api cupti;
  profiler_api profiler;
  bool profiler_initialized = false;
  std::map<std::string, bool> metric_accepted;  // chip + '\n' + metric name -> config_accepts()
  std::map<std::string, std::size_t> passes_needed;  // chip + '\n' + names -> count_passes()
  // Device ordinal -> its counter availability image, read once: CUPTI refuses the query
  // (CUPTI_ERROR_INVALID_PARAMETER, CUDA 13.0) on a context whose range profiler is enabled,
  // which a kept one is (counters/scope_counters.hpp), and what a device offers does not
  // change while the process runs.
  std::map<int, std::vector<std::uint8_t>> availability;
  // Device ordinal -> its chip name, read (and the device's support checked) once.
  std::map<int, std::string> chips;
  // Chip -> its base metrics, sorted: listing them walks the chip's whole metric table.
  std::map<std::string, std::vector<std::string>> base_metrics;
  // Chip, SASS switch and requested names -> the set a pass over them uses (begin()), with
  // when it was last used; at most prepared_metric_sets_kept.
  std::map<std::string, std::pair<std::uint64_t, std::shared_ptr<const prepared_metric_set>>> prepared;
  std::uint64_t prepared_uses = 0;
  // A range profiler was enabled in this process: from then on CUPTI's PC sampling names no
  // kernel whose code was loaded before it (H100, CUDA 13.0; bench/RESULTS.md), which the
  // warp-stall pass says when its samples all fall in unnamed code (warp_stalls/collect.hpp).
  std::atomic<bool> range_profiler_enabled{false};
};

KSCOPE_DECL counter_libraries& counter_library_state();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL counter_libraries& counter_library_state() {
  static lazy_global<counter_libraries> state{lock_rank::init};  // fork-safe (core/detail/once.hpp)
  return state.get([] { return new counter_libraries(); });
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A driver entry point through the runtime (kscope links cudart only): nullptr when the
// driver lacks it. A failed lookup's error is cleared: it is kscope's, not the program's.
KSCOPE_DECL void* driver_entry_point(const char* name) noexcept;

// The context the runtime made current (the device's primary context), through the
// driver's cuCtxGetCurrent. false with `why` when there is none; `no_entry_point` says the
// driver lacks cuCtxGetCurrent (the counters call that "unavailable", a missing context
// "failed"). Used by counters and warp stalls.
KSCOPE_DECL bool current_cuda_context(CUcontext& context, std::string& why, bool* no_entry_point = nullptr);

// The driver's id of the current context (cuCtxGetId, CUDA 12.0+): unique for the process's
// life, unlike the CUcontext pointer, which a context made after another was destroyed may
// reuse. What a kept range profiler is keyed by. False when there is no current context or
// the driver has no cuCtxGetId.
KSCOPE_DECL bool current_cuda_context_id(std::uint64_t& id) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void* driver_entry_point(const char* name) noexcept {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e == cudaSuccess && found == cudaDriverEntryPointSuccess ? fn : nullptr;
}

KSCOPE_DECL bool current_cuda_context(CUcontext& context, std::string& why, bool* no_entry_point) {
  using get_current_fn = CUresult(CUDAAPI*)(CUcontext*);
  void* const fn = driver_entry_point("cuCtxGetCurrent");
  if (fn == nullptr) {
    why = "the driver entry point cuCtxGetCurrent could not be found";
    if (no_entry_point) *no_entry_point = true;
    return false;
  }
  const CUresult r = reinterpret_cast<get_current_fn>(fn)(&context);
  if (r != CUDA_SUCCESS || context == nullptr) {
    why = "no current CUDA context (cuCtxGetCurrent returned " + std::to_string(static_cast<int>(r)) + ")";
    return false;
  }
  return true;
}

KSCOPE_DECL bool current_cuda_context_id(std::uint64_t& id) noexcept {
  using get_current_fn = CUresult(CUDAAPI*)(CUcontext*);
  using get_id_fn = CUresult(CUDAAPI*)(CUcontext, unsigned long long*);
  // Looked up once: the entry points do not change while the process runs.
  static void* const get_current = driver_entry_point("cuCtxGetCurrent");
  static void* const get_id = driver_entry_point("cuCtxGetId");
  if (get_current == nullptr || get_id == nullptr) return false;
  CUcontext context = nullptr;
  if (reinterpret_cast<get_current_fn>(get_current)(&context) != CUDA_SUCCESS || context == nullptr) return false;
  unsigned long long value = 0;
  if (reinterpret_cast<get_id_fn>(get_id)(context, &value) != CUDA_SUCCESS) return false;
  id = value;
  return true;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Everything both a pass and a metric listing need: device, context, libraries, chip,
// counter availability, and on demand a host object for the chip (open_host). The first
// failure sets state and message and makes open() (open_host) return false.
class counter_setup {
 public:
  counter_state state = counter_state::failed;
  std::string message;
  counter_libraries* libs = nullptr;
  int device = 0;
  CUcontext context = nullptr;
  std::string chip;
  std::vector<std::uint8_t> availability;
  profiler_host host;  // a range-profiler host object once open_host() made it

  bool open(const std::string& cupti_library, const std::string& nvperf_host_library);

  // The host object for the chip (made once per setup): only listing and resolving metric
  // names need it, a pass over a prepared set does not.
  bool open_host();

  // The base metrics of the chip (counters, ratios, throughputs), sorted; listed once per
  // chip and process. Empty when the host object cannot be made (state and message say why).
  const std::vector<std::string>& base_metrics();

  // The prepared set kept under `key` (null when none), counted as used now; keeping one
  // (at most prepared_metric_sets_kept: the least recently used is let go, its passes
  // keep their share).
  std::shared_ptr<const prepared_metric_set> find_prepared(const std::string& key);
  void keep_prepared(const std::string& key, std::shared_ptr<const prepared_metric_set> set);

  // A fresh host object for this chip (a host object keeps every metric added to it, so a
  // question about one set needs its own); false when the host API refuses.
  bool throwaway_host(profiler_host& out);

  // The host API's word on one full metric name: whether a config with it alone can be
  // built for this chip, the test the PM-sampling probe used (an unknown name fails with
  // CUPTI_ERROR_INVALID_PARAMETER there). A throwaway host object per name, since a host
  // object keeps every metric added to it; the answer is cached per chip and name.
  bool config_accepts(const std::string& name);

  // The passes a metric set needs on this device (0 when it cannot be configured), from a
  // throwaway host object's config image, as begin() builds the real one. Cached per chip
  // and set: plan_one_pass_groups asks many small questions once per process.
  std::size_t count_passes(const std::vector<std::string>& names);

  // Records a CUPTI failure: state from the error, message naming the call and the fix.
  bool cupti_ok(CUptiResult r, const char* call);

  bool cuda_ok(cudaError_t e, const char* call);

  bool refuse(counter_state s, std::string why);

 private:
  bool current_context();

  // cuptiProfilerDeviceSupported, where the library has it: names why a device cannot be
  // profiled before any other call fails with a less telling error.
  bool device_supported();
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool counter_setup::open(const std::string& cupti_library, const std::string& nvperf_host_library) {
  // The short reason: the report's GPU line says why there is no GPU (availability.hpp).
  if (const gpu_availability& gpu = probe_gpu(); !gpu.available())
    return refuse(counter_state::unavailable, "hardware counters unavailable: " + gpu.reason);
  if (!cuda_ok(cudaGetDevice(&device), "cudaGetDevice") || !cuda_ok(cudaFree(nullptr), "cudaFree(nullptr)"))
    return false;
  if (!current_context()) return false;

  libs = &counter_library_state();
  std::string why;
  if (!load_cupti(libs->cupti, cupti_library, why))
    return refuse(counter_state::unavailable, "hardware counters unavailable: " + why);
  if (libs->cupti.version != 0 && libs->cupti.version < range_profiler_min_cupti_version)
    return refuse(counter_state::unavailable,
                  "hardware counters unavailable: " + libs->cupti.path + " is CUPTI " +
                      std::to_string(libs->cupti.version) +
                      ", older than the range profiler (CUPTI 24, CUDA 12.6)");
  if (!libs->profiler.resolved()) {
    const std::string missing = resolve_profiler_symbols(libs->cupti.handle, libs->profiler);
    if (!missing.empty())
      return refuse(counter_state::unavailable, "hardware counters unavailable: " + libs->cupti.path + " has no " +
                                                    missing + " (the range profiler needs CUDA 12.6 or later)");
  }
  if (!load_nvperf_host(nvperf_host_library, libs->cupti.path, why))
    return refuse(counter_state::unavailable, "hardware counters unavailable: " + why);
  const profiler_api& p = libs->profiler;
  if (!libs->profiler_initialized) {
    // Once per process, never deinitialized: like cuptiFinalize, deinitializing races
    // with other threads still in CUDA.
    KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Initialize_Params, init);
    mark_cupti_state_beyond_activity();  // the collector must not finalize CUPTI under it
    if (!cupti_ok(p.initialize(&init), "cuptiProfilerInitialize")) return false;
    libs->profiler_initialized = true;
  }
  if (const auto known = libs->chips.find(device); known != libs->chips.end()) {
    chip = known->second;
  } else {
    if (!device_supported()) return false;
    if (!cupti_ok(read_chip_name(p, device, chip), "cuptiDeviceGetChipName")) return false;
    libs->chips.emplace(device, chip);
  }

  // Counter availability: where missing permission shows first (ANCHORS: not at Enable).
  if (const auto cached = libs->availability.find(device); cached != libs->availability.end()) {
    availability = cached->second;
  } else {
    KSCOPE_CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params, avail);
    avail.ctx = context;
    if (!cupti_ok(read_counter_availability(p.get_counter_availability, avail, availability),
                  "cuptiProfilerGetCounterAvailability"))
      return false;
    libs->availability.emplace(device, availability);
  }
  return true;
}

KSCOPE_DECL bool counter_setup::open_host() {
  if (host.object() != nullptr) return true;
  if (libs == nullptr || !message.empty()) return false;
  return cupti_ok(host.initialize(libs->profiler, CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, availability),
                  "cuptiProfilerHostInitialize");
}

KSCOPE_DECL const std::vector<std::string>& counter_setup::base_metrics() {
  static const std::vector<std::string> none;
  if (libs == nullptr) return none;
  if (const auto cached = libs->base_metrics.find(chip); cached != libs->base_metrics.end()) return cached->second;
  if (!open_host()) return none;
  std::vector<std::string> out = host.base_metrics();
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.empty()) return none;  // not cached: a later setup may list them
  return libs->base_metrics.emplace(chip, std::move(out)).first->second;
}

KSCOPE_DECL std::shared_ptr<const prepared_metric_set> counter_setup::find_prepared(const std::string& key) {
  if (libs == nullptr) return nullptr;
  const auto found = libs->prepared.find(key);
  if (found == libs->prepared.end()) return nullptr;
  found->second.first = ++libs->prepared_uses;
  return found->second.second;
}

KSCOPE_DECL void counter_setup::keep_prepared(const std::string& key, std::shared_ptr<const prepared_metric_set> set) {
  if (libs == nullptr || set == nullptr) return;
  while (libs->prepared.size() >= prepared_metric_sets_kept && libs->prepared.count(key) == 0) {
    auto oldest = libs->prepared.begin();
    for (auto it = libs->prepared.begin(); it != libs->prepared.end(); ++it)
      if (it->second.first < oldest->second.first) oldest = it;
    libs->prepared.erase(oldest);
  }
  libs->prepared[key] = {++libs->prepared_uses, std::move(set)};
}

KSCOPE_DECL bool counter_setup::throwaway_host(profiler_host& out) {
  return out.initialize(libs->profiler, CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, availability) == CUPTI_SUCCESS;
}

KSCOPE_DECL bool counter_setup::config_accepts(const std::string& name) {
  const std::string key = chip + '\n' + name;
  const auto cached = libs->metric_accepted.find(key);
  if (cached != libs->metric_accepted.end()) return cached->second;
  profiler_host probe;
  if (!throwaway_host(probe)) return false;  // not cached: not the name's fault
  const char* one[] = {name.c_str()};
  const bool accepted = probe.add_metrics(one, 1) == CUPTI_SUCCESS;
  libs->metric_accepted.emplace(key, accepted);
  return accepted;
}

KSCOPE_DECL std::size_t counter_setup::count_passes(const std::vector<std::string>& names) {
  std::string key = chip;
  for (const std::string& n : names) key += '\n' + n;
  const auto cached = libs->passes_needed.find(key);
  if (cached != libs->passes_needed.end()) return cached->second;
  profiler_host probe;
  if (!throwaway_host(probe)) return 0;
  std::vector<const char*> pointers;
  for (const std::string& n : names) pointers.push_back(n.c_str());
  std::size_t passes = 0;  // stays 0 when a call refuses
  std::vector<std::uint8_t> image;
  if (probe.add_metrics(pointers.data(), pointers.size()) == CUPTI_SUCCESS) (void)probe.config_image(image, &passes);
  libs->passes_needed.emplace(key, passes);
  return passes;
}

KSCOPE_DECL bool counter_setup::cupti_ok(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return true;
  const counter_state s = counter_state_for(r);
  const std::string advice = counter_error_advice(r);
  return refuse(s == counter_state::collected ? counter_state::failed : s,
                std::string("hardware counters unavailable: ") + call + " failed with " +
                    (libs != nullptr ? libs->cupti.result_name(r) : std::to_string(static_cast<int>(r))) +
                    (advice.empty() ? std::string() : ": " + advice));
}

KSCOPE_DECL bool counter_setup::cuda_ok(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();  // kscope's own call failed: clear its error
  return refuse(counter_state::failed,
                std::string("hardware counters unavailable: ") + call + " failed: " + cudaGetErrorString(e));
}

KSCOPE_DECL bool counter_setup::refuse(counter_state s, std::string why) {
  state = s;
  message = std::move(why);
  return false;
}

KSCOPE_DECL bool counter_setup::current_context() {
  std::string why;
  bool no_entry_point = false;
  if (current_cuda_context(context, why, &no_entry_point)) return true;
  return refuse(no_entry_point ? counter_state::unavailable : counter_state::failed,
                "hardware counters unavailable: " + why);
}

KSCOPE_DECL bool counter_setup::device_supported() {
  const device_support support = read_device_support(libs->profiler, device, CUPTI_PROFILER_RANGE_PROFILING);
  // Refused only with a named reason: an overall "unsupported" without one is left for
  // the calls that follow to confirm, with their own error.
  if (!support.unsupported || support.reasons.empty()) return true;
  return refuse(counter_state::unsupported_device,
                "hardware counters unavailable: CUPTI cannot profile this device (" + support.reasons + ")");
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#endif  // KSCOPE_HAS_RANGE_PROFILER

}  // namespace detail
}  // namespace kscope
