// kscope/verdict/scope_verdict.hpp — one verdict per scope, from every piece of evidence
// the report holds for it.
//
// Each feature concludes in the shared vocabulary (core/finding.hpp): the hardware counters
// of the scope's profiled calls (counters/: classify), the GPU metrics sampled while its
// kernels ran (pm_sampling/: classify_sampled), the declared work placed on the roofline
// (core/roofline.hpp: place, with the session's advice from the kernel timeline). This
// module gathers them and weighs them by the one rule (weigh.hpp: what was measured
// decides, the busiest unit nearest its peak; declared work only where nothing measured
// did; "undetermined" with what was missing for a scope with GPU work) into the scope's one
// `scope_verdict`, the only conclusion every printer prints for it, each source's numbers
// listed under it.
//
//   kscope::session_report r = kscope::session::global().report();   // verdicts decided
//   if (const auto* s = r.find("decode"); s && s->verdict)
//     std::printf("%s (%s)\n", s->verdict->verdict.text.c_str(), s->verdict->basis.c_str());
#pragma once

#include "../core/config.hpp"
#include "../core/finding.hpp"
#include "../evidence/pm_samples.hpp"
#include "../report/data.hpp"
#include "../report/detail/printing.hpp"
#include "weigh.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// The evidence of one scope, as the report holds it. `sampled` and `sampled_metrics` are the
// scope's node in the sampled-metrics section and the section's metric names (null/empty
// when metrics were not sampled).
struct scope_evidence {
  const scope_report* scope = nullptr;
  const node_sampled_metrics* sampled = nullptr;
  const std::vector<std::string>* sampled_metrics = nullptr;
};

// The scope's verdict, or nullopt when no evidence concluded anything.
[[nodiscard]] KSCOPE_DECL std::optional<scope_verdict> decide_verdict(const scope_evidence& e);

// decide_verdict() for every scope of the report (the session calls it once the features'
// sections are in).
KSCOPE_DECL void decide_verdicts(session_report& report);

namespace detail {
// The declared-work placement as a finding (nullopt when not placed or not possible).
KSCOPE_DECL std::optional<finding> declared_work_finding(const scope_report& s);
}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
namespace detail {

KSCOPE_DECL std::optional<finding> declared_work_finding(const scope_report& s) {
  if (!placement_has_limiter(s)) return std::nullopt;
  const placement& p = *s.roofline;
  finding f;
  switch (p.limiter) {
    case bound::memory: f.kind = bottleneck::memory; f.where = "DRAM"; break;
    case bound::compute: f.kind = bottleneck::compute; f.where = s.roof; break;
    case bound::latency: f.kind = bottleneck::latency; break;
  }
  f.facts.push_back(evidence{"declared.flops_per_s", p.flops_per_s, "FLOP/s"});
  f.facts.push_back(evidence{"declared.bytes_per_s", p.bytes_per_s, "B/s"});
  f.facts.push_back(evidence{"roofline.fraction_of_roof", p.fraction_of_roof, "share"});
  f.text = std::string(to_string(f.kind)) + " (declared work: " + format_si(p.flops_per_s, "FLOP/s") + ", " +
           format_si(p.bytes_per_s, "B/s") + ", " + roofline_percent_text(p.fraction_of_roof) + " of the " +
           s.roof + " roof" + (s.roof_basis.empty() ? std::string() : ", " + s.roof_basis) +
           "): " + placement_advice(s);
  return f;
}

}  // namespace detail

KSCOPE_DECL std::optional<scope_verdict> decide_verdict(const scope_evidence& e) {
  if (e.scope == nullptr) return std::nullopt;
  const scope_report& s = *e.scope;
  std::vector<verdict_candidate> candidates;  // counters first: they win a tie
  std::vector<std::string> missing;
  if (s.counters) {
    candidates.push_back({"hardware counters", s.counters->classified.verdict, true, s.counters->profiled_calls,
                          "profiled calls"});
    for (const std::string& m : s.counters->classified.missing) missing.push_back("hardware counters lacked " + m);
  } else {
    missing.push_back("hardware counters: not collected (session::enable_counters, KSCOPE_COUNTERS=1)");
  }
  if (e.sampled != nullptr && e.sampled_metrics != nullptr)
    candidates.push_back(
        {"sampled metrics", classify_sampled(*e.sampled, *e.sampled_metrics), true, e.sampled->samples, "samples"});
  else if (s.gpu_activity)
    missing.push_back("sampled metrics: not collected (session::enable_metric_sampling, KSCOPE_METRIC_SAMPLING=1)");
  // What the program's own features measured (session/feature.hpp), weighed by the same rule;
  // what they did not measure comes after the declared work, which it then never outranks.
  for (const verdict_candidate& c : s.feature_evidence)
    if (c.measured) candidates.push_back(c);
  if (std::optional<finding> f = detail::declared_work_finding(s)) {
    candidates.push_back({"declared work", std::move(*f), false, s.work_calls, "calls"});
  } else if (detail::placement_impossible(s)) {
    missing.push_back("declared work: its placement cannot be true (" +
                      (s.roofline_impossible_reason.empty() ? std::string("above every roof")
                                                            : s.roofline_impossible_reason) +
                      ")");
  } else if (detail::placement_roof_unknown(s)) {
    missing.push_back("declared work: " + s.roofline_roof_unknown);
  } else if (s.work_calls == 0) {
    missing.push_back("declared work: none (scope::set_work)");
  }
  for (const verdict_candidate& c : s.feature_evidence)
    if (!c.measured) candidates.push_back(c);
  // GPU work as any source saw it: CUPTI's records, the scope's CUDA events, or the kernels a
  // counter pass profiled (counters run without CUPTI, and a scope without a stream has no events).
  const bool gpu_work = (s.gpu_activity && (s.gpu_activity->kernel_count > 0 || s.gpu_activity->busy_ns > 0)) ||
                        s.gpu_calls > 0 || (s.counters && s.counters->kernels > 0);
  return weigh_verdict(std::move(candidates), std::move(missing), gpu_work);
}

KSCOPE_DECL void decide_verdicts(session_report& report) {
  const sampled_metrics_report* sampled = report.sampled_metrics ? &report.sampled_metrics->data : nullptr;
  for (scope_report& s : report.scopes) {
    scope_evidence e;
    e.scope = &s;
    if (sampled != nullptr) {
      e.sampled = sampled->find(static_cast<sampled_node>(s.id));
      if (e.sampled != nullptr) e.sampled_metrics = &sampled->metrics;
    }
    s.verdict = decide_verdict(e);
  }
}

#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
