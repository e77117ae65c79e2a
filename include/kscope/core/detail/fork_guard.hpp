// kscope/core/detail/fork_guard.hpp — keeps kscope's locks and one-time initializations
// usable in a child process.
//
// fork() copies only the calling thread. A lock another thread held at that moment stays
// locked forever in the child, and so does a one-time initialization another thread had
// begun (a function-local static's guard: the child's first call waits for a thread it
// does not have, issue 31). So every kscope mutex, and the mutex of every one-time
// initialization (once.hpp), is registered here; a pthread_atfork handler takes them all
// before the fork, in one fixed order, and releases them on both sides after it. Taking
// an initialization's mutex waits for an initialization in progress and starts none: a
// fork never triggers a CUDA initialization or a dlopen it did not ask for.
//
// The order is the order in which kscope's code nests them (a lower rank is taken first),
// so taking them all cannot deadlock with a thread that holds one and waits for the next.
//
//   detail::guard_across_fork(mutex_, detail::lock_rank::recorder);   // in a constructor
//   static detail::fork_guarded_mutex m{detail::lock_rank::kernel_library};  // registers itself
//
// The registry is constant-initialized (no guard of its own to be caught half-built) and
// lives in core/ so that every layer's singletons can use it. In the child the data is
// the parent's at the fork (records of other threads that had not been drained are still
// in their rings and are drained there); CUDA itself cannot be used in a forked child, so
// its scopes keep host times only.
#pragma once

#include "../config.hpp"

#include <atomic>
#include <mutex>

#if defined(__unix__) || defined(__APPLE__)
#  include <pthread.h>
#  include <sched.h>
#  include <unistd.h>
#  define KSCOPE_DETAIL_FORK_GUARD 1
#else
#  define KSCOPE_DETAIL_FORK_GUARD 0
#endif

namespace kscope {
namespace detail {

// The nesting order of kscope's locks: a thread holding one only ever takes a higher one.
// A one-time initialization's mutex is held while the object is built, so it is ranked by
// the same rule: after every lock a thread may hold when it first calls the accessor,
// before every lock the construction may take (directly, or in a CUPTI callback of a CUDA
// call it makes). Two of one rank never nest.
enum class lock_rank : int {
  session = 10,
  recorder = 20,
  event_pool = 30,
  collector_windows = 38,  // the window thread's wake-up: held with no other kscope lock
  collector_control = 40,
  cupti_detach = 45,  // cupti/detail/api.hpp: taken under the control lock, or alone by a feature
  collector_attribution = 50,
  sampled_metrics = 60,  // PM-sample attribution: taken inside the attribution's lock
  scope_counters = 70,   // per-scope counter aggregates
  // Initializations that run CUDA or load code: first called with at most the collector's
  // control lock held; a CUDA call may load a module, whose CUPTI callback takes the cubin
  // store's lock.
  init_bench_context = 72,  // gbench_context(): queries the device, through probe_gpu()
  init_gpu_probe = 74,      // probe_gpu(): the CUDA runtime's first call
  init_code_loading = 76,   // kscope's PTX (kernel library lock, clock probe), cuBLAS, NVTX tools
  cubin_store = 80,         // module cubins for warp-stall source lines: a leaf
  // The collector's per-replay graph decision (activity/graph_sampling.hpp) and its switch of
  // graph-level trace: leaves, taken one after the other in a graph launch's callback.
  graph_sampler = 84,
  graph_toggle = 86,
  step_windows = 88,  // the windows of steps' step-scope name (evidence/trace_windows.hpp): a leaf
  section_readers = 90,  // the report sections' readers (report/section.hpp): a leaf
  // Initializations that take no kscope lock and run no foreign code: last, so that a
  // thread holding any lock may make the first call. The recorder's uses tick_origin().
  init_recorder = 100,
  init = 110,  // every other initializer: uses no other one-time initialization
};

#if KSCOPE_DETAIL_FORK_GUARD

// Identifies the calling thread for as long as it lives (the address of a thread_local).
inline const void* this_thread_marker() noexcept {
  static thread_local char marker = 0;
  return &marker;
}

// Constant-initialized: a literal type with no destructor to run, so it exists before any
// constructor and after every destructor, and has no initialization of its own to race.
class fork_lock_registry {
 public:
  static constexpr int capacity = 64;

  [[nodiscard]] static fork_lock_registry& global() noexcept {
    static fork_lock_registry registry;  // constant-initialized: no guard
    return registry;
  }

  // Registers `m` (kept sorted by rank; a second registration of the same mutex is
  // ignored). `owner`, when given, says which thread holds `m` (fork_guarded_mutex), so a
  // fork made by that very thread inside its initialization (a driver starting a helper
  // process) does not wait for itself. `in_child` runs in the child while the locks are
  // still held. Locks that live as long as the process only: kscope's singletons are
  // never destroyed.
  void add(pthread_mutex_t* m, lock_rank rank, const std::atomic<const void*>* owner = nullptr,
           void (*in_child)(void*) = nullptr, void* context = nullptr) noexcept;

 private:
  struct entry {
    pthread_mutex_t* mutex = nullptr;
    const std::atomic<const void*>* owner = nullptr;
    int rank = 0;
    void (*in_child)(void*) = nullptr;
    void* context = nullptr;
    bool held = false;  // taken by the fork in progress
  };

  constexpr fork_lock_registry() noexcept = default;

  // pthread_atfork once per process, by the first registration. A fork that happens while
  // another thread installs the handlers leaves a child in which `installer_` names a
  // process that is not this one: the child installs them itself.
  void install_handlers() noexcept;

  // Takes every registered lock, in rank order, holding the registry's own lock only to
  // read the list and, at the end, to check that nothing was registered meanwhile (a
  // constructor that registers its locks may be running inside an initialization this
  // handler waits for). Then it holds that lock too, until after the fork, so that no new
  // lock or initialization can start in between.
  static void before_fork() noexcept;
  static void release_after_fork(fork_lock_registry& r) noexcept;
  static void after_fork_in_parent() noexcept { release_after_fork(global()); }
  // The forking thread holds every lock, so the child's state is consistent; threads that
  // were waiting for a lock do not exist here, which `in_child` tells their owner.
  static void after_fork_in_child() noexcept;

  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;  // guards count_ and entries_
  entry entries_[capacity] = {};
  int count_ = 0;
  std::atomic<bool> installed_{false};
  std::atomic<long> installer_{0};  // pid of the process whose thread installs the handlers
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void fork_lock_registry::add(pthread_mutex_t* m, lock_rank rank, const std::atomic<const void*>* owner,
         void (*in_child)(void*), void* context) noexcept {
  install_handlers();
  pthread_mutex_lock(&mutex_);
  bool known = false;
  for (int i = 0; i < count_ && !known; ++i) known = entries_[i].mutex == m;
  if (!known && count_ < capacity) {  // full cannot happen: kscope has fewer
    int i = count_++;
    for (; i > 0 && entries_[i - 1].rank > static_cast<int>(rank); --i) entries_[i] = entries_[i - 1];
    entries_[i] = entry{m, owner, static_cast<int>(rank), in_child, context, false};
  }
  pthread_mutex_unlock(&mutex_);
}

KSCOPE_DECL void fork_lock_registry::install_handlers() noexcept {
  if (installed_.load(std::memory_order_acquire)) return;
  const long self = static_cast<long>(getpid());
  long owner = installer_.load(std::memory_order_acquire);
  for (;;) {
    if (installed_.load(std::memory_order_acquire)) return;
    if (owner == self) {  // another thread of this process is installing them now
      sched_yield();
      owner = installer_.load(std::memory_order_acquire);
      continue;
    }
    if (installer_.compare_exchange_weak(owner, self, std::memory_order_acq_rel)) break;
  }
  if (pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child) == 0)
    installed_.store(true, std::memory_order_release);
  else
    installer_.store(0, std::memory_order_release);  // out of memory: the next registration tries again
}

KSCOPE_DECL void fork_lock_registry::before_fork() noexcept {
  fork_lock_registry& r = global();
  const void* const self = this_thread_marker();
  for (;;) {
    pthread_mutex_lock(&r.mutex_);
    const int count = r.count_;
    entry seen[capacity];
    for (int i = 0; i < count; ++i) seen[i] = r.entries_[i];
    pthread_mutex_unlock(&r.mutex_);
    for (int i = 0; i < count; ++i) {
      seen[i].held = !(seen[i].owner != nullptr && seen[i].owner->load(std::memory_order_acquire) == self);
      if (seen[i].held) pthread_mutex_lock(seen[i].mutex);
    }
    pthread_mutex_lock(&r.mutex_);
    if (r.count_ == count) {  // the same list: entries are only ever added
      for (int i = 0; i < count; ++i) r.entries_[i].held = seen[i].held;
      return;
    }
    pthread_mutex_unlock(&r.mutex_);
    for (int i = count; i-- > 0;)
      if (seen[i].held) pthread_mutex_unlock(seen[i].mutex);
  }
}

KSCOPE_DECL void fork_lock_registry::release_after_fork(fork_lock_registry& r) noexcept {
  for (int i = r.count_; i-- > 0;) {
    if (r.entries_[i].held) pthread_mutex_unlock(r.entries_[i].mutex);
    r.entries_[i].held = false;
  }
  pthread_mutex_unlock(&r.mutex_);
}

KSCOPE_DECL void fork_lock_registry::after_fork_in_child() noexcept {
  fork_lock_registry& r = global();
  r.installed_.store(true, std::memory_order_relaxed);
  for (int i = 0; i < r.count_; ++i)
    if (r.entries_[i].in_child != nullptr) r.entries_[i].in_child(r.entries_[i].context);
  release_after_fork(r);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Registers a std::mutex that lives as long as the process.
KSCOPE_DECL void guard_across_fork(std::mutex& m, lock_rank rank, void (*in_child)(void*) = nullptr,
                              void* context = nullptr) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void guard_across_fork(std::mutex& m, lock_rank rank, void (*in_child)(void*),
                              void* context) noexcept {
  fork_lock_registry::global().add(m.native_handle(), rank, nullptr, in_child, context);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A mutex usable as a function-local static or namespace-scope variable with no guard
// (constant-initialized, trivially destructible, never destroyed), registered with the
// fork guard before it is first locked, so a fork waits for whoever holds it.
//   static kscope::detail::fork_guarded_mutex m{kscope::detail::lock_rank::kernel_library};
//   std::lock_guard<kscope::detail::fork_guarded_mutex> lock(m);
class fork_guarded_mutex {
 public:
  constexpr explicit fork_guarded_mutex(lock_rank rank) noexcept : rank_(rank) {}
  fork_guarded_mutex(const fork_guarded_mutex&) = delete;
  fork_guarded_mutex& operator=(const fork_guarded_mutex&) = delete;

  void lock() noexcept {
    if (!registered_.load(std::memory_order_acquire)) {
      // Before the first lock: the fork guard then knows it whenever it can be held.
      fork_lock_registry::global().add(&mutex_, rank_, &owner_);
      registered_.store(true, std::memory_order_release);
    }
    pthread_mutex_lock(&mutex_);
    owner_.store(this_thread_marker(), std::memory_order_release);
  }
  void unlock() noexcept {
    owner_.store(nullptr, std::memory_order_release);
    pthread_mutex_unlock(&mutex_);
  }

 private:
  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  std::atomic<const void*> owner_{nullptr};
  std::atomic<bool> registered_{false};
  lock_rank rank_;
};

#else  // no fork() here: plain locks

inline void guard_across_fork(std::mutex&, lock_rank, void (*)(void*) = nullptr, void* = nullptr) noexcept {}

class fork_guarded_mutex {
 public:
  constexpr explicit fork_guarded_mutex(lock_rank) noexcept {}
  fork_guarded_mutex(const fork_guarded_mutex&) = delete;
  fork_guarded_mutex& operator=(const fork_guarded_mutex&) = delete;
  void lock() { mutex_.lock(); }
  void unlock() noexcept { mutex_.unlock(); }

 private:
  std::mutex mutex_;
};

#endif

}  // namespace detail
}  // namespace kscope
