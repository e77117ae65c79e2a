// roofline.hpp: place() on hand-computed cases on both sides of the ridge, at the ridge,
// the edge cases (zero bytes, zero flops, bad time, bad work, bad peaks), the thresholds
// and hints, rate intervals, and the small helpers. Every expected value below is
// computed by hand in the comment beside it.
#include <kscope/core/roofline.hpp>
#include <kscope/core/stats.hpp>  // kscope::interval, the intended input of rate_interval

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace roofline_test {  // one per file: the unit tests build as one program

namespace {

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_value = std::numeric_limits<double>::infinity();

// A machine with round peaks: 100 TFLOP/s and 1 TB/s, ridge at 100 flop/byte.
constexpr double peak_flops = 100e12;
constexpr double peak_bytes = 1e12;

// Any type with lo, hi and level, like kscope::interval of stats.hpp.
struct time_interval {
  double lo, hi;
  double level;
};

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace

TEST_CASE("ridge, intensity and roof helpers") {
  CHECK(kscope::ridge_intensity(peak_flops, peak_bytes) == doctest::Approx(100.0));
  CHECK(kscope::ridge_intensity(989e12, 4.8e12) == doctest::Approx(206.0416667));  // 989/4.8
  CHECK(std::isnan(kscope::ridge_intensity(0, 1e12)));
  CHECK(std::isnan(kscope::ridge_intensity(1e12, -1)));
  CHECK(std::isnan(kscope::ridge_intensity(nan_value, 1e12)));
  CHECK(std::isnan(kscope::ridge_intensity(inf_value, 1e12)));

  CHECK(kscope::intensity({6e11, 1e9}) == doctest::Approx(600.0));
  CHECK(std::isinf(kscope::intensity({1e9, 0})));
  CHECK(kscope::intensity({0, 1e9}) == 0.0);
  CHECK(std::isnan(kscope::intensity({0, 0})));
  CHECK(std::isnan(kscope::intensity({-1, 1})));
  CHECK(std::isnan(kscope::intensity({nan_value, 1})));

  CHECK(kscope::roof_flops_per_s(10, peak_flops, peak_bytes) == doctest::Approx(10e12));     // 10 x 1 TB/s
  CHECK(kscope::roof_flops_per_s(1000, peak_flops, peak_bytes) == doctest::Approx(100e12));  // flat roof
  CHECK(kscope::roof_flops_per_s(inf_value, peak_flops, peak_bytes) == doctest::Approx(100e12));
  CHECK(kscope::roof_flops_per_s(0, peak_flops, peak_bytes) == 0.0);
  CHECK(std::isnan(kscope::roof_flops_per_s(-1, peak_flops, peak_bytes)));
  CHECK(std::isnan(kscope::roof_flops_per_s(10, nan_value, peak_bytes)));
}

TEST_CASE("memory side near the bandwidth roof: memory-bound") {
  // 1 GFLOP over 8 GB in 10 ms: 0.1 TFLOP/s, 0.8 TB/s, intensity 0.125 < 100.
  // Roof at 0.125 flop/B = 0.125 TFLOP/s; fraction 0.1 / 0.125 = 0.8 = 0.8 TB/s / 1 TB/s.
  const kscope::placement p = kscope::place({1e9, 8e9}, 10e-3, peak_flops, peak_bytes);
  CHECK(p.flops_per_s == doctest::Approx(1e11));
  CHECK(p.bytes_per_s == doctest::Approx(8e11));
  CHECK(p.intensity == doctest::Approx(0.125));
  CHECK(p.roof_flops_per_s == doctest::Approx(1.25e11));
  CHECK(p.fraction_of_roof == doctest::Approx(0.8));
  CHECK(p.limiter == kscope::bound::memory);
  CHECK(contains(kscope::hint(p), "memory-bound"));
  CHECK(contains(kscope::hint(p), "fewer bytes"));
}

TEST_CASE("memory side far from the bandwidth roof: latency-bound, configurable") {
  // 8 GB in 25 ms = 0.32 TB/s: 32 % of peak bandwidth, below near_bandwidth_roof 0.5.
  const kscope::work w{1e9, 8e9};
  const kscope::placement p = kscope::place(w, 25e-3, peak_flops, peak_bytes);
  CHECK(p.fraction_of_roof == doctest::Approx(0.32));
  CHECK(p.limiter == kscope::bound::latency);
  CHECK(contains(kscope::hint(p), "latency-bound"));

  kscope::roofline_options lenient;
  lenient.near_bandwidth_roof = 0.3;
  CHECK(kscope::place(w, 25e-3, peak_flops, peak_bytes, lenient).limiter == kscope::bound::memory);

  // Exactly at the threshold counts as near: 8 GB in 16 ms = 0.5 TB/s.
  CHECK(kscope::place(w, 16e-3, peak_flops, peak_bytes).limiter == kscope::bound::memory);
}

TEST_CASE("compute side: at the roof, compute path unused, and latency") {
  // 600 GFLOP over 1 GB: intensity 600 > 100, the flat 100 TFLOP/s roof applies.
  const kscope::work w{6e11, 1e9};

  // 10 ms: 60 TFLOP/s = 0.6 of the roof; 0.1 TB/s.
  const kscope::placement at_roof = kscope::place(w, 10e-3, peak_flops, peak_bytes);
  CHECK(at_roof.flops_per_s == doctest::Approx(60e12));
  CHECK(at_roof.bytes_per_s == doctest::Approx(1e11));
  CHECK(at_roof.intensity == doctest::Approx(600.0));
  CHECK(at_roof.roof_flops_per_s == doctest::Approx(100e12));
  CHECK(at_roof.fraction_of_roof == doctest::Approx(0.6));
  CHECK(at_roof.limiter == kscope::bound::compute);
  CHECK(contains(kscope::hint(at_roof), "at the compute roof"));

  // 30 ms: 20 TFLOP/s = 0.2 of the roof: compute, but the compute path is unused.
  const kscope::placement unused = kscope::place(w, 30e-3, peak_flops, peak_bytes);
  CHECK(unused.fraction_of_roof == doctest::Approx(0.2));
  CHECK(unused.limiter == kscope::bound::compute);
  CHECK(contains(kscope::hint(unused), "compute path not used"));
  CHECK(contains(kscope::hint(unused), "tensor cores"));

  // 120 ms: 5 TFLOP/s = 0.05 of the roof, and 1/120 TB/s << 10 % of bandwidth: latency.
  const kscope::placement slow = kscope::place(w, 120e-3, peak_flops, peak_bytes);
  CHECK(slow.fraction_of_roof == doctest::Approx(0.05));
  CHECK(slow.bytes_per_s / peak_bytes < 0.1);
  CHECK(slow.limiter == kscope::bound::latency);
  CHECK(contains(kscope::hint(slow), "synchronizations"));

  kscope::roofline_options options;
  options.far_under_roof = 0.01;
  CHECK(kscope::place(w, 120e-3, peak_flops, peak_bytes, options).limiter == kscope::bound::compute);
  options.near_compute_roof = 0.7;
  CHECK(contains(kscope::hint(at_roof, options), "compute path not used"));  // 0.6 < 0.7
}

TEST_CASE("exactly at the ridge: compute side, both fractions equal") {
  // Peaks 1000 flop/s and 100 B/s: ridge 10. Work 1000 flops over 100 bytes: intensity 10.
  const kscope::placement p = kscope::place({1000, 100}, 2.0, 1000, 100);
  CHECK(p.intensity == doctest::Approx(10.0));
  CHECK(p.roof_flops_per_s == doctest::Approx(1000.0));
  CHECK(p.flops_per_s == doctest::Approx(500.0));
  CHECK(p.fraction_of_roof == doctest::Approx(0.5));  // 500/1000 flop/s = 50/100 B/s
  CHECK(p.limiter == kscope::bound::compute);
}

TEST_CASE("zero bytes: infinite intensity, compute roof") {
  // 1 TFLOP in 20 ms = 50 TFLOP/s, half the 100 TFLOP/s roof.
  const kscope::placement p = kscope::place({1e12, 0}, 20e-3, peak_flops, peak_bytes);
  CHECK(std::isinf(p.intensity));
  CHECK(p.bytes_per_s == 0.0);
  CHECK(p.roof_flops_per_s == doctest::Approx(peak_flops));
  CHECK(p.fraction_of_roof == doctest::Approx(0.5));
  CHECK(p.limiter == kscope::bound::compute);
}

TEST_CASE("zero flops: intensity 0, bandwidth roof, fraction from bytes") {
  // A copy: 8 GB in 10 ms = 0.8 TB/s.
  const kscope::placement p = kscope::place({0, 8e9}, 10e-3, peak_flops, peak_bytes);
  CHECK(p.intensity == 0.0);
  CHECK(p.flops_per_s == 0.0);
  CHECK(p.roof_flops_per_s == 0.0);
  CHECK(p.fraction_of_roof == doctest::Approx(0.8));
  CHECK(p.limiter == kscope::bound::memory);
}

TEST_CASE("bad time, work, peaks or options: std::invalid_argument, try_place nullopt") {
  const kscope::work w{1e9, 1e9};
  for (double seconds : {0.0, -1e-3, nan_value, inf_value, -inf_value}) {
    CAPTURE(seconds);
    CHECK_THROWS_AS((void)kscope::place(w, seconds, peak_flops, peak_bytes), std::invalid_argument);
    CHECK_FALSE(kscope::try_place(w, seconds, peak_flops, peak_bytes).has_value());
  }
  try {
    (void)kscope::place(w, 0.0, peak_flops, peak_bytes);
  } catch (const std::invalid_argument& e) {
    CHECK(contains(e.what(), "time must be a positive finite number of seconds"));
  }
  CHECK_THROWS_AS((void)kscope::place({0, 0}, 1.0, peak_flops, peak_bytes), std::invalid_argument);
  CHECK_THROWS_AS((void)kscope::place({-1, 1}, 1.0, peak_flops, peak_bytes), std::invalid_argument);
  CHECK_THROWS_AS((void)kscope::place({1, nan_value}, 1.0, peak_flops, peak_bytes), std::invalid_argument);
  CHECK_THROWS_AS((void)kscope::place(w, 1.0, nan_value, peak_bytes), std::invalid_argument);  // unknown peak
  CHECK_THROWS_AS((void)kscope::place(w, 1.0, peak_flops, 0), std::invalid_argument);
  kscope::roofline_options bad;
  bad.near_bandwidth_roof = nan_value;
  CHECK_THROWS_AS((void)kscope::place(w, 1.0, peak_flops, peak_bytes, bad), std::invalid_argument);
  bad.near_bandwidth_roof = 1.5;
  CHECK_FALSE(kscope::try_place(w, 1.0, peak_flops, peak_bytes, bad).has_value());

  const auto ok = kscope::try_place(w, 1e-3, peak_flops, peak_bytes);
  REQUIRE(ok.has_value());
  CHECK(ok->bytes_per_s == doctest::Approx(1e12));
  CHECK(ok->limiter == kscope::bound::memory);  // intensity 1, 100 % of bandwidth
}

TEST_CASE("rate_interval turns a time interval into a rate interval") {
  // 1e12 flops, median CI [1.9, 2.5] ms -> [1e12/2.5e-3, 1e12/1.9e-3] = [400, 526.3] TFLOP/s.
  const time_interval seconds{1.9e-3, 2.5e-3, 0.95};
  const time_interval rate = kscope::rate_interval(1e12, seconds);
  CHECK(rate.lo == doctest::Approx(4e14));
  CHECK(rate.hi == doctest::Approx(5.263157895e14));
  CHECK(rate.level == 0.95);
  CHECK(rate.lo <= rate.hi);

  // No interval (fewer than 6 samples: NaN bounds), zero or reversed bounds -> NaN.
  CHECK(std::isnan(kscope::rate_interval(1e12, time_interval{nan_value, nan_value, 0.95}).lo));
  CHECK(std::isnan(kscope::rate_interval(1e12, time_interval{0.0, 1.0, 0.95}).hi));
  CHECK(std::isnan(kscope::rate_interval(1e12, time_interval{2.0, 1.0, 0.95}).lo));

  // With the stats module's interval type, as the session and bench reports use it.
  kscope::interval ci;
  ci.lo = 1.9e-3;
  ci.hi = 2.5e-3;
  ci.level = 0.99;
  const kscope::interval bytes_ci = kscope::rate_interval(8e9, ci);
  CHECK(bytes_ci.lo == doctest::Approx(3.2e12));  // 8e9 / 2.5e-3
  CHECK(bytes_ci.hi == doctest::Approx(4.210526316e12));  // 8e9 / 1.9e-3
  CHECK(bytes_ci.level == 0.99);
}

TEST_CASE("names, points and number formatting") {
  CHECK(std::string(kscope::to_string(kscope::bound::memory)) == "memory");
  CHECK(std::string(kscope::to_string(kscope::bound::compute)) == "compute");
  CHECK(std::string(kscope::to_string(kscope::bound::latency)) == "latency");

  const kscope::placement p = kscope::place({6e11, 1e9}, 10e-3, peak_flops, peak_bytes);
  const kscope::roof_point point = kscope::to_roof_point("gemm <bf16>", p);
  CHECK(point.label == "gemm <bf16>");
  CHECK(point.intensity == doctest::Approx(600.0));
  CHECK(point.flops_per_s == doctest::Approx(60e12));
  CHECK(point.limiter == kscope::bound::compute);

  CHECK(kscope::detail::format_si(4.8143e12, "B/s") == "4.81 TB/s");
  CHECK(kscope::detail::format_si(989.4e12, "FLOP/s") == "989 TFLOP/s");
  CHECK(kscope::detail::format_si(1070.5e12, "FLOP/s") == "1.07 PFLOP/s");
  CHECK(kscope::detail::format_si(66.9e12, "FLOP/s") == "66.9 TFLOP/s");
  CHECK(kscope::detail::format_si(2.5e-6, "s") == "2.50 us");
  CHECK(kscope::detail::format_si(0.0, "s") == "0.00 s");
  CHECK(kscope::detail::format_si(nan_value, "B/s") == "unknown");
}

}  // namespace roofline_test
