// The one entry point the fuzz target (report_fuzz.cpp, libFuzzer) and the deterministic
// mutation test (mutation_test.cpp, every compiler, in ctest) run every input through:
// what `kscope report` (text, JSON, folded stacks) and `kscope merge` (of reports, and of
// traces: identify_document, merge_traces) do with a file, plus the JSON reader alone.
//
// It checks what must hold for ANY input, not just that nothing crashes:
//   - the JSON reader and parse_report never throw; a failure carries a clear message
//     (an offset for JSON errors, one of parse_report's three kinds otherwise);
//   - a report that reads back prints (text, JSON), and the JSON it writes reads back
//     to the same scopes and writes the same JSON again: the writer never produces what
//     the reader refuses or reads differently;
//   - printing costs a bounded multiple of the input (no size taken from a number);
//   - folded stacks: every line's value is positive, and they add up to total_ns (which
//     stops at INT64_MAX, with a note, rather than overflow);
//   - identify_document agrees with the JSON reader; merge_traces (the input with itself,
//     and with another host's trace by wall clock) names every error, counts every event,
//     keeps clock bases within 2^62 ns, and writes a trace that is JSON, is told to be a
//     trace and merges again.
// A violated check calls kscope_fuzz_violation: it prints the reason and aborts, so that
// libFuzzer keeps the input, or calls kscope_fuzz_violation_handler when one is set (the
// mutation test's throws, to save the input and fail the case).
#pragma once

#include <kscope/core/detail/checked_math.hpp>
#include <kscope/core/detail/json_reader.hpp>
#include <kscope/report/folded.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/report/trace_merge.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
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

// `kscope report --format folded-host|folded-gpu`: the lines add up to the total.
inline void kscope_fuzz_check_folded(const kscope::session_report& report, kscope::folded_time time) {
  const kscope::folded_stacks folded = kscope::fold_stacks(report, time);
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  std::int64_t sum = 0;
  std::size_t lines = 0;
  for (std::size_t at = 0; at < folded.text.size();) {
    const std::size_t end = folded.text.find('\n', at);
    if (end == std::string::npos) kscope_fuzz_violation("folded stacks: a line without its newline", folded.text);
    const std::size_t space = folded.text.rfind(' ', end);
    if (space == std::string::npos || space < at) kscope_fuzz_violation("folded stacks: a line without a value", "");
    const std::string value = folded.text.substr(space + 1, end - space - 1);
    if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != std::string::npos ||
        value == "0")
      kscope_fuzz_violation("folded stacks: a value that is not a positive integer", value);
    const std::int64_t v = std::stoll(value);
    sum = kscope::detail::checked_add(sum, v).value_or(most);
    ++lines;
    at = end + 1;
  }
  if (lines != folded.stacks) kscope_fuzz_violation("folded stacks: lines and stacks differ", std::to_string(lines));
  if (folded.total_ns != sum)
    kscope_fuzz_violation("folded stacks: the lines do not add up to total_ns",
                          std::to_string(sum) + " != " + std::to_string(folded.total_ns));
  // Two kinds of notes, ten each and a count, one for the total, one for no GPU time.
  if (folded.notes.size() > 24) kscope_fuzz_violation("folded stacks: notes out of bounds", "");
}

// One merge_traces result: errors named, events counted, clocks bounded, the trace a trace.
inline void kscope_fuzz_check_merged_trace(const kscope::merged_trace& m, std::size_t given, bool merge_again) {
  if (m.inputs.size() != given) kscope_fuzz_violation("merge_traces lost an input", std::to_string(m.inputs.size()));
  std::size_t events = 0;
  for (const kscope::merged_trace_input& in : m.inputs) {
    if (!in.error.empty()) continue;
    events += in.events;
    if (in.events == 0) kscope_fuzz_violation("merge_traces merged an input without events", in.name);
    if (in.shift_ns < 0) kscope_fuzz_violation("merge_traces moved an input back", std::to_string(in.shift_ns));
    if (in.time_origin_ns && (*in.time_origin_ns < 0 || *in.time_origin_ns >= kscope::detail::max_input_time_ns))
      kscope_fuzz_violation("merge_traces took a time origin out of range", std::to_string(*in.time_origin_ns));
    if (in.wall_clock_offset_ns && (*in.wall_clock_offset_ns <= -kscope::detail::max_input_time_ns ||
                                    *in.wall_clock_offset_ns >= kscope::detail::max_input_time_ns))
      kscope_fuzz_violation("merge_traces took a wall-clock offset out of range",
                            std::to_string(*in.wall_clock_offset_ns));
    if (in.clock.empty()) kscope_fuzz_violation("merge_traces placed an input without saying how", in.name);
  }
  if (m.events != events) kscope_fuzz_violation("merge_traces miscounted the events", std::to_string(m.events));
  if ((m.merged_count() == 0) != m.json.empty()) kscope_fuzz_violation("merge_traces: JSON without inputs, or none", "");
  const std::string text = m.text();
  if (text.size() > 4096 * (given + m.notes.size()) + 64 * m.json.size())
    kscope_fuzz_violation("merge_traces: text out of proportion", std::to_string(text.size()));
  if (m.json.empty()) return;
  // The merged trace may nest one or two levels deeper than its inputs (an array-form
  // input's events, otherData.devices): read it with room for them.
  kscope::detail::json_limits deeper;
  deeper.max_depth += 2;
  const kscope::detail::json_parse_result parsed = kscope::detail::parse_json(m.json, deeper);
  if (!parsed.ok()) kscope_fuzz_violation("the merged trace is not JSON", parsed.error);
  if (kscope::identify_document(m.json) != kscope::document_kind::chrome_trace)
    kscope_fuzz_violation("the merged trace is not told to be a trace", "");
  if (!merge_again) return;
  const kscope::merged_trace again = kscope::merge_traces({{"merged.json", m.json}});
  if (again.merged_count() == 1) {
    if (again.events != m.events) kscope_fuzz_violation("merging a merged trace again changed its events", "");
  } else if (!kscope_fuzz_starts_with(again.inputs.at(0).error, "more than ") &&
             again.inputs.at(0).error.find("nesting deeper than") == std::string::npos) {
    // Only what the merge adds (pids of two inputs, one or two levels of nesting) may
    // make a merged trace fail to merge again.
    kscope_fuzz_violation("a merged trace does not merge again", again.inputs.at(0).error);
  }
}

// `kscope merge` of traces, and how the tool tells a trace from a report.
inline void kscope_fuzz_traces(std::string_view text, const kscope::detail::json_parse_result& parsed) {
  const kscope::document_kind kind = kscope::identify_document(text);
  if (parsed.ok() && kind == kscope::document_kind::not_json)
    kscope_fuzz_violation("identify_document calls valid JSON not JSON", parsed.error);
  if (!parsed.ok() && kind == kscope::document_kind::other_json)
    kscope_fuzz_violation("identify_document calls invalid JSON valid", parsed.error);
  if (parsed.ok() && parsed.value.is_array() && kind != kscope::document_kind::chrome_trace)
    kscope_fuzz_violation("identify_document: an array is a trace", "");

  const std::string document(text);
  const kscope::merged_trace twice = kscope::merge_traces({{"input.json", document}, {"again.json", document}});
  kscope_fuzz_check_merged_trace(twice, 2, true);
  for (const kscope::merged_trace_input& in : twice.inputs)
    if (!in.error.empty() && in.error != twice.inputs[0].error)
      kscope_fuzz_violation("merge_traces read one text two ways", in.error);

  // Against another host's trace, lined up by wall clock: the input's clock base meets a
  // sane one (a time origin of 1 s, a wall-clock offset of today's).
  static const std::string reference =
      R"({"traceEvents":[{"name":"step","ph":"X","pid":1000,"tid":0,"ts":0,"dur":100},)"
      R"({"name":"launch","ph":"s","id":1,"pid":1000,"tid":0,"ts":0.001}],)"
      R"("otherData":{"schema":"kscope.trace/1","rank":1,"process_id":7,"host_name":"fuzz-reference",)"
      R"("time_origin_ns":1000000000,"wall_clock_offset_ns":1760000000000000000}})";
  kscope::trace_merge_options by_wall;
  by_wall.align_hosts_by_wall_clock = true;
  const kscope::merged_trace aligned = kscope::merge_traces({{"input.json", document}, {"reference.json", reference}}, by_wall);
  kscope_fuzz_check_merged_trace(aligned, 2, false);
  if (!aligned.inputs.at(1).error.empty()) kscope_fuzz_violation("the reference trace did not merge", aligned.inputs[1].error);
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
    kscope_fuzz_check_folded(*report, kscope::folded_time::host);
    kscope_fuzz_check_folded(*report, kscope::folded_time::gpu);
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

  kscope_fuzz_traces(text, parsed);
  return report.has_value();
}
