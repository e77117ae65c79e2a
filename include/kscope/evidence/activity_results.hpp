// kscope/evidence/activity_results.hpp — what the attribution hands out: GPU activity per node,
// the top-kernels table, counters and recent events.
//
// Plain data (no CUDA, no CUPTI, no attribution machinery), so the report and trace
// writers and the session can read results without the code that produced them:
//
//   kscope::gpu_activity_report r = attribution.report();
//   if (const kscope::node_gpu_activity* gpu = r.find(node))
//     std::printf("%llu kernels, busy %lld ns\n", gpu->kernel_count, gpu->busy_ns);
#pragma once

#include "../core/config.hpp"
#include "activity_records.hpp"
#include "trace_windows.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {

// Per-node device split: a node keeps separate totals for at most this many devices (a
// node's records on further devices still count in the node totals, and in
// attribution_counters::devices_over_cap). 64 covers the largest single-host systems.
inline constexpr std::size_t max_devices_per_node = 64;

// One device's share of a node's kernels.
//
//   for (const kscope::device_gpu_activity& d : activity.devices)
//     std::printf("GPU %u: %llu kernels, busy %lld ns\n", d.device, d.kernel_count, d.busy_ns);
struct device_gpu_activity {
  std::uint32_t device = 0;          // CUDA device ordinal as CUPTI reports it
  std::uint64_t kernel_count = 0;    // all kernels on this device, communication included
  std::int64_t kernel_ns = 0;        // sum of their durations
  std::int64_t busy_ns = 0;          // union of their intervals on this device
  std::uint64_t comm_kernel_count = 0;  // of which NCCL kernels
  std::int64_t comm_ns = 0;
};

// A node's graph-replayed work split by capture-time scope holds at most this many
// scopes; records built in further scopes still count in the node totals, and in
// attribution_counters::graph_capture_over_cap.
inline constexpr std::size_t max_capture_origins_per_node = 16;

// Work a scope replayed through a CUDA graph that was BUILT in another scope: the graph's
// nodes were captured (or added, or instantiated from nodes captured) while
// `captured_in` was open. The records stay attributed to the launch-time scope; this only
// says which phase built them, so a replay shows where its kernels came from.
//
//   for (const kscope::graph_capture_origin& o : activity.graph_capture)
//     std::printf("%llu kernels built in node %u\n", o.kernel_count, o.captured_in);
struct graph_capture_origin {
  node_id captured_in = 0;
  std::uint64_t kernel_count = 0;
  std::int64_t kernel_ns = 0;     // sum of their durations
  std::uint64_t copy_count = 0;   // memcpy and memset nodes
  std::int64_t copy_ns = 0;
};

// Copies in one direction, for one node.
struct copy_totals {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
  std::int64_t ns = 0;  // sum of copy durations
};

// Host waits for the GPU in one node: event, stream and context synchronizes called while
// it was open (CUPTI synchronization records). Host time, not GPU work: it never enters
// the node's span, busy or idle. A blocking cudaMemcpy is a copy, not counted here.
struct host_sync_totals {
  std::uint64_t count = 0;
  std::int64_t ns = 0;  // sum of the calls' durations: the calling threads' waiting time
  std::uint64_t stream = 0, event = 0, context = 0;  // count by kind
};

// GPU work attributed to one node: EXCLUSIVE of its children (the node open on the
// launching thread gets the record, never its parents); the session adds children up for
// inclusive views.
//
//   for (auto& [node, gpu] : report.nodes)
//     std::printf("%u: %llu kernels, busy %lld ns\n", node, gpu.kernel_count, gpu.busy_ns);
struct node_gpu_activity {
  std::uint64_t kernel_count = 0;
  std::int64_t kernel_ns = 0;  // sum of kernel durations (overlapping kernels count twice)
  std::int64_t busy_ns = 0;    // union of kernel intervals over all streams and devices
  // Time inside [first_start_ns, last_end_ns] with none of this node's kernels, copies or
  // memsets running. For a node executed many times the span covers all executions, so
  // this includes the time between them.
  std::int64_t idle_ns = 0;
  std::int64_t first_start_ns = 0;  // over kernels, copies and memsets; 0 when none
  std::int64_t last_end_ns = 0;
  std::array<copy_totals, copy_direction_count> memcpy{};  // index: copy_direction
  copy_totals memset{};
  // Of the copies above, those with a side in pageable host memory (CUPTI's srcKind or
  // dstKind PAGEABLE), by direction: staged by the driver through a pinned buffer, and
  // synchronous for the host whatever API issued them.
  std::array<copy_totals, copy_direction_count> memcpy_pageable{};
  // Of the copies above, those issued by the synchronous API (cudaMemcpy: CUPTI's async
  // flag absent) that are NOT in memcpy_pageable, so that no copy counts in both; and the
  // memsets issued by the synchronous API (cudaMemset). Graph nodes are never counted.
  copy_totals memcpy_sync{};
  copy_totals memset_sync{};
  host_sync_totals host_sync{};  // host waits in this node (not GPU work)

  // Communication (NCCL kernels, see is_communication_kernel) as a SUBSET of the kernel
  // totals above: compute = kernel - comm. The unions are taken separately, so
  // comm_busy_ns + compute_busy_ns - busy_ns is the time communication overlapped compute.
  std::uint64_t comm_kernel_count = 0;
  std::int64_t comm_ns = 0;
  std::int64_t comm_busy_ns = 0;     // union of the NCCL kernel intervals
  std::int64_t compute_busy_ns = 0;  // union of the other kernel intervals

  // Per-device split of the kernels, sorted by device ordinal (at most
  // max_devices_per_node entries). Empty when the node ran no kernels.
  std::vector<device_gpu_activity> devices;

  // This node's CUDA-graph records whose nodes were built in ANOTHER scope, one entry per
  // capture-time scope (at most max_capture_origins_per_node), most kernel time first.
  // Empty when the node replayed no graph built elsewhere, or when the capture was not
  // seen (attribution_counters::graph_capture_unknown).
  std::vector<graph_capture_origin> graph_capture;

  // CUDA-graph replays launched from this node, and how they were traced (cupti_options::
  // graphs). A replay traced node by node gave one record per kernel, counted exactly
  // above; a replay traced as one record (graph-level trace) gave its span only, and its
  // kernels are SCALED from the node-level replays of the same graph: kernels per replay,
  // kernel time and busy time per span ns. kernel_count, kernel_ns, busy_ns and
  // compute_busy_ns include those estimates; the scaled_* fields say how much of each is
  // estimated, so exact = total - scaled. A graph with no node-level replay yet counts its
  // spans as busy and its kernels as unknown (graph_replays_unsampled).
  std::uint64_t graph_replays = 0;          // every replay launched here, both tracings
  std::uint64_t graph_replays_traced = 0;   // of which traced node by node
  std::uint64_t graph_replays_unsampled = 0;  // traced as one record, of a graph never traced per node
  std::int64_t graph_span_ns = 0;           // sum of the spans of the replays traced as one record
  std::uint64_t scaled_kernel_count = 0;    // part of kernel_count estimated from node-level replays
  std::int64_t scaled_kernel_ns = 0;        // part of kernel_ns estimated
  std::int64_t scaled_busy_ns = 0;          // part of busy_ns estimated (or whole spans, unsampled)

  [[nodiscard]] bool graph_scaled() const noexcept;

  [[nodiscard]] std::uint64_t compute_kernel_count() const noexcept;
  [[nodiscard]] std::int64_t compute_ns() const noexcept { return kernel_ns - comm_ns; }
  // The device entry for `device`, or nullptr when this node ran nothing there.
  [[nodiscard]] const device_gpu_activity* find_device(std::uint32_t device) const noexcept;

  [[nodiscard]] const copy_totals& copies(copy_direction d) const noexcept;
  // All pageable copies, every direction together.
  [[nodiscard]] copy_totals pageable_copies() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool node_gpu_activity::graph_scaled() const noexcept { return graph_replays > graph_replays_traced; }

KSCOPE_DECL std::uint64_t node_gpu_activity::compute_kernel_count() const noexcept { return kernel_count - comm_kernel_count; }

KSCOPE_DECL const copy_totals& node_gpu_activity::copies(copy_direction d) const noexcept {
  return memcpy[static_cast<std::size_t>(d)];
}

KSCOPE_DECL copy_totals node_gpu_activity::pageable_copies() const noexcept {
  copy_totals sum;
  for (const copy_totals& c : memcpy_pageable) {
    sum.count += c.count;
    sum.bytes += c.bytes;
    sum.ns += c.ns;
  }
  return sum;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const device_gpu_activity* node_gpu_activity::find_device(std::uint32_t device) const noexcept {
  for (const device_gpu_activity& d : devices)
    if (d.device == device) return &d;
  return nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One row of the top-kernels table (one kernel name), sorted by total GPU time.
//
//   for (const auto& k : report.top_kernels)
//     std::printf("%-40s %6llu %10.3f ms\n", k.name.c_str(), k.calls, k.total_ns / 1e6);
struct kernel_summary {
  std::string name;          // demangled (abi::__cxa_demangle), else the raw name
  std::string mangled_name;  // as CUPTI reported it
  std::uint64_t calls = 0;
  std::int64_t total_ns = 0;
  double median_ns = 0;      // exact up to attribution_options::median_samples calls,
                             // then from a uniform reservoir of that many durations
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  std::array<std::int32_t, 3> grid{};   // launch configuration of the first call
  std::array<std::int32_t, 3> block{};
  std::uint32_t registers_per_thread = 0;
  std::int32_t static_shared_bytes = 0;
  std::int32_t dynamic_shared_bytes = 0;
  bool launch_config_varies = false;  // a later call used another grid/block/smem
  bool communication = false;         // an NCCL kernel (is_communication_kernel)
  // Of calls and total_ns, what was scaled from node-level replays of CUDA graphs for the
  // replays traced as one record (node_gpu_activity::graph_replays says why); median,
  // min and max come from traced calls only.
  std::uint64_t scaled_calls = 0;
  std::int64_t scaled_ns = 0;
  std::uint64_t scaled_from_replays = 0;  // the node-level replays that scaling rests on
};

// What happened to the records: every record is counted exactly once in records_seen and
// then either attributed (to a scope node or to unscoped_node) or dropped with a reason.
//
//   const kscope::attribution_counters& c = report.counters;
//   if (c.unattributed > 0) std::printf("%llu records in (unscoped): launch not seen\n", c.unattributed);
struct attribution_counters {
  std::uint64_t records_seen = 0;            // every record handed to the attribution
  std::uint64_t kernel_records = 0;          // valid kernels attributed
  std::uint64_t memcpy_records = 0;
  std::uint64_t memset_records = 0;
  std::uint64_t sync_records = 0;            // synchronizations (host waits in node host_sync)
  std::uint64_t ignored_records = 0;         // other kinds (API, external correlation, ...)
  std::uint64_t dropped_by_cupti = 0;        // CUPTI had no buffer (cuptiActivityGetNumDroppedRecords)
  std::uint64_t dropped_zero_start = 0;      // start == 0: CUPTI could not time it
  std::uint64_t dropped_end_before_start = 0;
  std::uint64_t dropped_malformed = 0;       // buffer walk stopped on an invalid record
  std::uint64_t unscoped = 0;                // launched (a sync: waited) with no scope open
  std::uint64_t unattributed = 0;            // launch never seen: went to (unscoped)
  std::uint64_t unattributed_evicted = 0;    // ...of which: the table entry was reused
  std::uint64_t busy_intervals_clipped = 0;  // arrived after their time was folded
  std::uint64_t recent_overwritten = 0;      // trace ring wrapped: oldest events replaced
  // The latest end of an event the ring replaced (0: none). The ring is in arrival order and
  // CUPTI delivers buffers out of time order across streams, so the oldest event it still
  // holds does not say what it lost: only after this time does it hold every event it got.
  std::int64_t recent_overwritten_end_ns = 0;
  std::uint64_t distinct_kernels_over_cap = 0;  // calls folded into "(other kernels)"
  std::uint64_t nodes_over_cap = 0;          // records of nodes past max_nodes -> (unscoped)
  std::uint64_t devices_over_cap = 0;        // kernels on a node's 65th+ device: no device split
  // CUDA graphs (activity/graph_nodes.hpp): records launched by a graph, and what their capture
  // lookup found. graph_records = same scope + built_elsewhere + unknown.
  std::uint64_t graph_records = 0;           // kernels, copies, memsets with a graph node id
  std::uint64_t graph_built_elsewhere = 0;   // capture-time scope known, not the launch's: in graph_capture
  std::uint64_t graph_capture_unknown = 0;   // the node's creation was not seen: no capture-time scope
  std::uint64_t graph_capture_over_cap = 0;  // ...of built_elsewhere: past max_capture_origins_per_node scopes
  std::uint64_t graph_nodes_evicted = 0;     // graph-node table entries replaced (table full)
  // Launched inside a call the per-scope counters profiled: replayed, so kept out.
  std::uint64_t profiled_records = 0;
  // CUDA-graph replays: traced as one record (graph-level trace), traced node by node
  // (distinct launches among the graph records above), and replays of graphs past the
  // per-node graph cap (counted in their node, not scaled).
  std::uint64_t graph_launch_records = 0;
  std::uint64_t graph_replays_traced = 0;
  std::uint64_t graphs_over_cap = 0;
  // Node-level replays traced while graph-level trace was on (gpu_attribution::
  // set_graph_level_trace): moved back by CUPTI's timestamp offset (retimed), counted with
  // no replay traced as one record to check them against (unchecked), and still waiting for
  // one at report time (held: in no figure yet), and those that lost kernel records
  // (incomplete: counted as one record of the graph's usual span).
  std::uint64_t graph_replays_retimed = 0;
  std::uint64_t graph_replays_incomplete = 0;
  std::uint64_t graph_replays_unchecked = 0;
  std::uint64_t graph_replays_held = 0;
  // Node-level replays of graphs CUPTI never traces as one record (built before the collector
  // started, or while graph-level trace was off): counted as they came, with no reference
  // span to check their timestamps against.
  std::uint64_t graph_replays_unreferenced = 0;
};

// One GPU record kept for the trace (report/trace.hpp), on kscope's clock: the record's header
// (launch, place, time) plus who launched it and what it was.
// `name` points into storage owned by the gpu_attribution that produced the event (kernel
// names are kept for its whole life), or to a string literal.
//
//   for (const kscope::gpu_activity_event& e : report.recent)
//     if (e.kind == kscope::activity_kind::kernel) std::printf("%.*s\n", int(e.name.size()), e.name.data());
struct gpu_activity_event : activity_header {
  activity_kind kind = activity_kind::kernel;
  node_id node = unscoped_node;
  std::uint32_t thread_index = unknown_thread;  // launching thread
  std::string_view name;  // mangled kernel name, or "Memcpy HtoD" / "Memset"
  memcpy_kind copy_kind = memcpy_kind::unknown;
  std::uint64_t bytes = 0;
  std::array<std::int32_t, 3> grid{};
  std::array<std::int32_t, 3> block{};
};

// Everything the session reads at report time.
struct gpu_activity_report {
  std::vector<std::pair<node_id, node_gpu_activity>> nodes;  // sorted by node id
  std::vector<kernel_summary> top_kernels;                    // by total_ns, descending
  attribution_counters counters;
  std::vector<gpu_activity_event> recent;                     // oldest first
  std::vector<std::string> warnings;                          // one line per problem
  std::size_t memory_bytes = 0;                               // held by the attribution
  // Tracing in windows (cupti_options::windows, trace_windows.hpp): every figure above
  // covers the traced windows only. windows.windowed false: traced throughout.
  trace_window_summary windows;

  // The aggregate for `node`, or nullptr when it had no GPU work.
  [[nodiscard]] const node_gpu_activity* find(node_id node) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const node_gpu_activity* gpu_activity_report::find(node_id node) const noexcept {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), node,
             [](const auto& entry, node_id n) { return entry.first < n; });
  return (it != nodes.end() && it->first == node) ? &it->second : nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
