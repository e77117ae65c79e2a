// tests/browser/html_report_page.cpp — writes the HTML page the browser test loads, and the
// list of sections it must show.
//
//   html_report_page OUT_DIR                 the full report of tests/html_report_fixture.hpp,
//                                            and its JSON in OUT_DIR/report.json
//   html_report_page OUT_DIR REPORT.json     a report file (kscope.report/1) read back
//                                            (report/merge.hpp: parse_report), as
//                                            `kscope report` reads one
//
// OUT_DIR/report.html: report_html() with the serving diagnosis as its last section, as a
// program that includes verdict/diagnose.hpp would write it; OUT_DIR/report.txt: the text
// report and the diagnosis; OUT_DIR/sections.txt: the ids of the sections that text holds
// (detail::sections_of_text), one a line, then a line "--" and the pictures the data calls
// for (svg classes). Exit 1 when the text starts a section the page does not know.
#include "../html_report_fixture.hpp"

#include <kscope/core/text.hpp>
#include <kscope/report/html.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/verdict/diagnose.hpp>
#include <kscope/verdict/diagnosis_page.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fputs("usage: html_report_page OUT_DIR [REPORT.json]\n", stderr);
    return 2;
  }
  const std::string dir = argv[1];
  kscope::session_report r;
  if (argc == 3) {
    std::ifstream in(argv[2], std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::string error;
    std::optional<kscope::session_report> read = kscope::parse_report(text.str(), &error);
    if (!in || !read) {
      std::fprintf(stderr, "html_report_page: %s: %s\n", argv[2], error.empty() ? "cannot read" : error.c_str());
      return 1;
    }
    r = std::move(*read);
  } else {
    r = kscope_test::full_report();
    // A feature's own section (report/section.hpp), as a program's feature adds it: the page
    // must show it like the report's own; read back from report.json it is kept as written.
    r.sections.push_back(std::make_shared<kscope::kept_report_section>(
        "queue_depth", "Request queue depth", R"({"peak": 12, "by_minute": [3, 12, 7]})"));
  }
  const std::vector<kscope::diagnosis> findings = kscope::diagnose(r);
  const std::string diagnosis = kscope::diagnosis_text(findings, r);
  // The diagnosis as a program shows it on the page (verdict/diagnosis_page.hpp).
  const kscope::html_section diagnosis_section = kscope::diagnosis_html_section(findings, r);
  const std::string text = r.text() + diagnosis;
  const kscope::detail::text_sections found = kscope::detail::sections_of_text(text);
  for (const std::string& line : found.unknown)
    std::fprintf(stderr, "html_report_page: the text starts a section the page does not know: %s\n", line.c_str());
  std::string sections;
  for (const std::string& id : found.ids) sections += id + "\n";
  sections += "--\n";
  // The pictures the data calls for, by the page's own rules; the full report has all four.
  std::string caption;
  bool ranges = false;
  for (const kscope::scope_report& s : r.scopes) ranges = ranges || (s.cross_thread && s.host_ns.n > 0);
  const std::pair<const char*, bool> pictures[] = {
      {"kscope-step-timeline", !kscope::detail::compose_step_timelines(r).empty()},
      {"kscope-gpu-bars", !kscope::detail::gpu_bars_svg(r, caption).empty()},
      {"kscope-latency", ranges},
      {"kscope-roofline", !kscope::detail::roofline_picture(r, caption).empty()}};
  bool all_pictures = true;
  for (const auto& [picture, drawn] : pictures) {
    if (drawn) sections += std::string(picture) + "\n";
    all_pictures = all_pictures && drawn;
  }
  if (argc == 2 && !all_pictures) {
    std::fputs("html_report_page: the full report does not call for all four pictures\n", stderr);
    return 1;
  }
  std::string error;
  const std::string page = kscope::report_html(r, {diagnosis_section});
  if (!kscope::write_text_file(dir + "/report.html", page, &error) ||
      !kscope::write_text_file(dir + "/report.txt", text, &error) ||
      !kscope::write_text_file(dir + "/sections.txt", sections, &error) ||
      (argc == 2 && !r.write_json(dir + "/report.json", &error))) {
    std::fprintf(stderr, "html_report_page: %s\n", error.c_str());
    return 1;
  }
  return found.unknown.empty() ? 0 : 1;
}
