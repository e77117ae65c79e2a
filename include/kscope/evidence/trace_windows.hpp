// kscope/evidence/trace_windows.hpp — tracing in windows: the activity collector traces for
// `window_ms` out of every `period_ms`, and everything built on its records says that it
// rests on those windows.
//
// Why: no setting that traces every launch costs less than CUPTI itself, and CUPTI's kernel
// activity alone cost 4 % on an eager loop of 80 launches per ms (bench/RESULTS.md). A
// window of 100 ms in every 10 s traces 1 % of the time, so it costs about 1 % of what full
// tracing costs, and over a long run still sees thousands of steps. Between windows the
// collector is paused (cupti_collector::pause_tracing): the activity kinds are disabled,
// so a launch makes no record, and the launch callbacks are off (cupti_options::
// pause_callbacks), so it pays no callback of kscope's either; the resource callbacks (graph
// nodes built, modules loaded) stay: they fire when graphs are built, never per launch. Scopes, their CUDA
// events and PM sampling go on throughout.
//
// What windows do to the figures (docs/report_schema.md, `trace_windows`):
//   - the CUPTI aggregates (kernel tables, per-scope kernel counts and GPU time from
//     records, copies, host waits) cover the traced windows only: counts and sums are the
//     windows' own, never scaled to the run;
//   - the GPU-time account (evidence/gpu_time.hpp) and the serving diagnosis take only the
//     traced time as their wall time: busy share = busy in the windows / the windows'
//     length; idle gaps only inside a window; per-call figures only from calls that lie
//     whole inside a window. Time between windows is unknown, never idle;
//   - per-call figures from the aggregates divide by the calls made in traced windows.
//
// Pure C++ (no CUDA, no CUPTI): the schedule and the log are driven with explicit times,
// so the CPU tests check every boundary.
//
//   kscope::trace_window_options w{100, 10000};          // 100 ms of every 10 s
//   kscope::trace_window_schedule s(w, start_ns);
//   bool on = s.traced_at(now_ns);  std::int64_t next = s.next_change_after(now_ns);
//
//   KSCOPE_CUPTI_OPTIONS="window_ms=200,period_ms=5000" ./engine
#pragma once

#include "../core/config.hpp"
#include "../core/detail/number_format.hpp"
#include "../scope/node_id.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kscope {

// When the collector traces. window_ms == 0 (the default for cupti_options): all the time.
// Otherwise a window of window_ms begins at the collector's start and then every period_ms;
// period_ms <= window_ms also means all the time.
struct trace_window_options {
  std::uint32_t window_ms = 0;
  std::uint32_t period_ms = 0;

  [[nodiscard]] constexpr bool windowed() const noexcept { return window_ms > 0 && period_ms > window_ms; }
  // The share of time traced, 1 when not windowed.
  [[nodiscard]] constexpr double traced_share() const noexcept {
    return windowed() ? static_cast<double>(window_ms) / static_cast<double>(period_ms) : 1.0;
  }
};

// Windows of 100 ms in every 10 s, 1 % of the time: where the full collector's measured cost
// on an eager loop (bench/RESULTS.md, "tracing in windows") stays below 1 % of a step even
// where full tracing costs 50 % (PyTorch eager), while a window still holds tens of steps.
// What the production preset is meant to trace once windows on a timer are right on the GPU
// (cupti_options::window_thread says why they are off); a probe passes them with it.
inline constexpr trace_window_options production_trace_windows{100, 10000};

// Windows counted in steps instead of time: `window_steps` traced of every `period_steps`,
// a step being one call of the program's step scope (cupti_options::step_scope), paused and
// resumed at that scope's close on the thread that runs it. That thread is the one launching
// the step's work, and between two of its steps it launches nothing: there a pause catches no
// launch half-traced, which is where tracing in windows gave true records on an H100 (a
// timer's thread pausing mid-step did not: cupti_options::window_thread).
struct step_window_options {
  std::uint32_t window_steps = 0;
  std::uint32_t period_steps = 0;

  [[nodiscard]] constexpr bool windowed() const noexcept { return window_steps > 0 && period_steps > window_steps; }
  [[nodiscard]] constexpr double traced_share() const noexcept {
    return windowed() ? static_cast<double>(window_steps) / static_cast<double>(period_steps) : 1.0;
  }
};

// The step grid: step i (from 0, counted from the collector's start) is traced when
// i mod period_steps < window_steps. The first step is traced (the collector starts
// tracing). At each step's close it says what the next step needs.
class step_window_schedule {
 public:
  enum class toggle : std::uint8_t { none, pause, resume };

  step_window_schedule() = default;
  explicit step_window_schedule(step_window_options options) noexcept : options_(options) {}

  // Step `steps()` has closed: pause before the next one, resume, or leave tracing as it is.
  [[nodiscard]] toggle step_closed() noexcept;
  [[nodiscard]] bool traced(std::uint64_t step) const noexcept {
    return !options_.windowed() || step % options_.period_steps < options_.window_steps;
  }
  [[nodiscard]] std::uint64_t steps() const noexcept { return closed_; }
  [[nodiscard]] const step_window_options& options() const noexcept { return options_; }

 private:
  step_window_options options_{};
  std::uint64_t closed_ = 0;
};

// The policy of windows of steps, pure (no CUPTI): the collector hands it every outermost
// scope's close on the program's threads (scope/detail/step_hook.hpp) and applies the toggle
// it answers (cupti_collector::pause_tracing's path, under its lock, for the same start only).
//
// - The step scope: named (matched by name until its node is known), or found: the first
//   outermost scope that launched GPU work at two closes on one thread (a scope run once,
//   such as loading a model, is not a step; one that launched nothing, such as waiting for
//   requests, is not either). Until then nothing is toggled: every launch is traced.
// - The step thread: the first to close a step; another thread takes the steps over when
//   none closed for takeover_ns (a pool whose thread changed). A thread is known by an
//   address of its own (the collector's: its thread state), so a thread started after the
//   step thread ended may inherit its place: it is the one running steps by then anyway.
// - Level-triggered: each step counted says whether the next one is traced, and a toggle is
//   asked only where that differs from what the collector does now, so a refused toggle or
//   the program's own pause is mended at the next step.
// - Paused by the steps and no step for stale_ns: resume, and a found step scope is looked
//   for again, so a scope wrongly taken for the step never leaves the collector paused for
//   good (the search needs the launch callbacks, which are off while paused).
// - A generation per start: a close still being handled from an earlier start changes nothing.
//
// Thread-safe: atomics only; the per-thread search state is the caller's (thread_local).
//
//   kscope::step_window_driver d;
//   d.start({1, 100}, "", now);
//   thread_local kscope::step_window_driver::thread_memory mine;
//   auto what = d.closed(node, &mine, mine, launches_seen, tracing, now, name_of);
class step_window_driver {
 public:
  static constexpr std::int64_t takeover_ns = 1'000'000'000;
  static constexpr std::int64_t stale_ns = 2'000'000'000;

  // What one thread remembers while the step scope is looked for.
  struct thread_memory {
    std::uint64_t generation = 0;
    std::uint32_t launches_at_last_close = 0;
    std::array<node_id, 8> launched_in{};  // outermost scopes that launched at a close, a ring
    std::size_t count = 0, next = 0;
  };
  using toggle = step_window_schedule::toggle;
  struct decision {
    toggle change = toggle::none;
    std::uint64_t generation = 0;  // the start it belongs to
    bool counted = false;          // a step was counted at this close
    bool found = false;            // the step scope was found at this close: the closed node
    bool lost = false;             // the found step scope went stale: looked for again
  };

  void start(step_window_options grid, std::string step_scope, std::int64_t now_ns);
  void stop() noexcept { on_.store(false, std::memory_order_release); }
  [[nodiscard]] bool on() const noexcept { return on_.load(std::memory_order_acquire); }
  [[nodiscard]] std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }
  [[nodiscard]] std::uint64_t steps() const noexcept { return steps_.load(std::memory_order_relaxed); }
  // The collector paused (true) or resumed (false) tracing for the steps.
  void note_paused_by_steps(bool paused) noexcept { paused_by_steps_.store(paused, std::memory_order_release); }
  // The lock, for an owner that lives as long as the process to register with the fork guard
  // (core/detail/fork_guard.hpp, lock_rank::step_windows).
  [[nodiscard]] std::mutex& lock_for_fork() noexcept { return name_mutex_; }

  // An outermost scope `closed` closed on `thread` at `now_ns`. `launches_seen`: the launches
  // the collector's callback saw on that thread so far (thread_state::launches_seen);
  // `tracing`: whether the collector traces now; `name_of(node)`: a node's name (called only
  // while a named step scope's node is not known yet).
  template <class NameOf>
  decision closed(node_id closed, const void* thread, thread_memory& memory, std::uint32_t launches_seen, bool tracing,
                  std::int64_t now_ns, NameOf&& name_of);

 private:
  decision count(decision d, bool tracing, std::int64_t now_ns) noexcept;
  decision stale(decision d, std::int64_t now_ns) noexcept;
  decision find(decision d, node_id closed, const void* thread, thread_memory& memory, std::uint32_t launches_seen,
                bool tracing, std::int64_t now_ns) noexcept;

  std::atomic<bool> on_{false};
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::uint32_t> window_{0}, period_{0};
  std::atomic<bool> named_{false};  // a step scope named (else found at run time)
  mutable std::mutex name_mutex_;    // guards step_scope_: read until its node is known
  std::string step_scope_;
  std::atomic<node_id> step_node_{0};         // 0: not known yet
  std::atomic<const void*> step_thread_{nullptr};
  std::atomic<std::uint64_t> steps_{0};
  std::atomic<std::int64_t> last_step_ns_{0};
  std::atomic<bool> paused_by_steps_{false};
};

template <class NameOf>
auto step_window_driver::closed(node_id closed, const void* thread, thread_memory& memory, std::uint32_t launches_seen,
                                bool tracing, std::int64_t now_ns, NameOf&& name_of) -> decision {
  decision d;
  d.generation = generation_.load(std::memory_order_acquire);
  if (!on_.load(std::memory_order_acquire)) return d;
  node_id step = step_node_.load(std::memory_order_acquire);
  if (step == 0) {
    if (!named_.load(std::memory_order_acquire)) return find(d, closed, thread, memory, launches_seen, tracing, now_ns);
    const std::string name = name_of(closed);
    {
      std::lock_guard<std::mutex> lock(name_mutex_);
      if (name != step_scope_) return stale(d, now_ns);
    }
    node_id none = 0;
    if (!step_node_.compare_exchange_strong(none, closed, std::memory_order_acq_rel) && none != closed) return d;
    step = closed;
  }
  if (closed != step) return stale(d, now_ns);
  const void* owner = step_thread_.load(std::memory_order_acquire);
  if (owner != thread) {
    const bool takeover = owner == nullptr || now_ns - last_step_ns_.load(std::memory_order_relaxed) > takeover_ns;
    if (!takeover || !step_thread_.compare_exchange_strong(owner, thread, std::memory_order_acq_rel)) return d;
  }
  return count(d, tracing, now_ns);
}

// One traced window on kscope's clock (detail::now_ns). An open window's end is the time
// it was read at.
struct traced_interval {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  [[nodiscard]] constexpr std::int64_t ns() const noexcept { return end_ns > start_ns ? end_ns - start_ns : 0; }
};

// What the windows covered, for the report, the metrics and the GPU-time account.
struct trace_window_summary {
  bool windowed = false;            // tracing ran in windows (false: all the time it ran)
  trace_window_options options{};
  std::uint64_t windows = 0;        // windows begun, the open one included
  std::int64_t traced_ns = 0;       // their length, the open one up to the read
  std::int64_t since_ns = 0;        // when tracing began (the first window's start)
  std::int64_t until_ns = 0;        // when this was read
  bool open = false;                // a window is open now
  std::uint64_t failed_toggles = 0; // a pause or resume CUPTI refused (then tracing stayed as it was)
  // Windows in steps (cupti_options::trace_steps): their sizes, the step scope's name, and
  // the steps closed so far (traced or not).
  step_window_options steps{};
  std::string step_scope;          // empty: no step scope named, none found yet
  bool step_scope_found = false;   // found at run time, not named by the program
  std::uint64_t steps_closed = 0;
  // The most recent windows, oldest first (at most trace_window_log::max_kept); older ones
  // count in `windows` and traced_ns only (`forgotten` of them).
  std::vector<traced_interval> recent;
  std::uint64_t forgotten = 0;

  [[nodiscard]] std::int64_t elapsed_ns() const noexcept { return until_ns > since_ns ? until_ns - since_ns : 0; }
  // traced_ns / elapsed, 0 when nothing elapsed.
  [[nodiscard]] double traced_share() const noexcept {
    const std::int64_t e = elapsed_ns();
    return e > 0 ? static_cast<double>(traced_ns) / static_cast<double>(e) : 0.0;
  }
  // True when [start, end] lies inside one window the summary still lists.
  [[nodiscard]] bool covers(std::int64_t start_ns, std::int64_t end_ns) const noexcept;
  // The traced part of [start, end): its overlap with the windows listed.
  [[nodiscard]] std::int64_t traced_within(std::int64_t start_ns, std::int64_t end_ns) const noexcept;
  // One line for the report: "GPU activity traced in 12 windows of 100 ms every 10 s:
  // 1.20 s of 120 s (1.0 %)". Empty when not windowed.
  [[nodiscard]] std::string describe() const;
};

// The fixed grid of windows: window k is [start + k * period, start + k * period + window).
class trace_window_schedule {
 public:
  trace_window_schedule() = default;
  trace_window_schedule(trace_window_options options, std::int64_t start_ns) noexcept
      : options_(options), start_ns_(start_ns) {}

  [[nodiscard]] const trace_window_options& options() const noexcept { return options_; }
  [[nodiscard]] std::int64_t start_ns() const noexcept { return start_ns_; }

  // Whether the grid traces at `now` (always, when not windowed; never before the start).
  [[nodiscard]] bool traced_at(std::int64_t now_ns) const noexcept;

  // The first time after `now` at which traced_at changes; INT64_MAX when it never does.
  [[nodiscard]] std::int64_t next_change_after(std::int64_t now_ns) const noexcept;

 private:
  [[nodiscard]] std::int64_t window_ns() const noexcept { return std::int64_t{options_.window_ms} * 1000000; }
  [[nodiscard]] std::int64_t period_ns() const noexcept { return std::int64_t{options_.period_ms} * 1000000; }

  trace_window_options options_{};
  std::int64_t start_ns_ = 0;
};

// What actually happened: the collector calls begin() when it resumed tracing and end()
// when it paused (a toggle can come late, or fail, so the grid alone does not say).
// Bounded: the last max_kept windows are listed, older ones only counted. Not thread-safe:
// the collector guards it.
class trace_window_log {
 public:
  static constexpr std::size_t max_kept = 1024;

  void configure(trace_window_options options, std::int64_t since_ns);
  void begin(std::int64_t now_ns);
  void end(std::int64_t now_ns);
  void note_failed_toggle() noexcept { ++failed_toggles_; }
  // The program paused tracing itself (cupti_collector::pause_tracing): windows from now on,
  // whatever the options said.
  void note_program_window() noexcept { windowed_ = true; }
  // Windows in steps of `scope` (the collector pauses and resumes at its close; it counts
  // the steps itself and fills trace_window_summary::steps_closed); `found`: the collector
  // found the scope at run time (empty: not yet).
  void configure_steps(step_window_options steps, std::string scope, bool found = false);
  [[nodiscard]] bool open() const noexcept { return open_; }
  [[nodiscard]] trace_window_summary summary(std::int64_t now_ns) const;
  // Forgets the windows before `now` (cupti_collector::reset: the aggregates start afresh,
  // so the windows they rest on do too); an open window restarts at `now`.
  void reset(std::int64_t now_ns);

 private:
  trace_window_options options_{};
  bool windowed_ = false;
  std::int64_t since_ns_ = 0;
  std::deque<traced_interval> kept_;
  std::uint64_t windows_ = 0;
  std::uint64_t forgotten_ = 0;
  std::int64_t closed_ns_ = 0;  // length of the closed windows
  bool open_ = false;
  std::int64_t open_since_ns_ = 0;
  std::uint64_t failed_toggles_ = 0;
  step_window_options steps_{};
  std::string step_scope_;
  bool step_scope_found_ = false;
};

namespace detail {
// "100 ms", "10 s", "1.5 s": a length in ms as people read it.
KSCOPE_DECL std::string window_length_text(std::uint32_t ms);
}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool trace_window_schedule::traced_at(std::int64_t now_ns) const noexcept {
  if (!options_.windowed()) return true;
  if (now_ns < start_ns_) return false;
  return (now_ns - start_ns_) % period_ns() < window_ns();
}

KSCOPE_DECL std::int64_t trace_window_schedule::next_change_after(std::int64_t now_ns) const noexcept {
  constexpr std::int64_t never = INT64_MAX;
  if (!options_.windowed()) return never;
  if (now_ns < start_ns_) return start_ns_;
  const std::int64_t into = (now_ns - start_ns_) % period_ns();
  const std::int64_t period_start = now_ns - into;
  return into < window_ns() ? period_start + window_ns() : period_start + period_ns();
}

KSCOPE_DECL auto step_window_schedule::step_closed() noexcept -> toggle {
  const std::uint64_t closed = closed_++;
  if (!options_.windowed()) return toggle::none;
  const bool was = traced(closed), next = traced(closed + 1);
  if (was == next) return toggle::none;
  return next ? toggle::resume : toggle::pause;
}

KSCOPE_DECL void step_window_driver::start(step_window_options grid, std::string step_scope, std::int64_t now_ns) {
  on_.store(false, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  window_.store(grid.window_steps, std::memory_order_relaxed);
  period_.store(grid.period_steps, std::memory_order_relaxed);
  named_.store(!step_scope.empty(), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(name_mutex_);
    step_scope_ = std::move(step_scope);
  }
  step_node_.store(0, std::memory_order_relaxed);
  step_thread_.store(nullptr, std::memory_order_relaxed);
  steps_.store(0, std::memory_order_relaxed);
  last_step_ns_.store(now_ns, std::memory_order_relaxed);
  paused_by_steps_.store(false, std::memory_order_relaxed);
  on_.store(grid.windowed(), std::memory_order_release);
}

KSCOPE_DECL auto step_window_driver::count(decision d, bool tracing, std::int64_t now_ns) noexcept -> decision {
  const std::uint64_t closed = steps_.fetch_add(1, std::memory_order_relaxed) + 1;
  last_step_ns_.store(now_ns, std::memory_order_relaxed);
  d.counted = true;
  // The next step is number `closed` (from 0): traced where the grid says.
  const step_window_options grid{window_.load(std::memory_order_relaxed), period_.load(std::memory_order_relaxed)};
  const bool traced = step_window_schedule(grid).traced(closed);
  if (traced != tracing) d.change = traced ? toggle::resume : toggle::pause;
  return d;
}

KSCOPE_DECL auto step_window_driver::stale(decision d, std::int64_t now_ns) noexcept -> decision {
  if (!paused_by_steps_.load(std::memory_order_acquire)) return d;
  std::int64_t last = last_step_ns_.load(std::memory_order_relaxed);
  if (now_ns - last <= stale_ns) return d;
  if (!last_step_ns_.compare_exchange_strong(last, now_ns, std::memory_order_acq_rel)) return d;  // another close took it
  if (!named_.load(std::memory_order_acquire)) {
    step_thread_.store(nullptr, std::memory_order_release);
    step_node_.store(0, std::memory_order_release);
    d.lost = true;
  }
  d.change = toggle::resume;
  return d;
}

KSCOPE_DECL auto step_window_driver::find(decision d, node_id closed, const void* thread, thread_memory& memory,
                                          std::uint32_t launches_seen, bool tracing, std::int64_t now_ns) noexcept
    -> decision {
  if (memory.generation != d.generation) memory = thread_memory{d.generation, 0, {}, 0, 0};
  const bool launched = launches_seen != memory.launches_at_last_close;
  memory.launches_at_last_close = launches_seen;
  if (!launched) return stale(d, now_ns);
  const auto end = memory.launched_in.begin() + static_cast<std::ptrdiff_t>(memory.count);
  if (std::find(memory.launched_in.begin(), end, closed) == end) {
    memory.launched_in[memory.next] = closed;  // the oldest goes when full
    memory.next = (memory.next + 1) % memory.launched_in.size();
    memory.count = std::min(memory.count + 1, memory.launched_in.size());
    return stale(d, now_ns);
  }
  const void* no_thread = nullptr;
  if (!step_thread_.compare_exchange_strong(no_thread, thread, std::memory_order_acq_rel)) return d;  // another thread's
  step_node_.store(closed, std::memory_order_release);
  d.found = true;
  return count(d, tracing, now_ns);  // its first step
}

KSCOPE_DECL void trace_window_log::configure_steps(step_window_options steps, std::string scope, bool found) {
  steps_ = steps;
  step_scope_ = std::move(scope);
  step_scope_found_ = found;
  if (steps.windowed()) windowed_ = true;
}

KSCOPE_DECL void trace_window_log::configure(trace_window_options options, std::int64_t since_ns) {
  options_ = options;
  steps_ = step_window_options{};
  step_scope_.clear();
  step_scope_found_ = false;
  windowed_ = options.windowed();
  since_ns_ = since_ns;
  kept_.clear();
  windows_ = forgotten_ = failed_toggles_ = 0;
  closed_ns_ = 0;
  open_ = false;
}

KSCOPE_DECL void trace_window_log::begin(std::int64_t now_ns) {
  if (open_) return;
  open_ = true;
  open_since_ns_ = now_ns;
  ++windows_;
}

KSCOPE_DECL void trace_window_log::end(std::int64_t now_ns) {
  if (!open_) return;
  open_ = false;
  const traced_interval w{open_since_ns_, std::max(open_since_ns_, now_ns)};
  closed_ns_ += w.ns();
  kept_.push_back(w);
  if (kept_.size() > max_kept) {
    kept_.pop_front();
    ++forgotten_;
  }
}

KSCOPE_DECL trace_window_summary trace_window_log::summary(std::int64_t now_ns) const {
  trace_window_summary s;
  s.windowed = windowed_;
  s.options = options_;
  s.windows = windows_;
  s.since_ns = since_ns_;
  s.until_ns = std::max(since_ns_, now_ns);
  s.open = open_;
  s.failed_toggles = failed_toggles_;
  s.steps = steps_;
  s.step_scope = step_scope_;
  s.step_scope_found = step_scope_found_;
  s.forgotten = forgotten_;
  s.recent.assign(kept_.begin(), kept_.end());
  s.traced_ns = closed_ns_;
  if (open_) {
    const traced_interval w{open_since_ns_, std::max(open_since_ns_, s.until_ns)};
    s.recent.push_back(w);
    s.traced_ns += w.ns();
  }
  return s;
}

KSCOPE_DECL void trace_window_log::reset(std::int64_t now_ns) {
  kept_.clear();
  windows_ = forgotten_ = 0;
  closed_ns_ = 0;
  since_ns_ = now_ns;
  if (open_) {
    open_since_ns_ = now_ns;
    windows_ = 1;
  }
}

KSCOPE_DECL bool trace_window_summary::covers(std::int64_t start_ns, std::int64_t end_ns) const noexcept {
  if (!windowed) return true;
  // recent is in time order: the last window starting at or before `start` is the only candidate.
  auto it = std::upper_bound(recent.begin(), recent.end(), start_ns,
                             [](std::int64_t t, const traced_interval& w) { return t < w.start_ns; });
  if (it == recent.begin()) return false;
  --it;
  return start_ns >= it->start_ns && end_ns <= it->end_ns;
}

KSCOPE_DECL std::int64_t trace_window_summary::traced_within(std::int64_t start_ns, std::int64_t end_ns) const noexcept {
  if (end_ns <= start_ns) return 0;
  if (!windowed) return end_ns - start_ns;
  std::int64_t sum = 0;
  for (const traced_interval& w : recent) {
    const std::int64_t a = std::max(w.start_ns, start_ns), b = std::min(w.end_ns, end_ns);
    if (b > a) sum += b - a;
  }
  return sum;
}

KSCOPE_DECL std::string detail::window_length_text(std::uint32_t ms) {
  if (ms < 1000 || ms % 100 != 0) return std::to_string(ms) + " ms";
  const std::uint32_t tenths = ms / 100;
  return std::to_string(tenths / 10) + (tenths % 10 ? "." + std::to_string(tenths % 10) : std::string()) + " s";
}

KSCOPE_DECL std::string trace_window_summary::describe() const {
  if (!windowed) return {};
  const auto seconds = [](std::int64_t ns) {
    const double s = static_cast<double>(ns) / 1e9;
    return detail::format_fixed(s, s < 10 ? 2 : s < 100 ? 1 : 0) + " s";
  };
  const std::string share = detail::format_fixed(100.0 * traced_share(), 1) + " %";
  std::string how;
  if (steps.windowed()) {
    const auto plural = [](std::uint64_t n, const char* one) { return std::to_string(n) + " " + one + (n == 1 ? "" : "s"); };
    how = " of " + plural(steps.window_steps, "step") + " every " + std::to_string(steps.period_steps) + " (steps: ";
    if (step_scope.empty())
      how += "no step scope found yet, every launch traced until one is: an outermost scope that repeats with GPU work)";
    else
      how += "calls of '" + step_scope + "'" +
             (step_scope_found ? ", found as the first outermost scope to launch GPU work at two closes" : "") + ", " +
             std::to_string(steps_closed) + " so far)";
  } else if (options.windowed()) {
    how = " of " + detail::window_length_text(options.window_ms) + " every " + detail::window_length_text(options.period_ms);
  } else {
    how = " (paused and resumed by the program)";
  }
  std::string line = "GPU activity traced in " + std::to_string(windows) + (windows == 1 ? " window" : " windows") + how +
                     ": " + seconds(traced_ns) + " of " + seconds(elapsed_ns()) + " (" + share + ")";
  if (open) line += ", one open now";
  if (failed_toggles > 0) line += "; " + std::to_string(failed_toggles) + " pauses or resumes refused by CUPTI";
  return line;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
