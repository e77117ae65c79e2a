// kscope/cupti/detail/kernel_launch_ids.hpp — which CUPTI callbacks launch a kernel, and the
// note a launch callback leaves while a step is profiled (scope/detail/counter_hook.hpp).
//
// In the CUPTI edge because two features take launch callbacks and only one of them is
// subscribed at a time (CUPTI 13.0 allows one subscriber): the activity collector's, or,
// when no collector runs, the counter pass's own (counters/detail/kernel_names.hpp). Either
// one notes a profiled step's kernel launches the same way, here.
#pragma once

#include "../../core/config.hpp"
#include "../../scope/detail/counter_hook.hpp"
#include "api.hpp"

#if KSCOPE_HAS_CUPTI

#include <cstddef>
#include <cstdint>

namespace kscope {
namespace detail {

// The kernel-launch and graph-launch callback ids: what launches a kernel (or a graph of them).
KSCOPE_DECL const CUpti_CallbackId* profiler_runtime_kernel_cbids(std::size_t& count) noexcept;

KSCOPE_DECL const CUpti_CallbackId* profiler_driver_kernel_cbids(std::size_t& count) noexcept;

KSCOPE_DECL bool is_graph_launch_cbid(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const CUpti_CallbackId* profiler_runtime_kernel_cbids(std::size_t& count) noexcept {
  static const CUpti_CallbackId ids[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
#if CUPTI_API_VERSION >= 130000
      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,  // <<<>>> in CUDA 13
      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
#endif
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
  };
  count = sizeof(ids) / sizeof(ids[0]);
  return ids;
}

KSCOPE_DECL const CUpti_CallbackId* profiler_driver_kernel_cbids(std::size_t& count) noexcept {
  static const CUpti_CallbackId ids[] = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunch,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
  };
  count = sizeof(ids) / sizeof(ids[0]);
  return ids;
}

KSCOPE_DECL bool is_graph_launch_cbid(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) noexcept {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
    return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 ||
           cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000;
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

KSCOPE_DECL bool is_kernel_launch_cbid(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) noexcept;

// From a launch callback (any site, any callback id), with `log` the active step log: a
// kernel or graph launch's outermost call on its thread is noted in it, at its exit and only
// when it succeeded (a launch that failed has no range). A runtime launch calls the driver
// (and, in CUDA 13, <<<>>> goes through __cudaLaunchKernel to another runtime entry point)
// underneath: the calls under the outermost are the same kernel.
KSCOPE_DECL void note_launch_for_profiled_step(profiled_step_log& log, CUpti_CallbackDomain domain,
                                               CUpti_CallbackId cbid, const CUpti_CallbackData& data) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool is_kernel_launch_cbid(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) noexcept {
  std::size_t count = 0;
  const CUpti_CallbackId* ids = domain == CUPTI_CB_DOMAIN_RUNTIME_API  ? profiler_runtime_kernel_cbids(count)
                                : domain == CUPTI_CB_DOMAIN_DRIVER_API ? profiler_driver_kernel_cbids(count)
                                                                       : nullptr;
  for (std::size_t i = 0; i < count; ++i)
    if (ids[i] == cbid) return true;
  return false;
}

KSCOPE_DECL void note_launch_for_profiled_step(profiled_step_log& log, CUpti_CallbackDomain domain,
                                               CUpti_CallbackId cbid, const CUpti_CallbackData& data) noexcept {
  if (!is_kernel_launch_cbid(domain, cbid)) return;
  // Launch calls open on this thread, counted from this pass's first: a call that entered
  // before the pass began (its exit seen now) or one left open by an earlier pass counts
  // for nothing. Trivial, so no thread-exit cost.
  struct launch_depth {
    std::uint32_t generation;
    std::uint32_t open_calls;
  };
  thread_local launch_depth depth{0, 0};
  const std::uint32_t generation = log.generation.load(std::memory_order_acquire);
  if (depth.generation != generation) depth = launch_depth{generation, 0};
  if (data.callbackSite == CUPTI_API_ENTER) {
    ++depth.open_calls;
    return;
  }
  if (depth.open_calls == 0 || --depth.open_calls > 0) return;  // entered before the pass, or not the outermost
  // cudaError_t and CUresult alike: 0 is success.
  const bool launched = data.functionReturnValue == nullptr || *static_cast<const int*>(data.functionReturnValue) == 0;
  if (launched) note_profiled_step_launch(log, is_graph_launch_cbid(domain, cbid));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_CUPTI
