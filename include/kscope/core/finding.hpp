// kscope/core/finding.hpp — the verdict vocabulary every feature shares: what limits a scope
// or kernel (bottleneck), one number a conclusion rests on (evidence), and a conclusion with
// its numbers and one line of text (finding). Counters, sampled metrics, warp stalls and the
// declared-work roofline each conclude in these terms; verdict/ weighs them into one verdict
// per scope (scope_verdict), the only conclusion a report prints.
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

// One source's evidence under a scope's (or bench row's) verdict: the numbers it measured,
// the busiest unit's share of its peak, and how many calls or samples they rest on. It
// carries no class of its own: a report prints one conclusion per scope, the verdict, and
// lists its evidence under it.
//   for (const kscope::verdict_evidence& e : v.evidence) std::printf("%s: %zu facts\n", e.source.c_str(), e.facts.size());
struct verdict_evidence {
  std::string source;            // "hardware counters", "sampled metrics", "declared work"
  std::vector<evidence> facts;   // the numbers
  // The busiest unit's % of its peak and its metric (measured sources); declared work: its
  // % of the roof it was placed under. NaN / "" when none.
  double percent_of_peak = std::numeric_limits<double>::quiet_NaN();
  std::string metric;
  std::uint64_t count = 0;       // how many of `count_of` the numbers rest on
  std::string count_of;          // "profiled calls", "samples", "calls", "profiled call"
  bool agrees = true;            // read alone, it names the verdict's class
};

// What one source concluded for a scope or bench row, and what it rests on: what the
// verdict (verdict/weigh.hpp) weighs. A feature gives its own through
// scope_report::feature_evidence.
//   kscope::verdict_candidate c{"queue model", said, true, 40, "steps"};
struct verdict_candidate {
  std::string source;       // "hardware counters", "sampled metrics", "declared work"
  finding said;             // its conclusion with its numbers
  bool measured = true;     // false: declared work (decides only where nothing measured did)
  std::uint64_t count = 0;  // how many calls or samples it rests on
  std::string count_of;     // "profiled calls", "samples", "calls"
};

// The one verdict of a scope or bench row (verdict/weigh.hpp decides it): the class and the
// limiting unit, what to try, the source it rests on, every source's evidence under it
// (the deciding one first), and what was not collected or did not decide.
//   if (s->verdict) std::printf("%s (%s)\n", kscope::to_string(s->verdict->verdict.kind), s->verdict->basis.c_str());
struct scope_verdict {
  finding verdict;     // kind: the class; where: the limiting unit; text: the numbers and what to try
  std::string basis;   // the source that decided ("hardware counters", "sampled metrics",
                       // "declared work"); "no evidence that decided" for undetermined
  std::vector<verdict_evidence> evidence;  // the deciding source first; empty when undetermined
  std::vector<std::string> missing;        // evidence not collected or not decided, and how to collect it

  // The deciding source's evidence (its % of peak, metric, count), or nullptr.
  [[nodiscard]] const verdict_evidence* decided() const noexcept {
    return !evidence.empty() && evidence.front().source == basis ? &evidence.front() : nullptr;
  }
};

}  // namespace kscope
