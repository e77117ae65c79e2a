// kscope/report/openmetrics.hpp — a report as live metrics: the OpenMetrics text format
// that Prometheus scrapes and node_exporter's textfile collector reads.
//
// Every number comes from the session_report as it is; nothing is computed that the report
// does not hold. Names follow the Prometheus conventions: the prefix kscope_, base units
// in the name (_seconds, _bytes, _ratio for shares 0..1), counters ending in _total, and a
// label for every dimension. User strings (scope paths, sampled metric names) are label
// values only, never part of a metric name, escaped as the format says (\\, \", \n) with
// invalid UTF-8 replaced by U+FFFD. A value the report does not have (NaN) is left out,
// never printed as NaN. Every metric is listed in docs/openmetrics.md.
//
//   const std::string text = kscope::openmetrics(kscope::session::global().report());
//   // # TYPE kscope_scope_calls counter
//   // kscope_scope_calls_total{scope="step/decode"} 1200
//   // ...
//   // # EOF
//
// session::openmetrics() is the same for the running program; KSCOPE_METRICS=path writes it
// to a file every KSCOPE_METRICS_INTERVAL seconds (session/detail/metrics_writer.hpp).
#pragma once

#include "../core/config.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/text_escape.hpp"
#include "data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>

namespace kscope {

// The report in the OpenMetrics text format, ending with "# EOF" (docs/openmetrics.md).
//   std::fputs(kscope::openmetrics(report).c_str(), stdout);
[[nodiscard]] KSCOPE_DECL std::string openmetrics(const session_report& r);

namespace detail {

// Appends `value` as an OpenMetrics label value (without the quotes): backslash, double
// quote and line feed escaped, each invalid UTF-8 sequence as U+FFFD (the format is UTF-8).
KSCOPE_DECL void append_openmetrics_label_value(std::string& out, std::string_view value);

// One label of a sample: its name (a constant of kscope's) and its value (any text).
struct om_label {
  const char* name;
  std::string_view value;
};

// One metric family being written: its metadata lines come out with its first sample, so
// a family the report has nothing for is left out whole. Samples of one label set are
// written together (a summary's quantiles, _sum and _count), and a label set already
// written is refused: two scopes with the same path (a user scope called "(unscoped)")
// cannot give the parser a duplicate series.
class om_family {
 public:
  // `type`: counter, gauge or summary; `unit`: a suffix of `name` ("seconds") or "".
  om_family(std::string& out, std::string_view common_labels, const char* name, const char* type, const char* unit,
            const char* help);
  om_family(const om_family&) = delete;
  om_family& operator=(const om_family&) = delete;

  // Starts the samples of one label set; false (write nothing) when it was written before.
  bool begin(std::initializer_list<om_label> labels);
  // A sample of the label set begun last: name + suffix, its labels plus `extra` (the
  // quantile), the value. Non-finite values are skipped, and so is a negative _total or
  // _sum (a counter never goes below zero).
  void value(const char* suffix, double v, om_label extra = {nullptr, {}});
  void count(const char* suffix, std::uint64_t v);

 private:
  void start_line(const char* suffix, om_label extra);

  std::string& out_;
  std::string_view common_;
  const char* name_;
  const char* type_;
  const char* unit_;
  const char* help_;
  bool described_ = false;
  std::string labels_;  // of the label set begun last, without braces
  std::set<std::string> seen_;
};

// A summary of per-call times in nanoseconds, written in seconds: the quantiles the report
// computed (median, p90, p99, over the samples kept after warm-up removal) and the count
// and sum of every call. Without a finite, non-negative sum it has neither _sum nor _count
// (the format wants both or neither).
KSCOPE_DECL void om_time_summary(om_family& f, const summary& s, double sum_ns, std::uint64_t count);

// The first device's name: a context line reads "NVIDIA H200: sm_90, 132 SMs ...".
KSCOPE_DECL std::string om_device_name(const report_context& c);

// A sampled metric given in percent ("...pct...") is a share, written as a ratio.
KSCOPE_DECL bool om_is_percent(const std::string& metric);

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
namespace detail {

KSCOPE_DECL void append_openmetrics_label_value(std::string& out, std::string_view value) {
  for (std::size_t i = 0; i < value.size();) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x80) {
      if (c == '\\') out += "\\\\";
      else if (c == '"') out += "\\\"";
      else if (c == '\n') out += "\\n";
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    const utf8_char u = decode_utf8(value, i);
    if (u.valid) out.append(value.data() + i, u.length);
    else out += utf8_replacement_character;
    i += u.length;
  }
}

KSCOPE_DECL om_family::om_family(std::string& out, std::string_view common_labels, const char* name, const char* type,
                                 const char* unit, const char* help)
    : out_(out), common_(common_labels), name_(name), type_(type), unit_(unit), help_(help) {}

KSCOPE_DECL bool om_family::begin(std::initializer_list<om_label> labels) {
  labels_.clear();
  for (const om_label& l : labels) {
    if (!labels_.empty()) labels_ += ',';
    labels_ += l.name;
    labels_ += "=\"";
    append_openmetrics_label_value(labels_, l.value);
    labels_ += '"';
  }
  if (!common_.empty()) {
    if (!labels_.empty()) labels_ += ',';
    labels_ += common_;
  }
  return seen_.insert(labels_).second;
}

KSCOPE_DECL void om_family::start_line(const char* suffix, om_label extra) {
  if (!described_) {
    described_ = true;
    // HELP text is kscope's own: no backslash or line feed to escape.
    out_ += "# HELP ";
    out_ += name_;
    out_ += ' ';
    out_ += help_;
    out_ += "\n# TYPE ";
    out_ += name_;
    out_ += ' ';
    out_ += type_;
    out_ += '\n';
    if (unit_[0] != '\0') {
      out_ += "# UNIT ";
      out_ += name_;
      out_ += ' ';
      out_ += unit_;
      out_ += '\n';
    }
  }
  out_ += name_;
  out_ += suffix;
  if (!labels_.empty() || extra.name != nullptr) {
    out_ += '{';
    out_ += labels_;
    if (extra.name != nullptr) {
      if (!labels_.empty()) out_ += ',';
      out_ += extra.name;
      out_ += "=\"";
      append_openmetrics_label_value(out_, extra.value);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
}

KSCOPE_DECL void om_family::value(const char* suffix, double v, om_label extra) {
  if (!std::isfinite(v) || (suffix[0] != '\0' && v < 0)) return;
  start_line(suffix, extra);
  out_ += format_round_trip(v == 0 ? 0.0 : v);  // never "-0"
  out_ += '\n';
}

KSCOPE_DECL void om_family::count(const char* suffix, std::uint64_t v) {
  start_line(suffix, {nullptr, {}});
  out_ += std::to_string(v);
  out_ += '\n';
}

KSCOPE_DECL void om_time_summary(om_family& f, const summary& s, double sum_ns, std::uint64_t count) {
  const std::pair<const char*, double> quantiles[] = {{"0.5", s.median}, {"0.9", s.p90}, {"0.99", s.p99}};
  if (s.n > 0)
    for (const auto& [q, ns] : quantiles)
      if (std::isfinite(ns) && ns >= 0) f.value("", ns / 1e9, {"quantile", q});
  if (std::isfinite(sum_ns) && sum_ns >= 0) {
    f.value("_sum", sum_ns / 1e9);
    f.count("_count", count);
  }
}

KSCOPE_DECL std::string om_device_name(const report_context& c) {
  if (c.devices.empty()) return {};
  const std::string& line = c.devices.front();
  return line.substr(0, line.find(": "));
}

KSCOPE_DECL bool om_is_percent(const std::string& metric) { return metric.find("pct") != std::string::npos; }

}  // namespace detail

KSCOPE_DECL std::string openmetrics(const session_report& r) {
  using detail::om_family;
  using detail::om_time_summary;
  std::string out;
  out.reserve(4096 + r.scopes.size() * 1024);
  // Every series carries the rank when there is one: the files of several ranks on one host
  // then never hold the same series twice (node_exporter refuses duplicates across files).
  std::string rank_label;
  const std::string rank_text = std::to_string(r.context.rank);
  if (r.context.rank >= 0) rank_label = "rank=\"" + rank_text + "\"";
  const std::string_view common = rank_label;
  const auto is_unscoped = [](const scope_report& s) { return s.id == unscoped_node; };

  {
    // An info metric as Prometheus writes one: a gauge of 1 (the OpenMetrics `info` type is
    // refused by the classic text parser node_exporter's textfile collector uses).
    const std::string device = detail::om_device_name(r.context);
    om_family f(out, {}, "kscope_build_info", "gauge", "",
                "kscope version, the run's first GPU and its rank (labels); the value is 1.");
    if (r.context.rank >= 0 && !device.empty())
      f.begin({{"version", r.context.kscope_version}, {"device", device}, {"rank", rank_text}});
    else if (!device.empty()) f.begin({{"version", r.context.kscope_version}, {"device", device}});
    else if (r.context.rank >= 0) f.begin({{"version", r.context.kscope_version}, {"rank", rank_text}});
    else f.begin({{"version", r.context.kscope_version}});
    f.count("", 1);
  }

  // ---- per scope: calls and times -----------------------------------------------------------
  {
    om_family f(out, common, "kscope_scope_calls", "counter", "", "Calls of the scope that closed (profiled calls excluded).");
    for (const scope_report& s : r.scopes)
      if (!is_unscoped(s) && f.begin({{"scope", s.path}})) f.count("_total", s.calls);
  }
  {
    om_family f(out, common, "kscope_scope_host_seconds", "summary", "seconds",
                "Host (wall) time per call of the scope; sum: inclusive time of all calls.");
    for (const scope_report& s : r.scopes)
      if (!is_unscoped(s) && f.begin({{"scope", s.path}})) om_time_summary(f, s.host_ns, s.host_inclusive_ns, s.calls);
  }
  {
    om_family f(out, common, "kscope_scope_gpu_seconds", "summary", "seconds",
                "GPU time per call between the scope's CUDA events (scopes with a stream).");
    for (const scope_report& s : r.scopes)
      if (s.gpu_calls > 0 && f.begin({{"scope", s.path}})) om_time_summary(f, s.gpu_ns, s.gpu_total_ns, s.gpu_calls);
  }

  // ---- per scope: GPU activity (CUPTI), exclusive of child scopes ----------------------------
  // A counter family over the scopes with GPU activity for which `has` holds.
  const auto activity_counter = [&](const char* name, const char* unit, const char* help, auto has, auto write) {
    om_family f(out, common, name, "counter", unit, help);
    for (const scope_report& s : r.scopes)
      if (s.gpu_activity && has(*s.gpu_activity) && f.begin({{"scope", s.path}})) write(f, *s.gpu_activity);
  };
  const auto always = [](const node_gpu_activity&) { return true; };
  // The counters hold what CUPTI recorded. The share estimated for CUDA-graph replays traced
  // as one record (scaled from the replays traced node by node) is worked out again at each
  // report and can fall when a slower replay is traced: a counter that went down would read
  // as a restart, so the estimate is a gauge of its own.
  const auto recorded = [](std::int64_t total, std::int64_t scaled) { return std::max<std::int64_t>(total - scaled, 0); };
  activity_counter("kscope_scope_kernels", "",
                   "Kernels of the scope CUPTI recorded (child scopes' are theirs; graph replays traced as one record: "
                   "kscope_scope_estimated_kernels).",
                   always, [](om_family& f, const node_gpu_activity& a) {
                     f.count("_total", a.kernel_count - std::min(a.kernel_count, a.scaled_kernel_count));
                   });
  activity_counter("kscope_scope_kernel_seconds", "seconds",
                   "Sum of the durations of the scope's recorded kernels (overlapping kernels count twice).", always,
                   [&](om_family& f, const node_gpu_activity& a) {
                     f.value("_total", static_cast<double>(recorded(a.kernel_ns, a.scaled_kernel_ns)) / 1e9);
                   });
  activity_counter("kscope_scope_gpu_busy_seconds", "seconds",
                   "Time at least one of the scope's recorded kernels ran (union over streams and devices).", always,
                   [&](om_family& f, const node_gpu_activity& a) {
                     f.value("_total", static_cast<double>(recorded(a.busy_ns, a.scaled_busy_ns)) / 1e9);
                   });
  // The estimate: gauges, present where a scope replayed graphs traced as one record.
  const auto estimate_gauge = [&](const char* name, const char* unit, const char* help, auto write) {
    om_family f(out, common, name, "gauge", unit, help);
    for (const scope_report& s : r.scopes) {
      if (!s.gpu_activity) continue;
      const node_gpu_activity& a = *s.gpu_activity;
      if ((a.scaled_kernel_count > 0 || a.scaled_kernel_ns > 0 || a.scaled_busy_ns > 0) && f.begin({{"scope", s.path}}))
        write(f, a);
    }
  };
  estimate_gauge("kscope_scope_estimated_kernels", "",
                 "Kernels of the scope's CUDA-graph replays traced as one record, estimated from its replays traced node "
                 "by node (may fall as more replays are traced).",
                 [](om_family& f, const node_gpu_activity& a) { f.count("", a.scaled_kernel_count); });
  estimate_gauge("kscope_scope_estimated_kernel_seconds", "seconds",
                 "Kernel time of the scope's graph replays traced as one record, estimated the same way.",
                 [](om_family& f, const node_gpu_activity& a) {
                   f.value("", static_cast<double>(std::max<std::int64_t>(a.scaled_kernel_ns, 0)) / 1e9);
                 });
  estimate_gauge("kscope_scope_estimated_gpu_busy_seconds", "seconds",
                 "Busy time of the scope's graph replays traced as one record: estimated, or their whole span where "
                 "none of a graph's replays was traced node by node.",
                 [](om_family& f, const node_gpu_activity& a) {
                   f.value("", static_cast<double>(std::max<std::int64_t>(a.scaled_busy_ns, 0)) / 1e9);
                 });
  // Copies: one series per direction the scope copied in.
  const auto copy_counter = [&](const char* name, const char* unit, const char* help, auto write) {
    om_family f(out, common, name, "counter", unit, help);
    for (const scope_report& s : r.scopes) {
      if (!s.gpu_activity) continue;
      for (std::size_t d = 0; d < copy_direction_count; ++d) {
        const copy_totals& c = s.gpu_activity->memcpy[d];
        if (c.count > 0 && f.begin({{"scope", s.path}, {"direction", to_string(static_cast<copy_direction>(d))}}))
          write(f, c);
      }
    }
  };
  copy_counter("kscope_scope_copies", "", "Memory copies the scope issued, by direction (h2d, d2h, d2d, other).",
               [](om_family& f, const copy_totals& c) { f.count("_total", c.count); });
  copy_counter("kscope_scope_copy_bytes", "bytes", "Bytes the scope's memory copies moved, by direction.",
               [](om_family& f, const copy_totals& c) { f.count("_total", c.bytes); });
  copy_counter("kscope_scope_copy_seconds", "seconds", "Sum of the durations of the scope's memory copies, by direction.",
               [](om_family& f, const copy_totals& c) { f.value("_total", static_cast<double>(c.ns) / 1e9); });
  const auto has_memsets = [](const node_gpu_activity& a) { return a.memset.count > 0; };
  activity_counter("kscope_scope_memsets", "", "Memsets the scope issued.", has_memsets,
                   [](om_family& f, const node_gpu_activity& a) { f.count("_total", a.memset.count); });
  activity_counter("kscope_scope_memset_bytes", "bytes", "Bytes the scope's memsets wrote.", has_memsets,
                   [](om_family& f, const node_gpu_activity& a) { f.count("_total", a.memset.bytes); });
  activity_counter("kscope_scope_memset_seconds", "seconds", "Sum of the durations of the scope's memsets.", has_memsets,
                   [](om_family& f, const node_gpu_activity& a) { f.value("_total", static_cast<double>(a.memset.ns) / 1e9); });
  const auto has_waits = [](const node_gpu_activity& a) { return a.host_sync.count > 0; };
  activity_counter("kscope_scope_host_waits", "",
                   "Host waits for the GPU (stream, event, context synchronizations) in the scope.", has_waits,
                   [](om_family& f, const node_gpu_activity& a) { f.count("_total", a.host_sync.count); });
  activity_counter("kscope_scope_host_wait_seconds", "seconds",
                   "Time the scope's threads waited for the GPU in synchronizations.", has_waits,
                   [](om_family& f, const node_gpu_activity& a) { f.value("_total", static_cast<double>(a.host_sync.ns) / 1e9); });

  // ---- tracing in windows: what the activity figures above rest on --------------------------
  if (r.trace_windows.windowed) {
    const trace_window_summary& w = r.trace_windows;
    {
      om_family f(out, common, "kscope_traced_windows", "counter", "",
                  "Windows in which the activity collector traced launches; the kscope_scope_kernel*, copy, memset, "
                  "host wait and GPU-time series cover these windows only.");
      f.begin({});
      f.count("_total", w.windows);
    }
    {
      om_family f(out, common, "kscope_traced_seconds", "counter", "seconds", "Length of the traced windows.");
      f.begin({});
      f.value("_total", static_cast<double>(w.traced_ns) / 1e9);
    }
    {
      om_family f(out, common, "kscope_traced_ratio", "gauge", "ratio",
                  "Share of the time since tracing began that launches were traced.");
      f.begin({});
      f.value("", w.traced_share());
    }
  }

  // ---- where the GPU's time went (the recent window the rings hold) --------------------------
  if (r.gpu_time) {
    const gpu_time_report& t = *r.gpu_time;
    const double busy = t.busy_share;
    {
      om_family f(out, common, "kscope_gpu_busy_ratio", "gauge", "ratio",
                  "Share of the window with a kernel, copy or memset running on some GPU.");
      f.begin({});
      f.value("", busy);
    }
    {
      om_family f(out, common, "kscope_gpu_idle_ratio", "gauge", "ratio", "Share of the window with nothing running on the GPUs.");
      f.begin({});
      if (std::isfinite(busy)) f.value("", std::max(0.0, 1.0 - busy));
    }
    if (t.wall_ns > 0) {
      {
        om_family f(out, common, "kscope_gpu_window_seconds", "gauge", "seconds",
                    "Length of the window the GPU busy share is measured over (the most recent host intervals and GPU events).");
        f.begin({});
        f.value("", t.wall_ns / 1e9);
      }
      {
        om_family f(out, common, "kscope_gpu_window_busy_seconds", "gauge", "seconds",
                    "Time in the window with some GPU work running.");
        f.begin({});
        f.value("", t.busy_ns / 1e9);
      }
    }
    {
      om_family f(out, common, "kscope_gpu_idle_seconds", "gauge", "seconds",
                  "GPU idle gaps in the window, by the scope open on the host meanwhile.");
      for (const gpu_idle_by_scope& g : t.idle_by_scope)
        if (f.begin({{"scope", g.path.empty() ? std::string_view("(no scope)") : std::string_view(g.path)}}))
          f.value("", g.ns / 1e9);
    }
    {
      om_family f(out, common, "kscope_scope_gpu_share_ratio", "gauge", "ratio",
                  "The scope's share of the GPU time of all scopes (its own kernels, copies and memsets).");
      for (const scope_gpu_time& s : t.scopes)
        if (std::isfinite(s.share_of_gpu) && f.begin({{"scope", s.path}})) f.value("", s.share_of_gpu);
    }
  }

  // ---- GPU metrics sampled while running (PM sampling) ---------------------------------------
  if (r.sampled_metrics && (r.sampled_metrics->running || r.sampled_metrics->samples > 0)) {
    const session_sampled_metrics& m = *r.sampled_metrics;
    const sampled_metrics_report& d = m.data;
    const std::string gpu = std::to_string(d.device);
    {
      om_family f(out, common, "kscope_gpu_samples", "counter", "", "GPU metric samples decoded (PM sampling).");
      f.begin({{"gpu", gpu}});
      f.count("_total", m.samples);
    }
    {
      om_family f(out, common, "kscope_gpu_samples_lost", "counter", "",
                  "GPU metric samples lost (buffer full, image resets, unusable).");
      f.begin({{"gpu", gpu}});
      f.count("_total", m.samples_lost);
    }
    {
      om_family f(out, common, "kscope_gpu_sampled_coverage_ratio", "gauge", "ratio", "Share of the run the sampling windows covered.");
      f.begin({{"gpu", gpu}});
      f.value("", m.coverage);
    }
    {
      om_family f(out, common, "kscope_gpu_sampled_busy_ratio", "gauge", "ratio",
                  "Share of the sampled time with a kernel running.");
      f.begin({{"gpu", gpu}});
      f.value("", d.device_wide.busy_share());
    }
    // Device-wide, then per scope: percentages as ratios, every other metric as the report
    // holds it (counts as a rate per second, others as their time-weighted mean).
    for (const bool percent : {true, false}) {
      om_family f(out, common, percent ? "kscope_gpu_sampled_ratio" : "kscope_gpu_sampled_value", "gauge",
                  percent ? "ratio" : "",
                  percent ? "A sampled GPU metric given in percent (the metric label), as a ratio: time-weighted mean."
                          : "A sampled GPU metric (the metric label): counts as a rate per second, others as their "
                            "time-weighted mean.");
      for (std::size_t i = 0; i < d.metrics.size() && i < d.device_wide.values.size(); ++i)
        if (detail::om_is_percent(d.metrics[i]) == percent && f.begin({{"gpu", gpu}, {"metric", d.metrics[i]}}))
          f.value("", d.device_wide.values[i].mean / (percent ? 100.0 : 1.0));
    }
    for (const bool percent : {true, false}) {
      om_family f(out, common, percent ? "kscope_scope_sampled_ratio" : "kscope_scope_sampled_value", "gauge",
                  percent ? "ratio" : "",
                  percent ? "A sampled GPU metric in percent, as a ratio, over the samples the scope's kernels overlapped."
                          : "A sampled GPU metric over the samples the scope's kernels overlapped (counts per second).");
      for (const scope_report& s : r.scopes) {
        const node_sampled_metrics* n = d.find(static_cast<sampled_node>(s.id));
        if (n == nullptr) continue;
        for (std::size_t i = 0; i < d.metrics.size() && i < n->values.size(); ++i)
          if (detail::om_is_percent(d.metrics[i]) == percent && std::isfinite(n->values[i].mean) &&
              f.begin({{"scope", s.path}, {"metric", d.metrics[i]}}))
            f.value("", n->values[i].mean / (percent ? 100.0 : 1.0));
      }
    }
  }

  out += "# EOF\n";
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
