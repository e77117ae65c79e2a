// kscope/report/compare.hpp — two session reports compared scope by scope: the CI gate
// behind `kscope compare`.
//
// A report keeps each scope's summary, not its samples, so every scope's host and GPU
// times are compared with compare_summaries() (core/stats.hpp): the ratio of the medians,
// an interval of that ratio built from the two median intervals, and the library's one
// verdict rule (ratio_verdict), printed with to_string(verdict).
//
//   std::optional<kscope::session_report> base = kscope::parse_report(baseline_json);
//   std::optional<kscope::session_report> cand = kscope::parse_report(candidate_json);
//   kscope::report_comparison c = kscope::compare_reports(*base, *cand);   // 2 % threshold
//   std::fputs(c.text().c_str(), stdout);
//   return c.count(kscope::verdict::slower) > 0 ? 1 : 0;
#pragma once

#include "../core/stats.hpp"
#include "report.hpp"

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace kscope {

// One per-call time of one scope in both reports.
struct scope_comparison {
  std::string path;
  std::string time;  // "host" or "gpu": which per-call time was compared
  double baseline_median_ns = detail::stats_nan;
  double candidate_median_ns = detail::stats_nan;
  comparison result;  // compare_summaries(): ratio, ratio_ci, verdict; p_value NaN (no samples)
};

// The outcome of compare_reports().
//   for (const kscope::scope_comparison& s : c.scopes)
//     if (s.result.result == kscope::verdict::slower) std::printf("%s regressed\n", s.path.c_str());
struct report_comparison {
  double threshold = compare_options{}.threshold;
  std::vector<scope_comparison> scopes;           // in the candidate's scope order, host before gpu
  std::vector<std::string> only_in_candidate;     // scope paths the baseline does not have
  std::vector<std::string> only_in_baseline;      // scope paths the candidate lost

  // How many compared times got verdict `v`.
  [[nodiscard]] std::size_t count(verdict v) const noexcept {
    std::size_t n = 0;
    for (const scope_comparison& s : scopes) n += s.result.result == v;
    return n;
  }
  // The table `kscope compare` prints, ending in "PASS" (no time slower) or "FAIL".
  [[nodiscard]] std::string text() const;
};

// Compares every scope path found in both reports: its host time when both have calls,
// its GPU time when both have GPU calls. threshold is the relative change that matters
// (0.02: a ratio within 1 +- 2 % is "same" when its interval stays inside that band).
//   kscope::report_comparison c = kscope::compare_reports(baseline, candidate, 0.05);
[[nodiscard]] inline report_comparison compare_reports(const session_report& baseline,
                                                       const session_report& candidate,
                                                       double threshold = compare_options{}.threshold) {
  report_comparison out;
  out.threshold = threshold;
  for (const scope_report& c : candidate.scopes) {
    const scope_report* b = baseline.find(c.path);
    if (b == nullptr) {
      out.only_in_candidate.push_back(c.path);
      continue;
    }
    const auto add = [&](const char* time, const summary& bs, const summary& cs) {
      out.scopes.push_back(scope_comparison{c.path, time, bs.median, cs.median, compare_summaries(bs, cs, threshold)});
    };
    if (b->calls > 0 && c.calls > 0) add("host", b->host_ns, c.host_ns);
    if (b->gpu_calls > 0 && c.gpu_calls > 0) add("gpu", b->gpu_ns, c.gpu_ns);
  }
  for (const scope_report& b : baseline.scopes)
    if (candidate.find(b.path) == nullptr) out.only_in_baseline.push_back(b.path);
  return out;
}

inline std::string report_comparison::text() const {
  char line[200];
  std::snprintf(line, sizeof line,
                "kscope compare (threshold %.1f%%; on medians and their 95%% intervals only: reports hold no "
                "samples)\n",
                threshold * 100);
  std::string out = line;
  // scope 34 | time 5 | baseline 10 | candidate 10 | ratio 8 | verdict
  out += detail::fit("scope", 34) + detail::fit("time", 5) + detail::fit("baseline", 10, true) +
         detail::fit("candidate", 10, true) + detail::fit("ratio", 8, true) + "  verdict\n";
  out += std::string(81, '-') + "\n";
  for (const scope_comparison& s : scopes) {
    char ratio[24] = "-";
    if (std::isfinite(s.result.ratio)) std::snprintf(ratio, sizeof ratio, "%.3f", s.result.ratio);
    out += detail::fit(s.path, 34) + detail::fit(s.time, 5) +
           detail::fit(format_duration_ns(s.baseline_median_ns), 10, true) +
           detail::fit(format_duration_ns(s.candidate_median_ns), 10, true) + detail::fit(ratio, 8, true) + "  " +
           to_string(s.result.result) + "\n";
  }
  for (const std::string& path : only_in_candidate) out += detail::fit(path, 34) + "(new in candidate)\n";
  for (const std::string& path : only_in_baseline) out += detail::fit(path, 34) + "(missing in candidate)\n";
  out += detail::wrap("ratio: candidate / baseline median. verdict: slower (faster) when the ratio's interval, "
                      "formed from the two median intervals, lies above 1 + threshold (below 1 - threshold); "
                      "same when it lies within 1 +- threshold; inconclusive otherwise, and when a median has no "
                      "interval (fewer than 6 samples at 95%). Only slower fails the gate.",
                      98);
  const std::size_t slower = count(verdict::slower);
  out += slower ? std::to_string(slower) + " slower: FAIL\n" : std::string("no scope slower: PASS\n");
  return out;
}

}  // namespace kscope
