// kscope/verdict/scope_verdict.hpp — one verdict per scope, from every piece of evidence
// the report holds for it.
//
// Each feature concludes in the shared vocabulary (core/finding.hpp): the hardware counters
// of the scope's profiled calls (counters/: classify), the GPU metrics sampled while its
// kernels ran (pm_sampling/: classify_sampled), the declared work placed on the roofline
// (core/roofline.hpp: place, with the session's advice from the kernel timeline). This
// module weighs them into the scope's one `scope_verdict` (report/data.hpp), which every
// printer prints; the other conclusions stay beside it, marked as agreeing or not, so a
// report never shows two verdicts for one scope without saying which one holds and why.
//
// The weighing:
//   1. what was measured decides: hardware counters and sampled metrics of the scope's
//      kernels, each when it decided (not "undetermined"). Where both did, the one whose
//      busiest unit ran nearer its peak wins (measured_peak_pct: a sampled L2 at 76 % beats
//      a counter stand-in at 23 % that read latency-bound); on a tie, the counters (per
//      kernel, not GPU-wide);
//   2. declared work on the roofline decides only where nothing measured did, unless the
//      placement cannot be true (above every roof: it is then no verdict, and `missing`
//      says why);
//   3. a scope with GPU work and no evidence that decided gets "undetermined", its text
//      what was missing; a host-only scope gets no verdict.
//
//   kscope::session_report r = kscope::session::global().report();   // verdicts decided
//   if (const auto* s = r.find("decode"); s && s->verdict)
//     std::printf("%s (%s)\n", s->verdict->verdict.text.c_str(), s->verdict->basis.c_str());
#pragma once

#include "../core/config.hpp"
#include "../core/finding.hpp"
#include "../pm_sampling/samples.hpp"
#include "../report/data.hpp"
#include "../report/detail/printing.hpp"

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

// How near its peak the busiest unit a measured finding names ran: the largest % of peak
// among its throughput facts (a unit's or pipe's % of peak; occupancy is not one). NaN
// when it has none.
KSCOPE_DECL double measured_peak_pct(const finding& f);
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

KSCOPE_DECL double measured_peak_pct(const finding& f) {
  double best = std::numeric_limits<double>::quiet_NaN();
  for (const evidence& e : f.facts) {
    if (e.unit != "%" || !std::isfinite(e.value)) continue;
    if (e.metric.find("warps_active") != std::string::npos || e.metric.find("occupancy") != std::string::npos) continue;
    if (!(e.value <= best)) best = e.value;
  }
  return best;
}

}  // namespace detail

KSCOPE_DECL std::optional<scope_verdict> decide_verdict(const scope_evidence& e) {
  if (e.scope == nullptr) return std::nullopt;
  const scope_report& s = *e.scope;
  struct candidate {
    std::string basis;
    finding said;
  };
  std::vector<candidate> decided;  // strongest first
  std::vector<std::string> missing;
  if (s.counters) {
    const finding& f = s.counters->classified.verdict;
    if (f.kind != bottleneck::undetermined) decided.push_back({"hardware counters", f});
    else missing.push_back("hardware counters did not decide: " + f.text);
  } else {
    missing.push_back("hardware counters: not collected (session::enable_counters, KSCOPE_COUNTERS=1)");
  }
  if (e.sampled != nullptr && e.sampled_metrics != nullptr) {
    finding f = classify_sampled(*e.sampled, *e.sampled_metrics);
    if (f.kind != bottleneck::undetermined) decided.push_back({"sampled metrics", std::move(f)});
    else missing.push_back("sampled metrics did not decide: " + f.text);
  } else if (s.gpu_activity) {
    missing.push_back("sampled metrics: not collected (session::enable_metric_sampling, KSCOPE_METRIC_SAMPLING=1)");
  }
  // Measured evidence: the busiest unit nearest its peak first (stable: counters on a tie).
  if (decided.size() == 2) {
    const auto pct = [](const candidate& c) {
      const double v = detail::measured_peak_pct(c.said);
      return std::isfinite(v) ? v : -1.0;
    };
    if (pct(decided[1]) > pct(decided[0])) std::swap(decided[0], decided[1]);
  }
  if (std::optional<finding> f = detail::declared_work_finding(s)) {
    decided.push_back({"declared work", std::move(*f)});
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
  if (decided.empty()) {
    const bool gpu_work = (s.gpu_activity && (s.gpu_activity->kernel_count > 0 || s.gpu_activity->busy_ns > 0)) ||
                          s.gpu_calls > 0;
    if (!gpu_work) return std::nullopt;
    scope_verdict v;
    v.verdict.kind = bottleneck::undetermined;
    v.basis = "no evidence that decided";
    for (const std::string& m : missing) v.verdict.text += (v.verdict.text.empty() ? "" : "; ") + m;
    v.missing = std::move(missing);
    return v;
  }
  scope_verdict v;
  v.verdict = decided.front().said;
  v.basis = decided.front().basis;
  for (std::size_t i = 1; i < decided.size(); ++i)
    v.others.push_back({decided[i].basis, decided[i].said, decided[i].said.kind == v.verdict.kind});
  v.missing = std::move(missing);
  return v;
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
