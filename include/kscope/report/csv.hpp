// kscope/report/csv.hpp — session_report::csv(): one row per scope (RFC 4180), columns in
// docs/report_schema.md.
#pragma once

#include "../core/config.hpp"
#include "data.hpp"
#include "detail/printing.hpp"

namespace kscope {

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string session_report::csv() const {
  using detail::csv_field;
  using detail::csv_number;
  std::string out =
      "path,depth,calls,profiled_calls,host_median_ns,host_median_ci_lo_ns,host_median_ci_hi_ns,host_total_ns,"
      "gpu_median_ns,gpu_total_ns,kernels,kernel_ns,gpu_busy_ns,sampled_samples,sampled_idle_share,sampled_sm_pct,"
      "sampled_dram_pct,sampled_tensor_pct,counter_calls,counter_dram_bytes_per_call,counter_flops_per_call,"
      "verdict,verdict_unit,verdict_source\n";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  sampled_metric_columns columns;
  if (sampled_metrics) columns = sampled_metric_columns::of(sampled_metrics->data.metrics);
  for (const scope_report& s : scopes) {
    std::vector<std::string> f;
    f.push_back(csv_field(s.path));
    f.push_back(std::to_string(s.depth));
    f.push_back(std::to_string(s.calls));
    f.push_back(std::to_string(s.profiled_calls));
    f.push_back(csv_number(s.host_ns.n ? s.host_ns.median : nan));
    f.push_back(csv_number(s.host_ns.median_ci.lo));
    f.push_back(csv_number(s.host_ns.median_ci.hi));
    f.push_back(csv_number(s.host_inclusive_ns));
    f.push_back(csv_number(s.gpu_calls ? s.gpu_ns.median : nan));
    f.push_back(csv_number(s.gpu_calls ? s.gpu_total_ns : nan));
    f.push_back(s.gpu_activity ? std::to_string(s.gpu_activity->kernel_count) : std::string());
    f.push_back(s.gpu_activity ? csv_number(static_cast<double>(s.gpu_activity->kernel_ns)) : std::string());
    f.push_back(s.gpu_activity ? csv_number(static_cast<double>(s.gpu_activity->busy_ns)) : std::string());
    const node_sampled_metrics* n =
        sampled_metrics ? sampled_metrics->data.find(static_cast<sampled_node>(s.id)) : nullptr;
    const auto sampled = [n](std::size_t column) {
      return n != nullptr && column < n->values.size() ? csv_number(n->values[column].mean) : std::string();
    };
    f.push_back(n ? std::to_string(n->samples) : std::string());
    f.push_back(n ? csv_number(n->idle_share()) : std::string());
    f.push_back(sampled(columns.sm_pct));
    f.push_back(sampled(columns.dram_pct));
    f.push_back(sampled(columns.tensor_pct));
    if (s.counters) {
      const scope_counter_report& c = *s.counters;
      f.push_back(std::to_string(c.profiled_calls));
      f.push_back(csv_number(c.per_call(dram_bytes_moved(c.totals))));
      f.push_back(csv_number(c.per_call(c.measured.flops.total)));
    } else {
      f.insert(f.end(), 3, std::string());
    }
    // The scope's one conclusion (the sections' columns are numbers only).
    f.push_back(s.verdict ? csv_field(to_string(s.verdict->verdict.kind)) : std::string());
    f.push_back(s.verdict ? csv_field(s.verdict->verdict.where) : std::string());
    f.push_back(s.verdict ? csv_field(s.verdict->basis) : std::string());
    for (std::size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
    out += "\n";
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
