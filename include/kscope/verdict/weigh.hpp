// kscope/verdict/weigh.hpp — the one rule that turns what each source concluded for a scope
// or a bench row into its one verdict (core/finding.hpp: scope_verdict). The session's
// scopes (scope_verdict.hpp) and the bench's rows (bench/format.hpp) both end here, so a
// kernel gets the same verdict from either.
//
// The rule:
//   1. what was measured decides: hardware counters and sampled metrics, each when it
//      decided (not "undetermined"). Where both did, the one whose busiest unit ran nearer
//      its peak wins (a sampled L2 at 76 % beats a counter stand-in at 23 % that read
//      latency-bound); on a tie, the one given first (the counters: per kernel, not GPU-wide);
//   2. declared work decides only where nothing measured did;
//   3. nothing decided: "undetermined", its text what was missing, for a scope with GPU
//      work; no verdict otherwise.
//
//   std::vector<kscope::verdict_candidate> c = {{"hardware counters", counted, true, 5, "profiled calls"},
//                                               {"declared work", placed, false, 100, "calls"}};
//   std::optional<kscope::scope_verdict> v = kscope::weigh_verdict(std::move(c), {}, true);
#pragma once

#include "../core/config.hpp"
#include "../core/finding.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// The verdict from every source's conclusion (the rule above). `missing` lists evidence that
// was not collected (a candidate that did not decide is added to it with its reason);
// `gpu_work`: whether nothing deciding still gives an "undetermined" verdict.
[[nodiscard]] KSCOPE_DECL std::optional<scope_verdict> weigh_verdict(std::vector<verdict_candidate> candidates,
                                                                     std::vector<std::string> missing, bool gpu_work);

namespace detail {
// The busiest unit a finding names: the largest % of peak among its throughput facts (a
// unit's or pipe's; occupancy is not one), with its metric; without one, a placement's
// share of its roof ("roofline.fraction_of_roof", as %). NaN and "" when it has neither.
struct busiest_unit_fact {
  double percent = std::numeric_limits<double>::quiet_NaN();
  std::string metric;
};
KSCOPE_DECL busiest_unit_fact busiest_unit(const finding& f);

// busiest_unit(f).percent for a measured finding.
KSCOPE_DECL double measured_peak_pct(const finding& f);
}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
namespace detail {

KSCOPE_DECL busiest_unit_fact busiest_unit(const finding& f) {
  busiest_unit_fact best;
  for (const evidence& e : f.facts) {
    if (e.unit != "%" || !std::isfinite(e.value)) continue;
    if (e.metric.find("warps_active") != std::string::npos || e.metric.find("occupancy") != std::string::npos) continue;
    if (!(e.value <= best.percent)) best = {e.value, e.metric};
  }
  if (std::isfinite(best.percent)) return best;
  for (const evidence& e : f.facts)
    if (e.metric == "roofline.fraction_of_roof" && std::isfinite(e.value)) return {100 * e.value, e.metric};
  return best;
}

KSCOPE_DECL double measured_peak_pct(const finding& f) {
  bool has_unit = false;
  for (const evidence& e : f.facts) has_unit = has_unit || e.unit == "%";
  return has_unit ? busiest_unit(f).percent : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace detail

KSCOPE_DECL std::optional<scope_verdict> weigh_verdict(std::vector<verdict_candidate> candidates,
                                                       std::vector<std::string> missing, bool gpu_work) {
  std::vector<verdict_candidate> measured, declared;
  for (verdict_candidate& c : candidates) {
    if (c.said.kind == bottleneck::undetermined) {
      missing.push_back(c.source + " did not decide" + (c.said.text.empty() ? std::string() : ": " + c.said.text));
      continue;
    }
    (c.measured ? measured : declared).push_back(std::move(c));
  }
  // The busiest unit nearest its peak first; stable, so the first given wins a tie.
  const auto pct = [](const verdict_candidate& c) {
    const double v = detail::measured_peak_pct(c.said);
    return std::isfinite(v) ? v : -1.0;
  };
  std::stable_sort(measured.begin(), measured.end(),
                   [&](const verdict_candidate& a, const verdict_candidate& b) { return pct(a) > pct(b); });
  std::vector<verdict_candidate> decided = std::move(measured);
  for (verdict_candidate& c : declared) decided.push_back(std::move(c));
  scope_verdict v;
  if (decided.empty()) {
    if (!gpu_work) return std::nullopt;
    v.verdict.kind = bottleneck::undetermined;
    v.basis = "no evidence that decided";
    for (const std::string& m : missing) v.verdict.text += (v.verdict.text.empty() ? "" : "; ") + m;
    v.missing = std::move(missing);
    return v;
  }
  v.verdict = decided.front().said;
  v.basis = decided.front().source;
  for (verdict_candidate& c : decided) {
    const detail::busiest_unit_fact top = detail::busiest_unit(c.said);
    verdict_evidence e;
    e.source = std::move(c.source);
    e.facts = std::move(c.said.facts);
    e.percent_of_peak = top.percent;
    e.metric = top.metric;
    e.count = c.count;
    e.count_of = std::move(c.count_of);
    e.agrees = c.said.kind == v.verdict.kind;
    v.evidence.push_back(std::move(e));
  }
  v.missing = std::move(missing);
  return v;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
