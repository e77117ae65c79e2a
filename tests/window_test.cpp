// session::window(): what happened since the previous window, without resetting the run
// (recorder::take_window, session/detail/window.hpp, evidence/gpu_time.hpp's given window).
//
// Known answers come from records with exact tick values (recorder::log, the path a closing
// scope takes) and from GPU events handed to a fake activity source; the memory case runs
// 10^8 scopes across 10^4 windows and is its own ctest entry (window_memory, not `quick`).
#include <kscope/scope/scope.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/session/session.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#if defined(__unix__)
#  include <unistd.h>
#endif

namespace {

// A GPU activity source that returns what the test put in it.
struct fake_gpu_source final : kscope::gpu_activity_source {
  kscope::cupti_snapshot data;
  bool start(const kscope::cupti_options&) override {
    data.status.state = kscope::cupti_state::running;
    data.status.message = "fake source";
    return true;
  }
  void flush() override {}
  kscope::cupti_snapshot snapshot(std::size_t) override { return data; }
  void reset() override { data.activity = kscope::gpu_activity_report{}; }
  kscope::cupti_status status() const override { return data.status; }
};

// The session, reset, with no activity source started and the default window bounds; the
// same again when the test ends (other cases in this file share the process-wide session).
struct fresh_session {
  fresh_session() { restore(); }
  ~fresh_session() { restore(); }
  static void restore() {
    kscope::session& s = kscope::session::global();
    s.set_gpu_activity_source(nullptr);
    kscope::recorder::global().set_window_sample_cap(kscope::recorder::default_window_sample_cap);
    kscope::recorder::global().set_window_sample_budget(kscope::recorder::default_window_sample_budget);
    s.reset();
  }
  kscope::session& session = kscope::session::global();
};

// One closed scope of `node` lasting exactly `ticks`, as a closing scope records it.
void log_call(kscope::node_id node, std::int64_t start, std::int64_t ticks) {
  kscope::detail::scope_record r{};
  r.node = node;
  r.event_slot = kscope::detail::no_events;
  r.start_ticks = start;
  r.end_ticks = start + ticks;
  r.flops = r.bytes = std::nan("");
  kscope::recorder::global().log(r);
}

std::uint64_t calls_of(const kscope::session_report& r, const std::string& path) {
  const kscope::scope_report* s = r.find(path);
  return s ? s->calls : 0;
}

}  // namespace

// First in the file (doctest runs a file's cases in order): its first window is the
// process's first, which the recorder takes as a copy of the run so far (take_window()).
TEST_CASE("counts per window add up to the run's total, and report() still shows the whole run") {
  fresh_session fresh;
  const int per_window[] = {3, 0, 17, 1, 250};
  std::uint64_t outer_sum = 0, inner_sum = 0, expected = 0;
  std::uint64_t last_sequence = 0;
  for (int n : per_window) {
    for (int i = 0; i < n; ++i) {
      KSCOPE_SCOPE("wc_step");
      for (int k = 0; k < 2; ++k) { KSCOPE_SCOPE("wc_inner"); }
    }
    expected += static_cast<std::uint64_t>(n);
    const kscope::session_report w = fresh.session.window();
    REQUIRE(w.window);
    CHECK(w.window->sequence == last_sequence + 1);  // consecutive, none skipped
    last_sequence = w.window->sequence;
    CHECK(calls_of(w, "wc_step") == static_cast<std::uint64_t>(n));
    CHECK(calls_of(w, "wc_step/wc_inner") == 2 * static_cast<std::uint64_t>(n));
    outer_sum += calls_of(w, "wc_step");
    inner_sum += calls_of(w, "wc_step/wc_inner");
  }
  CHECK(outer_sum == expected);
  CHECK(inner_sum == 2 * expected);
  // The run's report is untouched by the windows: the tree and the totals of all of them.
  const kscope::session_report run = fresh.session.report();
  CHECK_FALSE(run.window);
  CHECK(calls_of(run, "wc_step") == expected);
  CHECK(calls_of(run, "wc_step/wc_inner") == 2 * expected);
  CHECK(run.find("wc_step")->samples_kept == expected);  // the run's samples were not taken away
  CHECK(run.json().find("\"window\":null") != std::string::npos);
}

TEST_CASE("percentiles of a window come only from that window's samples") {
  fresh_session fresh;
  auto& rec = kscope::recorder::global();
  const kscope::node_id node = rec.intern(kscope::detail::root_node, "wp_call");
  // Window 1: 100 calls of 1000..1099 ticks, window 2: 100 calls of 100000..100099, in a
  // scrambled order (37 is coprime with 100) so no warm-up is seen in either.
  std::int64_t t = kscope::detail::ticks();
  for (int i = 0; i < 100; ++i) log_call(node, t += 200000, 1000 + (i * 37) % 100);
  const kscope::session_report w1 = fresh.session.window();
  for (int i = 0; i < 100; ++i) log_call(node, t += 200000, 100000 + (i * 37) % 100);
  const kscope::session_report w2 = fresh.session.window();
  const kscope::session_report run = fresh.session.report();

  const double ns_per_tick = kscope::detail::calibrate_ticks().ns_per_tick;
  const auto in_ticks = [&](double ns) { return ns / ns_per_tick; };
  const kscope::scope_report* a = w1.find("wp_call");
  const kscope::scope_report* b = w2.find("wp_call");
  const kscope::scope_report* whole = run.find("wp_call");
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(whole);
  CHECK(a->calls == 100);
  CHECK(b->calls == 100);
  CHECK(whole->calls == 200);
  CHECK(a->host_ns.n + a->host_ns.warmup == 100);
  CHECK(b->host_ns.n + b->host_ns.warmup == 100);
  // Every statistic of a window lies within its own values (1e-3: the tick calibration).
  for (double v : {a->host_ns.min, a->host_ns.median, a->host_ns.p90, a->host_ns.p99, a->host_ns.max}) {
    CHECK(in_ticks(v) >= doctest::Approx(1000).epsilon(1e-3));
    CHECK(in_ticks(v) <= doctest::Approx(1099).epsilon(1e-3));
  }
  for (double v : {b->host_ns.min, b->host_ns.median, b->host_ns.p90, b->host_ns.p99, b->host_ns.max}) {
    CHECK(in_ticks(v) >= doctest::Approx(100000).epsilon(1e-3));
    CHECK(in_ticks(v) <= doctest::Approx(100099).epsilon(1e-3));
  }
  if (b->host_ns.warmup == 0) CHECK(in_ticks(b->host_ns.median) == doctest::Approx(100049.5).epsilon(1e-4));
  // The totals: exact sums of each window's values; the run's is both.
  const double sum1 = 100 * 1000 + 4950, sum2 = 100 * 100000.0 + 4950;
  CHECK(in_ticks(a->host_inclusive_ns) == doctest::Approx(sum1).epsilon(1e-4));
  CHECK(in_ticks(b->host_inclusive_ns) == doctest::Approx(sum2).epsilon(1e-4));
  CHECK(in_ticks(whole->host_inclusive_ns) == doctest::Approx(sum1 + sum2).epsilon(1e-4));
  CHECK(in_ticks(whole->host_ns.min) <= doctest::Approx(1099).epsilon(1e-3));
  CHECK(in_ticks(whole->host_ns.max) >= doctest::Approx(100000).epsilon(1e-3));
}

TEST_CASE("a window keeps at most its sample cap per series; counts and totals stay exact") {
  fresh_session fresh;
  auto& rec = kscope::recorder::global();
  rec.set_window_sample_cap(64);
  (void)fresh.session.window();  // the new cap applies from the next window on
  const kscope::node_id node = rec.intern(kscope::detail::root_node, "wcap_call");
  std::int64_t t = kscope::detail::ticks();
  for (int i = 0; i < 1000; ++i) log_call(node, t += 10000, 500 + i % 7);
  const kscope::session_report w = fresh.session.window();
  const kscope::scope_report* s = w.find("wcap_call");
  REQUIRE(s);
  CHECK(s->calls == 1000);
  CHECK(s->samples_kept == 64);
  CHECK(s->samples_capped);
  CHECK(w.sample_cap == 64);
  const double ns_per_tick = kscope::detail::calibrate_ticks().ns_per_tick;
  double sum = 0;
  for (int i = 0; i < 1000; ++i) sum += 500 + i % 7;
  CHECK(s->host_inclusive_ns / ns_per_tick == doctest::Approx(sum).epsilon(1e-4));
  CHECK(s->host_ns.min / ns_per_tick == doctest::Approx(500).epsilon(1e-3));  // exact over all calls
  CHECK(s->host_ns.max / ns_per_tick == doctest::Approx(506).epsilon(1e-3));
  // The run keeps its own, larger sample.
  CHECK(fresh.session.report().find("wcap_call")->samples_kept == 1000);
}

TEST_CASE("an empty window is a defined empty result, in every form") {
  fresh_session fresh;
  { KSCOPE_SCOPE("we_once"); }
  const kscope::session_report first = fresh.session.window();
  CHECK(calls_of(first, "we_once") == 1);
  const kscope::session_report empty = fresh.session.window();
  REQUIRE(empty.window);
  CHECK(empty.scopes.empty());
  CHECK(empty.window->sequence == first.window->sequence + 1);
  CHECK(empty.window->since_ns == first.window->until_ns);  // windows tile the run: no gap, no overlap
  CHECK(empty.window->until_ns >= empty.window->since_ns);
  CHECK(empty.window->duration_ns == empty.window->until_ns - empty.window->since_ns);
  CHECK_FALSE(std::isfinite(empty.window->gpu_busy_share));  // nothing collects GPU activity here
  CHECK(empty.window->gpu_busy_unavailable.find("enable_cupti") != std::string::npos);
  CHECK_FALSE(empty.gpu_time);
  const std::string text = empty.text();
  CHECK_MESSAGE(text.find("(no scopes recorded)") != std::string::npos, text);
  CHECK_MESSAGE(text.find("window " + std::to_string(empty.window->sequence) + ": the ") != std::string::npos, text);
  CHECK(!empty.csv().empty());
  CHECK(!empty.html().empty());
  CHECK(!kscope::openmetrics(empty).empty());
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(empty.json(), &error);
  REQUIRE_MESSAGE(back, error);
  CHECK(back->scopes.empty());
  REQUIRE(back->window);
  CHECK(back->window->sequence == empty.window->sequence);
  CHECK(back->window->since_ns == empty.window->since_ns);
  CHECK(back->window->until_ns == empty.window->until_ns);
  CHECK(back->window->duration_ns == empty.window->duration_ns);
  CHECK(back->window->gpu_busy_unavailable == empty.window->gpu_busy_unavailable);
  // The run still has the one call.
  CHECK(calls_of(fresh.session.report(), "we_once") == 1);
}

TEST_CASE("the JSON reader reads a window back, and refuses one whose end is before its start") {
  kscope::session_report r;
  kscope::report_window w;
  w.sequence = 7;
  w.since_ns = 1'000'000'000;
  w.until_ns = 11'000'000'000;
  w.duration_ns = 10'000'000'000;
  w.gpu_busy_share = 0.625;
  w.gpu_busy_ns = 6.25e9;
  r.window = w;
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(r.json(), &error);
  REQUIRE_MESSAGE(back, error);
  REQUIRE(back->window);
  CHECK(back->window->sequence == 7);
  CHECK(back->window->since_ns == 1'000'000'000);
  CHECK(back->window->until_ns == 11'000'000'000);
  CHECK(back->window->duration_ns == 10'000'000'000);
  CHECK(back->window->gpu_busy_share == 0.625);
  CHECK(back->window->gpu_busy_ns == 6.25e9);
  CHECK(back->window->gpu_busy_unavailable.empty());
  CHECK(back->text().find("GPU busy 62.5%") != std::string::npos);

  kscope::session_report whole;  // a report of the run: no window, and none read back
  const std::optional<kscope::session_report> run = kscope::parse_report(whole.json(), &error);
  REQUIRE_MESSAGE(run, error);
  CHECK_FALSE(run->window);

  std::string doc = r.json();
  const std::string until = "\"until_ns\":11000000000";
  REQUIRE(doc.find(until) != std::string::npos);
  doc.replace(doc.find(until), until.size(), "\"until_ns\":5");
  CHECK_FALSE(kscope::parse_report(doc, &error));
  CHECK_MESSAGE(error.find("malformed kscope report: window:") == 0, error);
}

TEST_CASE("windows taken while several threads record lose and repeat nothing") {
  fresh_session fresh;
  constexpr int threads = 4, per_thread = 20000;
  std::atomic<int> running{threads};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([t, &running] {
      const std::string own = "wt_thread" + std::to_string(t);
      for (int i = 0; i < per_thread; ++i) {
        KSCOPE_SCOPE("wt_shared");
        kscope::scope mine{own};
        if (i % 64 == 0) mine.tag("lane", "a");
      }
      running.fetch_sub(1);
    });
  }
  std::map<std::string, std::uint64_t> sums;
  std::uint64_t tags = 0;
  int windows = 0;
  const auto take = [&] {
    const kscope::session_report w = fresh.session.window();
    ++windows;
    for (const kscope::scope_report& s : w.scopes) {
      sums[s.path] += s.calls;
      for (const kscope::tag_count& tag : s.tags) tags += tag.count;
    }
  };
  while (running.load() > 0) take();
  for (std::thread& w : workers) w.join();
  take();  // what closed after the last window taken while they ran
  MESSAGE(windows, " windows while ", threads, " threads recorded");
  CHECK(windows >= 2);
  CHECK(sums["wt_shared"] == static_cast<std::uint64_t>(threads) * per_thread);
  for (int t = 0; t < threads; ++t)
    CHECK(sums["wt_shared/wt_thread" + std::to_string(t)] == static_cast<std::uint64_t>(per_thread));
  CHECK(tags == static_cast<std::uint64_t>(threads) * ((per_thread + 63) / 64));
  const kscope::session_report run = fresh.session.report();
  CHECK(calls_of(run, "wt_shared") == static_cast<std::uint64_t>(threads) * per_thread);
  CHECK(fresh.session.window().scopes.empty());  // everything was taken once
}

TEST_CASE("a scope open across a window boundary is counted in the window where it closes") {
  fresh_session fresh;
  std::int64_t opened_ns = 0;
  kscope::session_report before, after;
  {
    KSCOPE_SCOPE("wb_long");
    opened_ns = kscope::detail::now_ns();
    { KSCOPE_SCOPE("wb_short"); }
    before = fresh.session.window();  // wb_long is open here
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::int64_t closed_ns = kscope::detail::now_ns();
  after = fresh.session.window();
  // wb_short closed before the boundary; wb_long is listed there only as its parent.
  CHECK(calls_of(before, "wb_long/wb_short") == 1);
  CHECK(calls_of(before, "wb_long") == 0);
  CHECK(calls_of(after, "wb_long") == 1);
  CHECK(calls_of(after, "wb_long/wb_short") == 0);
  const kscope::scope_report* s = after.find("wb_long");
  REQUIRE(s);
  // Its whole time, the part before the boundary included.
  CHECK(s->host_inclusive_ns >= 0.9 * static_cast<double>(before.window->until_ns - opened_ns));
  CHECK(s->host_inclusive_ns <= 1.1 * static_cast<double>(closed_ns - opened_ns) + 1e5);
  CHECK(s->host_inclusive_ns > 2e6 * 0.9);
}

TEST_CASE("the window's GPU busy share: its own events, clipped to it; unknown when the ring does not reach back") {
  fresh_session fresh;
  auto fake = std::make_shared<fake_gpu_source>();
  fresh.session.set_gpu_activity_source(fake);
  REQUIRE(fresh.session.enable_cupti());
  const kscope::session_report previous = fresh.session.window();
  REQUIRE(previous.window);
  const std::int64_t boundary = previous.window->until_ns;
  kscope::node_id node = 0;
  std::uint32_t thread = 0;
  std::int64_t call_start = 0;
  {
    kscope::scope s{"wg_decode"};
    node = s.node();
    thread = kscope::detail::this_thread_state().thread_index;
    call_start = kscope::detail::now_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  const auto event = [&](std::int64_t start, std::int64_t ns) {
    kscope::gpu_activity_event e;
    e.node = node;
    e.thread_index = thread;
    e.name = "wg_kernel";
    e.start_ns = start;
    e.end_ns = start + ns;
    return e;
  };
  // Before the window (ignored), straddling its start (2 ms of it inside), and two inside
  // (4 ms and 3 ms, 1 ms apart): 9 ms busy in the window.
  fake->data.activity.recent = {event(boundary - 50'000'000, 10'000'000), event(boundary - 2'000'000, 4'000'000),
                                event(call_start + 5'000'000, 4'000'000), event(call_start + 10'000'000, 3'000'000)};
  const kscope::session_report w = fresh.session.window();
  REQUIRE(w.window);
  CHECK(w.window->since_ns == doctest::Approx(static_cast<double>(boundary)).epsilon(1e-9));
  CHECK(w.window->gpu_busy_unavailable.empty());
  CHECK(w.window->gpu_busy_ns == doctest::Approx(9e6).epsilon(1e-3));
  CHECK(w.window->gpu_busy_share ==
        doctest::Approx(w.window->gpu_busy_ns / static_cast<double>(w.window->duration_ns)).epsilon(1e-9));
  REQUIRE(w.gpu_time);
  CHECK(w.gpu_time->window_start_ns == w.window->since_ns);
  CHECK(w.gpu_time->window_end_ns == w.window->until_ns);
  const kscope::scope_gpu_time* d = w.gpu_time->find(node);
  REQUIRE(d);
  CHECK(d->gpu_ns == doctest::Approx(9e6).epsilon(1e-3));  // its events in the window, not the run's aggregate
  CHECK(d->kernel_count == 3);
  CHECK(w.find("wg_decode")->calls == 1);
  CHECK_FALSE(w.find("wg_decode")->gpu_activity);  // the CUPTI aggregates are the run's: report() has them

  // No GPU event in the next window: an idle GPU, not an unknown one.
  const kscope::session_report idle = fresh.session.window();
  CHECK(idle.window->gpu_busy_share == 0);

  // The ring overflowed and its oldest event is after the window's start: unknown, and why.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  fake->data.activity.recent = {event(kscope::detail::now_ns() - 100'000, 50'000)};
  fake->data.activity.counters.recent_overwritten = 5;
  const kscope::session_report lost = fresh.session.window();
  CHECK_FALSE(std::isfinite(lost.window->gpu_busy_share));
  CHECK_MESSAGE(lost.window->gpu_busy_unavailable.find("GPU event ring") != std::string::npos,
                lost.window->gpu_busy_unavailable);
  CHECK(lost.text().find("GPU busy unknown") != std::string::npos);
}

TEST_CASE("gpu_time over a given window: clipped busy time, per-scope time from its events, idle is 0") {
  using kscope::gpu_activity_event;
  const auto event = [](kscope::node_id node, kscope::activity_kind kind, std::int64_t start, std::int64_t end) {
    gpu_activity_event e;
    e.node = node;
    e.kind = kind;
    e.thread_index = 0;
    e.start_ns = start;
    e.end_ns = end;
    return e;
  };
  kscope::node_gpu_activity whole_run;  // the aggregate: must not be used for a given window
  whole_run.kernel_count = 1000;
  whole_run.busy_ns = 1'000'000;
  kscope::gpu_time_input in;
  in.nodes = {{1, 0, 1, false, "step", &whole_run}, {2, 1, 2, false, "step/copy", nullptr}};
  in.host = {{"step", 1, 0, 900, 2100}};
  in.gpu = {event(1, kscope::activity_kind::kernel, 500, 700),     // before the window: out
            event(1, kscope::activity_kind::kernel, 950, 1100),    // 100 inside
            event(1, kscope::activity_kind::kernel, 1050, 1200),   // overlaps the one before: union 1000..1200
            event(2, kscope::activity_kind::memcpy, 1500, 1600),   // 100
            event(1, kscope::activity_kind::kernel, 1900, 2300)};  // 100 inside (to 2000)
  in.window_start_ns = 1000;
  in.window_end_ns = 2000;
  const kscope::gpu_time_report t = kscope::account_gpu_time(in);
  CHECK(t.window_start_ns == 1000);
  CHECK(t.window_end_ns == 2000);
  CHECK(t.wall_ns == 1000);
  CHECK(t.gpu_events == 4);
  CHECK(t.busy_ns == 400);  // 1000..1200, 1500..1600, 1900..2000
  CHECK(t.busy_share == doctest::Approx(0.4));
  const kscope::scope_gpu_time* step = t.find(1);
  const kscope::scope_gpu_time* copy = t.find(2);
  REQUIRE(step);
  REQUIRE(copy);
  CHECK(step->gpu_ns == 300);       // its kernels' union in the window, not the aggregate's 1 ms
  CHECK(step->kernel_count == 3);   // kernels that overlap the window, not the aggregate's 1000
  CHECK(copy->gpu_ns == 100);
  CHECK(step->share_of_gpu == doctest::Approx(0.75));
  REQUIRE(t.idle_gaps.size() == 2);
  CHECK(t.idle_gaps[0].ns == 300);  // 1200..1500 and 1600..1900, inside the window only
  CHECK(t.idle_gaps[0].open_scope == 1);

  // Nothing on the GPU in the window: idle, a share of 0, not unknown.
  in.window_start_ns = 3000;
  in.window_end_ns = 4000;
  const kscope::gpu_time_report idle = kscope::account_gpu_time(in);
  CHECK(idle.busy_share == 0);
  CHECK(idle.gpu_events == 0);
  // The ring overflowed and holds nothing from before the window's start: unknown.
  in.gpu_overwritten = 10;
  in.window_start_ns = 400;
  CHECK(std::isnan(kscope::account_gpu_time(in).busy_share));
  in.window_start_ns = 600;  // the ring's oldest event (500) is before it: known
  CHECK(std::isfinite(kscope::account_gpu_time(in).busy_share));
}

// CUPTI delivers its buffers out of time order across streams, so the ring's oldest event
// says nothing about what it dropped: only the latest end of an event it overwrote does.
TEST_CASE("an event the GPU ring dropped that ended inside the window makes its GPU figures unknown, never partial") {
  fresh_session fresh;
  auto fake = std::make_shared<fake_gpu_source>();
  fresh.session.set_gpu_activity_source(fake);
  REQUIRE(fresh.session.enable_cupti());
  const auto event = [](kscope::node_id node, std::uint32_t thread, std::int64_t start, std::int64_t ns) {
    kscope::gpu_activity_event e;
    e.node = node;
    e.thread_index = thread;
    e.name = "wv_kernel";
    e.start_ns = start;
    e.end_ns = start + ns;
    return e;
  };
  const auto one_call = [](kscope::node_id& node, std::uint32_t& thread, std::int64_t& call_start) {
    kscope::scope s{"wv_decode"};
    node = s.node();
    thread = kscope::detail::this_thread_state().thread_index;
    call_start = kscope::detail::now_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  kscope::node_id node = 0;
  std::uint32_t thread = 0;
  std::int64_t call_start = 0;

  // The ring's oldest event is before the window (the old test said "covered"), but an
  // event it overwrote ended 6 ms into it: the window's GPU work is not all there.
  std::int64_t boundary = fresh.session.window().window->until_ns;
  one_call(node, thread, call_start);
  fake->data.activity.recent = {event(node, thread, boundary - 5'000'000, 1'000'000),
                                event(node, thread, call_start + 2'000'000, 3'000'000),
                                event(node, thread, call_start + 8'000'000, 2'000'000)};
  fake->data.activity.counters.recent_overwritten = 3;
  fake->data.activity.counters.recent_overwritten_end_ns = call_start + 6'000'000;
  const kscope::session_report lost = fresh.session.window();
  REQUIRE(lost.window);
  CHECK_FALSE(std::isfinite(lost.window->gpu_busy_share));
  CHECK_FALSE(std::isfinite(lost.window->gpu_busy_ns));
  const std::string reason = lost.window->gpu_busy_unavailable;
  CHECK_MESSAGE(reason.find("GPU event ring") != std::string::npos, reason);
  REQUIRE(lost.gpu_time);
  CHECK(lost.gpu_time->gpu_known_from_ns == call_start + 6'000'000);
  CHECK_FALSE(std::isfinite(lost.gpu_time->busy_ns));
  const kscope::scope_gpu_time* d = lost.gpu_time->find(node);
  REQUIRE(d);
  CHECK_FALSE(d->totals_known);
  CHECK(std::isnan(d->gpu_ns));
  CHECK(std::isnan(d->share_of_gpu));
  // Its one call started before the last dropped event ended: not in the per-call figures.
  CHECK(d->calls_seen == 0);
  CHECK(lost.gpu_time->calls_before_gpu_ring >= 1);
  const std::string text = lost.text();
  CHECK_MESSAGE(text.find("recent-event ring") == std::string::npos, text);  // the whole run's words
  CHECK_MESSAGE(text.find("(all records)") == std::string::npos, text);
  CHECK_MESSAGE(text.find("GPU busy: - (" + reason.substr(0, 20)) != std::string::npos, text);
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(lost.json(), &error);
  REQUIRE_MESSAGE(back, error);
  REQUIRE(back->gpu_time);
  const kscope::scope_gpu_time* read = back->gpu_time->find(node);
  REQUIRE(read);
  CHECK_FALSE(read->totals_known);
  CHECK(std::isnan(read->gpu_ns));
  CHECK(back->gpu_time->gpu_known_from_ns == lost.gpu_time->gpu_known_from_ns);
  CHECK(lost.json().find("\"kernel_count\":null") != std::string::npos);

  // Every event it overwrote ended before the window, and its oldest kept event is after
  // the window's start (the old test said "unknown"): the window's events are all there.
  boundary = lost.window->until_ns;
  one_call(node, thread, call_start);
  fake->data.activity.recent = {event(node, thread, call_start + 2'000'000, 3'000'000)};
  fake->data.activity.counters.recent_overwritten = 7;
  fake->data.activity.counters.recent_overwritten_end_ns = boundary - 1'000'000;
  const kscope::session_report kept = fresh.session.window();
  CHECK_MESSAGE(kept.window->gpu_busy_unavailable.empty(), kept.window->gpu_busy_unavailable);
  CHECK(kept.window->gpu_busy_ns == doctest::Approx(3e6).epsilon(1e-3));
  REQUIRE(kept.gpu_time);
  const kscope::scope_gpu_time* k = kept.gpu_time->find(node);
  REQUIRE(k);
  CHECK(k->totals_known);
  CHECK(k->gpu_ns == doctest::Approx(3e6).epsilon(1e-3));
  CHECK(k->kernel_count == 1);
  CHECK(k->calls_seen == 1);
  const std::string kept_text = kept.text();
  CHECK_MESSAGE(kept_text.find("(all records)") == std::string::npos, kept_text);
  CHECK_MESSAGE(kept_text.find("this window") != std::string::npos, kept_text);
}

TEST_CASE("a window lists only the tag values given in it") {
  fresh_session fresh;
  (void)fresh.session.window();  // from here on each window counts its own tags
  const auto tags_of = [](const kscope::session_report& r) {
    std::map<std::string, std::uint64_t> out;
    if (const kscope::scope_report* s = r.find("wtag_call"))
      for (const kscope::tag_count& t : s->tags) out[t.key + "=" + t.value] = t.count;
    return out;
  };
  {
    kscope::scope s{"wtag_call"};
    s.tag("lane", "a");
  }
  const kscope::session_report first = fresh.session.window();
  CHECK(tags_of(first) == std::map<std::string, std::uint64_t>{{"lane=a", 1}});
  for (int i = 0; i < 2; ++i) {
    kscope::scope s{"wtag_call"};
    s.tag("lane", "b");
  }
  const kscope::session_report second = fresh.session.window();
  CHECK(calls_of(second, "wtag_call") == 2);
  CHECK(tags_of(second) == std::map<std::string, std::uint64_t>{{"lane=b", 2}});  // no "lane=a" with 0
  CHECK(second.json().find("\"value\":\"a\"") == std::string::npos);
  { kscope::scope s{"wtag_call"}; }
  const kscope::session_report third = fresh.session.window();
  CHECK(calls_of(third, "wtag_call") == 1);
  CHECK(tags_of(third).empty());
  // The run keeps every tag with its whole count.
  CHECK(tags_of(fresh.session.report()) == std::map<std::string, std::uint64_t>{{"lane=a", 1}, {"lane=b", 2}});
}

TEST_CASE("reset() starts the next window afresh") {
  fresh_session fresh;
  { KSCOPE_SCOPE("wr_before"); }
  fresh.session.reset();
  { KSCOPE_SCOPE("wr_after"); }
  const kscope::session_report w = fresh.session.window();
  CHECK(calls_of(w, "wr_before") == 0);
  CHECK(calls_of(w, "wr_after") == 1);
}

namespace {

std::size_t resident_bytes() {
#if defined(__unix__)
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return read == 2 ? static_cast<std::size_t>(resident) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) : 0;
#else
  return 0;
#endif
}

}  // namespace

// Its own ctest entry (window_memory, tests/CMakeLists.txt: --no-skip); skipped in window_test.
TEST_CASE("10^8 scopes across 10^4 windows: resident memory stays flat" * doctest::skip()) {
  fresh_session fresh;
  auto& rec = kscope::recorder::global();
  rec.set_nvtx(false);
  constexpr int windows = 10000;
  constexpr int pairs_per_window = 5000;  // two scopes each: 10^4 scopes per window, 10^8 in all
  constexpr int settle_windows = 1000;    // allocator pools and the trace ring filled by then
  std::size_t settled = 0, peak = 0;
  std::uint64_t outer = 0, inner = 0;
  const auto started = std::chrono::steady_clock::now();
  for (int w = 0; w < windows; ++w) {
    for (int i = 0; i < pairs_per_window; ++i) {
      KSCOPE_SCOPE("wm_step");
      KSCOPE_SCOPE("wm_inner");
    }
    const kscope::session_report r = fresh.session.window();
    outer += calls_of(r, "wm_step");
    inner += calls_of(r, "wm_step/wm_inner");
    if (w + 1 == settle_windows) settled = resident_bytes();
    if (w + 1 > settle_windows) peak = std::max(peak, resident_bytes());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  rec.set_nvtx(true);
  MESSAGE("RSS after ", settle_windows, " windows: ", settled >> 10, " KiB; peak after: ", peak >> 10,
          " KiB; ", seconds, " s");
  CHECK(outer == std::uint64_t{windows} * pairs_per_window);
  CHECK(inner == std::uint64_t{windows} * pairs_per_window);
  const kscope::session_report run = fresh.session.report();
  CHECK(calls_of(run, "wm_step") == std::uint64_t{windows} * pairs_per_window);
  REQUIRE(settled > 0);  // /proc/self/statm was read
  // 9000 more windows: a leak of 512 bytes per window would be 4.4 MiB.
  CHECK(peak <= settled + (std::size_t{4} << 20));
}
