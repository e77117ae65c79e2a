// tests/support/cupti_synth.hpp — CUPTI activity buffers built from the REAL record structs.
//
// The CPU tests feed these buffers through the same walk / parse / attribute path the live
// collector uses (detail::consume_activity_buffer), so layouts, kinds and field meanings
// are exercised exactly as CUPTI delivers them. Records are laid out back to back, each
// one the size of its struct: the layout cuptiActivityGetNextRecord walks (checked against
// CUDA 13.0's libcupti on a driverless machine).
//
//   kscope_test::cupti_buffer buf;
//   kscope_test::synth_kernel k;
//   k.correlation = 7; k.start = 1000; k.end = 2000; k.name = "_Z1kv";
//   buf.kernel(k);
//   kscope::detail::consume_activity_buffer(&api, buf.data(), buf.size(), attribution, 0);
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

namespace kscope_test {

struct synth_kernel {
  std::uint32_t correlation = 0;
  std::uint32_t stream = 7;
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  const char* name = "_Z6kernelv";
  std::uint32_t device = 0;
  std::uint32_t context = 1;
  std::int32_t grid[3] = {1, 1, 1};
  std::int32_t block[3] = {128, 1, 1};
  std::uint16_t registers = 32;
  std::int32_t static_shared = 0;
  std::int32_t dynamic_shared = 0;
  std::uint32_t graph_id = 0;
  std::uint64_t graph_node_id = 0;
};

struct synth_memcpy {
  std::uint32_t correlation = 0;
  std::uint32_t runtime_correlation = 0;
  std::uint32_t stream = 7;
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  CUpti_ActivityMemcpyKind copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  std::uint64_t bytes = 0;
  std::uint32_t device = 0;
  std::uint32_t context = 1;
  std::uint32_t graph_id = 0;
  std::uint64_t graph_node_id = 0;
  // Where each side lives, and the flags: cudaMemcpyAsync between unknown kinds by default.
  CUpti_ActivityMemoryKind src_kind = CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
  CUpti_ActivityMemoryKind dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
  std::uint8_t flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
};

struct synth_memset {
  std::uint32_t correlation = 0;
  std::uint32_t stream = 7;
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t bytes = 0;
  std::uint32_t device = 0;
  std::uint32_t context = 1;
  std::uint16_t flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;  // cudaMemsetAsync by default
  std::uint32_t graph_id = 0;
};

// A growable, 8-byte aligned activity buffer (CUPTI's alignment requirement).
class cupti_buffer {
 public:
  explicit cupti_buffer(std::size_t capacity_bytes = std::size_t{1} << 20)
      : capacity_(capacity_bytes), storage_(allocate(capacity_bytes)) {}

  CUpti_ActivityKernel10& kernel(const synth_kernel& k) {
    auto& r = append<CUpti_ActivityKernel10>();
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.correlationId = k.correlation;
    r.streamId = k.stream;
    r.start = k.start;
    r.end = k.end;
    r.completed = k.end;
    r.name = k.name;
    r.deviceId = k.device;
    r.contextId = k.context;
    r.gridX = k.grid[0];
    r.gridY = k.grid[1];
    r.gridZ = k.grid[2];
    r.blockX = k.block[0];
    r.blockY = k.block[1];
    r.blockZ = k.block[2];
    r.registersPerThread = k.registers;
    r.staticSharedMemory = k.static_shared;
    r.dynamicSharedMemory = k.dynamic_shared;
    r.graphId = k.graph_id;
    r.graphNodeId = k.graph_node_id;
    r.gridId = ++grid_ids_;
    return r;
  }

  CUpti_ActivityMemcpy6& memcpy(const synth_memcpy& m) {
    auto& r = append<CUpti_ActivityMemcpy6>();
    r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    r.correlationId = m.correlation;
    r.runtimeCorrelationId = m.runtime_correlation;
    r.streamId = m.stream;
    r.start = m.start;
    r.end = m.end;
    r.copyKind = static_cast<std::uint8_t>(m.copy_kind);
    r.bytes = m.bytes;
    r.deviceId = m.device;
    r.contextId = m.context;
    r.graphId = m.graph_id;
    r.graphNodeId = m.graph_node_id;
    r.copyCount = 1;
    r.srcKind = static_cast<std::uint8_t>(m.src_kind);
    r.dstKind = static_cast<std::uint8_t>(m.dst_kind);
    r.flags = m.flags;
    return r;
  }

  CUpti_ActivityMemset4& memset(const synth_memset& s) {
    auto& r = append<CUpti_ActivityMemset4>();
    r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    r.correlationId = s.correlation;
    r.streamId = s.stream;
    r.start = s.start;
    r.end = s.end;
    r.bytes = s.bytes;
    r.deviceId = s.device;
    r.contextId = s.context;
    r.flags = s.flags;
    r.graphId = s.graph_id;
    return r;
  }

  // A peer-to-peer copy (CUPTI_ACTIVITY_KIND_MEMCPY2).
  CUpti_ActivityMemcpyPtoP4& peer_memcpy(std::uint32_t correlation, std::uint64_t start, std::uint64_t end,
                                         std::uint64_t bytes) {
    auto& r = append<CUpti_ActivityMemcpyPtoP4>();
    r.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    r.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    r.srcKind = r.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    r.correlationId = correlation;
    r.start = start;
    r.end = end;
    r.bytes = bytes;
    r.contextId = 1;
    r.streamId = 7;
    return r;
  }

  // A synchronization record (host times, like the API records).
  CUpti_ActivitySynchronization2& sync(std::uint32_t correlation, CUpti_ActivitySynchronizationType type,
                                       std::uint64_t start, std::uint64_t end, std::uint32_t stream = 7) {
    auto& r = append<CUpti_ActivitySynchronization2>();
    r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.type = type;
    r.correlationId = correlation;
    r.start = start;
    r.end = end;
    r.contextId = 1;
    r.streamId = stream;
    r.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    return r;
  }

  // A CUDA-graph replay traced as one record (graph-level trace).
  CUpti_ActivityGraphTrace2& graph(std::uint32_t correlation, std::uint32_t graph_id, std::uint64_t start,
                                   std::uint64_t end, std::uint32_t stream = 7, std::uint32_t device = 0) {
    auto& r = append<CUpti_ActivityGraphTrace2>();
    r.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
    r.correlationId = correlation;
    r.start = start;
    r.end = end;
    r.deviceId = device;
    r.graphId = graph_id;
    r.contextId = 1;
    r.streamId = stream;
    r.endDeviceId = device;
    r.endContextId = 1;
    return r;
  }

  // An external-correlation record: a kind kscope does not enable, but another CUPTI user
  // in the process can, so it may share kscope's buffers.
  CUpti_ActivityExternalCorrelation& external(std::uint32_t correlation, std::uint64_t external_id,
                                              CUpti_ExternalCorrelationKind kind =
                                                  CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
    auto& r = append<CUpti_ActivityExternalCorrelation>();
    r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    r.externalKind = kind;
    r.externalId = external_id;
    r.correlationId = correlation;
    return r;
  }

  // A driver API record: a kind kscope reads past without using.
  CUpti_ActivityAPI& driver_api(std::uint32_t correlation, std::uint64_t start, std::uint64_t end) {
    auto& r = append<CUpti_ActivityAPI>();
    r.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    r.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
    r.correlationId = correlation;
    r.start = start;
    r.end = end;
    return r;
  }

  // Bytes that do not form a valid record (kind 0 = CUPTI_ACTIVITY_KIND_INVALID), as a
  // corrupted or foreign buffer would hold.
  void garbage(std::size_t bytes = 64) {
    ensure(bytes);
    std::memset(storage_.get() + size_, 0, bytes);
    size_ += bytes;
  }

  [[nodiscard]] std::uint8_t* data() noexcept { return storage_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  void clear() noexcept { size_ = 0; }

 private:
  struct aligned_delete {
    void operator()(std::uint8_t* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };
  static std::unique_ptr<std::uint8_t[], aligned_delete> allocate(std::size_t bytes) {
    auto* p = new (std::align_val_t{64}) std::uint8_t[bytes];
    std::memset(p, 0, bytes);
    return std::unique_ptr<std::uint8_t[], aligned_delete>(p);
  }

  void ensure(std::size_t extra) {
    if (size_ + extra <= capacity_) return;
    std::size_t bigger = capacity_ * 2;
    while (bigger < size_ + extra) bigger *= 2;
    auto next = allocate(bigger);
    std::memcpy(next.get(), storage_.get(), size_);
    storage_ = std::move(next);
    capacity_ = bigger;
  }

  template <class Record>
  Record& append() {
    static_assert(sizeof(Record) % 8 == 0, "CUPTI records are 8-byte multiples");
    ensure(sizeof(Record));
    auto* r = reinterpret_cast<Record*>(storage_.get() + size_);
    std::memset(static_cast<void*>(r), 0, sizeof(Record));
    size_ += sizeof(Record);
    return *r;
  }

  std::size_t capacity_;
  std::size_t size_ = 0;
  std::int64_t grid_ids_ = 0;
  std::unique_ptr<std::uint8_t[], aligned_delete> storage_;
};

}  // namespace kscope_test
