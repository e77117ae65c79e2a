// Scopes and the call-path tree: nesting, names, recursion, threads, ranges, switches.
#include <kscope/scope/recorder_snapshot.hpp>
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>  // the reports the checks read

#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <utility>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace scope_test {  // one per file: the unit tests build as one program

namespace {

void sleep_ms(double ms) {
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long long>(ms * 1000)));
}

// A copy, not a reference: g++ 13 flags references returned through temporary arguments.
kscope::scope_report must_find(const kscope::session_report& r, const std::string& path) {
  const kscope::scope_report* s = r.find(path);
  if (!s) FAIL("no scope at path " << path << "\n" << r.text());
  return *s;
}

int recurse(int depth) {
  KSCOPE_FUNCTION();
  return depth == 0 ? 0 : 1 + recurse(depth - 1);
}

}  // namespace

TEST_CASE("nested scopes build a call-path tree with counts and times") {
  auto& session = kscope::session::global();
  session.reset();
  for (int i = 0; i < 3; ++i) {
    KSCOPE_SCOPE("t1_outer");
    sleep_ms(1);
    {
      KSCOPE_SCOPE("t1_inner");
      sleep_ms(2);
    }
  }
  const auto r = session.report();
  const auto outer = must_find(r, "t1_outer");
  const auto inner = must_find(r, "t1_outer/t1_inner");
  CHECK(outer.calls == 3);
  CHECK(inner.calls == 3);
  CHECK(outer.depth == 1);
  CHECK(inner.depth == 2);
  CHECK(inner.parent == outer.id);
  CHECK(inner.host_ns.median >= 2e6);
  CHECK(outer.host_ns.median >= 3e6);
  // Exclusive time is the outer scope's own (>= 1 ms per call), the child's excluded.
  // (Only lower bounds on sleeps: a loaded machine may oversleep by any amount.)
  CHECK(outer.host_exclusive_ns / 3 >= 1e6);
  CHECK(outer.host_exclusive_ns + inner.host_inclusive_ns == doctest::Approx(outer.host_inclusive_ns));
  CHECK(inner.share_of_parent == doctest::Approx(inner.host_inclusive_ns / outer.host_inclusive_ns));
  CHECK(inner.share_of_parent > 0.0);
  CHECK(inner.share_of_parent < 1.0);
  CHECK(outer.host_ns.n == 3);  // fewer than 10 calls: no warm-up removal
}

TEST_CASE("same name under different parents gives different nodes; same parent, one node") {
  auto& session = kscope::session::global();
  session.reset();
  {
    KSCOPE_SCOPE("t2_a");
    { kscope::scope s{"t2_leaf"}; }
    { kscope::scope s{std::string("t2_leaf")}; }
  }
  {
    KSCOPE_SCOPE("t2_b");
    kscope::scope s{"t2_leaf"};
  }
  const auto r = session.report();
  const auto a_leaf = must_find(r, "t2_a/t2_leaf");
  const auto b_leaf = must_find(r, "t2_b/t2_leaf");
  CHECK(a_leaf.calls == 2);
  CHECK(b_leaf.calls == 1);
  CHECK(a_leaf.id != b_leaf.id);
}

TEST_CASE("recursion nests one node per depth") {
  auto& session = kscope::session::global();
  session.reset();
  CHECK(recurse(2) == 2);
  const auto r = session.report();
  CHECK(must_find(r, "recurse").calls == 1);
  CHECK(must_find(r, "recurse/recurse").calls == 1);
  CHECK(must_find(r, "recurse/recurse/recurse").calls == 1);
  CHECK(r.find("recurse/recurse/recurse/recurse") == nullptr);
}

TEST_CASE("8 threads x 100000 scopes are all counted exactly") {
  auto& session = kscope::session::global();
  session.reset();
#if defined(KSCOPE_TSAN_BUILD)
  const int per_thread = 20000;  // ThreadSanitizer is ~20x slower; the races are the same
#else
  const int per_thread = 100000;
#endif
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, per_thread] {
      KSCOPE_SCOPE("t4_worker");
      const std::string mine = "t4_thread_" + std::to_string(t % 2);
      for (int i = 0; i < per_thread; ++i) {
        KSCOPE_SCOPE("t4_step");
        if (i % 1000 == 0) kscope::scope named{mine};
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto r = session.report();
  CHECK(must_find(r, "t4_worker").calls == 8);
  CHECK(must_find(r, "t4_worker/t4_step").calls == 8u * per_thread);
  CHECK(must_find(r, "t4_worker/t4_step/t4_thread_0").calls == 4u * (per_thread / 1000));
  CHECK(must_find(r, "t4_worker/t4_step/t4_thread_1").calls == 4u * (per_thread / 1000));
}

TEST_CASE("a range can start on one thread and end on another") {
  auto& session = kscope::session::global();
  session.reset();
  kscope::range request;
  {
    KSCOPE_SCOPE("t5_accept");
    request = kscope::start_range("t5_request");
    CHECK(request.active());
  }
  std::thread worker([r = std::move(request)]() mutable {
    sleep_ms(3);
    kscope::end_range(std::move(r));
    CHECK_FALSE(r.active());
  });
  worker.join();
  const auto r = session.report();
  const auto req = must_find(r, "t5_accept/t5_request");
  CHECK(req.cross_thread);
  CHECK(req.calls == 1);
  CHECK(req.host_ns.median >= 3e6);
  // The range outlived its parent scope: its time is not subtracted from the parent.
  const auto accept = must_find(r, "t5_accept");
  CHECK(accept.host_exclusive_ns == doctest::Approx(accept.host_inclusive_ns));
}

TEST_CASE("a range whose handle is destroyed ends there; end is idempotent") {
  auto& session = kscope::session::global();
  session.reset();
  {
    auto r = kscope::start_range("t6_dropped");
    r.end();
    r.end();
  }
  { auto r = kscope::start_range("t6_dropped"); }
  CHECK(must_find(session.report(), "t6_dropped").calls == 2);
}

TEST_CASE("run-time disable makes scopes record nothing; KSCOPE=0 in the environment too") {
  auto& session = kscope::session::global();
  session.reset();
  kscope::set_enabled(false);
  CHECK_FALSE(kscope::is_enabled());
  {
    KSCOPE_SCOPE("t7_off");
    kscope::scope s{"t7_off_named"};
    CHECK_FALSE(s.active());
    auto r = kscope::start_range("t7_off_range");
    CHECK_FALSE(r.active());
  }
  kscope::set_enabled(true);
  { KSCOPE_SCOPE("t7_on"); }
  auto r = session.report();
  CHECK(r.find("t7_off") == nullptr);
  CHECK(r.find("t7_off_named") == nullptr);
  CHECK(r.find("t7_off_range") == nullptr);
  CHECK(must_find(r, "t7_on").calls == 1);

  // The environment is read once, lazily; simulate a fresh process.
  setenv("KSCOPE", "0", 1);
  kscope::detail::enabled_state.store(-1);
  CHECK_FALSE(kscope::is_enabled());
  setenv("KSCOPE", "1", 1);
  kscope::detail::enabled_state.store(-1);
  CHECK(kscope::is_enabled());
  unsetenv("KSCOPE");
  kscope::detail::enabled_state.store(-1);
  CHECK(kscope::is_enabled());
}

TEST_CASE("a scope disabled at entry stays consistent if enabled before it closes") {
  auto& session = kscope::session::global();
  session.reset();
  kscope::set_enabled(false);
  {
    KSCOPE_SCOPE("t8_toggle");
    kscope::set_enabled(true);
    KSCOPE_SCOPE("t8_child");  // opens under the root: the outer scope never opened
  }
  const auto r = session.report();
  CHECK(r.find("t8_toggle") == nullptr);
  CHECK(must_find(r, "t8_child").calls == 1);
  CHECK(kscope::detail::current_node() == kscope::detail::root_node);
}

TEST_CASE("the sample cap bounds memory; counts and totals stay exact") {
  auto& session = kscope::session::global();
  session.set_sample_cap(100);
  session.reset();
  for (int i = 0; i < 1000; ++i) { KSCOPE_SCOPE("t9_capped"); }
  const auto r = session.report();
  const auto s = must_find(r, "t9_capped");
  CHECK(s.calls == 1000);
  CHECK(s.samples_kept == 100);
  CHECK(s.samples_capped);
  CHECK(r.sample_cap == 100);
  CHECK(r.text().find("samples capped at 100") != std::string::npos);
  session.set_sample_cap(10000);
  session.reset();
}

TEST_CASE("declared work and tags are summed per node") {
  auto& session = kscope::session::global();
  session.reset();
  for (int i = 0; i < 4; ++i) {
    kscope::scope s{"t10_gemm"};
    s.set_work({2.0e9, 3.0e6});
    s.tag("dtype", "bf16");
    s.tag("shape", i < 3 ? "4096" : "8192");
  }
  const auto r = session.report();
  const auto s = must_find(r, "t10_gemm");
  CHECK(s.declared.flops == doctest::Approx(8.0e9));
  CHECK(s.declared.bytes == doctest::Approx(1.2e7));
  CHECK(s.work_calls == 4);
  REQUIRE(s.tags.size() == 3);
  CHECK(s.tags[0].key == "dtype");
  CHECK(s.tags[0].count == 4);
  CHECK(s.tags[1].value == "4096");
  CHECK(s.tags[1].count == 3);
  CHECK(s.tags[2].value == "8192");
}

TEST_CASE("reset forgets samples but keeps the tree usable") {
  auto& session = kscope::session::global();
  { KSCOPE_SCOPE("t11_before"); }
  session.reset();
  CHECK(session.report().find("t11_before") == nullptr);
  { KSCOPE_SCOPE("t11_before"); }
  CHECK(must_find(session.report(), "t11_before").calls == 1);
}

TEST_CASE("scopes on a thread that exits are kept") {
  auto& session = kscope::session::global();
  session.reset();
  std::thread([] {
    for (int i = 0; i < 2500; ++i) { KSCOPE_SCOPE("t12_short_lived"); }  // > one ring
  }).join();
  CHECK(must_find(session.report(), "t12_short_lived").calls == 2500);
}

TEST_CASE("the text report is an indented tree that fits 100 columns") {
  auto& session = kscope::session::global();
  session.reset();
  {
    KSCOPE_SCOPE("t13_request");
    { KSCOPE_SCOPE("t13_a_very_long_phase_name_that_does_not_fit_in_the_column"); }
  }
  const std::string text = session.report().text();
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::size_t columns = 0;
    for (std::size_t i = start; i < end; ++i) columns += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    CHECK_MESSAGE(columns <= 100, text.substr(start, end - start));
    start = end + 1;
  }
  CHECK(text.find("t13_request") != std::string::npos);
  CHECK(text.find("\n  t13_a_very_long") != std::string::npos);  // indented child
  CHECK(text.find("GPU") != std::string::npos);                  // context says GPU status
}

namespace {
// The child of `parent` named `name` in a recorder snapshot, or nullptr.
const kscope::recorded_node* child_named(const kscope::recorder_snapshot& s, kscope::node_id parent,
                                         const std::string& name) {
  for (kscope::node_id c : s.nodes[parent].children)
    if (s.nodes[c].name == name) return &s.nodes[c];
  return nullptr;
}
}  // namespace

TEST_CASE("the recorder's snapshot is a copy of what closed scopes recorded") {
  auto& recorder = kscope::recorder::global();
  recorder.reset();
  {
    KSCOPE_SCOPE("t14_outer");
    kscope::scope inner{"t14_inner"};
    inner.set_work({4.0, 2.0});
    inner.tag("k", "v");
  }
  const kscope::recorder_snapshot first = recorder.snapshot();
  const kscope::recorded_node* outer = child_named(first, kscope::detail::root_node, "t14_outer");
  REQUIRE(outer);
  const kscope::node_id outer_id = static_cast<kscope::node_id>(outer - first.nodes.data());
  const kscope::recorded_node* inner = child_named(first, outer_id, "t14_inner");
  REQUIRE(inner);
  CHECK(outer->calls == 1);
  CHECK(outer->host_ticks.count() == 1);
  CHECK(inner->depth == 2);
  CHECK(inner->flops == 4.0);
  CHECK(inner->bytes == 2.0);
  CHECK(inner->work_calls == 1);
  REQUIRE(inner->tags.size() == 1);
  CHECK(inner->tags[0].key == "k");
  CHECK(inner->tags[0].count == 1);
  CHECK(outer->host_total_ticks >= inner->host_total_ticks);

  { KSCOPE_SCOPE("t14_outer"); }
  CHECK(outer->calls == 1);  // the copy does not move
  const kscope::recorder_snapshot second = recorder.snapshot();
  CHECK(second.nodes[outer_id].calls == 2);
  CHECK(second.sample_cap == recorder.sample_cap());
}

TEST_CASE("a recorded series keeps exact count, sum and extremes past its sample cap") {
  kscope::recorded_series s(4);
  for (int i = 1; i <= 100; ++i) s.add(static_cast<double>(i));
  CHECK(s.count() == 100);
  CHECK(s.sum() == 5050.0);
  CHECK(s.min() == 1.0);
  CHECK(s.max() == 100.0);
  CHECK(s.samples().size() == 4);
  CHECK(s.saturated());
  for (double v : s.samples()) CHECK((v >= 1.0 && v <= 100.0));
  kscope::recorded_series few(4);
  few.add(-2.0);
  few.add(3.0);
  CHECK_FALSE(few.saturated());
  CHECK(few.samples() == std::vector<double>{-2.0, 3.0});
  CHECK(few.min() == -2.0);
}

TEST_CASE("KSCOPE_SCOPE takes any name: null, a temporary, a name that changes per call") {
  auto& session = kscope::session::global();
  session.reset();
  { KSCOPE_SCOPE(nullptr); }                       // segfaulted: the site read a null name
  {
    const char* no_name = nullptr;
    KSCOPE_SCOPE(no_name);
  }
  for (int i = 0; i < 3; ++i) {
    // A temporary: the call site must not keep the pointer (it dangled after the first
    // call), and each call's own text names its node.
    KSCOPE_SCOPE(std::string("t20_dynamic_" + std::to_string(i)).c_str());
  }
  for (int i = 0; i < 2; ++i) {
    const std::string name = "t20_string_" + std::to_string(i);
    KSCOPE_SCOPE(name);
    char buffer[16] = "t20_buffer_x";
    buffer[11] = static_cast<char>('0' + i);  // a writable array: its text changes
    KSCOPE_SCOPE(buffer);
  }
  const auto r = session.report();
  CHECK(must_find(r, "(null)").calls == 2);
  for (int i = 0; i < 3; ++i) CHECK(must_find(r, "t20_dynamic_" + std::to_string(i)).calls == 1);
  CHECK(must_find(r, "t20_string_0").calls == 1);
  CHECK(must_find(r, "t20_string_1").calls == 1);
  CHECK(must_find(r, "t20_string_0/t20_buffer_0").calls == 1);
  CHECK(must_find(r, "t20_string_1/t20_buffer_1").calls == 1);
}

TEST_CASE("a '/' in a name never makes two scopes share a path") {
  auto& session = kscope::session::global();
  session.reset();
  { KSCOPE_SCOPE("t21_a/b"); }
  {
    KSCOPE_SCOPE("t21_a");
    KSCOPE_SCOPE("b");
  }
  { kscope::scope s{"t21_back\\slash"}; }
  const auto r = session.report();
  CHECK(must_find(r, "t21_a\\/b").calls == 1);
  CHECK(must_find(r, "t21_a/b").calls == 1);
  CHECK(must_find(r, "t21_a\\/b").name == "t21_a/b");
  CHECK(must_find(r, "t21_back\\\\slash").name == "t21_back\\slash");
}

TEST_CASE("the sample budget bounds all nodes together; counts stay exact and the report says so") {
  auto& recorder = kscope::recorder::global();
  auto& session = kscope::session::global();
  recorder.set_sample_budget(1000);
  session.reset();
  // 40 nodes x 200 calls: 8000 values wanted, 1000 allowed (plus 64 per series at least).
  for (int call = 0; call < 200; ++call)
    for (int n = 0; n < 40; ++n) kscope::scope s{"t22_node_" + std::to_string(n)};
  const auto r = session.report();
  std::size_t held = 0;
  for (int n = 0; n < 40; ++n) {
    const auto s = must_find(r, "t22_node_" + std::to_string(n));
    CHECK(s.calls == 200);
    CHECK(s.samples_kept >= kscope::recorder::min_series_samples);
    CHECK(s.samples_kept <= 200);
    held += s.samples_kept;
  }
  CHECK(held <= 1000 + 40 * kscope::recorder::min_series_samples);
  CHECK(held < 8000);
  bool warned = false;
  for (const std::string& w : r.warnings) warned = warned || w.find("memory budget") != std::string::npos;
  CHECK(warned);
  recorder.set_sample_budget(kscope::recorder::default_sample_budget);
  session.reset();
}

TEST_CASE("a snapshot taken while other threads record is consistent: children never outnumber their parent") {
  auto& session = kscope::session::global();
  session.reset();
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
        KSCOPE_SCOPE("t23_parent");
        KSCOPE_SCOPE("t23_child");
      }
    });
  for (int i = 0; i < 20; ++i) {
    const kscope::recorder_snapshot data = kscope::recorder::global().snapshot();
    for (const kscope::recorded_node& n : data.nodes) {
      CHECK(n.host_ticks.samples().size() <= n.calls);
      std::uint64_t child_calls = 0;
      for (kscope::node_id c : n.children) child_calls += data.nodes[c].calls;
      // A child closes before its parent: each of the 2 threads may have one parent call
      // open whose child was already counted, never more.
      if (n.name == "t23_parent") CHECK(child_calls <= n.calls + 2);
    }
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  session.reset();
}

namespace {
// What the step hook (scope/detail/step_hook.hpp) was called with, on which thread.
struct outermost_closes {
  std::mutex mutex;
  std::vector<std::pair<kscope::node_id, std::thread::id>> calls;
};
outermost_closes& seen_closes() {
  static outermost_closes s;
  return s;
}
void note_outermost_close(kscope::node_id closed) noexcept {
  std::lock_guard<std::mutex> lock(seen_closes().mutex);
  seen_closes().calls.emplace_back(closed, std::this_thread::get_id());
}
}  // namespace

TEST_CASE("an outermost scope's close calls the step hook, with its node, on its thread; nested closes do not") {
  // The collector's windows of steps count steps here (activity/collector.hpp); no hook: nothing.
  kscope::session::global().reset();
  { KSCOPE_SCOPE("before_hook"); }
  kscope::detail::outermost_close_hook.store(&note_outermost_close, std::memory_order_release);
  kscope::node_id step_node = 0, inner_node = 0;
  for (int i = 0; i < 3; ++i) {
    kscope::scope step("hook_step");
    step_node = step.node();
    {
      kscope::scope inner("hook_inner");
      inner_node = inner.node();
      { KSCOPE_SCOPE("hook_leaf"); }
    }
  }
  std::thread other([] { kscope::scope s("hook_other_thread"); });
  other.join();
  kscope::detail::outermost_close_hook.store(nullptr, std::memory_order_release);
  { KSCOPE_SCOPE("after_hook"); }
  std::lock_guard<std::mutex> lock(seen_closes().mutex);
  const auto& calls = seen_closes().calls;
  REQUIRE(calls.size() == 4);
  for (int i = 0; i < 3; ++i) {
    CHECK(calls[static_cast<std::size_t>(i)].first == step_node);
    CHECK((calls[static_cast<std::size_t>(i)].second == std::this_thread::get_id()));
  }
  CHECK(calls[3].first != step_node);
  CHECK(calls[3].first != inner_node);
  CHECK((calls[3].second != std::this_thread::get_id()));
  // Every close was still recorded (the hook runs after the record).
  const auto snap = kscope::recorder::global().snapshot();
  std::uint64_t step_calls = 0;
  for (const auto& n : snap.nodes)
    if (n.name == "hook_step") step_calls = n.calls;
  CHECK(step_calls == 3);
}

}  // namespace scope_test
