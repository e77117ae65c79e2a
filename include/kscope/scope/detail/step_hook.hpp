// kscope/scope/detail/step_hook.hpp — where a scope tells the activity collector that a
// step ended: the close of an outermost scope (one opened with no scope open on its thread)
// calls the hook the collector installed for tracing in windows of steps
// (cupti_options::trace_steps). The scope layer cannot include CUPTI, so the hook is a
// function pointer behind one atomic: a close pays a compare of its parent, and only an
// outermost close a relaxed load.
#pragma once

#include "../node_id.hpp"

#include <atomic>

namespace kscope {
namespace detail {

// Called on the closing thread, after the scope's record was taken and the thread's
// current scope set back to the root; never throws.
using outermost_close_hook_fn = void (*)(node_id closed) noexcept;
inline std::atomic<outermost_close_hook_fn> outermost_close_hook{nullptr};

}  // namespace detail
}  // namespace kscope
