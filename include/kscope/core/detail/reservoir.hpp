// kscope/core/detail/reservoir.hpp — the one uniform reservoir every kscope sample store
// is built on: the per-scope samples of the session, the public sample_reservoir of
// stats.hpp and the per-kernel durations of the CUPTI attribution.
//
// It keeps the first `capacity` values offered, then a uniform random subset of that size
// (Algorithm R, Vitter 1985): the i-th value (0-based) replaces a random slot with
// probability capacity / (i + 1). The slot is drawn by multiply-high (Lemire) rather than
// a 64-bit division, because the session offers one value per closed scope; the bias,
// about i / 2^64, is far below anything a timing could show. A fixed-seed generator makes
// every run reproducible.
//
//   kscope::detail::uniform_reservoir<double> r(1000);
//   for (double x : xs) r.offer(x);
//   r.kept();        // at most 1000 values, a uniform subset of all r.seen()
//
// offer() returns the slot a value went to (or uniform_reservoir::skipped), so a caller
// that keeps something per slot (the arrival index, say) updates it in step.
// No allocation past the capacity; offer() never throws: out of memory, the reservoir
// samples within what it already holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kscope {
namespace detail {

// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, good enough for sampling decisions.
class splitmix64 {
 public:
  explicit splitmix64(std::uint64_t seed = 0x6b73636f70652d31ull) noexcept : state_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0, without modulo bias: draws below 2^64 mod bound
  // are rejected so that every residue is equally likely.
  std::uint64_t below(std::uint64_t bound) noexcept {
    const std::uint64_t reject_under = (0 - bound) % bound;
    std::uint64_t r = next();
    while (r < reject_under) r = next();
    return r % bound;
  }
  // Uniform in [0, 1) with 53 random bits.
  double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// floor(a * b / 2^64): a uniform 64-bit a maps to a nearly uniform value in [0, b).
inline std::uint64_t multiply_high(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ typedef unsigned __int128 u128;  // __extension__: quiet under -Wpedantic
  return static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
#else
  // No 128-bit type: four 32-bit partial products.
  const std::uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32, b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  return hi_hi + (hi_lo >> 32) + (cross >> 32);
#endif
}

template <class T>
class uniform_reservoir {
 public:
  static constexpr std::size_t skipped = static_cast<std::size_t>(-1);
  static constexpr std::uint64_t default_seed = 0x6b73636f70652d73ull;

  explicit uniform_reservoir(std::size_t capacity = 1, std::uint64_t seed = default_seed) noexcept
      : capacity_(capacity), rng_(seed) {}

  // Offers one value; returns its slot in kept(), or `skipped` when the sample was not
  // taken (or the capacity is 0).
  // `may_grow` false (a memory budget is spent, say) freezes the capacity at what is held
  // now: every value offered so far is held then, so sampling on from there with the
  // smaller capacity keeps the subset uniform.
  std::size_t offer(const T& value, bool may_grow = true) noexcept {
    const std::uint64_t index = seen_++;
    if (kept_.size() < capacity_ && !may_grow) capacity_ = kept_.size();
    if (kept_.size() < capacity_) {
      try {
        if (kept_.size() == kept_.capacity()) {
          // Grow geometrically, but never allocate past the capacity.
          const std::size_t doubled = kept_.size() < 8 ? 16 : 2 * kept_.size();
          kept_.reserve(doubled < capacity_ ? doubled : capacity_);
        }
        kept_.push_back(value);
        return kept_.size() - 1;
      } catch (...) {
        capacity_ = kept_.size();  // out of memory: sample within what we hold
      }
    }
    if (capacity_ == 0) return skipped;
    const std::uint64_t slot = multiply_high(rng_.next(), index + 1);
    if (slot >= capacity_) return skipped;
    kept_[static_cast<std::size_t>(slot)] = value;
    return static_cast<std::size_t>(slot);
  }

  // The values held: in arrival order until saturated(), then in slot order.
  [[nodiscard]] const std::vector<T>& kept() const noexcept { return kept_; }
  [[nodiscard]] std::uint64_t seen() const noexcept { return seen_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  // More values were offered than are held: kept() is a sample, not everything.
  [[nodiscard]] bool saturated() const noexcept { return seen_ > kept_.size(); }
  // A reader's copy in two steps (recorder_snapshot.hpp copies counts under one short
  // lock, values under others): first everything but the values, then other's first
  // `count` values. Values held in arrival order never move, so the prefix of the count
  // read in the first step is exactly what that step saw.
  void copy_counts_of(const uniform_reservoir& other) {
    kept_.clear();
    seen_ = other.seen_;
    capacity_ = other.capacity_;
    rng_ = other.rng_;
  }
  void copy_values_of(const uniform_reservoir& other, std::size_t count) {
    const std::size_t n = count < other.kept_.size() ? count : other.kept_.size();
    kept_.assign(other.kept_.begin(), other.kept_.begin() + static_cast<std::ptrdiff_t>(n));
  }

  // Forgets every value; capacity and generator state stay.
  void clear() noexcept {
    kept_.clear();
    seen_ = 0;
  }

 private:
  std::size_t capacity_;
  std::uint64_t seen_ = 0;
  std::vector<T> kept_;
  splitmix64 rng_;
};

}  // namespace detail
}  // namespace kscope
