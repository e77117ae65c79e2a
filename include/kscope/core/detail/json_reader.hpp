// kscope/core/detail/json_reader.hpp — a small, strict JSON parser (RFC 8259), no dependencies.
//
// Used where kscope reads its own documents back (merge.hpp, compare.hpp, the kscope CLI);
// write_json_value writes a parsed value back through json_writer.hpp.
// The library must not depend on a JSON library. Strict on purpose: a truncated or
// hand-edited report gets a clear message with its byte offset instead of a half-read
// result.
//   - no comments, trailing commas, single quotes, NaN/Infinity, leading zeros or '+';
//   - control characters inside strings must be escaped; \uXXXX escapes become UTF-8,
//     surrogate pairs are combined and a lone surrogate is an error;
//   - numbers out of double range are an error;
//   - anything but whitespace after the value is an error ("trailing garbage").
// Duplicate keys are kept in order; find() returns the first.
//
// The files it reads may be hostile (a CI artefact, a report from another machine), so
// every resource is bounded (json_limits): the input size (256 MiB), the nesting depth (64:
// the parser recurses, so this also bounds its stack) and the number of values in one
// tree (2^25). A value costs 64 bytes in the tree (an object member 96), arrays and objects
// are allocated at their exact size, so the tree of a 20 MB report takes about 5x its text.
// Two ways to read:
//   - parse_json: the whole document as a tree of json_value;
//   - json_cursor: a pull reader that walks objects and arrays, skips what it does not
//     need without building anything, and builds trees only for the parts asked for
//     (parse_report reads a report one scope at a time with it).
//
//   auto parsed = kscope::detail::parse_json(R"({"a": [1, 2.5, "x"]})");
//   if (!parsed.ok()) std::fprintf(stderr, "%s\n", parsed.error.c_str());
//   double v = parsed.value.find("a")->at(1).number;   // 2.5
#pragma once

#include "../config.hpp"
#include "json_writer.hpp"
#include "number_format.hpp"
#include "once.hpp"
#include "text_escape.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kscope {
namespace detail {

enum class json_type : std::uint8_t { null, boolean, number, string, array, object };

// An owning array of exactly `size()` elements in one allocation that also holds the
// size: 8 bytes where a std::vector takes 24 and keeps spare capacity. The tree's arrays
// and objects are built once, so they never grow.
template <class T>
class json_list {
 public:
  json_list() noexcept = default;
  json_list(const json_list& other) : block_(allocate(other.size())) {
    std::size_t built = 0;
    try {
      for (; built < other.size(); ++built) new (data() + built) T(other[built]);
    } catch (...) {
      destroy(built);
      throw;
    }
  }
  json_list(json_list&& other) noexcept : block_(other.block_) { other.block_ = nullptr; }
  json_list& operator=(json_list other) noexcept {
    std::swap(block_, other.block_);
    return *this;
  }
  ~json_list() { destroy(size()); }

  // A list of `count` elements moved out of `first[0..count)`.
  static json_list moved_from(T* first, std::size_t count) {
    json_list out;
    if (count == 0) return out;
    out.block_ = allocate(count);
    // Moving json_value and std::string never throws, so no element is left half-moved.
    static_assert(std::is_nothrow_move_constructible<T>::value, "json_list moves its elements in");
    for (std::size_t i = 0; i < count; ++i) new (out.data() + i) T(std::move(first[i]));
    return out;
  }

  [[nodiscard]] std::size_t size() const noexcept { return block_ ? block_->size : 0; }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  [[nodiscard]] T* begin() noexcept { return data(); }
  [[nodiscard]] T* end() noexcept { return data() + size(); }
  [[nodiscard]] const T* begin() const noexcept { return data(); }
  [[nodiscard]] const T* end() const noexcept { return data() + size(); }
  [[nodiscard]] T& operator[](std::size_t i) noexcept { return data()[i]; }
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept { return data()[i]; }
  [[nodiscard]] T& front() noexcept { return data()[0]; }
  [[nodiscard]] T& back() noexcept { return data()[size() - 1]; }
  [[nodiscard]] const T& front() const noexcept { return data()[0]; }
  [[nodiscard]] const T& back() const noexcept { return data()[size() - 1]; }

 private:
  struct header {
    std::size_t size;
  };
  // The elements start after the header, rounded up to T's alignment. Computed in a
  // function, not with alignas(T) on the header: T (json_value) is still incomplete where
  // json_value declares its lists, and nvcc's front end rejects alignof on it there.
  static constexpr std::size_t elements_offset() noexcept {
    return (sizeof(header) + alignof(T) - 1) / alignof(T) * alignof(T);
  }
  static header* allocate(std::size_t count) {
    if (count == 0) return nullptr;
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "operator new must align the elements");
    void* raw = ::operator new(elements_offset() + count * sizeof(T));
    return new (raw) header{count};
  }
  [[nodiscard]] T* data() const noexcept {
    return block_ ? reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(block_) + elements_offset()) : nullptr;
  }
  void destroy(std::size_t built) noexcept {
    if (!block_) return;
    for (std::size_t i = built; i > 0; --i) data()[i - 1].~T();
    ::operator delete(block_);
    block_ = nullptr;
  }
  header* block_ = nullptr;
};

// One parsed value. Only the member that matches `type` is meaningful.
//
//   const json_value* n = doc.find("scopes");
//   if (n && n->is_array()) for (const json_value& s : n->items) ...
struct json_value {
  json_type type = json_type::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  json_list<json_value> items;                             // array elements
  json_list<std::pair<std::string, json_value>> members;   // object members, in order

  [[nodiscard]] bool is_null() const noexcept;
  [[nodiscard]] bool is_bool() const noexcept;
  [[nodiscard]] bool is_number() const noexcept;
  [[nodiscard]] bool is_string() const noexcept;
  [[nodiscard]] bool is_array() const noexcept;
  [[nodiscard]] bool is_object() const noexcept;

  // The first member named `key`, or nullptr (also when this is not an object).
  [[nodiscard]] const json_value* find(std::string_view key) const noexcept;
  // Array element i; a shared null value when out of range or not an array.
  [[nodiscard]] const json_value& at(std::size_t i) const noexcept;
  // The number, or `fallback` when this is not a number (null included: kscope writes
  // NaN as null, so pass NaN to get it back).
  [[nodiscard]] double number_or(double fallback) const noexcept;
  [[nodiscard]] std::string string_or(std::string fallback) const;
  // The member's number / string / bool, or `fallback` when absent or of another type.
  [[nodiscard]] double member_number(std::string_view key, double fallback) const noexcept;
  [[nodiscard]] std::string member_string(std::string_view key, std::string fallback = {}) const;
  [[nodiscard]] bool member_bool(std::string_view key, bool fallback) const noexcept;
  // The member as an integer in [lo, hi] (see json_integer); `fallback` when the member
  // is absent or null. Throws json_field_error for anything else.
  //   std::size_t depth = scope.member_integer<std::size_t>("depth", 0, 4096, 1);
  template <class Integer>
  [[nodiscard]] Integer member_integer(std::string_view key, Integer lo, Integer hi, Integer fallback) const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool json_value::is_null() const noexcept { return type == json_type::null; }

KSCOPE_DECL bool json_value::is_bool() const noexcept { return type == json_type::boolean; }

KSCOPE_DECL bool json_value::is_number() const noexcept { return type == json_type::number; }

KSCOPE_DECL bool json_value::is_string() const noexcept { return type == json_type::string; }

KSCOPE_DECL bool json_value::is_array() const noexcept { return type == json_type::array; }

KSCOPE_DECL bool json_value::is_object() const noexcept { return type == json_type::object; }

KSCOPE_DECL double json_value::number_or(double fallback) const noexcept {
  return type == json_type::number ? number : fallback;
}

KSCOPE_DECL std::string json_value::string_or(std::string fallback) const {
  return type == json_type::string ? string : fallback;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const json_value* json_value::find(std::string_view key) const noexcept {
  if (type != json_type::object) return nullptr;
  for (const auto& m : members)
    if (m.first == key) return &m.second;
  return nullptr;
}

KSCOPE_DECL const json_value& json_value::at(std::size_t i) const noexcept {
  if (type == json_type::array && i < items.size()) return items[i];
  // Not a function-local static, whose guard a fork could catch held (once.hpp).
  static lazy_global<const json_value> none{lock_rank::init};
  return none.get([] { return new json_value; });
}

KSCOPE_DECL double json_value::member_number(std::string_view key, double fallback) const noexcept {
  const json_value* v = find(key);
  return v ? v->number_or(fallback) : fallback;
}

KSCOPE_DECL std::string json_value::member_string(std::string_view key, std::string fallback) const {
  const json_value* v = find(key);
  return v ? v->string_or(std::move(fallback)) : fallback;
}

KSCOPE_DECL bool json_value::member_bool(std::string_view key, bool fallback) const noexcept {
  const json_value* v = find(key);
  return (v && v->is_bool()) ? v->boolean : fallback;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A value that is valid JSON but not what a document reader needs there: a count of -5, a
// depth of 1e9, a size as a string. what() names the field and what was expected.
class json_field_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A document that is not valid JSON, or over a json_limits bound. what() is
// "offset 17: expected ':' after an object key".
class json_syntax_error : public std::runtime_error {
 public:
  json_syntax_error(std::size_t offset, const std::string& message);
  [[nodiscard]] std::size_t offset() const noexcept { return offset_; }

 private:
  std::size_t offset_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL json_syntax_error::json_syntax_error(std::size_t offset, const std::string& message) : std::runtime_error("offset " + std::to_string(offset) + ": " + message), offset_(offset) {}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A document beyond a json_limits bound: too large, too deep, too many values. Valid
// JSON, perhaps, but more than a reader of kscope's documents takes on.
class json_limit_error : public json_syntax_error {
 public:
  using json_syntax_error::json_syntax_error;
};

// How to describe a JSON value in an error message: "-5", "1e+300", "a string".
[[nodiscard]] KSCOPE_DECL std::string describe_json_value(const json_value& v);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string describe_json_value(const json_value& v) {
  switch (v.type) {
    case json_type::null: return "null";
    case json_type::boolean: return v.boolean ? "true" : "false";
    case json_type::number: return format_round_trip(v.number);
    case json_type::string: return "a string";
    case json_type::array: return "an array";
    case json_type::object: return "an object";
  }
  return "?";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// How write_json_value writes a number: as the double it is (15 or 17 significant digits,
// so 1e15 is "1e+15": what the report merge copies), or, for a whole number below 2^53 in
// magnitude, as an integer (1000000000000000: what the trace merge copies, since another
// tool's pids and ids are integers and its readers may want them written as such).
enum class json_whole_numbers : std::uint8_t { as_double, as_integer };

// Writes a parsed value back as JSON: the one copy of a tree the reader built into a
// document the writer makes (numbers through the writer: '.' in any locale). Its recursion
// is bounded by the reader's nesting limit.
KSCOPE_DECL void write_json_value(json_writer& w, const json_value& v,
                                  json_whole_numbers whole_numbers = json_whole_numbers::as_double);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void write_json_value(json_writer& w, const json_value& v, json_whole_numbers whole_numbers) {
  switch (v.type) {
    case json_type::null: w.value(nullptr); return;
    case json_type::boolean: w.value(v.boolean); return;
    case json_type::number:
      // Below 2^53 every whole double is exact, so the integer is the same number.
      if (whole_numbers == json_whole_numbers::as_integer && std::isfinite(v.number) &&
          v.number == std::floor(v.number) && std::fabs(v.number) < 9007199254740992.0)
        w.value(static_cast<long long>(v.number));
      else
        w.value(v.number);
      return;
    case json_type::string: w.value(v.string); return;
    case json_type::array:
      w.begin_array();
      for (const json_value& item : v.items) write_json_value(w, item, whole_numbers);
      w.end_array();
      return;
    case json_type::object:
      w.begin_object();
      for (const auto& [key, member] : v.members) {
        w.key(key);
        write_json_value(w, member, whole_numbers);
      }
      w.end_object();
      return;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// `v` as an Integer when it is a whole number in [lo, hi]; throws json_field_error
// otherwise: field "depth" must be an integer in [0, 4096], got -5. The one place kscope
// turns a JSON number into an integer: a plain static_cast of -1, 1e300 or NaN to an
// integer type is undefined behaviour, and a huge count would size an allocation or a loop.
//   const auto calls = json_integer<std::uint64_t>(*v, "calls", 0, UINT64_MAX);
template <class Integer>
[[nodiscard]] Integer json_integer(const json_value& v, std::string_view field, Integer lo, Integer hi) {
  static_assert(std::is_integral<Integer>::value && !std::is_same<Integer, bool>::value, "an integer type");
  if (v.is_number()) {
    const double x = v.number;
    // [type_min, 2^digits) holds exactly the doubles that convert without overflow; both
    // ends are powers of two (or 0), so the comparisons are exact.
    const double type_end = std::ldexp(1.0, std::numeric_limits<Integer>::digits);
    const double type_min = std::numeric_limits<Integer>::is_signed ? -type_end : 0.0;
    if (std::isfinite(x) && x == std::floor(x) && x >= type_min && x < type_end) {
      const Integer i = static_cast<Integer>(x);
      if (i >= lo && i <= hi) return i;
    }
  }
  throw json_field_error("field \"" + std::string(field) + "\" must be an integer in [" + std::to_string(lo) +
                         ", " + std::to_string(hi) + "], got " + describe_json_value(v));
}

template <class Integer>
Integer json_value::member_integer(std::string_view key, Integer lo, Integer hi, Integer fallback) const {
  const json_value* v = find(key);
  if (v == nullptr || v->is_null()) return fallback;
  return json_integer<Integer>(*v, key, lo, hi);
}

// The resources one parse may use. The defaults hold any report kscope writes (a
// report of the recorder's 65 536 scopes is well under 256 MiB) and bound what a hostile
// file can cost.
struct json_limits {
  static constexpr std::size_t default_max_input_bytes = std::size_t{256} << 20;  // 256 MiB
  static constexpr std::size_t default_max_depth = 64;
  static constexpr std::size_t default_max_values = std::size_t{1} << 25;  // ~2 GiB of tree at most

  std::size_t max_input_bytes = default_max_input_bytes;
  std::size_t max_depth = default_max_depth;    // arrays and objects inside each other
  std::size_t max_values = default_max_values;  // values in one tree (parse_json, json_cursor::read_value)
};

// The outcome of parse_json: `value` is meaningful when error is empty.
struct json_parse_result {
  json_value value;
  std::string error;       // "offset 17: expected ':' after an object key"
  std::size_t offset = 0;  // byte offset of the error

  [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

// The scanner under parse_json and json_cursor: reads values into trees or skips them.
// Throws json_syntax_error.
class json_parser {
 public:
  json_parser(std::string_view text, const json_limits& limits);

  // Reads one value at nesting `depth` into `out`, counting it and its parts against
  // `max_values` (reset per call).
  void read_tree(json_value& out, std::size_t depth, std::size_t max_values);
  // Checks one value's syntax and moves past it, building nothing.
  void skip(std::size_t depth);

  void skip_whitespace() noexcept;
  [[nodiscard]] char peek_char();
  void expect_char(char c, const char* what);
  // At a key: reads `"key"` and the ':' after it (into `key` unless null).
  void expect_key(std::string* key);
  // After an element of an array or object: true at ',' (another follows), false at the
  // closing bracket; both consumed.
  bool after_element(char close);
  // True, consuming it, when the next character is `close` (an empty array or object).
  bool consume_close(char close);
  void enter(std::size_t depth) const;
  void finish();
  [[noreturn]] void fail(const std::string& message) const;
  [[nodiscard]] std::size_t offset() const noexcept { return pos_; }

 private:
  void count_value();

  bool consume_literal(std::string_view word) noexcept;

  void parse_value(json_value& out, std::size_t depth);

  // A literal or a number.
  void parse_scalar(json_value& out);

  static std::string printable(char c);

  // Elements are parsed into a local value and collected on one stack shared by all
  // levels (a nested container pushes above and takes its part off before returning),
  // then moved into a list of exactly their number: no spare capacity, no regrowth of
  // the finished tree, and the stack's capacity is reused by every later container.
  void parse_array(json_value& out, std::size_t depth);

  void parse_object(json_value& out, std::size_t depth);

  unsigned read_hex4();


  // Reads a string at the opening quote; appends it to `out` unless null (skip).
  void scan_string(std::string* out);

  void parse_number(json_value& out);

  std::string_view text_;
  json_limits limits_;
  std::size_t pos_ = 0;
  std::size_t values_ = 0;
  std::size_t max_values_ = 0;
  std::vector<json_value> item_stack_;
  std::vector<std::pair<std::string, json_value>> member_stack_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void json_parser::fail(const std::string& message) const { throw json_syntax_error(pos_, message); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL json_parser::json_parser(std::string_view text, const json_limits& limits) : text_(text), limits_(limits) {
  if (text.size() > limits.max_input_bytes)
    throw json_limit_error(0, "the document is " + std::to_string(text.size()) + " bytes, over the limit of " +
                                  std::to_string(limits.max_input_bytes) + " bytes");
}

KSCOPE_DECL void json_parser::read_tree(json_value& out, std::size_t depth, std::size_t max_values) {
  values_ = 0;
  max_values_ = max_values;
  parse_value(out, depth);
}

KSCOPE_DECL void json_parser::skip(std::size_t depth) {
  skip_whitespace();
  if (pos_ >= text_.size()) fail("unexpected end of input, expected a value");
  const char c = text_[pos_];
  if (c == '{' || c == '[') {
    const char close = c == '{' ? '}' : ']';
    enter(depth + 1);
    ++pos_;
    skip_whitespace();
    if (pos_ < text_.size() && text_[pos_] == close) { ++pos_; return; }
    while (true) {
      if (c == '{') {
        skip_whitespace();
        expect_key(nullptr);
      }
      skip(depth + 1);
      if (!after_element(close)) return;
    }
  }
  if (c == '"') { scan_string(nullptr); return; }
  json_value scalar;  // a literal or a number: no allocation
  parse_scalar(scalar);
}

KSCOPE_DECL void json_parser::skip_whitespace() noexcept {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    ++pos_;
  }
}

KSCOPE_DECL char json_parser::peek_char() {
  skip_whitespace();
  if (pos_ >= text_.size()) fail("unexpected end of input, expected a value");
  return text_[pos_];
}

KSCOPE_DECL void json_parser::expect_char(char c, const char* what) {
  skip_whitespace();
  if (pos_ >= text_.size() || text_[pos_] != c) fail(what);
  ++pos_;
}

KSCOPE_DECL void json_parser::expect_key(std::string* key) {
  if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key in an object");
  if (key) key->clear();
  scan_string(key);
  skip_whitespace();
  if (pos_ >= text_.size() || text_[pos_] != ':') fail("expected ':' after an object key");
  ++pos_;
}

KSCOPE_DECL bool json_parser::after_element(char close) {
  skip_whitespace();
  if (pos_ >= text_.size())
    fail(close == '}' ? "unexpected end of input inside an object" : "unexpected end of input inside an array");
  if (text_[pos_] == ',') { ++pos_; return true; }
  if (text_[pos_] == close) { ++pos_; return false; }
  fail(close == '}' ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
}

KSCOPE_DECL bool json_parser::consume_close(char close) {
  skip_whitespace();
  if (pos_ < text_.size() && text_[pos_] == close) { ++pos_; return true; }
  return false;
}

KSCOPE_DECL void json_parser::enter(std::size_t depth) const {
  if (depth > limits_.max_depth)
    throw json_limit_error(pos_, "nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
}

KSCOPE_DECL void json_parser::finish() {
  skip_whitespace();
  if (pos_ != text_.size()) fail("trailing characters after the JSON value");
}

KSCOPE_DECL void json_parser::count_value() {
  if (++values_ > max_values_)
    throw json_limit_error(pos_, "more than " + std::to_string(max_values_) + " values (the JSON reader's limit)");
}

KSCOPE_DECL bool json_parser::consume_literal(std::string_view word) noexcept {
  if (text_.substr(pos_, word.size()) != word) return false;
  pos_ += word.size();
  return true;
}

KSCOPE_DECL void json_parser::parse_value(json_value& out, std::size_t depth) {
  skip_whitespace();
  if (pos_ >= text_.size()) fail("unexpected end of input, expected a value");
  count_value();
  switch (text_[pos_]) {
    case '{': parse_object(out, depth + 1); return;
    case '[': parse_array(out, depth + 1); return;
    case '"':
      out.type = json_type::string;
      scan_string(&out.string);
      return;
    default: parse_scalar(out); return;
  }
}

KSCOPE_DECL void json_parser::parse_scalar(json_value& out) {
  const char c = text_[pos_];
  switch (c) {
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

KSCOPE_DECL std::string json_parser::printable(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", u);
  return buf;
}

KSCOPE_DECL void json_parser::parse_array(json_value& out, std::size_t depth) {
  enter(depth);
  out.type = json_type::array;
  ++pos_;  // '['
  if (consume_close(']')) return;
  const std::size_t base = item_stack_.size();
  while (true) {
    json_value item;
    parse_value(item, depth);
    item_stack_.push_back(std::move(item));
    if (!after_element(']')) break;
  }
  out.items = json_list<json_value>::moved_from(item_stack_.data() + base, item_stack_.size() - base);
  item_stack_.resize(base);
}

KSCOPE_DECL void json_parser::parse_object(json_value& out, std::size_t depth) {
  enter(depth);
  out.type = json_type::object;
  ++pos_;  // '{'
  if (consume_close('}')) return;
  const std::size_t base = member_stack_.size();
  while (true) {
    skip_whitespace();
    std::pair<std::string, json_value> member;
    expect_key(&member.first);
    parse_value(member.second, depth);
    member_stack_.push_back(std::move(member));
    if (!after_element('}')) break;
  }
  out.members = json_list<std::pair<std::string, json_value>>::moved_from(member_stack_.data() + base,
                                                                         member_stack_.size() - base);
  member_stack_.resize(base);
}

KSCOPE_DECL unsigned json_parser::read_hex4() {
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

KSCOPE_DECL void json_parser::scan_string(std::string* out) {
  ++pos_;  // opening quote
  while (true) {
    // Runs of plain characters are copied at once: most strings have no escape.
    const std::size_t run = pos_;
    while (pos_ < text_.size()) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"' || c == '\\' || c < 0x20) break;
      ++pos_;
    }
    if (out && pos_ > run) out->append(text_.data() + run, pos_ - run);
    if (pos_ >= text_.size()) fail("unterminated string");
    const char c = text_[pos_];
    if (c == '"') { ++pos_; return; }
    if (c != '\\') fail("unescaped control character in a string");
    ++pos_;
    if (pos_ >= text_.size()) fail("unterminated escape in a string");
    const char e = text_[pos_++];
    char plain = 0;
    switch (e) {
      case '"': plain = '"'; break;
      case '\\': plain = '\\'; break;
      case '/': plain = '/'; break;
      case 'b': plain = '\b'; break;
      case 'f': plain = '\f'; break;
      case 'n': plain = '\n'; break;
      case 'r': plain = '\r'; break;
      case 't': plain = '\t'; break;
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
        if (out) append_utf8(*out, static_cast<char32_t>(cp));  // text_escape.hpp
        continue;
      }
      default: --pos_; fail(std::string("invalid escape '\\") + printable(e) + "'");
    }
    if (out) *out += plain;
  }
}

KSCOPE_DECL void json_parser::parse_number(json_value& out) {
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
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Parses one JSON document into a tree. Never throws for bad input: the result carries
// the error, also for a document over `limits` (std::bad_alloc may still propagate).
//
//   auto r = kscope::detail::parse_json(text);
//   if (!r.ok()) report(r.error);
[[nodiscard]] KSCOPE_DECL json_parse_result parse_json(std::string_view text, const json_limits& limits);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL json_parse_result parse_json(std::string_view text, const json_limits& limits) {
  json_parse_result result;
  try {
    json_parser parser(text, limits);
    parser.read_tree(result.value, 0, limits.max_values);
    parser.finish();
  } catch (const json_syntax_error& e) {
    result.value = json_value{};
    result.offset = e.offset();
    result.error = e.what();
  }
  return result;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS
[[nodiscard]] KSCOPE_DECL json_parse_result parse_json(std::string_view text,
                                                  std::size_t max_depth = json_limits::default_max_depth);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL json_parse_result parse_json(std::string_view text,
                                                  std::size_t max_depth) {
  json_limits limits;
  limits.max_depth = max_depth;
  return parse_json(text, limits);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A pull reader: walks a document's objects and arrays in order, skipping what the
// caller does not ask for (nothing is built for it) and reading the parts it asks for as
// trees. Throws json_syntax_error (json_limit_error past a limit; the same limits as
// parse_json), so use it inside one try block.
//
//   json_cursor c(text);
//   c.begin_object();
//   std::string key;
//   while (c.next_member(key)) {
//     if (key == "scopes") { c.begin_array(); while (c.next_item()) { json_value s; c.read_value(s); ... } }
//     else c.skip_value();
//   }
//   c.finish();
class json_cursor {
 public:
  explicit json_cursor(std::string_view text, const json_limits& limits = {});

  // The type of the next value (without consuming it).
  [[nodiscard]] json_type peek();
  // Enters the object that comes next; then call next_member until it returns false.
  void begin_object();
  // Enters the array that comes next; then call next_item until it returns false.
  void begin_array();
  // In an object: true with the next member's key (then read, skip or enter its value
  // before the next call), false after the closing '}'.
  bool next_member(std::string& key);
  // In an array: true when another element follows (read, skip or enter it before the
  // next call), false after the closing ']'.
  bool next_item() { return next(']'); }
  // Reads the next value whole; at most `max_values` values in it.
  void read_value(json_value& out, std::size_t max_values);
  void read_value(json_value& out);
  void skip_value() { parser_.skip(open_.size()); }
  // After the top-level value: only whitespace may follow.
  void finish() { parser_.finish(); }
  [[noreturn]] void fail(const std::string& message) const { parser_.fail(message); }
  [[nodiscard]] std::size_t offset() const noexcept { return parser_.offset(); }

 private:
  struct open_container {
    char close;
    bool first;
  };
  void open(char bracket, const char* what);
  bool next(char close);

  json_parser parser_;
  json_limits limits_;
  std::vector<open_container> open_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void json_cursor::begin_object() { open('{', "expected an object"); }

KSCOPE_DECL void json_cursor::begin_array() { open('[', "expected an array"); }

KSCOPE_DECL void json_cursor::read_value(json_value& out) { read_value(out, limits_.max_values); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL json_cursor::json_cursor(std::string_view text, const json_limits& limits) : parser_(text, limits), limits_(limits) {}

KSCOPE_DECL json_type json_cursor::peek() {
  switch (parser_.peek_char()) {
    case '{': return json_type::object;
    case '[': return json_type::array;
    case '"': return json_type::string;
    case 't':
    case 'f': return json_type::boolean;
    case 'n': return json_type::null;
    default: return json_type::number;  // or bad input, which the read reports
  }
}

KSCOPE_DECL bool json_cursor::next_member(std::string& key) {
  if (!next('}')) return false;
  parser_.skip_whitespace();
  parser_.expect_key(&key);
  return true;
}

KSCOPE_DECL void json_cursor::read_value(json_value& out, std::size_t max_values) {
  out = json_value{};
  parser_.read_tree(out, open_.size(), max_values);
}

KSCOPE_DECL void json_cursor::open(char bracket, const char* what) {
  if (parser_.peek_char() != bracket) parser_.fail(what);
  parser_.enter(open_.size() + 1);
  parser_.expect_char(bracket, what);
  open_.push_back(open_container{bracket == '{' ? '}' : ']', true});
}

KSCOPE_DECL bool json_cursor::next(char close) {
  if (open_.empty() || open_.back().close != close) parser_.fail("json_cursor: not inside that kind of container");
  open_container& top = open_.back();
  const bool more = top.first ? !parser_.consume_close(close) : parser_.after_element(close);
  top.first = false;
  if (!more) open_.pop_back();
  return more;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
