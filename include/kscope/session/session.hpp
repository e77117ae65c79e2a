// kscope/session/session.hpp — the process-wide record of every scope: the call-path tree, the
// samples of each node, and the report built from them.
//
//   KSCOPE_SCOPE("decode");                          // anywhere, any thread
//   auto r = kscope::session::global().report();      // later, off the hot path
//   std::fputs(r.text().c_str(), stdout);
//
// How the hot path stays cheap: a closing scope appends one fixed-size record to a
// ring owned by its thread (no lock, no allocation). The session drains the rings under
// its own lock, at report time or when a ring fills up, and only then touches the tree,
// the per-node reservoirs and the CUDA events. GPU times are read from the events at
// report time (report() waits for events still in flight; a scope's exit never does).
//
// Memory is bounded: each node keeps at most `sample_cap` samples per series (exact
// count, sum, min and max over all calls; a uniform reservoir past the cap), the tree at
// most `max_nodes` nodes (later names go to an "(overflow)" node, with a warning), and
// the CUDA event pool a fixed number of pairs in flight.
#pragma once

#include "../core/config.hpp"
#include "../cupti/collector.hpp"
#include "../device/device.hpp"
#include "../report/rank.hpp"
#include "../report/trace.hpp"
#include "../core/detail/clock.hpp"
#include "detail/context.hpp"
#include "../scope/detail/event_pool.hpp"
#include "../scope/detail/nvtx.hpp"
#include "../scope/detail/thread_state.hpp"
#include "../report/report.hpp"
#include "../core/roofline.hpp"
#include "../core/stats.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#  include <unistd.h>
#endif

namespace kscope {

class session;

namespace detail {

// ---- run-time switches ----------------------------------------------------------------
// -1: not read yet. Reading the environment once, lazily, keeps static initialisation
// order out of the picture.
inline std::atomic<int> enabled_state{-1};
inline std::atomic<bool> nvtx_enabled{true};

inline bool read_enabled_from_environment() noexcept {
  const char* v = std::getenv("KSCOPE");
  const bool on = !(v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 ||
                          std::strcmp(v, "false") == 0));
  int expected = -1;
  enabled_state.compare_exchange_strong(expected, on ? 1 : 0, std::memory_order_relaxed);
  return enabled_state.load(std::memory_order_relaxed) == 1;
}

inline bool enabled() noexcept {
  const int state = enabled_state.load(std::memory_order_relaxed);
  if (KSCOPE_LIKELY(state >= 0)) return state == 1;
  return read_enabled_from_environment();
}

// ---- per-thread record ring --------------------------------------------------------------
inline constexpr std::uint32_t no_events = 0xffffffffu;

struct scope_record {
  node_id node;
  std::uint32_t event_slot;   // no_events when the scope had no stream
  std::int64_t start_ticks;   // detail::ticks(); converted to ns at report time
  std::int64_t end_ticks;
  double flops;               // declared work; NaN when none was declared
  double bytes;
};

// Single producer (the owning thread), consumers serialized by the session's mutex.
class thread_log {
 public:
  static constexpr std::uint32_t capacity = 1024;  // power of two

  explicit thread_log(std::uint32_t thread_index) noexcept : thread_index_(thread_index) {}

  // Producer side. Returns false when the ring is full (the caller drains, then retries).
  bool try_push(const scope_record& r) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) >= capacity) return false;
    records_[head & (capacity - 1)] = r;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Consumer side (session mutex held): visits every published record, then frees them.
  template <class F>
  void drain(F&& visit) {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    for (std::uint64_t i = tail; i != head; ++i) visit(records_[i & (capacity - 1)]);
    tail_.store(head, std::memory_order_release);
  }

  std::uint32_t thread_index() const noexcept { return thread_index_; }

 private:
  std::atomic<std::uint64_t> head_{0};
  std::atomic<std::uint64_t> tail_{0};
  std::uint32_t thread_index_;
  scope_record records_[capacity];
};

// Hands each thread its ring and gives it back to the session when the thread exits.
struct thread_log_owner {
  thread_log* log = nullptr;
  ~thread_log_owner();
};

inline thread_log_owner& this_thread_log_owner() noexcept {
  thread_local thread_log_owner owner;
  return owner;
}

// FNV-1a: names are short; this is cheaper than std::hash's setup and stable.
inline std::uint64_t hash_name(std::string_view s, node_id parent) noexcept {
  std::uint64_t h = 1469598103934665603ull ^ (static_cast<std::uint64_t>(parent) * 0x9E3779B97F4A7C15ull);
  for (unsigned char c : s) { h ^= c; h *= 1099511628211ull; }
  return h;
}

// Samples of one node and series: exact count, sum, min and max over every call, and the
// first `cap` samples kept, then a uniform reservoir (Algorithm R). It is leaner than
// stats.hpp's sample_reservoir (no running variance, no arrival order), because it runs
// once per closed scope when a thread's ring drains, and scopes must stay cheap.
class sample_store {
 public:
  explicit sample_store(std::size_t cap) noexcept : cap_(cap == 0 ? 1 : cap) {}
  void add(double v) noexcept {
    ++count_;
    sum_ += v;
    if (count_ == 1 || v < min_) min_ = v;
    if (count_ == 1 || v > max_) max_ = v;
    if (kept_.size() < cap_) {
      try {
        kept_.push_back(v);
        return;
      } catch (...) {
        cap_ = kept_.size();  // out of memory: sample within what we hold
        if (cap_ == 0) return;
      }
    }
    // A uniform slot in [0, count) by multiply-high (Lemire): a 64-bit division here
    // would cost more than the rest of the scope. Bias ~count/2^64: negligible.
    const std::uint64_t slot = multiply_high(rng_.next(), count_);
    if (slot < cap_) kept_[static_cast<std::size_t>(slot)] = v;
  }
  [[nodiscard]] const std::vector<double>& samples() const noexcept { return kept_; }
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  static std::uint64_t multiply_high(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__SIZEOF_INT128__)
    __extension__ typedef unsigned __int128 u128;  // __extension__: quiet under -Wpedantic
    return static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
#else
    return a % b;
#endif
  }
  [[nodiscard]] double sum() const noexcept { return sum_; }
  [[nodiscard]] double min() const noexcept { return min_; }
  [[nodiscard]] double max() const noexcept { return max_; }
  [[nodiscard]] bool saturated() const noexcept { return count_ > kept_.size(); }

 private:
  std::size_t cap_;
  std::uint64_t count_ = 0;
  double sum_ = 0, min_ = 0, max_ = 0;
  std::vector<double> kept_;
  splitmix64 rng_{0x6b73636f70652d73ull};
};

// Per-thread cache of (parent, name) -> node, so that scopes named at run time find
// their node without the session's lock. Open addressing; grows at half load.
class node_cache {
 public:
  node_id find(node_id parent, std::string_view name, std::uint64_t hash) const noexcept {
    if (slots_.empty()) return invalid;
    for (std::size_t i = hash & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const slot& s = slots_[i];
      if (s.node == invalid) return invalid;
      if (s.hash == hash && s.parent == parent && s.name == name) return s.node;
    }
  }
  void insert(node_id parent, std::string_view name, std::uint64_t hash, node_id node) {
    if ((used_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 64 : slots_.size() * 2);
    for (std::size_t i = hash & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      slot& s = slots_[i];
      if (s.node == invalid) { s = slot{hash, parent, node, std::string(name)}; ++used_; return; }
    }
  }
  void clear() noexcept { slots_.clear(); used_ = 0; }
  static constexpr node_id invalid = 0xffffffffu;

 private:
  struct slot {
    std::uint64_t hash = 0;
    node_id parent = 0;
    node_id node = invalid;
    std::string name;
  };
  void rehash(std::size_t n) {
    std::vector<slot> old = std::move(slots_);
    slots_.assign(n, slot{});
    used_ = 0;
    for (slot& s : old)
      if (s.node != invalid) insert(s.parent, s.name, s.hash, s.node);
  }
  std::vector<slot> slots_;
  std::size_t used_ = 0;
};

inline node_cache& this_thread_node_cache() noexcept {
  thread_local node_cache cache;
  return cache;
}

}  // namespace detail

// The process-wide session. It is created on first use and deliberately never destroyed,
// so scopes still open in other threads at exit, or closed from static destructors, stay
// safe.
class session {
 public:
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  [[nodiscard]] static session& global() noexcept {
    static session* const instance = new session();  // leaked on purpose (see above)
    return *instance;
  }

  // Run-time switch; also set by KSCOPE=0 in the environment. Disabled scopes cost a
  // load and a branch.
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
  static constexpr std::size_t max_nodes = 1u << 16;

  // Builds the report: drains every thread's records, waits for GPU events still in
  // flight, and summarizes each node. Scopes still open are not included.
  [[nodiscard]] session_report report();

  // Forgets all samples (node ids stay valid: call sites cache them).
  void reset() noexcept;

  // The peaks roofline placements use. Without a call, the first report reads the
  // theoretical roofs of device 0 (device.hpp's table); hand it measure_peaks() results
  // to place scopes against the measured roofs as well:
  //   kscope::session::global().set_peaks(kscope::measure_peaks());
  void set_peaks(device_peaks peaks) {
    std::lock_guard<std::mutex> lock(mutex_);
    peaks_ = std::move(peaks);
    have_peaks_ = true;
  }

  // Starts the CUPTI collector (cupti.hpp): every kernel, copy and memset is then
  // attributed to the scope open on the launching thread, and report() adds the per-scope
  // GPU activity and the top-kernels table. Costs about a microsecond per launch. Returns
  // false (with one warning in the report) when CUPTI is missing, owned by another tool
  // (ncu, nsys), or disabled with KSCOPE_CUPTI=0; scopes then keep their CUDA-event times.
  // KSCOPE_CUPTI=1 in the environment starts it with the session.
  //   kscope::session::global().enable_cupti();
  bool enable_cupti(const cupti_options& options = {}) {
    cupti_collector& collector = cupti_collector::global();
    const bool ok = collector.start(options);
    if (!ok) warn(collector.status().message);
    return ok;
  }

  // Writes a Chrome trace / Perfetto JSON file (trace.hpp): the most recent host scope
  // intervals per thread (up to trace_capacity), and the GPU records CUPTI kept, on one
  // time base, with arrows from each scope to the kernels it launched. False (and
  // `error`, when given) if the file cannot be written.
  //   kscope::session::global().write_trace("run.trace.json");
  bool write_trace(const std::string& path, std::string* error = nullptr);

  // Host intervals kept for the trace (default 65 536, the most recent; older ones are
  // counted as overwritten).
  void set_trace_capacity(std::size_t intervals) {
    std::lock_guard<std::mutex> lock(mutex_);
    trace_capacity_ = intervals;
    trace_ring_.clear();
    trace_next_ = 0;
  }

  // A warning shown once in the report (deduplicated), e.g. from the CUPTI collector.
  void warn(std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(warnings_.begin(), warnings_.end(), message) == warnings_.end())
      warnings_.push_back(std::move(message));
  }

  // ---- used by scopes (kscope::scope, kscope::range); not for direct use -------------
  node_id intern(node_id parent, std::string_view name, bool cross_thread = false);
  void log(const detail::scope_record& r) noexcept;
  // The slow path of a closing scope: the thread's ring is full (drain it, then push).
  void log_full(detail::thread_log* log, const detail::scope_record& r) noexcept;
#if KSCOPE_HAS_CUDA
  bool acquire_events(int device, std::uint32_t& slot, detail::event_pair& pair) noexcept {
    if (events_.acquire(device, slot, pair)) return true;
    gpu_timing_skipped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  void release_events(std::uint32_t slot) noexcept { events_.release(slot); }
  void set_event_cap(std::uint32_t pairs) noexcept { events_.set_cap_pairs(pairs); }
#endif
  void retire(detail::thread_log* log) noexcept;
  [[nodiscard]] std::string name_of(node_id id);
  [[nodiscard]] std::string path_of(node_id id);

 private:
  session() {
    detail::tick_origin();  // start the tick calibration span as early as possible
    if (const char* v = std::getenv("KSCOPE_CUPTI"); v && std::strcmp(v, "1") == 0) {
      cupti_collector& collector = cupti_collector::global();
      if (!collector.start()) warnings_.push_back(collector.status().message);
    }
    nodes_.emplace_back(0, "(root)", 0, false, sample_cap_);
  }

  struct node_data {
    node_data(node_id parent_, std::string name_, std::uint32_t depth_, bool cross_thread_, std::size_t cap)
        : parent(parent_), name(std::move(name_)), depth(depth_), cross_thread(cross_thread_),
          host_ticks(cap), gpu_ns(cap) {}
    node_id parent;
    std::string name;
    std::uint32_t depth;
    bool cross_thread;
    std::vector<node_id> children;
    std::uint64_t calls = 0;
    double host_total_ticks = 0;  // host times stay in ticks until a report converts them
    detail::sample_store host_ticks;
    detail::sample_store gpu_ns;
    double gpu_total_ns = 0;
    double flops = 0, bytes = 0;
    std::uint64_t work_calls = 0;
    std::map<std::pair<std::string, std::string>, std::uint64_t> tags;
  };

  struct pending_gpu {
    node_id node;
    std::uint32_t slot;
  };

  detail::thread_log* this_thread_log() noexcept;
  void drain_all_locked();
  void drain_locked(detail::thread_log& log);
  void resolve_gpu_locked(bool wait) noexcept;
  void fill_context_locked(report_context& context);

 public:
  // Tags are rare and carry strings, so they go to the session at once (one lock).
  void add_tag(node_id node, std::string_view key, std::string_view value) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (node >= nodes_.size()) return;
    auto& count = nodes_[node].tags[{std::string(key), std::string(value)}];
    ++count;
  }

 private:
  std::mutex mutex_;
  std::vector<node_data> nodes_;  // index = node_id; guarded by mutex_
  std::map<std::pair<node_id, std::string>, node_id> index_;
  std::vector<detail::thread_log*> logs_;
  std::vector<pending_gpu> pending_;
#if KSCOPE_HAS_CUDA
  std::vector<std::uint32_t> resolve_slots_;       // scratch of resolve_gpu_locked
  std::vector<detail::event_pair> resolve_pairs_;
#endif
  std::vector<std::string> warnings_;
  std::size_t sample_cap_ = 10000;
  struct trace_entry {
    node_id node;
    std::uint32_t thread_index;
    std::int64_t start_ticks, end_ticks;
  };
  std::vector<trace_entry> trace_ring_;  // grows to trace_capacity_, then wraps
  std::size_t trace_capacity_ = 65536;
  std::size_t trace_next_ = 0;
  std::uint64_t trace_overwritten_ = 0;
  device_peaks peaks_;
  bool have_peaks_ = false;
  node_id overflow_node_ = detail::node_cache::invalid;
  std::atomic<std::uint64_t> gpu_timing_skipped_{0};
  std::uint64_t gpu_event_errors_ = 0;
#if KSCOPE_HAS_CUDA
  detail::event_pool events_;
#endif
};

// ---- implementation ------------------------------------------------------------------

namespace detail {
inline thread_log_owner::~thread_log_owner() {
  if (!log) return;
  this_thread_state().scope_log = nullptr;  // trivially destructible: still valid here
  session::global().retire(log);
}
}  // namespace detail

inline node_id session::intern(node_id parent, std::string_view name, bool cross_thread) {
  std::string key;
  key.reserve(name.size() + 1);
  if (cross_thread) key += '\x01';  // a range and a scope of the same name stay apart
  key.append(name.data(), name.size());
  std::lock_guard<std::mutex> lock(mutex_);
  if (parent >= nodes_.size()) parent = detail::root_node;
  const auto found = index_.find({parent, key});
  if (found != index_.end()) return found->second;
  if (nodes_.size() >= max_nodes) {
    if (overflow_node_ == detail::node_cache::invalid) {
      overflow_node_ = static_cast<node_id>(nodes_.size());
      nodes_.emplace_back(detail::root_node, "(overflow)", 1, false, sample_cap_);
      nodes_[detail::root_node].children.push_back(overflow_node_);
      warnings_.push_back("more than " + std::to_string(max_nodes) +
                          " call-path nodes: further scopes are counted under (overflow)");
    }
    return overflow_node_;
  }
  const node_id id = static_cast<node_id>(nodes_.size());
  nodes_.emplace_back(parent, std::string(name), nodes_[parent].depth + 1, cross_thread, sample_cap_);
  nodes_[parent].children.push_back(id);
  index_.emplace(std::make_pair(parent, std::move(key)), id);
  return id;
}

inline detail::thread_log* session::this_thread_log() noexcept {
  detail::thread_log_owner& owner = detail::this_thread_log_owner();
  if (KSCOPE_LIKELY(owner.log != nullptr)) return owner.log;
  auto* log = new (std::nothrow) detail::thread_log(detail::this_thread_state().thread_index);
  if (!log) return nullptr;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    logs_.push_back(log);
  } catch (...) {
    delete log;
    return nullptr;
  }
  owner.log = log;
  detail::this_thread_state().scope_log = log;
  return log;
}

inline void session::log(const detail::scope_record& r) noexcept {
  detail::thread_log* log = this_thread_log();
  if (!log) return;
  if (KSCOPE_LIKELY(log->try_push(r))) return;
  log_full(log, r);
}

inline void session::log_full(detail::thread_log* log, const detail::scope_record& r) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    drain_locked(*log);
    // A full ring is also the moment to recycle finished event pairs, without waiting.
    resolve_gpu_locked(false);
  } catch (...) {
  }
  log->try_push(r);
}

inline void session::retire(detail::thread_log* log) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    drain_locked(*log);
    logs_.erase(std::remove(logs_.begin(), logs_.end(), log), logs_.end());
  } catch (...) {
  }
  delete log;
}

inline void session::drain_all_locked() {
  for (detail::thread_log* log : logs_) drain_locked(*log);
}

inline void session::drain_locked(detail::thread_log& log) {
  const std::uint32_t thread_index = log.thread_index();
  log.drain([this, thread_index](const detail::scope_record& r) {
    if (r.node >= nodes_.size()) return;
    if (trace_capacity_ > 0) {
      const trace_entry e{r.node, thread_index, r.start_ticks, r.end_ticks};
      if (trace_ring_.size() < trace_capacity_) {
        trace_ring_.push_back(e);
      } else {
        trace_ring_[trace_next_] = e;
        trace_next_ = (trace_next_ + 1) % trace_capacity_;
        ++trace_overwritten_;
      }
    }
    node_data& n = nodes_[r.node];
    const double elapsed = static_cast<double>(r.end_ticks - r.start_ticks);
    ++n.calls;
    n.host_total_ticks += elapsed;
    n.host_ticks.add(elapsed);
    if (r.flops == r.flops) {  // not NaN: work was declared
      n.flops += r.flops;
      n.bytes += r.bytes;
      ++n.work_calls;
    }
    if (r.event_slot != detail::no_events) pending_.push_back(pending_gpu{r.node, r.event_slot});
  });
}

inline void session::resolve_gpu_locked(bool wait) noexcept {
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
      cudaError_t status = cudaEventElapsedTime(&ms, pair.start, pair.end);
      if (status == cudaErrorNotReady && wait) {
        status = cudaEventSynchronize(pair.end);
        if (status == cudaSuccess) status = cudaEventElapsedTime(&ms, pair.start, pair.end);
      }
      if (status == cudaErrorNotReady) {
        if (before == cudaSuccess && cudaPeekAtLastError() != cudaSuccess) cudaGetLastError();
        pending_[kept++] = p;
        continue;
      }
      if (status == cudaSuccess && p.node < nodes_.size()) {
        node_data& n = nodes_[p.node];
        const double ns = static_cast<double>(ms) * 1e6;
        n.gpu_ns.add(ns);
        n.gpu_total_ns += ns;
      } else if (status != cudaSuccess) {
        ++gpu_event_errors_;
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
  (void)wait;
  pending_.clear();
#endif
}

inline std::string session::name_of(node_id id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return id < nodes_.size() ? nodes_[id].name : std::string();
}

inline std::string session::path_of(node_id id) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string path;
  while (id != detail::root_node && id < nodes_.size()) {
    path = path.empty() ? nodes_[id].name : nodes_[id].name + "/" + path;
    id = nodes_[id].parent;
  }
  return path;
}

inline void session::fill_context_locked(report_context& context) {
  char host[256] = {0};
#if defined(__unix__) || defined(__APPLE__)
  if (gethostname(host, sizeof host - 1) == 0) context.host_name = host;
  context.process_id = static_cast<long long>(getpid());
#endif
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
#if defined(_WIN32)
  gmtime_s(&utc, &now);
#else
  gmtime_r(&now, &utc);
#endif
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  context.timestamp_utc = stamp;
  detail::describe_devices(context);
  if (const std::optional<int> rank = current_rank()) context.rank = *rank;
  if (!context.devices.empty()) {
    // Theoretical roofs of every device, so a multi-GPU report can be read per device.
    std::string peaks;
    detail::json_writer w(peaks);
    w.begin_array();
    for (std::size_t d = 0; d < context.devices.size(); ++d)
      write_json(w, theoretical_peaks(query_device(static_cast<int>(d))));
    w.end_array();
    context.peaks_json = std::move(peaks);
  }
  if (!have_peaks_ && !context.devices.empty()) {
    peaks_ = theoretical_peaks(query_device(0));
    have_peaks_ = true;
  }
  if (have_peaks_ && peaks_.device.present) {
    context.roofs = detail::describe_roofs(peaks_);
    context.roof_lines = roof_lines(peaks_);
  }
}

inline session_report session::report() {
  session_report out;
  // CUPTI delivers its buffers through callbacks that must not wait on our lock: flush
  // before taking it.
  cupti_collector& collector = cupti_collector::global();
  cupti_snapshot gpu;
  const bool have_gpu = collector.status().state != cupti_state::not_started;
  if (have_gpu) {
    if (collector.running()) collector.flush();
    gpu = collector.snapshot(50);
    out.cupti_status = gpu.status.message;
    out.top_kernels = gpu.activity.top_kernels;
    out.cupti_counters = gpu.activity.counters;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  drain_all_locked();
  resolve_gpu_locked(true);
  const detail::tick_map clock = detail::calibrate_ticks();
  std::vector<double> host_ns;
  fill_context_locked(out.context);
  out.sample_cap = sample_cap_;
  out.gpu_timing_skipped = gpu_timing_skipped_.load(std::memory_order_relaxed);
  out.warnings = warnings_;
  if (gpu_event_errors_)
    out.warnings.push_back(std::to_string(gpu_event_errors_) +
                           " GPU scope timings were lost to CUDA event errors");
  for (const std::string& w : gpu.warnings)
    if (std::find(out.warnings.begin(), out.warnings.end(), w) == out.warnings.end()) out.warnings.push_back(w);

  // Which nodes have data in their subtree: a node is listed if it or a descendant ran.
  std::vector<char> listed(nodes_.size(), 0);
  for (std::size_t id = nodes_.size(); id-- > 1;) {
    if (nodes_[id].calls > 0 || gpu.activity.find(static_cast<node_id>(id))) listed[id] = 1;
    if (listed[id]) listed[nodes_[id].parent] = 1;
  }
  // Depth-first, children in creation order.
  std::vector<std::pair<node_id, std::string>> stack;
  const auto& top = nodes_[detail::root_node].children;
  for (auto it = top.rbegin(); it != top.rend(); ++it) stack.emplace_back(*it, std::string());
  while (!stack.empty()) {
    const node_id id = stack.back().first;
    const std::string parent_path = std::move(stack.back().second);
    stack.pop_back();
    if (!listed[id]) continue;
    const node_data& n = nodes_[id];
    scope_report s;
    s.id = id;
    s.parent = n.parent;
    s.name = n.name;
    s.path = parent_path.empty() ? n.name : parent_path + "/" + n.name;
    s.depth = n.depth;
    s.cross_thread = n.cross_thread;
    s.calls = n.calls;
    stats_options options;
    // Warm-up detection needs the samples in call order and enough of them; a phase
    // that ran a handful of times is summarized whole.
    options.detect_warmup = n.calls >= 10 && !n.host_ticks.saturated();
    host_ns.assign(n.host_ticks.samples().begin(), n.host_ticks.samples().end());
    for (double& v : host_ns) v = clock.duration_ns(v);
    s.host_ns = summarize(host_ns, options);
    s.host_inclusive_ns = clock.duration_ns(n.host_total_ticks);
    double children_ticks = 0;
    for (node_id c : n.children)
      if (!nodes_[c].cross_thread) children_ticks += nodes_[c].host_total_ticks;
    s.host_exclusive_ns = clock.duration_ns(n.host_total_ticks - children_ticks);
    if (n.parent != detail::root_node && nodes_[n.parent].host_total_ticks > 0)
      s.share_of_parent = n.host_total_ticks / nodes_[n.parent].host_total_ticks;
    s.gpu_calls = n.gpu_ns.count();
    if (s.gpu_calls) {
      stats_options gpu_options;
      gpu_options.detect_warmup = s.gpu_calls >= 10 && !n.gpu_ns.saturated();
      s.gpu_ns = summarize(n.gpu_ns.samples(), gpu_options);
    }
    s.gpu_total_ns = n.gpu_total_ns;
    s.declared = work{n.flops, n.bytes};
    s.work_calls = n.work_calls;
    s.samples_kept = n.host_ticks.samples().size();
    s.samples_capped = n.host_ticks.saturated();
    for (const auto& t : n.tags) s.tags.push_back(tag_count{t.first.first, t.first.second, t.second});
    if (n.host_ticks.saturated()) {  // the reservoir's extremes are exact over all calls
      s.host_ns.min = clock.duration_ns(n.host_ticks.min());
      s.host_ns.max = clock.duration_ns(n.host_ticks.max());
    }
    if (have_peaks_ && peaks_.device.present) detail::place_scope(s, peaks_);
    if (const node_gpu_activity* a = gpu.activity.find(id)) s.gpu_activity = *a;
    out.scopes.push_back(std::move(s));
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it)
      stack.emplace_back(*it, out.scopes.back().path);
  }
  // Work launched with no scope open is reported too, never dropped.
  if (const node_gpu_activity* a = gpu.activity.find(unscoped_node)) {
    scope_report s;
    s.id = unscoped_node;
    s.name = s.path = unscoped_node_name;
    s.depth = 1;
    s.gpu_activity = *a;
    out.scopes.push_back(std::move(s));
  }
  return out;
}

inline bool session::write_trace(const std::string& path, std::string* error) {
  cupti_collector& collector = cupti_collector::global();
  std::vector<gpu_activity_event> gpu_events;
  if (collector.status().state != cupti_state::not_started) {
    if (collector.running()) collector.flush();
    gpu_events = collector.snapshot(0).activity.recent;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  drain_all_locked();
  const detail::tick_map clock = detail::calibrate_ticks();
  std::vector<host_interval> host;
  host.reserve(trace_ring_.size());
  const std::size_t n = trace_ring_.size();
  const std::size_t first = n < trace_capacity_ ? 0 : trace_next_;  // oldest first
  for (std::size_t i = 0; i < n; ++i) {
    const trace_entry& e = trace_ring_[(first + i) % n];
    host.push_back(host_interval{nodes_[e.node].name, e.node, e.thread_index, clock.to_ns(e.start_ticks),
                                 clock.to_ns(e.end_ticks)});
  }
  return write_chrome_trace(path, host, gpu_events, trace_options{}, error);
}

inline void session::reset() noexcept {
  try {
    cupti_collector& collector = cupti_collector::global();
    if (collector.status().state != cupti_state::not_started) {
      if (collector.running()) collector.flush();
      collector.reset();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    drain_all_locked();
    resolve_gpu_locked(true);
    for (node_data& n : nodes_) {
      n.calls = 0;
      n.host_total_ticks = 0;
      n.host_ticks = detail::sample_store(sample_cap_);
      n.gpu_ns = detail::sample_store(sample_cap_);
      n.gpu_total_ns = 0;
      n.flops = n.bytes = 0;
      n.work_calls = 0;
      n.tags.clear();
    }
    warnings_.clear();
    trace_ring_.clear();
    trace_next_ = 0;
    trace_overwritten_ = 0;
    gpu_event_errors_ = 0;
    gpu_timing_skipped_.store(0, std::memory_order_relaxed);
  } catch (...) {
  }
}

}  // namespace kscope
