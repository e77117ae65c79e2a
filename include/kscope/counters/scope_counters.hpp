// kscope/counters/scope_counters.hpp — hardware counters per scope in a running program: a
// bounded sample of steps is profiled (the range profiler of counters/collect.hpp), each
// step once with one group of metrics that fits in one pass, the groups rotating over the
// steps, and each kernel of a profiled step is added to the scope that launched it.
//
//   kscope::session::global().enable_counters();   // or KSCOPE_COUNTERS=1
//   ... KSCOPE_SCOPE("step") { KSCOPE_SCOPE("decode") {...} } ...  // steps 1, 2, 102, ... profiled
//   auto r = kscope::session::global().report();   // per scope: measured bytes, FLOPs, verdict
//
// A step (whole_steps, the default) is a call of the step scope (step_scope), or else of any
// scope opened with no scope open on its thread. The step's n-th call is profiled when
// n <= first_calls (at least as many as there are metric groups), or when (n - first_calls)
// is a multiple of `every`, up to max_calls_per_scope, and only when no other counter pass
// runs (then the call runs normally and is counted as skipped). The whole step is one
// range-profiler session with one range per kernel; the launch callback that is subscribed
// (the activity collector's, else the pass's own) notes each launch with the innermost scope
// of its thread (scope/detail/counter_hook.hpp), and range i goes to launch i's scope when
// nothing can have shifted them (detail/step_kernels.hpp; else, with a note, the step counts
// for no scope when scopes were nested in it, and for the step scope when none was).
// So a step of eight nested scopes pays CUPTI's setup, Start and Stop once, not eight times
// (each step sets CUPTI up afresh: a profiler kept enabled crashed in BeginPass when a step's
// group was set up on it, and re-armed passes read NaN, below). whole_steps false: each scope's calls are chosen and profiled
// on their own, with every kernel inside them. One pass at a time in the process: the
// profiled call's thread holds the counter-pass lock from the scope's open to its close.
//
// What a profiled call costs, and why its time is never reported: its kernels run one at a
// time (one range each) between two device synchronizations and two L2 sweeps. CUPTI's
// setup (host object, config image, enabling the range profiler on the context: hundreds
// of milliseconds) is paid by every profiled call unless the profiler is kept enabled: keeping it and re-arming
// each group's pass (keep_profiler) costs ~0.07 s instead of ~0.4 s, but on an H100 (CUDA
// 13.0) re-armed passes evaluated many metrics as NaN, so re-arming is off unless asked for (and
// switches itself off on such a NaN). The speed-of-light rollups that need several passes
// are measured as their parts (evidence/breakdown.hpp). The report says what the calls cost
// (scope_counter_cost: before and after the work, set-up and re-armed calls apart); with
// kernel_replay each kernel also runs once per pass (tens for the default set) with device
// memory saved and restored around each replay, which is why the default is one pass per
// call. Metrics that need several passes alone are measured as their parts where the chip's
// breakdown is known, else replaced by one-pass stand-ins or left out (the notes say which;
// classify() then takes the busiest measured unit as a lower bound). Each metric's per-call value rests on the calls whose group
// held it (counter_aggregate: aggregated_metric::calls). So the call's record is flagged (scope layer:
// counter_hook.hpp): the recorder counts it as profiled and keeps it out of every timing
// statistic, scopes opened inside it on its thread too, and its kernels' activity records
// are kept out of the GPU-activity aggregates (their launches are marked in the
// correlation table). Kernels other threads launch during the pass are profiled with it:
// they run serialized then, and their counters are added to the profiled scope; the report
// says so. Permanent refusals (no permission, no library, unknown metric) switch the hook
// off with one message; everything else keeps working.
#pragma once

#include "../core/config.hpp"
#include "../evidence/metrics.hpp"
#include "../scope/detail/counter_hook.hpp"
#include "../core/detail/once.hpp"
#include "../core/detail/clock.hpp"
#include "../scope/node_id.hpp"
#include "../scope/recorder.hpp"  // the step scope's name (scope_counter_options::step_scope)
#include "collect.hpp"
#include "detail/step_kernels.hpp"
#include "../evidence/counter_cost.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kscope {

struct scope_counter_options {
  // Empty: scope_metric_names() (default_metric_names() with kernel_replay); fallbacks taken.
  std::vector<std::string> metrics;
  // true (the default): a profiled call is a whole step. Only calls of the step scope are
  // chosen (step_scope, or else any scope opened with no scope open on its thread: the
  // outermost scope of each call), each chosen step runs as ONE range-profiler session,
  // and each of its kernels goes to the scope that launched it, so the scopes nested in a
  // step get their counters from the step's pass (they never start a pass of their own).
  // A step costs CUPTI's start and stop once, not once per nested scope. Each scope's
  // figures are its own kernels' (its children's are theirs, as in the GPU activity).
  // false: each scope's chosen calls are profiled on their own, with every kernel inside
  // (a scope nested in a profiled call gets nothing from it).
  bool whole_steps = true;
  // whole_steps: the name of the step scope ("decode_step"); empty: every outermost scope.
  std::string step_scope;
  // whole_steps: one range per stretch of the step that a scope owns (the range changes at
  // each open and close of a scope nested in the step) instead of one range per kernel.
  // A range per kernel makes CUPTI run the step's kernels one at a time, each between its
  // own counter start and stop (~0.7 ms a kernel on an H100: a step of 300 short kernels
  // took 10x its time, bench/counter_step_probe.cu); a range per stretch lets them run as
  // they do unprofiled, and each scope's counters are the sums of its stretches. What it
  // gives up: no per-kernel values (a rate is the stretch's, gaps between kernels included),
  // a kernel another thread launches lands in the stretch open when it runs, and the L2
  // counts what else used it during the stretch (an H100, session 21: L2 bytes 12-19 %
  // above the same kernels' per-kernel ranges; L1 bytes and instruction counts equal).
  // A step of 8 scopes and 307 kernels of 65 us (20.5 ms): 11x its time profiled this way
  // against 65x with a range per kernel (bench/RESULTS.md).
  // KSCOPE_COUNTERS=scopes.
  bool ranges_per_scope = false;
  // Plan the one-pass metric groups on a thread of kscope's own, begun at the first step,
  // instead of inside the first profiled step (seconds of CUPTI host calls on an H100:
  // bench/RESULTS.md). Steps while it runs go unprofiled and are not counted as calls, so
  // the first profiled steps are the first after the plan; a short program may profile none.
  bool plan_in_background = false;
  // false (the default): each profiled call runs ONCE with one one-pass metric group (user
  // replay of one pass: no device-memory save and restore, so the program's memory size
  // does not matter), the groups rotating over each scope's profiled calls. true: every
  // profiled call gets every metric by kernel replay (each kernel replayed once per pass,
  // device memory saved and restored around each replay: minutes for a large program).
  bool kernel_replay = false;
  std::uint32_t first_calls = 2;             // each scope's (whole_steps: step's) first calls are profiled
  std::uint32_t every = 100;                 // then every k-th call (0: no more)
  // At most this many profiled calls per scope. The one-pass groups (about 20 on GH100 with
  // the speed-of-light rollups' parts) each need a call before every metric is measured.
  std::uint32_t max_calls_per_scope = 40;
  // Kernels per profiled call the counter-data image holds at first (0: 1024 for a whole
  // step, 256 for a scope's call; with ranges_per_scope, 32 stretches). A call with more is
  // counted as partial (its kernels left out of the sums, the row says so) and the scope's
  // next calls get an image twice the kernels seen, up to counter_max_kernels_limit.
  std::size_t max_kernels = 0;
  // One-pass groups: keep the range profiler enabled on the context between profiled calls,
  // and each group's host object, config image and counter-data image, so that a group's
  // later calls pay only for re-arming (SetConfig, a synchronization) instead of CUPTI's
  // whole setup. Another pass (profile_counters, warp stalls, PM sampling) releases it first.
  //
  // true: kept and re-armed as above. Off: every call enables the range profiler (its
  // first Start after enabling costs ~0.4 s) and sets its group up afresh. On an H100
  // (driver 580, CUDA 13.0) re-armed passes evaluated a third of the speed-of-light parts
  // as NaN in every range, calls set up afresh never did (bench/RESULTS.md); a re-armed
  // call with such a metric switches keeping off for the rest of the run, with a note.
  // Why (bench/counter_step_probe.cu, session 21): an enabled range profiler keeps the
  // config of its first SetConfig; another group's config set on it later is not used, so
  // that group's metrics that the first group lacks read NaN. Only one group re-armed on
  // its own profiler is clean.
  // Unset (the default): nothing is kept, whole steps and scope calls alike. Keeping the
  // profiler enabled and setting a step's group up afresh on it crashed inside
  // NVPW_CUDA_Profiler_BeginPass on an H100 (driver 580.159.04, CUDA 13.0, session 19:
  // bench/RESULTS.md), so no default takes that path.
  std::optional<bool> keep_profiler;
  std::string cupti_library;                 // as counter_options
  std::string nvperf_host_library;
};

// One scope's profiled calls.
struct scope_counter_totals {
  node_id node = 0;
  std::uint64_t profiled_calls = 0;
  std::uint64_t failed_calls = 0;      // the pass failed (message in notes)
  std::uint64_t kernels = 0;           // kernels profiled over the calls profiled whole
  std::uint64_t kernels_dropped = 0;   // past the image's capacity in a call (a lower bound)
  // Calls whose kernels did not all fit the counter-data image: counted (their sums are
  // scaled from the whole calls), their kernels not added; the next calls get a larger image.
  std::uint64_t partial_calls = 0;
  std::uint64_t partial_kernels = 0;   // the kernels those calls did profile
  counter_aggregate aggregate;         // every profiled kernel's values
  std::size_t groups = 1;              // metric groups rotated over the calls (1: every metric each call)
};

struct scope_counters_snapshot {
  bool enabled = false;                 // enable_counters() was called and the hook is on
  std::string status;                   // one line: what runs, or why not
  std::vector<std::string> metrics;     // what the passes collected (fallbacks applied)
  std::vector<std::string> notes;       // fallbacks, failures, other threads' kernels
  std::uint64_t passes = 0;             // profiled calls, all scopes
  std::uint64_t skipped_busy = 0;       // due calls not profiled: another pass was running
  scope_counter_cost cost;              // what the profiled calls cost the program
  std::vector<scope_counter_totals> scopes;  // by node id

  [[nodiscard]] const scope_counter_totals* find(node_id n) const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const scope_counter_totals* scope_counters_snapshot::find(node_id n) const noexcept {
  for (const scope_counter_totals& s : scopes)
    if (s.node == n) return &s;
  return nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The process-wide per-scope counter sampler (never destroyed, like the recorder).
class scope_counter_sampler {
 public:
  static constexpr std::size_t max_nodes = 1u << 16;  // call counters kept per node id below this

  [[nodiscard]] static scope_counter_sampler& global() noexcept;

  // Installs the hook: from now on scopes' due calls are profiled. False (status says why)
  // when counters cannot run here at all (built without the range profiler, no device).
  bool start(const scope_counter_options& options = {});

  // Removes the hook; calls being profiled finish their pass.
  void stop() noexcept;

  [[nodiscard]] scope_counters_snapshot snapshot() const;

  // Forgets the aggregates and the call counts (the hook stays as it is).
  void reset();

 private:
  scope_counter_sampler();

#if KSCOPE_HAS_RANGE_PROFILER
  // A group's pass, kept between its calls (one-pass groups only): the options the run
  // points at, the run with its host object, config and counter-data images.
  struct kept_pass {
    counter_options options;
    detail::counter_pass_run run;
    std::uint64_t generation = 0;  // kept_generation_ when it was begun
  };
  // The profiled call open on this thread (at most one: nested scopes inside a profiled
  // call never profile).
  struct pass_state {
    std::unique_lock<std::mutex> pass_lock;
    std::unique_ptr<kept_pass> pass;
    std::vector<std::string> group;  // its key in kept_[context_id] (empty: not kept)
    std::uint64_t context_id = 0;
    counter_result result;
    bool cold = true;                // CUPTI was set up for this call
    std::int64_t opened_ns = 0;      // when the hook was entered
    bool whole_step = false;         // the launches are noted in step_log_ (whole_steps)
    std::uint32_t step_thread = 0;   // the step's thread index
    // ranges_per_scope: the scope of each range begun, and the step's launches noted when
    // it began (a range in which nothing was launched measured nothing of its scope).
    bool per_scope = false;
    std::vector<node_id> range_nodes;
    std::vector<std::uint32_t> range_first_launch;
  };
  static pass_state*& this_thread_pass() noexcept {
    static thread_local pass_state* pass = nullptr;  // trivial: no thread-exit cost
    return pass;
  }

  static bool hook_open(node_id node) noexcept { return global().open_call(node); }
  // ranges_per_scope: a scope nested in the step opened or closed on the step's thread
  // (scope layer: step_range_switch); the step's range follows to `innermost`.
  static void hook_next_range(node_id innermost) noexcept {
    pass_state* state = this_thread_pass();
    if (state == nullptr || !state->per_scope || state->range_nodes.back() == innermost) return;
    try {
      char name[32];
      std::snprintf(name, sizeof name, "scope %u", static_cast<unsigned>(innermost));
      const detail::profiled_step_log* log = detail::active_step_log.load(std::memory_order_relaxed);
      const std::uint32_t launched = log != nullptr ? log->launch_count.load(std::memory_order_relaxed) : 0;
      // Nothing launched since the current range began: it becomes the new scope's (no
      // empty range, one range fewer).
      if (log != nullptr && launched == state->range_first_launch.back()) {
        state->range_nodes.back() = innermost;
        return;
      }
      if (!state->pass->run.next_range(name)) return;  // refused: counted by the run, the step not paired
      state->range_nodes.push_back(innermost);
      state->range_first_launch.push_back(launched);
    } catch (...) {
    }
  }
  static void hook_close(node_id node) noexcept { global().close_call(node); }

  bool due(node_id node) noexcept {
    if (node >= max_nodes) return false;
    const std::uint32_t n = calls_[node].fetch_add(1, std::memory_order_relaxed) + 1;
    // The three numbers the choice needs, as atomics: start() may change the options while
    // scopes open on other threads (the rest of the options is read under mutex_).
    const std::uint32_t every = every_.load(std::memory_order_relaxed);
    // Each scope's first calls cover every one-pass group at least once, so its full set
    // of metrics is there after as many calls as groups (then every k-th call).
    const std::uint32_t first =
        std::max(first_calls_.load(std::memory_order_relaxed), groups_planned_.load(std::memory_order_relaxed));
    const bool chosen = n <= first || (every > 0 && n > first && (n - first) % every == 0);
    if (!chosen) return false;
    return profiled_[node].load(std::memory_order_relaxed) < max_calls_per_scope_.load(std::memory_order_relaxed);
  }

  // whole_steps: the call of `node` opening now is a step (the named step scope, or the
  // outermost scope on its thread: at the hook, the thread's current node is the parent).
  bool is_step(node_id node) noexcept {
    if (!step_named_.load(std::memory_order_acquire)) return detail::this_thread_state().current == detail::root_node;
    if (node >= max_nodes) return false;
    std::uint8_t kind = step_kind_[node].load(std::memory_order_relaxed);
    if (kind == 0) {  // first sight of the node: its name compared once
      const std::string name = recorder::global().node_name(node);
      std::lock_guard<std::mutex> lock(mutex_);
      kind = name == options_.step_scope ? 1 : 2;
      step_kind_[node].store(kind, std::memory_order_relaxed);
    }
    return kind == 1;
  }

  bool open_call(node_id node) noexcept {
    try {
      if (this_thread_pass() != nullptr) return false;
      const bool whole_step = whole_steps_.load(std::memory_order_relaxed);
      if (whole_step && !is_step(node)) return false;
      // The metric groups are planned on kscope's own thread, begun at the first step (the
      // program's context is there by then): until the plan is ready a step is not counted
      // as a call, so the first profiled steps are the first after it.
      if (plan_in_background_.load(std::memory_order_relaxed) && !plan_known_.load(std::memory_order_acquire) &&
          !kernel_replay_.load(std::memory_order_relaxed)) {
        start_planning();
        skipped_planning_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      if (!due(node)) return false;
      auto state = std::make_unique<pass_state>();
      state->opened_ns = detail::now_ns();
      state->pass_lock = std::unique_lock<std::mutex>(detail::counter_pass_mutex(), std::try_to_lock);
      if (!state->pass_lock.owns_lock()) {
        skipped_busy_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      detail::release_kept_pc_sampling();  // a warp-stall pass's PC sampling holds the counters
      const bool ready = begin_call(node, *state);
      if (ready && state->pass->run.start_run(state->result)) {
        profiled_[node].fetch_add(1, std::memory_order_relaxed);
        // After the leading L2 sweep (a launch of kscope's own): from here on every kernel
        // launch is the step's, noted with its scope by the launch callback.
        if (whole_step) begin_step_log(*state);
        if (whole_step && state->pass->options.ranges == counter_ranges::consecutive) {
          state->per_scope = true;
          state->range_nodes.assign(1, node);
          state->range_first_launch.assign(1, 0);
          detail::step_range_switch.store(&hook_next_range, std::memory_order_relaxed);
        }
        const double before = static_cast<double>(detail::now_ns() - state->opened_ns);
        std::lock_guard<std::mutex> lock(mutex_);
        (state->cold ? cost_.cold_before_ns : cost_.warm_before_ns) += before;
        ++(state->cold ? cost_.cold_calls : cost_.warm_calls);
      } else {
        if (ready) refused(state->result);
        // A setup paid for nothing: a group split, a start refused. Counted, so that the
        // cost the report states is the whole cost.
        if (state->pass) {
          std::lock_guard<std::mutex> lock(mutex_);
          ++cost_.abandoned_setups;
          cost_.abandoned_ns += static_cast<double>(detail::now_ns() - state->opened_ns);
        }
        return false;
      }
      this_thread_pass() = state.release();
      return true;
    } catch (...) {
      return false;
    }
  }

  // The pass for this call, ready to start: a kept group's pass re-armed, or one begun now.
  // False when the call goes unprofiled (why is noted or switches the hook off); state.pass
  // is set once a setup was paid for.
  bool begin_call(node_id node, pass_state& state) {
    scope_counter_options options;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      options = options_;  // start() may replace them meanwhile
    }
    std::vector<std::string> metrics = options.metrics;
    if (!options.kernel_replay) {
      // One pass, run once: user replay with a one-pass group (no memory save/restore).
      counter_options run_options = pass_options(options);
      run_options.replay = counter_replay::user;
      std::uint64_t plan_generation = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        plan_generation = plan_generation_;
      }
      if (!ensure_plan(run_options, options, plan_generation)) return false;
      const std::uint32_t nth = profiled_[node].load(std::memory_order_relaxed);
      // Kept passes are per context, told apart by the driver's context id (unique for
      // the process's life: a context destroyed and made again gets a new one, so a kept
      // pass never meets a context it was not set up on).
      std::uint64_t context_id = 0;
      const bool context_known = detail::current_cuda_context_id(context_id);
      std::shared_ptr<detail::range_profiler_handle> keep;
      std::uint64_t generation = 0;
      std::unique_ptr<kept_pass> too_small;  // a kept pass whose image is smaller than this scope needs
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (plan_.groups.empty()) return false;
        // A group of SASS instruction counters while the activity collector traces: CUPTI
        // counts them as 0 under user replay, and kernel replay would stop the collector's
        // records (counters/collect.hpp). The next group that has none runs instead.
        const bool tracing = detail::activity_tracing().load(std::memory_order_acquire);
        bool found_group = false;
        for (std::size_t i = 0; i < plan_.groups.size() && !found_group; ++i) {
          const std::vector<std::string>& g = plan_.groups[(nth + i) % plan_.groups.size()];
          if (tracing && detail::has_sass_instruction_metric(g)) continue;
          metrics = g;
          found_group = true;
        }
        if (!found_group) return false;
        if (tracing && plan_has_sass_) note(sass_while_tracing_note());
        generation = kept_generation_;
        // The image holds every kernel of this scope's calls: grown after a call filled it.
        const auto need = capacity_.find(node);
        if (need != capacity_.end()) run_options.max_kernels = std::max(run_options.max_kernels, need->second);
        if (keep_profiler_ && context_known) {
          kept_context& kept = kept_[context_id];
          const auto found = kept.passes.find(metrics);
          if (found != kept.passes.end()) {
            if (found->second->options.max_kernels >= run_options.max_kernels)
              state.pass = std::move(found->second);
            else
              too_small = std::move(found->second);  // set up afresh below, with the larger image
            kept.passes.erase(found);
          }
          if (!kept.range) kept.range = std::make_shared<detail::range_profiler_handle>();
          keep = kept.range;
          state.group = metrics;
          state.context_id = context_id;
        }
      }
      if (too_small) {
        // A larger image than the kept passes were set up for: every kept pass is let go
        // (the profiler disabled) and this call sets CUPTI up afresh with its own profiler,
        // the path a first call takes; the group is kept again from its next call.
        too_small.reset();  // outside mutex_: its image and config are freed
        keep = nullptr;
        state.group.clear();
        drop_kept();
      }
      if (state.pass) {
        state.cold = false;
        if (state.pass->run.rearm(state.result)) return true;
        stop_keeping("a kept range profiler could not be set up again (" + state.result.message + ")");
        keep = nullptr;
        state.group.clear();
        state.pass.reset();  // spent: begun afresh below, with a range profiler of its own
      }
      state.cold = true;
      state.pass = std::make_unique<kept_pass>();
      state.pass->options = run_options;
      state.pass->generation = generation;  // read with `keep`: a later drop is seen at close
      if (!state.pass->run.begin(metrics, state.pass->options, state.result, std::move(keep))) {
        refused(state.result);
        return false;
      }
      if (state.result.passes > 1) {
        // The plan's estimate was wrong for this context: the call runs once, so a group
        // that needs more passes would only fail after costing the call. Split it (or
        // drop a lone metric) before running anything; this call goes unprofiled.
        split_group(metrics, state.result.passes);
        return false;
      }
      return true;
    }
    if (metrics.empty()) metrics = default_metric_names();
    state.pass = std::make_unique<kept_pass>();
    state.pass->options = pass_options(options);
    if (!state.pass->run.begin(metrics, state.pass->options, state.result)) {
      refused(state.result);
      return false;
    }
    return true;
  }

  static counter_options pass_options(const scope_counter_options& options) {
    counter_options o;
    o.ranges = counter_ranges::per_kernel;
    o.max_kernels = options.max_kernels != 0 ? options.max_kernels : options.whole_steps ? 1024 : 256;
    // A whole step takes the launch callback itself when no activity collector holds it
    // (detail/kernel_names.hpp notes the step's launches); a scope's call needs no names.
    o.name_kernels = options.whole_steps;
    if (options.whole_steps && options.ranges_per_scope && !options.kernel_replay) {
      o.ranges = counter_ranges::consecutive;
      o.range_name = "step";
      // Stretches, not kernels: two per nested scope call, and a few more. Small, because
      // cuptiRangeProfilerStart's time grows with the image's ranges (an H100: ~150 ms for
      // 16, ~800 ms for 1024; bench/RESULTS.md, session 21); a step that needs more is not
      // counted and the next profiled step gets twice what it needed (capacity_).
      if (options.max_kernels == 0) o.max_kernels = 32;
    }
    o.cupti_library = options.cupti_library;
    o.nvperf_host_library = options.nvperf_host_library;
    return o;
  }

  void begin_step_log(pass_state& state) noexcept {
    detail::profiled_step_log* const allocated = step_log_.load(std::memory_order_acquire);  // by start()
    // Never null (start() allocates it before any step is chosen); if it were, the pass
    // would count as a scope's call: every kernel in the step scope.
    if (allocated == nullptr) return;
    detail::profiled_step_log& log = *allocated;
    // The slots the last step used read `unwritten` again, so that one a late callback took
    // and has not written yet is never read as this step's.
    const std::size_t used = std::min<std::size_t>(log.launch_count.load(std::memory_order_relaxed),
                                                   detail::profiled_step_log::capacity);
    for (std::size_t i = 0; i < used; ++i)
      log.launches[i].store(detail::profiled_step_log::unwritten, std::memory_order_relaxed);
    log.launch_count.store(0, std::memory_order_relaxed);
    log.open_count = 0;
    log.generation.fetch_add(1, std::memory_order_release);
    state.whole_step = true;
    state.step_thread = detail::this_thread_state().thread_index & 0x7fffffffu;
    detail::active_step_log.store(&log, std::memory_order_release);
  }

  void close_call(node_id node) noexcept {
    std::unique_ptr<pass_state> state(this_thread_pass());
    this_thread_pass() = nullptr;
    if (!state) return;
    // Before the trailing sweep (kscope's own launch): the step's launches are all noted.
    if (state->whole_step) detail::active_step_log.store(nullptr, std::memory_order_release);
    if (state->per_scope) detail::step_range_switch.store(nullptr, std::memory_order_relaxed);
    try {
      const std::int64_t closed_ns = detail::now_ns();
      state->pass->run.end_run(false);
      state->pass->run.finish(state->result, false);
      const counter_result& r = state->result;
      // A re-armed pass whose ranges CUPTI could not evaluate while its first call's could:
      // the kept profiler is not trusted again, and the call's values are not counted (a
      // partial call would skew the aggregate).
      const bool rearm_failed = !state->cold && state->pass->run.ranges_unevaluated();
      if (rearm_failed) {
        stop_keeping("a re-armed range profiler returned ranges CUPTI could not evaluate");
        state->group.clear();
      } else if (!state->cold && state->pass->run.metrics_unvalued() > 0) {
        // On an H100 (CUDA 13.0) re-armed passes evaluated some metrics of their group as NaN
        // in every range where the group's first call had values (a speed-of-light part among
        // them, so its rollup was never whole); set up afresh, every call had them all
        // (bench/scope_counters_modes_probe.cu, modes onepass and nokeep). The NaN metrics
        // of this call are left out of its figures (counter_aggregate::add_call).
        stop_keeping("a re-armed range profiler evaluated " + std::to_string(state->pass->run.metrics_unvalued()) +
                     " metrics of its group as not-a-number in every range");
        state->group.clear();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      ++passes_;
      // A pass that collected is kept for its group's next call, unless the kept profiler
      // was let go meanwhile (another pass needed the counters) or keeping was given up.
      if (r.ok() && !state->group.empty() && keep_profiler_ && rearm_passes_ &&
          state->pass->generation == kept_generation_)
        kept_[state->context_id].passes.emplace(std::move(state->group), std::move(state->pass));
      scope_counter_totals& t = scopes_[node];
      t.node = node;
      ++cost_.calls;
      cost_.after_ns += static_cast<double>(detail::now_ns() - closed_ns);
      if (!r.ok() || rearm_failed) {
        ++t.failed_calls;
        note(rearm_failed ? std::string("a profiled call on a re-armed range profiler was not counted: its ranges "
                                        "could not be evaluated")
                          : r.message);
        return;
      }
      if (metrics_.empty()) metrics_ = r.metrics;
      for (const std::string& n : r.notes)
        if (!state->whole_step || n.rfind("kernel names unavailable", 0) != 0) note(n);  // the collector's callbacks note them
      t.groups = options_.kernel_replay ? 1 : plan_.groups.size();  // under mutex_, as split_group
      ++t.profiled_calls;
      t.kernels_dropped += r.ranges_dropped;
      if (r.ranges_dropped > 0) {
        // The image filled up: this call's figures rest on its first kernels only (the row
        // says so), and the scope's next calls get an image twice the kernels seen.
        ++t.partial_calls;
        std::size_t& need = capacity_[node];
        need = std::min(counter_max_kernels_limit,
                        std::max(need, 2 * (r.kernels.size() + r.ranges_dropped)));
        t.partial_kernels += r.kernels.size();
        t.aggregate.count_call();  // counted, its kernels not added: a part of a call is no call's sum
        return;
      }
      if (state->per_scope) return add_step_by_scope(node, *state, r);
      if (state->whole_step) return add_step(node, *state, r);
      t.kernels += r.kernels.size();
      t.aggregate.add_call(r.kernels);
    } catch (...) {
    }
  }

  // A whole step's kernels, each to the scope that launched it (under mutex_; the step's
  // call is counted already). When the ranges cannot be paired with the launches, a note
  // says why, and the step counts for no scope if scopes were nested in it, else for the
  // step scope alone.
  void add_step(node_id step, const pass_state& state, const counter_result& r) {
    const detail::profiled_step_log& log = *step_log_.load(std::memory_order_acquire);  // whole_step: set
    const std::size_t total = log.launch_count.load(std::memory_order_relaxed);
    std::vector<detail::step_launch> launches(std::min<std::size_t>(total, detail::profiled_step_log::capacity));
    for (std::size_t i = 0; i < launches.size(); ++i) {
      const std::uint64_t word = log.launches[i].load(std::memory_order_relaxed);
      launches[i].unread = word == detail::profiled_step_log::unwritten;
      launches[i].node = static_cast<node_id>(word & 0xffffffffu);
      launches[i].thread = static_cast<std::uint32_t>((word >> 32) & 0x7fffffffu);
      launches[i].graph = (word & detail::profiled_step_log::graph_bit) != 0;
    }
    const detail::step_kernel_pairing pairing =
        detail::pair_step_kernels(step, state.step_thread, r.kernels.size(), launches, total);
    const std::vector<node_id> opens(log.opens, log.opens + log.open_count);
    if (!pairing.why_not.empty()) {
      scope_counter_totals& t = scopes_[step];
      if (!opens.empty()) {
        // Scopes were nested in the step: all its kernels in the step scope would mix the
        // scopes' work into the step's own (what a split step counts), so this step counts
        // for none of them.
        --t.profiled_calls;
        ++t.failed_calls;
        note("a profiled step was not counted: its kernels could not be told apart by scope (" + pairing.why_not +
             ")");
        return;
      }
      // Nothing nested: the kernels are the step scope's own (and any another thread
      // launched meanwhile, which the note says), as a scope's profiled call counts them.
      note("a profiled step's kernels were counted in the step scope without a check of who launched each (" +
           pairing.why_not + ")");
    }
    std::map<node_id, std::vector<counter_values>> kernels_of;
    for (std::size_t i = 0; i < r.kernels.size(); ++i)
      kernels_of[pairing.kernel_scopes.empty() ? step : pairing.kernel_scopes[i]].push_back(r.kernels[i]);
    const std::map<node_id, std::uint64_t> calls = detail::step_scope_calls(step, opens);
    const std::size_t groups = options_.kernel_replay ? 1 : plan_.groups.size();
    for (auto& [scope, kernels] : kernels_of) {
      scope_counter_totals& t = scopes_[scope];
      t.node = scope;
      // A nested scope's calls are those of the steps it launched in: a step where it
      // launched nothing measured nothing of it (counted, it would thin its per-call values).
      const auto opened = calls.find(scope);
      if (scope != step) t.profiled_calls += opened != calls.end() ? opened->second : 1;
      t.groups = groups;
      t.kernels += kernels.size();
      t.aggregate.add_call(kernels);
    }
  }

  // A whole step profiled one range per scope stretch (ranges_per_scope; under mutex_, the
  // step's call counted already): range i goes to the scope it was begun for. A step whose
  // ranges did not all fit the image, or do not line up with those begun, counts for no
  // scope (the next steps get a larger image). A stretch in which nothing was launched is
  // left out: it measured nothing of its scope.
  void add_step_by_scope(node_id step, const pass_state& state, const counter_result& r) {
    scope_counter_totals& st = scopes_[step];
    const std::size_t refused = state.pass->run.ranges_refused();
    const detail::profiled_step_log& log = *step_log_.load(std::memory_order_acquire);  // whole_step: set
    const std::uint32_t total = log.launch_count.load(std::memory_order_relaxed);
    detail::step_stretches stretches;
    if (refused == 0) stretches = detail::group_step_stretches(state.range_nodes, state.range_first_launch, total, r.kernels);
    if (refused > 0 || !stretches.why_not.empty()) {
      --st.profiled_calls;
      ++st.failed_calls;
      if (refused > 0) {
        std::size_t& need = capacity_[step];
        need = std::min(counter_max_kernels_limit, std::max(need, 2 * (state.range_nodes.size() + refused)));
      }
      note("a profiled step was not counted: " +
           (refused > 0 ? std::to_string(state.range_nodes.size() + refused) + " scope stretches did not fit its " +
                              std::to_string(state.range_nodes.size()) + " ranges (the next steps get more)"
                        : stretches.why_not));
      return;
    }
    // What a stretch's values are, said once beside them (the report's counters notes).
    note("one range per stretch of a scope: a rate is the stretch's, the gaps between its kernels included, and "
         "the L2 counts whatever else used it during the stretch (more bytes than the kernels' own); L1 bytes and "
         "instruction counts are the kernels' own");
    // Per scope, the launches its thread made in the step: its kernels.
    std::map<node_id, std::uint64_t> launches_of;
    const std::uint32_t seen = std::min<std::uint32_t>(total, detail::profiled_step_log::capacity);
    for (std::uint32_t i = 0; i < seen; ++i) {
      const std::uint64_t word = log.launches[i].load(std::memory_order_relaxed);
      if (word == detail::profiled_step_log::unwritten) continue;
      if (((word >> 32) & 0x7fffffffu) != state.step_thread) continue;
      ++launches_of[static_cast<node_id>(word & 0xffffffffu)];
    }
    const std::vector<node_id> opens(log.opens, log.opens + log.open_count);
    const std::map<node_id, std::uint64_t> calls = detail::step_scope_calls(step, opens);
    const std::size_t groups = plan_.groups.size();
    for (auto& [scope, ranges] : stretches.ranges_of) {
      scope_counter_totals& t = scopes_[scope];
      t.node = scope;
      const auto opened = calls.find(scope);
      if (scope != step) t.profiled_calls += opened != calls.end() ? opened->second : 1;
      t.groups = groups;
      const auto launched = launches_of.find(scope);
      t.kernels += launched != launches_of.end() ? launched->second : 0;
      t.aggregate.add_call(ranges);
    }
  }

  // Lets the kept range profiler go (another pass needs the counters, the options changed,
  // or stop()): the kept passes are dropped, and the profiler is disabled once no pass in
  // flight holds it. Their groups' next calls set CUPTI up again.
  static void release_kept() noexcept { global().drop_kept(); }

  void drop_kept() noexcept {
    std::map<std::uint64_t, kept_context> dropped;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      dropped.swap(kept_);
      ++kept_generation_;
    }
    // Destroyed outside mutex_: disabling the profiler and freeing the sweep's buffer are
    // CUDA and CUPTI calls.
  }

  // Keeping the profiler enabled between calls failed once: every later call enables its
  // own (the cost before the work then includes it), with a note that says why.
  void stop_keeping(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      keep_profiler_ = false;
      note(why + ": each profiled call now enables the range profiler itself");
    }
    drop_kept();
  }

  // The one-pass groups, planned once (first profiled call: a device context exists by
  // then), with the counter-pass lock held. False when planning failed: the hook is off.
  // The one-pass groups, planned once per start() (call with the counter-pass lock held).
  // `generation`: the start() it was asked for; a plan made for an earlier one is dropped.
  bool ensure_plan(const counter_options& plan_options, const scope_counter_options& options,
                   std::uint64_t generation) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (plan_ready_ || generation != plan_generation_) return plan_ready_;
    }
    one_pass_plan plan;
    counter_state state = counter_state::failed;
    std::string why;
    const std::vector<std::string> wanted = options.metrics.empty() ? scope_metric_names() : options.metrics;
    if (!detail::plan_counter_groups(wanted, plan_options, plan, state, why)) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (generation != plan_generation_) return false;  // for options replaced meanwhile: not theirs to refuse
      }
      counter_result r;
      r.state = state;
      r.message = why;
      refused(r);
      return false;
    }
    // Groups of SASS instruction counters last in the rotation: while the activity collector
    // traces they are passed over (begin_call), so a scope's first rotation measures every
    // other group first either way.
    std::stable_partition(plan.groups.begin(), plan.groups.end(),
                          [](const std::vector<std::string>& g) { return !detail::has_sass_instruction_metric(g); });
    const bool has_sass = std::any_of(plan.groups.begin(), plan.groups.end(),
                                      [](const std::vector<std::string>& g) { return detail::has_sass_instruction_metric(g); });
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation != plan_generation_) return false;  // start() was called again meanwhile
    plan_has_sass_ = has_sass;
    plan_ = std::move(plan);
    plan_ready_ = true;
    plan_known_.store(true, std::memory_order_release);
    groups_planned_.store(static_cast<std::uint32_t>(plan_.groups.size()), std::memory_order_relaxed);
    metrics_.clear();
    for (const auto& g : plan_.groups)
      for (const std::string& m : g)
        if (std::find(metrics_.begin(), metrics_.end(), m) == metrics_.end()) metrics_.push_back(m);
    for (const std::string& n : plan_.notes) note(n);
    status_ += "; " + std::to_string(plan_.groups.size()) + " one-pass metric groups, so every metric is measured "
               "after " + std::to_string(plan_.groups.size()) + " profiled calls of a scope";
    return true;
  }

  // Plans the metric groups on a thread of kscope's own (called by start(), under mutex_):
  // CUPTI's host API answers one question per candidate group, seconds in all on an H100
  // (bench/RESULTS.md), which a step would otherwise wait for. The counter-pass lock is held
  // meanwhile, so no other pass starts. Without a thread, the first due step plans them.
  void start_planning() {
    if (planning_.exchange(true, std::memory_order_acq_rel)) return;  // one in flight: it checks the generation
    std::uint64_t generation = 0;
    scope_counter_options options;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation = plan_generation_;
      options = options_;
    }
    // The plan is for the device this thread uses (its chip and counter availability).
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
      (void)cudaGetLastError();
      device = 0;
    }
    static const bool waits_at_exit = std::atexit([] {
      // A process that exits while the plan is made waits for it (at most ~10 s): CUPTI's
      // host library must not be torn down under the planning thread.
      for (int i = 0; i < 1000 && global().planning_.load(std::memory_order_acquire); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }) == 0;
    (void)waits_at_exit;
    try {
      std::thread([this, options, generation, device] {
        const std::int64_t began = detail::now_ns();
        bool planned = false;
        try {
          if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
          std::unique_lock<std::mutex> pass(detail::counter_pass_mutex());
          counter_options run_options = pass_options(options);
          run_options.replay = counter_replay::user;
          planned = ensure_plan(run_options, options, generation);
        } catch (...) {
        }
        const double seconds = static_cast<double>(detail::now_ns() - began) / 1e9;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          plan_seconds_ = seconds;
          if (planned) {
            char text[64];
            std::snprintf(text, sizeof text, "%.2f s", seconds);
            const std::uint64_t waited = skipped_planning_.load(std::memory_order_relaxed);
            note(std::string("the metric groups were planned on a thread of kscope's own in ") + text + "; " +
                 std::to_string(waited) + " step" + (waited == 1 ? "" : "s") +
                 " while it ran went unprofiled and are not counted as calls");
          }
        }
        planning_.store(false, std::memory_order_release);
      }).detach();
    } catch (...) {
      planning_.store(false, std::memory_order_release);
    }
  }

  // A pass that could not begin: a permanent reason switches the hook off, with one line.
  // A planned group that needs `passes` passes when configured on the context: each of
  // its metrics gets a group of its own (the duration stays out: it may be what the others
  // do not fit beside), a lone metric is dropped, and a note names both.
  void split_group(const std::vector<std::string>& group, std::size_t passes) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = std::find(plan_.groups.begin(), plan_.groups.end(), group);
    if (it == plan_.groups.end()) return;  // another thread split it already
    plan_.groups.erase(it);
    const std::string duration(metric_info_of(counter_metric::duration).name());
    std::vector<std::string> members;
    for (const std::string& m : group)
      if (m != duration) members.push_back(m);
    std::string names;
    for (const std::string& m : group) names += (names.empty() ? "" : ", ") + m;
    if (members.size() > 1 || (members.size() == 1 && group.size() > 1)) {
      for (const std::string& m : members) plan_.groups.push_back({m});
      note("a metric group needed " + std::to_string(passes) + " passes on this context though planned as one (" +
           names + "): split into one group per metric, without the kernels' time");
    } else {
      note("not collected per scope without kernel replay: " + names + " needs " + std::to_string(passes) +
           " passes on this context (scope_counter_options::kernel_replay, KSCOPE_COUNTERS=kernel)");
    }
    if (plan_.groups.empty()) plan_.groups.push_back({duration});
    groups_planned_.store(static_cast<std::uint32_t>(plan_.groups.size()), std::memory_order_relaxed);
  }

  void refused(const counter_result& r) {
    const bool permanent = r.state == counter_state::disabled || r.state == counter_state::unavailable ||
                           r.state == counter_state::no_permission || r.state == counter_state::unsupported_device ||
                           r.state == counter_state::unknown_metric || r.state == counter_state::invalid_request;
    std::lock_guard<std::mutex> lock(mutex_);
    if (permanent) {
      detail::active_counter_hook.store(nullptr, std::memory_order_release);
      enabled_ = false;
      status_ = "per-scope counters stopped: " + r.message;
    } else {
      note(r.message);
    }
  }

  void note(const std::string& text) {
    if (notes_.size() < 16 && std::find(notes_.begin(), notes_.end(), text) == notes_.end()) notes_.push_back(text);
  }

  const detail::counter_hook hook_{&hook_open, &hook_close};

  static std::string sass_while_tracing_note() {
    return "the SASS instruction counters (the CUDA-core FLOPs) are not collected per scope while the activity "
           "collector traces: CUPTI counts them as 0 under user replay, and kernel replay stops the collector's "
           "records; the tensor pipe's FLOPs are hardware counters and are collected";
  }
  bool plan_has_sass_ = false;
  // whole_steps: the step's launch log (allocated at the first step, never freed: a late
  // callback may still write), and the steps whose kernels all stayed with the step scope.
  std::atomic<detail::profiled_step_log*> step_log_{nullptr};
  // Per scope: the counter-data image its calls need (kernels seen x 2), once one filled up.
  std::map<node_id, std::size_t> capacity_;

  // Per context (by the driver's context id): the kept range profiler and each one-pass
  // group's kept pass (under mutex_).
  struct kept_context {
    std::shared_ptr<detail::range_profiler_handle> range;
    std::map<std::vector<std::string>, std::unique_ptr<kept_pass>> passes;
  };
  bool keep_profiler_ = false;  // keep_profiler (start() sets it): the range profiler stays enabled between calls
  bool rearm_passes_ = true;   // and each group's pass is kept to be re-armed
  std::map<std::uint64_t, kept_context> kept_;
  std::uint64_t kept_generation_ = 0;
#else
  const detail::counter_hook hook_{nullptr, nullptr};
#endif

  mutable std::mutex mutex_;  // everything below but the atomics
  scope_counter_options options_;
  // What due() reads on every scope open while the hook is on: copies of three options.
  std::atomic<std::uint32_t> first_calls_{0}, every_{0}, max_calls_per_scope_{0};
  // whole_steps and whether a step scope is named; per node, whether it is the named one
  // (0: not looked at yet, 1: the step scope, 2: not).
  std::atomic<bool> whole_steps_{true}, step_named_{false};
  std::unique_ptr<std::atomic<std::uint8_t>[]> step_kind_;
  bool enabled_ = false;
  std::string status_ = "per-scope counters not enabled";
  one_pass_plan plan_;       // the rotating one-pass groups (kernel_replay off)
  bool plan_ready_ = false;
  std::uint64_t plan_generation_ = 0;  // start() calls: a plan is for the latest
  double plan_seconds_ = 0;            // how long the background plan took
  std::atomic<bool> planning_{false};  // kscope's thread is planning the groups
  std::atomic<bool> plan_known_{false};     // plan_ready_, read without mutex_ at a step's open
  std::atomic<bool> kernel_replay_{false};  // options_.kernel_replay: no plan needed
  std::atomic<bool> plan_in_background_{false};  // options_.plan_in_background
  std::atomic<std::uint64_t> skipped_planning_{0};  // steps not counted while it did
  std::atomic<std::uint32_t> groups_planned_{0};  // plan_.groups.size(), read by due() without the lock
  std::vector<std::string> metrics_;
  std::vector<std::string> notes_;
  std::uint64_t passes_ = 0;
  std::map<node_id, scope_counter_totals> scopes_;
  std::atomic<std::uint64_t> skipped_busy_{0};
  scope_counter_cost cost_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> calls_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> profiled_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL scope_counter_sampler& scope_counter_sampler::global() noexcept {
  // A fork never catches it half-built (core/detail/once.hpp).
  static detail::lazy_global<scope_counter_sampler> instance{detail::lock_rank::init};
  return instance.get([] { return new scope_counter_sampler(); });
}

KSCOPE_DECL bool scope_counter_sampler::start(const scope_counter_options& options) {
#if KSCOPE_HAS_RANGE_PROFILER
  // New options: the passes kept under the old ones are let go (outside mutex_: destroying
  // them disables the profiler) and keeping is tried again.
  drop_kept();
#endif
  std::lock_guard<std::mutex> lock(mutex_);
  options_ = options;
  first_calls_.store(options.first_calls, std::memory_order_relaxed);
  every_.store(options.every, std::memory_order_relaxed);
  max_calls_per_scope_.store(options.max_calls_per_scope, std::memory_order_relaxed);
  for (std::size_t i = 0; i < max_nodes; ++i) step_kind_[i].store(0, std::memory_order_relaxed);
#if KSCOPE_HAS_RANGE_PROFILER
  // Before a step can be chosen (open_call reads it without mutex_); never freed, since a
  // late launch callback may still write into it.
  if (options.whole_steps && step_log_.load(std::memory_order_relaxed) == nullptr) {
    auto* log = new (std::nothrow) detail::profiled_step_log();
    if (log == nullptr) {
      status_ = "per-scope counters not started: no memory for the whole steps' launch log";
      detail::active_counter_hook.store(nullptr, std::memory_order_release);
      enabled_ = false;
      return false;
    }
    for (std::atomic<std::uint64_t>& slot : log->launches) slot.store(detail::profiled_step_log::unwritten);
    step_log_.store(log, std::memory_order_release);
  }
#endif
  step_named_.store(options.whole_steps && !options.step_scope.empty(), std::memory_order_release);
  whole_steps_.store(options.whole_steps, std::memory_order_relaxed);
  if (options_.first_calls == 0 && options_.every == 0) {
    status_ = "per-scope counters not started: first_calls and every are both 0 (no call would be profiled)";
    detail::active_counter_hook.store(nullptr, std::memory_order_release);  // refused: off, whatever ran before
    enabled_ = false;
    return false;
  }
  if (!options_.whole_steps && !options_.step_scope.empty()) {
    status_ = "per-scope counters not started: a step scope ('" + options_.step_scope +
              "') names what a whole step is, and whole_steps is off";
    detail::active_counter_hook.store(nullptr, std::memory_order_release);
    enabled_ = false;
    return false;
  }
#if KSCOPE_HAS_RANGE_PROFILER
  if (options_.kernel_replay && detail::activity_tracing().load(std::memory_order_acquire)) {
    status_ = "per-scope counters not started: " + std::string(kernel_replay_while_tracing_message);
    return false;
  }
  enabled_ = true;
  keep_profiler_ = options_.keep_profiler.value_or(false) && !options_.kernel_replay;
  rearm_passes_ = options_.keep_profiler.value_or(false);
  // Registered here, where a kept profiler can first exist.
  detail::kept_range_profiler_releaser().store(&release_kept, std::memory_order_release);
  plan_ = one_pass_plan{};
  plan_ready_ = false;
  plan_known_.store(false, std::memory_order_release);
  kernel_replay_.store(options_.kernel_replay, std::memory_order_relaxed);
  plan_in_background_.store(options_.plan_in_background, std::memory_order_relaxed);
  ++plan_generation_;
  groups_planned_.store(0, std::memory_order_relaxed);
  const std::string unit = options_.whole_steps ? "step" : "scope";
  status_ = "per-scope counters: " +
            (options_.whole_steps
                 ? "whole steps (" +
                       (options_.step_scope.empty() ? std::string("each thread's outermost scope")
                                                    : "the calls of '" + options_.step_scope + "'") +
                       (options_.ranges_per_scope && !options_.kernel_replay ? "), one range per stretch of a scope" : "), each kernel to the scope that launched it") +
                       "; each step's first "
                 : std::string("each scope's first ")) +
            std::to_string(options_.first_calls) + " calls" +
            (options_.every ? ", then every " + std::to_string(options_.every) + "th" : std::string()) +
            ", at most " + std::to_string(options_.max_calls_per_scope) + " per " + unit + ", profiled " +
            (options_.kernel_replay ? "with kernel replay, every metric in each call"
                                    : "once each with one one-pass metric group, the groups rotating over the calls") +
            " (their times are kept out of the statistics)";
  detail::active_counter_hook.store(&hook_, std::memory_order_release);
  return true;
#else
  status_ = "per-scope counters unavailable: kscope was built without the CUPTI range profiler headers "
            "(cupti_range_profiler.h, cupti_profiler_host.h: CUDA 12.6 or later)";
  return false;
#endif
}

KSCOPE_DECL void scope_counter_sampler::stop() noexcept {
  detail::active_counter_hook.store(nullptr, std::memory_order_release);
  try {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      enabled_ = false;
    }
#if KSCOPE_HAS_RANGE_PROFILER
    drop_kept();  // the counters are free for other tools again
#endif
  } catch (...) {
  }
}

KSCOPE_DECL scope_counters_snapshot scope_counter_sampler::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  scope_counters_snapshot out;
  out.enabled = enabled_;
  out.status = status_;
  // What the calls collect now: while the collector traces, not the SASS counters.
#if KSCOPE_HAS_RANGE_PROFILER
  const bool tracing = detail::activity_tracing().load(std::memory_order_acquire);
#else
  const bool tracing = false;
#endif
  for (const std::string& m : metrics_)
    if (!tracing || !detail::is_sass_instruction_metric(m)) out.metrics.push_back(m);
  out.notes = notes_;
  out.passes = passes_;
  out.skipped_busy = skipped_busy_.load(std::memory_order_relaxed);
  out.cost = cost_;
  out.scopes.reserve(scopes_.size());
  for (const auto& entry : scopes_) out.scopes.push_back(entry.second);
  return out;
}

KSCOPE_DECL void scope_counter_sampler::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  scopes_.clear();
  notes_.clear();
  passes_ = 0;
  cost_ = scope_counter_cost{};
  skipped_busy_.store(0, std::memory_order_relaxed);
  skipped_planning_.store(0, std::memory_order_relaxed);
  for (std::size_t i = 0; i < max_nodes; ++i) {
    calls_[i].store(0, std::memory_order_relaxed);
    profiled_[i].store(0, std::memory_order_relaxed);
  }
}

KSCOPE_DECL scope_counter_sampler::scope_counter_sampler()
    : step_kind_(new std::atomic<std::uint8_t>[max_nodes]),
      calls_(new std::atomic<std::uint32_t>[max_nodes]),
      profiled_(new std::atomic<std::uint32_t>[max_nodes]) {
  for (std::size_t i = 0; i < max_nodes; ++i) {
    step_kind_[i].store(0, std::memory_order_relaxed);
    calls_[i].store(0, std::memory_order_relaxed);
    profiled_[i].store(0, std::memory_order_relaxed);
  }
  detail::guard_across_fork(mutex_, detail::lock_rank::scope_counters);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
