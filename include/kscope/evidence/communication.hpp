// kscope/evidence/communication.hpp — which kernels are communication (NCCL), not compute.
//
// A phase breakdown can then say "decode: 70 % compute, 30 % all-reduce": the attribution
// classifies each kernel name once, on first sight, and keeps the communication kernels'
// time and busy union apart (node_gpu_activity::comm_*, activity_results.hpp).
#pragma once

#include "../core/config.hpp"
#include <cstddef>
#include <string_view>

namespace kscope {

// NCCL's collective and point-to-point kernels: "ncclDevKernel_*" (NCCL >= 2.19) and
// "ncclKernel_*" (older releases). Accepts the name as CUPTI reports it (Itanium-mangled:
// "_Z24ncclDevKernel_AllReduce_...") or demangled, with or without a leading "void ".
//
//   kscope::is_communication_kernel("_Z24ncclDevKernel_AllReduce_Sum_f32_RING_LLP24...");  // true
//   kscope::is_communication_kernel("_Z4axpyPfS_f");                                     // false
[[nodiscard]] KSCOPE_DECL bool is_communication_kernel(std::string_view name) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool is_communication_kernel(std::string_view name) noexcept {
  if (name.size() > 2 && name[0] == '_' && name[1] == 'Z') {
    name.remove_prefix(2);
    if (!name.empty() && name[0] == 'L') name.remove_prefix(1);  // internal linkage
    std::size_t digits = 0;
    while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
    if (digits == 0) return false;  // nested (_ZN...) or special names: not NCCL's
    name.remove_prefix(digits);
  } else if (name.substr(0, 5) == "void ") {
    name.remove_prefix(5);
  }
  return name.substr(0, 13) == "ncclDevKernel" || name.substr(0, 10) == "ncclKernel";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
