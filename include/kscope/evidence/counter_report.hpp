// kscope/evidence/counter_report.hpp — the report's section for hardware counters per scope
// (counters/scope_counters.hpp: a bounded sample of each scope's calls, each profiled once with
// a one-pass metric group, or by kernel replay when asked): the
// data as the report holds it, built from the profiled calls' aggregate by
// make_scope_counter_report (pure), and its text and JSON printers.
//
// Per scope: calls profiled, kernels per call, DRAM bytes and FP FLOPs per call (from the
// counters, not from declared work), the speed-of-light pair, the measured roofline point
// per memory level, the declared-vs-measured line when they differ by more than 10 %. The
// classification (evidence/metrics.hpp: classify) is evidence for the scope's one verdict
// (verdict/scope_verdict.hpp), the conclusion the report prints; the section prints none.
#pragma once

#include "metrics.hpp"
#include "counter_cost.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/text_escape.hpp"
#include "../core/roofline.hpp"
#include "../core/work.hpp"
#include "../core/detail/text_layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kscope {

// One scope's counters, as the report holds them.
struct scope_counter_report {
  std::uint64_t profiled_calls = 0;
  std::uint64_t failed_calls = 0;
  std::uint64_t kernels = 0;           // over the profiled calls
  std::uint64_t kernels_dropped = 0;
  // Profiled calls with more kernels than the counter-data image held: counted, their
  // kernels left out of the sums (which are scaled from the whole calls); kernels: those
  // they did profile (so per call at least that many).
  std::uint64_t partial_calls = 0;
  std::uint64_t partial_kernels = 0;
  metric_values totals;                // every metric, aggregated over the profiled calls
  // One-pass groups rotated over the calls (1: every metric in every call), and the calls
  // each metric rests on: a sum from fewer calls is scaled to all of them in `totals`.
  std::size_t groups = 1;
  std::map<std::string, std::size_t, std::less<>> metric_calls;
  measured_roofline measured;          // rates over the profiled kernels' time
  std::optional<work_check> declared_vs_measured;
  classification classified;

  [[nodiscard]] double per_call(double total) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double scope_counter_report::per_call(double total) const noexcept {
  return profiled_calls > 0 ? total / static_cast<double>(profiled_calls) : std::numeric_limits<double>::quiet_NaN();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The session-wide part: what ran, what was skipped, what it cost.
struct session_counters_status {
  bool enabled = false;
  std::string status;                 // one line
  std::vector<std::string> metrics;
  std::vector<std::string> notes;
  std::uint64_t passes = 0;
  std::uint64_t skipped_busy = 0;
  scope_counter_cost cost;
};



// Builds a scope's section from its profiled calls' aggregate. `declared_per_call` is the
// scope's declared work per call (NaN fields when none), `span_ns` and `gpu_busy_ns` its
// host span and GPU busy time per call from the timed calls (NaN when unknown: then the
// launch/CPU check is named as missing), `roofs` the device's (may be null).
//   auto r = kscope::make_scope_counter_report(agg, calls, 0, kernels, 0, declared, span, busy, &roofs);
[[nodiscard]] KSCOPE_DECL scope_counter_report make_scope_counter_report(
    const counter_aggregate& aggregate, std::uint64_t profiled_calls, std::uint64_t failed_calls,
    std::uint64_t kernels, std::uint64_t kernels_dropped, const work& declared_per_call, double span_ns,
    double gpu_busy_ns, const hierarchical_roofs* roofs, std::size_t groups = 1, std::uint64_t partial_calls = 0,
    std::uint64_t partial_kernels = 0);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL scope_counter_report make_scope_counter_report(const counter_aggregate& aggregate, std::uint64_t profiled_calls, std::uint64_t failed_calls,
    std::uint64_t kernels, std::uint64_t kernels_dropped, const work& declared_per_call, double span_ns,
    double gpu_busy_ns, const hierarchical_roofs* roofs, std::size_t groups, std::uint64_t partial_calls,
    std::uint64_t partial_kernels) {
  scope_counter_report r;
  r.groups = groups;
  r.partial_calls = partial_calls;
  r.partial_kernels = partial_kernels;
  for (const auto& [name, m] : aggregate.metrics()) r.metric_calls.emplace(name, m.calls);
  r.profiled_calls = profiled_calls;
  r.failed_calls = failed_calls;
  r.kernels = kernels;
  r.kernels_dropped = kernels_dropped;
  r.totals = aggregate.totals();
  if (profiled_calls == 0 || kernels == 0) {
    r.classified.verdict.text =
        profiled_calls == 0 ? "undetermined: no call was profiled"
        : partial_calls > 0 ? "undetermined: every profiled call launched more kernels than the counter-data image held "
                              "(at least " + std::to_string(partial_kernels / partial_calls + 1) +
                                  "); no call was profiled whole"
                            : "undetermined: the profiled calls launched no kernel";
    return r;
  }
  r.measured = measure_roofline(r.totals, roofs);
  const bool declared = std::isfinite(declared_per_call.flops) || std::isfinite(declared_per_call.bytes);
  if (declared)
    r.declared_vs_measured =
        compare_declared_work(declared_per_call, r.totals, static_cast<std::size_t>(profiled_calls));
  classification_input in;
  in.counters = r.totals;
  // The timeline per call: the kernels' busy time against the span of the timed calls.
  if (std::isfinite(span_ns) && span_ns > 0 && std::isfinite(gpu_busy_ns) && gpu_busy_ns >= 0) {
    in.span_ns = span_ns;
    in.gpu_busy_ns = gpu_busy_ns;
  }
  if (roofs) in.roofs = *roofs;
  r.classified = classify(in);
  return r;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

KSCOPE_DECL std::string counter_cell(double v, const char* unit);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string counter_cell(double v, const char* unit) {
  return std::isfinite(v) ? format_si(v, unit) : std::string("-");
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Under rotating one-pass groups, how many calls the figures rest on: "metrics from 1-2 of
// 5 profiled calls (3 one-pass groups rotated; DRAM bytes 2 calls, FP instructions 1, ...)".
KSCOPE_DECL std::string metric_calls_text(const scope_counter_report& c);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string metric_calls_text(const scope_counter_report& c) {
  std::size_t lo = 0, hi = 0;
  for (const auto& [name, calls] : c.metric_calls) {
    (void)name;
    lo = lo == 0 ? calls : std::min(lo, calls);
    hi = std::max(hi, calls);
  }
  std::string out = "metrics from " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi)) +
                    " of " + std::to_string(c.profiled_calls) + " profiled calls (" + std::to_string(c.groups) +
                    " one-pass groups rotated";
  const auto calls_of = [&c](counter_metric id) -> std::size_t {
    for (std::string_view n : metric_info_of(id).names) {
      const auto it = c.metric_calls.find(n);
      if (it != c.metric_calls.end()) return it->second;
    }
    return 0;
  };
  const std::pair<const char*, counter_metric> shown[] = {{"DRAM reads", counter_metric::dram_read_bytes},
                                                          {"DRAM writes", counter_metric::dram_write_bytes},
                                                          {"fp32 FMA", counter_metric::fp32_fma},
                                                          {"DRAM %", counter_metric::dram_throughput},
                                                          {"tensor pipe", counter_metric::tensor_pipe_active}};
  for (const auto& [label, id] : shown)
    if (const std::size_t n = calls_of(id)) out += std::string("; ") + label + " " + std::to_string(n);
  return out + ")";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The section's text: a table, then per scope the work line and the measured roofline.
template <class Scopes>
std::string scope_counters_text(const session_counters_status& st, const Scopes& scopes) {
  std::string out = "\nHardware counters per scope (sampled calls profiled; their times are not in the tables "
                    "above)\n";
  out += wrap("  " + printable_name(st.status), 98);
  bool any = false;
  for (const auto& s : scopes) any = any || s.counters.has_value();
  if (!any) {
    // Calls may have been profiled (and paid for) though none collected: the cost stays.
    if (const std::string cost = describe_cost(st.cost); !cost.empty()) out += wrap("  " + cost, 98);
    for (const std::string& n : st.notes) out += wrap("note: " + printable_name(n), 98);
    return out;
  }
  out += fit("scope", 26) + fit("prof", 6, true) + fit("kern/c", 8, true) + fit("DRAM/call", 11, true) +
         fit("FLOP/call", 11, true) + fit("SM %", 7, true) + fit("mem %", 7, true) + "\n";
  out += std::string(76, '-') + "\n";
  std::string details;
  for (const auto& s : scopes) {
    if (!s.counters) continue;
    const scope_counter_report& c = *s.counters;
    const double dram = dram_bytes_moved(c.totals);
    const double sm = metric_value(c.totals, counter_metric::sm_throughput);
    const double mem = metric_value(c.totals, counter_metric::memory_throughput);
    std::string name(indent_width(s.depth), ' ');
    name += printable_name(s.name);
    // Kernels per call from the calls profiled whole; only partial calls: a lower bound.
    const std::uint64_t whole = c.profiled_calls - std::min(c.profiled_calls, c.partial_calls);
    const std::string per_call_kernels =
        whole > 0 ? format_fixed(static_cast<double>(c.kernels) / static_cast<double>(whole), 1)
        : c.partial_calls > 0
            ? ">" + format_fixed(static_cast<double>(c.partial_kernels) / static_cast<double>(c.partial_calls), 0)
            : std::string("-");
    out += fit(name, 26) + fit(std::to_string(c.profiled_calls), 6, true) +
           fit(per_call_kernels + (c.partial_calls > 0 && whole > 0 ? "*" : ""), 8, true) +
           fit(counter_cell(c.per_call(dram), "B"), 11, true) +
           fit(counter_cell(c.per_call(c.measured.flops.total), ""), 11, true) +
           fit(std::isfinite(sm) ? format_fixed(sm, 1) : "-", 7, true) +
           fit(std::isfinite(mem) ? format_fixed(mem, 1) : "-", 7, true) + "\n";
    // The numbers only: what limits the scope is its one verdict ("verdict per scope").
    const std::string path = printable_name(s.path) + ": ";
    if (c.declared_vs_measured && !c.declared_vs_measured->text.empty())
      details += wrap(path + c.declared_vs_measured->text, 98);
    const std::string measured = describe(c.measured);
    if (!measured.empty()) details += wrap(path + "measured roofline: " + measured, 98);
    if (c.failed_calls)
      details += wrap(path + std::to_string(c.failed_calls) + " profiled calls failed (notes below)", 98);
    if (c.partial_calls)
      details += wrap(path + std::to_string(c.partial_calls) + " of " + std::to_string(c.profiled_calls) +
                          " profiled calls launched more kernels than the counter-data image held (it filled after " +
                          format_fixed(static_cast<double>(c.partial_kernels) / static_cast<double>(c.partial_calls), 0) +
                          "): their kernels are left out and the sums rest on the " + std::to_string(whole) +
                          " calls profiled whole; the scope's later calls got an image twice as large" +
                          (whole == 0 ? " (none profiled whole yet: no figure in this row is per call)" : ""),
                      98);
    if (c.groups > 1) details += wrap(path + metric_calls_text(c), 98);
  }
  out += wrap("prof: calls profiled; kern/c: kernels per profiled call (* some calls had more kernels than the "
              "counter image held, >N: every call did); DRAM/call, FLOP/call: measured (DRAM "
              "read + write, and the write-back after the call where measured; SASS FP instructions, fma = 2); SM %, mem %: speed-of-light throughputs, "
              "kernel-time weighted; what limits each scope: its verdict, below",
              98);
  out += details;
  std::string line = std::to_string(st.passes) + " counter passes";
  if (st.skipped_busy) line += "; " + std::to_string(st.skipped_busy) + " due calls not profiled (another pass ran)";
  if (const std::string cost = describe_cost(st.cost); !cost.empty()) line += "; " + cost;
  out += wrap(line, 98);
  for (const std::string& n : st.notes) out += wrap("note: " + printable_name(n), 98);
  return out;
}

KSCOPE_DECL void write_scope_counters_json(json_writer& w, const scope_counter_report& c);

KSCOPE_DECL void write_counters_status_json(json_writer& w, const session_counters_status& st);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void write_scope_counters_json(json_writer& w, const scope_counter_report& c) {
  w.begin_object();
  w.member("profiled_calls", static_cast<unsigned long long>(c.profiled_calls));
  w.member("failed_calls", static_cast<unsigned long long>(c.failed_calls));
  w.member("kernels", static_cast<unsigned long long>(c.kernels));
  w.member("kernels_dropped", static_cast<unsigned long long>(c.kernels_dropped));
  w.member("partial_calls", static_cast<unsigned long long>(c.partial_calls));
  w.member("partial_kernels", static_cast<unsigned long long>(c.partial_kernels));
  w.key("totals").begin_object();
  for (const auto& [name, value] : c.totals) w.member(name, value);
  w.end_object();
  w.member("groups", static_cast<unsigned long long>(c.groups));
  w.key("metric_calls").begin_object();
  for (const auto& [name, calls] : c.metric_calls) w.member(name, static_cast<unsigned long long>(calls));
  w.end_object();
  w.key("measured").begin_object();
  w.member("seconds", c.measured.seconds);
  w.member("flops", c.measured.flops.total);
  w.member("flops_per_s", c.measured.flops_per_s);
  w.member("precisions", c.measured.flops.precision_text());
  w.key("levels").begin_array();
  for (const level_point& p : c.measured.levels) {
    w.begin_object();
    w.member("level", to_string(p.level)).member("bytes", p.bytes).member("intensity", p.intensity);
    w.member("bytes_per_s", p.bytes_per_s).member("roof_bytes_per_s", p.roof_bytes_per_s);
    w.member("fraction_of_bandwidth", p.fraction_of_bandwidth);
    w.end_object();
  }
  w.end_array();
  w.key("problems").begin_array();
  for (const std::string& p : c.measured.problems) w.value(p);
  w.end_array();
  w.end_object();
  w.key("declared_vs_measured");
  if (!c.declared_vs_measured) {
    w.value(nullptr);
  } else {
    const work_check& k = *c.declared_vs_measured;
    w.begin_object();
    w.member("declared_bytes", k.declared_bytes).member("measured_dram_bytes", k.measured_dram_bytes);
    w.member("declared_flops", k.declared_flops).member("measured_flops", k.measured_flops);
    w.member("bytes_differ", k.bytes_differ).member("flops_differ", k.flops_differ).member("text", k.text);
    w.end_object();
  }
  w.end_object();
}

KSCOPE_DECL void write_counters_status_json(json_writer& w, const session_counters_status& st) {
  w.begin_object();
  w.member("enabled", st.enabled).member("status", st.status);
  w.member("passes", static_cast<unsigned long long>(st.passes));
  w.member("skipped_busy", static_cast<unsigned long long>(st.skipped_busy));
  w.key("cost").begin_object();
  w.member("calls", static_cast<unsigned long long>(st.cost.calls));
  w.member("cold_calls", static_cast<unsigned long long>(st.cost.cold_calls));
  w.member("warm_calls", static_cast<unsigned long long>(st.cost.warm_calls));
  w.member("cold_before_ns", st.cost.cold_before_ns).member("warm_before_ns", st.cost.warm_before_ns);
  w.member("after_ns", st.cost.after_ns);
  w.member("abandoned_setups", static_cast<unsigned long long>(st.cost.abandoned_setups));
  w.member("abandoned_ns", st.cost.abandoned_ns);
  w.end_object();
  w.key("metrics").begin_array();
  for (const std::string& m : st.metrics) w.value(m);
  w.end_array();
  w.key("notes").begin_array();
  for (const std::string& n : st.notes) w.value(n);
  w.end_array();
  w.end_object();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
