// kscope/core/detail/json_reader.hpp — a small, strict JSON parser (RFC 8259), no dependencies.
//
// Used where kscope reads its own documents back (merge.hpp, the kscope CLI). The library
// must not depend on a JSON library, and the documents are small (a report is kilobytes
// to a few MiB), so a plain DOM is enough. Strict on purpose: a truncated or hand-edited
// report gets a clear message with its byte offset instead of a half-read result.
//   - no comments, trailing commas, single quotes, NaN/Infinity, leading zeros or '+';
//   - control characters inside strings must be escaped; \uXXXX escapes become UTF-8,
//     surrogate pairs are combined and a lone surrogate is an error;
//   - numbers out of double range are an error; nesting deeper than max_depth is an error
//     (the parser recurses, so the cap also bounds its stack use);
//   - anything but whitespace after the value is an error ("trailing garbage").
// Duplicate keys are kept in order; find() returns the first.
//
//   auto parsed = kscope::detail::parse_json(R"({"a": [1, 2.5, "x"]})");
//   if (!parsed.ok()) std::fprintf(stderr, "%s\n", parsed.error.c_str());
//   double v = parsed.value.find("a")->at(1).number;   // 2.5
#pragma once

#include "number_format.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {
namespace detail {

enum class json_type : std::uint8_t { null, boolean, number, string, array, object };

// One parsed value. Only the member that matches `type` is meaningful.
//
//   const json_value* n = doc.find("scopes");
//   if (n && n->is_array()) for (const json_value& s : n->items) ...
struct json_value {
  json_type type = json_type::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<json_value> items;                             // array elements
  std::vector<std::pair<std::string, json_value>> members;   // object members, in order

  [[nodiscard]] bool is_null() const noexcept { return type == json_type::null; }
  [[nodiscard]] bool is_bool() const noexcept { return type == json_type::boolean; }
  [[nodiscard]] bool is_number() const noexcept { return type == json_type::number; }
  [[nodiscard]] bool is_string() const noexcept { return type == json_type::string; }
  [[nodiscard]] bool is_array() const noexcept { return type == json_type::array; }
  [[nodiscard]] bool is_object() const noexcept { return type == json_type::object; }

  // The first member named `key`, or nullptr (also when this is not an object).
  [[nodiscard]] const json_value* find(std::string_view key) const noexcept {
    if (type != json_type::object) return nullptr;
    for (const auto& m : members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
  // Array element i; a shared null value when out of range or not an array.
  [[nodiscard]] const json_value& at(std::size_t i) const noexcept {
    static const json_value none{};
    return (type == json_type::array && i < items.size()) ? items[i] : none;
  }
  // The number, or `fallback` when this is not a number (null included: kscope writes
  // NaN as null, so pass NaN to get it back).
  [[nodiscard]] double number_or(double fallback) const noexcept {
    return type == json_type::number ? number : fallback;
  }
  [[nodiscard]] std::string string_or(std::string fallback) const {
    return type == json_type::string ? string : fallback;
  }
  // The member's number / string / bool, or `fallback` when absent or of another type.
  [[nodiscard]] double member_number(std::string_view key, double fallback) const noexcept {
    const json_value* v = find(key);
    return v ? v->number_or(fallback) : fallback;
  }
  [[nodiscard]] std::string member_string(std::string_view key, std::string fallback = {}) const {
    const json_value* v = find(key);
    return v ? v->string_or(std::move(fallback)) : fallback;
  }
  [[nodiscard]] bool member_bool(std::string_view key, bool fallback) const noexcept {
    const json_value* v = find(key);
    return (v && v->is_bool()) ? v->boolean : fallback;
  }
};

// The outcome of parse_json: `value` is meaningful when error is empty.
struct json_parse_result {
  json_value value;
  std::string error;       // "offset 17: expected ':' after an object key"
  std::size_t offset = 0;  // byte offset of the error

  [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

class json_parser {
 public:
  json_parser(std::string_view text, std::size_t max_depth) : text_(text), max_depth_(max_depth) {}

  json_parse_result run() {
    json_parse_result result;
    try {
      skip_whitespace();
      parse_value(result.value, 0);
      skip_whitespace();
      if (pos_ != text_.size()) fail("trailing characters after the JSON value");
    } catch (const parse_error& e) {
      result.value = json_value{};
      result.offset = e.offset;
      result.error = "offset " + std::to_string(e.offset) + ": " + e.message;
    }
    return result;
  }

 private:
  struct parse_error {
    std::size_t offset;
    std::string message;
  };

  [[noreturn]] void fail(const std::string& message) const { throw parse_error{pos_, message}; }

  void skip_whitespace() noexcept {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  bool consume_literal(std::string_view word) noexcept {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  void parse_value(json_value& out, std::size_t depth) {
    if (pos_ >= text_.size()) fail("unexpected end of input, expected a value");
    const char c = text_[pos_];
    switch (c) {
      case '{': parse_object(out, depth + 1); return;
      case '[': parse_array(out, depth + 1); return;
      case '"':
        out.type = json_type::string;
        parse_string(out.string);
        return;
      case 't':
      case 'f':
        if (consume_literal("true")) { out.type = json_type::boolean; out.boolean = true; return; }
        if (consume_literal("false")) { out.type = json_type::boolean; out.boolean = false; return; }
        fail("invalid literal");
      case 'n':
        if (consume_literal("null")) { out.type = json_type::null; return; }
        fail("invalid literal");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          parse_number(out);
          return;
        }
        fail(std::string("unexpected character '") + printable(c) + "'");
    }
  }

  static std::string printable(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", u);
    return buf;
  }

  void enter(std::size_t depth) const {
    if (depth > max_depth_) fail("nesting deeper than " + std::to_string(max_depth_) + " levels");
  }

  void parse_object(json_value& out, std::size_t depth) {
    enter(depth);
    out.type = json_type::object;
    ++pos_;  // '{'
    skip_whitespace();
    if (pos_ < text_.size() && text_[pos_] == '}') { ++pos_; return; }
    while (true) {
      skip_whitespace();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key in an object");
      std::string key;
      parse_string(key);
      skip_whitespace();
      if (pos_ >= text_.size() || text_[pos_] != ':') fail("expected ':' after an object key");
      ++pos_;
      skip_whitespace();
      out.members.emplace_back(std::move(key), json_value{});
      parse_value(out.members.back().second, depth);
      skip_whitespace();
      if (pos_ >= text_.size()) fail("unexpected end of input inside an object");
      if (text_[pos_] == ',') { ++pos_; continue; }
      if (text_[pos_] == '}') { ++pos_; return; }
      fail("expected ',' or '}' in an object");
    }
  }

  void parse_array(json_value& out, std::size_t depth) {
    enter(depth);
    out.type = json_type::array;
    ++pos_;  // '['
    skip_whitespace();
    if (pos_ < text_.size() && text_[pos_] == ']') { ++pos_; return; }
    while (true) {
      skip_whitespace();
      out.items.emplace_back();
      parse_value(out.items.back(), depth);
      skip_whitespace();
      if (pos_ >= text_.size()) fail("unexpected end of input inside an array");
      if (text_[pos_] == ',') { ++pos_; continue; }
      if (text_[pos_] == ']') { ++pos_; return; }
      fail("expected ',' or ']' in an array");
    }
  }

  unsigned read_hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else { --pos_; fail("invalid hex digit in \\u escape"); }
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
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

  void parse_string(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_];
      if (c == '"') { ++pos_; return; }
      if (static_cast<unsigned char>(c) < 0x20) fail("unescaped control character in a string");
      if (c != '\\') { out += c; ++pos_; continue; }
      ++pos_;
      if (pos_ >= text_.size()) fail("unterminated escape in a string");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = read_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") fail("high surrogate without its low surrogate");
            pos_ += 2;
            const unsigned low = read_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("high surrogate without its low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: --pos_; fail(std::string("invalid escape '\\") + printable(e) + "'");
      }
    }
  }

  void parse_number(json_value& out) {
    const std::size_t start = pos_;
    const auto digit = [&]() { return pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; };
    if (text_[pos_] == '-') ++pos_;
    if (!digit()) fail("expected a digit in a number");
    if (text_[pos_] == '0') {
      ++pos_;
      if (digit()) fail("leading zero in a number");
    } else {
      while (digit()) ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (!digit()) fail("expected a digit after the decimal point");
      while (digit()) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digit()) fail("expected a digit in the exponent");
      while (digit()) ++pos_;
    }
    // The grammar is checked above; parse_double converts without the C locale (strtod
    // would stop at the '.' once a host program set a comma-decimal locale). A value too
    // small for a double reads as 0, as strtod gives; one too large is an error.
    double v = 0;
    if (!parse_double(text_.substr(start, pos_ - start), v)) { pos_ = start; fail("number out of range"); }
    out.type = json_type::number;
    out.number = v;
  }

  std::string_view text_;
  std::size_t max_depth_;
  std::size_t pos_ = 0;
};

// Parses one JSON document. Never throws for bad input: the result carries the error.
// (std::bad_alloc on a huge document may still propagate, as from any allocation.)
//
//   auto r = kscope::detail::parse_json(text);
//   if (!r.ok()) report(r.error);
[[nodiscard]] inline json_parse_result parse_json(std::string_view text, std::size_t max_depth = 64) {
  return json_parser(text, max_depth).run();
}

}  // namespace detail
}  // namespace kscope
