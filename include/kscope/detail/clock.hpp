// kscope/detail/clock.hpp — the one time base every kscope timestamp uses, and the
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

// True when ticks() reads the TSC: only an invariant TSC (constant rate, running in all
// power states, CPUID 0x80000007 EDX bit 8) is a clock.
inline bool ticks_are_tsc() noexcept {
#if KSCOPE_DETAIL_HAVE_TSC
  static const bool invariant = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d)) return false;
    return ((d >> 8) & 1u) != 0;
  }();
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

// The origin is taken on first call; each later call measures the ratio over the span
// since then (waiting, once, until the span is at least 2 ms so the ratio is good to
// ~1e-5 even for a report taken right at start-up).
struct tick_origin_pair {
  std::int64_t ticks, ns;
};
inline const tick_origin_pair& tick_origin() noexcept {
  static const tick_origin_pair origin{ticks(), now_ns()};
  return origin;
}

inline tick_map calibrate_ticks() noexcept {
  const tick_origin_pair& origin = tick_origin();
  tick_map map;
  map.origin_ticks = origin.ticks;
  map.origin_ns = origin.ns;
  if (!ticks_are_tsc()) return map;
  std::int64_t t = ticks(), ns = now_ns();
  while (ns - origin.ns < 2000000) {
    t = ticks();
    ns = now_ns();
  }
  if (t > origin.ticks) map.ns_per_tick = static_cast<double>(ns - origin.ns) / static_cast<double>(t - origin.ticks);
  return map;
}

}  // namespace detail
}  // namespace kscope
