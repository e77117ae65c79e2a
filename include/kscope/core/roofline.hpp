// kscope/core/roofline.hpp — where a measured kernel or scope sits under the roofline.
//
// Pure arithmetic, no CUDA: given the work a piece of code does (flops, bytes moved to
// and from DRAM), the time it took and the two peaks of the machine (flop/s and byte/s),
// place() says how fast it went, how close to its roof that is, and what limits it.
//
//   auto p = kscope::place({2.0 * n * n * n, 3.0 * n * n * 2}, median_s,
//                          989e12 /* bf16 flop/s */, 4.8e12 /* byte/s */);
//   std::printf("%.0f%% of roof, %s: %s\n", 100 * p.fraction_of_roof,
//               kscope::to_string(p.limiter), kscope::hint(p).data());
//
// The model (Williams, Waterman, Patterson, "Roofline", CACM 2009): a kernel with
// arithmetic intensity I = flops / bytes can reach at most
//     roof(I) = min(peak_flops_per_s, I * peak_bytes_per_s).
// The ridge point I* = peak_flops_per_s / peak_bytes_per_s separates the memory side
// (I < I*: the slanted bandwidth roof applies) from the compute side (I >= I*: the flat
// compute roof applies). A kernel exactly at the ridge is placed on the compute side.
//
// Classification (docs/decisions.md, "Roofline classification"), with the default
// thresholds of roofline_options; f = fraction_of_roof = achieved / roof(I):
//
//   I <  I*  and f >= 0.5 (near_bandwidth_roof)   -> bound::memory
//   I <  I*  and f <  0.5                          -> bound::latency
//   I >= I*  and f >= 0.1 (far_under_roof)         -> bound::compute
//   I >= I*  and f <  0.1                          -> bound::latency
//
// Why the two sides differ: below the ridge the bandwidth roof is the only roof a
// kernel can hit. A kernel there that moves bytes at under half of peak bandwidth does
// not saturate memory; it lacks bytes in flight (too few threads or blocks, no vector
// loads, serial dependences) or it waits on the CPU — a latency problem, whose fix is
// more parallelism, not fewer bytes. Above the ridge the classification names a separate
// diagnosis, "high intensity but far under the compute roof: compute path not used",
// so such a kernel stays bound::compute and hint() says "compute path not used" while
// f < 0.5 (near_compute_roof); only when it is far under the compute roof too (f < 0.1)
// is it latency-bound. Above the ridge f is also the larger of the two fractions
// (bytes_per_s / peak_bytes_per_s = f * I* / I <= f), so "f < 0.1" there means "under
// 10 % of both roofs", exactly the classification's "both far under".
//
// fraction_of_roof is measured against the roof that applies at the kernel's own
// intensity: on the memory side that equals bytes_per_s / peak_bytes_per_s (computed
// that way, so a kernel with zero flops has a defined fraction), on the compute side
// flops_per_s / peak_flops_per_s.
//
// Edge cases, all documented and tested:
//   - zero bytes  -> intensity +infinity; the compute roof applies.
//   - zero flops  -> intensity 0; roof_flops_per_s 0; fraction from bandwidth.
//   - zero flops and zero bytes, negative or non-finite work, a time that is zero,
//     negative, NaN or infinite, or a peak that is not a positive finite number (e.g.
//     NaN for an unknown architecture) -> place() throws std::invalid_argument with a
//     message naming the bad argument; try_place() returns std::nullopt instead, for
//     code (reports, destructors) that must not throw.
#pragma once

#include "detail/number_format.hpp"  // format_si writes '.' whatever the C locale
#include "work.hpp"                   // kscope::work: what place() takes

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace kscope {

// What limits a placed kernel. latency: far under the roofs (launch gaps, syncs, too
// little parallelism); see the table at the top of this header.
//   if (p.limiter == kscope::bound::memory) { /* fuse, compress, reuse */ }
enum class bound { memory, compute, latency };

// The result of place(): achieved rates, the roof at this intensity, and the verdict.
//   kscope::placement p = kscope::place(w, seconds, peak_flops, peak_bytes);
struct placement {
  double flops_per_s, bytes_per_s, intensity;      // achieved
  double roof_flops_per_s;                         // min(peak, intensity * bandwidth)
  double fraction_of_roof;                         // achieved / roof
  bound limiter;
};

// Thresholds of the classification, as fractions of the roof at the kernel's intensity.
// The defaults are the ones documented at the top of this header.
//   kscope::roofline_options strict;
//   strict.near_bandwidth_roof = 0.7;  // call memory-bound only above 70 % of peak B/s
//   auto p = kscope::place(w, s, pf, pb, strict);
struct roofline_options {
  // Below the ridge: reaching this fraction of peak bandwidth makes a kernel
  // memory-bound; below it the kernel is latency-bound (too few bytes in flight).
  double near_bandwidth_roof = 0.5;
  // Above the ridge: under this fraction of the compute roof a kernel is latency-bound
  // (it is then under it on both roofs).
  double far_under_roof = 0.1;
  // Above the ridge: under this fraction a compute-bound kernel gets the "compute path
  // not used" hint instead of "at the compute roof".
  double near_compute_roof = 0.5;
};

// Lower-case name of a limiter: "memory", "compute", "latency".
//   std::printf("%s\n", kscope::to_string(p.limiter));
[[nodiscard]] KSCOPE_DECL const char* to_string(bound b) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* to_string(bound b) noexcept {
  switch (b) {
    case bound::memory: return "memory";
    case bound::compute: return "compute";
    case bound::latency: return "latency";
  }
  return "unknown";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Arithmetic intensity in flop/byte: +infinity for zero bytes (pure compute), 0 for zero
// flops, NaN when both are zero or either is negative or not finite.
//   double i = kscope::intensity({2e12, 3e8});  // 6666.7 flop/byte
[[nodiscard]] KSCOPE_DECL double intensity(work w) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double intensity(work w) noexcept {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (!std::isfinite(w.flops) || !std::isfinite(w.bytes) || w.flops < 0 || w.bytes < 0) return nan;
  if (w.bytes == 0) return w.flops > 0 ? std::numeric_limits<double>::infinity() : nan;
  return w.flops / w.bytes;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The ridge point: the intensity (flop/byte) where the bandwidth roof meets the compute
// roof. NaN unless both peaks are positive and finite.
//   double ridge = kscope::ridge_intensity(989e12, 4.8e12);  // 206 flop/byte
[[nodiscard]] KSCOPE_DECL double ridge_intensity(double peak_flops_per_s, double peak_bytes_per_s) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double ridge_intensity(double peak_flops_per_s, double peak_bytes_per_s) noexcept {
  if (!(peak_flops_per_s > 0) || !(peak_bytes_per_s > 0) || !std::isfinite(peak_flops_per_s) ||
      !std::isfinite(peak_bytes_per_s)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return peak_flops_per_s / peak_bytes_per_s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The roof in flop/s at an intensity: min(peak_flops, intensity * peak_bytes); the
// compute peak for +infinite intensity, 0 for intensity 0, NaN for bad input.
//   double roof = kscope::roof_flops_per_s(10.0, 989e12, 4.8e12);  // 48e12
[[nodiscard]] KSCOPE_DECL double roof_flops_per_s(double flop_per_byte, double peak_flops_per_s,
                                             double peak_bytes_per_s) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double roof_flops_per_s(double flop_per_byte, double peak_flops_per_s,
                                             double peak_bytes_per_s) noexcept {
  if (std::isnan(ridge_intensity(peak_flops_per_s, peak_bytes_per_s)) || std::isnan(flop_per_byte) ||
      flop_per_byte < 0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (std::isinf(flop_per_byte)) return peak_flops_per_s;
  const double slanted = flop_per_byte * peak_bytes_per_s;
  return slanted < peak_flops_per_s ? slanted : peak_flops_per_s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// Returns an empty string when the arguments can be placed, else what is wrong.
KSCOPE_DECL std::string roofline_argument_error(work w, double seconds, double peak_flops_per_s,
                                           double peak_bytes_per_s, const roofline_options& o);

// place() once the arguments are known to be valid.
KSCOPE_DECL placement place_valid(work w, double seconds, double peak_flops_per_s, double peak_bytes_per_s,
                             const roofline_options& o) noexcept;

// "4.81 TB/s", "989 TFLOP/s", "12.5 us"-style text: SI prefix (k..E, or m/u/n below 1)
// and 3 significant digits; "unknown" for NaN (an unknown peak), "inf" for infinity.
KSCOPE_DECL std::string format_si(double value, const char* unit);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string roofline_argument_error(work w, double seconds, double peak_flops_per_s,
                                           double peak_bytes_per_s, const roofline_options& o) {
  if (std::isnan(seconds) || !(seconds > 0) || std::isinf(seconds)) {
    return "kscope::place: time must be a positive finite number of seconds, got " + format_general(seconds, 6);
  }
  if (!std::isfinite(w.flops) || !std::isfinite(w.bytes) || w.flops < 0 || w.bytes < 0) {
    return "kscope::place: work must be finite and non-negative, got flops=" + format_general(w.flops, 6) +
           " bytes=" + format_general(w.bytes, 6);
  }
  if (w.flops == 0 && w.bytes == 0) return "kscope::place: work has neither flops nor bytes: nothing to place";
  if (std::isnan(ridge_intensity(peak_flops_per_s, peak_bytes_per_s))) {
    return "kscope::place: peaks must be positive finite numbers (NaN means unknown), got " +
           format_general(peak_flops_per_s, 6) + " flop/s and " + format_general(peak_bytes_per_s, 6) + " B/s";
  }
  const auto fraction_ok = [](double f) { return f >= 0 && f <= 1; };  // false for NaN
  if (!fraction_ok(o.near_bandwidth_roof) || !fraction_ok(o.far_under_roof) || !fraction_ok(o.near_compute_roof)) {
    return "kscope::place: roofline_options thresholds must lie in [0, 1]";
  }
  return {};
}

KSCOPE_DECL placement place_valid(work w, double seconds, double peak_flops_per_s, double peak_bytes_per_s,
                             const roofline_options& o) noexcept {
  placement p{};
  p.flops_per_s = w.flops / seconds;
  p.bytes_per_s = w.bytes / seconds;
  p.intensity = intensity(w);
  p.roof_flops_per_s = roof_flops_per_s(p.intensity, peak_flops_per_s, peak_bytes_per_s);
  const bool memory_side = p.intensity < ridge_intensity(peak_flops_per_s, peak_bytes_per_s);
  // On the memory side achieved/roof = (I * B/s) / (I * peak B/s): computed from bytes
  // so that zero-flop work (I = 0, roof = 0) still gets a defined fraction.
  p.fraction_of_roof = memory_side ? p.bytes_per_s / peak_bytes_per_s : p.flops_per_s / peak_flops_per_s;
  if (memory_side) {
    p.limiter = p.fraction_of_roof >= o.near_bandwidth_roof ? bound::memory : bound::latency;
  } else {
    p.limiter = p.fraction_of_roof >= o.far_under_roof ? bound::compute : bound::latency;
  }
  return p;
}

KSCOPE_DECL std::string format_si(double value, const char* unit) {
  if (std::isnan(value)) return "unknown";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  static const char* const big[] = {"", "k", "M", "G", "T", "P", "E"};
  static const char* const small[] = {"", "m", "u", "n"};
  double magnitude = std::fabs(value);
  const char* prefix = "";
  if (magnitude >= 1) {
    int i = 0;
    while (magnitude >= 999.5 && i < 6) { magnitude /= 1000; value /= 1000; ++i; }
    prefix = big[i];
  } else if (magnitude > 0) {
    int i = 0;
    while (magnitude < 0.9995 && i < 3) { magnitude *= 1000; value *= 1000; ++i; }
    prefix = small[i];
  }
  const int decimals = magnitude >= 99.95 ? 0 : magnitude >= 9.995 ? 1 : 2;
  return format_fixed(value, decimals) + " " + prefix + unit;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Places work done in `seconds` under the roofline of a machine with the given peaks.
// Throws std::invalid_argument for input that cannot be placed (see the top of this
// header); try_place() is the non-throwing form.
//   kscope::placement p = kscope::place({1e9, 8e9}, 2e-3, 67e12, 4.8e12);
//   // p.bytes_per_s == 4e12, p.limiter == kscope::bound::memory
[[nodiscard]] KSCOPE_DECL placement place(work w, double seconds, double peak_flops_per_s, double peak_bytes_per_s,
                                     const roofline_options& options);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL placement place(work w, double seconds, double peak_flops_per_s, double peak_bytes_per_s,
                                     const roofline_options& options) {
  const std::string error = detail::roofline_argument_error(w, seconds, peak_flops_per_s, peak_bytes_per_s, options);
  if (!error.empty()) throw std::invalid_argument(error);
  return detail::place_valid(w, seconds, peak_flops_per_s, peak_bytes_per_s, options);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// place() with the default thresholds, the form most callers want.
[[nodiscard]] KSCOPE_DECL placement place(work w, double seconds, double peak_flops_per_s, double peak_bytes_per_s);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL placement place(work w, double seconds, double peak_flops_per_s, double peak_bytes_per_s) {
  return place(w, seconds, peak_flops_per_s, peak_bytes_per_s, roofline_options{});
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// place() that never throws: std::nullopt for input place() would reject.
//   if (auto p = kscope::try_place(w, s, pf, pb)) use(*p);
[[nodiscard]] KSCOPE_DECL std::optional<placement> try_place(work w, double seconds, double peak_flops_per_s,
                                                        double peak_bytes_per_s,
                                                        const roofline_options& options = {}) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<placement> try_place(work w, double seconds, double peak_flops_per_s,
                                                        double peak_bytes_per_s,
                                                        const roofline_options& options) noexcept {
  try {
    if (!detail::roofline_argument_error(w, seconds, peak_flops_per_s, peak_bytes_per_s, options).empty()) {
      return std::nullopt;
    }
  } catch (...) {  // std::to_string may allocate; out of memory must not escape
    return std::nullopt;
  }
  return detail::place_valid(w, seconds, peak_flops_per_s, peak_bytes_per_s, options);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One line saying what to try next, following the classification at the top of this header.
// A compute-bound kernel far under its roof (fraction below near_compute_roof) gets the
// "compute path not used" line rather than "at the compute roof".
//   std::printf("%s\n", kscope::hint(p).data());  // string_view over a literal: NUL-terminated
[[nodiscard]] KSCOPE_DECL std::string_view hint(const placement& p, const roofline_options& options = {}) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string_view hint(const placement& p, const roofline_options& options) noexcept {
  switch (p.limiter) {
    case bound::memory:
      return "memory-bound: move fewer bytes (fuse kernels, compress or narrow the data type, reuse data "
             "through cache and shared memory)";
    case bound::compute:
      if (p.fraction_of_roof >= options.near_compute_roof) {
        return "at the compute roof: do fewer operations or use a faster path (lower precision, tensor cores)";
      }
      return "compute path not used: high intensity but far under the compute roof; check the data type, "
             "layout, alignment and whether tensor cores are used";
    case bound::latency:
      return "latency-bound: far under the roofs; check CPU gaps between launches, synchronizations, and "
             "parallelism (grid too small, too few bytes in flight)";
  }
  return "";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Turns a time interval (e.g. the median CI of a kscope::summary) into the interval of
// the rate amount / time. Rate falls as time grows, so [lo, hi] seconds becomes
// [amount / hi, amount / lo] per second. Any type with members lo, hi and level works
// (kscope::interval from stats.hpp is the intended one; this header does not include
// stats.hpp so the pure modules stay independent). NaN bounds when the time interval
// is missing (NaN), not positive, or reversed.
//   kscope::interval flops_ci = kscope::rate_interval(w.flops, s.median_ci);
template <class Interval>
[[nodiscard]] Interval rate_interval(double amount, const Interval& seconds) noexcept {
  Interval rate = seconds;  // keeps level and any other members
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (std::isnan(seconds.lo) || std::isnan(seconds.hi) || !(seconds.lo > 0) || seconds.hi < seconds.lo ||
      !std::isfinite(amount)) {
    rate.lo = nan;
    rate.hi = nan;
    return rate;
  }
  rate.lo = amount / seconds.hi;
  rate.hi = amount / seconds.lo;
  return rate;
}

// One roof of a roofline chart: a compute peak (flat line) and the bandwidth peak
// (slanted line). `measured` tells sustained (measured) roofs from theoretical ones;
// plot.hpp draws theoretical roofs solid and measured roofs dashed.
//   kscope::roof_line bf16{"bf16 tensor", 989e12, 4.8e12, false};
struct roof_line {
  std::string label;
  double peak_flops_per_s = 0;
  double peak_bytes_per_s = 0;
  bool measured = false;
};

// One labelled point of a roofline chart: a scope or kernel at its achieved rate.
//   kscope::roof_point pt = kscope::to_roof_point("decode", p);
struct roof_point {
  std::string label;
  double intensity = 0;    // flop/byte
  double flops_per_s = 0;  // achieved
  bound limiter = bound::latency;
};

// The chart point of a placement.
//   points.push_back(kscope::to_roof_point("attention", kscope::place(w, s, pf, pb)));
[[nodiscard]] KSCOPE_DECL roof_point to_roof_point(std::string label, const placement& p);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL roof_point to_roof_point(std::string label, const placement& p) {
  return roof_point{std::move(label), p.intensity, p.flops_per_s, p.limiter};
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
