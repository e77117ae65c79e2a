// The tick clock scopes read, and its conversion to steady_clock nanoseconds.
#include <kscope/core/detail/clock.hpp>
#include <kscope/core/detail/utc_time.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <thread>

namespace clock_test {  // one per file: the unit tests build as one program

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

TEST_CASE("UTC timestamps are computed as gmtime would print them") {
  CHECK(kscope::detail::utc_timestamp_text(0) == "1970-01-01T00:00:00Z");
  CHECK(kscope::detail::utc_timestamp_text(951782400) == "2000-02-29T00:00:00Z");  // a leap day of a 400-year
  CHECK(kscope::detail::utc_timestamp_text(4107542399) == "2100-02-28T23:59:59Z");  // 2100 is not a leap year
  CHECK(kscope::detail::utc_timestamp_text(-1) == "1969-12-31T23:59:59Z");
#if defined(__unix__) || defined(__APPLE__)
  // Against the C library (single-threaded here, so its lock is harmless) over 1970-2200.
  std::mt19937_64 random(42);
  for (int i = 0; i < 20000; ++i) {
    const std::time_t t = static_cast<std::time_t>(random() % 7258118400ULL);
    std::tm utc{};
    REQUIRE(gmtime_r(&t, &utc) != nullptr);
    char expected[32];
    std::strftime(expected, sizeof expected, "%Y-%m-%dT%H:%M:%SZ", &utc);
    REQUIRE(kscope::detail::utc_timestamp_text(t) == expected);
  }
#endif
}

}  // namespace clock_test
