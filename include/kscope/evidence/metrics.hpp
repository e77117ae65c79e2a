// kscope/evidence/metrics.hpp — hardware-counter values and what they say: the metric catalog,
// FLOPs from instruction counts, aggregation per scope, metric-name checks, the measured
// (hierarchical) roofline and the classification of a slow scope from evidence.
//
// Pure arithmetic, no CUDA: the values come from the CUPTI range profiler
// (counters/collect.hpp) or, in the tests, from synthetic numbers. The question this header
// answers is "why is it slow?", with the numbers that back each answer:
//
//   kscope::counter_aggregate decode;                       // one scope
//   for (const auto& k : profiled_kernels) decode.add_kernel(k);
//   kscope::metric_values v = decode.totals();
//   kscope::flop_count f = kscope::count_flops(v);          // 2.15e9 fp32 FLOP
//   kscope::measured_roofline m = kscope::measure_roofline(v, roofs);
//   kscope::classification c = kscope::classify({v});
//   std::puts(c.verdict.text.c_str());   // "memory-bound: DRAM at 91% of its peak (...)"
//
// Rules, each tested in tests/counters_test.cpp:
// - FLOPs: from the SASS floating-point instruction counters, per precision, add and mul
//   count 1, fma counts 2 (Nsight Compute's roofline convention); tensor-core FLOPs from
//   the tensor pipe's op counters per source type (sm__ops_path_tensor_src_*), added to
//   the total (exact for a cuBLAS fp16 GEMM on an H200: 2 m n k).
// - Aggregation over kernels: counts, bytes and durations are summed; percentages and
//   rates are averaged weighted by each kernel's duration (gpu__time_duration.sum), or
//   plainly when a kernel lacks its duration (flagged). A metric a kernel lacks is left out
//   of that metric, and counted.
// - Measured roofline: rates over the summed kernel time; one point per memory level
//   (DRAM, L2, L1) whose bytes were measured; declared and measured work that differ by
//   more than 10 % get one line ("declared 201 MB, DRAM moved 448 MB: 2.2×").
// - Classification: launch/CPU-bound when the GPU idled at least half the scope's span
//   (timeline); else from the top units: the memory side is the highest of the memory
//   speed-of-light rollup and every measured level (DRAM, L2, L1), the SM side the highest
//   of the SM rollup and every measured pipe. Memory-bound or compute-bound when the higher
//   one is at a roof (>= 60 % of peak), latency-bound when both are under it. A tensor
//   pipe at the roof makes the kernel compute-bound (tensor) whatever L1 reads: an MMA
//   kernel's L1 / shared-memory figure is its operands' traffic, shown beside, not advice.
//   Warp-stall shares explain, never decide: a reason with over half the samples names
//   the cause of a latency-bound verdict; long scoreboard alone is not DRAM saturation;
//   "not selected" means the schedulers had warps to spare. Missing evidence is named,
//   never guessed.
#pragma once

#include "breakdown.hpp"
#include "detail/metric_names.hpp"
#include "../core/finding.hpp"
#include "../core/detail/once.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/dtype.hpp"
#include "../core/roofline.hpp"
#include "../core/work.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {

// ---------------------------------------------------------------------------------------
// Values

// Metric name -> value, as CUPTI evaluates them ("dram__bytes_read.sum" -> 4.29e9).
// Heterogeneous lookup: find() takes a string_view without building a std::string.
//   kscope::metric_values v{{"dram__bytes_read.sum", 4.29e9}};
using metric_values = std::map<std::string, double, std::less<>>;

// The counters of one profiled range: a kernel (per-kernel profiling, in launch order) or
// the user range around a whole callable.
//   double bytes = k.value("dram__bytes_read.sum");  // NaN when not collected
struct counter_values {
  std::string name;      // kernel name (demangled) when known, else the range name
  std::string range;     // CUPTI's range name: "0", "1", ... per kernel, or the user range's name
  std::size_t index = 0; // position among the profiled ranges (launch order)
  metric_values values;

  [[nodiscard]] double value(std::string_view metric) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double counter_values::value(std::string_view metric) const noexcept {
  const auto it = values.find(metric);
  return it == values.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// The metric catalog (Hopper and Ampere names)

// The quantities kscope reasons about. Each has a preferred metric name and fallbacks
// (metric_info::names); the CUPTI side collects the first name the device offers.
enum class counter_metric : std::uint8_t {
  duration,
  dram_read_bytes,
  dram_write_bytes,
  l2_bytes,
  l1_bytes,
  fp64_add,
  fp64_mul,
  fp64_fma,
  fp32_add,
  fp32_mul,
  fp32_fma,
  fp16_add,
  fp16_mul,
  fp16_fma,
  tensor_pipe_active,
  // FLOPs on the tensor pipe, per source type (sm__ops_path_tensor_src_*: "math ops" are
  // FLOPs, an FMA counting 2: a cuBLAS fp16 GEMM of n = 4096 read exactly 2 n^3 on an H200).
  tensor_fp16_flops,
  tensor_bf16_flops,
  tensor_tf32_flops,
  tensor_fp8_flops,
  tensor_fp64_flops,
  sm_throughput,
  memory_throughput,
  dram_throughput,
  l2_throughput,
  l1_throughput,
  achieved_occupancy,
  // Not in the default set: asked for by name (pipe_metric_names()).
  tensor_instructions,
  fma_pipe_active,
  alu_pipe_active,
  fp64_pipe_active,
  lsu_pipe_active,
  // One pass, in the per-scope set: the SM's issue slots in use, one stand-in for the
  // SM throughput that needs several passes (classify's one-pass fallback).
  issue_active,
};

// How values of one metric from several kernels combine into a scope's value.
//   sum: counts, bytes, durations. duration_weighted_mean: percentages, ratios, rates.
enum class metric_aggregation : std::uint8_t { sum, duration_weighted_mean, max, min };

[[nodiscard]] KSCOPE_DECL const char* to_string(metric_aggregation a) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* to_string(metric_aggregation a) noexcept {
  switch (a) {
    case metric_aggregation::sum: return "sum";
    case metric_aggregation::duration_weighted_mean: return "duration-weighted mean";
    case metric_aggregation::max: return "max";
    case metric_aggregation::min: return "min";
  }
  return "unknown";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One catalog entry.
//   const kscope::metric_info* m = kscope::find_metric_info("dram__bytes_read.sum");
//   std::printf("%s: %s [%s]\n", m->name().data(), m->meaning.data(), m->unit.data());
struct metric_info {
  counter_metric id;
  std::vector<std::string_view> names;  // preferred first, then fallbacks (other chips, other units)
  std::string_view meaning;
  std::string_view unit;                // "ns", "bytes", "thread instructions", "%"
  metric_aggregation aggregation;
  bool in_default_set;
  // The preferred name has not been seen on a Hopper device by kscope's probes: the
  // availability check of the CUPTI side decides (and falls back, or says it is missing).
  bool name_uncertain;
  std::string_view note;                // why a name is uncertain, or a caveat of the metric

  [[nodiscard]] std::string_view name() const noexcept { return names.front(); }
};

// Every metric kscope knows, default set first (in collection order).
//
// Names follow Nsight Compute's metric reference for sm_80/sm_90. Seen on an H200 (GH100)
// by the PM-sampling probe (shared/probes): dram__bytes_{read,write}.sum,
// dram__throughput.avg.pct_of_peak_sustained_elapsed, sm__throughput.avg.pct_of_peak_sustained_elapsed,
// sm__warps_active.avg.pct_of_peak_sustained_elapsed and
// sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed; sm__pipe_tensor_op_hmma_*
// (the Ampere/Turing name) does not exist on GH100.
[[nodiscard]] KSCOPE_DECL const std::vector<metric_info>& metric_catalog();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const std::vector<metric_info>& metric_catalog() {
  // Kept by a lazy_global, not a function-local static, whose guard a fork could catch
  // held (core/detail/once.hpp). Built outside its lock: two first callers may both build
  // it, one copy is kept.
  static detail::lazy_global<const std::vector<metric_info>> kept{detail::lock_rank::init};
  if (const std::vector<metric_info>* built = kept.get_if_built()) return *built;
  using m = counter_metric;
  using a = metric_aggregation;
  std::vector<metric_info> catalog = {
      {m::duration, {"gpu__time_duration.sum"}, "GPU time of the range (one kernel, or the whole user range)", "ns",
       a::sum, true, false, ""},
      {m::dram_read_bytes, {"dram__bytes_read.sum"}, "bytes read from device memory (DRAM / HBM)", "bytes", a::sum,
       true, false, ""},
      {m::dram_write_bytes, {"dram__bytes_write.sum"}, "bytes written to device memory (DRAM / HBM)", "bytes", a::sum,
       true, false,
       "counted in the range: lines the kernel leaves dirty in the L2 reach DRAM later; the counter pass measures "
       "those of its last kernel as kscope__dram_bytes_write_back.sum (an earlier kernel's are evicted, and "
       "counted, by the kernels after it), except under kernel replay in several passes, whose memory restore "
       "adds its own write-back to every kernel's count (a note says so)"},
      {m::l2_bytes, {"lts__t_bytes.sum"}, "bytes requested from the L2 cache (L1 misses, copies, atomics)", "bytes",
       a::sum, true, false, ""},
      {m::l1_bytes, {"l1tex__t_bytes.sum"}, "bytes requested from L1/TEX (global, local and texture accesses)",
       "bytes", a::sum, true, false, ""},
      {m::fp64_add,
       {"sm__sass_thread_inst_executed_op_dadd_pred_on.sum", "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum"},
       "fp64 add instructions executed by threads with their predicate on (DADD)", "thread instructions", a::sum,
       true, false, ""},
      {m::fp64_mul,
       {"sm__sass_thread_inst_executed_op_dmul_pred_on.sum", "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum"},
       "fp64 multiply instructions executed (DMUL)", "thread instructions", a::sum, true, false, ""},
      {m::fp64_fma,
       {"sm__sass_thread_inst_executed_op_dfma_pred_on.sum", "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum"},
       "fp64 fused multiply-add instructions executed (DFMA, 2 FLOP each)", "thread instructions", a::sum, true,
       false, ""},
      {m::fp32_add,
       {"sm__sass_thread_inst_executed_op_fadd_pred_on.sum", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"},
       "fp32 add instructions executed (FADD)", "thread instructions", a::sum, true, false, ""},
      {m::fp32_mul,
       {"sm__sass_thread_inst_executed_op_fmul_pred_on.sum", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"},
       "fp32 multiply instructions executed (FMUL)", "thread instructions", a::sum, true, false, ""},
      {m::fp32_fma,
       {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"},
       "fp32 fused multiply-add instructions executed (FFMA, 2 FLOP each)", "thread instructions", a::sum, true,
       false, ""},
      {m::fp16_add,
       {"sm__sass_thread_inst_executed_op_hadd_pred_on.sum", "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum"},
       "fp16 add instructions executed (HADD, HADD2)", "thread instructions", a::sum, true, false,
       "a packed HADD2 does two adds per thread instruction; like Nsight Compute's roofline, kscope counts one"},
      {m::fp16_mul,
       {"sm__sass_thread_inst_executed_op_hmul_pred_on.sum", "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum"},
       "fp16 multiply instructions executed (HMUL, HMUL2)", "thread instructions", a::sum, true, false,
       "a packed HMUL2 does two multiplies per thread instruction; counted as one"},
      {m::fp16_fma,
       {"sm__sass_thread_inst_executed_op_hfma_pred_on.sum", "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum"},
       "fp16 fused multiply-add instructions executed (HFMA, HFMA2; 2 FLOP each)", "thread instructions", a::sum,
       true, false, "a packed HFMA2 does two FMAs per thread instruction; counted as one (2 FLOP)"},
      {m::tensor_pipe_active,
       {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"},
       "share of elapsed cycles the tensor pipe was busy (tensor-core work; its FLOPs: sm__ops_path_tensor_*)", "%",
       a::duration_weighted_mean, true, true,
       "the first name was accepted on GH100 by the PM-sampling probe; the second is the Ampere/Turing name and "
       "does not exist on GH100"},
      {m::tensor_fp16_flops, {"sm__ops_path_tensor_src_fp16.sum"},
       "FLOPs on the tensor pipe with fp16 sources (an MMA's multiply-adds, 2 FLOP each)", "FLOP", a::sum, true, false,
       "seen on GH100: a cuBLAS fp16 GEMM of n = 4096 counted exactly 2 n^3"},
      {m::tensor_bf16_flops, {"sm__ops_path_tensor_src_bf16_dst_fp32.sum"},
       "FLOPs on the tensor pipe with bf16 sources", "FLOP", a::sum, true, false, "offered on GH100 (ncu's list)"},
      {m::tensor_tf32_flops, {"sm__ops_path_tensor_src_tf32_dst_fp32.sum"},
       "FLOPs on the tensor pipe with tf32 sources", "FLOP", a::sum, true, false, "offered on GH100 (ncu's list)"},
      {m::tensor_fp8_flops, {"sm__ops_path_tensor_src_fp8.sum"}, "FLOPs on the tensor pipe with fp8 sources", "FLOP",
       a::sum, true, false, "offered on GH100 (ncu's list)"},
      {m::tensor_fp64_flops, {"sm__ops_path_tensor_src_fp64.sum"}, "FLOPs on the tensor pipe with fp64 sources (DMMA)",
       "FLOP", a::sum, true, false, "offered on GH100 (ncu's list)"},
      {m::sm_throughput, {"sm__throughput.avg.pct_of_peak_sustained_elapsed"},
       "SM throughput: the busiest SM sub-unit (pipes, issue, shared memory) as % of its peak (speed of light)", "%",
       a::duration_weighted_mean, true, false, "needs many replay passes (19 on GH100)"},
      {m::memory_throughput, {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"},
       "memory throughput: the busiest memory unit (DRAM, L2, L1) as % of its peak (speed of light)", "%",
       a::duration_weighted_mean, true, false, ""},
      {m::dram_throughput, {"dram__throughput.avg.pct_of_peak_sustained_elapsed"},
       "DRAM throughput as % of its peak", "%", a::duration_weighted_mean, true, false, ""},
      {m::l2_throughput,
       {"lts__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sectors.avg.pct_of_peak_sustained_elapsed"},
       "L2 throughput as % of its peak", "%", a::duration_weighted_mean, true, false,
       "the first needs 4 passes on GH100; the second (L2 sectors as % of peak, one pass) is a lower bound the "
       "per-scope counters collect instead"},
      {m::l1_throughput,
       {"l1tex__throughput.avg.pct_of_peak_sustained_active", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed"},
       "L1/TEX throughput as % of its peak (over the cycles L1 was active)", "%", a::duration_weighted_mean, true,
       false,
       "the first two need 4-5 passes on GH100; the third (L1 load/store wavefronts as % of peak, one pass) is a "
       "lower bound the per-scope counters collect instead"},
      {m::achieved_occupancy, {"sm__warps_active.avg.pct_of_peak_sustained_active"},
       "achieved occupancy: resident warps as % of the SM's maximum, over active cycles", "%",
       a::duration_weighted_mean, true, false, ""},
      {m::tensor_instructions,
       {"sm__inst_executed_pipe_tensor.sum", "sm__inst_executed_pipe_tensor_op_gmma.sum",
        "sm__inst_executed_pipe_tensor_op_hmma.sum"},
       "warp instructions issued to the tensor pipe (HMMA, GMMA)", "warp instructions", a::sum, false, true,
       "names from Nsight Compute's instruction statistics; not yet seen by a kscope probe"},
      {m::fma_pipe_active, {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"},
       "share of active cycles the FMA pipe (fp32, fp16, integer multiply-add) was busy", "%",
       a::duration_weighted_mean, false, true, "name from Nsight Compute's compute workload section; not yet probed"},
      {m::alu_pipe_active, {"sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"},
       "share of active cycles the ALU pipe (integer, logic, conversions, fp32 compare) was busy", "%",
       a::duration_weighted_mean, false, true, "name from Nsight Compute's compute workload section; not yet probed"},
      {m::fp64_pipe_active, {"sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"},
       "share of active cycles the fp64 pipe was busy", "%", a::duration_weighted_mean, false, true,
       "name from Nsight Compute's compute workload section; not yet probed"},
      {m::lsu_pipe_active, {"sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"},
       "load/store pipe issue rate as % of its peak", "%", a::duration_weighted_mean, false, true,
       "name from Nsight Compute's compute workload section; not yet probed"},
      {m::issue_active, {"smsp__issue_active.avg.pct_of_peak_sustained_active"},
       "share of active cycles the warp schedulers issued an instruction", "%", a::duration_weighted_mean, false,
       false, "one pass on GH100 (profiler host API); with the pipe metrics it stands in for sm__throughput"},
  };
  return kept.get([&catalog] {
    auto* built = new std::vector<metric_info>;
    *built = std::move(catalog);
    return built;
  });
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The catalog entry of a quantity.
//   const kscope::metric_info& d = kscope::metric_info_of(kscope::counter_metric::duration);
[[nodiscard]] KSCOPE_DECL const metric_info& metric_info_of(counter_metric id);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const metric_info& metric_info_of(counter_metric id) {
  for (const metric_info& m : metric_catalog())
    if (m.id == id) return m;
  return metric_catalog().front();  // unreachable: every counter_metric has an entry
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The entry one of whose names is `name`, or nullptr for a metric outside the catalog.
//   kscope::find_metric_info("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")->id  // fp32_fma
[[nodiscard]] KSCOPE_DECL const metric_info* find_metric_info(std::string_view name);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const metric_info* find_metric_info(std::string_view name) {
  for (const metric_info& m : metric_catalog())
    for (std::string_view n : m.names)
      if (n == name) return &m;
  return nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The preferred names of the default set, in catalog order.
//   auto result = kscope::profile_counters(kscope::default_metric_names(), work);
[[nodiscard]] KSCOPE_DECL std::vector<std::string> default_metric_names();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> default_metric_names() {
  std::vector<std::string> out;
  for (const metric_info& m : metric_catalog())
    if (m.in_default_set) out.emplace_back(m.name());
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The pipe-utilisation metrics (not in the default set: more replay passes), which let the
// classification name the busy pipe of a compute-bound kernel from measurement rather
// than from the instruction mix.
[[nodiscard]] KSCOPE_DECL std::vector<std::string> pipe_metric_names();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> pipe_metric_names() {
  std::vector<std::string> out;
  for (counter_metric id : {counter_metric::tensor_pipe_active, counter_metric::fma_pipe_active,
                            counter_metric::alu_pipe_active, counter_metric::fp64_pipe_active,
                            counter_metric::lsu_pipe_active})
    out.emplace_back(metric_info_of(id).name());
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// What per-scope counters collect by default (counters/scope_counters.hpp): the default set, the
// pipe utilisations and the issue rate. Metrics that need several passes alone
// (sm__throughput, the memory throughput rollups) cannot be had in the one pass a running
// program's call gets; plan_one_pass_groups() takes their one-pass stand-ins (catalog
// fallbacks) or leaves them out, and classify() falls back on the busiest measured unit.
[[nodiscard]] KSCOPE_DECL std::vector<std::string> scope_metric_names();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> scope_metric_names() {
  std::vector<std::string> out = default_metric_names();
  for (const std::string& n : pipe_metric_names()) out.push_back(n);
  out.emplace_back(metric_info_of(counter_metric::issue_active).name());
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// How per-scope counters collect without replay: each profiled call gets one group of
// metrics that fits in ONE pass (no kernel replay, so no save and restore of device
// memory), and the groups rotate over a scope's profiled calls; after as many calls as
// groups every metric was measured once. The GPU time of each kernel is in every group,
// so each call's rates have their own time base.
struct one_pass_plan {
  std::vector<std::vector<std::string>> groups;
  std::vector<std::string> notes;  // stand-ins taken and metrics left out, one line each
};

// Builds the groups greedily (first fit, request order). `passes(names)` says how many
// passes a set needs on this device (0: it cannot be configured); a metric that needs more
// than one pass alone is replaced by the first of its catalog names that needs one, or
// left out with a note. The CPU tests give a fake `passes`.
//   auto plan = kscope::plan_one_pass_groups(kscope::scope_metric_names(), count_passes);
template <class PassCount>
[[nodiscard]] one_pass_plan plan_one_pass_groups(const std::vector<std::string>& metrics, PassCount&& passes,
                                                 std::string_view chip = {}) {
  one_pass_plan plan;
  const std::string duration(metric_info_of(counter_metric::duration).name());
  std::vector<std::string> singles;
  for (const std::string& name : metrics) {
    if (name == duration || std::find(singles.begin(), singles.end(), name) != singles.end()) continue;
    const std::size_t alone = passes(std::vector<std::string>{name});
    if (alone == 1) {
      singles.push_back(name);
      continue;
    }
    // A rollup with a known breakdown on this chip: its parts, one pass each, and the
    // rollup put back together from them (evidence/breakdown.hpp, counter_aggregate).
    if (const metric_breakdown* parts = find_breakdown(name, chip)) {
      std::vector<std::string> unmeasurable;
      for (const std::string& part : parts->parts) {
        if (std::find(singles.begin(), singles.end(), part) != singles.end()) continue;
        if (passes(std::vector<std::string>{part}) == 1)
          singles.push_back(part);
        else
          unmeasurable.push_back(part);
      }
      const std::string how = parts->combine == breakdown_combine::busiest ? "the busiest part per kernel"
                                                                           : "the sum of the parts";
      if (unmeasurable.empty()) {
        plan.notes.push_back(name + " needs " + std::to_string(alone) + " passes alone: per-scope counters measure its " +
                             std::to_string(parts->parts.size()) + " parts (its breakdown on " + std::string(chip) +
                             "), one pass each over the calls, and take " + how);
      } else {
        std::string names;
        for (const std::string& u : unmeasurable) names += (names.empty() ? "" : ", ") + u;
        plan.notes.push_back(name + " needs " + std::to_string(alone) + " passes alone, and " +
                             std::to_string(unmeasurable.size()) + " of its " + std::to_string(parts->parts.size()) +
                             " parts do not fit one pass (" + names +
                             "): it is not measured per scope; the measured parts stand in for it (a lower bound)");
      }
      continue;
    }
    std::string stand_in;
    if (const metric_info* info = find_metric_info(name)) {
      for (std::string_view other : info->names) {
        if (other == name) continue;
        if (passes(std::vector<std::string>{std::string(other)}) == 1) {
          stand_in = std::string(other);
          break;
        }
      }
    }
    const std::string why = alone == 0 ? "cannot be configured on this device"
                                       : "needs " + std::to_string(alone) + " passes alone";
    if (!stand_in.empty()) {
      if (std::find(singles.begin(), singles.end(), stand_in) == singles.end()) singles.push_back(stand_in);
      plan.notes.push_back(name + " " + why + ": per-scope counters (one pass per call) collect " + stand_in +
                           " instead");
    } else {
      plan.notes.push_back(name + " " + why + ": not collected per scope without kernel replay "
                           "(scope_counter_options::kernel_replay, KSCOPE_COUNTERS=kernel)");
    }
  }
  for (const std::string& name : singles) {
    bool placed = false;
    for (std::vector<std::string>& g : plan.groups) {
      std::vector<std::string> trial = g;
      trial.push_back(name);
      if (passes(trial) == 1) {
        g = std::move(trial);
        placed = true;
        break;
      }
    }
    if (placed) continue;
    // A new group is verified too: a metric that fits one pass alone may not beside the
    // duration (SASS instruction counters on GH100 need a second pass with it). It then
    // gets a group of its own, without the duration: its sums need no time base.
    if (passes(std::vector<std::string>{duration, name}) == 1) {
      plan.groups.push_back({duration, name});
    } else {
      plan.groups.push_back({name});
      plan.notes.push_back(name + " does not fit one pass beside " + duration +
                           ": its group goes without the kernels' time");
    }
  }
  if (plan.groups.empty()) plan.groups.push_back({duration});
  return plan;
}

// The value of a quantity under whichever of its names was collected; NaN when none was
// (or the value is NaN).
//   double read = kscope::metric_value(v, kscope::counter_metric::dram_read_bytes);
[[nodiscard]] KSCOPE_DECL double metric_value(const metric_values& values, counter_metric id);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double metric_value(const metric_values& values, counter_metric id) {
  for (std::string_view name : metric_info_of(id).names) {
    const auto it = values.find(name);
    if (it != values.end() && !std::isnan(it->second)) return it->second;
  }
  return std::numeric_limits<double>::quiet_NaN();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The name under which a quantity was collected ("" when it was not).
[[nodiscard]] KSCOPE_DECL std::string_view collected_name(const metric_values& values, counter_metric id);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string_view collected_name(const metric_values& values, counter_metric id) {
  for (std::string_view name : metric_info_of(id).names) {
    const auto it = values.find(name);
    if (it != values.end() && !std::isnan(it->second)) return name;
  }
  return {};
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// How a metric combines across kernels: the catalog's rule, else by its suffix — the last
// word "sum" or "avg" (a count, per unit) sums; "max"/"min" keep the extreme; anything
// else (pct, ratio, per_second, pct_of_peak_*, per_cycle_*) is a rate or a share and is
// averaged, weighted by duration.
//   kscope::aggregation_for("smsp__inst_executed.sum")        // sum
//   kscope::aggregation_for("l1tex__t_sector_hit_rate.pct")   // duration_weighted_mean
[[nodiscard]] KSCOPE_DECL metric_aggregation aggregation_for(std::string_view name);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL metric_aggregation aggregation_for(std::string_view name) {
  if (const metric_info* m = find_metric_info(name)) return m->aggregation;
  const std::size_t dot = name.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  if (last == "sum" || last == "avg") return metric_aggregation::sum;
  if (last == "max") return metric_aggregation::max;
  if (last == "min") return metric_aggregation::min;
  return metric_aggregation::duration_weighted_mean;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Lines a range's kernels leave dirty in the L2 reach DRAM only when something evicts them,
// after the range: its DRAM counters miss them (as Nsight Compute's do), which matters
// when the output is not much larger than the L2 (a 16 MiB copy counts ~0 bytes written).
// The counter pass measures them with an L2 write-back sweep right after the work
// (counters/collect.hpp) and keeps them under this kscope metric, beside the hardware's
// dram__bytes_write.sum, which stays as the hardware counted it in the range.
inline constexpr std::string_view dram_write_back_metric = "kscope__dram_bytes_write_back.sum";

// Records the DRAM writes of the sweep after a range as the range's write-back
// (dram_write_back_metric); everything else the sweep counted (its own reads, its time)
// is the sweep's and is left out. Nothing is recorded when the sweep's value is missing
// or not finite.
//   kscope::metric_values copy{{"dram__bytes_write.sum", 1.052e9}};
//   kscope::add_write_back(copy, {{"dram__bytes_write.sum", 2.17e7}});
//   // copy["kscope__dram_bytes_write_back.sum"] == 2.17e7
KSCOPE_DECL void add_write_back(metric_values& range, const metric_values& sweep);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void add_write_back(metric_values& range, const metric_values& sweep) {
  const auto it = sweep.find("dram__bytes_write.sum");
  if (it == sweep.end() || !std::isfinite(it->second)) return;
  range[std::string(dram_write_back_metric)] = it->second;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The DRAM bytes a range moved: read + written, plus the write-back of what it left dirty
// in the L2 when the pass measured it. A volume, not a rate: the write-back happens after
// the range ends, so bandwidths and the roofline use the in-range bytes only
// (measure_roofline), and no rate can exceed the DRAM peak because of it. NaN when the
// read or write count is missing.
[[nodiscard]] KSCOPE_DECL double dram_bytes_moved(const metric_values& values);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double dram_bytes_moved(const metric_values& values) {
  const double in_range =
      metric_value(values, counter_metric::dram_read_bytes) + metric_value(values, counter_metric::dram_write_bytes);
  const auto later = values.find(dram_write_back_metric);
  return later != values.end() && std::isfinite(later->second) && later->second > 0 ? in_range + later->second
                                                                                     : in_range;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// Aggregation per scope

// One metric over the kernels of a scope.
struct aggregated_metric {
  double value = std::numeric_limits<double>::quiet_NaN();  // NaN when no kernel had it
  metric_aggregation how = metric_aggregation::sum;
  std::size_t kernels = 0;  // kernels that had a finite value
  std::size_t missing = 0;  // kernels added without one (of the calls that measured it)
  // Calls that measured it: fewer than the aggregate's calls when one-pass groups rotate
  // over the calls; a sum is then scaled to all calls (value = sum x calls / this).
  std::size_t calls = 0;
  // duration_weighted_mean only: false when some kernel with a value had no positive
  // duration, so the plain mean was taken instead.
  bool weighted = true;
};

// Sums and duration-weighted means of the counters of a scope's profiled kernels, and the
// number of kernels and calls profiled.
//
//   kscope::counter_aggregate scope;
//   scope.add_call(kernels_of_one_call);   // counts one call, adds its kernels
//   double bytes = scope.total("dram__bytes_read.sum");
//   kscope::metric_values v = scope.totals();
class counter_aggregate {
 public:
  // Adds one kernel's values. Non-finite values are left out of their metric (and that
  // kernel counts as missing for it); negative values too, since no counter is negative.
  void add_kernel(const counter_values& kernel) { add_values(kernel.values); }

  // Adds the values of one range (a kernel or a whole call).
  void add_values(const metric_values& values);

  // One call of the scope: its kernels are added and the call is counted, and so is the
  // call for every metric it measured — a finite value in some kernel (one-pass groups
  // rotate over calls: a metric rests on the calls whose group held it and gave a value).
  void add_call(const std::vector<counter_values>& kernels_of_call);

  // Counts a call whose kernels are added one by one with add_kernel().
  void count_call() noexcept { ++calls_; }

  [[nodiscard]] std::size_t kernels() const noexcept { return kernels_; }
  [[nodiscard]] std::size_t calls() const noexcept { return calls_; }

  // One metric; nullopt when no kernel had it.
  [[nodiscard]] std::optional<aggregated_metric> find(std::string_view name) const;

  // The scope's value of a metric (NaN when no kernel had it).
  [[nodiscard]] double total(std::string_view name) const;

  // Every metric's aggregate value: the input of count_flops, measure_roofline, classify.
  [[nodiscard]] metric_values totals() const;

  // Every metric with its rule and coverage.
  [[nodiscard]] std::map<std::string, aggregated_metric, std::less<>> metrics() const;

 private:
  struct running_metric {
    metric_aggregation how = metric_aggregation::sum;
    std::size_t kernels = 0;
    double sum = 0, weighted_sum = 0, weight = 0, max = 0, min = 0;
    bool unweighted_kernels = false;
    std::size_t calls = 0;             // calls that measured it (add_call); 0: kernels added alone
    std::size_t kernels_of_calls = 0;  // the kernels of those calls
  };

  aggregated_metric finish(const running_metric& r) const;

  // The rollups put back together from their parts (evidence/breakdown.hpp), for those not
  // measured themselves. A busiest-part rollup is exact only where every call had the same
  // kernels (a kernel's parts, measured in different calls, are matched by position in the
  // call); otherwise it is left out, and the classification uses its lower-bound stand-ins.
  [[nodiscard]] std::map<std::string, aggregated_metric, std::less<>> composed() const;

  // Per kernel position in a call: the parts of busiest-part rollups, and the duration.
  struct position_values {
    std::map<std::string, std::pair<double, std::size_t>, std::less<>> parts;  // sum, count
    double duration_sum = 0;
    std::size_t duration_count = 0;
  };

  std::map<std::string, running_metric, std::less<>> sums_;
  std::vector<position_values> positions_;
  std::size_t kernels_ = 0;
  std::size_t calls_ = 0;
  std::size_t fewest_call_kernels_ = 0, most_call_kernels_ = 0;  // over add_call's calls
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void counter_aggregate::add_values(const metric_values& values) {
  ++kernels_;
  const double duration = metric_value(values, counter_metric::duration);
  const bool has_duration = std::isfinite(duration) && duration > 0;
  for (const auto& [name, value] : values) {
    if (!std::isfinite(value) || value < 0) continue;
    auto it = sums_.find(name);
    if (it == sums_.end()) {
      it = sums_.emplace(name, running_metric{}).first;
      it->second.how = aggregation_for(name);
    }
    running_metric& r = it->second;
    ++r.kernels;
    r.sum += value;
    r.max = r.kernels == 1 ? value : std::max(r.max, value);
    r.min = r.kernels == 1 ? value : std::min(r.min, value);
    if (has_duration) {
      r.weighted_sum += value * duration;
      r.weight += duration;
    } else {
      r.unweighted_kernels = true;
    }
  }
}

KSCOPE_DECL void counter_aggregate::add_call(const std::vector<counter_values>& kernels_of_call) {
  const std::size_t n = kernels_of_call.size();
  fewest_call_kernels_ = calls_ == 0 ? n : std::min(fewest_call_kernels_, n);
  most_call_kernels_ = calls_ == 0 ? n : std::max(most_call_kernels_, n);
  ++calls_;
  for (const counter_values& k : kernels_of_call) add_kernel(k);
  if (positions_.size() < n) positions_.resize(n);
  const std::string_view duration_name = metric_info_of(counter_metric::duration).name();
  for (std::size_t i = 0; i < n; ++i) {
    position_values& at = positions_[i];
    for (const auto& [name, value] : kernels_of_call[i].values) {
      if (!std::isfinite(value) || value < 0) continue;
      if (name == duration_name) {
        at.duration_sum += value;
        ++at.duration_count;
      } else if (is_busiest_part(name)) {
        auto& part = at.parts[name];
        part.first += value;
        ++part.second;
      }
    }
  }
  // A metric is measured by the call when some kernel of it has a value: CUPTI can evaluate
  // a metric as NaN in every range of a pass (H100, CUDA 13.0: the DRAM counters of one
  // per-scope pass in a run), and counting that call for it would scale its sum as if the
  // call had added nothing — halving a two-call average.
  std::vector<std::string_view> measured;
  for (const counter_values& k : kernels_of_call)
    for (const auto& entry : k.values)
      if (std::isfinite(entry.second) && entry.second >= 0 &&
          std::find(measured.begin(), measured.end(), entry.first) == measured.end())
        measured.push_back(entry.first);
  for (std::string_view name : measured) {
    auto it = sums_.find(name);
    if (it == sums_.end()) it = sums_.emplace(std::string(name), running_metric{aggregation_for(name)}).first;
    ++it->second.calls;
    it->second.kernels_of_calls += kernels_of_call.size();
  }
}

KSCOPE_DECL std::optional<aggregated_metric> counter_aggregate::find(std::string_view name) const {
  const auto it = sums_.find(name);
  if (it == sums_.end()) return std::nullopt;
  return finish(it->second);
}

KSCOPE_DECL double counter_aggregate::total(std::string_view name) const {
  const auto m = find(name);
  return m ? m->value : std::numeric_limits<double>::quiet_NaN();
}

KSCOPE_DECL metric_values counter_aggregate::totals() const {
  metric_values out;
  for (const auto& [name, r] : sums_) out.emplace(name, finish(r).value);
  for (const auto& [name, m] : composed()) out.emplace(name, m.value);
  return out;
}

KSCOPE_DECL std::map<std::string, aggregated_metric, std::less<>> counter_aggregate::metrics() const {
  std::map<std::string, aggregated_metric, std::less<>> out;
  for (const auto& [name, r] : sums_) out.emplace(name, finish(r));
  for (auto& [name, m] : composed()) out.emplace(name, m);
  return out;
}

KSCOPE_DECL std::map<std::string, aggregated_metric, std::less<>> counter_aggregate::composed() const {
  std::map<std::string, aggregated_metric, std::less<>> out;
  for (const metric_breakdown& b : metric_breakdowns()) {
    if (sums_.count(b.rollup) != 0 || out.count(b.rollup) != 0) continue;  // measured itself
    // Every part measured somewhere, or no rollup: a missing part could be the busiest.
    aggregated_metric whole;
    whole.how = b.combine == breakdown_combine::sum ? metric_aggregation::sum : metric_aggregation::duration_weighted_mean;
    whole.kernels = kernels_;
    whole.calls = calls_;
    bool complete = !b.parts.empty();
    double sum = 0;
    for (const std::string& p : b.parts) {
      const auto it = sums_.find(p);
      if (it == sums_.end() || it->second.kernels == 0) {
        complete = false;
        break;
      }
      const aggregated_metric m = finish(it->second);
      sum += m.value;
      whole.kernels = std::min(whole.kernels, m.kernels);
      whole.calls = std::min(whole.calls, m.calls);
    }
    if (!complete) continue;
    if (b.combine == breakdown_combine::sum) {
      whole.value = sum;  // each part's sum already scaled to all calls
      out.emplace(b.rollup, whole);
      continue;
    }
    // Kernel by kernel: the same position in every call, or the parts cannot be matched.
    if (calls_ == 0 || fewest_call_kernels_ != most_call_kernels_ || positions_.size() != most_call_kernels_) continue;
    double weighted = 0, weight = 0, plain = 0;
    bool every_position = true, durations = true;
    for (const position_values& at : positions_) {
      double busiest = -1;
      for (const std::string& p : b.parts) {
        const auto it = at.parts.find(p);
        if (it == at.parts.end() || it->second.second == 0) {
          every_position = false;
          break;
        }
        busiest = std::max(busiest, it->second.first / static_cast<double>(it->second.second));
      }
      if (!every_position) break;
      plain += busiest;
      if (at.duration_count > 0 && at.duration_sum > 0) {
        const double d = at.duration_sum / static_cast<double>(at.duration_count);
        weighted += busiest * d;
        weight += d;
      } else {
        durations = false;
      }
    }
    if (!every_position || positions_.empty()) continue;
    whole.weighted = durations && weight > 0;
    whole.value = whole.weighted ? weighted / weight : plain / static_cast<double>(positions_.size());
    out.emplace(b.rollup, whole);
  }
  return out;
}

KSCOPE_DECL aggregated_metric counter_aggregate::finish(const running_metric& r) const {
  aggregated_metric m;
  m.how = r.how;
  m.kernels = r.kernels;
  // Kernels added one by one (count_call) are every call's: the old rule.
  const bool per_call = r.calls > 0;
  m.calls = per_call ? r.calls : calls_;
  m.missing = (per_call ? r.kernels_of_calls : kernels_) - std::min(r.kernels, per_call ? r.kernels_of_calls : kernels_);
  if (r.kernels == 0) return m;
  const double to_all_calls =
      per_call && r.calls < calls_ ? static_cast<double>(calls_) / static_cast<double>(r.calls) : 1.0;
  switch (r.how) {
    case metric_aggregation::sum: m.value = r.sum * to_all_calls; break;
    case metric_aggregation::max: m.value = r.max; break;
    case metric_aggregation::min: m.value = r.min; break;
    case metric_aggregation::duration_weighted_mean:
      m.weighted = !r.unweighted_kernels && r.weight > 0;
      m.value = m.weighted ? r.weighted_sum / r.weight : r.sum / static_cast<double>(r.kernels);
      break;
  }
  return m;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// FLOPs from instruction counts

// The floating-point operations of one precision: add + mul + 2 x fma.
struct precision_flops {
  data_type precision = data_type::fp32;  // fp64, fp32 or fp16
  double adds = std::numeric_limits<double>::quiet_NaN();
  double muls = std::numeric_limits<double>::quiet_NaN();
  double fmas = std::numeric_limits<double>::quiet_NaN();
  double flops = std::numeric_limits<double>::quiet_NaN();  // NaN unless all three were measured

  [[nodiscard]] bool measured() const noexcept { return !std::isnan(flops); }
};

// FLOPs per precision and in total, and which precisions did the work.
//   kscope::flop_count f = kscope::count_flops(v);
//   std::printf("%.3g FLOP (%s)\n", f.total, f.precision_text().c_str());   // "fp32"
struct flop_count {
  std::array<precision_flops, 3> by_precision{};  // fp64, fp32, fp16
  double total = std::numeric_limits<double>::quiet_NaN();  // measured precisions, tensor FLOPs included; NaN if none
  // FLOPs on the tensor pipe (sm__ops_path_tensor_src_*), per source type with FLOPs > 0,
  // most first; `tensor` NaN when no tensor counter was measured. Not in `precisions`,
  // which names the CUDA-core (SASS) precisions.
  double tensor = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::pair<data_type, double>> tensor_by_type;
  bool complete = false;                   // all three precisions measured
  std::vector<data_type> precisions;       // precisions with FLOPs > 0, most FLOPs first
  std::vector<std::string> missing;        // metric names not found

  [[nodiscard]] const precision_flops& of(data_type t) const noexcept;

  // A precision under this share of the FLOPs is left out of precision_text(): the SASS
  // counters also count instructions that compute nothing (nvcc zeroes registers with
  // `HFMA2.MMA Rd, -RZ, RZ, ...`, which the hfma counter sees: n^2 of them beside the 2 n^3
  // fp32 FLOPs of a naive GEMM on an H200). The counts themselves stay exact.
  static constexpr double negligible_share = 0.01;

  // "fp32", "fp32+fp64 (fp32 98%)", "none (no FP instructions)", "not measured".
  [[nodiscard]] std::string precision_text() const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const precision_flops& flop_count::of(data_type t) const noexcept {
  for (const precision_flops& p : by_precision)
    if (p.precision == t) return p;
  return by_precision[1];
}

KSCOPE_DECL std::string flop_count::precision_text() const {
  if (std::isnan(total)) return "not measured";
  // The tensor pipe's source types and the CUDA-core precisions, most FLOPs first.
  std::vector<std::pair<std::string, double>> parts;
  for (const auto& [type, flops] : tensor_by_type) parts.emplace_back(std::string(to_string(type)) + " tensor", flops);
  for (data_type t : precisions) parts.emplace_back(std::string(to_string(t)), of(t).flops);
  if (parts.empty()) return "none (no FP instructions)";
  std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  std::size_t shown = 0;
  for (const auto& [name, flops] : parts) {
    if (flops < negligible_share * total) continue;
    out += (out.empty() ? "" : "+") + name;
    ++shown;
  }
  if (shown > 1)
    out += " (" + parts.front().first + " " + detail::format_fixed(100 * parts.front().second / total, 0) + "%)";
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Counts FLOPs from the SASS instruction counters of `values` (one kernel or a scope's
// totals). A precision is measured when its three counters are present and finite; the
// names of the missing ones go to flop_count::missing.
//   naive fp32 GEMM, n = 512: ffma = n^3 = 134217728 -> fp32 flops = 2 n^3 = 268435456
[[nodiscard]] KSCOPE_DECL flop_count count_flops(const metric_values& values);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL flop_count count_flops(const metric_values& values) {
  struct precision_metrics {
    data_type type;
    counter_metric add, mul, fma;
  };
  static constexpr precision_metrics table[] = {
      {data_type::fp64, counter_metric::fp64_add, counter_metric::fp64_mul, counter_metric::fp64_fma},
      {data_type::fp32, counter_metric::fp32_add, counter_metric::fp32_mul, counter_metric::fp32_fma},
      {data_type::fp16, counter_metric::fp16_add, counter_metric::fp16_mul, counter_metric::fp16_fma},
  };
  flop_count out;
  out.complete = true;
  double total = 0;
  bool any = false;
  for (std::size_t i = 0; i < 3; ++i) {
    precision_flops& p = out.by_precision[i];
    p.precision = table[i].type;
    p.adds = metric_value(values, table[i].add);
    p.muls = metric_value(values, table[i].mul);
    p.fmas = metric_value(values, table[i].fma);
    bool ok = true;
    const std::pair<counter_metric, double> parts[] = {{table[i].add, p.adds}, {table[i].mul, p.muls},
                                                       {table[i].fma, p.fmas}};
    for (const auto& [id, v] : parts) {
      if (!std::isfinite(v) || v < 0) {
        ok = false;
        out.missing.emplace_back(metric_info_of(id).name());
      }
    }
    if (!ok) {
      out.complete = false;
      continue;
    }
    p.flops = p.adds + p.muls + 2 * p.fmas;
    total += p.flops;
    any = true;
    if (p.flops > 0) out.precisions.push_back(p.precision);
  }
  // The tensor pipe's FLOPs, per source type.
  static constexpr std::pair<counter_metric, data_type> tensor_table[] = {
      {counter_metric::tensor_fp16_flops, data_type::fp16}, {counter_metric::tensor_bf16_flops, data_type::bf16},
      {counter_metric::tensor_tf32_flops, data_type::tf32}, {counter_metric::tensor_fp8_flops, data_type::fp8},
      {counter_metric::tensor_fp64_flops, data_type::fp64}};
  double tensor = 0;
  bool tensor_measured = false;
  for (const auto& [id, type] : tensor_table) {
    const double v = metric_value(values, id);
    if (!std::isfinite(v) || v < 0) continue;
    tensor_measured = true;
    tensor += v;
    if (v > 0) out.tensor_by_type.emplace_back(type, v);
  }
  if (tensor_measured) {
    out.tensor = tensor;
    total += tensor;
    any = true;
  }
  std::stable_sort(out.tensor_by_type.begin(), out.tensor_by_type.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (any) out.total = total;
  std::stable_sort(out.precisions.begin(), out.precisions.end(),
                   [&out](data_type a, data_type b) { return out.of(a).flops > out.of(b).flops; });
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// Metric names

// The result of checking one metric name against the names a device offers.
struct metric_name_check {
  bool known = false;
  std::string message;                  // "" when known; else what is wrong, with suggestions
  std::vector<std::string> suggestions; // up to 3 close names, closest first
};

// Up to `limit` names of `available` close to `name` (edit distance, then the length of
// the shared beginning), closest first. `available` may hold base names (what the profiler
// host API lists: "dram__bytes_read") or full names; a base name is completed with the
// suffix `name` carries, so the suggestion can be pasted as is.
//   kscope::closest_metric_names("dram__byte_read.sum", {"dram__bytes_read", "dram__bytes_write"})
//   // {"dram__bytes_read.sum", "dram__bytes_write.sum"}
[[nodiscard]] KSCOPE_DECL std::vector<std::string> closest_metric_names(std::string_view name,
                                                                   const std::vector<std::string>& available,
                                                                   std::size_t limit = 3);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> closest_metric_names(std::string_view name,
                                                                   const std::vector<std::string>& available,
                                                                   std::size_t limit) {
  const detail::metric_name_parts wanted = detail::split_metric_name(name);
  const bool suffix_ok = !wanted.suffix.empty() && detail::metric_suffix_error(wanted.suffix).empty();
  struct scored {
    std::size_t distance, prefix;
    std::string text;
  };
  std::vector<scored> close;
  std::set<std::string> seen;
  for (const std::string& candidate : available) {
    const detail::metric_name_parts have = detail::split_metric_name(candidate);
    const bool candidate_is_base = have.suffix.empty();
    // Compare like with like: bases with bases, full names with full names.
    const std::string_view query = candidate_is_base ? wanted.base : name;
    const std::size_t distance = detail::edit_distance(query, candidate);
    if (distance == 0 && candidate_is_base && !suffix_ok) continue;  // the base is right; the suffix is the problem
    if (!detail::metric_names_close(query, candidate, distance)) continue;
    std::string text = candidate;
    if (candidate_is_base && suffix_ok) text += "." + std::string(wanted.suffix);
    if (!seen.insert(text).second) continue;
    close.push_back({distance, detail::common_prefix_length(query, candidate), std::move(text)});
  }
  std::sort(close.begin(), close.end(), [](const scored& a, const scored& b) {
    if (a.distance != b.distance) return a.distance < b.distance;
    if (a.prefix != b.prefix) return a.prefix > b.prefix;
    return a.text < b.text;
  });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < close.size() && i < limit; ++i) out.push_back(std::move(close[i].text));
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

KSCOPE_DECL std::string suggestion_text(const std::vector<std::string>& suggestions);

// Suffixes close to a wrong one ("summ" -> "sum"; "avg.pct_of_peak_sustained_elapse" ->
// "avg.pct_of_peak_sustained_elapsed"), for the message about a misspelt rollup.
KSCOPE_DECL std::vector<std::string> closest_suffixes(std::string_view suffix);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string suggestion_text(const std::vector<std::string>& suggestions) {
  if (suggestions.empty()) return {};
  std::string out = "; did you mean ";
  for (std::size_t i = 0; i < suggestions.size(); ++i) {
    if (i) out += i + 1 == suggestions.size() ? " or " : ", ";
    out += suggestions[i];
  }
  return out + "?";
}

KSCOPE_DECL std::vector<std::string> closest_suffixes(std::string_view suffix) {
  std::vector<std::string> candidates;
  for (std::string_view r : metric_rollups) {
    candidates.emplace_back(r);
    for (std::string_view s : metric_submetrics) candidates.push_back(std::string(r) + "." + std::string(s));
  }
  for (std::string_view r : metric_ratio_suffixes) candidates.emplace_back(r);
  std::vector<std::pair<std::size_t, std::string>> close;
  for (std::string& c : candidates) {
    const std::size_t d = edit_distance(suffix, c);
    if (d <= std::max<std::size_t>(2, suffix.size() / 4)) close.emplace_back(d, std::move(c));
  }
  std::sort(close.begin(), close.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < close.size() && i < 3; ++i) out.push_back(std::move(close[i].second));
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Checks one metric name against the names a device offers (base names from the profiler
// host API, or full names). Known: the name itself is listed, or its base is and its
// suffix follows the metric grammar (evidence/detail/metric_names.hpp). Otherwise the
// message says what is wrong and lists up to 3 close names.
//   auto c = kscope::check_metric_name("dram__byte_read.sum", bases);
//   // c.message: "unknown metric 'dram__byte_read.sum'; did you mean dram__bytes_read.sum?"
[[nodiscard]] KSCOPE_DECL metric_name_check check_metric_name(std::string_view name,
                                                         const std::vector<std::string>& available);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL metric_name_check check_metric_name(std::string_view name,
                                                         const std::vector<std::string>& available) {
  metric_name_check out;
  const std::string quoted = "'" + std::string(name) + "'";
  if (name.empty()) {
    out.message = "empty metric name";
    return out;
  }
  const std::set<std::string_view> listed(available.begin(), available.end());
  if (listed.count(name)) {
    // A listed full name is known; a listed base still needs its rollup to be evaluated.
    const std::string error = detail::metric_suffix_error(detail::split_metric_name(name).suffix);
    out.known = error.empty();
    if (!out.known) out.message = "metric " + quoted + ": " + error;
    return out;
  }
  // The longest beginning of the name, cut at a dot, that the device lists as a base: its
  // suffix must then follow the grammar ("dram__bytes_read.summ" -> base + "summ").
  for (std::size_t dot = name.rfind('.'); dot != std::string_view::npos && dot > 0;
       dot = name.rfind('.', dot - 1)) {
    const std::string_view base = name.substr(0, dot);
    if (!listed.count(base)) continue;
    const std::string_view suffix = name.substr(dot + 1);
    const std::string error = detail::metric_suffix_error(suffix);
    if (error.empty()) {
      out.known = true;
      return out;
    }
    for (const std::string& s : detail::closest_suffixes(suffix))
      out.suggestions.push_back(std::string(base) + "." + s);
    out.message = "metric " + quoted + ": " + error + detail::suggestion_text(out.suggestions);
    return out;
  }
  out.suggestions = closest_metric_names(name, available);
  out.message = "unknown metric " + quoted;
  out.message += out.suggestions.empty() ? std::string(" (no metric this device offers is close)")
                                         : detail::suggestion_text(out.suggestions);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Checks every name; "" when all are known, else one line per unknown name.
//   std::string e = kscope::check_metric_names({"dram__bytes_read.sum", "foo.sum"}, bases);
[[nodiscard]] KSCOPE_DECL std::string check_metric_names(const std::vector<std::string>& names,
                                                    const std::vector<std::string>& available);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string check_metric_names(const std::vector<std::string>& names,
                                                    const std::vector<std::string>& available) {
  std::string out;
  for (const std::string& n : names) {
    const metric_name_check c = check_metric_name(n, available);
    if (!c.known) out += (out.empty() ? "" : "\n") + c.message;
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// What to collect for a request, once the device's offer is known.
struct metric_request {
  std::vector<std::string> collect;  // names to configure, in request order, no duplicates
  std::vector<std::string> notes;    // default metrics missing here, fallbacks taken
  std::vector<std::string> errors;   // one line per requested name that cannot be collected

  [[nodiscard]] bool ok() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool metric_request::ok() const noexcept { return errors.empty() && !collect.empty(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Resolves a metric request: an empty `requested` means the default set. A catalog metric
// is collected under the first of its names `is_available` accepts (a fallback taken is
// noted). A name the caller asked for that cannot be collected is an error (with the
// suggestions of check_metric_name against `available`); a default-set metric the device
// lacks is only noted. `is_available` is the device's word on a full name (the CUPTI side
// asks the profiler host API); without one, check_metric_name against `available` decides.
//   auto r = kscope::resolve_metric_request({}, nullptr, bases);
//   if (!r.ok()) report(r.errors);
[[nodiscard]] KSCOPE_DECL metric_request resolve_metric_request(const std::vector<std::string>& requested,
                                                           const std::function<bool(const std::string&)>& is_available,
                                                           const std::vector<std::string>& available);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL metric_request resolve_metric_request(const std::vector<std::string>& requested,
                                                           const std::function<bool(const std::string&)>& is_available,
                                                           const std::vector<std::string>& available) {
  metric_request out;
  const bool defaults = requested.empty();
  const std::vector<std::string> names = defaults ? default_metric_names() : requested;
  const auto offered = [&](const std::string& n) {
    return is_available ? is_available(n) : check_metric_name(n, available).known;
  };
  std::set<std::string> taken;
  for (const std::string& name : names) {
    if (taken.count(name)) continue;
    std::vector<std::string> candidates{name};
    const metric_info* info = find_metric_info(name);
    if (info) {
      for (std::string_view n : info->names)
        if (n != name) candidates.emplace_back(n);
    }
    std::string chosen;
    for (const std::string& c : candidates) {
      if (offered(c)) {
        chosen = c;
        break;
      }
    }
    if (!chosen.empty()) {
      if (!taken.insert(chosen).second) continue;
      taken.insert(name);
      out.collect.push_back(chosen);
      if (chosen != name)
        out.notes.push_back(name + " is not offered by this device; collecting " + chosen + " instead (same quantity)");
      continue;
    }
    taken.insert(name);
    if (defaults) {
      out.notes.push_back(name + " (" + std::string(info ? info->meaning : std::string_view("?")) +
                          ") is not offered by this device: left out");
      continue;
    }
    const metric_name_check c = check_metric_name(name, available);
    out.errors.push_back(c.known ? "metric '" + name + "' is well formed but this device does not offer it"
                                 : c.message);
  }
  if (out.collect.empty() && out.errors.empty()) out.errors.push_back("none of the requested metrics can be collected");
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// Measured roofline

// The memory levels of the hierarchical roofline.
enum class memory_level : std::uint8_t { dram, l2, l1 };

[[nodiscard]] KSCOPE_DECL const char* to_string(memory_level l) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* to_string(memory_level l) noexcept {
  switch (l) {
    case memory_level::dram: return "DRAM";
    case memory_level::l2: return "L2";
    case memory_level::l1: return "L1";
  }
  return "unknown";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The roofs a measured point is placed against: the compute peak and DRAM bandwidth of a
// roof_line (device_peaks::roof_lines() gives them per dtype, theoretical or measured), and
// the L2 and L1 bandwidths where known (NaN: not known, the point is drawn unplaced).
//   kscope::hierarchical_roofs roofs{peaks.roof_lines().front()};
struct hierarchical_roofs {
  roof_line roof;                                                     // compute peak, DRAM B/s
  double l2_bytes_per_s = std::numeric_limits<double>::quiet_NaN();
  double l1_bytes_per_s = std::numeric_limits<double>::quiet_NaN();

  [[nodiscard]] double bytes_per_s(memory_level level) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double hierarchical_roofs::bytes_per_s(memory_level level) const noexcept {
  switch (level) {
    case memory_level::dram: return roof.peak_bytes_per_s;
    case memory_level::l2: return l2_bytes_per_s;
    case memory_level::l1: return l1_bytes_per_s;
  }
  return std::numeric_limits<double>::quiet_NaN();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One level's point: the bytes that moved there, the intensity they give, the achieved
// bandwidth and, when the level's roof is known, the placement under it.
struct level_point {
  memory_level level = memory_level::dram;
  double bytes = 0;
  double intensity = std::numeric_limits<double>::quiet_NaN();       // flops / bytes
  double bytes_per_s = std::numeric_limits<double>::quiet_NaN();
  double roof_bytes_per_s = std::numeric_limits<double>::quiet_NaN(); // NaN: unknown
  double fraction_of_bandwidth = std::numeric_limits<double>::quiet_NaN();
  std::optional<placement> placed;  // place() under the compute peak and this level's bandwidth
};

// The measured point(s) of a kernel or scope.
//   kscope::measured_roofline m = kscope::measure_roofline(v, roofs);
//   if (const auto* dram = m.find(kscope::memory_level::dram)) plot(dram->intensity, m.flops_per_s);
struct measured_roofline {
  double seconds = std::numeric_limits<double>::quiet_NaN();  // summed kernel (range) time
  flop_count flops;                                            // from the SASS counters
  double flops_per_s = std::numeric_limits<double>::quiet_NaN();
  std::vector<level_point> levels;    // DRAM, L2, L1: those whose bytes were measured
  std::vector<std::string> problems;  // what could not be computed, and why

  [[nodiscard]] const level_point* find(memory_level level) const noexcept;

  // The chart point of one level ("decode (L2)"), for report/plot.hpp; nullopt without FLOPs or
  // without that level.
  [[nodiscard]] std::optional<roof_point> chart_point(memory_level level, const std::string& label) const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const level_point* measured_roofline::find(memory_level level) const noexcept {
  for (const level_point& p : levels)
    if (p.level == level) return &p;
  return nullptr;
}

KSCOPE_DECL std::optional<roof_point> measured_roofline::chart_point(memory_level level, const std::string& label) const {
  const level_point* p = find(level);
  if (p == nullptr || !std::isfinite(flops_per_s) || std::isnan(p->intensity)) return std::nullopt;
  roof_point out{label + " (" + to_string(level) + ")", p->intensity, flops_per_s, bound::latency};
  if (p->placed) out.limiter = p->placed->limiter;
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The measured roofline of `values` (one kernel or a scope's totals): FLOPs from the SASS
// counters, time from gpu__time_duration.sum, bytes per level (DRAM read + write, L2, L1).
// `roofs` may be null (rates and intensities only). Never throws on bad numbers: what is
// missing or invalid goes to problems.
//   copy of 1 GiB in 0.5 ms: DRAM 2 GiB, 0 FLOP -> intensity 0, 4.29 TB/s
[[nodiscard]] KSCOPE_DECL measured_roofline measure_roofline(const metric_values& values,
                                                        const hierarchical_roofs* roofs = nullptr);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL measured_roofline measure_roofline(const metric_values& values,
                                                        const hierarchical_roofs* roofs) {
  measured_roofline out;
  out.flops = count_flops(values);
  const double duration_ns = metric_value(values, counter_metric::duration);
  if (std::isnan(duration_ns)) {
    out.problems.push_back("no duration (gpu__time_duration.sum): no rates");
  } else if (!(duration_ns > 0) || std::isinf(duration_ns)) {
    out.problems.push_back("duration " + detail::format_general(duration_ns, 6) +
                           " ns is not a positive finite time: no rates");
  } else {
    out.seconds = duration_ns * 1e-9;
  }
  if (std::isnan(out.flops.total)) {
    out.problems.push_back("FP instruction counts not measured (" +
                           (out.flops.missing.empty() ? std::string("?") : out.flops.missing.front()) +
                           "...): no FLOPs, no intensity");
  } else if (!out.flops.complete) {
    out.problems.push_back("FLOPs of some precisions not measured (" + out.flops.missing.front() +
                           "...): the FLOP count is a lower bound");
  }
  const bool timed = !std::isnan(out.seconds);
  if (timed && !std::isnan(out.flops.total)) out.flops_per_s = out.flops.total / out.seconds;

  const double read = metric_value(values, counter_metric::dram_read_bytes);
  const double write = metric_value(values, counter_metric::dram_write_bytes);
  struct level_bytes {
    memory_level level;
    double bytes;
    const char* what;
  };
  // Either count missing: no DRAM point; either negative: not a byte count (shown as is).
  const double dram = std::isnan(read) || std::isnan(write) ? std::numeric_limits<double>::quiet_NaN()
                      : (read < 0 || write < 0)             ? std::min(read, write)
                                                            : read + write;
  const level_bytes measured[] = {
      {memory_level::dram, dram, "DRAM bytes (dram__bytes_read.sum + dram__bytes_write.sum)"},
      {memory_level::l2, metric_value(values, counter_metric::l2_bytes), "L2 bytes (lts__t_bytes.sum)"},
      {memory_level::l1, metric_value(values, counter_metric::l1_bytes), "L1 bytes (l1tex__t_bytes.sum)"},
  };
  for (const level_bytes& m : measured) {
    if (std::isnan(m.bytes)) {
      out.problems.push_back(std::string(m.what) + " not measured: no " + to_string(m.level) + " point");
      continue;
    }
    if (!std::isfinite(m.bytes) || m.bytes < 0) {
      out.problems.push_back(std::string(m.what) + " = " + detail::format_general(m.bytes, 6) +
                             " is not a byte count: no " + to_string(m.level) + " point");
      continue;
    }
    level_point p;
    p.level = m.level;
    p.bytes = m.bytes;
    if (!std::isnan(out.flops.total)) p.intensity = intensity({out.flops.total, m.bytes});
    if (timed) p.bytes_per_s = m.bytes / out.seconds;
    if (roofs) {
      const double bw = roofs->bytes_per_s(m.level);
      if (std::isfinite(bw) && bw > 0) {
        p.roof_bytes_per_s = bw;
        if (timed) p.fraction_of_bandwidth = p.bytes_per_s / bw;
        if (timed && !std::isnan(out.flops.total))
          p.placed = try_place({out.flops.total, m.bytes}, out.seconds, roofs->roof.peak_flops_per_s, bw);
      }
    }
    out.levels.push_back(p);
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One line describing a measured roofline, for reports and logs:
//   "2.15 GFLOP fp32 in 276 ms = 7.78 GFLOP/s; DRAM 448 MB (4.8 FLOP/B, 1.62 GB/s, 0.03% of 4.81 TB/s);
//    L2 ...; L1 ..."
[[nodiscard]] KSCOPE_DECL std::string describe(const measured_roofline& m);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string describe(const measured_roofline& m) {
  std::string out;
  if (!std::isnan(m.flops.total)) {
    out = detail::format_si(m.flops.total, "FLOP") + " " + m.flops.precision_text();
    if (!std::isnan(m.seconds))
      out += " in " + detail::format_si(m.seconds, "s") + " = " + detail::format_si(m.flops_per_s, "FLOP/s");
  } else if (!std::isnan(m.seconds)) {
    out = "FLOPs not measured; " + detail::format_si(m.seconds, "s");
  } else {
    out = "FLOPs and time not measured";
  }
  for (const level_point& p : m.levels) {
    out += std::string("; ") + to_string(p.level) + " " + detail::format_si(p.bytes, "B");
    std::string inner;
    if (!std::isnan(p.intensity))
      inner = std::isinf(p.intensity) ? "inf FLOP/B" : detail::format_general(p.intensity, 3) + " FLOP/B";
    if (!std::isnan(p.bytes_per_s)) inner += (inner.empty() ? "" : ", ") + detail::format_si(p.bytes_per_s, "B/s");
    if (!std::isnan(p.fraction_of_bandwidth))
      inner += ", " + detail::format_general(100 * p.fraction_of_bandwidth, 3) + "% of " +
               detail::format_si(p.roof_bytes_per_s, "B/s");
    if (!inner.empty()) out += " (" + inner + ")";
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Declared work beyond this relative difference from the measured work gets a line.
inline constexpr double counters_work_tolerance = 0.10;

// Declared work (per call) against measured work, and the line that says where they differ.
struct work_check {
  double declared_bytes = std::numeric_limits<double>::quiet_NaN();
  double measured_dram_bytes = std::numeric_limits<double>::quiet_NaN();  // per call
  double declared_flops = std::numeric_limits<double>::quiet_NaN();
  double measured_flops = std::numeric_limits<double>::quiet_NaN();       // per call, SASS FP counters
  double bytes_ratio = std::numeric_limits<double>::quiet_NaN();          // measured / declared
  double flops_ratio = std::numeric_limits<double>::quiet_NaN();
  bool bytes_differ = false;
  bool flops_differ = false;
  // "declared 201 MB, DRAM moved 448 MB: 2.2×"; both differences joined by "; "; "" when
  // they agree within the tolerance or cannot be compared.
  std::string text;
};

namespace detail {

KSCOPE_DECL std::string ratio_text(double ratio);

KSCOPE_DECL bool differs(double declared, double measured, double tolerance, double& ratio);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string ratio_text(double ratio) {
  if (std::isinf(ratio)) return "";
  // Two significant digits far from 1 ("2.2×"), three near it, where "1.1×" would hide
  // which side of the 10 % line a difference is ("1.15×").
  const int digits = (ratio >= 1.5 || ratio <= 0.67) ? 2 : 3;
  return ": " + format_general(ratio, digits) + "\xC3\x97";  // U+00D7 MULTIPLICATION SIGN
}

KSCOPE_DECL bool differs(double declared, double measured, double tolerance, double& ratio) {
  ratio = std::numeric_limits<double>::quiet_NaN();
  if (!std::isfinite(declared) || declared < 0 || !std::isfinite(measured) || measured < 0) return false;
  if (declared == 0) {
    if (measured == 0) return false;
    ratio = std::numeric_limits<double>::infinity();
    return true;
  }
  ratio = measured / declared;
  return std::fabs(ratio - 1) > tolerance;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Compares the work a scope declared per call with what its profiled kernels did per call
// (`measured` is the scope's totals over `calls` profiled calls). Bytes: DRAM read + write.
// FLOPs: the SASS FP counters, which leave out tensor-core work — when the tensor pipe was
// busy the FLOP line says so rather than blame the declaration.
//   auto c = kscope::compare_declared_work({0, 201e6}, totals, 1);
//   // c.text: "declared 201 MB, DRAM moved 448 MB: 2.23×"
[[nodiscard]] KSCOPE_DECL work_check compare_declared_work(const work& declared_per_call, const metric_values& measured,
                                                      std::size_t calls, double tolerance = counters_work_tolerance);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL work_check compare_declared_work(const work& declared_per_call, const metric_values& measured,
                                                      std::size_t calls, double tolerance) {
  work_check out;
  if (calls == 0) return out;
  const double n = static_cast<double>(calls);
  out.declared_bytes = declared_per_call.bytes;
  out.declared_flops = declared_per_call.flops;
  out.measured_dram_bytes = dram_bytes_moved(measured) / n;
  const flop_count f = count_flops(measured);
  out.measured_flops = f.total / n;
  out.bytes_differ = detail::differs(out.declared_bytes, out.measured_dram_bytes, tolerance, out.bytes_ratio);
  out.flops_differ = detail::differs(out.declared_flops, out.measured_flops, tolerance, out.flops_ratio);
  if (out.bytes_differ) {
    out.text = "declared " + detail::format_si(out.declared_bytes, "B") + ", DRAM moved " +
               detail::format_si(out.measured_dram_bytes, "B") + detail::ratio_text(out.bytes_ratio);
  }
  if (out.flops_differ) {
    if (!out.text.empty()) out.text += "; ";
    out.text += "declared " + detail::format_si(out.declared_flops, "FLOP") + ", executed " +
                detail::format_si(out.measured_flops, "FLOP") + " (" + f.precision_text() +
                (std::isnan(f.tensor) ? ", SASS FP instructions)" : ", SASS FP instructions and tensor ops)") +
                detail::ratio_text(out.flops_ratio);
    const double tensor = metric_value(measured, counter_metric::tensor_pipe_active);
    if (tensor > 0 && std::isnan(f.tensor)) {
      out.text += " — the tensor pipe was busy " + detail::format_general(tensor, 3) +
                  "% of the time and its FLOPs are not in these counts";
    }
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// Classification from evidence

// A throughput at or above this % of its peak counts as "at a roof"; both speed-of-light
// throughputs under it mean latency-bound (Nsight Compute's guidance: under 60 % on both
// points at latency).
inline constexpr double counters_at_roof_pct = 60.0;
// The GPU idle this share of a scope's span or more: launch gaps and host work dominate.
// The same share the session's advice uses (session/detail/advice.hpp: launch_gap_idle_share).
inline constexpr double counters_launch_idle_share = 0.5;
// Achieved occupancy under this % of the SM's warp slots: too few warps to hide latency.
inline constexpr double counters_low_occupancy_pct = 25.0;
// The tensor pipe this busy (% of elapsed cycles) names it as the busy pipe of a
// compute-bound kernel when no other pipe was measured.
inline constexpr double counters_busy_pipe_pct = 50.0;

// Whether DRAM, at `dram_pct` of its peak, is the limit although an on-chip level reads
// `level_pct`: every DRAM byte also passes through L2 (and, for loads, L1), whose throughput
// counts those fills (a streaming copy on an H200: L2 72 % beside DRAM 63 %). DRAM at its
// roof stays the limit while the level reads within a quarter of it.
[[nodiscard]] constexpr bool dram_explains_level(double dram_pct, double level_pct, double at_roof_pct) noexcept {
  return dram_pct >= at_roof_pct && dram_pct * 1.25 >= level_pct;
}

// The thresholds of classify(); the defaults are the constants above.
struct classification_thresholds {
  double at_roof_pct = counters_at_roof_pct;
  double launch_idle_share = counters_launch_idle_share;
  double low_occupancy_pct = counters_low_occupancy_pct;
  double busy_pipe_pct = counters_busy_pipe_pct;
};

// bottleneck, evidence and finding: the verdict vocabulary every feature shares (core/finding.hpp).

// The share of the sampled warps stalled for one reason (PC sampling), 0..1, with what the
// reason means (warp_stalls/: to_stall_shares fills it; empty when not known).
struct stall_share {
  std::string reason;  // "long_scoreboard", "barrier", ...
  double share = 0;
  std::string meaning;  // "warps wait at a block barrier (__syncthreads, ...) for the other warps"

  stall_share() = default;
  stall_share(std::string reason_key, double share_of_samples, std::string what_it_means = {})
      : reason(std::move(reason_key)), share(share_of_samples), meaning(std::move(what_it_means)) {}
};

// A stall reason with more than this share of the samples is the dominant one: it names
// the cause of a latency-bound verdict.
inline constexpr double counters_dominant_stall_share = 0.5;

// Everything classify() may use. Only `counters` is needed for the kernel-level verdict;
// the timeline decides launch/CPU-bound, the launch shape and stalls explain latency.
//   kscope::classification_input in{scope_totals};
//   in.span_ns = 1e6; in.gpu_busy_ns = 2e5;   // per call, from the CUPTI timeline
//   in.grid_blocks = 4; in.sm_count = 132;
struct classification_input {
  metric_values counters;  // one kernel's values or a scope's totals
  double span_ns = std::numeric_limits<double>::quiet_NaN();      // the scope's span per call
  double gpu_busy_ns = std::numeric_limits<double>::quiet_NaN();  // GPU busy with its work per call
  double grid_blocks = std::numeric_limits<double>::quiet_NaN();  // blocks per kernel launch (mean)
  double sm_count = std::numeric_limits<double>::quiet_NaN();
  std::vector<stall_share> stalls;                               // optional, any order
  std::optional<hierarchical_roofs> roofs;  // tells the limiting level from bytes when no per-level % was measured
};

// The verdict, the findings beside it and the evidence that was not there.
struct classification {
  finding verdict;
  std::vector<finding> also;          // the kernels' own verdict under a launch-bound scope; a second roof
  std::vector<std::string> missing;   // evidence not given, and what it would have decided
};

namespace detail {

KSCOPE_DECL std::string pct_text(double pct);

KSCOPE_DECL std::string counter_fact_text(const evidence& e);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string pct_text(double pct) { return format_fixed(pct, pct < 9.95 ? 1 : 0) + "%"; }

KSCOPE_DECL std::string counter_fact_text(const evidence& e) {
  return e.metric + " = " + format_general(e.value, 4);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The counter evidence for a catalog quantity, if collected and valid.
KSCOPE_DECL std::optional<evidence> counter_evidence(const metric_values& values, counter_metric id);

KSCOPE_DECL std::string level_advice(memory_level level);

KSCOPE_DECL finding memory_finding(const classification_input& in, const classification_thresholds& t,
                                   const evidence& sm, const evidence& mem, bool beside_tensor_roof,
                                   std::vector<std::string>& missing);

// The highest of a speed-of-light rollup and the measured units it rolls up: the top unit
// (a rollup can read lower than one of its units: gpu__compute_memory_throughput 46 %
// beside lts__throughput 66 % for a stencil on an H200, where Nsight Compute names L2).
KSCOPE_DECL evidence top_unit(const metric_values& values, const evidence& rollup,
                              std::initializer_list<counter_metric> units);

// The stall evidence as text and facts: the dominant reason or the top two; nullopt-like
// empty text when no stall shares were given.
KSCOPE_DECL std::string stall_text(const classification_input& in, const evidence& mem,
                                   const classification_thresholds& t, std::vector<evidence>& facts,
                                   bool& dominant_found);

KSCOPE_DECL finding compute_finding(const classification_input& in, const classification_thresholds& t,
                               const evidence& sm, const evidence& mem, std::vector<std::string>& missing);

KSCOPE_DECL finding latency_finding(const classification_input& in, const classification_thresholds& t,
                               const evidence& sm, const evidence& mem, std::vector<std::string>& missing);

// The busiest of the measured units standing in for a speed-of-light rollup that was not
// collected (it needs several passes: per-scope counters get one). A lower bound of the
// rollup, which is itself the busiest of its units; `missing` says the stand-in was used.
KSCOPE_DECL std::optional<evidence> busiest_unit(const metric_values& values, std::initializer_list<counter_metric> units,
                                            counter_metric rollup, std::vector<std::string>& missing);

// The kernel-level verdict from the speed-of-light pair.
KSCOPE_DECL finding classify_kernels(const classification_input& in, const classification_thresholds& t,
                                std::vector<finding>& also, std::vector<std::string>& missing);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<evidence> counter_evidence(const metric_values& values, counter_metric id) {
  const double v = metric_value(values, id);
  if (!std::isfinite(v) || v < 0) return std::nullopt;
  const metric_info& info = metric_info_of(id);
  return evidence{std::string(collected_name(values, id)), v, std::string(info.unit)};
}

KSCOPE_DECL std::string level_advice(memory_level level) {
  switch (level) {
    case memory_level::dram:
      return "move fewer bytes to and from DRAM (fuse kernels, narrow the data type, reuse data through L2 and "
             "shared memory)";
    case memory_level::l2:
      return "keep reused data in L1 / shared memory (tiling) and coalesce accesses, so fewer requests reach L2";
    case memory_level::l1:
      return "reuse data in registers, avoid redundant and uncoalesced loads and shared-memory bank conflicts";
  }
  return {};
}

KSCOPE_DECL evidence top_unit(const metric_values& values, const evidence& rollup,
                              std::initializer_list<counter_metric> units) {
  evidence top = rollup;
  for (counter_metric id : units)
    if (const auto e = counter_evidence(values, id); e && e->value > top.value) top = *e;
  return top;
}

KSCOPE_DECL std::string stall_text(const classification_input& in, const evidence& mem,
                                   const classification_thresholds& t, std::vector<evidence>& facts,
                                   bool& dominant_found) {
  dominant_found = false;
  std::vector<stall_share> stalls;
  for (const stall_share& s : in.stalls)
    if (std::isfinite(s.share) && s.share > 0 && s.reason != "selected") stalls.push_back(s);
  if (stalls.empty()) return {};
  std::stable_sort(stalls.begin(), stalls.end(),
                   [](const stall_share& a, const stall_share& b) { return a.share > b.share; });
  const stall_share& top = stalls.front();
  const auto label = [](const std::string& key) {
    std::string out = key;
    std::replace(out.begin(), out.end(), '_', ' ');
    return out;
  };
  std::string text;
  if (top.share > counters_dominant_stall_share) {
    dominant_found = true;
    facts.push_back({"stall." + top.reason, top.share, "share"});
    text = "dominant stall: " + label(top.reason) + " " + pct_text(100 * top.share) + " of the warp samples" +
           (top.meaning.empty() ? std::string() : " (" + top.meaning + ")");
  } else {
    text = "top stalls: ";
    for (std::size_t i = 0; i < stalls.size() && i < 2; ++i) {
      facts.push_back({"stall." + stalls[i].reason, stalls[i].share, "share"});
      text += (i ? ", " : "") + label(stalls[i].reason) + " " + pct_text(100 * stalls[i].share);
    }
    text += " (no reason holds half the samples)";
  }
  // What a reason does not prove.
  if (top.reason == "long_scoreboard" && mem.value < t.at_roof_pct)
    text += "; long scoreboard is waiting on memory results, not proof of saturation: memory throughput is " +
            pct_text(mem.value) + ", so memory latency with too few loads in flight, or local-memory spills";
  else if (top.reason == "not_selected")
    text += "; not selected means ready warps waited for a busy scheduler: there were eligible warps to spare, "
            "nothing to remove";
  return text;
}

KSCOPE_DECL finding memory_finding(const classification_input& in, const classification_thresholds& t,
                                   const evidence& sm, const evidence& mem, bool beside_tensor_roof,
                                   std::vector<std::string>& missing) {
  finding f;
  f.kind = bottleneck::memory;
  f.facts = {mem, sm};
  // The limiting level: the highest per-level throughput %, else bytes against the level's
  // bandwidth roof.
  struct level_candidate {
    memory_level level;
    counter_metric pct;
  };
  static constexpr level_candidate levels[] = {{memory_level::dram, counter_metric::dram_throughput},
                                               {memory_level::l2, counter_metric::l2_throughput},
                                               {memory_level::l1, counter_metric::l1_throughput}};
  // The top unit: the highest measured level. Except that every DRAM byte also passes
  // through L2 (and, for loads, L1), whose throughput counts those fills and its own tag
  // lookups: a streaming copy on an H200 read lts__throughput 72 % beside DRAM's 63 %, and
  // DRAM is its limit. So DRAM at its roof stays the limit while the level above reads
  // within a quarter of it; an L2 or L1 figure further ahead (or DRAM under its roof, as a
  // stencil's 46 % beside L2's 66 %) names that level.
  std::optional<evidence> best, dram;
  memory_level best_level = memory_level::dram;
  for (const level_candidate& c : levels) {
    const auto e = counter_evidence(in.counters, c.pct);
    if (!e) continue;
    if (c.level == memory_level::dram) dram = e;
    if (!best || e->value > best->value) {
      best = e;
      best_level = c.level;
    }
  }
  if (best && dram && best_level != memory_level::dram &&
      dram_explains_level(dram->value, best->value, t.at_roof_pct)) {
    best = dram;
    best_level = memory_level::dram;
  }
  std::string level_text;
  if (best) {
    f.where = to_string(best_level);
    f.facts.push_back(*best);
    level_text = f.where + " at " + pct_text(best->value) + " of its peak (" + counter_fact_text(*best) + ")";
  } else if (in.roofs) {
    const measured_roofline m = measure_roofline(in.counters, &*in.roofs);
    const level_point* top = nullptr;
    for (const level_point& p : m.levels)
      if (!std::isnan(p.fraction_of_bandwidth) && (!top || p.fraction_of_bandwidth > top->fraction_of_bandwidth))
        top = &p;
    if (top) {
      f.where = to_string(top->level);
      f.facts.push_back({std::string("measured.") + to_string(top->level) + "_bytes_per_s", top->bytes_per_s, "B/s"});
      level_text = f.where + " at " + pct_text(100 * top->fraction_of_bandwidth) + " of its bandwidth roof (" +
                   format_si(top->bytes_per_s, "B/s") + " of " + format_si(top->roof_bytes_per_s, "B/s") + ")";
      best_level = top->level;
    }
  }
  if (f.where.empty()) {
    missing.push_back("per-level throughput (dram__/lts__/l1tex__throughput) or bandwidth roofs: which memory level "
                      "is the limit is unknown");
    f.text = "memory-bound: memory throughput " + pct_text(mem.value) + " of peak (" + counter_fact_text(mem) +
             "), SM throughput " + pct_text(sm.value) + "; the limiting level was not measured";
    return f;
  }
  if (beside_tensor_roof && best_level != memory_level::dram) {
    // The tensor pipe is at its roof: the on-chip traffic is what feeds the MMAs.
    f.text = "memory traffic beside the tensor roof: " + level_text +
             ": the operand traffic of the tensor-core MMAs (shared memory / " + f.where +
             " feeding the tensor pipe), expected for a kernel at the tensor roof, not a separate limit";
    return f;
  }
  f.text = "memory-bound: " + level_text + "; memory throughput " + pct_text(mem.value) + ", SM throughput " +
           pct_text(sm.value) + " of peak: " + level_advice(best_level);
  bool dominant = false;
  if (const std::string stalls = stall_text(in, mem, t, f.facts, dominant); !stalls.empty()) f.text += "; " + stalls;
  return f;
}

KSCOPE_DECL finding compute_finding(const classification_input& in, const classification_thresholds& t,
                               const evidence& sm, const evidence& mem, std::vector<std::string>& missing) {
  finding f;
  f.kind = bottleneck::compute;
  f.facts = {sm, mem};
  std::string pipe_text;
  // 1. Measured pipe utilisation: the busiest pipe.
  struct pipe {
    counter_metric id;
    const char* name;
  };
  static constexpr pipe pipes[] = {{counter_metric::tensor_pipe_active, "tensor pipe"},
                                   {counter_metric::fma_pipe_active, "FMA pipe"},
                                   {counter_metric::alu_pipe_active, "ALU pipe"},
                                   {counter_metric::fp64_pipe_active, "FP64 pipe"},
                                   {counter_metric::lsu_pipe_active, "load/store pipe"}};
  std::optional<evidence> busiest;
  const char* busiest_name = "";
  std::size_t pipes_measured = 0;
  for (const pipe& p : pipes) {
    const auto e = counter_evidence(in.counters, p.id);
    if (!e) continue;
    ++pipes_measured;
    if (!busiest || e->value > busiest->value) {
      busiest = e;
      busiest_name = p.name;
    }
  }
  const std::optional<evidence> tensor = counter_evidence(in.counters, counter_metric::tensor_pipe_active);
  const bool tensor_at_roof = tensor && tensor->value >= t.at_roof_pct;
  if (tensor_at_roof) {
    f.where = "tensor pipe";
    f.facts.push_back(*tensor);
    pipe_text = "tensor pipe busy " + pct_text(tensor->value) + " of its peak (" + counter_fact_text(*tensor) + ")";
  } else if (pipes_measured > 1 && busiest) {
    f.where = busiest_name;
    f.facts.push_back(*busiest);
    pipe_text = "busiest pipe: " + f.where + " " + pct_text(busiest->value) + " (" + counter_fact_text(*busiest) + ")";
  } else if (tensor && tensor->value >= t.busy_pipe_pct) {
    f.where = "tensor pipe";
    f.facts.push_back(*tensor);
    pipe_text = "tensor pipe busy " + pct_text(tensor->value) + " (" + counter_fact_text(*tensor) + ")";
  } else {
    // 2. The FP instruction mix: the precision with the most FLOPs names the pipe.
    const flop_count flops = count_flops(in.counters);
    if (tensor) f.facts.push_back(*tensor);
    if (!std::isnan(flops.total) && !flops.precisions.empty()) {
      const data_type top = flops.precisions.front();
      const precision_flops& p = flops.of(top);
      f.where = std::string(top == data_type::fp64 ? "FP64" : top == data_type::fp32 ? "FP32" : "FP16") + " pipe";
      const counter_metric fma_id = top == data_type::fp64   ? counter_metric::fp64_fma
                                    : top == data_type::fp32 ? counter_metric::fp32_fma
                                                             : counter_metric::fp16_fma;
      f.facts.push_back({std::string(collected_name(in.counters, fma_id)), p.fmas, "thread instructions"});
      pipe_text = "busy pipe by the instruction mix: " + f.where + " (" + std::string(to_string(top)) + " " +
                  format_fixed(100 * p.flops / flops.total, 0) + "% of " + format_si(flops.total, "FLOP") +
                  "; pipe utilisation not measured)";
    } else if (!std::isnan(flops.total)) {
      f.where = "non-FP pipes";
      pipe_text = "no FP instructions executed: the busy pipe is integer, load/store or control (pipe utilisation "
                  "not measured)";
    } else {
      missing.push_back("FP instruction counts or pipe utilisation: which pipe is busy is unknown");
      pipe_text = "the busy pipe was not measured";
    }
  }
  f.text = "compute-bound: SM throughput " + pct_text(sm.value) + " of peak (" + counter_fact_text(sm) +
           "), memory " + pct_text(mem.value) + "; " + pipe_text +
           (f.where == "tensor pipe" ? std::string(": the tensor cores are the limit; fewer or cheaper MMAs (a lower "
                                                   "precision, no padded tiles) are what is left")
                                     : std::string(": do fewer operations or use a faster path (lower precision, "
                                                   "tensor cores)"));
  bool dominant = false;
  if (const std::string stalls = stall_text(in, mem, t, f.facts, dominant); !stalls.empty()) f.text += "; " + stalls;
  return f;
}

KSCOPE_DECL finding latency_finding(const classification_input& in, const classification_thresholds& t,
                               const evidence& sm, const evidence& mem, std::vector<std::string>& missing) {
  finding f;
  f.kind = bottleneck::latency;
  f.facts = {sm, mem};
  std::vector<std::string> reasons;
  if (const auto occ = counter_evidence(in.counters, counter_metric::achieved_occupancy)) {
    f.facts.push_back(*occ);
    if (occ->value < t.low_occupancy_pct)
      reasons.push_back("achieved occupancy " + pct_text(occ->value) + " (" + counter_fact_text(*occ) +
                        "): too few warps to hide memory and instruction latency");
    else
      reasons.push_back("achieved occupancy " + pct_text(occ->value) + " is not low: resident warps stall");
  } else {
    missing.push_back("achieved occupancy (" + std::string(metric_info_of(counter_metric::achieved_occupancy).name()) +
                      ")");
  }
  if (std::isfinite(in.grid_blocks) && in.grid_blocks > 0 && std::isfinite(in.sm_count) && in.sm_count > 0) {
    f.facts.push_back({"launch.grid_blocks", in.grid_blocks, "blocks"});
    f.facts.push_back({"device.sm_count", in.sm_count, "SMs"});
    if (in.grid_blocks < in.sm_count)
      reasons.push_back("grid of " + format_general(in.grid_blocks, 6) + " blocks for " +
                        format_general(in.sm_count, 6) + " SMs: " + format_general(in.sm_count - in.grid_blocks, 6) +
                        " SMs have no work");
    else
      reasons.push_back("grid of " + format_general(in.grid_blocks, 6) + " blocks (" +
                        format_general(in.grid_blocks / in.sm_count, 3) + " per SM) fills the SMs");
  } else {
    missing.push_back("grid size and SM count (launch.grid_blocks, device.sm_count)");
  }
  if (const auto issue = counter_evidence(in.counters, counter_metric::issue_active)) {
    f.facts.push_back(*issue);
    reasons.push_back("the schedulers issued in " + pct_text(issue->value) + " of active cycles (" +
                      counter_fact_text(*issue) + ")");
  }
  bool dominant = false;
  if (std::string stalls = stall_text(in, mem, t, f.facts, dominant); !stalls.empty()) {
    // The dominant stall is the cause: it goes first, before occupancy and grid.
    if (dominant) reasons.insert(reasons.begin(), std::move(stalls));
    else reasons.push_back(std::move(stalls));
  } else {
    missing.push_back("warp stall reasons (PC sampling: kscope::profile_warp_stalls)");
  }
  f.text = "latency-bound: SM throughput " + pct_text(sm.value) + " and memory throughput " + pct_text(mem.value) +
           " of peak, both under " + pct_text(t.at_roof_pct) + " (" + counter_fact_text(sm) + ", " +
           counter_fact_text(mem) + ")";
  if (reasons.empty()) {
    f.text += "; no evidence of why: occupancy, grid size and stall reasons were not given";
  } else {
    for (const std::string& r : reasons) f.text += "; " + r;
  }
  return f;
}

KSCOPE_DECL std::optional<evidence> busiest_unit(const metric_values& values, std::initializer_list<counter_metric> units,
                                            counter_metric rollup, std::vector<std::string>& missing) {
  std::optional<evidence> best;
  for (counter_metric id : units) {
    const auto e = counter_evidence(values, id);
    if (e && (!best || e->value > best->value)) best = e;
  }
  if (best)
    missing.push_back(std::string(metric_info_of(rollup).name()) + " not measured: the busiest measured unit (" +
                      best->metric + ") stands in for it, a lower bound");
  return best;
}

KSCOPE_DECL finding classify_kernels(const classification_input& in, const classification_thresholds& t,
                                std::vector<finding>& also, std::vector<std::string>& missing) {
  auto sm = counter_evidence(in.counters, counter_metric::sm_throughput);
  auto mem = counter_evidence(in.counters, counter_metric::memory_throughput);
  // A stand-in is a lower bound of its rollup: it can show a unit at the roof, never that
  // every unit is under it.
  const bool sm_exact = sm.has_value(), mem_exact = mem.has_value();
  if (!sm)
    sm = busiest_unit(in.counters,
                      {counter_metric::issue_active, counter_metric::tensor_pipe_active, counter_metric::fma_pipe_active,
                       counter_metric::alu_pipe_active, counter_metric::fp64_pipe_active, counter_metric::lsu_pipe_active},
                      counter_metric::sm_throughput, missing);
  if (!mem)
    mem = busiest_unit(in.counters,
                       {counter_metric::dram_throughput, counter_metric::l2_throughput, counter_metric::l1_throughput},
                       counter_metric::memory_throughput, missing);
  if (!sm || !mem) {
    finding f;
    std::string names;
    for (counter_metric id : {counter_metric::sm_throughput, counter_metric::memory_throughput}) {
      if (counter_evidence(in.counters, id)) continue;
      const std::string name(metric_info_of(id).name());
      missing.push_back(name + ": needed to tell compute-, memory- and latency-bound apart");
      names += (names.empty() ? "" : " and ") + name;
    }
    f.text = "undetermined: " + names + " not measured (or not a valid percentage); no kernel-level verdict";
    for (const auto& e : {sm, mem})
      if (e) f.facts.push_back(*e);
    return f;
  }
  // The top units: a rollup that reads under one of its measured units is raised to it.
  const evidence mem_top = top_unit(in.counters, *mem,
                                    {counter_metric::dram_throughput, counter_metric::l2_throughput,
                                     counter_metric::l1_throughput});
  const evidence sm_top = top_unit(in.counters, *sm,
                                   {counter_metric::tensor_pipe_active, counter_metric::fma_pipe_active,
                                    counter_metric::alu_pipe_active, counter_metric::fp64_pipe_active,
                                    counter_metric::lsu_pipe_active});
  const auto tensor = counter_evidence(in.counters, counter_metric::tensor_pipe_active);
  const bool tensor_at_roof = tensor && tensor->value >= t.at_roof_pct;
  const bool memory_at_roof = mem_top.value >= t.at_roof_pct;
  const bool compute_at_roof = sm_top.value >= t.at_roof_pct;
  if (!memory_at_roof && !compute_at_roof) {
    if (sm_exact && mem_exact) return latency_finding(in, t, sm_top, mem_top, missing);
    // Under the roof as far as lower bounds show: the unmeasured rollup may be at it (a
    // transpose read lts__t_sectors 26 % where lts__throughput was 86 %).
    finding f;
    std::string names;
    for (counter_metric id : {counter_metric::sm_throughput, counter_metric::memory_throughput})
      if (!counter_evidence(in.counters, id)) names += (names.empty() ? "" : " and ") + std::string(metric_info_of(id).name());
    f.facts = {sm_top, mem_top};
    f.text = "undetermined: the measured units are under the roof (SM " + detail::pct_text(sm_top.value) + ", " +
             detail::counter_fact_text(sm_top) + "; memory " + detail::pct_text(mem_top.value) + ", " +
             detail::counter_fact_text(mem_top) + "), but " + names +
             " was not measured, and the stand-ins are lower bounds: not latency-bound unless it is measured";
    missing.push_back(names + ": needed to conclude latency-bound (the stand-ins only bound it from below)");
    return f;
  }
  if (tensor_at_roof) {
    // A tensor pipe near its peak is the limit of an MMA kernel, whatever L1 reads.
    if (memory_at_roof) also.push_back(memory_finding(in, t, sm_top, mem_top, true, missing));
    return compute_finding(in, t, sm_top, mem_top, missing);
  }
  if (mem_top.value >= sm_top.value) {
    if (compute_at_roof) also.push_back(compute_finding(in, t, sm_top, mem_top, missing));
    return memory_finding(in, t, sm_top, mem_top, false, missing);
  }
  if (memory_at_roof) also.push_back(memory_finding(in, t, sm_top, mem_top, false, missing));
  return compute_finding(in, t, sm_top, mem_top, missing);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Classifies a scope or kernel from evidence (rules at the top of this header). Never
// guesses: a verdict whose evidence is missing is `undetermined`, and `missing` names it.
//   kscope::classification_input in{totals};
//   in.span_ns = 100e3; in.gpu_busy_ns = 20e3;
//   kscope::classification c = kscope::classify(in);
//   // c.verdict.kind == launch, c.also[0]: the kernels' own verdict
[[nodiscard]] KSCOPE_DECL classification classify(const classification_input& in,
                                             const classification_thresholds& thresholds = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL classification classify(const classification_input& in,
                                             const classification_thresholds& thresholds) {
  classification out;
  const bool timeline = std::isfinite(in.span_ns) && in.span_ns > 0 && std::isfinite(in.gpu_busy_ns) &&
                        in.gpu_busy_ns >= 0;
  std::vector<finding> kernel_also;
  finding kernels = detail::classify_kernels(in, thresholds, kernel_also, out.missing);
  if (!timeline) {
    out.missing.push_back("the scope's GPU busy time and span per call (CUPTI timeline): launch gaps not checked");
    out.verdict = std::move(kernels);
    out.also = std::move(kernel_also);
    return out;
  }
  const double busy_share = std::min(1.0, in.gpu_busy_ns / in.span_ns);
  const double idle_share = 1 - busy_share;
  const std::vector<evidence> timeline_facts = {{"timeline.gpu_idle_share", idle_share, "share"},
                                                {"timeline.gpu_busy_ns", in.gpu_busy_ns, "ns"},
                                                {"timeline.span_ns", in.span_ns, "ns"}};
  if (idle_share >= thresholds.launch_idle_share) {
    out.verdict.kind = bottleneck::launch;
    out.verdict.facts = timeline_facts;
    out.verdict.text = "launch/CPU-bound: GPU idle " + detail::pct_text(100 * idle_share) +
                       " of the scope's span (GPU busy " + detail::format_si(in.gpu_busy_ns * 1e-9, "s") + " of " +
                       detail::format_si(in.span_ns * 1e-9, "s") +
                       " per call): check CPU gaps between launches, synchronizations and host work inside the scope "
                       "(CUDA graphs, fewer synchronizations, asynchronous copies)";
    out.also.push_back(std::move(kernels));
    for (finding& f : kernel_also) out.also.push_back(std::move(f));
    return out;
  }
  // The GPU was busy: the time is inside the kernels; say so beside the kernel verdict.
  kernels.facts.insert(kernels.facts.end(), timeline_facts.begin(), timeline_facts.end());
  if (kernels.kind == bottleneck::latency)
    kernels.text += "; GPU busy " + detail::pct_text(100 * busy_share) + " of the span: the time is inside the kernels";
  out.verdict = std::move(kernels);
  out.also = std::move(kernel_also);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
