// kscope/core/detail/clock.hpp — the one time base every kscope timestamp uses, and the
// cheap tick counter scopes read on the hot path.
//
// Reports, traces and CUPTI activity (through CUPTI's timestamp callback) are all in
// nanoseconds of std::chrono::steady_clock, so a trace shows requests and kernels
// aligned without after-the-fact clock fitting.
//
// Scopes read ticks() instead: on x86-64 with an invariant TSC that is one RDTSC
// (~10 ns in a VM, vs ~25 ns for clock_gettime under kvm-clock), and a scope reads two.
// Ticks are converted to steady_clock nanoseconds when a report is built, by a linear
// map calibrated over the whole run (from the first use to the report), so the ratio's
// error is the clocks' read jitter divided by the run's length. Elsewhere ticks() is
// steady_clock itself and the map is the identity.
#pragma once

#include "once.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDA_ARCH__) && !defined(KSCOPE_NO_TSC)
#  include <cpuid.h>
#  define KSCOPE_DETAIL_HAVE_TSC 1
#else
#  define KSCOPE_DETAIL_HAVE_TSC 0
#endif

namespace kscope {
namespace detail {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#if KSCOPE_DETAIL_HAVE_TSC
// -1: not read yet; 0 or 1: the answer. A plain atomic rather than a function-local
// static: CPUID always gives the same answer, so threads that race to read it first just
// store the same value, and there is no guard for a fork to catch held (issue 31).
inline std::atomic<signed char> invariant_tsc_state{-1};
#endif

// True when ticks() reads the TSC: only an invariant TSC (constant rate, running in all
// power states, CPUID 0x80000007 EDX bit 8) is a clock.
inline bool ticks_are_tsc() noexcept {
#if KSCOPE_DETAIL_HAVE_TSC
  const signed char known = invariant_tsc_state.load(std::memory_order_relaxed);
  if (KSCOPE_LIKELY(known >= 0)) return known == 1;
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool invariant = __get_cpuid(0x80000007u, &a, &b, &c, &d) && ((d >> 8) & 1u) != 0;
  invariant_tsc_state.store(invariant ? 1 : 0, std::memory_order_relaxed);
  return invariant;
#else
  return false;
#endif
}

inline std::int64_t ticks() noexcept {
#if KSCOPE_DETAIL_HAVE_TSC
  if (ticks_are_tsc()) return static_cast<std::int64_t>(__builtin_ia32_rdtsc());
#endif
  return now_ns();
}

// Maps ticks to steady_clock nanoseconds: ns = origin_ns + (t - origin_ticks) * ns_per_tick.
struct tick_map {
  std::int64_t origin_ticks = 0;
  std::int64_t origin_ns = 0;
  double ns_per_tick = 1.0;
  [[nodiscard]] double duration_ns(double ticks_elapsed) const noexcept { return ticks_elapsed * ns_per_tick; }
  [[nodiscard]] std::int64_t to_ns(std::int64_t t) const noexcept {
    return origin_ns + static_cast<std::int64_t>(static_cast<double>(t - origin_ticks) * ns_per_tick);
  }
};

struct tick_origin_pair {
  std::int64_t ticks, ns;
};

// Reads ticks and steady_clock as close together as this thread can: a (tick, ns, tick)
// triple bounds when the ns read happened; of a few tries, the tightest wins. Without
// this, a thread preempted between the two reads (a loaded machine) skews the ratio.
inline tick_origin_pair read_clock_pair() noexcept {
  tick_origin_pair best{ticks(), now_ns()};
  std::int64_t best_gap = -1;
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::int64_t before = ticks();
    const std::int64_t ns = now_ns();
    const std::int64_t after = ticks();
    const std::int64_t gap = after - before;
    if (gap >= 0 && (best_gap < 0 || gap < best_gap)) {
      best_gap = gap;
      best = tick_origin_pair{before + gap / 2, ns};
    }
  }
  return best;
}

// The first use's reading, the same for every thread. Built fork-safely (once.hpp): a
// reading in progress in another thread is waited for by a fork, never inherited.
inline const tick_origin_pair& tick_origin() noexcept {
  static tick_origin_pair first{0, 0};  // written once, before `once` is done
  static fork_safe_once once{lock_rank::init};
  once.call([] { first = read_clock_pair(); });
  return first;
}

// The map from ticks to steady_clock ns, measured over the span since tick_origin()
// (waiting, once, until that span is at least 5 ms, so a report taken right at start-up
// still gets a ratio good to ~1e-4; a report after a run of seconds, to ~1e-7).
inline tick_map calibrate_ticks() noexcept {
  const tick_origin_pair& origin = tick_origin();
  tick_map map;
  map.origin_ticks = origin.ticks;
  map.origin_ns = origin.ns;
  if (!ticks_are_tsc()) return map;
  while (now_ns() - origin.ns < 5000000) {
  }
  const tick_origin_pair now = read_clock_pair();
  if (now.ticks > origin.ticks && now.ns > origin.ns)
    map.ns_per_tick = static_cast<double>(now.ns - origin.ns) / static_cast<double>(now.ticks - origin.ticks);
  return map;
}

}  // namespace detail
}  // namespace kscope
