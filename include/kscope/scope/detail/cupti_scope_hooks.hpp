// kscope/scope/detail/cupti_scope_hooks.hpp — what a scope calls on open / close for CUPTI.
//
// Only the external-correlation design (cupti_options::design) needs the scope to tell
// CUPTI about it: it pushes an external correlation id (node + thread) on open and pops it
// on close. The default launch-callback design reads the thread's current node at launch
// time instead and needs nothing here. This header is tiny on purpose (no CUDA or CUPTI
// headers), so scope.hpp can include it; while the external design is off, each call is
// one atomic load and a branch.
//
//   kscope::detail::cupti_scope_enter(node);   // in the scope's constructor
//   kscope::detail::cupti_scope_exit();        // in its destructor
#pragma once

#include "thread_state.hpp"

#include <atomic>

namespace kscope {
namespace detail {

struct cupti_scope_hook_table {
  std::atomic<void (*)(node_id) noexcept> enter{nullptr};
  std::atomic<void (*)() noexcept> exit{nullptr};
};

// Trivially destructible contents: safe to use during static destruction.
inline cupti_scope_hook_table& cupti_scope_hooks() noexcept {
  static cupti_scope_hook_table table;
  return table;
}

inline void cupti_scope_enter(node_id node) noexcept {
  if (auto enter = cupti_scope_hooks().enter.load(std::memory_order_acquire)) enter(node);
}

inline void cupti_scope_exit() noexcept {
  if (auto exit_hook = cupti_scope_hooks().exit.load(std::memory_order_acquire)) exit_hook();
}

}  // namespace detail
}  // namespace kscope
