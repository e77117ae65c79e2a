// kscope/core/detail/text_escape.hpp — the one UTF-8 decoder, and user strings made safe to
// print.
//
// Scope names, tags, kernel names, benchmark names and everything read back from a report
// file are user data: they may hold invalid UTF-8, NUL bytes, or ESC sequences that a
// terminal obeys (change colours, move the cursor, rewrite the title, hide a line). Every
// kscope output goes through one of two doors here:
//   - decode_utf8(): the well-formed byte sequences of Unicode 15, table 3-7; anything else
//     (overlong forms, surrogates, code points above U+10FFFF, truncated sequences, stray
//     continuation bytes) is one "maximal subpart" that becomes one U+FFFD, the replacement
//     rule of Unicode chapter 3 (the same count browsers produce). json_writer.hpp and the
//     XML escaping in report/plot.hpp decode with it;
//   - printable_name() / printable_text(): what the text and markdown printers put on a
//     terminal. Controls get a visible form (NUL -> \0, ESC -> \x1b, DEL -> \x7f, C1 U+0080-
//     U+009F -> \u009b), and so do the invisible characters that reorder or break a line
//     (bidirectional overrides and isolates, U+2028/U+2029), so a name can neither drive the
//     terminal nor disguise what is printed. A NUL never truncates: the output holds none.
//
//   std::string line = kscope::detail::printable_name(scope.name);   // "step\x1b[2J" stays visible
#pragma once

#include "../config.hpp"
#include <cstddef>
#include <string>
#include <string_view>

namespace kscope {
namespace detail {

// One decoded character: its code point and byte length when valid; when not, length is
// the maximal subpart to replace with one U+FFFD (at least 1, so decoding always advances).
struct utf8_char {
  char32_t code_point = 0xFFFD;
  std::size_t length = 1;
  bool valid = false;
};

// Decodes the character at text[at] (at < text.size()).
//   for (std::size_t i = 0; i < s.size();) { utf8_char c = decode_utf8(s, i); ...; i += c.length; }
[[nodiscard]] KSCOPE_DECL utf8_char decode_utf8(std::string_view text, std::size_t at) noexcept;

// Appends code point `cp` (<= U+10FFFF, not a surrogate) as UTF-8.
KSCOPE_DECL void append_utf8(std::string& out, char32_t cp);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL utf8_char decode_utf8(std::string_view text, std::size_t at) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return {lead, 1, true};
  // Table 3-7: the lead byte fixes the length and the range of the second byte (which is
  // what excludes overlong forms, surrogates and code points above U+10FFFF); every later
  // byte is 80..BF. C0, C1 and F5..FF never start a character.
  std::size_t length = 0;
  unsigned char second_lo = 0x80, second_hi = 0xBF;
  char32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) { length = 2; code = lead & 0x1F; }
  else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3; code = lead & 0x0F;
    if (lead == 0xE0) second_lo = 0xA0;       // below: overlong
    else if (lead == 0xED) second_hi = 0x9F;  // above: UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4; code = lead & 0x07;
    if (lead == 0xF0) second_lo = 0x90;       // below: overlong
    else if (lead == 0xF4) second_hi = 0x8F;  // above: beyond U+10FFFF
  } else {
    return {};
  }
  std::size_t i = 1;
  for (; i < length && at + i < text.size(); ++i) {
    const unsigned char c = byte(at + i);
    const unsigned char lo = i == 1 ? second_lo : 0x80, hi = i == 1 ? second_hi : 0xBF;
    if (c < lo || c > hi) break;
    code = (code << 6) | (c & 0x3F);
  }
  if (i < length) return {0xFFFD, i, false};  // cut short: the bytes that fitted are one subpart
  return {code, length, true};
}

KSCOPE_DECL void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

inline constexpr std::string_view utf8_replacement_character = "\xEF\xBF\xBD";  // U+FFFD

// Whether a valid code point is invisible yet changes how a terminal shows the line: C0
// and C1 controls, DEL, the bidirectional embeddings, overrides, isolates and marks (the
// "Trojan Source" characters), and the Unicode line and paragraph separators.
[[nodiscard]] KSCOPE_DECL bool is_unprintable_code_point(char32_t cp) noexcept;

// Appends `text` for a terminal: valid UTF-8 as it is, each invalid sequence as U+FFFD,
// each unprintable code point in a visible form: \0, \x1b (C0 and DEL, two hex digits),
// \u009b / \u202e (the others, four). keep_newlines: '\n' stays a line break (whole texts
// whose lines kscope composed); otherwise it shows as \x0a (a name is one line).
KSCOPE_DECL void append_printable(std::string& out, std::string_view text, bool keep_newlines = false);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool is_unprintable_code_point(char32_t cp) noexcept {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

KSCOPE_DECL void append_printable(std::string& out, std::string_view text, bool keep_newlines) {
  static constexpr char hex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < text.size();) {
    const utf8_char c = decode_utf8(text, i);
    if (!c.valid) {
      out += utf8_replacement_character;
    } else if (!is_unprintable_code_point(c.code_point) || (keep_newlines && c.code_point == '\n')) {
      out.append(text.data() + i, c.length);
    } else if (c.code_point == 0) {
      out += "\\0";
    } else if (c.code_point <= 0x7F) {
      out += "\\x";
      out += hex[c.code_point >> 4];
      out += hex[c.code_point & 0xF];
    } else {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += hex[(c.code_point >> shift) & 0xF];
    }
    i += c.length;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A user string (scope, tag, kernel or benchmark name, a path in a message, one line read
// from a report file) as one printable line.
//   out += kscope::detail::printable_name(s.name);
[[nodiscard]] KSCOPE_DECL std::string printable_name(std::string_view text);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string printable_name(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_printable(out, text, false);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A user string as one Markdown table cell: printable (a newline shows as \x0a and
// cannot end the row) and no bare '|' (it would end the cell). Every markdown table
// kscope prints goes through this; report/compare.hpp escapes markup as well, for names
// read from files it did not write.
//   line += " " + kscope::detail::markdown_table_cell(name) + " |";
[[nodiscard]] KSCOPE_DECL std::string markdown_table_cell(std::string_view text);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string markdown_table_cell(std::string_view text) {
  std::string out;
  for (char c : printable_name(text)) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A whole text kscope composed, line breaks kept: the last guard of every terminal printer,
// so that a string no printer escaped still cannot reach the terminal raw. Idempotent.
//   return kscope::detail::printable_text(out);
[[nodiscard]] KSCOPE_DECL std::string printable_text(std::string_view text);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string printable_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_printable(out, text, true);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Whether `text` is valid UTF-8 throughout.
[[nodiscard]] KSCOPE_DECL bool is_valid_utf8(std::string_view text) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool is_valid_utf8(std::string_view text) noexcept {
  for (std::size_t i = 0; i < text.size();) {
    const utf8_char c = decode_utf8(text, i);
    if (!c.valid) return false;
    i += c.length;
  }
  return true;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
