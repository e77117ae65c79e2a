// kscope/scope/detail/counter_hook.hpp — where a scope asks whether this call is one that
// the per-scope hardware counters profile (session::enable_counters, which installs the
// hook from counters/scope_counters.hpp). The scope layer cannot include CUPTI, so the hook
// is two function pointers behind one atomic: with counters off a scope pays one relaxed
// load at open and one branch at close.
#pragma once

#include "../node_id.hpp"
#include "thread_state.hpp"

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

// A profiled step (scope_counter_options::whole_steps): the step's kernels run as one
// range-profiler session, one range per kernel, and each range goes to the scope that
// launched that kernel. CUPTI's ranges say nothing of scopes, so while the step's pass
// runs, the launch callback that is subscribed (the activity collector's, or the counter
// pass's own) notes each kernel launch here with the innermost scope open on the
// launching thread, in launch order, and the step's thread notes each scope opened inside
// the step. The counters then pair launch i with range i, but only when the counts agree
// and every launch came from the step's thread (counters/scope_counters.hpp). One log in
// the process (one pass at a time), never freed: a late callback may still write.
struct profiled_step_log {
  static constexpr std::uint32_t capacity = 1u << 16;  // launches, and opens, noted per step
  // Bit 63: a CUDA-graph launch (one call, many kernels: the pairing is off); bits 32-62:
  // the launching thread's index; bits 0-31: its innermost scope.
  static constexpr std::uint64_t graph_bit = std::uint64_t{1} << 63;
  // What a slot holds until its launch is noted: a slot taken by a callback that has not
  // written it yet when the step ends reads so, and the step is not paired.
  static constexpr std::uint64_t unwritten = ~std::uint64_t{0};
  std::atomic<std::uint64_t> launches[capacity];
  std::atomic<std::uint32_t> launch_count{0};  // may pass capacity: launches beyond it are counted only
  std::atomic<std::uint32_t> generation{0};    // a new one per pass (the launch depth's reset)
  node_id opens[capacity];                     // scopes opened inside the step, on its thread
  std::uint32_t open_count = 0;
};

// The log of the step being profiled, or null: one relaxed load in a launch callback.
inline std::atomic<profiled_step_log*> active_step_log{nullptr};

// A kernel launch (graph: a CUDA-graph launch) from this thread, while a step is profiled.
inline void note_profiled_step_launch(profiled_step_log& log, bool graph) noexcept {
  const thread_state& state = this_thread_state();
  const std::uint32_t i = log.launch_count.fetch_add(1, std::memory_order_relaxed);
  if (i >= profiled_step_log::capacity) return;
  const std::uint64_t thread = state.thread_index & 0x7fffffffu;  // (node ids stay far below 2^32 - 1: never `unwritten`)
  log.launches[i].store((graph ? profiled_step_log::graph_bit : 0) | (thread << 32) | state.current,
                        std::memory_order_relaxed);
}

// A profiled step whose ranges follow its scopes (scope_counter_options::ranges_per_scope):
// set while such a step runs, and called on the step's thread at each open and close of a
// scope inside the step with the scope innermost from then on, so that the step's current
// range is ended and the next one begun for that scope. Null otherwise: one relaxed load
// per nested open and close of a profiled step.
using step_range_switch_fn = void (*)(node_id innermost) noexcept;
inline std::atomic<step_range_switch_fn> step_range_switch{nullptr};

// A scope opened inside a profiled call, on that call's thread.
inline void note_profiled_step_open(node_id node) noexcept {
  profiled_step_log* log = active_step_log.load(std::memory_order_relaxed);
  if (log != nullptr && log->open_count < profiled_step_log::capacity) log->opens[log->open_count++] = node;
}

}  // namespace detail
}  // namespace kscope
