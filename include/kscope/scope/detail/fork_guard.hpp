// kscope/scope/detail/fork_guard.hpp — keeps kscope's locks usable in a child process.
//
// fork() copies only the calling thread. A lock another thread held at that moment stays
// locked forever in the child, so the child's first scope (or report) would hang. Each of
// kscope's mutexes is registered here once; a pthread_atfork handler takes them all
// before the fork, in one fixed order, and releases them on both sides after it. The
// order is the order in which kscope's code nests them (a lower rank is taken first), so
// taking them all cannot deadlock with a thread that holds one and waits for the next.
//
//   detail::guard_across_fork(mutex_, detail::lock_rank::recorder);   // in a constructor
//
// In the child the data is the parent's at the fork (records of other threads that had
// not been drained are still in their rings and are drained there); CUDA itself cannot
// be used in a forked child, so its scopes keep host times only.
#pragma once

#include <mutex>

#if defined(__unix__) || defined(__APPLE__)
#  include <pthread.h>
#  define KSCOPE_DETAIL_FORK_GUARD 1
#else
#  define KSCOPE_DETAIL_FORK_GUARD 0
#endif

namespace kscope {
namespace detail {

// The nesting order of kscope's locks: a thread holding one only ever takes a higher one.
enum class lock_rank : int {
  session = 10,
  recorder = 20,
  event_pool = 30,
  collector_control = 40,
  collector_attribution = 50,
  sampled_metrics = 60,  // PM-sample attribution: taken inside the attribution's lock
  scope_counters = 70,   // per-scope counter aggregates
  cubin_store = 80,      // module cubins for warp-stall source lines: a leaf
};

#if KSCOPE_DETAIL_FORK_GUARD

class fork_lock_registry {
 public:
  static fork_lock_registry& global() noexcept {
    static fork_lock_registry* const instance = new fork_lock_registry();  // never destroyed
    return *instance;
  }

  // Registers `m` (kept sorted by rank). Locks that live as long as the process only:
  // every kscope singleton is never destroyed.
  void add(std::mutex& m, lock_rank rank) noexcept {
    std::lock_guard<std::mutex> lock(registry_mutex_);
    if (count_ == capacity) return;  // more singletons than kscope has: cannot happen
    int i = count_++;
    for (; i > 0 && ranks_[i - 1] > static_cast<int>(rank); --i) {
      locks_[i] = locks_[i - 1];
      ranks_[i] = ranks_[i - 1];
    }
    locks_[i] = &m;
    ranks_[i] = static_cast<int>(rank);
  }

 private:
  static constexpr int capacity = 16;

  fork_lock_registry() noexcept { pthread_atfork(&before_fork, &after_fork, &after_fork); }

  static void before_fork() noexcept {
    fork_lock_registry& r = global();
    r.registry_mutex_.lock();
    for (int i = 0; i < r.count_; ++i) r.locks_[i]->lock();
  }
  // The same in the parent and in the child: the forking thread holds every lock.
  static void after_fork() noexcept {
    fork_lock_registry& r = global();
    for (int i = r.count_; i-- > 0;) r.locks_[i]->unlock();
    r.registry_mutex_.unlock();
  }

  std::mutex registry_mutex_;
  std::mutex* locks_[capacity] = {};
  int ranks_[capacity] = {};
  int count_ = 0;
};

inline void guard_across_fork(std::mutex& m, lock_rank rank) noexcept { fork_lock_registry::global().add(m, rank); }

#else

inline void guard_across_fork(std::mutex&, lock_rank) noexcept {}  // no fork() here

#endif

}  // namespace detail
}  // namespace kscope
