// Tests for kscope/activity/attribution.hpp and the headers it is built from (records,
// correlation, communication, activity, interval union, kernel table) — pure: no CUDA,
// also built with ThreadSanitizer — and the pure activity buffer pool. Records here are
// kscope's plain structs; the same records built as real CUPTI structs and walked through
// libcupti are in cupti_test.cpp.
#include <kscope/activity/attribution.hpp>
#include <kscope/activity/options.hpp>
#include <kscope/activity/graph_sampling.hpp>
#include <kscope/evidence/trace_windows.hpp>
#include <kscope/activity/detail/buffer_pool.hpp>
#include <kscope/core/detail/reservoir.hpp>
#include <kscope/core/stats.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace attribution_test {  // one per file: the unit tests build as one program

namespace {

using kscope::correlation_table;
using kscope::gpu_attribution;
using kscope::kernel_record;
using kscope::memcpy_kind;
using kscope::memcpy_record;
using kscope::memset_record;
using kscope::node_id;

// Opens a "scope" the way kscope::scope does for attribution: sets the thread's current
// node and restores the previous one on exit.
class test_scope {
 public:
  explicit test_scope(node_id node) : saved_(kscope::detail::this_thread_state().current) {
    kscope::detail::this_thread_state().current = node;
  }
  ~test_scope() { kscope::detail::this_thread_state().current = saved_; }
  test_scope(const test_scope&) = delete;
  test_scope& operator=(const test_scope&) = delete;

 private:
  node_id saved_;
};

kernel_record make_kernel(std::uint32_t correlation, std::int64_t start, std::int64_t end,
                          std::uint32_t stream = 7, const char* name = "_Z6kernelv") {
  kernel_record k;
  k.correlation_id = correlation;
  k.start_ns = start;
  k.end_ns = end;
  k.stream = stream;
  k.name = name;
  k.grid_x = 4;
  k.grid_y = k.grid_z = 1;
  k.block_x = 128;
  k.block_y = k.block_z = 1;
  k.registers_per_thread = 32;
  return k;
}

memcpy_record make_copy(std::uint32_t correlation, memcpy_kind kind, std::uint64_t bytes,
                        std::int64_t start, std::int64_t end) {
  memcpy_record m;
  m.correlation_id = correlation;
  m.kind = kind;
  m.bytes = bytes;
  m.start_ns = start;
  m.end_ns = end;
  return m;
}

memset_record make_memset(std::uint32_t correlation, std::uint64_t bytes, std::int64_t start, std::int64_t end) {
  memset_record s;
  s.correlation_id = correlation;
  s.bytes = bytes;
  s.start_ns = start;
  s.end_ns = end;
  return s;
}

}  // namespace

TEST_CASE("correlation_table: found, evicted and unknown") {
  correlation_table table(1000);
  CHECK(table.capacity() == 1024);  // rounded up to a power of two
  using status = correlation_table::lookup_status;

  CHECK(table.find(5).status == status::unknown);
  table.record_launch(5, 42, 3);
  auto hit = table.find(5);
  REQUIRE(hit.status == status::found);
  CHECK(hit.origin.node == 42);
  CHECK(hit.origin.thread_index == 3);

  // Lookups do not consume: a graph launch's kernels all find the same entry.
  for (int i = 0; i < 5; ++i) CHECK(table.find(5).status == status::found);

  // id 5 + 1024 shares the slot: once written, id 5 is evicted, and a still-unwritten id
  // older than the slot's content is reported evicted as well.
  table.record_launch(5 + 1024, 43, 3);
  CHECK(table.find(5).status == status::evicted);
  CHECK(table.find(5 + 1024).origin.node == 43);
  // An id newer than what the slot holds has simply not been launched yet.
  CHECK(table.find(5 + 2048).status == status::unknown);

  // Correlation id 0 never matches (CUPTI uses it for "no API call").
  table.record_launch(0, 9, 9);
  CHECK(table.find(0).status == status::unknown);

  // Wrap-around of the 32-bit id: 0xffffffff is older than 1023 (same slot).
  table.record_launch(0xffffffffu, 50, 1);
  CHECK(table.find(0xffffffffu).origin.node == 50);
  table.record_launch(1023, 51, 1);
  CHECK(table.find(0xffffffffu).status == status::evicted);
  CHECK(table.memory_bytes() == 1024 * 16);
}

TEST_CASE("launch hook records the node open on the launching thread, nested scopes exact") {
  correlation_table table;
  const std::uint32_t me = kscope::detail::this_thread_state().thread_index;
  kscope::record_launch_from_this_thread(table, 100);  // no scope open
  {
    test_scope outer(10);
    kscope::record_launch_from_this_thread(table, 101);
    {
      test_scope inner(11);
      kscope::record_launch_from_this_thread(table, 102);
    }
    kscope::record_launch_from_this_thread(table, 103);
  }
  CHECK(table.find(100).origin.node == kscope::unscoped_node);
  CHECK(table.find(101).origin.node == 10);
  CHECK(table.find(102).origin.node == 11);  // innermost, never the parent
  CHECK(table.find(103).origin.node == 10);
  CHECK(table.find(102).origin.thread_index == me);

  // A runtime launch triggers the driver callback too; when CUPTI gives both the same id,
  // the second call is skipped (cheap) and the first store stands.
  {
    test_scope s(20);
    kscope::record_launch_from_this_thread(table, 200);
  }
  {
    test_scope s(21);
    kscope::record_launch_from_this_thread(table, 200);
  }
  CHECK(table.find(200).origin.node == 20);
  // Another table is not confused by the per-thread "last id".
  correlation_table other(1024);
  {
    test_scope s(22);
    kscope::record_launch_from_this_thread(other, 200);
  }
  CHECK(other.find(200).origin.node == 22);
}

TEST_CASE("interval_union: hand-computed unions") {
  using kscope::detail::interval_union;
  {
    interval_union u;
    CHECK(u.total_ns() == 0);
  }
  {
    interval_union u;  // overlap + disjoint: [0,20) + [30,40) = 30
    u.add(0, 10);
    u.add(5, 20);
    u.add(30, 40);
    CHECK(u.total_ns() == 30);
  }
  {
    interval_union u;  // same intervals out of order
    u.add(30, 40);
    u.add(5, 20);
    u.add(0, 10);
    CHECK(u.total_ns() == 30);
  }
  {
    interval_union u;  // containment, touching, empty
    u.add(0, 100);
    u.add(10, 20);
    u.add(100, 110);
    u.add(200, 200);
    u.add(300, 250);
    CHECK(u.total_ns() == 110);
  }
  {
    interval_union u(8);  // many disjoint intervals: folded, still exact
    for (int i = 0; i < 1000; ++i) u.add(10 * i, 10 * i + 5);
    CHECK(u.total_ns() == 5000);
    CHECK(u.size() <= 3 * 8);  // bounded: past twice the cap the oldest are folded
    CHECK(u.clipped() == 0);
    // An interval far older than everything kept cannot be merged exactly any more: it is
    // clipped to the frontier (here: dropped entirely) and counted.
    u.add(0, 3);
    CHECK(u.clipped() == 1);
    CHECK(u.total_ns() == 5000);
  }
}

TEST_CASE("interval_union: out of order by more than a buffer, and one long interval over many short ones") {
  using kscope::detail::interval_union;
  {
    // 300 short kernels (more than the cap of 256 a buffer's worth would fill), then, late,
    // a CUDA-graph replay traced as one record that spans them all: exact, nothing clipped.
    interval_union u(256);
    for (int i = 0; i < 300; ++i) u.add(1'000'000 + 10'000 * i, 1'000'000 + 10'000 * i + 4'000);
    u.add(1'000'000, 1'000'000 + 10'000 * 300);
    CHECK(u.total_ns() == 10'000 * 300);
    CHECK(u.clipped() == 0);
  }
  {
    // A record from another stream's buffer, 1 s older than the newest one, after 400
    // others: still merged exactly (the fold margin is 2 s).
    interval_union u(256);
    for (int i = 0; i < 400; ++i) u.add(2'000'000'000 + 5'000'000LL * i, 2'000'000'000 + 5'000'000LL * i + 1'000'000);
    const std::int64_t late_start = 2'000'000'000 + 5'000'000LL * 200 - 500'000;  // overlaps kernel 200 by half
    u.add(late_start, late_start + 1'000'000);
    CHECK(u.total_ns() == 400 * 1'000'000LL + 500'000);
    CHECK(u.clipped() == 0);
  }
  {
    // Ten seconds of kernels: what ended 2 s before the newest is folded, memory stays bounded.
    interval_union u(64);
    for (int i = 0; i < 10'000; ++i) u.add(1'000'000LL * i, 1'000'000LL * i + 100'000);
    CHECK(u.total_ns() == 10'000 * 100'000LL);
    CHECK(u.size() <= 3 * 64);
    CHECK(u.clipped() == 0);
  }
}

TEST_CASE("per node: busy is the union over streams, idle the gaps inside the span") {
  gpu_attribution a;
  a.launches().record_launch(1, 5, 0);
  a.launches().record_launch(2, 5, 0);
  a.launches().record_launch(3, 5, 0);
  a.launches().record_launch(4, 5, 0);
  a.launches().record_launch(5, 5, 0);
  a.add_kernel(make_kernel(1, 100, 200, /*stream*/ 1));
  a.add_kernel(make_kernel(2, 300, 400, 1));
  a.add_kernel(make_kernel(3, 150, 350, 2));
  a.add_memcpy(make_copy(4, memcpy_kind::h2d, 1000, 450, 500));
  a.add_memset(make_memset(5, 64, 600, 650));

  auto r = a.report();
  const auto* n = r.find(5);
  REQUIRE(n != nullptr);
  CHECK(n->kernel_count == 3);
  CHECK(n->kernel_ns == 100 + 100 + 200);
  CHECK(n->busy_ns == 300);          // [100, 400)
  CHECK(n->first_start_ns == 100);
  CHECK(n->last_end_ns == 650);
  // span 550; covered: kernels 300 + copy 50 + memset 50 = 400 -> idle 150
  CHECK(n->idle_ns == 150);
  CHECK(n->copies(kscope::copy_direction::h2d).bytes == 1000);
  CHECK(n->copies(kscope::copy_direction::h2d).ns == 50);
  CHECK(n->memset.count == 1);
  CHECK(n->memset.bytes == 64);
  CHECK(r.counters.records_seen == 5);
  CHECK(r.counters.kernel_records == 3);
  CHECK(r.find(6) == nullptr);
}

TEST_CASE("synchronizations: host waits per node, never GPU work; a stream waiting on an event is not a host wait") {
  gpu_attribution a;
  a.launches().record_launch(1, 5, 0);
  a.launches().record_launch(2, 5, 0);
  a.launches().record_launch(3, 5, 0);
  a.launches().record_launch(4, 5, 0);
  a.launches().record_launch(5, 6, 0);
  a.add_kernel(make_kernel(1, 100, 200));
  kscope::sync_record y;
  y.correlation_id = 2;
  y.kind = kscope::sync_kind::stream;
  y.start_ns = 150;
  y.end_ns = 900;  // the host waited 750 ns, long after the kernel
  a.add_sync(y);
  y.correlation_id = 3;
  y.kind = kscope::sync_kind::context;
  y.start_ns = 1000;
  y.end_ns = 1100;
  a.add_sync(y);
  y.correlation_id = 4;
  y.kind = kscope::sync_kind::stream_wait_event;  // the GPU waits, not the host
  a.add_sync(y);
  y.correlation_id = 5;
  y.kind = kscope::sync_kind::event;
  y.start_ns = 0;  // CUPTI could not time it
  a.add_sync(y);

  const auto r = a.report();
  const auto* n = r.find(5);
  REQUIRE(n != nullptr);
  CHECK(n->host_sync.count == 2);
  CHECK(n->host_sync.ns == 750 + 100);
  CHECK(n->host_sync.stream == 1);
  CHECK(n->host_sync.context == 1);
  CHECK(n->host_sync.event == 0);
  // Host time is not GPU work: the span, busy and idle are the kernel's alone.
  CHECK(n->busy_ns == 100);
  CHECK(n->first_start_ns == 100);
  CHECK(n->last_end_ns == 200);
  CHECK(n->idle_ns == 0);
  CHECK(r.find(6) == nullptr);  // its only record had no timestamps
  CHECK(r.counters.sync_records == 3);
  CHECK(r.counters.dropped_zero_start == 1);
  CHECK(r.counters.records_seen == 5);
}

TEST_CASE("CUDA graph fan-out: every kernel of one correlation id is attributed") {
  gpu_attribution a;
  a.launches().record_launch(77, 9, 2);
  for (int i = 0; i < 3; ++i) {
    kernel_record k = make_kernel(77, 1000 + 100 * i, 1050 + 100 * i);
    k.graph_id = 4;
    k.graph_node_id = 1000 + static_cast<std::uint64_t>(i);
    a.add_kernel(k);
  }
  auto r = a.report();
  REQUIRE(r.find(9) != nullptr);
  CHECK(r.find(9)->kernel_count == 3);
  REQUIRE(r.recent.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(r.recent[i].graph_id == 4);
    CHECK(r.recent[i].graph_node_id == 1000 + static_cast<std::uint64_t>(i));
    CHECK(r.recent[i].thread_index == 2);
    CHECK(r.recent[i].node == 9);
  }
  CHECK(r.counters.unattributed == 0);
}

TEST_CASE("unscoped, unattributed, dropped and malformed are all counted") {
  gpu_attribution a;
  a.launches().record_launch(1, kscope::unscoped_node, 0);  // no scope open at launch
  a.add_kernel(make_kernel(1, 10, 20));
  a.add_kernel(make_kernel(2, 30, 40));  // launch never seen: unattributed
  a.add_kernel(make_kernel(0, 50, 60));  // no correlation at all: unattributed
  a.add_kernel(make_kernel(3, 0, 60));   // start = 0
  a.add_kernel(make_kernel(4, 70, 65));  // end < start
  a.note_malformed();
  a.note_dropped_by_cupti(12);
  auto before = a.counters();
  CHECK(before.unscoped == 1);
  CHECK(before.unattributed == 2);  // decided on arrival, nothing waits
  CHECK(before.dropped_zero_start == 1);
  CHECK(before.dropped_end_before_start == 1);

  auto r = a.report();
  CHECK(r.counters.records_seen == 5);
  CHECK(r.counters.unattributed == 2);
  CHECK(r.counters.unattributed_evicted == 0);
  CHECK(r.counters.kernel_records == 3);
  CHECK(r.counters.dropped_malformed == 1);
  CHECK(r.counters.dropped_by_cupti == 12);
  const auto* unscoped = r.find(kscope::unscoped_node);
  REQUIRE(unscoped != nullptr);
  CHECK(unscoped->kernel_count == 3);  // valid ones only; dropped ones never averaged in
  CHECK(unscoped->kernel_ns == 30);
  auto has = [&](const char* text) {
    return std::any_of(r.warnings.begin(), r.warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
  };
  CHECK(has("12 GPU activity records dropped by CUPTI"));
  CHECK(has("start = 0"));
  CHECK(has("end < start"));
  CHECK(has("2 GPU records whose launch was not seen"));
}

// ---- the one correlation rule (correlation_table::find_launch) ---------------------------

TEST_CASE("find_launch: correlation id first, then the runtime id; found > evicted > unknown") {
  correlation_table table(1024);
  using status = correlation_table::lookup_status;
  table.record_launch(10, 1, 0);  // hooked driver call
  table.record_launch(20, 2, 0);  // hooked runtime call
  // Found by the first id: the second is not consulted, even when it is known too.
  CHECK(table.find_launch(10).origin.node == 1);
  CHECK(table.find_launch(10, 20).origin.node == 1);
  // The first unknown, the second found: the second's launch.
  REQUIRE(table.find_launch(11, 20).status == status::found);
  CHECK(table.find_launch(11, 20).origin.node == 2);
  // Both unknown; id 0 (no API call) is never found, alone or as a fallback.
  CHECK(table.find_launch(12, 13).status == status::unknown);
  CHECK(table.find_launch(0).status == status::unknown);
  CHECK(table.find_launch(0, 0).status == status::unknown);
  CHECK(table.find_launch(0, 20).origin.node == 2);

  // Ids 30 and 31 are overwritten by launches one table later (same slots).
  table.record_launch(30, 3, 0);
  table.record_launch(31, 3, 0);
  table.record_launch(30 + 1024, 4, 0);
  table.record_launch(31 + 1024, 4, 0);
  // Evicted first id, found second: found (the record still has its launch).
  CHECK(table.find_launch(30, 20).origin.node == 2);
  // Evicted beats unknown, in either position: the launch was seen, its mapping is lost.
  CHECK(table.find_launch(30, 14).status == status::evicted);
  CHECK(table.find_launch(14, 31).status == status::evicted);
  CHECK(table.find_launch(30, 31).status == status::evicted);
  // The same id twice is one lookup's answer.
  CHECK(table.find_launch(30, 30).status == status::evicted);
  CHECK(table.find_launch(10, 10).origin.node == 1);
}

TEST_CASE("a record whose launch is unknown goes to (unscoped) at once; its launch never rewrites it") {
  gpu_attribution a;
  a.add_kernel(make_kernel(600, 10, 30));
  auto r = a.report();
  REQUIRE(r.find(kscope::unscoped_node) != nullptr);
  CHECK(r.find(kscope::unscoped_node)->kernel_count == 1);
  CHECK(r.counters.unattributed == 1);
  CHECK(r.counters.unattributed_evicted == 0);
  CHECK(r.counters.unscoped == 0);  // `unscoped` means "launched with no scope open"
  CHECK(r.recent.at(0).thread_index == kscope::unknown_thread);
  CHECK(r.recent.at(0).node == kscope::unscoped_node);
  bool warned = false;
  for (const auto& w : r.warnings) warned = warned || w.find("1 GPU records whose launch was not seen") == 0;
  CHECK(warned);

  // The launch hook writes at API entry, before the GPU can produce the record, so a
  // mapping that shows up afterwards is not this record's: the decision stands. A later
  // record with the id (another kernel of the same graph launch) finds it.
  a.launches().record_launch(600, 33, 6);
  a.end_of_buffer();
  a.add_kernel(make_kernel(600, 40, 50));
  r = a.report();
  CHECK(r.find(kscope::unscoped_node)->kernel_count == 1);
  REQUIRE(r.find(33) != nullptr);
  CHECK(r.find(33)->kernel_count == 1);
  CHECK(r.counters.unattributed == 1);
  CHECK(r.recent.at(1).thread_index == 6);
}

TEST_CASE("a late record, buffers after its launch, is attributed until its entry is reused") {
  kscope::attribution_options o;
  o.correlation_capacity = 1024;
  gpu_attribution a(o);
  // A graph launch (id 5, node 8, thread 4) whose kernels trickle in over many buffers
  // while 1000 newer launches go through the table.
  a.launches().record_launch(5, 8, 4);
  std::int64_t t = 100;
  for (std::uint32_t id = 6; id < 1006; ++id) {
    a.launches().record_launch(id, 9, 0);
    a.add_kernel(make_kernel(id, t, t + 10));
    if (id % 100 == 0) {
      a.add_kernel(make_kernel(5, t + 10, t + 20));  // one more kernel of the graph
      a.end_of_buffer();
    }
    t += 30;
  }
  auto r = a.report();
  REQUIRE(r.find(8) != nullptr);
  CHECK(r.find(8)->kernel_count == 10);
  CHECK(r.counters.unattributed == 0);
  // Once CUPTI has handed out `capacity` more ids, the slot is reused: the next kernel of
  // that launch cannot be placed and says so, instead of landing on id 1029's node.
  a.launches().record_launch(5 + 1024, 10, 0);
  a.add_kernel(make_kernel(5, t, t + 10));
  r = a.report();
  CHECK(r.find(8)->kernel_count == 10);
  CHECK(r.find(10) == nullptr);
  CHECK(r.counters.unattributed == 1);
  CHECK(r.counters.unattributed_evicted == 1);
  CHECK(r.find(kscope::unscoped_node)->kernel_count == 1);
}

TEST_CASE("copies and memsets follow the same rule as kernels") {
  kscope::attribution_options o;
  o.correlation_capacity = 1024;
  gpu_attribution a(o);
  a.launches().record_launch(40, 2, 1);            // runtime id of copy A
  a.launches().record_launch(50, 3, 1);            // driver id of copy B, runtime id evicted below
  a.launches().record_launch(51, 3, 1);
  a.launches().record_launch(51 + 1024, 4, 1);     // evicts 51
  auto copy_a = make_copy(41, memcpy_kind::h2d, 100, 10, 20);  // driver id unknown, runtime found
  copy_a.runtime_correlation_id = 40;
  auto copy_b = make_copy(50, memcpy_kind::d2h, 200, 20, 30);  // driver id found, runtime evicted
  copy_b.runtime_correlation_id = 51;
  auto copy_c = make_copy(52, memcpy_kind::d2d, 300, 30, 40);  // driver unknown, runtime evicted
  copy_c.runtime_correlation_id = 51;
  auto copy_d = make_copy(53, memcpy_kind::d2d, 400, 40, 50);  // no id known at all
  a.add_memcpy(copy_a);
  a.add_memcpy(copy_b);
  a.add_memcpy(copy_c);
  a.add_memcpy(copy_d);
  memset_record unknown_memset;
  unknown_memset.correlation_id = 54;
  unknown_memset.start_ns = 50;
  unknown_memset.end_ns = 60;
  a.add_memset(unknown_memset);
  auto r = a.report();
  using d = kscope::copy_direction;
  REQUIRE(r.find(2) != nullptr);
  CHECK(r.find(2)->copies(d::h2d).bytes == 100);
  REQUIRE(r.find(3) != nullptr);
  CHECK(r.find(3)->copies(d::d2h).bytes == 200);
  const auto* unscoped = r.find(kscope::unscoped_node);
  REQUIRE(unscoped != nullptr);
  CHECK(unscoped->copies(d::d2d).bytes == 700);
  CHECK(unscoped->memset.count == 1);
  CHECK(r.counters.unattributed == 3);
  CHECK(r.counters.unattributed_evicted == 1);  // copy C: its runtime id was seen, then lost
  CHECK(r.find(4) == nullptr);
}

TEST_CASE("memcpy directions and the runtime correlation id fallback") {
  gpu_attribution a;
  a.launches().record_launch(1, 2, 0);
  a.launches().record_launch(90, 2, 0);  // a runtime id: the driver id 91 was not hooked
  a.add_memcpy(make_copy(1, memcpy_kind::h2d, 100, 10, 20));
  a.add_memcpy(make_copy(1, memcpy_kind::d2h, 200, 20, 40));
  a.add_memcpy(make_copy(1, memcpy_kind::d2d, 300, 40, 70));
  a.add_memcpy(make_copy(1, memcpy_kind::p2p, 400, 70, 110));
  auto copy = make_copy(91, memcpy_kind::d2d, 1000, 110, 120);
  copy.runtime_correlation_id = 90;
  a.add_memcpy(copy);
  auto r = a.report();
  const auto* n = r.find(2);
  REQUIRE(n != nullptr);
  using d = kscope::copy_direction;
  CHECK(n->copies(d::h2d).bytes == 100);
  CHECK(n->copies(d::d2h).bytes == 200);
  CHECK(n->copies(d::d2d).bytes == 1300);
  CHECK(n->copies(d::d2d).count == 2);
  CHECK(n->copies(d::d2d).ns == 40);
  CHECK(n->copies(d::other).bytes == 400);  // peer-to-peer is not on-device d2d
  CHECK(n->kernel_count == 0);
  CHECK(n->busy_ns == 0);
  CHECK(r.recent.at(0).name == "Memcpy HtoD");
  CHECK(r.counters.unattributed == 0);
}

TEST_CASE("pageable and synchronous copies: their own buckets, no copy counted twice") {
  gpu_attribution a;
  a.launches().record_launch(1, 2, 0);
  using kscope::memory_kind;
  auto pageable = make_copy(1, memcpy_kind::d2h, 2 << 20, 10, 610);  // cudaMemcpy into malloc'ed memory
  pageable.src_kind = memory_kind::device;
  pageable.dst_kind = memory_kind::pageable;
  pageable.synchronous = true;
  a.add_memcpy(pageable);
  auto pageable_async = make_copy(1, memcpy_kind::h2d, 1000, 700, 800);  // cudaMemcpyAsync from malloc'ed memory
  pageable_async.src_kind = memory_kind::pageable;
  pageable_async.dst_kind = memory_kind::device;
  a.add_memcpy(pageable_async);
  auto pinned_sync = make_copy(1, memcpy_kind::h2d, 64, 900, 910);
  pinned_sync.src_kind = memory_kind::pinned;
  pinned_sync.synchronous = true;
  a.add_memcpy(pinned_sync);
  a.add_memcpy(make_copy(1, memcpy_kind::d2d, 4096, 920, 930));  // async, device: no bucket
  kscope::memset_record set;
  set.correlation_id = 1;
  set.bytes = 128;
  set.start_ns = 940;
  set.end_ns = 945;
  set.synchronous = true;
  a.add_memset(set);
  set.synchronous = false;
  a.add_memset(set);
  const auto r = a.report();
  const auto* n = r.find(2);
  REQUIRE(n != nullptr);
  using d = kscope::copy_direction;
  const auto at = [](d dir) { return static_cast<std::size_t>(dir); };
  CHECK(n->memcpy_pageable[at(d::d2h)].count == 1);
  CHECK(n->memcpy_pageable[at(d::d2h)].bytes == (2u << 20));
  CHECK(n->memcpy_pageable[at(d::d2h)].ns == 600);
  CHECK(n->memcpy_pageable[at(d::h2d)].count == 1);
  CHECK(n->pageable_copies().count == 2);
  CHECK(n->pageable_copies().ns == 700);
  CHECK(n->memcpy_sync.count == 1);  // the pinned one: the pageable cudaMemcpy is counted as pageable only
  CHECK(n->memcpy_sync.bytes == 64);
  CHECK(n->memset_sync.count == 1);
  CHECK(n->memset_sync.ns == 5);
  CHECK(n->memset.count == 2);
  CHECK(n->copies(d::h2d).count == 2);  // the direction totals hold every copy
}

TEST_CASE("top kernels: sorted by total time, demangled, median, launch config") {
  kscope::attribution_options o;
  o.median_samples = 1000;
  gpu_attribution a(o);
  a.launches().record_launch(1, 1, 0);
  const char* axpy = "_ZN6kscope6detail4axpyEPfS1_f";
  const char* plain = "my_c_kernel";  // extern "C": stays as is
  const char* gemm = "_Z4gemmv";
  // axpy: 4 calls of 10, 20, 30, 100 -> total 160, median (20 + 30) / 2 = 25
  a.add_kernel(make_kernel(1, 100, 110, 1, axpy));
  a.add_kernel(make_kernel(1, 200, 220, 1, axpy));
  a.add_kernel(make_kernel(1, 300, 330, 1, axpy));
  auto bigger = make_kernel(1, 400, 500, 1, axpy);
  bigger.grid_x = 8;  // another launch configuration
  a.add_kernel(bigger);
  // plain: 3 calls of 50 -> total 150, median 50
  for (int i = 0; i < 3; ++i) a.add_kernel(make_kernel(1, 1000 + 100 * i, 1050 + 100 * i, 1, plain));
  // gemm: 1 call of 500
  auto g = make_kernel(1, 5000, 5500, 1, gemm);
  g.static_shared_bytes = 1024;
  g.dynamic_shared_bytes = 4096;
  g.registers_per_thread = 168;
  a.add_kernel(g);

  auto top = a.top_kernels();
  REQUIRE(top.size() == 3);
  CHECK(top[0].name == "gemm()");
  CHECK(top[0].total_ns == 500);
  CHECK(top[0].registers_per_thread == 168);
  CHECK(top[0].static_shared_bytes == 1024);
  CHECK(top[0].dynamic_shared_bytes == 4096);
  CHECK(top[1].name == "kscope::detail::axpy(float*, float*, float)");
  CHECK(top[1].mangled_name == axpy);
  CHECK(top[1].calls == 4);
  CHECK(top[1].total_ns == 160);
  CHECK(top[1].median_ns == doctest::Approx(25.0));
  CHECK(top[1].min_ns == 10);
  CHECK(top[1].max_ns == 100);
  CHECK(top[1].grid == std::array<std::int32_t, 3>{4, 1, 1});  // first call's
  CHECK(top[1].launch_config_varies);
  CHECK(top[2].name == "my_c_kernel");
  CHECK(top[2].median_ns == doctest::Approx(50.0));
  CHECK_FALSE(top[2].launch_config_varies);
  CHECK(a.top_kernels(2).size() == 2);

  // A name pointer reused for different text (module unloaded, memory reused) must not
  // be mistaken for the kernel first seen at that address.
  char reused[32] = "_Z5firstv";
  a.add_kernel(make_kernel(1, 6000, 6001, 1, reused));
  a.end_of_buffer();  // the unload and reuse happen between two buffers
  std::snprintf(reused, sizeof reused, "_Z6secondv");
  a.add_kernel(make_kernel(1, 6001, 6003, 1, reused));
  auto all = a.top_kernels();
  auto named = [&](const char* n) {
    return std::count_if(all.begin(), all.end(), [&](const kscope::kernel_summary& k) { return k.name == n; });
  };
  CHECK(named("first()") == 1);
  CHECK(named("second()") == 1);
  CHECK(kscope::detail::demangle(nullptr) == "(unknown kernel)");
  CHECK(kscope::detail::demangle("_Z") == "_Z");  // invalid mangling: raw
}

TEST_CASE("bounded memory: eviction, name cap, recent ring, long run") {
  kscope::attribution_options o;
  o.correlation_capacity = 1024;
  o.recent_capacity = 4;
  o.max_kernel_names = 2;
  o.max_intervals_per_node = 16;
  o.graph_node_capacity = 64;
  gpu_attribution a(o);

  // Launch 3000 ids, then deliver the first: its entry was reused -> evicted, counted.
  for (std::uint32_t id = 1; id <= 3000; ++id) a.launches().record_launch(id, 1, 0);
  a.add_kernel(make_kernel(5, 10, 20));
  a.add_kernel(make_kernel(2999, 20, 30));
  CHECK(a.counters().unattributed_evicted == 1);
  CHECK(a.counters().unattributed == 1);

  // Name cap: the third distinct name folds into "(other kernels)".
  a.add_kernel(make_kernel(2999, 30, 40, 7, "_Z1av"));
  a.add_kernel(make_kernel(2999, 40, 50, 7, "_Z1bv"));
  auto top = a.top_kernels();
  CHECK(std::any_of(top.begin(), top.end(), [](const auto& k) { return k.name == "(other kernels)"; }));
  CHECK(a.counters().distinct_kernels_over_cap >= 1);

  // Recent ring keeps the newest 4, oldest first.
  auto recent = a.recent_events();
  REQUIRE(recent.size() == 4);
  CHECK(recent.front().start_ns == 10);
  CHECK(recent.back().start_ns == 40);
  a.add_kernel(make_kernel(2999, 50, 60));
  recent = a.recent_events();
  CHECK(recent.front().start_ns == 20);
  CHECK(recent.back().start_ns == 50);
  CHECK(a.counters().recent_overwritten == 1);

  // A long run: memory stays flat once the caps are reached.
  std::uint32_t id = 10000;
  auto run = [&](int records) {
    for (int i = 0; i < records; ++i, ++id) {
      a.launches().record_launch(id, 1 + (id % 7), 0);
      const std::int64_t t = 1000000 + 100 * static_cast<std::int64_t>(id);
      a.add_kernel(make_kernel(id, t, t + 50, id % 4, (id % 2) != 0 ? "_Z1av" : "_Z1bv"));
    }
  };
  run(20000);
  const std::size_t after_20k = a.memory_bytes();
  run(200000);
  CHECK(a.memory_bytes() <= after_20k);
  CHECK(a.memory_bytes() < std::size_t{1} << 20);
  CHECK(a.counters().busy_intervals_clipped == 0);
  auto r = a.report();
  std::uint64_t kernels = 0;
  for (const auto& entry : r.nodes) kernels += entry.second.kernel_count;
  CHECK(kernels == r.counters.kernel_records);
  CHECK(r.find(3)->busy_ns == r.find(3)->kernel_ns);  // disjoint kernels: busy == sum
}

// CUPTI delivers buffers out of time order across streams, so the ring is in arrival order:
// what it overwrote may have ended after what it still holds. The latest such end is kept.
TEST_CASE("the recent ring keeps the latest end of an event it overwrote") {
  kscope::attribution_options o;
  o.recent_capacity = 2;
  gpu_attribution a(o);
  a.add_kernel(make_kernel(1, 100, 900, 1));  // a long kernel on stream 1, delivered first
  a.add_kernel(make_kernel(2, 10, 20, 2));    // an older one from stream 2's buffer
  CHECK(a.counters().recent_overwritten == 0);
  CHECK(a.counters().recent_overwritten_end_ns == 0);
  a.add_kernel(make_kernel(3, 200, 300, 2));  // overwrites [100, 900]
  CHECK(a.counters().recent_overwritten == 1);
  CHECK(a.counters().recent_overwritten_end_ns == 900);
  a.add_memcpy(make_copy(4, memcpy_kind::d2h, 64, 400, 450));  // overwrites [10, 20]: 900 stays
  CHECK(a.counters().recent_overwritten == 2);
  CHECK(a.counters().recent_overwritten_end_ns == 900);
  CHECK(a.report().counters.recent_overwritten_end_ns == 900);
  a.reset();
  CHECK(a.counters().recent_overwritten_end_ns == 0);
}

TEST_CASE("reset keeps kernel names valid and forgets aggregates") {
  gpu_attribution a;
  a.launches().record_launch(1, 4, 0);
  a.add_kernel(make_kernel(1, 10, 20, 1, "_Z6beforev"));
  a.reset();
  CHECK(a.report().nodes.empty());
  a.add_kernel(make_kernel(1, 30, 50, 1, "_Z6beforev"));
  auto top = a.top_kernels();
  REQUIRE(top.size() == 1);
  CHECK(top[0].name == "before()");
  CHECK(top[0].calls == 1);
  CHECK(a.recent_events().at(0).name == "_Z6beforev");
}

TEST_CASE("launch hook from 8 threads while the consumer reads (ThreadSanitizer build too)") {
  gpu_attribution a;
  correlation_table& table = a.launches();
  constexpr int threads = 8;
  constexpr int launches_per_thread = 20000;
  std::atomic<std::uint32_t> next_id{1};
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> inconsistent{0};
  struct launch {
    std::uint32_t id;
    node_id node;
    std::uint32_t thread;
  };
  std::vector<std::vector<launch>> seen(threads);

  std::thread reader([&] {
    // Reads race with writes on purpose: every answer must be a consistent entry.
    while (!done.load(std::memory_order_acquire)) {
      const std::uint32_t hi = next_id.load(std::memory_order_relaxed);
      for (std::uint32_t id = hi > 64 ? hi - 64 : 1; id < hi; ++id) {
        auto hit = table.find(id);
        if (hit.status == correlation_table::lookup_status::found && hit.origin.node < 1000) {
          inconsistent.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  });
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::uint32_t me = kscope::detail::this_thread_state().thread_index;
      seen[t].reserve(launches_per_thread);
      test_scope outer(static_cast<node_id>(1000 + 10 * t));
      for (int i = 0; i < launches_per_thread; ++i) {
        test_scope inner(static_cast<node_id>(1000 + 10 * t + 1 + (i % 3)));
        const std::uint32_t id = next_id.fetch_add(1, std::memory_order_relaxed);
        kscope::record_launch_from_this_thread(table, id);
        seen[t].push_back({id, static_cast<node_id>(1000 + 10 * t + 1 + (i % 3)), me});
      }
    });
  }
  for (auto& th : pool) th.join();
  done.store(true, std::memory_order_release);
  reader.join();

  // Every launch is found with its exact node and thread, and attributed to it.
  std::uint64_t wrong = 0;
  std::int64_t t0 = 1000;
  for (const auto& per_thread : seen) {
    for (const launch& l : per_thread) {
      auto hit = table.find(l.id);
      if (hit.status != correlation_table::lookup_status::found || hit.origin.node != l.node ||
          hit.origin.thread_index != l.thread) {
        ++wrong;
      }
      a.add_kernel(make_kernel(l.id, t0, t0 + 10));
      t0 += 20;
    }
  }
  CHECK(wrong == 0);
  CHECK(inconsistent.load() == 0);
  auto r = a.report();
  CHECK(r.counters.kernel_records == threads * launches_per_thread);
  CHECK(r.counters.unattributed == 0);
  std::uint64_t per_node_total = 0;
  for (int t = 0; t < threads; ++t) {
    for (int j = 1; j <= 3; ++j) {
      const auto* n = r.find(static_cast<node_id>(1000 + 10 * t + j));
      REQUIRE(n != nullptr);
      per_node_total += n->kernel_count;
    }
    CHECK(r.find(static_cast<node_id>(1000 + 10 * t)) == nullptr);  // exclusive: parents get none
  }
  CHECK(per_node_total == threads * launches_per_thread);
}

TEST_CASE("activity buffer pool: up-front allocation, exhaustion, foreign pointers, threads") {
  kscope::detail::activity_buffer_pool pool;
  REQUIRE(pool.allocate(1000, 4));
  CHECK_FALSE(pool.allocate(1000, 4));  // once only
  CHECK(pool.buffer_bytes() == 1024);   // rounded to the 64-byte alignment
  CHECK(pool.capacity_bytes() == 4096);
  std::vector<std::uint8_t*> out;
  for (int i = 0; i < 4; ++i) {
    std::uint8_t* b = pool.acquire();
    REQUIRE(b != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(b) % 8 == 0);
    out.push_back(b);
  }
  CHECK(pool.acquire() == nullptr);  // exhausted: hand out nothing
  CHECK(pool.denied() == 1);
  std::uint8_t foreign[16];
  pool.release(foreign);            // ignored
  pool.release(out[0] + 8);         // not a buffer start: ignored
  CHECK(pool.available() == 0);
  for (auto* b : out) pool.release(b);
  pool.release(out[0]);             // double release cannot grow the free list
  CHECK(pool.available() == 4);

  std::vector<std::thread> threads;
  std::atomic<int> got{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (std::uint8_t* b = pool.acquire()) {
          b[0] = 1;  // the buffer is ours alone until released
          got.fetch_add(1, std::memory_order_relaxed);
          pool.release(b);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(pool.available() == 4);
  CHECK(got.load() > 0);
}

// After a detach (cupti_options::pause_detach) CUPTI, which held some buffers, is gone: the
// pool takes them all back, and a late hand-back of one of them must not list it twice.
TEST_CASE("activity buffer pool: reclaim_all after a detach, and a late hand-back listed once") {
  kscope::detail::activity_buffer_pool empty;
  CHECK(empty.reclaim_all() == 0);  // nothing allocated: nothing to take back
  kscope::detail::activity_buffer_pool pool;
  REQUIRE(pool.allocate(256, 3));
  CHECK(pool.reclaim_all() == 0);  // all free already
  CHECK(pool.available() == 3);
  std::uint8_t* a = pool.acquire();
  std::uint8_t* b = pool.acquire();
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(pool.reclaim_all() == 2);  // the two CUPTI held
  CHECK(pool.available() == 3);
  pool.release(a);  // late: already free again
  CHECK(pool.available() == 3);
  std::vector<std::uint8_t*> given;
  while (std::uint8_t* next = pool.acquire()) given.push_back(next);
  CHECK(given.size() == 3);
  std::sort(given.begin(), given.end());
  CHECK(std::adjacent_find(given.begin(), given.end()) == given.end());  // each buffer handed out once
  pool.release(given[0]);
  pool.release(given[0]);  // twice: listed once
  CHECK(pool.available() == 1);
}

TEST_CASE("median past the reservoir: a uniform sample, close to the true median") {
  kscope::attribution_options o;
  o.median_samples = 256;
  gpu_attribution a(o);
  a.launches().record_launch(1, 1, 0);
  // Durations 1..20000 ns in a scrambled order (multiplicative step coprime with 20000):
  // true median 10000.5. A 256-sample reservoir estimates it within a few percent.
  std::int64_t t = 1000;
  for (std::int64_t i = 0; i < 20000; ++i) {
    const std::int64_t ns = 1 + (i * 7919) % 20000;
    a.add_kernel(make_kernel(1, t, t + ns));
    t += ns + 10;
  }
  auto top = a.top_kernels();
  REQUIRE(top.size() == 1);
  CHECK(top[0].calls == 20000);
  CHECK(top[0].min_ns == 1);
  CHECK(top[0].max_ns == 20000);
  CHECK(top[0].median_ns == doctest::Approx(10000.5).epsilon(0.10));
  // It is the library's one reservoir and one quantile: the same durations offered to a
  // uniform_reservoir of the same size keep the same sample, whose type 7 median this is.
  kscope::detail::uniform_reservoir<std::int64_t> same(256);
  for (std::int64_t i = 0; i < 20000; ++i) (void)same.offer(1 + (i * 7919) % 20000);
  CHECK(top[0].median_ns == kscope::quantile(std::vector<double>(same.kept().begin(), same.kept().end()), 0.5));
  // Sorted input is the adversarial case for a biased sampler (it would keep the tail).
  gpu_attribution b(o);
  b.launches().record_launch(1, 1, 0);
  t = 1000;
  for (std::int64_t ns = 1; ns <= 20000; ++ns) {
    b.add_kernel(make_kernel(1, t, t + ns));
    t += ns + 10;
  }
  CHECK(b.top_kernels().at(0).median_ns == doctest::Approx(10000.5).epsilon(0.10));
}

// ---- several devices and communication kernels (issue 7) --------------------------------

TEST_CASE("NCCL kernels are recognised, mangled or demangled, old and new names") {
  using kscope::is_communication_kernel;
  CHECK(is_communication_kernel("_Z24ncclDevKernel_AllReduce_Sum_f32_RING_LLP24ncclDevKernelArgsStorageILm4096EE"));
  CHECK(is_communication_kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
  CHECK(is_communication_kernel("void ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"));
  CHECK(is_communication_kernel("_Z37ncclKernel_AllReduce_RING_LL_Sum_float12ncclWorkElem"));
  CHECK(is_communication_kernel("_ZL23ncclDevKernel_SendRecv_v"));  // internal linkage
  CHECK(is_communication_kernel("ncclDevKernel_Generic"));          // extern "C" style
  CHECK_FALSE(is_communication_kernel("_Z4axpyPfS_f"));
  CHECK_FALSE(is_communication_kernel("_ZN4nccl13ncclDevKernelEv"));  // namespaced: not NCCL's
  CHECK_FALSE(is_communication_kernel("my_ncclDevKernel"));
  CHECK_FALSE(is_communication_kernel("_Z"));
  CHECK_FALSE(is_communication_kernel(""));
  CHECK_FALSE(is_communication_kernel("nccl"));
}

TEST_CASE("communication kernels are a subset of the node's kernels, with their own unions") {
  gpu_attribution attribution;
  attribution.launches().record_launch(1, 5, 0);
  attribution.launches().record_launch(2, 5, 0);
  attribution.launches().record_launch(3, 5, 0);
  const char* nccl = "_Z24ncclDevKernel_AllReduce_Sum_f32_RING_LLP24ncclDevKernelArgsStorageILm4096EE";
  // compute [1000, 2000) on stream 7; all-reduce [1500, 3000) on stream 8 overlaps it by
  // 500 ns; a second compute kernel [4000, 4500).
  attribution.add_kernel(make_kernel(1, 1000, 2000, 7, "_Z4gemmv"));
  attribution.add_kernel(make_kernel(2, 1500, 3000, 8, nccl));
  attribution.add_kernel(make_kernel(3, 4000, 4500, 7, "_Z4gemmv"));
  auto r = attribution.report();
  const kscope::node_gpu_activity* a = r.find(5);
  REQUIRE(a != nullptr);
  CHECK(a->kernel_count == 3);
  CHECK(a->kernel_ns == 1000 + 1500 + 500);
  CHECK(a->comm_kernel_count == 1);
  CHECK(a->comm_ns == 1500);
  CHECK(a->compute_kernel_count() == 2);
  CHECK(a->compute_ns() == 1500);
  CHECK(a->comm_busy_ns == 1500);
  CHECK(a->compute_busy_ns == 1500);
  CHECK(a->busy_ns == 2500);  // [1000, 3000) + [4000, 4500)
  // overlap of communication and compute = 1500 + 1500 - 2500
  CHECK(a->comm_busy_ns + a->compute_busy_ns - a->busy_ns == 500);
  REQUIRE(r.top_kernels.size() == 2);
  for (const auto& k : r.top_kernels) CHECK(k.communication == (k.mangled_name == nccl));
}

TEST_CASE("per-device split: kernels on two devices inside one scope, and the device cap") {
  gpu_attribution attribution;
  for (std::uint32_t id = 1; id <= 6; ++id) attribution.launches().record_launch(id, 9, 0);
  // device 0: [0+1000, 2000) and [1500, 2500) on two streams -> busy 1500, sum 2000
  // device 1: [1000, 1800) compute and [3000, 4000) NCCL -> busy 1800, sum 1800
  auto k = make_kernel(1, 1000, 2000, 1, "_Z1av");
  attribution.add_kernel(k);
  k = make_kernel(2, 1500, 2500, 2, "_Z1av");
  attribution.add_kernel(k);
  k = make_kernel(3, 1000, 1800, 3, "_Z1bv");
  k.device = 1;
  attribution.add_kernel(k);
  k = make_kernel(4, 3000, 4000, 4, "_Z18ncclDevKernel_Sendv");
  k.device = 1;
  attribution.add_kernel(k);
  auto r = attribution.report();
  const kscope::node_gpu_activity* a = r.find(9);
  REQUIRE(a != nullptr);
  REQUIRE(a->devices.size() == 2);
  CHECK(a->devices[0].device == 0);
  CHECK(a->devices[0].kernel_count == 2);
  CHECK(a->devices[0].kernel_ns == 2000);
  CHECK(a->devices[0].busy_ns == 1500);
  CHECK(a->devices[0].comm_kernel_count == 0);
  CHECK(a->devices[1].device == 1);
  CHECK(a->devices[1].kernel_count == 2);
  CHECK(a->devices[1].kernel_ns == 1800);
  CHECK(a->devices[1].busy_ns == 1800);
  CHECK(a->devices[1].comm_kernel_count == 1);
  CHECK(a->devices[1].comm_ns == 1000);
  REQUIRE(a->find_device(1) != nullptr);
  CHECK(a->find_device(1)->kernel_ns == 1800);
  CHECK(a->find_device(7) == nullptr);
  // Node totals: union over both devices [1000, 2500) + [3000, 4000)
  CHECK(a->busy_ns == 2500);
  CHECK(a->kernel_ns == 3800);

  // Devices are kept sorted however they arrive, and capped at 64 per node.
  gpu_attribution many;
  std::uint32_t id = 1;
  for (std::uint32_t dev = 70; dev-- > 0;) {
    many.launches().record_launch(id, 3, 0);
    auto kk = make_kernel(id, 1000 + 10 * id, 1005 + 10 * id, 1);
    kk.device = dev;
    many.add_kernel(kk);
    ++id;
  }
  auto r2 = many.report();
  const kscope::node_gpu_activity* b = r2.find(3);
  REQUIRE(b != nullptr);
  CHECK(b->kernel_count == 70);
  CHECK(b->devices.size() == kscope::max_devices_per_node);
  CHECK(std::is_sorted(b->devices.begin(), b->devices.end(),
                       [](const auto& x, const auto& y) { return x.device < y.device; }));
  CHECK(b->devices.front().device == 6);  // devices 69..6 came first and were kept
  CHECK(r2.counters.devices_over_cap == 6);
  bool warned = false;
  for (const auto& w : r2.warnings) warned = warned || w.find("64 devices") != std::string::npos;
  CHECK(warned);
}

// ---- CUDA graphs: the scope that built each node ------------------------------------

namespace {

// A graph kernel: launched by correlation id `correlation`, running graph node `node`.
kernel_record graph_kernel(std::uint32_t correlation, std::uint64_t node, std::int64_t start, std::int64_t ns) {
  kernel_record k = make_kernel(correlation, start, start + ns);
  k.graph_id = 1;
  k.graph_node_id = node;
  return k;
}

}  // namespace

TEST_CASE("graph_node_table: created and cloned ids both map to the capture scope; exact, bounded") {
  kscope::graph_node_table table(64);
  CHECK(table.capacity() == 64);
  table.record_created(17, 3);
  table.record_created(0x100000002ull, 4);  // ids with high bits set (graph << 32 | index)
  CHECK(table.record_cloned(42, 17));       // cudaGraphInstantiate: the clone inherits 3
  CHECK(table.find(17).found);
  CHECK(table.find(17).node == 3);
  CHECK(table.find(42).node == 3);
  CHECK(table.find(0x100000002ull).node == 4);
  CHECK_FALSE(table.find(0x2ull).found);    // same low bits, another id: never a neighbour's answer
  CHECK_FALSE(table.find(0).found);         // 0: not a graph node
  // A clone of a node built before collection started stays unknown, and is counted.
  CHECK_FALSE(table.record_cloned(43, 9999));
  CHECK_FALSE(table.find(43).found);
  CHECK(table.clones_of_unknown() == 1);
  // Re-created id: the latest scope wins, no eviction.
  table.record_created(17, 5);
  CHECK(table.find(17).node == 5);
  CHECK(table.evicted() == 0);

  // 10x the capacity: the table never grows, replacements are counted, and whatever is
  // still found is exact (its own scope, never another id's).
  const std::size_t bytes = table.memory_bytes();
  for (std::uint64_t id = 1000; id < 1640; ++id) table.record_created(id, static_cast<node_id>(id % 1000));
  CHECK(table.memory_bytes() == bytes);
  CHECK(table.evicted() >= 640 - 64);
  std::size_t found = 0;
  for (std::uint64_t id = 1000; id < 1640; ++id) {
    const auto hit = table.find(id);
    if (!hit.found) continue;
    ++found;
    CHECK(hit.node == static_cast<node_id>(id % 1000));
  }
  CHECK(found <= 64);
  // The newest ids survive: each set replaces its oldest entry first.
  CHECK(table.find(1639).found);
  CHECK(table.find(1638).found);
}

TEST_CASE("a graph captured in scope A and replayed in scope B: B's kernels carry captured_in = A") {
  constexpr node_id build = 10, replay = 20, decode = 30;
  gpu_attribution a;
  {
    // Capture: the collector's GRAPHNODE_CREATED callback stores the node open on the
    // capturing thread, as here.
    test_scope scope(build);
    for (std::uint64_t node = 1; node <= 3; ++node) a.graph_nodes().record_created(node, kscope::detail::current_node());
  }
  // Instantiate outside any scope: GRAPHNODE_CLONED gives the copies the originals' scope.
  for (std::uint64_t node = 1; node <= 3; ++node) REQUIRE(a.graph_nodes().record_cloned(100 + node, node));

  // Three replays inside "replay": the records carry the instantiated nodes' ids.
  std::int64_t t = 1000, replay_ns = 0;
  for (std::uint32_t launch = 1; launch <= 3; ++launch) {
    a.launches().record_launch(launch, replay, 0);
    for (std::uint64_t node = 1; node <= 3; ++node) {
      const std::int64_t ns = 100 * static_cast<std::int64_t>(node);
      a.add_kernel(graph_kernel(launch, 100 + node, t, ns));
      replay_ns += ns;
      t += 1000;
    }
  }
  // A memset node of the same graph, and a record carrying the original id (either id
  // CUPTI reports finds the scope).
  a.graph_nodes().record_created(4, build);
  memset_record s = make_memset(3, 64, t, t + 50);
  s.graph_node_id = 4;
  a.add_memset(s);
  a.add_kernel(graph_kernel(3, 2, t + 100, 10));

  auto r = a.report();
  const kscope::node_gpu_activity* b = r.find(replay);
  REQUIRE(b != nullptr);
  CHECK(b->kernel_count == 10);  // still attributed to the launch-time scope
  CHECK(r.find(build) == nullptr);  // building a graph runs nothing
  REQUIRE(b->graph_capture.size() == 1);
  const kscope::graph_capture_origin& o = b->graph_capture[0];
  CHECK(o.captured_in == build);
  CHECK(o.kernel_count == 10);
  CHECK(o.kernel_ns == replay_ns + 10);
  CHECK(o.copy_count == 1);
  CHECK(o.copy_ns == 50);
  CHECK(r.counters.graph_records == 11);
  CHECK(r.counters.graph_built_elsewhere == 11);
  CHECK(r.counters.graph_capture_unknown == 0);
  CHECK(r.warnings.empty());

  // The same graph replayed in the scope that built it: attributed, no breakdown.
  a.launches().record_launch(50, build, 0);
  a.add_kernel(graph_kernel(50, 101, t + 1000, 100));
  // A second graph built in "decode", replayed in "replay": a second origin, ordered by
  // kernel time (less than the first).
  a.graph_nodes().record_created(7, decode);
  a.launches().record_launch(51, replay, 0);
  a.add_kernel(graph_kernel(51, 7, t + 2000, 5));
  r = a.report();
  REQUIRE(r.find(build) != nullptr);
  CHECK(r.find(build)->graph_capture.empty());
  b = r.find(replay);
  REQUIRE(b->graph_capture.size() == 2);
  CHECK(b->graph_capture[0].captured_in == build);
  CHECK(b->graph_capture[1].captured_in == decode);
  CHECK(b->graph_capture[1].kernel_count == 1);
  CHECK(b->graph_capture[1].kernel_ns == 5);
  CHECK(r.counters.graph_records == 13);
  CHECK(r.counters.graph_built_elsewhere == 12);
}

TEST_CASE("graph nodes whose capture was never seen: attributed, no breakdown, counted and warned") {
  gpu_attribution a;
  a.launches().record_launch(9, 20, 0);
  a.add_kernel(graph_kernel(9, 555, 1000, 100));  // built before the collector started
  a.add_kernel(make_kernel(9, 2000, 2100));       // not a graph kernel: not counted at all
  const auto r = a.report();
  REQUIRE(r.find(20) != nullptr);
  CHECK(r.find(20)->kernel_count == 2);
  CHECK(r.find(20)->graph_capture.empty());
  CHECK(r.counters.graph_records == 1);
  CHECK(r.counters.graph_capture_unknown == 1);
  CHECK(r.counters.graph_built_elsewhere == 0);
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0].find("CUDA-graph records ran graph nodes whose creation kscope did not see") !=
        std::string::npos);
}

TEST_CASE("graph capture breakdown: at most 16 origins per scope, the rest counted; reset keeps the table") {
  gpu_attribution a;
  constexpr node_id replay = 7;
  const std::size_t origins = kscope::max_capture_origins_per_node + 3;
  for (std::size_t i = 0; i < origins; ++i)
    a.graph_nodes().record_created(1000 + i, static_cast<node_id>(100 + i));
  a.launches().record_launch(1, replay, 0);
  for (std::size_t i = 0; i < origins; ++i)
    a.add_kernel(graph_kernel(1, 1000 + i, 1000 + 100 * static_cast<std::int64_t>(i), 10));
  auto r = a.report();
  REQUIRE(r.find(replay) != nullptr);
  CHECK(r.find(replay)->kernel_count == origins);
  CHECK(r.find(replay)->graph_capture.size() == kscope::max_capture_origins_per_node);
  CHECK(r.counters.graph_built_elsewhere == origins);
  CHECK(r.counters.graph_capture_over_cap == 3);
  CHECK(std::any_of(r.warnings.begin(), r.warnings.end(),
                    [](const std::string& w) { return w.find("other scopes of one launching scope") != std::string::npos; }));

  // A graph captured before a reset is replayed after it: its origin is still known.
  a.reset();
  a.add_kernel(graph_kernel(1, 1000, 50000, 10));
  r = a.report();
  REQUIRE(r.find(replay) != nullptr);
  REQUIRE(r.find(replay)->graph_capture.size() == 1);
  CHECK(r.find(replay)->graph_capture[0].captured_in == 100);
  CHECK(r.counters.graph_capture_over_cap == 0);
}

TEST_CASE("graph_node_table: 4 capturing threads and a reading consumer (ThreadSanitizer build too)") {
  kscope::graph_node_table table(1 << 14);
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> wrong{0};
  // The consumer looks ids up while they are being written: a hit is always the scope
  // its writer stored (id / 1000 here), never a torn or neighbouring entry.
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {
      for (std::uint64_t id = 1000; id < 5000; id += 7) {
        const auto hit = table.find(id);
        if (hit.found && hit.node != static_cast<node_id>(id / 1000)) wrong.fetch_add(1);
      }
    }
  });
  std::vector<std::thread> writers;
  for (std::uint64_t t = 1; t <= 4; ++t) {
    writers.emplace_back([&table, t] {
      test_scope scope(static_cast<node_id>(t));
      for (std::uint64_t i = 0; i < 1000; ++i) table.record_created(t * 1000 + i, kscope::detail::current_node());
    });
  }
  for (auto& w : writers) w.join();
  done.store(true, std::memory_order_release);
  reader.join();
  CHECK(wrong.load() == 0);
  std::size_t found = 0;
  for (std::uint64_t id = 1000; id < 5000; ++id) found += table.find(id).found ? 1 : 0;
  CHECK(found + table.evicted() == 4000);  // every id either kept or counted as replaced
}

// ---- CUDA graphs traced as one record (graph-level trace), scaled from node-level replays ----

namespace {

// One node-level replay of graph 5: three kernels of 10 us back to back from `start`, with
// 5 us gaps (span 40 us, busy 30 us), all with the launch's correlation id.
void node_level_replay(gpu_attribution& a, std::uint32_t correlation, std::int64_t start) {
  const char* names[] = {"_Z2k1v", "_Z2k2v", "_Z2k3v"};
  for (int i = 0; i < 3; ++i) {
    kernel_record k = make_kernel(correlation, start + 15000 * i, start + 15000 * i + 10000, 7, names[i]);
    k.graph_id = 5;
    k.graph_node_id = 100 + static_cast<std::uint64_t>(i);
    a.add_kernel(k);
  }
}

kscope::graph_record graph_replay(std::uint32_t correlation, std::int64_t start, std::int64_t span,
                                  std::uint32_t graph_id = 5) {
  kscope::graph_record g;
  g.correlation_id = correlation;
  g.start_ns = start;
  g.end_ns = start + span;
  g.graph_id = graph_id;
  g.stream = 7;
  return g;
}

}  // namespace

TEST_CASE("graph-level replays are scaled from the node-level replays of the same graph (hand-computed)") {
  gpu_attribution a;
  for (std::uint32_t c = 10; c <= 14; ++c) a.launches().record_launch(c, 3, 0);
  node_level_replay(a, 10, 1000000);
  node_level_replay(a, 11, 2000000);
  // Three replays as one record each: 40 us spans, the same graph.
  for (std::uint32_t c = 12; c <= 14; ++c) a.add_graph(graph_replay(c, 1000000 * (c - 9), 40000));
  const auto r = a.report();
  const kscope::node_gpu_activity* n = r.find(3);
  REQUIRE(n != nullptr);
  CHECK(n->graph_replays == 5);
  CHECK(n->graph_replays_traced == 2);
  CHECK(n->graph_replays_unsampled == 0);
  CHECK(n->graph_span_ns == 120000);
  // Node-level: 6 kernels, 60 us of kernels over 80 us of span, 60 us busy.
  // Scaled: 3 replays x 3 kernels = 9 kernels; 120 us of span x 60/80 = 90 us of kernels;
  // busy 120 x 60/80 = 90 us.
  CHECK(n->kernel_count == 15);
  CHECK(n->scaled_kernel_count == 9);
  CHECK(n->kernel_ns == 150000);
  CHECK(n->scaled_kernel_ns == 90000);
  CHECK(n->busy_ns == 150000);
  CHECK(n->scaled_busy_ns == 90000);
  CHECK(n->graph_scaled());
  CHECK(r.counters.graph_launch_records == 3);
  CHECK(r.counters.graph_replays_traced == 2);
  // Per kernel: 2 traced calls of 10 us each, scaled by 3/2 replays and 120/80 span.
  REQUIRE(r.top_kernels.size() == 3);
  for (const kscope::kernel_summary& k : r.top_kernels) {
    CHECK(k.calls == 5);
    CHECK(k.scaled_calls == 3);
    CHECK(k.total_ns == 50000);
    CHECK(k.scaled_ns == 30000);
    CHECK(k.median_ns == doctest::Approx(10000));  // from traced calls only
    CHECK(k.scaled_from_replays == 2);             // the rows say what they rest on
  }
  // The trace ring holds the graph replays as events of their own.
  std::size_t graph_events = 0;
  for (const kscope::gpu_activity_event& e : r.recent)
    if (e.kind == kscope::activity_kind::graph) ++graph_events;
  CHECK(graph_events == 3);
}

TEST_CASE("a graph never traced node by node: its spans count as busy, its kernels as unknown") {
  gpu_attribution a;
  a.launches().record_launch(20, 4, 0);
  a.launches().record_launch(21, 4, 0);
  a.add_graph(graph_replay(20, 1000000, 50000, 9));
  a.add_graph(graph_replay(21, 2000000, 30000, 9));
  const auto r = a.report();
  const kscope::node_gpu_activity* n = r.find(4);
  REQUIRE(n != nullptr);
  CHECK(n->graph_replays == 2);
  CHECK(n->graph_replays_traced == 0);
  CHECK(n->graph_replays_unsampled == 2);
  CHECK(n->kernel_count == 0);
  CHECK(n->busy_ns == 80000);
  CHECK(n->scaled_busy_ns == 80000);
  CHECK(n->first_start_ns == 1000000);
  CHECK(n->last_end_ns == 2030000);
}

TEST_CASE("graph replays: scaling is per graph, unknown launches and bad times are counted") {
  gpu_attribution a;
  a.launches().record_launch(30, 6, 0);
  a.launches().record_launch(31, 6, 0);
  a.launches().record_launch(32, 6, 0);
  node_level_replay(a, 30, 1000000);                       // graph 5: 3 kernels / 40 us
  a.add_graph(graph_replay(31, 2000000, 80000, 5));        // scaled by graph 5
  a.add_graph(graph_replay(32, 3000000, 10000, 8));        // graph 8: never per node
  a.add_graph(graph_replay(99, 4000000, 10000, 5));        // launch never seen: (unscoped)
  a.add_graph(graph_replay(31, 5000000, -5, 5));           // end before start: dropped
  const auto r = a.report();
  const kscope::node_gpu_activity* n = r.find(6);
  REQUIRE(n != nullptr);
  CHECK(n->graph_replays == 3);
  CHECK(n->graph_replays_traced == 1);
  CHECK(n->graph_replays_unsampled == 1);
  CHECK(n->scaled_kernel_count == 3);          // one replay x 3 kernels
  CHECK(n->scaled_kernel_ns == 60000);         // 80 us x 30/40
  CHECK(n->scaled_busy_ns == 60000 + 10000);   // graph 5 scaled + graph 8's span
  CHECK(r.counters.unattributed == 1);
  CHECK(r.counters.dropped_end_before_start == 1);
  CHECK(r.find(kscope::unscoped_node) != nullptr);
}

// ---- node-level replays stamped with CUPTI's offset while graph-level trace is on ----

namespace {

// node_level_replay as CUPTI stamps it with graph-level trace on in the process: the first
// kernel ends `offset` late and the later kernels are shifted by as much (measured on an H100,
// bench/graph_node_timestamps_probe.cu).
void offset_replay(gpu_attribution& a, std::uint32_t correlation, std::int64_t start, std::int64_t offset) {
  const char* names[] = {"_Z2k1v", "_Z2k2v", "_Z2k3v"};
  for (int i = 0; i < 3; ++i) {
    const std::int64_t shift = i == 0 ? 0 : offset;
    kernel_record k = make_kernel(correlation, start + 15000 * i + shift, start + 15000 * i + 10000 + offset, 7, names[i]);
    k.graph_id = 5;
    k.graph_node_id = 100 + static_cast<std::uint64_t>(i);
    a.add_kernel(k);
  }
}

}  // namespace

TEST_CASE("graph-level trace on: node-level replays with CUPTI's offset are retimed from the graph's spans") {
  // The same run twice: honest timestamps without graph-level trace, and the offset ones
  // (2 ms and 300 ms late) with it. Every figure must agree.
  const auto run = [](bool offset) {
    gpu_attribution a;
    if (offset) a.set_graph_level_trace(true);
    for (std::uint32_t c = 10; c <= 15; ++c) a.launches().record_launch(c, 3, 0);
    if (offset) {
      offset_replay(a, 10, 1000000, 2000000);
      offset_replay(a, 11, 2000000, 300000000);
    } else {
      node_level_replay(a, 10, 1000000);
      node_level_replay(a, 11, 2000000);
    }
    for (std::uint32_t c = 12; c <= 15; ++c) a.add_graph(graph_replay(c, 1000000 * (c - 9), 40000));
    return a.report();
  };
  const auto honest = run(false);
  const auto fixed = run(true);
  CHECK(fixed.counters.graph_replays_retimed == 2);
  CHECK(fixed.counters.graph_replays_held == 0);
  CHECK(honest.counters.graph_replays_retimed == 0);
  const kscope::node_gpu_activity* h = honest.find(3);
  const kscope::node_gpu_activity* f = fixed.find(3);
  REQUIRE(h != nullptr);
  REQUIRE(f != nullptr);
  CHECK(f->kernel_count == h->kernel_count);
  CHECK(f->kernel_ns == h->kernel_ns);
  CHECK(f->busy_ns == h->busy_ns);
  CHECK(f->scaled_kernel_ns == h->scaled_kernel_ns);
  CHECK(f->scaled_busy_ns == h->scaled_busy_ns);
  CHECK(f->last_end_ns == h->last_end_ns);
  REQUIRE(fixed.top_kernels.size() == 3);
  for (const kscope::kernel_summary& k : fixed.top_kernels) {
    CAPTURE(k.name);
    CHECK(k.total_ns == 2 * 10000 + 4 * 10000);  // 2 traced calls, 4 scaled (160 us of span x 20/80)
    CHECK(k.max_ns == 10000);
    CHECK(k.scaled_calls == 4);
  }
  // The events the timeline and the GPU-time account read are the retimed ones.
  for (const kscope::gpu_activity_event& e : fixed.recent)
    if (e.kind == kscope::activity_kind::kernel) CHECK(e.end_ns - e.start_ns == 10000);
  bool said = false;
  for (const std::string& w : fixed.warnings) said = said || w.find("timestamp offset") != std::string::npos;
  CHECK(said);
}

TEST_CASE("graph-level trace on: node-level replays wait for a reference span, in no figure meanwhile") {
  gpu_attribution a;
  a.set_graph_level_trace(true);
  for (std::uint32_t c = 20; c <= 40; ++c) a.launches().record_launch(c, 4, 0);
  offset_replay(a, 20, 1000000, 5000000);
  auto r = a.report();
  CHECK(r.counters.graph_replays_held == 1);
  CHECK((r.find(4) == nullptr || r.find(4)->kernel_count == 0));  // not counted: its times are not known yet
  bool said = false;
  for (const std::string& w : r.warnings) said = said || w.find("wait for a replay") != std::string::npos;
  CHECK(said);
  // A replay traced as one record arrives: the held one is checked, retimed, counted.
  a.add_graph(graph_replay(21, 9000000, 40000));
  r = a.report();
  CHECK(r.counters.graph_replays_held == 0);
  CHECK(r.counters.graph_replays_retimed == 1);
  REQUIRE(r.find(4) != nullptr);
  CHECK(r.find(4)->kernel_ns - r.find(4)->scaled_kernel_ns == 30000);  // traced, retimed
  CHECK(r.find(4)->scaled_kernel_ns == 30000);                          // 1 replay x 40 us x 30/40
  // An honest node-level replay (within the tolerance of the reference) is not moved.
  node_level_replay(a, 22, 12000000);
  a.add_graph(graph_replay(23, 13000000, 40000));
  r = a.report();
  CHECK(r.counters.graph_replays_retimed == 1);
  CHECK(r.find(4)->kernel_ns - r.find(4)->scaled_kernel_ns == 60000);
}

TEST_CASE("graph-level trace on: replays of a graph never traced as one record are counted at once") {
  // A graph built while tracing was paused (or before the collector started) is traced node
  // by node for good: the collector marks its launches, and the attribution counts them as
  // they come instead of holding them for a reference span that never comes (on an H100 six
  // such replays were in no figure at all). A replay not marked still waits.
  gpu_attribution a;
  a.set_graph_level_trace(true);
  for (std::uint32_t c = 50; c <= 57; ++c) a.launches().record_launch(c, 9, 3);
  for (std::uint32_t c = 50; c <= 55; ++c) a.launches().record_launch(c, 9, 3 | kscope::unreferenced_replay_bit);
  for (std::uint32_t c = 50; c <= 54; ++c) node_level_replay(a, c, 1000000 * c);
  // Replay 55's kernels, then one of replay 54's from a later buffer: still six replays.
  node_level_replay(a, 55, 1000000 * 55);
  kernel_record late = make_kernel(54, 54000000 + 50000, 54000000 + 60000, 7, "_Z2k4v");
  late.graph_id = 5;
  a.add_kernel(late);
  auto r = a.report();
  const kscope::node_gpu_activity* n = r.find(9);
  REQUIRE(n != nullptr);
  CHECK(n->kernel_count == 19);
  CHECK(n->kernel_ns == 19 * 10000);
  CHECK(n->scaled_kernel_count == 0);
  CHECK(r.counters.graph_replays_unreferenced == 6);
  for (const kscope::gpu_activity_event& e : r.recent) CHECK(e.thread_index == 3);  // the mark taken off
  CHECK(r.counters.graph_replays_held == 0);
  CHECK(r.counters.graph_replays_retimed == 0);
  bool said = false;
  for (const std::string& w : r.warnings) said = said || w.find("6 CUDA-graph replays of graphs CUPTI saw built without") == 0;
  CHECK(said);
  // Graph 5 replayed again, not marked (its replays may yet be traced as one record): held.
  node_level_replay(a, 56, 90000000);
  r = a.report();
  CHECK(r.counters.graph_replays_held == 1);
  CHECK(r.find(9)->kernel_count == 19);
  CHECK(r.counters.graph_replays_unreferenced == 6);
}

TEST_CASE("graph-level trace on: a replay's kernels over several buffers, the reference from another scope") {
  // Scope 7 replays graph 5 twice node by node (both with CUPTI's offset) and never as one
  // record; scope 8 replays it as one record. Replay 30's last kernel arrives after that
  // record: every figure is right.
  gpu_attribution a;
  a.set_graph_level_trace(true);
  for (std::uint32_t c = 30; c <= 31; ++c) a.launches().record_launch(c, 7, 0);
  for (std::uint32_t c = 40; c <= 43; ++c) a.launches().record_launch(c, 8, 0);
  const char* names[] = {"_Z2k1v", "_Z2k2v", "_Z2k3v"};
  // Back to back this time (as a graph's chain runs), and as CUPTI stamped them on an H100:
  // the second kernel starts 65 ns before the first one's late end.
  const auto offset_kernel = [&](std::uint32_t corr, std::int64_t start, int i, std::int64_t offset) {
    const std::int64_t shift = i == 0 ? 0 : offset - 65;
    kernel_record k = make_kernel(corr, start + 10000 * i + shift, start + 10000 * i + 10000 + shift + (i == 0 ? offset : 0), 7, names[i]);
    k.graph_id = 5;
    a.add_kernel(k);
  };
  offset_kernel(30, 1000000, 0, 7000000);
  offset_kernel(30, 1000000, 1, 7000000);
  a.add_graph(graph_replay(40, 2000000, 29935));  // the reference, from scope 8: 30 may be incomplete, kept
  offset_kernel(30, 1000000, 2, 7000000);         // the rest of replay 30, from a later buffer
  offset_kernel(31, 3000000, 0, 9000000);         // replay 31 begins: 30 is let go, retimed
  offset_kernel(31, 3000000, 1, 9000000);
  offset_kernel(31, 3000000, 2, 9000000);
  const auto r = a.report();                      // 31 let go at the report, retimed
  CHECK(r.counters.graph_replays_retimed == 2);
  CHECK(r.counters.graph_replays_held == 0);
  const kscope::node_gpu_activity* n = r.find(7);
  REQUIRE(n != nullptr);
  CHECK(n->kernel_count == 6);
  // The head ends where the next kernel was stamped to start, 65 ns early.
  CHECK(n->kernel_ns == 60000 - 2 * 65);
  CHECK(n->busy_ns >= 60000 - 2 * 65 * 2);
  CHECK(n->busy_ns <= 60000);
  CHECK(n->last_end_ns <= 3000000 + 40000);  // no kernel left in the offset's future
  CHECK(n->last_end_ns >= 3000000 + 30000 - 1000);
  for (const kscope::kernel_summary& k : r.top_kernels) {
    CHECK(k.max_ns <= 10000);
    CHECK(k.max_ns >= 10000 - 65);
  }
}

TEST_CASE("graph-level trace on, PM sampling's pattern: only the first kernels after the head are offset") {
  // As seen on an H100 with PM sampling on: a replay of 6 back-to-back 10 us kernels from
  // t0, the head stamped 2 ms long and kernels 2-3 shifted 2 ms late, kernels 4-6 where they
  // ran. The span then exceeds the graph's by less than the offset; the head's end is still
  // bounded by the kernels that followed it.
  gpu_attribution a;
  a.set_graph_level_trace(true);
  for (std::uint32_t c = 60; c <= 62; ++c) a.launches().record_launch(c, 9, 0);
  const std::int64_t t0 = 5'000'000, offset = 2'000'000;
  const char* names[] = {"_Z2h0v", "_Z2h1v", "_Z2h2v", "_Z2h3v", "_Z2h4v", "_Z2h5v"};
  for (int i = 0; i < 6; ++i) {
    std::int64_t start = t0 + 10000 * i, end = start + 10000;
    if (i == 0) end += offset;
    if (i == 1 || i == 2) {
      start += offset;
      end += offset;
    }
    kernel_record k = make_kernel(60, start, end, 7, names[i]);
    k.graph_id = 6;
    a.add_kernel(k);
  }
  kscope::graph_record g = graph_replay(61, 9'000'000, 60000, 6);
  a.add_graph(g);
  const auto r = a.report();
  CHECK(r.counters.graph_replays_retimed == 1);
  for (const kscope::kernel_summary& k : r.top_kernels) {
    CAPTURE(k.name);
    CHECK(k.max_ns <= 10000);  // no kernel keeps the offset
  }
}

TEST_CASE("graph-level trace on: a node-level replay that lost a kernel counts as one record of the usual span") {
  // As seen on an H100 with PM sampling on (2 of 10 node-level replays): one kernel stamped
  // to end before it began (dropped, counted) and the others offset by different amounts.
  // No kernel of it can be placed: the replay is one more record of the graph's 40 us.
  gpu_attribution a;
  a.set_graph_level_trace(true);
  for (std::uint32_t c = 70; c <= 76; ++c) a.launches().record_launch(c, 3, 0);
  offset_replay(a, 70, 1'000'000, 2'000'000);  // whole: 3 kernels, retimed
  a.add_graph(graph_replay(71, 2'000'000, 40000));
  a.add_graph(graph_replay(72, 3'000'000, 40000));
  const std::int64_t t = 4'000'000;
  const char* names[] = {"_Z2k1v", "_Z2k2v", "_Z2k3v"};
  const kernel_record parts[] = {make_kernel(73, t, t + 10000 + 5'000'000, 7, names[0]),
                                 make_kernel(73, t + 15000 + 1'000'000, t + 25000 + 1'000'000, 7, names[1]),
                                 make_kernel(73, t + 30000 + 3'000'000, t + 40000, 7, names[2])};
  for (kernel_record k : parts) {
    k.graph_id = 5;
    a.add_kernel(k);
  }
  a.add_graph(graph_replay(74, 5'000'000, 40000));
  const auto r = a.report();
  CHECK(r.counters.graph_replays_incomplete == 1);
  CHECK(r.counters.graph_replays_retimed == 1);
  CHECK(r.counters.dropped_end_before_start == 1);
  const kscope::node_gpu_activity* n = r.find(3);
  REQUIRE(n != nullptr);
  CHECK(n->graph_replays == 5);
  CHECK(n->graph_replays_traced == 1);
  REQUIRE(r.top_kernels.size() == 3);
  for (const kscope::kernel_summary& k : r.top_kernels) {
    CAPTURE(k.name);
    CHECK(k.max_ns == 10000);               // no offset kept anywhere
    CHECK(k.calls == 5);                    // 1 traced, 4 scaled (73 among them)
    CHECK(k.total_ns == 10000 + 4 * 10000);  // 160 us of one-record span x 10/40
  }
  bool said = false;
  for (const std::string& w : r.warnings) said = said || w.find("lost kernel records") != std::string::npos;
  CHECK(said);
}

TEST_CASE("graph-level trace on, a graph never traced as one record: held replays go unchecked past the cap") {
  gpu_attribution a;
  a.set_graph_level_trace(true);
  for (std::uint32_t c = 50; c <= 70; ++c) a.launches().record_launch(c, 5, 0);
  for (std::uint32_t c = 50; c < 50 + kscope::graph_max_held_replays + 1; ++c)
    node_level_replay(a, c, 1000000 * static_cast<std::int64_t>(c));
  const auto r = a.report();
  // The oldest go unchecked once more than the cap wait; at the report the newest follow.
  CHECK(r.counters.graph_replays_unchecked == kscope::graph_max_held_replays + 1);
  CHECK(r.counters.graph_replays_held == 0);
  REQUIRE(r.find(5) != nullptr);
  CHECK(r.find(5)->kernel_count == 3 * (kscope::graph_max_held_replays + 1));
  bool said = false;
  for (const std::string& w : r.warnings) said = said || w.find("may include CUPTI's") != std::string::npos;
  CHECK(said);
}

// ---- which replays are traced node by node, and the collector's options ----


TEST_CASE("graph_replay_sampler: first replays and every k-th per graph, unknown graphs always per node") {
  kscope::graph_replay_sampler s;
  s.configure(kscope::graph_tracing::sampled, 2, 3);
  s.graph_exec_created(0x1000);
  s.graph_exec_created(0x2000);
  std::vector<int> node_level;
  for (int n = 1; n <= 9; ++n)
    if (s.decide(0x1000)) node_level.push_back(n);
  // First 2, then the 2nd after them (a power of two below 3), then every 3rd after them.
  CHECK(node_level == std::vector<int>{1, 2, 4, 5, 8});
  CHECK(s.decide(0x2000));  // another graph counts its own replays
  CHECK(s.decide(0x2000));
  CHECK_FALSE(s.decide(0x2000));
  // A graph whose instantiation was not watched is never traced as one record.
  for (int n = 0; n < 5; ++n) CHECK(s.decide(0x3000));
  kscope::graph_replay_sampler::counts c = s.decisions();
  CHECK(c.node_level == 7);
  CHECK(c.graph_level == 5);
  CHECK(c.unknown_graph == 5);
  CHECK(c.built_paused == 0);
  // A graph built while graph-level trace was off (tracing paused) is never traced as one
  // record either, and counted as such.
  s.graph_exec_created(0x4000, /*graph_trace_on=*/false);
  for (int n = 0; n < 4; ++n) CHECK(s.decide(0x4000));
  c = s.decisions();
  CHECK(c.unknown_graph == 9);
  CHECK(c.built_paused == 4);
  CHECK(c.graph_level == 5);
  // Built again on the same handle with graph-level trace on: sampled like any other.
  s.graph_exec_destroyed(0x4000);
  s.graph_exec_created(0x4000, true);
  CHECK(s.decide(0x4000));
  CHECK(s.decide(0x4000));
  CHECK_FALSE(s.decide(0x4000));
  // A destroyed exec's handle reused by a new graph starts counting again.
  s.graph_exec_destroyed(0x1000);
  s.graph_exec_created(0x1000);
  CHECK(s.decide(0x1000));
  // every = 0: only the first replays.
  s.configure(kscope::graph_tracing::sampled, 1, 0);
  s.graph_exec_created(0x4000);
  CHECK(s.decide(0x4000));
  for (int n = 0; n < 10; ++n) CHECK_FALSE(s.decide(0x4000));
  // The defaults (2, 100): 6 replays more early on, at powers of two after the first 2.
  s.configure(kscope::graph_tracing::sampled, 2, 100);
  s.graph_exec_created(0x6000);
  node_level.clear();
  for (int n = 1; n <= 402; ++n)
    if (s.decide(0x6000)) node_level.push_back(n);
  CHECK(node_level == std::vector<int>{1, 2, 4, 6, 10, 18, 34, 66, 102, 202, 302, 402});
  // node: every replay per node; graph: none (of watched graphs).
  s.configure(kscope::graph_tracing::node, 2, 100);
  CHECK(s.decide(0x4000));
  s.configure(kscope::graph_tracing::graph, 2, 100);
  CHECK_FALSE(s.decide(0x2000));
  CHECK(s.decide(0x5000));  // never watched: per node even in graph mode
}

TEST_CASE("graph sampling: which replays are marked as never traced as one record") {
  kscope::graph_replay_sampler s;
  s.configure(kscope::graph_tracing::sampled, 2, 100);
  s.graph_exec_created(0x1000);                          // built with graph-level trace on
  s.graph_exec_created(0x2000, /*graph_trace_on=*/false);  // built while paused
  for (int n = 0; n < 4; ++n) CHECK_FALSE(s.decide_replay(0x1000).never_one_record);
  for (int n = 0; n < 4; ++n) {
    const auto d = s.decide_replay(0x2000);
    CHECK(d.node_level);
    CHECK(d.never_one_record);
  }
  CHECK(s.decide_replay(0x3000).never_one_record);  // built before the collector watched
  // Past the table's size it starts afresh: a graph it no longer knows may have been built
  // with graph-level trace on, so it is traced per node but not marked.
  for (std::uintptr_t g = 0; g < kscope::graph_replay_sampler::max_graphs + 1; ++g) s.graph_exec_created(0x100000 + g);
  CHECK(s.decisions().table_resets == 1);
  const auto after_reset = s.decide_replay(0x1000);
  CHECK(after_reset.node_level);
  CHECK_FALSE(after_reset.never_one_record);
  // Node mode: graph-level trace never on, nothing waits for a check.
  kscope::graph_replay_sampler node;
  node.configure(kscope::graph_tracing::node, 2, 100);
  CHECK_FALSE(node.decide_replay(0x2000).never_one_record);
}

TEST_CASE("KSCOPE_CUPTI_OPTIONS: every key, bad values named, the rest applied") {
  kscope::cupti_options o;
  CHECK(o.graphs == kscope::graph_tracing::sampled);
  auto problems = kscope::apply_cupti_options_text(
      " sync=off, memcpy=0 ,memset=no,driver_api=1,runtime_api=false,graphs=node,graph_first=5,graph_every=0,"
      "buffer_mb=4,buffers=16,flush_ms=250,timestamp_callback=off",
      o);
  CHECK(problems.empty());
  CHECK_FALSE(o.timestamp_callback);
  CHECK_FALSE(o.collect_sync);
  CHECK_FALSE(o.collect_memcpy);
  CHECK_FALSE(o.collect_memset);
  CHECK(o.driver_api_callbacks);
  CHECK_FALSE(o.runtime_api_callbacks);
  CHECK(o.graphs == kscope::graph_tracing::node);
  CHECK(o.graph_first == 5);
  CHECK(o.graph_every == 0);
  CHECK(o.buffer_bytes == (std::size_t{4} << 20));
  CHECK(o.buffer_count == 16);
  CHECK(o.flush_period_ms == 250);

  kscope::cupti_options p;
  problems = kscope::apply_cupti_options_text("graphs=everything,sync=maybe,buffers=0,buffer_mb=99999,color=red,"
                                              "graph_every=-1,,  ,flush_ms,graphs=graph",
                                              p);
  REQUIRE(problems.size() == 7);
  CHECK(problems[0].find("'graphs=everything'") != std::string::npos);
  CHECK(problems[0].find("sampled, node or graph") != std::string::npos);
  CHECK(problems[1].find("'sync=maybe'") != std::string::npos);
  CHECK(problems[4].find("'color=red'") != std::string::npos);
  CHECK(problems[6].find("key=value") != std::string::npos);
  for (const std::string& line : problems) CHECK(line.find("KSCOPE_CUPTI_OPTIONS") == 0);
  // What was not understood keeps its value; what was, applies.
  CHECK(p.collect_sync);
  CHECK(p.buffer_count == kscope::cupti_options{}.buffer_count);
  CHECK(p.graph_every == kscope::cupti_options{}.graph_every);
  CHECK(p.graphs == kscope::graph_tracing::graph);
  CHECK(kscope::apply_cupti_options_text("", p).empty());
}

TEST_CASE("tracing in windows: the grid, its boundaries and the options") {
  constexpr std::int64_t ms = 1000000;
  const kscope::trace_window_schedule grid({100, 1000}, 5 * ms);
  CHECK_FALSE(grid.traced_at(4 * ms));  // before the start
  CHECK(grid.next_change_after(4 * ms) == 5 * ms);
  CHECK(grid.traced_at(5 * ms));        // a window opens at the start
  CHECK(grid.traced_at(105 * ms - 1));
  CHECK_FALSE(grid.traced_at(105 * ms));  // [start, start + window)
  CHECK(grid.next_change_after(5 * ms) == 105 * ms);
  CHECK(grid.next_change_after(105 * ms) == 1005 * ms);
  CHECK(grid.next_change_after(700 * ms) == 1005 * ms);
  CHECK(grid.traced_at(1005 * ms));
  CHECK(grid.traced_at(3050 * ms));  // the 4th window
  CHECK_FALSE(grid.traced_at(3105 * ms));
  // The share it traces, and what is not windowed: always traced, never a change.
  CHECK(kscope::trace_window_options{100, 1000}.traced_share() == doctest::Approx(0.1));
  CHECK(kscope::production_trace_windows.traced_share() == doctest::Approx(0.01));
  for (const kscope::trace_window_options o : {kscope::trace_window_options{0, 1000}, kscope::trace_window_options{100, 100},
                                                kscope::trace_window_options{200, 100}, kscope::trace_window_options{}}) {
    CHECK_FALSE(o.windowed());
    CHECK(o.traced_share() == 1.0);
    const kscope::trace_window_schedule always(o, 5 * ms);
    CHECK(always.traced_at(0));
    CHECK(always.next_change_after(7 * ms) == INT64_MAX);
  }

  kscope::cupti_options c;
  CHECK_FALSE(c.windows.windowed());  // the collector alone traces every launch
  CHECK(kscope::apply_cupti_options_text("window_ms=200,period_ms=5000", c).empty());
  CHECK(c.windows.window_ms == 200);
  CHECK(c.windows.period_ms == 5000);
  CHECK(c.windows.windowed());
  CHECK(c.pause_callbacks);  // a pause switches the launch callbacks off (options.hpp says why)
  CHECK(kscope::apply_cupti_options_text("pause_callbacks=off", c).empty());
  CHECK_FALSE(c.pause_callbacks);
  CHECK_FALSE(c.pause_unsubscribe);  // a probe: the subscription stays across a pause unless asked
  CHECK(kscope::apply_cupti_options_text("pause_unsubscribe=on", c).empty());
  CHECK(c.pause_unsubscribe);
  CHECK_FALSE(kscope::apply_cupti_options_text("pause_unsubscribe=sometimes", c).empty());
  CHECK(c.pause_unsubscribe);
  CHECK_FALSE(c.pause_detach);  // off by default
  CHECK(kscope::apply_cupti_options_text("pause_detach=1", c).empty());
  CHECK(c.pause_detach);
  CHECK_FALSE(kscope::apply_cupti_options_text("pause_detach=maybe", c).empty());
  CHECK(c.pause_detach);  // a value not understood keeps the option's value
  CHECK(kscope::apply_cupti_options_text("pause_detach=off", c).empty());
  CHECK_FALSE(c.pause_detach);
  const auto problems = kscope::apply_cupti_options_text("window_ms=-3,period_ms=99999999999,window_ms=0", c);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].find("'window_ms=-3'") != std::string::npos);
  CHECK(problems[1].find("milliseconds") != std::string::npos);
  CHECK(c.windows.window_ms == 0);  // the valid item applied: windows off
  CHECK(c.windows.period_ms == 5000);
}

TEST_CASE("tracing in windows of steps: the grid, the toggles at each close, the options and the log's line") {
  using toggle = kscope::step_window_schedule::toggle;
  kscope::step_window_schedule s({2, 5});  // steps 0-1, 5-6, 10-11, ... traced
  std::vector<toggle> got;
  for (int i = 0; i < 11; ++i) got.push_back(s.step_closed());
  // After step 1 (the second traced): pause; after step 4: resume; after 6: pause; after 9: resume.
  const std::vector<toggle> want{toggle::none, toggle::pause, toggle::none, toggle::none, toggle::resume,
                                 toggle::none, toggle::pause, toggle::none, toggle::none, toggle::resume, toggle::none};
  CHECK(got == want);
  CHECK(s.steps() == 11);
  CHECK(s.traced(0));
  CHECK(s.traced(6));
  CHECK_FALSE(s.traced(7));
  CHECK(kscope::step_window_options{1, 100}.traced_share() == doctest::Approx(0.01));
  // 1 of 2: a pause and a resume at every close.
  kscope::step_window_schedule half({1, 2});
  CHECK(half.step_closed() == toggle::pause);
  CHECK(half.step_closed() == toggle::resume);
  // Not windowed: never a toggle.
  for (const kscope::step_window_options o : {kscope::step_window_options{}, kscope::step_window_options{3, 3},
                                               kscope::step_window_options{0, 10}, kscope::step_window_options{5, 2}}) {
    CHECK_FALSE(o.windowed());
    kscope::step_window_schedule always(o);
    for (int i = 0; i < 4; ++i) CHECK(always.step_closed() == toggle::none);
    CHECK(always.traced(12345));
  }

  kscope::cupti_options c;
  CHECK_FALSE(c.trace_steps.windowed());  // the collector alone traces every step
  CHECK(kscope::apply_cupti_options_text("trace_steps=1/100,step_scope= decode ", c).empty());
  CHECK(c.trace_steps.window_steps == 1);
  CHECK(c.trace_steps.period_steps == 100);
  CHECK(c.step_scope == "decode");
  const auto problems = kscope::apply_cupti_options_text("trace_steps=5/5,trace_steps=x/3,trace_steps=0/9,trace_steps=2", c);
  CHECK(problems.size() == 4);
  CHECK(c.trace_steps.window_steps == 1);  // each refused item left it as it was
  CHECK(kscope::apply_cupti_options_text("trace_steps=off", c).empty());
  CHECK_FALSE(c.trace_steps.windowed());

  // The log's line names the steps and the scope; the time grid is not claimed.
  constexpr std::int64_t ms = 1000000;
  kscope::trace_window_log log;
  log.configure({}, 0);
  log.configure_steps({1, 100}, "decode");
  log.begin(0);
  log.end(10 * ms);
  log.begin(990 * ms);
  log.end(1000 * ms);
  kscope::trace_window_summary w = log.summary(1500 * ms);
  w.steps_closed = 150;
  CHECK(w.windowed);
  CHECK(w.windows == 2);
  const std::string line = w.describe();
  CHECK(line.find("2 windows of 1 step every 100 (steps: calls of 'decode', 150 so far)") != std::string::npos);
  CHECK(line.find("0.02 s of 1.50 s (1.3 %)") != std::string::npos);
  CHECK(line.find(" ms every") == std::string::npos);
  // None named: not found yet, then found at run time; the line says which.
  log.configure_steps({1, 100}, "", true);
  CHECK(log.summary(1500 * ms).describe().find("no step scope found yet, every launch traced") != std::string::npos);
  log.configure_steps({1, 100}, "step", true);
  CHECK(log.summary(1500 * ms).describe().find(
            "calls of 'step', found as the first outermost scope to launch GPU work at two closes, 0 so far") !=
        std::string::npos);
}

TEST_CASE("windows of steps: the driver's step scope, step thread, toggles, takeover and stale resume") {
  using kscope::step_window_driver;
  using toggle = step_window_driver::toggle;
  constexpr std::int64_t ms = 1000000;
  const auto names = [](kscope::node_id n) { return n == 7 ? std::string("decode") : std::string("other"); };
  int thread_a = 0, thread_b = 0;  // their addresses stand for two threads
  step_window_driver::thread_memory mem_a, mem_b;

  step_window_driver d;
  CHECK_FALSE(d.on());
  d.start({1, 3}, "decode", 0);  // steps 0, 3, 6, ... traced
  REQUIRE(d.on());
  bool tracing = true;
  // Another outermost scope: no step. The named one: steps counted, a toggle only at an edge.
  auto r = d.closed(5, &thread_a, mem_a, 0, tracing, 1 * ms, names);
  CHECK_FALSE(r.counted);
  r = d.closed(7, &thread_a, mem_a, 0, tracing, 2 * ms, names);  // step 0 closed: step 1 untraced
  CHECK(r.counted);
  CHECK(r.change == toggle::pause);
  tracing = false;
  d.note_paused_by_steps(true);
  // Another thread's call of the step scope: not a step while thread a keeps stepping.
  r = d.closed(7, &thread_b, mem_b, 0, tracing, 3 * ms, names);
  CHECK_FALSE(r.counted);
  r = d.closed(7, &thread_a, mem_a, 0, tracing, 4 * ms, names);  // step 1 closed: step 2 untraced
  CHECK(r.counted);
  CHECK(r.change == toggle::none);
  r = d.closed(7, &thread_a, mem_a, 0, tracing, 5 * ms, names);  // step 2 closed: step 3 traced
  CHECK(r.change == toggle::resume);
  // Level-triggered: the toggle was refused (still paused), so the next step asks again... for
  // what step 4 needs: untraced, which is what runs: nothing to do.
  r = d.closed(7, &thread_a, mem_a, 0, tracing, 6 * ms, names);
  CHECK(r.change == toggle::none);
  CHECK(d.steps() == 4);
  // Thread a stops stepping: after a second without a step thread b takes over.
  r = d.closed(7, &thread_b, mem_b, 0, tracing, 6 * ms + step_window_driver::takeover_ns / 2, names);
  CHECK_FALSE(r.counted);
  r = d.closed(7, &thread_b, mem_b, 0, tracing, 7 * ms + step_window_driver::takeover_ns, names);
  CHECK(r.counted);
  CHECK(d.steps() == 5);
  // No step at all for over 2 s while paused by the steps: the next outermost close resumes.
  d.note_paused_by_steps(true);
  r = d.closed(5, &thread_a, mem_a, 0, false, 8 * ms + step_window_driver::takeover_ns + step_window_driver::stale_ns / 2, names);
  CHECK(r.change == toggle::none);
  r = d.closed(5, &thread_a, mem_a, 0, false, 9 * ms + step_window_driver::takeover_ns + step_window_driver::stale_ns, names);
  CHECK(r.change == toggle::resume);
  CHECK_FALSE(r.lost);  // a named scope stays the step scope
  // Stopped: nothing.
  d.stop();
  CHECK_FALSE(d.closed(7, &thread_b, mem_b, 0, true, 10 * ms, names).counted);

  // None named: found at run time. A scope that launched once (load) and one that launched
  // nothing (wait) are not steps; the one that launched at two closes is, at its second.
  step_window_driver f;
  f.start({1, 100}, "", 0);
  std::uint32_t launches = 0;
  r = f.closed(2, &thread_a, mem_a, launches += 5, true, 1 * ms, names);  // load, once
  CHECK_FALSE(r.found);
  r = f.closed(3, &thread_a, mem_a, launches, true, 2 * ms, names);  // wait: no launch
  CHECK_FALSE(r.found);
  r = f.closed(4, &thread_a, mem_a, launches += 9, true, 3 * ms, names);  // step, first
  CHECK_FALSE(r.found);
  r = f.closed(3, &thread_a, mem_a, launches, true, 4 * ms, names);  // wait again: still no launch
  CHECK_FALSE(r.found);
  r = f.closed(4, &thread_a, mem_a, launches += 9, true, 5 * ms, names);  // step, second: found
  CHECK(r.found);
  CHECK(r.counted);
  CHECK(r.change == toggle::pause);  // 1 of 100: the next is not traced
  f.note_paused_by_steps(true);
  // Another thread's repeating scope is not a step now.
  std::uint32_t launches_b = 0;
  CHECK_FALSE(f.closed(8, &thread_b, mem_b, launches_b += 3, false, 6 * ms, names).found);
  CHECK_FALSE(f.closed(8, &thread_b, mem_b, launches_b += 3, false, 7 * ms, names).found);
  // The found scope stops: after 2 s it is lost and looked for again, tracing resumed.
  r = f.closed(8, &thread_b, mem_b, launches_b, false, 8 * ms + step_window_driver::stale_ns, names);
  CHECK(r.lost);
  CHECK(r.change == toggle::resume);
  f.note_paused_by_steps(false);
  // Thread b's scope 8 had launched at two closes already: taken at its next close with launches.
  CHECK_FALSE(f.closed(8, &thread_b, mem_b, launches_b, true, 9 * ms + step_window_driver::stale_ns, names).found);
  r = f.closed(8, &thread_b, mem_b, launches_b += 3, true, 10 * ms + step_window_driver::stale_ns, names);
  CHECK(r.found);
  CHECK(r.counted);
  // A new start forgets each thread's search.
  f.start({1, 100}, "", 0);
  CHECK_FALSE(f.closed(4, &thread_a, mem_a, launches += 9, true, 1 * ms, names).found);
  CHECK(f.closed(4, &thread_a, mem_a, launches += 9, true, 2 * ms, names).found);
  // Not windowed: never on.
  step_window_driver off;
  off.start({3, 3}, "decode", 0);
  CHECK_FALSE(off.on());
}

TEST_CASE("windows of steps: four threads closing the step scope at once, one step thread, toggles kept in order") {
  // Run under ThreadSanitizer in CI (attribution_test_tsan): the driver's atomics and its name
  // lock against the closes of four threads and a fake collector applying the toggles.
  kscope::step_window_driver d;
  d.start({2, 5}, "decode", 0);
  const auto names = [](kscope::node_id n) { return n == 7 ? std::string("decode") : std::string("other"); };
  std::mutex collector;  // the control lock's stand-in
  std::atomic<bool> tracing{true};
  std::atomic<int> toggles{0};
  std::array<std::uint64_t, 4> counted{};
  // Each thread's identity: not a local's address (a thread that ends gives its stack to the
  // next one created, which then looked like the same thread), one object each for all of them.
  std::array<int, 4> identity{};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      kscope::step_window_driver::thread_memory memory;
      const void* me = &identity[t];
      for (int i = 0; i < 2000; ++i) {
        const auto r = d.closed(i % 3 == 0 ? 5 : 7, me, memory, 0, tracing.load(), 1000 + i, names);
        if (r.counted) ++counted[t];
        if (r.change == kscope::step_window_driver::toggle::none) continue;
        std::lock_guard<std::mutex> lock(collector);
        if (d.generation() != r.generation) continue;
        tracing.store(r.change == kscope::step_window_driver::toggle::resume);
        d.note_paused_by_steps(!tracing.load());
        ++toggles;
      }
    });
  }
  for (auto& th : threads) th.join();
  // One thread owned the steps (no second went by without one): all its named closes counted.
  int owners = 0;
  for (std::uint64_t c : counted) {
    if (c == 0) continue;
    ++owners;
    CHECK(c == 2000 - 667);  // i % 3 != 0
  }
  CHECK(owners == 1);
  CHECK(d.steps() == 2000 - 667);
  CHECK(toggles.load() >= 2);
}

TEST_CASE("tracing in windows: the log says what was traced, bounded, and what a figure rests on") {
  constexpr std::int64_t ms = 1000000;
  kscope::trace_window_log log;
  log.configure({100, 1000}, 10 * ms);
  log.begin(10 * ms);
  log.begin(20 * ms);  // already open: no second window
  log.end(110 * ms);
  log.end(120 * ms);   // already closed
  log.begin(1010 * ms);
  kscope::trace_window_summary s = log.summary(1060 * ms);  // the second one open, 50 ms in
  CHECK(s.windowed);
  CHECK(s.open);
  CHECK(s.windows == 2);
  CHECK(s.traced_ns == 150 * ms);
  CHECK(s.elapsed_ns() == 1050 * ms);
  CHECK(s.traced_share() == doctest::Approx(150.0 / 1050.0));
  REQUIRE(s.recent.size() == 2);
  CHECK(s.recent[1].start_ns == 1010 * ms);
  CHECK(s.recent[1].end_ns == 1060 * ms);
  CHECK(s.covers(20 * ms, 100 * ms));
  CHECK_FALSE(s.covers(100 * ms, 200 * ms));  // runs past the window's end
  CHECK_FALSE(s.covers(5 * ms, 20 * ms));     // began before it
  CHECK_FALSE(s.covers(500 * ms, 600 * ms));  // between windows
  CHECK(s.covers(1020 * ms, 1060 * ms));
  CHECK(s.traced_within(0, 2000 * ms) == 150 * ms);
  CHECK(s.traced_within(100 * ms, 1020 * ms) == 20 * ms);
  CHECK(s.traced_within(50 * ms, 40 * ms) == 0);
  const std::string line = s.describe();
  CHECK(line.find("2 windows of 100 ms every 1 s") != std::string::npos);
  CHECK(line.find("0.15 s of 1.05 s (14.3 %)") != std::string::npos);
  CHECK(line.find("one open now") != std::string::npos);

  // Bounded: past max_kept the oldest are counted, not listed; the totals stay exact.
  for (int i = 0; i < 2000; ++i) {
    log.end((2000 + 10 * i) * ms);
    log.begin((2005 + 10 * i) * ms);
  }
  log.end(30000 * ms);
  s = log.summary(30000 * ms);
  CHECK_FALSE(s.open);
  CHECK(s.windows == 2002);
  CHECK(s.recent.size() == kscope::trace_window_log::max_kept);
  CHECK(s.forgotten == 2002 - kscope::trace_window_log::max_kept);
  CHECK(s.traced_ns == 100 * ms + 990 * ms + 1999 * 5 * ms + (30000 - 2005 - 19990) * ms);
  CHECK_FALSE(s.covers(20 * ms, 100 * ms));  // forgotten: no longer known as traced

  // A reset (the aggregates start afresh) forgets the windows; one open restarts now.
  log.begin(31000 * ms);
  log.reset(31050 * ms);
  s = log.summary(31100 * ms);
  CHECK(s.windows == 1);
  CHECK(s.traced_ns == 50 * ms);
  CHECK(s.elapsed_ns() == 50 * ms);

  // Not windowed: no line, every interval covered; paused by the program: windowed from then.
  kscope::trace_window_log always;
  always.configure({}, 0);
  always.begin(0);
  CHECK(always.summary(5 * ms).describe().empty());
  CHECK(always.summary(5 * ms).covers(1, 2));
  always.note_program_window();
  always.end(5 * ms);
  const kscope::trace_window_summary own = always.summary(10 * ms);
  CHECK(own.windowed);
  CHECK(own.describe().find("paused and resumed by the program") != std::string::npos);
  CHECK_FALSE(own.covers(6 * ms, 7 * ms));
}

TEST_CASE("graph-level trace on: the head gets what the rest leaves of the reference, however CUPTI stamps a chain") {
  // Graph 5: a 46 us head, then 49 kernels of 57 us in a chain, each stamped to start 64 ns
  // before the one before it ends (as CUPTI does on an H100): a 2838.864 us replay, which the
  // one-record replays take too. A node-level replay stamped 300 ms late after its head:
  // its head is 46 us again. The sum of the rest's durations is 3.1 us more than the span
  // they cover; taking that sum from the span took 3.1 us (7 %) off the head.
  const std::int64_t us = 1000, ns = 1, offset = 300'000 * us;
  const int rest = 49;
  const std::int64_t head_ns = 46 * us, kernel_ns = 57 * us, overlap = 64 * ns;
  const std::int64_t span = head_ns + rest * (kernel_ns - overlap);
  gpu_attribution a;
  a.set_graph_level_trace(true);
  for (std::uint32_t c = 40; c <= 46; ++c) a.launches().record_launch(c, 3, 0);
  const std::int64_t t = 1000 * us;
  for (std::uint32_t c = 40; c <= 42; ++c) a.add_graph(graph_replay(c, t + (c - 40) * 3000 * us, span));
  const std::int64_t t0 = t + 3 * 3000 * us;
  std::int64_t start = t0;
  for (int i = 0; i <= rest; ++i) {
    const std::int64_t len = i == 0 ? head_ns : kernel_ns;
    const std::int64_t late = i == 0 ? 0 : offset;
    kernel_record k = make_kernel(43, start + late, start + len + offset, 7, i == 0 ? "_Z4headv" : "_Z4restv");
    k.graph_id = 5;
    a.add_kernel(k);
    start += len - overlap;
  }
  a.add_graph(graph_replay(44, t0 + 3000 * us, span));
  const auto r = a.report();
  CHECK(r.counters.graph_replays_retimed == 1);
  bool head_seen = false;
  for (const kscope::kernel_summary& k : r.top_kernels) {
    CAPTURE(k.name);
    if (k.name.find("head") == std::string::npos) continue;
    head_seen = true;
    CHECK(k.max_ns == head_ns - overlap);  // 64 ns short (where the next one starts), not 3.1 us
  }
  CHECK(head_seen);
}

TEST_CASE("a node's compute and first-device unions stand in for kernel_union until they differ; the name cache past its size") {
  // Until a node's first NCCL kernel or second device, its compute union and its first
  // device's union are kernel_union itself (attribution.hpp: node_accumulator): the
  // figures must be those of unions kept apart from the start, folding and clipping
  // included, before and after they are set apart.
  kscope::attribution_options o;
  o.max_intervals_per_node = 8;  // folds after a few kernels
  gpu_attribution a(o);
  for (std::uint32_t id = 1; id <= 200; ++id) a.launches().record_launch(id, 5, 0);
  std::uint32_t id = 1;
  for (int i = 0; i < 100; ++i, ++id) a.add_kernel(make_kernel(id, 1000 + 100 * i, 1050 + 100 * i));
  // Far older than the frontier the folds left: clipped (dropped) in every union it goes to:
  // activity, kernel, compute, device 0.
  a.add_kernel(make_kernel(id++, 1000, 1040));
  auto r = a.report();
  const kscope::node_gpu_activity* n = r.find(5);
  REQUIRE(n != nullptr);
  CHECK(n->busy_ns == 5000);
  CHECK(n->compute_busy_ns == 5000);
  CHECK(n->comm_busy_ns == 0);
  REQUIRE(n->devices.size() == 1);
  CHECK(n->devices[0].busy_ns == 5000);
  CHECK(n->devices[0].kernel_count == 101);  // its totals are the node's until a second device
  CHECK(n->devices[0].kernel_ns == 5040);
  CHECK(r.counters.busy_intervals_clipped == 4);

  // Now apart: NCCL on device 0 [20000, 20400), device 1 [20200, 20600), device 0 [21000, 21100).
  a.add_kernel(make_kernel(id++, 20000, 20400, 8, "_Z18ncclDevKernel_Sendv"));
  kernel_record k = make_kernel(id++, 20200, 20600);
  k.device = 1;
  a.add_kernel(k);
  a.add_kernel(make_kernel(id++, 21000, 21100));
  r = a.report();
  n = r.find(5);
  REQUIRE(n != nullptr);
  CHECK(n->busy_ns == 5000 + 600 + 100);
  CHECK(n->comm_busy_ns == 400);
  CHECK(n->compute_busy_ns == 5000 + 400 + 100);
  REQUIRE(n->devices.size() == 2);
  CHECK(n->devices[0].busy_ns == 5000 + 400 + 100);
  CHECK(n->devices[1].busy_ns == 400);
  CHECK(r.counters.busy_intervals_clipped == 4);
  // The first device's totals, taken over from the node's when device 1 came: its NCCL
  // kernel (before the split) and its last kernel (after) included, device 1's not.
  CHECK(n->devices[0].kernel_count == 103);
  CHECK(n->devices[0].kernel_ns == 5040 + 400 + 100);
  CHECK(n->devices[0].comm_kernel_count == 1);
  CHECK(n->devices[0].comm_ns == 400);
  CHECK(n->devices[1].kernel_count == 1);
  CHECK(n->devices[1].kernel_ns == 400);
  CHECK(n->devices[1].comm_kernel_count == 0);
  CHECK(n->kernel_count == 104);

  // 100 kernel names in one buffer, more than the name cache holds: each counted as itself.
  gpu_attribution b;
  std::vector<std::string> names;
  for (int i = 0; i < 100; ++i) names.push_back("_Z7kernel" + std::to_string(100 + i) + "v");
  std::uint32_t c = 1;
  for (int pass = 0; pass < 3; ++pass) {
    for (const std::string& name : names) {
      b.launches().record_launch(c, 2, 0);
      b.add_kernel(make_kernel(c, 1000 + 10 * c, 1005 + 10 * c, 7, name.c_str()));
      ++c;
    }
  }
  const auto top = b.top_kernels();
  REQUIRE(top.size() == names.size());
  for (const kscope::kernel_summary& s : top) CHECK(s.calls == 3);
}

TEST_CASE("the trace ring gives back every field of every kind, oldest first once it wrapped") {
  // The ring keeps its events compact (attribution.hpp: recent_event) and rebuilds them:
  // each kind's name, bytes and launch shape as the record had them, defaults elsewhere.
  kscope::attribution_options o;
  o.recent_capacity = 4;
  gpu_attribution a(o);
  for (std::uint32_t id = 1; id <= 5; ++id) a.launches().record_launch(id, 4, 2);

  kernel_record k = make_kernel(1, 1000, 1500, 7, "_Z6kernelv");
  k.device = 1;
  k.context = 9;
  k.grid_x = 3;
  k.grid_y = 2;
  k.block_y = 2;
  k.graph_id = 6;
  k.graph_node_id = 77;
  a.add_kernel(k);
  memcpy_record m = make_copy(2, memcpy_kind::d2h, 4096, 1600, 1700);
  m.stream = 3;
  a.add_memcpy(m);
  a.add_memset(make_memset(3, 512, 1800, 1850));
  kscope::graph_record g;
  g.correlation_id = 4;
  g.start_ns = 1900;
  g.end_ns = 2900;
  g.graph_id = 8;
  a.add_graph(g);

  auto recent = a.recent_events();
  REQUIRE(recent.size() == 4);
  const kscope::gpu_activity_event& ke = recent[0];
  CHECK(ke.kind == kscope::activity_kind::kernel);
  CHECK(ke.name == "_Z6kernelv");
  CHECK(ke.correlation_id == 1);
  CHECK(ke.device == 1);
  CHECK(ke.context == 9);
  CHECK(ke.stream == 7);
  CHECK(ke.start_ns == 1000);
  CHECK(ke.end_ns == 1500);
  CHECK(ke.graph_id == 6);
  CHECK(ke.graph_node_id == 77);
  CHECK(ke.node == 4);
  CHECK(ke.thread_index == 2);
  CHECK(ke.grid == std::array<std::int32_t, 3>{3, 2, 1});
  CHECK(ke.block == std::array<std::int32_t, 3>{128, 2, 1});
  CHECK(ke.bytes == 0);
  CHECK(ke.copy_kind == memcpy_kind::unknown);
  const kscope::gpu_activity_event& me = recent[1];
  CHECK(me.kind == kscope::activity_kind::memcpy);
  CHECK(me.name == "Memcpy DtoH");
  CHECK(me.copy_kind == memcpy_kind::d2h);
  CHECK(me.bytes == 4096);
  CHECK(me.stream == 3);
  CHECK(me.grid == std::array<std::int32_t, 3>{});
  CHECK(me.block == std::array<std::int32_t, 3>{});
  const kscope::gpu_activity_event& se = recent[2];
  CHECK(se.kind == kscope::activity_kind::memset);
  CHECK(se.name == "Memset");
  CHECK(se.copy_kind == memcpy_kind::unknown);
  CHECK(se.bytes == 512);
  const kscope::gpu_activity_event& ge = recent[3];
  CHECK(ge.kind == kscope::activity_kind::graph);
  CHECK(ge.name == "CUDA graph");
  CHECK(ge.graph_id == 8);
  CHECK(ge.bytes == 0);
  CHECK(ge.start_ns == 1900);
  CHECK(ge.end_ns == 2900);

  // A fifth event overwrites the kernel: oldest first from the copy on.
  a.add_kernel(make_kernel(5, 3000, 3100, 7, "_Z1bv"));
  recent = a.recent_events();
  REQUIRE(recent.size() == 4);
  CHECK(recent[0].name == "Memcpy DtoH");
  CHECK(recent[3].name == "_Z1bv");
  CHECK(recent[3].grid == std::array<std::int32_t, 3>{4, 1, 1});
  CHECK(a.counters().recent_overwritten == 1);
  CHECK(a.counters().recent_overwritten_end_ns == 1500);
  // The names outlive a reset of the aggregates; the ring starts over.
  a.reset();
  CHECK(a.recent_events().empty());
  a.add_kernel(make_kernel(5, 4000, 4100, 7, "_Z1bv"));
  REQUIRE(a.recent_events().size() == 1);
  CHECK(a.recent_events()[0].name == "_Z1bv");
}

}  // namespace attribution_test
