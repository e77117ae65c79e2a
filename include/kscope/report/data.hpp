// kscope/report/data.hpp — what a session reports, as data: the report spine every printer
// (text.hpp, json.hpp, csv.hpp, html.hpp) and the JSON reader (merge.hpp) work on.
//
// Pure C++: a report is plain values (the session fills them), so it can be built by
// hand in tests, compared, and printed without CUDA. Include report.hpp for the printers.
#pragma once

#include "../evidence/activity_results.hpp"  // the result types only, not the attribution machinery
#include "../core/config.hpp"
#include "../core/finding.hpp"
#include "../core/detail/atomic_file.hpp"  // write_json/write_html: all or nothing
#include "../core/detail/csv.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"  // every number printed with '.', whatever the C locale
#include "../core/detail/text_escape.hpp"    // user strings made safe for a terminal
#include "../scope/detail/thread_state.hpp"
#include "../core/detail/text_layout.hpp"
#include "../evidence/gpu_time.hpp"
#include "plot.hpp"
#include "../evidence/pm_report.hpp"
#include "../evidence/counter_report.hpp"
#include "../core/roofline.hpp"
#include "../core/stats.hpp"
#include "section.hpp"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// The schema of session_report::json() (docs/report_schema.md). parse_report() reads it and
// the one before ("kscope.report/1": a limiter and a verdict per section beside the scope's).
inline constexpr const char* report_schema = "kscope.report/2";

// One distinct value of a user tag on a scope, with how many instances carried it.
struct tag_count {
  std::string key;
  std::string value;
  std::uint64_t count = 0;
};

// A placement whose fraction_of_roof exceeds this is impossible: no code beats the
// theoretical roof, and 10 % covers what is not exact in a placement (the rated clock,
// boost above it, the time's own noise), so anything beyond it is a wrong time or a wrong
// declared work, never a fast kernel.
//   if (p.fraction_of_roof > kscope::roofline_impossible_above) { /* do not advise */ }
inline constexpr double roofline_impossible_above = 1.1;

// The results for one node of the call-path tree (one (parent, name) pair).
struct scope_report {
  node_id id = 0;
  node_id parent = 0;
  std::string name;
  std::string path;          // "request/decode/attention"
  std::size_t depth = 0;     // 1 for a top-level scope
  bool cross_thread = false; // a start/end range, not nested on one thread's stack
  std::uint64_t calls = 0;

  summary host_ns{};         // per-call host (wall) time, nanoseconds
  double host_inclusive_ns = 0;  // sum over all calls
  double host_exclusive_ns = 0;  // inclusive minus nested children's inclusive time
  double share_of_parent = std::nan("");  // inclusive / parent's inclusive

  std::uint64_t gpu_calls = 0;   // calls that had a stream and were timed with events
  summary gpu_ns{};              // per-call GPU time between the scope's two events
  double gpu_total_ns = 0;

  work declared{};               // declared work summed over all calls
  std::uint64_t work_calls = 0;  // calls that declared work

  // Roofline placement of the median call: declared work per call over the GPU median
  // (the host median when the scope had no stream), against the roof named by
  // `roof` (the "dtype" tag picks it; fp32 plain cores otherwise). Empty when no work
  // was declared or no peaks are known.
  std::optional<placement> roofline;
  std::string roof;                         // "bf16 tensor", "fp32 plain"
  interval flops_per_s_ci{std::nan(""), std::nan(""), 0.95};  // from the time CI
  double fraction_of_measured_roof = std::nan("");           // when measured peaks are set
  // Which time per call the placement used, and its value: "events" (the median between
  // the scope's CUDA events), "host" (the host median: the scope had no stream), or
  // "kernels (CUPTI)" (the scope's own time contradicted its kernels' GPU time, see
  // gpu_time_disagreement, so their busy time per call was used). "" when not placed.
  std::string roofline_time_source;
  double roofline_time_ns = std::nan("");
  // A placement above the theoretical roof by more than roofline_impossible_above cannot
  // be true: it carries the likely cause and is printed without limiter or advice.
  bool roofline_impossible = false;
  std::string roofline_impossible_reason;
  // Not impossible, not placed: the rate is above `roof` (the untagged fp32 plain roof),
  // some faster roof of the device allows it, and neither a dtype tag nor the scope's
  // kernels (tensor-pipe activity) said which. The reason says so and how to tag; printers
  // give it no limiter and no advice, and no verdict rests on it. "" otherwise.
  std::string roofline_roof_unknown;
  // Why `roof` was chosen when no dtype tag chose it: "tensor pipe 93% busy (counters) ...".
  // "" when the dtype tag (or its absence: fp32 plain) chose it.
  std::string roof_basis;
  // What to try next, naming the measurements it rests on (the session fills it from the
  // scope's kernel timeline, session/detail/advice.hpp). Empty: printers fall back to
  // the evidence-free hint() of the placement.
  std::string advice;
  // Why the scope's own time was not trusted as its GPU time: its kernels (CUPTI) ran
  // longer per call than its events (or, for a scope with declared work and no stream,
  // its host time) say; both numbers and the kernels' streams. "" when they agree.
  std::string gpu_time_disagreement;

  // Kernels, copies and memsets CUPTI attributed to this node (launched while it was the
  // innermost scope on the launching thread; children's work is theirs). Empty when
  // CUPTI was not collecting or the node launched nothing.
  std::optional<node_gpu_activity> gpu_activity;

  std::size_t samples_kept = 0;  // host samples held (<= the session's sample cap)
  bool samples_capped = false;   // true once the reservoir replaced samples

  std::vector<tag_count> tags;
  // Per-scope hardware counters (session::enable_counters): calls profiled with kernel
  // replay are counted here and in no timing statistic.
  std::uint64_t profiled_calls = 0;
  std::optional<scope_counter_report> counters;
  // What a feature of its own concluded for this scope (its source, finding and count;
  // session/feature.hpp): weighed into the verdict beside the built-in sources, by the
  // same rule. Not written to JSON: the verdict it decided is.
  std::vector<verdict_candidate> feature_evidence;
  // The scope's one verdict (core/finding.hpp, decided by verdict/scope_verdict.hpp): the
  // only conclusion the printers print for it, its evidence under it; absent when it has
  // no evidence at all (a host-only scope, or one whose work is neither declared nor measured).
  std::optional<scope_verdict> verdict;
};

// Where and when the numbers were taken: printed at the top of every report.
struct report_context {
  std::string kscope_version = KSCOPE_VERSION_STRING;
  std::string host_name;
  std::string timestamp_utc;   // ISO 8601
  long long process_id = 0;
  bool cuda_compiled = KSCOPE_HAS_CUDA != 0;
  std::vector<std::string> devices;  // one line per device: name, arch, SMs, clocks, memory, versions
  std::string devices_json;          // JSON array of device objects (empty: none)
  std::string no_device_reason;      // why there is no GPU block, when there is none
  std::vector<std::string> roofs;    // the peaks the roofline placements use, one line each
  std::vector<roof_line> roof_lines; // the same roofs for the roofline picture
  std::string peaks_json;            // JSON array: theoretical peaks of every device (empty: none)
  int rank = -1;                     // the process's rank (rank.hpp), -1 when not known
};

// What a window report covers (session::window()): the interval since the previous
// window, on the steady clock every kscope timestamp uses (nanoseconds, as gpu_time's and
// the trace's). A report of the whole run (session::report()) has none.
//
//   const kscope::session_report w = kscope::session::global().window();
//   std::printf("%.1f s, GPU busy %.0f %%\n", w.window->duration_ns / 1e9, 100 * w.window->gpu_busy_share);
struct report_window {
  std::uint64_t sequence = 0;     // 1 for the first window since the recorder started
  std::int64_t since_ns = 0;      // the previous window's end (or the recorder's start, or reset())
  std::int64_t until_ns = 0;      // when this window was taken
  std::int64_t duration_ns = 0;   // until_ns - since_ns
  // The GPU's busy share of [since_ns, until_ns] (evidence/gpu_time.hpp over the window);
  // NaN when unknown, with the reason in gpu_busy_unavailable ("" when known).
  double gpu_busy_share = std::nan("");
  double gpu_busy_ns = std::nan("");
  std::string gpu_busy_unavailable;
};

// How text() orders the scope table: siblings stay under their parent, sorted by their
// total host time, by their GPU time (CUPTI busy time of the scope and its children), or
// in the order they were first seen. `automatic`: by GPU time when the scopes' GPU time
// adds up to more than the top-level scopes' host time (a GPU-bound program), else by host.
//   r.sort = kscope::report_sort::gpu;
enum class report_sort : std::uint8_t { automatic, host, gpu, recorded };

struct session_report {
  report_context context;
  std::vector<scope_report> scopes;  // depth-first, children after their parent
  std::vector<std::string> warnings;
  // CUPTI: one status line ("" when the collector was never started), the kernels by
  // total GPU time, and what happened to every record.
  std::string cupti_status;
  std::vector<kernel_summary> top_kernels;
  attribution_counters cupti_counters;
  // Tracing in windows (evidence/trace_windows.hpp): the windows the CUPTI figures, the
  // GPU-time account and the diagnosis rest on. windowed false: every launch was traced.
  trace_window_summary trace_windows;
  std::size_t sample_cap = 0;
  std::uint64_t gpu_timing_skipped = 0;  // stream scopes that got no event pair
  // GPU metrics sampled while running (PM sampling): absent unless sampling was enabled.
  std::optional<session_sampled_metrics> sampled_metrics;
  // Per-scope hardware counters (sampled calls profiled, one-pass groups rotated): absent unless enabled.
  std::optional<session_counters_status> counters;
  // Where the GPU's time went (gpu_time.hpp): absent without CUPTI activity.
  std::optional<gpu_time_report> gpu_time;
  // The parts of the report that features add (report/section.hpp), in the order added:
  // text(), json() and html() print each under its key, after the built-in sections' numbers
  // and before the verdicts (csv() has one row per scope and no place for them).
  std::vector<std::shared_ptr<const report_section>> sections;
  // Set in a window report (session::window()): the scopes' counts, times and tag counts
  // are then the window's alone (the call-path tree is the run's); absent in a report of
  // the whole run.
  std::optional<report_window> window;
  // The order of the text scope table (not stored in the JSON).
  report_sort sort = report_sort::automatic;

  // The scope at `path` ("a/b/c"), or nullptr.
  [[nodiscard]] const scope_report* find(const std::string& path) const noexcept;

  // The report for a terminal. Every user string in it (scope names and paths, tags,
  // kernel names, and anything read back from a report file) is printable_name()d: ESC
  // sequences, other controls and invalid UTF-8 show as \x1b, \0, U+FFFD, never raw.
  [[nodiscard]] std::string text() const;
  [[nodiscard]] std::string json() const;
  // One row per scope (RFC 4180, full-precision numbers, empty for unknown): timing,
  // CUPTI activity, sampled metrics and per-scope counters; columns in docs/report_schema.md.
  [[nodiscard]] std::string csv() const;
  // A single-file HTML page (no JavaScript, opens offline): the context, the roofline
  // picture with one point per placed scope, and the scope, roofline and kernel tables.
  [[nodiscard]] std::string html() const;
  // Write html() / json() to `path`, all or nothing (core/detail/atomic_file.hpp: a failed
  // write leaves the previous file intact, never a truncated one). False, nothing thrown,
  // and *error = "cannot write PATH: No space left on device" when it cannot be written.
  bool write_html(const std::string& path, std::string* error = nullptr) const noexcept;
  bool write_json(const std::string& path, std::string* error = nullptr) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const scope_report* session_report::find(const std::string& path) const noexcept {
  for (const scope_report& s : scopes)
    if (s.path == path) return &s;
  return nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A duration in nanoseconds as every kscope table prints it: 3 significant digits
// with a time unit ("812 ns", "1.23 us", "45.6 ms", "2.50 s"); "-" when not finite.
//   std::printf("%s\n", kscope::format_duration_ns(s.host_ns.median).c_str());
[[nodiscard]] KSCOPE_DECL std::string format_duration_ns(double ns);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string format_duration_ns(double ns) {
  if (!std::isfinite(ns)) return "-";
  const char* unit = "ns";
  double v = ns;
  if (std::fabs(ns) >= 1e9) { v = ns / 1e9; unit = "s"; }
  else if (std::fabs(ns) >= 1e6) { v = ns / 1e6; unit = "ms"; }
  else if (std::fabs(ns) >= 1e3) { v = ns / 1e3; unit = "us"; }
  const int decimals = (std::fabs(v) >= 100 || unit[0] == 'n') ? 0 : std::fabs(v) >= 10 ? 1 : 2;
  return detail::format_fixed(v, decimals) + " " + unit;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
