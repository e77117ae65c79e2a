// Tests for kscope/session/detail/exit_report.hpp, the pure parts of KSCOPE_REPORT: which
// value turns it off, which files a value asks for (extensions, directories, a trailing
// slash, ranks), and the one line on stderr for each outcome. The handler itself, fork and
// exit run in child processes: tests/process/exit_report_test.cpp.
#include <kscope/session/session.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace exit_report_test {  // one per file: the unit tests build as one program

namespace {

using kscope::detail::exit_report_format;
using kscope::detail::exit_report_plan;
using kscope::detail::exit_report_target;
using kscope::detail::plan_exit_report;

exit_report_plan plan_file(const char* value, std::optional<int> rank = std::nullopt) {
  return plan_exit_report(value, exit_report_target::missing, 42, rank);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory under /tmp, removed with its files at the end of the test.
struct temporary_directory {
  std::string path;
  temporary_directory() {
    char name[] = "/tmp/kscope_exit_report_XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  ~temporary_directory() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
  temporary_directory(const temporary_directory&) = delete;
  temporary_directory& operator=(const temporary_directory&) = delete;
};

kscope::session_report a_report() {
  kscope::session_report r;
  r.warnings.push_back("made by the test");
  return r;
}

kscope::session_report a_throwing_report() { throw std::runtime_error("feature \"x\" failed"); }

kscope::session_report a_report_throwing_anything() { throw 7; }

}  // namespace

TEST_CASE("unset, empty, blank and off values leave the exit report off") {
  using kscope::detail::exit_report_off;
  CHECK(exit_report_off(nullptr));
  CHECK(exit_report_off(""));
  CHECK(exit_report_off("  "));
  CHECK(exit_report_off("0"));
  CHECK(exit_report_off("OFF"));
  CHECK(exit_report_off("false"));
  CHECK_FALSE(exit_report_off("run.json"));
  CHECK_FALSE(exit_report_off("1"));  // a path, and said to be a wrong one at exit
  CHECK_FALSE(exit_report_off("out/"));
  CHECK(plan_file("").files.empty());
  CHECK(plan_file("").problem.empty());
  // Off registers nothing (a value that is on would register a handler in this process).
  CHECK_FALSE(kscope::detail::register_exit_report(nullptr, &a_report));
  CHECK_FALSE(kscope::detail::register_exit_report(" off ", &a_report));
  CHECK_FALSE(kscope::detail::register_exit_report("run.json", nullptr));
  if (std::getenv("KSCOPE_REPORT") == nullptr) CHECK(kscope::detail::exit_report_slot().load() == nullptr);
}

TEST_CASE("the extension chooses the format; .md is the text report; case does not matter") {
  struct expectation {
    const char* value;
    exit_report_format format;
  };
  const expectation cases[] = {{"run.json", exit_report_format::json},     {"out/run.html", exit_report_format::html},
                               {"run.txt", exit_report_format::text},      {"run.md", exit_report_format::text},
                               {"RUN.JSON", exit_report_format::json},     {"a.b/run.Html", exit_report_format::html},
                               {"/abs/path/r.v2.json", exit_report_format::json}};
  for (const expectation& e : cases) {
    CAPTURE(e.value);
    const exit_report_plan p = plan_file(e.value);
    REQUIRE(p.files.size() == 1);
    CHECK(p.files[0].path == e.value);
    CHECK(p.files[0].format == e.format);
    CHECK_FALSE(p.directory);
    CHECK(p.problem.empty());
  }
  // A file that exists is replaced: the target's kind only matters for directories.
  CHECK(plan_exit_report("run.json", exit_report_target::other, 1, std::nullopt).files.size() == 1);
}

TEST_CASE("an unknown or missing extension is named, with the choices, and nothing is planned") {
  const exit_report_plan pdf = plan_file("/x/y.pdf");
  CHECK(pdf.files.empty());
  CHECK(pdf.problem == "unknown extension '.pdf' (use .json, .html, .txt or .md, or a directory)");
  const exit_report_plan none = plan_file("/x/report");
  CHECK(none.files.empty());
  CHECK(none.problem == "no extension, and not an existing directory (use .json, .html, .txt or .md, or a directory)");
  // A dot in a directory's name, or a leading dot, is not the file's extension.
  CHECK(plan_file("out.d/report").problem.find("no extension") == 0);
  CHECK(plan_file("out/.json").problem.find("no extension") == 0);
  CHECK(plan_file("1").problem.find("no extension") == 0);
  // A control character in the extension stays visible in the message.
  CHECK(plan_file("r.j\x1bs").problem.find("'.j\\x1bs'") != std::string::npos);
}

TEST_CASE("a directory gets three files named by pid and rank; a trailing slash asks for one") {
  const exit_report_plan p = plan_exit_report("out", exit_report_target::directory, 4242, std::nullopt);
  CHECK(p.directory);
  CHECK(p.problem.empty());
  REQUIRE(p.files.size() == 3);
  CHECK(p.files[0].path == "out/kscope_report.4242.json");
  CHECK(p.files[0].format == exit_report_format::json);
  CHECK(p.files[1].path == "out/kscope_report.4242.html");
  CHECK(p.files[1].format == exit_report_format::html);
  CHECK(p.files[2].path == "out/kscope_report.4242.txt");
  CHECK(p.files[2].format == exit_report_format::text);

  const exit_report_plan slash = plan_exit_report("out/", exit_report_target::directory, 7, 3);
  REQUIRE(slash.files.size() == 3);
  CHECK(slash.files[0].path == "out/kscope_report.7.rank3.json");
  CHECK(slash.files[2].path == "out/kscope_report.7.rank3.txt");

  // A directory whose name looks like a file still is a directory.
  CHECK(plan_exit_report("runs.json", exit_report_target::directory, 1, std::nullopt).files.size() == 3);

  const exit_report_plan missing = plan_exit_report("nowhere/", exit_report_target::missing, 1, std::nullopt);
  CHECK(missing.directory);
  CHECK(missing.files.empty());
  CHECK(missing.problem == "not an existing directory (kscope creates none)");
  const exit_report_plan file = plan_exit_report("a_file/", exit_report_target::other, 1, std::nullopt);
  CHECK(file.files.empty());
  CHECK(file.problem == "not a directory");
}

TEST_CASE("a rank goes before the extension of a single file") {
  CHECK(plan_file("run.json", 3).files.at(0).path == "run.rank3.json");
  CHECK(plan_file("out.d/run.md", 0).files.at(0).path == "out.d/run.rank0.md");
  CHECK(plan_file("run.json", std::nullopt).files.at(0).path == "run.json");
}

TEST_CASE("what the path names on the file system") {
  temporary_directory dir;
  const std::string file = dir.path + "/f.json";
  std::ofstream(file) << "{}";
  using kscope::detail::exit_report_target_of;
  CHECK(exit_report_target_of(dir.path) == exit_report_target::directory);
  CHECK(exit_report_target_of(dir.path + "/") == exit_report_target::directory);
  CHECK(exit_report_target_of(file) == exit_report_target::other);
  CHECK(exit_report_target_of(dir.path + "/nothing") == exit_report_target::missing);
  CHECK(exit_report_target_of(file + "/below") == exit_report_target::missing);
}

TEST_CASE("the stderr line: where the report went, or why it did not") {
  using kscope::detail::write_exit_report;
  temporary_directory dir;

  SUBCASE("one file") {
    const std::string path = dir.path + "/r.json";
    const exit_report_plan p = plan_exit_report(path, exit_report_target::missing, 1, std::nullopt);
    CHECK(write_exit_report(p, path, &a_report) == "kscope: report written to " + path);
    const auto doc = nlohmann::json::parse(slurp(path));
    CHECK(doc["schema"] == "kscope.report/2");
    CHECK(doc["warnings"][0] == "made by the test");
  }
  SUBCASE("a text file") {
    const std::string path = dir.path + "/r.md";
    const exit_report_plan p = plan_exit_report(path, exit_report_target::missing, 1, std::nullopt);
    CHECK(write_exit_report(p, path, &a_report) == "kscope: report written to " + path);
    CHECK(slurp(path).find("made by the test") != std::string::npos);
  }
  SUBCASE("a directory: three files in one line") {
    const exit_report_plan p = plan_exit_report(dir.path, exit_report_target::directory, 99, 2);
    const std::string base = dir.path + "/kscope_report.99.rank2";
    CHECK(write_exit_report(p, dir.path, &a_report) ==
          "kscope: report written to " + base + ".json, .html and .txt");
    CHECK(nlohmann::json::parse(slurp(base + ".json"))["schema"] == "kscope.report/2");
    CHECK(slurp(base + ".html").find("<html") != std::string::npos);
    CHECK(slurp(base + ".txt").find("made by the test") != std::string::npos);
  }
  SUBCASE("a directory that cannot be written: the first error, and the old files stay") {
    const std::string below_a_file = dir.path + "/plain";
    std::ofstream(below_a_file) << "x";
    const std::string value = below_a_file + "/r.json";
    const exit_report_plan p = plan_exit_report(value, exit_report_target::missing, 1, std::nullopt);
    CHECK(write_exit_report(p, value, &a_report) == "kscope: KSCOPE_REPORT=" + value + ": cannot write " + value +
                                                         ": Not a directory: no report written");
    CHECK(slurp(below_a_file) == "x");
  }
  SUBCASE("a plan with a problem") {
    const exit_report_plan p = plan_file("/x/y.pdf");
    CHECK(write_exit_report(p, "/x/y.pdf", &a_report) ==
          "kscope: KSCOPE_REPORT=/x/y.pdf: unknown extension '.pdf' (use .json, .html, .txt or .md, or a "
          "directory): no report written");
  }
  SUBCASE("a report that throws: one line, nothing written, nothing thrown") {
    const std::string path = dir.path + "/r.json";
    const exit_report_plan p = plan_exit_report(path, exit_report_target::missing, 1, std::nullopt);
    CHECK(write_exit_report(p, path, &a_throwing_report) ==
          "kscope: KSCOPE_REPORT=" + path + ": the report could not be made (feature \"x\" failed): no report written");
    CHECK(write_exit_report(p, path, &a_report_throwing_anything) ==
          "kscope: KSCOPE_REPORT=" + path +
              ": the report could not be made (an unknown exception): no report written");
    CHECK(::access(path.c_str(), F_OK) != 0);
  }
  SUBCASE("the value is shown printable") {
    const exit_report_plan p = plan_file("a\nb");
    CHECK(write_exit_report(p, "a\nb", &a_report).find("KSCOPE_REPORT=a\\x0ab:") != std::string::npos);
  }
}

}  // namespace exit_report_test
