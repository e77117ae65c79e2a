// kscope/core/work.hpp — the work one call does, on its own so that scopes can take it
// (scope::set_work) without pulling in the roofline arithmetic.
//
//   kscope::work w{2.0 * m * n * k, 2.0 * (m * k + k * n + m * n)};  // bf16 GEMM
//   s.set_work(w);
#pragma once

namespace kscope {

// Floating-point (or integer) operations, and bytes moved between the SMs and DRAM
// (count reads and writes; a copy of N bytes moves 2N).
struct work {
  double flops = 0;
  double bytes = 0;
};

}  // namespace kscope
