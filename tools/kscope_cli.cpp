// kscope — the command-line tool: merge per-rank reports, print a report, compare two runs.
//
//   kscope merge out.json run.rank0.json run.rank1.json ...   merged table + kscope.merged/1 JSON
//   kscope report run.json                                     the report's text tables
//   kscope compare baseline.json candidate.json [--threshold 0.02]   CI gate on scope medians
//
// Exit codes (also printed by `kscope --help`):
//   0  success; for compare: no scope is slower
//   1  compare: at least one scope is slower than the baseline (the CI gate failed)
//   2  usage error (unknown command, missing or bad arguments)
//   3  an input could not be read or is not a kscope report (merge: the other inputs are
//      still merged and the output still written)
//   4  the output file could not be written
// Errors go to stderr; results to stdout. Bad files never crash the tool.
#include <kscope/report/merge.hpp>
#include <kscope/report/report.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr int exit_ok = 0;
constexpr int exit_slower = 1;
constexpr int exit_usage = 2;
constexpr int exit_bad_input = 3;
constexpr int exit_write_failed = 4;

const char* const usage_text =
    "usage:\n"
    "  kscope merge OUT.json RANK0.json [RANK1.json ...]\n"
    "      merge per-rank kscope.report/1 files: prints per-rank and across-rank tables\n"
    "      (slowest rank per scope), writes kscope.merged/1 JSON to OUT.json\n"
    "  kscope report FILE.json\n"
    "      print a kscope.report/1 file as text tables\n"
    "  kscope compare BASELINE.json CANDIDATE.json [--threshold 0.02]\n"
    "      compare the per-scope medians of two reports; a scope is 'slower' when its\n"
    "      median grew by more than the threshold and the two 95% median intervals do not\n"
    "      overlap (reports hold summaries, not samples: the comparison is on medians only)\n"
    "exit codes: 0 ok, 1 compare found a slower scope, 2 usage, 3 bad input, 4 cannot write\n";

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

// "slower", "faster", "same" or "unclear" for one median pair.
const char* judge(const kscope::summary& base, const kscope::summary& cand, double threshold, double& ratio) {
  ratio = cand.median / base.median;
  if (!std::isfinite(ratio) || base.median <= 0) return "unclear";
  if (ratio >= 1 - threshold && ratio <= 1 + threshold) return "same";
  // With both intervals known, a change they do not separate is not called.
  const bool intervals = std::isfinite(base.median_ci.lo) && std::isfinite(base.median_ci.hi) &&
                         std::isfinite(cand.median_ci.lo) && std::isfinite(cand.median_ci.hi);
  if (ratio > 1 + threshold) return (!intervals || cand.median_ci.lo > base.median_ci.hi) ? "slower" : "unclear";
  return (!intervals || cand.median_ci.hi < base.median_ci.lo) ? "faster" : "unclear";
}

int run_compare(const std::vector<std::string>& args) {
  double threshold = 0.02;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--threshold") {
      if (i + 1 >= args.size()) {
        std::fputs("kscope compare: --threshold needs a value\n", stderr);
        return exit_usage;
      }
      char* end = nullptr;
      threshold = std::strtod(args[i + 1].c_str(), &end);
      if (end == args[i + 1].c_str() || *end != '\0' || !(threshold >= 0) || !(threshold < 10)) {
        std::fprintf(stderr, "kscope compare: bad threshold '%s' (a fraction, e.g. 0.02)\n", args[i + 1].c_str());
        return exit_usage;
      }
      ++i;
    } else {
      files.push_back(args[i]);
    }
  }
  if (files.size() != 2) {
    std::fputs("kscope compare: needs a baseline and a candidate report\n", stderr);
    std::fputs(usage_text, stderr);
    return exit_usage;
  }
  const auto base = load_report(files[0]);
  const auto cand = load_report(files[1]);
  if (!base || !cand) return exit_bad_input;
  char line[160];
  std::snprintf(line, sizeof line, "kscope compare (threshold %.1f%%; on medians and their 95%% intervals only: "
                "reports hold no samples)\n", threshold * 100);
  std::string out = line;
  out += kscope::detail::fit("scope", 34) + kscope::detail::fit("time", 5) + kscope::detail::fit("baseline", 10, true) +
         kscope::detail::fit("candidate", 10, true) + kscope::detail::fit("ratio", 8, true) + "  " +
         kscope::detail::fit("verdict", 8) + "\n";
  out += std::string(77, '-') + "\n";
  int slower = 0;
  for (const kscope::scope_report& c : cand->scopes) {
    const kscope::scope_report* b = base->find(c.path);
    if (b == nullptr) {
      out += kscope::detail::fit(c.path, 34) + "(new in candidate)\n";
      continue;
    }
    const auto row = [&](const char* kind, const kscope::summary& bs, const kscope::summary& cs) {
      double ratio = 0;
      const char* verdict = judge(bs, cs, threshold, ratio);
      if (std::strcmp(verdict, "slower") == 0) ++slower;
      char r[16] = "-";
      if (std::isfinite(ratio)) std::snprintf(r, sizeof r, "%.3f", ratio);
      out += kscope::detail::fit(c.path, 34) + kscope::detail::fit(kind, 5) +
             kscope::detail::fit(kscope::detail::format_duration_ns(bs.median), 10, true) +
             kscope::detail::fit(kscope::detail::format_duration_ns(cs.median), 10, true) +
             kscope::detail::fit(r, 8, true) + "  " + verdict + "\n";
    };
    if (b->calls > 0 && c.calls > 0) row("host", b->host_ns, c.host_ns);
    if (b->gpu_calls > 0 && c.gpu_calls > 0) row("gpu", b->gpu_ns, c.gpu_ns);
  }
  for (const kscope::scope_report& b : base->scopes)
    if (cand->find(b.path) == nullptr) out += kscope::detail::fit(b.path, 34) + "(missing in candidate)\n";
  out += slower ? std::to_string(slower) + " slower: FAIL\n" : std::string("no scope slower: PASS\n");
  std::fputs(out.c_str(), stdout);
  return slower ? exit_slower : exit_ok;
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
