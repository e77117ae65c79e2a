// kscope/cupti/attribution.hpp — GPU activity records attributed to the scope that launched them.
//
// Pure C++ (no CUDA, no CUPTI headers): the CUPTI collector (cupti.hpp) turns each
// CUpti_Activity into one of the plain records below and feeds them here; the CPU tests
// feed synthetic ones through the very same functions.
//
// How a record finds its scope (attribution by correlation, never by time overlap):
//   1. At launch time, on the launching thread, a CUPTI API callback (or, in the
//      external-correlation design, an EXTERNAL_CORRELATION record) stores
//      correlation id -> (scope node open on that thread, thread index) in a
//      correlation_table. The node is exact: the innermost scope, not its parents.
//   2. When the kernel / memcpy / memset record arrives (later, from a CUPTI buffer,
//      possibly out of order), its correlation id is looked up. Lookups never consume
//      the entry, so every kernel of a CUDA-graph launch (they all share the launch's
//      correlation id) is attributed, not only the first.
//   3. Records launched while no scope was open go to unscoped_node ("(unscoped)"). So do
//      records whose launch was never seen or whose entry was evicted; those are also
//      counted (attribution_counters::unattributed), so the report can say so.
//
// Per node: kernel count and time, GPU busy time (union of kernel intervals over all
// streams), idle time inside the node's GPU span, memcpy per direction, memset. Per kernel
// name: a top-kernels table like torch.profiler's key_averages().table().
//
// Everything here is bounded: the correlation table, the pending list, the intervals kept
// per node, the kernel-name table and the recent-event ring all have caps (see
// attribution_options and memory_bytes()).
#pragma once

#include "../core/config.hpp"
#include "../scope/detail/thread_state.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__has_include)
#  if __has_include(<cxxabi.h>)
#    include <cxxabi.h>
#    define KSCOPE_DETAIL_HAS_CXXABI 1
#  endif
#endif
#ifndef KSCOPE_DETAIL_HAS_CXXABI
#  define KSCOPE_DETAIL_HAS_CXXABI 0
#endif

namespace kscope {

// The node GPU work goes to when no scope was open on the launching thread (and when its
// launch could not be found). It is the root of the call-path tree; reports name it:
//
//   if (id == kscope::unscoped_node) label = kscope::unscoped_node_name;  // "(unscoped)"
inline constexpr node_id unscoped_node = detail::root_node;
inline constexpr const char* unscoped_node_name = "(unscoped)";

// Thread index stored when the launching thread is not known.
inline constexpr std::uint32_t unknown_thread = std::numeric_limits<std::uint32_t>::max();

// ---- records: kscope's own copies of the CUPTI records it uses -----------------------------

enum class activity_kind : std::uint8_t {
  kernel,
  memcpy,
  memset,
  external_correlation,
  other,  // a kind kscope does not use (API records, ...): counted, then ignored
};

// Direction of a memory copy, as CUPTI classifies it. Array variants are folded into
// `array`; peer-to-peer copies between devices are `p2p`.
enum class memcpy_kind : std::uint8_t { unknown, h2d, d2h, d2d, h2h, p2p, array };

// The four per-node copy buckets: p2p, h2h, array and unknown copies count as `other`, so
// d2d stays "on one device" (HBM bandwidth) and h2d / d2h stay "over the host link".
enum class copy_direction : std::uint8_t { h2d = 0, d2h = 1, d2d = 2, other = 3 };
inline constexpr std::size_t copy_direction_count = 4;

[[nodiscard]] constexpr copy_direction direction_of(memcpy_kind kind) noexcept {
  switch (kind) {
    case memcpy_kind::h2d: return copy_direction::h2d;
    case memcpy_kind::d2h: return copy_direction::d2h;
    case memcpy_kind::d2d: return copy_direction::d2d;
    default: return copy_direction::other;
  }
}

// "HtoD"-style label, as Nsight and torch.profiler print it.
//
//   std::string label = std::string("Memcpy ") + kscope::to_string(rec.kind);
[[nodiscard]] constexpr const char* to_string(memcpy_kind kind) noexcept {
  switch (kind) {
    case memcpy_kind::h2d: return "HtoD";
    case memcpy_kind::d2h: return "DtoH";
    case memcpy_kind::d2d: return "DtoD";
    case memcpy_kind::h2h: return "HtoH";
    case memcpy_kind::p2p: return "PtoP";
    case memcpy_kind::array: return "Array";
    default: return "Unknown";
  }
}

[[nodiscard]] constexpr const char* to_string(copy_direction d) noexcept {
  switch (d) {
    case copy_direction::h2d: return "h2d";
    case copy_direction::d2h: return "d2h";
    case copy_direction::d2d: return "d2d";
    default: return "other";
  }
}

// One kernel execution. Timestamps are kscope's clock (detail::now_ns(), steady_clock
// ns); 0 means "CUPTI could not time it" and such records are dropped and counted.
//
//   kscope::kernel_record k;
//   k.correlation_id = 42; k.start_ns = t0; k.end_ns = t0 + 1000; k.name = "_Z4axpyPfS_f";
//   attribution.add_kernel(k);
struct kernel_record {
  std::uint32_t correlation_id = 0;
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  const char* name = nullptr;  // mangled, owned by CUPTI: copied on first sight
  std::int32_t grid_x = 0, grid_y = 0, grid_z = 0;
  std::int32_t block_x = 0, block_y = 0, block_z = 0;
  std::uint32_t registers_per_thread = 0;
  std::int32_t static_shared_bytes = 0;
  std::int32_t dynamic_shared_bytes = 0;
  std::uint32_t graph_id = 0;       // 0: not launched through a CUDA graph
  std::uint64_t graph_node_id = 0;
};

// One memory copy. For copies CUPTI keeps the driver and the runtime correlation ids
// apart; the lookup tries correlation_id first, then runtime_correlation_id.
struct memcpy_record {
  std::uint32_t correlation_id = 0;
  std::uint32_t runtime_correlation_id = 0;
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  memcpy_kind kind = memcpy_kind::unknown;
  std::uint64_t bytes = 0;
  std::uint32_t graph_id = 0;
  std::uint64_t graph_node_id = 0;
};

// One memset.
struct memset_record {
  std::uint32_t correlation_id = 0;
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t bytes = 0;
  std::uint32_t graph_id = 0;
  std::uint64_t graph_node_id = 0;
};

// Ties a CUDA API call (correlation_id) to an id kscope pushed with
// cuptiActivityPushExternalCorrelationId: (thread index << 32) | node. Only the
// external-correlation design produces these.
struct external_correlation_record {
  std::uint32_t correlation_id = 0;
  std::uint64_t external_id = 0;
};

// Packs / unpacks the external correlation id kscope pushes for a scope.
[[nodiscard]] constexpr std::uint64_t pack_external_id(node_id node, std::uint32_t thread_index) noexcept {
  return (static_cast<std::uint64_t>(thread_index) << 32) | node;
}

// Whatever one CUpti_Activity became: `kind` says which member is meaningful.
//
//   kscope::activity_record r;
//   if (kscope::detail::parse_activity(cupti_record, r, 0)) attribution.add(r);
struct activity_record {
  activity_kind kind = activity_kind::other;
  kernel_record kernel;
  memcpy_record memcpy;
  memset_record memset;
  external_correlation_record external;
};

// ---- the correlation table: the launch-time hook writes, the buffer walk reads -------------

// Who launched a record: the node open on the launching thread, and that thread's index.
struct launch_origin {
  node_id node = unscoped_node;
  std::uint32_t thread_index = unknown_thread;
};

// Lock-free, fixed-size map correlation id -> launch_origin, written on every launch.
//
// Direct-mapped: id i lives in the slot of i mod capacity (bits rotated, see slot_of). Writing is two relaxed-cost atomic
// stores (no lock, no allocation, no hashing), so the launch hook stays tiny. Each of the
// two 64-bit words carries the id next to its payload, so a reader can never combine
// halves of two different launches. Lookups never consume an entry (CUDA-graph kernels all
// share one id). An entry lives until the id `capacity` later reuses its slot, i.e. until
// CUPTI has handed out `capacity` more correlation ids; records arrive within one or two
// activity buffers of their launch, far sooner than that with the default 2^18 slots. A
// record that arrives after its entry was replaced is reported as `evicted` (counted by
// gpu_attribution as unattributed_evicted), never attributed to the wrong node.
//
//   kscope::correlation_table table{1 << 16};
//   table.record_launch(cbdata->correlationId, kscope::detail::current_node(), thread);
//   auto hit = table.find(kernel.correlation_id);  // hit.status == lookup_status::found
class correlation_table {
 public:
  enum class lookup_status : std::uint8_t {
    found,    // the launch was seen: origin is valid
    evicted,  // a later launch reused the slot: the mapping is lost
    unknown,  // not seen (yet): the launch was not hooked, or its record came first
  };
  struct lookup_result {
    lookup_status status = lookup_status::unknown;
    launch_origin origin{};
  };

  explicit correlation_table(std::size_t capacity = std::size_t{1} << 18)
      : capacity_(round_up_pow2(capacity)), mask_(capacity_ - 1), bits_(log2(capacity_)),
        slots_(new slot[capacity_]) {}

  correlation_table(const correlation_table&) = delete;
  correlation_table& operator=(const correlation_table&) = delete;

  // The launch-time hook. Safe from any number of threads at once; never blocks.
  void record_launch(std::uint32_t correlation_id, node_id node,
                     std::uint32_t thread_index) noexcept {
    slot& s = slots_[slot_of(correlation_id)];
    s.node_word.store(pack(correlation_id, node), std::memory_order_release);
    s.thread_word.store(pack(correlation_id, thread_index), std::memory_order_release);
  }

  [[nodiscard]] lookup_result find(std::uint32_t correlation_id) const noexcept {
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

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept { return capacity_ * sizeof(slot); }

 private:
  struct alignas(16) slot {
    std::atomic<std::uint64_t> node_word{0};    // (correlation id << 32) | node
    std::atomic<std::uint64_t> thread_word{0};  // (correlation id << 32) | thread index
  };
  static std::uint64_t pack(std::uint32_t id, std::uint32_t payload) noexcept {
    return (static_cast<std::uint64_t>(id) << 32) | payload;
  }
  // id mod capacity, with its bits rotated left by 2: ids that differ by less than
  // capacity / 4 never share a 64-byte line (4 slots), so threads launching at the same
  // time (CUPTI hands out neighbouring ids) do not write the same cache line.
  std::size_t slot_of(std::uint32_t id) const noexcept {
    const std::size_t v = id & mask_;
    return ((v << 2) | (v >> (bits_ - 2))) & mask_;
  }
  static unsigned log2(std::size_t pow2) noexcept {
    unsigned bits = 0;
    while ((std::size_t{1} << bits) < pow2) ++bits;
    return bits;
  }
  static std::size_t round_up_pow2(std::size_t n) noexcept {
    std::size_t p = 1024;  // a floor: tiny tables only make tests and benches lie
    while (p < n && p < (std::size_t{1} << 30)) p <<= 1;
    return p;
  }

  std::size_t capacity_;
  std::size_t mask_;
  unsigned bits_;
  std::unique_ptr<slot[]> slots_;
};

// The launch-time hook as the CUPTI API callback calls it, on the launching thread: stores
// the node open on this thread. A runtime API launch also triggers the driver-API
// callback; when CUPTI gives the nested driver call the same correlation id, the second
// store is skipped (the per-thread "last id" check), and when it gives a different id
// both ids are stored, so kernel, memcpy and memset records find their node either way.
//
//   kscope::record_launch_from_this_thread(table, cbdata->correlationId);
inline void record_launch_from_this_thread(correlation_table& table,
                                           std::uint32_t correlation_id) noexcept {
  struct last_store {
    const correlation_table* table;
    std::uint32_t correlation_id;
  };
  thread_local last_store last{nullptr, 0};
  if (last.correlation_id == correlation_id && last.table == &table) return;
  last = {&table, correlation_id};
  detail::thread_state& state = detail::this_thread_state();
  table.record_launch(correlation_id, state.current, state.thread_index);
}

// ---- results ---------------------------------------------------------------------------

// ---- communication kernels and devices ---------------------------------------------------

// NCCL's collective and point-to-point kernels: "ncclDevKernel_*" (NCCL >= 2.19) and
// "ncclKernel_*" (older releases). Their time is communication, not compute, so a phase
// breakdown can say "decode: 70 % compute, 30 % all-reduce". Accepts the name as CUPTI
// reports it (Itanium-mangled: "_Z24ncclDevKernel_AllReduce_...") or demangled, with or
// without a leading "void ".
//
//   kscope::is_communication_kernel("_Z24ncclDevKernel_AllReduce_Sum_f32_RING_LLP24...");  // true
//   kscope::is_communication_kernel("_Z4axpyPfS_f");                                     // false
[[nodiscard]] inline bool is_communication_kernel(std::string_view name) noexcept {
  if (name.size() > 2 && name[0] == '_' && name[1] == 'Z') {
    name.remove_prefix(2);
    if (!name.empty() && name[0] == 'L') name.remove_prefix(1);  // internal linkage
    std::size_t digits = 0;
    while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
    if (digits == 0) return false;  // nested (_ZN...) or special names: not NCCL's
    name.remove_prefix(digits);
  } else if (name.substr(0, 5) == "void ") {
    name.remove_prefix(5);
  }
  return name.substr(0, 13) == "ncclDevKernel" || name.substr(0, 10) == "ncclKernel";
}

// Per-node device split: a node keeps separate totals for at most this many devices (a
// node's records on further devices still count in the node totals, and in
// attribution_counters::devices_over_cap). 64 covers the largest single-host systems.
inline constexpr std::size_t max_devices_per_node = 64;

// One device's share of a node's kernels.
//
//   for (const kscope::device_gpu_activity& d : activity.devices)
//     std::printf("GPU %u: %llu kernels, busy %lld ns\n", d.device, d.kernel_count, d.busy_ns);
struct device_gpu_activity {
  std::uint32_t device = 0;          // CUDA device ordinal as CUPTI reports it
  std::uint64_t kernel_count = 0;    // all kernels on this device, communication included
  std::int64_t kernel_ns = 0;        // sum of their durations
  std::int64_t busy_ns = 0;          // union of their intervals on this device
  std::uint64_t comm_kernel_count = 0;  // of which NCCL kernels
  std::int64_t comm_ns = 0;
};

// Copies in one direction, for one node.
struct copy_totals {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
  std::int64_t ns = 0;  // sum of copy durations
};

// GPU work attributed to one node: EXCLUSIVE of its children (the node open on the
// launching thread gets the record, never its parents); the session adds children up for
// inclusive views.
//
//   for (auto& [node, gpu] : report.nodes)
//     std::printf("%u: %llu kernels, busy %lld ns\n", node, gpu.kernel_count, gpu.busy_ns);
struct node_gpu_activity {
  std::uint64_t kernel_count = 0;
  std::int64_t kernel_ns = 0;  // sum of kernel durations (overlapping kernels count twice)
  std::int64_t busy_ns = 0;    // union of kernel intervals over all streams and devices
  // Time inside [first_start_ns, last_end_ns] with none of this node's kernels, copies or
  // memsets running. For a node executed many times the span covers all executions, so
  // this includes the time between them.
  std::int64_t idle_ns = 0;
  std::int64_t first_start_ns = 0;  // over kernels, copies and memsets; 0 when none
  std::int64_t last_end_ns = 0;
  std::array<copy_totals, copy_direction_count> memcpy{};  // index: copy_direction
  copy_totals memset{};

  // Communication (NCCL kernels, see is_communication_kernel) as a SUBSET of the kernel
  // totals above: compute = kernel - comm. The unions are taken separately, so
  // comm_busy_ns + compute_busy_ns - busy_ns is the time communication overlapped compute.
  std::uint64_t comm_kernel_count = 0;
  std::int64_t comm_ns = 0;
  std::int64_t comm_busy_ns = 0;     // union of the NCCL kernel intervals
  std::int64_t compute_busy_ns = 0;  // union of the other kernel intervals

  // Per-device split of the kernels, sorted by device ordinal (at most
  // max_devices_per_node entries). Empty when the node ran no kernels.
  std::vector<device_gpu_activity> devices;

  [[nodiscard]] std::uint64_t compute_kernel_count() const noexcept { return kernel_count - comm_kernel_count; }
  [[nodiscard]] std::int64_t compute_ns() const noexcept { return kernel_ns - comm_ns; }
  // The device entry for `device`, or nullptr when this node ran nothing there.
  [[nodiscard]] const device_gpu_activity* find_device(std::uint32_t device) const noexcept {
    for (const device_gpu_activity& d : devices)
      if (d.device == device) return &d;
    return nullptr;
  }

  [[nodiscard]] const copy_totals& copies(copy_direction d) const noexcept {
    return memcpy[static_cast<std::size_t>(d)];
  }
};

// One row of the top-kernels table (one kernel name), sorted by total GPU time.
//
//   for (const auto& k : report.top_kernels)
//     std::printf("%-40s %6llu %10.3f ms\n", k.name.c_str(), k.calls, k.total_ns / 1e6);
struct kernel_summary {
  std::string name;          // demangled (abi::__cxa_demangle), else the raw name
  std::string mangled_name;  // as CUPTI reported it
  std::uint64_t calls = 0;
  std::int64_t total_ns = 0;
  double median_ns = 0;      // exact up to attribution_options::median_samples calls,
                             // then from a uniform reservoir of that many durations
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  std::array<std::int32_t, 3> grid{};   // launch configuration of the first call
  std::array<std::int32_t, 3> block{};
  std::uint32_t registers_per_thread = 0;
  std::int32_t static_shared_bytes = 0;
  std::int32_t dynamic_shared_bytes = 0;
  bool launch_config_varies = false;  // a later call used another grid/block/smem
  bool communication = false;         // an NCCL kernel (is_communication_kernel)
};

// What happened to the records: every record is counted exactly once in records_seen and
// then either attributed (to a scope node or to unscoped_node) or dropped with a reason.
struct attribution_counters {
  std::uint64_t records_seen = 0;            // every record handed to the attribution
  std::uint64_t kernel_records = 0;          // valid kernels attributed
  std::uint64_t memcpy_records = 0;
  std::uint64_t memset_records = 0;
  std::uint64_t external_correlation_records = 0;
  std::uint64_t ignored_records = 0;         // other kinds (API records, ...)
  std::uint64_t dropped_by_cupti = 0;        // CUPTI had no buffer (cuptiActivityGetNumDroppedRecords)
  std::uint64_t dropped_zero_start = 0;      // start == 0: CUPTI could not time it
  std::uint64_t dropped_end_before_start = 0;
  std::uint64_t dropped_malformed = 0;       // buffer walk stopped on an invalid record
  std::uint64_t unscoped = 0;                // launched with no scope open
  std::uint64_t unattributed = 0;            // launch never seen: went to (unscoped)
  std::uint64_t unattributed_evicted = 0;    // ...of which: the table entry was reused
  std::uint64_t pending = 0;                 // waiting for their launch (external design)
  std::uint64_t pending_overflow = 0;        // pending list full: resolved as unattributed
  std::uint64_t busy_intervals_clipped = 0;  // arrived after their time was folded
  std::uint64_t recent_overwritten = 0;      // trace ring wrapped: oldest events replaced
  std::uint64_t distinct_kernels_over_cap = 0;  // calls folded into "(other kernels)"
  std::uint64_t nodes_over_cap = 0;          // records of nodes past max_nodes -> (unscoped)
  std::uint64_t devices_over_cap = 0;        // kernels on a node's 65th+ device: no device split
};

// One GPU record kept for the trace (trace.hpp), on kscope's clock.
// `name` points into storage owned by the gpu_attribution that produced the event (kernel
// names are kept for its whole life), or to a string literal.
struct gpu_activity_event {
  activity_kind kind = activity_kind::kernel;
  node_id node = unscoped_node;
  std::uint32_t thread_index = unknown_thread;  // launching thread
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation_id = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::string_view name;  // mangled kernel name, or "Memcpy HtoD" / "Memset"
  memcpy_kind copy_kind = memcpy_kind::unknown;
  std::uint64_t bytes = 0;
  std::array<std::int32_t, 3> grid{};
  std::array<std::int32_t, 3> block{};
  std::uint32_t graph_id = 0;
  std::uint64_t graph_node_id = 0;
};

// Everything the session reads at report time.
struct gpu_activity_report {
  std::vector<std::pair<node_id, node_gpu_activity>> nodes;  // sorted by node id
  std::vector<kernel_summary> top_kernels;                    // by total_ns, descending
  attribution_counters counters;
  std::vector<gpu_activity_event> recent;                     // oldest first
  std::vector<std::string> warnings;                          // one line per problem
  std::size_t memory_bytes = 0;                               // held by the attribution

  // The aggregate for `node`, or nullptr when it had no GPU work.
  [[nodiscard]] const node_gpu_activity* find(node_id node) const noexcept {
    auto it = std::lower_bound(nodes.begin(), nodes.end(), node,
                               [](const auto& entry, node_id n) { return entry.first < n; });
    return (it != nodes.end() && it->first == node) ? &it->second : nullptr;
  }
};

// Caps and sizes; the defaults hold a few MiB at most (see gpu_attribution::memory_bytes).
struct attribution_options {
  std::size_t correlation_capacity = std::size_t{1} << 18;  // 4 MiB of table
  std::size_t recent_capacity = 65536;   // GPU events kept for the trace (0: none)
  std::size_t pending_capacity = 16384;  // records waiting for their launch mapping
  std::size_t max_kernel_names = 4096;   // distinct names; more fold into "(other kernels)"
  std::size_t median_samples = 256;      // duration reservoir per kernel name
  std::size_t max_intervals_per_node = 256;  // before the oldest are folded (busy/idle)
  std::size_t max_nodes = 65536;         // distinct nodes with GPU work
};

namespace detail {

// abi::__cxa_demangle, falling back to the raw name (extern "C" kernels, other ABIs).
inline std::string demangle(const char* name) {
  if (name == nullptr) return "(unknown kernel)";
#if KSCOPE_DETAIL_HAS_CXXABI
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status == 0 && out != nullptr) {
    std::string result(out);
    std::free(out);
    return result;
  }
  std::free(out);
#endif
  return std::string(name);
}

// Union of half-open intervals [start, end) with bounded memory. Intervals are kept
// merged; when more than `max_intervals` remain, the oldest are folded into a committed
// total and a frontier: an interval arriving later that reaches before the frontier is
// clipped to it (counted), because the folded part can no longer be merged exactly.
// Records arrive roughly in time order (one CUPTI buffer at a time), so with the default
// cap clipping does not happen in practice; the counter says if it did.
//
//   detail::interval_union u{256};
//   u.add(0, 10); u.add(5, 20); u.add(30, 40);
//   u.total_ns();  // 30
class interval_union {
 public:
  explicit interval_union(std::size_t max_intervals = 256)
      : max_intervals_(std::max<std::size_t>(max_intervals, 8)) {}

  void add(std::int64_t start, std::int64_t end) {
    if (end <= start) return;
    if (start < frontier_ns_) {
      ++clipped_;
      if (end <= frontier_ns_) return;
      start = frontier_ns_;
    }
    // Fast path: in-order arrival extends the last interval or appends after it.
    if (!intervals_.empty()) {
      auto& last = intervals_.back();
      if (start >= last.first && start <= last.second) {
        if (end > last.second) last.second = end;
        return;
      }
      if (start < last.first) sorted_ = false;
    }
    intervals_.emplace_back(start, end);
    if (intervals_.size() > max_intervals_) compact(true);
  }

  // Total covered time. Merges in place (amortized; no allocation).
  [[nodiscard]] std::int64_t total_ns() {
    compact(false);
    std::int64_t sum = committed_ns_;
    for (const auto& iv : intervals_) sum += iv.second - iv.first;
    return sum;
  }

  [[nodiscard]] std::uint64_t clipped() const noexcept { return clipped_; }
  [[nodiscard]] std::size_t size() const noexcept { return intervals_.size(); }
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return intervals_.capacity() * sizeof(intervals_[0]);
  }

 private:
  void compact(bool fold) {
    if (!sorted_) {
      std::sort(intervals_.begin(), intervals_.end());
      sorted_ = true;
    }
    std::size_t out = 0;
    for (std::size_t i = 0; i < intervals_.size(); ++i) {
      if (out > 0 && intervals_[i].first <= intervals_[out - 1].second) {
        intervals_[out - 1].second = std::max(intervals_[out - 1].second, intervals_[i].second);
      } else {
        intervals_[out++] = intervals_[i];
      }
    }
    intervals_.resize(out);
    if (fold && intervals_.size() > max_intervals_ / 2) {
      // Fold the oldest three quarters: amortizes the sort over many adds.
      const std::size_t keep = max_intervals_ / 4;
      const std::size_t folded = intervals_.size() - keep;
      for (std::size_t i = 0; i < folded; ++i) {
        committed_ns_ += intervals_[i].second - intervals_[i].first;
      }
      frontier_ns_ = intervals_[folded - 1].second;
      intervals_.erase(intervals_.begin(), intervals_.begin() + static_cast<std::ptrdiff_t>(folded));
    }
  }

  std::vector<std::pair<std::int64_t, std::int64_t>> intervals_;
  std::size_t max_intervals_;
  std::int64_t committed_ns_ = 0;
  std::int64_t frontier_ns_ = std::numeric_limits<std::int64_t>::min();
  std::uint64_t clipped_ = 0;
  bool sorted_ = true;
};

// Small deterministic generator for reservoir sampling (no <random> state to seed).
struct xorshift64 {
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  std::uint64_t next() noexcept {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  // Uniform in (0, 1]: never 0, so log() stays finite.
  double uniform() noexcept { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
};

}  // namespace detail

// The attribution core: consumes records, keeps per-node and per-kernel aggregates.
// Not thread-safe by itself except for launches() (the lock-free launch table): the CUPTI
// collector serializes add_* and report() with its own mutex.
//
//   kscope::gpu_attribution attribution;
//   attribution.launches().record_launch(7, /*node*/ 3, /*thread*/ 0);
//   attribution.add_kernel(k);               // k.correlation_id == 7 -> node 3
//   auto r = attribution.report();
//   r.find(3)->kernel_count;                 // 1
class gpu_attribution {
 public:
  explicit gpu_attribution(attribution_options options = {})
      : options_(sanitize(options)), table_(options_.correlation_capacity) {
    recent_.reserve(options_.recent_capacity);
    pending_.reserve(std::min<std::size_t>(options_.pending_capacity, 1024));
  }

  gpu_attribution(const gpu_attribution&) = delete;
  gpu_attribution& operator=(const gpu_attribution&) = delete;

  [[nodiscard]] correlation_table& launches() noexcept { return table_; }
  [[nodiscard]] const attribution_options& options() const noexcept { return options_; }

  // Dispatches on r.kind.
  void add(const activity_record& r) {
    switch (r.kind) {
      case activity_kind::kernel: add_kernel(r.kernel); break;
      case activity_kind::memcpy: add_memcpy(r.memcpy); break;
      case activity_kind::memset: add_memset(r.memset); break;
      case activity_kind::external_correlation: add_external_correlation(r.external); break;
      default:
        ++counters_.records_seen;
        ++counters_.ignored_records;
        break;
    }
  }

  void add_kernel(const kernel_record& k) {
    ++counters_.records_seen;
    if (!valid_times(k.start_ns, k.end_ns)) return;
    launch_origin origin;
    switch (resolve(k.correlation_id, 0, origin)) {
      case resolution::done: apply_kernel(k, origin); break;
      case resolution::wait: park(k); break;
    }
  }

  void add_memcpy(const memcpy_record& m) {
    ++counters_.records_seen;
    if (!valid_times(m.start_ns, m.end_ns)) return;
    launch_origin origin;
    switch (resolve(m.correlation_id, m.runtime_correlation_id, origin)) {
      case resolution::done: apply_memcpy(m, origin); break;
      case resolution::wait: park(m); break;
    }
  }

  void add_memset(const memset_record& s) {
    ++counters_.records_seen;
    if (!valid_times(s.start_ns, s.end_ns)) return;
    launch_origin origin;
    switch (resolve(s.correlation_id, 0, origin)) {
      case resolution::done: apply_memset(s, origin); break;
      case resolution::wait: park(s); break;
    }
  }

  // External-correlation design: the record is the launch mapping.
  void add_external_correlation(const external_correlation_record& e) {
    ++counters_.records_seen;
    ++counters_.external_correlation_records;
    table_.record_launch(e.correlation_id, static_cast<node_id>(e.external_id & 0xffffffffu),
                         static_cast<std::uint32_t>(e.external_id >> 32));
  }

  // Records the buffer walk could not read (invalid kind mid-buffer).
  void note_malformed(std::uint64_t count = 1) noexcept { counters_.dropped_malformed += count; }
  // Records CUPTI dropped for lack of buffer space (read outside any lock by the collector).
  void note_dropped_by_cupti(std::uint64_t count) noexcept { counters_.dropped_by_cupti += count; }

  // Called after each buffer: retries the records that were waiting for their launch.
  void end_of_buffer() {
    retry_pending(false);
    name_cache_.fill(name_cache_entry{});
  }

  // Called at report time, after the final flush: records still waiting are given up on
  // (attributed to unscoped_node and counted unattributed), so nothing stays in limbo.
  void settle() { retry_pending(true); }

  // Forgets aggregates and events (kernel names and the launch table stay).
  void reset() {
    nodes_.clear();
    node_cache_.fill(node_cache_entry{});
    name_cache_.fill(name_cache_entry{});
    // Keep each name string in place: name_by_text_ holds views of them.
    for (auto& k : kernels_) clear_stats(k);
    clear_stats(other_kernels_);
    recent_.clear();
    recent_next_ = 0;
    pending_.clear();
    counters_ = attribution_counters{};
  }

  // Per-node aggregates, top kernels, counters, recent events, warnings.
  [[nodiscard]] gpu_activity_report report(std::size_t top_kernel_limit = 50) {
    gpu_activity_report r;
    r.nodes.reserve(nodes_.size());
    std::uint64_t clipped = 0;
    for (auto& [id, acc] : nodes_) {
      node_gpu_activity a = acc.totals;
      a.busy_ns = acc.kernel_union.total_ns();
      const std::int64_t active = acc.activity_union.total_ns();
      a.idle_ns = std::max<std::int64_t>(0, (a.last_end_ns - a.first_start_ns) - active);
      a.comm_busy_ns = acc.comm_union.total_ns();
      a.compute_busy_ns = acc.compute_union.total_ns();
      clipped += acc.kernel_union.clipped() + acc.activity_union.clipped() +
                 acc.comm_union.clipped() + acc.compute_union.clipped();
      a.devices.reserve(acc.devices.size());
      for (auto& d : acc.devices) {
        device_gpu_activity split = d.totals;
        split.busy_ns = d.kernel_union.total_ns();
        clipped += d.kernel_union.clipped();
        a.devices.push_back(split);
      }
      std::sort(a.devices.begin(), a.devices.end(),
                [](const device_gpu_activity& x, const device_gpu_activity& y) { return x.device < y.device; });
      r.nodes.emplace_back(id, a);
    }
    std::sort(r.nodes.begin(), r.nodes.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    r.top_kernels = top_kernels(top_kernel_limit);
    r.counters = counters_;
    r.counters.pending = pending_.size();
    r.counters.busy_intervals_clipped = clipped;
    r.recent = recent_events();
    r.warnings = warnings(r.counters);
    r.memory_bytes = memory_bytes();
    return r;
  }

  // Sorted by total GPU time, descending; ties by name. limit 0: all.
  [[nodiscard]] std::vector<kernel_summary> top_kernels(std::size_t limit = 0) const {
    std::vector<const kernel_accumulator*> order;
    order.reserve(kernels_.size() + 1);
    for (const auto& k : kernels_) {
      if (k.calls > 0) order.push_back(&k);
    }
    if (other_kernels_.calls > 0) order.push_back(&other_kernels_);
    std::sort(order.begin(), order.end(), [](const kernel_accumulator* a, const kernel_accumulator* b) {
      if (a->total_ns != b->total_ns) return a->total_ns > b->total_ns;
      return a->mangled < b->mangled;
    });
    if (limit != 0 && order.size() > limit) order.resize(limit);
    std::vector<kernel_summary> out;
    out.reserve(order.size());
    for (const kernel_accumulator* k : order) out.push_back(summarize(*k));
    return out;
  }

  // Oldest first.
  [[nodiscard]] std::vector<gpu_activity_event> recent_events() const {
    std::vector<gpu_activity_event> out;
    out.reserve(recent_.size());
    if (recent_.size() < options_.recent_capacity || recent_next_ == 0) {
      out = recent_;
    } else {
      out.insert(out.end(), recent_.begin() + static_cast<std::ptrdiff_t>(recent_next_), recent_.end());
      out.insert(out.end(), recent_.begin(), recent_.begin() + static_cast<std::ptrdiff_t>(recent_next_));
    }
    return out;
  }

  [[nodiscard]] const attribution_counters& counters() const noexcept { return counters_; }

  // Bytes held now (tables, intervals, reservoirs, events, names); bounded by the caps.
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    std::size_t bytes = sizeof(*this) + table_.memory_bytes();
    bytes += recent_.capacity() * sizeof(gpu_activity_event);
    bytes += pending_.capacity() * sizeof(pending_record);
    for (const auto& [id, acc] : nodes_) {
      (void)id;
      bytes += sizeof(node_accumulator) + 32 + acc.kernel_union.memory_bytes() +
               acc.activity_union.memory_bytes() + acc.comm_union.memory_bytes() +
               acc.compute_union.memory_bytes();
      for (const auto& d : acc.devices) bytes += sizeof(d) + d.kernel_union.memory_bytes();
    }
    for (const auto& k : kernels_) {
      bytes += sizeof(kernel_accumulator) + k.samples.capacity() * sizeof(std::int64_t) +
               k.mangled.capacity();
    }
    bytes += (name_by_pointer_.size() + name_by_text_.size()) * 64;
    return bytes;
  }

 private:
  enum class resolution : std::uint8_t { done, wait };

  struct kernel_accumulator {
    std::string mangled;
    std::uint64_t calls = 0;
    std::int64_t total_ns = 0;
    std::int64_t min_ns = std::numeric_limits<std::int64_t>::max();
    std::int64_t max_ns = 0;
    std::vector<std::int64_t> samples;
    std::array<std::int32_t, 3> grid{};
    std::array<std::int32_t, 3> block{};
    std::uint32_t registers_per_thread = 0;
    std::int32_t static_shared_bytes = 0;
    std::int32_t dynamic_shared_bytes = 0;
    bool varies = false;
    bool communication = false;    // classified once per name, not per record
    detail::xorshift64 rng{};
    double reservoir_w = 0;        // Algorithm L state
    std::uint64_t next_replace = 0;
  };

  struct device_accumulator {
    explicit device_accumulator(std::uint32_t device, std::size_t max_intervals) : kernel_union(max_intervals) {
      totals.device = device;
    }
    device_gpu_activity totals;
    detail::interval_union kernel_union;
  };

  struct node_accumulator {
    explicit node_accumulator(std::size_t max_intervals)
        : kernel_union(max_intervals), activity_union(max_intervals), comm_union(max_intervals),
          compute_union(max_intervals), max_intervals_per_union(max_intervals) {}
    node_gpu_activity totals;  // `devices` stays empty here: the split lives in `devices`
    detail::interval_union kernel_union;
    detail::interval_union activity_union;
    detail::interval_union comm_union;
    detail::interval_union compute_union;
    std::vector<device_accumulator> devices;  // at most max_devices_per_node
    std::size_t last_device = 0;              // index of the last device used (one per stream run)
    std::size_t max_intervals_per_union;

    // The accumulator of `device`, or nullptr past the cap.
    device_accumulator* device_for(std::uint32_t device) {
      if (last_device < devices.size() && devices[last_device].totals.device == device) return &devices[last_device];
      for (std::size_t i = 0; i < devices.size(); ++i) {
        if (devices[i].totals.device == device) {
          last_device = i;
          return &devices[i];
        }
      }
      if (devices.size() >= max_devices_per_node) return nullptr;
      devices.emplace_back(device, max_intervals_per_union);
      last_device = devices.size() - 1;
      return &devices.back();
    }
  };

  struct pending_record {
    activity_kind kind;
    kernel_record kernel;
    memcpy_record memcpy;
    memset_record memset;
  };

  static attribution_options sanitize(attribution_options o) {
    o.median_samples = std::max<std::size_t>(o.median_samples, 1);
    o.max_kernel_names = std::max<std::size_t>(o.max_kernel_names, 1);
    o.max_nodes = std::max<std::size_t>(o.max_nodes, 1);
    return o;
  }

  bool valid_times(std::int64_t start, std::int64_t end) noexcept {
    if (start == 0) {
      ++counters_.dropped_zero_start;
      return false;
    }
    if (end < start) {
      ++counters_.dropped_end_before_start;
      return false;
    }
    return true;
  }

  // Finds the launch of a record; `done` with origin filled, or `wait` (parked).
  resolution resolve(std::uint32_t id, std::uint32_t fallback_id, launch_origin& origin) {
    auto hit = table_.find(id);
    if (hit.status != correlation_table::lookup_status::found && fallback_id != 0 &&
        fallback_id != id) {
      auto second = table_.find(fallback_id);
      if (second.status == correlation_table::lookup_status::found ||
          hit.status == correlation_table::lookup_status::unknown) {
        hit = second;
      }
    }
    switch (hit.status) {
      case correlation_table::lookup_status::found:
        origin = hit.origin;
        if (origin.node == unscoped_node) ++counters_.unscoped;
        return resolution::done;
      case correlation_table::lookup_status::evicted:
        ++counters_.unattributed;
        ++counters_.unattributed_evicted;
        origin = launch_origin{};
        return resolution::done;
      case correlation_table::lookup_status::unknown:
      default:
        if (id == 0 && fallback_id == 0) {
          ++counters_.unattributed;
          origin = launch_origin{};
          return resolution::done;
        }
        if (pending_.size() >= options_.pending_capacity) {
          ++counters_.unattributed;
          ++counters_.pending_overflow;
          origin = launch_origin{};
          return resolution::done;
        }
        return resolution::wait;
    }
  }

  void park(const kernel_record& k) {
    pending_record p{};
    p.kind = activity_kind::kernel;
    p.kernel = k;
    pending_.push_back(p);
  }
  void park(const memcpy_record& m) {
    pending_record p{};
    p.kind = activity_kind::memcpy;
    p.memcpy = m;
    pending_.push_back(p);
  }
  void park(const memset_record& s) {
    pending_record p{};
    p.kind = activity_kind::memset;
    p.memset = s;
    pending_.push_back(p);
  }

  void retry_pending(bool final_pass) {
    if (pending_.empty()) return;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      pending_record& p = pending_[i];
      std::uint32_t id = 0, fallback = 0;
      switch (p.kind) {
        case activity_kind::kernel: id = p.kernel.correlation_id; break;
        case activity_kind::memcpy:
          id = p.memcpy.correlation_id;
          fallback = p.memcpy.runtime_correlation_id;
          break;
        default: id = p.memset.correlation_id; break;
      }
      auto hit = table_.find(id);
      if (hit.status != correlation_table::lookup_status::found && fallback != 0) {
        auto second = table_.find(fallback);
        if (second.status == correlation_table::lookup_status::found) hit = second;
      }
      launch_origin origin;
      if (hit.status == correlation_table::lookup_status::found) {
        origin = hit.origin;
        if (origin.node == unscoped_node) ++counters_.unscoped;
      } else if (hit.status == correlation_table::lookup_status::evicted || final_pass) {
        ++counters_.unattributed;
        if (hit.status == correlation_table::lookup_status::evicted) ++counters_.unattributed_evicted;
      } else {
        pending_[kept++] = p;
        continue;
      }
      switch (p.kind) {
        case activity_kind::kernel: apply_kernel(p.kernel, origin); break;
        case activity_kind::memcpy: apply_memcpy(p.memcpy, origin); break;
        default: apply_memset(p.memset, origin); break;
      }
    }
    pending_.resize(kept);
  }

  node_accumulator& node_for(launch_origin& origin) {
    node_cache_entry& cached = node_cache_[origin.node % node_cache_size];
    if (cached.accumulator != nullptr && cached.node == origin.node) return *cached.accumulator;
    auto it = nodes_.find(origin.node);
    if (it == nodes_.end()) {
      if (nodes_.size() >= options_.max_nodes && origin.node != unscoped_node) {
        ++counters_.nodes_over_cap;
        origin.node = unscoped_node;
        return node_for(origin);
      }
      it = nodes_.emplace(origin.node, node_accumulator(options_.max_intervals_per_node)).first;
    }
    cached.node = origin.node;
    cached.accumulator = &it->second;  // unordered_map nodes are stable across rehashing
    return it->second;
  }

  static void extend_span(node_gpu_activity& a, std::int64_t start, std::int64_t end) noexcept {
    if (a.first_start_ns == 0 || start < a.first_start_ns) a.first_start_ns = start;
    if (end > a.last_end_ns) a.last_end_ns = end;
  }

  void apply_kernel(const kernel_record& k, launch_origin origin) {
    ++counters_.kernel_records;
    node_accumulator& acc = node_for(origin);
    const std::int64_t ns = k.end_ns - k.start_ns;
    acc.totals.kernel_count += 1;
    acc.totals.kernel_ns += ns;
    acc.kernel_union.add(k.start_ns, k.end_ns);
    acc.activity_union.add(k.start_ns, k.end_ns);
    extend_span(acc.totals, k.start_ns, k.end_ns);
    kernel_accumulator& stats = kernel_for(k.name);
    account_kernel(stats, k, ns);
    const bool communication = stats.communication;
    if (communication) {
      acc.totals.comm_kernel_count += 1;
      acc.totals.comm_ns += ns;
      acc.comm_union.add(k.start_ns, k.end_ns);
    } else {
      acc.compute_union.add(k.start_ns, k.end_ns);
    }
    if (device_accumulator* dev = acc.device_for(k.device)) {
      dev->totals.kernel_count += 1;
      dev->totals.kernel_ns += ns;
      dev->kernel_union.add(k.start_ns, k.end_ns);
      if (communication) {
        dev->totals.comm_kernel_count += 1;
        dev->totals.comm_ns += ns;
      }
    } else {
      ++counters_.devices_over_cap;
    }
    if (options_.recent_capacity > 0) {
      gpu_activity_event e;
      e.kind = activity_kind::kernel;
      fill_common(e, origin, k.device, k.context, k.stream, k.correlation_id, k.start_ns, k.end_ns);
      e.name = stats.mangled;
      e.grid = {k.grid_x, k.grid_y, k.grid_z};
      e.block = {k.block_x, k.block_y, k.block_z};
      e.graph_id = k.graph_id;
      e.graph_node_id = k.graph_node_id;
      push_recent(e);
    }
  }

  void apply_memcpy(const memcpy_record& m, launch_origin origin) {
    ++counters_.memcpy_records;
    node_accumulator& acc = node_for(origin);
    copy_totals& t = acc.totals.memcpy[static_cast<std::size_t>(direction_of(m.kind))];
    t.count += 1;
    t.bytes += m.bytes;
    t.ns += m.end_ns - m.start_ns;
    acc.activity_union.add(m.start_ns, m.end_ns);
    extend_span(acc.totals, m.start_ns, m.end_ns);
    if (options_.recent_capacity > 0) {
      gpu_activity_event e;
      e.kind = activity_kind::memcpy;
      fill_common(e, origin, m.device, m.context, m.stream, m.correlation_id, m.start_ns, m.end_ns);
      e.name = memcpy_label(m.kind);
      e.copy_kind = m.kind;
      e.bytes = m.bytes;
      e.graph_id = m.graph_id;
      e.graph_node_id = m.graph_node_id;
      push_recent(e);
    }
  }

  void apply_memset(const memset_record& s, launch_origin origin) {
    ++counters_.memset_records;
    node_accumulator& acc = node_for(origin);
    acc.totals.memset.count += 1;
    acc.totals.memset.bytes += s.bytes;
    acc.totals.memset.ns += s.end_ns - s.start_ns;
    acc.activity_union.add(s.start_ns, s.end_ns);
    extend_span(acc.totals, s.start_ns, s.end_ns);
    if (options_.recent_capacity > 0) {
      gpu_activity_event e;
      e.kind = activity_kind::memset;
      fill_common(e, origin, s.device, s.context, s.stream, s.correlation_id, s.start_ns, s.end_ns);
      e.name = "Memset";
      e.bytes = s.bytes;
      e.graph_id = s.graph_id;
      e.graph_node_id = s.graph_node_id;
      push_recent(e);
    }
  }

  static std::string_view memcpy_label(memcpy_kind kind) noexcept {
    switch (kind) {
      case memcpy_kind::h2d: return "Memcpy HtoD";
      case memcpy_kind::d2h: return "Memcpy DtoH";
      case memcpy_kind::d2d: return "Memcpy DtoD";
      case memcpy_kind::h2h: return "Memcpy HtoH";
      case memcpy_kind::p2p: return "Memcpy PtoP";
      case memcpy_kind::array: return "Memcpy Array";
      default: return "Memcpy";
    }
  }

  static void fill_common(gpu_activity_event& e, const launch_origin& origin, std::uint32_t device,
                          std::uint32_t context, std::uint32_t stream, std::uint32_t correlation,
                          std::int64_t start, std::int64_t end) noexcept {
    e.node = origin.node;
    e.thread_index = origin.thread_index;
    e.device = device;
    e.context = context;
    e.stream = stream;
    e.correlation_id = correlation;
    e.start_ns = start;
    e.end_ns = end;
  }

  void push_recent(const gpu_activity_event& e) {
    if (recent_.size() < options_.recent_capacity) {
      recent_.push_back(e);
      return;
    }
    recent_[recent_next_] = e;
    recent_next_ = (recent_next_ + 1) % options_.recent_capacity;
    ++counters_.recent_overwritten;
  }

  // Kernel names: CUPTI shares one name string among all records of a kernel, so the
  // pointer is the fast key. Within one buffer, two live names cannot share an address,
  // so a small pointer cache is trusted until the end of the buffer (end_of_buffer()
  // clears it); across buffers a pointer is checked against its text, because it can be
  // reused for another name after a module is unloaded.
  kernel_accumulator& kernel_for(const char* name) {
    if (name == nullptr) name = "(unknown kernel)";
    // Fibonacci hashing: string literals sit next to each other, so low bits collide.
    const std::size_t slot = static_cast<std::size_t>(
        (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(name)) * 0x9e3779b97f4a7c15ull) >> 58);
    name_cache_entry& cached = name_cache_[slot];
    if (cached.pointer == name) return *cached.accumulator;
    kernel_accumulator* found = nullptr;
    auto by_pointer = name_by_pointer_.find(name);
    if (by_pointer != name_by_pointer_.end() &&
        std::strcmp(kernels_[by_pointer->second].mangled.c_str(), name) == 0) {
      found = &kernels_[by_pointer->second];
    } else {
      std::uint32_t index;
      auto by_text = name_by_text_.find(std::string_view(name));
      if (by_text != name_by_text_.end()) {
        index = by_text->second;
      } else if (kernels_.size() >= options_.max_kernel_names) {
        ++counters_.distinct_kernels_over_cap;
        if (other_kernels_.mangled.empty()) other_kernels_.mangled = "(other kernels)";
        return other_kernels_;
      } else {
        index = static_cast<std::uint32_t>(kernels_.size());
        kernels_.emplace_back();
        kernels_.back().mangled = name;
        kernels_.back().communication = is_communication_kernel(kernels_.back().mangled);
        // The deque keeps each string in place, so the view key stays valid.
        name_by_text_.emplace(std::string_view(kernels_.back().mangled), index);
      }
      if (name_by_pointer_.size() < 4 * options_.max_kernel_names) name_by_pointer_[name] = index;
      found = &kernels_[index];
    }
    cached.pointer = name;
    cached.accumulator = found;
    return *found;
  }

  void account_kernel(kernel_accumulator& s, const kernel_record& k, std::int64_t ns) {
    if (s.calls == 0) {
      s.grid = {k.grid_x, k.grid_y, k.grid_z};
      s.block = {k.block_x, k.block_y, k.block_z};
      s.registers_per_thread = k.registers_per_thread;
      s.static_shared_bytes = k.static_shared_bytes;
      s.dynamic_shared_bytes = k.dynamic_shared_bytes;
    } else if (!s.varies) {
      s.varies = s.grid[0] != k.grid_x || s.grid[1] != k.grid_y || s.grid[2] != k.grid_z ||
                 s.block[0] != k.block_x || s.block[1] != k.block_y || s.block[2] != k.block_z ||
                 s.dynamic_shared_bytes != k.dynamic_shared_bytes;
    }
    s.calls += 1;
    s.total_ns += ns;
    s.min_ns = std::min(s.min_ns, ns);
    s.max_ns = std::max(s.max_ns, ns);
    // Reservoir sampling, Algorithm L (Li 1994): every duration has the same chance to be
    // kept, and the calls between two replacements are skipped with one compare each.
    const std::size_t reservoir = options_.median_samples;
    if (s.samples.size() < reservoir) {
      if (s.samples.capacity() == 0) s.samples.reserve(std::min<std::size_t>(reservoir, 16));
      s.samples.push_back(ns);
      if (s.samples.size() == reservoir) {
        s.reservoir_w = std::exp(std::log(s.rng.uniform()) / static_cast<double>(reservoir));
        s.next_replace = s.calls + skip_length(s);
      }
    } else if (s.calls == s.next_replace) {
      s.samples[static_cast<std::size_t>(s.rng.next() % reservoir)] = ns;
      s.reservoir_w *= std::exp(std::log(s.rng.uniform()) / static_cast<double>(reservoir));
      s.next_replace = s.calls + skip_length(s);
    }
  }

  static std::uint64_t skip_length(kernel_accumulator& s) noexcept {
    const double gap = std::floor(std::log(s.rng.uniform()) / std::log1p(-s.reservoir_w));
    if (!(gap < 1e18)) return std::numeric_limits<std::uint64_t>::max() / 2;
    return static_cast<std::uint64_t>(gap) + 1;
  }

  static void clear_stats(kernel_accumulator& k) {
    k.calls = 0;
    k.total_ns = 0;
    k.min_ns = std::numeric_limits<std::int64_t>::max();
    k.max_ns = 0;
    k.samples.clear();
    k.varies = false;
    k.reservoir_w = 0;
    k.next_replace = 0;
  }

  static kernel_summary summarize(const kernel_accumulator& k) {
    kernel_summary s;
    s.mangled_name = k.mangled;
    s.name = k.mangled == "(other kernels)" ? k.mangled : detail::demangle(k.mangled.c_str());
    s.calls = k.calls;
    s.total_ns = k.total_ns;
    s.min_ns = k.calls > 0 ? k.min_ns : 0;
    s.max_ns = k.max_ns;
    std::vector<std::int64_t> v = k.samples;
    if (!v.empty()) {
      const std::size_t mid = v.size() / 2;
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
      double median = static_cast<double>(v[mid]);
      if (v.size() % 2 == 0) {
        const auto lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
        median = (median + static_cast<double>(lower)) / 2.0;
      }
      s.median_ns = median;
    }
    s.grid = k.grid;
    s.block = k.block;
    s.registers_per_thread = k.registers_per_thread;
    s.static_shared_bytes = k.static_shared_bytes;
    s.dynamic_shared_bytes = k.dynamic_shared_bytes;
    s.launch_config_varies = k.varies;
    s.communication = k.communication;
    return s;
  }

  std::vector<std::string> warnings(const attribution_counters& c) const {
    std::vector<std::string> out;
    auto say = [&out](std::uint64_t n, const char* what) {
      if (n > 0) out.push_back(std::to_string(n) + what);
    };
    say(c.dropped_by_cupti,
        " GPU activity records dropped by CUPTI (activity buffer pool exhausted; raise "
        "cupti_options::buffer_count or buffer_bytes)");
    say(c.dropped_zero_start, " GPU records without timestamps (start = 0) dropped");
    say(c.dropped_end_before_start, " GPU records with end < start dropped");
    say(c.dropped_malformed, " malformed CUPTI activity buffers or records skipped");
    say(c.unattributed - c.unattributed_evicted,
        " GPU records whose launch was not seen were attributed to (unscoped)");
    say(c.unattributed_evicted,
        " GPU records arrived after their launch left the correlation table (raise "
        "attribution_options::correlation_capacity); attributed to (unscoped)");
    say(c.busy_intervals_clipped,
        " GPU intervals arrived far out of order; GPU busy/idle times may be slightly low");
    say(c.distinct_kernels_over_cap, " kernel calls folded into \"(other kernels)\" (name cap)");
    say(c.nodes_over_cap, " GPU records of nodes past the node cap went to (unscoped)");
    say(c.devices_over_cap, " kernels ran on more than 64 devices per scope: not split by device");
    return out;
  }

  static constexpr std::size_t name_cache_size = 64;  // = 2^(64 - 58), see kernel_for
  struct name_cache_entry {
    const char* pointer = nullptr;
    kernel_accumulator* accumulator = nullptr;
  };

  attribution_options options_;
  correlation_table table_;
  attribution_counters counters_{};
  std::unordered_map<node_id, node_accumulator> nodes_;
  static constexpr std::size_t node_cache_size = 64;
  struct node_cache_entry {
    node_id node = 0;
    node_accumulator* accumulator = nullptr;
  };
  std::array<node_cache_entry, node_cache_size> node_cache_{};
  std::deque<kernel_accumulator> kernels_;
  kernel_accumulator other_kernels_;
  std::unordered_map<const char*, std::uint32_t> name_by_pointer_;
  std::unordered_map<std::string_view, std::uint32_t> name_by_text_;
  std::array<name_cache_entry, name_cache_size> name_cache_{};
  std::vector<gpu_activity_event> recent_;
  std::size_t recent_next_ = 0;
  std::vector<pending_record> pending_;
};

}  // namespace kscope
