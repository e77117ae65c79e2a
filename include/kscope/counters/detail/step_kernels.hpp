// kscope/counters/detail/step_kernels.hpp — which scope each kernel of a profiled step
// belongs to: the step's per-kernel ranges paired with the launches the launch callback
// noted (scope/detail/counter_hook.hpp's profiled_step_log), and the calls of the scopes
// nested in the step. Pure, so the rules are tested without a GPU.
//
// Range i is launch i only when nothing can have shifted them: as many launches noted as
// ranges, none of them a CUDA-graph launch (one call, many kernels), all from the step's
// own thread (another thread's kernels interleave with the step's in an order the host
// does not know), all read whole, and none beyond what the log holds. Otherwise why says
// so in words, and the step is not split (scope_counters.hpp decides what it then counts).
#pragma once

#include "../../core/config.hpp"
#include "../../evidence/metrics.hpp"
#include "../../scope/node_id.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kscope {
namespace detail {

// One kernel launch noted during a profiled step.
struct step_launch {
  node_id node = 0;           // the innermost scope open on the launching thread
  std::uint32_t thread = 0;   // the launching thread's index (thread_state::thread_index)
  bool graph = false;         // a CUDA-graph launch
  bool unread = false;        // its slot was taken but not yet written when the step ended
};

struct step_kernel_pairing {
  // Each range's scope, in range order (the step's own node for a launch outside any
  // scope); empty when the ranges could not be paired with the launches.
  std::vector<node_id> kernel_scopes;
  // Why not, when not: one of a few fixed phrases (no counts), so that a note repeated over
  // steps is said once.
  std::string why_not;
};

// `launches_total`: every launch noted, also those past the log's capacity (`launches` holds
// the first ones).
[[nodiscard]] KSCOPE_DECL step_kernel_pairing pair_step_kernels(node_id step, std::uint32_t step_thread,
                                                              std::size_t ranges,
                                                              const std::vector<step_launch>& launches,
                                                              std::size_t launches_total);

// The calls of each scope in a step: the step itself once, each nested scope as often as it
// was opened inside the step.
[[nodiscard]] KSCOPE_DECL std::map<node_id, std::uint64_t> step_scope_calls(node_id step,
                                                                           const std::vector<node_id>& opens);

// A step profiled one range per scope stretch (scope_counter_options::ranges_per_scope): its
// ranges by the scope each stretch was begun for, or why they cannot be read so.
struct step_stretches {
  std::map<node_id, std::vector<counter_values>> ranges_of;
  std::string why_not;  // empty when the ranges line up with the stretches
};

// `nodes[i]`: the scope stretch i was begun for; `first_launch[i]`: the launches noted when it
// began (stretch i ends where i + 1 begins, the last at `total`); `ranges`: the pass's ranges in
// order. A stretch in which nothing was launched measured nothing of its scope and is left
// out; the L2 write-back the pass added to its last range (dram_write_back_metric) goes to the
// last stretch that launched, when that is an earlier one.
[[nodiscard]] KSCOPE_DECL step_stretches group_step_stretches(const std::vector<node_id>& nodes,
                                                              const std::vector<std::uint32_t>& first_launch,
                                                              std::uint32_t total, std::vector<counter_values> ranges);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL step_stretches group_step_stretches(const std::vector<node_id>& nodes,
                                                const std::vector<std::uint32_t>& first_launch, std::uint32_t total,
                                                std::vector<counter_values> ranges) {
  step_stretches out;
  if (ranges.size() != nodes.size() || first_launch.size() != nodes.size()) {
    out.why_not = std::to_string(ranges.size()) + " ranges came back for " + std::to_string(nodes.size()) +
                  " stretches begun";
    return out;
  }
  std::vector<bool> launched_in(ranges.size());
  std::size_t last_launching = ranges.size();
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const std::uint32_t end = i + 1 < ranges.size() ? first_launch[i + 1] : total;
    launched_in[i] = end > first_launch[i];
    if (launched_in[i]) last_launching = i;
  }
  const std::string write_back(dram_write_back_metric);
  if (!ranges.empty() && last_launching < ranges.size() - 1) {
    const auto moved = ranges.back().values.find(write_back);
    if (moved != ranges.back().values.end()) {
      ranges[last_launching].values[write_back] = moved->second;
      ranges.back().values.erase(moved);
    }
  }
  for (std::size_t i = 0; i < ranges.size(); ++i)
    if (launched_in[i]) out.ranges_of[nodes[i]].push_back(std::move(ranges[i]));
  return out;
}

KSCOPE_DECL step_kernel_pairing pair_step_kernels(node_id step, std::uint32_t step_thread, std::size_t ranges,
                                                  const std::vector<step_launch>& launches,
                                                  std::size_t launches_total) {
  step_kernel_pairing out;
  if (ranges == 0) return out;
  if (launches_total > launches.size()) {
    out.why_not = "more kernel launches than the step's launch log holds";
  } else if (launches_total == 0) {
    out.why_not = "no launch callback saw the step's kernels (the activity collector's callbacks were off, or "
                  "another tool holds CUPTI's callbacks)";
  } else if (launches_total != ranges) {
    out.why_not = "the kernel ranges and the kernel launches seen in the step differ in number";
  }
  for (const step_launch& l : launches) {
    if (!out.why_not.empty()) break;
    if (l.unread)
      out.why_not = "a launch was still being noted when the step ended";
    else if (l.graph)
      out.why_not = "a CUDA graph was launched in the step (one launch, many kernels)";
    else if (l.thread != step_thread)
      out.why_not = "other threads launched kernels during the step (their order against the step's is unknown)";
  }
  if (!out.why_not.empty()) return out;
  out.kernel_scopes.reserve(ranges);
  for (const step_launch& l : launches) out.kernel_scopes.push_back(l.node == root_node ? step : l.node);
  return out;
}

KSCOPE_DECL std::map<node_id, std::uint64_t> step_scope_calls(node_id step, const std::vector<node_id>& opens) {
  std::map<node_id, std::uint64_t> calls;
  calls[step] = 1;
  for (node_id n : opens)
    if (n != step) ++calls[n];
  return calls;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
