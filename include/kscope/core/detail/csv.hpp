// kscope/core/detail/csv.hpp — CSV fields (RFC 4180) as every kscope CSV writes them: the
// benchmark results (bench/format.hpp) and the session report (report/report.hpp).
#pragma once

#include "../config.hpp"
#include "number_format.hpp"
#include "text_escape.hpp"

#include <cmath>
#include <string>
#include <string_view>

namespace kscope {
namespace detail {

// One field. Invalid UTF-8 becomes U+FFFD and a control other than tab, CR and LF takes
// its printable form (\x1b, \0; a CSV is read in terminals and spreadsheets too); a field
// with a comma, quote, CR or LF, or a blank at either end (which some readers trim), is
// quoted, its quotes doubled.
KSCOPE_DECL std::string csv_field(const std::string& s);
// Full precision so a CSV reader gets the same doubles; empty for unknown (NaN).
KSCOPE_DECL std::string csv_number(double v);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string csv_field(const std::string& s) {
  std::string clean;
  clean.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const utf8_char c = decode_utf8(s, i);
    if (c.valid && (c.code_point == '\t' || c.code_point == '\r' || c.code_point == '\n'))
      clean += static_cast<char>(c.code_point);
    else
      append_printable(clean, std::string_view(s).substr(i, c.length));
    i += c.length;
  }
  const bool quote = clean.find_first_of(",\"\n\r") != std::string::npos ||
                     (!clean.empty() && (clean.front() == ' ' || clean.front() == '\t' || clean.back() == ' ' ||
                                         clean.back() == '\t'));
  if (!quote) return clean;
  std::string q = "\"";
  for (char c : clean) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

KSCOPE_DECL std::string csv_number(double v) {
  if (!std::isfinite(v)) return "";
  return format_general(v, 17);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
