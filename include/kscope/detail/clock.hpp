// kscope/detail/clock.hpp — the one time base every kscope timestamp uses.
//
// Host scope times, CUPTI activity timestamps (through CUPTI's timestamp callback) and
// trace events are all nanoseconds of std::chrono::steady_clock, so that a trace shows
// requests and kernels aligned without any after-the-fact clock fitting.
#pragma once

#include <chrono>
#include <cstdint>

namespace kscope {
namespace detail {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace detail
}  // namespace kscope
