// kscope/scope/detail/switch_warnings.hpp — the report's line about an environment switch
// that held a value parse_switch() (core/detail/env_switch.hpp) did not understand.
//
// Apart from switches.hpp because building a message needs <string> and the text
// escaping, and switches.hpp is in every instrumented file.
//
//   if (std::string w = kscope::detail::environment_warning(); !w.empty()) warn(w);
//   warn(kscope::detail::switch_warning("KSCOPE_CUPTI", v, "CUPTI not started"));
#pragma once

#include "../../core/detail/env_switch.hpp"
#include "../../core/detail/text_escape.hpp"
#include "switches.hpp"

#include <cstdlib>
#include <string>

namespace kscope {
namespace detail {

// 'VAR="value" not understood (off: 0, off, ...; on: 1, on, ...); <consequence>': the one
// wording for such a value. The value is shown printable (text_escape.hpp), cut at 64 bytes.
[[nodiscard]] KSCOPE_DECL std::string switch_warning(const char* variable, const char* value, const char* consequence);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string switch_warning(const char* variable, const char* value, const char* consequence) {
  std::string shown(value ? value : "");
  if (shown.size() > 64) shown = shown.substr(0, 64) + "...";
  return std::string(variable) + "=\"" + printable_name(shown) + "\" not understood (" + accepted_switch_values +
         "); " + consequence;
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
