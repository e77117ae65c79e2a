// kscope/scope/detail/event_pool.hpp — CUDA event pairs for stream scopes, created in chunks.
//
// Creating an event costs microseconds and may synchronize, so scopes never create
// one: they take a (start, end) pair from this pool and give it back once the recorder
// has read the elapsed time. The pool grows by whole chunks (a scope that finds it empty
// pays for one chunk, not one event), up to a hard cap; at the cap a scope goes without
// GPU timing and the recorder counts it. Pairs are kept per device, because an event
// can only be recorded on a stream of the device it was created on.
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/cuda_start_hook.hpp"
#include "../../core/detail/fork_guard.hpp"

#if KSCOPE_HAS_CUDA

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

namespace kscope {
namespace detail {

struct event_pair {
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
};

// A slot names one pair: (device << 24) | index, so one 32-bit word travels in records.
inline constexpr std::uint32_t no_event_slot = 0xffffffffu;

class event_pool {
 public:
  static constexpr int max_devices = 64;
  static constexpr std::uint32_t chunk_pairs = 64;
  static constexpr std::uint32_t default_cap_pairs = 1u << 16;  // 65 536 scopes in flight

  event_pool() = default;
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;
  // Frees the arrays but not the events: the recorder's pool lives as long as the process,
  // and a CUDA call from a destructor at exit may fail or hang.
  ~event_pool() {
    for (per_device& d : devices_)
      for (event_pair* chunk : d.chunks) delete[] chunk;
  }

  // Takes a free pair on `device`; returns false (and no pair) at the cap or on a CUDA
  // error. Never synchronizes: growing creates events, which does not wait on the GPU.
  bool acquire(int device, std::uint32_t& slot, event_pair& pair) noexcept {
    if (device < 0 || device >= max_devices) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    per_device& d = devices_[static_cast<std::size_t>(device)];
    if (d.free.empty() && !grow(device, d)) return false;
    const std::uint32_t index = d.free.back();
    d.free.pop_back();
    slot = (static_cast<std::uint32_t>(device) << 24) | index;
    pair = d.pair_at(index);
    return true;
  }

  // Looks up a pair previously acquired (for resolution at report time).
  event_pair pair_of(std::uint32_t slot) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    per_device& d = devices_[slot >> 24];
    return d.pair_at(slot & 0xffffffu);
  }

  // Batch forms for the recorder's resolution pass: one lock for many pairs.
  template <class Slots, class Pairs>
  void pairs_of(const Slots& slots, Pairs& pairs) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < slots.size(); ++i) pairs[i] = devices_[slots[i] >> 24].pair_at(slots[i] & 0xffffffu);
  }
  template <class Slots>
  void release_all(const Slots& slots) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::uint32_t slot : slots) devices_[slot >> 24].free.push_back(slot & 0xffffffu);
  }

  void release(std::uint32_t slot) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    per_device& d = devices_[slot >> 24];
    d.free.push_back(slot & 0xffffffu);
  }

  // Registers the pool's lock with the fork guard (fork_guard.hpp); the recorder's pool
  // lives as long as the process.
  void guard_across_fork() noexcept;

  void set_cap_pairs(std::uint32_t cap) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    cap_pairs_ = cap < chunk_pairs ? chunk_pairs : cap;
  }

  std::uint32_t created_pairs() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    std::uint32_t total = 0;
    for (const per_device& d : devices_) total += d.created;
    return total;
  }

 private:
  // Chunks are plain arrays of chunk_pairs pairs: the pool is in the header every
  // instrumented file includes, and std::unique_ptr<std::array> costs that file
  // measurably more to compile.
  struct per_device {
    std::vector<event_pair*> chunks;
    std::vector<std::uint32_t> free;
    std::uint32_t created = 0;
    event_pair pair_at(std::uint32_t index) const noexcept { return chunks[index / chunk_pairs][index % chunk_pairs]; }
  };

  bool grow(int device, per_device& d) noexcept;

  std::mutex mutex_;
  per_device devices_[max_devices];
  std::uint32_t cap_pairs_ = default_cap_pairs;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void event_pool::guard_across_fork() noexcept { detail::guard_across_fork(mutex_, lock_rank::event_pool); }

KSCOPE_DECL bool event_pool::grow(int device, per_device& d) noexcept {
  if (d.created + chunk_pairs > cap_pairs_) return false;
  // Memory first, so that nothing can fail once the events exist.
  event_pair* chunk = new (std::nothrow) event_pair[chunk_pairs];
  if (chunk == nullptr) return false;
  try {
    d.chunks.reserve(d.chunks.size() + 1);
    d.free.reserve(d.free.size() + chunk_pairs);
  } catch (...) {
    delete[] chunk;
    return false;
  }
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || (previous != device && cudaSetDevice(device) != cudaSuccess)) {
    delete[] chunk;
    return false;
  }
  bool ok = true;
  for (std::uint32_t made = 0; made < chunk_pairs; ++made) {
    event_pair& p = chunk[made];
    if (cudaEventCreateWithFlags(&p.start, cudaEventDefault) != cudaSuccess ||
        cudaEventCreateWithFlags(&p.end, cudaEventDefault) != cudaSuccess) {
      ok = false;
      break;
    }
  }
  if (ok) {
    for (std::uint32_t i = 0; i < chunk_pairs; ++i) d.free.push_back(d.created + chunk_pairs - 1 - i);
    d.chunks.push_back(chunk);  // cannot throw: reserved above
    d.created += chunk_pairs;
    // The device's first events: the runtime is up (core/detail/cuda_start_hook.hpp).
    if (d.created == chunk_pairs) notify_cuda_started();
  } else {
    for (std::uint32_t i = 0; i < chunk_pairs; ++i) {
      if (chunk[i].start) cudaEventDestroy(chunk[i].start);
      if (chunk[i].end) cudaEventDestroy(chunk[i].end);
    }
    delete[] chunk;
    cudaGetLastError();  // do not leave our failure for the host program to trip on
  }
  if (previous != device) cudaSetDevice(previous);
  return ok;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_CUDA
