// kscope/report/json.hpp — session_report::json() and write_json(): the versioned JSON form
// ("kscope.report/2", docs/report_schema.md) that the kscope tool reads back. Each scope
// carries one conclusion, its `verdict` with the evidence under it; the sections carry
// numbers only ("kscope.report/1" had a limiter, a counters verdict and a sampled verdict
// beside it: merge.hpp still reads those files).
#pragma once

#include "../core/config.hpp"
#include "data.hpp"
#include "detail/printing.hpp"

namespace kscope {

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string session_report::json() const {
  std::string out;
  detail::json_writer w(out);
  w.begin_object();
  w.member("schema", report_schema);
  w.key("context").begin_object();
  w.member("kscope_version", context.kscope_version);
  w.member("host", context.host_name);
  w.member("timestamp_utc", context.timestamp_utc);
  w.member("process_id", context.process_id);
  w.member("cuda_compiled", context.cuda_compiled);
  w.key("gpu");
  if (context.devices_json.empty()) w.value(nullptr); else w.raw(context.devices_json);
  if (context.devices_json.empty()) w.member("no_device_reason", context.no_device_reason);
  w.key("roofs").begin_array();
  for (const std::string& r : context.roofs) w.value(r);
  w.end_array();
  w.key("peaks");
  if (context.peaks_json.empty()) w.value(nullptr); else w.raw(context.peaks_json);
  w.key("rank");
  if (context.rank < 0) w.value(nullptr); else w.value(context.rank);
  w.end_object();
  // A window report says so, and which interval it covers (docs/report_schema.md, `window`).
  w.key("window");
  if (!window) {
    w.value(nullptr);
  } else {
    w.begin_object();
    w.member("sequence", static_cast<unsigned long long>(window->sequence));
    w.member("since_ns", static_cast<long long>(window->since_ns));
    w.member("until_ns", static_cast<long long>(window->until_ns));
    w.member("duration_ns", static_cast<long long>(window->duration_ns));
    w.member("gpu_busy_share", window->gpu_busy_share);
    w.member("gpu_busy_ns", window->gpu_busy_ns);
    w.member("gpu_busy_unavailable", window->gpu_busy_unavailable);
    w.end_object();
  }
  w.member("sample_cap", static_cast<unsigned long long>(sample_cap));
  w.member("gpu_timing_skipped", static_cast<unsigned long long>(gpu_timing_skipped));
  // The features' sections (report/section.hpp); the ones no printer prints are warned of.
  std::vector<std::string> section_problems;
  const std::vector<detail::feature_section_view> feature_views = detail::printed_feature_sections(*this, section_problems);
  w.key("warnings").begin_array();
  for (const std::string& s : warnings) w.value(s);
  for (const std::string& s : section_problems) w.value(s);
  w.end_array();
  w.key("sections");
  detail::write_feature_sections_json(w, feature_views);
  w.key("cupti").begin_object();
  w.member("status", cupti_status);
  // Tracing in windows (docs/report_schema.md, `cupti.trace_windows`): null when every
  // launch was traced.
  w.key("trace_windows");
  if (trace_windows.windowed) {
    const trace_window_summary& t = trace_windows;
    w.begin_object();
    w.member("window_ms", static_cast<unsigned long long>(t.options.window_ms));
    w.member("period_ms", static_cast<unsigned long long>(t.options.period_ms));
    w.member("windows", static_cast<unsigned long long>(t.windows));
    w.member("traced_ns", static_cast<long long>(t.traced_ns));
    w.member("since_ns", static_cast<long long>(t.since_ns)).member("until_ns", static_cast<long long>(t.until_ns));
    w.member("traced_share", t.traced_share());
    w.member("open", t.open);
    w.member("failed_toggles", static_cast<unsigned long long>(t.failed_toggles));
    w.member("forgotten", static_cast<unsigned long long>(t.forgotten));
    w.key("recent").begin_array();
    for (const traced_interval& i : t.recent)
      w.begin_array().value(static_cast<long long>(i.start_ns)).value(static_cast<long long>(i.end_ns)).end_array();
    w.end_array();
    w.end_object();
  } else {
    w.value(nullptr);
  }
  w.key("counters").begin_object();
  const attribution_counters& c = cupti_counters;
  w.member("records_seen", static_cast<unsigned long long>(c.records_seen));
  w.member("kernel_records", static_cast<unsigned long long>(c.kernel_records));
  w.member("memcpy_records", static_cast<unsigned long long>(c.memcpy_records));
  w.member("memset_records", static_cast<unsigned long long>(c.memset_records));
  w.member("sync_records", static_cast<unsigned long long>(c.sync_records));
  w.member("dropped_by_cupti", static_cast<unsigned long long>(c.dropped_by_cupti));
  w.member("dropped_zero_start", static_cast<unsigned long long>(c.dropped_zero_start));
  w.member("dropped_end_before_start", static_cast<unsigned long long>(c.dropped_end_before_start));
  w.member("dropped_malformed", static_cast<unsigned long long>(c.dropped_malformed));
  w.member("unscoped", static_cast<unsigned long long>(c.unscoped));
  w.member("unattributed", static_cast<unsigned long long>(c.unattributed));
  w.member("devices_over_cap", static_cast<unsigned long long>(c.devices_over_cap));
  w.member("graph_records", static_cast<unsigned long long>(c.graph_records));
  w.member("graph_built_elsewhere", static_cast<unsigned long long>(c.graph_built_elsewhere));
  w.member("graph_capture_unknown", static_cast<unsigned long long>(c.graph_capture_unknown));
  w.end_object();
  w.key("top_kernels").begin_array();
  for (const kernel_summary& k : top_kernels) {
    w.begin_object();
    w.member("name", k.name).member("mangled_name", k.mangled_name);
    w.member("calls", static_cast<unsigned long long>(k.calls));
    w.member("total_ns", static_cast<long long>(k.total_ns)).member("median_ns", k.median_ns);
    w.member("min_ns", static_cast<long long>(k.min_ns)).member("max_ns", static_cast<long long>(k.max_ns));
    w.key("grid").begin_array().value(k.grid[0]).value(k.grid[1]).value(k.grid[2]).end_array();
    w.key("block").begin_array().value(k.block[0]).value(k.block[1]).value(k.block[2]).end_array();
    w.member("registers_per_thread", static_cast<unsigned long long>(k.registers_per_thread));
    w.member("static_shared_bytes", k.static_shared_bytes).member("dynamic_shared_bytes", k.dynamic_shared_bytes);
    w.member("launch_config_varies", k.launch_config_varies);
    w.member("communication", k.communication);
    w.member("scaled_calls", static_cast<unsigned long long>(k.scaled_calls));
    w.member("scaled_ns", static_cast<long long>(k.scaled_ns));
    w.member("scaled_from_replays", static_cast<unsigned long long>(k.scaled_from_replays));
    w.end_object();
  }
  w.end_array();
  w.end_object();
  w.key("sampled_metrics");
  if (sampled_metrics) detail::write_sampled_metrics_json(w, *sampled_metrics, scopes); else w.value(nullptr);
  w.key("counters");
  if (counters) detail::write_counters_status_json(w, *counters); else w.value(nullptr);
  w.key("gpu_time");
  if (gpu_time) detail::write_gpu_time_json(w, *gpu_time); else w.value(nullptr);
  w.key("requests");
  detail::write_requests_json(w, scopes);
  w.key("scopes").begin_array();
  for (const scope_report& s : scopes) {
    w.begin_object();
    w.member("id", static_cast<unsigned long long>(s.id));
    w.member("parent", static_cast<unsigned long long>(s.parent));
    w.member("name", s.name).member("path", s.path);
    w.member("depth", static_cast<unsigned long long>(s.depth));
    w.member("cross_thread", s.cross_thread);
    w.member("calls", static_cast<unsigned long long>(s.calls));
    w.key("host_ns"); detail::write_summary_json(w, s.host_ns);
    w.member("host_inclusive_ns", s.host_inclusive_ns);
    w.member("host_exclusive_ns", s.host_exclusive_ns);
    w.member("share_of_parent", s.share_of_parent);
    w.member("gpu_calls", static_cast<unsigned long long>(s.gpu_calls));
    w.key("gpu_ns");
    if (s.gpu_calls) detail::write_summary_json(w, s.gpu_ns); else w.value(nullptr);
    w.member("gpu_total_ns", s.gpu_total_ns);
    w.member("gpu_time_disagreement", s.gpu_time_disagreement);
    w.key("declared_work").begin_object();
    w.member("flops", s.declared.flops).member("bytes", s.declared.bytes);
    w.member("calls", static_cast<unsigned long long>(s.work_calls));
    w.end_object();
    w.key("roofline");
    if (!s.roofline) {
      w.value(nullptr);
    } else {
      const placement& p = *s.roofline;
      w.begin_object();
      w.member("roof", s.roof);
      w.member("flops_per_s", p.flops_per_s).member("bytes_per_s", p.bytes_per_s);
      w.member("intensity", p.intensity).member("roof_flops_per_s", p.roof_flops_per_s);
      w.member("fraction_of_roof", p.fraction_of_roof);
      w.member("fraction_of_measured_roof", s.fraction_of_measured_roof);
      w.member("time_source", s.roofline_time_source);
      w.member("time_ns", s.roofline_time_ns);
      // The placement's numbers; what limits the scope (and the advice) is in its verdict.
      // An impossible placement says why; no verdict rests on it.
      const bool impossible = detail::placement_impossible(s);
      w.member("impossible", impossible);
      w.member("impossible_reason", impossible ? detail::placement_advice(s) : std::string());
      w.member("roof_unknown", s.roofline_roof_unknown);
      w.member("roof_basis", s.roof_basis);
      w.key("flops_per_s_ci").begin_object();
      w.member("lo", s.flops_per_s_ci.lo).member("hi", s.flops_per_s_ci.hi).member("level", s.flops_per_s_ci.level);
      w.end_object();
      w.end_object();
    }
    w.key("gpu_activity");
    if (!s.gpu_activity) {
      w.value(nullptr);
    } else {
      const node_gpu_activity& a = *s.gpu_activity;
      const auto totals = [&w](const copy_totals& t) {
        w.begin_object();
        w.member("count", static_cast<unsigned long long>(t.count))
            .member("bytes", static_cast<unsigned long long>(t.bytes))
            .member("ns", static_cast<long long>(t.ns));
        w.end_object();
      };
      constexpr copy_direction directions[] = {copy_direction::h2d, copy_direction::d2h, copy_direction::d2d,
                                               copy_direction::other};
      w.begin_object();
      w.member("kernel_count", static_cast<unsigned long long>(a.kernel_count));
      w.member("kernel_ns", static_cast<long long>(a.kernel_ns));
      w.member("busy_ns", static_cast<long long>(a.busy_ns));
      w.member("idle_ns", static_cast<long long>(a.idle_ns));
      w.member("first_start_ns", static_cast<long long>(a.first_start_ns));
      w.member("last_end_ns", static_cast<long long>(a.last_end_ns));
      for (copy_direction d : directions) {
        w.key(std::string("memcpy_") + to_string(d));
        totals(a.copies(d));
      }
      w.key("memset");
      totals(a.memset);
      w.key("memcpy_pageable").begin_object();
      for (copy_direction d : directions) {
        w.key(to_string(d));
        totals(a.memcpy_pageable[static_cast<std::size_t>(d)]);
      }
      w.end_object();
      w.key("memcpy_sync");
      totals(a.memcpy_sync);
      w.key("memset_sync");
      totals(a.memset_sync);
      w.key("host_sync").begin_object();
      w.member("count", static_cast<unsigned long long>(a.host_sync.count))
          .member("ns", static_cast<long long>(a.host_sync.ns))
          .member("stream", static_cast<unsigned long long>(a.host_sync.stream))
          .member("event", static_cast<unsigned long long>(a.host_sync.event))
          .member("context", static_cast<unsigned long long>(a.host_sync.context));
      w.end_object();
      w.member("comm_kernel_count", static_cast<unsigned long long>(a.comm_kernel_count));
      w.member("comm_ns", static_cast<long long>(a.comm_ns));
      w.member("comm_busy_ns", static_cast<long long>(a.comm_busy_ns));
      w.member("compute_busy_ns", static_cast<long long>(a.compute_busy_ns));
      w.key("devices");
      detail::write_device_split_json(w, a.devices);
      w.key("graph_capture");
      detail::write_graph_capture_json(w, a.graph_capture, scopes);
      w.key("graphs").begin_object();
      w.member("replays", static_cast<unsigned long long>(a.graph_replays));
      w.member("traced", static_cast<unsigned long long>(a.graph_replays_traced));
      w.member("unsampled", static_cast<unsigned long long>(a.graph_replays_unsampled));
      w.member("span_ns", static_cast<long long>(a.graph_span_ns));
      w.member("scaled_kernel_count", static_cast<unsigned long long>(a.scaled_kernel_count));
      w.member("scaled_kernel_ns", static_cast<long long>(a.scaled_kernel_ns));
      w.member("scaled_busy_ns", static_cast<long long>(a.scaled_busy_ns));
      w.end_object();
      w.end_object();
    }
    w.member("profiled_calls", static_cast<unsigned long long>(s.profiled_calls));
    w.key("counters");
    if (s.counters) detail::write_scope_counters_json(w, *s.counters); else w.value(nullptr);
    w.key("verdict");
    if (s.verdict) detail::write_verdict_json(w, *s.verdict); else w.value(nullptr);
    w.member("samples_kept", static_cast<unsigned long long>(s.samples_kept));
    w.member("samples_capped", s.samples_capped);
    w.key("tags").begin_array();
    for (const tag_count& t : s.tags) {
      w.begin_object().member("key", t.key).member("value", t.value)
          .member("count", static_cast<unsigned long long>(t.count)).end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return out;
}

KSCOPE_DECL bool session_report::write_json(const std::string& path, std::string* error) const noexcept {
  try {
    return detail::write_file_atomically(path, json(), error);
  } catch (...) {  // out of memory building the document
    if (error) {
      try { *error = detail::file_write_error(path, ENOMEM); } catch (...) {}
    }
    return false;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
