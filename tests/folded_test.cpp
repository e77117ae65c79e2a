// Tests for kscope/report/folded.hpp: the folded stacks of a known scope tree — self times
// that add up to the roots' totals, children longer than their parent clamped with a note,
// names that hold ';', '/' or a newline kept to one frame of one line, and the GPU time
// from CUPTI or from CUDA events.
#include <kscope/report/folded.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

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
