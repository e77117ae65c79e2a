// kscope/bench/format.hpp — benchmark results as a markdown table, JSON
// ("kscope.bench/2", documented in docs/bench_schema.md) and CSV.
//
// Every timing is printed as a median with its confidence interval, every rate with
// the transformed interval, and every table starts with the context it was taken in.
// Names and messages are user data: the markdown shows each through printable_name()
// (core/detail/text_escape.hpp: controls and ESC visible, invalid UTF-8 as U+FFFD), the
// JSON through json_writer, the CSV through csv_field() (RFC 4180 quoting, same repair).
// Files are written all or nothing by write_output_file() (core/detail/atomic_file.hpp).
#pragma once

#include "../core/config.hpp"
#include "../core/detail/atomic_file.hpp"
#include "../core/detail/csv.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/text_escape.hpp"
#include "../core/detail/verdict_text.hpp"
#include "../device/device_info.hpp"
#include "../verdict/weigh.hpp"
#include "result.hpp"

#include <algorithm>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace kscope {
namespace detail {
namespace harness {

// printf with one floating-point conversion, independent of the C locale: the text around
// the conversion is copied ("%%" becomes "%"), and only the number itself goes through
// snprintf, whose locale decimal point (',' under de_DE) is then put back to '.'. Replacing
// the point in the whole output would also hit commas of the surrounding text.
KSCOPE_DECL std::string printf_string(const char* format, double a);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string printf_string(const char* format, double a) {
  std::string out;
  const char* p = format;
  bool converted = false;
  while (*p) {
    if (*p != '%') { out += *p++; continue; }
    if (p[1] == '%') { out += '%'; p += 2; continue; }
    const char* end = p + 1;
    while (*end && std::strchr("fFeEgGaA", *end) == nullptr) ++end;
    if (!*end || converted) { out += *p++; continue; }  // not a conversion kscope writes
    const std::string spec(p, static_cast<std::size_t>(end - p + 1));
    char buf[512];
    const int n = std::snprintf(buf, sizeof buf, spec.c_str(), a);
    std::string number(buf, n > 0 ? std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1) : 0);
    const char* point = std::localeconv()->decimal_point;
    if (point && *point && std::strcmp(point, ".") != 0) {
      const std::size_t at = number.find(point);
      if (at != std::string::npos) number.replace(at, std::strlen(point), ".");
    }
    out += number;
    converted = true;
    p = end + 1;
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Seconds in the unit that gives the median 1-3 integer digits.
struct time_unit {
  double scale;
  const char* name;
};
KSCOPE_DECL time_unit unit_for(double seconds);
// 4 significant digits: enough to see a 0.1 % change, few enough to read.
KSCOPE_DECL std::string number4(double v);
KSCOPE_DECL std::string format_seconds(double s);
// "[1.231, 1.236] ms" in the unit of `median`.
KSCOPE_DECL std::string format_seconds_interval(double median, const interval& ci);
// SI prefix: 45.6 TFLOP/s, 4.24 TB/s.
KSCOPE_DECL std::string format_rate(double v, const char* unit);
KSCOPE_DECL std::string format_percent(double fraction, int decimals = 1);

KSCOPE_DECL std::string join_dims(const std::vector<long long>& v, const char* separator);
KSCOPE_DECL std::string params_text(const bench_metadata& m, const char* separator);
KSCOPE_DECL std::string display_name(const bench_result& r);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL time_unit unit_for(double seconds) {
  const double s = std::fabs(seconds);
  if (!(s >= 1e-6)) return {1e9, "ns"};
  if (s < 1e-3) return {1e6, "us"};
  if (s < 1) return {1e3, "ms"};
  return {1, "s"};
}

KSCOPE_DECL std::string number4(double v) {
  if (!std::isfinite(v)) return "n/a";
  const double a = std::fabs(v);
  const char* format = a >= 1000 ? "%.0f" : a >= 100 ? "%.1f" : a >= 10 ? "%.2f" : "%.3f";
  return printf_string(format, v);
}

KSCOPE_DECL std::string format_seconds(double s) {
  if (!std::isfinite(s)) return "n/a";
  const time_unit u = unit_for(s);
  return number4(s * u.scale) + " " + u.name;
}

KSCOPE_DECL std::string format_seconds_interval(double median, const interval& ci) {
  if (!std::isfinite(ci.lo) || !std::isfinite(ci.hi)) return "n/a";
  const time_unit u = unit_for(median);
  return "[" + number4(ci.lo * u.scale) + ", " + number4(ci.hi * u.scale) + "] " + u.name;
}

KSCOPE_DECL std::string format_rate(double v, const char* unit) {
  if (!std::isfinite(v) || v <= 0) return "";
  const char* prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  while (v >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  return printf_string(v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v) + " " + prefixes[i] + unit;
}

KSCOPE_DECL std::string format_percent(double fraction, int decimals) {
  if (!std::isfinite(fraction)) return "n/a";
  return printf_string(decimals == 0 ? "%.0f %%" : decimals == 1 ? "%.1f %%" : "%.2f %%", 100 * fraction);
}

KSCOPE_DECL std::string join_dims(const std::vector<long long>& v, const char* separator) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += separator;
    s += std::to_string(v[i]);
  }
  return s;
}

KSCOPE_DECL std::string params_text(const bench_metadata& m, const char* separator) {
  std::string s;
  for (const auto& [k, v] : m.params) {
    if (!s.empty()) s += separator;
    s += k + "=" + v.to_string();
  }
  return s;
}

KSCOPE_DECL std::string display_name(const bench_result& r) {
  const std::string p = params_text(r.metadata, " ");
  return p.empty() ? r.name : r.name + " (" + p + ")";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS
inline std::string cell(const std::string& s) { return markdown_table_cell(s); }

}  // namespace harness
}  // namespace detail

// How fast a benchmark ran against its reference, with the interval: the sentence the
// markdown table and notes print.
//   "72.0 % of cuBLAS, 95 % CI [71.4, 72.6]"; "n/a vs cuBLAS" without a comparison.
//   if (r.reference) std::puts(kscope::relative_speed_text(*r.reference).c_str());
[[nodiscard]] KSCOPE_DECL std::string relative_speed_text(const reference_result& ref);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string relative_speed_text(const reference_result& ref) {
  using detail::harness::printf_string;
  if (!std::isfinite(ref.relative_speed)) return "n/a vs " + ref.name;
  std::string s = printf_string("%.1f %% of ", 100 * ref.relative_speed) + ref.name;
  if (std::isfinite(ref.relative_speed_ci.lo) && std::isfinite(ref.relative_speed_ci.hi)) {
    s += printf_string(", %.0f %% CI", 100 * ref.relative_speed_ci.level);
    s += printf_string(" [%.1f", 100 * ref.relative_speed_ci.lo);
    s += printf_string(", %.1f]", 100 * ref.relative_speed_ci.hi);
  }
  return s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The one verdict of a benchmark row, by the rule the session's scopes follow
// (verdict/weigh.hpp): the hardware counters of the profiled call when they were collected
// and decided, else the declared work's placement on the roofline; "undetermined" when
// counters were asked for and nothing decided; nullopt for a result that is not valid or
// has neither. Every printer (markdown, JSON, CSV) prints this one conclusion per row.
//   if (auto v = kscope::bench_verdict(r)) std::puts(v->verdict.text.c_str());
[[nodiscard]] KSCOPE_DECL std::optional<scope_verdict> bench_verdict(const bench_result& r);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<scope_verdict> bench_verdict(const bench_result& r) {
  if (!r.valid()) return std::nullopt;
  std::vector<verdict_candidate> candidates;
  std::vector<std::string> missing;
  const bool counted = r.counters && r.counters->collected() && r.counters->classified;
  if (counted) {
    candidates.push_back({"hardware counters", r.counters->classified->verdict, true, 1, "profiled call"});
    for (const std::string& m : r.counters->classified->missing) missing.push_back("hardware counters lacked " + m);
  } else if (r.counters) {
    missing.push_back("hardware counters: " + r.counters->state + " (the counters note says why)");
  }
  if (r.roofline) {
    const placement& p = *r.roofline;
    finding f;
    f.kind = p.limiter == bound::memory ? bottleneck::memory : p.limiter == bound::compute ? bottleneck::compute
                                                                                          : bottleneck::latency;
    if (p.limiter == bound::memory) f.where = "DRAM";
    f.facts = {{"declared.flops_per_s", p.flops_per_s, "FLOP/s"},
               {"declared.bytes_per_s", p.bytes_per_s, "B/s"},
               {"roofline.fraction_of_roof", p.fraction_of_roof, "share"}};
    // "memory-bound: ..." once: some hints already name their limiter.
    const std::string label = std::string(to_string(f.kind));
    const std::string text(hint(p));
    f.text = text.rfind(label, 0) == 0 ? text : label + ": " + text;
    candidates.push_back({"declared work", std::move(f), false, r.analysis.stats.n, "timed samples"});
  }
  return weigh_verdict(std::move(candidates), std::move(missing), r.counters.has_value());
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {
namespace harness {

// The table cell: relative speed, and the output check beside it when there was one.
KSCOPE_DECL std::string reference_cell(const reference_result& ref);

// The short form for a table cell or a progress line; stop_message has the sentence.
KSCOPE_DECL std::string stop_text(const bench_result& r);

// ---- hardware counters (bench::counters) ------------------------------------------

// The counters of a result that collected them; nullptr otherwise (not asked for, not
// valid, or unavailable: the notes then carry the one message).
KSCOPE_DECL const bench_counters* collected_counters(const bench_result& r);

// "memory (DRAM)", "compute (FP32 pipe)", "latency", "launch/CPU", "undetermined": a
// verdict in the few words of a table cell or a CSV field.
KSCOPE_DECL std::string bound_text(const finding& f);

// The measured DRAM bytes of the profiled call: read + write, with the write-back of what
// it left dirty in the L2 (dram_bytes_moved); NaN when not measured.
KSCOPE_DECL double measured_dram_bytes(const bench_counters& c);
KSCOPE_DECL double measured_level_bytes(const bench_counters& c, memory_level level);
KSCOPE_DECL double measured_flops(const bench_counters& c);

// A count for a table cell: "2.15 GB", "268 MFLOP", "0 FLOP"; empty when unknown.
KSCOPE_DECL std::string quantity_cell(double value, const char* unit);

// The notes of a result's counter pass: what was collected (or the one reason why not),
// the measured point and where the declared work differs (their conclusion is the row's
// verdict, noted by result_notes).
KSCOPE_DECL void append_counter_notes(const bench_counters& c, std::vector<std::string>& notes);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string reference_cell(const reference_result& ref) {
  std::string s = relative_speed_text(ref);
  if (ref.check.performed) {
    s += "; max rel. err " + printf_string("%.2g", ref.check.max_rel_error);
    if (!ref.check.passed) s += " (FAILED)";
  } else if (!ref.check.passed) {
    s += "; output check failed";
  }
  return s;
}

KSCOPE_DECL std::string stop_text(const bench_result& r) {
  switch (r.stopped) {
    case stop_reason::target_reached: return "target reached";
    case stop_reason::time_budget: return "time budget ran out";
    case stop_reason::sample_limit: return "sample limit";
    case stop_reason::error: return "error";
    case stop_reason::invalid: return "INVALID";
  }
  return "";
}

KSCOPE_DECL const bench_counters* collected_counters(const bench_result& r) {
  return r.valid() && r.counters && r.counters->collected() ? &*r.counters : nullptr;
}

KSCOPE_DECL std::string bound_text(const finding& f) {
  std::string kind = to_string(f.kind);
  const std::string suffix = "-bound";
  if (kind.size() > suffix.size() && kind.compare(kind.size() - suffix.size(), suffix.size(), suffix) == 0)
    kind.resize(kind.size() - suffix.size());
  return f.where.empty() ? kind : kind + " (" + f.where + ")";
}

KSCOPE_DECL double measured_dram_bytes(const bench_counters& c) {
  const double moved = dram_bytes_moved(c.metrics);
  if (std::isfinite(moved)) return moved;
  const level_point* dram = c.measured ? c.measured->find(memory_level::dram) : nullptr;
  return dram ? dram->bytes : std::numeric_limits<double>::quiet_NaN();
}

KSCOPE_DECL double measured_level_bytes(const bench_counters& c, memory_level level) {
  const level_point* p = c.measured ? c.measured->find(level) : nullptr;
  return p ? p->bytes : std::numeric_limits<double>::quiet_NaN();
}

KSCOPE_DECL double measured_flops(const bench_counters& c) {
  return c.measured ? c.measured->flops.total : std::numeric_limits<double>::quiet_NaN();
}

KSCOPE_DECL std::string quantity_cell(double value, const char* unit) {
  if (!std::isfinite(value)) return {};
  return value == 0 ? "0 " + std::string(unit) : kscope::detail::format_si(value, unit);
}

KSCOPE_DECL void append_counter_notes(const bench_counters& c, std::vector<std::string>& notes) {
  notes.push_back("counters (profiled after the timed samples, never timed): " + c.message);
  for (const std::string& n : c.notes) notes.push_back("counters note: " + n);
  if (!c.collected()) return;
  if (c.measured) {
    notes.push_back("measured: " + describe(*c.measured));
    for (const std::string& p : c.measured->problems) notes.push_back("measured roofline: " + p);
  }
  if (c.declared_vs_measured && !c.declared_vs_measured->text.empty())
    notes.push_back("declared vs measured (per call, over 10 % apart): " + c.declared_vs_measured->text);
  if (c.warp_stalls)
    notes.push_back("warp stalls (one more call, PC sampling, never timed): " + c.warp_stalls->message);
  // What the counters conclude is the row's one verdict (bench_verdict), noted once below.
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Megahertz from the kilohertz the CUDA attributes report; NaN when unknown.
KSCOPE_DECL double mhz_or_nan(int khz);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double mhz_or_nan(int khz) { return khz > 0 ? khz / 1e3 : std::numeric_limits<double>::quiet_NaN(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

KSCOPE_DECL std::string context_line(const bench_context& c);

// Notes printed under the table: how each number was obtained and what to distrust.
KSCOPE_DECL std::vector<std::string> result_notes(const bench_result& r);

KSCOPE_DECL std::string to_markdown(const bench_context& context, const std::vector<bench_result>& results);

// ---- JSON -------------------------------------------------------------------------

KSCOPE_DECL void write_interval(json_writer& w, const interval& ci);
KSCOPE_DECL void write_metadata(json_writer& w, const bench_metadata& m);
KSCOPE_DECL void write_summary(json_writer& w, const summary& s, double rel_half_width);
// valid == false (an invalid or failed result): the times the events read are not the
// benchmark's, so the summary's times are written as null; the raw samples stay, marked
// by the result's "valid": false, for whoever diagnoses the run.
KSCOPE_DECL void write_series(json_writer& w, const sample_series& s, const series_analysis& a, bool include_samples,
                         bool valid);
KSCOPE_DECL void write_rate(json_writer& w, const rate_estimate& r);

// The schema of to_json() (docs/bench_schema.md): one `verdict` per benchmark; "kscope.bench/1"
// had a declared limiter, a per-level bound and the counters' classification beside each other.
inline constexpr const char* bench_schema = "kscope.bench/2";

// The "counters" object of a result (docs/bench_schema.md, "benchmarks[].counters").
KSCOPE_DECL void write_counters(json_writer& w, const bench_counters& c);

KSCOPE_DECL std::string to_json(const bench_context& c, const std::vector<bench_result>& results, bool include_samples);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string context_line(const bench_context& c) {
  std::string s = "kscope " + c.kscope_version;
  const device_info& d = c.gpu;
  if (!d.present) {
    s += " | no GPU";
    if (!d.problem.empty()) s += " (" + d.problem + ")";
    return s;
  }
  s += " | " + d.name + " (cc " + std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor) + ", " +
       std::to_string(d.sm_count) + " SMs)";
  s += " | driver " + cuda_version_text(d.driver_version) + ", runtime " + cuda_version_text(d.runtime_version);
  const double sm_mhz = rated_sm_clock_mhz(d);
  if (std::isfinite(sm_mhz)) s += printf_string(" | SM clock max %.0f MHz", sm_mhz);
  const double dram = theoretical_bytes_per_s(d);
  if (std::isfinite(dram)) s += " | memory " + format_rate(dram, "B/s");
  if (d.l2_bytes > 0) s += printf_string(" | L2 %.0f MiB", static_cast<double>(d.l2_bytes) / (1 << 20));
  if (!c.timestamp_utc.empty()) s += " | " + c.timestamp_utc;
  return s;
}

KSCOPE_DECL std::vector<std::string> result_notes(const bench_result& r) {
  std::vector<std::string> notes;
  if (!r.valid()) {
    // The reason, and what the timer noted; no number that would read as the benchmark's.
    notes.push_back(r.stopped == stop_reason::invalid ? "INVALID: " + r.invalid_reason : r.stop_message);
    for (const std::string& w : r.warnings)
      if (w != r.invalid_reason) notes.push_back("note: " + w);
    return notes;
  }
  const summary& st = r.analysis.stats;
  notes.push_back(r.stop_message);
  std::string how = std::to_string(r.series.samples_s.size()) + " samples (" + std::to_string(st.n) + " used, " +
                    std::to_string(st.warmup) + " removed as warm-up by MSER) in " + printf_string("%.2f s", r.wall_s) +
                    "; warm-up " + std::to_string(r.series.warmup_calls) + " calls / " +
                    format_seconds(r.series.warmup_s) + "; " + to_string(r.options.cache) + " L2";
  if (r.series.launches_per_sample > 1)
    how += "; batched " + std::to_string(r.series.launches_per_sample) + " launches per sample (" +
           r.series.batching + "), per-launch time reported";
  notes.push_back(how);
  if (std::isfinite(r.analysis.median_sm_clock_mhz)) {
    std::string clocks = printf_string("SM clock median %.0f MHz", r.analysis.median_sm_clock_mhz) +
                         printf_string(" (min %.0f", r.analysis.min_sm_clock_mhz) +
                         printf_string(", max %.0f)", r.analysis.max_sm_clock_mhz);
    if (r.analysis.throttled_samples)
      clocks += "; " + std::to_string(r.analysis.throttled_samples) + " samples under " +
                format_percent(r.options.throttle_fraction, 0) + " of it " +
                (r.options.discard_throttled ? "(discarded)" : "(flagged, kept)");
    if (r.analysis.clock_managed)
      clocks += "; power-managed clock: measured over " + printf_string("%.2f s", r.series.measured_span_s) + ", " +
                std::to_string(r.analysis.clock_warmup) + " samples of clock transient removed";
    notes.push_back(clocks);
  }
  if (!r.metadata.strides.empty()) notes.push_back("strides " + join_dims(r.metadata.strides, ", "));
  auto rate_text = [](const rate_estimate& x, const char* unit) {
    return format_rate(x.median, unit) + " [" + format_rate(x.ci.lo, unit) + ", " + format_rate(x.ci.hi, unit) + "]";
  };
  if (std::isfinite(r.flops_per_s.median) || std::isfinite(r.bytes_per_s.median)) {
    std::string rates = "rates at the median, with the median's interval: ";
    if (std::isfinite(r.flops_per_s.median)) rates += rate_text(r.flops_per_s, "FLOP/s");
    if (std::isfinite(r.flops_per_s.median) && std::isfinite(r.bytes_per_s.median)) rates += ", ";
    if (std::isfinite(r.bytes_per_s.median)) rates += rate_text(r.bytes_per_s, "B/s");
    if (std::isfinite(r.fraction_of_peak_bandwidth))
      rates += " (" + format_percent(r.fraction_of_peak_bandwidth) + " of the " + format_rate(r.peak_bytes_per_s, "B/s") +
               " DRAM peak)";
    notes.push_back(rates);
  }
  if (r.resources) {
    const kernel_resources& k = *r.resources;
    if (k.error.empty() || k.registers_per_thread > 0) {
      std::string s = std::to_string(k.registers_per_thread) + " registers/thread, " +
                      std::to_string(k.static_smem_bytes) + " B static + " + std::to_string(k.dynamic_smem_bytes) +
                      " B dynamic shared memory, " + std::to_string(k.local_bytes_per_thread) +
                      " B local (spill) per thread";
      if (std::isfinite(k.occupancy))
        s += ", occupancy " + format_percent(k.occupancy, 0) + " (" + std::to_string(k.active_blocks_per_sm) +
             " blocks of " + std::to_string(k.block_threads) + " per SM)";
      notes.push_back(s);
    }
    if (!k.error.empty()) notes.push_back("kernel resources: " + k.error);
  }
  if (r.roofline) {
    // The declared point's numbers; what limits the row is its one verdict (below): with
    // counters, what the hardware measured (a naive GEMM far under both roofs would read
    // "latency-bound: check CPU gaps" from its declared work, while its counters show L1 at 92 %).
    notes.push_back("roofline: intensity " + printf_string("%.3g flop/B", r.roofline->intensity) + ", " +
                    format_percent(r.roofline->fraction_of_roof) + " of the roof (" +
                    format_rate(r.roofline->roof_flops_per_s, "FLOP/s") + " at this intensity), from the declared work" +
                    (r.peak_flops_source.empty() ? "" : " [compute roof: " + r.peak_flops_source + "]"));
  }
  if (r.reference) {
    const reference_result& ref = *r.reference;
    std::string s = "vs " + ref.name + ": " + relative_speed_text(ref) + " (reference median " +
                    format_seconds(ref.analysis.stats.median) + " " +
                    format_seconds_interval(ref.analysis.stats.median, ref.analysis.stats.median_ci) +
                    ", p = " + printf_string("%.2g", ref.versus.p_value) + ", " + kscope::to_string(ref.versus.result) + ")";
    notes.push_back(s);
    if (ref.check.performed) {
      std::string c = "output check: max rel. error " + printf_string("%.3g", ref.check.max_rel_error) +
                      ", max abs. error " + printf_string("%.3g", ref.check.max_abs_error) + " over " +
                      std::to_string(ref.check.values) + " values";
      if (std::isfinite(ref.check.tolerance))
        c += std::string(ref.check.passed ? " (within " : " (EXCEEDS ") + printf_string("%.3g)", ref.check.tolerance);
      notes.push_back(c);
    }
    if (!ref.check.note.empty()) notes.push_back("output check: " + ref.check.note);
  }
  if (r.counters) append_counter_notes(*r.counters, notes);
  // The row's one conclusion, its evidence under it.
  if (const std::optional<scope_verdict> v = bench_verdict(r)) {
    notes.push_back("verdict: " + verdict_headline(*v));
    for (const std::string& line : verdict_lines(*v)) notes.push_back("  " + line);
  }
  for (const std::string& w : r.warnings) notes.push_back("warning: " + w);
  return notes;
}

KSCOPE_DECL std::string to_markdown(const bench_context& context, const std::vector<bench_result>& results) {
  std::string out = printable_name(context_line(context)) + "\n\n";
  // The measured columns appear only when some result has counters: a table of plain
  // timings keeps its shape.
  bool measured_columns = false, verdict_column = false;
  std::vector<std::optional<scope_verdict>> verdicts;
  for (const bench_result& r : results) {
    measured_columns |= collected_counters(r) != nullptr;
    verdicts.push_back(bench_verdict(r));
    verdict_column |= verdicts.back().has_value();
  }
  out += "| benchmark | shape | dtype | median | median CI | ± | samples | SM clock | FLOP/s | B/s | roof | vs reference |";
  if (measured_columns) out += " DRAM B | FLOP (meas.) |";
  if (verdict_column) out += " bound |";
  out += "\n|---|---|---|---:|---|---:|---:|---:|---:|---:|---|---|";
  if (measured_columns) out += "---:|---:|";
  if (verdict_column) out += "---|";
  out += "\n";
  // The measured quantities, then the row's one conclusion (bench_verdict).
  std::size_t row = 0;
  const auto measured_cells = [&](const bench_result& r) -> std::string {
    std::string cells;
    if (measured_columns) {
      const bench_counters* c = collected_counters(r);
      cells += c == nullptr ? "  |  |"
                            : " " + quantity_cell(measured_dram_bytes(*c), "B") + " | " +
                                  quantity_cell(measured_flops(*c), "FLOP") + " |";
    }
    if (verdict_column) {
      const std::optional<scope_verdict>& v = verdicts[row];
      cells += " " + (v ? cell(bound_text(v->verdict)) : std::string()) + " |";
    }
    ++row;
    return cells;
  };
  for (const bench_result& r : results) {
    if (!r.valid()) {
      // No median, interval, rate or ratio: the row says the result is unusable, the
      // notes below say why.
      out += "| " + cell(display_name(r)) + " | " + cell(join_dims(r.metadata.shape, "x")) + " | " +
             cell(r.metadata.dtype) + " | " + (r.stopped == stop_reason::invalid ? "INVALID" : "ERROR") +
             " |  |  | " + std::to_string(r.series.samples_s.size()) + " |  |  |  |  |  |" + measured_cells(r) + "\n";
      continue;
    }
    const summary& st = r.analysis.stats;
    // One row, one verdict (its own column): the roof column gives the declared point's
    // share of its roof, and no limiter of its own.
    std::string roof;
    if (r.roofline) roof = format_percent(r.roofline->fraction_of_roof, 0) + " of roof";
    else if (std::isfinite(r.fraction_of_peak_bandwidth)) roof = format_percent(r.fraction_of_peak_bandwidth, 0) + " of BW";
    std::string clock = std::isfinite(r.analysis.median_sm_clock_mhz)
                            ? printf_string("%.0f MHz", r.analysis.median_sm_clock_mhz)
                            : "";
    std::string precision = format_percent(r.analysis.rel_half_width, 2);
    if (!r.target_reached()) precision += " (!)";
    out += "| " + cell(display_name(r)) + " | " + cell(join_dims(r.metadata.shape, "x")) + " | " +
           cell(r.metadata.dtype) + " | " + format_seconds(st.median) + " | " +
           format_seconds_interval(st.median, st.median_ci) + " | " + precision + " | " + std::to_string(st.n) +
           " | " + clock + " | " + format_rate(r.flops_per_s.median, "FLOP/s") + " | " +
           format_rate(r.bytes_per_s.median, "B/s") + " | " + roof + " | " +
           (r.reference ? cell(reference_cell(*r.reference)) : std::string()) + " |" + measured_cells(r) + "\n";
  }
  const double level = results.empty() ? 0.95 : results.front().options.level;
  out += "\nmedian CI: " + format_percent(level, 0) +
         " distribution-free interval of the median; ± its half-width relative to the median; (!) marks a run "
         "that stopped before reaching its target.\n";
  if (measured_columns)
    out += "DRAM B, FLOP (meas.): hardware counters of the call, profiled after the timed samples (once "
           "per counter pass) and never part of them (DRAM read + write bytes with the write-back of what the "
           "call left dirty in the L2, FLOPs from the SASS FP instruction counts).\n";
  if (verdict_column)
    out += "bound: the row's one verdict: the counters' (speed-of-light throughputs) where they decided, else the "
           "declared work's on the roofline; its evidence is in the notes.\n";
  bool any_unusable = false;
  for (const bench_result& r : results) any_unusable |= !r.valid();
  if (any_unusable)
    out += "INVALID: what was timed cannot be the benchmark's work; ERROR: nothing could be measured. Neither "
           "carries numbers; the notes say why.\n";
  for (const bench_result& r : results) {
    out += "\n" + printable_name(display_name(r)) + ":\n";
    // A note indented by two spaces (a verdict's evidence) is an item of the note above it.
    for (const std::string& n : result_notes(r))
      out += (n.rfind("  ", 0) == 0 ? "  - " + printable_name(n.substr(2)) : "- " + printable_name(n)) + "\n";
  }
  // The last guard: nothing that reached the table unescaped reaches a terminal raw.
  return printable_text(out);
}

KSCOPE_DECL void write_interval(json_writer& w, const interval& ci) {
  w.begin_object().member("lo", ci.lo).member("hi", ci.hi).member("level", ci.level).end_object();
}

KSCOPE_DECL void write_metadata(json_writer& w, const bench_metadata& m) {
  w.key("shape").begin_array();
  for (long long d : m.shape) w.value(d);
  w.end_array();
  w.member("dtype", m.dtype);
  w.key("strides").begin_array();
  for (long long d : m.strides) w.value(d);
  w.end_array();
  w.key("params").begin_object();
  for (const auto& [k, v] : m.params) {
    w.key(k);
    switch (v.type()) {
      case param_value::kind::integer: w.value(v.as_integer()); break;
      case param_value::kind::real: w.value(v.as_real()); break;
      case param_value::kind::text: w.value(v.as_text()); break;
    }
  }
  w.end_object();
}

KSCOPE_DECL void write_summary(json_writer& w, const summary& s, double rel_half_width) {
  w.begin_object();
  w.member("median", s.median);
  w.key("median_ci");
  write_interval(w, s.median_ci);
  w.member("rel_half_width", rel_half_width);
  w.member("mean", s.mean).member("stddev", s.stddev).member("min", s.min).member("max", s.max);
  w.member("mad", s.mad).member("p90", s.p90).member("p99", s.p99);
  w.member("n", s.n).member("warmup_removed", s.warmup).member("outliers", s.outliers).member("steady", s.steady);
  w.end_object();
}

KSCOPE_DECL void write_series(json_writer& w, const sample_series& s, const series_analysis& a, bool include_samples,
                         bool valid) {
  w.begin_object();
  w.member("launches_per_sample", s.launches_per_sample).member("batching", s.batching);
  w.member("graph_nodes", s.graph_nodes);
  w.member("first_estimate_s", s.first_estimate_s);
  w.key("warmup").begin_object();
  w.member("samples", s.warmup_samples).member("calls", s.warmup_calls).member("gpu_s", s.warmup_s);
  w.end_object();
  w.member("samples_taken", s.samples_s.size()).member("invalid_samples", s.invalid_samples);
  w.member("measured_gpu_s", s.measured_s).member("measured_span_s", s.measured_span_s);
  w.key("time_s");
  if (valid) {
    write_summary(w, a.stats, a.rel_half_width);
  } else {
    summary blank;
    blank.n = a.stats.n;
    blank.warmup = a.stats.warmup;
    blank.outliers = a.stats.outliers;
    blank.steady = a.stats.steady;
    write_summary(w, blank, std::numeric_limits<double>::quiet_NaN());
  }
  w.key("sm_clock_mhz").begin_object();
  w.member("median", a.median_sm_clock_mhz).member("min", a.min_sm_clock_mhz).member("max", a.max_sm_clock_mhz);
  w.end_object();
  w.member("throttled_samples", a.throttled_samples);
  w.member("clock_managed", a.clock_managed).member("clock_warmup_removed", a.clock_warmup);
  w.member("clock_steady", a.clock_steady);
  if (include_samples) {
    w.key("samples_s").begin_array();
    for (double x : s.samples_s) w.value(x);
    w.end_array();
    w.key("samples_sm_clock_mhz").begin_array();
    for (double x : s.sm_clock_mhz) w.value(x);
    w.end_array();
    w.key("samples_throttled").begin_array();
    for (bool x : a.throttled) w.value(x);
    w.end_array();
  }
  w.end_object();
}

KSCOPE_DECL void write_rate(json_writer& w, const rate_estimate& r) {
  w.begin_object().member("median", r.median);
  w.key("ci");
  write_interval(w, r.ci);
  w.end_object();
}

KSCOPE_DECL void write_counters(json_writer& w, const bench_counters& c) {
  w.begin_object();
  w.member("state", c.state).member("message", c.message);
  w.key("notes").begin_array();
  for (const std::string& n : c.notes) w.value(n);
  w.end_array();
  w.key("requested").begin_array();
  for (const std::string& n : c.requested) w.value(n);
  w.end_array();
  w.member("kernels", c.kernels);
  w.key("kernel_names").begin_array();
  for (const std::string& n : c.kernel_names) w.value(n);
  w.end_array();
  w.member("passes", c.passes);
  w.key("metrics").begin_object();
  for (const auto& [name, value] : c.metrics) w.member(name, value);
  w.end_object();
  w.key("measured");
  if (c.measured) {
    const measured_roofline& m = *c.measured;
    w.begin_object();
    w.member("seconds", m.seconds);
    w.member("flops", m.flops.total).member("flops_complete", m.flops.complete);
    w.member("precision", m.flops.precision_text());
    w.key("flops_by_precision").begin_object();
    for (const precision_flops& p : m.flops.by_precision) w.member(to_string(p.precision), p.flops);
    w.end_object();
    w.member("flops_per_s", m.flops_per_s);
    w.key("levels").begin_array();
    for (const level_point& p : m.levels) {
      w.begin_object();
      w.member("level", to_string(p.level)).member("bytes", p.bytes).member("intensity", p.intensity);
      w.member("bytes_per_s", p.bytes_per_s).member("roof_bytes_per_s", p.roof_bytes_per_s);
      w.member("fraction_of_bandwidth", p.fraction_of_bandwidth);
      w.member("fraction_of_roof", p.placed ? p.placed->fraction_of_roof : std::numeric_limits<double>::quiet_NaN());
      w.end_object();
    }
    w.end_array();
    w.key("problems").begin_array();
    for (const std::string& p : m.problems) w.value(p);
    w.end_array();
    w.end_object();
  } else {
    w.value(nullptr);
  }
  w.key("declared_vs_measured");
  if (c.declared_vs_measured) {
    const work_check& d = *c.declared_vs_measured;
    w.begin_object();
    w.member("declared_bytes", d.declared_bytes).member("measured_dram_bytes", d.measured_dram_bytes);
    w.member("bytes_ratio", d.bytes_ratio).member("bytes_differ", d.bytes_differ);
    w.member("declared_flops", d.declared_flops).member("measured_flops", d.measured_flops);
    w.member("flops_ratio", d.flops_ratio).member("flops_differ", d.flops_differ);
    w.member("text", d.text);
    w.end_object();
  } else {
    w.value(nullptr);
  }
  w.key("warp_stalls");
  if (c.warp_stalls) {
    const bench_warp_stalls& s = *c.warp_stalls;
    w.begin_object();
    w.member("collected", s.collected).member("message", s.message).member("samples", s.samples);
    w.key("shares").begin_array();
    for (const stall_share& share : s.shares)
      w.begin_object().member("reason", share.reason).member("share", share.share).end_object();
    w.end_array();
    w.end_object();
  } else {
    w.value(nullptr);
  }
  w.end_object();
}

KSCOPE_DECL std::string to_json(const bench_context& c, const std::vector<bench_result>& results, bool include_samples) {
  std::string out;
  json_writer w(out);
  w.begin_object();
  w.member("schema", bench_schema);
  w.member("kscope_version", c.kscope_version);
  w.key("context").begin_object();
  w.member("timestamp_utc", c.timestamp_utc).member("host", c.host_name);
  // The schema's own keys (docs/bench_schema.md), all read from the one device_info.
  const device_info& d = c.gpu;
  w.member("has_gpu", d.present);
  w.key("gpu").begin_object();
  w.member("device", d.ordinal).member("name", d.name);
  w.member("compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
  w.member("architecture", d.present ? architecture_name(d.cc_major, d.cc_minor) : std::string());
  w.member("sm_count", d.sm_count);
  w.member("driver_version", d.driver_version).member("runtime_version", d.runtime_version);
  w.member("sm_clock_max_mhz", rated_sm_clock_mhz(d)).member("memory_clock_mhz", mhz_or_nan(d.memory_clock_khz));
  w.member("memory_bus_width_bits", d.memory_bus_width_bits);
  w.member("l2_bytes", static_cast<long long>(d.l2_bytes));
  w.member("memory_bytes", static_cast<unsigned long long>(d.memory_bytes));
  w.member("peak_bytes_per_s", theoretical_bytes_per_s(d));
  w.member("uuid", d.uuid).member("pci_bus_id", d.pci_bus_id);
  w.end_object();
  w.key("notes").begin_array();
  if (!d.present && !d.problem.empty()) w.value(d.problem);
  w.end_array();
  w.end_object();

  w.key("benchmarks").begin_array();
  for (const bench_result& r : results) {
    w.begin_object();
    w.member("name", r.name);
    write_metadata(w, r.metadata);
    w.key("work").begin_object().member("flops", r.declared.flops).member("bytes", r.declared.bytes).end_object();
    const bench_options& o = r.options;
    w.key("settings").begin_object();
    w.member("cache", to_string(o.cache));
    w.member("warmup_min_s", o.warmup_min_s).member("warmup_min_calls", o.warmup_min_calls);
    w.member("detect_warmup", o.detect_warmup);
    w.member("target_rel_ci", o.target_rel_ci).member("level", o.level);
    w.member("min_samples", o.min_samples).member("min_time_s", o.min_time_s);
    w.member("time_budget_s", o.time_budget_s).member("max_samples", o.max_samples);
    w.member("launches_per_sample", o.launches_per_sample).member("min_sample_s", o.min_sample_s);
    w.member("use_graphs", o.use_graphs).member("hold_launches", o.hold_launches);
    w.member("throttle_fraction", o.throttle_fraction).member("discard_throttled", o.discard_throttled);
    w.member("managed_clock_fraction", o.managed_clock_fraction).member("managed_min_time_s", o.managed_min_time_s);
    w.end_object();
    w.member("statistic", "median");
    w.member("interval", "order statistics, binomial");
    w.member("valid", r.valid());
    w.member("invalid_reason", r.invalid_reason);
    w.member("stop_reason", to_string(r.stopped));
    w.member("stop_message", r.stop_message);
    w.member("wall_s", r.wall_s).member("rounds", r.rounds);
    w.member("empty_stream_s", r.empty_stream_s);
    w.member("sm_clock_max_mhz", r.sm_clock_max_mhz);
    w.key("measurement");
    write_series(w, r.series, r.analysis, include_samples, r.valid());
    w.key("rates").begin_object();
    w.key("flops_per_s");
    write_rate(w, r.flops_per_s);
    w.key("bytes_per_s");
    write_rate(w, r.bytes_per_s);
    w.end_object();
    w.key("peaks").begin_object();
    w.member("flops_per_s", r.peak_flops_per_s).member("flops_source", r.peak_flops_source);
    w.member("bytes_per_s", r.peak_bytes_per_s);
    w.member("fraction_of_peak_bandwidth", r.fraction_of_peak_bandwidth);
    w.end_object();
    w.key("roofline");
    if (r.roofline) {
      const placement& p = *r.roofline;
      w.begin_object();
      w.member("flops_per_s", p.flops_per_s).member("bytes_per_s", p.bytes_per_s).member("intensity", p.intensity);
      w.member("roof_flops_per_s", p.roof_flops_per_s).member("fraction_of_roof", p.fraction_of_roof);
      w.end_object();
    } else {
      w.value(nullptr);
    }
    w.key("resources");
    if (r.resources) {
      const kernel_resources& k = *r.resources;
      w.begin_object();
      w.member("block_threads", k.block_threads).member("dynamic_smem_bytes", k.dynamic_smem_bytes);
      w.member("registers_per_thread", k.registers_per_thread).member("static_smem_bytes", k.static_smem_bytes);
      w.member("local_bytes_per_thread", k.local_bytes_per_thread);
      w.member("max_threads_per_block", k.max_threads_per_block);
      w.member("active_blocks_per_sm", k.active_blocks_per_sm).member("max_warps_per_sm", k.max_warps_per_sm);
      w.member("occupancy", k.occupancy);
      w.member("ptx_version", k.ptx_version).member("binary_version", k.binary_version);
      w.member("error", k.error);
      w.end_object();
    } else {
      w.value(nullptr);
    }
    w.key("reference");
    if (r.reference) {
      const reference_result& ref = *r.reference;
      w.begin_object();
      w.member("name", ref.name);
      write_metadata(w, ref.metadata);
      w.key("measurement");
      write_series(w, ref.series, ref.analysis, include_samples, r.valid());
      w.key("comparison").begin_object();
      w.member("ratio", ref.versus.ratio);
      w.key("ratio_ci");
      write_interval(w, ref.versus.ratio_ci);
      w.member("p_value", ref.versus.p_value).member("verdict", kscope::to_string(ref.versus.result));
      w.member("relative_speed", ref.relative_speed);
      w.key("relative_speed_ci");
      write_interval(w, ref.relative_speed_ci);
      w.end_object();
      w.key("output_check").begin_object();
      w.member("performed", ref.check.performed).member("values", ref.check.values);
      w.member("max_rel_error", ref.check.max_rel_error).member("max_abs_error", ref.check.max_abs_error);
      w.member("tolerance", ref.check.tolerance).member("passed", ref.check.passed).member("note", ref.check.note);
      w.end_object();
      w.end_object();
    } else {
      w.value(nullptr);
    }
    // An invalid or failed result carries no counters (it is never profiled).
    w.key("counters");
    if (r.counters && r.valid()) {
      write_counters(w, *r.counters);
    } else {
      w.value(nullptr);
    }
    // The row's one conclusion, every source's evidence under it (docs/bench_schema.md).
    w.key("verdict");
    if (const std::optional<scope_verdict> v = bench_verdict(r)) write_verdict_json(w, *v);
    else w.value(nullptr);
    w.key("warnings").begin_array();
    for (const std::string& x : r.warnings) w.value(x);
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  out += '\n';
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- CSV (RFC 4180) ---------------------------------------------------------------

// One field, and a number at full precision: core/detail/csv.hpp (the session report's CSV
// writes the same way).
using kscope::detail::csv_field;
using kscope::detail::csv_number;

KSCOPE_DECL const char* csv_columns();

KSCOPE_DECL std::string to_csv(const std::vector<bench_result>& results);

// Long format, one row per sample: for plots and for re-analysis with other tools.
KSCOPE_DECL std::string to_samples_csv(const std::vector<bench_result>& results);

// ---- files ------------------------------------------------------------------------

// Writes a benchmark output (JSON, CSV) all or nothing: a failed write leaves the previous
// file intact (core/detail/atomic_file.hpp). False, after saying why on stderr
// ("kscope: cannot write results.json: No space left on device") and in *error.
//   if (!write_output_file("results.json", to_json(c, results, true))) return 1;
KSCOPE_DECL bool write_output_file(const std::string& path, std::string_view content, std::string* error = nullptr);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* csv_columns() {
  return "name,params,shape,dtype,strides,cache,statistic,median_s,ci_lo_s,ci_hi_s,ci_level,rel_half_width,"
         "target_rel_ci,stop_reason,samples_taken,samples_used,warmup_removed,warmup_samples,warmup_calls,"
         "launches_per_sample,batching,sm_clock_median_mhz,throttled_samples,flops,bytes,flops_per_s,"
         "flops_per_s_lo,flops_per_s_hi,bytes_per_s,bytes_per_s_lo,bytes_per_s_hi,fraction_of_roof,bound,"
         "reference,reference_median_s,ratio,ratio_lo,ratio_hi,relative_speed,relative_speed_lo,"
         "relative_speed_hi,verdict,max_rel_error,wall_s,valid,invalid_reason,counters_state,dram_bytes,l2_bytes,"
         "l1_bytes,flops_measured,sm_throughput_pct,memory_throughput_pct,bound_source";
}

KSCOPE_DECL std::string to_csv(const std::vector<bench_result>& results) {
  std::string out = std::string(csv_columns()) + "\n";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const bench_result& r : results) {
    // An invalid or failed result has no median: its time fields stay empty (unknown).
    const summary st = r.valid() ? r.analysis.stats : summary{};
    const double rel_half_width = r.valid() ? r.analysis.rel_half_width : nan;
    std::vector<std::string> f;
    f.push_back(csv_field(r.name));
    f.push_back(csv_field(params_text(r.metadata, ";")));
    f.push_back(csv_field(join_dims(r.metadata.shape, "x")));
    f.push_back(csv_field(r.metadata.dtype));
    f.push_back(csv_field(join_dims(r.metadata.strides, "x")));
    f.push_back(to_string(r.options.cache));
    f.push_back("median");
    f.push_back(csv_number(st.median));
    f.push_back(csv_number(st.median_ci.lo));
    f.push_back(csv_number(st.median_ci.hi));
    f.push_back(csv_number(st.median_ci.level));
    f.push_back(csv_number(rel_half_width));
    f.push_back(csv_number(r.options.target_rel_ci));
    f.push_back(to_string(r.stopped));
    f.push_back(std::to_string(r.series.samples_s.size()));
    f.push_back(std::to_string(r.analysis.stats.n));
    f.push_back(std::to_string(r.analysis.stats.warmup));
    f.push_back(std::to_string(r.series.warmup_samples));
    f.push_back(std::to_string(r.series.warmup_calls));
    f.push_back(std::to_string(r.series.launches_per_sample));
    f.push_back(csv_field(r.series.batching));
    f.push_back(csv_number(r.analysis.median_sm_clock_mhz));
    f.push_back(std::to_string(r.analysis.throttled_samples));
    f.push_back(csv_number(r.declared.flops));
    f.push_back(csv_number(r.declared.bytes));
    f.push_back(csv_number(r.flops_per_s.median));
    f.push_back(csv_number(r.flops_per_s.ci.lo));
    f.push_back(csv_number(r.flops_per_s.ci.hi));
    f.push_back(csv_number(r.bytes_per_s.median));
    f.push_back(csv_number(r.bytes_per_s.ci.lo));
    f.push_back(csv_number(r.bytes_per_s.ci.hi));
    f.push_back(csv_number(r.roofline ? r.roofline->fraction_of_roof : nan));
    // The row's one conclusion (bench_verdict): its class and unit here, its source at the end.
    const std::optional<scope_verdict> verdict = bench_verdict(r);
    f.push_back(verdict ? csv_field(bound_text(verdict->verdict)) : std::string());
    const reference_result* ref = r.reference ? &*r.reference : nullptr;
    f.push_back(csv_field(ref ? ref->name : ""));
    f.push_back(csv_number(ref && r.valid() ? ref->analysis.stats.median : nan));
    f.push_back(csv_number(ref ? ref->versus.ratio : nan));
    f.push_back(csv_number(ref ? ref->versus.ratio_ci.lo : nan));
    f.push_back(csv_number(ref ? ref->versus.ratio_ci.hi : nan));
    f.push_back(csv_number(ref ? ref->relative_speed : nan));
    f.push_back(csv_number(ref ? ref->relative_speed_ci.lo : nan));
    f.push_back(csv_number(ref ? ref->relative_speed_ci.hi : nan));
    f.push_back(ref ? kscope::to_string(ref->versus.result) : "");
    f.push_back(csv_number(ref && ref->check.performed ? ref->check.max_rel_error : nan));
    f.push_back(csv_number(r.wall_s));
    f.push_back(r.valid() ? "true" : "false");
    f.push_back(csv_field(r.invalid_reason));
    // bench::counters(): the default set's quantities of the profiled call; empty when
    // counters were not asked for, not collected, or the result is not valid.
    f.push_back(csv_field(r.counters && r.valid() ? r.counters->state : std::string()));
    const bench_counters* counted = collected_counters(r);
    const auto counter = [&](counter_metric id) { return counted ? metric_value(counted->metrics, id) : nan; };
    f.push_back(csv_number(counted ? measured_dram_bytes(*counted) : nan));
    f.push_back(csv_number(counted ? measured_level_bytes(*counted, memory_level::l2) : nan));
    f.push_back(csv_number(counted ? measured_level_bytes(*counted, memory_level::l1) : nan));
    f.push_back(csv_number(counted ? measured_flops(*counted) : nan));
    f.push_back(csv_number(counter(counter_metric::sm_throughput)));
    f.push_back(csv_number(counter(counter_metric::memory_throughput)));
    f.push_back(verdict ? csv_field(verdict->basis) : std::string());
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (i) out += ',';
      out += f[i];
    }
    out += '\n';
  }
  return out;
}

KSCOPE_DECL std::string to_samples_csv(const std::vector<bench_result>& results) {
  std::string out = "benchmark,params,role,index,seconds,sm_clock_mhz,throttled\n";
  auto rows = [&](const std::string& name, const std::string& params, const char* role, const sample_series& s,
                  const series_analysis& a) {
    for (std::size_t i = 0; i < s.samples_s.size(); ++i) {
      out += csv_field(name) + "," + csv_field(params) + "," + role + "," + std::to_string(i) + "," +
             csv_number(s.samples_s[i]) + "," + csv_number(i < s.sm_clock_mhz.size() ? s.sm_clock_mhz[i] : NAN) +
             "," + (i < a.throttled.size() && a.throttled[i] ? "1" : "0") + "\n";
    }
  };
  for (const bench_result& r : results) {
    const std::string params = params_text(r.metadata, ";");
    rows(r.name, params, "benchmark", r.series, r.analysis);
    if (r.reference) rows(r.reference->name, params, "reference", r.reference->series, r.reference->analysis);
  }
  return out;
}

KSCOPE_DECL bool write_output_file(const std::string& path, std::string_view content, std::string* error) {
  std::string why;
  if (write_file_atomically(path, content, &why)) return true;
  std::fprintf(stderr, "kscope: %s\n", printable_name(why).c_str());
  if (error) *error = why;
  return false;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace harness
}  // namespace detail
}  // namespace kscope
