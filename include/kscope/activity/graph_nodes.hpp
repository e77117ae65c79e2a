// kscope/activity/graph_nodes.hpp — which scope BUILT each CUDA graph node: the capture table.
//
// A kernel replayed by cudaGraphLaunch is attributed to the scope open at LAUNCH time
// (correlation.hpp): the launch's correlation id is all its records share. Which phase
// captured the kernel is a second, independent fact: CUPTI's resource callback fires when
// a graph node is created (stream capture, cudaGraphAdd*Node) on the thread that creates
// it, so the node open on that thread then is the capture-time scope, and fires again
// when a node is cloned (cudaGraphInstantiate, cudaGraphClone), so the clone inherits the
// original's scope. Activity records carry the node id (graphNodeId) of the node that
// ran; this table maps it back to the scope that built it.
//
// Which id do records carry? NVIDIA's cuda_graphs_trace sample maps the INSTANTIATED
// (cloned) node's id, moved over from the original at GRAPHNODE_CLONED; kscope keeps
// both the created and the cloned ids, so either answer finds its scope.
//
// Pure C++ (no CUDA, no CUPTI headers), bounded and allocation-free after construction.
// Writes happen when graphs are built, not when they run, so a short mutex is cheap; a
// lookup (one per graph record, under the attribution's own lock) takes it too. The
// mutex is never held across a call out, so it cannot join a lock cycle. Its calls are
// not noexcept only because std::mutex::lock may throw; the collector catches.
//
//   kscope::graph_node_table table{1 << 12};
//   table.record_created(/*graph node*/ 17, /*scope*/ 3);   // captured inside scope 3
//   table.record_cloned(/*clone*/ 42, /*original*/ 17);     // instantiated: 42 -> 3
//   table.find(42).node;                                     // 3
#pragma once

#include "../core/config.hpp"
#include "../scope/node_id.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace kscope {

// Graph node id -> capture-time scope node, bounded.
//
// 4-way set associative: an id hashes to one set of 4 entries; a new id takes a free
// entry of its set, else replaces the set's oldest entry (counted in evicted()). Full
// 64-bit ids are compared, so a lookup is exact: found means this node was built in that
// scope, never a neighbour's answer. The default (2^17 entries, 2 MiB) holds the
// originals and instantiated copies of tens of thousands of captured kernels (a serving
// engine's graphs for every batch size).
class graph_node_table {
 public:
  struct lookup_result {
    bool found = false;
    node_id node = 0;  // the capture-time scope; meaningful when found
  };

  explicit graph_node_table(std::size_t capacity = std::size_t{1} << 17);

  graph_node_table(const graph_node_table&) = delete;
  graph_node_table& operator=(const graph_node_table&) = delete;

  // A node was created (captured or added) while `scope` was open on the creating thread.
  // Id 0 is CUPTI's "no graph node" and is ignored.
  void record_created(std::uint64_t graph_node_id, node_id scope);

  // A node was cloned: the clone was built where its original was. Returns false (and
  // counts clones_of_unknown) when the original was never seen, e.g. it was captured
  // before the collector started; then the clone stays unknown too.
  bool record_cloned(std::uint64_t clone_id, std::uint64_t original_id);

  [[nodiscard]] lookup_result find(std::uint64_t graph_node_id) const;

  // Entries replaced while still valid because their set was full.
  [[nodiscard]] std::uint64_t evicted() const;
  // Clones whose original was not in the table.
  [[nodiscard]] std::uint64_t clones_of_unknown() const;
  [[nodiscard]] std::size_t capacity() const noexcept { return sets_ * ways; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept;

 private:
  static constexpr std::size_t ways = 4;
  struct entry {
    std::uint64_t id = 0;     // 0: free
    node_id node = 0;
    std::uint32_t stamp = 0;  // insertion order within the table (wraps; compared by difference)
  };

  // splitmix64's finalizer: ids may be small counters or (graph << 32 | index); either
  // way every bit reaches the set index.
  static std::uint64_t mix(std::uint64_t x) noexcept;
  entry* set_of(std::uint64_t id) const noexcept;
  const entry* find_locked(std::uint64_t id) const noexcept;
  void insert_locked(std::uint64_t id, node_id scope) noexcept;
  static std::size_t round_up_pow2(std::size_t n) noexcept;

  std::size_t sets_;
  std::unique_ptr<entry[]> entries_;
  mutable std::mutex mutex_;
  std::uint32_t next_stamp_ = 1;
  std::uint64_t evicted_ = 0;
  std::uint64_t clones_of_unknown_ = 0;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t graph_node_table::memory_bytes() const noexcept { return capacity() * sizeof(entry); }

KSCOPE_DECL auto graph_node_table::set_of(std::uint64_t id) const noexcept -> entry* {
  return entries_.get() + (mix(id) & (sets_ - 1)) * ways;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL graph_node_table::graph_node_table(std::size_t capacity) : sets_(round_up_pow2(capacity) / ways), entries_(new entry[sets_ * ways]) {}

KSCOPE_DECL void graph_node_table::record_created(std::uint64_t graph_node_id, node_id scope) {
  if (graph_node_id == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  insert_locked(graph_node_id, scope);
}

KSCOPE_DECL bool graph_node_table::record_cloned(std::uint64_t clone_id, std::uint64_t original_id) {
  if (clone_id == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  const entry* original = find_locked(original_id);
  if (original == nullptr) {
    ++clones_of_unknown_;
    return false;
  }
  insert_locked(clone_id, original->node);
  return true;
}

KSCOPE_DECL auto graph_node_table::find(std::uint64_t graph_node_id) const -> lookup_result {
  lookup_result result;
  if (graph_node_id == 0) return result;
  std::lock_guard<std::mutex> lock(mutex_);
  if (const entry* e = find_locked(graph_node_id)) {
    result.found = true;
    result.node = e->node;
  }
  return result;
}

KSCOPE_DECL std::uint64_t graph_node_table::evicted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return evicted_;
}

KSCOPE_DECL std::uint64_t graph_node_table::clones_of_unknown() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return clones_of_unknown_;
}

KSCOPE_DECL std::uint64_t graph_node_table::mix(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

KSCOPE_DECL auto graph_node_table::find_locked(std::uint64_t id) const noexcept -> const entry* {
  if (id == 0) return nullptr;
  const entry* set = set_of(id);
  for (std::size_t i = 0; i < ways; ++i)
    if (set[i].id == id) return &set[i];
  return nullptr;
}

KSCOPE_DECL void graph_node_table::insert_locked(std::uint64_t id, node_id scope) noexcept {
  entry* set = set_of(id);
  entry* target = nullptr;
  for (std::size_t i = 0; i < ways && target == nullptr; ++i)
    if (set[i].id == id) target = &set[i];  // re-created or re-cloned: the latest scope wins
  for (std::size_t i = 0; i < ways && target == nullptr; ++i)
    if (set[i].id == 0) target = &set[i];
  if (target == nullptr) {
    target = &set[0];
    for (std::size_t i = 1; i < ways; ++i)
      if (static_cast<std::int32_t>(set[i].stamp - target->stamp) < 0) target = &set[i];
    ++evicted_;
  }
  target->id = id;
  target->node = scope;
  target->stamp = next_stamp_++;
}

KSCOPE_DECL std::size_t graph_node_table::round_up_pow2(std::size_t n) noexcept {
  std::size_t p = 64;  // a floor: at least 16 sets
  while (p < n && p < (std::size_t{1} << 30)) p <<= 1;
  return p;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
