// Tests for kscope/core/detail/json_reader.hpp: strict RFC 8259 parsing, checked against
// nlohmann-json where both accept, and against hand-written expectations where ours must
// reject (depth limit, trailing garbage, lone surrogates); the locale-free number
// routines (number_format.hpp) it and the writer use, against printf/strtod.
#include <kscope/core/detail/json_reader.hpp>
#include <kscope/core/detail/number_format.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <string>

using kscope::detail::json_type;
using kscope::detail::parse_json;

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
