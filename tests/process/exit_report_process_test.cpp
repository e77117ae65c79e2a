// KSCOPE_REPORT end to end: tests/process/exit_report_program.cpp, which never mentions it,
// run in a child process with the variable set. Each run checks the exit status, the one
// line on stderr, and the files: they exist, parse, hold the scopes that closed and not
// those still open at exit, and nothing half-written is left beside them.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#ifndef KSCOPE_EXIT_REPORT_PROGRAM
#  error "KSCOPE_EXIT_REPORT_PROGRAM: the path of exit_report_program (tests/CMakeLists.txt)"
#endif

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct temporary_directory {
  std::string path;
  temporary_directory() {
    char name[] = "/tmp/kscope_exit_report_process_XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  ~temporary_directory() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
  temporary_directory(const temporary_directory&) = delete;
  temporary_directory& operator=(const temporary_directory&) = delete;

  [[nodiscard]] std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(path.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
      }
      ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
  }
};

struct run_result {
  int status = -1;  // exit status; -1 when it did not exit normally
  std::string out;
  std::string err;
  long long pid = 0;
  long long child = 0;  // "fork" mode: the child's pid
};

// Runs the program in `mode` with KSCOPE_REPORT = `value` (unset when empty optional) and
// the extra environment variables given; its stdout and stderr go to files in `scratch`.
run_result run_program(const char* mode, const std::optional<std::string>& value, const std::string& scratch,
                       const std::vector<std::pair<std::string, std::string>>& extra = {},
                       const char* program = KSCOPE_EXIT_REPORT_PROGRAM) {
  const std::string out_path = scratch + "/stdout", err_path = scratch + "/stderr";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (const char* name : {"KSCOPE_REPORT", "KSCOPE_CUPTI", "KSCOPE_PRODUCTION", "KSCOPE_METRICS", "KSCOPE_COUNTERS",
                             "KSCOPE_METRIC_SAMPLING", "RANK", "LOCAL_RANK",
                             "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
      ::unsetenv(name);
    if (value) ::setenv("KSCOPE_REPORT", value->c_str(), 1);
    for (const auto& [name, v] : extra) ::setenv(name.c_str(), v.c_str(), 1);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(120);
    ::alarm(60);  // a hang fails the run instead of the whole test
    ::execl(program, program, mode, static_cast<char*>(nullptr));
    ::_exit(121);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  run_result r;
  if (WIFEXITED(status)) r.status = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) MESSAGE("the program was killed by signal " << WTERMSIG(status));
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("pid=", 0) == 0) r.pid = std::stoll(line.substr(4));
    if (line.rfind("child=", 0) == 0) r.child = std::stoll(line.substr(6));
  }
  return r;
}

// The scope paths in a JSON report, with their calls.
std::vector<std::pair<std::string, long long>> scopes_of(const std::string& json_path) {
  const auto doc = nlohmann::json::parse(slurp(json_path));
  REQUIRE(doc["schema"] == "kscope.report/2");
  std::vector<std::pair<std::string, long long>> out;
  for (const auto& s : doc["scopes"]) out.emplace_back(s["path"].get<std::string>(), s["calls"].get<long long>());
  return out;
}

long long calls_of(const std::vector<std::pair<std::string, long long>>& scopes, const std::string& path) {
  for (const auto& [p, calls] : scopes)
    if (p == path) return calls;
  return -1;  // not in the report
}

}  // namespace

TEST_CASE("KSCOPE_REPORT=file.json: written at a normal exit, one line on stderr, status unchanged") {
  temporary_directory dir;
  const std::string path = dir.path + "/run.json";
  const run_result r = run_program("normal", path, dir.path);
  CHECK(r.status == 0);
  CHECK(r.err == "kscope: report written to " + path + "\n");
  const auto scopes = scopes_of(path);
  CHECK(calls_of(scopes, "step") == 5);
  CHECK(calls_of(scopes, "step/inner") == 5);
  CHECK(dir.entries() == std::vector<std::string>{"run.json"});  // no temporary left beside it
}

TEST_CASE("KSCOPE_REPORT=dir: three files named by pid and rank; a trailing slash too") {
  temporary_directory dir;
  const run_result r = run_program("normal", dir.path, dir.path, {{"RANK", "5"}});
  CHECK(r.status == 0);
  REQUIRE(r.pid > 0);
  const std::string stem = "kscope_report." + std::to_string(r.pid) + ".rank5";
  CHECK(r.err == "kscope: report written to " + dir.path + "/" + stem + ".json, .html and .txt\n");
  CHECK(dir.entries() == std::vector<std::string>{stem + ".html", stem + ".json", stem + ".txt"});
  CHECK(calls_of(scopes_of(dir.path + "/" + stem + ".json"), "step") == 5);
  CHECK(slurp(dir.path + "/" + stem + ".html").find("</html>") != std::string::npos);
  CHECK(slurp(dir.path + "/" + stem + ".txt").find("step") != std::string::npos);

  temporary_directory slash;
  const run_result s = run_program("normal", slash.path + "/", slash.path);
  CHECK(s.status == 0);
  const std::string stem2 = "kscope_report." + std::to_string(s.pid);
  CHECK(s.err == "kscope: report written to " + slash.path + "/" + stem2 + ".json, .html and .txt\n");
  CHECK(slash.entries() == std::vector<std::string>{stem2 + ".html", stem2 + ".json", stem2 + ".txt"});
}

TEST_CASE("KSCOPE_REPORT that cannot be used: one line saying why, no file, status 0") {
  temporary_directory dir;
  std::ofstream(dir.path + "/plain") << "x";

  const std::string below_a_file = dir.path + "/plain/run.json";
  run_result r = run_program("normal", below_a_file, dir.path);
  CHECK(r.status == 0);
  CHECK(r.err == "kscope: KSCOPE_REPORT=" + below_a_file + ": cannot write " + below_a_file +
                     ": Not a directory: no report written\n");

  const std::string missing = dir.path + "/missing/";
  r = run_program("normal", missing, dir.path);
  CHECK(r.status == 0);
  CHECK(r.err == "kscope: KSCOPE_REPORT=" + missing +
                     ": not an existing directory (kscope creates none): no report written\n");

  const std::string pdf = dir.path + "/run.pdf";
  r = run_program("normal", pdf, dir.path);
  CHECK(r.status == 0);
  CHECK(r.err == "kscope: KSCOPE_REPORT=" + pdf +
                     ": unknown extension '.pdf' (use .json, .html, .txt or .md, or a directory): no report written\n");
  CHECK(dir.entries() == std::vector<std::string>{"plain"});
}

TEST_CASE("KSCOPE_REPORT empty, off or unset: nothing written, nothing said") {
  temporary_directory dir;
  for (const std::optional<std::string>& value :
       {std::optional<std::string>(""), std::optional<std::string>("0"), std::optional<std::string>()}) {
    const run_result r = run_program("normal", value, dir.path);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
  }
  CHECK(dir.entries().empty());
}

TEST_CASE("KSCOPE_NO_ENVIRONMENT_START in every file: KSCOPE_REPORT writes nothing, says nothing") {
  // The same program built with the macro (tests/CMakeLists.txt): nothing registered the
  // exit report, so the variable is not read at all; the one built without it writes.
  temporary_directory dir;
  const std::string path = dir.path + "/run.json";
  const run_result quiet = run_program("normal", path, dir.path, {}, KSCOPE_EXIT_REPORT_PROGRAM_NO_ENVIRONMENT);
  CHECK(quiet.status == 0);
  CHECK(quiet.err.empty());
  CHECK(dir.entries().empty());
  const run_result r = run_program("normal", path, dir.path);
  CHECK(r.status == 0);
  CHECK(dir.entries() == std::vector<std::string>{"run.json"});
}

TEST_CASE("scopes still open at exit are left out; exit(3) keeps its status") {
  temporary_directory dir;
  const std::string path = dir.path + "/open.json";
  const run_result r = run_program("open", path, dir.path);
  CHECK(r.status == 0);
  CHECK(r.err == "kscope: report written to " + path + "\n");
  const auto scopes = scopes_of(path);
  CHECK(calls_of(scopes, "step") == 5);
  CHECK(calls_of(scopes, "main_open_at_exit") == -1);
  CHECK(calls_of(scopes, "worker_open_at_exit") == -1);

  const std::string path3 = dir.path + "/status3.txt";
  const run_result r3 = run_program("status3", path3, dir.path);
  CHECK(r3.status == 3);
  CHECK(r3.err == "kscope: report written to " + path3 + "\n");
  CHECK(slurp(path3).find("step") != std::string::npos);
}

TEST_CASE("a feature that throws at exit costs its own section only: the report is written, with a warning") {
  temporary_directory dir;
  const std::string path = dir.path + "/run.json";
  const run_result r = run_program("throw", path, dir.path);
  CHECK(r.status == 0);
  CHECK(r.err == "kscope: report written to " + path + "\n");
  CHECK(dir.entries() == std::vector<std::string>{"run.json"});
  const std::string written = slurp(path);
  CHECK(written.find("feature failing: no section in this report (the failing feature failed)") != std::string::npos);
}

TEST_CASE("fork: a child never writes the parent's file; in a directory it writes its own") {
  temporary_directory dir;
  const std::string path = dir.path + "/run.json";
  const run_result r = run_program("fork", path, dir.path);
  CHECK(r.status == 0);
  CHECK(r.child > 0);
  CHECK(r.err == "kscope: report written to " + path + "\n");  // the parent's line only
  const auto scopes = scopes_of(path);
  CHECK(calls_of(scopes, "parent_only") == 1);
  CHECK(calls_of(scopes, "child_only") == -1);

  temporary_directory out;
  const run_result d = run_program("fork", out.path, out.path);
  CHECK(d.status == 0);
  REQUIRE(d.pid > 0);
  REQUIRE(d.child > 0);
  const std::string parent_json = out.path + "/kscope_report." + std::to_string(d.pid) + ".json";
  const std::string child_json = out.path + "/kscope_report." + std::to_string(d.child) + ".json";
  CHECK(d.err.find("kscope: report written to " + out.path + "/kscope_report." + std::to_string(d.child) +
                   ".json, .html and .txt\n") != std::string::npos);
  CHECK(d.err.find("kscope: report written to " + out.path + "/kscope_report." + std::to_string(d.pid) +
                   ".json, .html and .txt\n") != std::string::npos);
  CHECK(out.entries().size() == 6);
  const auto parent = scopes_of(parent_json);
  CHECK(calls_of(parent, "parent_only") == 1);
  CHECK(calls_of(parent, "child_only") == -1);
  const auto child = scopes_of(child_json);
  CHECK(calls_of(child, "child_only") == 1);
  CHECK(calls_of(child, "parent_only") == -1);
  CHECK(calls_of(child, "step") == 5);  // what the parent recorded before the fork comes along
}
