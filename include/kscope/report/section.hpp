// kscope/report/section.hpp — a part of the report that a feature adds without editing
// report/: its numbers in text(), json(), html() and parse_report(), under its own key.
//
// A feature (session/feature.hpp) that measured something the report spine has no member
// for writes a `report_section` into `session_report::sections`; every printer iterates
// over them: text() prints each under its heading, json() writes each as
// {"key", "heading", "data"} in the "sections" array, html() gives each its own <section>
// (its id the key), and parse_report() reads them back, through the reader the feature
// registered for its key, or, in a program without that reader, as the JSON it was
// (`kept_report_section`: printed as its values, written back as read), so a report read
// by the kscope tool loses no section. (merge_reports(), one report per rank, lines up the
// scopes only, as for the built-in sections.) A scope's conclusion is not a section's: a
// feature gives its evidence to the verdict (scope_report::feature_evidence), which
// decides one conclusion per scope from all of it.
//
//   struct queue_depth_section final : kscope::report_section {
//     int peak = 0;
//     std::string key() const override { return "queue_depth"; }
//     std::string heading() const override { return "Queue depth"; }
//     std::string text(const kscope::session_report&) const override {
//       return "peak " + std::to_string(peak) + " requests\n";
//     }
//     std::string json() const override { return "{\"peak\":" + std::to_string(peak) + "}"; }
//   };
//   report.sections.push_back(std::make_shared<queue_depth_section>());
//   kscope::register_report_section_reader("queue_depth", [](std::string_view data, std::string* error)
//       -> std::shared_ptr<const kscope::report_section> { ... });
#pragma once

#include "../core/config.hpp"
#include "../core/detail/fork_guard.hpp"
#include "../core/detail/json_reader.hpp"
#include "../core/detail/text_escape.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/once.hpp"

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {

struct session_report;

class report_section {
 public:
  virtual ~report_section() = default;
  // The section's name: its entry in the JSON's "sections" array and its HTML section's
  // id. Lower-case ASCII letters, digits, '_' and '-', 1-64 characters, and none of the
  // report's own section names (valid_report_section_key); a section with another key is
  // printed nowhere and a warning in the printed report says why.
  [[nodiscard]] virtual std::string key() const = 0;
  // One line, its title in text() and html() ("Queue depth").
  [[nodiscard]] virtual std::string heading() const = 0;
  // Its lines of text() under the heading (each ending in '\n'); `report` is the report it
  // is printed in (its scopes, to name them by path).
  [[nodiscard]] virtual std::string text(const session_report& report) const = 0;
  // Its data as one JSON value (an object, usually): the "data" of its entry, written again
  // by kscope's writer (strings made valid UTF-8). Text that is not one JSON value, or
  // nests deeper than a report file may (json_limits::default_max_depth less the entry's
  // own three levels), is not written: the entry's data is then null and its "error" says why.
  [[nodiscard]] virtual std::string json() const = 0;
};

// What a program registers to read its sections back from a report file: `data` is the
// entry's "data" (JSON text). nullptr with *error set when it cannot be read: the section
// is then kept as the JSON it was (kept_report_section), with a warning.
using report_section_reader = std::shared_ptr<const report_section> (*)(std::string_view data, std::string* error);

// True for a key a section may have (above).
[[nodiscard]] KSCOPE_DECL bool valid_report_section_key(std::string_view key) noexcept;

// Registers `reader` for sections keyed `key` (replacing an earlier one); false, nothing
// registered, for an invalid key or a null reader. Thread-safe.
KSCOPE_DECL bool register_report_section_reader(const std::string& key, report_section_reader reader);

// The reader registered for `key`, or nullptr.
[[nodiscard]] KSCOPE_DECL report_section_reader find_report_section_reader(std::string_view key);

// A section read from a report file by a program without a reader for its key: its data
// kept as the JSON it was. text() lists its values ("path = value", at most
// kept_section_text_values of them), json() writes the data back unchanged.
class kept_report_section final : public report_section {
 public:
  static constexpr std::size_t kept_section_text_values = 40;

  KSCOPE_DECL kept_report_section(std::string key, std::string heading, std::string data_json);
  [[nodiscard]] KSCOPE_DECL std::string key() const override;
  [[nodiscard]] KSCOPE_DECL std::string heading() const override;
  [[nodiscard]] KSCOPE_DECL std::string text(const session_report& report) const override;
  [[nodiscard]] KSCOPE_DECL std::string json() const override;

 private:
  std::string key_;
  std::string heading_;
  std::string data_;
};

namespace detail {

// The ids the report's own sections use (html.hpp's report_sections()): a feature's section
// may not take one.
KSCOPE_DECL bool is_builtin_report_section_id(std::string_view key) noexcept;

struct section_reader_registry {
  fork_guarded_mutex mutex{lock_rank::section_readers};
  std::vector<std::pair<std::string, report_section_reader>> readers;
};
KSCOPE_DECL section_reader_registry& section_readers();

// The scalar values of a JSON tree as "path = value" lines (at most max_lines, then a line
// saying how many more), for printing data no reader understands.
KSCOPE_DECL void flatten_json_values(const json_value& v, const std::string& path, std::size_t max_lines,
                                     std::vector<std::string>& lines, std::size_t& total);

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
namespace detail {

KSCOPE_DECL bool is_builtin_report_section_id(std::string_view key) noexcept {
  static constexpr const char* builtin[] = {"context",      "window",          "scopes",   "requests",
                                            "gpu-busy",     "gpu-time",        "roofline", "gpu-activity",
                                            "top-kernels",  "counters",        "sampled-metrics",
                                            "verdicts",     "cupti",           "warnings", "diagnosis",
                                            "sections"};
  for (const char* id : builtin)
    if (key == id) return true;
  return false;
}

KSCOPE_DECL section_reader_registry& section_readers() {
  static lazy_global<section_reader_registry> registry{lock_rank::init};
  return registry.get([] { return new section_reader_registry(); });
}

KSCOPE_DECL void flatten_json_values(const json_value& v, const std::string& path, std::size_t max_lines,
                                     std::vector<std::string>& lines, std::size_t& total) {
  const auto leaf = [&](const std::string& text) {
    ++total;
    if (lines.size() < max_lines) lines.push_back((path.empty() ? std::string("value") : path) + " = " + text);
  };
  switch (v.type) {
    case json_type::null: leaf("null"); break;
    case json_type::boolean: leaf(v.boolean ? "true" : "false"); break;
    case json_type::number: leaf(format_round_trip(v.number)); break;
    // Names and strings from a file are shown, never obeyed: a line break in one cannot
    // start a line of the report (printable_name writes it as \x0a).
    case json_type::string: leaf("\"" + printable_name(v.string) + "\""); break;
    case json_type::array:
      for (std::size_t i = 0; i < v.items.size(); ++i)
        flatten_json_values(v.items[i], path + "[" + std::to_string(i) + "]", max_lines, lines, total);
      break;
    case json_type::object:
      for (const auto& m : v.members) {
        const std::string name = printable_name(m.first);
        flatten_json_values(m.second, path.empty() ? name : path + "." + name, max_lines, lines, total);
      }
      break;
  }
}

}  // namespace detail

KSCOPE_DECL bool valid_report_section_key(std::string_view key) noexcept {
  if (key.empty() || key.size() > 64) return false;
  for (const char c : key)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return !detail::is_builtin_report_section_id(key);
}

KSCOPE_DECL bool register_report_section_reader(const std::string& key, report_section_reader reader) {
  if (reader == nullptr || !valid_report_section_key(key)) return false;
  detail::section_reader_registry& r = detail::section_readers();
  std::lock_guard<detail::fork_guarded_mutex> lock(r.mutex);
  for (auto& entry : r.readers)
    if (entry.first == key) {
      entry.second = reader;
      return true;
    }
  r.readers.emplace_back(key, reader);
  return true;
}

KSCOPE_DECL report_section_reader find_report_section_reader(std::string_view key) {
  detail::section_reader_registry& r = detail::section_readers();
  std::lock_guard<detail::fork_guarded_mutex> lock(r.mutex);
  for (const auto& entry : r.readers)
    if (entry.first == key) return entry.second;
  return nullptr;
}

KSCOPE_DECL kept_report_section::kept_report_section(std::string key, std::string heading, std::string data_json)
    : key_(std::move(key)), heading_(std::move(heading)), data_(std::move(data_json)) {}

KSCOPE_DECL std::string kept_report_section::key() const { return key_; }

KSCOPE_DECL std::string kept_report_section::heading() const { return heading_.empty() ? key_ : heading_; }

KSCOPE_DECL std::string kept_report_section::text(const session_report&) const {
  std::string out = "(read from a report file by a program with no reader for section \"" + key_ +
                    "\": its data as written)\n";
  const detail::json_parse_result parsed = detail::parse_json(data_);
  if (!parsed.error.empty()) return out + "(its data is not valid JSON: " + parsed.error + ")\n";
  std::vector<std::string> lines;
  std::size_t total = 0;
  detail::flatten_json_values(parsed.value, "", kept_section_text_values, lines, total);
  for (const std::string& line : lines) out += line + "\n";
  if (total > lines.size()) out += "(" + std::to_string(total - lines.size()) + " more values in the JSON report)\n";
  return out;
}

KSCOPE_DECL std::string kept_report_section::json() const { return data_; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
