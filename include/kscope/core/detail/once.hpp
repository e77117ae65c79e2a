// kscope/core/detail/once.hpp — process-wide objects built on first use that a fork()
// can never catch half-built.
//
// A function-local static is built under a guard that the C++ runtime holds while the
// constructor runs. A fork() at that moment gives a child whose first call waits forever
// for the thread that held it, which the child does not have (issue 31). kscope's own
// one-time initializations therefore use lazy_global: its state is constant-initialized
// (an atomic pointer and a mutex, no guard of its own), and its mutex, held while the
// object is built, is registered with the fork guard (fork_guard.hpp). A fork waits for
// an initialization in progress and starts none, so one with side effects (the CUDA
// runtime's first call, a dlopen) never runs because of a fork; the child sees either
// the finished object or nothing, with the mutex free.
//
// The first call that finds it built costs one acquire load, like a function-local
// static's guard check: no lock, no atomic read-modify-write.
//
//   recorder& recorder::global() noexcept {
//     static detail::lazy_global<recorder> instance{detail::lock_rank::init_recorder};  // no guard
//     return instance.get([] { return new recorder(); });   // never destroyed
//   }
//
// `make` returns a pointer it allocated (never freed: kscope's singletons outlive every
// static destructor). If it throws, nothing is stored and the next call tries again. It
// runs under the mutex, so it must take no kscope lock ranked before its own (see
// lock_rank).
#pragma once

#include "../config.hpp"
#include "fork_guard.hpp"

#include <atomic>
#include <mutex>

namespace kscope {
namespace detail {

// The flag form, for a value kept in a plain static next to it: the first call that finds
// it done reads the flag and the value, two independent loads (a lazy_global's pointer
// and the value behind it are two dependent ones), for values read on a hot path.
//   static nvtxDomainHandle_t created = nullptr;   // written once, before done()
//   static detail::fork_safe_once once{detail::lock_rank::init_code_loading};
//   if (!once.done()) once.call([] { created = nvtxDomainCreateA("kscope"); });
//   return created;
class fork_safe_once {
 public:
  constexpr explicit fork_safe_once(lock_rank rank) noexcept : mutex_(rank) {}
  fork_safe_once(const fork_safe_once&) = delete;
  fork_safe_once& operator=(const fork_safe_once&) = delete;

  [[nodiscard]] bool done() const noexcept { return done_.load(std::memory_order_acquire); }

  // Runs `init` unless a call of it has completed; if it throws, the next call tries again.
  template <class Init>
  void call(Init&& init) {
    if (KSCOPE_LIKELY(done())) return;
    run(init);
  }

 private:
  template <class Init>
  KSCOPE_NOINLINE void run(Init& init) {
    std::lock_guard<fork_guarded_mutex> lock(mutex_);
    if (done_.load(std::memory_order_relaxed)) return;
    init();
    done_.store(true, std::memory_order_release);
  }

  fork_guarded_mutex mutex_;
  std::atomic<bool> done_{false};
};

// The pointer form, for an object built on the heap and never destroyed (above).
template <class T>
class lazy_global {
 public:
  constexpr explicit lazy_global(lock_rank rank) noexcept : mutex_(rank) {}
  lazy_global(const lazy_global&) = delete;
  lazy_global& operator=(const lazy_global&) = delete;

  template <class Make>
  T& get(Make&& make) {
    T* const built = value_.load(std::memory_order_acquire);
    if (KSCOPE_LIKELY(built != nullptr)) return *built;
    return build(make);
  }

  // The object if it is built, else nullptr; never builds it.
  [[nodiscard]] T* get_if_built() const noexcept { return value_.load(std::memory_order_acquire); }

 private:
  template <class Make>
  KSCOPE_NOINLINE T& build(Make& make) {
    std::lock_guard<fork_guarded_mutex> lock(mutex_);
    T* built = value_.load(std::memory_order_relaxed);
    if (built == nullptr) {
      built = make();
      value_.store(built, std::memory_order_release);
    }
    return *built;
  }

  fork_guarded_mutex mutex_;
  std::atomic<T*> value_{nullptr};
};

}  // namespace detail
}  // namespace kscope
