// kscope/core/detail/number_format.hpp — numbers to text and back, whatever the C locale.
//
// printf("%.2f") and strtod follow the C locale: once a host program calls
// setlocale(LC_ALL, "de_DE.UTF-8"), printf writes 3135,92 and strtod stops at the '.'.
// That turns kscope's JSON invalid ("median":3135,92) and makes its reader refuse its own
// files, so every number kscope writes or reads goes through these functions, which
// always use '.' and never group digits. They are what printf/strtod give in the "C"
// locale: std::to_chars / std::from_chars where the standard library has them for
// floating point (__cpp_lib_to_chars: libstdc++ 11+, MSVC 19.24+), else printf/strtod with
// the locale's decimal point swapped for '.' (and back, when reading).
//
//   std::string a = kscope::detail::format_fixed(3135.918, 2);      // "3135.92"
//   std::string b = kscope::detail::format_general(1e5, 3);         // "1e+05"  (printf "%.3g")
//   std::string c = kscope::detail::format_round_trip(0.1);         // "0.1"    (reads back exactly)
//   double v = 0;
//   bool ok = kscope::detail::parse_double("3135.92", v);           // true, whatever the locale
#pragma once

#include "../config.hpp"
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>

#if defined(__has_include)
#if __has_include(<version>)
#include <version>  // __cpp_lib_to_chars without pulling <charconv> in where it is absent
#endif
#endif
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
#include <charconv>
#include <system_error>
#define KSCOPE_DETAIL_HAS_FLOAT_CHARCONV 1
#else
#include <clocale>
#include <cstdio>
#include <cstdlib>
#define KSCOPE_DETAIL_HAS_FLOAT_CHARCONV 0
#endif

namespace kscope {
namespace detail {

#if !KSCOPE_DETAIL_HAS_FLOAT_CHARCONV
// The fallback: printf, then the locale's decimal point (one or more bytes: "," or the
// Arabic U+066B) replaced by '.'. printf never groups digits without the "'" flag.
inline std::string printf_c_locale(const char* format, int precision, double value) {
  char buffer[512];  // "%.*f" of 1e308 is 309 digits; precision is clamped to 40 below
  const int n = std::snprintf(buffer, sizeof buffer, format, precision, value);
  if (n < 0) return "nan";
  std::string out(buffer, static_cast<std::size_t>(n) < sizeof buffer ? static_cast<std::size_t>(n) : sizeof buffer - 1);
  const char* point = std::localeconv()->decimal_point;
  const std::string_view local_point = (point && *point) ? point : ".";
  if (local_point != ".") {
    const std::size_t at = out.find(local_point);
    if (at != std::string::npos) out.replace(at, local_point.size(), ".");
  }
  return out;
}
#endif

// Like printf("%.*f", decimals, value) in the "C" locale: "3135.92", "-0.50", "nan", "inf".
// decimals is clamped to [0, 40].
[[nodiscard]] KSCOPE_DECL std::string format_fixed(double value, int decimals);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string format_fixed(double value, int decimals) {
  if (decimals < 0) decimals = 0;
  if (decimals > 40) decimals = 40;
#if KSCOPE_DETAIL_HAS_FLOAT_CHARCONV
  char buffer[400];  // 309 integer digits of 1e308, sign, point, 40 decimals
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, decimals);
  if (r.ec != std::errc()) return "nan";  // cannot happen with this buffer; never an unterminated string
  return std::string(buffer, r.ptr);
#else
  return printf_c_locale("%.*f", decimals, value);
#endif
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Like printf("%.*g", significant, value) in the "C" locale: "1e+05", "0.001", "3.14".
// significant is clamped to [1, 17] (17 digits tell every double apart).
[[nodiscard]] KSCOPE_DECL std::string format_general(double value, int significant);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string format_general(double value, int significant) {
  if (significant < 1) significant = 1;
  if (significant > 17) significant = 17;
#if KSCOPE_DETAIL_HAS_FLOAT_CHARCONV
  char buffer[64];
  const std::to_chars_result r =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general, significant);
  if (r.ec != std::errc()) return "nan";
  return std::string(buffer, r.ptr);
#else
  return printf_c_locale("%.*g", significant, value);
#endif
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace number_format_detail {

// The order of magnitude of a validated decimal token ("0.00012e-3" -> -7): the position
// of its first non-zero digit relative to the point, plus the exponent. Used only to tell
// underflow (a tiny number, read as 0 as strtod does) from overflow (an error).
KSCOPE_DECL long decimal_magnitude(std::string_view token) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL long decimal_magnitude(std::string_view token) noexcept {
  std::size_t i = 0;
  if (i < token.size() && (token[i] == '-' || token[i] == '+')) ++i;
  long integer_digits = 0;     // digits before the point
  long first_integer = -1;     // index (from 0) of the first non-zero digit before the point
  long first_fraction = -1;    // index (from 1) of the first non-zero digit after it
  bool in_fraction = false;
  long fraction_digits = 0;
  for (; i < token.size(); ++i) {
    const char c = token[i];
    if (c == '.') { in_fraction = true; continue; }
    if (c < '0' || c > '9') break;
    if (!in_fraction) {
      if (c != '0' && first_integer < 0) first_integer = integer_digits;
      ++integer_digits;
    } else {
      ++fraction_digits;
      if (c != '0' && first_fraction < 0) first_fraction = fraction_digits;
    }
  }
  long exponent = 0;
  if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < token.size() && (token[i] == '+' || token[i] == '-')) negative = token[i++] == '-';
    for (; i < token.size() && token[i] >= '0' && token[i] <= '9'; ++i)
      if (exponent < 100000) exponent = exponent * 10 + (token[i] - '0');
    if (negative) exponent = -exponent;
  }
  // "120.5": the first non-zero digit is worth 10^2; "0.003": 10^-3.
  if (first_integer >= 0) return integer_digits - 1 - first_integer + exponent;
  if (first_fraction >= 0) return -first_fraction + exponent;
  return -100000;  // zero
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace number_format_detail

// Reads a whole decimal number ("-12.5e3"; no leading blanks, no "0x", no "inf"/"nan")
// as strtod would in the "C" locale. false when the text is not exactly one number or its
// value overflows a double; a value too small for a double reads as (signed) zero, as
// strtod gives.
[[nodiscard]] KSCOPE_DECL bool parse_double(std::string_view text, double& out) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool parse_double(std::string_view text, double& out) noexcept {
  if (text.empty()) return false;
  // Accept only the decimal grammar, so both paths agree (from_chars takes no '+' and
  // no "0x"; strtod takes both, and blanks, and "inf").
  {
    std::size_t i = 0;
    if (text[i] == '-' || text[i] == '+') ++i;
    bool digits = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') { ++i; digits = true; }
    if (i < text.size() && text[i] == '.') {
      ++i;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') { ++i; digits = true; }
    }
    if (!digits) return false;
    if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
      ++i;
      if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
      bool exponent_digits = false;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') { ++i; exponent_digits = true; }
      if (!exponent_digits) return false;
    }
    if (i != text.size()) return false;
  }
  std::string_view body = text;
  if (body[0] == '+') body.remove_prefix(1);
#if KSCOPE_DETAIL_HAS_FLOAT_CHARCONV
  const bool negative = body[0] == '-';
  double value = 0;
  const std::from_chars_result r = std::from_chars(body.data(), body.data() + body.size(), value);
  if (r.ptr != body.data() + body.size()) return false;
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars leaves the value alone out of range; strtod gives 0 for underflow.
    if (number_format_detail::decimal_magnitude(body) < 0) {
      out = negative ? -0.0 : 0.0;
      return true;
    }
    return false;
  }
  if (r.ec != std::errc()) return false;
  out = value;
  return true;
#else
  std::string local(body);
  const char* point = std::localeconv()->decimal_point;
  if (point && *point && std::string_view(point) != ".") {
    const std::size_t at = local.find('.');
    if (at != std::string::npos) local.replace(at, 1, point);
  }
  char* end = nullptr;
  const double value = std::strtod(local.c_str(), &end);
  if (end != local.c_str() + local.size()) return false;
  if (std::isinf(value)) return false;
  out = value;
  return true;
#endif
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The shortest of printf "%.15g" and "%.17g" that reads back to the same double: 15
// significant digits keep 0.1 as "0.1", 17 tell every double apart. What kscope's JSON
// and CSV files hold, so they read back bit for bit.
[[nodiscard]] KSCOPE_DECL std::string format_round_trip(double value);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string format_round_trip(double value) {
  std::string shorter = format_general(value, 15);
  double back = 0;
  if (!std::isfinite(value) || (parse_double(shorter, back) && back == value)) return shorter;
  return format_general(value, 17);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#undef KSCOPE_DETAIL_HAS_FLOAT_CHARCONV
