// kscope/scope/detail/thread_state.hpp — what each thread knows about its open scopes.
//
// A scope remembers the node that was current when it opened and restores it when it
// closes, so the per-thread "stack" is just one word: the node currently open. That
// word is what the CUPTI launch callback reads to attribute a kernel to its scope: it
// runs on the launching thread, inside the launch call, so it sees exactly the scope
// that was open at launch time (attribution by correlation, never by time overlap).
#pragma once

#include "../node_id.hpp"  // node_id, root_node: users of this header name them

#include <atomic>
#include <cstdint>

namespace kscope {
namespace detail {

// Trivially destructible on purpose: it stays usable for the whole life of its thread,
// also in destructors that run while the thread exits (thread_local objects, a pthread key's
// destructor) and, on the main thread, in static destructors and atexit handlers. What a
// thread owns on the heap (its record ring and name cache, recorder.hpp) is reached only
// through the pointers here, which the thread's exit clears before freeing it: a scope
// that runs after that finds `exited` set and takes the recorder's locked path.
struct thread_state {
  node_id current = root_node;  // innermost scope open on this thread
  // The thread's heap state (recorder.hpp's detail::thread_resources: its record ring and
  // its (parent, name) -> node cache), and the ring alone, which a closing scope reaches
  // without a cast. Null until the first scope, and after the thread's exit.
  void* resources = nullptr;
  void* scope_log = nullptr;
  std::uint32_t thread_index = next_thread_index();  // small dense id for traces
  // Launches the activity collector's callback saw on this thread (wraps around): the
  // windows of steps find the program's step scope by it (activity/collector.hpp).
  std::uint32_t launches_seen = 0;
  bool exited = false;  // the heap state was freed: record through the locked path

  static std::uint32_t next_thread_index() noexcept {
    static std::atomic<std::uint32_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed);
  }
};

inline thread_state& this_thread_state() noexcept {
  thread_local thread_state state;
  return state;
}

// The scope node open on the calling thread (root_node when none).
inline node_id current_node() noexcept { return this_thread_state().current; }

}  // namespace detail
}  // namespace kscope
