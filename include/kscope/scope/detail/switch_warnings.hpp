// kscope/scope/detail/switch_warnings.hpp — the report's line about an environment switch
// that held a value parse_switch() (core/detail/env_switch.hpp) did not understand, and
// about a setting's value that could not be used (KSCOPE_NVTX_DOMAIN: scope/detail/nvtx.hpp).
//
// Apart from switches.hpp because building a message needs <string> and the text
// escaping, and switches.hpp is in every instrumented file.
//
//   if (std::string w = kscope::detail::environment_warning(); !w.empty()) warn(w);
//   warn(kscope::detail::switch_warning("KSCOPE_CUPTI", v, "CUPTI not started"));
//   warn(kscope::detail::value_warning("KSCOPE_NVTX_DOMAIN", v, "it is empty", "ranges use ..."));
#pragma once

#include "../../core/detail/env_switch.hpp"
#include "../../core/detail/text_escape.hpp"
#include "switches.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

namespace kscope {
namespace detail {

// A value as a warning line shows it: printable (text_escape.hpp), cut at 64 bytes.
[[nodiscard]] KSCOPE_DECL std::string shown_value(std::string_view value);

// 'VAR="value" not understood (off: 0, off, ...; on: 1, on, ...); <consequence>': the one
// wording for such a value.
[[nodiscard]] KSCOPE_DECL std::string switch_warning(const char* variable, const char* value, const char* consequence);

// 'VAR="value" not used: <problem>; <consequence>': a value that is not an on/off switch and
// cannot be used as it is.
[[nodiscard]] KSCOPE_DECL std::string value_warning(const char* variable, const char* value, const std::string& problem,
                                                    const std::string& consequence);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string shown_value(std::string_view value) {
  std::string shown(value.substr(0, 64));
  if (value.size() > 64) shown += "...";
  return printable_name(shown);
}

KSCOPE_DECL std::string switch_warning(const char* variable, const char* value, const char* consequence) {
  return std::string(variable) + "=\"" + shown_value(value ? value : "") + "\" not understood (" + accepted_switch_values +
         "); " + consequence;
}

KSCOPE_DECL std::string value_warning(const char* variable, const char* value, const std::string& problem,
                                      const std::string& consequence) {
  return std::string(variable) + "=\"" + shown_value(value ? value : "") + "\" not used: " + problem + "; " + consequence;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The line for KSCOPE itself when the value it was read with was not understood ("" when
// it was). Reads the environment first if no scope has yet.
[[nodiscard]] KSCOPE_DECL std::string environment_warning();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string environment_warning() {
  (void)enabled();
  if (!kscope_value_unrecognised.load(std::memory_order_relaxed)) return {};
  return switch_warning("KSCOPE", std::getenv("KSCOPE"), "recording is on");
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
