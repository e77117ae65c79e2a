// kscope/verdict/diagnosis_page.hpp — the serving diagnosis as a section of the HTML report.
//
// report/html.hpp cannot name the diagnosis (verdict/ sits above report/), so a page with
// one is report_html(r, {diagnosis_html_section(...)}): the `kscope report --format html`
// command and the browser test's page build it this way.
//
//   const auto found = kscope::diagnose(r);
//   const std::string page = kscope::report_html(r, {kscope::diagnosis_html_section(found, r)});
#pragma once

#include "../core/config.hpp"
#include "../core/detail/number_format.hpp"
#include "../report/html.hpp"
#include "diagnose.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace kscope {

// A paragraph per finding (its kind and title, the sentence with the numbers it rests on,
// what to try, and its cost per step where known); with none, what diagnosis_text says.
[[nodiscard]] KSCOPE_DECL html_section diagnosis_html_section(const std::vector<diagnosis>& findings,
                                                              const session_report& r);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL html_section diagnosis_html_section(const std::vector<diagnosis>& findings, const session_report& r) {
  html_section section{"diagnosis", "Diagnosis", {}};
  for (const diagnosis& d : findings) {
    std::string cost;
    if (std::isfinite(d.cost_ms_per_step))
      cost = "\ncost: " + detail::format_general(d.cost_ms_per_step, 3) + " ms per step (" + d.cost_basis + ")";
    section.paragraphs.push_back(std::string("[") + to_string(d.kind) + "] " + d.title + "\n" + d.text +
                                 "\ntry: " + d.suggestion + cost);
  }
  if (findings.empty()) {
    const std::string text = diagnosis_text(findings, r);
    const std::size_t heading = text.find("Diagnosis\n");
    section.paragraphs.push_back(heading == std::string::npos ? text : text.substr(heading + 10));
  }
  return section;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
