// kscope/core/detail/text_layout.hpp — the column and paragraph layout every kscope text
// table uses: indentation by depth, fixed-width cells, word-wrapped lines.
#pragma once

#include "text_escape.hpp"  // decode_utf8

#include <cstddef>
#include <string>

namespace kscope {
namespace detail {

// Two spaces per level below the top, capped: a report read from a file may claim any
// depth, and the name column is 30 wide anyway.
KSCOPE_DECL std::size_t indent_width(std::size_t depth) noexcept;

// Pads (or cuts with "~") to a display width; "±" and "µ" count as one column.
KSCOPE_DECL std::string fit(const std::string& s, std::size_t width, bool right = false);

// Word-wraps one paragraph to `width` columns, continuation lines indented by 2.
KSCOPE_DECL std::string wrap(const std::string& text, std::size_t width);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t indent_width(std::size_t depth) noexcept {
  const std::size_t levels = depth > 0 ? depth - 1 : 0;
  return levels < 15 ? 2 * levels : 30;
}

KSCOPE_DECL std::string fit(const std::string& s, std::size_t width, bool right) {
  std::size_t columns = 0;
  for (unsigned char c : s) columns += (c & 0xC0) != 0x80;
  std::string out = s;
  if (columns > width) {
    // Cut between characters, never inside one (a cut UTF-8 sequence is invalid text);
    // mark the cut.
    const std::size_t keep = width > 0 ? width - 1 : 0;
    std::size_t bytes = 0;
    for (std::size_t kept = 0; kept < keep && bytes < s.size(); ++kept) bytes += decode_utf8(s, bytes).length;
    out = s.substr(0, bytes) + "~";
    columns = width;
  }
  std::string pad(width - columns, ' ');
  return right ? pad + out : out + pad;
}

KSCOPE_DECL std::string wrap(const std::string& text, std::size_t width) {
  std::string out, line;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = "  " + word;
    } else {
      line += line.empty() ? word : " " + word;
    }
    start = end + 1;
  }
  if (!line.empty()) out += line + "\n";
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
