// kscope/core/stats.hpp — warm-up aware summaries, median intervals and A/B comparison of
// timing samples. Pure functions on std::vector<double>: no CUDA, no I/O, no globals.
//
//   std::vector<double> ms = ...;                 // one timing per iteration, in order
//   kscope::summary s = kscope::summarize(ms);    // drops warm-up, median + 95 % CI
//   kscope::comparison c = kscope::compare(before_ms, after_ms);
//   if (c.result == kscope::verdict::slower) { /* regression beyond 2 % */ }
//
// Conventions, shared by every function here:
// * Non-finite samples (NaN, +-inf) are excluded and never throw: a timing that failed
//   to resolve must not take the host program down. Counts (n, warmup) refer to the
//   finite samples, in their original order; count_non_finite() says how many went.
// * Quantiles are Hyndman-Fan type 7 (linear interpolation between order statistics,
//   numpy.percentile's default); the median is the usual mid-point for even n. It is the
//   one definition in kscope: every other layer calls quantile() or, on sorted values,
//   detail::quantile_sorted().
// * Every verdict (compare, compare_summaries) comes from ratio_verdict() and is spelled
//   by to_string(verdict).
// * Nothing here allocates more than a few copies of the input; summarize() of 1e6
//   samples takes ~45 ms of CPU on a 2-core VM (bench/stats_bench.cpp).
// * No function throws except std::bad_alloc from copying the input.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "detail/reservoir.hpp"
#include "detail/stats_math.hpp"

namespace kscope {

// A confidence interval. An interval that cannot be formed honestly (too few samples
// for the level, empty input, invalid level) has lo = hi = NaN and keeps its level.
//   kscope::interval ci = kscope::median_ci(samples);   // ci.lo <= median <= ci.hi
//   bool known = !std::isnan(ci.lo);
struct interval {
  double lo = detail::stats_nan;
  double hi = detail::stats_nan;
  double level = 0.95;  // nominal coverage, e.g. 0.95
};

// Summary of a timing series after warm-up removal.
//   kscope::summary s = kscope::summarize(samples);
//   std::printf("%.3f ms [%.3f, %.3f] n=%zu (+%zu warm-up)%s\n", s.median, s.median_ci.lo,
//               s.median_ci.hi, s.n, s.warmup, s.steady ? "" : " NOT STEADY");
// Empty input: n = warmup = outliers = 0, every double NaN, steady = false.
// One sample: it is kept (warmup = 0): median = mean = min = max = p90 = p99 = it,
// mad = 0, stddev = NaN (undefined for n = 1), no interval.
struct summary {
  std::size_t n = 0;       // samples used after warm-up removal
  std::size_t warmup = 0;  // leading samples removed as warm-up
  double median = detail::stats_nan;
  double mean = detail::stats_nan;
  double stddev = detail::stats_nan;  // sample standard deviation (n - 1); NaN for n < 2
  double min = detail::stats_nan;
  double max = detail::stats_nan;
  double mad = detail::stats_nan;     // raw median absolute deviation (not scaled by 1.4826)
  double p90 = detail::stats_nan;     // type 7 quantiles
  double p99 = detail::stats_nan;
  interval median_ci;      // distribution-free, from order statistics
  std::size_t outliers = 0;  // beyond Tukey's fences Q1 - 1.5 IQR, Q3 + 1.5 IQR; counted, never dropped
  bool steady = false;     // false when no steady state was found (see find_steady_state)
};

// Options of summarize().
//   kscope::summary s = kscope::summarize(samples, {0.99, false});   // 99 % CI, keep all
struct stats_options {
  double level = 0.95;        // confidence level of median_ci
  bool detect_warmup = true;  // drop the warm-up found by warmup_length()
};

// Where a series becomes steady. See find_steady_state().
//   kscope::steady_state st = kscope::find_steady_state(samples);
//   if (!st.steady) std::puts("timings still drifting: run longer");
struct steady_state {
  std::size_t warmup = 0;  // leading finite samples that are warm-up
  bool steady = false;     // false: no steady state (the series trends to its end)
};

// How many samples are NaN or infinite (summarize, median_ci and compare exclude them).
//   if (kscope::count_non_finite(ms) > 0) warn("some timings failed");
[[nodiscard]] KSCOPE_DECL std::size_t count_non_finite(const std::vector<double>& samples) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t count_non_finite(const std::vector<double>& samples) noexcept {
  return static_cast<std::size_t>(
      std::count_if(samples.begin(), samples.end(), [](double x) { return !std::isfinite(x); }));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

KSCOPE_DECL std::vector<double> finite_only(const std::vector<double>& samples);

// Two-sided Mann-Whitney p-value of two unsorted ranges (copies and sorts them).
KSCOPE_DECL double mann_whitney_p(const double* x, std::size_t nx, const double* y, std::size_t ny);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<double> finite_only(const std::vector<double>& samples) {
  std::vector<double> out;
  out.reserve(samples.size());
  for (double x : samples)
    if (std::isfinite(x)) out.push_back(x);
  return out;
}

KSCOPE_DECL double mann_whitney_p(const double* x, std::size_t nx, const double* y, std::size_t ny) {
  std::vector<double> a(x, x + nx), b(y, y + ny);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return mann_whitney_sorted(a, b).p_value;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The batch size, the confirmation threshold and the drift tolerance of the
// steady-state test (see find_steady_state for why each exists).
constexpr std::size_t mser_batch = 5;
constexpr double mser_confirm_p = 1e-3;
constexpr double drift_tolerance = 0.02;

// Insertion sort for a handful of values: std::sort on a tiny fixed-size array trips
// g++'s -Warray-bounds at -O3 (a false positive, but -Werror builds must stay clean).
template <class T>
void sort_small(T* values, std::size_t count) noexcept {
  for (std::size_t i = 1; i < count; ++i)
    for (std::size_t j = i; j > 0 && values[j] < values[j - 1]; --j) std::swap(values[j - 1], values[j]);
}

// Sorts a handful of ranks and drops repeats; returns how many remain.
KSCOPE_DECL std::size_t sort_unique_ranks(std::size_t* ranks, std::size_t count) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t sort_unique_ranks(std::size_t* ranks, std::size_t count) noexcept {
  sort_small(ranks, count);
  std::size_t unique = 0;
  for (std::size_t i = 0; i < count; ++i)
    if (unique == 0 || ranks[unique - 1] != ranks[i]) ranks[unique++] = ranks[i];
  return unique;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Clamps to [lo, hi]; the default range clamps nothing.
struct clip_range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  double operator()(double x) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double clip_range::operator()(double x) const noexcept { return std::min(hi, std::max(lo, x)); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Whether the level of a (warm-up free) series moves between its first and last
// quarter. MSER only looks for a transient at the start: a series that accelerates
// (1 + t^3, exp(t)) or shifts level late in the run has its variance at the end, so
// every truncation looks worse than none and MSER calls it steady. Each quarter is cut
// into 10 batches whose means (of winsorised samples, as for MSER) absorb short-range
// autocorrelation that would fool a test on raw samples. Drift means both: the medians
// of the two quarters' batch means are more than 2 % apart (compare()'s default
// threshold, so noise-level wander on huge n does not count), and a two-sided
// Mann-Whitney test on the batch means gives p < 1e-3. One O(n) pass, no copies.
KSCOPE_DECL bool drifts(const double* x, std::size_t n, const clip_range& clip);

// find_steady_state on samples that are all finite.
KSCOPE_DECL steady_state find_steady_state_finite(const double* x, std::size_t m);

// Fills the statistics of x[0..n) (finite, n >= 1) into out; permutes x.
KSCOPE_DECL void describe(double* x, std::size_t n, double level, summary& out);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool drifts(const double* x, std::size_t n, const clip_range& clip) {
  constexpr std::size_t batches_per_quarter = 10;
  const std::size_t quarter = n / 4;
  if (quarter < batches_per_quarter) return false;
  const std::size_t batch = quarter / batches_per_quarter;
  double early[batches_per_quarter], late[batches_per_quarter];
  for (std::size_t b = 0; b < batches_per_quarter; ++b) {
    double sum_early = 0, sum_late = 0;
    for (std::size_t i = 0; i < batch; ++i) {
      sum_early += clip(x[b * batch + i]);
      sum_late += clip(x[n - quarter + b * batch + i]);
    }
    early[b] = sum_early / static_cast<double>(batch);
    late[b] = sum_late / static_cast<double>(batch);
  }
  auto median10 = [](double* v) {
    sort_small(v, batches_per_quarter);
    return quantile_sorted(v, batches_per_quarter, 0.5);
  };
  double sorted_early[batches_per_quarter], sorted_late[batches_per_quarter];
  std::copy(early, early + batches_per_quarter, sorted_early);
  std::copy(late, late + batches_per_quarter, sorted_late);
  const double first = median10(sorted_early), last = median10(sorted_late);
  const double scale = std::max(std::fabs(first), std::fabs(last));
  if (!(std::fabs(last - first) > drift_tolerance * scale)) return false;
  return mann_whitney_p(early, batches_per_quarter, late, batches_per_quarter) < mser_confirm_p;
}

KSCOPE_DECL steady_state find_steady_state_finite(const double* x, std::size_t m) {
  if (m == 0) return {0, false};
  if (m == 1) return {0, true};
  // The first sample is always warm-up (module load, first-touch, JIT).
  const double* s = x + 1;
  const std::size_t length = m - 1;
  const std::size_t batches = length / mser_batch;
  if (batches < 2) return {1, true};  // too short to tell: nothing contradicts steadiness

  // Winsorise at Tukey's far-out fences (3 IQR) of the second half: a lone 50x spike
  // (preemption, page fault) otherwise dominates the batch variances and MSER cuts the
  // series right after it. Fences from the second half so a long transient does not
  // widen them; skipped when IQR = 0 (quantised clocks) so a transient is never flattened.
  // A clipping fence needs no precision: past 8192 samples the quartiles come from an
  // evenly strided subset, which keeps this O(n) pass cheap on 1e6 samples.
  const std::size_t half_length = length - length / 2;
  const std::size_t stride = std::max<std::size_t>(1, half_length / 8192);
  std::vector<double> half;
  half.reserve(half_length / stride + 1);
  for (std::size_t i = length / 2; i < length; i += stride) half.push_back(s[i]);
  const type7_position q1 = type7(half.size(), 0.25), q3 = type7(half.size(), 0.75);
  std::size_t ranks[4] = {q1.lo, q1.hi, q3.lo, q3.hi};
  const std::size_t unique_ranks = sort_unique_ranks(ranks, 4);
  select_ranks(half.data(), half.data() + half.size(), ranks, ranks + unique_ranks, 0);
  const double quartile1 = type7_value(half[q1.lo], half[q1.hi], q1.fraction);
  const double quartile3 = type7_value(half[q3.lo], half[q3.hi], q3.fraction);
  const double iqr = quartile3 - quartile1;
  clip_range clip;
  if (iqr > 0) clip = clip_range{quartile1 - 3 * iqr, quartile3 + 3 * iqr};
  std::vector<double> means(batches);
  for (std::size_t b = 0; b < batches; ++b) {
    double sum = 0;
    for (std::size_t i = 0; i < mser_batch; ++i) sum += clip(s[b * mser_batch + i]);
    means[b] = sum / static_cast<double>(mser_batch);
  }

  // MSER(d) = sum_{j >= d} (Z_j - mean_d)^2 / (k - d)^2 over batch means Z, for every
  // truncation d, in one backward Welford sweep (O(k), no cancellation). The search
  // stops where a quarter of the batches (at least 2) would remain: with a handful of
  // batches left the statistic is a variance of a few numbers and is often tiny by chance.
  const std::size_t keep = std::max<std::size_t>((batches + 3) / 4, 2);
  const std::size_t last_d = batches > keep ? batches - keep : 0;
  const std::size_t half_d = batches / 2;
  double mean = 0, m2 = 0;
  double best = std::numeric_limits<double>::infinity(), best_half = best;
  std::size_t d_best = 0, d_half = 0;
  for (std::size_t j = batches; j-- > 0;) {
    const double count = static_cast<double>(batches - j);
    const double delta = means[j] - mean;
    mean += delta / count;
    m2 += delta * (means[j] - mean);
    if (j > last_d) continue;
    const double mser = m2 / (count * count);
    if (mser <= best) best = mser, d_best = j;  // <=: ties go to the shorter truncation
    if (j <= half_d && mser <= best_half) best_half = mser, d_half = j;
  }
  std::size_t d_steady = d_best;
  if (d_best > half_d) {
    // MSER's optimum lies past half the series: the classic "no steady state" signal.
    // Confirm it: the part MSER would drop beyond the first-half optimum must differ
    // from the retained tail (Mann-Whitney, p < 1e-3). On stationary series the
    // unconfirmed rule fires in 3-30 % of short runs (MSER's end effect); the confirmed
    // one in < 1 %.
    const std::size_t from = mser_batch * d_half, cut = mser_batch * d_best;
    if (mann_whitney_p(s + from, cut - from, s + cut, length - cut) < mser_confirm_p) return {1, false};
    d_steady = d_half;
  }
  const std::size_t warmup = 1 + mser_batch * d_steady;
  if (drifts(x + warmup, m - warmup, clip)) return {1, false};
  return {warmup, true};
}

KSCOPE_DECL void describe(double* x, std::size_t n, double level, summary& out) {
  out.n = n;
  out.median_ci = interval{stats_nan, stats_nan, level};
  compensated_sum sum;
  double lo = x[0], hi = x[0];
  for (std::size_t i = 0; i < n; ++i) {
    sum.add(x[i]);
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  out.min = lo;
  out.max = hi;
  out.mean = sum.value() / static_cast<double>(n);
  // Every value is finite, so the mean and the spread are too: a sum or a square that went
  // past the largest double (values near 1e308) is taken again on values scaled to the
  // largest magnitude, instead of printing NaN or inf for finite samples.
  const double scale = std::max(std::fabs(lo), std::fabs(hi));
  if (!std::isfinite(out.mean)) {
    compensated_sum scaled;
    for (std::size_t i = 0; i < n; ++i) scaled.add(x[i] / scale);
    out.mean = scaled.value() / static_cast<double>(n) * scale;
  }
  if (n >= 2) {
    compensated_sum squares;  // two-pass: exact-ish even when the spread is tiny
    for (std::size_t i = 0; i < n; ++i) squares.add((x[i] - out.mean) * (x[i] - out.mean));
    out.stddev = std::sqrt(squares.value() / static_cast<double>(n - 1));
    if (!std::isfinite(out.stddev)) {
      compensated_sum scaled_squares;
      for (std::size_t i = 0; i < n; ++i) {
        const double d = x[i] / scale - out.mean / scale;
        scaled_squares.add(d * d);
      }
      out.stddev = std::sqrt(scaled_squares.value() / static_cast<double>(n - 1)) * scale;
    }
  }

  // Every order statistic needed, selected in one multi-rank pass. Only the lower
  // neighbour of each type 7 pair is selected: once the ranks are in place, the upper
  // one is the smallest element between its rank and the next selected one, a scan
  // that costs a third of another nth_element.
  const double probabilities[] = {0.25, 0.5, 0.75, 0.9, 0.99};
  type7_position at[5];
  std::size_t ranks[7];
  std::size_t rank_count = 0;
  for (int i = 0; i < 5; ++i) {
    at[i] = type7(n, probabilities[i]);
    ranks[rank_count++] = at[i].lo;
  }
  const std::size_t k = median_interval_rank(n, level);
  if (k >= 1) {
    ranks[rank_count++] = k - 1;
    ranks[rank_count++] = n - k;
  }
  rank_count = sort_unique_ranks(ranks, rank_count);
  select_ranks(x, x + n, ranks, ranks + rank_count, 0);
  auto upper_neighbour = [&](std::size_t rank) {
    if (rank + 1 >= n) return x[rank];
    const std::size_t* next = std::upper_bound(ranks, ranks + rank_count, rank);
    const std::size_t end = next == ranks + rank_count ? n : *next + 1;  // *next is in place
    return *std::min_element(x + rank + 1, x + end);
  };
  double q[5];
  for (int i = 0; i < 5; ++i)
    q[i] = at[i].fraction == 0 ? x[at[i].lo] : type7_value(x[at[i].lo], upper_neighbour(at[i].lo), at[i].fraction);
  out.median = q[1];
  out.p90 = q[3];
  out.p99 = q[4];
  if (k >= 1) out.median_ci = interval{x[k - 1], x[n - k], level};

  const double iqr = q[2] - q[0];
  const double fence_lo = q[0] - 1.5 * iqr, fence_hi = q[2] + 1.5 * iqr;
  out.outliers = static_cast<std::size_t>(
      std::count_if(x, x + n, [&](double v) { return v < fence_lo || v > fence_hi; }));

  // MAD: the median of |x - median|, same median definition.
  for (std::size_t i = 0; i < n; ++i) x[i] = std::fabs(x[i] - out.median);
  const type7_position mid = type7(n, 0.5);
  std::nth_element(x, x + mid.lo, x + n);
  const double mad_lo = x[mid.lo];
  const double mad_hi = mid.hi == mid.lo ? mad_lo : *std::min_element(x + mid.lo + 1, x + n);
  out.mad = type7_value(mad_lo, mad_hi, mid.fraction);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Finds the end of the warm-up transient, and whether the series is steady at all.
//   kscope::steady_state st = kscope::find_steady_state(samples);
// The rule (MSER-5 plus three safeguards; the implementation's comments say why):
// * The first sample is always warm-up, unless it is the only one.
// * On the rest, MSER-5 (White 1997): batch means of 5, truncation d* minimising the
//   MSER statistic (about the squared standard error of the mean of what remains), searched
//   while at least a quarter of the batches remain. Batches are winsorised at 3 IQR of
//   the second half first, so isolated spikes do not pass for a transient.
// * d* within the first half: warmup = 1 + 5 d*, steady = true.
// * d* past half the series means no steady state, once confirmed: the samples between
//   the first-half optimum and d* must differ from the tail (two-sided Mann-Whitney,
//   p < 0.001). Confirmed: warmup = 1, steady = false. Not confirmed (a chance low
//   variance near the end): treated as steady with the first-half optimum.
// * A drift after the warm-up also means no steady state (warmup = 1, steady = false):
//   the first and last quarter of what remains, as 10 batch means each, have medians
//   more than 2 % apart and differ at p < 0.001 (needs 40 samples after the warm-up).
//   This catches what MSER cannot: accelerating trends and late level shifts.
// * Fewer than 11 finite samples: too few to test; warmup = 1 (0 for a single sample),
//   steady = true. Empty: warmup = 0, steady = false.
// Measured on fixed-seed simulations: independent log-normal noise (30 to 1000 samples)
// is called unsteady in <= 0.1 % of runs, AR(1) noise with correlation <= 0.7 in
// <= 2.5 %; linear, square-root, log, quadratic, cubic and exponential trends and level
// steps past 60 % of a run of 100+ samples always. Strongly autocorrelated noise
// (AR(1) 0.9, 200 samples) is called unsteady in ~15 % of runs: its level wanders.
// Non-finite samples are skipped; warmup counts finite samples. O(n) time.
[[nodiscard]] KSCOPE_DECL steady_state find_steady_state(const std::vector<double>& samples);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL steady_state find_steady_state(const std::vector<double>& samples) {
  const std::vector<double> finite = detail::finite_only(samples);
  return detail::find_steady_state_finite(finite.data(), finite.size());
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Leading samples that are warm-up: find_steady_state(samples).warmup, which is what
// summarize() drops. Without a steady state it is 1 (only the first sample).
//   std::size_t w = kscope::warmup_length(samples);
[[nodiscard]] KSCOPE_DECL std::size_t warmup_length(const std::vector<double>& samples);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t warmup_length(const std::vector<double>& samples) {
  return find_steady_state(samples).warmup;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Median, spread, quantiles, outliers and a distribution-free median interval of the
// steady part of a timing series.
//   kscope::summary s = kscope::summarize(samples);          // 95 %, warm-up removed
//   kscope::summary all = kscope::summarize(samples, {0.95, false});
// With detect_warmup, the first warmup_length(samples) finite samples are dropped.
// When there is no steady state (steady = false) only the first sample is dropped and
// everything else is summarised, so the numbers describe the whole drifting run;
// treat them as such. With detect_warmup = false nothing is dropped, but steady is
// still evaluated (it costs O(n)). NaN/inf samples are excluded (count_non_finite).
// An invalid level (not in (0, 1)) gives a NaN median_ci; everything else is computed.
// Cost: O(n) expected (selection, no full sort); 1e6 samples in ~45 ms of CPU.
[[nodiscard]] KSCOPE_DECL summary summarize(const std::vector<double>& samples, stats_options options = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL summary summarize(const std::vector<double>& samples, stats_options options) {
  summary out;
  out.median_ci.level = options.level;
  std::vector<double> work = detail::finite_only(samples);
  if (work.empty()) return out;
  const steady_state st = detail::find_steady_state_finite(work.data(), work.size());
  out.steady = st.steady;
  out.warmup = options.detect_warmup ? st.warmup : 0;
  detail::describe(work.data() + out.warmup, work.size() - out.warmup, options.level, out);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Distribution-free confidence interval of the median: order statistics
// [x_(k), x_(n-k+1)] with k the largest rank such that P(B <= k - 1) <= (1 - level) / 2
// for B ~ Binomial(n, 1/2) (exact for n <= 1000, continuity-corrected normal
// approximation above). The coverage is at least `level` for any continuous
// distribution. E.g. n = 20 at 95 %: ranks 6 and 15. Too few samples for the level
// (fewer than 6 at 95 %, 8 at 99 %), an invalid level or empty input: lo = hi = NaN,
// level kept — never a made-up interval. NaN/inf samples are excluded. No warm-up
// removal here: pass steady samples. O(n).
//   kscope::interval ci = kscope::median_ci(samples);          // 95 %
//   kscope::interval ci99 = kscope::median_ci(samples, 0.99);
[[nodiscard]] KSCOPE_DECL interval median_ci(std::vector<double> samples, double level = 0.95);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL interval median_ci(std::vector<double> samples, double level) {
  interval out{detail::stats_nan, detail::stats_nan, level};
  samples.erase(std::remove_if(samples.begin(), samples.end(), [](double x) { return !std::isfinite(x); }),
                samples.end());
  const std::size_t n = samples.size();
  const std::size_t k = detail::median_interval_rank(n, level);
  if (k == 0) return out;
  const std::size_t ranks[2] = {k - 1, n - k};
  detail::select_ranks(samples.data(), samples.data() + n, ranks, ranks + (ranks[0] == ranks[1] ? 1 : 2), 0);
  out.lo = samples[k - 1];
  out.hi = samples[n - k];
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Type 7 quantile (numpy.percentile's default) of the finite samples; p in [0, 1].
// NaN for empty input or p outside [0, 1]. O(n).
//   double p95 = kscope::quantile(samples, 0.95);
// Values already sorted: detail::quantile_sorted (same definition, O(1)).
[[nodiscard]] KSCOPE_DECL double quantile(std::vector<double> samples, double p);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double quantile(std::vector<double> samples, double p) {
  samples.erase(std::remove_if(samples.begin(), samples.end(), [](double x) { return !std::isfinite(x); }),
                samples.end());
  if (samples.empty() || !(p >= 0 && p <= 1)) return detail::stats_nan;
  // Selection puts the two order statistics type 7 reads in place (no full sort);
  // quantile_sorted reads only those two.
  const detail::type7_position at = detail::type7(samples.size(), p);
  const std::size_t ranks[2] = {at.lo, at.hi};
  detail::select_ranks(samples.data(), samples.data() + samples.size(), ranks, ranks + (at.lo == at.hi ? 1 : 2), 0);
  return detail::quantile_sorted(samples.data(), samples.size(), p);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The fewest samples for which kscope calls quantile(samples, p) an estimate of the
// p-quantile: 1 / min(p, 1 - p), rounded up (p50: 2, p90: 10, p99: 100, p99.9: 1000).
// With fewer, less than one sample is expected beyond the quantile, and the type 7 value
// is the sample's extreme relabelled: a "p99" of 40 requests is their slowest one. 1 for
// p = 0 or 1 (the minimum and maximum); SIZE_MAX (never enough) for p outside [0, 1].
//   if (ttft_ms.size() < kscope::quantile_min_samples(0.99)) std::puts("p99: too few requests");
[[nodiscard]] KSCOPE_DECL std::size_t quantile_min_samples(double p) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t quantile_min_samples(double p) noexcept {
  if (!(p >= 0 && p <= 1)) return std::numeric_limits<std::size_t>::max();
  const double smaller = std::min(p, 1 - p);
  if (smaller <= 0) return 1;
  // The tolerance absorbs rounding: 1 - 0.9 is 0.09999999999999998, and p90 needs 10.
  return static_cast<std::size_t>(std::ceil(1 / smaller - 1e-9));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Distribution-free confidence interval of the p-quantile (p in (0, 1)): order statistics
// [x_(lo), x_(hi)] with the ranks from exact Binomial(n, p) tails, (1 - level) / 2 on
// each side, so the coverage is at least `level` for any continuous distribution. The
// median's interval is median_ci's (p = 0.5 returns exactly median_ci). Tails need many
// samples: at 95 %, p99 needs 368 (0.99^n <= 2.5 %), p90 needs 36; with fewer, an
// invalid level, p outside (0, 1) or empty input: lo = hi = NaN, level kept — never a
// one-sided or made-up interval. NaN/inf samples are excluded; no warm-up removal. O(n).
//   kscope::interval p99 = kscope::quantile_ci(ttft_ms, 0.99);   // n = 400: ranks 392, 400
[[nodiscard]] KSCOPE_DECL interval quantile_ci(std::vector<double> samples, double p, double level = 0.95);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL interval quantile_ci(std::vector<double> samples, double p, double level) {
  if (p == 0.5) return median_ci(std::move(samples), level);
  interval out{detail::stats_nan, detail::stats_nan, level};
  samples.erase(std::remove_if(samples.begin(), samples.end(), [](double x) { return !std::isfinite(x); }),
                samples.end());
  const detail::quantile_interval_ranks r = detail::quantile_interval_rank(samples.size(), p, level);
  if (r.lo == 0) return out;
  const std::size_t ranks[2] = {r.lo - 1, r.hi - 1};
  detail::select_ranks(samples.data(), samples.data() + samples.size(), ranks, ranks + (ranks[0] == ranks[1] ? 1 : 2),
                       0);
  out.lo = samples[r.lo - 1];
  out.hi = samples[r.hi - 1];
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- stopping rule ---------------------------------------------------------------

// Half the width of an interval relative to a centre value: (hi - lo) / (2 |centre|).
// +infinity when it cannot be judged (NaN bounds, non-finite or zero centre with a
// non-empty interval), so "keep sampling" is the natural reading. 0 for [c, c].
//   double rel = kscope::relative_half_width(s.median_ci, s.median);   // 0.004 = +-0.4 %
[[nodiscard]] KSCOPE_DECL double relative_half_width(const interval& ci, double centre) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double relative_half_width(const interval& ci, double centre) noexcept {
  const double inf = std::numeric_limits<double>::infinity();
  if (!std::isfinite(ci.lo) || !std::isfinite(ci.hi) || !std::isfinite(centre) || ci.hi < ci.lo) return inf;
  const double half = (ci.hi - ci.lo) / 2;
  if (half == 0) return 0;
  if (centre == 0) return inf;
  return half / std::fabs(centre);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Whether a summary's median is known well enough to stop sampling: steady, and the
// median interval's relative half-width is at most relative_target (0.01 = +-1 %).
//   if (kscope::precise_enough(kscope::summarize(samples), 0.005)) break;
[[nodiscard]] KSCOPE_DECL bool precise_enough(const summary& s, double relative_target = 0.01) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool precise_enough(const summary& s, double relative_target) noexcept {
  return s.steady && relative_half_width(s.median_ci, s.median) <= relative_target;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The stopping rule of a sampling loop: summarize(samples) at `level` (warm-up
// removed, as the report will) and precise_enough() on it. O(n) per call.
//   while (!kscope::precise_enough(samples, 0.01) && budget_left()) samples.push_back(time_once());
[[nodiscard]] KSCOPE_DECL bool precise_enough(const std::vector<double>& samples, double relative_target = 0.01,
                                         double level = 0.95);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool precise_enough(const std::vector<double>& samples, double relative_target,
                                         double level) {
  return precise_enough(summarize(samples, stats_options{level, true}), relative_target);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- comparing two runs ----------------------------------------------------------

// The verdict of compare(), for times (larger is worse).
//   if (c.result == kscope::verdict::slower) fail_the_build();
enum class verdict { faster, slower, same, inconclusive };

// "faster", "slower", "same" or "inconclusive".
//   std::printf("%s\n", kscope::to_string(c.result));
[[nodiscard]] constexpr const char* to_string(verdict v) noexcept {
  switch (v) {
    case verdict::faster: return "faster";
    case verdict::slower: return "slower";
    case verdict::same: return "same";
    case verdict::inconclusive: return "inconclusive";
  }
  return "inconclusive";
}

// Result of compare(baseline, candidate).
//   kscope::comparison c = kscope::compare(old_ms, new_ms);
//   std::printf("x%.3f [%.3f, %.3f] p=%.2g %s\n", c.ratio, c.ratio_ci.lo, c.ratio_ci.hi,
//               c.p_value, kscope::to_string(c.result));
struct comparison {
  double ratio = detail::stats_nan;  // candidate median / baseline median (time: >1 is slower)
  interval ratio_ci;                 // Hodges-Lehmann interval of the ratio (see compare)
  double p_value = detail::stats_nan;  // two-sided Mann-Whitney
  verdict result = verdict::inconclusive;
};

// Options of compare(). threshold is the smallest relative change that matters.
//   kscope::compare(a, b, {0.01, 0.05, 0.99});   // alpha 1 %, +-5 % band, 99 % interval
struct compare_options {
  double alpha = 0.05;      // significance level of the Mann-Whitney test
  double threshold = 0.02;  // relative change below which runs count as the same
  double level = 0.95;      // confidence level of ratio_ci
};

// The one rule that turns an interval of a time ratio (candidate / baseline, so > 1 is
// slower) into a verdict. compare() and compare_summaries() decide with it, so every
// verdict kscope prints (stats, bench, the `kscope compare` gate) means the same thing:
//   slower        significant and ratio_ci.lo > 1 + threshold
//   faster        significant and ratio_ci.hi < 1 - threshold
//   same          the whole interval lies in [1 - threshold, 1 + threshold]
//   inconclusive  anything else: the interval reaches past a band edge, a NaN
//                 interval, a negative or NaN threshold
// "same" needs no significance test: an interval inside the band already bounds the
// change; a claimed change needs both the test and an interval clear of the band.
//   kscope::ratio_verdict({0.99, 1.01, 0.95}, 0.02, false);   // verdict::same
//   kscope::ratio_verdict({1.05, 1.09, 0.95}, 0.02, true);    // verdict::slower
[[nodiscard]] constexpr verdict ratio_verdict(const interval& ratio_ci, double threshold, bool significant) noexcept {
  if (!(threshold >= 0)) return verdict::inconclusive;
  if (significant && ratio_ci.lo > 1 + threshold) return verdict::slower;
  if (significant && ratio_ci.hi < 1 - threshold) return verdict::faster;
  if (ratio_ci.lo >= 1 - threshold && ratio_ci.hi <= 1 + threshold) return verdict::same;
  return verdict::inconclusive;
}

// Compares two timing samples (e.g. before and after a change).
//   kscope::comparison c = kscope::compare(baseline_ms, candidate_ms);
// * Samples are used as given (no warm-up removal: drop summarize(x).warmup leading
//   samples first if the series have warm-up). Only finite, positive values count:
//   a time of 0 or less is a broken measurement, and the ratio works on log times.
// * ratio = median(candidate) / median(baseline).
// * p_value: two-sided Mann-Whitney U test. Exact null distribution when there are no
//   ties and C(n1 + n2, n1) < 2^52 (e.g. up to 27 vs 27, 10 vs 160, 5 vs 3500);
//   otherwise the normal approximation with tie correction and continuity correction
//   (scipy.stats.mannwhitneyu's 'exact' / 'asymptotic' methods, identical numbers), but
//   never below 2 / C(n1 + n2, n1): under the null no split of the pooled samples is rarer
//   than that, so a smaller p (ties at 3 vs 3 gave 0.047 against a least possible 0.1)
//   cannot be true. The exact table also needs n1 n2 <= 10^6 (1 vs 1 000 001: the
//   approximation).
// * ratio_ci: the Hodges-Lehmann interval for the shift of log times,
//   exp([D_(k), D_(n1 n2 - k + 1)]) over the sorted pairwise differences
//   D = log(candidate_j) - log(baseline_i), with k from the null distribution of U
//   (exact when the p-value is exact, else the tie-corrected normal approximation with
//   continuity correction). The n1 * n2 differences are never materialised: the k-th
//   is found by selection in O((n1 + n2) log) time and O(n1 + n2) memory. Cost is
//   dominated by sorting both inputs and two selections: ~1 ms for 1e3 vs 1e3, ~60 ms
//   for 1e5 vs 1e5, ~1 s for 1e6 vs 1e6 on a 2-core VM (bench/stats_bench.cpp).
// * result: ratio_verdict(ratio_ci, threshold, p < alpha): slower when p < alpha and
//   ratio_ci.lo > 1 + threshold; faster when p < alpha and ratio_ci.hi < 1 - threshold;
//   same when the whole interval lies in [1 - threshold, 1 + threshold]; otherwise
//   inconclusive.
// * Empty input: everything NaN, inconclusive. Too few samples for an interval at
//   `level` (e.g. 3 vs 3 at 95 %, 1 / C(6, 3) = 0.05 > 0.025, with ties or without): the
//   p-value is computed, ratio_ci is NaN and the result inconclusive. Invalid options (alpha or level outside (0, 1), negative or
//   NaN threshold): NaN interval, inconclusive.
[[nodiscard]] KSCOPE_DECL comparison compare(const std::vector<double>& baseline, const std::vector<double>& candidate,
                                        compare_options options = {});

// Whether compare()'s ratio of medians lies outside its own ratio_ci. The two estimate one
// ratio only while the timings differ in scale alone; when they differ in shape (one is
// spread out, or has a second mode) the median ratio can fall outside the Hodges-Lehmann
// interval, and printing both side by side would contradict itself: a caller that shows
// both says which one its verdict rests on (result is always the interval's). False when
// either is NaN (nothing claimed) or the ratio sits on an end within rounding (the ends
// come through log and exp).
//   std::vector<double> a(10, 1.0), b(11, 1.0); a.insert(a.end(), 11, 2.0); b.insert(b.end(), 10, 2.0);
//   kscope::ratio_outside_interval(kscope::compare(a, b));   // true: ratio 0.5, interval at 1
[[nodiscard]] constexpr bool ratio_outside_interval(const comparison& c) noexcept {
  if (!(c.ratio == c.ratio) || !(c.ratio_ci.lo == c.ratio_ci.lo) || !(c.ratio_ci.hi == c.ratio_ci.hi)) return false;
  const double rounding = 1e-9 * (c.ratio < 0 ? -c.ratio : c.ratio);
  return c.ratio < c.ratio_ci.lo - rounding || c.ratio > c.ratio_ci.hi + rounding;
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL comparison compare(const std::vector<double>& baseline, const std::vector<double>& candidate,
                                        compare_options options) {
  comparison out;
  out.ratio_ci.level = options.level;
  auto usable = [](const std::vector<double>& v) {
    std::vector<double> kept;
    kept.reserve(v.size());
    for (double t : v)
      if (std::isfinite(t) && t > 0) kept.push_back(t);
    std::sort(kept.begin(), kept.end());
    return kept;
  };
  const std::vector<double> x = usable(baseline), y = usable(candidate);
  if (x.empty() || y.empty()) return out;
  out.ratio = detail::quantile_sorted(y.data(), y.size(), 0.5) / detail::quantile_sorted(x.data(), x.size(), 0.5);
  const detail::mann_whitney_result test = detail::mann_whitney_sorted(x, y);
  out.p_value = test.p_value;

  const bool options_valid = options.alpha > 0 && options.alpha < 1 && options.level > 0 && options.level < 1 &&
                             options.threshold >= 0;
  if (!options_valid) return out;

  // Rank k (1-based) of the lower bound among the n1 n2 ordered differences.
  const std::size_t n1 = x.size(), n2 = y.size();
  const std::uint64_t pairs = static_cast<std::uint64_t>(n1) * n2;
  const double tail = (1 - options.level) / 2;
  std::uint64_t k = 0;
  if (test.exact) {
    const std::vector<double> counts = detail::mann_whitney_counts(n1, n2);
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    double cumulative = counts[0];  // P(U <= k) * total for the k being tested
    while (k < pairs && cumulative <= tail * total * (1 + 1e-12)) {
      ++k;
      cumulative += counts[static_cast<std::size_t>(k)];
    }
  } else {
    const double d1 = static_cast<double>(n1), d2 = static_cast<double>(n2), n = d1 + d2;
    const double variance = d1 * d2 / 12 * ((n + 1) - test.tie_term / (n * (n - 1)));
    const double r = std::floor(d1 * d2 / 2 + 0.5 - detail::normal_quantile(1 - tail) * std::sqrt(variance));
    k = r < 1 ? 0 : static_cast<std::uint64_t>(r);
  }
  k = std::min(k, (pairs + 1) / 2);
  // No interval rests on fewer arrangements than it claims: under the null each of the
  // C(n1 + n2, n1) splits of the pooled samples is equally likely, so the most extreme
  // difference leaves at least 1 / C outside on each side. Ties make the approximation
  // above give k >= 1 from as little as 1 vs 1 (quantised clocks): none then.
  if (detail::fewest_arrangements_tail(n1, n2) > tail * (1 + 1e-12)) k = 0;
  if (k == 0) return out;

  std::vector<double> log_x(n1), log_y(n2);
  std::transform(x.begin(), x.end(), log_x.begin(), [](double v) { return std::log(v); });
  std::transform(y.begin(), y.end(), log_y.begin(), [](double v) { return std::log(v); });
  // log is monotone, but a libm is not obliged to keep it so to the last ulp.
  if (!std::is_sorted(log_x.begin(), log_x.end())) std::sort(log_x.begin(), log_x.end());
  if (!std::is_sorted(log_y.begin(), log_y.end())) std::sort(log_y.begin(), log_y.end());
  const double d_lo = detail::kth_pairwise_difference(log_x, log_y, k - 1);
  const double d_hi = detail::kth_pairwise_difference(log_x, log_y, pairs - k);
  out.ratio_ci.lo = std::exp(d_lo);
  out.ratio_ci.hi = std::exp(d_hi);

  out.result = ratio_verdict(out.ratio_ci, options.threshold, out.p_value < options.alpha);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Compares two summaries when the samples are gone: a report keeps each scope's
// summary, not its samples, so `kscope compare` judges two reports with this.
//   kscope::comparison c = kscope::compare_summaries(baseline.host_ns, candidate.host_ns);
//   if (c.result == kscope::verdict::slower) fail_the_build();
// * ratio = candidate.median / baseline.median (NaN unless both and their ratio are positive
//   and finite).
// * ratio_ci = [candidate.median_ci.lo / baseline.median_ci.hi,
//   candidate.median_ci.hi / baseline.median_ci.lo]. It holds the ratio of the true
//   medians whenever both median intervals hold theirs, so its level is at least the
//   product of theirs (0.9025 for two independent 95 % intervals), the level it carries.
//   Wider than compare()'s interval on the samples: the price of having no samples.
// * p_value: NaN, there are no samples to test. The interval stands in for the test:
//   an interval that excludes 1 means the two median intervals do not overlap.
// * result: ratio_verdict(ratio_ci, threshold, ratio_ci excludes 1).
// * A missing interval (fewer than 6 samples at 95 %), or a bound that is not positive
//   and finite: NaN interval, inconclusive. A negative or NaN threshold: inconclusive.
[[nodiscard]] KSCOPE_DECL comparison compare_summaries(const summary& baseline, const summary& candidate,
                                                  double threshold = compare_options{}.threshold) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL comparison compare_summaries(const summary& baseline, const summary& candidate,
                                                  double threshold) noexcept {
  comparison out;
  const auto positive = [](double x) { return std::isfinite(x) && x > 0; };
  if (positive(baseline.median) && positive(candidate.median) && positive(candidate.median / baseline.median))
    out.ratio = candidate.median / baseline.median;
  out.ratio_ci.level = baseline.median_ci.level * candidate.median_ci.level;
  if (!positive(baseline.median_ci.lo) || !positive(baseline.median_ci.hi) || !positive(candidate.median_ci.lo) ||
      !positive(candidate.median_ci.hi))
    return out;
  const double lo = candidate.median_ci.lo / baseline.median_ci.hi;
  const double hi = candidate.median_ci.hi / baseline.median_ci.lo;
  // Bounds that are finite but far apart (1e308 / 1e-300) divide past the largest double:
  // no interval, as for any bound that is not positive and finite.
  if (!positive(lo) || !positive(hi)) return out;
  out.ratio_ci.lo = lo;
  out.ratio_ci.hi = hi;
  const bool excludes_one = out.ratio_ci.lo > 1 || out.ratio_ci.hi < 1;
  out.result = ratio_verdict(out.ratio_ci, threshold, excludes_one);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- bounded memory per scope node -----------------------------------------------

// What a reservoir's summary adds to summary: the exact totals over every sample ever
// added, beside the statistics of the samples it kept.
//   kscope::reservoir_summary r = reservoir.summarize();
//   std::printf("median %.3f of %zu kept / %zu calls\n", r.kept.median, r.n_kept, r.n_total);
struct reservoir_summary {
  // Summary of the kept samples, taken in arrival order (warm-up, median, CI, ...).
  // When saturated, kept.n + kept.warmup = n_kept, and quantiles and the interval are
  // those of a uniform random subset of all n_total samples: unbiased, but the CI
  // reflects n_kept samples, not n_total.
  summary kept;
  std::size_t n_total = 0;     // finite samples ever added (exact)
  std::size_t n_kept = 0;      // samples the reservoir holds (<= capacity)
  std::size_t non_finite = 0;  // NaN/inf samples refused by add()
  bool saturated = false;      // n_total > n_kept: the reservoir sampled
  // Exact over all n_total samples, warm-up included:
  double total_sum = 0;
  double total_mean = detail::stats_nan;
  double total_stddev = detail::stats_nan;  // n - 1; NaN for fewer than 2
  double total_min = detail::stats_nan;
  double total_max = detail::stats_nan;
};

// Keeps every sample up to a capacity, then a uniform random subset of that size
// (Algorithm R, Vitter 1985, through kscope's one reservoir, detail::uniform_reservoir,
// with a fixed seed, so runs are reproducible), while count, sum, min, max, mean and
// variance (Welford) stay exact over all samples.
// Memory: 16 bytes per kept sample (value + arrival index), nothing per sample beyond.
// Not thread-safe: one owner, or a lock around it (kscope::session holds one).
//   kscope::sample_reservoir r;              // 10 000 kept
//   for (...) r.add(elapsed_ns);
//   kscope::reservoir_summary s = r.summarize();
class sample_reservoir {
 public:
  static constexpr std::size_t default_capacity = 10000;
  static constexpr std::uint64_t default_seed = 0x6b73636f70652d72ull;

  sample_reservoir() noexcept;
  // capacity 0 keeps no samples (totals only). Memory grows with the samples kept,
  // never past the capacity.
  explicit sample_reservoir(std::size_t capacity, std::uint64_t seed = default_seed) noexcept;

  // Records one sample; NaN/inf are counted in non_finite() and otherwise ignored.
  // Never throws: if memory runs out, the reservoir stops growing and samples from then on.
  void add(double sample) noexcept;

  // Forgets every sample; capacity and seed stay.
  void clear() noexcept;

  // The kept samples in slot order: arrival order until saturated(), then a random
  // subset in no particular order. samples_in_order() restores arrival order.
  [[nodiscard]] const std::vector<double>& samples() const noexcept { return values_.kept(); }
  // The kept samples sorted by arrival, so warm-up detection still sees time order.
  // (Only if memory ran out while the reservoir was growing is the order of a saturated
  // reservoir unknown; then this is samples().)
  [[nodiscard]] std::vector<double> samples_in_order() const;

  [[nodiscard]] std::size_t count() const noexcept;
  [[nodiscard]] std::size_t kept() const noexcept { return values_.kept().size(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return values_.capacity(); }
  [[nodiscard]] bool saturated() const noexcept { return values_.saturated(); }
  [[nodiscard]] std::size_t non_finite() const noexcept;
  [[nodiscard]] double sum() const noexcept { return sum_.value(); }
  [[nodiscard]] double mean() const noexcept;
  [[nodiscard]] double variance() const noexcept;
  [[nodiscard]] double stddev() const noexcept { return std::sqrt(variance()); }
  [[nodiscard]] double min() const noexcept { return min_; }
  [[nodiscard]] double max() const noexcept { return max_; }

  // Summary of the kept samples in arrival order, plus the exact totals.
  //   kscope::reservoir_summary s = r.summarize({0.95, true});
  [[nodiscard]] reservoir_summary summarize(stats_options options = {}) const;

 private:
  detail::uniform_reservoir<double> values_;
  std::vector<std::uint64_t> arrival_;  // index among finite samples, per slot
  bool order_known_ = true;             // false only after an allocation failure
  std::uint64_t non_finite_ = 0;
  detail::compensated_sum sum_;
  double mean_ = 0;
  double m2_ = 0;
  double min_ = detail::stats_nan;
  double max_ = detail::stats_nan;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t sample_reservoir::count() const noexcept { return static_cast<std::size_t>(values_.seen()); }

KSCOPE_DECL std::size_t sample_reservoir::non_finite() const noexcept { return static_cast<std::size_t>(non_finite_); }

KSCOPE_DECL double sample_reservoir::mean() const noexcept { return values_.seen() ? mean_ : detail::stats_nan; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sample_reservoir::sample_reservoir() noexcept : sample_reservoir(default_capacity) {}

KSCOPE_DECL sample_reservoir::sample_reservoir(std::size_t capacity, std::uint64_t seed) noexcept : values_(capacity, seed) {}

KSCOPE_DECL void sample_reservoir::add(double sample) noexcept {
  if (!std::isfinite(sample)) {
    ++non_finite_;
    return;
  }
  const std::uint64_t index = values_.seen();  // arrival index among finite samples
  const std::uint64_t count = index + 1;
  sum_.add(sample);
  const double delta = sample - mean_;
  mean_ += delta / static_cast<double>(count);
  m2_ += delta * (sample - mean_);
  if (count == 1) {
    min_ = max_ = sample;
  } else {
    min_ = std::min(min_, sample);
    max_ = std::max(max_, sample);
  }
  // The arrival index of each slot grows in step with the values, reserved before the
  // value is offered so that recording it cannot fail once the value is in.
  const bool may_append = values_.kept().size() < values_.capacity();
  if (may_append && arrival_.size() == arrival_.capacity()) {
    try {
      const std::size_t doubled = arrival_.size() < 8 ? 16 : 2 * arrival_.size();
      arrival_.reserve(std::min(doubled, values_.capacity()));
    } catch (...) {
      order_known_ = false;  // out of memory: the arrival order of new slots is lost
    }
  }
  const std::size_t slot = values_.offer(sample);
  if (slot == detail::uniform_reservoir<double>::skipped || !order_known_) return;
  if (slot < arrival_.size()) {
    arrival_[slot] = index;
  } else if (slot == arrival_.size() && arrival_.size() < arrival_.capacity()) {
    arrival_.push_back(index);  // within the reserved capacity: cannot throw
  } else {
    order_known_ = false;
  }
}

KSCOPE_DECL void sample_reservoir::clear() noexcept {
  values_.clear();
  arrival_.clear();
  order_known_ = true;
  non_finite_ = 0;
  sum_ = detail::compensated_sum{};
  mean_ = m2_ = 0;
  min_ = max_ = detail::stats_nan;
}

KSCOPE_DECL std::vector<double> sample_reservoir::samples_in_order() const {
  const std::vector<double>& values = values_.kept();
  if (!saturated() || !order_known_) return values;
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return arrival_[a] < arrival_[b]; });
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) out[i] = values[order[i]];
  return out;
}

KSCOPE_DECL double sample_reservoir::variance() const noexcept {
  return values_.seen() >= 2 ? m2_ / static_cast<double>(values_.seen() - 1) : detail::stats_nan;
}

KSCOPE_DECL reservoir_summary sample_reservoir::summarize(stats_options options) const {
  reservoir_summary out;
  out.kept = kscope::summarize(samples_in_order(), options);
  out.n_total = count();
  out.n_kept = kept();
  out.non_finite = non_finite();
  out.saturated = saturated();
  out.total_sum = sum();
  out.total_mean = mean();
  out.total_stddev = stddev();
  out.total_min = min_;
  out.total_max = max_;
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
