// kscope/evidence/breakdown.hpp — a rollup metric as the parts it is made of, so that a
// program that gets one counter pass per call (per-scope counters, counters/scope_counters.hpp)
// still measures the speed-of-light throughputs the bench's .counters() measure.
//
// Why: sm__throughput, gpu__compute_memory_throughput, lts__throughput and l1tex__throughput
// need 4 to 19 replay passes alone on GH100, and a running program's call runs once. Each of
// these rollups is by definition the busiest of its parts (Nsight Compute's "breakdown" of the
// metric), and most parts fit one pass. So each part is measured in some call (the one-pass
// groups rotate over a scope's calls) and the rollup is put back together per kernel: the
// maximum of its parts at each kernel position of the call, then the kernel-time-weighted
// mean over the positions, the bench's aggregation (evidence/metrics.hpp, counter_aggregate).
// The tensor pipe's FLOPs per source type work the same way with a sum: the fp16 count
// (2 passes alone on GH100) is the HMMA counts (per destination type) plus the HGMMA count.
// A part that does not fit one pass on the device leaves its rollup unmeasured (a note
// says which): on an H100, sm__throughput (2 of 25 parts) and the memory and L1 rollups
// (l1tex__lsu_writeback_active) stay so, and their lower-bound stand-ins say so.
//
// The parts are those Nsight Compute 2025 lists for GH100 (`ncu --metrics breakdown:<name>`,
// run on an H100 by this project; bench/RESULTS.md). On another chip the table has no entry,
// and a rollup that needs several passes stays unmeasured per scope (its one-pass stand-in
// is a lower bound, and the classification says so).
#pragma once

#include "../core/config.hpp"
#include "../core/detail/once.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kscope {

// How the parts make the whole: a throughput is its busiest part, a count the sum of its
// parts.
enum class breakdown_combine : std::uint8_t { busiest, sum };

struct metric_breakdown {
  std::string rollup;             // the metric's full name
  breakdown_combine combine = breakdown_combine::busiest;
  std::string chip;               // the chip whose breakdown this is ("GH100")
  std::vector<std::string> parts; // full metric names
};

// Every breakdown kscope knows.
[[nodiscard]] KSCOPE_DECL const std::vector<metric_breakdown>& metric_breakdowns();

// The breakdown of `rollup` on `chip`, or nullptr.
//   if (auto* b = kscope::find_breakdown("lts__throughput.avg.pct_of_peak_sustained_elapsed", "GH100")) ...
[[nodiscard]] KSCOPE_DECL const metric_breakdown* find_breakdown(std::string_view rollup, std::string_view chip);

// Whether `name` is a part of some breakdown combined as the busiest part (those are kept
// per kernel position by counter_aggregate).
[[nodiscard]] KSCOPE_DECL bool is_busiest_part(std::string_view name);

#if KSCOPE_DETAIL_DEFINITIONS
namespace detail {
inline std::vector<std::string> with_suffix(std::initializer_list<std::string_view> bases, std::string_view suffix) {
  std::vector<std::string> out;
  out.reserve(bases.size());
  for (std::string_view b : bases) out.push_back(std::string(b) + std::string(suffix));
  return out;
}
}  // namespace detail

KSCOPE_DECL const std::vector<metric_breakdown>& metric_breakdowns() {
  // Kept by a lazy_global, not a function-local static (core/detail/once.hpp: a fork never
  // catches its guard held).
  static detail::lazy_global<const std::vector<metric_breakdown>> kept{detail::lock_rank::init};
  if (const std::vector<metric_breakdown>* built = kept.get_if_built()) return *built;
  constexpr std::string_view elapsed = ".avg.pct_of_peak_sustained_elapsed";
  constexpr std::string_view active = ".avg.pct_of_peak_sustained_active";
  using b = breakdown_combine;
  const std::initializer_list<std::string_view> l1tex_units = {
      "l1tex__data_bank_reads", "l1tex__data_bank_writes", "l1tex__data_pipe_lsu_wavefronts",
      "l1tex__data_pipe_tex_wavefronts", "l1tex__f_wavefronts", "l1tex__lsu_writeback_active",
      "l1tex__lsuin_requests", "l1tex__m_l1tex2xbar_req_cycles_active", "l1tex__m_xbar2l1tex_read_sectors",
      "l1tex__m_xbar2l1tex_read_sectors_mem_dshared", "l1tex__tex_writeback_active",
      "l1tex__texin_sm2tex_req_cycles_active", "l1tex__tmain_requests"};
  std::vector<std::string> memory = detail::with_suffix(
      {"dram__cycles_active", "fbpa__dram_sectors", "gpu__compute_memory_access_throughput_internal_activity",
       "gpu__compute_memory_request_throughput_internal_activity", "lts__d_atomic_input_cycles_active",
       "lts__d_decomp_input_sectors", "lts__d_sectors", "lts__d_sectors_fill_device", "lts__d_sectors_fill_sysmem",
       "lts__lts2xbar_cycles_active", "lts__t_sectors", "lts__t_tag_requests", "lts__xbar2lts_cycles_active"},
      elapsed);
  for (std::string& l1 : detail::with_suffix(l1tex_units, elapsed)) memory.push_back(std::move(l1));
  std::vector<metric_breakdown> table = {
      {"sm__throughput.avg.pct_of_peak_sustained_elapsed", b::busiest, "GH100",
       detail::with_suffix(
           {"idc__request_cycles_active", "sm__inst_executed", "sm__inst_executed_pipe_adu",
            "sm__inst_executed_pipe_cbu_pred_on_any", "sm__inst_executed_pipe_ipa", "sm__inst_executed_pipe_lsu",
            "sm__inst_executed_pipe_tex", "sm__inst_executed_pipe_uniform", "sm__inst_executed_pipe_xu",
            "sm__instruction_throughput_internal_activity", "sm__issue_active",
            "sm__memory_throughput_internal_activity", "sm__mio2rf_writeback_active", "sm__mio_inst_issued",
            "sm__mio_pq_read_cycles_active", "sm__mio_pq_write_cycles_active", "sm__pipe_alu_cycles_active",
            "sm__pipe_fma_cycles_active", "sm__pipe_fmaheavy_cycles_active", "sm__pipe_fp64_cycles_active",
            "sm__pipe_shared_cycles_active", "sm__pipe_tensor_cycles_active", "sm__pipe_tensor_op_dmma_cycles_active",
            "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active", "sm__pipe_tma_cycles_active"},
           elapsed)},
      {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", b::busiest, "GH100", std::move(memory)},
      {"lts__throughput.avg.pct_of_peak_sustained_elapsed", b::busiest, "GH100",
       detail::with_suffix({"lts__d_atomic_input_cycles_active", "lts__d_decomp_input_sectors", "lts__d_sectors",
                            "lts__d_sectors_fill_device", "lts__d_sectors_fill_sysmem",
                            "lts__ltcfabric2ltc_cycles_active", "lts__lts2xbar_cycles_active_realtime",
                            "lts__t_sectors", "lts__t_tag_requests", "lts__throughput_internal_activity",
                            "lts__xbar2lts_cycles_active"},
                           elapsed)},
      {"l1tex__throughput.avg.pct_of_peak_sustained_active", b::busiest, "GH100",
       detail::with_suffix(l1tex_units, active)},
      // The HMMA count with fp16 sources needs 2 passes alone on GH100 (an H100, CUDA 13.0);
      // its two destination types one each.
      {"sm__ops_path_tensor_src_fp16.sum", b::sum, "GH100",
       {"sm__ops_path_tensor_op_hmma_src_fp16_dst_fp16.sum", "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32.sum",
        "sm__ops_path_tensor_op_hgmma_src_fp16.sum"}},
      {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", b::sum, "GH100",
       {"sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum"}},
      {"sm__ops_path_tensor_src_tf32_dst_fp32.sum", b::sum, "GH100",
       {"sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum"}},
  };
  // Two first callers may both build it; one copy is kept (as the catalog).
  return kept.get([&table] { return new std::vector<metric_breakdown>(std::move(table)); });
}

KSCOPE_DECL const metric_breakdown* find_breakdown(std::string_view rollup, std::string_view chip) {
  for (const metric_breakdown& b : metric_breakdowns())
    if (b.rollup == rollup && b.chip == chip) return &b;
  return nullptr;
}

KSCOPE_DECL bool is_busiest_part(std::string_view name) {
  for (const metric_breakdown& b : metric_breakdowns()) {
    if (b.combine != breakdown_combine::busiest) continue;
    for (const std::string& p : b.parts)
      if (p == name) return true;
  }
  return false;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
