// kscope/core/detail/stats_math.hpp — distributions and selection behind kscope/core/stats.hpp.
//
// Everything here is pure arithmetic on doubles: the standard normal quantile, the
// order-statistic ranks of a distribution-free median interval, the exact null
// distribution of the Mann-Whitney U statistic, multi-rank selection, the type 7
// quantile (quantile_sorted, the one median/percentile routine of the library), and the
// k-th smallest pairwise difference of two sorted arrays without materialising them.
// Users include <kscope/core/stats.hpp>; other kscope layers may call quantile_sorted.
#pragma once

#include "../config.hpp"
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "reservoir.hpp"

namespace kscope {
namespace detail {

constexpr double stats_nan = std::numeric_limits<double>::quiet_NaN();

// Neumaier's compensated sum: the mean of a million timings keeps all its digits.
class compensated_sum {
 public:
  void add(double x) noexcept;
  [[nodiscard]] double value() const noexcept { return sum_ + correction_; }

 private:
  double sum_ = 0;
  double correction_ = 0;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void compensated_sum::add(double x) noexcept {
  const double t = sum_ + x;
  if (std::fabs(sum_) >= std::fabs(x)) {
    correction_ += (sum_ - t) + x;
  } else {
    correction_ += (x - t) + sum_;
  }
  sum_ = t;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// P(Z > z) for a standard normal Z; erfc keeps the far tail accurate.
KSCOPE_DECL double normal_upper_tail(double z) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double normal_upper_tail(double z) noexcept { return 0.5 * std::erfc(z / std::sqrt(2.0)); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Quantile of the standard normal: Acklam's rational approximation (relative error
// 1.15e-9) polished by one Halley step on erfc, which brings it to ~1e-15.
KSCOPE_DECL double normal_quantile(double p) noexcept;

// Largest k (1-based) such that P(X <= k - 1) <= (1 - level) / 2 for X ~ Binomial(n, 1/2),
// so that [x_(k), x_(n-k+1)] covers the median with probability >= level.
// 0 means that no such interval exists (too few samples for the level).
// Exact for n <= 1000; above, the continuity-corrected normal approximation, which
// agrees with the exact ranks at n = 1000 for the usual levels.
KSCOPE_DECL std::size_t median_interval_rank(std::size_t n, double level) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double normal_quantile(double p) noexcept {
  if (!(p > 0 && p < 1)) {
    if (p == 0) return -std::numeric_limits<double>::infinity();
    if (p == 1) return std::numeric_limits<double>::infinity();
    return stats_nan;
  }
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01,  -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double p_low = 0.02425;
  double x;
  if (p < p_low) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - p_low) {
    const double q = p - 0.5;
    const double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // Halley refinement against the exact CDF.
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * 3.14159265358979323846) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

KSCOPE_DECL std::size_t median_interval_rank(std::size_t n, double level) noexcept {
  if (n == 0 || !(level > 0 && level < 1)) return 0;
  const double tail = (1 - level) / 2;
  std::size_t k = 0;
  if (n <= 1000) {
    // pmf(0) = 2^-n is >= 9.3e-302 for n <= 1000: no underflow.
    double pmf = std::ldexp(1.0, -static_cast<int>(n));
    double cdf = pmf;  // P(X <= k) for the k being tested below
    // k grows while P(X <= k) <= tail, i.e. while rank k + 1 is still allowed.
    while (k < n && cdf <= tail * (1 + 1e-12)) {
      ++k;
      pmf = pmf * static_cast<double>(n - k + 1) / static_cast<double>(k);
      cdf += pmf;
    }
  } else {
    const double z = normal_quantile(1 - tail);
    const double nd = static_cast<double>(n);
    const double r = std::floor(nd / 2 + 0.5 - z * std::sqrt(nd) / 2);
    k = r < 1 ? 0 : static_cast<std::size_t>(r);
  }
  // Never cross the middle: the interval needs k <= n - k + 1.
  return std::min(k, (n + 1) / 2);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Ranks (1-based) of the distribution-free interval [x_(lo), x_(hi)] of the p-quantile:
// lo the largest rank with P(B <= lo - 1) <= (1 - level) / 2 and hi the smallest with
// P(B >= hi) <= (1 - level) / 2, for B ~ Binomial(n, p) (the number of samples at or
// below the true quantile). lo = hi = 0: no such interval (too few samples for the level
// at this p, p outside (0, 1), an invalid level). At p = 1/2 these are the ranks of
// median_interval_rank, which the caller uses there, so that a median's interval is
// one definition. Exact binomial probabilities for every n: the pmf is built outward
// from its mode by the ratio of successive terms (terms below the smallest double
// become 0, far from where the tails are cut). O(n) time and memory.
struct quantile_interval_ranks {
  std::size_t lo = 0;
  std::size_t hi = 0;
};
KSCOPE_DECL quantile_interval_ranks quantile_interval_rank(std::size_t n, double p, double level);

// Whether the exact null distribution of U for sizes (n1, n2) can be tabulated with
// every count exact in a double: C(n1 + n2, n1) < 2^52 (e.g. 27 vs 27, 10 vs 160,
// 5 vs 3500), and the table (n1 * n2 + 1 doubles) stays small.
KSCOPE_DECL bool mann_whitney_exact_fits(std::size_t n1, std::size_t n2) noexcept;

// 1 / C(n1 + n2, n1): under the null every split of the pooled samples into groups of n1
// and n2 is equally likely, so no one-sided tail of U holds less than this (ties or not).
// 1 when either sample is empty.
KSCOPE_DECL double fewest_arrangements_tail(std::size_t n1, std::size_t n2) noexcept;

// Number of arrangements of n1 + n2 distinct values giving each U = 0 .. n1*n2: the
// coefficients of the Gaussian binomial [n1 + n2 choose n1]_q, built as the product of
// (1 - q^(large+i)) / (1 - q^i). Every intermediate is an integer below 2^53 when
// mann_whitney_exact_fits() holds, so the doubles are exact.
KSCOPE_DECL std::vector<double> mann_whitney_counts(std::size_t n1, std::size_t n2);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL quantile_interval_ranks quantile_interval_rank(std::size_t n, double p, double level) {
  if (n == 0 || !(p > 0 && p < 1) || !(level > 0 && level < 1)) return {};
  const double tail = (1 - level) / 2 * (1 + 1e-12);  // as median_interval_rank: ties at the cut are allowed
  const double nd = static_cast<double>(n);
  const std::size_t mode = std::min(n, static_cast<std::size_t>(std::floor((nd + 1) * p)));
  const double md = static_cast<double>(mode);
  std::vector<double> pmf(n + 1, 0.0);
  pmf[mode] = std::exp(std::lgamma(nd + 1) - std::lgamma(md + 1) - std::lgamma(nd - md + 1) + md * std::log(p) +
                       (nd - md) * std::log1p(-p));
  const double odds = p / (1 - p);
  for (std::size_t k = mode + 1; k <= n; ++k)
    pmf[k] = pmf[k - 1] * (static_cast<double>(n - k + 1) / static_cast<double>(k)) * odds;
  for (std::size_t k = mode; k-- > 0;)
    pmf[k] = pmf[k + 1] * (static_cast<double>(k + 1) / static_cast<double>(n - k)) / odds;
  quantile_interval_ranks r;
  double below = 0;  // P(B <= r.lo - 1) for the r.lo reached so far
  while (r.lo < n && below + pmf[r.lo] <= tail) below += pmf[r.lo++];
  std::size_t hi = n + 1;
  double above = 0;  // P(B >= hi)
  while (hi > 1 && above + pmf[hi - 1] <= tail) above += pmf[--hi];
  if (r.lo == 0 || hi > n || r.lo > hi) return {};
  r.hi = hi;
  return r;
}

KSCOPE_DECL double fewest_arrangements_tail(std::size_t n1, std::size_t n2) noexcept {
  if (n1 == 0 || n2 == 0) return 1;
  const double n = static_cast<double>(n1 + n2);
  const double log_splits = std::lgamma(n + 1) - std::lgamma(static_cast<double>(n1) + 1) -
                            std::lgamma(static_cast<double>(n2) + 1);
  return std::exp(-log_splits);
}

KSCOPE_DECL bool mann_whitney_exact_fits(std::size_t n1, std::size_t n2) noexcept {
  if (n1 == 0 || n2 == 0) return false;
  const std::size_t small = std::min(n1, n2), large = std::max(n1, n2);
  if (large > 1000000 / small) return false;
  double arrangements = 1;
  for (std::size_t i = 1; i <= small; ++i) {
    arrangements = arrangements * static_cast<double>(large + i) / static_cast<double>(i);
    if (arrangements >= 0x1.0p52) return false;
  }
  return true;
}

KSCOPE_DECL std::vector<double> mann_whitney_counts(std::size_t n1, std::size_t n2) {
  const std::size_t small = std::min(n1, n2), large = std::max(n1, n2);
  std::vector<double> c(n1 * n2 + large + 2, 0.0);
  c[0] = 1;
  std::size_t degree = 0;
  for (std::size_t i = 1; i <= small; ++i) {
    const std::size_t a = large + i;
    for (std::size_t j = degree + a; j >= a; --j) c[j] -= c[j - a];  // times (1 - q^a)
    degree += a;
    for (std::size_t j = i; j <= degree; ++j) c[j] += c[j - i];  // divided by (1 - q^i)
    degree -= i;
  }
  c.resize(n1 * n2 + 1);
  return c;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Mann-Whitney U test on two sorted samples, two-sided.
struct mann_whitney_result {
  double u_first = stats_nan;  // U of the first sample (scipy's U1)
  double p_value = stats_nan;
  double tie_term = 0;         // sum over tie groups of t^3 - t
  bool exact = false;          // p from the exact distribution (no ties, small sizes)
};

KSCOPE_DECL mann_whitney_result mann_whitney_sorted(const std::vector<double>& x, const std::vector<double>& y);

// Puts the elements whose sorted positions are listed in [rank_first, rank_last)
// (ascending, unique, relative to the whole array that starts `offset` elements before
// `first`) at those positions: one nth_element per rank, each on a shrinking range.
KSCOPE_DECL void select_ranks(double* first, double* last, const std::size_t* rank_first, const std::size_t* rank_last,
                         std::size_t offset);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL mann_whitney_result mann_whitney_sorted(const std::vector<double>& x, const std::vector<double>& y) {
  mann_whitney_result r;
  const std::size_t n1 = x.size(), n2 = y.size();
  if (n1 == 0 || n2 == 0) return r;
  // Merge walk: each group of equal values gets the mean of the ranks it spans.
  double rank_sum_x = 0;
  std::size_t i = 0, j = 0, before = 0;
  while (i < n1 || j < n2) {
    const double v = (j == n2 || (i < n1 && x[i] <= y[j])) ? x[i] : y[j];
    std::size_t tx = 0, ty = 0;
    while (i < n1 && x[i] == v) ++i, ++tx;
    while (j < n2 && y[j] == v) ++j, ++ty;
    const double t = static_cast<double>(tx + ty);
    const double mid_rank = static_cast<double>(before) + (t + 1) / 2;
    rank_sum_x += static_cast<double>(tx) * mid_rank;
    if (tx + ty > 1) r.tie_term += t * t * t - t;
    before += tx + ty;
  }
  const double d1 = static_cast<double>(n1), d2 = static_cast<double>(n2);
  r.u_first = rank_sum_x - d1 * (d1 + 1) / 2;
  const double u_max = std::max(r.u_first, d1 * d2 - r.u_first);
  if (r.tie_term == 0 && mann_whitney_exact_fits(n1, n2)) {
    const std::vector<double> counts = mann_whitney_counts(n1, n2);
    double total = 0, upper = 0;
    const auto u_index = static_cast<std::size_t>(u_max);
    for (std::size_t u = 0; u < counts.size(); ++u) {
      total += counts[u];
      if (u >= u_index) upper += counts[u];
    }
    r.p_value = std::min(1.0, 2 * upper / total);
    r.exact = true;
    return r;
  }
  const double n = d1 + d2;
  const double variance = d1 * d2 / 12 * ((n + 1) - r.tie_term / (n * (n - 1)));
  if (!(variance > 0)) {
    r.p_value = 1;  // every value tied: no evidence of any difference
    return r;
  }
  const double z = (u_max - d1 * d2 / 2 - 0.5) / std::sqrt(variance);
  // No two-sided p below what the most extreme split gives (fewest_arrangements_tail): the
  // approximation goes under it for small samples with ties.
  r.p_value = std::min(1.0, std::max(2 * normal_upper_tail(z), 2 * fewest_arrangements_tail(n1, n2)));
  return r;
}

KSCOPE_DECL void select_ranks(double* first, double* last, const std::size_t* rank_first, const std::size_t* rank_last,
                         std::size_t offset) {
  while (rank_first != rank_last && first != last) {
    const std::size_t* mid = rank_first + (rank_last - rank_first) / 2;
    double* nth = first + (*mid - offset);
    std::nth_element(first, nth, last);
    select_ranks(first, nth, rank_first, mid, offset);
    // Tail call by hand: continue on the right part.
    first = nth + 1;
    rank_first = mid + 1;
    offset = *mid + 1;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Type 7 quantile (Hyndman & Fan; numpy.percentile's default): h = (n - 1) p,
// x_(floor h) + (h - floor h) (x_(floor h + 1) - x_(floor h)), 0-based order statistics.
struct type7_position {
  std::size_t lo;
  std::size_t hi;
  double fraction;
};
KSCOPE_DECL type7_position type7(std::size_t n, double p) noexcept;
// Interpolates between the two order statistics the way numpy does (exact at both ends).
KSCOPE_DECL double type7_value(double lo, double hi, double fraction) noexcept;

// The one type 7 quantile (kscope::quantile's definition) of values already in order:
// every median and percentile kscope prints goes through here or kscope::quantile, so a
// "median" means the same number in every table. p in [0, 1]; NaN when n == 0 or p is
// outside [0, 1] (NaN included). Only the two order statistics at positions
// type7(n, p).lo and .hi are read, so an array where just those two ranks are in place
// (after select_ranks) works as well as a sorted one. The values must be finite.
//   std::sort(v.begin(), v.end());
//   double median = kscope::detail::quantile_sorted(v.data(), v.size(), 0.5);
KSCOPE_DECL double quantile_sorted(const double* sorted, std::size_t n, double p) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL type7_position type7(std::size_t n, double p) noexcept {
  const double h = static_cast<double>(n - 1) * p;
  std::size_t lo = static_cast<std::size_t>(std::floor(h));
  if (lo > n - 1) lo = n - 1;
  const std::size_t hi = std::min(lo + 1, n - 1);
  return {lo, hi, h - static_cast<double>(lo)};
}

KSCOPE_DECL double type7_value(double lo, double hi, double fraction) noexcept {
  if (fraction == 0 || lo == hi) return lo;
  return fraction < 0.5 ? lo + fraction * (hi - lo) : hi - (1 - fraction) * (hi - lo);
}

KSCOPE_DECL double quantile_sorted(const double* sorted, std::size_t n, double p) noexcept {
  if (n == 0 || !(p >= 0 && p <= 1)) return stats_nan;
  const type7_position at = type7(n, p);
  return type7_value(sorted[at.lo], sorted[at.hi], at.fraction);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The k-th smallest (0-based) of the n*m differences b[j] - a[i] of two ascending
// arrays, without materialising them. The differences form a matrix sorted along
// both axes (rounding is monotone, so computed differences are too), so the number of
// them below any pivot is counted in O(n + m) with two pointers. Each round samples
// active entries at random, takes two pivots that bracket the wanted rank with high
// probability (Floyd-Rivest), and keeps, per row, only the columns between them; once
// few entries remain they are gathered and nth_element finishes. A round costs
// O(n + m) and keeps ~6 / sqrt(sample) of the candidates, so 1e6 x 1e6 takes ~4 rounds.
// Index is the column index type (uint32_t halves the per-row bookkeeping).
template <class Index>
double kth_pairwise_difference_rows(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t k) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<Index> lo(n, 0), hi(n, static_cast<Index>(m)), less_count(n), leq_count(n), leq_hi(n);
  std::vector<std::uint64_t> prefix(n + 1, 0);
  std::vector<double> sample;
  const std::uint64_t gather_limit = std::max<std::uint64_t>(static_cast<std::uint64_t>(n) + m, 1u << 16);
  splitmix64 rng(0x6b73636f70652d32ull ^ k);

  // Per-row counts of differences < pivot and <= pivot, and their totals.
  auto count = [&](double pivot, std::vector<Index>& less, std::vector<Index>& leq, std::uint64_t& total_less,
                   std::uint64_t& total_leq) {
    std::size_t j_less = 0, j_leq = 0;
    total_less = 0;
    total_leq = 0;
    for (std::size_t i = 0; i < n; ++i) {
      // a[i] grows with i, so every row's boundary is at or right of the previous one.
      // The pivot is an active entry, so the boundaries also lie within [lo, hi]: what
      // is left of lo is below every active entry, what is right of hi above.
      const std::size_t row_lo = lo[i], row_hi = hi[i];
      j_less = std::min(std::max(j_less, row_lo), row_hi);
      while (j_less < row_hi && b[j_less] - a[i] < pivot) ++j_less;
      j_leq = std::min(std::max(j_leq, j_less), row_hi);
      while (j_leq < row_hi && b[j_leq] - a[i] <= pivot) ++j_leq;
      less[i] = static_cast<Index>(j_less);
      leq[i] = static_cast<Index>(j_leq);
      total_less += j_less;
      total_leq += j_leq;
    }
  };

  for (;;) {
    std::uint64_t below = 0;
    for (std::size_t i = 0; i < n; ++i) {
      prefix[i + 1] = prefix[i] + (hi[i] - lo[i]);
      below += lo[i];
    }
    const std::uint64_t active = prefix[n];
    const std::uint64_t target = k - below;  // rank among the active entries
    if (active <= gather_limit) {
      std::vector<double> values;
      values.reserve(static_cast<std::size_t>(active));
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = lo[i]; j < hi[i]; ++j) values.push_back(b[j] - a[i]);
      auto nth = values.begin() + static_cast<std::ptrdiff_t>(target);
      std::nth_element(values.begin(), nth, values.end());
      return *nth;
    }
    // A larger sample brackets the rank more tightly (the kept band is ~6 / sqrt(size)
    // of the active entries); its cost stays small next to the O(n + m) counts.
    const std::size_t sample_size = std::min<std::size_t>(16384, std::max<std::size_t>(1024, (n + m) / 64));
    sample.clear();
    for (std::size_t s = 0; s < sample_size; ++s) {
      const std::uint64_t r = rng.below(active);
      const std::size_t row =
          static_cast<std::size_t>(std::upper_bound(prefix.begin(), prefix.end(), r) - prefix.begin()) - 1;
      const std::size_t col = lo[row] + static_cast<std::size_t>(r - prefix[row]);
      sample.push_back(b[col] - a[row]);
    }
    std::sort(sample.begin(), sample.end());
    const double t = (static_cast<double>(target) + 0.5) / static_cast<double>(active);
    const double size = static_cast<double>(sample_size);
    const double centre = t * size;
    const double spread = 3 * std::sqrt(size * t * (1 - t)) + 2;
    const auto clamp_rank = [&](double r) {
      return static_cast<std::size_t>(std::min<double>(static_cast<double>(sample_size - 1), std::max(0.0, r)));
    };
    const double pivot_lo = sample[clamp_rank(std::floor(centre - spread))];
    const double pivot_hi = sample[clamp_rank(std::ceil(centre + spread))];

    std::uint64_t less_total = 0, leq_total = 0;
    count(pivot_lo, less_count, leq_count, less_total, leq_total);
    if (k < less_total) {  // below both pivots (an unlucky sample)
      hi.swap(less_count);
      continue;
    }
    if (k < leq_total) return pivot_lo;
    // leq_count keeps the low pivot's boundaries; less_count is free for the high one.
    count(pivot_hi, less_count, leq_hi, less_total, leq_total);
    if (k >= leq_total) {  // above both pivots (an unlucky sample)
      lo.swap(leq_hi);
      continue;
    }
    if (k >= less_total) return pivot_hi;
    lo.swap(leq_count);  // strictly between the pivots: the usual case
    hi.swap(less_count);
  }
}

// k-th smallest (0-based) of { b[j] - a[i] }, a and b ascending; NaN when k is out of range.
KSCOPE_DECL double kth_pairwise_difference(const std::vector<double>& a, const std::vector<double>& b,
                                      std::uint64_t k);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double kth_pairwise_difference(const std::vector<double>& a, const std::vector<double>& b,
                                      std::uint64_t k) {
  const std::uint64_t total = static_cast<std::uint64_t>(a.size()) * b.size();
  if (a.empty() || b.empty() || k >= total) return stats_nan;
  // The bookkeeping is per row: make the shorter array the rows. a[i] - b[j] is exactly
  // -(b[j] - a[i]) in IEEE arithmetic, so the k-th of one is minus the mirrored rank of the other.
  if (a.size() > b.size()) return -kth_pairwise_difference(b, a, total - 1 - k);
  if (b.size() <= std::numeric_limits<std::uint32_t>::max())
    return kth_pairwise_difference_rows<std::uint32_t>(a, b, k);
  return kth_pairwise_difference_rows<std::size_t>(a, b, k);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
