// kscope/device/availability.hpp — does this process have a GPU, and if not, why, in words.
//
// The CUDA runtime's own answer misleads on the commonest machine without a GPU: with no
// NVIDIA driver installed, cudaGetDeviceCount returns cudaErrorInsufficientDriver ("CUDA
// driver version is insufficient for CUDA runtime version"), which reads as "update the
// driver" where there is none to update. kscope tells the cases apart from a few facts:
//   (a) no NVIDIA driver: libcuda.so.1 cannot be loaded (probed with dlopen, never linked),
//       or the one found is the toolkit's stub;
//   (b) a driver but no device: cudaErrorNoDevice or zero devices, or CUDA_VISIBLE_DEVICES
//       leaves the process none;
//   (c) a driver too old for this runtime: cudaErrorInsufficientDriver while libcuda loads,
//       with both CUDA versions and the driver branch to install;
// and any other error passed through with its name.
//
// classify_gpu_availability() is pure (known answers in tests/availability_test.cpp, on any
// machine); probe_gpu() gathers the facts once per process and classifies them. The full
// sentence (`message`) is for the one place a report says why it has no GPU (its GPU line,
// query_device's `problem`); every other module that notices names the short `reason`
// ("CUPTI not started: no NVIDIA driver"), so a report says it once.
//
//   const kscope::gpu_availability& gpu = kscope::probe_gpu();
//   if (!gpu.available()) std::fprintf(stderr, "%s\n", gpu.message.c_str());
//   // "NVIDIA driver too old: it supports CUDA 12.2, this program was built with CUDA
//   //  13.0: update the driver to R580 or newer"
#pragma once

#include "../core/config.hpp"
#include "../core/detail/cuda_start_hook.hpp"
#include "../core/detail/once.hpp"
#include "device_info.hpp"  // detail::cuda_version_text

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>
#  if defined(__has_include)
#    if __has_include(<dlfcn.h>)
#      include <dlfcn.h>
#      define KSCOPE_AVAILABILITY_DLOPEN 1
#    endif
#  endif
#endif

namespace kscope {

// Why there is no usable GPU (or that there is one).
enum class gpu_absence : std::uint8_t {
  none,                // a GPU is usable
  no_driver,           // libcuda.so.1 cannot be loaded, or is the toolkit's stub
  no_device,           // the driver sees no device
  devices_hidden,      // no device, with CUDA_VISIBLE_DEVICES set: it may hide them all
  driver_too_old,      // the driver supports an older CUDA than the runtime linked in
  cuda_error,          // another CUDA error, passed through by name
  built_without_cuda,  // KSCOPE_HAS_CUDA=0
};

[[nodiscard]] constexpr const char* to_string(gpu_absence a) noexcept {
  switch (a) {
    case gpu_absence::none: return "none";
    case gpu_absence::no_driver: return "no driver";
    case gpu_absence::no_device: return "no device";
    case gpu_absence::devices_hidden: return "devices hidden";
    case gpu_absence::driver_too_old: return "driver too old";
    case gpu_absence::cuda_error: return "CUDA error";
    case gpu_absence::built_without_cuda: return "built without CUDA";
  }
  return "?";
}

// The facts the classification rests on, as plain values (probe_gpu() gathers them; tests
// write them by hand). Error codes are the CUDA runtime's numbers, so this needs no CUDA
// header.
struct gpu_probe {
  bool cuda_compiled = true;
  int runtime_error = 0;           // cudaGetDeviceCount's cudaError_t; 0 = cudaSuccess
  std::string runtime_error_name;  // "cudaErrorNoDevice" (cudaGetErrorName)
  std::string runtime_error_text;  // "no CUDA-capable device is detected" (cudaGetErrorString)
  int device_count = 0;            // cudaGetDeviceCount's count when it succeeded
  bool driver_loads = false;       // dlopen("libcuda.so.1") succeeded
  std::string driver_load_error;   // dlerror() when it did not
  int driver_version = 0;          // cuDriverGetVersion: CUDA the driver supports, 12020 = 12.2; 0 = unknown
  int runtime_version = 0;         // cudaRuntimeGetVersion: 13000 = 13.0; 0 = unknown
  std::optional<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES, when set
};

// The answer: whether a GPU is usable, and when not, why, in two lengths.
struct gpu_availability {
  gpu_absence absence = gpu_absence::none;
  std::string message;  // the full sentence, with what to do; empty when a GPU is usable
  std::string reason;   // a few words for other modules' lines: "no NVIDIA driver"
  int device_count = 0;
  int driver_version = 0;   // as in gpu_probe
  int runtime_version = 0;
  [[nodiscard]] bool available() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool gpu_availability::available() const noexcept { return absence == gpu_absence::none; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// The CUDA runtime's error numbers the classification needs; the edge below checks them
// against cudaError_t where the CUDA header is at hand.
inline constexpr int cuda_error_stub_library = 34;       // cudaErrorStubLibrary
inline constexpr int cuda_error_insufficient_driver = 35;  // cudaErrorInsufficientDriver
inline constexpr int cuda_error_no_device = 100;         // cudaErrorNoDevice

}  // namespace detail

// The oldest driver branch that runs a program built with CUDA `runtime_version` (minor
// version compatibility: every 13.x runs on R580, 12.x on R525, 11.x on R450; NVIDIA's
// CUDA compatibility guide). "" when the table does not know the major version.
//   std::string branch = kscope::minimum_driver_branch(13000);  // "R580"
[[nodiscard]] KSCOPE_DECL std::string minimum_driver_branch(int runtime_version);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string minimum_driver_branch(int runtime_version) {
  switch (runtime_version / 1000) {
    case 13: return "R580";
    case 12: return "R525";
    case 11: return "R450";
    default: return "";
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The classification, pure: the same facts always give the same words.
//   kscope::gpu_probe p;
//   p.runtime_error = 35; p.driver_loads = true; p.driver_version = 12020; p.runtime_version = 13000;
//   kscope::classify_gpu_availability(p).message;
//   // "NVIDIA driver too old: it supports CUDA 12.2, this program was built with CUDA 13.0:
//   //  update the driver to R580 or newer"
[[nodiscard]] KSCOPE_DECL gpu_availability classify_gpu_availability(const gpu_probe& p);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL gpu_availability classify_gpu_availability(const gpu_probe& p) {
  gpu_availability a;
  a.device_count = p.runtime_error == 0 ? p.device_count : 0;
  a.driver_version = p.driver_version;
  a.runtime_version = p.runtime_version;
  const auto set = [&a](gpu_absence absence, std::string reason, std::string message) {
    a.absence = absence;
    a.reason = std::move(reason);
    a.message = std::move(message);
    return a;
  };
  if (!p.cuda_compiled)
    return set(gpu_absence::built_without_cuda, "built without CUDA",
               "no GPU support: kscope was built without CUDA (KSCOPE_HAS_CUDA=0)");
  if (p.runtime_error == 0 && p.device_count > 0) return a;
  // The stub resolves as libcuda.so.1 when the toolkit's stubs directory is on the library
  // path: it loads, and is not a driver.
  if (p.runtime_error == detail::cuda_error_stub_library)
    return set(gpu_absence::no_driver, "no NVIDIA driver",
               "no NVIDIA driver: the libcuda.so.1 found is the CUDA toolkit's stub, not a driver (take "
               "the toolkit's lib64/stubs out of the library path, or install the NVIDIA driver)");
  // With no driver the runtime says "insufficient driver"; what decides is whether there
  // is a driver library at all.
  if (!p.driver_loads) {
    std::string why = p.driver_load_error;
    const std::string own_name = "libcuda.so.1: ";
    if (why.compare(0, own_name.size(), own_name) == 0) why.erase(0, own_name.size());
    const bool missing = why.empty() || why.find("No such file") != std::string::npos;
    return set(gpu_absence::no_driver, "no NVIDIA driver",
               missing ? "no NVIDIA driver: libcuda.so.1 not found (not installed, or not mounted into this container)"
                       : "no NVIDIA driver: libcuda.so.1 cannot be loaded (" + why + ")");
  }
  const std::string driver_cuda =
      p.driver_version > 0 ? " (CUDA " + detail::cuda_version_text(p.driver_version) + ")" : std::string();
  if (p.runtime_error == detail::cuda_error_no_device || (p.runtime_error == 0 && p.device_count <= 0)) {
    if (p.visible_devices)
      return set(gpu_absence::devices_hidden, "no NVIDIA GPU visible (CUDA_VISIBLE_DEVICES)",
                 "no NVIDIA GPU visible: CUDA_VISIBLE_DEVICES=\"" + *p.visible_devices +
                     "\" leaves this process no device; the NVIDIA driver" + driver_cuda + " is installed");
    return set(gpu_absence::no_device, "no NVIDIA GPU",
               "no NVIDIA GPU: the NVIDIA driver" + driver_cuda + " is installed but sees no device");
  }
  if (p.runtime_error == detail::cuda_error_insufficient_driver) {
    const std::string runtime =
        p.runtime_version > 0 ? "CUDA " + detail::cuda_version_text(p.runtime_version) : std::string("a newer CUDA");
    // The branch table holds when the driver is of an older major version (the usual
    // case); a driver of the same major that still refuses needs that toolkit's driver.
    const std::string branch = minimum_driver_branch(p.runtime_version);
    const bool older_major = p.driver_version <= 0 || p.driver_version / 1000 < p.runtime_version / 1000;
    const std::string update = !branch.empty() && older_major
                                   ? "update the driver to " + branch + " or newer"
                                   : "update the driver to one that supports " + runtime;
    const std::string reason = "NVIDIA driver too old for " + runtime;
    if (p.driver_version > 0)
      return set(gpu_absence::driver_too_old, reason,
                 "NVIDIA driver too old: it supports CUDA " + detail::cuda_version_text(p.driver_version) +
                     ", this program was built with " + runtime + ": " + update);
    return set(gpu_absence::driver_too_old, reason,
               "NVIDIA driver too old for this program's " + runtime + ": " + update);
  }
  const std::string name =
      !p.runtime_error_name.empty() ? p.runtime_error_name : "CUDA error " + std::to_string(p.runtime_error);
  return set(gpu_absence::cuda_error, "no usable NVIDIA GPU (" + name + ")",
             "no usable NVIDIA GPU: cudaGetDeviceCount failed: " + name +
                 (p.runtime_error_text.empty() ? std::string() : " (" + p.runtime_error_text + ")"));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- the edge: the facts of this process, gathered once ---------------------------------

namespace detail {

#if KSCOPE_HAS_CUDA
static_assert(cuda_error_stub_library == static_cast<int>(cudaErrorStubLibrary));
static_assert(cuda_error_insufficient_driver == static_cast<int>(cudaErrorInsufficientDriver));
static_assert(cuda_error_no_device == static_cast<int>(cudaErrorNoDevice));
#endif

// What this process's CUDA runtime and driver say. Creates no context; the runtime's
// error is cleared so the host program does not trip on it.
KSCOPE_DECL gpu_probe gather_gpu_probe();

// Set once probe_gpu() has answered; read without touching CUDA by probed_gpu().
KSCOPE_DECL std::atomic<const gpu_availability*>& probed_gpu_slot() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL gpu_probe gather_gpu_probe() {
  gpu_probe p;
#if KSCOPE_HAS_CUDA
  if (cudaRuntimeGetVersion(&p.runtime_version) != cudaSuccess) p.runtime_version = 0;
  const cudaError_t counted = cudaGetDeviceCount(&p.device_count);
  p.runtime_error = static_cast<int>(counted);
  if (counted != cudaSuccess) {
    (void)cudaGetLastError();
    p.device_count = 0;
    const char* name = cudaGetErrorName(counted);
    const char* text = cudaGetErrorString(counted);
    p.runtime_error_name = name ? name : "";
    p.runtime_error_text = text ? text : "";
  }
#  if defined(KSCOPE_AVAILABILITY_DLOPEN)
  // The driver library itself, never linked: loading it has no effect beyond what the
  // runtime does on its first call (it loads the same library), and it stays loaded as it
  // does for the runtime. cuDriverGetVersion needs no cuInit.
  ::dlerror();
  if (void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    p.driver_loads = true;
    using get_version_fn = int (*)(int*);
    if (auto get_version = reinterpret_cast<get_version_fn>(::dlsym(driver, "cuDriverGetVersion"))) {
      if (get_version(&p.driver_version) != 0) p.driver_version = 0;
    }
  } else {
    const char* why = ::dlerror();
    p.driver_load_error = why ? why : "";
  }
#  else
  // No dlopen here: the runtime answers 0 when no driver is installed.
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  p.driver_loads = p.driver_version > 0;
#  endif
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) p.visible_devices = std::string(visible);
#else
  p.cuda_compiled = false;
#endif
  return p;
}

KSCOPE_DECL std::atomic<const gpu_availability*>& probed_gpu_slot() noexcept {
  static std::atomic<const gpu_availability*> slot{nullptr};
  return slot;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Whether this process has a usable GPU, and why not; the CUDA and driver queries run on
// the first call only (the answer cannot change within a process: the runtime fixes its
// devices when it initializes). Thread-safe. Initializes the CUDA runtime, like any
// cudaGetDeviceCount, but creates no context.
//   if (!kscope::probe_gpu().available()) std::puts(kscope::probe_gpu().message.c_str());
[[nodiscard]] KSCOPE_DECL const gpu_availability& probe_gpu();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const gpu_availability& probe_gpu() {
  // Never destroyed: the collector's exit handler may still read it after static destructors.
  // Not a function-local static: a fork while another thread is in the CUDA calls below
  // waits for them to finish (and never starts them), so the child cannot inherit a
  // half-done probe whose guard it would wait on forever (core/detail/once.hpp).
  static detail::lazy_global<const gpu_availability> answer{detail::lock_rank::init_gpu_probe};
  return answer.get([] {
    // Assigned, not `new gpu_availability(classify(...))`: nvcc 13.0's device front end
    // (cicc) aborts on that form in C++20.
    auto* a = new gpu_availability;
    *a = classify_gpu_availability(detail::gather_gpu_probe());
    detail::probed_gpu_slot().store(a, std::memory_order_release);
    // The runtime has registered its teardown by now (core/detail/cuda_start_hook.hpp).
    if (a->available()) detail::notify_cuda_started();
    return a;
  });
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// probe_gpu()'s answer if it has been given, else nullptr; never touches CUDA (for a
// path that must not initialize it, such as CUPTI switched off with KSCOPE_CUPTI=0).
[[nodiscard]] KSCOPE_DECL const gpu_availability* probed_gpu() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const gpu_availability* probed_gpu() noexcept {
  return detail::probed_gpu_slot().load(std::memory_order_acquire);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope

#undef KSCOPE_AVAILABILITY_DLOPEN
