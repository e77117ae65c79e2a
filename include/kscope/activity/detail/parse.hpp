// kscope/activity/detail/parse.hpp — the ONE path from a CUPTI activity buffer to attribution.
//
// parse_activity() turns one CUpti_Activity into kscope's plain records (evidence/activity_records.hpp);
// consume_activity_buffer() walks a whole buffer and feeds a gpu_attribution. The live
// collector's buffer-completed callback and the CPU tests (synthetic buffers of real CUPTI
// structs, tests/support/cupti_synth.hpp) call exactly these functions.
//
// The walk uses libcupti's own cuptiActivityGetNextRecord whenever libcupti is loaded; it
// needs no GPU or driver (checked on a driverless machine with CUDA 13.0's libcupti). Only
// when libcupti cannot be loaded at all does the walk fall back to stepping by the record
// sizes of the compile-time CUPTI headers (walk_activity_buffer_fallback), for the kinds
// kscope enables; an unknown kind stops that walk and is counted as malformed.
//
// Record versions: CUDA 13's CONCURRENT_KERNEL record is CUpti_ActivityKernel10, MEMCPY is
// CUpti_ActivityMemcpy6, MEMSET is CUpti_ActivityMemset4, SYNCHRONIZATION is
// CUpti_ActivitySynchronization2 (the fields read are where version 1 has them), GRAPH_TRACE
// is CUpti_ActivityGraphTrace2. Every field kscope reads sits at
// the same offset in the CUDA 12 versions (Kernel8/9, Memcpy5, Memset3) — asserted below —
// so a CUDA 12 libcupti (whose buffers hold the older structs) is read correctly too.
#pragma once

#include "../../core/config.hpp"
#include "../../cupti/detail/api.hpp"

#if KSCOPE_HAS_CUPTI

#include "../attribution.hpp"

#include <cstddef>
#include <cstdint>

namespace kscope {
namespace detail {

using cupti_kernel_record = CUpti_ActivityKernel10;
using cupti_memcpy_record = CUpti_ActivityMemcpy6;
using cupti_memcpy_p2p_record = CUpti_ActivityMemcpyPtoP4;
using cupti_memset_record = CUpti_ActivityMemset4;
using cupti_sync_record = CUpti_ActivitySynchronization2;
using cupti_graph_record = CUpti_ActivityGraphTrace2;

#define KSCOPE_DETAIL_SAME_OFFSET(a, b, field) \
  static_assert(offsetof(a, field) == offsetof(b, field), #a " and " #b " disagree on " #field)
#define KSCOPE_DETAIL_KERNEL_LAYOUT(old)                                   \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, registersPerThread); \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, start);              \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, end);                \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, deviceId);           \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, contextId);          \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, streamId);           \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, gridX);              \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, blockZ);             \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, staticSharedMemory); \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, dynamicSharedMemory);\
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, correlationId);      \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, name);               \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, graphNodeId);        \
  KSCOPE_DETAIL_SAME_OFFSET(cupti_kernel_record, old, graphId)
KSCOPE_DETAIL_KERNEL_LAYOUT(CUpti_ActivityKernel9);
KSCOPE_DETAIL_KERNEL_LAYOUT(CUpti_ActivityKernel8);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, bytes);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, start);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, streamId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, correlationId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, runtimeCorrelationId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, graphNodeId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, graphId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, srcKind);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, dstKind);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memcpy_record, CUpti_ActivityMemcpy5, flags);
KSCOPE_DETAIL_SAME_OFFSET(cupti_sync_record, CUpti_ActivitySynchronization, type);
KSCOPE_DETAIL_SAME_OFFSET(cupti_sync_record, CUpti_ActivitySynchronization, start);
KSCOPE_DETAIL_SAME_OFFSET(cupti_sync_record, CUpti_ActivitySynchronization, end);
KSCOPE_DETAIL_SAME_OFFSET(cupti_sync_record, CUpti_ActivitySynchronization, correlationId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_sync_record, CUpti_ActivitySynchronization, streamId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memset_record, CUpti_ActivityMemset3, bytes);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memset_record, CUpti_ActivityMemset3, start);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memset_record, CUpti_ActivityMemset3, correlationId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memset_record, CUpti_ActivityMemset3, graphNodeId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memset_record, CUpti_ActivityMemset3, graphId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_memset_record, CUpti_ActivityMemset3, flags);
// CUDA 12.x delivers graph-level trace as CUpti_ActivityGraphTrace (no end device/context).
KSCOPE_DETAIL_SAME_OFFSET(cupti_graph_record, CUpti_ActivityGraphTrace, correlationId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_graph_record, CUpti_ActivityGraphTrace, start);
KSCOPE_DETAIL_SAME_OFFSET(cupti_graph_record, CUpti_ActivityGraphTrace, end);
KSCOPE_DETAIL_SAME_OFFSET(cupti_graph_record, CUpti_ActivityGraphTrace, deviceId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_graph_record, CUpti_ActivityGraphTrace, graphId);
KSCOPE_DETAIL_SAME_OFFSET(cupti_graph_record, CUpti_ActivityGraphTrace, streamId);
#undef KSCOPE_DETAIL_KERNEL_LAYOUT
#undef KSCOPE_DETAIL_SAME_OFFSET

// The record conversions (to_kscope_ns to parse_activity) are inline in both modes: every
// record of every buffer goes through them, and in the compiled mode (kscope::compiled,
// built with -fPIC) an ordinary external function is never inlined.

// CUPTI timestamp (ns) -> kscope clock. 0 stays 0: "not timed" must survive so that the
// attribution can count and drop it.
inline std::int64_t to_kscope_ns(std::uint64_t cupti_ns, std::int64_t offset_ns) noexcept {
  return cupti_ns == 0 ? 0 : static_cast<std::int64_t>(cupti_ns) + offset_ns;
}

inline memcpy_kind to_memcpy_kind(std::uint8_t copy_kind) noexcept {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return memcpy_kind::h2d;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return memcpy_kind::d2h;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return memcpy_kind::d2d;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return memcpy_kind::h2h;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return memcpy_kind::p2p;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return memcpy_kind::array;
    default: return memcpy_kind::unknown;
  }
}

// CUpti_ActivityMemoryKind (a copy record's srcKind / dstKind) -> memory_kind.
inline memory_kind to_memory_kind(std::uint8_t kind) noexcept {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return memory_kind::pageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return memory_kind::pinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return memory_kind::device;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return memory_kind::array;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return memory_kind::managed;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return memory_kind::device_static;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return memory_kind::managed_static;
    default: return memory_kind::unknown;
  }
}

// The fields every kind shares; CUPTI names them alike in each of its record structs.
template <class CuptiRecord>
inline void copy_header(const CuptiRecord& from, activity_header& to, std::int64_t clock_offset_ns) noexcept {
  to.correlation_id = from.correlationId;
  to.device = from.deviceId;
  to.context = from.contextId;
  to.stream = from.streamId;
  to.start_ns = to_kscope_ns(from.start, clock_offset_ns);
  to.end_ns = to_kscope_ns(from.end, clock_offset_ns);
  to.graph_id = from.graphId;
  to.graph_node_id = from.graphNodeId;
}

inline sync_kind to_sync_kind(CUpti_ActivitySynchronizationType type) noexcept {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return sync_kind::event;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return sync_kind::stream_wait_event;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return sync_kind::stream;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return sync_kind::context;
    default: return sync_kind::unknown;
  }
}

// Both CUPTI copy records (MEMCPY, MEMCPY2) -> one memcpy_record. `flags_valid`: the
// record's flags carry CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC (CUPTI documents it for MEMCPY
// only, so a peer copy is never called synchronous); a graph's copy node is launched with
// the graph, not by a blocking call, and is never synchronous either.
template <class CuptiCopy>
inline void parse_copy(const CuptiCopy& from, std::uint32_t runtime_correlation_id, memcpy_kind kind,
                       bool flags_valid, memcpy_record& to, std::int64_t clock_offset_ns) noexcept {
  copy_header(from, to, clock_offset_ns);
  to.runtime_correlation_id = runtime_correlation_id;
  to.kind = kind;
  to.src_kind = to_memory_kind(from.srcKind);
  to.dst_kind = to_memory_kind(from.dstKind);
  to.synchronous = flags_valid && from.graphId == 0 && (from.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) == 0;
  to.bytes = from.bytes;
}

// Each kind's fields (parse_activity and the buffer walk both read records through these).
inline void parse_kernel(const cupti_kernel_record& from, kernel_record& to, std::int64_t clock_offset_ns) noexcept {
  copy_header(from, to, clock_offset_ns);
  to.name = from.name;
  to.grid_x = from.gridX;
  to.grid_y = from.gridY;
  to.grid_z = from.gridZ;
  to.block_x = from.blockX;
  to.block_y = from.blockY;
  to.block_z = from.blockZ;
  to.registers_per_thread = from.registersPerThread;
  to.static_shared_bytes = from.staticSharedMemory;
  to.dynamic_shared_bytes = from.dynamicSharedMemory;
}

inline void parse_memset(const cupti_memset_record& from, memset_record& to, std::int64_t clock_offset_ns) noexcept {
  copy_header(from, to, clock_offset_ns);
  to.bytes = from.bytes;
  to.synchronous = from.graphId == 0 && (from.flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) == 0;
}

inline void parse_sync(const cupti_sync_record& from, sync_record& to, std::int64_t clock_offset_ns) noexcept {
  to = sync_record{};
  to.correlation_id = from.correlationId;
  to.context = from.contextId;
  to.stream = from.streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : from.streamId;
  to.start_ns = to_kscope_ns(from.start, clock_offset_ns);
  to.end_ns = to_kscope_ns(from.end, clock_offset_ns);
  to.kind = to_sync_kind(from.type);
}

inline void parse_graph(const cupti_graph_record& from, graph_record& to, std::int64_t clock_offset_ns) noexcept {
  to = graph_record{};
  to.correlation_id = from.correlationId;
  // INT_MAX: "the start is on the host" (a graph whose first node is a host node).
  to.device = from.deviceId == 0x7fffffffu ? 0 : from.deviceId;
  to.context = from.contextId == 0x7fffffffu ? 0 : from.contextId;
  to.stream = from.streamId;
  to.start_ns = to_kscope_ns(from.start, clock_offset_ns);
  to.end_ns = to_kscope_ns(from.end, clock_offset_ns);
  to.graph_id = from.graphId;
}

// One CUPTI record -> one kscope record. Returns false (out.kind = other) for kinds kscope
// does not use. `clock_offset_ns` is added to every non-zero timestamp (0 when CUPTI's
// timestamp callback already returns kscope's clock).
//
//   kscope::activity_record r;
//   if (detail::parse_activity(record, r, 0)) attribution.add(r);
inline bool parse_activity(const CUpti_Activity* record, activity_record& out,
                           std::int64_t clock_offset_ns) noexcept;

// Size of a record of `kind` in the compile-time headers; 0 for unknown kinds. Besides the
// kinds kscope enables, the API and external-correlation kinds are known: activity kinds
// are process-wide, so another CUPTI user in the process can put them in kscope's buffers,
// and the walk steps over them (parse_activity counts them as `other`).
KSCOPE_DECL std::size_t activity_record_size(CUpti_ActivityKind kind) noexcept;

inline bool parse_activity(const CUpti_Activity* record, activity_record& out,
                           std::int64_t clock_offset_ns) noexcept {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      out.kind = activity_kind::kernel;
      parse_kernel(*reinterpret_cast<const cupti_kernel_record*>(record), out.kernel, clock_offset_ns);
      return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = *reinterpret_cast<const cupti_memcpy_record*>(record);
      out.kind = activity_kind::memcpy;
      parse_copy(m, m.runtimeCorrelationId, to_memcpy_kind(m.copyKind), true, out.memcpy, clock_offset_ns);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer copies: no runtime correlation id of their own
      const auto& m = *reinterpret_cast<const cupti_memcpy_p2p_record*>(record);
      out.kind = activity_kind::memcpy;
      parse_copy(m, 0, memcpy_kind::p2p, false, out.memcpy, clock_offset_ns);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET:
      out.kind = activity_kind::memset;
      parse_memset(*reinterpret_cast<const cupti_memset_record*>(record), out.memset, clock_offset_ns);
      return true;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      out.kind = activity_kind::synchronization;
      parse_sync(*reinterpret_cast<const cupti_sync_record*>(record), out.sync, clock_offset_ns);
      return true;
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
      out.kind = activity_kind::graph;
      parse_graph(*reinterpret_cast<const cupti_graph_record*>(record), out.graph, clock_offset_ns);
      return true;
    default:
      out.kind = activity_kind::other;
      return false;
  }
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t activity_record_size(CUpti_ActivityKind kind) noexcept {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(cupti_kernel_record);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(cupti_memcpy_record);
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return sizeof(cupti_memcpy_p2p_record);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(cupti_memset_record);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(cupti_sync_record);
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: return sizeof(cupti_graph_record);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API: return sizeof(CUpti_ActivityAPI);
    default: return 0;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// What one buffer walk saw.
struct buffer_walk_result {
  std::size_t records = 0;
  bool malformed = false;  // the walk stopped before the end of the valid bytes
};

// Walks with libcupti's cuptiActivityGetNextRecord; visit(const CUpti_Activity*).
template <class Visit>
buffer_walk_result walk_activity_buffer_cupti(const cupti_api& api, std::uint8_t* buffer,
                                              std::size_t valid_bytes, Visit&& visit) {
  buffer_walk_result result;
  CUpti_Activity* record = nullptr;
  for (;;) {
    const CUptiResult status = api.activity_get_next_record(buffer, valid_bytes, &record);
    if (status == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (status != CUPTI_SUCCESS || record == nullptr) {
      result.malformed = true;  // CUPTI_ERROR_INVALID_KIND: incomplete or invalid record
      return result;
    }
    ++result.records;
    visit(static_cast<const CUpti_Activity*>(record));
  }
  // CUPTI ends the walk quietly when fewer bytes than a record remain; a buffer cut
  // mid-record is still malformed, so check that the last record reached the end.
  if (record == nullptr) {
    result.malformed = valid_bytes > 0;
  } else {
    const std::size_t size = activity_record_size(record->kind);
    const auto end = static_cast<std::size_t>(reinterpret_cast<std::uint8_t*>(record) - buffer) + size;
    if (size != 0 && end < valid_bytes) result.malformed = true;
  }
  return result;
}

// Fallback walk by compile-time record sizes (libcupti not loadable; tests only).
template <class Visit>
buffer_walk_result walk_activity_buffer_fallback(const std::uint8_t* buffer, std::size_t valid_bytes,
                                                 Visit&& visit) {
  buffer_walk_result result;
  std::size_t offset = 0;
  while (offset < valid_bytes) {
    if (valid_bytes - offset < sizeof(CUpti_Activity)) {
      result.malformed = true;
      break;
    }
    const auto* record = reinterpret_cast<const CUpti_Activity*>(buffer + offset);
    const std::size_t size = activity_record_size(record->kind);
    if (size == 0 || valid_bytes - offset < size) {
      result.malformed = true;
      break;
    }
    ++result.records;
    visit(record);
    offset += size;
  }
  return result;
}

// The whole path for one completed buffer: walk, parse, attribute. `api` may be null
// (fallback walk). Returns what the walk saw; a malformed tail is counted in the
// attribution (note_malformed), and the records before it are kept.
//
//   detail::consume_activity_buffer(&api, buffer, valid_bytes, attribution, 0);
KSCOPE_DECL buffer_walk_result consume_activity_buffer(const cupti_api* api, std::uint8_t* buffer,
                                                  std::size_t valid_bytes, gpu_attribution& attribution,
                                                  std::int64_t clock_offset_ns);

#if KSCOPE_DETAIL_DEFINITIONS
// The buffer walk's way into gpu_attribution (its friend): one CUPTI record parsed by its
// kind, with parse_activity's conversions, and handed to that kind's path, which add()
// would have reached through a call and a second switch on the kind. The rarer kinds take
// the public entries.
struct attribution_feed {
  static void add(gpu_attribution& attribution, const CUpti_Activity* record, activity_record& scratch,
                  std::int64_t clock_offset_ns) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        parse_kernel(*reinterpret_cast<const cupti_kernel_record*>(record), scratch.kernel, clock_offset_ns);
        attribution.kernel_in(scratch.kernel);
        return;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
      case CUPTI_ACTIVITY_KIND_MEMCPY2:
      case CUPTI_ACTIVITY_KIND_MEMSET:
        parse_activity(record, scratch, clock_offset_ns);
        if (scratch.kind == activity_kind::memset) {
          attribution.memset_in(scratch.memset);
        } else {
          attribution.memcpy_in(scratch.memcpy);
        }
        return;
      default:  // synchronizations, graph replays, kinds kscope does not use (counted)
        parse_activity(record, scratch, clock_offset_ns);
        attribution.add(scratch);
        return;
    }
  }
};

KSCOPE_DECL buffer_walk_result consume_activity_buffer(const cupti_api* api, std::uint8_t* buffer,
                                                  std::size_t valid_bytes, gpu_attribution& attribution,
                                                  std::int64_t clock_offset_ns) {
  buffer_walk_result result;
  if (buffer == nullptr || valid_bytes == 0) return result;
  activity_record parsed;
  auto visit = [&](const CUpti_Activity* record) {
    attribution_feed::add(attribution, record, parsed, clock_offset_ns);
  };
  if (api != nullptr && api->activity_get_next_record != nullptr) {
    result = walk_activity_buffer_cupti(*api, buffer, valid_bytes, visit);
  } else {
    result = walk_activity_buffer_fallback(buffer, valid_bytes, visit);
  }
  if (result.malformed) attribution.note_malformed(1);
  attribution.end_of_buffer();
  return result;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_CUPTI
