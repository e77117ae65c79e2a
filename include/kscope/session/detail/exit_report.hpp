// kscope/session/detail/exit_report.hpp — KSCOPE_REPORT=path: the session's report written
// when the program exits, with no change to the program.
//
//   KSCOPE_REPORT=run.json ./server    # run.json (run.rank3.json when the process has a rank)
//   KSCOPE_REPORT=run.html ./server    # the HTML page; .txt or .md: the text report
//   KSCOPE_REPORT=out/ ./server        # out/kscope_report.<pid>[.rank<r>].json, .html and .txt
//
// session.hpp reads the variable before main, after the other switches (KSCOPE_CUPTI,
// KSCOPE_PRODUCTION, ...), and registers one std::atexit handler; nothing else changes in
// the program. At exit the handler makes the report once, writes each file all or nothing
// (core/detail/atomic_file.hpp) and says on stderr, in one line, where it went or why it
// did not:
//
//   kscope: report written to run.json
//   kscope: KSCOPE_REPORT=/x/y.pdf: unknown extension '.pdf' (use .json, .html, .txt or .md, or a directory): no report written
//
// What it must survive:
// - Scopes still open at exit (on this thread or another): report() leaves them out.
// - fork(): the child inherits the handler. It compares its pid with the one recorded at
//   registration; a child never writes the parent's single file, and in a directory it
//   writes its own files, named by its own pid (only if it exits through exit(), like
//   any atexit handler: a child ending in _exit writes nothing).
// - exit() from anywhere, with any status: the handler never changes it, throws nothing
//   (a report that throws is one line on stderr) and installs no signal handler, so a
//   process killed by a signal or ending in _exit/quick_exit writes no report.
// - The CUDA runtime's teardown, itself an atexit handler registered on the program's
//   first CUDA call: a report made after it would lose every GPU time. The handler is
//   registered again when kscope first sees the runtime up (core/detail/cuda_start_hook.hpp),
//   so that it runs first (atexit is last-in, first-out); it runs once however often it
//   was registered.
//
// The decision (which files, which format, which words) is a set of pure functions, tested
// without CUDA or a process of their own (tests/exit_report_test.cpp); the handler, fork and
// exit paths are tested in child processes (tests/process/exit_report_test.cpp).
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/atomic_file.hpp"
#include "../../core/detail/cuda_start_hook.hpp"
#include "../../core/detail/env_switch.hpp"
#include "../../core/detail/text_escape.hpp"
#include "../../report/rank.hpp"
#include "../../report/report.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#  include <sys/stat.h>
#  include <unistd.h>
#endif

namespace kscope {
namespace detail {

// The environment variable, named once for every message.
inline constexpr const char* exit_report_variable = "KSCOPE_REPORT";

enum class exit_report_format : std::uint8_t { json, html, text };

// The extension kscope gives a file of that format in a directory: "json", "html", "txt".
[[nodiscard]] constexpr const char* extension_of(exit_report_format f) noexcept {
  switch (f) {
    case exit_report_format::json: return "json";
    case exit_report_format::html: return "html";
    case exit_report_format::text: return "txt";
  }
  return "txt";
}

// What the variable's path names on the file system when the report is written: nothing
// (or nothing this process may look at), a directory, or something else (a file, a device).
enum class exit_report_target : std::uint8_t { missing, directory, other };

struct exit_report_file {
  std::string path;
  exit_report_format format = exit_report_format::json;
};

// The decision for one exit: the files to write, or why there are none.
struct exit_report_plan {
  std::vector<exit_report_file> files;  // in the order written; empty: nothing to write
  bool directory = false;               // the value asks for a directory (existing or not)
  std::string problem;                  // why nothing is written ("" when files are planned, or when off)
};

// Whether KSCOPE_REPORT's value leaves the exit report off: unset, empty or blank, or an
// off word of parse_switch (0, off, false, no, disable(d)), so that KSCOPE_REPORT=0 means
// what it says rather than a file called "0".
[[nodiscard]] KSCOPE_DECL bool exit_report_off(const char* value) noexcept;

// Pure: which files `value` asks for. A value that ends in '/' or names an existing
// directory gets kscope_report.<pid>[.rank<r>].json, .html and .txt in it; otherwise the
// extension of the last path component decides (.json, .html, .txt or .md, any case; .md
// is the text report) and a rank goes before it (rank_file_name: run.json -> run.rank3.json).
//   plan_exit_report("out/", exit_report_target::directory, 4242, 3).files[0].path
//   // "out/kscope_report.4242.rank3.json"
[[nodiscard]] KSCOPE_DECL exit_report_plan plan_exit_report(std::string_view value, exit_report_target target,
                                                             long long pid, std::optional<int> rank);

// What `path` names now (stat(2), following links).
[[nodiscard]] KSCOPE_DECL exit_report_target exit_report_target_of(const std::string& path) noexcept;

// The function that makes the report: session::global().report() in a program, a stand-in
// in the tests.
using exit_report_maker = session_report (*)();

// Makes the report and writes the plan's files, each all or nothing; returns the one line
// for stderr, without its newline: "kscope: report written to PATH" (a directory's three
// files as "DIR/kscope_report.42.json, .html and .txt"), else "kscope: KSCOPE_REPORT=VALUE:
// why: no report written". A report that throws, or a file that cannot be written, is
// such a line; nothing is thrown.
[[nodiscard]] KSCOPE_DECL std::string write_exit_report(const exit_report_plan& plan, std::string_view value,
                                                        exit_report_maker make) noexcept;

// What the handler needs, recorded at registration and never freed (the handler runs
// after static destructors that were constructed later).
struct exit_report_registration {
  std::string value;           // KSCOPE_REPORT as the program started with it
  long long pid = 0;           // the process that registered: a forked child has another
  exit_report_maker make = nullptr;
  std::atomic<bool> ran{false};  // the handler runs once, however often it was registered
};

// The registration, or nullptr before register_exit_report() (constant-initialized: no
// guard a fork could leave held).
KSCOPE_DECL std::atomic<exit_report_registration*>& exit_report_slot() noexcept;

// Registers the atexit handler unless `value` leaves the report off (exit_report_off);
// true when a handler is registered (now or by an earlier call). Called before main by
// session.hpp with std::getenv("KSCOPE_REPORT").
KSCOPE_DECL bool register_exit_report(const char* value, exit_report_maker make) noexcept;

// The atexit handler: plans (now: the directory may have been made during the run, the
// rank set), writes, prints the line. Does nothing after its first run, and nothing in a
// forked child whose report would be the parent's single file.
KSCOPE_DECL void run_exit_report() noexcept;

// The cuda_start_hook: registers the handler once more, so it runs before the CUDA
// runtime's teardown (see the top of this header).
KSCOPE_DECL void register_exit_report_again() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool exit_report_off(const char* value) noexcept {
  const switch_value v = parse_switch(value);
  return v == switch_value::unset || v == switch_value::off;
}

KSCOPE_DECL exit_report_plan plan_exit_report(std::string_view value, exit_report_target target, long long pid,
                                              std::optional<int> rank) {
  static constexpr const char* choices = "(use .json, .html, .txt or .md, or a directory)";
  exit_report_plan plan;
  if (value.empty()) return plan;
  const bool ends_in_slash = value.back() == '/';
  if (ends_in_slash || target == exit_report_target::directory) {
    plan.directory = true;
    if (target != exit_report_target::directory) {
      plan.problem = target == exit_report_target::missing ? "not an existing directory (kscope creates none)"
                                                           : "not a directory";
      return plan;
    }
    std::string base(value);
    if (!ends_in_slash) base += '/';
    base += "kscope_report." + std::to_string(pid);
    if (rank && *rank >= 0) base += ".rank" + std::to_string(*rank);
    for (exit_report_format f : {exit_report_format::json, exit_report_format::html, exit_report_format::text})
      plan.files.push_back(exit_report_file{base + "." + extension_of(f), f});
    return plan;
  }
  // A file: the extension of its last component, as rank_file_name() reads it (a leading
  // dot, ".json", is a hidden file's name, not an extension).
  const std::size_t slash = value.rfind('/');
  const std::size_t name_start = slash == std::string_view::npos ? 0 : slash + 1;
  const std::size_t dot = value.rfind('.');
  if (dot == std::string_view::npos || dot <= name_start) {
    plan.problem = std::string("no extension, and not an existing directory ") + choices;
    return plan;
  }
  std::string extension(value.substr(dot + 1));
  for (char& c : extension)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  exit_report_format format;
  if (extension == "json") format = exit_report_format::json;
  else if (extension == "html") format = exit_report_format::html;
  else if (extension == "txt" || extension == "md") format = exit_report_format::text;
  else {
    plan.problem = "unknown extension '" + printable_name(value.substr(dot)) + "' " + choices;
    return plan;
  }
  plan.files.push_back(exit_report_file{rank_file_name(value, rank), format});
  return plan;
}

KSCOPE_DECL exit_report_target exit_report_target_of(const std::string& path) noexcept {
#if defined(__unix__) || defined(__APPLE__)
  struct stat s {};
  if (::stat(path.c_str(), &s) != 0) return exit_report_target::missing;
  return S_ISDIR(s.st_mode) ? exit_report_target::directory : exit_report_target::other;
#else
  (void)path;
  return exit_report_target::missing;
#endif
}

KSCOPE_DECL std::string write_exit_report(const exit_report_plan& plan, std::string_view value,
                                          exit_report_maker make) noexcept {
  try {
    const std::string not_written =
        "kscope: " + std::string(exit_report_variable) + "=" + printable_name(value) + ": ";
    if (plan.files.empty())
      return not_written + (plan.problem.empty() ? std::string("nothing to write") : plan.problem) +
             ": no report written";
    session_report report;
    try {
      report = make();
    } catch (const std::exception& e) {
      return not_written + "the report could not be made (" + printable_name(e.what()) + "): no report written";
    } catch (...) {
      return not_written + "the report could not be made (an unknown exception): no report written";
    }
    std::vector<std::string> written;
    std::string failure;
    for (const exit_report_file& file : plan.files) {
      std::string why;
      bool ok = false;
      try {
        switch (file.format) {
          case exit_report_format::json: ok = report.write_json(file.path, &why); break;
          case exit_report_format::html: ok = report.write_html(file.path, &why); break;
          case exit_report_format::text: ok = write_file_atomically(file.path, report.text(), &why); break;
        }
      } catch (const std::exception& e) {
        why = "cannot write " + file.path + ": " + e.what();
      }
      if (ok) written.push_back(file.path);
      else if (failure.empty()) failure = why.empty() ? "cannot write " + file.path : why;
    }
    if (written.empty()) return not_written + printable_name(failure) + ": no report written";
    // A directory's files share their name up to the extension: the rest say only theirs.
    std::string line = "kscope: report written to " + printable_name(written.front());
    const std::size_t stem = written.front().rfind('.');
    for (std::size_t i = 1; i < written.size(); ++i) {
      const bool same_stem = stem != std::string::npos && written[i].compare(0, stem, written.front(), 0, stem) == 0;
      line += i + 1 == written.size() ? " and " : ", ";
      line += printable_name(same_stem ? std::string_view(written[i]).substr(stem) : std::string_view(written[i]));
    }
    if (!failure.empty()) line += "; " + printable_name(failure);
    return line;
  } catch (...) {
    return "kscope: " + std::string(exit_report_variable) + ": out of memory: no report written";
  }
}

KSCOPE_DECL std::atomic<exit_report_registration*>& exit_report_slot() noexcept {
  static std::atomic<exit_report_registration*> slot{nullptr};
  return slot;
}

KSCOPE_DECL bool register_exit_report(const char* value, exit_report_maker make) noexcept {
  if (exit_report_off(value) || make == nullptr) return false;
  std::atomic<exit_report_registration*>& slot = exit_report_slot();
  if (slot.load(std::memory_order_acquire) != nullptr) return true;
  exit_report_registration* r = new (std::nothrow) exit_report_registration;
  if (r == nullptr) return false;
  try {
    r->value = value;
  } catch (...) {
    delete r;
    return false;
  }
#if defined(__unix__) || defined(__APPLE__)
  r->pid = static_cast<long long>(::getpid());
#endif
  r->make = make;
  exit_report_registration* expected = nullptr;
  if (!slot.compare_exchange_strong(expected, r, std::memory_order_acq_rel)) {
    delete r;  // another thread registered first
    return true;
  }
  if (std::atexit(&run_exit_report) != 0) {
    std::fprintf(stderr, "kscope: %s: the exit handler could not be registered: no report will be written\n",
                 exit_report_variable);
    return false;
  }
  // If the CUDA runtime is already up (KSCOPE_CUPTI=1 probed it above), this registration
  // already runs before its teardown; the hook covers a runtime started later.
  cuda_start_hook.store(&register_exit_report_again, std::memory_order_release);
  return true;
}

KSCOPE_DECL void register_exit_report_again() noexcept {
  const exit_report_registration* r = exit_report_slot().load(std::memory_order_acquire);
  if (r != nullptr && !r->ran.load(std::memory_order_acquire)) (void)std::atexit(&run_exit_report);
}

KSCOPE_DECL void run_exit_report() noexcept {
  exit_report_registration* r = exit_report_slot().load(std::memory_order_acquire);
  if (r == nullptr || r->ran.exchange(true, std::memory_order_acq_rel)) return;
  try {
    long long pid = 0;
#if defined(__unix__) || defined(__APPLE__)
    pid = static_cast<long long>(::getpid());
#endif
    const exit_report_plan plan = plan_exit_report(r->value, exit_report_target_of(r->value), pid, current_rank());
    // A forked child runs the parent's handler too: a single file is the parent's report.
    if (pid != r->pid && !plan.directory) return;
    const std::string line = write_exit_report(plan, r->value, r->make) + "\n";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  } catch (...) {
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
