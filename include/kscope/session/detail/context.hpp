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

// The scope's "dtype" tag: "" untagged, "(mixed)" when its calls were tagged differently.
KSCOPE_DECL std::string scope_dtype(const scope_report& s);

// The device's fastest compute roof (NaN flops when it has none): what an untagged scope's
// rate may still be allowed by.
struct fastest_roof {
  double flops_per_s = std::nan("");
  std::string label;  // "fp8 tensor"
};
KSCOPE_DECL fastest_roof fastest_compute_roof(const device_peaks& peaks);

// Places the declared work per call done in `time_ns` per call (`time_ci_ns` its
// interval, NaN when unknown), and records which time that was. A placement above the
// roof by more than roofline_impossible_above is kept with its numbers and flagged
// impossible, with its likely cause: printers then give it no limiter and no advice.
//
// The roof: the dtype tag's (device/roof_choice.hpp), or `evidence_roof` when the
// evidence named one for an untagged scope (place_by_evidence). An untagged placement
// above the fp32 plain roof is impossible only when no roof of the device allows the rate;
// otherwise its roof is unknown (scope_report::roofline_roof_unknown), never "impossible".
KSCOPE_DECL void place_scope_at(scope_report& s, const device_peaks& peaks, double time_ns, interval time_ci_ns,
                           const char* source, const roof_choice* evidence_roof = nullptr);

// The tensor pipe this busy (% of its peak) in a scope's kernels says they ran on tensor
// cores: an untagged scope is then placed under a tensor roof.
inline constexpr double tensor_roof_evidence_pct = 10.0;

// Places again, under a tensor roof, every untagged scope whose kernels kept the tensor
// pipe busy (per-scope counters first, else sampled metrics): the half-precision tensor
// roof (bf16 / fp16, one rate on every tensor-core generation), or fp8's where only that
// allows the rate. The scope's roof_basis names the evidence and says the precision was
// not tagged. Called once the features' sections are in, before the verdicts.
KSCOPE_DECL void place_by_evidence(session_report& out, const device_peaks& peaks);

// A placement above every roof whose declared bytes the scope's hardware counters measured
// as less DRAM traffic (counters' declared_vs_measured) is not impossible where the same
// time with the DRAM traffic measured fits under the roofs: the rest of the declared bytes
// came from cache (a stencil reads each value several times, from L2 or L1). It then reads
// "declared bytes exceed DRAM traffic: reused through cache" with both numbers, and has no
// limiter from declared work (scope_report::roofline_roof_unknown). Called after
// place_by_evidence, before the verdicts.
KSCOPE_DECL void explain_cache_reuse(session_report& out, const device_peaks& peaks);

// Fills s.roofline (and friends) from the declared work and the median time per call:
// the median between the scope's CUDA events, or the host median for a scope without a
// stream. session/detail/advice.hpp may place it again by its kernels' time.
KSCOPE_DECL void place_scope(scope_report& s, const device_peaks& peaks);

KSCOPE_DECL std::vector<std::string> describe_roofs(const device_peaks& peaks);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string scope_dtype(const scope_report& s) {
  std::string dtype;
  for (const tag_count& t : s.tags)
    if (t.key == "dtype") dtype = dtype.empty() || dtype == t.value ? t.value : std::string("(mixed)");
  return dtype;
}

KSCOPE_DECL fastest_roof fastest_compute_roof(const device_peaks& peaks) {
  fastest_roof f;
  for (const compute_roof& r : peaks.compute)
    if (std::isfinite(r.theoretical_flops_per_s) && !(r.theoretical_flops_per_s <= f.flops_per_s)) {
      f.flops_per_s = r.theoretical_flops_per_s;
      f.label = std::string(to_string(r.type)) + " " + to_string(r.cores);
    }
  return f;
}

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
                           const char* source, const roof_choice* evidence_roof) {
  s.roofline.reset();
  s.flops_per_s_ci = interval{std::nan(""), std::nan(""), time_ci_ns.level};
  s.fraction_of_measured_roof = std::nan("");
  s.roofline_time_source.clear();
  s.roofline_time_ns = std::nan("");
  s.roofline_impossible = false;
  s.roofline_impossible_reason.clear();
  s.roofline_roof_unknown.clear();
  if (evidence_roof == nullptr) s.roof_basis.clear();
  if (s.work_calls == 0 || !(time_ns > 0)) return;
  const work per_call{s.declared.flops / static_cast<double>(s.work_calls),
                      s.declared.bytes / static_cast<double>(s.work_calls)};
  // The one dtype -> roof rule (device/roof_choice.hpp), shared with the benchmarks.
  const roof_choice roof = evidence_roof != nullptr ? *evidence_roof : choose_roof(peaks, scope_dtype(s));
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
    // Untagged: a faster roof of the device may allow the rate (tensor cores, a lower
    // precision). Then the roof is unknown, not the number impossible.
    const fastest_roof top = fastest_compute_roof(peaks);
    const double fastest = top.flops_per_s;
    const std::string& fastest_label = top.label;
    const std::optional<placement> under_fastest =
        std::isfinite(fastest) ? try_place(per_call, time_ns * 1e-9, fastest, peaks.theoretical_bytes_per_s)
                               : std::nullopt;
    if (!roof.dtype_known && evidence_roof == nullptr && under_fastest &&
        under_fastest->fraction_of_roof <= roofline_impossible_above) {
      s.roofline_roof_unknown =
          "above the " + roof.label + " roof (" + roofline_percent_text(s.roofline->fraction_of_roof) + " of it at " +
          format_si(s.roofline->flops_per_s, "FLOP/s") + "), which only a faster roof of this device allows (up to " +
          fastest_label + ", " + format_si(fastest, "FLOP/s") +
          "); no dtype tag or tensor-pipe activity says which: tag the dtype (the scope's \"dtype\" tag, e.g. "
          "\"bf16\") to place it";
    } else {
      s.roofline_impossible = true;
      s.roofline_impossible_reason = impossible_cause(s);
    }
  }
}

KSCOPE_DECL void explain_cache_reuse(session_report& out, const device_peaks& peaks) {
  for (scope_report& s : out.scopes) {
    if (!placement_impossible(s) || !s.counters || !s.counters->declared_vs_measured || s.work_calls == 0) continue;
    const work_check& w = *s.counters->declared_vs_measured;
    if (!(w.measured_dram_bytes > 0) || !(w.declared_bytes > w.measured_dram_bytes)) continue;
    const double time_s = s.roofline_time_ns * 1e-9;
    const work measured{s.declared.flops / static_cast<double>(s.work_calls), w.measured_dram_bytes};
    // The compute roof the scope was placed under (placement::roof_flops_per_s is the roof
    // at its intensity, not the peak).
    double peak_flops = std::nan("");
    for (const compute_roof& r : peaks.compute)
      if (std::string(to_string(r.type)) + " " + to_string(r.cores) == s.roof) peak_flops = r.theoretical_flops_per_s;
    std::optional<placement> p = try_place(measured, time_s, peak_flops, peaks.theoretical_bytes_per_s);
    // An untagged scope (no dtype tag, no evidence that chose its roof) may also be held to a
    // faster roof of the device, as place_scope_at allows at the declared bytes: at the
    // measured traffic, the fastest roof that allows the rate makes it "roof unknown" too.
    std::string faster;
    if (!p || !(p->fraction_of_roof <= roofline_impossible_above)) {
      if (!s.roof_basis.empty() || choose_roof(peaks, scope_dtype(s)).dtype_known) continue;
      const fastest_roof top = fastest_compute_roof(peaks);
      p = std::isfinite(top.flops_per_s) ? try_place(measured, time_s, top.flops_per_s, peaks.theoretical_bytes_per_s)
                                         : std::nullopt;
      if (!p || !(p->fraction_of_roof <= roofline_impossible_above)) continue;
      faster = "; above the " + s.roof + " roof even so, which only a faster roof of this device allows (up to " +
               top.label + ", " + format_si(top.flops_per_s, "FLOP/s") +
               "): tag the dtype (the scope's \"dtype\" tag, e.g. \"bf16\") to place it";
    }
    s.roofline_impossible = false;
    s.roofline_impossible_reason.clear();
    s.roofline_roof_unknown =
        "declared bytes exceed DRAM traffic: reused through cache (declared " + format_si(w.declared_bytes, "B") +
        " per call, " + roofline_percent_text(s.roofline->fraction_of_roof) +
        " of the roof at the declared bytes; DRAM moved " + format_si(w.measured_dram_bytes, "B") +
        " per call by the hardware counters over " + std::to_string(s.counters->profiled_calls) +
        (s.counters->profiled_calls == 1 ? " call" : " calls") +
        (faster.empty() ? ", " + roofline_percent_text(p->fraction_of_roof) + " of the roof at that traffic)"
                        : ")" + faster);
  }
}

KSCOPE_DECL void place_by_evidence(session_report& out, const device_peaks& peaks) {
  const sampled_metrics_report* sampled = out.sampled_metrics ? &out.sampled_metrics->data : nullptr;
  const sampled_metric_columns columns =
      sampled != nullptr ? sampled_metric_columns::of(sampled->metrics) : sampled_metric_columns{};
  for (scope_report& s : out.scopes) {
    if (!s.roofline || s.work_calls == 0) continue;
    bool tagged = false;
    for (const tag_count& t : s.tags) tagged = tagged || t.key == "dtype";
    if (tagged) continue;
    // The tensor pipe's activity in the scope's kernels: counters, else sampled.
    double tensor = std::nan("");
    std::string source;
    if (s.counters) {
      tensor = metric_value(s.counters->totals, counter_metric::tensor_pipe_active);
      source = "counters";
    }
    if (!std::isfinite(tensor) && sampled != nullptr && columns.tensor_pct != sampled_metric_columns::none) {
      if (const node_sampled_metrics* n = sampled->find(static_cast<sampled_node>(s.id));
          n != nullptr && columns.tensor_pct < n->values.size()) {
        tensor = n->values[columns.tensor_pct].mean;
        source = "sampled metrics";
      }
    }
    if (!std::isfinite(tensor) || tensor < tensor_roof_evidence_pct) continue;
    // Half precision first; fp8 only where the half roof cannot hold the rate.
    const double rate = s.roofline->flops_per_s;
    std::optional<roof_choice> chosen;
    for (data_type type : {data_type::bf16, data_type::fp16, data_type::fp8}) {
      const compute_roof* r = peaks.find(type, core_kind::tensor);
      if (r == nullptr || !std::isfinite(r->theoretical_flops_per_s)) continue;
      roof_choice c;
      c.type = type;
      c.cores = core_kind::tensor;
      c.dtype_known = true;
      c.label = std::string(to_string(type)) + " tensor";
      c.theoretical_flops_per_s = r->theoretical_flops_per_s;
      c.measured_flops_per_s = r->measured_flops_per_s;
      if (!chosen) chosen = c;
      if (rate <= r->theoretical_flops_per_s * roofline_impossible_above) {
        chosen = c;
        break;
      }
    }
    if (!chosen) continue;
    const double time_ns = s.roofline_time_ns;
    const std::string time_source = s.roofline_time_source;
    interval ci{std::nan(""), std::nan(""), 0.95};
    if (time_source == time_source_events) ci = s.gpu_ns.median_ci;
    else if (time_source == time_source_host) ci = s.host_ns.median_ci;
    s.roof_basis = "roof from the kernels: tensor pipe " + format_fixed(tensor, 0) + "% busy (" + source +
                   "), precision not tagged";
    const char* source_name = time_source == time_source_events ? time_source_events
                              : time_source == time_source_host ? time_source_host
                                                                : time_source_kernels;
    place_scope_at(s, peaks, time_ns, ci, source_name, &*chosen);
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
