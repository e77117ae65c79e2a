// kscope/core/detail/checked_math.hpp — integer sums of numbers read from files.
//
// A report or a trace from outside may hold any number. A signed overflow is undefined
// behaviour, and llround of a double beyond long long gives an unspecified value, so where
// values read from a file are added or rounded to integers it happens here: each answers
// "no value" instead of a wrong one, and the caller says in a note what it did instead.
//
//   if (const auto sum = kscope::detail::checked_add(origin_ns, offset_ns)) wall_ns = *sum;
//   else note("the wall clock is out of range");
//   const auto ns = kscope::detail::rounded_int64(ts_us * 1000, 9e18);  // nullopt past 9e18
#pragma once

#include "../config.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

namespace kscope {
namespace detail {

// The largest time kscope takes from a file as a clock origin or offset: 2^62 ns (146
// years). A steady clock counts from boot and a wall-clock offset is about 1.8e18 ns today
// (until 2116), so real values are far below; the sum or difference of two values within
// it always fits in int64.
inline constexpr std::int64_t max_input_time_ns = std::int64_t{1} << 62;

// a + b, a - b; nullopt where the exact result does not fit in int64.
[[nodiscard]] KSCOPE_DECL std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) noexcept;
[[nodiscard]] KSCOPE_DECL std::optional<std::int64_t> checked_sub(std::int64_t a, std::int64_t b) noexcept;
// `v` rounded to the nearest integer (halves away from zero, as llround) when it is finite
// and |v| < bound; nullopt otherwise. A bound above 2^63 acts as 2^63.
[[nodiscard]] KSCOPE_DECL std::optional<std::int64_t> rounded_int64(double v, double bound) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  std::int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
#else
  if ((b > 0 && a > std::numeric_limits<std::int64_t>::max() - b) ||
      (b < 0 && a < std::numeric_limits<std::int64_t>::min() - b))
    return std::nullopt;
  return a + b;
#endif
}

KSCOPE_DECL std::optional<std::int64_t> checked_sub(std::int64_t a, std::int64_t b) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  std::int64_t difference = 0;
  if (__builtin_sub_overflow(a, b, &difference)) return std::nullopt;
  return difference;
#else
  if ((b < 0 && a > std::numeric_limits<std::int64_t>::max() + b) ||
      (b > 0 && a < std::numeric_limits<std::int64_t>::min() + b))
    return std::nullopt;
  return a - b;
#endif
}

KSCOPE_DECL std::optional<std::int64_t> rounded_int64(double v, double bound) noexcept {
  constexpr double type_end = 9223372036854775808.0;  // 2^63: every whole double below it in magnitude fits
  if (!std::isfinite(v) || !(std::fabs(v) < bound)) return std::nullopt;
  const double rounded = std::round(v);
  if (!(std::fabs(rounded) < type_end)) return std::nullopt;
  return static_cast<std::int64_t>(rounded);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
