// kscope/report/html.hpp — session_report::html() and write_html(): one HTML page, no
// JavaScript, with the roofline picture (plot.hpp) and the tables.
#pragma once

#include "../core/config.hpp"
#include "data.hpp"
#include "detail/printing.hpp"

namespace kscope {

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string session_report::html() const {
  html_report page;
  page.title = "kscope report";
  page.context_lines.push_back("kscope " + context.kscope_version + " on " + context.host_name + ", " +
                               context.timestamp_utc);
  for (const std::string& d : context.devices) page.context_lines.push_back("GPU: " + d);
  if (context.devices.empty()) page.context_lines.push_back("GPU: " + context.no_device_reason);
  for (const std::string& r : context.roofs) page.context_lines.push_back("roof: " + r);
  std::vector<roof_point> points;
  html_table scope_table{"Scopes (median per call, 95 % CI of the median)",
                         {"scope", "calls", "host median", "host CI", "GPU median", "GPU CI", "total", "% parent"},
                         {}};
  html_table roof_table{"Roofline (median call)",
                        {"scope", "FLOP/s", "B/s", "FLOP/B", "% roof", "% measured roof", "limiter", "roof", "hint"},
                        {}};
  const auto ci_text = [](const summary& s) {
    if (!std::isfinite(s.median_ci.lo)) return std::string("-");
    return "[" + format_duration_ns(s.median_ci.lo) + ", " + format_duration_ns(s.median_ci.hi) + "]";
  };
  const auto percent = [](double f) {
    if (!std::isfinite(f)) return std::string("-");
    return detail::format_fixed(100 * f, 1) + " %";
  };
  for (const scope_report& s : scopes) {
    scope_table.rows.push_back({s.path, std::to_string(s.calls), format_duration_ns(s.host_ns.median),
                                ci_text(s.host_ns), s.gpu_calls ? format_duration_ns(s.gpu_ns.median) : "-",
                                s.gpu_calls ? ci_text(s.gpu_ns) : "-", format_duration_ns(s.host_inclusive_ns),
                                percent(s.share_of_parent)});
    if (!s.roofline) continue;
    const placement& p = *s.roofline;
    // An impossible point would be drawn above the roof as if it were real: the table says
    // why it is left out of the picture.
    const bool impossible = detail::placement_impossible(s);
    if (detail::placement_has_limiter(s)) points.push_back(to_roof_point(s.path, p));
    const std::string intensity = detail::format_general(p.intensity, 3);
    roof_table.rows.push_back({s.path, detail::format_si(p.flops_per_s, "FLOP/s"), detail::format_si(p.bytes_per_s, "B/s"),
                               intensity, percent(p.fraction_of_roof), percent(s.fraction_of_measured_roof),
                               impossible                            ? "impossible"
                               : detail::placement_roof_unknown(s) ? "roof?"
                                                                   : std::string(to_string(p.limiter)),
                               s.roof,
                               detail::placement_advice(s) +
                                   (detail::placement_has_limiter(s)
                                        ? outweighed_note(s, detail::bottleneck_of(p.limiter), "declared work")
                                        : std::string())});
  }
  // Measured points (per-scope counters): one per memory level beside the declared one,
  // labelled "path (DRAM)", "path (L2)"; a measured point is what the kernels did.
  html_table measured_table{"Hardware counters per scope (sampled calls profiled)",
                            {"scope", "profiled calls", "DRAM / call", "FLOP / call", "verdict"}, {}};
  for (const scope_report& s : scopes) {
    if (!s.counters) continue;
    const scope_counter_report& c = *s.counters;
    for (memory_level level : {memory_level::dram, memory_level::l2, memory_level::l1})
      if (const std::optional<roof_point> mp = c.measured.chart_point(level, s.path)) points.push_back(*mp);
    measured_table.rows.push_back(
        {s.path, std::to_string(c.profiled_calls),
         detail::counter_cell(c.per_call(dram_bytes_moved(c.totals)), "B"),
         detail::counter_cell(c.per_call(c.measured.flops.total), "FLOP"), c.classified.verdict.text});
  }
  if (!points.empty() && !context.roof_lines.empty()) {
    plot_options options;
    options.title = context.devices.empty() ? "Roofline" : "Roofline: " + context.devices.front().substr(0, context.devices.front().find(':'));
    page.svg = roofline_svg(context.roof_lines, points, options);
  }
  page.tables.push_back(std::move(scope_table));
  if (!roof_table.rows.empty()) page.tables.push_back(std::move(roof_table));
  if (!measured_table.rows.empty()) page.tables.push_back(std::move(measured_table));
  if (!top_kernels.empty()) {
    html_table kernels{"Top kernels (CUPTI)", {"kernel", "calls", "total", "median", "grid", "block", "registers", "shared"}, {}};
    for (const kernel_summary& k : top_kernels) {
      const auto dims = [](const std::array<std::int32_t, 3>& d) {
        return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
      };
      kernels.rows.push_back({k.name, std::to_string(k.calls), format_duration_ns(static_cast<double>(k.total_ns)),
                              format_duration_ns(k.median_ns), dims(k.grid), dims(k.block),
                              std::to_string(k.registers_per_thread),
                              detail::format_si(static_cast<double>(k.static_shared_bytes + k.dynamic_shared_bytes), "B")});
    }
    page.tables.push_back(std::move(kernels));
  }
  if (!warnings.empty()) {
    html_table w{"Warnings", {"warning"}, {}};
    for (const std::string& line : warnings) w.rows.push_back({line});
    page.tables.push_back(std::move(w));
  }
  return render_html(page);
}

KSCOPE_DECL bool session_report::write_html(const std::string& path, std::string* error) const noexcept {
  try {
    return detail::write_file_atomically(path, html(), error);
  } catch (...) {  // out of memory building the page
    if (error) {
      try { *error = detail::file_write_error(path, ENOMEM); } catch (...) {}
    }
    return false;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
