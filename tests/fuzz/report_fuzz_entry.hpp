// The one entry point the fuzz target (report_fuzz.cpp, libFuzzer) and the deterministic
// mutation test (mutation_test.cpp, every compiler, in ctest) run every input through:
// what `kscope report` and `kscope merge` do with a file, plus the JSON reader alone.
//
// It checks what must hold for ANY input, not just that nothing crashes:
//   - the JSON reader and parse_report never throw; a failure carries a clear message
//     (an offset for JSON errors, one of parse_report's three kinds otherwise);
//   - a report that reads back prints (text, JSON), and the JSON it writes reads back
//     to the same scopes and writes the same JSON again: the writer never produces what
//     the reader refuses or reads differently;
//   - printing costs a bounded multiple of the input (no size taken from a number).
// A violated check calls kscope_fuzz_violation: it prints the reason and aborts, so that
// libFuzzer keeps the input, or calls kscope_fuzz_violation_handler when one is set (the
// mutation test's throws, to save the input and fail the case).
#pragma once

#include <kscope/core/detail/json_reader.hpp>
#include <kscope/report/merge.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

inline void (*kscope_fuzz_violation_handler)(const std::string& message) = nullptr;

[[noreturn]] inline void kscope_fuzz_violation(const char* what, const std::string& detail) {
  const std::string message = std::string("kscope fuzz: ") + what + ": " + detail;
  if (kscope_fuzz_violation_handler) kscope_fuzz_violation_handler(message);  // expected to throw
  std::fprintf(stderr, "%s\n", message.c_str());
  std::abort();
}

inline bool kscope_fuzz_starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix.data(), prefix.size()) == 0;
}

// Visits every value of a tree the way readers do: lookups, conversions, a deep copy.
inline std::size_t kscope_fuzz_walk(const kscope::detail::json_value& v, int depth = 0) {
  using kscope::detail::json_field_error;
  std::size_t seen = 1;
  try {
    (void)kscope::detail::json_integer<std::int64_t>(v, "x", INT64_MIN, INT64_MAX);
    (void)kscope::detail::json_integer<std::uint32_t>(v, "x", 0, 4096);
  } catch (const json_field_error& e) {
    if (!kscope_fuzz_starts_with(e.what(), "field \"x\" must be an integer in ["))
      kscope_fuzz_violation("unclear field error", e.what());
  }
  for (const auto& item : v.items) seen += kscope_fuzz_walk(item, depth + 1);
  for (const auto& member : v.members) {
    (void)v.find(member.first);
    seen += kscope_fuzz_walk(member.second, depth + 1);
  }
  if (depth == 0) {
    const kscope::detail::json_value copy = v;
    (void)copy.find("scopes");
  }
  return seen;
}

// Runs one input through every check; true when it read as a report.
inline bool kscope_fuzz_one_input(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // The JSON reader alone.
  const kscope::detail::json_parse_result parsed = kscope::detail::parse_json(text);
  if (parsed.ok()) {
    (void)kscope_fuzz_walk(parsed.value);
  } else if (!kscope_fuzz_starts_with(parsed.error, "offset " + std::to_string(parsed.offset) + ": ")) {
    kscope_fuzz_violation("JSON error without its offset", parsed.error);
  }

  // `kscope report`: read, print as text and JSON; the JSON must read back.
  std::string error;
  const std::optional<kscope::session_report> report = kscope::parse_report(text, &error);
  if (!report) {
    if (!kscope_fuzz_starts_with(error, "not valid JSON: offset ") &&
        !kscope_fuzz_starts_with(error, "not a kscope report: ") &&
        !kscope_fuzz_starts_with(error, "malformed kscope report: ") &&
        !kscope_fuzz_starts_with(error, "refused: offset "))
      kscope_fuzz_violation("unclear parse_report error", error);
    if (parsed.ok() && kscope_fuzz_starts_with(error, "not valid JSON"))
      kscope_fuzz_violation("parse_report calls valid JSON invalid", error);
  } else {
    if (!parsed.ok()) kscope_fuzz_violation("parse_report accepted what parse_json refused", parsed.error);
    const std::string printed = report->text();
    // A table row per scope and device, a line per warning: a few hundred bytes for each
    // few bytes of input at most, never a size read from a number.
    if (printed.size() > 256 * size + (std::size_t{1} << 20))
      kscope_fuzz_violation("text out of proportion", std::to_string(printed.size()) + " bytes of text for " +
                                                          std::to_string(size) + " bytes of input");
    // The JSON a report writes reads back, and reading and writing it again changes
    // nothing: the writer's output is a fixed point (the first write may normalize, e.g.
    // invalid UTF-8 in a name becomes U+FFFD).
    const std::string written = report->json();
    std::string again_error;
    const std::optional<kscope::session_report> again = kscope::parse_report(written, &again_error);
    if (!again) kscope_fuzz_violation("a report's own JSON does not read back", again_error);
    if (again->scopes.size() != report->scopes.size())
      kscope_fuzz_violation("the JSON round trip changed the scopes", std::to_string(again->scopes.size()));
    for (std::size_t i = 0; i < report->scopes.size(); ++i)
      if (again->scopes[i].depth != report->scopes[i].depth || again->scopes[i].calls != report->scopes[i].calls)
        kscope_fuzz_violation("the JSON round trip changed a scope", again->scopes[i].path);
    if (again->json() != written) kscope_fuzz_violation("writing a report read back changed its JSON", written);
  }

  // `kscope merge` of the input with itself (the second is a duplicate rank unless the
  // report names none).
  const std::string document(text);
  const kscope::merged_report merged = kscope::merge_reports({document, document});
  if (merged.merged_count() > 2) kscope_fuzz_violation("merged more inputs than given", "");
  for (const kscope::merge_input& in : merged.inputs)
    if (!in.error.empty() && !kscope_fuzz_starts_with(in.error, "input "))
      kscope_fuzz_violation("merge error without its input", in.error);
  const std::string merged_text = merged.text();
  const std::string merged_json = merged.json();
  if (!kscope::detail::parse_json(merged_json).ok()) kscope_fuzz_violation("merged JSON is not JSON", "");
  return report.has_value();
}
