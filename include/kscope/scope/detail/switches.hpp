// kscope/scope/detail/switches.hpp — the run-time switches every scope reads: recording
// on or off (also KSCOPE=0 in the environment) and NVTX ranges on or off.
//
// They are plain atomics, read relaxed: a disabled scope costs one load and a branch.
// The environment is read once, lazily, on the first scope, so static initialisation
// order never matters. KSCOPE is read by parse_switch (core/detail/env_switch.hpp): off
// for 0/off/false/no/disable(d) in any case and with blanks around; on when unset, empty,
// or 1/on/true/yes/enable(d). Any other value also leaves recording on (a typo must not
// silently lose a run's data), and is remembered so that the report can say it was not
// understood (switch_warnings.hpp).
//
//   kscope::recorder::global().set_enabled(false);   // or kscope::set_enabled(false)
//   if (kscope::detail::enabled()) { /* record */ }
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/env_switch.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kscope {
namespace detail {

// -1: not read from the environment yet; 0: off; 1: on.
inline std::atomic<int> enabled_state{-1};
inline std::atomic<bool> nvtx_enabled{true};

// Set when KSCOPE held a value parse_switch() did not understand; the report then says so
// (switch_warnings.hpp builds the line, away from this header every scope includes).
inline std::atomic<bool> kscope_value_unrecognised{false};

inline bool read_enabled_from_environment() noexcept {
  const char* v = std::getenv("KSCOPE");
  const switch_value parsed = parse_switch(v);
  const bool on = parsed != switch_value::off;
  int expected = -1;
  if (enabled_state.compare_exchange_strong(expected, on ? 1 : 0, std::memory_order_relaxed))
    kscope_value_unrecognised.store(parsed == switch_value::unrecognised, std::memory_order_relaxed);
  return enabled_state.load(std::memory_order_relaxed) == 1;
}

inline bool enabled() noexcept {
  const int state = enabled_state.load(std::memory_order_relaxed);
  if (KSCOPE_LIKELY(state >= 0)) return state == 1;
  return read_enabled_from_environment();
}

}  // namespace detail
}  // namespace kscope
