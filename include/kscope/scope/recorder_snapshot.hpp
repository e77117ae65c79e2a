// kscope/scope/recorder_snapshot.hpp — reading the recorder: a consistent copy of the tree and
// its samples, the trace ring, waiting for GPU events, and reset.
//
//   #include <kscope/scope/recorder_snapshot.hpp>
//   auto& rec = kscope::recorder::global();
//   rec.settle_gpu();                                  // optional: GPU times of closed scopes
//   const kscope::recorder_snapshot data = rec.snapshot();   // under the recorder's lock
//   summarize(data);                                   // no lock held: scopes never wait
//
// Kept apart from recorder.hpp because only readers need it (session.hpp includes it):
// copying the tree instantiates more of the standard library than every instrumented
// file should pay for.
#pragma once

#include "recorder.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>
#endif

namespace kscope {

// A consistent copy of the recorder's data, taken under its lock (recorder::snapshot()).
struct recorder_snapshot {
  std::vector<recorded_node> nodes;  // index = node_id; nodes[root_node] is the root
  std::vector<std::string> warnings;
  std::size_t sample_cap = 0;
  std::uint64_t gpu_timing_skipped = 0;  // stream scopes that got no event pair
  std::uint64_t gpu_event_errors = 0;    // GPU timings lost to CUDA event errors
  std::size_t trace_capacity = 0;
  std::uint64_t trace_overwritten = 0;   // host intervals pushed out of the trace ring
};

// The trace ring, oldest first, with the node names it refers to (recorder::trace_snapshot()).
struct recorder_trace {
  std::vector<std::string> names;  // index = node_id
  std::vector<recorded_interval> intervals;
  std::uint64_t overwritten = 0;
};

// ---- recorder's readers -----------------------------------------------------------------

inline void recorder::settle_gpu() noexcept {
#if KSCOPE_HAS_CUDA
  try {
    std::vector<cudaEvent_t> in_flight;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      drain_all_locked();
      resolve_gpu_locked();
      std::vector<std::uint32_t> slots;
      slots.reserve(pending_.size());
      for (const pending_gpu& p : pending_) slots.push_back(p.slot);
      std::vector<detail::event_pair> pairs(slots.size());
      events_.pairs_of(slots, pairs);
      in_flight.reserve(pairs.size());
      for (const detail::event_pair& pair : pairs) in_flight.push_back(pair.end);
    }
    // Waiting on an event never reads it, so a pair freed and re-recorded meanwhile (by a
    // ring that filled up on another thread) only makes this wait a little longer.
    for (cudaEvent_t end : in_flight) {
      const cudaError_t before = cudaPeekAtLastError();
      if (cudaEventSynchronize(end) != cudaSuccess && before == cudaSuccess) cudaGetLastError();
    }
  } catch (...) {
  }
#endif
}

inline recorder_snapshot recorder::snapshot() {
  recorder_snapshot out;
  std::lock_guard<std::mutex> lock(mutex_);
  drain_all_locked();
  resolve_gpu_locked();
  out.nodes = nodes_;
  // Derived, not stored, so that reset() cannot hide it while the node keeps counting.
  if (overflow_node_ != detail::node_cache::invalid)
    out.warnings.push_back("more than " + std::to_string(max_nodes) +
                           " call-path nodes: further scopes are counted under (overflow)");
  out.sample_cap = sample_cap_;
  out.gpu_timing_skipped = gpu_timing_skipped_.load(std::memory_order_relaxed);
  out.gpu_event_errors = gpu_event_errors_;
  out.trace_capacity = trace_capacity_;
  out.trace_overwritten = trace_overwritten_;
  return out;
}

inline recorder_trace recorder::trace_snapshot() {
  recorder_trace out;
  std::lock_guard<std::mutex> lock(mutex_);
  drain_all_locked();
  out.names.reserve(nodes_.size());
  for (const recorded_node& n : nodes_) out.names.push_back(n.name);
  const std::size_t n = trace_ring_.size();
  const std::size_t first = n < trace_capacity_ ? 0 : trace_next_;  // oldest first
  out.intervals.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.intervals.push_back(trace_ring_[(first + i) % n]);
  out.overwritten = trace_overwritten_;
  return out;
}

inline void recorder::reset() noexcept {
  settle_gpu();
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    drain_all_locked();
    resolve_gpu_locked();
    // Pairs still in flight belong to scopes that closed during this call: their host
    // time is being forgotten now, so their GPU time must not appear after it.
    for (pending_gpu& p : pending_) p.node = stale_node;
    for (recorded_node& n : nodes_) {
      n.calls = 0;
      n.host_total_ticks = 0;
      n.host_ticks = recorded_series(sample_cap_);
      n.gpu_ns = recorded_series(sample_cap_);
      n.gpu_total_ns = 0;
      n.flops = n.bytes = 0;
      n.work_calls = 0;
      n.tags.clear();
    }
    trace_ring_.clear();
    trace_next_ = 0;
    trace_overwritten_ = 0;
    gpu_event_errors_ = 0;
    gpu_timing_skipped_.store(0, std::memory_order_relaxed);
  } catch (...) {
  }
}

}  // namespace kscope
