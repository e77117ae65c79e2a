// kscope/activity/detail/parse.hpp — the ONE path from a CUPTI activity buffer to attribution.
//
// parse_activity() turns one CUpti_Activity into kscope's plain records (records.hpp);
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
inline bool parse_copy(const CuptiCopy& from, std::uint32_t runtime_correlation_id, memcpy_kind kind,
                       bool flags_valid, activity_record& out, std::int64_t clock_offset_ns) noexcept {
  out.kind = activity_kind::memcpy;
  copy_header(from, out.memcpy, clock_offset_ns);
  out.memcpy.runtime_correlation_id = runtime_correlation_id;
  out.memcpy.kind = kind;
  out.memcpy.src_kind = to_memory_kind(from.srcKind);
  out.memcpy.dst_kind = to_memory_kind(from.dstKind);
  out.memcpy.synchronous =
      flags_valid && from.graphId == 0 && (from.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) == 0;
  out.memcpy.bytes = from.bytes;
  return true;
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
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const cupti_kernel_record*>(record);
      kernel_record& r = out.kernel;
      out.kind = activity_kind::kernel;
      copy_header(*k, r, clock_offset_ns);
      r.name = k->name;
      r.grid_x = k->gridX;
      r.grid_y = k->gridY;
      r.grid_z = k->gridZ;
      r.block_x = k->blockX;
      r.block_y = k->blockY;
      r.block_z = k->blockZ;
      r.registers_per_thread = k->registersPerThread;
      r.static_shared_bytes = k->staticSharedMemory;
      r.dynamic_shared_bytes = k->dynamicSharedMemory;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = *reinterpret_cast<const cupti_memcpy_record*>(record);
      return parse_copy(m, m.runtimeCorrelationId, to_memcpy_kind(m.copyKind), true, out, clock_offset_ns);
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer copies: no runtime correlation id of their own
      const auto& m = *reinterpret_cast<const cupti_memcpy_p2p_record*>(record);
      return parse_copy(m, 0, memcpy_kind::p2p, false, out, clock_offset_ns);
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* s = reinterpret_cast<const cupti_memset_record*>(record);
      memset_record& r = out.memset;
      out.kind = activity_kind::memset;
      copy_header(*s, r, clock_offset_ns);
      r.bytes = s->bytes;
      r.synchronous = s->graphId == 0 && (s->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) == 0;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* y = reinterpret_cast<const cupti_sync_record*>(record);
      sync_record& r = out.sync;
      out.kind = activity_kind::synchronization;
      r = sync_record{};
      r.correlation_id = y->correlationId;
      r.context = y->contextId;
      r.stream = y->streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : y->streamId;
      r.start_ns = to_kscope_ns(y->start, clock_offset_ns);
      r.end_ns = to_kscope_ns(y->end, clock_offset_ns);
      r.kind = to_sync_kind(y->type);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
      const auto* g = reinterpret_cast<const cupti_graph_record*>(record);
      graph_record& r = out.graph;
      out.kind = activity_kind::graph;
      r = graph_record{};
      r.correlation_id = g->correlationId;
      // INT_MAX: "the start is on the host" (a graph whose first node is a host node).
      r.device = g->deviceId == 0x7fffffffu ? 0 : g->deviceId;
      r.context = g->contextId == 0x7fffffffu ? 0 : g->contextId;
      r.stream = g->streamId;
      r.start_ns = to_kscope_ns(g->start, clock_offset_ns);
      r.end_ns = to_kscope_ns(g->end, clock_offset_ns);
      r.graph_id = g->graphId;
      return true;
    }
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
KSCOPE_DECL buffer_walk_result consume_activity_buffer(const cupti_api* api, std::uint8_t* buffer,
                                                  std::size_t valid_bytes, gpu_attribution& attribution,
                                                  std::int64_t clock_offset_ns) {
  buffer_walk_result result;
  if (buffer == nullptr || valid_bytes == 0) return result;
  activity_record parsed;
  auto visit = [&](const CUpti_Activity* record) {
    parse_activity(record, parsed, clock_offset_ns);
    attribution.add(parsed);
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
