// kscope/scope/recorder_snapshot.hpp — reading the recorder: a consistent copy of the tree and
// its samples, the trace ring, waiting for GPU events, and reset.
//
//   #include <kscope/scope/recorder_snapshot.hpp>
//   auto& rec = kscope::recorder::global();
//   rec.settle_gpu();                                  // optional: GPU times of closed scopes
//   const kscope::recorder_snapshot data = rec.snapshot();   // short holds of the lock
//   summarize(data);                                   // no lock held: scopes never wait
//
// Kept apart from recorder.hpp because only readers need it (session.hpp includes it):
// copying the tree instantiates more of the standard library than every instrumented
// file should pay for.
#pragma once

#include "detail/nvtx.hpp"
#include "recorder.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>
#endif

namespace kscope {

// A consistent copy of the recorder's data (recorder::snapshot(): counts and totals from
// one moment, sample values copied in short steps after it).
struct recorder_snapshot {
  std::vector<recorded_node> nodes;  // index = node_id; nodes[root_node] is the root
  std::vector<std::string> warnings;
  std::size_t sample_cap = 0;
  std::uint64_t gpu_timing_skipped = 0;  // stream scopes that got no event pair
  std::uint64_t gpu_event_errors = 0;    // GPU timings lost to CUDA event errors
  std::size_t trace_capacity = 0;
  std::uint64_t trace_overwritten = 0;   // host intervals pushed out of the trace ring
};

// What the recorder gathered since the previous window (recorder::take_window()): a
// recorder_snapshot whose counts, totals, samples and tag counts are the window's, on the
// run's call-path tree (names, parents, children), so the session summarizes it as it does
// a whole run. Its times are on the recorder's tick clock, as every record's.
//
//   const kscope::recorder_window w = kscope::recorder::global().take_window();
//   for (const kscope::recorded_node& n : w.data.nodes) use(n.name, n.calls);  // this window's calls
struct recorder_window {
  recorder_snapshot data;        // sample_cap: the window's; gpu_timing_skipped, gpu_event_errors: in the window
  std::int64_t since_ticks = 0;  // the previous window's end (or the recorder's start, or reset())
  std::int64_t until_ticks = 0;  // when this window's records were drained
  std::uint64_t sequence = 0;    // 1 for the first window the recorder gave
};

// The trace ring, oldest first, with the node names it refers to (recorder::trace_snapshot()).
struct recorder_trace {
  std::vector<std::string> names;  // index = node_id
  std::vector<recorded_interval> intervals;
  std::uint64_t overwritten = 0;
};

// ---- recorder's readers -----------------------------------------------------------------

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void recorder::settle_gpu() noexcept {
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

// The copy is taken in steps so that no scope ever waits long for the lock (a scope
// takes it only when its thread's ring is full, or for a name it has not seen): one
// short hold copies every node's counts, totals and extremes, consistently with each
// other; then the names, tags and sample values are copied a bounded amount per hold.
// Values are held in arrival order until a series saturates, so copying the first
// `count` values read in the first hold gives exactly what that hold saw; a saturated
// series may show a few slots replaced since, still a uniform sample.
KSCOPE_DECL recorder_snapshot recorder::snapshot() {
  recorder_snapshot out;
  std::vector<std::size_t> host_held, gpu_held;
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drain_all_locked();
    resolve_gpu_locked();
    generation = generation_;
    copy_counts_locked(out, host_held, gpu_held);
  }
  // NVTX settings that could not be used (KSCOPE_NVTX_DOMAIN, kscope::set_nvtx_domain).
  for (std::string& line : detail::nvtx_warnings()) out.warnings.push_back(std::move(line));
  copy_values_in_steps(out, generation, host_held, gpu_held, /*with_tags=*/true);
  return out;
}

KSCOPE_DECL void recorder::copy_counts_locked(recorder_snapshot& out, std::vector<std::size_t>& host_held,
                                              std::vector<std::size_t>& gpu_held) {
  const std::size_t node_count = nodes_.size();
  out.nodes.reserve(node_count);
  host_held.reserve(node_count);
  gpu_held.reserve(node_count);
  std::size_t budget_limited = 0;
  for (const recorded_node& n : nodes_) {
    // No allocation per node here: an empty name fits the string's own buffer.
    out.nodes.emplace_back(n.parent, std::string(), n.depth, n.cross_thread, 1);
    recorded_node& copy = out.nodes.back();
    copy.calls = n.calls;
    copy.profiled_calls = n.profiled_calls;
    copy.host_total_ticks = n.host_total_ticks;
    copy.host_ticks.copy_counts_of(n.host_ticks);
    copy.gpu_ns.copy_counts_of(n.gpu_ns);
    copy.gpu_total_ns = n.gpu_total_ns;
    copy.flops = n.flops;
    copy.bytes = n.bytes;
    copy.work_calls = n.work_calls;
    host_held.push_back(n.host_ticks.samples().size());
    gpu_held.push_back(n.gpu_ns.samples().size());
    budget_limited += budget_limited_series(n, sample_cap_);
  }
  add_copy_warnings_locked(out.warnings, budget_limited, /*window=*/false);
  out.sample_cap = sample_cap_;
  out.gpu_timing_skipped = gpu_timing_skipped_.load(std::memory_order_relaxed);
  out.gpu_event_errors = gpu_event_errors_;
  out.trace_capacity = trace_capacity_;
  out.trace_overwritten = trace_overwritten_;
}

KSCOPE_DECL void recorder::copy_values_in_steps(recorder_snapshot& out, std::uint64_t generation,
                                                const std::vector<std::size_t>& host_held,
                                                const std::vector<std::size_t>& gpu_held, bool with_tags) {
  const std::size_t node_count = out.nodes.size();
  // About half a megabyte of values per hold: tens of microseconds.
  constexpr std::size_t values_per_hold = std::size_t{1} << 16;
  constexpr std::size_t cost_of_a_node = 64;  // name, children and tags, in value-copies
  for (std::size_t i = 0; i < node_count;) {
    let_scopes_in();
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation_ != generation) {  // reset() ran in between: those values are gone
      out.warnings.push_back("reset() ran while this report was being taken: some scopes show counts without samples");
      break;
    }
    for (std::size_t copied = 0; i < node_count && copied < values_per_hold; ++i) {
      const recorded_node& live = nodes_[i];
      recorded_node& copy = out.nodes[i];
      copy_shape(live, copy, node_count);
      if (with_tags) copy.tags = live.tags;
      copy.host_ticks.copy_values_of(live.host_ticks, host_held[i]);
      copy.gpu_ns.copy_values_of(live.gpu_ns, gpu_held[i]);
      copied += host_held[i] + gpu_held[i] + cost_of_a_node;
    }
  }
}

// One short hold drains the rings and moves the window figures of every node that closed
// in the window out (pointer moves: the series' buffers go with them; fresh empty series
// stay, whose buffers grow in the drain as the next window fills them), so the window is
// cut at one moment and no record is in two windows or none. The names and children are
// then copied in steps, as snapshot() copies them: nodes are never removed and their names
// never change, so neither a new node nor reset() in between can make them disagree with
// the figures.
//
// Until the first take the recorder keeps no window figures at all (a program that never
// asks for a window pays nothing for them): the first window is the run so far, since the
// recorder started or was reset, and is copied as snapshot() copies the run, with the
// run's samples; from that hold on the drain keeps the window figures.
KSCOPE_DECL recorder_window recorder::take_window() {
  recorder_window out;
  std::size_t node_count = 0;
  bool whole_run = false;
  std::vector<std::size_t> host_held, gpu_held;
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drain_all_locked();
    resolve_gpu_locked();
    out.until_ticks = detail::ticks();
    out.since_ticks = window_since_ticks_;
    node_count = nodes_.size();
    if (!windows_on_) {
      whole_run = true;
      generation = generation_;
      copy_counts_locked(out.data, host_held, gpu_held);
      // The tag counts so far are the run's, cut in this hold like every other figure (a
      // tag given during the copy's later steps belongs to the next window).
      for (std::size_t id = 0; id < node_count; ++id) {
        if (nodes_[id].tags.empty()) continue;
        out.data.nodes[id].tags = nodes_[id].tags;
        for (recorded_tag& t : nodes_[id].tags) t.window_count = 0;
      }
      for (recorded_window_values& w : window_) w = recorded_window_values(window_sample_cap_);
      windows_on_ = true;
    } else {
      out.data.nodes.reserve(node_count);
      std::size_t budget_limited = 0;
      for (std::size_t id = 0; id < node_count; ++id) {
        recorded_node& n = nodes_[id];
        out.data.nodes.emplace_back(n.parent, std::string(), n.depth, n.cross_thread, 1);
        recorded_window_values& w = window_[id];
        if (!w.closed_any()) {
          // A new cap applies to every node from the next window on (an empty series holds no buffer).
          if (w.untouched() && w.host_ticks.capacity() != window_sample_cap_)
            w = recorded_window_values(window_sample_cap_);
          continue;
        }
        recorded_node& copy = out.data.nodes.back();
        // A node's tags are few; the window's counts must be cut in this hold. First: it is
        // the one step here that allocates, and a failure must leave the node's window whole.
        // Only the values given in this window: the node keeps every value of the run, most
        // with no instance since the last window.
        if (w.tagged) {
          copy.tags.reserve(n.tags.size());
          for (const recorded_tag& t : n.tags)
            if (t.window_count > 0) copy.tags.push_back(recorded_tag{t.key, t.value, t.window_count, t.window_count});
          for (recorded_tag& t : n.tags) t.window_count = 0;
        }
        copy.calls = w.calls;
        copy.profiled_calls = w.profiled_calls;
        copy.host_total_ticks = w.host_total_ticks;
        copy.host_ticks = std::move(w.host_ticks);
        copy.gpu_ns = std::move(w.gpu_ns);
        copy.gpu_total_ns = w.gpu_total_ns;
        copy.flops = w.flops;
        copy.bytes = w.bytes;
        copy.work_calls = w.work_calls;
        budget_limited += budget_limited_series(copy, window_sample_cap_);
        w = recorded_window_values(window_sample_cap_);
      }
      add_copy_warnings_locked(out.data.warnings, budget_limited, /*window=*/true);
      out.data.sample_cap = window_sample_cap_;
      out.data.trace_capacity = trace_capacity_;
      out.data.trace_overwritten = trace_overwritten_;
    }
    window_samples_held_ = 0;
    window_since_ticks_ = out.until_ticks;
    out.sequence = ++windows_taken_;
    const std::uint64_t skipped = gpu_timing_skipped_.load(std::memory_order_relaxed);
    out.data.gpu_timing_skipped = skipped - window_gpu_timing_skipped_base_;
    window_gpu_timing_skipped_base_ = skipped;
    out.data.gpu_event_errors = gpu_event_errors_ - window_gpu_event_errors_base_;
    window_gpu_event_errors_base_ = gpu_event_errors_;
  }
  if (whole_run) {
    copy_values_in_steps(out.data, generation, host_held, gpu_held, /*with_tags=*/false);
    return out;
  }
  constexpr std::size_t nodes_per_hold = 4096;  // names and children only: tens of microseconds
  for (std::size_t i = 0; i < node_count;) {
    let_scopes_in();
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::size_t end = std::min(node_count, i + nodes_per_hold); i < end; ++i)
      copy_shape(nodes_[i], out.data.nodes[i], node_count);
  }
  return out;
}

KSCOPE_DECL void recorder::add_copy_warnings_locked(std::vector<std::string>& warnings, std::size_t budget_limited,
                                                    bool window) const {
  // Derived, not stored, so that reset() cannot hide it while the node keeps counting.
  if (overflow_node_ != detail::node_cache::invalid)
    warnings.push_back("more than " + std::to_string(max_nodes) +
                       " call-path nodes: further scopes are counted under (overflow)");
  if (budget_limited == 0) return;
  warnings.push_back(std::to_string(budget_limited) +
                     (window ? " sample series of this window hold fewer than " : " sample series hold fewer than ") +
                     std::to_string(window ? window_sample_cap_ : sample_cap_) + " values: " +
                     (window ? "the windows' memory budget of " : "the recorder's memory budget of ") +
                     std::to_string(window ? window_sample_budget_ : sample_budget_) +
                     " values is spent (their statistics come from a smaller uniform sample; counts and totals are "
                     "exact; recorder::" +
                     (window ? "set_window_sample_budget" : "set_sample_budget") + " raises it)");
}

KSCOPE_DECL std::size_t recorder::budget_limited_series(const recorded_node& n, std::size_t cap) noexcept {
  return static_cast<std::size_t>(n.host_ticks.saturated() && n.host_ticks.capacity() < cap) +
         static_cast<std::size_t>(n.gpu_ns.saturated() && n.gpu_ns.capacity() < cap);
}

KSCOPE_DECL void recorder::copy_shape(const recorded_node& live, recorded_node& copy, std::size_t node_count) {
  copy.name = live.name;
  for (node_id c : live.children)
    if (c < node_count) copy.children.push_back(c);
}

KSCOPE_DECL void recorder::let_scopes_in() noexcept {
  // Bounded in time, not in rounds: on a loaded machine one yield can cost a scheduler
  // slice, and scopes that keep coming must not starve the report either.
  if (scope_waiters_.load(std::memory_order_acquire) <= 0) return;
  const std::int64_t give_up = detail::now_ns() + 200'000;  // 200 us per step at most
  while (scope_waiters_.load(std::memory_order_acquire) > 0 && detail::now_ns() < give_up) std::this_thread::yield();
}

KSCOPE_DECL recorder_trace recorder::trace_snapshot() {
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

KSCOPE_DECL void recorder::reset() noexcept {
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
      n.profiled_calls = 0;
      n.host_total_ticks = 0;
      n.host_ticks = recorded_series(sample_cap_);
      n.gpu_ns = recorded_series(sample_cap_);
      n.gpu_total_ns = 0;
      n.flops = n.bytes = 0;
      n.work_calls = 0;
      n.tags.clear();
    }
    for (recorded_window_values& w : window_) w = recorded_window_values(window_sample_cap_);
    // The next window starts now, with nothing from before the reset.
    window_samples_held_ = 0;
    window_since_ticks_ = detail::ticks();
    window_gpu_timing_skipped_base_ = 0;
    window_gpu_event_errors_base_ = 0;
    trace_ring_.clear();
    trace_next_ = 0;
    trace_overwritten_ = 0;
    gpu_event_errors_ = 0;
    samples_held_ = 0;
    ++generation_;
    gpu_timing_skipped_.store(0, std::memory_order_relaxed);
  } catch (...) {
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
