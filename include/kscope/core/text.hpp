// kscope/core/text.hpp — the public face of three things every front end needs: a user
// string made safe to print, a number read the same in every locale, and a file written
// whole or not at all. They are what kscope's own printers use (core/detail/), so a tool or
// an example built on kscope prints, reads and writes exactly as kscope does.
//
//   std::fprintf(stderr, "%s\n", kscope::printable_text(path).c_str());
//   double threshold = 0;
//   if (!kscope::parse_number("0.05", threshold)) ...;
//   std::string error;
//   if (!kscope::write_text_file("out.md", text, &error)) std::fputs(error.c_str(), stderr);
#pragma once

#include "detail/atomic_file.hpp"
#include "detail/number_format.hpp"
#include "detail/text_escape.hpp"

#include <string>
#include <string_view>

namespace kscope {

// One printable line: control characters escaped, invalid UTF-8 replaced (U+FFFD).
[[nodiscard]] KSCOPE_DECL std::string printable_text(std::string_view text);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string printable_text(std::string_view text) { return detail::printable_name(text); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A whole decimal number ("-12.5e3") read as in the "C" locale, whatever the program's
// locale; false when the text is not exactly one finite-or-overflowing number.
[[nodiscard]] KSCOPE_DECL bool parse_number(std::string_view text, double& out) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool parse_number(std::string_view text, double& out) noexcept {
  return detail::parse_double(text, out);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Writes text to a file (binary), all or nothing: through a temporary file renamed over
// `path` once complete (core/detail/atomic_file.hpp), so a full disk never leaves a
// truncated file in place of the old one. false and *error ("cannot write PATH: No space
// left on device") on failure; never throws.
//   std::string why;
//   if (!kscope::write_text_file("roofline.svg", svg, &why)) std::fprintf(stderr, "%s\n", why.c_str());
[[nodiscard]] KSCOPE_DECL bool write_text_file(const std::string& path, std::string_view text,
                                          std::string* error = nullptr) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool write_text_file(const std::string& path, std::string_view text,
                                          std::string* error) noexcept {
  return detail::write_file_atomically(path, text, error);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
