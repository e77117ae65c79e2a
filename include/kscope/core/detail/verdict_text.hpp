// kscope/core/detail/verdict_text.hpp — how every printer words a scope_verdict (one
// conclusion, its evidence under it) and writes it as JSON: the session report's text, HTML
// and JSON (report/) and the bench's markdown and JSON (bench/format.hpp) share these, so a
// verdict reads the same wherever it is printed.
#pragma once

#include "../config.hpp"
#include "../finding.hpp"
#include "../roofline.hpp"  // format_si
#include "json_writer.hpp"
#include "number_format.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace kscope {
namespace detail {

// The conclusion in one line: the class, the limiting unit and what it rests on, "memory-bound
// (L2), from sampled metrics over 40 samples; busiest unit lts__throughput... at 76.0% of
// peak"; "undetermined: nothing measured or declared decided (below)" when nothing did.
KSCOPE_DECL std::string verdict_headline(const scope_verdict& v);

// The lines under the headline: the verdict's text (its numbers and what to try), one line
// per source's evidence ("sampled metrics (40 samples): sm__throughput... 15.0%, ..."; a
// source whose own reading differs is marked "outweighed"), then one per piece of evidence
// not collected or not decided ("not decided or not collected: ...").
KSCOPE_DECL std::vector<std::string> verdict_lines(const scope_verdict& v);

// One number of a finding as the evidence lines print it: "dram__bytes 2.15 GB".
KSCOPE_DECL std::string evidence_fact_text(const evidence& e);

// The verdict object of the JSON reports (docs/report_schema.md: `scopes[].verdict`;
// docs/bench_schema.md: `benchmarks[].verdict`).
KSCOPE_DECL void write_verdict_json(json_writer& w, const scope_verdict& v);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string verdict_headline(const scope_verdict& v) {
  std::string line = to_string(v.verdict.kind);
  if (v.verdict.kind == bottleneck::undetermined) return line + ": nothing measured or declared decided (below)";
  if (!v.verdict.where.empty()) line += " (" + v.verdict.where + ")";
  line += ", from " + v.basis;
  const verdict_evidence* e = v.decided();
  if (e == nullptr) return line;
  if (e->count > 0 || !e->count_of.empty()) line += " over " + std::to_string(e->count) + " " + e->count_of;
  if (std::isfinite(e->percent_of_peak))
    line += e->metric == "roofline.fraction_of_roof"
                ? "; " + format_fixed(e->percent_of_peak, 0) + "% of the roof it was placed under"
                : "; busiest unit " + e->metric + " at " + format_fixed(e->percent_of_peak, 1) + "% of peak";
  return line;
}

KSCOPE_DECL std::string evidence_fact_text(const evidence& e) {
  std::string value;
  if (!std::isfinite(e.value)) value = "-";
  else if (e.unit == "%") value = format_fixed(e.value, 1) + "%";
  else if (e.unit == "share") value = format_fixed(100 * e.value, 1) + "%";
  else if (e.unit == "FLOP/s" || e.unit == "B/s" || e.unit == "bytes" || e.unit == "B") value = format_si(e.value, e.unit == "bytes" ? "B" : e.unit.c_str());
  else value = format_general(e.value, 4) + (e.unit.empty() ? "" : " " + e.unit);
  return e.metric + " " + value;
}

KSCOPE_DECL std::vector<std::string> verdict_lines(const scope_verdict& v) {
  std::vector<std::string> lines;
  if (v.verdict.kind != bottleneck::undetermined && !v.verdict.text.empty()) lines.push_back(v.verdict.text);
  for (const verdict_evidence& e : v.evidence) {
    std::string tags = e.count > 0 || !e.count_of.empty() ? std::to_string(e.count) + " " + e.count_of : std::string();
    if (!e.agrees) tags += (tags.empty() ? "" : ", ") + std::string("outweighed");
    std::string line = e.source + (tags.empty() ? std::string() : " (" + tags + ")") + ":";
    if (e.facts.empty()) line += " no numbers";
    for (std::size_t i = 0; i < e.facts.size(); ++i) line += (i ? ", " : " ") + evidence_fact_text(e.facts[i]);
    lines.push_back(std::move(line));
  }
  for (const std::string& m : v.missing) lines.push_back("not decided or not collected: " + m);
  return lines;
}

KSCOPE_DECL void write_verdict_json(json_writer& w, const scope_verdict& v) {
  const verdict_evidence* decided = v.decided();
  w.begin_object();
  w.member("class", to_string(v.verdict.kind));
  w.member("unit", v.verdict.where);
  w.member("percent_of_peak", decided ? decided->percent_of_peak : std::nan(""));
  w.member("metric", decided ? decided->metric : std::string());
  w.member("source", v.basis);
  w.member("count", static_cast<unsigned long long>(decided ? decided->count : 0));
  w.member("count_of", decided ? decided->count_of : std::string());
  w.member("text", v.verdict.text);
  w.key("evidence").begin_array();
  for (const verdict_evidence& e : v.evidence) {
    w.begin_object();
    w.member("source", e.source);
    w.member("percent_of_peak", e.percent_of_peak).member("metric", e.metric);
    w.member("count", static_cast<unsigned long long>(e.count)).member("count_of", e.count_of);
    w.member("agrees", e.agrees);
    w.key("facts").begin_array();
    for (const evidence& f : e.facts)
      w.begin_object().member("metric", f.metric).member("value", f.value).member("unit", f.unit).end_object();
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.key("missing").begin_array();
  for (const std::string& m : v.missing) w.value(m);
  w.end_array();
  w.end_object();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
