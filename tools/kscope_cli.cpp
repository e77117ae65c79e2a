// kscope — the command-line tool: merge per-rank reports or traces, print a report, compare two runs.
//
//   kscope merge out.json run.rank0.json run.rank1.json ...   merged table + kscope.merged/1 JSON
//   kscope merge out.trace.json r0.trace.json r1.trace.json   one Chrome trace, a process group per rank
//   kscope report run.json [--format text|markdown|json|html|folded-host|folded-gpu]
//                                                              the report's text tables, or flame-graph input
//   kscope compare baseline.json candidate.json [--threshold 0.02] [--thresholds FILE]
//                  [--allow-missing] [--format text|markdown|json]
//                                                              CI gate on scope / benchmark medians
//   kscope diagnose run.json                                   the serving diagnosis of a saved report
//   kscope help [COMMAND], kscope COMMAND --help, kscope --version
//
// Options follow the common conventions: "--name value" and "--name=value" are the same,
// "--" ends the options (a file named "-x" can follow it), and options may come before,
// between or after the files. "-" as an input file is standard input. A usage error is
// one line on stderr that names the mistake and points at the command's --help.
//
// Exit codes: exit_codes_text below, printed by `kscope --help`; README.md has the same
// table ("Command-line tool"), and ctest's cli_exit_codes checks that the two agree and that
// each code is what the tool returns for a case (tools/exit_codes.cmake).
// A different GPU, driver or kscope version between baseline and candidate is a warning
// (stderr and the table), not a failure. Errors go to stderr; results to stdout. Bad
// files never crash the tool: an input over 256 MiB (kscope::report_max_input_bytes) is
// refused before it is read, and everything the reader keeps is bounded (merge.hpp).
#include <kscope/core/config.hpp>  // KSCOPE_VERSION_STRING
#include <kscope/core/text.hpp>  // printable_text, parse_number, write_text_file
#include <kscope/report/compare.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/report/folded.hpp>
#include <kscope/report/report.hpp>
#include <kscope/report/trace_merge.hpp>
#include <kscope/verdict/diagnose.hpp>
#include <kscope/verdict/diagnosis_page.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int exit_ok = 0;
constexpr int exit_slower = 1;
constexpr int exit_usage = 2;
constexpr int exit_bad_input = 3;
constexpr int exit_write_failed = 4;
constexpr int exit_incomplete = 5;
constexpr int exit_not_comparable = 6;

// One line per code (continued lines indented further); README.md's table says the same
// words, and tools/exit_codes.cmake compares them.
const char* const exit_codes_text =
    "exit codes:\n"
    "  0  success; compare: something was compared, and no time is slower or missing\n"
    "  1  compare: a time is slower than the baseline (the CI gate failed)\n"
    "  2  usage error: a wrong command or option, missing or bad arguments, a malformed\n"
    "     thresholds file, or a trace and a report given to one merge\n"
    "  3  an input is unreadable, not JSON, not a document the command reads, or over a\n"
    "     limit (merge: the other inputs are still merged and written)\n"
    "  4  the output could not be written: the merged file, or standard output (a full\n"
    "     disk, a closed pipe)\n"
    "  5  compare incomplete: the runs share no timed scope or benchmark, or a baseline time\n"
    "     is missing in the candidate (without --allow-missing)\n"
    "  6  compare refused: a merged report (it keeps no intervals), or two documents of\n"
    "     different formats\n";

const char* const usage_text =
    "usage: kscope COMMAND [ARGS...]\n"
    "  kscope merge OUT.json RANK0.json [RANK1.json ...]   merge per-rank reports, or traces\n"
    "  kscope report FILE.json [--format F]                print a report (text, markdown, json,\n"
    "                                                      an HTML page), or its folded stacks\n"
    "  kscope compare BASELINE.json CANDIDATE.json [...]   CI gate: exit 1 when slower\n"
    "  kscope diagnose FILE.json                           a serving loop's findings\n"
    "  kscope help [COMMAND]                               this text, or a command's\n"
    "  kscope --version                                    the kscope version\n"
    "'kscope help COMMAND' or 'kscope COMMAND --help' describes a command and its options.\n"
    "Options take their value as '--name value' or '--name=value'; '--' ends the options.\n"
    "inputs: at most 256 MiB each; larger files are refused before they are read; '-' reads\n"
    "  standard input\n";

const char* const merge_help =
    "usage: kscope merge OUT.json RANK0.json [RANK1.json ...] [--wall-clock]\n"
    "  Reports: merges per-rank kscope.report files (kscope::write_json_for_rank): prints\n"
    "  per-rank and across-rank tables (the slowest rank per scope) and writes kscope.merged/1\n"
    "  JSON to OUT.json.\n"
    "  Traces: merges per-rank Chrome traces (session::write_trace; any {\"traceEvents\": ...}\n"
    "  file) into one trace that Perfetto opens, one group of processes per rank: colliding\n"
    "  pids and flow ids are moved apart, the traces of one host are placed on its one clock,\n"
    "  and each host's time line starts at 0 (steady clocks differ between hosts).\n"
    "  Which of the two is told by the files' contents; a trace and a report together are a\n"
    "  usage error. An unreadable input is reported (exit 3) and the others are still merged.\n"
    "options:\n"
    "  --wall-clock         traces: line up the hosts by their wall clocks (as close as the\n"
    "                       hosts' clocks agree: NTP keeps them within about a millisecond)\n";

const char* const report_help =
    "usage: kscope report FILE.json [--format F]\n"
    "  Prints a kscope.report file, /2 or /1 ('-': standard input), as a running program prints\n"
    "  it.\n"
    "options:\n"
    "  --format F           text (default: the tables), markdown (the tables in a fenced block,\n"
    "                       for a pull-request comment), json (the report again, as kscope\n"
    "                       writes it: what this version reads of the file), html (the\n"
    "                       report page with the serving diagnosis, self-contained), folded-host or\n"
    "                       folded-gpu (the scope tree as folded stacks, 'a;b;c self_ns' per\n"
    "                       line, for flamegraph.pl, inferno or speedscope: host time, or GPU\n"
    "                       time: CUPTI's kernels, else the CUDA events'; notes on stderr)\n";

const char* const diagnose_help =
    "usage: kscope diagnose FILE.json\n"
    "  Prints the serving diagnosis of a saved kscope.report file ('-': standard input), as\n"
    "  kscope::diagnose() gives it in the running program: each finding with the numbers it\n"
    "  rests on and what to try. It reads the scopes, their GPU activity and verdicts and the\n"
    "  GPU-time section; a report without a GPU-time section (no CUPTI) gets only the\n"
    "  findings that need none, and says so.\n";

const char* const compare_help =
    "usage: kscope compare BASELINE.json CANDIDATE.json [options]\n"
    "  Compares two runs name by name, on medians and their 95% intervals:\n"
    "    kscope.report/2   session reports (and /1), scope by scope (host and GPU time)\n"
    "    kscope.bench/2    kscope bench results (and /1), benchmark by benchmark (GPU time)\n"
    "    Google Benchmark JSON (--benchmark_out=FILE --benchmark_out_format=json), benchmark\n"
    "                      by benchmark (real time); the repetitions are the samples, so run\n"
    "                      with --benchmark_repetitions=10 (at least 6 for an interval)\n"
    "  The verdict is the library's (kscope::compare_summaries): 'slower' when the interval\n"
    "  of the ratio candidate/baseline, formed from the two median intervals, lies above\n"
    "  1 + threshold; 'faster' below 1 - threshold; 'same' within 1 +- threshold;\n"
    "  'inconclusive' otherwise. The gate fails on a slower time, when nothing was compared,\n"
    "  and when a baseline time is missing in the candidate. A different GPU, driver or\n"
    "  kscope version is a warning. Merged reports (kscope.merged/1) are refused: they keep\n"
    "  no intervals.\n"
    "options:\n"
    "  --threshold X        the relative change that matters: a fraction (0.02, the default)\n"
    "                       or a percentage (2%)\n"
    "  --thresholds FILE    per-name thresholds, one 'THRESHOLD NAME' per line: THRESHOLD a\n"
    "                       fraction (0.05) or percentage (5%), NAME a scope path or benchmark\n"
    "                       name where '*' matches anything ('gemm (n=*)'); '#' starts a\n"
    "                       comment line. An exact name wins over a pattern, a longer pattern\n"
    "                       over a shorter; a rule that matches nothing is a warning\n"
    "  --allow-missing      a baseline time missing in the candidate does not fail the gate\n"
    "  --format F           text (default), markdown (a pull-request comment) or json\n"
    "                       (kscope.compare/1, for scripts); the exit code is the same\n";

// The report's text inside a markdown code block. The fence is longer than any run of
// backticks in the text (names and messages come from the file), so none of them closes it.
std::string markdown_code_block(const std::string& text) {
  std::size_t longest = 0, run = 0;
  for (const char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<std::size_t>(3, longest + 1), '`');
  return fence + "text\n" + text + (text.empty() || text.back() == '\n' ? "" : "\n") + fence + "\n";
}

// "300.0 MiB"
std::string mebibytes(double bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

// Reads a whole input, refusing one over kscope::report_max_input_bytes: a regular file
// by its size before any byte is read, anything else (a pipe, /dev/zero) as soon as it
// passes the limit, so a huge or endless input never costs more than the limit.
bool read_file(const std::string& path, std::string& out, std::string& error) {
  constexpr std::size_t limit = kscope::report_max_input_bytes;
  const bool from_stdin = path == "-";
  const std::string shown = from_stdin ? std::string("standard input") : kscope::printable_text(path);
  const auto too_large = [&](const std::string& what) {
    error = shown + ": " + what + " (the limit for a kscope document is " + mebibytes(static_cast<double>(limit)) + ")";
    return false;
  };
  struct stat named {};
  if (!from_stdin && ::stat(path.c_str(), &named) == 0 && S_ISDIR(named.st_mode)) {
    error = shown + ": is a directory, not a file (name a report file inside it)";
    return false;
  }
  std::FILE* f = from_stdin ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) {
    error = shown + ": cannot open: " + std::strerror(errno);
    return false;
  }
  const auto close = [&] {
    if (!from_stdin) std::fclose(f);
  };
  out.clear();
  struct stat info {};
  if (::fstat(::fileno(f), &info) == 0 && S_ISREG(info.st_mode)) {
    if (static_cast<unsigned long long>(info.st_size) > limit) {
      close();
      return too_large(mebibytes(static_cast<double>(info.st_size)) + ", too large: refused without reading it");
    }
    out.reserve(static_cast<std::size_t>(info.st_size));  // one allocation, no doubling
  }
  char buf[65536];
  std::size_t n;
  bool over = false;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (n > limit - out.size()) {
      over = true;
      break;
    }
    out.append(buf, n);
  }
  const bool failed = std::ferror(f) != 0;
  const int read_errno = errno;
  close();
  if (over) {
    out.clear();
    out.shrink_to_fit();
    return too_large("more than " + mebibytes(static_cast<double>(limit)) + " of input: too large, reading stopped");
  }
  if (failed) {
    error = shown + ": read error: " + std::strerror(read_errno != 0 ? read_errno : EIO);
    return false;
  }
  return true;
}

// The first failed write to standard output (its errno), 0 while none failed.
int stdout_error = 0;

// Writes a result to standard output. The text may hold any byte a report's names hold
// (fputs would stop at a NUL).
void print(const std::string& text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() && stdout_error == 0)
    stdout_error = errno != 0 ? errno : EIO;
}

// The exit code once the results are printed: a result that did not reach standard output
// (a full disk, `> /dev/full`) must not pass as a success, or a CI step would read an
// empty or cut table as a pass.
int finish_output(int code) {
  errno = 0;
  if (std::fflush(stdout) != 0 && stdout_error == 0) stdout_error = errno != 0 ? errno : EIO;
  if (std::ferror(stdout) != 0 && stdout_error == 0) stdout_error = EIO;
  if (stdout_error == 0) return code;
  std::fprintf(stderr, "kscope: cannot write to standard output: %s\n", std::strerror(stdout_error));
  return exit_write_failed;
}

// All or nothing (a temporary renamed over the target); `error` gets the path and reason.
bool write_file(const std::string& path, const std::string& text, std::string& error) {
  return kscope::write_text_file(path, text, &error);
}

// The help text of a command, nullptr for an unknown one.
const char* help_for(const std::string& command) {
  if (command == "merge") return merge_help;
  if (command == "report") return report_help;
  if (command == "compare") return compare_help;
  if (command == "diagnose") return diagnose_help;
  return nullptr;
}

// A command's usage error: the reason and where the help is, on stderr (the help itself is
// one command away, and a long text would push the reason off the screen).
int usage_error(const char* command, const std::string& why) {
  std::fprintf(stderr, "kscope %s: %s (kscope %s --help for its usage)\n", command, why.c_str(), command);
  return exit_usage;
}

// One option a command accepts.
struct option_spec {
  const char* name;  // "--threshold"
  bool takes_value;
};

// A command line split into options and files.
struct parsed_arguments {
  std::vector<std::pair<std::string, std::string>> options;  // in order; flags have ""
  std::vector<std::string> files;
  bool help = false;  // --help or -h
  std::string error;  // a usage error, "" when none
};

// "--name value" and "--name=value" alike, "--" ends the options, "-h"/"--help" anywhere
// asks for help (and wins over any error, as in most tools).
parsed_arguments parse_arguments(const std::vector<std::string>& args, std::initializer_list<option_spec> specs) {
  parsed_arguments out;
  bool options_ended = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_ended || a.size() < 2 || a[0] != '-') {
      out.files.push_back(a);
      continue;
    }
    if (a == "--") {
      options_ended = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      out.help = true;
      continue;
    }
    const std::size_t equals = a.find('=');
    const std::string name = a.substr(0, equals);
    const option_spec* spec = nullptr;
    for (const option_spec& s : specs)
      if (name == s.name) spec = &s;
    if (spec == nullptr) {
      if (out.error.empty()) out.error = "unknown option '" + name + "'";
      continue;
    }
    std::string value;
    if (!spec->takes_value) {
      if (equals != std::string::npos && out.error.empty()) out.error = "option '" + name + "' takes no value";
    } else if (equals != std::string::npos) {
      value = a.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else if (out.error.empty()) {
      out.error = name + " needs a value";
    }
    out.options.emplace_back(name, value);
  }
  return out;
}

// Merges per-rank traces (docs[i] is args[i + 1]; read_errors[i] why it could not be read).
int run_merge_traces(const std::vector<std::string>& args, std::vector<std::string>& docs,
                     const std::vector<std::string>& read_errors, bool wall_clock) {
  std::vector<kscope::trace_merge_input> inputs;
  for (std::size_t i = 1; i < args.size(); ++i)
    inputs.push_back({args[i] == "-" ? std::string("standard input") : args[i], std::move(docs[i - 1])});
  kscope::trace_merge_options options;
  options.align_hosts_by_wall_clock = wall_clock;
  kscope::merged_trace merged = kscope::merge_traces(inputs, options);
  inputs.clear();  // the texts are no longer needed; the merged trace may be as large
  bool bad = false;
  for (std::size_t i = 0; i < merged.inputs.size(); ++i) {
    kscope::merged_trace_input& in = merged.inputs[i];
    // An unreadable file is an empty text to merge_traces; say why it really failed (the
    // reader's message starts with the file's name, which the lines below print already).
    if (!read_errors[i].empty()) {
      const std::string named = (args[i + 1] == "-" ? std::string("standard input")
                                                    : kscope::printable_text(args[i + 1])) + ": ";
      in.error = read_errors[i].rfind(named, 0) == 0 ? read_errors[i].substr(named.size()) : read_errors[i];
    }
    if (in.error.empty()) continue;
    bad = true;
    std::fprintf(stderr, "kscope merge: %s: %s\n", kscope::printable_text(args[i + 1]).c_str(),
                 kscope::printable_text(in.error).c_str());
  }
  print(merged.text());
  if (merged.merged_count() == 0) {
    std::fprintf(stderr, "kscope merge: no trace could be merged: %s not written\n",
                 kscope::printable_text(args[0]).c_str());
    return exit_bad_input;
  }
  std::string write_error;
  if (!write_file(args[0], merged.json, write_error)) {
    std::fprintf(stderr, "kscope: %s\n", kscope::printable_text(write_error).c_str());
    return exit_write_failed;
  }
  return bad ? exit_bad_input : exit_ok;
}

int run_merge(const std::vector<std::string>& raw_args) {
  const parsed_arguments parsed = parse_arguments(raw_args, {{"--wall-clock", false}});
  if (parsed.help) {
    print(merge_help);
    print(exit_codes_text);
    return exit_ok;
  }
  if (!parsed.error.empty()) return usage_error("merge", parsed.error);
  const bool wall_clock = !parsed.options.empty();  // --wall-clock is the only option
  const std::vector<std::string>& args = parsed.files;
  if (args.size() < 2) return usage_error("merge", "needs an output file and at least one rank report or trace");
  std::vector<std::string> docs;
  std::vector<std::string> read_errors(args.size() - 1);
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string text;
    if (!read_file(args[i], text, read_errors[i - 1])) text.clear();  // kept in place: positions stay
    docs.push_back(std::move(text));
  }
  // Traces or reports, told by their contents; one merge takes one kind.
  std::size_t first_trace = docs.size(), first_report = docs.size();
  for (std::size_t i = 0; i < docs.size(); ++i) {
    if (!read_errors[i].empty()) continue;
    const kscope::document_kind kind = kscope::identify_document(docs[i]);
    if (kind == kscope::document_kind::chrome_trace && first_trace == docs.size()) first_trace = i;
    if (kind == kscope::document_kind::kscope_document && first_report == docs.size()) first_report = i;
  }
  if (first_trace < docs.size() && first_report < docs.size())
    return usage_error("merge", kscope::printable_text(args[first_trace + 1]) + " is a trace and " +
                                    kscope::printable_text(args[first_report + 1]) +
                                    " a kscope document: merge traces with traces, reports with reports");
  if (first_trace < docs.size()) return run_merge_traces(args, docs, read_errors, wall_clock);
  if (wall_clock) return usage_error("merge", "--wall-clock applies to traces, and no input is a trace");
  kscope::merged_report merged = kscope::merge_reports(docs);
  bool bad = false;
  for (kscope::merge_input& in : merged.inputs) {
    // An unreadable file is an empty document to merge_reports; say why it really failed.
    if (!read_errors[in.index].empty()) in.error = "input " + std::to_string(in.index) + ": " + read_errors[in.index];
    if (in.error.empty()) continue;
    bad = true;
    std::fprintf(stderr, "kscope: %s: %s\n", kscope::printable_text(args[in.index + 1]).c_str(),
                 kscope::printable_text(in.error).c_str());
  }
  print(merged.text());
  std::string write_error;
  if (!write_file(args[0], merged.json(), write_error)) {
    std::fprintf(stderr, "kscope: %s\n", kscope::printable_text(write_error).c_str());
    return exit_write_failed;
  }
  return bad ? exit_bad_input : exit_ok;
}

int run_report(const std::vector<std::string>& raw_args) {
  const parsed_arguments parsed = parse_arguments(raw_args, {{"--format", true}});
  if (parsed.help) {
    print(report_help);
    print(exit_codes_text);
    return exit_ok;
  }
  if (!parsed.error.empty()) return usage_error("report", parsed.error);
  std::string format = "text";
  for (const auto& [name, value] : parsed.options) {
    if (name != "--format") continue;
    if (value != "text" && value != "markdown" && value != "json" && value != "html" && value != "folded-host" &&
        value != "folded-gpu")
      return usage_error("report", "bad format '" + kscope::printable_text(value) +
                                       "' (text, markdown, json, html, folded-host or folded-gpu)");
    format = value;
  }
  const std::vector<std::string>& args = parsed.files;
  if (args.size() != 1) return usage_error("report", "needs exactly one report file");
  const std::string shown = args[0] == "-" ? std::string("standard input") : kscope::printable_text(args[0]);
  std::string text, error;
  if (!read_file(args[0], text, error)) {
    std::fprintf(stderr, "kscope report: %s\n", error.c_str());
    return exit_bad_input;
  }
  const auto r = kscope::parse_report(text, &error);
  if (!r) {
    // Another document kscope reads: say which command reads it rather than the schema.
    const kscope::comparable_load other = kscope::load_comparable(text);
    if (kscope::identify_document(text) == kscope::document_kind::chrome_trace) {
      std::fprintf(stderr,
                   "kscope report: %s is a Chrome trace, not a kscope.report session report: open it in "
                   "https://ui.perfetto.dev, or merge the traces of several ranks with kscope merge\n",
                   shown.c_str());
    } else if (other.ok() && other.run.format != kscope::report_schema) {
      std::fprintf(stderr,
                   "kscope report: %s is %s, not a kscope.report session report: kscope compare reads it "
                   "(kscope compare BASELINE CANDIDATE)\n",
                   shown.c_str(), other.run.format.c_str());
    } else {
      std::fprintf(stderr, "kscope report: %s: %s\n", shown.c_str(), kscope::printable_text(error).c_str());
    }
    return exit_bad_input;
  }
  if (format == "folded-host" || format == "folded-gpu") {
    const kscope::folded_stacks folded =
        kscope::fold_stacks(*r, format == "folded-host" ? kscope::folded_time::host : kscope::folded_time::gpu);
    // The notes on stderr: standard output is the flame-graph tool's input, lines only.
    for (const std::string& note : folded.notes)
      std::fprintf(stderr, "kscope report: note: %s\n", kscope::printable_text(note).c_str());
    print(folded.text);
    return exit_ok;
  }
  if (format == "html") {
    print(kscope::report_html(*r, {kscope::diagnosis_html_section(kscope::diagnose(*r), *r)}));
    return exit_ok;
  }
  if (format == "json") print(r->json());
  else if (format == "markdown") print(markdown_code_block(r->text()));
  else print(r->text());
  return exit_ok;
}

int run_diagnose(const std::vector<std::string>& raw_args) {
  const parsed_arguments parsed = parse_arguments(raw_args, {});
  if (parsed.help) {
    print(diagnose_help);
    print(exit_codes_text);
    return exit_ok;
  }
  if (!parsed.error.empty()) return usage_error("diagnose", parsed.error);
  if (parsed.files.size() != 1) return usage_error("diagnose", "needs exactly one report file");
  const std::string& path = parsed.files[0];
  const std::string shown = path == "-" ? std::string("standard input") : kscope::printable_text(path);
  std::string text, error;
  if (!read_file(path, text, error)) {
    std::fprintf(stderr, "kscope diagnose: %s\n", error.c_str());
    return exit_bad_input;
  }
  const auto r = kscope::parse_report(text, &error);
  if (!r) {
    std::fprintf(stderr, "kscope diagnose: %s: %s\n", shown.c_str(), kscope::printable_text(error).c_str());
    return exit_bad_input;
  }
  if (!r->gpu_time)
    std::fprintf(stderr,
                 "kscope diagnose: %s has no GPU-time section (the program ran without CUPTI): findings that "
                 "need the GPU timeline are not evaluated\n",
                 shown.c_str());
  print(kscope::diagnosis_text(kscope::diagnose(*r), *r));
  return exit_ok;
}

// Reads one compare input; on failure prints why and sets the exit code it deserves.
std::optional<kscope::comparable_run> load_comparable_file(const std::string& path, const char* role, int& code) {
  std::string text, error;
  if (!read_file(path, text, error)) {
    std::fprintf(stderr, "kscope compare: %s: %s\n", role, error.c_str());
    code = exit_bad_input;
    return std::nullopt;
  }
  kscope::comparable_load loaded = kscope::load_comparable(text);
  if (!loaded.ok()) {
    std::fprintf(stderr, "kscope compare: %s %s: %s\n", role, path.c_str(), loaded.error.c_str());
    code = loaded.status == kscope::load_status::not_comparable ? exit_not_comparable : exit_bad_input;
    return std::nullopt;
  }
  return std::move(loaded.run);
}

int run_compare(const std::vector<std::string>& args) {
  const parsed_arguments parsed = parse_arguments(
      args, {{"--threshold", true}, {"--thresholds", true}, {"--allow-missing", false}, {"--format", true}});
  if (parsed.help) {
    print(compare_help);
    print(exit_codes_text);
    return exit_ok;
  }
  if (!parsed.error.empty()) return usage_error("compare", parsed.error);
  kscope::compare_settings settings;
  std::string format = "text";
  std::string thresholds_path;
  for (const auto& [name, value] : parsed.options) {
    if (name == "--threshold") {
      double threshold = 0;
      // A percentage ("2%") as the thresholds file takes it, or a fraction. parse_number reads
      // '.' as the decimal point in any locale, as everything the tool prints.
      const bool percent = !value.empty() && value.back() == '%';
      const std::string number = percent ? value.substr(0, value.size() - 1) : value;
      const bool parsed_number = kscope::parse_number(number, threshold);
      if (percent) threshold /= 100;
      if (!parsed_number || !(threshold >= 0) || !(threshold < 10))
        return usage_error("compare", "bad threshold '" + kscope::printable_text(value) +
                                          "' (a fraction in [0, 10) or a percentage, e.g. 0.02 or 2%)");
      settings.threshold = threshold;
    } else if (name == "--thresholds") {
      thresholds_path = value;
    } else if (name == "--allow-missing") {
      settings.allow_missing = true;
    } else if (name == "--format") {
      if (value != "text" && value != "markdown" && value != "json")
        return usage_error("compare", "bad format '" + kscope::printable_text(value) +
                                          "' (text, markdown or json)");
      format = value;
    }
  }
  const std::vector<std::string>& files = parsed.files;
  if (files.size() != 2)
    return usage_error("compare", files.empty() ? "needs a baseline and a candidate file, got none"
                                                : "needs a baseline and a candidate file, got " +
                                                      std::to_string(files.size()) + " file" +
                                                      (files.size() == 1 ? "" : "s"));
  if (!thresholds_path.empty()) {
    std::string text, error;
    if (!read_file(thresholds_path, text, error)) {
      std::fprintf(stderr, "kscope compare: thresholds: %s\n", kscope::printable_text(error).c_str());
      return exit_bad_input;
    }
    kscope::threshold_rules_parse rules = kscope::parse_thresholds(text);
    if (!rules.ok())
      return usage_error("compare", "thresholds file " + kscope::printable_text(thresholds_path) + ": " +
                                        rules.error);
    settings.rules = std::move(rules.rules);
  }
  int base_code = exit_ok, cand_code = exit_ok;
  const auto base = load_comparable_file(files[0], "baseline", base_code);
  const auto cand = load_comparable_file(files[1], "candidate", cand_code);
  if (!base || !cand) {
    // An unreadable input outranks a refused one: fix the file before the format.
    if (base_code == exit_bad_input || cand_code == exit_bad_input) return exit_bad_input;
    return exit_not_comparable;
  }
  if (base->format != cand->format) {
    std::fprintf(stderr,
                 "kscope compare: the baseline is %s and the candidate %s: compare two documents of one format\n",
                 base->format.c_str(), cand->format.c_str());
    return exit_not_comparable;
  }
  const kscope::report_comparison comparison = kscope::compare_runs(*base, *cand, settings);
  for (const std::string& w : comparison.environment_warnings)
    std::fprintf(stderr, "kscope compare: warning: %s\n", w.c_str());
  for (const std::string& r : comparison.unused_rules)
    std::fprintf(stderr, "kscope compare: warning: threshold rule \"%s\" matched no compared %s\n",
                 kscope::printable_text(r).c_str(), comparison.item.c_str());
  print(format == "json" ? comparison.json() : format == "markdown" ? comparison.markdown() : comparison.text());
  switch (comparison.gate()) {
    case kscope::gate_result::pass: return exit_ok;
    case kscope::gate_result::slower:
      std::fprintf(stderr, "kscope compare: FAIL: %s\n", comparison.failure().c_str());
      return exit_slower;
    case kscope::gate_result::nothing_compared:
    case kscope::gate_result::missing:
      std::fprintf(stderr, "kscope compare: FAIL: %s\n", comparison.failure().c_str());
      return exit_incomplete;
  }
  return exit_incomplete;  // not reached: every gate_result is handled above
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) {
      std::fputs("usage: kscope COMMAND [ARGS...] (merge, report, compare, diagnose; kscope --help for more)\n", stderr);
      return exit_usage;
    }
    const std::string command = argv[1];
    std::vector<std::string> args(argv + 2, argv + argc);
    if (command == "--version" || command == "-V" || command == "version") {
      print("kscope " KSCOPE_VERSION_STRING "\n");
      return finish_output(exit_ok);
    }
    if (command == "--help" || command == "-h" || command == "help") {
      if (command == "help" && !args.empty()) {
        const char* help = help_for(args[0]);
        if (help == nullptr) {
          std::fprintf(stderr, "kscope help: unknown command '%s' (merge, report, compare, diagnose)\n",
                       kscope::printable_text(args[0]).c_str());
          return exit_usage;
        }
        print(help);
        print(exit_codes_text);
        return finish_output(exit_ok);
      }
      print(usage_text);
      print(exit_codes_text);
      return finish_output(exit_ok);
    }
    if (command == "merge") return finish_output(run_merge(args));
    if (command == "report") return finish_output(run_report(args));
    if (command == "compare") return finish_output(run_compare(args));
    if (command == "diagnose") return finish_output(run_diagnose(args));
    std::fprintf(stderr, "kscope: unknown command '%s' (merge, report, compare, diagnose; kscope --help for more)\n",
                 kscope::printable_text(command).c_str());
    return exit_usage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kscope: internal error: %s\n", e.what());
    return exit_bad_input;
  }
}
