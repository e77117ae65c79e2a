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

  // Inline in both modes, and forced: the attribution adds every record to two unions or
  // more, and in the compiled mode (built with -fPIC) an ordinary external function is
  // never inlined, nor did GCC inline this one in kscope_compiled.cpp. The common cases
  // (an interval after the last one, or reaching into it) are a few compares and a store;
  // the rest (clipping, out-of-order arrival, growth, compaction) is add_slow().
  KSCOPE_FORCE_INLINE inline void add(std::int64_t start, std::int64_t end);

  // Total covered time. Merges in place (amortized; no allocation).
  [[nodiscard]] std::int64_t total_ns();

  [[nodiscard]] std::uint64_t clipped() const noexcept { return clipped_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept;

 private:
  void add_slow(std::int64_t start, std::int64_t end);
  void compact(bool fold);

  using span = std::pair<std::int64_t, std::int64_t>;
  // The first count_ elements are the intervals. The vector is sized to its whole length
  // (not merely reserved), so that add() appends with one store: a push_back stayed a call.
  std::vector<span> intervals_;
  std::size_t count_ = 0;
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
  if (end > newest_end_ns_) newest_end_ns_ = end;
  // In-order arrival: extends the last interval, or appends after it while there is room
  // and no compaction is due.
  if (KSCOPE_LIKELY(start >= frontier_ns_ && count_ > 0)) {
    span& last = intervals_[count_ - 1];
    if (start >= last.first) {
      if (start <= last.second) {
        if (end > last.second) last.second = end;
        return;
      }
      if (KSCOPE_LIKELY(count_ < intervals_.size() && count_ < compact_at_)) {
        intervals_[count_++] = span(start, end);
        return;
      }
    }
  }
  add_slow(start, end);
}

#if KSCOPE_DETAIL_DEFINITIONS
// add()'s other cases, by the same rules (newest_end_ns_ is set already).
KSCOPE_DECL void interval_union::add_slow(std::int64_t start, std::int64_t end) {
  if (start < frontier_ns_) {
    ++clipped_;
    if (end <= frontier_ns_) return;
    start = frontier_ns_;
  }
  if (count_ > 0) {
    span& last = intervals_[count_ - 1];
    if (start >= last.first && start <= last.second) {
      if (end > last.second) last.second = end;
      return;
    }
    if (start < last.first) sorted_ = false;
  }
  if (count_ == intervals_.size()) intervals_.resize(std::max<std::size_t>(16, 2 * intervals_.size()));
  intervals_[count_++] = span(start, end);
  if (KSCOPE_UNLIKELY(count_ > compact_at_)) {
    compact(true);
    // The next compaction after another half cap of intervals: one after out-of-order
    // arrivals costs a sort, so it is amortized even while nothing can be folded yet.
    compact_at_ = std::max(max_intervals_, count_ + max_intervals_ / 2);
  }
}

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
  for (std::size_t i = 0; i < count_; ++i) sum += intervals_[i].second - intervals_[i].first;
  return sum;
}

KSCOPE_DECL void interval_union::compact(bool fold) {
  // While sorted_ holds, the list is merged too: add() appends only past the last end (an
  // interval that reaches into the last one extends it), and every compaction leaves it
  // merged. So in-order arrival, the common case, skips both the sort and the merge pass
  // (the per-record path compacts every half cap of intervals).
  if (!sorted_) {
    std::sort(intervals_.begin(), intervals_.begin() + static_cast<std::ptrdiff_t>(count_));
    sorted_ = true;
    std::size_t out = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      if (out > 0 && intervals_[i].first <= intervals_[out - 1].second) {
        intervals_[out - 1].second = std::max(intervals_[out - 1].second, intervals_[i].second);
      } else {
        intervals_[out++] = intervals_[i];
      }
    }
    count_ = out;
  }
  if (fold && count_ > max_intervals_ / 2) {
    // Fold what ended a margin before the newest record: nothing later can reach it.
    std::size_t folded = 0;
    const std::int64_t safe = newest_end_ns_ - interval_fold_margin_ns;
    while (folded < count_ && intervals_[folded].second < safe) ++folded;
    // Past twice the cap, the oldest three quarters of the cap's worth go regardless
    // (amortizes the sort; later arrivals before the frontier are clipped and counted).
    if (count_ - folded > 2 * max_intervals_) folded = count_ - max_intervals_ / 4;
    for (std::size_t i = 0; i < folded; ++i) {
      committed_ns_ += intervals_[i].second - intervals_[i].first;
    }
    if (folded > 0) {
      frontier_ns_ = std::max(frontier_ns_, intervals_[folded - 1].second);
      std::move(intervals_.begin() + static_cast<std::ptrdiff_t>(folded),
                intervals_.begin() + static_cast<std::ptrdiff_t>(count_), intervals_.begin());
      count_ -= folded;
    }
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
