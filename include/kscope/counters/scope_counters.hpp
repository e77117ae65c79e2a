// kscope/counters/scope_counters.hpp — hardware counters per scope in a running program: a
// bounded sample of each scope's calls is profiled (the range profiler of
// counters/collect.hpp), each call once with one group of metrics that fits in one pass, the
// groups rotating over the calls, and each profiled call's kernels are added to its scope.
//
//   kscope::session::global().enable_counters();   // or KSCOPE_COUNTERS=1
//   ... KSCOPE_SCOPE("decode") { ... } ...         // calls 1, 2, 102, 202, ... profiled
//   auto r = kscope::session::global().report();   // per scope: measured bytes, FLOPs, verdict
//
// How a call is chosen: each scope's n-th call is profiled when n <= first_calls, or when
// (n - first_calls) is a multiple of `every`, up to max_calls_per_scope calls per scope, and
// only when no other counter pass runs (then the call runs normally and is counted as
// skipped). One pass at a time in the process: the profiled call's thread holds the
// counter-pass lock from the scope's open to its close.
//
// What a profiled call costs, and why its time is never reported: its kernels run one at a
// time (one range each) between two device synchronizations and two L2 sweeps. CUPTI's
// setup (host object, config image, enabling the range profiler on the context: hundreds
// of milliseconds) is paid once per metric group: the profiler stays enabled between
// calls and each group's pass is kept and re-armed (keep_profiler), so a group's later calls
// pay for SetConfig and a synchronization only. The report says what the calls cost
// (scope_counter_cost: before and after the work, set-up and re-armed calls apart); with
// kernel_replay each kernel also runs once per pass (tens for the default set) with device
// memory saved and restored around each replay, which is why the default is one pass per
// call.
//
// The same metrics as the bench's .counters(). Metrics that need several passes alone (the
// speed-of-light rollups sm__throughput, gpu__compute_memory_throughput, lts__throughput,
// l1tex__throughput) are collected as the bench collects them, by user replay, one pass per
// run, except that the runs are consecutive calls of one scope (max_passes): such a group's
// pass is parked between its scope's calls, and other scopes' due calls wait meanwhile (they
// are profiled at their next call; a scope that does not come back is given up after
// detail::spread_patience of them). So classify() (counters/metrics.hpp, the one classifier
// the bench uses too) gets the same speed-of-light evidence, not a one-pass stand-in (an
// H100 transpose read lts__t_sectors 22.6 % where lts__throughput, the bench's, read 76 %).
// The one-pass stand-ins are collected too, for a scope whose multi-pass groups never
// complete. Each metric's per-call value rests on the calls whose group held it
// (counter_aggregate: aggregated_metric::calls; a multi-pass group's calls count once).
//
// Every kernel of a call: a call that launched more kernels than its counter-data image
// held is set aside, and the scope's next call profiled with twice the room (up to
// max_kernels_grown, which bounds each kept image's memory); past that limit the call's
// figures are kept, and the report's row marks them as resting on part of its kernels.
//
// A profiled call's record is flagged (scope layer: counter_hook.hpp): the recorder counts
// it as profiled and keeps it out of every timing statistic, scopes opened inside it on its
// thread too, and its kernels' activity records are kept out of the GPU-activity aggregates
// (their launches are marked in the correlation table). Kernels other threads launch during
// the pass are profiled with it: they run serialized then, and their counters are added to
// the profiled scope; the report says so. Permanent refusals (no permission, no library,
// unknown metric) switch the hook off with one message; everything else keeps working.
#pragma once

#include "../core/config.hpp"
#include "metrics.hpp"
#include "../scope/detail/counter_hook.hpp"
#include "../core/detail/once.hpp"
#include "../core/detail/clock.hpp"
#include "../scope/node_id.hpp"
#include "collect.hpp"
#include "cost.hpp"
#include "detail/call_plan.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

struct scope_counter_options {
  // Empty: scope_metric_names() (default_metric_names() with kernel_replay); fallbacks taken.
  std::vector<std::string> metrics;
  // false (the default): each profiled call runs ONCE with one pass of one metric group
  // (user replay: no device-memory save and restore, so the program's memory size does not
  // matter), the groups rotating over each scope's profiled calls; a group that needs
  // several passes takes as many consecutive calls. true: every profiled call gets every
  // metric by kernel replay (each kernel replayed once per pass, device memory saved and
  // restored around each replay: minutes for a large program).
  bool kernel_replay = false;
  // Each scope's first calls are profiled: first_calls, or one rotation of the metric groups
  // if that takes more calls (every metric measured once); then every k-th call (0: no
  // more), at most max_calls_per_scope calls per scope (or one rotation, if more). A call
  // that waited for another scope's multi-pass measurement, or whose group must be measured
  // again (no value, or more kernels than its image held), makes the scope's next call due.
  std::uint32_t first_calls = 2;
  std::uint32_t every = 100;
  std::uint32_t max_calls_per_scope = 16;
  // Kernels the counter-data image of a call holds at first. A call that launches more is
  // set aside and the scope's next call profiled with twice the room, up to
  // max_kernels_grown (which bounds the host memory of each kept group's image); past it
  // the figures rest on part of each call's kernels, and the report's row says so.
  std::size_t max_kernels = 256;
  std::size_t max_kernels_grown = 4096;
  // A metric that needs several passes alone (the speed-of-light rollups: 4 to 19 passes on
  // GH100) is collected over that many consecutive profiled calls of a scope when it needs
  // at most this many, as the bench collects it over runs of its call (0: one pass per call
  // only; classify() then has the one-pass stand-ins, lower bounds, for the rollups).
  std::size_t max_passes = 32;
  // Keep the range profiler enabled on the context between profiled calls, and each group's
  // host object, config image and counter-data image, so that a group's later calls pay
  // only for re-arming (SetConfig, a synchronization) instead of CUPTI's whole setup.
  // Another pass (profile_counters, warp stalls, PM sampling) releases it first. Multi-pass
  // groups need it (their pass waits, enabled, between calls): false means one-pass
  // stand-ins for the rollups, as max_passes = 0.
  bool keep_profiler = true;
  std::string cupti_library;                 // as counter_options
  std::string nvperf_host_library;
};

// One scope's profiled calls.
struct scope_counter_totals {
  node_id node = 0;
  std::uint64_t profiled_calls = 0;    // calls profiled, each pass of a multi-pass group one
  std::uint64_t failed_calls = 0;      // the pass failed (message in notes)
  std::uint64_t kernels = 0;           // kernels profiled over those calls
  std::uint64_t kernels_dropped = 0;   // past the image in the measured calls (partial_calls)
  std::uint64_t partial_calls = 0;     // measured calls whose kernels did not all fit (at max_kernels_grown)
  std::uint64_t set_aside_calls = 0;   // calls profiled again with a larger image
  std::size_t kernel_capacity = 0;     // kernels the image of the scope's last measured call held
  counter_aggregate aggregate;         // every measured call's kernels (a multi-pass group's calls once)
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
  // A group's pass, kept between its calls: the options the run points at, the run with
  // its host object, config and counter-data images.
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
    std::vector<std::string> metrics;  // the call's group (its tally's key)
    std::vector<std::string> group;    // its key in kept_[context_id] (empty: not kept)
    std::uint64_t context_id = 0;
    counter_result result;
    std::size_t capacity = 0;        // kernels the image holds
    bool spread = false;             // a multi-pass group: its passes over consecutive calls
    bool cold = true;                // CUPTI was set up for this call
    std::int64_t opened_ns = 0;      // when the hook was entered
  };
  // A multi-pass measurement between two calls of its scope (under mutex_): its pass, the
  // result its runs fill, and how long it has kept other scopes waiting.
  struct spread_pass {
    node_id node = 0;
    std::unique_ptr<kept_pass> pass;
    counter_result result;
    std::vector<std::string> metrics;
    std::vector<std::string> group;
    std::uint64_t context_id = 0;
    std::size_t capacity = 0;
    std::uint32_t deferrals = 0;  // other scopes' due calls it made wait
  };
  // What the sampler knows of one scope (under mutex_).
  struct node_state {
    std::map<std::vector<std::string>, detail::group_tally> tallies;  // per group
    std::size_t capacity = 0;          // kernels its calls' image holds (0: options' max_kernels)
    std::size_t one_pass_kernels = 0;  // kernels of its last whole one-pass call (0: none yet)
  };
  static constexpr node_id no_node = static_cast<node_id>(max_nodes);

  static pass_state*& this_thread_pass() noexcept {
    static thread_local pass_state* pass = nullptr;  // trivial: no thread-exit cost
    return pass;
  }

  static bool hook_open(node_id node) noexcept { return global().open_call(node); }
  static void hook_close(node_id node) noexcept { global().close_call(node); }

  bool due(node_id node) noexcept {
    if (node >= max_nodes) return false;
    const std::uint32_t n = calls_[node].fetch_add(1, std::memory_order_relaxed) + 1;
    // Owed: an earlier due call waited for another scope's multi-pass measurement, or its
    // group is to be measured again (no value, or more kernels than the image held).
    if (owed_[node].exchange(0, std::memory_order_relaxed) != 0) return true;
    // The numbers the choice needs, as atomics: start() may change the options while
    // scopes open on other threads (the rest of the options is read under mutex_).
    const std::uint32_t every = every_.load(std::memory_order_relaxed);
    // Each scope's first calls cover every group at least once (a multi-pass group with as
    // many calls as it has passes), so its full set of metrics is there after that many
    // calls (then every k-th call).
    const std::uint32_t rotation = calls_per_rotation_.load(std::memory_order_relaxed);
    const std::uint32_t first = std::max(first_calls_.load(std::memory_order_relaxed), rotation);
    const bool chosen = n <= first || (every > 0 && n > first && (n - first) % every == 0);
    if (!chosen) return false;
    const std::uint32_t cap = std::max(max_calls_per_scope_.load(std::memory_order_relaxed), rotation);
    return profiled_[node].load(std::memory_order_relaxed) < cap;
  }

  void owe(node_id node) noexcept {
    if (node < max_nodes) owed_[node].store(1, std::memory_order_relaxed);
  }

  bool open_call(node_id node) noexcept {
    try {
      if (this_thread_pass() != nullptr) return false;
      // The next call of a scope whose multi-pass measurement is parked runs its next pass.
      const bool continuing = node < max_nodes && spread_node_.load(std::memory_order_acquire) == node;
      if (continuing)
        calls_[node].fetch_add(1, std::memory_order_relaxed);
      else if (!due(node))
        return false;
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

  // The pass for this call, ready to start: the parked pass of its scope's multi-pass
  // measurement, a kept group's pass re-armed, or one begun now. False when the call goes
  // unprofiled (why is noted, or switches the hook off, or the call waits for another
  // scope's measurement); state.pass is set once a setup was paid for.
  bool begin_call(node_id node, pass_state& state) {
    scope_counter_options options;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      options = options_;  // start() may replace them meanwhile
    }
    std::vector<std::string> metrics = options.metrics;
    if (!options.kernel_replay) {
      // One pass per call, run once: user replay (no memory save/restore).
      counter_options run_options = pass_options(options);
      run_options.replay = counter_replay::user;
      if (!ensure_plan(run_options, options)) return false;
      // Kept passes are per context, told apart by the driver's context id (unique for
      // the process's life: a context destroyed and made again gets a new one, so a kept
      // pass never meets a context it was not set up on).
      std::uint64_t context_id = 0;
      const bool context_known = detail::current_cuda_context_id(context_id);
      std::shared_ptr<detail::range_profiler_handle> keep;
      std::uint64_t generation = 0;
      bool kernel_replay = false;
      std::size_t planned_passes = 1;
      std::unique_ptr<spread_pass> given_up;  // destroyed outside mutex_: CUDA and CUPTI calls
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (plan_.groups.empty()) return false;
        if (spread_ && spread_->node == node && !(context_known && context_id == spread_->context_id)) {
          given_up = std::move(spread_);
          spread_node_.store(no_node, std::memory_order_release);
          give_up_spread(*given_up, "its scope's next call ran on another context");
        }
        if (spread_) {
          if (spread_->node == node) {
            // Its scope is back: the next pass of its measurement, no re-arm.
            state.pass = std::move(spread_->pass);
            state.result = std::move(spread_->result);
            state.metrics = std::move(spread_->metrics);
            state.group = std::move(spread_->group);
            state.context_id = spread_->context_id;
            state.capacity = spread_->capacity;
            state.spread = true;
            state.cold = false;
            spread_.reset();
            spread_node_.store(no_node, std::memory_order_release);
          } else if (++spread_->deferrals <= detail::spread_patience) {
            // Another scope's measurement is between its passes: this call waits, and the
            // scope's next call is due instead.
            owe(node);
            skipped_busy_.fetch_add(1, std::memory_order_relaxed);
            return false;
          } else {
            given_up = std::move(spread_);
            spread_node_.store(no_node, std::memory_order_release);
            give_up_spread(*given_up, "its scope was not called again within " +
                                          std::to_string(detail::spread_patience) + " due calls of other scopes");
          }
        }
        if (!state.spread) {
          node_state& ns = nodes_[node];
          std::vector<detail::group_tally> tallies;
          tallies.reserve(plan_.groups.size());
          for (const std::vector<std::string>& g : plan_.groups) tallies.push_back(ns.tallies[g]);
          const std::size_t index = detail::next_group(tallies);
          metrics = plan_.groups[index];
          planned_passes = plan_.passes_of(index);
          state.metrics = metrics;
          state.capacity = ns.capacity > 0 ? ns.capacity : std::max<std::size_t>(1, options.max_kernels);
          run_options.max_kernels = state.capacity;
          generation = kept_generation_;
          // A group of SASS instruction counters while the activity collector traces: CUPTI
          // counts them as 0 under user replay and right under kernel replay (one pass here,
          // so the work still runs once and no memory is saved or restored). Such a call is
          // set up afresh, not kept: its replay mode is not the kept profiler's.
          kernel_replay = planned_passes == 1 && detail::has_sass_instruction_metric(metrics) &&
                          detail::activity_tracing().load(std::memory_order_acquire);
          if (kernel_replay) run_options.replay = counter_replay::kernel;
          if (keep_profiler_ && context_known && !kernel_replay) {
            kept_context& kept = kept_[context_id];
            const auto found = kept.passes.find(metrics);
            // A kept pass whose image is too small for this scope's calls stays for others;
            // this call begins one with room enough, which replaces it when it is kept.
            if (found != kept.passes.end() && found->second->options.max_kernels >= state.capacity) {
              state.capacity = found->second->options.max_kernels;  // what its image holds
              state.pass = std::move(found->second);
              kept.passes.erase(found);
            }
            if (!kept.range) kept.range = std::make_shared<detail::range_profiler_handle>();
            keep = kept.range;
            state.group = metrics;
            state.context_id = context_id;
          }
        }
      }
      if (state.spread) {
        if (state.pass->run.settle(state.result)) return true;
        std::lock_guard<std::mutex> lock(mutex_);
        ++nodes_[node].tallies[state.metrics].attempts;
        note("a measurement over consecutive calls of a scope was given up between its passes: " + state.result.message);
        state.pass.reset();  // no setup was paid for this call
        return false;
      }
      // Its own profiler, enabled afresh (the path measured right): a kept one enabled on the
      // context is let go first (the kept groups set up again at their next call).
      if (kernel_replay) drop_kept();
      if (state.pass) {
        state.cold = false;
        if (state.pass->run.rearm(state.result)) {
          state.spread = state.result.passes > 1;
          return true;
        }
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
        // A multi-pass group runs its passes over consecutive calls, up to max_passes; a
        // group planned as one pass that needs more on this context (the plan's estimate
        // was wrong) is split before running anything, or a lone metric dropped; this call
        // goes unprofiled.
        if (planned_passes > 1 && state.result.passes <= options.max_passes) {
          std::lock_guard<std::mutex> lock(mutex_);
          set_group_passes(metrics, state.result.passes);
        } else {
          split_group(metrics, state.result.passes);
          return false;
        }
      } else if (planned_passes > 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        set_group_passes(metrics, 1);  // fewer passes on this context than planned: one call
      }
      state.spread = state.result.passes > 1;
      return true;
    }
    if (metrics.empty()) metrics = default_metric_names();
    state.metrics = metrics;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const node_state& ns = nodes_[node];
      state.capacity = ns.capacity > 0 ? ns.capacity : std::max<std::size_t>(1, options.max_kernels);
    }
    state.pass = std::make_unique<kept_pass>();
    state.pass->options = pass_options(options);
    state.pass->options.max_kernels = state.capacity;
    if (!state.pass->run.begin(metrics, state.pass->options, state.result)) {
      refused(state.result);
      return false;
    }
    return true;
  }

  static counter_options pass_options(const scope_counter_options& options) {
    counter_options o;
    o.ranges = counter_ranges::per_kernel;
    o.max_kernels = std::max<std::size_t>(1, options.max_kernels);
    o.name_kernels = false;  // the collector may hold CUPTI's one subscriber
    o.cupti_library = options.cupti_library;
    o.nvperf_host_library = options.nvperf_host_library;
    return o;
  }

  // Whether a call measured its group: some metric other than the kernels' time has a value
  // in some kernel (CUPTI can evaluate a whole pass as NaN).
  static bool measured_something(const counter_result& r) {
    const std::string duration(metric_info_of(counter_metric::duration).name());
    const bool duration_only = std::all_of(r.metrics.begin(), r.metrics.end(),
                                           [&duration](const std::string& m) { return m == duration; });
    for (const counter_values& k : r.kernels)
      for (const auto& [name, value] : k.values)
        if ((duration_only || name != duration) && std::isfinite(value) && value >= 0) return true;
    return false;
  }

  void close_call(node_id node) noexcept {
    std::unique_ptr<pass_state> state(this_thread_pass());
    this_thread_pass() = nullptr;
    if (!state) return;
    std::unique_ptr<kept_pass> dropped;  // a pass let go, destroyed outside mutex_
    try {
      const std::int64_t closed_ns = detail::now_ns();
      state->pass->run.end_run(false);
      if (state->spread && state->pass->run.wants_run(state->result)) {
        // Passes to go: parked until the scope's next call, unless the kept profiler was
        // let go meanwhile (start() or another pass) or keeping was given up.
        std::lock_guard<std::mutex> lock(mutex_);
        ++passes_;
        ++cost_.calls;
        scope_counter_totals& t = scopes_[node];
        t.node = node;
        ++t.profiled_calls;
        if (keep_profiler_ && !spread_ && state->pass->generation == kept_generation_) {
          auto parked = std::make_unique<spread_pass>();
          parked->node = node;
          parked->pass = std::move(state->pass);
          parked->result = std::move(state->result);
          parked->metrics = std::move(state->metrics);
          parked->group = std::move(state->group);
          parked->context_id = state->context_id;
          parked->capacity = state->capacity;
          spread_ = std::move(parked);
          spread_node_.store(node, std::memory_order_release);
        } else {
          ++nodes_[node].tallies[state->metrics].attempts;
          note("a measurement over consecutive calls of a scope was given up between its passes: the range "
               "profiler was let go");
          dropped = std::move(state->pass);
        }
        cost_.after_ns += static_cast<double>(detail::now_ns() - closed_ns);
        return;
      }
      state->pass->run.finish(state->result, false);
      const counter_result& r = state->result;
      // A re-armed pass whose ranges CUPTI could not evaluate while its first call's could:
      // the kept profiler is not trusted again, and the call's values are not counted (a
      // partial call would skew the aggregate).
      const bool rearm_failed = !state->cold && !state->spread && state->pass->run.ranges_unevaluated();
      if (rearm_failed) {
        stop_keeping("a re-armed range profiler returned ranges CUPTI could not evaluate");
        state->group.clear();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      ++passes_;
      // A pass that collected is kept for its group's next call, unless the kept profiler
      // was let go meanwhile (another pass needed the counters) or keeping was given up. Of
      // two passes of a group, the one with the larger image stays.
      if (r.ok() && !state->group.empty() && keep_profiler_ && state->pass->generation == kept_generation_) {
        auto& passes = kept_[state->context_id].passes;
        auto found = passes.find(state->group);
        if (found == passes.end()) {
          passes.emplace(std::move(state->group), std::move(state->pass));
        } else if (found->second->options.max_kernels < state->pass->options.max_kernels) {
          dropped = std::move(found->second);
          found->second = std::move(state->pass);
        }
      }
      scope_counter_totals& t = scopes_[node];
      t.node = node;
      ++cost_.calls;
      cost_.after_ns += static_cast<double>(detail::now_ns() - closed_ns);
      node_state& ns = nodes_[node];
      detail::group_tally& tally = ns.tallies[state->metrics];
      if (!r.ok() || rearm_failed) {
        ++t.failed_calls;
        ++tally.attempts;
        note(rearm_failed ? std::string("a profiled call on a re-armed range profiler was not counted: its ranges "
                                        "could not be evaluated")
                          : r.message);
        return;
      }
      if (metrics_.empty()) metrics_ = r.metrics;
      for (const std::string& n : r.notes) note(n);
      t.groups = options_.kernel_replay ? 1 : plan_.groups.size();  // under mutex_, as split_group
      ++t.profiled_calls;
      const std::size_t runs = std::max<std::size_t>(1, state->spread ? r.runs : 1);
      t.kernels += r.kernels.size() * runs;
      const bool partial = r.ranges_dropped > 0;
      const std::size_t limit = std::max(options_.max_kernels_grown, std::max<std::size_t>(1, options_.max_kernels));
      if (partial && state->capacity < limit) {
        // More kernels than the image held: set aside, and the scope's next call profiled
        // with twice the room (the group's tally unchanged, so it is measured again).
        ns.capacity = detail::grown_kernel_capacity(state->capacity, limit);
        ++t.set_aside_calls;
        owe(node);
        note("a call launched more kernels than its counter-data image held (" + std::to_string(state->capacity) +
             "): its values were set aside and its scope's calls are now profiled with room for " +
             std::to_string(ns.capacity) + " (max_kernels_grown " + std::to_string(limit) + ")");
        return;
      }
      if (state->spread && !partial && ns.one_pass_kernels > 0 && r.kernels.size() != ns.one_pass_kernels) {
        // Its passes ran on different calls, which must launch the same kernels (as the
        // bench's runs of its call): a scope whose one-pass calls launched another number
        // did not, and the measurement is not counted.
        ++tally.attempts;
        note("a measurement over consecutive calls of a scope was not counted: its calls launched different kernels "
             "(" + std::to_string(r.kernels.size()) + " ranges over its passes, " +
             std::to_string(ns.one_pass_kernels) + " in a one-pass call)");
        return;
      }
      if (!state->spread && !partial) ns.one_pass_kernels = r.kernels.size();
      ++tally.attempts;
      t.kernel_capacity = state->capacity;
      t.kernels_dropped += r.ranges_dropped;
      if (partial) ++t.partial_calls;
      t.aggregate.add_call(r.kernels);
      if (measured_something(r))
        ++tally.measured;
      else if (detail::retry_at_once(tally))
        owe(node);
    } catch (...) {
    }
  }

  // A parked multi-pass measurement given up (under mutex_): its attempt counts, its scope
  // measures the group again later, and the note says why.
  void give_up_spread(const spread_pass& s, const std::string& why) {
    ++nodes_[s.node].tallies[s.metrics].attempts;
    note("a measurement over consecutive calls of a scope was given up between its passes: " + why);
  }

  // Lets the kept range profiler go (another pass needs the counters, the options changed,
  // or stop()): the kept passes and a parked multi-pass measurement are dropped, and the
  // profiler is disabled once no pass in flight holds it. Their groups' next calls set
  // CUPTI up again.
  static void release_kept() noexcept { global().drop_kept(); }

  void drop_kept() noexcept {
    std::map<std::uint64_t, kept_context> dropped;
    std::unique_ptr<spread_pass> parked;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      dropped.swap(kept_);
      parked.swap(spread_);
      spread_node_.store(no_node, std::memory_order_release);
      ++kept_generation_;
      if (parked) {
        try {
          give_up_spread(*parked, "another pass (the counters, warp stalls or PM sampling) needed the counters, "
                                  "or the options changed");
        } catch (...) {
        }
      }
    }
    // Destroyed outside mutex_: disabling the profiler and freeing the sweep's buffer are
    // CUDA and CUPTI calls.
  }

  // Keeping the profiler enabled between calls failed once: every later call enables its
  // own (the cost before the work then includes it), with a note that says why. Multi-pass
  // groups are not measured from then on (their passes need the profiler kept).
  void stop_keeping(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      keep_profiler_ = false;
      note(why + ": each profiled call now enables the range profiler itself");
    }
    drop_kept();
  }

  // The metric groups, planned once (first profiled call: a device context exists by
  // then), with the counter-pass lock held. False when planning failed: the hook is off.
  bool ensure_plan(const counter_options& plan_options, const scope_counter_options& options) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (plan_ready_) return true;
    }
    one_pass_plan plan;
    counter_state state = counter_state::failed;
    std::string why;
    const std::vector<std::string> wanted = options.metrics.empty() ? scope_metric_names() : options.metrics;
    // Multi-pass groups need the profiler kept between their calls.
    const std::size_t spread = options.keep_profiler ? options.max_passes : 0;
    if (!detail::plan_counter_groups(wanted, plan_options, plan, state, why, spread)) {
      counter_result r;
      r.state = state;
      r.message = why;
      refused(r);
      return false;
    }
    // The rotation: one-pass groups first, then the multi-pass ones (a scope's first call,
    // which may differ from the later ones (lazy loading, a library's first-call set-up),
    // is not one of their passes), then the groups of SASS instruction counters: while the
    // activity collector traces they run under kernel replay on a profiler of their own
    // (begin_call), which lets the kept one go, and on an H100 (CUDA 13.0) the DRAM counters
    // of the user-replay passes after such a pass were seen to evaluate as NaN.
    std::vector<std::size_t> order(plan.groups.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    const auto rank = [&plan](std::size_t i) {
      return detail::has_sass_instruction_metric(plan.groups[i]) ? 2 : plan.passes_of(i) > 1 ? 1 : 0;
    };
    std::stable_sort(order.begin(), order.end(), [&rank](std::size_t a, std::size_t b) { return rank(a) < rank(b); });
    one_pass_plan ordered;
    ordered.notes = std::move(plan.notes);
    for (std::size_t i : order) {
      ordered.groups.push_back(std::move(plan.groups[i]));
      ordered.passes.push_back(plan.passes_of(i));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    plan_ = std::move(ordered);
    plan_ready_ = true;
    calls_per_rotation_.store(static_cast<std::uint32_t>(plan_.calls_per_rotation()), std::memory_order_relaxed);
    metrics_.clear();
    for (const auto& g : plan_.groups)
      for (const std::string& m : g)
        if (std::find(metrics_.begin(), metrics_.end(), m) == metrics_.end()) metrics_.push_back(m);
    for (const std::string& n : plan_.notes) note(n);
    std::size_t spread_groups = 0;
    for (std::size_t i = 0; i < plan_.groups.size(); ++i) spread_groups += plan_.passes_of(i) > 1 ? 1 : 0;
    status_ += "; " + std::to_string(plan_.groups.size()) + " metric groups" +
               (spread_groups ? " (" + std::to_string(spread_groups) + " of them over consecutive calls, one pass each)"
                              : std::string(", one pass each")) +
               ", so every metric is measured after " + std::to_string(plan_.calls_per_rotation()) +
               " profiled calls of a scope";
    return true;
  }

  // A multi-pass group that needs `passes` on this context (under mutex_).
  void set_group_passes(const std::vector<std::string>& group, std::size_t passes) {
    const auto it = std::find(plan_.groups.begin(), plan_.groups.end(), group);
    if (it == plan_.groups.end()) return;
    const std::size_t index = static_cast<std::size_t>(it - plan_.groups.begin());
    if (plan_.passes.size() < plan_.groups.size()) plan_.passes.resize(plan_.groups.size(), 1);
    plan_.passes[index] = passes;
    calls_per_rotation_.store(static_cast<std::uint32_t>(plan_.calls_per_rotation()), std::memory_order_relaxed);
  }

  // A planned group that needs `passes` passes when configured on the context: each of
  // its metrics gets a group of its own (the duration stays out: it may be what the others
  // do not fit beside), a lone metric is dropped, and a note names both.
  void split_group(const std::vector<std::string>& group, std::size_t passes) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = std::find(plan_.groups.begin(), plan_.groups.end(), group);
    if (it == plan_.groups.end()) return;  // another thread split it already
    const std::size_t index = static_cast<std::size_t>(it - plan_.groups.begin());
    if (plan_.passes.size() < plan_.groups.size()) plan_.passes.resize(plan_.groups.size(), 1);
    plan_.groups.erase(it);
    plan_.passes.erase(plan_.passes.begin() + static_cast<std::ptrdiff_t>(index));
    const std::string duration(metric_info_of(counter_metric::duration).name());
    std::vector<std::string> members;
    for (const std::string& m : group)
      if (m != duration) members.push_back(m);
    std::string names;
    for (const std::string& m : group) names += (names.empty() ? "" : ", ") + m;
    if (members.size() > 1 || (members.size() == 1 && group.size() > 1)) {
      for (const std::string& m : members) {
        plan_.groups.push_back({m});
        plan_.passes.push_back(1);
      }
      note("a metric group needed " + std::to_string(passes) + " passes on this context though planned as one (" +
           names + "): split into one group per metric, without the kernels' time");
    } else {
      note("not collected per scope without kernel replay: " + names + " needs " + std::to_string(passes) +
           " passes on this context (scope_counter_options::kernel_replay, KSCOPE_COUNTERS=kernel)");
    }
    if (plan_.groups.empty()) {
      plan_.groups.push_back({duration});
      plan_.passes.push_back(1);
    }
    calls_per_rotation_.store(static_cast<std::uint32_t>(plan_.calls_per_rotation()), std::memory_order_relaxed);
  }

  // A pass that could not begin: a permanent reason switches the hook off, with one line.
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

  // Per context (by the driver's context id): the kept range profiler and each metric
  // group's kept pass (under mutex_).
  struct kept_context {
    std::shared_ptr<detail::range_profiler_handle> range;
    std::map<std::vector<std::string>, std::unique_ptr<kept_pass>> passes;
  };
  bool keep_profiler_ = true;
  std::map<std::uint64_t, kept_context> kept_;
  std::uint64_t kept_generation_ = 0;
  std::map<node_id, node_state> nodes_;
  std::unique_ptr<spread_pass> spread_;                // the parked multi-pass measurement
  std::atomic<node_id> spread_node_{no_node};          // its scope, read at every open without the lock
#else
  const detail::counter_hook hook_{nullptr, nullptr};
#endif

  mutable std::mutex mutex_;  // everything below but the atomics
  scope_counter_options options_;
  // What due() reads on every scope open while the hook is on: copies of three options.
  std::atomic<std::uint32_t> first_calls_{0}, every_{0}, max_calls_per_scope_{0};
  bool enabled_ = false;
  std::string status_ = "per-scope counters not enabled";
  one_pass_plan plan_;       // the rotating metric groups (kernel_replay off)
  bool plan_ready_ = false;
  std::atomic<std::uint32_t> calls_per_rotation_{0};  // plan_.calls_per_rotation(), read by due() without the lock
  std::vector<std::string> metrics_;
  std::vector<std::string> notes_;
  std::uint64_t passes_ = 0;
  std::map<node_id, scope_counter_totals> scopes_;
  std::atomic<std::uint64_t> skipped_busy_{0};
  scope_counter_cost cost_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> calls_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> profiled_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> owed_;  // the node's next call is due (see due())
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
  if (options_.first_calls == 0 && options_.every == 0) {
    status_ = "per-scope counters not started: first_calls and every are both 0 (no call would be profiled)";
    return false;
  }
#if KSCOPE_HAS_RANGE_PROFILER
  enabled_ = true;
  keep_profiler_ = options_.keep_profiler && !options_.kernel_replay;
  // Registered here, where a kept profiler can first exist.
  detail::kept_range_profiler_releaser().store(&release_kept, std::memory_order_release);
  plan_ = one_pass_plan{};
  plan_ready_ = false;
  calls_per_rotation_.store(0, std::memory_order_relaxed);
  nodes_.clear();
  status_ = "per-scope counters: each scope's first " + std::to_string(options_.first_calls) + " calls" +
            (options_.every ? ", then every " + std::to_string(options_.every) + "th" : std::string()) +
            ", at most " + std::to_string(options_.max_calls_per_scope) + " per scope (or one rotation of the "
            "metric groups), profiled " +
            (options_.kernel_replay ? "with kernel replay, every metric in each call"
                                    : "once each with one metric group, the groups rotating over the calls") +
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
  out.metrics = metrics_;
  out.notes = notes_;
  out.passes = passes_;
  out.skipped_busy = skipped_busy_.load(std::memory_order_relaxed);
  out.cost = cost_;
  out.scopes.reserve(scopes_.size());
  for (const auto& entry : scopes_) out.scopes.push_back(entry.second);
  return out;
}

KSCOPE_DECL void scope_counter_sampler::reset() {
#if KSCOPE_HAS_RANGE_PROFILER
  std::unique_ptr<spread_pass> parked;  // destroyed outside mutex_
#endif
  std::lock_guard<std::mutex> lock(mutex_);
  scopes_.clear();
  notes_.clear();
  passes_ = 0;
  cost_ = scope_counter_cost{};
  skipped_busy_.store(0, std::memory_order_relaxed);
#if KSCOPE_HAS_RANGE_PROFILER
  nodes_.clear();
  parked.swap(spread_);
  spread_node_.store(no_node, std::memory_order_release);
#endif
  for (std::size_t i = 0; i < max_nodes; ++i) {
    calls_[i].store(0, std::memory_order_relaxed);
    profiled_[i].store(0, std::memory_order_relaxed);
    owed_[i].store(0, std::memory_order_relaxed);
  }
}

KSCOPE_DECL scope_counter_sampler::scope_counter_sampler()
    : calls_(new std::atomic<std::uint32_t>[max_nodes]),
      profiled_(new std::atomic<std::uint32_t>[max_nodes]),
      owed_(new std::atomic<std::uint8_t>[max_nodes]) {
  for (std::size_t i = 0; i < max_nodes; ++i) {
    calls_[i].store(0, std::memory_order_relaxed);
    profiled_[i].store(0, std::memory_order_relaxed);
    owed_[i].store(0, std::memory_order_relaxed);
  }
  detail::guard_across_fork(mutex_, detail::lock_rank::scope_counters);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
