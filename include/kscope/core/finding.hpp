// kscope/core/finding.hpp — the verdict vocabulary every feature shares: what limits a scope
// or kernel (bottleneck), one number a conclusion rests on (evidence), and a conclusion with
// its numbers and one line of text (finding). Counters, sampled metrics, warp stalls and the
// declared-work roofline each conclude in these terms; verdict/ weighs them into one verdict
// per scope.
#pragma once

#include "config.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kscope {

// What limits a scope or kernel.
enum class bottleneck : std::uint8_t { memory, compute, latency, launch, undetermined };

// "memory-bound", "compute-bound", "latency-bound", "launch/CPU-bound", "undetermined".
[[nodiscard]] KSCOPE_DECL const char* to_string(bottleneck b) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* to_string(bottleneck b) noexcept {
  switch (b) {
    case bottleneck::memory: return "memory-bound";
    case bottleneck::compute: return "compute-bound";
    case bottleneck::latency: return "latency-bound";
    case bottleneck::launch: return "launch/CPU-bound";
    case bottleneck::undetermined: return "undetermined";
  }
  return "unknown";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The bottleneck whose to_string() is `name`; undetermined for any other text (a report
// read back from JSON).
[[nodiscard]] KSCOPE_DECL bottleneck bottleneck_from_string(const std::string& name) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bottleneck bottleneck_from_string(const std::string& name) noexcept {
  for (bottleneck b : {bottleneck::memory, bottleneck::compute, bottleneck::latency, bottleneck::launch})
    if (name == to_string(b)) return b;
  return bottleneck::undetermined;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One number a finding rests on: a counter (its metric name) or a timeline / launch fact
// ("timeline.gpu_idle_share", "launch.grid_blocks", "device.sm_count", "stall.barrier").
struct evidence {
  std::string metric;
  double value = std::numeric_limits<double>::quiet_NaN();
  std::string unit;  // "%", "share", "ns", "blocks", "SMs", "bytes"
};

// A conclusion, where it applies (a memory level, a pipe), the numbers behind it and one
// line of text that names them and says what to try.
struct finding {
  bottleneck kind = bottleneck::undetermined;
  std::string where;  // "DRAM", "L2", "L1", "FP32 pipe", "tensor pipe", ... ; "" when none
  std::vector<evidence> facts;
  std::string text;
};

// What a section prints beside its own conclusion for a scope whose one verdict
// (scope_report::verdict, verdict/scope_verdict.hpp) rests on stronger evidence and says
// otherwise: "" when it agrees, when the section's evidence decided, or when there is no
// verdict. A report never shows two conclusions for one scope without saying which holds.
//   details += path + ": " + f.text + kscope::outweighed_note(s, f.kind, "sampled metrics");
template <class Scope>
[[nodiscard]] std::string outweighed_note(const Scope& s, bottleneck said, const std::string& basis) {
  if (!s.verdict || said == bottleneck::undetermined || s.verdict->basis == basis || s.verdict->verdict.kind == said)
    return {};
  std::string where = s.verdict->verdict.where.empty() ? std::string() : " (" + s.verdict->verdict.where + ")";
  return " [outweighed: the scope's verdict is " + std::string(to_string(s.verdict->verdict.kind)) + where +
         ", from " + s.verdict->basis + "]";
}

}  // namespace kscope
