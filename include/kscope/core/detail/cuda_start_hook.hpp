// kscope/core/detail/cuda_start_hook.hpp — "the CUDA runtime is up now", told to whoever
// needs to know (the exit report, session/detail/exit_report.hpp).
//
// Why it exists: the CUDA runtime registers its own teardown with atexit on its first call,
// and atexit runs handlers last-registered-first. The exit report's handler is registered
// before main, usually before the program's first CUDA call; left there it would run after
// the runtime's teardown, when every CUDA event kscope still has to read answers
// cudaErrorCudartUnloading and the report would lose its GPU times. So the places where
// kscope first sees the runtime working (probe_gpu() answering, the event pool's first
// events on a device) call notify_cuda_started(), and the exit report registers its
// handler once more: that later registration runs before the runtime's teardown.
//
// One atomic load per call, on cold paths only; with no hook set (no KSCOPE_REPORT) nothing
// else happens.
//
//   kscope::detail::cuda_start_hook.store(&register_again);   // the exit report, at start
//   kscope::detail::notify_cuda_started();                     // probe_gpu(), event_pool::grow()
#pragma once

#include <atomic>

namespace kscope {
namespace detail {

using cuda_start_hook_fn = void (*)() noexcept;

inline std::atomic<cuda_start_hook_fn> cuda_start_hook{nullptr};

inline void notify_cuda_started() noexcept {
  if (const cuda_start_hook_fn hook = cuda_start_hook.load(std::memory_order_acquire)) hook();
}

}  // namespace detail
}  // namespace kscope
