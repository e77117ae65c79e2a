// kscope/core/detail/option_text.hpp — the reading of "key=value,key=value" option lists
// in the environment (KSCOPE_CUPTI_OPTIONS, KSCOPE_METRIC_SAMPLING_OPTIONS): the split into
// items, the switches and the whole numbers, shared so that every list reads alike. Each
// feature keeps its own keys and its own messages.
#pragma once

#include "../config.hpp"
#include "env_switch.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kscope {
namespace detail {

// "1", "on", "true", ... / "0", "off", ...: the one reading of a switch (env_switch.hpp).
KSCOPE_DECL bool parse_option_switch(std::string_view value, bool& out);

// A whole decimal number in [lo, hi].
KSCOPE_DECL bool parse_option_count(std::string_view value, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out);

KSCOPE_DECL std::string_view trim_option(std::string_view s);

// The one line that names an item not understood: "SOURCE: 'item' not understood (expected);
// that option keeps its value".
KSCOPE_DECL std::string option_refusal(std::string_view source, std::string_view item, std::string_view expected);

// Calls item(key, value, whole_item) for each comma-separated "key=value" of `text`, both
// trimmed; an item without '=' is given with an empty key (the caller names it as not
// understood). Empty items are skipped.
template <class Item>
void for_each_option(std::string_view text, Item&& item) {
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view whole = trim_option(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (whole.empty()) continue;
    const std::size_t eq = whole.find('=');
    if (eq == std::string_view::npos) {
      item(std::string_view(), whole, whole);
      continue;
    }
    item(trim_option(whole.substr(0, eq)), trim_option(whole.substr(eq + 1)), whole);
  }
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string option_refusal(std::string_view source, std::string_view item, std::string_view expected) {
  return std::string(source) + ": '" + std::string(item) + "' not understood (" + std::string(expected) +
         "); that option keeps its value";
}

KSCOPE_DECL bool parse_option_switch(std::string_view value, bool& out) {
  const std::string text(value);
  switch (parse_switch(text.c_str())) {
    case switch_value::on: out = true; return true;
    case switch_value::off: out = false; return true;
    default: return false;
  }
}

KSCOPE_DECL bool parse_option_count(std::string_view value, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
  if (value.empty() || value.size() > 19) return false;
  std::uint64_t v = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v < lo || v > hi) return false;
  out = v;
  return true;
}

KSCOPE_DECL std::string_view trim_option(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
