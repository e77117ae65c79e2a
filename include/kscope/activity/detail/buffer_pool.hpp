// kscope/activity/detail/buffer_pool.hpp — CUPTI activity buffers allocated once, up front.
//
// CUPTI asks for a buffer whenever it needs room for records, from whatever thread is
// launching at that moment. Allocating there would put malloc (and page faults) inside the
// measured window, so the pool allocates and touches every buffer at start and afterwards
// only hands them out and takes them back. When all buffers are out, it hands out nothing:
// CUPTI then drops records and counts them (cuptiActivityGetNumDroppedRecords), which the
// report shows. Pure C++: no CUPTI types, so it is tested on the CPU.
//
//   detail::activity_buffer_pool pool;
//   pool.allocate(8 << 20, 8);           // 64 MiB cap
//   std::uint8_t* b = pool.acquire();    // nullptr when exhausted
//   pool.release(b);
#pragma once

#include "../../core/config.hpp"
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace kscope {
namespace detail {

class activity_buffer_pool {
 public:
  // CUPTI requires 8-byte aligned buffers; 64 keeps records off shared cache lines.
  static constexpr std::size_t alignment = 64;

  activity_buffer_pool() = default;
  activity_buffer_pool(const activity_buffer_pool&) = delete;
  activity_buffer_pool& operator=(const activity_buffer_pool&) = delete;

  // Allocates `count` buffers of `buffer_bytes` (rounded up to a multiple of 64) and
  // touches them. Returns false (and holds nothing) if the memory is not available or the
  // pool was already allocated.
  bool allocate(std::size_t buffer_bytes, std::size_t count) noexcept;

  // A free buffer, or nullptr when every buffer is out (counted in denied()).
  [[nodiscard]] std::uint8_t* acquire() noexcept;

  // Returns a buffer; pointers that are not ours (or not a buffer start) are ignored, so
  // a stray CUPTI callback cannot corrupt the free list.
  void release(std::uint8_t* buffer) noexcept;

  [[nodiscard]] bool owns(const std::uint8_t* buffer) const noexcept;

  // Every buffer free again; returns how many were still out. Only once nothing can hand
  // one back: after cuptiFinalize, CUPTI, which held them, is gone (cupti_options::pause_detach).
  std::size_t reclaim_all() noexcept;

  [[nodiscard]] std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }
  [[nodiscard]] std::size_t buffer_count() const noexcept { return count_; }
  [[nodiscard]] std::size_t capacity_bytes() const noexcept { return buffer_bytes_ * count_; }
  [[nodiscard]] std::size_t available() const noexcept;
  [[nodiscard]] std::uint64_t denied() const noexcept;

 private:
  struct aligned_delete {
    void operator()(std::uint8_t* p) const noexcept;
  };

  mutable std::mutex mutex_;
  std::unique_ptr<std::uint8_t[], aligned_delete> storage_;
  std::vector<std::uint8_t*> free_;
  std::size_t buffer_bytes_ = 0;
  std::size_t count_ = 0;
  std::atomic<std::uint64_t> denied_{0};
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::uint64_t activity_buffer_pool::denied() const noexcept { return denied_.load(std::memory_order_relaxed); }

KSCOPE_DECL void activity_buffer_pool::aligned_delete::operator()(std::uint8_t* p) const noexcept { ::operator delete[](p, std::align_val_t{alignment}); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool activity_buffer_pool::allocate(std::size_t buffer_bytes, std::size_t count) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (storage_ != nullptr || buffer_bytes == 0 || count == 0) return false;
  buffer_bytes = (buffer_bytes + alignment - 1) / alignment * alignment;
  if (count > (static_cast<std::size_t>(-1) / buffer_bytes)) return false;
  try {
    free_.reserve(count);
    storage_.reset(new (std::align_val_t{alignment}) std::uint8_t[buffer_bytes * count]);
  } catch (...) {
    free_.clear();
    free_.shrink_to_fit();
    return false;
  }
  // Touch every page now, so CUPTI's first writes do not fault in the measured window.
  std::memset(storage_.get(), 0, buffer_bytes * count);
  buffer_bytes_ = buffer_bytes;
  count_ = count;
  for (std::size_t i = count; i-- > 0;) free_.push_back(storage_.get() + i * buffer_bytes);
  return true;
}

KSCOPE_DECL std::uint8_t* activity_buffer_pool::acquire() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) {
    denied_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  std::uint8_t* b = free_.back();
  free_.pop_back();
  return b;
}

KSCOPE_DECL void activity_buffer_pool::release(std::uint8_t* buffer) noexcept {
  if (!owns(buffer)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // Already free (handed back twice, or taken back by reclaim_all): never listed twice, or
  // two holders would write one buffer. A few pointers to scan.
  if (std::find(free_.begin(), free_.end(), buffer) != free_.end()) return;
  if (free_.size() < count_) free_.push_back(buffer);  // capacity reserved: no allocation
}

KSCOPE_DECL bool activity_buffer_pool::owns(const std::uint8_t* buffer) const noexcept {
  const std::uint8_t* base = storage_.get();
  if (buffer == nullptr || base == nullptr || buffer_bytes_ == 0) return false;
  const auto offset = reinterpret_cast<std::uintptr_t>(buffer) - reinterpret_cast<std::uintptr_t>(base);
  return buffer >= base && offset < buffer_bytes_ * count_ && offset % buffer_bytes_ == 0;
}

KSCOPE_DECL std::size_t activity_buffer_pool::reclaim_all() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t out = count_ - free_.size();
  free_.clear();  // capacity stays: count_ pointers, as allocate() reserved
  for (std::size_t i = count_; i-- > 0;) free_.push_back(storage_.get() + i * buffer_bytes_);
  return out;
}

KSCOPE_DECL std::size_t activity_buffer_pool::available() const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
