// kscope/core/detail/env_switch.hpp — the one reading of an on/off environment variable
// (KSCOPE, KSCOPE_CUPTI, KSCOPE_GBENCH_ALLOW_SKIP).
//
// People write KSCOPE=OFF, KSCOPE=False, KSCOPE=no or KSCOPE=" 0" and mean "off"; a parser
// that knows only "0" silently leaves profiling on. So the value is trimmed of blanks and
// compared without regard to case, and a value that is neither on nor off is reported as
// such, never guessed: the caller decides what it means and says so (docs/reference.md,
// "Configuration", lists the values):
//
//   off          0, off, false, no, disable, disabled
//   on           1, on, true, yes, enable, enabled
//   unset        the variable is not set, or is empty or blank: the caller's default
//   unrecognised anything else ("maybe", "2", "of")
//
// Included by scope/detail/switches.hpp, hence by every instrumented file: C string
// functions only, no <string>, no locale (the case folding is ASCII, so a Turkish locale
// cannot turn "I" into a dotless i).
//
//   switch (kscope::detail::parse_switch(std::getenv("KSCOPE_CUPTI"))) { ... }
#pragma once

#include "../config.hpp"

#include <cstddef>
#include <cstring>

namespace kscope {
namespace detail {

enum class switch_value { unset, off, on, unrecognised };

// What an environment value says (nullptr: the variable is not set).
[[nodiscard]] KSCOPE_DECL switch_value parse_switch(const char* text) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL switch_value parse_switch(const char* text) noexcept {
  if (text == nullptr) return switch_value::unset;
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  const char* begin = text;
  while (blank(*begin)) ++begin;
  const char* end = begin + std::strlen(begin);
  while (end > begin && blank(end[-1])) --end;
  if (begin == end) return switch_value::unset;
  // The longest accepted word is "disabled"; anything longer is not one of them.
  char word[9];
  const std::size_t length = static_cast<std::size_t>(end - begin);
  if (length >= sizeof word) return switch_value::unrecognised;
  for (std::size_t i = 0; i < length; ++i) {
    const char c = begin[i];
    word[i] = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  word[length] = '\0';
  static const char* const off_words[] = {"0", "off", "false", "no", "disable", "disabled"};
  static const char* const on_words[] = {"1", "on", "true", "yes", "enable", "enabled"};
  for (const char* w : off_words)
    if (std::strcmp(word, w) == 0) return switch_value::off;
  for (const char* w : on_words)
    if (std::strcmp(word, w) == 0) return switch_value::on;
  return switch_value::unrecognised;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Whether an environment value is `word` (lower case), trimmed and in any case: the
// switches that take a word besides on/off (KSCOPE_COUNTERS=kernel).
[[nodiscard]] KSCOPE_DECL bool equals_word(const char* text, const char* word) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool equals_word(const char* text, const char* word) noexcept {
  if (text == nullptr) return false;
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (blank(*text)) ++text;
  std::size_t i = 0;
  for (; word[i] != '\0'; ++i) {
    const char c = text[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != word[i]) return false;
  }
  for (const char* rest = text + i; *rest != '\0'; ++rest)
    if (!blank(*rest)) return false;
  return true;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The accepted values, for a message about one that was not.
inline constexpr const char* accepted_switch_values =
    "off: 0, off, false, no, disable(d); on: 1, on, true, yes, enable(d); any case, blanks ignored";

}  // namespace detail
}  // namespace kscope
