// The pure parts of kscope's NVTX support (scope/nvtx.hpp, scope/detail/nvtx.hpp): which
// names can name a domain, who decides the domain, the payload's layout and its message
// fallback. What a tool receives is checked end to end by tests/process/nvtx_tool_test.cpp;
// this file never creates the domain or sets it, so it runs in one process with the others.
#include <kscope/scope/detail/switch_warnings.hpp>
#include <kscope/scope/scope.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

namespace nvtx_test {  // one per file: the unit tests build as one program

namespace {

kscope::detail::nvtx_name_problem check(std::string_view raw, std::string_view* trimmed_out = nullptr) {
  std::string_view trimmed;
  const kscope::detail::nvtx_name_problem p = kscope::detail::check_nvtx_domain_name(raw, trimmed);
  if (trimmed_out) *trimmed_out = trimmed;
  return p;
}

const double undeclared = std::numeric_limits<double>::quiet_NaN();  // as a scope before set_work

}  // namespace

TEST_CASE("nvtx: which names can name a domain") {
  using kscope::detail::nvtx_name_problem;
  std::string_view trimmed;
  CHECK(check("myengine", &trimmed) == nvtx_name_problem::none);
  CHECK(trimmed == "myengine");
  CHECK(check(" \tmy engine\n", &trimmed) == nvtx_name_problem::none);  // inner blanks stay
  CHECK(trimmed == "my engine");
  CHECK(check("") == nvtx_name_problem::empty);
  CHECK(check(" \t\r\n") == nvtx_name_problem::empty);
  CHECK(check(std::string(128, 'a')) == nvtx_name_problem::none);
  CHECK(check(std::string(129, 'a')) == nvtx_name_problem::too_long);
  CHECK(check("  " + std::string(128, 'a') + "  ") == nvtx_name_problem::none);  // measured trimmed
  CHECK(check("a\x01" "b") == nvtx_name_problem::control_character);
  CHECK(check("a\x7f") == nvtx_name_problem::control_character);
  CHECK(check(std::string_view("a\0b", 3)) == nvtx_name_problem::control_character);
  CHECK(check("d\xC3\xA9j\xC3\xA0") == nvtx_name_problem::none);  // UTF-8 is a name like any other
  CHECK(std::string(kscope::detail::nvtx_name_problem_words(nvtx_name_problem::too_long)) == "it is longer than 128 bytes");
}

TEST_CASE("nvtx: the program's choice, then KSCOPE_NVTX_DOMAIN, then \"kscope\"") {
  using kscope::detail::decide_nvtx_domain;
  struct row {
    const char* program;
    const char* environment;
    const char* name;
    const char* warning;  // "" none; else a part of it
  };
  const row rows[] = {
      {nullptr, nullptr, "kscope", ""},
      {nullptr, "", "kscope", ""},           // empty: as if unset
      {nullptr, "   ", "kscope", ""},        // blank likewise
      {nullptr, " serve ", "serve", ""},     // trimmed
      {"mine", nullptr, "mine", ""},
      {"mine", "mine", "mine", ""},          // the same name twice: nothing to say
      {"mine", " mine ", "mine", ""},
      {"mine", "theirs", "mine", "KSCOPE_NVTX_DOMAIN=\"theirs\" not used: the program named the NVTX domain \"mine\""},
      {nullptr, "a\tb", "kscope", "KSCOPE_NVTX_DOMAIN=\"a\\x09b\" not used: it holds a control character; ranges use the NVTX domain \"kscope\""},
      {"mine", "a\tb", "mine", "not used: it holds a control character; ranges use the NVTX domain \"mine\""},
  };
  for (const row& r : rows) {
    const std::string program = r.program ? r.program : "(none)", environment = r.environment ? r.environment : "(unset)";
    CAPTURE(program);
    CAPTURE(environment);
    const kscope::detail::nvtx_domain_decision d = decide_nvtx_domain(r.program, r.environment);
    CAPTURE(d.warning);
    CHECK(d.name == r.name);
    if (*r.warning == '\0') CHECK(d.warning.empty());
    else CHECK(d.warning.find(r.warning) != std::string::npos);
  }
  // A long value is shown cut at 64 bytes, as every warning shows a value.
  const std::string long_value(300, 'x');
  const kscope::detail::nvtx_domain_decision d = decide_nvtx_domain(nullptr, long_value.c_str());
  CHECK(d.name == "kscope");
  CHECK(d.warning == "KSCOPE_NVTX_DOMAIN=\"" + std::string(64, 'x') +
                         "...\" not used: it is longer than 128 bytes; ranges use the NVTX domain \"kscope\"");
}

TEST_CASE("nvtx: a value's warning line shows it printable and cut") {
  CHECK(kscope::detail::shown_value("ok") == "ok");
  CHECK(kscope::detail::shown_value(std::string(70, 'y')) == std::string(64, 'y') + "...");
  CHECK(kscope::detail::shown_value("a\x1b[2Jb").find('\x1b') == std::string::npos);
  CHECK(kscope::detail::value_warning("VAR", "v", "it is odd", "nothing changes") ==
        "VAR=\"v\" not used: it is odd; nothing changes");
  // The switch wording is unchanged by sharing shown_value.
  CHECK(kscope::detail::switch_warning("KSCOPE", "maybe", "recording is on").rfind("KSCOPE=\"maybe\" not understood (", 0) == 0);
}

TEST_CASE("nvtx: the payload's layout and contents") {
  using kscope::detail::nvtx_scope_payload;
  // The registered schema gives these offsets and this size (scope/detail/nvtx.hpp).
  CHECK(offsetof(nvtx_scope_payload, flops) == 0);
  CHECK(offsetof(nvtx_scope_payload, bytes) == 8);
  CHECK(offsetof(nvtx_scope_payload, tags) == 16);
  CHECK(sizeof(nvtx_scope_payload) == 256);

  nvtx_scope_payload p;
  std::memset(&p, 0x55, sizeof p);
  kscope::detail::fill_nvtx_payload(p, 2.5e9, undeclared, "batch=8 dtype=bf16");
  CHECK(p.flops == 2.5e9);
  CHECK(std::isnan(p.bytes));
  CHECK(std::string(p.tags) == "batch=8 dtype=bf16");
  for (std::size_t i = std::strlen(p.tags); i < sizeof p.tags; ++i) CHECK(p.tags[i] == '\0');  // no stale bytes

  // Exactly full: no cut.
  kscope::detail::fill_nvtx_payload(p, undeclared, undeclared, std::string(239, 'a'));
  CHECK(std::string(p.tags) == std::string(239, 'a'));
  // One more: cut with "...", within the 240 bytes with its NUL.
  kscope::detail::fill_nvtx_payload(p, undeclared, undeclared, std::string(240, 'a'));
  CHECK(std::string(p.tags) == std::string(236, 'a') + "...");
  // Never inside a UTF-8 character: "é" (2 bytes) straddling the cut goes whole.
  const std::string accented = std::string(235, 'a') + "\xC3\xA9" + std::string(10, 'b');
  kscope::detail::fill_nvtx_payload(p, undeclared, undeclared, accented);
  CHECK(std::string(p.tags) == std::string(235, 'a') + "...");
}

TEST_CASE("nvtx: the message when the tool takes no payload") {
  using kscope::detail::nvtx_work_message;
  CHECK(nvtx_work_message("prefill", 2e9, 1e6, "batch=8") == "prefill flops=2e+09 bytes=1e+06 batch=8");
  CHECK(nvtx_work_message("prefill", 2e9, 1e6, "") == "prefill flops=2e+09 bytes=1e+06");
  CHECK(nvtx_work_message("decode", undeclared, undeclared, "k=v") == "decode k=v");
  CHECK(nvtx_work_message("x", 0.125, 3, "") == "x flops=0.125 bytes=3");
}

TEST_CASE("nvtx: this call's tags, bounded") {
  kscope::detail::nvtx_notes* notes = nullptr;
  kscope::detail::nvtx_note_tag(notes, "batch", "8");
  REQUIRE(notes != nullptr);
  kscope::detail::nvtx_note_tag(notes, "dtype", "bf16");
  CHECK(notes->tags == "batch=8 dtype=bf16");
  CHECK(notes->name.empty());
  // Past max_nvtx_tag_text_bytes a tag is dropped whole, never cut.
  kscope::detail::nvtx_note_tag(notes, "big", std::string(kscope::detail::max_nvtx_tag_text_bytes, 'z'));
  CHECK(notes->tags == "batch=8 dtype=bf16");
  kscope::detail::nvtx_note_tag(notes, "last", "1");
  CHECK(notes->tags == "batch=8 dtype=bf16 last=1");
  delete notes;
}

TEST_CASE("nvtx: styles and colours") {
  constexpr kscope::nvtx_color green = kscope::nvtx_color::rgb(0x76B900);
  static_assert(green.value == 0xFF76B900u, "rgb is opaque");
  static_assert(kscope::nvtx_color::rgb(0xAB123456).value == 0xFF123456u, "rgb ignores bits above RGB");
  static_assert(kscope::nvtx_color::argb(0x80112233).value == 0x80112233u, "argb is as given");
  constexpr kscope::nvtx_category attention{3, "attention"};
  constexpr kscope::nvtx_style a{attention, green};
  constexpr kscope::nvtx_style b{green, attention};
  constexpr kscope::nvtx_style c{green};
  static_assert(a.category.id == 3 && a.color.value == green.value, "category, colour");
  static_assert(b.category.id == 3 && b.color.value == green.value, "colour, category");
  static_assert(c.category.id == 0 && c.color.value == green.value, "colour only");
  CHECK(std::string(a.category.name) == "attention");
}

}  // namespace nvtx_test
