// kscope/scope/detail/counter_hook.hpp — where a scope asks whether this call is one that
// the per-scope hardware counters profile (session::enable_counters, which installs the
// hook from counters/scope_counters.hpp). The scope layer cannot include CUPTI, so the hook
// is two function pointers behind one atomic: with counters off a scope pays one relaxed
// load at open and one branch at close.
#pragma once

#include "../node_id.hpp"

#include <atomic>
#include <cstdint>

namespace kscope {
namespace detail {

struct counter_hook {
  // At a scope's open, on its thread: true when this call is profiled (the hook began a
  // counter pass that the matching close() ends).
  bool (*open)(node_id node) noexcept;
  // At the close of a call open() said true for, on the same thread.
  void (*close)(node_id node) noexcept;
};

inline std::atomic<const counter_hook*> active_counter_hook{nullptr};

// What a scope opened inside a profiled call holds as its hook: nothing to begin or end
// (the enclosing call's pass covers it), but its record is flagged all the same. One
// pointer thus says both "profiled" and how to close, so a scope stays one member lighter.
inline bool no_pass_to_open(node_id) noexcept { return false; }
inline void no_pass_to_close(node_id) noexcept {}
inline constexpr counter_hook inside_profiled_call{&no_pass_to_open, &no_pass_to_close};

// Scopes open on this thread inside a profiled call: their times include the replay, so
// they are flagged like the profiled call itself. Trivial, so no thread-exit cost.
inline thread_local std::uint32_t profiled_depth = 0;

// The event slot a profiled call's record carries: the recorder counts the call as
// profiled and keeps its time out of every statistic (it includes kernel replay).
inline constexpr std::uint32_t profiled_call_slot = 0xfffffffeu;

}  // namespace detail
}  // namespace kscope
