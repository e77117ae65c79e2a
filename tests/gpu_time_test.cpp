// GPU-time accounting (evidence/gpu_time.hpp) on synthetic host intervals and GPU events:
// the window, the busy union, the idle gaps and the scope open in each, per-call busy time
// and gaps with children's work included, what the rings covered, and bad input.
#include <kscope/evidence/gpu_time.hpp>
#include <kscope/report/report.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/verdict/diagnose.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace gpu_time_test {  // one per file: the unit tests build as one program

namespace {

kscope::gpu_activity_event kernel(kscope::node_id node, std::int64_t start, std::int64_t end, std::uint32_t thread = 0) {
  kscope::gpu_activity_event e;
  e.kind = kscope::activity_kind::kernel;
  e.node = node;
  e.thread_index = thread;
  e.start_ns = start;
  e.end_ns = end;
  return e;
}

kscope::gpu_activity_event d2h(kscope::node_id node, std::int64_t start, std::int64_t end) {
  kscope::gpu_activity_event e = kernel(node, start, end);
  e.kind = kscope::activity_kind::memcpy;
  e.copy_kind = kscope::memcpy_kind::d2h;
  return e;
}

// Two steps on thread 0: step > {schedule, decode, d2h}. Decode launches two kernels per
// call; d2h copies back once, in the second step.
//   step A [100, 1100]: schedule [100, 400], decode [400, 1000]: kernels [450, 550], [650, 750]
//   step B [1100, 2100]: schedule [1100, 1400], decode [1400, 2000]: kernels [1500, 1650], [1700, 1800]
//                        d2h [2000, 2090]: copy [2010, 2030]
struct two_steps {
  kscope::node_gpu_activity decode_activity, d2h_activity;
  kscope::gpu_time_input in;
  two_steps() {
    decode_activity.kernel_count = 4;
    decode_activity.busy_ns = 450;
    decode_activity.kernel_ns = 450;
    d2h_activity.memcpy[static_cast<std::size_t>(kscope::copy_direction::d2h)] = kscope::copy_totals{1, 64, 20};
    in.nodes = {{1, 0, 1, false, "step", nullptr},
                {2, 1, 2, false, "step/schedule", nullptr},
                {3, 1, 2, false, "step/decode", &decode_activity},
                {4, 1, 2, false, "step/d2h", &d2h_activity}};
    in.host = {{"step", 1, 0, 100, 1100},      {"schedule", 2, 0, 100, 400},   {"decode", 3, 0, 400, 1000},
               {"step", 1, 0, 1100, 2100},     {"schedule", 2, 0, 1100, 1400}, {"decode", 3, 0, 1400, 2000},
               {"d2h", 4, 0, 2000, 2090}};
    in.gpu = {kernel(3, 450, 550), kernel(3, 650, 750), kernel(3, 1500, 1650), kernel(3, 1700, 1800),
              d2h(4, 2010, 2030)};
  }
};

}  // namespace

TEST_CASE("gpu_time: window, busy share, idle gaps and the scope open in each") {
  const two_steps f;
  const kscope::gpu_time_report t = kscope::account_gpu_time(f.in);
  CHECK(t.window_start_ns == 100);
  CHECK(t.window_end_ns == 2100);
  CHECK(t.wall_ns == doctest::Approx(2000));
  CHECK(t.busy_ns == doctest::Approx(100 + 100 + 150 + 100 + 20));
  CHECK(t.busy_share == doctest::Approx(470.0 / 2000));
  CHECK(t.host_intervals == 7);
  CHECK(t.gpu_events == 5);
  CHECK(t.gpu_events_unmatched == 0);
  // Gaps between busy stretches: 550-650 (100), 750-1500 (750), 1650-1700 (50), 1800-2010 (210).
  REQUIRE(t.idle_gaps.size() == 4);
  CHECK(t.idle_gaps[0].ns == 750);
  CHECK(t.idle_gaps[0].start_ns == 750);
  CHECK(t.idle_gaps[0].open_path == "step/schedule");  // midpoint 1125: schedule of step B, deeper than step
  CHECK(t.idle_gaps[1].ns == 210);
  CHECK(t.idle_gaps[1].open_path == "step/decode");    // midpoint 1905
  CHECK(t.idle_gaps[2].ns == 100);
  CHECK(t.idle_gaps[3].ns == 50);
  // All gaps by open scope: schedule 750 (one gap); decode 100 + 50 + 210 (midpoints 600,
  // 1675, 1905: inside decode's calls).
  REQUIRE(t.idle_by_scope.size() == 2);
  CHECK(t.idle_by_scope[0].path == "step/schedule");
  CHECK(t.idle_by_scope[0].ns == doctest::Approx(750));
  CHECK(t.idle_by_scope[0].gaps == 1);
  CHECK(t.idle_by_scope[1].path == "step/decode");
  CHECK(t.idle_by_scope[1].scope == 3);
  CHECK(t.idle_by_scope[1].ns == doctest::Approx(360));
  CHECK(t.idle_by_scope[1].gaps == 3);
}

TEST_CASE("gpu_time: per scope totals from the aggregates, per call busy and gaps from the rings") {
  const two_steps f;
  const kscope::gpu_time_report t = kscope::account_gpu_time(f.in);
  const kscope::scope_gpu_time* decode = t.find(3);
  REQUIRE(decode != nullptr);
  CHECK(decode->gpu_ns == doctest::Approx(450));
  CHECK(decode->share_of_gpu == doctest::Approx(450.0 / 470));
  CHECK(decode->kernel_count == 4);
  CHECK(decode->calls_seen == 2);
  CHECK(decode->busy_per_call_ns.n == 2);
  CHECK(decode->busy_per_call_ns.median == doctest::Approx((200 + 250) / 2.0));
  CHECK(decode->gaps_per_call_ns.median == doctest::Approx((100 + 50) / 2.0));
  CHECK(decode->kernels_per_call == doctest::Approx(2));
  CHECK(decode->max_gap_ns == doctest::Approx(100));
  CHECK(decode->d2h_per_call == doctest::Approx(0));

  // The step gets its children's work, call by call: A {200 busy, 100 gap}; B {270 busy,
  // gaps 50 + 210 (1800 -> 2010 before the copy)}.
  const kscope::scope_gpu_time* step = t.find(1);
  REQUIRE(step != nullptr);
  CHECK(step->gpu_ns == doctest::Approx(0));  // launched nothing itself
  CHECK(step->calls_seen == 2);
  CHECK(step->busy_per_call_ns.min == doctest::Approx(200));
  CHECK(step->busy_per_call_ns.max == doctest::Approx(270));
  CHECK(step->gaps_per_call_ns.max == doctest::Approx(260));
  CHECK(step->kernels_per_call == doctest::Approx(2));
  CHECK(step->d2h_per_call == doctest::Approx(0.5));
  CHECK(step->max_gap_ns == doctest::Approx(210));

  const kscope::scope_gpu_time* schedule = t.find(2);
  REQUIRE(schedule != nullptr);
  CHECK(schedule->calls_seen == 2);
  CHECK(schedule->busy_per_call_ns.max == doctest::Approx(0));
  CHECK(std::isnan(schedule->share_of_gpu));  // no activity of its own
}

TEST_CASE("gpu_time: tracing in windows: wall time is traced time, no gap between windows, whole calls only") {
  // Traced twice: [100, 1100] (step A) and [1400, 2100] (decode B on). The 750 ns between
  // A's last kernel and B's first span the untraced stretch: unknown, not an idle gap. Each
  // window is known on the GPU side from its first record on (450 and 1500): work launched
  // before a window opens may run into it unrecorded.
  two_steps f;
  f.in.traced = std::vector<kscope::traced_interval>{{100, 1100}, {1400, 2100}};
  kscope::gpu_time_report t = kscope::account_gpu_time(f.in);
  CHECK(t.windowed);
  CHECK(t.traced_windows == 2);
  CHECK(t.wall_ns == doctest::Approx(650 + 600));  // [450, 1100] and [1500, 2100]
  CHECK(t.busy_ns == doctest::Approx(470));
  CHECK(t.busy_share == doctest::Approx(470.0 / 1250));  // not 470 / 2000: the untraced time is not idle
  REQUIRE(t.idle_gaps.size() == 3);                      // 550-650, 1650-1700, 1800-2010; not 750-1500
  for (const kscope::gpu_idle_gap& g : t.idle_gaps) CHECK(g.ns != 750);
  CHECK(t.idle_gaps[0].ns == 210);
  {  // The text says what the share is of.
    kscope::session_report rep;
    rep.gpu_time = t;
    std::string text = rep.text();
    for (std::size_t at; (at = text.find("\n  ")) != std::string::npos;) text.replace(at, 3, " ");
    CHECK_MESSAGE(text.find("GPU busy 37.6% of the traced time") != std::string::npos, text);
    CHECK_MESSAGE(text.find("in 2 traced windows; between them unknown") != std::string::npos, text);
  }
  // Calls that lie whole in a window: step A, schedule A, decode A, decode B, d2h; step B and
  // schedule B began before the second window opened.
  CHECK(t.calls_untraced == 2);
  const kscope::scope_gpu_time* decode = t.find(3);
  REQUIRE(decode != nullptr);
  CHECK(decode->calls_seen == 2);
  CHECK(decode->kernels_per_call == doctest::Approx(2));
  const kscope::scope_gpu_time* step = t.find(1);
  REQUIRE(step != nullptr);
  CHECK(step->calls_seen == 1);
  CHECK(step->busy_per_call_ns.max == doctest::Approx(200));  // step A alone

  // One window over step A; a kernel launched in it runs past its end: clipped there, and
  // the calls after it (step B's) are left out of the per-call figures.
  two_steps g;
  g.in.gpu = {kernel(3, 450, 550), kernel(3, 650, 750), kernel(3, 950, 1200)};
  g.in.traced = std::vector<kscope::traced_interval>{{90, 1120}};
  t = kscope::account_gpu_time(g.in);
  CHECK(t.wall_ns == doctest::Approx(670));  // [450, 1120]: from the window's first record to its end
  CHECK(t.busy_ns == doctest::Approx(100 + 100 + 170));
  CHECK(t.busy_share == doctest::Approx(370.0 / 670));
  REQUIRE(t.idle_gaps.size() == 2);
  CHECK(t.idle_gaps[0].ns == 200);  // 750-950
  CHECK(t.idle_gaps[1].ns == 100);  // 550-650
  CHECK(t.calls_untraced == 4);     // step B, schedule B, decode B, d2h
  decode = t.find(3);
  REQUIRE(decode != nullptr);
  CHECK(decode->calls_seen == 1);
  CHECK(decode->kernels_per_call == doctest::Approx(3));

  // Windows that miss the account's span: nothing traced there, so no share at all (never 0).
  two_steps h;
  h.in.traced = std::vector<kscope::traced_interval>{{5000, 6000}};
  t = kscope::account_gpu_time(h.in);
  CHECK(t.wall_ns == 0);
  CHECK(std::isnan(t.busy_share));
  CHECK(t.idle_gaps.empty());
  CHECK(t.calls_untraced == 7);
}

TEST_CASE("gpu_time: events of an unseen launching call, and an overflowed GPU ring") {
  two_steps f;
  f.in.gpu.push_back(kernel(3, 1900, 1950, /*thread=*/7));  // decode never ran on thread 7
  f.in.gpu_overwritten = 12;
  const kscope::gpu_time_report t = kscope::account_gpu_time(f.in);
  CHECK(t.gpu_events_unmatched == 1);
  CHECK(t.gpu_overwritten == 12);
  // Before the oldest GPU event kept, the GPU's activity is unknown: the window starts there.
  CHECK(t.window_start_ns == 450);
  CHECK(t.wall_ns == doctest::Approx(2100 - 450));
  CHECK(t.find(3)->kernels_per_call == doctest::Approx(2));  // the unmatched kernel is in no call
  // Step A, its schedule and its decode started before 450: their GPU work is unknown, so
  // they are not calls with no GPU work (that drove real medians to 0 ns).
  CHECK(t.calls_before_gpu_ring == 3);
  CHECK(t.find(3)->calls_seen == 1);
  CHECK(t.find(3)->busy_per_call_ns.median == doctest::Approx(250));
  CHECK(t.find(1)->calls_seen == 1);
  CHECK(t.find(1)->busy_per_call_ns.median == doctest::Approx(270));
}

TEST_CASE("gpu_time: a ring that kept the last of many calls gives their per-call busy time, not 0") {
  // 100 decode calls of 1000 ns, one 600 ns kernel each; the GPU ring kept the last 10.
  kscope::node_gpu_activity decode_activity;
  decode_activity.kernel_count = 100;
  decode_activity.busy_ns = decode_activity.kernel_ns = 60'000;
  kscope::gpu_time_input in;
  in.nodes = {{1, 0, 1, false, "decode", &decode_activity}};
  for (std::int64_t i = 0; i < 100; ++i) {
    in.host.push_back({"decode", 1, 0, 1000 * i + 1, 1000 * i + 1000});
    if (i >= 90) in.gpu.push_back(kernel(1, 1000 * i + 200, 1000 * i + 800));
  }
  in.gpu_overwritten = 90;
  const kscope::gpu_time_report t = kscope::account_gpu_time(in);
  const kscope::scope_gpu_time* decode = t.find(1);
  REQUIRE(decode != nullptr);
  // The call that launched the oldest kernel kept started before it: partly unknown, so
  // it is left out too (an earlier kernel of it may be among the lost ones).
  CHECK(decode->calls_seen == 9);
  CHECK(t.calls_before_gpu_ring == 91);
  CHECK(decode->busy_per_call_ns.median == doctest::Approx(600));
  CHECK(decode->kernels_per_call == doctest::Approx(1));
  // Without overflow the same calls all count: 90 of them truly launched nothing.
  in.gpu_overwritten = 0;
  const kscope::gpu_time_report all = kscope::account_gpu_time(in);
  CHECK(all.find(1)->calls_seen == 100);
  CHECK(all.calls_before_gpu_ring == 0);
}

// CUPTI hands over its buffers out of time order across streams: the ring's oldest event
// does not say what it dropped, the latest end of an event it overwrote does.
TEST_CASE("gpu_time: the latest end of a dropped event bounds what an overflowed ring knows") {
  // Step B's window [1100, 2100]: the ring still holds step A's kernels (its oldest starts
  // at 450, before the window), but a kernel it overwrote, delivered late from another
  // stream, ended at 1660, inside the window.
  two_steps f;
  f.in.window_start_ns = 1100;
  f.in.window_end_ns = 2100;
  f.in.gpu_overwritten = 1;
  f.in.gpu_overwritten_end_ns = 1660;
  const kscope::gpu_time_report t = kscope::account_gpu_time(f.in);
  CHECK(t.gpu_known_from_ns == 1660);
  CHECK(std::isnan(t.busy_share));
  CHECK(std::isnan(t.busy_ns));
  const kscope::scope_gpu_time* decode = t.find(3);
  REQUIRE(decode != nullptr);
  CHECK_FALSE(decode->totals_known);  // its own events in the window are partial
  CHECK(std::isnan(decode->gpu_ns));
  CHECK(std::isnan(decode->share_of_gpu));
  CHECK(decode->calls_seen == 0);  // started at 1400, before 1660: a kernel of it may be lost
  const kscope::scope_gpu_time* copy = t.find(4);
  REQUIRE(copy != nullptr);
  CHECK_FALSE(copy->totals_known);
  CHECK(copy->calls_seen == 1);  // started at 2000: nothing it launched can have been dropped
  CHECK(t.calls_before_gpu_ring == 3);
  // The gap 1650..1700 may hold the lost kernel; 1800..2010 cannot.
  REQUIRE(t.idle_gaps.size() == 1);
  CHECK(t.idle_gaps[0].start_ns == 1800);
  CHECK(t.idle_gaps[0].ns == 210);
  // The text says the scope figures are unknown rather than printing them.
  kscope::session_report r;
  kscope::scope_report s;
  s.id = 3;
  s.name = s.path = "decode";
  r.scopes.push_back(s);
  r.gpu_time = t;
  const std::string json = r.json();
  CHECK(json.find("\"kernel_count\":null") != std::string::npos);
  CHECK(json.find("\"gpu_known_from_ns\":1660") != std::string::npos);

  // Everything it overwrote ended before the window, and the oldest event it holds starts
  // after the window's start: the window's events are all there.
  two_steps g;
  g.in.gpu.erase(g.in.gpu.begin(), g.in.gpu.begin() + 2);  // step A's kernels are gone
  g.in.window_start_ns = 1100;
  g.in.window_end_ns = 2100;
  g.in.gpu_overwritten = 2;
  g.in.gpu_overwritten_end_ns = 800;
  const kscope::gpu_time_report covered = kscope::account_gpu_time(g.in);
  CHECK(covered.busy_share == doctest::Approx((150 + 100 + 20) / 1000.0));
  const kscope::scope_gpu_time* d = covered.find(3);
  REQUIRE(d != nullptr);
  CHECK(d->totals_known);
  CHECK(d->gpu_ns == doctest::Approx(250));
  CHECK(d->kernel_count == 2);
  CHECK(d->calls_seen == 1);
  CHECK(covered.calls_before_gpu_ring == 0);

  // The whole run: before the latest end of a dropped event the GPU's activity is unknown,
  // so the window starts there, not at the ring's oldest event (450).
  two_steps h;
  h.in.gpu_overwritten = 1;
  h.in.gpu_overwritten_end_ns = 1660;
  const kscope::gpu_time_report run = kscope::account_gpu_time(h.in);
  CHECK(run.window_start_ns == 1660);
  CHECK(run.gpu_known_from_ns == 1660);
  CHECK(run.find(3)->totals_known);  // the CUPTI aggregates are whole: nothing lost there
  CHECK(run.find(3)->gpu_ns == doctest::Approx(450));
  CHECK(run.find(3)->calls_seen == 0);
  CHECK(run.find(4)->calls_seen == 1);
}

TEST_CASE("gpu_time: at most five gaps, longest first; a range loses to a scope covering the gap") {
  kscope::gpu_time_input in;
  in.nodes = {{1, 0, 1, true, "request", nullptr}, {2, 0, 1, false, "work", nullptr}};
  in.host = {{"request", 1, 3, 0, 10000}, {"work", 2, 0, 4000, 6000}};
  for (int i = 0; i < 8; ++i) in.gpu.push_back(kernel(2, i * 1000 + 500, i * 1000 + 600 + 10 * i));
  const kscope::gpu_time_report t = kscope::account_gpu_time(in);
  REQUIRE(t.idle_gaps.size() == kscope::gpu_time_top_gaps);
  for (std::size_t i = 1; i < t.idle_gaps.size(); ++i) CHECK(t.idle_gaps[i - 1].ns >= t.idle_gaps[i].ns);
  // The gap after the first kernel is the longest (900 ns) and only the range covers it.
  CHECK(t.idle_gaps[0].ns == 900);
  CHECK(t.idle_gaps[0].open_path == "request");
  bool work_named = false;
  for (const kscope::gpu_idle_gap& g : t.idle_gaps) work_named = work_named || g.open_path == "work";
  CHECK(work_named);  // 4640-5500: covered by "work" and the range; the scope wins
  // Every gap (7) is in idle_by_scope: 3630-4500 and 4640-5500 in "work" (midpoints 4065,
  // 5070); 5650-6500 (midpoint 6075, after "work" ended) and the rest in the range.
  double sum = 0;
  std::uint64_t gaps = 0;
  for (const kscope::gpu_idle_by_scope& g : t.idle_by_scope) {
    sum += g.ns;
    gaps += g.gaps;
  }
  CHECK(gaps == 7);
  CHECK(sum == doctest::Approx(900 + 890 + 880 + 870 + 860 + 850 + 840));
  const auto work = std::find_if(t.idle_by_scope.begin(), t.idle_by_scope.end(),
                                 [](const kscope::gpu_idle_by_scope& g) { return g.path == "work"; });
  REQUIRE(work != t.idle_by_scope.end());
  CHECK(work->gaps == 2);
  CHECK(work->ns == doctest::Approx(870 + 860));
}

TEST_CASE("gpu_time: the busy union is exact in any arrival order, graph replays traced as one record count") {
  // A GPU-bound graph loop: 50 steps of 2 ms, each a graph replay traced as one record
  // [start, start + 2 ms) (no kernel records) except replays 0 and 25, traced node by node as
  // 20 kernels of 100 us; a 10 us copy after each replay. The host ring holds the steps.
  kscope::gpu_time_input in;
  in.nodes = {{1, 0, 1, false, "step", nullptr}, {2, 1, 2, false, "step/decode", nullptr}};
  std::vector<kscope::gpu_activity_event> events;
  double truth = 0;
  for (int i = 0; i < 50; ++i) {
    const std::int64_t t0 = 1'000'000 + 2'100'000LL * i;
    in.host.push_back({"step", 1, 0, t0 - 50'000, t0 + 2'050'000});
    in.host.push_back({"decode", 2, 0, t0 - 40'000, t0 - 20'000});
    if (i % 25 == 0) {
      for (int k = 0; k < 20; ++k) events.push_back(kernel(2, t0 + 100'000 * k, t0 + 100'000 * (k + 1)));
    } else {
      kscope::gpu_activity_event g = kernel(2, t0, t0 + 2'000'000);
      g.kind = kscope::activity_kind::graph;
      events.push_back(g);
    }
    events.push_back(d2h(1, t0 + 2'000'000, t0 + 2'010'000));
    truth += 2'010'000;
  }
  // Arrival order: reversed, then every other one swapped far apart (out of order by more
  // than any buffer): the account must not care.
  std::reverse(events.begin(), events.end());
  for (std::size_t i = 0; i + 60 < events.size(); i += 2) std::swap(events[i], events[i + 60]);
  in.gpu = events;
  const kscope::gpu_time_report t = kscope::account_gpu_time(in);
  CHECK(t.busy_ns == doctest::Approx(truth));
  CHECK(t.wall_ns == doctest::Approx(2'100'000.0 * 49 + 2'050'000 + 50'000));
  CHECK(t.busy_share == doctest::Approx(truth / t.wall_ns));
  CHECK(t.busy_share > 0.95);
  CHECK(t.unknown_reason.empty());
  // Every step's call sees its replay: busy per call is the replay plus the copy.
  const kscope::scope_gpu_time* step = t.find(1);
  REQUIRE(step != nullptr);
  CHECK(step->calls_seen == 50);
  CHECK(step->busy_per_call_ns.median == doctest::Approx(2'010'000));
}

TEST_CASE("gpu_time: an account with holes says busy is unknown and why, and lists no idle gap") {
  two_steps s;
  s.in.incomplete = {"CUPTI dropped 3 activity records", "2 CUDA-graph replays traced node by node wait for a timestamp check"};
  const kscope::gpu_time_report t = kscope::account_gpu_time(s.in);
  CHECK(std::isnan(t.busy_share));
  CHECK(std::isnan(t.busy_ns));
  CHECK(t.idle_gaps.empty());
  CHECK(t.idle_by_scope.empty());
  CHECK(t.unknown_reason == "CUPTI dropped 3 activity records; 2 CUDA-graph replays traced node by node wait for a timestamp check");
  kscope::session_report r;
  r.gpu_time = t;
  const std::string text = r.text();
  CHECK(text.find("GPU busy: unknown (CUPTI dropped 3 activity records") != std::string::npos);
  // The JSON says it and reads back.
  const auto doc = nlohmann::json::parse(r.json());
  CHECK(doc["gpu_time"]["unknown_reason"] == t.unknown_reason);
  CHECK(doc["gpu_time"]["busy_share"].is_null());
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(r.json(), &error);
  REQUIRE_MESSAGE(back.has_value(), error);
  REQUIRE(back->gpu_time.has_value());
  CHECK(back->gpu_time->unknown_reason == t.unknown_reason);
  CHECK(std::isnan(back->gpu_time->busy_share));
  // The diagnosis's rules on the account stay silent, and the text says why.
  const std::string dx = kscope::diagnosis_text(kscope::diagnose(r), r);
  CHECK(dx.find("has holes") != std::string::npos);
}

TEST_CASE("gpu_time: bad input gives a defined, empty result") {
  kscope::gpu_time_input in;
  kscope::gpu_time_report t = kscope::account_gpu_time(in);
  CHECK(t.wall_ns == 0);
  CHECK(std::isnan(t.busy_share));
  CHECK(t.idle_gaps.empty());
  CHECK(t.scopes.empty());

  // Intervals that end before they start, and events with no start, are ignored.
  in.nodes = {{1, 0, 1, false, "a", nullptr}};
  in.host = {{"a", 1, 0, 500, 100}};
  in.gpu = {kernel(1, 0, 50), kernel(1, 300, 200)};
  t = kscope::account_gpu_time(in);
  CHECK(t.host_intervals == 0);
  CHECK(t.gpu_events == 0);
  CHECK(std::isnan(t.busy_share));
  CHECK(t.scopes.empty());  // no call, no activity
}

TEST_CASE("gpu_time in the report: text section, JSON keys and the table's sort") {
  const two_steps f;
  kscope::session_report r;
  kscope::scope_report step, schedule, decode;
  step.id = 1;
  step.name = step.path = "step";
  step.depth = 1;
  step.calls = 2;
  step.host_inclusive_ns = 2000;
  schedule.id = 2;
  schedule.parent = 1;
  schedule.name = "schedule";
  schedule.path = "step/schedule";
  schedule.depth = 2;
  schedule.calls = 2;
  schedule.host_inclusive_ns = 600;  // more host time than decode, no GPU time
  decode.id = 3;
  decode.parent = 1;
  decode.name = "decode";
  decode.path = "step/decode";
  decode.depth = 2;
  decode.calls = 2;
  decode.host_inclusive_ns = 500;
  decode.gpu_activity = f.decode_activity;
  r.scopes = {step, decode, schedule};  // recorded order: decode first
  r.gpu_time = kscope::account_gpu_time(f.in);

  const std::string text = r.text();
  CHECK_MESSAGE(text.find("GPU busy 23.5% of the wall time") != std::string::npos, text);
  CHECK_MESSAGE(text.find("750 ns in step/schedule") != std::string::npos, text);
  CHECK_MESSAGE(text.find("GPU time (CUPTI)") != std::string::npos, text);
  // By host time (the default here: 450 ns of GPU time < 2000 ns of host time), schedule
  // comes before decode; by GPU time, decode first.
  const auto schedule_row = [](const std::string& s) { return s.find("  schedule"); };
  const auto decode_row = [](const std::string& s) { return s.find("  decode"); };
  CHECK(schedule_row(text) < decode_row(text));
  CHECK(text.find("siblings sorted by host time") != std::string::npos);
  r.sort = kscope::report_sort::gpu;
  const std::string by_gpu = r.text();
  CHECK(decode_row(by_gpu) < schedule_row(by_gpu));
  r.sort = kscope::report_sort::recorded;
  const std::string recorded = r.text();
  CHECK(decode_row(recorded) < schedule_row(recorded));
  CHECK(recorded.find("siblings sorted") == std::string::npos);

  const auto doc = nlohmann::json::parse(r.json());
  const auto& g = doc["gpu_time"];
  CHECK(g["busy_share"].get<double>() == doctest::Approx(0.235));
  CHECK(g["wall_ns"].get<double>() == doctest::Approx(2000));
  REQUIRE(g["idle_gaps"].size() == 4);
  CHECK(g["idle_gaps"][0]["open_scope"] == "step/schedule");
  CHECK(g["idle_gaps"][0]["ns"] == 750);
  bool decode_found = false;
  for (const auto& s : g["scopes"]) {
    if (s["path"] != "step/decode") continue;
    decode_found = true;
    CHECK(s["kernel_count"] == 4);
    CHECK(s["busy_per_call_ns"]["median"].get<double>() == doctest::Approx(225));
  }
  CHECK(decode_found);
}

}  // namespace gpu_time_test
