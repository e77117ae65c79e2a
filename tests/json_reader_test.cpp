// Tests for kscope/core/detail/json_reader.hpp: strict RFC 8259 parsing, checked against
// nlohmann-json where both accept, and against hand-written expectations where ours must
// reject (depth limit, trailing garbage, lone surrogates); the range-checked integer
// decoding, the resource limits, the compact tree and the pull cursor; a parsed value
// written back (write_json_value, both number styles); the locale-free number routines
// (number_format.hpp) it and the writer use, against printf/strtod; the checked sums and
// roundings of numbers read from files (checked_math.hpp) at int64's edges.
#include <kscope/core/detail/checked_math.hpp>
#include <kscope/core/detail/json_reader.hpp>
#include <kscope/core/detail/json_writer.hpp>
#include <kscope/core/detail/number_format.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace json_reader_test {  // one per file: the unit tests build as one program

using kscope::detail::json_cursor;
using kscope::detail::json_field_error;
using kscope::detail::json_integer;
using kscope::detail::json_limits;
using kscope::detail::json_syntax_error;
using kscope::detail::json_type;
using kscope::detail::json_value;
using kscope::detail::parse_json;

namespace {

json_value number(double v) {
  json_value j;
  j.type = json_type::number;
  j.number = v;
  return j;
}

// The message json_integer throws for `v`, "" when it accepts it.
template <class Integer>
std::string integer_error(const json_value& v, Integer lo, Integer hi) {
  try {
    (void)json_integer<Integer>(v, "depth", lo, hi);
    return "";
  } catch (const json_field_error& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("json_reader: scalars, arrays, objects, lookups") {
  auto r = parse_json(R"( {"a": [1, 2.5, "x", true, false, null], "b": {"c": -0.0}, "e": {}, "f": []} )");
  REQUIRE(r.ok());
  const auto& doc = r.value;
  CHECK(doc.is_object());
  const auto* a = doc.find("a");
  REQUIRE(a != nullptr);
  REQUIRE(a->items.size() == 6);
  CHECK(a->at(0).number == 1);
  CHECK(a->at(1).number == 2.5);
  CHECK(a->at(2).string == "x");
  CHECK(a->at(3).boolean);
  CHECK(a->at(4).is_bool());
  CHECK(a->at(5).is_null());
  CHECK(a->at(99).is_null());
  CHECK(doc.find("b")->member_number("c", 7) == 0.0);
  CHECK(doc.find("e")->members.empty());
  CHECK(doc.find("f")->items.empty());
  CHECK(doc.find("zzz") == nullptr);
  CHECK(doc.member_number("a", 42) == 42);  // wrong type -> fallback
  CHECK(doc.member_string("missing", "dflt") == "dflt");
  CHECK(parse_json("7").value.number == 7);
  CHECK(parse_json("\"s\"").value.string == "s");
}

TEST_CASE("json_reader: string escapes and \\u, including surrogate pairs") {
  auto r = parse_json(R"(["\"\\\/\b\f\n\r\t", "\u0041\u00e9\u20ac", "\ud83d\ude00", "\u0000x"])");
  REQUIRE(r.ok());
  CHECK(r.value.at(0).string == "\"\\/\b\f\n\r\t");
  CHECK(r.value.at(1).string == "A\xC3\xA9\xE2\x82\xAC");  // A é €
  CHECK(r.value.at(2).string == "\xF0\x9F\x98\x80");       // U+1F600
  CHECK(r.value.at(3).string == std::string("\0x", 2));
  // Same bytes as nlohmann produces.
  const auto ref = nlohmann::json::parse(R"(["\"\\\/\b\f\n\r\t", "\u0041\u00e9\u20ac", "\ud83d\ude00"])");
  for (int i = 0; i < 3; ++i) CHECK(r.value.at(i).string == ref[i].get<std::string>());

  CHECK_FALSE(parse_json(R"("\ud83d")").ok());         // high surrogate alone
  CHECK_FALSE(parse_json(R"("\ude00")").ok());         // low surrogate alone
  CHECK_FALSE(parse_json(R"("\ud83d\u0041")").ok());   // high + non-low
  CHECK_FALSE(parse_json(R"("\u12G4")").ok());
  CHECK_FALSE(parse_json(R"("\u12")").ok());
  CHECK_FALSE(parse_json(R"("\x")").ok());
  CHECK_FALSE(parse_json("\"a\nb\"").ok());           // raw control character
  CHECK_FALSE(parse_json("\"abc").ok());
}

TEST_CASE("json_reader: numbers, strictly") {
  const char* good[] = {"0", "-0", "1", "-12", "3.25", "1e3", "1E+3", "2.5e-3", "123456789012345678",
                        "1.7976931348623157e308", "5e-324"};
  for (const char* text : good) {
    CAPTURE(text);
    auto r = parse_json(text);
    REQUIRE(r.ok());
    CHECK(r.value.number == nlohmann::json::parse(text).get<double>());
  }
  const char* bad[] = {"01", "+1", ".5", "1.", "1e", "1e+", "-", "--1", "NaN", "Infinity", "-Infinity",
                       "0x10", "1e400", "-1e400", "1.5.2"};
  for (const char* text : bad) {
    CAPTURE(text);
    CHECK_FALSE(parse_json(text).ok());
  }
}

TEST_CASE("json_reader: structure errors carry an offset; nesting depth is capped") {
  auto r = parse_json(R"({"a": 1,})");
  CHECK_FALSE(r.ok());
  CHECK(r.offset == 8);
  CHECK(r.error.find("offset 8") == 0);
  CHECK(r.value.is_null());  // a failed parse leaves no half-built value
  CHECK_FALSE(parse_json("[1, 2,]").ok());
  CHECK_FALSE(parse_json("[1 2]").ok());
  CHECK_FALSE(parse_json(R"({"a" 1})").ok());
  CHECK_FALSE(parse_json(R"({a: 1})").ok());
  CHECK_FALSE(parse_json("{'a': 1}").ok());
  CHECK_FALSE(parse_json("[1, 2] // comment").ok());
  CHECK_FALSE(parse_json("").ok());
  CHECK_FALSE(parse_json("   ").ok());
  CHECK_FALSE(parse_json("tru").ok());
  CHECK_FALSE(parse_json("nul").ok());
  CHECK_FALSE(parse_json("[").ok());
  CHECK_FALSE(parse_json("{").ok());

  auto garbage = parse_json("{} x");
  CHECK_FALSE(garbage.ok());
  CHECK(garbage.error.find("trailing") != std::string::npos);
  CHECK(parse_json(" \t\r\n{}\n ").ok());
  CHECK_FALSE(parse_json("{}{}").ok());

  // Depth: 64 levels pass by default, 65 fail; a 100 000-deep document fails cleanly
  // (no stack overflow).
  CHECK(parse_json(std::string(64, '[') + std::string(64, ']')).ok());
  auto deep = parse_json(std::string(65, '[') + std::string(65, ']'));
  CHECK_FALSE(deep.ok());
  CHECK(deep.error.find("nesting") != std::string::npos);
  CHECK_FALSE(parse_json(std::string(100000, '[')).ok());
  CHECK(parse_json("[[[1]]]", 3).ok());
  CHECK_FALSE(parse_json("[[[1]]]", 2).ok());
}

TEST_CASE("json_reader: duplicate keys are kept, find returns the first") {
  auto r = parse_json(R"({"k": 1, "k": 2})");
  REQUIRE(r.ok());
  CHECK(r.value.members.size() == 2);
  CHECK(r.value.find("k")->number == 1);
}

TEST_CASE("json_reader: a number too small for a double reads as (signed) zero, as strtod gave") {
  // std::from_chars reports these as out of range; the reader keeps strtod's answer, and
  // still rejects a number too large (above: "1e400").
  auto tiny = parse_json("[1e-400, -1e-400, 2e-324, 0.0000e-999]");
  REQUIRE_MESSAGE(tiny.ok(), tiny.error);
  CHECK(tiny.value.at(0).number == 0);
  CHECK_FALSE(std::signbit(tiny.value.at(0).number));
  CHECK(tiny.value.at(1).number == 0);
  CHECK(std::signbit(tiny.value.at(1).number));
  CHECK(tiny.value.at(2).number == 0);  // under half the smallest subnormal: rounds to 0
  CHECK(tiny.value.at(3).number == 0);
  auto large = parse_json("[1e308, 17976931348623157e292]");
  REQUIRE(large.ok());
  CHECK(large.value.at(1).number == 1.7976931348623157e308);
  auto huge = parse_json("[1, 17976931348623159e292]");
  CHECK_FALSE(huge.ok());
  CHECK(huge.error.find("number out of range") != std::string::npos);
}

TEST_CASE("number_format: the writer's and reader's number routines agree with printf/strtod in the C locale") {
  // locale_test.cpp checks the same routines under a comma-decimal locale.
  using kscope::detail::format_fixed;
  using kscope::detail::format_general;
  using kscope::detail::format_round_trip;
  using kscope::detail::parse_double;
  const double values[] = {0.0, -0.0, 1.0, -2.5, 3135.918, 0.1, 1e-7, 123456.789, 1e21, 4.9e-324, 1.7976931348623157e308};
  for (double v : values) {
    CAPTURE(v);
    char buf[400];
    for (int decimals : {0, 1, 2, 3}) {
      std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
      CHECK(format_fixed(v, decimals) == buf);
    }
    for (int digits : {1, 3, 6, 15, 17}) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, v);
      CHECK(format_general(v, digits) == buf);
    }
    double back = 0;
    REQUIRE(parse_double(format_round_trip(v), back));
    CHECK(back == v);
    CHECK(std::signbit(back) == std::signbit(v));
  }
  CHECK(format_fixed(std::nan(""), 2) == "nan");
  CHECK(format_fixed(-HUGE_VAL, 1) == "-inf");
  double v = 7;
  CHECK_FALSE(parse_double("", v));
  CHECK_FALSE(parse_double(" 1", v));
  CHECK_FALSE(parse_double("1 ", v));
  CHECK_FALSE(parse_double("0x10", v));
  CHECK_FALSE(parse_double("inf", v));
  CHECK_FALSE(parse_double("1e", v));
  CHECK_FALSE(parse_double(".", v));
  CHECK(v == 7);  // untouched on failure
  CHECK(parse_double("+2.5e1", v));
  CHECK(v == 25);
  CHECK(parse_double(".5", v));  // strtod's grammar, wider than JSON's (the reader checks JSON's first)
  CHECK(v == 0.5);
}

TEST_CASE("json_integer: one range-checked conversion; out-of-range, fractional and non-numbers are clear errors") {
  // Each of these was a plain static_cast before: undefined behaviour, or a 1e9-deep
  // indentation that took gigabytes.
  CHECK(integer_error<std::size_t>(number(-5), 0, 4096) == "field \"depth\" must be an integer in [0, 4096], got -5");
  CHECK(integer_error<std::size_t>(number(1e9), 0, 4096) ==
        "field \"depth\" must be an integer in [0, 4096], got 1000000000");
  CHECK(integer_error<std::size_t>(number(1e300), 0, 4096).find("got 1e+300") != std::string::npos);
  CHECK(integer_error<std::size_t>(number(std::nan("")), 0, 4096).find("got nan") != std::string::npos);
  CHECK(integer_error<std::size_t>(number(HUGE_VAL), 0, 4096).find("got inf") != std::string::npos);
  CHECK(integer_error<int>(number(2.5), 0, 10).find("got 2.5") != std::string::npos);
  json_value text;
  text.type = json_type::string;
  text.string = "5";
  CHECK(integer_error<int>(text, 0, 10).find("got a string") != std::string::npos);
  CHECK(integer_error<int>(json_value{}, 0, 10).find("got null") != std::string::npos);
  CHECK(json_integer<std::size_t>(number(4096), "depth", 0, 4096) == 4096);
  CHECK(json_integer<std::size_t>(number(0), "depth", 0, 4096) == 0);
  CHECK(json_integer<int>(number(-0.0), "x", -1, 1) == 0);
  CHECK(json_integer<int>(number(-1), "x", -1, 1) == -1);

  // The type's own ends: 2^63 does not fit an int64 (the largest double below it does),
  // 2^64 does not fit a uint64; -2^63 fits exactly.
  constexpr auto i64_min = std::numeric_limits<std::int64_t>::min();
  constexpr auto i64_max = std::numeric_limits<std::int64_t>::max();
  constexpr auto u64_max = std::numeric_limits<std::uint64_t>::max();
  CHECK_FALSE(integer_error<std::int64_t>(number(std::ldexp(1.0, 63)), i64_min, i64_max).empty());
  CHECK(json_integer<std::int64_t>(number(-std::ldexp(1.0, 63)), "x", i64_min, i64_max) == i64_min);
  CHECK(json_integer<std::int64_t>(number(std::nextafter(std::ldexp(1.0, 63), 0.0)), "x", i64_min, i64_max) ==
        i64_max - 1023);
  CHECK_FALSE(integer_error<std::uint64_t>(number(std::ldexp(1.0, 64)), 0, u64_max).empty());
  CHECK_FALSE(integer_error<std::uint64_t>(number(-1), 0, u64_max).empty());
  CHECK_FALSE(integer_error<std::int32_t>(number(2147483648.0), 0, 2147483647).empty());
  CHECK_FALSE(integer_error<std::uint32_t>(number(4294967296.0), 0, 4294967295u).empty());
  CHECK(json_integer<std::uint32_t>(number(4294967295.0), "x", 0, 4294967295u) == 4294967295u);

  // member_integer: absent or null is the fallback; a present value must be in range.
  auto doc = parse_json(R"({"depth": 3, "none": null, "bad": -1})");
  REQUIRE(doc.ok());
  CHECK(doc.value.member_integer<int>("depth", 0, 10, 1) == 3);
  CHECK(doc.value.member_integer<int>("absent", 0, 10, 1) == 1);
  CHECK(doc.value.member_integer<int>("none", 0, 10, 7) == 7);
  CHECK_THROWS_WITH_AS((void)doc.value.member_integer<int>("bad", 0, 10, 1),
                       "field \"bad\" must be an integer in [0, 10], got -1", json_field_error);
}

TEST_CASE("json_reader: input size, nesting and value-count limits, each with a clear error") {
  json_limits small;
  small.max_input_bytes = 10;
  CHECK(parse_json("[1,2,3,45]", small).ok());  // exactly 10 bytes
  auto big = parse_json("[1,2,3,456]", small);
  CHECK_FALSE(big.ok());
  CHECK(big.error == "offset 0: the document is 11 bytes, over the limit of 10 bytes");
  CHECK(json_limits{}.max_input_bytes == std::size_t{256} << 20);

  json_limits few;
  few.max_values = 4;
  CHECK(parse_json("[1,2,3]", few).ok());  // the array and its three numbers
  auto many = parse_json("[1,2,3,4]", few);
  CHECK_FALSE(many.ok());
  CHECK(many.error.find("more than 4 values") != std::string::npos);

  json_limits shallow;
  shallow.max_depth = 2;
  CHECK(parse_json("[[1]]", shallow).ok());
  CHECK(parse_json("[[[1]]]", shallow).error.find("nesting deeper than 2 levels") != std::string::npos);
}

TEST_CASE("json_reader: the tree is compact and exactly sized, and copies deeply") {
  // 64 bytes a value (96 with std::vector members): a tree of small numbers is what made
  // a 20 MB document need 1.6 GB.
  CHECK(sizeof(json_value) <= 64);
  auto r = parse_json(R"({"a": [1, [2, 3], {"b": "text"}], "c": "d"})");
  REQUIRE(r.ok());
  json_value copy = r.value;
  r.value = json_value{};
  REQUIRE(copy.find("a") != nullptr);
  CHECK(copy.find("a")->items.size() == 3);
  CHECK(copy.find("a")->at(1).at(1).number == 3);
  CHECK(copy.find("a")->at(2).member_string("b") == "text");
  CHECK(copy.members.back().first == "c");
  json_value moved = std::move(copy);
  CHECK(moved.find("c")->string == "d");
  CHECK(copy.members.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
}

TEST_CASE("json_cursor: walks a document, skips what it is not asked for, reads parts as trees") {
  const std::string text =
      R"({"schema": "x", "skip": {"deep": [1, [2, {"k": "v\u00e9"}], true, null]}, "list": [{"n": 1}, {"n": 2}], "last": 5})";
  json_cursor c(text);
  REQUIRE(c.peek() == json_type::object);
  c.begin_object();
  std::string key;
  std::vector<std::string> keys;
  std::vector<double> ns;
  while (c.next_member(key)) {
    keys.push_back(key);
    if (key == "list") {
      c.begin_array();
      while (c.next_item()) {
        json_value item;
        c.read_value(item);
        ns.push_back(item.member_number("n", -1));
      }
    } else if (key == "schema") {
      json_value v;
      c.read_value(v);
      CHECK(v.string == "x");
    } else {
      c.skip_value();
    }
  }
  c.finish();
  CHECK(keys == std::vector<std::string>{"schema", "skip", "list", "last"});
  CHECK(ns == std::vector<double>{1, 2});

  // Skipping validates: a syntax error inside a skipped value is still an error, with its
  // offset; so are trailing garbage, and nesting past the limit inside a skipped value.
  const auto walk_skipping = [](const std::string& doc) -> std::string {
    try {
      json_cursor cursor(doc);
      cursor.skip_value();
      cursor.finish();
      return "";
    } catch (const json_syntax_error& e) {
      return e.what();
    }
  };
  CHECK(walk_skipping(R"({"a": [1, 2,]})") == "offset 12: unexpected character ']'");
  CHECK(walk_skipping(R"({"a": "\x"})").find("invalid escape") != std::string::npos);
  CHECK(walk_skipping("{} x").find("trailing") != std::string::npos);
  CHECK(walk_skipping(std::string(100000, '[') + std::string(100000, ']')).find("nesting deeper than 64") !=
        std::string::npos);
  CHECK(walk_skipping(R"({"a": [1, {"b": null}], "c": "\ud83d\ude00"})").empty());

  // read_value's value budget is per call.
  json_cursor limited(R"([[1, 2, 3], [4]])");
  limited.begin_array();
  REQUIRE(limited.next_item());
  json_value part;
  CHECK_THROWS_AS(limited.read_value(part, 3), json_syntax_error);
}

TEST_CASE("write_json_value: a parsed value written back, whole numbers as doubles or as integers") {
  using kscope::detail::json_whole_numbers;
  const auto parsed = parse_json(
      R"({"pid": 1000, "big": 1e15, "edge": 9007199254740991, "past": 9007199254740992, "half": 2.5,)"
      R"( "neg": -3, "zero": -0, "s": "x\u0001", "list": [1e3, null, true, {"id": 12345678901}]})");
  REQUIRE(parsed.ok());
  const auto written = [&](json_whole_numbers whole) {
    std::string out;
    kscope::detail::json_writer w(out);
    kscope::detail::write_json_value(w, parsed.value, whole);
    return out;
  };
  // As doubles (the report merge): 15 or 17 significant digits, as the writer gives doubles.
  CHECK(written(json_whole_numbers::as_double) ==
        R"({"pid":1000,"big":1e+15,"edge":9007199254740991,"past":9007199254740992,"half":2.5,)"
        R"("neg":-3,"zero":-0,"s":"x\u0001","list":[1000,null,true,{"id":12345678901}]})");
  // As integers (the trace merge): whole numbers below 2^53 exactly, the rest as doubles.
  CHECK(written(json_whole_numbers::as_integer) ==
        R"({"pid":1000,"big":1000000000000000,"edge":9007199254740991,"past":9007199254740992,"half":2.5,)"
        R"("neg":-3,"zero":0,"s":"x\u0001","list":[1000,null,true,{"id":12345678901}]})");
  // The default is as doubles.
  std::string out;
  kscope::detail::json_writer w(out);
  kscope::detail::write_json_value(w, parsed.value);
  CHECK(out == written(json_whole_numbers::as_double));
}

TEST_CASE("checked_math: sums and roundings of numbers from files at int64's edges") {
  using kscope::detail::checked_add;
  using kscope::detail::checked_sub;
  using kscope::detail::rounded_int64;
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t min = std::numeric_limits<std::int64_t>::min();
  CHECK(checked_add(2, 3) == std::optional<std::int64_t>(5));
  CHECK(checked_add(max, 0) == std::optional<std::int64_t>(max));
  CHECK(checked_add(max, 1) == std::nullopt);
  CHECK(checked_add(min, -1) == std::nullopt);
  CHECK(checked_add(min, max) == std::optional<std::int64_t>(-1));
  CHECK(checked_sub(0, min) == std::nullopt);
  CHECK(checked_sub(-1, min) == std::optional<std::int64_t>(max));
  CHECK(checked_sub(max, -1) == std::nullopt);
  CHECK(checked_sub(min, 1) == std::nullopt);
  // Every pair within max_input_time_ns adds and subtracts without overflow.
  constexpr std::int64_t edge = kscope::detail::max_input_time_ns - 1;
  CHECK(checked_add(edge, edge).has_value());
  CHECK(checked_sub(-edge, edge).has_value());

  CHECK(rounded_int64(2.5, 1e18) == std::optional<std::int64_t>(3));  // halves away from zero, as llround
  CHECK(rounded_int64(-2.5, 1e18) == std::optional<std::int64_t>(-3));
  CHECK(rounded_int64(1e18, 1e18) == std::nullopt);  // the bound is exclusive
  CHECK(rounded_int64(9.2e18, 1e300) == std::optional<std::int64_t>(9200000000000000000));
  CHECK(rounded_int64(9223372036854775808.0, 1e300) == std::nullopt);   // 2^63
  CHECK(rounded_int64(-9223372036854775808.0, 1e300) == std::nullopt);  // -2^63: int64 holds it, kept out anyway
  CHECK(rounded_int64(1e300, 1e301) == std::nullopt);
  CHECK(rounded_int64(std::numeric_limits<double>::quiet_NaN(), 1e300) == std::nullopt);
  CHECK(rounded_int64(std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()) ==
        std::nullopt);
}

}  // namespace json_reader_test
