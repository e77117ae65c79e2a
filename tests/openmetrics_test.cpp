// Tests of report/openmetrics.hpp (the OpenMetrics exposition of a report) and of
// session/detail/metrics_writer.hpp (KSCOPE_METRICS: the file rewritten every interval).
// tests/process/openmetrics_check.py hands the same exposition to a real parser.
#include <kscope/report/openmetrics.hpp>
#include <kscope/scope/scope.hpp>
#include <kscope/session/detail/metrics_writer.hpp>
#include <kscope/session/session.hpp>

#include "support/openmetrics_report.hpp"

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace openmetrics_test {  // one per file: the unit tests build as one program

namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const std::string& l : lines_of(text))
    if (l == line) return true;
  return false;
}

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (!first && c >= '0' && c <= '9');
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh empty directory, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("kscope_openmetrics_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

}  // namespace

TEST_CASE("openmetrics: names, types, units and values of every section, ending with # EOF") {
  const std::string text = kscope::openmetrics(kscope_test::openmetrics_report());
  INFO(text);
  REQUIRE(text.size() > 6);
  CHECK(text.substr(text.size() - 6) == "# EOF\n");
  CHECK(text.find("# EOF") == text.size() - 6);  // once, at the end

  CHECK(has_line(text, "# TYPE kscope_build_info gauge"));
  CHECK(has_line(text, "kscope_build_info{version=\"9.8.7\",device=\"NVIDIA H200\",rank=\"3\"} 1"));

  CHECK(has_line(text, "# TYPE kscope_scope_calls counter"));
  CHECK(has_line(text, "kscope_scope_calls_total{scope=\"step\",rank=\"3\"} 100"));
  CHECK(has_line(text, "# TYPE kscope_scope_host_seconds summary"));
  CHECK(has_line(text, "# UNIT kscope_scope_host_seconds seconds"));
  CHECK(has_line(text, "kscope_scope_host_seconds{scope=\"step\",rank=\"3\",quantile=\"0.5\"} 0.002"));
  CHECK(has_line(text, "kscope_scope_host_seconds{scope=\"step\",rank=\"3\",quantile=\"0.9\"} 0.0025"));
  CHECK(has_line(text, "kscope_scope_host_seconds{scope=\"step\",rank=\"3\",quantile=\"0.99\"} 0.003"));
  CHECK(has_line(text, "kscope_scope_host_seconds_sum{scope=\"step\",rank=\"3\"} 0.21"));
  CHECK(has_line(text, "kscope_scope_host_seconds_count{scope=\"step\",rank=\"3\"} 100"));
  CHECK(has_line(text, "kscope_scope_gpu_seconds{scope=\"step\",rank=\"3\",quantile=\"0.5\"} 0.0015"));
  CHECK(has_line(text, "kscope_scope_gpu_seconds_sum{scope=\"step\",rank=\"3\"} 0.155"));
  CHECK(has_line(text, "kscope_scope_gpu_seconds_count{scope=\"step\",rank=\"3\"} 100"));

  CHECK(has_line(text, "kscope_scope_kernels_total{scope=\"step\",rank=\"3\"} 400"));
  CHECK(has_line(text, "kscope_scope_kernel_seconds_total{scope=\"step\",rank=\"3\"} 0.12"));
  CHECK(has_line(text, "kscope_scope_gpu_busy_seconds_total{scope=\"step\",rank=\"3\"} 0.11"));
  CHECK(has_line(text, "kscope_scope_estimated_kernels{scope=\"step\",rank=\"3\"} 100"));
  CHECK(has_line(text, "kscope_scope_estimated_kernel_seconds{scope=\"step\",rank=\"3\"} 0.03"));
  CHECK(has_line(text, "kscope_scope_estimated_gpu_busy_seconds{scope=\"step\",rank=\"3\"} 0.03"));
  CHECK(has_line(text, "kscope_scope_copies_total{scope=\"step\",direction=\"h2d\",rank=\"3\"} 100"));
  CHECK(has_line(text, "kscope_scope_copy_bytes_total{scope=\"step\",direction=\"h2d\",rank=\"3\"} 1000000"));
  CHECK(has_line(text, "kscope_scope_copy_seconds_total{scope=\"step\",direction=\"d2h\",rank=\"3\"} 0.0003"));
  CHECK_FALSE(contains(text, "direction=\"d2d\""));  // no copy that way: no series
  CHECK(has_line(text, "kscope_scope_memsets_total{scope=\"step\",rank=\"3\"} 10"));
  CHECK(has_line(text, "kscope_scope_memset_bytes_total{scope=\"step\",rank=\"3\"} 2048"));
  CHECK(has_line(text, "kscope_scope_host_waits_total{scope=\"step\",rank=\"3\"} 100"));
  CHECK(has_line(text, "kscope_scope_host_wait_seconds_total{scope=\"step\",rank=\"3\"} 0.04"));
  // Work launched with no scope open has its kernels, and no calls or host time.
  CHECK(has_line(text, "kscope_scope_kernels_total{scope=\"(unscoped)\",rank=\"3\"} 3"));
  CHECK_FALSE(contains(text, "kscope_scope_calls_total{scope=\"(unscoped)\""));
  CHECK_FALSE(contains(text, "kscope_scope_host_seconds_count{scope=\"(unscoped)\""));

  // Traced in windows: how many, how long, what share of the run.
  CHECK(has_line(text, "# TYPE kscope_traced_windows counter"));
  CHECK(has_line(text, "kscope_traced_windows_total{rank=\"3\"} 3"));
  CHECK(has_line(text, "# UNIT kscope_traced_seconds seconds"));
  CHECK(has_line(text, "kscope_traced_seconds_total{rank=\"3\"} 0.3"));
  CHECK(has_line(text, "kscope_traced_ratio{rank=\"3\"} 0.01"));
  CHECK(has_line(text, "# UNIT kscope_gpu_busy_ratio ratio"));
  CHECK(has_line(text, "kscope_gpu_busy_ratio{rank=\"3\"} 0.75"));
  CHECK(has_line(text, "kscope_gpu_idle_ratio{rank=\"3\"} 0.25"));
  CHECK(has_line(text, "kscope_gpu_window_seconds{rank=\"3\"} 0.2"));
  CHECK(has_line(text, "kscope_gpu_window_busy_seconds{rank=\"3\"} 0.15"));
  CHECK(has_line(text, "kscope_gpu_idle_seconds{scope=\"step\",rank=\"3\"} 0.03"));
  CHECK(has_line(text, "kscope_gpu_idle_seconds{scope=\"(no scope)\",rank=\"3\"} 0.02"));
  CHECK(has_line(text, "kscope_scope_gpu_share_ratio{scope=\"step\",rank=\"3\"} 0.9997"));

  CHECK(has_line(text, "kscope_gpu_samples_total{gpu=\"0\",rank=\"3\"} 500"));
  CHECK(has_line(text, "kscope_gpu_samples_lost_total{gpu=\"0\",rank=\"3\"} 2"));
  CHECK(has_line(text, "kscope_gpu_sampled_coverage_ratio{gpu=\"0\",rank=\"3\"} 0.4"));
  CHECK(has_line(text, "kscope_gpu_sampled_busy_ratio{gpu=\"0\",rank=\"3\"} 0.8"));
  CHECK(has_line(
      text,
      "kscope_gpu_sampled_ratio{gpu=\"0\",metric=\"sm__throughput.avg.pct_of_peak_sustained_elapsed\",rank=\"3\"} 0.625"));
  CHECK(has_line(text, "kscope_gpu_sampled_value{gpu=\"0\",metric=\"dram__bytes_read.sum\",rank=\"3\"} 2500000000000"));
  CHECK(has_line(text,
                 "kscope_gpu_sampled_value{gpu=\"0\",metric=\"gpc__cycles_elapsed.avg.per_second\",rank=\"3\"} 1980000000"));
  CHECK(has_line(
      text,
      "kscope_scope_sampled_ratio{scope=\"step\",metric=\"sm__throughput.avg.pct_of_peak_sustained_elapsed\",rank=\"3\"} 0.7"));
  CHECK(has_line(text, "kscope_scope_sampled_value{scope=\"step\",metric=\"dram__bytes_read.sum\",rank=\"3\"} 3000000000000"));
  CHECK_FALSE(contains(text, "kscope_scope_sampled_value{scope=\"step\",metric=\"gpc__"));  // NaN: left out
}

TEST_CASE("openmetrics: the estimate for graph replays traced as one record is a gauge; the counters never fall") {
  // One scope, two writes: 30 recorded kernels (30 ms, 28 ms busy) and 300 estimated at the
  // first; at the second one more replay was recorded (40 kernels, 40 ms, 38 ms busy) and it
  // was slower per kernel but shorter in span, so the estimate fell to 200 (was: the counter fell).
  const auto write = [](std::uint64_t kernels, std::int64_t ns, std::int64_t busy, std::uint64_t estimated,
                        std::int64_t estimated_ns) {
    kscope::session_report r;
    kscope::scope_report s;
    s.id = 1;
    s.name = s.path = "decode";
    s.depth = 1;
    kscope::node_gpu_activity a;
    a.kernel_count = kernels + estimated;
    a.scaled_kernel_count = estimated;
    a.kernel_ns = ns + estimated_ns;
    a.scaled_kernel_ns = estimated_ns;
    a.busy_ns = busy + estimated_ns;
    a.scaled_busy_ns = estimated_ns;
    s.gpu_activity = a;
    r.scopes.push_back(s);
    return kscope::openmetrics(r);
  };
  const std::string first = write(30, 30'000'000, 28'000'000, 300, 300'000'000);
  const std::string second = write(40, 40'000'000, 38'000'000, 200, 150'000'000);
  INFO(first, second);
  CHECK(has_line(first, "kscope_scope_kernels_total{scope=\"decode\"} 30"));
  CHECK(has_line(second, "kscope_scope_kernels_total{scope=\"decode\"} 40"));
  CHECK(has_line(first, "kscope_scope_kernel_seconds_total{scope=\"decode\"} 0.03"));
  CHECK(has_line(second, "kscope_scope_kernel_seconds_total{scope=\"decode\"} 0.04"));
  CHECK(has_line(second, "kscope_scope_gpu_busy_seconds_total{scope=\"decode\"} 0.038"));
  CHECK(has_line(first, "# TYPE kscope_scope_estimated_kernels gauge"));
  CHECK(has_line(first, "kscope_scope_estimated_kernels{scope=\"decode\"} 300"));
  CHECK(has_line(second, "kscope_scope_estimated_kernels{scope=\"decode\"} 200"));
  CHECK(has_line(second, "# UNIT kscope_scope_estimated_kernel_seconds seconds"));
  CHECK(has_line(second, "kscope_scope_estimated_kernel_seconds{scope=\"decode\"} 0.15"));
  CHECK(has_line(second, "kscope_scope_estimated_gpu_busy_seconds{scope=\"decode\"} 0.15"));
  // Nothing estimated: no estimate series at all.
  const std::string exact = write(30, 30'000'000, 28'000'000, 0, 0);
  CHECK_FALSE(contains(exact, "# TYPE kscope_scope_estimated"));
}

TEST_CASE("openmetrics: every line is metadata or a sample, families whole, metadata first") {
  const std::string text = kscope::openmetrics(kscope_test::openmetrics_report());
  INFO(text);
  std::string family;                // the family whose metadata came last
  std::set<std::string> families;    // every family seen
  std::set<std::string> with_help, with_type;
  for (const std::string& line : lines_of(text)) {
    CAPTURE(line);
    REQUIRE_FALSE(line.empty());  // the format has no blank lines
    if (line == "# EOF") continue;
    if (line[0] == '#') {
      const std::string kind = line.substr(2, 4);
      REQUIRE((kind == "HELP" || kind == "TYPE" || kind == "UNIT"));
      const std::size_t name_end = line.find(' ', 7);
      REQUIRE(name_end != std::string::npos);
      const std::string name = line.substr(7, name_end - 7);
      if (name != family) {
        CHECK(families.insert(name).second);  // a family's metadata comes once, together
        family = name;
      }
      if (kind == "HELP") with_help.insert(name);
      if (kind == "TYPE") with_type.insert(name);
      continue;
    }
    // A sample: a metric name, labels, one space, a number.
    std::size_t i = 0;
    while (i < line.size() && is_name_char(line[i], i == 0)) ++i;
    const std::string name = line.substr(0, i);
    CHECK(name.rfind("kscope_", 0) == 0);
    CHECK(name.rfind(family, 0) == 0);  // a sample of the family described last
    CHECK(with_help.count(family) == 1);
    CHECK(with_type.count(family) == 1);
    REQUIRE(i < line.size());
    CHECK((line[i] == '{' || line[i] == ' '));
    const std::string value = line.substr(line.rfind(' ') + 1);
    CHECK_FALSE(value.empty());
    CHECK(value.find_first_not_of("0123456789.e+-") == std::string::npos);
  }
  CHECK(families.size() == 35);  // the hand-built report has every family
}

TEST_CASE("openmetrics: a hostile scope name is one escaped label value, never part of a name") {
  const std::string text = kscope::openmetrics(kscope_test::openmetrics_report());
  INFO(text);
  // \" for the quote, \n for the line feed, \\ for the backslash, U+FFFD for the byte 0xFF.
  const std::string escaped = "step/say \\\"hi\\\"\\nthen \\\\ go } # x \xEF\xBF\xBD end";
  CHECK(has_line(text, "kscope_scope_calls_total{scope=\"" + escaped + "\",rank=\"3\"} 7"));
  CHECK(has_line(text, "kscope_scope_host_seconds_count{scope=\"" + escaped + "\",rank=\"3\"} 7"));
  CHECK_FALSE(contains(text, "\xff"));
  for (const std::string& line : lines_of(text)) {
    if (line[0] == '#') continue;
    const std::string name = line.substr(0, line.find_first_of("{ "));
    CHECK(name.find("say") == std::string::npos);
  }
  // The line feed was escaped: "then" never starts a line.
  for (const std::string& line : lines_of(text)) CHECK(line.rfind("then", 0) == std::string::npos);
}

TEST_CASE("openmetrics: a value the report does not have is left out, never NaN") {
  const std::string text = kscope::openmetrics(kscope_test::openmetrics_report());
  INFO(text);
  CHECK_FALSE(contains(text, "NaN"));
  CHECK_FALSE(contains(text, "nan"));
  CHECK_FALSE(contains(text, "Inf"));
  CHECK_FALSE(contains(text, "inf "));
  const std::string hostile = "scope=\"step/say \\\"hi\\\"\\nthen \\\\ go } # x \xEF\xBF\xBD end\",rank=\"3\"";
  CHECK(has_line(text, "kscope_scope_host_seconds{" + hostile + ",quantile=\"0.5\"} 1e-06"));
  CHECK_FALSE(contains(text, "kscope_scope_host_seconds{" + hostile + ",quantile=\"0.9\"}"));  // p90 NaN
  CHECK(has_line(text, "kscope_scope_host_seconds{" + hostile + ",quantile=\"0.99\"} 4e-06"));
  // No sample kept: no quantile, the count and sum all the same.
  CHECK_FALSE(contains(text, "kscope_scope_host_seconds{scope=\"step/idle\""));
  CHECK(has_line(text, "kscope_scope_host_seconds_count{scope=\"step/idle\",rank=\"3\"} 0"));
  CHECK(has_line(text, "kscope_scope_host_seconds_sum{scope=\"step/idle\",rank=\"3\"} 0"));
  // A GPU share the report does not have (NaN) is not a series.
  CHECK_FALSE(contains(text, "kscope_scope_gpu_share_ratio{scope=\"step/say"));

  kscope::session_report r = kscope_test::openmetrics_report();
  r.gpu_time->busy_share = std::nan("");
  const std::string no_busy = kscope::openmetrics(r);
  CHECK_FALSE(contains(no_busy, "kscope_gpu_busy_ratio"));  // a family with nothing is left out whole
  CHECK_FALSE(contains(no_busy, "kscope_gpu_idle_ratio"));
  r.scopes[0].host_inclusive_ns = std::nan("");
  const std::string no_sum = kscope::openmetrics(r);
  CHECK_FALSE(contains(no_sum, "kscope_scope_host_seconds_sum{scope=\"step\""));
  CHECK_FALSE(contains(no_sum, "kscope_scope_host_seconds_count{scope=\"step\""));  // both or neither
  CHECK(contains(no_sum, "kscope_scope_host_seconds{scope=\"step\",rank=\"3\",quantile=\"0.5\"}"));
}

TEST_CASE("openmetrics: an empty report is the build info and # EOF; two scopes with one path give one series") {
  kscope::session_report empty;
  empty.context.kscope_version = "1.2.3";
  const std::string text = kscope::openmetrics(empty);
  CHECK(text ==
        "# HELP kscope_build_info kscope version, the run's first GPU and its rank (labels); the value is 1.\n"
        "# TYPE kscope_build_info gauge\n"
        "kscope_build_info{version=\"1.2.3\"} 1\n"
        "# EOF\n");

  kscope::session_report r;
  kscope::scope_report a;
  a.id = 1;
  a.name = a.path = "dup";
  a.calls = 4;
  kscope::scope_report b = a;
  b.id = 2;
  b.calls = 5;
  r.scopes = {a, b};
  const std::string twice = kscope::openmetrics(r);
  INFO(twice);
  CHECK(has_line(twice, "kscope_scope_calls_total{scope=\"dup\"} 4"));
  CHECK_FALSE(contains(twice, "kscope_scope_calls_total{scope=\"dup\"} 5"));
}

TEST_CASE("openmetrics: every metric family is documented in docs/openmetrics.md") {
  const std::string doc = read_file(fs::path(KSCOPE_SOURCE_DIR) / "docs" / "openmetrics.md");
  REQUIRE_FALSE(doc.empty());
  const std::string text = kscope::openmetrics(kscope_test::openmetrics_report());
  std::set<std::string> written;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::string name = line.substr(7, line.find(' ', 7) - 7);
    const std::string type = line.substr(line.rfind(' ') + 1);
    const std::string sample = type == "counter" ? name + "_total" : name;
    CAPTURE(sample);
    CHECK(contains(doc, "| `" + sample + "` | " + type + " |"));
    written.insert(sample);
  }
  CHECK(written.size() == 35);
  // And the other way: every metric row of the page is a family the code writes.
  std::size_t rows = 0;
  for (const std::string& line : lines_of(doc)) {
    if (line.rfind("| `kscope_", 0) != 0) continue;
    const std::string name = line.substr(3, line.find('`', 3) - 3);
    CAPTURE(name);
    CHECK(written.count(name) == 1);
    ++rows;
  }
  CHECK(rows == written.size());
}

TEST_CASE("session::openmetrics() holds the running program's scopes") {
  auto& session = kscope::session::global();
  session.reset();
  for (int i = 0; i < 5; ++i) {
    KSCOPE_SCOPE("om_scope");
  }
  const std::string text = session.openmetrics();
  INFO(text);
  bool found = false;
  for (const std::string& line : lines_of(text))
    if (line.rfind("kscope_scope_calls_total{scope=\"om_scope\"", 0) == 0) found = line.substr(line.size() - 2) == " 5";
  CHECK(found);
  CHECK(text.substr(text.size() - 6) == "# EOF\n");
  session.reset();
}

TEST_CASE("KSCOPE_METRICS_INTERVAL: seconds with decimals; anything else names itself and gives the default") {
  using kscope::detail::parse_metrics_interval;
  CHECK(parse_metrics_interval("2.5").seconds == 2.5);
  CHECK(parse_metrics_interval("2.5").warning.empty());
  CHECK(parse_metrics_interval(" 0.2 ").seconds == 0.2);
  CHECK(parse_metrics_interval("1e1").seconds == 10);
  for (const char* absent : {static_cast<const char*>(nullptr), "", "  "}) {
    CHECK(parse_metrics_interval(absent).seconds == 10);
    CHECK(parse_metrics_interval(absent).warning.empty());
  }
  for (const char* bad : {"abc", "0", "-1", "0.05", "1e9", "nan", "inf", "2.5s", "2,5"}) {
    CAPTURE(bad);
    const kscope::detail::metrics_interval_setting s = parse_metrics_interval(bad);
    CHECK(s.seconds == 10);
    CHECK(contains(s.warning, "KSCOPE_METRICS_INTERVAL=\"" + std::string(bad) + "\""));
    CHECK(contains(s.warning, "the default, 10 s, is used"));
  }
  // A control character in the value is shown, not sent to the terminal.
  CHECK(contains(parse_metrics_interval("x\x1b[2J").warning, "\\x1b"));
}

TEST_CASE("metrics_file_writer: rewrites the file every interval, and once more when stopped") {
  temp_dir dir;
  const fs::path file = dir.path / "m.prom";
  std::atomic<int> made{0};
  kscope::detail::metrics_file_writer w;
  REQUIRE(w.start(file.string(), std::chrono::milliseconds(20), [&made] {
    return "kscope_test_made " + std::to_string(++made) + "\n# EOF\n";
  }));
  CHECK(w.running());
  CHECK_FALSE(w.start(file.string(), std::chrono::milliseconds(20), [] { return std::string(); }));  // once
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (w.writes() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(w.writes() >= 3);
  w.stop_and_write();
  CHECK_FALSE(w.running());
  const int last = made.load();
  CHECK(read_file(file) == "kscope_test_made " + std::to_string(last) + "\n# EOF\n");
  CHECK(w.failures() == 0);
  // Only the file: no temporary left beside it.
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) entries += e.path().filename() == "m.prom" ? 1 : 100;
  CHECK(entries == 1);
  w.stop_and_write();  // stopped already: nothing more
  CHECK(made.load() == last);
}

TEST_CASE("metrics_file_writer: a path that cannot be written is said once, and the writer goes on") {
  temp_dir dir;
  const std::string path = (dir.path / "no such directory" / "m.prom").string();
  std::vector<std::string> said;
  std::mutex said_mutex;
  kscope::detail::metrics_file_writer w;
  REQUIRE(w.start(path, std::chrono::milliseconds(10), [] { return std::string("# EOF\n"); },
                  [&](const std::string& line) {
                    std::lock_guard<std::mutex> lock(said_mutex);
                    said.push_back(line);
                  }));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (w.failures() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(w.failures() >= 3);
  // The directory appears: the next interval writes the file.
  fs::create_directories(dir.path / "no such directory");
  while (w.writes() < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(w.writes() >= 1);
  w.stop_and_write();
  std::lock_guard<std::mutex> lock(said_mutex);
  REQUIRE(said.size() == 1);
  CHECK(contains(said[0], "KSCOPE_METRICS: cannot write " + path + ": No such file or directory"));
}

TEST_CASE("metrics_file_writer: a forked child neither stops the parent's thread nor writes its file") {
  temp_dir dir;
  const fs::path file = dir.path / "m.prom";
  kscope::detail::metrics_file_writer w;
  REQUIRE(w.start(file.string(), std::chrono::seconds(60), [] { return "pid " + std::to_string(::getpid()) + "\n"; }));
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    w.stop_and_write();  // the exit handler's call: the thread is the parent's
    ::_exit(fs::exists(file) ? 1 : 0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(w.running());
  w.stop_and_write();
  CHECK(read_file(file) == "pid " + std::to_string(::getpid()) + "\n");
}

}  // namespace openmetrics_test
