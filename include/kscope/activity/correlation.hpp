// kscope/activity/correlation.hpp — which scope launched a GPU record: the launch table.
//
// Attribution is by correlation, never by time overlap. At launch time, on the launching
// thread, the CUPTI API callback stores correlation id -> (scope node open on that thread,
// thread index) here (record_launch_from_this_thread). The node is exact: the innermost
// scope, not its parents. When the kernel / memcpy / memset record arrives later (from a
// CUPTI buffer, possibly out of order), find_launch looks its correlation id up.
//
// Pure C++ (no CUDA, no CUPTI headers), lock-free and allocation-free after construction,
// so the launch hook stays a few nanoseconds.
#pragma once

#include "../core/config.hpp"
#include "../evidence/activity_records.hpp"
#include "../scope/detail/counter_hook.hpp"
#include "../scope/detail/thread_state.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace kscope {

// Who launched a record: the node open on the launching thread, and that thread's index.
struct launch_origin {
  node_id node = unscoped_node;
  std::uint32_t thread_index = unknown_thread;
};

// Lock-free, fixed-size map correlation id -> launch_origin, written on every launch.
//
// Direct-mapped: id i lives in the slot of i mod capacity (bits rotated, see slot_of).
// Writing is two release stores (no lock, no allocation, no hashing), so the launch hook
// stays tiny. Each of the two 64-bit words carries the id next to its payload, so a reader
// can never combine halves of two different launches. Lookups never consume an entry
// (CUDA-graph kernels all share one id). An entry lives until the id `capacity` later
// reuses its slot, i.e. until CUPTI has handed out `capacity` more correlation ids;
// records arrive within one or two activity buffers of their launch, far sooner than that
// with the default 2^18 slots. A record that arrives after its entry was replaced is
// reported as `evicted` (counted by gpu_attribution as unattributed_evicted), never
// attributed to the wrong node.
//
//   kscope::correlation_table table{1 << 16};
//   table.record_launch(cbdata->correlationId, kscope::detail::current_node(), thread);
//   auto hit = table.find_launch(kernel.correlation_id);  // hit.status == lookup_status::found
class correlation_table {
 public:
  enum class lookup_status : std::uint8_t {
    found,    // the launch was seen: origin is valid
    evicted,  // a later launch reused the slot: the mapping is lost
    unknown,  // never seen: the launch call was not hooked, or the id is 0 (no API call)
  };
  struct lookup_result {
    lookup_status status = lookup_status::unknown;
    launch_origin origin{};
  };

  explicit correlation_table(std::size_t capacity = std::size_t{1} << 18);

  correlation_table(const correlation_table&) = delete;
  correlation_table& operator=(const correlation_table&) = delete;

  // The launch-time hook. Safe from any number of threads at once; never blocks.
  void record_launch(std::uint32_t correlation_id, node_id node,
                     std::uint32_t thread_index) noexcept;

  // THE lookup of a GPU record's launch; kernels, copies and memsets all go through it.
  //
  // The rule: `correlation_id` is looked up first. Copies carry a second id, because CUPTI
  // reports the driver call (correlation_id) and the runtime call (runtime_correlation_id)
  // apart and either one may be the call that was hooked; when the first is not found,
  // the second is tried. The answer is `found` when either id is found (its launch_origin),
  // else `evicted` when either id's entry was overwritten by a newer launch, else
  // `unknown`. Id 0 (CUPTI's "no API call") is never found.
  //
  // The launch hook writes the entry at API entry, before the GPU can even start the work,
  // so a record whose launch is not found now never will be: the caller decides at once
  // (gpu_attribution puts it on unscoped_node and counts it unattributed).
  //
  //   auto hit = table.find_launch(copy.correlation_id, copy.runtime_correlation_id);
  //
  // Defined inline in both modes, as find and slot_of are: the attribution looks up every
  // record, and in the compiled mode (kscope::compiled, built with -fPIC) an ordinary
  // external function is never inlined, since another library might interpose it. Forced:
  // called, the 12-byte answer came back through the stack in pieces that the CPU cannot
  // forward to the caller's wider load, a stall on every record.
  [[nodiscard]] KSCOPE_FORCE_INLINE inline lookup_result find_launch(
      std::uint32_t correlation_id, std::uint32_t runtime_correlation_id = 0) const noexcept;

  // One id, no fallback: the primitive find_launch is built on.
  [[nodiscard]] KSCOPE_FORCE_INLINE inline lookup_result find(std::uint32_t correlation_id) const noexcept;

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept;

 private:
  struct alignas(16) slot {
    std::atomic<std::uint64_t> node_word{0};    // (correlation id << 32) | node
    std::atomic<std::uint64_t> thread_word{0};  // (correlation id << 32) | thread index
  };
  static std::uint64_t pack(std::uint32_t id, std::uint32_t payload) noexcept;
  // id mod capacity, with its bits rotated left by 2: ids that differ by less than
  // capacity / 4 never share a 64-byte line (4 slots), so threads launching at the same
  // time (CUPTI hands out neighbouring ids) do not write the same cache line.
  inline std::size_t slot_of(std::uint32_t id) const noexcept;
  static unsigned log2(std::size_t pow2) noexcept;
  static std::size_t round_up_pow2(std::size_t n) noexcept;

  std::size_t capacity_;
  std::size_t mask_;
  unsigned bits_;
  std::unique_ptr<slot[]> slots_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t correlation_table::memory_bytes() const noexcept { return capacity_ * sizeof(slot); }

KSCOPE_DECL std::uint64_t correlation_table::pack(std::uint32_t id, std::uint32_t payload) noexcept {
  return (static_cast<std::uint64_t>(id) << 32) | payload;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL correlation_table::correlation_table(std::size_t capacity) : capacity_(round_up_pow2(capacity)), mask_(capacity_ - 1), bits_(log2(capacity_)),
      slots_(new slot[capacity_]) {}

KSCOPE_DECL void correlation_table::record_launch(std::uint32_t correlation_id, node_id node,
                   std::uint32_t thread_index) noexcept {
  slot& s = slots_[slot_of(correlation_id)];
  s.node_word.store(pack(correlation_id, node), std::memory_order_release);
  s.thread_word.store(pack(correlation_id, thread_index), std::memory_order_release);
}

KSCOPE_DECL unsigned correlation_table::log2(std::size_t pow2) noexcept {
  unsigned bits = 0;
  while ((std::size_t{1} << bits) < pow2) ++bits;
  return bits;
}

KSCOPE_DECL std::size_t correlation_table::round_up_pow2(std::size_t n) noexcept {
  std::size_t p = 1024;  // a floor: tiny tables only make tests and benches lie
  while (p < n && p < (std::size_t{1} << 30)) p <<= 1;
  return p;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The lookups (declared inline above), visible in both modes.
inline auto correlation_table::find_launch(std::uint32_t correlation_id,
                                           std::uint32_t runtime_correlation_id) const noexcept -> lookup_result {
  lookup_result hit = find(correlation_id);
  if (hit.status == lookup_status::found || runtime_correlation_id == 0 ||
      runtime_correlation_id == correlation_id) {
    return hit;
  }
  const lookup_result second = find(runtime_correlation_id);
  if (second.status == lookup_status::found || hit.status == lookup_status::unknown) return second;
  return hit;  // evicted beats unknown: the launch was seen, its mapping is lost
}

inline auto correlation_table::find(std::uint32_t correlation_id) const noexcept -> lookup_result {
  lookup_result result;
  const slot& s = slots_[slot_of(correlation_id)];
  const std::uint64_t node_word = s.node_word.load(std::memory_order_acquire);
  const std::uint32_t stored_id = static_cast<std::uint32_t>(node_word >> 32);
  if (correlation_id == 0 || stored_id != correlation_id) {
    // Correlation ids grow monotonically (mod 2^32): a newer id in our slot means ours
    // was overwritten; an older one (or an empty slot) means ours has not been written.
    const bool newer = stored_id != 0 &&
       static_cast<std::int32_t>(stored_id - correlation_id) > 0;
    result.status = (correlation_id != 0 && newer) ? lookup_status::evicted
                                   : lookup_status::unknown;
    return result;
  }
  result.status = lookup_status::found;
  result.origin.node = static_cast<node_id>(node_word & 0xffffffffu);
  const std::uint64_t thread_word = s.thread_word.load(std::memory_order_acquire);
  if (static_cast<std::uint32_t>(thread_word >> 32) == correlation_id) {
    result.origin.thread_index = static_cast<std::uint32_t>(thread_word & 0xffffffffu);
  }
  return result;
}

inline std::size_t correlation_table::slot_of(std::uint32_t id) const noexcept {
  const std::size_t v = id & mask_;
  return ((v << 2) | (v >> (bits_ - 2))) & mask_;
}

// The launch-time hook as the CUPTI API callback calls it, on the launching thread: stores
// the node open on this thread. A runtime API launch also triggers the driver-API
// callback; when CUPTI gives the nested driver call the same correlation id, the second
// store is skipped (the per-thread "last id" check), and when it gives a different id
// both ids are stored, so kernel, memcpy and memset records find their node either way.
//
//   kscope::record_launch_from_this_thread(table, cbdata->correlationId);
KSCOPE_DECL void record_launch_from_this_thread(correlation_table& table,
                                           std::uint32_t correlation_id) noexcept;

// A CUDA-graph launch whose graph is never traced as one record, after
// record_launch_from_this_thread stored it: stored again with unreferenced_replay_bit
// (attribution.hpp counts its kernels as they come).
KSCOPE_DECL void mark_unreferenced_replay_from_this_thread(correlation_table& table,
                                                           std::uint32_t correlation_id) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
namespace detail {
// The thread word a launch from this thread stores: its index, marked when the launch ran
// inside a call the per-scope counters profile (its records are replayed work, kept out of
// the aggregates: attribution.hpp, profiled()).
inline std::uint32_t launch_thread_word(const thread_state& state) noexcept {
  return profiled_depth > 0 ? (state.thread_index | profiled_launch_bit) : state.thread_index;
}
}  // namespace detail

KSCOPE_DECL void mark_unreferenced_replay_from_this_thread(correlation_table& table,
                                                           std::uint32_t correlation_id) noexcept {
  const detail::thread_state& state = detail::this_thread_state();
  table.record_launch(correlation_id, state.current, detail::launch_thread_word(state) | unreferenced_replay_bit);
}

KSCOPE_DECL void record_launch_from_this_thread(correlation_table& table,
                                           std::uint32_t correlation_id) noexcept {
  struct last_store {
    const correlation_table* table;
    std::uint32_t correlation_id;
  };
  thread_local last_store last{nullptr, 0};
  if (last.correlation_id == correlation_id && last.table == &table) return;
  last = {&table, correlation_id};
  detail::thread_state& state = detail::this_thread_state();
  ++state.launches_seen;
  table.record_launch(correlation_id, state.current, detail::launch_thread_word(state));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
