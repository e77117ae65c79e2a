// kscope/scope/detail/switches.hpp — the run-time switches every scope reads: recording
// on or off (also KSCOPE=0 in the environment) and NVTX ranges on or off.
//
// They are plain atomics, read relaxed: a disabled scope costs one load and a branch.
// The environment is read once, lazily, on the first scope, so static initialisation
// order never matters.
//
//   kscope::recorder::global().set_enabled(false);   // or kscope::set_enabled(false)
//   if (kscope::detail::enabled()) { /* record */ }
#pragma once

#include "../../core/config.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kscope {
namespace detail {

// -1: not read from the environment yet; 0: off; 1: on.
inline std::atomic<int> enabled_state{-1};
inline std::atomic<bool> nvtx_enabled{true};

// KSCOPE=0, off or false turns recording off; anything else (or unset) leaves it on.
inline bool read_enabled_from_environment() noexcept {
  const char* v = std::getenv("KSCOPE");
  const bool on = !(v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 ||
                          std::strcmp(v, "false") == 0));
  int expected = -1;
  enabled_state.compare_exchange_strong(expected, on ? 1 : 0, std::memory_order_relaxed);
  return enabled_state.load(std::memory_order_relaxed) == 1;
}

inline bool enabled() noexcept {
  const int state = enabled_state.load(std::memory_order_relaxed);
  if (KSCOPE_LIKELY(state >= 0)) return state == 1;
  return read_enabled_from_environment();
}

}  // namespace detail
}  // namespace kscope
