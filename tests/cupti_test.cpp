// Tests for the CUPTI side on the CPU: synthetic buffers of REAL CUPTI record structs
// (tests/support/cupti_synth.hpp) go through the very path a completed CUPTI buffer takes
// (detail::consume_activity_buffer: libcupti's cuptiActivityGetNextRecord, parse_activity,
// gpu_attribution). libcupti's walker needs no GPU or driver, so it is used here whenever
// libcupti loads; without it the documented fallback walk is used and the case says so.
#include <kscope/activity/collector.hpp>

#include <doctest/doctest.h>

#if KSCOPE_HAS_CUPTI

#include "support/cupti_synth.hpp"

#include <kscope/core/detail/symbol_table.hpp>
#include <kscope/cupti/detail/profiler_api.hpp>
#include <kscope/pm_sampling/detail/pm_sampling_api.hpp>
#include <kscope/warp_stalls/detail/pc_sampling_api.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using kscope_test::cupti_buffer;
using kscope_test::synth_kernel;
using kscope_test::synth_memcpy;
using kscope_test::synth_memset;

const kscope::detail::cupti_api* cupti() {
  static kscope::detail::cupti_api api;
  static const bool loaded = [] {
    std::string why;
    const bool ok = kscope::detail::load_cupti(api, "", why);
    if (!ok) MESSAGE("libcupti not loadable (" << why << "): the fallback walk is tested instead");
    return ok;
  }();
  return loaded ? &api : nullptr;
}

class test_scope {
 public:
  explicit test_scope(kscope::node_id node) : saved_(kscope::detail::this_thread_state().current) {
    kscope::detail::this_thread_state().current = node;
  }
  ~test_scope() { kscope::detail::this_thread_state().current = saved_; }
  test_scope(const test_scope&) = delete;
  test_scope& operator=(const test_scope&) = delete;

 private:
  kscope::node_id saved_;
};

synth_kernel kernel_at(std::uint32_t correlation, std::uint64_t start, std::uint64_t end,
                       std::uint32_t stream = 7, const char* name = "_Z6kernelv") {
  synth_kernel k;
  k.correlation = correlation;
  k.start = start;
  k.end = end;
  k.stream = stream;
  k.name = name;
  return k;
}

std::size_t consume(cupti_buffer& b, kscope::gpu_attribution& a, std::int64_t offset = 0) {
  return kscope::detail::consume_activity_buffer(cupti(), b.data(), b.size(), a, offset).records;
}

}  // namespace

TEST_CASE("libcupti loads without a GPU and walks synthetic buffers like the fallback") {
  const auto* api = cupti();
  if (api != nullptr) {
    MESSAGE("walking with " << api->path << " (CUPTI " << api->version << ")");
    CHECK_UNARY(api->activity_get_next_record != nullptr);
  }
  cupti_buffer b;
  b.kernel(kernel_at(1, 100, 200));
  synth_memcpy m;
  m.correlation = 2;
  m.start = 300;
  m.end = 400;
  m.bytes = 4096;
  b.memcpy(m);
  synth_memset s;
  s.correlation = 3;
  s.start = 500;
  s.end = 600;
  s.bytes = 64;
  b.memset(s);
  b.external(4, 99);
  b.driver_api(4, 700, 800);

  std::vector<int> kinds_fallback, kinds_cupti;
  auto fb = kscope::detail::walk_activity_buffer_fallback(
      b.data(), b.size(), [&](const CUpti_Activity* r) { kinds_fallback.push_back(r->kind); });
  CHECK(fb.records == 5);
  CHECK_FALSE(fb.malformed);
  CHECK(kinds_fallback == std::vector<int>{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                           CUPTI_ACTIVITY_KIND_DRIVER});
  if (api != nullptr) {
    auto cw = kscope::detail::walk_activity_buffer_cupti(
        *api, b.data(), b.size(), [&](const CUpti_Activity* r) { kinds_cupti.push_back(r->kind); });
    CHECK(cw.records == 5);
    CHECK_FALSE(cw.malformed);
    CHECK(kinds_cupti == kinds_fallback);
  }
}

TEST_CASE("malformed buffers: records before the damage are kept, the damage is counted") {
  auto check_walks = [](cupti_buffer& b, std::size_t valid, std::size_t good_records) {
    auto fb = kscope::detail::walk_activity_buffer_fallback(b.data(), valid, [](const CUpti_Activity*) {});
    CHECK(fb.records == good_records);
    CHECK(fb.malformed);
    if (const auto* api = cupti()) {
      auto cw = kscope::detail::walk_activity_buffer_cupti(*api, b.data(), valid, [](const CUpti_Activity*) {});
      CHECK(cw.records == good_records);
      CHECK(cw.malformed);
    }
  };
  SUBCASE("invalid bytes in the middle") {
    cupti_buffer b;
    b.kernel(kernel_at(1, 10, 20));
    b.garbage(64);
    b.kernel(kernel_at(1, 30, 40));
    check_walks(b, b.size(), 1);
  }
  SUBCASE("an unknown kind") {
    cupti_buffer b;
    b.kernel(kernel_at(1, 10, 20));
    b.kernel(kernel_at(1, 30, 40)).kind = static_cast<CUpti_ActivityKind>(9999);
    check_walks(b, b.size(), 1);
  }
  SUBCASE("cut in the middle of a record") {
    cupti_buffer b;
    b.kernel(kernel_at(1, 10, 20));
    b.kernel(kernel_at(1, 30, 40));
    check_walks(b, b.size() - 100, 1);
  }
  SUBCASE("through the attribution") {
    cupti_buffer b;
    b.kernel(kernel_at(1, 10, 20));
    b.garbage(8);
    kscope::gpu_attribution a;
    a.launches().record_launch(1, 3, 0);
    CHECK(consume(b, a) == 1);
    auto r = a.report();
    CHECK(r.counters.dropped_malformed == 1);
    CHECK(r.find(3)->kernel_count == 1);
  }
}

TEST_CASE("parse_activity copies every field kscope uses, on kscope's clock") {
  cupti_buffer b;
  synth_kernel k = kernel_at(11, 1000, 3000, 13, "_Z4gemmv");
  k.device = 1;
  k.context = 5;
  k.grid[0] = 132;
  k.grid[1] = 2;
  k.grid[2] = 3;
  k.block[0] = 256;
  k.block[1] = 4;
  k.block[2] = 1;
  k.registers = 168;
  k.static_shared = 1024;
  k.dynamic_shared = 49152;
  k.graph_id = 8;
  k.graph_node_id = 0x100000002ull;
  b.kernel(k);
  kscope::activity_record r;
  const auto* record = reinterpret_cast<const CUpti_Activity*>(b.data());
  REQUIRE(kscope::detail::parse_activity(record, r, 500));
  CHECK(r.kind == kscope::activity_kind::kernel);
  CHECK(r.kernel.correlation_id == 11);
  CHECK(r.kernel.device == 1);
  CHECK(r.kernel.context == 5);
  CHECK(r.kernel.stream == 13);
  CHECK(r.kernel.start_ns == 1500);  // + clock offset
  CHECK(r.kernel.end_ns == 3500);
  CHECK(std::string(r.kernel.name) == "_Z4gemmv");
  CHECK(r.kernel.grid_x == 132);
  CHECK(r.kernel.grid_y == 2);
  CHECK(r.kernel.grid_z == 3);
  CHECK(r.kernel.block_x == 256);
  CHECK(r.kernel.block_y == 4);
  CHECK(r.kernel.block_z == 1);
  CHECK(r.kernel.registers_per_thread == 168);
  CHECK(r.kernel.static_shared_bytes == 1024);
  CHECK(r.kernel.dynamic_shared_bytes == 49152);
  CHECK(r.kernel.graph_id == 8);
  CHECK(r.kernel.graph_node_id == 0x100000002ull);

  b.clear();
  synth_memcpy m;
  m.correlation = 21;
  m.runtime_correlation = 20;
  m.start = 0;  // not timed: must stay 0 so the attribution drops it
  m.end = 50;
  m.bytes = 1 << 20;
  m.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.stream = 14;
  m.graph_id = 2;
  m.graph_node_id = 3;
  b.memcpy(m);
  REQUIRE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 500));
  CHECK(r.kind == kscope::activity_kind::memcpy);
  CHECK(r.memcpy.correlation_id == 21);
  CHECK(r.memcpy.runtime_correlation_id == 20);
  CHECK(r.memcpy.start_ns == 0);
  CHECK(r.memcpy.end_ns == 550);
  CHECK(r.memcpy.kind == kscope::memcpy_kind::d2h);
  CHECK(r.memcpy.bytes == (1u << 20));
  CHECK(r.memcpy.stream == 14);
  CHECK(r.memcpy.graph_id == 2);
  CHECK(r.memcpy.graph_node_id == 3);

  b.clear();
  synth_memset s;
  s.correlation = 31;
  s.start = 10;
  s.end = 20;
  s.bytes = 256;
  s.stream = 15;
  b.memset(s);
  REQUIRE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 0));
  CHECK(r.kind == kscope::activity_kind::memset);
  CHECK(r.memset.correlation_id == 31);
  CHECK(r.memset.bytes == 256);
  CHECK(r.memset.stream == 15);

  // A synchronization: host times, its kind, the stream; a context synchronize has none.
  b.clear();
  b.sync(51, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 1000, 4000, 16);
  REQUIRE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 100));
  CHECK(r.kind == kscope::activity_kind::synchronization);
  CHECK(r.sync.correlation_id == 51);
  CHECK(r.sync.kind == kscope::sync_kind::stream);
  CHECK(r.sync.start_ns == 1100);
  CHECK(r.sync.end_ns == 4100);
  CHECK(r.sync.stream == 16);
  b.clear();
  b.sync(52, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 10, 20, CUPTI_SYNCHRONIZATION_INVALID_VALUE);
  REQUIRE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 0));
  CHECK(r.sync.kind == kscope::sync_kind::context);
  CHECK(r.sync.stream == 0);
  CHECK(kscope::detail::activity_record_size(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) ==
        sizeof(CUpti_ActivitySynchronization2));

  // Kinds kscope does not use, whoever enabled them: not parsed, `other`.
  b.clear();
  b.external(41, 7);
  CHECK_FALSE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 0));
  CHECK(r.kind == kscope::activity_kind::other);
  b.clear();
  b.external(42, 5, CUPTI_EXTERNAL_CORRELATION_KIND_OPENACC);
  CHECK_FALSE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 0));
  CHECK(r.kind == kscope::activity_kind::other);
  b.clear();
  b.driver_api(43, 1, 2);
  CHECK_FALSE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 0));
  CHECK(r.kind == kscope::activity_kind::other);

  // Every copy direction CUPTI reports.
  using kscope::detail::to_memcpy_kind;
  CHECK(to_memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) == kscope::memcpy_kind::h2d);
  CHECK(to_memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD) == kscope::memcpy_kind::d2d);
  CHECK(to_memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOH) == kscope::memcpy_kind::h2h);
  CHECK(to_memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP) == kscope::memcpy_kind::p2p);
  CHECK(to_memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_ATOD) == kscope::memcpy_kind::array);
  CHECK(to_memcpy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN) == kscope::memcpy_kind::unknown);
}

// Issue 28: a copy's memory kinds and the async flag, read from the real CUPTI structs and
// carried into the node's pageable and synchronous buckets.
TEST_CASE("copy records carry their memory kinds and the async flag into the node's buckets") {
  using kscope::memory_kind;
  const auto parse_copy = [](const synth_memcpy& m) {
    cupti_buffer b;
    b.memcpy(m);
    kscope::activity_record r;
    REQUIRE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 0));
    REQUIRE(r.kind == kscope::activity_kind::memcpy);
    return r.memcpy;
  };
  synth_memcpy m;
  m.correlation = 61;
  m.start = 100;
  m.end = 700;
  m.bytes = 2u << 20;
  m.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.src_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  m.flags = 0;  // cudaMemcpy
  kscope::memcpy_record c = parse_copy(m);
  CHECK(c.src_kind == memory_kind::device);
  CHECK(c.dst_kind == memory_kind::pageable);
  CHECK(c.pageable());
  CHECK(c.synchronous);
  m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;  // cudaMemcpyAsync: still pageable, not "synchronous API"
  c = parse_copy(m);
  CHECK(c.pageable());
  CHECK_FALSE(c.synchronous);
  m.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.flags = 0;
  c = parse_copy(m);
  CHECK(c.dst_kind == memory_kind::pinned);
  CHECK_FALSE(c.pageable());
  CHECK(c.synchronous);
  m.graph_id = 5;  // a graph's copy node is never a blocking call
  CHECK_FALSE(parse_copy(m).synchronous);
  m.graph_id = 0;

  using kscope::detail::to_memory_kind;
  CHECK(to_memory_kind(CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN) == memory_kind::unknown);
  CHECK(to_memory_kind(CUPTI_ACTIVITY_MEMORY_KIND_ARRAY) == memory_kind::array);
  CHECK(to_memory_kind(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED) == memory_kind::managed);
  CHECK(to_memory_kind(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC) == memory_kind::device_static);
  CHECK(to_memory_kind(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC) == memory_kind::managed_static);
  CHECK(to_memory_kind(200) == memory_kind::unknown);

  // A peer copy carries no async flag CUPTI documents: never called synchronous.
  {
    cupti_buffer b;
    b.peer_memcpy(62, 10, 20, 1024).flags = 0;
    kscope::activity_record r;
    REQUIRE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 0));
    CHECK(r.memcpy.kind == kscope::memcpy_kind::p2p);
    CHECK_FALSE(r.memcpy.synchronous);
  }

  // Memsets: the flag, and graph nodes never.
  {
    cupti_buffer b;
    synth_memset s;
    s.correlation = 63;
    s.start = 10;
    s.end = 30;
    s.bytes = 4096;
    s.flags = 0;
    b.memset(s);
    kscope::activity_record r;
    REQUIRE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 0));
    CHECK(r.memset.synchronous);
    b.clear();
    s.flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
    b.memset(s);
    REQUIRE(kscope::detail::parse_activity(reinterpret_cast<const CUpti_Activity*>(b.data()), r, 0));
    CHECK_FALSE(r.memset.synchronous);
  }

  // Through the whole path into one node: a pageable D2H cudaMemcpy, a pinned H2D cudaMemcpy,
  // a pinned cudaMemcpyAsync and a synchronous cudaMemset.
  cupti_buffer b;
  synth_memcpy pageable = m;
  pageable.correlation = 71;
  pageable.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  pageable.flags = 0;
  b.memcpy(pageable);
  synth_memcpy pinned_sync;
  pinned_sync.correlation = 72;
  pinned_sync.start = 800;
  pinned_sync.end = 900;
  pinned_sync.bytes = 4096;
  pinned_sync.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  pinned_sync.src_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  pinned_sync.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  pinned_sync.flags = 0;
  b.memcpy(pinned_sync);
  synth_memcpy pinned_async = pinned_sync;
  pinned_async.correlation = 73;
  pinned_async.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  b.memcpy(pinned_async);
  synth_memset set;
  set.correlation = 74;
  set.start = 1000;
  set.end = 1040;
  set.bytes = 256;
  set.flags = 0;
  b.memset(set);
  kscope::gpu_attribution a;
  for (std::uint32_t id = 71; id <= 74; ++id) a.launches().record_launch(id, 9, 0);
  CHECK(consume(b, a) == 4);
  const auto report = a.report();
  const kscope::node_gpu_activity* node = report.find(9);
  REQUIRE(node != nullptr);
  const auto d2h = static_cast<std::size_t>(kscope::copy_direction::d2h);
  CHECK(node->memcpy[d2h].count == 1);
  CHECK(node->memcpy_pageable[d2h].count == 1);
  CHECK(node->memcpy_pageable[d2h].bytes == (2u << 20));
  CHECK(node->memcpy_pageable[d2h].ns == 600);
  CHECK(node->pageable_copies().count == 1);
  CHECK(node->memcpy_sync.count == 1);  // the pinned cudaMemcpy; the pageable one is not counted twice
  CHECK(node->memcpy_sync.bytes == 4096);
  CHECK(node->memcpy_sync.ns == 100);
  CHECK(node->memset_sync.count == 1);
  CHECK(node->memset_sync.ns == 40);
  CHECK(node->memcpy[static_cast<std::size_t>(kscope::copy_direction::h2d)].count == 2);
}

TEST_CASE("4 threads x 2 streams x nested scopes, graphs, copies, out-of-order buffers") {
  kscope::gpu_attribution a;
  kscope::correlation_table& table = a.launches();
  std::atomic<std::uint32_t> next_id{1};
  // The graph the threads replay: built in scope 999 (nodes 1-3), instantiated (101-103).
  constexpr kscope::node_id graph_builder = 999;
  for (std::uint64_t g = 1; g <= 3; ++g) {
    a.graph_nodes().record_created(g, graph_builder);
    REQUIRE(a.graph_nodes().record_cloned(100 + g, g));
  }

  // What the "GPU" will report, built from real launches on real threads.
  struct launched {
    std::uint32_t id;
    kscope::node_id node;
    std::uint32_t stream;
    int kind;  // 0 kernel, 1 h2d copy, 2 d2h copy, 3 memset, 4 graph (3 kernels)
  };
  constexpr int threads = 4;
  constexpr int launches_per_thread = 1000;
  std::vector<std::vector<launched>> per_thread(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const kscope::node_id outer_node = static_cast<kscope::node_id>(100 + 10 * t);
      test_scope outer(outer_node);
      for (int i = 0; i < launches_per_thread; ++i) {
        const std::uint32_t stream = static_cast<std::uint32_t>(20 + 2 * t + (i % 2));
        const int kind = i % 50 == 0 ? 4 : i % 20 == 0 ? 1 : i % 21 == 0 ? 2 : i % 23 == 0 ? 3 : 0;
        const kscope::node_id inner_node = static_cast<kscope::node_id>(outer_node + 1 + (i % 2));
        if (i % 3 == 0) {  // launched from the outer scope itself
          const std::uint32_t id = next_id.fetch_add(1);
          kscope::record_launch_from_this_thread(table, id);
          per_thread[t].push_back({id, outer_node, stream, kind});
        } else {
          test_scope inner(inner_node);
          const std::uint32_t id = next_id.fetch_add(1);
          kscope::record_launch_from_this_thread(table, id);
          per_thread[t].push_back({id, inner_node, stream, kind});
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  // A few launches with no scope open.
  std::vector<launched> all;
  for (int i = 0; i < 5; ++i) {
    const std::uint32_t id = next_id.fetch_add(1);
    kscope::record_launch_from_this_thread(table, id);
    all.push_back({id, kscope::unscoped_node, 3, 0});
  }
  for (auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());

  // Expected per node, and the records spread over 5 buffers in a shuffled order; the
  // buffers then complete out of order.
  struct expect {
    std::uint64_t kernels = 0, h2d = 0, d2h = 0, memsets = 0, graph_kernels = 0;
  };
  std::map<kscope::node_id, expect> expected;
  std::mt19937 rng(12345);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<cupti_buffer> buffers(5);
  std::uint64_t t = 1'000'000;
  std::size_t n = 0;
  for (const launched& l : all) {
    cupti_buffer& b = buffers[n++ % buffers.size()];
    expect& e = expected[l.node];
    switch (l.kind) {
      case 0:
        b.kernel(kernel_at(l.id, t, t + 500, l.stream));
        ++e.kernels;
        break;
      case 1:
      case 2: {
        synth_memcpy m;
        m.correlation = l.id;
        m.stream = l.stream;
        m.start = t;
        m.end = t + 300;
        m.bytes = 1000;
        m.copy_kind = l.kind == 1 ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD : CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
        b.memcpy(m);
        ++(l.kind == 1 ? e.h2d : e.d2h);
        break;
      }
      case 3: {
        synth_memset s;
        s.correlation = l.id;
        s.stream = l.stream;
        s.start = t;
        s.end = t + 100;
        s.bytes = 64;
        b.memset(s);
        ++e.memsets;
        break;
      }
      default:
        // A graph launch: 3 kernels with the launch's correlation id, in 2 buffers.
        for (int g = 0; g < 3; ++g) {
          synth_kernel k = kernel_at(l.id, t + 1000 * g, t + 1000 * g + 200, l.stream, "_Z10graph_stepv");
          k.graph_id = 1;
          k.graph_node_id = static_cast<std::uint64_t>(101 + g);
          buffers[(n + static_cast<std::size_t>(g)) % buffers.size()].kernel(k);
          ++e.kernels;
          ++e.graph_kernels;
        }
    }
    t += 1000;
  }
  // Damaged records ride along and must not disturb the rest.
  buffers[0].kernel(kernel_at(all[0].id, 0, 100));      // start = 0
  buffers[1].kernel(kernel_at(all[1].id, 5000, 4000));  // end < start
  buffers[2].driver_api(all[2].id, 1, 2);               // a kind kscope ignores

  std::size_t records = 0;
  for (std::size_t i : {3u, 0u, 4u, 2u, 1u}) records += consume(buffers[i], a);
  auto r = a.report();

  CHECK(r.counters.records_seen == records);
  CHECK(r.counters.dropped_zero_start == 1);
  CHECK(r.counters.dropped_end_before_start == 1);
  CHECK(r.counters.ignored_records == 1);
  CHECK(r.counters.unattributed == 0);
  CHECK(r.counters.unscoped == 5);
  std::uint64_t total_kernels = 0, graph_kernels = 0;
  for (const auto& entry : expected) {
    const kscope::node_id node = entry.first;
    const expect& e = entry.second;
    const auto* got = r.find(node);
    REQUIRE_MESSAGE(got != nullptr, "node " << node);
    CHECK(got->kernel_count == e.kernels);
    CHECK(got->copies(kscope::copy_direction::h2d).count == e.h2d);
    CHECK(got->copies(kscope::copy_direction::d2h).count == e.d2h);
    CHECK(got->memset.count == e.memsets);
    if (e.graph_kernels > 0) {  // every replay says the graph was built in scope 999
      REQUIRE(got->graph_capture.size() == 1);
      CHECK(got->graph_capture[0].captured_in == graph_builder);
      CHECK(got->graph_capture[0].kernel_count == e.graph_kernels);
      CHECK(got->graph_capture[0].kernel_ns == 200 * static_cast<std::int64_t>(e.graph_kernels));
    } else {
      CHECK(got->graph_capture.empty());
    }
    total_kernels += e.kernels;
    graph_kernels += e.graph_kernels;
  }
  CHECK(graph_kernels == 3 * threads * (launches_per_thread / 50));
  CHECK(r.counters.graph_records == graph_kernels);
  CHECK(r.counters.graph_built_elsewhere == graph_kernels);
  CHECK(r.counters.graph_capture_unknown == 0);
  CHECK(r.counters.kernel_records == total_kernels);
  CHECK(r.nodes.size() == expected.size());
  auto top = a.top_kernels();
  auto graph_row = std::find_if(top.begin(), top.end(), [](const auto& k) { return k.name == "graph_step()"; });
  REQUIRE(graph_row != top.end());
  CHECK(graph_row->calls == 3 * threads * (launches_per_thread / 50));
}

namespace {

// Fake graph nodes for the resource-callback path: CUgraphNode is an opaque pointer, and
// the id lookup (cuptiGetGraphNodeId in the collector) is the fake below.
struct fake_graph_node {
  std::uint64_t id;
};
CUptiResult fake_graph_node_id(CUgraphNode node, std::uint64_t* id) {
  if (node == nullptr || id == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = reinterpret_cast<const fake_graph_node*>(node)->id;
  return CUPTI_SUCCESS;
}
CUgraphNode as_node(fake_graph_node& n) { return reinterpret_cast<CUgraphNode>(&n); }

}  // namespace

TEST_CASE("graph-node callbacks: capture scope from the creating thread, clones inherit, replay shows it") {
  using kscope::detail::graph_node_event;
  using kscope::detail::record_graph_node_event;
  kscope::gpu_attribution a;
  fake_graph_node captured[3] = {{11}, {12}, {13}};
  fake_graph_node instantiated[3] = {{0x700000001ull}, {0x700000002ull}, {0x700000003ull}};
  CUpti_GraphData graph{};
  CUpti_ResourceData resource{};
  resource.resourceDescriptor = &graph;
  {
    // Stream capture inside scope "build" (node 40): CUPTI calls back on this thread.
    test_scope build(40);
    for (fake_graph_node& n : captured) {
      graph.node = as_node(n);
      graph.nodeType = CU_GRAPH_NODE_TYPE_KERNEL;
      CHECK(record_graph_node_event(a.graph_nodes(), CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, resource,
                                    &fake_graph_node_id, kscope::detail::current_node()) ==
            graph_node_event::recorded);
    }
  }
  {
    // cudaGraphInstantiate in another scope (50): the copies keep "build", not 50.
    test_scope elsewhere(50);
    for (int i = 0; i < 3; ++i) {
      graph.node = as_node(instantiated[i]);
      graph.originalNode = as_node(captured[i]);
      CHECK(record_graph_node_event(a.graph_nodes(), CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, resource,
                                    &fake_graph_node_id, kscope::detail::current_node()) ==
            graph_node_event::recorded);
    }
  }
  // What cannot be used is said, never guessed.
  fake_graph_node stranger{99}, copy_of_stranger{100};
  graph.node = as_node(copy_of_stranger);
  graph.originalNode = as_node(stranger);
  CHECK(record_graph_node_event(a.graph_nodes(), CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, resource,
                                &fake_graph_node_id, 0) == graph_node_event::clone_of_unknown);
  graph.node = nullptr;
  CHECK(record_graph_node_event(a.graph_nodes(), CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, resource,
                                &fake_graph_node_id, 0) == graph_node_event::no_id);
  CHECK(record_graph_node_event(a.graph_nodes(), CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, resource, nullptr, 0) ==
        graph_node_event::no_id);
  CUpti_ResourceData no_descriptor{};
  CHECK(record_graph_node_event(a.graph_nodes(), CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, no_descriptor,
                                &fake_graph_node_id, 0) == graph_node_event::no_id);
  CHECK(record_graph_node_event(a.graph_nodes(), CUPTI_CBID_RESOURCE_GRAPH_CREATED, resource,
                                &fake_graph_node_id, 0) == graph_node_event::ignored);

  // Three replays in scope "replay" (60), as CUPTI records: one correlation id per launch,
  // the instantiated nodes' ids; plus one kernel of the never-seen node 100.
  cupti_buffer b;
  std::uint64_t t = 10'000;
  for (std::uint32_t launch = 0; launch < 3; ++launch) {
    a.launches().record_launch(700 + launch, 60, 0);
    for (int i = 0; i < 3; ++i, t += 1000) {
      synth_kernel k = kernel_at(700 + launch, t, t + 250);
      k.graph_id = 5;
      k.graph_node_id = instantiated[i].id;
      b.kernel(k);
    }
  }
  synth_kernel unknown = kernel_at(702, t, t + 250);
  unknown.graph_id = 6;
  unknown.graph_node_id = copy_of_stranger.id;
  b.kernel(unknown);
  CHECK(consume(b, a) == 10);
  const auto r = a.report();
  const kscope::node_gpu_activity* replay = r.find(60);
  REQUIRE(replay != nullptr);
  CHECK(replay->kernel_count == 10);
  REQUIRE(replay->graph_capture.size() == 1);
  CHECK(replay->graph_capture[0].captured_in == 40);
  CHECK(replay->graph_capture[0].kernel_count == 9);
  CHECK(replay->graph_capture[0].kernel_ns == 9 * 250);
  CHECK(r.counters.graph_records == 10);
  CHECK(r.counters.graph_built_elsewhere == 9);
  CHECK(r.counters.graph_capture_unknown == 1);
  CHECK(r.find(40) == nullptr);
  CHECK(r.find(50) == nullptr);
}

TEST_CASE("foreign kinds in the buffers (external correlation, API records) are counted, not used") {
  // Activity kinds are process-wide: another CUPTI user in the process can enable API or
  // external-correlation records, and they land in kscope's buffers next to the kernels.
  kscope::gpu_attribution a;
  cupti_buffer mixed;
  for (std::uint32_t id = 1; id <= 100; ++id) {
    a.launches().record_launch(id, static_cast<kscope::node_id>(1 + id % 4), 9);
    mixed.driver_api(id, 1000 * id - 5, 1000 * id - 1);
    // An external id that looks like a (node, thread) pair must not move the kernel.
    mixed.external(id, (std::uint64_t{3} << 32) | 77);
    mixed.kernel(kernel_at(id, 1000 * id, 1000 * id + 10));
  }
  CHECK(consume(mixed, a) == 300);
  auto r = a.report();
  CHECK(r.counters.records_seen == 300);
  CHECK(r.counters.ignored_records == 200);
  CHECK(r.counters.kernel_records == 100);
  CHECK(r.counters.unattributed == 0);
  CHECK(r.counters.dropped_malformed == 0);
  for (kscope::node_id node = 1; node <= 4; ++node) CHECK(r.find(node)->kernel_count == 25);
  CHECK(r.find(77) == nullptr);
  CHECK(r.recent.at(0).thread_index == 9);
}

TEST_CASE("the collector degrades with one clear warning and still takes buffers") {
  auto& c = kscope::cupti_collector::global();

  ::setenv("KSCOPE_CUPTI", "0", 1);
  CHECK_FALSE(c.start());
  CHECK(c.status().state == kscope::cupti_state::disabled);
  ::unsetenv("KSCOPE_CUPTI");

  const bool started = c.start();
  const kscope::cupti_status st = c.status();
  MESSAGE("collector: " << std::string(kscope::to_string(st.state)) << ": " << st.message);
  if (started) {
    // A machine with a GPU: the collector really runs.
    CHECK(st.state == kscope::cupti_state::running);
    CHECK(st.clock != kscope::cupti_clock::none);
    CHECK(st.callbacks_enabled > 0);
    CHECK(st.pool_bytes == 64u << 20);
  } else {
    CHECK(st.state != kscope::cupti_state::running);
    // What remains is said as it is: CUDA-event times with a GPU, none without one.
    const kscope::gpu_availability& gpu = kscope::probe_gpu();
    if (gpu.available()) {
      CHECK(st.message.find("GPU times from CUDA events only") != std::string::npos);
    } else {
      CHECK(st.message == "CUPTI not started: " + gpu.reason + "; no usable GPU, so no GPU times");
      CHECK(st.message.find("events only") == std::string::npos);
    }
  }
  // Synthetic buffers through the collector's own path (same lock, same walk).
  cupti_buffer b;
  b.kernel(kernel_at(0xfffff0u, 100, 200));
  c.launches().record_launch(0xfffff0u, 4242, 1);
  // A graph kernel whose node the graph-node callback saw built in scope 4141.
  synth_kernel replayed = kernel_at(0xfffff0u, 300, 400);
  replayed.graph_id = 2;
  replayed.graph_node_id = 0xabc0001ull;
  b.kernel(replayed);
  c.graph_nodes().record_created(0xabc0001ull, 4141);
  c.consume_buffer(b.data(), b.size());
  c.flush();
  kscope::cupti_snapshot s = c.snapshot();
  REQUIRE(s.activity.find(4242) != nullptr);
  CHECK(s.activity.find(4242)->kernel_count == 2);
  REQUIRE(s.activity.find(4242)->graph_capture.size() == 1);
  CHECK(s.activity.find(4242)->graph_capture[0].captured_in == 4141);
  CHECK(s.graph_node_errors == 0);
  if (!started) {
    REQUIRE_FALSE(s.warnings.empty());
    CHECK(s.warnings.front() == st.message);
    // One warning per problem, not one per start() call.
    CHECK_FALSE(c.start());
    const auto again = c.snapshot().warnings;
    CHECK(std::count(again.begin(), again.end(), st.message) == 1);
  }
  c.reset();
  CHECK(c.snapshot().activity.find(4242) == nullptr);
  c.stop();  // harmless in every state
  c.stop();
}

TEST_CASE("library search order: environment, explicit path, toolkit dir, sonames") {
  ::setenv("KSCOPE_CUPTI_LIBRARY", "/nonexistent/libcupti.so.99", 1);
  auto candidates = kscope::detail::cupti_library_candidates("/explicit/libcupti.so");
  ::unsetenv("KSCOPE_CUPTI_LIBRARY");
  REQUIRE(candidates.size() >= 5);
  CHECK(candidates[0] == "/nonexistent/libcupti.so.99");
  CHECK(candidates[1] == "/explicit/libcupti.so");
#ifdef KSCOPE_CUDA_LIBRARY_DIR
  CHECK(candidates[2] == std::string(KSCOPE_CUDA_LIBRARY_DIR) + "/libcupti.so.13");
#endif
  CHECK(candidates.back() == "libcupti.so");
  CHECK(std::find(candidates.begin(), candidates.end(), "libcupti.so.13") != candidates.end());

  // A bad override does not stop the search; what was tried is named on failure.
  kscope::detail::cupti_api api;
  std::string why;
  ::setenv("KSCOPE_CUPTI_LIBRARY", "/nonexistent/libcupti.so.99", 1);
  const bool ok = kscope::detail::load_cupti(api, "", why);
  ::unsetenv("KSCOPE_CUPTI_LIBRARY");
  if (cupti() != nullptr) {
    CHECK(ok);
    CHECK(api.path.find("libcupti") != std::string::npos);
  } else {
    CHECK_FALSE(ok);
    CHECK(why.find("/nonexistent/libcupti.so.99") != std::string::npos);
  }
}

TEST_CASE("a symbol table fills every entry and names the first required one missing") {
  void* libm = ::dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);  // any library: cos is there, the rest is not
  REQUIRE(libm != nullptr);
  using unary_fn = double (*)(double);
  unary_fn cosine = nullptr, absent = nullptr, first = nullptr, second = nullptr;
  // A target found missing is reset, whatever it held.
  absent = first = second = [](double x) { return x; };
  const kscope::detail::symbol_entry entries[] = {
      kscope::detail::required_symbol("cos", cosine),
      kscope::detail::optional_symbol("kscope_no_such_optional", absent),
      kscope::detail::required_symbol("kscope_no_such_first", first),
      kscope::detail::required_symbol("kscope_no_such_second", second),
  };
  const char* missing = kscope::detail::resolve_symbols(libm, entries);
  REQUIRE(missing != nullptr);
  CHECK(std::string(missing) == "kscope_no_such_first");
  REQUIRE_UNARY(cosine != nullptr);
  CHECK(cosine(0.0) == 1.0);
  CHECK_UNARY(absent == nullptr);
  CHECK_UNARY(first == nullptr);
  CHECK_UNARY(second == nullptr);

  // Only optional ones missing: nothing is named.
  const kscope::detail::symbol_entry complete[] = {
      kscope::detail::required_symbol("cos", cosine),
      kscope::detail::optional_symbol("kscope_no_such_optional", absent),
  };
  CHECK(kscope::detail::resolve_symbols(libm, complete) == nullptr);
  unary_fn single = nullptr;
  CHECK(kscope::detail::resolve_symbol(libm, "cos", single));
  CHECK_UNARY(single == cosine);
  CHECK_FALSE(kscope::detail::resolve_symbol(libm, "kscope_no_such_optional", single));
  CHECK_UNARY(single == nullptr);
  ::dlclose(libm);
}

TEST_CASE("the libcupti found here resolves every required entry of each CUPTI table") {
  const auto* api = cupti();
  if (api == nullptr) {
    MESSAGE("libcupti not loadable here: the tables are checked only against libm");
    return;
  }
  MESSAGE("tables resolved from " << api->path << " (CUPTI " << api->version << ")");
  // The activity table: load_cupti() resolved it; once more on the same handle.
  kscope::detail::cupti_api again;
  again.handle = api->handle;
  CHECK(kscope::detail::resolve_cupti_symbols(again) == "");
  CHECK_UNARY(again.activity_enable == api->activity_enable);
  CHECK_UNARY(again.get_version != nullptr);  // optional, but every CUPTI since 4.0 has it
#if KSCOPE_HAS_RANGE_PROFILER
  kscope::detail::profiler_api profiler;
  CHECK(kscope::detail::resolve_profiler_symbols(api->handle, profiler) == "");
  CHECK(profiler.resolved());
  CHECK_UNARY(profiler.host_evaluate_to_gpu_values != nullptr);
  MESSAGE("cuptiProfilerDeviceSupported (optional) " << std::string(profiler.device_supported ? "present" : "absent"));
#endif
#if KSCOPE_HAS_PM_SAMPLING
  kscope::detail::pm_sampling_api pm;
  CHECK(kscope::detail::resolve_pm_sampling_symbols(api->handle, pm) == "");
  CHECK(pm.resolved());
  CHECK_UNARY(pm.get_sample_info != nullptr);
#endif
#if KSCOPE_HAS_PC_SAMPLING
  kscope::detail::pc_sampling_api pc;
  CHECK(kscope::detail::resolve_pc_sampling_symbols(api->handle, pc) == "");
  CHECK(pc.resolved());
  CHECK_UNARY(pc.get_stall_reasons != nullptr);
#endif
}

#else  // !KSCOPE_HAS_CUPTI

TEST_CASE("without CUPTI headers the collector reports itself unavailable") {
  auto& c = kscope::cupti_collector::global();
  CHECK_FALSE(c.start());
  CHECK(c.status().message.find("CUPTI unavailable") != std::string::npos);
}

#endif

TEST_CASE("graph-level trace records walk, parse and scale like the hand-built ones") {
  kscope::gpu_attribution a;
  cupti_buffer b;
  a.launches().record_launch(10, 3, 0);
  a.launches().record_launch(11, 3, 0);
  for (int i = 0; i < 3; ++i) {
    synth_kernel k = kernel_at(10, 1000000 + 15000 * i, 1000000 + 15000 * i + 10000);
    k.graph_id = 5;
    k.graph_node_id = 100 + static_cast<std::uint64_t>(i);
    b.kernel(k);
  }
  b.graph(11, 5, 2000000, 2080000);
  CHECK(consume(b, a) == 4);
  const auto r = a.report();
  CHECK(r.counters.graph_launch_records == 1);
  CHECK(r.counters.dropped_malformed == 0);
  const kscope::node_gpu_activity* n = r.find(3);
  REQUIRE(n != nullptr);
  CHECK(n->graph_replays == 2);
  CHECK(n->kernel_count == 6);              // 3 traced + 3 scaled
  CHECK(n->scaled_kernel_ns == 60000);      // 80 us span x 30 us kernels / 40 us span
  const kscope::gpu_activity_event& last = r.recent.back();
  CHECK(last.kind == kscope::activity_kind::graph);
  CHECK(last.graph_id == 5);
  CHECK(last.start_ns == 2000000);
}
