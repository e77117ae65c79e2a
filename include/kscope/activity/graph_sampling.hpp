// kscope/activity/graph_sampling.hpp — which CUDA-graph replays are traced node by node.
//
// Tracing every node of every replay costs the GPU about what eager launches of the same
// kernels cost (a graph-replayed decode step was ~15 % slower on an H200); CUPTI's
// graph-level trace gives one record per replay at almost no cost but names no kernel.
// So the collector keeps graph-level trace on and, per graph, traces a few replays node by
// node: the first `first`, then the `first`+2nd, +4th, +8th, ... (powers of two below
// `every`), then every `every`-th (cupti_options::graph_first, graph_every). Those replays
// give kernels per replay and kernel time per span ns, by which the attribution scales the
// others (attribution.hpp, node_gpu_activity::scaled_*).
//
// Why the powers of two: the first replays are often cold (a warm-up; an H100 read a
// gather 18 % faster in a graph's first replay, its table still in L2) and a short run of
// 240 replays had only 2 more at every 100th. A kernel's share then rested on 2 replays,
// and a replay's first kernel, which the attribution can only place to within a few us
// under graph-level trace (CUPTI's offset, attribution.hpp), read 6-11 % off. The powers
// of two give 6 more node-level replays per graph early (at most log2(every)), spread out
// in time, and cost a fixed amount however long the run is.
//
// A graph instantiated before the collector started, or while graph-level trace was off (the
// program had paused tracing), is always traced node by node: CUPTI saw it built without
// graph-level trace, and the collector only lets CUPTI trace as a whole the executable
// graphs it saw built with graph-level trace on (graph_exec_created). On an H100 (CUPTI
// 13.0.1) a graph instantiated while tracing was paused and replayed with graph-level trace
// on crashed inside cuGraphLaunch (a null read in libcupti), in 4 of 4 runs of a serving loop
// that captures its decode graphs lazily; traced node by node it ran clean.
//
// Pure C++ (no CUDA, no CUPTI): the collector calls decide() in the graph launch's
// API-enter callback, on the launching thread; the CPU tests drive it directly.
//
//   kscope::graph_replay_sampler s;
//   s.configure(kscope::graph_tracing::sampled, 2, 100);
//   s.graph_exec_created(exec);
//   bool per_node = s.decide(exec);  // replays 1, 2, 4, 6, 10, 18, 34, 66, 102, 202, ...
#pragma once

#include "options.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace kscope {

class graph_replay_sampler {
 public:
  // Executable graphs remembered (replay counts, whether their creation was seen); past
  // this the table starts afresh, and the graphs then known only by their next replays
  // are traced node by node (safe, and counted).
  static constexpr std::size_t max_graphs = 4096;

  void configure(graph_tracing mode, std::uint32_t first, std::uint32_t every);

  // CUPTI's GRAPHEXEC_CREATED: this executable graph was built while the collector watched;
  // `graph_trace_on`: with CUPTI's graph-level trace enabled at that moment (else its
  // replays are always traced node by node, as those of a graph built before the start).
  void graph_exec_created(std::uintptr_t exec, bool graph_trace_on = true);

  // CUPTI's GRAPHEXEC_DESTROY_STARTING: a later graph may reuse the handle.
  void graph_exec_destroyed(std::uintptr_t exec);

  // At a graph launch: whether this replay is traced node by node, and whether its graph is
  // never traced as one record (built unwatched or with graph-level trace off), so that no
  // replay traced as one record will come to check its node-level replays' timestamps
  // against (the attribution counts those as they come: gpu_attribution::unreferenced_replays).
  struct replay_decision {
    bool node_level = true;
    bool never_one_record = false;
  };
  [[nodiscard]] replay_decision decide_replay(std::uintptr_t exec);
  // decide_replay(exec).node_level.
  [[nodiscard]] bool decide(std::uintptr_t exec) { return decide_replay(exec).node_level; }

  // The lock, for the owner to register with the fork guard (core/detail/fork_guard.hpp)
  // when the sampler lives as long as the process (the collector's does; a test's does not).
  [[nodiscard]] std::mutex& lock_for_fork() noexcept { return mutex_; }

  struct counts {
    std::uint64_t node_level = 0;     // sampled replays traced node by node
    std::uint64_t graph_level = 0;    // replays traced as one record
    std::uint64_t unknown_graph = 0;  // replays of graphs built unwatched: per node
    std::uint64_t built_paused = 0;   // of those, graphs built while graph-level trace was off
    std::uint64_t table_resets = 0;
  };
  [[nodiscard]] counts decisions() const;

 private:
  struct entry {
    std::uint64_t replays = 0;
    bool created_seen = false;   // built with graph-level trace on: may be traced as one record
    bool built_paused = false;   // built while the collector watched, graph-level trace off
  };
  void make_room();

  mutable std::mutex mutex_;
  graph_tracing mode_ = graph_tracing::node;
  std::uint32_t first_ = 2;
  std::uint32_t every_ = 100;
  std::unordered_map<std::uintptr_t, entry> graphs_;
  std::uint64_t node_level_replays_ = 0, graph_level_replays_ = 0, unknown_graph_replays_ = 0, table_resets_ = 0;
  std::uint64_t built_paused_replays_ = 0;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void graph_replay_sampler::configure(graph_tracing mode, std::uint32_t first, std::uint32_t every) {
  std::lock_guard<std::mutex> lock(mutex_);
  mode_ = mode;
  first_ = first;
  every_ = every;
}

KSCOPE_DECL void graph_replay_sampler::graph_exec_created(std::uintptr_t exec, bool graph_trace_on) {
  if (exec == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  make_room();
  graphs_[exec] = entry{0, graph_trace_on, !graph_trace_on};
}

KSCOPE_DECL void graph_replay_sampler::graph_exec_destroyed(std::uintptr_t exec) {
  std::lock_guard<std::mutex> lock(mutex_);
  graphs_.erase(exec);
}

KSCOPE_DECL auto graph_replay_sampler::decide_replay(std::uintptr_t exec) -> replay_decision {
  std::lock_guard<std::mutex> lock(mutex_);
  // Node mode: graph-level trace is never on, so no replay waits for a check.
  if (mode_ == graph_tracing::node) return {true, false};
  auto it = graphs_.find(exec);
  if (it == graphs_.end()) {
    make_room();
    it = graphs_.emplace(exec, entry{0, false}).first;
  }
  entry& e = it->second;
  const std::uint64_t n = ++e.replays;
  if (!e.created_seen) {
    ++unknown_graph_replays_;
    if (e.built_paused) ++built_paused_replays_;
    // Never traced as one record: certain for a graph seen built with graph-level trace off,
    // or unseen before any reset of the table (then it was built before the collector
    // watched). After a reset an unseen graph may have been built with it on: not marked,
    // its node-level replays wait for a check as any other's.
    return {true, e.built_paused || table_resets_ == 0};
  }
  if (mode_ == graph_tracing::graph) return {false, false};
  bool node_level = n <= first_;
  if (!node_level && every_ > 0) {
    const std::uint64_t k = n - first_;
    const bool early_power_of_two = k >= 2 && k < every_ && (k & (k - 1)) == 0;
    node_level = early_power_of_two || k % every_ == 0;
  }
  if (node_level) ++node_level_replays_; else ++graph_level_replays_;
  return {node_level, false};
}

KSCOPE_DECL auto graph_replay_sampler::decisions() const -> counts {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts{node_level_replays_, graph_level_replays_, unknown_graph_replays_, built_paused_replays_, table_resets_};
}

KSCOPE_DECL void graph_replay_sampler::make_room() {
  if (graphs_.size() < max_graphs) return;
  graphs_.clear();
  ++table_resets_;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
