// kscope/report/html.hpp — session_report::html() and write_html(): the report as one HTML
// page that holds every section text() prints, each with its own rendering (tables, lists),
// and four pictures where a reader would rather look than read:
//   - a step timeline: GPU busy and idle against the host scopes of a step, at the step's
//     p50 and p99 (svg.kscope-step-timeline, in "GPU busy and idle");
//   - GPU time per scope as bars (svg.kscope-gpu-bars);
//   - the requests' latency distributions (svg.kscope-latency);
//   - the roofline with every scope placed on it, declared and measured
//     (svg.kscope-roofline).
// The page has no JavaScript and no external resource (it opens offline and its inline
// SVGs carry no namespace URL), its size is bounded whatever the run (tables list at most
// html_max_scope_rows scopes, the pictures a fixed number of marks, and say what they left
// out), and an @media print style lays it out for paper. Each section is a
// <section id=ID data-section=ID>; detail::report_sections() names them and the lines
// text() starts them with, so a test can check that the page misses none
// (tests/html_report_test.cpp, and in headless Chromium tests/browser/html_report_check.py).
//
// A section the report's data does not hold comes from the layer that computes it, as
// plain text: the serving diagnosis (verdict/diagnose.hpp, above report/) for one
// (docs/html_report.md shows it a paragraph per finding).
//   kscope::html_section d{"diagnosis", "Diagnosis", {}};
//   for (const kscope::diagnosis& f : kscope::diagnose(r)) d.paragraphs.push_back(f.title + "\n" + f.text);
//   const std::string page = kscope::report_html(r, {d});
#pragma once

#include "../core/config.hpp"
#include "data.hpp"
#include "detail/html_page.hpp"
#include "detail/printing.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {

// A section added to the report page after the report's own (its id becomes the section's
// id and data-section; lower-case letters, digits and '-' are kept, anything else becomes
// '-'). Paragraphs are plain text, escaped; their line breaks are kept (the page wraps
// long lines itself).
//   kscope::html_section note{"notes", "Run notes", {"batch 8, greedy sampling"}};
struct html_section {
  std::string id;
  std::string heading;
  std::vector<std::string> paragraphs;
};

// The report page with `more` sections after the report's own: html() is
// report_html(*this). Every user string is escaped for HTML (invalid UTF-8 and control
// characters shown as U+FFFD).
//   (void)kscope::write_text_file("run.html", kscope::report_html(r, {diagnosis_section}));
[[nodiscard]] KSCOPE_DECL std::string report_html(const session_report& r, const std::vector<html_section>& more = {});

namespace detail {

// How text() starts one of its sections: a line that begins with `marker` (and contains
// `contains`, when not empty). `after_blank`: only a line that follows an empty line (or
// the first line) counts, as every section of text() begins after one; the others are
// single lines that may follow anything ("CUPTI: ...", "warning: ...").
struct report_section_marker {
  const char* id;
  const char* marker;
  bool after_blank;
  const char* contains;
};

// The report page's sections in page order: id and heading.
struct report_section_info {
  const char* id;
  const char* heading;
};

KSCOPE_DECL const std::vector<report_section_info>& report_sections();
KSCOPE_DECL const std::vector<report_section_marker>& report_section_markers();

// What text() (or diagnosis_text()) output holds: the ids of the sections it starts, in
// page order, and the lines that start a section (follow an empty line) and match no
// marker: a section text() prints that the page does not know.
struct text_sections {
  std::vector<std::string> ids;          // page order, the features' sections included
  std::vector<std::string> unknown;
  std::vector<std::string> feature_ids;  // the features' sections alone (report/section.hpp)
};
KSCOPE_DECL text_sections sections_of_text(std::string_view text);

// The ids of the sections the page has for `r`, in page order: those text() prints (the
// same conditions, from the data), and the counters of a report built by hand without the
// session's status, which text() leaves out.
KSCOPE_DECL std::vector<std::string> report_sections_present(const session_report& r);

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
namespace detail {

KSCOPE_DECL const std::vector<report_section_info>& report_sections() {
  static const std::vector<report_section_info> sections = {
      {"context", "Run"},
      {"window", "Window"},
      {"scopes", "Scopes"},
      {"requests", "Requests"},
      {"gpu-busy", "GPU busy and idle"},
      {"gpu-time", "GPU time per scope"},
      {"roofline", "Roofline"},
      {"gpu-activity", "GPU activity (CUPTI)"},
      {"top-kernels", "Top kernels"},
      {"counters", "Hardware counters per scope"},
      {"sampled-metrics", "GPU metrics sampled while running"},
      {"verdicts", "Verdict per scope"},
      {"cupti", "CUPTI"},
      {"warnings", "Warnings and notes"},
      {"diagnosis", "Diagnosis"},
  };
  return sections;
}

KSCOPE_DECL const std::vector<report_section_marker>& report_section_markers() {
  // The words are text()'s (text.hpp, detail/printing.hpp, evidence/counter_report.hpp,
  // evidence/pm_report.hpp) and diagnosis_text()'s (verdict/diagnose.hpp).
  static const std::vector<report_section_marker> markers = {
      {"context", "kscope ", true, ""},
      {"context", "GPU: ", false, ""},
      {"context", "roof: ", false, ""},
      {"window", "window ", false, " since the previous one"},
      {"scopes", "scope ", true, "calls"},
      {"scopes", "(no scopes recorded)", false, ""},
      {"scopes", "med: median per call", true, ""},
      {"requests", "Requests (cross-thread ranges)", true, ""},
      {"gpu-busy", "GPU busy", true, ""},
      {"gpu-time", "GPU time (CUPTI)", true, ""},
      {"roofline", "roofline (median call)", true, ""},
      {"gpu-activity", "GPU activity (CUPTI)", true, ""},
      {"top-kernels", "top kernels", true, ""},
      {"counters", "Hardware counters per scope", true, ""},
      {"sampled-metrics", "GPU metrics sampled while running", true, ""},
      {"verdicts", "verdict per scope", true, ""},
      {"cupti", "CUPTI: ", false, ""},
      {"warnings", "warning: ", false, ""},
      {"warnings", "note: ", false, "stream scopes ran without GPU timing"},
      {"diagnosis", "Diagnosis", true, ""},
  };
  return markers;
}

KSCOPE_DECL std::vector<std::string> report_sections_present(const session_report& r) {
  bool requests = false, placed = false, activity = false, verdicts = false, warnings = r.gpu_timing_skipped > 0;
  bool counters = r.counters.has_value();
  for (const scope_report& s : r.scopes) {
    // (text() prints the counters only with the session's status; the page also shows
    // the counters of a report built by hand without it.)
    counters = counters || s.counters.has_value();
    requests = requests || (s.cross_thread && s.host_ns.n > 0);
    placed = placed || s.roofline.has_value();
    activity = activity || s.gpu_activity.has_value();
    verdicts = verdicts || s.verdict.has_value();
  }
  for (const std::string& w : r.warnings)
    warnings = warnings || !(w == r.cupti_status || (r.sampled_metrics && w == r.sampled_metrics->status) ||
                             (r.counters && w == r.counters->status));
  std::vector<std::string> section_problems;
  const std::vector<feature_section_view> features = printed_feature_sections(r, section_problems);
  warnings = warnings || !section_problems.empty();
  // text()'s conditions for each of its sections, in page order (report_sections()).
  const std::pair<const char*, bool> present[] = {{"context", true},
                                                  {"window", r.window.has_value()},
                                                  {"scopes", true},
                                                  {"requests", requests},
                                                  {"gpu-busy", r.gpu_time.has_value()},
                                                  {"gpu-time", r.gpu_time.has_value()},
                                                  {"roofline", placed},
                                                  {"gpu-activity", activity},
                                                  {"top-kernels", !r.top_kernels.empty()},
                                                  {"counters", counters},
                                                  {"sampled-metrics", r.sampled_metrics.has_value()},
                                                  {"verdicts", verdicts},
                                                  {"cupti", !r.cupti_status.empty()},
                                                  {"warnings", warnings}};
  std::vector<std::string> ids;
  for (const auto& [id, on] : present) {
    // The features' sections come where text() prints them: before the verdicts.
    if (std::string_view(id) == "verdicts")
      for (const feature_section_view& f : features) ids.push_back(f.key);
    if (on) ids.emplace_back(id);
  }
  return ids;
}

KSCOPE_DECL text_sections sections_of_text(std::string_view text) {
  text_sections out;
  std::vector<bool> found(report_sections().size(), false);
  bool after_blank = true;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.empty()) {
      after_blank = true;
      continue;
    }
    bool matched = false;
    // A feature's section (report/section.hpp): "section KEY: HEADING", its id the key.
    if (after_blank && line.substr(0, 8) == "section ") {
      const std::size_t colon = line.find(':');
      const std::string_view key = colon == std::string_view::npos ? std::string_view() : line.substr(8, colon - 8);
      if (valid_report_section_key(key)) {
        if (std::find(out.feature_ids.begin(), out.feature_ids.end(), key) == out.feature_ids.end())
          out.feature_ids.emplace_back(key);
        after_blank = false;
        continue;
      }
    }
    for (const report_section_marker& m : report_section_markers()) {
      if (m.after_blank && !after_blank) continue;
      if (line.substr(0, std::string_view(m.marker).size()) != m.marker) continue;
      if (*m.contains != '\0' && line.find(m.contains) == std::string_view::npos) continue;
      for (std::size_t i = 0; i < report_sections().size(); ++i)
        if (std::string_view(report_sections()[i].id) == m.id) found[i] = true;
      matched = true;
      break;
    }
    // (An indented line starts no section: a feature's section indents its lines.)
    if (after_blank && !matched && line.front() != ' ') out.unknown.emplace_back(line);
    after_blank = false;
  }
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (std::string_view(report_sections()[i].id) == "verdicts")
      out.ids.insert(out.ids.end(), out.feature_ids.begin(), out.feature_ids.end());
    if (found[i]) out.ids.emplace_back(report_sections()[i].id);
  }
  return out;
}

}  // namespace detail

KSCOPE_DECL std::string report_html(const session_report& r, const std::vector<html_section>& more) {
  const std::vector<std::string> sections = detail::report_sections_present(r);
  const auto has = [&](const char* id) { return std::find(sections.begin(), sections.end(), id) != sections.end(); };
  std::string out;
  out.reserve(65536);
  out +=
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>kscope report</title>\n"
      "<style>\n";
  out += detail::html_page_style();
  out += "</style>\n</head>\n<body>\n";
  detail::html_page page = detail::make_html_page(r, out);
  detail::html_context(page);
  // The contents: the sections present, for the screen (print leaves it out).
  std::vector<std::pair<std::string, std::string>> present;
  std::vector<std::string> section_problems;
  const std::vector<detail::feature_section_view> features = detail::printed_feature_sections(r, section_problems);
  for (const detail::report_section_info& s : detail::report_sections()) {
    if (std::string_view(s.id) == "verdicts")
      for (const detail::feature_section_view& f : features) present.emplace_back(f.key, f.heading);
    if (std::string_view(s.id) != "context" && has(s.id)) present.emplace_back(s.id, s.heading);
  }
  // A section from the layers above keeps its id unless a section already on the page has
  // it (a feature's key may equal it): then "-2", "-3", ... after it, so every id is one
  // section's.
  std::vector<std::string> more_ids;
  for (const html_section& s : more) {
    const std::string id = detail::html_section_id(s.id);
    std::string unique = id;
    const auto taken = [&](const std::string& candidate) {
      for (const auto& p : present)
        if (p.first == candidate) return true;
      return candidate == "context";
    };
    for (int n = 2; taken(unique); ++n) unique = id + "-" + std::to_string(n);
    more_ids.push_back(unique);
    present.emplace_back(unique, s.heading);
  }
  if (!present.empty()) {
    out += "<nav class=\"contents\">";
    for (const auto& [id, heading] : present) {
      out += "<a href=\"#" + id + "\">";
      detail::append_xml_escaped(out, heading);
      out += "</a> ";
    }
    out += "</nav>\n";
  }
  const std::pair<const char*, void (*)(detail::html_page&)> renderers[] = {
      {"window", detail::html_window},
      {"scopes", detail::html_scopes},
      {"requests", detail::html_requests},
      {"gpu-busy", detail::html_gpu_busy},
      {"gpu-time", detail::html_gpu_time},
      {"roofline", detail::html_roofline},
      {"gpu-activity", detail::html_gpu_activity},
      {"top-kernels", detail::html_top_kernels},
      {"counters", detail::html_counters},
      {"sampled-metrics", detail::html_sampled_metrics},
      {"verdicts", detail::html_verdicts},
      {"cupti", detail::html_cupti},
      {"warnings", detail::html_warnings},
  };
  for (const auto& [id, render] : renderers) {
    if (std::string_view(id) == "verdicts") {
      // The features' sections, each its text lines (its key is a valid id as it is).
      for (const detail::feature_section_view& f : features) {
        detail::html_section_open(out, f.key, f.heading);
        std::string body = detail::feature_section_body(f, r);
        if (body.size() > html_max_section_bytes) {  // the page stays bounded: the rest is in text() and json()
          const std::size_t cut = body.rfind('\n', html_max_section_bytes);
          const std::size_t keep = cut == std::string::npos ? html_max_section_bytes : cut + 1;
          const std::size_t left = body.size() - keep;
          body.resize(keep);
          body += "(" + std::to_string(left) + " more bytes of this section in the text and JSON reports)\n";
        }
        detail::html_paragraph(out, body, "lines");
        out += "</section>\n";
      }
    }
    if (has(id)) render(page);
  }
  // Sections from the layers above.
  for (std::size_t i = 0; i < more.size(); ++i) {
    const html_section& s = more[i];
    detail::html_section_open(out, more_ids[i], s.heading);
    for (const std::string& p : s.paragraphs) detail::html_paragraph(out, p, "lines");
    out += "</section>\n";
  }
  out += "</body>\n</html>\n";
  return out;
}

KSCOPE_DECL std::string session_report::html() const { return report_html(*this); }

KSCOPE_DECL bool session_report::write_html(const std::string& path, std::string* error) const noexcept {
  try {
    return detail::write_file_atomically(path, html(), error);
  } catch (...) {  // out of memory building the page
    if (error) {
      try { *error = detail::file_write_error(path, ENOMEM); } catch (...) {}
    }
    return false;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
