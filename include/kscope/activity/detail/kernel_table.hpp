// kscope/activity/detail/kernel_table.hpp — the top-kernels table: statistics per kernel name.
//
// Like torch.profiler's key_averages().table(): per distinct kernel name, calls, total /
// min / max / median duration, the launch configuration of the first call and whether a
// later call changed it, and whether it is an NCCL kernel. gpu_attribution owns one and
// feeds it every attributed kernel; kernel_summary (activity.hpp) is what it hands out.
//
//   detail::kernel_table table(/*max_names*/ 4096, /*median_samples*/ 256);
//   table.find_or_add(k.name, counters.distinct_kernels_over_cap).add_call(k);
//   std::vector<kscope::kernel_summary> top = table.top(50);
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/reservoir.hpp"
#include "../../core/stats.hpp"
#include "../../evidence/activity_results.hpp"
#include "../../evidence/communication.hpp"
#include "../../evidence/activity_records.hpp"
#include "../../cupti/detail/demangle.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kscope {
namespace detail {

// One kernel name's statistics.
struct kernel_stats {
  explicit kernel_stats(std::size_t median_samples);

  std::string mangled;
  std::uint64_t calls = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = std::numeric_limits<std::int64_t>::max();
  std::int64_t max_ns = 0;
  // Every duration up to its capacity, then a uniform sample of all of them: the median
  // is exact for short runs and unbiased for long ones, in bounded memory.
  uniform_reservoir<std::int64_t> durations;
  std::array<std::int32_t, 3> grid{};
  std::array<std::int32_t, 3> block{};
  std::uint32_t registers_per_thread = 0;
  std::int32_t static_shared_bytes = 0;
  std::int32_t dynamic_shared_bytes = 0;
  bool varies = false;
  bool communication = false;  // classified once per name, not per record
  bool folded = false;         // the "(other kernels)" row past the name cap

  // Inline in both modes (it runs for every kernel record; in the compiled mode, built with
  // -fPIC, an ordinary external function is never inlined), and forced: GCC's inliner ran
  // out of budget in kscope_compiled.cpp and made it a call (with its own six-register
  // prologue) on every kernel record.
  KSCOPE_FORCE_INLINE inline void add_call(const kernel_record& k) noexcept;

  // Forgets the calls; the name, its classification and the generator state stay.
  void clear() noexcept;

  [[nodiscard]] kernel_summary summary() const;
};

inline void kernel_stats::add_call(const kernel_record& k) noexcept {
  const std::int64_t ns = k.end_ns - k.start_ns;
  if (calls == 0) {
    grid = {k.grid_x, k.grid_y, k.grid_z};
    block = {k.block_x, k.block_y, k.block_z};
    registers_per_thread = k.registers_per_thread;
    static_shared_bytes = k.static_shared_bytes;
    dynamic_shared_bytes = k.dynamic_shared_bytes;
  } else if (!varies) {
    varies = grid[0] != k.grid_x || grid[1] != k.grid_y || grid[2] != k.grid_z ||
             block[0] != k.block_x || block[1] != k.block_y || block[2] != k.block_z ||
             dynamic_shared_bytes != k.dynamic_shared_bytes;
  }
  calls += 1;
  total_ns += ns;
  min_ns = std::min(min_ns, ns);
  max_ns = std::max(max_ns, ns);
  (void)durations.offer(ns);
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL kernel_stats::kernel_stats(std::size_t median_samples) : durations(median_samples) {}

KSCOPE_DECL void kernel_stats::clear() noexcept {
  calls = 0;
  total_ns = 0;
  min_ns = std::numeric_limits<std::int64_t>::max();
  max_ns = 0;
  durations.clear();
  varies = false;
}

KSCOPE_DECL kernel_summary kernel_stats::summary() const {
  kernel_summary s;
  s.mangled_name = mangled;
  s.name = folded ? mangled : demangle(mangled.c_str());
  s.calls = calls;
  s.total_ns = total_ns;
  s.min_ns = calls > 0 ? min_ns : 0;
  s.max_ns = max_ns;
  const std::vector<std::int64_t>& kept = durations.kept();
  if (!kept.empty()) s.median_ns = kscope::quantile(std::vector<double>(kept.begin(), kept.end()), 0.5);
  s.grid = grid;
  s.block = block;
  s.registers_per_thread = registers_per_thread;
  s.static_shared_bytes = static_shared_bytes;
  s.dynamic_shared_bytes = dynamic_shared_bytes;
  s.launch_config_varies = varies;
  s.communication = communication;
  return s;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

class kernel_table {
 public:
  kernel_table(std::size_t max_names, std::size_t median_samples);

  kernel_table(const kernel_table&) = delete;
  kernel_table& operator=(const kernel_table&) = delete;

  // The statistics of `name` (CUPTI's string), created on first sight; past the name cap,
  // the shared "(other kernels)" row, counted in `folded_calls`.
  //
  // CUPTI shares one name string among all records of a kernel, so the pointer is the
  // fast key. Within one buffer, two live names cannot share an address, so a small
  // pointer cache is trusted until the end of the buffer (end_of_buffer() clears it);
  // across buffers a pointer is checked against its text, because it can be reused for
  // another name after a module is unloaded. The cache probe is inline in both modes (every
  // kernel record asks); a miss goes to find_or_add_uncached.
  inline kernel_stats& find_or_add(const char* name, std::uint64_t& folded_calls);

  // Pointers seen in this buffer may name other kernels in the next one.
  void end_of_buffer() noexcept;

  // Forgets every call; names stay in place (by_text_ holds views of them).
  void reset() noexcept;

  // Sorted by total GPU time, descending; ties by name. limit 0: all.
  [[nodiscard]] std::vector<kernel_summary> top(std::size_t limit = 0) const {
    return top(limit, {});
  }

  // The same, with calls and time scaled for CUDA-graph replays traced as one record added
  // per kernel (attribution.hpp computes them); the ranking includes them.
  struct scaled_share {
    std::uint64_t calls = 0;
    std::int64_t ns = 0;
    std::uint64_t from_replays = 0;  // node-level replays the scaling rests on
  };
  using scaled_shares = std::unordered_map<const kernel_stats*, scaled_share>;
  [[nodiscard]] std::vector<kernel_summary> top(std::size_t limit, const scaled_shares& scaled) const;

  // Heap bytes held: names, duration reservoirs, lookup maps (estimated per entry).
  [[nodiscard]] std::size_t memory_bytes() const noexcept;

 private:
  static constexpr std::size_t name_cache_size = 64;  // = 2^(64 - 58), see cache_slot
  // Open addressing with linear probing, at most this many slots from a name's own: two
  // names whose pointers hash alike both stay cached (direct-mapped, they evicted each other
  // on every call, and each miss costs a map lookup and a strcmp). Entries are only ever
  // added until end_of_buffer() clears them all, so a probe may stop at the first empty slot.
  static constexpr std::size_t name_cache_probes = 8;
  struct name_cache_entry {
    const char* pointer = nullptr;
    kernel_stats* stats = nullptr;
  };

  // Fibonacci hashing: string literals sit next to each other, so low bits collide.
  static std::size_t cache_slot(const char* name) noexcept {
    return static_cast<std::size_t>(
        (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(name)) * 0x9e3779b97f4a7c15ull) >> 58);
  }
  kernel_stats& find_or_add_uncached(const char* name, std::uint64_t& folded_calls);

  std::size_t max_names_;
  std::size_t median_samples_;
  std::deque<kernel_stats> kernels_;
  kernel_stats other_kernels_;
  std::unordered_map<const char*, std::uint32_t> by_pointer_;
  std::unordered_map<std::string_view, std::uint32_t> by_text_;
  std::array<name_cache_entry, name_cache_size> name_cache_{};
};

inline kernel_stats& kernel_table::find_or_add(const char* name, std::uint64_t& folded_calls) {
  if (name != nullptr) {
    const std::size_t home = cache_slot(name);
    for (std::size_t probe = 0; probe < name_cache_probes; ++probe) {
      const name_cache_entry& e = name_cache_[(home + probe) % name_cache_size];
      if (e.pointer == name) return *e.stats;
      if (e.pointer == nullptr) break;
    }
  }
  return find_or_add_uncached(name, folded_calls);
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void kernel_table::end_of_buffer() noexcept { name_cache_.fill(name_cache_entry{}); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL kernel_table::kernel_table(std::size_t max_names, std::size_t median_samples) : max_names_(std::max<std::size_t>(max_names, 1)),
      median_samples_(std::max<std::size_t>(median_samples, 1)),
      other_kernels_(median_samples_) {
  other_kernels_.mangled = "(other kernels)";
  other_kernels_.folded = true;
}

KSCOPE_DECL kernel_stats& kernel_table::find_or_add_uncached(const char* name, std::uint64_t& folded_calls) {
  if (name == nullptr) name = "(unknown kernel)";
  kernel_stats* found = nullptr;
  auto by_pointer = by_pointer_.find(name);
  if (by_pointer != by_pointer_.end() && std::strcmp(kernels_[by_pointer->second].mangled.c_str(), name) == 0) {
    found = &kernels_[by_pointer->second];
  } else {
    std::uint32_t index;
    auto by_text = by_text_.find(std::string_view(name));
    if (by_text != by_text_.end()) {
      index = by_text->second;
    } else if (kernels_.size() >= max_names_) {
      ++folded_calls;
      return other_kernels_;
    } else {
      index = static_cast<std::uint32_t>(kernels_.size());
      kernels_.emplace_back(median_samples_);
      kernels_.back().mangled = name;
      kernels_.back().communication = is_communication_kernel(kernels_.back().mangled);
      // The deque keeps each string in place, so the view key stays valid.
      by_text_.emplace(std::string_view(kernels_.back().mangled), index);
    }
    if (by_pointer_.size() < 4 * max_names_) by_pointer_[name] = index;
    found = &kernels_[index];
  }
  // The first free slot of the probe sequence; with none free, the name's own slot.
  const std::size_t home = cache_slot(name);
  name_cache_entry* cached = &name_cache_[home];
  for (std::size_t probe = 0; probe < name_cache_probes; ++probe) {
    name_cache_entry& e = name_cache_[(home + probe) % name_cache_size];
    if (e.pointer == nullptr || e.pointer == name) {
      cached = &e;
      break;
    }
  }
  cached->pointer = name;
  cached->stats = found;
  return *found;
}

KSCOPE_DECL void kernel_table::reset() noexcept {
  name_cache_.fill(name_cache_entry{});
  for (auto& k : kernels_) k.clear();
  other_kernels_.clear();
}

KSCOPE_DECL std::vector<kernel_summary> kernel_table::top(std::size_t limit, const scaled_shares& scaled) const {
  std::vector<std::pair<const kernel_stats*, std::int64_t>> order;  // stats, total with scaled time
  order.reserve(kernels_.size() + 1);
  const auto total_of = [&scaled](const kernel_stats& k) {
    const auto it = scaled.find(&k);
    return k.total_ns + (it == scaled.end() ? 0 : it->second.ns);
  };
  for (const auto& k : kernels_) {
    if (k.calls > 0) order.emplace_back(&k, total_of(k));
  }
  if (other_kernels_.calls > 0) order.emplace_back(&other_kernels_, total_of(other_kernels_));
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first->mangled < b.first->mangled;
  });
  if (limit != 0 && order.size() > limit) order.resize(limit);
  std::vector<kernel_summary> out;
  out.reserve(order.size());
  for (const auto& entry : order) {
    kernel_summary s = entry.first->summary();
    const auto it = scaled.find(entry.first);
    if (it != scaled.end()) {
      s.scaled_calls = it->second.calls;
      s.scaled_ns = it->second.ns;
      s.scaled_from_replays = it->second.from_replays;
      s.calls += s.scaled_calls;
      s.total_ns += s.scaled_ns;
    }
    out.push_back(std::move(s));
  }
  return out;
}

KSCOPE_DECL std::size_t kernel_table::memory_bytes() const noexcept {
  std::size_t bytes = 0;
  for (const auto& k : kernels_) {
    bytes += sizeof(kernel_stats) + k.durations.kept().capacity() * sizeof(std::int64_t) + k.mangled.capacity();
  }
  bytes += other_kernels_.durations.kept().capacity() * sizeof(std::int64_t);
  bytes += (by_pointer_.size() + by_text_.size()) * 64;
  return bytes;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
