// kscope/scope/recorder.hpp — what scopes record: the call-path tree, the samples of each
// node, the host intervals kept for a trace, and the CUDA events of stream scopes.
//
//   KSCOPE_SCOPE("decode");                                   // anywhere, any thread
//   #include <kscope/scope/recorder_snapshot.hpp>             // where the data is read
//   kscope::recorder_snapshot data = kscope::recorder::global().snapshot();
//   for (const kscope::recorded_node& n : data.nodes) use(n.name, n.calls, n.host_ticks);
//
// Users rarely call it: session::report() reads it and summarizes. It is its own class so
// that the header every instrumented file includes (scope.hpp) carries the data capture
// and nothing of the statistics, devices, CUPTI or report formatting. For the same
// reason this header defines only what scopes call; the readers (snapshot(),
// trace_snapshot(), settle_gpu(), reset()) are declared here and defined in
// recorder_snapshot.hpp, which the session includes. (An inline function needs its
// definition only where it is called; calling one without that header draws the
// compiler's "inline function used but never defined" warning, then fails to link.)
//
// How the hot path stays cheap: a closing scope appends one fixed-size record to a ring
// owned by its thread (no lock, no allocation). The recorder drains the rings under its
// own lock, when a snapshot is taken or when a ring fills up, and only then touches the
// tree, the per-node reservoirs and the CUDA events. GPU times are read from the events
// when a snapshot is taken (settle_gpu() waits for events still in flight, without the
// lock; a scope's exit never waits).
//
// Memory is bounded: each node keeps at most `sample_cap` samples per series (exact
// count, sum, min and max over all calls; a uniform reservoir past the cap), the tree at
// most `max_nodes` nodes (later names go to an "(overflow)" node, with a warning), the
// trace the most recent `trace_capacity` host intervals (older ones are counted), and the
// CUDA event pool a fixed number of pairs in flight (scopes past it are counted).
//
// Windows (take_window(), which session::window() reads): beside its run totals each node
// accumulates the same figures since the last window, in the same drain under the same
// lock (a closing scope does nothing more), from the first take_window() on (the first
// window is the run so far). take_window() moves the window figures of every node that
// closed since out in one hold and leaves fresh empty ones; the run totals and the tree stay.
// A window's samples are bounded like the run's: `window_sample_cap` per node and series,
// all nodes together `window_sample_budget`, so memory does not grow with the windows
// taken or the days a program runs.
#pragma once

#include "../core/config.hpp"
#include "../core/detail/clock.hpp"
#include "../core/detail/once.hpp"
#include "../core/detail/reservoir.hpp"
#include "detail/counter_hook.hpp"
#include "detail/event_pool.hpp"
#include "detail/node_cache.hpp"
#include "detail/switches.hpp"
#include "detail/thread_log.hpp"
#include "detail/thread_state.hpp"
#include "node_id.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>
#endif

namespace kscope {

// The values of one series of one node (host ticks, GPU nanoseconds): exact count, sum,
// min and max over every value, and a uniform sample of at most `cap` of them.
//
//   kscope::recorded_series s(100);
//   s.add(42.0);
//   s.samples();     // what summarize() reads; s.saturated(): a sample, not all values
class recorded_series {
 public:
  explicit recorded_series(std::size_t cap = 1) noexcept : kept_(cap == 0 ? 1 : cap) {}

  // Called once per closed scope when a thread's ring drains: no allocation past the cap.
  // `may_grow` false (the recorder's memory budget is spent) keeps the sample at the size
  // it has. Returns whether one more value is held than before.
  bool add(double v, bool may_grow = true) noexcept;

  // A reader's copy in two steps (recorder_snapshot.hpp): the exact count, sum and
  // extremes, then the first `count` values held.
  void copy_counts_of(const recorded_series& live);
  void copy_values_of(const recorded_series& live, std::size_t count) { kept_.copy_values_of(live.kept_, count); }

  // In arrival order until saturated(), then a uniform sample in slot order.
  [[nodiscard]] const std::vector<double>& samples() const noexcept { return kept_.kept(); }
  [[nodiscard]] std::uint64_t count() const noexcept { return kept_.seen(); }
  [[nodiscard]] double sum() const noexcept { return sum_; }
  [[nodiscard]] double min() const noexcept { return min_; }
  [[nodiscard]] double max() const noexcept { return max_; }
  [[nodiscard]] bool saturated() const noexcept { return kept_.saturated(); }
  // Values it may hold: the sample cap, or less where the memory budget stopped it.
  [[nodiscard]] std::size_t capacity() const noexcept { return kept_.capacity(); }

 private:
  detail::uniform_reservoir<double> kept_;
  double sum_ = 0, min_ = 0, max_ = 0;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool recorded_series::add(double v, bool may_grow) noexcept {
  if (kept_.seen() == 0 || v < min_) min_ = v;
  if (kept_.seen() == 0 || v > max_) max_ = v;
  sum_ += v;
  const std::size_t held = kept_.kept().size();
  kept_.offer(v, may_grow);
  return kept_.kept().size() > held;
}

KSCOPE_DECL void recorded_series::copy_counts_of(const recorded_series& live) {
  kept_.copy_counts_of(live.kept_);
  sum_ = live.sum_;
  min_ = live.min_;
  max_ = live.max_;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// How often a scope of one node was tagged key=value (scope::tag).
struct recorded_tag {
  std::string key;
  std::string value;
  std::uint64_t count = 0;
  std::uint64_t window_count = 0;  // since the last window (recorder::take_window())
};

// What one node recorded since the last window (recorder::take_window()): the figures of
// recorded_node below over the window alone. The recorder keeps one per node beside the
// tree; the window a reader gets has them in recorded_node's own fields.
struct recorded_window_values {
  explicit recorded_window_values(std::size_t cap = 1) noexcept : host_ticks(cap), gpu_ns(cap) {}

  std::uint64_t calls = 0;
  std::uint64_t profiled_calls = 0;
  double host_total_ticks = 0;
  recorded_series host_ticks;
  recorded_series gpu_ns;
  double gpu_total_ns = 0;
  double flops = 0, bytes = 0;
  std::uint64_t work_calls = 0;
  bool tagged = false;  // a tag was given in the window (recorded_tag::window_count)

  // The node closed in this window: take_window() hands its figures over. A node that did
  // not keeps what arrived for it (a tag given, or a GPU time read, for a call still open
  // or closed just before the cut) until a window in which it closes, where the report
  // lists it: nothing is handed to a window whose report would leave the node out.
  [[nodiscard]] bool closed_any() const noexcept { return calls > 0 || profiled_calls > 0; }
  [[nodiscard]] bool untouched() const noexcept { return !closed_any() && gpu_ns.count() == 0 && !tagged; }
};

// One node of the call-path tree with everything recorded for it.
struct recorded_node {
  recorded_node(node_id parent_, std::string name_, std::uint32_t depth_, bool cross_thread_, std::size_t cap)
      : parent(parent_), name(std::move(name_)), depth(depth_), cross_thread(cross_thread_), host_ticks(cap),
        gpu_ns(cap) {}

  node_id parent;
  std::string name;
  std::uint32_t depth;
  bool cross_thread;               // a range (kscope::range), not a scope on a thread's stack
  std::vector<node_id> children;   // in creation order
  std::uint64_t calls = 0;          // timed calls
  std::uint64_t profiled_calls = 0; // profiled by the per-scope counters: counted, never timed
  double host_total_ticks = 0;     // host times stay in ticks until a report converts them
  recorded_series host_ticks;
  recorded_series gpu_ns;          // from the CUDA events of stream scopes
  double gpu_total_ns = 0;
  double flops = 0, bytes = 0;     // declared work, summed over work_calls
  std::uint64_t work_calls = 0;
  std::vector<recorded_tag> tags;   // sorted by (key, value), each pair once
};

// One host interval kept for the trace, in ticks.
struct recorded_interval {
  node_id node;
  std::uint32_t thread_index;
  std::int64_t start_ticks, end_ticks;
};

// What readers get (recorder_snapshot.hpp defines them, with the functions that fill them).
struct recorder_snapshot;
struct recorder_trace;
struct recorder_window;

namespace detail {

// What a thread owns on the heap: its record ring and its (parent, name) -> node cache.
// Created at the thread's first scope; freed when the thread exits (a pthread key's
// destructor, which runs after the thread's thread_local destructors, so scopes in those
// still take the fast path). The main thread's is never freed: scopes in static
// destructors and atexit handlers keep working. See thread_state.hpp for what happens
// after a thread's is freed.
struct thread_resources {
  explicit thread_resources(std::uint32_t thread_index) noexcept : log(thread_index) {}
  thread_log log;
  node_cache names;
};

}  // namespace detail

// The process-wide recorder. It is created on first use and deliberately never destroyed,
// so scopes still open in other threads at exit, or closed from static destructors, stay
// safe.
//
//   kscope::recorder::global().set_enabled(false);      // scopes cost a load and a branch
//   kscope::recorder::global().set_trace_capacity(1 << 20);
class recorder {
 public:
  static constexpr std::size_t max_nodes = 1u << 16;
  static constexpr std::size_t default_sample_cap = 10000;
  static constexpr std::size_t default_trace_capacity = 65536;

  recorder(const recorder&) = delete;
  recorder& operator=(const recorder&) = delete;

  [[nodiscard]] static recorder& global() noexcept {
    // Not a function-local static: its guard, held by a thread that a fork leaves behind,
    // would hang the child's first scope (core/detail/once.hpp). Leaked on purpose (above).
    static detail::lazy_global<recorder> instance{detail::lock_rank::init_recorder};
    return instance.get([] { return new recorder(); });
  }

  // ---- switches ------------------------------------------------------------------------
  // Recording on or off for every scope in the process (also KSCOPE=0 in the
  // environment). Disabled scopes cost a load and a branch.
  void set_enabled(bool on) noexcept { detail::enabled_state.store(on ? 1 : 0, std::memory_order_relaxed); }
  [[nodiscard]] bool enabled() const noexcept { return detail::enabled(); }
  // NVTX ranges for scopes (on by default; with no tool attached they cost ~1 ns).
  void set_nvtx(bool on) noexcept { detail::nvtx_enabled.store(on, std::memory_order_relaxed); }

  // Samples kept per node and series before the reservoir takes over (default 10 000).
  // Applies to nodes' series created after the call, and to all after reset().
  void set_sample_cap(std::size_t cap) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    sample_cap_ = cap == 0 ? 1 : cap;
  }
  [[nodiscard]] std::size_t sample_cap() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return sample_cap_;
  }

  // Values the sample stores of all nodes together may hold (default 16 Mi, 128 MiB):
  // with the per-node cap alone, 65 536 nodes x 2 series x 10 000 samples could take
  // 10 GiB. Past the budget each series keeps the sample it has (at least
  // `min_series_samples` values) and samples uniformly within it; counts, sums and extremes
  // stay exact. The report says when the budget limited a sample. Worst case held:
  // budget + max_nodes x 2 x min_series_samples values, and as much again during a report.
  static constexpr std::size_t default_sample_budget = std::size_t{1} << 24;
  static constexpr std::size_t min_series_samples = 64;
  void set_sample_budget(std::size_t values) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    sample_budget_ = values;
  }

  // Host intervals kept for the trace (default 65 536, the most recent; older ones are
  // counted in recorder_snapshot::trace_overwritten). Starts the ring (and that count)
  // afresh; 0 keeps none.
  void set_trace_capacity(std::size_t intervals);

  // Samples a window keeps per node and series (take_window(); default 2048: a p99 from
  // about 20 values above it), and the values the windows of all nodes together may hold
  // (default 4 Mi, 32 MiB; each series keeps at least `min_series_samples`). Past either a
  // window's series samples uniformly; its counts, sums and extremes stay exact. Both
  // apply from the next window on. Windows keep their samples beside the run's: they cost
  // at most their budget on top of the run's, and as much again while one is summarized.
  static constexpr std::size_t default_window_sample_cap = 2048;
  static constexpr std::size_t default_window_sample_budget = std::size_t{1} << 22;
  void set_window_sample_cap(std::size_t cap) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    window_sample_cap_ = cap == 0 ? 1 : cap;
  }
  [[nodiscard]] std::size_t window_sample_cap() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return window_sample_cap_;
  }
  void set_window_sample_budget(std::size_t values) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    window_sample_budget_ = values;
  }

  // ---- what readers call (the session); defined in recorder_snapshot.hpp ----------------
  // Waits, without holding the lock, for the GPU events of every scope closed so far, so
  // that the next snapshot() has their GPU times. Scopes closing meanwhile never wait.
  void settle_gpu() noexcept;

  // Drains every thread's ring, reads the GPU events that have completed, and copies the
  // tree and its samples. Scopes still open are not included.
  [[nodiscard]] recorder_snapshot snapshot();

  // Drains every thread's ring and copies the trace ring (oldest first) with node names.
  [[nodiscard]] recorder_trace trace_snapshot();

  // What every node recorded since the previous take_window() (or since the recorder
  // started, or reset()): drains every thread's ring, reads the GPU events that have
  // completed, and moves the window figures of each node that closed since out in one hold
  // of the lock, leaving it empty ones; the run totals, the samples report() reads and the
  // trace stay as they are. A scope is in the window whose take first drains its record:
  // one still open when a window is taken is counted in the window in which it closes,
  // with its whole time (recorded_window_values::closed_any says where its tags and late
  // GPU times go). Two callers at once get two consecutive windows, never a record twice.
  [[nodiscard]] recorder_window take_window();

  // Forgets all samples, tags, trace intervals and counters (node ids stay valid: call
  // sites cache them). GPU timings of scopes closed before the call never land after it.
  void reset() noexcept;

  // ---- used by scopes (kscope::scope, kscope::range); not for direct use -----------------
  node_id intern(node_id parent, std::string_view name, bool cross_thread = false);
  // A node's own name ("" for an id never handed out). Takes the scope side's lock: not for
  // hot paths.
  [[nodiscard]] std::string node_name(node_id node);
  // The calling thread's (parent, name) -> node cache; null once the thread has exited
  // (or out of memory), when intern() is the way.
  detail::node_cache* this_thread_names() noexcept;
  void log(const detail::scope_record& r) noexcept;
  // The slow path of a closing scope: the thread's ring is full (drain it, then push).
  void log_full(detail::thread_log* log, const detail::scope_record& r) noexcept;
  // Tags are rare and carry strings, so they go to the recorder at once (one lock).
  void add_tag(node_id node, std::string_view key, std::string_view value);
#if KSCOPE_HAS_CUDA
  bool acquire_events(int device, std::uint32_t& slot, detail::event_pair& pair) noexcept {
    if (events_.acquire(device, slot, pair)) return true;
    gpu_timing_skipped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  void release_events(std::uint32_t slot) noexcept { events_.release(slot); }
#endif
  // A thread exits: its last records are drained and its ring and cache freed.
  void retire(detail::thread_resources* resources) noexcept;

 private:
  recorder();
#if KSCOPE_DETAIL_FORK_GUARD
  static void on_thread_exit(void* resources) noexcept {
    global().retire(static_cast<detail::thread_resources*>(resources));
  }
#endif

  // A stream scope whose CUDA events have not been read yet.
  struct pending_gpu {
    node_id node;  // stale_node after reset(): the events are read and freed, not counted
    std::uint32_t slot;
  };
  static constexpr node_id stale_node = detail::node_cache::invalid;

  // The lock as the scopes' side takes it: announced first, so that a reader copying in
  // steps (snapshot()) lets it in between steps. std::mutex does not hand over: a reader
  // that unlocks and locks again at once wins again and again, and a waiting scope would
  // wait for the whole copy.
  class scope_side_lock {
   public:
    explicit scope_side_lock(recorder& r) : r_(r) {
      r_.scope_waiters_.fetch_add(1, std::memory_order_acq_rel);
      try {
        r_.mutex_.lock();
      } catch (...) {
        r_.scope_waiters_.fetch_sub(1, std::memory_order_release);
        throw;
      }
      r_.scope_waiters_.fetch_sub(1, std::memory_order_release);
    }
    ~scope_side_lock() { r_.mutex_.unlock(); }
    scope_side_lock(const scope_side_lock&) = delete;
    scope_side_lock& operator=(const scope_side_lock&) = delete;

   private:
    recorder& r_;
  };
  // Between two steps of a reader's copy: waits (yielding, bounded) until no scope is
  // waiting for the lock.
  void let_scopes_in() noexcept;

  detail::thread_resources* this_thread_resources() noexcept;
  // A scope closing after its thread's state was freed (or could not be allocated):
  // recorded under the lock, never lost.
  void log_locked_path(const detail::scope_record& r) noexcept;
  void drain_all_locked();
  void drain_locked(detail::thread_log& log);
  void apply_locked(const detail::scope_record& r, std::uint32_t thread_index);
  void add_sample_locked(recorded_series& series, double value) noexcept;
  void add_window_sample_locked(recorded_series& series, double value) noexcept;
  // A reader's copy of the run (snapshot(), the first take_window()): the counts, totals
  // and extremes in one hold, then names, tags and the values held then, in steps.
  void copy_counts_locked(recorder_snapshot& out, std::vector<std::size_t>& host_held,
                          std::vector<std::size_t>& gpu_held);
  void copy_values_in_steps(recorder_snapshot& out, std::uint64_t generation, const std::vector<std::size_t>& host_held,
                            const std::vector<std::size_t>& gpu_held, bool with_tags);
  // What every reader's copy of the figures says about them (the run's, or with `window` a
  // window's cap and budget): more nodes than max_nodes, and the `budget_limited` series
  // the memory budget kept under the sample cap (budget_limited_series counts a node's).
  void add_copy_warnings_locked(std::vector<std::string>& warnings, std::size_t budget_limited, bool window) const;
  [[nodiscard]] static std::size_t budget_limited_series(const recorded_node& n, std::size_t cap) noexcept;
  // A node's name and its children among the first `node_count` nodes (those of a copy
  // whose figures were taken earlier: children created later are not in it).
  static void copy_shape(const recorded_node& live, recorded_node& copy, std::size_t node_count);
  void resolve_gpu_locked() noexcept;

  std::mutex mutex_;
  std::atomic<int> scope_waiters_{0};  // scopes blocked on mutex_ (scope_side_lock)
  std::vector<recorded_node> nodes_;  // index = node_id; guarded by mutex_
  std::vector<recorded_window_values> window_;  // index = node_id, as long as nodes_: since the last window
  // (parent, name) -> node for every node; a range's name is prefixed with '\x01'. The
  // same open-addressing table the per-thread caches use, so scopes instantiate one.
  detail::node_cache index_;
  std::vector<detail::thread_resources*> threads_;  // every live thread's state
  std::vector<pending_gpu> pending_;
  std::size_t sample_cap_ = default_sample_cap;
  std::size_t sample_budget_ = default_sample_budget;
  std::size_t samples_held_ = 0;       // values in all nodes' series together
  std::uint64_t generation_ = 0;       // advanced by reset(): a reader's copy in steps checks it
  // Windows (take_window()): their sample bounds, the values all nodes' window series
  // hold, where the current window started, how many were taken, and the run counters at
  // the last take (a window reports their growth since).
  std::size_t window_sample_cap_ = default_window_sample_cap;
  std::size_t window_sample_budget_ = default_window_sample_budget;
  std::size_t window_samples_held_ = 0;
  bool windows_on_ = false;  // the first take_window() turns window figures on (see there)
  std::int64_t window_since_ticks_ = 0;
  std::uint64_t windows_taken_ = 0;
  std::uint64_t window_gpu_timing_skipped_base_ = 0;
  std::uint64_t window_gpu_event_errors_base_ = 0;
  std::vector<recorded_interval> trace_ring_;  // grows to trace_capacity_, then wraps
  std::size_t trace_capacity_ = default_trace_capacity;
  std::size_t trace_next_ = 0;
  std::uint64_t trace_overwritten_ = 0;
  node_id overflow_node_ = detail::node_cache::invalid;
  std::atomic<std::uint64_t> gpu_timing_skipped_{0};
  std::uint64_t gpu_event_errors_ = 0;
#if KSCOPE_DETAIL_FORK_GUARD
  pthread_key_t thread_exit_key_{};
  bool thread_exit_key_ready_ = false;
#endif
#if KSCOPE_HAS_CUDA
  detail::event_pool events_;
  std::vector<std::uint32_t> resolve_slots_;  // scratch of resolve_gpu_locked
  std::vector<detail::event_pair> resolve_pairs_;
#endif
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void recorder::set_trace_capacity(std::size_t intervals) {
  std::lock_guard<std::mutex> lock(mutex_);
  trace_capacity_ = intervals;
  trace_ring_.clear();
  trace_next_ = 0;
  trace_overwritten_ = 0;
}

KSCOPE_DECL recorder::recorder() {
  detail::tick_origin();  // start the tick calibration span as early as possible
  nodes_.emplace_back(detail::root_node, "(root)", 0, false, sample_cap_);
  window_.emplace_back(window_sample_cap_);
  window_since_ticks_ = detail::ticks();  // the first window starts with the recorder
  // Threads of the parent that were waiting for the lock at the fork do not exist in the
  // child: their count must not make the child's reports wait for them.
  detail::guard_across_fork(mutex_, detail::lock_rank::recorder, [](void* self) noexcept {
    static_cast<recorder*>(self)->scope_waiters_.store(0, std::memory_order_relaxed);
  }, this);
#if KSCOPE_HAS_CUDA
  events_.guard_across_fork();
#endif
#if KSCOPE_DETAIL_FORK_GUARD
  // Without the key a thread's state is never freed (a bounded leak per thread), which
  // is still safe.
  thread_exit_key_ready_ = pthread_key_create(&thread_exit_key_, &on_thread_exit) == 0;
#endif
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- implementation ------------------------------------------------------------------

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string recorder::node_name(node_id node) {
  scope_side_lock lock(*this);
  return node < nodes_.size() ? nodes_[node].name : std::string();
}

KSCOPE_DECL node_id recorder::intern(node_id parent, std::string_view name, bool cross_thread) {
  std::string key;
  key.reserve(name.size() + 1);
  if (cross_thread) key += '\x01';  // a range and a scope of the same name stay apart
  key.append(name.data(), name.size());
  scope_side_lock lock(*this);
  if (parent >= nodes_.size()) parent = detail::root_node;
  const std::uint64_t hash = detail::hash_name(key, parent);
  const node_id found = index_.find(parent, key, hash);
  if (found != detail::node_cache::invalid) return found;
  if (nodes_.size() >= max_nodes) {
    if (overflow_node_ == detail::node_cache::invalid) {
      window_.emplace_back(window_sample_cap_);
      try {
        nodes_.emplace_back(detail::root_node, "(overflow)", 1, false, sample_cap_);
      } catch (...) {
        window_.pop_back();
        throw;
      }
      overflow_node_ = static_cast<node_id>(nodes_.size() - 1);
      nodes_[detail::root_node].children.push_back(overflow_node_);
    }
    return overflow_node_;
  }
  const node_id id = static_cast<node_id>(nodes_.size());
  window_.emplace_back(window_sample_cap_);
  try {
    nodes_.emplace_back(parent, std::string(name), nodes_[parent].depth + 1, cross_thread, sample_cap_);
  } catch (...) {
    window_.pop_back();
    throw;
  }
  // Out of memory half-way: undo, so the tree, its window figures and the index never disagree.
  try {
    nodes_[parent].children.push_back(id);
  } catch (...) {
    window_.pop_back();
    nodes_.pop_back();
    throw;
  }
  try {
    index_.insert(parent, key, hash, id);
  } catch (...) {
    nodes_[parent].children.pop_back();
    window_.pop_back();
    nodes_.pop_back();
    throw;
  }
  return id;
}

// Tags are few per node: a sorted vector, searched linearly, is all they need.
KSCOPE_DECL void recorder::add_tag(node_id node, std::string_view key, std::string_view value) {
  scope_side_lock lock(*this);
  if (node >= nodes_.size()) return;
  std::vector<recorded_tag>& tags = nodes_[node].tags;
  window_[node].tagged = true;
  for (recorded_tag& t : tags) {
    if (t.key == key && t.value == value) {
      ++t.count;
      ++t.window_count;
      return;
    }
  }
  tags.push_back(recorded_tag{std::string(key), std::string(value), 1, 1});
  for (std::size_t i = tags.size() - 1; i > 0; --i) {  // keep (key, value) order
    recorded_tag& a = tags[i - 1];
    recorded_tag& b = tags[i];
    if (a.key < b.key || (a.key == b.key && a.value < b.value)) break;
    std::swap(a, b);
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

inline detail::thread_resources* recorder::this_thread_resources() noexcept {
  detail::thread_state& ts = detail::this_thread_state();
  if (KSCOPE_LIKELY(ts.resources != nullptr)) return static_cast<detail::thread_resources*>(ts.resources);
  if (ts.exited) return nullptr;
  auto* resources = new (std::nothrow) detail::thread_resources(ts.thread_index);
  if (!resources) return nullptr;
  try {
    scope_side_lock lock(*this);
    threads_.push_back(resources);
  } catch (...) {
    delete resources;
    return nullptr;
  }
#if KSCOPE_DETAIL_FORK_GUARD
  if (thread_exit_key_ready_) pthread_setspecific(thread_exit_key_, resources);
#elif defined(_WIN32)
  // No pthread keys: a thread_local owner frees it (scopes in thread_local destructors
  // that run after this one take the locked path).
  struct owner {
    detail::thread_resources* resources = nullptr;
    ~owner() {
      if (resources) recorder::global().retire(resources);
    }
  };
  thread_local owner exit_hook;
  exit_hook.resources = resources;
#endif
  ts.scope_log = &resources->log;
  ts.resources = resources;
  return resources;
}

inline detail::node_cache* recorder::this_thread_names() noexcept {
  detail::thread_resources* resources = this_thread_resources();
  return resources ? &resources->names : nullptr;
}

inline void recorder::log(const detail::scope_record& r) noexcept {
  detail::thread_resources* resources = this_thread_resources();
  if (!resources) return log_locked_path(r);
  if (KSCOPE_LIKELY(resources->log.try_push(r))) return;
  log_full(&resources->log, r);
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void recorder::log_locked_path(const detail::scope_record& r) noexcept {
  try {
    scope_side_lock lock(*this);
    apply_locked(r, detail::this_thread_state().thread_index);
  } catch (...) {
  }
}

KSCOPE_DECL void recorder::log_full(detail::thread_log* log, const detail::scope_record& r) noexcept {
  try {
    scope_side_lock lock(*this);
    drain_locked(*log);
    // A full ring is also the moment to recycle finished event pairs, without waiting.
    resolve_gpu_locked();
  } catch (...) {
  }
  if (!log->try_push(r)) log_locked_path(r);  // the lock failed (cannot happen): never lose it
}

KSCOPE_DECL void recorder::retire(detail::thread_resources* resources) noexcept {
  if (!resources) return;
  detail::thread_state& ts = detail::this_thread_state();  // trivially destructible: valid here
  if (ts.resources == resources) {
    ts.scope_log = nullptr;
    ts.resources = nullptr;
    ts.exited = true;
  }
  try {
    scope_side_lock lock(*this);
    drain_locked(resources->log);
    for (std::size_t i = 0; i < threads_.size(); ++i) {
      if (threads_[i] != resources) continue;
      threads_[i] = threads_.back();
      threads_.pop_back();
      break;
    }
  } catch (...) {
  }
  delete resources;
}

KSCOPE_DECL void recorder::drain_all_locked() {
  for (detail::thread_resources* t : threads_) drain_locked(t->log);
}

KSCOPE_DECL void recorder::drain_locked(detail::thread_log& log) {
  const std::uint32_t thread_index = log.thread_index();
  log.drain([this, thread_index](const detail::scope_record& r) { apply_locked(r, thread_index); });
}

KSCOPE_DECL void recorder::apply_locked(const detail::scope_record& r, std::uint32_t thread_index) {
  if (r.node >= nodes_.size()) {  // cannot happen (nodes are never removed); never leak a pair
#if KSCOPE_HAS_CUDA
    if (r.event_slot != detail::no_events) events_.release(r.event_slot);
#endif
    return;
  }
  if (trace_capacity_ > 0) {
    const recorded_interval e{r.node, thread_index, r.start_ticks, r.end_ticks};
    if (trace_ring_.size() < trace_capacity_) {
      trace_ring_.push_back(e);
    } else {
      trace_ring_[trace_next_] = e;
      trace_next_ = (trace_next_ + 1) % trace_capacity_;
      ++trace_overwritten_;
    }
  }
  recorded_node& n = nodes_[r.node];
  if (r.event_slot == detail::profiled_call_slot) {  // its time includes kernel replay
    ++n.profiled_calls;
    if (windows_on_) ++window_[r.node].profiled_calls;
    return;
  }
  const double elapsed = static_cast<double>(r.end_ticks - r.start_ticks);
  ++n.calls;
  n.host_total_ticks += elapsed;
  add_sample_locked(n.host_ticks, elapsed);
  const bool declared = r.flops == r.flops;  // not NaN: work was declared
  if (declared) {
    n.flops += r.flops;
    n.bytes += r.bytes;
    ++n.work_calls;
  }
  // The window's figures are kept here, in the drain, beside the run's (a closing scope
  // pays nothing for windows), and only once windows are asked for.
  if (windows_on_) {
    recorded_window_values& w = window_[r.node];
    ++w.calls;
    w.host_total_ticks += elapsed;
    add_window_sample_locked(w.host_ticks, elapsed);
    if (declared) {
      w.flops += r.flops;
      w.bytes += r.bytes;
      ++w.work_calls;
    }
  }
  if (r.event_slot != detail::no_events) pending_.push_back(pending_gpu{r.node, r.event_slot});
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

inline void recorder::add_sample_locked(recorded_series& series, double value) noexcept {
  const bool may_grow = samples_held_ < sample_budget_ || series.samples().size() < min_series_samples;
  if (series.add(value, may_grow)) ++samples_held_;
}

inline void recorder::add_window_sample_locked(recorded_series& series, double value) noexcept {
  const bool may_grow = window_samples_held_ < window_sample_budget_ || series.samples().size() < min_series_samples;
  if (series.add(value, may_grow)) ++window_samples_held_;
}

// Reads every pending pair whose end event has completed, and frees it; never waits.
#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void recorder::resolve_gpu_locked() noexcept {
#if KSCOPE_HAS_CUDA
  if (pending_.empty()) return;
  try {
    // One pool lock to look the pairs up and one to give them back, not two per pair.
    resolve_slots_.resize(pending_.size());
    resolve_pairs_.resize(pending_.size());
    for (std::size_t i = 0; i < pending_.size(); ++i) resolve_slots_[i] = pending_[i].slot;
    events_.pairs_of(resolve_slots_, resolve_pairs_);
    std::size_t kept = 0;
    std::size_t done = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      const pending_gpu p = pending_[i];
      const detail::event_pair pair = resolve_pairs_[i];
      const cudaError_t before = cudaPeekAtLastError();
      float ms = 0;
      // One call when the pair is done: cudaEventElapsedTime itself answers NotReady.
      const cudaError_t status = cudaEventElapsedTime(&ms, pair.start, pair.end);
      if (status == cudaErrorNotReady) {
        if (before == cudaSuccess && cudaPeekAtLastError() != cudaSuccess) cudaGetLastError();
        pending_[kept++] = p;
        continue;
      }
      if (status == cudaSuccess && p.node < nodes_.size()) {
        recorded_node& n = nodes_[p.node];
        const double ns = static_cast<double>(ms) * 1e6;
        add_sample_locked(n.gpu_ns, ns);
        n.gpu_total_ns += ns;
        // In the window in which its events are read: window() waits for them first, so
        // that is the window in which the scope closed (unless it closed meanwhile).
        if (windows_on_) {
          recorded_window_values& w = window_[p.node];
          add_window_sample_locked(w.gpu_ns, ns);
          w.gpu_total_ns += ns;
        }
      } else if (status != cudaSuccess) {
        if (p.node != stale_node) ++gpu_event_errors_;
        // Leave the host program's error state as we found it.
        if (before == cudaSuccess) cudaGetLastError();
      }
      resolve_slots_[done++] = p.slot;
    }
    resolve_slots_.resize(done);
    events_.release_all(resolve_slots_);
    pending_.resize(kept);
  } catch (...) {
  }
#else
  pending_.clear();
#endif
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
