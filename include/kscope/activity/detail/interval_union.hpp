// kscope/activity/detail/interval_union.hpp — GPU busy time: the union of kernel intervals.
//
// Kernels on several streams overlap, so a node's busy time is the length of the union of
// its intervals, not their sum; the attribution keeps one union per node (kernels, all
// activity, communication, compute) and per device. Memory is bounded per union.
#pragma once

#include "../../core/config.hpp"
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace kscope {
namespace detail {

// How far behind the newest record an interval may arrive and still merge exactly: far
// more than CUPTI's flush period and one buffer's worth of records.
inline constexpr std::int64_t interval_fold_margin_ns = 2'000'000'000;

// Union of half-open intervals [start, end) with bounded memory. Intervals are kept
// merged; when more than `max_intervals` remain, those that ended at least
// interval_fold_margin_ns before the latest end seen are folded into a committed total and
// a frontier. CUPTI hands buffers over out of time order across streams, and a CUDA-graph
// replay traced as one record can span thousands of short kernels that arrived before it:
// anything that arrives within the margin of the newest record merges exactly, whatever
// its order. Only past twice `max_intervals` unfolded intervals are the oldest folded
// regardless; an interval arriving later that reaches before the frontier is then clipped
// to it and counted (clipped()), never silently.
//
//   detail::interval_union u{256};
//   u.add(0, 10); u.add(5, 20); u.add(30, 40);
//   u.total_ns();  // 30
class interval_union {
 public:
  explicit interval_union(std::size_t max_intervals = 256);

  // Inline in both modes: the attribution adds every record to several unions, and in the
  // compiled mode (built with -fPIC) an ordinary external function is never inlined.
  inline void add(std::int64_t start, std::int64_t end);

  // Total covered time. Merges in place (amortized; no allocation).
  [[nodiscard]] std::int64_t total_ns();

  [[nodiscard]] std::uint64_t clipped() const noexcept { return clipped_; }
  [[nodiscard]] std::size_t size() const noexcept { return intervals_.size(); }
  [[nodiscard]] std::size_t memory_bytes() const noexcept;

 private:
  void compact(bool fold);

  std::vector<std::pair<std::int64_t, std::int64_t>> intervals_;
  std::size_t max_intervals_;
  std::int64_t committed_ns_ = 0;
  std::int64_t frontier_ns_ = std::numeric_limits<std::int64_t>::min();
  std::int64_t newest_end_ns_ = std::numeric_limits<std::int64_t>::min();
  std::size_t compact_at_ = 0;  // set from max_intervals_ in the constructor
  std::uint64_t clipped_ = 0;
  bool sorted_ = true;
};

inline void interval_union::add(std::int64_t start, std::int64_t end) {
  if (end <= start) return;
  newest_end_ns_ = std::max(newest_end_ns_, end);
  if (start < frontier_ns_) {
    ++clipped_;
    if (end <= frontier_ns_) return;
    start = frontier_ns_;
  }
  // Fast path: in-order arrival extends the last interval or appends after it.
  if (!intervals_.empty()) {
    auto& last = intervals_.back();
    if (start >= last.first && start <= last.second) {
      if (end > last.second) last.second = end;
      return;
    }
    if (start < last.first) sorted_ = false;
  }
  intervals_.emplace_back(start, end);
  if (KSCOPE_UNLIKELY(intervals_.size() > compact_at_)) {
    compact(true);
    // The next compaction after another half cap of intervals: one after out-of-order
    // arrivals costs a sort, so it is amortized even while nothing can be folded yet.
    compact_at_ = std::max(max_intervals_, intervals_.size() + max_intervals_ / 2);
  }
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t interval_union::memory_bytes() const noexcept {
  return intervals_.capacity() * sizeof(intervals_[0]);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL interval_union::interval_union(std::size_t max_intervals)
    : max_intervals_(std::max<std::size_t>(max_intervals, 8)), compact_at_(max_intervals_) {}

KSCOPE_DECL std::int64_t interval_union::total_ns() {
  compact(false);
  std::int64_t sum = committed_ns_;
  for (const auto& iv : intervals_) sum += iv.second - iv.first;
  return sum;
}

KSCOPE_DECL void interval_union::compact(bool fold) {
  // While sorted_ holds, the list is merged too: add() appends only past the last end (an
  // interval that reaches into the last one extends it), and every compaction leaves it
  // merged. So in-order arrival, the common case, skips both the sort and the merge pass
  // (the per-record path compacts every half cap of intervals).
  if (!sorted_) {
    std::sort(intervals_.begin(), intervals_.end());
    sorted_ = true;
    std::size_t out = 0;
    for (std::size_t i = 0; i < intervals_.size(); ++i) {
      if (out > 0 && intervals_[i].first <= intervals_[out - 1].second) {
        intervals_[out - 1].second = std::max(intervals_[out - 1].second, intervals_[i].second);
      } else {
        intervals_[out++] = intervals_[i];
      }
    }
    intervals_.resize(out);
  }
  if (fold && intervals_.size() > max_intervals_ / 2) {
    // Fold what ended a margin before the newest record: nothing later can reach it.
    std::size_t folded = 0;
    const std::int64_t safe = newest_end_ns_ - interval_fold_margin_ns;
    while (folded < intervals_.size() && intervals_[folded].second < safe) ++folded;
    // Past twice the cap, the oldest three quarters of the cap's worth go regardless
    // (amortizes the sort; later arrivals before the frontier are clipped and counted).
    if (intervals_.size() - folded > 2 * max_intervals_) folded = intervals_.size() - max_intervals_ / 4;
    for (std::size_t i = 0; i < folded; ++i) {
      committed_ns_ += intervals_[i].second - intervals_[i].first;
    }
    if (folded > 0) {
      frontier_ns_ = std::max(frontier_ns_, intervals_[folded - 1].second);
      intervals_.erase(intervals_.begin(), intervals_.begin() + static_cast<std::ptrdiff_t>(folded));
    }
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
