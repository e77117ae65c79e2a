// tests/html_report_test.cpp — the HTML report (report/html.hpp) holds every section the text
// report prints, draws its four pictures, references nothing outside the page and stays
// small for a large run. The sections are found in text() itself (detail::sections_of_text:
// every line after an empty line starts a section, and each must be one the page knows), so a
// section added to text() without its HTML rendering fails here. tests/browser/ loads the
// same page in headless Chromium.
#include "html_report_fixture.hpp"

#include <kscope/report/html.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/verdict/diagnose.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace html_report_test {  // one per file: the unit tests build as one program

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::size_t count(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + part.size())) ++n;
  return n;
}

// Every section text() starts is known to the page and is on it, once.
void check_sections(const kscope::session_report& r, const std::string& html) {
  const std::string text = r.text();
  const kscope::detail::text_sections found = kscope::detail::sections_of_text(text);
  CHECK_MESSAGE(found.unknown.empty(), "text() starts a section the HTML page does not know: ",
                found.unknown.empty() ? std::string() : found.unknown.front(), "\n", text);
  const std::vector<std::string> present = kscope::detail::report_sections_present(r);
  for (const std::string& id : found.ids) {
    CHECK_MESSAGE(std::find(present.begin(), present.end(), id) != present.end(), id, "\n", text);
    CHECK_MESSAGE(count(html, "data-section=\"" + id + "\"") == 1, "section ", id, " is not on the page once");
  }
  for (const std::string& id : present) CHECK_MESSAGE(count(html, "data-section=\"" + id + "\"") == 1, id);
}

void check_self_contained(const std::string& html) {
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK_FALSE(contains(html, "http://"));
  CHECK_FALSE(contains(html, "https://"));
  CHECK_FALSE(contains(html, "<script"));
  CHECK_FALSE(contains(html, "src="));
  CHECK_FALSE(contains(html, "url("));
  CHECK_FALSE(contains(html, "@import"));
  CHECK(contains(html, "@media print"));
}

}  // namespace

TEST_CASE("the full report: every section of the text on the page, each picture drawn") {
  const kscope::session_report r = kscope_test::full_report();
  const std::string html = r.html();
  const kscope::detail::text_sections found = kscope::detail::sections_of_text(r.text());
  // The fixture fills every section the text report has (the diagnosis is diagnosis_text's).
  std::vector<std::string> all;
  for (const kscope::detail::report_section_info& s : kscope::detail::report_sections())
    if (std::string(s.id) != "diagnosis") all.emplace_back(s.id);
  CHECK(found.ids == all);
  check_sections(r, html);
  check_self_contained(html);
  for (const char* picture : {"kscope-step-timeline", "kscope-gpu-bars", "kscope-latency", "kscope-roofline"})
    CHECK_MESSAGE(count(html, "<svg class=\"" + std::string(picture) + "\"") == 1, picture);
  // Each picture holds its data: a point per placed scope and measured level, a bar per
  // scope with GPU time, a row per request range, two steps with host and GPU spans.
  // prefill, decode, attention declared; decode measured at DRAM and L2
  CHECK(count(html, "class=\"kscope-point\"") == 5);
  CHECK(contains(html, "step/decode (DRAM)"));
  CHECK(contains(html, "step/decode (L2)"));
  CHECK(count(html, "class=\"kscope-bar\"") == 4);
  CHECK(count(html, "class=\"kscope-latency-row\"") == 2);
  CHECK(count(html, "class=\"kscope-step\"") == 2);
  CHECK(contains(html, ">p50 step<"));
  CHECK(contains(html, ">p99 step<"));
  // What the sections say, as the text says it.
  CHECK(contains(html, "GPU busy 62.0% of the wall time"));
  CHECK(contains(html, "step/decode: memory-bound (DRAM), from hardware counters over 12 profiled calls; busiest "
                       "unit gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed at 86.0% of peak"));
  CHECK(contains(html, "<li>memory-bound: DRAM 86% of peak</li>"));
  CHECK(contains(html, "sampled metrics (24 samples): dram__throughput.avg.pct_of_peak_sustained_elapsed 80.0%"));
  CHECK(contains(html, "not decided or not collected: hardware counters: session::enable_counters()"));
  CHECK(contains(html, "graph kernels built in: step/decode/attention"));
  CHECK(contains(html, "@GPU 1"));
  CHECK(contains(html, "flash_fwd_kernel&lt;bf16&gt; ~40"));
  CHECK(contains(html, "note: 2 stream scopes ran without GPU timing"));
  CHECK(contains(html, "warning: step/decode: 3 calls ran with the event pool full"));
  CHECK(count(html, r.cupti_status) == 1);  // its own section, not again as a warning
  CHECK(contains(html, "note: the SASS instruction counters need kernel replay"));
  CHECK(contains(html, "step step/decode: 1 calls sampled") == false);  // steps are the step scope's
  CHECK(contains(html, "step step: 1 calls sampled"));
  // User strings are escaped, an invalid byte replaced.
  CHECK(contains(html, "&lt;b&gt;odd&lt;/b&gt; &amp; \xEF\xBF\xBD"));
  CHECK_FALSE(contains(html, "<b>odd"));
}

TEST_CASE("the diagnosis, a section of the layer above, joins the page") {
  const kscope::session_report r = kscope_test::full_report();
  const std::string diagnosis = kscope::diagnosis_text(kscope::diagnose(r), r);
  const kscope::detail::text_sections found = kscope::detail::sections_of_text(diagnosis);
  CHECK(found.unknown.empty());
  REQUIRE(found.ids == std::vector<std::string>{"diagnosis"});
  const std::string html = kscope::report_html(r, {{"diagnosis", "Diagnosis", {diagnosis}}});
  CHECK(count(html, "data-section=\"diagnosis\"") == 1);
  CHECK(contains(html, "<a href=\"#diagnosis\">Diagnosis</a>"));
  check_self_contained(html);
  // A section id is made safe for an attribute and a fragment.
  const std::string odd = kscope::report_html(r, {{"My \"notes\"", "Notes", {"<x>"}}});
  CHECK(contains(odd, "data-section=\"my--notes-\""));
  CHECK(contains(odd, "&lt;x&gt;"));
}

TEST_CASE("a report read back from its JSON: the page of what the file holds") {
  // What a program does with a saved report (kscope report, report/merge.hpp's reader):
  // the page has every section of the text of the report read back.
  const kscope::session_report r = kscope_test::full_report();
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(r.json(), &error);
  REQUIRE_MESSAGE(back.has_value(), error);
  const std::string html = back->html();
  check_sections(*back, html);
  check_self_contained(html);
  for (const char* picture : {"kscope-step-timeline", "kscope-gpu-bars", "kscope-latency"})
    CHECK_MESSAGE(count(html, "<svg class=\"" + std::string(picture) + "\"") == 1, picture);
}

TEST_CASE("reports with fewer sections: the page has exactly those") {
  SUBCASE("empty") {
    const kscope::session_report r;
    const std::string html = r.html();
    check_sections(r, html);
    check_self_contained(html);
    CHECK(contains(html, "(no scopes recorded)"));
    CHECK_FALSE(contains(html, "<svg"));
  }
  SUBCASE("host scopes only, no GPU") {
    kscope::session_report r;
    r.context.no_device_reason = "no NVIDIA driver: libcuda.so.1 not found";
    r.scopes = {kscope_test::scope(1, 0, "request", 1, 40, 4.8e5), kscope_test::scope(2, 1, "request/tokenize", 2, 40, 5e4)};
    const std::string html = r.html();
    check_sections(r, html);
    CHECK(count(html, r.context.no_device_reason) == 1);
    CHECK_FALSE(contains(html, "<svg"));
  }
  SUBCASE("CUDA events only: the GPU time bars under the scopes") {
    kscope::session_report r = kscope_test::full_report();
    r.gpu_time.reset();
    r.counters.reset();
    r.sampled_metrics.reset();
    r.top_kernels.clear();
    for (kscope::scope_report& s : r.scopes) {
      s.gpu_activity.reset();
      s.counters.reset();
    }
    const std::string html = r.html();
    check_sections(r, html);
    CHECK(count(html, "<svg class=\"kscope-gpu-bars\"") == 1);
    CHECK(contains(html, "the time between each scope&#39;s CUDA events"));
    CHECK_FALSE(contains(html, "kscope-step-timeline"));
  }
  SUBCASE("the GPU-time account has holes") {
    kscope::session_report r = kscope_test::full_report();
    r.gpu_time->unknown_reason = "CUPTI dropped 3 activity records";
    r.gpu_time->busy_share = std::nan("");
    const std::string html = r.html();
    check_sections(r, html);
    CHECK(contains(html, "GPU busy: unknown (CUPTI dropped 3 activity records)"));
  }
  SUBCASE("scopes' counters without the session's status (a report built by hand): shown") {
    kscope::session_report r = kscope_test::full_report();
    r.counters.reset();
    const std::string html = r.html();
    check_sections(r, html);
    CHECK(contains(html, "data-section=\"counters\""));
    CHECK(contains(html, "step/decode: measured roofline: "));
  }
  SUBCASE("counters without a declared placement: the roofline picture in the counters section") {
    kscope::session_report r = kscope_test::full_report();
    for (kscope::scope_report& s : r.scopes) s.roofline.reset();
    const std::string html = r.html();
    check_sections(r, html);
    CHECK_FALSE(contains(html, "data-section=\"roofline\""));
    const std::size_t counters = html.find("data-section=\"counters\"");
    const std::size_t picture = html.find("<svg class=\"kscope-roofline\"");
    REQUIRE(picture != std::string::npos);
    CHECK(picture > counters);
  }
}

TEST_CASE("the step timeline: composed from the step's percentiles, inside the step") {
  const kscope::session_report r = kscope_test::full_report();
  std::string path;
  const std::vector<kscope::step_timeline> steps = kscope::detail::compose_step_timelines(r, &path);
  CHECK(path == "step");
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].span_ns == doctest::Approx(r.scopes[0].host_ns.median));
  CHECK(steps[1].span_ns == doctest::Approx(r.scopes[0].host_ns.p99));
  const kscope::summary& busy = r.gpu_time->scopes[0].busy_per_call_ns;
  for (std::size_t i = 0; i < 2; ++i) {
    double host_end = 0, gpu = 0, gpu_end = 0;
    for (const kscope::timeline_span& s : steps[i].host) {
      CHECK(s.start_ns == doctest::Approx(host_end));  // one after the other, from the start
      host_end = s.start_ns + s.ns;
    }
    CHECK(host_end == doctest::Approx(steps[i].span_ns));
    for (const kscope::timeline_span& s : steps[i].gpu) {
      CHECK(s.start_ns >= gpu_end - 1e-6);  // no overlap
      gpu_end = s.start_ns + s.ns;
      gpu += s.ns;
    }
    CHECK(gpu_end <= steps[i].span_ns + 1e-6);
    CHECK(gpu == doctest::Approx(i == 0 ? busy.median : busy.p99));
  }
  CHECK(steps[0].host.front().label == "schedule");  // the order first seen
  // The prefill runs in 5 % of the steps: in the p99 step, not in the p50 one.
  const auto has_prefill = [](const kscope::step_timeline& t) {
    return std::any_of(t.host.begin(), t.host.end(), [](const kscope::timeline_span& s) { return s.label == "prefill"; });
  };
  CHECK_FALSE(has_prefill(steps[0]));
  CHECK(has_prefill(steps[1]));
  // No GPU-time account: no timeline.
  kscope::session_report host_only = r;
  host_only.gpu_time.reset();
  CHECK(kscope::detail::compose_step_timelines(host_only).empty());
}

TEST_CASE("a large run: the page and its pictures stay bounded") {
  // (text() of a large run takes a while: 20 000 scopes about 4 s on a 2-core VM.)
  const kscope::session_report big = kscope_test::large_report(6000, 400, 300);
  const std::string html = big.html();
  check_sections(big, html);
  check_self_contained(html);
  MESSAGE("page for 6000 scopes, 400 ranges, 300 kernels: ", html.size(), " bytes");
  CHECK(html.size() < 1'500'000);
  const kscope::session_report small = kscope_test::large_report(600, 400, 300);
  CHECK(html.size() < small.html().size() * 12 / 10);  // ten times the scopes, about the same page
  CHECK(count(html, "class=\"kscope-point\"") <= 64);
  CHECK(count(html, "class=\"kscope-bar\"") <= 20);
  CHECK(count(html, "class=\"kscope-latency-row\"") <= 16);
  CHECK(contains(html, "more not drawn"));
  CHECK(contains(html, "with less time not listed (at most 300 rows a table"));
  CHECK(contains(html, "(250 more in the JSON report)"));
  for (const char* picture : {"kscope-gpu-bars", "kscope-latency", "kscope-roofline", "kscope-step-timeline"})
    CHECK_MESSAGE(count(html, "<svg class=\"" + std::string(picture) + "\"") == 1, picture);
}

TEST_CASE("the pictures alone: bounded marks, escaped labels, no data") {
  std::vector<kscope::chart_bar> bars;
  for (int i = 0; i < 100; ++i) bars.push_back({"bar<" + std::to_string(i) + ">", 100.0 - i, "x", ""});
  const std::string b = kscope::bar_chart_svg(bars);
  CHECK(count(b, "class=\"kscope-bar\"") == 24);
  CHECK(contains(b, "76 more not drawn"));
  CHECK(contains(b, "bar&lt;0&gt;"));
  CHECK(contains(kscope::bar_chart_svg({}), "no data"));
  std::vector<kscope::latency_row> rows(40, kscope::latency_row{"r", 10, 1e3, 2e3, 1.9e3, 2.1e3, 5e3, 9e3, 2.5e3, 1e6});
  const std::string l = kscope::latency_svg(rows);
  CHECK(count(l, "class=\"kscope-latency-row\"") == 16);
  CHECK(contains(l, "latency (log scale)"));
  CHECK(contains(kscope::latency_svg({}), "no data"));
  kscope::step_timeline t{"step", 1e6, {}, {}};
  for (int i = 0; i < 100; ++i) t.host.push_back({"s" + std::to_string(i % 30), i * 1e4, 1e4 - i, ""});
  const std::string s = kscope::step_timeline_svg({t});
  CHECK(count(s, "class=\"kscope-host-span\"") == 24);
  CHECK(contains(s, "76 short spans not drawn"));
  CHECK(contains(s, "18 scopes share colours beyond the legend"));
  CHECK(kscope::detail::chart_label("αβγδεζ", 4) == "αβγ\xE2\x80\xA6");
  CHECK(kscope::detail::chart_label("abc", 4) == "abc");
}

}  // namespace html_report_test
