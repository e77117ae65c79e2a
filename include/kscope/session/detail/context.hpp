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

inline void describe_devices(report_context& context) {
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

// Fills s.roofline (and friends) from the declared work and the median time per call.
inline void place_scope(scope_report& s, const device_peaks& peaks) {
  if (s.work_calls == 0) return;
  const summary& time = s.gpu_calls ? s.gpu_ns : s.host_ns;
  if (!(time.median > 0)) return;
  const work per_call{s.declared.flops / static_cast<double>(s.work_calls),
                      s.declared.bytes / static_cast<double>(s.work_calls)};
  std::string dtype;
  for (const tag_count& t : s.tags)
    if (t.key == "dtype") dtype = dtype.empty() || dtype == t.value ? t.value : std::string("(mixed)");
  // The one dtype -> roof rule (device/roof_choice.hpp), shared with the benchmarks.
  const roof_choice roof = choose_roof(peaks, dtype);
  s.roof = roof.label;
  s.roofline = try_place(per_call, time.median * 1e-9, roof.theoretical_flops_per_s, peaks.theoretical_bytes_per_s);
  if (!s.roofline) return;
  const interval seconds{time.median_ci.lo * 1e-9, time.median_ci.hi * 1e-9, time.median_ci.level};
  s.flops_per_s_ci = rate_interval(per_call.flops, seconds);
  const double measured_bw = peaks.measured_bytes_per_s;
  if (std::isfinite(roof.measured_flops_per_s) || std::isfinite(measured_bw)) {
    const double pf = std::isfinite(roof.measured_flops_per_s) ? roof.measured_flops_per_s : roof.theoretical_flops_per_s;
    const double pb = std::isfinite(measured_bw) ? measured_bw : peaks.theoretical_bytes_per_s;
    if (const auto m = try_place(per_call, time.median * 1e-9, pf, pb)) s.fraction_of_measured_roof = m->fraction_of_roof;
  }
}

inline std::vector<std::string> describe_roofs(const device_peaks& peaks) {
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

}  // namespace detail
}  // namespace kscope
