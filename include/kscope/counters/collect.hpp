// kscope/counters/collect.hpp — hardware counters for a piece of GPU work: the CUPTI range
// profiler with the profiler host API, CUPTI and libnvperf_host loaded with dlopen.
//
//   kscope::counter_result r = kscope::profile_counters({}, [&] {      // {}: the default set
//     copy_kernel<<<blocks, 256, 0, stream>>>(src, dst, n);
//   });
//   if (!r.ok()) std::fprintf(stderr, "%s\n", r.message.c_str());     // one line: why not
//   for (const kscope::counter_values& k : r.kernels)                   // launch order
//     std::printf("%s: %.0f bytes read\n", k.name.c_str(), k.value("dram__bytes_read.sum"));
//
// What the values mean and what to conclude from them is evidence/metrics.hpp's business
// (count_flops, counter_aggregate, measure_roofline, classify); this header only collects.
//
// Modes (counter_options::ranges):
// - per_kernel (default): CUPTI's auto range with kernel replay. Every kernel the work
//   launches is one range; CUPTI serialises the kernels, replays each as many times as the
//   metric set needs (saving and restoring device memory between replays) and the work runs
//   once. Kernel names come from a launch callback (detail/profiler_kernel_names.hpp).
// - whole_callable: one user range around the work, with user replay: the work runs once
//   per pass (result.runs times) and must launch the same kernels each time; device memory
//   is NOT restored between runs. Values are for all its kernels together.
// Replay (counter_options::replay, per_kernel only): kernel replay (the default) runs the
// work once, CUPTI saving and restoring device memory between passes; user replay runs
// the work once per pass with no save or restore (it must launch the same kernels each
// time), for work that is cheap to repeat or must not be serialized into a restore.
// counter_options::before_each_run (for example re-zeroing what the work accumulates)
// runs before every run, outside the ranges; its launches are not ranges.
// The L2 sweeps (counter_options::sweep_l2, on by default). DRAM writes happen when the
// L2 evicts a dirty line, so a range counts the write-back of whatever is dirty when it
// starts and misses what its own kernels leave dirty when it ends. Both were wrong by
// tens of MB, measured on an H200 (bench/RESULTS.md): when a pass starts (each
// cuptiRangeProfilerStart) the profiler writes its own buffers through the L2, and the
// first large kernel of the pass counted ~29 MB of their write-back (256 ranges per pass;
// ~4.8 MB with one user range; none on an empty kernel or a second large kernel); and a
// kernel's last output lines stay dirty in the L2 after it (21.7 MB of a 1.07 GB copy,
// 15 MB of a cuBLAS SGEMM's 67 MB). So every run is bracketed by kscope_l2_sweep
// (device/detail/kernel_library.hpp), a read of twice the L2 that writes nothing: one
// after Start, before the work, whose ranges then begin with a clean L2; one after the
// work, whose DRAM writes — the lines the work left dirty — are recorded as the last
// kernel's (or the user range's) kscope__dram_bytes_write_back.sum (evidence/metrics.hpp:
// add_write_back; dram__bytes_write.sum stays what the hardware counted in the range,
// as Nsight Compute's does, and the write-back enters volumes, never rates). In
// per_kernel mode the sweeps are the pass's first and last ranges; in whole_callable
// mode the first runs before the user range is pushed and the second in a user range of
// its own. Neither is a result, and their launches are not in the kernel names. Without
// them (sweep_l2 off, or no memory for the buffer: a note says so) those errors stay.
// Kernel replay in several passes is the exception no sweep can fix: CUPTI saves and
// restores device memory around each kernel's own replays, those copies leave ~23 MB
// dirty in an H200's L2 before the pass that counts the writes, and nothing can run
// between them. The result then says so (a note, counter_result::replay_dirty_bytes as
// measured by the leading sweep), and no sweep runs after the work (it would count
// CUPTI's write-back, not the work's); user replay is exact.
// Both profile the current device's context: kernels the work launches on another device
// are not seen. Per-kernel ranges end with a context synchronization (CUPTI's auto range),
// so kernels that wait on each other while running concurrently would hang: profile such
// work as one whole_callable range.
//
// The sequence (CUPTI 13 / 12.6+): cuptiProfilerInitialize (once per process), chip name
// and counter availability, host object for the chip, metric availability through the
// host API (base metrics, and a config built with each name; evidence/metrics.hpp
// resolves fallbacks and suggests close names), config image and pass count, range
// profiler enabled on the current context, counter-data image, SetConfig, Start
// [PushRange] work [PopRange] Stop until all passes are submitted, DecodeData,
// cuptiProfilerHostEvaluateToGpuValues per range, Disable.
//
// Never breaks the program: no CUPTI or library problem throws or aborts. Unavailable
// cases — built without the range profiler headers, no device, libcupti or libnvperf_host
// missing or too old, no permission to the counters (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
// ERR_NVGPUCTRPERM), another profiler holding them (Nsight Compute, DCGM), an unsupported
// device (vGPU, MIG, WSL...), an unknown metric — come back as a counter_state and one
// message, with the work not run. An exception the work itself throws is rethrown after
// the profiler is stopped. One pass at a time per process: a second, concurrent (or
// nested) call gets counter_state::busy at once, never a deadlock.
//
// Profiled runs are slow (serialised, replayed): their times are never performance.
#pragma once

#include "../core/config.hpp"
#include "../evidence/metrics.hpp"
#include "../scope/detail/counter_hook.hpp"  // profiled_depth: the L2 sweep's launch is not the program's
#include "../cupti/counter_pass.hpp"  // counter_state, one pass at a time, counter_setup: shared with PC and PM sampling
#include "../cupti/detail/profiler_api.hpp"
#include "../cupti/detail/profiler_host.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if KSCOPE_HAS_RANGE_PROFILER
#  include "../device/detail/kernel_library.hpp"
#  include "detail/kernel_names.hpp"
#  include "detail/plan_cache.hpp"
#  include <cuda_runtime_api.h>
#endif

namespace kscope {

// What one range of a counter pass covers.
enum class counter_ranges : std::uint8_t {
  per_kernel,      // one range per kernel launch (auto range, kernel replay): the default
  whole_callable,  // one named range around the whole work (user range, user replay)
  // Consecutive user ranges (user replay): the first named range_name, each later one begun
  // by counter_pass_run::next_range, which ends the one before; up to max_kernels of them.
  // The per-scope counters' steps (ranges_per_scope): one range per stretch of a step that a
  // scope owns, the kernels running as they would unprofiled.
  consecutive,
};

// How per-kernel ranges are replayed when the metric set needs several passes.
enum class counter_replay : std::uint8_t {
  kernel,  // CUPTI replays each kernel, restoring device memory: the work runs once
  user,    // the work runs once per pass, memory not restored: DRAM writes are its own
};

// How to collect.
//   kscope::counter_options o;
//   o.ranges = kscope::counter_ranges::whole_callable;
//   o.range_name = "decode";
struct counter_options {
  counter_ranges ranges = counter_ranges::per_kernel;
  std::string range_name = "kscope";  // whole_callable: the user range's name
  // per_kernel: kernel replay (the work runs once) or user replay (once per pass; the
  // work must launch the same kernels every time). whole_callable always uses user replay.
  counter_replay replay = counter_replay::kernel;
  // Called before every run of the work (once per pass under user replay, once under
  // kernel replay), before the ranges start: its kernels are neither ranges nor named.
  // For state the work needs afresh each run under user replay (zeroing an accumulator,
  // resetting a queue); the L2 needs no help here: every run starts with sweep_l2.
  std::function<void()> before_each_run;
  // per_kernel: kernels the counter-data image holds; later ones are dropped and counted
  // (counter_result::ranges_dropped). Bounded so the image stays small (~ tens of KB each).
  std::size_t max_kernels = 256;
  bool name_kernels = true;         // per_kernel: subscribe a launch callback for kernel names
  // Bracket every run with kscope's L2 sweep (a read of twice the L2, never a result; see
  // the top of this header): the first kernel's DRAM writes are then its own, not the
  // profiler's, and the lines the work leaves dirty in the L2 are measured as its
  // write-back (kscope__dram_bytes_write_back.sum).
  // Costs a buffer of twice the L2 for the pass and two ~30 us kernels per run (replayed
  // per pass under kernel replay). Off: the first kernel may count up to the L2's size of
  // writes it did not make, and the last may miss up to the L2's size of its own.
  bool sweep_l2 = true;
  std::string cupti_library;        // explicit libcupti, as cupti_options::library_path
  std::string nvperf_host_library;  // explicit libnvperf_host.so: only this path is tried
};

// The upper bound on max_kernels: a counter-data image for more ranges than this would be
// large, and a pass that profiles that many kernels should be split.
inline constexpr std::size_t counter_max_kernels_limit = 65536;

// Why a kernel-replay pass is refused while kscope's activity collector traces.
inline constexpr std::string_view kernel_replay_while_tracing_message =
    "hardware counters not collected with kernel replay: while kscope's activity collector traces, a kernel-replay "
    "pass stops CUPTI's activity records for the rest of the process (seen on an H100, CUDA 13.0), and every GPU "
    "time would be missing; use user replay (counter_replay::user), the per-scope counters' one-pass groups, or "
    "profile before the collector starts";

// The outcome of a pass: values per range in launch order, or why there are none.
//   if (r.ok()) for (auto& k : r.kernels) use(k.name, k.values);
struct counter_result {
  counter_state state = counter_state::failed;
  std::string message;                  // one line: what was collected, or why not
  std::vector<counter_values> kernels;  // per kernel (launch order), or the one user range
  std::vector<std::string> metrics;     // the names collected (fallbacks applied)
  std::vector<std::string> notes;       // default metrics left out, fallbacks taken, names withheld
  std::string chip;                     // CUPTI's chip name ("GH100")
  std::uint32_t cupti_version = 0;      // cuptiGetVersion of the libcupti used
  std::size_t passes = 0;               // replay passes the metric set needs
  std::size_t runs = 0;                 // times the work was called (1, or passes for whole_callable)
  // Kernels beyond max_kernels: counted from the launches seen when kernel names are on;
  // without them, at least this many (a note says the count is a lower bound).
  std::size_t ranges_dropped = 0;
  // Kernel replay in several passes only: the DRAM writes kscope's leading L2 sweep (which
  // writes nothing) counted in its pass, i.e. what CUPTI's save and restore of device
  // memory left dirty in the L2; each kernel's dram__bytes_write.sum may include about this
  // much that is not its own (a note says so). NaN otherwise.
  double replay_dirty_bytes = std::numeric_limits<double>::quiet_NaN();

  [[nodiscard]] bool ok() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool counter_result::ok() const noexcept { return state == counter_state::collected; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The metrics a device offers (the base names the profiler host API lists).
struct counter_metric_list {
  counter_state state = counter_state::failed;
  std::string message;
  std::string chip;
  std::vector<std::string> base_metrics;  // sorted; complete them with a rollup (.sum, .avg...)

  [[nodiscard]] bool ok() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool counter_metric_list::ok() const noexcept { return state == counter_state::collected; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// "" when the request can be tried, else what is wrong with it.
KSCOPE_DECL std::string counter_request_error(const std::vector<std::string>& metrics, const counter_options& o);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string counter_request_error(const std::vector<std::string>& metrics, const counter_options& o) {
  if (o.ranges != counter_ranges::whole_callable && (o.max_kernels == 0 || o.max_kernels > counter_max_kernels_limit))
    return "counter_options::max_kernels must be between 1 and " + std::to_string(counter_max_kernels_limit) +
           ", got " + std::to_string(o.max_kernels);
  if (o.ranges != counter_ranges::per_kernel && o.range_name.empty())
    return "counter_options::range_name must not be empty for a whole_callable or consecutive range";
  for (const std::string& m : metrics)
    if (m.empty()) return "empty metric name in the metric list";
  return {};
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_HAS_RANGE_PROFILER

// The range profiler enabled on a context, disabled when it goes. Shared (through a
// shared_ptr) by the runs of one keeper that holds it enabled between passes.
struct range_profiler_handle {
  const profiler_api* api = nullptr;
  CUpti_RangeProfiler_Object* object = nullptr;
  CUcontext context = nullptr;  // the context it was enabled on
  range_profiler_handle() = default;
  range_profiler_handle(const range_profiler_handle&) = delete;
  range_profiler_handle& operator=(const range_profiler_handle&) = delete;
  ~range_profiler_handle() {
    if (object == nullptr) return;
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params, p);
    p.pRangeProfilerObject = object;
    (void)api->range_disable(&p);
  }
};

// The pass itself (see the top of this header). `user_error` receives an exception the
// work threw; the caller rethrows it once everything here is torn down.
// One counter pass, split around the work so that the work can be a callable (profile_
// counters) or whatever a program runs between a scope's open and close (the per-scope
// counters, counters/scope_counters.hpp). begin() does everything up to the first range,
// start_run() / end_run() bracket one run of the work (kernel replay: one run; user
// replay: one per pass), finish() decodes and evaluates. The first failure is the result.
class counter_pass_run {
 public:
  // Everything up to the first run. `options` must outlive the run. `kept`: a range profiler
  // shared by the runs of a keeper that holds it enabled between passes (the per-scope
  // counters): enabled here when it is not yet, reused when it is, on this context (on
  // another, this run enables its own). Null: the run enables its own and disables it when
  // it goes.
  bool begin(const std::vector<std::string>& requested, const counter_options& options, counter_result& result,
             std::shared_ptr<range_profiler_handle> kept = nullptr);

  // Readies a finished run for another pass over the same metrics with the same options:
  // the host object, config image, counter-data image and range profiler are kept, so only
  // the image's initialization, SetConfig and a synchronization are paid again. `result`
  // starts as begin() left it. False (result says why) when CUPTI refuses: the run is spent.
  bool rearm(counter_result& result);

  // The context the run profiles (null before begin()).
  [[nodiscard]] CUcontext context() const noexcept { return setup_.context; }

  // The launches the name callback has logged so far, and forgetting those after a mark:
  // the before_each_run hook's launches are not the work's.
  [[nodiscard]] std::size_t launches_logged() const;
  void forget_launches_since(std::size_t mark);

  // A failure outside the work and the pass's own calls (the before_each_run hook's
  // kernels): the pass stops and reports it.
  void fail_run(std::string why);

  // Whether the work must run (again): CUPTI wants more passes and nothing failed.
  [[nodiscard]] bool wants_run(const counter_result& result) const noexcept;

  // Start [Push]: true when the work may run now.
  bool start_run(counter_result& result);

  // consecutive ranges: ends the current range and begins the next, named `name` (CUPTI
  // copies it). False, changing nothing, when no range is open or the image holds no more
  // ranges (the work then stays in the current one; ranges_refused() counts those).
  bool next_range(const char* name);
  [[nodiscard]] std::size_t ranges_refused() const noexcept { return ranges_refused_; }

  // After the work: the range must end after its kernels finish inside it. An error here
  // is the work's (a faulting kernel), so it is reported and left for the program to see.
  void end_run(bool work_threw);

  // Decodes and evaluates every range into `result` (or says why not).
  void finish(counter_result& result, bool work_threw);

  // After finish(): some range could not be evaluated. A re-armed pass that ends so is not
  // trusted again (scope_counters.hpp). (Sweeps not told apart are not this: a sweep that
  // finds its buffer still in the L2, left there by the pass just before, reads too little
  // from DRAM to be recognized; finish() notes it and reports every range.)
  [[nodiscard]] bool ranges_unevaluated() const noexcept { return ranges_unevaluated_; }
  // Metrics of the last finish() that CUPTI evaluated as NaN in every range.
  [[nodiscard]] std::size_t metrics_unvalued() const noexcept { return metrics_unvalued_; }

 private:
  bool give_up(counter_result& result);

  // Resolves the requested names (fallbacks, SASS counters left out `without_sass`) and
  // makes the set's host object and config image; false (result says why) when a name is
  // unknown or CUPTI refuses.
  bool prepare_metric_set(const std::vector<std::string>& requested, bool without_sass, prepared_metric_set& set,
                          counter_result& result);

  // Initializes the counter-data image and sets the config on the range profiler, then
  // synchronizes so that earlier work does not run into the first range.
  bool arm();

  // The launch callback saw every run's launches; under user replay each run must launch
  // the same kernels, and the names are the first run's. False when they do not line up.
  static bool keep_first_run(std::vector<std::string>& launched, std::size_t runs, std::size_t per_run);

  // One sweep launch, marked as launched inside a profiled call (the activity collector
  // keeps it out of every scope's kernels and times, activity/attribution.hpp) and left out
  // of the kernel names: it is not the work's.
  std::string run_sweep();

  bool push_range(const char* name);

  void pop_range();

  void stop_range();

  counter_setup setup_;
  const counter_options* options_ = nullptr;
  std::vector<std::string> metric_names_;  // what names_ points into
  std::vector<const char*> names_;
  std::shared_ptr<const prepared_metric_set> prepared_set_;  // names, host object, config image
  std::shared_ptr<range_profiler_handle> range_;
  counter_result prepared_;  // the result as begin() left it, for rearm()
  std::vector<std::uint8_t> counter_data_;
  std::optional<kernel_name_subscription> kernel_names_;
  l2_sweep sweep_;
  bool sweep_range_ = false;     // per_kernel: the first range is the sweep's
  std::size_t max_ranges_ = 1;    // the counter-data image's capacity in ranges
  bool restores_memory_ = false;  // kernel replay in several passes: CUPTI saves and restores memory
  bool trailing_wanted_ = false;  // run a sweep after the work (not when restores_memory_)
  bool trailing_sweep_ = false;   // it ran: the last range (per kernel) or the second user range is its
  bool per_kernel_ = true;
  bool consecutive_ = false;     // counter_ranges::consecutive
  std::size_t ranges_begun_ = 0;   // consecutive: the work's ranges pushed in this run
  std::size_t ranges_refused_ = 0; // consecutive: next_range() calls past the image's capacity
  bool user_replay_ = false;
  bool started_ = false;
  bool pushed_ = false;
  bool all_submitted_ = false;
  bool ranges_unevaluated_ = false;
  std::size_t metrics_unvalued_ = 0;
  std::size_t max_runs_ = 1;
  std::string run_error_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t counter_pass_run::launches_logged() const { return kernel_names_ ? kernel_names_->logged() : 0; }

KSCOPE_DECL void counter_pass_run::forget_launches_since(std::size_t mark) {
  if (kernel_names_) kernel_names_->forget_since(mark);
}

KSCOPE_DECL void counter_pass_run::fail_run(std::string why) {
  if (run_error_.empty()) run_error_ = std::move(why);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool counter_pass_run::begin(const std::vector<std::string>& requested, const counter_options& options, counter_result& result,
                                         std::shared_ptr<range_profiler_handle> kept) {
  options_ = &options;
  // Kernel replay while kscope's activity collector traces: on an H100 (CUDA 13.0) CUPTI
  // delivered no activity record at all for the rest of the process after one such pass
  // (bench/scope_counters_modes_probe.cu), so every GPU time the report gives would be
  // missing. Refused, so that it never happens silently.
  if (options.ranges == counter_ranges::per_kernel && options.replay == counter_replay::kernel &&
      activity_tracing().load(std::memory_order_acquire)) {
    result.state = counter_state::unavailable;
    result.message = std::string(kernel_replay_while_tracing_message);
    return false;
  }
  // The setup's first failure, as the pass's outcome.
  const bool opened = setup_.open(options.cupti_library, options.nvperf_host_library);
  if (setup_.libs != nullptr) result.cupti_version = setup_.libs->cupti.version;
  if (!opened) return give_up(result);
  result.chip = setup_.chip;
  const profiler_api& p = setup_.libs->profiler;
  // Under user replay while kscope's activity collector traces, CUPTI's SASS instruction
  // counters read 0 (cupti/detail/api.hpp, activity_tracing): they are left out, with a
  // note, rather than reported as no instructions executed.
  const bool user_replay = options.ranges != counter_ranges::per_kernel || options.replay == counter_replay::user;
  const bool without_sass = user_replay && activity_tracing().load(std::memory_order_acquire);
  // The names resolved, a host object and the config image: made once per chip and set
  // (cupti/counter_pass.hpp, prepared_metric_set), so that a group rotated over the
  // profiled steps pays for them at its first step only.
  std::string key = setup_.chip + (without_sass ? "\n-sass" : "\n+sass");
  for (const std::string& name : requested) key += '\n' + name;
  prepared_set_ = setup_.find_prepared(key);
  if (!prepared_set_) {
    auto made = std::make_shared<prepared_metric_set>();
    if (!prepare_metric_set(requested, without_sass, *made, result)) return false;
    prepared_set_ = made;
    setup_.keep_prepared(key, std::move(made));
  }
  result.notes = prepared_set_->notes;
  result.metrics = prepared_set_->metrics;
  // The names CUPTI is given point into the run's own copy: a kept run outlives the result
  // it was begun with (rearm() hands out a new one), and names into that would dangle.
  metric_names_ = result.metrics;
  names_.clear();
  for (const std::string& m : metric_names_) names_.push_back(m.c_str());
  result.passes = prepared_set_->passes;

  // The range profiler on the context, its counter-data image and its configuration.
  per_kernel_ = options.ranges == counter_ranges::per_kernel;
  user_replay_ = !per_kernel_ || options.replay == counter_replay::user;
  if (options.sweep_l2) {
    if (const std::string why = sweep_.prepare(); !why.empty())
      result.notes.push_back("kscope's L2 sweep did not run (" + why +
                             "): the first kernel's DRAM writes may include up to the L2's size of lines the "
                             "profiler wrote when the pass started, and the write-back of what the work left "
                             "dirty in the L2 is not measured");
  }
  // Kernel replay in several passes: what a trailing sweep would count is CUPTI's own
  // restore write-back, not the work's (finish() says why), so it does not run.
  restores_memory_ = per_kernel_ && !user_replay_ && result.passes > 1;
  trailing_wanted_ = sweep_.ready() && !restores_memory_;
  // The sweeps are ranges too: per kernel the first and (when wanted) the last, whole
  // callable a second user range after the work's.
  const std::size_t sweep_ranges = sweep_.ready() ? (per_kernel_ ? 1 : 0) + (trailing_wanted_ ? 1 : 0) : 0;
  consecutive_ = options.ranges == counter_ranges::consecutive;
  const std::size_t max_ranges = (per_kernel_ || consecutive_ ? options.max_kernels : 1) + sweep_ranges;
  max_ranges_ = max_ranges;
  // A kept profiler enabled on this context is reused: enabling it is the costliest CUPTI
  // step of a pass after the host's config image (which a kept run keeps too).
  if (kept && (kept->object == nullptr || kept->context == setup_.context))
    range_ = std::move(kept);
  else
    range_ = std::make_shared<range_profiler_handle>();
  if (range_->object == nullptr) {
    KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params, enable);
    enable.ctx = setup_.context;
    if (!setup_.cupti_ok(p.range_enable(&enable), "cuptiRangeProfilerEnable")) return give_up(result);
    setup_.libs->range_profiler_enabled.store(true, std::memory_order_relaxed);
    range_->api = &p;
    range_->object = enable.pRangeProfilerObject;
    range_->context = setup_.context;
  }
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params, data_size);
  data_size.pRangeProfilerObject = range_->object;
  data_size.pMetricNames = names_.data();
  data_size.numMetrics = names_.size();
  data_size.maxNumOfRanges = max_ranges;
  data_size.maxNumRangeTreeNodes = static_cast<std::uint32_t>(max_ranges);
  if (!setup_.cupti_ok(p.range_get_counter_data_size(&data_size), "cuptiRangeProfilerGetCounterDataSize"))
    return give_up(result);
  counter_data_.assign(data_size.counterDataSize, 0);
  if (!arm()) return give_up(result);
  if ((per_kernel_ || consecutive_) && options.name_kernels) kernel_names_.emplace(setup_.libs->cupti);
  max_runs_ = user_replay_ ? std::max<std::size_t>(1, result.passes) + 1 : 1;
  prepared_ = result;
  return true;
}

KSCOPE_DECL bool counter_pass_run::prepare_metric_set(const std::vector<std::string>& requested, bool without_sass,
                                                      prepared_metric_set& set, counter_result& result) {
  // Which names to collect: the host API's word on each, the base list for suggestions.
  const std::vector<std::string>& bases = setup_.base_metrics();
  if (!setup_.message.empty()) return give_up(result);
  const metric_request request = resolve_metric_request(
      requested,
      [this, &bases](const std::string& name) {
        return (bases.empty() || check_metric_name(name, bases).known) && setup_.config_accepts(name);
      },
      bases);
  set.notes = request.notes;
  if (!request.ok()) {
    result.notes = request.notes;
    result.state = counter_state::unknown_metric;
    result.message = "hardware counters not collected on " + setup_.chip + ": ";
    for (std::size_t i = 0; i < request.errors.size(); ++i) result.message += (i ? "; " : "") + request.errors[i];
    return false;
  }
  set.metrics = request.collect;
  if (without_sass) {
    std::vector<std::string> kept, left_out;
    for (const std::string& m : set.metrics) (is_sass_instruction_metric(m) ? left_out : kept).push_back(m);
    if (!left_out.empty()) {
      set.notes.push_back(std::to_string(left_out.size()) + " SASS instruction metric(s) (" + left_out.front() +
                          (left_out.size() > 1 ? ", ..." : "") +
                          ") not collected: while kscope's activity collector traces kernels, CUPTI counts them as "
                          "0 under user replay; kernel replay (counter_replay::kernel) counts them");
      if (kept.empty()) {
        result.notes = set.notes;
        result.state = counter_state::unavailable;
        result.message = "hardware counters not collected: " + set.notes.back();
        return false;
      }
      set.metrics = kept;
    }
  }
  // The set's own host object: it keeps every metric added to it, and evaluates the ranges.
  std::vector<const char*> names;
  for (const std::string& m : set.metrics) names.push_back(m.c_str());
  if (!setup_.cupti_ok(set.host.initialize(setup_.libs->profiler, CUPTI_PROFILER_TYPE_RANGE_PROFILER, setup_.chip,
                                           setup_.availability),
                       "cuptiProfilerHostInitialize") ||
      !setup_.cupti_ok(set.host.add_metrics(names.data(), names.size()), "cuptiProfilerHostConfigAddMetrics"))
    return give_up(result);
  if (const profiler_host_step step = set.host.config_image(set.config, &set.passes); !setup_.cupti_ok(step.result, step.call))
    return give_up(result);
  return true;
}

KSCOPE_DECL bool counter_pass_run::arm() {
  const profiler_api& p = setup_.libs->profiler;
  // A re-armed pass hands CUPTI the image the last pass decoded into: cleared first, as a
  // new one is, so that nothing of the last pass can be read back as this one's.
  std::fill(counter_data_.begin(), counter_data_.end(), std::uint8_t{0});
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params, data_init);
  data_init.pRangeProfilerObject = range_->object;
  data_init.counterDataSize = counter_data_.size();
  data_init.pCounterData = counter_data_.data();
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params, set);
  set.pRangeProfilerObject = range_->object;
  set.configSize = prepared_set_->config.size();
  set.pConfig = prepared_set_->config.data();
  set.counterDataImageSize = counter_data_.size();
  set.pCounterDataImage = counter_data_.data();
  set.range = per_kernel_ ? CUPTI_AutoRange : CUPTI_UserRange;
  set.replayMode = user_replay_ ? CUPTI_UserReplay : CUPTI_KernelReplay;  // kernel replay: auto range only
  set.maxRangesPerPass = max_ranges_;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  if (!setup_.cupti_ok(p.range_counter_data_image_initialize(&data_init),
                       "cuptiRangeProfilerCounterDataImageInitialize") ||
      !setup_.cupti_ok(p.range_set_config(&set), "cuptiRangeProfilerSetConfig"))
    return false;
  // Earlier work must not run into the first range.
  return setup_.cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before the pass)");
}

KSCOPE_DECL bool counter_pass_run::rearm(counter_result& result) {
  if (options_ == nullptr || range_ == nullptr || range_->object == nullptr || !setup_.message.empty()) {
    result.state = counter_state::failed;
    result.message = "hardware counters not collected: the kept pass cannot run again";
    return false;
  }
  result = prepared_;
  started_ = pushed_ = all_submitted_ = ranges_unevaluated_ = false;
  sweep_range_ = trailing_sweep_ = false;
  run_error_.clear();
  if (!arm()) return give_up(result);
  if ((per_kernel_ || consecutive_) && options_->name_kernels) kernel_names_.emplace(setup_.libs->cupti);
  return true;
}

KSCOPE_DECL bool counter_pass_run::wants_run(const counter_result& result) const noexcept {
  return !all_submitted_ && result.runs < max_runs_ && run_error_.empty() && setup_.message.empty();
}

KSCOPE_DECL bool counter_pass_run::start_run(counter_result& result) {
  const profiler_api& p = setup_.libs->profiler;
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params, start);
  start.pRangeProfilerObject = range_->object;
  if (!setup_.cupti_ok(p.range_start(&start), "cuptiRangeProfilerStart")) return false;
  started_ = true;
  pushed_ = false;
  if (sweep_.ready()) {
    // After Start, so that what Start wrote is swept too.
    if (const std::string why = run_sweep(); !why.empty()) {
      run_error_ = "kscope's L2 sweep at the start of the pass failed: " + why;
      stop_range();
      return false;
    }
    sweep_range_ = per_kernel_;
  }
  if (!per_kernel_) {
    pushed_ = push_range(options_->range_name.c_str());
    if (!pushed_) {
      stop_range();
      return false;
    }
    ranges_begun_ = 1;
    ranges_refused_ = 0;
  }
  ++result.runs;
  return true;
}

KSCOPE_DECL bool counter_pass_run::next_range(const char* name) {
  if (!consecutive_ || !pushed_) return false;
  // The image's last range is kept for the trailing sweep when one runs.
  if (ranges_begun_ >= options_->max_kernels) {
    ++ranges_refused_;
    return false;
  }
  pop_range();
  // CUPTI keys a user range by its name: a name pushed again at the same level adds to the
  // range of that name instead of beginning one (a step scope's stretches between its
  // children all came back as one range). The range's index makes every name unique.
  const std::string unique = std::to_string(ranges_begun_) + " " + name;
  pushed_ = push_range(unique.c_str());
  if (pushed_) {
    ++ranges_begun_;
  } else if (run_error_.empty()) {
    // The work goes on outside any range: its figures would not be the work's.
    run_error_ = "a range of the profiled work could not be begun (" + setup_.message + ")";
  }
  return pushed_;
}

KSCOPE_DECL void counter_pass_run::end_run(bool work_threw) {
  const cudaError_t synced = cudaDeviceSynchronize();
  if (synced != cudaSuccess && !work_threw)
    run_error_ = std::string("the profiled work failed: ") + cudaGetErrorString(synced);
  if (pushed_) {
    pop_range();
    pushed_ = false;
  }
  // The trailing sweep: a range of its own (per kernel: the pass's last; whole callable:
  // a second user range) whose DRAM writes are the lines the work left dirty in the L2.
  if (trailing_wanted_ && started_ && synced == cudaSuccess && !work_threw && run_error_.empty()) {
    const bool in_range = per_kernel_ || push_range("kscope L2 write-back");
    if (in_range) {
      const std::string why = run_sweep();
      if (!per_kernel_) pop_range();
      if (!why.empty())
        run_error_ = "kscope's L2 sweep at the end of the pass failed: " + why;
      else
        trailing_sweep_ = true;
    }
  }
  stop_range();
}

KSCOPE_DECL void counter_pass_run::finish(counter_result& result, bool work_threw) {
  const profiler_api& p = setup_.libs->profiler;
  if (work_threw) {
    if (kernel_names_) (void)kernel_names_->stop();
    result.state = counter_state::failed;
    result.message = "hardware counters not collected: the profiled work threw";
    return;
  }
  if (!run_error_.empty()) {
    result.state = counter_state::failed;
    result.message = "hardware counters not collected: " + run_error_;
    return;
  }
  if (!setup_.message.empty()) return (void)give_up(result);
  if (!all_submitted_) {
    result.state = counter_state::failed;
    result.message = "hardware counters not collected: CUPTI still wanted passes after " +
                     std::to_string(result.runs) + " runs of the work (" + std::to_string(result.passes) +
                     " expected)";
    return;
  }

  // Decode, then evaluate every range.
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params, decode);
  decode.pRangeProfilerObject = range_->object;
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params, info);
  info.pCounterDataImage = counter_data_.data();
  info.counterDataImageSize = counter_data_.size();
  if (!setup_.cupti_ok(p.range_decode_data(&decode), "cuptiRangeProfilerDecodeData") ||
      !setup_.cupti_ok(p.range_get_counter_data_info(&info), "cuptiRangeProfilerGetCounterDataInfo"))
    return (void)give_up(result);
  std::vector<double> values(names_.size());
  std::size_t failed_ranges = 0;
  // Which decoded ranges are the work's. Range 0 is the leading L2 sweep when it ran in
  // per_kernel mode, the last one the trailing sweep unless the image filled up first.
  // CUPTI (13.0, H200) reports numOfRangeDropped = 0 even when launches beyond the
  // image's capacity were dropped, so a full image is told by its range count, and how
  // many kernels were lost by the launches the name callback saw (below).
  const std::size_t total = info.numTotalRanges;
  const bool full = per_kernel_ && total >= max_ranges_;  // a user range is never dropped
  std::size_t first = sweep_range_ && total > 0 ? 1 : 0;
  bool present = trailing_sweep_ && total > first;  // the last range is the trailing sweep, if not full
  bool identified = true;
  const auto evaluate = [&](std::size_t index, metric_values& into) {
    if (prepared_set_->host.evaluate(counter_data_, index, names_.data(), names_.size(), values.data()) != CUPTI_SUCCESS)
      return false;
    for (std::size_t m = 0; m < names_.size(); ++m) into.emplace(result.metrics[m], values[m]);
    return true;
  };
  // The sweeps are told apart by position; a kernel another thread launched into the
  // pass could shift them. Each sweep reads most of its buffer from DRAM, so where the
  // DRAM reads were collected a range that did not is not taken for one.
  const auto collected = [&result](const char* metric) {
    return std::find(result.metrics.begin(), result.metrics.end(), metric) != result.metrics.end();
  };
  if (collected("dram__bytes_read.sum") && (first == 1 || present)) {
    // 1: the range read like a sweep; 0: it did not; -1: no finite value to tell by (CUPTI
    // can evaluate the DRAM counters as NaN in every range of a pass), so the positions
    // stand, and the NaN ranges are said below.
    const auto swept = [&](std::size_t index) {
      metric_values v;
      if (!evaluate(index, v)) return 0;
      const auto r = v.find("dram__bytes_read.sum");
      if (r == v.end() || !std::isfinite(r->second)) return -1;
      return r->second >= 0.25 * static_cast<double>(sweep_.bytes()) ? 1 : 0;
    };
    if (first == 1 && swept(0) == 0) {
      identified = false;
    } else if (present && swept(total - 1) == 0) {
      if (full)
        present = false;  // the image filled up: the trailing sweep was dropped
      else
        identified = false;
    }
    if (!identified) {
      result.notes.push_back("kscope could not find its L2 sweeps among the ranges (did another thread launch "
                             "kernels during the pass?): every range is reported, and no write-back");
      first = 0;
      present = false;
    }
  } else if (present && full) {
    present = false;  // cannot be told without the reads: taken as dropped, so no write-back
  }
  const std::size_t end = present ? total - 1 : total;
  const bool trailing = present && end > first;
  result.ranges_dropped = 0;
  if (trailing_sweep_ && !trailing && identified)
    result.notes.push_back("the write-back of the lines the last kernel left dirty in the L2 is not in its DRAM "
                           "writes: " +
                           std::string(full ? "the counter-data image was full" : "the work launched no kernel"));
  for (std::size_t i = first; i < end; ++i) {
    counter_values range_values;
    range_values.index = i - first;
    range_values.range = per_kernel_ || consecutive_ ? std::to_string(i - first) : options_->range_name;
    range_values.name = per_kernel_ ? "kernel #" + std::to_string(i - first)
                        : consecutive_ ? "range #" + std::to_string(i - first)
                                       : options_->range_name;
    if (!evaluate(i, range_values.values)) ++failed_ranges;
    result.kernels.push_back(std::move(range_values));
  }
  // Metrics CUPTI evaluated as NaN in every range of the work: said, so that a metric that
  // rests on fewer calls than its group's says why (counter_aggregate::add_call leaves such
  // a call out of the metric's calls).
  if (!result.kernels.empty()) {
    std::string unvalued;
    std::size_t count = 0;
    for (const std::string& m : result.metrics) {
      const bool any = std::any_of(result.kernels.begin(), result.kernels.end(), [&](const counter_values& k) {
        const auto v = k.values.find(m);
        return v != k.values.end() && std::isfinite(v->second);
      });
      if (any) continue;
      unvalued += (count++ ? ", " : "") + m;
    }
    metrics_unvalued_ = count;
    if (count > 0)
      result.notes.push_back("CUPTI evaluated " + unvalued + " as not-a-number in every range of a pass: " +
                             (count == 1 ? "no value of it" : "no value of theirs") + " is taken from that pass");
  }
  // Kernel replay with several passes: CUPTI saves device memory before a kernel's first
  // pass and restores it before each later one, and those copies leave dirty lines in the
  // L2 that the pass then writes back (H200: ~23 MB counted for a kernel that only reads,
  // bench/RESULTS.md). No sweep can run between CUPTI's own replays, so every range's DRAM
  // writes may hold that much that is not its own, and a trailing sweep would measure it
  // rather than the work's write-back (begin() runs none); the leading sweep (which
  // writes nothing itself) measures what such a pass leaves.
  if (restores_memory_ && first == 1) {
    metric_values leading;
    if (evaluate(0, leading)) {
      const auto w = leading.find("dram__bytes_write.sum");
      if (w != leading.end() && std::isfinite(w->second)) result.replay_dirty_bytes = w->second;
    }
  }
  if (restores_memory_ && collected("dram__bytes_write.sum"))
    result.notes.push_back(
        "kernel replay in " + std::to_string(result.passes) +
        " passes: CUPTI's save and restore of device memory around each kernel's passes leaves dirty lines in "
        "the L2 that the kernel's pass writes back, so dram__bytes_write.sum may include up to the L2's size "
        "that is not the kernel's own (replay_dirty_bytes: what kscope's sweep measured) and the write-back "
        "after the work is not measured; counter_replay::user, or a metric set that needs one pass, gives exact "
        "writes");
  if (trailing && !result.kernels.empty()) {  // never under restores_memory_: no trailing sweep ran
    metric_values sweep_values;
    if (evaluate(end, sweep_values))
      add_write_back(result.kernels.back().values, sweep_values);
    else
      result.notes.push_back("the L2 write-back after the last kernel could not be evaluated: its DRAM writes "
                             "lack the lines it left dirty in the L2");
  }
  // A full image drops the trailing sweep first, so one kernel more than max_kernels can
  // be in it: that one is dropped here too.
  const std::size_t stored = result.kernels.size();
  if (per_kernel_ && result.kernels.size() > options_->max_kernels) result.kernels.resize(options_->max_kernels);
  // Kernels launched beyond the image: from the launches seen per run, when known.
  std::vector<std::string> launched;
  if (kernel_names_) launched = kernel_names_->stop();
  const bool launches_known = kernel_names_ && kernel_names_->ok() && kernel_names_->graph_launches() == 0 &&
                              result.runs > 0 && launched.size() % result.runs == 0;
  if (per_kernel_ && identified) {
    if (launches_known) {
      const std::size_t per_run = launched.size() / result.runs;
      result.ranges_dropped = per_run > result.kernels.size() ? per_run - result.kernels.size() : 0;
    } else if (full) {
      // Without names only a lower bound is known: the note says so, not a count.
      result.ranges_dropped = stored - result.kernels.size();
      result.notes.push_back("the counter-data image was full after " + std::to_string(result.kernels.size()) +
                             " kernels (max_kernels): at least " + std::to_string(result.ranges_dropped) +
                             " later kernels were not profiled (ranges_dropped); how many more is unknown "
                             "without kernel names");
    }
  }
  ranges_unevaluated_ = failed_ranges > 0;
  if (failed_ranges > 0)
    result.notes.push_back(std::to_string(failed_ranges) + " of " + std::to_string(end - first) +
                           " ranges could not be evaluated (cuptiProfilerHostEvaluateToGpuValues): they have no "
                           "values");
  if (result.ranges_dropped > 0 && launches_known)
    result.notes.push_back(std::to_string(result.ranges_dropped) + " kernels beyond max_kernels (" +
                           std::to_string(options_->max_kernels) + ") were not profiled");

  // Kernel names, only when they line up one to one with the ranges (consecutive ranges
  // are stretches of the work, not kernels: the callback only noted the launches).
  if (kernel_names_ && per_kernel_) {
    if (!kernel_names_->ok()) {
      result.notes.push_back(kernel_names_->why());
    } else if (kernel_names_->graph_launches() > 0 ||
               !keep_first_run(launched, result.runs, result.kernels.size() + result.ranges_dropped)) {
      result.notes.push_back("kernel names withheld: " + std::to_string(launched.size()) + " launches seen (" +
                             std::to_string(kernel_names_->graph_launches()) + " of them CUDA graph launches) for " +
                             std::to_string(result.kernels.size() + result.ranges_dropped) +
                             " ranges; ranges are numbered in launch order");
    } else {
      for (std::size_t i = 0; i < result.kernels.size(); ++i) result.kernels[i].name = launched[i];
    }
  }
  if (user_replay_ && result.runs > 1)
    result.notes.push_back("the work ran " + std::to_string(result.runs) +
                           " times (user replay, one run per pass); device memory is not restored between runs");

  result.state = counter_state::collected;
  result.message = "hardware counters: " + std::to_string(result.metrics.size()) + " metrics for " +
                   std::to_string(result.kernels.size()) + (per_kernel_ ? " kernels" : " range") + " in " +
                   std::to_string(result.passes) + (result.passes == 1 ? " pass" : " replay passes") + " on " +
                   setup_.chip + " (CUPTI " + std::to_string(result.cupti_version) + ")";
  if (per_kernel_ && result.kernels.empty()) result.message += "; the work launched no kernel";
}

KSCOPE_DECL bool counter_pass_run::give_up(counter_result& result) {
  result.state = setup_.state;
  result.message = setup_.message;
  return false;
}

KSCOPE_DECL bool counter_pass_run::keep_first_run(std::vector<std::string>& launched, std::size_t runs, std::size_t per_run) {
  if (launched.size() == per_run) return true;
  if (runs < 2 || launched.size() != runs * per_run) return false;
  for (std::size_t i = per_run; i < launched.size(); ++i)
    if (launched[i] != launched[i % per_run]) return false;
  launched.resize(per_run);
  return true;
}

KSCOPE_DECL std::string counter_pass_run::run_sweep() {
  const std::size_t mark = launches_logged();
  ++profiled_depth;
  std::string why = sweep_.run();
  --profiled_depth;
  forget_launches_since(mark);
  return why;
}

KSCOPE_DECL bool counter_pass_run::push_range(const char* name) {
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_PushRange_Params, push);
  push.pRangeProfilerObject = range_->object;
  push.pRangeName = name;
  return setup_.cupti_ok(setup_.libs->profiler.range_push(&push), "cuptiRangeProfilerPushRange");
}

KSCOPE_DECL void counter_pass_run::pop_range() {
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_PopRange_Params, pop);
  pop.pRangeProfilerObject = range_->object;
  (void)setup_.cupti_ok(setup_.libs->profiler.range_pop(&pop), "cuptiRangeProfilerPopRange");
}

KSCOPE_DECL void counter_pass_run::stop_range() {
  if (!started_) return;
  KSCOPE_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params, stop);
  stop.pRangeProfilerObject = range_->object;
  started_ = false;
  if (!setup_.cupti_ok(setup_.libs->profiler.range_stop(&stop), "cuptiRangeProfilerStop")) return;
  all_submitted_ = stop.isAllPassSubmitted != 0;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

KSCOPE_DECL void run_counter_pass_locked(const std::vector<std::string>& requested, counter_work_ref work,
                                    const counter_options& options, counter_result& result,
                                    std::exception_ptr& user_error);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void run_counter_pass_locked(const std::vector<std::string>& requested, counter_work_ref work,
                                    const counter_options& options, counter_result& result,
                                    std::exception_ptr& user_error) {
  release_kept_range_profiler();  // the per-scope counters' profiler, enabled between their calls
  release_kept_pc_sampling();     // a warp-stall pass's PC sampling, enabled between passes
  counter_pass_run pass;
  if (!pass.begin(requested, options, result)) return;
  while (pass.wants_run(result) && !user_error) {
    if (options.before_each_run) {
      const std::size_t mark = pass.launches_logged();
      try {
        options.before_each_run();
        // Its kernels end before the first range starts; a fault there is the hook's.
        if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
          pass.fail_run(std::string("the before_each_run hook failed: ") + cudaGetErrorString(e));
          break;
        }
      } catch (...) {
        user_error = std::current_exception();
        break;
      }
      pass.forget_launches_since(mark);
    }
    if (!pass.start_run(result)) break;
    try {
      work();
    } catch (...) {
      user_error = std::current_exception();
    }
    pass.end_run(static_cast<bool>(user_error));
  }
  pass.finish(result, static_cast<bool>(user_error));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#endif  // KSCOPE_HAS_RANGE_PROFILER

KSCOPE_DECL counter_result run_counter_pass(const std::vector<std::string>& metrics, counter_work_ref work,
                                       const counter_options& options);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL counter_result run_counter_pass(const std::vector<std::string>& metrics, counter_work_ref work,
                                       const counter_options& options) {
  counter_result result;
  std::exception_ptr user_error;
  try {
    const std::string error = counter_request_error(metrics, options);
    if (!error.empty()) {
      result.state = counter_state::invalid_request;
      result.message = "hardware counters not collected: " + error;
      return result;
    }
#if KSCOPE_HAS_RANGE_PROFILER
    std::unique_lock<std::mutex> lock(counter_pass_mutex(), std::try_to_lock);
    if (!lock.owns_lock()) {
      result.state = counter_state::busy;
      result.message = "hardware counters not collected: another counter pass is running in this process";
      return result;
    }
    run_counter_pass_locked(metrics, work, options, result, user_error);
#else
    (void)work;
    result.state = counter_state::disabled;
    result.message = "hardware counters unavailable: kscope was built without the CUPTI range profiler headers "
                     "(cupti_range_profiler.h, cupti_profiler_host.h: CUDA 12.6 or later)";
#endif
  } catch (const std::exception& e) {  // out of memory in kscope's own bookkeeping
    result.state = counter_state::failed;
    result.message = std::string("hardware counters not collected: ") + e.what();
  } catch (...) {
    result.state = counter_state::failed;
    result.message = "hardware counters not collected: unknown error";
  }
  if (user_error) std::rethrow_exception(user_error);
  return result;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Profiles the GPU work `work` launches and returns the requested metrics per kernel (or
// for the whole call, counter_options::ranges). An empty `metrics` means the default set
// (default_metric_names(); missing ones are noted, fallbacks taken). Metrics asked for by
// name must exist: an unknown one is counter_state::unknown_metric, with close names in
// the message. `work` is not called when profiling cannot start.
//   auto r = kscope::profile_counters({"dram__bytes_read.sum", "dram__bytes_write.sum"},
//                                     [&] { copy<<<g, b>>>(src, dst, n); });
template <class Work>
[[nodiscard]] counter_result profile_counters(const std::vector<std::string>& metrics, Work&& work,
                                              const counter_options& options = {}) {
  using work_type = std::remove_reference_t<Work>;
  const detail::counter_work_ref ref{const_cast<void*>(static_cast<const void*>(std::addressof(work))),
                                     [](void* object) { (*static_cast<work_type*>(object))(); }};
  return detail::run_counter_pass(metrics, ref, options);
}

#if KSCOPE_HAS_RANGE_PROFILER
namespace detail {
// The one-pass groups for `metrics` on the current device (evidence/metrics.hpp:
// plan_one_pass_groups), with the names resolved as a pass resolves them (fallbacks for
// names the device does not offer). Call with the counter-pass lock held. False, with
// `why`, when the profiler cannot be set up here.
KSCOPE_DECL bool plan_counter_groups(const std::vector<std::string>& metrics, const counter_options& options,
                                one_pass_plan& plan, counter_state& state, std::string& why);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool plan_counter_groups(const std::vector<std::string>& metrics, const counter_options& options,
                                one_pass_plan& plan, counter_state& state, std::string& why) {
  counter_setup setup;
  if (!setup.open(options.cupti_library, options.nvperf_host_library)) {
    state = setup.state;
    why = setup.message;
    return false;
  }
  // A plan an earlier run made for exactly this (detail/plan_cache.hpp): seconds of CUPTI
  // host questions saved.
  plan_cache_key key;
  key.chip = setup.chip;
  key.cupti_version = static_cast<int>(setup.libs->cupti.version);
  if (cudaDriverGetVersion(&key.driver_version) != cudaSuccess) (void)cudaGetLastError();
  key.availability_hash = plan_cache_hash(setup.availability);
  key.metrics = metrics;
  std::string cached_at;
  if (read_plan_cache(key, plan, &cached_at)) {
    plan.notes.push_back("the metric groups were read from " + cached_at +
                         ", planned by an earlier run for this chip, driver, CUPTI and metric list "
                         "(KSCOPE_CACHE_DIR=0 plans afresh)");
    return true;
  }
  const std::vector<std::string>& bases = setup.base_metrics();
  if (!setup.message.empty()) {
    state = setup.state;
    why = setup.message;
    return false;
  }
  const metric_request request = resolve_metric_request(
      metrics,
      [&setup, &bases](const std::string& name) {
        return (bases.empty() || check_metric_name(name, bases).known) && setup.config_accepts(name);
      },
      bases);
  if (!request.ok()) {
    state = counter_state::unknown_metric;
    why = "hardware counters not collected on " + setup.chip + ": ";
    for (std::size_t i = 0; i < request.errors.size(); ++i) why += (i ? "; " : "") + request.errors[i];
    return false;
  }
  plan = plan_one_pass_groups(request.collect,
                              [&setup](const std::vector<std::string>& names) { return setup.count_passes(names); },
                              setup.chip);
  plan.notes.insert(plan.notes.begin(), request.notes.begin(), request.notes.end());
  write_plan_cache(key, plan);
  return true;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS
}  // namespace detail
#endif

// The base metrics the current device offers, or why they cannot be listed.
//   auto list = kscope::list_counter_metrics();
//   if (list.ok()) for (auto& m : list.base_metrics) std::puts(m.c_str());
[[nodiscard]] KSCOPE_DECL counter_metric_list list_counter_metrics(const counter_options& options = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL counter_metric_list list_counter_metrics(const counter_options& options) {
  counter_metric_list out;
  try {
#if KSCOPE_HAS_RANGE_PROFILER
    std::unique_lock<std::mutex> lock(detail::counter_pass_mutex(), std::try_to_lock);
    if (!lock.owns_lock()) {
      out.state = counter_state::busy;
      out.message = "counter metrics not listed: a counter pass is running in this process";
      return out;
    }
    detail::counter_setup setup;
    if (!setup.open(options.cupti_library, options.nvperf_host_library)) {
      out.state = setup.state;
      out.message = setup.message;
      return out;
    }
    out.chip = setup.chip;
    out.base_metrics = setup.base_metrics();
    if (!setup.message.empty()) {
      out.state = setup.state;
      out.message = setup.message;
      return out;
    }
    out.state = counter_state::collected;
    out.message = std::to_string(out.base_metrics.size()) + " base metrics on " + setup.chip;
#else
    (void)options;
    out.state = counter_state::disabled;
    out.message = "counter metrics unavailable: kscope was built without the CUPTI range profiler headers "
                  "(CUDA 12.6 or later)";
#endif
  } catch (const std::exception& e) {
    out.state = counter_state::failed;
    out.message = std::string("counter metrics not listed: ") + e.what();
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
