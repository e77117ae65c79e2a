// kscope — the command-line tool: merge per-rank reports, print a report, compare two runs.
//
//   kscope merge out.json run.rank0.json run.rank1.json ...   merged table + kscope.merged/1 JSON
//   kscope report run.json                                     the report's text tables
//   kscope compare baseline.json candidate.json [--threshold 0.02] [--allow-missing]
//                                                              CI gate on scope / benchmark medians
//
// Exit codes (also printed by `kscope --help`; docs/multi_gpu.md lists them too):
//   0  success; for compare: something was compared, no time is slower, none is missing
//   1  compare: at least one time is slower than the baseline (the CI gate failed)
//   2  usage error (unknown command, missing or bad arguments)
//   3  an input could not be read, is not JSON, or is not a kscope document kscope reads
//      (merge: the other inputs are still merged and the output still written)
//   4  the output file could not be written
//   5  compare: the comparison is incomplete: the two runs share no timed scope or
//      benchmark (an empty KSCOPE=0 report, renamed scopes, unrelated runs), or a time
//      of the baseline is missing in the candidate (without --allow-missing)
//   6  compare: the inputs cannot be gated: a merged report (kscope.merged/1 keeps no
//      intervals), or a report and a bench file (two formats)
// A different GPU, driver or kscope version between baseline and candidate is a warning
// (stderr and the table), not a failure. Errors go to stderr; results to stdout. Bad
// files never crash the tool.
#include <kscope/report/compare.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/report/report.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

const char* const usage_text =
    "usage:\n"
    "  kscope merge OUT.json RANK0.json [RANK1.json ...]\n"
    "      merge per-rank kscope.report/1 files: prints per-rank and across-rank tables\n"
    "      (slowest rank per scope), writes kscope.merged/1 JSON to OUT.json\n"
    "  kscope report FILE.json\n"
    "      print a kscope.report/1 file as text tables\n"
    "  kscope compare BASELINE.json CANDIDATE.json [--threshold 0.02] [--allow-missing]\n"
    "      compare two kscope.report/1 files scope by scope (host and GPU time), or two\n"
    "      kscope.bench/1 files benchmark by benchmark, on medians and their 95% intervals;\n"
    "      the verdict is the library's (kscope::compare_summaries): 'slower' when the\n"
    "      interval of the ratio candidate/baseline, formed from the two median intervals,\n"
    "      lies above 1 + threshold; 'faster' below 1 - threshold; 'same' within\n"
    "      1 +- threshold; 'inconclusive' otherwise. The gate fails on a slower time, when\n"
    "      nothing was compared, and when a baseline time is missing in the candidate\n"
    "      (--allow-missing accepts that). A different GPU, driver or kscope version is a\n"
    "      warning. Merged reports (kscope.merged/1) are refused: they keep no intervals\n"
    "exit codes: 0 ok; 1 compare found a slower time; 2 usage; 3 input unreadable, not JSON\n"
    "  or not a kscope document; 4 cannot write the output; 5 compare incomplete: no shared\n"
    "  scope or benchmark, or a baseline time missing in the candidate; 6 compare refused:\n"
    "  a merged report, or two different formats\n";

bool read_file(const std::string& path, std::string& out, std::string& error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  out.clear();
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) {
    error = path + ": read error";
    return false;
  }
  return true;
}

bool write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

std::optional<kscope::session_report> load_report(const std::string& path) {
  std::string text, error;
  if (!read_file(path, text, error)) {
    std::fprintf(stderr, "kscope: %s\n", error.c_str());
    return std::nullopt;
  }
  auto r = kscope::parse_report(text, &error);
  if (!r) std::fprintf(stderr, "kscope: %s: %s\n", path.c_str(), error.c_str());
  return r;
}

int run_merge(const std::vector<std::string>& args) {
  if (args.size() < 2) {
    std::fputs("kscope merge: needs an output file and at least one rank report\n", stderr);
    std::fputs(usage_text, stderr);
    return exit_usage;
  }
  std::vector<std::string> docs;
  std::vector<std::string> read_errors(args.size() - 1);
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string text;
    if (!read_file(args[i], text, read_errors[i - 1])) text.clear();  // kept in place: positions stay
    docs.push_back(std::move(text));
  }
  kscope::merged_report merged = kscope::merge_reports(docs);
  bool bad = false;
  for (kscope::merge_input& in : merged.inputs) {
    // An unreadable file is an empty document to merge_reports; say why it really failed.
    if (!read_errors[in.index].empty()) in.error = "input " + std::to_string(in.index) + ": " + read_errors[in.index];
    if (in.error.empty()) continue;
    bad = true;
    std::fprintf(stderr, "kscope: %s: %s\n", args[in.index + 1].c_str(), in.error.c_str());
  }
  std::fputs(merged.text().c_str(), stdout);
  if (!write_file(args[0], merged.json())) {
    std::fprintf(stderr, "kscope: %s: cannot write the merged report\n", args[0].c_str());
    return exit_write_failed;
  }
  return bad ? exit_bad_input : exit_ok;
}

int run_report(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::fputs("kscope report: needs exactly one report file\n", stderr);
    std::fputs(usage_text, stderr);
    return exit_usage;
  }
  const auto r = load_report(args[0]);
  if (!r) return exit_bad_input;
  std::fputs(r->text().c_str(), stdout);
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
  kscope::compare_settings settings;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--threshold") {
      if (i + 1 >= args.size()) {
        std::fputs("kscope compare: --threshold needs a value\n", stderr);
        return exit_usage;
      }
      // strtod follows the C locale; the tool never calls setlocale, so it runs in the "C"
      // locale and '.' is the decimal point, as in everything the tool prints.
      char* end = nullptr;
      const double threshold = std::strtod(args[i + 1].c_str(), &end);
      if (end == args[i + 1].c_str() || *end != '\0' || !(threshold >= 0) || !(threshold < 10)) {
        std::fprintf(stderr, "kscope compare: bad threshold '%s' (a fraction, e.g. 0.02)\n", args[i + 1].c_str());
        return exit_usage;
      }
      settings.threshold = threshold;
      ++i;
    } else if (args[i] == "--allow-missing") {
      settings.allow_missing = true;
    } else if (args[i].size() > 1 && args[i][0] == '-') {
      std::fprintf(stderr, "kscope compare: unknown option '%s'\n", args[i].c_str());
      return exit_usage;
    } else {
      files.push_back(args[i]);
    }
  }
  if (files.size() != 2) {
    std::fputs("kscope compare: needs a baseline and a candidate file\n", stderr);
    std::fputs(usage_text, stderr);
    return exit_usage;
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
  std::fputs(comparison.text().c_str(), stdout);
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
      std::fputs(usage_text, stderr);
      return exit_usage;
    }
    const std::string command = argv[1];
    std::vector<std::string> args(argv + 2, argv + argc);
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(usage_text, stdout);
      return exit_ok;
    }
    if (command == "merge") return run_merge(args);
    if (command == "report") return run_report(args);
    if (command == "compare") return run_compare(args);
    std::fprintf(stderr, "kscope: unknown command '%s'\n", command.c_str());
    std::fputs(usage_text, stderr);
    return exit_usage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kscope: internal error: %s\n", e.what());
    return exit_bad_input;
  }
}
