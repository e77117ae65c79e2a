// kscope/bench/detail/counter_pass.hpp — turns the counter pass of one benchmark call
// (a counter_result: the values of each kernel the call launched) into the result's
// bench_counters: the kernels aggregated into the call, the measured roofline point, the
// declared-vs-measured line and the classification. Pure: no CUDA, so the CPU tests feed
// it synthetic passes through a fake counter source.
#pragma once

#include "../../core/config.hpp"
#include "../../evidence/metrics.hpp"
#include "../../core/roofline.hpp"
#include "../../core/work.hpp"
#include "../../counters/collect.hpp"
#include "../result.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kscope {
namespace detail {
namespace harness {

// What of the timed run the counter pass needs to interpret its values.
struct counter_pass_context {
  work declared{};             // bench::set_work, per launch (0: not declared)
  double peak_flops_per_s = std::numeric_limits<double>::quiet_NaN();  // the benchmark's compute roof
  double peak_bytes_per_s = std::numeric_limits<double>::quiet_NaN();  // its DRAM roof
  double median_s = std::numeric_limits<double>::quiet_NaN();          // per launch, from the samples
  long long graph_nodes = -1;        // nodes of the batch's CUDA graph (-1: none captured)
  std::size_t launches_per_sample = 1;
};

// The benchmark's roofs for the measured point: its compute roof and DRAM bandwidth. No L2
// or L1 bandwidth is known here, so those points get rates and intensities, no placement.
KSCOPE_DECL std::optional<hierarchical_roofs> benchmark_roofs(const counter_pass_context& c);

// Declared work with "not declared" (0) as NaN: compare_declared_work then says nothing
// about an amount the benchmark never stated, instead of calling 0 bytes a mismatch.
KSCOPE_DECL work declared_or_unknown(const work& w);

// The classification input of the profiled call. The timeline (span and GPU busy time)
// is given only when every node of the timed call is a profiled kernel: the graph the
// batch captured holds one node per kernel and per copy, so graph_nodes equal to the
// kernels profiled x launches shows that no copy or memset (which the kernel counters do
// not see) shares the span. Otherwise a benchmark of copies would read as a GPU idling
// between launches; without the timeline classify() names it as missing instead.
KSCOPE_DECL classification_input classification_input_of(const metric_values& totals, std::size_t kernels,
                                                     const counter_pass_context& c);

// The bench_counters of one profiled call. A pass that collected nothing keeps its state
// and message (the one note the report prints) and no numbers.
// `stalls`: the call's warp-stall pass, when taken; its shares join the classification.
KSCOPE_DECL bench_counters counters_from_pass(const counter_result& pass, const std::vector<std::string>& requested,
                                         const counter_pass_context& c,
                                         const std::optional<bench_warp_stalls>& stalls = std::nullopt);

// The bench_counters of a pass that could not run because the call threw.
KSCOPE_DECL bench_counters counters_not_collected(std::string why, const std::vector<std::string>& requested);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<hierarchical_roofs> benchmark_roofs(const counter_pass_context& c) {
  if (!(c.peak_flops_per_s > 0) || !(c.peak_bytes_per_s > 0)) return std::nullopt;
  return hierarchical_roofs{roof_line{"benchmark roof", c.peak_flops_per_s, c.peak_bytes_per_s, false}};
}

KSCOPE_DECL work declared_or_unknown(const work& w) {
  const double unknown = std::numeric_limits<double>::quiet_NaN();
  return work{w.flops > 0 ? w.flops : unknown, w.bytes > 0 ? w.bytes : unknown};
}

KSCOPE_DECL classification_input classification_input_of(const metric_values& totals, std::size_t kernels,
                                                     const counter_pass_context& c) {
  classification_input in;
  in.counters = totals;
  const double busy_ns = metric_value(totals, counter_metric::duration);
  const bool only_kernels = kernels > 0 && c.graph_nodes > 0 && c.launches_per_sample > 0 &&
                            static_cast<std::size_t>(c.graph_nodes) == kernels * c.launches_per_sample;
  if (only_kernels && std::isfinite(busy_ns) && busy_ns >= 0 && c.median_s > 0) {
    in.span_ns = c.median_s * 1e9;
    in.gpu_busy_ns = busy_ns;
  }
  in.roofs = benchmark_roofs(c);
  return in;
}

KSCOPE_DECL bench_counters counters_from_pass(const counter_result& pass, const std::vector<std::string>& requested,
                                         const counter_pass_context& c,
                                         const std::optional<bench_warp_stalls>& stalls) {
  bench_counters out;
  out.state = to_string(pass.state);
  out.message = pass.message;
  out.notes = pass.notes;
  out.requested = requested;
  out.passes = pass.passes;
  if (!pass.ok()) return out;

  counter_aggregate call;
  call.add_call(pass.kernels);
  out.kernels = call.kernels();
  for (const counter_values& k : pass.kernels) out.kernel_names.push_back(k.name);
  out.metrics = call.totals();
  if (out.kernels == 0) return out;  // the message says the work launched no kernel

  const std::optional<hierarchical_roofs> roofs = benchmark_roofs(c);
  out.measured = measure_roofline(out.metrics, roofs ? &*roofs : nullptr);
  if (c.declared.flops > 0 || c.declared.bytes > 0)
    out.declared_vs_measured = compare_declared_work(declared_or_unknown(c.declared), out.metrics, 1);
  out.warp_stalls = stalls;
  classification_input in = classification_input_of(out.metrics, out.kernels, c);
  if (stalls && stalls->collected) in.stalls = stalls->shares;
  out.classified = classify(in);
  if (stalls && !stalls->collected)
    out.classified->missing.push_back("warp stalls: " + (stalls->message.empty() ? std::string("not sampled")
                                                                                 : stalls->message));
  return out;
}

KSCOPE_DECL bench_counters counters_not_collected(std::string why, const std::vector<std::string>& requested) {
  bench_counters out;
  out.state = to_string(counter_state::failed);
  out.message = "hardware counters not collected: " + std::move(why);
  out.requested = requested;
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace harness
}  // namespace detail
}  // namespace kscope
