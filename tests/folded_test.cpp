// Tests for kscope/report/folded.hpp: the folded stacks of a known scope tree — self times
// that add up to the roots' totals, children longer than their parent clamped with a note,
// names that hold ';', '/' or a newline kept to one frame of one line, the GPU time
// from CUPTI or from CUDA events, and times from a file that are no durations.
#include <kscope/report/folded.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace folded_test {  // one per file: the unit tests build as one program

namespace {

kscope::scope_report scope(const std::string& path, std::size_t depth, double host_ns) {
  kscope::scope_report s;
  s.path = path;
  s.name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  s.depth = depth;
  s.calls = 1;
  s.host_inclusive_ns = host_ns;
  return s;
}

kscope::scope_report with_kernels(kscope::scope_report s, std::int64_t busy_ns) {
  s.gpu_activity = kscope::node_gpu_activity{};
  s.gpu_activity->busy_ns = busy_ns;
  return s;
}

kscope::scope_report with_events(kscope::scope_report s, double gpu_total_ns) {
  s.gpu_calls = 1;
  s.gpu_total_ns = gpu_total_ns;
  return s;
}

// request 1000 { decode 600 { attention 250 }, "a;b\nc" 100 }, "x/y" 40, async 100 { late 150 }
kscope::session_report known_tree() {
  kscope::session_report r;
  r.scopes = {
      scope("request", 1, 1000),
      scope("request/decode", 2, 600),
      scope("request/decode/attention", 3, 250),
      scope("request/a;b\nc", 2, 100),
      scope("x\\/y", 1, 40),  // a top-level scope named "x/y" (the path escapes its '/')
      scope("async", 1, 100),
      scope("async/late", 2, 150),  // a range that ended on another thread: longer than its parent
  };
  r.scopes[4].name = "x/y";
  return r;
}

}  // namespace

TEST_CASE("folded: host self times of a known tree, in integer nanoseconds") {
  const kscope::folded_stacks f = kscope::fold_stacks(known_tree(), kscope::folded_time::host);
  CHECK(f.time == "host time, ns");
  CHECK(f.text ==
        "request 300\n"                    // 1000 - 600 - 100
        "request;decode 350\n"             // 600 - 250
        "request;decode;attention 250\n"
        "request;a\\x3bb\\x0ac 100\n"      // ';' and the newline cannot add a frame or a line
        "x/y 40\n"                         // the escaped '/' is part of the name
        "async;late 150\n");               // async: 100 - 150 < 0, clamped to 0 and left out
  CHECK(f.stacks == 6);
  // The lines add up to the roots' totals, plus what the clamped child ran past its parent.
  CHECK(f.total_ns == 1000 + 40 + 150);
  REQUIRE(f.notes.size() == 1);
  CHECK(f.notes[0] == "'async': its children's host time exceeds its own by 50 ns (work on other threads or "
                      "streams): its self time is 0");
}

TEST_CASE("folded: GPU time from CUPTI is each scope's own kernels") {
  kscope::session_report r = known_tree();
  r.scopes[1] = with_kernels(r.scopes[1], 70);   // decode launched kernels itself
  r.scopes[2] = with_kernels(r.scopes[2], 500);  // attention: more GPU than host time, no matter
  r.scopes[5] = with_kernels(r.scopes[5], 30);
  const kscope::folded_stacks f = kscope::fold_stacks(r, kscope::folded_time::gpu);
  CHECK(f.time == "GPU busy time of each scope's own kernels (CUPTI), ns");
  CHECK(f.text ==
        "request;decode 70\n"
        "request;decode;attention 500\n"
        "async 30\n");
  CHECK(f.total_ns == 600);
  CHECK(f.notes.empty());  // a scope's own kernels never exceed themselves
}

TEST_CASE("folded: GPU time from CUDA events, a host-only parent passes its children's through") {
  kscope::session_report r = known_tree();
  r.scopes[1] = with_events(r.scopes[1], 800);  // decode's events span attention's too
  r.scopes[2] = with_events(r.scopes[2], 300);
  r.scopes[5] = with_events(r.scopes[5], 50);
  r.scopes[6] = with_events(r.scopes[6], 80);  // another stream, past the parent's events
  const kscope::folded_stacks f = kscope::fold_stacks(r, kscope::folded_time::gpu);
  CHECK(f.time == "GPU time between each scope's CUDA events, ns");
  CHECK(f.text ==
        "request;decode 500\n"
        "request;decode;attention 300\n"
        "async;late 80\n");
  // request had no stream: its total is decode's, its self 0, and no note for it.
  REQUIRE(f.notes.size() == 1);
  CHECK(f.notes[0].find("'async': its children's GPU time exceeds its own by 30 ns") == 0);
}

TEST_CASE("folded: no GPU time says why; an empty report gives no lines") {
  const kscope::folded_stacks f = kscope::fold_stacks(known_tree(), kscope::folded_time::gpu);
  CHECK(f.text.empty());
  CHECK(f.time.empty());
  REQUIRE(f.notes.size() == 1);
  CHECK(f.notes[0] == "no GPU time in this report: no CUPTI activity and no scope timed with CUDA events");
  const kscope::folded_stacks empty = kscope::fold_stacks(kscope::session_report{}, kscope::folded_time::host);
  CHECK(empty.text.empty());
  CHECK(empty.total_ns == 0);
  CHECK(empty.notes.empty());
}

TEST_CASE("folded: many clamped scopes give ten notes and a count") {
  kscope::session_report r;
  for (int i = 0; i < 12; ++i) {
    const std::string root = "r" + std::to_string(i);
    r.scopes.push_back(scope(root, 1, 10));
    r.scopes.push_back(scope(root + "/c", 2, 2'000'010));
  }
  const kscope::folded_stacks f = kscope::fold_stacks(r, kscope::folded_time::host);
  REQUIRE(f.notes.size() == 11);
  CHECK(f.notes[0] == "'r0': its children's host time exceeds its own by 2000000 ns (work on other threads or "
                      "streams): its self time is 0");
  CHECK(f.notes[10] == "... and 2 more scopes whose children exceed them");
  CHECK(f.stacks == 12);
}

TEST_CASE("folded: scope paths split at unescaped slashes only") {
  using strings = std::vector<std::string>;
  CHECK(kscope::detail::split_scope_path("a/b/c") == strings{"a", "b", "c"});
  CHECK(kscope::detail::split_scope_path("a\\/b/c") == strings{"a/b", "c"});
  CHECK(kscope::detail::split_scope_path("a\\\\/b") == strings{"a\\", "b"});
  CHECK(kscope::detail::parent_scope_path("a\\/b") == "");
  CHECK(kscope::detail::parent_scope_path("a/b\\/c") == "a");
  CHECK(kscope::detail::parent_scope_path("a\\\\/b") == "a\\\\");
  CHECK(kscope::detail::folded_frame("") == "(no name)");
  CHECK(kscope::detail::folded_frame("x;y\tz") == "x\\x3by\\x09z");
}

// A report read from a file may hold any time. Before the bounds, llround of 1e300 gave an
// unspecified value (the scope silently vanished, or a note said "by -9223372036854775808
// ns") and three roots of 4e18 ns overflowed the int64 total (undefined behaviour).
TEST_CASE("folded: times that are no durations count as 0 with a note; the total never overflows") {
  kscope::session_report r;
  r.scopes = {scope("huge", 1, 1e300), scope("nan", 1, std::numeric_limits<double>::quiet_NaN()),
              scope("negative", 1, -5), scope("edge", 1, 4611686018427387904.0),  // 2^62: past the bound
              scope("ok", 1, 7)};
  const kscope::folded_stacks f = kscope::fold_stacks(r, kscope::folded_time::host);
  CHECK(f.text == "ok 7\n");
  CHECK(f.total_ns == 7);
  REQUIRE(f.notes.size() == 4);
  CHECK(f.notes[0] == "'huge': its host time, 1e+300 ns, is no duration (negative, not finite or above 2^62 ns): "
                      "counted as 0");
  CHECK(f.notes[1] == "'nan': its host time, nan ns, is no duration (negative, not finite or above 2^62 ns): "
                      "counted as 0");
  CHECK(f.notes[2].find("'negative': its host time, -5 ns, is no duration") == 0);
  CHECK(f.notes[3].find("'edge': its host time, 4.61169e+18 ns, is no duration") == 0);

  // Three roots just under the bound: the sum passes int64, the total stops at its largest.
  kscope::session_report big;
  for (const char* name : {"a", "b", "c"}) big.scopes.push_back(scope(name, 1, 4e18));
  const kscope::folded_stacks g = kscope::fold_stacks(big, kscope::folded_time::host);
  CHECK(g.text == "a 4000000000000000000\nb 4000000000000000000\nc 4000000000000000000\n");
  CHECK(g.stacks == 3);
  CHECK(g.total_ns == std::numeric_limits<std::int64_t>::max());
  REQUIRE(g.notes.size() == 1);
  CHECK(g.notes[0] == "the values add up past 2^63 ns (292 years): their total is given as 9223372036854775807");

  // Children that exceed their parent by more than int64 holds: the note gives the excess.
  kscope::session_report deep;
  deep.scopes = {scope("p", 1, 10)};
  for (const char* name : {"p/a", "p/b", "p/c"}) deep.scopes.push_back(scope(name, 2, 4e18));
  const kscope::folded_stacks h = kscope::fold_stacks(deep, kscope::folded_time::host);
  REQUIRE(h.notes.size() == 2);
  CHECK(h.notes[0] == "'p': its children's host time exceeds its own by 12000000000000000000 ns (work on other "
                      "threads or streams): its self time is 0");

  // CUPTI's busy time from a file is an int64: its largest is no duration either.
  kscope::session_report gpu;
  gpu.scopes = {with_kernels(scope("k", 1, 1), std::numeric_limits<std::int64_t>::max()),
                with_kernels(scope("j", 1, 1), 5)};
  const kscope::folded_stacks k = kscope::fold_stacks(gpu, kscope::folded_time::gpu);
  CHECK(k.text == "j 5\n");
  REQUIRE(k.notes.size() == 1);
  CHECK(k.notes[0].find("'k': its GPU time, 9.22337e+18 ns, is no duration") == 0);
}

TEST_CASE("folded: more than ten bad times give ten notes and a count") {
  kscope::session_report r;
  for (int i = 0; i < 13; ++i) r.scopes.push_back(scope("s" + std::to_string(i), 1, -1));
  const kscope::folded_stacks f = kscope::fold_stacks(r, kscope::folded_time::host);
  REQUIRE(f.notes.size() == 11);
  CHECK(f.notes[10] == "... and 3 more scopes whose time is no duration");
  CHECK(f.text.empty());
}

}  // namespace folded_test
