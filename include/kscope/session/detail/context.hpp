// kscope/session/detail/context.hpp — fills a report's context block and places its scopes on
// the roofline.
//
// Every report states where its numbers were taken (device.hpp's description of each
// GPU, driver and runtime). Scopes that declared work are placed against the session's
// peaks: theoretical ones from the device table by default, measured ones when the user
// handed measure_peaks() results to session::set_peaks().
#pragma once

#include "../../core/config.hpp"
#include "../../device/device.hpp"
#include "../../report/report.hpp"
#include "../../core/roofline.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <utility>

namespace kscope {
namespace detail {

KSCOPE_DECL void describe_devices(report_context& context);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void describe_devices(report_context& context) {
  const device_info first = query_device(0);
  if (!first.present) {
    context.no_device_reason = first.problem;
    return;
  }
  std::string json;
  json_writer w(json);
  w.begin_array();
  for (int d = 0; d < first.device_count; ++d) {
    const device_info info = d == 0 ? first : query_device(d);
    context.devices.push_back(describe(info));
    write_json(w, info);
  }
  w.end_array();
  context.devices_json = json;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The time sources a placement can rest on (scope_report::roofline_time_source).
inline constexpr const char* time_source_events = "events";
inline constexpr const char* time_source_host = "host";
inline constexpr const char* time_source_kernels = "kernels (CUPTI)";

// Why a placement above the roof happened, from what the scope knows about its time. A
// time is wrong in one of a few ways, and which one depends on where it came from; when
// the time was checked against the kernels, what is left is the declared work.
KSCOPE_DECL std::string impossible_cause(const scope_report& s);

// Places the declared work per call done in `time_ns` per call (`time_ci_ns` its
// interval, NaN when unknown), and records which time that was. A placement above the
// roof by more than roofline_impossible_above is kept with its numbers and flagged
// impossible, with its likely cause: printers then give it no limiter and no advice.
KSCOPE_DECL void place_scope_at(scope_report& s, const device_peaks& peaks, double time_ns, interval time_ci_ns,
                           const char* source);

// Fills s.roofline (and friends) from the declared work and the median time per call:
// the median between the scope's CUDA events, or the host median for a scope without a
// stream. session/detail/advice.hpp may place it again by its kernels' time.
KSCOPE_DECL void place_scope(scope_report& s, const device_peaks& peaks);

KSCOPE_DECL std::vector<std::string> describe_roofs(const device_peaks& peaks);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string impossible_cause(const scope_report& s) {
  if (s.roofline_time_source == time_source_kernels)
    return "even its kernels' busy time (CUPTI) is too short for the declared work, so the declared work is more "
           "than what its kernels did (set_work counts one call's work; work done outside this scope's kernels "
           "does not count)";
  const bool kernels_seen = s.gpu_activity && s.gpu_activity->kernel_count > 0;
  if (s.roofline_time_source == time_source_host) {
    if (kernels_seen)
      return "its kernels (CUPTI) took no longer than its host time, so the declared work is more than what ran";
    return "the scope has no stream, so its host time ends when the launches return, not when the kernels finish "
           "(give the scope its stream), or the declared work is more than what ran";
  }
  if (kernels_seen)
    return "its kernels' time (CUPTI) agrees with its events, so the declared work is more than what ran";
  return "its CUDA events may be on another stream than its kernels, so they do not bracket them (enable CUPTI to "
         "compare with the kernels' own time), or the declared work is more than what ran";
}

KSCOPE_DECL void place_scope_at(scope_report& s, const device_peaks& peaks, double time_ns, interval time_ci_ns,
                           const char* source) {
  s.roofline.reset();
  s.flops_per_s_ci = interval{std::nan(""), std::nan(""), time_ci_ns.level};
  s.fraction_of_measured_roof = std::nan("");
  s.roofline_time_source.clear();
  s.roofline_time_ns = std::nan("");
  s.roofline_impossible = false;
  s.roofline_impossible_reason.clear();
  if (s.work_calls == 0 || !(time_ns > 0)) return;
  const work per_call{s.declared.flops / static_cast<double>(s.work_calls),
                      s.declared.bytes / static_cast<double>(s.work_calls)};
  std::string dtype;
  for (const tag_count& t : s.tags)
    if (t.key == "dtype") dtype = dtype.empty() || dtype == t.value ? t.value : std::string("(mixed)");
  // The one dtype -> roof rule (device/roof_choice.hpp), shared with the benchmarks.
  const roof_choice roof = choose_roof(peaks, dtype);
  s.roof = roof.label;
  s.roofline = try_place(per_call, time_ns * 1e-9, roof.theoretical_flops_per_s, peaks.theoretical_bytes_per_s);
  if (!s.roofline) return;
  s.roofline_time_source = source;
  s.roofline_time_ns = time_ns;
  const interval seconds{time_ci_ns.lo * 1e-9, time_ci_ns.hi * 1e-9, time_ci_ns.level};
  s.flops_per_s_ci = rate_interval(per_call.flops, seconds);
  const double measured_bw = peaks.measured_bytes_per_s;
  if (std::isfinite(roof.measured_flops_per_s) || std::isfinite(measured_bw)) {
    const double pf = std::isfinite(roof.measured_flops_per_s) ? roof.measured_flops_per_s : roof.theoretical_flops_per_s;
    const double pb = std::isfinite(measured_bw) ? measured_bw : peaks.theoretical_bytes_per_s;
    if (const auto m = try_place(per_call, time_ns * 1e-9, pf, pb)) s.fraction_of_measured_roof = m->fraction_of_roof;
  }
  if (s.roofline->fraction_of_roof > roofline_impossible_above) {
    s.roofline_impossible = true;
    s.roofline_impossible_reason = impossible_cause(s);
  }
}

KSCOPE_DECL void place_scope(scope_report& s, const device_peaks& peaks) {
  if (s.gpu_calls) place_scope_at(s, peaks, s.gpu_ns.median, s.gpu_ns.median_ci, time_source_events);
  else place_scope_at(s, peaks, s.host_ns.median, s.host_ns.median_ci, time_source_host);
}

KSCOPE_DECL std::vector<std::string> describe_roofs(const device_peaks& peaks) {
  std::vector<std::string> lines;
  const auto si = [](double v, const char* unit) { return format_si(v, unit); };
  std::string bw = "DRAM " + si(peaks.theoretical_bytes_per_s, "B/s") + " theoretical";
  if (std::isfinite(peaks.measured_bytes_per_s)) bw += ", " + si(peaks.measured_bytes_per_s, "B/s") + " measured";
  lines.push_back(bw);
  for (const compute_roof& r : peaks.compute) {
    if (!std::isfinite(r.theoretical_flops_per_s)) continue;
    const bool wanted = (r.type == data_type::fp32 && r.cores == core_kind::plain) ||
                        (r.type == data_type::bf16 && r.cores == core_kind::tensor) || std::isfinite(r.measured_flops_per_s);
    if (!wanted) continue;
    std::string line = std::string(to_string(r.type)) + " " + to_string(r.cores) + " " +
                       si(r.theoretical_flops_per_s, "FLOP/s") + " theoretical";
    if (std::isfinite(r.measured_flops_per_s)) line += ", " + si(r.measured_flops_per_s, "FLOP/s") + " measured";
    lines.push_back(line);
  }
  return lines;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
