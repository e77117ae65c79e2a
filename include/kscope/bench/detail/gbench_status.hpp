// kscope/bench/detail/gbench_status.hpp — the record of GPU benchmarks that could not run
// under Google Benchmark, and the exit code it implies. No Google Benchmark and no CUDA
// here, so the decision is tested on any machine (tests/bench_test.cpp); gbench.hpp
// fills the record and turns it into the process's exit code.
//
// Why a record at all: Google Benchmark reports a State::SkipWithError as a line of
// output and still exits 0, so a CI job whose every GPU benchmark failed (no GPU, a CUDA
// error, an invalid result) would pass. kscope::gbench_main() returns non-zero instead,
// unless the user allowed skipping (KSCOPE_GBENCH_ALLOW_SKIP=1 or gbench_allow_skip()).
#pragma once

#include "../../core/detail/env_switch.hpp"
#include "../../core/detail/once.hpp"

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kscope {
namespace detail {
namespace harness {

// Thread-safe: Google Benchmark may run a benchmark on several threads (->Threads(n)).
class gbench_failure_record {
 public:
  void add(std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
    for (auto& [text, times] : distinct_) {
      if (text == message) {
        ++times;
        return;
      }
    }
    distinct_.emplace_back(std::move(message), 1);
  }
  [[nodiscard]] std::size_t count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }
  // Each distinct message once, in the order first seen, with how often it was seen
  // (Google Benchmark calls a benchmark function once per run it tries).
  [[nodiscard]] std::vector<std::pair<std::string, std::size_t>> messages() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return distinct_;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    count_ = 0;
    distinct_.clear();
  }
  void allow_skip(bool allow) {
    std::lock_guard<std::mutex> lock(mutex_);
    allow_skip_ = allow;
  }
  [[nodiscard]] bool skip_allowed_by_call() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return allow_skip_;
  }

 private:
  mutable std::mutex mutex_;
  std::size_t count_ = 0;
  std::vector<std::pair<std::string, std::size_t>> distinct_;
  bool allow_skip_ = false;
};

// One record per process: a function-local static of an inline function is shared by
// every translation unit that registers benchmarks. A lazy_global, never destroyed,
// rather than a plain static, whose guard a fork could catch held (core/detail/once.hpp).
inline gbench_failure_record& gbench_failures() {
  static lazy_global<gbench_failure_record> record{lock_rank::init};
  return record.get([] { return new gbench_failure_record(); });
}

// Whether a value of KSCOPE_GBENCH_ALLOW_SKIP allows skipping: an "on" value of
// parse_switch (1, true, yes, on, enable(d); any case). Unset, off or anything else does
// not: failing loudly is the default.
inline bool allow_skip_value(const char* value) { return parse_switch(value) == switch_value::on; }

inline bool skip_allowed() {
  return gbench_failures().skip_allowed_by_call() || allow_skip_value(std::getenv("KSCOPE_GBENCH_ALLOW_SKIP"));
}

// 0 when every GPU benchmark ran, or skipping is allowed; 1 otherwise.
inline int gbench_exit_code(std::size_t failures, bool allowed) { return failures > 0 && !allowed ? 1 : 0; }

// What gbench_main prints on stderr after the benchmarks; "" when nothing failed.
inline std::string gbench_failure_summary(const gbench_failure_record& record, bool allowed) {
  const std::size_t n = record.count();
  if (n == 0) return {};
  std::string s = "kscope: " + std::to_string(n) + (n == 1 ? " GPU benchmark run" : " GPU benchmark runs") +
                  " could not be measured:\n";
  for (const auto& [text, times] : record.messages())
    s += "  - " + text + (times > 1 ? " (" + std::to_string(times) + " times)" : std::string()) + "\n";
  s += allowed ? "kscope: exit code 0: skipping is allowed (KSCOPE_GBENCH_ALLOW_SKIP or gbench_allow_skip)\n"
               : "kscope: exit code 1; set KSCOPE_GBENCH_ALLOW_SKIP=1 to exit 0 when GPU benchmarks cannot run\n";
  return s;
}

}  // namespace harness
}  // namespace detail
}  // namespace kscope
