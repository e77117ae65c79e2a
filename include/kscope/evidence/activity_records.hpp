// kscope/evidence/activity_records.hpp — kscope's own copies of the CUPTI activity records it uses.
//
// Pure C++ (no CUDA, no CUPTI headers): the collector turns each CUpti_Activity into one
// of these plain records (detail/parse.hpp) and the attribution consumes them
// (activity/attribution.hpp); the CPU tests build them by hand. Keeping CUPTI's structs out of
// here is what lets the attribution and its tests compile on a machine without CUDA.
#pragma once

#include "../scope/node_id.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>

namespace kscope {

// The node GPU work goes to when no scope was open on the launching thread (and when its
// launch could not be found). It is the root of the call-path tree; reports name it:
//
//   if (id == kscope::unscoped_node) label = kscope::unscoped_node_name;  // "(unscoped)"
inline constexpr node_id unscoped_node = detail::root_node;
inline constexpr const char* unscoped_node_name = "(unscoped)";

// Thread index stored when the launching thread is not known.
inline constexpr std::uint32_t unknown_thread = std::numeric_limits<std::uint32_t>::max();
// Set in a launch's thread index when the launch ran inside a call the per-scope counters
// profiled (kernel replay): thread indices stay far below it.
inline constexpr std::uint32_t profiled_launch_bit = 0x80000000u;
// Set in a CUDA-graph launch's thread index when no replay of its graph will ever be traced
// as one record (built before the collector started, or while graph-level trace was off):
// its node-level kernels are counted as they come, with no reference span to wait for.
inline constexpr std::uint32_t unreferenced_replay_bit = 0x40000000u;

enum class activity_kind : std::uint8_t {
  kernel,
  memcpy,
  memset,
  synchronization,  // the host waited for the GPU (stream, event or context synchronize)
  graph,  // a whole CUDA-graph replay traced as one record (CUPTI's graph-level trace)
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

// Where one side of a copy lives, as CUPTI says (CUpti_ActivityMemoryKind). `pageable`
// is host memory that is not page-locked (malloc, new, std::vector): the driver copies it
// through a pinned staging buffer of its own, and the host waits for the copy whatever API
// was called. `pinned` is page-locked host memory (cudaHostAlloc, cudaMallocHost,
// cudaHostRegister), which the copy engines reach directly.
//
//   if (m.src_kind == kscope::memory_kind::pageable || m.dst_kind == kscope::memory_kind::pageable) ...
enum class memory_kind : std::uint8_t { unknown, pageable, pinned, device, array, managed, device_static, managed_static };

[[nodiscard]] constexpr const char* to_string(memory_kind kind) noexcept {
  switch (kind) {
    case memory_kind::pageable: return "pageable";
    case memory_kind::pinned: return "pinned";
    case memory_kind::device: return "device";
    case memory_kind::array: return "array";
    case memory_kind::managed: return "managed";
    case memory_kind::device_static: return "device static";
    case memory_kind::managed_static: return "managed static";
    default: return "unknown";
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

// The fields every GPU activity record shares: which launch it belongs to (correlation
// id; graph ids for work a CUDA graph launched), where it ran (device, context, stream)
// and when. Timestamps are kscope's clock (detail::now_ns(), steady_clock ns); 0 means
// "CUPTI could not time it" and such records are dropped and counted.
//
//   std::int64_t duration_ns(const kscope::activity_header& r) { return r.end_ns - r.start_ns; }
struct activity_header {
  std::uint32_t correlation_id = 0;
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t graph_id = 0;  // 0: not launched through a CUDA graph
  std::uint64_t graph_node_id = 0;
};

// One kernel execution.
//
//   kscope::kernel_record k;
//   k.correlation_id = 42; k.start_ns = t0; k.end_ns = t0 + 1000; k.name = "_Z4axpyPfS_f";
//   attribution.add_kernel(k);
struct kernel_record : activity_header {
  const char* name = nullptr;  // mangled, owned by CUPTI: copied on first sight
  std::int32_t grid_x = 0, grid_y = 0, grid_z = 0;
  std::int32_t block_x = 0, block_y = 0, block_z = 0;
  std::uint32_t registers_per_thread = 0;
  std::int32_t static_shared_bytes = 0;
  std::int32_t dynamic_shared_bytes = 0;
};

// One memory copy. For copies CUPTI keeps the driver and the runtime correlation ids
// apart; correlation_table::find_launch tries correlation_id first, then
// runtime_correlation_id. `src_kind` / `dst_kind` say where each side lives (a pageable
// side makes the copy synchronous for the host and staged); `synchronous` is true when
// the copy came from the synchronous API (cudaMemcpy, not cudaMemcpyAsync: CUPTI's
// CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC absent). A copy node of a CUDA graph, or a peer copy
// (whose record carries no such flag), is never marked synchronous.
//
//   kscope::memcpy_record m;
//   m.correlation_id = 43; m.kind = kscope::memcpy_kind::d2h; m.bytes = 2 << 20;
//   m.src_kind = kscope::memory_kind::device; m.dst_kind = kscope::memory_kind::pageable;
struct memcpy_record : activity_header {
  std::uint32_t runtime_correlation_id = 0;
  memcpy_kind kind = memcpy_kind::unknown;
  memory_kind src_kind = memory_kind::unknown;
  memory_kind dst_kind = memory_kind::unknown;
  bool synchronous = false;
  std::uint64_t bytes = 0;

  // Either side in pageable host memory.
  [[nodiscard]] constexpr bool pageable() const noexcept {
    return src_kind == memory_kind::pageable || dst_kind == memory_kind::pageable;
  }
};

// One memset. `synchronous`: issued by the synchronous API (cudaMemset, not
// cudaMemsetAsync: CUPTI's CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC absent); never for a memset
// node of a CUDA graph.
//
//   kscope::memset_record s;
//   s.correlation_id = 44; s.bytes = 4096; s.start_ns = t0; s.end_ns = t0 + 300;
struct memset_record : activity_header {
  std::uint64_t bytes = 0;
  bool synchronous = false;
};

// What a synchronization record waited for. stream_wait_event makes a stream wait on the
// GPU, not the host: it is parsed and counted, never taken for a host wait.
enum class sync_kind : std::uint8_t { unknown, event, stream_wait_event, stream, context };

// Whether the host thread blocked in the call (event / stream / context synchronize).
[[nodiscard]] constexpr bool host_blocks(sync_kind kind) noexcept {
  return kind == sync_kind::event || kind == sync_kind::stream || kind == sync_kind::context;
}

// One synchronization call: start_ns / end_ns are HOST times (how long the calling thread
// waited), not GPU work; device and graph fields stay 0.
//
//   kscope::sync_record y;
//   y.correlation_id = 45; y.kind = kscope::sync_kind::stream; y.start_ns = t0; y.end_ns = t0 + 800;
struct sync_record : activity_header {
  sync_kind kind = sync_kind::unknown;
};

// Whatever one CUpti_Activity became: `kind` says which member is meaningful.
//
//   kscope::activity_record r;
//   if (kscope::detail::parse_activity(cupti_record, r, 0)) attribution.add(r);
// One replay of a CUDA graph traced as a whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE): its
// correlation id is the graph launch's, [start, end) spans its first node's start to its
// last node's end, graph_id names the graph; no node is named and graph_node_id is 0.
struct graph_record : activity_header {};

// GPU work of one node on one device over [start_ns, end_ns), kscope's clock: what the
// attribution hands a kernel_interval_sink (activity/attribution.hpp) for every kernel, copy,
// memset and graph replay it applies; PM sampling shares its samples by these.
struct kernel_interval {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  node_id node = 0;
  std::uint32_t device = 0;  // CUDA ordinal; only the sampled device's intervals are used
};

struct activity_record {
  activity_kind kind = activity_kind::other;
  kernel_record kernel;
  memcpy_record memcpy;
  memset_record memset;
  sync_record sync;
  graph_record graph;
};

}  // namespace kscope
