// kscope/report/text.hpp — session_report::text(): the report for a terminal, as an indented
// call-path tree that fits 100 columns, then the sections of each feature that ran.
#pragma once

#include "../core/config.hpp"
#include "data.hpp"
#include "detail/printing.hpp"

namespace kscope {

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string session_report::text() const {
  std::string out;
  using detail::printable_name;
  out += "kscope " + printable_name(context.kscope_version);
  if (!context.host_name.empty()) out += " on " + printable_name(context.host_name);
  if (!context.timestamp_utc.empty()) out += ", " + printable_name(context.timestamp_utc);
  out += "\n";
  if (window) {  // a window report (session::window()) says so first: its numbers are not the run's
    out += detail::wrap("window " + std::to_string(window->sequence) + ": the " +
                            format_duration_ns(static_cast<double>(window->duration_ns)) +
                            " since the previous one (calls and times of this window only)",
                        98);
    out += detail::wrap("GPU busy " + (std::isfinite(window->gpu_busy_share)
                                           ? detail::format_fixed(100.0 * window->gpu_busy_share, 1) + "% of the window"
                                           : "unknown: " + printable_name(window->gpu_busy_unavailable)),
                        98);
  }
  if (context.devices.empty()) {
    out += detail::wrap("GPU: " + (context.cuda_compiled
                                       ? printable_name(context.no_device_reason) + "; host times only"
                                       : std::string("kscope built without CUDA; GPU timing needs a CUDA build and a device")),
                        98);
  } else {
    for (const std::string& d : context.devices) out += detail::wrap("GPU: " + printable_name(d), 98);
    for (const std::string& r : context.roofs) out += detail::wrap("roof: " + printable_name(r), 98);
  }
  out += "\n";
  // name 30 | calls 8 | host median 9, ci 7 | gpu median 9, ci 7 | total 9 | % parent 7
  out += detail::fit("scope", 30) + detail::fit("calls", 8, true) + "  " +
         detail::fit("host med", 9, true) + " " + detail::fit("CI95", 7) +
         detail::fit("gpu med", 9, true) + " " + detail::fit("CI95", 7) +
         detail::fit("total", 9, true) + detail::fit("%par", 7, true) + "\n";
  out += std::string(96, '-') + "\n";
  bool any_unsteady = false, any_capped = false, any_contradicted = false;
  const std::vector<std::size_t> order = detail::display_order(scopes, sort);
  for (std::size_t row : order) {
    const scope_report& s = scopes[row];
    // Event times that the scope's own kernels (CUPTI) contradict are shown, never as true.
    const bool contradicted = s.gpu_calls && !s.gpu_time_disagreement.empty();
    any_contradicted = any_contradicted || contradicted;
    std::string name(detail::indent_width(s.depth), ' ');
    name += printable_name(s.name);
    if (s.cross_thread) name += " ~";
    std::string flags;
    if (!s.host_ns.steady && s.host_ns.n > 0) { flags += "!"; any_unsteady = true; }
    if (s.samples_capped) { flags += "*"; any_capped = true; }
    std::string share = "-";
    if (std::isfinite(s.share_of_parent)) share = detail::format_fixed(100.0 * s.share_of_parent, 1) + "%";
    out += detail::fit(name, 30) + detail::fit(std::to_string(s.calls) + flags, 8, true) + "  " +
           detail::fit(format_duration_ns(s.host_ns.median), 9, true) + " " +
           detail::fit(detail::format_ci_percent(s.host_ns), 7) +
           detail::fit(s.gpu_calls ? format_duration_ns(s.gpu_ns.median) : "-", 9, true) + " " +
           detail::fit(contradicted ? "≠CUPTI" : s.gpu_calls ? detail::format_ci_percent(s.gpu_ns) : "", 7) +
           detail::fit(format_duration_ns(s.host_inclusive_ns), 9, true) +
           detail::fit(share, 7, true) + "\n";
  }
  if (scopes.empty()) out += "(no scopes recorded)\n";
  std::string legend =
      "med: median per call; CI95: half-width of its 95% interval; total: host time over all calls; "
      "%par: share of the parent's total";
  if (any_unsteady) legend += "; !: no steady state found (all samples after the first used)";
  if (any_capped) legend += "; *: samples capped at " + std::to_string(sample_cap) + " (reservoir)";
  legend += "; ~: cross-thread range";
  if (any_contradicted)
    legend += "; ≠CUPTI: the scope's events disagree with its kernels' time (see the warnings); not its GPU time";
  const report_sort used = detail::resolve_sort(scopes, sort);
  if (!scopes.empty() && used != report_sort::recorded)
    legend += used == report_sort::gpu ? "; siblings sorted by GPU time" : "; siblings sorted by host time";
  out += "\n" + detail::wrap(legend, 98);
  out += detail::requests_text(scopes);
  if (gpu_time) out += detail::gpu_time_text(*gpu_time, scopes, order, window ? &*window : nullptr);
  bool any_placed = false;
  for (const scope_report& s : scopes) any_placed = any_placed || s.roofline.has_value();
  if (any_placed) {
    // The declared work's numbers; what limits the scope is its verdict (below), so the
    // placement names no limiter of its own: only whether it can be true and its roof.
    out += "\n" + detail::fit("roofline (median call)", 30) + detail::fit("FLOP/s", 10, true) +
           detail::fit("B/s", 10, true) + detail::fit("FLOP/B", 8, true) + detail::fit("%roof", 7, true) +
           detail::fit("%meas", 7, true) + "  " + detail::fit("placement", 11) + detail::fit("roof", 12) + "\n";
    out += std::string(98, '-') + "\n";
    std::string notes;
    for (const scope_report& s : scopes) {
      if (!s.roofline) continue;
      const placement& p = *s.roofline;
      const std::string intensity = detail::format_fixed(p.intensity, p.intensity < 10 ? 2 : 0);
      const std::string roof_pct = detail::format_fixed(100 * p.fraction_of_roof, 0) + "%";
      const std::string measured_pct = std::isfinite(s.fraction_of_measured_roof)
                                           ? detail::format_fixed(100 * s.fraction_of_measured_roof, 0) + "%"
                                           : std::string("-");
      std::string name(detail::indent_width(s.depth), ' ');
      name += printable_name(s.name);
      out += detail::fit(name, 30) + detail::fit(detail::format_si(p.flops_per_s, ""), 10, true) +
             detail::fit(detail::format_si(p.bytes_per_s, ""), 10, true) + detail::fit(intensity, 8, true) +
             detail::fit(roof_pct, 7, true) + detail::fit(measured_pct, 7, true) + "  " +
             detail::fit(detail::placement_impossible(s) ? "impossible" : detail::placement_roof_unknown(s) ? "roof?" : "",
                         11) +
             detail::fit(printable_name(s.roof), 12) + "\n";
      // Said under the table when the placement is not timed by the scope's events, its
      // roof was chosen by the kernels, or it cannot be placed (impossible, roof unknown).
      const std::string timed = s.roofline_time_source.empty() || s.roofline_time_source == "events"
                                    ? std::string()
                                    : " [timed by " + s.roofline_time_source + "]";
      const std::string basis = s.roof_basis.empty() ? std::string() : " [" + s.roof_basis + "]";
      const bool unplaced = !detail::placement_has_limiter(s);
      if (unplaced || !timed.empty() || !basis.empty())
        notes += detail::wrap(
            printable_name(s.path + timed + basis + (unplaced ? ": " + detail::placement_advice(s) : std::string())), 98);
    }
    out += "%roof: of the theoretical roof at the scope's intensity; %meas: of the measured roof; what limits "
           "each scope: its verdict, below\n" +
           notes;
  }
  bool any_activity = false;
  for (const scope_report& s : scopes) any_activity = any_activity || s.gpu_activity.has_value();
  if (any_activity) {
    // name 26 | kernels 8 | kern time 10 | comm 10 | busy 10 | idle 10 | H2D, D2H, D2D 8 = 98
    bool any_comm = false, any_multi_device = false, any_graph_scaled = false;
    for (const scope_report& s : scopes) {
      if (!s.gpu_activity) continue;
      any_comm = any_comm || s.gpu_activity->comm_kernel_count > 0;
      any_multi_device = any_multi_device || s.gpu_activity->devices.size() > 1;
    }
    out += "\n" + detail::fit("GPU activity (CUPTI)", 26) + detail::fit("kernels", 8, true) +
           detail::fit("kern time", 10, true) + detail::fit("comm", 10, true) + detail::fit("busy", 10, true) +
           detail::fit("idle", 10, true) + detail::fit("H2D", 8, true) + detail::fit("D2H", 8, true) +
           detail::fit("D2D", 8, true) + "\n";
    out += std::string(98, '-') + "\n";
    for (const scope_report& s : scopes) {
      if (!s.gpu_activity) continue;
      const node_gpu_activity& a = *s.gpu_activity;
      const std::string indent(detail::indent_width(s.depth), ' ');
      const std::string name = indent + printable_name(s.name);
      const auto bytes = [&](copy_direction d) {
        const copy_totals& c = a.copies(d);
        return c.count ? detail::format_si(static_cast<double>(c.bytes), "B") : std::string("-");
      };
      const auto comm_text = [](std::uint64_t count, std::int64_t ns) {
        return count ? format_duration_ns(static_cast<double>(ns)) : std::string("-");
      };
      out += detail::fit(name, 26) + detail::fit(std::to_string(a.kernel_count), 8, true) +
             detail::fit(format_duration_ns(static_cast<double>(a.kernel_ns)), 10, true) +
             detail::fit(comm_text(a.comm_kernel_count, a.comm_ns), 10, true) +
             detail::fit(format_duration_ns(static_cast<double>(a.busy_ns)), 10, true) +
             detail::fit(format_duration_ns(static_cast<double>(a.idle_ns)), 10, true) +
             detail::fit(bytes(copy_direction::h2d), 8, true) + detail::fit(bytes(copy_direction::d2h), 8, true) +
             detail::fit(bytes(copy_direction::d2d), 8, true) + "\n";
      if (a.devices.size() > 1) {  // one row per device, under the scope
        for (const device_gpu_activity& d : a.devices) {
          out += detail::fit(indent + "  @GPU " + std::to_string(d.device), 26) +
                 detail::fit(std::to_string(d.kernel_count), 8, true) +
                 detail::fit(format_duration_ns(static_cast<double>(d.kernel_ns)), 10, true) +
                 detail::fit(comm_text(d.comm_kernel_count, d.comm_ns), 10, true) +
                 detail::fit(format_duration_ns(static_cast<double>(d.busy_ns)), 10, true) + "\n";
        }
      }
      // CUDA graphs replayed here but built in another scope: which phase built them.
      if (!a.graph_capture.empty())
        out += indent + "  " + printable_name(detail::graph_capture_text(a.graph_capture, scopes)) + "\n";
      // Replays traced as one record: how much of the row is scaled, and from what.
      if (a.graph_scaled()) {
        any_graph_scaled = true;
        out += detail::wrap(indent + "  " + detail::graph_replays_text(a), 98);
      }
    }
    std::string activity_legend =
        "kern time: sum of kernel durations; busy: union of the node's kernel intervals; "
        "idle: its GPU span with none of its work running";
    if (any_comm) activity_legend += "; comm: NCCL kernels' time (part of kern time)";
    if (any_multi_device) activity_legend += "; @GPU n: the scope's kernels on device n";
    if (any_graph_scaled)
      activity_legend += "; graph replays traced as one record count their kernels and time scaled from the replays "
                         "of the same graph traced node by node";
    out += detail::wrap(activity_legend, 98);
  }
  if (!top_kernels.empty()) {
    bool any_kernel_scaled = false;
    out += "\n" + detail::fit("top kernels", 40) + detail::fit("calls", 7, true) + detail::fit("total", 10, true) +
           detail::fit("median", 10, true) + "  " + detail::fit("grid", 11) + detail::fit("block", 9) +
           detail::fit("regs", 5, true) + detail::fit("smem", 8, true) + "\n";
    out += std::string(100, '-') + "\n";
    std::size_t shown = 0;
    for (const kernel_summary& k : top_kernels) {
      if (++shown > 15) break;
      any_kernel_scaled = any_kernel_scaled || k.scaled_calls > 0;
      // A scaled row says so in the row, with the node-level replays it rests on.
      const std::string scaled_mark =
          k.scaled_calls > 0 ? " ~" + std::to_string(k.scaled_from_replays) : std::string();
      out += detail::fit(detail::fit(printable_name(k.name), 40 - scaled_mark.size()) + scaled_mark, 40) +
             detail::fit(std::to_string(k.calls), 7, true) +
             detail::fit(format_duration_ns(static_cast<double>(k.total_ns)), 10, true) +
             detail::fit(format_duration_ns(k.median_ns), 10, true) + "  " +
             detail::fit(detail::dims_text(k.grid) + (k.launch_config_varies ? "*" : ""), 11) +
             detail::fit(detail::dims_text(k.block), 9) +
             detail::fit(std::to_string(k.registers_per_thread), 5, true) +
             detail::fit(detail::format_si(static_cast<double>(k.static_shared_bytes + k.dynamic_shared_bytes), "B"), 8, true) +
             "\n";
    }
    if (top_kernels.size() > 15) out += "(" + std::to_string(top_kernels.size() - 15) + " more in the JSON report)\n";
    if (any_kernel_scaled)
      out += detail::wrap("~N: calls and total include replays of CUDA graphs traced as one record, scaled from the "
                          "N replays of the same graphs traced node by node; median from traced calls only",
                          98);
  }
  if (counters) out += detail::scope_counters_text(*counters, scopes);
  if (sampled_metrics) out += detail::sampled_metrics_text(*sampled_metrics, scopes);
  // The features' own sections (report/section.hpp), each under its key.
  std::vector<std::string> section_problems;
  out += detail::feature_sections_text(detail::printed_feature_sections(*this, section_problems), *this);
  // One conclusion per scope (verdict/scope_verdict.hpp), its evidence under it: the
  // sections above give the numbers and name no class of their own.
  bool any_verdict = false;
  for (const scope_report& s : scopes) any_verdict = any_verdict || s.verdict.has_value();
  if (any_verdict) {
    out += detail::wrap("\nverdict per scope (one conclusion each: measured evidence decides, the busiest unit nearest "
                        "its peak; declared work only where nothing measured did; the evidence under it)",
                        98);
    out += std::string(98, '-') + "\n";
    const auto under = [&out](const std::string& line) {  // an item under its scope: "  - ", wrapped
      const std::string wrapped = detail::wrap(printable_name(line), 94);
      for (std::size_t at = 0; at < wrapped.size();) {
        const std::size_t end = wrapped.find('\n', at);
        out += (at == 0 ? "  - " : "  ") + wrapped.substr(at, end + 1 - at);
        at = end + 1;
      }
    };
    for (const scope_report& s : scopes) {
      if (!s.verdict) continue;
      out += detail::wrap(printable_name(s.path + ": " + detail::verdict_headline(*s.verdict)), 98);
      for (const std::string& line : detail::verdict_lines(*s.verdict)) under(line);
    }
  }
  if (!cupti_status.empty()) out += detail::wrap("CUPTI: " + printable_name(cupti_status), 98);
  if (gpu_timing_skipped)
    out += "note: " + std::to_string(gpu_timing_skipped) + " stream scopes ran without GPU timing (event pool cap)\n";
  for (const std::string& w : warnings) {
    // A status already printed as its own line above is not said again (the JSON keeps
    // it in both places: `warnings` lists everything kscope could not do).
    if (w == cupti_status || (sampled_metrics && w == sampled_metrics->status) || (counters && w == counters->status))
      continue;
    out += "warning: " + printable_name(w) + "\n";
  }
  for (const std::string& problem : section_problems) out += "warning: " + problem + "\n";
  // The last guard: whatever a line above let through still reaches no terminal raw (and
  // holds no NUL that would cut the text short in fputs).
  return detail::printable_text(out);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
