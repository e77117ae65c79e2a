// kscope/scope/detail/thread_log.hpp — the fixed-size record a closing scope writes, and the
// per-thread ring it goes to.
//
// The ring is why a scope's exit is cheap: one store of a 40-byte record into memory only
// its thread writes, no lock, no allocation. The recorder drains the rings under its own
// lock when a report is built or when a ring fills up.
//
//   detail::thread_log log(thread_index);
//   if (!log.try_push(record)) { /* full: the recorder drains, then the push retries */ }
//   log.drain([](const detail::scope_record& r) { /* under the recorder's lock */ });
#pragma once

#include "thread_state.hpp"

#include <atomic>
#include <cstdint>

namespace kscope {
namespace detail {

// A record's event slot when its scope had no stream (or got no event pair).
inline constexpr std::uint32_t no_events = 0xffffffffu;

struct scope_record {
  node_id node;
  std::uint32_t event_slot;   // no_events when the scope had no stream
  std::int64_t start_ticks;   // detail::ticks(); converted to ns at report time
  std::int64_t end_ticks;
  double flops;               // declared work; NaN when none was declared
  double bytes;
};

// Single producer (the owning thread), consumers serialized by the recorder's mutex.
class thread_log {
 public:
  static constexpr std::uint32_t capacity = 1024;  // power of two

  explicit thread_log(std::uint32_t thread_index) noexcept : thread_index_(thread_index) {}

  // Producer side. Returns false when the ring is full (the caller drains, then retries).
  bool try_push(const scope_record& r) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) >= capacity) return false;
    records_[head & (capacity - 1)] = r;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Consumer side (recorder mutex held): visits every published record, then frees them.
  template <class F>
  void drain(F&& visit) {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    for (std::uint64_t i = tail; i != head; ++i) visit(records_[i & (capacity - 1)]);
    tail_.store(head, std::memory_order_release);
  }

  std::uint32_t thread_index() const noexcept { return thread_index_; }

 private:
  std::atomic<std::uint64_t> head_{0};
  std::atomic<std::uint64_t> tail_{0};
  std::uint32_t thread_index_;
  scope_record records_[capacity];
};

}  // namespace detail
}  // namespace kscope
