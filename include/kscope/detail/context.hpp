// kscope/detail/context.hpp — fills a report's GPU context block.
//
// Every report states where its numbers were taken. Without CUDA (or without a
// device) the block stays empty and the text report says GPU timing needs a device.
#pragma once

#include "../config.hpp"
#include "../report.hpp"

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>
#endif

#include <string>

namespace kscope {
namespace detail {

inline void describe_devices(report_context& context) {
#if KSCOPE_HAS_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return;
  }
  std::string json;
  json_writer w(json);
  w.begin_array();
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    int sm_khz = 0, mem_khz = 0, bus_bits = 0;
    cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, d);
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, d);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, d);
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    const std::string prefix = count > 1 ? "gpu" + std::to_string(d) + " " : "";
    context.gpu.emplace_back(prefix + "GPU", p.name);
    context.gpu.emplace_back("cc", std::to_string(p.major) + "." + std::to_string(p.minor));
    context.gpu.emplace_back("SMs", std::to_string(p.multiProcessorCount));
    context.gpu.emplace_back("SM clock", std::to_string(sm_khz / 1000) + " MHz");
    context.gpu.emplace_back("mem clock", std::to_string(mem_khz / 1000) + " MHz");
    context.gpu.emplace_back("driver", std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10));
    context.gpu.emplace_back("runtime", std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10));
    w.begin_object();
    w.member("ordinal", d).member("name", p.name);
    w.member("compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor));
    w.member("sm_count", p.multiProcessorCount);
    w.member("sm_clock_khz", sm_khz).member("memory_clock_khz", mem_khz).member("bus_width_bits", bus_bits);
    w.member("driver_version", driver).member("runtime_version", runtime);
    w.end_object();
  }
  w.end_array();
  context.gpu_json = json;
#else
  (void)context;
#endif
}

}  // namespace detail
}  // namespace kscope
