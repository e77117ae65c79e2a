// kscope/evidence/pm_report.hpp — the report's section for GPU metrics sampled while the
// program ran (PM sampling, session/live_metric_sampling.hpp): the data as the report holds
// it, and its text and JSON printers. report/data.hpp includes this header; the session fills it.
//
// The text, per scope with samples: its sample count, the idle share of the samples its
// kernels touched, the time-weighted mean of each metric (a count as a rate per second),
// then the per-call distributions of step scopes. What the samples say limits a scope
// (evidence/pm_samples.hpp: classify_sampled) is evidence for its one verdict
// (verdict/scope_verdict.hpp), which the report prints; this section prints no conclusion. Device-wide numbers come first, losses last.
#pragma once

#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/text_escape.hpp"
#include "pm_samples.hpp"
#include "../core/roofline.hpp"  // format_si
#include "../core/detail/text_layout.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kscope {

// PM sampling in a session report: the sampler's state and losses, and the aggregates.
struct session_sampled_metrics {
  std::string status;               // the sampler's one-line message (what ran, or why not)
  std::vector<std::string> notes;   // decode problems, clock notes
  bool running = false;             // false: it never started (status says why)
  std::uint64_t interval_ns = 0;
  double mean_interval_ns = std::numeric_limits<double>::quiet_NaN();
  std::uint64_t windows = 0;
  double coverage = std::numeric_limits<double>::quiet_NaN();  // sampled share of the run
  std::uint64_t samples = 0;        // decoded
  std::uint64_t samples_lost = 0;   // buffer drops, lost at image resets, unusable
  std::uint64_t hardware_overflows = 0;
  std::int64_t folded_until_ns = 0; // samples that ended later are not in `data` yet
  bool attributed = false;          // kernel intervals arrived: per-scope values exist
  sampled_metrics_report data;
};

namespace detail {

// A column title for a sampled metric: the default set's short names, else the name.
KSCOPE_DECL std::string sampled_metric_label(const std::string& metric);

// One value as the table prints it: percentages with one decimal, counts as rates per
// second (bytes as B/s), the clock in Hz with an SI prefix; "-" when not finite.
KSCOPE_DECL std::string sampled_value_text(const std::string& metric, bool is_count, double mean);

KSCOPE_DECL std::string sampled_pad(const std::string& s, std::size_t width, bool right);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string sampled_metric_label(const std::string& metric) {
  const sampled_metric_columns c = sampled_metric_columns::of({metric});
  if (c.sm_pct == 0) return "SM %";
  if (c.dram_pct == 0) return "DRAM %";
  if (c.tensor_pct == 0) return "tensor %";
  if (c.warps_pct == 0) return "warps %";
  if (c.clock_hz == 0) return "clock";
  if (metric == "dram__bytes_read.sum") return "DRAM rd";
  if (metric == "dram__bytes_write.sum") return "DRAM wr";
  return metric.size() <= 11 ? metric : metric.substr(0, 10) + "~";
}

KSCOPE_DECL std::string sampled_value_text(const std::string& metric, bool is_count, double mean) {
  if (!std::isfinite(mean)) return "-";
  if (metric.find("pct") != std::string::npos) return format_fixed(mean, 1);
  if (is_count) return format_si(mean, metric.find("bytes") != std::string::npos ? "B/s" : "/s");
  if (metric.find("per_second") != std::string::npos) return format_si(mean, "Hz");
  return format_general(mean, 4);
}

KSCOPE_DECL std::string sampled_pad(const std::string& s, std::size_t width, bool right) {
  const std::size_t n = s.size();  // ASCII only here (names go through printable_name first)
  if (n >= width) return s.substr(0, width);
  return right ? std::string(width - n, ' ') + s : s + std::string(width - n, ' ');
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The section's text. `scopes` is the report's scope list (id, name, path, depth).
// What the samples cover and what was lost on the way, one sentence (the text and the HTML
// report both print it).
KSCOPE_DECL std::string sampled_coverage_text(const session_sampled_metrics& m);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string sampled_coverage_text(const session_sampled_metrics& m) {
  const sampled_metrics_report& d = m.data;
  std::string coverage = std::to_string(m.samples) + " samples every " + format_si(static_cast<double>(m.interval_ns) * 1e-9, "s") +
                         (m.windows > 1 || (std::isfinite(m.coverage) && m.coverage < 0.999)
                              ? " in " + std::to_string(m.windows) + " windows; the samples cover " +
                                    format_fixed(100 * m.coverage, 1) + "% of the run"
                              : std::string(" over the whole run"));
  if (m.samples_lost || m.hardware_overflows || d.counters.samples_dropped || d.counters.kernels_dropped)
    coverage += "; lost: " + std::to_string(m.samples_lost) + " samples in decoding, " +
                std::to_string(m.hardware_overflows) + " hardware-buffer overflows, " +
                std::to_string(d.counters.samples_dropped) + " samples and " +
                std::to_string(d.counters.kernels_dropped) + " kernel intervals past the attribution's buffers";
  if (d.counters.kernels_late)
    coverage += "; " + std::to_string(d.counters.kernels_late) +
                " kernel records arrived after their samples were attributed (counted idle there)";
  return coverage;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

template <class Scopes>
std::string sampled_metrics_text(const session_sampled_metrics& m, const Scopes& scopes) {
  std::string out = "\nGPU metrics sampled while running (PM sampling, no replay)\n";
  out += "  " + printable_name(m.status) + "\n";
  if (!m.running) return out;
  const sampled_metrics_report& d = m.data;
  const std::size_t metric_count = d.metrics.size();
  const std::size_t name_width = 26, value_width = 9;
  out += sampled_pad("scope", name_width, false) + sampled_pad("samples", 8, true) + sampled_pad("idle", 6, true);
  // ' ' appended, not " " + a temporary: g++ 12 at -O3 warns (-Wrestrict, a false
  // positive, GCC bug 105329) on the insert that operator+ makes of it.
  for (const std::string& metric : d.metrics) {
    out += ' ';
    out += sampled_pad(sampled_metric_label(metric), value_width, true);
  }
  out += "\n" + std::string(name_width + 14 + (value_width + 1) * metric_count, '-') + "\n";
  const auto row = [&](const std::string& name, std::uint64_t samples, double idle,
                       const std::vector<sampled_value>& values) {
    std::string line = sampled_pad(name, name_width, false) + sampled_pad(std::to_string(samples), 8, true) +
                       sampled_pad(std::isfinite(idle) ? format_fixed(100 * idle, 0) + "%" : "-", 6, true);
    for (std::size_t i = 0; i < metric_count; ++i) {
      const bool is_count = i < d.is_count.size() && d.is_count[i];
      line += ' ';
      line += sampled_pad(sampled_value_text(d.metrics[i], is_count,
                                             i < values.size() ? values[i].mean : std::numeric_limits<double>::quiet_NaN()),
                          value_width, true);
    }
    return line + "\n";
  };
  const device_sampled_metrics& dev = d.device_wide;
  out += row("device (every sample)", dev.samples, 1 - dev.busy_share(), dev.values);
  for (const auto& s : scopes) {
    const node_sampled_metrics* n = d.find(static_cast<sampled_node>(s.id));
    if (n == nullptr || n->samples == 0) continue;
    const std::string name = std::string(indent_width(s.depth), ' ') + printable_name(s.name);
    out += row(name, n->samples, n->idle_share(), n->values);
  }
  if (!m.attributed)
    out += "(no kernel activity reached the sampler: per-scope rows need the CUPTI collector running)\n";
  std::string legend = "idle: share of the sampled time, around the scope's kernels, with no kernel running; "
                       "values: time-weighted means over the samples the scope's kernels overlapped (GPU-wide "
                       "counters), counts as rates; what limits each scope: its verdict, below";
  out += wrap(legend, 98);
  for (const step_sampled_metrics& st : d.steps) {
    std::string path = "node " + std::to_string(st.node);
    for (const auto& s : scopes)
      if (static_cast<sampled_node>(s.id) == st.node) path = printable_name(s.path);
    std::string line = "step " + path + ": " + std::to_string(st.calls) + " calls sampled";
    if (st.calls_without_samples) line += " (" + std::to_string(st.calls_without_samples) + " without samples)";
    for (std::size_t i = 0; i < metric_count && i < st.values.size(); ++i) {
      const bool is_count = i < d.is_count.size() && d.is_count[i];
      line += "; " + sampled_metric_label(d.metrics[i]) + " p50 " +
              sampled_value_text(d.metrics[i], is_count, st.values[i].p50) + " p90 " +
              sampled_value_text(d.metrics[i], is_count, st.values[i].p90);
    }
    out += wrap(line, 98);
  }
  out += wrap(sampled_coverage_text(m), 98);
  for (const std::string& note : m.notes) out += wrap("note: " + printable_name(note), 98);
  return out;
}

KSCOPE_DECL void write_sampled_value_json(json_writer& w, const sampled_value& v);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void write_sampled_value_json(json_writer& w, const sampled_value& v) {
  w.begin_object();
  w.member("mean", v.mean).member("total", v.total).member("weight_ns", v.weight_ns);
  w.end_object();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

template <class Scopes>
void write_sampled_metrics_json(json_writer& w, const session_sampled_metrics& m, const Scopes& scopes) {
  const sampled_metrics_report& d = m.data;
  w.begin_object();
  w.member("status", m.status);
  w.member("running", m.running);
  w.member("interval_ns", static_cast<unsigned long long>(m.interval_ns));
  w.member("mean_interval_ns", m.mean_interval_ns);
  w.member("windows", static_cast<unsigned long long>(m.windows));
  w.member("coverage", m.coverage);
  w.member("samples", static_cast<unsigned long long>(m.samples));
  w.member("samples_lost", static_cast<unsigned long long>(m.samples_lost));
  w.member("hardware_overflows", static_cast<unsigned long long>(m.hardware_overflows));
  w.member("folded_until_ns", static_cast<long long>(m.folded_until_ns));
  w.member("attributed", m.attributed);
  w.key("notes").begin_array();
  for (const std::string& n : m.notes) w.value(n);
  w.end_array();
  w.key("metrics").begin_array();
  for (const std::string& name : d.metrics) w.value(name);
  w.end_array();
  w.key("device").begin_object();
  w.member("samples", static_cast<unsigned long long>(d.device_wide.samples));
  w.member("sampled_ns", d.device_wide.sampled_ns).member("busy_ns", d.device_wide.busy_ns);
  w.member("busy_share", d.device_wide.busy_share());
  w.key("values").begin_array();
  for (const sampled_value& v : d.device_wide.values) write_sampled_value_json(w, v);
  w.end_array();
  w.end_object();
  w.key("scopes").begin_array();
  for (const auto& s : scopes) {
    const node_sampled_metrics* n = d.find(static_cast<sampled_node>(s.id));
    if (n == nullptr) continue;
    w.begin_object();
    w.member("id", static_cast<unsigned long long>(s.id)).member("path", s.path);
    w.member("samples", static_cast<unsigned long long>(n->samples));
    w.member("attributed_ns", n->attributed_ns).member("kernel_ns", n->kernel_ns);
    w.member("idle_share", n->idle_share());
    w.key("values").begin_array();
    for (const sampled_value& v : n->values) write_sampled_value_json(w, v);
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.key("steps").begin_array();
  for (const step_sampled_metrics& st : d.steps) {
    w.begin_object();
    w.member("id", static_cast<unsigned long long>(st.node));
    w.member("calls", static_cast<unsigned long long>(st.calls));
    w.member("calls_without_samples", static_cast<unsigned long long>(st.calls_without_samples));
    w.member("calls_subsampled", st.calls_subsampled);
    w.key("values").begin_array();
    for (const step_metric_distribution& v : st.values)
      w.begin_object().member("p50", v.p50).member("p90", v.p90).end_object();
    w.end_array();
    w.end_object();
  }
  w.end_array();
  const sampled_metrics_counters& c = d.counters;
  w.key("counters").begin_object();
  w.member("samples_attributed", static_cast<unsigned long long>(c.samples_attributed));
  w.member("samples_dropped", static_cast<unsigned long long>(c.samples_dropped));
  w.member("samples_late", static_cast<unsigned long long>(c.samples_late));
  w.member("kernels_seen", static_cast<unsigned long long>(c.kernels_seen));
  w.member("kernels_dropped", static_cast<unsigned long long>(c.kernels_dropped));
  w.member("kernels_late", static_cast<unsigned long long>(c.kernels_late));
  w.member("kernels_other_device", static_cast<unsigned long long>(c.kernels_other_device));
  w.member("nan_values", static_cast<unsigned long long>(c.nan_values));
  w.end_object();
  w.end_object();
}

}  // namespace detail
}  // namespace kscope
