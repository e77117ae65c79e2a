// The tick clock scopes read, and its conversion to steady_clock nanoseconds.
#include <kscope/core/detail/clock.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

TEST_CASE("a clock pair is read tightly") {
  const auto pair = kscope::detail::read_clock_pair();
  CHECK(pair.ns > 0);
  CHECK(std::llabs(kscope::detail::now_ns() - pair.ns) < 1000000000LL);
}

TEST_CASE("ticks converted with the calibrated map agree with steady_clock") {
  // Tight pairs: a thread preempted between two separate reads would skew the check itself.
  const auto p0 = kscope::detail::read_clock_pair();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const auto p1 = kscope::detail::read_clock_pair();
  const std::int64_t t0 = p0.ticks, n0 = p0.ns, t1 = p1.ticks, n1 = p1.ns;
  const kscope::detail::tick_map map = kscope::detail::calibrate_ticks();
  const std::string source = kscope::detail::ticks_are_tsc() ? "the invariant TSC" : "steady_clock ns";
  MESSAGE("ticks are " << source << ", " << map.ns_per_tick << " ns per tick");
  const double elapsed_ns = map.duration_ns(static_cast<double>(t1 - t0));
  CHECK(elapsed_ns == doctest::Approx(static_cast<double>(n1 - n0)).epsilon(0.002));
  // Absolute times land on the steady_clock time base within a few microseconds.
  CHECK(std::fabs(static_cast<double>(map.to_ns(t1) - n1)) < 50000.0);
  CHECK(t1 >= t0);
}

TEST_CASE("without a TSC the map is the identity") {
  if (kscope::detail::ticks_are_tsc()) {
    MESSAGE("invariant TSC present: identity case not reachable here");
    return;
  }
  const auto map = kscope::detail::calibrate_ticks();
  CHECK(map.ns_per_tick == 1.0);
  CHECK(map.to_ns(12345) == 12345 + map.origin_ns - map.origin_ticks);
}
