// Every number kscope writes must read back the same under a comma-decimal C locale.
//
// A host program that calls setlocale(LC_ALL, "de_DE.UTF-8") makes printf write
// "3135,92" and strtod stop at a '.'. kscope's JSON would then hold "median":3135,92
// (invalid) and its own reader would refuse it. Each case below switches the whole C
// locale to a comma-decimal one, writes a report, trace, SVG, CSV or text line, and
// checks that the numbers are written with '.' and read back exactly.
//
// The locale: an installed one (de_DE, fr_FR, ...) or, when none is installed, the one
// the ctest fixture `locale_setup` generated with localedef into the build tree
// (KSCOPE_TEST_LOCPATH; tests/CMakeLists.txt). Without either, every case prints a line
// that ctest's SKIP_REGULAR_EXPRESSION turns into "Skipped" — never a silent pass.
#include <kscope/bench/format.hpp>
#include <kscope/core/detail/json_reader.hpp>
#include <kscope/core/detail/number_format.hpp>
#include <kscope/core/roofline.hpp>
#include <kscope/core/sweep.hpp>
#include <kscope/device/device_info.hpp>
#include <kscope/report/compare.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/report/plot.hpp>
#include <kscope/report/report.hpp>
#include <kscope/report/trace.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

namespace {

// The first comma-decimal locale setlocale accepts, or "" (after saying why, once).
const std::string& comma_locale() {
  static const std::string name = [] {
    const char* const candidates[] = {"de_DE.UTF-8", "de_DE.utf8", "de_DE", "fr_FR.UTF-8", "fr_FR.utf8", "fr_FR",
                                      "nl_NL.UTF-8", "es_ES.UTF-8", "it_IT.UTF-8", "pt_BR.UTF-8", "ru_RU.UTF-8"};
    const auto first_comma_locale = [&]() -> std::string {
      for (const char* candidate : candidates) {
        const char* set = std::setlocale(LC_ALL, candidate);
        const bool comma = set != nullptr && std::strcmp(std::localeconv()->decimal_point, ",") == 0;
        std::setlocale(LC_ALL, "C");
        if (comma) return candidate;
      }
      return "";
    };
    std::string found = first_comma_locale();
    // glibc reads LOCPATH on every setlocale call, so the generated locale can be added now.
    // ctest sets KSCOPE_TEST_LOCPATH; run by hand, the test finds the fixture's folder
    // through the path CMake compiled in.
    const char* generated = std::getenv("KSCOPE_TEST_LOCPATH");
#ifdef KSCOPE_TEST_LOCPATH_DEFAULT
    if (generated == nullptr) generated = KSCOPE_TEST_LOCPATH_DEFAULT;
#endif
    if (found.empty() && generated != nullptr && *generated != '\0') {
      ::setenv("LOCPATH", generated, 1);
      found = first_comma_locale();
    }
    if (found.empty()) {
      std::printf("kscope locale_test: SKIPPED: no comma-decimal locale: none of de_DE, fr_FR, nl_NL, es_ES, it_IT, "
                  "pt_BR, ru_RU is installed, and the ctest fixture could not generate de_DE.UTF-8 under %s "
                  "(needs localedef, from libc-bin, and /usr/share/i18n/locales/de_DE, from the 'locales' "
                  "package; see the locale_setup test's output)\n",
                  generated ? generated : "(KSCOPE_TEST_LOCPATH not set)");
    } else {
      std::printf("kscope locale_test: using the comma-decimal locale %s\n", found.c_str());
    }
    return found;
  }();
  return name;
}

// Switches the C locale for the scope of a test case and proves it took: printf writes
// a comma, so a check that passes below passes because kscope ignored the locale.
class comma_decimal_locale {
 public:
  comma_decimal_locale() {
    if (comma_locale().empty()) return;
    active_ = std::setlocale(LC_ALL, comma_locale().c_str()) != nullptr;
    char probe[16];
    std::snprintf(probe, sizeof probe, "%.2f", 3.25);
    REQUIRE_MESSAGE(std::string(probe) == "3,25", "the locale did not switch printf to a decimal comma");
  }
  ~comma_decimal_locale() { std::setlocale(LC_ALL, "C"); }
  comma_decimal_locale(const comma_decimal_locale&) = delete;
  comma_decimal_locale& operator=(const comma_decimal_locale&) = delete;
  [[nodiscard]] bool active() const noexcept { return active_; }

 private:
  bool active_ = false;
};

// A number written with a decimal comma inside an XML/SVG attribute or text: "12,5".
bool has_decimal_comma_in_attributes(const std::string& svg) {
  static const std::regex comma_number(R"(="-?[0-9]+,[0-9])");
  return std::regex_search(svg, comma_number);
}

kscope::summary summary_around(double median) {
  kscope::summary s{};
  s.n = 40;
  s.warmup = 2;
  s.median = median;
  s.mean = median * 1.001;
  s.stddev = median * 0.013;
  s.min = median * 0.97;
  s.max = median * 1.09;
  s.mad = median * 0.004;
  s.p90 = median * 1.02;
  s.p99 = median * 1.07;
  s.median_ci = kscope::interval{median * 0.995, median * 1.005, 0.95};
  s.steady = true;
  return s;
}

// A report with fractional numbers everywhere a number is written: summaries, shares,
// declared work, a roofline placement, GPU activity.
kscope::session_report fractional_report() {
  kscope::session_report r;
  r.context.host_name = "node0";
  r.context.timestamp_utc = "2026-12-02T10:00:00Z";
  r.context.devices.push_back("NVIDIA H200: Hopper (sm_90)");
  r.context.roofs.push_back("bf16 tensor 989 TFLOP/s");
  r.context.roof_lines.push_back(kscope::roof_line{"bf16 tensor", 989.4e12, 4.8e12, false});
  r.sample_cap = 4096;
  kscope::scope_report step;
  step.id = 1;
  step.name = step.path = "step";
  step.depth = 1;
  step.calls = 40;
  step.host_ns = summary_around(3135.92);
  step.host_inclusive_ns = 125436.8;
  step.host_exclusive_ns = 62718.4;
  step.gpu_calls = 40;
  step.gpu_ns = summary_around(2718.28);
  step.gpu_total_ns = 108731.2;
  step.declared = kscope::work{2.5e9, 1.25e6};
  step.work_calls = 40;
  step.roofline = kscope::place(kscope::work{2.5e9 / 40, 1.25e6 / 40}, 2718.28e-9, 989.4e12, 4.8e12);
  step.roof = "bf16 tensor";
  step.flops_per_s_ci = kscope::interval{2.29e13, 2.31e13, 0.95};
  step.fraction_of_measured_roof = 0.0312;
  r.scopes.push_back(step);
  kscope::scope_report inner;
  inner.id = 2;
  inner.parent = 1;
  inner.name = "inner";
  inner.path = "step/inner";
  inner.depth = 2;
  inner.calls = 40;
  inner.host_ns = summary_around(1567.96);
  inner.host_inclusive_ns = 62718.4;
  inner.host_exclusive_ns = 62718.4;
  inner.share_of_parent = 0.5;
  r.scopes.push_back(inner);
  return r;
}

}  // namespace

TEST_CASE("number_format: fixed, general, round-trip and parse ignore the C locale") {
  comma_decimal_locale locale;
  if (!locale.active()) return;
  CHECK(kscope::detail::format_fixed(3135.918, 2) == "3135.92");
  CHECK(kscope::detail::format_fixed(-0.5, 1) == "-0.5");
  CHECK(kscope::detail::format_fixed(2.5, 0) == "2");  // round half to even, as printf
  CHECK(kscope::detail::format_general(0.015, 3) == "0.015");
  CHECK(kscope::detail::format_general(123456.0, 3) == "1.23e+05");
  CHECK(kscope::detail::format_round_trip(0.1) == "0.1");
  CHECK(kscope::detail::format_round_trip(0.1 + 0.2) == "0.30000000000000004");
  double v = 0;
  CHECK(kscope::detail::parse_double("3135.92", v));
  CHECK(v == 3135.92);
  CHECK(kscope::detail::parse_double("-1.5e-3", v));
  CHECK(v == -1.5e-3);
  CHECK_FALSE(kscope::detail::parse_double("3135,92", v));  // a comma is never a decimal point here
}

TEST_CASE("json_reader: numbers with a decimal point parse under a comma-decimal locale") {
  comma_decimal_locale locale;
  if (!locale.active()) return;
  const auto parsed = kscope::detail::parse_json(R"({"median": 3135.92, "ci": [1.5e-3, -0.25, 7]})");
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  CHECK(parsed.value.member_number("median", 0) == 3135.92);
  CHECK(parsed.value.find("ci")->at(0).number == 1.5e-3);
  CHECK(parsed.value.find("ci")->at(1).number == -0.25);
}

TEST_CASE("report JSON, text and HTML: '.' decimals, and the JSON reads back exactly") {
  comma_decimal_locale locale;
  if (!locale.active()) return;
  const kscope::session_report report = fractional_report();
  const std::string json = report.json();
  CHECK(json.find("3135,92") == std::string::npos);
  CHECK(json.find("3135.92") != std::string::npos);
  // kscope's own reader, and an independent one, accept it.
  const auto parsed = kscope::detail::parse_json(json);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  CHECK(nlohmann::json::accept(json));
  std::string error;
  const auto back = kscope::parse_report(json, &error);
  REQUIRE_MESSAGE(back.has_value(), error);
  REQUIRE(back->scopes.size() == 2);
  CHECK(back->scopes[0].host_ns.median == 3135.92);
  CHECK(back->scopes[0].host_ns.median_ci.lo == report.scopes[0].host_ns.median_ci.lo);
  CHECK(back->scopes[0].gpu_ns.median == 2718.28);
  CHECK(back->scopes[1].share_of_parent == 0.5);
  CHECK(back->scopes[0].declared.bytes == 1.25e6);

  const std::string text = report.text();
  CHECK(text.find("3.14 us") != std::string::npos);   // format_duration_ns
  CHECK(text.find("2.72 us") != std::string::npos);
  CHECK(text.find("±0.5%") != std::string::npos);     // format_ci_percent
  CHECK(text.find("50.0%") != std::string::npos);     // share of parent
  CHECK(text.find("3,14 us") == std::string::npos);
  CHECK(text.find("0,5%") == std::string::npos);

  const std::string html = report.html();
  CHECK(html.find("3.14 us") != std::string::npos);
  CHECK(html.find("50.0%") != std::string::npos);  // share of parent, as the text prints it
  CHECK(html.find("50,0") == std::string::npos);
  CHECK_FALSE(has_decimal_comma_in_attributes(html));
}

TEST_CASE("roofline SVG: coordinates and labels use '.'") {
  comma_decimal_locale locale;
  if (!locale.active()) return;
  const std::vector<kscope::roof_line> roofs = {{"fp32 plain", 66.9e12, 4.81e12, false},
                                                {"bf16 tensor", 989.4e12, 4.81e12, false}};
  const std::vector<kscope::roof_point> points = {
      kscope::to_roof_point("decode", kscope::place(kscope::work{1e9, 2e8}, 1.7e-3, 66.9e12, 4.81e12))};
  kscope::plot_options options;
  options.min_intensity = 0.01;  // so the axis has a decade label below 1
  const std::string svg = kscope::roofline_svg(roofs, points, options);
  CHECK_FALSE(has_decimal_comma_in_attributes(svg));
  CHECK(svg.find("66.9 TFLOP/s") != std::string::npos);  // format_si in a title
  CHECK(svg.find(">0.01<") != std::string::npos);        // a decade label below 1
  CHECK(svg.find("66,9") == std::string::npos);
  CHECK(kscope::detail::format_si(4.81e12, "B/s") == "4.81 TB/s");
}

TEST_CASE("Chrome trace: timestamps use '.', the document parses") {
  comma_decimal_locale locale;
  if (!locale.active()) return;
  std::vector<kscope::host_interval> host = {{"step", 1, 0, 1'000'500, 1'003'750}};
  kscope::gpu_activity_event kernel;
  kernel.kind = kscope::activity_kind::kernel;
  kernel.node = 1;
  kernel.thread_index = 0;
  kernel.stream = 7;
  kernel.start_ns = 1'001'250;
  kernel.end_ns = 1'002'875;
  kernel.name = "_Z4stepv";
  const std::string trace = kscope::chrome_trace_json(host, {kernel});
  const auto parsed = kscope::detail::parse_json(trace);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  CHECK(nlohmann::json::accept(trace));
  CHECK(trace.find("3.250") != std::string::npos);  // the host scope's 3.25 us duration
}

TEST_CASE("merged report and compare: text and JSON use '.'") {
  comma_decimal_locale locale;
  if (!locale.active()) return;
  kscope::session_report rank0 = fractional_report();
  rank0.context.rank = 0;
  kscope::session_report rank1 = fractional_report();
  rank1.context.rank = 1;
  rank1.scopes[0].gpu_ns = summary_around(2718.28 * 1.25);
  const kscope::merged_report merged = kscope::merge_reports({rank0.json(), rank1.json()});
  REQUIRE(merged.merged_count() == 2);
  CHECK(merged.text().find("1.11x") != std::string::npos);  // 1.25 / median(1, 1.25)
  const auto parsed = kscope::detail::parse_json(merged.json());
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  const kscope::report_comparison c = kscope::compare_reports(rank0, rank1);
  const std::string text = c.text();
  CHECK(text.find("threshold 2.0%") != std::string::npos);
  CHECK(text.find("1.250  slower") != std::string::npos);
  CHECK(text.find("1,250") == std::string::npos);
}

TEST_CASE("device line, sweep values: '.' decimals") {
  comma_decimal_locale locale;
  if (!locale.active()) return;
  kscope::device_info gpu;
  gpu.present = true;
  gpu.name = "NVIDIA H200";
  gpu.cc_major = 9;
  gpu.sm_count = 132;
  gpu.sm_clock_khz = 1'980'000;
  gpu.memory_clock_khz = 3'201'000;
  gpu.memory_bus_width_bits = 6016;
  gpu.memory_bytes = 150'754'820'096;  // 140.4 GiB
  gpu.l2_bytes = 62'914'560;           // 60 MiB
  const std::string line = kscope::describe(gpu);
  CHECK(line.find("140.4 GiB") != std::string::npos);
  CHECK(line.find("4.81 TB/s") != std::string::npos);
  CHECK(line.find("140,4") == std::string::npos);
  const std::string peaks = kscope::to_json(kscope::theoretical_peaks(gpu));
  const auto parsed = kscope::detail::parse_json(peaks);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  CHECK(kscope::param_value(0.25).to_string() == "0.25");
  CHECK(kscope::param_value(1.0 / 3).to_string() == "0.3333333333333333");
}

namespace {

kscope::bench_result fractional_bench_result() {
  kscope::bench_result r;
  r.name = "gemm";
  r.stopped = kscope::stop_reason::target_reached;
  r.wall_s = 0.75;
  r.series.samples_s = {3.13592e-3, 3.14e-3, 3.13e-3};
  r.analysis.stats = summary_around(3.13592e-3);
  r.analysis.rel_half_width = 0.005;
  return r;
}

}  // namespace

TEST_CASE("bench JSON: '.' decimals, reads back exactly") {
  comma_decimal_locale locale;
  if (!locale.active()) return;
  kscope::bench_context context;
  context.host_name = "node0";
  const kscope::bench_result r = fractional_bench_result();
  const std::string json = kscope::detail::harness::to_json(context, {r}, true);
  const auto parsed = kscope::detail::parse_json(json);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  const kscope::detail::json_value* time =
      parsed.value.find("benchmarks")->at(0).find("measurement")->find("time_s");
  REQUIRE(time != nullptr);
  CHECK(time->member_number("median", 0) == 3.13592e-3);
}

TEST_CASE("bench CSV: '.' decimals") {
  comma_decimal_locale locale;
  if (!locale.active()) return;
  const kscope::bench_result r = fractional_bench_result();
  const std::string csv = kscope::detail::harness::to_csv({r});
  CHECK(csv.find("0.0031359199999999999") != std::string::npos);  // median_s, 17 digits
  CHECK(csv.find("0,00313") == std::string::npos);
}
