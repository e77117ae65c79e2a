// kscope/activity/detail/callback_ids.hpp — the API calls whose launch-time callback kscope takes.
//
// The synchronizes (stream, event, context / device; their CUPTI records say how long the
// host waited, attributed to the scope that called them), and every runtime- and
// driver-API entry point that puts GPU work on a stream: kernel launches
// (<<<>>>, cudaLaunchKernel(ExC), cooperative launches, cuLaunchKernel(Ex)), graph launches,
// and the memcpy / memset families, in their per-thread-default-stream (_ptds/_ptsz)
// variants too. Driver calls matter on their own: cuBLAS, Triton and JIT code launch
// through cuLaunchKernel(Ex). Only these ids are enabled, so no other API call pays for a
// callback. Ids that the loaded libcupti does not know are skipped at run time; the 64-bit
// "cu64" aliases and graph-node construction calls are left out (they launch nothing).
// Generated from CUDA 13.0's cupti_runtime_cbid.h / cupti_driver_cbid.h; ids newer than
// CUDA 12 are behind a CUPTI_API_VERSION check.
#pragma once

#include "../../core/config.hpp"
#include "../../cupti/detail/api.hpp"

#if KSCOPE_HAS_CUPTI

#include <cstddef>

namespace kscope {
namespace detail {

KSCOPE_DECL const CUpti_CallbackId* cupti_runtime_launch_cbids(std::size_t& count) noexcept;

KSCOPE_DECL const CUpti_CallbackId* cupti_driver_launch_cbids(std::size_t& count) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const CUpti_CallbackId* cupti_runtime_launch_cbids(std::size_t& count) noexcept {
  static const CUpti_CallbackId ids[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
      // Synchronizations: their CUPTI records (host waits) are attributed like launches.
      CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
#if CUPTI_API_VERSION >= 130000
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v12080,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v12080,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v12080,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v12080,
      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v13000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v13000,
#endif
  };
  count = sizeof(ids) / sizeof(ids[0]);
  return ids;
}

KSCOPE_DECL const CUpti_CallbackId* cupti_driver_launch_cbids(std::size_t& count) noexcept {
  static const CUpti_CallbackId ids[] = {
      CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
      CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
      CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
      CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD16,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32,
      CUPTI_DRIVER_TRACE_CBID_cuLaunch,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
#if CUPTI_API_VERSION >= 130000
      CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2_ptsz,
#endif
  };
  count = sizeof(ids) / sizeof(ids[0]);
  return ids;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_CUPTI
