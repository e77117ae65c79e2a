// kscope/core/detail/json_writer.hpp — a small streaming JSON writer.
//
// kscope writes reports, traces and benchmark results as JSON without depending on a
// JSON library (the headers must stay cheap to include and free of dependencies).
// The writer inserts commas itself, escapes strings per RFC 8259 (and repairs invalid
// UTF-8: write_string below is the one place kscope writes a JSON string), and writes non-finite
// numbers as null, because JSON has no NaN and a consumer must not mistake it for 0.
// Numbers are written with '.' whatever the C locale (number_format.hpp): a host program
// that calls setlocale(LC_ALL, "de_DE.UTF-8") must not turn 3135.92 into 3135,92.
#pragma once

#include "../config.hpp"
#include "number_format.hpp"
#include "text_escape.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace kscope {
namespace detail {

class json_writer {
 public:
  explicit json_writer(std::string& out);

  json_writer& begin_object();
  json_writer& end_object();
  json_writer& begin_array();
  json_writer& end_array();

  // Writes the key of the next member; the next value call completes it.
  json_writer& key(std::string_view k);

  json_writer& value(std::string_view s);
  json_writer& value(const char* s);
  json_writer& value(const std::string& s);
  json_writer& value(bool b);
  json_writer& value(std::nullptr_t);
  json_writer& value(double d);
  json_writer& value(float f);
  json_writer& value(int v);
  json_writer& value(long v);
  json_writer& value(long long v);
  json_writer& value(unsigned v);
  json_writer& value(unsigned long v);
  json_writer& value(unsigned long long v);

  template <class T>
  json_writer& member(std::string_view k, const T& v) { key(k); return value(v); }

  // Inserts already-serialized JSON (e.g. a nested document) as a value.
  json_writer& raw(std::string_view json);

 private:
  void separator();
  void value_prefix();
  // RFC 8259 strings that every strict reader accepts, whatever the bytes given: '"' and
  // '\\' escaped; every control character (U+0000-U+001F and DEL) as \u00XX, a NUL inside
  // a std::string included (never an end of string); U+2028/U+2029 escaped too, so the
  // JSON stays valid JavaScript; each invalid UTF-8 sequence (overlong, surrogate, above
  // U+10FFFF, cut short) replaced by U+FFFD (decode_utf8, text_escape.hpp), since a reader
  // must reject or mangle it and one bad kernel name would otherwise lose the whole file.
  void write_string(std::string_view s);

  std::string& out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL json_writer& json_writer::begin_object() { value_prefix(); out_ += '{'; first_.push_back(true); return *this; }

KSCOPE_DECL json_writer& json_writer::end_object() { out_ += '}'; first_.pop_back(); return *this; }

KSCOPE_DECL json_writer& json_writer::begin_array() { value_prefix(); out_ += '['; first_.push_back(true); return *this; }

KSCOPE_DECL json_writer& json_writer::end_array() { out_ += ']'; first_.pop_back(); return *this; }

KSCOPE_DECL json_writer& json_writer::value(std::string_view s) { value_prefix(); write_string(s); return *this; }

KSCOPE_DECL json_writer& json_writer::value(const char* s) { return value(std::string_view(s ? s : "")); }

KSCOPE_DECL json_writer& json_writer::value(const std::string& s) { return value(std::string_view(s)); }

KSCOPE_DECL json_writer& json_writer::value(bool b) { value_prefix(); out_ += b ? "true" : "false"; return *this; }

KSCOPE_DECL json_writer& json_writer::value(std::nullptr_t) { value_prefix(); out_ += "null"; return *this; }

KSCOPE_DECL json_writer& json_writer::value(float f) { return value(static_cast<double>(f)); }

KSCOPE_DECL json_writer& json_writer::value(int v) { return value(static_cast<long long>(v)); }

KSCOPE_DECL json_writer& json_writer::value(long v) { return value(static_cast<long long>(v)); }

KSCOPE_DECL json_writer& json_writer::value(long long v) { value_prefix(); out_ += std::to_string(v); return *this; }

KSCOPE_DECL json_writer& json_writer::value(unsigned v) { return value(static_cast<unsigned long long>(v)); }

KSCOPE_DECL json_writer& json_writer::value(unsigned long v) { return value(static_cast<unsigned long long>(v)); }

KSCOPE_DECL json_writer& json_writer::value(unsigned long long v) { value_prefix(); out_ += std::to_string(v); return *this; }

KSCOPE_DECL json_writer& json_writer::raw(std::string_view json) { value_prefix(); out_.append(json); return *this; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL json_writer::json_writer(std::string& out) : out_(out) {}

KSCOPE_DECL json_writer& json_writer::key(std::string_view k) {
  separator();
  write_string(k);
  out_ += ':';
  after_key_ = true;
  return *this;
}

KSCOPE_DECL json_writer& json_writer::value(double d) {
  value_prefix();
  if (!std::isfinite(d)) { out_ += "null"; return *this; }
  // 15 significant digits when they read back exactly (0.1 stays "0.1"), else 17.
  out_ += format_round_trip(d);
  return *this;
}

KSCOPE_DECL void json_writer::separator() {
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

KSCOPE_DECL void json_writer::value_prefix() {
  if (after_key_) { after_key_ = false; return; }
  separator();
}

KSCOPE_DECL void json_writer::write_string(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out_ += '"';
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {  // printable ASCII: the common case
      if (c == '"' || c == '\\') out_ += '\\';
      out_ += static_cast<char>(c);
      ++i;
      continue;
    }
    const utf8_char u = decode_utf8(s, i);
    if (!u.valid) {
      out_ += utf8_replacement_character;
    } else if (u.code_point < 0x20 || u.code_point == 0x7F || u.code_point == 0x2028 || u.code_point == 0x2029) {
      out_ += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out_ += hex[(u.code_point >> shift) & 0xF];
    } else {
      out_.append(s.data() + i, u.length);
    }
    i += u.length;
  }
  out_ += '"';
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
