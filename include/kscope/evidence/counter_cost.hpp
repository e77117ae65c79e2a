// kscope/evidence/counter_cost.hpp — what the per-scope counters' profiled calls cost the program:
// plain data and its one-line description, shared by the sampler that measures it
// (counters/scope_counters.hpp) and the report section that prints it (counter_report.hpp).
#pragma once

#include "../core/config.hpp"
#include "../core/detail/number_format.hpp"

#include <cstdint>
#include <string>

namespace kscope {

// The host time kscope added to profiled calls, in nanoseconds: before the work (CUPTI's
// setup for the call: for a group's first call on a context the host object, config image
// and enabling the range profiler; for later calls of a kept group only the counter-data
// image, SetConfig and a device synchronization; the leading L2 sweep in both) and after it
// (synchronization, the trailing sweep, Stop, decoding and evaluating the ranges, the
// aggregation). Each total has its own count, taken at the same moment as the time it
// divides, so an average read while a call is in flight is still right.
struct scope_counter_cost {
  std::uint64_t calls = 0;             // profiled calls that closed (after_ns is over these)
  std::uint64_t cold_calls = 0;        // opened after setting CUPTI up from scratch
  std::uint64_t warm_calls = 0;        // opened after re-arming a kept pass
  double cold_before_ns = 0;           // before the work, over the cold calls
  double warm_before_ns = 0;           // before the work, over the warm calls
  double after_ns = 0;                 // after the work, over `calls`
  std::uint64_t abandoned_setups = 0;  // setups paid for a call that then ran unprofiled
  double abandoned_ns = 0;             // their time (a group split, a start refused)
};

// One line on what the profiled calls cost: "" when none was timed.
[[nodiscard]] KSCOPE_DECL std::string describe_cost(const scope_counter_cost& c);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string describe_cost(const scope_counter_cost& c) {
  if (c.calls == 0 && c.cold_calls == 0 && c.warm_calls == 0 && c.abandoned_setups == 0) return {};
  const auto ms = [](double total_ns, std::uint64_t n) {
    return detail::format_fixed(total_ns / 1e6 / static_cast<double>(n), 3) + " ms";
  };
  std::string out = "each profiled call cost";
  const char* sep = " ";
  if (c.warm_calls > 0) {
    out += sep + ms(c.warm_before_ns, c.warm_calls) + " before its work (" + std::to_string(c.warm_calls) +
           " calls re-armed a kept pass)";
    sep = ", ";
  }
  if (c.cold_calls > 0) {
    out += sep + ms(c.cold_before_ns, c.cold_calls) +
           (c.warm_calls > 0 ? " on the " + std::to_string(c.cold_calls) + " that set CUPTI up (a group's first call)"
                             : " before its work (" + std::to_string(c.cold_calls) + " calls, each setting CUPTI up)");
    sep = ", ";
  }
  if (c.calls > 0) out += std::string(c.warm_calls + c.cold_calls > 0 ? " and " : " ") + ms(c.after_ns, c.calls) +
                          " after it (synchronize, L2 sweep, decode), on average";
  if (c.abandoned_setups > 0)
    out += "; " + std::to_string(c.abandoned_setups) + " setups (" + ms(c.abandoned_ns, c.abandoned_setups) +
           " each) were paid for calls that then ran unprofiled";
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
