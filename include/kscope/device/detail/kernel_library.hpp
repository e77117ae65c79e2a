// kscope/device/detail/kernel_library.hpp — kscope's own GPU kernels, usable from any
// translation unit: the PTX text of cmake/peak_kernels.cu (peak_kernels_ptx.hpp, written
// by cmake/generate_peak_kernels.sh) loaded once per process with cudaLibraryLoadData,
// the driver JIT-compiling it for the GPU at hand, and the one user that is not
// measure_peaks(): the L2 sweep of the counter passes.
//
// The library is loaded on first use and never unloaded. A cudaLibrary_t is not tied to
// a context (each context loads the module when a kernel is first taken for it), so one
// handle serves every device; unloading it from a static destructor would run after the
// CUDA runtime may already be torn down.
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/fork_guard.hpp"
#include "../device_info.hpp"  // cuda_version_text

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <string>

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>

#  include "peak_kernels_ptx.hpp"

namespace kscope {
namespace detail {

// "cudaMalloc failed: cudaErrorMemoryAllocation (out of memory)".
KSCOPE_DECL std::string cuda_error_text(const char* call, cudaError_t status);

// The CUDA version the driver supports (12020 = 12.2), 0 when it cannot say.
KSCOPE_DECL int cuda_driver_version() noexcept;

// Why the peak kernels' PTX did not load, in words that say what to do. The usual cause
// is a driver too old for the PTX ISA the text declares (CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
// and the message names the driver needed, from the constants the generator wrote beside
// the text. The driver JIT-compiles the text when a kernel is first taken from the
// library (seen on R580: cudaLibraryLoadData accepts a .version the driver does not know,
// cudaLibraryGetKernel refuses it), so `call` names the step that failed.
// `driver_version` is cudaDriverGetVersion()'s (0: unknown).
KSCOPE_DECL std::string peak_kernels_load_error(const char* call, cudaError_t status, int driver_version);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string cuda_error_text(const char* call, cudaError_t status) {
  const char* name = cudaGetErrorName(status);
  const char* text = cudaGetErrorString(status);
  return std::string(call) + " failed: " + (name ? name : "?") + " (" + (text ? text : "?") + ")";
}

KSCOPE_DECL int cuda_driver_version() noexcept {
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess) {
    (void)cudaGetLastError();
    version = 0;
  }
  return version;
}

KSCOPE_DECL std::string peak_kernels_load_error(const char* call, cudaError_t status, int driver_version) {
  const std::string raw = " [" + cuda_error_text(call, status) + "]";
  const std::string ptx = std::string("the peak kernels' PTX (ISA ") + peak_kernels_ptx_isa + ", .target " +
                          peak_kernels_ptx_target + ")";
  const std::string driver =
      "the NVIDIA driver" + (driver_version > 0 ? " (CUDA " + cuda_version_text(driver_version) + ")" : std::string());
  switch (status) {
    case cudaErrorUnsupportedPtxVersion:
      return driver + " is too old for " + ptx + ": it needs a driver for CUDA " +
             cuda_version_text(peak_kernels_ptx_driver_cuda_version) + " (" + peak_kernels_ptx_driver_branch +
             ") or newer; update the driver" + raw;
    case cudaErrorJitCompilationDisabled:
      return driver + " has PTX JIT compilation disabled, and " + ptx + " is compiled by it when loaded" + raw;
    case cudaErrorJitCompilerNotFound:
      return driver + "'s PTX JIT compiler (libnvidia-ptxjitcompiler) was not found, and " + ptx +
             " is compiled by it when loaded; install the driver's complete user-space libraries" + raw;
    case cudaErrorInvalidPtx:
    case cudaErrorNoKernelImageForDevice:
      return driver + " could not JIT-compile " + ptx + " for this GPU" + raw;
    default:
      return cuda_error_text(call, status);
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The loaded library, or why it did not load (then `library` is null).
struct kernel_library_load {
  cudaLibrary_t library = nullptr;
  std::string error;
};

// Loads the PTX once per process (thread-safe): a success is kept, a failure is tried
// again at the next call (the driver may have been missing or busy only then). The lock
// is one the fork guard takes: a fork during a load waits for it, and the child does not
// inherit it held by a thread it does not have.
KSCOPE_DECL kernel_library_load kscope_kernel_library();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL kernel_library_load kscope_kernel_library() {
  static fork_guarded_mutex mutex{lock_rank::init_code_loading};  // constant-initialized
  static cudaLibrary_t loaded = nullptr;
  const std::lock_guard<fork_guarded_mutex> lock(mutex);
  kernel_library_load out;
  if (loaded == nullptr) {
    const cudaError_t status = cudaLibraryLoadData(&loaded, peak_kernels_ptx, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      loaded = nullptr;
      out.error = peak_kernels_load_error("cudaLibraryLoadData(kscope peak kernels PTX)", status, cuda_driver_version());
    }
  }
  out.library = loaded;
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Leaves the current device's L2 holding clean lines only: kscope_l2_sweep reads a buffer
// twice the L2's size and writes nothing, so every dirty line is written back while it
// runs. Counter passes run it first in every pass (counters/collect.hpp says why).
//   l2_sweep sweep;
//   if (std::string why = sweep.prepare(); !why.empty()) ...;   // allocates, loads
//   sweep.run();                                                 // launch and wait
// The buffer is freed by release() or the destructor. Not thread-safe: one owner.
class l2_sweep {
 public:
  l2_sweep() = default;
  l2_sweep(const l2_sweep&) = delete;
  l2_sweep& operator=(const l2_sweep&) = delete;
  ~l2_sweep() { release(); }

  // On the current device: "" when ready to run, else why not (nothing is held then).
  std::string prepare();

  [[nodiscard]] bool ready() const noexcept;
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

  // Launches the sweep on the legacy default stream and waits for it: "" or why not.
  std::string run();

  void release() noexcept;

 private:
  static std::string failed(const char* call, cudaError_t e);

  cudaKernel_t kernel_ = nullptr;
  void* buffer_ = nullptr;
  std::size_t bytes_ = 0;
  unsigned blocks_ = 1;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool l2_sweep::ready() const noexcept { return buffer_ != nullptr && kernel_ != nullptr; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string l2_sweep::prepare() {
  release();
  int device = 0, l2 = 0, sms = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return failed("cudaGetDevice", e);
  if (const cudaError_t e = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device); e != cudaSuccess)
    return failed("cudaDeviceGetAttribute(L2 size)", e);
  if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess)
    return failed("cudaDeviceGetAttribute(SM count)", e);
  const kernel_library_load loaded = kscope_kernel_library();
  if (loaded.library == nullptr) return loaded.error;
  if (const cudaError_t e = cudaLibraryGetKernel(&kernel_, loaded.library, "kscope_l2_sweep"); e != cudaSuccess) {
    kernel_ = nullptr;
    (void)cudaGetLastError();
    return peak_kernels_load_error("cudaLibraryGetKernel(kscope_l2_sweep)", e, cuda_driver_version());
  }
  // Loads the module into this context now, not at the first launch inside a pass.
  cudaFuncAttributes attributes{};
  if (const cudaError_t e = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel_));
      e != cudaSuccess) {
    kernel_ = nullptr;
    return failed("cudaFuncGetAttributes(kscope_l2_sweep)", e);
  }
  // Twice the L2 (64 MiB when the L2's size is unknown), whole 16-byte elements.
  const std::size_t want = 2 * static_cast<std::size_t>(l2 > 0 ? l2 : (32 << 20));
  bytes_ = (want + 15) / 16 * 16;
  if (const cudaError_t e = cudaMalloc(&buffer_, bytes_); e != cudaSuccess) {
    buffer_ = nullptr;
    const std::string why = failed("cudaMalloc", e) + " for " + std::to_string(bytes_ >> 20) + " MiB";
    bytes_ = 0;
    kernel_ = nullptr;
    return why;
  }
  blocks_ = static_cast<unsigned>(std::max(1, sms) * 8);
  return {};
}

KSCOPE_DECL std::string l2_sweep::run() {
  if (!ready()) return "the L2 sweep is not prepared";
  const void* source = buffer_;
  unsigned long long count = bytes_ / 16;
  unsigned* sink = nullptr;  // never written: see kscope_l2_sweep
  void* arguments[] = {&source, &count, &sink};
  if (const cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), dim3(blocks_), dim3(256),
                                             arguments, 0, nullptr);
      e != cudaSuccess)
    return failed("cudaLaunchKernel(kscope_l2_sweep)", e);
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return failed("cudaDeviceSynchronize (after the L2 sweep)", e);
  return {};
}

KSCOPE_DECL void l2_sweep::release() noexcept {
  // An error the program's own work left pending stays for the program to see: only a
  // failure of this cudaFree is cleared.
  if (buffer_ != nullptr && cudaFree(buffer_) != cudaSuccess) (void)cudaGetLastError();
  buffer_ = nullptr;
  kernel_ = nullptr;
  bytes_ = 0;
}

KSCOPE_DECL std::string l2_sweep::failed(const char* call, cudaError_t e) {
  (void)cudaGetLastError();
  return cuda_error_text(call, e);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_CUDA
