// plot.hpp: the SVG is well-formed XML (checked with xmllint when it is installed; CI
// installs libxml2-utils), has exactly one point element per drawable input point and
// one roof path per usable roof, escapes hostile labels, labels every decade; the HTML
// page embeds the SVG and the tables and loads nothing; write_text_file works and
// reports failures.
#include <kscope/report/plot.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>  // getpid: unique temporary names when ctest runs in parallel

namespace plot_test {  // one per file: the unit tests build as one program

namespace {

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool have_xmllint() { return std::system("command -v xmllint >/dev/null 2>&1") == 0; }

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("kscope_plot_test_" + std::to_string(::getpid()) + "_" + name);
}

// Runs `xmllint --noout` on the text; true when it parses (or when xmllint is missing,
// after saying so).
bool parses_as_xml(const std::string& text, const std::string& name) {
  if (!have_xmllint()) {
    MESSAGE("xmllint not installed: skipping the XML well-formedness check of " << name);
    return true;
  }
  const std::filesystem::path path = temp_file(name);
  REQUIRE(kscope::write_text_file(path.string(), text));
  const std::string command = "xmllint --noout '" + path.string() + "'";
  const int status = std::system(command.c_str());
  std::filesystem::remove(path);
  return status == 0;
}

// Roofs and points of an H200-like machine, as the session report would pass them.
std::vector<kscope::roof_line> h200_roofs() {
  return {{"fp32 plain", 66.9e12, 4.81e12, false},
          {"bf16 tensor", 1070e12, 4.81e12, false},
          {"bf16 tensor (measured)", 760e12, 4.24e12, true}};
}

std::vector<kscope::roof_point> h200_points() {
  return {{"saxpy", 1.0 / 6, 0.7e12, kscope::bound::memory},
          {"gemm bf16", 2730, 750e12, kscope::bound::compute},
          {"tiny", 0.25, 3e5, kscope::bound::latency},  // below the plotted decades: off scale
          {"copy", 0, 0, kscope::bound::memory}};        // intensity 0: off scale
}

}  // namespace

TEST_CASE("roofline SVG: well-formed, one element per point and per roof") {
  const auto roofs = h200_roofs();
  const auto points = h200_points();
  const std::string svg = kscope::roofline_svg(roofs, points);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(parses_as_xml(svg, "h200.svg"));
  CHECK(count(svg, "class=\"kscope-point\"") == points.size());
  CHECK(count(svg, "class=\"kscope-roof\"") == roofs.size());
  CHECK(count(svg, "stroke-dasharray") == 2);  // the measured roof and its legend line
  CHECK(count(svg, "data-limiter=\"memory\"") == 2);
  CHECK(count(svg, "data-limiter=\"compute\"") == 1);
  CHECK(count(svg, "data-limiter=\"latency\"") == 1);
  CHECK(count(svg, "off scale: drawn at the plot edge") == 2);  // tiny and copy
  // Decade labels on both axes, and the axis titles.
  for (const char* label : {">0.1<", ">1<", ">10<", ">100<", ">1k<", ">1 TFLOP/s<", ">100 TFLOP/s<", ">1 PFLOP/s<"}) {
    CAPTURE(label);
    CHECK(contains(svg, label));
  }
  CHECK(contains(svg, "arithmetic intensity (FLOP/byte)"));
  CHECK(contains(svg, "performance (FLOP/s)"));
  // The legend names every roof with its peaks.
  CHECK(contains(svg, ">bf16 tensor (measured)<"));
  CHECK(contains(svg, "760 TFLOP/s, 4.24 TB/s"));
}

TEST_CASE("roofline SVG: hostile labels are escaped, NaN points listed, not drawn") {
  std::vector<kscope::roof_line> roofs = {{"fp8 <tensor> & \"more\"", 2e15, 5e12, false},
                                          {"unknown roof", std::numeric_limits<double>::quiet_NaN(), 5e12, false}};
  std::vector<kscope::roof_point> points = {
      {"gemm<bf16, 'T'> & bias\x01\xff µs", 300, 1e15, kscope::bound::compute},
      {"no timing", std::numeric_limits<double>::quiet_NaN(), 1e12, kscope::bound::latency}};
  kscope::plot_options options;
  options.title = "A & B <roofline>";
  const std::string svg = kscope::roofline_svg(roofs, points, options);
  CHECK(parses_as_xml(svg, "hostile.svg"));
  CHECK_FALSE(contains(svg, "<bf16"));
  CHECK_FALSE(contains(svg, "<tensor>"));
  CHECK(contains(svg, "gemm&lt;bf16, &#39;T&#39;&gt; &amp; bias\xEF\xBF\xBD\xEF\xBF\xBD µs"));
  CHECK(contains(svg, "A &amp; B &lt;roofline&gt;"));
  CHECK(count(svg, "class=\"kscope-point\"") == 1);  // the NaN point is not drawn...
  CHECK(contains(svg, "not drawn (NaN)"));          // ...but listed
  CHECK(contains(svg, ">no timing<"));
  CHECK(count(svg, "class=\"kscope-roof\"") == 1);  // the NaN roof is left out
}

TEST_CASE("roofline SVG: no data and fixed ranges still give a valid chart") {
  const std::string empty = kscope::roofline_svg({}, {});
  CHECK(parses_as_xml(empty, "empty.svg"));
  CHECK(count(empty, "class=\"kscope-point\"") == 0);
  CHECK(contains(empty, "none known"));

  kscope::plot_options fixed;
  fixed.min_intensity = 0.01;
  fixed.max_intensity = 1000;
  fixed.min_flops_per_s = 1e9;
  fixed.max_flops_per_s = 1e15;
  const std::string svg = kscope::roofline_svg(h200_roofs(), h200_points(), fixed);
  CHECK(parses_as_xml(svg, "fixed.svg"));
  CHECK(contains(svg, ">0.01<"));
  CHECK(contains(svg, ">1k<"));
  CHECK_FALSE(contains(svg, ">10k<"));
  CHECK(contains(svg, ">1 GFLOP/s<"));
  CHECK(contains(svg, ">1 PFLOP/s<"));
  CHECK(count(svg, "class=\"kscope-point\"") == 4);
}

TEST_CASE("escaping and decade labels") {
  CHECK(kscope::detail::xml_escaped("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(kscope::detail::xml_escaped("tab\tnewline\n") == "tab\tnewline\n");
  CHECK(kscope::detail::xml_escaped("\x01") == "\xEF\xBF\xBD");
  CHECK(kscope::detail::xml_escaped("\xC3\xA9") == "\xC3\xA9");              // é kept
  CHECK(kscope::detail::xml_escaped("\xC3") == "\xEF\xBF\xBD");              // truncated
  CHECK(kscope::detail::xml_escaped("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  CHECK(kscope::detail::xml_escaped("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  CHECK(kscope::detail::decade_label(-2) == "0.01");
  CHECK(kscope::detail::decade_label(0) == "1");
  CHECK(kscope::detail::decade_label(2) == "100");
  CHECK(kscope::detail::decade_label(4) == "10k");
  CHECK(kscope::detail::decade_label(12, "FLOP/s") == "1 TFLOP/s");
  CHECK(kscope::detail::decade_label(17, "FLOP/s") == "100 PFLOP/s");
}

TEST_CASE("HTML page: embeds the SVG and escaped tables, loads nothing") {
  kscope::html_report page;
  page.title = "decode <step>";
  page.context_lines = {"NVIDIA H200: Hopper (sm_90), 132 SMs"};
  page.svg = kscope::roofline_svg(h200_roofs(), h200_points());
  page.tables.push_back({"Kernels & scopes", {"kernel", "time", "% of roof"},
                         {{"gemm<bf16>", "1.45 ms", "70 %"}, {"saxpy", "0.78 ms", "85 %"}}});
  page.html_fragments.push_back("<p class=\"note\">trusted fragment</p>");
  const std::string html = kscope::render_html(page);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(contains(html, "<meta charset=\"utf-8\">"));
  CHECK(contains(html, "<title>decode &lt;step&gt;</title>"));
  CHECK(contains(html, page.svg));
  CHECK(contains(html, "<caption>Kernels &amp; scopes</caption>"));
  CHECK(contains(html, "<td>gemm&lt;bf16&gt;</td>"));
  CHECK(count(html, "<tr>") == 3);
  CHECK(contains(html, "<p class=\"note\">trusted fragment</p>"));
  CHECK(contains(html, "NVIDIA H200: Hopper (sm_90), 132 SMs"));
  // Self-contained: no script, no external stylesheet, image or font.
  CHECK_FALSE(contains(html, "<script"));
  CHECK_FALSE(contains(html, "src="));
  CHECK_FALSE(contains(html, "href="));
  CHECK_FALSE(contains(html, "@import"));
  CHECK_FALSE(contains(html, "url("));
}

TEST_CASE("write_text_file writes and reports failures") {
  const std::filesystem::path path = temp_file("write.txt");
  std::string error;
  REQUIRE(kscope::write_text_file(path.string(), "roof\n", &error));
  CHECK(error.empty());
  std::ifstream in(path);
  std::stringstream read;
  read << in.rdbuf();
  CHECK(read.str() == "roof\n");
  std::filesystem::remove(path);
  CHECK_FALSE(kscope::write_text_file("/nonexistent-dir/kscope/out.svg", "x", &error));
  // The path and the system's reason (no such directory).
  CHECK(contains(error, "cannot write /nonexistent-dir/kscope/out.svg: No such file or directory"));
}

// ---- sweep_svg ----------------------------------------------------------------------------

namespace {

// A batch sweep as a serving loop reports it: p50 everywhere, p99 only where the point
// had enough requests, a throughput without interval, one point that could not run.
kscope::sweep_results batch_sweep() {
  kscope::sweep_results r;
  r.title = "batch";
  r.metrics = {{"ttft_p50", "ms", "TTFT p50"}, {"ttft_p99", "ms", "TTFT p99"}, {"tokens_per_s", "tokens/s", "throughput"}};
  const long long batches[] = {1, 2, 4, 8, 16, 32, 64};
  for (long long b : batches) {
    std::vector<double> ttft;
    for (long long i = 0; i < 5 * b; ++i) ttft.push_back(10.0 + 0.3 * static_cast<double>(b) + static_cast<double>(i % 7));
    const kscope::sweep_point p({{"batch", b}, {"prompt", 256}});
    if (b == 64) {
      r.add(p, std::vector<kscope::sweep_value>(3, kscope::sweep_value::absent("needs 90 GiB, 80 free")));
      continue;
    }
    r.add(p, {kscope::quantile_value(ttft, 0.5, 0.95, "requests"), kscope::quantile_value(ttft, 0.99, 0.95, "requests"),
              kscope::sweep_value::of(700.0 * static_cast<double>(b))});
  }
  return r;
}

}  // namespace

TEST_CASE("sweep_svg draws every known value once and every missing one as missing") {
  const kscope::sweep_results r = batch_sweep();
  kscope::sweep_plot_options o;
  o.title = "serving <batch> & co";
  o.panels = {{"ttft_p50", "ttft_p99"}, {"tokens_per_s"}};
  const std::string svg = kscope::sweep_svg(r, o);
  REQUIRE(parses_as_xml(svg, "sweep.svg"));
  std::size_t known = 0, missing = 0, intervals = 0;
  for (const kscope::sweep_row& row : r.rows) {
    for (const kscope::sweep_value& v : row.values) {
      known += v.known();
      missing += !v.known();
      intervals += v.known() && !std::isnan(v.ci.lo);
    }
  }
  CHECK(known == 6 + 1 + 6);  // p50 and throughput at batch 1..32; p99 at 32 only (160 requests; 16 had 80)
  CHECK(count(svg, "<g class=\"kscope-sweep-point\">") == known);
  CHECK(count(svg, "<g class=\"kscope-sweep-missing\">") == missing);
  CHECK(count(svg, "class=\"kscope-ci\"") == intervals);
  CHECK(count(svg, "<g class=\"kscope-sweep-panel\">") == 2);
  CHECK(contains(svg, "serving &lt;batch&gt; &amp; co"));
  // The reason is in the missing marker's tooltip, and the note lists where values are missing.
  CHECK(contains(svg, "TTFT p99 at batch=1: no value: p99 needs &gt;= 100 requests (5 here)"));
  CHECK(contains(svg, "TTFT p99: no value at batch = 1, 2, 4, 8, 16, 64 (the table says why)"));
  CHECK(contains(svg, "throughput: no value at batch = 64"));
  // Geometric x: log scale, one tick per swept value.
  CHECK(contains(svg, "batch (log scale)"));
  for (const char* tick : {">1<", ">2<", ">4<", ">8<", ">16<", ">32<", ">64<"}) CHECK(contains(svg, tick));
  // Throughput spans 32x: a linear axis from 0 (log only from 50x).
  CHECK_FALSE(contains(svg, "tokens/s (log scale)"));
}

TEST_CASE("sweep_svg: default panels by unit, log y for wide spans, unknown names noted") {
  kscope::sweep_results r;
  r.metrics = {{"ttft", "ms", ""}, {"queue", "ms", ""}, {"count", "", ""}};
  for (double rate : {50.0, 100.0, 150.0}) {
    const double ttft = rate < 120 ? 20.0 : 5000.0;  // past the knee: queueing
    r.add(kscope::sweep_point({{"rate", rate}}),
          {kscope::sweep_value::of(ttft), kscope::sweep_value::of(ttft / 2), kscope::sweep_value::of(rate)});
  }
  const std::string svg = kscope::sweep_svg(r);
  REQUIRE(parses_as_xml(svg, "sweep_default.svg"));
  CHECK(count(svg, "<g class=\"kscope-sweep-panel\">") == 2);  // ms, and the count
  CHECK(contains(svg, "ms (log scale)"));                       // 10 .. 5000
  CHECK(contains(svg, ">rate<"));                               // 3x span: linear x
  kscope::sweep_plot_options o;
  o.x_axis = "nope";
  o.panels = {{"ttft", "missing_metric"}};
  const std::string noted = kscope::sweep_svg(r, o);
  REQUIRE(parses_as_xml(noted, "sweep_noted.svg"));
  CHECK(contains(noted, "no axis &#39;nope&#39; in these results"));
  CHECK(contains(noted, "no metric &#39;missing_metric&#39; in these results"));
  CHECK(count(noted, "<g class=\"kscope-sweep-point\">") == 3);
}

TEST_CASE("sweep_svg: strings along x, one point, and no data at all") {
  kscope::sweep_results r;
  r.metrics = {{"t", "ms", "time"}};
  r.add(kscope::sweep_point({{"dtype", kscope::param_value("fp16")}}), {kscope::sweep_value::of(1.5)});
  r.add(kscope::sweep_point({{"dtype", kscope::param_value("bf16")}}), {kscope::sweep_value::of(1.25)});
  std::string svg = kscope::sweep_svg(r);
  REQUIRE(parses_as_xml(svg, "sweep_text.svg"));
  CHECK(contains(svg, ">fp16<"));
  CHECK(contains(svg, ">bf16<"));
  CHECK(count(svg, "<g class=\"kscope-sweep-point\">") == 2);

  kscope::sweep_results one;
  one.metrics = {{"t", "ms", "time"}};
  one.add(kscope::sweep_point({{"n", 4}}), {kscope::sweep_value::of(3)});
  svg = kscope::sweep_svg(one);
  REQUIRE(parses_as_xml(svg, "sweep_one.svg"));
  CHECK(count(svg, "<g class=\"kscope-sweep-point\">") == 1);
  CHECK_FALSE(contains(svg, "nan"));
  CHECK_FALSE(contains(svg, "inf"));

  svg = kscope::sweep_svg(kscope::sweep_results{});
  REQUIRE(parses_as_xml(svg, "sweep_empty.svg"));
  CHECK(contains(svg, "no data"));
}

TEST_CASE("sweep_svg never reads past a row pushed by hand") {
  kscope::sweep_results r = batch_sweep();
  r.rows.push_back(kscope::sweep_row{kscope::sweep_point({{"other", 1}}), {}, {}});
  const std::string svg = kscope::sweep_svg(r);
  REQUIRE(parses_as_xml(svg, "sweep_short_row.svg"));
  CHECK(contains(svg, "not measured"));
}

}  // namespace plot_test
