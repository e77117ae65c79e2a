// Tests for kscope/core/detail/json_reader.hpp: strict RFC 8259 parsing, checked against
// nlohmann-json where both accept, and against hand-written expectations where ours must
// reject (depth limit, trailing garbage, lone surrogates).
#include <kscope/core/detail/json_reader.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

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
