// kscope/core/detail/utc_time.hpp — "2026-12-02T10:00:00Z" for a time_t, computed rather
// than asked of the C library.
//
// glibc's gmtime_r takes its time-zone lock even for UTC, and fork() does not reset that
// lock: a child forked while another thread was inside gmtime_r (a report being built)
// waits on it forever at its own first report (issue 31). The date is plain arithmetic
// on the day count (the proleptic Gregorian calendar, as gmtime uses; H. Hinnant's
// civil_from_days), so the timestamps of reports and bench results take no lock.
//
//   std::string stamp = kscope::detail::utc_timestamp_text(std::time(nullptr));
#pragma once

#include "../config.hpp"
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

namespace kscope {
namespace detail {

// ISO 8601 UTC to the second, 20 characters for years 0000 to 9999.
[[nodiscard]] KSCOPE_DECL std::string utc_timestamp_text(std::time_t time);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string utc_timestamp_text(std::time_t time) {
  const std::int64_t seconds = static_cast<std::int64_t>(time);
  std::int64_t days = seconds / 86400;
  std::int64_t second_of_day = seconds % 86400;
  if (second_of_day < 0) {  // before 1970: floor, not truncation
    second_of_day += 86400;
    --days;
  }
  const std::int64_t z = days + 719468;  // days since 0000-03-01
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t day_of_era = z - era * 146097;                                                   // [0, 146096]
  const std::int64_t year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const std::int64_t day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);  // March 1 = 0
  const std::int64_t month_from_march = (5 * day_of_year + 2) / 153;                                  // [0, 11]
  const std::int64_t day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
  const std::int64_t month = month_from_march < 10 ? month_from_march + 3 : month_from_march - 9;
  const std::int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  char text[64];  // room for any 64-bit year: no truncation to reason about
  std::snprintf(text, sizeof text, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", static_cast<long long>(year),
                static_cast<long long>(month), static_cast<long long>(day),
                static_cast<long long>(second_of_day / 3600), static_cast<long long>(second_of_day / 60 % 60),
                static_cast<long long>(second_of_day % 60));
  return text;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
