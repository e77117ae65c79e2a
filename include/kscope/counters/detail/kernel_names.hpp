// kscope/counters/detail/kernel_names.hpp — kernel names for the per-kernel ranges of
// a counter pass.
//
// In auto-range mode CUPTI names the ranges "0", "1", ... in launch order and says nothing
// of the kernels. kscope subscribes a launch callback for the duration of the pass and
// notes each launched kernel's name (CUpti_CallbackData::symbolName) in order; the names
// are attached to the ranges only when their count equals the range count, so a graph
// launch (one call, many kernels), a launch from another thread racing the pass, or a
// replay that calls back again can never shift a name onto the wrong kernel.
//
// CUPTI 13.0 allows one callback subscriber per process. When kscope's activity collector
// (or another tool) holds it, the subscription fails and the ranges keep their numbers;
// the result says why. A runtime launch calls the driver (and, in CUDA 13, <<<>>> another
// runtime entry point) underneath; only the outermost launch call on a thread is noted.
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/once.hpp"
#include "../../cupti/detail/profiler_api.hpp"

#if KSCOPE_HAS_RANGE_PROFILER

#include "../../cupti/detail/demangle.hpp"
#include "../../cupti/detail/kernel_launch_ids.hpp"

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace kscope {
namespace detail {

// The names seen during one pass. Never destroyed (a late callback may still arrive).
struct kernel_name_log {
  std::mutex mutex;
  std::vector<std::string> names;  // one per kernel launch, launch order, demangled
  std::size_t graph_launches = 0;
  std::size_t callback_errors = 0;
};

KSCOPE_DECL kernel_name_log& profiler_kernel_name_log();

// Depth of runtime launch calls on this thread: a driver launch inside one is the same kernel.
KSCOPE_DECL int& runtime_launch_depth() noexcept;

KSCOPE_DECL void CUPTIAPI on_profiler_launch(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                        const void* cbdata);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL kernel_name_log& profiler_kernel_name_log() {
  static lazy_global<kernel_name_log> log{lock_rank::init};  // fork-safe (core/detail/once.hpp)
  return log.get([] { return new kernel_name_log(); });
}

KSCOPE_DECL int& runtime_launch_depth() noexcept {
  thread_local int depth = 0;
  return depth;
}

KSCOPE_DECL void CUPTIAPI on_profiler_launch(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                        const void* cbdata) {
  if (userdata == nullptr || cbdata == nullptr) return;
  auto& log = *static_cast<kernel_name_log*>(userdata);
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (!runtime && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  // A profiled step's launches, with their scopes (no activity collector holds the callbacks).
  if (profiled_step_log* step = active_step_log.load(std::memory_order_acquire))
    note_launch_for_profiled_step(*step, domain, cbid, *data);
  if (data->callbackSite == CUPTI_API_EXIT) {
    if (runtime && runtime_launch_depth() > 0) --runtime_launch_depth();
    return;
  }
  // Only the outermost launch call of a thread names a kernel: the driver call under a
  // runtime launch, or a runtime launch under another (<<<>>> goes through
  // __cudaLaunchKernel in CUDA 13), is the same kernel.
  if (runtime) {
    if (runtime_launch_depth()++ > 0) return;
  } else if (runtime_launch_depth() > 0) {
    return;
  }
  try {
    std::lock_guard<std::mutex> lock(log.mutex);
    if (is_graph_launch_cbid(domain, cbid)) {
      ++log.graph_launches;
      log.names.emplace_back("(CUDA graph launch)");
    } else {
      log.names.push_back(demangle(data->symbolName));
    }
  } catch (...) {  // out of memory: never into CUDA
    ++log.callback_errors;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Subscribes the launch callback for one pass; unsubscribes when destroyed. ok() false
// (with why()) when CUPTI's subscriber slot is taken.
class kernel_name_subscription {
 public:
  explicit kernel_name_subscription(const cupti_api& api);

  ~kernel_name_subscription() {
    try {
      (void)stop();
    } catch (...) {  // a destructor never throws
    }
  }
  kernel_name_subscription(const kernel_name_subscription&) = delete;
  kernel_name_subscription& operator=(const kernel_name_subscription&) = delete;

  // Unsubscribes (the callbacks stop) and returns what was logged.
  std::vector<std::string> stop();

  // How many launches are logged so far, and dropping those logged after `mark` (launches
  // between two runs of the work that are not the work's own).
  [[nodiscard]] std::size_t logged() const;
  void forget_since(std::size_t mark);

  [[nodiscard]] bool ok() const noexcept { return why_.empty(); }
  [[nodiscard]] const std::string& why() const noexcept { return why_; }
  [[nodiscard]] std::size_t graph_launches() const noexcept { return graph_launches_; }
  [[nodiscard]] std::size_t callback_errors() const noexcept { return callback_errors_; }

 private:
  const cupti_api& api_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::string why_;
  std::size_t graph_launches_ = 0;
  std::size_t callback_errors_ = 0;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL kernel_name_subscription::kernel_name_subscription(const cupti_api& api) : api_(api) {
  kernel_name_log& log = profiler_kernel_name_log();
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    log.names.clear();
    log.graph_launches = 0;
    log.callback_errors = 0;
  }
  std::string holder;
  const CUptiResult r = api_.subscribe_named(subscriber_, &on_profiler_launch, &log, "kscope counters", holder);
  if (r != CUPTI_SUCCESS) {
    why_ = "kernel names unavailable: cuptiSubscribe failed with " + api_.result_name(r) +
           (holder.empty() ? std::string() : " (held by " + holder + ")") +
           "; ranges are numbered in launch order";
    return;
  }
  std::size_t enabled = 0, count = 0;
  const CUpti_CallbackId* ids = profiler_runtime_kernel_cbids(count);
  for (std::size_t i = 0; i < count; ++i)
    enabled += api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, ids[i]) == CUPTI_SUCCESS;
  ids = profiler_driver_kernel_cbids(count);
  for (std::size_t i = 0; i < count; ++i)
    enabled += api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, ids[i]) == CUPTI_SUCCESS;
  if (enabled == 0) {
    why_ = "kernel names unavailable: no launch callback could be enabled; ranges are numbered in launch order";
    (void)api_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
  }
}

KSCOPE_DECL std::vector<std::string> kernel_name_subscription::stop() {
  if (subscriber_ != nullptr) {
    (void)api_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
  }
  kernel_name_log& log = profiler_kernel_name_log();
  std::lock_guard<std::mutex> lock(log.mutex);
  graph_launches_ = log.graph_launches;
  callback_errors_ = log.callback_errors;
  return std::move(log.names);
}

KSCOPE_DECL std::size_t kernel_name_subscription::logged() const {
  kernel_name_log& log = profiler_kernel_name_log();
  std::lock_guard<std::mutex> lock(log.mutex);
  return log.names.size();
}

KSCOPE_DECL void kernel_name_subscription::forget_since(std::size_t mark) {
  kernel_name_log& log = profiler_kernel_name_log();
  std::lock_guard<std::mutex> lock(log.mutex);
  for (std::size_t i = mark; i < log.names.size(); ++i)
    if (log.names[i] == "(CUDA graph launch)" && log.graph_launches > 0) --log.graph_launches;
  if (mark < log.names.size()) log.names.resize(mark);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_RANGE_PROFILER
