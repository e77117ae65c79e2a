// kscope/counters/detail/call_plan.hpp — the choices the per-scope counters make for each
// profiled call, as pure functions (counters/scope_counters.hpp holds the state and the
// CUPTI side; tests/scope_counters_test.cpp checks these on the CPU):
// - which metric group a scope's next profiled call measures: groups the scope has not
//   measured yet first (a call whose group came back without a value is tried again at
//   once, a few times), then round robin;
// - how many kernels the counter-data image of the scope's next call holds: a call that
//   launched more than the image held is set aside and profiled again with twice the room,
//   up to a limit; past it every figure rests on part of a call's kernels, and says so;
// - how long a measurement spread over consecutive calls of one scope (a multi-pass group)
//   may keep the other scopes waiting before it is given up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kscope {
namespace detail {

// One scope's record of one metric group.
struct group_tally {
  std::uint32_t attempts = 0;  // measurements begun and closed (set-aside ones excepted)
  std::uint32_t measured = 0;  // those that gave a value for some metric of the group
};

// A group tried this many times without a value is left to the round robin: CUPTI can
// evaluate a group as NaN in every range of a pass (H100, H200, CUDA 13.0), which a retry
// usually mends; one that never gives a value must not take every call of the scope.
inline constexpr std::uint32_t group_retries = 3;

// Other scopes' due calls a measurement spread over consecutive calls of one scope may
// defer before it is given up (its scope was not called again: a warm-up scope, the end of
// a phase). The deferred scopes owe nothing: their next call is due instead.
inline constexpr std::uint32_t spread_patience = 64;

// The group a scope's next profiled call measures, given its tallies in plan order (as
// many as the plan has groups; the plan orders them: one-pass groups, then the multi-pass
// ones, then the SASS groups). Unmeasured groups not yet given up come first, fewest
// attempts first; then every group by attempts (the rotation), plan order breaking ties.
[[nodiscard]] inline std::size_t next_group(const std::vector<group_tally>& tallies) noexcept {
  std::size_t best = 0;
  bool best_unmeasured = false;
  for (std::size_t i = 0; i < tallies.size(); ++i) {
    const group_tally& t = tallies[i];
    const bool unmeasured = t.measured == 0 && t.attempts < group_retries;
    if (i == 0) {
      best_unmeasured = unmeasured;
      continue;
    }
    if (unmeasured != best_unmeasured) {
      if (unmeasured) {
        best = i;
        best_unmeasured = true;
      }
      continue;
    }
    if (t.attempts < tallies[best].attempts) best = i;
  }
  return best;
}

// Whether a scope's next call should be profiled at once, whatever the every-k rule says:
// its group came back without a value and is to be tried again.
[[nodiscard]] inline bool retry_at_once(const group_tally& t) noexcept {
  return t.measured == 0 && t.attempts < group_retries;
}

// The kernels the next call's image holds after a call filled an image of `current`
// (doubling, at most `limit`). Equal to `current` when the limit is reached: the call's
// figures are then kept, marked as resting on part of its kernels.
[[nodiscard]] inline std::size_t grown_kernel_capacity(std::size_t current, std::size_t limit) noexcept {
  if (current >= limit) return current;
  const std::size_t doubled = current > limit / 2 ? limit : 2 * current;
  return doubled < 1 ? 1 : doubled;
}

}  // namespace detail
}  // namespace kscope
